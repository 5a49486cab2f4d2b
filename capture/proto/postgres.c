/* SPDX-License-Identifier: MIT */
/* postgres.c — PostgreSQL frontend/backend protocol 3.0: query batches paired
 * with their ReadyForQuery (https://www.postgresql.org/docs/current/protocol.html,
 * "Message Flow" and "Message Formats").
 *
 * After the start-up phase every message is typed:
 *
 *   byte1 type  int32 length (big-endian, counts itself, not the type)  payload
 *
 * The start-up phase has untyped client messages, int32 length then int32 code:
 * StartupMessage (code 196608 = 3.0, then name/value pairs), SSLRequest
 * (80877103), GSSENCRequest (80877104), CancelRequest (80877102, pid, key; sent
 * on a connection of its own, which the server closes without a word). An
 * SSLRequest or GSSENCRequest is answered by one bare byte: 'S' / 'G' (TLS or
 * GSSAPI encryption follows: nothing more to read) or 'N' (refused: the client
 * goes on in clear, with a StartupMessage or the other request). The server
 * then authenticates ('R' messages, 'p' answers), reports ParameterStatus 'S'
 * and BackendKeyData 'K', and ends the phase with ReadyForQuery 'Z'.
 *
 * A request here is what one ReadyForQuery answers ("first client message →
 * ReadyForQuery", what tshark's pgsql dissector pairs):
 *   - a simple Query 'Q' (its results, CommandComplete 'C' or an ErrorResponse
 *     'E' per statement, COPY in or out, then 'Z');
 *   - an extended-query batch: Parse 'P', Bind 'B', Describe 'D', Execute 'E',
 *     Close 'C', Flush 'H' … up to and including Sync 'S' (the server answers
 *     ParseComplete '1', BindComplete '2', RowDescription 'T', DataRow 'D',
 *     CommandComplete … and one 'Z' per Sync; after an error it skips to the
 *     Sync);
 *   - a FunctionCall 'F' (FunctionCallResponse 'V', then 'Z').
 * Several Syncs in flight (pipeline mode) are several requests, answered in
 * order: one request per Sync-delimited batch, not per Execute, because only
 * the Sync gets an answer that closes it, and the server runs a batch's
 * Executes back to back (decision recorded in docs/protocols.md). CopyData
 * 'd', CopyDone 'c' and CopyFail 'f' from the client belong to the request
 * whose COPY FROM STDIN they feed; Terminate 'X' has no answer.
 *
 * NoticeResponse 'N', NotificationResponse 'A' and ParameterStatus 'S' may come
 * from the server at any time: they are never taken as (part of) an answer. An
 * ErrorResponse's SQLSTATE (field 'C') is the request's status, as the base-36
 * number of its five characters (Python: int(code, 36); 0 = "00000"). A
 * CopyBothResponse 'W' starts a replication stream: counted, no longer paired.
 *
 * Class: the fingerprint of the batch's first statement that runs (an Execute's
 * portal → its Bind's statement → that statement's Parse text, named or
 * unnamed; or a Query's text); a batch that only prepares is "PREPARE <fp>";
 * an Execute of a statement prepared before the capture is "Execute"; a batch
 * of other messages is named after its first one ("Sync", "Describe", …).
 *
 * Mid-stream (no start-up seen) the client side synchronises on a chunk that
 * is a whole chain of plausible frontend messages, and the server side on its
 * next chunk that starts with a plausible backend message: a client sends its
 * next batch only after the previous one's ReadyForQuery (outside pipeline
 * mode), so that chunk starts its answer.
 */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"
#include "rd.h"

#define PG_QMAX 4096u          /* client payload head kept: query text for the fingerprint */
#define PG_SHEAD 64u           /* server payload head kept: SQLSTATE, ReadyForQuery status */
#define PG_LEN_MAX 0x40000000u /* plausible message length (the server's own limit is 1 GB) */
#define PG_STARTUP_MAX 10000u  /* the server refuses longer start-up packets */
#define PG_NAME_MAX 63u        /* statement and portal names (NAMEDATALEN - 1) */
#define PG_STMT_MAX 128u       /* named statements remembered per connection */
#define PG_PORTAL_MAX 8u       /* portals remembered per connection */
#define PG_FPC 8u              /* statement texts whose fingerprints are kept */

#define PG_CODE_SSL 80877103u
#define PG_CODE_GSS 80877104u
#define PG_CODE_CANCEL 80877102u
#define PG_PROTO_3 0x00030000u

enum phase {
    P_STARTUP,   /* the client's next message is untyped */
    P_NEGOTIATE, /* the server's next byte answers an SSL/GSS request */
    P_AUTH,      /* authentication until the first ReadyForQuery */
    P_READY,     /* queries */
};

/* How strongly a message decides its batch's class. */
enum rank { RANK_NONE, RANK_NAME, RANK_PREPARE, RANK_STMT };

