/* SPDX-License-Identifier: MIT */
/* reasm-int.h — private to capture/: one direction of a TCP stream: in-order
 * delivery, a bounded out-of-order buffer, trimming of retransmitted and
 * overlapping bytes, and explicit gaps for bytes that were never captured. */
#ifndef TB_REASM_H
#define TB_REASM_H

#include "tb.h"

/* Counters bumped by every direction of every flow (owned by the engine). */
struct tb_reasm_ctr {
    uint64_t retransmitted_bytes; /* bytes already delivered, seen again */
    uint64_t overlap_bytes;       /* bytes already buffered out of order, seen again */
    uint64_t ooo_buffered_bytes;  /* bytes that had to wait for earlier bytes */
    uint64_t ooo_dropped_bytes;   /* bytes too far ahead to be plausible, or no memory */
    uint64_t gaps, gap_bytes;     /* holes declared */
};

/* Where the bytes go. `dir` is the tb_reasm's own dir field. */
struct tb_reasm_env {
    void (*data)(void *ud, int dir, const uint8_t *p, size_t n, int64_t ts_ns);
    void (*gap)(void *ud, int dir, uint64_t len, int64_t ts_ns);
    void *ud;
    struct tb_reasm_ctr *ctr;
    size_t max_ooo;               /* cap of buffered bytes in this direction */
};

struct tb_reasm_seg;

/* 40 bytes when idle: the out-of-order list is empty and holds no memory. */
struct tb_reasm {
    uint32_t next;      /* next sequence number to deliver */
    uint32_t fin_seq;   /* sequence number of the FIN, when fin is set */
    uint32_t ooo_bytes; /* captured bytes held in the out-of-order list */
    uint8_t dir;
    bool started;       /* `next` is known */
    bool fin;
    bool ack_pending;   /* a pure ACK passed `next`: ack_hi, ack_ts */
    uint32_t ack_hi;
    int64_t ack_ts;
    struct tb_reasm_seg *ooo; /* sorted by sequence, non-overlapping */
};

/* Sequence numbers further ahead than this are taken as garbage, not a hole. */
#define TB_REASM_MAX_AHEAD (UINT32_C(1) << 30)

void tb_reasm_init(struct tb_reasm *r, int dir);
/* The stream's first byte has sequence number `seq` (ISN + 1 after a SYN). */
void tb_reasm_start(struct tb_reasm *r, uint32_t seq);
/* One segment: `len` captured payload bytes at `seq`, followed by `miss`
 * bytes that snaplen cut off (delivered as a gap), then a FIN when `fin`.
 * A direction not yet started starts at `seq` (mid-stream pickup).
 * Returns 0 or TB_E_NOMEM (the segment's bytes are then counted as dropped). */
static inline int tb_reasm_segment(struct tb_reasm *r, const struct tb_reasm_env *env,
                                   uint32_t seq, const uint8_t *p, uint32_t len, uint32_t miss,
                                   bool fin, int64_t ts_ns);
/* The opposite direction acknowledged `ack`: every byte before it reached the
 * endpoint, so whatever of them was never captured is a hole; declares it
 * (with any noted ACK further ahead) and delivers the buffered bytes behind it.
 * For ACKs on segments that carry data: what they carry may depend on it. */
static inline void tb_reasm_acked(struct tb_reasm *r, const struct tb_reasm_env *env,
                                  uint32_t ack, int64_t ts_ns);
/* A pure ACK: noted, not acted on yet. A mirror port may show an ACK just
 * before the segment it acknowledges; tb_reasm_settle(), called once the next
 * packet of the connection has been handled, declares only what is still
 * missing then. */
void tb_reasm_ack_note(struct tb_reasm *r, uint32_t ack, int64_t ts_ns);
static inline void tb_reasm_settle(struct tb_reasm *r, const struct tb_reasm_env *env);
/* End of the stream (close, idle, end of capture): declares every hole,
 * delivers everything buffered, and a final gap up to a seen FIN. */
void tb_reasm_flush(struct tb_reasm *r, const struct tb_reasm_env *env, int64_t ts_ns);
/* Frees buffered segments without delivering them. */
void tb_reasm_free(struct tb_reasm *r);
/* Delivery has reached the FIN. */
bool tb_reasm_finished(const struct tb_reasm *r);

/* Serial-number comparisons (RFC 1982) so that wraparound is harmless. */
static inline int32_t tb_seq_diff(uint32_t a, uint32_t b) { return (int32_t)(a - b); }
static inline bool tb_seq_lt(uint32_t a, uint32_t b) { return tb_seq_diff(a, b) < 0; }
static inline bool tb_seq_le(uint32_t a, uint32_t b) { return tb_seq_diff(a, b) <= 0; }

/* The whole of tb_reasm_segment(), and the delivery of buffered segments that
 * became contiguous, out of line. */
int tb__reasm_segment(struct tb_reasm *r, const struct tb_reasm_env *env, uint32_t seq,
                      const uint8_t *p, uint32_t len, uint32_t miss, bool fin, int64_t ts_ns);
void tb__reasm_drain(struct tb_reasm *r, const struct tb_reasm_env *env);

static inline int tb_reasm_segment(struct tb_reasm *r, const struct tb_reasm_env *env,
                                   uint32_t seq, const uint8_t *p, uint32_t len, uint32_t miss,
                                   bool fin, int64_t ts_ns)
{
    /* Nearly every segment: the next bytes in order, all captured, no FIN and
     * nothing buffered. They go straight through, as the general path would
     * deliver them, with no call in between. */
    if (seq == r->next && r->started && len != 0 && miss == 0 && !fin && !r->ooo) {
        env->data(env->ud, r->dir, p, len, ts_ns);
        r->next += len;
        /* The general path drains after delivering; a delivery callback never
         * buffers segments, so this finds nothing, but costs next to nothing. */
        if (r->ooo)
            tb__reasm_drain(r, env);
        return 0;
    }
    return tb__reasm_segment(r, env, seq, p, len, miss, fin, ts_ns);
}

/* The work of tb_reasm_acked() and tb_reasm_settle(), out of line. Both run
 * for nearly every packet and nearly always find nothing to do: an ACK for
 * bytes already delivered, no pure ACK pending. That test is inline. */
void tb__reasm_acked(struct tb_reasm *r, const struct tb_reasm_env *env, uint32_t ack,
                     int64_t ts_ns);

static inline void tb_reasm_acked(struct tb_reasm *r, const struct tb_reasm_env *env,
                                  uint32_t ack, int64_t ts_ns)
{
    /* Not started: nothing to do. Nothing pending and no FIN (which can move
     * the limit): an ACK at or behind `next`, or absurdly far ahead, changes
     * nothing, as tb__reasm_acked() would find. */
    if (!r->started)
        return;
    if (!r->ack_pending && !r->fin) {
        int32_t ahead = tb_seq_diff(ack, r->next);
        if (ahead <= 0 || (uint32_t)ahead >= TB_REASM_MAX_AHEAD)
            return;
    }
    tb__reasm_acked(r, env, ack, ts_ns);
}

static inline void tb_reasm_settle(struct tb_reasm *r, const struct tb_reasm_env *env)
{
    if (!r->ack_pending)
        return;
    r->ack_pending = false;
    tb__reasm_acked(r, env, r->ack_hi, r->ack_ts);
}

#endif
