/* SPDX-License-Identifier: MIT */
/* test_http1.c — the HTTP/1.x parser on hand-built exchanges: pipelining,
 * chunked bodies, interim responses, bodiless responses, close delimiting,
 * capture holes, limits and detection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto-test.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

static void check(const struct pt_ex *e, int64_t arr, int64_t dep, uint64_t rq, uint64_t rs,
                  int32_t status, uint32_t flags, const char *cls)
{
    assert_int_equal(e->arr, arr);
    assert_int_equal(e->dep, dep);
    assert_int_equal(e->rq, rq);
    assert_int_equal(e->rs, rs);
    assert_int_equal(e->status, status);
    assert_int_equal(e->flags, flags);
    assert_string_equal(e->cls, cls);
}

static const char req1[] = "GET /story/12345 HTTP/1.1\r\nHost: a\r\n\r\n";
static const char req2[] = "GET /search?q=x HTTP/1.1\r\nHost: a\r\n\r\n";
static const char req3[] = "HEAD /img/0a1b2c3d4e5f.png HTTP/1.1\r\nHost: a\r\n\r\n";
static const char resp1[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
static const char resp2[] = "HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nno!";
static const char resp3[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";

/* Three requests in one segment; responses in two segments, the second
 * response split across them. Run whole, then byte by byte. */
static void run_pipelined(size_t step)
{
    struct pt *t = pt_new(&tb_proto_http1, false);
    char c2s[512], s2c[512];
    size_t nc = (size_t)snprintf(c2s, sizeof c2s, "%s%s%s", req1, req2, req3);
    size_t ns = (size_t)snprintf(s2c, sizeof s2c, "%s%s%s", resp1, resp2, resp3);
    size_t cut = strlen(resp1) + 20;
    assert_int_equal(pt_feed_split(t, C2S, c2s, nc, 1000, step), TB_PS_OK);
    assert_int_equal(pt_feed_split(t, S2C, s2c, cut, 2000, step), TB_PS_OK);
    assert_int_equal(t->n, 1);
    assert_int_equal(pt_feed_split(t, S2C, s2c + cut, ns - cut, 3000, step), TB_PS_OK);
    assert_int_equal(t->n, 3);
    check(&t->v[0], 1000, 2000, strlen(req1), strlen(resp1), 200, 0, "GET /story/{id}");
    check(&t->v[1], 1000, 3000, strlen(req2), strlen(resp2), 404, 0, "GET /search");
    /* HEAD: Content-Length describes the GET body that is not sent. */
    check(&t->v[2], 1000, 3000, strlen(req3), strlen(resp3), 200, 0, "HEAD /img/{id}.png");
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_pipelined(void **state)
{
    (void)state;
    run_pipelined(0);
    run_pipelined(1);
    run_pipelined(7);
}

/* Arrival is the first chunk of the request, departure the last of the
 * response, even when both straddle several chunks. */
static void test_timestamps_across_chunks(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_feed(t, C2S, "GET /a", 6, 100);
    pt_feed(t, C2S, "bc HTTP/1.1\r\nHost: x\r", 21, 110);
    pt_feed(t, C2S, "\n\r\n", 3, 120);
    pt_feed(t, S2C, "HTTP/1.1 200 OK\r\nContent-Len", 28, 200);
    pt_feed(t, S2C, "gth: 4\r\n\r\nab", 12, 210);
    assert_int_equal(t->n, 0);
    pt_feed(t, S2C, "cd", 2, 220);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 100, 220, 30, 42, 200, 0, "GET /abc");
    pt_free(t);
}

