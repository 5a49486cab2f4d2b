/* SPDX-License-Identifier: MIT */
/* proto-int.h — helpers shared by the parsers: the per-connection queue of
 * requests waiting for their response, and a line assembler for text protocols. */
#ifndef TB_PROTO_INT_H
#define TB_PROTO_INT_H

#include "proto.h"
#include <stddef.h>
#include <string.h>

#include "catalog.h"
#include "request.h"

/* In-flight requests per connection. Pipelining clients rarely keep more than
 * a handful outstanding; a hostile or broken one could send thousands. */
#define TB__PQ_MAX 64
#define TB__CLASS_MAX TB_CATALOG_CLASS_MAX /* class bytes a parser keeps */

/* A hole whose bytes have no capture time of their own (see gap() in
 * proto.h): they count toward the sizes but never move a departure. */
#define TB__NO_TS TB_TS_UNKNOWN

struct tb__pend {
    int64_t arrival_ns;
    int64_t last_ns;     /* latest response chunk so far */
    uint64_t req_bytes;
    uint64_t resp_bytes;
    uint32_t seq;        /* per-connection request number */
    uint32_t flags;      /* enum tb_req_flag */
    uint32_t aux;        /* protocol's own: MySQL statement id */
    uint16_t class_len;  /* bytes of its class text (tb__pq_cls), 0: none ("unknown") */
    uint8_t kind;        /* protocol's own: HTTP method kind, MySQL command */
    bool resp_seen;      /* some response bytes were attributed to it */
};
_Static_assert(sizeof(struct tb__pend) == 48, "an in-flight entry is compact");

/* An exchange kept by itself, not in a queue (AJP's one at a time, FastCGI's
 * one per request id), with its class text beside it. */
struct tb__pend_cls {
    struct tb__pend p;
    char cls[TB__CLASS_MAX];
};

/* A FIFO ring grown on demand (4, 8, … TB__PQ_MAX entries), so idle
 * connections hold no memory. Once a request could not be queued, every later
 * request is also left out until the untracked ones have been answered:
 * responses pair with requests in order, and skipping one would shift them.
 *
 * An entry's class text is not in the entry but in `txt`, TB__CLASS_MAX bytes
 * per ring position, allocated the first time a parser asks for it
 * (tb__pq_cls) and grown with the ring. Why: a pipelined Redis connection
 * names its classes by slot and never writes one here; with the text inside,
 * its 16 entries in flight were 9 KiB touched per pipeline (cold again by the
 * next one) instead of 768 bytes. */
struct tb__pq {
    struct tb__pend *v;
    char *txt;
    /* cap is a power of two (it starts at 4 and doubles up to TB__PQ_MAX), so
     * ring positions wrap with a mask: a division per lookup was measurable
     * on every header line; 32-bit, as 16-bit fields cost a widening per
     * use. */
    uint32_t cap, head, len;
    uint32_t untracked; /* requests sent but not queued (cap hit) */
    uint32_t next_seq;
};

/* Returns the new tail entry (zeroed but for seq/arrival), or NULL when the
 * request cannot be tracked (counted in ctr->inflight_dropped). The common
 * case (room in the ring, nothing untracked) inline: a pipeline of small
 * commands pushes one entry per few dozen bytes; the rest out of line. */
struct tb__pend *tb__pq_push_slow(struct tb__pq *q, struct tb_proto_counters *ctr, int64_t ts);
static inline struct tb__pend *tb__pq_push(struct tb__pq *q, struct tb_proto_counters *ctr,
                                           int64_t ts)
{
    if (q->len == q->cap || q->untracked > 0)
        return tb__pq_push_slow(q, ctr, ts);
    uint32_t mask = q->cap - 1;
    uint32_t at = (q->head + q->len) & mask;
    struct tb__pend *e = &q->v[at];
    q->len++;
    /* The entry after this one, asked for now: a connection's ring is cold
     * again by the time its next pipeline arrives. */
    __builtin_prefetch(&q->v[(at + 1) & mask], 1, 3);
    /* Field by field, not memset: for this size GCC may pick `rep stos`,
     * whose start-up cost was a quarter of a pipelined Redis command. */
    e->arrival_ns = ts;
    e->last_ns = 0;
    e->req_bytes = 0;
    e->resp_bytes = 0;
    e->seq = q->next_seq++;
    e->flags = 0;
    e->aux = 0;
    e->class_len = 0;
    e->kind = 0;
    e->resp_seen = false;
    return e;
}
static inline struct tb__pend *tb__pq_head(struct tb__pq *q)
{
    return q->len ? &q->v[q->head] : NULL;
}
static inline struct tb__pend *tb__pq_tail(struct tb__pq *q)
{
    return q->len ? &q->v[(q->head + q->len - 1) & (q->cap - 1)] : NULL;
}
static inline struct tb__pend *tb__pq_at(struct tb__pq *q, uint32_t i)
{
    return i < q->len ? &q->v[(q->head + i) & (q->cap - 1)] : NULL;
}
/* Finds the queued entry with request number `seq`. Request numbers are
 * unique within the queue, and the one asked for is nearly always the newest
 * (the request the client is still sending): that one is tried inline. */
