/* SPDX-License-Identifier: MIT */
/* test_engine.c — the capture engine end to end on hand-built frames: one
 * HTTP exchange over every link type, reordering, retransmission, a lost
 * segment, sequence wraparound, FIN/RST, idle close, mid-stream pickup,
 * fragments, snaplen cuts, eviction, port reuse and a tiers file; hundreds of
 * interleaved keep-alive exchanges, every one of them reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "capture.h"
#include "conn.h"
#include "decode-int.h"
#include "tiers.h"
#include "test_pkt.h"

#define T0 INT64_C(1700000000000000000)
#define MS TB_NS_PER_MS

/* ---- harness ---------------------------------------------------------------- */

struct h {
    struct tb_catalog *cat;
    struct tb_engine *e;
    struct tb_tiers *tiers;
    struct tb_request req[512];
    size_t n;
    int dlt;         /* link type frames are built for */
    uint32_t snap;   /* 0 = whole frames */
};

static void on_req(void *ud, const struct tb_request *r)
{
    struct h *h = ud;
    assert_true(h->n < TB_ARRAY_SIZE(h->req));
    h->req[h->n++] = *r;
}

static void h_init(struct h *h, int dlt, const struct tb_engine_opts *opts, const char *tiers)
{
    memset(h, 0, sizeof *h);
    h->dlt = dlt;
    assert_int_equal(tb_catalog_new(&h->cat), 0);
    if (tiers) {
        char err[256];
        assert_int_equal(tb_tiers_parse(tiers, strlen(tiers), "t", &h->tiers, err, sizeof err), 0);
        assert_int_equal(tb_tiers_register(h->tiers, h->cat), 0);
    }
    assert_int_equal(tb_engine_new(&h->e, h->cat, h->tiers, opts, on_req, h), 0);
}

static void h_fini(struct h *h)
{
    tb_engine_free(h->e);
    tb_tiers_free(h->tiers);
    tb_catalog_free(h->cat);
}

/* Frames an IP packet for h->dlt and feeds it. */
static void feed_ip(struct h *h, const uint8_t *ip, size_t n, int64_t ts)
{
    static uint8_t fr[4096];
    size_t len = 0;
    static const uint16_t q[] = {0x8100}, qinq[] = {0x88a8, 0x8100};
    bool v6 = (ip[0] >> 4) == 6;
    switch (h->dlt) {
    case TB_DLT_EN10MB:
        len = tp_eth(fr, NULL, 0, ip, n);
        break;
    case 1000: /* 802.1Q */
        len = tp_eth(fr, q, 1, ip, n);
        break;
    case 1001: /* QinQ */
        len = tp_eth(fr, qinq, 2, ip, n);
        break;
    case TB_DLT_LINUX_SLL:
        memset(fr, 0, 16);
        tp_put16(fr + 14, v6 ? 0x86dd : 0x0800);
        memcpy(fr + 16, ip, n);
        len = 16 + n;
        break;
    case TB_DLT_LINUX_SLL2:
        memset(fr, 0, 20);
        tp_put16(fr, v6 ? 0x86dd : 0x0800);
        memcpy(fr + 20, ip, n);
        len = 20 + n;
        break;
    case TB_DLT_NULL:
        memset(fr, 0, 4);
        fr[0] = v6 ? 10 : 2;
        memcpy(fr + 4, ip, n);
        len = 4 + n;
        break;
    case TB_DLT_LOOP:
        memset(fr, 0, 4);
        fr[3] = v6 ? 30 : 2;
        memcpy(fr + 4, ip, n);
        len = 4 + n;
        break;
    default: /* raw IP */
        memcpy(fr, ip, n);
        len = n;
        break;
    }
    int dlt = h->dlt >= 1000 ? TB_DLT_EN10MB : h->dlt;
    uint32_t cap = h->snap && h->snap < len ? h->snap : (uint32_t)len;
    assert_int_equal(tb_engine_packet(h->e, dlt, ts, fr, cap, (uint32_t)len), 0);
}

/* One connection: sequence numbers advance as segments are sent. */
struct conn {
    struct tb_addr c, s;
    uint32_t cn, sn; /* next sequence number of client, server */
};

static void tcp(struct h *h, struct conn *k, bool from_client, uint32_t seq, uint8_t flags,
                const char *pl, size_t len, int64_t ts)
{
    uint8_t ip[4096];
    const struct tb_addr *src = from_client ? &k->c : &k->s, *dst = from_client ? &k->s : &k->c;
    uint32_t ack = from_client ? k->sn : k->cn;
    size_t n = tp_ip_tcp(ip, src, dst, seq, ack, flags, pl, len);
    feed_ip(h, ip, n, ts);
}

/* Sends the next bytes of one side (and advances its sequence number). */
static void xmit(struct h *h, struct conn *k, bool from_client, const char *pl, int64_t ts)
{
    size_t len = strlen(pl);
    uint32_t *seq = from_client ? &k->cn : &k->sn;
    tcp(h, k, from_client, *seq, TB_TCP_ACK | TB_TCP_PSH, pl, len, ts);
    *seq += (uint32_t)len;
}

static void handshake(struct h *h, struct conn *k, uint32_t cisn, uint32_t sisn, int64_t ts)
{
    k->cn = cisn;
    k->sn = 0;
    tcp(h, k, true, cisn, TB_TCP_SYN, NULL, 0, ts);
    k->cn = cisn + 1;
    tcp(h, k, false, sisn, TB_TCP_SYN | TB_TCP_ACK, NULL, 0, ts + 1);
    k->sn = sisn + 1;
    tcp(h, k, true, k->cn, TB_TCP_ACK, NULL, 0, ts + 2);
}

static void fin(struct h *h, struct conn *k, bool from_client, int64_t ts)
{
    uint32_t *seq = from_client ? &k->cn : &k->sn;
    tcp(h, k, from_client, *seq, TB_TCP_FIN | TB_TCP_ACK, NULL, 0, ts);
    *seq += 1;
}

static struct conn conn4(const char *c, const char *s)
{
    struct conn k = {tp_addr(c), tp_addr(s), 0, 0};
    return k;
}

static const char REQ[] = "GET /item/42?x=1 HTTP/1.1\r\nHost: shop\r\n\r\n";
static const char RESP_HDR[] = "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n";
static const char BODY[] = "0123456789abcdefghij";

static const char *tier_name(struct h *h, uint32_t tier)
{
    return tb_catalog_tier_get(h->cat, tier)->name;
}

static const char *class_text(struct h *h, uint32_t cls)
{
    return tb_catalog_class_get(h->cat, cls)->text;
}

static const char *server_str(struct h *h, uint32_t srv, char *buf)
{
    return tb_addr_fmt(&tb_catalog_server_get(h->cat, srv)->addr, buf, TB_ADDR_STRLEN);
}

