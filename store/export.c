/* SPDX-License-Identifier: MIT */
/* export.c — the request records as CSV (DESIGN.md "Interfaces"), fields quoted per RFC 4180. */
#include "store-int.h"

#include <stdlib.h>
#include <string.h>

/* A field is quoted when it holds a comma, a quote or a line break; inner
 * quotes are doubled (RFC 4180, section 2). */
/* Decimal digits without printf: the export formats millions of numbers. */
char *tb__put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

char *tb__put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return tb__put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return tb__put_u64(p, (uint64_t)v);
}

/* Client address text per endpoint id, formatted once: "10.0.0.1" or "[::1]"
 * (brackets when a port follows, as tb_addr_fmt writes them). */
struct client_text {
    char with_port[TB_ADDR_STRLEN + 2]; /* to be followed by ":port" */
    char bare[TB_ADDR_STRLEN];      /* port 0: the address alone */
};

static int load_clients(struct tb__db *d, struct client_text **out, size_t *n)
{
    struct client_text *ct = NULL;
    size_t cap = 0, count = 0;
    sqlite3_stmt *s;
    int rc, src;
    if ((rc = tb__db_prep(d, "SELECT id, addr FROM endpoints ORDER BY id", &s)))
        return rc;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        const unsigned char *txt = sqlite3_column_text(s, 1);
        struct tb_addr a;
        if (id <= 0 || id > UINT32_MAX || !txt || tb_addr_parse((const char *)txt, &a)) {
            tb_log_error("%s: unreadable client address in table endpoints", d->path);
            rc = TB_E_BADFMT;
            break;
        }
        if ((rc = tb_grow(&ct, &cap, (size_t)id + 1, sizeof *ct)))
            break;
        if ((size_t)id >= count) {
            memset(&ct[count], 0, ((size_t)id + 1 - count) * sizeof *ct);
            count = (size_t)id + 1;
        }
        tb_addr_fmt(&a, ct[id].bare, sizeof ct[id].bare);
        if (a.family == 6)
            snprintf(ct[id].with_port, sizeof ct[id].with_port, "[%s]", ct[id].bare);
        else
            memcpy(ct[id].with_port, ct[id].bare, sizeof ct[id].bare);
    }
    if (rc == 0 && src != SQLITE_DONE)
        rc = tb__db_fail(d, "reading client addresses");
    sqlite3_reset(s);
    if (rc) {
        free(ct);
        return rc;
    }
    *out = ct;
    *n = count;
    return 0;
}

/* Writes the rows of one tier, in (arrival_ns, conn) order. */
static int export_tier(struct tb__db *d, int64_t tier_id, const struct client_text *ct,
                       size_t nct, FILE *out, const struct tb_export_tail *tail)
{
    /* Per tier, the (tier_id, arrival_ns) index gives the order and SQLite
     * only sorts rows that share an arrival time; one query over all tiers
     * would sort every row, texts included. */
    static const char sql[] =
        "SELECT t.name, s.addr, r.client_id, r.client_port, r.conn, c.fingerprint, "
        "r.arrival_ns, r.departure_ns, r.req_bytes, r.resp_bytes, r.status, r.flags "
        "FROM requests r JOIN tiers t ON t.id = r.tier_id "
        "JOIN servers s ON s.id = r.server_id JOIN classes c ON c.id = r.class_id "
        "WHERE r.tier_id = ?1 ORDER BY r.arrival_ns, r.conn, r.rowid";
    sqlite3_stmt *s;
    int rc, src;
    if ((rc = tb__db_prep(d, sql, &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier_id);
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        const char *tier = (const char *)sqlite3_column_text(s, 0);
        const char *server = (const char *)sqlite3_column_text(s, 1);
        const char *cls = (const char *)sqlite3_column_text(s, 5);
        int64_t cid = sqlite3_column_int64(s, 2);
        int port = sqlite3_column_int(s, 3);
        tb_csv_field_n(out, tier ? tier : "", (size_t)sqlite3_column_bytes(s, 0));
        putc(',', out);
        tb_csv_field_n(out, server ? server : "", (size_t)sqlite3_column_bytes(s, 1));
        putc(',', out);
        if (cid > 0 && (size_t)cid < nct) {
            if (port) {
                fputs(ct[cid].with_port, out);
                char buf[8], *p = buf;
                *p++ = ':';
                p = tb__put_u64(p, (uint64_t)port);
                fwrite(buf, 1, (size_t)(p - buf), out);
            } else {
                fputs(ct[cid].bare, out);
            }
        }
        char num[32], *p = num;
        *p++ = ',';
        p = tb__put_u64(p, (uint64_t)sqlite3_column_int64(s, 4));
        *p++ = ',';
        fwrite(num, 1, (size_t)(p - num), out);
        tb_csv_field_n(out, cls ? cls : "", (size_t)sqlite3_column_bytes(s, 5));
        /* Six numbers, each at most 20 digits and a sign, plus separators. */
        char num_tail[6 * 22 + 2];
        p = num_tail;
        *p++ = ',';
        p = tb__put_i64(p, sqlite3_column_int64(s, 6));
        *p++ = ',';
        p = tb__put_i64(p, sqlite3_column_int64(s, 7));
        *p++ = ',';
        p = tb__put_u64(p, (uint64_t)sqlite3_column_int64(s, 8));
        *p++ = ',';
        p = tb__put_u64(p, (uint64_t)sqlite3_column_int64(s, 9));
        *p++ = ',';
        p = tb__put_i64(p, sqlite3_column_int(s, 10));
        *p++ = ',';
        p = tb__put_u64(p, (uint32_t)sqlite3_column_int64(s, 11));
        if (tail && tail->row) {
            fwrite(num_tail, 1, (size_t)(p - num_tail), out);
            tail->row(tail->ctx, out);
            p = num_tail;
        }
        *p++ = '\n';
        fwrite(num_tail, 1, (size_t)(p - num_tail), out);
    }
    sqlite3_reset(s);
    if (src != SQLITE_DONE)
        return tb__db_fail(d, "reading requests for export");
    return ferror(out) ? TB_E_IO : 0;
}

int tb__store_export(struct tb__db *d, const char *tier_name, FILE *out,
                     const struct tb_export_tail *tail)
{
    struct client_text *ct = NULL;
    int64_t *tiers = NULL;
    size_t nct = 0, nt = 0, cap = 0;
    sqlite3_stmt *s;
    int rc, src;
    /* Tiers in name order (the CSV's first column), or the one asked for. */
    if ((rc = tb__db_prep(d, tier_name ? "SELECT id FROM tiers WHERE name = ?1"
                                       : "SELECT id FROM tiers ORDER BY name",
                          &s)))
        return rc;
    if (tier_name)
        sqlite3_bind_text(s, 1, tier_name, -1, SQLITE_STATIC);
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        if ((rc = tb_grow(&tiers, &cap, nt + 1, sizeof *tiers)))
            break;
        tiers[nt++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_reset(s);
    if (rc)
        goto out;
    if (src != SQLITE_DONE) {
        rc = tb__db_fail(d, "listing tiers");
        goto out;
    }
    if (tier_name && nt == 0) {
        rc = TB_E_NOTFOUND;
        goto out;
    }
    if ((rc = load_clients(d, &ct, &nct)))
        goto out;
    fputs(TB__REQUESTS_CSV_HEADER, out);
    if (tail && tail->header)
        fputs(tail->header, out);
    putc('\n', out);
    for (size_t i = 0; i < nt && rc == 0; i++)
        rc = export_tier(d, tiers[i], ct, nct, out, tail);
out:
    free(tiers);
    free(ct);
    return rc;
}
