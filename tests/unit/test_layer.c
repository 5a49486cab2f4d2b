/* SPDX-License-Identifier: MIT */
/* test_layer.c — layered load (stats.h "layered load") against a brute-force
 * oracle: every elementary interval between two event times, N and C counted
 * by scanning all requests at its midpoint; and Little's law along a call
 * path: with every call nested in a request of its caller, the self-loads of
 * the tiers add up to the front tier's load in every window, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stats.h"

#define W INT64_C(1000)

struct rq {
    struct tb_request r;
    uint32_t row, caller;
    double units;
};

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_arrival(const void *a, const void *b)
{
    const struct rq *x = a, *y = b;
    return (x->r.arrival_ns > y->r.arrival_ns) - (x->r.arrival_ns < y->r.arrival_ns);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The oracle: per row and window, ∫N and ∫min(C, N) from scratch. */
static void oracle(const struct rq *q, size_t n, uint32_t nrows, int64_t t0, size_t nwin,
                   int64_t *load, int64_t *wait, uint32_t *maxn, uint32_t *maxc)
{
    size_t ne = 2 * n + nwin + 1, k = 0;
    int64_t *ev = malloc(ne * sizeof *ev);
    for (size_t i = 0; i < n; i++) {
        ev[k++] = q[i].r.arrival_ns;
        ev[k++] = q[i].r.departure_ns;
    }
    for (size_t j = 0; j <= nwin; j++)
        ev[k++] = t0 + (int64_t)j * W;
    qsort(ev, k, sizeof *ev, cmp_i64);
    memset(load, 0, nrows * nwin * sizeof *load);
    memset(wait, 0, nrows * nwin * sizeof *wait);
    memset(maxn, 0, nrows * nwin * sizeof *maxn);
    memset(maxc, 0, nrows * nwin * sizeof *maxc);
    for (size_t e = 0; e + 1 < k; e++) {
        int64_t a = ev[e], b = ev[e + 1];
        if (a == b || a < t0 || b > t0 + (int64_t)nwin * W)
            continue;
        size_t win = (size_t)((a - t0) / W);
        /* Midpoint test in doubled coordinates, so nothing rounds. */
        int64_t m2 = a + b;
        for (uint32_t row = 1; row < nrows; row++) {
            int64_t nn = 0, cc = 0;
            for (size_t i = 0; i < n; i++) {
                bool in = 2 * q[i].r.arrival_ns <= m2 && m2 < 2 * q[i].r.departure_ns;
                nn += in && q[i].row == row;
                cc += in && q[i].caller == row;
            }
            load[row * nwin + win] += (b - a) * nn;
            wait[row * nwin + win] += (b - a) * (cc < nn ? cc : nn);
            if ((uint32_t)nn > maxn[row * nwin + win])
                maxn[row * nwin + win] = (uint32_t)nn;
            if (nn && (uint32_t)cc > maxc[row * nwin + win])
                maxc[row * nwin + win] = (uint32_t)cc;
        }
    }
    free(ev);
}

/* Random requests on 3 rows, calls from rows 1 and 2 into rows 2 and 3, not
 * nested (so min(C, N) differs from C), some longer than a window, some
 * before the range, zero-length ones, ties. */
