/* SPDX-License-Identifier: MIT */
/* api.c — the JSON API of the dashboard: tiers, windows, scatter, episodes,
 * analysis, capture health and the event stream. */
#include "web-int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze.h"
#include "diagnose.h"

#define LIVE_RECENT_NS (10 * TB_NS_PER_SEC)
#define API_MAX_WINDOWS 2000000 /* ~100 MB of JSON: a range that large is a mistake */

/* Parameters shared by the per-tier endpoints. */
struct params {
    uint32_t tier;
    const char *tier_name;
    uint32_t server;
    int64_t width_ns, from_ns, to_ns;
    const char *window_reason; /* width=auto: the choice and why (borrowed), else NULL */
};

/* An answer computed on the worker thread, sent from the loop thread. */
struct reply {
    int status;
    const char *ctype; /* NULL: application/json */
    struct tb_buf body;
};

static void reply_error(struct reply *rp, int status, const char *msg)
{
    tb_buf_free(&rp->body);
    rp->status = status;
    tb_buf_puts(&rp->body, "{\"error\": ");
    tb_buf_json_str(&rp->body, msg);
    tb_buf_puts(&rp->body, "}\n");
}

static void reply_buf(struct reply *rp, struct tb_buf *b)
{
    tb_buf_free(&rp->body);
    rp->status = 200;
    rp->body = *b;
    tb_buf_init(b);
}

/* from/to as the command line takes them (tb_parse_time_ref): relative to
 * the stored span of the tier (0: every tier) or to the wall clock. An empty
 * or absent value leaves its bound open. False with a message otherwise. */
static bool parse_range(struct tb_web *w, uint32_t tier, const char *from, const char *to,
                        int64_t *from_ns, int64_t *to_ns, char *msg, size_t len)
{
    struct tb_time_ref ref = {0};
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) == 0)
        ref.now_ns = (int64_t)now.tv_sec * TB_NS_PER_SEC + now.tv_nsec;
    if (tb_time_needs_span(from) || tb_time_needs_span(to))
        tb_store_time_span(w->st, tier, &ref.start_ns, &ref.end_ns);
    const char *name[2] = {"from", "to"}, *val[2] = {from, to};
    int64_t *out[2] = {from_ns, to_ns};
    for (int i = 0; i < 2; i++)
        if (val[i] && val[i][0] && tb_parse_time_ref(val[i], &ref, out[i]) < 0) {
            snprintf(msg, len, "bad '%s' time '%.40s': expected 2023-11-14 22:13:25.350 (UTC), "
                     "seconds or ns since the epoch, now-5m, start+10s or end-1m", name[i], val[i]);
            return false;
        }
    return true;
}

/* width=auto: the width `tbneck report --window auto` takes for the same tier,
 * server and range (tb_analyze_window_auto, the one implementation), kept
 * while the tier's request count stays (the page asks four endpoints at
 * once; each choice analyses up to seven widths). */
static bool choose_width(struct tb_web *w, struct reply *c, struct params *p)
{
    uint64_t count = 0;
    if (tb_store_request_count(w->st, p->tier, &count) < 0) {
        reply_error(c, 500, "cannot read the database");
        return false;
    }
    struct tb_web_auto *a = &w->auto_width;
    if (!(a->used && a->tier == p->tier && a->server == p->server && a->from_ns == p->from_ns &&
          a->to_ns == p->to_ns && a->count == count)) {
        struct tb_analyze_opts o = {.width_ns = TB_WINDOW_DEFAULT_NS, .from_ns = p->from_ns,
                                    .to_ns = p->to_ns, .server = p->server};
        struct tb_window_choice wc;
        char err[256] = "", msg[400];
        int rc = tb_analyze_window_auto(w->st, w->cat, p->tier, &o, &wc, err, sizeof err);
        if (rc != 0) {
            snprintf(msg, sizeof msg, "width auto for tier '%s' failed: %s", p->tier_name,
                     err[0] ? err : tb_strerror(rc));
            reply_error(c, rc == TB_E_NOTFOUND ? 404 : 500, msg);
            return false;
        }
        *a = (struct tb_web_auto){.used = true, .tier = p->tier, .server = p->server,
                                  .from_ns = p->from_ns, .to_ns = p->to_ns, .count = count,
                                  .width_ns = wc.width_ns};
        snprintf(a->reason, sizeof a->reason, "%s", wc.reason);
    }
    p->width_ns = a->width_ns;
    p->window_reason = a->reason;
    return true;
}