struct pg_dir {
    uint8_t hdr[5];
    uint8_t hdr_have;
    uint8_t type;    /* 0: an untyped start-up message */
    bool in_msg;
    bool synced;
    bool msg_gap;    /* a capture hole inside this message */
    bool head_cut;   /* a hole cut the collected head: bytes after it are not next */
    bool collect;    /* this message's head is kept (its type needs it) */
    uint32_t left;   /* payload bytes to go */
    uint32_t head_len;
    int64_t ts0;     /* the chunk holding the message's first byte */
    uint64_t msg_bytes;
};

struct pg_name {
    uint8_t nlen;
    uint16_t flen;
    /* The statement text's key in the fingerprint cache (text_key(); 0
     * unknown): an entry given the same key again keeps its fingerprint
     * rather than copying it anew, as the cache itself reuses it. pgbench
     * re-parses the unnamed statement and re-binds the unnamed portal
     * every execution. */
    uint64_t src;
    char name[PG_NAME_MAX];
    char fp[TB__CLASS_MAX];
};

/* Statement or portal name → class. A handful of entries; a full table reuses
 * its slots in turn (a forgotten statement's executions are "Execute"). */
struct pg_names {
    struct pg_name *v;
    uint16_t n, cap, evict;
};

/* Fingerprints of recent statement texts, by a hash of the raw text: the
 * extended protocol sends the same text with every execution (only the
 * parameters change), and fingerprinting was most of the parser's cost. The
 * keys are kept together, apart from the fingerprints, so that a lookup reads
 * one cache line rather than one per entry. */
struct pg_fpc {
    uint64_t h[PG_FPC];
    uint32_t len[PG_FPC];
    uint16_t flen[PG_FPC];
    char fp[PG_FPC][TB__CLASS_MAX];
};

struct pg {
    struct pg_dir d[2];
    struct tb__pq pq;
    uint8_t phase;
    bool stopped;
    bool batch_open;  /* the batch numbered batch_seq has not seen its Sync yet */
    bool s2c_armed;   /* the server's next chunk starts an answer (mid-stream sync) */
    bool s2c_lost;    /* the head's answer lost its framing in a hole */
    uint32_t batch_seq;
    uint8_t *cbuf;    /* client payload head when it straddles chunks (PG_QMAX) */
    uint8_t shead[PG_SHEAD];
    struct pg_names stmts, portals;
    struct pg_fpc *fpc; /* allocated with the first statement */
    uint8_t fpc_next;
};

/* ---- names ------------------------------------------------------------- */

static size_t name_len(size_t n) { return n < PG_NAME_MAX ? n : PG_NAME_MAX; }

static struct pg_name *names_find(struct pg_names *t, const char *name, size_t nlen)
{
    nlen = name_len(nlen);
    for (uint16_t i = 0; i < t->n; i++)
        if (t->v[i].nlen == nlen && memcmp(t->v[i].name, name, nlen) == 0)
            return &t->v[i];
    return NULL;
}

static void names_put(struct pg_names *t, uint16_t max, const char *name, size_t nlen,
                      const char *fp, size_t flen, uint64_t src)
{
    nlen = name_len(nlen);
    struct pg_name *s = names_find(t, name, nlen);
    if (s && src != 0 && s->src == src)
        return; /* the same text's fingerprint: already there */
    if (!s) {
        if (t->n == t->cap && t->cap < max) {
            uint16_t nc = t->cap ? (uint16_t)TB_MIN(t->cap * 2u, max) : 2;
            struct pg_name *nv = realloc(t->v, nc * sizeof *nv);
            if (nv) {
                t->v = nv;
                t->cap = nc;
            }
        }
        if (t->n < t->cap)
            s = &t->v[t->n++];
        else if (t->cap)
            s = &t->v[t->evict++ % t->cap];
        else
            return;
        s->nlen = (uint8_t)nlen;
        memcpy(s->name, name, nlen);
    }
    s->src = src;
    s->flen = (uint16_t)TB_MIN(flen, sizeof s->fp);
    tb__copy_small(s->fp, fp, s->flen);
}

static void names_del(struct pg_names *t, const char *name, size_t nlen)
{
    struct pg_name *s = names_find(t, name, nlen);
    if (s)
        *s = t->v[--t->n];
}

