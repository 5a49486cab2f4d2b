/* SPDX-License-Identifier: MIT */
/* tls.c — TLS-encrypted connections (TLS 1.0–1.3) timed by their records:
 * RFC 8446 (TLS 1.3) §4.1.2–§4.1.3, §4.2.1, §5.1–§5.2; RFC 5246 (TLS 1.2) §6.2;
 * RFC 6066 §3 (server_name).
 *
 * Every record:  type(1)  int<2> version (3, 1..4)  int<2> length  fragment[length]
 *   type 20 change_cipher_spec, 21 alert, 22 handshake, 23 application_data
 *   length at most 2^14 + 2048 (TLS 1.2 ciphertext; TLS 1.3 allows 2^14 + 256)
 * The ClientHello and ServerHello travel in clear handshake records:
 *   handshake  msg_type(1) int<3> length  body
 *   ClientHello (1)  int<2> legacy_version, random[32], session_id<0..32>,
 *                    cipher_suites<2..2^16-2>, compression<1..2^8-1>, extensions<..>
 *   ServerHello (2)  int<2> legacy_version, random[32], session_id<0..32>,
 *                    int<2> cipher_suite, compression(1), extensions<..>
 *   extension  int<2> type, int<2> length, data: server_name (0) = list of
 *              {name_type(1) = 0 host_name, int<2> n, name[n]}; supported_versions
 *              (43) in a ServerHello = the chosen version (0x0304 for TLS 1.3)
 *
 * Nothing inside application data can be read, so an exchange is a turn: a
 * run of client application-data records is a request, from the first byte
 * of its first record; the server's application-data records that follow,
 * until the client's next application-data record, are its response, to the
 * last byte of its last record (close delimits the last one). Handshake,
 * alert and change_cipher_spec records take no part. Sizes are record bytes
 * (headers included). Status is always -1; the class is the server name the
 * client asked for (SNI, lower case), "tls" when none was seen.
 *
 * TLS 1.3 (the ServerHello chose 0x0304) encrypts the rest of the handshake
 * in records typed application data: the server's (EncryptedExtensions …
 * Finished) come before any request and answer nothing; the client's first
 * one is its Finished (OpenSSL and the other common stacks send a client
 * certificate flight in that same record), skipped. Session tickets the server
 * sends after the handshake join the first response when the first request
 * was already under way (its departure does not move: the answer comes after
 * them) and are ignored otherwise. An encrypted alert is 19 bytes (2 bytes of
 * alert, the inner type and a 16-byte tag): such records are not requests or
 * answers (a close_notify at the end of a connection would otherwise be).
 * Not handled: 0-RTT early data (its client Finished would count as a request).
 *
 * Approximate by nature: pipelined HTTP/1.1 requests, and HTTP/2 streams
 * multiplexed on one connection, merge into one exchange per turn; the
 * response time is that of the turn. For one request at a time per
 * connection (HTTP/1.1 keep-alive, most database and RPC clients), it is the
 * request's.
 */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"
#include "rd.h"

#define TLS_REC_MAX (16384u + 2048u)
#define TLS_HELLO_MAX 8192u   /* handshake bytes kept to read a hello */
#define TLS_SNI_MAX 255u
#define TLS13_ALERT_LEN 19u

enum { CT_CCS = 20, CT_ALERT = 21, CT_HANDSHAKE = 22, CT_APP = 23, CT_HEARTBEAT = 24 };

static const char tls_class[] = "tls";

struct tls_dir {
    uint8_t hdr[5];
    uint8_t hdr_have;
    bool synced;
    bool in_rec;
    bool app;        /* the current record counts toward the exchange */
    bool hello;      /* the current record's bytes go to the hello buffer */
    bool hello_done; /* this side's hello was read (or given up) */
    uint8_t type;
    uint16_t left;   /* record bytes still to come */
    uint16_t hs_len;
    uint8_t *hs;     /* hello bytes (TLS_HELLO_MAX), freed once read */
    int64_t ts0;     /* chunk that carried the record's first byte */
};

struct tls {
    struct tls_dir d[2];
    bool v13;
    uint8_t c_skip;  /* client application-data records that are handshake */
    /* the exchange */
    bool req_live;   /* a client turn began */
    bool resp_live;  /* the server answered it */
    bool resp_seen;  /* ... with bytes of a known time */
    bool orphan;     /* its start was lost: not reported */
    bool stopped;
    uint32_t flags;
    int64_t arrival_ns, departure_ns;
    uint64_t req_bytes, resp_bytes;
    uint16_t sni_len;
    char *sni;       /* TLS_SNI_MAX bytes, allocated when a name is seen */
};

/* ---- the exchange ----------------------------------------------------- */