static void test_chunked_trailers(void **state)
{
    (void)state;
    static const char rq[] = "POST /api/items HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                             "4;name=val\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Sum: 1\r\n\r\n";
    static const char rs[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "1A; ext=\"q\"\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                             "0\r\nExpires: never\r\nX-Trailer: yes\r\n\r\n";
    for (size_t step = 0; step < 4; step++) {
        struct pt *t = pt_new(&tb_proto_http1, false);
        pt_feed_split(t, C2S, rq, strlen(rq), 10, step);
        pt_feed_split(t, S2C, rs, strlen(rs) - 2, 20, step);
        assert_int_equal(t->n, 0); /* the trailer section is not over yet */
        pt_feed_split(t, S2C, rs + strlen(rs) - 2, 2, 30, step);
        assert_int_equal(t->n, 1);
        check(&t->v[0], 10, 30, strlen(rq), strlen(rs), 200, 0, "POST /api/items");
        /* A next request on the same connection still parses. */
        pt_str(t, C2S, "GET / HTTP/1.1\r\n\r\n", 40);
        pt_str(t, S2C, "HTTP/1.1 204 No Content\r\n\r\n", 50);
        assert_int_equal(t->n, 2);
        check(&t->v[1], 40, 50, 18, 27, 204, 0, "GET /");
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
    }
}

static void test_100_continue(void **state)
{
    (void)state;
    static const char hd[] = "PUT /up/42 HTTP/1.1\r\nExpect: 100-continue\r\n"
                             "Content-Length: 4\r\n\r\n";
    static const char r100[] = "HTTP/1.1 100 Continue\r\n\r\n";
    static const char r201[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, hd, 10);
    pt_str(t, S2C, r100, 20);
    assert_int_equal(t->n, 0); /* the interim response is not the answer */
    pt_str(t, C2S, "abcd", 30);
    pt_str(t, S2C, r201, 40);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 10, 40, strlen(hd) + 4, strlen(r100) + strlen(r201), 201, 0, "PUT /up/{id}");
    pt_free(t);
}

static void test_304_204_no_body(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /a HTTP/1.1\r\nIf-None-Match: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 1);
    /* 304 carries the Content-Length of the representation, not a body. */
    static const char r304[] = "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n";
    static const char r200[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    pt_str(t, S2C, r304, 2);
    pt_str(t, S2C, r200, 3);
    assert_int_equal(t->n, 2);
    check(&t->v[0], 1, 2, 37, strlen(r304), 304, 0, "GET /a");
    check(&t->v[1], 1, 3, 19, strlen(r200), 200, 0, "GET /b");
    pt_free(t);
}

static void test_close_delimited(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /old HTTP/1.0\r\n\r\n", 50);
    pt_str(t, S2C, "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nfirst part ", 60);
    pt_str(t, S2C, "second part", 70);
    assert_int_equal(t->n, 0);
    pt_close(t, S2C, 80);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 50, 70, 21, 41 + 11, 200, TB_REQ_CLOSE_DELIM, "GET /old");
    pt_free(t);
}

/* A hole inside a Content-Length body is skipped: the exchange still pairs
 * (GAP set) and so does the next one. */
static void test_gap_in_body(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    static const char hd[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    char body[1000];
    memset(body, 'x', sizeof body);
    pt_str(t, C2S, "GET /big HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n", 5);
    pt_str(t, S2C, hd, 10);
    pt_feed(t, S2C, body, 100, 11);
    assert_int_equal(pt_gap(t, S2C, 500, 12), TB_PS_OK);
    pt_feed(t, S2C, body, 400, 13);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 5, 13, 21, strlen(hd) + 1000, 200, TB_REQ_GAP, "GET /big");
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 14);
    assert_int_equal(t->n, 2);
    check(&t->v[1], 5, 14, 22, 38, 200, 0, "GET /next");
    assert_int_equal(t->ctr.resyncs, 0);
    pt_free(t);
}

/* Snaplen cuts every body packet: each carries 60 bytes, the rest is a gap;
 * the final cut ends the body exactly. */
