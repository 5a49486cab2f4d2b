/* SPDX-License-Identifier: MIT */
/* mysql.c — MySQL/MariaDB client/server protocol: commands paired with their
 * responses (https://dev.mysql.com/doc/dev/mysql-server/latest/PAGE_PROTOCOL.html,
 * https://mariadb.com/kb/en/clientserver-protocol/).
 *
 * Every message is a sequence of packets:
 *
 *   int<3> payload length (little-endian)  int<1> sequence id  payload
 *
 * A payload of 0xffffff bytes is continued by the next packet (16 MiB and
 * more). Connection phase: server greeting (protocol 10, capabilities),
 * client handshake response (capabilities; an SSL request if CLIENT_SSL),
 * authentication exchanges until the server's OK (0x00) or ERR (0xff). Then
 * each command is a client packet with sequence 0 whose first byte names it;
 * its response is one of
 *
 *   OK   0x00 lenenc affected, lenenc insert-id, int<2> status, int<2> warnings …
 *   ERR  0xff int<2> code, '#' sqlstate[5], message
 *   EOF  0xfe int<2> warnings, int<2> status            (5 bytes)
 *   result set: lenenc column count [MariaDB: int<1> metadata follows],
 *       column definitions, EOF (unless CLIENT_DEPRECATE_EOF), rows,
 *       terminator (EOF, or an OK packet with a 0xfe header)
 *   LOCAL INFILE 0xfb filename → client sends file packets, an empty packet,
 *       then the server's OK/ERR
 *
 * SERVER_MORE_RESULTS_EXISTS in a terminator's status means another result
 * follows within the same response. COM_STMT_PREPARE answers with
 * 0x00 int<4> statement-id int<2> columns int<2> params … followed by the
 * parameter and column definitions (each group ended by EOF unless
 * CLIENT_DEPRECATE_EOF). COM_QUIT, COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA
 * have no response.
 *
 * Mid-stream (the handshake was not seen) the capabilities are unknown: the
 * EOF style is inferred from what follows the column definitions (a 5-byte
 * 0xfe packet is an EOF; an OK terminator is at least 7 bytes), and the
 * parser synchronises on a chunk that starts with a plausible command packet
 * of sequence 0.
 */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"
#include "rd.h"

#define MY_PKT_MAX 0xffffffu /* payload length that announces a continuation */
#define MY_QMAX 4096u         /* query text kept for the fingerprint */
#define MY_SHEAD 64u          /* server payload bytes needed to classify a packet */
#define MY_STMT_MAX 128u      /* prepared statements remembered per connection */
#define MY_COLS_MAX 65535u

#define CLIENT_COMPRESS 0x00000020u
#define CLIENT_PROTOCOL_41 0x00000200u
#define CLIENT_SSL 0x00000800u
#define CLIENT_QUERY_ATTRIBUTES 0x08000000u
#define CLIENT_DEPRECATE_EOF 0x01000000u
#define SERVER_MORE_RESULTS_EXISTS 0x0008u
#define SERVER_STATUS_CURSOR_EXISTS 0x0040u

enum my_cmd {
    COM_QUIT = 0x01, COM_INIT_DB = 0x02, COM_QUERY = 0x03, COM_FIELD_LIST = 0x04,
    COM_STATISTICS = 0x09, COM_PING = 0x0e, COM_CHANGE_USER = 0x11, COM_STMT_PREPARE = 0x16,
    COM_STMT_EXECUTE = 0x17, COM_STMT_SEND_LONG_DATA = 0x18, COM_STMT_CLOSE = 0x19,
    COM_STMT_RESET = 0x1a, COM_STMT_FETCH = 0x1c, COM_STMT_BULK_EXECUTE = 0xfa,
};

/* How a command is answered. */
enum rk { RK_NONE, RK_RESULT, RK_PREPARE, RK_STRING, RK_AUTH, RK_ROWS, RK_STOP };

struct cmd_info {
    uint8_t code;
    uint8_t rk;
    uint8_t min_len, max_len; /* plausible payload length for mid-stream sync (0 = any) */
    const char *name;
};

/* Indexed by the command byte, so that finding a command is one load: it is
 * looked up for every command and again for its response. */
