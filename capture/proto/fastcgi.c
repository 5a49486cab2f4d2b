/* SPDX-License-Identifier: MIT */
/* fastcgi.c — FastCGI 1.0: a web server (nginx, Apache mod_proxy_fcgi) passing
 * requests to an application server (php-fpm, …). Specification: Mark R.
 * Brown, "FastCGI Specification", Open Market, 1996
 * (https://fastcgi-archives.github.io/FastCGI_Specification.html), §3–§6.
 *
 * Every record (integers big-endian):
 *
 *   version(1) = 1  type(1)  int<2> requestId  int<2> contentLength
 *   paddingLength(1)  reserved(1)  content[contentLength]  padding[paddingLength]
 *
 *   1 BEGIN_REQUEST  int<2> role (1 responder, 2 authorizer, 3 filter), flags(1), reserved[5]
 *   2 ABORT_REQUEST  3 END_REQUEST  int<4> appStatus, protocolStatus(1), reserved[3]
 *   4 PARAMS  5 STDIN  6 STDOUT  7 STDERR  8 DATA   (streams: records of one id,
 *                                                    ended by an empty record)
 *   9 GET_VALUES  10 GET_VALUES_RESULT  11 UNKNOWN_TYPE   (management, id 0)
 *
 * PARAMS carries name-value pairs: a length is one byte below 0x80, else four
 * bytes with the top bit set; name length, value length, name, value — a pair
 * may straddle records. A request is BEGIN_REQUEST, PARAMS…, STDIN… (DATA… for
 * a filter) from the web server, answered by STDOUT/STDERR… and END_REQUEST.
 * Requests are multiplexed by id: records of different ids interleave, and
 * each id is its own request, from the first byte of its BEGIN_REQUEST to the
 * last byte of its END_REQUEST (padding included). An id is reused once its
 * END_REQUEST has been sent (nginx always uses id 1).
 *
 * Class: REQUEST_METHOD and the fingerprint of REQUEST_URI (else SCRIPT_NAME),
 * as for HTTP/1.x, so a request has the same class here as at the web server.
 * Status: the CGI Status header of the STDOUT stream (RFC 3875 §6.3.3); else
 * -1 when a hole cut the header section; else 302 when a Location header was
 * sent (§6.2.3, as nginx does); else 503 when
 * END_REQUEST's protocolStatus refused the request (1 CANT_MPX_CONN, 2
 * OVERLOADED, 3 UNKNOWN_ROLE); else 200. appStatus (the application's exit
 * code; php-fpm sends 0) is not reported.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto-int.h"

#define FC_REQ_MAX 64u        /* requests in flight per connection */
#define FC_TARGET_MAX 1024u   /* REQUEST_URI / SCRIPT_NAME bytes kept for the class */
#define FC_METHOD_MAX 16u
#define FC_NAME_KEEP 16u      /* parameter names we look for are shorter */
#define FC_HDR_MAX 65536u     /* CGI header section looked through for Status */
#define FC_LINE_KEEP 24u      /* "Status: 404 Not Found": the code is in the first bytes */

enum {
    R_BEGIN = 1, R_ABORT = 2, R_END = 3, R_PARAMS = 4, R_STDIN = 5, R_STDOUT = 6,
    R_STDERR = 7, R_DATA = 8,
};

enum { PV_NLEN, PV_VLEN, PV_NAME, PV_VALUE, PV_BROKEN };
enum { W_NONE, W_URI, W_SCRIPT, W_METHOD };
enum { T_NONE, T_SCRIPT, T_URI };

