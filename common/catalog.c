/* SPDX-License-Identifier: MIT */
/* catalog.c — tiers, servers, hosts and request classes with dense ids and open-addressing maps. */
#include "catalog.h"

#include <stdlib.h>
#include <string.h>

/* Entries live in fixed-size pages that are never moved, so a pointer returned
 * by tb_catalog_*_get() stays valid for the catalog's lifetime even while the
 * capture keeps adding entries. */
#define PAGE_SHIFT 10
#define PAGE_SIZE (1u << PAGE_SHIFT)
#define PAGE_MASK (PAGE_SIZE - 1)

/* Class texts are copied into chunks of this size (longer texts cannot occur:
 * they are cut at TB_CATALOG_CLASS_MAX). */
#define TEXT_CHUNK 65536

struct tier_ent {
    struct tb_tier_info info; /* first member: tb_catalog_tier_get() hands out &info */
    uint32_t nclasses;        /* classes of this tier, "other" excluded */
    uint32_t other_id;        /* 0 until the tier's "other" class exists */
};

struct class_ent {
    struct tb_class_info info; /* first member, as above */
    uint32_t len;
};

struct host_ent {
    uint32_t tier;
    struct tb_addr addr;
};

/* A slot holds an id (0 = empty) and the upper half of the key's hash, so a
 * probe compares keys only when 32 more bits of hash agree. */
struct slot {
    uint32_t tag;
    uint32_t id;
};

struct map {
    struct slot *slots;
    uint32_t mask; /* capacity - 1; capacity is a power of two */
    uint32_t used;
};

/* A growable table of pages of `size`-byte entries; index i is id i + 1. */
struct paged {
    void **pages;
    uint32_t npages;
    uint32_t count;
    size_t size;
};

struct tb_catalog {
    struct paged tiers, servers, classes, hosts;
    struct map tier_map;    /* name */
    struct map server_map;  /* (tier, addr) */
    struct map addr_map;    /* addr → first server with it, for tb_catalog_server_find */
    struct map class_map;   /* (tier, text) */
    struct map host_map;    /* (tier, ip) */
    char *text;             /* current text chunk */
    size_t text_used;
    char **chunks;          /* every chunk, for freeing */
    size_t nchunks;
    struct tb_catalog_marks persisted;
    struct class_memo *memo; /* recent class lookups, MEMO_SLOTS; NULL if none */
};

/* Recent class lookups, direct-mapped. Most connections send a handful of
 * distinct request classes over and over, and a full lookup (hashing the whole
 * text, probing the map, comparing against the stored copy, usually out of
 * cache) cost more than the rest of handling a record. Safe because the
 * catalog only grows: a (tier, text) pair, once given an id, keeps it — "other"
 * included, as the per-tier cap never goes down and a text with a NUL never
 * stops having one. A memo hit compares the whole text, so it is exact. */
#define MEMO_SLOTS 256
#define MEMO_TEXT 120
struct class_memo {
    uint32_t tier, id; /* id 0: empty */
    uint32_t len;
    uint64_t head, tail; /* memo_key(): the text's first and last eight bytes */
    char text[MEMO_TEXT];
};

/* ---- hashing --------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t h)
{
    /* The finalizer of MurmurHash3: every input bit affects every output bit. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Reads eight bytes at a time: fingerprints are hashed on every request, so a
 * byte-at-a-time loop would be the dominant cost of a lookup. */
static uint64_t hash_bytes(uint64_t seed, const char *p, size_t len)
{
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ mix64(w)) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    if (len > 0) {
        uint64_t w = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The same word as memcpy(&w, p, len), gathered in a register: the
         * compiler turns a variable-length memcpy into byte stores to the
         * stack, and loading the word back across them cannot be forwarded
         * from the stores (a stall on every lookup). */
        size_t o = 0;
        if (len & 4) {
            uint32_t x;
            memcpy(&x, p, 4);
            w = x;
            o = 4;
        }
        if (len & 2) {
            uint16_t x;
            memcpy(&x, p + o, 2);
            w |= (uint64_t)x << (8 * o);
            o += 2;
        }
        if (len & 1)
            w |= (uint64_t)(unsigned char)p[o] << (8 * o);
#else
        memcpy(&w, p, len);
#endif
        h = (h ^ mix64(w ^ 0xa5)) * 0x9e3779b97f4a7c15ull;
    }
    return mix64(h);
}

