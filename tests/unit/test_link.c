/* SPDX-License-Identifier: MIT */
/* test_link.c — transaction linking (analysis/link.c) on hand-made requests
 * whose parents are known: two application requests overlapping on one host,
 * each making two sequential queries with equal pieces of its own work
 * between them (the worked timeline below); a user's request (no caller);
 * queries no request of its caller contains (no parent: one outside both,
 * one that outlives both); the kinds stored per request; and the export
 * order (tier name, arrival, connection, stable); and the trees' own time of
 * requests that arrived at an empty server (svc_solo, whatif's step 7). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "callers.h"
#include "catalog.h"
#include "critpath.h"
#include "link.h"

#define US 1000
#define T0 (INT64_C(1700000000) * TB_NS_PER_SEC)

static struct tb_addr addr(const char *s)
{
    struct tb_addr a;
    assert_int_equal(tb_addr_parse(s, &a), 0);
    return a;
}

static struct tb_request req(uint32_t tier, uint32_t server, const char *client, uint64_t conn,
                             int64_t a_us, int64_t d_us)
{
    struct tb_request r;
    memset(&r, 0, sizeof r);
    r.tier = tier;
    r.server = server;
    r.client = addr(client);
    r.conn = conn;
    r.class_id = 1;
    r.arrival_ns = T0 + a_us * US;
    r.departure_ns = T0 + d_us * US;
    return r;
}

static void test_two_parents(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t app, db, sapp, sdb, cls;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http-8080", "http", &app), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &db), 0);
    struct tb_addr a = addr("10.0.3.1:8080"), d = addr("10.0.4.1:3306");
    assert_int_equal(tb_catalog_server(cat, app, &a, &sapp), 0);
    assert_int_equal(tb_catalog_server(cat, db, &d, &sdb), 0);
    assert_int_equal(tb_catalog_class(cat, app, "GET /x", 6, &cls), 0);
    /* P1 [0, 1100]: piece 100: query [100, 600], piece, query [700, 1000], piece.
     * P2 [30, 1090]: piece 170: query [200, 350], piece, query [520, 920], piece.
     * At 200 and 520 P1 is in a call (so P2); at 700 both are free: only P1's
     * piece is due (600 + 100), P2's next is its end (920 + 170 = 1090). */
    struct tb_request rq[] = {
        req(app, sapp, "10.0.2.1:40001", 1, 0, 1100),          /* 0: P1 */
        req(app, sapp, "10.0.2.1:40002", 2, 30, 1090),         /* 1: P2 */
        req(db, sdb, "10.0.3.1:50001", 10, 100, 600),          /* 2: P1 */
        req(db, sdb, "10.0.3.1:50002", 11, 200, 350),          /* 3: P2 */
        req(db, sdb, "10.0.3.1:50002", 11, 520, 920),          /* 4: P2 */
        req(db, sdb, "10.0.3.1:50001", 10, 700, 1000),         /* 5: P1 */
        req(db, sdb, "10.0.3.1:50003", 12, 2000, 2100),        /* 6: no parent contains it */
        /* 7: arrives while both are in progress, ends after both: neither
         * issued it (a real stack's pool validation query, say). */
        req(db, sdb, "10.0.3.1:50004", 13, 1050, 1150),
    };
    size_t n = sizeof rq / sizeof rq[0];
    struct tb_callers *cl;
    assert_int_equal(tb_callers_new(&cl, cat), 0);
    struct tb_links lk;
    assert_int_equal(tb_link_requests(cat, cl, rq, n, &lk), 0);
    const uint64_t want[] = {0, 0, 1, 2, 2, 1, 0, 0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(lk.parent[i], want[i]);
        assert_true(lk.score[i] >= 0 && lk.score[i] <= 1);
        /* Users' requests are not downstream; unlinked ones say so. */
        if (i < 2)
            assert_int_equal(lk.kind[i], TB_LINK_NONE);
        else if (!want[i])
            assert_int_equal(lk.kind[i], TB_LINK_UNLINKED);
        else
            assert_true(lk.kind[i] >= TB_LINK_EXACT && lk.kind[i] <= TB_LINK_SCORED);
    }
    assert_int_equal(lk.children, 6);
    assert_int_equal(lk.linked, 4);
    /* 200 and 520: the other parent was busy, one candidate each. */
    assert_true(lk.exact >= 2);
    assert_int_equal(lk.ambiguous, 0);
    tb_links_free(&lk);

    /* The export order: tier name ("http-8080" < "mysql"), arrival, conn. */
    struct tb_request o[] = {rq[5], rq[2], rq[1], rq[0]};
    o[1].arrival_ns = o[0].arrival_ns; /* a tie on arrival: conn 10 before conn 10? equal: stable */
    assert_int_equal(tb_link_export_order(cat, o, 4), 0);
    assert_int_equal(o[0].tier, app);
    assert_int_equal(o[0].conn, 1);
    assert_int_equal(o[1].conn, 2);
    assert_int_equal(o[2].departure_ns, T0 + 1000 * US); /* stable: rq[5] stays first */
    assert_int_equal(o[3].departure_ns, T0 + 600 * US);
    tb_callers_free(cl);
    tb_catalog_free(cat);
}

