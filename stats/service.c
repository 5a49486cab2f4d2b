/* SPDX-License-Identifier: MIT */
/* service.c — the service-time estimator: per-class service times from
 * the requests that arrived at an idle server (with downstream calls
 * subtracted), a product-limit estimate censored where another request
 * arrived, with an exponential tail; re-estimated per period, and the work
 * unit over them. */
#include "stats.h"


#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Levels of "more than k in flight" tried at most (see "the level k"). */
enum { SVC_KMAX = TB_SVC_LEVELS_MAX };

void tb_svc_opts_default(struct tb_svc_opts *o)
{
    o->period_ns = 60 * TB_NS_PER_SEC;
    o->min_isolated = 20;
    o->fallback_q = 0.10;
    o->reservoir = 4096;
    o->wu_tolerance = 0.12;
    o->wu_floor_ns = 100 * 1000;
    o->wu_min_share = 0.01;
    o->levels = SVC_KMAX;
}

/* ------------------------------------------------------------ reservoir --- */

/* Up to `cap` samples of `size` bytes each; beyond, classic reservoir
 * sampling (Vitter's R) keeps a uniform sample, driven by the estimator's own
 * PRNG so results are reproducible. */
struct reservoir {
    void *v;
    uint32_t n;
    size_t cap_alloc;
    uint64_t seen;
};

/* An isolated sample: its service time (life minus downstream time), its
 * whole life D (the time of its death in the product-limit estimate,
 * "service times of the requests alone at arrival" below) and its server. */
struct isample {
    int64_t v, d;
    uint32_t server;
};

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static int res_add(struct reservoir *r, const void *x, size_t size, uint32_t cap, uint64_t *rng)
{
    r->seen++;
    if (r->n < cap) {
        if (tb_grow(&r->v, &r->cap_alloc, (size_t)r->n + 1, size))
            return TB_E_NOMEM;
        memcpy((char *)r->v + (size_t)r->n++ * size, x, size);
        return 0;
    }
    uint64_t j = xorshift(rng) % r->seen;
    if (j < cap)
        memcpy((char *)r->v + (size_t)j * size, x, size);
    return 0;
}

/* Total order on isolated samples, so that the weighted sums are added in
 * the same order whichever path settled them first (identical results). */
static int cmp_isample(const void *a, const void *b)
{
    const struct isample *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return (x->server > y->server) - (x->server < y->server);
}

/* ------------------------------------------------ (class, period) table --- */

/* The key of an entry of a (key, period) table (below), its first member;
 * key 0 marks an empty slot. */
struct kp {
    uint32_t key;
    int64_t period;
};

struct cutbin {
    int64_t sum;
    uint32_t n;
    uint32_t bin;
};

/* The cuts at one level k: only the bins used, in bin order (a class seldom
 * cut costs a few bytes). */
struct cutlist {
    struct cutbin *b;
    uint32_t n;
    size_t cap;
    uint64_t cuts;
};


/* A death at level m: a request that arrived with fewer than m others in
 * flight at its server and departed before more than m were (m, the most
 * in flight at once during its life, 2..SVC_KMAX in a class's cell, 1.. in
 * a server's). As struct isample otherwise. */
struct msample {
    int64_t v, d;
    uint32_t server, m;
};

struct cell {
    struct kp k;       /* class id, period */
    uint32_t tier;
    uint32_t requests;
    struct reservoir iso, all;
    /* lv[m]: its deaths at level m, 2..SVC_KMAX (a server's cell: 1..),
     * one reservoir per level drawn by their own generator (a level's
     * estimate must not rest on the few of its deaths a shared reservoir
     * would keep), and how many were seen per level. */
    struct reservoir lv[SVC_KMAX + 1];
    uint64_t mseen[SVC_KMAX + 1];
    /* cb[k]: its requests that arrived with at most k in flight (themselves
     * included) and were cut short when more than k were, per bin of the
     * time from arrival to that cut, how many and the sum of those times.
     * cb[1] of a class's cell: alone at arrival, cut by the next arrival. */
    struct cutlist cb[SVC_KMAX + 1];
    /* The servers its requests at levels >= 2 ran on (the level of the
     * estimate is the smallest of theirs). */
    uint32_t *srvs;
    uint32_t nsrvs;
    size_t cap_srvs;
    /* Set by km_cell: the level k, the estimate, the requests with at most
     * k in flight at arrival it stands on (the weight of this period when
     * pooled), and its deaths seen and kept. */
    uint32_t km_k;
    double km_mean, km_alone;
    uint64_t km_seen;
    uint32_t km_kept;
};

/* One in-flight request of the analysed tier, kept until the stream passes
 * its departure (only then are all the calls made during its life known). */
struct pending {
    int64_t a, d;
    uint32_t server, class_id, tier;
    bool overlapped; /* another request of its server shared part of its life */
    int32_t tslot; /* its entry in the levels' tracker */
};

/* A classified request in flight that arrived with at most SVC_KMAX in
 * flight, for the levels k >= 2 ("the level k"): m = the most requests of
 * its server in flight at once during its life so far (itself included;
 * SVC_KMAX + 1: more than SVC_KMAX); it is listed in its server's bucket m
 * while m <= SVC_KMAX. v: its sample, once known. */
struct tent {
    int64_t a, d, v;
    uint32_t server, class_id, m;
    int32_t prev, next;
};

/* Where the entry of (key, period) was, while its table has not grown: the
 * lookups of a request's server, class and period repeat, each a few times
 * per request. gen 0 (zeroed): empty. */
struct kpref {
    void *v;
    int64_t period;
    uint32_t key, gen;
};

struct srv {
    uint32_t id;
    int64_t maxdep;    /* latest departure of its requests so far */
    int32_t last;      /* pending slot of its latest arrival, -1 = none */
    bool seen;
    bool has_direct;   /* without hosts: its latest request, not yet settled */
    struct pending direct;
    /* Its latest arrival, waiting for the next one to tell whether it was cut
     * short (see cut_observe). */
    bool prev_open, prev_idle;
    int64_t prev_a, prev_d;
    uint32_t prev_class;
    /* Its requests in flight (a min-heap of their departures) and the time
     * up to which their number has been counted into struct occ ("the work
     * done" below); whether some life of its own had a call subtracted. */
    struct tb_i64heap oh, uh; /* uh: the unclassified among them */
    int64_t occ_t;
    bool called, unclassified;
    /* The tracker's buckets by m. */
    int32_t bhead[SVC_KMAX + 1];
    /* Its last entries in e->occ, e->scells, e->cells and e->ccount (the
     * last two per class_id & 3). */
    struct kpref occ_ref, scell_ref, cell_ref[4], cc_ref[4];
};

/* The time a server spent with m requests in flight, m = 1 .. SVC_OCC_K
 * (SVC_OCC_K: that many or more), per (server, period of the time), and how
 * many requests arrived at it in the period (unclassified ones apart). Key:
 * server + 1. idx numbers the entries for the counts per class (`ccount`). */
enum { SVC_OCC_K = 64 };
struct occ {
    struct kp k;
    uint32_t idx;
    uint64_t requests;
    double tn[SVC_OCC_K + 1];
};

/* Requests of a class (key) that arrived at one (server, period): period =
 * the struct occ's idx. */
struct ccount {
    struct kp k;
    uint64_t n;
};

/* Time since an arrival, in bins: [0, 1 us), then SVC_SUB per octave up to
 * 2^38 ns (275 s), the last one open. */
enum { SVC_OCT0 = 10, SVC_NOCT = 28, SVC_LSUB = 4, SVC_SUB = 1 << SVC_LSUB,
       SVC_NB = 1 + SVC_NOCT * SVC_SUB };

static int svc_bin(int64_t x)
{
    if (x < (INT64_C(1) << SVC_OCT0))
        return 0;
    int o = 63 - __builtin_clzll((unsigned long long)x);
    if (o >= SVC_OCT0 + SVC_NOCT)
        return SVC_NB - 1;
    return 1 + (o - SVC_OCT0) * SVC_SUB + (int)((x >> (o - SVC_LSUB)) & (SVC_SUB - 1));
}

/* Union of the calls made from one machine group, in start order. */
struct ivlist {
    int64_t *s, *e;
    size_t head, n, cap;
};

/* Open addressing on (key, period), doubling at half full, for entries of
 * `elem` bytes that begin with their struct kp. */
struct kptab {
    char *v;
    size_t elem, n, cap;
    uint32_t gen; /* growths so far: a struct kpref of another is stale */
};

struct tb_svcest {
    struct tb_svc_opts o;
    struct tb_svc_host *hosts;
    size_t nhosts;
    int64_t now;
    bool started;
    int64_t first;
    uint64_t rng;
    struct kptab cells; /* struct cell by (class, period) */
    struct kptab occ;   /* struct occ by (server + 1, period) */
    struct kptab ccount; /* struct ccount by (class, occ idx) */
    /* servers by id (dense ids) */
    struct srv *srv;
    size_t nsrv;
    /* call unions by group: index 0 = tier-wide hosts, 1 + i = server id i */
    struct ivlist *iv;
    size_t niv;
    size_t iv_total, iv_prune_at;
    struct tb_slots pend; /* struct pending, until all its calls are known */
    int64_t per_lo; /* the period period_of found last */
    bool per_ok;
    /* The levels' tracker: classified requests in flight (struct tent),
     * the cells by (server + 1, period) that choose each server's level,
     * and the generator of the `lv` reservoirs (apart, so that level 1
     * draws exactly as before). */
    struct tb_slots tk;
    uint32_t tseq; /* the tracker's arrivals, numbered: the order of deaths at one instant */
    struct kptab scells;
    uint64_t rng2;
};

