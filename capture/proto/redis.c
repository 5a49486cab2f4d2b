/* SPDX-License-Identifier: MIT */
/* redis.c — Redis serialization protocol, RESP2 and RESP3: every command its
 * own request, pipelined or not (https://redis.io/docs/latest/develop/reference/protocol-spec/).
 *
 * A command is an array of bulk strings, or an inline line of words:
 *
 *   *<argc> CRLF  ( $<len> CRLF <len bytes> CRLF ){argc}
 *   PING CRLF                                  (inline; an empty line is nothing)
 *
 * A reply is one RESP value; aggregates nest:
 *
 *   + simple string   - error   : integer   $ bulk ($-1 null)   * array (*-1 null)
 *   RESP3: _ null  , double  # boolean  ( big number  ! blob error  = verbatim
 *          % map (2n values)  ~ set  | attribute (2n values, then the reply
 *          it annotates)  > push (out of band: never a reply)
 *
 * Replies come back in command order, so a FIFO pairs them: the commands of a
 * pipeline are separate requests, arriving with the packet that carries each
 * command's first byte and departing with the packet that carries its reply's
 * last byte. Inside MULTI each command is answered +QUEUED and EXEC answers
 * with the array of results: each is a request of its own.
 *
 * Exceptions to one reply per command: CLIENT REPLY OFF silences every
 * command up to CLIENT REPLY ON, CLIENT REPLY SKIP itself and the next one
 * (counted "unanswered", not recorded); SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and
 * MONITOR turn a RESP2 connection into a server push stream (counted as a
 * stream once the replies before it are in, then no longer parsed); on RESP3
 * (after HELLO 3) subscriptions are confirmed by pushes and the connection
 * goes on answering commands.
 *
 * Class: the command in upper case, with its subcommand for container
 * commands ("CONFIG GET", "CLIENT SETNAME"), as INFO commandstats counts them
 * (cmdstat_config|get). Status: 0, or for an error reply the number of its
 * code in resp_errs[] below (1 = ERR or a code not listed).
 *
 * Mid-stream the client side synchronises on a chunk that starts with an
 * array of bulk strings (or a known inline command), and the server side on
 * its next chunk that starts with a RESP type byte.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto-int.h"

#define RS_HDR_MAX 32u                /* "*<count>" and "$<len>" lines */
#define RS_INLINE_MAX (64u * 1024u)   /* Redis' own inline limit */
#define RS_LINE_MAX (64u * 1024u)     /* simple strings and errors in replies */
#define RS_ARGC_MAX (1024u * 1024u)   /* Redis refuses more arguments */
#define RS_BULK_MAX (512ull << 20)    /* proto-max-bulk-len default */
#define RS_WORD 24u                   /* command, subcommand and argument kept */
#define RS_SLOTS 4u                   /* classes a connection keeps (see struct rs_slot) */
#define RS_NOSLOT 0xffu               /* tb__pend.aux: the class is the entry's own text */

/* Error codes, by status number: the first word of an error reply. */
static const char *const resp_errs[] = {
    "", "ERR", "WRONGTYPE", "MOVED", "ASK", "NOSCRIPT", "BUSY", "LOADING", "NOAUTH", "OOM",
    "EXECABORT", "READONLY", "MASTERDOWN", "NOPERM", "MISCONF", "TRYAGAIN", "CROSSSLOT",
    "CLUSTERDOWN", "NOREPLICAS", "BUSYKEY", "UNBLOCKED", "WRONGPASS", "NOGROUP", "NOPROTO",
};


enum c_st { C_START, C_BULKLEN, C_BULK };
enum s_st { S_LINE, S_BULK };

/* What a finished command does to the pairing. */
enum kind { K_PLAIN, K_HELLO2, K_HELLO3, K_SUBSCRIBE, K_MONITOR, K_REPLY_ON, K_REPLY_OFF,
            K_REPLY_SKIP };

/* A command word in upper case. Bytes past len are zero (cli_reset clears
 * the words, and they are only ever written from the start), so the word is
 * also a fixed-size key (struct rs_slot). */
struct rs_word {
    char s[RS_WORD];
    uint8_t len;
    bool bad; /* longer than RS_WORD or not a command's characters */
};

/* A class the connection's commands had lately, for commands whose class is
 * the command word alone (all but container commands and odd names): queued
 * entries name their slot (tb__pend.aux) instead of each copying the text
 * into the queue's class text (tb__pq_cls, then never allocated), and the
 * slot keeps the catalog id the engine gave the text (tb_exchange.class_id).
 * On a pipelined capture the copies and lookups were two fifths of the
 * parser's time. A slot is replaced only when no queued entry names it; with
 * none free the class goes into the entry's text. */
struct rs_slot {
    char k[RS_WORD]; /* the rs_word's bytes, zero past len */
    uint32_t id;     /* catalog id of the text, 0 not known yet */
    uint16_t refs;   /* queued entries naming this slot */
    uint8_t len;     /* 0: free */
    /* A spelling of the command as sent (raw_key(); rawlen 0: none), kept
     * for a command that needs no other argument (args_wanted() 0): the
     * next command spelt so takes this slot, its kind and its class without
     * folding its name again. */
    uint8_t rawlen;
    uint8_t kind;
    uint64_t raw;
    /* The same spelling's command as sent up to its name's CRLF
     * ("*2\r\n$3\r\nGET\r\n": a count and a length of one digit, a name of
     * at most 6 bytes; plen bytes, 0: none), with its count: a command that
     * starts with these bytes hits the slot by one compare of two words
     * (the second masked by pmask), its count and name not read. */
    uint8_t plen;
    uint8_t pargc;
    uint64_t pa, pb, pmask;
};

struct rs_cli {
    struct tb__line ln;
    uint8_t st;
    bool synced;
    bool gap;          /* a hole inside the command being read */
    bool started;      /* some bytes of a command were read */
    uint8_t want;      /* args_wanted() of the command being read */
    uint32_t argi;     /* argument being read */
    uint32_t argc;
    uint64_t left;     /* bulk bytes to go, CRLF included */
    uint64_t blen;     /* the current bulk's length without CRLF */
    int64_t ts0;
    uint64_t bytes;
    struct rs_word w[3]; /* command, subcommand, first argument after it */
    /* fast_cmd(): the command word's raw bytes (rawlen 0: not taken), and
     * the slot whose raw spelling they are (RS_NOSLOT: none; the words are
     * then not read). */
    uint64_t raw;
    uint8_t rawlen;
    uint8_t hit;
    /* fast_cmd(): the command's first bytes for rs_slot.pa/pb (plen 0: not
     * taken). */
    uint8_t plen;
    uint64_t pa, pb, pmask;
};

