/* SPDX-License-Identifier: MIT */
/* test_tls.c — the TLS parser on hand-built records: TLS 1.2 and 1.3 turns
 * (the 1.3 handshake in application-data records, the client's Finished,
 * session tickets, encrypted close_notify), server names, mid-stream pickup,
 * holes, a bad record header, detection, and the invariant driver over the
 * fuzz seeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_msg.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

/* Every TLS exchange has status -1. */
static void check(const struct pt_ex *e, int64_t arr, int64_t dep, uint64_t rq, uint64_t rs,
                  uint32_t flags, const char *cls)
{
    mb_check(e, arr, dep, rq, rs, -1, flags, cls);
}

/* ---- record builders (layouts in capture/proto/tls.c) ------------------- */

static void rec(struct mb *m, uint8_t type, const void *p, size_t n)
{
    mb_u8(m, type);
    mb_be16(m, 0x0303);
    mb_be16(m, (uint16_t)n);
    if (p)
        mb_put(m, p, n);
    else
        mb_fill(m, 0xaa, n);
}

static void app(struct mb *m, size_t n) { rec(m, 23, NULL, n); }

/* A handshake message in its own record. */
static void hs(struct mb *m, uint8_t type, const struct mb *body)
{
    struct mb *h = mb_new();
    mb_u8(h, type);
    mb_u8(h, 0);
    mb_be16(h, (uint16_t)body->n);
    mb_put(h, body->b, body->n);
    rec(m, 22, h->b, h->n);
    free(h);
}

static void client_hello(struct mb *m, const char *sni)
{
    struct mb *b = mb_new(), *ext = mb_new();
    mb_be16(b, 0x0303);
    mb_fill(b, 'r', 32);
    mb_u8(b, 32);
    mb_fill(b, 's', 32);
    mb_be16(b, 4);
    mb_be16(b, 0x1301);
    mb_be16(b, 0xc02f);
    mb_u8(b, 1);
    mb_u8(b, 0);
    mb_be16(ext, 10); /* supported_groups, before the name */
    mb_be16(ext, 4);
    mb_be16(ext, 2);
    mb_be16(ext, 0x001d);
    if (sni) {
        size_t n = strlen(sni);
        mb_be16(ext, 0);
        mb_be16(ext, (uint16_t)(n + 5));
        mb_be16(ext, (uint16_t)(n + 3));
        mb_u8(ext, 0);
        mb_be16(ext, (uint16_t)n);
        mb_put(ext, sni, n);
    }
    mb_be16(b, (uint16_t)ext->n);
    mb_put(b, ext->b, ext->n);
    hs(m, 1, b);
    free(b);
    free(ext);
}

static void server_hello(struct mb *m, bool v13)
{
    struct mb *b = mb_new();
    mb_be16(b, 0x0303);
    mb_fill(b, 'R', 32);
    mb_u8(b, 0);
    mb_be16(b, v13 ? 0x1301 : 0xc02f);
    mb_u8(b, 0);
    if (v13) {
        mb_be16(b, 6);
        mb_be16(b, 43);
        mb_be16(b, 2);
        mb_be16(b, 0x0304);
    }
    hs(m, 2, b);
    free(b);
}

/* ---- tests ------------------------------------------------------------ */

/* TLS 1.2: the handshake in clear, then two turns; the second request spans
 * records and chunks and its answer is delimited by the close. */
