/* SPDX-License-Identifier: MIT */
/* store.h — the SQLite store: versioned schema with migrations, WAL, the
 * asynchronous batched request writer, and the queries the CLI and the web
 * server read from. Only this module talks SQL. */
#ifndef TB_STORE_H
#define TB_STORE_H

#include <stdio.h>
#include "tb.h"
#include "request.h"
#include "event.h"
#include "conn.h"
#include "catalog.h"
#include "results.h"

struct tb_capture_stats; /* capture/capture.h */

/* Version 1: catalog, captures, requests, windows, service times, analyses,
 * episodes. Version 2: health and events. Version 3: connections. Version 4: the
 * analyses' knee verdict and method version. Version 5: capture state, stored
 * vs seen requests, unanswered and abandoned requests per tier, analyses' LRU.
 * Version 6: links and models. Version 7: requests without types or NOT NULL.
 * (store/schema.c, docs/storage.md) */
#define TB_STORE_SCHEMA_VERSION 7

enum tb_store_flags {
    TB_STORE_CREATE = 1u << 0,   /* create the file when absent */
    TB_STORE_READONLY = 1u << 1, /* no writes, no migration (schema 6 read as is, older fail) */
};

struct tb_store;

/* Opens (and creates/migrates) the database. A database whose schema version is
 * newer than this build returns TB_E_DBVER; a file that is not a tbneck
 * database (not SQLite, another program's SQLite, or empty without
 * TB_STORE_CREATE) returns TB_E_BADFMT; a missing file without TB_STORE_CREATE
 * returns TB_E_NOTFOUND; an older schema opened TB_STORE_READONLY returns
 * TB_E_UNSUPP. errbuf receives one line that starts with the path, e.g.
 * "tbneck.db: written by a newer tbneck (schema 3, this build knows 2)".
 * Other functions log SQLite failures with tb_log_error and return TB_E_DB
 * (TB_E_FULL when the disk or file system is full). */
int tb_store_open(struct tb_store **out, const char *path, unsigned flags, char *errbuf,
                  size_t errlen);
void tb_store_close(struct tb_store *st);
const char *tb_store_path(const struct tb_store *st);

/* Loads every tier, server, host and class into an empty catalog and marks
 * them persisted. TB_E_INVAL when the catalog is not empty. */
int tb_store_load_catalog(struct tb_store *st, struct tb_catalog *cat);
/* Writes the catalog entries added since it was loaded or last persisted
 * (e.g. tiers from a tiers file, before any capture), synchronously. */
int tb_store_put_catalog(struct tb_store *st, struct tb_catalog *cat);

/* ---- capture sessions ---------------------------------------------------- */
/* What a capture's row says it is worth (captures.state, schema 5). */
enum tb_capture_state {
    TB_CAPTURE_RUNNING = 0,  /* begun, not ended (or its process died) */
    TB_CAPTURE_COMPLETE,     /* its input ended (or was stopped by the user, live) and every
                              * request seen is stored */
    TB_CAPTURE_INTERRUPTED,  /* offline: stopped before its input ended (a signal, a bad
                              * file); what was read is all stored */
    TB_CAPTURE_PARTIAL,      /* requests seen were not stored (a full disk): "partial data" */
};
/* "running", "complete", "interrupted", "partial". */
const char *tb_capture_state_name(enum tb_capture_state s);

/* One tier's requests in one capture (capture_tiers): seen by the engine,
 * stored as rows, left unanswered by protocol (noreply) and abandoned (the
 * connection ended, timed out or was evicted with the request still waiting
 * for its first response byte). */
struct tb_capture_tier {
    uint32_t tier;
    uint64_t seen, stored, unanswered, abandoned;
};
struct tb_capture_end {
    enum tb_capture_state state;
    uint64_t stored;                   /* request rows committed */
    uint64_t unanswered, abandoned;    /* totals */
    uint64_t memory_evicted;           /* flows evicted by --max-memory */
    const struct tb_capture_tier *tiers;
    size_t ntiers;
};