static void test_snaplen_gaps(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    static const char hd[] = "HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n";
    char seg[60];
    memset(seg, 'y', sizeof seg);
    pt_str(t, C2S, "GET /f HTTP/1.1\r\n\r\n", 1);
    pt_str(t, S2C, hd, 2);
    for (int i = 0; i < 4; i++) {
        pt_feed(t, S2C, seg, sizeof seg, 3 + i);
        pt_gap(t, S2C, 1000 - sizeof seg, 3 + i);
    }
    assert_int_equal(t->n, 1);
    check(&t->v[0], 1, 6, 19, strlen(hd) + 4000, 200, TB_REQ_GAP, "GET /f");

    /* Chunked: the cut takes chunk-size lines, so the framing is lost; the
     * next response's status line (in its own packet) closes it. */
    static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n";
    pt_str(t, C2S, "GET /c HTTP/1.1\r\n\r\nGET /d HTTP/1.1\r\n\r\n", 10);
    pt_str(t, S2C, ch, 11);
    pt_feed(t, S2C, seg, sizeof seg, 11);
    pt_gap(t, S2C, 1500, 11);
    pt_feed(t, S2C, seg, sizeof seg, 12);
    pt_gap(t, S2C, 1500, 12);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->ctr.resyncs, 1);
    pt_str(t, S2C, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 13);
    assert_int_equal(t->n, 3);
    /* Bytes after the framing was lost count once a line or hole ends them
     * (the second 60 are an unfinished line when the hole resets it): with
     * GAP set, sizes are estimates. */
    check(&t->v[1], 10, 12, 19, strlen(ch) + 60 + 1500 + 1500, 200, TB_REQ_GAP, "GET /c");
    check(&t->v[2], 10, 13, 19, 45, 404, 0, "GET /d");
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

/* A hole in the request's headers: the request line was seen and keeps its
 * place; the parser resynchronises on the next request line. A hole in a
 * response's headers: its end is unknown until the next status line, which
 * closes it (GAP); the following one pairs with its own request. Nothing is
 * invented. */
static void test_gap_in_headers(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /x HTTP/1.1\r\nHo", 1);
    pt_gap(t, C2S, 30, 2);
    pt_str(t, C2S, "st: y\r\n\r\nGET /y HTTP/1.1\r\n\r\n", 3);
    assert_int_equal(t->ctr.resyncs, 1);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", 4);
    pt_str(t, S2C, "HTTP/1.1 500 Oops\r\nContent-Length: 1\r\n\r\nb", 5);
    assert_int_equal(t->n, 2);
    check(&t->v[0], 1, 4, 19, 39, 200, TB_REQ_GAP, "GET /x");
    check(&t->v[1], 3, 5, 19, 41, 500, 0, "GET /y");

    pt_str(t, C2S, "GET /p HTTP/1.1\r\n\r\nGET /q HTTP/1.1\r\n\r\n", 10);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-", 11);
    pt_gap(t, S2C, 0, 12); /* unknown amount */
    pt_str(t, S2C, "ength: 1\r\n\r\naHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nbc", 13);
    /* The response cut by the hole is kept (status known, GAP) and closed
     * by the next status line, which follows its tail on the same line. */
    assert_int_equal(t->n, 4);
    check(&t->v[2], 10, 13, 19, 25 + 13, 200, TB_REQ_GAP, "GET /p");
    check(&t->v[3], 10, 13, 19, 45, 201, 0, "GET /q");
    assert_int_equal(t->ctr.resyncs, 2);
    assert_int_equal(t->ctr.parse_errors, 0);

    /* A hole between messages of unknown content: the response that comes
     * next has no request seen for it and is not paired. */
    pt_gap(t, C2S, 40, 20);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 21);
    assert_int_equal(t->n, 4);
    pt_free(t);
}

/* Lost segments (holes found later, TB_TS_UNKNOWN). The first segment of a
 * response (its status line and headers) is lost and its tail captured: the
 * request keeps its answer (GAP, status unknown, departure = the tail's
 * packet) and the next request pairs with its own answer — before, every
 * later pair on the connection shifted by one. A response lost whole is not
 * reported; a lost tail leaves the departure at the last captured packet,
 * not at the time the hole was found. (From tbneck-sim --drop: 88% -> 98.4%
 * exact.) */
