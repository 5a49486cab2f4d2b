/* SPDX-License-Identifier: MIT */
/* http-int.h — private to web/: a small HTTP/1.1 server on a libuv loop:
 * http_parser for requests, keep-alive, bounded heads and bodies, a connection
 * cap with eviction of the least recently active connection, idle timeouts, and
 * long-lived event streams (Server-Sent Events). It knows nothing of tbneck;
 * routes come from a handler. */
#ifndef TB_HTTP_H
#define TB_HTTP_H

#include <uv.h>
#include "tb.h"

#define TB_HTTP_HEAD_MAX 8192     /* request line + headers */
#define TB_HTTP_URL_MAX 2048
#define TB_HTTP_BODY_MAX 65536    /* GET bodies are read and ignored up to this */
#define TB_HTTP_STREAM_QUEUE_MAX (4u << 20) /* unsent bytes before a slow stream is cut */

struct tb_http_opts {
    const char *listen;      /* "127.0.0.1:8080", "[::1]:0"; port 0 = any free port */
    bool allow_remote;       /* otherwise only loopback addresses may be bound */
    unsigned max_conns;      /* default 256 */
    uint64_t idle_ms;        /* default 30000 */
};

enum tb_http_method { TB_HTTP_GET, TB_HTTP_HEAD, TB_HTTP_OTHER };

struct tb_http_conn;

/* One parsed request. Strings are NUL-terminated and live until the handler
 * returns. `path` is still percent-encoded; `query` is NULL or the text after
 * '?' (encoded too). */
struct tb_http_req {
    enum tb_http_method method;
    const char *method_name;
    const char *path;
    const char *query;
    bool keep_alive;
};

/* Called once per complete request; it must answer with exactly one
 * tb_http_respond() or tb_http_stream_begin() before returning. */
typedef void (*tb_http_handler)(void *ud, struct tb_http_conn *c, const struct tb_http_req *r);

struct tb_http;

/* Binds and listens. A non-loopback address without allow_remote returns
 * TB_E_PERM; a bad address TB_E_INVAL; a failed bind TB_E_IO. errbuf gets one
 * line naming the address. */
int tb_http_new(struct tb_http **out, uv_loop_t *loop, const struct tb_http_opts *o,
                tb_http_handler handler, void *ud, char *errbuf, size_t errlen);
/* Closes the listener and every connection; the memory is released once libuv
 * has closed all handles (run the loop until it returns). */
void tb_http_close(struct tb_http *srv);
/* The bound address as "127.0.0.1:40123". */
const char *tb_http_bound(const struct tb_http *srv);
int tb_http_port(const struct tb_http *srv);
unsigned tb_http_conn_count(const struct tb_http *srv);

/* Sends a full response. `extra_headers` is NULL or complete "Name: value\r\n"
 * lines. For HEAD requests the body is left out. A response with status >= 400
 * to a malformed request closes the connection once it is written. */
int tb_http_respond(struct tb_http_conn *c, int status, const char *ctype, const void *body,
                    size_t len, const char *extra_headers);
/* Same, taking ownership of a malloc'd body (freed once written). */
int tb_http_respond_owned(struct tb_http_conn *c, int status, const char *ctype, char *body,
                          size_t len, const char *extra_headers);
/* JSON error body {"error": msg}. */
int tb_http_error(struct tb_http_conn *c, int status, const char *msg);

/* Deferred answers: a handler that computes its answer elsewhere (a worker
 * thread) calls tb_http_defer() instead of responding, and later, on the loop
 * thread, tb_http_respond*() (when tb_http_conn_alive()) and then
 * tb_http_release(). The connection reads nothing more until then (pipelined
 * requests wait, so answers keep their order) and is not freed while held. */
void tb_http_defer(struct tb_http_conn *c);
void tb_http_release(struct tb_http_conn *c);
bool tb_http_conn_alive(const struct tb_http_conn *c);

/* Turns the connection into an event stream (text/event-stream): it is no
 * longer subject to the idle timeout, and receives every tb_http_broadcast(). */
int tb_http_stream_begin(struct tb_http_conn *c);
/* Sends one event to one stream; `event` may be NULL. `data` must be one line. */
int tb_http_stream_send(struct tb_http_conn *c, const char *event, const char *data);
/* Sends one event to every open stream. */
void tb_http_broadcast(struct tb_http *srv, const char *event, const char *data);
unsigned tb_http_stream_count(const struct tb_http *srv);

const char *tb_http_reason(int status);

/* Percent-decodes src[0..n) into dst (size dstlen, NUL-terminated); '+' is
 * kept as is unless plus_is_space. Returns the decoded length, or -1 for a bad
 * escape, an encoded NUL, or no room. */
long tb_http_unescape(const char *src, size_t n, char *dst, size_t dstlen, bool plus_is_space);
/* Finds query parameter `key` in a query string and decodes its value into
 * dst. Returns 1 when found, 0 when absent, -1 when malformed. */
int tb_http_query_get(const char *query, const char *key, char *dst, size_t dstlen);

/* True for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
bool tb_http_addr_is_loopback(const struct sockaddr *sa);

#endif
