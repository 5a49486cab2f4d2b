/* SPDX-License-Identifier: MIT */
/* metrics.c — GET /metrics: the latest closed window, N* and episode counts
 * of every tier and server, and capture health, in Prometheus' text
 * exposition format (version 0.0.4).
 *
 * Two sources. `tbneck serve` reads the database: per tier, the analysis
 * tb_analyze_tier gives at the serve's --window width over everything stored
 * (the one /api/windows answers with), for the tier and each of its servers,
 * recomputed only when the tier's request count changes. `capture -i --serve`
 * answers from memory: what the streaming analysis last published (closed
 * windows, the re-estimated rule, closed episodes) and the capture's own
 * counters — no database read, so a scrape costs the capture nothing.
 *
 * Label `server` is "ADDR:PORT", or "*" for the tier as a whole (as in
 * `tbneck export windows` and diagnose). Families are written whole (HELP,
 * TYPE, then every sample), as the format requires. */
#include "web-int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PROM_CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* One label set's values: a tier as a whole or one of its servers. */
struct mrow {
    char tier[TB_NAME_MAX + 1];
    char server[TB_ADDR_STRLEN];
    bool have_win;
    struct tb_window win;  /* the latest closed window */
    int congested;         /* -1: no rule to tell */
    double n_star, threshold, tp_max; /* NAN: undetermined or not known */
    bool have_requests, have_episodes;
    uint64_t requests;
    uint64_t episodes[2];  /* closed episodes by kind (TB_EP_SATURATED, TB_EP_FREEZE) */
    double congested_s;    /* time in congested windows (with have_episodes) */
};

struct mhealth {
    bool have;
    uint64_t packets, kernel_drops, if_drops;
    bool have_store; /* a live sensor writing to ClickHouse */
    struct tb_web_store store;
};

/* ---- the text format ------------------------------------------------------------ */

static void label_value(struct tb_buf *b, const char *s)
{
    /* The format escapes exactly these three in label values. */
    for (; *s; s++) {
        if (*s == '\\')
            tb_buf_puts(b, "\\\\");
        else if (*s == '"')
            tb_buf_puts(b, "\\\"");
        else if (*s == '\n')
            tb_buf_puts(b, "\\n");
        else
            tb_buf_add(b, s, 1);
    }
}

static void value(struct tb_buf *b, double v)
{
    if (isnan(v))
        tb_buf_puts(b, " NaN\n");
    else if (isinf(v))
        tb_buf_puts(b, v > 0 ? " +Inf\n" : " -Inf\n");
    else {
        char t[40];
        tb_buf_printf(b, " %s\n", tb_fmt_double(v, t, sizeof t));
    }
}

