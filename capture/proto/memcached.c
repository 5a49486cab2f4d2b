/* SPDX-License-Identifier: MIT */
/* memcached.c — memcached text (with meta commands) and binary protocols:
 * commands paired with their answers (protocol.txt and
 * https://github.com/memcached/memcached/wiki/BinaryProtocolRevamped).
 *
 * Text: a command is one line, words separated by spaces; storage commands
 * carry a data block of the announced length:
 *
 *   get|gets <key>+  gat|gats <exptime> <key>+          → (VALUE <key> <flags> <bytes> [<cas>]
 *                                                          CRLF <data> CRLF)* END
 *   set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply] CRLF <data> CRLF
 *   cas <key> <flags> <exptime> <bytes> <cas> [noreply] CRLF <data> CRLF
 *                                                       → STORED | NOT_STORED | EXISTS | NOT_FOUND
 *   delete <key> [noreply]                              → DELETED | NOT_FOUND
 *   incr|decr <key> <value> [noreply]                   → <number> | NOT_FOUND
 *   touch <key> <exptime> [noreply]                     → TOUCHED | NOT_FOUND
 *   stats [<args>]                                      → (STAT <name> <value>)* END
 *   flush_all [<delay>] [noreply], verbosity, version, … → one line
 *   meta: mg <key> <flags>* → VA <size> <flags>* CRLF <data> CRLF | HD | EN;
 *         ms <key> <size> <flags>* CRLF <data> CRLF → HD | NS | EX | NF;
 *         md, ma → one line (ma may answer VA); mn → MN; me <key> → ME … | EN
 *   errors: ERROR | CLIENT_ERROR <text> | SERVER_ERROR <text>
 *
 * `noreply` asks for no answer at all, and a meta command's `q` flag drops
 * the answers that say nothing new (mg: EN; ms, md, ma: HD), usually followed
 * by `mn`, which is always answered. `quit` closes the connection; `watch`
 * turns it into a log stream (counted, no longer paired).
 *
 * Binary: every packet has a 24-byte header
 *
 *   magic(1: 0x80 request, 0x81 response) opcode(1) key length(2) extras length(1)
 *   data type(1) vbucket / status(2) total body length(4) opaque(4) CAS(8)
 *
 * then extras, key and value. The quiet opcodes (GetQ, GetKQ, SetQ, …) answer
 * only when there is something to say (a hit, an error); a later answer, often
 * to a No-op, shows that the quiet requests before it were answered silently.
 * A Stat request is answered by one packet per statistic, then one with an
 * empty key and body.
 *
 * Both: answers come in command order. A request whose answer is suppressed
 * (noreply, quiet) has no departure and no record; it is counted in
 * "unanswered". Class: the command ("get", "set", "mg", binary "getq", …); a
 * retrieval of several keys adds their number in powers of two ("get 2 keys",
 * "get 3-4 keys", "get 5-8 keys", … "get 65+ keys"). Status: 0 success; the
 * binary protocol's status; text answers on the same scale: NOT_FOUND (and a
 * retrieval with a miss) 1, EXISTS 2, NOT_STORED 5, CLIENT_ERROR 4, ERROR
 * 0x81, SERVER_ERROR 0x84 (docs/protocols.md).
 *
 * Mid-stream the client side synchronises on a chunk that starts with a known
 * command (or a binary request header), the server side on its next chunk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"
#include "rd.h"

#define MC_LINE_MAX (64u * 1024u) /* command and answer lines (multi-gets are long) */
#define MC_DATA_MAX (1u << 30)    /* item size: memcached's largest -I is 1 GiB */
#define MC_HDR 24u
#define MC_WORDS 8u               /* words of a line looked at */

/* Statuses, as the binary protocol numbers them. */
enum {
    ST_OK = 0, ST_NOT_FOUND = 1, ST_EXISTS = 2, ST_TOO_LARGE = 3, ST_INVALID = 4,
    ST_NOT_STORED = 5, ST_UNKNOWN_CMD = 0x81, ST_INTERNAL = 0x84,
};

/* How a text command is answered. */
enum kind {
    K_LINE,     /* one line */
    K_RETR,     /* VALUE blocks until END */
    K_LIST,     /* lines until END (stats, lru_crawler metadump) */
    K_META,     /* one line, or VA with a data block */
};

/* Meta answer codes, as bits: what a quiet command can still answer. */
enum { MA_HD = 1, MA_VA = 2, MA_EN = 4, MA_NF = 8, MA_NS = 16, MA_EX = 32, MA_MN = 64,
       MA_ME = 128 };

struct mc_dir {
    struct tb__line ln;
    bool synced;
    bool gap;
    bool started;
    bool in_data;      /* a data block (text) or body (binary) */
    uint8_t hdr_have;
    uint8_t hdr[MC_HDR];
    uint64_t left;     /* data bytes to go (text: CRLF included) */
    int64_t ts0;
    uint64_t bytes;
};

