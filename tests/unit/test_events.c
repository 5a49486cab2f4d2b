/* SPDX-License-Identifier: MIT */
/* test_events.c — the JVM GC log parser behind `tbneck events import`: exact
 * pause start and end on real line shapes of JDK 17 and JDK 8, and what is
 * ignored or rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "events.h"

/* 2026-11-22T01:02:03Z */
#define T0 INT64_C(1795309323000000000)

static int parse(const char *line, struct tb_event *ev, const char **why)
{
    return tb_gc_parse_line(line, strlen(line), ev, why);
}

static void test_unified_young(void **state)
{
    (void)state;
    struct tb_event ev;
    /* A line as written by -Xlog:gc:FILE:utctime,uptime,level,tags (JDK 17). */
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young "
                           "(Allocation Failure) 30M->10M(48M) 12.345ms\n", &ev, NULL),
                     TB_GC_PAUSE);
    /* Logged when the pause ends: end = the stamp, start = end - duration. */
    assert_int_equal(ev.end_ns, T0 + 456000000);
    assert_int_equal(ev.start_ns, T0 + 456000000 - 12345000);
    assert_string_equal(ev.kind, "gc");
    assert_string_equal(ev.detail, "GC(12) Pause Young (Allocation Failure) 30M->10M(48M)");
}

static void test_unified_full_and_zone(void **state)
{
    (void)state;
    struct tb_event ev;
    assert_int_equal(parse("[2026-11-22T01:02:04.000+0000][13.000s][info][gc] GC(13) Pause Full "
                           "(Allocation Failure) 44M->23M(46M) 75.732ms", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.end_ns, T0 + 1000000000);
    assert_int_equal(ev.start_ns, T0 + 1000000000 - 75732000);
    /* The `time` decoration is local time with its offset: the same instant. */
    assert_int_equal(parse("[2026-11-22T02:02:03.456+0100][12.345s][info][gc] GC(12) Pause Young "
                           "(Allocation Failure) 30M->10M(48M) 12.345ms\r\n", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.end_ns, T0 + 456000000);
    assert_int_equal(ev.start_ns, T0 + 456000000 - 12345000);
    /* ZGC: its (sub-millisecond) pauses are [gc,phases] lines. */
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][0.246s][info][gc,phases   ] GC(0) "
                           "Pause Mark Start 0.010ms", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.end_ns - ev.start_ns, 10000);
    assert_string_equal(ev.detail, "GC(0) Pause Mark Start");
    /* Decorations utctime,tags only (no level): [gc] still tells the pause line
     * from the [gc,start] line of the same collection. */
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][gc] GC(12) Pause Young (Allocation "
                           "Failure) 30M->10M(48M) 12.345ms", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.start_ns, T0 + 456000000 - 12345000);
    assert_int_equal(parse("[2026-11-22T01:02:03.444+0000][gc,start] GC(12) Pause Young "
                           "(Allocation Failure) 1ms", &ev, NULL),
                     TB_GC_OTHER);
    /* G1's wording, a microsecond-precise duration, padded level and tags. */
    assert_int_equal(parse("[2026-11-21T23:59:59.999-01:30][0.5s][info ][gc   ] GC(0) Pause Young "
                           "(Normal) (G1 Evacuation Pause) 24M->3M(256M) 0.001ms", &ev, NULL),
                     TB_GC_PAUSE);
    /* 23:59:59.999 at UTC-01:30 is 01:29:59.999 UTC, 27 min 56.999 s after T0. */
    assert_int_equal(ev.end_ns, T0 + INT64_C(1676999000000));
    assert_int_equal(ev.end_ns - ev.start_ns, 1000);
}

static void test_unified_other_lines(void **state)
{
    (void)state;
    struct tb_event ev;
    /* The start line of the same pause, heap details and start-up lines. */
    assert_int_equal(parse("[2026-11-22T01:02:03.444+0000][12.333s][info][gc,start] GC(12) Pause "
                           "Young (Allocation Failure)", &ev, NULL),
                     TB_GC_OTHER);
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][12.345s][info][gc,heap] GC(12) "
                           "DefNew: 13M(14M)->1M(14M) Eden: 12M(12M)->0M(12M)", &ev, NULL),
                     TB_GC_OTHER);
    assert_int_equal(parse("[2026-11-22T01:02:00.100+0000][0.010s][info][gc] Using Serial", &ev,
                           NULL),
                     TB_GC_OTHER);
    assert_int_equal(parse("", &ev, NULL), TB_GC_OTHER);
    assert_int_equal(parse("   \r\n", &ev, NULL), TB_GC_OTHER);
}