static size_t cell_hash(uint32_t c, int64_t p)
{
    uint64_t h = (uint64_t)c * 0x9e3779b97f4a7c15ull ^ (uint64_t)p * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return (size_t)h;
}

static struct kp *kp_at(const struct kptab *t, size_t i)
{
    return (struct kp *)(t->v + i * t->elem);
}

static int kp_grow(struct kptab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    char *nv = calloc(cap, t->elem);
    if (!nv)
        return TB_E_NOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        const struct kp *k = kp_at(t, i);
        if (!k->key)
            continue;
        size_t j = cell_hash(k->key, k->period) & (cap - 1);
        while (((const struct kp *)(nv + j * t->elem))->key)
            j = (j + 1) & (cap - 1);
        memcpy(nv + j * t->elem, k, t->elem);
    }
    free(t->v);
    t->v = nv;
    t->cap = cap;
    t->gen++;
    return 0;
}

/* The entry of (key, period), key > 0: added (zeroed but for its key) when
 * absent and `create`, else *out = NULL. */
static int kp_get(struct kptab *t, uint32_t key, int64_t period, bool create, void **out)
{
    *out = NULL;
    if (create && (t->n + 1) * 2 > t->cap) {
        int rc = kp_grow(t);
        if (rc)
            return rc;
    }
    if (!t->cap)
        return 0;
    size_t j = cell_hash(key, period) & (t->cap - 1);
    struct kp *k;
    while ((k = kp_at(t, j))->key && (k->key != key || k->period != period))
        j = (j + 1) & (t->cap - 1);
    if (!k->key) {
        if (!create)
            return 0;
        k->key = key;
        k->period = period;
        t->n++;
    }
    *out = k;
    return 0;
}

/* kp_get(t, key, period, true, out) through the reference r. The lookups
 * skipped insert nothing (the entry is there), so the table grows (when
 * half full) at the next lookup that is made, with the same entries as it
 * would have had: the same layout, the same order of the cells. */
static int kp_ref(struct kptab *t, struct kpref *r, uint32_t key, int64_t period, void **out)
{
    if (r->gen == t->gen && r->key == key && r->period == period && r->v) {
        *out = r->v;
        return 0;
    }
    int rc = kp_get(t, key, period, true, out);
    if (!rc)
        *r = (struct kpref){.v = *out, .period = period, .key = key, .gen = t->gen};
    return rc;
}

static struct cell *cell_at(const struct tb_svcest *e, size_t i)
{
    return (struct cell *)(void *)kp_at(&e->cells, i);
}

/* ------------------------------------------------------------- servers --- */

static int srv_get(struct tb_svcest *e, uint32_t id, struct srv **out)
{
    if (tb_grow_zero(&e->srv, &e->nsrv, (size_t)id + 1, sizeof *e->srv))
        return TB_E_NOMEM;
    struct srv *s = &e->srv[id];
    if (!s->seen) {
        s->seen = true;
        s->id = id;
        s->maxdep = INT64_MIN;
        s->last = -1;
        for (int k = 0; k <= SVC_KMAX; k++)
            s->bhead[k] = -1;
    }
    *out = s;
    return 0;
}

/* ----------------------------------------------------------- intervals --- */

static int iv_group(struct tb_svcest *e, uint32_t server, struct ivlist **out)
{
    size_t g = server ? (size_t)server + 1 : 0;
    if (tb_grow_zero(&e->iv, &e->niv, g + 1, sizeof *e->iv))
        return TB_E_NOMEM;
    *out = &e->iv[g];
    return 0;
}

static int iv_add(struct ivlist *l, int64_t s, int64_t en, size_t *total)
{
    size_t last = l->head + l->n;
    if (l->n && s <= l->e[last - 1]) {
        /* Calls arrive in start order, so a call overlapping the union's last
         * interval extends it; otherwise it opens a new one. */
        if (en > l->e[last - 1])
            l->e[last - 1] = en;
        return 0;
    }
    if (last == l->cap) {
        if (l->head) { /* reuse the space pruned from the front */
            memmove(l->s, l->s + l->head, l->n * sizeof *l->s);
            memmove(l->e, l->e + l->head, l->n * sizeof *l->e);
            l->head = 0;
            last = l->n;
        }
        /* Starts and ends grow in step: the smaller capacity is the list's. */
        size_t cs = l->cap, ce = l->cap;
        if (tb_grow(&l->s, &cs, last + 1, sizeof *l->s) ||
            tb_grow(&l->e, &ce, last + 1, sizeof *l->e))
            return TB_E_NOMEM;
        l->cap = TB_MIN(cs, ce);
    }
    l->s[last] = s;
    l->e[last] = en;
    l->n++;
    (*total)++;
    return 0;
}

