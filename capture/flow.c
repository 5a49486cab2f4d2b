/* SPDX-License-Identifier: MIT */
/* flow.c — the TCP flow table: chained hash on the canonical 4-tuple, grown
 * by doubling, and two least-recently-active lists (open and closed flows). */
#include "flow.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 1024

uint32_t tb_flow_key_make(struct tb_flow_key *k, const struct tb_addr *src,
                          const struct tb_addr *dst, int *src_side)
{
    /* Any total order does for a canonical key; native 64-bit words are the
     * cheapest to compare. */
    uint64_t a[2], b[2];
    memcpy(a, src->ip, 16);
    memcpy(b, dst->ip, 16);
    int s = 0;
    if (a[0] != b[0])
        s = a[0] > b[0];
    else if (a[1] != b[1])
        s = a[1] > b[1];
    else
        s = src->port > dst->port;
    const uint64_t *w0 = s ? b : a, *w1 = s ? a : b;
    uint16_t p0 = s ? dst->port : src->port, p1 = s ? src->port : dst->port;
    memcpy(k->ip[0], w0, 16);
    memcpy(k->ip[1], w1, 16);
    k->port[0] = p0;
    k->port[1] = p1;
    *src_side = s;
    /* Multiply-xorshift over the key's words: one multiply per word is
     * plenty for bucket selection, and this runs for every packet. The words
     * come from the registers just loaded, not from the key just stored:
     * reading 16 bytes back that were written as two 8-byte halves defeats
     * store-to-load forwarding and stalled every packet. */
    uint64_t h = (w0[0] ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    h = (h ^ w0[1] ^ (h >> 29)) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ w1[0] ^ (h >> 29)) * 0xff51afd7ed558ccdull;
    h = (h ^ w1[1] ^ (h >> 29)) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ ((uint64_t)p0 << 16 | p1) ^ (h >> 29)) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    return (uint32_t)h;
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

static bool key_eq(const struct tb_flow_key *a, const struct tb_flow_key *b)
{
    uint64_t x[4], y[4];
    memcpy(x, a->ip, 32);
    memcpy(y, b->ip, 32);
    return a->port[0] == b->port[0] && a->port[1] == b->port[1] &&
           ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

struct tb_flow *tb_flow_find(const struct tb_flow_table *t, const struct tb_flow_key *k,
                             uint32_t hash)
{
    for (struct tb_flow *f = t->buckets[hash & (t->nbuckets - 1)]; f; f = f->hnext)
        if (f->hash == hash && key_eq(&f->key, k))
            return f;
    return NULL;
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
