/* SPDX-License-Identifier: MIT */
/* test_common.c — durations, times, addresses and error strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Issue 16: the times the report prints, and times relative to now and to
 * the stored span. Expected values from Python's calendar.timegm. */
static void test_time_ref(void **state)
{
    (void)state;
    const int64_t S = TB_NS_PER_SEC;
    /* start 2023-11-14 22:13:20.5, end 60 s later, now 2024-02-29 00:00:00. */
    struct tb_time_ref ref = {.start_ns = INT64_C(1700000000) * S + S / 2,
                              .end_ns = INT64_C(1700000060) * S + S / 2,
                              .now_ns = INT64_C(1709164800) * S};
    int64_t ns = 0;
    assert_int_equal(tb_parse_time_ref("2023-11-14 22:13:25", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000005) * S);
    assert_int_equal(tb_parse_time_ref("2023-11-14 22:13:25.350", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000005350000000));
    assert_int_equal(tb_parse_time_ref("2023-11-14T22:13:25.000000001Z", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000005000000001));
    assert_int_equal(tb_parse_time_ref("2023-11-14 22:13:25 UTC", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000005) * S);
    assert_int_equal(tb_parse_time_ref("2024-02-29", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1709164800) * S);
    /* A time of day is the capture's day, or the next when it crosses midnight. */
    assert_int_equal(tb_parse_time_ref("22:13:25.350", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000005350000000));
    assert_int_equal(tb_parse_time_ref("00:30:00", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700008200) * S);
    assert_int_equal(tb_parse_time_ref("now", &ref, &ns), 0);
    assert_int_equal(ns, ref.now_ns);
    assert_int_equal(tb_parse_time_ref("now-5m", &ref, &ns), 0);
    assert_int_equal(ns, ref.now_ns - 300 * S);
    assert_int_equal(tb_parse_time_ref("now+1.5s", &ref, &ns), 0);
    assert_int_equal(ns, ref.now_ns + 3 * S / 2);
    assert_int_equal(tb_parse_time_ref("now-2d", &ref, &ns), 0);
    assert_int_equal(ns, ref.now_ns - 2 * 86400 * S);
    assert_int_equal(tb_parse_time_ref("start+10s", &ref, &ns), 0);
    assert_int_equal(ns, ref.start_ns + 10 * S);
    assert_int_equal(tb_parse_time_ref("+10", &ref, &ns), 0);
    assert_int_equal(ns, ref.start_ns + 10 * S);
    assert_int_equal(tb_parse_time_ref("end-250ms", &ref, &ns), 0);
    assert_int_equal(ns, ref.end_ns - 250 * TB_NS_PER_MS);
    assert_int_equal(tb_parse_time_ref("end", &ref, &ns), 0);
    assert_int_equal(ns, ref.end_ns);
    /* The older forms keep their meaning. */
    assert_int_equal(tb_parse_time_ref("1700000000.25", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000000250000000));
    assert_int_equal(tb_parse_time_ref("1700000000123456789", &ref, &ns), 0);
    assert_int_equal(ns, INT64_C(1700000000123456789));
    assert_true(tb_time_needs_span("+1s") && tb_time_needs_span("end-1s") &&
                tb_time_needs_span("22:13:25") && !tb_time_needs_span("now-5m") &&
                !tb_time_needs_span("2023-11-14 22:13:25") && !tb_time_needs_span(NULL));
    const char *bad[] = {"2023-02-30 00:00:00", "2023-11-14 24:00:00", "2023-11-14 22:61:00",
                         "2023-11-14 22:13", "2023-11-14 22:13:25+01:00", "2023-11-14 22:13:25.",
                         "now-", "now-5parsecs", "now5m", "nowish", "ending", "yesterday",
                         "25:00:00", "22:13:25 CET", "now+9999999999d", "2023-13-01", ""};
    for (size_t i = 0; i < TB_ARRAY_SIZE(bad); i++) {
        ns = 7;
        if (tb_parse_time_ref(bad[i], &ref, &ns) != TB_E_INVAL)
            fail_msg("'%s' was accepted as %lld", bad[i], (long long)ns);
    }
}

/* Issue 16: CSV numbers as short as they can be and still read back exact
 * (the expected strings are Python's repr of the same doubles). */
static void test_fmt_double(void **state)
{
    (void)state;
    char b[40];
    assert_string_equal(tb_fmt_double(0.05, b, sizeof b), "0.05");
    assert_string_equal(tb_fmt_double(480, b, sizeof b), "480");
    assert_string_equal(tb_fmt_double(0.1 + 0.2, b, sizeof b), "0.30000000000000004");
    assert_string_equal(tb_fmt_double(1.0 / 3, b, sizeof b), "0.3333333333333333");
    assert_string_equal(tb_fmt_double(1.8333333333333333, b, sizeof b), "1.8333333333333333");
    const double v[] = {0.69192447417763348, 4931957.8767705383, 1e-300, 123456789.123};
    for (size_t i = 0; i < TB_ARRAY_SIZE(v); i++)
        assert_true(strtod(tb_fmt_double(v[i], b, sizeof b), NULL) == v[i]);
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
        cmocka_unit_test(test_time_ref),
        cmocka_unit_test(test_fmt_double),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
