/* SPDX-License-Identifier: MIT */
/* test_quota.c — a CPU quota's period from completions (stats.h
 * tb_quota_period), on servers simulated here event by event: one FCFS
 * worker held to a CFS quota (runs at most Q of every period P, resumes at
 * the next period's start, a few hundred microseconds late), against the
 * same worker stopped by garbage collections at random times, the same
 * worker unthrottled and saturated, and a worker whose idle times are
 * periodic (a load generator ticking) with nothing in flight during them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "stats.h"

#define MS INT64_C(1000000)

static uint64_t rng = 88172645463325252ull;
static double unif(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double expo(double mean) { return -mean * log(1 - unif()); }

/* The worker's CPU: when it may run. */
enum stop { STOP_NONE, STOP_QUOTA, STOP_GC };
struct cpu {
    enum stop kind;
    int64_t period, quota;   /* STOP_QUOTA */
    int64_t gc_at, gc_len;   /* STOP_GC: the next pause */
};

/* Runs `need` ns of work starting at t, honouring the stops; returns the
 * finish time. A quota period's budget is tracked in `used`. */
static int64_t run(struct cpu *c, int64_t t, int64_t need, int64_t *used, int64_t *pstart)
{
    while (need > 0) {
        if (c->kind == STOP_QUOTA) {
            int64_t p0 = t / c->period * c->period;
            if (p0 != *pstart) {
                *pstart = p0;
                *used = 0;
            }
            int64_t left = c->quota - *used, end = p0 + c->period;
            if (left <= 0) {
                /* Throttled: resume at the next period, a little late. */
                t = end + (int64_t)(unif() * 0.4 * MS);
                continue;
            }
            int64_t slice = need < left ? need : left;
            if (t + slice > end)
                slice = end - t;
            t += slice;
            *used += slice;
            need -= slice;
        } else if (c->kind == STOP_GC) {
            if (t >= c->gc_at) {
                if (c->gc_at + c->gc_len > t)
                    t = c->gc_at + c->gc_len;
                c->gc_at = c->gc_at + c->gc_len + (int64_t)((0.5 + unif()) * 1000 * MS);
                c->gc_len = (int64_t)((100 + unif() * 200) * MS);
                continue;
            }
            int64_t slice = need;
            if (t + slice > c->gc_at)
                slice = c->gc_at - t;
            t += slice;
            need -= slice;
        } else {
            t += need;
            need = 0;
        }
    }
    return t;
}

/* n requests, Poisson arrivals at `gap_ns` mean (or bursts of 8 every
 * `tick_ns` when tick_ns > 0), FCFS, exponential work of `work_ns` mean. */
static struct tb_quota simulate(struct cpu *c, size_t n, double gap_ns, double work_ns,
                                int64_t tick_ns)
{
    int64_t *arr = malloc(n * sizeof *arr), *dep = malloc(n * sizeof *dep);
    assert_non_null(arr);
    assert_non_null(dep);
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        if (tick_ns > 0)
            t = (double)(i / 8) * (double)tick_ns + (double)(i % 8) * 1000;
        else
            t += expo(gap_ns);
        arr[i] = (int64_t)t;
    }
    int64_t free_at = 0, used = 0, pstart = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t start = arr[i] > free_at ? arr[i] : free_at;
        free_at = run(c, start, (int64_t)expo(work_ns) + 1, &used, &pstart);
        dep[i] = free_at;
    }
    struct tb_quota q;
    assert_int_equal(tb_quota_period(arr, n, dep, n, &q), 0);
    free(arr);
    free(dep);
    return q;
}

static void test_quota_found(void **state)
{
    (void)state;
    /* 40 ms every 100 ms (CPUQuota=40%), offered 60% of a core for 20 s. */
    struct cpu c = {.kind = STOP_QUOTA, .period = 100 * MS, .quota = 40 * MS};
    struct tb_quota q = simulate(&c, 6000, 3.3 * MS, 2.0 * MS, 0);
    printf("quota 40/100: period %.3f ms, %zu stops, %zu of %zu steps in step\n",
           (double)q.period_ns / 1e6, q.stops, q.in_step, q.steps);
    assert_true(q.period_ns > 0);
    assert_true(llabs(q.period_ns - 100 * MS) <= MS / 2);
    /* A 250 ms period with 150 ms of it (systemd CPUQuotaPeriodSec=250ms). */
    struct cpu c2 = {.kind = STOP_QUOTA, .period = 250 * MS, .quota = 150 * MS};
    q = simulate(&c2, 8000, 2.5 * MS, 2.0 * MS, 0);
    printf("quota 150/250: period %.3f ms, %zu stops, %zu of %zu steps in step\n",
           (double)q.period_ns / 1e6, q.stops, q.in_step, q.steps);
    assert_true(llabs(q.period_ns - 250 * MS) <= MS);
    /* Offered 36% of a core against 40%: throttled only in the periods a
     * burst of arrivals lands in. */
    struct cpu c3 = {.kind = STOP_QUOTA, .period = 100 * MS, .quota = 40 * MS};
    q = simulate(&c3, 4000, 5.5 * MS, 2.0 * MS, 0);
    printf("quota 40/100 at 36%%: period %.3f ms, %zu stops, %zu of %zu steps in step\n",
           (double)q.period_ns / 1e6, q.stops, q.in_step, q.steps);
    assert_true(llabs(q.period_ns - 100 * MS) <= MS / 2);
}

static void test_gc_not_quota(void **state)
{
    (void)state;
    for (int seed = 0; seed < 5; seed++) {
        struct cpu c = {.kind = STOP_GC, .gc_at = 700 * MS, .gc_len = 150 * MS};
        struct tb_quota q = simulate(&c, 8000, 3.0 * MS, 1.5 * MS, 0);
        assert_int_equal(q.period_ns, 0);
    }
}

static void test_saturated_not_quota(void **state)
{
    (void)state;
    for (int seed = 0; seed < 5; seed++) {
        /* 95% busy without a quota: long gaps only by chance. */
        struct cpu c = {.kind = STOP_NONE};
        struct tb_quota q = simulate(&c, 10000, 2.1 * MS, 2.0 * MS, 0);
        assert_int_equal(q.period_ns, 0);
    }
}

static void test_periodic_idle_not_quota(void **state)
{
    (void)state;
    /* Bursts every 100 ms drained in ~16 ms: periodic gaps, but idle ones. */
    struct cpu c = {.kind = STOP_NONE};
    struct tb_quota q = simulate(&c, 4000, 0, 2.0 * MS, 100 * MS);
    assert_int_equal(q.period_ns, 0);
}

static void test_small(void **state)
{
    (void)state;
    struct tb_quota q;
    int64_t a[2] = {1, 2}, d[2] = {3, 4};
    assert_int_equal(tb_quota_period(a, 2, d, 2, &q), 0);
    assert_int_equal(q.period_ns, 0);
    assert_int_equal(tb_quota_period(NULL, 0, NULL, 0, &q), 0);
    assert_int_equal(q.period_ns, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_found),
        cmocka_unit_test(test_gc_not_quota),
        cmocka_unit_test(test_saturated_not_quota),
        cmocka_unit_test(test_periodic_idle_not_quota),
        cmocka_unit_test(test_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