static void test_lost_segments(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    static const char r1[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    pt_str(t, C2S, "GET /a HTTP/1.1\r\n\r\n", 1);
    pt_gap(t, S2C, strlen(r1) + 4, TB_TS_UNKNOWN);
    pt_str(t, S2C, "tail!!", 3);
    pt_str(t, C2S, "GET /b HTTP/1.1\r\n\r\n", 4);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 5);
    assert_int_equal(t->n, 2);
    check(&t->v[0], 1, 3, 19, strlen(r1) + 10, -1, TB_REQ_GAP, "GET /a");
    check(&t->v[1], 4, 5, 19, 40, 200, 0, "GET /b");

    /* Lost whole. */
    pt_str(t, C2S, "GET /c HTTP/1.1\r\n\r\n", 10);
    pt_gap(t, S2C, 40, TB_TS_UNKNOWN);
    pt_str(t, C2S, "GET /d HTTP/1.1\r\n\r\n", 20);
    pt_str(t, S2C, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 21);
    assert_int_equal(t->n, 3);
    check(&t->v[2], 20, 21, 19, 45, 404, 0, "GET /d");

    /* Tail lost: found by the ACK of the next request, much later. */
    pt_str(t, C2S, "GET /e HTTP/1.1\r\n\r\n", 30);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", 31);
    pt_gap(t, S2C, 90, TB_TS_UNKNOWN);
    assert_int_equal(t->n, 4);
    assert_int_equal(t->v[3].dep, 31);
    assert_int_equal(t->v[3].flags, TB_REQ_GAP);
    assert_int_equal(t->v[3].status, 200);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

/* Header blocks read in place when whole in a chunk and through the line
 * assembler when not must give the same exchanges, counters included. Each
 * stream is cut at every byte position (and at pairs of nearby positions),
 * the pieces stamped 10, 20, 30, and compared with the same bytes fed one at
 * a time with the same stamps, which never holds a whole field line in a chunk. */
static const char split_c2s[] =
    "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"
    "GET /b HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"
    "GET /c HTTP/1.1\nHost: y\n folded\nnocolon\n\n"
    "PUT /d HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
    "HEAD /e HTTP/1.1\r\n\r\n"
    "GET /f HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"
    "GET /g HTTP/1.1\r\nX: y\r\n\r\n";
static const char split_s2c[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
    "HTTP/1.1 204 No\nX: y\n\n"
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
    "HTTP/1.1 400 Bad\r\nContent-Length: 0\r\n\r\n"
    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"
    "HTTP/1.1 200 OK\r\n\r\nrest of the connection";

/* Feeds s[0..n) cut at c1 <= c2 into up to three chunks stamped 10, 20, 30;
 * bytewise: one byte per chunk, each stamped as its chunk would be. */
static void feed_cuts(struct pt *t, int dir, const char *s, size_t n, size_t c1, size_t c2,
                      bool bytewise)
{
    size_t b[4] = {0, c1, c2, n};
    for (int k = 0; k < 3; k++) {
        int64_t ts = 10 * (k + 1);
        if (bytewise) {
            for (size_t i = b[k]; i < b[k + 1]; i++)
                pt_feed(t, dir, s + i, 1, ts);
        } else if (b[k + 1] > b[k]) {
            pt_feed(t, dir, s + b[k], b[k + 1] - b[k], ts);
        }
    }
}

static struct pt *run_cuts(int cut_dir, size_t c1, size_t c2, bool bytewise)
{
    struct pt *t = pt_new(&tb_proto_http1, false);
    const char *s[2] = {split_c2s, split_s2c};
    size_t n[2] = {sizeof split_c2s - 1, sizeof split_s2c - 1};
    for (int dir = 0; dir < 2; dir++) {
        if (dir == cut_dir)
            feed_cuts(t, dir, s[dir], n[dir], c1, c2, bytewise);
        else
            pt_feed(t, dir, s[dir], n[dir], 40);
    }
    pt_close(t, S2C, 50);
    return t;
}

static void same_exchanges(const struct pt *a, const struct pt *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->emitted, b->emitted);
    assert_int_equal(a->ctr.parse_errors, b->ctr.parse_errors);
    assert_int_equal(a->ctr.resyncs, b->ctr.resyncs);
    for (size_t i = 0; i < a->n; i++)
        check(&a->v[i], b->v[i].arr, b->v[i].dep, b->v[i].rq, b->v[i].rs, b->v[i].status,
              b->v[i].flags, b->v[i].cls);
}

static void test_header_split_points(void **state)
{
    (void)state;
    /* The whole streams, to be sure the comparison covers what it should. */
    struct pt *w = run_cuts(C2S, 0, 0, false);
    assert_int_equal(w->n, 6);
    assert_int_equal(w->ctr.parse_errors, 2); /* "1x", then the two lengths of /g's answer */
    check(&w->v[0], 30, 40, 52, 43, 200, 0, "POST /a");
    check(&w->v[1], 30, 40, 74, 59, 200, 0, "GET /b");
    check(&w->v[3], 30, 40, 62, 68, 201, 0, "PUT /d");
    check(&w->v[4], 30, 40, 20, 38, 200, 0, "HEAD /e");
    pt_free(w);
    for (int dir = 0; dir < 2; dir++) {
        size_t n = dir == C2S ? sizeof split_c2s - 1 : sizeof split_s2c - 1;
        for (size_t c1 = 0; c1 <= n; c1++) {
            static const size_t dj[] = {0, 1, 2, 5, 17};
            for (size_t k = 0; k < TB_ARRAY_SIZE(dj) && c1 + dj[k] <= n; k++) {
                struct pt *a = run_cuts(dir, c1, c1 + dj[k], false);
                struct pt *b = run_cuts(dir, c1, c1 + dj[k], true);
                same_exchanges(a, b);
                pt_free(a);
                pt_free(b);
            }
        }
    }
}

static void test_header_limit(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    size_t big = 70 * 1024;
    char *line = malloc(big);
    assert_non_null(line);
    memset(line, 'a', big);
    memcpy(line, "X-Big: ", 7);
    pt_str(t, C2S, "GET /huge HTTP/1.1\r\n", 1);
    for (size_t off = 0; off < big; off += 1400)
        pt_feed(t, C2S, line + off, TB_MIN(1400, big - off), 2);
    assert_int_equal(t->ctr.parse_errors, 1);
    assert_int_equal(t->last, TB_PS_OK);
    pt_str(t, C2S, "\r\nMore: x\r\n\r\nGET /ok HTTP/1.1\r\n\r\n", 3);
    pt_str(t, S2C, "HTTP/1.1 431 Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 4);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 5);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->v[0].status, 431);
    assert_string_equal(t->v[0].cls, "GET /huge");
    check(&t->v[1], 3, 5, 20, 38, 200, 0, "GET /ok");
    free(line);
    pt_free(t);
}

static void test_malformed_resync(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    assert_int_equal(pt_str(t, C2S, "\x16\x03\x01garbage\r\nmore\r\n", 1), TB_PS_ERROR);
    pt_str(t, C2S, "POST /f HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 2);
    assert_int_equal(t->ctr.parse_errors, 2);
    pt_str(t, C2S, "DELETE /u/550e8400-e29b-41d4-a716-446655440000 HTTP/1.1\r\n\r\n", 3);
    pt_str(t, S2C, "HTTP/1.1 400 Bad\r\nContent-Length: 0\r\n\r\n", 4);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 5);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "POST /f");
    assert_int_equal(t->v[0].status, 400);
    assert_string_equal(t->v[1].cls, "DELETE /u/{id}");
    pt_free(t);
}

static void test_inflight_cap(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    for (int i = 0; i < 70; i++)
        pt_str(t, C2S, "GET /r HTTP/1.1\r\n\r\n", i);
    assert_int_equal(t->ctr.inflight_dropped, 6);
    for (int i = 0; i < 70; i++)
        pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 100 + i);
    assert_int_equal(t->n, 64);
    assert_int_equal(t->v[63].arr, 63);
    assert_int_equal(t->v[63].dep, 163);
    /* Untracked ones answered: pairing continues in order. */
    pt_str(t, C2S, "GET /after HTTP/1.1\r\n\r\n", 200);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 201);
    assert_int_equal(t->n, 65);
    check(&t->v[64], 200, 201, 23, 38, 200, 0, "GET /after");
    pt_free(t);
}

