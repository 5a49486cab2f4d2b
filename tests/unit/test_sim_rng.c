/* SPDX-License-Identifier: MIT */
/* test_sim_rng.c — xoshiro256** determinism and the distributions' parsing and means. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../sim/sim.h"

static void test_determinism(void **state)
{
    (void)state;
    struct sim_rng a, b, c;
    sim_rng_seed(&a, 42);
    sim_rng_seed(&b, 42);
    sim_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = sim_rng_next(&a), y = sim_rng_next(&b), z = sim_rng_next(&c);
        assert_int_equal(x, y);
        differ += x != z;
    }
    assert_int_equal(differ, 1000);
    /* A fixed seed gives a fixed stream: the first outputs are pinned so that a
     * change to the generator (and so to every pcap) cannot pass unnoticed. */
    sim_rng_seed(&a, 1);
    uint64_t first = sim_rng_next(&a), second = sim_rng_next(&a);
    struct sim_rng d;
    sim_rng_seed(&d, 1);
    assert_int_equal(sim_rng_next(&d), first);
    assert_int_equal(sim_rng_next(&d), second);
    assert_int_equal(first, UINT64_C(0xb3f2af6d0fc710c5));
}

static void test_ranges(void **state)
{
    (void)state;
    struct sim_rng r;
    sim_rng_seed(&r, 9);
    int hist[10] = {0};
    for (int i = 0; i < 100000; i++) {
        double u = sim_rng_unit(&r);
        assert_true(u > 0.0 && u < 1.0);
        uint64_t k = sim_rng_below(&r, 10);
        assert_true(k < 10);
        hist[k]++;
    }
    for (int k = 0; k < 10; k++)
        assert_true(hist[k] > 9500 && hist[k] < 10500);
}

static double mean_of(const char *spec, bool duration, int n)
{
    struct sim_dist d;
    char err[128];
    assert_int_equal(sim_dist_parse(spec, duration, &d, err, sizeof err), 0);
    struct sim_rng r;
    sim_rng_seed(&r, 5);
    double s = 0;
    for (int i = 0; i < n; i++) {
        double x = sim_dist_sample(&d, &r);
        assert_true(x >= 0);
        s += x;
    }
    return s / n;
}

static void test_distributions(void **state)
{
    (void)state;
    struct sim_dist d;
    char err[128];
    assert_int_equal(sim_dist_parse("exp(5ms)", true, &d, err, sizeof err), 0);
    assert_int_equal(d.kind, SIM_DIST_EXP);
    assert_true(d.a == 5e6);
    assert_string_equal(d.text, "exp(5ms)");
    assert_int_equal(sim_dist_parse(" uniform(1s, 3s) ", true, &d, err, sizeof err), 0);
    assert_int_equal(d.kind, SIM_DIST_UNIFORM);
    assert_true(d.a == 1e9 && d.b == 3e9);
    assert_int_equal(sim_dist_parse("lognormal(10ms, 0.5)", true, &d, err, sizeof err), 0);
    assert_true(d.a == 1e7 && d.b == 0.5);
    assert_int_equal(sim_dist_parse("30", true, &d, err, sizeof err), 0); /* ms */
    assert_true(d.kind == SIM_DIST_CONST && d.a == 30e6);
    assert_int_equal(sim_dist_parse("3", false, &d, err, sizeof err), 0);
    assert_true(d.a == 3.0);

    assert_int_equal(sim_dist_parse("gauss(1)", true, &d, err, sizeof err), TB_E_INVAL);
    assert_non_null(strstr(err, "unknown distribution"));
    assert_int_equal(sim_dist_parse("uniform(3s, 1s)", true, &d, err, sizeof err), TB_E_INVAL);
    assert_int_equal(sim_dist_parse("exp(1s, 2s)", true, &d, err, sizeof err), TB_E_INVAL);
    assert_int_equal(sim_dist_parse("exp(5ms", true, &d, err, sizeof err), TB_E_INVAL);
    assert_int_equal(sim_dist_parse("-3", false, &d, err, sizeof err), TB_E_INVAL);

    /* Sample means within 2% of the configured means. */
    assert_true(fabs(mean_of("exp(5ms)", true, 200000) / 5e6 - 1) < 0.02);
    assert_true(fabs(mean_of("uniform(1s, 3s)", true, 200000) / 2e9 - 1) < 0.02);
    assert_true(fabs(mean_of("lognormal(10ms, 0.5)", true, 200000) / 1e7 - 1) < 0.02);
    assert_true(mean_of("const(7)", false, 10) == 7.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_distributions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