#define CMD(code, rk, min_len, max_len, name) [code] = {code, rk, min_len, max_len, name}
static const struct cmd_info cmds[256] = {
    CMD(0x01, RK_NONE, 1, 1, "COM_QUIT"),
    CMD(0x02, RK_RESULT, 2, 0, "COM_INIT_DB"),
    CMD(0x03, RK_RESULT, 2, 0, "COM_QUERY"),
    CMD(0x04, RK_ROWS, 2, 0, "COM_FIELD_LIST"),
    CMD(0x05, RK_RESULT, 2, 0, "COM_CREATE_DB"),
    CMD(0x06, RK_RESULT, 2, 0, "COM_DROP_DB"),
    CMD(0x07, RK_RESULT, 2, 2, "COM_REFRESH"),
    CMD(0x08, RK_RESULT, 1, 2, "COM_SHUTDOWN"),
    CMD(0x09, RK_STRING, 1, 1, "COM_STATISTICS"),
    CMD(0x0a, RK_RESULT, 1, 1, "COM_PROCESS_INFO"),
    CMD(0x0c, RK_RESULT, 5, 5, "COM_PROCESS_KILL"),
    CMD(0x0d, RK_RESULT, 1, 1, "COM_DEBUG"),
    CMD(0x0e, RK_RESULT, 1, 1, "COM_PING"),
    CMD(0x11, RK_AUTH, 2, 0, "COM_CHANGE_USER"),
    CMD(0x12, RK_STOP, 11, 0, "COM_BINLOG_DUMP"),
    CMD(0x16, RK_PREPARE, 2, 0, "COM_STMT_PREPARE"),
    CMD(0x17, RK_RESULT, 10, 0, "COM_STMT_EXECUTE"),
    CMD(0x18, RK_NONE, 7, 0, "COM_STMT_SEND_LONG_DATA"),
    CMD(0x19, RK_NONE, 5, 5, "COM_STMT_CLOSE"),
    CMD(0x1a, RK_RESULT, 5, 5, "COM_STMT_RESET"),
    CMD(0x1b, RK_RESULT, 3, 3, "COM_SET_OPTION"),
    CMD(0x1c, RK_ROWS, 9, 9, "COM_STMT_FETCH"),
    CMD(0x1e, RK_STOP, 19, 0, "COM_BINLOG_DUMP_GTID"),
    CMD(0x1f, RK_RESULT, 1, 1, "COM_RESET_CONNECTION"),
    CMD(0xfa, RK_RESULT, 10, 0, "COM_STMT_BULK_EXECUTE"),
};
#undef CMD

static const struct cmd_info *cmd_find(uint8_t code)
{
    return cmds[code].name ? &cmds[code] : NULL;
}


enum phase { P_GREETING, P_HSRESP, P_AUTH, P_CMD };
enum eof_mode { EOF_UNKNOWN, EOF_CLASSIC, EOF_DEPRECATE };
enum rph {
    R_FIRST,     /* first packet of a (next) result */
    R_COLDEFS,   /* column definitions, ncols to go */
    R_AFTERCOLS, /* EOF (classic) or the first row / terminator (deprecate) */
    R_ROWS,      /* rows until a terminator */
    R_PREP_DEFS, /* prepare: parameter or column definitions */
    R_PREP_EOF,  /* prepare: EOF closing a definition group */
    R_INFILE,    /* client is sending a LOCAL INFILE file */
    R_STRING,    /* one packet, no header byte (COM_STATISTICS) */
    R_AUTH,      /* COM_CHANGE_USER: until OK or ERR */
};

struct my_dir {
    uint8_t hdr[4];
    uint8_t hdr_have;
    bool in_pkt;
    bool more;       /* this packet's payload is 0xffffff: a continuation follows */
    bool cont;       /* reading continuation packets of a logical message */
    bool synced;
    bool msg_gap;    /* a capture hole inside this message */
    bool head_cut;   /* a hole cut the collected head: bytes after it are not next */
    uint8_t first_seq;
    uint32_t first_len;
    uint32_t left;   /* payload bytes left in the current packet */
    uint32_t head_len;
    int64_t ts0;
    uint64_t msg_bytes;
};

struct my_stmt {
    uint32_t id;
    uint16_t len;
    char fp[TB__CLASS_MAX];
};

/* Response being read for the queue head. */
struct my_resp {
    bool started;
    bool tentative;  /* prepare response possibly complete (EOF style unknown) */
    uint8_t phase;
    uint8_t group;   /* prepare: 0 = parameters, 1 = columns */
    uint32_t left;   /* definitions to go */
    uint16_t nparams, ncols;
};

struct my {
    struct my_dir d[2];
    struct tb__pq pq;
    struct my_resp r;
    uint8_t phase;
    uint8_t eof_mode;
    bool stopped;
    bool s2c_armed;  /* after a sync command: the next server chunk starts a response */
    bool s2c_lost;   /* the head's response lost its framing in a hole: the next
                      * command will say it had ended */
    bool have_scaps;
    bool qattr;      /* CLIENT_QUERY_ATTRIBUTES: COM_QUERY carries a parameter block */
    uint32_t scaps, ccaps;
    uint32_t last_stmt;
    uint8_t *cbuf;   /* client payload head when it straddles chunks (MY_QMAX) */
    uint8_t shead[MY_SHEAD];
    struct my_stmt *stmts;
    uint16_t nstmts, cap_stmts, evict;
};

/* ---- prepared statement map ------------------------------------------- */

static struct my_stmt *stmt_find(struct my *m, uint32_t id)
{
    for (uint16_t i = 0; i < m->nstmts; i++)
        if (m->stmts[i].id == id)
            return &m->stmts[i];
    return NULL;
}

static void stmt_put(struct my *m, uint32_t id, const char *fp, size_t len)
{
    struct my_stmt *s = stmt_find(m, id);
    if (!s) {
        if (m->nstmts == m->cap_stmts && m->cap_stmts < MY_STMT_MAX) {
            uint16_t nc = m->cap_stmts ? (uint16_t)TB_MIN(m->cap_stmts * 2u, MY_STMT_MAX) : 4;
            struct my_stmt *nv = realloc(m->stmts, nc * sizeof *nv);
            if (nv) {
                m->stmts = nv;
                m->cap_stmts = nc;
            }
        }
        if (m->nstmts < m->cap_stmts) {
            s = &m->stmts[m->nstmts++];
        } else if (m->cap_stmts) {
            /* Full: reuse slots in turn; a forgotten statement's executions
             * are then classed "COM_STMT_EXECUTE". */
            s = &m->stmts[m->evict++ % m->cap_stmts];
        } else {
            return;
        }
    }
    s->id = id;
    s->len = (uint16_t)TB_MIN(len, sizeof s->fp);
    if (s->len)
        memcpy(s->fp, fp, s->len);
}

