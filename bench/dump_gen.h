/* SPDX-License-Identifier: MIT */
/* dump_gen.h — what svc_dump.c and stretch_dump.c generate their streams
 * from: one xorshift generator and one arrival process (Poisson, its rate
 * swinging between rho_lo and rho_hi of capacity over 8 s), so that both
 * dumps stay byte-identical across builds. Included by the .c file (found
 * beside it), so the one-file build their headers give still works. */
#ifndef TB_BENCH_DUMP_GEN_H
#define TB_BENCH_DUMP_GEN_H

#include <math.h>
#include <stdint.h>

#include "tb.h"

struct rng {
    uint64_t s;
};

static inline double unif(struct rng *g)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return ((double)(g->s >> 11) + 0.5) / 9007199254740992.0;
}

/* The next arrival after t, for a capacity of cap requests a second. */
static inline int64_t next_arrival(struct rng *g, int64_t t, double cap, double rho_lo,
                                   double rho_hi)
{
    double ph = (double)(t % (8 * TB_NS_PER_SEC)) / (8.0 * TB_NS_PER_SEC);
    double rho = rho_lo + (rho_hi - rho_lo) * 0.5 * (1 + sin(2 * M_PI * ph));
    return t + (int64_t)(-log(unif(g)) / (cap * rho) * 1e9) + 1;
}

#endif
