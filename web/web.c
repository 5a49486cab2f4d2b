/* SPDX-License-Identifier: MIT */
/* web.c — the dashboard server: routing, static root, live publishing and
 * polling of the database for the event stream. */
#include "web-int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "web-config.h"

#define POLL_MS 1000

int tb__web_reload_catalog(struct tb_web *w)
{
    struct tb_catalog *cat;
    int rc = tb_catalog_new(&cat);
    if (rc < 0)
        return rc;
    rc = tb_store_load_catalog(w->st, cat);
    if (rc < 0) {
        tb_catalog_free(cat);
        return rc;
    }
    if (w->cat)
        tb_catalog_free(w->cat);
    w->cat = cat;
    /* Cached results refer to catalog ids, which a reload keeps; they stay. */
    return 0;
}

static void on_request(void *ud, struct tb_http_conn *c, const struct tb_http_req *r)
{
    struct tb_web *w = ud;
    if (!strncmp(r->path, "/api/", 5) || !strcmp(r->path, "/api")) {
        tb__web_api(w, c, r);
        return;
    }
    if (!strcmp(r->path, "/metrics")) {
        tb__web_metrics(w, c, r);
        return;
    }
    if (r->method == TB_HTTP_OTHER) {
        tb_http_error(c, 405, "method not allowed");
        return;
    }
    tb__web_static(w, c, r->path);
}

/* ---- JSON shapes ---------------------------------------------------------------- */

void tb__web_json_window(struct tb_buf *b, const char *tier, const struct tb_window *win,
                         bool congested)
{
    tb_buf_json_kstr(b, "{\"tier\":", tier);
    tb_buf_printf(b, ",\"server\":%u,\"start_ns\":", win->server);
    tb_buf_json_i64(b, win->start_ns);
    tb_buf_json_ki64(b, ",\"width_ns\":", win->width_ns);
    tb_buf_json_knum(b, ",\"load\":", win->load);
    tb_buf_printf(b, ",\"completions\":%u,\"throughput\":", win->completions);
    tb_buf_json_num(b, win->throughput);
    tb_buf_json_knum(b, ",\"norm_throughput\":", win->norm_throughput);
    tb_buf_json_knum(b, ",\"rt_mean_ns\":", win->rt_mean_ns);
    /* The freeze rule's input beside load and throughput (0 in windows read
     * back from a database: it is not stored). */
    tb_buf_json_knum(b, ",\"calls_busy\":", win->calls_busy);
    tb_buf_json_knum(b, ",\"calls_load\":", win->calls_load);
    tb_buf_printf(b, ",\"congested\":%s}", congested ? "true" : "false");
}

void tb__web_json_episode(struct tb_buf *b, const char *tier, const struct tb_episode *ep)
{
    tb_buf_puts(b, "{");
    if (tier) {
        tb_buf_json_kstr(b, "\"tier\":", tier);
        tb_buf_puts(b, ",");
    }
    tb_buf_json_ki64(b, "\"start_ns\":", ep->start_ns);
    tb_buf_json_ki64(b, ",\"end_ns\":", ep->end_ns);
    tb_buf_json_ki64(b, ",\"duration_ns\":", ep->end_ns - ep->start_ns);
    tb_buf_json_knum(b, ",\"peak_load\":", ep->peak_load);
    tb_buf_json_knum(b, ",\"mean_load\":", ep->mean_load);
    tb_buf_json_knum(b, ",\"throughput\":", ep->throughput);
    tb_buf_printf(b, ",\"kind\":\"%s\"}", ep->kind == TB_EP_FREEZE ? "freeze" : "saturated");
}

/* ---- publishing ------------------------------------------------------------------ */

static bool listening(const struct tb_web *w)
{
    return w && !w->closing && tb_http_stream_count(w->http) > 0;
}

static void publish(struct tb_web *w, const char *event, struct tb_buf *b)
{
    if (tb_buf_ok(b) && !w->closing)
        tb_http_broadcast(w->http, event, b->p);
    tb_buf_free(b);
}

void tb_web_publish_window(struct tb_web *w, const char *tier, const struct tb_window *win,
                           bool congested)
{
    if (w && !w->closing)
        tb__web_live_window(w, win, congested);
    if (!listening(w))
        return;
    struct tb_buf b;
    tb_buf_init(&b);
    tb__web_json_window(&b, tier, win, congested);
    publish(w, "window", &b);
}