/* First interval (index into the live part) whose end is after t. */
static size_t iv_first_after(const struct ivlist *l, int64_t t)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->e[l->head + mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Length of (A ∪ B) ∩ [a, d) where A, B are two disjoint-sorted unions. */
static int64_t iv_busy(const struct ivlist *x, const struct ivlist *y, int64_t a, int64_t d)
{
    size_t i = x ? iv_first_after(x, a) : 0, j = y ? iv_first_after(y, a) : 0;
    size_t nx = x ? x->n : 0, ny = y ? y->n : 0;
    int64_t busy = 0, cur_s = 0, cur_e = INT64_MIN;
    for (;;) {
        int64_t s, en;
        bool hx = i < nx && x->s[x->head + i] < d, hy = j < ny && y->s[y->head + j] < d;
        if (!hx && !hy)
            break;
        if (hx && (!hy || x->s[x->head + i] <= y->s[y->head + j])) {
            s = x->s[x->head + i];
            en = x->e[x->head + i];
            i++;
        } else {
            s = y->s[y->head + j];
            en = y->e[y->head + j];
            j++;
        }
        s = TB_MAX(s, a);
        en = TB_MIN(en, d);
        if (en <= s)
            continue;
        if (s > cur_e) {
            if (cur_e > cur_s)
                busy += cur_e - cur_s;
            cur_s = s;
            cur_e = en;
        } else if (en > cur_e) {
            cur_e = en;
        }
    }
    if (cur_e > cur_s)
        busy += cur_e - cur_s;
    return busy;
}

/* Drops call intervals that end before every life still to be measured. */
static void iv_prune(struct tb_svcest *e)
{
    int64_t keep = e->now;
    for (size_t k = 0; k < e->pend.nheap; k++) {
        const struct pending *p = tb_slots_at(&e->pend, e->pend.heap[k].slot);
        keep = TB_MIN(keep, p->a);
    }
    e->iv_total = 0;
    for (size_t g = 0; g < e->niv; g++) {
        struct ivlist *l = &e->iv[g];
        size_t drop = iv_first_after(l, keep);
        l->head += drop;
        l->n -= drop;
        e->iv_total += l->n;
    }
    e->iv_prune_at = TB_MAX((size_t)4096, e->iv_total * 2);
}

/* ------------------------------------ the work done: requests in flight --- */

static int64_t period_of(struct tb_svcest *e, int64_t t);

/* Counts the time since the server's last event up to t into the entry of
 * its number of requests in flight, per period of the time (an interval
 * crossing a period's end is split there). */
static int occ_account(struct tb_svcest *e, struct srv *s, int64_t t)
{
    while (t > s->occ_t && s->oh.n) {
        int64_t from = s->occ_t, to = t, p = period_of(e, from);
        if (e->o.period_ns > 0 && p != INT64_MIN && p <= INT64_MAX - e->o.period_ns)
            to = TB_MIN(t, p + e->o.period_ns);
        void *v;
        int rc = kp_ref(&e->occ, &s->occ_ref, s->id + 1, p, &v);
        if (rc)
            return rc;
        struct occ *o = v;
        if (!o->idx)
            o->idx = (uint32_t)e->occ.n;
        o->tn[TB_MIN(s->oh.n, (size_t)SVC_OCC_K)] += (double)(to - from);
        s->occ_t = to;
    }
    s->occ_t = TB_MAX(s->occ_t, t);
    return 0;
}

/* Brings the server's count of requests in flight up to t: the departures
 * at or before t leave, each counted at its time. */
static int occ_to(struct tb_svcest *e, struct srv *s, int64_t t)
{
    while (s->oh.n && s->oh.v[0] <= t) {
        int rc = occ_account(e, s, s->oh.v[0]);
        if (rc)
            return rc;
        tb_i64heap_pop(&s->oh);
    }
    while (s->uh.n && s->uh.v[0] <= t)
        tb_i64heap_pop(&s->uh);
    return occ_account(e, s, t);
}

/* A request arrives at the server: counted in flight until its departure. */
static int occ_arrive(struct tb_svcest *e, struct srv *s, const struct tb_request *r)
{
    int rc = occ_to(e, s, r->arrival_ns);
    if (rc)
        return rc;
    if (tb_i64heap_push(&s->oh, r->departure_ns))
        return TB_E_NOMEM;
    if (!r->class_id) {
        s->unclassified = true;
        return tb_i64heap_push(&s->uh, r->departure_ns) ? TB_E_NOMEM : 0;
    }
    void *v;
    if ((rc = kp_ref(&e->occ, &s->occ_ref, s->id + 1, period_of(e, r->arrival_ns), &v)))
        return rc;
    struct occ *o = v;
    if (!o->idx)
        o->idx = (uint32_t)e->occ.n;
    o->requests++;
    if ((rc = kp_ref(&e->ccount, &s->cc_ref[r->class_id & 3], r->class_id, o->idx, &v)))
        return rc;
    ((struct ccount *)v)->n++;
    return 0;
}

/* --------------------------------------------------------------- stream --- */

int tb_svcest_new(struct tb_svcest **out, const struct tb_svc_host *hosts, size_t nhosts,
                  const struct tb_svc_opts *o)
{
    if (!out || (nhosts && !hosts))
        return TB_E_INVAL;
    struct tb_svcest *e = calloc(1, sizeof *e);
    if (!e)
        return TB_E_NOMEM;
    if (o)
        e->o = *o;
    else
        tb_svc_opts_default(&e->o);
    e->cells.elem = sizeof(struct cell);
    e->occ.elem = sizeof(struct occ);
    e->ccount.elem = sizeof(struct ccount);
    e->scells.elem = sizeof(struct cell);
    e->pend.size = sizeof(struct pending);
    e->tk.size = sizeof(struct tent);
    if (e->o.period_ns < 0 || e->o.fallback_q < 0 || e->o.fallback_q > 1 || !e->o.reservoir ||
        e->o.levels < 1 || e->o.levels > SVC_KMAX) {
        free(e);
        return TB_E_INVAL;
    }
    if (nhosts) {
        e->hosts = malloc(nhosts * sizeof *e->hosts);
        if (!e->hosts) {
            free(e);
            return TB_E_NOMEM;
        }
        memcpy(e->hosts, hosts, nhosts * sizeof *hosts);
    }
    e->nhosts = nhosts;
    e->rng = 0x2545f4914f6cdd1dull;
    e->rng2 = 0x9e3779b97f4a7c15ull;
    e->iv_prune_at = 4096;
    *out = e;
    return 0;
}

static int advance(struct tb_svcest *e, int64_t t)
{
    if (e->started && t < e->now)
        return TB_E_INVAL; /* the stream must come in arrival order */
    if (!e->started) {
        e->started = true;
        e->first = t;
    }
    e->now = t;
    return 0;
}

static int64_t period_of(struct tb_svcest *e, int64_t t)
{
    if (e->o.period_ns <= 0)
        return e->first;
    /* Most times fall in the period of the one before: no division. */
    if (e->per_ok && t >= e->per_lo && (uint64_t)t - (uint64_t)e->per_lo < (uint64_t)e->o.period_ns)
        return e->per_lo;
    int64_t p;
    if (tb_win_floor(t, e->o.period_ns, &p))
        return INT64_MIN;
    e->per_lo = p;
    e->per_ok = true;
    return p;
}

/* One cut at time g after the arrival, into its bin. */
static int cut_add(struct cutlist *l, int64_t g)
{
    int k = svc_bin(g);
    /* The first bin >= k, halving without a branch (which half it is, is a
     * coin toss the predictor loses: this search was most of the cost). */
    uint32_t lo = 0;
    if (l->n) {
        const struct cutbin *b = l->b;
        for (uint32_t n = l->n; n > 1; n -= n / 2)
            b = b[n / 2].bin < (uint32_t)k ? b + n / 2 : b;
        lo = (uint32_t)(b - l->b) + (b->bin < (uint32_t)k);
    }
    if (lo == l->n || l->b[lo].bin != (uint32_t)k) {
        if (tb_grow(&l->b, &l->cap, (size_t)l->n + 1, sizeof *l->b))
            return TB_E_NOMEM;
        memmove(&l->b[lo + 1], &l->b[lo], (l->n - lo) * sizeof *l->b);
        l->b[lo] = (struct cutbin){.bin = (uint32_t)k};
        l->n++;
    }
    l->b[lo].n++;
    l->b[lo].sum += g;
    l->cuts++;
    return 0;
}

/* Counts the fate of a server's previous arrival when it was alone at
 * arrival and the next arrival at its server (at `next`) came before it
 * departed: a cut, in the cell of its class and the period of its arrival.
 * An alone request not cut is an isolated sample (settle). `next` =
 * INT64_MAX at the end of the stream. */
static int cut_observe(struct tb_svcest *e, struct srv *s, int64_t next)
{
    if (!s->prev_open)
        return 0;
    s->prev_open = false;
    if (!s->prev_idle || next >= s->prev_d)
        return 0;
    void *v;
    int rc = kp_ref(&e->cells, &s->cell_ref[s->prev_class & 3], s->prev_class,
                    period_of(e, s->prev_a), &v);
    if (rc)
        return rc;
    return cut_add(&((struct cell *)v)->cb[1], next - s->prev_a);
}

/* Measures one request whose life is over and whose calls are all known. */
static int settle(struct tb_svcest *e, struct pending *p)
{
    struct ivlist *own = NULL, *shared = e->niv ? &e->iv[0] : NULL;
    if ((size_t)p->server + 1 < e->niv)
        own = &e->iv[p->server + 1];
    int64_t sample = (p->d - p->a) - iv_busy(own, shared, p->a, p->d);
    if (sample < p->d - p->a)
        e->srv[p->server].called = true;
    if (p->tslot >= 0)
        ((struct tent *)tb_slots_at(&e->tk, p->tslot))->v = sample;
    struct cell *c;
    void *v;
    int rc = kp_ref(&e->cells, &e->srv[p->server].cell_ref[p->class_id & 3], p->class_id,
                    period_of(e, p->a), &v);
    c = v;
    if (rc)
        return rc;
    c->requests++;
    c->tier = p->tier;
    /* A life entirely spent waiting on calls says nothing about the tier's
     * own cost: no sample. */
    if (sample <= 0)
        return 0;
    rc = res_add(&c->all, &sample, sizeof sample, e->o.reservoir, &e->rng);
    if (!rc && !p->overlapped) {
        struct isample is = {.v = sample, .d = p->d - p->a, .server = p->server};
        rc = res_add(&c->iso, &is, sizeof is, e->o.reservoir, &e->rng);
    }
    return rc;
}

/* Settles every pending request that departed at or before t. */
static int drain(struct tb_svcest *e, int64_t t)
{
    while (e->pend.nheap && e->pend.heap[0].d <= t) {
        int32_t slot = e->pend.heap[0].slot;
        struct pending *p = tb_slots_at(&e->pend, slot);
        int rc = settle(e, p);
        if (rc)
            return rc;
        struct srv *s = &e->srv[p->server];
        if (s->last == slot)
            s->last = -1;
        tb_slots_pop(&e->pend);
        tb_slots_put(&e->pend, slot);
    }
    return 0;
}

/* ------------------------------------------------------------ the level k --- */

/* The tracker of the levels k >= 2 (see "the level k" below): per server
 * its classified requests in flight, each in the bucket of the most in
 * flight at once during its life so far (m). An arrival that makes n + 1 in
 * flight cuts every request of bucket n at level n (none of the others:
 * their m is already above n, or they arrived now) and moves it to bucket
 * n + 1; a departure is a death at level m. Each request moves at most
 * SVC_KMAX times: O(requests x SVC_KMAX) at most.
 *
 * A request that arrives with SVC_KMAX or more others in flight is never
 * a death at any level (its m is above SVC_KMAX from the start and never
 * falls) and never cut (cuts are at levels n <= SVC_KMAX, of requests
 * whose m is n): it only counts in flight. So it gets no entry, and the
 * count n comes from the work done's heap of its server (struct srv `oh`,
 * every request in flight, brought up to the arrival) less its
 * unclassified ones (`uh`). On a server far past its knee most requests
 * are such: bench_analysis's 10 M, 82% of them (4.2 s to 3.3 s of CPU).
 * Deaths at one instant come in arrival order (`tseq`): with every
 * request on the heap (v0.8) their order was the heap's layout; it
 * matters only when two of them are drawn into full reservoirs, and it
 * never did in bench/svc_dump's battery (320 such pairs) or the golden
 * captures. */

/* The entry of (key, period) in tab, created when absent (through ref). */
static int cell_get(struct kptab *tab, struct kpref *ref, uint32_t key, int64_t period,
                    struct cell **out)
{
    void *v;
    int rc = kp_ref(tab, ref, key, period, &v);
    *out = v;
    return rc;
}

static int cell_note_server(struct cell *c, uint32_t server)
{
    for (uint32_t i = 0; i < c->nsrvs; i++)
        if (c->srvs[i] == server)
            return 0;
    if (tb_grow(&c->srvs, &c->cap_srvs, (size_t)c->nsrvs + 1, sizeof *c->srvs))
        return TB_E_NOMEM;
    c->srvs[c->nsrvs++] = server;
    return 0;
}

/* Entry x cut at level k at time now: in its class's cell (levels >= 2;
 * level 1 is cut_observe's) and its server's. */
static int t_cut(struct tb_svcest *e, const struct tent *x, uint32_t k, int64_t now)
{
    struct cell *c;
    struct srv *xs = &e->srv[x->server];
    int rc;
    int64_t p = period_of(e, x->a);
    if (k >= 2) {
        if ((rc = cell_get(&e->cells, &xs->cell_ref[x->class_id & 3], x->class_id, p, &c)) ||
            (rc = cut_add(&c->cb[k], now - x->a)) || (rc = cell_note_server(c, x->server)))
            return rc;
    }
    if ((rc = cell_get(&e->scells, &xs->scell_ref, x->server + 1, p, &c)))
        return rc;
    return cut_add(&c->cb[k], now - x->a);
}

/* Entry x departed: a death at level m when m <= SVC_KMAX and it has a
 * sample (as settle: a life spent waiting on calls has none). */
static int t_death(struct tb_svcest *e, const struct tent *x)
{
    if (x->m > SVC_KMAX || x->v <= 0)
        return 0;
    struct msample ms = {.v = x->v, .d = x->d - x->a, .server = x->server, .m = x->m};
    struct cell *c;
    struct srv *xs = &e->srv[x->server];
    int rc;
    int64_t p = period_of(e, x->a);
    if (x->m >= 2) {
        if ((rc = cell_get(&e->cells, &xs->cell_ref[x->class_id & 3], x->class_id, p, &c)) ||
            (rc = res_add(&c->lv[x->m], &ms, sizeof ms, e->o.reservoir, &e->rng2)) ||
            (rc = cell_note_server(c, x->server)))
            return rc;
        c->mseen[x->m]++;
    }
    if ((rc = cell_get(&e->scells, &xs->scell_ref, x->server + 1, p, &c)) ||
        (rc = res_add(&c->lv[x->m], &ms, sizeof ms, e->o.reservoir, &e->rng2)))
        return rc;
    c->mseen[x->m]++;
    return 0;
}

static void t_link(struct tb_svcest *e, struct srv *s, int32_t slot)
{
    struct tent *x = tb_slots_at(&e->tk, slot);
    x->prev = -1;
    x->next = -1;
    if (x->m > SVC_KMAX)
        return;
    x->next = s->bhead[x->m];
    if (x->next >= 0)
        ((struct tent *)tb_slots_at(&e->tk, x->next))->prev = slot;
    s->bhead[x->m] = slot;
}

static void t_unlink(struct tb_svcest *e, struct srv *s, int32_t slot)
{
    struct tent *x = tb_slots_at(&e->tk, slot);
    if (x->m > SVC_KMAX)
        return;
    if (x->prev >= 0)
        ((struct tent *)tb_slots_at(&e->tk, x->prev))->next = x->next;
    else
        s->bhead[x->m] = x->next;
    if (x->next >= 0)
        ((struct tent *)tb_slots_at(&e->tk, x->next))->prev = x->prev;
}

/* The departures at or before t: deaths. Runs after drain(), which has set
 * the samples of the requests with calls. */
static int tdrain(struct tb_svcest *e, int64_t t)
{
    while (e->tk.nheap && e->tk.heap[0].d <= t) {
        int32_t slot = e->tk.heap[0].slot;
        struct tent *x = tb_slots_at(&e->tk, slot);
        struct srv *s = &e->srv[x->server];
        t_unlink(e, s, slot);
        int rc = t_death(e, x);
        if (rc)
            return rc;
        tb_slots_pop(&e->tk);
        tb_slots_put(&e->tk, slot);
    }
    return 0;
}

/* A classified request arrives at s (after tdrain to its arrival): the
 * cuts it makes, then its entry. *slot_out: the entry. */
static int t_arrive(struct tb_svcest *e, struct srv *s, const struct tb_request *r,
                    int32_t *slot_out)
{
    /* The classified requests in flight but this one: those counted into
     * the work done (occ_arrive has brought them up to this arrival and
     * added it) but the unclassified. */
    uint32_t n = (uint32_t)(s->oh.n - 1 - s->uh.n);
    if (n >= 1 && n <= SVC_KMAX) {
        int32_t i = s->bhead[n];
        s->bhead[n] = -1;
        while (i >= 0) {
            struct tent *x = tb_slots_at(&e->tk, i);
            int32_t nx = x->next;
            int rc = t_cut(e, x, n, r->arrival_ns);
            if (rc)
                return rc;
            x->m = n + 1;
            t_link(e, s, i);
            i = nx;
        }
    }
    *slot_out = -1;
    if (n >= SVC_KMAX)
        return 0; /* more than SVC_KMAX in flight already: never a sample */
    int32_t slot;
    int rc = tb_slots_take(&e->tk, &slot);
    if (rc)
        return rc;
    struct tent *x = tb_slots_at(&e->tk, slot);
    *x = (struct tent){.a = r->arrival_ns, .d = r->departure_ns,
                       .v = r->departure_ns - r->arrival_ns, .server = r->server,
                       .class_id = r->class_id, .m = n + 1};
    t_link(e, s, slot);
    tb_slots_push(&e->tk, r->departure_ns, e->tseq++, slot);
    *slot_out = slot;
    return 0;
}

/* Without hosts no call is ever subtracted, so a request's sample is known at
 * once and only its isolation waits, for the next arrival at its server: one
 * request per server is held (in `direct`) instead of every request in flight
 * on the heap. Same results, less work. */
static int add_direct(struct tb_svcest *e, struct srv *s, const struct tb_request *r)
{
    struct pending p = {.a = r->arrival_ns, .d = r->departure_ns, .server = r->server,
                        .class_id = r->class_id, .tier = r->tier, .tslot = -1};
    p.overlapped = s->maxdep > r->arrival_ns;
    if (s->has_direct) {
        struct pending *q = &s->direct;
        if (q->d > r->arrival_ns)
            q->overlapped = true;
        int rc = settle(e, q);
        if (rc)
            return rc;
    }
    s->maxdep = TB_MAX(s->maxdep, r->departure_ns);
    s->direct = p;
    s->has_direct = true;
    return 0;
}

/* Brings the estimator up to an arrival at t: advance, then drain. */
static int catch_up(struct tb_svcest *e, int64_t t)
{
    int rc = advance(e, t);
    if (!rc)
        rc = drain(e, t);
    return rc ? rc : tdrain(e, t);
}

int tb_svcest_add(struct tb_svcest *e, const struct tb_request *r)
{
    if (!e || !r)
        return TB_E_INVAL;
    if (r->departure_ns < r->arrival_ns)
        return 0;
    if (r->class_id == 0) {
        /* Not estimated, but it holds its server: counted in the work done
         * (which then is not compared, "the work done"). */
        struct srv *s;
        int rc = srv_get(e, r->server, &s);
        if (rc)
            return rc;
        if (!e->started || r->arrival_ns < e->now) {
            s->unclassified = true;
            return 0;
        }
        return occ_arrive(e, s, r);
    }
    int rc = catch_up(e, r->arrival_ns);
    if (rc)
        return rc;
    struct srv *s;
    if ((rc = srv_get(e, r->server, &s)))
        return rc;
    if ((rc = occ_arrive(e, s, r)))
        return rc;
    /* This arrival settles whether the previous one, if alone at arrival,
     * was cut short. */
    if ((rc = cut_observe(e, s, r->arrival_ns)))
        return rc;
    s->prev_open = true;
    s->prev_class = r->class_id;
    s->prev_idle = s->maxdep <= r->arrival_ns;
    s->prev_a = r->arrival_ns;
    s->prev_d = r->departure_ns;
    int32_t tslot = -1;
    if (e->o.levels > 1 && (rc = t_arrive(e, s, r, &tslot)))
        return rc;
    if (!e->nhosts)
        return add_direct(e, s, r);
    int32_t slot;
    if ((rc = tb_slots_take(&e->pend, &slot)))
        return rc;
    struct pending *p = tb_slots_at(&e->pend, slot);
    p->a = r->arrival_ns;
    p->d = r->departure_ns;
    p->server = r->server;
    p->class_id = r->class_id;
    p->tier = r->tier;
    p->tslot = tslot;
    /* Isolated = concurrency 1 for the whole life: nothing still in flight at
     * its arrival, and the next arrival at its server (checked when that one
     * comes) not before its departure. Only the previous arrival can be cut
     * by this one, since arrivals come in order. */
    p->overlapped = s->maxdep > r->arrival_ns;
    if (s->last >= 0) {
        struct pending *q = tb_slots_at(&e->pend, s->last);
        if (q->d > r->arrival_ns)
            q->overlapped = true;
    }
    s->maxdep = TB_MAX(s->maxdep, r->departure_ns);
    s->last = slot;
    tb_slots_push(&e->pend, r->departure_ns, 0, slot);
    return 0;
}

int tb_svcest_add_down(struct tb_svcest *e, const struct tb_request *r)
{
    if (!e || !r)
        return TB_E_INVAL;
    if (r->departure_ns < r->arrival_ns)
        return 0;
    int rc = catch_up(e, r->arrival_ns);
    if (rc)
        return rc;
    for (size_t h = 0; h < e->nhosts; h++) {
        if (!tb_addr_ip_eq(&e->hosts[h].addr, &r->client))
            continue;
        struct ivlist *l;
        if ((rc = iv_group(e, e->hosts[h].server, &l)))
            return rc;
        if ((rc = iv_add(l, r->arrival_ns, r->departure_ns, &e->iv_total)))
            return rc;
        break; /* first matching host decides the group */
    }
    if (e->iv_total >= e->iv_prune_at)
        iv_prune(e);
    return 0;
}

void tb_svcest_free(struct tb_svcest *e)
{
    if (!e)
        return;
    struct kptab *tabs[2] = {&e->cells, &e->scells};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < tabs[t]->cap; i++) {
            struct cell *c = (struct cell *)(void *)kp_at(tabs[t], i);
            free(c->iso.v);
            free(c->all.v);
            free(c->srvs);
            for (int k = 0; k <= SVC_KMAX; k++) {
                free(c->cb[k].b);
                free(c->lv[k].v);
            }
        }
    free(e->scells.v);
    tb_slots_free(&e->tk);
    tb_slots_free(&e->pend);
    for (size_t g = 0; g < e->niv; g++) {
        free(e->iv[g].s);
        free(e->iv[g].e);
    }
    for (size_t i = 0; i < e->nsrv; i++)
    {
        tb_i64heap_free(&e->srv[i].oh);
        tb_i64heap_free(&e->srv[i].uh);
    }
    free(e->occ.v);
    free(e->ccount.v);
    free(e->cells.v);
    free(e->iv);
    free(e->srv);
    free(e->hosts);
    free(e);
}