struct mc {
    struct mc_dir d[2];
    struct tb__pq pq;
    bool stopped;
    bool binary;      /* decided by the first client byte (0x80) */
    bool decided;
    bool s2c_armed;
    bool s2c_lost;
    /* The text command being read (its data block follows). */
    bool c_noreply;
    uint8_t c_kind;
    uint32_t c_quiet; /* a quiet meta command: answers it may send | token hash << 8 */
    uint16_t c_keys;
    char c_cls[32];
    uint8_t c_cls_len;
    /* The text answer being read. */
    uint16_t r_hits;
    bool r_listing;   /* inside a K_RETR / K_LIST answer */
    bool va_pending;  /* a meta VA's data block ends the answer */
};

/* ---- text commands ---------------------------------------------------------- */

struct words {
    size_t n;                    /* all words of the line */
    const char *w[MC_WORDS];
    size_t len[MC_WORDS];
    const char *last;            /* the line's last word */
    size_t last_len;
};

static void split(const char *l, size_t n, struct words *ws)
{
    size_t i = 0;
    ws->n = 0;
    ws->last = NULL;
    ws->last_len = 0;
    while (i < n) {
        while (i < n && l[i] == ' ')
            i++;
        size_t j = i;
        while (j < n && l[j] != ' ')
            j++;
        if (j > i) {
            if (ws->n < MC_WORDS) {
                ws->w[ws->n] = l + i;
                ws->len[ws->n] = j - i;
            }
            ws->n++;
            ws->last = l + i;
            ws->last_len = j - i;
        }
        i = j;
    }
}

static bool weq(const char *w, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(w, s, n) == 0;
}

static bool wnum(const char *w, size_t n, uint64_t *v)
{
    if (n == 0 || n > 19)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] < '0' || w[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(w[i] - '0');
    }
    *v = x;
    return true;
}

struct cmd_info {
    const char *name;
    uint8_t kind;
    uint8_t bytes_at;   /* word holding the data block's length (0 = none) */
    bool noreply_ok;    /* takes a trailing "noreply" */
    bool keys;          /* a retrieval: the keys are counted */
};

static const struct cmd_info text_cmds[] = {
    {"get", K_RETR, 0, false, true},       {"gets", K_RETR, 0, false, true},
    {"gat", K_RETR, 0, false, true},       {"gats", K_RETR, 0, false, true},
    {"set", K_LINE, 4, true, false},       {"add", K_LINE, 4, true, false},
    {"replace", K_LINE, 4, true, false},   {"append", K_LINE, 4, true, false},
    {"prepend", K_LINE, 4, true, false},   {"cas", K_LINE, 4, true, false},
    {"delete", K_LINE, 0, true, false},    {"incr", K_LINE, 0, true, false},
    {"decr", K_LINE, 0, true, false},      {"touch", K_LINE, 0, true, false},
    {"stats", K_LIST, 0, false, false},    {"flush_all", K_LINE, 0, true, false},
    {"version", K_LINE, 0, false, false},  {"verbosity", K_LINE, 0, true, false},
    {"quit", K_LINE, 0, false, false},     {"watch", K_LINE, 0, false, false},
    {"mg", K_META, 0, false, false},       {"ms", K_META, 2, false, false},
    {"md", K_META, 0, false, false},       {"ma", K_META, 0, false, false},
    {"mn", K_META, 0, false, false},       {"me", K_META, 0, false, false},
    {"lru_crawler", K_LINE, 0, false, false}, {"slabs", K_LINE, 0, false, false},
    {"cache_memlimit", K_LINE, 0, true, false}, {"shutdown", K_LINE, 0, false, false},
    {"lru", K_LINE, 0, false, false},      {"misbehave", K_LINE, 0, false, false},
};

static const struct cmd_info *text_cmd(const char *w, size_t n)
{
    for (size_t i = 0; i < TB_ARRAY_SIZE(text_cmds); i++)
        if (weq(w, n, text_cmds[i].name))
            return &text_cmds[i];
    return NULL;
}

static const char *const key_buckets[] = {"", "", " 2 keys", " 3-4 keys", " 5-8 keys",
                                          " 9-16 keys", " 17-32 keys", " 33-64 keys",
                                          " 65+ keys"};

static size_t bucket(size_t keys)
{
    size_t b = 1;
    while (b < 8 && keys > ((size_t)1 << (b - 1)))
        b++;
    return b;
}

/* ---- synchronisation --------------------------------------------------------- */

static void dir_reset(struct mc_dir *d)
{
    tb__line_reset(&d->ln);
    d->gap = d->started = d->in_data = false;
    d->hdr_have = 0;
    d->left = 0;
    d->bytes = 0;
}

