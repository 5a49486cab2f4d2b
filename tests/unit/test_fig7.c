/* SPDX-License-Identifier: MIT */
/* test_fig7.c — the paper's Figure 7: two classes of 30 ms and 10 ms in 100 ms
 * windows; normalized throughput follows load while raw completions do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "correlate.h"
#include "stats.h"

/* |a - b| <= eps, printing both values on failure (NAN fails). */
#define assert_near(a, b, eps)                                                             \
    do {                                                                                   \
        double a_ = (a), b_ = (b), e_ = (eps);                                             \
        if (!(fabs(a_ - b_) <= e_))                                                        \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, e_);            \
    } while (0)

#define MS TB_NS_PER_MS

static struct tb_request req(int64_t a_ms, int64_t len_ms, uint32_t cls)
{
    struct tb_request r;
    memset(&r, 0, sizeof r);
    r.tier = 1;
    r.server = 1;
    r.class_id = cls;
    r.arrival_ns = a_ms * MS;
    r.departure_ns = (a_ms + len_ms) * MS;
    return r;
}

static double pearson(const double *x, const double *y, int n)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i] / n;
        my += y[i] / n;
    }
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / sqrt(sxx * syy);
}

static void test_fig7(void **state)
{
    (void)state;
    /* Req_1 (class 1) takes 30 ms, Req_2 (class 2) 10 ms, one at a time.
     * TW0: two Req_1 → 6 work units; TW1: four Req_2 → 4; TW2: one of each → 4. */
    struct tb_request rq[] = {
        req(10, 30, 1),  req(50, 30, 1),                                   /* TW0 */
        req(110, 10, 2), req(130, 10, 2), req(150, 10, 2), req(170, 10, 2), /* TW1 */
        req(210, 30, 1), req(260, 10, 2),                                   /* TW2 */
    };
    size_t nrq = TB_ARRAY_SIZE(rq);
    /* Service times from the trace itself: every request is isolated, but
     * with fewer than 20 per class the low quantile is used — all equal. */
    struct tb_svc_opts so;
    tb_svc_opts_default(&so);
    so.period_ns = 0;
    struct tb_class_service *svc;
    size_t nsvc;
    int64_t unit;
    assert_int_equal(tb_service_estimate(rq, nrq, NULL, 0, NULL, 0, NULL, 0, &so, &svc, &nsvc,
                                         &unit),
                     0);
    assert_int_equal(nsvc, 2);
    assert_int_equal(unit, 10 * MS);
    assert_int_equal(svc[0].class_id, 1);
    assert_int_equal(svc[0].service_ns, 30 * MS);
    assert_int_equal(svc[0].method, TB_SVC_QUANTILE);
    assert_near(svc[0].units, 3.0, 1e-12);
    assert_int_equal(svc[1].service_ns, 10 * MS);
    assert_near(svc[1].units, 1.0, 1e-12);
    struct tb_units *u;
    assert_int_equal(tb_units_new(&u, svc, nsvc, 1.0), 0);
    struct tb_window *w;
    size_t n;
    assert_int_equal(tb_windows_compute(rq, nrq, u, 1, NULL, 0, 100 * MS, 0, 300 * MS, &w, &n), 0);
    assert_int_equal(n, 3);
    const double units[3] = {6, 4, 4}, load[3] = {0.6, 0.4, 0.4};
    const uint32_t comp[3] = {2, 4, 2};
    double l[3], nt[3], ct[3];
    for (int k = 0; k < 3; k++) {
        assert_near(w[k].work_units, units[k], 1e-12);
        assert_near(w[k].norm_throughput, units[k] * 10, 1e-9); /* per second */
        assert_near(w[k].load, load[k], 1e-12);
        assert_int_equal(w[k].completions, comp[k]);
        l[k] = w[k].load;
        nt[k] = w[k].norm_throughput;
        ct[k] = w[k].throughput;
    }
    /* Normalized throughput rises with load (Utilization Law: not
     * saturated); raw completions do not. */
    assert_near(pearson(l, nt, 3), 1.0, 1e-9);
    assert_true(pearson(l, ct, 3) < 0);
    free(w);
    tb_units_free(u);
    free(svc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fig7)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
