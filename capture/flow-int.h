/* SPDX-License-Identifier: MIT */
/* flow-int.h — private to capture/: the TCP flow table: both directions of a
 * 4-tuple in one entry, hashed, with least-recently-active lists for idle expiry
 * and eviction. */
#ifndef TB_FLOW_H
#define TB_FLOW_H

#include <string.h>

#include "tb.h"
#include "addr.h"
#include "reasm-int.h"

struct tb_proto;
struct tb_detbuf;

/* Canonical 4-tuple: side 0 is the endpoint that sorts first (address as two
 * native 64-bit words, then port), so both directions of a connection give
 * the same key. */
struct tb_flow_key {
    uint8_t ip[2][16];
    uint16_t port[2];
};

enum tb_flow_state {
    TB_FS_SYN = 0,  /* SYN seen, no answer yet */
    TB_FS_SYNACK,   /* SYN-ACK seen: the server is known */
    TB_FS_EST,      /* carrying data (or picked up mid-stream) */
    TB_FS_CLOSED,   /* closed; kept a while so late segments do not reopen it */
};

enum tb_flow_list { TB_FL_ACTIVE = 0, TB_FL_CLOSED = 1 };

enum tb_flow_flag {
    TB_FF_MIDSTREAM = 1u << 0,   /* handshake not seen */
    TB_FF_SERVER_SURE = 1u << 1, /* server side from SYN-ACK or the tiers file */
    TB_FF_TRUNC = 1u << 2,       /* a snaplen cut since the last request */
    TB_FF_GAP = 1u << 3,         /* a hole since the last request */
    TB_FF_DETECT_DONE = 1u << 5, /* protocol chosen (or given up) */
    TB_FF_SYNACK_SEEN = 1u << 6,
    TB_FF_PREGAP = 1u << 7,      /* a hole came before the protocol was chosen */
    TB_FF_ISN = 1u << 8,         /* syn_isn is known */
    TB_FF_OPEN_SYN = 1u << 9,    /* the connection was opened by the client's SYN */
};

struct tb_flow {
    struct tb_flow *hnext;       /* hash chain */
    struct tb_flow *prev, *next; /* its LRU list, most recent first */
    struct tb_flow_key key;
    uint32_t hash;
    uint8_t family;              /* 4 or 6 */
    uint8_t state;               /* enum tb_flow_state */
    uint8_t list;                /* enum tb_flow_list */
    uint8_t server_side;         /* 0 or 1: index into key of the server */
    uint16_t flags;              /* enum tb_flow_flag */
    uint8_t fin_first;           /* 1 + side whose FIN came first; 0 = none */
    uint8_t det_tries;           /* chunks tried by mid-stream detection */
    uint32_t syn_isn;            /* the client's ISN, to spot SYN retransmissions */
    uint32_t tier, server;       /* catalog ids; 0 until the protocol is known */
    int64_t last_ns;             /* last packet */
    int64_t open_ns;             /* first packet of the connection (its SYN when seen) */
    uint64_t nreq;               /* request records it carried */
    uint64_t npkt;               /* its packets */
    uint64_t nbytes[2];          /* TCP payload bytes each side sent */
    int64_t ts_floor;            /* last timestamp handed to the parser */
    uint64_t conn;
    struct tb_reasm rs[2];       /* per side: bytes that side sent */
    const struct tb_proto *proto;
    void *pstate;                /* proto->state_size bytes */
    struct tb_detbuf *det;       /* first bytes kept while detection is undecided */
};

struct tb_flow_table {
    struct tb_flow **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
    struct {
        struct tb_flow *head, *tail;
        size_t count;
    } lists[2];
};

/* Builds the key of a packet from `src` to `dst`; *src_side receives the side
 * index of the sender and the return value is the key's hash. */
uint32_t tb_flow_key_make(struct tb_flow_key *k, const struct tb_addr *src,
                          const struct tb_addr *dst, int *src_side);

