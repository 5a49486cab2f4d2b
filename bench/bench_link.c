/* SPDX-License-Identifier: MIT */
/* bench_link.c — transaction linking (analysis/link.c) speed: the requests of
 * a stored capture linked in memory, best of three, in requests per second.
 * usage: bench_link [DB]; BENCH_LINK_RUNS=N runs (3), BENCH_LINK_BASELINE=1
 * also times each run without the per-child budget (interleaved, best of N
 * each) and prints the ratio; the db8-like case: a DB of
 * bench/nstar/db8.conf --duration 40s --seed 113 or 114 (minutes without
 * the budget). Without DB it simulates linking.conf for 60 s
 * ($TBNECK_SIM, about 480 000 requests, ~60 in flight at the application
 * tier) and captures it ($TBNECK) into a temporary file. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callers.h"
#include "catalog.h"
#include "link.h"
#include "store.h"

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char db[256], cmd[1024];
    if (argc > 1) {
        snprintf(db, sizeof db, "%s", argv[1]);
    } else {
        const char *sim = getenv("TBNECK_SIM"), *tb = getenv("TBNECK"), *src = getenv("TB_SRCDIR");
        if (!sim || !tb || !src) {
            fprintf(stderr, "bench_link: give a DB, or set TBNECK_SIM, TBNECK and TB_SRCDIR\n");
            return 2;
        }
        snprintf(db, sizeof db, "/tmp/bench_link.%d.db", (int)getpid());
        snprintf(cmd, sizeof cmd,
                 "%s %s/sim/examples/linking.conf --duration 60s -q --out /tmp/bench_link.%d && "
                 "%s capture -q -r /tmp/bench_link.%d.pcap --db %s",
                 sim, src, (int)getpid(), tb, (int)getpid(), db);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_link: simulation or capture failed\n");
            return 1;
        }
    }
    char err[512] = "";
    struct tb_store *st;
    struct tb_catalog *cat = NULL;
    if (tb_store_open(&st, db, TB_STORE_READONLY, err, sizeof err)) {
        fprintf(stderr, "bench_link: %s\n", err);
        return 1;
    }
    struct tb_request *rq = NULL;
    size_t n = 0;
    struct tb_callers *cl = NULL;
    if (tb_catalog_new(&cat) || tb_store_load_catalog(st, cat) ||
        tb_store_requests(st, 0, INT64_MIN, INT64_MAX, &rq, &n) || tb_callers_new(&cl, cat)) {
        fprintf(stderr, "bench_link: cannot load %s\n", db);
        return 1;
    }
    double best = 1e9, best_cpu = 1e9, base_cpu = 1e9;
    struct tb_links lk;
    int runs = getenv("BENCH_LINK_RUNS") ? atoi(getenv("BENCH_LINK_RUNS")) : 3;
    /* BENCH_LINK_BASELINE=1: each run also links without the per-child
     * budget (the walks as before it), interleaved, for the ratio. */
    bool baseline = getenv("BENCH_LINK_BASELINE") && atoi(getenv("BENCH_LINK_BASELINE"));
    for (int k = 0; k < runs; k++) {
        if (baseline) {
            struct tb_links bl;
            tb_link_set_child_budget(0);
            double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            if (tb_link_requests(cat, cl, rq, n, &bl)) {
                fprintf(stderr, "bench_link: out of memory\n");
                return 1;
            }
            double dc = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            base_cpu = dc < base_cpu ? dc : base_cpu;
            tb_links_free(&bl);
            tb_link_set_child_budget(TB_LINK_CHILD_BUDGET);
        }
        double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        if (tb_link_requests(cat, cl, rq, n, &lk)) {
            fprintf(stderr, "bench_link: out of memory\n");
            return 1;
        }
        double dt = now_s(CLOCK_MONOTONIC) - t0, dc = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (dt < best)
            best = dt;
        if (dc < best_cpu)
            best_cpu = dc;
        if (k < runs - 1)
            tb_links_free(&lk);
    }
    printf("bench_link: %zu requests (%" PRIu64 " downstream, %" PRIu64 " linked, %" PRIu64
           " ambiguous) in %.3f s wall, %.3f s CPU: %.2f M requests/s (CPU time %.2f M/s)\n",
           n, lk.children, lk.linked, lk.ambiguous, best, best_cpu, (double)n / best / 1e6,
           (double)n / best_cpu / 1e6);
    if (baseline)
        printf("bench_link: without the per-child budget %.3f s CPU, with it %.3f s: %.2fx\n",
               base_cpu, best_cpu, base_cpu / best_cpu);
    printf("bench_link: chain walks: %" PRIu64 " steps, at most %" PRIu64
           " for one child, %" PRIu64 " child scans cut by the per-child budget\n",
           lk.walk_steps, lk.walk_max, lk.walk_cut);
    tb_links_free(&lk);
    tb_callers_free(cl);
    free(rq);
    tb_catalog_free(cat);
    tb_store_close(st);
    if (argc <= 1) {
        snprintf(cmd, sizeof cmd, "rm -f /tmp/bench_link.%d.*", (int)getpid());
        if (system(cmd) != 0)
            return 1;
    }
    return 0;
}