struct tb__pend *tb__pq_find_any(struct tb__pq *q, uint32_t seq);
static inline struct tb__pend *tb__pq_find(struct tb__pq *q, uint32_t seq)
{
    struct tb__pend *t = tb__pq_tail(q);
    return t && t->seq == seq ? t : tb__pq_find_any(q, seq);
}
static inline void tb__pq_pop(struct tb__pq *q)
{
    if (q->len) {
        q->head = (q->head + 1) & (q->cap - 1);
        q->len--;
    } else if (q->untracked) {
        q->untracked--;
    }
}
/* Forget every queued and untracked request (lost synchronisation). */
void tb__pq_clear(struct tb__pq *q);
void tb__pq_free(struct tb__pq *q);
/* Requests queued with no response byte yet, plus the untracked ones. */
uint32_t tb__pq_waiting(const struct tb__pq *q);

/* The class text buffer (TB__CLASS_MAX bytes) of queued entry e, allocated
 * for the whole ring on first use; NULL when memory ran out (the entry then
 * keeps class_len 0, reported "unknown"). Valid while e is queued. */
char *tb__pq_cls_alloc(struct tb__pq *q, const struct tb__pend *e);
static inline char *tb__pq_cls(struct tb__pq *q, const struct tb__pend *e)
{
    if (q->txt)
        return q->txt + (size_t)(e - q->v) * TB__CLASS_MAX;
    return tb__pq_cls_alloc(q, e);
}
/* The class text of queued entry e, class_len bytes (NULL when it has none). */
static inline const char *tb__pq_text(const struct tb__pq *q, const struct tb__pend *e)
{
    return e->class_len && q->txt ? q->txt + (size_t)(e - q->v) * TB__CLASS_MAX : NULL;
}

/* Emits one request as a finished exchange with class text cls (cls_len bytes;
 * none: "unknown"; departure never before arrival). A request marked
 * TB_REQ_GAP with no captured response byte is not emitted: a hole took its
 * whole answer. */
void tb__pend_emit(const struct tb__pend *e, const struct tb_proto_ctx *ctx, int32_t status,
                   uint32_t extra_flags, const char *cls, size_t cls_len);
/* The same with the class's id memory (tb_exchange.class_id; may be NULL);
 * inline, as a pipelined protocol emits one per few dozen bytes. */
static inline void tb__pend_emit_id(const struct tb__pend *e, const struct tb_proto_ctx *ctx,
                                    int32_t status, uint32_t extra_flags, const char *cls,
                                    size_t cls_len, uint32_t *class_id)
{
    if (((e->flags | extra_flags) & TB_REQ_GAP) && !e->resp_seen)
        return; /* a hole swallowed its whole response: no departure to report, none invented */
    struct tb_exchange ex = {
        .arrival_ns = e->arrival_ns,
        .departure_ns = e->last_ns < e->arrival_ns ? e->arrival_ns : e->last_ns,
        .req_bytes = e->req_bytes,
        .resp_bytes = e->resp_bytes,
        .class_text = cls,
        .class_len = cls ? cls_len : 0,
        .status = status,
        .flags = e->flags | extra_flags,
        .class_id = class_id,
    };
    if (ctx && ctx->emit)
        ctx->emit(ctx->ud, &ex);
}
/* Emits the head entry as a finished exchange and pops it: with class text
 * cls when given, else its own (tb__pq_text). */
void tb__pq_emit_head(struct tb__pq *q, const struct tb_proto_ctx *ctx, int32_t status,
                      uint32_t extra_flags, const char *cls, size_t cls_len);

/* Response bytes for e: counted always; their capture time, when they have
 * one (TB__NO_TS for a hole found later), is the departure so far. */
static inline void tb__pend_answer(struct tb__pend *e, uint64_t n, int64_t ts)
{
    e->resp_bytes += n;
    if (ts != TB__NO_TS) {
        e->resp_seen = true;
        if (ts > e->last_ns)
            e->last_ns = ts;
    }
}