void tb_web_publish_episode(struct tb_web *w, const char *tier, const struct tb_episode *ep,
                            bool ongoing)
{
    if (w && !w->closing && !ongoing)
        tb__web_live_episode(w, tier, ep);
    if (!listening(w))
        return;
    struct tb_buf b;
    tb_buf_init(&b);
    tb__web_json_episode(&b, tier, ep);
    b.len--; /* reopen the object to add the live flag */
    tb_buf_printf(&b, ",\"ongoing\":%s}", ongoing ? "true" : "false");
    publish(w, "episode", &b);
}

void tb_web_publish_analysis(struct tb_web *w, const char *tier, const struct tb_analysis *a,
                             const struct tb_congestion *rule, const struct tb_stream_rescale *rs)
{
    if (w && !w->closing)
        tb__web_live_analysis(w, a, rule);
    if (!listening(w))
        return;
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_json_kstr(&b, "{\"tier\":", tier);
    tb_buf_json_ki64(&b, ",\"width_ns\":", a->width_ns);
    tb_buf_json_ki64(&b, ",\"from_ns\":", a->from_ns);
    tb_buf_json_ki64(&b, ",\"to_ns\":", a->to_ns);
    tb_buf_json_knum(&b, ",\"n_star\":", a->n_star);
    tb_buf_json_knum(&b, ",\"n_star_fit\":", a->n_star_fit);
    tb_buf_json_knum(&b, ",\"tp_max\":", a->tp_max);
    tb_buf_json_knum(&b, ",\"slope\":", a->slope);
    tb_buf_json_knum(&b, ",\"threshold\":", rule->threshold);
    tb_buf_json_knum(&b, ",\"freeze_frac\":", rule->freeze_frac);
    tb_buf_json_knum(&b, ",\"units_per_completion\":", rule->ubar);
    tb_buf_json_knum(&b, ",\"self_tp\":", rule->self_tp);
    /* The stall rule's constants (correlate.h, "Stalled"), so that a client
     * can check every window as the episodes were cut. */
    tb_buf_printf(&b, ",\"stall\":{\"min_load\":%.17g,\"max_calls_busy\":%.17g,"
                      "\"frac\":%.17g,\"min_expected\":%.17g}",
                  TB_STALL_MIN_LOAD, TB_STALL_MAX_CALLS_BUSY, TB_STALL_FRAC,
                  TB_STALL_MIN_EXPECTED);
    /* The work unit's change at this re-estimate (stream.h, tb_stream_rescale):
     * the running throughput of an episode open across it was multiplied by
     * the factor, which is not in the windows already streamed. */
    if (rs) {
        tb_buf_json_knum(&b, ",\"rescale\":{\"factor\":", rs->factor);
        tb_buf_json_ki64(&b, ",\"from_ns\":", rs->from_ns);
        tb_buf_puts(&b, "}}");
    } else {
        tb_buf_puts(&b, ",\"rescale\":null}");
    }
    publish(w, "analysis", &b);
}

void tb_web_publish_store(struct tb_web *w, const struct tb_web_store *s)
{
    if (w && !w->closing)
        tb__web_live_store(w, s);
}

void tb_web_publish_health(struct tb_web *w, int64_t ts_ns, uint64_t packets,
                           uint64_t kernel_drops, uint64_t if_drops)
{
    if (w && !w->closing)
        tb__web_live_health(w, packets, kernel_drops, if_drops);
    if (!listening(w))
        return;
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_json_ki64(&b, "{\"ts_ns\":", ts_ns);
    tb_buf_printf(&b, ",\"packets\":%llu,\"kernel_drops\":%llu,\"if_drops\":%llu}",
                  (unsigned long long)packets, (unsigned long long)kernel_drops,
                  (unsigned long long)if_drops);
    publish(w, "health", &b);
}

void tb_web_publish_windows(struct tb_web *w, const struct tb_window *win, size_t n)
{
    if (!w || w->closing)
        return;
    for (size_t i = 0; i < n; i++)
        if (win[i].server) /* the tier's own rows come with their congestion */
            tb__web_live_window(w, &win[i], -1);
}

/* ---- polling a database written by someone else ------------------------------ */

/* Emits the tier's windows and episodes newer than the watermarks. With
 * `emit` false it only moves the watermarks (at start, so that clients get
 * what is new rather than the whole history, which the API already serves). */
