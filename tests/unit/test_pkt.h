/* SPDX-License-Identifier: MIT */
/* test_pkt.h — builds real IPv4/IPv6 + TCP packets and link-layer framings in
 * memory for the capture tests (checksums are left zero: nothing checks them). */
#ifndef TB_TEST_PKT_H
#define TB_TEST_PKT_H

#include <string.h>

#include "addr.h"

static inline uint8_t *tp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *tp_put32(uint8_t *p, uint32_t v)
{
    p = tp_put16(p, (uint16_t)(v >> 16));
    return tp_put16(p, (uint16_t)v);
}

/* An IP packet carrying a TCP segment with 12 bytes of options (NOP, NOP,
 * timestamps), from src to dst; the family follows src. Returns its length. */
static inline size_t tp_ip_tcp(uint8_t *out, const struct tb_addr *src, const struct tb_addr *dst,
                               uint32_t seq, uint32_t ack, uint8_t flags, const void *pl,
                               size_t len)
{
    uint8_t *p = out;
    size_t tcp_len = 32 + len;
    if (src->family == 4) {
        *p++ = 0x45;
        *p++ = 0;
        p = tp_put16(p, (uint16_t)(20 + tcp_len));
        p = tp_put32(p, 0x12344000); /* id, DF */
        *p++ = 64;
        *p++ = 6;
        p = tp_put16(p, 0);
        memcpy(p, src->ip + 12, 4);
        memcpy(p + 4, dst->ip + 12, 4);
        p += 8;
    } else {
        p = tp_put32(p, 0x60000000);
        p = tp_put16(p, (uint16_t)tcp_len);
        *p++ = 6;
        *p++ = 64;
        memcpy(p, src->ip, 16);
        memcpy(p + 16, dst->ip, 16);
        p += 32;
    }
    p = tp_put16(p, src->port);
    p = tp_put16(p, dst->port);
    p = tp_put32(p, seq);
    p = tp_put32(p, ack);
    *p++ = 8 << 4; /* 32-byte header */
    *p++ = flags;
    p = tp_put16(p, 65535);
    p = tp_put32(p, 0);
    static const uint8_t opts[12] = {1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2};
    memcpy(p, opts, 12);
    p += 12;
    if (len)
        memcpy(p, pl, len);
    return (size_t)(p - out) + len;
}

/* Ethernet header with `nvlan` tags of the given TPIDs in front of `ip`. */
static inline size_t tp_eth(uint8_t *out, const uint16_t *tpids, int nvlan, const uint8_t *ip,
                            size_t iplen)
{
    uint8_t *p = out;
    static const uint8_t macs[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
    memcpy(p, macs, 12);
    p += 12;
    for (int i = 0; i < nvlan; i++) {
        p = tp_put16(p, tpids[i]);
        p = tp_put16(p, (uint16_t)(100 + i));
    }
    p = tp_put16(p, (ip[0] >> 4) == 6 ? 0x86dd : 0x0800);
    memcpy(p, ip, iplen);
    return (size_t)(p - out) + iplen;
}

static inline struct tb_addr tp_addr(const char *s)
{
    struct tb_addr a;
    tb_addr_parse(s, &a);
    return a;
}

#endif
