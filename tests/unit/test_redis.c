/* SPDX-License-Identifier: MIT */
/* test_redis.c — the Redis parser on hand-built RESP2/RESP3 byte sequences:
 * single commands, pipelines, MULTI/EXEC, inline commands, container
 * commands' classes, nested and RESP3 replies (maps, pushes, attributes,
 * blob errors), error statuses, CLIENT REPLY, pub/sub and MONITOR streams,
 * values split across packets, capture holes, mid-stream pickup, detection;
 * then the fuzz driver's invariants over the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto-test.h"

#define C2S TB_DIR_C2S
#define S2C TB_DIR_S2C

/* A command as an array of bulk strings, built from space-separated words. */
static size_t cmd(char *out, size_t cap, const char *words)
{
    const char *w[16];
    size_t wl[16], n = 0;
    for (const char *p = words; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        w[n] = p;
        while (*p && *p != ' ')
            p++;
        wl[n] = (size_t)(p - w[n]);
        n++;
    }
    size_t o = (size_t)snprintf(out, cap, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, "$%zu\r\n%.*s\r\n", wl[i], (int)wl[i], w[i]);
    assert_true(o < cap);
    return o;
}

static int c(struct pt *t, const char *words, int64_t ts)
{
    char b[512];
    size_t n = cmd(b, sizeof b, words);
    return pt_feed(t, C2S, b, n, ts);
}

static void s(struct pt *t, const char *reply, int64_t ts) { pt_str(t, S2C, reply, ts); }

static void run_basic(size_t step)
{
    struct pt *t = pt_new(&tb_proto_redis, false);
    char b[256];
    size_t n = cmd(b, sizeof b, "SET key:1 hello");
    pt_feed_split(t, C2S, b, n, 100, step);
    pt_feed_split(t, S2C, "+OK\r\n", 5, 110, step);
    n = cmd(b, sizeof b, "get key:1");
    pt_feed_split(t, C2S, b, n, 200, step);
    pt_feed_split(t, S2C, "$5\r\nhello\r\n", 11, 210, step);
    n = cmd(b, sizeof b, "GET nope");
    pt_feed_split(t, C2S, b, n, 300, step);
    pt_feed_split(t, S2C, "$-1\r\n", 5, 310, step);
    n = cmd(b, sizeof b, "INCR key:1");
    pt_feed_split(t, C2S, b, n, 400, step);
    static const char err[] = "-WRONGTYPE Operation against a key holding the wrong kind\r\n";
    pt_feed_split(t, S2C, err, sizeof err - 1, 410, step);
    n = cmd(b, sizeof b, "FOO");
    pt_feed_split(t, C2S, b, n, 500, step);
    static const char err2[] = "-ERR unknown command 'FOO'\r\n";
    pt_feed_split(t, S2C, err2, sizeof err2 - 1, 510, step);
    assert_int_equal(t->n, 5);
    assert_string_equal(t->v[0].cls, "SET");
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[0].rq, 35);
    assert_int_equal(t->v[0].rs, 5);
    assert_int_equal(t->v[0].status, 0);
    assert_string_equal(t->v[1].cls, "GET");
    assert_int_equal(t->v[1].rs, 11);
    assert_int_equal(t->v[2].status, 0); /* a miss is no error */
    assert_string_equal(t->v[3].cls, "INCR");
    assert_int_equal(t->v[3].status, 2); /* WRONGTYPE */
    assert_int_equal(t->v[4].status, 1); /* ERR */
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_basic(void **state)
{
    (void)state;
    run_basic(0);
    run_basic(1);
    run_basic(3);
}

