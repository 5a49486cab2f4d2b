/* SPDX-License-Identifier: MIT */
/* diagnose.c — `tbneck diagnose`: which server (or pool) holds the front tier
 * up, and why (diagnose.h; docs/diagnose.md has the method and every
 * threshold with its reason).
 *
 * Inputs, all from the store: the per-tier analyses of the report pipeline
 * (service times, N*, episodes, per tier and per server), every request in
 * the range (one sweep builds the layered load, stats.h), the connection
 * records (pool sizes). Per window of the front tier's congestion the
 * wait-for graph is walked from the front tier down: a server whose requests
 * mostly wait on a callee that is itself slow passes the blame down; the
 * first server whose own time is stretched with no slow callee below it is
 * the root, and its signals name the cause. */
#include "diagnose.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "buf.h"
#include "callers.h"
#include "json.h"
#include "linkstore.h"
#include "util.h"

/* ---- thresholds (docs/diagnose.md "Rules and thresholds") --------------------------- */

/* A server's own time is stretched in a window when its self-load is at
 * least this many times what its usual windows show for the same work... */
#define STRETCH_REL 2.0
/* ... and its requests queue at least as much as they are worked on (self
 * at least twice the work), with at least this much queued: one request on
 * average over the window, so that a nearly idle server's momentary cluster
 * of arrivals is never "stretched" (at half a request, one 50 ms window of a
 * simulated stack at 30% load passed for a bottleneck in 1 seed of 5). */
#define QUEUE_MIN 1.0
/* A verdict needs its root to hold at least this many windows of the front
 * tier's congested time; less is a blip, not a bottleneck. */
#define VERDICT_MIN_WINDOWS 2.0
/* When the front tier has no congestion point its slow windows stand for its
 * congestion (build_series), and a machine busy with other work makes some
 * windows slow on any stack: the real stack with nothing wrong and a light
 * load had 0-4 slow front windows in 20 s runs (0-1%), and 4 of them (two
 * ~100 ms stalls of Tomcat, no GC) were rooted "cpu" in 1 run of 6. So there
 * the root must hold at least this share of the capture's windows. */
#define VERDICT_MIN_SLOW_SHARE 0.02
/* A callee is slow in a window when its requests take this many times longer,
 * relative to their work, than usual. */
#define SLOW_REL 2.0
/* A pool is full in a window when every connection was busy at least this
 * share of the window. */
#define FULL_SHARE 0.5
/* A window without completions is a stall only where the server usually
 * completes at least this many requests per window. */
#define FREEZE_MIN_COMPLETIONS 5.0
/* A server that calls downstream saturates its threads rather than its CPUs
 * when fewer than this share of the requests arriving behind a queued request
 * leave before it (docs/diagnose.md "threads"): processor sharing measured
 * 0.48-0.58 on simulated CPU-bound servers, first-come-first-served thread
 * pools 0.005-0.19. */
#define OVERTAKE_MAX 0.3
/* ... and when the calls made by its requests in flight, per request in
 * flight, are in its stretched windows below this share of what they are in
 * its calm ones (call_progress): under a thread cap the queued requests have
 * made none. Processor sharing measured 0.91-0.97 on simulated CPU-bound
 * servers (exp, const, lognormal, uniform demands), thread caps 0.095-0.43
 * (docs/diagnose.md "threads"). */
#define PROGRESS_MAX 0.7
/* Request-seconds in flight needed on each side (stretched, calm). */
#define PROGRESS_MIN_REQ_S 0.5
/* A CPU changed speed when the own times of the requests it served alone
 * differ between seconds this much more than they scatter within a second
 * (isolated_speed, docs/diagnose.md "speed": F; fixed-speed CPUs measured
 * 0-3, simulated speed changes 190-2260)... */
#define ISO_F_MIN 20.0
/* ... and the second slowest second is at least this much slower than the
 * second fastest (speed changes 1.42-1.99; a smaller step hardly makes a
 * bottleneck). Without the direct test's verdict, the ratios below: */
#define ISO_EFFECT_MIN 1.2
/* The log-rank form of the test (tb_isolated_logrank): periods of 2 s (a
 * second holds too few requests that arrived at an empty server for demands
 * as scattered as exponential ones), each with at least 5 expected; speed
 * when its z score is at least this (about N(0,1) at one speed: fixed-speed
 * CPUs with exponential demands measured -2.5-2.1 over 66 roots, speed
 * changes with them 2.8-4.5 on dev seeds, 0.8-5.0 held out; docs/diagnose.md
 * "speed") and the effect at least ISO_EFFECT_MIN. */
#define ISO_LR_PERIOD (2 * TB_NS_PER_SEC)
#define ISO_LR_MIN_EXPECTED 5.0
#define ISO_LR_Z_MIN 2.5
/* Without throughput levels, a CPU changed speed when the server did this
 * much more work per second unhurried than saturated (capacity_gain) and its
 * own time per request moved this much between seconds (service_spread):
 * simulated speed changes measured gain 1.25-1.39 with spread 1.26-1.72,
 * fixed-speed CPUs gain 0.72-1.15 with spread 1.16-1.36. */
#define SPEED_GAIN 1.2
#define SPEED_SPREAD 1.5
/* With two or more throughput levels, one of: gain >= SPEED_GAIN or a spread
 * of at least this (fixed CPUs 1.13-1.36, the simulated speed changes with
 * levels 1.26-1.72, the one of them with a gain below 1.2 at 1.72). */
#define LEVELS_SPREAD 1.45
/* The verdict is on a tier as a whole (server *) when another of its servers
 * holds the same cause for at least this share of the top server's time. */
#define TIER_SHARE 0.25
#define OVERTAKE_SAMPLES 20000
#define OVERTAKE_MIN 200

const char *tb_cause_name(enum tb_cause c)
{
    static const char *const names[] = {"none", "cpu", "freeze", "speed", "pool", "threads"};
    return (unsigned)c < TB_ARRAY_SIZE(names) ? names[c] : "none";
}

const char *tb_diag_state_name(enum tb_diag_state s)
{
    static const char *const names[] = {"ok", "downstream", "root"};
    return (unsigned)s < TB_ARRAY_SIZE(names) ? names[s] : "ok";
}

/* ---- working state ---------------------------------------------------------------- */

struct tier {
    uint32_t id;
    uint64_t requests;
    struct tb_analysis_result total;
    struct tb_analysis_result *srv; /* per server of the tier, catalog order */
    size_t nsrv;
    struct tb_units *units;
    int64_t wu;                     /* work unit, ns */
    bool *cong;                     /* per window: in an episode of the tier series */
    double base_rs;                 /* usual (median) load/own of the tier */
};

struct server {
    uint32_t id, tier;
    uint64_t requests;
    const struct tb_analysis_result *res; /* its series from the tier's analysis */
    const struct tb_layer_win *lw;
    bool *cong;                     /* per window: in an episode of its own series */
    bool *frozen;                   /* per window: in a freeze episode of its own series, or
                                     * in an episode of it holding a stall (no completion
                                     * where it usually completes several): the drain
                                     * after a pause belongs to the pause */
    double base_ss;                 /* usual (median) self/own */
    double base_rs;                 /* usual (median) load/own */
    double mean_completions;        /* per window, over windows with requests in flight */
    enum tb_cause busy_cause;       /* cpu, speed or threads: what saturation is here */
    double overtaken;               /* overtaken_share(), NAN when not measured */
    struct tb_quota quota;          /* its stops in step with a CPU quota's period */
    bool quota_done;
    struct tb_stretch *lives;       /* its requests' lives by arrival concurrency (N*'s
                                     * stretch rule); NULL when unknown */
};

/* One caller server → callee tier. */
struct edge {
    uint32_t from_server, from_tier, to_tier;
    const struct tb_layer_edge_win *ew;
    uint32_t *open;                 /* per window: most connections open at once */
    uint32_t connections, seen;
    uint64_t conn_requests;
    bool pooled;
};

struct ctx {
    struct tb_store *st;
    const struct tb_catalog *cat;
    const struct tb_diag_opts *o;
    struct tb_diagnosis *d;
    char *err;
    size_t errlen;
    struct tb_callers *callers;
    struct tb_callgraph g;
    int64_t qf, qt;                 /* the requests read: tb_analyze_query_range */
    uint64_t nrq;                   /* requests in [qf, qt) */
    int64_t lo, hi;                 /* their first arrival, last departure */
    struct tb_tierfeed **feeds;     /* per tier: the report pipeline, streamed */
    struct tb_conn *cn;
    size_t ncn, cn_cap;
    bool cn_from_requests;          /* no connection records: one per connection id */
    size_t *cn_slot, cn_slots;      /* ...found by id: open addressing, index + 1 */
    FILE *spill;                    /* the requests as pass1 read them (replay), or NULL */
    uint64_t nspill;
    bool spill_ok;
    uint32_t ntiers_cat, nservers_cat;
    struct tier *tiers;             /* by catalog tier id (index 0 unused) */
    struct server *servers;         /* by catalog server id (index 0 unused) */
    struct tb_layer *layer;         /* the sweep's windows, or NULL when they were stored: */
    struct tb_layer_win *lrows;     /* ...each server's (nservers_cat + 1 rows x nwin) */
    struct tb_layer_edge_win **ledge; /* ...each (caller server, callee tier)'s, or NULL */
    bool stored;                    /* the inputs came from the stored blob (no pass) */
    bool keep;                      /* store the inputs once computed */
    struct tb_buf keep_tiers;       /* ...each tier's first-pass summary, as computed */
    struct edge *edges;
    size_t nedges;
    double w_s;                     /* window width, seconds */
};

static void ctx_free(struct ctx *c)
{
    tb_callers_free(c->callers);
    tb_callgraph_free(&c->g);
    if (c->spill)
        fclose(c->spill);
    free(c->cn_slot);
    for (uint32_t t = 0; c->feeds && t <= c->ntiers_cat; t++)
        tb_tierfeed_free(c->feeds[t]);
    free(c->feeds);
    free(c->cn);
    if (c->tiers) {
        for (uint32_t t = 0; t <= c->ntiers_cat; t++) {
            struct tier *T = &c->tiers[t];
            tb_analysis_result_free(&T->total);
            for (size_t i = 0; i < T->nsrv; i++)
                tb_analysis_result_free(&T->srv[i]);
            free(T->srv);
            if (T->units)
                tb_units_free(T->units);
            free(T->cong);
        }
    }
    free(c->tiers);
    if (c->servers)
        for (uint32_t s = 0; s <= c->nservers_cat; s++) {
            free(c->servers[s].cong);
            free(c->servers[s].frozen);
            free(c->servers[s].lives);
        }
    free(c->servers);
    for (size_t e = 0; e < c->nedges; e++)
        free(c->edges[e].open);
    free(c->edges);
    tb_layer_free(c->layer);
    free(c->lrows);
    if (c->ledge)
        for (size_t i = 0; i < ((size_t)c->nservers_cat + 1) * ((size_t)c->ntiers_cat + 1); i++)
            free(c->ledge[i]);
    free(c->ledge);
    if (c->keep)
        tb_buf_free(&c->keep_tiers);
}

/* The windows of the calls from server s to tier t, NULL when none was made. */
static const struct tb_layer_edge_win *layer_edge(const struct ctx *c, uint32_t s, uint32_t t)
{
    if (c->layer)
        return tb_layer_edge(c->layer, s, t);
    if (!c->ledge || s > c->nservers_cat || t > c->ntiers_cat)
        return NULL;
    return c->ledge[(size_t)s * (c->ntiers_cat + 1) + t];
}

/* ---- per-window quantities ---------------------------------------------------------- */

static double s_load(const struct ctx *c, const struct server *s, size_t k)
{
    return (double)s->lw[k].load_ns / (double)c->d->width_ns;
}

static double s_wait(const struct ctx *c, const struct server *s, size_t k)
{
    return (double)s->lw[k].wait_ns / (double)c->d->width_ns;
}

static double s_self(const struct ctx *c, const struct server *s, size_t k)
{
    return (double)(s->lw[k].load_ns - s->lw[k].wait_ns) / (double)c->d->width_ns;
}

/* Work done: Σ service time of the completions / w (busy servers). */
static double s_own(const struct ctx *c, const struct server *s, size_t k)
{
    const struct tier *T = &c->tiers[s->tier];
    return s->lw[k].work_units * (double)T->wu / (double)c->d->width_ns;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- loading ----------------------------------------------------------------------- */

static int conn_from_request(struct ctx *c, const struct tb_request *r);

/* ---- reading the requests again ------------------------------------------------------------
 * The first pass copies what the analysis reads of each request (64 bytes) to
 * an unlinked file beside the database (its filesystem holds the database
 * already; /tmp may be memory), and later passes read that back instead of
 * asking SQLite again: a streamed SQLite read costs about ten times more than
 * reading the copy. Without the file (a read-only folder, a full disk, an
 * in-memory database) the later passes read the store. */
struct spill_rec {
    int64_t arrival_ns, departure_ns;
    uint64_t conn;
    uint32_t tier, server, class_id, flags;
    struct tb_addr client;
};

static FILE *spill_open(const struct tb_store *st)
{
    const char *db = tb_store_path(st);
    if (!db || !db[0] || !strcmp(db, ":memory:"))
        return NULL;
    const char *slash = strrchr(db, '/');
    char tmpl[4096];
    int n = slash ? snprintf(tmpl, sizeof tmpl, "%.*s/.tbneck-diagnose-XXXXXX",
                             (int)(slash - db), db)
                  : snprintf(tmpl, sizeof tmpl, ".tbneck-diagnose-XXXXXX");
    if (n < 0 || (size_t)n >= sizeof tmpl)
        return NULL;
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return NULL;
    unlink(tmpl);
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}

static void spill_put(struct ctx *c, const struct tb_request *r)
{
    struct spill_rec x;
    memset(&x, 0, sizeof x);
    x.arrival_ns = r->arrival_ns;
    x.departure_ns = r->departure_ns;
    x.conn = r->conn;
    x.tier = r->tier;
    x.server = r->server;
    x.class_id = r->class_id;
    x.flags = r->flags;
    x.client = r->client;
    if (fwrite(&x, sizeof x, 1, c->spill) == 1) {
        c->nspill++;
    } else {
        fclose(c->spill);
        c->spill = NULL;
    }
}

/* Every request of the range in store order, as tb_store_each_request; when
 * the copy is not there (stored inputs, no room), only those of `tier` (0:
 * every tier) — callers that look at one tier's requests see the same ones
 * in the same order either way. */
static int replay(const struct ctx *c, uint32_t tier, tb_store_request_cb cb, void *u)
{
    if (!c->spill_ok)
        return tb_store_each_request(c->st, tier, c->qf, c->qt, cb, u);
    enum { CHUNK = 4096 };
    struct spill_rec *buf = malloc(CHUNK * sizeof *buf);
    if (!buf)
        return TB_E_NOMEM;
    int rc = fseek(c->spill, 0, SEEK_SET) ? TB_E_IO : 0;
    uint64_t left = c->nspill;
    while (!rc && left) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        size_t got = fread(buf, sizeof *buf, want, c->spill);
        if (got != want) {
            rc = TB_E_IO;
            break;
        }
        left -= got;
        for (size_t i = 0; i < got && !rc; i++) {
            struct tb_request r;
            memset(&r, 0, sizeof r);
            r.arrival_ns = buf[i].arrival_ns;
            r.departure_ns = buf[i].departure_ns;
            r.conn = buf[i].conn;
            r.tier = buf[i].tier;
            r.server = buf[i].server;
            r.class_id = buf[i].class_id;
            r.flags = buf[i].flags;
            r.client = buf[i].client;
            rc = cb(u, &r);
        }
    }
    free(buf);
    return rc;
}