static void test_upgrade_and_midstream(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", 1);
    assert_int_equal(
        pt_str(t, S2C, "HTTP/1.1 101 Switching\r\nUpgrade: websocket\r\n\r\n\x81\x05", 2),
        TB_PS_STOP);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].status, 101);
    pt_free(t);

    /* Picked up in the middle of a body: the leftovers are skipped. */
    t = pt_new(&tb_proto_http1, true);
    pt_str(t, S2C, "tail of a body\r\n", 1);
    pt_str(t, C2S, "ody bytes\r\nGET /m HTTP/1.1\r\n\r\n", 2);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 3);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 2, 3, 19, 38, 200, 0, "GET /m");
    pt_free(t);
}

/* Framing corner cases: Content-Length lists, conflicting lengths, a
 * request Transfer-Encoding that is not chunked, a bad chunk-size line,
 * folded and colon-less lines, a hole inside chunk data and inside a
 * close-delimited body, a response cut by the close, a CONNECT tunnel. */
static void test_framing_corners(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "POST /a HTTP/1.1\r\nContent-Length: 3, 3\r\n X-Folded: y\r\nnocolon\r\n\r\nabc",
           1);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n", 2);
    assert_int_equal(t->ctr.parse_errors, 1); /* conflicting lengths */
    pt_str(t, C2S, "POST /b HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 3);
    assert_int_equal(t->ctr.parse_errors, 2);
    pt_str(t, C2S, "GET /c HTTP/1.1\r\n\r\n", 4);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 5);
    assert_int_equal(t->ctr.parse_errors, 3); /* bad chunk size */
    assert_int_equal(t->n, 0); /* /a and /b: their responses were malformed or never came */
    pt_free(t);

    t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /d HTTP/1.1\r\n\r\n", 1);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", 2);
    pt_gap(t, S2C, 13, 3); /* the rest of the chunk */
    pt_str(t, S2C, "\r\n0\r\n\r\n", 4);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 1, 4, 19, 54 + 13 + 7, 200, TB_REQ_GAP, "GET /d");
    pt_str(t, C2S, "GET /e HTTP/1.1\r\n\r\n", 5);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\n\r\nstart", 6);
    pt_gap(t, S2C, 100, 7);
    pt_close(t, -1, 9);
    assert_int_equal(t->n, 2);
    check(&t->v[1], 5, 7, 19, 24 + 100, 200, TB_REQ_GAP | TB_REQ_CLOSE_DELIM, "GET /e");
    pt_free(t);

    /* Cut by the close: emitted as seen, NORESP. */
    t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "GET /f HTTP/1.1\r\n\r\n", 1);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf", 2);
    pt_close(t, S2C, 3);
    assert_int_equal(t->n, 1);
    check(&t->v[0], 1, 2, 19, 44, 200, TB_REQ_NORESP, "GET /f");
    pt_free(t);

    /* CONNECT: once established the bytes are a tunnel's. */
    t = pt_new(&tb_proto_http1, false);
    pt_str(t, C2S, "CONNECT db.example:443 HTTP/1.1\r\n\r\n", 1);
    assert_int_equal(pt_str(t, S2C, "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03", 2),
                     TB_PS_STOP);
    assert_int_equal(t->n, 1);
    assert_string_equal(t->v[0].cls, "CONNECT db.example:443");

    /* After a request-side hole, a request line glued to a body's tail. */
    t->pr->fini(t->st);
    t->pr->init(t->st, false);
    t->n = 0;
    pt_str(t, C2S, "POST /g HTTP/1.1\r\nContent-Length: 50\r\n\r\n0123", 10);
    pt_gap(t, C2S, 0, 11);
    pt_str(t, C2S, "tail}GET /h HTTP/1.1\r\n\r\n", 12);
    pt_str(t, S2C, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 13);
    pt_str(t, S2C, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 14);
    assert_int_equal(t->n, 2);
    check(&t->v[0], 10, 13, 44, 43, 201, TB_REQ_GAP, "POST /g");
    check(&t->v[1], 12, 14, 19, 38, 200, 0, "GET /h");
    pt_free(t);
}

