/* SPDX-License-Identifier: MIT */
/* nstar_csv.c — N* of one series of `tbneck export windows` CSV, with every
 * figure of the estimate and its knee test: a tool for studying a capture
 * the sweep (bench/nstar/sweep.py) flags, without the rest of the pipeline.
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
    char line[1024];
    if (!l || !t || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "%s: empty\n", path);
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        /* tier,server,start_ns,width_ns,load,completions,throughput,work_units,norm_throughput,.. */
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
            if (!l || !t)
                return 1;
        }
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
    free(l);
    free(t);
    return 0;
}
