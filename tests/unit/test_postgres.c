/* SPDX-License-Identifier: MIT */
/* test_postgres.c — the PostgreSQL parser on hand-built message sequences:
 * start-up with SSL/GSS refusals, simple and extended queries, named and
 * unnamed statements, pipelines, errors (SQLSTATE), COPY both ways,
 * asynchronous messages, function calls, cancel and replication connections,
 * capture holes, mid-stream pickup and detection; then the fuzz driver's
 * invariants over the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto-int.h"
#include "proto-test.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

struct buf {
    uint8_t *b;
    size_t n, cap;
};

static void put(struct buf *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2 + 64;
        o->b = realloc(o->b, o->cap);
        assert_non_null(o->b);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void be32(struct buf *o, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(o, b, 4);
}

/* A typed message: type, length (itself + payload), payload. */
static void msg(struct buf *o, char type, const void *payload, size_t len)
{
    put(o, &type, 1);
    be32(o, (uint32_t)(len + 4));
    put(o, payload, len);
}
#define MSG(o, t, lit) msg((o), (t), (lit), sizeof(lit) - 1)

static void clear(struct buf *o) { o->n = 0; }

/* Untyped start-up packets. */
static void startup(struct buf *o)
{
    static const char params[] = "user\0postgres\0database\0postgres\0";
    be32(o, (uint32_t)(8 + sizeof params)); /* params + the final NUL */
    be32(o, 0x00030000u);
    put(o, params, sizeof params);
}

static void code_only(struct buf *o, uint32_t code)
{
    be32(o, 8);
    be32(o, code);
}

/* What the server sends after a StartupMessage until ReadyForQuery. */
static void auth_ok(struct buf *o)
{
    MSG(o, 'R', "\0\0\0\0");
    MSG(o, 'S', "server_version\00015.18\0");
    MSG(o, 'S', "client_encoding\0UTF8\0");
    MSG(o, 'K', "\0\0\x12\x34\xde\xad\xbe\xef");
    MSG(o, 'Z', "I");
}

static void query(struct buf *o, const char *sql) { msg(o, 'Q', sql, strlen(sql) + 1); }

/* RowDescription of one int4 column, one DataRow, CommandComplete. */
static void one_row(struct buf *o, const char *tag)
{
    MSG(o, 'T', "\0\1abalance\0\0\0\0\0\0\0\0\0\0\x17\0\4\xff\xff\xff\xff\0\0");
    MSG(o, 'D', "\0\1\0\0\0\0041234");
    msg(o, 'C', tag, strlen(tag) + 1);
}

static void parse(struct buf *o, const char *name, const char *sql)
{
    struct buf p = {0};
    put(&p, name, strlen(name) + 1);
    put(&p, sql, strlen(sql) + 1);
    put(&p, "\0\0", 2); /* no parameter types */
    msg(o, 'P', p.b, p.n);
    free(p.b);
}

static void bind(struct buf *o, const char *portal, const char *stmt)
{
    struct buf p = {0};
    put(&p, portal, strlen(portal) + 1);
    put(&p, stmt, strlen(stmt) + 1);
    /* no parameter formats, one parameter "7", no result formats */
    put(&p, "\0\0" "\0\1" "\0\0\0\1" "7" "\0\0", 11);
    msg(o, 'B', p.b, p.n);
    free(p.b);
}

static void execute(struct buf *o, const char *portal)
{
    struct buf p = {0};
    put(&p, portal, strlen(portal) + 1);
    put(&p, "\0\0\0\0", 4);
    msg(o, 'E', p.b, p.n);
    free(p.b);
}

static void error(struct buf *o, const char *severity, const char *sqlstate)
{
    struct buf p = {0};
    put(&p, "S", 1);
    put(&p, severity, strlen(severity) + 1);
    put(&p, "V", 1);
    put(&p, severity, strlen(severity) + 1);
    put(&p, "C", 1);
    put(&p, sqlstate, strlen(sqlstate) + 1);
    put(&p, "Mrelation \"nope\" does not exist\0\0", 33);
    msg(o, 'E', p.b, p.n);
    free(p.b);
}

