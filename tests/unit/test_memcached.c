/* SPDX-License-Identifier: MIT */
/* test_memcached.c — the memcached parser on hand-built text and binary
 * sequences: storage with data blocks, single and multi-key retrievals, the
 * text answers' statuses, noreply, meta commands with quiet mode, stats,
 * binary requests with quiet opcodes and multi-packet stats, watch streams,
 * data split across packets, capture holes, mid-stream pickup, detection;
 * then the fuzz driver's invariants over the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto-test.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

#define C(t, str, ts) pt_str((t), C2S, (str), (ts))
#define S(t, str, ts) pt_str((t), S2C, (str), (ts))

static void run_text(size_t step)
{
    struct pt *t = pt_new(&tb_proto_memcached, false);
    static const char *const x[][2] = {
        {"set k1 0 0 5\r\nhello\r\n", "STORED\r\n"},
        /* the data holds what would end an answer */
        {"get k1\r\n", "VALUE k1 0 7\r\nEND\r\nab\r\nEND\r\n"},
        {"get nope\r\n", "END\r\n"},
        {"gets k1 k2 k3\r\n", "VALUE k1 0 1 9\r\na\r\nVALUE k3 0 1 10\r\nb\r\nEND\r\n"},
        {"gat 100 k1 k2\r\n", "VALUE k1 0 1\r\na\r\nVALUE k2 0 1\r\nb\r\nEND\r\n"},
        {"delete k9\r\n", "NOT_FOUND\r\n"},
        {"incr n 5\r\n", "42\r\n"},
        {"touch k1 10\r\n", "TOUCHED\r\n"},
        {"cas k1 0 0 2 77\r\nhi\r\n", "EXISTS\r\n"},
        {"add k1 0 0 1\r\nz\r\n", "NOT_STORED\r\n"},
        {"stats\r\n", "STAT pid 1\r\nSTAT uptime 5\r\nEND\r\n"},
        {"bogus\r\n", "ERROR\r\n"},
    };
    int64_t ts = 100;
    for (size_t i = 0; i < TB_ARRAY_SIZE(x); i++) {
        pt_feed_split(t, C2S, x[i][0], strlen(x[i][0]), ts, step);
        pt_feed_split(t, S2C, x[i][1], strlen(x[i][1]), ts + 10, step);
        ts += 100;
    }
    static const char *const cls[] = {"set", "get", "get", "gets 3-4 keys", "gat 2 keys",
                                      "delete", "incr", "touch", "cas", "add", "stats",
                                      "unknown"};
    static const int32_t st[] = {0, 0, 1, 1, 0, 1, 0, 0, 2, 5, 0, 0x81};
    assert_true(t->n >= TB_ARRAY_SIZE(cls));
    for (size_t i = 0; i < TB_ARRAY_SIZE(cls); i++) {
        assert_string_equal(t->v[i].cls, cls[i]);
        assert_int_equal(t->v[i].status, st[i]);
        assert_int_equal(t->v[i].arr, 100 + 100 * (int64_t)i);
        assert_int_equal(t->v[i].dep, 110 + 100 * (int64_t)i);
        assert_int_equal(t->v[i].rq, strlen(x[i][0]));
        assert_int_equal(t->v[i].rs, strlen(x[i][1]));
    }
    assert_int_equal(t->n, TB_ARRAY_SIZE(cls));
    assert_int_equal(t->ctr.parse_errors, 0);
    if (step == 0) {
        /* "set k 0 0 x" has no length to frame a data block: the exchange is
         * lost, and the next command (a chunk of its own) picks up again. */
        C(t, "set k 0 0 x\r\n", 2000);
        S(t, "CLIENT_ERROR bad command line format\r\n", 2010);
        C(t, "version\r\n", 2100);
        S(t, "VERSION 1.6.18\r\n", 2110);
        assert_int_equal(t->n, TB_ARRAY_SIZE(cls) + 1);
        assert_string_equal(t->v[t->n - 1].cls, "version");
        assert_int_equal(t->v[t->n - 1].dep, 2110);
        assert_int_equal(t->ctr.parse_errors, 1);
    }
    pt_free(t);
}

static void test_text(void **state)
{
    (void)state;
    run_text(0);
    run_text(1);
    run_text(4);
}

