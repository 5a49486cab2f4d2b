/* SPDX-License-Identifier: MIT */
/* test_levels.c — throughput levels among congested windows: one plateau, or
 * several when the CPU changes frequency (the paper's SpeedStep case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <cmocka.h>

#include "correlate.h"

#include "test_num.h"

/* n values around each of the `nlev` plateaus, noise sd = rel·plateau. */
static double *cloud(const double *lev, const double *share, int nlev, size_t n, double rel,
                     uint64_t seed)
{
    rs = seed;
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        double u = unif(), acc = 0;
        int k = 0;
        while (k < nlev - 1 && u > (acc += share[k]))
            k++;
        v[i] = lev[k] * (1 + rel * gauss());
    }
    return v;
}

static void test_three_speeds(void **state)
{
    (void)state;
    /* 2.4, 1.8 and 1.2 GHz: plateaus at 100%, 75% and 50%. */
    const double lev[] = {800, 600, 400}, share[] = {0.5, 0.3, 0.2};
    for (uint64_t seed = 1; seed <= 5; seed++) {
        double *v = cloud(lev, share, 3, 3000, 0.03, seed);
        double out[8];
        uint32_t n;
        assert_int_equal(tb_levels_find(v, 3000, 8, out, &n), 0);
        assert_int_equal(n, 3);
        assert_true(fabs(out[0] - 400) < 0.02 * 400);
        assert_true(fabs(out[1] - 600) < 0.02 * 600);
        assert_true(fabs(out[2] - 800) < 0.02 * 800);
        free(v);
    }
}

static void test_one_speed(void **state)
{
    (void)state;
    const double lev[] = {800}, share[] = {1};
    for (uint64_t seed = 1; seed <= 5; seed++) {
        /* Gaussian noise, then much wider noise: still one plateau. */
        for (int wide = 0; wide < 2; wide++) {
            double *v = cloud(lev, share, 1, 3000, wide ? 0.15 : 0.03, seed);
            double out[8];
            uint32_t n;
            assert_int_equal(tb_levels_find(v, 3000, 8, out, &n), 0);
            assert_int_equal(n, 1);
            double mean = 0;
            for (int i = 0; i < 3000; i++)
                mean += v[i] / 3000;
            assert_near(out[0], mean, 1e-9 * mean);
            free(v);
        }
    }
    /* A uniform spread is not several plateaus either. */
    double u[2000];
    rs = 77;
    for (int i = 0; i < 2000; i++)
        u[i] = 500 + 300 * unif();
    double out[8];
    uint32_t n;
    assert_int_equal(tb_levels_find(u, 2000, 8, out, &n), 0);
    assert_int_equal(n, 1);
}

static void test_two_and_edge(void **state)
{
    (void)state;
    const double lev[] = {800, 400}, share[] = {0.9, 0.1};
    double *v = cloud(lev, share, 2, 2000, 0.03, 9);
    double out[8];
    uint32_t n;
    assert_int_equal(tb_levels_find(v, 2000, 8, out, &n), 0);
    assert_int_equal(n, 2);
    assert_true(fabs(out[0] - 400) < 0.02 * 400 && fabs(out[1] - 800) < 0.02 * 800);
    /* max_levels = 1 and no values. */
    assert_int_equal(tb_levels_find(v, 2000, 1, out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(tb_levels_find(v, 0, 8, out, &n), 0);
    assert_int_equal(n, 0);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_speeds),
        cmocka_unit_test(test_one_speed),
        cmocka_unit_test(test_two_and_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
