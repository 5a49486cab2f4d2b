/* SPDX-License-Identifier: MIT */
/* linkstore.c — the reads and writes of linking and whatif (linkstore.h). */
#include "linkstore.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store-int.h"

/* A blob part: large enough that a 10 M-request model is a few rows, small
 * enough that SQLite never assembles one huge value. */
#define PART_MAX (16u << 20)

/* Requests by arrival: a stable LSD radix sort of (arrival since the
 * earliest, index) pairs, 11 bits a pass, passes whose digit never changes
 * skipped; the scan came in row-id order, so ties keep it. */
static int sort_by_arrival(const struct tb_request *rq, size_t n, uint32_t *order)
{
    struct key {
        uint64_t k;
        uint32_t i;
    } *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return TB_E_NOMEM;
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        lo = TB_MIN(lo, rq[i].arrival_ns);
        hi = TB_MAX(hi, rq[i].arrival_ns);
    }
    if (n == 0)
        lo = hi = 0;
    for (size_t i = 0; i < n; i++)
        a[i] = (struct key){(uint64_t)rq[i].arrival_ns - (uint64_t)lo, (uint32_t)i};
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    for (unsigned shift = 0; shift < 64 && (span >> shift) != 0; shift += 11) {
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++)
            count[(a[i].k >> shift & 2047) + 1]++;
        for (size_t d = 1; d <= 2048; d++)
            count[d] += count[d - 1];
        for (size_t i = 0; i < n; i++)
            b[count[a[i].k >> shift & 2047]++] = a[i];
        struct key *sw = a;
        a = b;
        b = sw;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = a[i].i;
    free(a);
    free(b);
    return 0;
}