static const struct tb_svc_override *find_ov(const struct tb_svc_override *ov, size_t nov,
                                             uint32_t class_id)
{
    for (size_t i = 0; i < nov; i++)
        if (ov[i].class_id == class_id && ov[i].service_ns > 0)
            return &ov[i];
    return NULL;
}

/* Per class over all periods: the request-weighted median of its period
 * estimates (rows of one class are contiguous). */
static int64_t class_overall(const struct tb_class_service *rows, size_t n, int64_t *tmp_s,
                             double *tmp_w)
{
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        tmp_s[i] = rows[i].service_ns;
        tmp_w[i] = rows[i].requests;
        total += rows[i].requests;
    }
    /* Insertion sort by service time: a class has few periods. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && tmp_s[j] < tmp_s[j - 1]; j--) {
            int64_t ts = tmp_s[j];
            tmp_s[j] = tmp_s[j - 1];
            tmp_s[j - 1] = ts;
            double tw = tmp_w[j];
            tmp_w[j] = tmp_w[j - 1];
            tmp_w[j - 1] = tw;
        }
    double cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += tmp_w[i];
        if (cum * 2 >= total)
            return tmp_s[i];
    }
    return tmp_s[n - 1];
}

/* ------------------------- service times of the requests alone at arrival --- */