struct rs_srv {
    struct tb__line ln;
    uint8_t st;
    bool synced;
    bool push;          /* the value being read is an out-of-band push */
    bool gap;
    bool err_bulk;      /* the top-level value is a blob error: its code is in the data */
    uint64_t need;      /* values still to read for the current reply (0: between replies) */
    uint64_t left;      /* bulk bytes to go, CRLF included */
    int32_t status;
    uint8_t elen;
    char ecode[16];     /* a blob error's first bytes */
};

struct rs {
    struct rs_cli c;
    struct rs_srv s;
    struct tb__pq pq;
    bool stopped;
    bool resp3;
    bool reply_off;   /* CLIENT REPLY OFF in force */
    bool skip_next;   /* CLIENT REPLY SKIP: the next command has no reply */
    bool stream;      /* SUBSCRIBE/MONITOR on RESP2: stop once the queue drains */
    bool streamed;    /* counted as a stream already */
    bool s2c_armed;
    bool s2c_lost;    /* the head's reply lost its framing in a hole */
    struct rs_slot slot[RS_SLOTS];
};

/* ---- small helpers ------------------------------------------------------ */

/* A command name's byte in upper case, or 0 for a byte no name has: one
 * load both checks and folds (names are copied for every command). */
#define UP_(c)                                                                              \
    ((c) >= 'a' && (c) <= 'z' ? (c) - 32                                                    \
     : ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9') || (c) == '_' ||          \
               (c) == '-' || (c) == '.' || (c) == '|' || (c) == ':'                         \
         ? (c)                                                                              \
         : 0)
#define UP4_(b) UP_(b), UP_((b) + 1), UP_((b) + 2), UP_((b) + 3)
#define UP16_(b) UP4_(b), UP4_((b) + 4), UP4_((b) + 8), UP4_((b) + 12)
#define UP64_(b) UP16_(b), UP16_((b) + 16), UP16_((b) + 32), UP16_((b) + 48)
static const uint8_t name_up[256] = {UP64_(0), UP64_(64), UP64_(128), UP64_(192)};

static void word_add(struct rs_word *w, const uint8_t *p, size_t n)
{
    if (w->bad)
        return;
    if (n > (size_t)(RS_WORD - w->len)) {
        w->bad = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t u = name_up[p[i]];
        if (!u) {
            w->bad = true;
            return;
        }
        w->s[w->len++] = (char)u;
    }
}

/* The same into an empty word, whole: the fast paths' case, one store of
 * the length instead of one per byte. */
static inline void word_set(struct rs_word *w, const uint8_t *p, size_t n)
{
    if (n > RS_WORD) {
        w->bad = true;
        return;
    }
    uint8_t miss = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t u = name_up[p[i]];
        miss |= (uint8_t)(u == 0);
        w->s[i] = (char)u;
    }
    w->len = (uint8_t)n;
    w->bad = miss != 0;
}

/* The first n (1 to 8) bytes at p as a number, the rest zero; 8 bytes must
 * be readable at p. A command name's spelling as one comparable key. */
static inline uint64_t raw_key(const uint8_t *p, size_t n)
{
    uint64_t v;
    memcpy(&v, p, 8);
    if (n == 8)
        return v;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return v & ~(~0ull >> (8 * n));
#else
    return v & ((1ull << (8 * n)) - 1);
#endif
}

/* Compares with a string literal (its length known at compile time). */
#define WORD_IS(w, lit)                                                       \
    (!(w)->bad && (w)->len == sizeof(lit) - 1 && (w)->s[0] == (lit)[0] &&      \
     memcmp((w)->s, (lit), sizeof(lit) - 1) == 0)

/* Parses "<digits>" or "-1"-like signed decimals; false on anything else. */
static bool parse_int(const char *s, size_t n, int64_t *v)
{
    bool neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n || n - i > 18)
        return false;
    int64_t x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    return true;
}

static bool text_line_ok(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 && p[i] != '\t')
            return false;
    return true;
}

static int32_t err_status(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && s[k] != ' ' && s[k] != '\r' && s[k] != '\n')
        k++;
    for (size_t i = 1; i < TB_ARRAY_SIZE(resp_errs); i++)
        if (strlen(resp_errs[i]) == k && memcmp(resp_errs[i], s, k) == 0)
            return (int32_t)i;
    return 1;
}

/* ---- synchronisation ---------------------------------------------------- */

static void cli_reset(struct rs_cli *c)
{
    c->st = C_START;
    c->gap = c->started = false;
    c->argi = c->argc = 0;
    c->want = 0;
    c->left = c->bytes = 0;
    memset(c->w, 0, sizeof c->w);
    c->rawlen = 0;
    c->plen = 0;
    c->hit = RS_NOSLOT;
    tb__line_reset(&c->ln);
}

static void srv_reset(struct rs_srv *s)
{
    s->st = S_LINE;
    s->push = s->gap = s->err_bulk = false;
    s->need = s->left = 0;
    s->status = 0;
    s->elen = 0;
    tb__line_reset(&s->ln);
}

