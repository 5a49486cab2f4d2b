/* SPDX-License-Identifier: MIT */
/* stream.h — the streaming analysis of a live capture: requests in as the
 * engine completes them, windows closed as capture time passes, service
 * times, work units and N* re-estimated from the recent past, episodes
 * flagged while they happen; results out through callbacks (the capture
 * stores them and puts them on the dashboard's stream). Congestion, freezes
 * and episodes follow correlate's one rule (struct tb_congestion), as the
 * offline report does. No I/O, no clock: time is what the caller says.
 *
 * Windows. A window [s, s+w) closes once the clock passes s + w + grace:
 * requests still in flight then (the engine emits a request when its
 * response completes) are not in its load, so live windows are provisional
 * for exchanges longer than the grace; an analysis of the stored requests
 * afterwards recomputes them. */
#ifndef TB_STREAM_H
#define TB_STREAM_H

#include "tb.h"
#include "catalog.h"
#include "request.h"
#include "stats.h"
#include "correlate.h"

struct tb_stream_opts {
    int64_t width_ns;       /* window width (default TB_WINDOW_DEFAULT_NS) */
    int64_t grace_ns;       /* 0 = max(1 s, 2 x width) */
    int64_t reestimate_ns;  /* re-estimate at most this often (default 10 s) ... */
    int64_t history_ns;     /* ... from this much recent history (default 300 s) */
};

/* A re-estimate changed a tier's work unit (tb_stream_sink.rescale). */
struct tb_stream_rescale {
    /* New units per completion over old, for the same requests: a work unit
     * of the windows handed out before from_ns is worth `factor` of the ones
     * that follow (a unit 10 times smaller: 10). */
    double factor;
    /* The start of the first window closed in the new units: the next one the
     * tier will close. */
    int64_t from_ns;
};

/* What the stream hands out; every callback may be NULL. Tier names come from
 * the catalog given to tb_stream_new. */
struct tb_stream_sink {
    void *ud;
    /* Every closed window of one tier, n = rows x windows per row: the tier
     * as a whole (server 0) first, then each of its servers (for storing). */
    void (*windows)(void *ud, const struct tb_window *w, size_t n);
    /* Each closed window of the tier as a whole, in time order, and whether
     * it is congested by the rule in force. */
    void (*window)(void *ud, uint32_t tier, const struct tb_window *w, bool congested);
    /* An episode opened (ongoing, as it stands after its first window) or
     * closed (final). */
    void (*episode)(void *ud, uint32_t tier, const struct tb_episode *ep, bool ongoing);
    /* A re-estimate of the tier and the congestion rule it gives, in force
     * for the windows closed after it. */
    void (*analysis)(void *ud, uint32_t tier, const struct tb_analysis *a,
                     const struct tb_congestion *rule);
    /* The tier's work unit changed at a re-estimate (analysis/stream.c
     * rescale_recent). The recent windows, the running throughput of the
     * episode in progress and the rule in force (slope, tp_max, units per
     * completion, self_tp) were multiplied by r->factor; windows already
     * handed out were not, so a client rebuilding episodes from the windows
     * it was given needs the factor to do what the stream did. The `analysis`
     * of the same re-estimate follows, except while the tier has too few
     * windows for a rule (then there is no episode or rule to convert). */
    void (*rescale)(void *ud, uint32_t tier, const struct tb_stream_rescale *r);
};

struct tb_stream;

/* The catalog is the capture's (borrowed: tiers and servers appear in it as
 * they are discovered). Returns 0, TB_E_INVAL or TB_E_NOMEM. */
int tb_stream_new(struct tb_stream **out, const struct tb_catalog *cat,
                  const struct tb_stream_opts *o, const struct tb_stream_sink *sink);
void tb_stream_free(struct tb_stream *s);
/* One completed request (any tier). Returns 0 or TB_E_NOMEM. */
int tb_stream_request(struct tb_stream *s, const struct tb_request *r);
/* Capture time is now `clock_ns`: re-estimates the tiers when due (every
 * half of the time streamed so far, 1 s at least, at most reestimate_ns, so
 * that the first rough work unit does not stay for long), then closes the
 * windows that ended before clock_ns - grace. */
void tb_stream_tick(struct tb_stream *s, int64_t clock_ns);
/* Closed episodes and windows so far, per tier (for summaries and tests). */
uint64_t tb_stream_episodes(const struct tb_stream *s, uint32_t tier);

#endif
