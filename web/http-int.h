/* SPDX-License-Identifier: MIT */
/* http-int.h — private to web/: a small HTTP/1.1 server on a libuv loop: a
 * strict request parser (http_parse.c), keep-alive and pipelining, bounded
 * heads and bodies, a Host allow-list against DNS rebinding, a connection cap that queues newcomers
 * instead of dropping requests, request and idle timeouts, and long-lived
 * event streams (Server-Sent Events). It knows nothing of tbneck; routes come
 * from a handler.
 *
 * The promise to clients: every request the server has read in full gets an
 * answer — its handler's, or an error status (400/403/408/413/414/431/501/
 * 503/505) — before the connection is closed. Connections are closed without
 * an answer only when nothing of a request has been received: idle keep-alive
 * connections and silent new ones, when their slot is needed. */
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
    /* Host names accepted besides IP literals and localhost (see
     * tb_http_host_allowed); "*" accepts any. Borrowed; must outlive the server. */
    const char *const *allow_hosts;
    size_t nallow_hosts;
    unsigned max_conns;      /* connections served at once, default 256; more wait in the
                              * kernel's accept queue */
    uint64_t idle_ms;        /* keep-alive and silent connections, default 30000 */
    uint64_t request_ms;     /* from a request's first byte to its last, default 10000 (408) */
};

enum tb_http_method { TB_HTTP_GET, TB_HTTP_HEAD, TB_HTTP_OTHER };

/* A request head as tb_http_parse_head() found it; pointers are into the
 * parsed buffer. */
struct tb_http_head {
    enum tb_http_method method;
    char method_name[33];
    const char *target;      /* origin-form "/path?query" (absolute-form reduced to it) */
    size_t target_len;
    bool root_path;          /* absolute-form without a path: the path is "/" */
    bool asterisk;           /* "OPTIONS *" */
    const char *host;        /* Host value, or the absolute-form authority; NULL if none */
    size_t host_len;
    int minor;               /* HTTP/1.minor: 0 or 1 */
    bool keep_alive;
    uint64_t content_length; /* at most TB_HTTP_BODY_MAX */
};

/* Parses the request head at the start of buf[0..n) (RFC 9112, strictly: CRLF
 * line ends only, no space before a field's colon, no folding, one Host in
 * HTTP/1.1, Content-Length digits only and consistent). Returns the head's
 * length in bytes when it is complete and valid; 0 when more bytes are needed
 * and nothing so far is wrong; or minus the status to answer: -400 malformed,
 * -413 Content-Length over TB_HTTP_BODY_MAX, -414 target over TB_HTTP_URL_MAX,
 * -431 head over TB_HTTP_HEAD_MAX, -501 Transfer-Encoding, -505 an HTTP
 * version other than 1.0 and 1.1. Errors are reported as soon as the bytes
 * that show them have arrived, without waiting for the end of the head. */
long tb_http_parse_head(const char *buf, size_t n, struct tb_http_head *h);

/* Whether a request's Host (value as sent, port included) may address this
 * server. DNS rebinding gives a page of another site a loopback address
 * under that site's name, so names are the danger, not addresses: IP
 * literals pass, as do "localhost" and its subdomains (RFC 6761, resolved by
 * the client itself), and the names in `extra` ("*" = any name). */
bool tb_http_host_allowed(const char *host, size_t n, const char *const *extra, size_t nextra);

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
 * tb_http_respond(), tb_http_stream_begin() or tb_http_defer() before
 * returning. */
typedef void (*tb_http_handler)(void *ud, struct tb_http_conn *c, const struct tb_http_req *r);

struct tb_http;

/* Binds and listens. A non-loopback address without allow_remote returns
 * TB_E_PERM; a bad address TB_E_INVAL; a failed bind TB_E_IO. errbuf gets one
 * line naming the address. The process ignores SIGPIPE from then on: a client
 * that vanishes makes a write fail with EPIPE, which closes its connection,
 * instead of killing the process (and a capture running beside the server). */
int tb_http_new(struct tb_http **out, uv_loop_t *loop, const struct tb_http_opts *o,
                tb_http_handler handler, void *ud, char *errbuf, size_t errlen);
/* Closes the listener and every connection; the memory is released once libuv
 * has closed all handles (run the loop until it returns). */
void tb_http_close(struct tb_http *srv);
/* The bound address as "127.0.0.1:40123". */
const char *tb_http_bound(const struct tb_http *srv);
int tb_http_port(const struct tb_http *srv);
unsigned tb_http_conn_count(const struct tb_http *srv);

/* What the server has done so far (tests, soak runs). */
struct tb_http_stats {
    uint64_t accepted;        /* connections taken from the accept queue */
    uint64_t requests;        /* requests received in full, or refused from their head */
    uint64_t status[6];       /* answers by class: [2] 2xx, [4] 4xx, [5] 5xx */
    uint64_t evicted;         /* connections closed, with nothing received, to free a slot */
    uint64_t timeouts;        /* 408s: a request not complete within request_ms */
    uint64_t queued;          /* times a newcomer had to wait for a slot */
};
void tb_http_stats(const struct tb_http *srv, struct tb_http_stats *out);

/* Sends a full response. `extra_headers` is NULL or complete "Name: value\r\n"
 * lines. For HEAD requests the body is left out. Every response carries
 * Content-Security-Policy (frame-ancestors 'none'), X-Frame-Options,
 * X-Content-Type-Options and Referrer-Policy. A status >= 500, and any error
 * to a malformed request, closes the connection once it is written. */
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
 * longer subject to the idle timeout, and receives every tb_http_broadcast().
 * Streams may hold at most half of max_conns; beyond that the request is
 * answered 503. */
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
