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
#include <stdio.h>
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

/* The stack of the timelines below: an application tier (http-8080, one
 * server 10.0.3.1:8080, class "GET /x") calling a database tier (mysql, one
 * server 10.0.4.1:3306), and the callers' map of it. */
struct stack {
    struct tb_catalog *cat;
    struct tb_callers *cl;
    uint32_t app, db, sapp, sdb;
};

static void app_db(struct stack *k)
{
    uint32_t cls;
    assert_int_equal(tb_catalog_new(&k->cat), 0);
    assert_int_equal(tb_catalog_tier(k->cat, "http-8080", "http", &k->app), 0);
    assert_int_equal(tb_catalog_tier(k->cat, "mysql", "mysql", &k->db), 0);
    struct tb_addr a = addr("10.0.3.1:8080"), d = addr("10.0.4.1:3306");
    assert_int_equal(tb_catalog_server(k->cat, k->app, &a, &k->sapp), 0);
    assert_int_equal(tb_catalog_server(k->cat, k->db, &d, &k->sdb), 0);
    assert_int_equal(tb_catalog_class(k->cat, k->app, "GET /x", 6, &cls), 0);
    assert_int_equal(tb_callers_new(&k->cl, k->cat), 0);
}

static void stack_free(struct stack *k)
{
    tb_callers_free(k->cl);
    tb_catalog_free(k->cat);
}

static void test_two_parents(void **state)
{
    (void)state;
    struct stack stk;
    app_db(&stk);
    const uint32_t app = stk.app, db = stk.db, sapp = stk.sapp, sdb = stk.sdb;
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
    struct tb_links lk;
    assert_int_equal(tb_link_requests(stk.cat, stk.cl, rq, n, &lk), 0);
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
    assert_int_equal(lk.walk_cut, 0);
    tb_links_free(&lk);

    /* The export order: tier name ("http-8080" < "mysql"), arrival, conn. */
    struct tb_request o[] = {rq[5], rq[2], rq[1], rq[0]};
    o[1].arrival_ns = o[0].arrival_ns; /* a tie on arrival: conn 10 before conn 10? equal: stable */
    assert_int_equal(tb_link_export_order(stk.cat, o, 4), 0);
    assert_int_equal(o[0].tier, app);
    assert_int_equal(o[0].conn, 1);
    assert_int_equal(o[1].conn, 2);
    assert_int_equal(o[2].departure_ns, T0 + 1000 * US); /* stable: rq[5] stays first */
    assert_int_equal(o[3].departure_ns, T0 + 600 * US);
    stack_free(&stk);
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
    struct stack stk;
    app_db(&stk);
    const uint32_t app = stk.app, db = stk.db, sapp = stk.sapp, sdb = stk.sdb;
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
    struct tb_links lk;
    assert_int_equal(tb_link_requests(stk.cat, stk.cl, rq, n, &lk), 0);
    assert_int_equal(lk.parent[1], 1);
    assert_int_equal(lk.parent[3], 3);
    assert_int_equal(lk.parent[5], 5);
    struct tb_trees t;
    assert_int_equal(tb_trees_build(stk.cat, rq, n, &lk, app, &t), 0);
    assert_int_equal(t.nsolo[sapp], 3);
    assert_true(fabs(t.svc_solo[sapp] - (500.0 + 600.0 + 300.0) / 3 * US) < 1e-6);
    assert_int_equal(t.nsolo[sdb], 3);
    assert_true(fabs(t.svc_solo[sdb] - (500.0 + 400.0 + 500.0) / 3 * US) < 1e-6);
    tb_trees_free(&t);
    tb_links_free(&lk);
    stack_free(&stk);
}

/* The call graph from counts per (tier, client) (tb_callgraph_add_n, what
 * whatif's early refusals build) equals the one built request by request:
 * users -> web (3), web -> app (2), app -> db (4), and a db request from a
 * machine no tier has (users again). Front: web (no request by a tier). */
