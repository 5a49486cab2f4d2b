/* SPDX-License-Identifier: MIT */
/* test_levels.c — throughput levels among congested windows: one plateau, or
 * several when the CPU changes frequency (the paper's SpeedStep case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- levels over time ----------------------------------------------------------- */

#define W50 (50 * TB_NS_PER_MS)

/* A 2-core server seen through 50 ms windows for n windows: its CPU speed
 * switches among 0.45, 0.7 and 1.0 every 12-120 windows (0.6-6 s), at random;
 * it is congested in bursts of 20-200 windows (load 3-8) between lulls of
 * 5-60 windows (load 0.2-1.5). A congested window completes 2000 x speed
 * work units/s with 12% noise (a hundred completions in 50 ms), its first
 * window 60% of that (still filling up). speed[i] receives each window's
 * speed. */
static struct tb_window *dvfs_series(size_t n, uint64_t seed, double *speed)
{
    static const double sp[3] = {0.45, 0.7, 1.0};
    rs = seed;
    struct tb_window *w = calloc(n, sizeof *w);
    size_t left_speed = 0, left_phase = 0;
    int lv = 2;
    bool busy = false, first = false;
    for (size_t i = 0; i < n; i++) {
        if (!left_speed) {
            int other = (int)(unif() * 2); /* one of the two other speeds */
            lv = other >= lv ? other + 1 : other;
            left_speed = 12 + (size_t)(unif() * 108);
        }
        if (!left_phase) {
            busy = !busy;
            first = busy;
            left_phase = busy ? 20 + (size_t)(unif() * 180) : 5 + (size_t)(unif() * 55);
        }
        left_speed--;
        left_phase--;
        speed[i] = sp[lv];
        w[i].start_ns = (int64_t)i * W50;
        w[i].width_ns = W50;
        w[i].load = busy ? 3 + 5 * unif() : 0.2 + 1.3 * unif();
        double cap = 2000 * sp[lv];
        double tp = busy ? cap * (first ? 0.6 : 1) : fmin(cap, 1000 * sp[lv] * w[i].load);
        w[i].norm_throughput = tp * (1 + 0.12 * gauss());
        w[i].work_units = w[i].norm_throughput * 0.05;
        w[i].completions = (uint32_t)w[i].work_units;
        first = false;
    }
    return w;
}

/* At 50 ms, three speeds give three levels in the right ratios, each with
 * the intervals it held: over 5 seeds, the windows of the spans are at the
 * speed of their level in >= 95% of cases. The windows' values alone
 * (tb_levels_find) do not show three levels here. */
static void test_levels_over_time(void **state)
{
    (void)state;
    enum { N = 2400 };
    double *speed = malloc(N * sizeof *speed);
    struct tb_congestion rule = {.threshold = 2, .slope = 1000, .tp_max = 2000,
                                 .freeze_frac = 0.3, .ubar = 1};
    for (uint64_t seed = 1; seed <= 5; seed++) {
        struct tb_window *w = dvfs_series(N, seed, speed);
        double lv[8];
        uint32_t nl;
        struct tb_level_span *sp;
        size_t nsp;
        assert_int_equal(tb_levels_over_time(w, N, &rule, 8, lv, &nl, &sp, &nsp), 0);
        print_message("seed %d: %u levels %.0f %.0f %.0f, %zu spans\n", (int)seed, nl, lv[0],
                      nl > 1 ? lv[1] : 0, nl > 2 ? lv[2] : 0, nsp);
        assert_int_equal(nl, 3);
        assert_near(lv[0] / lv[2], 0.45, 0.045);
        assert_near(lv[1] / lv[2], 0.70, 0.07);
        size_t right = 0, all = 0;
        static const double want[3] = {0.45, 0.7, 1.0};
        for (size_t k = 0; k < nsp; k++) {
            assert_true(k == 0 || sp[k].start_ns >= sp[k - 1].end_ns);
            for (int64_t t = sp[k].start_ns; t < sp[k].end_ns; t += W50) {
                all++;
                right += speed[t / W50] == want[sp[k].level];
            }
        }
        print_message("  %zu of %zu span windows at their level's speed\n", right, all);
        assert_true(right >= 0.95 * (double)all);
        /* The values alone. */
        double *v = malloc(N * sizeof *v);
        size_t nv = 0;
        for (size_t i = 0; i < N; i++)
            if (w[i].load >= 2)
                v[nv++] = w[i].norm_throughput;
        uint32_t nflat;
        assert_int_equal(tb_levels_find(v, nv, 8, lv, &nflat), 0);
        assert_true(nflat < 3);
        free(v);
        free(sp);
        free(w);
    }
    free(speed);
}