static void names_free(struct pg_names *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* ---- fingerprints ------------------------------------------------------- */

static uint64_t text_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

/* The fingerprint of a statement's text, from the cache when it was seen
 * lately (else written to `spare`, TB__CLASS_MAX bytes, when the cache cannot
 * be allocated). The result stays valid until the next call. *key: what the
 * cache knows the text by (hash and length; 0 without a cache). */
static const char *fingerprint(struct pg *g, const uint8_t *p, size_t n, char *spare,
                               size_t *flen, uint64_t *key)
{
    struct pg_fpc *c = g->fpc;
    *key = 0;
    if (!c && !(c = g->fpc = calloc(1, sizeof *g->fpc))) {
        *flen = tb_fp_sql((const char *)p, n, spare, TB__CLASS_MAX);
        return spare;
    }
    uint64_t h = text_hash(p, n);
    *key = (h ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull)) | 1; /* never 0 */
    for (unsigned i = 0; i < PG_FPC; i++) {
        if (c->h[i] == h && c->len[i] == n && c->flen[i]) {
            *flen = c->flen[i];
            return c->fp[i];
        }
    }
    unsigned i = g->fpc_next++ % PG_FPC;
    c->h[i] = h;
    c->len[i] = (uint32_t)n;
    c->flen[i] = (uint16_t)tb_fp_sql((const char *)p, n, c->fp[i], sizeof c->fp[i]);
    *flen = c->flen[i];
    return c->fp[i];
}

/* ---- message types ------------------------------------------------------ */

/* Frontend types after start-up, and whether a message opens/joins a batch. */
static bool fe_type(uint8_t t)
{
    switch (t) {
    case 'Q': case 'P': case 'B': case 'E': case 'D': case 'C': case 'H': case 'S':
    case 'F': case 'd': case 'c': case 'f': case 'X': case 'p':
        return true;
    default:
        return false;
    }
}

static bool be_type(uint8_t t)
{
    switch (t) {
    case 'R': case 'K': case 'S': case 'Z': case 'T': case 'D': case 'C': case 'E':
    case 'N': case 'A': case 'I': case '1': case '2': case '3': case 'n': case 't':
    case 's': case 'G': case 'H': case 'W': case 'd': case 'c': case 'V': case 'v':
        return true;
    default:
        return false;
    }
}

/* The size of the run of whole backend messages at p that are plain parts of
 * an answer (not ReadyForQuery, ErrorResponse, an asynchronous message or a
 * CopyBothResponse, which server_msg looks at): the common case (ParseComplete,
 * BindComplete, RowDescription, DataRow, CommandComplete …) in one tight loop. */
static size_t plain_answers(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *q = p;
    while (end - q >= 5) {
        uint8_t t = q[0];
        uint32_t len = tb_load_be32(q + 1);
        if (t == 'Z' || t == 'E' || t == 'N' || t == 'A' || t == 'S' || t == 'W' ||
            !be_type(t) || len < 4 || (size_t)(end - q - 1) < len)
            break;
        q += 1 + (size_t)len;
    }
    return (size_t)(q - p);
}

/* Query text up to its NUL (or the first 32 bytes): no control bytes. */
static bool text_plausible(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && i < 32 && p[i] != 0; i++)
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
    return true;
}

/* Does the chunk start a frontend message (mid-stream sync, detection)? The
 * whole chunk must be a chain of plausible messages; the last may run past
 * its end only when it is long (a query that spans segments). At least one
 * statement-bearing message, or two messages, so that a stray 5-byte
 * sequence is not taken. */
static bool fe_chain(const uint8_t *p, size_t n)
{
    size_t off = 0, msgs = 0;
    bool strong = false;
    while (n - off >= 5) {
        uint8_t t = p[off];
        uint32_t len = tb_load_be32(p + off + 1);
        if (!fe_type(t) || t == 'p' || t == 'd' || len < 4 || len > PG_LEN_MAX)
            return false;
        const uint8_t *pl = p + off + 5;
        size_t have = TB_MIN((size_t)(len - 4), n - off - 5);
        switch (t) {
        case 'Q':
            if (len < 5 || !text_plausible(pl, have))
                return false;
            if (have == len - 4u && pl[have - 1] != 0)
                return false;
            strong = true;
            break;
        case 'P': {
            /* name NUL query NUL */
            const uint8_t *z = memchr(pl, 0, have);
            if (len < 8 || !z || !text_plausible(z + 1, (size_t)(pl + have - z - 1)))
                return false;
            strong = true;
            break;
        }
        case 'S': case 'H': case 'X': case 'c':
            if (len != 4)
                return false;
            break;
        case 'E':
            if (len < 9)
                return false;
            break;
        case 'D': case 'C':
            if (len < 6 || have < 1 || (pl[0] != 'S' && pl[0] != 'P'))
                return false;
            break;
        case 'B':
            if (len < 12)
                return false;
            break;
        default:
            break;
        }
        msgs++;
        if ((size_t)len - 4 > n - off - 5)
            return (strong || msgs > 1) && len >= 1024; /* runs past the chunk */
        off += 5 + (size_t)len - 4;
    }
    return off == n && (strong || msgs > 1);
}

/* The backend's counterpart: a chain of plausible messages covering the chunk
 * (the last may run past it), with a ReadyForQuery or at least three
 * messages. */