static void test_callgraph_counts(void **state)
{
    (void)state;
    struct tb_catalog *cat;
    uint32_t web, app, db, sw, sa, sd;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "web", "http", &web), 0);
    assert_int_equal(tb_catalog_tier(cat, "app", "http", &app), 0);
    assert_int_equal(tb_catalog_tier(cat, "db", "mysql", &db), 0);
    struct tb_addr w = addr("10.0.0.2:80"), a = addr("10.0.0.3:8080"), d = addr("10.0.0.4:3306");
    assert_int_equal(tb_catalog_server(cat, web, &w, &sw), 0);
    assert_int_equal(tb_catalog_server(cat, app, &a, &sa), 0);
    assert_int_equal(tb_catalog_server(cat, db, &d, &sd), 0);
    struct tb_request rq[10];
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        rq[n++] = req(web, sw, "192.168.0.9:4000", 1, i, i + 1);
    for (int i = 0; i < 2; i++)
        rq[n++] = req(app, sa, "10.0.0.2:5000", 2, i, i + 1);
    for (int i = 0; i < 4; i++)
        rq[n++] = req(db, sd, "10.0.0.3:6000", 3, i, i + 1);
    rq[n++] = req(db, sd, "192.168.0.7:7000", 4, 0, 1);
    struct tb_callers *cl;
    assert_int_equal(tb_callers_new(&cl, cat), 0);
    struct tb_callgraph g1, g2;
    assert_int_equal(tb_callgraph_build(&g1, cl, 3, rq, n, NULL, 0), 0);
    assert_int_equal(tb_callgraph_init(&g2, 3), 0);
    tb_callgraph_add_n(&g2, cl, web, &rq[0].client, 3);
    tb_callgraph_add_n(&g2, cl, app, &rq[3].client, 2);
    tb_callgraph_add_n(&g2, cl, db, &rq[5].client, 4);
    tb_callgraph_add_n(&g2, cl, db, &rq[9].client, 1);
    tb_callgraph_add_n(&g2, cl, 0, &rq[9].client, 5);  /* tier 0: skipped */
    tb_callgraph_add_n(&g2, cl, 4, &rq[9].client, 5);  /* beyond ntiers: skipped */
    tb_callgraph_finish(&g2, cl, NULL, 0);
    assert_memory_equal(g1.calls, g2.calls, 16 * sizeof *g1.calls);
    assert_memory_equal(g1.requests, g2.requests, 4 * sizeof *g1.requests);
    assert_int_equal(g2.front, web);
    assert_int_equal(g1.front, web);
    assert_int_equal(g2.calls[web * 4 + app], 2);
    assert_int_equal(g2.calls[app * 4 + db], 4);
    assert_int_equal(g2.calls[0 * 4 + db], 1);
    assert_true(tb_callgraph_calls(&g2, web, app));
    assert_false(tb_callgraph_calls(&g2, db, app));
    tb_callgraph_free(&g1);
    tb_callgraph_free(&g2);
    tb_callers_free(cl);
    tb_catalog_free(cat);
}

/* The chain walks' cost per child is bounded (twice TB_LINK_CHILD_BUDGET steps
 * past each walk's first, counted by tb_links.walk_max), not per candidate: 1200
 * application requests in progress at once on one host, none out on a call
 * (so every one is a free candidate of every query, its piece unknown), and
 * a query every 25 us, 10 us long, for 15 ms. On the processor-sharing clock
 * the queries crowd within the tolerance of one another, so each
 * candidate's walk goes on from call to call: before the per-child budget a
 * query cost up to 1200 walks of 256 steps (the shape of db8 at 40 s, where
 * the linker took minutes). Every query still has a parent (all contain
 * it), and the budget binds here (walk_cut > 0). */
static void test_child_budget(void **state)
{
    (void)state;
    struct stack stk;
    app_db(&stk);
    const uint32_t app = stk.app, db = stk.db, sapp = stk.sapp, sdb = stk.sdb;
    enum { NP = 1200, NK = 600 };
    struct tb_request *rq = calloc(NP + NK, sizeof *rq);
    assert_non_null(rq);
    size_t n = 0;
    char cli[64];
    for (int i = 0; i < NP; i++) {
        snprintf(cli, sizeof cli, "10.0.2.1:%d", 1024 + i);
        rq[n++] = req(app, sapp, cli, (uint64_t)i + 1, i, 20000);
    }
    for (int k = 0; k < NK; k++) {
        snprintf(cli, sizeof cli, "10.0.3.1:%d", 20000 + k % 64);
        rq[n++] = req(db, sdb, cli, 100000 + (uint64_t)(k % 64), 2000 + 25 * k, 2010 + 25 * k);
    }
    struct tb_links lk;
    assert_int_equal(tb_link_requests(stk.cat, stk.cl, rq, n, &lk), 0);
    assert_int_equal(lk.children, NK);
    assert_int_equal(lk.linked, NK);
    for (size_t i = NP; i < n; i++)
        assert_true(lk.parent[i] >= 1 && lk.parent[i] <= NP);
    assert_true(lk.walk_max <= 2 * TB_LINK_CHILD_BUDGET);
    assert_true(lk.walk_cut > 0);
    assert_true(lk.walk_steps > 0);
    tb_links_free(&lk);
    stack_free(&stk);
    free(rq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_parents),
                                       cmocka_unit_test(test_solo),
                                       cmocka_unit_test(test_callgraph_counts),
                                       cmocka_unit_test(test_child_budget)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
