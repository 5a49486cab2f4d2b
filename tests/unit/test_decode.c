/* SPDX-License-Identifier: MIT */
/* test_decode.c — link-layer framings, IPv4/IPv6 (extension headers,
 * fragments), TCP options, snaplen cuts and malformed headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "decode-int.h"
#include "test_pkt.h"

static uint8_t ip[2048], frame[2048];
static struct tb_pkt pk;

static size_t v4_segment(const char *payload)
{
    struct tb_addr s = tp_addr("10.1.2.3:40000"), d = tp_addr("10.9.8.7:80");
    return tp_ip_tcp(ip, &s, &d, 1000, 2000, TB_TCP_ACK | TB_TCP_PSH, payload, strlen(payload));
}

static size_t v6_segment(const char *payload)
{
    struct tb_addr s = tp_addr("[2001:db8::1]:40000"), d = tp_addr("[2001:db8::2]:3306");
    return tp_ip_tcp(ip, &s, &d, 7, 9, TB_TCP_ACK, payload, strlen(payload));
}

static void expect_v4(const char *payload)
{
    char buf[TB_ADDR_STRLEN];
    assert_string_equal(tb_addr_fmt(&pk.src, buf, sizeof buf), "10.1.2.3:40000");
    assert_string_equal(tb_addr_fmt(&pk.dst, buf, sizeof buf), "10.9.8.7:80");
    assert_int_equal(pk.seq, 1000);
    assert_int_equal(pk.ack, 2000);
    assert_int_equal(pk.flags, TB_TCP_ACK | TB_TCP_PSH);
    assert_int_equal(pk.paylen, strlen(payload));
    assert_memory_equal(pk.payload, payload, strlen(payload));
    assert_int_equal(pk.missing, 0);
}

static void expect_v6(const char *payload)
{
    char buf[TB_ADDR_STRLEN];
    assert_string_equal(tb_addr_fmt(&pk.src, buf, sizeof buf), "[2001:db8::1]:40000");
    assert_string_equal(tb_addr_fmt(&pk.dst, buf, sizeof buf), "[2001:db8::2]:3306");
    assert_int_equal(pk.paylen, strlen(payload));
    assert_memory_equal(pk.payload, payload, strlen(payload));
}

static enum tb_dec dec(int dlt, size_t len)
{
    memset(&pk, 0, sizeof pk);
    return tb_decode(dlt, frame, (uint32_t)len, (uint32_t)len, &pk);
}

static void test_ethernet_vlans(void **state)
{
    (void)state;
    size_t n = v4_segment("GET / HTTP/1.1\r\n");
    static const uint16_t q[] = {0x8100}, qinq[] = {0x88a8, 0x8100}, old[] = {0x9100, 0x9100};
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, NULL, 0, ip, n)), TB_DEC_TCP);
    expect_v4("GET / HTTP/1.1\r\n");
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, q, 1, ip, n)), TB_DEC_TCP);
    expect_v4("GET / HTTP/1.1\r\n");
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, qinq, 2, ip, n)), TB_DEC_TCP);
    expect_v4("GET / HTTP/1.1\r\n");
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, old, 2, ip, n)), TB_DEC_TCP);
    expect_v4("GET / HTTP/1.1\r\n");
    n = v6_segment("xyz");
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, q, 1, ip, n)), TB_DEC_TCP);
    expect_v6("xyz");
    /* Too many tags to be a real frame. */
    uint16_t many[9];
    for (int i = 0; i < 9; i++)
        many[i] = 0x8100;
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, many, 9, ip, n)), TB_DEC_MALFORMED);
}

static void test_ethernet_padding_and_non_ip(void **state)
{
    (void)state;
    /* Trailing bytes after the IP packet (Ethernet padding, a trailer) are
     * no payload. */
    size_t n = v4_segment("");
    size_t len = tp_eth(frame, NULL, 0, ip, n);
    memset(frame + len, 0xee, 8);
    assert_int_equal(dec(TB_DLT_EN10MB, len + 8), TB_DEC_TCP);
    assert_int_equal(pk.paylen, 0);
    /* ARP */
    len = tp_eth(frame, NULL, 0, ip, n);
    frame[12] = 0x08;
    frame[13] = 0x06;
    assert_int_equal(dec(TB_DLT_EN10MB, len), TB_DEC_NON_IP);
    /* UDP */
    n = v4_segment("abc");
    ip[9] = 17;
    assert_int_equal(dec(TB_DLT_EN10MB, tp_eth(frame, NULL, 0, ip, n)), TB_DEC_NON_TCP);
}

