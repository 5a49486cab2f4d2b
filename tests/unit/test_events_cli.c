/* SPDX-License-Identifier: MIT */
/* test_events_cli.c — `tbneck events import`, `list` and `report` against a
 * real store: pauses land with exact times, a re-import adds nothing, a grown
 * log adds only its new pauses, bad input gives the documented exit statuses,
 * and the report's counts and fractions equal ones worked out by hand for
 * hand-placed pauses and episodes (edges that only touch do not overlap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "catalog.h"
#include "cli.h"
#include "correlate.h"
#include "store.h"

#define T0 INT64_C(1795309323000000000) /* 2026-11-22T01:02:03Z */

static char dir[64], logpath[128], dbpath[128];

static const char young[] = "[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause "
                            "Young (Allocation Failure) 30M->10M(48M) 12.345ms\n";
static const char full[] = "[2026-11-22T01:02:04.000+0000][13.000s][info][gc] GC(13) Pause Full "
                           "(Allocation Failure) 44M->23M(46M) 75.732ms\n";
static const char later[] = "[2026-11-22T01:02:09.500+0000][18.500s][info][gc] GC(14) Pause "
                            "Young (Allocation Failure) 30M->12M(48M) 3.001ms\n";

static void write_log(const char *a, const char *b, const char *c)
{
    FILE *f = fopen(logpath, "w");
    assert_non_null(f);
    fputs(a, f);
    fputs("this line is not from a JVM\n", f);
    fputs(b, f);
    if (c)
        fputs(c, f);
    fclose(f);
}

static int import(const char *gc, const char *tier)
{
    char *argv[] = {"events", "import", "--gc", (char *)gc, "--tier", (char *)tier,
                    "--db", dbpath};
    return tb_cmd_events((int)TB_ARRAY_SIZE(argv), argv);
}

static size_t stored(struct tb_event **ev)
{
    struct tb_store *st;
    char err[256];
    assert_int_equal(tb_store_open(&st, dbpath, 0, err, sizeof err), 0);
    size_t n = 0;
    assert_int_equal(tb_store_get_events(st, "gc", INT64_MIN, INT64_MAX, ev, &n), 0);
    tb_store_close(st);
    return n;
}

