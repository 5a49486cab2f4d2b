/* SPDX-License-Identifier: MIT */
/* stretch_dump.c — every cell of the stretch accumulator's histograms (and
 * the rule's verdicts on them) over a battery of generated streams, for
 * comparing two builds of stats/stretch.c byte for byte (a change meant to be
 * exact, e.g. a faster structure for the requests in flight):
 *
 *   cc -O2 -Icommon -Icapture -Icapture/proto -Istats bench/stretch_dump.c \
 *      OLD/libtb_stats.a OLD/libtb_common.a -lm -o old
 *   ./build/bench/stretch_dump > new.txt; ./old > old.txt; cmp old.txt new.txt
 *
 * The streams: first-come-first-served servers of 1-64 cores from light load
 * to overload (queues of thousands), lognormal lives (mean 1 ms, sigma 1.5)
 * independent of the queue (departures far out of arrival order),
 * last-in-first-out (each request leaves before all those in flight), long
 * requests parked among
 * short ones, lives of 0 ns, under 1 µs, negative (skipped) and past the
 * last bin, timestamps rounded to 1 ns, 1 µs, 100 µs or 1 ms (ties in
 * arrivals and departures, departures at an arrival instant), 1-4 servers or
 * 300 with ids up to 5000. Lives at and beside every bin bound last. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stretch.h"

#include "dump_gen.h"

static double gauss(struct rng *g)
{
    return sqrt(-2 * log(unif(g))) * cos(2 * M_PI * unif(g));
}

enum shape { FCFS, LOGN, LIFO, PARKED, ODD };

struct scase {
    const char *name;
    enum shape shape;
    int servers, cores;
    double rho_lo, rho_hi; /* load swings between these, 8 s a cycle */
    int64_t q;             /* timestamps rounded down to this */
    uint32_t id_step;      /* server ids 1, 1 + step, ... */
    size_t n;
};

enum { MAXSRV = 300, MAXCORES = 64 };

static int64_t core_free[MAXSRV][MAXCORES];

/* n requests in arrival order. */
static void gen(const struct scase *c, uint64_t seed, struct tb_request *r)
{
    struct rng g = {seed * 0x9E3779B97F4A7C15ull + 1};
    int64_t t = 1000 * TB_NS_PER_SEC;
    for (int s = 0; s < c->servers; s++)
        for (int k = 0; k < c->cores; k++)
            core_free[s][k] = t;
    const double mean = 1e-3;
    double cap = c->servers * c->cores / mean;
    for (size_t i = 0; i < c->n; i++) {
        t = next_arrival(&g, t, cap, c->rho_lo, c->rho_hi);
        int s = (int)(unif(&g) * c->servers);
        int64_t dep;
        switch (c->shape) {
        case FCFS: {
            int64_t work = unif(&g) < 0.7 ? (int64_t)(-log(unif(&g)) * 0.7e6) : 2 * TB_NS_PER_MS;
            int k = 0;
            for (int j = 1; j < c->cores; j++)
                if (core_free[s][j] < core_free[s][k])
                    k = j;
            int64_t start = t > core_free[s][k] ? t : core_free[s][k];
            core_free[s][k] = start + work;
            dep = start + work;
            break;
        }
        case LOGN:
            dep = t + (int64_t)(mean * 1e9 * exp(1.5 * gauss(&g) - 1.125));
            break;
        case LIFO:
            /* Each request leaves before every one in flight: lives shrink
             * along a 2 s sawtooth. */
            dep = t + (2 * TB_NS_PER_SEC - (t % (2 * TB_NS_PER_SEC)));
            dep -= (int64_t)(unif(&g) * 1000);
            break;
        case PARKED:
            /* One in 50 lives 10-40 s; the others 0.1-3 ms. */
            dep = t + (unif(&g) < 0.02 ? (int64_t)((10 + 30 * unif(&g)) * 1e9)
                                       : (int64_t)((0.1 + 2.9 * unif(&g)) * 1e6));
            break;
        default: { /* ODD */
            double u = unif(&g);
            dep = u < 0.1    ? t
                  : u < 0.2  ? t + (int64_t)(unif(&g) * 1000)
                  : u < 0.25 ? t - 1 - (int64_t)(unif(&g) * 1e6)
                  : u < 0.3  ? t + (int64_t)(unif(&g) * 1e13)
                             : t + (int64_t)(mean * 1e9 * exp(gauss(&g)));
        }
        }
        memset(&r[i], 0, sizeof r[i]);
        r[i].tier = 1;
        r[i].server = 1 + (uint32_t)s * c->id_step;
        r[i].arrival_ns = t / c->q * c->q;
        r[i].departure_ns = dep / c->q * c->q;
    }
}

