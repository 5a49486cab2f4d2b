/* SPDX-License-Identifier: MIT */
/* service.c — the service-time estimator: per-class service times from
 * isolated requests (with downstream calls subtracted), weighted by the
 * inverse of their chance of isolation, re-estimated per period, and the
 * work unit over them. */
#include "stats.h"


#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void tb_svc_opts_default(struct tb_svc_opts *o)
{
    o->period_ns = 60 * TB_NS_PER_SEC;
    o->min_isolated = 20;
    o->fallback_q = 0.10;
    o->reservoir = 4096;
    o->wu_tolerance = 0.12;
    o->wu_floor_ns = 100 * 1000;
    o->wu_min_share = 0.01;
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
 * whole life D and its server. Isolation depended on D, so its weight
 * (service_weight) needs D and the server's arrival hazard of its period,
 * which is only known once that period is over. */
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
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->server > y->server) - (x->server < y->server);
}

/* ------------------------------------------------ (class, period) table --- */

/* The key of an entry of a (key, period) table (below), its first member;
 * key 0 marks an empty slot. */
struct kp {
    uint32_t key;
    int64_t period;
};

struct cell {
    struct kp k;       /* class id, period */
    uint32_t tier;
    uint32_t requests;
    struct reservoir iso, all;
};

/* One in-flight request of the analysed tier, kept until the stream passes
 * its departure (only then are all the calls made during its life known). */
struct pending {
    int64_t a, d;
    uint32_t server, class_id, tier;
    bool overlapped; /* another request of its server shared part of its life */
    uint32_t heap_pos;
};

struct srv {
    uint32_t id;
    int64_t maxdep;    /* latest departure of its requests so far */
    int32_t last;      /* pending slot of its latest arrival, -1 = none */
    bool seen;
    bool has_direct;   /* without hosts: its latest request, not yet settled */
    struct pending direct;
    /* The survival of isolation (see service_weight): its latest arrival,
     * waiting for the next one, and the counts of the period of its
     * arrivals, moved to the table when its arrivals reach the next period. */
    bool prev_open, prev_idle;
    int64_t prev_a, prev_d;
    bool hz_open;
    int64_t hz_period;
    uint32_t *hz_cnt; /* SVC_NB events, then SVC_NB censored */
};

/* Time since an arrival, in bins: [0, 1 us), then 4 per octave up to 2^38 ns
 * (275 s), the last one open. */
enum { SVC_OCT0 = 10, SVC_NOCT = 28, SVC_NB = 1 + SVC_NOCT * 4 };

static int svc_bin(int64_t x)
{
    if (x < (INT64_C(1) << SVC_OCT0))
        return 0;
    int o = 63 - __builtin_clzll((unsigned long long)x);
    if (o >= SVC_OCT0 + SVC_NOCT)
        return SVC_NB - 1;
    return 1 + (o - SVC_OCT0) * 4 + (int)((x >> (o - 2)) & 3);
}

static int64_t svc_bin_lo(int k)
{
    if (k == 0)
        return 0;
    int o = SVC_OCT0 + (k - 1) / 4, sub = (k - 1) % 4;
    return (INT64_C(1) << o) + (int64_t)sub * (INT64_C(1) << (o - 2));
}

/* Survival of isolation of one (server, period): the counts, then at finish
 * the cumulative hazard at each bin's upper edge. */
struct hazard {
    struct kp k;     /* server id + 1 (ids start at 0), period */
    uint32_t *cnt;   /* SVC_NB events, then SVC_NB censored */
    double *cum;     /* SVC_NB, computed by hz_finish */
};

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
    struct kptab hz;    /* struct hazard by (server + 1, period) */
    /* servers by id (dense ids) */
    struct srv *srv;
    size_t nsrv;
    /* call unions by group: index 0 = tier-wide hosts, 1 + i = server id i */
    struct ivlist *iv;
    size_t niv;
    size_t iv_total, iv_prune_at;
    /* pending pool + min-heap on departure */
    struct pending *pool;
    int32_t *free_slots;
    size_t npool, nfree;
    int32_t *heap;
    size_t nheap;
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

