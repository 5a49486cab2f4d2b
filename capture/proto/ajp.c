/* SPDX-License-Identifier: MIT */
/* ajp.c — Apache JServ Protocol 1.3 (AJP13): a web server (Apache httpd
 * mod_proxy_ajp, mod_jk) forwarding HTTP requests to a servlet container
 * (Tomcat's AJP connector). Specification: "The Apache Tomcat Connectors — AJP
 * Protocol Reference, AJPv13" (https://tomcat.apache.org/connectors-doc/ajp/ajpv13a.html).
 *
 * Every message is one packet; integers are big-endian:
 *
 *   web server → container   0x12 0x34  int<2> length  payload[length]
 *   container → web server   'A'  'B'   int<2> length  payload[length]
 *
 * A string is int<2> n, n bytes and a NUL (n = 0xffff: a null string, nothing
 * follows). The first payload byte names the message, except in request body
 * packets. A connection carries one request at a time (no pipelining):
 *
 *   Forward Request  0x02 method(1) protocol req_uri remote_addr remote_host
 *                    server_name int<2> port bool is_ssl int<2> n
 *                    n × (header name: int<2> 0xA0xx code, or a string; value string)
 *                    attributes (code(1) value…) 0xff
 *   request body     int<2> n, n bytes (the first one follows the Forward
 *                    Request unasked when Content-Length > 0; the rest answer
 *                    Get Body Chunk; an empty one ends the body)
 *   Get Body Chunk   0x06 int<2> size               (container asks for body)
 *   Send Headers     0x04 int<2> status string reason int<2> n headers…
 *   Send Body Chunk  0x03 int<2> n bytes[n] (Tomcat adds a NUL)
 *   End Response     0x05 bool reuse                ← the exchange ends here
 *   CPing 0x0a → CPong 0x09; Shutdown 0x07, Ping 0x08 (no answer)
 *
 * An exchange runs from the first byte of a Forward Request to the last byte
 * of its End Response; status is the Send Headers status (-1 when none came);
 * the class is the HTTP method and the fingerprinted req_uri, as for HTTP/1.x
 * (the query string travels as an attribute and is never part of it). A method
 * without a code (PATCH, …) is sent as 0xff with the method name in the
 * stored-method attribute (0x0d), read from the attributes. CPing/CPong is a
 * health probe the web server sends before a request (mod_proxy_ajp's ping=,
 * mod_jk's ping_mode): it is not a request of the application and is not
 * reported, so counts match the container's access log.
 */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"
#include "rd.h"

#define AJP_HEAD_MAX 8192u /* Forward Request bytes kept (the default max packet size) */
#define AJP_PROTO_MAX 32u  /* "HTTP/1.1": longer protocol strings are not AJP */

enum {
    T_FORWARD = 0x02, T_SEND_BODY = 0x03, T_SEND_HEADERS = 0x04, T_END = 0x05,
    T_GET_BODY = 0x06, T_SHUTDOWN = 0x07, T_PING = 0x08, T_CPONG = 0x09, T_CPING = 0x0a,
};

/* Method codes 1..27 (the reference's table), 0xff = stored in an attribute. */
static const char *const methods[] = {
    NULL,     "OPTIONS",  "GET",     "HEAD",      "POST",            "PUT",
    "DELETE", "TRACE",    "PROPFIND", "PROPPATCH", "MKCOL",          "COPY",
    "MOVE",   "LOCK",     "UNLOCK",  "ACL",       "REPORT",          "VERSION-CONTROL",
    "CHECKIN", "CHECKOUT", "UNCHECKOUT", "SEARCH", "MKWORKSPACE",    "UPDATE",
    "LABEL",  "MERGE",    "BASELINE-CONTROL", "MKACTIVITY",
};
#define M_STORED 0xff
#define A_SSL_KEY_SIZE 0x0b /* its value is an int<2>, every other a string */
#define A_REQ_ATTRIBUTE 0x0a /* a name and a value */
#define A_STORED_METHOD 0x0d
#define A_DONE 0xff