static void lose_sync(struct rs *r, const struct tb_proto_ctx *ctx, bool error)
{
    tb__pq_clear(&r->pq);
    for (size_t i = 0; i < RS_SLOTS; i++)
        r->slot[i].refs = 0; /* no queued entry names a slot any more */
    cli_reset(&r->c);
    srv_reset(&r->s);
    r->c.synced = r->s.synced = false;
    r->s2c_armed = r->s2c_lost = false;
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

/* Inline commands a client may start a connection with. Those memcached also
 * has (get, set, incr, decr, append, touch, quit) are not here: detection
 * tells the two apart by their arguments and by the server's answer. */
static const char *const inline_cmds[] = {
    "PING", "ECHO", "INFO", "AUTH", "SELECT", "HELLO", "CLIENT", "CONFIG", "DEL", "EXISTS",
    "EXPIRE", "TTL", "KEYS", "SCAN", "MGET", "MSET", "SETEX", "SETNX", "INCRBY", "DECRBY",
    "LPUSH", "RPUSH", "LPOP", "RPOP", "LRANGE", "LLEN", "SADD", "SREM", "SMEMBERS", "SPOP",
    "ZADD", "ZRANGE", "ZREM", "ZPOPMIN", "HSET", "HGET", "HGETALL", "HDEL", "HMSET",
    "HMGET", "MULTI", "EXEC", "DISCARD", "WATCH", "SUBSCRIBE", "PUBLISH", "PSUBSCRIBE",
    "MONITOR", "FLUSHDB", "FLUSHALL", "DBSIZE", "XADD", "EVAL", "EVALSHA", "SCRIPT", "TYPE",
    "STRLEN", "GETSET", "COMMAND", "UNLINK",
};

static bool inline_known(const uint8_t *p, size_t n)
{
    size_t k = 0;
    while (k < n && k < 12 && p[k] != ' ' && p[k] != '\r' && p[k] != '\n')
        k++;
    if (k == 0 || k == n || k == 12)
        return false;
    for (size_t i = 0; i < TB_ARRAY_SIZE(inline_cmds); i++)
        if (strlen(inline_cmds[i]) == k && strncasecmp(inline_cmds[i], (const char *)p, k) == 0)
            return true;
    return false;
}

/* "*<digits>\r\n$" — the start of a command array. */
static bool array_start(const uint8_t *p, size_t n)
{
    size_t i = 1;
    if (n < 5 || p[0] != '*')
        return false;
    while (i < n && i < 9 && p[i] >= '0' && p[i] <= '9')
        i++;
    return i > 1 && n - i >= 3 && p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '$';
}

static bool resp_type(uint8_t b)
{
    return memchr("+-:$*_,#!=(%~|>", b, 15) != NULL && b != 0;
}

static bool try_sync(struct rs *r, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_C2S) {
        if (!array_start(p, n) && !inline_known(p, n))
            return false;
        r->c.synced = true;
        if (!r->s.synced && !r->s2c_lost) {
            /* Outside a pipeline the server's next chunk starts the reply to
             * this command. */
            srv_reset(&r->s);
            r->s2c_armed = true;
        }
        return true;
    }
    if (r->s2c_armed && n > 0 && resp_type(p[0])) {
        r->s.synced = true;
        r->s2c_armed = false;
        return true;
    }
    return false;
}

/* ---- replies -------------------------------------------------------------- */

static void maybe_stream(struct rs *r, const struct tb_proto_ctx *ctx)
{
    if (r->stream && r->pq.len == 0 && r->pq.untracked == 0) {
        if (!r->streamed)
            ctx->ctr->streams++;
        r->streamed = true;
        r->stopped = true;
    }
}

/* Emits the head of the queue (its class from its slot, or its own) and pops it. */
static void emit_head(struct rs *r, const struct tb_proto_ctx *ctx, int32_t status,
                      uint32_t flags)
{
    struct tb__pend *e = tb__pq_head(&r->pq);
    if (e && e->aux < RS_SLOTS) {
        struct rs_slot *sl = &r->slot[e->aux];
        tb__pend_emit_id(e, ctx, status, flags, sl->k, sl->len, &sl->id);
        sl->refs--;
        tb__pq_pop(&r->pq);
        return;
    }
    tb__pq_emit_head(&r->pq, ctx, status, flags, NULL, 0);
}

/* The reply being read is complete. */
static void reply_done(struct rs *r, const struct tb_proto_ctx *ctx)
{
    struct rs_srv *s = &r->s;
    if (s->push) {
        s->push = false;
        return;
    }
    struct tb__pend *e = tb__pq_head(&r->pq);
    if (e && s->gap)
        e->flags |= TB_REQ_GAP;
    if (e && s->status == 0 && (e->kind == K_HELLO2 || e->kind == K_HELLO3))
        r->resp3 = e->kind == K_HELLO3;
    emit_head(r, ctx, s->status, 0);
    s->gap = false;
    maybe_stream(r, ctx);
}

/* Bytes of the server stream consumed for the reply being read. */
static void s_acct(struct rs *r, uint64_t n, int64_t ts)
{
    if (r->s.push || n == 0)
        return;
    struct tb__pend *e = tb__pq_head(&r->pq);
    if (e)
        tb__pend_answer(e, n, ts);
}

/* One value's header line. Returns false when it is not RESP. */
static bool s_line(struct rs *r, const struct tb_proto_ctx *ctx, const char *l, size_t n)
{
    struct rs_srv *s = &r->s;
    if (n == 0)
        return false;
    bool top = s->need == 0;
    if (top) {
        s->need = 1;
        s->status = 0;
        s->push = l[0] == '>';
        s->err_bulk = false;
    }
    int64_t v;
    switch (l[0]) {
    case '-':
        if (top)
            s->status = err_status(l + 1, n - 1);
        s->need--;
        break;
    case '+': case ':': case ',': case '#': case '_': case '(':
        s->need--;
        break;
    case '$': case '=': case '!':
        if (!parse_int(l + 1, n - 1, &v) || v < -1 || (v > 0 && (uint64_t)v > RS_BULK_MAX))
            return false;
        if (v == -1) {
            s->need--;
            break;
        }
        if (top && l[0] == '!') {
            s->err_bulk = true;
            s->elen = 0;
        }
        s->left = (uint64_t)v + 2;
        s->st = S_BULK;
        return true;
    case '*': case '~': case '>': case '%': case '|':
        if (!parse_int(l + 1, n - 1, &v) || v < -1 || v > (int64_t)UINT32_MAX)
            return false;
        if (l[0] == '|')
            s->need += 2 * (uint64_t)(v < 0 ? 0 : v); /* annotates the value that follows */
        else if (v <= 0)
            s->need--;
        else
            s->need += (l[0] == '%' ? 2 : 1) * (uint64_t)v - 1;
        break;
    default:
        return false;
    }
    if (s->need == 0)
        reply_done(r, ctx);
    return true;
}

/* The common case: a whole scalar reply (+OK, :1, $3 abc, $-1, -ERR …) in
 * this chunk. Returns its size with *status set, or 0. */
