/* SPDX-License-Identifier: MIT */
/* stretch.c — lives by arrival concurrency, per server, and the knee test's
 * per-request rule (stretch.h). */
#include "stretch.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Log-ish, so that "twice the knee" lands near a bucket edge for any number
 * of cores, and capped: past 64 in flight every knee is long shown. */
const uint32_t TB_STRETCH_FROM[TB_STRETCH_NCONC] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};

/* The bucket of m others in flight: a table below 64, the last bucket from
 * 64 on (filled from TB_STRETCH_FROM by bins_init). */
static uint8_t conc_tab[64];

static uint32_t conc_bucket(size_t m)
{
    return m < 64 ? conc_tab[m] : TB_STRETCH_NCONC - 1;
}

/* The definition of a life's bin (stretch.h): kept as it was written first,
 * with libm's log2, because bins_init derives the tables of the fast path
 * from it (so that the two can never disagree, whatever libm rounds). */
static uint32_t bin_by_log2(int64_t life_ns)
{
    if (life_ns < 1000)
        return 0;
    double o = log2((double)life_ns / 1000.0) * TB_STRETCH_BINS_PER_OCTAVE;
    if (!(o < TB_STRETCH_NLIFE - 2))
        return TB_STRETCH_NLIFE - 1;
    return (uint32_t)o + 1;
}

/* The fast path: a log2 per request was a third of the accumulator's time
 * (bench_analysis). A life of ns >= 1000 has its top bit p (>= 9) and the 5
 * bits below it, k: the range [(32 + k)·2^(p-5), (33 + k)·2^(p-5)) is at most
 * 1/32 of its low end wide, narrower than a bin (2^(1/16) - 1 = 4.4%), so it
 * holds at most one bin's lower bound. sub[p][k] is the bin of the range's
 * first life; the life is in the next bin when it reaches that bin's lower
 * bound, lo[bin + 1] (the smallest life bin_by_log2 puts in it). */
static struct {
    uint64_t lo[TB_STRETCH_NLIFE + 1]; /* lo[NLIFE]: UINT64_MAX, above every life */
    uint16_t sub[64][32];
} bins;
static pthread_once_t bins_once = PTHREAD_ONCE_INIT;

static void bins_init(void)
{
    for (uint32_t m = 0, b = 0; m < 64; m++) {
        while (b + 1 < TB_STRETCH_NCONC && m >= TB_STRETCH_FROM[b + 1])
            b++;
        conc_tab[m] = (uint8_t)b;
    }
    /* Each bound by bisection on the definition (which never decreases). */
    bins.lo[0] = 0;
    for (uint32_t b = 1; b < TB_STRETCH_NLIFE; b++) {
        int64_t lo = bins.lo[b - 1] > 1000 ? (int64_t)bins.lo[b - 1] : 1000, hi = INT64_MAX;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (bin_by_log2(mid) >= b)
                hi = mid;
            else
                lo = mid + 1;
        }
        bins.lo[b] = (uint64_t)lo;
    }
    bins.lo[TB_STRETCH_NLIFE] = UINT64_MAX;
    for (int p = 9; p < 63; p++)
        for (int k = 0; k < 32; k++)
            bins.sub[p][k] = (uint16_t)bin_by_log2((int64_t)(32 + k) << (p - 5));
}

static inline uint32_t bin_fast(int64_t life_ns)
{
    if (life_ns < 1000)
        return 0;
    int p = 63 - __builtin_clzll((unsigned long long)life_ns);
    uint32_t b = bins.sub[p][(life_ns >> (p - 5)) & 31];
    return b + ((uint64_t)life_ns >= bins.lo[b + 1]);
}

uint32_t tb_stretch_bin(int64_t life_ns)
{
    pthread_once(&bins_once, bins_init);
    return bin_fast(life_ns);
}

void tb_stretch_bin_bounds(uint32_t bin, double *lo_ns, double *hi_ns)
{
    if (bin == 0) {
        *lo_ns = 0;
        *hi_ns = 1000;
        return;
    }
    *lo_ns = 1000.0 * exp2((double)(bin - 1) / TB_STRETCH_BINS_PER_OCTAVE);
    *hi_ns = bin + 1 >= TB_STRETCH_NLIFE ? INFINITY
                                         : 1000.0 * exp2((double)bin / TB_STRETCH_BINS_PER_OCTAVE);
}

void tb_stretch_merge(struct tb_stretch *dst, const struct tb_stretch *src)
{
    dst->servers += src->servers;
    for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++)
        for (uint32_t i = 0; i < TB_STRETCH_NLIFE; i++)
            dst->life[b][i] += src->life[b][i];
}

