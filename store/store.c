/* SPDX-License-Identifier: MIT */
/* store.c — opening the database, the catalog, capture sessions, and every read and
 * synchronous write the CLI and the web server use. */
#include "store-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "capture.h"

struct tb_store {
    struct tb__db d;
    unsigned flags;
    bool index_ready; /* requests_tier_arrival known to exist */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

/* SQLite stores a NaN as NULL; read it back as the NaN it was. */
static double column_real(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? NAN : sqlite3_column_double(s, col);
}

static void bind_real(sqlite3_stmt *s, int col, double v)
{
    if (isnan(v))
        sqlite3_bind_null(s, col);
    else
        sqlite3_bind_double(s, col, v);
}

static const char *column_str(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    return t ? (const char *)t : "";
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src);
}

/* ---- open / close ---------------------------------------------------------------------- */

int tb_store_open(struct tb_store **out, const char *path, unsigned flags, char *errbuf,
                  size_t errlen)
{
    char scratch[8];
    struct stat sb;
    int rc;
    *out = NULL;
    if (!errbuf || errlen == 0) {
        errbuf = scratch;
        errlen = sizeof scratch;
    }
    errbuf[0] = '\0';
    if (!path || !*path || ((flags & TB_STORE_READONLY) && (flags & TB_STORE_CREATE))) {
        snprintf(errbuf, errlen, "%s: invalid database open request", path ? path : "(null)");
        return TB_E_INVAL;
    }
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT || !(flags & TB_STORE_CREATE)) {
            snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
            return errno == ENOENT ? TB_E_NOTFOUND : errno == EACCES ? TB_E_PERM : TB_E_IO;
        }
    } else if (S_ISDIR(sb.st_mode)) {
        snprintf(errbuf, errlen, "%s: is a directory, not a tbneck database", path);
        return TB_E_BADFMT;
    }
    struct tb_store *st = calloc(1, sizeof *st);
    if (!st)
        return TB_E_NOMEM;
    st->flags = flags;
    int sflags = (flags & TB_STORE_READONLY)
                     ? SQLITE_OPEN_READONLY
                     : SQLITE_OPEN_READWRITE | ((flags & TB_STORE_CREATE) ? SQLITE_OPEN_CREATE : 0);
    if ((rc = tb__db_open(&st->d, path, sflags, errbuf, errlen)))
        goto out;
    if ((rc = tb__schema_check(&st->d, (flags & TB_STORE_CREATE) != 0, errbuf, errlen)))
        goto out;
    *out = st;
    st = NULL;
out:
    tb_store_close(st);
    return rc;
}

void tb_store_close(struct tb_store *st)
{
    if (!st)
        return;
    tb__db_close(&st->d);
    free(st);
}

const char *tb_store_path(const struct tb_store *st) { return st->d.path; }

/* The read index is built once a live capture is over, or kept by an offline
 * capture's writer as it loads (tb_writer_opts.keep_index: the writer thread
 * pays for it beside the capture thread instead of a sort after it). Readers
 * build it on first use only when no capture is running, because CREATE INDEX holds the write
 * lock for as long as it takes (seconds on a large table) and a live
 * capture's writer would wait on it, then pay for the index on every insert.
 * Until then, and on a read-only handle, reads scan. */
static int ensure_index(struct tb_store *st, bool force)
{
    sqlite3_stmt *s;
    int rc;
    if (st->index_ready || st->d.readonly)
        return 0;
    if (!force) {
        int64_t running = 0;
        if ((rc = tb__db_prep(&st->d, "SELECT count(*) FROM captures WHERE ended_ns IS NULL",
                              &s)))
            return rc;
        if (sqlite3_step(s) == SQLITE_ROW)
            running = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        if (running > 0)
            return 0;
    }
    rc = tb__db_read_index(&st->d);
    if (rc == 0)
        st->index_ready = true;
    return rc;
}

/* ---- catalog --------------------------------------------------------------------------- */