static void test_tls12(void **state)
{
    (void)state;
    static const size_t steps[] = {0, 1, 3, 1000};
    for (size_t i = 0; i < TB_ARRAY_SIZE(steps); i++) {
        size_t st = steps[i];
        struct mb *m = mb_new();
        struct pt *t = pt_new(&tb_proto_tls, false);
        client_hello(m, "Shop.Example.COM");
        pt_feed_split(t, C2S, m->b, m->n, 1, st);
        m->n = 0;
        server_hello(m, false);
        struct mb *cert = mb_new();
        mb_fill(cert, 'c', 1500);
        hs(m, 11, cert);
        free(cert);
        rec(m, 22, "\x0e\0\0\0", 4);
        pt_feed_split(t, S2C, m->b, m->n, 2, st);
        m->n = 0;
        rec(m, 22, NULL, 70);
        rec(m, 20, "\x01", 1);
        rec(m, 22, NULL, 40);
        pt_feed_split(t, C2S, m->b, m->n, 3, st);
        m->n = 0;
        rec(m, 20, "\x01", 1);
        rec(m, 22, NULL, 40);
        pt_feed_split(t, S2C, m->b, m->n, 4, st);
        assert_int_equal(t->n, 0);

        m->n = 0;
        app(m, 300);
        pt_feed_split(t, C2S, m->b, m->n, 100, st);
        m->n = 0;
        app(m, 5000);
        pt_feed_split(t, S2C, m->b, m->n, 110, st);
        m->n = 0;
        app(m, 40);
        pt_feed_split(t, S2C, m->b, m->n, 120, st);
        m->n = 0;
        app(m, 120);
        app(m, 16000);
        pt_feed_split(t, C2S, m->b, 3000, 200, st);
        assert_int_equal(t->n, 1);
        check(&t->v[0], 100, 120, 305, 5050, 0, "shop.example.com");
        pt_feed_split(t, C2S, m->b + 3000, m->n - 3000, 201, st);
        m->n = 0;
        app(m, 90);
        pt_feed_split(t, S2C, m->b, m->n, 210, st);
        pt_close(t, 0, 300);
        assert_int_equal(t->n, 2);
        check(&t->v[1], 200, 210, 125 + 16005, 95, 0, "shop.example.com");
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
        free(m);
    }
}

/* TLS 1.3: the server's encrypted handshake answers nothing; the client's
 * first application-data record is its Finished, not a request; session
 * tickets join the first answer (or, sent before any request, nothing);
 * close_notify records (19 bytes) are not a turn. */
static void test_tls13(void **state)
{
    (void)state;
    for (int early_ticket = 0; early_ticket < 2; early_ticket++) {
        struct mb *m = mb_new();
        struct pt *t = pt_new(&tb_proto_tls, false);
        client_hello(m, NULL);
        pt_feed(t, C2S, m->b, m->n, 1);
        m->n = 0;
        server_hello(m, true);
        rec(m, 20, "\x01", 1);
        app(m, 2100);
        pt_feed(t, S2C, m->b, m->n, 2);
        m->n = 0;
        rec(m, 20, "\x01", 1);
        app(m, 53);
        pt_feed(t, C2S, m->b, m->n, 50);
        m->n = 0;
        app(m, 200);
        if (early_ticket)
            pt_feed(t, S2C, m->b, m->n, 60);
        m->n = 0;
        app(m, 300);
        pt_feed(t, C2S, m->b, m->n, 100);
        m->n = 0;
        if (!early_ticket)
            app(m, 200);
        pt_feed(t, S2C, m->b, m->n, 105);
        m->n = 0;
        app(m, 800);
        pt_feed(t, S2C, m->b, m->n, 110);
        m->n = 0;
        app(m, 19);
        pt_feed(t, C2S, m->b, m->n, 200);
        pt_feed(t, S2C, m->b, m->n, 201);
        pt_close(t, 0, 202);
        assert_int_equal(t->n, 1);
        check(&t->v[0], 100, 110, 305, early_ticket ? 805 : 1010, 0, "tls");
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
        free(m);
    }
}

/* Mid-stream: an old answer's tail answers nothing; turns start at the
 * client's first record. */
static void test_midstream(void **state)
{
    (void)state;
    struct mb *m = mb_new();
    struct pt *t = pt_new(&tb_proto_tls, true);
    app(m, 700);
    pt_feed(t, S2C, m->b + 300, m->n - 300, 1);
    m->n = 0;
    app(m, 80);
    pt_feed(t, C2S, m->b, m->n, 2);
    m->n = 0;
    app(m, 3000);
    pt_feed(t, S2C, m->b, m->n, 3);
    m->n = 0;
    app(m, 50);
    pt_feed(t, C2S, m->b, m->n, 4);
    pt_close(t, -1, 5);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 2, 3, 85, 3005, 0, "tls");
    pt_free(t);
    free(m);
}