struct fc_req {
    struct tb__pend p;
    char cls[TB__CLASS_MAX]; /* p's class (written before it is read) */
    uint16_t id;       /* first of the fields a new request clears */
    uint16_t role;
    bool lost;        /* the answer's framing was lost in a hole */
    bool classed;     /* cls holds the class */
    /* PARAMS stream */
    uint8_t pv, want, lhave, tkind;
    uint8_t lb[4];
    uint8_t mlen;
    uint16_t tlen;
    uint32_t nlen, vlen, got;
    char name[FC_NAME_KEEP];
    char method[FC_METHOD_MAX];
    /* STDOUT header section */
    bool hdr_done, location;
    bool hdr_cut;     /* a hole in the header section: the status is unknown */
    uint8_t llen;     /* bytes of the current line kept (at most FC_LINE_KEEP) */
    uint32_t hbytes;
    int32_t status;   /* from Status:, or -1 */
    int32_t refused;  /* END_REQUEST's protocolStatus */
    char line[FC_LINE_KEEP];
    /* Last: a new request clears everything before it. */
    char target[FC_TARGET_MAX];
};

struct fc_dir {
    uint8_t hdr[8];
    uint8_t hdr_have;
    bool synced;
    bool in_rec;
    uint8_t type;
    uint16_t id;
    uint16_t clen;
    uint16_t cleft;   /* content bytes still to come */
    uint8_t padleft;
    uint8_t body_have; /* BEGIN_REQUEST / END_REQUEST body bytes kept */
    bool body_cut;
    uint8_t body[8];
    int64_t ts0;      /* chunk that carried the record's first byte */
};

struct fc {
    struct fc_dir d[2];
    struct fc_req *reqs;
    uint16_t nreqs, cap;
    bool stopped;
};

/* ---- requests by id --------------------------------------------------- */

static struct fc_req *req_find(struct fc *f, uint16_t id)
{
    for (uint16_t i = 0; i < f->nreqs; i++)
        if (f->reqs[i].id == id)
            return &f->reqs[i];
    return NULL;
}

static void req_del(struct fc *f, struct fc_req *r)
{
    size_t i = (size_t)(r - f->reqs);
    if (i + 1 < f->nreqs)
        memcpy(r, &f->reqs[f->nreqs - 1], sizeof *r);
    f->nreqs--;
}

static struct fc_req *req_new(struct fc *f, const struct tb_proto_ctx *ctx, uint16_t id,
                              int64_t ts)
{
    if (f->nreqs == f->cap) {
        uint16_t nc = f->cap ? (uint16_t)TB_MIN(f->cap * 2u, FC_REQ_MAX) : 1;
        struct fc_req *nv = nc > f->cap ? realloc(f->reqs, nc * sizeof *nv) : NULL;
        if (!nv) {
            ctx->ctr->inflight_dropped++;
            return NULL;
        }
        f->reqs = nv;
        f->cap = nc;
    }
    struct fc_req *r = &f->reqs[f->nreqs++];
    /* Cleared but for the class and target buffers, which are written before
     * they are read (a memset of them was a seventh of the parser's time). */
    memset(&r->p, 0, sizeof r->p);
    memset(&r->id, 0, offsetof(struct fc_req, target) - offsetof(struct fc_req, id));
    r->p.arrival_ns = ts;
    r->id = id;
    r->status = -1;
    return r;
}

static void build_class(struct fc_req *r)
{
    static const char *const roles[] = {"FCGI", "RESPONDER", "AUTHORIZER", "FILTER"};
    if (r->classed)
        return;
    r->classed = true;
    if (r->tkind != T_NONE) {
        const char *m = r->mlen ? r->method : "FCGI";
        size_t ml = r->mlen ? r->mlen : 4;
        r->p.class_len = (uint16_t)tb_fp_http(m, ml, r->target, r->tlen, r->cls, sizeof r->cls);
        return;
    }
    const char *s = roles[r->role < TB_ARRAY_SIZE(roles) ? r->role : 0];
    r->p.class_len = tb__class_copy(r->cls, s, strlen(s));
}

