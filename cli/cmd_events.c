/* SPDX-License-Identifier: MIT */
/* cmd_events.c — `tbneck events`: imports JVM GC pauses as events, lists them,
 * and sets them beside a tier's load (the paper's Figure 10a: GC running ratio
 * per window next to Tomcat's load) with how many pauses fall inside the
 * tier's congestion episodes. */
#include <errno.h>
#include <inttypes.h>
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

#include "analyze.h"
#include "cli.h"
#include "events.h"
#include "report_util.h"
#include "util.h"

static const char usage_text[] =
    "usage: tbneck events import --gc FILE --tier NAME [--db FILE]\n"
    "       tbneck events list [--kind gc] [--tier NAME] [--db FILE]\n"
    "       tbneck events report --tier NAME [--window " TB_WINDOW_DEFAULT "] [--kind gc]\n"
    "                    [--min-pause 50ms] [--from T --to T] [--plot FILE.png|svg]\n"
    "                    [--format text|json] [--db FILE]\n\n"
    "import  reads a JVM GC log (JDK 9+ -Xlog:gc:FILE:utctime,uptime,level,tags, or\n"
    "        JDK 8 -XX:+PrintGCDateStamps) and stores every stop-the-world pause as an\n"
    "        event of kind 'gc' belonging to tier NAME; malformed lines are counted\n"
    "        and skipped, and a pause imported before is not stored twice.\n"
    "list    prints the stored events.\n"
    "report  the GC running ratio (fraction of each window covered by pauses) next to\n"
    "        the tier's load; how many pauses (all, and those of --min-pause or more)\n"
    "        overlap one of the tier's congestion episodes; how many of its freeze\n"
    "        episodes overlap a pause; the correlation of GC ratio with load per\n"
    "        window. --plot draws both timelines, freeze episodes shaded.\n"
    TB_CLI_TIME_HELP;

/* "2026-11-22T01:02:03.456Z" */
static const char *fmt_time(int64_t ns, char *buf, size_t len)
{
    int64_t s = ns >= 0 ? ns / TB_NS_PER_SEC : -((-ns + TB_NS_PER_SEC - 1) / TB_NS_PER_SEC);
    int64_t ms = (ns - s * TB_NS_PER_SEC) / TB_NS_PER_MS;
    time_t t = (time_t)s;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(buf, len, "%" PRId64, ns);
        return buf;
    }
    char d[32];
    strftime(d, sizeof d, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", d, (int)ms);
    return buf;
}

static int cmp_event(const void *a, const void *b)
{
    const struct tb_event *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->end_ns != y->end_ns)
        return x->end_ns < y->end_ns ? -1 : 1;
    return strcmp(x->host, y->host);
}

/* ---- import --------------------------------------------------------------- */

