/* SPDX-License-Identifier: MIT */
/* test_common.c — durations, times, addresses and error strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "addr.h"
#include "tb.h"

static void test_duration(void **state)
{
    (void)state;
    int64_t ns;
    assert_int_equal(tb_parse_duration("50ms", TB_NS_PER_MS, &ns), 0);
    assert_int_equal(ns, 50000000);
    assert_int_equal(tb_parse_duration("1s", TB_NS_PER_MS, &ns), 0);
    assert_int_equal(ns, 1000000000);
    assert_int_equal(tb_parse_duration("1.5s", TB_NS_PER_MS, &ns), 0);
    assert_int_equal(ns, 1500000000);
    assert_int_equal(tb_parse_duration("20", TB_NS_PER_MS, &ns), 0);
    assert_int_equal(ns, 20000000);
    assert_int_equal(tb_parse_duration("250us", 1, &ns), 0);
    assert_int_equal(ns, 250000);
    assert_int_equal(tb_parse_duration("2m", 1, &ns), 0);
    assert_int_equal(ns, 120 * TB_NS_PER_SEC);
    assert_int_equal(tb_parse_duration("5parsecs", 1, &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_duration("-1s", 1, &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_duration("", 1, &ns), TB_E_INVAL);
}

static void test_time(void **state)
{
    (void)state;
    int64_t ns;
    assert_int_equal(tb_parse_time("1700000000123456789", 0, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000000123456789));
    assert_int_equal(tb_parse_time("1700000000.25", 0, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000000250000000));
    assert_int_equal(tb_parse_time("+10s", 1000, &ns), 0);
    assert_int_equal(ns, 10 * TB_NS_PER_SEC + 1000);
    assert_int_equal(tb_parse_time("yesterday", 0, &ns), TB_E_INVAL);
    /* An offset that would overflow 64 bits is refused, not wrapped. */
    assert_int_equal(tb_parse_time("+9000000000s", INT64_C(1700000000000000000), &ns),
                     TB_E_INVAL);
}

/* Issue 13, finding 9: windows of 1 ms to 1 h, the API's range, everywhere. */
static void test_window(void **state)
{
    (void)state;
    int64_t ns = 7;
    assert_int_equal(tb_parse_window("50ms", &ns), 0);
    assert_int_equal(ns, 50 * TB_NS_PER_MS);
    assert_int_equal(tb_parse_window("1ms", &ns), 0);
    assert_int_equal(ns, TB_NS_PER_MS);
    assert_int_equal(tb_parse_window("1h", &ns), 0);
    assert_int_equal(ns, 3600 * TB_NS_PER_SEC);
    assert_int_equal(tb_parse_window("20", &ns), 0);
    assert_int_equal(ns, 20 * TB_NS_PER_MS);
    ns = 7;
    assert_int_equal(tb_parse_window("999999h", &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_window("3600.001s", &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_window("999us", &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_window("0", &ns), TB_E_INVAL);
    assert_int_equal(tb_parse_window("nan", &ns), TB_E_INVAL);
    assert_int_equal(ns, 7);
}

static void test_addr(void **state)
{
    (void)state;
    struct tb_addr a, b;
    char buf[TB_ADDR_STRLEN];
    assert_int_equal(tb_addr_parse("10.0.0.1:3306", &a), 0);
    assert_string_equal(tb_addr_fmt(&a, buf, sizeof buf), "10.0.0.1:3306");
    assert_int_equal(a.family, 4);
    assert_int_equal(tb_addr_parse("[::1]:8080", &b), 0);
    assert_string_equal(tb_addr_fmt(&b, buf, sizeof buf), "[::1]:8080");
    assert_false(tb_addr_eq(&a, &b));
    assert_int_equal(tb_addr_parse("fe80::1", &b), 0);
    assert_int_equal(b.port, 0);
    assert_int_equal(tb_addr_parse("*:80", &b), 0);
    assert_int_equal(b.family, 0);
    assert_int_equal(b.port, 80);
    assert_int_equal(tb_addr_parse("10.0.0.300:1", &b), TB_E_INVAL);
    assert_int_equal(tb_addr_parse("10.0.0.1:70000", &b), TB_E_INVAL);
    assert_int_equal(tb_addr_parse("[::1", &b), TB_E_INVAL);
    struct tb_addr c;
    assert_int_equal(tb_addr_parse("10.0.0.1:3306", &c), 0);
    assert_true(tb_addr_eq(&a, &c));
    assert_true(tb_addr_hash(&a) == tb_addr_hash(&c));
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(tb_strerror(TB_E_NOMEM), "out of memory");
    assert_string_equal(tb_strerror(TB_E_DBVER), "database written by a newer tbneck");
    assert_string_equal(tb_strerror(12345), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_time),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