static void test_noreply_and_pipeline(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_memcached, false);
    C(t, "set a 0 0 1 noreply\r\nx\r\nset b 0 0 1 noreply\r\ny\r\ndelete c noreply\r\n"
         "get a b\r\nincr n 1 noreply\r\nget a\r\n", 100);
    S(t, "VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n", 110);
    S(t, "VALUE a 0 1\r\nx\r\nEND\r\n", 120);
    C(t, "quit\r\n", 200);
    pt_close(t, 0, 210);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "get 2 keys");
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[0].status, 0);
    assert_string_equal(t->v[1].cls, "get");
    assert_int_equal(t->v[1].dep, 120);
    assert_int_equal(t->ctr.unanswered, 4);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_meta(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_memcached, false);
    C(t, "ms k 2 T0\r\nhi\r\n", 100);
    S(t, "HD\r\n", 110);
    C(t, "mg k v f\r\n", 200);
    S(t, "VA 2 f0\r\nhi\r\n", 210);
    /* Quiet: the miss (EN) and the store (HD) are never answered. */
    /* The hit's returned key (k) tells it from the silent miss before it. */
    C(t, "mg miss v q k\r\nms k2 1 q\r\nx\r\nmg k v q k\r\nmn\r\n", 300);
    S(t, "VA 2 kk\r\nhi\r\nMN\r\n", 310);
    /* So does an opaque. */
    C(t, "mg a v q Oa1\r\nmg b v q Ob2\r\nmn\r\n", 350);
    S(t, "VA 1 Ob2\r\nx\r\nMN\r\n", 360);
    C(t, "md k q\r\nmn\r\n", 400);
    S(t, "MN\r\n", 410);
    assert_int_equal(t->n, 7);
    assert_string_equal(t->v[0].cls, "ms");
    assert_int_equal(t->v[0].dep, 110);
    assert_string_equal(t->v[1].cls, "mg");
    assert_int_equal(t->v[1].dep, 210);
    assert_int_equal(t->v[1].rs, 13);
    assert_string_equal(t->v[2].cls, "mg");
    assert_int_equal(t->v[2].arr, 300);
    assert_int_equal(t->v[2].rs, 13);
    assert_string_equal(t->v[3].cls, "mn");
    assert_int_equal(t->v[3].rs, 4);
    assert_int_equal(t->v[4].rs, 13);
    assert_string_equal(t->v[6].cls, "mn");
    assert_int_equal(t->v[6].dep, 410);
    assert_int_equal(t->ctr.unanswered, 4);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

/* A binary packet: header, extras, key, value. */
static size_t bin(uint8_t *o, uint8_t magic, uint8_t op, const char *key, size_t extras,
                  const char *val, uint16_t status, uint32_t opaque)
{
    size_t kl = key ? strlen(key) : 0, vl = val ? strlen(val) : 0;
    uint32_t body = (uint32_t)(extras + kl + vl);
    memset(o, 0, 24 + extras);
    o[0] = magic;
    o[1] = op;
    o[2] = (uint8_t)(kl >> 8);
    o[3] = (uint8_t)kl;
    o[4] = (uint8_t)extras;
    o[6] = (uint8_t)(status >> 8);
    o[7] = (uint8_t)status;
    o[8] = (uint8_t)(body >> 24);
    o[9] = (uint8_t)(body >> 16);
    o[10] = (uint8_t)(body >> 8);
    o[11] = (uint8_t)body;
    o[12] = (uint8_t)(opaque >> 24);
    o[15] = (uint8_t)opaque;
    memcpy(o + 24 + extras, key ? key : "", kl);
    memcpy(o + 24 + extras + kl, val ? val : "", vl);
    return 24 + body;
}