/* A request of life D is isolated when nothing was in flight at its arrival
 * and nothing arrived during D. Long requests are seldom isolated (with
 * Poisson arrivals at rate λ, in proportion to exp(-λ·D)), so the mean of
 * the isolated lives is below the mean demand that work units need.
 *
 * The estimate is a survival analysis of the requests alone at arrival (the
 * moment of an arrival does not depend on the request's own demand, so their
 * demands are a fair sample): while alone, a request runs at full speed on
 * any server, so its life is its demand until it departs (a death at D: an
 * isolated sample) or the next request arrives at its server (censored at
 * that cut G: from then on it may share the server). Kaplan-Meier's
 * product-limit estimate of the survival of the life, S(t), over the deaths
 * (exact times, equal times together) and the cuts (4 bins per octave, each
 * at the mean of its cut times), gives the mean as Σ jump·sample. It needs
 * no model of the arrivals (bursts, pauses, a client that waits for the
 * answer before it sends again); the assumption left is that, while a
 * request is in flight, when the next one arrives does not depend on how
 * long this one will still take.
 *
 * On a busy server few alone requests stay alone long: at 95% busy on two
 * workers the next arrival comes within 1 ms (the mean demand) for 85% of
 * them, so the product-limit estimate is noisy late in the life, and the
 * part of the mean that lies there is large (for an exponential demand,
 * S(t)·(t + mean)). The estimate therefore stops at t*, where F, the
 * product-limit share of the alone requests not yet cut, falls below
 * SVC_KM_FSTOP (a weight of 5 in the inverse-probability form) or fewer
 * than SVC_KM_STOP are still at risk, and gives the mass S(t*) left the
 * mean life t* + 1/h, h the constant hazard of dying (deaths / time at
 * risk, the cut requests' time included: the maximum-likelihood estimate
 * under censoring) measured from where F fell below SVC_KM_FTAIL or fewer
 * than SVC_KM_TAIL were at risk. That is exact for an exponential demand.
 * A server seldom cut (light load) never reaches t*: the estimate is the
 * plain product-limit one to its last death. When the tail's deaths are
 * (nearly) equal (coefficient of variation below SVC_KM_CV: a constant
 * demand past t*, as on a busy M/D/c server) an exponential tail would
 * be far off (2.7x on M/D/2 at 95% busy), so the mass left takes their
 * mean instead: a constant demand stays exact at any load.
 *
 * The earlier estimator (v0.3: the isolated samples weighted by the inverse
 * of their chance of isolation, measured per server, that weight capped at
 * e^3) left the tail beyond the cap out and read low at 90-95% busy: 845 µs
 * for 1 ms on the steady sweep, seed 103; 763 µs on py4 seed 101; 25-32% on
 * M/M/2 and 52-60% on M/M/4 (test_service, test_mmc_busy).
 * Censoring is measured per class now (a class that is never cut is not
 * reweighted by another class's cuts). A request whose downstream calls
 * are subtracted carries its own sample v ≤ D but is censored on its life
 * D; the tail's value is t* + 1/h less the mean downstream time of the
 * deaths past t* (of the tail's when fewer than SVC_KM_DOWN: calls grow
 * with the life; gc.conf's app servers +4/+18/+6% against +6/+19/+5%).
 * (Censoring on v instead, the cut measured in own time, read gc.conf's
 * app servers 12-43% high.) */
#define SVC_KM_STOP 20.0
#define SVC_KM_TAIL 100.0
#define SVC_KM_CV 0.5
#define SVC_KM_DOWN 10
#define SVC_KM_FSTOP 0.2
#define SVC_KM_FTAIL 0.7

/* A death in the product-limit estimate: its sample, its life, its weight
 * (the reservoir's scale: requests seen per sample kept). */
struct wsample {
    int64_t v, d;
    double w;
};

/* The product-limit estimate over the deaths v (sorted by life) and the
 * cuts cl: *mean, and *alone = the requests it stands on (deaths and cuts). */
static void km_run(const struct wsample *v, uint32_t nd, const struct cutlist *cl,
                   double *mean_out, double *alone_out)
{
    const struct cutbin *cb = cl->b;
    uint32_t ncb = cl->n, i = 0;
    double risk = (double)cl->cuts, s = 1, mean = 0, t = 0;
    for (uint32_t j = 0; j < nd; j++)
        risk += v[j].w;
    *alone_out = risk;
    double f = 1; /* product-limit survival of not being cut */
    /* Where the tail's hazard is measured from: the first death and cut
     * bin after the time t_h at which F fell below SVC_KM_FTAIL or fewer
     * than SVC_KM_TAIL were at risk. */
    uint32_t ih = 0;
    uint32_t k = 0, kh = 0;
    double th = 0;
    bool tail_set = risk < SVC_KM_TAIL;
    for (;;) {
        bool hd = i < nd, hc = k < ncb;
        if ((!hd && !hc) || risk < SVC_KM_STOP || f < SVC_KM_FSTOP)
            break;
        double tc = hc ? (double)cb[k].sum / cb[k].n : INFINITY;
        if (hd && (double)v[i].d <= tc) {
            /* Deaths before cuts at the same time, as usual; deaths at the
             * same time together (a constant demand dies at once). */
            uint32_t j = i;
            double w = 0, wv = 0;
            for (; j < nd && v[j].d == v[i].d; j++) {
                w += v[j].w;
                wv += v[j].w * (double)v[j].v;
            }
            double jump = s * w / risk;
            mean += jump * wv / w;
            s -= jump;
            risk -= w;
            t = (double)v[i].d;
            i = j;
        } else {
            f *= 1 - cb[k].n / risk;
            risk -= cb[k].n;
            t = tc;
            k++;
        }
        if (!tail_set && (risk < SVC_KM_TAIL || f < SVC_KM_FTAIL)) {
            tail_set = true;
            th = t;
            ih = i;
            kh = k;
        }
    }
    if (s > 1e-12) {
        double deaths = 0, expo = 0, down = 0, x1 = 0, x2 = 0;
        for (uint32_t j = ih; j < nd; j++) {
            double x = (double)v[j].d - th;
            deaths += v[j].w;
            expo += v[j].w * x;
            down += v[j].w * (double)(v[j].d - v[j].v);
            x1 += x;
            x2 += x * x;
        }
        for (uint32_t b = kh; b < ncb; b++)
            expo += (double)cb[b].sum - th * cb[b].n;
        uint32_t nt = nd - ih;
        double mx = nt ? x1 / nt : 0, var = nt > 1 ? (x2 - nt * mx * mx) / (nt - 1) : 0;
        double tail = t; /* no death in the tail: t* is a lower bound */
        if (nt && var > SVC_KM_CV * SVC_KM_CV * mx * mx) {
            /* The downstream part of lives past t*: from the deaths past t*
             * when there are enough, since calls grow with the life. */
            double dn = deaths, dd = down;
            if (nd - i >= SVC_KM_DOWN) {
                dn = dd = 0;
                for (uint32_t j = i; j < nd; j++) {
                    dn += v[j].w;
                    dd += v[j].w * (double)(v[j].d - v[j].v);
                }
            }
            tail = t + expo / deaths - dd / dn;
        } else if (nt) {
            /* The deaths of the tail are (nearly) equal: not an exponential
             * tail but a demand near-constant there, which the tail's deaths
             * show as it is. */
            uint32_t from = i < nd ? i : ih;
            double sw = 0, sv = 0;
            for (uint32_t j = from; j < nd; j++) {
                sw += v[j].w;
                sv += v[j].w * (double)v[j].v;
            }
            tail = sv / sw;
        }
        mean += s * tail;
    }
    *mean_out = mean;
}