/* redis-benchmark -P 16: sixteen commands in one packet are sixteen requests. */
static void test_pipeline(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    char b[4096];
    size_t n = 0;
    for (int i = 0; i < 16; i++)
        n += cmd(b + n, sizeof b - n, i % 2 ? "GET key:000000000042" : "SET key:000000000042 xxx");
    pt_feed(t, C2S, b, n, 100);
    char r[512];
    size_t rn = 0;
    for (int i = 0; i < 16; i++)
        rn += (size_t)snprintf(r + rn, sizeof r - rn, "%s", i % 2 ? "$3\r\nxxx\r\n" : "+OK\r\n");
    /* The first 5 replies and half the sixth in one packet, the rest later. */
    size_t cut = 0;
    for (int i = 0; i < 5; i++)
        cut += i % 2 ? 9 : 5;
    pt_feed(t, S2C, r, cut + 4, 110);
    assert_int_equal(t->n, 5);
    pt_feed(t, S2C, r + cut + 4, rn - cut - 4, 120);
    assert_int_equal(t->n, 16);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(t->v[i].arr, 100);
        assert_int_equal(t->v[i].dep, i < 5 ? 110 : 120);
        assert_string_equal(t->v[i].cls, i % 2 ? "GET" : "SET");
    }
    /* Two classes, each looked up once: the other 14 requests take the id
     * their slot kept (and pt_emit checked it names their class). */
    assert_int_equal(t->ids_reused, 14);
    pt_free(t);
}

/* The class a command should have, worked out here independently: its name
 * in upper case, with the subcommand for CONFIG and CLIENT, "unknown" for a
 * name with other characters than letters, digits and _-.|: */
static void expect_class(const char *words, char *out, size_t cap)
{
    size_t n = 0, w = 0;
    bool sub = strncasecmp(words, "CONFIG ", 7) == 0 || strncasecmp(words, "CLIENT ", 7) == 0;
    for (const char *p = words; *p && n + 1 < cap; p++) {
        if (*p == ' ' && (++w > 1 || !sub))
            break;
        char ch = *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        if (!(ch == ' ' || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("_-.|:", ch))) {
            snprintf(out, cap, "unknown");
            return;
        }
        out[n++] = ch;
    }
    out[n] = '\0';
}

/* The fast paths (a command's first bytes as a slot's command was sent, a
 * pipeline of slotted commands in one loop, its replies in another) against
 * what the test works out itself: seeded pipelines of names in several
 * spellings and argument counts (the same name with one argument more, names
 * of 1 to 12 bytes, lengths of one to three digits, container commands),
 * answered by every kind of scalar reply, fed whole, then one byte per chunk
 * (which only the general path reads) and three. Class, status and both
 * sizes of every request must be the expected ones in all three. */
