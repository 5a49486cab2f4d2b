/* SPDX-License-Identifier: MIT */
/* test_fanout.c — the merge stage of the fan-out capture (capture/fanout.h):
 * catalog copies keep every id; events of several workers are released in
 * key order and only behind every idle worker's watermark; catalog entries a
 * worker added are translated by text, so two workers that met the same class
 * at different local ids give one id; connections are numbered in the order
 * they opened, across workers, and a connection keeps its number. The
 * expected values are worked out by hand in each test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fanout.h"

/* What the merge released, in order. */
struct seen {
    char what[16][8];    /* "req" / "conn" */
    uint64_t conn[16];
    uint32_t tier[16], server[16], klass[16];
    int64_t t[16];       /* the request's arrival, the connection's open time */
    size_t n;
};

static void on_req(void *ud, const struct tb_request *r)
{
    struct seen *s = ud;
    assert_true(s->n < 16);
    strcpy(s->what[s->n], "req");
    s->conn[s->n] = r->conn;
    s->tier[s->n] = r->tier;
    s->server[s->n] = r->server;
    s->klass[s->n] = r->class_id;
    s->t[s->n++] = r->arrival_ns;
}

static void on_conn(void *ud, const struct tb_conn *c)
{
    struct seen *s = ud;
    assert_true(s->n < 16);
    strcpy(s->what[s->n], "conn");
    s->conn[s->n] = c->conn;
    s->tier[s->n] = c->tier;
    s->server[s->n] = c->server_id;
    s->klass[s->n] = 0;
    s->t[s->n++] = c->open_ns;
}

static struct tb_addr addr(const char *s)
{
    struct tb_addr a;
    assert_int_equal(tb_addr_parse(s, &a), 0);
    return a;
}

/* The capture's catalog before the workers start: one configured tier with
 * a server, a host and a class. */
static struct tb_catalog *base_catalog(void)
{
    struct tb_catalog *c;
    uint32_t t, id;
    assert_int_equal(tb_catalog_new(&c), 0);
    assert_int_equal(tb_catalog_tier(c, "db", "mysql", &t), 0);
    assert_int_equal(tb_catalog_tier_set_configured(c, t, true), 0);
    struct tb_addr s = addr("10.0.0.3:3306"), h = addr("10.0.0.3:0");
    assert_int_equal(tb_catalog_server(c, t, &s, &id), 0);
    assert_int_equal(tb_catalog_host(c, t, &h), 0);
    assert_int_equal(tb_catalog_class(c, t, "select ?", 8, &id), 0);
    return c;
}

static void test_catalog_copy(void **state)
{
    (void)state;
    struct tb_catalog *src = base_catalog(), *dst;
    uint32_t t2, id;
    struct tb_addr s2 = addr("10.0.0.1:80");
    assert_int_equal(tb_catalog_tier(src, "http", "http", &t2), 0);
    assert_int_equal(tb_catalog_server(src, t2, &s2, &id), 0);
    assert_int_equal(tb_catalog_class(src, t2, "GET /a", 6, &id), 0);
    assert_int_equal(tb_catalog_new(&dst), 0);
    assert_int_equal(tb_fo_catalog_copy(dst, src), 0);
    assert_int_equal(tb_catalog_tier_count(dst), 2);
    assert_int_equal(tb_catalog_server_count(dst), 2);
    assert_int_equal(tb_catalog_class_count(dst), 2);
    assert_int_equal(tb_catalog_host_count(dst), 1);
    assert_string_equal(tb_catalog_tier_get(dst, 1)->name, "db");
    assert_true(tb_catalog_tier_get(dst, 1)->configured);
    assert_false(tb_catalog_tier_get(dst, 2)->configured);
    assert_string_equal(tb_catalog_class_get(dst, 2)->text, "GET /a");
    assert_int_equal(tb_catalog_class_get(dst, 2)->tier, 2);
    assert_int_equal(tb_catalog_server_get(dst, 2)->addr.port, 80);
    tb_catalog_free(src);
    tb_catalog_free(dst);
}

/* A worker's catalog, a copy of the capture's. */
static struct tb_catalog *worker_catalog(const struct tb_catalog *cat)
{
    struct tb_catalog *w;
    assert_int_equal(tb_catalog_new(&w), 0);
    assert_int_equal(tb_fo_catalog_copy(w, cat), 0);
    return w;
}

static struct tb_request req(uint64_t conn, uint32_t tier, uint32_t server, uint32_t klass,
                             int64_t at)
{
    struct tb_request r;
    memset(&r, 0, sizeof r);
    r.conn = conn;
    r.tier = tier;
    r.server = server;
    r.class_id = klass;
    r.arrival_ns = at;
    r.departure_ns = at + 5;
    return r;
}

