/* SPDX-License-Identifier: MIT */
/* wire_postgres.c — PostgreSQL frontend/backend protocol 3.0 for tbneck-sim
 * (https://www.postgresql.org/docs/current/protocol-message-formats.html).
 *
 * Every message after the start-up one: byte1 type, int32 length (big-endian,
 * counting itself, not the type), payload. On each pooled connection, once:
 *   client  StartupMessage: int32 length, int32 196608 (3.0), user, database
 *           and application_name as name\0value\0 pairs, \0
 *   server  AuthenticationOk 'R' (0), ParameterStatus 'S' (server_version,
 *           client_encoding, DateStyle, integer_datetimes,
 *           standard_conforming_strings, TimeZone), BackendKeyData 'K',
 *           ReadyForQuery 'Z' 'I'
 * then per query, in the tier's mode:
 *   simple    client Query 'Q' (the SQL text)
 *   extended  client Parse 'P' (unnamed; {id}, {n} and {ids} become $1, $2, ...),
 *             Bind 'B' (the values, text format), Describe 'D' (the portal),
 *             Execute 'E', Sync 'S' in one write; server ParseComplete '1',
 *             BindComplete '2', then RowDescription 'T' or NoData 'n'
 *   and the server answers DataRow 'D' per row and CommandComplete 'C'
 *   ("SELECT n", "UPDATE 1", "INSERT 0 1", "DELETE 1") — or, for a fraction
 *   error_rate, ErrorResponse 'E' (SQLSTATE 55P03, lock_not_available) —
 *   and ReadyForQuery 'Z' 'I'. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define PG_MAX_PARAMS 64
#define PG_TEXT_OID 25
#define PG_INT4_OID 23
#define PG_TABLE_OID 16384
#define PG_LOCK_STATE "55P03" /* lock_not_available; also in the ErrorResponse below */

static const char *const pg_modes[] = {"simple", "extended", NULL};
enum { PG_SIMPLE, PG_EXTENDED };

static void msg_begin(struct sim_buf *b, char type, size_t *mark)
{
    if (type)
        sim_buf_u8(b, (uint8_t)type);
    *mark = b->n;
    sim_buf_be(b, 0, 4);
}

/* The length counts itself and the payload, not the type byte. */
static void msg_end(struct sim_buf *b, size_t mark)
{
    if (b->err)
        return;
    size_t len = b->n - mark;
    for (int i = 0; i < 4; i++)
        b->p[mark + (size_t)i] = (uint8_t)(len >> (24 - 8 * i));
}

static void cstr(struct sim_buf *b, const char *s)
{
    sim_buf_put(b, s, strlen(s) + 1);
}

static void ready(struct sim_buf *b)
{
    size_t mk;
    msg_begin(b, 'Z', &mk);
    sim_buf_u8(b, 'I');
    msg_end(b, mk);
}

/* The tbneck status of an SQLSTATE: its five characters as a base-36 number
 * (docs/sim.md, "Truth files"). */
static int sqlstate_status(const char *code)
{
    int v = 0;
    for (const char *p = code; *p; p++)
        v = v * 36 + (*p >= '0' && *p <= '9' ? *p - '0' : *p - 'A' + 10);
    return v;
}

static int64_t pg_login(struct sim_wire_ctx *w, void *state, void *conn,
                        const struct sim_wire_req *r, int64_t t)
{
    TB_UNUSED(state);
    struct sim_buf *b = w->msg;
    size_t mk;
    b->n = 0;
    msg_begin(b, 0, &mk);
    sim_buf_be(b, 196608, 4);
    static const char *const params[] = {"user", "rubbos", "database", "rubbos",
                                         "application_name", "tbneck-sim"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(params); i++)
        cstr(b, params[i]);
    sim_buf_u8(b, 0);
    msg_end(b, mk);
    int64_t last = w->send(w->model, conn, 0, t + 20000);

    b->n = 0;
    msg_begin(b, 'R', &mk);
    sim_buf_be(b, 0, 4); /* AuthenticationOk */
    msg_end(b, mk);
    static const char *const status[] = {
        "server_version", "15.5 (tbneck-sim)", "client_encoding", "UTF8", "DateStyle", "ISO, MDY",
        "integer_datetimes", "on", "standard_conforming_strings", "on", "TimeZone", "UTC"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(status); i += 2) {
        msg_begin(b, 'S', &mk);
        cstr(b, status[i]);
        cstr(b, status[i + 1]);
        msg_end(b, mk);
    }
    msg_begin(b, 'K', &mk);
    sim_buf_be(b, 1000 + r->conn_id, 4);            /* process id */
    sim_buf_be(b, sim_rng_next(w->rng) >> 32, 4); /* secret key */
    msg_end(b, mk);
    ready(b);
    last = w->send(w->model, conn, 1, last + 60000);
    return last + 1;
}