/* SQLSTATE as the parser reports it: base 36. */
static int32_t b36(const char *s)
{
    int32_t v = 0;
    for (; *s; s++)
        v = v * 36 + (*s <= '9' ? *s - '0' : *s - 'A' + 10);
    return v;
}

static void feed(struct pt *t, int dir, struct buf *b, int64_t ts, size_t step)
{
    pt_feed_split(t, dir, b->b, b->n, ts, step);
    clear(b);
}

/* A connection after start-up (SSL refused first), fed in chunks of `step`. */
static struct pt *connected(size_t step)
{
    struct pt *t = pt_new(&tb_proto_postgres, false);
    struct buf b = {0};
    code_only(&b, 80877103u);
    feed(t, C2S, &b, 1, step);
    put(&b, "N", 1);
    feed(t, S2C, &b, 2, step);
    startup(&b);
    feed(t, C2S, &b, 3, step);
    auth_ok(&b);
    feed(t, S2C, &b, 4, step);
    free(b.b);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->ctr.parse_errors, 0);
    return t;
}

static void run_simple(size_t step)
{
    struct pt *t = connected(step);
    struct buf b = {0};
    query(&b, "SELECT abalance FROM pgbench_accounts WHERE aid = 42;");
    size_t qn = b.n;
    feed(t, C2S, &b, 100, step);
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    size_t rn = b.n;
    feed(t, S2C, &b, 150, step);
    /* An error: its SQLSTATE is the status. */
    query(&b, "select * from nope");
    feed(t, C2S, &b, 200, step);
    error(&b, "ERROR", "42P01");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 260, step);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "select abalance from pgbench_accounts where aid = ?");
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 150);
    assert_int_equal(t->v[0].rq, qn);
    assert_int_equal(t->v[0].rs, rn);
    assert_int_equal(t->v[0].status, 0);
    assert_int_equal(t->v[1].status, b36("42P01"));
    assert_int_equal(t->v[1].arr, 200);
    assert_int_equal(t->v[1].dep, 260);
    assert_int_equal(t->ctr.parse_errors, 0);
    free(b.b);
    pt_free(t);
}

static void test_simple_query(void **state)
{
    (void)state;
    run_simple(0);
    run_simple(1);
    run_simple(3);
    run_simple(7);
}

/* The answer spread over several packets: the departure is the packet with
 * ReadyForQuery, the arrival the packet with the query's first byte. */
static void test_times_across_packets(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    query(&b, "select 1");
    pt_feed(t, C2S, b.b, 4, 100);
    pt_feed(t, C2S, b.b + 4, b.n - 4, 101);
    clear(&b);
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    pt_feed(t, S2C, b.b, 10, 110);
    pt_feed(t, S2C, b.b + 10, b.n - 12, 120);
    assert_int_equal(t->n, 0);
    pt_feed(t, S2C, b.b + b.n - 2, 2, 130);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 130);
    free(b.b);
    pt_free(t);
}