int tb_store_load_catalog(struct tb_store *st, struct tb_catalog *cat)
{
    struct tb__db *d = &st->d;
    struct tb_catalog_marks m;
    sqlite3_stmt *s = NULL;
    uint32_t id;
    int rc = 0, src;
    tb_catalog_marks_get(cat, &m);
    if (m.tiers || m.servers || m.classes || m.hosts)
        return TB_E_INVAL;
    /* Each table is replayed in id order through the catalog's own find-or-add,
     * which hands out ids densely from 1: the ids it returns must be the
     * stored ones, or the file was edited behind our back. */
    if ((rc = tb__db_prep(d, "SELECT id, name, proto, configured FROM tiers ORDER BY id", &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        if ((rc = tb_catalog_tier(cat, column_str(s, 1), column_str(s, 2), &id)))
            goto bad;
        if (id != (uint32_t)sqlite3_column_int64(s, 0))
            goto bad;
        tb_catalog_tier_set_configured(cat, id, sqlite3_column_int(s, 3) != 0);
    }
    if (src != SQLITE_DONE)
        goto dberr;
    sqlite3_reset(s);
    if ((rc = tb__db_prep(d, "SELECT id, tier_id, addr FROM servers ORDER BY id", &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        struct tb_addr a;
        if (tb_addr_parse(column_str(s, 2), &a) ||
            tb_catalog_server(cat, (uint32_t)sqlite3_column_int64(s, 1), &a, &id) ||
            id != (uint32_t)sqlite3_column_int64(s, 0))
            goto bad;
    }
    if (src != SQLITE_DONE)
        goto dberr;
    sqlite3_reset(s);
    if ((rc = tb__db_prep(d, "SELECT id, tier_id, addr FROM hosts ORDER BY id", &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        struct tb_addr a;
        if (tb_addr_parse(column_str(s, 2), &a) ||
            tb_catalog_host(cat, (uint32_t)sqlite3_column_int64(s, 1), &a) ||
            tb_catalog_host_count(cat) != (uint32_t)sqlite3_column_int64(s, 0))
            goto bad;
    }
    if (src != SQLITE_DONE)
        goto dberr;
    sqlite3_reset(s);
    if ((rc = tb__db_prep(d, "SELECT id, tier_id, fingerprint FROM classes ORDER BY id", &s)))
        goto out;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        const char *text = column_str(s, 2);
        if (tb_catalog_class(cat, (uint32_t)sqlite3_column_int64(s, 1), text,
                             (size_t)sqlite3_column_bytes(s, 2), &id) ||
            id != (uint32_t)sqlite3_column_int64(s, 0))
            goto bad;
    }
    if (src != SQLITE_DONE)
        goto dberr;
    tb_catalog_mark_persisted(cat);
    goto out;
bad:
    tb_log_error("%s: the stored tiers, servers, hosts or classes are inconsistent "
                 "(ids not dense, or an unreadable address)", d->path);
    rc = TB_E_BADFMT;
    goto out;
dberr:
    rc = tb__db_fail(d, "reading the catalog");
out:
    if (s)
        sqlite3_reset(s);
    return rc;
}

int tb_store_put_catalog(struct tb_store *st, struct tb_catalog *cat)
{
    struct tb__cat_delta dl = {0};
    int rc = tb__cat_delta_take(&dl, cat);
    if (rc == 0 && !tb__cat_delta_empty(&dl)) {
        if ((rc = tb__db_begin(&st->d)) == 0)
            rc = tb__db_end(&st->d, tb__put_catalog(&st->d, &dl));
    }
    tb__cat_delta_free(&dl);
    return rc;
}

/* ---- capture sessions ------------------------------------------------------------------ */

const char *tb_capture_state_name(enum tb_capture_state s)
{
    switch (s) {
    case TB_CAPTURE_RUNNING: return "running";
    case TB_CAPTURE_COMPLETE: return "complete";
    case TB_CAPTURE_INTERRUPTED: return "interrupted";
    case TB_CAPTURE_PARTIAL: return "partial";
    }
    return "running";
}

static enum tb_capture_state state_parse(const char *s)
{
    if (!strcmp(s, "complete"))
        return TB_CAPTURE_COMPLETE;
    if (!strcmp(s, "interrupted"))
        return TB_CAPTURE_INTERRUPTED;
    if (!strcmp(s, "partial"))
        return TB_CAPTURE_PARTIAL;
    return TB_CAPTURE_RUNNING;
}

int tb_store_capture_begin(struct tb_store *st, const char *source, int64_t *capture_id)
{
    sqlite3_stmt *s;
    int rc = tb__db_prep(&st->d,
                         "INSERT INTO captures(source, started_ns, state) VALUES (?1, ?2, 'running')",
                         &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, source ? source : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ns());
    if ((rc = tb__db_step_done(&st->d, s, "starting a capture")))
        return rc;
    *capture_id = sqlite3_last_insert_rowid(st->d.db);
    return 0;
}

int tb_store_capture_first(struct tb_store *st, int64_t capture_id, int64_t first_ns)
{
    sqlite3_stmt *s;
    int rc = tb__db_prep(&st->d, "UPDATE captures SET first_ns = ?1 WHERE id = ?2", &s);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, first_ns);
    sqlite3_bind_int64(s, 2, capture_id);
    return tb__db_step_done(&st->d, s, "starting a capture");
}

int tb_store_capture_end(struct tb_store *st, int64_t capture_id,
                         const struct tb_capture_stats *cs)
{
    return tb_store_capture_finish(st, capture_id, cs, NULL);
}

static int put_capture_tiers(struct tb_store *st, int64_t capture_id,
                             const struct tb_capture_end *e)
{
    sqlite3_stmt *s;
    int rc;
    for (size_t i = 0; i < e->ntiers; i++) {
        const struct tb_capture_tier *t = &e->tiers[i];
        if ((rc = tb__db_prep(&st->d,
                              "INSERT OR REPLACE INTO capture_tiers(capture_id, tier_id, seen, "
                              "stored, unanswered, abandoned) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                              &s)))
            return rc;
        sqlite3_bind_int64(s, 1, capture_id);
        sqlite3_bind_int64(s, 2, t->tier);
        sqlite3_bind_int64(s, 3, (int64_t)t->seen);
        sqlite3_bind_int64(s, 4, (int64_t)t->stored);
        sqlite3_bind_int64(s, 5, (int64_t)t->unanswered);
        sqlite3_bind_int64(s, 6, (int64_t)t->abandoned);
        if ((rc = tb__db_step_done(&st->d, s, "recording a capture's tiers")))
            return rc;
    }
    return 0;
}

int tb_store_capture_finish(struct tb_store *st, int64_t capture_id,
                            const struct tb_capture_stats *cs, const struct tb_capture_end *e)
{
    sqlite3_stmt *s;
    int rc;
    if (!cs) {
        /* No statistics: only close the session, keep whatever counters it has. */
        if ((rc = tb__db_prep(&st->d,
                              "UPDATE captures SET ended_ns = ?2, state = ?3 WHERE id = ?1", &s)))
            return rc;
        sqlite3_bind_int64(s, 1, capture_id);
        sqlite3_bind_int64(s, 2, now_ns());
        sqlite3_bind_text(s, 3, tb_capture_state_name(e ? e->state : TB_CAPTURE_COMPLETE), -1,
                          SQLITE_STATIC);
        if ((rc = tb__db_step_done(&st->d, s, "ending a capture")))
            return rc;
        if (sqlite3_changes(st->d.db) != 1)
            return TB_E_NOTFOUND;
        return ensure_index(st, true);
    }
    uint64_t stored = e ? e->stored : cs->requests;
    /* One transaction: the row and its tiers agree, or neither is written. */
    if ((rc = tb__db_begin(&st->d)))
        return rc;
    rc = tb__db_prep(&st->d,
                         "UPDATE captures SET ended_ns = ?2, link_type = ?3, packets = ?4, "
                         "bytes = ?5, truncated = ?6, non_ip = ?7, non_tcp = ?8, "
                         "ip_fragments = ?9, decode_errors = ?10, flows = ?11, "
                         "midstream_flows = ?12, evicted_flows = ?13, gaps = ?14, "
                         "gap_bytes = ?15, parse_errors = ?16, encrypted_flows = ?17, "
                         "inflight_dropped = ?18, requests = ?19, kernel_drops = ?20, "
                         "if_drops = ?21, first_ns = ?22, last_ns = ?23, requests_seen = ?24, "
                         "requests_lost = ?25, unanswered = ?26, abandoned = ?27, "
                         "memory_evicted = ?28, state = ?29 WHERE id = ?1",
                         &s);
    if (rc)
        goto out;
    const uint64_t v[] = {cs->packets,       cs->bytes,         cs->truncated,
                          cs->non_ip,        cs->non_tcp,       cs->ip_fragments,
                          cs->decode_errors, cs->flows,         cs->midstream_flows,
                          cs->evicted_flows, cs->gaps,          cs->gap_bytes,
                          cs->parse_errors,  cs->encrypted_flows, cs->inflight_dropped,
                          stored,            cs->kernel_drops,  cs->if_drops};
    sqlite3_bind_int64(s, 1, capture_id);
    sqlite3_bind_int64(s, 2, now_ns());
    sqlite3_bind_int(s, 3, cs->linktype);
    for (size_t i = 0; i < TB_ARRAY_SIZE(v); i++)
        sqlite3_bind_int64(s, 4 + (int)i, (int64_t)v[i]);
    if (cs->packets) {
        sqlite3_bind_int64(s, 22, cs->first_ns);
        sqlite3_bind_int64(s, 23, cs->last_ns);
    }
    sqlite3_bind_int64(s, 24, (int64_t)cs->requests);
    sqlite3_bind_int64(s, 25, (int64_t)(cs->requests > stored ? cs->requests - stored : 0));
    sqlite3_bind_int64(s, 26, (int64_t)(e ? e->unanswered : cs->unanswered));
    sqlite3_bind_int64(s, 27, (int64_t)(e ? e->abandoned : 0));
    sqlite3_bind_int64(s, 28, (int64_t)(e ? e->memory_evicted : 0));
    sqlite3_bind_text(s, 29, tb_capture_state_name(e ? e->state : TB_CAPTURE_COMPLETE), -1,
                      SQLITE_STATIC);
    if ((rc = tb__db_step_done(&st->d, s, "ending a capture")))
        goto out;
    if (sqlite3_changes(st->d.db) != 1) {
        rc = TB_E_NOTFOUND;
        goto out;
    }
    if (e)
        rc = put_capture_tiers(st, capture_id, e);
out:
    rc = tb__db_end(&st->d, rc);
    if (rc)
        return rc;
    /* A partial capture's disk is full: building the index would fail again
     * and say nothing new; readers scan, or build it once there is room. */
    if (e && e->state == TB_CAPTURE_PARTIAL)
        return 0;
    return ensure_index(st, true);
}

int tb_store_capture_starting(struct tb_store *st, int64_t first_ns, int64_t *capture_id,
                              char *source, size_t nsource, char *state, size_t nstate)
{
    sqlite3_stmt *s;
    *capture_id = 0;
    int rc = tb__db_prep(&st->d,
                         "SELECT id, source, state FROM captures WHERE first_ns = ?1 "
                         "ORDER BY id LIMIT 1",
                         &s);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, first_ns);
    int src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        const unsigned char *so = sqlite3_column_text(s, 1), *sa = sqlite3_column_text(s, 2);
        *capture_id = sqlite3_column_int64(s, 0);
        snprintf(source, nsource, "%s", so ? (const char *)so : "");
        snprintf(state, nstate, "%s", sa ? (const char *)sa : "");
    } else if (src != SQLITE_DONE) {
        rc = tb__db_fail(&st->d, "reading the captures");
    }
    sqlite3_reset(s);
    return rc;
}

int tb_store_partial(struct tb_store *st, int64_t from_ns, int64_t to_ns, uint64_t *n,
                     uint64_t *lost)
{
    sqlite3_stmt *s;
    int rc = tb__db_prep(&st->d,
                         "SELECT count(*), coalesce(sum(requests_lost), 0) FROM captures "
                         "WHERE state = 'partial' AND coalesce(last_ns, ?2) >= ?1 "
                         "AND coalesce(first_ns, ?1) < ?2",
                         &s);
    *n = *lost = 0;
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, from_ns);
    sqlite3_bind_int64(s, 2, to_ns);
    if (sqlite3_step(s) == SQLITE_ROW) {
        *n = (uint64_t)sqlite3_column_int64(s, 0);
        *lost = (uint64_t)sqlite3_column_int64(s, 1);
    } else {
        rc = tb__db_fail(&st->d, "reading the captures' states");
    }
    sqlite3_reset(s);
    return rc;
}

int tb_store_next_conn(struct tb_store *st, uint64_t *conn)
{
    sqlite3_stmt *s;
    int rc = tb__db_prep(&st->d, "SELECT value FROM meta WHERE key = 'next_conn'", &s);
    if (rc)
        return rc;
    int src = sqlite3_step(s);
    if (src == SQLITE_ROW)
        *conn = (uint64_t)sqlite3_column_int64(s, 0);
    else if (src == SQLITE_DONE)
        *conn = 1;
    else
        rc = tb__db_fail(&st->d, "reading the next connection id");
    sqlite3_reset(s);
    return rc;
}

static int fill_capture(sqlite3_stmt *s, void *elem, void *ctx)
{
    struct tb_capture_row *r = elem;
    (void)ctx;
    r->id = sqlite3_column_int64(s, 0);
    copy_str(r->source, sizeof r->source, column_str(s, 1));
    r->started_ns = sqlite3_column_int64(s, 2);
    r->ended_ns = sqlite3_column_int64(s, 3); /* NULL (still running) reads as 0 */
    r->packets = (uint64_t)sqlite3_column_int64(s, 4);
    r->bytes = (uint64_t)sqlite3_column_int64(s, 5);
    r->kernel_drops = (uint64_t)sqlite3_column_int64(s, 6);
    r->if_drops = (uint64_t)sqlite3_column_int64(s, 7);
    r->parse_errors = (uint64_t)sqlite3_column_int64(s, 8);
    r->gaps = (uint64_t)sqlite3_column_int64(s, 9);
    r->evicted_flows = (uint64_t)sqlite3_column_int64(s, 10);
    r->requests = (uint64_t)sqlite3_column_int64(s, 11);
    r->state = state_parse(column_str(s, 12));
    r->requests_seen = (uint64_t)sqlite3_column_int64(s, 13);
    r->requests_lost = (uint64_t)sqlite3_column_int64(s, 14);
    r->unanswered = (uint64_t)sqlite3_column_int64(s, 15);
    r->abandoned = (uint64_t)sqlite3_column_int64(s, 16);
    r->memory_evicted = (uint64_t)sqlite3_column_int64(s, 17);
    return 0;
}

int tb_store_captures(struct tb_store *st, struct tb_capture_row **out, size_t *n)
{
    return tb__db_select(&st->d,
                         "SELECT id, source, started_ns, ended_ns, packets, bytes, "
                         "kernel_drops, if_drops, parse_errors, gaps, evicted_flows, requests, "
                         "state, requests_seen, requests_lost, unanswered, abandoned, "
                         "memory_evicted FROM captures ORDER BY id",
                         NULL, 0, sizeof **out, fill_capture, NULL, "reading captures", out, n);
}

/* ---- requests ---------------------------------------------------------------------------- */

/* Client addresses by endpoint id; endpoints are machines, so few. */
static int load_endpoints(struct tb_store *st, struct tb_addr **out, size_t *n)
{
    struct tb_addr *ep = NULL;
    size_t cap = 0, count = 0;
    sqlite3_stmt *s;
    int rc, src;
    if ((rc = tb__db_prep(&st->d, "SELECT id, addr FROM endpoints ORDER BY id", &s)))
        return rc;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        if (id <= 0 || id > UINT32_MAX) {
            rc = TB_E_BADFMT;
            break;
        }
        if ((rc = tb_grow(&ep, &cap, (size_t)id + 1, sizeof *ep)))
            break;
        for (size_t i = count; i <= (size_t)id; i++)
            memset(&ep[i], 0, sizeof ep[i]);
        count = (size_t)id + 1;
        if (tb_addr_parse(column_str(s, 1), &ep[id])) {
            rc = TB_E_BADFMT;
            break;
        }
    }
    if (rc == 0 && src != SQLITE_DONE)
        rc = tb__db_fail(&st->d, "reading client addresses");
    sqlite3_reset(s);
    if (rc == TB_E_BADFMT)
        tb_log_error("%s: unreadable client address in table endpoints", st->d.path);
    if (rc) {
        free(ep);
        return rc;
    }
    *out = ep;
    *n = count;
    return 0;
}

/* Decodes the row `s` is on: the 9 lean columns of the SELECTs below from
 * column `base` on (tier_id, server_id, client_id, client_port, conn,
 * class_id, arrival_ns, departure_ns, flags), then req_bytes, resp_bytes,
 * status when `full`. */
void tb__row_request(sqlite3_stmt *s, int base, const struct tb_addr *ep, size_t nep, bool full,
                     struct tb_request *r)
{
    memset(r, 0, sizeof *r);
    r->tier = (uint32_t)sqlite3_column_int64(s, base);
    r->server = (uint32_t)sqlite3_column_int64(s, base + 1);
    int64_t cid = sqlite3_column_int64(s, base + 2);
    if (cid > 0 && (size_t)cid < nep)
        r->client = ep[cid];
    r->client.port = (uint16_t)sqlite3_column_int(s, base + 3);
    r->conn = (uint64_t)sqlite3_column_int64(s, base + 4);
    r->class_id = (uint32_t)sqlite3_column_int64(s, base + 5);
    r->arrival_ns = sqlite3_column_int64(s, base + 6);
    r->departure_ns = sqlite3_column_int64(s, base + 7);
    r->flags = (uint32_t)sqlite3_column_int64(s, base + 8);
    if (full) {
        r->req_bytes = (uint64_t)sqlite3_column_int64(s, base + 9);
        r->resp_bytes = (uint64_t)sqlite3_column_int64(s, base + 10);
        r->status = sqlite3_column_int(s, base + 11);
    }
}

/* Every tier's rows in (arrival, rowid) order without a sort: one statement
 * per tier walks the (tier_id, arrival_ns) index, whose entries are in
 * (arrival_ns, rowid) order within a tier, and the tiers' heads are merged
 * by a heap on (arrival_ns, rowid). The same rows in the same order as
 * ORDER BY arrival_ns, rowid over the whole table, which SQLite can only
 * give by sorting every row in a temporary B-tree (half the cost of the read,
 * and its memory). Needs the index: *done false without it (nothing read). */
struct merge_src {
    sqlite3_stmt *s;
    struct tb_request r;
    int64_t rowid;
};

static bool merge_less(const struct merge_src *a, const struct merge_src *b)
{
    if (a->r.arrival_ns != b->r.arrival_ns)
        return a->r.arrival_ns < b->r.arrival_ns;
    return a->rowid < b->rowid;
}

static void merge_down(struct merge_src **h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && merge_less(h[l], h[m]))
            m = l;
        if (l + 1 < n && merge_less(h[l + 1], h[m]))
            m = l + 1;
        if (m == i)
            return;
        struct merge_src *x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
}

static int each_request_merged(struct tb_store *st, int64_t from_ns, int64_t to_ns, bool full,
                               const struct tb_addr *ep, size_t nep, tb_store_request_cb cb,
                               void *ctx, bool *done)
{
    static const char lean[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags, rowid FROM requests "
        "WHERE tier_id = ?1 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    static const char wide[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags, req_bytes, resp_bytes, status, rowid FROM requests "
        "WHERE tier_id = ?1 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    sqlite3_stmt *q = NULL;
    struct merge_src *src = NULL, **heap = NULL;
    size_t n = 0, cap = 0, nh = 0;
    int rc, step;
    int rowid_col = full ? 12 : 9;
    if ((rc = tb__db_prep(&st->d,
                          "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                          "name = 'requests_tier_arrival'",
                          &q)))
        return rc;
    bool have = sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) > 0;
    sqlite3_reset(q);
    *done = have;
    if (!have)
        return 0;
    /* Tier 0 too: a row whose tier the catalog never named is still read. */
    if ((rc = tb__db_prep(&st->d, "SELECT id FROM tiers UNION SELECT 0", &q)))
        return rc;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        if ((rc = tb_grow(&src, &cap, n + 1, sizeof *src)))
            break;
        memset(&src[n], 0, sizeof src[n]);
        if (sqlite3_prepare_v2(st->d.db, full ? wide : lean, -1, &src[n].s, NULL) != SQLITE_OK) {
            rc = tb__db_fail(&st->d, "preparing a statement");
            break;
        }
        sqlite3_bind_int64(src[n].s, 1, sqlite3_column_int64(q, 0));
        sqlite3_bind_int64(src[n].s, 2, from_ns);
        sqlite3_bind_int64(src[n].s, 3, to_ns);
        n++;
    }
    if (!rc && step != SQLITE_DONE)
        rc = tb__db_fail(&st->d, "reading tiers");
    sqlite3_reset(q);
    if (!rc && !(heap = malloc((n ? n : 1) * sizeof *heap)))
        rc = TB_E_NOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        step = sqlite3_step(src[i].s);
        if (step == SQLITE_ROW) {
            tb__row_request(src[i].s, 0, ep, nep, full, &src[i].r);
            src[i].rowid = sqlite3_column_int64(src[i].s, rowid_col);
            heap[nh++] = &src[i];
        } else if (step != SQLITE_DONE) {
            rc = tb__db_fail(&st->d, "reading requests");
        }
    }
    for (size_t i = nh / 2; i-- > 0;)
        merge_down(heap, nh, i);
    while (!rc && nh) {
        struct merge_src *m = heap[0];
        if ((rc = cb(ctx, &m->r)) != 0)
            break;
        step = sqlite3_step(m->s);
        if (step == SQLITE_ROW) {
            tb__row_request(m->s, 0, ep, nep, full, &m->r);
            m->rowid = sqlite3_column_int64(m->s, rowid_col);
        } else if (step == SQLITE_DONE) {
            heap[0] = heap[--nh];
        } else {
            rc = tb__db_fail(&st->d, "reading requests");
            break;
        }
        merge_down(heap, nh, 0);
    }
    for (size_t i = 0; i < n; i++)
        sqlite3_finalize(src[i].s);
    free(src);
    free(heap);
    return rc;
}