static void test_binary(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_memcached, false);
    uint8_t b[1024];
    size_t n = bin(b, 0x80, 0x01, "k", 8, "hello", 0, 1); /* Set */
    pt_feed(t, C2S, b, n, 100);
    n = bin(b, 0x81, 0x01, NULL, 0, NULL, 0, 1);
    pt_feed(t, S2C, b, n, 110);
    n = bin(b, 0x80, 0x00, "nope", 0, NULL, 0, 2); /* Get, a miss */
    pt_feed(t, C2S, b, n, 200);
    n = bin(b, 0x81, 0x00, NULL, 0, "Not found", 1, 2);
    pt_feed(t, S2C, b, n, 210);
    /* A quiet batch: GetQ (miss: silent), GetKQ (hit), SetQ (ok: silent), Noop. */
    n = bin(b, 0x80, 0x09, "miss", 0, NULL, 0, 3);
    n += bin(b + n, 0x80, 0x0d, "k", 0, NULL, 0, 4);
    n += bin(b + n, 0x80, 0x11, "k2", 8, "v", 0, 5);
    n += bin(b + n, 0x80, 0x0a, NULL, 0, NULL, 0, 6);
    pt_feed(t, C2S, b, n, 300);
    n = bin(b, 0x81, 0x0d, "k", 4, "hello", 0, 4);
    size_t n1 = n;
    n += bin(b + n, 0x81, 0x0a, NULL, 0, NULL, 0, 6);
    pt_feed(t, S2C, b, n1, 310);
    pt_feed(t, S2C, b + n1, n - n1, 320);
    /* Stat: one packet per statistic, ended by an empty one. */
    n = bin(b, 0x80, 0x10, NULL, 0, NULL, 0, 7);
    pt_feed(t, C2S, b, n, 400);
    n = bin(b, 0x81, 0x10, "pid", 0, "123", 0, 7);
    n += bin(b + n, 0x81, 0x10, "uptime", 0, "9", 0, 7);
    pt_feed(t, S2C, b, n, 410);
    n = bin(b, 0x81, 0x10, NULL, 0, NULL, 0, 7);
    pt_feed(t, S2C, b, n, 420);
    n = bin(b, 0x80, 0x17, NULL, 0, NULL, 0, 8); /* QuitQ */
    pt_feed(t, C2S, b, n, 500);
    pt_close(t, 0, 510);
    assert_int_equal(t->n, 5);
    assert_string_equal(t->v[0].cls, "set");
    assert_int_equal(t->v[0].rq, 24 + 8 + 1 + 5);
    assert_int_equal(t->v[0].dep, 110);
    assert_string_equal(t->v[1].cls, "get");
    assert_int_equal(t->v[1].status, 1);
    assert_string_equal(t->v[2].cls, "getkq");
    assert_int_equal(t->v[2].arr, 300);
    assert_int_equal(t->v[2].dep, 310);
    assert_int_equal(t->v[2].rs, 24 + 4 + 1 + 5);
    assert_string_equal(t->v[3].cls, "noop");
    assert_int_equal(t->v[3].dep, 320);
    assert_int_equal(t->v[3].rs, 24);
    assert_string_equal(t->v[4].cls, "stat");
    assert_int_equal(t->v[4].dep, 420);
    assert_int_equal(t->v[4].rs, 24 * 3 + 6 + 7);
    assert_int_equal(t->ctr.unanswered, 2);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_split_gaps_close(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_memcached, false);
    char big[2100];
    int h = snprintf(big, sizeof big, "set big 0 0 2000\r\n");
    memset(big + h, 'v', 2000);
    memcpy(big + h + 2000, "\r\n", 2);
    size_t bn = (size_t)h + 2002;
    pt_feed(t, C2S, big, 700, 100);
    pt_gap(t, C2S, 600, TB_TS_UNKNOWN); /* inside the data block */
    pt_feed(t, C2S, big + 1300, bn - 1300, 102);
    S(t, "STORED\r\n", 110);
    C(t, "get big\r\n", 200);
    char ans[2100];
    h = snprintf(ans, sizeof ans, "VALUE big 0 2000\r\n");
    memset(ans + h, 'v', 2000);
    memcpy(ans + h + 2000, "\r\nEND\r\n", 7);
    size_t an = (size_t)h + 2007;
    pt_feed(t, S2C, ans, 1000, 210);
    pt_gap(t, S2C, 500, 215); /* a snaplen cut: the hole has its packet's time */
    pt_feed(t, S2C, ans + 1500, an - 1500, 220);
    /* A hole across answers, one command outstanding: closed by the next. */
    C(t, "stats\r\n", 300);
    S(t, "STAT pid 1\r\n", 310);
    pt_gap(t, S2C, 0, TB_TS_UNKNOWN);
    C(t, "version\r\n", 400);
    S(t, "VERSION 1\r\n", 410);
    /* Close mid-answer. */
    C(t, "stats\r\n", 500);
    S(t, "STAT pid 1\r\n", 510);
    pt_close(t, -1, 520);
    assert_int_equal(t->n, 5);
    assert_int_equal(t->v[0].rq, bn);
    assert_true(t->v[0].flags & TB_REQ_GAP);
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[1].dep, 220);
    assert_int_equal(t->v[1].rs, an);
    assert_true(t->v[1].flags & TB_REQ_GAP);
    assert_int_equal(t->v[2].dep, 310);
    assert_true(t->v[2].flags & TB_REQ_GAP);
    assert_int_equal(t->v[3].arr, 400);
    assert_int_equal(t->v[3].dep, 410);
    assert_true(t->v[4].flags & TB_REQ_NORESP);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_midstream_and_watch(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_memcached, true);
    S(t, "lue\r\nEND\r\n", 10);
    C(t, "xx\r\n", 20);
    C(t, "get k\r\n", 100);
    S(t, "END\r\n", 110);
    assert_int_equal(C(t, "watch fetchers\r\n", 200), TB_PS_STOP);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->ctr.streams, 1);
    pt_free(t);
    t = pt_new(&tb_proto_memcached, true);
    uint8_t b[256];
    size_t n = bin(b, 0x80, 0x00, "k", 0, NULL, 0, 9);
    pt_feed(t, C2S, b, n, 100);
    n = bin(b, 0x81, 0x00, NULL, 4, "v", 0, 9);
    pt_feed(t, S2C, b, n, 110);
    assert_int_equal(t->n, 1);
    assert_string_equal(t->v[0].cls, "get");
    assert_int_equal(t->v[0].dep, 110);
    pt_free(t);
}

