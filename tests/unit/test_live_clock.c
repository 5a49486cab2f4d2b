/* SPDX-License-Identifier: MIT */
/* test_live_clock.c — the live capture clock (tb_live_clock, capture/live.h):
 * packet time, the wall clock less its lag only for an idle link, never
 * back. The figures are worked by hand from the rule as live.h states it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "live.h"

#define MS TB_NS_PER_MS
#define T0 (INT64_C(1800000000) * TB_NS_PER_SEC)

static void test_live_clock(void **state)
{
    (void)state;
    /* Idle link: the wall clock less 200 ms moves it past the last packet. */
    assert_int_equal(tb_live_clock(T0, T0 + 100 * MS, T0 + 1000 * MS, true), T0 + 800 * MS);
    /* ...but never behind the last packet (a stamp ahead of the wall clock). */
    assert_int_equal(tb_live_clock(T0, T0 + 900 * MS, T0 + 1000 * MS, true), T0 + 900 * MS);
    /* After a 1.6 s stall the ring still holds packets stamped from the
     * stall's start: read so far up to +0.3 s, wall clock at +1.9 s. The
     * wall clock may not move it (it would close, with a 1 s grace, the
     * windows up to +0.7 s before their packets are read). */
    assert_int_equal(tb_live_clock(T0, T0 + 300 * MS, T0 + 1900 * MS, false), T0 + 300 * MS);
    /* Never back: a wall clock stepped back, an older last packet. */
    assert_int_equal(tb_live_clock(T0 + 500 * MS, T0 + 100 * MS, T0 - 5000 * MS, true),
                     T0 + 500 * MS);
    assert_int_equal(tb_live_clock(T0 + 500 * MS, T0 + 100 * MS, T0 + 600 * MS, false),
                     T0 + 500 * MS);
    /* Nothing yet: the first tick of an idle capture starts from the wall. */
    assert_int_equal(tb_live_clock(0, 0, T0, true), T0 - TB_LIVE_CLOCK_LAG_NS);
    assert_int_equal(tb_live_clock(0, 0, T0, false), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
