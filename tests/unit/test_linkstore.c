/* SPDX-License-Identifier: MIT */
/* test_linkstore.c — store/linkstore.c: the one-pass read of requests for
 * linking (order, columns, row ids), the stamp, named blobs in parts, the
 * links table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "catalog.h"
#include "linkstore.h"
#include "store.h"

struct fix {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tb_test_linkstore_XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    char p[160];
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static struct tb_store *open_store(const char *path, unsigned flags)
{
    struct tb_store *st = NULL;
    char err[256] = "";
    int rc = tb_store_open(&st, path, flags, err, sizeof err);
    if (rc)
        fail_msg("open %s: %d %s", path, rc, err);
    return st;
}

static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    int64_t v = -12345;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_type(s, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static struct tb_addr addr(const char *s)
{
    struct tb_addr a;
    assert_int_equal(tb_addr_parse(s, &a), 0);
    return a;
}

/* Five requests written in this order (row ids 1..5): arrivals 300, 100,
 * 200, 100, 2^40 + 7 (a span wide enough for every radix pass). */
static void fill(struct tb_store *st, struct tb_request rq[5])
{
    struct tb_catalog *cat;
    struct tb_writer *w;
    uint32_t web, db, s_web, s_db, c_web, c_db;
    struct tb_addr a;
    int64_t cap;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "web", "http", &web), 0);
    assert_int_equal(tb_catalog_tier(cat, "db", "mysql", &db), 0);
    a = addr("10.0.0.2:80");
    assert_int_equal(tb_catalog_server(cat, web, &a, &s_web), 0);
    a = addr("10.0.0.3:3306");
    assert_int_equal(tb_catalog_server(cat, db, &a, &s_db), 0);
    assert_int_equal(tb_catalog_class(cat, web, "GET /", 5, &c_web), 0);
    assert_int_equal(tb_catalog_class(cat, db, "select ?", 8, &c_db), 0);
    const int64_t arr[5] = {300, 100, 200, 100, (INT64_C(1) << 40) + 7};
    for (int i = 0; i < 5; i++) {
        bool front = i % 2 == 0;
        rq[i] = (struct tb_request){arr[i], arr[i] + 50 + i, (uint64_t)(10 + i), 99, 98,
                                    addr(front ? "192.168.1.9:4000" : "10.0.0.2:5000"),
                                    front ? web : db, front ? s_web : s_db,
                                    front ? c_web : c_db, 200, 1};
    }
    assert_int_equal(tb_store_capture_begin(st, "t", &cap), 0);
    assert_int_equal(tb_writer_start(&w, st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tb_writer_request(w, &rq[i]), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    assert_int_equal(tb_store_capture_end(st, cap, NULL), 0);
    tb_catalog_free(cat);
}

static void test_link_rows(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_store(f->path, TB_STORE_CREATE);
    struct tb_request rq[5], *got;
    int64_t *rowid;
    size_t n;
    fill(st, rq);
    assert_int_equal(tb_store_link_rows(st, &got, &rowid, &n), 0);
    assert_int_equal(n, 5);
    /* Arrival order, ties by row id: rows 2 and 4 (100), 3, 1, 5. */
    const int64_t want[5] = {2, 4, 3, 1, 5};
    for (size_t i = 0; i < 5; i++) {
        const struct tb_request *x = &got[i], *y = &rq[want[i] - 1];
        assert_int_equal(rowid[i], want[i]);
        assert_int_equal(x->arrival_ns, y->arrival_ns);
        assert_int_equal(x->departure_ns, y->departure_ns);
        assert_int_equal(x->conn, y->conn);
        assert_int_equal(x->tier, y->tier);
        assert_int_equal(x->server, y->server);
        assert_int_equal(x->class_id, y->class_id);
        assert_true(tb_addr_eq(&x->client, &y->client));
        assert_int_equal(x->client.port, y->client.port);
        /* The lean columns of every reader (flags among them, shared
         * decoder tb__row_request); the byte counts and status stay 0. */
        assert_int_equal(x->flags, y->flags);
        assert_int_equal(x->req_bytes, 0);
        assert_int_equal(x->status, 0);
    }
    free(got);
    free(rowid);
    tb_store_close(st);
}

static void test_stamp_models(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_store(f->path, TB_STORE_CREATE);
    struct tb_request rq[5];
    char stamp[96], stamp2[96];
    bool stable;
    fill(st, rq);
    assert_int_equal(tb_store_stamp(st, stamp, sizeof stamp, &stable), 0);
    assert_string_equal(stamp, "rows 5 captures 1");
    assert_true(stable);

    /* 17 MiB + 3: two parts, read back whole. */
    size_t len = (17u << 20) + 3;
    uint8_t *blob = malloc(len);
    for (size_t i = 0; i < len; i++)
        blob[i] = (uint8_t)(i * 131 + (i >> 20));
    assert_int_equal(tb_store_model_put(st, "m", 3, stamp, blob, len), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM model_parts WHERE name = 'm'"), 2);
    void *back;
    size_t blen;
    assert_int_equal(tb_store_model_get(st, "m", 3, stamp, &back, &blen), 0);
    assert_int_equal(blen, len);
    assert_memory_equal(back, blob, len);
    free(back);
    /* Another version, stamp or name: not found. */
    assert_int_equal(tb_store_model_get(st, "m", 4, stamp, &back, &blen), TB_E_NOTFOUND);
    assert_int_equal(tb_store_model_get(st, "m", 3, "rows 6 captures 1", &back, &blen),
                     TB_E_NOTFOUND);
    assert_int_equal(tb_store_model_get(st, "x", 3, stamp, &back, &blen), TB_E_NOTFOUND);
    /* Replaced by a smaller one: one part left. */
    assert_int_equal(tb_store_model_put(st, "m", 3, stamp, blob, 10), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM model_parts WHERE name = 'm'"), 1);
    assert_int_equal(tb_store_model_get(st, "m", 3, stamp, &back, &blen), 0);
    assert_int_equal(blen, 10);
    assert_memory_equal(back, blob, 10);
    free(back);
    free(blob);
    /* A part lost or cut short: not found (the caller recomputes). */
    raw_exec(f->path, "UPDATE model_parts SET data = x'0102' WHERE name = 'm'");
    assert_int_equal(tb_store_model_get(st, "m", 3, stamp, &back, &blen), TB_E_NOTFOUND);
    raw_exec(f->path, "DELETE FROM model_parts WHERE name = 'm'");
    assert_int_equal(tb_store_model_get(st, "m", 3, stamp, &back, &blen), TB_E_NOTFOUND);

    /* More requests (a second capture): another stamp. */
    int64_t cap;
    assert_int_equal(tb_store_capture_begin(st, "t2", &cap), 0);
    assert_int_equal(tb_store_capture_end(st, cap, NULL), 0);
    raw_exec(f->path, "INSERT INTO requests SELECT * FROM requests");
    assert_int_equal(tb_store_stamp(st, stamp2, sizeof stamp2, &stable), 0);
    assert_string_equal(stamp2, "rows 10 captures 2");
    tb_store_close(st);
}

static void test_links(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_store(f->path, TB_STORE_CREATE);
    struct tb_request rq[5], *got;
    int64_t *rowid;
    size_t n;
    fill(st, rq);
    assert_int_equal(tb_store_link_rows(st, &got, &rowid, &n), 0);
    /* Requests in read order: rows 2, 4, 3, 1, 5. Row 2 (index 0) linked to
     * row 3 (index 2), exact; row 4 (index 1) downstream without a parent;
     * the rest front requests (no row). */
    uint64_t parent[5] = {3, 0, 0, 0, 0};
    float score[5] = {1.0f, 0.0f, 0, 0, 0};
    uint8_t kind[5] = {1, 4, 0, 0, 0};
    assert_int_equal(tb_store_links_put(st, rowid, parent, score, kind, n), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM links"), 2);
    assert_int_equal(raw_int(f->path, "SELECT parent FROM links WHERE request = 2"), 3);
    assert_int_equal(raw_int(f->path, "SELECT kind FROM links WHERE request = 2"), 1);
    assert_int_equal(raw_int(f->path, "SELECT parent FROM links WHERE request = 4"), -1);
    assert_int_equal(raw_int(f->path, "SELECT kind FROM links WHERE request = 4"), 4);
    /* Read back by position, the requests in another order (as an export
     * orders them): rows 5, 1, 3, 2, 4. Row 2 (position 3) has row 3
     * (position 2) as parent; row 4 (position 4) none. */
    const int64_t order[5] = {5, 1, 3, 2, 4};
    uint64_t back[5], rows, linked, exact, ambiguous;
    assert_int_equal(tb_store_links_get(st, order, 5, back, &rows, &linked, &exact, &ambiguous),
                     0);
    const uint64_t want[5] = {0, 0, 0, 3, 0};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(back[i], want[i]);
    assert_int_equal(rows, 2);
    assert_int_equal(linked, 1);
    assert_int_equal(exact, 1);
    assert_int_equal(ambiguous, 0);
    /* A stored link whose request or parent is not among those given: not
     * to be used. */
    const int64_t some[3] = {2, 4, 1};
    assert_int_equal(tb_store_links_get(st, some, 3, back, &rows, &linked, &exact, &ambiguous),
                     TB_E_NOTFOUND);
    /* The stamp of a stored blob, without reading it. */
    int64_t version = 0;
    char stamp[96] = "";
    assert_int_equal(tb_store_model_stamp(st, "whatif", &version, stamp, sizeof stamp),
                     TB_E_NOTFOUND);
    assert_int_equal(tb_store_model_put(st, "whatif", 7, "rows 5 captures 1", "xy", 2), 0);
    assert_int_equal(tb_store_model_stamp(st, "whatif", &version, stamp, sizeof stamp), 0);
    assert_int_equal(version, 7);
    assert_string_equal(stamp, "rows 5 captures 1");
    /* Replaced, not added to. */
    kind[1] = 0;
    assert_int_equal(tb_store_links_put(st, rowid, parent, score, kind, n), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM links"), 1);
    tb_store_close(st);
    /* Read-only: nothing written. */
    st = open_store(f->path, TB_STORE_READONLY);
    assert_int_equal(tb_store_links_put(st, rowid, parent, score, kind, n), TB_E_PERM);
    assert_int_equal(tb_store_model_put(st, "m", 1, "s", "x", 1), TB_E_PERM);
    tb_store_close(st);
    free(got);
    free(rowid);
}

/* Requests counted per tier and client machine: web's 3 from 192.168.1.9,
 * db's 2 from 10.0.0.2 (ports dropped: endpoints are machines). */
static void test_tier_clients(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_store(f->path, TB_STORE_CREATE);
    struct tb_request rq[5];
    fill(st, rq);
    uint64_t *counts;
    struct tb_addr *ep;
    size_t nep;
    assert_int_equal(tb_store_tier_clients(st, 2, &counts, &ep, &nep), 0);
    struct tb_addr user = addr("192.168.1.9:0"), app = addr("10.0.0.2:0");
    uint64_t total = 0;
    for (uint32_t t = 0; t <= 2; t++) {
        for (size_t e = 0; e < nep; e++) {
            uint64_t c = counts[t * nep + e];
            total += c;
            if (!c)
                continue;
            assert_int_equal(t, tb_addr_ip_eq(&ep[e], &user) ? rq[0].tier : rq[1].tier);
            assert_true(tb_addr_ip_eq(&ep[e], &user) || tb_addr_ip_eq(&ep[e], &app));
            assert_int_equal(c, tb_addr_ip_eq(&ep[e], &user) ? 3 : 2);
        }
    }
    assert_int_equal(total, 5);
    free(counts);
    free(ep);
    /* Tiers above ntiers are skipped. */
    uint32_t lo = rq[0].tier < rq[1].tier ? rq[0].tier : rq[1].tier;
    assert_int_equal(tb_store_tier_clients(st, lo, &counts, &ep, &nep), 0);
    total = 0;
    for (size_t i = 0; i < ((size_t)lo + 1) * nep; i++)
        total += counts[i];
    assert_int_equal(total, lo == rq[0].tier ? 3 : 2);
    free(counts);
    free(ep);
    tb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_link_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stamp_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_clients, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