/* Whether a packet from `src` to `dst` belongs to flow `f`, by its key compared
 * in place (no key built, no hash); *src_side then receives the sender's side,
 * the one tb_flow_key_make() would give. For the engine's check of the
 * previous packet's flow, which the next packet usually belongs to. */
static inline uint64_t tb__flow_w64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline bool tb_flow_has(const struct tb_flow *f, const struct tb_addr *src,
                               const struct tb_addr *dst, int *src_side)
{
    /* As 64-bit words, like the key itself (see tb_flow_key_make), each
     * loaded on its own: copying the key out whole goes through the stack. */
    uint64_t s0 = tb__flow_w64(src->ip), s1 = tb__flow_w64(src->ip + 8);
    uint64_t d0 = tb__flow_w64(dst->ip), d1 = tb__flow_w64(dst->ip + 8);
    const uint8_t *k0 = f->key.ip[0], *k1 = f->key.ip[1];
    /* The low word of the sender's address (an IPv4 address's only non-zero
     * word) says which side to check first. A key's side 0 sorts first, so
     * when both orders match (a flow from an endpoint to itself) side 0 is
     * the answer, as the key makes it. */
    if (s1 == tb__flow_w64(k0 + 8) && d1 == tb__flow_w64(k1 + 8) &&
        ((s0 ^ tb__flow_w64(k0)) | (d0 ^ tb__flow_w64(k1))) == 0 &&
        src->port == f->key.port[0] && dst->port == f->key.port[1]) {
        *src_side = 0;
        return true;
    }
    if (s1 == tb__flow_w64(k1 + 8) && d1 == tb__flow_w64(k0 + 8) &&
        ((s0 ^ tb__flow_w64(k1)) | (d0 ^ tb__flow_w64(k0))) == 0 &&
        src->port == f->key.port[1] && dst->port == f->key.port[0]) {
        *src_side = 1;
        return true;
    }
    return false;
}

int tb_flow_table_init(struct tb_flow_table *t);
/* Frees every flow struct still in the table (no parser calls). */
void tb_flow_table_fini(struct tb_flow_table *t);
struct tb_flow *tb_flow_find(const struct tb_flow_table *t, const struct tb_flow_key *k,
                             uint32_t hash);
/* tb_flow_key_make() and tb_flow_find() in one call: the flow of a packet from
 * `src` to `dst`, or NULL; *k, *hash and *src_side as tb_flow_key_make() gives
 * them, for tb_flow_add() when there is none. */
struct tb_flow *tb_flow_lookup(const struct tb_flow_table *t, const struct tb_addr *src,
                               const struct tb_addr *dst, struct tb_flow_key *k, uint32_t *hash,
                               int *src_side);
/* A zeroed flow with the key, at the head of the active list.
 * NULL when memory ran out. */
struct tb_flow *tb_flow_add(struct tb_flow_table *t, const struct tb_flow_key *k, uint32_t hash,
                            uint8_t family);
void tb__flow_move_to_head(struct tb_flow_table *t, struct tb_flow *f, enum tb_flow_list list);
/* Marks the flow most recently active in its list (moving it to `list`).
 * Inline because a flow's packets come in runs: it is most often the head
 * already, and then there is nothing to do. */
static inline void tb_flow_touch(struct tb_flow_table *t, struct tb_flow *f,
                                 enum tb_flow_list list)
{
    if (t->lists[list].head != f)
        tb__flow_move_to_head(t, f, list);
}
/* Least recently active flow of a list, or NULL. */
struct tb_flow *tb_flow_oldest(const struct tb_flow_table *t, enum tb_flow_list list);
/* Unlinks and frees the struct (the caller released what it points to). */
void tb_flow_remove(struct tb_flow_table *t, struct tb_flow *f);
/* The address of side `side` (0 or 1) of a flow. */
void tb_flow_addr(const struct tb_flow *f, int side, struct tb_addr *a);

#endif
