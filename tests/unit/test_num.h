/* SPDX-License-Identifier: MIT */
/* test_num.h — numeric helpers for unit tests that build data: a tolerance
 * assert that prints both values, and a seeded xorshift generator with
 * uniform and normal draws (tests set `rs` from their seed, so every run
 * draws the same numbers). Include after <cmocka.h>; one state per test
 * program. */
#ifndef TB_TEST_NUM_H
#define TB_TEST_NUM_H

#include <math.h>
#include <stdint.h>

/* |a - b| <= eps, printing both values on failure (NAN fails). */
#define assert_near(a, b, eps)                                                             \
    do {                                                                                   \
        double a_ = (a), b_ = (b), e_ = (eps);                                             \
        if (!(fabs(a_ - b_) <= e_))                                                        \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, e_);            \
    } while (0)

static uint64_t rs;
/* Uniform on (0, 1). */
static inline double unif(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}
/* Standard normal (Box–Muller). */
static inline double gauss(void)
{
    return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
}

#endif