static void lose_sync(struct mc *m, const struct tb_proto_ctx *ctx, bool error)
{
    tb__pq_clear(&m->pq);
    for (int i = 0; i < 2; i++) {
        dir_reset(&m->d[i]);
        m->d[i].synced = false;
    }
    m->r_listing = false;
    m->r_hits = 0;
    m->s2c_armed = m->s2c_lost = false;
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

/* A binary request or response header that makes sense. */
static bool bin_hdr_ok(const uint8_t *h, uint8_t magic)
{
    uint32_t body = tb_load_be32(h + 8);
    uint32_t kx = (uint32_t)tb_load_be16(h + 2) + h[4];
    return h[0] == magic && h[5] == 0 && kx <= body && body <= MC_DATA_MAX && h[1] <= 0x48;
}

static bool text_known(const uint8_t *p, size_t n)
{
    size_t k = 0;
    while (k < n && k < 16 && p[k] != ' ' && p[k] != '\r' && p[k] != '\n')
        k++;
    return k > 0 && k < n && k < 16 && text_cmd((const char *)p, k) != NULL;
}

static bool try_sync(struct mc *m, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_C2S) {
        bool bin = n >= MC_HDR && bin_hdr_ok(p, 0x80);
        if (!bin && !text_known(p, n))
            return false;
        m->binary = bin;
        m->decided = true;
        m->d[TB_DIR_C2S].synced = true;
        if (!m->d[TB_DIR_S2C].synced && !m->s2c_lost) {
            /* Outside a pipeline the server's next chunk starts the answer. */
            dir_reset(&m->d[TB_DIR_S2C]);
            m->s2c_armed = true;
        }
        return true;
    }
    if (!m->s2c_armed || n == 0)
        return false;
    if (m->binary ? !(n >= MC_HDR && bin_hdr_ok(p, 0x81)) : !(p[0] >= 'A' && p[0] <= 'Z') &&
                                                              !(p[0] >= '0' && p[0] <= '9'))
        return false;
    m->d[TB_DIR_S2C].synced = true;
    m->s2c_armed = false;
    return true;
}

/* ---- answers ------------------------------------------------------------------ */

static void s_acct(struct mc *m, uint64_t n, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (e && n)
        tb__pend_answer(e, n, ts);
}

static void done(struct mc *m, const struct tb_proto_ctx *ctx, int32_t status)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (e && m->d[TB_DIR_S2C].gap)
        e->flags |= TB_REQ_GAP;
    m->d[TB_DIR_S2C].gap = false;
    m->r_listing = false;
    m->r_hits = 0;
    tb__pq_emit_head(&m->pq, ctx, status, 0, NULL, 0);
}

/* A quiet head whose answer was suppressed: popped without a record. */
static void drop_silent(struct mc *m, const struct tb_proto_ctx *ctx)
{
    tb__pq_pop(&m->pq);
    ctx->ctr->unanswered++;
}

static int32_t line_status(const char *l, size_t n)
{
    if (weq(l, n, "NOT_FOUND") || weq(l, n, "EN") || weq(l, n, "NF"))
        return ST_NOT_FOUND;
    if (weq(l, n, "EXISTS") || weq(l, n, "EX"))
        return ST_EXISTS;
    if (weq(l, n, "NOT_STORED") || weq(l, n, "NS"))
        return ST_NOT_STORED;
    if (weq(l, n, "ERROR"))
        return ST_UNKNOWN_CMD;
    if (n >= 12 && memcmp(l, "CLIENT_ERROR", 12) == 0)
        return ST_INVALID;
    if (n >= 12 && memcmp(l, "SERVER_ERROR", 12) == 0)
        return ST_INTERNAL;
    return ST_OK;
}

static bool is_error_line(const char *l, size_t n)
{
    return weq(l, n, "ERROR") || (n >= 12 && (memcmp(l, "CLIENT_ERROR", 12) == 0 ||
                                              memcmp(l, "SERVER_ERROR", 12) == 0));
}

/* The bit of a meta answer's two-letter code, or 0 (an error line, or not
 * meta). */
static unsigned meta_code(const char *l, size_t n)
{
    static const char codes[][3] = {"HD", "VA", "EN", "NF", "NS", "EX", "MN", "ME"};
    if (n < 2 || (n > 2 && l[2] != ' '))
        return 0;
    for (unsigned i = 0; i < TB_ARRAY_SIZE(codes); i++)
        if (l[0] == codes[i][0] && l[1] == codes[i][1])
            return 1u << i;
    return 0;
}

/* The token that ties a meta answer to its command: the opaque ("O…") if
 * given, else the returned key ("k…"); a 24-bit hash, 0 for none. */