struct ajp_dir {
    uint8_t hdr[4];
    uint8_t hdr_have;
    bool synced;
    bool in_pkt;
    bool gap;       /* a hole inside the current packet */
    bool head_cut;  /* ... before the end of the collected head */
    uint16_t len;   /* payload length of the current packet */
    uint16_t left;  /* payload bytes still to come */
    uint16_t head_len;
    int64_t ts0;    /* chunk that carried the packet's first byte */
};

struct ajp {
    struct ajp_dir d[2];
    struct tb__pend_cls *x; /* the exchange, while `open` (allocated at the first
                             * request: an idle connection holds no class buffer) */
    bool open;
    bool lost;      /* its response lost its framing in a hole */
    bool stopped;
    int32_t status;
    uint8_t *cbuf;  /* client payload head when a packet straddles chunks (AJP_HEAD_MAX) */
    uint8_t shead[8];
};

/* ---- message contents ------------------------------------------------- */

/* A string: *s and *n give its bytes (NULL for a null string). */
static bool rd_str(struct tb_rd *r, const uint8_t **s, uint16_t *n)
{
    uint16_t k;
    if (!tb_rd_be16(r, &k))
        return false;
    if (k == 0xffff) {
        *s = NULL;
        *n = 0;
        return true;
    }
    if (!tb_rd_has(r, (size_t)k + 1)) {
        r->p -= 2;
        return false;
    }
    *s = r->p;
    *n = k;
    r->p += (size_t)k + 1;
    return true;
}

static bool rd_skip_str(struct tb_rd *r)
{
    const uint8_t *s;
    uint16_t n;
    return rd_str(r, &s, &n);
}

/* Does a Forward Request start here? Checked as far as the bytes go: the
 * prefix code, a method code, and a protocol string "HTTP/…" with its NUL. */
static bool fwd_plausible(const uint8_t *p, size_t n, bool need_all)
{
    if (n < 2 || p[0] != T_FORWARD || (p[1] == 0 || (p[1] >= TB_ARRAY_SIZE(methods) &&
                                                     p[1] != M_STORED)))
        return false;
    if (n < 4)
        return !need_all;
    size_t k = (size_t)p[2] << 8 | p[3];
    if (k < 5 || k > AJP_PROTO_MAX)
        return false;
    size_t have = TB_MIN(n - 4, k + 1);
    if (need_all && have < k + 1)
        return false;
    if (memcmp(p + 4, "HTTP/", TB_MIN(have, (size_t)5)) != 0)
        return false;
    for (size_t i = 5; i < have && i < k; i++)
        if (p[4 + i] < 0x21 || p[4 + i] > 0x7e)
            return false;
    return have < k + 1 || p[4 + k] == 0;
}

/* The class of a Forward Request from its (perhaps partial) payload head.
 * Returns false when even the method and URI cannot be read. */