/* Asserts the one exchange of the scripted conversation below. */
static void expect_exchange(struct h *h, const struct tb_request *r, int64_t t, uint32_t flags)
{
    char buf[TB_ADDR_STRLEN];
    assert_int_equal(r->arrival_ns, t + 10 * MS);
    assert_int_equal(r->departure_ns, t + 30 * MS);
    assert_int_equal(r->req_bytes, sizeof REQ - 1);
    assert_int_equal(r->resp_bytes, sizeof RESP_HDR - 1 + sizeof BODY - 1);
    assert_int_equal(r->status, 200);
    assert_int_equal(r->flags, flags);
    assert_string_equal(class_text(h, r->class_id), "GET /item/{id}");
    assert_string_equal(server_str(h, r->server, buf), r->client.family == 6 ? "[2001:db8::1]:80"
                                                                              : "10.0.0.1:80");
    assert_string_equal(tier_name(h, r->tier), "http");
}

/* Handshake, request, response in two segments, FIN both ways. */
static void conversation(struct h *h, struct conn *k, uint32_t cisn, uint32_t sisn, int64_t t)
{
    handshake(h, k, cisn, sisn, t);
    xmit(h, k, true, REQ, t + 10 * MS);
    xmit(h, k, false, RESP_HDR, t + 20 * MS);
    xmit(h, k, false, BODY, t + 30 * MS);
    fin(h, k, true, t + 40 * MS);
    fin(h, k, false, t + 41 * MS);
    tcp(h, k, true, k->cn, TB_TCP_ACK, NULL, 0, t + 42 * MS);
}

/* ---- tests ---------------------------------------------------------------- */

/* Three keep-alive connections, 150 exchanges each, interleaved in time: every
 * exchange is reported once, in completion order, with its own times, bytes
 * and connection (no count is "about right": each is checked). */
static void test_many_exchanges(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    enum { NCONN = 3, PER = 150 };
    struct conn k[NCONN] = {conn4("10.0.0.9:51000", "10.0.0.1:80"),
                            conn4("10.0.0.9:51001", "10.0.0.1:80"),
                            conn4("10.0.0.8:40000", "10.0.0.1:80")};
    for (int c = 0; c < NCONN; c++)
        handshake(&h, &k[c], 1000u + (uint32_t)c * 7919u, 5000u + (uint32_t)c * 104729u, T0 + c);
    char req[96], resp[128];
    for (int i = 0; i < PER; i++) {
        for (int c = 0; c < NCONN; c++) {
            int64_t t = T0 + MS + (int64_t)(i * NCONN + c) * MS;
            snprintf(req, sizeof req, "GET /item/%d HTTP/1.1\r\nHost: shop\r\n\r\n", i);
            int body = 1 + (i * 7 + c) % 40;
            int hl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
                              body);
            memset(resp + hl, 'x', (size_t)body);
            resp[hl + body] = '\0';
            xmit(&h, &k[c], true, req, t);
            xmit(&h, &k[c], false, resp, t + 300 * 1000);
        }
    }
    assert_int_equal(h.n, NCONN * PER);
    for (int i = 0; i < PER; i++) {
        for (int c = 0; c < NCONN; c++) {
            const struct tb_request *r = &h.req[i * NCONN + c];
            int64_t t = T0 + MS + (int64_t)(i * NCONN + c) * MS;
            int body = 1 + (i * 7 + c) % 40;
            snprintf(req, sizeof req, "GET /item/%d HTTP/1.1\r\nHost: shop\r\n\r\n", i);
            int hl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
                              body);
            assert_int_equal(r->arrival_ns, t);
            assert_int_equal(r->departure_ns, t + 300 * 1000);
            assert_int_equal(r->req_bytes, strlen(req));
            assert_int_equal(r->resp_bytes, (uint64_t)(hl + body));
            assert_int_equal(r->status, 200);
            assert_int_equal(r->flags, 0);
            assert_int_equal(r->conn, h.req[c].conn);
            assert_string_equal(class_text(&h, r->class_id), "GET /item/{id}");
            assert_true(tb_addr_eq(&r->client, &k[c].c));
        }
    }
    assert_true(h.req[0].conn != h.req[1].conn && h.req[1].conn != h.req[2].conn &&
                h.req[0].conn != h.req[2].conn);
    h_fini(&h);
}

static void test_http_every_link_type(void **state)
{
    (void)state;
    static const int dlts[] = {TB_DLT_EN10MB, 1000, 1001, TB_DLT_LINUX_SLL, TB_DLT_LINUX_SLL2,
                               TB_DLT_NULL, TB_DLT_LOOP, TB_DLT_RAW12, TB_DLT_IPV4};
    for (size_t i = 0; i < TB_ARRAY_SIZE(dlts); i++) {
        struct h h;
        struct tb_engine_opts o = {.first_conn = 500};
        h_init(&h, dlts[i], &o, NULL);
        struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
        conversation(&h, &k, 1000, 5000, T0);
        assert_int_equal(h.n, 1);
        expect_exchange(&h, &h.req[0], T0, 0);
        assert_int_equal(h.req[0].conn, 500);
        char buf[TB_ADDR_STRLEN];
        assert_string_equal(tb_addr_fmt(&h.req[0].client, buf, sizeof buf), "10.0.0.9:51000");
        const struct tb_capture_stats *s = tb_engine_stats(h.e);
        assert_int_equal(s->packets, 9);
        assert_int_equal(s->flows, 1);
        assert_int_equal(s->flows_open, 0);
        assert_int_equal(s->midstream_flows, 0);
        assert_int_equal(s->requests, 1);
        assert_int_equal(s->gaps, 0);
        assert_int_equal(s->decode_errors, 0);
        assert_int_equal(s->linktype, dlts[i] >= 1000 ? TB_DLT_EN10MB : dlts[i]);
        assert_int_equal(s->first_ns, T0);
        assert_int_equal(s->last_ns, T0 + 42 * MS);
        /* The discovered server's address is a host of its tier. */
        struct tb_addr hosts[4];
        assert_int_equal(tb_catalog_tier_hosts(h.cat, h.req[0].tier, hosts, 4), 1);
        assert_string_equal(tb_addr_fmt(&hosts[0], buf, sizeof buf), "10.0.0.1");
        assert_false(tb_catalog_tier_get(h.cat, h.req[0].tier)->configured);
        assert_string_equal(tb_catalog_tier_get(h.cat, h.req[0].tier)->proto, "http");
        h_fini(&h);
    }
    /* IPv6 over Ethernet, SLL2 and DLT_IPV6. */
    static const int dlts6[] = {TB_DLT_EN10MB, TB_DLT_LINUX_SLL2, TB_DLT_IPV6, TB_DLT_NULL};
    for (size_t i = 0; i < TB_ARRAY_SIZE(dlts6); i++) {
        struct h h;
        h_init(&h, dlts6[i], NULL, NULL);
        struct conn k = conn4("[2001:db8::9]:51000", "[2001:db8::1]:80");
        conversation(&h, &k, 1000, 5000, T0);
        assert_int_equal(h.n, 1);
        expect_exchange(&h, &h.req[0], T0, 0);
        assert_int_equal(h.req[0].conn, 1);
        h_fini(&h);
    }
}

