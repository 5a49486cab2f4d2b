/* SPDX-License-Identifier: MIT */
/* test_events_cli.c — `tbneck events import` and `list` against a real store:
 * pauses land with exact times, a re-import adds nothing, a grown log adds
 * only its new pauses, and bad input gives the documented exit statuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli.h"
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
