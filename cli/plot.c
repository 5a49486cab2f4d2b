/* SPDX-License-Identifier: MIT */
/* plot.c — the report as one image: load, throughput and response-time
 * timelines (the paper's Figure 5a/5b and 10b) beside the load vs normalized
 * throughput scatter with N*, TPmax, congested and freeze windows (Figure 5c). */
#include "plot.h"
#include "report_fmt.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Window states, as drawn. */

int tb_plot_format(const char *path)
{
    size_t n = strlen(path);
    if (n > 4 && !strcasecmp(path + n - 4, ".png"))
        return TB_PLOT_PNG;
    if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
        return TB_PLOT_SVG;
    return -1;
}

int tb_plot_find(const char *prog, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return TB_E_NOTFOUND;
    const char *p = path;
    while (*p) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        /* An empty PATH entry means the current directory. */
        int w = dl ? snprintf(buf, len, "%.*s/%s", (int)dl, p, prog)
                   : snprintf(buf, len, "./%s", prog);
        struct stat sb;
        if (w > 0 && (size_t)w < len && stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) &&
            access(buf, X_OK) == 0)
            return 0;
        if (!colon)
            break;
        p = colon + 1;
    }
    return TB_E_NOTFOUND;
}

/* A gnuplot single-quoted string: only the quote itself needs escaping, by
 * doubling it. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s == '\n' || *s == '\r')
            continue;
        fputc(*s, f);
    }
    fputc('\'', f);
}

static const char *tier_name(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_tier_info *t = tb_catalog_tier_get(cat, id);
    return t ? t->name : "?";
}

/* The front tier's mean response time of the window starting at t, in ms;
 * NAN (drawn as a gap) when it has no completions there. */
static double front_rt_ms(const struct tb_report *r, size_t *k, int64_t t)
{
    while (*k < r->nfront && r->front_win[*k].start_ns < t)
        (*k)++;
    if (*k < r->nfront && r->front_win[*k].start_ns == t && r->front_win[*k].completions)
        return r->front_win[*k].rt_mean_ns / 1e6;
    return NAN;
}

static void gp_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %.9g", v);
    else
        fputs(" NaN", f);
}

