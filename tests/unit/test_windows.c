/* SPDX-License-Identifier: MIT */
/* test_windows.c — per-window load, completions, work units and response
 * times against a brute-force O(requests x windows) computation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stats.h"

/* |a - b| <= eps, printing both values on failure (NAN fails). */
#define assert_near(a, b, eps)                                                             \
    do {                                                                                   \
        double a_ = (a), b_ = (b), e_ = (eps);                                             \
        if (!(fabs(a_ - b_) <= e_))                                                        \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, e_);            \
    } while (0)

#define MS TB_NS_PER_MS

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static struct tb_request mkreq(uint32_t server, int64_t a, int64_t d, uint32_t cls)
{
    struct tb_request r;
    memset(&r, 0, sizeof r);
    r.tier = 1;
    r.server = server;
    r.class_id = cls;
    r.arrival_ns = a;
    r.departure_ns = d;
    return r;
}

static void test_floor(void **state)
{
    (void)state;
    int64_t s;
    assert_int_equal(tb_win_floor(0, 50, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(tb_win_floor(49, 50, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(tb_win_floor(50, 50, &s), 0);
    assert_int_equal(s, 50);
    assert_int_equal(tb_win_floor(-1, 50, &s), 0);
    assert_int_equal(s, -50);
    assert_int_equal(tb_win_floor(-50, 50, &s), 0);
    assert_int_equal(s, -50);
    assert_int_equal(tb_win_floor(-51, 50, &s), 0);
    assert_int_equal(s, -100);
    /* INT64_MIN is a multiple of 2 but not of 50: its window would start
     * below the int64 range. */
    assert_int_equal(tb_win_floor(INT64_MIN, 2, &s), 0);
    assert_true(s == INT64_MIN);
    assert_int_equal(tb_win_floor(INT64_MIN, 50, &s), TB_E_INVAL);
    assert_int_equal(tb_win_floor(INT64_MAX, 10, &s), 0);
    assert_true(s == INT64_MAX - 7);
    assert_int_equal(tb_win_floor(5, 0, &s), TB_E_INVAL);
    assert_int_equal(tb_win_floor(5, -3, &s), TB_E_INVAL);
}

/* Hand-made: a request of exactly two windows, one starting and ending
 * inside a window, one spanning five windows from a boundary. */
static void test_hand(void **state)
{
    (void)state;
    struct tb_request rq[] = {
        mkreq(7, 0, 100 * MS, 1),           /* windows 0 and 1 full; departs in 2 */
        mkreq(7, 110 * MS, 120 * MS, 1),    /* inside window 2 */
        mkreq(7, 25 * MS, 275 * MS, 1),     /* half of 0, full 1..4, half of 5 */
    };
    struct tb_window *w;
    size_t n;
    uint32_t servers[] = {7};
    assert_int_equal(tb_windows_compute(rq, 3, NULL, 1, servers, 1, 50 * MS, 0, 300 * MS, &w, &n),
                     0);
    assert_int_equal(n, 12); /* 6 windows x (tier + 1 server) */
    const double load[6] = {1.5, 2.0, 1.2, 1.0, 1.0, 0.5};
    const uint32_t comp[6] = {0, 0, 2, 0, 0, 1};
    for (int row = 0; row < 2; row++) {
        for (int k = 0; k < 6; k++) {
            const struct tb_window *x = &w[row * 6 + k];
            assert_int_equal(x->start_ns, k * 50 * MS);
            assert_int_equal(x->width_ns, 50 * MS);
            assert_int_equal(x->server, row ? 7 : 0);
            assert_int_equal(x->tier, 1);
            assert_near(x->load, load[k], 1e-12);
            assert_int_equal(x->completions, comp[k]);
            assert_near(x->throughput, comp[k] * 20.0, 1e-9);
            assert_near(x->norm_throughput, comp[k] * 20.0, 1e-9);
        }
    }
    /* Window 2: response times 100 ms and 10 ms. */
    assert_near(w[2].rt_mean_ns, 55.0 * MS, 1e-3);
    /* Nearest rank of 2 values = the larger, reported within 3.2%. */
    assert_true(fabs(w[2].rt_p95_ns - 100.0 * MS) <= 0.032 * 100.0 * MS);
    assert_true(w[2].rt_p95_ns <= 100.0 * MS); /* never beyond the largest */
    assert_near(w[5].rt_p95_ns, 250.0 * MS, 1e-3); /* one value: exact (clamped) */
    free(w);
}

/* Negative epoch: windows aligned to multiples of w below zero. */
static void test_negative_epoch(void **state)
{
    (void)state;
    struct tb_request rq[] = {mkreq(1, -75, -10, 1)};
    struct tb_window *w;
    size_t n;
    assert_int_equal(tb_windows_compute(rq, 1, NULL, 1, NULL, 0, 50, INT64_MIN, INT64_MAX, &w, &n),
                     0);
    /* Range [-75, -9) → windows starting -100 and -50. */
    assert_int_equal(n, 2);
    assert_int_equal(w[0].start_ns, -100);
    assert_int_equal(w[1].start_ns, -50);
    assert_near(w[0].load, 25.0 / 50, 1e-15);
    assert_near(w[1].load, 40.0 / 50, 1e-15);
    assert_int_equal(w[0].completions, 0);
    assert_int_equal(w[1].completions, 1);
    free(w);
}

/* Flags and odd requests: NORESP adds load, no completion; departure before
 * arrival and other tiers are skipped; a zero-length request completes. */
static void test_special(void **state)
{
    (void)state;
    struct tb_request rq[4];
    rq[0] = mkreq(1, 10, 30, 1);
    rq[0].flags = TB_REQ_NORESP;
    rq[1] = mkreq(1, 40, 20, 1);
    rq[2] = mkreq(1, 10, 30, 1);
    rq[2].tier = 2;
    rq[3] = mkreq(1, 60, 60, 1);
    struct tb_winacc *acc;
    assert_int_equal(tb_winacc_new(&acc, 1, 50, 0, 100, NULL, 0), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tb_winacc_add(acc, &rq[i], 2.5), 0);
    assert_int_equal(tb_winacc_skipped(acc), 2);
    assert_int_equal(tb_winacc_nwindows(acc), 2);
    struct tb_window *w;
    size_t n;
    assert_int_equal(tb_winacc_finish(acc, &w, &n), 0);
    assert_int_equal(n, 2);
    assert_near(w[0].load, 20.0 / 50, 1e-15);
    assert_int_equal(w[0].completions, 0);
    assert_near(w[1].load, 0, 0);
    assert_int_equal(w[1].completions, 1);
    assert_near(w[1].work_units, 2.5, 0);
    assert_near(w[1].rt_mean_ns, 0, 0);
    free(w);
    tb_winacc_free(acc);
    /* Bad arguments. */
    assert_int_equal(tb_winacc_new(&acc, 1, 0, 0, 100, NULL, 0), TB_E_INVAL);
    assert_int_equal(tb_winacc_new(&acc, 1, 50, 100, 100, NULL, 0), TB_E_INVAL);
    uint32_t dup[] = {3, 3};
    assert_int_equal(tb_winacc_new(&acc, 1, 50, 0, 100, dup, 2), TB_E_INVAL);
    assert_int_equal(tb_winacc_new(&acc, 1, 1, 0, INT64_C(1) << 40, NULL, 0), TB_E_FULL);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Random requests against brute force, for several widths and epochs. */
static void check_random(int64_t width, int64_t base, size_t nreq, uint64_t seed)
{
    rng_state = seed;
    struct tb_request *rq = calloc(nreq, sizeof *rq);
    double *units = calloc(nreq, sizeof *units);
    assert_non_null(rq);
    int64_t span = 40 * width;
    for (size_t i = 0; i < nreq; i++) {
        int64_t a = base + (int64_t)(rnd() % (uint64_t)span);
        int64_t len;
        switch (rnd() % 5) {
        case 0:
            a = base + (int64_t)(rnd() % 40) * width; /* starts on a boundary */
            len = (int64_t)(rnd() % 4 + 1) * width;   /* and ends on one */
            break;
        case 1:
            len = 0;
            break;
        case 2:
            len = (int64_t)(rnd() % (uint64_t)(12 * width)); /* many windows */
            break;
        default:
            len = (int64_t)(rnd() % (uint64_t)width);
        }
        rq[i] = mkreq((uint32_t)(rnd() % 3 + 1), a, a + len, 1);
        units[i] = (double)(rnd() % 7 + 1) / 2;
    }
    /* Servers 1 and 3 listed; server 2 counts in the tier row only. */
    uint32_t servers[] = {3, 1};
    int64_t from = base + width / 3, to = base + span - width / 2;
    struct tb_winacc *acc;
    assert_int_equal(tb_winacc_new(&acc, 1, width, from, to, servers, 2), 0);
    for (size_t i = 0; i < nreq; i++)
        assert_int_equal(tb_winacc_add(acc, &rq[i], units[i]), 0);
    struct tb_window *w;
    size_t n;
    assert_int_equal(tb_winacc_finish(acc, &w, &n), 0);
    size_t nwin = tb_winacc_nwindows(acc);
    assert_int_equal(n, 3 * nwin);
    int64_t t0 = from - ((from % width) + width) % width;
    int64_t *rts = calloc(nreq, sizeof *rts);
    for (size_t row = 0; row < 3; row++) {
        for (size_t k = 0; k < nwin; k++) {
            const struct tb_window *x = &w[row * nwin + k];
            int64_t s = t0 + (int64_t)k * width, e = s + width;
            assert_int_equal(x->start_ns, s);
            /* Brute force: each request's overlap with this window, summed in
             * long double, and its completions listed one by one. */
            long double integ = 0, usum = 0;
            uint32_t comp = 0;
            long double rtsum = 0;
            size_t nrt = 0;
            int64_t lo = t0, hi = t0 + (int64_t)nwin * width;
            for (size_t i = 0; i < nreq; i++) {
                const struct tb_request *r = &rq[i];
                if (row && r->server != servers[row - 1])
                    continue;
                int64_t a = TB_MAX(TB_MAX(r->arrival_ns, s), lo);
                int64_t d = TB_MIN(TB_MIN(r->departure_ns, e), hi);
                if (d > a)
                    integ += (long double)(d - a) / (long double)width;
                if (r->departure_ns >= s && r->departure_ns < e) {
                    comp++;
                    usum += units[i];
                    rtsum += r->departure_ns - r->arrival_ns;
                    rts[nrt++] = r->departure_ns - r->arrival_ns;
                }
            }
            double expect = (double)integ;
            if (expect == 0)
                assert_true(x->load == 0);
            else
                assert_true(fabs(x->load - expect) / expect < 1e-9);
            assert_int_equal(x->completions, comp);
            assert_near(x->work_units, (double)usum, 1e-9);
            double wsec = (double)width / 1e9;
            assert_near(x->throughput, comp / wsec, 1e-6 * (comp / wsec) + 1e-9);
            if (comp) {
                assert_near(x->rt_mean_ns, (double)(rtsum / comp),
                                    1e-9 * (double)(rtsum / comp) + 1e-9);
                qsort(rts, nrt, sizeof *rts, cmp_i64);
                size_t rank = (size_t)ceil(0.95 * (double)nrt);
                double exact = (double)rts[rank - 1];
                assert_true(fabs(x->rt_p95_ns - exact) <= 0.0313 * exact + 1e-9);
            } else {
                assert_true(x->rt_mean_ns == 0 && x->rt_p95_ns == 0);
            }
        }
    }
    free(rts);
    free(w);
    free(rq);
    free(units);
    tb_winacc_free(acc);
}

static void test_random_brute(void **state)
{
    (void)state;
    check_random(50 * MS, INT64_C(1700000000) * TB_NS_PER_SEC, 3000, 11);
    check_random(50 * MS, -INT64_C(3) * TB_NS_PER_SEC - 17, 3000, 12); /* before 1970 */
    check_random(7, -1000, 2000, 13);                                   /* odd width */
    check_random(TB_NS_PER_SEC, 12345, 500, 14);
}

/* Loads of a long, dense trace keep their precision (one division). */
static void test_precision(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct tb_request *rq = calloc(N, sizeof *rq);
    rng_state = 99;
    int64_t base = INT64_C(1700000000123456789);
    for (size_t i = 0; i < N; i++) {
        int64_t a = base + (int64_t)(rnd() % (uint64_t)(10 * TB_NS_PER_SEC));
        rq[i] = mkreq(1, a, a + (int64_t)(rnd() % (uint64_t)(3 * TB_NS_PER_SEC)) + 1, 1);
    }
    struct tb_window *w;
    size_t n;
    assert_int_equal(tb_windows_compute(rq, N, NULL, 1, NULL, 0, 20 * MS, base,
                                        base + 10 * TB_NS_PER_SEC, &w, &n),
                     0);
    /* Total integral: Σ loads·w = Σ clipped durations, exactly. */
    long double sum = 0, expect = 0;
    for (size_t k = 0; k < n; k++)
        sum += (long double)w[k].load * (20 * MS);
    int64_t t0 = base - base % (20 * MS), t1 = t0 + (int64_t)n * 20 * MS;
    for (size_t i = 0; i < N; i++)
        expect += TB_MIN(rq[i].departure_ns, t1) - TB_MAX(rq[i].arrival_ns, t0);
    assert_true(fabsl(sum - expect) / expect < 1e-12L);
    free(w);
    free(rq);
}

/* Calls in flight per window, worked out by hand: the fraction of each
 * window with at least one call out, overlaps counted once, a call that
 * departs before it arrives skipped, calls outside the windows clipped. */
static void test_calls_busy(void **state)
{
    (void)state;
    struct tb_window w[4];
    memset(w, 0, sizeof w);
    for (int k = 0; k < 4; k++) {
        w[k].start_ns = 1000 * MS + k * 50 * MS;
        w[k].width_ns = 50 * MS;
        w[k].calls_busy = w[k].calls_load = 7; /* overwritten */
    }
    const int64_t t0 = 1000 * MS;
    struct tb_request c[] = {
        mkreq(0, t0 + 10 * MS, t0 + 30 * MS, 0),  /* window 0: 10..30 */
        mkreq(0, t0 + 20 * MS, t0 + 120 * MS, 0), /* overlaps: 10..120 in all */
        mkreq(0, t0 + 140 * MS, t0 + 140 * MS, 0), /* zero length */
        mkreq(0, t0 + 180 * MS, t0 + 170 * MS, 0), /* departs before it arrives */
        mkreq(0, t0 - 40 * MS, t0 - 20 * MS, 0),  /* before the windows */
        mkreq(0, t0 + 190 * MS, t0 + 400 * MS, 0), /* runs past the last one */
    };
    assert_int_equal(tb_windows_calls_busy(w, 4, c, sizeof c / sizeof c[0]), 0);
    assert_near(w[0].calls_busy, 40.0 / 50, 1e-12);
    assert_near(w[1].calls_busy, 1.0, 1e-12);
    assert_near(w[2].calls_busy, 20.0 / 50, 1e-12);
    assert_near(w[3].calls_busy, 10.0 / 50, 1e-12);
    /* calls_load counts each call: window 0 holds 20 + 30 call-ms. */
    assert_near(w[0].calls_load, 50.0 / 50, 1e-12);
    assert_near(w[1].calls_load, 1.0, 1e-12);
    assert_near(w[2].calls_load, 20.0 / 50, 1e-12);
    assert_near(w[3].calls_load, 10.0 / 50, 1e-12);
    /* No calls: every window 0. */
    assert_int_equal(tb_windows_calls_busy(w, 4, NULL, 0), 0);
    for (int k = 0; k < 4; k++) {
        assert_near(w[k].calls_busy, 0, 0);
        assert_near(w[k].calls_load, 0, 0);
    }
    assert_int_equal(tb_windows_calls_busy(NULL, 4, c, 1), TB_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor),         cmocka_unit_test(test_hand),
        cmocka_unit_test(test_negative_epoch), cmocka_unit_test(test_special),
        cmocka_unit_test(test_random_brute),  cmocka_unit_test(test_precision),
        cmocka_unit_test(test_calls_busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
