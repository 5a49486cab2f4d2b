/* SPDX-License-Identifier: MIT */
/* test_diagblip.c — diagnose's verdict on a healthy, lightly loaded
 * web → app → db stack whose front tier has no congestion point, so that its
 * slow windows stand for its congestion (docs/diagnose.md). Two short stalls
 * of the app server (120 and 110 ms, as a machine busy with other work
 * gives: the real stack with nothing wrong had two such, 4 slow front windows
 * in 20 s, and was told "http-8080 cpu") are a blip: verdict none. The same
 * stalls every second are a bottleneck: the verdict names the app server. The requests are
 * built here from the stalls (the oracle), not from tbneck's windows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "catalog.h"
#include "diagnose.h"
#include "store.h"

#define MS TB_NS_PER_MS
#define T0 (INT64_C(1700000000) * TB_NS_PER_SEC)
#define SECONDS 20
#define RATE 60.0
#define MAXREQ (SECONDS * 200 * 3)

static uint64_t rng;
static double unif(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static int64_t expo(double mean_ns)
{
    return (int64_t)(-log(unif()) * mean_ns) + 1;
}

struct stalls {
    const int64_t *at, *len; /* from T0 */
    size_t n;
};

/* The app server does nothing inside a stall: work due then waits for its end. */
static int64_t defer(const struct stalls *s, int64_t t)
{
    for (size_t i = 0; i < s->n; i++)
        if (t >= T0 + s->at[i] && t < T0 + s->at[i] + s->len[i])
            return T0 + s->at[i] + s->len[i];
    return t;
}

static int cmp_dep(const void *a, const void *b)
{
    const struct tb_request *x = a, *y = b;
    return (x->departure_ns > y->departure_ns) - (x->departure_ns < y->departure_ns);
}

