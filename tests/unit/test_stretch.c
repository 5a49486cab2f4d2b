/* SPDX-License-Identifier: MIT */
/* test_stretch.c — lives by arrival concurrency (stats/stretch.c) against a
 * direct count written here: hand-made requests with known in-flight counts
 * and lives, random ones counted by brute force, and the rule's verdicts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stretch.h"
#include "util.h"

#include "test_num.h"

#define MS 1000000LL
/* The accumulator's resolution: 1/16 octave. */
#define BIN_RATIO 1.0443737998676

static struct tb_request rq(uint32_t server, int64_t arr, int64_t dep)
{
    struct tb_request r;
    memset(&r, 0, sizeof r);
    r.tier = 1;
    r.server = server;
    r.arrival_ns = arr;
    r.departure_ns = dep;
    return r;
}

/* Others of the same server in flight when r[i] arrived, by definition:
 * arrived before it (or at the same instant, earlier in the feed) and not yet
 * gone (a departure at the arrival instant has left). */
static size_t in_flight(const struct tb_request *r, size_t n, size_t i)
{
    size_t m = 0;
    for (size_t j = 0; j < n; j++)
        if (j != i && r[j].server == r[i].server && r[j].departure_ns >= r[j].arrival_ns &&
            (r[j].arrival_ns < r[i].arrival_ns || (r[j].arrival_ns == r[i].arrival_ns && j < i)) &&
            r[j].departure_ns > r[i].arrival_ns)
            m++;
    return m;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The exact median of the lives (ns) of the requests with from <= m <= to. */
static double exact_median(const struct tb_request *r, size_t n, const uint32_t *server,
                           size_t from, size_t to, size_t *count)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].departure_ns < r[i].arrival_ns || (server && r[i].server != *server))
            continue;
        size_t m = in_flight(r, n, i);
        if (m >= from && m <= to)
            v[k++] = (double)(r[i].departure_ns - r[i].arrival_ns);
    }
    *count = k;
    qsort(v, k, sizeof *v, cmp_d);
    double med = k ? (k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2) : NAN;
    free(v);
    return med;
}

/* Hand-made: server 1's requests meet 0, 0, 1, 2, 2, 0 others; server 2's
 * one request arrives alone although server 1 has two in flight. */