static void stmt_del(struct my *m, uint32_t id)
{
    struct my_stmt *s = stmt_find(m, id);
    if (s)
        *s = m->stmts[--m->nstmts];
}

/* ---- synchronisation -------------------------------------------------- */

static void dir_reset(struct my_dir *d)
{
    d->hdr_have = 0;
    d->in_pkt = d->more = d->cont = false;
    d->msg_gap = d->head_cut = false;
    d->left = 0;
    d->head_len = 0;
    d->msg_bytes = 0;
}

static void lose_sync(struct my *m, const struct tb_proto_ctx *ctx, bool error)
{
    tb__pq_clear(&m->pq);
    memset(&m->r, 0, sizeof m->r);
    for (int i = 0; i < 2; i++) {
        dir_reset(&m->d[i]);
        m->d[i].synced = false;
    }
    m->s2c_armed = false;
    m->s2c_lost = false;
    m->phase = P_CMD;
    ctx->ctr->resyncs++;
    if (error)
        ctx->ctr->parse_errors++;
}

static bool text_plausible(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && i < 16; i++)
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
    return true;
}

/* Does this chunk start with a command packet (sequence 0)? */
static bool cmd_plausible(const uint8_t *p, size_t n)
{
    if (n < 5 || p[3] != 0)
        return false;
    uint32_t len = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
    const struct cmd_info *c = cmd_find(p[4]);
    if (!c || len < c->min_len || (c->max_len && len > c->max_len))
        return false;
    if (len + 4u > n && len < 1024)
        return false; /* small commands travel in one segment */
    if (c->code == COM_QUERY || c->code == COM_STMT_PREPARE || c->code == COM_INIT_DB)
        return text_plausible(p + 5, TB_MIN((size_t)len - 1, n - 5));
    return true;
}

static bool keep_lost(struct my *m, const struct tb_proto_ctx *ctx, uint64_t len, int64_t ts);

/* ---- responses -------------------------------------------------------- */

static uint16_t ok_status(const uint8_t *h, size_t hl)
{
    if (hl < 1)
        return 0;
    struct tb_rd r = tb_rd_make(h + 1, hl - 1);
    uint64_t v;
    uint16_t s;
    if (!tb_rd_lenenc(&r, &v, NULL) || !tb_rd_lenenc(&r, &v, NULL) || !tb_rd_le16(&r, &s))
        return 0;
    return s;
}

static uint16_t term_status(const uint8_t *h, size_t hl, uint32_t len)
{
    if (len == 5)
        return hl >= 5 ? (uint16_t)(h[3] | (h[4] << 8)) : 0;
    return ok_status(h, hl);
}

static int32_t err_code(const uint8_t *h, size_t hl)
{
    return hl >= 3 ? (int32_t)(h[1] | (h[2] << 8)) : -1;
}

static void r_done(struct my *m, const struct tb_proto_ctx *ctx, int32_t status)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (e && e->kind == COM_STMT_PREPARE) {
        char buf[TB__CLASS_MAX];
        size_t n = 8;
        memcpy(buf, "PREPARE ", 8);
        const char *t = tb__pq_text(&m->pq, e);
        size_t k = t ? TB_MIN((size_t)e->class_len, sizeof buf - n) : 0;
        if (k)
            memcpy(buf + n, t, k);
        tb__pq_emit_head(&m->pq, ctx, status, 0, buf, n + k);
    } else {
        tb__pq_emit_head(&m->pq, ctx, status, 0, NULL, 0);
    }
    memset(&m->r, 0, sizeof m->r);
}

/* Prepare response: move to the next non-empty definition group, or finish. */
static void prep_next(struct my *m, const struct tb_proto_ctx *ctx)
{
    while (m->r.group < 2) {
        uint16_t n = m->r.group == 0 ? m->r.nparams : m->r.ncols;
        if (n) {
            m->r.left = n;
            m->r.phase = R_PREP_DEFS;
            return;
        }
        m->r.group++;
    }
    r_done(m, ctx, 0);
}

/* A server packet for the queue head. Returns false when the bytes cannot be
 * a response to it (lost synchronisation). */