/* Framing fields are recognised by name without regard to ASCII case, and
 * only when the name is exactly right: a space before the colon, a prefix, an
 * obs-fold or a look-alike byte (CR where the '-' goes, which differs from it
 * by the case bit alone) make another field, and the response then runs to
 * the close. */
static void test_field_names(void **state)
{
    (void)state;
    static const struct {
        const char *field;
        bool framed; /* ends the response after "abc" */
    } cases[] = {
        {"Content-Length: 3", true},
        {"CONTENT-LENGTH: 3", true},
        {"cOnTeNt-LeNgTh:3", true},
        {"Content-Length:   3  ", true},
        {"Content-Length : 3", false},
        {"Content\rLength: 3", false},
        {"Content\x0dLength: 3", false},
        {"Content_Length: 3", false},
        {"X-Content-Length: 3", false},
        {"Content-Lengths: 3", false},
        {" Content-Length: 3", false},
        {"Content-Length", false},
        {"Content-Lengt: 3", false},
        {"Transfer-Encoding: chunked", true},
        {"TRANSFER-ENCODING: CHUNKED", true},
        {"transfer-encoding:gzip, chunked", true},
        {"Transfer\x0d" "Encoding: chunked", false},
        {"Transfer-Encoding : chunked", false},
        {"\tTransfer-Encoding: chunked", false},
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(cases); i++) {
        struct pt *t = pt_new(&tb_proto_http1, false);
        bool chunked = strcasestr(cases[i].field, "chunked") != NULL;
        char resp[200];
        snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\n%s\r\n\r\n%s", cases[i].field,
                 chunked ? "3\r\nabc\r\n0\r\n\r\n" : "abc");
        pt_str(t, C2S, "GET /x HTTP/1.1\r\n\r\n", 1);
        pt_str(t, S2C, resp, 2);
        if (t->n != (cases[i].framed ? 1u : 0u))
            fprintf(stderr, "field \"%s\": %zu exchanges\n", cases[i].field, t->n);
        if (cases[i].framed) {
            assert_int_equal(t->n, 1);
            check(&t->v[0], 1, 2, 19, strlen(resp), 200, 0, "GET /x");
        } else {
            assert_int_equal(t->n, 0); /* delimited by the close */
            pt_close(t, S2C, 3);
            assert_int_equal(t->n, 1);
            check(&t->v[0], 1, 2, 19, strlen(resp), 200, TB_REQ_CLOSE_DELIM, "GET /x");
        }
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
    }
}