int tb_store_capture_begin(struct tb_store *st, const char *source, int64_t *capture_id);
/* Records the first packet's time of a running capture known before it
 * starts (an offline one), so that a capture killed before its end still
 * names where its trace began (tb_store_capture_starting). */
int tb_store_capture_first(struct tb_store *st, int64_t capture_id, int64_t first_ns);
/* A stored capture whose first packet was at first_ns (the same trace read
 * again would double every request): its id (0 = none), its source and its
 * state ("complete", "partial", ...) into the buffers, cut to fit. */
int tb_store_capture_starting(struct tb_store *st, int64_t first_ns, int64_t *capture_id,
                              char *source, size_t nsource, char *state, size_t nstate);
/* Records the end time and the engine's counters (s may be NULL: end time
 * only), then builds the requests' read index. TB_E_NOTFOUND for an unknown id.
 * The state is complete and every request counted is taken as stored. */
int tb_store_capture_end(struct tb_store *st, int64_t capture_id,
                         const struct tb_capture_stats *s);
/* The same with what was really stored (e may be NULL: as tb_store_capture_end):
 * captures.requests = e->stored, requests_seen = s->requests, requests_lost the
 * difference, the state, and one capture_tiers row per tier. Small enough to
 * fit in the space a failed batch left in the WAL, so a full disk still gets
 * its row corrected. */
int tb_store_capture_finish(struct tb_store *st, int64_t capture_id,
                            const struct tb_capture_stats *s, const struct tb_capture_end *e);
/* Partial captures whose requests overlap [from_ns, to_ns): how many, and the
 * requests they lost in all. Readers print "partial data" when *n > 0. */
int tb_store_partial(struct tb_store *st, int64_t from_ns, int64_t to_ns, uint64_t *n,
                     uint64_t *lost);
/* First connection id free for a new capture (conn ids are unique per store). */
int tb_store_next_conn(struct tb_store *st, uint64_t *conn);

/* ---- asynchronous writer -------------------------------------------------
 * Runs on its own thread with its own connection; the capture thread only
 * copies records into a batch and hands full batches over, so storage never
 * stalls packet processing (when the writer falls behind, batches queue in
 * memory up to a cap, then the caller blocks — never drops). */
struct tb_writer;
int tb_writer_start(struct tb_writer **out, struct tb_store *st, int64_t capture_id);
/* The same with the batch size (rows per transaction, default 16 384, at
 * most 1 048 576) and the queue cap (batches waiting before the caller
 * blocks, default 64); zero fields take the defaults, opts may be NULL.
 * bulk (an offline capture): no fsync while loading and no checkpoint until
 * the write-ahead log holds bulk_wal bytes (0: TB_WRITER_BULK_WAL); every
 * checkpoint, and
 * the one tb_writer_finish makes, runs with sync on. A crash or power loss
 * during the load can lose the batches since the last checkpoint (the file
 * stays consistent: the database file is only written by synced
 * checkpoints); once tb_writer_finish returns 0 everything is on disk.
 * keep_index (an offline capture): the writer thread builds the read index
 * (requests_tier_arrival) before its first batch, when the file lacks it, and
 * SQLite keeps it up as each batch goes in, so the index costs the writer
 * thread, which runs beside the capture, instead of a sort on the caller's
 * thread once the capture is over (docs/storage.md "What storage costs").
 * Without it the index is built when the capture ends (tb_store_capture_end). */
#define TB_WRITER_BULK_WAL (256 * 1024 * 1024)
struct tb_writer_opts {
    size_t batch_rows;
    size_t queue_cap;
    bool bulk;
    size_t bulk_wal;
    bool keep_index;
};
int tb_writer_start_opts(struct tb_writer **out, struct tb_store *st, int64_t capture_id,
                         const struct tb_writer_opts *opts);
/* Persist catalog entries added since the last call (call before queueing
 * requests that reference them). The entries are copied here, on the
 * caller's thread. After the first call the writer remembers `cat`, and
 * tb_writer_request persists that catalog's new entries by itself before the
 * request that may use them, so callers need not call this again. */