static void test_reorder_and_retransmit(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    /* Request in two segments, second first; then the first retransmitted. */
    size_t half = 10;
    tcp(&h, &k, true, k.cn + (uint32_t)half, TB_TCP_ACK, REQ + half, sizeof REQ - 1 - half,
        T0 + 5 * MS);
    tcp(&h, &k, true, k.cn, TB_TCP_ACK, REQ, half, T0 + 10 * MS);
    tcp(&h, &k, true, k.cn, TB_TCP_ACK, REQ, half, T0 + 11 * MS);
    k.cn += sizeof REQ - 1;
    /* Response header, then body overlapping the header's last 4 bytes. */
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    char body[64];
    snprintf(body, sizeof body, "%s%s", RESP_HDR + sizeof RESP_HDR - 1 - 4, BODY);
    tcp(&h, &k, false, k.sn - 4, TB_TCP_ACK, body, strlen(body), T0 + 30 * MS);
    k.sn += sizeof BODY - 1;
    fin(&h, &k, true, T0 + 40 * MS);
    fin(&h, &k, false, T0 + 41 * MS);
    assert_int_equal(h.n, 1);
    /* The request's bytes came first in the segment that waited: arrival is
     * its earliest packet. */
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS);
    assert_int_equal(h.req[0].req_bytes, sizeof REQ - 1);
    assert_int_equal(h.req[0].resp_bytes, sizeof RESP_HDR - 1 + sizeof BODY - 1);
    assert_int_equal(h.req[0].flags, 0);
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->retransmitted_bytes, half + 4);
    assert_int_equal(s->ooo_buffered_bytes, sizeof REQ - 1 - half);
    assert_int_equal(s->gaps, 0);
    h_fini(&h);
}

static void test_lost_segment_gap(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    /* The body's first 8 bytes are never captured; the rest is. */
    k.sn += 8;
    xmit(&h, &k, false, BODY + 8, T0 + 30 * MS);
    assert_int_equal(h.n, 0); /* held: the hole may still be filled */
    /* The client's ACK passes the hole: the endpoint had those bytes. A pure
     * ACK is only noted: the next packet could still be the missing one. */
    tcp(&h, &k, true, k.cn, TB_TCP_ACK, NULL, 0, T0 + 31 * MS);
    assert_int_equal(h.n, 0);
    assert_int_equal(tb_engine_stats(h.e)->gaps, 0);
    /* It is not: the client's next request settles the hole. */
    xmit(&h, &k, true, REQ, T0 + 50 * MS);
    assert_int_equal(h.n, 1);
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->gaps, 1);
    assert_int_equal(s->gap_bytes, 8);
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    /* The buffered tail was delivered with its own packet's time. */
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS);
    assert_true(h.req[0].flags & TB_REQ_GAP);
    assert_int_equal(h.req[0].status, 200);
    h_fini(&h);
}

/* The whole body is lost and a later client packet raised the flow's clock:
 * the hole reaches the parser without a time (TB_TS_UNKNOWN), so the
 * departure stays at the last response packet captured. */
static void test_lost_tail_keeps_departure(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    xmit(&h, &k, true, "GET /next HTTP/1.1\r\nHost: shop\r\n\r\n", T0 + 25 * MS);
    k.sn += sizeof BODY - 1; /* never captured */
    tcp(&h, &k, true, k.cn, TB_TCP_ACK, NULL, 0, T0 + 31 * MS);
    fin(&h, &k, true, T0 + 50 * MS);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    assert_int_equal(h.req[0].departure_ns, T0 + 20 * MS);
    assert_int_equal(h.req[0].status, 200);
    assert_true(h.req[0].flags & TB_REQ_GAP);
    assert_int_equal(tb_engine_stats(h.e)->gap_bytes, sizeof BODY - 1);
    h_fini(&h);
}

/* A mirror port showing an ACK just before the segment it acknowledges: no
 * hole, no retransmission, exact times. */
static void test_ack_before_data(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    /* The client's ACK of the body comes first, the body 1 us later. */
    uint32_t body_seq = k.sn;
    k.sn += sizeof BODY - 1;
    tcp(&h, &k, true, k.cn, TB_TCP_ACK, NULL, 0, T0 + 30 * MS);
    tcp(&h, &k, false, body_seq, TB_TCP_ACK | TB_TCP_PSH, BODY, sizeof BODY - 1,
        T0 + 30 * MS + 1000);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS + 1000);
    assert_int_equal(h.req[0].flags, 0);
    fin(&h, &k, true, T0 + 40 * MS);
    fin(&h, &k, false, T0 + 41 * MS);
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->gaps, 0);
    assert_int_equal(s->retransmitted_bytes, 0);
    assert_int_equal(s->flows_open, 0);
    h_fini(&h);
}

static void test_wraparound(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    /* Both streams cross 2^32 inside the exchange. */
    conversation(&h, &k, 0xffffffff - 20, 0xffffffff - 30, T0);
    assert_int_equal(h.n, 1);
    expect_exchange(&h, &h.req[0], T0, 0);
    assert_int_equal(tb_engine_stats(h.e)->gaps, 0);
    assert_int_equal(tb_engine_stats(h.e)->retransmitted_bytes, 0);
    h_fini(&h);
}

static void test_rst_and_idle(void **state)
{
    (void)state;
    struct h h;
    struct tb_engine_opts o = {.idle_timeout_ns = 60 * TB_NS_PER_SEC};
    h_init(&h, TB_DLT_EN10MB, &o, NULL);
    /* A response delimited by the close, ended by RST. */
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, "HTTP/1.0 200 OK\r\n\r\nabc", T0 + 20 * MS);
    assert_int_equal(h.n, 0);
    tcp(&h, &k, false, k.sn, TB_TCP_RST, NULL, 0, T0 + 25 * MS);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].departure_ns, T0 + 20 * MS);
    assert_int_equal(h.req[0].flags, TB_REQ_CLOSE_DELIM);
    assert_int_equal(h.req[0].resp_bytes, 22);
    /* A late segment of the reset connection opens nothing. */
    xmit(&h, &k, false, "zzz", T0 + 26 * MS);
    assert_int_equal(tb_engine_stats(h.e)->flows_open, 0);
    assert_int_equal(tb_engine_stats(h.e)->flows, 1);

    /* A connection that goes quiet: closed by expiry, not before. */
    struct conn k2 = conn4("10.0.0.9:51001", "10.0.0.1:80");
    handshake(&h, &k2, 1, 1, T0 + 100 * MS);
    xmit(&h, &k2, true, REQ, T0 + 110 * MS);
    xmit(&h, &k2, false, "HTTP/1.1 200 OK\r\n", T0 + 120 * MS);
    tb_engine_expire(h.e, T0 + 120 * MS + 59 * TB_NS_PER_SEC);
    assert_int_equal(tb_engine_stats(h.e)->idle_closed, 0);
    assert_int_equal(tb_engine_stats(h.e)->flows_open, 1);
    tb_engine_expire(h.e, T0 + 120 * MS + 60 * TB_NS_PER_SEC);
    assert_int_equal(tb_engine_stats(h.e)->idle_closed, 1);
    assert_int_equal(tb_engine_stats(h.e)->flows_open, 0);
    /* The response was cut short: recorded with what was seen, flagged. */
    assert_int_equal(h.n, 2);
    assert_int_equal(h.req[1].departure_ns, T0 + 120 * MS);
    assert_true(h.req[1].flags & TB_REQ_NORESP);
    h_fini(&h);
}

