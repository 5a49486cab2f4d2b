/* SPDX-License-Identifier: MIT */
/* plot_diag.c — a diagnosis as pictures: per tier the self and waiting load
 * stacked over time with the front tier's congested windows shaded and each
 * window's root marked by cause (gnuplot), and the wait-for graph of servers,
 * calls and pools with the root filled (Graphviz dot). */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "diagnose.h"
#include "critpath.h"

/* One colour per cause, the same in both pictures. */
static const char *cause_color(enum tb_cause c)
{
    static const char *const col[TB_CAUSE_COUNT] = {"#999999", "#cc3311", "#0077bb",
                                                    "#ee7733", "#aa3377", "#009988"};
    return (unsigned)c < TB_CAUSE_COUNT ? col[c] : col[0];
}

static const char *tier_name(const struct tb_catalog *cat, uint32_t t)
{
    const struct tb_tier_info *ti = t ? tb_catalog_tier_get(cat, t) : NULL;
    return ti ? ti->name : "?";
}

static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n' && *s != '\r')
            fputc(*s, f);
    }
    fputc('\'', f);
}

int tb_plot_diag_script(FILE *f, const struct tb_diagnosis *d, const struct tb_catalog *cat,
                        const char *path, enum tb_plot_fmt fmt)
{
    double wsec = (double)d->width_ns / 1e9;
    /* Columns: 1 time (s, window middle), 2 front congested (0/1), 3 root's
     * panel (tier index, -1 none), 4 cause, then per tier: self, self+wait. */
    fputs("$D << EOD\n", f);
    for (size_t k = 0; k < d->nwin; k++) {
        int panel = -1;
        if (d->root_server[k]) {
            const struct tb_server_info *si = tb_catalog_server_get(cat, d->root_server[k]);
            for (size_t i = 0; si && i < d->ntiers; i++)
                if (d->tiers[i].tier == si->tier)
                    panel = (int)i;
        }
        fprintf(f, "%.6f %d %d %d", (double)k * wsec + wsec / 2, d->front_congested[k] ? 1 : 0,
                panel, (int)d->root_cause[k]);
        for (size_t i = 0; i < d->ntiers; i++)
            fprintf(f, " %.9g %.9g", d->self[i * d->nwin + k],
                    d->self[i * d->nwin + k] + d->wait[i * d->nwin + k]);
        fputc('\n', f);
    }
    fputs("EOD\n", f);
    size_t np = d->ntiers ? d->ntiers : 1;
    int h = (int)(260 * np + 120);
    if (fmt == TB_PLOT_SVG)
        fprintf(f, "set terminal svg size 1600,%d dynamic noenhanced font 'Sans,13' background "
                   "'white'\n",
                h);
    else
        fprintf(f, "set terminal pngcairo size 1600,%d noenhanced font 'Sans,12' background "
                   "'white'\n",
                h);
    fputs("set output ", f);
    gp_str(f, path);
    fputc('\n', f);
    char title[400], sb[TB_ADDR_STRLEN] = "every server";
    const struct tb_diag_verdict *v = &d->verdict;
    const struct tb_server_info *vs = v->server ? tb_catalog_server_get(cat, v->server) : NULL;
    if (vs)
        tb_addr_fmt(&vs->addr, sb, sizeof sb);
    if (v->cause == TB_CAUSE_NONE)
        snprintf(title, sizeof title, "diagnose: no root cause (%s)", v->resource);
    else
        snprintf(title, sizeof title, "diagnose: %s at %s %s, %.0f%% of %s's congested time",
                 tb_cause_name(v->cause), tier_name(cat, v->tier), sb, 100 * v->share,
                 tier_name(cat, d->front));
    fputs("set multiplot title ", f);
    gp_str(f, title);
    fputs(" font ',13'\n", f);
    fputs("set grid lc rgb '#dddddd'\nset border lc rgb '#444444'\n"
          "set key tmargin left horizontal noopaque nobox samplen 2 width 2\n"
          "set lmargin 12\nset rmargin 3\nset style fill solid 0.55 noborder\n",
          f);
    fprintf(f, "set xrange [0:%.6f]\n", (double)d->nwin * wsec);
    double top = 0.94, ph = 0.94 / (double)np;
    for (size_t i = 0; i < d->ntiers; i++) {
        const struct tb_diag_row *r = &d->tiers[i];
        int cs = 5 + 2 * (int)i, cw = cs + 1;
        fprintf(f, "set origin 0,%.4f\nset size 1,%.4f\n", top - ph * (double)(i + 1), ph);
        char yl[160];
        snprintf(yl, sizeof yl, "%s (%s)", tier_name(cat, r->tier), tb_diag_state_name(r->state));
        fputs("set ylabel ", f);
        gp_str(f, yl);
        fputc('\n', f);
        fputs(i + 1 == d->ntiers ? "set format x '%g'\nset xlabel 'time (s)'\n"
                                 : "set format x ''\nset xlabel ''\n",
              f);
        /* Congested windows of the front tier shaded; the root's windows
         * marked in its own panel by a strip coloured by cause. */
        double ymax = 0;
        for (size_t k = 0; k < d->nwin; k++)
            ymax = fmax(ymax, d->self[i * d->nwin + k] + d->wait[i * d->nwin + k]);
        ymax = ymax > 0 ? ymax * 1.08 : 1;
        fprintf(f, "set yrange [0:%.9g]\n", ymax);
        fprintf(f, "plot $D using 1:($2==1?%.9g:1/0):(%.6f) with boxes "
                   "lc rgb '#f4e4d4' title 'front congested', "
                   "'' using 1:%d with filledcurves x1 lc rgb '#4477aa' title 'self', "
                   "'' using 1:%d:%d with filledcurves lc rgb '#bbccee' title 'waiting'",
                ymax, wsec, cs, cs, cw);
        for (int c = 1; c < TB_CAUSE_COUNT; c++)
            fprintf(f, ", '' using 1:($3==%zu && $4==%d ? 0 : 1/0) with points pt 5 ps 0.8 "
                       "lc rgb '%s' title 'root: %s'",
                    i, c, cause_color((enum tb_cause)c), tb_cause_name((enum tb_cause)c));
        fputc('\n', f);
    }
    fputs("unset multiplot\nset output\n", f);
    return ferror(f) ? TB_E_IO : 0;
}

