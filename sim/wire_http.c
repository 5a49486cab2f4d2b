/* SPDX-License-Identifier: MIT */
/* wire_http.c — HTTP/1.1 for tbneck-sim (RFC 9112 message syntax, RFC 9110
 * semantics): one request and one response per exchange on a persistent
 * connection.
 *
 *   request:  METHOD SP TARGET SP "HTTP/1.1" CRLF
 *             Host, User-Agent, Accept, [Connection: close],
 *             [Content-Type, Content-Length] CRLF [form body]
 *   response: "HTTP/1.1" SP STATUS SP REASON CRLF
 *             Date, Server, [Content-Type, Content-Length], Connection CRLF
 *             [body: none for HEAD, 204 and 304] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire.h"

/* The Date header changes once a second: formatted once per second. */
struct http_state {
    time_t date_sec;
    char date[40];
};

static int http_setup(struct sim_wire_ctx *w, void **state)
{
    TB_UNUSED(w);
    *state = calloc(1, sizeof(struct http_state));
    return *state ? 0 : TB_E_NOMEM;
}

/* RFC 9110 IMF-fixdate of the simulated time. */
static const char *http_date(struct http_state *h, int64_t ns)
{
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const mo[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t s = (time_t)(ns / TB_NS_PER_SEC);
    if (s != h->date_sec || !h->date[0]) {
        struct tm tm;
        gmtime_r(&s, &tm);
        snprintf(h->date, sizeof h->date, "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[tm.tm_wday],
                 tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        h->date_sec = s;
    }
    return h->date;
}

static void http_body(struct sim_wire_ctx *w, struct sim_buf *b, size_t n)
{
    static const char head[] = "<html><body>", tail[] = "</body></html>\n";
    size_t hl = sizeof head - 1, tl = sizeof tail - 1;
    if (n < hl + tl) {
        sim_buf_put(b, w->filler, n);
        return;
    }
    sim_buf_put(b, head, hl);
    for (size_t left = n - hl - tl; left;) {
        size_t k = TB_MIN(left, w->filler_len);
        sim_buf_put(b, w->filler, k);
        left -= k;
    }
    sim_buf_put(b, tail, tl);
}

static void http_request(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r)
{
    TB_UNUSED(state);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    const struct sim_tier_conf *t = &w->c->tiers[r->tier];
    char target[512];
    sim_wire_fill(w, cl->tmpl[r->tier], target, sizeof target);
    struct sim_buf *b = w->msg;
    sim_buf_str(b, cl->method);
    sim_buf_put(b, " ", 1);
    sim_buf_str(b, target);
    sim_buf_str(b, " HTTP/1.1\r\nHost: ");
    sim_buf_str(b, t->host);
    if (t->port != 80) {
        sim_buf_put(b, ":", 1);
        sim_buf_u64(b, t->port);
    }
    sim_buf_str(b, "\r\nUser-Agent: ");
    sim_buf_str(b, r->tier == 0 ? "Mozilla/5.0 (X11; Linux x86_64) tbneck-sim/0.1"
                                : "Apache-HttpClient/4.5 (tbneck-sim)");
    sim_buf_str(b, "\r\nAccept: text/html,*/*\r\n");
    if (r->close)
        sim_buf_str(b, "Connection: close\r\n");
    if (cl->req_body)
        sim_buf_fmt(b, "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n",
                    cl->req_body);
    sim_buf_str(b, "\r\n");
    if (cl->req_body) {
        static const char form[] = "comment=";
        size_t k = TB_MIN((size_t)cl->req_body, sizeof form - 1);
        sim_buf_put(b, form, k);
        for (size_t left = (size_t)cl->req_body - k; left;) {
            size_t n = TB_MIN(left, (size_t)26);
            sim_buf_put(b, "abcdefghijklmnopqrstuvwxyz", n);
            left -= n;
        }
    }
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

static void http_response(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r,
                          int64_t now)
{
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    double sz = sim_dist_sample(&cl->resp_bytes[r->tier], w->rng);
    /* No body for HEAD, 204 and 304, as RFC 9110 requires. */
    bool head = !strcmp(cl->method, "HEAD");
    bool nobody = head || cl->status == 204 || cl->status == 304;
    size_t n = nobody ? 0 : (size_t)llround(sz);
    const char *date = http_date(state, now);
    struct sim_buf *b = w->msg;
    sim_buf_str(b, "HTTP/1.1 ");
    sim_buf_u64(b, (uint64_t)cl->status);
    sim_buf_put(b, " ", 1);
    sim_buf_str(b, reason(cl->status));
    sim_buf_str(b, "\r\nDate: ");
    sim_buf_str(b, date);
    sim_buf_str(b, r->tier == 0 ? "\r\nServer: Apache/2.4.57 (Debian)\r\n"
                                : "\r\nServer: Apache-Coyote/1.1\r\n");
    if (cl->status != 204 && cl->status != 304) {
        /* HEAD carries the Content-Length a GET would have. */
        sim_buf_str(b, "Content-Type: text/html;charset=UTF-8\r\nContent-Length: ");
        sim_buf_u64(b, head ? (uint64_t)llround(sz) : n);
        sim_buf_str(b, "\r\n");
    }
    sim_buf_str(b, r->close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
    http_body(w, b, n);
    r->status = cl->status;
}

/* The rule: METHOD, a space and the path template up to its query ('?') or
 * fragment ('#'), with {id} and {n} written {id}, as tbneck folds numbers in
 * a path. {ids} and {word} in the path give no fixed class. */
static int http_expect(const struct sim_conf *c, int cls, int tier, char *out, size_t cap,
                       char *why, size_t whylen)
{
    static const struct sim_subst rule[] = {
        {"{id}", "{id}"}, {"{n}", "{id}"}, {"{ids}", NULL}, {"{word}", NULL}};
    const struct sim_class_conf *cl = &c->classes[cls];
    snprintf(out, cap, "%s ", cl->method);
    const struct sim_subst *bad =
        sim_wire_subst(cl->tmpl[tier], "?#", rule, TB_ARRAY_SIZE(rule), out, cap);
    if (bad) {
        snprintf(why, whylen, "path '%s' has %s before its query, which gives no fixed class",
                 cl->tmpl[tier], bad->ph);
        return TB_E_INVAL;
    }
    return 0;
}

/* A request target in origin form: '/' first, no spaces or controls. */
static int http_check(const char *tmpl, char *why, size_t whylen)
{
    if (tmpl[0] != '/') {
        snprintf(why, whylen, "'%s' must start with '/'", tmpl);
        return TB_E_INVAL;
    }
    for (const char *p = tmpl; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            snprintf(why, whylen, "spaces and control characters are not allowed");
            return TB_E_INVAL;
        }
    return 0;
}

const struct sim_wire sim_wire_http = {
    .name = "http",
    .port = 80,
    .flags = SIM_WIRE_FRONT,
    .tmpl_key = "path",
    .tmpl_default = "/{class}/{id}",
    .tmpl_check = http_check,
    .setup = http_setup,
    .request = http_request,
    .response = http_response,
    .expect = http_expect,
};