static void test_unified_bad(void **state)
{
    (void)state;
    struct tb_event ev;
    const char *why = NULL;
    /* Without a wall-clock decoration the pause cannot be placed on the capture's clock. */
    assert_int_equal(parse("[12.345s][info][gc] GC(12) Pause Young (Allocation Failure) "
                           "30M->10M(48M) 12.345ms", &ev, &why),
                     TB_E_BADFMT);
    assert_non_null(strstr(why, "wall-clock"));
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young "
                           "(Allocation Failure) 30M->10M(48M) 1.2.3ms", &ev, &why),
                     TB_E_BADFMT);
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young "
                           "(Allocation Failure) 30M->10M(48M)", &ev, &why),
                     TB_E_BADFMT);
    assert_int_equal(parse("[2026-11-22T01:02:03.456+0000][12.3", &ev, &why), TB_E_BADFMT);
    assert_non_null(strstr(why, "unterminated"));
    assert_int_equal(parse("hello world", &ev, &why), TB_E_BADFMT);
    /* Year 5210 overflows int64 ns (fuzz_gclog found it: signed overflow). */
    assert_int_equal(parse("[5210-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young "
                           "(Allocation Failure) 30M->10M(48M) 12.345ms", &ev, &why),
                     TB_E_BADFMT);
    assert_int_equal(parse("[2262-01-01T00:00:00.000+0000][1s][info][gc] GC(1) Pause Young "
                           "1M->1M(2M) 1ms", &ev, &why),
                     TB_E_BADFMT);
    /* Month 13 is not a time. */
    assert_int_equal(parse("2026-13-22T01:02:03.456+0000: 12.345: [GC (Allocation Failure) "
                           "4416K->1680K(15872K), 0.0052345 secs]", &ev, &why),
                     TB_E_BADFMT);
}

static void test_jdk8(void **state)
{
    (void)state;
    struct tb_event ev;
    /* -XX:+PrintGCDetails -XX:+PrintGCDateStamps, Serial: the stamp is the start and
     * the outer duration (not DefNew's, not [Times: real=]) is the pause. */
    assert_int_equal(parse("2026-11-22T01:02:03.456+0000: 12.345: [GC (Allocation Failure) "
                           "2026-11-22T01:02:03.456+0000: 12.345: [DefNew: 4416K->512K(4928K), "
                           "0.0051230 secs] 4416K->1680K(15872K), 0.0052345 secs] [Times: "
                           "user=0.01 sys=0.00, real=0.01 secs]", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.start_ns, T0 + 456000000);
    assert_int_equal(ev.end_ns, T0 + 456000000 + 5234500);
    assert_string_equal(ev.detail, "GC (Allocation Failure)");
    assert_int_equal(parse("2026-11-22T01:02:05.100+0000: 14.000: [Full GC (Ergonomics) "
                           "[PSYoungGen: 512K->0K(2560K)] [ParOldGen: 6000K->5000K(7168K)] "
                           "6512K->5000K(9728K), [Metaspace: 3000K->3000K(1056768K)], 0.0456789 "
                           "secs] [Times: user=0.05 sys=0.00, real=0.05 secs]", &ev, NULL),
                     TB_GC_PAUSE);
    assert_int_equal(ev.start_ns, T0 + 2100000000);
    assert_int_equal(ev.end_ns, T0 + 2100000000 + 45678900);
    assert_string_equal(ev.detail, "Full GC (Ergonomics)");
    assert_int_equal(parse("OpenJDK 64-Bit Server VM (25.412-b08) for linux-amd64 JRE", &ev, NULL),
                     TB_GC_OTHER);
    assert_int_equal(parse("2026-11-22T01:02:05.200+0000: 14.100: Total time for which "
                           "application threads were stopped: 0.0001 seconds", &ev, NULL),
                     TB_GC_OTHER);
    assert_int_equal(parse(" def new generation   total 4928K, used 1000K", &ev, NULL),
                     TB_GC_OTHER);
}

static void test_file(void **state)
{
    (void)state;
    static const char log[] =
        "[2026-11-22T01:02:00.100+0000][0.010s][info][gc] Using Serial\n"
        "[2026-11-22T01:02:03.444+0000][12.333s][info][gc,start] GC(12) Pause Young (Allocation "
        "Failure)\n"
        "[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young (Allocation "
        "Failure) 30M->10M(48M) 12.345ms\n"
        "garbage in the middle\n"
        "[2026-11-22T01:02:04.000+0000][13.000s][info][gc] GC(13) Pause Full (Allocation "
        "Failure) 44M->23M(46M) 75.732ms\n"
        "[2026-11-22T01:02:04.5"; /* cut off by a crash: last line has no newline */
    FILE *f = tmpfile();
    assert_non_null(f);
    fputs(log, f);
    rewind(f);
    struct tb_event *ev = NULL;
    size_t n = 0;
    struct tb_gc_summary sum;
    assert_int_equal(tb_gc_parse_file(f, "http-8080", &ev, &n, &sum), 0);
    fclose(f);
    assert_int_equal(n, 2);
    assert_int_equal(sum.lines, 6);
    assert_int_equal(sum.pauses, 2);
    assert_int_equal(sum.other, 2);
    assert_int_equal(sum.bad, 2);
    assert_int_equal(sum.first_bad, 4);
    assert_string_equal(sum.first_why, "not a JVM GC log line");
    assert_string_equal(ev[0].host, "http-8080");
    assert_int_equal(ev[0].start_ns, T0 + 456000000 - 12345000);
    assert_int_equal(ev[1].start_ns, T0 + 1000000000 - 75732000);
    assert_int_equal(ev[1].end_ns, T0 + 1000000000);
    free(ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unified_young), cmocka_unit_test(test_unified_full_and_zone),
        cmocka_unit_test(test_unified_other_lines), cmocka_unit_test(test_unified_bad),
        cmocka_unit_test(test_jdk8), cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