/* tb_trees' svc_solo / nsolo (whatif's work of a pool-bound caller whose
 * waits the linker never saw): the own time of the requests that arrived
 * at an empty server, worked by hand. App: A [0, 1000] query [100, 600]
 * (own 500); B [2000, 3000] query [2100, 2500] (own 600); C [2200, 4000]
 * arrives while B is in, query [3000, 3500]; D [4000, 4300] arrives as C
 * leaves (empty: counted), no query (own 300); E [4100, 4200] arrives in D.
 * Database: the three queries each arrive with none in. */
static void test_solo(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t app, db, sapp, sdb, cls;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http-8080", "http", &app), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &db), 0);
    struct tb_addr a = addr("10.0.3.1:8080"), d = addr("10.0.4.1:3306");
    assert_int_equal(tb_catalog_server(cat, app, &a, &sapp), 0);
    assert_int_equal(tb_catalog_server(cat, db, &d, &sdb), 0);
    assert_int_equal(tb_catalog_class(cat, app, "GET /x", 6, &cls), 0);
    struct tb_request rq[] = {
        req(app, sapp, "10.0.2.1:40001", 1, 0, 1000),     /* A */
        req(db, sdb, "10.0.3.1:50001", 10, 100, 600),     /* A's */
        req(app, sapp, "10.0.2.1:40001", 1, 2000, 3000),  /* B */
        req(db, sdb, "10.0.3.1:50001", 10, 2100, 2500),   /* B's */
        req(app, sapp, "10.0.2.1:40002", 2, 2200, 4000),  /* C */
        req(db, sdb, "10.0.3.1:50001", 10, 3000, 3500),   /* C's */
        req(app, sapp, "10.0.2.1:40001", 1, 4000, 4300),  /* D */
        req(app, sapp, "10.0.2.1:40002", 2, 4100, 4200),  /* E */
    };
    size_t n = sizeof rq / sizeof rq[0];
    struct tb_callers *cl;
    assert_int_equal(tb_callers_new(&cl, cat), 0);
    struct tb_links lk;
    assert_int_equal(tb_link_requests(cat, cl, rq, n, &lk), 0);
    assert_int_equal(lk.parent[1], 1);
    assert_int_equal(lk.parent[3], 3);
    assert_int_equal(lk.parent[5], 5);
    struct tb_trees t;
    assert_int_equal(tb_trees_build(cat, rq, n, &lk, app, &t), 0);
    assert_int_equal(t.nsolo[sapp], 3);
    assert_true(fabs(t.svc_solo[sapp] - (500.0 + 600.0 + 300.0) / 3 * US) < 1e-6);
    assert_int_equal(t.nsolo[sdb], 3);
    assert_true(fabs(t.svc_solo[sdb] - (500.0 + 400.0 + 500.0) / 3 * US) < 1e-6);
    tb_trees_free(&t);
    tb_links_free(&lk);
    tb_callers_free(cl);
    tb_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_parents),
                                       cmocka_unit_test(test_solo)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
