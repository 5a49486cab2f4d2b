/* SPDX-License-Identifier: MIT */
/* http1.c — HTTP/1.0 and HTTP/1.1 request/response pairing (RFC 9112, RFC 9110).
 *
 * Message layout (RFC 9112 §2.1):
 *
 *   request-line  = method SP request-target SP "HTTP/1." DIGIT CRLF
 *   status-line   = "HTTP/1." DIGIT SP 3DIGIT SP [reason] CRLF
 *   *( field-name ":" OWS field-value OWS CRLF )
 *   CRLF
 *   [ message-body ]
 *
 * Body length (§6.3): responses to HEAD, 1xx, 204 and 304 have none; then
 * Transfer-Encoding whose final coding is chunked (chunk = hex-size [;ext] CRLF
 * data CRLF, ended by a 0-size chunk, trailer fields and CRLF); then
 * Content-Length; else a response runs to the close of the connection and a
 * request has no body. Requests may be pipelined: responses come back in
 * request order, so a FIFO of in-flight requests pairs them. An interim 1xx
 * response (100 Continue) is not the answer; 101 hands the connection to
 * another protocol and ends parsing.
 */
#include <string.h>
#include <strings.h>

#include "proto-int.h"

#define H_HDR_MAX (64u * 1024u)    /* start line + fields of one message */
#define H_RESYNC_LINE_MAX 8192u     /* longer lines cannot start a message we want */
#define H_CHUNK_LINE_MAX 4096u      /* chunk-size line with its extensions */
#define H_METHOD_MAX 24u

enum h_st {
    H_LINE,       /* expecting a start line */
    H_HDR,        /* header fields */
    H_BODY,       /* Content-Length body, `left` to go */
    H_CHUNK_SIZE, /* chunk-size line */
    H_CHUNK_DATA, /* chunk data, `left` to go */
    H_CHUNK_END,  /* CRLF after chunk data */
    H_TRAILER,    /* trailer fields after the last chunk */
    H_CLOSE,      /* response body delimited by the connection close */
    H_RESYNC,     /* lost: looking for a start line */
};

enum h_kind { K_OTHER = 0, K_HEAD = 1, K_CONNECT = 2 };

struct h1_dir {
    uint8_t st;
    bool has_cl, te, chunked;
    uint64_t left;
    uint64_t cl;
    uint32_t hdr_bytes;
    struct tb__line ln;
};

struct h1 {
    struct h1_dir d[2];
    struct tb__pq pq;
    uint32_t creq_seq; /* request whose bytes the client is sending */
    bool creq_live;
    bool resp_live;    /* a response (perhaps after an interim 1xx) is being read */
    bool resp_bound;   /* ... and it answers the queue head (else: an orphan) */
    int32_t status;
    bool resp_lost;    /* the head's response lost its framing in a hole */
    int32_t lost_status;
    bool stopped;
};

/* ---- helpers ---------------------------------------------------------- */

