/* SPDX-License-Identifier: MIT */
/* ch.h — store URLs (sqlite:FILE, clickhouse://HOST:PORT[,...]/DB[?cluster=NAME]) and the
 * ClickHouse store: a capture's requests, connections and tier hosts under text identities,
 * and the scans that read them back.
 *
 * What is stored (docs/clickhouse.md): tables `requests` (MergeTree ordered
 * by (tier, arrival_ns, conn, sensor, seq)), `connections` and `hosts`, whose
 * identities are texts — tier name, server "ip:port", client "ip:port", class
 * fingerprint — with FNV-1a hashes of tier and (tier, class) beside them, so
 * that two sensors that saw the same class store the same identity whatever
 * their local catalog ids were. `sensor` names the writer; `seq` is the
 * order in which that sensor stored its requests (SQLite's rowid), which
 * breaks ties exactly as the SQLite export does. conn ids start above the
 * sensor's largest, so a sensor's connections stay distinct across its
 * captures. Under a cluster the names are Distributed tables over per-shard
 * `*_local` MergeTree tables. */
#ifndef TB_CH_H
#define TB_CH_H

#include <signal.h>
#include <stdio.h>

#include "tb.h"
#include "request.h"
#include "catalog.h"
#include "conn.h"

enum tb_store_kind { TB_STORE_KIND_SQLITE, TB_STORE_KIND_CLICKHOUSE };

#define TB_CH_MAX_SHARDS 16
struct tb_ch_endpoint {
    char host[256];     /* host name or IPv4/IPv6 literal (without brackets) */
    unsigned port;      /* its HTTP interface */
};
struct tb_store_url {
    enum tb_store_kind kind;
    const char *path;   /* sqlite: the file (points into the URL) */
    /* clickhouse: HOST:PORT[,HOST:PORT...]; the first is where rows are
     * written and read, the others are the cluster's other shards, which
     * only receive the tables (Debian's 18.16 runs DDL on a cluster only
     * through ZooKeeper, and system.clusters names native ports, not HTTP). */
    struct tb_ch_endpoint ep[TB_CH_MAX_SHARDS];
    size_t nep;
    char db[64];        /* [A-Za-z0-9_]+ */
    char cluster[64];   /* "" = a single server */
};

/* Parses a --store URL: sqlite:FILE or
 * clickhouse://HOST:PORT[,HOST:PORT...]/DATABASE[?cluster=NAME] (several
 * endpoints only with a cluster). TB_E_INVAL with one line in err on anything
 * else (unknown scheme, no port, a database name that is not an identifier). */
int tb_store_url_parse(const char *url, struct tb_store_url *u, char *err, size_t errlen);

struct tb_ch;

/* Connects (one query over HTTP; with create, retrying for retry_ns as
 * tb_ch_set_retry says); with create, makes the database and its
 * tables when missing (a reader passes false and fails on a missing table).
 * With a cluster, create makes on every endpoint the MergeTree tables
 * (requests_local, connections_local, hosts_local) and over them Distributed
 * tables under the plain names, sharded by cityHash64(server) (hosts by
 * address), after checking that system.clusters lists as many shards as the
 * URL names; rows are written through the first endpoint's Distributed
 * tables with insert_distributed_sync, so they are on their shards when the
 * capture ends, and read back through them. With create, the staging tables
 * an earlier capture of this sensor left (a completion that never
 * succeeded) are dropped, with a warning line.
 * sensor: [A-Za-z0-9_.:-]{1,64}. On failure err holds one line. */
/* A writer's patience (tb_ch_set_retry): for this long after a failure to
 * connect, each request is tried again once a second; the rows wait in
 * memory meanwhile (the capture blocks: back-pressure). An insert the server
 * may have received in part (a cluster's error answer: some shards may have
 * written their parts; a reset) is never simply sent again: for as long, it
 * is settled as a live sensor's batch is (its query id gone, its rows
 * counted, only the missing ones sent), so a row is never inserted twice.
 * 0 = fail at once (readers). */
void tb_ch_set_retry(struct tb_ch *ch, int64_t ns);
int tb_ch_open(struct tb_ch **out, const struct tb_store_url *u, const char *sensor,
               bool create, int64_t retry_ns, char *err, size_t errlen);
void tb_ch_close(struct tb_ch *ch);
/* The first connection id above every one this sensor stored before (1 on a
 * new database). */
int tb_ch_next_conn(struct tb_ch *ch, uint64_t *conn);
/* Queues one request (texts from cat, which must hold its ids); every
 * TB_CH_BATCH rows are sent as one INSERT. The caller blocks while it is sent:
 * that is the back-pressure. */
#define TB_CH_BATCH 65536
int tb_ch_request(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_request *r);
/* Sends what is queued. On failure tb_ch_error says what may be stored; a
 * staging table the completion made is dropped. */
int tb_ch_flush(struct tb_ch *ch);
uint64_t tb_ch_rows(const struct tb_ch *ch);
/* Queues one connection's final record (texts from cat); sent with the
 * requests. */
int tb_ch_conn(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_conn *c);

/* Writes the catalog's tier hosts (the machines of each tier, which tell
 * callers apart from users) to the table hosts; call once a capture ends. */
int tb_ch_put_hosts(struct tb_ch *ch, const struct tb_catalog *cat);

/* One stored request as tb_ch_scan hands it over: texts point into the
 * answer (not NUL-terminated), valid during the callback. */