/* Issue 13: requests still waiting for their first response byte when their
 * connection ends are counted abandoned, per tier, by every way it ends (RST,
 * idle expiry, the end of the capture); a response cut short is a record,
 * not abandoned; pipelined requests each count. */
static void test_abandoned_per_tier(void **state)
{
    (void)state;
    struct h h;
    struct tb_engine_opts o = {.idle_timeout_ns = 60 * TB_NS_PER_SEC};
    h_init(&h, TB_DLT_EN10MB, &o, NULL);
    /* HTTP: two pipelined requests, no answer, then RST: 2 abandoned. */
    struct conn a = conn4("10.0.0.9:52000", "10.0.0.1:80");
    handshake(&h, &a, 1000, 5000, T0);
    xmit(&h, &a, true, "GET /a HTTP/1.1\r\nHost: s\r\n\r\nGET /b HTTP/1.1\r\nHost: s\r\n\r\n",
         T0 + 10 * MS);
    tcp(&h, &a, false, a.sn, TB_TCP_RST, NULL, 0, T0 + 20 * MS);
    /* HTTP: answered, then a request left to idle expiry: 1 abandoned. */
    struct conn b = conn4("10.0.0.9:52001", "10.0.0.1:80");
    handshake(&h, &b, 1, 1, T0 + 30 * MS);
    xmit(&h, &b, true, REQ, T0 + 31 * MS);
    xmit(&h, &b, false, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", T0 + 32 * MS);
    xmit(&h, &b, true, REQ, T0 + 33 * MS);
    /* HTTP: a response begun and cut: a record with NORESP, not abandoned. */
    struct conn c = conn4("10.0.0.9:52002", "10.0.0.1:80");
    handshake(&h, &c, 1, 1, T0 + 40 * MS);
    xmit(&h, &c, true, REQ, T0 + 41 * MS);
    xmit(&h, &c, false, "HTTP/1.1 200 OK\r\n", T0 + 42 * MS);
    /* Redis: three pipelined commands, one answered, open at the end: 2. */
    struct conn d = conn4("10.0.0.9:52003", "10.0.0.2:6379");
    handshake(&h, &d, 1, 1, T0 + 50 * MS);
    xmit(&h, &d, true, "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                       "*2\r\n$3\r\nGET\r\n$1\r\nj\r\n", T0 + 51 * MS);
    xmit(&h, &d, false, "+PONG\r\n", T0 + 52 * MS);
    tb_engine_expire(h.e, T0 + 33 * MS + 60 * TB_NS_PER_SEC);
    tb_engine_finish(h.e, T0 + 61 * TB_NS_PER_SEC);
    const struct tb_capture_stats *st = tb_engine_stats(h.e);
    assert_int_equal(st->abandoned, 5);
    assert_int_equal(st->requests, 3); /* b's answer, c's cut answer, d's PONG */
    uint32_t http = 0, redis = 0;
    for (uint32_t t = 1; t <= tb_catalog_tier_count(h.cat); t++) {
        if (!strcmp(tier_name(&h, t), "http"))
            http = t;
        if (!strcmp(tier_name(&h, t), "redis"))
            redis = t;
    }
    assert_true(http && redis);
    uint64_t un, ab;
    tb_engine_tier_counts(h.e, http, &un, &ab);
    assert_int_equal(un, 0);
    assert_int_equal(ab, 3);
    tb_engine_tier_counts(h.e, redis, &un, &ab);
    assert_int_equal(un, 0);
    assert_int_equal(ab, 2);
    h_fini(&h);
}

static void test_midstream(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    /* Picked up in the middle of a response body on port 8080: the body's
     * tail, then a whole exchange. */
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.2:8080");
    k.cn = 777;
    k.sn = 99999;
    xmit(&h, &k, false, "tail of an earlier body", T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    xmit(&h, &k, false, BODY, T0 + 30 * MS);
    tb_engine_finish(h.e, T0 + 40 * MS);
    assert_int_equal(h.n, 1);
    char buf[TB_ADDR_STRLEN];
    assert_string_equal(tier_name(&h, h.req[0].tier), "http-8080");
    assert_string_equal(server_str(&h, h.req[0].server, buf), "10.0.0.2:8080");
    assert_int_equal(h.req[0].flags, TB_REQ_MIDSTREAM);
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS);
    assert_int_equal(tb_engine_stats(h.e)->midstream_flows, 1);

    /* The server on the higher port, first bytes from the client: the port
     * guess is wrong and detection corrects it. */
    struct conn k2 = conn4("10.0.0.9:1000", "10.0.0.3:9000");
    k2.cn = 5;
    k2.sn = 6;
    xmit(&h, &k2, true, REQ, T0 + 100 * MS);
    xmit(&h, &k2, false, RESP_HDR, T0 + 120 * MS);
    xmit(&h, &k2, false, BODY, T0 + 130 * MS);
    tb_engine_finish(h.e, T0 + 140 * MS);
    assert_int_equal(h.n, 2);
    assert_string_equal(tier_name(&h, h.req[1].tier), "http-9000");
    assert_string_equal(server_str(&h, h.req[1].server, buf), "10.0.0.3:9000");
    assert_string_equal(tb_addr_fmt(&h.req[1].client, buf, sizeof buf), "10.0.0.9:1000");
    assert_int_equal(h.req[1].flags, TB_REQ_MIDSTREAM);
    assert_int_equal(tb_engine_stats(h.e)->midstream_flows, 2);
    h_fini(&h);
}

static void test_fragments_and_snaplen(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, REQ, T0 + 10 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    /* The body's segment is cut by a snaplen 6 bytes into its payload. */
    h.snap = 14 + 20 + 32 + 6;
    xmit(&h, &k, false, BODY, T0 + 30 * MS);
    h.snap = 0;
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].flags, TB_REQ_TRUNC | TB_REQ_GAP);
    assert_int_equal(h.req[0].resp_bytes, sizeof RESP_HDR - 1 + sizeof BODY - 1);
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS);
    /* A fragment, and a frame cut inside its TCP header. */
    uint8_t ip[256];
    size_t n = tp_ip_tcp(ip, &k.c, &k.s, k.cn, k.sn, TB_TCP_ACK, "x", 1);
    ip[6] = 0x20;
    feed_ip(&h, ip, n, T0 + 50 * MS);
    h.snap = 14 + 20 + 10;
    xmit(&h, &k, true, "abc", T0 + 60 * MS);
    h.snap = 0;
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->ip_fragments, 1);
    assert_int_equal(s->truncated, 2);
    assert_int_equal(s->hdr_truncated, 1);
    assert_int_equal(s->gaps, 1);
    assert_int_equal(s->gap_bytes, sizeof BODY - 1 - 6);
    h_fini(&h);
}

