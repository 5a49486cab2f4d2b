/* SPDX-License-Identifier: MIT */
/* test_ajp.c — the AJP13 parser on hand-built packets: a GET, a POST whose body
 * the container asks for, methods carried by name, CPing, mid-stream pickup,
 * capture holes inside and between packets, a lost End Response, a close, bad
 * magic, detection, and the invariant driver over the fuzz seeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_msg.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

/* ---- packet builders (layouts in capture/proto/ajp.c) ------------------- */

static void str(struct mb *m, const char *s)
{
    mb_be16(m, (uint16_t)strlen(s));
    mb_put(m, s, strlen(s) + 1);
}

/* Wraps the payload built in `pl` as one packet appended to `m`. */
static void pkt(struct mb *m, bool c2s, const struct mb *pl)
{
    if (c2s) {
        mb_u8(m, 0x12);
        mb_u8(m, 0x34);
    } else {
        mb_put(m, "AB", 2);
    }
    mb_be16(m, (uint16_t)pl->n);
    mb_put(m, pl->b, pl->n);
}

/* Forward Request: method code (0xff: `stored` names it), two headers (one
 * coded, one spelled out), and attributes of each value kind before the
 * query string and the stored method. */
static void fwd(struct mb *m, uint8_t method, const char *uri, const char *stored)
{
    struct mb *p = mb_new();
    mb_u8(p, 0x02);
    mb_u8(p, method);
    str(p, "HTTP/1.1");
    str(p, uri);
    str(p, "10.0.0.9");
    mb_be16(p, 0xffff); /* remote_host: a null string */
    str(p, "shop");
    mb_be16(p, 80);
    mb_u8(p, 0);
    mb_be16(p, 2);
    mb_be16(p, 0xa00b); /* Host */
    str(p, "shop");
    str(p, "X-Trace");
    str(p, "abc");
    mb_u8(p, 0x0b); /* ssl_key_size: an integer */
    mb_be16(p, 256);
    mb_u8(p, 0x0a); /* req_attribute: name and value */
    str(p, "AJP_REMOTE_PORT");
    str(p, "51234");
    mb_u8(p, 0x05); /* query_string */
    str(p, "id=7&x=1");
    if (stored) {
        mb_u8(p, 0x0d);
        str(p, stored);
    }
    mb_u8(p, 0xff);
    pkt(m, true, p);
    free(p);
}

static void data(struct mb *m, size_t n)
{
    struct mb *p = mb_new();
    mb_be16(p, (uint16_t)n);
    mb_fill(p, 'd', n);
    pkt(m, true, p);
    free(p);
}

static void headers(struct mb *m, uint16_t status)
{
    struct mb *p = mb_new();
    mb_u8(p, 0x04);
    mb_be16(p, status);
    str(p, "Whatever");
    mb_be16(p, 1);
    mb_be16(p, 0xa001);
    str(p, "text/plain");
    pkt(m, false, p);
    free(p);
}

static void body(struct mb *m, size_t n)
{
    struct mb *p = mb_new();
    mb_u8(p, 0x03);
    mb_be16(p, (uint16_t)n);
    mb_fill(p, 'b', n);
    mb_u8(p, 0); /* Tomcat's trailing NUL */
    pkt(m, false, p);
    free(p);
}

static void get_body(struct mb *m)
{
    static const uint8_t p[] = {'A', 'B', 0, 3, 0x06, 0x1f, 0xfa};
    mb_put(m, p, sizeof p);
}

static void end(struct mb *m)
{
    static const uint8_t p[] = {'A', 'B', 0, 2, 0x05, 1};
    mb_put(m, p, sizeof p);
}

static void cping(struct mb *m)
{
    static const uint8_t p[] = {0x12, 0x34, 0, 1, 0x0a};
    mb_put(m, p, sizeof p);
}

static void cpong(struct mb *m)
{
    static const uint8_t p[] = {'A', 'B', 0, 1, 0x09};
    mb_put(m, p, sizeof p);
}

/* ---- tests ------------------------------------------------------------ */

/* Request in one segment, answer in two; then byte by byte and in odd
 * pieces: the same record. */