static void family(struct tb_buf *b, const char *name, const char *type, const char *help)
{
    tb_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_row(struct tb_buf *b, const char *name, const struct mrow *r,
                       const char *extra_k, const char *extra_v)
{
    tb_buf_printf(b, "%s{tier=\"", name);
    label_value(b, r->tier);
    tb_buf_puts(b, "\",server=\"");
    label_value(b, r->server);
    tb_buf_puts(b, "\"");
    if (extra_k) {
        tb_buf_printf(b, ",%s=\"", extra_k);
        label_value(b, extra_v);
        tb_buf_puts(b, "\"");
    }
    tb_buf_puts(b, "}");
}

enum field { F_LOAD, F_TP, F_NTP, F_RT, F_START, F_NSTAR, F_THR, F_TPMAX, F_CONG };

static bool row_has(const struct mrow *r, enum field f)
{
    switch (f) {
    case F_LOAD: case F_TP: case F_NTP: case F_RT: case F_START:
        return r->have_win;
    case F_NSTAR:
        return isfinite(r->n_star);
    case F_THR:
        return isfinite(r->threshold);
    case F_TPMAX:
        return isfinite(r->tp_max);
    case F_CONG:
        return r->have_win && r->congested >= 0;
    }
    return false;
}

static double row_value(const struct mrow *r, enum field f)
{
    switch (f) {
    case F_LOAD: return r->win.load;
    case F_TP: return r->win.throughput;
    case F_NTP: return r->win.norm_throughput;
    /* No completion in the window: no response time, not zero. */
    case F_RT: return r->win.completions ? r->win.rt_mean_ns / 1e9 : NAN;
    case F_START: return (double)r->win.start_ns / 1e9;
    case F_NSTAR: return r->n_star;
    case F_THR: return r->threshold;
    case F_TPMAX: return r->tp_max;
    case F_CONG: return r->congested ? 1 : 0;
    }
    return NAN;
}

/* A counter of a live sensor's ClickHouse rows, by table. */
static void by_table(struct tb_buf *b, const char *name, const char *help, uint64_t requests,
                     uint64_t conns)
{
    family(b, name, "counter", help);
    tb_buf_printf(b, "%s{table=\"requests\"} %" PRIu64 "\n", name, requests);
    tb_buf_printf(b, "%s{table=\"connections\"} %" PRIu64 "\n", name, conns);
}

static void render(struct tb_buf *b, const struct mrow *rows, size_t n, int64_t width_ns,
                   const struct mhealth *h)
{
    static const struct {
        const char *name;
        enum field f;
        const char *help;
    } gauges[] = {
        {"tbneck_load", F_LOAD,
         "Load (time-averaged requests in service) in the latest closed window."},
        {"tbneck_throughput", F_TP, "Completions per second in the latest closed window."},
        {"tbneck_norm_throughput", F_NTP,
         "Work units completed per second in the latest closed window."},
        {"tbneck_response_time_seconds", F_RT,
         "Mean response time of the completions of the latest closed window (NaN: none)."},
        {"tbneck_window_start_seconds", F_START,
         "Start of the latest closed window, seconds since the epoch."},
        {"tbneck_n_star", F_NSTAR,
         "Congestion point N* by intervention analysis (absent while undetermined)."},
        {"tbneck_congestion_threshold", F_THR,
         "Load at which a window counts as congested: N*, else the fit's knee."},
        {"tbneck_tp_max", F_TPMAX, "Throughput plateau TPmax, work units per second."},
        {"tbneck_congested", F_CONG,
         "1 when the latest closed window is congested (load at or above the threshold)."},
    };
    family(b, "tbneck_window_seconds", "gauge", "Width of the analysis windows.");
    tb_buf_printf(b, "tbneck_window_seconds");
    value(b, (double)width_ns / 1e9);
    for (size_t g = 0; g < TB_ARRAY_SIZE(gauges); g++) {
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = row_has(&rows[i], gauges[g].f);
        if (!any)
            continue;
        family(b, gauges[g].name, "gauge", gauges[g].help);
        for (size_t i = 0; i < n; i++) {
            if (!row_has(&rows[i], gauges[g].f))
                continue;
            sample_row(b, gauges[g].name, &rows[i], NULL, NULL);
            value(b, row_value(&rows[i], gauges[g].f));
        }
    }
    bool any = false;
    for (size_t i = 0; i < n && !any; i++)
        any = rows[i].have_requests;
    if (any) {
        family(b, "tbneck_requests_total", "counter", "Requests completed (request/response pairs).");
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].have_requests)
                continue;
            sample_row(b, "tbneck_requests_total", &rows[i], NULL, NULL);
            tb_buf_printf(b, " %" PRIu64 "\n", rows[i].requests);
        }
    }
    any = false;
    for (size_t i = 0; i < n && !any; i++)
        any = rows[i].have_episodes;
    if (any) {
        family(b, "tbneck_episodes_total", "counter",
               "Congestion episodes (transient bottlenecks) that have ended, by kind.");
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].have_episodes)
                continue;
            sample_row(b, "tbneck_episodes_total", &rows[i], "kind", "saturated");
            tb_buf_printf(b, " %" PRIu64 "\n", rows[i].episodes[TB_EP_SATURATED]);
            sample_row(b, "tbneck_episodes_total", &rows[i], "kind", "freeze");
            tb_buf_printf(b, " %" PRIu64 "\n", rows[i].episodes[TB_EP_FREEZE]);
        }
    }
    if (any) {
        family(b, "tbneck_congested_seconds_total", "counter",
               "Time spent in congested windows: its rate is the congested share, which no "
               "scrape interval misses.");
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].have_episodes)
                continue;
            sample_row(b, "tbneck_congested_seconds_total", &rows[i], NULL, NULL);
            value(b, rows[i].congested_s);
        }
    }
    if (h->have) {
        family(b, "tbneck_packets_total", "counter", "Packets captured.");
        tb_buf_printf(b, "tbneck_packets_total %" PRIu64 "\n", h->packets);
        family(b, "tbneck_drops_total", "counter",
               "Packets dropped before tbneck saw them: kernel (ring full) or interface.");
        tb_buf_printf(b, "tbneck_drops_total{kind=\"kernel\"} %" PRIu64 "\n", h->kernel_drops);
        tb_buf_printf(b, "tbneck_drops_total{kind=\"interface\"} %" PRIu64 "\n", h->if_drops);
    }
    if (h->have_store) {
        const struct tb_web_store *st = &h->store;
        family(b, "tbneck_store_up", "gauge",
               "1 when the last write to the ClickHouse store succeeded, 0 while it fails.");
        tb_buf_printf(b, "tbneck_store_up %d\n", st->up ? 1 : 0);
        by_table(b, "tbneck_store_rows_total",
                 "Rows the ClickHouse store holds from this capture, by table.",
                 st->stored_requests, st->stored_conns);
        family(b, "tbneck_store_pending_requests", "gauge",
               "Requests waiting for the ClickHouse store, in memory or in the spool.");
        tb_buf_printf(b, "tbneck_store_pending_requests %" PRIu64 "\n", st->pending_requests);
        family(b, "tbneck_store_spool_bytes", "gauge", "Bytes in the spool directory.");
        tb_buf_printf(b, "tbneck_store_spool_bytes %" PRIu64 "\n", st->spool_bytes);
        by_table(b, "tbneck_store_dropped_total",
                 "Rows dropped because the spool was full, by table.", st->dropped_requests,
                 st->dropped_conns);
    }
}