static bool in_range(uint32_t b, uint32_t from, uint32_t to)
{
    return TB_STRETCH_FROM[b] >= from && TB_STRETCH_FROM[b] <= to;
}

uint64_t tb_stretch_count(const struct tb_stretch *s, uint32_t from, uint32_t to)
{
    uint64_t n = 0;
    for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++)
        if (in_range(b, from, to))
            for (uint32_t i = 0; i < TB_STRETCH_NLIFE; i++)
                n += s->life[b][i];
    return n;
}

double tb_stretch_quantile(const struct tb_stretch *s, uint32_t from, uint32_t to, double q)
{
    uint64_t n = tb_stretch_count(s, from, to);
    if (!n || !(q > 0 && q < 1))
        return NAN;
    /* The rank as a continuous position: the value below which a fraction q
     * of the requests lie, spread evenly (in log) over their bin. */
    double want = q * (double)n, seen = 0;
    for (uint32_t i = 0; i < TB_STRETCH_NLIFE; i++) {
        uint64_t c = 0;
        for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++)
            if (in_range(b, from, to))
                c += s->life[b][i];
        if (!c || seen + (double)c < want) {
            seen += (double)c;
            continue;
        }
        double lo, hi, f = (want - seen) / (double)c;
        tb_stretch_bin_bounds(i, &lo, &hi);
        if (i == 0)
            return f * hi;
        if (!isfinite(hi))
            return lo;
        return lo * pow(hi / lo, f);
    }
    return NAN;
}

/* The rule with the baseline m <= base_to (v->from already set). */
static void judge_from(const struct tb_stretch *s, uint32_t base_to, struct tb_stretch_verdict *v)
{
    v->base_to = base_to;
    v->ratio = v->ucb = NAN;
    v->judged = v->flat = false;
    v->alone = tb_stretch_count(s, 0, base_to);
    v->crowded = tb_stretch_count(s, v->from, UINT32_MAX);
    if (!v->alone || !v->crowded)
        return;
    double ma = tb_stretch_quantile(s, 0, base_to, 0.5);
    double mc = tb_stretch_quantile(s, v->from, UINT32_MAX, 0.5);
    v->ratio = mc / ma;
    if (v->alone < TB_STRETCH_MIN_REQUESTS || v->crowded < TB_STRETCH_MIN_REQUESTS)
        return;
    /* Distribution-free bounds of each median from the order statistics
     * (normal approximation of the binomial rank, 97.5% one-sided each, so
     * the ratio's bound holds at 95% at least): the crowded group's upper
     * bound over the baseline's lower one. */
    double za = 1.96 * 0.5 / sqrt((double)v->alone), zc = 1.96 * 0.5 / sqrt((double)v->crowded);
    double lo = tb_stretch_quantile(s, 0, base_to, fmax(0.5 - za, 1e-9));
    double hi = tb_stretch_quantile(s, v->from, UINT32_MAX, fmin(0.5 + zc, 1 - 1e-9));
    v->judged = lo > 0 && isfinite(hi);
    if (!v->judged)
        return;
    v->ucb = hi / lo;
    v->flat = v->ucb < TB_STRETCH_MAX_RATIO;
}

void tb_stretch_judge(const struct tb_stretch *s, double knee, struct tb_stretch_verdict *v)
{
    memset(v, 0, sizeof *v);
    /* The bucket holding 2·K per server rounded to the nearest integer, at
     * least 1 other in flight. Nearest, not the ceiling: a knee just above 1
     * on a 4-core server would start the group at 3 in flight, where its
     * cores begin to be shared (lightlogn at 20 ms windows: x1.27 at 3+,
     * x1.08 at 2+). */
    double per = nearbyint(knee * 2 / (s->servers ? s->servers : 1));
    uint32_t b = 1;
    while (b + 1 < TB_STRETCH_NCONC && TB_STRETCH_FROM[b + 1] <= per)
        b++;
    v->from = TB_STRETCH_FROM[b];
    judge_from(s, 0, v);
    if (v->flat || v->alone >= TB_STRETCH_BASE_REQUESTS || v->from < 8)
        return;
    /* Few lone requests on a busy server: the lowest levels below half the
     * knee's per-server share (m < from/4, bucket edges for every from >= 8)
     * instead, when they are enough. */
    struct tb_stretch_verdict w = *v;
    judge_from(s, v->from / 4 - 1, &w);
    if (w.judged)
        *v = w;
}