/* A DOT double-quoted string. */
static void dot_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*s, f);
    }
    fputc('"', f);
}

int tb_plot_diag_dot(FILE *f, const struct tb_diagnosis *d, const struct tb_catalog *cat)
{
    char b[TB_ADDR_STRLEN], lab[640];
    fputs("digraph waitfor {\n  rankdir=LR; compound=true; newrank=true; nodesep=0.3;\n"
          "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
          "fontname=\"Sans\", fontsize=11];\n  edge [fontname=\"Sans\", fontsize=10];\n",
          f);
    snprintf(lab, sizeof lab, "wait-for graph (edges: calls waited on in the front tier's "
                              "congested windows)\n%s",
             d->verdict.evidence);
    fputs("  labelloc=t; label=", f);
    dot_str(f, lab);
    fputs(";\n", f);
    for (size_t i = 0; i < d->ntiers; i++) {
        const struct tb_diag_row *t = &d->tiers[i];
        fprintf(f, "  subgraph cluster_t%u {\n    label=", t->tier);
        snprintf(lab, sizeof lab, "%s (%s)", tier_name(cat, t->tier),
                 tb_diag_state_name(t->state));
        dot_str(f, lab);
        fprintf(f, "; style=rounded; color=\"%s\";\n",
                t->state == TB_DIAG_ROOT ? "#cc3311" : "#888888");
        /* An anchor for edges into the tier as a whole. */
        fprintf(f, "    t%u [shape=point, style=invis, width=0];\n", t->tier);
        for (size_t j = 0; j < d->nservers; j++) {
            const struct tb_diag_row *s = &d->servers[j];
            if (s->tier != t->tier)
                continue;
            const struct tb_server_info *si = tb_catalog_server_get(cat, s->server);
            bool root = d->verdict.cause != TB_CAUSE_NONE && d->verdict.tier == s->tier &&
                        (!d->verdict.server || d->verdict.server == s->server);
            snprintf(lab, sizeof lab, "%s\nself %.2f  wait %.2f\nstretch %.1f",
                     si ? tb_addr_fmt(&si->addr, b, sizeof b) : "?", s->self_load_mean,
                     s->wait_load_mean, isfinite(s->stretch) ? s->stretch : 0);
            if (root) {
                size_t n = strlen(lab);
                snprintf(lab + n, sizeof lab - n, "\nROOT: %s", tb_cause_name(d->verdict.cause));
            }
            fprintf(f, "    s%u [label=", s->server);
            dot_str(f, lab);
            if (root)
                fprintf(f, ", fillcolor=\"%s\", fontcolor=\"#ffffff\"",
                        cause_color(d->verdict.cause));
            fputs("];\n", f);
        }
        fputs("  }\n", f);
    }
    for (size_t i = 0; i < d->npools; i++) {
        const struct tb_diag_pool *p = &d->pools[i];
        bool full = p->full_fraction >= 0.2 && p->pooled;
        bool pool_root = d->verdict.cause == TB_CAUSE_POOL && d->verdict.tier == p->from_tier &&
                         (!d->verdict.server || d->verdict.server == p->from_server);
        if (p->pooled)
            snprintf(lab, sizeof lab, "waits %.2f\n%u conns, max %u busy\nfull %.0f%%",
                     p->calls_mean, p->connections, p->max_concurrent, 100 * p->full_fraction);
        else
            snprintf(lab, sizeof lab, "waits %.2f\nmax %u calls", p->calls_mean,
                     p->max_concurrent);
        fprintf(f, "  s%u -> t%u [lhead=cluster_t%u, label=", p->from_server, p->to_tier,
                p->to_tier);
        dot_str(f, lab);
        double pw = 1 + 4 * (p->calls_mean > 0 ? log10(1 + p->calls_mean) : 0);
        fprintf(f, ", penwidth=%.2f, color=\"%s\"%s];\n", pw,
                pool_root ? cause_color(TB_CAUSE_POOL) : full ? "#ee7733" : "#555555",
                pool_root ? ", style=bold, fontcolor=\"#aa3377\"" : "");
    }
    fputs("}\n", f);
    return ferror(f) ? TB_E_IO : 0;
}

