/* SPDX-License-Identifier: MIT */
/* test_workunit.c — the work unit: approximate GCD of service times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "stats.h"

#define US INT64_C(1000)
#define MS TB_NS_PER_MS

static int64_t wu(const int64_t *s, const double *w, size_t n)
{
    int64_t u = -1;
    assert_int_equal(tb_work_unit(s, w, n, 0.12, 100 * US, 0.01, &u), 0);
    return u;
}

static void test_paper(void **state)
{
    (void)state;
    int64_t s[] = {30 * MS, 10 * MS};
    assert_int_equal(wu(s, NULL, 2), 10 * MS); /* units 3 and 1 */
}

static void test_half(void **state)
{
    (void)state;
    int64_t s[] = {25 * MS, 10 * MS};
    assert_int_equal(wu(s, NULL, 2), 5 * MS); /* 10 does not divide 25 */
}

static void test_noisy(void **state)
{
    (void)state;
    /* 30.4/9.8 = 3.10: fits u = 9.8 within 0.12; least squares gives
     * (30.4·3 + 9.8)/10 = 10.1, and two digits 10 still fit. */
    int64_t s[] = {30400 * US, 9800 * US};
    assert_int_equal(wu(s, NULL, 2), 10 * MS);
    double w[] = {1, 1};
    assert_int_equal(wu(s, w, 2), 10 * MS);
}

static void test_three(void **state)
{
    (void)state;
    int64_t s[] = {50 * MS, 20 * MS, 30 * MS};
    assert_int_equal(wu(s, NULL, 3), 10 * MS);
}

static void test_rare_class(void **state)
{
    (void)state;
    /* A class with 0.2% of the requests and a service time that fits no
     * useful unit (7.3 ms) does not shrink the unit of the others... */
    int64_t s[] = {30 * MS, 10 * MS, 7300 * US};
    double w[] = {500, 500, 2};
    assert_int_equal(wu(s, w, 3), 10 * MS);
    /* ...while unweighted it constrains the unit: 7.3 becomes the reference
     * and the result must be far smaller than 10 ms. */
    int64_t u = wu(s, NULL, 3);
    assert_true(u < 5 * MS);
    for (int i = 0; i < 3; i++) {
        double r = (double)s[i] / (double)u;
        assert_true(fabs(r - nearbyint(r)) <= 0.12);
    }
}

static void test_fallback(void **state)
{
    (void)state;
    /* With a floor of 6 ms only u = 10 ms is tried, and 31.4/10 = 3.14 is
     * off by 0.14: the smallest service time is the unit. */
    int64_t s[] = {10 * MS, 31416 * US};
    int64_t u;
    assert_int_equal(tb_work_unit(s, NULL, 2, 0.12, 6 * MS, 0.01, &u), 0);
    assert_int_equal(u, 10 * MS);
    /* A smallest class below the floor: no candidate, u = that class. */
    int64_t t[] = {50 * US, 3 * MS};
    assert_int_equal(tb_work_unit(t, NULL, 2, 0.12, 100 * US, 0.01, &u), 0);
    assert_int_equal(u, 50 * US);
    /* Nothing positive. */
    int64_t z[] = {0, -5};
    assert_int_equal(tb_work_unit(z, NULL, 2, 0.12, 100 * US, 0.01, &u), TB_E_NOTFOUND);
    assert_int_equal(tb_work_unit(s, NULL, 2, 0.6, 100 * US, 0.01, &u), TB_E_INVAL);
}

/* Units per period do not absorb a speed change: the paper's Figure 7 mix
 * (30 ms and 10 ms, unit 10 ms) in three minutes, the CPU at full speed in
 * the first and third and at half speed in the second (every class twice as
 * long). A class is worth the same units in every period, 3:1, so the slow
 * minute's congested windows show half the normalized throughput. (Their
 * scale is each class's mean over the periods, here 2^0.17 above the fast
 * minutes: the analysis takes its unit from those means too.) A class that
 * drifts alone keeps its drift against the other; an override is service /
 * unit as given; a single period is service / unit exactly. */
static void test_units_speed(void **state)
{
    (void)state;
    const int64_t P = 60 * TB_NS_PER_SEC;
    struct tb_class_service r[6] = {
        {.class_id = 1, .period_start_ns = 0, .service_ns = 30 * MS, .requests = 100},
        {.class_id = 1, .period_start_ns = P, .service_ns = 60 * MS, .requests = 40},
        {.class_id = 1, .period_start_ns = 2 * P, .service_ns = 30 * MS, .requests = 90},
        {.class_id = 2, .period_start_ns = 0, .service_ns = 10 * MS, .requests = 300},
        {.class_id = 2, .period_start_ns = P, .service_ns = 20 * MS, .requests = 120},
        {.class_id = 2, .period_start_ns = 2 * P, .service_ns = 10 * MS, .requests = 310},
    };
    assert_int_equal(tb_work_units_assign(r, 6, 10 * MS), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(r[i].units - r[0].units) < 1e-9);
        assert_true(fabs(r[i].units / r[3 + i].units - 3.0) < 1e-9);
    }
    assert_true(r[0].units > 3.3 && r[0].units < 3.5);
    /* Class 1 alone 50% slower in the second minute: against class 2 it
     * still costs 1.5x more there than elsewhere. */
    r[1].service_ns = 90 * MS;
    r[4].service_ns = 10 * MS;
    assert_int_equal(tb_work_units_assign(r, 6, 10 * MS), 0);
    assert_true(fabs(r[1].units / r[4].units - 9.0) < 1e-9);
    assert_true(fabs(r[0].units / r[3].units - 3.0) < 1e-9);
    /* Overrides are as given. */
    r[1].method = TB_SVC_OVERRIDE;
    r[1].service_ns = 45 * MS;
    assert_int_equal(tb_work_units_assign(r, 6, 10 * MS), 0);
    assert_true(fabs(r[1].units - 4.5) < 1e-9);
    /* One period: service / unit. */
    assert_int_equal(tb_work_units_assign(r + 3, 1, 10 * MS), 0);
    assert_true(fabs(r[3].units - 1.0) < 1e-9);
    assert_int_equal(tb_work_units_assign(r, 1, 0), 0);
    assert_true(fabs(r[0].units - 1.0) < 1e-9);
    assert_int_equal(tb_work_units_assign(NULL, 1, 1), TB_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper),      cmocka_unit_test(test_half),
        cmocka_unit_test(test_noisy),      cmocka_unit_test(test_three),
        cmocka_unit_test(test_rare_class), cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_units_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
