/* SPDX-License-Identifier: MIT */
/* test_sim_proto.c — the simulator's PostgreSQL and Redis messages, byte by
 * byte against the protocol documents (expected bytes written out here by
 * hand), and their expected-class rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../sim/wire.h"

static struct sim_conf conf;
static struct sim_rng rng;
static struct sim_buf msg;
static char filler[4096];
static struct sim_buf sent[4]; /* login messages, in order */
static int nsent;
static int sent_dir[4];

static int64_t fake_send(void *model, void *conn, int dir, int64_t t)
{
    (void)model, (void)conn;
    assert_true(nsent < 4);
    sent[nsent].n = 0;
    sim_buf_put(&sent[nsent], msg.p, msg.n);
    sent_dir[nsent++] = dir;
    return t + 1000;
}

static struct sim_wire_ctx ctx(void)
{
    return (struct sim_wire_ctx){.c = &conf, .rng = &rng, .msg = &msg, .filler = filler,
                                 .filler_len = sizeof filler, .send = fake_send};
}

static void setup_conf(const char *text)
{
    char err[256] = "";
    sim_conf_defaults(&conf);
    assert_int_equal(sim_conf_parse(&conf, text, "proto", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), 0);
    sim_rng_seed(&rng, 1);
    memset(filler, 'x', sizeof filler);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The type letters of a run of PostgreSQL messages, each length checked to
 * end exactly at the next message. */
static void pg_types(const uint8_t *p, size_t n, char *types)
{
    size_t k = 0;
    while (n) {
        assert_true(n >= 5);
        uint32_t len = be32(p + 1);
        assert_true(len >= 4 && len + 1 <= n);
        types[k++] = (char)p[0];
        p += len + 1, n -= len + 1;
    }
    types[k] = 0;
}

/* The payload of the i-th message. */
static const uint8_t *pg_msg(const uint8_t *p, int i, uint32_t *len)
{
    while (i--)
        p += be32(p + 1) + 1;
    *len = be32(p + 1) - 4;
    return p + 5;
}

static const char pg_text[] = "[tier web]\n[tier db]\nproto = postgres\nport = 5432\n"
                              "[class S]\nsql = SELECT id, title FROM t WHERE id = {id}\n"
                              "rows = 2\nrow_bytes = 3\n"
                              "[class U]\nsql = UPDATE t SET n = n + 1 WHERE id IN ({ids})\n"
                              "[class E]\nsql = SELECT 1\nerror_rate = 1\n";

static void test_pg_login(void **state)
{
    (void)state;
    setup_conf(pg_text);
    struct sim_wire_ctx w = ctx();
    nsent = 0;
    struct sim_wire_req r = {.tier = 1, .conn_id = 7};
    assert_int_equal(sim_wire_postgres.login(&w, NULL, NULL, &r, 0), 82001);
    assert_int_equal(nsent, 2);
    assert_int_equal(sent_dir[0], 0);
    /* StartupMessage: length, 3.0, name\0value\0 pairs, \0. */
    static const char startup[] = "\x00\x00\x00\x41\x00\x03\x00\x00user\0rubbos\0database\0rubbos\0"
                                  "application_name\0tbneck-sim\0";
    assert_int_equal(sent[0].n, sizeof startup);
    assert_memory_equal(sent[0].p, startup, sizeof startup);
    char types[64];
    pg_types(sent[1].p, sent[1].n, types);
    assert_string_equal(types, "RSSSSSSKZ");
    static const uint8_t auth_ok[] = {'R', 0, 0, 0, 8, 0, 0, 0, 0};
    assert_memory_equal(sent[1].p, auth_ok, sizeof auth_ok);
    static const uint8_t rfq[] = {'Z', 0, 0, 0, 5, 'I'};
    assert_memory_equal(sent[1].p + sent[1].n - 6, rfq, 6);
}

static void test_pg_simple(void **state)
{
    (void)state;
    setup_conf(pg_text);
    struct sim_wire_ctx w = ctx();
    void *st = NULL;
    assert_int_equal(sim_wire_postgres.setup(&w, &st), 0);
    struct sim_wire_req r = {.tier = 1, .cls = 0};
    msg.n = 0;
    sim_wire_postgres.request(&w, st, &r);
    /* 'Q', length, "SELECT id, title FROM t WHERE id = <digits>\0" */
    assert_int_equal(msg.p[0], 'Q');
    assert_int_equal(be32(msg.p + 1), msg.n - 1);
    assert_memory_equal(msg.p + 5, "SELECT id, title FROM t WHERE id = ", 35);
    assert_int_equal(msg.p[msg.n - 1], 0);
    msg.n = 0;
    sim_wire_postgres.response(&w, st, &r, 0);
    char types[64];
    pg_types(msg.p, msg.n, types);
    assert_string_equal(types, "TDDCZ");
    assert_int_equal(r.status, 0);
    uint32_t len;
    const uint8_t *p = pg_msg(msg.p, 0, &len);
    /* RowDescription: 2 fields, "id" int4 (oid 23, length 4), "title" text (25, -1). */
    assert_int_equal(p[0] << 8 | p[1], 2);
    assert_string_equal((const char *)p + 2, "id");
    assert_int_equal(be32(p + 5 + 6), 23);
    assert_string_equal((const char *)p + 2 + 3 + 18, "title");
    assert_int_equal(be32(p + 2 + 3 + 18 + 6 + 6), 25);
    /* DataRow: 2 columns, the title 3 bytes of filler. */
    p = pg_msg(msg.p, 2, &len);
    assert_int_equal(p[0] << 8 | p[1], 2);
    uint32_t idlen = be32(p + 2);
    assert_int_equal(be32(p + 6 + idlen), 3);
    assert_memory_equal(p + 10 + idlen, "xxx", 3);
    p = pg_msg(msg.p, 3, &len);
    assert_string_equal((const char *)p, "SELECT 2");
    p = pg_msg(msg.p, 4, &len);
    assert_int_equal(len, 1);
    assert_int_equal(p[0], 'I');

    /* An error: ErrorResponse with SQLSTATE 55P03, then ReadyForQuery; the
     * status is the SQLSTATE in base 36 (55P03 = 8663763). */
    r.cls = 2;
    msg.n = 0;
    sim_wire_postgres.request(&w, st, &r);
    msg.n = 0;
    sim_wire_postgres.response(&w, st, &r, 0);
    pg_types(msg.p, msg.n, types);
    assert_string_equal(types, "EZ");
    p = pg_msg(msg.p, 0, &len);
    assert_non_null(memmem(p, len, "C55P03", 7));
    assert_int_equal(r.status, 8663763);
    free(st);
}

static void test_pg_extended(void **state)
{
    (void)state;
    setup_conf(pg_text);
    char err[256];
    assert_int_equal(sim_conf_set(&conf, "tier.db.mode=extended", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), 0);
    struct sim_wire_ctx w = ctx();
    void *st = NULL;
    assert_int_equal(sim_wire_postgres.setup(&w, &st), 0);
    struct sim_wire_req r = {.tier = 1, .cls = 1};
    msg.n = 0;
    sim_wire_postgres.request(&w, st, &r);
    char types[64];
    pg_types(msg.p, msg.n, types);
    assert_string_equal(types, "PBDES");
    uint32_t len;
    const uint8_t *p = pg_msg(msg.p, 0, &len);
    /* Parse: unnamed, the ids as $1, $2, ..., no parameter types. */
    assert_int_equal(p[0], 0);
    const char *sql = (const char *)p + 1;
    assert_memory_equal(sql, "UPDATE t SET n = n + 1 WHERE id IN ($1, $2", 42);
    int nparam = 0;
    for (const char *q = sql; (q = strchr(q, '$')) != NULL; q++)
        nparam++;
    assert_true(nparam >= 2 && nparam <= 6);
    /* Bind: unnamed portal and statement, no format codes, the parameters. */
    p = pg_msg(msg.p, 1, &len);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 0);
    assert_int_equal(p[2] << 8 | p[3], 0);
    assert_int_equal(p[4] << 8 | p[5], nparam);
    const uint8_t *v = p + 6;
    for (int i = 0; i < nparam; i++) {
        uint32_t n = be32(v);
        assert_true(n >= 1 && n <= 6);
        for (uint32_t k = 0; k < n; k++)
            assert_true(v[4 + k] >= '0' && v[4 + k] <= '9');
        v += 4 + n;
    }
    assert_int_equal(v[0] << 8 | v[1], 0);
    assert_ptr_equal(v + 2, p + len);
    static const uint8_t describe[] = {'D', 0, 0, 0, 6, 'P', 0}, execute[] = {'E', 0, 0, 0, 9, 0,
                                                                              0, 0, 0, 0},
                         sync[] = {'S', 0, 0, 0, 4};
    const uint8_t *d = msg.p + msg.n - sizeof sync - sizeof execute - sizeof describe;
    assert_memory_equal(d, describe, sizeof describe);
    assert_memory_equal(d + sizeof describe, execute, sizeof execute);
    assert_memory_equal(d + sizeof describe + sizeof execute, sync, sizeof sync);
    msg.n = 0;
    sim_wire_postgres.response(&w, st, &r, 0);
    pg_types(msg.p, msg.n, types);
    assert_string_equal(types, "12nCZ");
    p = pg_msg(msg.p, 3, &len);
    assert_string_equal((const char *)p, "UPDATE 1");
    r.cls = 0;
    msg.n = 0;
    sim_wire_postgres.request(&w, st, &r);
    msg.n = 0;
    sim_wire_postgres.response(&w, st, &r, 0);
    pg_types(msg.p, msg.n, types);
    assert_string_equal(types, "12TDDCZ");
    free(st);
}