struct tb_ch_text {
    const char *p;
    size_t n;
};
struct tb_ch_row {
    struct tb_ch_text sensor, tier, proto, server, client, cls;
    uint64_t conn, req_bytes, resp_bytes;
    int64_t arrival_ns, departure_ns;
    int32_t status;
    uint32_t flags;
};
/* Every stored request, sensor by sensor in name order, each sensor's in the
 * order it stored them (seq), a (sensor, seq) stored twice handed over once;
 * a callback's nonzero return stops the scan and is returned. */
int tb_ch_scan(struct tb_ch *ch, int (*cb)(void *ud, const struct tb_ch_row *r), void *ud);
/* Per sensor in name order, the largest conn id it stored (requests and
 * connections). */
int tb_ch_scan_sensors(struct tb_ch *ch, int (*cb)(void *ud, struct tb_ch_text sensor,
                                                   uint64_t max_conn), void *ud);
/* Every stored connection in the order of its opening (then sensor, conn). tier and
 * server are "" for a connection no protocol was recognised on. */
struct tb_ch_conn_row {
    struct tb_ch_text sensor, client, server, tier, proto, server_addr;
    struct tb_conn c; /* all but client, server, tier, server_id */
};
int tb_ch_scan_conns(struct tb_ch *ch, int (*cb)(void *ud, const struct tb_ch_conn_row *r),
                     void *ud);
/* Every (tier, protocol, server) with a stored request, in the order of its
 * first request's arrival (ties by text): near the order in which one sensor
 * that saw everything would have met them (when the first payload shows the
 * protocol). */
int tb_ch_scan_servers(struct tb_ch *ch,
                       int (*cb)(void *ud, struct tb_ch_text tier, struct tb_ch_text proto,
                                 struct tb_ch_text server),
                       void *ud);
/* Every stored (tier, host address) pair, once. */
int tb_ch_scan_hosts(struct tb_ch *ch,
                     int (*cb)(void *ud, struct tb_ch_text tier, struct tb_ch_text addr),
                     void *ud);

/* ---- live sensors (ch_live.c) -------------------------------------------------------------
 * Rows batched on the capture thread and sent by a thread of its own, which
 * the capture never waits for: a batch is sealed every tb_ch_live_tick (once
 * a second) or at TB_CH_BATCH rows and waits for the sender in memory (up
 * to 4 batches), else in a file of the spool directory, else — the spool at
 * its cap — it is dropped and its rows counted. Batches are sent strictly in the
 * order they were sealed; a batch that may have reached the server before a
 * failure is counted there (its query id finished, its seq range) before it
 * is sent again, so no request is stored twice. */
struct tb_ch_live_opts {
    const char *spool_dir; /* created when missing; locked (flock) while in use */
    uint64_t spool_max;    /* bytes of spool files at most; 0: no spool */
    /* At the start, what an earlier capture left in the spool is sent first
     * (so conn and seq continue above it): for at most this long while the
     * server fails. */
    int64_t retry_ns;
};
struct tb_ch_live_stats {
    uint64_t stored_requests, stored_conns;   /* the server has them (this run) */
    uint64_t pending_requests, pending_conns; /* sealed, not stored yet: memory or spool */
    uint64_t spool_bytes, spool_files;        /* on disk now */
    uint64_t spooled_batches;                 /* written to the spool since the start */
    uint64_t replayed_batches;                /* sent from the spool */
    uint64_t refilled_batches;                /* a cluster held part: the rest sent again */
    uint64_t dropped_requests, dropped_conns; /* the spool was full (or unwritable) */
    uint64_t leftover_requests;               /* an earlier capture's, sent at the start */
    uint64_t outages;                         /* times the server went away */
    bool down;                                /* the last attempt failed */
};
struct tb_ch_live;
/* enc: the capture thread's handle (encodes rows; tb_ch_next_conn must be
 * called on it after this returns); send: a second handle on the same store,
 * which the live sender takes over (and closes). On failure (a spool in use,
 * an earlier capture's spool that could not be sent) err holds one line;
 * TB_E_INVAL is a usage error. */
int tb_ch_live_start(struct tb_ch_live **out, struct tb_ch *enc, struct tb_ch *send,
                     const struct tb_ch_live_opts *o, char *err, size_t errlen);
/* Capture thread only. */
int tb_ch_live_request(struct tb_ch_live *cl, const struct tb_catalog *cat,
                       const struct tb_request *r);
int tb_ch_live_conn(struct tb_ch_live *cl, const struct tb_catalog *cat, const struct tb_conn *c);
/* Seals what was filled since the last tick. */
int tb_ch_live_tick(struct tb_ch_live *cl);
void tb_ch_live_stats(struct tb_ch_live *cl, struct tb_ch_live_stats *s);
const char *tb_ch_live_spool(const struct tb_ch_live *cl);
/* Seals the rest, sends what waits — while the server fails, for at most
 * wait_ns, or until *abort (a signal handler's flag) is set — and writes
 * what is still in memory to the spool, where the next capture with this
 * spool finds it. Fills *s (final counts) and frees cl. */
int tb_ch_live_finish(struct tb_ch_live *cl, int64_t wait_ns, volatile sig_atomic_t *abort,
                      struct tb_ch_live_stats *s);

/* The last error's text (ClickHouse's message or curl's), for the caller's line. */
const char *tb_ch_error(const struct tb_ch *ch);

/* FNV-1a, 64 bits, of len bytes: the identity hashes of docs/clickhouse.md. */
uint64_t tb_ch_fnv1a(const void *p, size_t len, uint64_t h);
#define TB_CH_FNV_SEED 0xcbf29ce484222325ull

#endif
