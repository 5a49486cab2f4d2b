/* SPDX-License-Identifier: MIT */
/* addr.c — endpoint helpers: IPv4 kept as IPv4-mapped IPv6. */
#include "addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

void tb_addr_from_v4(struct tb_addr *a, const uint8_t ip4[4], uint16_t port)
{
    memset(a, 0, sizeof *a);
    memcpy(a->ip, v4_prefix, 12);
    memcpy(a->ip + 12, ip4, 4);
    a->port = port;
    a->family = 4;
}

void tb_addr_from_v6(struct tb_addr *a, const uint8_t ip6[16], uint16_t port)
{
    memset(a, 0, sizeof *a);
    memcpy(a->ip, ip6, 16);
    a->port = port;
    a->family = 6;
}

bool tb_addr_ip_eq(const struct tb_addr *a, const struct tb_addr *b)
{
    return memcmp(a->ip, b->ip, 16) == 0;
}

bool tb_addr_eq(const struct tb_addr *a, const struct tb_addr *b)
{
    return a->port == b->port && memcmp(a->ip, b->ip, 16) == 0;
}

uint64_t tb_addr_hash(const struct tb_addr *a)
{
    /* FNV-1a over address and port; flows hash both ends with it. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 16; i++) {
        h ^= a->ip[i];
        h *= 0x100000001b3ull;
    }
    h ^= a->port;
    h *= 0x100000001b3ull;
    h ^= (uint64_t)a->port >> 8;
    h *= 0x100000001b3ull;
    return h;
}

const char *tb_addr_fmt(const struct tb_addr *a, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    if (a->family == 0) {
        snprintf(buf, len, "*:%u", a->port);
        return buf;
    }
    if (a->family == 4)
        inet_ntop(AF_INET, a->ip + 12, ip, sizeof ip);
    else
        inet_ntop(AF_INET6, a->ip, ip, sizeof ip);
    if (a->port == 0)
        snprintf(buf, len, "%s", ip);
    else if (a->family == 4)
        snprintf(buf, len, "%s:%u", ip, a->port);
    else
        snprintf(buf, len, "[%s]:%u", ip, a->port);
    return buf;
}

static int parse_port(const char *s, uint16_t *port)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 65535)
        return TB_E_INVAL;
    *port = (uint16_t)v;
    return 0;
}

int tb_addr_parse(const char *s, struct tb_addr *a)
{
    char host[INET6_ADDRSTRLEN + 2];
    uint16_t port = 0;
    const char *colon;
    memset(a, 0, sizeof *a);
    if (!s || !*s)
        return TB_E_INVAL;
    if (s[0] == '*') {
        if (s[1] != ':' || parse_port(s + 2, &port))
            return TB_E_INVAL;
        a->port = port;
        a->family = 0;
        return 0;
    }
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || (size_t)(rb - s - 1) >= sizeof host)
            return TB_E_INVAL;
        memcpy(host, s + 1, (size_t)(rb - s - 1));
        host[rb - s - 1] = '\0';
        if (rb[1] == ':') {
            if (parse_port(rb + 2, &port))
                return TB_E_INVAL;
        } else if (rb[1] != '\0') {
            return TB_E_INVAL;
        }
        uint8_t ip6[16];
        if (inet_pton(AF_INET6, host, ip6) != 1)
            return TB_E_INVAL;
        tb_addr_from_v6(a, ip6, port);
        return 0;
    }
    colon = strchr(s, ':');
    if (colon && strchr(colon + 1, ':')) {
        /* Bare IPv6 without brackets: no port. */
        uint8_t ip6[16];
        if (inet_pton(AF_INET6, s, ip6) != 1)
            return TB_E_INVAL;
        tb_addr_from_v6(a, ip6, 0);
        return 0;
    }
    size_t hl = colon ? (size_t)(colon - s) : strlen(s);
    if (hl >= sizeof host)
        return TB_E_INVAL;
    memcpy(host, s, hl);
    host[hl] = '\0';
    if (colon && parse_port(colon + 1, &port))
        return TB_E_INVAL;
    uint8_t ip4[4];
    if (inet_pton(AF_INET, host, ip4) != 1)
        return TB_E_INVAL;
    tb_addr_from_v4(a, ip4, port);
    return 0;
}