/* ---------------------------------------------------------- the level k ---
 *
 * The requests alone at arrival are few on a busy server with many cores:
 * db8exp seed 107 of the N* sweep (8 cores, exponential demands of 1 ms)
 * had 186 of them, 58 deaths, and the estimate read 0.82-1.30 ms over four
 * seeds (N* -18.5 ... +25.1%). But while at most c requests are in flight
 * on c cores, each runs on its own core at full speed as a request alone
 * does: the same survival analysis holds at level k <= c, over the requests
 * that arrived with at most k in flight (themselves included), each a death
 * at its departure or censored at the first moment more than k were in
 * flight at its server (a request waiting on a call counts in flight: that
 * only censors earlier). Level 1 is the estimate above, unchanged. Past c,
 * lives share cores and the estimate rises; on one core level 2 already
 * doubles lives that overlap. The level is chosen per server and period,
 * over all its classes together (a mixture, whose mean shows the same
 * rise), as the largest k <= SVC_KMAX whose estimate S_k is not above any
 * S_j, j < k, with at least a quarter of its deaths D (D_j >= D_k / 4: the
 * levels below that are much noisier), by more than SVC_K_TOL + SVC_K_Z x
 * cv_j / sqrt(D_j) (cv_j: the coefficient of variation of level j's
 * deaths; a constant demand has none, so any rise stops it); each of
 * those D_j at least SVC_K_MIN (with fewer, a rise the size of the noise
 * would pass: level 1 stays). One-sided: the levels below c only scatter
 * (level 1 read -23.5 ... +28% on M/M/4 at 95% busy, test_service), the
 * levels past c only rise; and compared with every such level below, not
 * only the next, a slow rise past c (+2% a level on M/M/8 at 90%) cannot
 * add up. A class's cell takes the smallest level of the servers its
 * requests ran on at levels >= 2 (1 when none, or when one of them had a
 * call subtracted from a life: see km_cell). The lead's prototype on
 * db8exp seed 107 (kmk.py, the truth's lives): level 1 0.755 ms, 2 0.942,
 * 3 1.068, 4 1.057, 6 1.028, 8 1.020 (18 270 deaths), 10 1.026, 12 1.047.
 * Tried and rejected: the largest k whose estimate agrees with every
 * level's below within 3 sqrt(1/D_j - 1/D_k) (the low levels' error is
 * several times 1/sqrt(D): M/M/2 at 90%, level 1 +24.8% with 3566 deaths;
 * M/M/4 at 95%, levels 1-2 -28% and -17% with 244 and 1523 deaths), and
 * the first level from the top that does not rise above the one below
 * (on a light server the top levels hold every life and barely differ:
 * +43.7% on M/M/1 at 30%). */
#define SVC_K_TOL 0.01
#define SVC_K_Z 2.0
#define SVC_K_MIN 400

/* Relative noise of an estimate over the deaths v: that of a mean of their
 * samples (their coefficient of variation over the square root of their
 * weight). */
static double wsample_noise(const struct wsample *v, uint32_t n)
{
    double sw = 0, s1 = 0, s2 = 0;
    for (uint32_t x = 0; x < n; x++) {
        double y = (double)v[x].v;
        sw += v[x].w;
        s1 += v[x].w * y;
        s2 += v[x].w * y * y;
    }
    double m = sw > 0 ? s1 / sw : 0;
    double cv = m > 0 ? sqrt(fmax(0, s2 / sw - m * m)) / m : 0;
    return cv / sqrt(fmax(sw, 1));
}

static int cmp_wsample(const void *a, const void *b)
{
    const struct wsample *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return (x->w > y->w) - (x->w < y->w);
}

static bool ws_less(const struct wsample *x, const struct wsample *y)
{
    if (x->d != y->d)
        return x->d < y->d;
    if (x->v != y->v)
        return x->v < y->v;
    return x->w < y->w;
}

/* Sorts a[0..n) as qsort with cmp_wsample would: that order is total on
 * all three members, so any correct sort gives the same array. A merge
 * sort with the comparison inlined (runs of 16 by insertion first) takes
 * about half of qsort's time on the levels' reservoirs (finish: 16 of them
 * a cell, 4096 each when full). tmp: scratch of n, grown as needed. */
static int ws_sort(struct wsample *a, size_t n, struct wsample **tmp, size_t *ctmp)
{
    enum { RUN = 16 };
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = TB_MIN(lo + RUN, n);
        for (size_t i = lo + 1; i < hi; i++) {
            struct wsample x = a[i];
            size_t j = i;
            for (; j > lo && ws_less(&x, &a[j - 1]); j--)
                a[j] = a[j - 1];
            a[j] = x;
        }
    }
    if (n <= RUN)
        return 0;
    if (tb_grow(tmp, ctmp, n, sizeof **tmp))
        return TB_E_NOMEM;
    struct wsample *from = a, *to = *tmp;
    for (size_t w = RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = TB_MIN(lo + w, n), hi = TB_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                to[k++] = ws_less(&from[j], &from[i]) ? from[j++] : from[i++];
            while (i < mid)
                to[k++] = from[i++];
            while (j < hi)
                to[k++] = from[j++];
        }
        struct wsample *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, n * sizeof *a);
    return 0;
}

/* The estimate of cell c at level k: its deaths at levels <= k (a class's
 * cell: the isolated samples and lv[2..k]; a server's: lv[1..k]), each
 * weighted by its reservoir's scale, sorted by life into *buf; its cuts at
 * level k. */
static int km_level(struct cell *c, uint32_t k, bool server_cell, struct wsample **buf,
                    size_t *cap, double *mean, double *alone, uint64_t *seen, uint32_t *kept,
                    double *se)
{
    size_t total = server_cell ? 0 : c->iso.n;
    for (uint32_t m = 1; m <= k; m++)
        total += c->lv[m].n;
    if (tb_grow(buf, cap, total + 1, sizeof **buf))
        return TB_E_NOMEM;
    uint32_t n = 0;
    if (!server_cell && c->iso.n) {
        const struct isample *iv = c->iso.v;
        double si = (double)c->iso.seen / c->iso.n;
        for (uint32_t i = 0; i < c->iso.n; i++)
            (*buf)[n++] = (struct wsample){iv[i].v, iv[i].d, si};
    }
    for (uint32_t m = 1; m <= k; m++) {
        const struct msample *mv = c->lv[m].v;
        double sm = c->lv[m].n ? (double)c->lv[m].seen / c->lv[m].n : 0;
        for (uint32_t i = 0; i < c->lv[m].n; i++)
            (*buf)[n++] = (struct wsample){mv[i].v, mv[i].d, sm};
    }
    struct wsample *tmp = NULL;
    size_t ctmp = 0;
    int rc = ws_sort(*buf, n, &tmp, &ctmp);
    free(tmp);
    if (rc)
        return rc;
    uint64_t sn = server_cell ? 0 : c->iso.seen;
    for (uint32_t m = 1; m <= k; m++)
        sn += c->mseen[m];
    *seen = sn;
    *kept = n;
    km_run(*buf, n, &c->cb[k], mean, alone);
    if (se)
        *se = wsample_noise(*buf, n);
    return 0;
}

/* The level of a server's cell: the largest k whose estimate agrees with
 * every level's below. */
static int km_choose(struct cell *c, uint32_t levels, struct wsample **buf, size_t *cap)
{
    double S[SVC_KMAX + 1], D[SVC_KMAX + 1], V[SVC_KMAX + 1];
    /* The deaths at levels <= k, kept sorted: each level's own sorted once
     * and merged in (one sort per level, not per level and k). */
    struct wsample *run = NULL, *tmp = NULL, *tmp2 = NULL;
    size_t crun = 0, ctmp = 0, ctmp2 = 0;
    uint32_t nrun = 0;
    uint64_t seen = 0;
    int rc = 0;
    c->km_k = 1;
    for (uint32_t k = 1; k <= levels; k++) {
        const struct reservoir *r = &c->lv[k];
        const struct msample *mv = r->v;
        double sm = r->n ? (double)r->seen / r->n : 0;
        if (tb_grow(buf, cap, (size_t)r->n + 1, sizeof **buf) ||
            tb_grow(&tmp, &ctmp, (size_t)nrun + r->n + 1, sizeof *tmp)) {
            rc = TB_E_NOMEM;
            goto out;
        }
        for (uint32_t i = 0; i < r->n; i++)
            (*buf)[i] = (struct wsample){mv[i].v, mv[i].d, sm};
        if ((rc = ws_sort(*buf, r->n, &tmp2, &ctmp2)))
            goto out;
        uint32_t i = 0, j = 0, n = 0;
        while (i < nrun || j < r->n)
            tmp[n++] = j == r->n || (i < nrun && cmp_wsample(&run[i], &(*buf)[j]) <= 0)
                           ? run[i++]
                           : (*buf)[j++];
        struct wsample *t = run;
        size_t ct = crun;
        run = tmp;
        crun = ctmp;
        tmp = t;
        ctmp = ct;
        nrun = n;
        seen += c->mseen[k];
        double alone;
        km_run(run, nrun, &c->cb[k], &S[k], &alone);
        V[k] = wsample_noise(run, nrun);
        D[k] = nrun ? (double)seen : 0;
    }
    /* The largest level whose estimate is not above that of any level
     * below it with at least a quarter of its deaths (by more than
     * SVC_K_TOL). */
    for (uint32_t k = levels; k >= 2; k--) {
        if (!(D[k] > 0 && S[k] > 0))
            continue;
        bool ok = true, any = false;
        for (uint32_t j = 1; j < k && ok; j++)
            if (D[j] * 4 >= D[k] && S[j] > 0) {
                any = true;
                ok = D[j] >= SVC_K_MIN && S[k] <= S[j] * (1 + SVC_K_TOL + SVC_K_Z * V[j]);
            }
        ok = ok && any;
        if (ok) {
            c->km_k = k;
            break;
        }
    }
out:
    free(run);
    free(tmp);
    free(tmp2);
    return rc;
}