/* The first pass over the requests: who calls whom, counts, the span of the
 * window grid, connection records when the store has none, and each tier's
 * pipeline's first half (service times). */
static int pass1(void *u, const struct tb_request *r)
{
    struct ctx *c = u;
    c->nrq++;
    tb_callgraph_add(&c->g, c->callers, r);
    c->lo = TB_MIN(c->lo, r->arrival_ns);
    c->hi = TB_MAX(c->hi, r->departure_ns);
    c->tiers[r->tier <= c->ntiers_cat ? r->tier : 0].requests++;
    if (r->server <= c->nservers_cat)
        c->servers[r->server].requests++;
    int rc = 0;
    if (c->spill)
        spill_put(c, r);
    if (c->cn_from_requests && (rc = conn_from_request(c, r)))
        return rc;
    for (uint32_t t = 1; t <= c->ntiers_cat && !rc; t++)
        if (c->feeds[t])
            rc = tb_tierfeed_add(c->feeds[t], r);
    return rc;
}

/* What the streamed and the stored inputs both start from: the range read,
 * the connection records, the catalog's tiers and servers, a feed per tier. */
static int setup(struct ctx *c, size_t *ncn_stored)
{
    const struct tb_diag_opts *o = c->o;
    tb_analyze_query_range(o->from_ns, o->to_ns, o->width_ns, &c->qf, &c->qt);
    int rc = tb_store_connections(c->st, o->from_ns, o->to_ns, &c->cn, &c->ncn);
    if (!rc)
        rc = tb_callers_new(&c->callers, c->cat);
    if (rc) {
        tb_seterr(c->err, c->errlen, "reading connections: %s", tb_strerror(rc));
        return rc;
    }
    c->cn_cap = c->ncn;
    c->ntiers_cat = tb_catalog_tier_count(c->cat);
    c->nservers_cat = tb_catalog_server_count(c->cat);
    c->tiers = calloc((size_t)c->ntiers_cat + 1, sizeof *c->tiers);
    c->servers = calloc((size_t)c->nservers_cat + 1, sizeof *c->servers);
    c->feeds = calloc((size_t)c->ntiers_cat + 1, sizeof *c->feeds);
    if (!c->tiers || !c->servers || !c->feeds)
        return TB_E_NOMEM;
    for (uint32_t t = 0; t <= c->ntiers_cat; t++)
        c->tiers[t].id = t;
    for (uint32_t s = 1; s <= c->nservers_cat; s++) {
        const struct tb_server_info *si = tb_catalog_server_get(c->cat, s);
        c->servers[s].id = s;
        c->servers[s].tier = si ? si->tier : 0;
    }
    /* Connections opened before the catalog knew their server carry tier 0:
     * resolve them by address now. */
    for (size_t i = 0; i < c->ncn; i++)
        if (!c->cn[i].tier)
            c->cn[i].tier = tb_callers_server_tier(c->callers, &c->cn[i].server,
                                                   &c->cn[i].server_id);
    *ncn_stored = c->ncn;
    c->cn_from_requests = !c->ncn;
    struct tb_analyze_opts ao = {.width_ns = o->width_ns, .from_ns = o->from_ns,
                                 .to_ns = o->to_ns, .recompute = o->recompute};
    for (uint32_t t = 1; t <= c->ntiers_cat && !rc; t++)
        rc = tb_tierfeed_new(&c->feeds[t], c->st, c->cat, t, &ao, c->err, c->errlen);
    if (!rc)
        rc = tb_callgraph_init(&c->g, c->ntiers_cat);
    c->lo = INT64_MAX;
    c->hi = INT64_MIN;
    return rc;
}

/* After the first pass (or its stored results): the call graph and the
 * window grid over everything. */
static int finish_inputs(struct ctx *c, size_t ncn_stored)
{
    const struct tb_diag_opts *o = c->o;
    tb_callgraph_finish(&c->g, c->callers, c->cn, ncn_stored);
    int64_t lo = c->lo, hi = c->hi;
    if (o->from_ns != INT64_MIN)
        lo = o->from_ns;
    if (o->to_ns != INT64_MAX)
        hi = o->to_ns;
    struct tb_diagnosis *d = c->d;
    d->width_ns = o->width_ns;
    if (!c->nrq || hi < lo)
        return 0;
    int64_t w0, w1;
    if (tb_win_floor(lo, o->width_ns, &w0) || tb_win_floor(hi, o->width_ns, &w1)) {
        tb_seterr(c->err, c->errlen, "time range outside what windows can cover");
        return TB_E_INVAL;
    }
    uint64_t nw = (uint64_t)(w1 - w0) / (uint64_t)o->width_ns + 1;
    if (hi == w1 && o->to_ns != INT64_MAX)
        nw--;
    d->from_ns = w0;
    d->nwin = (size_t)nw;
    d->to_ns = w0 + (int64_t)nw * o->width_ns;
    c->w_s = (double)o->width_ns / 1e9;
    return 0;
}

static int load_inputs(struct ctx *c)
{
    size_t ncn_stored = 0;
    int rc = setup(c, &ncn_stored);
    if (rc)
        return rc;
    c->spill = spill_open(c->st);
    if ((rc = tb_store_each_request(c->st, 0, c->qf, c->qt, pass1, c)) != 0) {
        if (!c->err[0])
            tb_seterr(c->err, c->errlen, "reading requests: %s", tb_strerror(rc));
        return rc;
    }
    c->spill_ok = c->spill && fflush(c->spill) == 0 && !ferror(c->spill) &&
                  c->nspill == c->nrq;
    return finish_inputs(c, ncn_stored);
}

/* ---- stored inputs ------------------------------------------------------------------
 * Everything the passes over the requests produce for the default window over
 * the whole capture — request counts, who called whom, connections made from
 * the requests, each tier's first-pass summary (service times), each server's
 * layered-load windows and each (caller server, callee tier)'s call windows —
 * is kept as one blob (store/linkstore.h, table model_parts, name
 * INPUTS_NAME) stamped with the requests it was computed from. The capture
 * stores it when it ends (tb_diagnose_store_inputs), and so does a diagnose
 * that had to compute it; a later diagnose reads it instead of the requests.
 * The per-tier analyses (windows, N*, episodes) are the stored analyses the
 * computation left, as for any report. Host byte order and this build's
 * struct sizes (checked: a mismatch is "not stored"). */
#define INPUTS_NAME "diagnose"
#define INPUTS_VERSION 2 /* 2: each tier's rows' lives (struct tb_stretch) */
#define INPUTS_MAGIC 0x3130474149444254ull /* "TBDIAG01" */
#define INPUTS_LAYOUT                                                                       \
    ((uint64_t)sizeof(struct tb_layer_win) | (uint64_t)sizeof(struct tb_layer_edge_win) << 16 | \
     (uint64_t)sizeof(struct tb_class_service) << 32 | (uint64_t)sizeof(struct tb_conn) << 48)

/* Stored inputs are for diagnose's default window over everything, computed
 * with stored analyses allowed; TBNECK_DIAGNOSE_STORED=0 neither reads nor
 * stores them (the benchmark's baseline, the tests' streamed path). */
static bool inputs_enabled(void)
{
    const char *e = getenv("TBNECK_DIAGNOSE_STORED");
    return !(e && !strcmp(e, "0"));
}

static bool inputs_fit(const struct tb_diag_opts *o)
{
    return inputs_enabled() && o->from_ns == INT64_MIN && o->to_ns == INT64_MAX &&
           o->width_ns == TB_WINDOW_DEFAULT_NS;
}


/* A tier's first-pass summary, after tb_tierfeed_mid (analyse_tiers). */
static void keep_tier(struct ctx *c, uint32_t t)
{
    struct tb_tierfeed_sum s;
    tb_tierfeed_summary(c->feeds[t], &s);
    struct tb_buf *b = &c->keep_tiers;
    tb_buf_u64(b, t);
    tb_buf_u64(b, s.nrows);
    tb_buf_add(b, s.count, s.nrows * sizeof *s.count);
    tb_buf_u64(b, (uint64_t)s.lo);
    tb_buf_u64(b, (uint64_t)s.hi);
    tb_buf_u64(b, s.ndown);
    tb_buf_u64(b, (uint64_t)s.wu);
    tb_buf_u64(b, s.nsvc);
    tb_buf_add(b, s.svc, s.nsvc * sizeof *s.svc);
    tb_buf_u64(b, s.lives ? 1 : 0);
    if (s.lives)
        tb_buf_add(b, s.lives, s.nrows * sizeof *s.lives);
}

/* The blob, once the sweep is done (analyse_tiers). A capture still running
 * has no stable stamp: nothing is stored. Storing is a saving, not a result:
 * a failure is a warning (none for a read-only file). */
static void store_inputs(struct ctx *c)
{
    char stamp[128];
    bool stable = false;
    if (tb_store_stamp(c->st, stamp, sizeof stamp, &stable) || !stable || !c->layer)
        return;
    size_t m = (size_t)c->ntiers_cat + 1, nwin = tb_layer_nwindows(c->layer);
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_u64(&b, INPUTS_MAGIC);
    tb_buf_u64(&b, INPUTS_LAYOUT);
    tb_buf_u64(&b, (uint64_t)c->d->width_ns);
    tb_buf_u64(&b, c->ntiers_cat);
    tb_buf_u64(&b, c->nservers_cat);
    tb_buf_u64(&b, c->nrq);
    tb_buf_u64(&b, (uint64_t)c->lo);
    tb_buf_u64(&b, (uint64_t)c->hi);
    for (uint32_t t = 0; t <= c->ntiers_cat; t++)
        tb_buf_u64(&b, c->tiers[t].requests);
    for (uint32_t s = 0; s <= c->nservers_cat; s++)
        tb_buf_u64(&b, c->servers[s].requests);
    tb_buf_add(&b, c->g.calls, m * m * sizeof *c->g.calls);
    tb_buf_add(&b, c->g.requests, m * sizeof *c->g.requests);
    tb_buf_u64(&b, c->cn_from_requests);
    if (c->cn_from_requests) {
        tb_buf_u64(&b, c->ncn);
        tb_buf_add(&b, c->cn, c->ncn * sizeof *c->cn);
    }
    tb_buf_add(&b, c->keep_tiers.p, c->keep_tiers.len);
    tb_buf_u64(&b, 0);
    tb_buf_u64(&b, nwin);
    for (uint32_t s = 0; s <= c->nservers_cat; s++)
        tb_buf_add(&b, tb_layer_row(c->layer, s), nwin * sizeof(struct tb_layer_win));
    for (uint32_t s = 1; s <= c->nservers_cat; s++)
        for (uint32_t t = 1; t <= c->ntiers_cat; t++) {
            const struct tb_layer_edge_win *ew = tb_layer_edge(c->layer, s, t);
            if (!ew)
                continue;
            tb_buf_u64(&b, s);
            tb_buf_u64(&b, t);
            tb_buf_add(&b, ew, nwin * sizeof *ew);
        }
    tb_buf_u64(&b, 0);
    int rc = tb_buf_ok(&b) && tb_buf_ok(&c->keep_tiers) ? 0 : TB_E_NOMEM;
    if (!rc)
        rc = tb_store_model_put(c->st, INPUTS_NAME, INPUTS_VERSION, stamp, b.p, b.len);
    if (rc && rc != TB_E_PERM)
        tb_log_warn("diagnose: could not store its inputs (%s); the next run reads the requests "
                    "again", tb_strerror(rc));
    tb_buf_free(&b);
}


/* n elements of size sz into a new array (*out; NULL when n is 0). */
static bool get_array(struct tb_rd *k, uint64_t n, size_t sz, void **out)
{
    *out = NULL;
    if (n > (size_t)(k->end - k->p) / sz)
        return false;
    if (!n)
        return true;
    if (!(*out = malloc((size_t)n * sz)))
        return false;
    return tb_rd_get(k, *out, (size_t)n * sz);
}

/* load_inputs and the sweep of analyse_tiers from the blob. TB_E_NOTFOUND
 * (or another error) when there is none, it is not for these requests and
 * this catalog, or the analyses it relies on are no longer stored: the
 * caller starts again with the stream. */