static uint64_t hash_addr(uint64_t seed, const struct tb_addr *a)
{
    uint64_t w0, w1;
    memcpy(&w0, a->ip, 8);
    memcpy(&w1, a->ip + 8, 8);
    return mix64(seed ^ mix64(w0) ^ mix64(w1 + 0x9e3779b97f4a7c15ull) ^ ((uint64_t)a->port << 7));
}

/* ---- the map --------------------------------------------------------------- */

static int map_init(struct map *m, uint32_t cap)
{
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots)
        return TB_E_NOMEM;
    m->mask = cap - 1;
    m->used = 0;
    return 0;
}

static inline uint32_t slot_index(uint64_t h) { return (uint32_t)h; }
static inline uint32_t slot_tag(uint64_t h) { return (uint32_t)(h >> 32); }

/* Inserts an id whose key is known to be absent. The map is kept at most
 * half full, so a probe stays short and always ends at an empty slot. */
static void map_put_nogrow(struct map *m, uint32_t idx, uint32_t tag, uint32_t id)
{
    idx &= m->mask;
    while (m->slots[idx].id != 0)
        idx = (idx + 1) & m->mask;
    m->slots[idx].tag = tag;
    m->slots[idx].id = id;
    m->used++;
}

/* Rehashing needs every key's full hash; entries give it back through rehash(). */
typedef uint64_t (*rehash_fn)(const struct tb_catalog *cat, uint32_t id);

