/* SPDX-License-Identifier: MIT */
/* test_util.c — common/util.c: growing arrays (doubling, zeroed growth,
 * overflow refused with the array untouched), comparators, the nearest-rank
 * quantile against the definition counted out by hand, and Pearson's r
 * against textbook values and a one-pass long-double computation; CSV
 * fields against RFC 4180 written out by hand; the error-buffer formatter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void test_grow(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    assert_int_equal(tb_grow(&v, &cap, 0, sizeof *v), 0);
    assert_null(v);
    for (size_t n = 1; n <= 1000; n++) {
        assert_int_equal(tb_grow(&v, &cap, n, sizeof *v), 0);
        assert_true(cap >= n && cap >= 16 && (cap & (cap - 1)) == 0); /* 16, 32, 64, ... */
        v[n - 1] = (int)n;
    }
    assert_int_equal(cap, 1024);
    for (size_t n = 1; n <= 1000; n++)
        assert_int_equal(v[n - 1], (int)n);
    /* Overflow of need x elem: refused, nothing changed. */
    int *before = v;
    assert_int_equal(tb_grow(&v, &cap, SIZE_MAX / 2, 16), TB_E_NOMEM);
    assert_int_equal(tb_grow(&v, &cap, SIZE_MAX, 1), TB_E_NOMEM);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 1024);
    free(v);

    uint64_t *z = NULL;
    size_t zc = 0;
    assert_int_equal(tb_grow_zero(&z, &zc, 3, sizeof *z), 0);
    for (size_t i = 0; i < zc; i++)
        z[i] = 7;
    size_t old = zc;
    assert_int_equal(tb_grow_zero(&z, &zc, 100, sizeof *z), 0);
    for (size_t i = 0; i < zc; i++)
        assert_int_equal(z[i], i < old ? 7 : 0);
    free(z);
}

static void test_cmp_quantile(void **state)
{
    (void)state;
    int64_t a[] = {5, -3, INT64_MAX, INT64_MIN, 0, 5};
    qsort(a, 6, sizeof *a, tb_cmp_i64);
    const int64_t sa[] = {INT64_MIN, -3, 0, 5, 5, INT64_MAX};
    assert_memory_equal(a, sa, sizeof a);
    uint32_t u[] = {3, UINT32_MAX, 0};
    qsort(u, 3, sizeof *u, tb_cmp_u32);
    assert_true(u[0] == 0 && u[1] == 3 && u[2] == UINT32_MAX);
    double d[] = {0.5, -1e300, 2, -0.25};
    qsort(d, 4, sizeof *d, tb_cmp_double);
    assert_true(d[0] == -1e300 && d[1] == -0.25 && d[2] == 0.5 && d[3] == 2);
    /* Nearest rank over 1..n: the value of rank ceil(q·n), at least 1. */
    for (size_t n = 1; n <= 40; n++) {
        int64_t v[40];
        double w[40];
        for (size_t i = 0; i < n; i++) {
            v[i] = (int64_t)(i + 1) * 10;
            w[i] = (double)(i + 1) / 4;
        }
        for (int k = 0; k <= 20; k++) {
            double q = k / 20.0;
            size_t rank = 1; /* smallest r with r >= q·n, counted, not computed */
            while ((double)rank < q * (double)n)
                rank++;
            assert_int_equal(tb_quantile_i64(v, n, q), (int64_t)rank * 10);
            assert_true(tb_quantile(w, n, q) == (double)rank / 4);
        }
    }
}

