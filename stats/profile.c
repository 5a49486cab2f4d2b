/* SPDX-License-Identifier: MIT */
/* profile.c — the per-class response-time profile (pt-query-digest's first
 * table) of a tier's requests: count, mean, p50/p95/p99, share of time. */
#include <stdlib.h>

#include "stats.h"

struct sample {
    uint32_t class_id;
    int64_t rt_ns;
};

static int by_class_rt(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    if (x->class_id != y->class_id)
        return x->class_id < y->class_id ? -1 : 1;
    return (x->rt_ns > y->rt_ns) - (x->rt_ns < y->rt_ns);
}

static int by_total(const void *a, const void *b)
{
    const struct tb_class_profile *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return (x->class_id > y->class_id) - (x->class_id < y->class_id);
}

/* Nearest rank: the smallest sample with at least p% of the samples at or
 * below it (rank ceil(p/100 x n)), computed in integers so that p95 of 20
 * samples is the 19th, not the 20th by a rounding error. */
static int64_t rank(const struct sample *s, uint64_t n, unsigned p)
{
    uint64_t k = (n * p + 99) / 100;
    return s[k ? k - 1 : 0].rt_ns;
}

int tb_class_profile(const struct tb_request *rq, size_t n, uint32_t server, int64_t from_ns,
                     int64_t to_ns, struct tb_class_profile **out, size_t *nout,
                     int64_t *total_ns)
{
    *out = NULL;
    *nout = 0;
    *total_ns = 0;
    struct sample *s = malloc((n ? n : 1) * sizeof *s);
    if (!s)
        return TB_E_NOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tb_request *r = &rq[i];
        if ((server && r->server != server) || r->departure_ns < from_ns ||
            r->departure_ns >= to_ns)
            continue;
        s[m].class_id = r->class_id;
        s[m].rt_ns = r->departure_ns - r->arrival_ns;
        m++;
    }
    qsort(s, m, sizeof *s, by_class_rt);
    size_t rows = 0;
    for (size_t i = 0; i < m; i++)
        if (!i || s[i].class_id != s[i - 1].class_id)
            rows++;
    struct tb_class_profile *p = rows ? calloc(rows, sizeof *p) : NULL;
    if (rows && !p) {
        free(s);
        return TB_E_NOMEM;
    }
    int64_t all = 0;
    size_t r = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        int64_t sum = 0;
        while (j < m && s[j].class_id == s[i].class_id)
            sum += s[j++].rt_ns;
        uint64_t c = j - i;
        p[r] = (struct tb_class_profile){
            .class_id = s[i].class_id,
            .count = c,
            .total_ns = sum,
            .mean_ns = (double)sum / (double)c,
            .p50_ns = rank(s + i, c, 50),
            .p95_ns = rank(s + i, c, 95),
            .p99_ns = rank(s + i, c, 99),
            .max_ns = s[j - 1].rt_ns,
        };
        all += sum;
        r++;
        i = j;
    }
    free(s);
    for (size_t k = 0; k < rows; k++)
        p[k].share = all > 0 ? (double)p[k].total_ns / (double)all : 0;
    if (rows)
        qsort(p, rows, sizeof *p, by_total);
    *out = p;
    *nout = rows;
    *total_ns = all;
    return 0;
}