static int restore_inputs(struct ctx *c, const unsigned char *blob, size_t len)
{
    struct tb_rd k = {blob, blob + len};
    size_t ncn_stored = 0;
    int rc = setup(c, &ncn_stored);
    if (rc)
        return rc;
    uint64_t magic, layout, width, nt, ns, lo, hi, from_req;
    if (!tb_rd_u64(&k, &magic) || !tb_rd_u64(&k, &layout) || !tb_rd_u64(&k, &width) ||
        !tb_rd_u64(&k, &nt) || !tb_rd_u64(&k, &ns) || magic != INPUTS_MAGIC ||
        layout != INPUTS_LAYOUT || (int64_t)width != c->o->width_ns || nt != c->ntiers_cat ||
        ns != c->nservers_cat || !tb_rd_u64(&k, &c->nrq) || !tb_rd_u64(&k, &lo) || !tb_rd_u64(&k, &hi))
        return TB_E_NOTFOUND;
    c->lo = (int64_t)lo;
    c->hi = (int64_t)hi;
    size_t m = (size_t)nt + 1;
    for (uint32_t t = 0; t <= nt; t++)
        if (!tb_rd_u64(&k, &c->tiers[t].requests))
            return TB_E_NOTFOUND;
    for (uint32_t s = 0; s <= ns; s++)
        if (!tb_rd_u64(&k, &c->servers[s].requests))
            return TB_E_NOTFOUND;
    if (!tb_rd_get(&k, c->g.calls, m * m * sizeof *c->g.calls) ||
        !tb_rd_get(&k, c->g.requests, m * sizeof *c->g.requests) || !tb_rd_u64(&k, &from_req) ||
        from_req != c->cn_from_requests)
        return TB_E_NOTFOUND;
    if (from_req) {
        uint64_t ncn;
        void *cn;
        if (!tb_rd_u64(&k, &ncn) || !get_array(&k, ncn, sizeof *c->cn, &cn))
            return TB_E_NOTFOUND;
        free(c->cn);
        c->cn = cn;
        c->ncn = c->cn_cap = (size_t)ncn;
    }
    if ((rc = finish_inputs(c, ncn_stored)))
        return rc;
    /* Each tier with requests, its first pass as it was. */
    uint64_t t, ntier_sums = 0, ntier_req = 0;
    for (uint32_t u = 1; u <= nt; u++)
        ntier_req += c->tiers[u].requests > 0;
    while (tb_rd_u64(&k, &t) && t) {
        struct tb_tierfeed_sum sum = {0};
        uint64_t nrows, slo, shi, wu, nsvc, have_lives;
        void *count = NULL, *svc = NULL, *lives = NULL;
        bool ok = t <= nt && c->tiers[t].requests && tb_rd_u64(&k, &nrows) &&
                  get_array(&k, nrows, sizeof *sum.count, &count) && tb_rd_u64(&k, &slo) &&
                  tb_rd_u64(&k, &shi) && tb_rd_u64(&k, &sum.ndown) && tb_rd_u64(&k, &wu) &&
                  tb_rd_u64(&k, &nsvc) && get_array(&k, nsvc, sizeof *sum.svc, &svc) &&
                  tb_rd_u64(&k, &have_lives) && have_lives <= 1 &&
                  get_array(&k, have_lives ? nrows : 0, sizeof *sum.lives, &lives);
        if (ok) {
            sum.lives = lives;
            sum.count = count;
            sum.nrows = (size_t)nrows;
            sum.lo = (int64_t)slo;
            sum.hi = (int64_t)shi;
            sum.wu = (int64_t)wu;
            sum.svc = svc;
            sum.nsvc = (size_t)nsvc;
            rc = tb_tierfeed_resume(c->feeds[t], &sum);
        }
        free(count);
        free(svc);
        free(lives);
        if (!ok)
            return TB_E_NOTFOUND;
        if (rc)
            return rc;
        ntier_sums++;
    }
    if (ntier_sums != ntier_req)
        return TB_E_NOTFOUND;
    /* The sweep's windows. */
    uint64_t nwin;
    if (!tb_rd_u64(&k, &nwin) || nwin != c->d->nwin)
        return TB_E_NOTFOUND;
    if (!c->d->nwin)
        return 0;
    void *rows;
    if (!get_array(&k, (uint64_t)(ns + 1) * nwin, sizeof(struct tb_layer_win), &rows))
        return TB_E_NOTFOUND;
    c->lrows = rows;
    if (!(c->ledge = calloc((ns + 1) * m, sizeof *c->ledge)))
        return TB_E_NOMEM;
    uint64_t s;
    while (tb_rd_u64(&k, &s) && s) {
        void *ew;
        if (s > ns || !tb_rd_u64(&k, &t) || !t || t > nt || c->ledge[s * m + t] ||
            !get_array(&k, nwin, sizeof(struct tb_layer_edge_win), &ew))
            return TB_E_NOTFOUND;
        c->ledge[s * m + t] = ew;
    }
    return k.p == k.end ? 0 : TB_E_NOTFOUND;
}

/* The stored inputs, when there are some for these requests. */
static int load_stored(struct ctx *c)
{
    char stamp[128];
    bool stable = false;
    void *blob = NULL;
    size_t len = 0;
    int rc = tb_store_stamp(c->st, stamp, sizeof stamp, &stable);
    if (!rc)
        rc = tb_store_model_get(c->st, INPUTS_NAME, INPUTS_VERSION, stamp, &blob, &len);
    if (!rc)
        rc = restore_inputs(c, blob, len);
    free(blob);
    return rc;
}

/* The second pass: each tier's windows (its pipeline's second half) and the
 * layered load of every server. */
static int pass2(void *u, const struct tb_request *r)
{
    struct ctx *c = u;
    int rc = 0;
    for (uint32_t t = 1; t <= c->ntiers_cat && !rc; t++)
        if (c->feeds[t])
            rc = tb_tierfeed_add(c->feeds[t], r);
    if (rc || !r->server || r->server > c->nservers_cat || !r->tier || r->tier > c->ntiers_cat)
        return rc;
    uint32_t ct, cs;
    tb_callers_of(c->callers, &r->client, r->tier, &ct, &cs);
    /* A call from a tier's host that is none of its servers (hosts=) has no
     * server to charge; with one server on the tier it is that one. */
    if (ct && !cs) {
        uint32_t only = 0, n = 0;
        for (uint32_t s = 1; s <= c->nservers_cat; s++)
            if (c->servers[s].tier == ct) {
                only = s;
                n++;
            }
        cs = n == 1 ? only : 0;
    }
    const struct tier *T = &c->tiers[r->tier];
    double units = T->units ? tb_units_get(T->units, r->class_id, r->arrival_ns) : 1.0;
    if ((rc = tb_layer_add(c->layer, r, r->server, cs == r->server ? 0 : cs, r->tier, units)))
        tb_seterr(c->err, c->errlen, "layered load: %s", tb_strerror(rc));
    return rc;
}

/* The second pass: each tier's windows (unless stored) and the layered load
 * of every server, swept over the copy of the requests. */
static int sweep(struct ctx *c)
{
    int rc = tb_layer_new(&c->layer, c->d->width_ns, c->d->from_ns, c->d->to_ns,
                      c->nservers_cat + 1, c->ntiers_cat + 1);
    if (rc) {
        tb_seterr(c->err, c->errlen, "layered load over %zu windows: %s", c->d->nwin,
               tb_strerror(rc));
        return rc;
    }
    if ((rc = replay(c, 0, pass2, c)) != 0) {
        if (!c->err[0])
            tb_seterr(c->err, c->errlen, "reading requests: %s", tb_strerror(rc));
        return rc;
    }
    if ((rc = tb_layer_finish(c->layer)))
        return rc;
    for (uint32_t s = 1; s <= c->nservers_cat; s++)
        c->servers[s].lw = tb_layer_row(c->layer, s);
    return 0;
}

/* The report pipeline per tier (service times, N*, episodes, per server) and
 * the layered load: the tiers' first halves were fed by pass1 (or resumed
 * from the stored inputs), one more pass feeds their second halves and the
 * layers (or the stored windows stand for it). */
static int analyse_tiers(struct ctx *c)
{
    size_t nwin = c->d->nwin;
    int rc = 0;
    for (uint32_t t = 1; t <= c->ntiers_cat && !rc; t++) {
        struct tier *T = &c->tiers[t];
        if (!T->requests) {
            tb_tierfeed_free(c->feeds[t]);
            c->feeds[t] = NULL;
            continue;
        }
        const struct tb_class_service *svc;
        size_t nsvc;
        if (!c->stored && (rc = tb_tierfeed_mid(c->feeds[t])))
            break;
        if (c->keep)
            keep_tier(c, t);
        tb_tierfeed_services(c->feeds[t], &svc, &nsvc);
        rc = tb_units_new(&T->units, svc, nsvc, 1.0);
        for (uint32_t s = 1; s <= c->nservers_cat && !rc; s++) {
            const struct tb_stretch *lv = tb_tierfeed_lives(c->feeds[t], s);
            if (!lv || c->servers[s].lives)
                continue;
            if (!(c->servers[s].lives = malloc(sizeof *lv)))
                rc = TB_E_NOMEM;
            else
                *c->servers[s].lives = *lv;
        }
    }
    if (rc)
        return rc;
    if (c->stored) {
        for (uint32_t s = 1; s <= c->nservers_cat; s++)
            c->servers[s].lw = c->lrows + (size_t)s * nwin;
    } else if ((rc = sweep(c)) != 0) {
        return rc;
    }
    for (uint32_t t = 1; t <= c->ntiers_cat; t++) {
        struct tier *T = &c->tiers[t];
        if (!T->requests)
            continue;
        rc = tb_tierfeed_finish(c->feeds[t], &T->total, &T->srv, &T->nsrv);
        tb_tierfeed_free(c->feeds[t]);
        c->feeds[t] = NULL;
        if (rc)
            return rc;
        T->wu = T->total.a.work_unit_ns > 0 ? T->total.a.work_unit_ns : 1;
        if (!(T->cong = calloc(nwin ? nwin : 1, sizeof *T->cong)))
            return TB_E_NOMEM;
        for (size_t e = 0; e < T->total.nep; e++)
            for (int64_t s = T->total.ep[e].start_ns; s < T->total.ep[e].end_ns;
                 s += c->d->width_ns) {
                int64_t k = (s - c->d->from_ns) / c->d->width_ns;
                if (k >= 0 && (size_t)k < nwin)
                    T->cong[k] = true;
            }
        for (size_t i = 0; i < T->nsrv; i++) {
            const struct tb_analysis_result *r = &T->srv[i];
            if (!r->a.server || r->a.server > c->nservers_cat)
                continue;
            struct server *S = &c->servers[r->a.server];
            S->res = r;
            S->cong = calloc(nwin ? nwin : 1, sizeof *S->cong);
            S->frozen = calloc(nwin ? nwin : 1, sizeof *S->frozen);
            if (!S->cong || !S->frozen)
                return TB_E_NOMEM;
            for (size_t e = 0; e < r->nep; e++)
                for (int64_t s = r->ep[e].start_ns; s < r->ep[e].end_ns; s += c->d->width_ns) {
                    int64_t k = (s - c->d->from_ns) / c->d->width_ns;
                    if (k < 0 || (size_t)k >= nwin)
                        continue;
                    S->cong[k] = true;
                    if (r->ep[e].kind == TB_EP_FREEZE)
                        S->frozen[k] = true;
                }
        }
    }
    if (c->keep && !c->stored)
        store_inputs(c);
    return 0;
}

/* Nothing completed in a window where the server usually completes several,
 * with requests inside. */
static bool stall(const struct server *S, size_t k)
{
    return S->lw[k].completions == 0 && S->lw[k].load_ns > 0 &&
           S->mean_completions >= FREEZE_MIN_COMPLETIONS;
}

/* Usual ratios of each server: medians over its calm windows (outside its
 * own congestion episodes) that completed work; a server congested nearly
 * all the time has too few of those, and its usual is then the 10th
 * percentile over all its windows (a median there would call the overload
 * itself usual). */
#define BASE_MIN_WINDOWS 5
static double quantile_sorted(double *v, size_t n, double q)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_dbl);
    size_t k = (size_t)(q * (double)(n - 1));
    return v[k];
}

static int baselines(struct ctx *c)
{
    size_t nwin = c->d->nwin;
    double *v = malloc((nwin ? nwin : 1) * sizeof *v), *u = malloc((nwin ? nwin : 1) * sizeof *u);
    if (!v || !u) {
        free(v);
        free(u);
        return TB_E_NOMEM;
    }
    for (uint32_t s = 1; s <= c->nservers_cat; s++) {
        struct server *S = &c->servers[s];
        if (!S->requests || !S->lw)
            continue;
        size_t busy = 0;
        double comp = 0;
        for (size_t k = 0; k < nwin; k++)
            if (S->lw[k].load_ns > 0) {
                busy++;
                comp += S->lw[k].completions;
            }
        S->mean_completions = busy ? comp / (double)busy : 0;
        for (int calm_only = 1; calm_only >= 0; calm_only--) {
            size_t n = 0;
            for (size_t k = 0; k < nwin; k++) {
                double own = s_own(c, S, k);
                if (own <= 0 || S->lw[k].completions < 2 || (calm_only && S->cong && S->cong[k]))
                    continue;
                v[n] = s_self(c, S, k) / own;
                u[n] = s_load(c, S, k) / own;
                n++;
            }
            if (calm_only && n < BASE_MIN_WINDOWS)
                continue;
            S->base_ss = calm_only ? median(v, n) : quantile_sorted(v, n, 0.10);
            S->base_rs = calm_only ? median(u, n) : quantile_sorted(u, n, 0.10);
            break;
        }
    }
    free(v);
    free(u);
    return 0;
}

static bool stretched(const struct ctx *c, const struct server *S, size_t k);

/* A stall and the drain of what queued during it are one event: from each
 * stalled window on, the windows in which the server stays stretched are
 * marked frozen too (once the baselines are known). */
static void mark_drains(const struct ctx *c)
{
    for (uint32_t s = 1; s <= c->nservers_cat; s++) {
        struct server *S = &c->servers[s];
        if (!S->lw || !S->frozen)
            continue;
        for (size_t k = 0; k < c->d->nwin; k++) {
            if (!stall(S, k) && !S->frozen[k])
                continue;
            S->frozen[k] = true;
            while (k + 1 < c->d->nwin && stretched(c, S, k + 1))
                S->frozen[++k] = true;
        }
    }
}

/* ---- edges: calls and connections from a caller server to a callee tier ------------- */

static struct edge *edge_get(struct ctx *c, uint32_t from_server, uint32_t to_tier, bool add)
{
    for (size_t e = 0; e < c->nedges; e++)
        if (c->edges[e].from_server == from_server && c->edges[e].to_tier == to_tier)
            return &c->edges[e];
    if (!add)
        return NULL;
    struct edge *ne = realloc(c->edges, (c->nedges + 1) * sizeof *ne);
    if (!ne)
        return NULL;
    c->edges = ne;
    struct edge *e = &c->edges[c->nedges++];
    memset(e, 0, sizeof *e);
    e->from_server = from_server;
    e->from_tier = c->servers[from_server].tier;
    e->to_tier = to_tier;
    return e;
}

/* The caller server of a request or connection from `client` to `tier`: the
 * caller tier's server on that address, or its only server. 0 = none. */
static uint32_t caller_server(const struct ctx *c, const struct tb_addr *client, uint32_t tier)
{
    uint32_t ct, cs;
    tb_callers_of(c->callers, client, tier, &ct, &cs);
    if (!ct || cs)
        return cs;
    uint32_t only = 0, n = 0;
    for (uint32_t s = 1; s <= c->nservers_cat; s++)
        if (c->servers[s].tier == ct) {
            only = s;
            n++;
        }
    return n == 1 ? only : 0;
}

struct conn_ev {
    int64_t t;
    int d; /* +1 open, -1 close */
};

static int cmp_ev(const void *a, const void *b)
{
    const struct conn_ev *x = a, *y = b;
    if (x->t != y->t)
        return (x->t > y->t) - (x->t < y->t);
    return y->d - x->d; /* an open before a close at the same time */
}

/* Connection records when the store has none (a database written before
 * they were recorded): one per connection id, from its requests (fed in
 * arrival order). */
