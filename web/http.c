/* SPDX-License-Identifier: MIT */
/* http.c — HTTP/1.1 server on libuv with http_parser: keep-alive, limits,
 * connection cap with LRU eviction, idle timeouts and Server-Sent Events. */
#include "http-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINGER_MS 1000       /* after the last response of a closing connection */
#define HEARTBEAT_MS 15000   /* SSE comment lines keep proxies and browsers from timing out */

struct tb_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t heartbeat;
    tb_http_handler handler;
    void *ud;
    unsigned max_conns;
    uint64_t idle_ms;
    /* All connections, least recently active first: the head is the one to
     * evict when the cap is reached, so a flood of idle sockets can never lock
     * out a client that actually sends a request. */
    struct tb_http_conn *head, *tail;
    unsigned nconns, nstreams;
    unsigned refs; /* open server handles + live connections; freed at 0 */
    bool closing;
    char bound[64];
    int port;
};

struct tb_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    struct tb_http *srv;
    struct tb_http_conn *prev, *next;
    http_parser parser;
    enum tb_http_method method;
    size_t head_bytes, body_bytes, url_len;
    unsigned pending_writes;
    int fail_status;      /* set by a callback that aborted the parser on a limit */
    int open_handles;
    int holds;            /* deferred responses in flight (tb_http_defer) */
    bool in_list, streaming, close_after, lingering, closing, responded, deferred;
    /* Pipelined bytes that arrived behind a deferred request: parsed once its
     * response is out, so responses keep the order of the requests. */
    char *pending;
    size_t npending;
    char url[TB_HTTP_URL_MAX + 1];
    char rbuf[16384];
};

struct wreq {
    uv_write_t req;
    struct tb_http_conn *c;
    char *a, *b;
};

static void conn_close(struct tb_http_conn *c);

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
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static void srv_unref(struct tb_http *srv)
{
    if (--srv->refs == 0)
        free(srv);
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
    list_unlink(c);
    list_append(c);
    if (!c->streaming && !c->lingering)
        uv_timer_again(&c->timer);
}

/* ---- closing ---------------------------------------------------------------- */