static bool fwd_class(struct tb__pend_cls *e, const uint8_t *h, size_t hl)
{
    struct tb_rd r = tb_rd_make(h, hl);
    uint8_t code, m;
    const uint8_t *proto, *uri;
    uint16_t plen, ulen;
    if (!tb_rd_u8(&r, &code) || !tb_rd_u8(&r, &m) || !rd_str(&r, &proto, &plen) ||
        !rd_str(&r, &uri, &ulen))
        return false;
    const char *mname = m < TB_ARRAY_SIZE(methods) ? methods[m] : NULL;
    size_t mlen = mname ? strlen(mname) : 0;
    if (m == M_STORED) {
        /* The method name is an attribute, after the request headers. */
        uint16_t port, nh;
        uint8_t ssl;
        bool ok = rd_skip_str(&r) && rd_skip_str(&r) && rd_skip_str(&r) &&
                  tb_rd_be16(&r, &port) && tb_rd_u8(&r, &ssl) && tb_rd_be16(&r, &nh);
        for (uint16_t i = 0; ok && i < nh; i++) {
            uint16_t v;
            struct tb_rd save = r;
            ok = tb_rd_be16(&r, &v);
            if (ok && v < 0xa000) {
                r = save; /* a name spelled out */
                ok = rd_skip_str(&r);
            }
            ok = ok && rd_skip_str(&r);
        }
        uint8_t a;
        while (ok && (ok = tb_rd_u8(&r, &a)) && a != A_DONE) {
            if (a == A_SSL_KEY_SIZE) {
                ok = tb_rd_skip(&r, 2);
            } else if (a == A_REQ_ATTRIBUTE) {
                ok = rd_skip_str(&r) && rd_skip_str(&r);
            } else if (a == A_STORED_METHOD) {
                const uint8_t *s;
                uint16_t n;
                if ((ok = rd_str(&r, &s, &n)) && s && n > 0) {
                    mname = (const char *)s;
                    mlen = TB_MIN((size_t)n, (size_t)32);
                    break;
                }
            } else {
                ok = rd_skip_str(&r);
            }
        }
        if (!mname) {
            /* Cut before the attribute (a hole, or a packet longer than
             * AJP_HEAD_MAX): the method stays unnamed. */
            mname = "OTHER";
            mlen = 5;
        }
    }
    if (!mname || !uri)
        return false;
    e->p.class_len = (uint16_t)tb_fp_http(mname, mlen, (const char *)uri, ulen, e->cls,
                                          sizeof e->cls);
    return true;
}

/* A request body packet: int<2> n and n bytes (n + 2 = the payload length). */
static bool body_shaped(const uint8_t *h, size_t hl, uint16_t len)
{
    if (len == 0)
        return true;
    if (len == 1)
        return false; /* a bare message code: CPing, Shutdown, … */
    if (hl < 2)
        return true; /* unknown (cut by a hole): taken as body while a request is open */
    return len >= 2 && ((uint16_t)(h[0] << 8 | h[1])) == len - 2;
}

/* Does a container packet start at p (n bytes there)? For resynchronising:
 * the header and, where the bytes are present, the fields that fix its length. */
static bool s2c_plausible(const uint8_t *p, size_t n)
{
    if (n < 5 || p[0] != 'A' || p[1] != 'B')
        return false;
    uint16_t len = (uint16_t)(p[2] << 8 | p[3]);
    switch (p[4]) {
    case T_SEND_BODY: {
        if (n < 7 || len < 3)
            return false;
        uint16_t k = (uint16_t)(p[5] << 8 | p[6]);
        return len == k + 3 || len == k + 4;
    }
    case T_SEND_HEADERS: {
        if (n < 7 || len < 7)
            return false;
        uint16_t s = (uint16_t)(p[5] << 8 | p[6]);
        return s >= 100 && s <= 999;
    }
    case T_END:
        return len == 2 && (n < 6 || p[5] <= 1);
    case T_GET_BODY:
        return len == 3;
    case T_CPONG:
        return len == 1;
    default:
        return false;
    }
}

static bool c2s_plausible(const uint8_t *p, size_t n)
{
    if (n < 5 || p[0] != 0x12 || p[1] != 0x34)
        return false;
    uint16_t len = (uint16_t)(p[2] << 8 | p[3]);
    if (p[4] == T_CPING)
        return len == 1;
    return len >= 9 && fwd_plausible(p + 4, TB_MIN(n - 4, (size_t)len), true);
}

/* ---- the exchange ----------------------------------------------------- */

static void s_acct(struct ajp *a, uint64_t n, int64_t ts)
{
    if (!a->open)
        return;
    a->x->p.resp_bytes += n;
    if (ts != TB__NO_TS) {
        a->x->p.resp_seen = true;
        a->x->p.last_ns = TB_MAX(a->x->p.last_ns, ts);
    }
}