/* The request target ends at its first byte below 0x21, which must be the
 * space before the version; DEL or a control byte anywhere in it makes the
 * line malformed, bytes of 0x80 and above are kept. Every length and every
 * position, so that the word-at-a-time scan meets each alignment. */
static void test_target_bytes(void **state)
{
    (void)state;
    static const unsigned char bad[] = {0x00, 0x09, 0x0d, 0x1f, 0x20, 0x7f};
    static const unsigned char good[] = {0x21, 0x7e, 0x80, 0xff, '%'};
    for (size_t len = 1; len <= 40; len++) {
        for (size_t pos = 1; pos < len; pos++) {
            for (size_t b = 0; b < sizeof bad + sizeof good; b++) {
                unsigned char c = b < sizeof bad ? bad[b] : good[b - sizeof bad];
                char line[80];
                size_t n = 0;
                memcpy(line, "GET ", 4);
                n = 4;
                for (size_t k = 0; k < len; k++)
                    line[n++] = k == 0 ? '/' : k == pos ? (char)c : 'a';
                memcpy(line + n, " HTTP/1.1\r\n\r\n", 13);
                n += 13;
                struct pt *t = pt_new(&tb_proto_http1, false);
                pt_feed(t, C2S, line, n, 1);
                pt_str(t, S2C, "HTTP/1.1 204 No Content\r\n\r\n", 2);
                if (b < sizeof bad) {
                    assert_int_equal(t->ctr.parse_errors, 1);
                    assert_int_equal(t->n, 0);
                } else {
                    assert_int_equal(t->ctr.parse_errors, 0);
                    assert_int_equal(t->n, 1);
                    assert_int_equal(t->v[0].rq, n);
                }
                pt_free(t);
            }
        }
    }
}