int tb_writer_catalog(struct tb_writer *w, struct tb_catalog *cat);
/* Copies the record into the current batch (never blocks unless 64 full
 * batches are already waiting). Returns the writer's first error, if any. */
int tb_writer_request(struct tb_writer *w, const struct tb_request *r);
/* Hands over the current batch and waits until everything queued so far is
 * committed (live mode calls it about once a second through health). */
int tb_writer_flush(struct tb_writer *w);
/* Copies a connection record into the current batch; a record with the id
 * of one stored before replaces it (the engine reports a connection when it
 * opens and again when it ends). Connection ids also advance next_conn. */
int tb_writer_conn(struct tb_writer *w, const struct tb_conn *c);
/* Per-second capture health (live): cumulative counters at ts_ns. */
int tb_writer_health(struct tb_writer *w, int64_t ts_ns, uint64_t packets, uint64_t kernel_drops,
                     uint64_t if_drops);
/* Windows / episodes produced by streaming analysis go through the writer too. */
int tb_writer_windows(struct tb_writer *w, const struct tb_window *win, size_t n);
/* Flush everything, join the thread, free. Returns the first error seen. */
int tb_writer_finish(struct tb_writer *w);
/* The same, with the request rows committed in all (*rows) and per tier id
 * (*per_tier, malloc'd, owned by the caller, *ntier entries; NULL/0 when
 * none); any out pointer may be NULL. After an error these are the rows that
 * made it to the file, not those queued. */
int tb_writer_finish_counts(struct tb_writer *w, uint64_t *rows, uint64_t **per_tier,
                            size_t *ntier);
/* Request rows committed so far. */
uint64_t tb_writer_rows(const struct tb_writer *w);
/* What the writer has done so far (before tb_writer_finish), for progress
 * lines and benchmarks: is storage keeping up with capture? */
struct tb_writer_stats {
    uint64_t rows;              /* request rows committed */
    uint64_t batches;           /* batches committed (or discarded after an error) */
    uint64_t max_queued;        /* deepest the queue has been, in batches */
    int64_t caller_blocked_ns;  /* time callers waited for room in the queue */
    int64_t write_ns;           /* wall time the thread spent writing batches */
    int64_t cpu_ns;             /* CPU time of the writer thread */
};
void tb_writer_stats(struct tb_writer *w, struct tb_writer_stats *s);

/* ---- reads ---------------------------------------------------------------- */
/* Requests of one tier (tier 0 = all) with departure >= from and arrival < to
 * (INT64_MIN/INT64_MAX for no bound), ordered by arrival. *out is malloc'd and
 * owned by the caller. */
int tb_store_requests(struct tb_store *st, uint32_t tier, int64_t from_ns, int64_t to_ns,
                      struct tb_request **out, size_t *n);
/* The same requests, same order, as a stream: cb is called once per row, in
 * arrival order (then the order they were written in), with a record that
 * lives only for the call; memory does not grow with the number of rows.
 * Only the columns the analysis reads are decoded: req_bytes, resp_bytes and
 * status are 0. A non-zero return from cb stops the stream and is returned.
 * cb must not use the store (the statement is in use until the end). */
typedef int (*tb_store_request_cb)(void *ctx, const struct tb_request *r);
int tb_store_each_request(struct tb_store *st, uint32_t tier, int64_t from_ns, int64_t to_ns,
                          tb_store_request_cb cb, void *ctx);
int tb_store_request_count(struct tb_store *st, uint32_t tier, uint64_t *n);
/* Connections open at some time in [from, to) (close_ns >= from and open_ns <
 * to; INT64_MIN/INT64_MAX for no bound), ordered by open_ns, then conn.
 * *out is malloc'd and owned by the caller. */
int tb_store_connections(struct tb_store *st, int64_t from_ns, int64_t to_ns,
                         struct tb_conn **out, size_t *n);
