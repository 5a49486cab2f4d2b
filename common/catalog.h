/* SPDX-License-Identifier: MIT */
/* catalog.h — in-memory registry of tiers, servers, hosts and request classes.
 *
 * Ids are small integers starting at 1, assigned here (not by SQLite) so that
 * the capture thread never waits on the database: the store loads an existing
 * catalog at open, the capture adds to it, and the writer persists what was
 * added (tb_catalog_pending_*), in order, before the requests that use it. */
#ifndef TB_CATALOG_H
#define TB_CATALOG_H

#include "tb.h"
#include "addr.h"

#define TB_CATALOG_MAX_CLASSES_PER_TIER 10000 /* the rest go to class "other" */
#define TB_NAME_MAX 64
/* The one cap on a class's length, in bytes: the protocol parsers cut their
 * fingerprints to it, and a text longer than this from anywhere else is cut
 * to it (or a few bytes less, so as not to split a UTF-8 character) before
 * lookup: a long query and its continuation share one class. */
#define TB_CATALOG_CLASS_MAX 512
/* Text of each tier's catch-all class (beyond the cap, or hostile text with a
 * NUL byte). Asking for this text by name returns the same class. */
#define TB_CATALOG_OTHER_CLASS "other"

struct tb_tier_info {
    uint32_t id;
    char name[TB_NAME_MAX];  /* "mysql", "http-8080", or from the tiers file */
    char proto[16];          /* "http", "mysql", "generic" */
    bool configured;         /* from --tiers rather than discovered */
};

struct tb_server_info {
    uint32_t id;
    uint32_t tier;
    struct tb_addr addr;
};

struct tb_class_info {
    uint32_t id;
    uint32_t tier;
    const char *text;        /* fingerprint, NUL-terminated, owned by the catalog */
};

struct tb_catalog;

int tb_catalog_new(struct tb_catalog **out);
void tb_catalog_free(struct tb_catalog *cat);

/* Find-or-add. *id receives the id. Adding with an existing name returns the
 * existing tier (its proto is not changed). */
int tb_catalog_tier(struct tb_catalog *cat, const char *name, const char *proto, uint32_t *id);
int tb_catalog_tier_find(const struct tb_catalog *cat, const char *name, uint32_t *id);
/* Marks a tier as coming from --tiers (tb_catalog_tier leaves it false). */
int tb_catalog_tier_set_configured(struct tb_catalog *cat, uint32_t tier, bool configured);
int tb_catalog_server(struct tb_catalog *cat, uint32_t tier, const struct tb_addr *addr,
                      uint32_t *id);
/* Server by address (any tier); TB_E_NOTFOUND when absent. */
int tb_catalog_server_find(const struct tb_catalog *cat, const struct tb_addr *addr, uint32_t *id);
/* Host address (port 0) belonging to a tier's machines. */
int tb_catalog_host(struct tb_catalog *cat, uint32_t tier, const struct tb_addr *host);
/* Class fingerprint of `len` bytes (no NUL needed). Beyond the per-tier cap
 * the tier's "other" class is returned. */
int tb_catalog_class(struct tb_catalog *cat, uint32_t tier, const char *text, size_t len,
                     uint32_t *id);

/* Lookups by id: NULL when the id is unknown. Entries never move: a returned
 * pointer stays valid until tb_catalog_free, whatever is added meanwhile. */
const struct tb_tier_info *tb_catalog_tier_get(const struct tb_catalog *cat, uint32_t id);
const struct tb_server_info *tb_catalog_server_get(const struct tb_catalog *cat, uint32_t id);
const struct tb_class_info *tb_catalog_class_get(const struct tb_catalog *cat, uint32_t id);
/* The class's text, or "?" for an id the catalog does not hold (a damaged
 * or foreign database): never NULL. */
const char *tb_catalog_class_text(const struct tb_catalog *cat, uint32_t id);

/* Iteration: ids are dense, 1..count. */
uint32_t tb_catalog_tier_count(const struct tb_catalog *cat);
uint32_t tb_catalog_server_count(const struct tb_catalog *cat);
uint32_t tb_catalog_class_count(const struct tb_catalog *cat);
/* Hosts of a tier: fills up to `max` addresses, returns how many there are. */
size_t tb_catalog_tier_hosts(const struct tb_catalog *cat, uint32_t tier, struct tb_addr *out,
                             size_t max);

/* Persistence bookkeeping: the entries with id > the watermark are new.
 * tb_catalog_mark_persisted() moves the watermarks to the current counts. */
struct tb_catalog_marks {
    uint32_t tiers, servers, classes, hosts;
};
void tb_catalog_marks_get(const struct tb_catalog *cat, struct tb_catalog_marks *m);
void tb_catalog_mark_persisted(struct tb_catalog *cat);
const struct tb_catalog_marks *tb_catalog_persisted(const struct tb_catalog *cat);
/* Hosts are not id-addressed; n-th host entry in insertion order (0-based).
 * TB_E_NOTFOUND past the end. Host addresses are stored with port 0. */
int tb_catalog_host_at(const struct tb_catalog *cat, uint32_t index, uint32_t *tier,
                       struct tb_addr *host);
uint32_t tb_catalog_host_count(const struct tb_catalog *cat);

#endif