static int cmd_import(int argc, char **argv)
{
    const char *gc = NULL, *tier = NULL, *dbpath = TB_DEFAULT_DB;
    const struct tb_cli_opt opts[] = {
        {"gc", &gc, NULL}, {"tier", &tier, NULL}, {"db", &dbpath, NULL}};
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "events import", usage_text, &rc))
        return rc;
    if (!gc || !tier) {
        tb_log_error("events import: --gc FILE and --tier NAME are required");
        return TB_EXIT_USAGE;
    }
    if (strlen(tier) >= sizeof ((struct tb_event *)0)->host) {
        tb_log_error("events import: tier name '%s' is too long", tier);
        return TB_EXIT_USAGE;
    }
    FILE *f = fopen(gc, "r");
    if (!f) {
        tb_log_error("%s: %s", gc, strerror(errno));
        return TB_EXIT_FAIL;
    }
    struct tb_event *ev = NULL, *old = NULL;
    size_t n = 0, nold = 0;
    struct tb_gc_summary sum;
    rc = tb_gc_parse_file(f, tier, &ev, &n, &sum);
    fclose(f);
    if (rc) {
        tb_log_error("%s: %s", gc, tb_strerror(rc));
        return TB_EXIT_FAIL;
    }
    int status = TB_EXIT_FAIL;
    struct tb_store *st = NULL;
    struct tb_catalog *cat = NULL;
    char err[512] = "";
    /* Importing before the capture is allowed: the database may not exist yet. */
    rc = tb_store_open(&st, dbpath, TB_STORE_CREATE, err, sizeof err);
    if (rc) {
        tb_log_error("%s: %s", dbpath, err[0] ? err : tb_strerror(rc));
        goto out;
    }
    uint32_t tid;
    if (tb_catalog_new(&cat) == 0 && tb_store_load_catalog(st, cat) == 0 &&
        tb_catalog_tier_count(cat) > 0 && tb_catalog_tier_find(cat, tier, &tid) != 0)
        tb_log_warn("%s: no tier '%s' in the database (yet); 'tbneck events report' needs "
                    "the tier's requests", dbpath, tier);
    /* A log imported twice (or growing between imports) must not double its pauses. */
    size_t dup = 0;
    if (n) {
        qsort(ev, n, sizeof *ev, cmp_event);
        rc = tb_store_get_events(st, "gc", ev[0].start_ns, ev[n - 1].end_ns + 1, &old, &nold);
        if (rc) {
            tb_log_error("%s: reading stored events: %s", dbpath, tb_strerror(rc));
            goto out;
        }
        if (nold)
            qsort(old, nold, sizeof *old, cmp_event);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (nold && bsearch(&ev[i], old, nold, sizeof *old, cmp_event)) {
                dup++;
                continue;
            }
            ev[k++] = ev[i];
        }
        rc = k ? tb_store_put_events(st, ev, k) : 0;
        if (rc) {
            tb_log_error("%s: storing events: %s", dbpath, tb_strerror(rc));
            goto out;
        }
        n = k;
    }
    printf("events: %zu GC pause%s from %s stored for tier '%s'", n, n == 1 ? "" : "s", gc, tier);
    if (dup)
        printf(", %zu already stored", dup);
    if (sum.bad)
        printf("; %" PRIu64 " malformed line%s skipped (first: line %" PRIu64 ", %s)", sum.bad,
               sum.bad == 1 ? "" : "s", sum.first_bad, sum.first_why);
    printf("\n");
    if (sum.pauses == 0)
        tb_log_warn("%s: no GC pause found (was the JVM started with "
                    "-Xlog:gc:FILE:utctime,uptime,level,tags?)", gc);
    status = TB_EXIT_OK;
out:
    free(ev);
    free(old);
    if (cat)
        tb_catalog_free(cat);
    if (st)
        tb_store_close(st);
    return status;
}

/* ---- list ------------------------------------------------------------------ */

static int cmd_list(int argc, char **argv)
{
    const char *dbpath = TB_DEFAULT_DB, *kind = NULL, *tier = NULL;
    const struct tb_cli_opt opts[] = {
        {"db", &dbpath, NULL}, {"kind", &kind, NULL}, {"tier", &tier, NULL}};
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "events list", usage_text, &rc))
        return rc;
    struct tb_cli_db db;
    if (tb_cli_db_open(&db, dbpath, true))
        return TB_EXIT_FAIL;
    struct tb_event *ev = NULL;
    size_t n = 0;
    rc = tb_store_get_events(db.st, kind, INT64_MIN, INT64_MAX, &ev, &n);
    if (rc) {
        tb_log_error("%s: reading events: %s", dbpath, tb_strerror(rc));
        tb_cli_db_close(&db);
        return TB_EXIT_FAIL;
    }
    if (n)
        qsort(ev, n, sizeof *ev, cmp_event);
    printf("%-24s %10s  %-6s %-16s %s\n", "start (UTC)", "duration", "kind", "tier/host",
           "detail");
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (tier && strcmp(ev[i].host, tier) != 0)
            continue;
        char t[48], d[32];
        printf("%-24s %10s  %-6s %-16s %s\n", fmt_time(ev[i].start_ns, t, sizeof t),
               tb_fmt_duration(ev[i].end_ns - ev[i].start_ns, d, sizeof d), ev[i].kind,
               ev[i].host, ev[i].detail);
        shown++;
    }
    if (!shown)
        fprintf(stderr, "tbneck: no events stored%s%s\n", tier ? " for " : "", tier ? tier : "");
    free(ev);
    tb_cli_db_close(&db);
    return TB_EXIT_OK;
}

/* ---- report ------------------------------------------------------------------ */

struct ev_report {
    const char *tier, *kind;
    int64_t width_ns, from_ns, to_ns, min_pause_ns;
    size_t nwin;
    size_t pauses, long_pauses, pauses_in_ep, long_in_ep;
    int64_t pause_ns, longest_ns;
    size_t episodes, ep_with_pause, freeze, freeze_with_pause, freeze_with_long;
    double corr;
    double *ratio; /* per window */
};

