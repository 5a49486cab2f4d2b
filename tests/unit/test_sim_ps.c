/* SPDX-License-Identifier: MIT */
/* test_sim_ps.c — the processor-sharing server: shares, cores, speed, freezes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../sim/sim.h"

#define MS TB_NS_PER_MS

/* Runs the server until empty; records each job's completion time by index. */
static void drain(struct sim_ps *ps, int64_t now, int64_t *done, const int *ids)
{
    for (;;) {
        int64_t t = sim_ps_next(ps, now);
        if (t == INT64_MAX)
            return;
        now = t;
        sim_ps_advance(ps, now);
        void *ud;
        while ((ud = sim_ps_pop_done(ps)) != NULL)
            done[(const int *)ud - ids] = now;
    }
}

static const int ids[8];

static void test_one_core_shares(void **state)
{
    (void)state;
    struct sim_ps ps;
    sim_ps_init(&ps, 1, 1.0, 0);
    int64_t done[8] = {0};
    /* Two 10 ms jobs on one core share it: both leave at 20 ms. */
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[0]);
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[1]);
    drain(&ps, 0, done, ids);
    assert_int_equal(done[0], 20 * MS);
    assert_int_equal(done[1], 20 * MS);
    /* 30 ms and 10 ms: the short one leaves at 20 ms, the long one runs alone
     * for its last 20 ms and leaves at 40 ms. */
    sim_ps_add(&ps, 100 * MS, 30 * MS, (void *)&ids[2]);
    sim_ps_add(&ps, 100 * MS, 10 * MS, (void *)&ids[3]);
    drain(&ps, 100 * MS, done, ids);
    assert_int_equal(done[3], 120 * MS);
    assert_int_equal(done[2], 140 * MS);
    sim_ps_free(&ps);
}

static void test_cores_and_speed(void **state)
{
    (void)state;
    struct sim_ps ps;
    int64_t done[8] = {0};
    /* Two cores, two jobs: no sharing. Three jobs: each gets 2/3 of a core. */
    sim_ps_init(&ps, 2, 1.0, 0);
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[0]);
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[1]);
    drain(&ps, 0, done, ids);
    assert_int_equal(done[0], 10 * MS);
    assert_int_equal(done[1], 10 * MS);
    for (int i = 2; i < 5; i++)
        sim_ps_add(&ps, 100 * MS, 10 * MS, (void *)&ids[i]);
    drain(&ps, 100 * MS, done, ids);
    assert_int_equal(done[2], 115 * MS);
    assert_int_equal(done[4], 115 * MS);
    sim_ps_free(&ps);

    /* Half speed doubles the time; a speed change midway splits the work. */
    sim_ps_init(&ps, 1, 0.5, 0);
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[0]);
    assert_int_equal(sim_ps_next(&ps, 0), 20 * MS);
    sim_ps_set_speed(&ps, 10 * MS, 1.0); /* 5 ms of work done, 5 left at full speed */
    drain(&ps, 10 * MS, done, ids);
    assert_int_equal(done[0], 15 * MS);
    /* Utilisation: one of one core busy for 15 ms. */
    assert_true(ps.busy_core_ns > 15 * MS - 1 && ps.busy_core_ns < 15 * MS + 1);
    sim_ps_free(&ps);
}

static void test_freeze(void **state)
{
    (void)state;
    struct sim_ps ps;
    int64_t done[8] = {0};
    sim_ps_init(&ps, 1, 1.0, 0);
    sim_ps_add(&ps, 0, 10 * MS, (void *)&ids[0]);
    sim_ps_set_frozen(&ps, 4 * MS, true);
    /* Nothing progresses while frozen, not even newly admitted work. */
    assert_int_equal(sim_ps_next(&ps, 4 * MS), INT64_MAX);
    sim_ps_add(&ps, 50 * MS, 1 * MS, (void *)&ids[1]);
    assert_null(sim_ps_pop_done(&ps));
    sim_ps_set_frozen(&ps, 204 * MS, false);
    /* 6 ms left of job 0 and 1 ms of job 1, sharing: job 1 at 206, job 0 at 211. */
    drain(&ps, 204 * MS, done, ids);
    assert_int_equal(done[1], 206 * MS);
    assert_int_equal(done[0], 211 * MS);
    sim_ps_free(&ps);
}

static void test_zero_work_and_ties(void **state)
{
    (void)state;
    struct sim_ps ps;
    sim_ps_init(&ps, 1, 1.0, 0);
    sim_ps_add(&ps, 5, 0, (void *)&ids[0]);
    sim_ps_add(&ps, 5, 0, (void *)&ids[1]);
    assert_int_equal(sim_ps_next(&ps, 5), 5);
    sim_ps_advance(&ps, 5);
    /* Equal finishing points leave in admission order. */
    assert_ptr_equal(sim_ps_pop_done(&ps), &ids[0]);
    assert_ptr_equal(sim_ps_pop_done(&ps), &ids[1]);
    assert_null(sim_ps_pop_done(&ps));
    assert_int_equal(sim_ps_next(&ps, 5), INT64_MAX);
    sim_ps_free(&ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_core_shares),
        cmocka_unit_test(test_cores_and_speed),
        cmocka_unit_test(test_freeze),
        cmocka_unit_test(test_zero_work_and_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