static bool resp_packet(struct my *m, const struct tb_proto_ctx *ctx, const uint8_t *h,
                        size_t hl, uint32_t len)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    struct my_resp *r = &m->r;
    bool big = len == MY_PKT_MAX;
    uint8_t b = hl ? h[0] : 0;
    if (hl == 0 && len > 0 && r->phase != R_STRING)
        return false; /* its first byte fell in a hole */
    if (!r->started) {
        r->started = true;
        const struct cmd_info *c = cmd_find(e->kind);
        uint8_t rk = c ? c->rk : RK_RESULT;
        r->phase = rk == RK_ROWS ? R_ROWS : rk == RK_STRING ? R_STRING
                 : rk == RK_AUTH ? R_AUTH : R_FIRST;
    }
    switch (r->phase) {
    case R_STRING:
        r_done(m, ctx, b == 0xff ? err_code(h, hl) : 0);
        return true;
    case R_AUTH:
        if (b == 0x00 && len > 0)
            r_done(m, ctx, 0);
        else if (b == 0xff)
            r_done(m, ctx, err_code(h, hl));
        return true; /* auth switch / more data: the exchange goes on */
    case R_INFILE: /* the server did not wait for the file */
    case R_FIRST:
        if (len == 0)
            return false;
        if (b == 0xff) {
            r_done(m, ctx, err_code(h, hl));
        } else if (b == 0x00 && e->kind == COM_STMT_PREPARE) {
            if (hl < 9)
                return false;
            uint32_t id = (uint32_t)h[1] | ((uint32_t)h[2] << 8) | ((uint32_t)h[3] << 16) |
                          ((uint32_t)h[4] << 24);
            r->ncols = (uint16_t)(h[5] | (h[6] << 8));
            r->nparams = (uint16_t)(h[7] | (h[8] << 8));
            const char *t = tb__pq_text(&m->pq, e);
            stmt_put(m, id, t, t ? e->class_len : 0);
            m->last_stmt = id;
            r->group = 0;
            prep_next(m, ctx);
        } else if (b == 0x00 || (b == 0xfe && !big)) {
            uint16_t s = b == 0x00 ? ok_status(h, hl) : term_status(h, hl, len);
            if (!(s & SERVER_MORE_RESULTS_EXISTS))
                r_done(m, ctx, 0);
        } else if (b == 0xfb && e->kind == COM_QUERY) {
            r->phase = R_INFILE;
        } else {
            struct tb_rd rd = tb_rd_make(h, hl);
            uint64_t n;
            if (!tb_rd_lenenc(&rd, &n, NULL) || n == 0 || n > MY_COLS_MAX)
                return false;
            size_t used = hl - tb_rd_left(&rd);
            /* MariaDB's metadata cache: one more byte says whether column
             * definitions follow at all. */
            if (len == used + 1 && hl == len && h[used] == 0)
                n = 0;
            r->left = (uint32_t)n;
            r->phase = n ? R_COLDEFS : R_AFTERCOLS;
        }
        return true;
    case R_COLDEFS:
        if (b == 0xff) {
            r_done(m, ctx, err_code(h, hl));
            return true;
        }
        if (--r->left == 0)
            r->phase = R_AFTERCOLS;
        return true;
    case R_AFTERCOLS:
        if (b == 0xfe && len == 5) {
            if (m->eof_mode == EOF_UNKNOWN)
                m->eof_mode = EOF_CLASSIC;
            if (term_status(h, hl, len) & SERVER_STATUS_CURSOR_EXISTS)
                r_done(m, ctx, 0); /* rows will come through COM_STMT_FETCH */
            else
                r->phase = R_ROWS;
            return true;
        }
        if (m->eof_mode == EOF_UNKNOWN)
            m->eof_mode = EOF_DEPRECATE;
        r->phase = R_ROWS;
        /* fall through: this packet is a row or the terminator */
        TB_FALLTHROUGH;
    case R_ROWS:
        if (b == 0xfe && !big && len > 0) {
            if (term_status(h, hl, len) & SERVER_MORE_RESULTS_EXISTS)
                r->phase = R_FIRST;
            else
                r_done(m, ctx, 0);
        } else if (b == 0xff && len > 0) {
            r_done(m, ctx, err_code(h, hl));
        }
        return true;
    case R_PREP_DEFS:
        if (--r->left > 0)
            return true;
        if (m->eof_mode == EOF_DEPRECATE) {
            r->group++;
            prep_next(m, ctx);
        } else {
            r->phase = R_PREP_EOF;
            /* With the style unknown and no group left the response may be
             * over now: the next packet (or command) decides. */
            r->tentative = m->eof_mode == EOF_UNKNOWN && (r->group == 1 || r->ncols == 0);
        }
        return true;
    case R_PREP_EOF:
        if (b == 0xfe && len == 5) {
            if (m->eof_mode == EOF_UNKNOWN)
                m->eof_mode = EOF_CLASSIC;
            r->group++;
            prep_next(m, ctx);
            return true;
        }
        if (m->eof_mode == EOF_CLASSIC)
            return false;
        /* No EOF: deprecate style, and this packet opens the next group. */
        m->eof_mode = EOF_DEPRECATE;
        r->group++;
        prep_next(m, ctx);
        if (tb__pq_head(&m->pq) == e && r->phase == R_PREP_DEFS)
            return resp_packet(m, ctx, h, hl, len);
        return false; /* cannot happen: no group left was handled as tentative */
    }
    return false;
}

