/* SPDX-License-Identifier: MIT */
/* decode.c — link, IPv4/IPv6 and TCP header decoding of one captured frame.
 *
 * Every header is read through the checked reader. A frame that ends inside a
 * header is "truncated" when snaplen cut it (caplen < wirelen) and "malformed"
 * otherwise, as tcpdump keeps the two apart. */
#include "decode-int.h"

#include <string.h>

#include "rd.h"

#define ETH_IPV4 0x0800
#define ETH_IPV6 0x86dd
#define MAX_VLAN_TAGS 8
#define MAX_V6_EXT 16

bool tb_decode_link_supported(int linktype)
{
    switch (linktype) {
    case TB_DLT_NULL:
    case TB_DLT_EN10MB:
    case TB_DLT_RAW12:
    case TB_DLT_RAW14:
    case TB_DLT_LINKTYPE_RAW:
    case TB_DLT_LOOP:
    case TB_DLT_LINUX_SLL:
    case TB_DLT_IPV4:
    case TB_DLT_IPV6:
    case TB_DLT_LINUX_SLL2:
        return true;
    default:
        return false;
    }
}

/* Frame context: `wirelen` is the frame's on-wire length, so that the IP
 * layer can tell a snaplen cut from a lying length field. */
struct frame {
    const uint8_t *base;
    uint32_t wirelen;
    bool cut;
};

static enum tb_dec short_read(const struct frame *f)
{
    return f->cut ? TB_DEC_HDR_TRUNC : TB_DEC_MALFORMED;
}

/* Skips 802.1Q / 802.1ad / legacy QinQ tags; *type is the inner EtherType. */
static enum tb_dec skip_vlans(const struct frame *f, struct tb_rd *r, uint16_t *type)
{
    for (int i = 0; *type == 0x8100 || *type == 0x88a8 || *type == 0x9100; i++) {
        if (i == MAX_VLAN_TAGS)
            return TB_DEC_MALFORMED;
        if (!tb_rd_skip(r, 2) || !tb_rd_be16(r, type))
            return short_read(f);
    }
    return TB_DEC_TCP;
}

static enum tb_dec tcp(const struct frame *f, struct tb_rd r, uint32_t seg_wire,
                       struct tb_pkt *pk)
{
    /* r holds the captured bytes of the segment (at most seg_wire). */
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t off, flags;
    if (seg_wire < 20)
        return TB_DEC_MALFORMED;
    if (!tb_rd_be16(&r, &sport) || !tb_rd_be16(&r, &dport) || !tb_rd_be32(&r, &seq) ||
        !tb_rd_be32(&r, &ack) || !tb_rd_u8(&r, &off) || !tb_rd_u8(&r, &flags))
        return short_read(f);
    uint32_t hlen = (uint32_t)(off >> 4) * 4;
    if (hlen < 20 || hlen > seg_wire)
        return TB_DEC_MALFORMED;
    /* 14 header bytes read so far; the rest (window, checksum, urgent, options). */
    if (!tb_rd_skip(&r, hlen - 14))
        return short_read(f);
    pk->src.port = sport;
    pk->dst.port = dport;
    pk->seq = seq;
    pk->ack = ack;
    pk->flags = flags;
    pk->payload = r.p;
    pk->paylen = (uint32_t)tb_rd_left(&r);
    pk->missing = (uint32_t)(seg_wire - hlen) - pk->paylen;
    return TB_DEC_TCP;
}

/* Bytes of the frame on the wire from `p` onwards. */
static uint32_t wire_left(const struct frame *f, const uint8_t *p)
{
    uint32_t off = (uint32_t)(p - f->base);
    return f->wirelen > off ? f->wirelen - off : 0;
}

static enum tb_dec ipv4(const struct frame *f, struct tb_rd r, struct tb_pkt *pk)
{
    const uint8_t *ip = r.p;
    uint8_t vihl, proto;
    uint16_t tot, frag;
    if (!tb_rd_u8(&r, &vihl))
        return short_read(f);
    if ((vihl >> 4) != 4)
        return TB_DEC_MALFORMED;
    uint32_t ihl = (uint32_t)(vihl & 0x0f) * 4;
    if (ihl < 20)
        return TB_DEC_MALFORMED;
    if (!tb_rd_skip(&r, 1) || !tb_rd_be16(&r, &tot) || !tb_rd_skip(&r, 2) ||
        !tb_rd_be16(&r, &frag) || !tb_rd_skip(&r, 1) || !tb_rd_u8(&r, &proto))
        return short_read(f);
    uint32_t wire = wire_left(f, ip);
    /* A total length of 0 is what TCP segmentation offload leaves in frames
     * captured on the sending host: the frame's own length is the truth. */
    uint32_t total = tot ? tot : wire;
    if (total < ihl || total > wire)
        return TB_DEC_MALFORMED;
    struct tb_rd whole = {ip, r.end};
    if (!tb_rd_has(&whole, ihl))
        return short_read(f);
    const uint8_t *s = ip + 4 * 3; /* source address at offset 12 */
    tb__decode_addr_v4(&pk->src, s, 0);
    tb__decode_addr_v4(&pk->dst, s + 4, 0);
    if ((frag & 0x3fff) != 0) /* MF set or a non-zero offset */
        return TB_DEC_FRAGMENT;
    if (proto != 6)
        return TB_DEC_NON_TCP;
    /* Ethernet pads short frames: bound the segment by the IP length. */
    size_t cap = TB_MIN(tb_rd_left(&whole), (size_t)total);
    struct tb_rd seg = {ip + ihl, ip + cap};
    return tcp(f, seg, total - ihl, pk);
}