static void test_eviction_and_syn_flood(void **state)
{
    (void)state;
    struct h h;
    struct tb_engine_opts o = {.max_flows = 1000};
    h_init(&h, TB_DLT_RAW12, &o, NULL);
    for (int i = 0; i < 20000; i++) {
        char c[64];
        snprintf(c, sizeof c, "172.16.%d.%d:%d", i / 200, i % 200, 10000 + i % 50000);
        struct conn k = conn4(c, "10.0.0.1:80");
        tcp(&h, &k, true, (uint32_t)i * 7919u, TB_TCP_SYN, NULL, 0, T0 + i);
    }
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->flows, 20000);
    assert_int_equal(s->flows_open, 1000);
    assert_int_equal(s->evicted_flows, 19000);
    assert_int_equal(s->flows_active_max, 1000);
    assert_true(tb_engine_flow_bytes() < 512);
    h_fini(&h);

    /* The least recently active flow goes, with its pending exchange emitted
     * through the parser's close. */
    o.max_flows = 2;
    h_init(&h, TB_DLT_RAW12, &o, NULL);
    struct conn a = conn4("10.0.0.9:1", "10.0.0.1:80"), b = conn4("10.0.0.9:2", "10.0.0.1:80");
    struct conn c = conn4("10.0.0.9:3", "10.0.0.1:80");
    handshake(&h, &a, 1, 1, T0);
    handshake(&h, &b, 1, 1, T0 + 1);
    xmit(&h, &a, true, REQ, T0 + 10);
    xmit(&h, &a, false, "HTTP/1.1 200 OK\r\n\r\nxyz", T0 + 20);
    handshake(&h, &c, 1, 1, T0 + 30); /* b is the oldest now */
    assert_int_equal(tb_engine_stats(h.e)->evicted_flows, 1);
    assert_int_equal(h.n, 0);
    handshake(&h, &b, 1, 1, T0 + 40); /* a goes: its close-delimited response ends */
    assert_int_equal(tb_engine_stats(h.e)->evicted_flows, 2);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].flags, TB_REQ_CLOSE_DELIM);
    assert_int_equal(h.req[0].departure_ns, T0 + 20);
    h_fini(&h);
}

static void test_port_reuse(void **state)
{
    (void)state;
    struct h h;
    struct tb_engine_opts o = {.first_conn = 10};
    h_init(&h, TB_DLT_EN10MB, &o, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    conversation(&h, &k, 1000, 5000, T0);
    conversation(&h, &k, 900000, 7000, T0 + 100 * MS);
    /* And once more without the FINs of the previous one. */
    handshake(&h, &k, 5000000, 1, T0 + 200 * MS);
    xmit(&h, &k, true, REQ, T0 + 210 * MS);
    handshake(&h, &k, 6000000, 1, T0 + 300 * MS);
    xmit(&h, &k, true, REQ, T0 + 310 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 320 * MS);
    xmit(&h, &k, false, BODY, T0 + 330 * MS);
    assert_int_equal(h.n, 3);
    assert_int_equal(h.req[0].conn, 10);
    assert_int_equal(h.req[1].conn, 11);
    expect_exchange(&h, &h.req[1], T0 + 100 * MS, 0);
    assert_int_equal(h.req[2].conn, 13);
    expect_exchange(&h, &h.req[2], T0 + 300 * MS, 0);
    assert_int_equal(tb_engine_stats(h.e)->flows, 4);
    /* The last connection's SYN seen again late (a duplicate from the tap)
     * neither ends it nor opens another. */
    tcp(&h, &k, true, 6000000, TB_TCP_SYN, NULL, 0, T0 + 340 * MS);
    xmit(&h, &k, true, REQ, T0 + 350 * MS);
    xmit(&h, &k, false, RESP_HDR, T0 + 360 * MS);
    xmit(&h, &k, false, BODY, T0 + 370 * MS);
    assert_int_equal(h.n, 4);
    assert_int_equal(h.req[3].conn, 13);
    assert_int_equal(tb_engine_stats(h.e)->flows, 4);
    h_fini(&h);
}

static void test_tiers_file(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, "front http *:80\napp generic 10.0.0.5:7000\n");
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    conversation(&h, &k, 1000, 5000, T0);
    /* Not configured: not monitored at all. */
    struct conn other = conn4("10.0.0.9:51001", "10.0.0.1:81");
    conversation(&h, &other, 1000, 5000, T0);
    /* Generic request/response alternation on a configured server. */
    struct conn g = conn4("10.0.0.9:51002", "10.0.0.5:7000");
    handshake(&h, &g, 1, 1, T0);
    xmit(&h, &g, true, "PING", T0 + 1 * MS);
    xmit(&h, &g, false, "PONG", T0 + 3 * MS);
    xmit(&h, &g, true, "PING", T0 + 5 * MS);
    fin(&h, &g, true, T0 + 6 * MS);
    fin(&h, &g, false, T0 + 7 * MS);
    /* The second PING never got its answer: generic records nothing for it. */
    assert_int_equal(h.n, 2);
    assert_string_equal(tier_name(&h, h.req[0].tier), "front");
    assert_string_equal(tier_name(&h, h.req[1].tier), "app");
    assert_int_equal(h.req[1].arrival_ns, T0 + 1 * MS);
    assert_int_equal(h.req[1].departure_ns, T0 + 3 * MS);
    assert_int_equal(h.req[1].req_bytes, 4);
    assert_int_equal(h.req[1].resp_bytes, 4);
    assert_int_equal(tb_engine_stats(h.e)->flows, 2);
    char buf[TB_ADDR_STRLEN];
    uint32_t sid;
    struct tb_addr a = tp_addr("10.0.0.1:80");
    assert_int_equal(tb_catalog_server_find(h.cat, &a, &sid), 0);
    assert_string_equal(server_str(&h, sid, buf), "10.0.0.1:80");
    h_fini(&h);
}

