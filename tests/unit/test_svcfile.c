/* SPDX-License-Identifier: MIT */
/* test_svcfile.c — the --service-times file parser (analysis/svcfile.c):
 * comments, CRLF, tabs inside a class, bare milliseconds, and the errors
 * naming their line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "analyze.h"

#define MS TB_NS_PER_MS
#define US INT64_C(1000)

static void test_file(void **state)
{
    (void)state;
    const char *txt = "# service times\r\n"
                      "\n"
                      "SELECT * FROM t WHERE id = ?\t30ms\r\n"
                      "  # indented comment\n"
                      "GET /a\twith\ttabs\t250us\n"
                      "POST /b\t12\n";
    struct tb_service_line *l;
    size_t n;
    char err[128];
    assert_int_equal(tb_service_file_parse(txt, strlen(txt), &l, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(l[0].class_text, "SELECT * FROM t WHERE id = ?");
    assert_int_equal(l[0].service_ns, 30 * MS);
    assert_int_equal(l[0].line, 3);
    assert_string_equal(l[1].class_text, "GET /a\twith\ttabs"); /* the last tab separates */
    assert_int_equal(l[1].service_ns, 250 * US);
    assert_string_equal(l[2].class_text, "POST /b");
    assert_int_equal(l[2].service_ns, 12 * MS); /* bare number: ms */
    assert_int_equal(l[2].line, 6);
    tb_service_file_free(l, n);

    const char *bad1 = "GET /a\t30ms\nno tab here\n";
    assert_int_equal(tb_service_file_parse(bad1, strlen(bad1), &l, &n, err, sizeof err),
                     TB_E_BADFMT);
    assert_string_equal(err, "line 2: expected CLASS<TAB>DURATION");
    const char *bad2 = "GET /a\tfast\n";
    assert_int_equal(tb_service_file_parse(bad2, strlen(bad2), &l, &n, err, sizeof err),
                     TB_E_BADFMT);
    assert_string_equal(err, "line 1: bad duration \"fast\"");
    const char *bad3 = "GET /a\t0ms\n";
    assert_int_equal(tb_service_file_parse(bad3, strlen(bad3), &l, &n, err, sizeof err),
                     TB_E_BADFMT);
    assert_int_equal(tb_service_file_parse("", 0, &l, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    tb_service_file_free(l, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
