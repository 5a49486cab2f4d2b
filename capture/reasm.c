/* SPDX-License-Identifier: MIT */
/* reasm.c — one direction of a TCP stream reassembled into ordered bytes and
 * explicit gaps.
 *
 * The in-order path copies nothing: a segment that starts at `next` goes
 * straight to the parser. Only segments that arrive ahead of a hole are
 * copied into the out-of-order list, which is the exceptional path (loss or
 * reordering at the tap), so it allocates per segment; the list is bounded by
 * max_ooo and its memory is gone once the hole closes. */
#include "reasm-int.h"

#include <stdlib.h>
#include <string.h>

struct tb_reasm_seg {
    struct tb_reasm_seg *next;
    uint32_t seq;  /* first byte */
    uint32_t len;  /* captured bytes in data[] */
    uint32_t miss; /* bytes after data[] that snaplen cut off */
    int64_t ts_ns;
    uint8_t data[];
};

void tb_reasm_init(struct tb_reasm *r, int dir)
{
    memset(r, 0, sizeof *r);
    r->dir = (uint8_t)dir;
}

void tb_reasm_start(struct tb_reasm *r, uint32_t seq)
{
    r->next = seq;
    r->started = true;
}

bool tb_reasm_finished(const struct tb_reasm *r)
{
    return r->fin && r->next == r->fin_seq;
}

/* `ts` is the missing bytes' own capture time when known (snaplen cut the
 * packet that carried them), else TB_TS_UNKNOWN: a hole found later (by an
 * ACK past it, a segment beyond it, the cap, or the close) carries no time of
 * its own, and the time of whatever revealed it must not become a departure. */
static void emit_gap(struct tb_reasm *r, const struct tb_reasm_env *env, uint64_t len,
                     int64_t ts)
{
    if (len == 0)
        return;
    env->ctr->gaps++;
    env->ctr->gap_bytes += len;
    env->gap(env->ud, r->dir, len, ts);
}

/* Delivers bytes [seq, seq+len+miss) whose first `skip` bytes were already
 * delivered; advances `next` past them. */
static void deliver(struct tb_reasm *r, const struct tb_reasm_env *env, const uint8_t *p,
                    uint32_t len, uint32_t miss, uint32_t skip, int64_t ts)
{
    if (skip < len) {
        env->data(env->ud, r->dir, p + skip, len - skip, ts);
        r->next += len - skip;
        skip = 0;
    } else {
        skip -= len;
    }
    if (skip < miss) {
        emit_gap(r, env, miss - skip, ts);
        r->next += miss - skip;
    }
}

/* Delivers the buffered segments that have become contiguous with `next`. */
static void drain(struct tb_reasm *r, const struct tb_reasm_env *env)
{
    struct tb_reasm_seg *s;
    while ((s = r->ooo) != NULL && tb_seq_le(s->seq, r->next)) {
        uint32_t total = s->len + s->miss;
        uint32_t stale = (uint32_t)tb_seq_diff(r->next, s->seq);
        if (stale >= total) {
            env->ctr->overlap_bytes += total;
        } else {
            env->ctr->overlap_bytes += stale;
            deliver(r, env, s->data, s->len, s->miss, stale, s->ts_ns);
        }
        r->ooo = s->next;
        r->ooo_bytes -= s->len;
        free(s);
    }
}

/* Gives up on the hole in front of the first buffered segment: declares it and
 * delivers what follows it. The hole takes the time of the segment after it
 * (its bytes were sent before that one), not the time we gave up on it. */
static void skip_hole(struct tb_reasm *r, const struct tb_reasm_env *env)
{
    struct tb_reasm_seg *s = r->ooo;
    if (!s)
        return;
    int32_t hole = tb_seq_diff(s->seq, r->next);
    if (hole > 0) {
        emit_gap(r, env, (uint32_t)hole, TB_TS_UNKNOWN);
        r->next = s->seq;
    }
    drain(r, env);
}

/* Copies piece [x, y) of the segment at `seq` (data then missing bytes) into
 * the list before `*link`. */
static int add_piece(struct tb_reasm *r, const struct tb_reasm_env *env,
                     struct tb_reasm_seg **link, uint32_t seq, const uint8_t *p, uint32_t len,
                     uint32_t x, uint32_t y, int64_t ts)
{
    uint32_t from = x - seq, to = y - seq; /* offsets within the segment */
    uint32_t dlen = from < len ? TB_MIN(to, len) - from : 0;
    uint32_t miss = (to - from) - dlen;
    struct tb_reasm_seg *s = malloc(sizeof *s + dlen);
    if (!s) {
        env->ctr->ooo_dropped_bytes += to - from;
        return TB_E_NOMEM;
    }
    s->seq = x;
    s->len = dlen;
    s->miss = miss;
    s->ts_ns = ts;
    if (dlen)
        memcpy(s->data, p + from, dlen);
    s->next = *link;
    *link = s;
    r->ooo_bytes += dlen;
    env->ctr->ooo_buffered_bytes += dlen;
    return 0;
}

/* Buffers [seq, seq+len+miss), which lies wholly after `next`, around what is
 * already buffered: bytes already held are counted as overlap, the rest is
 * copied as one piece per uncovered stretch. */