void tb_plot_graph_path(const char *path, char *buf, size_t len)
{
    size_t n = strlen(path);
    const char *dot = n > 4 ? path + n - 4 : path + n;
    snprintf(buf, len, "%.*s-graph%s", (int)(dot - path), path, dot);
}

struct diag_job {
    const struct tb_diagnosis *d;
    const struct tb_catalog *cat;
    const char *path;
    enum tb_plot_fmt fmt;
};

static int write_script(FILE *f, void *ud)
{
    const struct diag_job *j = ud;
    return tb_plot_diag_script(f, j->d, j->cat, j->path, j->fmt);
}

static int write_dot(FILE *f, void *ud)
{
    const struct diag_job *j = ud;
    return tb_plot_diag_dot(f, j->d, j->cat);
}

static int write_critpath(FILE *f, void *ud)
{
    const struct diag_job *j = ud;
    return tb_plot_critpath_script(f, &j->d->cp, j->cat, j->path, j->fmt);
}

void tb_plot_path_suffix(const char *path, const char *suffix, char *buf, size_t len)
{
    const char *dot = strrchr(path, '.');
    size_t stem = dot ? (size_t)(dot - path) : strlen(path);
    snprintf(buf, len, "%.*s%s%s", (int)stem, path, suffix, dot ? dot : "");
}