static void test_get(void **state)
{
    (void)state;
    static const size_t steps[] = {0, 1, 7, 100};
    for (size_t i = 0; i < TB_ARRAY_SIZE(steps); i++) {
        struct mb *c = mb_new(), *s = mb_new();
        fwd(c, 2, "/app/items/12345", NULL);
        headers(s, 200);
        body(s, 300);
        size_t cut = s->n;
        end(s);
        struct pt *t = pt_new(&tb_proto_ajp, false);
        pt_feed_split(t, C2S, c->b, c->n, 10, steps[i]);
        pt_feed_split(t, S2C, s->b, cut, 20, steps[i]);
        assert_int_equal(t->n, 0);
        pt_feed_split(t, S2C, s->b + cut, s->n - cut, 30, steps[i]);
        assert_int_equal(t->n, 1);
        mb_check(&t->v[0], 10, 30, c->n, s->n, 200, 0, "GET /app/items/{id}");
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
        free(c);
        free(s);
    }
}

/* The first body packet follows the request unasked; the rest answer Get
 * Body Chunk; an empty one ends the body. All of it is the request's. */
static void test_post_body(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    struct pt *t = pt_new(&tb_proto_ajp, false);
    fwd(c, 4, "/app/upload", NULL);
    data(c, 8186);
    pt_feed(t, C2S, c->b, c->n, 10);
    size_t rq = c->n;
    s->n = 0;
    get_body(s);
    size_t rs = s->n;
    pt_feed(t, S2C, s->b, s->n, 15);
    c->n = 0;
    data(c, 100);
    data(c, 0);
    rq += c->n;
    pt_feed(t, C2S, c->b, c->n, 16);
    s->n = 0;
    headers(s, 201);
    end(s);
    rs += s->n;
    pt_feed(t, S2C, s->b, s->n, 20);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 20, rq, rs, 201, 0, "POST /app/upload");
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    free(c);
    free(s);
}

/* Methods without a code travel by name in the stored-method attribute, after
 * the headers and the other attributes. */
static void test_stored_method(void **state)
{
    (void)state;
    static const char *const names[] = {"PATCH", "PURGE"};
    for (size_t i = 0; i < 2; i++) {
        struct mb *c = mb_new(), *s = mb_new();
        fwd(c, 0xff, "/app/items/3", names[i]);
        headers(s, 204);
        end(s);
        struct pt *t = pt_new(&tb_proto_ajp, false);
        pt_feed(t, C2S, c->b, c->n, 1);
        pt_feed(t, S2C, s->b, s->n, 2);
        assert_int_equal(t->n, 1);
        char want[64];
        snprintf(want, sizeof want, "%s /app/items/{id}", names[i]);
        mb_check(&t->v[0], 1, 2, c->n, s->n, 204, 0, want);
        pt_free(t);
        free(c);
        free(s);
    }
}

/* CPing/CPong is a probe, not a request; the request after it is timed from
 * its own Forward Request. A container answering without Send Headers leaves
 * the status unknown. */
static void test_cping_and_no_headers(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    struct pt *t = pt_new(&tb_proto_ajp, false);
    cping(c);
    pt_feed(t, C2S, c->b, c->n, 5);
    cpong(s);
    pt_feed(t, S2C, s->b, s->n, 6);
    c->n = 0;
    fwd(c, 2, "/app/x", NULL);
    pt_feed(t, C2S, c->b, c->n, 7);
    s->n = 0;
    end(s);
    pt_feed(t, S2C, s->b, s->n, 8);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 7, 8, c->n, 6, -1, 0, "GET /app/x");
    assert_int_equal(t->ctr.probes, 1);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    free(c);
    free(s);
}

/* Mid-stream: the tail of an answer and of a request body come first; the
 * client side starts at a Forward Request found inside a chunk. */
static void test_midstream(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    struct pt *t = pt_new(&tb_proto_ajp, true);
    body(s, 500);
    end(s);
    pt_feed(t, S2C, s->b + 9, s->n - 9, 1); /* the middle of an old answer */
    data(c, 300);
    size_t skip = c->n - 120;
    fwd(c, 2, "/app/next/99", NULL);
    pt_feed(t, C2S, c->b + skip, c->n - skip, 2);
    size_t rq = c->n - (skip + 120);
    s->n = 0;
    headers(s, 500);
    body(s, 10);
    end(s);
    pt_feed(t, S2C, s->b, s->n, 3);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 2, 3, rq, s->n, 500, 0, "GET /app/next/{id}");
    pt_free(t);
    free(c);
    free(s);
}

/* A hole inside a packet of known length: skipped, the exchange keeps
 * pairing, flagged; a hole between packets loses the framing: the End
 * Response is then found by its pattern. */