static bool be_chain(const uint8_t *p, size_t n)
{
    size_t off = 0, msgs = 0;
    bool ready = false;
    while (n - off >= 5) {
        uint8_t t = p[off];
        uint32_t len = tb_load_be32(p + off + 1);
        if (!be_type(t) || len < 4 || len > PG_LEN_MAX)
            return false;
        if (t == 'Z') {
            if (len != 5 || n - off < 6 ||
                (p[off + 5] != 'I' && p[off + 5] != 'T' && p[off + 5] != 'E'))
                return false;
            ready = true;
        }
        msgs++;
        if ((size_t)len - 4 > n - off - 5)
            return msgs >= 3;
        off += 5 + (size_t)len - 4;
    }
    return off == n && (ready || msgs >= 3);
}

/* ---- synchronisation ---------------------------------------------------- */

static void dir_reset(struct pg_dir *d)
{
    d->hdr_have = 0;
    d->in_msg = false;
    d->msg_gap = d->head_cut = false;
    d->left = 0;
    d->head_len = 0;
    d->msg_bytes = 0;
}

static void lose_sync(struct pg *g, const struct tb_proto_ctx *ctx, bool error)
{
    tb__pq_clear(&g->pq);
    for (int i = 0; i < 2; i++) {
        dir_reset(&g->d[i]);
        g->d[i].synced = false;
    }
    g->batch_open = false;
    g->s2c_armed = g->s2c_lost = false;
    g->phase = P_READY;
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

static bool try_sync(struct pg *g, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_C2S) {
        if (n >= 8 && tb_load_be32(p) <= PG_STARTUP_MAX && tb_load_be32(p) >= 8) {
            /* A start-up packet after all: the connection is being set up. */
            uint32_t code = tb_load_be32(p + 4);
            if (code == PG_CODE_SSL || code == PG_CODE_GSS || code == PG_CODE_CANCEL ||
                (code >> 16) == 3) {
                g->phase = P_STARTUP;
                g->d[TB_DIR_C2S].synced = g->d[TB_DIR_S2C].synced = true;
                return true;
            }
        }
        if (!fe_chain(p, n))
            return false;
        g->d[TB_DIR_C2S].synced = true;
        if (!g->d[TB_DIR_S2C].synced && !g->s2c_lost) {
            /* The server answers batches in order and not before they are
             * sent: its next chunk starts the answer to this one. */
            dir_reset(&g->d[TB_DIR_S2C]);
            g->s2c_armed = true;
        }
        return true;
    }
    if (g->s2c_armed && n >= 5 && be_type(p[0]) && tb_load_be32(p + 1) >= 4 &&
        tb_load_be32(p + 1) <= PG_LEN_MAX) {
        g->d[TB_DIR_S2C].synced = true;
        g->s2c_armed = false;
        return true;
    }
    return false;
}

/* ---- server messages ---------------------------------------------------- */

/* SQLSTATE as a base-36 number; -1 when the field is missing or malformed. */
static int32_t sqlstate(const uint8_t *h, size_t hl)
{
    size_t i = 0;
    while (i < hl && h[i] != 0) {
        uint8_t f = h[i++];
        const uint8_t *z = memchr(h + i, 0, hl - i);
        size_t flen = z ? (size_t)(z - (h + i)) : hl - i;
        if (f == 'C') {
            if (flen != 5)
                return -1;
            int32_t v = 0;
            for (size_t k = 0; k < 5; k++) {
                uint8_t c = h[i + k];
                int dg = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : -1;
                if (dg < 0)
                    return -1;
                v = v * 36 + dg;
            }
            return v;
        }
        if (!z)
            break;
        i += flen + 1;
    }
    return -1;
}

static void emit_head(struct pg *g, const struct tb_proto_ctx *ctx, uint32_t extra)
{
    struct tb__pend *e = tb__pq_head(&g->pq);
    if (e && g->batch_open && e->seq == g->batch_seq)
        g->batch_open = false; /* answered before its Sync was seen (a hole took it) */
    int32_t status = e ? (int32_t)e->aux : -1;
    if (e && (extra & TB_REQ_NORESP) && status == 0)
        status = -1;
    tb__pq_emit_head(&g->pq, ctx, status, extra, NULL, 0);
}