static const char redis_text[] = "[tier web]\n[tier cache]\nproto = redis\nport = 6379\n"
                                 "[class S]\ncmd = SET k v\n"
                                 "[class M]\ncmd = mget a bb ccc\nrow_bytes = 2\n"
                                 "[class H]\ncmd = HGETALL h\nrows = 2\nrow_bytes = 1\n"
                                 "[class I]\ncmd = INCR n\n"
                                 "[class G]\ncmd = GET g\nresp_bytes = 5\n"
                                 "[class P]\ncmd = PING\nerror_rate = 1\n";

static void redis_exchange(int cls, const char *req, const char *resp, int status)
{
    struct sim_wire_ctx w = ctx();
    struct sim_wire_req r = {.tier = 1, .cls = cls};
    msg.n = 0;
    sim_wire_redis.request(&w, NULL, &r);
    assert_int_equal(msg.n, strlen(req));
    assert_memory_equal(msg.p, req, msg.n);
    msg.n = 0;
    sim_wire_redis.response(&w, NULL, &r, 0);
    if (resp[0] == ':') { /* an integer: any value */
        assert_int_equal(msg.p[0], ':');
        assert_memory_equal(msg.p + msg.n - 2, "\r\n", 2);
    } else {
        assert_int_equal(msg.n, strlen(resp));
        assert_memory_equal(msg.p, resp, msg.n);
    }
    assert_int_equal(r.status, status);
}

