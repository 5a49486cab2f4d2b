/* SPDX-License-Identifier: MIT */
/* nstar_csv.c — N* of one series of `tbneck export windows` CSV, with every
 * figure of the estimate and its knee test, and the throughput levels over
 * time: a tool for studying a capture the sweep (bench/nstar/sweep.py)
 * flags, without the rest of the pipeline.
 *
 *   nstar_csv FILE.csv [SERVER|*] [--hint UNITS_PER_S] [--waits] [--assume-knee]
 *
 * Exit status 0, 1 when the file cannot be read, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "correlate.h"

int main(int argc, char **argv)
{
    const char *path = NULL, *server = "*";
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hint") && i + 1 < argc)
            o.slope_hint = atof(argv[++i]);
        else if (!strcmp(argv[i], "--waits"))
            o.waits_downstream = true;
        else if (!strcmp(argv[i], "--assume-knee"))
            o.assume_knee = true;
        else if (!path)
            path = argv[i];
        else
            server = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: nstar_csv FILE.csv [SERVER|*] [--hint U] [--waits] "
                        "[--assume-knee]\n");
        return 2;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t n = 0, cap = 1024;
    double *l = malloc(cap * sizeof *l), *t = malloc(cap * sizeof *t);
    int64_t *st = malloc(cap * sizeof *st), width = 0;
    char line[1024];
    if (!l || !t || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "%s: empty\n", path);
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        /* tier,server,start_ns,width_ns,load,completions,throughput,work_units,
         * norm_throughput,... */
        char *fld[12];
        int k = 0;
        for (char *p = line; k < 12 && p; k++) {
            fld[k] = p;
            p = strchr(p, ',');
            if (p)
                *p++ = '\0';
        }
        if (k < 9 || strcmp(fld[1], server) != 0)
            continue;
        if (n == cap) {
            cap *= 2;
            l = realloc(l, cap * sizeof *l);
            t = realloc(t, cap * sizeof *t);
            st = realloc(st, cap * sizeof *st);
            if (!l || !t || !st)
                return 1;
        }
        st[n] = atoll(fld[2]);
        width = atoll(fld[3]);
        l[n] = atof(fld[4]);
        t[n] = atof(fld[8]);
        n++;
    }
    fclose(f);
    struct tb_nstar ns;
    if (tb_nstar_estimate(l, t, n, &o, &ns) != 0)
        return 1;
    char why[256];
    tb_nstar_reason(&ns, why, sizeof why);
    printf("windows %zu with load %zu\nn_star %.4f\nn_star_fit %.4f (sharpness %g)\n"
           "tp_max %.2f\nslope %.3f\ndelta0 %.3f\nfit_tp_max %.2f\nbins %u\ndisagree %d\n"
           "why %s (%d)\ncandidate %.4f ratio %.4f ucb %.4f beyond %zu load_top %.3f\n%s\n",
           n, ns.samples, ns.n_star, ns.n_star_fit, ns.fit_sharpness, ns.tp_max, ns.slope,
           ns.delta0, ns.fit_tp_max, ns.bins_used, ns.disagree, tb_nstar_why_status(ns.why),
           (int)ns.why, ns.candidate, ns.knee_ratio, ns.knee_ucb, ns.beyond, ns.load_top, why);
    /* Throughput levels over time, by the rule of this estimate. */
    struct tb_window *w = calloc(n ? n : 1, sizeof *w);
    if (!w)
        return 1;
    for (size_t i = 0; i < n; i++) {
        w[i].start_ns = st[i];
        w[i].width_ns = width;
        w[i].load = l[i];
        w[i].norm_throughput = t[i];
        w[i].work_units = t[i] * (double)width / 1e9;
        w[i].completions = (uint32_t)w[i].work_units;
    }
    struct tb_congestion rule;
    tb_congestion_from_nstar(&rule, &ns, o.freeze_frac, w, n);
    double lv[8];
    uint32_t nl = 0;
    struct tb_level_span *sp = NULL;
    size_t nsp = 0;
    if (tb_levels_over_time(w, n, &rule, 8, lv, &nl, &sp, &nsp) == 0) {
        printf("levels %u:", nl);
        for (uint32_t i = 0; i < nl; i++)
            printf(" %.1f", lv[i]);
        printf("\n");
        for (size_t i = 0; i < nsp; i++)
            printf("  span level %u %.3f s .. %.3f s, %u windows, %.1f\n", sp[i].level,
                   (double)(sp[i].start_ns - st[0]) / 1e9, (double)(sp[i].end_ns - st[0]) / 1e9,
                   sp[i].windows, sp[i].throughput);
    }
    free(sp);
    free(w);
    free(st);
    free(l);
    free(t);
    return 0;
}