static enum tb_pstate server_msg(struct pg *g, const struct tb_proto_ctx *ctx, uint8_t type,
                                 const uint8_t *h, size_t hl, int64_t ts)
{
    struct pg_dir *d = &g->d[TB_DIR_S2C];
    if (g->phase == P_AUTH) {
        /* 'R' requests, 'S', 'K', 'v', 'N'; an 'E' is fatal and the server
         * closes. The first 'Z' ends the phase and answers nothing. */
        if (type == 'Z')
            g->phase = P_READY;
        return TB_PS_OK;
    }
    if (type == 'W') {
        /* CopyBothResponse: a replication stream, not requests. */
        ctx->ctr->streams++;
        g->stopped = true;
        return TB_PS_STOP;
    }
    if (type == 'N' || type == 'A' || type == 'S')
        return TB_PS_OK; /* asynchronous: never (part of) an answer */
    struct tb__pend *e = tb__pq_head(&g->pq);
    if (!e) {
        if (type == 'Z' && g->pq.untracked)
            tb__pq_pop(&g->pq);
        return TB_PS_OK; /* unsolicited, or an untracked batch's answer */
    }
    /* A message that a hole of no known time completed was last seen at
     * its first byte (a captured chunk): an unknown time moves nothing. */
    tb__pend_answer(e, d->msg_bytes, ts != TB__NO_TS ? ts : d->ts0);
    if (d->msg_gap)
        e->flags |= TB_REQ_GAP;
    if (type == 'E' && e->aux == 0) {
        int32_t s = sqlstate(h, d->head_cut ? 0 : hl);
        e->aux = (uint32_t)(s > 0 ? s : -1);
    } else if (type == 'Z') {
        emit_head(g, ctx, 0);
    }
    return TB_PS_OK;
}

/* ---- client messages ---------------------------------------------------- */

static void set_class(struct pg *g, struct tb__pend *e, enum rank r, const char *s, size_t n)
{
    if (e && e->kind < r) {
        tb__pq_set_class(&g->pq, e, s, n);
        e->kind = (uint8_t)r;
    }
}

/* The cstring at h[*off], without its NUL; false when it has none in the head
 * (a long name cut from the head is then read as far as it goes). */
static bool cstr(const uint8_t *h, size_t hl, size_t *off, const char **s, size_t *n)
{
    const uint8_t *p = h + *off;
    const uint8_t *z = memchr(p, 0, hl - *off);
    *s = (const char *)p;
    *n = z ? (size_t)(z - p) : hl - *off;
    *off += *n + (z ? 1 : 0);
    return z != NULL;
}

/* The open batch, or a new one starting with the message just read. */
static struct tb__pend *batch(struct pg *g, const struct tb_proto_ctx *ctx)
{
    struct pg_dir *d = &g->d[TB_DIR_C2S];
    struct tb__pend *e;
    if (g->batch_open) {
        e = tb__pq_find(&g->pq, g->batch_seq);
    } else {
        g->batch_open = true;
        e = tb__pq_push(&g->pq, ctx->ctr, d->ts0);
        g->batch_seq = g->pq.next_seq - 1;
    }
    if (e) {
        e->req_bytes += d->msg_bytes;
        if (d->msg_gap)
            e->flags |= TB_REQ_GAP;
        if (d->ts0 < e->arrival_ns)
            e->arrival_ns = d->ts0;
    }
    return e;
}

static enum tb_pstate startup_msg(struct pg *g, const struct tb_proto_ctx *ctx, const uint8_t *h,
                                  size_t hl)
{
    uint32_t code;
    struct tb_rd r = tb_rd_make(h, hl);
    if (!tb_rd_be32(&r, &code)) {
        lose_sync(g, ctx, true);
        return TB_PS_ERROR;
    }
    if (code == PG_CODE_SSL || code == PG_CODE_GSS) {
        g->phase = P_NEGOTIATE;
    } else if (code == PG_CODE_CANCEL) {
        /* The server reads the key and closes: nothing to pair. */
        g->stopped = true;
        return TB_PS_STOP;
    } else if ((code >> 16) == 3) {
        g->phase = P_AUTH;
    } else {
        lose_sync(g, ctx, true);
        return TB_PS_ERROR;
    }
    return TB_PS_OK;
}