static void test_gaps(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    fwd(c, 2, "/app/a", NULL);
    headers(s, 200);
    size_t h = s->n;
    body(s, 3000);
    size_t b = s->n;
    end(s);

    struct pt *t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, h + 1000, 20);
    pt_gap(t, S2C, 1000, TB_TS_UNKNOWN);
    pt_feed(t, S2C, s->b + h + 2000, s->n - h - 2000, 30);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 30, c->n, s->n, 200, TB_REQ_GAP, "GET /app/a");
    pt_free(t);

    /* The hole swallows the end of the body packet and the start of the
     * next: the length is unknown, so is the framing. */
    t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, h + 1000, 20);
    pt_gap(t, S2C, 0, TB_TS_UNKNOWN);
    pt_feed(t, S2C, s->b + b - 40, s->n - (b - 40), 40);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].dep, 40);
    assert_int_equal(t->v[0].status, 200);
    assert_int_equal(t->v[0].flags, TB_REQ_GAP);
    assert_int_equal(t->ctr.resyncs, 1);
    pt_free(t);

    /* The End Response itself lost: the next Forward Request says the answer
     * was over; its time stays that of the last byte captured. */
    t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, b, 20);
    pt_gap(t, S2C, 6, TB_TS_UNKNOWN);
    pt_feed(t, C2S, c->b, c->n, 50);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 20, c->n, s->n, 200, TB_REQ_GAP, "GET /app/a");
    pt_feed(t, S2C, s->b, s->n, 60);
    assert_int_equal(t->n, 2);
    mb_check(&t->v[1], 50, 60, c->n, s->n, 200, 0, "GET /app/a");
    pt_free(t);

    /* A hole where the whole answer was: nothing is reported for it. */
    t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_gap(t, S2C, s->n, TB_TS_UNKNOWN);
    pt_feed(t, C2S, c->b, c->n, 50);
    pt_feed(t, S2C, s->b, s->n, 60);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 50, 60, c->n, s->n, 200, 0, "GET /app/a");
    pt_free(t);
    free(c);
    free(s);
}

/* Closed mid-answer: reported with the times seen, flagged. Bad magic where
 * a packet should start: an error, and the parser finds the next packet. */
static void test_close_and_bad_magic(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    fwd(c, 2, "/app/b", NULL);
    headers(s, 200);
    body(s, 100);
    struct pt *t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 1);
    pt_feed(t, S2C, s->b, s->n - 10, 2);
    pt_close(t, -1, 3);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 1, 2, c->n, s->n - 10, 200, TB_REQ_NORESP, "GET /app/b");
    pt_free(t);

    t = pt_new(&tb_proto_ajp, false);
    pt_feed(t, C2S, c->b, c->n, 1);
    pt_str(t, S2C, "XYZW garbage", 2);
    assert_int_equal(t->ctr.parse_errors, 1);
    s->n = 0;
    headers(s, 302);
    end(s);
    pt_feed(t, S2C, s->b, s->n, 3);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].status, 302);
    assert_int_equal(t->v[0].dep, 3);
    assert_int_equal(t->v[0].flags, TB_REQ_GAP);
    pt_free(t);
    free(c);
    free(s);
}

static void test_detect(void **state)
{
    (void)state;
    struct mb *m = mb_new();
    bool cs = false;
    fwd(m, 2, "/x", NULL);
    assert_int_equal(tb_proto_ajp.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(tb_proto_ajp.detect(m->b, 6, TB_DIR_C2S, &cs), TB_DETECT_MAYBE);
    assert_int_equal(tb_proto_ajp.detect(m->b, 2, TB_DIR_C2S, &cs), TB_DETECT_MAYBE);
    m->n = 0;
    cping(m);
    assert_int_equal(tb_proto_ajp.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    m->n = 0;
    headers(m, 200);
    cs = true;
    assert_int_equal(tb_proto_ajp.detect(m->b, m->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    assert_false(cs); /* a container's packet: that side is the server */
    static const char get[] = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(tb_proto_ajp.detect((const uint8_t *)get, sizeof get - 1, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    static const uint8_t notproto[] = {0x12, 0x34, 0, 20, 0x02, 0x02, 0, 8, 'F', 'T', 'P', '/'};
    assert_int_equal(tb_proto_ajp.detect(notproto, sizeof notproto, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    free(m);
}

static void test_fuzz_seeds(void **state)
{
    (void)state;
    assert_true(mb_replay_corpus(&tb_proto_ajp, "ajp") >= 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_post_body),
        cmocka_unit_test(test_stored_method),
        cmocka_unit_test(test_cping_and_no_headers),
        cmocka_unit_test(test_midstream),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_close_and_bad_magic),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