static size_t conn_slot(const struct ctx *c, uint64_t conn)
{
    uint64_t h = conn * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 17) & (c->cn_slots - 1);
    while (c->cn_slot[i] && c->cn[c->cn_slot[i] - 1].conn != conn)
        i = (i + 1) & (c->cn_slots - 1);
    return i;
}

static int conn_from_request(struct ctx *c, const struct tb_request *r)
{
    /* Records in the order connections are first seen, found by id. */
    if (2 * (c->ncn + 1) > c->cn_slots) {
        size_t n = c->cn_slots ? 2 * c->cn_slots : 1024;
        size_t *ns = calloc(n, sizeof *ns);
        if (!ns)
            return TB_E_NOMEM;
        free(c->cn_slot);
        c->cn_slot = ns;
        c->cn_slots = n;
        for (size_t k = 0; k < c->ncn; k++)
            c->cn_slot[conn_slot(c, c->cn[k].conn)] = k + 1;
    }
    size_t slot = conn_slot(c, r->conn), j = c->cn_slot[slot];
    if (j == 0) {
        if (tb_grow(&c->cn, &c->cn_cap, c->ncn + 1, sizeof *c->cn))
            return TB_E_NOMEM;
        struct tb_conn *x = &c->cn[c->ncn++];
        memset(x, 0, sizeof *x);
        x->conn = r->conn;
        x->client = r->client;
        x->tier = r->tier;
        x->server_id = r->server;
        const struct tb_server_info *si = tb_catalog_server_get(c->cat, r->server);
        if (si)
            x->server = si->addr;
        x->open_ns = r->arrival_ns;
        x->opened = TB_CONN_MIDSTREAM;
        x->closed = TB_CONN_END;
        j = c->ncn;
        c->cn_slot[slot] = j;
    }
    struct tb_conn *x = &c->cn[j - 1];
    x->close_ns = TB_MAX(x->close_ns, r->departure_ns);
    x->requests++;
    return 0;
}

static int build_edges(struct ctx *c)
{
    size_t nwin = c->d->nwin;
    for (uint32_t s = 1; s <= c->nservers_cat; s++)
        for (uint32_t t = 1; t <= c->ntiers_cat; t++) {
            const struct tb_layer_edge_win *ew = layer_edge(c, s, t);
            if (!ew)
                continue;
            struct edge *e = edge_get(c, s, t, true);
            if (!e)
                return TB_E_NOMEM;
            e->ew = ew;
        }
    /* Each connection to an edge: its life as two events. */
    size_t nev = 0;
    struct conn_ev *ev = malloc((2 * c->ncn + 1) * sizeof *ev);
    uint32_t *owner = malloc((c->ncn + 1) * sizeof *owner);
    if (!ev || !owner) {
        free(ev);
        free(owner);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i < c->ncn; i++) {
        owner[i] = UINT32_MAX;
        const struct tb_conn *x = &c->cn[i];
        if (!x->tier || x->tier > c->ntiers_cat)
            continue;
        uint32_t cs = caller_server(c, &x->client, x->tier);
        if (!cs || cs == x->server_id)
            continue;
        struct edge *e = edge_get(c, cs, x->tier, true);
        if (!e) {
            free(ev);
            free(owner);
            return TB_E_NOMEM;
        }
        owner[i] = (uint32_t)(e - c->edges);
    }
    for (size_t ei = 0; ei < c->nedges; ei++) {
        struct edge *e = &c->edges[ei];
        if (!(e->open = calloc(nwin ? nwin : 1, sizeof *e->open))) {
            free(ev);
            free(owner);
            return TB_E_NOMEM;
        }
        nev = 0;
        for (size_t i = 0; i < c->ncn; i++) {
            if (owner[i] != ei)
                continue;
            const struct tb_conn *x = &c->cn[i];
            e->seen++;
            e->conn_requests += x->requests;
            /* Opened before the capture: open since its start. Never seen to
             * end (still open at the end, or silent past the idle timeout,
             * as an idle pooled connection is): open to the end. */
            int64_t open_ns = x->opened == TB_CONN_MIDSTREAM ? c->d->from_ns : x->open_ns;
            int64_t close_ns = x->closed == TB_CONN_END || x->closed == TB_CONN_OPEN ||
                                       x->closed == TB_CONN_IDLE
                                   ? c->d->to_ns
                                   : x->close_ns;
            ev[nev++] = (struct conn_ev){TB_MIN(open_ns, x->open_ns), +1};
            ev[nev++] = (struct conn_ev){TB_MAX(close_ns, x->close_ns), -1};
        }
        qsort(ev, nev, sizeof *ev, cmp_ev);
        /* Most connections open at once, overall and per window: the level
         * between two events holds over [t_i, t_i+1). */
        int64_t open = 0;
        for (size_t i = 0; i < nev; i++) {
            open += ev[i].d;
            if (open > (int64_t)e->connections)
                e->connections = (uint32_t)open;
            int64_t a = ev[i].t, b = i + 1 < nev ? ev[i + 1].t : a;
            if (open <= 0)
                continue;
            int64_t lo = TB_MAX(a, c->d->from_ns), hi = TB_MIN(TB_MAX(a + 1, b), c->d->to_ns);
            for (int64_t t = lo; t < hi;) {
                size_t k = (size_t)((t - c->d->from_ns) / c->d->width_ns);
                if ((uint32_t)open > e->open[k])
                    e->open[k] = (uint32_t)open;
                t = c->d->from_ns + (int64_t)(k + 1) * c->d->width_ns;
            }
        }
        /* A pool keeps its connections for many calls; a connection per call
         * has no ceiling to hit. */
        e->pooled = e->seen && e->conn_requests >= 2 * (uint64_t)e->seen;
    }
    free(ev);
    free(owner);
    return 0;
}

/* ---- the wait-for graph, per window ------------------------------------------------- */

/* Own time stretched: much more self-load than usual for the work done. */
static bool stretched(const struct ctx *c, const struct server *S, size_t k)
{
    if (!S->lw)
        return false;
    double self = s_self(c, S, k), own = s_own(c, S, k);
    if (self - own < fmax(QUEUE_MIN, own))
        return false;
    if (own <= 0)
        return true; /* requests inside, nothing completed */
    double base = isfinite(S->base_ss) && S->base_ss > 0 ? S->base_ss : 1;
    return self / own >= STRETCH_REL * base;
}

/* Slow for its callers: its requests, waiting included, take much longer
 * than usual for their work. */
static bool slow(const struct ctx *c, const struct server *S, size_t k)
{
    if (!S->lw)
        return false;
    double load = s_load(c, S, k), own = s_own(c, S, k);
    if (load - own < fmax(QUEUE_MIN, own))
        return false;
    if (own <= 0)
        return true;
    double base = isfinite(S->base_rs) && S->base_rs > 0 ? S->base_rs : 1;
    return load / own >= SLOW_REL * base;
}

/* Whether the pool of edge e was full in window k. */
static bool pool_full(const struct ctx *c, const struct edge *e, size_t k)
{
    return e->pooled && e->ew && e->open[k] && e->ew[k].max_calls >= e->open[k] &&
           (double)e->ew[k].at_max_ns >= FULL_SHARE * (double)c->d->width_ns;
}

/* Of the requests that arrived at S after r and before r left, the share that
 * left before r, summed over S's requests arriving in windows where S is
 * stretched (at most OVERTAKE_SAMPLES of them, spread evenly): the queueing
 * discipline seen from the wire. Threads taken first come, first served let
 * few later arrivals overtake a queued request (they wait behind it); CPUs
 * shared by every request in the server let the shorter ones through. NAN
 * with fewer than OVERTAKE_MIN candidates. */
struct overtake {
    const struct ctx *c;
    const struct server *S;
    int pass;                 /* 0: count the candidates, 1: sample them */
    size_t total, every, seen;
    uint64_t over, cand;
    int64_t *dep;             /* departures of the sampled requests still waited on */
    size_t ndep, cap;
};

static int overtake_cb(void *u, const struct tb_request *r)
{
    struct overtake *o = u;
    const struct ctx *c = o->c;
    const struct server *S = o->S;
    if (o->pass == 1 && o->ndep) {
        /* r is a later arrival for every sampled request still in flight at
         * its arrival; the others are done (arrivals only grow). */
        size_t m = 0;
        for (size_t a = 0; a < o->ndep; a++) {
            if (r->arrival_ns >= o->dep[a])
                continue;
            o->dep[m++] = o->dep[a];
            if (r->server == S->id) {
                o->cand++;
                o->over += r->departure_ns < o->dep[a];
            }
        }
        o->ndep = m;
    }
    if (r->server != S->id || r->arrival_ns < c->d->from_ns)
        return 0;
    size_t k = (size_t)((r->arrival_ns - c->d->from_ns) / c->d->width_ns);
    if (k >= c->d->nwin || !stretched(c, S, k) || S->frozen[k])
        return 0;
    if (o->pass == 0) {
        o->total++;
        return 0;
    }
    if (o->seen++ % o->every)
        return 0;
    int rc = tb_grow(&o->dep, &o->cap, o->ndep + 1, sizeof *o->dep);
    if (!rc)
        o->dep[o->ndep++] = r->departure_ns;
    return rc;
}

/* Of the requests that arrived at S after r and before r left, the share that
 * left before r, summed over S's requests arriving in windows where S is
 * stretched (at most OVERTAKE_SAMPLES of them, spread evenly): the queueing
 * discipline seen from the wire. Threads taken first come, first served let
 * few later arrivals overtake a queued request (they wait behind it); CPUs
 * shared by every request in the server let the shorter ones through. NAN
 * with fewer than OVERTAKE_MIN candidates. Two passes over the stored
 * requests (count, then sample); memory: the sampled requests in flight. */
static double overtaken_share(const struct ctx *c, const struct server *S)
{
    struct overtake o = {.c = c, .S = S, .every = 1};
    int rc = 0;
    for (o.pass = 0; o.pass < 2 && !rc; o.pass++) {
        rc = replay(c, S->tier, overtake_cb, &o);
        o.every = o.total > OVERTAKE_SAMPLES
                      ? (o.total + OVERTAKE_SAMPLES - 1) / OVERTAKE_SAMPLES
                      : 1;
    }
    free(o.dep);
    if (rc)
        return NAN;
    return o.cand >= OVERTAKE_MIN ? (double)o.over / (double)o.cand : NAN;
}

/* How much more work per second the server does unhurried than saturated:
 * the 90th percentile of its work rate (own) in busy windows where it is not
 * stretched over the median of its work rate in stretched ones. A CPU of one
 * speed cannot do more without a queue than with one (about 1, plus noise);
 * a CPU that changes speed saturates at its slow speed and, at another time,
 * keeps up with more. NAN without enough windows of both. */
static double capacity_gain(const struct ctx *c, const struct server *S)
{
    size_t nwin = c->d->nwin, ns = 0, nf = 0;
    double *sat = malloc((nwin ? nwin : 1) * sizeof *sat);
    double *free_ = malloc((nwin ? nwin : 1) * sizeof *free_);
    double g = NAN;
    if (!sat || !free_)
        goto out;
    for (size_t k = 0; k < nwin; k++) {
        if (S->frozen[k] || S->lw[k].completions < 2)
            continue;
        if (stretched(c, S, k))
            sat[ns++] = s_own(c, S, k);
        else if (s_self(c, S, k) >= QUEUE_MIN)
            free_[nf++] = s_own(c, S, k);
    }
    if (ns >= 5 && nf >= 10) {
        double m = median(sat, ns);
        if (m > 0)
            g = quantile_sorted(free_, nf, 0.90) / m;
    }
out:
    free(sat);
    free(free_);
    return g;
}

/* How much the server's own time per request, when it is not stretched,
 * moves from one second to another: the 90th over the 10th percentile of
 * (Σ self-load time / Σ completions) per second of unstretched windows. At
 * one CPU speed a request costs the same whenever it runs (about 1.1 with
 * the noise of a second's mix); a CPU changing frequency makes the same work
 * take longer for seconds at a time. Only windows whose self-load is at most
 * `cap` count (busy_cause: the server's self-load N*, about its cores):
 * above it requests share the CPUs and each takes longer with how many share
 * it, so the seconds of busier bursts on a fixed-speed CPU read as a slower
 * one (bench/nstar/app.conf seed 3: 1.525 over every window, 1.459 below
 * N*self). NAN with fewer than 6 usable seconds. */
#define SPREAD_MIN_COMPLETIONS 20
static double service_spread(const struct ctx *c, const struct server *S, double cap)
{
    size_t per = (size_t)((TB_NS_PER_SEC + c->d->width_ns - 1) / c->d->width_ns);
    size_t nsec = c->d->nwin / (per ? per : 1) + 1, n = 0;
    double *v = malloc(nsec * sizeof *v);
    if (!v)
        return NAN;
    for (size_t s0 = 0; s0 < c->d->nwin; s0 += per) {
        double self = 0, comp = 0;
        for (size_t k = s0; k < s0 + per && k < c->d->nwin; k++) {
            if (S->frozen[k] || stretched(c, S, k) || !S->lw[k].completions ||
                s_self(c, S, k) > cap)
                continue;
            self += (double)(S->lw[k].load_ns - S->lw[k].wait_ns);
            comp += S->lw[k].completions;
        }
        if (comp >= SPREAD_MIN_COMPLETIONS)
            v[n++] = self / comp;
    }
    double r = NAN;
    if (n >= 6) {
        double lo = quantile_sorted(v, n, 0.10), hi = quantile_sorted(v, n, 0.90);
        if (lo > 0)
            r = hi / lo;
    }
    free(v);
    return r;
}

/* Whether R's stops are those of a CPU quota (stats.h tb_quota_period):
 * computed once, from its requests' arrivals and departures. A throttled
 * server stalls (no completion for most of a window) at every period it
 * exhausts its quota in: not a freeze but its CPU allowance, and a rate of
 * completions that changes with how much of each period it runs is not a
 * CPU changing speed. */
struct server_times {
    uint32_t server;
    int64_t *arr, *dep;
    size_t n, cap;
};

static int server_times_cb(void *u, const struct tb_request *r)
{
    struct server_times *t = u;
    if (r->server != t->server)
        return 0;
    size_t cap = t->cap;
    if (tb_grow(&t->arr, &cap, t->n + 1, sizeof *t->arr) ||
        tb_grow(&t->dep, &t->cap, t->n + 1, sizeof *t->dep))
        return TB_E_NOMEM;
    t->arr[t->n] = r->arrival_ns;
    t->dep[t->n++] = r->departure_ns;
    return 0;
}

/* Whether R's stops are those of a CPU quota (stats.h tb_quota_period):
 * computed once, from its requests' arrivals and departures (one pass over
 * the stored requests; 16 bytes per request of R, the one per-request cost
 * left, and only for a server found to be a root). A throttled server stalls
 * (no completion for most of a window) at every period it exhausts its quota
 * in: not a freeze but its CPU allowance, and a rate of completions that
 * changes with how much of each period it runs is not a CPU changing speed. */