/* Reads tier, width, server, from and to. Answers the request itself (400 or
 * 404) and returns false when they are not usable. */
static bool get_params(struct tb_web *w, struct reply *c, const char *q, struct params *p,
                       bool need_tier)
{
    char tier[TB_NAME_MAX + 1], width[64], server[TB_ADDR_STRLEN], from[64], to[64], msg[256];
    memset(p, 0, sizeof *p);
    p->width_ns = TB_WINDOW_DEFAULT_NS;
    p->from_ns = INT64_MIN;
    p->to_ns = INT64_MAX;
    int rt = tb_http_query_get(q, "tier", tier, sizeof tier);
    int rw = tb_http_query_get(q, "width", width, sizeof width);
    int rs = tb_http_query_get(q, "server", server, sizeof server);
    int rf = tb_http_query_get(q, "from", from, sizeof from);
    int rto = tb_http_query_get(q, "to", to, sizeof to);
    if (rt < 0 || rw < 0 || rs < 0 || rf < 0 || rto < 0) {
        reply_error(c, 400, "malformed query string");
        return false;
    }
    bool width_auto = rw == 1 && strcmp(width, "auto") == 0;
    if (width_auto && !need_tier) {
        reply_error(c, 400, "width 'auto' needs a tier: it is chosen from that tier's windows");
        return false;
    }
    if (rw == 1 && !width_auto) {
        int64_t ns;
        if (tb_parse_window(width, &ns) < 0) {
            snprintf(msg, sizeof msg, "bad width '%.40s': expected a duration from 1ms to 1h", width);
            reply_error(c, 400, msg);
            return false;
        }
        p->width_ns = ns;
    }
    if (!need_tier)
        return true;
    if (rt != 1 || !tier[0]) {
        reply_error(c, 400, "missing parameter 'tier'");
        return false;
    }
    if (tb_catalog_tier_find(w->cat, tier, &p->tier) < 0) {
        tb__web_reload_catalog(w); /* it may have appeared since (live capture) */
        if (tb_catalog_tier_find(w->cat, tier, &p->tier) < 0) {
            snprintf(msg, sizeof msg, "unknown tier '%.64s'", tier);
            reply_error(c, 404, msg);
            return false;
        }
    }
    p->tier_name = tb_catalog_tier_get(w->cat, p->tier)->name;
    if (rs == 1 && server[0] && strcmp(server, "*") != 0) {
        struct tb_addr a;
        if (tb_addr_parse(server, &a) < 0) {
            snprintf(msg, sizeof msg, "bad server '%.60s': expected ADDR:PORT", server);
            reply_error(c, 400, msg);
            return false;
        }
        const struct tb_server_info *si;
        if (tb_catalog_server_find(w->cat, &a, &p->server) < 0 ||
            !(si = tb_catalog_server_get(w->cat, p->server)) || si->tier != p->tier) {
            snprintf(msg, sizeof msg, "server '%.60s' is not in tier '%s'", server, p->tier_name);
            reply_error(c, 404, msg);
            return false;
        }
    }
    if (!parse_range(w, p->tier, rf == 1 ? from : NULL, rto == 1 ? to : NULL, &p->from_ns,
                     &p->to_ns, msg, sizeof msg)) {
        reply_error(c, 400, msg);
        return false;
    }
    if (p->from_ns >= p->to_ns) {
        reply_error(c, 400, "'from' must be before 'to'");
        return false;
    }
    if (width_auto && !choose_width(w, c, p))
        return false;
    if (p->from_ns != INT64_MIN && p->to_ns != INT64_MAX &&
        (p->to_ns - p->from_ns) / p->width_ns > API_MAX_WINDOWS) {
        reply_error(c, 400, "range too large for this width: narrow from/to or widen");
        return false;
    }
    return true;
}

