/* SPDX-License-Identifier: MIT */
/* whatif.c — the what-if forecast (whatif.h; docs/whatif.md has the model
 * and its measured error). Every server is a station: service time per
 * request s, c cores, visits per front request; each caller server's pool
 * to a tier a station of m connections held for a call's duration. Per
 * period (100 ms) the workload is what was measured there: a closed population
 * (Little's law: N = X (R + Z)) or an open arrival rate. The model is solved
 * for the measured system and for the changed one; each front request's
 * time in every station is scaled by that station's ratio, which gives the
 * forecast distribution (mean and percentiles), so the model only has to get
 * ratios right, not absolute times. What the model takes from the linked
 * trees is computed once and kept in the store (docs/whatif.md "Stored
 * inputs"), so that a run on 10 M requests reads aggregates. */
#include "whatif.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callers.h"
#include "critpath.h"
#include "link.h"
#include "linkstore.h"
#include "util.h"

#define PERIOD_NS (100 * TB_NS_PER_MS)
#define THINK_MAX_NS (60 * TB_NS_PER_SEC)
#define MAX_CORES 256

/* Erlang C: probability that an arrival waits at an M/M/c queue of offered
 * load a (< c). */
static double erlang_c(double c, double a)
{
    if (a <= 0)
        return 0;
    /* Far more servers than load (Poisson tail beyond ten deviations): no
     * wait worth counting, and no O(c) sum for a server without a limit. */
    if (c > a + 10 * sqrt(a) + 10)
        return 0;
    int n = (int)c;
    double term = 1, sum = 1; /* a^k / k! for k = 0 */
    for (int k = 1; k < n; k++) {
        term *= a / k;
        sum += term;
    }
    double last = term * a / n * (n / (n - a));
    return last / (sum + last);
}

/* Mean time per visit at a station of c cores and service s under arrival
 * rate lambda (per ns): s plus the M/M/c wait; INFINITY when saturated. */
static double station_rt(double s, double c, double lambda)
{
    double a = lambda * s;
    if (a >= c)
        return INFINITY;
    return s + erlang_c(c, a) * s / (c - a);
}

/* Mean wait for one of m connections held h ns each, at rate lambda. */
static double pool_wait(double m, double h, double lambda)
{
    double a = lambda * h;
    if (a >= m)
        return INFINITY;
    return erlang_c(m, a) * h / (m - a);
}

/* ---- the model's inputs ------------------------------------------------------------------
 *
 * Everything the forecast takes from the requests, whatever the change:
 * computed once from the linked trees (prepare), kept in the store under
 * INPUTS_NAME while the requests are unchanged (serialize/parse), and solved
 * for one change (solve). */

#define INPUTS_NAME "whatif"
/* Bump when the linker, the trees or the inputs below change meaning: stored
 * inputs of another version are recomputed. */
#define INPUTS_VERSION 3
#define POOL_BIT 0x80000000u

struct wi_station {
    uint32_t server, tier;
    double s, c, svc_alone; /* service per visit (ns), cores (MAX_CORES: no limit seen) */
    double pool_wait, own_total;
    double svc_solo;        /* own time of its requests that arrived at it empty (mean) */
    uint64_t nsolo;         /* how many */
    uint64_t n;             /* requests in front requests' trees */
};

struct wi_pool {
    uint32_t caller_server, caller_tier, callee_tier;
    double m; /* connections (0: a connection per call, no pool) */
    double h; /* mean call duration (ns) */
};

struct wi_inputs {
    uint32_t front, ntiers;
    uint64_t nfront, nper, nst, npl, nent;
    int64_t t0, t1;
    struct tb_whatif_stats baseline;
    double think_ns;
    uint64_t nthink;
    uint64_t children, linked, exact, ambiguous;
    uint8_t *called;          /* per tier id: some other tier calls it */
    struct wi_station *st;
    struct wi_pool *pl;
    uint64_t *nf_p;           /* per period: front requests */
    double *sum_rt_p;         /* per period: their response times summed */
    double *st_own;           /* [k * nper + p]: station k's own time in period p */
    uint64_t *st_cnt;         /* [k * nper + p]: its requests */
    uint64_t *pl_calls;       /* [k * nper + p]: pool k's calls */
    /* Per front request (by arrival): its period, response time and its
     * tree's sums per station and pool, entries fr_off[f] .. fr_off[f + 1]:
     * ent_ix = station k (a = own time, b = its work part, min(own, work)
     * per request) or POOL_BIT | pool k (a = waits for a connection, b =
     * calls). */
    uint32_t *fr_period;
    double *fr_rt;
    uint64_t *fr_off;
    uint32_t *ent_ix;
    float *ent_a, *ent_b;
};

static void wi_free(struct wi_inputs *w)
{
    free(w->called);
    free(w->st);
    free(w->pl);
    free(w->nf_p);
    free(w->sum_rt_p);
    free(w->st_own);
    free(w->st_cnt);
    free(w->pl_calls);
    free(w->fr_period);
    free(w->fr_rt);
    free(w->fr_off);
    free(w->ent_ix);
    free(w->ent_a);
    free(w->ent_b);
    memset(w, 0, sizeof *w);
}

/* Non-negative doubles sorted as their bit patterns (the same order): a
 * stable LSD radix sort, 11 bits a pass, constant digits skipped. */
static int sort_nonneg(double *v, size_t n)
{
    uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return TB_E_NOMEM;
    }
    uint64_t all_or = 0, all_and = ~0ull;
    for (size_t i = 0; i < n; i++) {
        double x = v[i] > 0 ? v[i] : 0.0;
        memcpy(&a[i], &x, sizeof x);
        all_or |= a[i];
        all_and &= a[i];
    }
    for (unsigned shift = 0; shift < 64; shift += 11) {
        if (((all_or ^ all_and) >> shift & 2047) == 0)
            continue;
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++)
            count[(a[i] >> shift & 2047) + 1]++;
        for (size_t d = 1; d <= 2048; d++)
            count[d] += count[d - 1];
        for (size_t i = 0; i < n; i++)
            b[count[a[i] >> shift & 2047]++] = a[i];
        uint64_t *sw = a;
        a = b;
        b = sw;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(&v[i], &a[i], sizeof v[i]);
    free(a);
    free(b);
    return 0;
}