/* Holes: inside a record the turn goes on, flagged; a client run lost after
 * an answer ends that answer (flagged) and is not reported itself, nor its
 * answer; an answer lost whole is not reported; a bad header loses the
 * framing, found again at the next record. */
static void test_gaps(void **state)
{
    (void)state;
    struct mb *q = mb_new(), *r = mb_new();
    app(q, 100);
    app(r, 5000);
    struct pt *t = pt_new(&tb_proto_tls, false);
    pt_feed(t, C2S, q->b, q->n, 10);
    pt_feed(t, S2C, r->b, 1000, 20);
    pt_gap(t, S2C, 2000, TB_TS_UNKNOWN);
    pt_feed(t, S2C, r->b + 3000, r->n - 3000, 30);
    pt_feed(t, C2S, q->b, q->n, 40);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 10, 30, 105, 5005, TB_REQ_GAP, "tls");
    pt_free(t);

    t = pt_new(&tb_proto_tls, false);
    pt_feed(t, C2S, q->b, q->n, 10);
    pt_feed(t, S2C, r->b, r->n, 20);
    pt_gap(t, C2S, 0, TB_TS_UNKNOWN);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 10, 20, 105, 5005, TB_REQ_GAP, "tls");
    pt_feed(t, S2C, r->b, r->n, 30);
    pt_feed(t, C2S, q->b, q->n, 40);
    pt_feed(t, S2C, r->b, r->n, 50);
    pt_close(t, -1, 60);
    assert_int_equal(t->n, 2);
    check(&t->v[1], 40, 50, 105, 5005, 0, "tls");
    pt_free(t);

    t = pt_new(&tb_proto_tls, false);
    pt_feed(t, C2S, q->b, q->n, 10);
    pt_gap(t, S2C, 500, TB_TS_UNKNOWN);
    pt_feed(t, C2S, q->b, q->n, 40);
    pt_feed(t, S2C, r->b, r->n, 50);
    pt_close(t, -1, 60);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 40, 50, 105, 5005, 0, "tls");
    pt_free(t);

    t = pt_new(&tb_proto_tls, false);
    pt_feed(t, C2S, q->b, q->n, 10);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\n", 20);
    assert_int_equal(t->ctr.parse_errors, 1);
    pt_feed(t, S2C, r->b, r->n, 30);
    pt_feed(t, C2S, q->b, q->n, 40);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 10, 30, 105, 17 + 5005, 0, "tls");
    pt_free(t);
    free(q);
    free(r);
}

static void test_detect(void **state)
{
    (void)state;
    struct mb *m = mb_new();
    bool cs = false;
    client_hello(m, "a.b");
    assert_int_equal(tb_proto_tls.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(tb_proto_tls.detect(m->b, 3, TB_DIR_C2S, &cs), TB_DETECT_MAYBE);
    m->n = 0;
    server_hello(m, true);
    cs = true;
    assert_int_equal(tb_proto_tls.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    assert_false(cs);
    m->n = 0;
    app(m, 100);
    app(m, 33);
    assert_int_equal(tb_proto_tls.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    /* Records that do not fill the chunk exactly are not believed. */
    assert_int_equal(tb_proto_tls.detect(m->b, m->n - 1, TB_DIR_C2S, &cs), TB_DETECT_NO);
    static const char get[] = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(tb_proto_tls.detect((const uint8_t *)get, sizeof get - 1, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    free(m);
}

static void test_fuzz_seeds(void **state)
{
    (void)state;
    assert_true(mb_replay_corpus(&tb_proto_tls, "tls") >= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls12),
        cmocka_unit_test(test_tls13),
        cmocka_unit_test(test_midstream),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