static int map_reserve(const struct tb_catalog *cat, struct map *m, rehash_fn rehash)
{
    if ((m->used + 1) * 2 <= m->mask + 1)
        return 0;
    struct map bigger;
    int rc = map_init(&bigger, (m->mask + 1) * 2);
    if (rc)
        return rc;
    for (uint32_t i = 0; i <= m->mask; i++) {
        uint32_t id = m->slots[i].id;
        if (id == 0)
            continue;
        uint64_t h = rehash(cat, id);
        map_put_nogrow(&bigger, slot_index(h), slot_tag(h), id);
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

/* ---- paged entry tables --------------------------------------------------- */

static void *paged_at(const struct paged *p, uint32_t id)
{
    uint32_t i = id - 1;
    return (char *)p->pages[i >> PAGE_SHIFT] + (size_t)(i & PAGE_MASK) * p->size;
}

static const void *paged_get(const struct paged *p, uint32_t id)
{
    if (id == 0 || id > p->count)
        return NULL;
    return paged_at(p, id);
}

/* Reserves the next entry (zeroed); its id is p->count after the call. */
static void *paged_push(struct paged *p)
{
    if (p->count == UINT32_MAX - 1)
        return NULL;
    uint32_t i = p->count;
    if ((i >> PAGE_SHIFT) == p->npages) {
        void **pages = realloc(p->pages, (p->npages + 1) * sizeof *pages);
        if (!pages)
            return NULL;
        p->pages = pages;
        void *page = calloc(PAGE_SIZE, p->size);
        if (!page)
            return NULL;
        p->pages[p->npages++] = page;
    }
    p->count++;
    return paged_at(p, p->count);
}

static void paged_free(struct paged *p)
{
    for (uint32_t i = 0; i < p->npages; i++)
        free(p->pages[i]);
    free(p->pages);
}

/* ---- key hashes (also used for rehashing) ---------------------------------- */

static uint64_t tier_hash(const char *name, size_t len)
{
    return hash_bytes(0x7469657273, name, len);
}

static uint64_t server_hash(uint32_t tier, const struct tb_addr *a)
{
    return hash_addr((uint64_t)tier * 0x9e3779b97f4a7c15ull + 0x73727672, a);
}

static uint64_t addr_hash(const struct tb_addr *a) { return hash_addr(0x61646472, a); }

static uint64_t class_hash(uint32_t tier, const char *text, size_t len)
{
    return hash_bytes((uint64_t)tier * 0xc2b2ae3d27d4eb4full + 0x636c73, text, len);
}

static uint64_t host_hash(uint32_t tier, const struct tb_addr *a)
{
    return hash_addr((uint64_t)tier * 0x165667b19e3779f9ull + 0x686f7374, a);
}

static uint64_t rehash_tier(const struct tb_catalog *cat, uint32_t id)
{
    const struct tier_ent *t = paged_get(&cat->tiers, id);
    return tier_hash(t->info.name, strlen(t->info.name));
}

static uint64_t rehash_server(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_server_info *s = paged_get(&cat->servers, id);
    return server_hash(s->tier, &s->addr);
}

static uint64_t rehash_addr(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_server_info *s = paged_get(&cat->servers, id);
    return addr_hash(&s->addr);
}

static uint64_t rehash_class(const struct tb_catalog *cat, uint32_t id)
{
    const struct class_ent *c = paged_get(&cat->classes, id);
    return class_hash(c->info.tier, c->info.text, c->len);
}

static uint64_t rehash_host(const struct tb_catalog *cat, uint32_t id)
{
    const struct host_ent *h = paged_get(&cat->hosts, id);
    return host_hash(h->tier, &h->addr);
}

/* ---- life cycle ----------------------------------------------------------- */

int tb_catalog_new(struct tb_catalog **out)
{
    int rc = TB_E_NOMEM;
    struct tb_catalog *cat = calloc(1, sizeof *cat);
    *out = NULL;
    if (!cat)
        return TB_E_NOMEM;
    cat->tiers.size = sizeof(struct tier_ent);
    cat->servers.size = sizeof(struct tb_server_info);
    cat->classes.size = sizeof(struct class_ent);
    cat->hosts.size = sizeof(struct host_ent);
    if ((rc = map_init(&cat->tier_map, 16)) || (rc = map_init(&cat->server_map, 64)) ||
        (rc = map_init(&cat->addr_map, 64)) || (rc = map_init(&cat->class_map, 1024)) ||
        (rc = map_init(&cat->host_map, 16)))
        goto out;
    *out = cat;
    cat = NULL;
    rc = 0;
out:
    tb_catalog_free(cat);
    return rc;
}

void tb_catalog_free(struct tb_catalog *cat)
{
    if (!cat)
        return;
    paged_free(&cat->tiers);
    paged_free(&cat->servers);
    paged_free(&cat->classes);
    paged_free(&cat->hosts);
    free(cat->tier_map.slots);
    free(cat->server_map.slots);
    free(cat->addr_map.slots);
    free(cat->class_map.slots);
    free(cat->host_map.slots);
    for (size_t i = 0; i < cat->nchunks; i++)
        free(cat->chunks[i]);
    free(cat->chunks);
    free(cat->memo);
    free(cat);
}

/* ---- tiers ------------------------------------------------------------------ */

static uint32_t tier_lookup(const struct tb_catalog *cat, const char *name, size_t len, uint64_t h)
{
    const struct map *m = &cat->tier_map;
    for (uint32_t i = slot_index(h) & m->mask; m->slots[i].id; i = (i + 1) & m->mask) {
        if (m->slots[i].tag != slot_tag(h))
            continue;
        const struct tier_ent *t = paged_get(&cat->tiers, m->slots[i].id);
        if (strncmp(t->info.name, name, len) == 0 && t->info.name[len] == '\0')
            return m->slots[i].id;
    }
    return 0;
}

int tb_catalog_tier(struct tb_catalog *cat, const char *name, const char *proto, uint32_t *id)
{
    if (!name || !proto)
        return TB_E_INVAL;
    size_t len = strlen(name), plen = strlen(proto);
    if (len == 0 || len >= TB_NAME_MAX || plen >= sizeof ((struct tb_tier_info *)0)->proto)
        return TB_E_INVAL;
    uint64_t h = tier_hash(name, len);
    uint32_t found = tier_lookup(cat, name, len, h);
    if (found) {
        *id = found;
        return 0;
    }
    int rc = map_reserve(cat, &cat->tier_map, rehash_tier);
    if (rc)
        return rc;
    struct tier_ent *t = paged_push(&cat->tiers);
    if (!t)
        return TB_E_NOMEM;
    t->info.id = cat->tiers.count;
    memcpy(t->info.name, name, len + 1);
    memcpy(t->info.proto, proto, plen + 1);
    map_put_nogrow(&cat->tier_map, slot_index(h), slot_tag(h), t->info.id);
    *id = t->info.id;
    return 0;
}

int tb_catalog_tier_find(const struct tb_catalog *cat, const char *name, uint32_t *id)
{
    if (!name)
        return TB_E_INVAL;
    size_t len = strlen(name);
    uint32_t found = len < TB_NAME_MAX ? tier_lookup(cat, name, len, tier_hash(name, len)) : 0;
    if (!found)
        return TB_E_NOTFOUND;
    *id = found;
    return 0;
}

int tb_catalog_tier_set_configured(struct tb_catalog *cat, uint32_t tier, bool configured)
{
    struct tier_ent *t = (struct tier_ent *)paged_get(&cat->tiers, tier);
    if (!t)
        return TB_E_INVAL;
    t->info.configured = configured;
    return 0;
}

const struct tb_tier_info *tb_catalog_tier_get(const struct tb_catalog *cat, uint32_t id)
{
    const struct tier_ent *t = paged_get(&cat->tiers, id);
    return t ? &t->info : NULL;
}

uint32_t tb_catalog_tier_count(const struct tb_catalog *cat) { return cat->tiers.count; }

/* ---- servers ---------------------------------------------------------------- */

static uint32_t server_lookup(const struct tb_catalog *cat, uint32_t tier,
                              const struct tb_addr *a, uint64_t h)
{
    const struct map *m = &cat->server_map;
    for (uint32_t i = slot_index(h) & m->mask; m->slots[i].id; i = (i + 1) & m->mask) {
        if (m->slots[i].tag != slot_tag(h))
            continue;
        const struct tb_server_info *s = paged_get(&cat->servers, m->slots[i].id);
        if (s->tier == tier && tb_addr_eq(&s->addr, a))
            return s->id;
    }
    return 0;
}

static uint32_t addr_lookup(const struct tb_catalog *cat, const struct tb_addr *a, uint64_t h)
{
    const struct map *m = &cat->addr_map;
    for (uint32_t i = slot_index(h) & m->mask; m->slots[i].id; i = (i + 1) & m->mask) {
        if (m->slots[i].tag != slot_tag(h))
            continue;
        const struct tb_server_info *s = paged_get(&cat->servers, m->slots[i].id);
        if (tb_addr_eq(&s->addr, a))
            return s->id;
    }
    return 0;
}

int tb_catalog_server(struct tb_catalog *cat, uint32_t tier, const struct tb_addr *addr,
                      uint32_t *id)
{
    if (!paged_get(&cat->tiers, tier) || !addr)
        return TB_E_INVAL;
    uint64_t h = server_hash(tier, addr);
    uint32_t found = server_lookup(cat, tier, addr, h);
    if (found) {
        *id = found;
        return 0;
    }
    int rc;
    if ((rc = map_reserve(cat, &cat->server_map, rehash_server)) ||
        (rc = map_reserve(cat, &cat->addr_map, rehash_addr)))
        return rc;
    struct tb_server_info *s = paged_push(&cat->servers);
    if (!s)
        return TB_E_NOMEM;
    s->id = cat->servers.count;
    s->tier = tier;
    s->addr = *addr;
    map_put_nogrow(&cat->server_map, slot_index(h), slot_tag(h), s->id);
    /* The address index keeps the first server with an address; a second tier
     * claiming the same address:port is a tiers-file mistake we tolerate. */
    uint64_t ah = addr_hash(addr);
    if (!addr_lookup(cat, addr, ah))
        map_put_nogrow(&cat->addr_map, slot_index(ah), slot_tag(ah), s->id);
    *id = s->id;
    return 0;
}

int tb_catalog_server_find(const struct tb_catalog *cat, const struct tb_addr *addr, uint32_t *id)
{
    if (!addr)
        return TB_E_INVAL;
    uint32_t found = addr_lookup(cat, addr, addr_hash(addr));
    if (!found)
        return TB_E_NOTFOUND;
    *id = found;
    return 0;
}

const struct tb_server_info *tb_catalog_server_get(const struct tb_catalog *cat, uint32_t id)
{
    return paged_get(&cat->servers, id);
}

uint32_t tb_catalog_server_count(const struct tb_catalog *cat) { return cat->servers.count; }

/* ---- hosts -------------------------------------------------------------------- */

int tb_catalog_host(struct tb_catalog *cat, uint32_t tier, const struct tb_addr *host)
{
    if (!paged_get(&cat->tiers, tier) || !host)
        return TB_E_INVAL;
    /* A host is a machine, not an endpoint: the port never distinguishes two. */
    struct tb_addr a = *host;
    a.port = 0;
    a.pad_ = 0;
    uint64_t h = host_hash(tier, &a);
    const struct map *m = &cat->host_map;
    for (uint32_t i = slot_index(h) & m->mask; m->slots[i].id; i = (i + 1) & m->mask) {
        const struct host_ent *e = paged_get(&cat->hosts, m->slots[i].id);
        if (m->slots[i].tag == slot_tag(h) && e->tier == tier && tb_addr_eq(&e->addr, &a))
            return 0;
    }
    int rc = map_reserve(cat, &cat->host_map, rehash_host);
    if (rc)
        return rc;
    struct host_ent *e = paged_push(&cat->hosts);
    if (!e)
        return TB_E_NOMEM;
    e->tier = tier;
    e->addr = a;
    map_put_nogrow(&cat->host_map, slot_index(h), slot_tag(h), cat->hosts.count);
    return 0;
}

size_t tb_catalog_tier_hosts(const struct tb_catalog *cat, uint32_t tier, struct tb_addr *out,
                             size_t max)
{
    size_t n = 0;
    for (uint32_t id = 1; id <= cat->hosts.count; id++) {
        const struct host_ent *e = paged_get(&cat->hosts, id);
        if (e->tier != tier)
            continue;
        if (n < max)
            out[n] = e->addr;
        n++;
    }
    return n;
}

int tb_catalog_host_at(const struct tb_catalog *cat, uint32_t index, uint32_t *tier,
                       struct tb_addr *host)
{
    const struct host_ent *e = paged_get(&cat->hosts, index + 1);
    if (!e)
        return TB_E_NOTFOUND;
    *tier = e->tier;
    *host = e->addr;
    return 0;
}

uint32_t tb_catalog_host_count(const struct tb_catalog *cat) { return cat->hosts.count; }

/* ---- classes ------------------------------------------------------------------ */

static const char *text_copy(struct tb_catalog *cat, const char *text, size_t len)
{
    if (!cat->text || cat->text_used + len + 1 > TEXT_CHUNK) {
        char **chunks = realloc(cat->chunks, (cat->nchunks + 1) * sizeof *chunks);
        if (!chunks)
            return NULL;
        cat->chunks = chunks;
        char *chunk = malloc(TEXT_CHUNK);
        if (!chunk)
            return NULL;
        cat->chunks[cat->nchunks++] = chunk;
        cat->text = chunk;
        cat->text_used = 0;
    }
    char *dst = cat->text + cat->text_used;
    memcpy(dst, text, len);
    dst[len] = '\0';
    cat->text_used += len + 1;
    return dst;
}

static uint32_t class_lookup(const struct tb_catalog *cat, uint32_t tier, const char *text,
                             size_t len, uint64_t h)
{
    const struct map *m = &cat->class_map;
    uint32_t tag = slot_tag(h);
    for (uint32_t i = slot_index(h) & m->mask; m->slots[i].id; i = (i + 1) & m->mask) {
        if (m->slots[i].tag != tag)
            continue;
        const struct class_ent *c = paged_get(&cat->classes, m->slots[i].id);
        if (c->len == len && c->info.tier == tier && memcmp(c->info.text, text, len) == 0)
            return c->info.id;
    }
    return 0;
}

static int class_add(struct tb_catalog *cat, struct tier_ent *t, const char *text, size_t len,
                     uint64_t h, uint32_t *id)
{
    int rc = map_reserve(cat, &cat->class_map, rehash_class);
    if (rc)
        return rc;
    const char *copy = text_copy(cat, text, len);
    if (!copy)
        return TB_E_NOMEM;
    struct class_ent *c = paged_push(&cat->classes);
    if (!c)
        return TB_E_NOMEM;
    c->info.id = cat->classes.count;
    c->info.tier = t->info.id;
    c->info.text = copy;
    c->len = (uint32_t)len;
    map_put_nogrow(&cat->class_map, slot_index(h), slot_tag(h), c->info.id);
    *id = c->info.id;
    return 0;
}

static int class_other(struct tb_catalog *cat, struct tier_ent *t, uint32_t *id)
{
    static const char other[] = TB_CATALOG_OTHER_CLASS;
    if (t->other_id == 0) {
        size_t len = sizeof other - 1;
        int rc = class_add(cat, t, other, len, class_hash(t->info.id, other, len), &t->other_id);
        if (rc)
            return rc;
    }
    *id = t->other_id;
    return 0;
}

static int class_find_or_add(struct tb_catalog *cat, struct tier_ent *t, uint32_t tier,
                             const char *text, size_t len, uint32_t *id);

/* The text's first and last eight bytes (a shorter text whole, in head):
 * with the length they are the whole text up to 16 bytes, so a memo hit on
 * a short class (a Redis command, an HTTP method and short path) needs no
 * memcmp, which was a tenth of a pipelined Redis capture. */
static void memo_key(const char *text, size_t len, uint64_t *head, uint64_t *tail)
{
    uint64_t a = 0, b = 0;
    if (len >= 8) {
        memcpy(&a, text, 8);
        memcpy(&b, text + len - 8, 8);
    } else {
        for (size_t i = 0; i < len; i++)
            a = a << 8 | (unsigned char)text[i];
    }
    *head = a;
    *tail = b;
}

/* A memo slot from the tier, the length and memo_key(): cheap, and enough to
 * spread the classes a capture cycles through. */
static size_t memo_index(uint32_t tier, size_t len, uint64_t a, uint64_t b)
{
    uint64_t h = (a ^ (uint64_t)len << 48 ^ (uint64_t)tier << 32) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 29) ^ b) * 0xc4ceb9fe1a85ec53ull;
    return (size_t)(h >> 56) & (MEMO_SLOTS - 1);
}

