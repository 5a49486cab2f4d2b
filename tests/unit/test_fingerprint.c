/* SPDX-License-Identifier: MIT */
/* test_fingerprint.c — request classes: HTTP paths with ids folded, SQL
 * fingerprints with literals folded, lists collapsed, and output capping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto.h"

static void http(const char *m, const char *t, const char *want)
{
    char out[256];
    size_t n = tb_fp_http(m, strlen(m), t, strlen(t), out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void sql(const char *q, const char *want)
{
    char out[512];
    size_t n = tb_fp_sql(q, strlen(q), out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void test_http(void **state)
{
    (void)state;
    http("GET", "/story/12345", "GET /story/{id}");
    http("GET", "/story/12345?page=2#top", "GET /story/{id}");
    http("POST", "/api/v2/users/550e8400-e29b-41d4-a716-446655440000/avatar",
         "POST /api/v2/users/{id}/avatar");
    http("GET", "/obj/deadbeef01", "GET /obj/{id}");
    http("GET", "/obj/deadbeef", "GET /obj/deadbeef");  /* hex but no digit: a word */
    http("GET", "/obj/abc123", "GET /obj/abc123");      /* too short for a hash */
    http("GET", "/static/9f86d081884c7d65.css", "GET /static/{id}.css");
    http("GET", "http://example.com:8080/a/7?x", "GET /a/{id}");
    http("GET", "http://example.com", "GET /");
    http("OPTIONS", "*", "OPTIONS *");
    http("CONNECT", "example.com:443", "CONNECT example.com:443");
    http("GET", "/", "GET /");
    http("GET", "/a//b/", "GET /a//b/");
    http("GET", "?x=1", "GET ");
}

static void test_http_cap(void **state)
{
    (void)state;
    char out[10];
    size_t n = tb_fp_http("GET", 3, "/abcdefghijkl", 13, out, sizeof out);
    assert_int_equal(n, 9);
    assert_string_equal(out, "GET /abcd");
    assert_int_equal(tb_fp_http("GET", 3, "/", 1, out, 0), 0);
}

static void test_sql(void **state)
{
    (void)state;
    sql("SELECT c FROM sbtest1 WHERE id=42", "select c from sbtest1 where id=?");
    sql("SELECT  *\n FROM t\tWHERE name = 'O''Brien' AND x = \"a\\\"b\"",
        "select * from t where name = ? and x = ?");
    sql("select * from t where id IN (1, 2, 3) and y in ('a','b')",
        "select * from t where id in (?+) and y in (?+)");
    sql("SELECT * FROM t WHERE id IN(4)", "select * from t where id in (?+)");
    sql("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'),(3,'z')",
        "insert into t (a, b) values (?+)");
    sql("INSERT INTO t VALUES (NOW(), 1)", "insert into t values (now(), ?)");
    sql("select -1, +2.5e-3, 0x1F, X'0a', b'101', 1.5, .5 from dual",
        "select ?, ?, ?, ?, ?, ?, ? from dual");
    sql("select a-1 from t", "select a-? from t");
    sql("select t1.c2 from t1", "select t1.c2 from t1");
    sql("SELECT /* hint */ 1 -- trailing\n, 2 # mysql comment\n;",
        "select ?, ?");
    sql("select `Weird Col`, @@session.sql_mode, @v from `T`",
        "select `Weird Col`, @@session.sql_mode, @v from `T`");
    sql("SELECT * FROM t WHERE a IS NULL AND b = TRUE",
        "select * from t where a is null and b = true");
    sql("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
        "select c from sbtest1 where id between ? and ? order by c");
    sql("COMMIT", "commit");
    sql("  ", "");
    sql("select 'unterminated", "select ?");
    /* Control bytes, NUL included, are replaced: the class is a C string. */
    char out[32];
    assert_int_equal(tb_fp_sql("*\x01\x00\xc1", 4, out, sizeof out), 4);
    assert_string_equal(out, "*??\xc1");
    assert_int_equal(tb_fp_http("GET", 3, "/a\0" "b", 4, out, sizeof out), 8);
    assert_string_equal(out, "GET /a?b");
}

static void test_sql_cap(void **state)
{
    (void)state;
    char out[16];
    size_t n = tb_fp_sql("SELECT column_a FROM table_b", 28, out, sizeof out);
    assert_int_equal(n, 15);
    assert_string_equal(out, "select column_a");
    char big[3000];
    memset(big, '9', sizeof big);
    memcpy(big, "select ", 7);
    char o2[64];
    assert_int_equal(tb_fp_sql(big, sizeof big, o2, sizeof o2), 8);
    assert_string_equal(o2, "select ?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_http_cap),
        cmocka_unit_test(test_sql),
        cmocka_unit_test(test_sql_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