static void test_hand_made(void **state)
{
    (void)state;
    const struct tb_request r[] = {
        rq(1, 0, 1 * MS),        /* m 0, life 1 ms */
        rq(1, 2 * MS, 12 * MS),  /* m 0, 10 ms */
        rq(1, 3 * MS, 5 * MS),   /* m 1 (the one above), 2 ms */
        rq(2, 3 * MS, 4 * MS),   /* m 0 at its server, 1 ms */
        rq(1, 4 * MS, 10 * MS),  /* m 2, 6 ms */
        rq(1, 5 * MS, 9 * MS),   /* m 2: the 2 ms one left at 5 ms exactly, 4 ms */
        rq(1, 12 * MS, 15 * MS), /* m 0: the 10 ms one left at 12 ms, 3 ms */
        rq(1, 20 * MS, 19 * MS), /* no life: skipped */
    };
    const size_t n = sizeof r / sizeof r[0];
    const size_t want_m[] = {0, 0, 1, 0, 2, 2, 0};
    for (size_t i = 0; i + 1 < n; i++)
        assert_int_equal(in_flight(r, n, i), want_m[i]);
    struct tb_stretchacc *a;
    assert_int_equal(tb_stretchacc_new(&a), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tb_stretchacc_add(a, &r[i]), 0);
    const struct tb_stretch *s1 = tb_stretchacc_server(a, 1), *s2 = tb_stretchacc_server(a, 2);
    assert_non_null(s1);
    assert_non_null(s2);
    assert_null(tb_stretchacc_server(a, 3));
    assert_int_equal(tb_stretch_count(s1, 0, 0), 3);
    assert_int_equal(tb_stretch_count(s1, 1, 1), 1);
    assert_int_equal(tb_stretch_count(s1, 2, 2), 2);
    assert_int_equal(tb_stretch_count(s1, 3, UINT32_MAX), 0);
    assert_int_equal(tb_stretch_count(s2, 0, 0), 1);
    assert_int_equal(tb_stretch_count(s2, 1, UINT32_MAX), 0);
    /* Lives in their bins: alone on server 1 {1, 10, 3} ms, median 3 ms. */
    assert_int_equal(s1->life[0][tb_stretch_bin(3 * MS)], 1);
    assert_int_equal(s1->life[2][tb_stretch_bin(6 * MS)], 1);
    assert_int_equal(s1->life[2][tb_stretch_bin(4 * MS)], 1);
    double m0 = tb_stretch_quantile(s1, 0, 0, 0.5);
    assert_int_equal(tb_stretch_bin((int64_t)m0), tb_stretch_bin(3 * MS));
    /* m = 1..2 on server 1: {2, 6, 4} ms, median 4 ms. */
    double m12 = tb_stretch_quantile(s1, 1, 2, 0.5);
    assert_int_equal(tb_stretch_bin((int64_t)m12), tb_stretch_bin(4 * MS));
    struct tb_stretch tot;
    tb_stretchacc_total(a, &tot);
    assert_int_equal(tot.servers, 2);
    assert_int_equal(tb_stretch_count(&tot, 0, 0), 4);
    /* alone over both: {1, 10, 3, 1} ms: the 2nd of 4 sorted is 1 ms. */
    assert_true(tb_stretch_quantile(&tot, 0, 0, 0.5) <= 1 * MS * BIN_RATIO);
    assert_true(isnan(tb_stretch_quantile(&tot, 3, UINT32_MAX, 0.5)));
    tb_stretchacc_free(a);
}

/* Random requests on 3 servers (Poisson arrivals, lognormal lives, some
 * arriving at the same instant), counted both ways: every bucket's count
 * exactly, medians within the accumulator's resolution. */
static void test_random(void **state)
{
    (void)state;
    enum { N = 3000 };
    struct tb_request *r = malloc(N * sizeof *r);
    rs = 7;
    int64_t t = 0;
    for (size_t i = 0; i < N; i++) {
        if (unif() > 0.05)
            t += (int64_t)(-log(unif()) * 0.4 * MS);
        int64_t life = (int64_t)(MS * exp(1.2 * gauss()));
        r[i] = rq(1 + (uint32_t)(unif() * 3), t, t + life);
    }
    struct tb_stretchacc *a;
    assert_int_equal(tb_stretchacc_new(&a), 0);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(tb_stretchacc_add(a, &r[i]), 0);
    struct tb_stretch tot;
    tb_stretchacc_total(a, &tot);
    assert_int_equal(tot.servers, 3);
    for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++) {
        size_t from = TB_STRETCH_FROM[b];
        size_t to = b + 1 < TB_STRETCH_NCONC ? TB_STRETCH_FROM[b + 1] - 1 : SIZE_MAX;
        size_t k = 0;
        for (size_t i = 0; i < N; i++) {
            size_t m = in_flight(r, N, i);
            k += m >= from && m <= to;
        }
        assert_int_equal(tb_stretch_count(&tot, (uint32_t)from, (uint32_t)from), k);
    }
    /* Medians of the groups the rule compares: alone, and 2 or more. */
    size_t k0, k2;
    double e0 = exact_median(r, N, NULL, 0, 0, &k0);
    double e2 = exact_median(r, N, NULL, 2, SIZE_MAX, &k2);
    double q0 = tb_stretch_quantile(&tot, 0, 0, 0.5);
    double q2 = tb_stretch_quantile(&tot, 2, UINT32_MAX, 0.5);
    print_message("alone: %zu, median %.0f ns (exact %.0f); 2+: %zu, %.0f (%.0f)\n", k0, q0, e0,
                  k2, q2, e2);
    assert_true(k0 > 300 && k2 > 300);
    assert_true(q0 / e0 < BIN_RATIO && e0 / q0 < BIN_RATIO);
    assert_true(q2 / e2 < BIN_RATIO && e2 / q2 < BIN_RATIO);
    /* Per server as well. */
    uint32_t s = 2;
    size_t ks;
    double es = exact_median(r, N, &s, 0, 0, &ks);
    double qs = tb_stretch_quantile(tb_stretchacc_server(a, 2), 0, 0, 0.5);
    assert_int_equal(tb_stretch_count(tb_stretchacc_server(a, 2), 0, 0), ks);
    assert_true(qs / es < BIN_RATIO && es / qs < BIN_RATIO);
    /* Merging is summing. */
    struct tb_stretch sum;
    memset(&sum, 0, sizeof sum);
    for (uint32_t k = 1; k <= 3; k++)
        tb_stretch_merge(&sum, tb_stretchacc_server(a, k));
    assert_memory_equal(&sum, &tot, sizeof sum);
    tb_stretchacc_free(a);
    free(r);
}