static void req_emit(struct fc *f, const struct tb_proto_ctx *ctx, struct fc_req *r,
                     uint32_t flags)
{
    int32_t status = r->status >= 0 ? r->status
                     : r->hdr_cut   ? -1
                     : r->location  ? 302
                     : r->refused   ? 503
                                    : 200;
    if (r->lost)
        flags |= TB_REQ_GAP;
    build_class(r);
    tb__pend_emit(&r->p, ctx, status, flags, r->cls, r->p.class_len);
    req_del(f, r);
}

/* ---- PARAMS: name-value pairs ---------------------------------------- */

static uint8_t param_want(const struct fc_req *r, const char *name, uint32_t nlen)
{
    if (nlen == 11 && memcmp(name, "REQUEST_URI", 11) == 0)
        return W_URI;
    if (nlen == 11 && memcmp(name, "SCRIPT_NAME", 11) == 0)
        return r->tkind == T_URI ? W_NONE : W_SCRIPT;
    if (nlen == 14 && memcmp(name, "REQUEST_METHOD", 14) == 0)
        return W_METHOD;
    return W_NONE;
}

/* A length at *p (1 byte below 0x80, else 4 with the top bit set), read in
 * place when all of it is there. */
static bool len_at(const uint8_t **p, size_t *n, uint32_t *v)
{
    const uint8_t *q = *p;
    if (*n >= 1 && q[0] < 0x80) {
        *v = q[0];
        *p += 1;
        *n -= 1;
        return true;
    }
    if (*n < 4)
        return false;
    *v = (uint32_t)(q[0] & 0x7f) << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    *p += 4;
    *n -= 4;
    return true;
}

/* A whole pair in one piece of the stream. */
static void pair_whole(struct fc_req *r, const uint8_t *name, uint32_t nl, const uint8_t *v,
                       uint32_t vl)
{
    uint8_t w = param_want(r, (const char *)name, nl);
    if (w == W_METHOD) {
        r->mlen = (uint8_t)TB_MIN(vl, FC_METHOD_MAX);
        memcpy(r->method, v, r->mlen);
    } else if (w == W_URI || w == W_SCRIPT) {
        r->tkind = w == W_URI ? T_URI : T_SCRIPT;
        r->tlen = (uint16_t)TB_MIN(vl, FC_TARGET_MAX);
        memcpy(r->target, v, r->tlen);
    }
}

static void value_begin(struct fc_req *r)
{
    r->want = param_want(r, r->name, r->nlen);
    r->got = 0;
    if (r->want == W_URI || r->want == W_SCRIPT) {
        r->tkind = T_NONE; /* the buffer is about to be overwritten */
        r->tlen = 0;
    } else if (r->want == W_METHOD) {
        r->mlen = 0;
    }
}

static void value_end(struct fc_req *r)
{
    if (r->want == W_URI)
        r->tkind = T_URI;
    else if (r->want == W_SCRIPT)
        r->tkind = T_SCRIPT;
    r->want = W_NONE;
    r->pv = PV_NLEN;
}