static bool is_tchar_upper(char c)
{
    return (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}

static struct tb__pend *creq(struct h1 *h)
{
    return h->creq_live ? tb__pq_find(&h->pq, h->creq_seq) : NULL;
}

static struct tb__pend *cresp(struct h1 *h)
{
    return h->resp_live && h->resp_bound ? tb__pq_head(&h->pq) : NULL;
}

static void acct(struct h1 *h, int dir, uint64_t n, int64_t ts)
{
    if (n == 0)
        return;
    if (dir == TB_DIR_C2S) {
        struct tb__pend *e = creq(h);
        if (e) {
            e->req_bytes += n;
            if (ts != TB__NO_TS && ts < e->arrival_ns)
                e->arrival_ns = ts;
        }
    } else {
        struct tb__pend *e = cresp(h);
        if (e) {
            e->resp_bytes += n;
            if (ts != TB__NO_TS) {
                e->resp_seen = true;
                if (ts > e->last_ns)
                    e->last_ns = ts;
            }
        }
    }
}

static void set_flag(struct h1 *h, int dir, uint32_t f, int64_t ts)
{
    struct tb__pend *e = dir == TB_DIR_C2S ? creq(h) : cresp(h);
    if (e) {
        e->flags |= f;
        if (dir == TB_DIR_S2C && ts > e->last_ns)
            e->last_ns = ts;
    }
}

static void reset_msg(struct h1_dir *d)
{
    d->has_cl = d->te = d->chunked = false;
    d->left = d->cl = 0;
    d->hdr_bytes = 0;
}

static uint64_t ld64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Index of the first byte at or after i that is below 0x21 or is DEL, or n. */
static size_t target_end(const char *s, size_t i, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Eight bytes at a time. (w - 0x21…) & ~w & 0x80… flags the bytes below
     * 0x21, and the same test on w ^ 0x7f… the DEL bytes; a borrow can flag a
     * byte wrongly only above one flagged rightly, so the lowest flag, the
     * first byte in memory, is exact. A request line has eight more bytes
     * ("HTTP/1.1") after its target, so the tail loop is rarely reached. */
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (n - i >= 8) {
        uint64_t w = ld64(s + i), x = w ^ (0x7f * ones);
        uint64_t hit = (((w - 0x21 * ones) & ~w) | ((x - ones) & ~x)) & highs;
        if (hit)
            return i + (size_t)__builtin_ctzll(hit) / 8;
        i += 8;
    }
#endif
    while (i < n && (unsigned char)s[i] >= 0x21 && (unsigned char)s[i] != 0x7f)
        i++;
    return i;
}

/* "GET /a/b?x=1 HTTP/1.1" → method, target. */
static bool parse_request_line(const char *s, size_t n, size_t *mlen, const char **tgt,
                               size_t *tlen)
{
    size_t i = 0, mmax = TB_MIN(n, (size_t)H_METHOD_MAX + 1);
    while (i < mmax && is_tchar_upper(s[i]))
        i++;
    if (i == 0 || i > H_METHOD_MAX || i >= n || s[i] != ' ')
        return false;
    *mlen = i;
    size_t t0 = ++i;
    /* One pass finds the end of the target and checks its bytes: the space
     * that ends it is the first byte below 0x21, so stopping at any byte below
     * 0x21 or at DEL and then asking for a space rejects exactly the lines
     * whose target, up to the first space, holds such a byte. */
    i = target_end(s, i, n);
    if (i == t0 || i >= n || s[i] != ' ')
        return false;
    *tgt = s + t0;
    *tlen = i - t0;
    i++;
    if (n - i != 8 || memcmp(s + i, "HTTP/1.", 7) != 0 || s[i + 7] < '0' || s[i + 7] > '9')
        return false;
    return true;
}

static bool parse_status_line(const char *s, size_t n, int32_t *status)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
        return false;
    int32_t v = 0;
    for (int i = 9; i < 12; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (n > 12 && s[12] != ' ')
        return false;
    if (v < 100)
        return false;
    *status = v;
    return true;
}

static void trim(const char **v, size_t *n)
{
    while (*n && (**v == ' ' || **v == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

/* Do the k bytes at s (8 <= k <= 24) spell `name` (k bytes, lower case) but
 * for ASCII case, as strncasecmp would have it? `fold` has 0x20 where name has
 * a letter and 0 elsewhere: OR-ed into the input it lowers a capital letter
 * and maps no other byte onto a lower-case one, while a '-' still matches
 * only a '-'. Eight bytes at a time, the last word overlapping the one
 * before. */
static bool name_eq(const char *s, const char *name, const char *fold, size_t k)
{
    size_t i = 0;
    for (; i + 8 < k; i += 8)
        if ((ld64(s + i) | ld64(fold + i)) != ld64(name + i))
            return false;
    return (ld64(s + k - 8) | ld64(fold + k - 8)) == ld64(name + k - 8);
}

/* Returns false on a malformed framing field (the message cannot be delimited). */
static bool parse_field(struct h1_dir *d, const char *s, size_t n)
{
    /* Only Content-Length (14) and Transfer-Encoding (17) frame a message. A
     * field name ends at the line's first colon and neither name holds one,
     * so a line is one of them exactly when its first 14 (17) bytes spell the
     * name and a colon follows. Every other line (another field, an obs-fold
     * continuation, which starts with a space or tab, a line with no colon,
     * which servers reject and we just look past) is done with after one or
     * two byte compares. */
    size_t nlen;
    if (n > 14 && s[14] == ':' &&
        name_eq(s, "content-length", "       \0      ", 14))
        nlen = 14;
    else if (n > 17 && s[17] == ':' &&
             name_eq(s, "transfer-encoding", "        \0        ", 17))
        nlen = 17;
    else
        return true;
    const char *v = s + nlen + 1;
    size_t vlen = n - nlen - 1;
    trim(&v, &vlen);
    if (nlen == 14) {
        /* A list of identical values is allowed (RFC 9110 §8.6). */
        uint64_t val = 0;
        size_t digits = 0;
        bool any = false;
        for (size_t i = 0; i <= vlen; i++) {
            if (i == vlen || v[i] == ',') {
                if (digits == 0)
                    return false;
                if (any && val != d->cl)
                    return false;
                d->cl = val;
                any = true;
                val = 0;
                digits = 0;
                while (i + 1 < vlen && (v[i + 1] == ' ' || v[i + 1] == '\t'))
                    i++;
                continue;
            }
            if (v[i] < '0' || v[i] > '9' || ++digits > 18)
                return false;
            val = val * 10 + (uint64_t)(v[i] - '0');
        }
        if (d->has_cl && val != d->cl)
            return false;
        d->has_cl = true;
    } else {
        /* Chunked only counts when it is the final coding. */
        size_t e = vlen;
        while (e && (v[e - 1] == ' ' || v[e - 1] == '\t' || v[e - 1] == ','))
            e--;
        size_t b = e;
        while (b && v[b - 1] != ',' && v[b - 1] != ' ' && v[b - 1] != '\t')
            b--;
        d->te = true;
        d->chunked = e - b == 7 && strncasecmp(v + b, "chunked", 7) == 0;
    }
    return true;
}

/* ---- state changes ---------------------------------------------------- */

static void lose_sync(struct h1 *h, const struct tb_proto_ctx *ctx, int dir, bool error,
                      bool gap)
{
    struct h1_dir *d = &h->d[dir];
    if (dir == TB_DIR_C2S) {
        /* The request itself was seen; its response will still pair with it. */
        if (gap)
            set_flag(h, dir, TB_REQ_GAP, 0);
        h->creq_live = false;
    } else if (h->resp_live) {
        struct tb__pend *e = cresp(h);
        if (gap && e && e->resp_seen) {
            /* Its status is known; its end lies before the next status line
             * (responses come in order), which will close it, GAP set. */
            e->flags |= TB_REQ_GAP;
            h->resp_lost = true;
            h->lost_status = h->status;
        } else if (h->resp_bound) {
            tb__pq_pop(&h->pq); /* where it ends cannot be told */
        }
        h->resp_live = false;
    } else if (gap && !h->resp_lost && tb__pq_head(&h->pq)) {
        /* The hole took the start of the oldest unanswered request's response
         * (responses come in order): leaving that request at the head would
         * pair it with the next response and shift every later pair. The
         * next status line closes it, GAP set, with the times of whatever of
         * it was captured; when nothing was, it is not reported. */
        tb__pq_head(&h->pq)->flags |= TB_REQ_GAP;
        h->resp_lost = true;
        h->lost_status = -1;
    }
    tb__line_reset(&d->ln);
    reset_msg(d);
    d->st = H_RESYNC;
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

static void req_done(struct h1 *h)
{
    h->creq_live = false;
    h->d[TB_DIR_C2S].st = H_LINE;
    reset_msg(&h->d[TB_DIR_C2S]);
}

static void resp_done(struct h1 *h, const struct tb_proto_ctx *ctx, uint32_t flags)
{
    if (h->resp_bound)
        tb__pq_emit_head(&h->pq, ctx, h->status, flags, NULL, 0);
    h->resp_live = false;
    h->d[TB_DIR_S2C].st = H_LINE;
    reset_msg(&h->d[TB_DIR_S2C]);
}

static bool start_request(struct h1 *h, const struct tb_proto_ctx *ctx, const char *line,
                          size_t n, uint64_t raw, int64_t ts0)
{
    size_t mlen, tlen;
    const char *tgt;
    if (!parse_request_line(line, n, &mlen, &tgt, &tlen))
        return false;
    struct h1_dir *d = &h->d[TB_DIR_C2S];
    reset_msg(d);
    d->hdr_bytes = (uint32_t)raw;
    d->st = H_HDR;
    struct tb__pend *e = tb__pq_push(&h->pq, ctx->ctr, ts0);
    if (!e) {
        h->creq_live = false;
        return true;
    }
    h->creq_live = true;
    h->creq_seq = e->seq;
    e->kind = (mlen == 4 && memcmp(line, "HEAD", 4) == 0)      ? K_HEAD
              : (mlen == 7 && memcmp(line, "CONNECT", 7) == 0) ? K_CONNECT
                                                               : K_OTHER;
    /* Straight into the entry's text: the result is at most TB__CLASS_MAX - 1
     * bytes, which is what tb__pq_set_class would have kept of a copy. */
    char *cls = tb__pq_cls(&h->pq, e);
    e->class_len = cls ? (uint16_t)tb_fp_http(line, mlen, tgt, tlen, cls, TB__CLASS_MAX) : 0;
    e->req_bytes = raw;
    return true;
}

static void lost_more(struct h1 *h, uint64_t n, int64_t ts)
{
    struct tb__pend *e = h->resp_lost ? tb__pq_head(&h->pq) : NULL;
    if (e) {
        e->resp_bytes += n;
        if (ts != TB__NO_TS) {
            e->resp_seen = true;
            e->last_ns = TB_MAX(e->last_ns, ts);
        }
    }
}

static void lost_done(struct h1 *h, const struct tb_proto_ctx *ctx)
{
    if (h->resp_lost)
        tb__pq_emit_head(&h->pq, ctx, h->lost_status, 0, NULL, 0);
    h->resp_lost = false;
}

/* `pre`: bytes of the same line before the status line (the tail of a
 * response whose framing was lost). */
static bool start_response(struct h1 *h, const struct tb_proto_ctx *ctx, const char *line,
                           size_t n, uint64_t raw, uint64_t pre, int64_t pre_ts, int64_t ts)
{
    int32_t status;
    if (!parse_status_line(line, n, &status))
        return false;
    if (h->resp_lost) {
        if (pre)
            lost_more(h, pre, pre_ts); /* they arrived with the line's first byte */
        lost_done(h, ctx);
    }
    struct h1_dir *d = &h->d[TB_DIR_S2C];
    reset_msg(d);
    d->hdr_bytes = (uint32_t)raw;
    d->st = H_HDR;
    if (!h->resp_live) {
        h->resp_live = true;
        /* Only a request whose line has been seen can be answered; a request
         * lost in a capture hole leaves its response unpaired. */
        h->resp_bound = h->pq.len > 0;
        if (!h->resp_bound && h->pq.untracked > 0)
            tb__pq_pop(&h->pq); /* answers a request we could not queue */
    }
    h->status = status;
    acct(h, TB_DIR_S2C, raw, ts);
    return true;
}

/* End of the header section: decide how the body is delimited. */
static enum tb_pstate headers_done(struct h1 *h, const struct tb_proto_ctx *ctx, int dir)
{
    struct h1_dir *d = &h->d[dir];
    if (dir == TB_DIR_C2S) {
        if (d->te) {
            if (!d->chunked) {
                lose_sync(h, ctx, dir, true, false); /* RFC 9112 §6.3 item 4: unframeable */
                return TB_PS_ERROR;
            }
            d->st = H_CHUNK_SIZE;
        } else if (d->has_cl && d->cl > 0) {
            d->left = d->cl;
            d->st = H_BODY;
        } else {
            req_done(h);
        }
        return TB_PS_OK;
    }
    struct tb__pend *e = cresp(h);
    uint8_t kind = e ? e->kind : K_OTHER;
    int32_t s = h->status;
    if (s >= 100 && s < 200) {
        if (s == 101) {
            resp_done(h, ctx, 0);
            h->stopped = true;
            return TB_PS_STOP;
        }
        d->st = H_LINE; /* interim: the final response follows */
        reset_msg(d);
        return TB_PS_OK;
    }
    if (kind == K_HEAD || s == 204 || s == 304) {
        resp_done(h, ctx, 0);
    } else if (kind == K_CONNECT && s >= 200 && s < 300) {
        resp_done(h, ctx, 0);
        h->stopped = true; /* a tunnel now */
        return TB_PS_STOP;
    } else if (d->te) {
        d->st = d->chunked ? H_CHUNK_SIZE : H_CLOSE;
    } else if (d->has_cl) {
        if (d->cl == 0)
            resp_done(h, ctx, 0);
        else {
            d->left = d->cl;
            d->st = H_BODY;
        }
    } else {
        d->st = H_CLOSE;
    }
    return TB_PS_OK;
}

static void msg_done(struct h1 *h, const struct tb_proto_ctx *ctx, int dir)
{
    if (dir == TB_DIR_C2S)
        req_done(h);
    else
        resp_done(h, ctx, 0);
}

static bool parse_chunk_size(const char *s, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        int x = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (x < 0)
            break;
        if (++i > 15)
            return false;
        v = v * 16 + (uint64_t)x;
    }
    if (i == 0)
        return false;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i < n && s[i] != ';')
        return false;
    *size = v;
    return true;
}

/* ---- descriptor hooks ------------------------------------------------- */

static enum tb_pstate feed(struct h1 *h, const struct tb_proto_ctx *ctx, int dir,
                           const uint8_t *p, const uint8_t *end, int64_t ts)
{
    struct h1_dir *d = &h->d[dir];
    enum tb_pstate ret = TB_PS_OK;
    while (p < end && !h->stopped) {
        const uint8_t *p0 = p;
        const char *line;
        size_t llen;
        uint64_t raw;
        int64_t ts0;
        int r;
        switch (d->st) {
        case H_LINE:
        case H_RESYNC: {
            bool resync = d->st == H_RESYNC;
            r = tb__line_take(&d->ln, &p, end, resync ? H_RESYNC_LINE_MAX : H_HDR_MAX, ts, &line,
                              &llen, &raw, &ts0);
            if (r == TB__LINE_MORE)
                break;
            if (r != TB__LINE_OK) {
                if (!resync) {
                    lose_sync(h, ctx, dir, true, false);
                    ret = TB_PS_ERROR;
                } else if (dir == TB_DIR_S2C) {
                    lost_more(h, (uint64_t)(p - p0), ts);
                }
                break;
            }
            if (llen == 0 && !resync)
                break; /* RFC 9112 §2.2: ignore empty lines before a request-line */
            bool ok = dir == TB_DIR_C2S ? start_request(h, ctx, line, llen, raw, ts0)
                                        : start_response(h, ctx, line, llen, raw, 0, ts0, ts);
            if (!ok && !resync) {
                lose_sync(h, ctx, dir, true, false);
                ret = TB_PS_ERROR;
            }
            /* After a hole the start line may follow the tail of a body on
             * the same line ("…}HTTP/1.1 200 OK"): look inside it too. */
            for (size_t i = 1; !ok && resync && i + 8 < llen; i++) {
                if (dir == TB_DIR_S2C && line[i] == 'H')
                    ok = start_response(h, ctx, line + i, llen - i, raw - i, i, ts0, ts);
                else if (dir == TB_DIR_C2S && is_tchar_upper(line[i]) &&
                         !is_tchar_upper(line[i - 1]))
                    ok = start_request(h, ctx, line + i, llen - i, raw - i, ts0);
            }
            if (!ok && resync && dir == TB_DIR_S2C)
                lost_more(h, (uint64_t)(p - p0), ts); /* the lost response's tail */
            break;
        }
        case H_HDR:
            if (d->ln.len == 0 && !d->ln.skipping) {
                /* Fast path: while whole field lines are in this chunk, read them
                 * in place and account their bytes once (they share the chunk's
                 * timestamp, and nothing between them changes which request the
                 * bytes belong to, so one acct() gives the same sums as one per
                 * line). A partial or over-long line is left to the line
                 * assembler below, reached when no line was taken here. */
                const uint8_t *q = p;
                const uint8_t *nl;
                bool halt = false;
                while (!halt && (nl = memchr(q, '\n', (size_t)(end - q))) != NULL) {
                    size_t n = (size_t)(nl - q);
                    if (n > H_HDR_MAX)
                        break; /* the assembler reports it as too long */
                    const char *s = (const char *)q;
                    q = nl + 1;
                    /* n <= H_HDR_MAX, so the TB_MIN cap of the slow path is a no-op. */
                    d->hdr_bytes += (uint32_t)(n + 1);
                    if (n > 0 && s[n - 1] == '\r')
                        n--;
                    if (d->hdr_bytes > H_HDR_MAX || (n > 0 && !parse_field(d, s, n))) {
                        acct(h, dir, (uint64_t)(q - p), ts);
                        p = q;
                        lose_sync(h, ctx, dir, true, false);
                        ret = TB_PS_ERROR;
                        halt = true;
                    } else if (n == 0) {
                        /* Accounted before headers_done(): it may finish the
                         * message and move on to another request. */
                        acct(h, dir, (uint64_t)(q - p), ts);
                        p = q;
                        if (headers_done(h, ctx, dir) == TB_PS_ERROR)
                            ret = TB_PS_ERROR;
                        halt = true;
                    }
                }
                if (halt)
                    break;
                if (q != p) {
                    acct(h, dir, (uint64_t)(q - p), ts);
                    p = q;
                    break;
                }
            }
            TB_FALLTHROUGH;
        case H_TRAILER:
            r = tb__line_take(&d->ln, &p, end, H_HDR_MAX, ts, &line, &llen, &raw, &ts0);
            acct(h, dir, (uint64_t)(p - p0), ts);
            if (r == TB__LINE_MORE)
                break;
            if (r == TB__LINE_OK)
                d->hdr_bytes += (uint32_t)TB_MIN(raw, (uint64_t)H_HDR_MAX + 1);
            if (r != TB__LINE_OK || d->hdr_bytes > H_HDR_MAX) {
                lose_sync(h, ctx, dir, true, false);
                ret = TB_PS_ERROR;
                break;
            }
            if (llen > 0) {
                if (d->st == H_HDR && !parse_field(d, line, llen)) {
                    lose_sync(h, ctx, dir, true, false);
                    ret = TB_PS_ERROR;
                }
                break;
            }
            if (d->st == H_TRAILER)
                msg_done(h, ctx, dir);
            else if (headers_done(h, ctx, dir) == TB_PS_ERROR)
                ret = TB_PS_ERROR;
            break;
        case H_BODY:
        case H_CHUNK_DATA: {
            uint64_t k = TB_MIN(d->left, (uint64_t)(end - p));
            p += k;
            d->left -= k;
            acct(h, dir, k, ts);
            if (d->left == 0) {
                if (d->st == H_BODY)
                    msg_done(h, ctx, dir);
                else
                    d->st = H_CHUNK_END;
            }
            break;
        }
        case H_CHUNK_SIZE:
        case H_CHUNK_END:
            r = tb__line_take(&d->ln, &p, end, H_CHUNK_LINE_MAX, ts, &line, &llen, &raw, &ts0);
            acct(h, dir, (uint64_t)(p - p0), ts);
            if (r == TB__LINE_MORE)
                break;
            if (r == TB__LINE_OK && d->st == H_CHUNK_END && llen == 0) {
                d->st = H_CHUNK_SIZE;
                break;
            }
            if (r == TB__LINE_OK && d->st == H_CHUNK_SIZE &&
                parse_chunk_size(line, llen, &d->left)) {
                d->st = d->left ? H_CHUNK_DATA : H_TRAILER;
                break;
            }
            lose_sync(h, ctx, dir, true, false);
            ret = TB_PS_ERROR;
            break;
        case H_CLOSE:
            acct(h, dir, (uint64_t)(end - p), ts);
            p = end;
            break;
        }
    }
    return h->stopped ? TB_PS_STOP : ret;
}

static enum tb_pstate h1_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct h1 *h = st;
    if (h->stopped)
        return TB_PS_STOP;
    return feed(h, ctx, dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C, p, p + n, ts);
}

static enum tb_pstate h1_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct h1 *h = st;
    if (h->stopped)
        return TB_PS_STOP;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct h1_dir *d = &h->d[di];
    switch (d->st) {
    case H_BODY:
    case H_CHUNK_DATA:
        /* Inside a body of known length: skip the hole and keep pairing. */
        if (len > 0 && len <= d->left) {
            d->left -= len;
            acct(h, di, len, ts); /* the length is known even if the bytes are not */
            set_flag(h, di, TB_REQ_GAP, ts);
            if (d->left == 0) {
                if (d->st == H_BODY)
                    msg_done(h, ctx, di);
                else
                    d->st = H_CHUNK_END;
            }
            return TB_PS_OK;
        }
        break;
    case H_CLOSE:
        acct(h, di, len, ts);
        set_flag(h, di, TB_REQ_GAP, ts);
        return TB_PS_OK;
    case H_RESYNC:
        tb__line_reset(&d->ln);
        if (di == TB_DIR_S2C)
            lost_more(h, len, ts);
        return TB_PS_OK;
    default:
        break;
    }
    bool was_live = h->resp_live;
    if (di == TB_DIR_S2C)
        acct(h, di, len, ts); /* kept if the response is (see lose_sync) */
    lose_sync(h, ctx, di, false, true);
    if (di == TB_DIR_S2C && !was_live && h->resp_lost)
        lost_more(h, len, ts); /* the hole was the start of the head's answer */
    return TB_PS_OK;
}

static void h1_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct h1 *h = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    lost_done(h, ctx);
    struct tb__pend *e = cresp(h);
    if (e && h->d[TB_DIR_S2C].st == H_CLOSE) {
        resp_done(h, ctx, TB_REQ_CLOSE_DELIM);
    } else if (e && e->resp_seen) {
        /* Cut short: the times are what was seen; the flag says so. */
        resp_done(h, ctx, TB_REQ_NORESP);
    }
    h->resp_live = false;
    h->stopped = true;
}