static uint32_t meta_token(const struct words *ws, size_t first, const char *key, size_t klen,
                           bool want_key)
{
    const char *t = NULL;
    size_t tl = 0;
    bool k = false;
    for (size_t i = first; i < ws->n && i < MC_WORDS; i++) {
        if (ws->len[i] >= 1 && ws->w[i][0] == 'O') {
            t = ws->w[i];
            tl = ws->len[i];
            break;
        }
        if (ws->len[i] >= 1 && ws->w[i][0] == 'k')
            k = true;
    }
    uint32_t h = 2166136261u;
    if (!t && k && want_key) {
        h = (h ^ 'k') * 16777619u;
        t = key;
        tl = klen;
    } else if (!t && k && !want_key) {
        for (size_t i = first; i < ws->n && i < MC_WORDS; i++)
            if (ws->len[i] >= 1 && ws->w[i][0] == 'k') {
                t = ws->w[i];
                tl = ws->len[i];
                break;
            }
    }
    if (!t)
        return 0;
    for (size_t i = 0; i < tl; i++)
        h = (h ^ (uint8_t)t[i]) * 16777619u;
    h &= 0xffffff;
    return h ? h : 1;
}

/* Quiet meta commands before the owner of this answer were answered
 * silently: one cannot own an answer it would not send (a suppressed code,
 * or a code of another command), nor one whose token is another's. */
static void skip_quiet(struct mc *m, const struct tb_proto_ctx *ctx, const char *l, size_t n)
{
    unsigned code = meta_code(l, n);
    if (!code)
        return; /* an error line: the head's */
    struct words ws;
    split(l, n, &ws);
    uint32_t tok = meta_token(&ws, code == MA_VA ? 2 : 1, NULL, 0, false);
    struct tb__pend *e;
    while ((e = tb__pq_head(&m->pq)) != NULL && e->kind == K_META && e->aux != 0) {
        uint32_t etok = e->aux >> 8;
        if ((e->aux & code) && !(tok && etok && tok != etok))
            break;
        drop_silent(m, ctx);
    }
}

static bool s_text_line(struct mc *m, const struct tb_proto_ctx *ctx, const char *l, size_t n)
{
    struct mc_dir *d = &m->d[TB_DIR_S2C];
    struct words ws;
    uint64_t v;
    /* Data blocks are framed whoever the answer is for. */
    if (n >= 6 && memcmp(l, "VALUE ", 6) == 0) {
        split(l, n, &ws);
        if (ws.n < 4 || !wnum(ws.w[3], ws.len[3], &v) || v > MC_DATA_MAX)
            return false;
        d->in_data = true;
        d->left = v + 2;
        m->r_hits++;
        return true;
    }
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (n >= 3 && memcmp(l, "VA ", 3) == 0) {
        split(l, n, &ws);
        if (ws.n < 2 || !wnum(ws.w[1], ws.len[1], &v) || v > MC_DATA_MAX)
            return false;
        d->in_data = true;
        d->left = v + 2;
        m->va_pending = true; /* the answer ends with its data block */
        return true;
    }
    if (!e)
        return true; /* unsolicited (a command queued after a lost sync was not) */
    uint8_t kind = e->kind;
    if (kind == K_RETR || kind == K_LIST) {
        if (weq(l, n, "END")) {
            int32_t st = ST_OK;
            if (kind == K_RETR && m->r_hits < e->aux)
                st = ST_NOT_FOUND;
            done(m, ctx, st);
        } else if (is_error_line(l, n)) {
            done(m, ctx, line_status(l, n));
        } else {
            m->r_listing = true;
        }
        return true;
    }
    done(m, ctx, line_status(l, n));
    return true;
}

/* A meta VA's data block is over: so is its answer. */
static void meta_va_end(struct mc *m, const struct tb_proto_ctx *ctx)
{
    if (m->va_pending) {
        m->va_pending = false;
        if (tb__pq_head(&m->pq))
            done(m, ctx, ST_OK);
    }
}

static enum tb_pstate s_text(struct mc *m, const struct tb_proto_ctx *ctx, const uint8_t *p,
                             size_t n, int64_t ts)
{
    struct mc_dir *d = &m->d[TB_DIR_S2C];
    const uint8_t *end = p + n;
    while (p < end && !m->stopped) {
        if (d->in_data) {
            size_t k = (size_t)TB_MIN(d->left, (uint64_t)(end - p));
            p += k;
            d->left -= k;
            s_acct(m, k, ts);
            if (d->left > 0)
                break;
            d->in_data = false;
            meta_va_end(m, ctx);
            continue;
        }
        const char *l;
        size_t ll;
        uint64_t raw;
        int64_t ts0;
        const uint8_t *before = p;
        int rc = tb__line_take(&d->ln, &p, end, MC_LINE_MAX, ts, &l, &ll, &raw, &ts0);
        /* Quiet commands answered silently go before the bytes are counted:
         * they belong to the answer's owner. */
        if (rc == TB__LINE_OK && !m->r_listing)
            skip_quiet(m, ctx, l, ll);
        s_acct(m, (uint64_t)(p - before), ts);
        if (rc == TB__LINE_MORE)
            break;
        if (rc != TB__LINE_OK || !s_text_line(m, ctx, l, ll)) {
            lose_sync(m, ctx, true);
            return TB_PS_ERROR;
        }
    }
    return TB_PS_OK;
}