static bool overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1)
{
    return a0 < b1 && b0 < a1;
}

/* Fraction of each window covered by the (sorted, possibly overlapping)
 * pauses: their union is swept once across the windows. */
static void gc_ratio(const struct tb_window *w, size_t nw, const struct tb_event *p, size_t np,
                     double *ratio)
{
    size_t j = 0;
    for (size_t i = 0; i < nw; i++) {
        int64_t w0 = w[i].start_ns, w1 = w0 + w[i].width_ns;
        while (j < np && p[j].end_ns <= w0)
            j++;
        int64_t covered = 0, upto = w0;
        for (size_t k = j; k < np && p[k].start_ns < w1; k++) {
            int64_t s = TB_MAX(p[k].start_ns, upto), e = TB_MIN(p[k].end_ns, w1);
            if (e > s) {
                covered += e - s;
                upto = e;
            }
        }
        ratio[i] = w[i].width_ns > 0 ? (double)covered / (double)w[i].width_ns : 0;
    }
}

static double frac(size_t a, size_t b)
{
    return b ? (double)a / (double)b : NAN;
}

static void pct(char *buf, size_t len, size_t a, size_t b)
{
    if (b)
        snprintf(buf, len, "%.1f%%", 100.0 * (double)a / (double)b);
    else
        snprintf(buf, len, "n/a");
}

static void print_text(const struct ev_report *r, const struct tb_analysis_result *res)
{
    char t0[48], t1[48], w[32], mp[32], tot[32], lg[32], a[16], b[16], c[16];
    printf("tier %s, %s events, window %s, %s .. %s (%zu windows)\n", r->tier, r->kind,
           tb_fmt_duration(r->width_ns, w, sizeof w), fmt_time(r->from_ns, t0, sizeof t0),
           fmt_time(r->to_ns, t1, sizeof t1), r->nwin);
    double span = (double)(r->to_ns - r->from_ns);
    printf("pauses: %zu, %s in all (%.2f%% of the time, the GC running ratio), longest %s\n",
           r->pauses, tb_fmt_duration(r->pause_ns, tot, sizeof tot),
           span > 0 ? 100.0 * (double)r->pause_ns / span : 0.0,
           tb_fmt_duration(r->longest_ns, lg, sizeof lg));
    pct(a, sizeof a, r->long_in_ep, r->long_pauses);
    pct(b, sizeof b, r->pauses_in_ep, r->pauses);
    printf("pauses of %s or more: %zu, inside a congestion episode: %zu (%s)\n",
           tb_fmt_duration(r->min_pause_ns, mp, sizeof mp), r->long_pauses, r->long_in_ep, a);
    printf("all pauses inside a congestion episode: %zu of %zu (%s)\n", r->pauses_in_ep,
           r->pauses, b);
    pct(a, sizeof a, r->freeze_with_pause, r->freeze);
    pct(b, sizeof b, r->freeze_with_long, r->freeze);
    pct(c, sizeof c, r->ep_with_pause, r->episodes);
    printf("episodes: %zu (%zu freeze); freeze episodes overlapping a pause: %zu (%s), a pause "
           "of %s or more: %zu (%s); all episodes overlapping a pause: %zu (%s)\n",
           r->episodes, r->freeze, r->freeze_with_pause, a, mp, r->freeze_with_long, b,
           r->ep_with_pause, c);
    if (isfinite(r->corr))
        printf("correlation of GC running ratio with load per window: r = %.3f\n", r->corr);
    else
        printf("correlation of GC running ratio with load per window: undetermined\n");
    if (isfinite(res->a.n_star))
        printf("tier N* = %.2f, congested %.1f%% of the windows\n", res->a.n_star,
               100.0 * res->a.congested_fraction);
}