static struct cell *cell_at(const struct tb_svcest *e, size_t i)
{
    return (struct cell *)(void *)kp_at(&e->cells, i);
}

static struct hazard *hz_at(const struct tb_svcest *e, size_t i)
{
    return (struct hazard *)(void *)kp_at(&e->hz, i);
}

/* Server 0 is a valid id for the estimator (it only indexes servers), so the
 * hazard table keys servers as id + 1. */
static int hz_slot(struct tb_svcest *e, uint32_t server, int64_t period, bool create,
                   struct hazard **out)
{
    void *v;
    int rc = kp_get(&e->hz, server + 1, period, create, &v);
    *out = v;
    return rc;
}

/* Moves a server's running counts into the table. */
static int hz_flush(struct tb_svcest *e, struct srv *s)
{
    if (!s->hz_open)
        return 0;
    struct hazard *h;
    int rc = hz_slot(e, s->id, s->hz_period, true, &h);
    if (rc)
        return rc;
    if (!h->cnt) {
        h->cnt = calloc(2 * SVC_NB, sizeof *h->cnt);
        if (!h->cnt)
            return TB_E_NOMEM;
    }
    for (int k = 0; k < 2 * SVC_NB; k++)
        h->cnt[k] += s->hz_cnt[k];
    memset(s->hz_cnt, 0, 2 * SVC_NB * sizeof *s->hz_cnt);
    s->hz_open = false;
    return 0;
}

/* Counts the fate of a server's previous arrival when it was alone at
 * arrival: cut at G by the next arrival (an event), or still alone at its
 * departure D (censored there: it is an isolated sample). `next` =
 * INT64_MAX at the end of the stream. */
static void hz_observe(struct srv *s, int64_t next)
{
    if (!s->prev_open)
        return;
    s->prev_open = false;
    if (!s->prev_idle)
        return;
    int64_t life = s->prev_d - s->prev_a;
    if (next < s->prev_d)
        s->hz_cnt[svc_bin(next - s->prev_a)]++;
    else
        s->hz_cnt[SVC_NB + svc_bin(life)]++;
}

/* Life-table (actuarial Kaplan-Meier) estimate of the cumulative hazard of
 * being cut: in bin k, q = events / (at risk - censored / 2). */
static int hz_finish(struct hazard *h)
{
    h->cum = malloc(SVC_NB * sizeof *h->cum);
    if (!h->cum)
        return TB_E_NOMEM;
    double risk = 0, cum = 0;
    for (int k = 0; k < 2 * SVC_NB; k++)
        risk += h->cnt[k];
    for (int k = 0; k < SVC_NB; k++) {
        double d = h->cnt[k], c = h->cnt[SVC_NB + k], n = risk - c / 2;
        if (d > 0)
            cum += d >= n ? INFINITY : -log1p(-d / n);
        h->cum[k] = cum;
        risk -= d + c;
    }
    return 0;
}

/* ------------------------------------------------------- heap of pending --- */

static bool heap_less(const struct tb_svcest *e, size_t i, size_t j)
{
    const struct pending *a = &e->pool[e->heap[i]], *b = &e->pool[e->heap[j]];
    return a->d < b->d;
}

static void heap_swap(struct tb_svcest *e, size_t i, size_t j)
{
    int32_t t = e->heap[i];
    e->heap[i] = e->heap[j];
    e->heap[j] = t;
    e->pool[e->heap[i]].heap_pos = (uint32_t)i;
    e->pool[e->heap[j]].heap_pos = (uint32_t)j;
}