/* The SQL text for the extended mode: {id}, {n} and each id of {ids} become
 * parameters $1, $2, ... whose values go into vals (NUL-separated, count in
 * *np); {word} stays inline. Draws what sim_wire_fill would, in its order. */
static void fill_params(struct sim_wire_ctx *w, const char *tpl, char *out, size_t cap,
                        char *vals, size_t vcap, int *np)
{
    size_t o = 0, vo = 0;
    *np = 0;
    for (const char *p = tpl; *p && o + 16 < cap;) {
        int n = 0;
        uint64_t below = 0;
        size_t skip = 0;
        if (!strncmp(p, "{id}", 4))
            n = 1, below = 100000, skip = 4;
        else if (!strncmp(p, "{n}", 3))
            n = 1, below = 50, skip = 3;
        else if (!strncmp(p, "{ids}", 5))
            n = 2 + (int)sim_rng_below(w->rng, 5), below = 100000, skip = 5;
        else if (!strncmp(p, "{word}", 6)) {
            char word[64];
            sim_wire_fill(w, "{word}", word, sizeof word);
            size_t l = strlen(word);
            if (o + l < cap)
                memcpy(out + o, word, l), o += l;
            p += 6;
            continue;
        }
        if (!n) {
            out[o++] = *p++;
            continue;
        }
        for (int i = 0; i < n && *np < PG_MAX_PARAMS && o + 16 < cap && vo + 24 < vcap; i++) {
            uint64_t v = 1 + sim_rng_below(w->rng, below);
            vo += sim_fmt_u64(vals + vo, v) + 1;
            o += (size_t)snprintf(out + o, cap - o, "%s$%d", i ? ", " : "", ++*np);
        }
        p += skip;
    }
    out[o] = 0;
}

static void pg_request(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r)
{
    TB_UNUSED(state);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    struct sim_buf *b = w->msg;
    char sql[1024];
    size_t mk;
    if (w->c->tiers[r->tier].mode == PG_SIMPLE) {
        sim_wire_fill(w, cl->tmpl[r->tier], sql, sizeof sql);
        msg_begin(b, 'Q', &mk);
        cstr(b, sql);
        msg_end(b, mk);
    } else {
        char vals[PG_MAX_PARAMS * 24];
        int np;
        fill_params(w, cl->tmpl[r->tier], sql, sizeof sql, vals, sizeof vals, &np);
        msg_begin(b, 'P', &mk);
        cstr(b, "");         /* the unnamed statement */
        cstr(b, sql);
        sim_buf_be(b, 0, 2); /* parameter types left to the server */
        msg_end(b, mk);
        msg_begin(b, 'B', &mk);
        cstr(b, "");         /* the unnamed portal */
        cstr(b, "");
        sim_buf_be(b, 0, 2); /* parameters in text format */
        sim_buf_be(b, (uint64_t)np, 2);
        for (const char *v = vals; np-- > 0; v += strlen(v) + 1) {
            sim_buf_be(b, strlen(v), 4);
            sim_buf_str(b, v);
        }
        sim_buf_be(b, 0, 2); /* results in text format */
        msg_end(b, mk);
        msg_begin(b, 'D', &mk);
        sim_buf_u8(b, 'P');
        cstr(b, "");
        msg_end(b, mk);
        msg_begin(b, 'E', &mk);
        cstr(b, "");
        sim_buf_be(b, 0, 4); /* no row limit */
        msg_end(b, mk);
        msg_begin(b, 'S', &mk);
        msg_end(b, mk);
    }
    /* The statement's kind decides the answer. */
    r->scratch = !strncmp(sql, "SELECT", 6) ? 1 : !strncmp(sql, "INSERT", 6) ? 2
                                          : !strncmp(sql, "UPDATE", 6) ? 3
                                                                       : 4;
}

