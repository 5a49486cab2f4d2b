/* SPDX-License-Identifier: MIT */
/* test_nstar_exact.c — N* where the congestion point is known exactly: a
 * main sequence throughput = a·min(load, K) built by the test. Without noise
 * both estimates (intervention analysis and fit) must give K itself and TPmax
 * a·K; with 5% noise on the throughput, within 2% over 20 seeds per knee
 * (1.62% and 0.93% measured at worst), so an N* off by a few percent — which
 * the ±10% checks on simulated servers let through — fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "correlate.h"

#include "test_num.h"

#define A 250.0 /* work units per second per request in service, below the knee */
enum { N = 3000 };

/* Loads uniform over (0, 3K], throughput a·min(l, K)·(1 + noise·g). */
static void sequence(double k, double noise, uint64_t seed, double *l, double *t)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < N; i++) {
        l[i] = unif() * 3 * k + 1e-3;
        t[i] = A * fmin(l[i], k) * (1 + noise * gauss());
    }
}

static const double knees[] = {1, 2, 3.5, 4, 8, 16};

static void test_noise_free(void **state)
{
    (void)state;
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    assert_non_null(l);
    assert_non_null(t);
    for (size_t i = 0; i < sizeof knees / sizeof *knees; i++) {
        double k = knees[i];
        sequence(k, 0, 1 + i, l, t);
        struct tb_nstar ns;
        assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
        assert_near(ns.n_star, k, 1e-6 * k);
        assert_near(ns.n_star_fit, k, 1e-6 * k);
        assert_near(ns.tp_max, A * k, 1e-6 * A * k);
        assert_false(ns.disagree);
    }
    free(l);
    free(t);
}

static void test_noisy(void **state)
{
    (void)state;
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    assert_non_null(l);
    assert_non_null(t);
    double worst = 0, worst_fit = 0;
    for (size_t i = 0; i < sizeof knees / sizeof *knees; i++) {
        for (uint64_t seed = 1; seed <= 20; seed++) {
            double k = knees[i];
            sequence(k, 0.05, seed + 100 * i, l, t);
            struct tb_nstar ns;
            assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
            assert_near(ns.n_star, k, 0.02 * k);
            assert_near(ns.n_star_fit, k, 0.02 * k);
            worst = fmax(worst, fabs(ns.n_star - k) / k);
            worst_fit = fmax(worst_fit, fabs(ns.n_star_fit - k) / k);
        }
    }
    print_message("5%% noise, 120 runs: worst error intervention %.2f%%, fit %.2f%%\n",
                  100 * worst, 100 * worst_fit);
    free(l);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noise_free),
        cmocka_unit_test(test_noisy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