/* n lives of median `med` and spread sigma (log) into bucket b. */
static void fill(struct tb_stretch *s, uint32_t b, size_t n, double med, double sigma)
{
    for (size_t i = 0; i < n; i++)
        s->life[b][tb_stretch_bin((int64_t)(med * exp(sigma * gauss())))]++;
}

/* The rule: flat lives refused, stretched ones kept, too few not judged; the
 * crowded group starts at the first bucket at or above 2·K per server. */
static void test_judge(void **state)
{
    (void)state;
    static struct tb_stretch s;
    struct tb_stretch_verdict v;
    rs = 11;
    memset(&s, 0, sizeof s);
    s.servers = 1;
    fill(&s, 0, 2000, 0.3 * MS, 1.5);
    fill(&s, 2, 600, 0.3 * MS, 1.5);
    fill(&s, 3, 300, 0.3 * MS, 1.5);
    tb_stretch_judge(&s, 0.9, &v);
    print_message("flat: from %u ratio %.3f ucb %.3f\n", v.from, v.ratio, v.ucb);
    assert_int_equal(v.from, 2);
    assert_int_equal(v.alone, 2000);
    assert_int_equal(v.crowded, 900);
    assert_true(v.judged && v.flat);
    assert_true(v.ratio > 0.8 && v.ratio < 1.2);
    /* The same lives 2.5x longer at 2+ in flight: contention, kept. */
    memset(&s, 0, sizeof s);
    s.servers = 1;
    fill(&s, 0, 2000, 0.3 * MS, 1.5);
    fill(&s, 2, 900, 0.75 * MS, 1.5);
    tb_stretch_judge(&s, 0.9, &v);
    assert_true(v.judged && !v.flat);
    assert_true(v.ratio > 2 && v.ratio < 3.2);
    /* Too few crowded requests: not judged, whatever the ratio. */
    memset(&s, 0, sizeof s);
    s.servers = 1;
    fill(&s, 0, 2000, 1 * MS, 0.1);
    fill(&s, 2, TB_STRETCH_MIN_REQUESTS - 1, 1 * MS, 0.1);
    tb_stretch_judge(&s, 0.9, &v);
    assert_false(v.judged);
    assert_false(v.flat);
    /* Per server: 2·K / 2 servers to the nearest integer, its bucket: 7.4 ->
     * 7 (6-7), 7.6 -> 8 (8-11), 11.6 -> 12 (12-15). */
    s.servers = 2;
    tb_stretch_judge(&s, 7.4, &v);
    assert_int_equal(v.from, 6);
    tb_stretch_judge(&s, 7.6, &v);
    assert_int_equal(v.from, 8);
    tb_stretch_judge(&s, 11.6, &v);
    assert_int_equal(v.from, 12);
    s.servers = 1;
    tb_stretch_judge(&s, 0.3, &v);
    assert_int_equal(v.from, 1);
    tb_stretch_judge(&s, 1000, &v);
    assert_int_equal(v.from, 64);
}

