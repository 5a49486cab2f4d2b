/* SPDX-License-Identifier: MIT */
/* http.c — HTTP/1.1 server on libuv: strict parsing (http_parse.c), keep-alive
 * and pipelining, a Host allow-list, a connection cap that queues rather
 * than drops, request and idle timeouts, and Server-Sent Events.
 *
 * Connection slots. At most max_conns connections are served at once. A
 * newcomer beyond that is left in the kernel's accept queue (libuv stops
 * polling the listener while a connection it accepted waits for
 * uv_accept), and taken as soon as a slot frees: a connection closes, or one
 * that holds no received bytes can be closed for it — an idle keep-alive
 * connection (closing those is HTTP's normal business), or a new one that
 * has sent nothing for FRESH_GRACE_MS (a client whose request is still in
 * flight gets that long). A connection in the middle of a request older
 * than FRESH_GRACE_MS is answered 408 to free its slot (slowloris); one
 * whose answer is being computed or written is never touched. So a burst of
 * a thousand complete requests is served a slot's worth at a time, and
 * every request that was read gets an answer. */
#include "http-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#define LINGER_MS 1000       /* after the last response of a closing connection */
#define LINGER_MAX 256       /* lingering connections at once; beyond, close at once */
#define HEARTBEAT_MS 15000   /* SSE comment lines keep proxies and browsers from timing out */
#define FRESH_GRACE_MS 1000  /* a silent newcomer (or slow request) keeps its slot this long */
#define ACCEPT_RETRY_MS 100  /* how often a waiting newcomer looks for a slot */
#define LISTEN_BACKLOG 1024  /* the kernel's accept queue (capped by net.core.somaxconn) */
#define IN_CAP (TB_HTTP_HEAD_MAX + 8192) /* a head and what is pipelined behind it */

/* Sent with every response: the dashboard needs nothing from elsewhere, may
 * not be framed (clickjacking), and its JSON must never be sniffed as HTML. */
#define SECURITY_HEADERS                                                                   \
    "Content-Security-Policy: default-src 'self'; img-src 'self' data:; object-src 'none'; " \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"                        \
    "X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\n"                           \
    "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\n"

struct tb_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t heartbeat, retry;
    tb_http_handler handler;
    void *ud;
    const char *const *allow_hosts;
    size_t nallow_hosts;
    unsigned max_conns;
    uint64_t idle_ms, request_ms;
    /* Every connection, least recently active first: eviction looks from
     * the head. nconns counts those holding a slot; lingering connections
     * have given theirs up. */
    struct tb_http_conn *head, *tail;
    unsigned nconns, nstreams, nlinger;
    unsigned refs;        /* open server handles + live connections; freed at 0 */
    bool closing;
    bool waiting;         /* libuv holds an accepted connection for us (see above) */
    bool in_accept;       /* try_accept is running (closing a victim calls it again) */
    struct tb_http_stats st;
    char bound[64];
    int port;
};

struct tb_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    struct tb_http *srv;
    struct tb_http_conn *prev, *next;
    uint64_t accepted_ms, req_start_ms; /* loop time; req_start_ms 0 = between requests */
    uint64_t served;      /* requests answered on this connection */
    uint64_t body_left;   /* body bytes of the current request still to discard */
    unsigned pending_writes;
    int open_handles;
    int holds;            /* deferred responses in flight (tb_http_defer) */
    bool in_list, streaming, close_after, lingering, closing, responded, deferred;
    bool reading, eof, dispatching, host_ok, keep_alive;
    enum tb_http_method method;
    char method_name[33];
    size_t url_len;
    char url[TB_HTTP_URL_MAX + 2];
    size_t inlen;         /* unprocessed input in `in` */
    char in[IN_CAP];
};

struct wreq {
    uv_write_t req;
    struct tb_http_conn *c;
    char *a, *b;
};

static void conn_close(struct tb_http_conn *c);
static void try_accept(struct tb_http *srv);
static void process(struct tb_http_conn *c, bool parse);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

const char *tb_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static void srv_unref(struct tb_http *srv)
{
    if (--srv->refs == 0)
        free(srv);
}

static uint64_t now_ms(const struct tb_http *srv)
{
    return uv_now(srv->loop);
}

/* ---- connection list -------------------------------------------------------- */

static void list_unlink(struct tb_http_conn *c)
{
    struct tb_http *srv = c->srv;
    if (!c->in_list)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        srv->tail = c->prev;
    c->prev = c->next = NULL;
    c->in_list = false;
}