static void h1_init(void *st, bool midstream)
{
    struct h1 *h = st;
    memset(h, 0, sizeof *h);
    /* Mid-stream the first bytes may be the middle of a message. */
    if (midstream)
        h->d[0].st = h->d[1].st = H_RESYNC;
}

static uint32_t h1_waiting(const void *st)
{
    return tb__pq_waiting(&((const struct h1 *)st)->pq);
}

static void h1_fini(void *st)
{
    struct h1 *h = st;
    tb__pq_free(&h->pq);
    tb__line_free(&h->d[0].ln);
    tb__line_free(&h->d[1].ln);
}

static const char *const methods[] = {"GET",   "POST",    "HEAD",    "PUT",      "DELETE",
                                      "OPTIONS", "PATCH", "TRACE",   "CONNECT",  "PROPFIND",
                                      "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK",
                                      "REPORT", "PURGE"};

static enum tb_detect h1_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    enum tb_detect best = TB_DETECT_NO;
    static const char status[] = "HTTP/1.";
    size_t k = TB_MIN(n, sizeof status - 1);
    if (n > 0 && memcmp(p, status, k) == 0) {
        *client_sent = false;
        if (n < 12)
            return TB_DETECT_MAYBE;
        int32_t s;
        const uint8_t *nl = memchr(p, '\n', n);
        size_t ll = nl ? (size_t)(nl - p) : 12;
        if (nl && ll && p[ll - 1] == '\r')
            ll--;
        if (!parse_status_line((const char *)p, ll, &s))
            return TB_DETECT_NO;
        *client_sent = false;
        return TB_DETECT_YES;
    }
    for (size_t i = 0; i < TB_ARRAY_SIZE(methods); i++) {
        size_t ml = strlen(methods[i]);
        if (n <= ml) {
            if (memcmp(p, methods[i], n) == 0) {
                *client_sent = true;
                best = TB_DETECT_MAYBE;
            }
            continue;
        }
        if (memcmp(p, methods[i], ml) == 0 && p[ml] == ' ') {
            /* "GET /x HTTP/1.1": check the version when the line is all here. */
            const uint8_t *nl = memchr(p, '\n', n);
            if (nl) {
                size_t ll = (size_t)(nl - p), tl;
                const char *t;
                size_t mlen;
                if (ll && p[ll - 1] == '\r')
                    ll--;
                if (!parse_request_line((const char *)p, ll, &mlen, &t, &tl))
                    return TB_DETECT_NO;
            }
            *client_sent = true;
            return TB_DETECT_YES;
        }
    }
    return best;
}

static const uint16_t h1_ports[] = {80, 8080, 8000, 8008, 8081, 8888, 3128, 0};

const struct tb_proto tb_proto_http1 = {
    .name = "http",
    .ports = h1_ports,
    .state_size = sizeof(struct h1),
    .detect = h1_detect,
    .init = h1_init,
    .consume = h1_consume,
    .gap = h1_gap,
    .close = h1_close,
    .fini = h1_fini,
    .waiting = h1_waiting,
};
