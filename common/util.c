/* SPDX-License-Identifier: MIT */
/* util.c — growing arrays, comparators, quantiles, correlation, CSV fields, error
 * text (util.h). */
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void **p = pp;
    if (need <= *cap)
        return 0;
    if (!elem)
        return TB_E_INVAL;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return TB_E_NOMEM;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem)
        return TB_E_NOMEM;
    void *np = realloc(*p, ncap * elem);
    if (!np)
        return TB_E_NOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

int tb_grow_zero(void *pp, size_t *cap, size_t need, size_t elem)
{
    size_t old = *cap;
    int rc = tb_grow(pp, cap, need, elem);
    if (!rc && *cap > old)
        memset((char *)*(void **)pp + old * elem, 0, (*cap - old) * elem);
    return rc;
}

int tb_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int tb_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int tb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t rank(size_t n, double q)
{
    size_t r = (size_t)ceil(q * (double)n);
    return TB_MIN(TB_MAX(r, (size_t)1), n);
}

int64_t tb_quantile_i64(const int64_t *sorted, size_t n, double q)
{
    return sorted[rank(n, q) - 1];
}

double tb_quantile(const double *sorted, size_t n, double q)
{
    return sorted[rank(n, q) - 1];
}

double tb_pearson(const double *x, const double *y, size_t n)
{
    if (n < 3)
        return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if (sxx <= 0 || syy <= 0)
        return NAN;
    return sxy / sqrt(sxx * syy);
}

void tb_seterr(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

void tb_csv_field_n(FILE *f, const char *s, size_t len)
{
    if (!memchr(s, ',', len) && !memchr(s, '"', len) && !memchr(s, '\n', len) &&
        !memchr(s, '\r', len)) {
        fwrite(s, 1, len, f);
        return;
    }
    putc('"', f);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            putc('"', f);
        putc(s[i], f);
    }
    putc('"', f);
}

void tb_csv_field(FILE *f, const char *s)
{
    tb_csv_field_n(f, s, strlen(s));
}

int tb_i64heap_push(struct tb_i64heap *h, int64_t x)
{
    if (tb_grow(&h->v, &h->cap, h->n + 1, sizeof *h->v))
        return TB_E_NOMEM;
    size_t i = h->n++;
    for (; i && h->v[(i - 1) / 2] > x; i = (i - 1) / 2)
        h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = x;
    return 0;
}

int64_t tb_i64heap_pop(struct tb_i64heap *h)
{
    int64_t *v = h->v, top = v[0], x = v[--h->n];
    size_t n = h->n, i = 0, l;
    /* While both children exist, the smaller is picked without a branch
     * (which one it is, is a coin toss the predictor loses); the left one
     * when they are equal. */
    while ((l = 2 * i + 1) + 1 < n) {
        size_t m = l + (v[l + 1] < v[l]);
        if (v[m] >= x)
            goto out;
        v[i] = v[m];
        i = m;
    }
    if (l < n && v[l] < x) {
        v[i] = v[l];
        i = l;
    }
out:
    if (n)
        v[i] = x;
    return top;
}

int tb_slots_take(struct tb_slots *p, int32_t *out)
{
    if (!p->nfree) {
        size_t cv = p->n, cf = p->n, ch = p->n;
        if (tb_grow(&p->v, &cv, p->n + 1, p->size) ||
            tb_grow(&p->free, &cf, p->n + 1, sizeof *p->free) ||
            tb_grow(&p->heap, &ch, p->n + 1, sizeof *p->heap))
            return TB_E_NOMEM;
        size_t n = TB_MIN(cv, TB_MIN(cf, ch));
        for (size_t k = n; k > p->n; k--)
            p->free[p->nfree++] = (int32_t)(k - 1);
        p->n = n;
    }
    *out = p->free[--p->nfree];
    return 0;
}

static bool slot_before(struct tb_slot a, struct tb_slot b)
{
    return a.d < b.d || (a.d == b.d && (int32_t)(a.tie - b.tie) < 0);
}

void tb_slots_push(struct tb_slots *p, int64_t d, uint32_t tie, int32_t slot)
{
    struct tb_slot x = {d, slot, tie};
    size_t i = p->nheap++;
    for (; i && slot_before(x, p->heap[(i - 1) / 2]); i = (i - 1) / 2)
        p->heap[i] = p->heap[(i - 1) / 2];
    p->heap[i] = x;
}

/* The last entry sinks from the top past every child strictly before it,
 * the left one first when both are: as a sift by swaps would (v0.8's
 * order of the pending requests in stats/service.c, which give all the
 * same tie). */
void tb_slots_pop(struct tb_slots *p)
{
    struct tb_slot x = p->heap[--p->nheap];
    size_t n = p->nheap, i = 0;
    if (!n)
        return;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        struct tb_slot xm = x;
        if (l < n && slot_before(p->heap[l], xm)) {
            m = l;
            xm = p->heap[l];
        }
        if (r < n && slot_before(p->heap[r], xm))
            m = r;
        if (m == i)
            break;
        p->heap[i] = p->heap[m];
        i = m;
    }
    p->heap[i] = x;
}

void tb_slots_free(struct tb_slots *p)
{
    free(p->v);
    free(p->free);
    free(p->heap);
    *p = (struct tb_slots){.size = p->size};
}

void tb_i64heap_free(struct tb_i64heap *h)
{
    free(h->v);
    *h = (struct tb_i64heap){0};
}