static void test_extended(void **state)
{
    (void)state;
    for (size_t step = 0; step < 4; step += 3) {
        struct pt *t = connected(step);
        struct buf b = {0};
        /* Unnamed statement and portal (pgbench -M extended). */
        parse(&b, "", "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2");
        bind(&b, "", "");
        MSG(&b, 'D', "P\0");
        execute(&b, "");
        MSG(&b, 'S', "");
        feed(t, C2S, &b, 100, step);
        MSG(&b, '1', "");
        MSG(&b, '2', "");
        MSG(&b, 'n', "");
        MSG(&b, 'C', "UPDATE 1\0");
        MSG(&b, 'Z', "T");
        feed(t, S2C, &b, 110, step);
        /* Named statements (-M prepared): prepared once, then executed. */
        parse(&b, "P0_1", "SELECT abalance FROM pgbench_accounts WHERE aid = $1");
        MSG(&b, 'S', "");
        feed(t, C2S, &b, 200, step);
        MSG(&b, '1', "");
        MSG(&b, 'Z', "T");
        feed(t, S2C, &b, 210, step);
        for (int i = 0; i < 2; i++) {
            bind(&b, "", "P0_1");
            MSG(&b, 'D', "P\0");
            execute(&b, "");
            MSG(&b, 'S', "");
            feed(t, C2S, &b, 300 + 100 * i, step);
            MSG(&b, '2', "");
            one_row(&b, "SELECT 1");
            MSG(&b, 'Z', "T");
            feed(t, S2C, &b, 310 + 100 * i, step);
        }
        /* Closed: an execute of a statement not seen is "Execute". */
        MSG(&b, 'C', "SP0_1\0");
        MSG(&b, 'S', "");
        feed(t, C2S, &b, 500, step);
        MSG(&b, '3', "");
        MSG(&b, 'Z', "T");
        feed(t, S2C, &b, 510, step);
        bind(&b, "", "P0_1");
        execute(&b, "");
        MSG(&b, 'S', "");
        feed(t, C2S, &b, 600, step);
        error(&b, "ERROR", "26000");
        MSG(&b, 'Z', "E");
        feed(t, S2C, &b, 610, step);
        assert_int_equal(t->n, 6);
        assert_string_equal(t->v[0].cls,
                            "update pgbench_tellers set tbalance = tbalance + ? where tid = ?");
        assert_int_equal(t->v[0].arr, 100);
        assert_int_equal(t->v[0].dep, 110);
        assert_string_equal(t->v[1].cls,
                            "PREPARE select abalance from pgbench_accounts where aid = ?");
        assert_string_equal(t->v[2].cls, "select abalance from pgbench_accounts where aid = ?");
        assert_string_equal(t->v[3].cls, "select abalance from pgbench_accounts where aid = ?");
        assert_int_equal(t->v[3].arr, 400);
        assert_int_equal(t->v[3].dep, 410);
        assert_string_equal(t->v[4].cls, "Close");
        assert_string_equal(t->v[5].cls, "Execute");
        assert_int_equal(t->v[5].status, b36("26000"));
        assert_int_equal(t->ctr.parse_errors, 0);
        free(b.b);
        pt_free(t);
    }
}

/* The unnamed statement re-parsed with the same text (pgbench: its entry
 * keeps its fingerprint), with another text, and with the first again; a
 * named statement re-parsed under the same name with a new text; the
 * unnamed portal re-bound to each. Every batch's class is its own text's. */
static void test_reparse(void **state)
{
    (void)state;
    static const struct {
        const char *stmt, *sql, *cls;
    } seq[] = {
        {"", "SELECT a FROM t WHERE id = $1", "select a from t where id = ?"},
        {"", "SELECT a FROM t WHERE id = $1", "select a from t where id = ?"},
        {"", "UPDATE t SET a = a + $1 WHERE id = 3", "update t set a = a + ? where id = ?"},
        {"", "SELECT a FROM t WHERE id = $1", "select a from t where id = ?"},
        {"s1", "DELETE FROM t WHERE id = $1", "delete from t where id = ?"},
        {"s1", "DELETE FROM t WHERE id = $1", "delete from t where id = ?"},
        {"s1", "INSERT INTO t VALUES ($1)", "insert into t values (?+)"},
        {"", "UPDATE t SET a = a + $1 WHERE id = 3", "update t set a = a + ? where id = ?"},
    };
    const size_t n = sizeof seq / sizeof seq[0];
    for (size_t step = 0; step < 8; step += 7) {
        struct pt *t = connected(step);
        struct buf b = {0};
        for (size_t i = 0; i < n; i++) {
            parse(&b, seq[i].stmt, seq[i].sql);
            bind(&b, "", seq[i].stmt);
            execute(&b, "");
            MSG(&b, 'S', "");
            feed(t, C2S, &b, (int64_t)(100 * (i + 1)), step);
            MSG(&b, '1', "");
            MSG(&b, '2', "");
            MSG(&b, 'C', "UPDATE 1\0");
            MSG(&b, 'Z', "I");
            feed(t, S2C, &b, (int64_t)(100 * (i + 1) + 10), step);
        }
        assert_int_equal(t->n, n);
        for (size_t i = 0; i < n; i++)
            assert_string_equal(t->v[i].cls, seq[i].cls);
        assert_int_equal(t->ctr.parse_errors, 0);
        free(b.b);
        pt_free(t);
    }
}