static void pg_response(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r, int64_t now)
{
    TB_UNUSED(now);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    const struct sim_sql_cols *cs = &((const struct sim_sql_cols *)state)[r->cls];
    struct sim_buf *b = w->msg;
    bool extended = w->c->tiers[r->tier].mode == PG_EXTENDED, select = r->scratch == 1;
    size_t mk;
    /* A statement that fails fails when it runs: in the extended mode after
     * the portal's description (Describe precedes Execute), in the simple
     * mode before any row description. */
    bool fail = cl->error_rate > 0 && sim_rng_unit(w->rng) < cl->error_rate;
    if (extended) {
        msg_begin(b, '1', &mk); /* ParseComplete */
        msg_end(b, mk);
        msg_begin(b, '2', &mk); /* BindComplete */
        msg_end(b, mk);
    }
    if (extended && !select) {
        msg_begin(b, 'n', &mk); /* NoData: the portal returns no rows */
        msg_end(b, mk);
    }
    if (select && (extended || !fail)) {
        msg_begin(b, 'T', &mk);
        sim_buf_be(b, (uint64_t)cs->n, 2);
        for (int i = 0; i < cs->n; i++) {
            bool id = sim_wire_sql_is_id(cs->cols[i]);
            cstr(b, cs->cols[i]);
            sim_buf_be(b, PG_TABLE_OID, 4);
            sim_buf_be(b, (uint64_t)i + 1, 2);
            sim_buf_be(b, id ? PG_INT4_OID : PG_TEXT_OID, 4);
            sim_buf_be(b, id ? 4 : 0xffff, 2);     /* typlen, -1: variable */
            sim_buf_be(b, 0xffffffff, 4);          /* typmod -1 */
            sim_buf_be(b, 0, 2);                   /* text format */
        }
        msg_end(b, mk);
    }
    if (fail) {
        msg_begin(b, 'E', &mk);
        static const char *const fields[] = {"SERROR", "VERROR", "C55P03",
                                             "Mcanceling statement due to lock timeout"};
        for (size_t i = 0; i < TB_ARRAY_SIZE(fields); i++)
            cstr(b, fields[i]);
        sim_buf_u8(b, 0);
        msg_end(b, mk);
        ready(b);
        r->status = sqlstate_status(PG_LOCK_STATE);
        return;
    }
    r->status = 0;
    char tag[32];
    if (select) {
        long rows = lround(sim_dist_sample(&cl->rows, w->rng));
        for (long row = 0; row < rows; row++) {
            msg_begin(b, 'D', &mk);
            sim_buf_be(b, (uint64_t)cs->n, 2);
            for (int i = 0; i < cs->n; i++) {
                if (sim_wire_sql_is_id(cs->cols[i])) {
                    char v[24];
                    size_t n = sim_fmt_u64(v, 1 + sim_rng_below(w->rng, 100000));
                    sim_buf_be(b, n, 4);
                    sim_buf_put(b, v, n);
                } else {
                    size_t off = (size_t)sim_rng_below(w->rng, w->filler_len / 2);
                    size_t n = TB_MIN((size_t)cl->row_bytes, w->filler_len - off);
                    sim_buf_be(b, n, 4);
                    sim_buf_put(b, w->filler + off, n);
                }
            }
            msg_end(b, mk);
        }
        snprintf(tag, sizeof tag, "SELECT %ld", TB_MAX(rows, 0L));
    } else
        snprintf(tag, sizeof tag, "%s", r->scratch == 2 ? "INSERT 0 1"
                                        : r->scratch == 3 ? "UPDATE 1"
                                                          : "DELETE 1");
    msg_begin(b, 'C', &mk);
    cstr(b, tag);
    msg_end(b, mk);
    ready(b);
}

static int pg_setup(struct sim_wire_ctx *w, void **state)
{
    return sim_wire_sql_setup(w, &sim_wire_postgres, state);
}

const struct sim_wire sim_wire_postgres = {
    .name = "postgres",
    .port = 5432,
    .flags = SIM_WIRE_LEAF | SIM_WIRE_QUERIES,
    .tmpl_key = "sql",
    .tmpl_default = "SELECT id, title FROM stories WHERE id = {id}",
    .tmpl_check = sim_wire_sql_check,
    .modes = pg_modes,
    .setup = pg_setup,
    .login = pg_login,
    .request = pg_request,
    .response = pg_response,
    .expect = sim_wire_expect_sql,
};