/* Small open-addressing map from a 64-bit key to an index. */
struct u64map {
    uint64_t *key;
    uint32_t *val;
    size_t mask;
};

static int u64map_init(struct u64map *m, size_t cap)
{
    m->mask = 63;
    while (m->mask < 2 * cap + 1)
        m->mask = m->mask * 2 + 1;
    m->key = malloc((m->mask + 1) * sizeof *m->key);
    m->val = malloc((m->mask + 1) * sizeof *m->val);
    if (!m->key || !m->val)
        return TB_E_NOMEM;
    memset(m->val, 0xff, (m->mask + 1) * sizeof *m->val);
    return 0;
}

/* The slot of key: its value is UINT32_MAX when new. */
static size_t u64map_slot(struct u64map *m, uint64_t key)
{
    size_t i = (size_t)tb_mix64(key) & m->mask;
    while (m->val[i] != UINT32_MAX && m->key[i] != key)
        i = (i + 1) & m->mask;
    m->key[i] = key;
    return i;
}

static void u64map_free(struct u64map *m)
{
    free(m->key);
    free(m->val);
}

/* Closed or open: users on keep-alive connections think between a response
 * and their next request on the same connection. The front requests' gaps,
 * by connection in arrival order (rq is in arrival order). */
static int think_gaps(const struct tb_request *rq, size_t n, uint32_t front, size_t nfront,
                      double *sum, uint64_t *count)
{
    struct u64map m;
    int64_t *last = malloc((nfront + 1) * sizeof *last);
    int rc = u64map_init(&m, nfront);
    if (rc || !last) {
        u64map_free(&m);
        free(last);
        return TB_E_NOMEM;
    }
    uint32_t nc = 0;
    *sum = 0;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].tier != front)
            continue;
        size_t sl = u64map_slot(&m, rq[i].conn);
        if (m.val[sl] == UINT32_MAX) {
            m.val[sl] = nc++;
        } else {
            int64_t gap = rq[i].arrival_ns - last[m.val[sl]];
            if (gap > 0 && gap < THINK_MAX_NS) {
                *sum += (double)gap;
                ++*count;
            }
        }
        last[m.val[sl]] = rq[i].departure_ns;
    }
    u64map_free(&m);
    free(last);
    return 0;
}

