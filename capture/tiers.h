/* SPDX-License-Identifier: MIT */
/* tiers.h — the --tiers file (configured tiers and their servers) and the
 * naming rule of auto-discovered tiers. */
#ifndef TB_TIERS_H
#define TB_TIERS_H

#include "tb.h"
#include "addr.h"
#include "catalog.h"

struct tb_proto;

/* One line of the file: NAME PROTO SERVER[,SERVER...] [hosts=HOST[,HOST...]] */
struct tb_tier_cfg {
    char name[TB_NAME_MAX];
    const struct tb_proto *proto; /* NULL = "auto": detect by content */
    struct tb_addr *servers;      /* family 0 = "*:port", any address */
    size_t nservers;
    struct tb_addr *hosts;        /* port 0 */
    size_t nhosts;
    uint32_t tier_id;             /* catalog id, set by tb_tiers_register */
};

struct tb_tiers {
    struct tb_tier_cfg *tiers;
    size_t n;
};

#define TB_TIERS_MAX_FILE (1u << 20)

/* Parses the text of a tiers file; `name` is how errors name it. On error,
 * errbuf receives one line "NAME:LINE: what is wrong" and TB_E_BADFMT is
 * returned. *out is owned by the caller (tb_tiers_free). */
int tb_tiers_parse(const char *text, size_t len, const char *name, struct tb_tiers **out,
                   char *errbuf, size_t errlen);
/* Reads and parses a file; an unreadable file is TB_E_IO with a message. */
int tb_tiers_load(const char *path, struct tb_tiers **out, char *errbuf, size_t errlen);
void tb_tiers_free(struct tb_tiers *t);

/* Adds the tiers (marked configured), their explicit servers, their hosts and
 * each explicit server's address as a host, to the catalog; fills tier_id. */
int tb_tiers_register(struct tb_tiers *t, struct tb_catalog *cat);

/* The configured tier serving endpoint `a`: an exact address:port entry wins
 * over a "*:port" one. NULL when none. */
const struct tb_tier_cfg *tb_tiers_match(const struct tb_tiers *t, const struct tb_addr *a);

/* Name of an auto-discovered tier: the protocol's name when `port` is its
 * well-known port (the first of proto->ports), else "<proto>-<port>". */
void tb_tiers_auto_name(const struct tb_proto *proto, uint16_t port, char *out, size_t len);

#endif