/* tb__copy_small(), which moves class texts: every length up to past the
 * class cap, from every alignment; the bytes after the copy stay as they
 * were. */
static void test_copy_small(void **state)
{
    (void)state;
    static char src[TB__CLASS_MAX + 64], dst[TB__CLASS_MAX + 64];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 31 + 7);
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off + 16 <= sizeof src; n++) {
            memset(dst, 0x5a, sizeof dst);
            tb__copy_small(dst + off, src + off, n);
            for (size_t i = 0; i < sizeof dst; i++) {
                char want = i >= off && i < off + n ? src[i] : 0x5a;
                if (dst[i] != want)
                    fail_msg("offset %zu length %zu: byte %zu is %d, expected %d", off, n, i,
                             dst[i], want);
            }
        }
    }
}

/* Pipeline mode: three Sync-delimited batches in one packet, answered in
 * order; after an error the server skips to the batch's Sync. */
static void test_pipeline(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    parse(&b, "s1", "insert into t values ($1)");
    MSG(&b, 'S', "");
    for (int i = 0; i < 3; i++) {
        bind(&b, "", "s1");
        execute(&b, "");
        MSG(&b, 'S', "");
    }
    feed(t, C2S, &b, 100, 0);
    MSG(&b, '1', "");
    MSG(&b, 'Z', "I");
    MSG(&b, '2', "");
    MSG(&b, 'C', "INSERT 0 1\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 120, 0);
    error(&b, "ERROR", "23505");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 130, 0);
    MSG(&b, '2', "");
    MSG(&b, 'C', "INSERT 0 1\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 140, 0);
    assert_int_equal(t->n, 4);
    assert_string_equal(t->v[0].cls, "PREPARE insert into t values (?+)");
    for (int i = 1; i < 4; i++) {
        assert_string_equal(t->v[i].cls, "insert into t values (?+)");
        assert_int_equal(t->v[i].arr, 100);
    }
    assert_int_equal(t->v[1].dep, 120);
    assert_int_equal(t->v[2].dep, 130);
    assert_int_equal(t->v[2].status, b36("23505"));
    assert_int_equal(t->v[3].dep, 140);
    assert_int_equal(t->v[3].status, 0);
    free(b.b);
    pt_free(t);
}

/* NoticeResponse, NotificationResponse and ParameterStatus never start, end
 * or belong to an answer. */
static void test_async_messages(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    /* While idle: nothing to pair. */
    MSG(&b, 'A', "\0\0\0\1chan\0payload\0");
    MSG(&b, 'S', "TimeZone\0UTC\0");
    feed(t, S2C, &b, 50, 0);
    query(&b, "listen chan");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'N', "SNOTICE\0C00000\0Mhello\0\0");
    feed(t, S2C, &b, 105, 0);
    assert_int_equal(t->n, 0);
    MSG(&b, 'C', "LISTEN\0");
    MSG(&b, 'Z', "I");
    size_t rn = b.n;
    feed(t, S2C, &b, 110, 0);
    /* A notification after the answer does not move it. */
    MSG(&b, 'A', "\0\0\0\1chan\0x\0");
    feed(t, S2C, &b, 120, 0);
    assert_int_equal(t->n, 1);
    assert_string_equal(t->v[0].cls, "listen chan");
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[0].rs, rn);
    assert_int_equal(t->v[0].status, 0);
    assert_int_equal(t->ctr.parse_errors, 0);
    free(b.b);
    pt_free(t);
}

