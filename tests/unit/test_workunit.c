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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper),      cmocka_unit_test(test_half),
        cmocka_unit_test(test_noisy),      cmocka_unit_test(test_three),
        cmocka_unit_test(test_rare_class), cmocka_unit_test(test_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