/* ---- text commands --------------------------------------------------------------- */

/* A command line. Returns false when it is not one. */
static bool c_text_line(struct mc *m, const struct tb_proto_ctx *ctx, const char *l, size_t n)
{
    struct mc_dir *d = &m->d[TB_DIR_C2S];
    struct words ws;
    split(l, n, &ws);
    if (ws.n == 0)
        return true; /* an empty line: memcached answers ERROR; nothing to time */
    const struct cmd_info *c = text_cmd(ws.w[0], ws.len[0]);
    m->c_noreply = false;
    m->c_quiet = 0;
    m->c_keys = 0;
    m->c_kind = c ? c->kind : K_LINE;
    uint64_t v = 0;
    if (c && c->bytes_at) {
        if (ws.n <= c->bytes_at || c->bytes_at >= MC_WORDS ||
            !wnum(ws.w[c->bytes_at], ws.len[c->bytes_at], &v) || v > MC_DATA_MAX)
            return false;
        d->in_data = true;
        d->left = v + 2;
    }
    if (c && c->noreply_ok && ws.n > 1 && weq(ws.last, ws.last_len, "noreply"))
        m->c_noreply = true;
    size_t cl = TB_MIN(ws.len[0], sizeof m->c_cls - 1);
    memcpy(m->c_cls, ws.w[0], cl);
    if (!c) {
        memcpy(m->c_cls, "unknown", 7);
        cl = 7;
    } else if (c->keys) {
        size_t keys = ws.n - (ws.w[0][1] == 'a' ? 2 : 1); /* gat/gats: exptime first */
        m->c_keys = (uint16_t)TB_MIN(keys, (size_t)UINT16_MAX);
        const char *b = key_buckets[bucket(keys)];
        size_t bl = strlen(b);
        memcpy(m->c_cls + cl, b, bl);
        cl += bl;
    } else if (c->kind == K_META) {
        /* Flags are single letters with an optional token; q is quiet:
         * it drops EN for mg, HD for ms, md and ma. */
        size_t first = ws.w[0][1] == 's' ? 3 : 2;
        for (size_t i = first; i < ws.n && i < MC_WORDS; i++) {
            if (!weq(ws.w[i], ws.len[i], "q") || ws.n < 2)
                continue;
            switch (ws.w[0][1]) {
            case 'g': m->c_quiet = MA_VA | MA_HD; break;
            case 's': m->c_quiet = MA_NS | MA_EX | MA_NF; break;
            case 'd': m->c_quiet = MA_NF | MA_EX; break;
            case 'a': m->c_quiet = MA_VA | MA_NF | MA_NS | MA_EX; break;
            default: break;
            }
            if (m->c_quiet)
                m->c_quiet |= meta_token(&ws, first, ws.w[1], ws.len[1], true) << 8;
        }
    }
    m->c_cls_len = (uint8_t)cl;
    if (c && weq(ws.w[0], ws.len[0], "watch")) {
        /* The connection becomes a log stream. */
        ctx->ctr->streams++;
        m->stopped = true;
    }
    return true;
}

/* The command (and its data block) is complete. */
static void c_text_done(struct mc *m, const struct tb_proto_ctx *ctx)
{
    struct mc_dir *d = &m->d[TB_DIR_C2S];
    bool quit = m->c_cls_len == 4 && memcmp(m->c_cls, "quit", 4) == 0;
    if (m->c_noreply) {
        ctx->ctr->unanswered++;
    } else if (!quit) {
        struct tb__pend *e = tb__pq_push(&m->pq, ctx->ctr, d->ts0);
        if (!e) {
            /* Text answers do not say whose they are: past the in-flight
             * cap, start afresh rather than pair them wrongly. */
            lose_sync(m, ctx, false);
            return;
        }
        e->req_bytes = d->bytes;
        e->kind = m->c_kind;
        e->aux = m->c_kind == K_RETR ? m->c_keys : m->c_quiet;
        if (d->gap)
            e->flags |= TB_REQ_GAP;
        tb__pq_set_class(&m->pq, e, m->c_cls, m->c_cls_len);
    }
    d->started = false;
    d->gap = false;
    d->bytes = 0;
}

