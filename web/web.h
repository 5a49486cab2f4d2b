/* SPDX-License-Identifier: MIT */
/* web.h — the dashboard server: JSON API over a tbneck database, a live event
 * stream (Server-Sent Events) and the static page, on a caller's libuv loop.
 * Used by `tbneck serve` and by `tbneck capture --serve`. */
#ifndef TB_WEB_H
#define TB_WEB_H

#include <uv.h>
#include "tb.h"
#include "stats.h"
#include "correlate.h"
#include "catalog.h"
#include "request.h"
#include "stream.h"

struct tb_web_opts {
    const char *listen;       /* default "127.0.0.1:8080" */
    bool allow_remote;        /* bind non-loopback addresses */
    /* Host names the dashboard answers to besides IP literals and localhost,
     * comma-separated ("dash.example.org,mon"), "*" for any; NULL for none.
     * Others get 403 (DNS rebinding, tb_http_host_allowed). */
    const char *allow_hosts;
    const char *static_dir;   /* NULL = installed folder, else the source tree's */
    const char *db_path;      /* database read by the API (must exist) */
    /* Serving a database that someone else writes (or a finished one): poll
     * it every second and put new windows, episodes and health rows on the
     * stream. A live capture publishes directly instead and leaves it false. */
    bool poll_db;
    int64_t stream_width_ns;  /* window width announced on the stream (default 50 ms) */
    /* A live capture's catalog (borrowed; read on the loop thread only):
     * /metrics then answers from what the capture publishes (windows, rules,
     * episodes, requests, health) instead of reading the database. */
    const struct tb_catalog *live_catalog;
    unsigned max_conns;       /* default 256 */
    uint64_t idle_ms;         /* default 30 s */
};

struct tb_web;

/* Opens the database (its own connection) and starts listening. On failure
 * errbuf has one line; TB_E_PERM means a non-loopback address without
 * allow_remote (a usage error), anything else a runtime failure. */
int tb_web_new(struct tb_web **out, uv_loop_t *loop, const struct tb_web_opts *o, char *errbuf,
               size_t errlen);
/* Stops listening, closes every connection and the database; memory is
 * released once the loop has run the close callbacks. */
void tb_web_close(struct tb_web *w);
/* "127.0.0.1:40123" — the address actually bound (port 0 picks one). */
const char *tb_web_bound(const struct tb_web *w);
unsigned tb_web_stream_clients(const struct tb_web *w);

/* Live events for the stream, from a capture running on the same loop. */
void tb_web_publish_window(struct tb_web *w, const char *tier, const struct tb_window *win,
                           bool congested);
void tb_web_publish_episode(struct tb_web *w, const char *tier, const struct tb_episode *ep,
                            bool ongoing);
/* An analysis and the congestion rule it gives (threshold, curve, freeze
 * fraction, units per completion): a client can check every window's
 * congested flag and every episode against it. `rs`: the change of work unit
 * the re-estimate made before it (the live stream's rescale), NULL for none;
 * with it a client also rebuilds an episode open across the change. */
void tb_web_publish_analysis(struct tb_web *w, const char *tier, const struct tb_analysis *a,
                             const struct tb_congestion *rule, const struct tb_stream_rescale *rs);
/* Every closed window of a tier and of each of its servers (the stream's
 * windows sink): /metrics keeps the latest of each. The tier's rows come
 * again, with their congestion, through tb_web_publish_window. */
void tb_web_publish_windows(struct tb_web *w, const struct tb_window *win, size_t n);
/* One completed request: counted per tier and server for /metrics. */
void tb_web_publish_request(struct tb_web *w, const struct tb_request *r);
void tb_web_publish_health(struct tb_web *w, int64_t ts_ns, uint64_t packets,
                           uint64_t kernel_drops, uint64_t if_drops);

/* A live sensor's ClickHouse sender (capture --store clickhouse://): /metrics
 * shows the latest as tbneck_store_* (docs/clickhouse.md, "Live sensors"). */
struct tb_web_store {
    uint64_t stored_requests, stored_conns;   /* the server has them */
    uint64_t pending_requests;                /* waiting: memory or spool */
    uint64_t dropped_requests, dropped_conns; /* the spool was full */
    uint64_t spool_bytes;
    bool up;                                  /* the last attempt succeeded */
};
void tb_web_publish_store(struct tb_web *w, const struct tb_web_store *s);

#endif