static enum tb_pstate server_msg(struct my *m, const struct tb_proto_ctx *ctx, const uint8_t *h,
                                 size_t hl, int64_t ts)
{
    struct my_dir *d = &m->d[TB_DIR_S2C];
    uint32_t len = d->first_len;
    if (ts == TB__NO_TS)
        ts = d->ts0; /* completed by a hole of no known time: last seen at its start */
    switch (m->phase) {
    case P_GREETING:
        if (hl >= 1 && h[0] == 0x0a) {
            /* protocol 10: version NUL, thread id(4), scramble(8), filler(1),
             * caps low(2), charset(1), status(2), caps high(2) … */
            const uint8_t *nul = memchr(h + 1, 0, hl - 1);
            if (nul) {
                struct tb_rd r = tb_rd_make(nul + 1, (size_t)(h + hl - nul - 1));
                uint16_t lo, hi = 0, st;
                uint8_t cs;
                if (tb_rd_skip(&r, 13) && tb_rd_le16(&r, &lo)) {
                    if (tb_rd_u8(&r, &cs) && tb_rd_le16(&r, &st) && tb_rd_le16(&r, &hi)) {
                    }
                    m->scaps = (uint32_t)lo | ((uint32_t)hi << 16);
                    m->have_scaps = true;
                }
            }
            m->phase = P_HSRESP;
        }
        return TB_PS_OK;
    case P_HSRESP:
        return TB_PS_OK;
    case P_AUTH:
        if (hl >= 1 && h[0] == 0x00 && len > 0) {
            uint32_t eff = m->ccaps & (m->have_scaps ? m->scaps : 0xffffffffu);
            if (eff & CLIENT_COMPRESS) {
                /* Everything after the authentication OK is zlib/zstd framed. */
                ctx->ctr->compressed_flows++;
                m->stopped = true;
                return TB_PS_STOP;
            }
            m->phase = P_CMD;
        } else if (hl >= 1 && h[0] == 0xff) {
            m->phase = P_CMD;
        }
        return TB_PS_OK;
    default:
        break;
    }
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (!e)
        return TB_PS_OK; /* unsolicited (e.g. an ERR before a kill) */
    if (m->r.tentative) {
        m->r.tentative = false;
        if (hl >= 1 && h[0] == 0xfe && len == 5) {
            e->resp_bytes += d->msg_bytes;
            e->last_ns = TB_MAX(e->last_ns, ts);
            m->eof_mode = EOF_CLASSIC;
            r_done(m, ctx, 0);
            return TB_PS_OK;
        }
        m->eof_mode = EOF_DEPRECATE;
        r_done(m, ctx, 0);
        e = tb__pq_head(&m->pq);
        if (!e)
            return TB_PS_OK;
    }
    e->resp_bytes += d->msg_bytes;
    e->resp_seen = true;
    e->last_ns = TB_MAX(e->last_ns, ts);
    if (d->msg_gap)
        e->flags |= TB_REQ_GAP;
    if (!resp_packet(m, ctx, h, hl, len)) {
        /* The bytes that would have told what this packet is fell in a
         * hole: not malformed, only unframed from here on. */
        d->msg_bytes = 0; /* attributed above */
        if (d->msg_gap && keep_lost(m, ctx, 0, ts))
            return TB_PS_OK;
        lose_sync(m, ctx, true);
        return TB_PS_ERROR;
    }
    return TB_PS_OK;
}

/* ---- responses cut by a capture hole ----------------------------------- */

/* A hole took the framing of the head's response (snaplen cuts across the
 * packets of a result set, a lost segment). The classic protocol answers
 * one command at a time, so when only that command is outstanding its
 * response ends before the client's next command: keep the exchange (GAP)
 * and let that command close it, rather than lose it. */
static bool keep_lost(struct my *m, const struct tb_proto_ctx *ctx, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    struct my_dir *d = &m->d[TB_DIR_S2C];
    /* Also when nothing of the response was seen yet: the server speaks only
     * to answer, so a hole while one command is outstanding is (the start
     * of) its answer. Leaving the command at the head would pair it with the
     * next answer and shift every later pair on the connection. Whatever of
     * it is captured after the hole gives its departure; if nothing is, it is
     * not reported (tb__pq_emit_head). */
    if (!e || m->pq.len != 1 || m->r.tentative || !m->d[TB_DIR_C2S].synced)
        return false;
    e->flags |= TB_REQ_GAP;
    /* msg_bytes still holds the last finished message's size at a packet
     * boundary (it is reset when the next one starts): count it only for a
     * message in progress. */
    bool mid = d->in_pkt || d->cont || d->hdr_have;
    tb__pend_answer(e, (mid ? d->msg_bytes : 0) + d->hdr_have + len, ts);
    dir_reset(d);
    d->synced = false;
    m->s2c_armed = false;
    m->s2c_lost = true;
    ctx->ctr->resyncs++;
    return true;
}

static void lost_more(struct my *m, uint64_t len, int64_t ts)
{
    struct tb__pend *e = tb__pq_head(&m->pq);
    if (e)
        tb__pend_answer(e, len, ts);
}

/* The lost response is over: emit it, and expect the next one at the start
 * of the server's next chunk. */
static void lost_done(struct my *m, const struct tb_proto_ctx *ctx)
{
    /* A result set had begun: it succeeded unless an ERR ended it unseen. */
    bool rs = m->r.started && (m->r.phase == R_COLDEFS || m->r.phase == R_AFTERCOLS ||
                               m->r.phase == R_ROWS || m->r.phase == R_PREP_DEFS ||
                               m->r.phase == R_PREP_EOF);
    r_done(m, ctx, rs ? 0 : -1);
    m->s2c_lost = false;
    dir_reset(&m->d[TB_DIR_S2C]);
    m->d[TB_DIR_S2C].synced = false;
    m->s2c_armed = true;
}

/* ---- commands --------------------------------------------------------- */

static void set_class_name(struct my *m, struct tb__pend *e, const char *name)
{
    tb__pq_set_class(&m->pq, e, name, strlen(name));
}