static int64_t quota_period(struct ctx *c, struct server *R)
{
    if (R->quota_done)
        return R->quota.period_ns;
    R->quota_done = true;
    struct server_times t = {.server = R->id};
    if (replay(c, R->tier, server_times_cb, &t) ||
        tb_quota_period(t.arr, t.n, t.dep, t.n, &R->quota))
        R->quota.period_ns = 0;
    free(t.arr);
    free(t.dep);
    return R->quota.period_ns;
}

/* R's requests and the calls it made downstream (calls: requests of other
 * tiers whose client is R), read in one pass over the stored requests for
 * call_progress and isolated_speed: 24 bytes per request of R and 16 per
 * call, only for a server found to be a root, and at most ROOT_TIMES_MAX
 * records (24 MB, and 32 MB more while call_progress sorts their events,
 * or 56 MB while isolated_speed holds its samples and tests them):
 * past that, the time from ROOT_TIMES_SLACK before the earliest arrival
 * left out on is not looked at (the store's order is about, not exactly,
 * that of arrivals: a request longer than the slack stored after the cut
 * is missed), so memory stays bounded on any capture. Checked with the cap
 * at 15 000 on 15 s simulated runs (cut at about 10 s): the threads, cpu and
 * speed verdicts unchanged. */
#define ROOT_TIMES_MAX (size_t)1000000
#define ROOT_TIMES_SLACK (2 * TB_NS_PER_SEC)
struct times_rq {
    int64_t a, d;
    uint32_t cls;
};
struct times_call {
    int64_t a, d;
};
struct root_times {
    const struct ctx *c;
    uint32_t server;
    struct times_rq *rq;
    size_t nrq, caprq;
    struct times_call *call;
    size_t ncall, capcall;
    int64_t first_left;   /* earliest arrival left out, INT64_MAX when none */
};

/* The end of the time looked at. */
static int64_t root_times_end(const struct root_times *t)
{
    return t->first_left == INT64_MAX ? INT64_MAX : t->first_left - ROOT_TIMES_SLACK;
}

static int root_times_cb(void *u, const struct tb_request *r)
{
    struct root_times *t = u;
    bool own = r->server == t->server;
    if (!own && caller_server(t->c, &r->client, r->tier) != t->server)
        return 0;
    if (t->nrq + t->ncall >= ROOT_TIMES_MAX) {
        if (r->arrival_ns < t->first_left)
            t->first_left = r->arrival_ns;
        return 0;
    }
    if (own) {
        if (tb_grow(&t->rq, &t->caprq, t->nrq + 1, sizeof *t->rq))
            return TB_E_NOMEM;
        t->rq[t->nrq++] = (struct times_rq){r->arrival_ns, r->departure_ns, r->class_id};
    } else {
        if (tb_grow(&t->call, &t->capcall, t->ncall + 1, sizeof *t->call))
            return TB_E_NOMEM;
        t->call[t->ncall++] = (struct times_call){r->arrival_ns, r->departure_ns};
    }
    return 0;
}

static int cmp_times_rq(const void *a, const void *b)
{
    const struct times_rq *x = a, *y = b;
    return x->a < y->a ? -1 : x->a > y->a;
}

static int cmp_times_call(const void *a, const void *b)
{
    const struct times_call *x = a, *y = b;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* The calls made by R's requests in flight per request in flight, in the
 * windows where R is stretched over those where it is not (stats.h
 * tb_call_progress): about 1 when every request R holds has begun its work
 * (processor sharing), well below 1 when only a capped number have (a
 * thread pool). NAN when not measurable. */
static double call_progress(const struct ctx *c, const struct server *R,
                            const struct root_times *t)
{
    size_t n = 2 * t->nrq + t->ncall;
    struct tb_prog_ev *ev = malloc((n ? n : 1) * sizeof *ev);
    uint8_t *mark = malloc(c->d->nwin ? c->d->nwin : 1);
    double ratio = NAN;
    if (!ev || !mark)
        goto out;
    size_t m = 0;
    for (size_t i = 0; i < t->nrq; i++) {
        ev[m++] = (struct tb_prog_ev){t->rq[i].a, TB_PROG_ARRIVAL};
        ev[m++] = (struct tb_prog_ev){t->rq[i].d, TB_PROG_DEPARTURE};
    }
    for (size_t i = 0; i < t->ncall; i++)
        ev[m++] = (struct tb_prog_ev){t->call[i].a, TB_PROG_CALL};
    int64_t end = root_times_end(t);
    for (size_t k = 0; k < c->d->nwin; k++) {
        int64_t wend = c->d->from_ns + (int64_t)(k + 1) * c->d->width_ns;
        mark[k] = R->frozen[k] || wend > end ? 0 : stretched(c, R, k) ? 2 : 1;
    }
    struct tb_progress pr;
    if (!tb_call_progress(ev, m, mark, c->d->from_ns, c->d->width_ns, c->d->nwin,
                          PROGRESS_MIN_REQ_S, &pr))
        ratio = pr.ratio;
out:
    free(ev);
    free(mark);
    return ratio;
}

/* Whether R's CPU changed speed, from its requests served alone (nothing
 * else of R in flight for their whole life; own time = duration less the
 * calls R made meanwhile, all theirs): stats.h tb_isolated_speed, grouped by
 * second; and from every request that arrived at an empty R, censored when
 * the next one arrived (tb_isolated_logrank, grouped by ISO_LR_PERIOD).
 * Requests in a frozen window are left out (a pause is not a speed). */
struct iso_result {
    double f, effect;       /* tb_isolated_speed */
    double lr_z, lr_effect; /* tb_isolated_logrank */
};
static void isolated_speed(const struct ctx *c, const struct server *R, struct root_times *t,
                           struct iso_result *res)
{
    *res = (struct iso_result){NAN, NAN, NAN, NAN};
    struct tb_iso_sample *s = malloc((t->nrq ? t->nrq : 1) * sizeof *s);
    if (!s)
        return;
    if (t->nrq)
        qsort(t->rq, t->nrq, sizeof *t->rq, cmp_times_rq);
    if (t->ncall)
        qsort(t->call, t->ncall, sizeof *t->call, cmp_times_call);
    size_t n = 0, j = 0;
    int64_t maxdep = INT64_MIN, end = root_times_end(t);
    for (size_t i = 0; i < t->nrq; i++) {
        const struct times_rq *q = &t->rq[i];
        bool empty = q->a > maxdep;
        if (q->d > maxdep)
            maxdep = q->d;
        /* Alone from its arrival until it left or the next one arrived. */
        int64_t next = i + 1 < t->nrq ? t->rq[i + 1].a : INT64_MAX;
        bool censored = next <= q->d;
        int64_t stop = censored ? next : q->d;
        if (!empty || q->a < c->d->from_ns || q->d <= q->a || stop <= q->a || q->d > end)
            continue;
        size_t k0 = (size_t)((q->a - c->d->from_ns) / c->d->width_ns);
        size_t k1 = (size_t)((stop - c->d->from_ns) / c->d->width_ns);
        if (k1 >= c->d->nwin || R->frozen[k0] || R->frozen[k1])
            continue;
        while (j < t->ncall && t->call[j].a < q->a)
            j++;
        int64_t waited = 0;
        for (size_t m = j; m < t->ncall && t->call[m].a < stop; m++)
            waited += (t->call[m].d < stop ? t->call[m].d : stop) - t->call[m].a;
        if (stop - q->a - waited > 0)
            s[n++] = (struct tb_iso_sample){q->a, (double)(stop - q->a - waited), q->cls,
                                            censored};
    }
    struct tb_iso_logrank lr;
    if (!tb_isolated_logrank(s, n, ISO_LR_PERIOD, ISO_LR_MIN_EXPECTED, &lr)) {
        res->lr_z = lr.z;
        res->lr_effect = lr.effect;
    }
    struct tb_iso_speed sp;
    if (!tb_isolated_speed(s, n, TB_NS_PER_SEC, &sp)) {
        res->f = sp.f;
        res->effect = sp.effect;
    }
    free(s);
}

static double n_star_self(const struct ctx *c, const uint32_t *srv, size_t n, int64_t wu);
static const char *tname(const struct ctx *c, uint32_t t);
static const char *saddr(const struct ctx *c, uint32_t s, char *buf, size_t len);

/* What saturation is at server R: threads when it calls downstream, its
 * queue is served first come, first served (overtaken_share) AND its queued
 * requests have not begun (call_progress: processor sharing of equal demands
 * keeps arrival order too, so order alone is not enough); speed when its
 * requests served alone take longer for seconds at a time (isolated_speed),
 * or, that test undecided, by the levels and ratios below; else cpu. A
 * server that calls nothing is read as cpu either way: a cap of K threads on
 * work that is all CPU looks from the wire exactly like K CPUs. */
static enum tb_cause busy_cause(struct ctx *c, struct server *R)
{
    if (R->busy_cause != TB_CAUSE_NONE)
        return R->busy_cause;
    bool calls = false;
    for (size_t ei = 0; ei < c->nedges && !calls; ei++)
        calls = c->edges[ei].from_server == R->id && c->edges[ei].ew;
    double ov = calls ? overtaken_share(c, R) : NAN;
    struct root_times t = {.c = c, .server = R->id, .first_left = INT64_MAX};
    double prog = NAN;
    struct iso_result iso = {NAN, NAN, NAN, NAN};
    if (!replay(c, 0, root_times_cb, &t)) {
        prog = calls ? call_progress(c, R, &t) : NAN;
        isolated_speed(c, R, &t, &iso);
    }
    free(t.rq);
    free(t.call);
    /* The time per request moves with sharing too: only windows at most at
     * the server's own congestion point (its self-load's N*, about its cores)
     * count for the spread. */
    double nss = n_star_self(c, &R->id, 1, c->tiers[R->tier].wu);
    double gain = capacity_gain(c, R);
    double spread = service_spread(c, R, isfinite(nss) && nss > 0 ? nss : INFINITY);
    enum tb_cause cause = TB_CAUSE_CPU;
    if (quota_period(c, R) > 0)
        cause = TB_CAUSE_CPU;
    else if (isfinite(ov) && ov < OVERTAKE_MAX && isfinite(prog) && prog < PROGRESS_MAX)
        cause = TB_CAUSE_THREADS;
    /* A CPU changing speed serves its requests alone slower for seconds at a
     * time (isolated_speed): the direct test, when there are requests served
     * alone in enough seconds. */
    else if (isfinite(iso.f) && iso.f >= ISO_F_MIN && iso.effect >= ISO_EFFECT_MIN)
        cause = TB_CAUSE_SPEED;
    /* The same on every request that arrived at an empty server, censored
     * at the next arrival (tb_isolated_logrank): the power the test above
     * lacks on widely scattered demands, where a saturated slow CPU keeps
     * only its short requests alone to the end. Only at a server that calls
     * nothing: a request's own time stops while it waits on a call, so an
     * arrival during a call censors it at a share of its demand (the pieces
     * done), and calls that are slower in some periods then move the test
     * on a CPU of one speed (thread-capped application tier, exp demands,
     * held-out seed 34: z 4.3). */
    else if (!calls && isfinite(iso.lr_z) && iso.lr_z >= ISO_LR_Z_MIN &&
             iso.lr_effect >= ISO_EFFECT_MIN)
        cause = TB_CAUSE_SPEED;
    /* Without it: while saturated a server completes work at the rate its
     * CPUs allow: one plateau; a CPU changing frequency gives one per speed
     * (the report's levels, over the server's congested windows), or does
     * more work unhurried at one time than it manages saturated at another.
     * The levels alone are not enough: the report's levels rule finds 2-3 in
     * the saturated throughput of a fixed-speed CPU too (4 of 5 seeds of the
     * simulated db-cpu), so they count only beside one of the two ratios. */
    else if ((R->res && R->res->a.n_levels >= 2 &&
              (gain >= SPEED_GAIN || spread >= LEVELS_SPREAD)) ||
             (gain >= SPEED_GAIN && spread >= SPEED_SPREAD))
        cause = TB_CAUSE_SPEED;
    /* The speed figures behind the cause, for bench/diagnose_heldout.sh. */
    if (getenv("TBNECK_DIAGNOSE_DEBUG")) {
        char sb[TB_ADDR_STRLEN];
        fprintf(stderr,
                "diagnose: %s %s: isolated F %.3g effect %.3g, log-rank z %.3g effect %.3g, "
                "gain %.3g, spread %.3g, levels %d: %s\n",
                tname(c, R->tier), saddr(c, R->id, sb, sizeof sb), iso.f, iso.effect, iso.lr_z, iso.lr_effect, gain,
                spread, R->res ? (int)R->res->a.n_levels : 0, tb_cause_name(cause));
    }
    R->busy_cause = cause;
    R->overtaken = ov;
    return cause;
}

/* The cause at root r in window k; *pool receives the full pool's edge. */
static enum tb_cause cause_at(struct ctx *c, uint32_t r, size_t k, const struct edge **pool)
{
    struct server *R = &c->servers[r];
    *pool = NULL;
    for (size_t ei = 0; ei < c->nedges; ei++) {
        const struct edge *e = &c->edges[ei];
        if (e->from_server == r && pool_full(c, e, k)) {
            *pool = e;
            return TB_CAUSE_POOL;
        }
    }
    if ((R->frozen[k] || stall(R, k)) && !quota_period(c, R))
        return TB_CAUSE_FREEZE;
    return busy_cause(c, R);
}

/* Time held per (root server, cause), accumulated over windows. */
struct tally {
    uint32_t server;
    enum tb_cause cause;
    double t;
};

struct tallies {
    struct tally *v;
    size_t n, cap;
};

static int tally_add(struct tallies *ts, uint32_t server, enum tb_cause cause, double t)
{
    for (size_t i = 0; i < ts->n; i++)
        if (ts->v[i].server == server && ts->v[i].cause == cause) {
            ts->v[i].t += t;
            return 0;
        }
    int rc = tb_grow(&ts->v, &ts->cap, ts->n + 1, sizeof *ts->v);
    if (rc == 0)
        ts->v[ts->n++] = (struct tally){server, cause, t};
    return rc;
}

static bool callee_slow(const struct ctx *c, const struct edge *e, size_t k);

/* A pool at its ceiling whose callee is not slow, with requests queued at
 * its caller x: a root even when x's usual windows are no better, for a pool
 * too small for the load is full in most of them and "usual" is then the
 * waiting itself. */
static bool pool_root(const struct ctx *c, uint32_t x, size_t k)
{
    const struct server *X = &c->servers[x];
    if (!X->lw || s_self(c, X, k) - s_own(c, X, k) < fmax(QUEUE_MIN, s_own(c, X, k)))
        return false;
    for (size_t ei = 0; ei < c->nedges; ei++)
        if (c->edges[ei].from_server == x && pool_full(c, &c->edges[ei], k) &&
            !callee_slow(c, &c->edges[ei], k))
            return true;
    return false;
}

/* From server x in window k down the calls to the roots, with weight w: a
 * server whose callees include slow servers passes its weight down to them
 * (split by how much work is queued in each); a server with no slow callee
 * is a root when its own time is stretched. Adds (root, cause) to ts. */
static int descend(struct ctx *c, uint32_t x, size_t k, double w, uint32_t depth,
                   struct tallies *ts)
{
    if (depth > c->ntiers_cat)
        return 0; /* a call cycle */
    double tot = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t y = 1; y <= c->nservers_cat; y++) {
            const struct server *Y = &c->servers[y];
            if (y == x || !Y->lw || Y->tier == c->servers[x].tier)
                continue;
            bool called = false;
            for (size_t ei = 0; ei < c->nedges && !called; ei++) {
                const struct edge *e = &c->edges[ei];
                called = e->from_server == x && e->to_tier == Y->tier && e->ew &&
                         e->ew[k].calls_ns;
            }
            if (!called || !(slow(c, Y, k) || pool_root(c, y, k)))
                continue;
            double excess = s_load(c, Y, k) - s_own(c, Y, k);
            if (pass == 0) {
                tot += excess;
            } else {
                int rc = descend(c, y, k, w * excess / tot, depth + 1, ts);
                if (rc)
                    return rc;
            }
        }
        if (pass == 0 && tot <= 0)
            break;
    }
    if (tot > 0)
        return 0;
    if (!stretched(c, &c->servers[x], k))
        return pool_root(c, x, k) ? tally_add(ts, x, TB_CAUSE_POOL, w) : 0;
    const struct edge *pool;
    enum tb_cause cause = cause_at(c, x, k, &pool);
    return tally_add(ts, x, cause, w);
}

