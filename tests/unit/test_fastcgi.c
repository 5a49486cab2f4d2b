/* SPDX-License-Identifier: MIT */
/* test_fastcgi.c — the FastCGI parser on hand-built records: a request as
 * nginx sends it, statuses (Status, Location, refused), multiplexed request
 * ids, parameters straddling records and chunks, id reuse, holes inside and
 * between records, a close, mid-stream pickup, the in-flight cap, detection,
 * and the invariant driver over the fuzz seeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_msg.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

enum { BEGIN = 1, ABORT = 2, END = 3, PARAMS = 4, STDIN = 5, STDOUT = 6, STDERR = 7 };

/* ---- record builders (layout in capture/proto/fastcgi.c) ---------------- */

static void rec(struct mb *m, uint8_t type, uint16_t id, const void *p, size_t n, uint8_t pad)
{
    mb_u8(m, 1);
    mb_u8(m, type);
    mb_be16(m, id);
    mb_be16(m, (uint16_t)n);
    mb_u8(m, pad);
    mb_u8(m, 0);
    mb_put(m, p, n);
    mb_fill(m, 0, pad);
}

static void lenc(struct mb *m, size_t n)
{
    if (n < 128)
        mb_u8(m, (uint8_t)n);
    else
        mb_be32(m, (uint32_t)n | 0x80000000u);
}

static void pair(struct mb *m, const char *k, const char *v)
{
    lenc(m, strlen(k));
    lenc(m, strlen(v));
    mb_put(m, k, strlen(k));
    mb_put(m, v, strlen(v));
}

/* BEGIN_REQUEST, PARAMS (cut into two records at `split` when non-zero), the
 * empty PARAMS, `body` bytes of STDIN and the empty STDIN. NULL leaves a
 * parameter out. */
static void request(struct mb *m, uint16_t id, const char *method, const char *uri,
                    const char *script, size_t split, size_t body)
{
    static const uint8_t begin[8] = {0, 1, 1, 0, 0, 0, 0, 0};
    rec(m, BEGIN, id, begin, sizeof begin, 0);
    struct mb *p = mb_new();
    pair(p, "SCRIPT_FILENAME", "/srv/www/index.php");
    pair(p, "QUERY_STRING", "a=1");
    if (method)
        pair(p, "REQUEST_METHOD", method);
    char ua[300];
    memset(ua, 'u', sizeof ua - 1);
    ua[sizeof ua - 1] = '\0';
    pair(p, "HTTP_USER_AGENT", ua); /* a value longer than 127: a 4-byte length */
    if (script)
        pair(p, "SCRIPT_NAME", script);
    if (uri)
        pair(p, "REQUEST_URI", uri);
    pair(p, "SERVER_PROTOCOL", "HTTP/1.1");
    if (split && split < p->n) {
        rec(m, PARAMS, id, p->b, split, 3);
        rec(m, PARAMS, id, p->b + split, p->n - split, 0);
    } else {
        rec(m, PARAMS, id, p->b, p->n, (uint8_t)((8 - p->n % 8) % 8));
    }
    rec(m, PARAMS, id, NULL, 0, 0);
    free(p);
    if (body) {
        struct mb *b = mb_new();
        mb_fill(b, 'x', body);
        rec(m, STDIN, id, b->b, b->n, 0);
        free(b);
    }
    rec(m, STDIN, id, NULL, 0, 0);
}

static void out(struct mb *m, uint16_t id, const char *s)
{
    rec(m, STDOUT, id, s, strlen(s), (uint8_t)((8 - strlen(s) % 8) % 8));
}

static void end(struct mb *m, uint16_t id, uint8_t proto_status, uint8_t pad)
{
    uint8_t b[8] = {0, 0, 0, 0, proto_status, 0, 0, 0};
    rec(m, STDOUT, id, NULL, 0, 0);
    rec(m, END, id, b, sizeof b, pad);
}

/* ---- tests ------------------------------------------------------------ */