static void test_fast_paths_agree(void **state)
{
    (void)state;
    static const char *const names[] = {"GET", "get", "SET", "Set", "INCR", "DEL",
                                        "EXISTS", "HGETALL", "a", "LONGCOMMANDX",
                                        "CONFIG", "GETX"};
    static const char *const replies[] = {"+OK\r\n", "$3\r\nabc\r\n", "$-1\r\n", ":12\r\n",
                                          "-ERR x\r\n", "-WRONGTYPE y\r\n",
                                          "$12\r\nhello world!\r\n", "+QUEUED\r\n"};
    static const int32_t rstatus[] = {0, 0, 0, 0, 1, 2, 0, 0};
    enum { ROUNDS = 6, PER = 40 };
    static char cl[ROUNDS][PER * 400], sv[ROUNDS][PER * 32];
    size_t cn[ROUNDS], sn[ROUNDS];
    static char ecls[ROUNDS * PER][64];
    uint64_t erq[ROUNDS * PER], ers[ROUNDS * PER];
    int32_t est[ROUNDS * PER];
    uint32_t x = 12345;
    size_t want = 0;
    for (size_t k = 0; k < ROUNDS; k++) {
        cn[k] = sn[k] = 0;
        for (size_t i = 0; i < PER; i++) {
            x = x * 1103515245u + 12345u;
            const char *nm = names[(x >> 8) % (sizeof names / sizeof names[0])];
            char words[400];
            size_t wn = (size_t)snprintf(words, sizeof words, "%s", nm);
            if (strcmp(nm, "CONFIG") == 0)
                wn += (size_t)snprintf(words + wn, sizeof words - wn, " GET");
            size_t extra = 1 + (x >> 16) % 3; /* one to three arguments */
            for (size_t a = 0; a < extra; a++) {
                size_t klen = (x >> (a * 5 + 3)) % 7 == 0 ? 120 : 1 + (x >> (a * 3)) % 14;
                words[wn++] = ' ';
                for (size_t b = 0; b < klen; b++)
                    words[wn++] = (char)('k' + (b % 5));
                words[wn] = '\0';
            }
            size_t before = cn[k];
            cn[k] += cmd(cl[k] + cn[k], sizeof cl[k] - cn[k], words);
            expect_class(words, ecls[want], sizeof ecls[0]);
            erq[want] = cn[k] - before;
            size_t r = (x >> 20) % (sizeof replies / sizeof replies[0]);
            sn[k] += (size_t)snprintf(sv[k] + sn[k], sizeof sv[k] - sn[k], "%s", replies[r]);
            ers[want] = strlen(replies[r]);
            est[want] = rstatus[r];
            want++;
        }
    }
    static const size_t steps[] = {0, 1, 3};
    for (size_t si = 0; si < 3; si++) {
        struct pt *t = pt_new(&tb_proto_redis, false);
        for (size_t k = 0; k < ROUNDS; k++) {
            int64_t ts = (int64_t)(1000 * (k + 1));
            pt_feed_split(t, C2S, cl[k], cn[k], ts, steps[si]);
            pt_feed_split(t, S2C, sv[k], sn[k], ts + 7, steps[si]);
        }
        assert_int_equal(t->n, want);
        for (size_t i = 0; i < want; i++) {
            const struct pt_ex *e = &t->v[i];
            if (strcmp(e->cls, ecls[i]) != 0 || e->rq != erq[i] || e->rs != ers[i] ||
                e->status != est[i] || e->arr != (int64_t)(1000 * (i / PER + 1)) ||
                e->dep != e->arr + 7)
                fail_msg("step %zu, request %zu: class '%s' want '%s', %llu/%llu bytes want "
                         "%llu/%llu, status %d want %d",
                         steps[si], i, e->cls, ecls[i], (unsigned long long)e->rq,
                         (unsigned long long)e->rs, (unsigned long long)erq[i],
                         (unsigned long long)ers[i], (int)e->status, (int)est[i]);
        }
        pt_free(t);
    }
}

/* Pipelines mixing more classes than a connection keeps slots for (four),
 * in several spellings, names longer than eight bytes, container commands
 * and unknown names; rounds that change the mix, so slots are replaced while
 * others are still named by queued commands. Every class must be the one
 * worked out above, and every catalog id the parser hands back must name the
 * text it comes with (pt_emit aborts otherwise). */