/* Rows in arrival order (then row id, the order rows were written in), each
 * decoded into one tb_request on the stack and handed to cb: nothing per
 * request is kept here. `full` reads every column; otherwise req_bytes,
 * resp_bytes and status are not read (left 0): the analysis never looks at
 * them, and fewer columns decode faster. One tier: one statement on the
 * index; every tier: the tiers' index walks merged (each_request_merged),
 * or, without the index (a capture still running), one sorted SELECT. */
static int each_request(struct tb_store *st, uint32_t tier, int64_t from_ns, int64_t to_ns,
                        bool full, tb_store_request_cb cb, void *ctx)
{
    static const char sql_tier[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags, req_bytes, resp_bytes, status FROM requests "
        "WHERE tier_id = ?1 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    static const char sql_all[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags, req_bytes, resp_bytes, status FROM requests "
        "WHERE ?1 = 0 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    static const char lean_tier[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags FROM requests "
        "WHERE tier_id = ?1 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    static const char lean_all[] =
        "SELECT tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, flags FROM requests "
        "WHERE ?1 = 0 AND arrival_ns < ?3 AND departure_ns >= ?2 "
        "ORDER BY arrival_ns, rowid";
    struct tb_addr *ep = NULL;
    size_t nep = 0;
    sqlite3_stmt *s = NULL;
    int rc, src;
    if ((rc = ensure_index(st, false)) || (rc = load_endpoints(st, &ep, &nep)))
        goto out;
    if (!tier) {
        bool done = false;
        rc = each_request_merged(st, from_ns, to_ns, full, ep, nep, cb, ctx, &done);
        if (rc || done)
            goto out;
    }
    const char *sql = full ? (tier ? sql_tier : sql_all) : (tier ? lean_tier : lean_all);
    if ((rc = tb__db_prep(&st->d, sql, &s)))
        goto out;
    sqlite3_bind_int64(s, 1, tier);
    sqlite3_bind_int64(s, 2, from_ns);
    sqlite3_bind_int64(s, 3, to_ns);
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        struct tb_request r;
        tb__row_request(s, 0, ep, nep, full, &r);
        if ((rc = cb(ctx, &r)) != 0)
            goto out;
    }
    if (src != SQLITE_DONE)
        rc = tb__db_fail(&st->d, "reading requests");
out:
    if (s)
        sqlite3_reset(s);
    free(ep);
    return rc;
}