/* The inputs from linked requests L (rq in arrival order). */
static int wi_prepare(const struct tb_catalog *cat, const struct tb_linked *L,
                      struct wi_inputs *w, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    const struct tb_request *rq = L->rq;
    size_t n = L->n;
    const struct tb_links *lk = &L->lk;
    const struct tb_trees *tr = &L->t;
    const int64_t *root = tr->root;
    uint32_t ntiers = tb_catalog_tier_count(cat), nsrv = tb_catalog_server_count(cat);
    uint32_t front = L->g.front;
    size_t *sidx = NULL;
    int64_t *fidx = NULL;
    uint32_t *period = NULL, *pair = NULL;
    struct u64map pm = {0}, cm = {0};
    uint64_t *pconns = NULL;
    int rc = 0;
    w->front = front;
    w->ntiers = ntiers;
    w->children = lk->children;
    w->linked = lk->linked;
    w->exact = lk->exact;
    w->ambiguous = lk->ambiguous;
    w->called = calloc(ntiers + 1, 1);
    if (!w->called)
        return TB_E_NOMEM;
    for (uint32_t a = 1; a <= ntiers; a++)
        for (uint32_t b = 1; b <= ntiers; b++)
            if (L->g.calls[a * (ntiers + 1) + b] > 0)
                w->called[b] = 1;

    /* Front requests: the baseline, and periods. */
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    size_t nfront = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].tier != front)
            continue;
        nfront++;
        t0 = TB_MIN(t0, rq[i].arrival_ns);
        t1 = TB_MAX(t1, rq[i].departure_ns);
    }
    if (nfront == 0 || t1 <= t0) {
        snprintf(err, errlen, "whatif: the front tier has no complete requests");
        rc = TB_E_NOTFOUND;
        goto out;
    }
    size_t nper = (size_t)((t1 - t0) / PERIOD_NS) + 1;
    w->nfront = nfront;
    w->nper = nper;
    w->t0 = t0;
    w->t1 = t1;
    fidx = malloc((n + 1) * sizeof *fidx);
    period = malloc((n + 1) * sizeof *period);
    w->fr_period = malloc((nfront + 1) * sizeof *w->fr_period);
    w->fr_rt = malloc((nfront + 1) * sizeof *w->fr_rt);
    w->fr_off = calloc(nfront + 2, sizeof *w->fr_off);
    w->nf_p = calloc(nper, sizeof *w->nf_p);
    w->sum_rt_p = calloc(nper, sizeof *w->sum_rt_p);
    if (!fidx || !period || !w->fr_period || !w->fr_rt || !w->fr_off || !w->nf_p ||
        !w->sum_rt_p) {
        rc = TB_E_NOMEM;
        goto out;
    }
    {
        size_t f = 0;
        for (size_t i = 0; i < n; i++) {
            fidx[i] = -1;
            if (rq[i].tier != front)
                continue;
            fidx[i] = (int64_t)f;
            uint32_t p = (uint32_t)((rq[i].arrival_ns - t0) / PERIOD_NS);
            double rt = (double)(rq[i].departure_ns - rq[i].arrival_ns);
            w->fr_period[f] = p;
            w->fr_rt[f] = rt;
            w->nf_p[p]++;
            w->sum_rt_p[p] += rt;
            f++;
        }
        for (size_t i = 0; i < n; i++)
            period[i] = root[i] >= 0 ? w->fr_period[fidx[root[i]]] : UINT32_MAX;
    }
    {
        double *srt = malloc(nfront * sizeof *srt), sum = 0;
        if (!srt) {
            rc = TB_E_NOMEM;
            goto out;
        }
        memcpy(srt, w->fr_rt, nfront * sizeof *srt);
        if ((rc = sort_nonneg(srt, nfront))) {
            free(srt);
            goto out;
        }
        for (size_t i = 0; i < nfront; i++)
            sum += srt[i];
        w->baseline.rt_mean_ns = sum / (double)nfront;
        w->baseline.rt_p50_ns = tb_quantile(srt, nfront, 0.50);
        w->baseline.rt_p95_ns = tb_quantile(srt, nfront, 0.95);
        w->baseline.rt_p99_ns = tb_quantile(srt, nfront, 0.99);
        w->baseline.throughput = (double)nfront / ((double)(t1 - t0) / 1e9);
        free(srt);
    }
    double think_sum;
    if ((rc = think_gaps(rq, n, front, nfront, &think_sum, &w->nthink)))
        goto out;
    w->think_ns = w->nthink ? think_sum / (double)w->nthink : 0;

    /* Stations: every server with requests in the front requests' trees. */
    sidx = malloc((nsrv + 1) * sizeof *sidx);
    if (!sidx) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (uint32_t s = 0; s <= nsrv; s++)
        sidx[s] = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (root[i] >= 0 && rq[i].server && rq[i].server <= nsrv &&
            sidx[rq[i].server] == SIZE_MAX)
            sidx[rq[i].server] = w->nst++;
    w->st = calloc(w->nst + 1, sizeof *w->st);
    w->st_own = calloc(w->nst * nper + 1, sizeof *w->st_own);
    w->st_cnt = calloc(w->nst * nper + 1, sizeof *w->st_cnt);
    if (!w->st || !w->st_own || !w->st_cnt) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (uint32_t s = 1; s <= nsrv; s++) {
        if (sidx[s] == SIZE_MAX)
            continue;
        struct wi_station *x = &w->st[sidx[s]];
        x->server = s;
        x->tier = tb_catalog_server_get(cat, s)->tier;
        x->s = tr->svc[s];
        /* Cores by work conservation (critpath.c, tb_trees). */
        x->c = tr->cores[s] > 0 ? tr->cores[s] : MAX_CORES;
        x->svc_alone = tr->svc_alone[s];
        x->svc_solo = tr->svc_solo[s];
        x->nsolo = tr->nsolo[s];
    }
    /* Pools: a caller server's calls to a tier over reused connections;
     * pair[i] = the pool of child i's call. */
    pair = malloc((n + 1) * sizeof *pair);
    if (!pair || u64map_init(&pm, 1024) || u64map_init(&cm, lk->linked + 1)) {
        rc = TB_E_NOMEM;
        goto out;
    }
    size_t cap_pl = 0, cap_pc = 0;
    for (size_t i = 0; i < n; i++) {
        pair[i] = UINT32_MAX;
        if (!lk->parent[i] || root[i] < 0)
            continue;
        uint32_t caller = rq[lk->parent[i] - 1].server;
        size_t sl = u64map_slot(&pm, (uint64_t)caller << 32 | rq[i].tier);
        if (pm.val[sl] == UINT32_MAX) {
            if ((size_t)w->npl + 1 > pm.mask / 2 ||
                tb_grow(&w->pl, &cap_pl, w->npl + 1, sizeof *w->pl) ||
                tb_grow_zero(&pconns, &cap_pc, w->npl + 1, sizeof *pconns)) {
                rc = TB_E_NOMEM;
                goto out;
            }
            struct wi_pool *x = &w->pl[w->npl];
            memset(x, 0, sizeof *x);
            x->caller_server = caller;
            x->caller_tier = tb_catalog_server_get(cat, caller)->tier;
            x->callee_tier = rq[i].tier;
            pm.val[sl] = (uint32_t)w->npl++;
        }
        pair[i] = pm.val[sl];
        /* Connections per pool: (pool, conn) pairs seen. */
        size_t cs = u64map_slot(&cm, tb_mix64(rq[i].conn) ^ pair[i]);
        if (cm.val[cs] == UINT32_MAX) {
            cm.val[cs] = pair[i];
            pconns[pair[i]]++;
        }
    }
    w->pl_calls = calloc(w->npl * nper + 1, sizeof *w->pl_calls);
    uint64_t *calls = calloc(w->npl + 1, sizeof *calls);
    if (!w->pl_calls || !calls) {
        free(calls);
        rc = TB_E_NOMEM;
        goto out;
    }
    /* Per period sums; per front request, the entries (counted first). */
    for (size_t i = 0; i < n; i++) {
        if (root[i] < 0)
            continue;
        size_t p = period[i], f = (size_t)fidx[root[i]];
        if (rq[i].server <= nsrv && sidx[rq[i].server] != SIZE_MAX) {
            struct wi_station *x = &w->st[sidx[rq[i].server]];
            w->st_own[sidx[rq[i].server] * nper + p] += tr->own[i];
            w->st_cnt[sidx[rq[i].server] * nper + p]++;
            x->n++;
            x->pool_wait += tr->pool[i];
            x->own_total += tr->own[i];
            w->fr_off[f + 1]++;
        }
        if (pair[i] != UINT32_MAX) {
            w->pl_calls[pair[i] * nper + p]++;
            calls[pair[i]]++;
            w->pl[pair[i]].h += (double)(rq[i].departure_ns - rq[i].arrival_ns);
            w->fr_off[f + 1]++;
        }
    }
    for (size_t k = 0; k < w->npl; k++) {
        struct wi_pool *x = &w->pl[k];
        x->h = calls[k] ? x->h / (double)calls[k] : 0;
        /* Reused connections (more calls than connections) make a pool. */
        x->m = calls[k] >= 2 * pconns[k] ? (double)pconns[k] : 0;
    }
    free(calls);
    for (size_t f = 0; f < nfront; f++)
        w->fr_off[f + 1] += w->fr_off[f];
    size_t raw = w->fr_off[nfront];
    w->ent_ix = malloc((raw + 1) * sizeof *w->ent_ix);
    w->ent_a = malloc((raw + 1) * sizeof *w->ent_a);
    w->ent_b = malloc((raw + 1) * sizeof *w->ent_b);
    uint64_t *fill = malloc((nfront + 1) * sizeof *fill);
    if (!w->ent_ix || !w->ent_a || !w->ent_b || !fill) {
        free(fill);
        rc = TB_E_NOMEM;
        goto out;
    }
    memcpy(fill, w->fr_off, nfront * sizeof *fill);
    for (size_t i = 0; i < n; i++) {
        if (root[i] < 0)
            continue;
        size_t f = (size_t)fidx[root[i]];
        if (rq[i].server <= nsrv && sidx[rq[i].server] != SIZE_MAX) {
            size_t e = fill[f]++;
            w->ent_ix[e] = (uint32_t)sidx[rq[i].server];
            w->ent_a[e] = (float)tr->own[i];
            w->ent_b[e] = (float)fmin(tr->own[i], tr->work[i]);
        }
        if (pair[i] != UINT32_MAX) {
            size_t e = fill[f]++;
            w->ent_ix[e] = POOL_BIT | pair[i];
            w->ent_a[e] = (float)lk->pool_wait_ns[i];
            w->ent_b[e] = 1;
        }
    }
    free(fill);
    /* One entry per station and pool of a tree: merged in place (a tree has
     * a few requests). */
    size_t out_e = 0;
    for (size_t f = 0; f < nfront; f++) {
        size_t lo = w->fr_off[f], hi = w->fr_off[f + 1], first = out_e;
        for (size_t e = lo; e < hi; e++) {
            size_t k = first;
            while (k < out_e && w->ent_ix[k] != w->ent_ix[e])
                k++;
            if (k == out_e) {
                w->ent_ix[out_e] = w->ent_ix[e];
                w->ent_a[out_e] = w->ent_a[e];
                w->ent_b[out_e] = w->ent_b[e];
                out_e++;
            } else {
                w->ent_a[k] += w->ent_a[e];
                w->ent_b[k] += w->ent_b[e];
            }
        }
        w->fr_off[f] = first;
    }
    w->fr_off[nfront] = out_e;
    w->nent = out_e;
