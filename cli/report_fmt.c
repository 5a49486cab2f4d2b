/* SPDX-License-Identifier: MIT */
/* report_fmt.c — writes a built report as text, JSON or the episode CSV. */
#include "report_fmt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report_util.h"
#include "util.h"
#include "buf.h"
#include "critpath.h"

#define TOP_CLASSES 10

const char *const tb_dur_bin_names[TB_DUR_BINS] = {"<100ms", "100-200ms", "200-500ms",
                                                    "500ms-1s", ">=1s"};

struct tb_range tb_win_range(const struct tb_window *w, size_t n, enum tb_win_col col)
{
    struct tb_range r = {NAN, NAN, NAN};
    double sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (col) {
        case TB_COL_LOAD:
            v = w[i].load;
            break;
        case TB_COL_TPUT:
            v = w[i].throughput;
            break;
        case TB_COL_NORM_TPUT:
            v = w[i].norm_throughput;
            break;
        default:
            /* A window without completions has no response time, not a zero one. */
            if (w[i].completions == 0)
                continue;
            v = w[i].rt_mean_ns;
            break;
        }
        if (cnt == 0 || v < r.min)
            r.min = v;
        if (cnt == 0 || v > r.max)
            r.max = v;
        sum += v;
        cnt++;
    }
    if (cnt)
        r.mean = sum / (double)cnt;
    return r;
}

void tb_dur_dist(const struct tb_episode *ep, size_t n, struct tb_dur_dist *d)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    if (!n)
        return;
    int64_t *v = malloc(n * sizeof *v);
    if (!v) {
        d->n = 0;
        return;
    }
    static const int64_t edges[TB_DUR_BINS - 1] = {100 * TB_NS_PER_MS, 200 * TB_NS_PER_MS,
                                                   500 * TB_NS_PER_MS, TB_NS_PER_SEC};
    for (size_t i = 0; i < n; i++) {
        v[i] = ep[i].end_ns - ep[i].start_ns;
        size_t b = 0;
        while (b < TB_DUR_BINS - 1 && v[i] >= edges[b])
            b++;
        d->bins[b]++;
    }
    qsort(v, n, sizeof *v, tb_cmp_i64);
    d->min = v[0];
    d->max = v[n - 1];
    d->p50 = tb_quantile_i64(v, n, 0.5);
    d->p90 = tb_quantile_i64(v, n, 0.9);
    free(v);
}

const char *tb_episode_kind_name(enum tb_episode_kind k)
{
    return k == TB_EP_FREEZE ? "freeze" : "saturated";
}

const char *tb_svc_method_name(enum tb_svc_method m)
{
    switch (m) {
    case TB_SVC_ISOLATED:
        return "isolated";
    case TB_SVC_QUANTILE:
        return "quantile";
    case TB_SVC_OVERRIDE:
        return "override";
    case TB_SVC_CALIBRATED:
        return "calibrated";
    }
    return "?";
}

static const char *tier_name(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_tier_info *t = tb_catalog_tier_get(cat, id);
    return t ? t->name : "?";
}

static const char *class_name(const struct tb_catalog *cat, uint32_t id)
{
    return tb_catalog_class_text(cat, id);
}

/* "*" for the tier as a whole, else the server's address. */
static const char *server_name(const struct tb_catalog *cat, uint32_t id, char *buf, size_t len)
{
    if (id == 0) {
        snprintf(buf, len, "*");
        return buf;
    }
    const struct tb_server_info *s = tb_catalog_server_get(cat, id);
    if (!s) {
        snprintf(buf, len, "server#%u", id);
        return buf;
    }
    return tb_addr_fmt(&s->addr, buf, len);
}

/* "00:00:12.350" in UTC: episodes are tens of milliseconds long. */
static const char *fmt_clock(int64_t ns, char *buf, size_t len)
{
    time_t sec = (time_t)(ns / TB_NS_PER_SEC);
    int64_t ms = (ns % TB_NS_PER_SEC) / TB_NS_PER_MS;
    if (ns < 0) {
        sec -= 1;
        ms += 1000;
    }
    struct tm tm;
    if (!gmtime_r(&sec, &tm)) {
        snprintf(buf, len, "?");
        return buf;
    }
    snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    return buf;
}