static void params_feed(struct fc_req *r, const uint8_t *p, size_t n)
{
    if (r->pv == PV_NLEN && r->lhave == 0) {
        /* The usual case: whole pairs in this piece, read in place. The
         * byte-wise machine below takes over where a pair is cut. */
        for (;;) {
            const uint8_t *q = p;
            size_t left = n;
            uint32_t nl, vl;
            if (!len_at(&q, &left, &nl) || !len_at(&q, &left, &vl) || left < nl ||
                left - nl < vl)
                break;
            pair_whole(r, q, nl, q + nl, vl);
            p = q + nl + vl;
            n = left - nl - vl;
        }
    }
    while (n > 0) {
        switch (r->pv) {
        case PV_NLEN:
        case PV_VLEN: {
            uint8_t b = *p++;
            n--;
            uint32_t len;
            if (r->lhave == 0 && b < 0x80) {
                len = b;
            } else {
                r->lb[r->lhave++] = b;
                if (r->lhave < 4)
                    break;
                r->lhave = 0;
                len = (uint32_t)(r->lb[0] & 0x7f) << 24 | (uint32_t)r->lb[1] << 16 |
                      (uint32_t)r->lb[2] << 8 | r->lb[3];
            }
            if (r->pv == PV_NLEN) {
                r->nlen = len;
                r->pv = PV_VLEN;
                break;
            }
            r->vlen = len;
            r->got = 0;
            if (r->nlen > 0) {
                r->pv = PV_NAME;
            } else {
                value_begin(r);
                r->pv = PV_VALUE;
                if (r->vlen == 0)
                    value_end(r);
            }
            break;
        }
        case PV_NAME: {
            size_t k = TB_MIN((size_t)(r->nlen - r->got), n);
            if (r->got < FC_NAME_KEEP)
                memcpy(r->name + r->got, p, TB_MIN(k, (size_t)(FC_NAME_KEEP - r->got)));
            r->got += (uint32_t)k;
            p += k;
            n -= k;
            if (r->got == r->nlen) {
                if (r->nlen > FC_NAME_KEEP)
                    r->nlen = FC_NAME_KEEP + 1; /* no name we want is that long */
                value_begin(r);
                r->pv = PV_VALUE;
                if (r->vlen == 0)
                    value_end(r);
            }
            break;
        }
        case PV_VALUE: {
            size_t k = TB_MIN((size_t)(r->vlen - r->got), n);
            if (r->want == W_METHOD && r->mlen < FC_METHOD_MAX) {
                size_t c = TB_MIN(k, (size_t)(FC_METHOD_MAX - r->mlen));
                memcpy(r->method + r->mlen, p, c);
                r->mlen = (uint8_t)(r->mlen + c);
            } else if ((r->want == W_URI || r->want == W_SCRIPT) && r->tlen < FC_TARGET_MAX) {
                size_t c = TB_MIN(k, (size_t)(FC_TARGET_MAX - r->tlen));
                memcpy(r->target + r->tlen, p, c);
                r->tlen = (uint16_t)(r->tlen + c);
            }
            r->got += (uint32_t)k;
            p += k;
            n -= k;
            if (r->got == r->vlen)
                value_end(r);
            break;
        }
        default:
            return; /* broken by a hole: the rest of the stream is not read */
        }
    }
}

/* ---- STDOUT: the CGI header section ----------------------------------- */

static void header_line(struct fc_req *r)
{
    const char *s = r->line;
    size_t n = r->llen;
    if (n >= 7 && strncasecmp(s, "status:", 7) == 0) {
        size_t i = 7;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        int32_t v = 0;
        size_t k = 0;
        while (i + k < n && k < 3 && s[i + k] >= '0' && s[i + k] <= '9')
            v = v * 10 + (s[i + k++] - '0');
        if (k == 3 && (i + k == n || s[i + k] == ' ' || s[i + k] == '\r') && v >= 100)
            r->status = v;
    } else if (n >= 9 && strncasecmp(s, "location:", 9) == 0) {
        r->location = true;
    }
}

static void stdout_feed(struct fc_req *r, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    while (p < end && !r->hdr_done) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *le = nl ? nl : end;
        size_t k = (size_t)(le - p);
        if (r->llen < FC_LINE_KEEP) {
            size_t c = TB_MIN(k, (size_t)(FC_LINE_KEEP - r->llen));
            memcpy(r->line + r->llen, p, c);
            r->llen = (uint8_t)(r->llen + c);
        }
        r->hbytes += (uint32_t)(k + (nl ? 1 : 0));
        p = nl ? nl + 1 : end;
        if (!nl)
            break;
        size_t len = r->llen;
        if (len > 0 && r->line[len - 1] == '\r' && len < FC_LINE_KEEP)
            len--;
        if (len == 0) {
            r->hdr_done = true; /* the empty line ends the section */
        } else {
            r->llen = (uint8_t)len;
            header_line(r);
        }
        r->llen = 0;
        if (r->hbytes > FC_HDR_MAX)
            r->hdr_done = true;
    }
}