static void test_redis(void **state)
{
    (void)state;
    setup_conf(redis_text);
    assert_null(sim_wire_redis.login);
    redis_exchange(0, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "+OK\r\n", 0);
    redis_exchange(1, "*4\r\n$4\r\nmget\r\n$1\r\na\r\n$2\r\nbb\r\n$3\r\nccc\r\n",
                   "*3\r\n$2\r\nxx\r\n$2\r\nxx\r\n$2\r\nxx\r\n", 0);
    redis_exchange(2, "*2\r\n$7\r\nHGETALL\r\n$1\r\nh\r\n",
                   "*4\r\n$1\r\nx\r\n$1\r\nx\r\n$1\r\nx\r\n$1\r\nx\r\n", 0);
    redis_exchange(3, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n", ":", 0);
    redis_exchange(4, "*2\r\n$3\r\nGET\r\n$1\r\ng\r\n", "$5\r\nxxxxx\r\n", 0);
    redis_exchange(5, "*1\r\n$4\r\nPING\r\n", "-ERR value is not an integer or out of range\r\n",
                   1);
    /* Classes by the rule: the command in upper case. */
    assert_string_equal(conf.classes[1].expect[1], "MGET");
    assert_string_equal(conf.classes[2].expect[1], "HGETALL");
    char err[256] = "";
    sim_conf_defaults(&conf);
    assert_int_equal(sim_conf_parse(&conf, "[tier web]\n[tier c]\nproto = redis\nport = 6379\n"
                                           "[class X]\ncmd = config get maxmemory\n",
                                    "r", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "class 'X' at tier 'c': CONFIG names its class with a subcommand; "
                             "state it with class.c");
}

/* Templates and modes go where the protocol says. */
static void test_keys(void **state)
{
    (void)state;
    char err[256] = "";
    sim_conf_defaults(&conf);
    assert_true(sim_conf_parse(&conf, "[tier web]\n[tier c]\nproto = redis\nport = 6379\n"
                                      "[class X]\nsql.c = SELECT 1\n",
                               "k", err, sizeof err) < 0);
    assert_string_equal(err, "k:6: sql.c: tier 'c' speaks redis, whose requests take 'cmd'");
    sim_conf_defaults(&conf);
    assert_true(sim_conf_parse(&conf, "[tier web]\n[class X]\nsql = SELECT 1\n", "k", err,
                               sizeof err) < 0);
    assert_string_equal(err, "k:3: sql: no tier takes 'sql' templates");
    sim_conf_defaults(&conf);
    assert_int_equal(sim_conf_parse(&conf, "[tier web]\n[tier d]\nproto = mysql\nport = 3306\n"
                                           "mode = extended\n[class X]\n",
                                    "k", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "tier 'd': mode 'extended' is not one of mysql's (it has none)");
    sim_conf_defaults(&conf);
    assert_int_equal(sim_conf_parse(&conf, "[tier web]\n[tier d]\nmode = fast\nproto = postgres\n"
                                           "port = 5432\n[class X]\n",
                                    "k", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), TB_E_INVAL);
    assert_string_equal(err, "tier 'd': mode 'fast' is not one of postgres's (simple, extended)");
    /* Defaults per protocol. */
    sim_conf_defaults(&conf);
    assert_int_equal(sim_conf_parse(&conf, "[tier web]\n[tier c]\nproto = redis\nport = 6379\n"
                                           "[class Y]\n",
                                    "k", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&conf, err, sizeof err), 0);
    assert_string_equal(conf.classes[0].tmpl[0], "/Y/{id}");
    assert_string_equal(conf.classes[0].tmpl[1], "GET story:{id}");
    assert_string_equal(conf.tiers[1].wire_name, "redis");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_login),  cmocka_unit_test(test_pg_simple),
        cmocka_unit_test(test_pg_extended), cmocka_unit_test(test_redis),
        cmocka_unit_test(test_keys),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sim_buf_free(&msg);
    for (int i = 0; i < 4; i++)
        sim_buf_free(&sent[i]);
    return rc;
}