static void test_random_against_oracle(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        size_t n = 40 + next() % 200;
        struct rq *q = calloc(n, sizeof *q);
        for (size_t i = 0; i < n; i++) {
            int64_t a = (int64_t)(next() % 20000) - 500;
            int64_t d = (next() % 8 == 0) ? (int64_t)(next() % 5000) : (int64_t)(next() % 400);
            if (next() % 16 == 0)
                d = 0;
            if (next() % 4 == 0)
                a -= a % 100; /* ties */
            q[i].r.arrival_ns = a;
            q[i].r.departure_ns = a + d;
            q[i].row = 1 + (uint32_t)(next() % 3);
            q[i].caller = q[i].row == 1 ? 0 : (uint32_t)(next() % q[i].row);
            q[i].r.tier = q[i].row; /* group = the callee row */
            q[i].units = (double)(next() % 5) / 2;
            if (next() % 10 == 0)
                q[i].r.flags = TB_REQ_NORESP;
        }
        qsort(q, n, sizeof *q, cmp_arrival);
        struct tb_layer *L;
        assert_int_equal(tb_layer_new(&L, W, 0, 18000, 4, 4), 0);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(
                tb_layer_add(L, &q[i].r, q[i].row, q[i].caller, q[i].caller ? q[i].row : 0,
                             q[i].units),
                0);
        assert_int_equal(tb_layer_finish(L), 0);
        size_t nwin = tb_layer_nwindows(L);
        assert_int_equal(nwin, 18);
        assert_int_equal(tb_layer_start(L), 0);
        int64_t *load = calloc(4 * nwin, sizeof *load), *wait = calloc(4 * nwin, sizeof *wait);
        uint32_t *maxn = calloc(4 * nwin, sizeof *maxn), *maxc = calloc(4 * nwin, sizeof *maxc);
        oracle(q, n, 4, 0, nwin, load, wait, maxn, maxc);
        for (uint32_t row = 1; row < 4; row++) {
            const struct tb_layer_win *w = tb_layer_row(L, row);
            for (size_t k = 0; k < nwin; k++) {
                assert_int_equal(w[k].load_ns, load[row * nwin + k]);
                assert_int_equal(w[k].wait_ns, wait[row * nwin + k]);
                assert_int_equal(w[k].max_n, maxn[row * nwin + k]);
                assert_int_equal(w[k].max_c, maxc[row * nwin + k]);
                /* Completions and arrivals by direct count. */
                uint32_t comp = 0, arr = 0;
                double units = 0;
                for (size_t i = 0; i < n; i++) {
                    if (q[i].row != row)
                        continue;
                    int64_t ws = (int64_t)k * W, we = ws + W;
                    if (q[i].r.arrival_ns >= ws && q[i].r.arrival_ns < we)
                        arr++;
                    if (!(q[i].r.flags & TB_REQ_NORESP) && q[i].r.departure_ns >= ws &&
                        q[i].r.departure_ns < we) {
                        comp++;
                        units += q[i].units;
                    }
                }
                assert_int_equal(w[k].completions, comp);
                assert_int_equal(w[k].arrivals, arr);
                assert_true(w[k].work_units == units);
            }
        }
        /* Edge 1 -> group 2: its integral and maximum by the same scan. */
        const struct tb_layer_edge_win *e = tb_layer_edge(L, 1, 2);
        assert_non_null(e);
        for (size_t k = 0; k < nwin; k++) {
            int64_t calls = 0;
            for (size_t i = 0; i < n; i++) {
                if (q[i].caller != 1 || q[i].row != 2)
                    continue;
                int64_t lo = q[i].r.arrival_ns > (int64_t)k * W ? q[i].r.arrival_ns
                                                                : (int64_t)k * W;
                int64_t hi = q[i].r.departure_ns < (int64_t)(k + 1) * W ? q[i].r.departure_ns
                                                                       : (int64_t)(k + 1) * W;
                if (hi > lo)
                    calls += hi - lo;
            }
            assert_int_equal(e[k].calls_ns, calls);
            assert_true(e[k].at_max_ns <= W);
            assert_true((e[k].max_calls == 0) == (calls == 0));
        }
        assert_null(tb_layer_edge(L, 3, 1));
        free(load);
        free(wait);
        free(maxn);
        free(maxc);
        free(q);
        tb_layer_free(L);
    }
}

/* A three-tier call path where every call is nested in a request of its
 * caller, one call at a time per parent: front load = Σ self loads, per
 * window, exactly (Little's law on the layers). */