static enum tb_dec ipv6(const struct frame *f, struct tb_rd r, struct tb_pkt *pk)
{
    const uint8_t *ip = r.p;
    uint8_t v, nh;
    uint16_t plen;
    if (!tb_rd_u8(&r, &v))
        return short_read(f);
    if ((v >> 4) != 6)
        return TB_DEC_MALFORMED;
    if (!tb_rd_skip(&r, 3) || !tb_rd_be16(&r, &plen) || !tb_rd_u8(&r, &nh) ||
        !tb_rd_skip(&r, 1 + 32))
        return short_read(f);
    tb_addr_from_v6(&pk->src, ip + 8, 0);
    tb_addr_from_v6(&pk->dst, ip + 24, 0);
    uint32_t wire = wire_left(f, ip) - 40; /* >= 40: the header was present */
    /* Payload length 0 means a jumbogram or offload; trust the frame. */
    uint32_t total = plen ? plen : wire;
    if (total > wire)
        return TB_DEC_MALFORMED;
    size_t cap = TB_MIN(tb_rd_left(&r), (size_t)total);
    struct tb_rd seg = {r.p, r.p + cap};
    for (int i = 0;; i++) {
        if (nh == 6)
            return tcp(f, seg, total, pk);
        if (nh == 44)
            return TB_DEC_FRAGMENT;
        if (nh != 0 && nh != 43 && nh != 60 && nh != 51)
            return TB_DEC_NON_TCP;
        if (i == MAX_V6_EXT)
            return TB_DEC_MALFORMED;
        uint8_t next, len8;
        if (!tb_rd_u8(&seg, &next) || !tb_rd_u8(&seg, &len8))
            return short_read(f);
        /* Hop-by-hop, routing and destination options count 8-octet units
         * beyond the first 8; the authentication header counts 4-octet units
         * beyond the first 8 (RFC 8200 4.3-4.6, RFC 4302 2.2). */
        uint32_t hlen = nh == 51 ? ((uint32_t)len8 + 2) * 4 : ((uint32_t)len8 + 1) * 8;
        if (hlen > total)
            return TB_DEC_MALFORMED;
        if (!tb_rd_skip(&seg, hlen - 2))
            return short_read(f);
        total -= hlen;
        nh = next;
    }
}

static enum tb_dec ip_by_version(const struct frame *f, struct tb_rd r, struct tb_pkt *pk)
{
    if (!tb_rd_has(&r, 1))
        return short_read(f);
    switch (r.p[0] >> 4) {
    case 4:
        return ipv4(f, r, pk);
    case 6:
        return ipv6(f, r, pk);
    default:
        return TB_DEC_NON_IP;
    }
}

static enum tb_dec ethertype(const struct frame *f, struct tb_rd r, uint16_t type,
                             struct tb_pkt *pk)
{
    enum tb_dec d = skip_vlans(f, &r, &type);
    if (d != TB_DEC_TCP)
        return d;
    if (type == ETH_IPV4)
        return ipv4(f, r, pk);
    if (type == ETH_IPV6)
        return ipv6(f, r, pk);
    return TB_DEC_NON_IP;
}

enum tb_dec tb__decode_checked(int linktype, const uint8_t *data, uint32_t caplen,
                               uint32_t wirelen, struct tb_pkt *pk)
{
    struct frame f = {data, TB_MAX(wirelen, caplen), caplen < wirelen};
    struct tb_rd r = tb_rd_make(data, caplen);
    uint16_t type;
    pk->truncated = f.cut;
    switch (linktype) {
    case TB_DLT_EN10MB:
        if (!tb_rd_skip(&r, 12) || !tb_rd_be16(&r, &type))
            return short_read(&f);
        return ethertype(&f, r, type, pk);
    case TB_DLT_LINUX_SLL:
        /* packet type, ARPHRD, address length, 8 address bytes, protocol */
        if (!tb_rd_skip(&r, 14) || !tb_rd_be16(&r, &type))
            return short_read(&f);
        return ethertype(&f, r, type, pk);
    case TB_DLT_LINUX_SLL2:
        /* protocol, reserved, ifindex, ARPHRD, packet type, address length, address */
        if (!tb_rd_be16(&r, &type) || !tb_rd_skip(&r, 18))
            return short_read(&f);
        return ethertype(&f, r, type, pk);
    case TB_DLT_NULL:
    case TB_DLT_LOOP: {
        /* The address family is in the capturing host's byte order for NULL
         * and in network order for LOOP; accept both since files travel. A
         * family fits in 16 bits, so the other order shows as a huge value. */
        uint32_t fam;
        if (!tb_rd_le32(&r, &fam))
            return short_read(&f);
        if (fam > 0xffff)
            fam = __builtin_bswap32(fam);
        if (fam == 2)
            return ipv4(&f, r, pk);
        /* AF_INET6 is 10 on Linux, 24 on NetBSD/OpenBSD, 28 on FreeBSD, 30 on macOS. */
        if (fam == 10 || fam == 24 || fam == 28 || fam == 30)
            return ipv6(&f, r, pk);
        return TB_DEC_NON_IP;
    }
    case TB_DLT_RAW12:
    case TB_DLT_RAW14:
    case TB_DLT_LINKTYPE_RAW:
        return ip_by_version(&f, r, pk);
    case TB_DLT_IPV4:
        return ipv4(&f, r, pk);
    case TB_DLT_IPV6:
        return ipv6(&f, r, pk);
    default:
        return TB_DEC_UNKNOWN_LINK;
    }
}