static void finish(struct ajp *a, const struct tb_proto_ctx *ctx, uint32_t flags)
{
    if (a->lost)
        flags |= TB_REQ_GAP;
    tb__pend_emit(&a->x->p, ctx, a->status, flags, a->x->cls, a->x->p.class_len);
    a->open = false;
    a->lost = false;
}

static void open_req(struct ajp *a, const struct tb_proto_ctx *ctx, const uint8_t *h, size_t hl)
{
    struct ajp_dir *d = &a->d[TB_DIR_C2S];
    if (a->open) {
        /* A new request while the last was unanswered: its End Response
         * fell in a hole (one request at a time), so it ended before this. */
        a->lost = true;
        finish(a, ctx, 0);
    }
    if (!a->x && !(a->x = malloc(sizeof *a->x))) {
        ctx->ctr->inflight_dropped++;
        return;
    }
    memset(&a->x->p, 0, sizeof a->x->p);
    a->x->p.arrival_ns = d->ts0;
    a->x->p.req_bytes = 4u + d->len;
    if (d->gap)
        a->x->p.flags |= TB_REQ_GAP;
    if (!fwd_class(a->x, h, hl))
        a->x->p.class_len = 0; /* reported as "unknown" */
    a->status = -1;
    a->open = true;
    a->lost = false;
}

static void client_pkt(struct ajp *a, const struct tb_proto_ctx *ctx, const uint8_t *h, size_t hl)
{
    struct ajp_dir *d = &a->d[TB_DIR_C2S];
    bool cut = d->head_cut || hl < d->len;
    if (a->open && body_shaped(h, hl, d->len)) {
        a->x->p.req_bytes += 4u + d->len;
        if (d->gap)
            a->x->p.flags |= TB_REQ_GAP;
        return;
    }
    if (hl >= 1 && h[0] == T_FORWARD && fwd_plausible(h, hl, !cut)) {
        open_req(a, ctx, h, hl);
        return;
    }
    if (hl >= 1 && (h[0] == T_CPING || h[0] == T_SHUTDOWN || h[0] == T_PING) && !a->open) {
        if (h[0] == T_CPING)
            ctx->ctr->probes++; /* counted, not a request */
        return; /* control messages: no request */
    }
    if (hl == 0 && d->len == 0)
        return;
    ctx->ctr->parse_errors++;
    if (a->open) {
        a->x->p.req_bytes += 4u + d->len;
        a->x->p.flags |= TB_REQ_GAP; /* unreadable: the request is not what it seemed */
    }
}

static void server_pkt(struct ajp *a, const struct tb_proto_ctx *ctx, const uint8_t *h, size_t hl)
{
    if (!a->open || hl == 0)
        return; /* a CPong, or the end of an answer picked up mid-stream */
    switch (h[0]) {
    case T_SEND_HEADERS:
        if (hl >= 3)
            a->status = (int32_t)(h[1] << 8 | h[2]);
        break;
    case T_END:
        finish(a, ctx, 0);
        break;
    case T_SEND_BODY:
    case T_GET_BODY:
        break;
    default:
        ctx->ctr->parse_errors++;
        break;
    }
}

/* ---- framing ---------------------------------------------------------- */