static size_t fast_reply(const uint8_t *p, const uint8_t *end, int32_t *status)
{
    uint8_t t = *p;
    if (t != '+' && t != ':' && t != '$' && t != '-')
        return 0;
    if (t == '$' && end - p >= 4 && p[1] >= '0' && p[1] <= '9' && p[2] == '\r' &&
        p[3] == '\n') {
        /* A bulk string shorter than ten bytes ("$3\r\nabc\r\n"): no line search. */
        size_t v = (size_t)(p[1] - '0');
        if ((size_t)(end - p - 4) < v + 2)
            return 0;
        *status = 0;
        return 4 + v + 2;
    }
    if (t == '+' && end - p >= 5 && memcmp(p + 1, "OK\r\n", 4) == 0) {
        *status = 0; /* the most common reply of all, without the search below */
        return 5;
    }
    /* The line's end: short replies (+OK) by hand, a call costs more. */
    const uint8_t *nl = NULL;
    const uint8_t *lim = end - p > 32 ? p + 32 : end;
    for (const uint8_t *x = p + 1; x < lim; x++)
        if (*x == '\n') {
            nl = x;
            break;
        }
    if (!nl && lim < end)
        nl = memchr(lim, '\n', (size_t)(end - lim));
    if (!nl || nl - p < 2 || nl[-1] != '\r')
        return 0;
    size_t used = (size_t)(nl + 1 - p);
    *status = 0;
    if (t == '-') {
        *status = err_status((const char *)p + 1, used - 3);
    } else if (t == '$') {
        int64_t v;
        if (!parse_int((const char *)p + 1, used - 3, &v) || v < -1)
            return 0;
        if (v >= 0) {
            if ((uint64_t)(end - nl - 1) < (uint64_t)v + 2)
                return 0;
            used += (size_t)v + 2;
        }
    }
    return used;
}

static enum tb_pstate s_consume(struct rs *r, const struct tb_proto_ctx *ctx, const uint8_t *p,
                                size_t n, int64_t ts)
{
    struct rs_srv *s = &r->s;
    const uint8_t *end = p + n;
    while (p < end && !r->stopped) {
        if (s->st == S_BULK) {
            size_t k = (size_t)TB_MIN(s->left, (uint64_t)(end - p));
            if (s->err_bulk && s->elen < sizeof s->ecode) {
                size_t c = TB_MIN(k, sizeof s->ecode - s->elen);
                memcpy(s->ecode + s->elen, p, c);
                s->elen = (uint8_t)(s->elen + c);
            }
            p += k;
            s->left -= k;
            s_acct(r, k, ts);
            if (s->left > 0)
                break;
            s->st = S_LINE;
            if (s->err_bulk && s->need == 1)
                s->status = err_status(s->ecode, s->elen);
            s->err_bulk = false;
            if (--s->need == 0)
                reply_done(r, ctx);
            continue;
        }
        if (s->need == 0 && s->ln.len == 0) {
            /* Whole scalar replies to plain commands with a class slot, one
             * after the other while this chunk holds them: what s_acct() and
             * reply_done() do for each (emitting does not change what makes
             * them so). A pipeline's replies are mostly this loop. */
            bool easy = !s->gap && !r->stream;
            int32_t status;
            size_t used;
            struct tb__pend *e;
            while ((used = fast_reply(p, end, &status)) != 0 && easy &&
                   (e = tb__pq_head(&r->pq)) != NULL && e->aux < RS_SLOTS &&
                   e->kind == K_PLAIN) {
                p += used;
                s->push = false;
                s->status = status;
                tb__pend_answer(e, used, ts);
                struct rs_slot *sl = &r->slot[e->aux];
                tb__pend_emit_id(e, ctx, status, 0, sl->k, sl->len, &sl->id);
                sl->refs--;
                tb__pq_pop(&r->pq);
                if (p == end)
                    return TB_PS_OK;
            }
            if (used) {
                p += used;
                s->push = false;
                s->status = status;
                s_acct(r, used, ts);
                reply_done(r, ctx);
                continue;
            }
            s->push = *p == '>'; /* so that a push's bytes are never counted */
        }
        const char *l;
        size_t ll;
        uint64_t raw;
        int64_t ts0;
        const uint8_t *before = p;
        int rc = tb__line_take(&s->ln, &p, end, RS_LINE_MAX, ts, &l, &ll, &raw, &ts0);
        s_acct(r, (uint64_t)(p - before), ts);
        if (rc == TB__LINE_MORE)
            break;
        if (rc != TB__LINE_OK || !s_line(r, ctx, l, ll)) {
            lose_sync(r, ctx, true);
            return TB_PS_ERROR;
        }
    }
    return TB_PS_OK;
}

/* ---- commands ------------------------------------------------------------- */

/* Commands whose first argument is a subcommand (INFO commandstats counts
 * them as "config|get"); by length first, as this runs for every command. */
static bool is_container(const struct rs_word *w)
{
    switch (w->bad ? 0 : w->len) {
    case 3:
        return WORD_IS(w, "ACL");
    case 5:
        return WORD_IS(w, "XINFO");
    case 6:
        return WORD_IS(w, "CLIENT") || WORD_IS(w, "CONFIG") || WORD_IS(w, "MEMORY") ||
               WORD_IS(w, "MODULE") || WORD_IS(w, "OBJECT") || WORD_IS(w, "PUBSUB") ||
               WORD_IS(w, "SCRIPT") || WORD_IS(w, "XGROUP");
    case 7:
        return WORD_IS(w, "CLUSTER") || WORD_IS(w, "COMMAND") || WORD_IS(w, "LATENCY") ||
               WORD_IS(w, "SLOWLOG");
    case 8:
        return WORD_IS(w, "FUNCTION") || WORD_IS(w, "SENTINEL");
    default:
        return false;
    }
}

/* Which later arguments a command's kind or class needs (bit i: argument i;
 * W_SUB: the first names a subcommand, part of the class). */
enum { W_SUB = 1 };
static uint8_t args_wanted(const struct rs_word *w)
{
    if (w->bad || w->len < 3)
        return 0;
    if (WORD_IS(w, "CLIENT"))
        return W_SUB | 2 | 4; /* CLIENT REPLY ON|OFF|SKIP */
    if (is_container(w))
        return W_SUB | 2;
    return WORD_IS(w, "HELLO") ? 2 : 0;
}

