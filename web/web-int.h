/* SPDX-License-Identifier: MIT */
/* web-int.h — private parts of the dashboard server shared by its files. */
#ifndef TB_WEB_INT_H
#define TB_WEB_INT_H

#include <limits.h>
#include "web.h"
#include "http-int.h"
#include "buf.h"
#include "json.h"
#include "catalog.h"
#include "store.h"

#define TB_WEB_MAX_TIERS 256
#define TB_WEB_CACHE 8
/* Database jobs waiting behind the running one. Beyond it a request gets 503
 * (Retry-After: 1) at once rather than an answer so late that its client has
 * given up (issue 13's soak: 1000-connection bursts of API requests on a
 * loaded machine queued answers past 30 s). */
#define TB_WEB_JOBS_MAX 128
#define TB_WEB_MAX_HOSTS 32

#include "analyze.h"

/* One analysis kept for the API (api.c, analyze()). */
struct tb_web_cached {
    bool used;
    uint32_t tier, server;
    int64_t width_ns, from_ns, to_ns;
    uint64_t count;    /* the tier's request count when it was computed */
    uint64_t last_use;
    struct tb_analysis_result res;
};

/* The last width=auto choice (api.c, choose_width). */
struct tb_web_auto {
    bool used;
    uint32_t tier, server;
    int64_t from_ns, to_ns, width_ns;
    uint64_t count;
    char reason[512];
};

struct tb_web {
    uv_loop_t *loop;
    struct tb_http *http;
    struct tb_store *st;
    struct tb_catalog *cat;
    uv_timer_t poll;
    bool poll_db, closing;
    int64_t stream_width_ns;
    char static_root[PATH_MAX]; /* resolved, no trailing '/' */
    char *hosts_buf;            /* --allow-host, split in place into hosts[] */
    const char *hosts[TB_WEB_MAX_HOSTS];
    size_t nhosts;
    /* Stream watermarks when polling the database (per tier id). */
    int64_t win_seen[TB_WEB_MAX_TIERS];
    int64_t ep_seen[TB_WEB_MAX_TIERS];
    int64_t health_seen;
    struct tb_web_cached cache[TB_WEB_CACHE];
    uint64_t cache_clock;
    struct tb_web_auto auto_width;
    /* API jobs (api.c): one runs on the thread pool at a time, the rest wait. */
    struct tb__web_job *jobs_head, *jobs_tail;
    size_t njobs;            /* queued, not yet running (at most TB_WEB_JOBS_MAX) */
    bool job_running;
    bool poll_closed;
    /* /metrics (metrics.c): per tier, the rows last computed from the
     * database; or, serving a live capture, what it published. */
    struct tb__web_mtier *mtier;
    size_t nmtier;
    struct tb__web_live *live;
};

void tb__web_static(struct tb_web *w, struct tb_http_conn *c, const char *raw_path);
const char *tb__web_content_type(const char *path);
void tb__web_api(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r);
void tb__web_cache_clear(struct tb_web *w);
void tb__web_jobs_drop(struct tb_web *w);
/* Releases the database and the struct once no job runs and the poll timer is
 * closed (called by both). */
void tb__web_finish_close(struct tb_web *w);
/* Reloads the catalog from the database (tiers appear while a capture runs). */
int tb__web_reload_catalog(struct tb_web *w);

/* /metrics (metrics.c). Serving a database, the answer is computed on the
 * worker thread (api.c's jobs): tb__web_metrics_db writes the body or returns
 * a negative code with a message. */
void tb__web_metrics(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r);
void tb__web_metrics_submit(struct tb_web *w, struct tb_http_conn *c, const struct tb_http_req *r);
int tb__web_metrics_db(struct tb_web *w, struct tb_buf *b, char *err, size_t errlen);
const char *tb__web_metrics_ctype(void);
void tb__web_metrics_free(struct tb_web *w);
int tb__web_live_new(struct tb_web *w, const struct tb_catalog *cat);
void tb__web_live_free(struct tb_web *w);
/* congested: 0/1, or -1 when not known (a server's row). */
void tb__web_live_window(struct tb_web *w, const struct tb_window *win, int congested);
void tb__web_live_episode(struct tb_web *w, const char *tier, const struct tb_episode *ep);
void tb__web_live_analysis(struct tb_web *w, const struct tb_analysis *a,
                           const struct tb_congestion *rule);
void tb__web_live_store(struct tb_web *w, const struct tb_web_store *s);
void tb__web_live_health(struct tb_web *w, uint64_t packets, uint64_t kernel_drops,
                         uint64_t if_drops);

/* JSON shapes shared by the API and the stream. */
void tb__web_json_window(struct tb_buf *b, const char *tier, const struct tb_window *win,
                         bool congested);
void tb__web_json_episode(struct tb_buf *b, const char *tier, const struct tb_episode *ep);

#endif