static enum tb_pstate c_text(struct mc *m, const struct tb_proto_ctx *ctx, const uint8_t *p,
                             size_t n, int64_t ts)
{
    struct mc_dir *d = &m->d[TB_DIR_C2S];
    const uint8_t *end = p + n;
    while (p < end && !m->stopped) {
        if (!d->started) {
            d->started = true;
            d->ts0 = ts;
            d->bytes = 0;
        }
        if (d->in_data) {
            size_t k = (size_t)TB_MIN(d->left, (uint64_t)(end - p));
            p += k;
            d->left -= k;
            d->bytes += k;
            if (d->left > 0)
                break;
            d->in_data = false;
            c_text_done(m, ctx);
            continue;
        }
        const char *l;
        size_t ll;
        uint64_t raw;
        int64_t ts0;
        int rc = tb__line_take(&d->ln, &p, end, MC_LINE_MAX, ts, &l, &ll, &raw, &ts0);
        if (rc == TB__LINE_MORE)
            break;
        d->bytes += raw;
        if (rc != TB__LINE_OK || !c_text_line(m, ctx, l, ll)) {
            lose_sync(m, ctx, true);
            return TB_PS_ERROR;
        }
        if (m->stopped)
            break;
        if (ll == 0) {
            d->started = false;
            continue;
        }
        if (!d->in_data)
            c_text_done(m, ctx);
    }
    return m->stopped ? TB_PS_STOP : TB_PS_OK;
}

/* ---- binary ------------------------------------------------------------------------ */

static const char *const bin_names[] = {
    [0x00] = "get",       [0x01] = "set",       [0x02] = "add",       [0x03] = "replace",
    [0x04] = "delete",    [0x05] = "incr",      [0x06] = "decr",      [0x07] = "quit",
    [0x08] = "flush",     [0x09] = "getq",      [0x0a] = "noop",      [0x0b] = "version",
    [0x0c] = "getk",      [0x0d] = "getkq",     [0x0e] = "append",    [0x0f] = "prepend",
    [0x10] = "stat",      [0x11] = "setq",      [0x12] = "addq",      [0x13] = "replaceq",
    [0x14] = "deleteq",   [0x15] = "incrq",     [0x16] = "decrq",     [0x17] = "quitq",
    [0x18] = "flushq",    [0x19] = "appendq",   [0x1a] = "prependq",  [0x1b] = "verbosity",
    [0x1c] = "touch",     [0x1d] = "gat",       [0x1e] = "gatq",      [0x20] = "sasl_list",
    [0x21] = "sasl_auth", [0x22] = "sasl_step", [0x23] = "gatk",      [0x24] = "gatkq",
};

static bool bin_quiet(uint8_t op)
{
    return op == 0x09 || op == 0x0d || (op >= 0x11 && op <= 0x1a) || op == 0x1e || op == 0x24;
}

/* A whole header has been read in direction dir. */
static bool bin_header(struct mc *m, const struct tb_proto_ctx *ctx, int dir, int64_t ts)
{
    struct mc_dir *d = &m->d[dir];
    const uint8_t *h = d->hdr;
    if (!bin_hdr_ok(h, dir == TB_DIR_C2S ? 0x80 : 0x81))
        return false;
    d->left = tb_load_be32(h + 8);
    d->in_data = true;
    if (dir == TB_DIR_S2C) {
        /* Quiet requests before this answer's owner were answered silently;
         * the header is counted for the owner. */
        uint8_t op = h[1];
        uint32_t opaque = tb_load_be32(h + 12);
        struct tb__pend *e;
        while ((e = tb__pq_head(&m->pq)) != NULL && bin_quiet(e->kind) &&
               !(e->kind == op && e->aux == opaque))
            drop_silent(m, ctx);
        s_acct(m, MC_HDR, ts);
    }
    return true;
}

static void bin_req_done(struct mc *m, const struct tb_proto_ctx *ctx)
{
    struct mc_dir *d = &m->d[TB_DIR_C2S];
    uint8_t op = d->hdr[1];
    if (op == 0x17)
        return; /* QuitQ: closes without an answer */
    struct tb__pend *e = tb__pq_push(&m->pq, ctx->ctr, d->ts0);
    if (!e) {
        lose_sync(m, ctx, false); /* see c_text_done */
        return;
    }
    e->req_bytes = d->bytes;
    e->kind = op;
    e->aux = tb_load_be32(d->hdr + 12); /* opaque */
    if (d->gap)
        e->flags |= TB_REQ_GAP;
    char buf[16];
    const char *nm = op < TB_ARRAY_SIZE(bin_names) ? bin_names[op] : NULL;
    if (!nm) {
        snprintf(buf, sizeof buf, "op_0x%02x", op);
        nm = buf;
    }
    tb__pq_set_class(&m->pq, e, nm, strlen(nm));
}

