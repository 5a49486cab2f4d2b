/* SPDX-License-Identifier: MIT */
/* test_sim_wire.c — a small simulated run checked packet by packet: pcap
 * format, time order, IPv4 and TCP checksums, sequence continuity, ACKs that
 * never acknowledge unsent bytes, and truth times that are packet times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../sim/sim.h"

static const char conf_text[] = "[sim]\n"
                                "seed = 3\n"
                                "duration = 1s\n"
                                "warmup = 100ms\n"
                                "users = 20\n"
                                "think_time = exp(50ms)\n"
                                "[tier web]\n"
                                "keepalive = 3\n"
                                "[tier app]\n"
                                "port = 8080\n"
                                "servers = 2\n"
                                "pool = 2\n"
                                "[tier db]\n"
                                "proto = mysql\n"
                                "port = 3306\n"
                                "[class A]\n"
                                "demand.app = exp(1ms)\n"
                                "queries = 2\n"
                                "rows = 3\n"
                                "row_bytes = 700\n"
                                "resp_bytes = uniform(100, 6000)\n"
                                "[freeze]\n"
                                "server = app/2\n"
                                "at = 300ms:50ms\n";

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t sum16(uint32_t s, const uint8_t *p, size_t n)
{
    for (; n > 1; p += 2, n -= 2)
        s += rd16(p);
    if (n)
        s += (uint32_t)p[0] << 8;
    return s;
}

static uint16_t fold(uint32_t s)
{
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}

/* One direction of one connection, keyed by its 4-tuple. */
struct flow {
    uint8_t key[36];
    uint32_t nxt; /* next sequence number expected from this side */
    bool started;
};

#define MAX_FLOWS 4096
static struct flow flows[MAX_FLOWS];
static size_t nflows;

static struct flow *flow_get(const uint8_t *src, const uint8_t *dst, size_t alen,
                             const uint8_t *tcp, bool reverse)
{
    uint8_t k[36] = {0};
    memcpy(k, reverse ? dst : src, alen);
    memcpy(k + 16, reverse ? src : dst, alen);
    memcpy(k + 32, tcp + (reverse ? 2 : 0), 2);
    memcpy(k + 34, tcp + (reverse ? 0 : 2), 2);
    for (size_t i = 0; i < nflows; i++)
        if (!memcmp(flows[i].key, k, sizeof k))
            return &flows[i];
    assert_true(nflows < MAX_FLOWS);
    memcpy(flows[nflows].key, k, sizeof k);
    return &flows[nflows++];
}