int tb_store_each_request(struct tb_store *st, uint32_t tier, int64_t from_ns, int64_t to_ns,
                          tb_store_request_cb cb, void *ctx)
{
    return each_request(st, tier, from_ns, to_ns, false, cb, ctx);
}

struct rq_array {
    struct tb_request *rq;
    size_t n, cap;
};

static int rq_append(void *ctx, const struct tb_request *r)
{
    struct rq_array *a = ctx;
    int rc = tb_grow(&a->rq, &a->cap, a->n + 1, sizeof *a->rq);
    if (!rc)
        a->rq[a->n++] = *r;
    return rc;
}

int tb_store_requests(struct tb_store *st, uint32_t tier, int64_t from_ns, int64_t to_ns,
                      struct tb_request **out, size_t *n)
{
    struct rq_array a = {0};
    *out = NULL;
    *n = 0;
    int rc = each_request(st, tier, from_ns, to_ns, true, rq_append, &a);
    if (rc) {
        free(a.rq);
        return rc;
    }
    *out = a.rq;
    *n = a.n;
    return 0;
}

static uint8_t name_index(const char *name, const char *(*fn)(unsigned), unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(fn(i), name))
            return (uint8_t)i;
    return 0;
}

static int fill_conn(sqlite3_stmt *s, void *elem, void *ctx)
{
    struct tb_conn *x = elem;
    x->conn = (uint64_t)sqlite3_column_int64(s, 0);
    if (tb_addr_parse(column_str(s, 1), &x->client) ||
        tb_addr_parse(column_str(s, 2), &x->server)) {
        tb_log_error("%s: unreadable address in table connections (conn %llu)",
                     (const char *)ctx, (unsigned long long)x->conn);
        return TB_E_BADFMT;
    }
    x->tier = (uint32_t)sqlite3_column_int64(s, 3);
    x->server_id = (uint32_t)sqlite3_column_int64(s, 4);
    x->open_ns = sqlite3_column_int64(s, 5);
    x->close_ns = sqlite3_column_int64(s, 6);
    x->opened = name_index(column_str(s, 7), tb_conn_open_name, 3);
    x->closed = name_index(column_str(s, 8), tb_conn_close_name, 6);
    x->requests = (uint64_t)sqlite3_column_int64(s, 9);
    x->packets = (uint64_t)sqlite3_column_int64(s, 10);
    x->bytes_c2s = (uint64_t)sqlite3_column_int64(s, 11);
    x->bytes_s2c = (uint64_t)sqlite3_column_int64(s, 12);
    return 0;
}

