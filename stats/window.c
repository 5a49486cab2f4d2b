/* SPDX-License-Identifier: MIT */
/* window.c — streaming per-window load integral, completions, work units and
 * response-time statistics of one tier and its servers. */
#include "stats.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Response-time histogram: values below 16 ns are exact buckets; above, each
 * power of two [2^e, 2^(e+1)) is cut into 16 linear sub-buckets, so a bucket
 * spans at most 1/16 of its lower bound and its middle is within 1/32 (3.2%)
 * of any value in it. Bucket ids fit in 10 bits (e <= 62); an entry packs the
 * id in the top 10 bits and a count in the low 22 (a full count starts a new
 * entry for the same bucket), so a window stores only the buckets it uses. */
#define HIST_SUB 16
#define HIST_COUNT_BITS 22
#define HIST_COUNT_MAX ((UINT32_C(1) << HIST_COUNT_BITS) - 1)

struct hist {
    uint32_t *e;
    uint32_t n, cap;
};

/* One row (tier or server) of accumulators, one slot per window. */
struct row {
    int64_t *part;     /* ns of partial overlaps */
    int64_t *diff;     /* difference array of fully covered windows (nwin + 1) */
    uint32_t *comp;
    double *units;
    double *rt_sum;
    int64_t *rt_min, *rt_max;
    struct hist *hist;
};

struct tb_winacc {
    uint32_t tier;
    int64_t width, t0, t1;
    size_t nwin, nrows;
    uint32_t *servers;   /* row i + 1 holds servers[i] */
    uint32_t *row_of;    /* server id -> row (0 = not listed), ids < nrow_of */
    uint32_t nrow_of;
    uint64_t skipped;
    struct row *rows;
};

int tb_win_floor(int64_t t, int64_t width_ns, int64_t *start_ns)
{
    if (width_ns <= 0)
        return TB_E_INVAL;
    int64_t q = t / width_ns, r = t % width_ns;
    /* C division truncates toward zero; a negative remainder means t lies
     * below q * width, in the window one lower. */
    if (r < 0) {
        /* q > INT64_MIN here (r != 0 implies width > 1), so q - 1 is fine;
         * (q - 1) * width fits iff q - 1 >= INT64_MIN / width (a ceiling). */
        q--;
        if (q < INT64_MIN / width_ns)
            return TB_E_INVAL;
    }
    *start_ns = q * width_ns;
    return 0;
}