static void finish(struct tls *t, const struct tb_proto_ctx *ctx, uint32_t flags)
{
    if (t->resp_seen && !t->orphan) {
        struct tb_exchange ex = {
            .arrival_ns = t->arrival_ns,
            .departure_ns = TB_MAX(t->departure_ns, t->arrival_ns),
            .req_bytes = t->req_bytes,
            .resp_bytes = t->resp_bytes,
            .class_text = t->sni_len ? t->sni : tls_class,
            .class_len = t->sni_len ? t->sni_len : sizeof tls_class - 1,
            .status = -1,
            .flags = t->flags | flags,
        };
        if (ctx->emit)
            ctx->emit(ctx->ud, &ex);
    }
    t->req_live = t->resp_live = t->resp_seen = t->orphan = false;
    t->flags = 0;
}

/* `n` application bytes of `dir`; `ts` the time of the chunk that carried the
 * first of them (TB__NO_TS for a hole). */
static void turn(struct tls *t, const struct tb_proto_ctx *ctx, int dir, uint64_t n, int64_t ts)
{
    if (dir == TB_DIR_C2S) {
        if (t->resp_live)
            finish(t, ctx, 0); /* the client speaks again: the answer is over */
        if (!t->req_live) {
            t->req_live = true;
            t->orphan = ts == TB__NO_TS; /* a request whose first bytes were lost */
            t->arrival_ns = ts;
            t->req_bytes = t->resp_bytes = 0;
            t->flags = t->orphan ? TB_REQ_GAP : 0;
        }
        t->req_bytes += n;
        return;
    }
    if (!t->req_live)
        return; /* nothing asked: handshake tail, tickets, a banner */
    t->resp_live = true;
    t->resp_bytes += n;
    if (ts != TB__NO_TS) {
        t->departure_ns = t->resp_seen ? TB_MAX(t->departure_ns, ts) : ts;
        t->resp_seen = true;
    }
}

/* ---- hellos ----------------------------------------------------------- */

static bool rd_skip8(struct tb_rd *r)
{
    uint8_t n;
    return tb_rd_u8(r, &n) && tb_rd_skip(r, n);
}

static bool rd_skip16(struct tb_rd *r)
{
    uint16_t n;
    return tb_rd_be16(r, &n) && tb_rd_skip(r, n);
}

static void client_hello(struct tls *t, const uint8_t *p, size_t n)
{
    struct tb_rd r = tb_rd_make(p, n);
    uint8_t type;
    uint16_t ext_len;
    if (!tb_rd_u8(&r, &type) || type != 1 || !tb_rd_skip(&r, 3 + 2 + 32) || !rd_skip8(&r) ||
        !rd_skip16(&r) || !rd_skip8(&r) || !tb_rd_be16(&r, &ext_len))
        return;
    /* Extensions as far as they were kept (the hello may exceed TLS_HELLO_MAX). */
    struct tb_rd ex = tb_rd_make(r.p, TB_MIN((size_t)ext_len, tb_rd_left(&r)));
    uint16_t et, el;
    while (tb_rd_be16(&ex, &et) && tb_rd_be16(&ex, &el)) {
        if (et != 0) {
            if (!tb_rd_skip(&ex, el))
                return;
            continue;
        }
        struct tb_rd sn = tb_rd_make(ex.p, TB_MIN((size_t)el, tb_rd_left(&ex)));
        uint16_t list;
        uint8_t nt;
        uint16_t nl;
        if (!tb_rd_be16(&sn, &list))
            return;
        while (tb_rd_u8(&sn, &nt) && tb_rd_be16(&sn, &nl) && tb_rd_has(&sn, nl)) {
            if (nt == 0 && nl > 0) {
                size_t k = TB_MIN((size_t)nl, (size_t)TLS_SNI_MAX);
                if (!t->sni && !(t->sni = malloc(TLS_SNI_MAX)))
                    return; /* the class stays "tls" */
                for (size_t i = 0; i < k; i++) {
                    uint8_t c = sn.p[i];
                    /* Host names compare without case; no control byte reaches a class. */
                    t->sni[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32)
                                : c < 0x21 || c > 0x7e ? '?'
                                                        : (char)c;
                }
                t->sni_len = (uint16_t)k;
                return;
            }
            sn.p += nl;
        }
        return;
    }
}