static void test_little_along_path(void **state)
{
    (void)state;
    struct rq q[3000];
    size_t n = 0;
    for (int page = 0; page < 400; page++) {
        int64_t a = (int64_t)(next() % 50000);
        int64_t t = a + 1 + (int64_t)(next() % 50);
        struct rq *front = &q[n++];
        front->r.arrival_ns = a;
        front->row = 1;
        int calls = 1 + (int)(next() % 2);
        for (int c = 0; c < calls; c++) {
            struct rq *app = &q[n++];
            app->r.arrival_ns = t;
            app->row = 2 + (uint32_t)(next() % 2);
            app->caller = 1;
            app->r.tier = 2;
            int64_t u = t + 1 + (int64_t)(next() % 30);
            int queries = (int)(next() % 4);
            for (int k = 0; k < queries; k++) {
                struct rq *db = &q[n++];
                db->r.arrival_ns = u;
                db->row = 4;
                db->caller = app->row;
                db->r.tier = 3;
                u += 1 + (int64_t)(next() % 700);
                db->r.departure_ns = u;
                u += (int64_t)(next() % 20);
            }
            app->r.departure_ns = u + (int64_t)(next() % 30);
            t = app->r.departure_ns + (int64_t)(next() % 10);
        }
        front->r.departure_ns = t + (int64_t)(next() % 40);
    }
    qsort(q, n, sizeof *q, cmp_arrival);
    struct tb_layer *L;
    assert_int_equal(tb_layer_new(&L, W, 0, 60000, 5, 4), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tb_layer_add(L, &q[i].r, q[i].row, q[i].caller, q[i].r.tier, 1), 0);
    assert_int_equal(tb_layer_finish(L), 0);
    const struct tb_layer_win *f = tb_layer_row(L, 1), *a2 = tb_layer_row(L, 2),
                              *a3 = tb_layer_row(L, 3), *d = tb_layer_row(L, 4);
    int64_t busy = 0;
    for (size_t k = 0; k < tb_layer_nwindows(L); k++) {
        int64_t self = (f[k].load_ns - f[k].wait_ns) + (a2[k].load_ns - a2[k].wait_ns) +
                       (a3[k].load_ns - a3[k].wait_ns) + (d[k].load_ns - d[k].wait_ns);
        assert_int_equal(self, f[k].load_ns);
        /* The front waits exactly for the app servers' whole load. */
        assert_int_equal(f[k].wait_ns, a2[k].load_ns + a3[k].load_ns);
        assert_int_equal(d[k].wait_ns, 0);
        busy += d[k].load_ns;
    }
    assert_true(busy > 0);
    tb_layer_free(L);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct tb_layer *L;
    assert_int_equal(tb_layer_new(&L, 0, 0, 10, 2, 2), TB_E_INVAL);
    assert_int_equal(tb_layer_new(&L, W, 10, 10, 2, 2), TB_E_INVAL);
    assert_int_equal(tb_layer_new(&L, 1, 0, INT64_C(1) << 40, 2, 2), TB_E_FULL);
    assert_int_equal(tb_layer_new(&L, W, 0, 5000, 3, 2), 0);
    struct tb_request r = {.arrival_ns = 100, .departure_ns = 50};
    assert_int_equal(tb_layer_add(L, &r, 1, 0, 0, 1), TB_E_INVAL); /* departs before arrival */
    r.departure_ns = 200;
    assert_int_equal(tb_layer_add(L, &r, 0, 0, 0, 1), TB_E_INVAL); /* row 0 */
    assert_int_equal(tb_layer_add(L, &r, 3, 0, 0, 1), TB_E_INVAL); /* row out of range */
    assert_int_equal(tb_layer_add(L, &r, 1, 1, 1, 1), TB_E_INVAL); /* calls itself */
    assert_int_equal(tb_layer_add(L, &r, 1, 2, 0, 1), TB_E_INVAL); /* call without group */
    assert_int_equal(tb_layer_add(L, &r, 1, 0, 0, 1), 0);
    r.arrival_ns = 99;
    assert_int_equal(tb_layer_add(L, &r, 1, 0, 0, 1), TB_E_INVAL); /* back in time */
    assert_int_equal(tb_layer_finish(L), 0);
    assert_int_equal(tb_layer_finish(L), TB_E_INVAL);
    assert_int_equal(tb_layer_row(L, 1)[0].load_ns, 100);
    tb_layer_free(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_oracle),
        cmocka_unit_test(test_little_along_path),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