static void test_detect(void **state)
{
    (void)state;
    bool cs = false;
    const struct tb_proto *p = &tb_proto_http1;
    assert_int_equal(p->detect((const uint8_t *)"GET / HTTP/1.1\r\n", 16, TB_DIR_C2S, &cs),
                     TB_DETECT_YES);
    assert_true(cs);
    /* Seen from the side wrongly taken for the client: the content decides. */
    assert_int_equal(p->detect((const uint8_t *)"HTTP/1.1 200 OK\r\n", 17, TB_DIR_C2S, &cs),
                     TB_DETECT_YES);
    assert_false(cs);
    assert_int_equal(p->detect((const uint8_t *)"PO", 2, TB_DIR_C2S, &cs), TB_DETECT_MAYBE);
    assert_int_equal(p->detect((const uint8_t *)"GET / SSH-2.0\r\n", 15, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    assert_int_equal(p->detect((const uint8_t *)"\x16\x03\x01\x02\x00", 5, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    assert_int_equal(p->detect((const uint8_t *)"\x05\x00\x00\x00\x0e", 5, TB_DIR_C2S, &cs),
                     TB_DETECT_NO);
    assert_ptr_equal(tb_proto_find("http"), &tb_proto_http1);
    assert_ptr_equal(tb_proto_find("mysql"), &tb_proto_mysql);
    assert_ptr_equal(tb_proto_find("generic"), &tb_proto_generic);
    assert_null(tb_proto_find("gopher"));
    assert_ptr_equal(tb_protos[0], &tb_proto_http1);
    /* Generic accepts anything: it must come last. */
    size_t np = 0;
    while (tb_protos[np])
        np++;
    assert_true(np >= 3);
    assert_ptr_equal(tb_protos[np - 1], &tb_proto_generic);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_timestamps_across_chunks),
        cmocka_unit_test(test_chunked_trailers),
        cmocka_unit_test(test_100_continue),
        cmocka_unit_test(test_304_204_no_body),
        cmocka_unit_test(test_close_delimited),
        cmocka_unit_test(test_gap_in_body),
        cmocka_unit_test(test_snaplen_gaps),
        cmocka_unit_test(test_gap_in_headers),
        cmocka_unit_test(test_lost_segments),
        cmocka_unit_test(test_header_limit),
        cmocka_unit_test(test_header_split_points),
        cmocka_unit_test(test_malformed_resync),
        cmocka_unit_test(test_inflight_cap),
        cmocka_unit_test(test_upgrade_and_midstream),
        cmocka_unit_test(test_framing_corners),
        cmocka_unit_test(test_field_names),
        cmocka_unit_test(test_target_bytes),
        cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