static int by_start(const void *a, const void *b)
{
    const struct tb_event *x = a, *y = b;
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tb-events-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(logpath, sizeof logpath, "%s/gc.log", dir);
    snprintf(dbpath, sizeof dbpath, "%s/t.db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_import_exact_and_idempotent(void **state)
{
    (void)state;
    write_log(young, full, NULL);
    assert_int_equal(import(logpath, "tomcat"), TB_EXIT_OK);
    struct tb_event *ev = NULL;
    size_t n = stored(&ev);
    assert_int_equal(n, 2);
    qsort(ev, n, sizeof *ev, by_start);
    assert_int_equal(ev[0].start_ns, T0 + 456000000 - 12345000);
    assert_int_equal(ev[0].end_ns, T0 + 456000000);
    assert_int_equal(ev[1].start_ns, T0 + 1000000000 - 75732000);
    assert_int_equal(ev[1].end_ns, T0 + 1000000000);
    assert_string_equal(ev[1].host, "tomcat");
    assert_string_equal(ev[1].kind, "gc");
    free(ev);

    /* The same log again: nothing new. */
    assert_int_equal(import(logpath, "tomcat"), TB_EXIT_OK);
    assert_int_equal(stored(&ev), 2);
    free(ev);

    /* The log grew by one pause: only that one is added. */
    write_log(young, full, later);
    assert_int_equal(import(logpath, "tomcat"), TB_EXIT_OK);
    n = stored(&ev);
    assert_int_equal(n, 3);
    qsort(ev, n, sizeof *ev, by_start);
    assert_int_equal(ev[2].start_ns, T0 + 6500000000 - 3001000);
    free(ev);
}

static void test_list(void **state)
{
    (void)state;
    write_log(young, full, NULL);
    assert_int_equal(import(logpath, "tomcat"), TB_EXIT_OK);
    char outpath[160];
    snprintf(outpath, sizeof outpath, "%s/list.txt", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_non_null(freopen(outpath, "w", stdout));
    char *argv[] = {"events", "list", "--db", dbpath};
    int rc = tb_cmd_events((int)TB_ARRAY_SIZE(argv), argv);
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    assert_int_equal(rc, TB_EXIT_OK);
    FILE *f = fopen(outpath, "r");
    assert_non_null(f);
    char buf[4096];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = '\0';
    fclose(f);
    /* Start of the full collection, its duration, tier and detail. */
    assert_non_null(strstr(buf, "2026-11-22T01:02:03.924Z"));
    assert_non_null(strstr(buf, "75.732ms"));
    assert_non_null(strstr(buf, "tomcat"));
    assert_non_null(strstr(buf, "GC(13) Pause Full (Allocation Failure) 44M->23M(46M)"));
}

/* Runs `tbneck events report --format FORMAT` into buf; returns its exit status. */
static int run_report(char *buf, size_t cap, const char *format)
{
    char outpath[160];
    snprintf(outpath, sizeof outpath, "%s/report.txt", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_non_null(freopen(outpath, "w", stdout));
    char *argv[] = {"events", "report", "--tier", "tomcat", "--format", (char *)format,
                    "--db", dbpath};
    int rc = tb_cmd_events((int)TB_ARRAY_SIZE(argv), argv);
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    FILE *f = fopen(outpath, "r");
    assert_non_null(f);
    size_t len = fread(buf, 1, cap - 1, f);
    buf[len] = '\0';
    fclose(f);
    return rc;
}

/* The number after "key": in a JSON object printed on one line. */
static double json_num(const char *buf, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    if (!p)
        fail_msg("no %s in %s", key, buf);
    p += strlen(pat);
    if (!strncmp(p, "null", 4))
        return NAN;
    return strtod(p, NULL);
}

#define S INT64_C(1000000000)
#define MSEC INT64_C(1000000)

/* Tier "tomcat": one request every 10 ms for 10 s (windows [T0, T0 + 10 s) at
 * 50 ms). Its stored analysis is replaced by one with four hand-placed
 * episodes (the report reuses what is stored), then GC pauses are stored:
 *
 *   episodes (s after T0)     pauses (s after T0)
 *   E1 1.000-1.200 freeze     P1 1.050-1.130  80 ms  in E1
 *   E2 3.000-3.100 saturated  P2 2.000-2.010  10 ms  outside
 *   E3 6.000-6.500 freeze     P3 3.090-3.160  70 ms  overlaps E2's end
 *   E4 8.000-8.050 freeze     P4 5.000-5.060  60 ms  outside
 *                             P5 6.400-6.420  20 ms  in E3
 *                             P6 6.500-6.520  20 ms  starts where E3 ends: outside
 *                             P7 7.990-8.000  10 ms  ends where E4 starts: outside
 *                             P8 20.0-20.1    outside the capture: not counted
 *                             P9 1.050-1.130  another tier's: not counted
 *
 * By hand, with --min-pause 50ms (the default): 7 pauses, 270 ms in all,
 * longest 80 ms, GC ratio 270 ms / 10 s; long pauses P1, P3, P4 = 3, of which
 * in an episode P1, P3 = 2; pauses in an episode P1, P3, P5 = 3; episodes 4,
 * with a pause E1, E2, E3 = 3; freeze episodes E1, E3, E4 = 3, with a pause
 * E1, E3 = 2, with a long pause E1 = 1. The load is 0.5 in every window, so
 * the correlation is undetermined. */
static void test_report_by_hand(void **state)
{
    (void)state;
    struct tb_store *st;
    struct tb_catalog *cat;
    char err[256];
    uint32_t tier, server, cls;
    assert_int_equal(tb_store_open(&st, dbpath, TB_STORE_CREATE, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "tomcat", "http", &tier), 0);
    struct tb_addr a;
    assert_int_equal(tb_addr_parse("10.0.0.1:8080", &a), 0);
    assert_int_equal(tb_catalog_server(cat, tier, &a, &server), 0);
    assert_int_equal(tb_catalog_class(cat, tier, "GET /x", 6, &cls), 0);
    int64_t cap;
    struct tb_writer *w;
    assert_int_equal(tb_store_capture_begin(st, "by-hand", &cap), 0);
    assert_int_equal(tb_writer_start(&w, st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);
    for (int i = 0; i < 1000; i++) {
        struct tb_request r = {.arrival_ns = T0 + i * 10 * MSEC,
                               .departure_ns = T0 + i * 10 * MSEC + 5 * MSEC,
                               .conn = 1, .req_bytes = 100, .resp_bytes = 100,
                               .tier = tier, .server = server, .class_id = cls, .status = 200};
        assert_int_equal(tb_addr_parse("10.0.0.9:40000", &r.client), 0);
        assert_int_equal(tb_writer_request(w, &r), 0);
    }
    assert_int_equal(tb_writer_finish(w), 0);
    tb_store_close(st);
    tb_catalog_free(cat);

    /* A first report stores the analysis; it is replaced by the hand-made one. */
    static char buf[8192];
    assert_int_equal(run_report(buf, sizeof buf, "json"), TB_EXIT_OK);
    assert_int_equal(tb_store_open(&st, dbpath, 0, err, sizeof err), 0);
    struct tb_analysis an;
    struct tb_episode *old = NULL;
    size_t nold = 0;
    assert_int_equal(tb_store_get_analysis(st, tier, 0, 50 * MSEC, &an, &old, &nold), 0);
    free(old);
    assert_int_equal(an.from_ns, T0);
    assert_int_equal(an.to_ns, T0 + 10 * S);
    const struct tb_episode ep[] = {
        {T0 + 1000 * MSEC, T0 + 1200 * MSEC, 4, 3, 0, TB_EP_FREEZE},
        {T0 + 3000 * MSEC, T0 + 3100 * MSEC, 4, 3, 50, TB_EP_SATURATED},
        {T0 + 6000 * MSEC, T0 + 6500 * MSEC, 4, 3, 0, TB_EP_FREEZE},
        {T0 + 8000 * MSEC, T0 + 8050 * MSEC, 4, 3, 0, TB_EP_FREEZE},
    };
    int64_t id;
    assert_int_equal(tb_store_put_analysis(st, &an, ep, TB_ARRAY_SIZE(ep), &id), 0);
    static const struct { int64_t a, b; const char *host; } p[] = {
        {1050, 1130, "tomcat"}, {2000, 2010, "tomcat"}, {3090, 3160, "tomcat"},
        {5000, 5060, "tomcat"}, {6400, 6420, "tomcat"}, {6500, 6520, "tomcat"},
        {7990, 8000, "tomcat"}, {20000, 20100, "tomcat"}, {1050, 1130, "mysql"},
    };
    struct tb_event ev[TB_ARRAY_SIZE(p)];
    memset(ev, 0, sizeof ev);
    for (size_t i = 0; i < TB_ARRAY_SIZE(p); i++) {
        ev[i].start_ns = T0 + p[i].a * MSEC;
        ev[i].end_ns = T0 + p[i].b * MSEC;
        snprintf(ev[i].kind, sizeof ev[i].kind, "gc");
        snprintf(ev[i].host, sizeof ev[i].host, "%s", p[i].host);
        snprintf(ev[i].detail, sizeof ev[i].detail, "P%zu", i + 1);
    }
    assert_int_equal(tb_store_put_events(st, ev, TB_ARRAY_SIZE(ev)), 0);
    tb_store_close(st);

    assert_int_equal(run_report(buf, sizeof buf, "json"), TB_EXIT_OK);
    assert_int_equal((int64_t)json_num(buf, "from_ns"), T0);
    assert_int_equal((int64_t)json_num(buf, "to_ns"), T0 + 10 * S);
    assert_int_equal(json_num(buf, "windows"), 200);
    assert_int_equal(json_num(buf, "pauses"), 7);
    assert_int_equal((int64_t)json_num(buf, "pause_ns"), 270 * MSEC);
    assert_int_equal((int64_t)json_num(buf, "longest_pause_ns"), 80 * MSEC);
    assert_true(fabs(json_num(buf, "gc_ratio") - 0.027) < 1e-12);
    assert_int_equal(json_num(buf, "long_pauses"), 3);
    assert_int_equal(json_num(buf, "long_pauses_in_episodes"), 2);
    assert_true(fabs(json_num(buf, "long_pauses_in_episodes_fraction") - 2.0 / 3) < 1e-12);
    assert_int_equal(json_num(buf, "pauses_in_episodes"), 3);
    assert_true(fabs(json_num(buf, "pauses_in_episodes_fraction") - 3.0 / 7) < 1e-12);
    assert_int_equal(json_num(buf, "episodes"), 4);
    assert_int_equal(json_num(buf, "episodes_with_pause"), 3);
    assert_int_equal(json_num(buf, "freeze_episodes"), 3);
    assert_int_equal(json_num(buf, "freeze_with_pause"), 2);
    assert_true(fabs(json_num(buf, "freeze_with_pause_fraction") - 2.0 / 3) < 1e-12);
    assert_int_equal(json_num(buf, "freeze_with_long_pause"), 1);
    assert_true(fabs(json_num(buf, "freeze_with_long_pause_fraction") - 1.0 / 3) < 1e-12);
    assert_true(isnan(json_num(buf, "correlation")));

    /* The text form says the same. */
    assert_int_equal(run_report(buf, sizeof buf, "text"), TB_EXIT_OK);
    assert_non_null(strstr(buf, "pauses: 7, 270ms in all (2.70% of the time"));
    assert_non_null(strstr(buf, "pauses of 50ms or more: 3, inside a congestion episode: 2 (66.7%)"));
    assert_non_null(strstr(buf, "all pauses inside a congestion episode: 3 of 7 (42.9%)"));
    assert_non_null(strstr(buf, "episodes: 4 (3 freeze); freeze episodes overlapping a pause: 2 "
                                "(66.7%), a pause of 50ms or more: 1 (33.3%); all episodes "
                                "overlapping a pause: 3 (75.0%)"));
}

static void test_bad_input(void **state)
{
    (void)state;
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no-such-gc.log", dir);
    assert_int_equal(import(missing, "tomcat"), TB_EXIT_FAIL);
    char *no_tier[] = {"events", "import", "--gc", logpath, "--db", dbpath};
    assert_int_equal(tb_cmd_events((int)TB_ARRAY_SIZE(no_tier), no_tier), TB_EXIT_USAGE);
    char *bogus[] = {"events", "frobnicate"};
    assert_int_equal(tb_cmd_events((int)TB_ARRAY_SIZE(bogus), bogus), TB_EXIT_USAGE);
    char *bad_fmt[] = {"events", "report", "--tier", "x", "--format", "xml", "--db", dbpath};
    assert_int_equal(tb_cmd_events((int)TB_ARRAY_SIZE(bad_fmt), bad_fmt), TB_EXIT_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_import_exact_and_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_by_hand, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
