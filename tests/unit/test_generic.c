/* SPDX-License-Identifier: MIT */
/* test_generic.c — the turn-taking parser: runs of client bytes paired with
 * the following runs of server bytes, banners, holes and the close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto-test.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

static void test_alternation(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_generic, false);
    pt_str(t, S2C, "220 banner\r\n", 5);     /* answers nothing */
    pt_str(t, C2S, "HELO a\r\n", 10);
    pt_str(t, C2S, "MORE\r\n", 11);
    pt_str(t, S2C, "250 ok\r\n", 20);
    pt_str(t, S2C, "250 more\r\n", 25);
    assert_int_equal(t->n, 0); /* the server may still be talking */
    pt_str(t, C2S, "QUIT\r\n", 30);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].arr, 10);
    assert_int_equal(t->v[0].dep, 25);
    assert_int_equal(t->v[0].rq, 14);
    assert_int_equal(t->v[0].rs, 18);
    assert_int_equal(t->v[0].status, -1);
    assert_int_equal(t->v[0].flags, 0);
    assert_string_equal(t->v[0].cls, "generic");
    pt_str(t, S2C, "221 bye\r\n", 40);
    pt_close(t, S2C, 50);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->v[1].arr, 30);
    assert_int_equal(t->v[1].dep, 40);
    assert_int_equal(t->v[1].rq, 6);
    assert_int_equal(t->v[1].rs, 9);
    pt_free(t);
}

static void test_gap_and_unanswered(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_generic, false);
    pt_str(t, C2S, "req", 1);
    pt_gap(t, C2S, 100, 2);
    pt_str(t, S2C, "resp", 3);
    pt_gap(t, S2C, 50, 4);
    pt_str(t, C2S, "next", 5);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].arr, 1);
    assert_int_equal(t->v[0].dep, 4);
    assert_int_equal(t->v[0].rq, 103);
    assert_int_equal(t->v[0].rs, 54);
    assert_int_equal(t->v[0].flags, TB_REQ_GAP);
    /* "next" never got an answer: nothing to emit at close. */
    pt_close(t, -1, 9);
    assert_int_equal(t->n, 1);
    pt_free(t);
}

static void test_detect(void **state)
{
    (void)state;
    bool cs = false;
    assert_int_equal(tb_proto_generic.detect((const uint8_t *)"x", 1, TB_DIR_C2S, &cs),
                     TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(tb_proto_generic.detect((const uint8_t *)"x", 1, TB_DIR_S2C, &cs),
                     TB_DETECT_YES);
    assert_false(cs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alternation),
        cmocka_unit_test(test_gap_and_unanswered),
        cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