/* Runs (or loads from the database) the analysis the endpoint needs. The page
 * asks for windows, scatter, episodes and analysis of the same tier and width
 * at once; a few results are kept, keyed by their parameters and the tier's
 * request count (which changes while a capture writes), so that costs one
 * analysis rather than four. The result is borrowed from the cache. */
static const struct tb_analysis_result *analyze(struct tb_web *w, struct reply *c,
                                                const struct params *p)
{
    uint64_t count = 0;
    if (tb_store_request_count(w->st, p->tier, &count) < 0) {
        reply_error(c, 500, "cannot read the database");
        return NULL;
    }
    struct tb_web_cached *slot = &w->cache[0];
    w->cache_clock++;
    for (size_t i = 0; i < TB_WEB_CACHE; i++) {
        struct tb_web_cached *e = &w->cache[i];
        if (e->used && e->tier == p->tier && e->server == p->server &&
            e->width_ns == p->width_ns && e->from_ns == p->from_ns && e->to_ns == p->to_ns &&
            e->count == count) {
            e->last_use = w->cache_clock;
            return &e->res;
        }
        if (!e->used || (slot->used && e->last_use < slot->last_use))
            slot = e;
    }
    struct tb_analyze_opts o = {
        .width_ns = p->width_ns,
        .from_ns = p->from_ns,
        .to_ns = p->to_ns,
        .server = p->server,
    };
    char err[256] = "";
    struct tb_analysis_result res;
    memset(&res, 0, sizeof res);
    int rc = tb_analyze_tier(w->st, w->cat, p->tier, &o, &res, err, sizeof err);
    if (rc < 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "analysis of tier '%s' failed: %s", p->tier_name,
                 err[0] ? err : tb_strerror(rc));
        reply_error(c, rc == TB_E_NOTFOUND ? 404 : 500, msg);
        return NULL;
    }
    if (res.nwin > API_MAX_WINDOWS) {
            reply_error(c, 400, "too many windows for this width: narrow from/to or widen");
        return NULL;
    }
    if (slot->used)
        tb_analysis_result_free(&slot->res);
    *slot = (struct tb_web_cached){
        .used = true,
        .tier = p->tier,
        .server = p->server,
        .width_ns = p->width_ns,
        .from_ns = p->from_ns,
        .to_ns = p->to_ns,
        .count = count,
        .last_use = w->cache_clock,
        .res = res,
    };
    return &slot->res;
}

void tb__web_cache_clear(struct tb_web *w)
{
    for (size_t i = 0; i < TB_WEB_CACHE; i++) {
        if (w->cache[i].used)
            tb_analysis_result_free(&w->cache[i].res);
        w->cache[i].used = false;
    }
    w->auto_width.used = false;
}

static void head(struct tb_buf *b, const struct params *p)
{
    tb_buf_json_kstr(b, "{\"tier\":", p->tier_name);
    tb_buf_printf(b, ",\"server\":%u,\"width_ns\":", p->server);
    tb_buf_json_i64(b, p->width_ns);
    if (p->window_reason)
        tb_buf_json_kstr(b, ",\"window_reason\":", p->window_reason);
}

/* The analysis the parameters ask for, and b started with its head; NULL
 * when it failed (the request is then answered). */
static const struct tb_analysis_result *analyze_head(struct tb_web *w, struct reply *c,
                                                     const struct params *p, struct tb_buf *b)
{
    const struct tb_analysis_result *r = analyze(w, c, p);
    if (r) {
        tb_buf_init(b);
        head(b, p);
    }
    return r;
}

/* Ends the document with `tail` (the trailing comma of a list written as
 * element-comma dropped first) and sends it. */
static void reply_json(struct reply *c, struct tb_buf *b, const char *tail)
{
    tb_buf_trim_comma(b);
    tb_buf_puts(b, tail);
    reply_buf(c, b);
}

/* A column of the windows as a JSON array: "name":[v0,v1,...]. */
#define COLUMN(b, name, res, expr)                                    \
    do {                                                              \
        tb_buf_puts(b, ",\"" name "\":[");                            \
        for (size_t i_ = 0; i_ < (res)->nwin; i_++) {                 \
            const struct tb_window *win = &(res)->win[i_];            \
            (void)win;                                                \
            expr;                                                     \
            tb_buf_add(b, ",", 1);                                    \
        }                                                             \
        tb_buf_trim_comma(b);                                         \
        tb_buf_puts(b, "]");                                          \
    } while (0)