int tb_catalog_class(struct tb_catalog *cat, uint32_t tier, const char *text, size_t len,
                     uint32_t *id)
{
    struct tier_ent *t = (struct tier_ent *)paged_get(&cat->tiers, tier);
    if (!t || (!text && len > 0))
        return TB_E_INVAL;
    if (!text)
        text = ""; /* len is 0: keeps memchr/memcmp away from a NULL pointer */
    if (len > TB_CATALOG_CLASS_MAX) {
        /* Cut before a UTF-8 continuation byte, so that a multi-byte
         * character is never split (JSON and terminals would choke on it). */
        len = TB_CATALOG_CLASS_MAX;
        while (len > 0 && ((unsigned char)text[len] & 0xc0) == 0x80)
            len--;
    }
    struct class_memo *memo = NULL;
    uint64_t head = 0, tail = 0;
    if (!cat->memo) /* lazily: catalogs that only read never need it; none is fine too */
        cat->memo = calloc(MEMO_SLOTS, sizeof *cat->memo);
    if (cat->memo && len <= MEMO_TEXT) {
        memo_key(text, len, &head, &tail);
        memo = &cat->memo[memo_index(tier, len, head, tail)];
        if (memo->id && memo->tier == tier && memo->len == len && memo->head == head &&
            memo->tail == tail && (len <= 16 || memcmp(memo->text, text, len) == 0)) {
            *id = memo->id;
            return 0;
        }
    }
    int rc = class_find_or_add(cat, t, tier, text, len, id);
    if (rc == 0 && memo) {
        memo->tier = tier;
        memo->id = *id;
        memo->len = (uint32_t)len;
        memo->head = head;
        memo->tail = tail;
        memcpy(memo->text, text, len);
    }
    return rc;
}

