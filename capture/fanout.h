/* SPDX-License-Identifier: MIT */
/* fanout.h — live capture on several cores (`capture -i IF --workers N`).
 *
 * N packet sockets on one interface join one PACKET_FANOUT group by flow hash
 * (the kernel's symmetric hash: both directions of a TCP connection reach the
 * same socket; IP fragments are reassembled first, PACKET_FANOUT_FLAG_DEFRAG).
 * Each socket has a thread and a capture engine of its own, with a private
 * copy of the catalog: nothing is shared on the packet path. The workers hand
 * over what their engines emit — requests, connection records, and the
 * catalog entries (tiers, servers, classes, hosts) they added, before first
 * use — in batches; a merge stage on the loop's thread releases the events of
 * all workers in time order behind a watermark, translates the workers'
 * catalog ids into the capture's catalog by text (so an entry means the same
 * whichever worker saw it first) and numbers connections in the order they
 * opened, as one engine would have. */
#ifndef TB_FANOUT_H
#define TB_FANOUT_H

#include <uv.h>
#include "capture.h"
#include "conn.h"
#include "live.h"

/* ---- the merge stage: no threads, no I/O ----------------------------------------------- */

/* What one worker's engine emitted, in order; each event carries a key (the
 * capture time of the packet being processed when it was emitted), never
 * decreasing within a worker. */
struct tb_fo_batch;
void tb_fo_batch_free(struct tb_fo_batch *b);
size_t tb_fo_batch_count(const struct tb_fo_batch *b);

/* A worker's side: events go into the current batch; catalog entries the
 * worker's catalog gained since the last event go in first. */
struct tb_fo_prod {
    struct tb_catalog *cat; /* the worker's catalog (borrowed) */
    uint32_t tiers, servers, classes, hosts; /* entries already handed over */
    struct tb_fo_batch *cur;
};
/* The worker's catalog must be a copy of the capture's (tb_fo_catalog_copy)
 * made when the merge stage was created: its entries need no handing over. */
void tb_fo_prod_init(struct tb_fo_prod *p, struct tb_catalog *worker_cat);
int tb_fo_prod_request(struct tb_fo_prod *p, int64_t key, const struct tb_request *r);
int tb_fo_prod_conn(struct tb_fo_prod *p, int64_t key, const struct tb_conn *c);
/* The batch so far (NULL when empty); the caller owns it. */
struct tb_fo_batch *tb_fo_prod_take(struct tb_fo_prod *p);
void tb_fo_prod_fini(struct tb_fo_prod *p);

/* Copies every tier, server, class and host of src into the empty dst, so
 * that each has the same id in both. */
int tb_fo_catalog_copy(struct tb_catalog *dst, const struct tb_catalog *src);

struct tb_fo_merge;
/* `cat` is the capture's catalog (borrowed); the workers' catalogs are copies
 * of it as it is now. Connection ids are given from first_conn on, in the
 * order of the connections' open events (key, then worker). Released events
 * reach rcb / ccb with the capture's ids. */
int tb_fo_merge_new(struct tb_fo_merge **out, unsigned nworkers, struct tb_catalog *cat,
                    uint64_t first_conn, tb_request_cb rcb, tb_conn_cb ccb, void *ud);
void tb_fo_merge_free(struct tb_fo_merge *m);
/* Appends a worker's batch (ownership passes; NULL is ignored). */
void tb_fo_merge_add(struct tb_fo_merge *m, unsigned worker, struct tb_fo_batch *b);
/* Every event of `worker` with key <= wm has been added (INT64_MAX: all of
 * them). Watermarks never go back. */
void tb_fo_merge_watermark(struct tb_fo_merge *m, unsigned worker, int64_t wm);
/* Releases, smallest key first (ties: the lower worker), every event no
 * worker can still precede: its key is at most the watermark of each worker
 * with nothing queued. *released (may be NULL) gets how many. 0 or
 * TB_E_NOMEM (the catalog or the connection map could not grow). */
int tb_fo_merge_run(struct tb_fo_merge *m, uint64_t *released);
/* The capture's id of a worker's tier (0 when it was never handed over). */
uint32_t tb_fo_merge_tier(const struct tb_fo_merge *m, unsigned worker, uint32_t tier);
/* The largest key released so far (INT64_MIN before any). */
int64_t tb_fo_merge_released_key(const struct tb_fo_merge *m);

/* ---- the live source -------------------------------------------------------------------- */

struct tb_fanout;

/* Opens n >= 2 handles on o->iface and joins them in one fan-out group.
 * Errors as tb_live_open's; TB_E_UNSUPP when the system has no PACKET_FANOUT
 * (not Linux, or the kernel refused the group), errbuf saying so. */
int tb_fanout_open(struct tb_fanout **out, uv_loop_t *loop, const struct tb_live_opts *o,
                   unsigned n, char *errbuf, size_t errlen);
int tb_fanout_linktype(const struct tb_fanout *fo);
/* Creates the workers' engines (eo as for one engine; connection ids come
 * from eo->first_conn) and starts the threads. Released requests and
 * connections reach rcb / ccb on the loop's thread. */
int tb_fanout_start(struct tb_fanout *fo, struct tb_catalog *cat, const struct tb_tiers *tiers,
                    const struct tb_engine_opts *eo, tb_request_cb rcb, tb_conn_cb ccb,
                    void *ud);
/* Merges what the workers handed over (also done whenever a worker wakes
 * the loop). Returns the first worker or merge error, else 0. */
int tb_fanout_poll(struct tb_fanout *fo);
/* The capture time up to which events were released (INT64_MIN before any). */
int64_t tb_fanout_clock(const struct tb_fanout *fo);
/* The sockets' counters, summed (each worker reads its own once a second). */
void tb_fanout_stats(struct tb_fanout *fo, struct tb_live_stats *s);
/* Stops the threads (each drains its ring first) and stops waking the loop.
 * Safe to call twice. */
void tb_fanout_stop(struct tb_fanout *fo);
/* After tb_fanout_stop: ends every worker's engine at now_ns, releases all
 * that is left, and adds the workers' counters into `sum` (tb_engine_absorb)
 * with the sockets' drops. */
int tb_fanout_finish(struct tb_fanout *fo, int64_t now_ns, struct tb_engine *sum);
/* One line per worker: packets, requests, kernel drops, thread CPU seconds. */
void tb_fanout_report(const struct tb_fanout *fo, FILE *out);
/* Stops if needed and frees once libuv let go of the wake-up handle (run the
 * loop). */
void tb_fanout_close(struct tb_fanout *fo);

#endif