static void api_tiers(struct tb_web *w, struct reply *c)
{
    tb__web_reload_catalog(w);
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_puts(&b, "{\"tiers\":[");
    uint32_t nt = tb_catalog_tier_count(w->cat), ns = tb_catalog_server_count(w->cat);
    for (uint32_t t = 1; t <= nt; t++) {
        const struct tb_tier_info *ti = tb_catalog_tier_get(w->cat, t);
        if (!ti)
            continue;
        uint64_t nreq = 0;
        int64_t first = 0, last = 0;
        tb_store_request_count(w->st, t, &nreq);
        if (nreq)
            tb_store_time_span(w->st, t, &first, &last);
        tb_buf_printf(&b, "{\"id\":%u,\"name\":", t);
        tb_buf_json_str(&b, ti->name);
        tb_buf_json_kstr(&b, ",\"proto\":", ti->proto);
        tb_buf_printf(&b, ",\"configured\":%s,\"requests\":%" PRIu64 ",\"first_ns\":",
                      ti->configured ? "true" : "false", nreq);
        tb_buf_json_i64(&b, first);
        tb_buf_json_ki64(&b, ",\"last_ns\":", last);
        tb_buf_puts(&b, ",\"servers\":[");
        for (uint32_t s = 1; s <= ns; s++) {
            const struct tb_server_info *si = tb_catalog_server_get(w->cat, s);
            if (!si || si->tier != t)
                continue;
            char a[TB_ADDR_STRLEN];
            tb_buf_json_str(&b, tb_addr_fmt(&si->addr, a, sizeof a));
            tb_buf_add(&b, ",", 1);
        }
        tb_buf_trim_comma(&b);
        tb_buf_puts(&b, "]},");
    }
    reply_json(c, &b, "]}\n");
}

static void api_windows(struct tb_web *w, struct reply *c, const struct params *p)
{
    struct tb_buf b;
    const struct tb_analysis_result *r = analyze_head(w, c, p, &b);
    if (!r)
        return;
    tb_buf_printf(&b, ",\"count\":%zu", r->nwin);
    COLUMN(&b, "start_ns", r, tb_buf_json_i64(&b, win->start_ns));
    COLUMN(&b, "load", r, tb_buf_json_num(&b, win->load));
    COLUMN(&b, "completions", r, tb_buf_printf(&b, "%u", win->completions));
    COLUMN(&b, "throughput", r, tb_buf_json_num(&b, win->throughput));
    COLUMN(&b, "norm_throughput", r, tb_buf_json_num(&b, win->norm_throughput));
    COLUMN(&b, "rt_mean_ns", r, tb_buf_json_num(&b, win->rt_mean_ns));
    COLUMN(&b, "rt_p95_ns", r, tb_buf_json_num(&b, win->rt_p95_ns));
    reply_json(c, &b, "}\n");
}

static void analysis_fields(struct tb_buf *b, const struct tb_analysis *a)
{
    tb_buf_json_ki64(b, ",\"from_ns\":", a->from_ns);
    tb_buf_json_ki64(b, ",\"to_ns\":", a->to_ns);
    tb_buf_printf(b, ",\"requests\":%" PRIu64 ",\"n_star\":", a->requests);
    tb_buf_json_num(b, a->n_star);
    tb_buf_json_knum(b, ",\"n_star_fit\":", a->n_star_fit);
    tb_buf_json_knum(b, ",\"tp_max\":", a->tp_max);
    tb_buf_json_knum(b, ",\"slope\":", a->slope);
    tb_buf_json_ki64(b, ",\"work_unit_ns\":", a->work_unit_ns);
    tb_buf_json_knum(b, ",\"congested_fraction\":", a->congested_fraction);
    tb_buf_json_knum(b, ",\"episodes_per_min\":", a->episodes_per_min);
    tb_buf_puts(b, ",\"levels\":[");
    for (uint32_t i = 0; i < a->n_levels && i < TB_ARRAY_SIZE(a->levels); i++) {
        tb_buf_json_num(b, a->levels[i]);
        tb_buf_add(b, ",", 1);
    }
    tb_buf_trim_comma(b);
    tb_buf_printf(b, "],\"disagree\":%s", a->disagree ? "true" : "false");
    tb_buf_printf(b, ",\"n_star_status\":\"%s\",\"n_star_reason\":",
                  tb_nstar_why_status(a->n_star_why));
    tb_buf_json_str(b, a->n_star_reason);
}

