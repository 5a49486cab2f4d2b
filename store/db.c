/* SPDX-License-Identifier: MIT */
/* db.c — one SQLite connection: pragmas, cached statements, and the writes shared by the store
 * and the writer thread (catalog entries, windows, health rows). */
#include "store-int.h"

#include <stdlib.h>
#include <string.h>

/* Long enough to ride out a checkpoint or another process's batch commit,
 * short enough that a stuck lock is reported rather than hanging a capture. */
#define BUSY_TIMEOUT_MS 10000

static const char *const stmt_sql[TB__SQ_COUNT] = {
    [TB__SQ_TIER_INS] = "INSERT INTO tiers(id, name, proto, configured) VALUES (?1, ?2, ?3, ?4)",
    [TB__SQ_SERVER_INS] = "INSERT INTO servers(id, tier_id, addr) VALUES (?1, ?2, ?3)",
    [TB__SQ_HOST_INS] = "INSERT INTO hosts(id, tier_id, addr) VALUES (?1, ?2, ?3)",
    [TB__SQ_CLASS_INS] = "INSERT INTO classes(id, tier_id, fingerprint) VALUES (?1, ?2, ?3)",
    [TB__SQ_ENDPOINT_GET] = "SELECT id FROM endpoints WHERE addr = ?1",
    [TB__SQ_ENDPOINT_INS] = "INSERT INTO endpoints(addr) VALUES (?1)",
    [TB__SQ_REQUEST_INS] =
        "INSERT INTO requests(capture_id, tier_id, server_id, client_id, client_port, conn, "
        "class_id, arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [TB__SQ_NEXT_CONN_SET] =
        "UPDATE meta SET value = ?1 WHERE key = 'next_conn' AND value < ?1",
    [TB__SQ_WINDOW_DEL] = "DELETE FROM windows WHERE tier_id = ?1 AND server_id = ?2 "
                          "AND width_ns = ?3 AND start_ns BETWEEN ?4 AND ?5",
    [TB__SQ_WINDOW_INS] =
        "INSERT OR REPLACE INTO windows(tier_id, server_id, width_ns, start_ns, load, "
        "completions, work_units, throughput, norm_throughput, rt_mean_ns, rt_p95_ns) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [TB__SQ_HEALTH_INS] = "INSERT OR REPLACE INTO health(capture_id, ts_ns, packets, "
                          "kernel_drops, if_drops) VALUES (?1, ?2, ?3, ?4, ?5)",
    /* A running capture's row follows its health, so that a reader (the
     * dashboard's captures table) sees counters that move; the end of the
     * capture writes the final figures. */
    [TB__SQ_CAPTURE_RUNNING] = "UPDATE captures SET packets = ?2, kernel_drops = ?3, "
                               "if_drops = ?4, requests = ?5 WHERE id = ?1 AND ended_ns IS NULL",
    /* A connection is reported when it opens and again when it ends. */
    [TB__SQ_CONN_PUT] =
        "INSERT OR REPLACE INTO connections(conn, capture_id, client, server, tier_id, "
        "server_id, open_ns, close_ns, opened, closed, requests, packets, bytes_c2s, bytes_s2c) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
};

const char *tb__ip_fmt(const struct tb_addr *a, char *buf, size_t len)
{
    struct tb_addr ip = *a;
    ip.port = 0;
    return tb_addr_fmt(&ip, buf, len);
}

int tb__db_open(struct tb__db *d, const char *path, int sqlite_flags, char *errbuf,
                size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->readonly = (sqlite_flags & SQLITE_OPEN_READONLY) != 0;
    d->path = strdup(path);
    if (!d->path)
        return TB_E_NOMEM;
    /* NOMUTEX: each connection is used by one thread at a time (the store's
     * by its caller, the writer's by the writer thread). */
    int src = sqlite3_open_v2(path, &d->db, sqlite_flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (src != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s: cannot open: %s", path,
                 d->db ? sqlite3_errmsg(d->db) : sqlite3_errstr(src));
        tb__db_close(d);
        return src == SQLITE_NOMEM ? TB_E_NOMEM : TB_E_IO;
    }
    sqlite3_busy_timeout(d->db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(d->db, 1);
    return 0;
}

void tb__db_close(struct tb__db *d)
{
    for (size_t i = 0; i < TB__SQ_COUNT; i++)
        sqlite3_finalize(d->stmt[i]);
    for (size_t i = 0; i < TB__DB_CACHE; i++)
        sqlite3_finalize(d->cache[i].stmt);
    if (d->db)
        sqlite3_close_v2(d->db);
    free(d->path);
    memset(d, 0, sizeof *d);
}

int tb__db_fail(struct tb__db *d, const char *what)
{
    tb_log_error("%s: %s: %s", d->path, what, sqlite3_errmsg(d->db));
    /* A full disk is worth telling apart: the capture says what it lost. */
    return (sqlite3_errcode(d->db) & 0xff) == SQLITE_FULL ? TB_E_FULL : TB_E_DB;
}

int tb__db_stmt(struct tb__db *d, enum tb__stmt_id id, sqlite3_stmt **out)
{
    sqlite3_stmt *s = d->stmt[id];
    if (!s) {
        if (sqlite3_prepare_v3(d->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) !=
            SQLITE_OK)
            return tb__db_fail(d, "preparing a statement");
        d->stmt[id] = s;
    } else {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    *out = s;
    return 0;
}

int tb__db_prep(struct tb__db *d, const char *sql, sqlite3_stmt **out)
{
    size_t free_slot = TB__DB_CACHE;
    for (size_t i = 0; i < TB__DB_CACHE; i++) {
        if (d->cache[i].sql == sql) {
            sqlite3_reset(d->cache[i].stmt);
            sqlite3_clear_bindings(d->cache[i].stmt);
            *out = d->cache[i].stmt;
            return 0;
        }
        if (!d->cache[i].sql && free_slot == TB__DB_CACHE)
            free_slot = i;
    }
    sqlite3_stmt *s;
    if (sqlite3_prepare_v3(d->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        return tb__db_fail(d, "preparing a statement");
    /* The module has fewer distinct statements than slots; should that ever
     * change, the first slot is recycled rather than failing. */
    if (free_slot == TB__DB_CACHE) {
        sqlite3_finalize(d->cache[0].stmt);
        free_slot = 0;
    }
    d->cache[free_slot] = (struct tb__db_cached){sql, s};
    *out = s;
    return 0;
}

int tb__db_begin(struct tb__db *d)
{
    /* IMMEDIATE takes the write lock now, under the busy timeout, instead of
     * failing with SQLITE_BUSY half-way through the transaction. */
    return tb__db_exec(d, "BEGIN IMMEDIATE");
}

int tb__db_end(struct tb__db *d, int rc)
{
    if (rc == 0 && (rc = tb__db_exec(d, "COMMIT")) == 0)
        return 0;
    sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int tb__db_exec(struct tb__db *d, const char *sql)
{
    if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return tb__db_fail(d, sql);
    return 0;
}

int tb__db_read_index(struct tb__db *d)
{
    sqlite3_stmt *s;
    int rc;
    /* SQLite's sorter keeps as much in memory as the page cache may hold
     * (at least 250 pages) and spills the rest to temporary files it merges
     * back: at the default 2 MiB, 160 000 rows of a real capture spilled,
     * which cost more than the sort itself (SorterWrite 1 430 instructions a
     * row against 300 when it all fits). 64 MiB sorts about 1.5 M rows in
     * one pass, and only for this statement. */
    int64_t cache = -2000; /* SQLite's default, unless the connection says otherwise */
    if (tb__db_prep(d, "PRAGMA cache_size", &s) == 0) {
        if (sqlite3_step(s) == SQLITE_ROW)
            cache = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
    }
    char restore[64];
    snprintf(restore, sizeof restore, "PRAGMA cache_size = %lld", (long long)cache);
    if ((rc = tb__db_exec(d, "PRAGMA cache_size = -65536")))
        return rc;
    rc = tb__db_exec(d, "CREATE INDEX IF NOT EXISTS requests_tier_arrival "
                        "ON requests(tier_id, arrival_ns)");
    int rc2 = tb__db_exec(d, restore);
    return rc ? rc : rc2;
}

int tb__db_step_done(struct tb__db *d, sqlite3_stmt *s, const char *what)
{
    int src = sqlite3_step(s);
    sqlite3_reset(s);
    if (src != SQLITE_DONE)
        return tb__db_fail(d, what);
    return 0;
}

int tb__db_rows(struct tb__db *d, sqlite3_stmt *s, size_t size, tb__db_fill_fn fill, void *ctx,
                const char *what, void *out, size_t *n)
{
    char *v = NULL;
    size_t nv = 0, cap = 0;
    int rc = 0, src;
    while ((src = sqlite3_step(s)) == SQLITE_ROW) {
        if ((rc = tb_grow(&v, &cap, nv + 1, size)))
            break;
        char *e = v + nv++ * size;
        memset(e, 0, size);
        if ((rc = fill(s, e, ctx)))
            break;
    }
    if (rc == 0 && src != SQLITE_DONE)
        rc = tb__db_fail(d, what);
    sqlite3_reset(s);
    if (rc) {
        free(v);
        return rc;
    }
    *(void **)out = v;
    *n = nv;
    return 0;
}

int tb__db_select(struct tb__db *d, const char *sql, const int64_t *args, int nargs, size_t size,
                  tb__db_fill_fn fill, void *ctx, const char *what, void *out, size_t *n)
{
    sqlite3_stmt *s;
    *(void **)out = NULL;
    *n = 0;
    int rc = tb__db_prep(d, sql, &s);
    if (rc)
        return rc;
    for (int i = 0; i < nargs; i++)
        sqlite3_bind_int64(s, i + 1, args[i]);
    return tb__db_rows(d, s, size, fill, ctx, what, out, n);
}

int tb__db_put_rows(struct tb__db *d, const struct tb__db_put *p, const void *elems, size_t n,
                    size_t size, const void *ctx)
{
    sqlite3_stmt *s;
    int rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = p->sql ? tb__db_prep(d, p->sql, &s) : tb__db_stmt(d, p->id, &s)))
            return rc;
        p->bind(s, (const char *)elems + i * size, ctx);
        if (sqlite3_step(s) != SQLITE_DONE) {
            /* The error is read before the reset (which keeps it). */
            rc = p->fail ? p->fail(d, p->what) : tb__db_fail(d, p->what);
            sqlite3_reset(s);
            return rc;
        }
        sqlite3_reset(s);
    }
    return 0;
}

int tb__db_put_all(struct tb__db *d, const struct tb__db_put *p, const void *elems, size_t n,
                   size_t size, const void *ctx)
{
    int rc;
    if (n == 0)
        return 0;
    if ((rc = tb__db_begin(d)))
        return rc;
    return tb__db_end(d, tb__db_put_rows(d, p, elems, n, size, ctx));
}

/* ---- catalog deltas --------------------------------------------------------------------- */

int tb__cat_delta_take(struct tb__cat_delta *dl, struct tb_catalog *cat)
{
    const struct tb_catalog_marks *p = tb_catalog_persisted(cat);
    struct tb_catalog_marks now;
    int rc;
    tb_catalog_marks_get(cat, &now);
    if (now.tiers == p->tiers && now.servers == p->servers && now.classes == p->classes &&
        now.hosts == p->hosts)
        return 0;
    for (uint32_t id = p->tiers + 1; id <= now.tiers; id++) {
        if ((rc = tb_grow(&dl->tiers, &dl->cap_tiers, dl->ntiers + 1, sizeof *dl->tiers)))
            return rc;
        dl->tiers[dl->ntiers++] = *tb_catalog_tier_get(cat, id);
    }
    for (uint32_t id = p->servers + 1; id <= now.servers; id++) {
        if ((rc = tb_grow(&dl->servers, &dl->cap_servers, dl->nservers + 1,
                           sizeof *dl->servers)))
            return rc;
        dl->servers[dl->nservers++] = *tb_catalog_server_get(cat, id);
    }
    for (uint32_t id = p->classes + 1; id <= now.classes; id++) {
        const struct tb_class_info *c = tb_catalog_class_get(cat, id);
        size_t len = strlen(c->text);
        if ((rc = tb_grow(&dl->classes, &dl->cap_classes, dl->nclasses + 1,
                           sizeof *dl->classes)) ||
            (rc = tb_grow(&dl->text, &dl->cap_text, dl->ntext + len, 1)))
            return rc;
        if (len)
            memcpy(dl->text + dl->ntext, c->text, len);
        dl->classes[dl->nclasses++] =
            (struct tb__cat_class){.id = id, .tier = c->tier, .off = dl->ntext, .len = len};
        dl->ntext += len;
    }
    for (uint32_t i = p->hosts; i < now.hosts; i++) {
        struct tb__cat_host h = {.index = i};
        if ((rc = tb_grow(&dl->hosts, &dl->cap_hosts, dl->nhosts + 1, sizeof *dl->hosts)))
            return rc;
        if ((rc = tb_catalog_host_at(cat, i, &h.tier, &h.addr)))
            return rc;
        dl->hosts[dl->nhosts++] = h;
    }
    tb_catalog_mark_persisted(cat);
    return 0;
}

bool tb__cat_delta_empty(const struct tb__cat_delta *dl)
{
    return dl->ntiers == 0 && dl->nservers == 0 && dl->nclasses == 0 && dl->nhosts == 0;
}

void tb__cat_delta_clear(struct tb__cat_delta *dl)
{
    dl->ntiers = dl->nservers = dl->nclasses = dl->nhosts = dl->ntext = 0;
}

void tb__cat_delta_free(struct tb__cat_delta *dl)
{
    free(dl->tiers);
    free(dl->servers);
    free(dl->classes);
    free(dl->hosts);
    free(dl->text);
    memset(dl, 0, sizeof *dl);
}

/* Ids are the catalog's, not SQLite's: a clash means the catalog was not
 * loaded from this database before capturing into it. */
static int catalog_fail(struct tb__db *d, const char *what)
{
    int ext = sqlite3_extended_errcode(d->db);
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
        tb_log_error("%s: %s: the id is taken (was the catalog loaded from this database?)",
                     d->path, what);
        return TB_E_INVAL;
    }
    return tb__db_fail(d, what);
}

static void bind_tier(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_tier_info *t = elem;
    (void)ctx;
    sqlite3_bind_int64(s, 1, t->id);
    sqlite3_bind_text(s, 2, t->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, t->proto, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, t->configured);
}

static void bind_server(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_server_info *sv = elem;
    char buf[TB_ADDR_STRLEN];
    (void)ctx;
    sqlite3_bind_int64(s, 1, sv->id);
    sqlite3_bind_int64(s, 2, sv->tier);
    sqlite3_bind_text(s, 3, tb_addr_fmt(&sv->addr, buf, sizeof buf), -1, SQLITE_TRANSIENT);
}

static void bind_host(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb__cat_host *h = elem;
    char buf[TB_ADDR_STRLEN];
    (void)ctx;
    sqlite3_bind_int64(s, 1, (int64_t)h->index + 1);
    sqlite3_bind_int64(s, 2, h->tier);
    sqlite3_bind_text(s, 3, tb__ip_fmt(&h->addr, buf, sizeof buf), -1, SQLITE_TRANSIENT);
}

static void bind_class(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb__cat_class *c = elem;
    const char *text = ctx;
    sqlite3_bind_int64(s, 1, c->id);
    sqlite3_bind_int64(s, 2, c->tier);
    /* A zero-length text is bound from a non-NULL pointer: SQLite would
     * store NULL for a NULL pointer, and fingerprint is NOT NULL. */
    sqlite3_bind_text(s, 3, c->len ? text + c->off : "", (int)c->len, SQLITE_STATIC);
}

int tb__put_catalog(struct tb__db *d, const struct tb__cat_delta *dl)
{
    static const struct tb__db_put tiers = {NULL, TB__SQ_TIER_INS, "storing a tier", bind_tier,
                                            catalog_fail};
    static const struct tb__db_put servers = {NULL, TB__SQ_SERVER_INS, "storing a server",
                                              bind_server, catalog_fail};
    static const struct tb__db_put hosts = {NULL, TB__SQ_HOST_INS, "storing a host", bind_host,
                                            catalog_fail};
    static const struct tb__db_put classes = {NULL, TB__SQ_CLASS_INS, "storing a request class",
                                              bind_class, catalog_fail};
    int rc;
    if ((rc = tb__db_put_rows(d, &tiers, dl->tiers, dl->ntiers, sizeof *dl->tiers, NULL)) ||
        (rc = tb__db_put_rows(d, &servers, dl->servers, dl->nservers, sizeof *dl->servers,
                              NULL)) ||
        (rc = tb__db_put_rows(d, &hosts, dl->hosts, dl->nhosts, sizeof *dl->hosts, NULL)))
        return rc;
    return tb__db_put_rows(d, &classes, dl->classes, dl->nclasses, sizeof *dl->classes,
                           dl->text);
}

/* ---- windows and health ----------------------------------------------------------------- */

static void bind_window(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_window *w = elem;
    (void)ctx;
    sqlite3_bind_int64(s, 1, w->tier);
    sqlite3_bind_int64(s, 2, w->server);
    sqlite3_bind_int64(s, 3, w->width_ns);
    sqlite3_bind_int64(s, 4, w->start_ns);
    sqlite3_bind_double(s, 5, w->load);
    sqlite3_bind_int64(s, 6, w->completions);
    sqlite3_bind_double(s, 7, w->work_units);
    sqlite3_bind_double(s, 8, w->throughput);
    sqlite3_bind_double(s, 9, w->norm_throughput);
    sqlite3_bind_double(s, 10, w->rt_mean_ns);
    sqlite3_bind_double(s, 11, w->rt_p95_ns);
}

static const struct tb__db_put put_window = {NULL, TB__SQ_WINDOW_INS, "storing windows",
                                             bind_window, NULL};

struct win_group {
    uint32_t tier, server;
    int64_t width_ns, lo, hi;
};

int tb__put_windows(struct tb__db *d, const struct tb_window *w, size_t n)
{
    struct win_group *g = NULL;
    size_t ng = 0, capg = 0, last = 0;
    sqlite3_stmt *s;
    int rc = 0;
    /* Deleting each group's covered range first drops stale windows that the
     * new run leaves out (an empty window is not necessarily re-emitted). */
    for (size_t i = 0; i < n; i++) {
        size_t j = last;
        if (!(j < ng && g[j].tier == w[i].tier && g[j].server == w[i].server &&
              g[j].width_ns == w[i].width_ns)) {
            for (j = 0; j < ng; j++)
                if (g[j].tier == w[i].tier && g[j].server == w[i].server &&
                    g[j].width_ns == w[i].width_ns)
                    break;
            if (j == ng) {
                if ((rc = tb_grow(&g, &capg, ng + 1, sizeof *g)))
                    goto out;
                g[ng++] = (struct win_group){w[i].tier, w[i].server, w[i].width_ns,
                                             w[i].start_ns, w[i].start_ns};
            }
        }
        last = j;
        g[j].lo = TB_MIN(g[j].lo, w[i].start_ns);
        g[j].hi = TB_MAX(g[j].hi, w[i].start_ns);
    }
    for (size_t j = 0; j < ng; j++) {
        if ((rc = tb__db_stmt(d, TB__SQ_WINDOW_DEL, &s)))
            goto out;
        sqlite3_bind_int64(s, 1, g[j].tier);
        sqlite3_bind_int64(s, 2, g[j].server);
        sqlite3_bind_int64(s, 3, g[j].width_ns);
        sqlite3_bind_int64(s, 4, g[j].lo);
        sqlite3_bind_int64(s, 5, g[j].hi);
        if ((rc = tb__db_step_done(d, s, "replacing windows")))
            goto out;
    }
    rc = tb__db_put_rows(d, &put_window, w, n, sizeof *w, NULL);
out:
    free(g);
    return rc;
}

int tb__put_capture_running(struct tb__db *d, int64_t capture_id, const struct tb_health_row *h,
                            uint64_t requests)
{
    sqlite3_stmt *s;
    int rc = tb__db_stmt(d, TB__SQ_CAPTURE_RUNNING, &s);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, capture_id);
    sqlite3_bind_int64(s, 2, (int64_t)h->packets);
    sqlite3_bind_int64(s, 3, (int64_t)h->kernel_drops);
    sqlite3_bind_int64(s, 4, (int64_t)h->if_drops);
    sqlite3_bind_int64(s, 5, (int64_t)requests);
    return tb__db_step_done(d, s, "updating the running capture");
}

static void bind_health(sqlite3_stmt *s, const void *elem, const void *ctx)
{
    const struct tb_health_row *h = elem;
    sqlite3_bind_int64(s, 1, *(const int64_t *)ctx);
    sqlite3_bind_int64(s, 2, h->ts_ns);
    sqlite3_bind_int64(s, 3, (int64_t)h->packets);
    sqlite3_bind_int64(s, 4, (int64_t)h->kernel_drops);
    sqlite3_bind_int64(s, 5, (int64_t)h->if_drops);
}

int tb__put_health(struct tb__db *d, int64_t capture_id, const struct tb_health_row *h,
                   size_t n)
{
    static const struct tb__db_put put = {NULL, TB__SQ_HEALTH_INS, "storing capture health",
                                          bind_health, NULL};
    return tb__db_put_rows(d, &put, h, n, sizeof *h, &capture_id);
}
