/* SPDX-License-Identifier: MIT */
/* wire_mysql.c — the MySQL client/server protocol 4.1 for tbneck-sim
 * (dev.mysql.com/doc/dev/mysql-server/latest/PAGE_PROTOCOL.html).
 *
 * Every packet: 3-byte little-endian payload length, 1-byte sequence id,
 * payload. On each pooled connection, once: the server's Protocol::HandshakeV10
 * (mysql_native_password), the client's HandshakeResponse41 (user and schema
 * `rubbos`), OK. Then per query: COM_QUERY (0x03 + SQL text), answered by
 *   - a text result set: column count, column definitions (Protocol::
 *     ColumnDefinition41), EOF unless CLIENT_DEPRECATE_EOF, text rows, and EOF
 *     or, with CLIENT_DEPRECATE_EOF, an OK packet with the 0xFE header;
 *   - OK (UPDATE/INSERT/DELETE: 1 affected row);
 *   - ERR 1205 for a fraction `error_rate` of the queries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MYSQL_ERR_LOCK 1205

static void packet_begin(struct sim_buf *b, size_t *mark)
{
    *mark = b->n;
    sim_buf_le(b, 0, 4);
}

static void packet_end(struct sim_buf *b, size_t mark, uint8_t seq)
{
    if (b->err)
        return;
    size_t len = b->n - mark - 4;
    b->p[mark] = (uint8_t)len;
    b->p[mark + 1] = (uint8_t)(len >> 8);
    b->p[mark + 2] = (uint8_t)(len >> 16);
    b->p[mark + 3] = seq;
}

static void lenenc_int(struct sim_buf *b, uint64_t v)
{
    if (v < 251)
        sim_buf_u8(b, (uint8_t)v);
    else if (v < 65536) {
        sim_buf_u8(b, 0xfc);
        sim_buf_le(b, v, 2);
    } else if (v < 16777216) {
        sim_buf_u8(b, 0xfd);
        sim_buf_le(b, v, 3);
    } else {
        sim_buf_u8(b, 0xfe);
        sim_buf_le(b, v, 8);
    }
}

static void lenenc_str(struct sim_buf *b, const void *s, size_t n)
{
    lenenc_int(b, n);
    sim_buf_put(b, s, n);
}

static void mysql_request(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r)
{
    TB_UNUSED(state);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    char sql[1024];
    sim_wire_fill(w, cl->tmpl[r->tier], sql, sizeof sql);
    r->scratch = !strncmp(sql, "SELECT", 6); /* a result set, else OK */
    struct sim_buf *b = w->msg;
    size_t mk;
    packet_begin(b, &mk);
    sim_buf_u8(b, 0x03); /* COM_QUERY */
    sim_buf_str(b, sql);
    packet_end(b, mk, 0);
}

static void eof_packet(struct sim_buf *b, uint8_t seq, bool as_ok)
{
    size_t mk;
    packet_begin(b, &mk);
    sim_buf_u8(b, 0xfe);
    if (as_ok) {
        /* CLIENT_DEPRECATE_EOF: an OK packet with the EOF header ends the rows. */
        sim_buf_u8(b, 0);
        sim_buf_u8(b, 0);
        sim_buf_le(b, 0x0002, 2);
        sim_buf_le(b, 0, 2);
    } else {
        sim_buf_le(b, 0, 2);
        sim_buf_le(b, 0x0002, 2);
    }
    packet_end(b, mk, seq);
}

static void mysql_response(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r,
                           int64_t now)
{
    TB_UNUSED(now);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    const struct sim_tier_conf *t = &w->c->tiers[r->tier];
    struct sim_buf *b = w->msg;
    size_t mk;
    uint8_t seq = 1;
    if (cl->error_rate > 0 && sim_rng_unit(w->rng) < cl->error_rate) {
        packet_begin(b, &mk);
        sim_buf_u8(b, 0xff);
        sim_buf_le(b, MYSQL_ERR_LOCK, 2);
        sim_buf_str(b, "#HY000Lock wait timeout exceeded; try restarting transaction");
        packet_end(b, mk, seq);
        r->status = MYSQL_ERR_LOCK;
        return;
    }
    r->status = 0;
    if (!r->scratch) {
        packet_begin(b, &mk);
        sim_buf_u8(b, 0x00);
        lenenc_int(b, 1); /* affected rows */
        lenenc_int(b, 0);
        sim_buf_le(b, 0x0002, 2);
        sim_buf_le(b, 0, 2);
        packet_end(b, mk, seq);
        return;
    }
    const struct sim_sql_cols *cs = &((const struct sim_sql_cols *)state)[r->cls];
    int nc = cs->n;
    packet_begin(b, &mk);
    lenenc_int(b, (uint64_t)nc);
    packet_end(b, mk, seq++);
    for (int i = 0; i < nc; i++) {
        bool id = sim_wire_sql_is_id(cs->cols[i]);
        size_t tl = strlen(cs->table), cl_ = strlen(cs->cols[i]);
        packet_begin(b, &mk);
        lenenc_str(b, "def", 3);
        lenenc_str(b, "rubbos", 6);
        lenenc_str(b, cs->table, tl);
        lenenc_str(b, cs->table, tl);
        lenenc_str(b, cs->cols[i], cl_);
        lenenc_str(b, cs->cols[i], cl_);
        sim_buf_u8(b, 0x0c);
        sim_buf_le(b, id ? 63 : 255, 2);        /* binary / utf8mb4 */
        sim_buf_le(b, id ? 11 : 1020, 4);       /* column length */
        sim_buf_u8(b, id ? 0x03 : 0xfd);        /* LONG / VAR_STRING */
        sim_buf_le(b, id ? 0x4203 : 0x0000, 2); /* NOT NULL, PRI, NUM */
        sim_buf_u8(b, 0);
        sim_buf_le(b, 0, 2);
        packet_end(b, mk, seq++);
    }
    if (!t->deprecate_eof)
        eof_packet(b, seq++, false);
    long rows = lround(sim_dist_sample(&cl->rows, w->rng));
    for (long row = 0; row < rows; row++) {
        packet_begin(b, &mk);
        for (int i = 0; i < nc; i++) {
            if (sim_wire_sql_is_id(cs->cols[i])) {
                char v[24];
                size_t n = sim_fmt_u64(v, 1 + sim_rng_below(w->rng, 100000));
                lenenc_str(b, v, n);
            } else {
                size_t off = (size_t)sim_rng_below(w->rng, w->filler_len / 2);
                size_t n = TB_MIN((size_t)cl->row_bytes, w->filler_len - off);
                lenenc_str(b, w->filler + off, n);
            }
        }
        packet_end(b, mk, seq++);
    }
    eof_packet(b, seq, t->deprecate_eof);
}