/* Requests of one tier per server: per_server[server id] += count, for the
 * server ids below nsrv (others are skipped). */
int tb_store_server_counts(struct tb_store *st, uint32_t tier, uint64_t *per_server,
                           size_t nsrv);
/* Time span of the stored requests of a tier (0 = all). */
int tb_store_time_span(struct tb_store *st, uint32_t tier, int64_t *first_ns, int64_t *last_ns);

/* CSV exactly as DESIGN.md "Interfaces": header
 * tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags */
int tb_store_export_requests(struct tb_store *st, const char *tier_name, FILE *out);
/* The same with trailing columns added by the caller: `header` (e.g.
 * ",id,parent") after the header's last name, and row() called for each row
 * after its flags field, before the line break, in export order (tier name,
 * then arrival, connection, row id). */
struct tb_export_tail {
    const char *header;
    void (*row)(void *ctx, FILE *out);
    void *ctx;
};
int tb_store_export_requests_tail(struct tb_store *st, const char *tier_name, FILE *out,
                                  const struct tb_export_tail *tail);

/* ---- windows, service times, analyses, episodes ------------------------- */
/* Replaces the stored windows of (tier, server set, width) over the covered
 * range; other widths are never touched ("a later run adds, never overwrites"). */
int tb_store_put_windows(struct tb_store *st, const struct tb_window *w, size_t n);
int tb_store_get_windows(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                         int64_t from_ns, int64_t to_ns, struct tb_window **out, size_t *n);
/* Service times replace those of the same (tier, class, period). */
int tb_store_put_services(struct tb_store *st, const struct tb_class_service *s, size_t n);
/* Service times of a tier (0 = all), ordered by tier, class, period. */
int tb_store_get_services(struct tb_store *st, uint32_t tier, struct tb_class_service **out,
                          size_t *n);
/* Stores an analysis and its episodes; *analysis_id receives its row id. */
int tb_store_put_analysis(struct tb_store *st, const struct tb_analysis *a,
                          const struct tb_episode *ep, size_t nep, int64_t *analysis_id);
/* Stored analyses kept per (tier, server): beyond it the least recently used
 * go, with their episodes, and the windows of a width left without any
 * analysis (unless a capture is running: a live capture writes windows of
 * its own). An analysis of the same (tier, server, width, from, to) replaces
 * the stored one instead of adding a row. */
#define TB_STORE_ANALYSES_KEEP 64
/* The analysis of exactly (tier, server, width, from, to), newest first;
 * TB_E_NOTFOUND when none. Marks it used (LRU) unless read-only. */
int tb_store_find_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                           int64_t from_ns, int64_t to_ns, struct tb_analysis *a,
                           struct tb_episode **ep, size_t *nep);
/* The newest analysis of (tier, server, width); TB_E_NOTFOUND when none. */
int tb_store_get_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                          struct tb_analysis *a, struct tb_episode **ep, size_t *nep);

/* ---- capture health and events ------------------------------------------- */
struct tb_capture_row {
    int64_t id;
    char source[256];
    int64_t started_ns, ended_ns;
    uint64_t packets, bytes, kernel_drops, if_drops, parse_errors, gaps, evicted_flows, requests;
    enum tb_capture_state state;
    uint64_t requests_seen, requests_lost, unanswered, abandoned, memory_evicted;
};
int tb_store_captures(struct tb_store *st, struct tb_capture_row **out, size_t *n);

struct tb_health_row { int64_t ts_ns; uint64_t packets, kernel_drops, if_drops; };
int tb_store_get_health(struct tb_store *st, int64_t from_ns, int64_t to_ns,
                        struct tb_health_row **out, size_t *n);

/* External events (e.g. JVM GC pauses) imported from logs. */
int tb_store_put_events(struct tb_store *st, const struct tb_event *ev, size_t n);
int tb_store_get_events(struct tb_store *st, const char *kind, int64_t from_ns, int64_t to_ns,
                        struct tb_event **out, size_t *n);

#endif