int tb_store_connections(struct tb_store *st, int64_t from_ns, int64_t to_ns,
                         struct tb_conn **out, size_t *n)
{
    return tb__db_select(&st->d,
                         "SELECT conn, client, server, tier_id, server_id, open_ns, close_ns, "
                         "opened, closed, requests, packets, bytes_c2s, bytes_s2c "
                         "FROM connections WHERE close_ns >= ?1 AND open_ns < ?2 "
                         "ORDER BY open_ns, conn",
                         (const int64_t[]){from_ns, to_ns}, 2, sizeof **out, fill_conn,
                         st->d.path, "reading connections", out, n);
}

int tb_store_request_count(struct tb_store *st, uint32_t tier, uint64_t *n)
{
    sqlite3_stmt *s;
    int rc;
    if ((rc = ensure_index(st, false)) ||
        (rc = tb__db_prep(&st->d,
                          tier ? "SELECT count(*) FROM requests WHERE tier_id = ?1"
                               : "SELECT count(*) FROM requests WHERE ?1 = 0",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    if (sqlite3_step(s) == SQLITE_ROW)
        *n = (uint64_t)sqlite3_column_int64(s, 0);
    else
        rc = tb__db_fail(&st->d, "counting requests");
    sqlite3_reset(s);
    return rc;
}

int tb_store_server_counts(struct tb_store *st, uint32_t tier, uint64_t *per_server,
                           size_t nsrv)
{
    sqlite3_stmt *s;
    int rc, step;
    if ((rc = ensure_index(st, false)) ||
        (rc = tb__db_prep(&st->d,
                          "SELECT server_id, count(*) FROM requests WHERE tier_id = ?1 "
                          "GROUP BY server_id",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(s, 0);
        if (id >= 0 && (uint64_t)id < nsrv)
            per_server[id] += (uint64_t)sqlite3_column_int64(s, 1);
    }
    if (step != SQLITE_DONE)
        rc = tb__db_fail(&st->d, "counting requests per server");
    sqlite3_reset(s);
    return rc;
}

int tb_store_time_span(struct tb_store *st, uint32_t tier, int64_t *first_ns, int64_t *last_ns)
{
    sqlite3_stmt *s;
    int rc;
    if ((rc = ensure_index(st, false)) ||
        (rc = tb__db_prep(&st->d,
                          tier ? "SELECT min(arrival_ns), max(departure_ns) FROM requests "
                                 "WHERE tier_id = ?1"
                               : "SELECT min(arrival_ns), max(departure_ns) FROM requests "
                                 "WHERE ?1 = 0",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    if (sqlite3_step(s) != SQLITE_ROW)
        rc = tb__db_fail(&st->d, "reading the time span");
    else if (sqlite3_column_type(s, 0) == SQLITE_NULL)
        rc = TB_E_NOTFOUND;
    else {
        *first_ns = sqlite3_column_int64(s, 0);
        *last_ns = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    return rc;
}

int tb_store_export_requests(struct tb_store *st, const char *tier_name, FILE *out)
{
    int rc = ensure_index(st, false);
    return rc ? rc : tb__store_export(&st->d, tier_name, out, NULL);
}

int tb_store_export_requests_tail(struct tb_store *st, const char *tier_name, FILE *out,
                                  const struct tb_export_tail *tail)
{
    int rc = ensure_index(st, false);
    return rc ? rc : tb__store_export(&st->d, tier_name, out, tail);
}

/* ---- windows and service times --------------------------------------------------------- */

int tb_store_put_windows(struct tb_store *st, const struct tb_window *w, size_t n)
{
    int rc;
    if (n == 0)
        return 0;
    if ((rc = tb__db_begin(&st->d)))
        return rc;
    return tb__db_end(&st->d, tb__put_windows(&st->d, w, n));
}

static int fill_window(sqlite3_stmt *s, void *elem, void *ctx)
{
    const struct tb_window *key = ctx;
    *(struct tb_window *)elem = (struct tb_window){
        .start_ns = sqlite3_column_int64(s, 0),
        .width_ns = key->width_ns,
        .tier = key->tier,
        .server = key->server,
        .load = sqlite3_column_double(s, 1),
        .completions = (uint32_t)sqlite3_column_int64(s, 2),
        .work_units = sqlite3_column_double(s, 3),
        .throughput = sqlite3_column_double(s, 4),
        .norm_throughput = sqlite3_column_double(s, 5),
        .rt_mean_ns = sqlite3_column_double(s, 6),
        .rt_p95_ns = sqlite3_column_double(s, 7),
    };
    return 0;
}

int tb_store_get_windows(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                         int64_t from_ns, int64_t to_ns, struct tb_window **out, size_t *n)
{
    struct tb_window key = {.tier = tier, .server = server, .width_ns = width_ns};
    return tb__db_select(&st->d,
                         "SELECT start_ns, load, completions, work_units, throughput, "
                         "norm_throughput, rt_mean_ns, rt_p95_ns FROM windows "
                         "WHERE tier_id = ?1 AND server_id = ?2 AND width_ns = ?3 "
                         "AND start_ns >= ?4 AND start_ns < ?5 ORDER BY start_ns",
                         (const int64_t[]){tier, server, width_ns, from_ns, to_ns}, 5,
                         sizeof **out, fill_window, &key, "reading windows", out, n);
}

static void bind_service(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_class_service *sv = elem;
    (void)ctx;
    sqlite3_bind_int64(s, 1, sv->tier);
    sqlite3_bind_int64(s, 2, sv->class_id);
    sqlite3_bind_int64(s, 3, sv->period_start_ns);
    sqlite3_bind_int64(s, 4, sv->service_ns);
    sqlite3_bind_double(s, 5, sv->units);
    sqlite3_bind_int64(s, 6, sv->samples);
    sqlite3_bind_int64(s, 7, sv->requests);
    sqlite3_bind_int(s, 8, (int)sv->method);
}

int tb_store_put_services(struct tb_store *st, const struct tb_class_service *sv, size_t n)
{
    static const struct tb__db_put put = {
        "INSERT OR REPLACE INTO service_times(tier_id, class_id, period_start_ns, service_ns, "
        "units, samples, requests, method) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        0, "storing service times", bind_service, NULL};
    return tb__db_put_all(&st->d, &put, sv, n, sizeof *sv, NULL);
}

static int fill_service(sqlite3_stmt *s, void *elem, void *ctx)
{
    (void)ctx;
    *(struct tb_class_service *)elem = (struct tb_class_service){
        .tier = (uint32_t)sqlite3_column_int64(s, 0),
        .class_id = (uint32_t)sqlite3_column_int64(s, 1),
        .period_start_ns = sqlite3_column_int64(s, 2),
        .service_ns = sqlite3_column_int64(s, 3),
        .units = sqlite3_column_double(s, 4),
        .samples = (uint32_t)sqlite3_column_int64(s, 5),
        .requests = (uint32_t)sqlite3_column_int64(s, 6),
        .method = (enum tb_svc_method)sqlite3_column_int(s, 7),
    };
    return 0;
}

int tb_store_get_services(struct tb_store *st, uint32_t tier, struct tb_class_service **out,
                          size_t *n)
{
    return tb__db_select(&st->d,
                         "SELECT tier_id, class_id, period_start_ns, service_ns, units, "
                         "samples, requests, method FROM service_times "
                         "WHERE ?1 = 0 OR tier_id = ?1 "
                         "ORDER BY tier_id, class_id, period_start_ns",
                         (const int64_t[]){tier}, 1, sizeof **out, fill_service, NULL,
                         "reading service times", out, n);
}

/* ---- analyses and episodes --------------------------------------------------------------- */

/* Levels as a JSON array; %.17g round-trips a double exactly. */
static void levels_json(const struct tb_analysis *a, char *buf, size_t len)
{
    size_t off = 0;
    uint32_t nl = TB_MIN(a->n_levels, (uint32_t)TB_ARRAY_SIZE(a->levels));
    off += (size_t)snprintf(buf, len, "[");
    for (uint32_t i = 0; i < nl && off < len; i++) {
        if (isfinite(a->levels[i]))
            off += (size_t)snprintf(buf + off, len - off, "%s%.17g", i ? "," : "", a->levels[i]);
        else
            off += (size_t)snprintf(buf + off, len - off, "%snull", i ? "," : "");
    }
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

static int levels_parse(const char *p, struct tb_analysis *a)
{
    a->n_levels = 0;
    while (*p == ' ')
        p++;
    if (*p++ != '[')
        return TB_E_BADFMT;
    while (*p == ' ')
        p++;
    if (*p == ']')
        return 0;
    for (;;) {
        double v;
        char *end;
        if (strncmp(p, "null", 4) == 0) {
            v = NAN;
            end = (char *)p + 4;
        } else {
            v = strtod(p, &end);
            if (end == p)
                return TB_E_BADFMT;
        }
        if (a->n_levels >= TB_ARRAY_SIZE(a->levels))
            return TB_E_BADFMT;
        a->levels[a->n_levels++] = v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ']')
            return 0;
        if (*p++ != ',')
            return TB_E_BADFMT;
        while (*p == ' ')
            p++;
    }
}

/* Keeps the TB_STORE_ANALYSES_KEEP most recently used analyses of (tier,
 * server): a client asking for a thousand widths (issue 13: 1000 widths made
 * 1001 rows, 3 MB of database and 16 MB of WAL) leaves a bounded store. The
 * windows of a width left with no analysis go too, except while a capture
 * runs: a live capture stores its own windows, with no analysis until it ends. */
static int evict_analyses(struct tb__db *d, uint32_t tier, uint32_t server)
{
    sqlite3_stmt *s;
    int rc;
    if ((rc = tb__db_prep(d,
                          "CREATE TEMP TABLE IF NOT EXISTS evicted_analyses "
                          "(id INTEGER PRIMARY KEY, width_ns INTEGER)",
                          &s)) ||
        (rc = tb__db_step_done(d, s, "evicting analyses")))
        return rc;
    if ((rc = tb__db_prep(d, "DELETE FROM temp.evicted_analyses", &s)) ||
        (rc = tb__db_step_done(d, s, "evicting analyses")))
        return rc;
    if ((rc = tb__db_prep(d,
                          "INSERT INTO temp.evicted_analyses(id, width_ns) SELECT id, width_ns "
                          "FROM analyses WHERE tier_id = ?1 AND server_id = ?2 "
                          "ORDER BY used_ns DESC, id DESC LIMIT -1 OFFSET ?3",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    sqlite3_bind_int64(s, 2, server);
    sqlite3_bind_int64(s, 3, TB_STORE_ANALYSES_KEEP);
    if ((rc = tb__db_step_done(d, s, "evicting analyses")))
        return rc;
    if (sqlite3_changes(d->db) == 0)
        return 0;
    if ((rc = tb__db_prep(d,
                          "DELETE FROM episodes WHERE analysis_id IN "
                          "(SELECT id FROM temp.evicted_analyses)",
                          &s)) ||
        (rc = tb__db_step_done(d, s, "evicting analyses")) ||
        (rc = tb__db_prep(d,
                          "DELETE FROM analyses WHERE id IN "
                          "(SELECT id FROM temp.evicted_analyses)",
                          &s)) ||
        (rc = tb__db_step_done(d, s, "evicting analyses")))
        return rc;
    if ((rc = tb__db_prep(d,
                          "DELETE FROM windows WHERE tier_id = ?1 AND server_id = ?2 "
                          "AND width_ns IN (SELECT width_ns FROM temp.evicted_analyses) "
                          "AND width_ns NOT IN (SELECT width_ns FROM analyses "
                          "WHERE tier_id = ?1 AND server_id = ?2) "
                          "AND NOT EXISTS (SELECT 1 FROM captures WHERE ended_ns IS NULL)",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    sqlite3_bind_int64(s, 2, server);
    return tb__db_step_done(d, s, "evicting windows");
}

int tb_store_put_analysis(struct tb_store *st, const struct tb_analysis *a,
                          const struct tb_episode *ep, size_t nep, int64_t *analysis_id)
{
    struct tb__db *d = &st->d;
    char levels[8 * 32];
    sqlite3_stmt *s;
    int64_t id = 0;
    int rc;
    if ((rc = tb__db_begin(d)))
        return rc;
    /* The same question asked again replaces its answer (issue 13: an
     * identical range request used to add a row each time). */
    static const char *const replace[] = {
        "DELETE FROM episodes WHERE analysis_id IN (SELECT id FROM analyses "
        "WHERE tier_id = ?1 AND server_id = ?2 AND width_ns = ?3 AND from_ns = ?4 AND to_ns = ?5)",
        "DELETE FROM analyses WHERE tier_id = ?1 AND server_id = ?2 "
        "AND width_ns = ?3 AND from_ns = ?4 AND to_ns = ?5",
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(replace); i++) {
        if ((rc = tb__db_prep(d, replace[i], &s)))
            goto out;
        sqlite3_bind_int64(s, 1, a->tier);
        sqlite3_bind_int64(s, 2, a->server);
        sqlite3_bind_int64(s, 3, a->width_ns);
        sqlite3_bind_int64(s, 4, a->from_ns);
        sqlite3_bind_int64(s, 5, a->to_ns);
        if ((rc = tb__db_step_done(d, s, "replacing an analysis")))
            goto out;
    }
    if ((rc = tb__db_prep(d,
                          "INSERT INTO analyses(tier_id, server_id, width_ns, from_ns, to_ns, "
                          "requests, n_star, n_star_fit, tp_max, slope, work_unit_ns, "
                          "congested_fraction, episodes_per_min, levels, disagree, created_ns, "
                          "method_version, n_star_why, n_star_reason, used_ns) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                          "?15, ?16, ?17, ?18, ?19, ?16)",
                          &s)))
        goto out;
    levels_json(a, levels, sizeof levels);
    sqlite3_bind_int64(s, 1, a->tier);
    sqlite3_bind_int64(s, 2, a->server);
    sqlite3_bind_int64(s, 3, a->width_ns);
    sqlite3_bind_int64(s, 4, a->from_ns);
    sqlite3_bind_int64(s, 5, a->to_ns);
    sqlite3_bind_int64(s, 6, (int64_t)a->requests);
    bind_real(s, 7, a->n_star);
    bind_real(s, 8, a->n_star_fit);
    bind_real(s, 9, a->tp_max);
    bind_real(s, 10, a->slope);
    sqlite3_bind_int64(s, 11, a->work_unit_ns);
    bind_real(s, 12, a->congested_fraction);
    bind_real(s, 13, a->episodes_per_min);
    sqlite3_bind_text(s, 14, levels, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 15, a->disagree);
    sqlite3_bind_int64(s, 16, now_ns());
    sqlite3_bind_int64(s, 17, a->method_version);
    sqlite3_bind_int(s, 18, (int)a->n_star_why);
    sqlite3_bind_text(s, 19, a->n_star_reason, -1, SQLITE_STATIC);
    if ((rc = tb__db_step_done(d, s, "storing an analysis")))
        goto out;
    id = sqlite3_last_insert_rowid(d->db);
    for (size_t i = 0; i < nep; i++) {
        if ((rc = tb__db_prep(d,
                              "INSERT INTO episodes(analysis_id, start_ns, end_ns, peak_load, "
                              "mean_load, throughput, kind) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                              &s)))
            goto out;
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, ep[i].start_ns);
        sqlite3_bind_int64(s, 3, ep[i].end_ns);
        bind_real(s, 4, ep[i].peak_load);
        bind_real(s, 5, ep[i].mean_load);
        bind_real(s, 6, ep[i].throughput);
        sqlite3_bind_text(s, 7, ep[i].kind == TB_EP_FREEZE ? "freeze" : "saturated", -1,
                          SQLITE_STATIC);
        if ((rc = tb__db_step_done(d, s, "storing an episode")))
            goto out;
    }
    rc = evict_analyses(d, a->tier, a->server);
out:
    rc = tb__db_end(d, rc);
    if (rc == 0 && analysis_id)
        *analysis_id = id;
    return rc;
}

/* The newest analysis of the key, or with `exact` of the key and range. */
static int read_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                         bool exact, int64_t from_ns, int64_t to_ns, struct tb_analysis *a,
                         struct tb_episode **ep, size_t *nep);

int tb_store_get_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                          struct tb_analysis *a, struct tb_episode **ep, size_t *nep)
{
    return read_analysis(st, tier, server, width_ns, false, 0, 0, a, ep, nep);
}

int tb_store_find_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                           int64_t from_ns, int64_t to_ns, struct tb_analysis *a,
                           struct tb_episode **ep, size_t *nep)
{
    return read_analysis(st, tier, server, width_ns, true, from_ns, to_ns, a, ep, nep);
}

#define ANALYSIS_SELECT                                                                    \
    "SELECT id, from_ns, to_ns, requests, n_star, n_star_fit, tp_max, slope, work_unit_ns, "  \
    "congested_fraction, episodes_per_min, levels, disagree, method_version, n_star_why, "   \
    "n_star_reason FROM analyses WHERE tier_id = ?1 AND server_id = ?2 AND width_ns = ?3 "

static int fill_episode(sqlite3_stmt *s, void *elem, void *ctx)
{
    (void)ctx;
    *(struct tb_episode *)elem = (struct tb_episode){
        .start_ns = sqlite3_column_int64(s, 0),
        .end_ns = sqlite3_column_int64(s, 1),
        .peak_load = column_real(s, 2),
        .mean_load = column_real(s, 3),
        .throughput = column_real(s, 4),
        .kind = strcmp(column_str(s, 5), "freeze") == 0 ? TB_EP_FREEZE : TB_EP_SATURATED,
    };
    return 0;
}

static int read_analysis(struct tb_store *st, uint32_t tier, uint32_t server, int64_t width_ns,
                         bool exact, int64_t from_ns, int64_t to_ns, struct tb_analysis *a,
                         struct tb_episode **ep, size_t *nep)
{
    struct tb__db *d = &st->d;
    sqlite3_stmt *s;
    int64_t id;
    int rc, src;
    if (ep) {
        *ep = NULL;
        *nep = 0;
    }
    if ((rc = tb__db_prep(d,
                          exact ? ANALYSIS_SELECT "AND from_ns = ?4 AND to_ns = ?5 "
                                                  "ORDER BY id DESC LIMIT 1"
                                : ANALYSIS_SELECT "ORDER BY id DESC LIMIT 1",
                          &s)))
        return rc;
    sqlite3_bind_int64(s, 1, tier);
    sqlite3_bind_int64(s, 2, server);
    sqlite3_bind_int64(s, 3, width_ns);
    if (exact) {
        sqlite3_bind_int64(s, 4, from_ns);
        sqlite3_bind_int64(s, 5, to_ns);
    }
    src = sqlite3_step(s);
    if (src != SQLITE_ROW) {
        sqlite3_reset(s);
        return src == SQLITE_DONE ? TB_E_NOTFOUND : tb__db_fail(d, "reading an analysis");
    }
    memset(a, 0, sizeof *a);
    id = sqlite3_column_int64(s, 0);
    a->tier = tier;
    a->server = server;
    a->width_ns = width_ns;
    a->from_ns = sqlite3_column_int64(s, 1);
    a->to_ns = sqlite3_column_int64(s, 2);
    a->requests = (uint64_t)sqlite3_column_int64(s, 3);
    a->n_star = column_real(s, 4);
    a->n_star_fit = column_real(s, 5);
    a->tp_max = column_real(s, 6);
    a->slope = column_real(s, 7);
    a->work_unit_ns = sqlite3_column_int64(s, 8);
    a->congested_fraction = column_real(s, 9);
    a->episodes_per_min = column_real(s, 10);
    rc = levels_parse(column_str(s, 11), a);
    a->disagree = sqlite3_column_int(s, 12) != 0;
    a->method_version = (uint32_t)sqlite3_column_int64(s, 13);
    a->n_star_why = (enum tb_nstar_why)sqlite3_column_int(s, 14);
    snprintf(a->n_star_reason, sizeof a->n_star_reason, "%s", column_str(s, 15));
    sqlite3_reset(s);
    if (rc) {
        tb_log_error("%s: analysis %lld has unreadable levels", d->path, (long long)id);
        return rc;
    }
    /* Least recently used goes first (put_analysis): a read is a use. A
     * failure to mark it (a busy or full disk) costs nothing but order. */
    if (exact && !d->readonly &&
        tb__db_prep(d, "UPDATE analyses SET used_ns = ?2 WHERE id = ?1", &s) == 0) {
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, now_ns());
        sqlite3_step(s);
        sqlite3_reset(s);
    }
    if (!ep)
        return 0;
    return tb__db_select(d,
                         "SELECT start_ns, end_ns, peak_load, mean_load, throughput, kind "
                         "FROM episodes WHERE analysis_id = ?1 ORDER BY start_ns, id",
                         (const int64_t[]){id}, 1, sizeof **ep, fill_episode, NULL,
                         "reading episodes", ep, nep);
}

/* ---- health and events ---------------------------------------------------------------- */

static int fill_health(sqlite3_stmt *s, void *elem, void *ctx)
{
    (void)ctx;
    *(struct tb_health_row *)elem = (struct tb_health_row){
        .ts_ns = sqlite3_column_int64(s, 0),
        .packets = (uint64_t)sqlite3_column_int64(s, 1),
        .kernel_drops = (uint64_t)sqlite3_column_int64(s, 2),
        .if_drops = (uint64_t)sqlite3_column_int64(s, 3),
    };
    return 0;
}

int tb_store_get_health(struct tb_store *st, int64_t from_ns, int64_t to_ns,
                        struct tb_health_row **out, size_t *n)
{
    return tb__db_select(&st->d,
                         "SELECT ts_ns, packets, kernel_drops, if_drops FROM health "
                         "WHERE ts_ns >= ?1 AND ts_ns < ?2 ORDER BY ts_ns, capture_id",
                         (const int64_t[]){from_ns, to_ns}, 2, sizeof **out, fill_health, NULL,
                         "reading capture health", out, n);
}

static void bind_event(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_event *ev = elem;
    (void)ctx;
    /* The fixed-size fields need not be NUL-terminated when full. */
    sqlite3_bind_text(s, 1, ev->kind, (int)strnlen(ev->kind, sizeof ev->kind), SQLITE_STATIC);
    sqlite3_bind_text(s, 2, ev->host, (int)strnlen(ev->host, sizeof ev->host), SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, ev->start_ns);
    sqlite3_bind_int64(s, 4, ev->end_ns);
    sqlite3_bind_text(s, 5, ev->detail, (int)strnlen(ev->detail, sizeof ev->detail),
                      SQLITE_STATIC);
}

int tb_store_put_events(struct tb_store *st, const struct tb_event *ev, size_t n)
{
    static const struct tb__db_put put = {"INSERT INTO events(kind, host, start_ns, end_ns, "
                                          "detail) VALUES (?1, ?2, ?3, ?4, ?5)",
                                          0, "storing events", bind_event, NULL};
    return tb__db_put_all(&st->d, &put, ev, n, sizeof *ev, NULL);
}

static int fill_event(sqlite3_stmt *s, void *elem, void *ctx)
{
    struct tb_event *x = elem;
    (void)ctx;
    copy_str(x->kind, sizeof x->kind, column_str(s, 0));
    copy_str(x->host, sizeof x->host, column_str(s, 1));
    x->start_ns = sqlite3_column_int64(s, 2);
    x->end_ns = sqlite3_column_int64(s, 3);
    copy_str(x->detail, sizeof x->detail, column_str(s, 4));
    return 0;
}

int tb_store_get_events(struct tb_store *st, const char *kind, int64_t from_ns, int64_t to_ns,
                        struct tb_event **out, size_t *n)
{
    sqlite3_stmt *s;
    int rc;
    *out = NULL;
    *n = 0;
    if ((rc = tb__db_prep(&st->d,
                          kind ? "SELECT kind, host, start_ns, end_ns, detail FROM events "
                                 "WHERE kind = ?1 AND end_ns >= ?2 AND start_ns < ?3 "
                                 "ORDER BY start_ns, id"
                               : "SELECT kind, host, start_ns, end_ns, detail FROM events "
                                 "WHERE ?1 IS NULL AND end_ns >= ?2 AND start_ns < ?3 "
                                 "ORDER BY start_ns, id",
                          &s)))
        return rc;
    if (kind)
        sqlite3_bind_text(s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, from_ns);
    sqlite3_bind_int64(s, 3, to_ns);
    return tb__db_rows(&st->d, s, sizeof **out, fill_event, NULL, "reading events", out, n);
}

/* ---- for the other files of store/ (store-int.h) ------------------------------------------ */

struct tb__db *tb__store_db(struct tb_store *st)
{
    return &st->d;
}

int tb__store_endpoints(struct tb_store *st, struct tb_addr **out, size_t *n)
{
    return load_endpoints(st, out, n);
}