static void test_class_slots(void **state)
{
    (void)state;
    static const char *const rounds[][8] = {
        {"GET k", "set k v", "Get k", "INCR k", "DEL k", "EXISTS k", "TTL k", "LPUSH l x"},
        {"TTL k", "GET k", "HGET h f", "get k", "CONFIG GET maxmemory", "ZRANGEBYSCORE z 0 1",
         "SET k v", "DEL k"},
        {"G\x01T k", "PING", "PING", "ECHO x", "SUNIONSTORE d a b", "client setname x",
         "ping", "GET k"},
        {"SET k v", "SET k v", "SET k v", "GET k", "GET k", "MGET a b", "MSET a 1", "GET k"},
    };
    static const char half1[] = "+OK\r\n:1\r\n$1\r\nv\r\n+OK\r\n";
    static const char half2[] = "$-1\r\n:0\r\n*0\r\n+PONG\r\n";
    const size_t nr = sizeof rounds / sizeof rounds[0];
    for (size_t step = 0; step < 8; step += 7) {
        struct pt *t = pt_new(&tb_proto_redis, false);
        size_t want = 0;
        char expect[64][64];
        /* Each round's commands, then the rest of the replies to the round
         * before (so that its last four commands are still queued while
         * these take slots), then half the replies to this one. */
        for (size_t k = 0; k < 2 * nr; k++) {
            const char *const *round = rounds[k % nr];
            char b[2048];
            size_t n = 0;
            for (size_t i = 0; i < 8; i++) {
                n += cmd(b + n, sizeof b - n, round[i]);
                expect_class(round[i], expect[want % 64], sizeof expect[0]);
                want++;
            }
            int64_t ts = (int64_t)(1000 * (k + 1));
            pt_feed_split(t, C2S, b, n, ts, step);
            if (k > 0)
                pt_feed_split(t, S2C, half2, sizeof half2 - 1, ts + 1, step);
            pt_feed_split(t, S2C, half1, sizeof half1 - 1, ts + 2, step);
        }
        pt_feed_split(t, S2C, half2, sizeof half2 - 1, 100000, step);
        assert_int_equal(t->emitted, want);
        assert_int_equal(t->n, want);
        for (size_t i = 0; i < want; i++) {
            if (strcmp(t->v[i].cls, expect[i % 64]) != 0)
                fail_msg("request %zu: class '%s', expected '%s'", i, t->v[i].cls,
                         expect[i % 64]);
        }
        assert_true(t->ids_reused > 0); /* the slots' ids are used, and were right */
        assert_int_equal(t->ctr.parse_errors, 0);
        pt_free(t);
    }
}