/* Stores the stack's requests in a fresh database under dir and diagnoses them. */
static void run(const struct stalls *s, char *dir, struct tb_diagnosis *d)
{
    char path[96], err[256];
    snprintf(path, sizeof path, "%s/t.db", dir);
    struct tb_store *st;
    struct tb_catalog *cat;
    assert_int_equal(tb_store_open(&st, path, TB_STORE_CREATE, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&cat), 0);
    static const char *const names[3] = {"http", "http-8080", "mysql"};
    static const char *const protos[3] = {"http", "http", "mysql"};
    static const char *const addrs[3] = {"10.0.2.1:80", "10.0.3.1:8080", "10.0.4.1:3306"};
    static const char *const cls[3] = {"GET /a", "GET /x", "select ?"};
    uint32_t tier[3], srv[3], cl[3];
    struct tb_addr a[3], user;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tb_catalog_tier(cat, names[i], protos[i], &tier[i]), 0);
        assert_int_equal(tb_addr_parse(addrs[i], &a[i]), 0);
        assert_int_equal(tb_catalog_server(cat, tier[i], &a[i], &srv[i]), 0);
        assert_int_equal(tb_catalog_class(cat, tier[i], cls[i], strlen(cls[i]), &cl[i]), 0);
    }
    assert_int_equal(tb_addr_parse("10.0.1.7:40000", &user), 0);
    struct tb_request *rq = calloc(MAXREQ, sizeof *rq);
    assert_non_null(rq);
    size_t n = 0;
    rng = 88172645463325252ull;
    /* Pages at RATE/s: web → app → one query of 9 ms (a SLEEP: no CPU, no
     * queue) → app → web. */
    for (int64_t t = T0 + expo(1e9 / RATE); t < T0 + SECONDS * TB_NS_PER_SEC;
         t += expo(1e9 / RATE)) {
        int p = (int)n / 3;
        int64_t u = t + expo(100e3), q = defer(s, u + expo(300e3));
        int64_t qd = q + 9 * MS + expo(300e3), ad = defer(s, qd + expo(200e3));
        rq[n++] = (struct tb_request){.tier = tier[0], .server = srv[0], .client = user,
                                      .class_id = cl[0], .arrival_ns = t,
                                      .departure_ns = ad + expo(50e3),
                                      .conn = 1 + (uint64_t)(p % 8), .status = 200};
        rq[n - 1].client.port = (uint16_t)(40000 + p % 8);
        rq[n++] = (struct tb_request){.tier = tier[1], .server = srv[1], .client = a[0],
                                      .class_id = cl[1], .arrival_ns = u, .departure_ns = ad,
                                      .conn = 20 + (uint64_t)(p % 8), .status = 200};
        rq[n - 1].client.port = (uint16_t)(50000 + p % 8);
        rq[n++] = (struct tb_request){.tier = tier[2], .server = srv[2], .client = a[1],
                                      .class_id = cl[2], .arrival_ns = q, .departure_ns = qd,
                                      .conn = 40 + (uint64_t)(p % 8)};
        rq[n - 1].client.port = (uint16_t)(41000 + p % 8);
        assert_true(n + 3 <= MAXREQ);
    }
    qsort(rq, n, sizeof *rq, cmp_dep);
    int64_t capid;
    struct tb_writer *w;
    assert_int_equal(tb_store_capture_begin(st, "diagblip", &capid), 0);
    assert_int_equal(tb_writer_start(&w, st, capid), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tb_writer_request(w, &rq[i]), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    assert_int_equal(tb_store_capture_end(st, capid, NULL), 0);
    free(rq);
    struct tb_diag_opts o = {.width_ns = 50 * MS, .from_ns = INT64_MIN, .to_ns = INT64_MAX,
                             .recompute = true};
    assert_int_equal(tb_diagnose(st, cat, &o, d, err, sizeof err), 0);
    tb_catalog_free(cat);
    tb_store_close(st);
    static const char *const files[] = {"t.db", "t.db-wal", "t.db-shm"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(files); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
}

static size_t front_windows(const struct tb_diagnosis *d)
{
    size_t k = 0;
    for (size_t i = 0; i < d->nwin; i++)
        k += d->front_congested[i];
    return k;
}

static void two_stalls_are_a_blip(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tb_test_diagblip_XXXXXX");
    assert_non_null(mkdtemp(dir));
    static const int64_t at[] = {4000 * MS, 11000 * MS}, len[] = {120 * MS, 110 * MS};
    struct stalls s = {at, len, 2};
    struct tb_diagnosis d;
    run(&s, dir, &d);
    rmdir(dir);
    printf("two stalls: front by slowness %d, %zu slow windows of %zu: %s %s\n",
           d.front_by_slowness, front_windows(&d), d.nwin, tb_cause_name(d.verdict.cause),
           d.verdict.evidence);
    /* The case under test: no congestion point, a few slow windows. */
    assert_true(d.front_by_slowness);
    assert_in_range(front_windows(&d), 2, 8);
    assert_int_equal(d.verdict.cause, TB_CAUSE_NONE);
    assert_non_null(strstr(d.verdict.evidence, "a blip"));
    assert_null(strstr(d.verdict.evidence, "N*"));
    assert_null(strstr(d.verdict.evidence, "was congested"));
    tb_diagnosis_free(&d);
}

static void recurring_stalls_are_a_bottleneck(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tb_test_diagblip_XXXXXX");
    assert_non_null(mkdtemp(dir));
    int64_t at[SECONDS - 2], len[SECONDS - 2];
    for (int i = 0; i < SECONDS - 2; i++) {
        at[i] = (1000 + 1000 * i) * MS;
        len[i] = (i % 2 ? 110 : 120) * MS;
    }
    struct stalls s = {at, len, SECONDS - 2};
    struct tb_diagnosis d;
    run(&s, dir, &d);
    rmdir(dir);
    printf("recurring stalls: front by slowness %d, %zu slow windows of %zu: %s %s\n",
           d.front_by_slowness, front_windows(&d), d.nwin, tb_cause_name(d.verdict.cause),
           d.verdict.evidence);
    /* Not swallowed by the blip rule: rooted at the app server. (Its cause
     * reads cpu, not freeze: at 3 completions per window a stall is not told
     * from slow work — a weakness noted in docs/diagnose.md.) */
    assert_in_range(front_windows(&d), 20, 80);
    assert_int_not_equal(d.verdict.cause, TB_CAUSE_NONE);
    assert_int_equal(d.verdict.tier, d.servers[1].tier);
    assert_int_equal(d.verdict.server, d.servers[1].server);
    tb_diagnosis_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_stalls_are_a_blip),
        cmocka_unit_test(recurring_stalls_are_a_bottleneck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