static void print_json(const struct ev_report *r, const struct tb_analysis_result *res)
{
    printf("{\"tier\": ");
    tb_json_str(stdout, r->tier);
    printf(", \"kind\": ");
    tb_json_str(stdout, r->kind);
    printf(", \"window_ns\": %" PRId64 ", \"from_ns\": %" PRId64 ", \"to_ns\": %" PRId64
           ", \"windows\": %zu",
           r->width_ns, r->from_ns, r->to_ns, r->nwin);
    printf(", \"pauses\": %zu, \"pause_ns\": %" PRId64 ", \"longest_pause_ns\": %" PRId64,
           r->pauses, r->pause_ns, r->longest_ns);
    double span = (double)(r->to_ns - r->from_ns);
    printf(", \"gc_ratio\": ");
    tb_json_num(stdout, span > 0 ? (double)r->pause_ns / span : NAN);
    printf(", \"pauses_in_episodes\": %zu, \"pauses_in_episodes_fraction\": ", r->pauses_in_ep);
    tb_json_num(stdout, frac(r->pauses_in_ep, r->pauses));
    printf(", \"min_pause_ns\": %" PRId64 ", \"long_pauses\": %zu, \"long_pauses_in_episodes\": %zu"
           ", \"long_pauses_in_episodes_fraction\": ",
           r->min_pause_ns, r->long_pauses, r->long_in_ep);
    tb_json_num(stdout, frac(r->long_in_ep, r->long_pauses));
    printf(", \"episodes\": %zu, \"episodes_with_pause\": %zu, \"freeze_episodes\": %zu"
           ", \"freeze_with_pause\": %zu, \"freeze_with_pause_fraction\": ",
           r->episodes, r->ep_with_pause, r->freeze, r->freeze_with_pause);
    tb_json_num(stdout, frac(r->freeze_with_pause, r->freeze));
    printf(", \"freeze_with_long_pause\": %zu, \"freeze_with_long_pause_fraction\": ",
           r->freeze_with_long);
    tb_json_num(stdout, frac(r->freeze_with_long, r->freeze));
    printf(", \"correlation\": ");
    tb_json_num(stdout, r->corr);
    printf(", \"n_star\": ");
    tb_json_num(stdout, res->a.n_star);
    printf("}\n");
}

/* Load (left axis) and GC running ratio (right axis) per window over time, the
 * tier's freeze episodes shaded behind them. */
static int plot(const char *path, const struct ev_report *r, const struct tb_analysis_result *res)
{
    size_t plen = strlen(path);
    bool svg = plen > 4 && !strcasecmp(path + plen - 4, ".svg");
    if (!svg && !(plen > 4 && !strcasecmp(path + plen - 4, ".png"))) {
        tb_log_error("--plot %s: the file name must end in .png or .svg", path);
        return TB_EXIT_USAGE;
    }
    /* A stale image from an earlier run must not pass for this one's. */
    if (unlink(path) != 0 && errno != ENOENT) {
        tb_log_error("--plot %s: %s", path, strerror(errno));
        return TB_EXIT_FAIL;
    }
    fflush(NULL);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    FILE *f = popen("gnuplot", "w");
    if (!f) {
        signal(SIGPIPE, old);
        tb_log_error("cannot run gnuplot: %s", strerror(errno));
        return TB_EXIT_FAIL;
    }
    char t0[48], w[32];
    fprintf(f, "set terminal %s size 1400,520 noenhanced\n",
            svg ? "svg dynamic" : "pngcairo");
    fputs("set output '", f);
    for (const char *p = path; *p; p++) {
        if (*p == '\'')
            fputc('\'', f);
        fputc(*p, f);
    }
    fputs("'\n", f);
    fprintf(f, "set title \"tier %s: load and %s running ratio per %s window "
               "(freeze episodes shaded)\"\n",
            r->tier, r->kind, tb_fmt_duration(r->width_ns, w, sizeof w));
    fprintf(f, "set xlabel \"seconds since %s\"\n", fmt_time(r->from_ns, t0, sizeof t0));
    fputs("set ylabel \"load (requests in the tier)\"\nset y2label \"GC running ratio\"\n"
          "set ytics nomirror\nset y2tics 0.2\nset y2range [0:1.05]\n"
          "set key below horizontal\nset grid xtics\n",
          f);
    double maxload = 0;
    for (size_t i = 0; i < res->nwin; i++)
        maxload = fmax(maxload, res->win[i].load);
    fprintf(f, "set yrange [0:%.6g]\n", maxload > 0 ? maxload * 1.1 : 1.0);
    double ws = (double)r->width_ns / 1e9;
    fprintf(f, "set xrange [0:%.9g]\n", (double)(r->to_ns - r->from_ns) / 1e9);
    fprintf(f, "set boxwidth %.9g absolute\n", ws);
    for (size_t i = 0; i < res->nep; i++) {
        if (res->ep[i].kind != TB_EP_FREEZE)
            continue;
        double a = (double)(res->ep[i].start_ns - r->from_ns) / 1e9;
        double b = (double)(res->ep[i].end_ns - r->from_ns) / 1e9;
        fprintf(f, "set object rect from %.6f, graph 0 to %.6f, graph 1 behind "
                   "fc rgb '#e0e0e0' fs solid noborder\n", a, b);
    }
    fputs("$d << EOD\n", f);
    for (size_t i = 0; i < res->nwin; i++)
        fprintf(f, "%.6f %.6g %.6g\n", (double)(res->win[i].start_ns - r->from_ns) / 1e9,
                res->win[i].load, r->ratio[i]);
    fputs("EOD\n", f);
    fprintf(f, "plot $d using ($1+%.9g):3 axes x1y2 with boxes fs solid 0.45 noborder "
               "lc rgb '#d62728' title 'GC running ratio (right)', "
               "$d using 1:2 with steps lw 1.3 lc rgb '#1f77b4' title 'load (left)'\n",
            ws / 2);
    fputs("set output\n", f);
    int werr = ferror(f);
    int status = pclose(f);
    signal(SIGPIPE, old);
    if (werr) {
        tb_log_error("writing to gnuplot failed");
        return TB_EXIT_FAIL;
    }
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        tb_log_error("gnuplot not found on PATH: install the gnuplot-nox package");
        return TB_EXIT_FAIL;
    }
    struct stat sb;
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        stat(path, &sb) != 0 || sb.st_size == 0) {
        tb_log_error("gnuplot failed drawing %s (its messages are above)", path);
        return TB_EXIT_FAIL;
    }
    return TB_EXIT_OK;
}