static void test_sll_sll2(void **state)
{
    (void)state;
    size_t n = v4_segment("hello");
    memset(frame, 0, 16);
    frame[14] = 0x08; /* protocol 0x0800 at offset 14 */
    memcpy(frame + 16, ip, n);
    assert_int_equal(dec(TB_DLT_LINUX_SLL, 16 + n), TB_DEC_TCP);
    expect_v4("hello");
    n = v6_segment("hello6");
    memset(frame, 0, 20);
    frame[0] = 0x86;
    frame[1] = 0xdd;
    memcpy(frame + 20, ip, n);
    assert_int_equal(dec(TB_DLT_LINUX_SLL2, 20 + n), TB_DEC_TCP);
    expect_v6("hello6");
    assert_int_equal(dec(TB_DLT_LINUX_SLL2, 19), TB_DEC_MALFORMED);
}

static void test_null_loop_raw(void **state)
{
    (void)state;
    size_t n = v4_segment("abc");
    /* DLT_NULL from a little-endian host, and the same file read elsewhere. */
    static const uint8_t le_inet[4] = {2, 0, 0, 0}, be_inet[4] = {0, 0, 0, 2};
    static const uint8_t le_inet6_bsd[4] = {24, 0, 0, 0}, be_inet6_mac[4] = {0, 0, 0, 30};
    memcpy(frame, le_inet, 4);
    memcpy(frame + 4, ip, n);
    assert_int_equal(dec(TB_DLT_NULL, 4 + n), TB_DEC_TCP);
    expect_v4("abc");
    memcpy(frame, be_inet, 4);
    assert_int_equal(dec(TB_DLT_LOOP, 4 + n), TB_DEC_TCP);
    expect_v4("abc");
    assert_int_equal(dec(TB_DLT_NULL, 4 + n), TB_DEC_TCP);
    n = v6_segment("def");
    memcpy(frame, le_inet6_bsd, 4);
    memcpy(frame + 4, ip, n);
    assert_int_equal(dec(TB_DLT_NULL, 4 + n), TB_DEC_TCP);
    expect_v6("def");
    memcpy(frame, be_inet6_mac, 4);
    assert_int_equal(dec(TB_DLT_LOOP, 4 + n), TB_DEC_TCP);
    frame[3] = 7; /* some other family */
    assert_int_equal(dec(TB_DLT_LOOP, 4 + n), TB_DEC_NON_IP);

    memcpy(frame, ip, n);
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_TCP);
    expect_v6("def");
    assert_int_equal(dec(TB_DLT_IPV6, n), TB_DEC_TCP);
    assert_int_equal(dec(TB_DLT_IPV4, n), TB_DEC_MALFORMED);
    n = v4_segment("ghi");
    memcpy(frame, ip, n);
    assert_int_equal(dec(TB_DLT_RAW14, n), TB_DEC_TCP);
    assert_int_equal(dec(TB_DLT_LINKTYPE_RAW, n), TB_DEC_TCP);
    assert_int_equal(dec(TB_DLT_IPV4, n), TB_DEC_TCP);
    expect_v4("ghi");
    assert_int_equal(dec(147, n), TB_DEC_UNKNOWN_LINK);
    assert_false(tb_decode_link_supported(147));
    assert_true(tb_decode_link_supported(TB_DLT_LINUX_SLL2));
}

static void test_ipv6_extensions(void **state)
{
    (void)state;
    size_t n = v6_segment("payload");
    /* Insert hop-by-hop (8 bytes) and destination options (16 bytes). */
    uint8_t ext[24] = {60, 0, 1, 4, 0, 0, 0, 0, 6, 1, 1, 12, 0};
    memcpy(frame, ip, 40);
    memcpy(frame + 40, ext, 24);
    memcpy(frame + 64, ip + 40, n - 40);
    frame[6] = 0;                                   /* next header: hop-by-hop */
    frame[4] = 0;
    frame[5] = (uint8_t)(n - 40 + 24);              /* payload length */
    assert_int_equal(dec(TB_DLT_RAW12, n + 24), TB_DEC_TCP);
    expect_v6("payload");
    /* A fragment header: counted and skipped. */
    frame[6] = 44;
    assert_int_equal(dec(TB_DLT_RAW12, n + 24), TB_DEC_FRAGMENT);
    /* An extension header longer than the packet. */
    frame[6] = 0;
    frame[41] = 200;
    assert_int_equal(dec(TB_DLT_RAW12, n + 24), TB_DEC_MALFORMED);
}