static enum tb_pstate client_msg(struct pg *g, const struct tb_proto_ctx *ctx, uint8_t type,
                                 const uint8_t *h, size_t hl)
{
    struct pg_dir *d = &g->d[TB_DIR_C2S];
    char spare[TB__CLASS_MAX];
    const char *s, *s2;
    size_t n, n2, off = 0;
    struct tb__pend *e;
    if (type == 0)
        return startup_msg(g, ctx, h, hl);
    if (d->head_cut)
        hl = 0; /* the head is not contiguous: read no names or text from it */
    switch (type) {
    case 'p': /* password, SASL, GSS data */
    case 'X': /* Terminate */
        return TB_PS_OK;
    case 'd': case 'c': case 'f':
        /* COPY FROM STDIN data for the latest request. */
        if ((e = tb__pq_tail(&g->pq)) != NULL) {
            e->req_bytes += d->msg_bytes;
            if (d->msg_gap)
                e->flags |= TB_REQ_GAP;
        }
        return TB_PS_OK;
    case 'Q':
        e = batch(g, ctx);
        if (e && e->kind < RANK_STMT) {
            uint64_t key;
            const char *q =
                fingerprint(g, h, hl && h[hl - 1] == 0 ? hl - 1 : hl, spare, &n, &key);
            set_class(g, e, RANK_STMT, n ? q : "Query", n ? n : 5);
        }
        g->batch_open = false;
        return TB_PS_OK;
    case 'P':
        e = batch(g, ctx);
        cstr(h, hl, &off, &s, &n);
        cstr(h, hl, &off, &s2, &n2);
        uint64_t key;
        const char *q = fingerprint(g, (const uint8_t *)s2, n2, spare, &n2, &key);
        names_put(&g->stmts, PG_STMT_MAX, s, n, q, n2, key);
        if (e && e->kind < RANK_PREPARE) {
            /* Straight into the entry's text (what set_class() does, one copy
             * less). */
            char *cls = tb__pq_cls(&g->pq, e);
            e->class_len = 0;
            if (cls) {
                memcpy(cls, "PREPARE ", 8);
                size_t k = TB_MIN(n2, (size_t)TB__CLASS_MAX - 8);
                tb__copy_small(cls + 8, q, k);
                e->class_len = (uint16_t)(8 + k);
            }
            e->kind = RANK_PREPARE;
        }
        return TB_PS_OK;
    case 'B': {
        e = batch(g, ctx);
        cstr(h, hl, &off, &s, &n);
        cstr(h, hl, &off, &s2, &n2);
        struct pg_name *st = names_find(&g->stmts, s2, n2);
        if (st)
            names_put(&g->portals, PG_PORTAL_MAX, s, n, st->fp, st->flen, st->src);
        else
            names_del(&g->portals, s, n);
        return TB_PS_OK;
    }
    case 'E': {
        e = batch(g, ctx);
        cstr(h, hl, &off, &s, &n);
        struct pg_name *po = names_find(&g->portals, s, n);
        if (po)
            set_class(g, e, RANK_STMT, po->fp, po->flen);
        else
            set_class(g, e, RANK_STMT, "Execute", 7);
        return TB_PS_OK;
    }
    case 'C':
        e = batch(g, ctx);
        if (hl >= 1) {
            off = 1;
            cstr(h, hl, &off, &s, &n);
            names_del(h[0] == 'S' ? &g->stmts : &g->portals, s, n);
        }
        set_class(g, e, RANK_NAME, "Close", 5);
        return TB_PS_OK;
    case 'D':
        set_class(g, batch(g, ctx), RANK_NAME, "Describe", 8);
        return TB_PS_OK;
    case 'H':
        set_class(g, batch(g, ctx), RANK_NAME, "Flush", 5);
        return TB_PS_OK;
    case 'S':
        set_class(g, batch(g, ctx), RANK_NAME, "Sync", 4);
        g->batch_open = false;
        return TB_PS_OK;
    case 'F':
        set_class(g, batch(g, ctx), RANK_STMT, "FunctionCall", 12);
        g->batch_open = false;
        return TB_PS_OK;
    default:
        lose_sync(g, ctx, true);
        return TB_PS_ERROR;
    }
}

/* ---- answers cut by a capture hole -------------------------------------- */

/* A hole took the framing of the server's stream. Outside pipeline mode one
 * batch at a time is outstanding and its answer ends before the client's next
 * message: keep the exchange (GAP) and let that message close it, with the
 * departure of the last answer bytes captured (or of the cut packet, whose
 * time the hole carries), rather than lose it. */
static bool keep_lost(struct pg *g, const struct tb_proto_ctx *ctx, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&g->pq);
    struct pg_dir *d = &g->d[TB_DIR_S2C];
    if (!e || g->pq.len != 1 || g->pq.untracked || g->batch_open || g->phase != P_READY ||
        !g->d[TB_DIR_C2S].synced)
        return false;
    e->flags |= TB_REQ_GAP;
    bool mid = d->in_msg || d->hdr_have;
    tb__pend_answer(e, (mid ? d->msg_bytes : 0) + d->hdr_have + len, ts);
    dir_reset(d);
    d->synced = false;
    g->s2c_armed = false;
    g->s2c_lost = true;
    ctx->ctr->resyncs++;
    return true;
}

static void lost_more(struct pg *g, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&g->pq);
    if (e)
        tb__pend_answer(e, len, ts);
}

/* The client speaks again: the lost answer is over. */
static void lost_done(struct pg *g, const struct tb_proto_ctx *ctx)
{
    emit_head(g, ctx, 0);
    g->s2c_lost = false;
    dir_reset(&g->d[TB_DIR_S2C]);
    g->d[TB_DIR_S2C].synced = false;
    g->s2c_armed = true;
}

/* ---- stream reader ------------------------------------------------------ */

static bool wants_head(int dir, uint8_t type)
{
    if (dir == TB_DIR_S2C)
        return type == 'E';
    return type == 0 || type == 'Q' || type == 'P' || type == 'B' || type == 'E' || type == 'C';
}

