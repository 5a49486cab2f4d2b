/* SPDX-License-Identifier: MIT */
/* flow.c — the TCP flow table: chained hash on the canonical 4-tuple, grown
 * by doubling, and two least-recently-active lists (open and closed flows). */
#include "flow-int.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 1024

/* A key as registers: its address words and both ports in one word. */
struct kw {
    uint64_t w[4];  /* side 0's address, then side 1's, as native words */
    uint32_t ports; /* port[0] << 16 | port[1] */
};

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t key_make(struct tb_flow_key *k, struct kw *kw, const struct tb_addr *src,
                                const struct tb_addr *dst, int *src_side)
{
    /* Any total order does for a canonical key; native 64-bit words are the
     * cheapest to compare. */
    uint64_t a0 = load64(src->ip), a1 = load64(src->ip + 8);
    uint64_t b0 = load64(dst->ip), b1 = load64(dst->ip + 8);
    int s;
    if (a0 != b0)
        s = a0 > b0;
    else if (a1 != b1)
        s = a1 > b1;
    else
        s = src->port > dst->port;
    kw->w[0] = s ? b0 : a0;
    kw->w[1] = s ? b1 : a1;
    kw->w[2] = s ? a0 : b0;
    kw->w[3] = s ? a1 : b1;
    uint16_t p0 = s ? dst->port : src->port, p1 = s ? src->port : dst->port;
    kw->ports = (uint32_t)p0 << 16 | p1;
    memcpy(k->ip[0], &kw->w[0], 8);
    memcpy(k->ip[0] + 8, &kw->w[1], 8);
    memcpy(k->ip[1], &kw->w[2], 8);
    memcpy(k->ip[1] + 8, &kw->w[3], 8);
    k->port[0] = p0;
    k->port[1] = p1;
    *src_side = s;
    /* Each address word multiplied on its own (the products are independent),
     * folded, then one multiply-xorshift to spread the high bits, where an
     * IPv4 address sits, into the low bits that pick the bucket. Plenty for
     * bucket selection, and cheap on the lookup of every exchange's first
     * packet. The words come from registers, not from the key just stored:
     * reading 16 bytes back that were written as two 8-byte halves defeats
     * store-to-load forwarding. */
    uint64_t h = (kw->w[1] * 0xff51afd7ed558ccdull) ^ (kw->w[3] * 0xc4ceb9fe1a85ec53ull) ^
                 kw->w[0] ^ (kw->w[2] << 32 | kw->w[2] >> 32) ^ kw->ports;
    h = (h ^ (h >> 29)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* Whether flow `f` has the key `kw`. */
static inline bool has_key(const struct tb_flow *f, const struct kw *kw)
{
    uint32_t ports = (uint32_t)f->key.port[0] << 16 | f->key.port[1];
    return ports == kw->ports &&
           ((load64(f->key.ip[0]) ^ kw->w[0]) | (load64(f->key.ip[0] + 8) ^ kw->w[1]) |
            (load64(f->key.ip[1]) ^ kw->w[2]) | (load64(f->key.ip[1] + 8) ^ kw->w[3])) == 0;
}

static inline struct tb_flow *find(const struct tb_flow_table *t, const struct kw *kw,
                                   uint32_t hash)
{
    for (struct tb_flow *f = t->buckets[hash & (t->nbuckets - 1)]; f; f = f->hnext)
        if (f->hash == hash && has_key(f, kw))
            return f;
    return NULL;
}

uint32_t tb_flow_key_make(struct tb_flow_key *k, const struct tb_addr *src,
                          const struct tb_addr *dst, int *src_side)
{
    struct kw kw;
    return key_make(k, &kw, src, dst, src_side);
}

struct tb_flow *tb_flow_find(const struct tb_flow_table *t, const struct tb_flow_key *k,
                             uint32_t hash)
{
    struct kw kw = {{load64(k->ip[0]), load64(k->ip[0] + 8), load64(k->ip[1]),
                     load64(k->ip[1] + 8)},
                    (uint32_t)k->port[0] << 16 | k->port[1]};
    return find(t, &kw, hash);
}

struct tb_flow *tb_flow_lookup(const struct tb_flow_table *t, const struct tb_addr *src,
                               const struct tb_addr *dst, struct tb_flow_key *k, uint32_t *hash,
                               int *src_side)
{
    struct kw kw;
    *hash = key_make(k, &kw, src, dst, src_side);
    return find(t, &kw, *hash);
}

int tb_flow_table_init(struct tb_flow_table *t)
{
    memset(t, 0, sizeof *t);
    t->buckets = calloc(INITIAL_BUCKETS, sizeof *t->buckets);
    if (!t->buckets)
        return TB_E_NOMEM;
    t->nbuckets = INITIAL_BUCKETS;
    return 0;
}

void tb_flow_table_fini(struct tb_flow_table *t)
{
    for (int l = 0; l < 2; l++) {
        struct tb_flow *f = t->lists[l].head;
        while (f) {
            struct tb_flow *n = f->next;
            free(f);
            f = n;
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof *t);
}

/* Doubling happens when a flow is added, never on the per-packet path of an
 * existing flow; a failed doubling just leaves longer chains. */
static void grow(struct tb_flow_table *t)
{
    size_t n = t->nbuckets * 2;
    struct tb_flow **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct tb_flow *f = t->buckets[i];
        while (f) {
            struct tb_flow *next = f->hnext;
            size_t j = f->hash & (n - 1);
            f->hnext = b[j];
            b[j] = f;
            f = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

static void list_unlink(struct tb_flow_table *t, struct tb_flow *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        t->lists[f->list].head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        t->lists[f->list].tail = f->prev;
    f->prev = f->next = NULL;
    t->lists[f->list].count--;
}

static void list_push(struct tb_flow_table *t, struct tb_flow *f, enum tb_flow_list list)
{
    f->list = (uint8_t)list;
    f->prev = NULL;
    f->next = t->lists[list].head;
    if (f->next)
        f->next->prev = f;
    else
        t->lists[list].tail = f;
    t->lists[list].head = f;
    t->lists[list].count++;
}

struct tb_flow *tb_flow_add(struct tb_flow_table *t, const struct tb_flow_key *k, uint32_t hash,
                            uint8_t family)
{
    struct tb_flow *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->key = *k;
    f->hash = hash;
    f->family = family;
    if (t->count >= t->nbuckets)
        grow(t);
    size_t i = hash & (t->nbuckets - 1);
    f->hnext = t->buckets[i];
    t->buckets[i] = f;
    t->count++;
    list_push(t, f, TB_FL_ACTIVE);
    return f;
}

void tb__flow_move_to_head(struct tb_flow_table *t, struct tb_flow *f, enum tb_flow_list list)
{
    list_unlink(t, f);
    list_push(t, f, list);
}

struct tb_flow *tb_flow_oldest(const struct tb_flow_table *t, enum tb_flow_list list)
{
    return t->lists[list].tail;
}

void tb_flow_remove(struct tb_flow_table *t, struct tb_flow *f)
{
    struct tb_flow **pp = &t->buckets[f->hash & (t->nbuckets - 1)];
    while (*pp && *pp != f)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = f->hnext;
    list_unlink(t, f);
    t->count--;
    free(f);
}

void tb_flow_addr(const struct tb_flow *f, int side, struct tb_addr *a)
{
    if (f->family == 4)
        tb_addr_from_v4(a, f->key.ip[side] + 12, f->key.port[side]);
    else
        tb_addr_from_v6(a, f->key.ip[side], f->key.port[side]);
}