static int buffer(struct tb_reasm *r, const struct tb_reasm_env *env, uint32_t seq,
                  const uint8_t *p, uint32_t len, uint32_t miss, int64_t ts)
{
    uint32_t s = seq, e = seq + len + miss;
    struct tb_reasm_seg **link = &r->ooo;
    int rc = 0;
    while (tb_seq_lt(s, e)) {
        struct tb_reasm_seg *cur = *link;
        if (!cur || tb_seq_le(e, cur->seq)) {
            /* Nothing buffered in [s, e): the rest goes here. */
            int err = add_piece(r, env, link, seq, p, len, s, e, ts);
            return err ? err : rc;
        }
        uint32_t cend = cur->seq + cur->len + cur->miss;
        if (tb_seq_lt(s, cur->seq)) {
            int err = add_piece(r, env, link, seq, p, len, s, cur->seq, ts);
            if (err)
                rc = err;
            else
                link = &(*link)->next;
            s = cur->seq;
            continue;
        }
        /* s lies inside or after cur. */
        if (tb_seq_lt(s, cend)) {
            uint32_t upto = tb_seq_lt(e, cend) ? e : cend;
            env->ctr->overlap_bytes += upto - s;
            s = upto;
        }
        link = &cur->next;
    }
    return rc;
}

/* A segment that starts `old` bytes before the next expected byte (0: at
 * it): those bytes were delivered already and count as retransmitted; the
 * rest is delivered, then whatever was buffered behind it. */
static int deliver_late(struct tb_reasm *r, const struct tb_reasm_env *env, const uint8_t *p,
                        uint32_t len, uint32_t miss, uint32_t old, int64_t ts)
{
    if (old >= len + miss) {
        env->ctr->retransmitted_bytes += len + miss;
        return 0;
    }
    env->ctr->retransmitted_bytes += old;
    deliver(r, env, p, len, miss, old, ts);
    drain(r, env);
    return 0;
}

void tb__reasm_drain(struct tb_reasm *r, const struct tb_reasm_env *env)
{
    drain(r, env);
}

int tb__reasm_segment(struct tb_reasm *r, const struct tb_reasm_env *env, uint32_t seq,
                      const uint8_t *p, uint32_t len, uint32_t miss, bool fin, int64_t ts_ns)
{
    uint32_t total = len + miss;
    if (!r->started)
        tb_reasm_start(r, seq);
    if (fin && !r->fin) {
        r->fin = true;
        r->fin_seq = seq + total;
    }
    if (total == 0)
        return 0;
    int32_t off = tb_seq_diff(seq, r->next);
    if (off <= 0)
        return deliver_late(r, env, p, len, miss, (uint32_t)-(int64_t)off, ts_ns);
    if ((uint32_t)off >= TB_REASM_MAX_AHEAD) {
        env->ctr->ooo_dropped_bytes += total;
        return 0;
    }
    /* A hole before this segment. When holding it would exceed the cap, the
     * hole is given up: declared as a gap, and what follows it delivered. */
    while (r->ooo && r->ooo_bytes + (size_t)len > env->max_ooo)
        skip_hole(r, env);
    off = tb_seq_diff(seq, r->next);
    if (off <= 0 || (size_t)len > env->max_ooo) {
        /* The segment itself is next after the skipped holes, or is too big
         * to buffer at all: skip the hole before it and deliver it now. */
        if (off > 0) {
            emit_gap(r, env, (uint32_t)off, TB_TS_UNKNOWN);
            r->next = seq;
            off = 0;
        }
        return deliver_late(r, env, p, len, miss, (uint32_t)-(int64_t)off, ts_ns);
    }
    return buffer(r, env, seq, p, len, miss, ts_ns);
}

void tb_reasm_ack_note(struct tb_reasm *r, uint32_t ack, int64_t ts_ns)
{
    if (!r->started)
        return;
    int32_t ahead = tb_seq_diff(ack, r->next);
    if (ahead <= 0 || (uint32_t)ahead >= TB_REASM_MAX_AHEAD)
        return;
    if (!r->ack_pending) {
        r->ack_pending = true;
        r->ack_hi = ack;
        r->ack_ts = ts_ns;
    } else if (tb_seq_lt(r->ack_hi, ack)) {
        r->ack_hi = ack;
    }
}

void tb__reasm_acked(struct tb_reasm *r, const struct tb_reasm_env *env, uint32_t ack,
                     int64_t ts_ns)
{
    if (!r->started)
        return;
    if (r->ack_pending) {
        /* An earlier pure ACK went further: it is settled with this one. */
        r->ack_pending = false;
        if (tb_seq_lt(ack, r->ack_hi))
            ack = r->ack_hi;
    }
    uint32_t limit = ack;
    /* The FIN takes a sequence number but carries no byte. */
    if (r->fin && tb_seq_lt(r->fin_seq, limit))
        limit = r->fin_seq;
    int32_t ahead = tb_seq_diff(limit, r->next);
    if (ahead <= 0 || (uint32_t)ahead >= TB_REASM_MAX_AHEAD)
        return;
    while (tb_seq_lt(r->next, limit)) {
        struct tb_reasm_seg *s = r->ooo;
        if (s && tb_seq_le(s->seq, r->next)) {
            drain(r, env);
            continue;
        }
        bool before_seg = s && tb_seq_lt(s->seq, limit);
        uint32_t upto = before_seg ? s->seq : limit;
        emit_gap(r, env, upto - r->next, TB_TS_UNKNOWN);
        r->next = upto;
    }
    drain(r, env);
}

void tb_reasm_flush(struct tb_reasm *r, const struct tb_reasm_env *env, int64_t ts_ns)
{
    tb_reasm_settle(r, env);
    while (r->ooo)
        skip_hole(r, env);
    if (r->started && r->fin && tb_seq_lt(r->next, r->fin_seq)) {
        emit_gap(r, env, (uint32_t)tb_seq_diff(r->fin_seq, r->next), TB_TS_UNKNOWN);
        r->next = r->fin_seq;
    }
}

void tb_reasm_free(struct tb_reasm *r)
{
    struct tb_reasm_seg *s = r->ooo;
    while (s) {
        struct tb_reasm_seg *n = s->next;
        free(s);
        s = n;
    }
    r->ooo = NULL;
    r->ooo_bytes = 0;
}