static enum tb_pstate client_msg(struct my *m, const struct tb_proto_ctx *ctx, const uint8_t *h,
                                 size_t hl)
{
    struct my_dir *d = &m->d[TB_DIR_C2S];
    uint32_t len = d->first_len;
    switch (m->phase) {
    case P_GREETING:
        return TB_PS_OK;
    case P_HSRESP: {
        struct tb_rd r = tb_rd_make(h, hl);
        uint32_t caps = 0;
        uint16_t c16;
        if (hl >= 4 && (h[1] & (CLIENT_PROTOCOL_41 >> 8)))
            tb_rd_le32(&r, &caps);
        else if (tb_rd_le16(&r, &c16))
            caps = c16;
        if (caps & CLIENT_SSL) {
            /* SSL request: TLS follows, nothing more can be read. */
            ctx->ctr->encrypted_flows++;
            m->stopped = true;
            return TB_PS_STOP;
        }
        m->ccaps = caps;
        uint32_t eff = caps & (m->have_scaps ? m->scaps : 0xffffffffu);
        m->eof_mode = (eff & CLIENT_DEPRECATE_EOF) ? EOF_DEPRECATE : EOF_CLASSIC;
        m->qattr = (eff & CLIENT_QUERY_ATTRIBUTES) != 0;
        m->phase = P_AUTH;
        return TB_PS_OK;
    }
    case P_AUTH: {
        /* Authentication packets continue a sequence; a command restarts it
         * at 0. One means the authentication is over even if its OK was not
         * recognised (an unknown plugin's exchange). */
        if (d->first_seq != 0 || hl == 0 || !cmd_find(h[0]))
            return TB_PS_OK;
        uint32_t eff = m->ccaps & (m->have_scaps ? m->scaps : 0xffffffffu);
        if (eff & CLIENT_COMPRESS) {
            ctx->ctr->compressed_flows++;
            m->stopped = true;
            return TB_PS_STOP;
        }
        m->phase = P_CMD;
        break;
    }
    default:
        break;
    }

    struct tb__pend *e = tb__pq_head(&m->pq);
    if (d->first_seq != 0) {
        /* File contents for LOCAL INFILE, or COM_CHANGE_USER auth data. */
        if (e && m->pq.len == 1 && m->r.started &&
            (m->r.phase == R_INFILE || m->r.phase == R_AUTH)) {
            e->req_bytes += d->msg_bytes;
            if (d->msg_gap)
                e->flags |= TB_REQ_GAP;
            if (m->r.phase == R_INFILE && len == 0)
                m->r.phase = R_FIRST;
            return TB_PS_OK;
        }
        lose_sync(m, ctx, true);
        return TB_PS_ERROR;
    }
    if (hl == 0) {
        lose_sync(m, ctx, true);
        return TB_PS_ERROR;
    }
    const struct cmd_info *c = cmd_find(h[0]);
    if (!c) {
        lose_sync(m, ctx, true);
        return TB_PS_ERROR;
    }
    if (m->s2c_lost)
        lost_done(m, ctx);
    if (e && m->r.tentative) {
        /* A new command while the prepare answer looked complete: there was
         * no EOF to wait for. */
        m->eof_mode = EOF_DEPRECATE;
        r_done(m, ctx, 0);
    }
    switch (c->rk) {
    case RK_NONE:
        if (c->code == COM_STMT_CLOSE && hl >= 5)
            stmt_del(m, (uint32_t)h[1] | ((uint32_t)h[2] << 8) | ((uint32_t)h[3] << 16) |
                            ((uint32_t)h[4] << 24));
        return TB_PS_OK;
    case RK_STOP:
        m->stopped = true; /* replication stream: not request/response */
        return TB_PS_STOP;
    default:
        break;
    }
    e = tb__pq_push(&m->pq, ctx->ctr, d->ts0);
    if (!e) {
        /* Untracked commands would leave responses we cannot attribute. */
        lose_sync(m, ctx, false);
        return TB_PS_OK;
    }
    e->kind = c->code;
    e->req_bytes = d->msg_bytes;
    if (d->msg_gap)
        e->flags |= TB_REQ_GAP;
    if (c->code == COM_QUERY || c->code == COM_STMT_PREPARE) {
        struct tb_rd r = tb_rd_make(h + 1, hl - 1);
        if (c->code == COM_QUERY && m->qattr) {
            /* MySQL 8 query attributes: parameter count, set count, then (for
             * a non-zero count) types, names and values we do not read. */
            uint64_t np, ns;
            if (tb_rd_lenenc(&r, &np, NULL) && tb_rd_lenenc(&r, &ns, NULL) && np != 0)
                r.p = r.end;
        }
        /* Straight into the entry's text: the result is at most
         * TB__CLASS_MAX - 1 bytes, which is what tb__pq_set_class would have
         * kept of a copy. */
        char *cls = tb__pq_cls(&m->pq, e);
        size_t n = cls ? tb_fp_sql((const char *)r.p, tb_rd_left(&r), cls, TB__CLASS_MAX) : 0;
        if (n > 0)
            e->class_len = (uint16_t)n;
        else
            set_class_name(m, e, c->name); /* text unread (attributes) or empty */
    } else if ((c->code == COM_STMT_EXECUTE || c->code == COM_STMT_BULK_EXECUTE) && hl >= 5) {
        uint32_t id = (uint32_t)h[1] | ((uint32_t)h[2] << 8) | ((uint32_t)h[3] << 16) |
                      ((uint32_t)h[4] << 24);
        struct tb__pend *prep = NULL;
        if (id == 0xffffffffu) {
            /* "the statement just prepared" (MariaDB pipelined execute-direct):
             * the latest queued prepare, else the latest answered one. */
            for (uint32_t i = m->pq.len; i-- > 0;) {
                struct tb__pend *q = tb__pq_at(&m->pq, i);
                if (q != e && q->kind == COM_STMT_PREPARE) {
                    prep = q;
                    break;
                }
            }
            id = m->last_stmt;
        }
        struct my_stmt *s = prep ? NULL : stmt_find(m, id);
        if (prep)
            tb__pq_set_class(&m->pq, e, tb__pq_text(&m->pq, prep), prep->class_len);
        else if (s)
            tb__pq_set_class(&m->pq, e, s->fp, s->len);
        else
            set_class_name(m, e, c->name);
    } else {
        set_class_name(m, e, c->name);
    }
    return TB_PS_OK;
}

