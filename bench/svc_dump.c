/* SPDX-License-Identifier: MIT */
/* svc_dump.c — every row the service-time estimator gives over a battery of
 * generated streams, for comparing two builds of stats/service.c byte for
 * byte (a change meant to be exact, e.g. a faster data structure):
 *
 *   cc -O2 -Icommon -Istats bench/svc_dump.c OLD/libtb_stats.a OLD/libtb_common.a -lm -o old
 *   ./build/bench/svc_dump > new.txt; ./old > old.txt; cmp old.txt new.txt
 *
 * The streams: first-come-first-served servers of 1-32 cores from light load
 * to overload (queues far beyond the 16 levels in flight), two or three
 * classes, timestamps rounded to 1 ns, 1 us or 100 us (departures at the
 * same instant: their order must not matter), the 4096-sample reservoirs
 * and 16-sample ones (so that the order in which samples reach a full
 * reservoir shows), with and without downstream calls from the servers'
 * machines, a few unclassified requests, levels 1, 4 and 16. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#include "dump_gen.h"

enum { MAXSRV = 4, MAXCORES = 32 };

struct scase {
    const char *name;
    int servers, cores, classes;
    double rho_lo, rho_hi; /* load swings between these, 8 s a cycle */
    int64_t q;             /* timestamps rounded down to this */
    int calls;             /* downstream calls from the servers' machines */
    int unclassified;      /* 1 in this many requests unclassified (0: none) */
    size_t n;
};

static void ip(struct tb_addr *a, uint8_t last)
{
    const uint8_t v[4] = {10, 0, 1, last};
    tb_addr_from_v4(a, v, 0);
}

/* n requests in arrival order, and one call per request of a server with a
 * host when calls (its machine's, inside the life). */
static void gen(const struct scase *c, uint64_t seed, struct tb_request *r,
                struct tb_request *down, size_t *ndown)
{
    struct rng g = {seed * 0x9E3779B97F4A7C15ull + 1};
    int64_t core_free[MAXSRV][MAXCORES];
    int64_t t = 1000 * TB_NS_PER_SEC;
    for (int s = 0; s < c->servers; s++)
        for (int k = 0; k < c->cores; k++)
            core_free[s][k] = t;
    const double mean = 1e-3;
    double cap = c->servers * c->cores / mean;
    *ndown = 0;
    for (size_t i = 0; i < c->n; i++) {
        t = next_arrival(&g, t, cap, c->rho_lo, c->rho_hi);
        int s = (int)(unif(&g) * c->servers);
        uint32_t cls = 1 + (uint32_t)(unif(&g) * c->classes);
        int64_t work = cls == 1   ? (int64_t)(-log(unif(&g)) * 0.7e6)
                       : cls == 2 ? 2 * TB_NS_PER_MS
                                  : (int64_t)(-log(unif(&g)) * 1.5e6);
        int k = 0;
        for (int j = 1; j < c->cores; j++)
            if (core_free[s][j] < core_free[s][k])
                k = j;
        int64_t start = t > core_free[s][k] ? t : core_free[s][k];
        core_free[s][k] = start + work;
        memset(&r[i], 0, sizeof r[i]);
        r[i].tier = 1;
        r[i].server = (uint32_t)s + 1;
        r[i].class_id = c->unclassified && unif(&g) * c->unclassified < 1 ? 0 : cls;
        r[i].arrival_ns = t / c->q * c->q;
        r[i].departure_ns = (start + work) / c->q * c->q;
        ip(&r[i].client, 200);
        if (c->calls && s < 2 && work > 0) {
            struct tb_request *d = &down[(*ndown)++];
            memset(d, 0, sizeof *d);
            d->tier = 2;
            d->server = 9;
            d->class_id = 1;
            d->arrival_ns = (start + work / 4) / c->q * c->q;
            d->departure_ns = (start + work / 2) / c->q * c->q;
            ip(&d->client, (uint8_t)(1 + s));
        }
    }
}

int main(void)
{
    const struct scase cases[] = {
        {"light-1core", 2, 1, 2, 0.2, 0.6, 1, 0, 0, 40000},
        {"busy-4core-ns", 3, 4, 3, 0.6, 1.3, 1, 0, 0, 120000},
        {"busy-4core-us", 3, 4, 3, 0.6, 1.3, 1000, 0, 0, 120000},
        {"busy-8core-100us", 2, 8, 2, 0.5, 1.2, 100000, 0, 0, 120000},
        {"over-32core-us", 2, 32, 3, 0.7, 1.4, 1000, 0, 0, 150000},
        {"calls-4core-us", 3, 4, 2, 0.5, 1.3, 1000, 1, 0, 80000},
        {"calls-16core-ns", 2, 16, 3, 0.6, 1.2, 1, 1, 0, 80000},
        {"unclassified-4core-us", 3, 4, 2, 0.5, 1.3, 1000, 0, 50, 80000},
        {"unclassified-calls-8core", 2, 8, 2, 0.5, 1.3, 1000, 1, 97, 80000},
    };
    const uint32_t reservoirs[2] = {4096, 16};
    const uint32_t levels[3] = {16, 4, 1};
    size_t maxn = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        maxn = cases[i].n > maxn ? cases[i].n : maxn;
    struct tb_request *r = malloc(maxn * sizeof *r), *down = malloc(maxn * sizeof *down);
    if (!r || !down)
        return 1;
    struct tb_svc_host hosts[2] = {{.server = 1}, {.server = 2}};
    ip(&hosts[0].addr, 1);
    ip(&hosts[1].addr, 2);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct scase *c = &cases[i];
        for (uint64_t seed = 1; seed <= 2; seed++) {
            size_t ndown;
            gen(c, seed + 10 * i, r, down, &ndown);
            for (int ri = 0; ri < 2; ri++)
                for (int li = 0; li < 3; li++) {
                    struct tb_svc_opts o;
                    tb_svc_opts_default(&o);
                    o.period_ns = 10 * TB_NS_PER_SEC;
                    o.reservoir = reservoirs[ri];
                    o.levels = levels[li];
                    struct tb_class_service *s;
                    size_t ns;
                    int64_t unit;
                    int rc = tb_service_estimate(r, c->n, down, ndown, hosts, c->calls ? 2 : 0,
                                                 NULL, 0, &o, &s, &ns, &unit);
                    printf("%s seed %" PRIu64 " reservoir %u levels %u: rc %d, unit %" PRId64
                           ", %zu rows\n",
                           c->name, seed, o.reservoir, o.levels, rc, rc ? 0 : unit, rc ? 0 : ns);
                    for (size_t k = 0; !rc && k < ns; k++)
                        printf("  class %u period %" PRId64 " service %" PRId64
                               " samples %u requests %u method %d units %.17g\n",
                               s[k].class_id, s[k].period_start_ns, s[k].service_ns, s[k].samples,
                               s[k].requests, (int)s[k].method, s[k].units);
                    if (!rc)
                        free(s);
                }
        }
    }
    free(r);
    free(down);
    return 0;
}