static void heap_up(struct tb_svcest *e, size_t i)
{
    while (i && heap_less(e, i, (i - 1) / 2)) {
        heap_swap(e, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(struct tb_svcest *e, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nheap && heap_less(e, l, m))
            m = l;
        if (r < e->nheap && heap_less(e, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(e, i, m);
        i = m;
    }
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
    for (size_t k = 0; k < e->nheap; k++)
        keep = TB_MIN(keep, e->pool[e->heap[k]].a);
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
    e->hz.elem = sizeof(struct hazard);
    if (e->o.period_ns < 0 || e->o.fallback_q < 0 || e->o.fallback_q > 1 || !e->o.reservoir) {
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

static int64_t period_of(const struct tb_svcest *e, int64_t t)
{
    if (e->o.period_ns <= 0)
        return e->first;
    int64_t p;
    if (tb_win_floor(t, e->o.period_ns, &p))
        return INT64_MIN;
    return p;
}

/* Measures one request whose life is over and whose calls are all known. */
static int settle(struct tb_svcest *e, struct pending *p)
{
    struct ivlist *own = NULL, *shared = e->niv ? &e->iv[0] : NULL;
    if ((size_t)p->server + 1 < e->niv)
        own = &e->iv[p->server + 1];
    int64_t sample = (p->d - p->a) - iv_busy(own, shared, p->a, p->d);
    struct cell *c;
    void *v;
    int rc = kp_get(&e->cells, p->class_id, period_of(e, p->a), true, &v);
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
    while (e->nheap && e->pool[e->heap[0]].d <= t) {
        int32_t slot = e->heap[0];
        struct pending *p = &e->pool[slot];
        int rc = settle(e, p);
        if (rc)
            return rc;
        struct srv *s = &e->srv[p->server];
        if (s->last == slot)
            s->last = -1;
        e->heap[0] = e->heap[--e->nheap];
        if (e->nheap) {
            e->pool[e->heap[0]].heap_pos = 0;
            heap_down(e, 0);
        }
        e->free_slots[e->nfree++] = slot;
    }
    return 0;
}

/* Without hosts no call is ever subtracted, so a request's sample is known at
 * once and only its isolation waits, for the next arrival at its server: one
 * request per server is held (in `direct`) instead of every request in flight
 * on the heap. Same results, less work. */
static int add_direct(struct tb_svcest *e, struct srv *s, const struct tb_request *r)
{
    struct pending p = {.a = r->arrival_ns, .d = r->departure_ns, .server = r->server,
                        .class_id = r->class_id, .tier = r->tier};
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
    return rc ? rc : drain(e, t);
}

int tb_svcest_add(struct tb_svcest *e, const struct tb_request *r)
{
    if (!e || !r)
        return TB_E_INVAL;
    if (r->departure_ns < r->arrival_ns || r->class_id == 0)
        return 0;
    int rc = catch_up(e, r->arrival_ns);
    if (rc)
        return rc;
    struct srv *s;
    if ((rc = srv_get(e, r->server, &s)))
        return rc;
    /* The survival of isolation: this arrival settles the fate of the
     * previous one, counted in the period of that one's arrival (the
     * server's running period until this arrival moves it on). */
    if (!s->hz_cnt && !(s->hz_cnt = calloc(2 * SVC_NB, sizeof *s->hz_cnt)))
        return TB_E_NOMEM;
    hz_observe(s, r->arrival_ns);
    int64_t per = period_of(e, r->arrival_ns);
    if (s->hz_open && s->hz_period != per && (rc = hz_flush(e, s)))
        return rc;
    s->hz_open = true;
    s->hz_period = per;
    s->prev_open = true;
    s->prev_idle = s->maxdep <= r->arrival_ns;
    s->prev_a = r->arrival_ns;
    s->prev_d = r->departure_ns;
    if (!e->nhosts)
        return add_direct(e, s, r);
    if (!e->nfree) {
        /* The pool, its free list and the heap grow in step. Slots are taken
         * lowest first, and only once all are in use, so the numbering does
         * not depend on the growth steps. */
        size_t cp = e->npool, cf = e->npool, ch = e->npool;
        if (tb_grow(&e->pool, &cp, e->npool + 1, sizeof *e->pool) ||
            tb_grow(&e->free_slots, &cf, e->npool + 1, sizeof *e->free_slots) ||
            tb_grow(&e->heap, &ch, e->npool + 1, sizeof *e->heap))
            return TB_E_NOMEM;
        size_t n = TB_MIN(cp, TB_MIN(cf, ch));
        for (size_t k = n; k > e->npool; k--)
            e->free_slots[e->nfree++] = (int32_t)(k - 1);
        e->npool = n;
    }
    int32_t slot = e->free_slots[--e->nfree];
    struct pending *p = &e->pool[slot];
    p->a = r->arrival_ns;
    p->d = r->departure_ns;
    p->server = r->server;
    p->class_id = r->class_id;
    p->tier = r->tier;
    /* Isolated = concurrency 1 for the whole life: nothing still in flight at
     * its arrival, and the next arrival at its server (checked when that one
     * comes) not before its departure. Only the previous arrival can be cut
     * by this one, since arrivals come in order. */
    p->overlapped = s->maxdep > r->arrival_ns;
    if (s->last >= 0 && e->pool[s->last].d > r->arrival_ns)
        e->pool[s->last].overlapped = true;
    s->maxdep = TB_MAX(s->maxdep, r->departure_ns);
    s->last = slot;
    e->heap[e->nheap] = slot;
    p->heap_pos = (uint32_t)e->nheap;
    e->nheap++;
    heap_up(e, e->nheap - 1);
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
    for (size_t i = 0; i < e->cells.cap; i++) {
        free(cell_at(e, i)->iso.v);
        free(cell_at(e, i)->all.v);
    }
    for (size_t g = 0; g < e->niv; g++) {
        free(e->iv[g].s);
        free(e->iv[g].e);
    }
    for (size_t i = 0; i < e->hz.cap; i++) {
        free(hz_at(e, i)->cnt);
        free(hz_at(e, i)->cum);
    }
    for (size_t i = 0; i < e->nsrv; i++)
        free(e->srv[i].hz_cnt);
    free(e->cells.v);
    free(e->hz.v);
    free(e->iv);
    free(e->srv);
    free(e->pool);
    free(e->free_slots);
    free(e->heap);
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

/* ------------------------------------------- weighted isolated samples --- */

/* A request of life D is isolated when nothing was in flight at its arrival
 * and nothing arrived during D, so long requests are under-represented among
 * the isolated ones (with Poisson arrivals at rate λ, in proportion to
 * exp(-λ·D)), and their median is below the mean demand that work units
 * need. The estimate is therefore the mean of the isolated samples weighted
 * by the inverse of their chance of isolation (Horvitz-Thompson, as a ratio
 * so that the common factors cancel).
 *
 * Chance of isolation of a request of life D = P(alone at arrival) ·
 * P(no arrival within D | alone at arrival). The first does not depend on
 * the request's own demand. The second, F(D), is measured rather than
 * assumed: every request alone at its arrival is followed until the next
 * arrival at its server (an event at G, when G < D) or its departure
 * (censored at D: exactly the isolated samples). A life-table Kaplan-Meier
 * estimate over those gives F per (server, period), in 4 bins per octave,
 * linear in between. F needs no model of the arrivals: for Poisson ones it
 * is exp(-λ·D); when the rate varies (bursts, pauses upstream) it is the
 * mixture the alone-at-arrival requests saw, where one average λ would
 * over-weight the long samples (+30% on sim/examples/gc.conf); when a
 * client waits for an answer before it sends again (one connection, a closed
 * loop) its next request never cuts one short and is censored, not counted.
 * The assumption left is that, while a request is in flight, when the next
 * one arrives does not depend on how long this one will still take.
 *
 * The cumulative hazard -ln F(D) is capped at SVC_MAX_LD (a weight of at most
 * e^3 ≈ 20): beyond it a few long samples would carry most of the estimate
 * and the tail of F is measured on few requests. The cost is an
 * underestimate from requests whose chance of isolation is below 5%, a
 * small share of the mean below ~60% utilization (exponential demand with
 * Poisson arrivals at λ·s = 0.5: about 1.5%). Equal lives get equal weights,
 * so a deterministic demand is estimated exactly as before. */
#define SVC_MAX_LD 3.0

static double service_weight(struct tb_svcest *e, const struct isample *x, int64_t period)
{
    struct hazard *h;
    hz_slot(e, x->server, period, false, &h); /* a lookup: never allocates */
    if (!h || !h->cum || x->d <= 0)
        return 1.0;
    int k = svc_bin(x->d);
    double before = k ? h->cum[k - 1] : 0, in = h->cum[k] - before, frac = 1;
    if (k < SVC_NB - 1) {
        int64_t lo = svc_bin_lo(k), hi = svc_bin_lo(k + 1);
        frac = (double)(x->d - lo) / (double)(hi - lo);
    }
    double ld = before + (in > 0 && frac > 0 ? in * frac : 0);
    return exp(ld < SVC_MAX_LD ? ld : SVC_MAX_LD);
}

/* Weighted mean as ref + Σw(v - ref)/Σw: samples that are all equal give
 * exactly that value (deterministic demand stays exact), and large
 * nanosecond values do not lose precision to the sums. */
struct wmean {
    double sw, swd;
    int64_t ref;
    bool any;
};

/* Adds a cell's isolated samples (sorted), each standing for `scale` samples
 * (seen / kept, when the reservoir had to drop some). */
static void wmean_add(struct tb_svcest *e, const struct cell *c, double scale, struct wmean *m)
{
    const struct isample *v = c->iso.v;
    for (uint32_t i = 0; i < c->iso.n; i++) {
        if (!m->any) {
            m->ref = v[i].v;
            m->any = true;
        }
        double w = scale * service_weight(e, &v[i], c->k.period);
        m->sw += w;
        m->swd += w * (double)(v[i].v - m->ref);
    }
}

static int64_t wmean_get(const struct wmean *m)
{
    return m->ref + (int64_t)llround(m->swd / m->sw);
}

/* Per class, the weighted mean of its isolated samples over every period,
 * for the classes with at least min_isolated of them (sorted by class). */
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

/* Expects every cell's isolated samples sorted. */
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
            seen += cp[j]->iso.seen;
            stored += cp[j]->iso.n;
        }
        if (seen >= e->o.min_isolated && stored) {
            struct wmean m = {0};
            for (size_t x = i; x < j; x++)
                if (cp[x]->iso.n)
                    wmean_add(e, cp[x], (double)cp[x]->iso.seen / (double)cp[x]->iso.n, &m);
            p[np++] = (struct pooled){cp[i]->k.key, wmean_get(&m), seen};
        }
        i = j;
    }
    free(cp);
    *out = p;
    *nout = np;
    return 0;
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
    }
    for (size_t i = 0; !rc && i < e->nsrv; i++) {
        if (!e->srv[i].seen)
            continue;
        hz_observe(&e->srv[i], INT64_MAX);
        rc = hz_flush(e, &e->srv[i]);
    }
    for (size_t i = 0; !rc && i < e->hz.cap; i++)
        if (hz_at(e, i)->k.key && !hz_at(e, i)->cum)
            rc = hz_finish(hz_at(e, i));
    if (rc)
        return rc;
    for (size_t i = 0; i < e->cells.cap; i++)
        if (cell_at(e, i)->k.key && cell_at(e, i)->iso.n)
            qsort(cell_at(e, i)->iso.v, cell_at(e, i)->iso.n, sizeof(struct isample), cmp_isample);
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
        } else if (c->iso.seen >= e->o.min_isolated && c->iso.n) {
            struct wmean m = {0};
            wmean_add(e, c, 1.0, &m);
            s->service_ns = wmean_get(&m);
            s->method = TB_SVC_ISOLATED;
            s->samples = (uint32_t)TB_MIN(c->iso.seen, (uint64_t)UINT32_MAX);
        } else if (pc) {
            /* Too few isolated requests in this period — typically one of
             * sustained overload, where nothing runs alone — but enough over
             * the whole range: their weighted mean. The low quantile of this
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