/* ---- stream reader ---------------------------------------------------- */

static enum tb_pstate msg_end(struct my *m, const struct tb_proto_ctx *ctx, int dir,
                              const uint8_t *h, size_t hl, int64_t ts)
{
    return dir == TB_DIR_C2S ? client_msg(m, ctx, h, hl) : server_msg(m, ctx, h, hl, ts);
}

static void collect(struct my *m, int dir, const uint8_t *p, size_t k)
{
    struct my_dir *d = &m->d[dir];
    size_t cap = dir == TB_DIR_C2S ? MY_QMAX : MY_SHEAD;
    if (d->head_len >= cap || k == 0 || d->head_cut)
        return;
    uint8_t *buf = m->shead;
    if (dir == TB_DIR_C2S) {
        if (!m->cbuf && !(m->cbuf = malloc(MY_QMAX)))
            return;
        buf = m->cbuf;
    }
    size_t n = TB_MIN(k, cap - d->head_len);
    memcpy(buf + d->head_len, p, n);
    d->head_len += (uint32_t)n;
}

/* The collected head of the message that just ended. */
static const uint8_t *head_of(struct my *m, int dir, size_t *hl)
{
    if (dir == TB_DIR_S2C) {
        *hl = m->d[dir].head_len;
        return m->shead;
    }
    *hl = m->cbuf ? m->d[dir].head_len : 0;
    return m->cbuf;
}

static bool try_sync(struct my *m, int dir, const uint8_t *p, size_t n)
{
    if (dir == TB_DIR_C2S) {
        if (!cmd_plausible(p, n))
            return false;
        m->d[TB_DIR_C2S].synced = true;
        /* The server answers commands in order and not before they are sent:
         * its next chunk starts the response to this one. */
        dir_reset(&m->d[TB_DIR_S2C]);
        m->d[TB_DIR_S2C].synced = false;
        m->s2c_armed = true;
        return true;
    }
    if (n >= 5 && p[3] == 0 && p[4] == 0x0a && m->pq.len == 0 && !m->d[TB_DIR_C2S].synced) {
        /* A greeting after all: the connection is being set up. */
        m->phase = P_GREETING;
        m->d[TB_DIR_S2C].synced = m->d[TB_DIR_C2S].synced = true;
        return true;
    }
    if (m->s2c_armed && n >= 4 && p[3] == 1) {
        m->d[TB_DIR_S2C].synced = true;
        m->s2c_armed = false;
        return true;
    }
    return false;
}

static enum tb_pstate my_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                 const uint8_t *p, size_t n, int64_t ts)
{
    struct my *m = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct my_dir *d = &m->d[di];
    const uint8_t *end = p + n;
    enum tb_pstate ret = TB_PS_OK;
    if (m->stopped)
        return TB_PS_STOP;
    if (di == TB_DIR_S2C && m->s2c_lost) {
        lost_more(m, n, ts);
        return TB_PS_OK;
    }
    if (!d->synced && !try_sync(m, di, p, n))
        return TB_PS_OK;
    while (p < end && d->synced && !m->stopped) {
        if (!d->in_pkt) {
            if (d->hdr_have == 0 && !d->cont) {
                d->ts0 = ts;
                d->msg_bytes = 0;
                d->head_len = 0;
                d->msg_gap = d->head_cut = false;
            }
            if (d->hdr_have == 0 && end - p >= 4) {
                /* The whole header here: one fixed-size copy. */
                memcpy(d->hdr, p, 4);
                p += 4;
            } else {
                size_t k = TB_MIN((size_t)(4 - d->hdr_have), (size_t)(end - p));
                memcpy(d->hdr + d->hdr_have, p, k);
                p += k;
                d->hdr_have = (uint8_t)(d->hdr_have + k);
                if (d->hdr_have < 4)
                    break;
                d->hdr_have = 0;
            }
            uint32_t len = (uint32_t)d->hdr[0] | ((uint32_t)d->hdr[1] << 8) |
                           ((uint32_t)d->hdr[2] << 16);
            if (!d->cont) {
                d->first_len = len;
                d->first_seq = d->hdr[3];
            }
            d->left = len;
            d->in_pkt = true;
            d->more = len == MY_PKT_MAX;
            d->msg_bytes += 4;
            if (!d->cont && !d->more && (size_t)(end - p) >= len) {
                /* Whole packet in this chunk: read it in place. */
                const uint8_t *pl = p;
                p += len;
                d->msg_bytes += len;
                d->in_pkt = false;
                d->left = 0;
                enum tb_pstate r = msg_end(m, ctx, di, pl, len, ts);
                if (r != TB_PS_OK)
                    ret = r;
                continue;
            }
        }
        size_t k = TB_MIN((size_t)d->left, (size_t)(end - p));
        collect(m, di, p, k);
        p += k;
        d->left -= (uint32_t)k;
        d->msg_bytes += k;
        if (d->left > 0)
            break;
        d->in_pkt = false;
        if (d->more) {
            d->cont = true;
            continue;
        }
        d->cont = false;
        size_t hl;
        const uint8_t *h = head_of(m, di, &hl);
        enum tb_pstate r = msg_end(m, ctx, di, h, hl, ts);
        if (r != TB_PS_OK)
            ret = r;
    }
    return m->stopped ? TB_PS_STOP : ret;
}