/* The estimate of a class's cell at the smallest level of its servers'
 * (scells chosen): km_k, km_mean, km_alone, km_seen, km_kept. */
static int km_cell(struct tb_svcest *e, struct cell *c, struct wsample **buf, size_t *cap)
{
    uint32_t k = SVC_KMAX;
    for (uint32_t i = 0; i < c->nsrvs; i++) {
        void *v;
        kp_get(&e->scells, c->srvs[i] + 1, c->k.period, false, &v);
        k = TB_MIN(k, v ? ((struct cell *)v)->km_k : 1u);
        /* A server whose lives wait on calls: the requests in flight are
         * not all computing, so more than its cores may be in flight with
         * no rise to stop the level (appcpu, e2e_nstar_app: N* -8.8% and
         * -10.4% on seeds 1 and 3 at the chosen level, +5.4% and -1.0% at
         * level 1). It keeps level 1, as the work done leaves it alone. */
        if (e->srv[c->srvs[i]].called)
            k = 1;
    }
    if (!c->nsrvs)
        k = 1;
    if (c->iso.n)
        qsort(c->iso.v, c->iso.n, sizeof(struct isample), cmp_isample);
    c->km_k = k;
    return km_level(c, k, false, buf, cap, &c->km_mean, &c->km_alone, &c->km_seen, &c->km_kept,
                    NULL);
}

static int64_t km_round(double x)
{
    return x > 0 ? (int64_t)llround(x) : 0;
}

/* Per class, the estimate over every period (the periods' estimates
 * weighted by their requests alone at arrival), for the classes with at
 * least min_isolated isolated samples (sorted by class). */
struct pooled {
    uint32_t class_id;
    int64_t mean;
    uint64_t seen;
};

static int cmp_cellp(const void *a, const void *b)
{
    const struct cell *x = *(const struct cell *const *)a, *y = *(const struct cell *const *)b;
    if (x->k.key != y->k.key)
        return x->k.key < y->k.key ? -1 : 1;
    return (x->k.period > y->k.period) - (x->k.period < y->k.period);
}

static int cmp_pooled(const void *a, const void *b)
{
    const struct pooled *x = a, *y = b;
    return (x->class_id > y->class_id) - (x->class_id < y->class_id);
}

static const struct pooled *find_pooled(const struct pooled *p, size_t n, uint32_t class_id)
{
    struct pooled key = {.class_id = class_id};
    return n ? bsearch(&key, p, n, sizeof *p, cmp_pooled) : NULL;
}

/* Expects every cell's km_cell done. */
static int pool_isolated(struct tb_svcest *e, struct pooled **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (!e->cells.n)
        return 0;
    const struct cell **cp = malloc(e->cells.n * sizeof *cp);
    struct pooled *p = malloc(e->cells.n * sizeof *p);
    if (!cp || !p) {
        free(cp);
        free(p);
        return TB_E_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < e->cells.cap; i++)
        if (cell_at(e, i)->k.key)
            cp[k++] = cell_at(e, i);
    qsort(cp, k, sizeof *cp, cmp_cellp);
    size_t np = 0;
    for (size_t i = 0; i < k;) {
        size_t j = i, stored = 0;
        uint64_t seen = 0;
        for (; j < k && cp[j]->k.key == cp[i]->k.key; j++) {
            seen += cp[j]->km_seen;
            stored += cp[j]->km_kept;
        }
        if (seen >= e->o.min_isolated && stored) {
            double sw = 0, swm = 0;
            for (size_t x = i; x < j; x++)
                if (cp[x]->km_kept) {
                    sw += cp[x]->km_alone;
                    swm += cp[x]->km_alone * cp[x]->km_mean;
                }
            p[np++] = (struct pooled){cp[i]->k.key, km_round(swm / sw), seen};
        }
        i = j;
    }
    free(cp);
    *out = p;
    *nout = np;
    return 0;
}

/* ------------------------------------------------------- the work done --- */

/* The product-limit estimate rests on the requests alone at arrival, and a
 * server that is rarely idle has few: steady seed 115 of the N* sweep (93%
 * busy on 2 cores) had 569 of 37 000, most of the mean lay in the tail, and
 * the tail's hazard from a few dozen deaths read 1.18 ms for 1 ms (N*
 * +16%). A busy server, though, shows its demands in another way. While m
 * requests are in flight on c cores, min(m, c) cores work (a request alone
 * runs at full speed: the estimator's assumption above; queued requests wait
 * for a core, or share the cores), so the work done in a period is
 *
 *     W(c) = Σ_m T_m · min(m, c),   T_m = the time with m requests in flight,
 *
 * and it equals the sum of the demands of the requests it served: exactly
 * busy time for one core, whatever the demands' distribution. c is unknown,
 * but each c gives a candidate total, W(1) < W(2) < ..., and the candidates
 * lie far apart exactly when the server is busy (W(c+1) − W(c) is the time
 * with more than c in flight): on the 93% busy 2-core server 0.52, 1.00,
 * 1.46 ms per request, where the product-limit estimate is noisy; on a light
 * server they crowd together, where it is exact. So per server and period,
 * with K = Σ_class requests × its estimate (the product-limit total):
 *
 * - the candidate nearest to K in ratio is taken for K when it is within
 *   SVC_LAT_TOL of it and both its neighbours lie ≥ SVC_LAT_GAP from it
 *   in log (22%): the server held more than that c long enough (else W(c)
 *   is the requests' lives, queueing included, not their demands), and
 *   the candidates are far apart compared to K's noise. Snapping moves an
 *   estimate off by e from the true candidate to a neighbour g away only
 *   when e > g/2; so it at most doubles an error that was already over
 *   11% (py4 seed 105 of the sweep, 4 FCFS workers, candidates 9% apart:
 *   1.065 ms snapped to 1.106 before this rule; c = 4 gives 1.002);
 * - else K stands, as it does when the two agree within SVC_LAT_AGREE: the
 *   periods' edges cut lives (a period's time is counted where it is
 *   spent, its requests where they arrive), and a constant demand, which
 *   the product-limit estimate gets exactly, must stay exact.
 *
 * Per period, every estimated class is scaled by Σ taken / Σ K over the
 * servers (classes keep their ratios). SVC_LAT_TOL bounds the harm when
 * the truth is no candidate (a server whose lives are not all core time). Not
 * compared: a server whose requests have calls subtracted (their lives
 * wait on other tiers), or with unclassified requests (work of unknown
 * demands), and classes without an estimate or given one (overrides are
 * subtracted from W as known work). whatif's trees (analysis/critpath.c)
 * use the same conservation to find cores; there c is the one that fits
 * the mean of the requests alone at arrival within 1% (else the largest),
 * and the result is per server, not per class and period. */
#define SVC_LAT_TOL 0.223 /* ln 1.25 */
#define SVC_LAT_GAP 0.2
#define SVC_LAT_AGREE 0.01

/* The candidate taken for k, the product-limit total, from tn (the time with
 * m in flight, m = 1 .. SVC_OCC_K) less `known`, the work of the given
 * classes; k itself when none qualifies. */
static double lattice_pick(const double *tn, double known, double k)
{
    double above[SVC_OCC_K + 2];
    above[SVC_OCC_K + 1] = 0;
    for (int m = SVC_OCC_K; m >= 1; m--)
        above[m] = above[m + 1] + tn[m];
    double w = -known, best = 0, bestd = INFINITY;
    int bc = 0;
    for (int c = 1; c <= SVC_OCC_K; c++) {
        w += above[c];
        if (w <= 0)
            continue;
        double d = fabs(log(w / k));
        if (d < bestd) {
            bestd = d;
            best = w;
            bc = c;
        }
    }
    if (!bc || bc == SVC_OCC_K || bestd > SVC_LAT_TOL || bestd < SVC_LAT_AGREE)
        return k;
    /* Both neighbours far: W(c + 1) = W(c) + the time with more than c in
     * flight, W(c - 1) = W(c) - the time with c or more. */
    if (log((best + above[bc + 1]) / best) < SVC_LAT_GAP ||
        (bc > 1 && log(best / (best - above[bc])) < SVC_LAT_GAP))
        return k;
    return best;
}

struct lat_period {
    int64_t period;
    double taken, k;
};

static struct tb_class_service *find_row(struct tb_class_service *rows, size_t n, uint32_t cls,
                                         int64_t period)
{
    struct tb_class_service key = {.class_id = cls, .period_start_ns = period};
    return n ? bsearch(&key, rows, n, sizeof *rows, tb_class_service_cmp) : NULL;
}

