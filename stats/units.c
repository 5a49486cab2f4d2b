/* SPDX-License-Identifier: MIT */
/* units.c — the work units of a request by its class and arrival (one row of
 * service times per class and period), looked up once per request by the
 * window computation. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

int tb_class_service_cmp(const void *a, const void *b)
{
    const struct tb_class_service *x = a, *y = b;
    if (x->class_id != y->class_id)
        return x->class_id < y->class_id ? -1 : 1;
    return (x->period_start_ns > y->period_start_ns) - (x->period_start_ns < y->period_start_ns);
}

struct tb_units {
    struct tb_class_service *rows; /* sorted by class, period */
    size_t n;
    uint32_t *first, *count;       /* by class id */
    int64_t *step;                 /* by class id: period spacing when regular, else 0 */
    uint32_t nclass;
    double def;
};

int tb_units_new(struct tb_units **out, const struct tb_class_service *svc, size_t n,
                 double default_units)
{
    if (!out || (n && !svc) || n > UINT32_MAX)
        return TB_E_INVAL;
    struct tb_units *u = calloc(1, sizeof *u);
    if (!u)
        return TB_E_NOMEM;
    u->def = default_units;
    u->n = n;
    uint32_t maxid = 0;
    for (size_t i = 0; i < n; i++)
        maxid = TB_MAX(maxid, svc[i].class_id);
    u->nclass = maxid + 1;
    u->rows = malloc((n ? n : 1) * sizeof *u->rows);
    u->first = calloc(u->nclass, sizeof *u->first);
    u->count = calloc(u->nclass, sizeof *u->count);
    u->step = calloc(u->nclass, sizeof *u->step);
    if (!u->rows || !u->first || !u->count || !u->step) {
        tb_units_free(u);
        return TB_E_NOMEM;
    }
    if (n)
        memcpy(u->rows, svc, n * sizeof *svc);
    qsort(u->rows, n, sizeof *u->rows, tb_class_service_cmp);
    for (size_t i = n; i > 0; i--) {
        uint32_t c = u->rows[i - 1].class_id;
        u->first[c] = (uint32_t)(i - 1);
        u->count[c]++;
    }
    /* Rows of tb_service_estimate are one per period with requests, so a
     * busy class's periods are evenly spaced: then the row is found by one
     * division instead of a search (this runs once per request). */
    for (uint32_t c = 0; c < u->nclass; c++) {
        if (u->count[c] < 2)
            continue;
        const struct tb_class_service *r = &u->rows[u->first[c]];
        int64_t st = r[1].period_start_ns - r[0].period_start_ns;
        bool regular = st > 0;
        for (uint32_t k = 1; regular && k < u->count[c]; k++)
            regular = r[k].period_start_ns - r[k - 1].period_start_ns == st;
        u->step[c] = regular ? st : 0;
    }
    *out = u;
    return 0;
}

double tb_units_get(const struct tb_units *u, uint32_t class_id, int64_t arrival_ns)
{
    if (!u || class_id >= u->nclass || !u->count[class_id])
        return u ? u->def : 1.0;
    const struct tb_class_service *r = &u->rows[u->first[class_id]];
    if (u->step[class_id]) {
        if (arrival_ns <= r[0].period_start_ns)
            return r[0].units;
        uint64_t k = ((uint64_t)arrival_ns - (uint64_t)r[0].period_start_ns) /
                     (uint64_t)u->step[class_id];
        return r[TB_MIN(k, (uint64_t)u->count[class_id] - 1)].units;
    }
    size_t lo = 0, hi = u->count[class_id];
    /* Last row whose period starts at or before the arrival (or the first). */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].period_start_ns <= arrival_ns)
            lo = mid;
        else
            hi = mid;
    }
    return r[lo].units;
}

void tb_units_free(struct tb_units *u)
{
    if (!u)
        return;
    free(u->rows);
    free(u->first);
    free(u->count);
    free(u->step);
    free(u);
}