static enum tb_pstate my_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                             uint64_t len, int64_t ts)
{
    struct my *m = st;
    int di = dir == TB_DIR_C2S ? TB_DIR_C2S : TB_DIR_S2C;
    struct my_dir *d = &m->d[di];
    if (m->stopped)
        return TB_PS_STOP;
    if (di == TB_DIR_S2C && m->s2c_lost) {
        lost_more(m, len, ts);
        return TB_PS_OK;
    }
    if (!d->synced) {
        /* Waiting for the start of the answer to the command just sent (armed):
         * the hole is that start. */
        if (di == TB_DIR_S2C && m->s2c_armed) {
            dir_reset(d); /* nothing of this answer was framed yet */
            keep_lost(m, ctx, len, ts);
        }
        return TB_PS_OK;
    }
    if (d->in_pkt && len > 0 && len <= d->left) {
        /* Inside one packet (a snaplen cut, a lost segment of a long row):
         * its length still says where the next one starts. */
        d->left -= (uint32_t)len;
        d->msg_bytes += len;
        d->msg_gap = true;
        d->head_cut = true;
        if (d->left > 0)
            return TB_PS_OK;
        d->in_pkt = false;
        if (d->more) {
            d->cont = true;
            return TB_PS_OK;
        }
        d->cont = false;
        size_t hl;
        const uint8_t *h = head_of(m, di, &hl);
        return msg_end(m, ctx, di, h, hl, ts);
    }
    if (di == TB_DIR_S2C && keep_lost(m, ctx, len, ts))
        return TB_PS_OK;
    lose_sync(m, ctx, false);
    return TB_PS_OK;
}

static void my_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct my *m = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!m->stopped) {
        struct tb__pend *e = tb__pq_head(&m->pq);
        if (e && m->s2c_lost)
            lost_done(m, ctx);
        else if (e && m->r.tentative)
            r_done(m, ctx, 0);
        else if (e && e->resp_seen)
            tb__pq_emit_head(&m->pq, ctx, -1, TB_REQ_NORESP, NULL, 0);
    }
    m->stopped = true;
}

static void my_init(void *st, bool midstream)
{
    struct my *m = st;
    memset(m, 0, sizeof *m);
    if (midstream) {
        m->phase = P_CMD;
        m->eof_mode = EOF_UNKNOWN;
    } else {
        m->phase = P_GREETING;
        m->d[0].synced = m->d[1].synced = true;
    }
}

static uint32_t my_waiting(const void *st)
{
    return tb__pq_waiting(&((const struct my *)st)->pq);
}

static void my_fini(void *st)
{
    struct my *m = st;
    tb__pq_free(&m->pq);
    free(m->cbuf);
    free(m->stmts);
    m->cbuf = NULL;
    m->stmts = NULL;
}

static enum tb_detect my_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(dir);
    if (n < 5)
        return n >= 4 && p[3] > 2 ? TB_DETECT_NO : TB_DETECT_MAYBE;
    uint32_t len = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
    uint8_t seq = p[3];
    if (seq == 0 && p[4] == 0x0a && len >= 20 && len < 1024) {
        /* Greeting: protocol 10 and a printable version string. */
        size_t lim = TB_MIN(n, (size_t)len + 4);
        for (size_t i = 5; i < lim; i++) {
            if (p[i] == 0) {
                *client_sent = false;
                return i > 5 ? TB_DETECT_YES : TB_DETECT_NO;
            }
            if (p[i] < 0x20 || p[i] > 0x7e)
                return TB_DETECT_NO;
        }
        return lim < (size_t)len + 4 ? TB_DETECT_MAYBE : TB_DETECT_NO;
    }
    if (seq == 0 && cmd_plausible(p, n)) {
        *client_sent = true;
        return TB_DETECT_YES;
    }
    if (seq == 1 && len >= 32 && n >= 36 && (p[5] & (CLIENT_PROTOCOL_41 >> 8))) {
        /* Handshake response / SSL request: 23 zero filler bytes after
         * caps(4), max packet(4), charset(1). */
        for (size_t i = 13; i < 36; i++)
            if (p[i] != 0)
                return TB_DETECT_NO;
        *client_sent = true;
        return TB_DETECT_YES;
    }
    if (seq >= 1 && p[4] == 0xff && len >= 9 && n >= 8 && p[7] == '#' && len + 4 == n) {
        *client_sent = false;
        return TB_DETECT_YES;
    }
    return TB_DETECT_NO;
}

static const uint16_t my_ports[] = {3306, 3307, 33060, 0};

const struct tb_proto tb_proto_mysql = {
    .name = "mysql",
    .ports = my_ports,
    .state_size = sizeof(struct my),
    .detect = my_detect,
    .init = my_init,
    .consume = my_consume,
    .gap = my_gap,
    .close = my_close,
    .fini = my_fini,
    .waiting = my_waiting,
};