static void row_names(struct mrow *r, const struct tb_catalog *cat, uint32_t tier,
                      uint32_t server)
{
    const struct tb_tier_info *ti = tb_catalog_tier_get(cat, tier);
    snprintf(r->tier, sizeof r->tier, "%s", ti ? ti->name : "?");
    const struct tb_server_info *si = server ? tb_catalog_server_get(cat, server) : NULL;
    if (si)
        tb_addr_fmt(&si->addr, r->server, sizeof r->server);
    else
        snprintf(r->server, sizeof r->server, "*");
}

/* ---- from the database (tbneck serve) --------------------------------------------- */

/* One analysed tier's rows, kept while its request count stays the same. */
struct tb__web_mtier {
    uint64_t count;
    int64_t width_ns;
    struct mrow *rows;
    size_t nrows;
};

static void row_from_result(struct mrow *r, const struct tb_analysis_result *res)
{
    r->have_requests = true;
    r->requests = res->a.requests;
    r->n_star = res->a.n_star;
    r->threshold = tb_analysis_threshold(&res->a);
    r->tp_max = res->a.tp_max;
    r->congested = -1;
    r->have_episodes = true;
    for (size_t i = 0; i < res->nep; i++)
        r->episodes[res->ep[i].kind == TB_EP_FREEZE ? TB_EP_FREEZE : TB_EP_SATURATED]++;
    if (!res->nwin)
        return;
    r->have_win = true;
    r->win = res->win[res->nwin - 1];
    /* Congested as /api/scatter says it of the same windows: the rule the
     * episodes were cut with (correlate.h). */
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, &res->a, res->win, res->nwin);
    uint64_t ncong = 0;
    for (size_t i = 0; i < res->nwin; i++)
        ncong += tb_congestion_congested(&rule, res->win[i].load);
    r->congested_s = (double)ncong * (double)res->a.width_ns / 1e9;
    r->congested = tb_congestion_congested(&rule, r->win.load);
}

static void mtier_free(struct tb__web_mtier *m)
{
    free(m->rows);
    memset(m, 0, sizeof *m);
}

void tb__web_metrics_free(struct tb_web *w)
{
    for (size_t i = 0; i < w->nmtier; i++)
        mtier_free(&w->mtier[i]);
    free(w->mtier);
    w->mtier = NULL;
    w->nmtier = 0;
    tb__web_live_free(w);
}

/* The tier's rows, from the cache or a fresh analysis. */
static int tier_rows(struct tb_web *w, uint32_t tier, uint64_t count, struct tb__web_mtier **out)
{
    if (tier >= w->nmtier && tb_grow_zero(&w->mtier, &w->nmtier, (size_t)tier + 1,
                                          sizeof *w->mtier))
        return TB_E_NOMEM;
    struct tb__web_mtier *m = &w->mtier[tier];
    *out = m;
    if (m->rows && m->count == count && m->width_ns == w->stream_width_ns)
        return 0;
    mtier_free(m);
    struct tb_analyze_opts o = {
        .width_ns = w->stream_width_ns,
        .from_ns = INT64_MIN,
        .to_ns = INT64_MAX,
    };
    struct tb_analysis_result total, *srv = NULL;
    size_t nsrv = 0;
    char err[256] = "";
    int rc = tb_analyze_tier_servers(w->st, w->cat, tier, &o, &total, &srv, &nsrv, err, sizeof err);
    if (rc < 0)
        return rc;
    m->rows = calloc(nsrv + 1, sizeof *m->rows);
    if (m->rows) {
        m->nrows = nsrv + 1;
        row_names(&m->rows[0], w->cat, tier, 0);
        row_from_result(&m->rows[0], &total);
        for (size_t i = 0; i < nsrv; i++) {
            row_names(&m->rows[i + 1], w->cat, tier, srv[i].a.server);
            row_from_result(&m->rows[i + 1], &srv[i]);
        }
        m->count = count;
        m->width_ns = w->stream_width_ns;
    }
    tb_analysis_result_free(&total);
    for (size_t i = 0; i < nsrv; i++)
        tb_analysis_result_free(&srv[i]);
    free(srv);
    return m->rows ? 0 : TB_E_NOMEM;
}