static void api_scatter(struct tb_web *w, struct reply *c, const struct params *p)
{
    struct tb_buf b;
    const struct tb_analysis_result *r = analyze_head(w, c, p, &b);
    if (!r)
        return;
    const struct tb_analysis *a = &r->a;
    /* Congested and frozen windows by the rule the episodes were cut with
     * (correlate.h, struct tb_congestion), as the report and its plot. */
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, a, r->win, r->nwin);
    uint8_t *st = malloc(r->nwin ? r->nwin : 1);
    if (!st) {
        tb_buf_free(&b);
        reply_error(c, 500, "out of memory");
        return;
    }
    tb_congestion_states(&rule, r->win, r->nwin, r->ep, r->nep, st);
    tb_buf_json_knum(&b, ",\"n_star\":", a->n_star);
    tb_buf_json_knum(&b, ",\"n_star_fit\":", a->n_star_fit);
    tb_buf_json_knum(&b, ",\"tp_max\":", a->tp_max);
    tb_buf_json_knum(&b, ",\"slope\":", a->slope);
    tb_buf_json_knum(&b, ",\"threshold\":", rule.threshold);
    tb_buf_printf(&b, ",\"count\":%zu", r->nwin);
    COLUMN(&b, "start_ns", r, tb_buf_json_i64(&b, win->start_ns));
    COLUMN(&b, "load", r, tb_buf_json_num(&b, win->load));
    COLUMN(&b, "throughput", r, tb_buf_json_num(&b, win->throughput));
    COLUMN(&b, "norm_throughput", r, tb_buf_json_num(&b, win->norm_throughput));
    /* Congested is load >= the threshold (a stalled window of a freeze
     * episode is in it without being congested: its freeze column says so). */
    COLUMN(&b, "congested", r,
           tb_buf_puts(&b, tb_congestion_congested(&rule, win->load) ? "1" : "0"));
    COLUMN(&b, "freeze", r, tb_buf_puts(&b, st[i_] == TB_WIN_FROZEN ? "1" : "0"));
    free(st);
    reply_json(c, &b, "}\n");
}

static void api_episodes(struct tb_web *w, struct reply *c, const struct params *p)
{
    struct tb_buf b;
    const struct tb_analysis_result *r = analyze_head(w, c, p, &b);
    if (!r)
        return;
    tb_buf_printf(&b, ",\"count\":%zu,\"episodes\":[", r->nep);
    for (size_t i = 0; i < r->nep; i++) {
        tb__web_json_episode(&b, NULL, &r->ep[i]);
        tb_buf_add(&b, ",", 1);
    }
    reply_json(c, &b, "]}\n");
}

static void api_analysis(struct tb_web *w, struct reply *c, const struct params *p)
{
    struct tb_buf b;
    const struct tb_analysis_result *r = analyze_head(w, c, p, &b);
    if (!r)
        return;
    analysis_fields(&b, &r->a);
    tb_buf_printf(&b, ",\"windows\":%zu,\"episodes\":%zu,\"classes\":[", r->nwin, r->nep);
    /* The costliest classes first would need a sort; the page shows a few, so
     * the service table is sent as computed and the client sorts. */
    for (size_t i = 0; i < r->nsvc && i < 200; i++) {
        const struct tb_class_service *s = &r->svc[i];
        const struct tb_class_info *ci = tb_catalog_class_get(w->cat, s->class_id);
        tb_buf_json_kstr(&b, "{\"class\":", ci ? ci->text : "?");
        tb_buf_json_ki64(&b, ",\"service_ns\":", s->service_ns);
        tb_buf_json_knum(&b, ",\"units\":", s->units);
        tb_buf_printf(&b, ",\"requests\":%u},", s->requests);
    }
    reply_json(c, &b, "]}\n");
}

