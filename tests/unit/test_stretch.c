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

/* The bin of a life by the header's definition, in long double: bin 0 under
 * 1 µs, bin i >= 1 from 1000·2^((i-1)/16) ns, the last from 2^27 µs. */
static uint32_t def_bin(int64_t life_ns)
{
    if (life_ns < 1000)
        return 0;
    long double o = log2l((long double)life_ns / 1000.0L) * TB_STRETCH_BINS_PER_OCTAVE;
    return o >= TB_STRETCH_NLIFE - 2 ? TB_STRETCH_NLIFE - 1 : (uint32_t)o + 1;
}

/* Every life's bin as defined: both sides of every bin's lower bound (from
 * 1000·2^((i-1)/16) in long double, rounded up to a whole ns), every life up
 * to 3 ms, random ones up to 10^13 ns, the ends of int64. */
static void test_bins(void **state)
{
    (void)state;
    for (uint32_t b = 1; b < TB_STRETCH_NLIFE; b++) {
        int64_t lo = (int64_t)ceill(1000.0L * exp2l((long double)(b - 1) / 16));
        if (tb_stretch_bin(lo) != b || tb_stretch_bin(lo - 1) != b - 1)
            fail_msg("bin %u from %lld ns: bin(%lld) = %u, bin(%lld) = %u", b, (long long)lo,
                     (long long)lo, tb_stretch_bin(lo), (long long)lo - 1, tb_stretch_bin(lo - 1));
        double blo, bhi;
        tb_stretch_bin_bounds(b, &blo, &bhi);
        assert_true(blo <= (double)lo && (double)lo - blo < 1);
    }
    for (int64_t x = -5; x <= 3 * MS; x++)
        if (tb_stretch_bin(x) != def_bin(x))
            fail_msg("bin(%lld) = %u, defined %u", (long long)x, tb_stretch_bin(x), def_bin(x));
    rs = 5;
    for (int i = 0; i < 1000000; i++) {
        int64_t x = (int64_t)exp(unif() * log(1e13));
        if (tb_stretch_bin(x) != def_bin(x))
            fail_msg("bin(%lld) = %u, defined %u", (long long)x, tb_stretch_bin(x), def_bin(x));
    }
    assert_int_equal(tb_stretch_bin(INT64_MIN), 0);
    assert_int_equal(tb_stretch_bin(INT64_MAX), TB_STRETCH_NLIFE - 1);
    assert_int_equal(tb_stretch_bin(INT64_MAX - 1), TB_STRETCH_NLIFE - 1);
}

/* Server `server`'s histogram counted here, request by request: in_flight()
 * and the definition of a bin. */
static void brute_hist(const struct tb_request *r, size_t n, uint32_t server, struct tb_stretch *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        if (r[i].server != server || r[i].departure_ns < r[i].arrival_ns)
            continue;
        h->servers = 1;
        size_t m = in_flight(r, n, i);
        uint32_t b = 0;
        while (b + 1 < TB_STRETCH_NCONC && m >= TB_STRETCH_FROM[b + 1])
            b++;
        h->life[b][def_bin(r[i].departure_ns - r[i].arrival_ns)]++;
    }
}

/* Streams whose departures come in every order the accumulator's structures
 * must handle (stretch.c: a sorted ring and a heap for those that would
 * overtake more than a few): first come first served on 4 cores in overload,
 * each request leaving before all those in flight, long requests parked
 * among short ones, lives of 0 and negative ones, timestamps rounded to 1 ms
 * (ties everywhere), sparse server ids. Every cell of every server's
 * histogram against brute_hist. */
static void test_orders(void **state)
{
    (void)state;
    enum { N = 2500, SHAPES = 5 };
    struct tb_request *r = malloc(N * sizeof *r);
    static struct tb_stretch want;
    for (int shape = 0; shape < SHAPES; shape++) {
        rs = 100 + (uint64_t)shape;
        int64_t t = 0, core[3][4] = {{0}};
        for (size_t i = 0; i < N; i++) {
            t += (int64_t)(-log(unif()) * 0.15 * MS);
            uint32_t s = (uint32_t)(unif() * 3);
            int64_t d;
            if (shape == 0) { /* FCFS, 4 cores, 1 or 3 ms: load 1.1 */
                int c = 0;
                for (int k = 1; k < 4; k++)
                    if (core[s][k] < core[s][c])
                        c = k;
                int64_t st = t > core[s][c] ? t : core[s][c];
                core[s][c] = st + (unif() < 0.5 ? 1 : 3) * MS;
                d = core[s][c];
            } else if (shape == 1) { /* LIFO: the sawtooth of lives */
                d = t + (400 * MS - t % (400 * MS));
            } else if (shape == 2) { /* 3% live 2 s among 0.1-1 ms */
                d = t + (unif() < 0.03 ? 2000 * MS : (int64_t)((0.1 + unif()) * MS));
            } else if (shape == 3) { /* 0, negative, sub-µs and lognormal lives */
                double u = unif();
                int64_t logn = (int64_t)(4 * MS * exp(1.5 * gauss()));
                d = u < 0.15 ? t : u < 0.25 ? t - 1 : u < 0.35 ? t + 999 : t + logn;
            } else { /* rounded to 1 ms: ties of arrivals and departures */
                d = t + (int64_t)(4 * MS * exp(1.5 * gauss()));
            }
            r[i] = rq(1 + s * 1000, shape == 4 ? t / MS * MS : t, shape == 4 ? d / MS * MS : d);
        }
        struct tb_stretchacc *a;
        assert_int_equal(tb_stretchacc_new(&a), 0);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(tb_stretchacc_add(a, &r[i]), 0);
        uint64_t deep = 0;
        for (uint32_t s = 0; s < 3; s++) {
            brute_hist(r, N, 1 + s * 1000, &want);
            const struct tb_stretch *got = tb_stretchacc_server(a, 1 + s * 1000);
            assert_non_null(got);
            for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++)
                for (uint32_t i = 0; i < TB_STRETCH_NLIFE; i++)
                    if (got->life[b][i] != want.life[b][i])
                        fail_msg("shape %d server %u m>=%u bin %u: %u, counted %u", shape,
                                 1 + s * 1000, TB_STRETCH_FROM[b], i, got->life[b][i],
                                 want.life[b][i]);
            assert_memory_equal(got, &want, sizeof want);
            deep += tb_stretch_count(&want, 16, UINT32_MAX);
        }
        assert_null(tb_stretchacc_server(a, 2));
        /* Each shape reaches deep queues (the ring grows; in all but the first,
         * departures overtake more than the ring walks past). */
        print_message("shape %d: %llu requests arrived into 16+ in flight\n", shape,
                      (unsigned long long)deep);
        assert_true(deep > 100);
        tb_stretchacc_free(a);
    }
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
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_orders),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_judge_busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