static void server_hello(struct tls *t, const uint8_t *p, size_t n)
{
    struct tb_rd r = tb_rd_make(p, n);
    uint8_t type;
    uint16_t ext_len, et, el, v;
    if (!tb_rd_u8(&r, &type) || type != 2 || !tb_rd_skip(&r, 3 + 2 + 32) || !rd_skip8(&r) ||
        !tb_rd_skip(&r, 3) || !tb_rd_be16(&r, &ext_len))
        return; /* no extensions: TLS 1.2 or older */
    struct tb_rd ex = tb_rd_make(r.p, TB_MIN((size_t)ext_len, tb_rd_left(&r)));
    while (tb_rd_be16(&ex, &et) && tb_rd_be16(&ex, &el)) {
        struct tb_rd e = tb_rd_make(ex.p, TB_MIN((size_t)el, tb_rd_left(&ex)));
        if (et == 43 && tb_rd_be16(&e, &v) && (v == 0x0304 || (v >> 8) == 0x7f)) {
            /* TLS 1.3 (or one of its drafts, 0x7fxx). */
            t->v13 = true;
            t->c_skip = 1; /* the client's Finished */
            return;
        }
        if (!tb_rd_skip(&ex, el))
            return;
    }
}

static void hello_done(struct tls_dir *d)
{
    d->hello_done = true;
    d->hello = false;
    free(d->hs);
    d->hs = NULL;
}

/* Handshake bytes of a side whose hello is still to be read. */
static void hello_feed(struct tls *t, int dir, const uint8_t *p, size_t k)
{
    struct tls_dir *d = &t->d[dir];
    if (!d->hs && !(d->hs = malloc(TLS_HELLO_MAX))) {
        hello_done(d);
        return;
    }
    size_t c = TB_MIN(k, (size_t)(TLS_HELLO_MAX - d->hs_len));
    memcpy(d->hs + d->hs_len, p, c);
    d->hs_len = (uint16_t)(d->hs_len + c);
    if (d->hs_len < 4)
        return;
    size_t want = 4u + ((size_t)d->hs[1] << 16 | (size_t)d->hs[2] << 8 | d->hs[3]);
    if (d->hs_len < want && d->hs_len < TLS_HELLO_MAX)
        return;
    if (dir == TB_DIR_C2S)
        client_hello(t, d->hs, d->hs_len);
    else
        server_hello(t, d->hs, d->hs_len);
    hello_done(d);
}

/* ---- records ---------------------------------------------------------- */

static bool hdr_plausible(const uint8_t *h)
{
    return h[0] >= CT_CCS && h[0] <= CT_HEARTBEAT && h[1] == 3 && h[2] <= 4 &&
           ((size_t)h[3] << 8 | h[4]) <= TLS_REC_MAX;
}

/* A record header is complete: what its bytes count for. */
static void rec_start(struct tls *t, const struct tb_proto_ctx *ctx, int dir, int64_t ts)
{
    struct tls_dir *d = &t->d[dir];
    uint16_t len = (uint16_t)(d->hdr[3] << 8 | d->hdr[4]);
    d->type = d->hdr[0];
    d->left = len;
    d->in_rec = true;
    d->hello = d->type == CT_HANDSHAKE && !d->hello_done;
    d->app = false;
    if (d->type == CT_APP) {
        if (t->v13 && len == TLS13_ALERT_LEN) {
            /* an encrypted alert */
        } else if (dir == TB_DIR_C2S && t->c_skip > 0) {
            t->c_skip--; /* the client's encrypted handshake flight */
        } else {
            d->app = true;
        }
    }
    if (d->type != CT_HANDSHAKE && !d->hello_done)
        hello_done(d); /* past the hellos: whatever was kept is not one */
    if (d->app)
        turn(t, ctx, dir, 5, dir == TB_DIR_C2S ? d->ts0 : ts);
}

static void lose_sync(struct tls *t, const struct tb_proto_ctx *ctx, int dir, bool error)
{
    struct tls_dir *d = &t->d[dir];
    d->synced = false;
    d->in_rec = false;
    d->hdr_have = 0;
    if (!d->hello_done)
        hello_done(d);
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

/* Unsynchronised: the offset of the first byte in the chunk that starts a
 * believable record (followed by another when the chunk shows the next), or n. */
static size_t find_sync(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 5 <= n; i++) {
        if (p[i + 1] != 3 || !hdr_plausible(p + i) || p[i + 2] == 0)
            continue;
        size_t next = i + 5 + ((size_t)p[i + 3] << 8 | p[i + 4]);
        if (next + 5 <= n && !hdr_plausible(p + next))
            continue;
        return i;
    }
    return n;
}