static void test_forced_proto_and_bad_name(void **state)
{
    (void)state;
    struct h h;
    struct tb_engine_opts o = {.force_proto = "generic"};
    h_init(&h, TB_DLT_EN10MB, &o, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    conversation(&h, &k, 1000, 5000, T0);
    assert_int_equal(h.n, 1);
    assert_string_equal(tier_name(&h, h.req[0].tier), "generic-80");
    h_fini(&h);
    struct tb_engine *e;
    struct tb_catalog *cat;
    assert_int_equal(tb_catalog_new(&cat), 0);
    o.force_proto = "gopher";
    assert_int_equal(tb_engine_new(&e, cat, NULL, &o, on_req, NULL), TB_E_INVAL);
    assert_null(e);
    tb_catalog_free(cat);
}

/* The first segment is too short to tell HTTP from anything else ("GE"):
 * its bytes wait, with their time, until the next one decides. */
static void test_detection_waits_for_bytes(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:8000");
    handshake(&h, &k, 1000, 5000, T0);
    tcp(&h, &k, true, k.cn, TB_TCP_ACK | TB_TCP_PSH, REQ, 2, T0 + 10 * MS);
    tcp(&h, &k, true, k.cn + 2, TB_TCP_ACK | TB_TCP_PSH, REQ + 2, sizeof REQ - 3, T0 + 15 * MS);
    k.cn += sizeof REQ - 1;
    xmit(&h, &k, false, RESP_HDR, T0 + 20 * MS);
    xmit(&h, &k, false, BODY, T0 + 30 * MS);
    assert_int_equal(h.n, 1);
    assert_string_equal(tier_name(&h, h.req[0].tier), "http-8000");
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    assert_int_equal(h.req[0].departure_ns, T0 + 30 * MS);
    assert_int_equal(h.req[0].req_bytes, sizeof REQ - 1);
    assert_int_equal(h.req[0].status, 200);
    assert_int_equal(h.req[0].flags, 0);
    h_fini(&h);
}

/* A parser that stops (here HTTP after 101 Switching Protocols) while the
 * reassembler is delivering buffered segments: the segments still queued
 * must survive (a regression test: they were freed under the reassembler). */
static void test_parser_stop_inside_delivery(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    handshake(&h, &k, 1000, 5000, T0);
    xmit(&h, &k, true, "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\n\r\n", T0 + 10 * MS);
    static const char a[] = "HTTP/1.1 101 Switching ", b[] = "Protocols\r\n\r\n";
    static const char c[] = "\x81\x05hello", d[] = "\x81\x03bye";
    uint32_t s0 = k.sn;
    uint32_t sb = s0 + (uint32_t)strlen(a), sc = sb + (uint32_t)strlen(b);
    uint32_t sd = sc + (uint32_t)strlen(c);
    tcp(&h, &k, false, sd, TB_TCP_ACK, d, strlen(d), T0 + 24 * MS);
    tcp(&h, &k, false, sb, TB_TCP_ACK, b, strlen(b), T0 + 21 * MS);
    tcp(&h, &k, false, sc, TB_TCP_ACK, c, strlen(c), T0 + 22 * MS);
    tcp(&h, &k, false, s0, TB_TCP_ACK, a, strlen(a), T0 + 23 * MS);
    k.sn = sd + (uint32_t)strlen(d);
    xmit(&h, &k, true, "\x81\x82" "ab", T0 + 30 * MS);
    fin(&h, &k, true, T0 + 40 * MS);
    fin(&h, &k, false, T0 + 41 * MS);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.req[0].status, 101);
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->ooo_buffered_bytes, strlen(b) + strlen(c) + strlen(d));
    assert_int_equal(s->gaps, 0);
    assert_int_equal(s->flows_open, 0);
    h_fini(&h);
}

/* Database protocols told apart on ports of no protocol: "get k" is both a
 * Redis inline command and a memcached one, so the answer decides; a
 * PostgreSQL start-up decides at once, and mid-stream its messages do. */
static void test_database_detection(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    struct conn r = conn4("10.0.0.9:51000", "10.0.0.2:7000");
    struct conn m = conn4("10.0.0.9:51001", "10.0.0.3:7001");
    handshake(&h, &r, 1000, 5000, T0);
    handshake(&h, &m, 2000, 6000, T0);
    xmit(&h, &r, true, "get k\r\n", T0 + 10 * MS);
    xmit(&h, &m, true, "get k\r\n", T0 + 11 * MS);
    xmit(&h, &r, false, "$-1\r\n", T0 + 20 * MS);
    xmit(&h, &m, false, "END\r\n", T0 + 21 * MS);
    assert_int_equal(h.n, 2);
    assert_string_equal(tier_name(&h, h.req[0].tier), "redis-7000");
    assert_string_equal(class_text(&h, h.req[0].class_id), "GET");
    assert_int_equal(h.req[0].arrival_ns, T0 + 10 * MS);
    assert_int_equal(h.req[0].departure_ns, T0 + 20 * MS);
    assert_string_equal(tier_name(&h, h.req[1].tier), "memcached-7001");
    assert_string_equal(class_text(&h, h.req[1].class_id), "get");
    assert_int_equal(h.req[1].status, 1); /* a miss */
    /* PostgreSQL with its start-up, on another port. */
    struct conn p = conn4("10.0.0.9:51002", "10.0.0.4:15432");
    handshake(&h, &p, 3000, 7000, T0);
    static const char su[] = "\0\0\0\x17\0\3\0\0user\0postgres\0\0";
    tcp(&h, &p, true, p.cn, TB_TCP_ACK | TB_TCP_PSH, su, sizeof su - 1, T0 + 30 * MS);
    p.cn += sizeof su - 1;
    static const char ok[] = "R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I";
    tcp(&h, &p, false, p.sn, TB_TCP_ACK | TB_TCP_PSH, ok, sizeof ok - 1, T0 + 31 * MS);
    p.sn += sizeof ok - 1;
    static const char q[] = "Q\0\0\0\x0dselect 1\0";
    tcp(&h, &p, true, p.cn, TB_TCP_ACK | TB_TCP_PSH, q, sizeof q - 1, T0 + 40 * MS);
    p.cn += sizeof q - 1;
    static const char a[] = "C\0\0\0\x0dSELECT 1\0Z\0\0\0\x05I";
    tcp(&h, &p, false, p.sn, TB_TCP_ACK | TB_TCP_PSH, a, sizeof a - 1, T0 + 45 * MS);
    p.sn += sizeof a - 1;
    /* … and picked up mid-stream on a fourth. */
    struct conn pm = conn4("10.0.0.9:51003", "10.0.0.5:25432");
    pm.cn = 100;
    pm.sn = 900;
    tcp(&h, &pm, true, pm.cn, TB_TCP_ACK | TB_TCP_PSH, q, sizeof q - 1, T0 + 50 * MS);
    pm.cn += sizeof q - 1;
    tcp(&h, &pm, false, pm.sn, TB_TCP_ACK | TB_TCP_PSH, a, sizeof a - 1, T0 + 55 * MS);
    assert_int_equal(h.n, 4);
    for (size_t i = 2; i < 4; i++) {
        assert_string_equal(class_text(&h, h.req[i].class_id), "select ?");
        assert_int_equal(h.req[i].status, 0);
    }
    assert_string_equal(tier_name(&h, h.req[2].tier), "postgres-15432");
    assert_int_equal(h.req[2].arrival_ns, T0 + 40 * MS);
    assert_int_equal(h.req[2].departure_ns, T0 + 45 * MS);
    assert_int_equal(h.req[2].flags, 0);
    assert_string_equal(tier_name(&h, h.req[3].tier), "postgres-25432");
    assert_int_equal(h.req[3].flags, TB_REQ_MIDSTREAM);
    h_fini(&h);
}