/* Copies n bytes (a class, at most a few hundred) by 16-byte moves, the last
 * one overlapping. GCC expands memcpy of a variable size it knows to be
 * bounded into `rep movsb`, whose start-up cost was most of a PostgreSQL
 * batch's class handling; this is a few moves. */
static inline void tb__copy_small(char *d, const char *s, size_t n)
{
    if (n >= 16) {
        size_t i = 0;
        do {
            uint64_t a, b;
            memcpy(&a, s + i, 8);
            memcpy(&b, s + i + 8, 8);
            memcpy(d + i, &a, 8);
            memcpy(d + i + 8, &b, 8);
            i += 16;
        } while (n - i > 16);
        uint64_t a, b;
        memcpy(&a, s + n - 16, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d + n - 16, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    }
}

/* Copies a class of n bytes into buf (TB__CLASS_MAX bytes), cut to fit;
 * returns the length kept. */
static inline uint16_t tb__class_copy(char *buf, const char *s, size_t n)
{
    if (n > TB__CLASS_MAX)
        n = TB__CLASS_MAX;
    tb__copy_small(buf, s, n);
    return (uint16_t)n;
}

/* Sets queued entry e's class text (cut to TB__CLASS_MAX bytes). */
static inline void tb__pq_set_class(struct tb__pq *q, struct tb__pend *e, const char *s,
                                    size_t n)
{
    char *buf = tb__pq_cls(q, e);
    e->class_len = buf ? tb__class_copy(buf, s, n) : 0;
}

/* Gathers a fixed-size header that may straddle chunks (a record or packet
 * header of a binary protocol): copies bytes from *p into hdr until it holds
 * `size` of them, *have counting. True once it is whole (*have back at 0, *p
 * just past it); false when the chunk ran out first. */
static inline bool tb__hdr_take(uint8_t *hdr, uint8_t *have, uint8_t size, const uint8_t **p,
                                const uint8_t *end)
{
    size_t k = (size_t)(size - *have);
    if (k > (size_t)(end - *p))
        k = (size_t)(end - *p);
    memcpy(hdr + *have, *p, k);
    *p += k;
    *have = (uint8_t)(*have + k);
    if (*have < size)
        return false;
    *have = 0;
    return true;
}

/* Line assembler: returns lines terminated by LF (a preceding CR is dropped),
 * pointing into the input when the line is whole there and into a lazily
 * allocated spill buffer (at most `max` bytes) when it straddles chunks. */
struct tb__line {
    char *buf;
    uint32_t len;
    uint32_t cap;
    bool skipping;     /* the current line went past the limit; drop to its LF */
    int64_t first_ts;  /* timestamp of the chunk holding the line's first byte */
};

enum { TB__LINE_MORE = 0, TB__LINE_OK = 1, TB__LINE_LONG = -1, TB__LINE_NOMEM = -2 };

/* Consumes bytes from *p. On TB__LINE_OK, *line and *llen give the line without
 * its terminator, *raw the number of wire bytes it took (terminator
 * included, earlier chunks included) and *ts0 the first byte's timestamp.
 * TB__LINE_LONG: the line exceeded max; its rest is discarded on later calls. */
int tb__line_take_any(struct tb__line *l, const uint8_t **p, const uint8_t *end, size_t max,
                      int64_t ts, const char **line, size_t *llen, uint64_t *raw, int64_t *ts0);
static inline int tb__line_take(struct tb__line *l, const uint8_t **pp, const uint8_t *end,
                                size_t max, int64_t ts, const char **line, size_t *llen,
                                uint64_t *raw, int64_t *ts0)
{
    /* The common case inline: nothing kept from earlier chunks and the whole
     * line, not too long, in this one. It is returned in place, exactly as
     * tb__line_take_any() would (which also handles every other case). */
    if (l->len == 0 && !l->skipping) {
        const uint8_t *p = *pp;
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl && (size_t)(nl - p) <= max) {
            size_t n = (size_t)(nl - p);
            *pp = nl + 1;
            *raw = n + 1;
            if (n > 0 && p[n - 1] == '\r')
                n--;
            *line = (const char *)p;
            *llen = n;
            *ts0 = ts;
            return TB__LINE_OK;
        }
    }
    return tb__line_take_any(l, pp, end, max, ts, line, llen, raw, ts0);
}
static inline void tb__line_reset(struct tb__line *l)
{
    l->len = 0;
    l->skipping = false;
}
void tb__line_free(struct tb__line *l);

#endif