/* The root cause over everything stored (or from/to), at the width asked:
 * the same object as `tbneck diagnose --format json`. */
static void api_diagnose(struct tb_web *w, struct reply *c, const char *q)
{
    char width[64], from[64], to[64], msg[600];
    struct tb_diag_opts o = {.width_ns = TB_WINDOW_DEFAULT_NS, .from_ns = INT64_MIN,
                             .to_ns = INT64_MAX};
    int rw = tb_http_query_get(q, "width", width, sizeof width);
    int rf = tb_http_query_get(q, "from", from, sizeof from);
    int rt = tb_http_query_get(q, "to", to, sizeof to);
    if (rw < 0 || rf < 0 || rt < 0) {
        reply_error(c, 400, "malformed query string");
        return;
    }
    if (rw == 1 && tb_parse_window(width, &o.width_ns) < 0) {
        snprintf(msg, sizeof msg, "bad width '%.40s': expected a duration from 1ms to 1h", width);
        reply_error(c, 400, msg);
        return;
    }
    if (!parse_range(w, 0, rf == 1 ? from : NULL, rt == 1 ? to : NULL, &o.from_ns, &o.to_ns,
                     msg, sizeof msg)) {
        reply_error(c, 400, msg);
        return;
    }
    if (o.from_ns >= o.to_ns) {
        reply_error(c, 400, "'from' must be before 'to'");
        return;
    }
    tb__web_reload_catalog(w);
    struct tb_diagnosis d;
    char err[512] = "";
    if (tb_diagnose(w->st, w->cat, &o, &d, err, sizeof err) != 0) {
        snprintf(msg, sizeof msg, "diagnose: %s", err);
        reply_error(c, 500, msg);
        return;
    }
    struct tb_buf b;
    tb_buf_init(&b);
    tb_diagnosis_json(&b, w->cat, &d);
    tb_diagnosis_free(&d);
    reply_buf(c, &b);
}

static void api_health(struct tb_web *w, struct reply *c)
{
    struct tb_capture_row *cap = NULL;
    size_t ncap = 0;
    struct tb_health_row *h = NULL;
    size_t nh = 0;
    if (tb_store_captures(w->st, &cap, &ncap) < 0 ||
        tb_store_get_health(w->st, INT64_MIN, INT64_MAX, &h, &nh) < 0) {
        free(cap);
        reply_error(c, 500, "cannot read capture health from the database");
        return;
    }
    struct tb_buf b;
    tb_buf_init(&b);
    bool partial = false;
    tb_buf_puts(&b, "{\"captures\":[");
    for (size_t i = 0; i < ncap; i++) {
        const struct tb_capture_row *r = &cap[i];
        tb_buf_printf(&b, "{\"id\":%" PRId64 ",\"source\":", r->id);
        tb_buf_json_str(&b, r->source);
        tb_buf_json_ki64(&b, ",\"started_ns\":", r->started_ns);
        tb_buf_json_ki64(&b, ",\"ended_ns\":", r->ended_ns);
        tb_buf_printf(&b,
                      ",\"packets\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"kernel_drops\":%" PRIu64
                      ",\"if_drops\":%" PRIu64 ",\"parse_errors\":%" PRIu64 ",\"gaps\":%" PRIu64
                      ",\"evicted_flows\":%" PRIu64 ",\"requests\":%" PRIu64
                      ",\"state\":\"%s\",\"requests_seen\":%" PRIu64
                      ",\"requests_lost\":%" PRIu64 ",\"unanswered\":%" PRIu64
                      ",\"abandoned\":%" PRIu64 "},",
                      r->packets, r->bytes, r->kernel_drops, r->if_drops, r->parse_errors,
                      r->gaps, r->evicted_flows, r->requests, tb_capture_state_name(r->state),
                      r->requests_seen, r->requests_lost, r->unanswered, r->abandoned);
        partial = partial || r->state == TB_CAPTURE_PARTIAL;
    }
    tb_buf_trim_comma(&b);
    /* The health rows are cumulative counters per capture; the page wants
     * per-second figures, so consecutive rows are differenced (a counter that
     * goes down starts a new capture). */
    tb_buf_puts(&b, "],\"seconds\":[");
    for (size_t i = 0; i < nh; i++) {
        const struct tb_health_row *r = &h[i], *pr = i ? &h[i - 1] : NULL;
        bool cont = pr && r->packets >= pr->packets && r->kernel_drops >= pr->kernel_drops &&
                    r->if_drops >= pr->if_drops;
        tb_buf_json_ki64(&b, "{\"ts_ns\":", r->ts_ns);
        tb_buf_printf(&b,
                      ",\"packets\":%" PRIu64 ",\"kernel_drops\":%" PRIu64 ",\"if_drops\":%" PRIu64
                      ",\"d_packets\":%" PRIu64 ",\"d_kernel_drops\":%" PRIu64
                      ",\"d_if_drops\":%" PRIu64 "},",
                      r->packets, r->kernel_drops, r->if_drops,
                      cont ? r->packets - pr->packets : r->packets,
                      cont ? r->kernel_drops - pr->kernel_drops : r->kernel_drops,
                      cont ? r->if_drops - pr->if_drops : r->if_drops);
    }
    tb_buf_trim_comma(&b);
    /* Whether anything can stream: this server runs inside a live capture,
     * or another process's live capture wrote a health row in the last
     * LIVE_RECENT_NS (it writes one a second). The page opens the event
     * stream only then, so a finished database leaves nothing pending (a
     * headless browser's screenshot waits for pending requests). */
    bool live = w->live != NULL;
    if (!live && nh) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
        live = now - h[nh - 1].ts_ns < LIVE_RECENT_NS;
    }
    tb_buf_printf(&b, "],\"live\":%s,\"partial_data\":%s}\n", live ? "true" : "false",
                  partial ? "true" : "false");
    free(cap);
    free(h);
    reply_buf(c, &b);
}