/* ---- records ---------------------------------------------------------- */

static void acct(struct fc *f, int dir, uint64_t n, int64_t ts)
{
    struct fc_req *r = req_find(f, f->d[dir].id);
    if (!r || n == 0)
        return;
    if (dir == TB_DIR_C2S) {
        r->p.req_bytes += n;
    } else {
        r->p.resp_bytes += n;
        if (ts != TB__NO_TS) {
            r->p.resp_seen = true;
            r->p.last_ns = TB_MAX(r->p.last_ns, ts);
        }
    }
}

static void rec_start(struct fc *f, const struct tb_proto_ctx *ctx, int dir, int64_t ts)
{
    struct fc_dir *d = &f->d[dir];
    if (dir == TB_DIR_C2S && d->type == R_BEGIN && d->id != 0) {
        struct fc_req *old = req_find(f, d->id);
        if (old) {
            /* Its id is reused, so it was over: its END_REQUEST fell in a
             * hole. Reported with what was seen of its answer, if anything. */
            old->p.flags |= TB_REQ_GAP;
            req_emit(f, ctx, old, 0);
        }
        req_new(f, ctx, d->id, d->ts0);
    }
    acct(f, dir, 8, dir == TB_DIR_C2S ? d->ts0 : ts);
}

static void content(struct fc *f, int dir, const uint8_t *p, size_t k, int64_t ts)
{
    struct fc_dir *d = &f->d[dir];
    acct(f, dir, k, ts);
    if ((d->type == R_BEGIN || d->type == R_END) && d->body_have < sizeof d->body) {
        size_t c = TB_MIN(k, sizeof d->body - d->body_have);
        memcpy(d->body + d->body_have, p, c);
        d->body_have = (uint8_t)(d->body_have + c);
        return;
    }
    if (d->type != R_PARAMS && d->type != R_STDOUT)
        return;
    struct fc_req *r = req_find(f, d->id);
    if (!r)
        return;
    if (dir == TB_DIR_C2S && d->type == R_PARAMS)
        params_feed(r, p, k);
    else if (dir == TB_DIR_S2C && d->type == R_STDOUT)
        stdout_feed(r, p, k);
}

static void rec_end(struct fc *f, const struct tb_proto_ctx *ctx, int dir)
{
    struct fc_dir *d = &f->d[dir];
    d->in_rec = false;
    struct fc_req *r = req_find(f, d->id);
    if (!r)
        return;
    if (dir == TB_DIR_C2S) {
        if (d->type == R_BEGIN && d->body_have >= 2 && !d->body_cut)
            r->role = (uint16_t)(d->body[0] << 8 | d->body[1]);
        else if (d->type == R_PARAMS && d->clen == 0)
            build_class(r); /* the stream is over */
        return;
    }
    if (d->type == R_STDOUT && d->clen == 0) {
        r->hdr_done = true;
    } else if (d->type == R_END) {
        if (d->body_have >= 5 && !d->body_cut)
            r->refused = d->body[4];
        req_emit(f, ctx, r, 0);
    }
}

/* ---- synchronisation -------------------------------------------------- */

static bool begin_plausible(const uint8_t *p, size_t n)
{
    return n >= 16 && p[0] == 1 && p[1] == R_BEGIN && (p[2] | p[3]) != 0 && p[4] == 0 &&
           p[5] == 8 && p[7] == 0 && p[8] == 0 && p[9] >= 1 && p[9] <= 3 && p[10] <= 1;
}

/* Unsynchronised: the offset of the first record start in the chunk that can
 * be trusted, or n. The web server's side restarts at a BEGIN_REQUEST; the
 * application's at an answer record for a request being followed. */