static enum kind cmd_kind(const struct rs_cli *c)
{
    const struct rs_word *w = c->w;
    switch (w[0].bad ? 0 : w[0].len) {
    case 5:
        if (WORD_IS(&w[0], "HELLO") && w[1].len > 0)
            return WORD_IS(&w[1], "3") ? K_HELLO3 : WORD_IS(&w[1], "2") ? K_HELLO2 : K_PLAIN;
        return K_PLAIN;
    case 6:
        if (WORD_IS(&w[0], "CLIENT") && WORD_IS(&w[1], "REPLY")) {
            if (WORD_IS(&w[2], "ON"))
                return K_REPLY_ON;
            if (WORD_IS(&w[2], "OFF"))
                return K_REPLY_OFF;
            if (WORD_IS(&w[2], "SKIP"))
                return K_REPLY_SKIP;
        }
        return K_PLAIN;
    case 7:
        return WORD_IS(&w[0], "MONITOR") ? K_MONITOR : K_PLAIN;
    case 9:
        return WORD_IS(&w[0], "SUBSCRIBE") ? K_SUBSCRIBE : K_PLAIN;
    case 10:
        return WORD_IS(&w[0], "PSUBSCRIBE") || WORD_IS(&w[0], "SSUBSCRIBE") ? K_SUBSCRIBE
                                                                             : K_PLAIN;
    default:
        return K_PLAIN;
    }
}

/* Names the slot holding the class `w` in entry e (e->aux), taking a free
 * slot for a class not held; false when every slot is named by a queued
 * entry of another class. */
static bool slot_take(struct rs *r, const struct rs_word *w, struct tb__pend *e)
{
    struct rs_slot *free_sl = NULL;
    for (size_t i = 0; i < RS_SLOTS; i++) {
        struct rs_slot *sl = &r->slot[i];
        /* Whole fixed-size keys: bytes past len are zero in both. */
        if (sl->len == w->len && memcmp(sl->k, w->s, RS_WORD) == 0) {
            sl->refs++;
            e->aux = (uint32_t)i;
            return true;
        }
        if (!free_sl && sl->refs == 0)
            free_sl = sl;
    }
    if (!free_sl)
        return false;
    memcpy(free_sl->k, w->s, RS_WORD);
    free_sl->len = w->len;
    free_sl->rawlen = 0;
    free_sl->plen = 0;
    free_sl->id = 0; /* a new text: its id is looked up again */
    free_sl->refs = 1;
    e->aux = (uint32_t)(free_sl - r->slot);
    return true;
}

/* A whole command has been read. */
static void cmd_done(struct rs *r, const struct tb_proto_ctx *ctx)
{
    struct rs_cli *c = &r->c;
    enum kind k = c->hit < RS_SLOTS ? (enum kind)r->slot[c->hit].kind : cmd_kind(c);
    bool answered = true;
    if (r->reply_off) {
        answered = k == K_REPLY_ON;
        if (answered)
            r->reply_off = false;
    } else if (r->skip_next) {
        answered = false;
        r->skip_next = false;
    }
    if (k == K_REPLY_OFF) {
        r->reply_off = true;
        answered = false;
    } else if (k == K_REPLY_SKIP) {
        r->skip_next = true;
        answered = false;
    }
    if (answered && (k == K_MONITOR || (k == K_SUBSCRIBE && !r->resp3))) {
        r->stream = true;
        maybe_stream(r, ctx);
        answered = false;
    } else if (answered && k == K_SUBSCRIBE) {
        /* RESP3: confirmed by a push; the connection goes on answering. */
        if (!r->streamed)
            ctx->ctr->streams++;
        r->streamed = true;
        answered = false;
    } else if (!answered) {
        ctx->ctr->unanswered++;
    }
    if (answered && !r->stream) {
        struct tb__pend *e = tb__pq_push(&r->pq, ctx->ctr, c->ts0);
        if (e) {
            e->req_bytes = c->bytes;
            e->kind = (uint8_t)k;
            if (c->gap)
                e->flags |= TB_REQ_GAP;
            if (c->hit < RS_SLOTS) {
                r->slot[c->hit].refs++;
                e->aux = c->hit;
                goto out;
            }
            e->aux = RS_NOSLOT;
            bool plain = !c->w[0].bad && c->w[0].len > 0 && !(c->argc > 1 && (c->want & W_SUB));
            if (plain && slot_take(r, &c->w[0], e)) {
                if (c->rawlen && c->want == 0) {
                    struct rs_slot *sl = &r->slot[e->aux];
                    sl->raw = c->raw;
                    sl->rawlen = c->rawlen;
                    sl->plen = c->plen;
                    sl->pargc = (uint8_t)c->argc;
                    sl->pa = c->pa;
                    sl->pb = c->pb;
                    sl->pmask = c->pmask;
                    sl->kind = (uint8_t)k;
                }
                goto out;
            }
            /* Straight into the entry's text: at most 2 * RS_WORD + 1 bytes,
             * well within its buffer. */
            _Static_assert(2 * RS_WORD + 1 <= TB__CLASS_MAX, "a Redis class fits an entry");
            char *cls = tb__pq_cls(&r->pq, e);
            if (!cls)
                goto out; /* class_len 0: "unknown" */
            size_t n = 0;
            if (c->w[0].bad || c->w[0].len == 0) {
                memcpy(cls, "unknown", 7);
                n = 7;
            } else {
                memcpy(cls, c->w[0].s, c->w[0].len);
                n = c->w[0].len;
                if (c->argc > 1 && (c->want & W_SUB)) {
                    cls[n++] = ' ';
                    if (c->w[1].bad) {
                        cls[n++] = '?';
                    } else {
                        memcpy(cls + n, c->w[1].s, c->w[1].len);
                        n += c->w[1].len;
                    }
                }
            }
            e->class_len = (uint16_t)n;
        }
    }
out:
    cli_reset(c);
}

/* An inline command line: words split by blanks. */
static void inline_cmd(struct rs *r, const struct tb_proto_ctx *ctx, const char *l, size_t n)
{
    struct rs_cli *c = &r->c;
    size_t i = 0;
    c->argc = 0;
    while (i < n) {
        while (i < n && (l[i] == ' ' || l[i] == '\t'))
            i++;
        size_t j = i;
        while (j < n && l[j] != ' ' && l[j] != '\t')
            j++;
        if (j > i) {
            if (c->argc < 3)
                word_add(&c->w[c->argc], (const uint8_t *)l + i, j - i);
            c->argc++;
        }
        i = j;
    }
    if (c->argc == 0) {
        cli_reset(c); /* an empty line: Redis ignores it, no reply */
        return;
    }
    c->want = args_wanted(&c->w[0]);
    cmd_done(r, ctx);
}

