/* SPDX-License-Identifier: MIT */
/* decode-int.h — private to capture/: link, IPv4/IPv6 and TCP header decoding of
 * one captured frame. */
#ifndef TB_DECODE_H
#define TB_DECODE_H

#include <string.h>

#include "tb.h"
#include "addr.h"
#include "rd.h"

/* Link types the decoder understands (pcap DLT values; DLT_RAW is 12 on most
 * systems, 14 on OpenBSD, and LINKTYPE_RAW 101 in files when libpcap does not
 * map it). Listed here so the engine and the tests need not include pcap.h. */
enum {
    TB_DLT_NULL = 0,
    TB_DLT_EN10MB = 1,
    TB_DLT_RAW12 = 12,
    TB_DLT_RAW14 = 14,
    TB_DLT_LINKTYPE_RAW = 101,
    TB_DLT_LOOP = 108,
    TB_DLT_LINUX_SLL = 113,
    TB_DLT_IPV4 = 228,
    TB_DLT_IPV6 = 229,
    TB_DLT_LINUX_SLL2 = 276,
};

/* TCP flag bits as on the wire. */
enum { TB_TCP_FIN = 0x01, TB_TCP_SYN = 0x02, TB_TCP_RST = 0x04, TB_TCP_PSH = 0x08,
       TB_TCP_ACK = 0x10 };

/* What the decoder made of a frame. Only TB_DEC_TCP fills a tb_pkt. */
enum tb_dec {
    TB_DEC_TCP = 0,
    TB_DEC_NON_IP,      /* ARP, LLC, ... */
    TB_DEC_NON_TCP,     /* UDP, ICMP, ... */
    TB_DEC_FRAGMENT,    /* IPv4 fragment or IPv6 fragment header: counted, skipped */
    TB_DEC_MALFORMED,   /* a header field contradicts the bytes present */
    TB_DEC_HDR_TRUNC,   /* snaplen cut the frame inside its headers */
    TB_DEC_UNKNOWN_LINK,
};

/* One TCP segment. `payload` points into the caller's frame. */
struct tb_pkt {
    struct tb_addr src, dst;
    uint32_t seq, ack;
    uint8_t flags;
    bool truncated;        /* caplen < wirelen */
    const uint8_t *payload;
    uint32_t paylen;       /* payload bytes present in the capture */
    uint32_t missing;      /* payload bytes on the wire that snaplen cut off */
};

bool tb_decode_link_supported(int linktype);

/* The checked decoder: every field through the checked reader, every link type
 * and every oddity. Call tb_decode(), which tries the fast path first; this is
 * public for the tests that hold the two paths to the same results. */
enum tb_dec tb__decode_checked(int linktype, const uint8_t *data, uint32_t caplen,
                               uint32_t wirelen, struct tb_pkt *pk);

/* ::ffff:a.b.c.d with a port, the tb_addr that tb_addr_from_v4() builds,
 * written as whole 64-bit words: the flow key reads the address back as two
 * 64-bit words, and a load spanning several narrower stores cannot be
 * forwarded from them, which stalled every packet. */