static size_t find_sync(struct fc *f, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_S2C && f->nreqs == 0)
        return n;
    for (const uint8_t *q = p; n - (size_t)(q - p) >= 8 &&
                               (q = memchr(q, 1, n - (size_t)(q - p) - 7)) != NULL;
         q++) {
        size_t left = n - (size_t)(q - p);
        if (dir == TB_DIR_C2S) {
            if (begin_plausible(q, left))
                return (size_t)(q - p);
            continue;
        }
        uint8_t t = q[1];
        if ((t != R_STDOUT && t != R_STDERR && t != R_END) || q[7] != 0)
            continue;
        if (t == R_END && (q[4] != 0 || q[5] != 8))
            continue;
        if (req_find(f, (uint16_t)(q[2] << 8 | q[3])))
            return (size_t)(q - p);
    }
    return n;
}

static void lose_sync(struct fc *f, const struct tb_proto_ctx *ctx, int dir, bool error)
{
    struct fc_dir *d = &f->d[dir];
    d->synced = false;
    d->in_rec = false;
    d->hdr_have = 0;
    /* Which request the lost bytes belonged to is unknown: every request in
     * flight may have been touched. An answer under way may have ended in
     * the hole; its request is closed by its END_REQUEST if one is found, by
     * a new BEGIN_REQUEST of its id, or at the close. */
    for (uint16_t i = 0; i < f->nreqs; i++) {
        struct fc_req *r = &f->reqs[i];
        r->p.flags |= TB_REQ_GAP;
        if (dir == TB_DIR_S2C && r->p.resp_seen)
            r->lost = true;
        if (dir == TB_DIR_C2S && r->pv != PV_NLEN)
            r->pv = PV_BROKEN;
        if (dir == TB_DIR_S2C && !r->hdr_done)
            r->hdr_done = r->hdr_cut = true;
    }
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

/* ---- descriptor hooks ------------------------------------------------- */

static enum tb_pstate fc_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct fc *f = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct fc_dir *d = &f->d[di];
    const uint8_t *end = p + n;
    enum tb_pstate ret = TB_PS_OK;
    if (f->stopped)
        return TB_PS_STOP;
    while (p < end) {
        if (!d->synced) {
            p += find_sync(f, di, p, (size_t)(end - p));
            if (p == end)
                break;
            d->synced = true;
            d->hdr_have = 0;
            d->in_rec = false;
        }
        if (!d->in_rec) {
            if (d->hdr_have == 0)
                d->ts0 = ts;
            if (!tb__hdr_take(d->hdr, &d->hdr_have, 8, &p, end))
                break;
            if (d->hdr[0] != 1) {
                lose_sync(f, ctx, di, true);
                ret = TB_PS_ERROR;
                continue;
            }
            d->type = d->hdr[1];
            d->id = (uint16_t)(d->hdr[2] << 8 | d->hdr[3]);
            d->clen = d->cleft = (uint16_t)(d->hdr[4] << 8 | d->hdr[5]);
            d->padleft = d->hdr[6];
            d->body_have = 0;
            d->body_cut = false;
            d->in_rec = true;
            rec_start(f, ctx, di, ts);
        }
        /* In locals: reading the two narrow fields back as one word right
         * after storing them stalled every record (store forwarding). */
        size_t cleft = d->cleft, padleft = d->padleft;
        if (cleft > 0) {
            size_t k = TB_MIN(cleft, (size_t)(end - p));
            content(f, di, p, k, ts);
            p += k;
            cleft -= k;
            d->cleft = (uint16_t)cleft;
        }
        if (cleft == 0 && padleft > 0) {
            size_t k = TB_MIN(padleft, (size_t)(end - p));
            acct(f, di, k, ts);
            p += k;
            padleft -= k;
            d->padleft = (uint8_t)padleft;
        }
        if (cleft == 0 && padleft == 0)
            rec_end(f, ctx, di);
    }
    return ret;
}