static void bin_resp_done(struct mc *m, const struct tb_proto_ctx *ctx)
{
    struct mc_dir *d = &m->d[TB_DIR_S2C];
    uint8_t op = d->hdr[1];
    uint16_t status = tb_load_be16(d->hdr + 6);
    if (!tb__pq_head(&m->pq))
        return; /* unsolicited */
    if (op == 0x10 && status == 0 && (tb_load_be16(d->hdr + 2) != 0 || tb_load_be32(d->hdr + 8)))
        return; /* one statistic; an empty one ends the answer */
    done(m, ctx, status);
}

static enum tb_pstate bin_consume(struct mc *m, const struct tb_proto_ctx *ctx, int dir,
                                  const uint8_t *p, size_t n, int64_t ts)
{
    struct mc_dir *d = &m->d[dir];
    const uint8_t *end = p + n;
    while (p < end && !m->stopped) {
        if (!d->in_data) {
            if (d->hdr_have == 0 && !d->started) {
                d->started = true;
                d->ts0 = ts;
                d->bytes = 0;
            }
            size_t k = TB_MIN((size_t)(MC_HDR - d->hdr_have), (size_t)(end - p));
            memcpy(d->hdr + d->hdr_have, p, k);
            d->hdr_have = (uint8_t)(d->hdr_have + k);
            p += k;
            d->bytes += k;
            if (d->hdr_have < MC_HDR)
                break;
            d->hdr_have = 0;
            if (!bin_header(m, ctx, dir, ts)) {
                lose_sync(m, ctx, true);
                return TB_PS_ERROR;
            }
        }
        size_t k = (size_t)TB_MIN(d->left, (uint64_t)(end - p));
        p += k;
        d->left -= k;
        d->bytes += k;
        if (dir == TB_DIR_S2C)
            s_acct(m, k, ts);
        if (d->left > 0)
            break;
        d->in_data = false;
        if (dir == TB_DIR_C2S)
            bin_req_done(m, ctx);
        else
            bin_resp_done(m, ctx);
        d->started = false;
        d->gap = false;
    }
    return TB_PS_OK;
}

/* ---- answers cut by a capture hole -------------------------------------------------- */

/* A hole took the server stream's framing while one request was outstanding:
 * its answer ends before the client's next command, which closes it (GAP). */
static bool keep_lost(struct mc *m, const struct tb_proto_ctx *ctx, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (!e || m->pq.len != 1 || m->pq.untracked || m->d[TB_DIR_C2S].started ||
        !m->d[TB_DIR_C2S].synced)
        return false;
    e->flags |= TB_REQ_GAP;
    tb__pend_answer(e, len, ts);
    dir_reset(&m->d[TB_DIR_S2C]);
    m->d[TB_DIR_S2C].synced = false;
    m->r_listing = false;
    m->s2c_armed = false;
    m->s2c_lost = true;
    ctx->ctr->resyncs++;
    return true;
}

static void lost_done(struct mc *m, const struct tb_proto_ctx *ctx)
{
    done(m, ctx, -1);
    m->s2c_lost = false;
    dir_reset(&m->d[TB_DIR_S2C]);
    m->d[TB_DIR_S2C].synced = false;
    m->s2c_armed = true;
}

/* ---- descriptor ---------------------------------------------------------------------- */

static enum tb_pstate mc_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct mc *m = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    if (m->stopped)
        return TB_PS_STOP;
    if (n == 0)
        return TB_PS_OK;
    if (di == TB_DIR_S2C && m->s2c_lost) {
        s_acct(m, n, ts);
        return TB_PS_OK;
    }
    if (!m->d[di].synced && !try_sync(m, di, p, n))
        return TB_PS_OK;
    if (!m->decided) {
        if (di == TB_DIR_S2C)
            return TB_PS_OK; /* the server does not speak first */
        m->binary = p[0] == 0x80;
        m->decided = true;
    }
    if (di == TB_DIR_C2S && m->s2c_lost && !m->d[TB_DIR_C2S].started)
        lost_done(m, ctx);
    enum tb_pstate ps;
    if (m->binary)
        ps = bin_consume(m, ctx, di, p, n, ts);
    else if (di == TB_DIR_C2S)
        ps = c_text(m, ctx, p, n, ts);
    else
        ps = s_text(m, ctx, p, n, ts);
    return m->stopped ? TB_PS_STOP : ps;
}

