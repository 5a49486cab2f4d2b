/* SPDX-License-Identifier: MIT */
/* decode.h — link, IPv4/IPv6 and TCP header decoding of one captured frame. */
#ifndef TB_DECODE_H
#define TB_DECODE_H

#include "tb.h"
#include "addr.h"

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
/* Decodes a frame of link type `linktype`. `wirelen` is the frame's length on
 * the wire (>= caplen; a smaller value is taken as caplen). */
enum tb_dec tb_decode(int linktype, const uint8_t *data, uint32_t caplen, uint32_t wirelen,
                      struct tb_pkt *pk);

#endif