static void test_request(void **state)
{
    (void)state;
    static const size_t steps[] = {0, 1, 5, 64};
    for (size_t i = 0; i < TB_ARRAY_SIZE(steps); i++) {
        struct mb *c = mb_new(), *s = mb_new();
        request(c, 1, "GET", "/items/42?x=1", "/index.php", 0, 0);
        out(s, 1, "Status: 404 Not Found\r\nContent-type: text/html\r\n\r\nnothing here");
        size_t cut = s->n;
        end(s, 1, 0, 8);
        struct pt *t = pt_new(&tb_proto_fastcgi, false);
        pt_feed_split(t, C2S, c->b, c->n, 10, steps[i]);
        pt_feed_split(t, S2C, s->b, cut, 20, steps[i]);
        assert_int_equal(t->n, 0);
        pt_feed_split(t, S2C, s->b + cut, s->n - 1 - cut, 25, steps[i]);
        assert_int_equal(t->n, 0); /* the END_REQUEST's padding is still to come */
        pt_feed_split(t, S2C, s->b + s->n - 1, 1, 30, steps[i]);
        assert_int_equal(t->n, 1);
        mb_check(&t->v[0], 10, 30, c->n, s->n, 404, 0, "GET /items/{id}");
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
        free(c);
        free(s);
    }
}

/* Without a Status header: 200, or 302 with a Location; a request the
 * application refused (protocolStatus OVERLOADED): 503. Classes from
 * SCRIPT_NAME when REQUEST_URI is missing, from the role without either. */
static void test_status_and_class(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_fastcgi, false);
    size_t cs[3], ss[3];
    struct mb *c1 = mb_new(), *s1 = mb_new();
    const char *want[3] = {"POST /api/v2/save.php", "GET /old/place", "RESPONDER"};
    int32_t st[3] = {200, 302, 503};
    for (int i = 0; i < 3; i++) {
        c1->n = s1->n = 0;
        if (i == 0) {
            request(c1, 1, "POST", NULL, "/api/v2/save.php", 0, 1000);
            out(s1, 1, "Content-type: text/plain\r\n\r\nok");
            end(s1, 1, 0, 0);
        } else if (i == 1) {
            request(c1, 1, "GET", "/old/place", NULL, 0, 0);
            out(s1, 1, "Location: /new/place\r\n\r\n");
            end(s1, 1, 0, 0);
        } else {
            request(c1, 1, NULL, NULL, NULL, 0, 0);
            end(s1, 1, 2, 0);
        }
        cs[i] = c1->n;
        ss[i] = s1->n;
        pt_feed(t, C2S, c1->b, c1->n, 100 + 10 * i);
        pt_feed(t, S2C, s1->b, s1->n, 105 + 10 * i);
        assert_int_equal(t->n, (size_t)i + 1);
        mb_check(&t->v[i], 100 + 10 * i, 105 + 10 * i, cs[i], ss[i], st[i], 0, want[i]);
    }
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    free(c1);
    free(s1);
}

/* Two requests multiplexed on one connection, their records interleaved both
 * ways; the later one answered first. Each is its own request. A parameter
 * pair straddles two PARAMS records. */
static void test_multiplexed(void **state)
{
    (void)state;
    struct mb *a = mb_new(), *b = mb_new(), *sa = mb_new(), *sb = mb_new();
    request(a, 1, "GET", "/a/1", NULL, 37, 0);
    request(b, 2, "PUT", "/b/2", NULL, 0, 20000);
    out(sa, 1, "Status: 201 Created\r\n\r\n");
    end(sa, 1, 0, 0);
    out(sb, 2, "Content-type: x\r\n\r\n");
    end(sb, 2, 0, 0);
    struct pt *t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, a->b, 16, 10); /* BEGIN 1 */
    pt_feed(t, C2S, b->b, 16, 11); /* BEGIN 2 */
    pt_feed(t, C2S, a->b + 16, a->n - 16, 12);
    pt_feed(t, C2S, b->b + 16, b->n - 16, 13);
    pt_feed(t, S2C, sb->b, sb->n, 20);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 11, 20, b->n, sb->n, 200, 0, "PUT /b/{id}");
    pt_feed(t, S2C, sa->b, sa->n, 30);
    assert_int_equal(t->n, 2);
    mb_check(&t->v[1], 10, 30, a->n, sa->n, 201, 0, "GET /a/{id}");
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
    free(a);
    free(b);
    free(sa);
    free(sb);
}