static void lose_sync(struct ajp *a, const struct tb_proto_ctx *ctx, int dir, bool error)
{
    struct ajp_dir *d = &a->d[dir];
    d->synced = false;
    d->in_pkt = false;
    d->hdr_have = 0;
    if (a->open) {
        a->x->p.flags |= TB_REQ_GAP;
        if (dir == TB_DIR_S2C)
            a->lost = true; /* its End Response will be looked for */
    }
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

static void pkt_end(struct ajp *a, const struct tb_proto_ctx *ctx, int dir, const uint8_t *h,
                    size_t hl)
{
    struct ajp_dir *d = &a->d[dir];
    d->in_pkt = false;
    if (dir == TB_DIR_C2S)
        client_pkt(a, ctx, h, hl);
    else
        server_pkt(a, ctx, h, hl);
}

static void collect(struct ajp *a, int dir, const uint8_t *p, size_t k)
{
    struct ajp_dir *d = &a->d[dir];
    size_t cap = dir == TB_DIR_C2S ? AJP_HEAD_MAX : sizeof a->shead;
    if (d->head_cut || d->head_len >= cap || k == 0)
        return;
    uint8_t *buf = a->shead;
    if (dir == TB_DIR_C2S) {
        if (!a->cbuf && !(a->cbuf = malloc(AJP_HEAD_MAX)))
            return;
        buf = a->cbuf;
    }
    size_t n = TB_MIN(k, cap - d->head_len);
    memcpy(buf + d->head_len, p, n);
    d->head_len = (uint16_t)(d->head_len + n);
}

static const uint8_t *head_of(struct ajp *a, int dir, size_t *hl)
{
    *hl = a->d[dir].head_len;
    if (dir == TB_DIR_S2C)
        return a->shead;
    if (!a->cbuf)
        *hl = 0;
    return a->cbuf;
}

/* Unsynchronised: the offset of the first packet start in the chunk that can
 * be trusted, or n. Server bytes are only looked at while a request waits. */
static size_t find_sync(struct ajp *a, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_S2C && !a->open)
        return n;
    uint8_t m0 = dir == TB_DIR_C2S ? 0x12 : 'A';
    for (const uint8_t *q = p; (q = memchr(q, m0, n - (size_t)(q - p))) != NULL; q++) {
        size_t left = n - (size_t)(q - p);
        if (dir == TB_DIR_C2S ? c2s_plausible(q, left) : s2c_plausible(q, left))
            return (size_t)(q - p);
        if (left <= 1)
            break;
    }
    return n;
}

static enum tb_pstate ajp_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                  const uint8_t *p, size_t n, int64_t ts)
{
    struct ajp *a = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct ajp_dir *d = &a->d[di];
    const uint8_t *end = p + n;
    enum tb_pstate ret = TB_PS_OK;
    if (a->stopped)
        return TB_PS_STOP;
    while (p < end) {
        if (!d->synced) {
            size_t off = find_sync(a, di, p, (size_t)(end - p));
            if (di == TB_DIR_S2C && a->lost)
                s_acct(a, off, ts); /* the tail of the answer whose framing was lost */
            p += off;
            if (p == end)
                break;
            d->synced = true;
            d->hdr_have = 0;
            d->in_pkt = false;
        }
        if (!d->in_pkt) {
            if (d->hdr_have == 0)
                d->ts0 = ts;
            const uint8_t *h0 = p;
            bool whole = tb__hdr_take(d->hdr, &d->hdr_have, 4, &p, end);
            if (di == TB_DIR_S2C)
                s_acct(a, (uint64_t)(p - h0), ts);
            if (!whole)
                break;
            bool magic = di == TB_DIR_C2S ? d->hdr[0] == 0x12 && d->hdr[1] == 0x34
                                          : d->hdr[0] == 'A' && d->hdr[1] == 'B';
            if (!magic) {
                lose_sync(a, ctx, di, true);
                ret = TB_PS_ERROR;
                continue;
            }
            d->len = d->left = (uint16_t)(d->hdr[2] << 8 | d->hdr[3]);
            d->in_pkt = true;
            d->gap = d->head_cut = false;
            d->head_len = 0;
            if ((size_t)(end - p) >= d->len) {
                /* Whole payload in this chunk: read it in place. */
                const uint8_t *pl = p;
                p += d->len;
                d->left = 0;
                if (di == TB_DIR_S2C)
                    s_acct(a, d->len, ts);
                pkt_end(a, ctx, di, pl, d->len);
                continue;
            }
        }
        size_t k = TB_MIN((size_t)d->left, (size_t)(end - p));
        collect(a, di, p, k);
        p += k;
        d->left = (uint16_t)(d->left - k);
        if (di == TB_DIR_S2C)
            s_acct(a, k, ts);
        if (d->left > 0)
            break;
        size_t hl;
        const uint8_t *h = head_of(a, di, &hl);
        pkt_end(a, ctx, di, h, hl);
    }
    return ret;
}