/* ---- running endpoints off the loop -----------------------------------------
 * Analyses over millions of requests take seconds; on the loop they would stall
 * a live capture (and every other client). Each request that reads the
 * database becomes a job run by libuv's thread pool; jobs run one at a time
 * because they share the server's one database connection and catalog. */

enum endpoint { EP_TIERS, EP_HEALTH, EP_WINDOWS, EP_SCATTER, EP_EPISODES, EP_ANALYSIS,
                EP_DIAGNOSE, EP_METRICS };

struct tb__web_job {
    uv_work_t req;
    struct tb_web *w;
    struct tb_http_conn *conn;
    enum endpoint ep;
    bool has_query;
    char query[TB_HTTP_URL_MAX + 1];
    struct reply rp;
    struct tb__web_job *next;
};

static void job_work(uv_work_t *req)
{
    struct tb__web_job *j = req->data;
    struct tb_web *w = j->w;
    struct reply *c = &j->rp;
    const char *q = j->has_query ? j->query : NULL;
    struct params p;
    switch (j->ep) {
    case EP_TIERS:
        api_tiers(w, c);
        break;
    case EP_HEALTH:
        api_health(w, c);
        break;
    case EP_WINDOWS:
        if (get_params(w, c, q, &p, true))
            api_windows(w, c, &p);
        break;
    case EP_SCATTER:
        if (get_params(w, c, q, &p, true))
            api_scatter(w, c, &p);
        break;
    case EP_EPISODES:
        if (get_params(w, c, q, &p, true))
            api_episodes(w, c, &p);
        break;
    case EP_ANALYSIS:
        if (get_params(w, c, q, &p, true))
            api_analysis(w, c, &p);
        break;
    case EP_DIAGNOSE:
        api_diagnose(w, c, q);
        break;
    case EP_METRICS: {
        char err[256] = "";
        struct tb_buf b;
        tb_buf_init(&b);
        if (tb__web_metrics_db(w, &b, err, sizeof err) < 0) {
            tb_buf_free(&b);
            reply_error(c, 500, err);
        } else {
            reply_buf(c, &b);
            c->ctype = tb__web_metrics_ctype();
        }
        break;
    }
    }
}

static void job_start_next(struct tb_web *w);