static void test_copy(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    query(&b, "COPY t FROM STDIN");
    size_t qn = b.n;
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'G', "\0\0\1\0\0");
    feed(t, S2C, &b, 110, 0);
    MSG(&b, 'd', "1\tone\n2\ttwo\n");
    MSG(&b, 'd', "3\tthree\n");
    MSG(&b, 'c', "");
    size_t cn = b.n;
    feed(t, C2S, &b, 120, 0);
    MSG(&b, 'C', "COPY 3\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 130, 0);
    query(&b, "COPY t TO STDOUT");
    feed(t, C2S, &b, 200, 0);
    MSG(&b, 'H', "\0\0\1\0\0");
    MSG(&b, 'd', "1\tone\n");
    feed(t, S2C, &b, 210, 0);
    MSG(&b, 'd', "2\ttwo\n");
    MSG(&b, 'c', "");
    MSG(&b, 'C', "COPY 2\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 220, 0);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "copy t from stdin");
    assert_int_equal(t->v[0].rq, qn + cn);
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 130);
    assert_string_equal(t->v[1].cls, "copy t to stdout");
    assert_int_equal(t->v[1].dep, 220);
    free(b.b);
    pt_free(t);
}

static void test_function_call_and_flush(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    MSG(&b, 'F', "\0\0\x04\x00\0\0\0\0\0\0");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'V', "\0\0\0\1x");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 110, 0);
    /* Parse + Describe + Flush: answered without ReadyForQuery; the batch
     * goes on until its Sync. */
    parse(&b, "", "select $1::int");
    MSG(&b, 'D', "S\0");
    MSG(&b, 'H', "");
    feed(t, C2S, &b, 200, 0);
    MSG(&b, '1', "");
    MSG(&b, 't', "\0\1\0\0\0\x17");
    MSG(&b, 'T', "\0\0");
    feed(t, S2C, &b, 210, 0);
    assert_int_equal(t->n, 1);
    bind(&b, "", "");
    execute(&b, "");
    MSG(&b, 'S', "");
    feed(t, C2S, &b, 220, 0);
    MSG(&b, '2', "");
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 230, 0);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "FunctionCall");
    assert_int_equal(t->v[0].dep, 110);
    assert_string_equal(t->v[1].cls, "select ?::int");
    assert_int_equal(t->v[1].arr, 200);
    assert_int_equal(t->v[1].dep, 230);
    free(b.b);
    pt_free(t);
}

static void test_encrypted_cancel_replication(void **state)
{
    (void)state;
    struct buf b = {0};
    /* TLS accepted: nothing more to read. */
    struct pt *t = pt_new(&tb_proto_postgres, false);
    code_only(&b, 80877103u);
    feed(t, C2S, &b, 1, 0);
    put(&b, "S", 1);
    assert_int_equal(pt_feed(t, S2C, b.b, b.n, 2), TB_PS_STOP);
    clear(&b);
    assert_int_equal(t->ctr.encrypted_flows, 1);
    pt_free(t);
    /* GSS refused, then SSL refused, then in clear. */
    t = pt_new(&tb_proto_postgres, false);
    code_only(&b, 80877104u);
    feed(t, C2S, &b, 1, 0);
    put(&b, "N", 1);
    feed(t, S2C, &b, 2, 0);
    code_only(&b, 80877103u);
    feed(t, C2S, &b, 3, 0);
    put(&b, "N", 1);
    feed(t, S2C, &b, 4, 0);
    startup(&b);
    feed(t, C2S, &b, 5, 0);
    auth_ok(&b);
    feed(t, S2C, &b, 6, 0);
    query(&b, "IDENTIFY_SYSTEM");
    feed(t, C2S, &b, 10, 0);
    one_row(&b, "IDENTIFY_SYSTEM");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 11, 0);
    /* START_REPLICATION: CopyBothResponse starts a stream. */
    query(&b, "START_REPLICATION 0/0");
    feed(t, C2S, &b, 20, 0);
    MSG(&b, 'W', "\0\0\0");
    assert_int_equal(pt_feed(t, S2C, b.b, b.n, 21), TB_PS_STOP);
    clear(&b);
    assert_int_equal(t->n, 1);
    assert_string_equal(t->v[0].cls, "identify_system");
    assert_int_equal(t->ctr.streams, 1);
    assert_int_equal(t->ctr.encrypted_flows, 0);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    /* CancelRequest: its own connection, closed by the server unanswered. */
    t = pt_new(&tb_proto_postgres, false);
    be32(&b, 16);
    be32(&b, 80877102u);
    be32(&b, 0x1234);
    be32(&b, 0xdeadbeef);
    assert_int_equal(pt_feed(t, C2S, b.b, b.n, 1), TB_PS_STOP);
    pt_close(t, 1, 2);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    /* A failed authentication: its FATAL error answers no request. */
    t = pt_new(&tb_proto_postgres, false);
    startup(&b);
    feed(t, C2S, &b, 1, 0);
    error(&b, "FATAL", "28P01");
    feed(t, S2C, &b, 2, 0);
    pt_close(t, 1, 3);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    free(b.b);
}

