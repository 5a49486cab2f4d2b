/* SPDX-License-Identifier: MIT */
/* test_store_writer.c — the asynchronous writer: 200 000 requests with a catalog growing during
 * the run, read back identical; errors reported by finish. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <time.h>

#include "catalog.h"
#include "store.h"

#define NREQ 200000

struct fix {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tb_test_writer_XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/w.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    char p[160];
    const char *sfx[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static struct tb_store *open_new(const char *path)
{
    struct tb_store *st = NULL;
    char err[256] = "";
    int rc = tb_store_open(&st, path, TB_STORE_CREATE, err, sizeof err);
    if (rc)
        fail_msg("open %s: %d %s", path, rc, err);
    return st;
}

static void client_of(uint32_t i, struct tb_addr *a)
{
    if (i % 7 == 0) {
        uint8_t ip6[16] = {0x20, 0x01, 0x0d, 0xb8};
        ip6[15] = (uint8_t)(i % 13 + 1);
        tb_addr_from_v6(a, ip6, (uint16_t)(1024 + i % 60000));
    } else {
        uint8_t ip4[4] = {10, 1, (uint8_t)(i % 50), (uint8_t)(i % 3)};
        tb_addr_from_v4(a, ip4, (uint16_t)(1024 + i % 60000));
    }
}

static void test_writer_200k(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_catalog *cat;
    struct tb_writer *w;
    struct tb_request *rq = calloc(NREQ, sizeof *rq);
    uint32_t tiers[2] = {0, 0}, servers[2], classes[2] = {0, 0}, ntiers = 1;
    char text[64];
    int64_t cap;
    uint64_t conn0;
    assert_non_null(rq);
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &tiers[0]), 0);
    struct tb_addr sa;
    assert_int_equal(tb_addr_parse("10.0.0.2:80", &sa), 0);
    assert_int_equal(tb_catalog_server(cat, tiers[0], &sa, &servers[0]), 0);
    assert_int_equal(tb_store_next_conn(st, &conn0), 0);
    assert_int_equal(conn0, 1);
    assert_int_equal(tb_store_capture_begin(st, "synthetic", &cap), 0);
    assert_int_equal(tb_writer_start(&w, st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);

    for (uint32_t i = 0; i < NREQ; i++) {
        /* The catalog grows while requests flow: a second tier, new servers,
         * hosts and classes, each first used by the request right after. */
        if (i == 50000) {
            struct tb_addr db, host;
            assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &tiers[1]), 0);
            assert_int_equal(tb_addr_parse("10.0.0.3:3306", &db), 0);
            assert_int_equal(tb_catalog_server(cat, tiers[1], &db, &servers[1]), 0);
            assert_int_equal(tb_addr_parse("10.0.0.3", &host), 0);
            assert_int_equal(tb_catalog_host(cat, tiers[1], &host), 0);
            ntiers = 2;
        }
        uint32_t k = ntiers == 2 ? i % 2 : 0;
        if (i % 20011 == 20010) {
            struct tb_addr a;
            uint8_t ip4[4] = {10, 9, (uint8_t)(i >> 8), (uint8_t)i};
            tb_addr_from_v4(&a, ip4, (uint16_t)(8000 + k));
            assert_int_equal(tb_catalog_server(cat, tiers[k], &a, &servers[k]), 0);
        }
        if (i % 997 == 0 || classes[k] == 0) {
            int n = snprintf(text, sizeof text, "%s /p/%u, \"v\"", k ? "SELECT" : "GET", i);
            assert_int_equal(tb_catalog_class(cat, tiers[k], text, (size_t)n, &classes[k]), 0);
        }
        struct tb_request *r = &rq[i];
        r->arrival_ns = INT64_C(1700000000000000000) + (int64_t)i * 1000;
        r->departure_ns = r->arrival_ns + (int64_t)((i * 7919u) % 100000u);
        r->conn = conn0 + i / 3;
        r->req_bytes = i % 4096;
        r->resp_bytes = (uint64_t)i * 31 + (i % 5 == 0 ? UINT64_C(1) << 40 : 0);
        client_of(i, &r->client);
        r->tier = tiers[k];
        r->server = servers[k];
        r->class_id = classes[k];
        r->status = i % 11 == 0 ? -1 : (int32_t)(200 + i % 5);
        r->flags = i & 31;
        assert_int_equal(tb_writer_request(w, r), 0);
    }
    assert_int_equal(tb_writer_flush(w), 0);
    assert_int_equal(tb_writer_rows(w), NREQ);
    assert_int_equal(tb_writer_finish(w), 0);
    assert_int_equal(tb_store_capture_end(st, cap, NULL), 0);

    /* The writer's tb_batch (a virtual table of its connection) left nothing
     * in the file's schema; the capture's end built the read index. */
    sqlite3 *raw;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open_v2(f->path, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(raw,
                                        "SELECT sum(name LIKE '%batch%'), "
                                        "sum(name = 'requests_tier_arrival') FROM sqlite_master",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0);
    assert_int_equal(sqlite3_column_int(q, 1), 1);
    sqlite3_finalize(q);
    sqlite3_close(raw);

    /* Read back in arrival order: identical records. */
    struct tb_request *got;
    size_t n;
    assert_int_equal(tb_store_requests(st, 0, INT64_MIN, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, NREQ);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tb_request *x = &rq[i], *y = &got[i];
        if (x->arrival_ns != y->arrival_ns || x->departure_ns != y->departure_ns ||
            x->conn != y->conn || x->req_bytes != y->req_bytes ||
            x->resp_bytes != y->resp_bytes || !tb_addr_eq(&x->client, &y->client) ||
            x->client.family != y->client.family || x->tier != y->tier ||
            x->server != y->server || x->class_id != y->class_id || x->status != y->status ||
            x->flags != y->flags) {
            if (bad++ < 3)
                print_error("request %zu differs\n", i);
        }
    }
    assert_int_equal(bad, 0);
    free(got);
    uint64_t count;
    assert_int_equal(tb_store_request_count(st, tiers[1], &count), 0);
    assert_int_equal(count, 75000);
    uint64_t next;
    assert_int_equal(tb_store_next_conn(st, &next), 0);
    assert_int_equal(next, conn0 + (NREQ - 1) / 3 + 1);

    /* The stored catalog is the one the capture built. */
    struct tb_catalog *back;
    assert_int_equal(tb_catalog_new(&back), 0);
    assert_int_equal(tb_store_load_catalog(st, back), 0);
    assert_int_equal(tb_catalog_tier_count(back), 2);
    assert_int_equal(tb_catalog_server_count(back), tb_catalog_server_count(cat));
    assert_int_equal(tb_catalog_server_count(back), 11);
    assert_int_equal(tb_catalog_class_count(back), tb_catalog_class_count(cat));
    assert_int_equal(tb_catalog_host_count(back), 1);
    for (uint32_t id = 1; id <= tb_catalog_class_count(cat); id++) {
        assert_string_equal(tb_catalog_class_get(back, id)->text,
                            tb_catalog_class_get(cat, id)->text);
        assert_int_equal(tb_catalog_class_get(back, id)->tier, tb_catalog_class_get(cat, id)->tier);
    }
    for (uint32_t id = 1; id <= tb_catalog_server_count(cat); id++)
        assert_true(tb_addr_eq(&tb_catalog_server_get(back, id)->addr,
                               &tb_catalog_server_get(cat, id)->addr));
    tb_catalog_free(back);
    tb_catalog_free(cat);
    free(rq);
    tb_store_close(st);
}