int tb_store_tier_clients(struct tb_store *st, uint32_t ntiers, uint64_t **counts_out,
                          struct tb_addr **ep_out, size_t *nep_out)
{
    struct tb__db *d = tb__store_db(st);
    struct tb_addr *ep = NULL;
    uint64_t *counts = NULL;
    size_t nep = 0;
    sqlite3_stmt *s = NULL;
    int rc, src;
    *counts_out = NULL;
    *ep_out = NULL;
    *nep_out = 0;
    if ((rc = tb__store_endpoints(st, &ep, &nep)))
        return rc;
    if (nep == 0)
        nep = 1; /* column 0: requests with no client endpoint */
    counts = calloc(((size_t)ntiers + 1) * nep, sizeof *counts);
    if (!counts) {
        rc = TB_E_NOMEM;
        goto out;
    }
    if ((rc = tb__db_prep(d, "SELECT tier_id, client_id FROM requests", &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(s, 0), c = sqlite3_column_int64(s, 1);
        if (t < 0 || t > (int64_t)ntiers)
            continue;
        /* An unknown endpoint id reads as no address, as tb_store_link_rows
         * reads it. */
        if (c <= 0 || (uint64_t)c >= nep)
            c = 0;
        counts[(size_t)t * nep + (size_t)c]++;
    }
    if (src != SQLITE_DONE)
        rc = tb__db_fail(d, "reading requests");
    sqlite3_reset(s);
out:
    if (rc) {
        free(counts);
        free(ep);
        return rc;
    }
    if (!ep)
        ep = calloc(1, sizeof *ep);
    if (!ep) {
        free(counts);
        return TB_E_NOMEM;
    }
    *counts_out = counts;
    *ep_out = ep;
    *nep_out = nep;
    return 0;
}

int tb_store_link_rows(struct tb_store *st, struct tb_request **out, int64_t **rowid_out,
                       size_t *n_out)
{
    static const char sql[] = "SELECT rowid, tier_id, server_id, client_id, client_port, conn, "
                              "class_id, arrival_ns, departure_ns, flags FROM requests ORDER BY rowid";
    struct tb__db *d = tb__store_db(st);
    struct tb_request *rq = NULL, *sorted = NULL;
    int64_t *rid = NULL, *srid = NULL;
    uint32_t *order = NULL;
    struct tb_addr *ep = NULL;
    size_t n = 0, cap = 0, nep = 0;
    sqlite3_stmt *s = NULL;
    int rc, src;
    *out = NULL;
    *rowid_out = NULL;
    *n_out = 0;
    if ((rc = tb__store_endpoints(st, &ep, &nep)) || (rc = tb__db_prep(d, sql, &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            size_t c2 = cap ? 2 * cap : 65536;
            struct tb_request *r2 = realloc(rq, c2 * sizeof *rq);
            if (r2)
                rq = r2;
            int64_t *i2 = r2 ? realloc(rid, c2 * sizeof *rid) : NULL;
            if (!r2 || !i2) {
                rc = TB_E_NOMEM;
                goto out;
            }
            rid = i2;
            cap = c2;
        }
        rid[n] = sqlite3_column_int64(s, 0);
        tb__row_request(s, 1, ep, nep, false, &rq[n]);
        n++;
    }
    if (src != SQLITE_DONE) {
        rc = tb__db_fail(d, "reading requests");
        goto out;
    }
    sqlite3_reset(s);
    s = NULL;
    order = malloc((n + 1) * sizeof *order);
    sorted = malloc((n + 1) * sizeof *sorted);
    srid = malloc((n + 1) * sizeof *srid);
    if (!order || !sorted || !srid || n > UINT32_MAX) {
        rc = TB_E_NOMEM;
        goto out;
    }
    if ((rc = sort_by_arrival(rq, n, order)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        sorted[i] = rq[order[i]];
        srid[i] = rid[order[i]];
    }
    *out = sorted;
    *rowid_out = srid;
    *n_out = n;
    sorted = NULL;
    srid = NULL;
out:
    if (s)
        sqlite3_reset(s);
    free(ep);
    free(rq);
    free(rid);
    free(order);
    free(sorted);
    free(srid);
    return rc;
}

int tb_store_stamp(struct tb_store *st, char *buf, size_t len, bool *stable)
{
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    int rc;
    int64_t maxid = 0, ncap = 0, running = 0;
    if ((rc = tb__db_prep(d, "SELECT (SELECT coalesce(max(rowid), 0) FROM requests), "
                             "count(*), coalesce(sum(ended_ns IS NULL), 0) FROM captures",
                          &s)))
        return rc;
    if (sqlite3_step(s) == SQLITE_ROW) {
        maxid = sqlite3_column_int64(s, 0);
        ncap = sqlite3_column_int64(s, 1);
        running = sqlite3_column_int64(s, 2);
    } else {
        rc = tb__db_fail(d, "reading the requests' stamp");
    }
    sqlite3_reset(s);
    snprintf(buf, len, "rows %" PRId64 " captures %" PRId64, maxid, ncap);
    *stable = running == 0;
    return rc;
}

int tb_store_model_get(struct tb_store *st, const char *name, int64_t version, const char *stamp,
                       void **data, size_t *len)
{
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    int rc, src;
    int64_t bytes = -1, parts = 0;
    *data = NULL;
    *len = 0;
    if ((rc = tb__db_prep(d, "SELECT bytes, parts FROM models WHERE name = ?1 AND version = ?2 "
                             "AND stamp = ?3",
                          &s)))
        return rc;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, version);
    sqlite3_bind_text(s, 3, stamp, -1, SQLITE_STATIC);
    if ((src = sqlite3_step(s)) == SQLITE_ROW) {
        bytes = sqlite3_column_int64(s, 0);
        parts = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        return tb__db_fail(d, "reading stored model inputs");
    if (bytes < 0 || (uint64_t)bytes > SIZE_MAX / 2)
        return TB_E_NOTFOUND;
    uint8_t *buf = malloc((size_t)bytes + 1);
    if (!buf)
        return TB_E_NOMEM;
    if ((rc = tb__db_prep(d, "SELECT part, data FROM model_parts WHERE name = ?1 ORDER BY part",
                          &s))) {
        free(buf);
        return rc;
    }
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    size_t at = 0;
    int64_t seen = 0;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        size_t l = (size_t)sqlite3_column_bytes(s, 1);
        const void *p = sqlite3_column_blob(s, 1);
        if (sqlite3_column_int64(s, 0) != seen || l > (size_t)bytes - at) {
            rc = TB_E_NOTFOUND; /* parts missing or out of place: recompute */
            break;
        }
        if (l)
            memcpy(buf + at, p, l);
        at += l;
        seen++;
    }
    if (rc == 0 && src != SQLITE_DONE)
        rc = tb__db_fail(d, "reading stored model inputs");
    sqlite3_reset(s);
    if (rc == 0 && (seen != parts || at != (size_t)bytes))
        rc = TB_E_NOTFOUND;
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = at;
    return 0;
}

static bool writable(struct tb__db *d)
{
    return !d->readonly && sqlite3_db_readonly(d->db, "main") == 0;
}

int tb_store_model_put(struct tb_store *st, const char *name, int64_t version, const char *stamp,
                       const void *data, size_t len)
{
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    if (!writable(d))
        return TB_E_PERM;
    int rc = tb__db_begin(d);
    if (rc)
        return rc;
    if ((rc = tb__db_prep(d, "DELETE FROM model_parts WHERE name = ?1", &s)))
        goto out;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    if ((rc = tb__db_step_done(d, s, "replacing stored model inputs")))
        goto out;
    size_t parts = 0;
    for (size_t at = 0; at < len || (len == 0 && parts == 0); parts++) {
        size_t l = TB_MIN((size_t)PART_MAX, len - at);
        if ((rc = tb__db_prep(d, "INSERT INTO model_parts(name, part, data) VALUES (?1, ?2, ?3)",
                              &s)))
            goto out;
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (int64_t)parts);
        sqlite3_bind_blob(s, 3, (const uint8_t *)data + at, (int)l, SQLITE_STATIC);
        if ((rc = tb__db_step_done(d, s, "storing model inputs")))
            goto out;
        at += l;
    }
    if ((rc = tb__db_prep(d, "INSERT OR REPLACE INTO models(name, version, stamp, created_ns, "
                             "bytes, parts) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                          &s)))
        goto out;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, version);
    sqlite3_bind_text(s, 3, stamp, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec);
    sqlite3_bind_int64(s, 5, (int64_t)len);
    sqlite3_bind_int64(s, 6, (int64_t)parts);
    rc = tb__db_step_done(d, s, "storing model inputs");
out:
    return tb__db_end(d, rc);
}

int tb_store_model_stamp(struct tb_store *st, const char *name, int64_t *version, char *stamp,
                         size_t len)
{
    static const char has[] = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                              "name IN ('models', 'links')";
    static const char sql[] = "SELECT version, stamp FROM models WHERE name = ?1";
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    int rc, src;
    int64_t tables = 0;
    if ((rc = tb__db_prep(d, has, &s)))
        return rc;
    if (sqlite3_step(s) == SQLITE_ROW)
        tables = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (tables != 2)
        return TB_E_NOTFOUND;
    if ((rc = tb__db_prep(d, sql, &s)))
        return rc;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    rc = TB_E_NOTFOUND;
    if ((src = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 1);
        *version = sqlite3_column_int64(s, 0);
        snprintf(stamp, len, "%s", t ? (const char *)t : "");
        rc = 0;
    } else if (src != SQLITE_DONE) {
        rc = tb__db_fail(d, "reading the stored model's stamp");
    }
    sqlite3_reset(s);
    return rc;
}

int tb_store_links_get(struct tb_store *st, const int64_t *rowid, size_t n, uint64_t *parent,
                       uint64_t *rows, uint64_t *linked, uint64_t *exact, uint64_t *ambiguous)
{
    static const char sql[] = "SELECT request, parent, kind FROM links";
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    int rc = 0, src;
    *rows = *linked = *exact = *ambiguous = 0;
    memset(parent, 0, n * sizeof *parent);
    /* Row ids are appended, so dense: position by row id in one array. */
    int64_t maxid = 0;
    for (size_t i = 0; i < n; i++) {
        if (rowid[i] <= 0)
            return TB_E_NOTFOUND;
        maxid = TB_MAX(maxid, rowid[i]);
    }
    if (n > UINT32_MAX - 1 || (uint64_t)maxid > 4 * (uint64_t)n + (1u << 20))
        return TB_E_NOTFOUND;
    uint32_t *pos = malloc(((size_t)maxid + 1) * sizeof *pos);
    if (!pos)
        return TB_E_NOMEM;
    for (int64_t r = 0; r <= maxid; r++)
        pos[r] = UINT32_MAX;
    for (size_t i = 0; i < n; i++)
        pos[rowid[i]] = (uint32_t)i;
    if ((rc = tb__db_prep(d, sql, &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t rq = sqlite3_column_int64(s, 0);
        bool has_parent = sqlite3_column_type(s, 1) != SQLITE_NULL;
        int64_t pr = sqlite3_column_int64(s, 1);
        int kind = sqlite3_column_int(s, 2);
        if (rq <= 0 || rq > maxid || pos[rq] == UINT32_MAX ||
            (has_parent && (pr <= 0 || pr > maxid || pos[pr] == UINT32_MAX))) {
            rc = TB_E_NOTFOUND;
            break;
        }
        (*rows)++;
        if (has_parent) {
            parent[pos[rq]] = (uint64_t)pos[pr] + 1;
            (*linked)++;
        }
        *exact += kind == 1;
        *ambiguous += kind == 2;
    }
    if (!rc && src != SQLITE_DONE)
        rc = tb__db_fail(d, "reading links");
    sqlite3_reset(s);
out:
    free(pos);
    return rc;
}

int tb_store_links_put(struct tb_store *st, const int64_t *rowid, const uint64_t *parent,
                       const float *score, const uint8_t *kind, size_t n)
{
    struct tb__db *d = tb__store_db(st);
    sqlite3_stmt *s;
    if (!writable(d))
        return TB_E_PERM;
    int rc = tb__db_begin(d);
    if (rc)
        return rc;
    if ((rc = tb__db_exec(d, "DELETE FROM links")))
        goto out;
    if ((rc = tb__db_prep(d, "INSERT INTO links(request, parent, score, kind) "
                             "VALUES (?1, ?2, ?3, ?4)",
                          &s)))
        goto out;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!kind[i])
            continue;
        sqlite3_bind_int64(s, 1, rowid[i]);
        if (parent[i] && parent[i] <= n)
            sqlite3_bind_int64(s, 2, rowid[parent[i] - 1]);
        else
            sqlite3_bind_null(s, 2);
        sqlite3_bind_double(s, 3, (double)score[i]);
        sqlite3_bind_int(s, 4, kind[i]);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = tb__db_fail(d, "storing links");
        sqlite3_reset(s);
    }
out:
    return tb__db_end(d, rc);
}