static const char *fmt_date(int64_t ns, char *buf, size_t len)
{
    time_t sec = (time_t)(ns / TB_NS_PER_SEC);
    struct tm tm;
    if (ns < 0 || !gmtime_r(&sec, &tm)) {
        snprintf(buf, len, "?");
        return buf;
    }
    strftime(buf, len, "%Y-%m-%d", &tm);
    return buf;
}

/* A number for a table cell: "-" when undetermined. */
static const char *fmt_num(double v, int prec, char *buf, size_t len)
{
    if (!isfinite(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", prec, v);
    return buf;
}

static const char *fmt_dur(double ns, char *buf, size_t len)
{
    if (!isfinite(ns)) {
        snprintf(buf, len, "-");
        return buf;
    }
    /* Round to a readable precision before tb_fmt_duration prints it. */
    double a = fabs(ns);
    double q = a >= 1e9 ? 1e6 : a >= 1e6 ? 1e3 : 1;
    return tb_fmt_duration((int64_t)(llround(ns / q) * (long long)q), buf, len);
}

/* How far apart the two N* estimates are, relative to the smaller one (the
 * rule correlate applies); NAN unless both exist. */
static double nstar_gap(const struct tb_analysis *a)
{
    if (!isfinite(a->n_star) || !isfinite(a->n_star_fit))
        return NAN;
    double m = fmin(a->n_star, a->n_star_fit);
    return m > 0 ? fabs(a->n_star - a->n_star_fit) / m : INFINITY;
}

static void text_row(FILE *f, const char *label, const struct tb_analysis_result *r)
{
    char b[9][32];
    struct tb_range ld = tb_win_range(r->win, r->nwin, TB_COL_LOAD);
    struct tb_range tp = tb_win_range(r->win, r->nwin, TB_COL_TPUT);
    const struct tb_analysis *a = &r->a;
    fprintf(f, "  %-22s %9llu  %6s %6s %7s  %8s %8s  %7s %7s  %9s  %6.1f%%  %6s\n", label,
            (unsigned long long)a->requests, fmt_num(ld.min, 2, b[0], 32),
            fmt_num(ld.mean, 2, b[1], 32), fmt_num(ld.max, 2, b[2], 32),
            fmt_num(tp.mean, 1, b[3], 32), fmt_num(tp.max, 1, b[4], 32),
            fmt_num(a->n_star, 2, b[5], 32), fmt_num(a->n_star_fit, 2, b[6], 32),
            fmt_num(a->tp_max, 1, b[7], 32), 100.0 * a->congested_fraction,
            fmt_num(a->episodes_per_min, 1, b[8], 32));
}

static void text_warnings(FILE *f, const char *label, const struct tb_analysis_result *r)
{
    const struct tb_analysis *a = &r->a;
    bool ns = isfinite(a->n_star), nf = isfinite(a->n_star_fit);
    if (ns && nf && a->disagree) {
        fprintf(f,
                "warning: %s: the two N* estimates disagree by %.0f%% (intervention %.2f, "
                "fit %.2f); the load/throughput curve has no clear knee, read N* with care\n",
                label, 100.0 * nstar_gap(a), a->n_star, a->n_star_fit);
    } else if (!ns && !nf && r->nwin > 0) {
        /* Why there is no congestion point: correlate's knee test. */
        fprintf(f, "note: %s: %s\n", label,
                a->n_star_reason[0] ? a->n_star_reason : "N* undetermined");
    } else if (ns != nf) {
        fprintf(f, "note: %s: only one N* estimate (%s) could be made\n", label,
                ns ? "intervention" : "fit");
    }
    if (r->have_self && isfinite(r->n_star_self))
        fprintf(f, "note: %s: waits on the tiers it calls; N* of its own resources, on "
                   "self-load (load minus that waiting): %.2f\n",
                label, r->n_star_self);
}

static int cmp_svc_requests(const void *pa, const void *pb)
{
    const struct tb_class_service *a = pa, *b = pb;
    if (a->requests != b->requests)
        return a->requests < b->requests ? 1 : -1;
    if (a->class_id != b->class_id)
        return a->class_id < b->class_id ? -1 : 1;
    return (a->period_start_ns > b->period_start_ns) - (a->period_start_ns < b->period_start_ns);
}

/* The service-time entries ordered by requests, most first; caller frees. */
static struct tb_class_service *sorted_svc(const struct tb_analysis_result *r)
{
    if (!r->nsvc)
        return NULL;
    struct tb_class_service *s = malloc(r->nsvc * sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, r->svc, r->nsvc * sizeof *s);
    qsort(s, r->nsvc, sizeof *s, cmp_svc_requests);
    return s;
}

static bool several_periods(const struct tb_analysis_result *r)
{
    for (size_t i = 1; i < r->nsvc; i++)
        if (r->svc[i].period_start_ns != r->svc[0].period_start_ns)
            return true;
    return false;
}

static void text_classes(FILE *f, const struct tb_analysis_result *r, const struct tb_catalog *cat)
{
    char b[4][32];
    fprintf(f, "\nwork unit: %s", r->a.work_unit_ns > 0
                                      ? fmt_dur((double)r->a.work_unit_ns, b[0], 32)
                                      : "undetermined");
    fprintf(f, "  (throughput is normalized to work units: a class is worth service/unit)\n");
    if (!r->nsvc) {
        fprintf(f, "no request classes with service-time estimates\n");
        return;
    }
    struct tb_class_service *s = sorted_svc(r);
    if (!s)
        return;
    bool periods = several_periods(r);
    size_t shown = TB_MIN(r->nsvc, (size_t)TOP_CLASSES);
    fprintf(f, "top classes (%zu of %zu by requests):\n", shown, r->nsvc);
    fprintf(f, "  %-40s %s%10s %7s %8s %9s  %s\n", "class", periods ? "  period  " : "",
            "service", "units", "samples", "requests", "method");
    for (size_t i = 0; i < shown; i++) {
        const char *name = class_name(cat, s[i].class_id);
        char period[32] = "";
        if (periods)
            snprintf(period, sizeof period, "%10.20s",
                     fmt_clock(s[i].period_start_ns, b[1], 32) + 3); /* "MM:SS.mmm" */
        fprintf(f, "  %-40.40s %s%10s %7.2f %8u %9u  %s\n", name, period,
                fmt_dur((double)s[i].service_ns, b[0], 32), s[i].units, s[i].samples,
                s[i].requests, tb_svc_method_name(s[i].method));
    }
    free(s);
}

/* Episodes listed in the text report at most; the rest are in the CSV. */
#define TEXT_EPISODES 100

/* qsort has no context argument; the text report runs on one thread. */
static const struct tb_episode *sort_ep;

static int cmp_ep_longest(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    int64_t da = sort_ep[a].end_ns - sort_ep[a].start_ns;
    int64_t db = sort_ep[b].end_ns - sort_ep[b].start_ns;
    if (da != db)
        return da > db ? -1 : 1;
    return (a > b) - (a < b);
}

/* When each level held: per level, its share of the top level, how long in
 * all, and its first intervals (JSON has them all). Only with several. */
#define TEXT_SPANS 6
static void text_level_spans(FILE *f, const struct tb_analysis_result *r)
{
    uint32_t nl = TB_MIN(r->a.n_levels, (uint32_t)TB_ARRAY_SIZE(r->a.levels));
    if (nl < 2 || !r->nspans)
        return;
    char b[2][32];
    for (uint32_t l = 0; l < nl; l++) {
        size_t cnt = 0;
        int64_t total = 0;
        for (size_t i = 0; i < r->nspans; i++)
            if (r->spans[i].level == l) {
                cnt++;
                total += r->spans[i].end_ns - r->spans[i].start_ns;
            }
        fprintf(f, "  level %u: %.1f work units/s (%.0f%% of the top), %zu interval%s, %s:", l + 1,
                r->a.levels[l], 100.0 * r->a.levels[l] / r->a.levels[nl - 1], cnt,
                cnt == 1 ? "" : "s", fmt_dur((double)total, b[0], 32));
        size_t shown = 0;
        for (size_t i = 0; i < r->nspans && shown < TEXT_SPANS; i++) {
            if (r->spans[i].level != l)
                continue;
            fprintf(f, "%s %s for %s", shown ? "," : "", fmt_clock(r->spans[i].start_ns, b[0], 32),
                    fmt_dur((double)(r->spans[i].end_ns - r->spans[i].start_ns), b[1], 32));
            shown++;
        }
        fprintf(f, "%s\n", cnt > shown ? ", ..." : "");
    }
}

static void text_episodes(FILE *f, const struct tb_analysis_result *r, int64_t origin)
{
    char b[6][32];
    struct tb_dur_dist d;
    tb_dur_dist(r->ep, r->nep, &d);
    size_t nfreeze = 0;
    for (size_t i = 0; i < r->nep; i++)
        nfreeze += r->ep[i].kind == TB_EP_FREEZE;
    double thr = tb_analysis_threshold(&r->a);
    if (!isfinite(thr)) {
        fprintf(f, "\ncongested: none; %s\n",
                r->a.n_star_reason[0] ? r->a.n_star_reason : "N* undetermined");
        /* Stalls need no knee (correlate.h, "Stalled"). */
        if (r->nep)
            fprintf(f, "stalls (requests inside, next to no completions): %zu freeze episodes, "
                       "%.1f per minute\n",
                    nfreeze, r->a.episodes_per_min);
    } else
        fprintf(f, "\ncongested (load >= %s%s): %.1f%% of windows; %zu episodes (%zu freeze, "
                   "%zu saturated), %.1f per minute\n",
                fmt_num(thr, 2, b[0], 32), isfinite(r->a.n_star) ? "" : ", the fit's N*",
                100.0 * r->a.congested_fraction, r->nep, nfreeze, r->nep - nfreeze,
                r->a.episodes_per_min);
    if (d.n) {
        fprintf(f, "episode durations: min %s, median %s, p90 %s, max %s\n",
                fmt_dur((double)d.min, b[0], 32), fmt_dur((double)d.p50, b[1], 32),
                fmt_dur((double)d.p90, b[2], 32), fmt_dur((double)d.max, b[3], 32));
        fprintf(f, " ");
        for (int i = 0; i < TB_DUR_BINS; i++)
            fprintf(f, " %s: %zu%s", tb_dur_bin_names[i], d.bins[i],
                    i < TB_DUR_BINS - 1 ? " |" : "\n");
    }
    if (r->a.n_levels) {
        fprintf(f, "throughput levels among congested windows: %u (", r->a.n_levels);
        for (uint32_t i = 0; i < r->a.n_levels && i < TB_ARRAY_SIZE(r->a.levels); i++)
            fprintf(f, "%s%.1f", i ? ", " : "", r->a.levels[i]);
        fprintf(f, " work units/s)%s\n",
                r->a.n_levels > 1 ? ": several plateaus, e.g. a CPU changing frequency" : "");
        text_level_spans(f, r);
    } else {
        fprintf(f, "throughput levels among congested windows: none (no congested windows)\n");
    }
    if (!r->nep)
        return;
    /* An hour of a busy tier can hold thousands of episodes: people get the
     * longest ones, in time order; --format csv lists them all. */
    size_t shown = r->nep;
    bool *keep = NULL;
    if (r->nep > TEXT_EPISODES) {
        size_t *idx = malloc(r->nep * sizeof *idx);
        keep = calloc(r->nep, sizeof *keep);
        if (idx && keep) {
            for (size_t i = 0; i < r->nep; i++)
                idx[i] = i;
            sort_ep = r->ep;
            qsort(idx, r->nep, sizeof *idx, cmp_ep_longest);
            for (size_t i = 0; i < TEXT_EPISODES; i++)
                keep[idx[i]] = true;
            shown = TEXT_EPISODES;
        } else {
            free(keep);
            keep = NULL;
        }
        free(idx);
    }
    if (shown < r->nep)
        fprintf(f, "\nepisodes (the %zu longest of %zu; --format csv lists all):\n", shown,
                r->nep);
    else
        fprintf(f, "\nepisodes (%zu):\n", r->nep);
    fprintf(f, "  %4s  %-12s %10s %9s %9s %9s %10s  %s\n", "#", "start UTC", "offset",
            "duration", "peak load", "mean load", "units/s", "kind");
    for (size_t i = 0; i < r->nep; i++) {
        if (keep && !keep[i])
            continue;
        const struct tb_episode *e = &r->ep[i];
        fprintf(f, "  %4zu  %-12s %+9.3fs %9s %9.2f %9.2f %10s  %s\n", i + 1,
                fmt_clock(e->start_ns, b[0], 32), (double)(e->start_ns - origin) / 1e9,
                fmt_dur((double)(e->end_ns - e->start_ns), b[1], 32), e->peak_load, e->mean_load,
                fmt_num(e->throughput, 1, b[2], 32), tb_episode_kind_name(e->kind));
    }
    free(keep);
}

const struct tb_tier_corr *tb_report_explains(const struct tb_report *r)
{
    /* The front tier's own load always follows its response time (Little's
     * law: load = rate x response time), so only the tiers behind it can
     * explain it; corr is sorted strongest first. */
    for (size_t i = 0; i < r->ncorr; i++) {
        if (r->corr[i].tier == r->front_tier)
            continue;
        if (isfinite(r->corr[i].r) && r->corr[i].r >= 0.5)
            return &r->corr[i];
        return NULL;
    }
    return NULL;
}

static void text_corr(FILE *f, const struct tb_report *r, const struct tb_catalog *cat)
{
    char b[3][32];
    if (!r->front_tier || !r->nfront) {
        fprintf(f, "\nresponse time: no front tier found to attribute response times to\n");
        return;
    }
    struct tb_range rt = tb_win_range(r->front_win, r->nfront, TB_COL_RT);
    fprintf(f, "\nresponse time of the front tier %s per window: mean %s, max %s\n",
            tier_name(cat, r->front_tier), fmt_dur(rt.mean, b[0], 32),
            fmt_dur(rt.max, b[1], 32));
    if (!r->ncorr)
        return;
    fprintf(f, "correlation of each tier's load with it:");
    for (size_t i = 0; i < r->ncorr; i++)
        fprintf(f, "  %s r=%s", tier_name(cat, r->corr[i].tier),
                fmt_num(r->corr[i].r, 2, b[2], 32));
    fprintf(f, "\n");
    const struct tb_tier_corr *best = tb_report_explains(r);
    /* A tier's load also holds the time it waits on the tiers it calls, so
     * the correlation favours callers; the diagnosis walks the waits down. */
    if (r->have_verdict)
        fprintf(f, "-> root cause (tbneck diagnose): %s\n", r->verdict.evidence);
    else if (best)
        fprintf(f, "-> %s's load explains the response-time spikes best (r=%.2f)\n",
                tier_name(cat, best->tier), best->r);
    else if (r->ncorr > 1)
        fprintf(f, "-> no tier's load explains the response-time spikes well (best r < 0.5)\n");
}

int tb_report_write_text(FILE *f, const struct tb_report *r, const struct tb_catalog *cat)
{
    char b[6][64];
    const struct tb_tier_info *t = tb_catalog_tier_get(cat, r->tier);
    const struct tb_analysis_result *tot = &r->total;
    int64_t first = tot->nwin ? tot->win[0].start_ns : r->from_ns;
    int64_t last = tot->nwin ? tot->win[tot->nwin - 1].start_ns + r->width_ns : r->to_ns;
    fprintf(f, "tier %s (%s), window %s", t ? t->name : "?", t ? t->proto : "?",
            tb_fmt_duration(r->width_ns, b[0], 64));
    if (tot->a.server)
        fprintf(f, ", server %s", server_name(cat, tot->a.server, b[1], 64));
    fprintf(f, "\n");
    if (tot->nwin)
        fprintf(f, "range %s %s .. %s UTC (%s, %zu windows)\n", fmt_date(first, b[2], 64),
                fmt_clock(first, b[3], 64), fmt_clock(last, b[4], 64),
                fmt_dur((double)(last - first), b[5], 64), tot->nwin);
    else
        fprintf(f, "no requests in the range\n");
    if (r->window_reason[0])
        fprintf(f, "window auto: %s\n", r->window_reason);

    fprintf(f, "\n  %-22s %9s  %-21s  %-17s\n", "", "", "load (in tier)", "completions/s");
    fprintf(f, "  %-22s %9s  %6s %6s %7s  %8s %8s  %7s %7s  %9s  %7s  %6s\n", "", "requests",
            "min", "mean", "max", "mean", "max", "N*", "N* fit", "TPmax u/s", "congest",
            "ep/min");
    char label[96];
    snprintf(label, sizeof label, "tier %s", t ? t->name : "?");
    if (tot->a.server)
        server_name(cat, tot->a.server, label, sizeof label);
    text_row(f, label, tot);
    for (size_t i = 0; i < r->nservers; i++)
        text_row(f, server_name(cat, r->servers[i].a.server, b[0], 64), &r->servers[i]);
    text_warnings(f, label, tot);
    for (size_t i = 0; i < r->nservers; i++)
        text_warnings(f, server_name(cat, r->servers[i].a.server, b[0], 64), &r->servers[i]);

    text_classes(f, tot, cat);
    tb_profile_write_text(f, r, cat, TOP_CLASSES);
    text_episodes(f, tot, first);
    text_corr(f, r, cat);
    if (r->have_cp)
        tb_cli_print_critpath(f, cat, &r->cp);
    /* With one server its episodes are the tier's, already listed. */
    for (size_t i = 0; r->nservers > 1 && i < r->nservers; i++) {
        if (!r->servers[i].nep)
            continue;
        fprintf(f, "\n-- server %s --", server_name(cat, r->servers[i].a.server, b[0], 64));
        text_episodes(f, &r->servers[i], first);
    }
    return ferror(f) ? TB_E_IO : 0;
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_range(FILE *f, const char *key, struct tb_range r)
{
    fprintf(f, "\"%s\":{\"min\":", key);
    tb_json_num(f, r.min);
    fputs(",\"mean\":", f);
    tb_json_num(f, r.mean);
    fputs(",\"max\":", f);
    tb_json_num(f, r.max);
    fputc('}', f);
}

static void json_episodes(FILE *f, const struct tb_episode *ep, size_t n)
{
    fputs("\"episodes\":[", f);
    for (size_t i = 0; i < n; i++) {
        char b[2][40];
        fprintf(f, "%s{\"start_ns\":%lld,\"end_ns\":%lld,\"start\":\"%s\",\"end\":\"%s\","
                   "\"duration_ns\":%lld,\"peak_load\":",
                i ? "," : "", (long long)ep[i].start_ns, (long long)ep[i].end_ns,
                tb_fmt_iso(ep[i].start_ns, b[0], 40), tb_fmt_iso(ep[i].end_ns, b[1], 40),
                (long long)(ep[i].end_ns - ep[i].start_ns));
        tb_json_num(f, ep[i].peak_load);
        fputs(",\"mean_load\":", f);
        tb_json_num(f, ep[i].mean_load);
        fputs(",\"throughput\":", f);
        tb_json_num(f, ep[i].throughput);
        fprintf(f, ",\"kind\":\"%s\"}", tb_episode_kind_name(ep[i].kind));
    }
    fputc(']', f);
}

/* The fields shared by the tier object and each server object. */
static void json_analysis(FILE *f, const struct tb_analysis_result *r)
{
    const struct tb_analysis *a = &r->a;
    fprintf(f, "\"requests\":%llu,\"windows\":%zu,\"n_star\":", (unsigned long long)a->requests,
            r->nwin);
    tb_json_num(f, a->n_star);
    fputs(",\"n_star_fit\":", f);
    tb_json_num(f, a->n_star_fit);
    fprintf(f, ",\"n_star_disagree\":%s,\"n_star_status\":\"%s\",\"n_star_reason\":",
            a->disagree ? "true" : "false", tb_nstar_why_status(a->n_star_why));
    tb_json_str(f, a->n_star_reason);
    fputs(",\"n_star_self\":", f);
    tb_json_num(f, r->have_self ? r->n_star_self : NAN);
    fputs(",\"threshold\":", f);
    tb_json_num(f, tb_analysis_threshold(a));
    fputs(",\"tp_max\":", f);
    tb_json_num(f, a->tp_max);
    fputs(",\"slope\":", f);
    tb_json_num(f, a->slope);
    fprintf(f, ",\"work_unit_ns\":%lld,\"congested_fraction\":", (long long)a->work_unit_ns);
    tb_json_num(f, a->congested_fraction);
    fputs(",\"episodes_per_min\":", f);
    tb_json_num(f, a->episodes_per_min);
    fputs(",\"levels\":[", f);
    for (uint32_t i = 0; i < a->n_levels && i < TB_ARRAY_SIZE(a->levels); i++) {
        if (i)
            fputc(',', f);
        tb_json_num(f, a->levels[i]);
    }
    fputs("],\"level_spans\":[", f);
    for (size_t i = 0; i < r->nspans; i++) {
        const struct tb_level_span *sp = &r->spans[i];
        char b[2][40];
        fprintf(f, "%s{\"level\":%u,\"start_ns\":%lld,\"end_ns\":%lld,\"start\":\"%s\","
                   "\"end\":\"%s\",\"windows\":%u,\"throughput\":",
                i ? "," : "", sp->level, (long long)sp->start_ns, (long long)sp->end_ns,
                tb_fmt_iso(sp->start_ns, b[0], 40), tb_fmt_iso(sp->end_ns, b[1], 40),
                sp->windows);
        tb_json_num(f, sp->throughput);
        fputc('}', f);
    }
    fputs("],", f);
    json_range(f, "load", tb_win_range(r->win, r->nwin, TB_COL_LOAD));
    fputc(',', f);
    json_range(f, "throughput", tb_win_range(r->win, r->nwin, TB_COL_TPUT));
    fputc(',', f);
    json_range(f, "norm_throughput", tb_win_range(r->win, r->nwin, TB_COL_NORM_TPUT));
    fputc(',', f);
    json_range(f, "rt_ns", tb_win_range(r->win, r->nwin, TB_COL_RT));
    struct tb_dur_dist d;
    tb_dur_dist(r->ep, r->nep, &d);
    fprintf(f, ",\"episode_durations\":{\"count\":%zu", d.n);
    if (d.n)
        fprintf(f, ",\"min_ns\":%lld,\"p50_ns\":%lld,\"p90_ns\":%lld,\"max_ns\":%lld",
                (long long)d.min, (long long)d.p50, (long long)d.p90, (long long)d.max);
    fputs(",\"histogram\":{", f);
    for (int i = 0; i < TB_DUR_BINS; i++)
        fprintf(f, "%s\"%s\":%zu", i ? "," : "", tb_dur_bin_names[i], d.bins[i]);
    fputs("}},", f);
    json_episodes(f, r->ep, r->nep);
}

int tb_report_write_json(FILE *f, const struct tb_report *r, const struct tb_catalog *cat)
{
    char b[TB_ADDR_STRLEN];
    const struct tb_analysis_result *tot = &r->total;
    fputs("{\"tier\":", f);
    tb_json_str(f, tier_name(cat, r->tier));
    const struct tb_tier_info *t = tb_catalog_tier_get(cat, r->tier);
    fputs(",\"proto\":", f);
    tb_json_str(f, t ? t->proto : "");
    fputs(",\"server\":", f);
    tb_json_str(f, server_name(cat, tot->a.server, b, sizeof b));
    int64_t first = tot->nwin ? tot->win[0].start_ns : 0;
    int64_t last = tot->nwin ? tot->win[tot->nwin - 1].start_ns + r->width_ns : 0;
    char ib[2][40];
    fprintf(f, ",\"window_ns\":%lld,\"from_ns\":%lld,\"to_ns\":%lld,\"from\":\"%s\",\"to\":\"%s\",",
            (long long)r->width_ns, (long long)first, (long long)last,
            tb_fmt_iso(first, ib[0], 40), tb_fmt_iso(last, ib[1], 40));
    if (r->window_reason[0]) {
        fputs("\"window_reason\":", f);
        tb_json_str(f, r->window_reason);
        fputc(',', f);
    }
    json_analysis(f, tot);

    fputs(",\"classes\":[", f);
    struct tb_class_service *s = sorted_svc(tot);
    for (size_t i = 0; s && i < tot->nsvc; i++) {
        fputs(i ? ",{\"class\":" : "{\"class\":", f);
        tb_json_str(f, class_name(cat, s[i].class_id));
        fprintf(f, ",\"period_start_ns\":%lld,\"period_start\":\"%s\",\"service_ns\":%lld,"
                   "\"units\":",
                (long long)s[i].period_start_ns, tb_fmt_iso(s[i].period_start_ns, ib[0], 40),
                (long long)s[i].service_ns);
        tb_json_num(f, s[i].units);
        fprintf(f, ",\"samples\":%u,\"requests\":%u,\"method\":\"%s\"}", s[i].samples,
                s[i].requests, tb_svc_method_name(s[i].method));
    }
    free(s);
    fputs("],\"profile\":", f);
    tb_profile_write_json(f, r, cat);
    fputs(",\"servers\":[", f);
    for (size_t i = 0; i < r->nservers; i++) {
        fputs(i ? ",{\"server\":" : "{\"server\":", f);
        tb_json_str(f, server_name(cat, r->servers[i].a.server, b, sizeof b));
        fputc(',', f);
        json_analysis(f, &r->servers[i]);
        fputc('}', f);
    }
    fputs("],\"correlation\":{\"front_tier\":", f);
    if (r->front_tier)
        tb_json_str(f, tier_name(cat, r->front_tier));
    else
        fputs("null", f);
    const struct tb_tier_corr *best = tb_report_explains(r);
    fputs(",\"explained_by\":", f);
    if (best)
        tb_json_str(f, tier_name(cat, best->tier));
    else
        fputs("null", f);
    fputs(",\"tiers\":[", f);
    for (size_t i = 0; i < r->ncorr; i++) {
        fputs(i ? ",{\"tier\":" : "{\"tier\":", f);
        tb_json_str(f, tier_name(cat, r->corr[i].tier));
        fputs(",\"r\":", f);
        tb_json_num(f, r->corr[i].r);
        fprintf(f, ",\"requests\":%llu}", (unsigned long long)r->corr[i].requests);
    }
    fputs("]}", f);
    if (r->have_verdict) {
        const struct tb_diag_verdict *v = &r->verdict;
        char sb[TB_ADDR_STRLEN];
        fputs(",\"root_cause\":{\"tier\":", f);
        tb_json_str(f, v->tier ? tier_name(cat, v->tier) : "");
        fputs(",\"server\":", f);
        tb_json_str(f, v->server ? server_name(cat, v->server, sb, sizeof sb) : "*");
        fputs(",\"cause\":", f);
        tb_json_str(f, tb_cause_name(v->cause));
        fputs(",\"resource\":", f);
        tb_json_str(f, v->resource);
        fputs(",\"evidence\":", f);
        tb_json_str(f, v->evidence);
        fputs("}", f);
    }
    if (r->have_cp) {
        struct tb_buf cb;
        tb_buf_init(&cb);
        tb_critpath_json(&cb, cat, &r->cp);
        if (!tb_buf_ok(&cb)) {
            tb_buf_free(&cb);
            return TB_E_NOMEM;
        }
        fputs(",\"critical_path\":", f);
        fwrite(cb.p, 1, cb.len, f);
        tb_buf_free(&cb);
    }
    fputs("}\n", f);
    return ferror(f) ? TB_E_IO : 0;
}

/* ---- CSV ----------------------------------------------------------------- */

static void csv_episodes(FILE *f, const char *tier, const char *server,
                         const struct tb_analysis_result *r)
{
    for (size_t i = 0; i < r->nep; i++) {
        const struct tb_episode *e = &r->ep[i];
        tb_csv_field(f, tier);
        fputc(',', f);
        tb_csv_field(f, server);
        char d[3][40];
        fprintf(f, ",%lld,%lld,%lld,%s,%s,%s,%s\n", (long long)e->start_ns,
                (long long)e->end_ns, (long long)(e->end_ns - e->start_ns),
                tb_fmt_double(e->peak_load, d[0], 40), tb_fmt_double(e->mean_load, d[1], 40),
                tb_fmt_double(e->throughput, d[2], 40), tb_episode_kind_name(e->kind));
    }
}

int tb_report_write_csv(FILE *f, const struct tb_report *r, const struct tb_catalog *cat)
{
    char b[TB_ADDR_STRLEN];
    const char *tier = tier_name(cat, r->tier);
    fputs(TB_EPISODE_CSV_HEADER "\n", f);
    csv_episodes(f, tier, server_name(cat, r->total.a.server, b, sizeof b), &r->total);
    for (size_t i = 0; i < r->nservers; i++)
        csv_episodes(f, tier, server_name(cat, r->servers[i].a.server, b, sizeof b),
                     &r->servers[i]);
    return ferror(f) ? TB_E_IO : 0;
}