static enum tb_pstate ajp_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                              uint64_t len, int64_t ts)
{
    struct ajp *a = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct ajp_dir *d = &a->d[di];
    if (a->stopped)
        return TB_PS_STOP;
    if (d->synced && d->in_pkt && len > 0 && len <= d->left) {
        /* Inside one packet: its length still says where the next starts. */
        d->left = (uint16_t)(d->left - len);
        d->gap = true;
        d->head_cut = true;
        if (di == TB_DIR_S2C) {
            s_acct(a, len, ts);
            if (a->open)
                a->x->p.flags |= TB_REQ_GAP;
        }
        if (d->left == 0) {
            size_t hl;
            const uint8_t *h = head_of(a, di, &hl);
            pkt_end(a, ctx, di, h, hl);
        }
        return TB_PS_OK;
    }
    if (di == TB_DIR_S2C && a->open) {
        /* Part of the answer (perhaps its end): it keeps the bytes, never the
         * time unless the hole has one (a snaplen cut). */
        s_acct(a, len, ts);
    }
    if (d->synced)
        lose_sync(a, ctx, di, false);
    else if (a->open) {
        a->x->p.flags |= TB_REQ_GAP;
        if (di == TB_DIR_S2C)
            a->lost = true;
    }
    return TB_PS_OK;
}

static void ajp_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct ajp *a = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!a->stopped && a->open && a->x->p.resp_seen)
        finish(a, ctx, TB_REQ_NORESP); /* cut short: the times seen so far */
    a->open = false;
    a->stopped = true;
}

static void ajp_init(void *st, bool midstream)
{
    struct ajp *a = st;
    memset(a, 0, sizeof *a);
    /* Mid-stream the first bytes may be inside a packet: each side waits for
     * a packet start it can trust (a Forward Request; an answer to one). */
    a->d[0].synced = a->d[1].synced = !midstream;
}

static void ajp_fini(void *st)
{
    struct ajp *a = st;
    free(a->cbuf);
    free(a->x);
    a->cbuf = NULL;
    a->x = NULL;
}

static enum tb_detect ajp_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    static const uint8_t fwd[] = {0x12, 0x34};
    if (n < 5) {
        if (memcmp(p, fwd, TB_MIN(n, sizeof fwd)) == 0 || (n >= 1 && p[0] == 'A' &&
                                                          (n < 2 || p[1] == 'B'))) {
            *client_sent = n == 0 || p[0] == 0x12;
            return TB_DETECT_MAYBE;
        }
        return TB_DETECT_NO;
    }
    if (p[0] == 0x12 && p[1] == 0x34) {
        uint16_t len = (uint16_t)(p[2] << 8 | p[3]);
        if (p[4] == T_CPING && len == 1) {
            *client_sent = true;
            return TB_DETECT_YES;
        }
        if (len < 9 || !fwd_plausible(p + 4, TB_MIN(n - 4, (size_t)len), false))
            return TB_DETECT_NO;
        *client_sent = true;
        /* Sure once the protocol string is all here. */
        return n >= 4u + 4u + 5u + 1u && fwd_plausible(p + 4, TB_MIN(n - 4, (size_t)len), true)
                   ? TB_DETECT_YES
                   : TB_DETECT_MAYBE;
    }
    if (s2c_plausible(p, n)) {
        *client_sent = false;
        return TB_DETECT_YES;
    }
    return TB_DETECT_NO;
}

static const uint16_t ajp_ports[] = {8009, 0};

const struct tb_proto tb_proto_ajp = {
    .name = "ajp",
    .ports = ajp_ports,
    .state_size = sizeof(struct ajp),
    .detect = ajp_detect,
    .init = ajp_init,
    .consume = ajp_consume,
    .gap = ajp_gap,
    .close = ajp_close,
    .fini = ajp_fini,
};