/* A busy many-core server (docs/report.md "A baseline on a busy server"):
 * few or no requests arrive alone; the baseline widens to m < from/4 only
 * where m = 0 cannot refuse and holds under TB_STRETCH_BASE_REQUESTS. */
static void test_judge_busy(void **state)
{
    (void)state;
    static struct tb_stretch s;
    struct tb_stretch_verdict v;
    rs = 12;
    /* No lone request at all, knee 9 on one server: the crowded group at
     * 16+ (bucket 8), the baseline m = 1-3 (buckets 1-3); m = 4-15 counted
     * in neither (a longer life there must not matter). */
    memset(&s, 0, sizeof s);
    s.servers = 1;
    fill(&s, 1, 500, 0.3 * MS, 1.5);
    fill(&s, 2, 1000, 0.3 * MS, 1.5);
    fill(&s, 3, 1500, 0.3 * MS, 1.5);
    fill(&s, 6, 5000, 3 * MS, 0.2);
    fill(&s, 8, 600, 0.3 * MS, 1.5);
    tb_stretch_judge(&s, 9, &v);
    print_message("no lone: from %u base_to %u ratio %.3f ucb %.3f\n", v.from, v.base_to, v.ratio,
                  v.ucb);
    assert_int_equal(v.from, 16);
    assert_int_equal(v.base_to, 3);
    assert_int_equal(v.alone, 3000);
    assert_int_equal(v.crowded, 600);
    assert_true(v.judged && v.flat);
    assert_true(v.ratio > 0.8 && v.ratio < 1.2);
    /* The same crowded lives 2.5x longer: contention, judged and kept. */
    memset(s.life[8], 0, sizeof s.life[8]);
    fill(&s, 8, 600, 0.75 * MS, 1.5);
    tb_stretch_judge(&s, 9, &v);
    assert_int_equal(v.base_to, 3);
    assert_true(v.judged && !v.flat);
    assert_true(v.ratio > 2 && v.ratio < 3.2);
    /* 70 lone requests, flat lives (light16logn's shape): m = 0 alone is too
     * loose to refuse, the widened baseline refuses. */
    memset(s.life[8], 0, sizeof s.life[8]);
    fill(&s, 8, 600, 0.3 * MS, 1.5);
    fill(&s, 0, 70, 0.3 * MS, 1.5);
    tb_stretch_judge(&s, 9, &v);
    assert_int_equal(v.base_to, 3);
    assert_int_equal(v.alone, 3070);
    assert_true(v.judged && v.flat);
    /* m = 0 with enough requests: exactly the verdict of m = 0 alone (as
     * before the widening), whatever the other low levels hold. */
    fill(&s, 0, 1930, 0.3 * MS, 1.5);
    fill(&s, 1, 3000, 5 * MS, 0.1);
    tb_stretch_judge(&s, 9, &v);
    assert_int_equal(v.base_to, 0);
    assert_int_equal(v.alone, 2000);
    assert_true(v.judged && v.flat);
    assert_true(fabs(v.ratio - tb_stretch_quantile(&s, 16, UINT32_MAX, 0.5) /
                                   tb_stretch_quantile(&s, 0, 0, 0.5)) < 1e-12);
    /* A crowded group below 8 (knee 2: 4+): never widened, not judged. */
    memset(&s, 0, sizeof s);
    s.servers = 1;
    fill(&s, 1, 3000, 0.3 * MS, 1.5);
    fill(&s, 4, 600, 0.3 * MS, 1.5);
    tb_stretch_judge(&s, 2, &v);
    assert_int_equal(v.from, 4);
    assert_int_equal(v.base_to, 0);
    assert_false(v.judged);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_made),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_judge_busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