/* Holes: inside a STDOUT record (known length) the request keeps pairing,
 * flagged; between records the framing is lost and found again at the
 * answer's next record; an END_REQUEST lost in a hole is told by the id's
 * next BEGIN_REQUEST; a whole answer lost is not reported. */
static void test_gaps(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new(), *big = mb_new();
    request(c, 1, "GET", "/g", NULL, 0, 0);
    mb_fill(big, 'z', 5000);
    mb_put(big, "", 1);
    out(s, 1, "Content-type: text/html\r\n\r\n");
    size_t h = s->n;
    rec(s, STDOUT, 1, big->b, 5000, 0);
    size_t b = s->n;
    end(s, 1, 0, 0);

    struct pt *t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, h + 1000, 20);
    pt_gap(t, S2C, 2000, TB_TS_UNKNOWN);
    pt_feed(t, S2C, s->b + h + 3000, s->n - h - 3000, 30);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 30, c->n, s->n, 200, TB_REQ_GAP, "GET /g");
    pt_free(t);

    t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, h + 1000, 20);
    pt_gap(t, S2C, 0, TB_TS_UNKNOWN);
    pt_feed(t, S2C, s->b + b - 100, s->n - (b - 100), 40);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].dep, 40);
    assert_int_equal(t->v[0].flags, TB_REQ_GAP);
    assert_int_equal(t->ctr.resyncs, 1);
    pt_free(t);

    t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, b, 20);
    pt_gap(t, S2C, s->n - b, TB_TS_UNKNOWN);
    pt_feed(t, C2S, c->b, c->n, 50);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 20, c->n, s->n, 200, TB_REQ_GAP, "GET /g");
    pt_feed(t, S2C, s->b, s->n, 60);
    assert_int_equal(t->n, 2);
    mb_check(&t->v[1], 50, 60, c->n, s->n, 200, 0, "GET /g");
    pt_free(t);

    t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_gap(t, S2C, s->n, TB_TS_UNKNOWN);
    pt_feed(t, C2S, c->b, c->n, 50);
    pt_feed(t, S2C, s->b, s->n, 60);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 50, 60, c->n, s->n, 200, 0, "GET /g");
    pt_free(t);

    /* A hole in the header section: the status is unknown. */
    t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 10);
    pt_feed(t, S2C, s->b, 12, 20);
    pt_gap(t, S2C, 6, TB_TS_UNKNOWN);
    pt_feed(t, S2C, s->b + 18, s->n - 18, 30);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 30, c->n, s->n, -1, TB_REQ_GAP, "GET /g");
    pt_free(t);

    /* A hole in the PARAMS stream: the class keeps what was read whole. */
    t = pt_new(&tb_proto_fastcgi, false);
    struct mb *c2 = mb_new();
    request(c2, 1, "GET", "/late/param", NULL, 0, 0);
    pt_feed(t, C2S, c2->b, 40, 10);
    pt_gap(t, C2S, 20, TB_TS_UNKNOWN);
    pt_feed(t, C2S, c2->b + 60, c2->n - 60, 11);
    pt_feed(t, S2C, s->b, s->n, 20);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 10, 20, c2->n, s->n, 200, TB_REQ_GAP, "RESPONDER");
    pt_free(t);
    free(c2);
    free(c);
    free(s);
    free(big);
}

/* Closed while answering: the times seen, flagged. Mid-stream: records of a
 * request under way are passed over until a BEGIN_REQUEST. */