static void test_ipv4_fragments_and_lengths(void **state)
{
    (void)state;
    size_t n = v4_segment("0123456789");
    memcpy(frame, ip, n);
    frame[6] = 0x20; /* more fragments */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_FRAGMENT);
    frame[6] = 0x00;
    frame[7] = 0x10; /* offset 16 */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_FRAGMENT);
    frame[6] = 0x40; /* DF only: a whole packet */
    frame[7] = 0;
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_TCP);
    frame[0] = 0x44; /* IHL 16 bytes */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_MALFORMED);
    frame[0] = 0x45;
    tp_put16(frame + 2, (uint16_t)(n + 1)); /* claims more than the frame holds */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_MALFORMED);
    tp_put16(frame + 2, 19);
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_MALFORMED);
    tp_put16(frame + 2, 0); /* offload leaves 0: the frame length rules */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_TCP);
    assert_int_equal(pk.paylen, 10);
    tp_put16(frame + 2, (uint16_t)n);
    frame[32] = 4 << 4; /* TCP data offset 16 */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_MALFORMED);
    frame[32] = 15 << 4; /* 60 bytes: beyond the 42-byte segment */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_MALFORMED);
    frame[32] = 5 << 4; /* options become payload */
    assert_int_equal(dec(TB_DLT_RAW12, n), TB_DEC_TCP);
    assert_int_equal(pk.paylen, 22);
}

static void test_snaplen(void **state)
{
    (void)state;
    size_t n = v4_segment("0123456789");
    size_t len = tp_eth(frame, NULL, 0, ip, n);
    /* Cut 4 bytes into the payload. */
    assert_int_equal(tb_decode(TB_DLT_EN10MB, frame, (uint32_t)(len - 6), (uint32_t)len, &pk),
                     TB_DEC_TCP);
    assert_true(pk.truncated);
    assert_int_equal(pk.paylen, 4);
    assert_int_equal(pk.missing, 6);
    assert_memory_equal(pk.payload, "0123", 4);
    /* Cut inside the TCP options: truncated, not malformed. */
    assert_int_equal(tb_decode(TB_DLT_EN10MB, frame, 14 + 20 + 25, (uint32_t)len, &pk),
                     TB_DEC_HDR_TRUNC);
    assert_int_equal(tb_decode(TB_DLT_EN10MB, frame, 14 + 10, (uint32_t)len, &pk),
                     TB_DEC_HDR_TRUNC);
    /* The same cut without snaplen as the excuse is malformed. */
    assert_int_equal(tb_decode(TB_DLT_EN10MB, frame, 14 + 20 + 25, 14 + 20 + 25, &pk),
                     TB_DEC_MALFORMED);
    /* IPv6 cut in the payload. */
    n = v6_segment("abcdefgh");
    len = tp_eth(frame, NULL, 0, ip, n);
    assert_int_equal(tb_decode(TB_DLT_EN10MB, frame, (uint32_t)(len - 3), (uint32_t)len, &pk),
                     TB_DEC_TCP);
    assert_int_equal(pk.paylen, 5);
    assert_int_equal(pk.missing, 3);
}

/* ---- the fast path against the checked path ------------------------------ */

static unsigned fast_hits;
static int agree_lt = TB_DLT_EN10MB; /* the link type agree() decodes frames as */

/* Decodes the frame both ways and holds them to the same result: the same
 * verdict and, for TCP, the same packet to the byte. The fast path on its own
 * must either decode (to that same packet) or leave the packet untouched. */
static void agree(const uint8_t *fr, uint32_t caplen, uint32_t wirelen)
{
    struct tb_pkt a, b, c, untouched;
    memset(&a, 0xa5, sizeof a);
    memset(&b, 0xa5, sizeof b);
    memset(&c, 0xa5, sizeof c);
    memset(&untouched, 0xa5, sizeof untouched);
    enum tb_dec da = tb_decode(agree_lt, fr, caplen, wirelen, &a);
    enum tb_dec db = tb__decode_checked(agree_lt, fr, caplen, wirelen, &b);
    if (da != db)
        print_error("link type %d caplen %u wirelen %u\n", agree_lt, caplen, wirelen);
    assert_int_equal(da, db);
    if (da == TB_DEC_TCP)
        assert_memory_equal(&a, &b, sizeof a);
    if (tb__decode_fast(agree_lt, fr, caplen, wirelen, &c)) {
        fast_hits++;
        assert_int_equal(db, TB_DEC_TCP);
        assert_memory_equal(&c, &b, sizeof c);
    } else {
        assert_memory_equal(&c, &untouched, sizeof c);
    }
}

