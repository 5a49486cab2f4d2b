/* SPDX-License-Identifier: MIT */
/* store_url.c — --store for the reading commands: sqlite:FILE is --db FILE; a ClickHouse
 * store is copied, every sensor merged, into a temporary SQLite file that the command then
 * reads as it reads any database (docs/clickhouse.md, "Reading back").
 *
 * Copying rather than a second query path keeps one implementation of every
 * read (requests, windows, the index, the catalog) and so one answer: the
 * copy holds what the sensors stored, under a catalog rebuilt from the
 * texts, and each sensor's connection ids moved above the previous sensor's
 * so that two sensors' connection 7 stay two connections. */
#include "report_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ch.h"

struct copy {
    struct tb_catalog *cat;
    struct tb_writer *w;
    char sensor[65];
    uint64_t offset, max_conn;
    uint64_t rows;
};

/* A text of the answer as a C string, or false when it does not fit. */
static bool cstr(struct tb_ch_text t, char *buf, size_t cap)
{
    if (t.n >= cap || memchr(t.p, '\0', t.n))
        return false;
    memcpy(buf, t.p, t.n);
    buf[t.n] = '\0';
    return true;
}

static int on_row(void *ud, const struct tb_ch_row *r)
{
    struct copy *c = ud;
    char tier[TB_NAME_MAX], proto[16], server[TB_ADDR_STRLEN + 2], client[TB_ADDR_STRLEN + 2],
        sensor[65];
    struct tb_request q = {0};
    struct tb_addr sa;
    int rc;
    if (!cstr(r->sensor, sensor, sizeof sensor) || !cstr(r->tier, tier, sizeof tier) ||
        !cstr(r->proto, proto, sizeof proto) || !cstr(r->server, server, sizeof server) ||
        !cstr(r->client, client, sizeof client) || tb_addr_parse(server, &sa) ||
        tb_addr_parse(client, &q.client))
        return TB_E_BADFMT;
    if (strcmp(sensor, c->sensor)) {
        snprintf(c->sensor, sizeof c->sensor, "%s", sensor);
        c->offset = c->max_conn;
    }
    if ((rc = tb_catalog_tier(c->cat, tier, proto, &q.tier)) ||
        (rc = tb_catalog_server(c->cat, q.tier, &sa, &q.server)) ||
        (rc = tb_catalog_class(c->cat, q.tier, r->cls.p, r->cls.n, &q.class_id)))
        return rc;
    q.conn = r->conn + c->offset;
    c->max_conn = TB_MAX(c->max_conn, q.conn);
    q.arrival_ns = r->arrival_ns;
    q.departure_ns = r->departure_ns;
    q.req_bytes = r->req_bytes;
    q.resp_bytes = r->resp_bytes;
    q.status = r->status;
    q.flags = r->flags;
    c->rows++;
    return tb_writer_request(c->w, &q);
}

static int on_host(void *ud, struct tb_ch_text t, struct tb_ch_text a)
{
    struct copy *c = ud;
    char tier[TB_NAME_MAX], addr[TB_ADDR_STRLEN + 2];
    struct tb_addr h;
    uint32_t tid;
    if (!cstr(t, tier, sizeof tier) || !cstr(a, addr, sizeof addr) || tb_addr_parse(addr, &h))
        return TB_E_BADFMT;
    /* A host of a tier none of whose requests were stored names nothing here. */
    if (tb_catalog_tier_find(c->cat, tier, &tid))
        return 0;
    return tb_catalog_host(c->cat, tid, &h);
}

/* Copies the ClickHouse store into the new SQLite file at path. */
static int copy_store(const char *url, const char *path)
{
    struct tb_store_url u;
    struct tb_ch *ch = NULL;
    struct tb_store *st = NULL;
    struct copy c = {0};
    int64_t capture_id = 0;
    char err[600] = "";
    int rc = tb_store_url_parse(url, &u, err, sizeof err);
    if (!rc)
        rc = tb_ch_open(&ch, &u, "reader", false, err, sizeof err);
    if (rc) {
        tb_log_error("%s", err);
        return rc;
    }
    if ((rc = tb_store_open(&st, path, TB_STORE_CREATE, err, sizeof err)) ||
        (rc = tb_catalog_new(&c.cat)) ||
        (rc = tb_store_capture_begin(st, url, &capture_id)) ||
        (rc = tb_writer_start_opts(&c.w, st, capture_id, &(struct tb_writer_opts){.bulk = true})) ||
        (rc = tb_writer_catalog(c.w, c.cat)))
        goto out;
    rc = tb_ch_scan(ch, on_row, &c);
    int wrc = tb_writer_finish(c.w);
    c.w = NULL;
    if (!rc)
        rc = wrc;
    if (!rc)
        rc = tb_ch_scan_hosts(ch, on_host, &c);
    if (!rc)
        rc = tb_store_put_catalog(st, c.cat);
    if (!rc)
        rc = tb_store_capture_end(st, capture_id, NULL);
out:
    if (rc == TB_E_BADFMT && !tb_ch_error(ch)[0])
        tb_log_error("%s: a stored text is not an address, or too long for a name", url);
    else if (rc)
        tb_log_error("%s: %s", url, tb_ch_error(ch)[0] ? tb_ch_error(ch)
                                                       : (err[0] ? err : tb_strerror(rc)));
    if (c.w)
        tb_writer_finish(c.w);
    tb_catalog_free(c.cat);
    tb_store_close(st);
    tb_ch_close(ch);
    return rc;
}

static void remove_copy(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[4200];
    for (size_t i = 0; i < TB_ARRAY_SIZE(sfx); i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

int tb_cli_db_open_store(struct tb_cli_db *db, const char *path, const char *store,
                         bool readonly)
{
    struct tb_store_url u;
    char err[600];
    if (!store)
        return tb_cli_db_open(db, path, readonly);
    if (tb_store_url_parse(store, &u, err, sizeof err)) {
        tb_log_error("%s", err);
        return TB_EXIT_USAGE;
    }
    if (u.kind == TB_STORE_KIND_SQLITE)
        return tb_cli_db_open(db, u.path, readonly);
    const char *dir = getenv("TMPDIR");
    char *tmp = malloc(4096);
    if (!tmp)
        return TB_EXIT_FAIL;
    snprintf(tmp, 4096, "%s/tbneck-clickhouse-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tb_log_error("%s: cannot create a temporary copy in %s", store,
                     dir && *dir ? dir : "/tmp");
        free(tmp);
        return TB_EXIT_FAIL;
    }
    close(fd);
    int rc = copy_store(store, tmp);
    if (rc) {
        remove_copy(tmp);
        free(tmp);
        return rc == TB_E_UNSUPP ? TB_EXIT_USAGE : TB_EXIT_FAIL;
    }
    if ((rc = tb_cli_db_open(db, tmp, readonly))) {
        remove_copy(tmp);
        free(tmp);
        return rc;
    }
    db->tmp = tmp;
    return 0;
}

void tb_cli_db_remove_copy(struct tb_cli_db *db)
{
    if (db->tmp) {
        remove_copy(db->tmp);
        free(db->tmp);
        db->tmp = NULL;
    }
}