static void test_pearson(void **state)
{
    (void)state;
    const double x[] = {1, 2, 3, 4, 5}, y[] = {2, 4, 6, 8, 10}, ny[] = {5, 4, 3, 2, 1};
    assert_true(fabs(tb_pearson(x, y, 5) - 1) < 1e-15);
    assert_true(fabs(tb_pearson(x, ny, 5) + 1) < 1e-15);
    /* Anscombe's first set: r = 0.81642. */
    const double ax[] = {10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5};
    const double ay[] = {8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68};
    assert_true(fabs(tb_pearson(ax, ay, 11) - 0.81642) < 1e-5);
    /* Undefined: fewer than 3 pairs, a constant series. */
    assert_true(isnan(tb_pearson(x, y, 2)));
    const double c[] = {3, 3, 3, 3, 3};
    assert_true(isnan(tb_pearson(x, c, 5)));
    /* Large, nearly constant values keep their accuracy (against long
     * double sums). */
    double bx[200], by[200];
    long double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (int i = 0; i < 200; i++) {
        bx[i] = 1e9 + (i % 7);
        by[i] = 5e8 + (i % 7) * 0.5 + (i % 3);
        sx += bx[i];
        sy += by[i];
    }
    long double mx = sx / 200, my = sy / 200;
    for (int i = 0; i < 200; i++) {
        sxx += (bx[i] - mx) * (bx[i] - mx);
        syy += (by[i] - my) * (by[i] - my);
        sxy += (bx[i] - mx) * (by[i] - my);
    }
    double want = (double)(sxy / sqrtl(sxx * syy));
    assert_true(fabs(tb_pearson(bx, by, 200) - want) < 1e-12);
}

/* What tb_csv_field_n / tb_csv_field write, read back from a memory stream. */
static void test_csv_field(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    tb_csv_field(f, "plain");
    putc('|', f);
    tb_csv_field(f, "");
    putc('|', f);
    tb_csv_field(f, "GET /a,b");
    putc('|', f);
    tb_csv_field(f, "say \"hi\"");
    putc('|', f);
    tb_csv_field(f, "two\r\nlines");
    putc('|', f);
    tb_csv_field_n(f, "ab\0\"c", 5); /* a NUL inside is kept, the quote doubled */
    putc('|', f);
    tb_csv_field_n(f, "x,yz", 3);     /* only len bytes: "x,y" */
    assert_int_equal(fclose(f), 0);
    static const char want[] = "plain||\"GET /a,b\"|\"say \"\"hi\"\"\"|\"two\r\nlines\"|"
                               "\"ab\0\"\"c\"|\"x,y\"";
    assert_int_equal(len, sizeof want - 1);
    assert_memory_equal(buf, want, len);
    free(buf);
}

/* tb_mix64: 0 stays 0 (the finaliser is a bijection with no constant);
 * one flipped input bit flips about half of the output bits (mean over
 * 64 bits x 256 keys within 32 +- 2); 4096 consecutive keys spread over
 * 4096 slots (key & 4095) with no slot holding more than 10 of them. */
static void test_mix64(void **state)
{
    (void)state;
    assert_true(tb_mix64(0) == 0);
    double flips = 0;
    int n = 0;
    for (uint64_t k = 1; k <= 256; k++)
        for (int b = 0; b < 64; b++, n++)
            flips += __builtin_popcountll(tb_mix64(k) ^ tb_mix64(k ^ (1ull << b)));
    flips /= n;
    assert_true(flips > 30.0 && flips < 34.0);
    unsigned slot[4096] = {0}, worst = 0;
    for (uint64_t k = 0; k < 4096; k++) {
        unsigned *c = &slot[tb_mix64(k) & 4095];
        if (++*c > worst)
            worst = *c;
    }
    assert_true(worst <= 10);
}

static void test_seterr(void **state)
{
    (void)state;
    char e[8] = "UNTOUCH"; /* a sentinel: must survive the calls that may not write */
    tb_seterr(NULL, 10, "%d", 1); /* no buffer: nothing, no crash */
    tb_seterr(e, 0, "%d", 1);     /* no room: untouched */
    assert_string_equal(e, "UNTOUCH");
    tb_seterr(e, sizeof e, "tier '%s' %d", "db", 42);
    assert_string_equal(e, "tier 'd"); /* cut to fit, NUL-terminated */
}

/* The heap against a sorted copy: pushes and pops interleaved, duplicates
 * and negative values included, every pop the smallest value still held. */