/* A 4-byte load in little-endian order. */
static inline uint32_t le32(uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* The first 8 bytes at q as a little-endian number: a bulk string's header
 * ("$3\r\n", "$16\r\n") checked by a mask and a compare instead of byte by
 * byte. */
static inline uint64_t le64_at(const uint8_t *q)
{
    uint64_t v;
    memcpy(&v, q, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* One whole bulk string at q ("$<len>" CRLF <len bytes> CRLF, a length of
 * one to ten digits): the start of its bytes, *len set, or NULL when it is
 * not that or does not end before `end`. A length of one or two digits (nearly
 * all of them) is read from one load; the loop reads the same text. */
static inline const uint8_t *bulk_at(const uint8_t *q, const uint8_t *end, uint64_t *lenp)
{
    uint64_t len;
    uint64_t d1, d2;
    if (end - q >= 8) {
        uint64_t v = le64_at(q);
        d1 = ((v >> 8) & 0xff) - '0';
        d2 = ((v >> 16) & 0xff) - '0';
        if ((v & 0xffff00ffu) == 0x0a0d0024u && d1 < 10) {
            len = d1; /* "$d\r\n" */
            q += 4;
            goto data;
        }
        if ((v & 0xffff0000ffull) == 0x0a0d000024ull && d1 < 10 && d2 < 10) {
            len = d1 * 10 + d2; /* "$dd\r\n" */
            q += 5;
            goto data;
        }
    }
    if (end - q < 4 || *q != '$')
        return NULL;
    const uint8_t *d = ++q;
    len = 0;
    while (q < end && *q >= '0' && *q <= '9' && q - d < 10)
        len = len * 10 + (uint64_t)(*q++ - '0');
    if (q == d || end - q < 2 || q[0] != '\r' || q[1] != '\n')
        return NULL;
    q += 2;
data:
    if ((uint64_t)(end - q) < len + 2 || memcmp(q + len, "\r\n", 2) != 0)
        return NULL;
    *lenp = len;
    return q;
}

/* The common case: a whole command array in this chunk, read in one pass.
 * Returns its size, or 0 (with nothing changed but the words, which the
 * general path starts over) when it is not whole here or not plain. */
static size_t fast_cmd(struct rs *r, const uint8_t *p, const uint8_t *end, uint8_t *hitp)
{
    struct rs_cli *c = &r->c;
    const uint8_t *q = p + 1;
    uint32_t argc = 0;
    uint64_t len;
    const uint8_t *b;
    if (end - p >= 16) {
        /* The command's first bytes as a slot's command was sent: what the
         * reading below would find, the slot included (rs_slot.pa). */
        uint64_t pa, pb;
        memcpy(&pa, p, 8);
        memcpy(&pb, p + 8, 8);
        for (uint8_t s = 0; s < RS_SLOTS; s++) {
            const struct rs_slot *sl = &r->slot[s];
            if (sl->plen && sl->pa == pa && (pb & sl->pmask) == sl->pb) {
                q = p + sl->plen;
                for (uint32_t i = 1; i < sl->pargc; i++) {
                    if (!(b = bulk_at(q, end, &len)))
                        goto slow;
                    q = b + len + 2;
                }
                *hitp = s;
                return (size_t)(q - p);
            }
        }
    }
    /* Counts of one digit from one load (nearly all of them), longer ones by
     * the loop; both accept exactly the same text. */
    uint32_t h;
    if (end - p >= 4 && (memcpy(&h, p, 4), (le32(h) & 0xffff00ffu) == 0x0a0d002au) &&
        (uint32_t)((le32(h) >> 8) & 0xff) - '1' < 9) {
        argc = (uint32_t)((le32(h) >> 8) & 0xff) - '0';
        q = p + 4;
    } else {
        while (q < end && *q >= '0' && *q <= '9' && argc < 1000)
            argc = argc * 10 + (uint32_t)(*q++ - '0');
        if (q == p + 1 || end - q < 2 || q[0] != '\r' || q[1] != '\n' || argc == 0 ||
            argc >= 1000)
            return 0;
        q += 2;
    }
    /* The command name. */
    b = bulk_at(q, end, &len);
    if (!b)
        goto slow;
    if (len >= 1 && len <= 8 && end - b >= 8) {
        /* A spelling seen before: its slot has the rest, and no other
         * argument is read, only stepped over. */
        uint64_t raw = raw_key(b, (size_t)len);
        for (uint8_t s = 0; s < RS_SLOTS; s++)
            if (r->slot[s].rawlen == len && r->slot[s].raw == raw) {
                q = b + len + 2;
                for (uint32_t i = 1; i < argc; i++) {
                    if (!(b = bulk_at(q, end, &len)))
                        goto slow;
                    q = b + len + 2;
                }
                *hitp = s;
                return (size_t)(q - p);
            }
        c->raw = raw;
        c->rawlen = (uint8_t)len;
        c->plen = 0;
        if (b == p + 8 && len <= 6 && end - p >= 16) {
            /* "*<d>\r\n$<d>\r\n<name>\r\n" within the first 16 bytes. */
            c->plen = (uint8_t)(10 + len);
            c->pmask = raw_key((const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff",
                               (size_t)c->plen - 8);
            memcpy(&c->pa, p, 8);
            memcpy(&c->pb, p + 8, 8);
            c->pb &= c->pmask;
        }
    }
    word_set(&c->w[0], b, (size_t)len);
    uint8_t want = args_wanted(&c->w[0]);
    q = b + len + 2;
    for (uint32_t i = 1; i < argc; i++) {
        if (!(b = bulk_at(q, end, &len)))
            goto slow;
        if (i < 3 && (want & (1u << i)))
            word_set(&c->w[i], b, (size_t)len);
        q = b + len + 2;
    }
    *hitp = RS_NOSLOT;
    c->argc = argc;
    c->want = want;
    return (size_t)(q - p);
slow:
    memset(c->w, 0, sizeof c->w);
    c->rawlen = 0;
    c->plen = 0;
    c->hit = RS_NOSLOT;
    return 0;
}

static enum tb_pstate c_consume(struct rs *r, const struct tb_proto_ctx *ctx, const uint8_t *p,
                                size_t n, int64_t ts)
{
    struct rs_cli *c = &r->c;
    const uint8_t *end = p + n;
    while (p < end && !r->stopped) {
        if (!c->started && c->st == C_START && c->ln.len == 0 && *p == '*') {
            /* A command starts here, whole in this chunk as a rule. While
             * its name hits a slot of a plain command (and no reply mode or
             * stream is in force, which such a command does not change),
             * what cmd_done() and cli_reset() do for it, less what is already
             * so, and on to the next: a pipeline of small commands is mostly
             * this loop. */
            bool easy = !r->reply_off && !r->skip_next && !r->stream && !c->gap;
            bool next = false; /* the loop ended at a byte that starts no command */
            uint8_t hit = RS_NOSLOT;
            size_t used;
            for (;;) {
                used = fast_cmd(r, p, end, &hit);
                if (!used || !easy || hit >= RS_SLOTS || r->slot[hit].kind != K_PLAIN)
                    break;
                p += used;
                struct tb__pend *e = tb__pq_push(&r->pq, ctx->ctr, ts);
                if (e) {
                    e->req_bytes = used;
                    e->kind = K_PLAIN;
                    e->aux = hit;
                    r->slot[hit].refs++;
                }
                c->ln.skipping = false;
                if (p == end || *p != '*') {
                    next = true;
                    break;
                }
            }
            if (next)
                continue; /* the loop below sees to that byte, or the chunk ended */
            c->started = true;
            c->ts0 = ts;
            c->bytes = 0;
            if (used) {
                /* Whole, but not one of those: the general way. */
                p += used;
                c->bytes = used;
                c->hit = hit;
                cmd_done(r, ctx);
                continue;
            }
        } else if (!c->started) {
            c->started = true;
            c->ts0 = ts;
            c->bytes = 0;
        }
        if (c->st == C_BULK) {
            size_t k = (size_t)TB_MIN(c->left, (uint64_t)(end - p));
            if (c->argi == 0 || (c->argi < 3 && (c->want & (1u << c->argi)))) {
                /* Only the bytes of the value itself, not its CRLF. */
                uint64_t done = c->blen + 2 - c->left;
                if (done < c->blen)
                    word_add(&c->w[c->argi], p, (size_t)TB_MIN((uint64_t)k, c->blen - done));
            }
            p += k;
            c->left -= k;
            c->bytes += k;
            if (c->left > 0)
                break;
            c->st = C_BULKLEN;
            if (c->argi == 0)
                c->want = args_wanted(&c->w[0]);
            if (++c->argi == c->argc)
                cmd_done(r, ctx);
            continue;
        }
        const char *l;
        size_t ll;
        uint64_t raw;
        int64_t ts0;
        bool inl = c->st == C_START && c->ln.len == 0 && *p != '*';
        if (c->st == C_START && c->ln.len > 0)
            inl = c->ln.buf[0] != '*';
        int rc = tb__line_take(&c->ln, &p, end, inl ? RS_INLINE_MAX : RS_HDR_MAX, ts, &l, &ll,
                               &raw, &ts0);
        if (rc == TB__LINE_MORE)
            break; /* the line's bytes are counted (raw) when it is whole */
        if (rc != TB__LINE_OK) {
            lose_sync(r, ctx, true);
            return TB_PS_ERROR;
        }
        c->bytes += raw;
        int64_t v;
        if (c->st == C_START) {
            if (ll == 0 || l[0] != '*') {
                inline_cmd(r, ctx, l, ll);
                continue;
            }
            if (!parse_int(l + 1, ll - 1, &v) || v > (int64_t)RS_ARGC_MAX) {
                lose_sync(r, ctx, true);
                return TB_PS_ERROR;
            }
            if (v <= 0) {
                cli_reset(c); /* an empty command: no reply */
                continue;
            }
            c->argc = (uint32_t)v;
            c->argi = 0;
            c->st = C_BULKLEN;
        } else {
            if (ll < 2 || l[0] != '$' || !parse_int(l + 1, ll - 1, &v) || v < 0 ||
                (uint64_t)v > RS_BULK_MAX) {
                lose_sync(r, ctx, true);
                return TB_PS_ERROR;
            }
            c->blen = (uint64_t)v;
            c->left = (uint64_t)v + 2;
            c->st = C_BULK;
        }
    }
    return TB_PS_OK;
}

/* ---- answers cut by a capture hole ---------------------------------------- */

/* A hole took the framing of the server's stream while one command was
 * outstanding: its reply ends before the client's next command (outside a
 * pipeline), which closes it (GAP) with the last reply bytes captured. */
static bool keep_lost(struct rs *r, const struct tb_proto_ctx *ctx, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&r->pq);
    if (!e || r->pq.len != 1 || r->pq.untracked || r->c.started || !r->c.synced || r->s.push)
        return false;
    e->flags |= TB_REQ_GAP;
    tb__pend_answer(e, len, ts);
    srv_reset(&r->s);
    r->s.synced = false;
    r->s2c_armed = false;
    r->s2c_lost = true;
    ctx->ctr->resyncs++;
    return true;
}

static void lost_more(struct rs *r, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&r->pq);
    if (e)
        tb__pend_answer(e, len, ts);
}

static void lost_done(struct rs *r, const struct tb_proto_ctx *ctx)
{
    r->s.status = -1;
    r->s.push = false;
    reply_done(r, ctx);
    srv_reset(&r->s);
    r->s2c_lost = false;
    r->s.synced = false;
    r->s2c_armed = true;
}

/* ---- descriptor ------------------------------------------------------------ */

static enum tb_pstate rs_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct rs *r = st;
    if (r->stopped)
        return TB_PS_STOP;
    if (dir == TB_DIR_S2C && r->s2c_lost) {
        lost_more(r, n, ts);
        return TB_PS_OK;
    }
    if (dir == TB_DIR_C2S) {
        if (!r->c.synced && !try_sync(r, TB_DIR_C2S, p, n))
            return TB_PS_OK;
        if (r->s2c_lost && !r->c.started)
            lost_done(r, ctx);
        enum tb_pstate ps = c_consume(r, ctx, p, n, ts);
        return r->stopped ? TB_PS_STOP : ps;
    }
    if (!r->s.synced && !try_sync(r, TB_DIR_S2C, p, n))
        return TB_PS_OK;
    enum tb_pstate ps = s_consume(r, ctx, p, n, ts);
    return r->stopped ? TB_PS_STOP : ps;
}

static enum tb_pstate rs_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct rs *r = st;
    if (r->stopped)
        return TB_PS_STOP;
    if (dir == TB_DIR_C2S) {
        struct rs_cli *c = &r->c;
        if (c->synced && c->st == C_BULK && len > 0 && len <= c->left) {
            /* Inside a value: its length still frames what follows. */
            c->left -= len;
            c->bytes += len;
            c->gap = true;
            if (c->argi < 3)
                c->w[c->argi].bad = true;
            if (c->left == 0) {
                c->st = C_BULKLEN;
                if (++c->argi == c->argc)
                    cmd_done(r, ctx);
            }
            return r->stopped ? TB_PS_STOP : TB_PS_OK;
        }
        if (c->synced || r->pq.len)
            lose_sync(r, ctx, false);
        return TB_PS_OK;
    }
    struct rs_srv *s = &r->s;
    if (r->s2c_lost) {
        lost_more(r, len, ts);
        return TB_PS_OK;
    }
    if (s->synced && s->st == S_BULK && len > 0 && len <= s->left) {
        s->left -= len;
        s->gap = true;
        s->elen = sizeof s->ecode; /* an error code cut: taken as far as it goes */
        s_acct(r, len, ts);
        if (s->left == 0) {
            s->st = S_LINE;
            if (--s->need == 0)
                reply_done(r, ctx);
        }
        return r->stopped ? TB_PS_STOP : TB_PS_OK;
    }
    if ((s->synced || r->s2c_armed) && keep_lost(r, ctx, len, ts))
        return TB_PS_OK;
    if (s->synced || r->pq.len)
        lose_sync(r, ctx, false);
    return TB_PS_OK;
}