static void conn_free_if_done(struct tb_http_conn *c)
{
    if (c->open_handles > 0 || c->holds > 0)
        return;
    struct tb_http *srv = c->srv;
    free(c->pending);
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
    c->closing = true;
    list_unlink(c);
    c->srv->nconns--;
    if (c->streaming)
        c->srv->nstreams--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_timer(uv_timer_t *t)
{
    conn_close(t->data);
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
 * the 4xx that explains why. */
static void begin_linger(struct tb_http_conn *c)
{
    if (c->lingering || c->closing)
        return;
    c->lingering = true;
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timer, LINGER_MS, 0);
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
        conn_close(c);
        return;
    }
    if (c->close_after && c->pending_writes == 0)
        begin_linger(c);
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
        if (c->close_after && c->pending_writes == 0)
            begin_linger(c);
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
    if (c->responded) {
        if (owned)
            free(body);
        return TB_E_INVAL;
    }
    c->responded = true;
    /* Parse errors set close_after themselves (the rest of the byte stream
     * cannot be trusted); a well-formed request answered 4xx keeps the
     * connection, as does a 405 whose body the parser has consumed. */
    if (status >= 500)
        c->close_after = true;
    char *head = malloc(512 + (extra ? strlen(extra) : 0));
    char *copy = NULL;
    if (!head)
        goto nomem;
    int hl = sprintf(head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Connection: %s\r\n%s\r\n",
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
    int rc = queue_write(c, head, (size_t)hl, copy, send_body ? len : 0);
    if (c->deferred) {
        c->deferred = false;
        resume(c);
    }
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
    return tb_http_respond(c, status, "application/json", body, o,
                           status == 405 ? "Allow: GET, HEAD\r\n" : NULL);
}

int tb_http_stream_begin(struct tb_http_conn *c)
{
    if (c->responded)
        return TB_E_INVAL;
    c->responded = true;
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                               "Connection: keep-alive\r\n\r\nretry: 2000\n\n";
    char *h = malloc(sizeof head);
    if (!h) {
        conn_close(c);
        return TB_E_NOMEM;
    }
    memcpy(h, head, sizeof head);
    c->streaming = true;
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

/* ---- parsing ------------------------------------------------------------------ */

static int on_message_begin(http_parser *p)
{
    struct tb_http_conn *c = p->data;
    c->url_len = 0;
    c->head_bytes = 0;
    c->body_bytes = 0;
    c->responded = false;
    c->method = TB_HTTP_GET;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct tb_http_conn *c = p->data;
    c->head_bytes += len;
    if (len > TB_HTTP_URL_MAX - c->url_len) {
        c->fail_status = 414;
        return 1;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

static int on_header_part(http_parser *p, const char *at, size_t len)
{
    struct tb_http_conn *c = p->data;
    (void)at;
    c->head_bytes += len + 4; /* ": " and CRLF count against the limit too */
    if (c->head_bytes > TB_HTTP_HEAD_MAX) {
        c->fail_status = 431;
        return 1;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct tb_http_conn *c = p->data;
    if (p->method == HTTP_GET)
        c->method = TB_HTTP_GET;
    else if (p->method == HTTP_HEAD)
        c->method = TB_HTTP_HEAD;
    else
        c->method = TB_HTTP_OTHER;
    /* Announced bodies beyond the limit are refused before a byte is read. */
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > TB_HTTP_BODY_MAX) {
        c->fail_status = 413;
        return -1;
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct tb_http_conn *c = p->data;
    (void)at;
    c->body_bytes += len;
    if (c->body_bytes > TB_HTTP_BODY_MAX) {
        c->fail_status = 413;
        return 1;
    }
    return 0;
}

static void dispatch(struct tb_http_conn *c)
{
    http_parser *p = &c->parser;
    c->url[c->url_len] = '\0';
    struct http_parser_url u;
    http_parser_url_init(&u);
    char path[TB_HTTP_URL_MAX + 1], query[TB_HTTP_URL_MAX + 1];
    struct tb_http_req r = {
        .method = c->method,
        .method_name = http_method_str((enum http_method)p->method),
        .path = path,
        .query = NULL,
        .keep_alive = http_should_keep_alive(p) != 0,
    };
    if (!r.keep_alive)
        c->close_after = true;
    if (http_parser_parse_url(c->url, c->url_len, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH))) {
        tb_http_error(c, 400, "malformed request target");
        return;
    }
    memcpy(path, c->url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    path[u.field_data[UF_PATH].len] = '\0';
    if (u.field_set & (1 << UF_QUERY)) {
        memcpy(query, c->url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
        query[u.field_data[UF_QUERY].len] = '\0';
        r.query = query;
    }
    c->srv->handler(c->srv->ud, c, &r);
    if (!c->responded && !c->deferred)
        tb_http_error(c, 500, "no response");
}

static int on_message_complete(http_parser *p)
{
    struct tb_http_conn *c = p->data;
    dispatch(c);
    /* Nothing after a closing response or a stream start is parsed; after a
     * deferred one, nothing until it is sent. */
    if (c->close_after || c->streaming || c->closing || c->deferred)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_part,
    .on_header_value = on_header_part,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct tb_http_conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Parses n bytes of the connection's input and answers what they complete. */
static void feed(struct tb_http_conn *c, const char *data, size_t n)
{
    size_t parsed = http_parser_execute(&c->parser, &settings, data, n);
    enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
    if (c->closing)
        return;
    if (err == HPE_PAUSED) {
        if (c->deferred) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            if (parsed < n) {
                char *p = malloc(n - parsed);
                if (!p) {
                    conn_close(c);
                    return;
                }
                memcpy(p, data + parsed, n - parsed);
                free(c->pending);
                c->pending = p;
                c->npending = n - parsed;
            }
        }
        return;
    }
    if (err != HPE_OK) {
        int st = c->fail_status ? c->fail_status : 400;
        c->responded = false;
        c->close_after = true;
        c->method = TB_HTTP_GET; /* an error body is always sent */
        char msg[96];
        snprintf(msg, sizeof msg, "%s", st == 400 ? http_errno_description(err)
                                               : tb_http_reason(st));
        tb_http_error(c, st, msg);
        return;
    }
    if (c->parser.upgrade) {
        /* Protocol switches (WebSocket) are not offered: the request was
         * answered as plain HTTP, and the connection ends there. */
        c->close_after = true;
        if (c->pending_writes == 0)
            begin_linger(c);
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct tb_http_conn *c = s->data;
    (void)buf;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    /* Streams and closing connections have said all they may say. */
    if (c->lingering || c->streaming || c->close_after || c->deferred)
        return;
    touch(c);
    feed(c, c->rbuf, (size_t)nread);
}

/* The deferred response is out: parse what was pipelined behind it, then
 * read again. */
static void resume(struct tb_http_conn *c)
{
    if (c->closing || c->lingering || c->close_after || c->streaming)
        return;
    http_parser_pause(&c->parser, 0);
    if (c->npending) {
        char *p = c->pending;
        size_t n = c->npending;
        c->pending = NULL;
        c->npending = 0;
        feed(c, p, n);
        free(p);
        if (c->closing || c->deferred)
            return;
    }
    if (!c->lingering && !c->close_after && !c->streaming) {
        uv_timer_start(&c->timer, on_timer, c->srv->idle_ms, c->srv->idle_ms);
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
}

void tb_http_defer(struct tb_http_conn *c)
{
    c->deferred = true;
    c->holds++;
    uv_timer_stop(&c->timer); /* waiting on us is not idling */
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

/* ---- accepting ---------------------------------------------------------------- */

static void on_connection(uv_stream_t *l, int status)
{
    struct tb_http *srv = l->data;
    if (status < 0 || srv->closing)
        return;
    if (srv->nconns >= srv->max_conns) {
        struct tb_http_conn *v = srv->head;
        while (v && (v->streaming || v->closing))
            v = v->next;
        if (v)
            conn_close(v);
    }
    struct tb_http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = srv;
    if (uv_tcp_init(srv->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    srv->refs++;
    srv->nconns++;
    list_append(c);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    if (srv->nconns > srv->max_conns) {
        /* Every slot is an event stream: refuse rather than grow. */
        c->method = TB_HTTP_GET;
        c->close_after = true;
        tb_http_error(c, 503, "too many connections");
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, on_timer, srv->idle_ms, srv->idle_ms);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
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
    uv_tcp_init(loop, &srv->listener);
    uv_timer_init(loop, &srv->heartbeat);
    srv->listener.data = srv;
    srv->heartbeat.data = srv;
    srv->refs = 2;
    int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
    if (rc < 0) {
        snprintf(errbuf, errlen, "listen address '%s': %s", addr, uv_strerror(rc));
        srv->closing = true;
        uv_close((uv_handle_t *)&srv->listener, on_srv_handle_closed);
        uv_close((uv_handle_t *)&srv->heartbeat, on_srv_handle_closed);
        return rc == UV_EACCES ? TB_E_PERM : TB_E_IO;
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
