/* SPDX-License-Identifier: MIT */
/* test_reasm.c — TCP reassembly of one direction: order, holes, overlaps,
 * retransmissions, wraparound, the buffer cap, snaplen cuts and FIN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "reasm-int.h"

/* What the reassembler delivered, as text: data bytes verbatim, a gap as
 * "<gap N>", and the timestamp of every event. */
struct rec {
    char out[4096];
    size_t len;
    int64_t ts[64];
    size_t nts;
    struct tb_reasm_ctr ctr;
    struct tb_reasm_env env;
    struct tb_reasm r;
};

static void rec_data(void *ud, int dir, const uint8_t *p, size_t n, int64_t ts)
{
    struct rec *c = ud;
    assert_int_equal(dir, 1);
    assert_true(c->len + n < sizeof c->out);
    memcpy(c->out + c->len, p, n);
    c->len += n;
    c->out[c->len] = '\0';
    c->ts[c->nts++] = ts;
}

static void rec_gap(void *ud, int dir, uint64_t len, int64_t ts)
{
    struct rec *c = ud;
    assert_int_equal(dir, 1);
    c->len += (size_t)snprintf(c->out + c->len, sizeof c->out - c->len, "<gap %llu>",
                               (unsigned long long)len);
    c->ts[c->nts++] = ts;
}

static void rec_init(struct rec *c, size_t max_ooo, uint32_t isn)
{
    memset(c, 0, sizeof *c);
    c->env.data = rec_data;
    c->env.gap = rec_gap;
    c->env.ud = c;
    c->env.ctr = &c->ctr;
    c->env.max_ooo = max_ooo;
    tb_reasm_init(&c->r, 1);
    tb_reasm_start(&c->r, isn);
}

static void seg(struct rec *c, uint32_t seq, const char *s, int64_t ts)
{
    assert_int_equal(tb_reasm_segment(&c->r, &c->env, seq, (const uint8_t *)s,
                                      (uint32_t)strlen(s), 0, false, ts),
                     0);
}

static void test_in_order(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 1000);
    seg(&c, 1000, "hello ", 1);
    seg(&c, 1006, "world", 2);
    assert_string_equal(c.out, "hello world");
    assert_int_equal(c.r.next, 1011);
    assert_int_equal(c.nts, 2);
    assert_int_equal(c.ts[1], 2);
    assert_int_equal(c.ctr.ooo_buffered_bytes, 0);
    tb_reasm_free(&c.r);
}

static void test_reorder(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    seg(&c, 10, "CCC", 3);
    seg(&c, 5, "BBBBB", 2);
    assert_string_equal(c.out, "");
    assert_int_equal(c.r.ooo_bytes, 8);
    seg(&c, 0, "AAAAA", 4);
    assert_string_equal(c.out, "AAAAABBBBBCCC");
    assert_int_equal(c.r.ooo_bytes, 0);
    assert_null(c.r.ooo);
    assert_int_equal(c.ctr.ooo_buffered_bytes, 8);
    /* Each buffered segment keeps its own packet's time. */
    assert_int_equal(c.nts, 3);
    assert_int_equal(c.ts[0], 4);
    assert_int_equal(c.ts[1], 2);
    assert_int_equal(c.ts[2], 3);
    assert_int_equal(c.ctr.gaps, 0);
}

static void test_retransmit_and_overlap(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 100);
    seg(&c, 100, "abcdef", 1);
    seg(&c, 100, "abcdef", 2);     /* full retransmission */
    seg(&c, 103, "defgh", 3);      /* 3 old bytes, 2 new */
    assert_string_equal(c.out, "abcdefgh");
    assert_int_equal(c.ctr.retransmitted_bytes, 9);
    /* Out of order pieces that overlap each other and what follows. */
    seg(&c, 112, "mnop", 4);       /* buffered [112,116) */
    seg(&c, 110, "klmnopq", 5);    /* [110,112) and [116,117) new, 4 overlap */
    assert_int_equal(c.ctr.overlap_bytes, 4);
    assert_int_equal(c.r.ooo_bytes, 7);
    seg(&c, 108, "ijk", 6);        /* fills the hole, overlaps 'k' */
    assert_string_equal(c.out, "abcdefghijklmnopq");
    assert_int_equal(c.ctr.overlap_bytes, 5);
    assert_int_equal(c.r.next, 117);
    assert_null(c.r.ooo);
}