static void rs_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct rs *r = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!r->stopped) {
        struct tb__pend *e = tb__pq_head(&r->pq);
        if (e && r->s2c_lost)
            lost_done(r, ctx);
        else if (e && e->resp_seen && !r->s.push)
            emit_head(r, ctx, -1, TB_REQ_NORESP);
    }
    r->stopped = true;
}

static void rs_init(void *st, bool midstream)
{
    struct rs *r = st;
    memset(r, 0, sizeof *r);
    r->c.hit = RS_NOSLOT;
    r->c.synced = r->s.synced = !midstream;
}

static uint32_t rs_waiting(const void *st)
{
    return tb__pq_waiting(&((const struct rs *)st)->pq);
}

static void rs_fini(void *st)
{
    struct rs *r = st;
    tb__pq_free(&r->pq);
    tb__line_free(&r->c.ln);
    tb__line_free(&r->s.ln);
}

/* Arguments of an inline line, for telling Redis from memcached: memcached's
 * get takes any number of keys, Redis' exactly one. */
static size_t inline_words(const uint8_t *p, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && (i == 0 || p[i - 1] == ' '))
            w++;
    return w;
}

/* Words 3 to 5 of a line are numbers: memcached's "set k flags exptime bytes". */
static bool mc_numbers(const uint8_t *p, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            if (i + 1 < n && p[i + 1] != ' ')
                w++;
            continue;
        }
        if (w >= 2 && w <= 4 && (p[i] < '0' || p[i] > '9'))
            return false;
    }
    return w >= 4;
}