static void test_writer_windows(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_writer *w;
    struct tb_window win[3] = {
        {.start_ns = 0, .width_ns = 100, .tier = 1, .load = 1.5, .completions = 3},
        {.start_ns = 100, .width_ns = 100, .tier = 1, .load = 2.5, .completions = 4},
        {.start_ns = 100, .width_ns = 100, .tier = 1, .server = 2, .load = 0.5},
    }, *out;
    size_t n;
    assert_int_equal(tb_writer_start(&w, st, 0), 0);
    assert_int_equal(tb_writer_windows(w, win, 3), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    assert_int_equal(tb_store_get_windows(st, 1, 0, 100, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_true(out[1].load == 2.5);
    assert_int_equal(out[1].completions, 4);
    free(out);
    tb_store_close(st);
}

/* Connection records: the record written when a connection ends replaces the
 * one written when it opened (same id), addresses and counters come back as
 * written, a range selects the connections open in it, and an id taken by a
 * connection without any request still advances next_conn. */
static void test_writer_conns(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_writer *w;
    struct tb_conn c[3];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        c[i].conn = (uint64_t)(7 + i);
        client_of((uint32_t)(i + 1), &c[i].client);
        assert_int_equal(tb_addr_parse(i == 2 ? "[2001:db8::9]:3306" : "10.0.4.1:3306",
                                       &c[i].server), 0);
        c[i].open_ns = 1000 * (i + 1);
        c[i].close_ns = c[i].open_ns + 500;
        c[i].opened = (uint8_t)i;
        c[i].closed = TB_CONN_OPEN;
    }
    assert_int_equal(tb_writer_start(&w, st, 3), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(tb_writer_conn(w, &c[i]), 0);
    assert_int_equal(tb_writer_flush(w), 0);
    /* conn 8 ends: its final record, with counters, replaces the first. */
    c[1].closed = TB_CONN_FIN;
    c[1].close_ns = 9000;
    c[1].requests = 12;
    c[1].packets = 80;
    c[1].bytes_c2s = 1234;
    c[1].bytes_s2c = 56789;
    c[1].tier = 2;
    c[1].server_id = 5;
    assert_int_equal(tb_writer_conn(w, &c[1]), 0);
    assert_int_equal(tb_writer_finish(w), 0);

    struct tb_conn *got;
    size_t n;
    assert_int_equal(tb_store_connections(st, INT64_MIN, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(got[i].conn, c[i].conn);
        assert_true(tb_addr_eq(&got[i].client, &c[i].client));
        assert_int_equal(got[i].client.family, c[i].client.family);
        assert_true(tb_addr_eq(&got[i].server, &c[i].server));
        assert_int_equal(got[i].open_ns, c[i].open_ns);
        assert_int_equal(got[i].close_ns, c[i].close_ns);
        assert_int_equal(got[i].opened, c[i].opened);
        assert_int_equal(got[i].closed, c[i].closed);
    }
    assert_int_equal(got[1].requests, 12);
    assert_int_equal(got[1].packets, 80);
    assert_int_equal(got[1].bytes_c2s, 1234);
    assert_int_equal(got[1].bytes_s2c, 56789);
    assert_int_equal(got[1].tier, 2);
    assert_int_equal(got[1].server_id, 5);
    free(got);
    /* [2600, 2700): conn 8 (2000..9000) only; conn 9 opens at 3000. */
    assert_int_equal(tb_store_connections(st, 2600, 2700, &got, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(got[0].conn, 8);
    free(got);
    uint64_t next;
    assert_int_equal(tb_store_next_conn(st, &next), 0);
    assert_int_equal(next, 10);
    tb_store_close(st);
}

/* A catalog that was not loaded from the file reuses its ids: the writer
 * refuses the batch and finish reports it; no request row is stored. */
static void test_writer_error(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_catalog *a, *b;
    struct tb_writer *w;
    struct tb_request r = {.arrival_ns = 1, .departure_ns = 2, .tier = 1, .server = 0,
                           .class_id = 0};
    uint32_t id;
    assert_int_equal(tb_catalog_new(&a), 0);
    assert_int_equal(tb_catalog_tier(a, "http", "http", &id), 0);
    assert_int_equal(tb_store_put_catalog(st, a), 0);
    assert_int_equal(tb_catalog_new(&b), 0);
    assert_int_equal(tb_catalog_tier(b, "mysql", "mysql", &id), 0);
    assert_int_equal(tb_writer_start(&w, st, 0), 0);
    assert_int_equal(tb_writer_catalog(w, b), 0);
    tb_addr_parse("10.0.0.1:1", &r.client);
    assert_int_equal(tb_writer_request(w, &r), 0);
    assert_int_equal(tb_writer_flush(w), TB_E_INVAL);
    assert_int_equal(tb_writer_request(w, &r), TB_E_INVAL);
    assert_int_equal(tb_writer_rows(w), 0);
    assert_int_equal(tb_writer_finish(w), TB_E_INVAL);
    uint64_t count = 9;
    assert_int_equal(tb_store_request_count(st, 0, &count), 0);
    assert_int_equal(count, 0);
    tb_catalog_free(a);
    tb_catalog_free(b);
    tb_store_close(st);
}

struct producer {
    struct tb_writer *w;
    const struct tb_request *rq;
    size_t n;
    atomic_size_t done;
    int rc;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (size_t i = 0; i < p->n && p->rc == 0; i++) {
        p->rc = tb_writer_request(p->w, &p->rq[i]);
        atomic_store(&p->done, i + 1);
    }
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* With SQLite locked by another connection, the caller fills the queue cap
 * (2 batches of 100) plus its current batch, then blocks instead of
 * dropping; once the lock goes, every row lands. */
static void test_writer_backpressure(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_catalog *cat;
    struct tb_writer *w;
    struct tb_request rq[1000];
    uint32_t tier, server, cls;
    struct tb_addr a;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &tier), 0);
    assert_int_equal(tb_addr_parse("10.0.0.2:80", &a), 0);
    assert_int_equal(tb_catalog_server(cat, tier, &a, &server), 0);
    assert_int_equal(tb_catalog_class(cat, tier, "GET /", 5, &cls), 0);
    assert_int_equal(tb_store_put_catalog(st, cat), 0);
    for (size_t i = 0; i < 1000; i++) {
        rq[i] = (struct tb_request){.arrival_ns = (int64_t)i * 10,
                                    .departure_ns = (int64_t)i * 10 + 5, .conn = i, .tier = tier,
                                    .server = server, .class_id = cls, .status = 200};
        client_of((uint32_t)i, &rq[i].client);
    }
    sqlite3 *lock;
    assert_int_equal(sqlite3_open(f->path, &lock), SQLITE_OK);
    assert_int_equal(sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);

    struct tb_writer_opts o = {.batch_rows = 100, .queue_cap = 2};
    assert_int_equal(tb_writer_start_opts(&w, st, 0, &o), 0);
    struct producer p = {.w = w, .rq = rq, .n = 1000};
    atomic_init(&p.done, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, produce, &p), 0);
    for (int i = 0; i < 100 && atomic_load(&p.done) < 300; i++)
        sleep_ms(20);
    sleep_ms(200);
    assert_int_equal(atomic_load(&p.done), 300); /* blocked on the 301st */
    struct tb_writer_stats ws;
    tb_writer_stats(w, &ws);
    assert_int_equal(ws.max_queued, 2);
    assert_int_equal(ws.rows, 0);

    assert_int_equal(sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(p.rc, 0);
    assert_int_equal(atomic_load(&p.done), 1000);
    assert_int_equal(tb_writer_flush(w), 0);
    tb_writer_stats(w, &ws);
    assert_int_equal(ws.rows, 1000);
    assert_int_equal(ws.batches, 10);
    assert_int_equal(ws.max_queued, 2);
    assert_true(ws.caller_blocked_ns >= 200 * TB_NS_PER_MS);
    assert_int_equal(tb_writer_finish(w), 0);
    uint64_t count;
    assert_int_equal(tb_store_request_count(st, 0, &count), 0);
    assert_int_equal(count, 1000);
    struct tb_writer_opts bad = {.batch_rows = (1u << 20) + 1};
    assert_int_equal(tb_writer_start_opts(&w, st, 0, &bad), TB_E_INVAL);
    tb_catalog_free(cat);
    tb_store_close(st);
}

/* Requests in the database file alone, as a power loss would leave it: a
 * copy of the file without its write-ahead log, read by SQLite directly. */
static int64_t rows_in_file_alone(const char *path)
{
    char copy[200];
    snprintf(copy, sizeof copy, "%s.alone", path);
    FILE *in = fopen(path, "rb"), *out = fopen(copy, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, k, out), k);
    fclose(in);
    fclose(out);
    sqlite3 *db;
    sqlite3_stmt *s;
    int64_t n = -1;
    assert_int_equal(sqlite3_open(copy, &db), SQLITE_OK);
    /* Before the first checkpoint even the schema is only in the log. */
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM requests", -1, &s, NULL) != SQLITE_OK)
        n = 0;
    else if (sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[220];
        snprintf(p, sizeof p, "%s%s", copy, sfx[i]);
        unlink(p);
    }
    return n;
}

/* Bulk mode: nothing reaches the database file until the log holds bulk_wal
 * bytes (then a checkpoint), and all of it once finish returns. */
static void test_writer_bulk(void **state)
{
    struct fix *f = *state;
    enum { N = 20000 };
    for (int pass = 0; pass < 2; pass++) {
        struct tb_store *st = open_new(f->path);
        struct tb_catalog *cat;
        struct tb_writer *w;
        uint32_t tier, server, cls;
        struct tb_addr a;
        assert_int_equal(tb_catalog_new(&cat), 0);
        assert_int_equal(tb_store_load_catalog(st, cat), 0);
        assert_int_equal(tb_catalog_tier(cat, "http", "http", &tier), 0);
        assert_int_equal(tb_addr_parse("10.0.0.2:80", &a), 0);
        assert_int_equal(tb_catalog_server(cat, tier, &a, &server), 0);
        assert_int_equal(tb_catalog_class(cat, tier, "GET /", 5, &cls), 0);
        assert_int_equal(tb_store_put_catalog(st, cat), 0);
        /* Pass 0: the default threshold (256 MiB), never reached by ~1 MiB
         * of rows; pass 1: 64 KiB, passed after the first batches. */
        struct tb_writer_opts o = {.batch_rows = 1000, .bulk = true,
                                   .bulk_wal = pass ? 64 * 1024 : 0};
        assert_int_equal(tb_writer_start_opts(&w, st, 1, &o), 0);
        int64_t before = rows_in_file_alone(f->path);
        for (uint32_t i = 0; i < N; i++) {
            struct tb_request r = {.arrival_ns = (int64_t)i * 1000 + pass * 10000000000LL,
                                   .departure_ns = (int64_t)i * 1000 + 500 +
                                                   pass * 10000000000LL,
                                   .conn = i + 1, .tier = tier, .server = server,
                                   .class_id = cls, .status = 200};
            client_of(i, &r.client);
            assert_int_equal(tb_writer_request(w, &r), 0);
        }
        assert_int_equal(tb_writer_flush(w), 0);
        int64_t during = rows_in_file_alone(f->path);
        assert_int_equal(tb_writer_finish(w), 0);
        int64_t after = rows_in_file_alone(f->path);
        assert_int_equal(before, pass * N);
        if (pass == 0)
            assert_int_equal(during, 0);
        else
            assert_true(during > N && during <= 2 * N);
        assert_int_equal(after, (pass + 1) * N);
        tb_catalog_free(cat);
        tb_store_close(st);
    }
}

/* (arrival, seq) of a stored row: the order every reader gives, ties by the
 * order rows were written in. */
struct ord {
    int64_t arrival;
    uint64_t seq;
};

static int ord_cmp(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    if (x->arrival != y->arrival)
        return x->arrival < y->arrival ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Rows of one tier found through the read index alone (INDEXED BY fails to
 * prepare when the index is missing: -1), from a connection of its own. */
static int64_t indexed_rows(const char *path, uint32_t tier)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    int64_t n = -1;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM requests INDEXED BY requests_tier_arrival "
                               "WHERE tier_id = ?1 AND arrival_ns >= -1",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, tier);
        if (sqlite3_step(s) == SQLITE_ROW)
            n = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return n;
}

/* keep_index: the writer builds the read index before its first batch (over
 * the rows a writer without it left unindexed, as a killed capture does) and
 * keeps it as it loads, so it is there mid-load and complete at the end with
 * no tb_store_capture_end; the index walk gives every row in (arrival, write
 * order), checked against a sort of what was written. */
static void test_writer_keep_index(void **state)
{
    struct fix *f = *state;
    enum { N = 6000, NT = 3 };
    struct tb_store *st = open_new(f->path);
    struct tb_catalog *cat;
    struct tb_writer *w;
    uint32_t tier[NT], server[NT], cls;
    struct tb_addr a;
    struct ord want[2 * N];
    int64_t per_tier[NT] = {0};
    uint64_t seq = 0;
    char name[16];
    assert_int_equal(tb_catalog_new(&cat), 0);
    for (int t = 0; t < NT; t++) {
        snprintf(name, sizeof name, "t%d", t);
        assert_int_equal(tb_catalog_tier(cat, name, "http", &tier[t]), 0);
        snprintf(name, sizeof name, "10.0.0.%d:80", t + 1);
        assert_int_equal(tb_addr_parse(name, &a), 0);
        assert_int_equal(tb_catalog_server(cat, tier[t], &a, &server[t]), 0);
    }
    assert_int_equal(tb_catalog_class(cat, tier[0], "GET /", 5, &cls), 0);
    assert_int_equal(tb_store_put_catalog(st, cat), 0);
    for (int pass = 0; pass < 2; pass++) {
        struct tb_writer_opts o = {.batch_rows = 1000, .bulk = true, .keep_index = pass == 1};
        assert_int_equal(tb_writer_start_opts(&w, st, 1, &o), 0);
        for (uint32_t i = 0; i < N; i++) {
            /* Arrivals out of order across the tiers, each taken by 3 rows
             * (ties broken by write order). */
            int t = (int)((i * 7 + (uint32_t)pass) % NT);
            struct tb_request r = {.arrival_ns = (int64_t)((i * 37u + (uint32_t)pass) % 2000u) *
                                                 1000,
                                   .conn = seq + 1, .tier = tier[t], .server = server[t],
                                   .class_id = cls, .status = 200};
            r.departure_ns = r.arrival_ns + 500;
            client_of(i, &r.client);
            assert_int_equal(tb_writer_request(w, &r), 0);
            want[seq] = (struct ord){r.arrival_ns, seq};
            seq++;
            per_tier[t]++;
            if (pass == 1 && i == N / 2) {
                /* Mid-load: the index is there and holds every row so far. */
                assert_int_equal(tb_writer_flush(w), 0);
                int64_t sum = 0;
                for (int k = 0; k < NT; k++)
                    sum += indexed_rows(f->path, tier[k]);
                assert_int_equal(sum, (int64_t)seq);
            }
        }
        assert_int_equal(tb_writer_finish(w), 0);
        if (pass == 0)
            assert_int_equal(indexed_rows(f->path, tier[0]), -1); /* nothing built it */
    }
    for (int t = 0; t < NT; t++)
        assert_int_equal(indexed_rows(f->path, tier[t]), per_tier[t]);
    qsort(want, 2 * N, sizeof *want, ord_cmp);
    struct tb_request *got;
    size_t n;
    assert_int_equal(tb_store_requests(st, 0, INT64_MIN, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 2 * N);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(got[i].arrival_ns, want[i].arrival);
        assert_int_equal(got[i].conn, want[i].seq + 1);
    }
    free(got);
    tb_catalog_free(cat);
    tb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writer_200k, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_conns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_bulk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_keep_index, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