static void test_hole_declared_by_ack(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 1);
    seg(&c, 1, "GET /a ", 1);      /* [1,8) */
    seg(&c, 18, "tail", 3);        /* [8,18) lost: 10 bytes */
    assert_string_equal(c.out, "GET /a ");
    tb_reasm_acked(&c.r, &c.env, 5, 4);  /* old ACK: nothing */
    tb_reasm_acked(&c.r, &c.env, 15, 5); /* the endpoint has bytes up to 15 */
    assert_string_equal(c.out, "GET /a <gap 7>");
    tb_reasm_acked(&c.r, &c.env, 20, 5); /* ... and now past the buffered tail */
    assert_string_equal(c.out, "GET /a <gap 7><gap 3>tail");
    assert_int_equal(c.ctr.gaps, 2);
    assert_int_equal(c.ctr.gap_bytes, 10);
    /* A hole found by an ACK has no capture time of its own. */
    assert_int_equal(c.ts[1], TB_TS_UNKNOWN);
    assert_int_equal(c.r.next, 22);
    /* A late retransmission of the lost bytes is old news now. */
    seg(&c, 8, "0123456789", 6);
    assert_int_equal(c.ctr.retransmitted_bytes, 10);
    /* Tail loss: the ACK passes bytes never seen and nothing is buffered. */
    tb_reasm_acked(&c.r, &c.env, 30, 7);
    assert_string_equal(c.out, "GET /a <gap 7><gap 3>tail<gap 8>");
    assert_int_equal(c.r.next, 30);
    /* An ACK absurdly far ahead is garbage, not a hole. */
    tb_reasm_acked(&c.r, &c.env, 30 + TB_REASM_MAX_AHEAD, 8);
    assert_int_equal(c.ctr.gaps, 3);
}

static void test_noted_ack(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    seg(&c, 0, "abc", 1);
    /* Noted ACKs declare nothing until settled ... */
    tb_reasm_ack_note(&c.r, 6, 2);
    tb_reasm_ack_note(&c.r, 5, 3); /* behind the noted one: no change */
    assert_true(c.r.ack_pending);
    assert_int_equal(c.r.ack_hi, 6);
    /* ... and the bytes arriving in between close the hole. */
    seg(&c, 3, "def", 4);
    tb_reasm_settle(&c.r, &c.env);
    assert_false(c.r.ack_pending);
    assert_string_equal(c.out, "abcdef");
    assert_int_equal(c.ctr.gaps, 0);
    /* Still missing when settled: a gap, with no capture time of its own. */
    tb_reasm_ack_note(&c.r, 10, 5);
    tb_reasm_ack_note(&c.r, 12, 6);
    seg(&c, 12, "mn", 7);
    tb_reasm_settle(&c.r, &c.env);
    assert_string_equal(c.out, "abcdef<gap 6>mn");
    assert_int_equal(c.ts[2], TB_TS_UNKNOWN);
    /* An eager ACK behind a noted one settles up to the noted one. */
    tb_reasm_ack_note(&c.r, 20, 8);
    tb_reasm_acked(&c.r, &c.env, 15, 9);
    assert_string_equal(c.out, "abcdef<gap 6>mn<gap 6>");
    assert_false(c.r.ack_pending);
    /* Flush settles what is noted. */
    tb_reasm_ack_note(&c.r, 25, 10);
    tb_reasm_flush(&c.r, &c.env, 11);
    assert_string_equal(c.out, "abcdef<gap 6>mn<gap 6><gap 5>");
    /* Not started, or not ahead: nothing noted. */
    tb_reasm_ack_note(&c.r, 25, 12);
    assert_false(c.r.ack_pending);
    tb_reasm_init(&c.r, 1);
    tb_reasm_ack_note(&c.r, 99, 13);
    assert_false(c.r.ack_pending);
}

static void test_wraparound(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0xfffffffa);
    seg(&c, 0xfffffffa, "0123", 1);
    seg(&c, 2, "89", 2);               /* after the wrap, ahead of a hole */
    seg(&c, 0xfffffffe, "4567", 3);    /* spans the wrap */
    assert_string_equal(c.out, "0123456789");
    assert_int_equal(c.r.next, 4);
    seg(&c, 0xfffffffc, "23456", 4);   /* old bytes across the wrap */
    assert_int_equal(c.ctr.retransmitted_bytes, 5);
    tb_reasm_acked(&c.r, &c.env, 0xfffffff0, 5); /* behind: ignored */
    tb_reasm_acked(&c.r, &c.env, 9, 6);
    assert_string_equal(c.out, "0123456789<gap 5>");
}

static void test_cap_gives_up_hole(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 8, 0);
    seg(&c, 0, "ab", 1);
    seg(&c, 4, "efgh", 2);     /* hole [2,4); 4 buffered */
    seg(&c, 10, "kl", 3);      /* hole [8,10); 6 buffered */
    assert_int_equal(c.r.ooo_bytes, 6);
    seg(&c, 14, "opqr", 4);    /* 10 > 8: the first hole is given up */
    assert_string_equal(c.out, "ab<gap 2>efgh");
    assert_int_equal(c.r.ooo_bytes, 6);
    assert_int_equal(c.r.next, 8);
    /* A segment bigger than the whole cap is delivered after its hole. */
    seg(&c, 20, "0123456789", 5);
    assert_string_equal(c.out, "ab<gap 2>efgh<gap 2>kl<gap 2>opqr<gap 2>0123456789");
    assert_null(c.r.ooo);
    assert_int_equal(c.ctr.gaps, 4);
    assert_int_equal(c.ctr.gap_bytes, 8);
}