/* The roots of window k as seen from the servers `from`, each weighted by
 * its share of their load, w_time in all; *top and *tc the heaviest root. */
static int roots_of_window(struct ctx *c, const uint32_t *from, size_t nfrom, size_t k,
                           double w_time, struct tallies *ts, uint32_t *top, enum tb_cause *tc)
{
    double tot = 0;
    for (size_t i = 0; i < nfrom; i++)
        tot += c->servers[from[i]].lw ? s_load(c, &c->servers[from[i]], k) : 0;
    *top = 0;
    *tc = TB_CAUSE_NONE;
    if (tot <= 0)
        return 0;
    struct tallies here = {0};
    int rc = 0;
    for (size_t i = 0; i < nfrom && !rc; i++) {
        const struct server *F = &c->servers[from[i]];
        double share = F->lw ? s_load(c, F, k) / tot : 0;
        if (share > 0)
            rc = descend(c, from[i], k, share * w_time, 0, &here);
    }
    double best = 0;
    for (size_t i = 0; i < here.n && !rc; i++) {
        rc = tally_add(ts, here.v[i].server, here.v[i].cause, here.v[i].t);
        if (here.v[i].t > best) {
            best = here.v[i].t;
            *top = here.v[i].server;
            *tc = here.v[i].cause;
        }
    }
    free(here.v);
    return rc;
}

/* The servers of tier t with a layer row. */
static size_t tier_servers(const struct ctx *c, uint32_t t, uint32_t *out)
{
    size_t n = 0;
    for (uint32_t s = 1; s <= c->nservers_cat; s++)
        if (c->servers[s].tier == t && c->servers[s].lw && c->servers[s].requests)
            out[n++] = s;
    return n;
}

/* ---- results ------------------------------------------------------------------------- */

static const char *tname(const struct ctx *c, uint32_t t)
{
    const struct tb_tier_info *ti = t ? tb_catalog_tier_get(c->cat, t) : NULL;
    return ti ? ti->name : "?";
}

static const char *saddr(const struct ctx *c, uint32_t s, char *buf, size_t len)
{
    const struct tb_server_info *si = s ? tb_catalog_server_get(c->cat, s) : NULL;
    if (!si) {
        snprintf(buf, len, "*");
        return buf;
    }
    return tb_addr_fmt(&si->addr, buf, len);
}

/* Episodes: each tier's, and each server's when its tier has several; the
 * root of each is the (server, cause) holding most of its windows. An
 * episode in which no server's own time is stretched anywhere below it is
 * not a bottleneck (load above N* with no queue anywhere) and is dropped. */
static int build_episodes(struct ctx *c, bool no_roots, size_t *dismissed)
{
    struct tb_diagnosis *d = c->d;
    uint32_t *from = malloc(((size_t)c->nservers_cat + 1) * sizeof *from);
    size_t cap = 0;
    int rc = 0;
    if (!from)
        return TB_E_NOMEM;
    *dismissed = 0;
    for (uint32_t t = 1; t <= c->ntiers_cat && !rc; t++) {
        struct tier *T = &c->tiers[t];
        if (!T->requests)
            continue;
        size_t nsrv = tier_servers(c, t, from);
        for (size_t series = 0; series <= (nsrv > 1 ? nsrv : 0) && !rc; series++) {
            const struct tb_analysis_result *res =
                series == 0 ? &T->total : c->servers[from[series - 1]].res;
            if (!res)
                continue;
            for (size_t e = 0; e < res->nep && !rc; e++) {
                const struct tb_episode *ep = &res->ep[e];
                struct tallies ts = {0};
                for (int64_t s = ep->start_ns; s < ep->end_ns && !rc; s += d->width_ns) {
                    int64_t k = (s - d->from_ns) / d->width_ns;
                    if (k < 0 || (size_t)k >= d->nwin)
                        continue;
                    uint32_t top;
                    enum tb_cause tc;
                    if (!no_roots)
                        rc = roots_of_window(c, series ? &from[series - 1] : from,
                                             series ? 1 : nsrv, (size_t)k, 1.0, &ts, &top, &tc);
                }
                size_t best = SIZE_MAX;
                for (size_t i = 0; i < ts.n; i++)
                    if (best == SIZE_MAX || ts.v[i].t > ts.v[best].t ||
                        (ts.v[i].t == ts.v[best].t && ts.v[i].cause == TB_CAUSE_FREEZE))
                        best = i;
                /* A stall inside an episode is its cause even when the drain
                 * that follows holds more windows: the drain is the stall's
                 * consequence. */
                for (size_t i = 0; best != SIZE_MAX && i < ts.n; i++)
                    if (ts.v[i].cause == TB_CAUSE_FREEZE && ts.v[i].server == ts.v[best].server)
                        best = i;
                if (!rc && (best != SIZE_MAX || no_roots)) {
                    if (d->nepisodes == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        struct tb_diag_episode *ne = realloc(d->episodes, nc * sizeof *ne);
                        if (!ne) {
                            rc = TB_E_NOMEM;
                        } else {
                            d->episodes = ne;
                            cap = nc;
                        }
                    }
                    if (!rc) {
                        struct tb_diag_episode *x = &d->episodes[d->nepisodes++];
                        x->start_ns = ep->start_ns;
                        x->end_ns = ep->end_ns;
                        x->tier = t;
                        x->server = series ? from[series - 1] : 0;
                        x->kind = ep->kind;
                        x->root_tier = x->root_server = 0;
                        x->cause = TB_CAUSE_NONE;
                        if (best != SIZE_MAX) {
                            const struct server *R = &c->servers[ts.v[best].server];
                            x->root_tier = R->tier;
                            x->root_server = R->id;
                            x->cause = ts.v[best].cause;
                        }
                    }
                } else if (!rc) {
                    (*dismissed)++;
                }
                free(ts.v);
            }
        }
    }
    free(from);
    return rc;
}

static int cmp_episode(const void *a, const void *b)
{
    const struct tb_diag_episode *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
    if (x->tier != y->tier)
        return (x->tier > y->tier) - (x->tier < y->tier);
    return (x->server > y->server) - (x->server < y->server);
}

/* Whether a callee server of edge e is slow in window k. */
static bool callee_slow(const struct ctx *c, const struct edge *e, size_t k)
{
    for (uint32_t y = 1; y <= c->nservers_cat; y++)
        if (c->servers[y].tier == e->to_tier && slow(c, &c->servers[y], k))
            return true;
    return false;
}

/* Mean response time of a tier's requests in the windows where it is not
 * slow: load / completions (Little). */
static double calm_rt_ns(const struct ctx *c, uint32_t tier)
{
    double load = 0, comp = 0;
    for (uint32_t y = 1; y <= c->nservers_cat; y++) {
        const struct server *Y = &c->servers[y];
        if (Y->tier != tier || !Y->lw)
            continue;
        for (size_t k = 0; k < c->d->nwin; k++)
            if (!slow(c, Y, k)) {
                load += (double)Y->lw[k].load_ns;
                comp += Y->lw[k].completions;
            }
    }
    return comp > 0 ? load / comp : NAN;
}

static int build_pools(struct ctx *c)
{
    struct tb_diagnosis *d = c->d;
    d->pools = calloc(c->nedges ? c->nedges : 1, sizeof *d->pools);
    if (!d->pools)
        return TB_E_NOMEM;
    for (size_t ei = 0; ei < c->nedges; ei++) {
        const struct edge *e = &c->edges[ei];
        const struct server *F = &c->servers[e->from_server];
        if (!F->requests || !c->tiers[e->to_tier].requests)
            continue;
        struct tb_diag_pool *p = &d->pools[d->npools++];
        p->from_tier = e->from_tier;
        p->from_server = e->from_server;
        p->to_tier = e->to_tier;
        p->connections = e->connections;
        p->connections_seen = e->seen;
        p->pooled = e->pooled;
        size_t cong = 0, full = 0, nf = 0;
        double peak = 0, calls = 0, reqs = 0, cm = 0, cm_all = 0;
        for (size_t k = 0; k < d->nwin; k++) {
            double ck = e->ew ? (double)e->ew[k].calls_ns / (double)d->width_ns : 0;
            cm_all += ck;
            if (d->front_congested[k]) {
                cm += ck;
                nf++;
            }
            if (e->ew)
                p->max_concurrent = TB_MAX(p->max_concurrent, e->ew[k].max_calls);
            if (e->ew) {
                calls += e->ew[k].started;
                reqs += F->lw[k].arrivals;
            }
            if (!F->cong || !F->cong[k])
                continue;
            cong++;
            peak = fmax(peak, F->lw[k].arrivals);
            if (e->ew && pool_full(c, e, k) && !callee_slow(c, e, k))
                full++;
        }
        p->full_fraction = cong ? (double)full / (double)cong : 0;
        p->calls_mean = nf ? cm / (double)nf : d->nwin ? cm_all / (double)d->nwin : 0;
        p->recommended = p->connections;
        char nbuf[TB_ADDR_STRLEN];
        if (!p->pooled || p->full_fraction < 0.2 || !cong || reqs <= 0) {
            snprintf(p->reason, sizeof p->reason, "%s",
                     !p->pooled ? "one connection per call: no pool to size"
                     : p->full_fraction < 0.2 ? "rarely full while the callee is not slow: "
                                               "keep the size"
                                             : "no calls to size from");
            continue;
        }
        /* Little's law on the calls the caller is offered at its busiest:
         * (requests arriving per second in its busiest congested window) x
         * (calls per request) x (the callee's response time when not slow)
         * = connections busy; half again for bursts inside a window. The
         * busiest window, not the mean: behind a closed loop of users the
         * arrivals slow down to what the full pool lets through, so their
         * mean under congestion understates the demand. At least twice the
         * present size, a step that shows whether the pool was the limit. */
        double rate = peak / c->w_s * (calls / reqs);
        double rt = calm_rt_ns(c, e->to_tier);
        double need = rate * (isfinite(rt) ? rt : 0) / 1e9;
        uint32_t want = (uint32_t)ceil(1.5 * need);
        want = TB_MAX(want, 2 * p->connections);
        /* More connections than the callee can work on at once only moves
         * the queue into the callee: its N* shared among its callers caps
         * the advice. */
        double ns = tb_analysis_threshold(&c->tiers[e->to_tier].total.a);
        uint32_t callers = 0;
        for (size_t ej = 0; ej < c->nedges; ej++)
            callers += c->edges[ej].to_tier == e->to_tier && c->edges[ej].ew;
        char capnote[TB_NAME_MAX + 96] = "";
        if (isfinite(ns) && callers) {
            uint32_t cap = (uint32_t)ceil(ns / callers);
            if (cap > p->connections && cap < want) {
                want = cap;
                snprintf(capnote, sizeof capnote, ", capped at %s's N* %.1f shared by %u callers",
                         tname(c, e->to_tier), ns, callers);
            }
        }
        p->recommended = want;
        snprintf(p->reason, sizeof p->reason,
                 "%s is offered up to %.0f calls/s to %s while congested, %s answers in %.2f ms "
                 "when not slow: %.1f connections busy; x1.5 for bursts = %u, at least twice the "
                 "present size%s",
                 saddr(c, e->from_server, nbuf, sizeof nbuf), rate, tname(c, e->to_tier),
                 tname(c, e->to_tier), (isfinite(rt) ? rt : 0) / 1e6, need,
                 (uint32_t)ceil(1.5 * need), capnote);
    }
    return 0;
}

/* N* of a series of self-loads (load - waiting), its work as throughput. */
static double n_star_self(const struct ctx *c, const uint32_t *srv, size_t n, int64_t wu)
{
    struct tb_window *w = calloc(c->d->nwin ? c->d->nwin : 1, sizeof *w);
    if (!w)
        return NAN;
    for (size_t k = 0; k < c->d->nwin; k++) {
        w[k].start_ns = c->d->from_ns + (int64_t)k * c->d->width_ns;
        w[k].width_ns = c->d->width_ns;
        for (size_t i = 0; i < n; i++) {
            const struct server *S = &c->servers[srv[i]];
            w[k].load += s_self(c, S, k);
            w[k].completions += S->lw[k].completions;
            w[k].work_units += S->lw[k].work_units;
        }
        w[k].throughput = w[k].completions / c->w_s;
        w[k].norm_throughput = w[k].work_units / c->w_s;
    }
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.slope_hint = wu > 0 ? 1e9 / (double)wu : 0;
    /* The stretch rule over the same servers' requests, when all are known. */
    struct tb_stretch *lives = calloc(1, sizeof *lives);
    for (size_t i = 0; i < n && lives; i++) {
        const struct tb_stretch *lv = c->servers[srv[i]].lives;
        if (!lv) {
            free(lives);
            lives = NULL;
        } else {
            tb_stretch_merge(lives, lv);
        }
    }
    o.stretch = lives;
    struct tb_nstar ns;
    double v = NAN;
    if (tb_nstar_windows(w, c->d->nwin, &o, &ns) == 0)
        v = tb_nstar_threshold(&ns);
    free(lives);
    free(w);
    return v;
}