static inline void tb__decode_addr_v4(struct tb_addr *a, const uint8_t ip4[4], uint16_t port)
{
    uint32_t v;
    memcpy(&v, ip4, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t hi = 0xffff0000ull | (uint64_t)v << 32;
#else
    uint64_t hi = 0xffffull << 32 | v;
#endif
    uint64_t lo = 0;
    memcpy(a->ip, &lo, 8);
    memcpy(a->ip + 8, &hi, 8);
    a->port = port;
    a->family = 4;
    a->pad_ = 0;
}

/* Where the IPv4 header starts in a frame of the common kind for its link
 * type: untagged or single-tagged (802.1Q) Ethernet, Linux cooked SLL and
 * SLL2 (what `tcpdump -i any` writes), raw IP; false for anything else. */
static inline bool tb__decode_fast_l3(int linktype, const uint8_t *data, uint32_t caplen,
                                      uint32_t *off)
{
    switch (linktype) {
    case TB_DLT_EN10MB:
        if (caplen < 18)
            return false;
        if (tb_load_be16(data + 12) == 0x0800)
            *off = 14;
        else if (tb_load_be16(data + 12) == 0x8100 && tb_load_be16(data + 16) == 0x0800)
            *off = 18;
        else
            return false;
        return true;
    case TB_DLT_LINUX_SLL:
        *off = 16;
        return caplen >= 16 && tb_load_be16(data + 14) == 0x0800;
    case TB_DLT_LINUX_SLL2:
        *off = 20;
        return caplen >= 20 && tb_load_be16(data) == 0x0800;
    case TB_DLT_RAW12:
    case TB_DLT_RAW14:
    case TB_DLT_LINKTYPE_RAW:
    case TB_DLT_IPV4:
        *off = 0; /* the version is checked with the header length */
        return true;
    default:
        return false;
    }
}

/* The frame nearly every capture is made of: IPv4 that is not a fragment
 * (header options or not) carrying a TCP header present in full, behind one
 * of the link headers above. Its fields are read in place after a few length
 * checks instead of through a checked read each; it is inline so that the
 * engine keeps the packet in registers. For any other frame, including every
 * one the checked path calls malformed or truncated, it returns false having
 * written nothing, and the checked path decides: the two paths may differ in
 * speed only (the tests hold them to that at every cut length, for every link
 * type). */
static inline bool tb__decode_fast(int linktype, const uint8_t *data, uint32_t caplen,
                                   uint32_t wirelen, struct tb_pkt *pk)
{
    uint32_t off;
    if (!tb__decode_fast_l3(linktype, data, caplen, &off) || caplen < off + 20 + 20)
        return false;
    const uint8_t *ip = data + off;
    /* Version 4 with a header of 20 bytes or more: 0x45 to 0x4f. */
    if ((uint32_t)ip[0] - 0x45 > 0x0a)
        return false;
    uint32_t ihl = (uint32_t)(ip[0] & 0x0f) * 4;
    /* Bytes 6-9: flags and fragment offset, TTL, protocol. Neither MF nor an
     * offset (a whole packet), and TCP. */
    if ((tb_load_be32(ip + 6) & 0x3fff00ffu) != 6)
        return false;
    uint32_t wire = TB_MAX(wirelen, caplen) - off;
    /* A total length of 0 is what TCP segmentation offload leaves in frames
     * captured on the sending host: the frame's own length is the truth. */
    uint32_t total = tb_load_be16(ip + 2);
    if (total == 0)
        total = wire;
    /* Ethernet pads short frames: the IP length bounds the segment. */
    uint32_t cap = TB_MIN(caplen - off, total);
    /* cap <= total, so this also puts the whole TCP header inside the IP
     * length; total <= wire makes sure the length field does not lie. */
    if (total > wire || cap < ihl + 20)
        return false;
    const uint8_t *th = ip + ihl;
    uint32_t hlen = (uint32_t)(th[12] >> 4) * 4;
    if (hlen < 20 || cap - ihl < hlen)
        return false;
    tb__decode_addr_v4(&pk->src, ip + 12, tb_load_be16(th));
    tb__decode_addr_v4(&pk->dst, ip + 16, tb_load_be16(th + 2));
    pk->seq = tb_load_be32(th + 4);
    pk->ack = tb_load_be32(th + 8);
    pk->flags = th[13];
    pk->truncated = caplen < wirelen;
    pk->payload = th + hlen;
    pk->paylen = cap - ihl - hlen;
    pk->missing = total - cap;
    return true;
}

/* Decodes a frame of link type `linktype`. `wirelen` is the frame's length on
 * the wire (>= caplen; a smaller value is taken as caplen). */
static inline enum tb_dec tb_decode(int linktype, const uint8_t *data, uint32_t caplen,
                                    uint32_t wirelen, struct tb_pkt *pk)
{
    if (tb__decode_fast(linktype, data, caplen, wirelen, pk))
        return TB_DEC_TCP;
    return tb__decode_checked(linktype, data, caplen, wirelen, pk);
}

#endif