static void list_append(struct tb_http_conn *c)
{
    struct tb_http *srv = c->srv;
    c->prev = srv->tail;
    c->next = NULL;
    if (srv->tail)
        srv->tail->next = c;
    else
        srv->head = c;
    srv->tail = c;
    c->in_list = true;
}

static void touch(struct tb_http_conn *c)
{
    if (!c->in_list || c->srv->tail == c)
        return;
    list_unlink(c);
    list_append(c);
}

static void on_timer(uv_timer_t *t);

static void arm(struct tb_http_conn *c, uint64_t ms)
{
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void set_reading(struct tb_http_conn *c, bool on)
{
    if (c->closing || c->reading == on)
        return;
    if (on && c->eof)
        return;
    if (on)
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    else {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* ---- closing ---------------------------------------------------------------- */

static void conn_free_if_done(struct tb_http_conn *c)
{
    if (c->open_handles > 0 || c->holds > 0)
        return;
    struct tb_http *srv = c->srv;
    free(c);
    srv_unref(srv);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    struct tb_http_conn *c = h->data;
    c->open_handles--;
    conn_free_if_done(c);
}

static void conn_close(struct tb_http_conn *c)
{
    if (c->closing)
        return;
    struct tb_http *srv = c->srv;
    c->closing = true;
    list_unlink(c);
    if (c->lingering)
        srv->nlinger--;
    else
        srv->nconns--;
    if (c->streaming)
        srv->nstreams--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
    try_accept(srv);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct tb_http_conn *c = req->data;
    if (status < 0)
        conn_close(c);
}

/* A response that ends the connection is followed by a half-close and a short
 * linger that discards what the client still sends: closing at once with
 * unread input makes the kernel send RST, and the client may then never see
 * the answer that explains why. The slot is freed at once. */
static void begin_linger(struct tb_http_conn *c)
{
    struct tb_http *srv = c->srv;
    if (c->lingering || c->closing)
        return;
    if (c->eof || srv->nlinger >= LINGER_MAX) {
        conn_close(c); /* nothing more will come, or too many already wait */
        return;
    }
    c->lingering = true;
    c->inlen = 0;
    srv->nconns--;
    srv->nlinger++;
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    set_reading(c, true);
    arm(c, LINGER_MS);
    try_accept(srv);
}

/* The connection has said and been told all it will: linger, close, or wait
 * for the next request. */
static void after_writes(struct tb_http_conn *c)
{
    if (c->closing || c->pending_writes || c->deferred || c->streaming)
        return;
    if (c->close_after)
        begin_linger(c);
    else if (c->eof)
        conn_close(c);
    else if (c->srv->waiting)
        try_accept(c->srv); /* idle now: a waiting newcomer may take its slot */
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct tb_http_conn *c = w->c;
    free(w->a);
    free(w->b);
    free(w);
    c->pending_writes--;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c); /* EPIPE, ECONNRESET: the client has gone */
        return;
    }
    after_writes(c);
}

/* Queues a and b (either may be NULL), taking ownership of both. */
static int queue_write(struct tb_http_conn *c, char *a, size_t alen, char *b, size_t blen)
{
    struct wreq *w = NULL;
    if (c->closing || c->lingering)
        goto fail;
    w = malloc(sizeof *w);
    if (!w)
        goto fail;
    w->c = c;
    w->a = a;
    w->b = b;
    uv_buf_t bufs[2];
    unsigned n = 0;
    if (a && alen)
        bufs[n++] = uv_buf_init(a, (unsigned)alen);
    if (b && blen)
        bufs[n++] = uv_buf_init(b, (unsigned)blen);
    if (n == 0) {
        free(w);
        free(a);
        free(b);
        after_writes(c);
        return 0;
    }
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, n, on_write) < 0) {
        free(w);
        goto fail_close;
    }
    c->pending_writes++;
    return 0;
fail_close:
    conn_close(c);
fail:
    free(a);
    free(b);
    return c->closing || c->lingering ? TB_E_IO : TB_E_NOMEM;
}

/* ---- responses ---------------------------------------------------------------- */

static void resume(struct tb_http_conn *c);