out:
    free(sidx);
    free(fidx);
    free(period);
    free(pair);
    free(pconns);
    u64map_free(&pm);
    u64map_free(&cm);
    if (rc)
        wi_free(w);
    return rc;
}

/* ---- stored form: a header, then the arrays, native byte order (the header
 * says which; a file moved to another byte order is recomputed) ---------------------- */

#define WI_MAGIC 0x49574254u /* "TBWI" */

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    bool fail;
};

static void put(struct wbuf *b, const void *v, size_t len)
{
    if (b->fail || !len)
        return;
    if (tb_grow(&b->p, &b->cap, b->len + len, 1)) {
        b->fail = true;
        return;
    }
    memcpy(b->p + b->len, v, len);
    b->len += len;
}

struct rbuf {
    const uint8_t *p;
    size_t len, at;
    bool fail;
};

/* Copies the next `len` bytes into a fresh allocation (or into `to`). */
static void *take(struct rbuf *r, void *to, size_t len)
{
    if (r->fail || len > r->len - r->at) {
        r->fail = true;
        return NULL;
    }
    void *d = to ? to : malloc(len + 1);
    if (!d) {
        r->fail = true;
        return NULL;
    }
    memcpy(d, r->p + r->at, len);
    r->at += len;
    return d;
}

#define SCALARS(X)                                                                           \
    X(front) X(ntiers) X(nfront) X(nper) X(nst) X(npl) X(nent) X(t0) X(t1) X(baseline)        \
    X(think_ns) X(nthink) X(children) X(linked) X(exact) X(ambiguous)