int tb_plot_script(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                   const char *path, enum tb_plot_fmt fmt)
{
    const struct tb_analysis_result *res = &r->total;
    const struct tb_analysis *a = &res->a;
    /* Window states by correlate's rule, as the dashboard shows them. */
    uint8_t *st = malloc(res->nwin ? res->nwin : 1);
    if (!st)
        return TB_E_NOMEM;
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, a, res->win, res->nwin);
    tb_congestion_states(&rule, res->win, res->nwin, res->ep, res->nep, st);
    int64_t t0 = res->nwin ? res->win[0].start_ns : 0;
    double wsec = (double)r->width_ns / 1e9;
    bool have_front = r->front_tier && r->front_tier != r->tier && r->nfront;

    /* Data first, as a datablock, so the plot commands below can use it
     * several times without temporary files. Columns: 1 time offset (s),
     * 2 load, 3 completions/s, 4 work units/s, 5 own mean RT (ms),
     * 6 state, 7 front tier mean RT (ms). */
    fputs("$D << EOD\n", f);
    size_t fk = 0;
    bool any_rt = false; /* gnuplot refuses a panel whose every point is undefined */
    for (size_t i = 0; i < res->nwin; i++) {
        const struct tb_window *w = &res->win[i];
        fprintf(f, "%.6f", (double)(w->start_ns - t0) / 1e9 + wsec / 2);
        gp_num(f, w->load);
        gp_num(f, w->throughput);
        gp_num(f, w->norm_throughput);
        gp_num(f, w->completions ? w->rt_mean_ns / 1e6 : NAN);
        fprintf(f, " %d", st[i]);
        double frt = have_front ? front_rt_ms(r, &fk, w->start_ns) : NAN;
        gp_num(f, frt);
        any_rt |= w->completions > 0 || isfinite(frt);
        fputc('\n', f);
    }
    fputs("EOD\n", f);
    free(st);

    if (fmt == TB_PLOT_SVG)
        fputs("set terminal svg size 1800,1050 dynamic noenhanced font 'Sans,13' background "
              "'white'\n",
              f);
    else
        fputs("set terminal pngcairo size 1800,1050 noenhanced font 'Sans,12' background "
              "'white'\n",
              f);
    fputs("set output ", f);
    gp_str(f, path);
    fputc('\n', f);

    char title[256], wbuf[32], ts[64];
    tb_fmt_duration(r->width_ns, wbuf, sizeof wbuf);
    int off = snprintf(title, sizeof title, "tier %s", tier_name(cat, r->tier));
    if (a->server) {
        const struct tb_server_info *s = tb_catalog_server_get(cat, a->server);
        char sb[TB_ADDR_STRLEN];
        if (s)
            off += snprintf(title + off, sizeof title - (size_t)off, " server %s",
                            tb_addr_fmt(&s->addr, sb, sizeof sb));
    }
    off += snprintf(title + off, sizeof title - (size_t)off, ", window %s, ", wbuf);
    /* The title names what the marked windows were judged by: the
     * congestion threshold, which is the fit's knee when the intervention
     * analysis found none (issue 16: "N* undetermined" above marked windows). */
    double thr = tb_analysis_threshold(a);
    if (isfinite(a->n_star))
        snprintf(title + off, sizeof title - (size_t)off, "N* = %.2f (fit %.2f), TPmax = %.0f "
                 "units/s, %.1f%% congested", a->n_star, a->n_star_fit, a->tp_max,
                 100.0 * a->congested_fraction);
    else if (isfinite(thr))
        snprintf(title + off, sizeof title - (size_t)off, "N* from the fit only = %.2f, "
                 "TPmax = %.0f units/s, %.1f%% congested", thr, a->tp_max,
                 100.0 * a->congested_fraction);
    else
        snprintf(title + off, sizeof title - (size_t)off, "N* undetermined, no congestion");
    time_t sec = (time_t)(t0 / TB_NS_PER_SEC);
    struct tm tm;
    if (gmtime_r(&sec, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S UTC", &tm);
    else
        snprintf(ts, sizeof ts, "start");

    fputs("set multiplot title ", f);
    gp_str(f, title);
    fputs(" font ',15'\n", f);
    fputs("set grid lc rgb '#dddddd'\nset border lc rgb '#444444'\n"
          "set style line 1 lc rgb '#4477aa' lw 1.2\n"
          "set style line 2 lc rgb '#ee7733' pt 7 ps 0.7\n"
          "set style line 3 lc rgb '#cc3311' pt 5 ps 0.9\n"
          "set style line 4 lc rgb '#228833' lw 1.2\n"
          "set style line 5 lc rgb '#777777' dt 2 lw 1.5\n"
          "set style line 6 lc rgb '#aa3377' lw 1.2\n"
          "set style line 7 lc rgb '#aaaaaa' dt 3 lw 1.5\n"
          /* Keys above each panel: inside they hide the very points that
           * matter (low load, high throughput; high load, no throughput). */
          "set key tmargin left horizontal noopaque nobox samplen 2 width 2\n"
          /* Room on the right for the completions' axis, on every timeline
           * so their time axes line up. */
          "set lmargin 12\nset rmargin 10\n",
          f);
    if (res->nwin)
        fprintf(f, "set xrange [0:%.6f]\n", (double)res->nwin * wsec);

    /* (a) load timeline, congested and freeze windows marked. */
    fputs("set origin 0,0.635\nset size 0.6,0.31\n"
          "set ylabel 'load (requests in tier)'\nset xlabel ''\nset format x ''\n",
          f);
    /* The higher line's label goes above it and the lower's below, so the
     * two never overlap however close the estimates are. */
    bool nstar_high = !isfinite(a->n_star_fit) || a->n_star >= a->n_star_fit;
    if (isfinite(a->n_star))
        fprintf(f, "set arrow 1 from graph 0, first %.9g to graph 1, first %.9g nohead ls 5\n"
                   "set label 1 'N*' at graph 1.005, first %.9g left offset 0,%s\n",
                a->n_star, a->n_star, a->n_star, nstar_high ? "0.6" : "-0.6");
    if (isfinite(a->n_star_fit))
        fprintf(f, "set arrow 5 from graph 0, first %.9g to graph 1, first %.9g nohead ls 7\n"
                   "set label 5 'fit' at graph 1.005, first %.9g left offset 0,%s "
                   "textcolor rgb '#999999'\n",
                a->n_star_fit, a->n_star_fit, a->n_star_fit, nstar_high ? "-0.6" : "0.6");
    fprintf(f, "plot $D using 1:2 with lines ls 1 title 'load (%s window mean)', "
          "'' using 1:($6==1?$2:1/0) with points ls 2 title 'congested', "
          "'' using 1:($6==2?$2:1/0) with points ls 3 title 'freeze'\n",
            wbuf);
    fputs("unset arrow 1\nunset label 1\nunset arrow 5\nunset label 5\n", f);

    /* (b) throughput timeline. */
    fputs("set origin 0,0.325\nset size 0.6,0.31\n", f);
    if (isfinite(a->tp_max))
        fprintf(f, "set arrow 2 from graph 0, first %.9g to graph 1, first %.9g nohead ls 5\n"
                   "set label 2 'TPmax' at graph 0.005, first %.9g left offset 0,0.6\n",
                a->tp_max, a->tp_max, a->tp_max);
    /* Completions/s on their own axis (right): a request is worth many
     * work units when the unit is small, and on the units' axis the
     * completions were a flat line at zero. */
    fputs("set ylabel 'work units/s' tc rgb '#228833'\nset y2label 'completions/s' "
          "tc rgb '#4477aa'\nset ytics nomirror\nset y2tics\nset y2range [0:*]\n"
          "set yrange [0:*]\n",
          f);
    fputs("plot $D using 1:4 with lines ls 4 title 'work units/s', "
          "'' using 1:3 axes x1y2 with lines ls 1 dt 3 title 'completions/s (right axis)', "
          "'' using 1:($6==2?$4:1/0) with points ls 3 title 'freeze'\n",
          f);
    fputs("unset arrow 2\nunset label 2\nunset y2label\nunset y2tics\nset ytics mirror\n"
          "set ylabel tc default\nset autoscale y\n",
          f);

    /* (c) response-time timeline: the front tier's when known (what users
     * see, Figure 10b), and this tier's own. */
    fputs("set origin 0,0.0\nset size 0.6,0.325\nset format x '%g'\n"
          "set ylabel 'response time (ms)'\nset xlabel ",
          f);
    char xl[128];
    snprintf(xl, sizeof xl, "time since %s (s)", ts);
    gp_str(f, xl);
    fputc('\n', f);
    /* A log scale: the tier's own response time (a database's 0.6 ms) stays
     * visible under the front tier's (hundreds of ms) on one panel. */
    if (!any_rt)
        fputs("set yrange [0:1]\n", f);
    else
        fputs("set logscale y 10\nset format y '%g'\nset ylabel 'response time (ms, log)'\n",
              f);
    fputs("plot $D using 1:5 with lines ls 1 title ", f);
    gp_str(f, tier_name(cat, r->tier));
    if (have_front) {
        fputs(", '' using 1:7 with lines ls 6 title ", f);
        char ft[96];
        snprintf(ft, sizeof ft, "front tier %s", tier_name(cat, r->front_tier));
        gp_str(f, ft);
    }
    fputc('\n', f);

    /* (d) the main-sequence scatter. */
    fputs("unset logscale y\nset format y '%g'\nset rmargin 3\n", f);
    fputs("set autoscale x\nset autoscale y\nset xrange [0:*]\nset yrange [0:*]\n"
          "set origin 0.6,0.0\nset size 0.4,0.945\n"
          "set xlabel 'load (requests in tier, window mean)'\n"
          "set ylabel 'normalized throughput (work units/s)'\n",
          f);
    if (isfinite(a->n_star))
        fprintf(f, "set arrow 3 from first %.9g, graph 0 to first %.9g, graph 1 nohead ls 5\n"
                   "set label 3 sprintf('N* = %%.2f', %.9g) at first %.9g, graph 0.03 "
                   "offset 0.5,0\n",
                a->n_star, a->n_star, a->n_star, a->n_star);
    if (isfinite(a->n_star_fit))
        fprintf(f, "set arrow 6 from first %.9g, graph 0 to first %.9g, graph 1 nohead ls 7\n"
                   "set label 6 sprintf('fit %%.2f', %.9g) at first %.9g, graph 0.08 "
                   "offset 0.5,0 textcolor rgb '#999999'\n",
                a->n_star_fit, a->n_star_fit, a->n_star_fit, a->n_star_fit);
    if (isfinite(a->tp_max))
        fprintf(f, "set arrow 4 from graph 0, first %.9g to graph 1, first %.9g nohead ls 5\n"
                   "set label 4 sprintf('TPmax = %%.0f', %.9g) at graph 0.72, first %.9g "
                   "offset 0,0.8\n",
                a->tp_max, a->tp_max, a->tp_max, a->tp_max);
    fputs("plot $D using 2:($6==0?$4:1/0) with points lc rgb '#4477aa' pt 7 ps 0.5 title "
          "'window', "
          "'' using 2:($6==1?$4:1/0) with points ls 2 title 'congested', "
          "'' using 2:($6==2?$4:1/0) with points ls 3 title 'freeze'\n",
          f);
    fputs("unset multiplot\nset output\n", f);
    return ferror(f) ? TB_E_IO : 0;
}

/* Appends `s` single-quoted for the shell popen() runs commands through. */
static size_t sh_quote(char *dst, size_t o, size_t len, const char *s)
{
    if (o + 2 >= len)
        return o;
    dst[o++] = '\'';
    for (const char *p = s; *p && o < len - 6; p++) {
        if (*p == '\'') {
            memcpy(dst + o, "'\\''", 4);
            o += 4;
        } else {
            dst[o++] = *p;
        }
    }
    dst[o++] = '\'';
    dst[o] = '\0';
    return o;
}

int tb_plot_run(const char *prog, const char *const *args, size_t nargs,
                int (*write)(FILE *f, void *ud), void *ud, const char *path, char *errbuf,
                size_t errlen)
{
    char exe[4096];
    if (tb_plot_find(prog, exe, sizeof exe) != 0) {
        snprintf(errbuf, errlen, "%s not found: install the %s package", prog,
                 !strcmp(prog, "gnuplot") ? "gnuplot-nox" : prog[0] == 'd' ? "graphviz" : prog);
        return TB_E_NOTFOUND;
    }
    char cmd[8400];
    size_t o = sh_quote(cmd, 0, sizeof cmd, exe);
    for (size_t i = 0; i < nargs && o < sizeof cmd - 2; i++) {
        cmd[o++] = ' ';
        o = sh_quote(cmd, o, sizeof cmd, args[i]);
    }
    /* A stale file from an earlier run must not pass for this one's output. */
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
        return TB_E_IO;
    }
    fflush(NULL);
    /* If the program dies early, a write to the pipe must fail, not kill us. */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    FILE *f = popen(cmd, "w");
    if (!f) {
        signal(SIGPIPE, old);
        snprintf(errbuf, errlen, "cannot run %s: %s", exe, strerror(errno));
        return TB_E_IO;
    }
    int rc = write(f, ud);
    int status = pclose(f);
    signal(SIGPIPE, old);
    if (rc) {
        snprintf(errbuf, errlen, "writing to %s: %s", prog, tb_strerror(rc));
        return rc;
    }
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(errbuf, errlen, "%s failed drawing %s (its messages are above)", prog, path);
        return TB_E_IO;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size == 0) {
        snprintf(errbuf, errlen, "%s did not write %s", prog, path);
        return TB_E_IO;
    }
    return 0;
}

struct report_job {
    const struct tb_report *r;
    const struct tb_catalog *cat;
    const char *path;
    enum tb_plot_fmt fmt;
};

static int write_report(FILE *f, void *ud)
{
    const struct report_job *j = ud;
    return tb_plot_script(f, j->r, j->cat, j->path, j->fmt);
}

int tb_plot_report(const struct tb_report *r, const struct tb_catalog *cat, const char *path,
                   char *errbuf, size_t errlen)
{
    int fmt = tb_plot_format(path);
    if (fmt < 0) {
        snprintf(errbuf, errlen, "--plot %s: the file name must end in .png or .svg", path);
        return TB_E_INVAL;
    }
    if (!r->total.nwin) {
        const struct tb_tier_info *t = tb_catalog_tier_get(cat, r->tier);
        snprintf(errbuf, errlen, "--plot %s: nothing to draw, tier '%s' has no requests in the "
                 "range", path, t ? t->name : "?");
        return TB_E_NOTFOUND;
    }
    struct report_job j = {r, cat, path, (enum tb_plot_fmt)fmt};
    return tb_plot_run("gnuplot", NULL, 0, write_report, &j, path, errbuf, errlen);
}