static void test_garbage(void **state)
{
    (void)state;
    struct h h;
    h_init(&h, TB_DLT_EN10MB, NULL, NULL);
    uint8_t buf[1500];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(x % sizeof buf);
        for (size_t j = 0; j < n; j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[j] = (uint8_t)x;
        }
        /* Mostly IPv4 frames with random headers and payloads. */
        if (n > 14 && (i & 1)) {
            buf[12] = 0x08;
            buf[13] = 0x00;
            buf[14] = 0x45;
        }
        int dlt = (int)(x % 5 == 0 ? TB_DLT_LINUX_SLL2 : TB_DLT_EN10MB);
        assert_int_equal(tb_engine_packet(h.e, dlt, T0 + i, buf, (uint32_t)n,
                                          (uint32_t)n + (uint32_t)(x % 3)), 0);
    }
    assert_int_equal(tb_engine_packet(h.e, 9999, T0, buf, 20, 20), 0);
    tb_engine_finish(h.e, T0 + 1);
    const struct tb_capture_stats *s = tb_engine_stats(h.e);
    assert_int_equal(s->packets, 20001);
    assert_int_equal(s->unknown_link, 1);
    assert_true(s->decode_errors > 0);
    assert_int_equal(s->packets, s->non_ip + s->non_tcp + s->ip_fragments + s->decode_errors +
                                     s->hdr_truncated + s->unknown_link + s->tcp_packets);
    h_fini(&h);
}

/* Connection records: one when a connection opens and one when it ends, for
 * each way the tap sees a connection begin (SYN, SYN-ACK, mid-stream) and end
 * (FIN, RST, idle, eviction is covered by the flow cap elsewhere, the end of
 * the capture), with the requests, packets and payload bytes counted by hand
 * from the frames fed (the opening record is written before its packet's
 * payload is handled). An idle pooled connection (handshake only) is reported
 * too, with no tier since no protocol was seen on it. */
struct conns {
    struct tb_conn c[16];
    size_t n;
};

static void on_conn(void *ud, const struct tb_conn *c)
{
    struct conns *cs = ud;
    assert_true(cs->n < TB_ARRAY_SIZE(cs->c));
    cs->c[cs->n++] = *c;
}

static void expect_conn(const struct tb_conn *c, uint64_t id, const char *client,
                        const char *server, int opened, int closed, int64_t open_ns,
                        int64_t close_ns, uint64_t requests, uint64_t packets, uint64_t c2s,
                        uint64_t s2c)
{
    char b[TB_ADDR_STRLEN];
    assert_int_equal(c->conn, id);
    assert_string_equal(tb_addr_fmt(&c->client, b, sizeof b), client);
    assert_string_equal(tb_addr_fmt(&c->server, b, sizeof b), server);
    assert_int_equal(c->opened, opened);
    assert_int_equal(c->closed, closed);
    assert_int_equal(c->open_ns, open_ns);
    assert_int_equal(c->close_ns, close_ns);
    assert_int_equal(c->requests, requests);
    assert_int_equal(c->packets, packets);
    assert_int_equal(c->bytes_c2s, c2s);
    assert_int_equal(c->bytes_s2c, s2c);
}

static void test_connection_records(void **state)
{
    (void)state;
    struct h h;
    struct conns cs = {.n = 0};
    struct tb_engine_opts o = {.idle_timeout_ns = 60 * TB_NS_PER_SEC, .first_conn = 10};
    h_init(&h, TB_DLT_EN10MB, &o, NULL);
    tb_engine_set_conn_cb(h.e, on_conn, &cs);
    const uint64_t rq = sizeof REQ - 1, rs = sizeof RESP_HDR - 1 + sizeof BODY - 1;

    /* SYN ... FIN both ways: 9 packets through the second FIN; the last ACK
     * comes after the close and is not counted. */
    struct conn k = conn4("10.0.0.9:51000", "10.0.0.1:80");
    conversation(&h, &k, 1000, 5000, T0);
    assert_int_equal(cs.n, 2);
    expect_conn(&cs.c[0], 10, "10.0.0.9:51000", "10.0.0.1:80", TB_CONN_SYN, TB_CONN_OPEN, T0, T0,
                0, 1, 0, 0);
    assert_int_equal(cs.c[0].tier, 0);
    expect_conn(&cs.c[1], 10, "10.0.0.9:51000", "10.0.0.1:80", TB_CONN_SYN, TB_CONN_FIN, T0,
                T0 + 41 * MS, 1, 8, rq, rs);
    assert_string_equal(tier_name(&h, cs.c[1].tier), "http");
    assert_int_equal(cs.c[1].server_id, h.req[0].server);

    /* A pooled connection that only shakes hands, then stays silent: ended
     * by the idle timeout, at its last packet, no tier. */
    struct conn p = conn4("10.0.0.7:40000", "10.0.0.4:3306");
    handshake(&h, &p, 10, 20, T0 + 50 * MS);
    tb_engine_expire(h.e, T0 + 50 * MS + 2 + 60 * TB_NS_PER_SEC);
    assert_int_equal(cs.n, 4);
    expect_conn(&cs.c[3], 11, "10.0.0.7:40000", "10.0.0.4:3306", TB_CONN_SYN, TB_CONN_IDLE,
                T0 + 50 * MS, T0 + 50 * MS + 2, 0, 3, 0, 0);
    assert_int_equal(cs.c[3].tier, 0);
    assert_int_equal(cs.c[3].server_id, 0);

    /* The SYN missed: opened by its SYN-ACK; reset by the server. */
    int64_t t = T0 + 100 * TB_NS_PER_SEC;
    struct conn r = conn4("10.0.0.9:51001", "10.0.0.1:80");
    r.cn = 301;
    r.sn = 0;
    tcp(&h, &r, false, 700, TB_TCP_SYN | TB_TCP_ACK, NULL, 0, t);
    r.sn = 701;
    xmit(&h, &r, true, REQ, t + 1 * MS);
    xmit(&h, &r, false, RESP_HDR, t + 2 * MS);
    xmit(&h, &r, false, BODY, t + 3 * MS);
    tcp(&h, &r, false, r.sn, TB_TCP_RST, NULL, 0, t + 4 * MS);
    assert_int_equal(cs.n, 6);
    expect_conn(&cs.c[5], 12, "10.0.0.9:51001", "10.0.0.1:80", TB_CONN_SYNACK, TB_CONN_RST, t,
                t + 4 * MS, 1, 5, rq, rs);

    /* Opened before the capture: first packet seen, still open at the end. */
    struct conn m = conn4("10.0.0.9:51002", "10.0.0.2:8080");
    m.cn = 77;
    m.sn = 999;
    xmit(&h, &m, false, "tail of an earlier body", t + 10 * MS);
    xmit(&h, &m, true, REQ, t + 11 * MS);
    xmit(&h, &m, false, RESP_HDR, t + 12 * MS);
    xmit(&h, &m, false, BODY, t + 13 * MS);
    tb_engine_finish(h.e, t + 20 * MS);
    assert_int_equal(cs.n, 8);
    expect_conn(&cs.c[6], 13, "10.0.0.9:51002", "10.0.0.2:8080", TB_CONN_MIDSTREAM, TB_CONN_OPEN,
                t + 10 * MS, t + 10 * MS, 0, 1, 0, 0);
    expect_conn(&cs.c[7], 13, "10.0.0.9:51002", "10.0.0.2:8080", TB_CONN_MIDSTREAM, TB_CONN_END,
                t + 10 * MS, t + 13 * MS, 1, 4, rq, 23 + rs);
    h_fini(&h);
}