static void fill_row(struct ctx *c, struct tb_diag_row *row, const uint32_t *srv, size_t n,
                     const bool *fcong, size_t nfcong)
{
    double load = 0, self = 0, wait = 0, own = 0, cs = 0, co = 0;
    for (size_t k = 0; k < c->d->nwin; k++)
        for (size_t i = 0; i < n; i++) {
            const struct server *S = &c->servers[srv[i]];
            load += s_load(c, S, k);
            self += s_self(c, S, k);
            wait += s_wait(c, S, k);
            own += s_own(c, S, k);
            if (!nfcong || fcong[k]) {
                cs += s_self(c, S, k);
                co += s_own(c, S, k);
            }
        }
    double nw = (double)c->d->nwin;
    row->load_mean = load / nw;
    row->self_load_mean = self / nw;
    row->wait_load_mean = wait / nw;
    row->own_load_mean = own / nw;
    row->stretch = co > 0 ? cs / co : NAN;
    row->n_star_self = n_star_self(c, srv, n, c->tiers[row->tier].wu);
}

static int build_rows(struct ctx *c, const bool *fcong, size_t nfcong)
{
    struct tb_diagnosis *d = c->d;
    uint32_t *srv = malloc(((size_t)c->nservers_cat + 1) * sizeof *srv);
    d->tiers = calloc((size_t)c->ntiers_cat + 1, sizeof *d->tiers);
    d->servers = calloc((size_t)c->nservers_cat + 1, sizeof *d->servers);
    if (!srv || !d->tiers || !d->servers) {
        free(srv);
        return TB_E_NOMEM;
    }
    /* Tiers front first, then by depth, then by id. */
    for (uint32_t depth = 0; depth <= c->ntiers_cat + 1; depth++) {
        for (uint32_t t = 1; t <= c->ntiers_cat; t++) {
            uint32_t dt = c->g.depth[t] == UINT32_MAX ? c->ntiers_cat + 1 : c->g.depth[t];
            if (dt != depth || !c->tiers[t].requests)
                continue;
            struct tier *T = &c->tiers[t];
            size_t n = tier_servers(c, t, srv);
            struct tb_diag_row *row = &d->tiers[d->ntiers++];
            row->tier = t;
            row->requests = T->requests;
            row->depth = c->g.depth[t];
            row->n_star = tb_analysis_threshold(&T->total.a);
            row->congested_fraction = T->total.a.congested_fraction;
            fill_row(c, row, srv, n, fcong, nfcong);
            for (size_t i = 0; i < n; i++) {
                struct tb_diag_row *sr = &d->servers[d->nservers++];
                const struct server *S = &c->servers[srv[i]];
                sr->tier = t;
                sr->server = srv[i];
                sr->requests = S->requests;
                sr->depth = row->depth;
                sr->n_star = S->res ? tb_analysis_threshold(&S->res->a) : NAN;
                sr->congested_fraction = S->res ? S->res->a.congested_fraction : 0;
                fill_row(c, sr, &srv[i], 1, fcong, nfcong);
            }
        }
    }
    free(srv);
    /* States: root when it holds some root time (the verdict's tier at
     * least), downstream when it was congested by someone else. */
    for (size_t i = 0; i < d->nepisodes; i++) {
        const struct tb_diag_episode *x = &d->episodes[i];
        for (size_t j = 0; j < d->ntiers; j++) {
            struct tb_diag_row *row = &d->tiers[j];
            if (row->tier == x->root_tier)
                row->state = TB_DIAG_ROOT;
            else if (row->tier == x->tier && row->state == TB_DIAG_OK)
                row->state = TB_DIAG_DOWNSTREAM;
        }
        for (size_t j = 0; j < d->nservers; j++) {
            struct tb_diag_row *row = &d->servers[j];
            if (row->server == x->root_server)
                row->state = TB_DIAG_ROOT;
            else if ((row->server == x->server || (!x->server && row->tier == x->tier)) &&
                     row->state == TB_DIAG_OK)
                row->state = TB_DIAG_DOWNSTREAM;
        }
    }
    return 0;
}

/* Per window: the front tier's congestion and root, each tier's layers. */
static int build_series(struct ctx *c, bool **fcong_out, size_t *nfcong)
{
    struct tb_diagnosis *d = c->d;
    size_t nwin = d->nwin;
    d->front_congested = calloc(nwin, sizeof *d->front_congested);
    d->root_server = calloc(nwin, sizeof *d->root_server);
    d->root_cause = calloc(nwin, sizeof *d->root_cause);
    if (!d->front_congested || !d->root_server || !d->root_cause)
        return TB_E_NOMEM;
    *nfcong = 0;
    if (c->g.front)
        for (size_t k = 0; k < nwin; k++)
            if ((d->front_congested[k] = c->tiers[c->g.front].cong[k]))
                (*nfcong)++;
    /* No congestion point at the front (the report's knee test found none:
     * on a short or noisy capture its throughput may still seem to rise with
     * load): the front's slow windows stand for its congestion, those in
     * which its requests take at least twice their usual time for their work
     * with a request queued (the test the walk applies to every callee). */
    const struct tier *F = c->g.front ? &c->tiers[c->g.front] : NULL;
    if (F && F->requests && !*nfcong && !isfinite(tb_analysis_threshold(&F->total.a))) {
        for (uint32_t s = 1; s <= c->nservers_cat; s++) {
            const struct server *S = &c->servers[s];
            if (S->tier != c->g.front || !S->lw || !S->requests)
                continue;
            for (size_t k = 0; k < nwin; k++)
                if (!d->front_congested[k] && slow(c, S, k)) {
                    d->front_congested[k] = true;
                    (*nfcong)++;
                }
        }
        d->front_by_slowness = *nfcong > 0;
    }
    *fcong_out = d->front_congested;
    return 0;
}

static int fill_layers(struct ctx *c)
{
    struct tb_diagnosis *d = c->d;
    size_t nwin = d->nwin;
    d->self = calloc(d->ntiers * nwin + 1, sizeof *d->self);
    d->wait = calloc(d->ntiers * nwin + 1, sizeof *d->wait);
    if (!d->self || !d->wait)
        return TB_E_NOMEM;
    for (size_t i = 0; i < d->ntiers; i++)
        for (uint32_t s = 1; s <= c->nservers_cat; s++) {
            const struct server *S = &c->servers[s];
            if (S->tier != d->tiers[i].tier || !S->lw)
                continue;
            for (size_t k = 0; k < nwin; k++) {
                d->self[i * nwin + k] += s_self(c, S, k);
                d->wait[i * nwin + k] += s_wait(c, S, k);
            }
        }
    return 0;
}

/* ---- the verdict ----------------------------------------------------------------------- */

struct group {
    uint32_t tier;
    enum tb_cause cause;
    double t;
};

static void verdict_text(struct ctx *c, const struct group *g, uint32_t server, double share)
{
    struct tb_diagnosis *d = c->d;
    struct tb_diag_verdict *v = &d->verdict;
    char sb[TB_ADDR_STRLEN], waits[160] = "";
    const char *tier = tname(c, g->tier), *front = tname(c, d->front);
    saddr(c, server, sb, sizeof sb);
    v->tier = g->tier;
    v->server = server;
    v->cause = g->cause;
    v->share = share;
    /* The tiers above the root that only waited on it. */
    size_t used = 0;
    for (size_t i = 0; i < d->ntiers && used < sizeof waits; i++)
        if (d->tiers[i].tier != g->tier && d->tiers[i].state == TB_DIAG_DOWNSTREAM)
            used += (size_t)snprintf(waits + used, sizeof waits - used, "%s%s", used ? ", " : "",
                                     tname(c, d->tiers[i].tier));
    char who[TB_NAME_MAX + TB_ADDR_STRLEN + 32];
    if (server)
        snprintf(who, sizeof who, "%s %s", tier, sb);
    else
        snprintf(who, sizeof who, "every server of %s", tier);
    int pct = (int)lround(share * 100);
    char tail[200] = "";
    if (used)
        snprintf(tail, sizeof tail, "; %s only %s on it", waits,
                 strchr(waits, ',') ? "wait" : "waits");
    switch (g->cause) {
    case TB_CAUSE_CPU:
        /* Held to a CPU quota: the stops of the verdict's server, or of the
         * first of its tier's servers that shows them. */
        for (uint32_t s = 1; s <= c->nservers_cat && !v->quota_period_ns; s++)
            if ((server ? s == server : c->servers[s].tier == g->tier) &&
                c->servers[s].quota_done)
                v->quota_period_ns = c->servers[s].quota.period_ns;
        if (v->quota_period_ns) {
            snprintf(v->resource, sizeof v->resource, "cpu quota of %s %s", tier,
                     server ? sb : "(all)");
            snprintf(v->evidence, sizeof v->evidence,
                     "%s is held to its CPU allowance in %d%% of %s's congested time: it stops "
                     "answering until the next %.0f ms period each time it has used its quota "
                     "(a CFS CPU quota: cgroup cpu.max, CPUQuota=, a container's CPU limit), "
                     "its completed work at a plateau, requests waiting for it; raise its CPU "
                     "quota%s",
                     who, pct, front, (double)v->quota_period_ns / 1e6, tail);
            break;
        }
        snprintf(v->resource, sizeof v->resource, "cpu of %s %s", tier, server ? sb : "(all)");
        snprintf(v->evidence, sizeof v->evidence,
                 "%s is CPU-saturated in %d%% of %s's congested time (completed work at its "
                 "plateau, requests waiting for it)%s",
                 who, pct, front, tail);
        break;
    case TB_CAUSE_SPEED:
        snprintf(v->resource, sizeof v->resource, "cpu speed of %s %s", tier,
                 server ? sb : "(all)");
        snprintf(v->evidence, sizeof v->evidence,
                 "%s saturates at changing speeds in %d%% of %s's congested time (its "
                 "completed-work rate steps between levels: a CPU changing frequency)%s",
                 who, pct, front, tail);
        break;
    case TB_CAUSE_FREEZE:
        snprintf(v->resource, sizeof v->resource, "%s %s stalls", tier, server ? sb : "(all)");
        snprintf(v->evidence, sizeof v->evidence,
                 "%s stalls (requests inside, nothing completes: e.g. a stop-the-world "
                 "garbage collection) in %d%% of %s's congested time%s",
                 who, pct, front, tail);
        break;
    case TB_CAUSE_THREADS:
        snprintf(v->resource, sizeof v->resource, "threads of %s %s", tier,
                 server ? sb : "(all)");
        snprintf(v->evidence, sizeof v->evidence,
                 "%s works on a capped number of requests at once while the rest queue "
                 "(its thread pool) in %d%% of %s's congested time, with idle connections and "
                 "an unhurried tier below%s",
                 who, pct, front, tail);
        break;
    case TB_CAUSE_POOL: {
        /* The pool's callee and size: the edge of the root tier at ceiling. */
        uint32_t to = 0, conns = 0, rec = 0;
        for (size_t i = 0; i < d->npools; i++) {
            const struct tb_diag_pool *p = &d->pools[i];
            if (p->from_tier == g->tier && (!server || p->from_server == server) &&
                p->full_fraction > 0 && (!to || p->full_fraction > 0)) {
                to = p->to_tier;
                conns = TB_MAX(conns, p->connections);
                rec = TB_MAX(rec, p->recommended);
            }
        }
        snprintf(v->resource, sizeof v->resource, "%s → %s connections", tier,
                 to ? tname(c, to) : "?");
        snprintf(v->evidence, sizeof v->evidence,
                 "%s has all of its %u connections to %s busy in %d%% of %s's congested "
                 "time while %s answers at its usual speed: raise the pool to %u%s",
                 who, conns, to ? tname(c, to) : "?", pct, front, to ? tname(c, to) : "?",
                 rec, tail);
        break;
    }
    case TB_CAUSE_NONE:
        break;
    }
    size_t len = strlen(v->evidence);
    if (d->front_by_slowness && len < sizeof v->evidence)
        snprintf(v->evidence + len, sizeof v->evidence - len,
                 " (%s has no congestion point: its congested time is the windows in which its "
                 "requests took at least twice their usual time)",
                 front);
}

static void verdict_none(struct ctx *c, const char *fmt, ...) TB_PRINTF(2, 3);
static void verdict_none(struct ctx *c, const char *fmt, ...)
{
    struct tb_diag_verdict *v = &c->d->verdict;
    memset(v, 0, sizeof *v);
    v->cause = TB_CAUSE_NONE;
    snprintf(v->resource, sizeof v->resource, "none");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->evidence, sizeof v->evidence, fmt, ap);
    va_end(ap);
}

/* A capture the layered method cannot judge: nothing, one tier, no calls.
 * Sets the verdict `none` with its reason and returns true. */
static bool structural_none(struct ctx *c)
{
    uint32_t front = c->g.front;
    uint32_t tiers_with_requests = 0;
    bool any_call = false;
    for (uint32_t t = 1; t <= c->ntiers_cat; t++) {
        tiers_with_requests += c->tiers[t].requests > 0;
        for (uint32_t u = 1; u <= c->ntiers_cat; u++)
            any_call |= tb_callgraph_calls(&c->g, t, u);
    }
    if (!front) {
        verdict_none(c, "no requests in the range: nothing to diagnose");
        return true;
    }
    if (tiers_with_requests < 2) {
        verdict_none(c, "only one tier (%s) has requests: a bottleneck is told from waiting "
                        "only between tiers that call each other",
                     tname(c, front));
        return true;
    }
    if (!any_call) {
        verdict_none(c, "no tier calls another: no client of a tier is another tier's machine "
                        "(give the tiers' machines with hosts= in a tiers file)");
        return true;
    }
    return false;
}

