/* SPDX-License-Identifier: MIT */
/* bench_diagnose.c — the per-request part of `tbneck diagnose` over 10 million
 * synthetic requests generated on the fly: who called each request (the
 * callers map) and the layered-load sweep (stats/layer.c), streamed in arrival
 * order as the store returns them, against a plain pass over the same
 * requests as baseline. Prints time, requests/s and peak memory before and
 * after (flat: memory follows windows and requests in flight, not requests).
 * The per-window part (the wait-for walk) costs O(windows x servers) and is
 * included in the e2e timings, not here. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "callers.h"
#include "catalog.h"
#include "diagnose.h"
#include "stats.h"
#include "store.h"

#define NREQ_DEFAULT 10000000ull
#define APPS 2

struct pend {
    struct tb_request r;
};

/* Pages of a 1/2/1 stack: a front request, one call to an app server inside
 * it, three sequential queries inside that; pages arrive as a Poisson stream
 * whose rate swings, requests come out in arrival order through a heap. */
struct gen {
    uint64_t rng;
    int64_t t;
    uint64_t left, page;
    struct pend *heap;
    size_t n, cap;
    struct tb_addr front, app[APPS], db, user;
    uint32_t sfront, sapp[APPS], sdb;
    uint32_t cfront, capp, cdb; /* class ids, registered in the catalog */
};

static double unif(struct gen *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return ((double)(g->rng >> 11) + 0.5) / 9007199254740992.0;
}

static int64_t expo(struct gen *g, double mean_ns)
{
    return (int64_t)(-log(unif(g)) * mean_ns) + 1;
}