static unsigned hist_bucket(int64_t v)
{
    if (v < HIST_SUB)
        return v < 0 ? 0u : (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll((unsigned long long)v);
    unsigned sub = (unsigned)((uint64_t)v >> (e - 4)) & (HIST_SUB - 1);
    return HIST_SUB + (e - 4) * HIST_SUB + sub;
}

/* Middle of a bucket's range [lo, hi). */
static double hist_mid(unsigned b)
{
    if (b < HIST_SUB)
        return (double)b;
    unsigned e = (b - HIST_SUB) / HIST_SUB + 4, sub = (b - HIST_SUB) % HIST_SUB;
    double lo = ldexp(1.0 + sub / 16.0, (int)e);
    double hi = ldexp(1.0 + (sub + 1) / 16.0, (int)e);
    return (lo + hi) / 2;
}

static int hist_add(struct hist *h, int64_t v)
{
    uint32_t b = hist_bucket(v);
    for (uint32_t i = 0; i < h->n; i++) {
        if ((h->e[i] >> HIST_COUNT_BITS) == b && (h->e[i] & HIST_COUNT_MAX) < HIST_COUNT_MAX) {
            h->e[i]++;
            return 0;
        }
    }
    if (h->n == h->cap) {
        /* Not tb_grow: there is one of these per window and row, most hold a
         * few buckets, so it starts at 4 and keeps a 32-bit capacity. */
        uint32_t cap = h->cap ? h->cap * 2 : 4;
        uint32_t *e = realloc(h->e, cap * sizeof *e);
        if (!e)
            return TB_E_NOMEM;
        h->e = e;
        h->cap = cap;
    }
    h->e[h->n++] = (b << HIST_COUNT_BITS) | 1u;
    return 0;
}

/* Nearest-rank quantile q of the histogram holding `count` values. */
static double hist_quantile(struct hist *h, uint32_t count, double q, int64_t vmin, int64_t vmax)
{
    if (!count)
        return 0;
    qsort(h->e, h->n, sizeof *h->e, tb_cmp_u32);
    uint64_t rank = (uint64_t)ceil(q * count);
    if (rank < 1)
        rank = 1;
    uint64_t cum = 0;
    double v = (double)vmax;
    for (uint32_t i = 0; i < h->n; i++) {
        cum += h->e[i] & HIST_COUNT_MAX;
        if (cum >= rank) {
            v = hist_mid(h->e[i] >> HIST_COUNT_BITS);
            break;
        }
    }
    if (v < (double)vmin)
        v = (double)vmin;
    if (v > (double)vmax)
        v = (double)vmax;
    return v;
}

static void row_free(struct row *r, size_t nwin)
{
    if (r->hist)
        for (size_t i = 0; i < nwin; i++)
            free(r->hist[i].e);
    free(r->part);
    free(r->diff);
    free(r->comp);
    free(r->units);
    free(r->rt_sum);
    free(r->rt_min);
    free(r->rt_max);
    free(r->hist);
}

static int row_init(struct row *r, size_t nwin)
{
    r->part = calloc(nwin, sizeof *r->part);
    r->diff = calloc(nwin + 1, sizeof *r->diff);
    r->comp = calloc(nwin, sizeof *r->comp);
    r->units = calloc(nwin, sizeof *r->units);
    r->rt_sum = calloc(nwin, sizeof *r->rt_sum);
    r->rt_min = calloc(nwin, sizeof *r->rt_min);
    r->rt_max = calloc(nwin, sizeof *r->rt_max);
    r->hist = calloc(nwin, sizeof *r->hist);
    if (!r->part || !r->diff || !r->comp || !r->units || !r->rt_sum || !r->rt_min || !r->rt_max ||
        !r->hist)
        return TB_E_NOMEM;
    return 0;
}

void tb_winacc_free(struct tb_winacc *acc)
{
    if (!acc)
        return;
    if (acc->rows)
        for (size_t i = 0; i < acc->nrows; i++)
            row_free(&acc->rows[i], acc->nwin);
    free(acc->rows);
    free(acc->servers);
    free(acc->row_of);
    free(acc);
}

/* Windows and rows are capped so that index arithmetic stays in range and a
 * typo in --from/--to fails cleanly instead of allocating the machine. */
#define WINACC_MAX_CELLS (UINT64_C(1) << 30)

int tb_winacc_new(struct tb_winacc **out, uint32_t tier, int64_t width_ns, int64_t from_ns,
                  int64_t to_ns, const uint32_t *servers, size_t nservers)
{
    if (!out || width_ns <= 0 || to_ns <= from_ns || (nservers && !servers))
        return TB_E_INVAL;
    int64_t t0, tl;
    if (tb_win_floor(from_ns, width_ns, &t0) || tb_win_floor(to_ns - 1, width_ns, &tl))
        return TB_E_INVAL;
    if (tl > INT64_MAX - width_ns)
        return TB_E_INVAL;
    /* (tl - t0) may exceed INT64_MAX for absurd ranges: compute in unsigned. */
    uint64_t span = (uint64_t)tl - (uint64_t)t0;
    uint64_t nwin = span / (uint64_t)width_ns + 1;
    if (nwin > WINACC_MAX_CELLS / (nservers + 1))
        return TB_E_FULL;
    int rc = TB_E_NOMEM;
    struct tb_winacc *a = calloc(1, sizeof *a);
    if (!a)
        return TB_E_NOMEM;
    a->tier = tier;
    a->width = width_ns;
    a->t0 = t0;
    a->t1 = tl + width_ns;
    a->nwin = (size_t)nwin;
    a->nrows = nservers + 1;
    a->rows = calloc(a->nrows, sizeof *a->rows);
    a->servers = calloc(nservers + 1, sizeof *a->servers);
    if (!a->rows || !a->servers)
        goto fail;
    uint32_t maxid = 0;
    for (size_t i = 0; i < nservers; i++) {
        if (servers[i] == 0) {
            rc = TB_E_INVAL;
            goto fail;
        }
        maxid = TB_MAX(maxid, servers[i]);
        a->servers[i] = servers[i];
    }
    a->nrow_of = maxid + 1;
    a->row_of = calloc(a->nrow_of, sizeof *a->row_of);
    if (!a->row_of)
        goto fail;
    for (size_t i = 0; i < nservers; i++) {
        if (a->row_of[servers[i]]) {
            rc = TB_E_INVAL; /* listed twice */
            goto fail;
        }
        a->row_of[servers[i]] = (uint32_t)(i + 1);
    }
    for (size_t i = 0; i < a->nrows; i++)
        if (row_init(&a->rows[i], a->nwin))
            goto fail;
    *out = a;
    return 0;
fail:
    tb_winacc_free(a);
    return rc;
}

size_t tb_winacc_nwindows(const struct tb_winacc *acc) { return acc ? acc->nwin : 0; }

uint64_t tb_winacc_skipped(const struct tb_winacc *acc) { return acc ? acc->skipped : 0; }

/* Adds the clipped life [a, d) (t0 <= a < d <= t1) to a row: DESIGN.md "Load"
 * is (1/w)∫N; here each window collects its integral in integer ns. */
static void row_add_life(struct row *rw, const struct tb_winacc *acc, int64_t a, int64_t d)
{
    size_t i = (size_t)((uint64_t)(a - acc->t0) / (uint64_t)acc->width);
    size_t j = (size_t)((uint64_t)(d - acc->t0) / (uint64_t)acc->width);
    if (i == j) {
        rw->part[i] += d - a;
        return;
    }
    int64_t end_i = acc->t0 + (int64_t)(i + 1) * acc->width;
    rw->part[i] += end_i - a;
    /* Windows i+1 .. j-1 are covered completely. */
    rw->diff[i + 1]++;
    rw->diff[j]--;
    if (j < acc->nwin)
        rw->part[j] += d - (acc->t0 + (int64_t)j * acc->width);
}

static int row_add_completion(struct row *rw, size_t k, int64_t rt, double units)
{
    if (rw->comp[k] == UINT32_MAX)
        return TB_E_FULL;
    if (rw->comp[k] == 0 || rt < rw->rt_min[k])
        rw->rt_min[k] = rt;
    if (rw->comp[k] == 0 || rt > rw->rt_max[k])
        rw->rt_max[k] = rt;
    rw->comp[k]++;
    rw->units[k] += units;
    rw->rt_sum[k] += (double)rt;
    return hist_add(&rw->hist[k], rt);
}

int tb_winacc_add(struct tb_winacc *acc, const struct tb_request *r, double units)
{
    if (!acc || !r)
        return TB_E_INVAL;
    if ((acc->tier && r->tier != acc->tier) || r->departure_ns < r->arrival_ns ||
        r->departure_ns < acc->t0 || r->arrival_ns >= acc->t1) {
        acc->skipped++;
        return 0;
    }
    struct row *rows[2] = {&acc->rows[0], NULL};
    if (r->server < acc->nrow_of && acc->row_of[r->server])
        rows[1] = &acc->rows[acc->row_of[r->server]];
    int64_t a = TB_MAX(r->arrival_ns, acc->t0), d = TB_MIN(r->departure_ns, acc->t1);
    bool done = !(r->flags & TB_REQ_NORESP) && r->departure_ns < acc->t1;
    size_t k = done ? (size_t)((uint64_t)(r->departure_ns - acc->t0) / (uint64_t)acc->width) : 0;
    int64_t rt = r->departure_ns - r->arrival_ns;
    for (int x = 0; x < 2 && rows[x]; x++) {
        if (a < d)
            row_add_life(rows[x], acc, a, d);
        if (done) {
            int rc = row_add_completion(rows[x], k, rt, units);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int tb_winacc_finish(struct tb_winacc *acc, struct tb_window **out, size_t *n)
{
    if (!acc || !out || !n)
        return TB_E_INVAL;
    size_t total = acc->nwin * acc->nrows;
    struct tb_window *w = calloc(total ? total : 1, sizeof *w);
    if (!w)
        return TB_E_NOMEM;
    double wsec = (double)acc->width / (double)TB_NS_PER_SEC;
    for (size_t ri = 0; ri < acc->nrows; ri++) {
        struct row *rw = &acc->rows[ri];
        int64_t covering = 0;
        for (size_t k = 0; k < acc->nwin; k++) {
            struct tb_window *o = &w[ri * acc->nwin + k];
            covering += rw->diff[k];
            o->start_ns = acc->t0 + (int64_t)k * acc->width;
            o->width_ns = acc->width;
            o->tier = acc->tier;
            o->server = ri ? acc->servers[ri - 1] : 0;
            /* The integral stays in integer ns until this one division, so the
             * load carries a single rounding. */
            o->load = (double)(rw->part[k] + covering * acc->width) / (double)acc->width;
            o->completions = rw->comp[k];
            o->work_units = rw->units[k];
            o->throughput = rw->comp[k] / wsec;
            o->norm_throughput = rw->units[k] / wsec;
            o->rt_mean_ns = rw->comp[k] ? rw->rt_sum[k] / rw->comp[k] : 0;
            o->rt_p95_ns =
                hist_quantile(&rw->hist[k], rw->comp[k], 0.95, rw->rt_min[k], rw->rt_max[k]);
        }
    }
    *out = w;
    *n = total;
    return 0;
}

int tb_windows_compute(const struct tb_request *req, size_t nreq, const struct tb_units *units,
                       uint32_t tier, const uint32_t *servers, size_t nservers, int64_t width_ns,
                       int64_t from_ns, int64_t to_ns, struct tb_window **out, size_t *n)
{
    if ((!req && nreq) || !out || !n || width_ns <= 0)
        return TB_E_INVAL;
    if (from_ns == INT64_MIN || to_ns == INT64_MAX) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t i = 0; i < nreq; i++) {
            const struct tb_request *r = &req[i];
            if ((tier && r->tier != tier) || r->departure_ns < r->arrival_ns)
                continue;
            lo = TB_MIN(lo, r->arrival_ns);
            hi = TB_MAX(hi, r->departure_ns);
        }
        if (lo > hi) {
            *out = NULL;
            *n = 0;
            return 0;
        }
        if (from_ns == INT64_MIN)
            from_ns = lo;
        if (to_ns == INT64_MAX)
            to_ns = hi == INT64_MAX ? hi : hi + 1; /* the last departure is a completion */
    }
    struct tb_winacc *acc;
    int rc = tb_winacc_new(&acc, tier, width_ns, from_ns, to_ns, servers, nservers);
    if (rc)
        return rc;
    for (size_t i = 0; i < nreq && !rc; i++) {
        double u = units ? tb_units_get(units, req[i].class_id, req[i].arrival_ns) : 1.0;
        rc = tb_winacc_add(acc, &req[i], u);
    }
    if (!rc)
        rc = tb_winacc_finish(acc, out, n);
    tb_winacc_free(acc);
    return rc;
}

/* ---- calls in flight ---------------------------------------------------------- */

struct call_ev {
    int64_t t;
    int d; /* +1 a call starts, -1 it ends */
};

static int cmp_call_ev(const void *pa, const void *pb)
{
    const struct call_ev *a = pa, *b = pb;
    return a->t < b->t ? -1 : a->t > b->t;
}

/* The sweep both forms share: between consecutive events the count of calls
 * in flight is constant; time with one call or more is spread over the
 * windows the stretch covers, one addition per stretch and window, in time
 * order (so the streaming and the array form add the same terms in the same
 * order and give the same doubles). Events come in non-decreasing time. */
struct busy_sweep {
    double *busy; /* per window */
    double *cload; /* per window: ∫ C dτ / w (tb_window.calls_load) */
    int64_t w0, width, end;
    int64_t last_t;
    long c;
    bool any;
};

static void busy_event(struct busy_sweep *s, int64_t t, int d)
{
    if (s->any && s->c > 0 && t > s->last_t) {
        int64_t a = TB_MAX(s->last_t, s->w0), b = TB_MIN(t, s->end);
        while (a < b) {
            size_t k = (size_t)((a - s->w0) / s->width);
            int64_t e = TB_MIN(b, s->w0 + (int64_t)(k + 1) * s->width);
            s->busy[k] += (double)(e - a) / (double)s->width;
            s->cload[k] += (double)s->c * (double)(e - a) / (double)s->width;
            a = e;
        }
    }
    s->c += d;
    s->last_t = t;
    s->any = true;
}

int tb_windows_calls_busy(struct tb_window *w, size_t n, const struct tb_request *calls,
                          size_t ncalls)
{
    if ((n && !w) || (ncalls && !calls))
        return TB_E_INVAL;
    for (size_t k = 0; k < n; k++)
        w[k].calls_busy = w[k].calls_load = 0;
    if (!n || !ncalls)
        return 0;
    int64_t width = w[0].width_ns, w0 = w[0].start_ns;
    if (width <= 0)
        return TB_E_INVAL;
    struct call_ev *ev = malloc(2 * ncalls * sizeof *ev);
    double *busy = calloc(2 * n, sizeof *busy);
    if (!ev || !busy) {
        free(ev);
        free(busy);
        return TB_E_NOMEM;
    }
    size_t ne = 0;
    for (size_t i = 0; i < ncalls; i++) {
        if (calls[i].departure_ns < calls[i].arrival_ns)
            continue;
        ev[ne++] = (struct call_ev){calls[i].arrival_ns, 1};
        ev[ne++] = (struct call_ev){calls[i].departure_ns, -1};
    }
    qsort(ev, ne, sizeof *ev, cmp_call_ev);
    struct busy_sweep s = {busy, busy + n, w0, width, w0 + (int64_t)n * width, 0, 0, false};
    for (size_t i = 0; i < ne; i++)
        busy_event(&s, ev[i].t, ev[i].d);
    for (size_t k = 0; k < n; k++) {
        w[k].calls_busy = busy[k];
        w[k].calls_load = busy[n + k];
    }
    free(ev);
    free(busy);
    return 0;
}

/* Streaming: the calls' ends wait in a min-heap until time passes them. */
struct tb_busyacc {
    struct busy_sweep s;
    size_t n;
    struct tb_i64heap heap;
    int64_t last_arrival;
};

int tb_busyacc_new(struct tb_busyacc **out, int64_t w0, int64_t width_ns, size_t n)
{
    if (width_ns <= 0)
        return TB_E_INVAL;
    struct tb_busyacc *b = calloc(1, sizeof *b);
    if (!b || !(b->s.busy = calloc(n ? 2 * n : 1, sizeof *b->s.busy))) {
        free(b);
        return TB_E_NOMEM;
    }
    b->s.cload = b->s.busy + n;
    b->n = n;
    b->s.w0 = w0;
    b->s.width = width_ns;
    b->s.end = w0 + (int64_t)n * width_ns;
    b->last_arrival = INT64_MIN;
    *out = b;
    return 0;
}

static void busy_pop_until(struct tb_busyacc *b, int64_t t, bool all)
{
    while (b->heap.n && (all || b->heap.v[0] <= t))
        busy_event(&b->s, tb_i64heap_pop(&b->heap), -1);
}

int tb_busyacc_add(struct tb_busyacc *b, const struct tb_request *call)
{
    if (call->departure_ns < call->arrival_ns)
        return 0;
    if (call->arrival_ns < b->last_arrival)
        return TB_E_INVAL;
    b->last_arrival = call->arrival_ns;
    /* Ends at or before this start come first (at the same instant either
     * order gives the same sums: no time passes between them). */
    busy_pop_until(b, call->arrival_ns, false);
    if (tb_i64heap_push(&b->heap, call->departure_ns))
        return TB_E_NOMEM;
    busy_event(&b->s, call->arrival_ns, +1);
    return 0;
}

int tb_busyacc_finish(struct tb_busyacc *b, struct tb_window *w)
{
    busy_pop_until(b, 0, true);
    for (size_t k = 0; k < b->n; k++) {
        w[k].calls_busy = b->s.busy[k];
        w[k].calls_load = b->s.cload[k];
    }
    return 0;
}

void tb_busyacc_free(struct tb_busyacc *b)
{
    if (!b)
        return;
    free(b->s.busy);
    tb_i64heap_free(&b->heap);
    free(b);
}