static enum tb_detect rs_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    if (n == 0)
        return TB_DETECT_MAYBE;
    if (p[0] == '*') {
        if (array_start(p, n)) {
            *client_sent = true;
            return TB_DETECT_YES;
        }
        /* A reply array: "*<n>\r\n" and a value. */
        const uint8_t *nl = memchr(p, '\n', TB_MIN(n, (size_t)16));
        if (!nl)
            return n < 16 ? TB_DETECT_MAYBE : TB_DETECT_NO;
        if (nl + 1 < p + n && resp_type(nl[1]) && nl[-1] == '\r') {
            *client_sent = false;
            return TB_DETECT_YES;
        }
        return TB_DETECT_NO;
    }
    const uint8_t *nl = memchr(p, '\n', TB_MIN(n, (size_t)1024));
    if (resp_type(p[0]) && p[0] != '>' && p[0] != '|') {
        /* A reply: one well-formed first line. */
        if (!nl)
            return n < 1024 ? TB_DETECT_MAYBE : TB_DETECT_NO;
        size_t ll = (size_t)(nl - p);
        if (ll < 2 || p[ll - 1] != '\r')
            return TB_DETECT_NO;
        int64_t v;
        bool ok;
        switch (p[0]) {
        case '+': case '-':
            ok = text_line_ok(p + 1, ll - 2);
            break;
        case ':': case '$': case '%': case '~':
            ok = parse_int((const char *)p + 1, ll - 2, &v);
            break;
        default:
            ok = false;
        }
        if (!ok)
            return TB_DETECT_NO;
        *client_sent = false;
        return TB_DETECT_YES;
    }
    /* An inline command. */
    if (!nl)
        return n < 64 && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
                   ? TB_DETECT_MAYBE
                   : TB_DETECT_NO;
    size_t ll = (size_t)(nl - p);
    if (ll > 0 && p[ll - 1] == '\r')
        ll--;
    if (inline_known(p, n)) {
        *client_sent = true;
        return TB_DETECT_YES;
    }
    /* Words memcached has too: told apart by their arguments, else by the
     * server's answer ("get k" is both). */
    static const char *const shared[] = {"GET", "SET", "INCR", "DECR", "APPEND", "TOUCH",
                                         "QUIT"};
    size_t k = 0;
    while (k < ll && p[k] != ' ')
        k++;
    for (size_t i = 0; i < TB_ARRAY_SIZE(shared); i++) {
        if (strlen(shared[i]) != k || strncasecmp(shared[i], (const char *)p, k) != 0)
            continue;
        size_t w = inline_words(p, ll);
        bool yes = false, no = false;
        switch (i) {
        case 0: no = w != 2; break;                             /* get k1 k2 … */
        case 1: no = (w == 5 || w == 6) && mc_numbers(p, ll); yes = !no; break;
        case 2: case 3: yes = w == 2; no = !yes; break;         /* incr k 5 */
        case 4: yes = w == 3; no = !yes; break;                 /* append k 0 0 5 */
        default: break;
        }
        if (yes) {
            *client_sent = true;
            return TB_DETECT_YES;
        }
        return no ? TB_DETECT_NO : TB_DETECT_MAYBE;
    }
    return TB_DETECT_NO;
}

static const uint16_t rs_ports[] = {6379, 0};

const struct tb_proto tb_proto_redis = {
    .name = "redis",
    .ports = rs_ports,
    .state_size = sizeof(struct rs),
    .detect = rs_detect,
    .init = rs_init,
    .consume = rs_consume,
    .gap = rs_gap,
    .close = rs_close,
    .fini = rs_fini,
    .waiting = rs_waiting,
};