static void test_detect(void **state)
{
    (void)state;
    const struct tb_proto *p = &tb_proto_memcached;
    bool cs = false;
#define D(str, dir) p->detect((const uint8_t *)(str), sizeof(str) - 1, (dir), &cs)
    assert_int_equal(D("get k\r\n", C2S), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(D("set k 0 0 5\r\nhello\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("stats\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("set k v\r\n", C2S), TB_DETECT_NO);
    assert_int_equal(D("incr k\r\n", C2S), TB_DETECT_NO);
    cs = true;
    assert_int_equal(D("END\r\n", C2S), TB_DETECT_YES);
    assert_false(cs);
    assert_int_equal(D("VALUE k 0 1\r\nx\r\nEND\r\n", S2C), TB_DETECT_YES);
    assert_int_equal(D("+OK\r\n", S2C), TB_DETECT_NO);
    assert_int_equal(D("GET / HTTP/1.1\r\n", C2S), TB_DETECT_NO);
    uint8_t b[64];
    size_t n = bin(b, 0x80, 0x00, "k", 0, NULL, 0, 1);
    assert_int_equal(p->detect(b, n, C2S, &cs), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(p->detect(b, 10, C2S, &cs), TB_DETECT_MAYBE);
    b[5] = 1; /* data type must be raw */
    assert_int_equal(p->detect(b, n, C2S, &cs), TB_DETECT_NO);
#undef D
    assert_ptr_equal(tb_proto_find("memcached"), p);
}

static void test_invariants(void **state)
{
    (void)state;
    static const char cl[] = "set a 0 0 1\r\nx\r\nget a b\r\nset c 0 0 1 noreply\r\ny\r\n"
                             "mg a v q\r\nmn\r\nstats\r\nincr n 1\r\n";
    static const char sv[] = "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\nVA 1\r\nx\r\nMN\r\n"
                             "STAT a 1\r\nEND\r\n2\r\n";
    uint8_t in[512];
    size_t cn = sizeof cl - 1, sn = sizeof sv - 1;
    for (int seed = 0; seed < 256; seed++) {
        in[0] = (uint8_t)seed;
        in[1] = (uint8_t)cn;
        in[2] = 0;
        memcpy(in + 3, cl, cn);
        memcpy(in + 3 + cn, sv, sn);
        pt_fuzz_drive(&tb_proto_memcached, in, 3 + cn + sn);
    }
    /* The binary protocol likewise. */
    size_t n = bin(in + 3, 0x80, 0x09, "k", 0, NULL, 0, 1);
    n += bin(in + 3 + n, 0x80, 0x0a, NULL, 0, NULL, 0, 2);
    size_t split = n;
    n += bin(in + 3 + n, 0x81, 0x0a, NULL, 0, NULL, 0, 2);
    for (int seed = 0; seed < 256; seed++) {
        in[0] = (uint8_t)seed;
        in[1] = (uint8_t)split;
        in[2] = 0;
        pt_fuzz_drive(&tb_proto_memcached, in, 3 + n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_noreply_and_pipeline),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_split_gaps_close),
        cmocka_unit_test(test_midstream_and_watch),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