static int wi_serialize(const struct wi_inputs *w, uint8_t **out, size_t *len)
{
    struct wbuf b = {0};
    uint32_t hdr[4] = {WI_MAGIC, INPUTS_VERSION, (uint32_t)sizeof(struct wi_station),
                       (uint32_t)sizeof(struct wi_pool)};
    put(&b, hdr, sizeof hdr);
#define PUT_SCALAR(f) put(&b, &w->f, sizeof w->f);
    SCALARS(PUT_SCALAR)
#undef PUT_SCALAR
    put(&b, w->called, w->ntiers + 1);
    put(&b, w->st, w->nst * sizeof *w->st);
    put(&b, w->pl, w->npl * sizeof *w->pl);
    put(&b, w->nf_p, w->nper * sizeof *w->nf_p);
    put(&b, w->sum_rt_p, w->nper * sizeof *w->sum_rt_p);
    put(&b, w->st_own, w->nst * w->nper * sizeof *w->st_own);
    put(&b, w->st_cnt, w->nst * w->nper * sizeof *w->st_cnt);
    put(&b, w->pl_calls, w->npl * w->nper * sizeof *w->pl_calls);
    put(&b, w->fr_period, w->nfront * sizeof *w->fr_period);
    put(&b, w->fr_rt, w->nfront * sizeof *w->fr_rt);
    put(&b, w->fr_off, (w->nfront + 1) * sizeof *w->fr_off);
    put(&b, w->ent_ix, w->nent * sizeof *w->ent_ix);
    put(&b, w->ent_a, w->nent * sizeof *w->ent_a);
    put(&b, w->ent_b, w->nent * sizeof *w->ent_b);
    if (b.fail) {
        free(b.p);
        return TB_E_NOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* TB_E_BADFMT for anything that does not hold together: the caller
 * recomputes. */
static int wi_parse(const uint8_t *p, size_t len, uint32_t ntiers, uint32_t nsrv,
                    struct wi_inputs *w)
{
    struct rbuf r = {p, len, 0, false};
    uint32_t hdr[4];
    memset(w, 0, sizeof *w);
    take(&r, hdr, sizeof hdr);
    if (r.fail || hdr[0] != WI_MAGIC || hdr[1] != INPUTS_VERSION ||
        hdr[2] != sizeof(struct wi_station) || hdr[3] != sizeof(struct wi_pool))
        return TB_E_BADFMT;
#define TAKE_SCALAR(f) take(&r, &w->f, sizeof w->f);
    SCALARS(TAKE_SCALAR)
#undef TAKE_SCALAR
    /* Sizes bounded by what is left before anything is allocated. */
    size_t left = len - TB_MIN(r.at, len);
    if (r.fail || w->ntiers != ntiers || w->front == 0 || w->front > ntiers ||
        w->nfront == 0 || w->nper == 0 || w->nst > left || w->npl > left ||
        w->nfront > left || w->nent > left || w->nper > left ||
        (w->nst + w->npl) > left / w->nper) {
        memset(w, 0, sizeof *w);
        return TB_E_BADFMT;
    }
    w->called = take(&r, NULL, w->ntiers + 1);
    w->st = take(&r, NULL, w->nst * sizeof *w->st);
    w->pl = take(&r, NULL, w->npl * sizeof *w->pl);
    w->nf_p = take(&r, NULL, w->nper * sizeof *w->nf_p);
    w->sum_rt_p = take(&r, NULL, w->nper * sizeof *w->sum_rt_p);
    w->st_own = take(&r, NULL, w->nst * w->nper * sizeof *w->st_own);
    w->st_cnt = take(&r, NULL, w->nst * w->nper * sizeof *w->st_cnt);
    w->pl_calls = take(&r, NULL, w->npl * w->nper * sizeof *w->pl_calls);
    w->fr_period = take(&r, NULL, w->nfront * sizeof *w->fr_period);
    w->fr_rt = take(&r, NULL, w->nfront * sizeof *w->fr_rt);
    w->fr_off = take(&r, NULL, (w->nfront + 1) * sizeof *w->fr_off);
    w->ent_ix = take(&r, NULL, w->nent * sizeof *w->ent_ix);
    w->ent_a = take(&r, NULL, w->nent * sizeof *w->ent_a);
    w->ent_b = take(&r, NULL, w->nent * sizeof *w->ent_b);
    bool ok = !r.fail && r.at == len && w->fr_off[0] == 0 && w->fr_off[w->nfront] == w->nent;
    for (size_t f = 0; ok && f < w->nfront; f++)
        ok = w->fr_off[f] <= w->fr_off[f + 1] && w->fr_period[f] < w->nper;
    for (size_t e = 0; ok && e < w->nent; e++)
        ok = (w->ent_ix[e] & POOL_BIT) ? (w->ent_ix[e] & ~POOL_BIT) < w->npl
                                       : w->ent_ix[e] < w->nst;
    for (size_t k = 0; ok && k < w->nst; k++)
        ok = w->st[k].server >= 1 && w->st[k].server <= nsrv;
    for (size_t k = 0; ok && k < w->npl; k++)
        ok = w->pl[k].caller_server >= 1 && w->pl[k].caller_server <= nsrv;
    if (!ok) {
        wi_free(w);
        return TB_E_BADFMT;
    }
    return 0;
}

/* ---- the forecast for one change ----------------------------------------------------- */

/* The pool a caller server holds (the one to the lowest callee tier id). */
static size_t pool_of(const struct wi_inputs *w, uint32_t server)
{
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < w->npl; k++)
        if (w->pl[k].caller_server == server && w->pl[k].m > 0 &&
            (best == SIZE_MAX || w->pl[k].callee_tier < w->pl[best].callee_tier))
            best = k;
    return best;
}

/* Whether station k waits on its pool for more than 5% of its own time by
 * the model (M/M/m at the measured rate, per period), for waits the linker
 * does not see: a real JVM hands a returned connection to a waiting thread
 * in 50-500 µs, beyond the linker's hand-off window. A period the model
 * finds saturated counts its calls at the call time. */
static bool model_pool_bound(const struct wi_inputs *w, size_t k)
{
    size_t pb = pool_of(w, w->st[k].server);
    if (pb == SIZE_MAX)
        return false;
    const struct wi_pool *y = &w->pl[pb];
    double waits = 0;
    for (size_t p = 0; p < w->nper; p++) {
        uint64_t calls = w->pl_calls[pb * w->nper + p];
        if (!calls)
            continue;
        double b = pool_wait(y->m, y->h, (double)calls / (double)PERIOD_NS);
        waits += (double)calls * (isfinite(b) ? fmin(b, y->h) : y->h);
    }
    return waits > 0.05 * w->st[k].own_total;
}

/* The two changes the data cannot answer (exit status 2): the same line
 * whether found before the inputs are computed (wi_precheck) or after. */
static int no_callers(char *err, size_t errlen, const char *tname, bool front)
{
    snprintf(err, errlen,
             "whatif: tier '%s' has no callers: no other tier calls it%s; whatif changes a "
             "tier that the front tier's requests reach through calls",
             tname, front ? " (it is the front tier, called by users)" : "");
    return TB_E_INVAL;
}

static int no_pool(char *err, size_t errlen, const char *tname)
{
    snprintf(err, errlen,
             "whatif: tier '%s' holds no connection pool: its servers make no calls over "
             "reused connections (--pool sets the connections of the tier that calls)",
             tname);
    return TB_E_INVAL;
}

static int wi_solve(const struct tb_catalog *cat, const struct wi_inputs *w,
                    const struct tb_whatif_opts *o, struct tb_whatif_result *r, char *err,
                    size_t errlen)
{
    size_t nst = w->nst, npl = w->npl, nper = w->nper, nfront = w->nfront;
    const char *tname = tb_catalog_tier_get(cat, o->tier)->name;
    r->front_tier = w->front;
    r->baseline = w->baseline;
    r->think_ns = w->think_ns;
    r->children = w->children;
    r->linked = w->linked;
    r->exact = w->exact;
    r->ambiguous = w->ambiguous;
    if (o->tier > w->ntiers || !w->called[o->tier]) {
        return no_callers(err, errlen, tname, o->tier == w->front);
    }
    r->closed = w->nthink >= nfront / 10 && w->nthink >= 20;
    if (r->closed)
        snprintf(r->why, sizeof r->why,
                 "closed: %" PRIu64 " idle gaps between a response and the next request on the "
                 "front tier's keep-alive connections (users thinking, mean %.3g ms)",
                 w->nthink, r->think_ns / 1e6);
    else
        snprintf(r->why, sizeof r->why,
                 "open: the front tier's connections show %" PRIu64 " idle gaps for %" PRIu64
                 " requests (no users waiting on their own responses)",
                 w->nthink, w->nfront);
    struct st_x {
        double s, c, s_new, c_new, visits;
        bool pool_bound;
        size_t pb;   /* its pool, when pool-bound */
        double wf;   /* < 0: per request work as stored; else the work share of own time */
        bool replace, callee_of; /* see the pool change below */
        double mean_calls;
    } *sx = calloc(nst + 1, sizeof *sx);
    struct pl_x {
        double m_new;
    } *px = calloc(npl + 1, sizeof *px);
    /* Per period, per station and pool: the forecast's ratio (and a pool's
     * wait added per call where the baseline model has none). */
    double *sratio = malloc((nst * nper + 1) * sizeof *sratio);
    double *pratio = malloc((npl * nper + 1) * sizeof *pratio);
    double *padd = calloc(npl * nper + 1, sizeof *padd);
    double *xb = calloc(nper, sizeof *xb), *xn = calloc(nper, sizeof *xn);
    double *f = malloc((nfront + 1) * sizeof *f);
    int rc = 0;
    if (!sx || !px || !sratio || !pratio || !padd || !xb || !xn || !f) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t k = 0; k < nst; k++) {
        const struct wi_station *x = &w->st[k];
        struct st_x *y = &sx[k];
        y->s = x->s;
        y->c = x->c;
        y->visits = (double)x->n / (double)nfront;
        y->pb = SIZE_MAX;
        y->wf = -1;
        /* Requests that wait for a pool connection look at work to the
         * clock when the linker missed their wait: a caller that waits on
         * its pool shows a CPU limit that may be the pool's. It is given
         * none, and the time of its requests alone. */
        bool seen = x->pool_wait > 0.05 * x->own_total;
        if (seen || model_pool_bound(w, k)) {
            y->pool_bound = true;
            y->c = MAX_CORES;
            y->s = x->svc_alone;
            y->pb = pool_of(w, x->server);
            /* Waits the linker did not see at all (a real JVM): requests
             * alone at work at arrival still carry them (waits behind
             * requests out on calls, their queries linked to others); those
             * that arrived at an empty server found a connection free. Their
             * own time is the work, the rest of every request's own time
             * pool wait. A pool-bound server is seldom empty: 5 will do (the
             * work is a small part of the own time there). */
            if (!seen && x->nsolo >= 5 && x->own_total > 0 && x->n) {
                y->s = TB_MIN(x->svc_solo, x->svc_alone);
                y->wf = TB_MIN(1.0, y->s * (double)x->n / x->own_total);
            }
        }
        y->s_new = y->s;
        y->c_new = y->c;
        bool hit = x->tier == o->tier && (!o->server || o->server == x->server);
        if (hit && o->change == TB_WHATIF_SPEEDUP)
            y->s_new = y->s / o->value;
        if (hit && o->change == TB_WHATIF_CORES)
            y->c_new = o->value;
        if (hit) {
            r->service_ns = y->s;
            r->cores = y->c;
            r->visits += y->visits;
        }
    }
    bool any_pool = false;
    for (size_t k = 0; k < npl; k++) {
        const struct wi_pool *x = &w->pl[k];
        px[k].m_new = x->m;
        bool hit = x->caller_tier == o->tier && (!o->server || o->server == x->caller_server) &&
                   x->m > 0;
        if (hit && o->change == TB_WHATIF_POOL) {
            px[k].m_new = o->value;
            any_pool = true;
            r->cores = x->m;
        }
    }
    if (o->change == TB_WHATIF_POOL && !any_pool) {
        rc = no_pool(err, errlen, tname);
        goto out;
    }

    /* Per period: solve the model for the measured and the changed system. */
    for (size_t p = 0; p < nper; p++) {
        for (size_t k = 0; k < nst; k++)
            sratio[k * nper + p] = 1;
        for (size_t k = 0; k < npl; k++)
            pratio[k * nper + p] = 1;
        if (!w->nf_p[p])
            continue;
        double nf = (double)w->nf_p[p];
        double xm = nf / (double)PERIOD_NS; /* front requests per ns */
        double users = xm * (w->sum_rt_p[p] / nf + r->think_ns);
        double xs[2];
        for (int v = 0; v < 2; v++) {
            bool nw = v == 1;
            double x = xm;
            if (r->closed) {
                /* N = x (Z + R(x)): R grows with x, so bisection, to a
                 * relative 1e-9 of the bracket. */
                double lo = 0, hi = users / TB_MAX(r->think_ns, 1.0);
                for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
                    double mid = (lo + hi) / 2, rr = 0;
                    for (size_t k = 0; k < nst && isfinite(rr); k++) {
                        uint64_t c1 = w->st_cnt[k * nper + p];
                        if (!c1)
                            continue;
                        double v1 = (double)c1 / nf;
                        rr += v1 * station_rt(nw ? sx[k].s_new : sx[k].s,
                                              nw ? sx[k].c_new : sx[k].c, mid * v1);
                    }
                    for (size_t k = 0; k < npl && isfinite(rr); k++) {
                        uint64_t c1 = w->pl_calls[k * nper + p];
                        if (w->pl[k].m <= 0 || !c1)
                            continue;
                        double v1 = (double)c1 / nf;
                        rr += v1 * pool_wait(nw ? px[k].m_new : w->pl[k].m, w->pl[k].h,
                                             mid * v1);
                    }
                    if (!isfinite(rr) || mid * (r->think_ns + rr) > users)
                        hi = mid;
                    else
                        lo = mid;
                }
                x = lo;
            }
            xs[v] = x;
        }
        xb[p] = xs[0];
        xn[p] = xs[1];
        for (size_t k = 0; k < nst; k++) {
            const struct st_x *y = &sx[k];
            uint64_t c1 = w->st_cnt[k * nper + p];
            /* A changed station is forecast in absolute terms (the model's
             * time against the time measured there): its baseline may sit in
             * a transient the steady-state model overstates. The others keep
             * their measured times: the model's feedback through throughput
             * is small when users think far longer than they wait, and a
             * ratio of two near-saturated model times is unstable (one
             * server's pool changed, the other's near full). */
            bool changed = y->s_new != y->s || y->c_new != y->c;
            if (!changed || !c1)
                continue;
            double v1 = (double)c1 / nf;
            double fc = station_rt(y->s_new, y->c_new, xs[1] * v1);
            double meas = w->st_own[k * nper + p] / (double)c1;
            if (meas > 0 && isfinite(fc))
                sratio[k * nper + p] = fc / meas;
        }
        for (size_t k = 0; k < npl; k++) {
            const struct wi_pool *y = &w->pl[k];
            if (y->m <= 0 || px[k].m_new == y->m)
                continue;
            double v1 = (double)w->pl_calls[k * nper + p] / nf;
            double b = pool_wait(y->m, y->h, xs[0] * v1), fc = pool_wait(px[k].m_new, y->h, xs[1] * v1);
            if (!isfinite(fc))
                fc = b;
            if (b > 1 && isfinite(b))
                pratio[k * nper + p] = fc / b;
            else
                padd[k * nper + p] = fc - (isfinite(b) ? b : 0);
        }
    }
    /* A pool change on a caller whose waits the linker never saw: which of
     * its requests a call belongs to is unreliable there (the connections
     * are handed over between requests unseen, most links ambiguous), so a
     * request's own time holds other requests' calls or lacks its own. Each
     * front request is then given its caller's work and the mean time in
     * the called tier per front request, in place of its linked own time
     * and calls: what is left of its time in them is the pool wait. */
    if (o->change == TB_WHATIF_POOL)
        for (size_t k = 0; k < nst; k++) {
            if (sx[k].wf < 0 || sx[k].pb == SIZE_MAX || px[sx[k].pb].m_new == w->pl[sx[k].pb].m)
                continue;
            uint32_t callee = w->pl[sx[k].pb].callee_tier;
            double calls = 0;
            for (size_t j = 0; j < nst; j++)
                if (w->st[j].tier == callee) {
                    calls += w->st[j].own_total;
                    sx[j].callee_of = true;
                }
            sx[k].mean_calls = calls / (double)nfront;
            sx[k].replace = true;
        }
    /* Each front request's time in each station and pool, scaled. */
    double sum = 0;
    for (size_t fi = 0; fi < nfront; fi++) {
        size_t p = w->fr_period[fi];
        double delta = 0;
        for (size_t e = w->fr_off[fi]; e < w->fr_off[fi + 1]; e++) {
            uint32_t ix = w->ent_ix[e];
            double a = w->ent_a[e], b = w->ent_b[e];
            if (ix & POOL_BIT) {
                size_t k = ix & ~POOL_BIT;
                delta += a * (pratio[k * nper + p] - 1) + b * padd[k * nper + p];
                continue;
            }
            const struct st_x *y = &sx[ix];
            if (y->callee_of) {
                delta -= a;
                continue;
            }
            if (y->replace) {
                delta += y->s * y->visits + y->mean_calls - a;
                continue;
            }
            if (y->pool_bound && y->pb != SIZE_MAX) {
                /* A pool-bound caller: its time beyond its work is taken
                 * for waits the linker did not attribute, and scales as
                 * the pool's. */
                if (y->wf >= 0)
                    b = a * y->wf;
                delta += b * (sratio[ix * nper + p] - 1) + (a - b) * (pratio[y->pb * nper + p] - 1);
            } else {
                delta += a * (sratio[ix * nper + p] - 1);
            }
        }
        double v = w->fr_rt[fi] + delta;
        f[fi] = v > 0 ? v : 0;
        sum += f[fi];
    }
    if ((rc = sort_nonneg(f, nfront)))
        goto out;
    r->forecast.rt_mean_ns = sum / (double)nfront;
    r->forecast.rt_p50_ns = tb_quantile(f, nfront, 0.50);
    r->forecast.rt_p95_ns = tb_quantile(f, nfront, 0.95);
    r->forecast.rt_p99_ns = tb_quantile(f, nfront, 0.99);
    r->forecast.throughput = r->baseline.throughput;
    {
        double users_total = 0;
        for (size_t p = 0; p < nper; p++)
            if (w->nf_p[p])
                users_total += (double)w->nf_p[p] / (double)PERIOD_NS *
                               (w->sum_rt_p[p] / (double)w->nf_p[p] + r->think_ns);
        r->users = users_total / (double)nper;
    }
    /* The forecast throughput: the baseline's, scaled by the model's ratio
     * of throughputs per period (closed); the same (open). */
    if (r->closed) {
        double b = 0, fs = 0;
        for (size_t p = 0; p < nper; p++) {
            b += xb[p];
            fs += xn[p];
        }
        r->forecast.throughput = b > 0 ? r->baseline.throughput * fs / b : r->baseline.throughput;
    }