static int cmd_report(int argc, char **argv)
{
    const char *dbpath = TB_DEFAULT_DB, *tier = NULL, *window = TB_WINDOW_DEFAULT, *kind = "gc";
    const char *minp = "50ms", *from = NULL, *to = NULL, *plotpath = NULL, *format = "text";
    const struct tb_cli_opt opts[] = {
        {"db", &dbpath, NULL},     {"tier", &tier, NULL},   {"window", &window, NULL},
        {"kind", &kind, NULL},     {"min-pause", &minp, NULL}, {"from", &from, NULL},
        {"to", &to, NULL},         {"plot", &plotpath, NULL}, {"format", &format, NULL}};
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "events report", usage_text, &rc))
        return rc;
    if (!tier) {
        tb_log_error("events report: --tier NAME is required");
        return TB_EXIT_USAGE;
    }
    bool json = !strcmp(format, "json");
    if (!json && strcmp(format, "text") != 0) {
        tb_log_error("events report: --format '%s': expected text or json", format);
        return TB_EXIT_USAGE;
    }
    struct ev_report r = {.tier = tier, .kind = kind, .corr = NAN};
    if (tb_parse_window(window, &r.width_ns) != 0) {
        tb_log_error("events report: --window '%s': expected a duration from 1ms to 1h, such as "
                     "50ms", window);
        return TB_EXIT_USAGE;
    }
    if (tb_parse_duration(minp, TB_NS_PER_MS, &r.min_pause_ns) != 0) {
        tb_log_error("events report: --min-pause '%s': expected a duration such as 50ms", minp);
        return TB_EXIT_USAGE;
    }
    struct tb_cli_db db;
    if (tb_cli_db_open(&db, dbpath, false))
        return TB_EXIT_FAIL;
    int status = TB_EXIT_FAIL;
    struct tb_event *ev = NULL;
    size_t nev = 0;
    struct tb_analysis_result res;
    memset(&res, 0, sizeof res);
    uint32_t tid;
    if ((status = tb_cli_tier(db.cat, tier, &tid)) != 0)
        goto out;
    status = TB_EXIT_FAIL;
    struct tb_analyze_opts ao = {.width_ns = r.width_ns, .server = 0};
    int rr = tb_cli_range(db.st, tid, from, to, &ao.from_ns, &ao.to_ns);
    if (rr) {
        status = rr;
        goto out;
    }
    char err[512] = "";
    rc = tb_analyze_tier(db.st, db.cat, tid, &ao, &res, err, sizeof err);
    if (rc) {
        tb_log_error("tier '%s': %s", tier, err[0] ? err : tb_strerror(rc));
        goto out;
    }
    if (res.nwin == 0) {
        tb_log_error("tier '%s': no requests in the range", tier);
        goto out;
    }
    r.nwin = res.nwin;
    r.from_ns = res.win[0].start_ns;
    r.to_ns = res.win[res.nwin - 1].start_ns + res.win[res.nwin - 1].width_ns;
    rc = tb_store_get_events(db.st, kind, INT64_MIN, INT64_MAX, &ev, &nev);
    if (rc) {
        tb_log_error("%s: reading events: %s", dbpath, tb_strerror(rc));
        goto out;
    }
    /* This tier's events in the analysed span, by start. */
    size_t k = 0, all_for_tier = 0;
    for (size_t i = 0; i < nev; i++) {
        if (strcmp(ev[i].host, tier) != 0)
            continue;
        all_for_tier++;
        if (overlaps(ev[i].start_ns, ev[i].end_ns, r.from_ns, r.to_ns))
            ev[k++] = ev[i];
    }
    nev = k;
    if (nev)
        qsort(ev, nev, sizeof *ev, cmp_event);
    if (!all_for_tier)
        tb_log_warn("no '%s' events stored for tier '%s' (import them with 'tbneck events "
                    "import --gc FILE --tier %s')", kind, tier, tier);
    else if (!nev)
        tb_log_warn("none of the %zu '%s' events of tier '%s' falls in the captured span "
                    "(clocks of the log and the capture differ?)", all_for_tier, kind, tier);
    r.ratio = calloc(res.nwin, sizeof *r.ratio);
    if (!r.ratio) {
        tb_log_error("out of memory");
        goto out;
    }
    gc_ratio(res.win, res.nwin, ev, nev, r.ratio);
    double *load = malloc((res.nwin ? res.nwin : 1) * sizeof *load);
    if (!load) {
        tb_log_error("out of memory");
        goto out;
    }
    for (size_t i = 0; i < res.nwin; i++)
        load[i] = res.win[i].load;
    r.corr = tb_pearson(r.ratio, load, res.nwin);
    free(load);
    for (size_t i = 0; i < nev; i++) {
        int64_t d = ev[i].end_ns - ev[i].start_ns;
        bool in = false;
        for (size_t e = 0; e < res.nep && !in; e++)
            in = overlaps(ev[i].start_ns, ev[i].end_ns, res.ep[e].start_ns, res.ep[e].end_ns);
        r.pauses++;
        r.pause_ns += TB_MAX(0, TB_MIN(ev[i].end_ns, r.to_ns) - TB_MAX(ev[i].start_ns, r.from_ns));
        r.longest_ns = TB_MAX(r.longest_ns, d);
        r.pauses_in_ep += in;
        if (d >= r.min_pause_ns) {
            r.long_pauses++;
            r.long_in_ep += in;
        }
    }
    for (size_t e = 0; e < res.nep; e++) {
        bool any = false, lng = false;
        for (size_t i = 0; i < nev; i++) {
            if (!overlaps(ev[i].start_ns, ev[i].end_ns, res.ep[e].start_ns, res.ep[e].end_ns))
                continue;
            any = true;
            lng |= ev[i].end_ns - ev[i].start_ns >= r.min_pause_ns;
        }
        r.episodes++;
        r.ep_with_pause += any;
        if (res.ep[e].kind == TB_EP_FREEZE) {
            r.freeze++;
            r.freeze_with_pause += any;
            r.freeze_with_long += lng;
        }
    }
    if (json)
        print_json(&r, &res);
    else
        print_text(&r, &res);
    status = TB_EXIT_OK;
    if (plotpath)
        status = plot(plotpath, &r, &res);
out:
    free(r.ratio);
    free(ev);
    tb_analysis_result_free(&res);
    tb_cli_db_close(&db);
    return status;
}

int tb_cmd_events(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return TB_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        fputs(usage_text, stdout);
        return TB_EXIT_OK;
    }
    if (!strcmp(sub, "import"))
        return cmd_import(argc, argv);
    if (!strcmp(sub, "list"))
        return cmd_list(argc, argv);
    if (!strcmp(sub, "report"))
        return cmd_report(argc, argv);
    tb_log_error("events: unknown subcommand '%s' (import, list or report)", sub);
    return TB_EXIT_USAGE;
}