static void poll_tier(struct tb_web *w, uint32_t tier, bool emit)
{
    const struct tb_tier_info *ti = tb_catalog_tier_get(w->cat, tier);
    if (!ti || tier >= TB_WEB_MAX_TIERS)
        return;
    /* Windows first, then the analysis: analyze.c stores an analysis before
     * its windows, so windows read here always have theirs. */
    struct tb_window *win = NULL;
    size_t nwin = 0;
    int64_t from = w->win_seen[tier] == INT64_MIN ? INT64_MIN : w->win_seen[tier] + 1;
    bool have_w =
        tb_store_get_windows(w->st, tier, 0, w->stream_width_ns, from, INT64_MAX, &win, &nwin) == 0;
    struct tb_analysis a;
    struct tb_episode *ep = NULL;
    size_t nep = 0;
    bool have_a = tb_store_get_analysis(w->st, tier, 0, w->stream_width_ns, &a, &ep, &nep) == 0;
    /* Congested by the stored analysis' rule (correlate.h): its threshold is
     * the intervention N*, else the fit's knee, as in the report. */
    struct tb_congestion rule = {.threshold = NAN};
    if (have_a)
        tb_congestion_from_analysis(&rule, &a, NULL, 0);
    for (size_t i = 0; have_w && i < nwin; i++) {
        if (win[i].start_ns <= w->win_seen[tier] && w->win_seen[tier] != INT64_MIN)
            continue;
        if (emit)
            tb_web_publish_window(w, ti->name, &win[i],
                                  tb_congestion_congested(&rule, win[i].load));
        if (win[i].start_ns > w->win_seen[tier] || w->win_seen[tier] == INT64_MIN)
            w->win_seen[tier] = win[i].start_ns;
    }
    free(win);
    if (have_a) {
        bool sent = false;
        for (size_t i = 0; i < nep; i++) {
            if (ep[i].end_ns <= w->ep_seen[tier])
                continue;
            if (emit)
                tb_web_publish_episode(w, ti->name, &ep[i], false);
            sent = true;
            w->ep_seen[tier] = ep[i].end_ns;
        }
        if (emit && sent) {
            /* The rule's units per completion come from the analysed series. */
            struct tb_window *aw = NULL;
            size_t naw = 0;
            if (tb_store_get_windows(w->st, tier, 0, w->stream_width_ns, a.from_ns, a.to_ns, &aw,
                                     &naw) == 0)
                tb_congestion_from_analysis(&rule, &a, aw, naw);
            free(aw);
            tb_web_publish_analysis(w, ti->name, &a, &rule, NULL);
        }
    }
    free(ep);
}