static enum tb_pstate fc_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct fc *f = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct fc_dir *d = &f->d[di];
    if (f->stopped)
        return TB_PS_STOP;
    if (d->synced && d->in_rec && len > 0 && len <= (uint64_t)d->cleft + d->padleft) {
        /* Inside one record: its lengths still say where the next starts. */
        struct fc_req *r = req_find(f, d->id);
        if (r) {
            r->p.flags |= TB_REQ_GAP;
            if (d->cleft > 0 && d->type == R_PARAMS && di == TB_DIR_C2S)
                r->pv = PV_BROKEN;
            if (d->cleft > 0 && d->type == R_STDOUT && di == TB_DIR_S2C && !r->hdr_done)
                r->hdr_done = r->hdr_cut = true; /* a Status line may have been in the hole */
        }
        if (d->cleft > 0)
            d->body_cut = true;
        acct(f, di, len, ts);
        uint64_t k = TB_MIN(len, (uint64_t)d->cleft);
        d->cleft = (uint16_t)(d->cleft - k);
        d->padleft = (uint8_t)(d->padleft - (len - k));
        if (d->cleft == 0 && d->padleft == 0)
            rec_end(f, ctx, di);
        return TB_PS_OK;
    }
    if (di == TB_DIR_S2C && f->nreqs == 1) {
        /* One request in flight: the hole is part of its answer (it keeps the
         * bytes, never a time unless the hole has one). */
        d->id = f->reqs[0].id;
        acct(f, di, len, ts);
    }
    if (d->synced)
        lose_sync(f, ctx, di, false);
    else
        for (uint16_t i = 0; i < f->nreqs; i++)
            f->reqs[i].p.flags |= TB_REQ_GAP;
    return TB_PS_OK;
}

static void fc_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct fc *f = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    /* Answers cut short: reported with the times seen, flagged. */
    while (!f->stopped && f->nreqs > 0) {
        struct fc_req *r = &f->reqs[f->nreqs - 1];
        if (r->p.resp_seen)
            req_emit(f, ctx, r, TB_REQ_NORESP);
        else
            req_del(f, r);
    }
    f->stopped = true;
}

static void fc_init(void *st, bool midstream)
{
    struct fc *f = st;
    memset(f, 0, sizeof *f);
    /* Mid-stream the first bytes may be inside a record. */
    f->d[0].synced = f->d[1].synced = !midstream;
}

static void fc_fini(void *st)
{
    struct fc *f = st;
    free(f->reqs);
    f->reqs = NULL;
    f->nreqs = f->cap = 0;
}

static enum tb_detect fc_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    static const uint8_t begin[] = {1, R_BEGIN};
    if (n < 16) {
        /* A BEGIN_REQUEST is 16 bytes and travels whole. */
        if (memcmp(p, begin, TB_MIN(n, sizeof begin)) == 0 && (n < 6 || (p[4] == 0 && p[5] == 8))) {
            *client_sent = true;
            return n < 8 || p[7] == 0 ? TB_DETECT_MAYBE : TB_DETECT_NO;
        }
        return TB_DETECT_NO;
    }
    /* Only a BEGIN_REQUEST, mid-stream too: the parser starts there anyway,
     * and an 8-byte record header alone is too weak a sign to take a
     * connection from another parser on (a MySQL packet of 513 bytes passes
     * for an ABORT_REQUEST). A kept connection picked up mid-stream shows one
     * at its next request. */
    if (begin_plausible(p, n)) {
        *client_sent = true;
        return TB_DETECT_YES;
    }
    return TB_DETECT_NO;
}

static const uint16_t fc_ports[] = {9000, 0};

const struct tb_proto tb_proto_fastcgi = {
    .name = "fastcgi",
    .ports = fc_ports,
    .state_size = sizeof(struct fc),
    .detect = fc_detect,
    .init = fc_init,
    .consume = fc_consume,
    .gap = fc_gap,
    .close = fc_close,
    .fini = fc_fini,
    .multiplexed = true,
};