out:
    free(sx);
    free(px);
    free(sratio);
    free(pratio);
    free(padd);
    free(xb);
    free(xn);
    free(f);
    return rc;
}

/* ---- the command's work: stored inputs when they are current, else link and keep ------- */

/* TBNECK_WHATIF_STORED=0 neither reads nor writes stored inputs (the
 * benchmark's baseline, and tests of the computing path). */
static bool use_stored(void)
{
    const char *e = getenv("TBNECK_WHATIF_STORED");
    return !(e && !strcmp(e, "0"));
}

static int wi_compute(struct tb_store *st, const struct tb_catalog *cat, bool keep,
                      const char *stamp, struct wi_inputs *w, char *err, size_t errlen)
{
    struct tb_linked L;
    int64_t *rowid = NULL;
    memset(&L, 0, sizeof L);
    int rc = tb_store_link_rows(st, &L.rq, &rowid, &L.n);
    if (!rc)
        rc = tb_callers_new(&L.cl, cat);
    if (!rc)
        rc = tb_callgraph_build(&L.g, L.cl, tb_catalog_tier_count(cat), L.rq, L.n, NULL, 0);
    if (!rc && (!L.n || !L.g.front)) {
        snprintf(err, errlen, "whatif: no requests stored, or no front tier among them");
        rc = TB_E_NOTFOUND;
    }
    if (!rc)
        rc = tb_linked_link(cat, &L);
    if (!rc)
        rc = wi_prepare(cat, &L, w, err, errlen);
    if (!rc && keep) {
        /* Kept for the next run; a read-only file or a full disk only costs
         * the next run the time of this one. */
        uint8_t *blob = NULL;
        size_t len = 0;
        int src = tb_store_links_put(st, rowid, L.lk.parent, L.lk.score, L.lk.kind, L.n);
        if (!src && !(src = wi_serialize(w, &blob, &len)))
            src = tb_store_model_put(st, INPUTS_NAME, INPUTS_VERSION, stamp, blob, len);
        free(blob);
        if (src)
            tb_log_warn("whatif: the links and the model's inputs were not stored (%s); the "
                        "next run computes them again",
                        tb_strerror(src));
    }
    free(rowid);
    tb_linked_free(&L);
    return rc;
}

