/* SPDX-License-Identifier: MIT */
/* addr.h — IPv4/IPv6 endpoint (address + port): compare, hash, format, parse. */
#ifndef TB_ADDR_H
#define TB_ADDR_H

#include "tb.h"

/* IPv4 addresses are kept as IPv4-mapped IPv6 (::ffff:a.b.c.d) so one
 * 16-byte compare serves both families; `family` says how to print. */
struct tb_addr {
    uint8_t ip[16];
    uint16_t port; /* host byte order; 0 = any/unknown */
    uint8_t family; /* 4 or 6 */
    uint8_t pad_;
};

#define TB_ADDR_STRLEN 56 /* "[ffff:...:ffff]:65535" + NUL, with room */

void tb_addr_from_v4(struct tb_addr *a, const uint8_t ip4[4], uint16_t port);
void tb_addr_from_v6(struct tb_addr *a, const uint8_t ip6[16], uint16_t port);
bool tb_addr_eq(const struct tb_addr *a, const struct tb_addr *b);
bool tb_addr_ip_eq(const struct tb_addr *a, const struct tb_addr *b);
uint64_t tb_addr_hash(const struct tb_addr *a);
/* "10.0.0.1:80", "[::1]:3306"; port 0 prints as address only ("10.0.0.1"). */
const char *tb_addr_fmt(const struct tb_addr *a, char *buf, size_t len);
/* Accepts "a.b.c.d[:port]", "[v6][:port]", bare "v6", "*:port" (any address,
 * family 0). Returns 0 or TB_E_INVAL. */
int tb_addr_parse(const char *s, struct tb_addr *a);

#endif