static int respond(struct tb_http_conn *c, int status, const char *ctype, char *body, size_t len,
                   bool owned, const char *extra)
{
    if (c->responded || c->closing) {
        if (owned)
            free(body);
        return TB_E_INVAL;
    }
    c->responded = true;
    c->served++;
    c->srv->st.status[TB_MIN(status / 100, 5)]++;
    /* Parse errors set close_after themselves (the rest of the byte stream
     * cannot be trusted); a well-formed request answered 4xx keeps the
     * connection, as does a 405 whose body has been read, and a 503: the
     * request was read in full and the server is only busy, so the requests
     * pipelined behind it are still owed their answers. */
    if ((status >= 500 && status != 503) || !c->keep_alive)
        c->close_after = true;
    char *head = malloc(768 + (extra ? strlen(extra) : 0));
    char *copy = NULL;
    if (!head)
        goto nomem;
    int hl = sprintf(head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     SECURITY_HEADERS "Connection: %s\r\n%s\r\n",
                     status, tb_http_reason(status), ctype ? ctype : "text/plain", len,
                     c->close_after ? "close" : "keep-alive", extra ? extra : "");
    bool send_body = c->method != TB_HTTP_HEAD && len > 0;
    if (owned) {
        copy = send_body ? body : (free(body), NULL);
    } else if (send_body) {
        copy = malloc(len);
        if (!copy)
            goto nomem;
        memcpy(copy, body, len);
    }
    bool was_deferred = c->deferred;
    c->deferred = false;
    int rc = queue_write(c, head, (size_t)hl, copy, send_body ? len : 0);
    /* Inside dispatch the parsing loop goes on by itself; an answer given
     * later (from a worker's callback) restarts it. */
    if (was_deferred && !c->dispatching)
        resume(c);
    return rc;
nomem:
    free(head);
    if (owned)
        free(body);
    conn_close(c);
    return TB_E_NOMEM;
}

int tb_http_respond(struct tb_http_conn *c, int status, const char *ctype, const void *body,
                    size_t len, const char *extra_headers)
{
    return respond(c, status, ctype, (char *)body, len, false, extra_headers);
}

int tb_http_respond_owned(struct tb_http_conn *c, int status, const char *ctype, char *body,
                          size_t len, const char *extra_headers)
{
    return respond(c, status, ctype, body, len, true, extra_headers);
}

int tb_http_error(struct tb_http_conn *c, int status, const char *msg)
{
    char body[512];
    /* Messages are ours, but may quote a parameter: keep the JSON valid. */
    size_t o = 0;
    o += (size_t)snprintf(body, sizeof body, "{\"error\": \"");
    for (const char *p = msg; *p && o < sizeof body - 8; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            body[o++] = '\\', body[o++] = (char)ch;
        else if (ch >= 0x20 && ch < 0x7f)
            body[o++] = (char)ch;
        else
            body[o++] = '?';
    }
    o += (size_t)snprintf(body + o, sizeof body - o, "\"}\n");
    const char *extra = status == 405   ? "Allow: GET, HEAD\r\n"
                        : status == 503 ? "Retry-After: 1\r\n"
                                        : NULL;
    return tb_http_respond(c, status, "application/json", body, o, extra);
}

/* Answers what cannot be served (a malformed head, a timeout) and ends the
 * connection: the bytes that follow cannot be trusted to start a request. */
static void refuse(struct tb_http_conn *c, int status, const char *msg)
{
    c->close_after = true;
    c->responded = false;
    c->method = TB_HTTP_GET; /* an error body is always sent */
    c->body_left = 0;
    c->inlen = 0;
    tb_http_error(c, status, msg);
}

int tb_http_stream_begin(struct tb_http_conn *c)
{
    if (c->responded)
        return TB_E_INVAL;
    /* Streams never end by themselves: half the slots stay for requests. */
    if (c->srv->nstreams >= TB_MAX(1u, c->srv->max_conns / 2)) {
        tb_http_error(c, 503, "too many event streams");
        return TB_E_FULL;
    }
    c->responded = true;
    c->served++;
    c->srv->st.status[2]++;
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               SECURITY_HEADERS
                               "Connection: keep-alive\r\n\r\nretry: 2000\n\n";
    char *h = malloc(sizeof head);
    if (!h) {
        conn_close(c);
        return TB_E_NOMEM;
    }
    memcpy(h, head, sizeof head);
    c->streaming = true;
    c->inlen = 0;
    c->srv->nstreams++;
    uv_timer_stop(&c->timer);
    return queue_write(c, h, sizeof head - 1, NULL, 0);
}