/* Before the inputs are computed (every request read and linked: ~34 s of
 * CPU at 10 M requests), the two refusals that need no links, decided from
 * the requests counted per tier and client machine (two columns, one scan,
 * no sort: tb_store_tier_clients) and the call graph built from them — the
 * same graph wi_compute builds from every request, so the same front tier
 * and the same callers:
 *  * the tier has no callers (wi_solve's first test, on the same graph);
 *  * --pool on a tier that calls no tier: a pool is a caller server's calls
 *    to a tier, its calls are linked to a parent of the tier the callee's
 *    client address belongs to, so a tier that calls none holds none.
 * A tier that calls but opens a connection per call is found only after
 * linking (wi_solve). 0 when neither applies (or nothing to decide from:
 * wi_compute reports that). */
static int wi_precheck(struct tb_store *st, const struct tb_catalog *cat,
                       const struct tb_whatif_opts *o, char *err, size_t errlen)
{
    uint32_t ntiers = tb_catalog_tier_count(cat);
    uint64_t *counts = NULL;
    struct tb_addr *ep = NULL;
    size_t nep = 0;
    struct tb_callers *cl = NULL;
    struct tb_callgraph g;
    memset(&g, 0, sizeof g);
    int rc = tb_store_tier_clients(st, ntiers, &counts, &ep, &nep);
    if (!rc)
        rc = tb_callers_new(&cl, cat);
    if (!rc)
        rc = tb_callgraph_init(&g, ntiers);
    if (rc)
        goto out;
    for (uint32_t t = 1; t <= ntiers; t++)
        for (size_t e = 0; e < nep; e++)
            tb_callgraph_add_n(&g, cl, t, &ep[e], counts[(size_t)t * nep + e]);
    tb_callgraph_finish(&g, cl, NULL, 0);
    if (!g.front || o->tier == 0 || o->tier > ntiers)
        goto out;
    size_t m = (size_t)ntiers + 1;
    bool called = false, calls = false;
    for (uint32_t a = 1; a <= ntiers; a++) {
        called |= g.calls[a * m + o->tier] > 0;
        calls |= g.calls[o->tier * m + a] > 0;
    }
    const char *tname = tb_catalog_tier_get(cat, o->tier)->name;
    if (!called)
        rc = no_callers(err, errlen, tname, o->tier == g.front);
    else if (o->change == TB_WHATIF_POOL && !calls)
        rc = no_pool(err, errlen, tname);
out:
    tb_callgraph_free(&g);
    tb_callers_free(cl);
    free(counts);
    free(ep);
    return rc;
}

