/* SPDX-License-Identifier: MIT */
/* layer.c — layered load: per server and window, the load split into its own
 * time (work and local queueing) and the time it waits on downstream calls
 * (stats.h "layered load" has the definitions).
 *
 * One sweep over arrival-ordered requests: an arrival is handled when it is
 * added; departures wait in a min-heap and are handled once the sweep has
 * passed their time. Between two events a row's N and C are constant, so each
 * piece of time is added to the windows it overlaps as an exact integer
 * (request-nanoseconds), like tb_winacc's load. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

#include "sort.h"

/* Rows x windows beyond this is a mistake (a 1 ms window over a day), as in
 * tb_winacc. */
#define LAYER_MAX_CELLS (UINT64_C(20) * 1000 * 1000)

struct pending {
    int64_t t;
    double units;
    uint32_t row, caller_row, group;
    bool completes;
};

struct edge {
    struct tb_layer_edge_win *win; /* NULL until the first call */
    uint32_t c;                    /* calls outstanding */
    int64_t last;                  /* integrated up to here */
};

struct tb_layer {
    int64_t width, t0, t1;
    size_t nwin;
    uint32_t nrows, ngroups;
    struct tb_layer_win *win; /* nrows x nwin */
    uint32_t *n, *c;          /* per row: in flight, calls outstanding */
    int64_t *last;            /* per row: integrated up to here */
    struct edge *edges;       /* nrows x ngroups */
    struct pending *heap;
    size_t nheap, cap, max_heap;
    int64_t last_arrival;
    bool finished;
};

int tb_layer_new(struct tb_layer **out, int64_t width_ns, int64_t from_ns, int64_t to_ns,
                 uint32_t nrows, uint32_t ngroups)
{
    *out = NULL;
    int64_t t0, tl;
    if (width_ns <= 0 || to_ns <= from_ns || nrows == 0 || ngroups == 0)
        return TB_E_INVAL;
    if (tb_win_floor(from_ns, width_ns, &t0) || tb_win_floor(to_ns - 1, width_ns, &tl) ||
        tl > INT64_MAX - width_ns)
        return TB_E_INVAL;
    uint64_t nwin = ((uint64_t)tl - (uint64_t)t0) / (uint64_t)width_ns + 1;
    if (nwin > LAYER_MAX_CELLS / nrows)
        return TB_E_FULL;
    struct tb_layer *L = calloc(1, sizeof *L);
    if (!L)
        return TB_E_NOMEM;
    L->width = width_ns;
    L->t0 = t0;
    L->t1 = tl + width_ns;
    L->nwin = (size_t)nwin;
    L->nrows = nrows;
    L->ngroups = ngroups;
    L->last_arrival = INT64_MIN;
    L->win = calloc((size_t)nrows * L->nwin, sizeof *L->win);
    L->n = calloc(nrows, sizeof *L->n);
    L->c = calloc(nrows, sizeof *L->c);
    L->last = malloc(nrows * sizeof *L->last);
    L->edges = calloc((size_t)nrows * ngroups, sizeof *L->edges);
    if (!L->win || !L->n || !L->c || !L->last || !L->edges) {
        tb_layer_free(L);
        return TB_E_NOMEM;
    }
    for (uint32_t r = 0; r < nrows; r++)
        L->last[r] = INT64_MIN;
    for (size_t e = 0; e < (size_t)nrows * ngroups; e++)
        L->edges[e].last = INT64_MIN;
    *out = L;
    return 0;
}

void tb_layer_free(struct tb_layer *L)
{
    if (!L)
        return;
    if (L->edges)
        for (size_t e = 0; e < (size_t)L->nrows * L->ngroups; e++)
            free(L->edges[e].win);
    free(L->edges);
    free(L->win);
    free(L->n);
    free(L->c);
    free(L->last);
    free(L->heap);
    free(L);
}

/* ---- integration ------------------------------------------------------------------ */

/* Calls f(window, overlap_ns) for each window [a, b) overlaps inside the range. */
#define FOR_OVERLAPS(L, a, b, k, ov, body)                                                  \
    do {                                                                                     \
        int64_t lo_ = (a) < (L)->t0 ? (L)->t0 : (a), hi_ = (b) > (L)->t1 ? (L)->t1 : (b);    \
        if (lo_ < hi_) {                                                                     \
            size_t k = (size_t)((uint64_t)(lo_ - (L)->t0) / (uint64_t)(L)->width);           \
            int64_t ws_ = (L)->t0 + (int64_t)k * (L)->width;                                 \
            while (lo_ < hi_) {                                                              \
                int64_t we_ = ws_ + (L)->width, e_ = hi_ < we_ ? hi_ : we_;                  \
                int64_t ov = e_ - lo_;                                                       \
                body;                                                                        \
                lo_ = e_;                                                                    \
                ws_ = we_;                                                                   \
                k++;                                                                         \
            }                                                                                \
        }                                                                                    \
    } while (0)

/* Adds row r's constant state since its last event up to t. */
static void row_to(struct tb_layer *L, uint32_t r, int64_t t)
{
    int64_t a = L->last[r];
    if (t <= a)
        return;
    L->last[r] = t;
    uint32_t n = L->n[r], m = L->c[r] < n ? L->c[r] : n;
    if (n == 0)
        return;
    struct tb_layer_win *w = L->win + (size_t)r * L->nwin;
    FOR_OVERLAPS(L, a, t, k, ov, {
        w[k].load_ns += ov * (int64_t)n;
        w[k].wait_ns += ov * (int64_t)m;
        if (n > w[k].max_n)
            w[k].max_n = n;
        if (L->c[r] > w[k].max_c)
            w[k].max_c = L->c[r];
    });
}

