/* SPDX-License-Identifier: MIT */
/* test_sim_heap.c — the simulator's event heap: time order, FIFO ties, growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../sim/sim.h"

static void test_order_and_ties(void **state)
{
    (void)state;
    struct sim_heap h;
    sim_heap_init(&h);
    static const int64_t times[] = {50, 10, 30, 10, 20, 10, 40};
    for (size_t i = 0; i < TB_ARRAY_SIZE(times); i++)
        assert_int_equal(sim_heap_push(&h, times[i], (uint32_t)i, NULL, 0), 0);
    assert_int_equal(sim_heap_peek(&h)->t, 10);
    /* Same-time events leave in insertion order: kinds 1, 3, 5 at t=10. */
    static const int64_t want_t[] = {10, 10, 10, 20, 30, 40, 50};
    static const uint32_t want_k[] = {1, 3, 5, 4, 2, 6, 0};
    struct sim_event e;
    for (size_t i = 0; i < TB_ARRAY_SIZE(want_t); i++) {
        assert_true(sim_heap_pop(&h, &e));
        assert_int_equal(e.t, want_t[i]);
        assert_int_equal(e.kind, want_k[i]);
    }
    assert_false(sim_heap_pop(&h, &e));
    assert_null(sim_heap_peek(&h));
    sim_heap_free(&h);
}

static void test_many(void **state)
{
    (void)state;
    struct sim_heap h;
    sim_heap_init(&h);
    struct sim_rng r;
    sim_rng_seed(&r, 7);
    /* 100000 pseudo-random times come out sorted, ties by sequence. */
    for (int i = 0; i < 100000; i++)
        assert_int_equal(sim_heap_push(&h, (int64_t)sim_rng_below(&r, 5000), 0, NULL, 0), 0);
    assert_int_equal(h.n, 100000);
    struct sim_event prev, e;
    assert_true(sim_heap_pop(&h, &prev));
    size_t n = 1;
    while (sim_heap_pop(&h, &e)) {
        assert_true(e.t > prev.t || (e.t == prev.t && e.seq > prev.seq));
        prev = e;
        n++;
    }
    assert_int_equal(n, 100000);
    sim_heap_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_ties),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