static int class_find_or_add(struct tb_catalog *cat, struct tier_ent *t, uint32_t tier,
                             const char *text, size_t len, uint32_t *id)
{
    uint64_t h = class_hash(tier, text, len);
    uint32_t found = class_lookup(cat, tier, text, len, h);
    if (found) {
        *id = found;
        return 0;
    }
    /* A NUL byte would cut the text when it is read back as a C string (and
     * from SQLite), giving two ids one name; such hostile input joins
     * "other", as does everything beyond the cap. The "other" text itself
     * always names that class, so a catalog reloaded from the store finds it
     * again. */
    if (memchr(text, '\0', len) || t->nclasses >= TB_CATALOG_MAX_CLASSES_PER_TIER ||
        (len == sizeof TB_CATALOG_OTHER_CLASS - 1 &&
         memcmp(text, TB_CATALOG_OTHER_CLASS, len) == 0))
        return class_other(cat, t, id);
    int rc = class_add(cat, t, text, len, h, id);
    if (rc == 0)
        t->nclasses++;
    return rc;
}

const struct tb_class_info *tb_catalog_class_get(const struct tb_catalog *cat, uint32_t id)
{
    const struct class_ent *c = paged_get(&cat->classes, id);
    return c ? &c->info : NULL;
}

const char *tb_catalog_class_text(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_class_info *c = tb_catalog_class_get(cat, id);
    return c && c->text ? c->text : "?";
}

uint32_t tb_catalog_class_count(const struct tb_catalog *cat) { return cat->classes.count; }

/* ---- persistence watermarks --------------------------------------------------- */

void tb_catalog_marks_get(const struct tb_catalog *cat, struct tb_catalog_marks *m)
{
    m->tiers = cat->tiers.count;
    m->servers = cat->servers.count;
    m->classes = cat->classes.count;
    m->hosts = cat->hosts.count;
}

void tb_catalog_mark_persisted(struct tb_catalog *cat)
{
    tb_catalog_marks_get(cat, &cat->persisted);
}

const struct tb_catalog_marks *tb_catalog_persisted(const struct tb_catalog *cat)
{
    return &cat->persisted;
}