/* Packets and drops: the totals of finished captures, and for one still
 * running (no end yet) its newest per-second health row. */
static void db_health(struct tb_web *w, struct mhealth *h)
{
    struct tb_capture_row *cap = NULL;
    size_t ncap = 0;
    if (tb_store_captures(w->st, &cap, &ncap) < 0)
        return;
    for (size_t i = 0; i < ncap; i++) {
        h->have = true;
        if (cap[i].ended_ns) {
            h->packets += cap[i].packets;
            h->kernel_drops += cap[i].kernel_drops;
            h->if_drops += cap[i].if_drops;
            continue;
        }
        struct tb_health_row *hr = NULL;
        size_t nh = 0;
        if (tb_store_get_health(w->st, cap[i].started_ns, INT64_MAX, &hr, &nh) == 0 && nh) {
            h->packets += hr[nh - 1].packets;
            h->kernel_drops += hr[nh - 1].kernel_drops;
            h->if_drops += hr[nh - 1].if_drops;
        }
        free(hr);
    }
    free(cap);
}

/* Runs on the worker thread (api.c's jobs): the body, or an error status. */
int tb__web_metrics_db(struct tb_web *w, struct tb_buf *b, char *err, size_t errlen)
{
    tb__web_reload_catalog(w);
    struct mrow *rows = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    uint32_t nt = tb_catalog_tier_count(w->cat);
    for (uint32_t t = 1; t <= nt; t++) {
        uint64_t count = 0;
        if (tb_store_request_count(w->st, t, &count) < 0) {
            snprintf(err, errlen, "cannot read the database");
            rc = TB_E_IO;
            goto out;
        }
        if (!count)
            continue;
        struct tb__web_mtier *m;
        rc = tier_rows(w, t, count, &m);
        if (rc == TB_E_NOMEM) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        if (rc < 0) {
            /* One tier that cannot be analysed must not hide the others. */
            rc = 0;
            continue;
        }
        if (tb_grow(&rows, &cap, n + m->nrows, sizeof *rows)) {
            snprintf(err, errlen, "out of memory");
            rc = TB_E_NOMEM;
            goto out;
        }
        memcpy(rows + n, m->rows, m->nrows * sizeof *rows);
        n += m->nrows;
    }
    struct mhealth h = {0};
    db_health(w, &h);
    render(b, rows, n, w->stream_width_ns, &h);
out:
    free(rows);
    return rc;
}

/* ---- from memory (capture --serve) --------------------------------------------- */

struct tb__web_live {
    const struct tb_catalog *cat;
    struct mrow *tier;   /* by tier id */
    size_t ntier;
    struct mrow *server; /* by server id */
    size_t nserver;
    struct mhealth health;
};

static struct mrow *live_row(struct tb_web *w, uint32_t tier, uint32_t server)
{
    struct tb__web_live *L = w ? w->live : NULL;
    if (!L)
        return NULL;
    struct mrow **arr = server ? &L->server : &L->tier;
    size_t *narr = server ? &L->nserver : &L->ntier;
    size_t id = server ? server : tier;
    if (id >= *narr) {
        size_t old = *narr;
        if (tb_grow_zero(arr, narr, id + 1, sizeof **arr))
            return NULL;
        for (size_t i = old; i < *narr; i++) {
            (*arr)[i].congested = -1;
            (*arr)[i].n_star = (*arr)[i].threshold = (*arr)[i].tp_max = NAN;
        }
    }
    return &(*arr)[id];
}

int tb__web_live_new(struct tb_web *w, const struct tb_catalog *cat)
{
    w->live = calloc(1, sizeof *w->live);
    if (!w->live)
        return TB_E_NOMEM;
    w->live->cat = cat;
    return 0;
}