static void dump(const char *what, const struct tb_stretch *h)
{
    uint64_t n = tb_stretch_count(h, 0, UINT32_MAX);
    printf("  %s: servers %u, requests %" PRIu64 "\n", what, h->servers, n);
    for (uint32_t b = 0; b < TB_STRETCH_NCONC; b++)
        for (uint32_t i = 0; i < TB_STRETCH_NLIFE; i++)
            if (h->life[b][i])
                printf("    m>=%u bin %u: %u\n", TB_STRETCH_FROM[b], i, h->life[b][i]);
    const double knees[] = {0.9, 1.6, 3.7, 7.5, 19, 70};
    for (size_t k = 0; k < sizeof knees / sizeof *knees; k++) {
        struct tb_stretch_verdict v;
        tb_stretch_judge(h, knees[k], &v);
        printf("    knee %.1f: from %u base_to %u alone %" PRIu64 " crowded %" PRIu64
               " ratio %.17g ucb %.17g judged %d flat %d\n",
               knees[k], v.from, v.base_to, v.alone, v.crowded, v.ratio, v.ucb, v.judged, v.flat);
    }
}

int main(void)
{
    const struct scase cases[] = {
        {"fcfs-light-1core", FCFS, 2, 1, 0.2, 0.6, 1, 1, 40000},
        {"fcfs-busy-4core-ns", FCFS, 3, 4, 0.6, 1.3, 1, 1, 120000},
        {"fcfs-busy-4core-us", FCFS, 3, 4, 0.6, 1.3, 1000, 1, 120000},
        {"fcfs-8core-100us", FCFS, 2, 8, 0.5, 1.2, 100000, 1, 120000},
        {"fcfs-over-32core-ms", FCFS, 2, 32, 0.7, 1.4, 1000000, 1, 150000},
        {"fcfs-over-64core-ns", FCFS, 1, 64, 0.9, 1.5, 1, 1, 150000},
        {"fcfs-300srv-sparse", FCFS, 300, 2, 0.3, 1.2, 1000, 17, 200000},
        {"logn-4core-ns", LOGN, 4, 4, 0.3, 1.2, 1, 1, 120000},
        {"logn-16core-us", LOGN, 2, 16, 0.5, 1.3, 1000, 1, 120000},
        {"lifo-1srv-ns", LIFO, 1, 1, 0.5, 1.0, 1, 1, 40000},
        {"lifo-3srv-us", LIFO, 3, 2, 0.5, 1.0, 1000, 1, 40000},
        {"parked-2srv-ns", PARKED, 2, 4, 0.4, 1.1, 1, 1, 100000},
        {"parked-2srv-100us", PARKED, 2, 4, 0.4, 1.1, 100000, 1, 100000},
        {"odd-3srv-ns", ODD, 3, 4, 0.3, 1.0, 1, 5, 60000},
        {"odd-3srv-1ms", ODD, 3, 4, 0.3, 1.0, 1000000, 5, 60000},
    };
    size_t maxn = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        maxn = cases[i].n > maxn ? cases[i].n : maxn;
    struct tb_request *r = malloc(maxn * sizeof *r);
    struct tb_stretch *tot = malloc(sizeof *tot);
    if (!r || !tot)
        return 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct scase *c = &cases[i];
        for (uint64_t seed = 1; seed <= 3; seed++) {
            gen(c, seed + 10 * i, r);
            struct tb_stretchacc *a;
            int rc = tb_stretchacc_new(&a);
            for (size_t k = 0; k < c->n && !rc; k++)
                rc = tb_stretchacc_add(a, &r[k]);
            printf("%s seed %" PRIu64 ": rc %d\n", c->name, seed, rc);
            if (rc) {
                tb_stretchacc_free(a);
                continue;
            }
            for (uint32_t id = 0; id <= 1 + (uint32_t)c->servers * c->id_step; id++) {
                const struct tb_stretch *h = tb_stretchacc_server(a, id);
                if (h) {
                    char what[32];
                    snprintf(what, sizeof what, "server %u", id);
                    dump(what, h);
                }
            }
            tb_stretchacc_total(a, tot);
            dump("total", tot);
            tb_stretchacc_free(a);
        }
    }
    /* Every bin bound and its neighbours, and the edges of int64. */
    printf("bins\n");
    for (uint32_t b = 1; b < TB_STRETCH_NLIFE; b++) {
        double lo, hi;
        tb_stretch_bin_bounds(b, &lo, &hi);
        int64_t x = (int64_t)ceil(lo);
        for (int64_t d = -3; d <= 3; d++)
            printf(" %" PRId64 ":%u", x + d, tb_stretch_bin(x + d));
        printf("\n");
    }
    const int64_t edges[] = {INT64_MIN, -1, 0, 1, 999, 1000, 1001, INT64_MAX / 2, INT64_MAX - 1,
                             INT64_MAX};
    for (size_t k = 0; k < sizeof edges / sizeof *edges; k++)
        printf(" %" PRId64 ":%u", edges[k], tb_stretch_bin(edges[k]));
    printf("\n");
    free(r);
    free(tot);
    return 0;
}