int tb_http_stream_send(struct tb_http_conn *c, const char *event, const char *data)
{
    if (!c->streaming || c->closing)
        return TB_E_INVAL;
    /* A reader that stopped reading must not make us buffer without bound. */
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > TB_HTTP_STREAM_QUEUE_MAX) {
        conn_close(c);
        return TB_E_FULL;
    }
    size_t n = strlen(data) + (event ? strlen(event) : 0) + 32;
    char *m = malloc(n);
    if (!m)
        return TB_E_NOMEM;
    int len = event ? snprintf(m, n, "event: %s\ndata: %s\n\n", event, data)
                    : snprintf(m, n, "data: %s\n\n", data);
    return queue_write(c, m, (size_t)len, NULL, 0);
}

void tb_http_broadcast(struct tb_http *srv, const char *event, const char *data)
{
    struct tb_http_conn *c = srv->head, *next;
    for (; c; c = next) {
        next = c->next; /* sending may close c */
        if (c->streaming)
            tb_http_stream_send(c, event, data);
    }
}

unsigned tb_http_stream_count(const struct tb_http *srv)
{
    return srv->nstreams;
}

static void on_heartbeat(uv_timer_t *t)
{
    struct tb_http *srv = t->data;
    struct tb_http_conn *c = srv->head, *next;
    for (; c; c = next) {
        next = c->next;
        if (c->streaming && !c->closing) {
            char *m = strdup(": ping\n\n");
            if (m)
                queue_write(c, m, strlen(m), NULL, 0);
        }
    }
}

/* ---- requests ------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t)
{
    struct tb_http_conn *c = t->data;
    if (c->closing || c->deferred || c->streaming)
        return;
    if (!c->lingering && (c->req_start_ms || c->body_left)) {
        /* The request began but did not end in time (slowloris). */
        c->srv->st.timeouts++;
        c->srv->st.requests++;
        refuse(c, 408, "request not complete in time");
        return;
    }
    conn_close(c); /* idle, lingering, or a client not reading its answer */
}