/* ---- requests in batches (tb_engine_set_batch_cb) --------------------------- */

struct ev {
    char kind; /* 'R' request, 'C' connection record */
    struct tb_request r;
    uint64_t conn, requests;
    uint8_t closed;
};
struct evlog {
    struct ev v[1024];
    size_t n, batches;
};

static void ev_req(void *ud, const struct tb_request *r)
{
    struct evlog *l = ud;
    assert_true(l->n < TB_ARRAY_SIZE(l->v));
    l->v[l->n].kind = 'R';
    l->v[l->n++].r = *r;
}

static void ev_batch(void *ud, const struct tb_request *r, size_t n)
{
    struct evlog *l = ud;
    assert_true(n >= 1 && n <= TB_ENGINE_BATCH);
    l->batches++;
    for (size_t i = 0; i < n; i++)
        ev_req(ud, &r[i]);
}

static void ev_conn(void *ud, const struct tb_conn *c)
{
    struct evlog *l = ud;
    assert_true(l->n < TB_ARRAY_SIZE(l->v));
    struct ev *e = &l->v[l->n++];
    e->kind = 'C';
    e->conn = c->conn;
    e->requests = c->requests;
    e->closed = c->closed;
}

/* Three keep-alive connections, 150 exchanges each; the first reset by its
 * server after 100 (its record then, mid-way); the others closed idle. */
static void batch_traffic(struct h *h)
{
    struct conn k[3] = {conn4("10.0.0.9:51000", "10.0.0.1:80"),
                        conn4("10.0.0.9:51001", "10.0.0.1:80"),
                        conn4("10.0.0.8:40000", "10.0.0.1:80")};
    for (int c = 0; c < 3; c++)
        handshake(h, &k[c], 1000u + (uint32_t)c * 7919u, 5000u + (uint32_t)c * 104729u, T0 + c);
    char req[96];
    for (int i = 0; i < 150; i++) {
        for (int c = 0; c < 3; c++) {
            int64_t t = T0 + MS + (int64_t)(i * 3 + c) * MS;
            if (c == 0 && i == 100)
                tcp(h, &k[0], false, k[0].sn, TB_TCP_RST, NULL, 0, t);
            if (c == 0 && i >= 100)
                continue;
            snprintf(req, sizeof req, "GET /item/%d HTTP/1.1\r\nHost: shop\r\n\r\n", i);
            xmit(h, &k[c], true, req, t);
            xmit(h, &k[c], false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", t + 1000);
        }
    }
    tb_engine_expire(h->e, T0 + 400 * TB_NS_PER_SEC);
    tb_engine_finish(h->e, T0 + 400 * TB_NS_PER_SEC);
}

/* The same traffic through the per-request callback and through batches:
 * the same requests and connection records in the same order (a
 * connection's record after its requests), batches never over
 * TB_ENGINE_BATCH, nothing left behind by tb_engine_finish. */
static void test_batch_callback(void **state)
{
    (void)state;
    static struct evlog la, lb;
    struct h ha, hb;
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    h_init(&ha, TB_DLT_EN10MB, NULL, NULL);
    h_init(&hb, TB_DLT_EN10MB, NULL, NULL);
    tb_engine_free(ha.e);
    tb_engine_free(hb.e);
    assert_int_equal(tb_engine_new(&ha.e, ha.cat, NULL, NULL, ev_req, &la), 0);
    assert_int_equal(tb_engine_new(&hb.e, hb.cat, NULL, NULL, ev_req, &lb), 0);
    tb_engine_set_conn_cb(ha.e, ev_conn, &la);
    tb_engine_set_conn_cb(hb.e, ev_conn, &lb);
    tb_engine_set_batch_cb(hb.e, ev_batch, &lb);
    batch_traffic(&ha);
    batch_traffic(&hb);
    size_t nreq = 0, nconn = 0;
    assert_int_equal(la.n, lb.n);
    for (size_t i = 0; i < la.n; i++) {
        const struct ev *a = &la.v[i], *b = &lb.v[i];
        assert_int_equal(a->kind, b->kind);
        if (a->kind == 'C') {
            nconn++;
            assert_int_equal(a->conn, b->conn);
            assert_int_equal(a->closed, b->closed);
            assert_int_equal(a->requests, b->requests);
            /* Its requests all came before it. */
            uint64_t seen = 0;
            for (size_t j = 0; j < i; j++)
                seen += lb.v[j].kind == 'R' && lb.v[j].r.conn == b->conn;
            assert_int_equal(seen, b->requests);
            continue;
        }
        nreq++;
        assert_int_equal(a->r.arrival_ns, b->r.arrival_ns);
        assert_int_equal(a->r.departure_ns, b->r.departure_ns);
        assert_int_equal(a->r.conn, b->r.conn);
        assert_int_equal(a->r.req_bytes, b->r.req_bytes);
        assert_int_equal(a->r.resp_bytes, b->r.resp_bytes);
        assert_true(tb_addr_eq(&a->r.client, &b->r.client));
        assert_int_equal(a->r.tier, b->r.tier);
        assert_int_equal(a->r.server, b->r.server);
        assert_int_equal(a->r.class_id, b->r.class_id);
        assert_int_equal(a->r.status, b->r.status);
        assert_int_equal(a->r.flags, b->r.flags);
    }
    assert_int_equal(nreq, 100 + 150 + 150);
    assert_int_equal(nconn, 6); /* each connection opened and ended */
    /* 400 requests: whole batches but for the ones cut by a record. */
    assert_true(lb.batches >= 400 / TB_ENGINE_BATCH && lb.batches < 400 / 8);
    h_fini(&ha);
    h_fini(&hb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_every_link_type),
        cmocka_unit_test(test_many_exchanges),
        cmocka_unit_test(test_reorder_and_retransmit),
        cmocka_unit_test(test_lost_segment_gap),
        cmocka_unit_test(test_ack_before_data),
        cmocka_unit_test(test_lost_tail_keeps_departure),
        cmocka_unit_test(test_wraparound),
        cmocka_unit_test(test_rst_and_idle),
        cmocka_unit_test(test_abandoned_per_tier),
        cmocka_unit_test(test_midstream),
        cmocka_unit_test(test_fragments_and_snaplen),
        cmocka_unit_test(test_eviction_and_syn_flood),
        cmocka_unit_test(test_port_reuse),
        cmocka_unit_test(test_tiers_file),
        cmocka_unit_test(test_forced_proto_and_bad_name),
        cmocka_unit_test(test_detection_waits_for_bytes),
        cmocka_unit_test(test_parser_stop_inside_delivery),
        cmocka_unit_test(test_database_detection),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_connection_records),
        cmocka_unit_test(test_batch_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