/* Payload timestamps, to check the truth against. */
static int64_t *data_ts;
static size_t ndata;

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void run_wire(const char *extra, bool v6, uint16_t vlan)
{
    nflows = 0;
    ndata = 0;
    char dir[] = "/tmp/test_sim_wire.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char prefix[256], path[300], err[256] = "";
    snprintf(prefix, sizeof prefix, "%s/w", dir);

    static struct sim_conf c;
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, conf_text, "wire", err, sizeof err), 0);
    if (extra)
        assert_int_equal(sim_conf_parse(&c, extra, "extra", err, sizeof err), 0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    struct sim_out out;
    struct sim_impair imp = {0};
    assert_int_equal(sim_out_open(&out, prefix, &imp, c.seed, err, sizeof err), 0);
    out.ipv6 = c.ipv6;
    struct sim_stats st;
    assert_int_equal(sim_run(&c, &out, &st, err, sizeof err), 0);
    assert_int_equal(sim_out_close(&out), 0);
    assert_true(st.packets > 1000);
    assert_int_equal(st.packets, st.packets_written);
    assert_int_equal(st.freezes, 1);

    snprintf(path, sizeof path, "%s.pcap", prefix);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint32_t gh[6];
    assert_int_equal(fread(gh, sizeof gh, 1, f), 1);
    assert_int_equal(gh[0], 0xa1b23c4du); /* nanosecond pcap */
    assert_int_equal(gh[5], 1);           /* Ethernet */
    uint8_t pkt[65536];
    int64_t prev = 0;
    uint64_t n = 0, syn = 0, fin = 0;
    data_ts = malloc(st.packets * sizeof *data_ts);
    assert_non_null(data_ts);
    uint32_t rec[4];
    while (fread(rec, sizeof rec, 1, f) == 1) {
        assert_int_equal(rec[2], rec[3]); /* nothing cut */
        assert_true(rec[2] <= sizeof pkt && rec[2] >= 54);
        assert_int_equal(fread(pkt, 1, rec[2], f), rec[2]);
        int64_t ts = (int64_t)rec[0] * TB_NS_PER_SEC + rec[1];
        assert_true(rec[1] < 1000000000u);
        assert_true(ts >= prev); /* the file is in time order */
        prev = ts;
        n++;
        size_t l2 = 14;
        if (vlan) {
            assert_int_equal(rd16(pkt + 12), 0x8100);
            assert_int_equal(rd16(pkt + 14) & 0xfff, vlan);
            l2 = 18;
        }
        const uint8_t *ip = pkt + l2, *src, *dst, *tcp;
        size_t alen, tlen; /* address length, TCP segment length */
        if (v6) {
            assert_int_equal(rd16(pkt + l2 - 2), 0x86dd);
            assert_int_equal(ip[0] >> 4, 6);
            assert_int_equal(ip[6], 6);
            tlen = rd16(ip + 4);
            assert_int_equal(l2 + 40 + tlen, rec[2]);
            src = ip + 8, dst = ip + 24, alen = 16, tcp = ip + 40;
            /* fd00::T:N addresses */
            assert_int_equal(src[0], 0xfd);
            assert_int_equal(dst[0], 0xfd);
        } else {
            assert_int_equal(rd16(pkt + l2 - 2), 0x0800);
            assert_int_equal(ip[0], 0x45);
            assert_int_equal(ip[9], 6);
            assert_int_equal(fold(sum16(0, ip, 20)), 0xffff);
            size_t iplen = rd16(ip + 2);
            assert_int_equal(iplen + l2, rec[2]);
            tlen = iplen - 20;
            src = ip + 12, dst = ip + 16, alen = 4, tcp = ip + 20;
        }
        size_t thl = (size_t)(tcp[12] >> 4) * 4, plen = tlen - thl;
        uint32_t s = sum16(sum16(0, src, alen), dst, alen) + 6 + (uint32_t)tlen;
        assert_int_equal(fold(sum16(s, tcp, tlen)), 0xffff);
        uint8_t flags = tcp[13];
        uint32_t seq = rd32(tcp + 4), ack = rd32(tcp + 8);
        struct flow *me = flow_get(src, dst, alen, tcp, false);
        struct flow *peer = flow_get(src, dst, alen, tcp, true);
        if (flags & 0x02) { /* SYN */
            syn++;
            me->nxt = seq + 1;
            me->started = true;
            if (flags & 0x10)
                assert_int_equal(ack, peer->nxt);
            continue;
        }
        assert_true(me->started);
        /* Every byte exactly once, in order: no holes, no overlaps. */
        assert_int_equal(seq, me->nxt);
        me->nxt += (uint32_t)plen;
        if (flags & 0x01) {
            fin++;
            me->nxt++;
        }
        /* An ACK never covers bytes the peer has not sent yet. */
        assert_true(flags & 0x10);
        assert_true((int32_t)(ack - peer->nxt) <= 0);
        if (plen)
            data_ts[ndata++] = ts;
    }
    fclose(f);
    assert_int_equal(n, st.packets);
    assert_true(syn > 0 && syn % 2 == 0);
    assert_true(fin > 0); /* keep-alive connections were closed */

    /* Each truth arrival and departure is the time of a data packet. */
    qsort(data_ts, ndata, sizeof *data_ts, cmp64);
    snprintf(path, sizeof path, "%s.requests.csv", prefix);
    f = fopen(path, "r");
    assert_non_null(f);
    char line[2048];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "tier,server,client,conn,class,fingerprint,arrival_ns,departure_ns,"
                              "status,id,parent\n");
    uint64_t rows = 0;
    while (fgets(line, sizeof line, f)) {
        for (int k = 0; k < 3; k++) { /* parent, id, status */
            char *last = strrchr(line, ',');
            assert_non_null(last);
            *last = 0;
        }
        char *dep = strrchr(line, ',');
        *dep = 0;
        char *arr = strrchr(line, ',');
        int64_t a = strtoll(arr + 1, NULL, 10), d = strtoll(dep + 1, NULL, 10);
        assert_true(a <= d);
        assert_non_null(bsearch(&a, data_ts, ndata, sizeof *data_ts, cmp64));
        assert_non_null(bsearch(&d, data_ts, ndata, sizeof *data_ts, cmp64));
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, st.requests[0] + st.requests[1] + st.requests[2]);
    assert_int_equal(st.requests[0], st.pages);
    assert_int_equal(st.requests[1], st.pages); /* every page calls the app once */
    assert_int_equal(st.requests[2], 2 * st.pages);
    free(data_ts);

    static const char *const sfx[] = {"pcap",        "requests.csv",    "freezes.csv",
                                      "speed.csv",   "expected.csv",    "truth.conf",
                                      "dropped.csv", "connections.csv", "causes.csv",
                                      "verdict.csv"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(sfx); i++) {
        snprintf(path, sizeof path, "%s.%s", prefix, sfx[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

static void test_wire_ipv4(void **state)
{
    (void)state;
    run_wire(NULL, false, 0);
}

static void test_wire_ipv6_vlan(void **state)
{
    (void)state;
    run_wire("[sim]\nipv6 = true\nvlan = 42\nmss = 1428\n", true, 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_ipv4),
        cmocka_unit_test(test_wire_ipv6_vlan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