static void test_i64heap(void **state)
{
    (void)state;
    struct tb_i64heap h = {0};
    int64_t held[600];
    size_t nheld = 0;
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < 3000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (nheld < 600 && (x % 3 || !nheld)) {
            int64_t v = (int64_t)(x % 401) - 200;
            assert_int_equal(tb_i64heap_push(&h, v), 0);
            held[nheld++] = v;
        } else {
            size_t lo = 0;
            for (size_t i = 1; i < nheld; i++)
                if (held[i] < held[lo])
                    lo = i;
            assert_int_equal(tb_i64heap_pop(&h), held[lo]);
            held[lo] = held[--nheld];
        }
        assert_int_equal(h.n, nheld);
    }
    tb_i64heap_free(&h);
    assert_null(h.v);
    assert_int_equal(h.n, 0);
}

/* The pool of slots against a naive model: a list of what is in flight
 * (time, order of arrival, slot, the entry's contents) searched for the
 * first to leave, and the free slots as a stack on top of the numbers never
 * used (so slot k is the k-th new one whatever the growth steps). Times
 * from 40 values, so that many are equal: with distinct ties (arrival
 * numbers, wrapping past UINT32_MAX on the way) equal times must leave in
 * arrival order; with all ties 0, any of the equal ones may. Entries are
 * 24 bytes and must keep their contents across growths. */
struct slot_rec {
    int64_t d, seq;
    int32_t slot;
};

static void test_slots(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        struct tb_slots p = {.size = 3 * sizeof(int64_t)};
        struct slot_rec held[700];
        size_t nheld = 0;
        int32_t freed[700];
        size_t nfreed = 0;
        int32_t fresh = 0;
        int64_t seq = 0;
        uint32_t tie0 = UINT32_MAX - 300;
        uint64_t x = 0x2545f4914f6cdd1dull + (uint64_t)mode;
        for (int step = 0; step < 20000; step++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (nheld < 700 && (x % 5 < 3 || !nheld)) {
                int32_t slot, want = nfreed ? freed[--nfreed] : fresh++;
                assert_int_equal(tb_slots_take(&p, &slot), 0);
                assert_int_equal(slot, want);
                int64_t d = (int64_t)(x >> 8) % 40;
                int64_t *v = tb_slots_at(&p, slot);
                v[0] = d;
                v[1] = seq;
                v[2] = -slot;
                tb_slots_push(&p, d, mode ? tie0 + (uint32_t)seq : 0, slot);
                held[nheld++] = (struct slot_rec){d, seq++, slot};
            } else {
                size_t lo = 0;
                for (size_t i = 1; i < nheld; i++)
                    if (held[i].d < held[lo].d ||
                        (held[i].d == held[lo].d && held[i].seq < held[lo].seq))
                        lo = i;
                assert_true(p.nheap > 0);
                int32_t slot = p.heap[0].slot;
                assert_int_equal(p.heap[0].d, held[lo].d);
                size_t k = lo;
                if (mode)
                    assert_int_equal(slot, held[lo].slot);
                else
                    for (k = 0; k < nheld && held[k].slot != slot; k++)
                        ;
                assert_true(k < nheld);
                assert_int_equal(held[k].d, held[lo].d);
                const int64_t *v = tb_slots_at(&p, slot);
                assert_int_equal(v[0], held[k].d);
                assert_int_equal(v[1], held[k].seq);
                assert_int_equal(v[2], -slot);
                tb_slots_pop(&p);
                tb_slots_put(&p, slot);
                freed[nfreed++] = slot;
                held[k] = held[--nheld];
            }
            assert_int_equal(p.nheap, nheld);
        }
        assert_true(seq > 300); /* the ties wrapped */
        tb_slots_free(&p);
        assert_null(p.v);
        assert_null(p.heap);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_cmp_quantile),
        cmocka_unit_test(test_pearson),
        cmocka_unit_test(test_csv_field),
        cmocka_unit_test(test_seterr), cmocka_unit_test(test_mix64),
        cmocka_unit_test(test_i64heap),
        cmocka_unit_test(test_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