/* Every captured length from nothing to the whole frame, each with the frame
 * cut by snaplen, not cut, longer on the wire, and a wire length below the
 * captured one (taken as the captured length). */
static void agree_at_every_cut(const uint8_t *fr, size_t len)
{
    for (uint32_t cap = 0; cap <= len; cap++) {
        agree(fr, cap, (uint32_t)len);
        agree(fr, cap, cap);
        agree(fr, cap, (uint32_t)len + 100);
        agree(fr, cap, cap / 2);
    }
}

/* Inserts `n` bytes of IPv4 options (NOPs) after the fixed header of the IPv4
 * packet in ip[] of length `len`. */
static size_t add_ip_options(size_t len, size_t n)
{
    memmove(ip + 20 + n, ip + 20, len - 20);
    memset(ip + 20, 1, n);
    ip[0] = (uint8_t)(0x40 | (20 + n) / 4);
    tp_put16(ip + 2, (uint16_t)(len + n));
    return len + n;
}

static void test_fast_path_common_frames(void **state)
{
    (void)state;
    struct tb_addr s = tp_addr("10.1.2.3:40000"), d = tp_addr("10.9.8.7:80");
    size_t n = v4_segment("GET / HTTP/1.1\r\n");
    size_t len = tp_eth(frame, NULL, 0, ip, n);
    memset(&pk, 0, sizeof pk);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    expect_v4("GET / HTTP/1.1\r\n");
    assert_memory_equal(&pk.src, &s, sizeof s);
    assert_memory_equal(&pk.dst, &d, sizeof d);
    assert_false(pk.truncated);
    assert_ptr_equal(pk.payload, frame + 14 + 20 + 32);
    /* Cut by snaplen inside the payload: still the fast path. */
    memset(&pk, 0, sizeof pk);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len - 5, (uint32_t)len, &pk));
    assert_true(pk.truncated);
    assert_int_equal(pk.paylen, 11);
    assert_int_equal(pk.missing, 5);
    /* IPv4 options: the fast path too. */
    n = add_ip_options(v4_segment("abc"), 12);
    len = tp_eth(frame, NULL, 0, ip, n);
    memset(&pk, 0, sizeof pk);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    expect_v4("abc");
    assert_ptr_equal(pk.payload, frame + 14 + 32 + 32);
    /* Offload's zero total length, and Ethernet padding. */
    n = v4_segment("xy");
    len = tp_eth(frame, NULL, 0, ip, n);
    tp_put16(frame + 14 + 2, 0);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    expect_v4("xy");
    tp_put16(frame + 14 + 2, (uint16_t)n);
    memset(frame + len, 0, 10);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len + 10, (uint32_t)len + 10, &pk));
    expect_v4("xy");
    /* One 802.1Q tag, SLL, SLL2 and raw IPv4: the fast path too. */
    static const uint16_t q[] = {0x8100}, qq[] = {0x88a8, 0x8100};
    n = v4_segment("abc");
    len = tp_eth(frame, q, 1, ip, n);
    memset(&pk, 0, sizeof pk);
    assert_true(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    expect_v4("abc");
    for (size_t k = 0; k < 5; k++) {
        static const int lts[] = {TB_DLT_LINUX_SLL, TB_DLT_LINUX_SLL2, TB_DLT_RAW12,
                                  TB_DLT_LINKTYPE_RAW, TB_DLT_IPV4};
        size_t hl = lts[k] == TB_DLT_LINUX_SLL ? 16 : lts[k] == TB_DLT_LINUX_SLL2 ? 20 : 0;
        memset(frame, 0, hl);
        if (lts[k] == TB_DLT_LINUX_SLL)
            frame[14] = 0x08;
        if (lts[k] == TB_DLT_LINUX_SLL2)
            frame[0] = 0x08;
        memcpy(frame + hl, ip, n);
        memset(&pk, 0, sizeof pk);
        assert_true(tb__decode_fast(lts[k], frame, (uint32_t)(hl + n), (uint32_t)(hl + n), &pk));
        expect_v4("abc");
        assert_ptr_equal(pk.payload, frame + hl + 20 + 32);
    }
    /* Left to the checked path: two tags, IPv6, NULL/LOOP. */
    len = tp_eth(frame, qq, 2, ip, n);
    assert_false(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    assert_int_equal(dec(TB_DLT_EN10MB, len), TB_DEC_TCP);
    expect_v4("abc");
    n = v6_segment("abc");
    len = tp_eth(frame, NULL, 0, ip, n);
    assert_false(tb__decode_fast(TB_DLT_EN10MB, frame, (uint32_t)len, (uint32_t)len, &pk));
    memcpy(frame, ip, n);
    assert_false(tb__decode_fast(TB_DLT_RAW12, frame, (uint32_t)n, (uint32_t)n, &pk));
    n = v4_segment("abc");
    memset(frame, 0, 4);
    frame[0] = 2;
    memcpy(frame + 4, ip, n);
    assert_false(tb__decode_fast(TB_DLT_NULL, frame, (uint32_t)n + 4, (uint32_t)n + 4, &pk));
}

/* The link framings agree() runs through besides plain Ethernet: the IP
 * packet in ip[] (length n) framed in frame[] for link kind k; sets agree_lt
 * and returns the frame's length. */
enum { LK_VLAN, LK_QINQ, LK_SLL, LK_SLL2, LK_RAW12, LK_RAW101, LK_IPV4, LK_NULL, LK_COUNT };
static size_t link_frame(int k, size_t n)
{
    static const uint16_t q[] = {0x8100}, qq[] = {0x88a8, 0x8100};
    size_t hl = 0;
    agree_lt = TB_DLT_EN10MB;
    switch (k) {
    case LK_VLAN:
        return tp_eth(frame, q, 1, ip, n);
    case LK_QINQ:
        return tp_eth(frame, qq, 2, ip, n);
    case LK_SLL:
        agree_lt = TB_DLT_LINUX_SLL;
        hl = 16;
        memset(frame, 0, hl);
        frame[14] = ip[0] >> 4 == 6 ? 0x86 : 0x08;
        frame[15] = ip[0] >> 4 == 6 ? 0xdd : 0x00;
        break;
    case LK_SLL2:
        agree_lt = TB_DLT_LINUX_SLL2;
        hl = 20;
        memset(frame, 0, hl);
        frame[0] = ip[0] >> 4 == 6 ? 0x86 : 0x08;
        frame[1] = ip[0] >> 4 == 6 ? 0xdd : 0x00;
        break;
    case LK_RAW12:
        agree_lt = TB_DLT_RAW12;
        break;
    case LK_RAW101:
        agree_lt = TB_DLT_LINKTYPE_RAW;
        break;
    case LK_IPV4:
        agree_lt = TB_DLT_IPV4;
        break;
    default:
        agree_lt = TB_DLT_NULL;
        hl = 4;
        memset(frame, 0, hl);
        frame[0] = ip[0] >> 4 == 6 ? 10 : 2;
        break;
    }
    memcpy(frame + hl, ip, n);
    return hl + n;
}

static void test_fast_path_agrees_at_every_cut(void **state)
{
    (void)state;
    static const uint16_t q[] = {0x8100};
    size_t n, len;
    fast_hits = 0;
    /* Plain, 16 payload bytes: 14 + 20 + 32 header bytes. Whole, or cut by
     * snaplen anywhere in the payload (wire length 82 or 182), the fast path
     * decodes; the rest is the checked path's. */
    n = v4_segment("0123456789abcdef");
    len = tp_eth(frame, NULL, 0, ip, n);
    assert_int_equal(len, 82);
    agree_at_every_cut(frame, len);
    /* caplen 66..82 with wire lengths 82 and 182, and 82 twice more (wire
     * length equal to it, and below it). */
    assert_int_equal(fast_hits, 17 + 17 + 1 + 1);
    /* IPv4 options, short and longest. */
    n = add_ip_options(v4_segment("0123456789"), 4);
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    n = add_ip_options(v4_segment("0123456789"), 40);
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    /* TCP without options (20 bytes) and with the longest header (60). */
    n = v4_segment("0123456789012345678901234567890123456789");
    ip[32] = 5 << 4;
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    ip[32] = 15 << 4;
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    /* No payload; offload's zero length; a VLAN tag; IPv6. */
    n = v4_segment("");
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    tp_put16(ip + 2, 0);
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    n = v4_segment("abc");
    agree_at_every_cut(frame, tp_eth(frame, q, 1, ip, n));
    n = v6_segment("abc");
    agree_at_every_cut(frame, tp_eth(frame, NULL, 0, ip, n));
    /* Padding after the IP packet. */
    n = v4_segment("abc");
    len = tp_eth(frame, NULL, 0, ip, n);
    memset(frame + len, 0xee, 20);
    agree_at_every_cut(frame, len + 20);
    /* The same packets behind every other link framing. */
    for (int k = 0; k < LK_COUNT; k++) {
        unsigned before = fast_hits;
        n = v4_segment("0123456789abcdef");
        agree_at_every_cut(frame, link_frame(k, n));
        n = add_ip_options(v4_segment("0123456789"), 40);
        agree_at_every_cut(frame, link_frame(k, n));
        n = v4_segment("0123456789012345678901234567890123456789");
        ip[32] = 15 << 4;
        agree_at_every_cut(frame, link_frame(k, n));
        n = v4_segment("");
        tp_put16(ip + 2, 0);
        agree_at_every_cut(frame, link_frame(k, n));
        n = v6_segment("abc");
        agree_at_every_cut(frame, link_frame(k, n));
        /* The fast path takes IPv4 behind every framing but two tags and NULL. */
        if (k == LK_QINQ || k == LK_NULL)
            assert_int_equal(fast_hits, before);
        else
            assert_true(fast_hits > before + 40);
    }
    agree_lt = TB_DLT_EN10MB;
}

/* Every header byte set to values at the edges of what the two paths check
 * (version, header lengths, fragment bits, protocol, total length, data
 * offset), whole and cut. */
static void test_fast_path_agrees_on_mutations(void **state)
{
    (void)state;
    static const uint8_t vals[] = {0x00, 0x01, 0x04, 0x05, 0x06, 0x0f, 0x11, 0x13, 0x14, 0x20,
                                   0x3f, 0x40, 0x44, 0x45, 0x46, 0x4f, 0x50, 0x60, 0x80, 0xf0,
                                   0xff};
    uint8_t base[2048];
    size_t n = add_ip_options(v4_segment("0123456789012345678901234567890123456789"), 8);
    size_t len = tp_eth(base, NULL, 0, ip, n);
    fast_hits = 0;
    for (size_t at = 0; at < 14 + 28 + 32 + 4; at++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(frame, base, len);
            frame[at] = vals[v];
            agree(frame, (uint32_t)len, (uint32_t)len);
            agree(frame, (uint32_t)len - 7, (uint32_t)len);
            agree(frame, (uint32_t)len - 45, (uint32_t)len);
            agree(frame, (uint32_t)len, (uint32_t)len + 3);
        }
    }
    /* Most mutations leave a frame the fast path takes. */
    assert_true(fast_hits > 1000);
    /* The same behind the other framings, link header bytes included. */
    for (int k = 0; k < LK_COUNT; k++) {
        n = add_ip_options(v4_segment("0123456789012345678901234567890123456789"), 8);
        len = link_frame(k, n);
        memcpy(base, frame, len);
        for (size_t at = 0; at < len - 40; at++) {
            for (size_t v = 0; v < sizeof vals; v++) {
                memcpy(frame, base, len);
                frame[at] = vals[v];
                agree(frame, (uint32_t)len, (uint32_t)len);
                agree(frame, (uint32_t)len - 7, (uint32_t)len);
                agree(frame, (uint32_t)len - 45, (uint32_t)len);
            }
        }
    }
    agree_lt = TB_DLT_EN10MB;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ethernet_vlans),
        cmocka_unit_test(test_ethernet_padding_and_non_ip),
        cmocka_unit_test(test_sll_sll2),
        cmocka_unit_test(test_null_loop_raw),
        cmocka_unit_test(test_ipv6_extensions),
        cmocka_unit_test(test_ipv4_fragments_and_lengths),
        cmocka_unit_test(test_snaplen),
        cmocka_unit_test(test_fast_path_common_frames),
        cmocka_unit_test(test_fast_path_agrees_at_every_cut),
        cmocka_unit_test(test_fast_path_agrees_on_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