static void edge_to(struct tb_layer *L, struct edge *e, int64_t t)
{
    int64_t a = e->last;
    if (t <= a)
        return;
    e->last = t;
    uint32_t c = e->c;
    if (c == 0)
        return;
    struct tb_layer_edge_win *w = e->win;
    FOR_OVERLAPS(L, a, t, k, ov, {
        w[k].calls_ns += ov * (int64_t)c;
        if (c > w[k].max_calls) {
            w[k].max_calls = c;
            w[k].at_max_ns = ov;
        } else if (c == w[k].max_calls) {
            w[k].at_max_ns += ov;
        }
    });
}

/* The window holding t, or SIZE_MAX outside the range. */
static size_t win_of(const struct tb_layer *L, int64_t t)
{
    if (t < L->t0 || t >= L->t1)
        return SIZE_MAX;
    return (size_t)((uint64_t)(t - L->t0) / (uint64_t)L->width);
}

/* A request (or call) starts (+1) or ends (-1) at t. */
static void change(struct tb_layer *L, const struct pending *p, int64_t t, int d)
{
    row_to(L, p->row, t);
    L->n[p->row] = (uint32_t)((int64_t)L->n[p->row] + d);
    if (p->caller_row) {
        struct edge *e = &L->edges[(size_t)p->caller_row * L->ngroups + p->group];
        row_to(L, p->caller_row, t);
        edge_to(L, e, t);
        L->c[p->caller_row] = (uint32_t)((int64_t)L->c[p->caller_row] + d);
        e->c = (uint32_t)((int64_t)e->c + d);
        size_t k = win_of(L, t);
        if (d > 0 && k != SIZE_MAX)
            e->win[k].started++;
    }
}

/* ---- the departure heap -------------------------------------------------------------- */

static bool pending_before(const struct pending *a, const struct pending *b)
{
    return a->t < b->t;
}

TB_HEAP_DEFINE(pending_heap, struct pending, pending_before)

static int heap_push(struct tb_layer *L, const struct pending *p)
{
    int rc = pending_heap_push(&L->heap, &L->nheap, &L->cap, p);
    if (rc)
        return rc;
    if (L->nheap > L->max_heap)
        L->max_heap = L->nheap;
    return 0;
}

/* Handles every departure at or before t. */
static void depart_until(struct tb_layer *L, int64_t t)
{
    while (L->nheap && L->heap[0].t <= t) {
        struct pending p;
        pending_heap_pop(L->heap, &L->nheap, &p);
        change(L, &p, p.t, -1);
        size_t k = win_of(L, p.t);
        if (p.completes && k != SIZE_MAX) {
            struct tb_layer_win *w = &L->win[(size_t)p.row * L->nwin + k];
            w->completions++;
            w->work_units += p.units;
        }
    }
}

/* ---- the public side ----------------------------------------------------------------- */

int tb_layer_add(struct tb_layer *L, const struct tb_request *r, uint32_t row, uint32_t caller_row,
                 uint32_t group, double units)
{
    if (L->finished || row == 0 || row >= L->nrows || caller_row >= L->nrows ||
        (caller_row && (group == 0 || group >= L->ngroups)) || caller_row == row ||
        r->departure_ns < r->arrival_ns || r->arrival_ns < L->last_arrival)
        return TB_E_INVAL;
    L->last_arrival = r->arrival_ns;
    /* Entirely outside the range: nothing to count (its state would be zero
     * by the time the range starts, or it comes after the range ends). */
    if (r->departure_ns < L->t0 || r->arrival_ns >= L->t1)
        return 0;
    if (caller_row) {
        struct edge *e = &L->edges[(size_t)caller_row * L->ngroups + group];
        if (!e->win && !(e->win = calloc(L->nwin, sizeof *e->win)))
            return TB_E_NOMEM;
    }
    depart_until(L, r->arrival_ns);
    struct pending p = {.t = r->departure_ns, .units = units, .row = row,
                        .caller_row = caller_row, .group = group,
                        .completes = !(r->flags & TB_REQ_NORESP)};
    int rc = heap_push(L, &p);
    if (rc)
        return rc;
    change(L, &p, r->arrival_ns, +1);
    size_t k = win_of(L, r->arrival_ns);
    if (k != SIZE_MAX)
        L->win[(size_t)row * L->nwin + k].arrivals++;
    return 0;
}

int tb_layer_finish(struct tb_layer *L)
{
    if (L->finished)
        return TB_E_INVAL;
    depart_until(L, INT64_MAX);
    for (uint32_t r = 1; r < L->nrows; r++)
        row_to(L, r, L->t1);
    for (size_t e = 0; e < (size_t)L->nrows * L->ngroups; e++)
        if (L->edges[e].win)
            edge_to(L, &L->edges[e], L->t1);
    L->finished = true;
    return 0;
}

size_t tb_layer_nwindows(const struct tb_layer *L)
{
    return L->nwin;
}

int64_t tb_layer_start(const struct tb_layer *L)
{
    return L->t0;
}

const struct tb_layer_win *tb_layer_row(const struct tb_layer *L, uint32_t row)
{
    return row < L->nrows ? L->win + (size_t)row * L->nwin : NULL;
}

const struct tb_layer_edge_win *tb_layer_edge(const struct tb_layer *L, uint32_t caller_row,
                                              uint32_t group)
{
    if (caller_row >= L->nrows || group >= L->ngroups)
        return NULL;
    return L->edges[(size_t)caller_row * L->ngroups + group].win;
}

size_t tb_layer_max_inflight(const struct tb_layer *L)
{
    return L->max_heap;
}