static void test_midstream(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_postgres, true);
    struct buf b = {0};
    /* The tail of an answer to a batch sent before the capture: ignored. */
    MSG(&b, 'D', "\0\1\0\0\0\0041234");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 10, 0);
    /* The middle of a long message: no chain of messages, no sync. */
    put(&b, "abc\0\0\0\x10xyz", 10);
    feed(t, C2S, &b, 20, 0);
    bind(&b, "", "S_1");
    execute(&b, "");
    MSG(&b, 'S', "");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, '2', "");
    MSG(&b, 'C', "UPDATE 1\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 110, 0);
    query(&b, "select 2");
    feed(t, C2S, &b, 200, 0);
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 210, 0);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "Execute"); /* prepared before the capture */
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 110);
    assert_string_equal(t->v[1].cls, "select ?");
    assert_int_equal(t->ctr.parse_errors, 0);
    free(b.b);
    pt_free(t);
}

static void test_gaps(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    /* A hole inside a DataRow: its length still frames the rest. */
    query(&b, "select 1");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'T', "\0\0");
    msg(&b, 'D', "\0\1\0\0\0\x20" "0123456789abcdef0123456789abcdef", 38);
    MSG(&b, 'C', "SELECT 1\0");
    MSG(&b, 'Z', "I");
    pt_feed(t, S2C, b.b, 20, 110);
    pt_gap(t, S2C, 10, TB_TS_UNKNOWN);
    pt_feed(t, S2C, b.b + 30, b.n - 30, 120);
    clear(&b);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].dep, 120);
    assert_true(t->v[0].flags & TB_REQ_GAP);
    /* A hole across message boundaries, one batch outstanding: the next
     * query closes the answer at the last packet captured. */
    query(&b, "select 2");
    feed(t, C2S, &b, 200, 0);
    MSG(&b, 'T', "\0\0");
    feed(t, S2C, &b, 210, 0);
    pt_gap(t, S2C, 0, TB_TS_UNKNOWN);
    MSG(&b, 'C', "SELECT 1\0"); /* seen after the hole, unframed */
    feed(t, S2C, &b, 220, 0);
    query(&b, "select 3");
    feed(t, C2S, &b, 300, 0);
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 310, 0);
    assert_int_equal(t->n, 3);
    assert_string_equal(t->v[1].cls, "select ?");
    assert_int_equal(t->v[1].arr, 200);
    assert_int_equal(t->v[1].dep, 220);
    assert_true(t->v[1].flags & TB_REQ_GAP);
    assert_int_equal(t->v[2].arr, 300);
    assert_int_equal(t->v[2].dep, 310);
    assert_false(t->v[2].flags & TB_REQ_GAP);
    /* The whole answer lost: nothing is invented. */
    query(&b, "select 4");
    feed(t, C2S, &b, 400, 0);
    pt_gap(t, S2C, 30, TB_TS_UNKNOWN);
    query(&b, "select 5");
    feed(t, C2S, &b, 500, 0);
    one_row(&b, "SELECT 1");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 510, 0);
    assert_int_equal(t->n, 4);
    assert_int_equal(t->v[3].arr, 500);
    assert_int_equal(t->v[3].dep, 510);
    /* The client's Sync in a hole: the batch still pairs with its answer. */
    parse(&b, "", "select 6");
    bind(&b, "", "");
    execute(&b, "");
    feed(t, C2S, &b, 600, 0);
    pt_gap(t, C2S, 0, TB_TS_UNKNOWN);
    MSG(&b, '1', "");
    MSG(&b, '2', "");
    MSG(&b, 'C', "SELECT 1\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 610, 0);
    query(&b, "select 7");
    feed(t, C2S, &b, 700, 0);
    MSG(&b, 'C', "SELECT 0\0");
    MSG(&b, 'Z', "I");
    feed(t, S2C, &b, 710, 0);
    assert_int_equal(t->n, 6);
    assert_int_equal(t->v[4].arr, 600);
    assert_int_equal(t->v[4].dep, 610);
    assert_true(t->v[4].flags & TB_REQ_GAP);
    assert_int_equal(t->v[5].arr, 700);
    assert_int_equal(t->v[5].dep, 710);
    assert_int_equal(t->ctr.parse_errors, 0);
    free(b.b);
    pt_free(t);
}