static struct tb_conn conn(uint64_t id, uint32_t tier, uint32_t server, int64_t open_ns,
                           uint8_t closed)
{
    struct tb_conn c;
    memset(&c, 0, sizeof c);
    c.conn = id;
    c.tier = tier;
    c.server_id = server;
    c.open_ns = open_ns;
    c.closed = closed;
    return c;
}

static int add_req(struct tb_fo_prod *p, int64_t key, uint64_t c, uint32_t tier, uint32_t server,
                   uint32_t klass, int64_t at)
{
    struct tb_request r = req(c, tier, server, klass, at);
    return tb_fo_prod_request(p, key, &r);
}

static int add_conn(struct tb_fo_prod *p, int64_t key, uint64_t id, uint32_t tier,
                    uint32_t server, int64_t open_ns, uint8_t closed)
{
    struct tb_conn c = conn(id, tier, server, open_ns, closed);
    return tb_fo_prod_conn(p, key, &c);
}

static void test_merge(void **state)
{
    (void)state;
    struct tb_catalog *cat = base_catalog();
    struct tb_catalog *w0 = worker_catalog(cat), *w1 = worker_catalog(cat);
    struct tb_fo_prod p0, p1;
    tb_fo_prod_init(&p0, w0);
    tb_fo_prod_init(&p1, w1);
    struct seen s = {0};
    struct tb_fo_merge *m;
    assert_int_equal(tb_fo_merge_new(&m, 2, cat, 7, on_req, on_conn, &s), 0);

    /* Worker 0: a connection to a new HTTP server opens at 90, its request
     * "GET /a" (local tier 2, server 2, class 2) is emitted at 100. */
    uint32_t t, srv, a0, b1, a1, sel;
    struct tb_addr web = addr("10.0.0.1:80");
    assert_int_equal(tb_catalog_tier(w0, "http", "http", &t), 0);
    assert_int_equal(tb_catalog_server(w0, t, &web, &srv), 0);
    assert_int_equal(add_conn(&p0, 90, 1, t, srv, 90, TB_CONN_OPEN), 0);
    assert_int_equal(tb_catalog_class(w0, t, "GET /a", 6, &a0), 0);
    assert_int_equal(add_req(&p0, 100, 1, t, srv, a0, 99), 0);
    tb_fo_merge_add(m, 0, tb_fo_prod_take(&p0));
    tb_fo_merge_watermark(m, 0, 100);
    uint64_t n = 99;
    /* Worker 1 has said nothing: nothing may go. */
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 0);
    /* Worker 1 is past 85 only: still before 90. */
    tb_fo_merge_watermark(m, 1, 85);
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 0);

    /* Worker 1: a connection to the same server opened at 80; it meets
     * "GET /b" first, so its "GET /a" has another local id; and a database
     * request on the preloaded class (id 1, needs no handing over). */
    assert_int_equal(tb_catalog_tier(w1, "http", "http", &t), 0);
    assert_int_equal(tb_catalog_server(w1, t, &web, &srv), 0);
    assert_int_equal(add_conn(&p1, 80, 1, t, srv, 80, TB_CONN_OPEN), 0);
    assert_int_equal(tb_catalog_class(w1, t, "GET /b", 6, &b1), 0);
    assert_int_equal(tb_catalog_class(w1, t, "GET /a", 6, &a1), 0);
    assert_int_not_equal(a0, a1);
    assert_int_equal(add_req(&p1, 95, 1, t, srv, a1, 94), 0);
    assert_int_equal(add_conn(&p1, 96, 2, 1, 1, 96, TB_CONN_OPEN), 0);
    sel = 1;
    assert_int_equal(add_req(&p1, 97, 2, 1, 1, sel, 96), 0);
    tb_fo_merge_add(m, 1, tb_fo_prod_take(&p1));
    tb_fo_merge_watermark(m, 1, 97);
    /* Released: w1's connection (80), w0's (90), w1's request (95), its
     * second connection (96) and its database request (97): w0 has an
     * event queued at 100, so nothing of w0's can come before it. w0's
     * request at 100 waits for worker 1 to pass 100. */
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 11); /* 5 records and 6 catalog entries (tier, server, class x2 ...) */
    assert_int_equal(s.n, 5);
    assert_string_equal(s.what[0], "conn");
    assert_int_equal(s.t[0], 80);
    assert_int_equal(s.conn[0], 7);
    assert_string_equal(s.what[1], "conn");
    assert_int_equal(s.t[1], 90);
    assert_int_equal(s.conn[1], 8);
    assert_string_equal(s.what[2], "req");
    assert_int_equal(s.conn[2], 7);
    assert_string_equal(s.what[3], "conn");
    assert_int_equal(s.conn[3], 9);
    assert_string_equal(s.what[4], "req");
    assert_int_equal(s.conn[4], 9);
    assert_int_equal(s.tier[4], 1);
    assert_int_equal(s.server[4], 1);
    assert_int_equal(s.klass[4], 1);
    /* One http tier and one server for both workers. */
    assert_int_equal(tb_catalog_tier_count(cat), 2);
    assert_int_equal(tb_catalog_server_count(cat), 2);
    assert_int_equal(s.tier[0], 2);
    assert_int_equal(s.tier[1], 2);
    assert_int_equal(s.server[0], 2);
    assert_int_equal(s.server[1], 2);
    assert_int_equal(tb_fo_merge_released_key(m), 97);
    /* w0's request once worker 1 is past it. */
    tb_fo_merge_watermark(m, 1, 99);
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 0);
    tb_fo_merge_watermark(m, 1, INT64_MAX);
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(s.n, 6);
    assert_string_equal(s.what[5], "req");
    assert_int_equal(s.t[5], 99);
    assert_int_equal(s.conn[5], 8);
    /* "GET /a" is one class whichever worker saw it: w1's local id was 4
     * (after "GET /b" = 3), w0's 3; the capture's follow the release order
     * ("GET /b" 2, "GET /a" 3). */
    assert_int_equal(s.klass[2], 3);
    assert_int_equal(s.klass[5], 3);
    assert_string_equal(tb_catalog_class_get(cat, 3)->text, "GET /a");
    assert_int_equal(tb_catalog_class_count(cat), 3);
    assert_int_equal(tb_fo_merge_tier(m, 0, 2), 2);
    assert_int_equal(tb_fo_merge_tier(m, 1, 1), 1);

    /* A connection keeps its number when it closes later. */
    assert_int_equal(add_conn(&p0, 200, 1, 2, 2, 90, TB_CONN_FIN), 0);
    tb_fo_merge_add(m, 0, tb_fo_prod_take(&p0));
    tb_fo_merge_watermark(m, 0, INT64_MAX);
    assert_int_equal(tb_fo_merge_run(m, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(s.n, 7);
    assert_int_equal(s.conn[6], 8);
    assert_null(tb_fo_prod_take(&p0));

    tb_fo_merge_free(m);
    tb_fo_prod_fini(&p0);
    tb_fo_prod_fini(&p1);
    tb_catalog_free(w0);
    tb_catalog_free(w1);
    tb_catalog_free(cat);
}

/* Equal keys go to the lower worker first; a worker's own events keep their
 * order. */
static void test_merge_ties(void **state)
{
    (void)state;
    struct tb_catalog *cat = base_catalog();
    struct tb_catalog *w0 = worker_catalog(cat), *w1 = worker_catalog(cat);
    struct tb_fo_prod p0, p1;
    tb_fo_prod_init(&p0, w0);
    tb_fo_prod_init(&p1, w1);
    struct seen s = {0};
    struct tb_fo_merge *m;
    assert_int_equal(tb_fo_merge_new(&m, 2, cat, 1, on_req, on_conn, &s), 0);
    assert_int_equal(add_conn(&p1, 50, 1, 1, 1, 50, TB_CONN_OPEN), 0);
    assert_int_equal(add_req(&p1, 50, 1, 1, 1, 1, 1), 0);
    assert_int_equal(add_conn(&p0, 50, 1, 1, 1, 50, TB_CONN_OPEN), 0);
    assert_int_equal(add_req(&p0, 60, 1, 1, 1, 1, 2), 0);
    tb_fo_merge_add(m, 1, tb_fo_prod_take(&p1));
    tb_fo_merge_add(m, 0, tb_fo_prod_take(&p0));
    tb_fo_merge_watermark(m, 0, INT64_MAX);
    tb_fo_merge_watermark(m, 1, INT64_MAX);
    assert_int_equal(tb_fo_merge_run(m, NULL), 0);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.conn[0], 1); /* worker 0's connection, the lower worker */
    assert_string_equal(s.what[1], "conn");
    assert_int_equal(s.conn[1], 2); /* worker 1's */
    assert_int_equal(s.t[2], 1);    /* worker 1's request at 50 before worker 0's at 60 */
    assert_int_equal(s.conn[2], 2);
    assert_int_equal(s.conn[3], 1);
    tb_fo_merge_free(m);
    tb_fo_prod_fini(&p0);
    tb_fo_prod_fini(&p1);
    tb_catalog_free(w0);
    tb_catalog_free(w1);
    tb_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_copy),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