static void push(struct gen *g, const struct tb_request *r)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 4096;
        g->heap = realloc(g->heap, g->cap * sizeof *g->heap);
        if (!g->heap)
            abort();
    }
    size_t i = g->n++;
    g->heap[i].r = *r;
    while (i && g->heap[(i - 1) / 2].r.arrival_ns > g->heap[i].r.arrival_ns) {
        struct pend x = g->heap[i];
        g->heap[i] = g->heap[(i - 1) / 2];
        g->heap[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static void pop(struct gen *g, struct tb_request *r)
{
    *r = g->heap[0].r;
    g->heap[0] = g->heap[--g->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < g->n && g->heap[l].r.arrival_ns < g->heap[m].r.arrival_ns)
            m = l;
        if (l + 1 < g->n && g->heap[l + 1].r.arrival_ns < g->heap[m].r.arrival_ns)
            m = l + 1;
        if (m == i)
            break;
        struct pend x = g->heap[i];
        g->heap[i] = g->heap[m];
        g->heap[m] = x;
        i = m;
    }
}

static void page(struct gen *g)
{
    double phase = (double)(g->t % (20 * TB_NS_PER_SEC)) / (20.0 * TB_NS_PER_SEC);
    double rate = 8000.0 * (1.0 + 0.6 * sin(2 * M_PI * phase)); /* pages/s */
    g->t += expo(g, 1e9 / rate);
    struct tb_request f = {.arrival_ns = g->t, .tier = 1, .server = g->sfront, .class_id = g->cfront,
                           .client = g->user};
    int a = (int)(g->page++ % APPS);
    int64_t u = g->t + expo(g, 50e3);
    struct tb_request app = {.arrival_ns = u, .tier = 2, .server = g->sapp[a], .class_id = g->capp,
                             .client = g->front};
    u += expo(g, 200e3);
    for (int q = 0; q < 3; q++) {
        struct tb_request db = {.arrival_ns = u, .tier = 3, .server = g->sdb, .class_id = g->cdb,
                                .client = g->app[a]};
        u += expo(g, 300e3);
        db.departure_ns = u;
        push(g, &db);
        u += expo(g, 100e3);
    }
    app.departure_ns = u + expo(g, 100e3);
    f.departure_ns = app.departure_ns + expo(g, 30e3);
    push(g, &app);
    push(g, &f);
}

/* The next request in arrival order: every request of a later page arrives
 * after that page starts, so what is below the next page's start is final. */
static bool next(struct gen *g, struct tb_request *r)
{
    if (!g->left)
        return false;
    while (g->n == 0 || g->heap[0].r.arrival_ns >= g->t)
        page(g);
    pop(g, r);
    g->left--;
    return true;
}

static void gen_init(struct gen *g, uint64_t n, const uint32_t *srv, const uint32_t *cls)
{
    memset(g, 0, sizeof *g);
    g->rng = 0x2545F4914F6CDD1Dull;
    g->t = INT64_C(1700000000) * TB_NS_PER_SEC;
    g->left = n;
    tb_addr_parse("10.0.2.1:80", &g->front);
    tb_addr_parse("10.0.3.1:8080", &g->app[0]);
    tb_addr_parse("10.0.3.2:8080", &g->app[1]);
    tb_addr_parse("10.0.4.1:3306", &g->db);
    tb_addr_parse("10.0.1.7:40000", &g->user);
    g->sfront = srv[0];
    g->sapp[0] = srv[1];
    g->sapp[1] = srv[2];
    g->sdb = srv[3];
    g->cfront = cls[0];
    g->capp = cls[1];
    g->cdb = cls[2];
}

/* CPU time of this process: the machine the benchmarks run on is shared, and
 * wall time there measures the neighbours. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* --db PATH: the same requests into a new store (catalog, requests, one
 * capture) for timing the whole command (bench/diagnose_rss.sh). */
static int write_db(const char *path, struct tb_catalog *cat, uint64_t n, const uint32_t *srv,
                    const uint32_t *cls)
{
    struct tb_store *st;
    struct tb_writer *w;
    char err[256];
    int64_t cap;
    if (tb_store_open(&st, path, TB_STORE_CREATE, err, sizeof err)) {
        fprintf(stderr, "bench_diagnose: cannot create %s: %s\n", path, err);
        return 1;
    }
    int rc = tb_store_capture_begin(st, "bench_diagnose", &cap);
    if (!rc)
        rc = tb_writer_start(&w, st, cap);
    if (rc) {
        tb_store_close(st);
        return 1;
    }
    rc = tb_writer_catalog(w, cat);
    struct gen g;
    struct tb_request r;
    gen_init(&g, n, srv, cls);
    uint64_t k = 0;
    while (!rc && next(&g, &r)) {
        /* 128 connections per tier, taken in turn (their overlap does not
         * matter to the layers). */
        r.conn = (uint64_t)r.tier * 1000 + k++ % 128;
        r.status = 200;
        rc = tb_writer_request(w, &r);
    }
    free(g.heap);
    if (!rc)
        rc = tb_writer_flush(w);
    int rc2 = tb_writer_finish(w);
    if (!rc)
        rc = rc2;
    if (!rc)
        rc = tb_store_capture_end(st, cap, NULL);
    tb_store_close(st);
    if (rc)
        fprintf(stderr, "bench_diagnose: writing %s: %s\n", path, tb_strerror(rc));
    else
        printf("bench_diagnose: %" PRIu64 " requests written to %s\n", n, path);
    return rc ? 1 : 0;
}

static int count_cb(void *ctx, const struct tb_request *r)
{
    uint64_t *sum = ctx;
    *sum += (uint64_t)r->departure_ns;
    return 0;
}

/* --read PATH: the baseline of bench/diagnose_rss.sh, one streamed read of
 * every stored request (tb_store_each_request, the cursor diagnose reads
 * through), CPU seconds on stdout. */
static int read_db(const char *path)
{
    struct tb_store *st;
    char err[256];
    if (tb_store_open(&st, path, 0, err, sizeof err)) {
        fprintf(stderr, "bench_diagnose: cannot open %s: %s\n", path, err);
        return 1;
    }
    uint64_t sum = 0;
    double t0 = now_s();
    int rc = tb_store_each_request(st, 0, INT64_MIN, INT64_MAX, count_cb, &sum);
    double t = now_s() - t0;
    tb_store_close(st);
    if (rc) {
        fprintf(stderr, "bench_diagnose: reading %s: %s\n", path, tb_strerror(rc));
        return 1;
    }
    printf("%.3f %" PRIu64 "\n", t, sum % 1000);
    return 0;
}

/* --store-inputs PATH: what `tbneck capture` does when it ends (issue 11):
 * diagnose's inputs computed from the stored requests and stored
 * (tb_diagnose_store_inputs); CPU seconds on stdout — the capture's extra
 * cost, for bench/diagnose_rss.sh. */
static int store_inputs(const char *path)
{
    struct tb_store *st;
    char err[512];
    if (tb_store_open(&st, path, 0, err, sizeof err)) {
        fprintf(stderr, "bench_diagnose: cannot open %s: %s\n", path, err);
        return 1;
    }
    double t0 = now_s();
    int rc = tb_diagnose_store_inputs(st, NULL, err, sizeof err);
    double t = now_s() - t0;
    tb_store_close(st);
    if (rc) {
        fprintf(stderr, "bench_diagnose: storing diagnose's inputs in %s: %s\n", path, err);
        return 1;
    }
    printf("%.3f\n", t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--read"))
        return read_db(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--store-inputs"))
        return store_inputs(argv[2]);
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : NREQ_DEFAULT;
    const char *db = argc > 3 && !strcmp(argv[2], "--db") ? argv[3] : NULL;
    struct tb_catalog *cat;
    uint32_t t[4], srv[4];
    if (tb_catalog_new(&cat) || tb_catalog_tier(cat, "http", "http", &t[1]) ||
        tb_catalog_tier(cat, "http-8080", "http", &t[2]) ||
        tb_catalog_tier(cat, "mysql", "mysql", &t[3]))
        return 1;
    const char *addr[4] = {"10.0.2.1:80", "10.0.3.1:8080", "10.0.3.2:8080", "10.0.4.1:3306"};
    const uint32_t tier_of[4] = {t[1], t[2], t[2], t[3]};
    for (int i = 0; i < 4; i++) {
        struct tb_addr a;
        tb_addr_parse(addr[i], &a);
        if (tb_catalog_server(cat, tier_of[i], &a, &srv[i]) || tb_catalog_host(cat, tier_of[i], &a))
            return 1;
    }
    /* Classes in the catalog, so that every output can name them. */
    static const char *const ctext[3] = {"GET /page", "GET /app", "select ?"};
    uint32_t cls[3];
    for (int i = 0; i < 3; i++)
        if (tb_catalog_class(cat, t[i + 1], ctext[i], strlen(ctext[i]), &cls[i]))
            return 1;
    if (db) {
        int rc = write_db(db, cat, n, srv, cls);
        tb_catalog_free(cat);
        return rc;
    }
    struct tb_callers *cl;
    if (tb_callers_new(&cl, cat))
        return 1;

    /* Baseline: generate and touch every request. */
    struct gen g;
    struct tb_request r;
    gen_init(&g, n, srv, cls);
    double t0 = now_s();
    int64_t first = INT64_MAX, last = INT64_MIN;
    uint64_t sum = 0;
    while (next(&g, &r)) {
        sum += (uint64_t)r.departure_ns;
        first = TB_MIN(first, r.arrival_ns);
        last = TB_MAX(last, r.departure_ns);
    }
    double base = now_s() - t0;
    long rss0 = peak_kib();
    free(g.heap);

    /* The diagnose pass: callers + layered load, 50 ms windows. */
    struct tb_layer *L;
    if (tb_layer_new(&L, 50 * TB_NS_PER_MS, first, last + 1, 5, 4))
        return 1;
    gen_init(&g, n, srv, cls);
    t0 = now_s();
    uint64_t calls = 0;
    while (next(&g, &r)) {
        uint32_t ct, cs;
        tb_callers_of(cl, &r.client, r.tier, &ct, &cs);
        calls += cs != 0;
        if (tb_layer_add(L, &r, r.server, cs, r.tier, 1.0))
            return 1;
    }
    if (tb_layer_finish(L))
        return 1;
    double pass = now_s() - t0;
    long rss1 = peak_kib();
    /* A figure from the result, so that nothing is optimised away. */
    const struct tb_layer_win *fw = tb_layer_row(L, srv[0]);
    double wait = 0;
    for (size_t k = 0; k < tb_layer_nwindows(L); k++)
        wait += (double)fw[k].wait_ns;
    printf("bench_diagnose: %" PRIu64 " requests (%" PRIu64 " calls), %zu windows of 50 ms, "
           "%zu in flight at most\n",
           n, calls, tb_layer_nwindows(L), tb_layer_max_inflight(L));
    printf("  baseline (generate only): %.2f s CPU\n", base);
    printf("  callers + layered load:   %.2f s CPU (%.2f s above the baseline, %.1f M requests/s)\n",
           pass, pass - base, (double)n / (pass - base > 0 ? pass - base : pass) / 1e6);
    printf("  peak RSS: %ld KiB after the baseline, %ld KiB after the pass (front waited "
           "%.0f request-s; checksum %" PRIu64 ")\n",
           rss0, rss1, wait / 1e9, sum % 1000);
    tb_layer_free(L);
    free(g.heap);
    tb_callers_free(cl);
    tb_catalog_free(cat);
    return pass - base < 5.0 ? 0 : 1;
}
