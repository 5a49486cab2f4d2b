/* SPDX-License-Identifier: MIT */
/* test_sort.c — common/sort.h: the radix sort against qsort with the
 * original position as the tie-break (so stability is checked too) on random
 * keys with many duplicates, negative keys, spans that need 1 to 6 passes and
 * an element larger than its key; tb_radix_sort_i64 the same way on records
 * of 16, 24 and 32 bytes (its inlined and generic copies); the heap against a sorted copy of what was
 * pushed, popped interleaved with pushes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"

struct item {
    int64_t key;
    uint32_t pos;       /* position before sorting */
    char payload[13];   /* an odd size, derived from pos */
};

static uint64_t item_key(const void *e, const void *ctx)
{
    (void)ctx;
    return tb_sort_key_i64(((const struct item *)e)->key);
}

/* The reference order: qsort on (key, original position). */
static int item_cmp(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* A small xorshift so that the data are the same on every run. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_sort(size_t n, int64_t lo, uint64_t span)
{
    struct item *v = malloc((n ? n : 1) * sizeof *v), *ref = malloc((n ? n : 1) * sizeof *ref);
    assert_non_null(v);
    assert_non_null(ref);
    for (size_t i = 0; i < n; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].key = (int64_t)((uint64_t)lo + (span == UINT64_MAX ? next() : next() % (span + 1)));
        v[i].pos = (uint32_t)i;
        snprintf(v[i].payload, sizeof v[i].payload, "p%zu", i);
    }
    memcpy(ref, v, n * sizeof *v);
    qsort(ref, n, sizeof *ref, item_cmp);
    struct item *w = malloc((n ? n : 1) * sizeof *w);
    assert_non_null(w);
    memcpy(w, v, n * sizeof *v);
    assert_int_equal(tb_radix_sort(v, n, sizeof *v, item_key, NULL), 0);
    assert_int_equal(tb_radix_sort_i64(w, n, sizeof *w), 0); /* 32 bytes: the generic copy */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].key, ref[i].key);
        assert_int_equal(v[i].pos, ref[i].pos);
        assert_string_equal(v[i].payload, ref[i].payload);
        assert_int_equal(w[i].key, ref[i].key);
        assert_int_equal(w[i].pos, ref[i].pos);
        assert_string_equal(w[i].payload, ref[i].payload);
    }
    /* 16- and 24-byte records (the inlined copies): key, original position,
     * and for 24 a payload derived from it. */
    struct r16 {
        int64_t key;
        uint64_t pos;
    } *a = malloc((n ? n : 1) * sizeof *a);
    struct r24 {
        int64_t key;
        uint64_t pos, sq;
    } *b = malloc((n ? n : 1) * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    /* In the original order (ref's positions), then sorted. */
    for (size_t i = 0; i < n; i++) {
        a[ref[i].pos] = (struct r16){ref[i].key, ref[i].pos};
        b[ref[i].pos] = (struct r24){ref[i].key, ref[i].pos, (uint64_t)ref[i].pos * ref[i].pos};
    }
    assert_int_equal(tb_radix_sort_i64(a, n, sizeof *a), 0);
    assert_int_equal(tb_radix_sort_i64(b, n, sizeof *b), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a[i].key, ref[i].key);
        assert_int_equal(a[i].pos, ref[i].pos);
        assert_int_equal(b[i].key, ref[i].key);
        assert_int_equal(b[i].pos, ref[i].pos);
        assert_int_equal(b[i].sq, (uint64_t)ref[i].pos * ref[i].pos);
    }
    free(a);
    free(b);
    free(w);
    free(v);
    free(ref);
}

static void test_radix(void **state)
{
    (void)state;
    check_sort(0, 0, 10);
    check_sort(1, -5, 10);
    check_sort(2, 7, 0);                   /* equal keys: order kept, no pass */
    check_sort(1000, 0, 3);                /* mostly duplicates */
    check_sort(5000, -1000, 2000);         /* negative and positive, one pass */
    check_sort(5000, -3000000, 5000000);   /* three passes */
    check_sort(3000, INT64_MIN, UINT64_MAX); /* the whole range: six passes */
    check_sort(3000, 1700000000000000000, 60000000000); /* ns timestamps, a minute */
    check_sort(4096, INT64_MAX - 100, 100); /* near the top, no overflow */
}

/* Unsigned keys as given, with a context. */
static uint64_t u_key(const void *e, const void *ctx)
{
    return *(const uint32_t *)e % *(const uint32_t *)ctx;
}

static void test_radix_ctx(void **state)
{
    (void)state;
    uint32_t v[] = {17, 4, 9, 23, 5, 14, 3}, mod = 10;
    /* Keys 7 4 9 3 5 4 3: stable, so 23 before 3 and 4 before 14. */
    uint32_t want[] = {23, 3, 4, 14, 5, 17, 9};
    assert_int_equal(tb_radix_sort(v, 7, sizeof v[0], u_key, &mod), 0);
    assert_memory_equal(v, want, sizeof v);
}

struct hev {
    int64_t t;
    uint32_t seq;
};

static bool hev_less(const struct hev *a, const struct hev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

TB_HEAP_DEFINE(hev_heap, struct hev, hev_less)

static int hev_cmp(const void *a, const void *b)
{
    return hev_less(a, b) ? -1 : hev_less(b, a) ? 1 : 0;
}

static void test_heap(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct hev *h = NULL, *all = malloc(N * sizeof *all), *ref = malloc(N * sizeof *ref);
    size_t n = 0, cap = 0, npushed = 0, nref = 0, npopped = 0;
    assert_non_null(all);
    assert_non_null(ref);
    /* Pushes and pops interleaved, two pushes to one pop, then drained,
     * against a reference kept sorted by insertion (least first). Keys
     * repeat (t in [-500, 500)); seq tells the equals apart. */
    while (npushed < N || n > 0) {
        if (npushed < N && (n == 0 || next() % 3 != 0)) {
            struct hev x = {(int64_t)(next() % 1000) - 500, (uint32_t)npushed};
            all[npushed++] = x;
            assert_int_equal(hev_heap_push(&h, &n, &cap, &x), 0);
            size_t at = nref;
            while (at > 0 && hev_less(&x, &ref[at - 1]))
                at--;
            memmove(&ref[at + 1], &ref[at], (nref - at) * sizeof *ref);
            ref[at] = x;
            nref++;
        } else {
            struct hev x;
            hev_heap_pop(h, &n, &x);
            assert_int_equal(x.t, ref[0].t);
            assert_int_equal(x.seq, ref[0].seq);
            memmove(&ref[0], &ref[1], --nref * sizeof *ref);
            npopped++;
        }
        assert_int_equal(n, nref);
    }
    assert_int_equal(npopped, N);
    /* All pushed first, then drained: the pops are the input as qsort
     * orders it. */
    for (size_t i = 0; i < N; i++)
        assert_int_equal(hev_heap_push(&h, &n, &cap, &all[i]), 0);
    qsort(all, N, sizeof *all, hev_cmp);
    for (size_t i = 0; i < N; i++) {
        struct hev x;
        hev_heap_pop(h, &n, &x);
        assert_int_equal(x.t, all[i].t);
        assert_int_equal(x.seq, all[i].seq);
    }
    assert_int_equal(n, 0);
    free(h);
    free(all);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_radix),
        cmocka_unit_test(test_radix_ctx),
        cmocka_unit_test(test_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