static enum tb_pstate mc_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct mc *m = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct mc_dir *d = &m->d[di];
    if (m->stopped)
        return TB_PS_STOP;
    if (di == TB_DIR_S2C && m->s2c_lost) {
        s_acct(m, len, ts);
        return TB_PS_OK;
    }
    if (d->synced && d->in_data && len > 0 && len <= d->left) {
        /* Inside a data block or body: its length frames what follows. */
        d->left -= len;
        d->gap = true;
        if (di == TB_DIR_C2S)
            d->bytes += len;
        else
            s_acct(m, len, ts);
        if (d->left > 0)
            return TB_PS_OK;
        d->in_data = false;
        if (m->binary) {
            if (di == TB_DIR_C2S)
                bin_req_done(m, ctx);
            else
                bin_resp_done(m, ctx);
            d->started = false;
            d->gap = false;
        } else if (di == TB_DIR_C2S) {
            c_text_done(m, ctx);
        } else {
            meta_va_end(m, ctx);
        }
        return m->stopped ? TB_PS_STOP : TB_PS_OK;
    }
    if (di == TB_DIR_S2C && (d->synced || m->s2c_armed) && keep_lost(m, ctx, len, ts))
        return TB_PS_OK;
    if (d->synced || m->pq.len)
        lose_sync(m, ctx, false);
    return TB_PS_OK;
}

static void mc_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct mc *m = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!m->stopped) {
        struct tb__pend *e = tb__pq_head(&m->pq);
        if (e && m->s2c_lost)
            lost_done(m, ctx);
        else if (e && e->resp_seen)
            tb__pq_emit_head(&m->pq, ctx, -1, TB_REQ_NORESP, NULL, 0);
    }
    m->stopped = true;
}

static void mc_init(void *st, bool midstream)
{
    struct mc *m = st;
    memset(m, 0, sizeof *m);
    m->d[0].synced = m->d[1].synced = !midstream;
}

static uint32_t mc_waiting(const void *st)
{
    return tb__pq_waiting(&((const struct mc *)st)->pq);
}

static void mc_fini(void *st)
{
    struct mc *m = st;
    tb__pq_free(&m->pq);
    tb__line_free(&m->d[0].ln);
    tb__line_free(&m->d[1].ln);
}

static const char *const answers[] = {
    "VALUE ", "END\r", "STORED\r", "NOT_STORED\r", "EXISTS\r", "NOT_FOUND\r", "DELETED\r",
    "TOUCHED\r", "ERROR\r", "CLIENT_ERROR ", "SERVER_ERROR ", "VERSION ", "STAT ",
    "HD\r", "HD ", "VA ", "EN\r", "NF\r", "NS\r", "EX\r", "MN\r", "ME ",
};

static enum tb_detect mc_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    if (n == 0)
        return TB_DETECT_MAYBE;
    if (p[0] == 0x80 || p[0] == 0x81) {
        if (n < MC_HDR)
            return TB_DETECT_MAYBE;
        if (!bin_hdr_ok(p, p[0]) || !bin_names[p[1] < TB_ARRAY_SIZE(bin_names) ? p[1] : 0x1f])
            return TB_DETECT_NO;
        *client_sent = p[0] == 0x80;
        return TB_DETECT_YES;
    }
    const uint8_t *nl = memchr(p, '\n', TB_MIN(n, (size_t)MC_LINE_MAX));
    if (!nl)
        return n < 256 && p[0] >= 'A' && p[0] <= 'z' ? TB_DETECT_MAYBE : TB_DETECT_NO;
    size_t ll = (size_t)(nl - p);
    for (size_t i = 0; i < TB_ARRAY_SIZE(answers); i++) {
        size_t k = strlen(answers[i]);
        if (ll + 1 >= k && memcmp(p, answers[i], k) == 0) {
            *client_sent = false;
            return TB_DETECT_YES;
        }
    }
    if (ll == 0 || p[ll - 1] != '\r')
        return TB_DETECT_NO;
    struct words ws;
    split((const char *)p, ll - 1, &ws);
    if (ws.n == 0)
        return TB_DETECT_NO;
    const struct cmd_info *c = text_cmd(ws.w[0], ws.len[0]);
    if (!c)
        return TB_DETECT_NO;
    uint64_t v;
    bool yes = true;
    if (c->bytes_at == 4) /* storage: <key> <flags> <exptime> <bytes> */
        yes = ws.n >= 5 && wnum(ws.w[2], ws.len[2], &v) && wnum(ws.w[4], ws.len[4], &v);
    else if (weq(ws.w[0], ws.len[0], "incr") || weq(ws.w[0], ws.len[0], "decr") ||
             weq(ws.w[0], ws.len[0], "touch"))
        yes = ws.n >= 3;
    else if (c->keys)
        yes = ws.n >= 2;
    else if (weq(ws.w[0], ws.len[0], "quit"))
        return TB_DETECT_MAYBE;
    if (!yes)
        return TB_DETECT_NO;
    *client_sent = true;
    return TB_DETECT_YES;
}

static const uint16_t mc_ports[] = {11211, 0};

const struct tb_proto tb_proto_memcached = {
    .name = "memcached",
    .ports = mc_ports,
    .state_size = sizeof(struct mc),
    .detect = mc_detect,
    .init = mc_init,
    .consume = mc_consume,
    .gap = mc_gap,
    .close = mc_close,
    .fini = mc_fini,
    .waiting = mc_waiting,
};