static int build_verdict(struct ctx *c, size_t nfcong)
{
    struct tb_diagnosis *d = c->d;
    uint32_t front = c->g.front;
    if (!nfcong) {
        double ns = tb_analysis_threshold(&c->tiers[front].total.a);
        if (isfinite(ns))
            verdict_none(c, "%s, the front tier, was never congested (load below N* = %.2f in "
                            "every window)",
                         tname(c, front), ns);
        else
            verdict_none(c, "%s, the front tier, was never congested (its load never reached a "
                            "congestion point)",
                         tname(c, front));
        return 0;
    }
    uint32_t *from = malloc(((size_t)c->nservers_cat + 1) * sizeof *from);
    struct tallies ts = {0};
    if (!from)
        return TB_E_NOMEM;
    size_t nfrom = tier_servers(c, front, from);
    int rc = 0;
    for (size_t k = 0; k < d->nwin && !rc; k++) {
        if (!d->front_congested[k])
            continue;
        uint32_t top;
        enum tb_cause tc;
        rc = roots_of_window(c, from, nfrom, k, 1.0, &ts, &top, &tc);
        d->root_server[k] = top;
        d->root_cause[k] = (uint8_t)tc;
    }
    free(from);
    if (rc) {
        free(ts.v);
        return rc;
    }
    /* The (server, cause) holding the most time is the root; other servers
     * of its tier with the same cause and at least a quarter of its time
     * make it a verdict on the tier as a whole (a pool every server hits,
     * each server's own thread cap). One server's stall must not lose to its
     * neighbours' echoes of it added up. */
    size_t bi = SIZE_MAX;
    for (size_t i = 0; i < ts.n; i++)
        if (bi == SIZE_MAX || ts.v[i].t > ts.v[bi].t)
            bi = i;
    struct group best = {0, TB_CAUSE_NONE, 0};
    uint32_t server = 0;
    if (bi != SIZE_MAX) {
        best = (struct group){c->servers[ts.v[bi].server].tier, ts.v[bi].cause, 0};
        server = ts.v[bi].server;
        for (size_t j = 0; j < ts.n; j++) {
            if (c->servers[ts.v[j].server].tier != best.tier || ts.v[j].cause != best.cause)
                continue;
            if (j != bi && ts.v[j].t >= TIER_SHARE * ts.v[bi].t)
                server = 0;
            if (j == bi || ts.v[j].t >= TIER_SHARE * ts.v[bi].t)
                best.t += ts.v[j].t;
        }
    }
    /* Without a congestion point the front's windows are its slow ones
     * (build_series): say so, and cite no N* the report says is not there. */
    const char *how = d->front_by_slowness ? "had no congestion point and was slow" :
                                             "was congested";
    double min_t = VERDICT_MIN_WINDOWS;
    if (d->front_by_slowness)
        min_t = fmax(min_t, VERDICT_MIN_SLOW_SHARE * (double)d->nwin);
    if (best.t > 0 && best.t < min_t) {
        free(ts.v);
        verdict_none(c, "%s %s in %zu windows (%.0f%%), but the only root found "
                        "below it holds less than %.0f windows of it: a blip, not a bottleneck",
                     tname(c, front), how, nfcong, 100.0 * (double)nfcong / (double)d->nwin,
                     ceil(min_t));
        return 0;
    }
    if (best.t <= 0) {
        free(ts.v);
        verdict_none(c, "%s %s in %zu windows (%.0f%%), but no server's own time "
                        "was stretched anywhere below it: %s, not a bottleneck",
                     tname(c, front), how, nfcong, 100.0 * (double)nfcong / (double)d->nwin,
                     d->front_by_slowness ? "no queue anywhere" : "load above N* with no queue");
        return 0;
    }
    free(ts.v);
    verdict_text(c, &best, server, best.t / (double)nfcong);
    return 0;
}

int tb_diagnose(struct tb_store *st, const struct tb_catalog *cat, const struct tb_diag_opts *o,
                struct tb_diagnosis *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (err && errlen)
        err[0] = '\0';
    struct ctx c = {.st = st, .cat = cat, .o = o, .d = d, .err = err, .errlen = errlen};
    bool *fcong = NULL;
    size_t nfcong = 0, dismissed = 0;
    /* The stored inputs when there are some for these requests (and the
     * analyses they rely on are still stored), else the requests: the same
     * numbers either way. */
    int rc = TB_E_NOTFOUND;
    if (inputs_fit(o) && !o->recompute && (rc = load_stored(&c)) == 0)
        c.stored = true;
    if (rc) {
        ctx_free(&c);
        c = (struct ctx){.st = st, .cat = cat, .o = o, .d = d, .err = err, .errlen = errlen};
        memset(d, 0, sizeof *d);
        if (err && errlen)
            err[0] = '\0';
        if ((c.keep = inputs_fit(o)))
            tb_buf_init(&c.keep_tiers);
        rc = load_inputs(&c);
    }
    d->front = c.g.front;
    bool structural = !rc && structural_none(&c);
    if (!rc && d->nwin) {
        if (!rc)
            rc = analyse_tiers(&c);
        if (!rc)
            rc = baselines(&c);
        if (!rc)
            mark_drains(&c);
        if (!rc)
            rc = build_edges(&c);
        if (!rc)
            rc = build_series(&c, &fcong, &nfcong);
        if (!rc)
            rc = build_pools(&c);
        if (!rc)
            rc = build_episodes(&c, structural, &dismissed);
        if (!rc && d->nepisodes)
            qsort(d->episodes, d->nepisodes, sizeof *d->episodes, cmp_episode);
        if (!rc)
            rc = build_rows(&c, fcong, nfcong);
        if (!rc)
            rc = fill_layers(&c);
    }
    d->dismissed = dismissed;
    if (!rc && !structural)
        rc = build_verdict(&c, nfcong);
    ctx_free(&c);
    if (!rc && o->critical_path) {
        int e = tb_critpath_stored(st, cat, o->from_ns, o->to_ns, !o->recompute, &d->cp);
        d->have_cp = e == 0;
        if (e && e != TB_E_NOTFOUND)
            rc = e;
    }
    if (rc) {
        if (err && errlen && !err[0])
            tb_seterr(err, errlen, "%s", tb_strerror(rc));
        tb_diagnosis_free(d);
    }
    return rc;
}

int tb_diagnose_store_inputs(struct tb_store *st, const struct tb_catalog *cat, char *err,
                             size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    struct tb_diag_opts o = {.width_ns = TB_WINDOW_DEFAULT_NS, .from_ns = INT64_MIN,
                             .to_ns = INT64_MAX};
    if (!inputs_enabled())
        return 0;
    /* The catalog as a later diagnose loads it, not the capture's own (which
     * may hold entries no stored request uses). */
    struct tb_catalog *own = NULL;
    int rc = 0;
    if (!cat) {
        if (!(rc = tb_catalog_new(&own)))
            rc = tb_store_load_catalog(st, own);
        if (rc) {
            tb_catalog_free(own);
            tb_seterr(err, errlen, "loading the catalog: %s", tb_strerror(rc));
            return rc;
        }
        cat = own;
    }
    struct tb_diagnosis d;
    memset(&d, 0, sizeof d);
    struct ctx c = {.st = st, .cat = cat, .o = &o, .d = &d, .err = err, .errlen = errlen,
                    .keep = true};
    tb_buf_init(&c.keep_tiers);
    rc = load_inputs(&c);
    if (!rc && d.nwin)
        rc = analyse_tiers(&c);
    ctx_free(&c);
    tb_diagnosis_free(&d);
    /* The critical path too (critpath.h tb_critpath_stored): it links every
     * request, the one part of diagnose the blob above does not cover. */
    if (!rc) {
        struct tb_critpath cp;
        int e = tb_critpath_stored(st, cat, INT64_MIN, INT64_MAX, true, &cp);
        if (!e)
            tb_critpath_free(&cp);
        else if (e != TB_E_NOTFOUND) {
            rc = e;
            tb_seterr(err, errlen, "the critical path: %s", tb_strerror(e));
        }
    }
    tb_catalog_free(own);
    if (rc && err && errlen && !err[0])
        tb_seterr(err, errlen, "%s", tb_strerror(rc));
    return rc;
}

void tb_diagnosis_free(struct tb_diagnosis *d)
{
    free(d->tiers);
    free(d->servers);
    free(d->pools);
    free(d->episodes);
    free(d->self);
    free(d->wait);
    free(d->front_congested);
    free(d->root_server);
    free(d->root_cause);
    if (d->have_cp)
        tb_critpath_free(&d->cp);
    memset(d, 0, sizeof *d);
}

/* ---- JSON (DESIGN.md "Interfaces"; the CLI and the dashboard's API) ---------- */

static const char *jtier(const struct tb_catalog *cat, uint32_t t)
{
    const struct tb_tier_info *ti = t ? tb_catalog_tier_get(cat, t) : NULL;
    return ti ? ti->name : "";
}

static const char *jserver(const struct tb_catalog *cat, uint32_t s, char *buf, size_t len)
{
    const struct tb_server_info *si = s ? tb_catalog_server_get(cat, s) : NULL;
    if (!si)
        return "*";
    return tb_addr_fmt(&si->addr, buf, len);
}

static void json_row(struct tb_buf *b, const struct tb_catalog *cat, const struct tb_diag_row *r,
                     bool server)
{
    char sb[TB_ADDR_STRLEN];
    tb_buf_json_kstr(b, "{\"tier\": ", jtier(cat, r->tier));
    if (server) {
        tb_buf_json_kstr(b, ", \"server\": ", jserver(cat, r->server, sb, sizeof sb));
    }
    tb_buf_json_kstr(b, ", \"state\": ", tb_diag_state_name(r->state));
    tb_buf_printf(b, ", \"requests\": %" PRIu64 ", \"depth\": ", r->requests);
    if (r->depth == UINT32_MAX)
        tb_buf_puts(b, "null");
    else
        tb_buf_printf(b, "%u", r->depth);
    static const char *const keys[] = {"load_mean", "self_load_mean", "wait_load_mean",
                                       "own_load_mean", "stretch", "n_star", "n_star_self",
                                       "congested_fraction"};
    const double vals[] = {r->load_mean, r->self_load_mean, r->wait_load_mean, r->own_load_mean,
                           r->stretch, r->n_star, r->n_star_self, r->congested_fraction};
    for (size_t i = 0; i < TB_ARRAY_SIZE(keys); i++) {
        tb_buf_printf(b, ", \"%s\": ", keys[i]);
        tb_buf_json_num(b, vals[i]);
    }
    tb_buf_puts(b, "}");
}

void tb_diagnosis_json(struct tb_buf *b, const struct tb_catalog *cat,
                       const struct tb_diagnosis *d)
{
    char sb[TB_ADDR_STRLEN];
    const struct tb_diag_verdict *v = &d->verdict;
    char ib[2][40];
    tb_buf_printf(b, "{\"window_ns\": %" PRId64 ", \"from_ns\": %" PRId64 ", \"to_ns\": %" PRId64
                     ", \"from\": \"%s\", \"to\": \"%s\", \"front_tier\": ",
                  d->width_ns, d->from_ns, d->to_ns, tb_fmt_iso(d->from_ns, ib[0], 40),
                  tb_fmt_iso(d->to_ns, ib[1], 40));
    tb_buf_json_str(b, jtier(cat, d->front));
    tb_buf_json_kstr(b, ",\n \"verdict\": {\"tier\": ", jtier(cat, v->tier));
    tb_buf_json_kstr(b, ", \"server\": ", jserver(cat, v->server, sb, sizeof sb));
    tb_buf_json_kstr(b, ", \"cause\": ", tb_cause_name(v->cause));
    tb_buf_json_kstr(b, ", \"resource\": ", v->resource);
    tb_buf_json_kstr(b, ", \"evidence\": ", v->evidence);
    tb_buf_json_knum(b, ", \"share\": ", v->share);
    tb_buf_json_kstr(b, ", \"front_congestion\": ", d->front_by_slowness ? "slow" : "n_star");
    tb_buf_puts(b, ", \"cpu_quota_period_ns\": ");
    if (v->quota_period_ns)
        tb_buf_printf(b, "%" PRId64, v->quota_period_ns);
    else
        tb_buf_puts(b, "null");
    tb_buf_puts(b, "},\n \"tiers\": [");
    for (size_t i = 0; i < d->ntiers; i++) {
        tb_buf_puts(b, i ? ",\n   " : "\n   ");
        json_row(b, cat, &d->tiers[i], false);
    }
    tb_buf_puts(b, "],\n \"servers\": [");
    for (size_t i = 0; i < d->nservers; i++) {
        tb_buf_puts(b, i ? ",\n   " : "\n   ");
        json_row(b, cat, &d->servers[i], true);
    }
    tb_buf_puts(b, "],\n \"pools\": [");
    for (size_t i = 0; i < d->npools; i++) {
        const struct tb_diag_pool *p = &d->pools[i];
        tb_buf_puts(b, i ? ",\n   {\"from_tier\": " : "\n   {\"from_tier\": ");
        tb_buf_json_str(b, jtier(cat, p->from_tier));
        tb_buf_json_kstr(b, ", \"from_server\": ", jserver(cat, p->from_server, sb, sizeof sb));
        tb_buf_json_kstr(b, ", \"to_tier\": ", jtier(cat, p->to_tier));
        tb_buf_printf(b, ", \"connections\": %u, \"connections_seen\": %u, \"max_concurrent\": %u, "
                         "\"pooled\": %s, \"calls_mean\": ",
                      p->connections, p->connections_seen, p->max_concurrent,
                      p->pooled ? "true" : "false");
        tb_buf_json_num(b, p->calls_mean);
        tb_buf_json_knum(b, ", \"full_fraction\": ", p->full_fraction);
        tb_buf_printf(b, ", \"recommended\": %u, \"reason\": ", p->recommended);
        tb_buf_json_str(b, p->reason);
        tb_buf_puts(b, "}");
    }
    tb_buf_printf(b, "],\n \"episodes_dismissed\": %zu,\n \"episodes\": [", d->dismissed);
    for (size_t i = 0; i < d->nepisodes; i++) {
        const struct tb_diag_episode *e = &d->episodes[i];
        tb_buf_printf(b, "%s{\"start_ns\": %" PRId64 ", \"end_ns\": %" PRId64
                         ", \"start\": \"%s\", \"end\": \"%s\", \"tier\": ",
                      i ? ",\n   " : "\n   ", e->start_ns, e->end_ns,
                      tb_fmt_iso(e->start_ns, ib[0], 40), tb_fmt_iso(e->end_ns, ib[1], 40));
        tb_buf_json_str(b, jtier(cat, e->tier));
        tb_buf_json_kstr(b, ", \"server\": ", jserver(cat, e->server, sb, sizeof sb));
        tb_buf_json_kstr(b, ", \"kind\": ", e->kind == TB_EP_FREEZE ? "freeze" : "saturated");
        tb_buf_json_kstr(b, ", \"root_tier\": ", jtier(cat, e->root_tier));
        tb_buf_json_kstr(b, ", \"root_server\": ",
                         e->root_server ? jserver(cat, e->root_server, sb, sizeof sb) : "");
        tb_buf_json_kstr(b, ", \"cause\": ", tb_cause_name(e->cause));
        tb_buf_puts(b, "}");
    }
    tb_buf_puts(b, "],\n \"critical_path\": ");
    if (d->have_cp)
        tb_critpath_json(b, cat, &d->cp);
    else
        tb_buf_puts(b, "null");
    tb_buf_puts(b, "}\n");
}