int tb_plot_critpath_script(FILE *f, const struct tb_critpath *cp, const struct tb_catalog *cat,
                            const char *path, enum tb_plot_fmt fmt)
{
    size_t ncls = cp->ncls < 8 ? cp->ncls : 8;
    /* Components with a share somewhere, as columns; a row per class and
     * statistic (mean, p95, p99), in percent. */
    bool *use = calloc(cp->ncomp + 1, sizeof *use);
    if (!use)
        return TB_E_NOMEM;
    for (size_t k = 0; k < ncls; k++)
        for (size_t c = 0; c < cp->ncomp; c++)
            use[c] |= cp->cls[k].mean[c] >= 0.001 || cp->cls[k].p95[c] >= 0.001 ||
                      cp->cls[k].p99[c] >= 0.001;
    fputs("$D << EOD\n\"row\"", f);
    size_t ncol = 0;
    for (size_t c = 0; c < cp->ncomp; c++) {
        if (!use[c])
            continue;
        ncol++;
        fputc(' ', f);
        char name[200];
        if (c + 1 == cp->ncomp)
            snprintf(name, sizeof name, "wire");
        else
            snprintf(name, sizeof name, "%s %s", tier_name(cat, cp->tiers[c / TB_CP_KINDS]),
                     tb_cp_kind_name((unsigned)(c % TB_CP_KINDS)));
        fputc('"', f);
        for (const char *p = name; *p; p++)
            if (*p != '"' && *p != '\n')
                fputc(*p, f);
        fputc('"', f);
    }
    fputc('\n', f);
    for (size_t k = 0; k < ncls; k++) {
        const struct tb_cp_class *x = &cp->cls[k];
        const char *cname = x->class_id ? tb_catalog_class_text(cat, x->class_id) : "all";
        const double *v[3] = {x->mean, x->p95, x->p99};
        static const char *const stat[3] = {"mean", "p95", "p99"};
        for (int q = 0; q < 3; q++) {
            fprintf(f, "\"%.40s %s\"", cname, stat[q]);
            for (size_t c = 0; c < cp->ncomp; c++)
                if (use[c])
                    fprintf(f, " %.6f", 100 * v[q][c]);
            fputc('\n', f);
        }
    }
    fputs("EOD\n", f);
    free(use);
    int h = 520;
    if (fmt == TB_PLOT_SVG)
        fprintf(f, "set terminal svg size 1400,%d dynamic noenhanced font 'Sans,12' background "
                   "'#ffffff'\n", h);
    else
        fprintf(f, "set terminal pngcairo size 1400,%d noenhanced font 'Sans,11' background "
                   "'#ffffff'\n", h);
    fputs("set output ", f);
    gp_str(f, path);
    fprintf(f, "\nset title 'critical path of %s requests: share of response time per class "
               "(mean; within the p95 and p99 requests)'\n",
            tier_name(cat, cp->front));
    fputs("set style data histograms\nset style histogram rowstacked\nset boxwidth 0.75\n"
          "set style fill solid 0.85 border -1\nset yrange [0:100]\nset ylabel '% of response "
          "time'\nset xtics rotate by -30 left\nset key outside right top\nset grid ytics\n",
          f);
    if (ncol)
        fprintf(f, "plot for [i=2:%zu] $D using i:xtic(1) title columnheader(i)\n", ncol + 1);
    fputs("set output\n", f);
    return ferror(f) ? TB_E_IO : 0;
}

int tb_plot_diagnosis(const char *path, const struct tb_catalog *cat,
                      const struct tb_diagnosis *d, char *errbuf, size_t errlen)
{
    int fmt = tb_plot_format(path);
    if (fmt < 0) {
        snprintf(errbuf, errlen, "the file name must end in .png or .svg");
        return TB_E_INVAL;
    }
    if (!d->nwin || !d->ntiers) {
        snprintf(errbuf, errlen, "nothing to draw: no requests in the range");
        return TB_E_NOTFOUND;
    }
    struct diag_job j = {d, cat, path, (enum tb_plot_fmt)fmt};
    int rc = tb_plot_run("gnuplot", NULL, 0, write_script, &j, path, errbuf, errlen);
    if (rc)
        return rc;
    char gpath[4096];
    tb_plot_graph_path(path, gpath, sizeof gpath);
    const char *args[] = {fmt == TB_PLOT_SVG ? "-Tsvg" : "-Tpng", "-o", gpath};
    rc = tb_plot_run("dot", args, TB_ARRAY_SIZE(args), write_dot, &j, gpath, errbuf, errlen);
    if (rc || !d->have_cp)
        return rc;
    char cpath[4096];
    tb_plot_path_suffix(path, "-path", cpath, sizeof cpath);
    struct diag_job jc = {d, cat, cpath, (enum tb_plot_fmt)fmt};
    return tb_plot_run("gnuplot", NULL, 0, write_critpath, &jc, cpath, errbuf, errlen);
}
