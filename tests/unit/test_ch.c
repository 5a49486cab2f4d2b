/* SPDX-License-Identifier: MIT */
/* test_ch.c — store URLs (sqlite:, clickhouse:// with shards and a cluster), the FNV-1a
 * identity hash against the published test vectors, and which tables are a sensor's staging
 * tables (the ones a capture drops when it starts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ch.h"
#include "ch-int.h"

static void test_url_ok(void **state)
{
    (void)state;
    struct tb_store_url u;
    char err[256];
    assert_int_equal(tb_store_url_parse("sqlite:/tmp/x.db", &u, err, sizeof err), 0);
    assert_int_equal(u.kind, TB_STORE_KIND_SQLITE);
    assert_string_equal(u.path, "/tmp/x.db");

    assert_int_equal(tb_store_url_parse("clickhouse://127.0.0.1:8123/tb", &u, err, sizeof err), 0);
    assert_int_equal(u.kind, TB_STORE_KIND_CLICKHOUSE);
    assert_int_equal(u.nep, 1);
    assert_string_equal(u.ep[0].host, "127.0.0.1");
    assert_int_equal(u.ep[0].port, 8123);
    assert_string_equal(u.db, "tb");
    assert_string_equal(u.cluster, "");

    assert_int_equal(tb_store_url_parse("clickhouse://[::1]:9/d_1", &u, err, sizeof err), 0);
    assert_string_equal(u.ep[0].host, "::1");
    assert_int_equal(u.ep[0].port, 9);
    assert_string_equal(u.db, "d_1");

    assert_int_equal(tb_store_url_parse("clickhouse://ch1:8123,[::1]:8124,ch3:1/tb?cluster=tb2",
                                        &u, err, sizeof err), 0);
    assert_int_equal(u.nep, 3);
    assert_string_equal(u.ep[0].host, "ch1");
    assert_string_equal(u.ep[1].host, "::1");
    assert_int_equal(u.ep[1].port, 8124);
    assert_string_equal(u.ep[2].host, "ch3");
    assert_int_equal(u.ep[2].port, 1);
    assert_string_equal(u.cluster, "tb2");
}

static void test_url_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "sqlite:",                        /* no file */
        "mysql://h:1/db",                 /* scheme */
        "tbneck.db",                      /* no scheme */
        "clickhouse://h/db",              /* no port */
        "clickhouse://h:0/db",            /* port 0 */
        "clickhouse://h:65536/db",        /* port too large */
        "clickhouse://h:1",               /* no database */
        "clickhouse://h:1/",              /* empty database */
        "clickhouse://h:1/d-b",           /* not an identifier */
        "clickhouse://h:1/db?shards=2",   /* unknown option */
        "clickhouse://h:1/db?cluster=",   /* empty cluster */
        "clickhouse://h:1/db?cluster=a;b", /* not an identifier */
        "clickhouse://a:1,b:2/db",        /* shards without a cluster */
        "clickhouse://[::1/db",           /* unclosed bracket */
        "clickhouse://:1/db",             /* no host */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct tb_store_url u;
        char err[256] = "";
        int rc = tb_store_url_parse(bad[i], &u, err, sizeof err);
        if (rc != TB_E_INVAL)
            fail_msg("%s: accepted (rc %d)", bad[i], rc);
        /* One line naming the URL. */
        assert_non_null(strstr(err, bad[i]));
        assert_null(strchr(err, '\n'));
    }
}

/* The FNV-1a 64 test vectors of the algorithm's authors (isthe.com/chongo/tech/comp/fnv). */
static void test_fnv1a(void **state)
{
    (void)state;
    assert_true(tb_ch_fnv1a("", 0, TB_CH_FNV_SEED) == 0xcbf29ce484222325ull);
    assert_true(tb_ch_fnv1a("a", 1, TB_CH_FNV_SEED) == 0xaf63dc4c8601ec8cull);
    assert_true(tb_ch_fnv1a("foobar", 6, TB_CH_FNV_SEED) == 0x85944171f73967e8ull);
    /* Chained: hashing "foo" then "bar" from its result is hashing "foobar". */
    assert_true(tb_ch_fnv1a("bar", 3, tb_ch_fnv1a("foo", 3, TB_CH_FNV_SEED)) ==
                0x85944171f73967e8ull);
}

/* A capture drops, when it starts, the staging tables an earlier capture of
 * its sensor left: exactly "tbneck-SENSOR-START-NO", never another
 * sensor's, even one whose name extends this one's or holds '-'. */
static void test_staging_names(void **state)
{
    (void)state;
    assert_true(tb__ch_is_staging("tbneck-web-1764380000123456789-7", "web"));
    assert_true(tb__ch_is_staging("tbneck-web-switch-1-1", "web-switch"));
    assert_true(tb__ch_is_staging("tbneck-a.b:c_d-12-3", "a.b:c_d"));
    static const char *const not_web[] = {
        "tbneck-web-switch-1-1", /* sensor web-switch */
        "tbneck-we-1-1",         /* sensor we */
        "tbneck-web-1-",         /* no batch number */
        "tbneck-web--1",         /* no start */
        "tbneck-web-1-1x",       /* not digits */
        "tbneck-web-1",          /* one number */
        "tbneck-web",
        "xbneck-web-1-1",
        "requests",
        "",
    };
    for (size_t i = 0; i < sizeof not_web / sizeof not_web[0]; i++)
        if (tb__ch_is_staging(not_web[i], "web"))
            fail_msg("%s: taken as sensor web's staging table", not_web[i]);
    assert_false(tb__ch_is_staging("tbneck-web-1-1", "web-switch"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_ok),
        cmocka_unit_test(test_url_bad),
        cmocka_unit_test(test_fnv1a),
        cmocka_unit_test(test_staging_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