int tb_whatif_links_current(struct tb_store *st, bool *current)
{
    char now[96] = "", then[96] = "";
    bool stable = false;
    int64_t version = 0;
    *current = false;
    if (!use_stored())
        return 0;
    int rc = tb_store_model_stamp(st, INPUTS_NAME, &version, then, sizeof then);
    if (rc == TB_E_NOTFOUND)
        return 0;
    if (!rc)
        rc = tb_store_stamp(st, now, sizeof now, &stable);
    /* Links are stored before the inputs, in one run: a stamp that matches
     * is the run that stored both (a run stopped between them left the old
     * stamp, which no longer matches). */
    *current = !rc && version == INPUTS_VERSION && !strcmp(now, then);
    return rc;
}

int tb_whatif_prepare(struct tb_store *st, const struct tb_catalog *cat, bool *computed,
                      char *err, size_t errlen)
{
    char stamp[96] = "";
    bool stable = false, current = false;
    *computed = false;
    int rc = tb_store_stamp(st, stamp, sizeof stamp, &stable);
    if (rc || !stable || !use_stored())
        return rc;
    if ((rc = tb_whatif_links_current(st, &current)) || current)
        return rc;
    struct wi_inputs w;
    memset(&w, 0, sizeof w);
    rc = wi_compute(st, cat, true, stamp, &w, err, errlen);
    wi_free(&w);
    *computed = rc == 0;
    return rc;
}

int tb_whatif(struct tb_store *st, const struct tb_catalog *cat, const struct tb_whatif_opts *o,
              struct tb_whatif_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    struct wi_inputs w;
    memset(&w, 0, sizeof w);
    char stamp[96] = "";
    bool stable = false, have = false, stored = use_stored();
    int rc = 0;
    if (stored && (rc = tb_store_stamp(st, stamp, sizeof stamp, &stable)))
        return rc;
    if (stored) {
        void *blob = NULL;
        size_t len = 0;
        rc = tb_store_model_get(st, INPUTS_NAME, INPUTS_VERSION, stamp, &blob, &len);
        if (rc && rc != TB_E_NOTFOUND)
            return rc;
        have = !rc && wi_parse(blob, len, tb_catalog_tier_count(cat),
                               tb_catalog_server_count(cat), &w) == 0;
        free(blob);
    }
    r->stored_inputs = have;
    if (!have && (rc = wi_precheck(st, cat, o, err, errlen)))
        return rc;
    if (!have && (rc = wi_compute(st, cat, stored && stable, stamp, &w, err, errlen)))
        return rc;
    rc = wi_solve(cat, &w, o, r, err, errlen);
    wi_free(&w);
    return rc;
}