/* Server greeting, client login, OK: what a pooled connection does once. */
static int64_t mysql_login(struct sim_wire_ctx *w, void *state, void *conn,
                           const struct sim_wire_req *r, int64_t t)
{
    TB_UNUSED(state);
    struct sim_buf *b = w->msg;
    bool deprecate_eof = w->c->tiers[r->tier].deprecate_eof;
    size_t mk;
    uint32_t caps = 0x0001 | 0x0004 | 0x0008 | 0x0200 | 0x2000 | 0x8000 | 0x00020000 |
                    0x00080000 | (deprecate_eof ? 0x01000000u : 0);
    uint8_t salt[20];
    for (int i = 0; i < 20; i++)
        salt[i] = (uint8_t)(0x21 + sim_rng_below(w->rng, 94));
    b->n = 0;
    packet_begin(b, &mk);
    sim_buf_u8(b, 10);
    sim_buf_put(b, "8.0.35-tbneck-sim", 18);
    sim_buf_le(b, r->conn_id, 4);
    sim_buf_put(b, salt, 8);
    sim_buf_u8(b, 0);
    sim_buf_le(b, (caps | 0xf7ff) & 0xffff, 2);
    sim_buf_u8(b, 0xff);
    sim_buf_le(b, 0x0002, 2);
    sim_buf_le(b, (caps | 0x01ff0000u) >> 16, 2);
    sim_buf_u8(b, 21);
    sim_buf_zero(b, 10);
    sim_buf_put(b, salt + 8, 12);
    sim_buf_u8(b, 0);
    sim_buf_put(b, "mysql_native_password", 22);
    packet_end(b, mk, 0);
    int64_t last = w->send(w->model, conn, 1, t + 30000);

    b->n = 0;
    packet_begin(b, &mk);
    sim_buf_le(b, caps, 4);
    sim_buf_le(b, 16777216, 4);
    sim_buf_u8(b, 0xff);
    sim_buf_zero(b, 23);
    sim_buf_put(b, "rubbos", 7);
    sim_buf_u8(b, 20);
    for (int i = 0; i < 20; i++)
        sim_buf_u8(b, (uint8_t)sim_rng_next(w->rng));
    sim_buf_put(b, "rubbos", 7);
    sim_buf_put(b, "mysql_native_password", 22);
    packet_end(b, mk, 1);
    last = w->send(w->model, conn, 0, last + 20000);

    b->n = 0;
    packet_begin(b, &mk);
    sim_buf_u8(b, 0);
    sim_buf_u8(b, 0);
    sim_buf_u8(b, 0);
    sim_buf_le(b, 0x0002, 2);
    sim_buf_le(b, 0, 2);
    packet_end(b, mk, 2);
    last = w->send(w->model, conn, 1, last + 60000);
    return last + 1;
}

static int mysql_setup(struct sim_wire_ctx *w, void **state)
{
    return sim_wire_sql_setup(w, &sim_wire_mysql, state);
}

const struct sim_wire sim_wire_mysql = {
    .name = "mysql",
    .port = 3306,
    .flags = SIM_WIRE_LEAF | SIM_WIRE_QUERIES,
    .tmpl_key = "sql",
    .tmpl_default = "SELECT id, title FROM stories WHERE id = {id}",
    .tmpl_check = sim_wire_sql_check,
    .setup = mysql_setup,
    .login = mysql_login,
    .request = mysql_request,
    .response = mysql_response,
    .expect = sim_wire_expect_sql,
};