static void test_close_and_midstream(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    request(c, 7, "GET", "/c", NULL, 0, 0);
    out(s, 7, "Content-type: text/html\r\n\r\nhalf");
    struct pt *t = pt_new(&tb_proto_fastcgi, false);
    pt_feed(t, C2S, c->b, c->n, 1);
    pt_feed(t, S2C, s->b, s->n, 2);
    pt_close(t, 1, 3);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 1, 2, c->n, s->n, 200, TB_REQ_NORESP, "GET /c");
    pt_free(t);

    struct mb *old = mb_new(), *olds = mb_new();
    request(old, 3, "GET", "/old", NULL, 0, 500);
    out(olds, 3, "Content-type: text/html\r\n\r\nold answer");
    end(olds, 3, 0, 0);
    s->n = 0;
    out(s, 7, "Status: 200 OK\r\n\r\n");
    end(s, 7, 0, 0);
    t = pt_new(&tb_proto_fastcgi, true);
    pt_feed(t, C2S, old->b + 50, old->n - 50, 1);
    pt_feed(t, S2C, olds->b + 3, olds->n - 3, 2);
    pt_feed(t, C2S, c->b, c->n, 3);
    pt_feed(t, S2C, s->b, s->n, 4);
    assert_int_equal(t->n, 1);
    mb_check(&t->v[0], 3, 4, c->n, s->n, 200, 0, "GET /c");
    pt_free(t);
    free(old);
    free(olds);
    free(c);
    free(s);
}

/* At most 64 requests in flight: the 65th is not followed (counted), and
 * the others still pair by id. */
static void test_inflight_cap(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    struct pt *t = pt_new(&tb_proto_fastcgi, false);
    for (uint16_t id = 1; id <= 65; id++) {
        c->n = 0;
        request(c, id, "GET", "/cap", NULL, 0, 0);
        pt_feed(t, C2S, c->b, c->n, id);
    }
    assert_int_equal(t->ctr.inflight_dropped, 1);
    for (uint16_t id = 65; id >= 1; id--) {
        s->n = 0;
        out(s, id, "\r\n");
        end(s, id, 0, 0);
        pt_feed(t, S2C, s->b, s->n, 1000 + id);
    }
    assert_int_equal(t->n, 64);
    assert_int_equal(t->v[0].arr, 64);
    assert_int_equal(t->v[0].dep, 1064);
    assert_int_equal(t->v[63].arr, 1);
    pt_free(t);
    free(c);
    free(s);
}

static void test_detect(void **state)
{
    (void)state;
    struct mb *c = mb_new(), *s = mb_new();
    bool cs = false;
    request(c, 1, "GET", "/", NULL, 0, 0);
    assert_int_equal(tb_proto_fastcgi.detect(c->b, c->n, TB_DIR_C2S, &cs), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(tb_proto_fastcgi.detect(c->b, 9, TB_DIR_C2S, &cs), TB_DETECT_MAYBE);
    /* An answer's records are no sign (a bare 8-byte header is too weak). */
    out(s, 1, "Content-type: a\r\n\r\n");
    end(s, 1, 0, 0);
    assert_int_equal(tb_proto_fastcgi.detect(s->b, s->n, TB_DIR_C2S, &cs), TB_DETECT_NO);
    /* A MySQL result packet of 513 bytes, sequence 1, as a FastCGI header
     * would read it: version 1, ABORT_REQUEST, id 1, reserved 0. */
    static const uint8_t my[16] = {0x01, 0x02, 0x00, 0x01, 0x03, 0x64, 0x65, 0x00,
                                   0x66, 0x00, 0, 0, 0, 0, 0, 0};
    assert_int_equal(tb_proto_fastcgi.detect(my, sizeof my, TB_DIR_C2S, &cs), TB_DETECT_NO);
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(
        tb_proto_fastcgi.detect((const uint8_t *)get, sizeof get - 1, TB_DIR_C2S, &cs),
        TB_DETECT_NO);
    free(c);
    free(s);
}

static void test_fuzz_seeds(void **state)
{
    (void)state;
    assert_true(mb_replay_corpus(&tb_proto_fastcgi, "fastcgi") >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_status_and_class),
        cmocka_unit_test(test_multiplexed),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_close_and_midstream),
        cmocka_unit_test(test_inflight_cap),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