static void consume(struct tb_http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

/* Copies what dispatch needs out of the head (whose bytes are about to be
 * consumed). */
static void take_head(struct tb_http_conn *c, const struct tb_http_head *h)
{
    struct tb_http *srv = c->srv;
    c->method = h->method;
    snprintf(c->method_name, sizeof c->method_name, "%s", h->method_name);
    c->keep_alive = h->keep_alive;
    c->host_ok = h->host ? tb_http_host_allowed(h->host, h->host_len, srv->allow_hosts,
                                                srv->nallow_hosts)
                         : true; /* HTTP/1.0 without Host: only an address can have been used */
    size_t o = 0;
    if (h->root_path)
        c->url[o++] = '/';
    memcpy(c->url + o, h->target, h->target_len);
    c->url_len = o + h->target_len;
    c->url[c->url_len] = '\0';
}

static void dispatch(struct tb_http_conn *c)
{
    struct tb_http *srv = c->srv;
    srv->st.requests++;
    c->req_start_ms = 0;
    c->responded = false;
    char path[TB_HTTP_URL_MAX + 2];
    const char *query = NULL;
    char *q = memchr(c->url, '?', c->url_len);
    char *hash = memchr(c->url, '#', c->url_len);
    if (hash)
        *hash = '\0'; /* a fragment is the client's business, never sent, never routed */
    size_t plen = q && (!hash || q < hash) ? (size_t)(q - c->url) : strlen(c->url);
    memcpy(path, c->url, plen);
    path[plen] = '\0';
    if (q && (!hash || q < hash))
        query = q + 1;
    struct tb_http_req r = {
        .method = c->method,
        .method_name = c->method_name,
        .path = path,
        .query = query,
        .keep_alive = c->keep_alive,
    };
    if (!c->keep_alive)
        c->close_after = true;
    c->dispatching = true;
    if (!c->host_ok) {
        c->close_after = true;
        tb_http_error(c, 403, "this server answers requests for its own address, localhost "
                              "or names given with --allow-host only");
    } else {
        srv->handler(srv->ud, c, &r);
        if (!c->responded && !c->deferred && !c->closing)
            tb_http_error(c, 500, "no response");
    }
    c->dispatching = false;
}

/* Parses and answers what the buffered input holds, as far as it may: not
 * past a deferred answer (pipelined requests wait so answers keep their
 * order), a stream start, or a closing answer. `parse` says whether the
 * parser may find something new (a line end arrived, or a request begins). */
static void process(struct tb_http_conn *c, bool parse)
{
    struct tb_http *srv = c->srv;
    while (!c->closing && !c->lingering && !c->close_after && !c->streaming && !c->deferred) {
        if (c->body_left) {
            size_t k = (size_t)TB_MIN(c->body_left, (uint64_t)c->inlen);
            consume(c, k);
            c->body_left -= k;
            if (c->body_left)
                break;
            dispatch(c);
            parse = true;
            continue;
        }
        if (!c->inlen)
            break;
        if (!c->req_start_ms) {
            c->req_start_ms = TB_MAX(now_ms(srv), 1);
            arm(c, srv->request_ms);
            parse = true;
        }
        if (!parse && c->inlen <= TB_HTTP_HEAD_MAX)
            break;
        struct tb_http_head h;
        long r = tb_http_parse_head(c->in, c->inlen, &h);
        if (r == 0)
            break;
        if (r < 0) {
            srv->st.requests++;
            int st = (int)-r;
            refuse(c, st, st == 400 ? "malformed request" : tb_http_reason(st));
            return;
        }
        take_head(c, &h);
        consume(c, (size_t)r);
        c->body_left = h.content_length;
        parse = true;
        if (!c->body_left)
            dispatch(c);
    }
    if (c->closing)
        return;
    if (c->deferred) {
        uv_timer_stop(&c->timer); /* waiting on us is not idling */
        set_reading(c, false);
        return;
    }
    if (!c->lingering && !c->close_after && !c->streaming && !c->inlen && !c->body_left) {
        c->req_start_ms = 0;
        arm(c, srv->idle_ms);
    }
    set_reading(c, true);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct tb_http_conn *c = h->data;
    (void)suggested;
    /* What is read after the last answer of a closing connection, or from an
     * event stream's client, is discarded: it lands over the dead buffer. */
    if (c->lingering || c->streaming || c->close_after)
        *buf = uv_buf_init(c->in, sizeof c->in);
    else
        *buf = uv_buf_init(c->in + c->inlen, (unsigned)(sizeof c->in - c->inlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct tb_http_conn *c = s->data;
    if (c->closing)
        return;
    if (nread < 0) {
        /* The client is done sending (or gone). Answers still being written
         * go out first; a request it did not finish is not one. */
        c->eof = true;
        set_reading(c, false);
        if (nread != UV_EOF || (!c->pending_writes && !c->deferred) || c->lingering)
            conn_close(c);
        return;
    }
    if (nread == 0 || c->lingering || c->streaming || c->close_after)
        return;
    touch(c);
    bool line = memchr(buf->base, '\n', (size_t)nread) != NULL;
    c->inlen += (size_t)nread;
    process(c, line);
}

/* The deferred response is out: parse what was pipelined behind it, then
 * read again. */
static void resume(struct tb_http_conn *c)
{
    if (c->closing)
        return;
    process(c, true);
    if (c->eof && !c->deferred && !c->pending_writes && !c->lingering)
        conn_close(c);
}

void tb_http_defer(struct tb_http_conn *c)
{
    c->deferred = true;
    c->holds++;
}

void tb_http_release(struct tb_http_conn *c)
{
    c->holds--;
    if (c->closing)
        conn_free_if_done(c);
}

bool tb_http_conn_alive(const struct tb_http_conn *c)
{
    return !c->closing;
}

/* ---- slots and accepting --------------------------------------------------------- */

static size_t unread_bytes(struct tb_http_conn *c)
{
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0 || ioctl(fd, FIONREAD, &n) < 0)
        return 1; /* unknown: assume something is there */
    return (size_t)n;
}

/* Frees a slot for a newcomer if one can be freed without losing a request
 * (see the file comment). Returns whether a slot is free now. */
static bool make_room(struct tb_http *srv)
{
    if (srv->nconns < srv->max_conns)
        return true;
    uint64_t now = now_ms(srv);
    struct tb_http_conn *slow = NULL;
    for (struct tb_http_conn *c = srv->head; c; c = c->next) {
        if (c->streaming || c->deferred || c->dispatching || c->pending_writes || c->closing ||
            c->close_after || c->lingering)
            continue;
        if (c->inlen || c->body_left) {
            if (!slow && c->req_start_ms && now - c->req_start_ms >= FRESH_GRACE_MS)
                slow = c;
            continue;
        }
        if ((c->served || now - c->accepted_ms >= FRESH_GRACE_MS) && !unread_bytes(c)) {
            srv->st.evicted++;
            conn_close(c);
            return true;
        }
    }
    if (slow) {
        srv->st.timeouts++;
        srv->st.requests++;
        refuse(slow, 408, "request not complete in time (the server is busy)");
        return srv->nconns < srv->max_conns;
    }
    return false;
}

static void accept_one(struct tb_http *srv)
{
    struct tb_http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return; /* libuv keeps the connection; the retry timer tries again */
    c->srv = srv;
    if (uv_tcp_init(srv->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->keep_alive = true;
    c->host_ok = true;
    srv->refs++;
    list_append(c);
    srv->nconns++;
    srv->waiting = false;
    if (uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    srv->st.accepted++;
    c->accepted_ms = now_ms(srv);
    uv_tcp_nodelay(&c->tcp, 1);
    arm(c, srv->idle_ms);
    set_reading(c, true);
}

static void on_retry(uv_timer_t *t)
{
    try_accept(t->data);
}

static void try_accept(struct tb_http *srv)
{
    if (!srv->waiting || srv->closing || srv->in_accept)
        return;
    srv->in_accept = true;
    if (make_room(srv)) {
        uv_timer_stop(&srv->retry);
        accept_one(srv);
    } else if (!uv_is_active((uv_handle_t *)&srv->retry)) {
        uv_timer_start(&srv->retry, on_retry, ACCEPT_RETRY_MS, ACCEPT_RETRY_MS);
    }
    srv->in_accept = false;
}

static void on_connection(uv_stream_t *l, int status)
{
    struct tb_http *srv = l->data;
    if (status < 0 || srv->closing)
        return;
    srv->waiting = true;
    if (srv->nconns >= srv->max_conns)
        srv->st.queued++;
    try_accept(srv);
}

void tb_http_stats(const struct tb_http *srv, struct tb_http_stats *out)
{
    *out = srv->st;
}

bool tb_http_addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(&s6->sin6_addr, &in6addr_loopback, 16))
            return true;
        return !memcmp(&s6->sin6_addr, v4mapped, 12) && s6->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

/* "127.0.0.1:8080", "[::1]:8080", "localhost:8080", ":8080" or "8080". */
static int parse_listen(const char *s, struct sockaddr_storage *ss)
{
    char host[64];
    const char *port;
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (!e || (size_t)(e - s - 1) >= sizeof host || e[1] != ':')
            return TB_E_INVAL;
        memcpy(host, s + 1, (size_t)(e - s - 1));
        host[e - s - 1] = '\0';
        port = e + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon) {
            snprintf(host, sizeof host, "127.0.0.1");
            port = s;
        } else {
            if ((size_t)(colon - s) >= sizeof host)
                return TB_E_INVAL;
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = '\0';
            port = colon + 1;
        }
    }
    if (!host[0] || !strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    char *end;
    errno = 0;
    long p = strtol(port, &end, 10);
    if (!*port || *end || errno || p < 0 || p > 65535)
        return TB_E_INVAL;
    memset(ss, 0, sizeof *ss);
    if (uv_ip4_addr(host, (int)p, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)p, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return TB_E_INVAL;
}

static void on_srv_handle_closed(uv_handle_t *h)
{
    srv_unref(h->data);
}

int tb_http_new(struct tb_http **out, uv_loop_t *loop, const struct tb_http_opts *o,
                tb_http_handler handler, void *ud, char *errbuf, size_t errlen)
{
    struct sockaddr_storage ss;
    const char *addr = o->listen ? o->listen : "127.0.0.1:8080";
    if (parse_listen(addr, &ss) < 0) {
        snprintf(errbuf, errlen, "listen address '%s': expected HOST:PORT (e.g. 127.0.0.1:8080)",
                 addr);
        return TB_E_INVAL;
    }
    if (!o->allow_remote && !tb_http_addr_is_loopback((struct sockaddr *)&ss)) {
        snprintf(errbuf, errlen,
                 "listen address '%s' is not a loopback address (add --allow-remote to serve "
                 "the network)", addr);
        return TB_E_PERM;
    }
    struct tb_http *srv = calloc(1, sizeof *srv);
    if (!srv) {
        snprintf(errbuf, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    srv->loop = loop;
    srv->handler = handler;
    srv->ud = ud;
    srv->max_conns = o->max_conns ? o->max_conns : 256;
    srv->idle_ms = o->idle_ms ? o->idle_ms : 30000;
    srv->request_ms = o->request_ms ? o->request_ms : 10000;
    srv->allow_hosts = o->allow_hosts;
    srv->nallow_hosts = o->nallow_hosts;
    uv_tcp_init(loop, &srv->listener);
    uv_timer_init(loop, &srv->heartbeat);
    uv_timer_init(loop, &srv->retry);
    srv->listener.data = srv;
    srv->heartbeat.data = srv;
    srv->retry.data = srv;
    srv->refs = 3;
    int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, LISTEN_BACKLOG, on_connection);
    if (rc < 0) {
        snprintf(errbuf, errlen, "listen address '%s': %s", addr, uv_strerror(rc));
        srv->closing = true;
        uv_close((uv_handle_t *)&srv->listener, on_srv_handle_closed);
        uv_close((uv_handle_t *)&srv->heartbeat, on_srv_handle_closed);
        uv_close((uv_handle_t *)&srv->retry, on_srv_handle_closed);
        return rc == UV_EACCES ? TB_E_PERM : TB_E_IO;
    }
    /* A client that vanishes before its answer is written makes write(2)
     * raise SIGPIPE, whose default action would end the process — and a live
     * capture serving the dashboard with it. Ignored, the write fails with
     * EPIPE and only that connection closes (libuv leaves this to us). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    /* Slots, lingering connections and the database need descriptors; the
     * common soft limit of 1024 is below what a burst can ask for, and
     * libuv's answer to EMFILE is to close pending connections unanswered. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    char ip[INET6_ADDRSTRLEN] = "?";
    if (bound.ss_family == AF_INET) {
        const struct sockaddr_in *b4 = (const struct sockaddr_in *)&bound;
        uv_ip4_name(b4, ip, sizeof ip);
        srv->port = ntohs(b4->sin_port);
        snprintf(srv->bound, sizeof srv->bound, "%s:%d", ip, srv->port);
    } else {
        const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&bound;
        uv_ip6_name(b6, ip, sizeof ip);
        srv->port = ntohs(b6->sin6_port);
        snprintf(srv->bound, sizeof srv->bound, "[%s]:%d", ip, srv->port);
    }
    uv_timer_start(&srv->heartbeat, on_heartbeat, HEARTBEAT_MS, HEARTBEAT_MS);
    *out = srv;
    return 0;
}

void tb_http_close(struct tb_http *srv)
{
    if (!srv || srv->closing)
        return;
    srv->closing = true;
    while (srv->head)
        conn_close(srv->head);
    uv_close((uv_handle_t *)&srv->listener, on_srv_handle_closed);
    uv_close((uv_handle_t *)&srv->heartbeat, on_srv_handle_closed);
    uv_close((uv_handle_t *)&srv->retry, on_srv_handle_closed);
}

const char *tb_http_bound(const struct tb_http *srv)
{
    return srv->bound;
}

int tb_http_port(const struct tb_http *srv)
{
    return srv->port;
}

unsigned tb_http_conn_count(const struct tb_http *srv)
{
    return srv->nconns;
}

/* ---- URL helpers ---------------------------------------------------------------- */

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

long tb_http_unescape(const char *src, size_t n, char *dst, size_t dstlen, bool plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)src[i];
        if (ch == '%') {
            if (n - i < 3)
                return -1;
            int hi = hexval((unsigned char)src[i + 1]), lo = hexval((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            ch = hi * 16 + lo;
            if (ch == 0)
                return -1;
            i += 2;
        } else if (ch == '+' && plus_is_space) {
            ch = ' ';
        }
        if (o + 1 >= dstlen)
            return -1;
        dst[o++] = (char)ch;
    }
    if (o >= dstlen)
        return -1;
    dst[o] = '\0';
    return (long)o;
}

int tb_http_query_get(const char *query, const char *key, char *dst, size_t dstlen)
{
    if (!query)
        return 0;
    size_t klen = strlen(key);
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t plen = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', plen);
        size_t nlen = eq ? (size_t)(eq - p) : plen;
        if (nlen == klen && !memcmp(p, key, klen)) {
            const char *v = eq ? eq + 1 : p + plen;
            size_t vlen = eq ? plen - nlen - 1 : 0;
            return tb_http_unescape(v, vlen, dst, dstlen, true) < 0 ? -1 : 1;
        }
        p += plen;
        if (*p == '&')
            p++;
    }
    return 0;
}