/* Scales the estimated rows (sorted) of each period by the work done. */
static int lattice_scale(struct tb_svcest *e, struct tb_class_service *rows, size_t n)
{
    size_t no = e->occ.n;
    if (!no || !n)
        return 0;
    struct occ **by = calloc(no + 1, sizeof *by);
    double *k = calloc(no + 1, sizeof *k), *known = calloc(no + 1, sizeof *known);
    bool *bad = calloc(no + 1, sizeof *bad);
    struct lat_period *lp = calloc(no, sizeof *lp);
    size_t nlp = 0;
    int rc = 0;
    if (!by || !k || !known || !bad || !lp) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < e->occ.cap; i++) {
        struct occ *o = (struct occ *)(void *)kp_at(&e->occ, i);
        if (o->k.key && o->idx <= no)
            by[o->idx] = o;
    }
    for (size_t i = 0; i < e->ccount.cap; i++) {
        const struct ccount *c = (const struct ccount *)(const void *)kp_at(&e->ccount, i);
        if (!c->k.key || c->k.period < 1 || (size_t)c->k.period > no || !by[c->k.period])
            continue;
        size_t x = (size_t)c->k.period;
        const struct tb_class_service *r = find_row(rows, n, c->k.key, by[x]->k.period);
        if (!r)
            bad[x] = true;
        else if (r->method == TB_SVC_OVERRIDE || r->method == TB_SVC_CALIBRATED)
            known[x] += (double)c->n * (double)r->service_ns;
        else
            k[x] += (double)c->n * (double)r->service_ns;
    }
    for (size_t x = 1; x <= no; x++) {
        const struct occ *o = by[x];
        if (!o || !o->requests || k[x] <= 0)
            continue;
        const struct srv *s = &e->srv[o->k.key - 1];
        double taken = k[x];
        if (!bad[x] && !s->called && !s->unclassified)
            taken = lattice_pick(o->tn, known[x], k[x]);
        size_t j = 0;
        while (j < nlp && lp[j].period != o->k.period)
            j++;
        if (j == nlp)
            lp[nlp++] = (struct lat_period){.period = o->k.period};
        lp[j].taken += taken;
        lp[j].k += k[x];
    }
    for (size_t i = 0; i < n; i++) {
        if (rows[i].method != TB_SVC_ISOLATED && rows[i].method != TB_SVC_QUANTILE)
            continue;
        for (size_t j = 0; j < nlp; j++)
            if (lp[j].period == rows[i].period_start_ns && lp[j].k > 0 &&
                lp[j].taken != lp[j].k)
                rows[i].service_ns = km_round((double)rows[i].service_ns * lp[j].taken / lp[j].k);
    }
out:
    free(by);
    free(k);
    free(known);
    free(bad);
    free(lp);
    return rc;
}

int tb_svcest_finish(struct tb_svcest *e, const struct tb_svc_override *ov, size_t nov,
                     struct tb_class_service **out, size_t *nout, int64_t *work_unit_ns)
{
    if (!e || !out || !nout || (nov && !ov))
        return TB_E_INVAL;
    int rc = drain(e, INT64_MAX);
    for (size_t i = 0; !rc && i < e->nsrv; i++) {
        if (e->srv[i].has_direct) {
            e->srv[i].has_direct = false;
            rc = settle(e, &e->srv[i].direct);
        }
        if (!rc && e->srv[i].seen && e->srv[i].oh.n)
            rc = occ_to(e, &e->srv[i], INT64_MAX);
    }
    if (!rc)
        rc = tdrain(e, INT64_MAX);
    if (rc)
        return rc;
    struct wsample *kbuf = NULL;
    size_t kcap = 0;
    for (size_t i = 0; !rc && i < e->scells.cap; i++) {
        struct cell *c = (struct cell *)(void *)kp_at(&e->scells, i);
        if (c->k.key)
            rc = km_choose(c, e->o.levels, &kbuf, &kcap);
    }
    for (size_t i = 0; !rc && i < e->cells.cap; i++) {
        struct cell *c = cell_at(e, i);
        if (c->k.key)
            rc = km_cell(e, c, &kbuf, &kcap);
    }
    free(kbuf);
    if (rc)
        return rc;
    struct pooled *pool = NULL;
    size_t npool = 0;
    struct tb_class_service *rows = calloc(e->cells.n ? e->cells.n : 1, sizeof *rows);
    int64_t *cls_s = calloc(e->cells.n ? e->cells.n : 1, sizeof *cls_s);
    double *cls_w = calloc(e->cells.n ? e->cells.n : 1, sizeof *cls_w);
    int64_t *tmp_s = calloc(e->cells.n ? e->cells.n : 1, sizeof *tmp_s);
    double *tmp_w = calloc(e->cells.n ? e->cells.n : 1, sizeof *tmp_w);
    if (!rows || !cls_s || !cls_w || !tmp_s || !tmp_w) {
        rc = TB_E_NOMEM;
        goto out;
    }
    if ((rc = pool_isolated(e, &pool, &npool)))
        goto out;
    size_t n = 0;
    for (size_t i = 0; i < e->cells.cap; i++) {
        struct cell *c = cell_at(e, i);
        if (!c->k.key)
            continue;
        struct tb_class_service *s = &rows[n];
        const struct pooled *pc = find_pooled(pool, npool, c->k.key);
        s->class_id = c->k.key;
        s->tier = c->tier;
        s->period_start_ns = c->k.period;
        s->requests = c->requests;
        const struct tb_svc_override *o = find_ov(ov, nov, c->k.key);
        if (o) {
            s->service_ns = o->service_ns;
            s->method = o->method == TB_SVC_CALIBRATED ? TB_SVC_CALIBRATED : TB_SVC_OVERRIDE;
            s->samples = 0;
        } else if (c->km_seen >= e->o.min_isolated && c->km_kept) {
            s->service_ns = km_round(c->km_mean);
            s->method = TB_SVC_ISOLATED;
            s->samples = (uint32_t)TB_MIN(c->km_seen, (uint64_t)UINT32_MAX);
        } else if (pc) {
            /* Too few isolated requests in this period — typically one of
             * sustained overload, where nothing runs alone — but enough over
             * the whole range: their estimate. The low quantile of this
             * period's samples would be all queueing. */
            s->service_ns = pc->mean;
            s->method = TB_SVC_ISOLATED;
            s->samples = (uint32_t)TB_MIN(pc->seen, (uint64_t)UINT32_MAX);
        } else if (c->all.n) {
            qsort(c->all.v, c->all.n, sizeof(int64_t), tb_cmp_i64);
            s->service_ns = tb_quantile_i64(c->all.v, c->all.n, e->o.fallback_q);
            s->method = TB_SVC_QUANTILE;
            s->samples = (uint32_t)TB_MIN(c->all.seen, (uint64_t)UINT32_MAX);
        } else {
            continue; /* no usable sample: the units lookup falls back */
        }
        n++;
    }
    qsort(rows, n, sizeof *rows, tb_class_service_cmp);
    if ((rc = lattice_scale(e, rows, n)))
        goto out;
    /* One work unit for the whole range, so that normalized throughputs of
     * different periods stay comparable (DESIGN.md "Work unit"). */
    size_t ncls = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && rows[j].class_id == rows[i].class_id)
            j++;
        cls_s[ncls] = class_overall(&rows[i], j - i, tmp_s, tmp_w);
        cls_w[ncls] = 0;
        for (size_t k = i; k < j; k++)
            cls_w[ncls] += rows[k].requests;
        ncls++;
        i = j;
    }
    int64_t unit = 0;
    if (ncls) {
        rc = tb_work_unit(cls_s, cls_w, ncls, e->o.wu_tolerance, e->o.wu_floor_ns,
                          e->o.wu_min_share, &unit);
        if (rc)
            goto out;
    }
    if ((rc = tb_work_units_assign(rows, n, unit)))
        goto out;
    if (work_unit_ns)
        *work_unit_ns = unit;
    *out = rows;
    *nout = n;
    rows = NULL;
out:
    free(pool);
    free(rows);
    free(cls_s);
    free(cls_w);
    free(tmp_s);
    free(tmp_w);
    return rc;
}

/* ----------------------------------------------------------- array form --- */

struct ord {
    int64_t t;
    uint32_t idx;
    bool down;
};

static int cmp_ord(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    /* Calls after the requests that arrive at the same instant: neither
     * order changes a measure, this one is merely stable. */
    if (x->down != y->down)
        return x->down ? 1 : -1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int tb_service_estimate(const struct tb_request *req, size_t nreq, const struct tb_request *down,
                        size_t ndown, const struct tb_svc_host *hosts, size_t nhosts,
                        const struct tb_svc_override *ov, size_t nov, const struct tb_svc_opts *o,
                        struct tb_class_service **out, size_t *nout, int64_t *work_unit_ns)
{
    if ((!req && nreq) || (!down && ndown) || !out || !nout || nreq > UINT32_MAX ||
        ndown > UINT32_MAX)
        return TB_E_INVAL;
    struct ord *ord = malloc((nreq + ndown + 1) * sizeof *ord);
    if (!ord)
        return TB_E_NOMEM;
    for (size_t i = 0; i < nreq; i++)
        ord[i] = (struct ord){req[i].arrival_ns, (uint32_t)i, false};
    for (size_t i = 0; i < ndown; i++)
        ord[nreq + i] = (struct ord){down[i].arrival_ns, (uint32_t)i, true};
    qsort(ord, nreq + ndown, sizeof *ord, cmp_ord);
    struct tb_svcest *e;
    int rc = tb_svcest_new(&e, hosts, nhosts, o);
    for (size_t i = 0; !rc && i < nreq + ndown; i++)
        rc = ord[i].down ? tb_svcest_add_down(e, &down[ord[i].idx])
                         : tb_svcest_add(e, &req[ord[i].idx]);
    free(ord);
    if (!rc)
        rc = tb_svcest_finish(e, ov, nov, out, nout, work_unit_ns);
    tb_svcest_free(e);
    return rc;
}