static enum tb_pstate tls_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                  const uint8_t *p, size_t n, int64_t ts)
{
    struct tls *t = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct tls_dir *d = &t->d[di];
    const uint8_t *end = p + n;
    enum tb_pstate ret = TB_PS_OK;
    if (t->stopped)
        return TB_PS_STOP;
    while (p < end) {
        if (!d->synced) {
            /* Bytes before a record start still take their turn (most are
             * application data), so the exchanges keep pairing. */
            size_t off = find_sync(p, (size_t)(end - p));
            if (off > 0)
                turn(t, ctx, di, off, ts);
            p += off;
            if (p == end)
                break;
            d->synced = true;
            d->hdr_have = 0;
            d->in_rec = false;
        }
        if (!d->in_rec) {
            if (d->hdr_have == 0)
                d->ts0 = ts;
            if (!tb__hdr_take(d->hdr, &d->hdr_have, 5, &p, end))
                break;
            if (!hdr_plausible(d->hdr)) {
                lose_sync(t, ctx, di, true);
                turn(t, ctx, di, 5, di == TB_DIR_C2S ? d->ts0 : ts); /* bytes of the turn */
                ret = TB_PS_ERROR;
                continue;
            }
            rec_start(t, ctx, di, ts);
        }
        size_t k = TB_MIN((size_t)d->left, (size_t)(end - p));
        if (d->app)
            turn(t, ctx, di, k, ts);
        else if (d->hello)
            hello_feed(t, di, p, k);
        p += k;
        d->left = (uint16_t)(d->left - k);
        if (d->left == 0)
            d->in_rec = false;
    }
    return ret;
}

static enum tb_pstate tls_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                              uint64_t len, int64_t ts)
{
    struct tls *t = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct tls_dir *d = &t->d[di];
    if (t->stopped)
        return TB_PS_STOP;
    if (d->synced && d->in_rec && len > 0 && len <= d->left) {
        /* Inside one record: its length still says where the next starts. */
        d->left = (uint16_t)(d->left - len);
        if (d->left == 0)
            d->in_rec = false;
        if (d->hello)
            hello_done(d);
        if (d->app) {
            turn(t, ctx, di, len, ts);
            if (t->req_live)
                t->flags |= TB_REQ_GAP;
        }
        return TB_PS_OK;
    }
    if (d->synced)
        lose_sync(t, ctx, di, false);
    /* Turns are still told by direction. A lost client run that follows an
     * answer starts a request whose arrival is unknown: it and its answer are
     * not reported. */
    if (di == TB_DIR_C2S && t->resp_live) {
        t->flags |= TB_REQ_GAP; /* the answer may have gone on in that time */
        finish(t, ctx, 0);
    }
    turn(t, ctx, di, len, ts);
    if (t->req_live)
        t->flags |= TB_REQ_GAP;
    return TB_PS_OK;
}

static void tls_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct tls *t = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!t->stopped && t->resp_live)
        finish(t, ctx, 0); /* the close ends the last answer */
    t->stopped = true;
}

static void tls_init(void *st, bool midstream)
{
    struct tls *t = st;
    memset(t, 0, sizeof *t);
    /* Mid-stream the first bytes may be inside a record. (A hello is still
     * read if the connection turns out to be in its handshake.) */
    t->d[0].synced = t->d[1].synced = !midstream;
}

static void tls_fini(void *st)
{
    struct tls *t = st;
    for (int i = 0; i < 2; i++) {
        free(t->d[i].hs);
        t->d[i].hs = NULL;
    }
    free(t->sni);
    t->sni = NULL;
}

static enum tb_detect tls_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    static const uint8_t hs[] = {CT_HANDSHAKE, 3};
    if (n < 6) {
        if (memcmp(p, hs, TB_MIN(n, sizeof hs)) == 0 && (n < 3 || p[2] <= 4))
            return TB_DETECT_MAYBE;
        return TB_DETECT_NO;
    }
    if (p[0] == CT_HANDSHAKE && hdr_plausible(p) && (p[5] == 1 || p[5] == 2)) {
        /* A hello: the ClientHello from the client, a ServerHello from the server. */
        *client_sent = p[5] == 1;
        return TB_DETECT_YES;
    }
    /* Mid-stream: application-data records that fill the chunk exactly. */
    size_t i = 0;
    bool app = false;
    while (n - i >= 5 && hdr_plausible(p + i) && p[i + 2] >= 1) {
        app |= p[i] == CT_APP;
        i += 5 + ((size_t)p[i + 3] << 8 | p[i + 4]);
        if (i == n)
            return app ? TB_DETECT_YES : TB_DETECT_NO;
    }
    return TB_DETECT_NO;
}

static const uint16_t tls_ports[] = {443, 8443, 0};

const struct tb_proto tb_proto_tls = {
    .name = "tls",
    .ports = tls_ports,
    .state_size = sizeof(struct tls),
    .detect = tls_detect,
    .init = tls_init,
    .consume = tls_consume,
    .gap = tls_gap,
    .close = tls_close,
    .fini = tls_fini,
};