static void collect(struct pg *g, int dir, const uint8_t *p, size_t k)
{
    struct pg_dir *d = &g->d[dir];
    size_t cap = dir == TB_DIR_C2S ? PG_QMAX : PG_SHEAD;
    if (!d->collect || d->head_len >= cap || k == 0 || d->head_cut)
        return;
    uint8_t *buf = g->shead;
    if (dir == TB_DIR_C2S) {
        if (!g->cbuf && !(g->cbuf = malloc(PG_QMAX)))
            return;
        buf = g->cbuf;
    }
    size_t n = TB_MIN(k, cap - d->head_len);
    memcpy(buf + d->head_len, p, n);
    d->head_len += (uint32_t)n;
}

static enum tb_pstate msg_end(struct pg *g, const struct tb_proto_ctx *ctx, int dir,
                              const uint8_t *h, size_t hl, int64_t ts)
{
    uint8_t type = g->d[dir].type;
    if (dir == TB_DIR_C2S) {
        if (g->s2c_lost && type != 'd' && type != 'c' && type != 'f')
            lost_done(g, ctx);
        return client_msg(g, ctx, type, h, hl);
    }
    return server_msg(g, ctx, type, h, hl, ts);
}

/* The bare byte answering an SSLRequest or GSSENCRequest. */
static enum tb_pstate negotiate(struct pg *g, const struct tb_proto_ctx *ctx, uint8_t b)
{
    if (b == 'N') {
        g->phase = P_STARTUP; /* refused: the client goes on in clear */
        return TB_PS_OK;
    }
    if (b == 'S' || b == 'G') {
        ctx->ctr->encrypted_flows++;
        g->stopped = true;
        return TB_PS_STOP;
    }
    lose_sync(g, ctx, true);
    return TB_PS_ERROR;
}

static enum tb_pstate pg_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct pg *g = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct pg_dir *d = &g->d[di];
    const uint8_t *end = p + n;
    enum tb_pstate ret = TB_PS_OK;
    if (g->stopped)
        return TB_PS_STOP;
    if (di == TB_DIR_S2C && g->s2c_lost) {
        lost_more(g, n, ts);
        return TB_PS_OK;
    }
    if (!d->synced && !try_sync(g, di, p, n))
        return TB_PS_OK;
    while (p < end && d->synced && !g->stopped) {
        if (di == TB_DIR_S2C && !d->in_msg && d->hdr_have == 0 && g->phase == P_READY) {
            size_t k = plain_answers(p, end);
            if (k) {
                /* Whole messages that only belong to the head's answer:
                 * counted at once, as server_msg would one by one. */
                struct tb__pend *e = tb__pq_head(&g->pq);
                if (e)
                    tb__pend_answer(e, k, ts);
                p += k;
                continue;
            }
        }
        if (!d->in_msg) {
            if (di == TB_DIR_S2C && g->phase == P_NEGOTIATE && d->hdr_have == 0) {
                enum tb_pstate r = negotiate(g, ctx, *p++);
                if (r != TB_PS_OK)
                    ret = r;
                continue;
            }
            /* Untyped start-up messages have a 4-byte header. */
            size_t hsz = di == TB_DIR_C2S && g->phase == P_STARTUP ? 4 : 5;
            if (d->hdr_have == 0) {
                d->ts0 = ts;
                d->msg_bytes = 0;
                d->head_len = 0;
                d->msg_gap = d->head_cut = false;
            }
            if (d->hdr_have == 0 && (size_t)(end - p) >= hsz) {
                memcpy(d->hdr, p, hsz);
                p += hsz;
            } else {
                size_t k = TB_MIN(hsz - d->hdr_have, (size_t)(end - p));
                memcpy(d->hdr + d->hdr_have, p, k);
                p += k;
                d->hdr_have = (uint8_t)(d->hdr_have + k);
                if (d->hdr_have < hsz)
                    break;
                d->hdr_have = 0;
            }
            uint8_t type = hsz == 5 ? d->hdr[0] : 0;
            uint32_t len = tb_load_be32(d->hdr + hsz - 4);
            bool ok = len >= 4 && (hsz == 5 ? (di == TB_DIR_C2S ? fe_type(type) : be_type(type))
                                            : len >= 8 && len <= PG_STARTUP_MAX);
            if (!ok) {
                lose_sync(g, ctx, true);
                return TB_PS_ERROR;
            }
            d->type = type;
            d->msg_bytes = hsz;
            d->left = len - 4;
            d->in_msg = true;
            d->collect = wants_head(di, type);
            if ((size_t)(end - p) >= d->left) {
                /* The whole payload in this chunk: read it in place. */
                const uint8_t *pl = p;
                size_t pn = d->left;
                p += pn;
                d->msg_bytes += pn;
                d->in_msg = false;
                d->left = 0;
                enum tb_pstate r = msg_end(g, ctx, di, pl, pn, ts);
                if (r != TB_PS_OK)
                    ret = r;
                continue;
            }
        }
        size_t k = TB_MIN((size_t)d->left, (size_t)(end - p));
        collect(g, di, p, k);
        p += k;
        d->left -= (uint32_t)k;
        d->msg_bytes += k;
        if (d->left > 0)
            break;
        d->in_msg = false;
        const uint8_t *h = di == TB_DIR_C2S ? g->cbuf : g->shead;
        size_t hl = h ? d->head_len : 0;
        enum tb_pstate r = msg_end(g, ctx, di, h ? h : p, hl, ts);
        if (r != TB_PS_OK)
            ret = r;
    }
    return g->stopped ? TB_PS_STOP : ret;
}