static void test_snaplen_missing(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    /* 4 captured bytes of a 10-byte segment, then the next one in order. */
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 0, (const uint8_t *)"abcd", 4, 6, false, 1),
                     0);
    seg(&c, 10, "KLM", 2);
    assert_string_equal(c.out, "abcd<gap 6>KLM");
    /* The same when it arrives out of order, and a retransmission of its
     * head overlapping the buffered missing part. */
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 20, (const uint8_t *)"uv", 2, 3, false, 3),
                     0);
    seg(&c, 13, "nopqrst", 4);
    assert_string_equal(c.out, "abcd<gap 6>KLMnopqrstuv<gap 3>");
    assert_int_equal(c.r.next, 25);
    assert_int_equal(c.ctr.gap_bytes, 9);
}

static void test_fin_and_flush(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    seg(&c, 0, "abc", 1);
    seg(&c, 6, "ghi", 2);
    /* FIN at 12 with its own 3 bytes; [3,6) was lost. */
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 9, (const uint8_t *)"jkl", 3, 0, true, 3), 0);
    assert_false(tb_reasm_finished(&c.r));
    assert_int_equal(c.r.fin_seq, 12);
    /* The ACK of the FIN covers the FIN's own sequence number: no extra gap. */
    tb_reasm_acked(&c.r, &c.env, 13, 4);
    assert_string_equal(c.out, "abc<gap 3>ghijkl");
    assert_true(tb_reasm_finished(&c.r));

    /* Flush at close: holes declared, buffered data delivered, a final gap up
     * to a FIN whose data never came. */
    rec_init(&c, 1 << 16, 0);
    seg(&c, 0, "ab", 1);
    seg(&c, 5, "fg", 2);
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 10, NULL, 0, 0, true, 3), 0);
    tb_reasm_flush(&c.r, &c.env, 9);
    assert_string_equal(c.out, "ab<gap 3>fg<gap 3>");
    assert_true(tb_reasm_finished(&c.r));
    assert_null(c.r.ooo);
}

static void test_midstream_start(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    tb_reasm_init(&c.r, 1); /* not started */
    tb_reasm_acked(&c.r, &c.env, 500, 1);
    assert_int_equal(c.nts, 0);
    seg(&c, 77777, "xyz", 2);
    assert_string_equal(c.out, "xyz");
    assert_int_equal(c.r.next, 77780);
}

/* In-order segments take a shortcut only when nothing else is going on; at
 * its edges (a FIN, a cut, bytes buffered, nothing carried) the general path
 * decides, and the results are the same as ever. */
static void test_in_order_edges(void **state)
{
    (void)state;
    struct rec c;
    rec_init(&c, 1 << 16, 0);
    /* Bytes buffered after a hole: an in-order segment is delivered, and the
     * buffered bytes follow as soon as they are contiguous. */
    seg(&c, 0, "ab", 1);
    seg(&c, 5, "fg", 2);
    seg(&c, 2, "cd", 3);
    assert_string_equal(c.out, "abcd");
    assert_non_null(c.r.ooo);
    assert_int_equal(c.r.next, 4);
    seg(&c, 4, "e", 4);
    assert_string_equal(c.out, "abcdefg");
    assert_null(c.r.ooo);
    assert_int_equal(c.nts, 4);
    assert_int_equal(c.ts[3], 2); /* "fg" keeps its own time */
    /* Nothing carried: no delivery. */
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 7, (const uint8_t *)"", 0, 0, false, 5), 0);
    assert_int_equal(c.nts, 4);
    /* In order with a FIN: delivered, and the stream is finished. */
    assert_int_equal(tb_reasm_segment(&c.r, &c.env, 7, (const uint8_t *)"hi", 2, 0, true, 6), 0);
    assert_string_equal(c.out, "abcdefghi");
    assert_int_equal(c.r.fin_seq, 9);
    assert_true(tb_reasm_finished(&c.r));
    /* An ACK behind `next` with a FIN seen: nothing to declare. */
    tb_reasm_acked(&c.r, &c.env, 5, 7);
    tb_reasm_acked(&c.r, &c.env, 10, 7);
    assert_string_equal(c.out, "abcdefghi");
    assert_int_equal(c.ctr.gaps, 0);
    assert_int_equal(c.ctr.retransmitted_bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_reorder),
        cmocka_unit_test(test_retransmit_and_overlap),
        cmocka_unit_test(test_hole_declared_by_ack),
        cmocka_unit_test(test_noted_ack),
        cmocka_unit_test(test_wraparound),
        cmocka_unit_test(test_cap_gives_up_hole),
        cmocka_unit_test(test_snaplen_missing),
        cmocka_unit_test(test_fin_and_flush),
        cmocka_unit_test(test_midstream_start),
        cmocka_unit_test(test_in_order_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