void tb__web_live_free(struct tb_web *w)
{
    if (!w->live)
        return;
    free(w->live->tier);
    free(w->live->server);
    free(w->live);
    w->live = NULL;
}

void tb__web_live_window(struct tb_web *w, const struct tb_window *win, int congested)
{
    struct mrow *r = live_row(w, win->tier, win->server);
    if (!r)
        return;
    r->have_win = true;
    r->win = *win;
    /* Before the first re-estimate there is no rule: congestion unknown. */
    if (congested >= 0 && r->have_episodes)
        r->congested = congested;
    if (congested > 0 && r->have_episodes)
        r->congested_s += (double)win->width_ns / 1e9;
}

void tb_web_publish_request(struct tb_web *w, const struct tb_request *req)
{
    struct mrow *r = live_row(w, req->tier, 0);
    if (r) {
        r->have_requests = true;
        r->requests++;
    }
    if (req->server && (r = live_row(w, req->tier, req->server))) {
        r->have_requests = true;
        r->requests++;
    }
}

void tb__web_live_episode(struct tb_web *w, const char *tier, const struct tb_episode *ep)
{
    uint32_t id;
    if (!w || !w->live || tb_catalog_tier_find(w->live->cat, tier, &id) < 0)
        return;
    struct mrow *r = live_row(w, id, 0);
    if (r)
        r->episodes[ep->kind == TB_EP_FREEZE ? TB_EP_FREEZE : TB_EP_SATURATED]++;
}

void tb__web_live_analysis(struct tb_web *w, const struct tb_analysis *a,
                           const struct tb_congestion *rule)
{
    struct mrow *r = live_row(w, a->tier, 0);
    if (!r)
        return;
    r->n_star = a->n_star;
    r->threshold = rule->threshold;
    r->tp_max = a->tp_max;
    r->have_episodes = true; /* from the first rule on, episodes are counted */
}

void tb__web_live_health(struct tb_web *w, uint64_t packets, uint64_t kernel_drops,
                         uint64_t if_drops)
{
    if (!w || !w->live)
        return;
    struct mhealth *h = &w->live->health;
    h->have = true;
    h->packets = packets;
    h->kernel_drops = kernel_drops;
    h->if_drops = if_drops;
}

void tb__web_live_store(struct tb_web *w, const struct tb_web_store *s)
{
    if (!w || !w->live)
        return;
    w->live->health.have_store = true;
    w->live->health.store = *s;
}

/* The live rows in catalog order: each tier, then its servers. */
static int live_render(struct tb_web *w, struct tb_buf *b)
{
    struct tb__web_live *L = w->live;
    struct mrow *rows = calloc(L->ntier + L->nserver + 1, sizeof *rows);
    size_t n = 0;
    if (!rows)
        return TB_E_NOMEM;
    for (size_t t = 1; t < L->ntier; t++) {
        const struct mrow *tr = &L->tier[t];
        if (!tr->have_win && !tr->have_requests)
            continue;
        rows[n] = *tr;
        row_names(&rows[n++], L->cat, (uint32_t)t, 0);
        for (size_t s = 1; s < L->nserver; s++) {
            const struct mrow *sr = &L->server[s];
            const struct tb_server_info *si = tb_catalog_server_get(L->cat, (uint32_t)s);
            if (!si || si->tier != t || (!sr->have_win && !sr->have_requests))
                continue;
            rows[n] = *sr;
            row_names(&rows[n++], L->cat, (uint32_t)t, (uint32_t)s);
        }
    }
    render(b, rows, n, w->stream_width_ns, &L->health);
    free(rows);
    return 0;
}

/* ---- the endpoint ------------------------------------------------------------ */

void tb__web_metrics(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r)
{
    if (r->method == TB_HTTP_OTHER) {
        tb_http_error(c, 405, "method not allowed: /metrics is read-only (GET)");
        return;
    }
    if (!w->live) {
        tb__web_metrics_submit(w, c, r);
        return;
    }
    struct tb_buf b;
    tb_buf_init(&b);
    if (live_render(w, &b) < 0 || !tb_buf_ok(&b)) {
        tb_buf_free(&b);
        tb_http_error(c, 500, "out of memory");
        return;
    }
    size_t len;
    char *body = tb_buf_steal(&b, &len);
    tb_http_respond_owned(c, 200, PROM_CTYPE, body, len, NULL);
}

const char *tb__web_metrics_ctype(void)
{
    return PROM_CTYPE;
}