/* An answer's last message completed by a hole of unknown time (the fuzz
 * smoke's find): the departure is the last captured answer byte's time, not
 * the arrival, which is no server time at all. */
static void test_gap_ends_answer(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    query(&b, "select 1");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'Z', "I");
    pt_feed(t, S2C, b.b, 5, 150); /* ReadyForQuery's header only */
    clear(&b);
    pt_gap(t, S2C, 1, TB_TS_UNKNOWN); /* its status byte lost, no time */
    /* An ErrorResponse cut the same way, after a DataRow seen at 220. */
    query(&b, "select 2");
    feed(t, C2S, &b, 200, 0);
    one_row(&b, "SELECT 1");
    feed(t, S2C, &b, 220, 0);
    error(&b, "ERROR", "42P01");
    pt_feed(t, S2C, b.b, 7, 230);
    size_t rest = b.n - 7;
    clear(&b);
    pt_gap(t, S2C, rest, TB_TS_UNKNOWN);
    MSG(&b, 'Z', "I");
    pt_feed(t, S2C, b.b, 5, 240);
    clear(&b);
    pt_gap(t, S2C, 1, TB_TS_UNKNOWN);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 150);
    assert_true(t->v[0].flags & TB_REQ_GAP);
    assert_int_equal(t->v[1].arr, 200);
    assert_int_equal(t->v[1].dep, 240);
    assert_int_equal(t->ctr.parse_errors, 0);
    free(b.b);
    pt_free(t);
}

/* Close: an answer cut short is reported with NORESP; a request with no
 * answer byte is not. */
static void test_close(void **state)
{
    (void)state;
    struct pt *t = connected(0);
    struct buf b = {0};
    query(&b, "select 1");
    feed(t, C2S, &b, 100, 0);
    MSG(&b, 'T', "\0\0");
    feed(t, S2C, &b, 110, 0);
    pt_close(t, -1, 120);
    assert_int_equal(t->n, 1);
    assert_true(t->v[0].flags & TB_REQ_NORESP);
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[0].status, -1);
    pt_free(t);
    t = connected(0);
    query(&b, "select pg_sleep(100)");
    feed(t, C2S, &b, 100, 0);
    pt_close(t, 0, 120);
    assert_int_equal(t->n, 0);
    free(b.b);
    pt_free(t);
}