static void test_multi_exec_and_nesting(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    c(t, "MULTI", 100);
    c(t, "SET a 1", 101);
    c(t, "INCR b", 102);
    c(t, "LRANGE l 0 -1", 103);
    c(t, "EXEC", 104);
    s(t, "+OK\r\n+QUEUED\r\n+QUEUED\r\n", 110);
    s(t, "+QUEUED\r\n*3\r\n+OK\r\n-WRONGTYPE no\r\n*2\r\n$1\r\na\r\n*0\r\n", 120);
    assert_int_equal(t->n, 5);
    assert_string_equal(t->v[0].cls, "MULTI");
    assert_string_equal(t->v[3].cls, "LRANGE");
    assert_int_equal(t->v[3].arr, 103);
    assert_int_equal(t->v[3].dep, 120);
    assert_string_equal(t->v[4].cls, "EXEC");
    assert_int_equal(t->v[4].status, 0); /* an error inside EXEC's array is not EXEC's */
    /* Null and empty aggregates end a value. */
    c(t, "LRANGE none 0 -1", 200);
    s(t, "*0\r\n", 210);
    c(t, "BLPOP l 1", 300);
    s(t, "*-1\r\n", 310);
    assert_int_equal(t->n, 7);
    assert_int_equal(t->v[6].dep, 310);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_inline_and_classes(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    pt_str(t, C2S, "PING\r\n", 100);
    s(t, "+PONG\r\n", 110);
    pt_str(t, C2S, "\r\n", 150); /* an empty line: no reply */
    pt_str(t, C2S, "config   get maxmemory\r\n", 200);
    s(t, "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n", 210);
    c(t, "client setname bench", 300);
    s(t, "+OK\r\n", 310);
    c(t, "CLIENT", 400);
    s(t, "-ERR wrong number of arguments\r\n", 410);
    c(t, "GET\x01x", 500);
    s(t, "-ERR unknown command\r\n", 510);
    assert_int_equal(t->n, 5);
    assert_string_equal(t->v[0].cls, "PING");
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 110);
    assert_int_equal(t->v[0].rq, 6);
    assert_string_equal(t->v[1].cls, "CONFIG GET");
    assert_int_equal(t->v[1].arr, 200);
    assert_string_equal(t->v[2].cls, "CLIENT SETNAME");
    assert_string_equal(t->v[3].cls, "CLIENT");
    assert_string_equal(t->v[4].cls, "unknown");
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_resp3(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    c(t, "HELLO 3", 100);
    s(t, "%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n", 110);
    c(t, "HGETALL h", 200);
    /* An invalidation push before the reply: out of band, not its bytes. */
    s(t, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nh\r\n", 205);
    s(t, "%1\r\n$1\r\nf\r\n,3.5\r\n", 210);
    c(t, "GET k", 300);
    s(t, "|1\r\n+ttl\r\n:10\r\n$1\r\nv\r\n", 310); /* an attribute, then the reply */
    c(t, "SISMEMBER s x", 400);
    s(t, "#t\r\n", 410);
    c(t, "GET nope", 500);
    s(t, "_\r\n", 510);
    c(t, "EVAL x 0", 600);
    s(t, "!21\r\nSYNTAX invalid syntax\r\n", 610);
    c(t, "LOLWUT", 700);
    s(t, "=15\r\ntxt:Some string\r\n", 710);
    c(t, "INCRBYFLOAT k 1e400", 800);
    s(t, "(3492890328409238509324850943850943825024385\r\n", 810);
    /* Subscriptions are confirmed by pushes; the connection goes on. */
    c(t, "SUBSCRIBE ch", 900);
    s(t, ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", 910);
    s(t, ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n", 920);
    c(t, "PING", 1000);
    s(t, "+PONG\r\n", 1010);
    assert_int_equal(t->n, 9);
    assert_string_equal(t->v[0].cls, "HELLO");
    assert_string_equal(t->v[1].cls, "HGETALL");
    assert_int_equal(t->v[1].dep, 210);
    assert_int_equal(t->v[1].rs, 17);
    assert_int_equal(t->v[2].dep, 310);
    assert_int_equal(t->v[4].status, 0); /* a RESP3 null */
    /* The blob error's code, like a simple error's, is the status. */
    assert_string_equal(t->v[5].cls, "EVAL");
    assert_int_not_equal(t->v[5].status, 0);
    assert_int_equal(t->v[5].status, 1);
    assert_string_equal(t->v[8].cls, "PING");
    assert_int_equal(t->v[8].arr, 1000);
    assert_int_equal(t->v[8].dep, 1010);
    assert_int_equal(t->ctr.streams, 1);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_client_reply(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    c(t, "CLIENT REPLY OFF", 100);
    c(t, "SET a 1", 101);
    c(t, "SET b 2", 102);
    c(t, "CLIENT REPLY ON", 103);
    s(t, "+OK\r\n", 110);
    c(t, "CLIENT REPLY SKIP", 200);
    c(t, "SET c 3", 201);
    c(t, "GET c", 202);
    s(t, "$1\r\n3\r\n", 210);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "CLIENT REPLY");
    assert_int_equal(t->v[0].arr, 103);
    assert_string_equal(t->v[1].cls, "GET");
    assert_int_equal(t->v[1].arr, 202);
    assert_int_equal(t->ctr.unanswered, 5);
    pt_free(t);
}

static void test_streams(void **state)
{
    (void)state;
    /* RESP2 SUBSCRIBE: the replies before it are paired, then a stream. */
    struct pt *t = pt_new(&tb_proto_redis, false);
    c(t, "GET a", 100);
    c(t, "SUBSCRIBE news", 101);
    s(t, "$1\r\nx\r\n", 110);
    assert_int_equal(t->last, TB_PS_STOP);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->ctr.streams, 1);
    pt_free(t);
    t = pt_new(&tb_proto_redis, false);
    assert_int_equal(c(t, "MONITOR", 100), TB_PS_STOP);
    s(t, "+OK\r\n+1700000000.123 [0 127.0.0.1:1] \"GET\" \"a\"\r\n", 110);
    pt_close(t, -1, 120);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->ctr.streams, 1);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_big_values(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    char v[3000];
    memset(v, 'x', sizeof v);
    memcpy(v + 100, "\r\n+OK\r\n", 7); /* framing bytes inside a value */
    char b[3100];
    size_t n = (size_t)snprintf(b, sizeof b, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000\r\n");
    memcpy(b + n, v, sizeof v);
    n += sizeof v;
    memcpy(b + n, "\r\n", 2);
    n += 2;
    pt_feed(t, C2S, b, 1000, 100);
    pt_feed(t, C2S, b + 1000, 1000, 101);
    pt_feed(t, C2S, b + 2000, n - 2000, 102);
    s(t, "+OK\r\n", 110);
    c(t, "GET k", 200);
    n = (size_t)snprintf(b, sizeof b, "$3000\r\n");
    memcpy(b + n, v, sizeof v);
    n += sizeof v;
    memcpy(b + n, "\r\n", 2);
    n += 2;
    pt_feed(t, S2C, b, 1500, 210);
    pt_feed(t, S2C, b + 1500, n - 1500, 220);
    assert_int_equal(t->n, 2);
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].rq, 27 + 3000 + 2);
    assert_int_equal(t->v[1].dep, 220);
    assert_int_equal(t->v[1].rs, 3009);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_gaps(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, false);
    char b[256];
    /* A hole inside a value: framed by its length. */
    c(t, "GET k", 100);
    pt_str(t, S2C, "$20\r\n0123", 110);
    pt_gap(t, S2C, 10, TB_TS_UNKNOWN);
    pt_str(t, S2C, "456789\r\n", 120);
    assert_int_equal(t->n, 1);
    assert_int_equal(t->v[0].dep, 120);
    assert_true(t->v[0].flags & TB_REQ_GAP);
    /* A hole across replies, one command outstanding: the next command
     * closes it at the last packet captured. */
    c(t, "LRANGE l 0 -1", 200);
    s(t, "*3\r\n$1\r\na\r\n", 210);
    pt_gap(t, S2C, 0, TB_TS_UNKNOWN);
    s(t, "\r\n$1\r\nc\r\n", 220);
    c(t, "PING", 300);
    s(t, "+PONG\r\n", 310);
    assert_int_equal(t->n, 3);
    assert_int_equal(t->v[1].arr, 200);
    assert_int_equal(t->v[1].dep, 220);
    assert_true(t->v[1].flags & TB_REQ_GAP);
    assert_int_equal(t->v[2].arr, 300);
    assert_int_equal(t->v[2].dep, 310);
    /* A client hole outside a value: the queue is dropped, then picked up
     * again at the next command. */
    size_t n = cmd(b, sizeof b, "SET a b");
    pt_feed(t, C2S, b, 5, 400);
    pt_gap(t, C2S, 0, TB_TS_UNKNOWN);
    s(t, "+OK\r\n", 410);
    c(t, "GET a", 500);
    s(t, "$1\r\nb\r\n", 510);
    (void)n;
    assert_int_equal(t->n, 4);
    assert_string_equal(t->v[3].cls, "GET");
    assert_int_equal(t->v[3].arr, 500);
    assert_int_equal(t->v[3].dep, 510);
    /* Close: a reply cut short is NORESP; a command never answered is not
     * reported. */
    c(t, "LRANGE l 0 -1", 600);
    s(t, "*2\r\n$1\r\na\r\n", 610);
    pt_close(t, -1, 620);
    assert_int_equal(t->n, 5);
    assert_true(t->v[4].flags & TB_REQ_NORESP);
    assert_int_equal(t->v[4].dep, 610);
    assert_int_equal(t->ctr.parse_errors, 0);
    pt_free(t);
}

static void test_midstream(void **state)
{
    (void)state;
    struct pt *t = pt_new(&tb_proto_redis, true);
    s(t, "xx\r\n$3\r\nabc\r\n", 10);   /* the end of a reply to an earlier command */
    pt_str(t, C2S, "lue\r\n", 20);     /* the end of an earlier command */
    c(t, "GET k", 100);
    s(t, "$3\r\nabc\r\n", 110);
    pt_str(t, C2S, "PING\r\n", 200);
    s(t, "+PONG\r\n", 210);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->v[0].cls, "GET");
    assert_int_equal(t->v[0].arr, 100);
    assert_int_equal(t->v[0].dep, 110);
    assert_string_equal(t->v[1].cls, "PING");
    pt_free(t);
}

static void test_detect(void **state)
{
    (void)state;
    const struct tb_proto *p = &tb_proto_redis;
    bool cs = false;
#define D(str, dir) p->detect((const uint8_t *)(str), sizeof(str) - 1, (dir), &cs)
    assert_int_equal(D("*1\r\n$4\r\nPING\r\n", S2C), TB_DETECT_YES);
    assert_true(cs);
    assert_int_equal(D("PING\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("set k v\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("incr k\r\n", C2S), TB_DETECT_YES);
    /* memcached's shapes, and the one both share */
    assert_int_equal(D("get k\r\n", C2S), TB_DETECT_MAYBE);
    assert_int_equal(D("get a b c\r\n", C2S), TB_DETECT_NO);
    assert_int_equal(D("set k 0 0 5\r\n", C2S), TB_DETECT_NO);
    assert_int_equal(D("incr k 5\r\n", C2S), TB_DETECT_NO);
    assert_int_equal(D("stats\r\n", C2S), TB_DETECT_NO);
    /* replies, seen from the side taken for the client */
    cs = true;
    assert_int_equal(D("+OK\r\n", C2S), TB_DETECT_YES);
    assert_false(cs);
    assert_int_equal(D("$-1\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("*2\r\n$1\r\na\r\n", C2S), TB_DETECT_YES);
    assert_int_equal(D("END\r\n", S2C), TB_DETECT_NO);
    assert_int_equal(D("GET / HTTP/1.1\r\n", C2S), TB_DETECT_NO);
    assert_int_equal(D("\0\0\0\x08\x04\xd2\x16\x2f", C2S), TB_DETECT_NO);
#undef D
    assert_ptr_equal(tb_proto_find("redis"), p);
}

static void test_invariants(void **state)
{
    (void)state;
    char cl[2048], sv[2048];
    size_t cn = 0;
    cn += cmd(cl + cn, sizeof cl - cn, "SET k v");
    cn += cmd(cl + cn, sizeof cl - cn, "GET k");
    cn += cmd(cl + cn, sizeof cl - cn, "MULTI");
    cn += cmd(cl + cn, sizeof cl - cn, "INCR n");
    cn += cmd(cl + cn, sizeof cl - cn, "EXEC");
    cn += (size_t)snprintf(cl + cn, sizeof cl - cn, "PING\r\n");
    cn += cmd(cl + cn, sizeof cl - cn, "HELLO 3");
    cn += cmd(cl + cn, sizeof cl - cn, "HGETALL h");
    cn += cmd(cl + cn, sizeof cl - cn, "SUBSCRIBE c");
    size_t sn = (size_t)snprintf(sv, sizeof sv,
                                 "+OK\r\n$1\r\nv\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n+PONG\r\n"
                                 "%%1\r\n$5\r\nproto\r\n:3\r\n>2\r\n$1\r\na\r\n$1\r\nb\r\n"
                                 "%%1\r\n$1\r\nf\r\n,1.5\r\n-ERR x\r\n");
    for (int seed = 0; seed < 256; seed++) {
        uint8_t in[4200];
        in[0] = (uint8_t)seed;
        in[1] = (uint8_t)cn;
        in[2] = (uint8_t)(cn >> 8);
        memcpy(in + 3, cl, cn);
        memcpy(in + 3 + cn, sv, sn);
        pt_fuzz_drive(&tb_proto_redis, in, 3 + cn + sn);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_class_slots),
        cmocka_unit_test(test_fast_paths_agree),
        cmocka_unit_test(test_multi_exec_and_nesting),
        cmocka_unit_test(test_inline_and_classes),
        cmocka_unit_test(test_resp3),
        cmocka_unit_test(test_client_reply),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_big_values),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_midstream),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