static enum tb_pstate pg_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct pg *g = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct pg_dir *d = &g->d[di];
    if (g->stopped)
        return TB_PS_STOP;
    if (di == TB_DIR_S2C && g->s2c_lost) {
        lost_more(g, len, ts);
        return TB_PS_OK;
    }
    if (!d->synced) {
        if (di == TB_DIR_S2C && g->s2c_armed)
            keep_lost(g, ctx, len, ts); /* the hole is the start of the answer */
        return TB_PS_OK;
    }
    if (d->in_msg && len > 0 && len <= d->left) {
        /* Inside one message: its length still says where the next starts. */
        d->left -= (uint32_t)len;
        d->msg_bytes += len;
        d->msg_gap = true;
        d->head_cut = true;
        if (d->left > 0)
            return TB_PS_OK;
        d->in_msg = false;
        const uint8_t *h = di == TB_DIR_C2S ? g->cbuf : g->shead;
        return msg_end(g, ctx, di, h ? h : g->shead, h ? d->head_len : 0, ts);
    }
    if (di == TB_DIR_S2C && keep_lost(g, ctx, len, ts))
        return TB_PS_OK;
    if (di == TB_DIR_C2S && g->pq.len + g->pq.untracked <= 1 && g->phase == P_READY) {
        /* Outside pipeline mode the open batch's Sync is likely in the
         * hole; the answer still pairs with it, and the client side waits
         * for a message start. */
        struct tb__pend *e = g->batch_open ? tb__pq_find(&g->pq, g->batch_seq) : NULL;
        if (e)
            e->flags |= TB_REQ_GAP;
        g->batch_open = false;
        dir_reset(d);
        d->synced = false;
        ctx->ctr->resyncs++;
        return TB_PS_OK;
    }
    lose_sync(g, ctx, false);
    return TB_PS_OK;
}

static void pg_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct pg *g = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!g->stopped) {
        struct tb__pend *e = tb__pq_head(&g->pq);
        if (e && g->s2c_lost)
            lost_done(g, ctx);
        else if (e && e->resp_seen)
            emit_head(g, ctx, TB_REQ_NORESP);
    }
    g->stopped = true;
}

static void pg_init(void *st, bool midstream)
{
    struct pg *g = st;
    memset(g, 0, sizeof *g);
    if (midstream) {
        g->phase = P_READY;
    } else {
        g->phase = P_STARTUP;
        g->d[0].synced = g->d[1].synced = true;
    }
}

static uint32_t pg_waiting(const void *st)
{
    return tb__pq_waiting(&((const struct pg *)st)->pq);
}

static void pg_fini(void *st)
{
    struct pg *g = st;
    tb__pq_free(&g->pq);
    free(g->cbuf);
    g->cbuf = NULL;
    names_free(&g->stmts);
    names_free(&g->portals);
    free(g->fpc);
    g->fpc = NULL;
}

static enum tb_detect pg_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    if (n >= 8 && p[0] == 0) {
        uint32_t len = tb_load_be32(p), code = tb_load_be32(p + 4);
        bool yes = (len == 8 && (code == PG_CODE_SSL || code == PG_CODE_GSS)) ||
                   (len == 16 && code == PG_CODE_CANCEL) ||
                   (code == PG_PROTO_3 && len >= 8 && len <= PG_STARTUP_MAX);
        if (yes) {
            *client_sent = true;
            return TB_DETECT_YES;
        }
        return TB_DETECT_NO;
    }
    if (n < 8 && n > 0 && p[0] == 0 && dir == TB_DIR_C2S)
        return TB_DETECT_MAYBE; /* a start-up packet's length, cut short */
    if (fe_chain(p, n)) {
        *client_sent = true;
        return TB_DETECT_YES;
    }
    if (be_chain(p, n)) {
        *client_sent = false;
        return TB_DETECT_YES;
    }
    return TB_DETECT_NO;
}

static const uint16_t pg_ports[] = {5432, 0};

const struct tb_proto tb_proto_postgres = {
    .name = "postgres",
    .ports = pg_ports,
    .state_size = sizeof(struct pg),
    .detect = pg_detect,
    .init = pg_init,
    .consume = pg_consume,
    .gap = pg_gap,
    .close = pg_close,
    .fini = pg_fini,
    .waiting = pg_waiting,
};