static void test_detect(void **state)
{
    (void)state;
    const struct tb_proto *p = &tb_proto_postgres;
    struct buf b = {0};
    bool cs = false;
    startup(&b);
    assert_int_equal(p->detect(b.b, b.n, C2S, &cs), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(p->detect(b.b, 3, C2S, &cs), TB_DETECT_MAYBE);
    clear(&b);
    code_only(&b, 80877103u);
    assert_int_equal(p->detect(b.b, b.n, C2S, &cs), TB_DETECT_YES);
    clear(&b);
    /* Mid-stream, either side, and a wrong guess of the server side. */
    parse(&b, "", "select $1");
    bind(&b, "", "");
    execute(&b, "");
    MSG(&b, 'S', "");
    cs = false;
    assert_int_equal(p->detect(b.b, b.n, S2C, &cs), TB_DETECT_YES);
    assert_true(cs);
    clear(&b);
    MSG(&b, '1', "");
    MSG(&b, '2', "");
    MSG(&b, 'C', "SELECT 1\0");
    MSG(&b, 'Z', "I");
    cs = true;
    assert_int_equal(p->detect(b.b, b.n, C2S, &cs), TB_DETECT_YES);
    assert_false(cs);
    clear(&b);
    /* Other protocols. */
    assert_int_equal(p->detect((const uint8_t *)"GET / HTTP/1.1\r\n", 16, C2S, &cs),
                     TB_DETECT_NO);
    static const char my[] = "\x21\0\0\0\x03SELECT 1 FROM DUAL a bit longer";
    assert_int_equal(p->detect((const uint8_t *)my, sizeof my - 1, C2S, &cs), TB_DETECT_NO);
    assert_int_equal(p->detect((const uint8_t *)"*1\r\n$4\r\nPING\r\n", 14, C2S, &cs),
                     TB_DETECT_NO);
    assert_int_equal(p->detect((const uint8_t *)"S\0\0\0\4", 5, C2S, &cs), TB_DETECT_NO);
    assert_ptr_equal(tb_proto_find("postgres"), p);
    assert_ptr_equal(tb_proto_find("postgresql"), p);
    free(b.b);
}

/* The fuzz driver's invariants (arrival ≤ departure, both inside the feed,
 * no crash under random splits, holes and closes) over a whole session. */
static void test_invariants(void **state)
{
    (void)state;
    struct buf c = {0}, s = {0};
    code_only(&c, 80877103u);
    put(&s, "N", 1);
    startup(&c);
    auth_ok(&s);
    query(&c, "select 1");
    one_row(&s, "SELECT 1");
    MSG(&s, 'Z', "I");
    parse(&c, "a", "select $1");
    bind(&c, "", "a");
    execute(&c, "");
    MSG(&c, 'S', "");
    MSG(&s, '1', "");
    MSG(&s, '2', "");
    one_row(&s, "SELECT 1");
    MSG(&s, 'Z', "I");
    query(&c, "COPY t FROM STDIN");
    MSG(&s, 'G', "\0\0\0");
    MSG(&c, 'd', "x\n");
    MSG(&c, 'c', "");
    MSG(&s, 'C', "COPY 1\0");
    MSG(&s, 'N', "SNOTICE\0\0");
    error(&s, "ERROR", "XX000");
    MSG(&s, 'Z', "I");
    for (int seed = 0; seed < 256; seed++) {
        struct buf in = {0};
        uint8_t hdr[3] = {(uint8_t)seed, (uint8_t)c.n, (uint8_t)(c.n >> 8)};
        put(&in, hdr, 3);
        put(&in, c.b, c.n);
        put(&in, s.b, s.n);
        pt_fuzz_drive(&tb_proto_postgres, in.b, in.n);
        free(in.b);
    }
    free(c.b);
    free(s.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_query),
        cmocka_unit_test(test_times_across_packets),
        cmocka_unit_test(test_extended),
        cmocka_unit_test(test_reparse),
        cmocka_unit_test(test_copy_small),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_async_messages),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_function_call_and_flush),
        cmocka_unit_test(test_encrypted_cancel_replication),
        cmocka_unit_test(test_midstream),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_gap_ends_answer),
        cmocka_unit_test(test_close),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