/* One speed: one level, however long; no threshold: no level, no span. */
static void test_levels_over_time_one(void **state)
{
    (void)state;
    enum { N = 2400 };
    double *speed = malloc(N * sizeof *speed);
    struct tb_window *w = dvfs_series(N, 11, speed);
    for (size_t i = 0; i < N; i++)
        if (w[i].load >= 2)
            w[i].norm_throughput = 2000 * (1 + 0.12 * gauss());
    struct tb_congestion rule = {.threshold = 2, .slope = 1000, .tp_max = 2000,
                                 .freeze_frac = 0.3, .ubar = 1};
    double lv[8];
    uint32_t nl;
    struct tb_level_span *sp;
    size_t nsp;
    assert_int_equal(tb_levels_over_time(w, N, &rule, 8, lv, &nl, &sp, &nsp), 0);
    assert_int_equal(nl, 1);
    assert_near(lv[0], 2000, 40);
    for (size_t k = 0; k < nsp; k++)
        assert_int_equal(sp[k].level, 0);
    free(sp);
    rule.threshold = NAN;
    assert_int_equal(tb_levels_over_time(w, N, &rule, 8, lv, &nl, &sp, &nsp), 0);
    assert_int_equal(nl, 0);
    assert_null(sp);
    assert_int_equal(nsp, 0);
    assert_int_equal(tb_levels_over_time(w, N, NULL, 8, lv, &nl, NULL, NULL), TB_E_INVAL);
    free(w);
    free(speed);
}

/* Constant service times: a saturated window completes exactly as many
 * requests as its speed allows, so neighbours mostly differ by nothing and
 * the noise read from their differences is 0. One stretch at 0.7 then 1.0
 * (the independent generator's pydvfs seed 1: 70 then 100 completions a
 * window of 50 ms, 1435 and 2051 units/s) is still two levels, cut at the
 * change. (With no noise floor the stretch was never cut: one level, 1841.) */
static void test_levels_no_noise(void **state)
{
    (void)state;
    enum { N = 60, CHANGE = 20 };
    struct tb_window w[N];
    memset(w, 0, sizeof w);
    for (size_t i = 0; i < N; i++) {
        w[i].start_ns = (int64_t)i * W50;
        w[i].width_ns = W50;
        w[i].load = i < 5 || i >= N - 5 ? 1.0 : 20 + (double)i;
        w[i].completions = i < 5 || i >= N - 5 ? 40 : i < CHANGE ? 70 : 100;
        w[i].norm_throughput = 20.51 * w[i].completions;
        w[i].work_units = w[i].norm_throughput * 0.05;
    }
    struct tb_congestion rule = {.threshold = 1.6, .slope = 1000, .tp_max = 2051,
                                 .freeze_frac = 0.3, .ubar = 1};
    double lv[8];
    uint32_t nl;
    struct tb_level_span *sp;
    size_t nsp;
    assert_int_equal(tb_levels_over_time(w, N, &rule, 8, lv, &nl, &sp, &nsp), 0);
    assert_int_equal(nl, 2);
    assert_float_equal(lv[0], 20.51 * 70, 1e-6);
    assert_float_equal(lv[1], 20.51 * 100, 1e-6);
    assert_int_equal(nsp, 2);
    assert_int_equal(sp[0].level, 0);
    assert_int_equal(sp[0].start_ns, 5 * W50);
    assert_int_equal(sp[0].end_ns, CHANGE * W50);
    assert_int_equal(sp[1].level, 1);
    assert_int_equal(sp[1].start_ns, CHANGE * W50);
    assert_int_equal(sp[1].end_ns, (N - 5) * W50);
    free(sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_speeds),
        cmocka_unit_test(test_one_speed),
        cmocka_unit_test(test_two_and_edge),
        cmocka_unit_test(test_levels_over_time),
        cmocka_unit_test(test_levels_over_time_one),
        cmocka_unit_test(test_levels_no_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