static void job_done(uv_work_t *req, int status)
{
    struct tb__web_job *j = req->data;
    struct tb_web *w = j->w;
    (void)status;
    if (tb_http_conn_alive(j->conn)) {
        if (!tb_buf_ok(&j->rp.body) || !j->rp.status) {
            tb_buf_free(&j->rp.body);
            tb_http_error(j->conn, 500, "out of memory");
        } else {
            size_t len;
            char *body = tb_buf_steal(&j->rp.body, &len);
            tb_http_respond_owned(j->conn, j->rp.status,
                                  j->rp.ctype ? j->rp.ctype : "application/json", body, len,
                                  NULL);
        }
    } else {
        tb_buf_free(&j->rp.body);
    }
    tb_http_release(j->conn);
    free(j);
    w->job_running = false;
    if (w->closing)
        tb__web_finish_close(w);
    else
        job_start_next(w);
}

static void job_start_next(struct tb_web *w)
{
    struct tb__web_job *j;
    for (;;) {
        if (w->job_running || !w->jobs_head)
            return;
        j = w->jobs_head;
        w->jobs_head = j->next;
        if (!w->jobs_head)
            w->jobs_tail = NULL;
        w->njobs--;
        /* A client that left while its job waited has nobody to answer:
         * skip the database work (vanishing clients used to cost a full
         * analysis each). */
        if (tb_http_conn_alive(j->conn))
            break;
        tb_http_release(j->conn);
        free(j);
    }
    j->req.data = j;
    w->job_running = true;
    if (uv_queue_work(w->loop, &j->req, job_work, job_done) < 0) {
        /* No thread pool: answer on the loop rather than not at all. */
        job_work(&j->req);
        job_done(&j->req, 0);
    }
}

void tb__web_jobs_drop(struct tb_web *w)
{
    while (w->jobs_head) {
        struct tb__web_job *j = w->jobs_head;
        w->jobs_head = j->next;
        tb_http_release(j->conn);
        free(j);
    }
    w->jobs_tail = NULL;
    w->njobs = 0;
}

static void submit(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r,
                   enum endpoint ep)
{
    if (w->njobs >= TB_WEB_JOBS_MAX) {
        tb_http_error(c, 503, "busy: too many database requests waiting; retry");
        return;
    }
    struct tb__web_job *j = calloc(1, sizeof *j);
    if (!j) {
        tb_http_error(c, 500, "out of memory");
        return;
    }
    j->w = w;
    j->conn = c;
    j->ep = ep;
    if (r->query) {
        j->has_query = true;
        snprintf(j->query, sizeof j->query, "%s", r->query);
    }
    tb_buf_init(&j->rp.body);
    tb_http_defer(c);
    if (w->jobs_tail)
        w->jobs_tail->next = j;
    else
        w->jobs_head = j;
    w->jobs_tail = j;
    w->njobs++;
    job_start_next(w);
}

void tb__web_metrics_submit(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r)
{
    submit(w, c, r, EP_METRICS);
}

void tb__web_api(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r)
{
    if (r->method == TB_HTTP_OTHER) {
        tb_http_error(c, 405, "method not allowed: the API is read-only (GET)");
        return;
    }
    static const struct {
        const char *path;
        enum endpoint ep;
    } routes[] = {
        {"/api/tiers", EP_TIERS},       {"/api/health", EP_HEALTH},
        {"/api/windows", EP_WINDOWS},   {"/api/scatter", EP_SCATTER},
        {"/api/episodes", EP_EPISODES}, {"/api/analysis", EP_ANALYSIS},
        {"/api/diagnose", EP_DIAGNOSE},
    };
    if (!strcmp(r->path, "/api/stream")) {
        if (r->method == TB_HTTP_HEAD)
            tb_http_respond(c, 200, "text/event-stream", NULL, 0, NULL);
        else
            tb_http_stream_begin(c);
        return;
    }
    for (size_t i = 0; i < TB_ARRAY_SIZE(routes); i++) {
        if (!strcmp(r->path, routes[i].path)) {
            submit(w, c, r, routes[i].ep);
            return;
        }
    }
    tb_http_error(c, 404, "no such API endpoint");
}