static void poll_health(struct tb_web *w, bool emit)
{
    struct tb_health_row *h = NULL;
    size_t n = 0;
    if (tb_store_get_health(w->st, w->health_seen + 1, INT64_MAX, &h, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (emit)
            tb_web_publish_health(w, h[i].ts_ns, h[i].packets, h[i].kernel_drops, h[i].if_drops);
        if (h[i].ts_ns > w->health_seen)
            w->health_seen = h[i].ts_ns;
    }
    free(h);
}

static void poll_all(struct tb_web *w, bool emit)
{
    tb__web_reload_catalog(w);
    uint32_t nt = tb_catalog_tier_count(w->cat);
    for (uint32_t t = 1; t <= nt; t++)
        poll_tier(w, t, emit);
    poll_health(w, emit);
}

static void on_poll(uv_timer_t *t)
{
    struct tb_web *w = t->data;
    /* The job on the thread pool has the database connection; next second. */
    if (w->job_running)
        return;
    /* Nobody listening: nothing to read. The watermarks still move, so a
     * client that connects later is not flooded with the backlog. */
    poll_all(w, tb_http_stream_count(w->http) > 0);
}

/* ---- lifecycle ---------------------------------------------------------------- */

static int pick_static_root(struct tb_web *w, const char *dir, char *errbuf, size_t errlen)
{
    const char *cands[3];
    size_t n = 0;
    if (dir) {
        cands[n++] = dir;
    } else {
        cands[n++] = TB_STATIC_INSTALL_DIR;
        cands[n++] = TB_STATIC_SRC_DIR;
    }
    for (size_t i = 0; i < n; i++) {
        char idx[PATH_MAX];
        snprintf(idx, sizeof idx, "%s/index.html", cands[i]);
        if (access(idx, R_OK) == 0 && realpath(cands[i], w->static_root))
            return 0;
    }
    snprintf(errbuf, errlen, "static folder '%s': no index.html there",
             dir ? dir : TB_STATIC_SRC_DIR);
    return TB_E_NOTFOUND;
}

static void on_poll_closed(uv_handle_t *h)
{
    struct tb_web *w = h->data;
    w->poll_closed = true;
    tb__web_finish_close(w);
}

/* Splits "a,b,c" into w->hosts; a name with a byte no host name has is a
 * usage error. */
static int parse_hosts(struct tb_web *w, const char *list, char *errbuf, size_t errlen)
{
    if (!list)
        return 0;
    w->hosts_buf = strdup(list);
    if (!w->hosts_buf)
        return TB_E_NOMEM;
    for (char *save = NULL, *t = strtok_r(w->hosts_buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        bool okname = strcmp(t, "*") == 0;
        if (!okname) {
            okname = t[0] != '\0' && strlen(t) < 254;
            for (const char *q = t; *q && okname; q++)
                okname = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                         (*q >= '0' && *q <= '9') || *q == '-' || *q == '.' || *q == '_';
        }
        if (!okname || w->nhosts == TB_WEB_MAX_HOSTS) {
            snprintf(errbuf, errlen, "--allow-host '%s': %s", t,
                     okname ? "too many names (32 at most)" : "not a host name");
            return TB_E_INVAL;
        }
        w->hosts[w->nhosts++] = t;
    }
    return 0;
}

void tb__web_finish_close(struct tb_web *w)
{
    if (w->job_running || !w->poll_closed)
        return;
    tb__web_cache_clear(w);
    tb__web_metrics_free(w);
    if (w->cat)
        tb_catalog_free(w->cat);
    w->cat = NULL;
    if (w->st)
        tb_store_close(w->st);
    w->st = NULL;
    free(w->hosts_buf);
    free(w);
}

int tb_web_new(struct tb_web **out, uv_loop_t *loop, const struct tb_web_opts *o, char *errbuf,
               size_t errlen)
{
    struct tb_web *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(errbuf, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    w->loop = loop;
    w->poll_db = o->poll_db;
    w->stream_width_ns = o->stream_width_ns > 0 ? o->stream_width_ns : TB_WINDOW_DEFAULT_NS;
    for (size_t i = 0; i < TB_WEB_MAX_TIERS; i++)
        w->win_seen[i] = INT64_MIN;
    w->health_seen = INT64_MIN;
    int rc = parse_hosts(w, o->allow_hosts, errbuf, errlen);
    if (rc == 0)
        rc = pick_static_root(w, o->static_dir, errbuf, errlen);
    if (rc < 0)
        goto fail;
    const char *db = o->db_path ? o->db_path : "tbneck.db";
    /* The API may store the analyses it computes (so the next request and
     * `tbneck report` reuse them): read-write, but never create. */
    rc = tb_store_open(&w->st, db, 0, errbuf, errlen);
    if (rc < 0)
        goto fail;
    /* A database whose capture lost requests is served, and said to be. */
    uint64_t npartial = 0, lost = 0;
    if (o->poll_db && tb_store_partial(w->st, INT64_MIN, INT64_MAX, &npartial, &lost) == 0 &&
        npartial)
        tb_log_warn("serve: %s: partial data: %" PRIu64 " capture%s stored only part of what "
                    "%s saw (%" PRIu64 " requests lost, e.g. to a full disk); /api/health says "
                    "which",
                    db, npartial, npartial == 1 ? "" : "s", npartial == 1 ? "it" : "they", lost);
    rc = tb_catalog_new(&w->cat);
    if (rc == 0)
        rc = tb__web_reload_catalog(w);
    if (rc < 0) {
        snprintf(errbuf, errlen, "database '%s': cannot load its tiers: %s", db, tb_strerror(rc));
        goto fail;
    }
    if (o->live_catalog && (rc = tb__web_live_new(w, o->live_catalog)) < 0) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    struct tb_http_opts ho = {
        .listen = o->listen,
        .allow_remote = o->allow_remote,
        .allow_hosts = w->hosts,
        .nallow_hosts = w->nhosts,
        .max_conns = o->max_conns,
        .idle_ms = o->idle_ms,
    };
    rc = tb_http_new(&w->http, loop, &ho, on_request, w, errbuf, errlen);
    if (rc < 0)
        goto fail;
    uv_timer_init(loop, &w->poll);
    w->poll.data = w;
    if (w->poll_db) {
        poll_all(w, false);
        uv_timer_start(&w->poll, on_poll, POLL_MS, POLL_MS);
    }
    *out = w;
    return 0;
fail:
    tb__web_live_free(w);
    if (w->cat)
        tb_catalog_free(w->cat);
    if (w->st)
        tb_store_close(w->st);
    free(w->hosts_buf);
    free(w);
    return rc;
}

void tb_web_close(struct tb_web *w)
{
    if (!w || w->closing)
        return;
    w->closing = true;
    tb__web_jobs_drop(w);
    tb_http_close(w->http);
    /* The database and the struct go once the poll timer is closed and the
     * job on the thread pool, if any, has finished with them. */
    uv_close((uv_handle_t *)&w->poll, on_poll_closed);
}

const char *tb_web_bound(const struct tb_web *w)
{
    return tb_http_bound(w->http);
}

unsigned tb_web_stream_clients(const struct tb_web *w)
{
    return tb_http_stream_count(w->http);
}