/* ---- the accumulator ----------------------------------------------------------
 * Only the count of a server's requests in flight at each arrival is needed:
 * every departure at or before the arrival leaves, whichever order they
 * leave in. A binary heap of departures (as first written) cost a pop of
 * log2(in flight) levels per request, half the accumulator's time when queues
 * are deep. Departures mostly come in arrival order (first come first served
 * on a few cores), so they go into an array kept sorted, inserted from its
 * end by moving at most WALK_MAX later departures one place on, taken from
 * its front as they leave; a departure that would have to pass more (a short
 * request overtaking long ones in flight) goes into a heap instead. Each
 * departure is in exactly one of the two, both are emptied of those at or
 * before the arrival, and the count is the sum: the same as the single
 * heap's, request by request. Taking the count from the service estimator's
 * own heap instead would tie this rule to what service.c keeps in flight and
 * when (its unclassified and downstream requests, its order of ties): not
 * worth it at this cost (docs/report.md "Cost"). */
#define WALK_MAX 8

struct srv {
    int64_t *v;                 /* departures in flight, sorted: v[lo] to v[hi - 1] */
    size_t cap, lo, hi;
    struct tb_i64heap over;     /* the others in flight */
    struct tb_stretch *h;       /* NULL until its first request */
};

struct tb_stretchacc {
    struct srv *s; /* indexed by server id */
    size_t cap;
};

int tb_stretchacc_new(struct tb_stretchacc **out)
{
    pthread_once(&bins_once, bins_init);
    *out = calloc(1, sizeof **out);
    return *out ? 0 : TB_E_NOMEM;
}

/* Room after v[hi - 1]: the departures in flight moved to the front when
 * they fill at most half of v (so each move is paid for by as many
 * departures gone), else into an array twice as large. */
static int sorted_room(struct srv *s)
{
    size_t n = s->hi - s->lo;
    if (s->lo && n <= s->cap / 2) {
        memmove(s->v, s->v + s->lo, n * sizeof *s->v);
    } else {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *v = malloc(cap * sizeof *v);
        if (!v)
            return TB_E_NOMEM;
        if (n)
            memcpy(v, s->v + s->lo, n * sizeof *v);
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    s->lo = 0;
    s->hi = n;
    return 0;
}

int tb_stretchacc_add(struct tb_stretchacc *a, const struct tb_request *r)
{
    if (r->departure_ns < r->arrival_ns)
        return 0;
    if (r->server >= a->cap) {
        int rc = tb_grow_zero(&a->s, &a->cap, (size_t)r->server + 1, sizeof *a->s);
        if (rc)
            return rc;
    }
    struct srv *s = &a->s[r->server];
    if (!s->h) {
        if (!(s->h = calloc(1, sizeof *s->h)))
            return TB_E_NOMEM;
        s->h->servers = 1;
    }
    int64_t t = r->arrival_ns, d = r->departure_ns;
    size_t lo = s->lo, hi = s->hi;
    while (lo < hi && s->v[lo] <= t)
        lo++;
    s->lo = lo;
    while (s->over.n && s->over.v[0] <= t)
        tb_i64heap_pop(&s->over);
    size_t m = hi - lo + s->over.n;
    if (hi - lo > WALK_MAX && s->v[hi - 1 - WALK_MAX] > d) {
        /* More than WALK_MAX of the sorted ones leave after it. */
        if (tb_i64heap_push(&s->over, d))
            return TB_E_NOMEM;
    } else {
        if (hi == s->cap) {
            if (sorted_room(s))
                return TB_E_NOMEM;
            lo = s->lo;
            hi = s->hi;
        }
        size_t j = hi;
        for (; j > lo && s->v[j - 1] > d; j--)
            s->v[j] = s->v[j - 1];
        s->v[j] = d;
        s->hi = hi + 1;
    }
    s->h->life[conc_bucket(m)][bin_fast(d - t)]++;
    return 0;
}

const struct tb_stretch *tb_stretchacc_server(const struct tb_stretchacc *a, uint32_t server)
{
    return server < a->cap ? a->s[server].h : NULL;
}

void tb_stretchacc_total(const struct tb_stretchacc *a, struct tb_stretch *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < a->cap; i++)
        if (a->s[i].h)
            tb_stretch_merge(out, a->s[i].h);
}

void tb_stretchacc_free(struct tb_stretchacc *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->cap; i++) {
        free(a->s[i].v);
        tb_i64heap_free(&a->s[i].over);
        free(a->s[i].h);
    }
    free(a->s);
    free(a);
}
