/* SPDX-License-Identifier: MIT */
/* store_url.c — --store for the reading commands: sqlite:FILE is --db FILE; a ClickHouse
 * store is copied, every sensor merged, into a temporary SQLite file that the command then
 * reads as it reads any database (docs/clickhouse.md, "Reading back").
 *
 * Copying rather than a second query path keeps one implementation of every
 * read (requests, windows, the index, the catalog) and so one answer: the
 * copy holds what the sensors stored, under a catalog rebuilt from the
 * texts, and connections numbered anew in the order they opened, over all
 * sensors: the order in which one sensor that saw everything would have
 * numbered them (two sensors' connection 7 are two connections). */
#include "report_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ch.h"
#include "util.h"

struct sensor_map {
    char name[65];
    uint64_t *conn; /* its conn id -> the copy's (0: none yet) */
    uint64_t max_conn;
};

struct copy {
    struct tb_catalog *cat;
    struct tb_writer *w;
    struct sensor_map *sensors;
    size_t nsensors, cap;
    uint64_t next; /* the copy's next conn id */
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

static int on_sensor(void *ud, struct tb_ch_text name, uint64_t max_conn)
{
    struct copy *c = ud;
    int rc = tb_grow(&c->sensors, &c->cap, c->nsensors + 1, sizeof *c->sensors);
    if (rc)
        return rc;
    struct sensor_map *s = &c->sensors[c->nsensors];
    memset(s, 0, sizeof *s);
    if (!cstr(name, s->name, sizeof s->name) || max_conn >= (1u << 30))
        return TB_E_BADFMT;
    s->conn = calloc(max_conn + 1, sizeof *s->conn);
    if (!s->conn)
        return TB_E_NOMEM;
    s->max_conn = max_conn;
    c->nsensors++;
    return 0;
}

/* The copy's id of a sensor's connection, handed out on first sight. */
static int map_conn(struct copy *c, const char *sensor, uint64_t conn, uint64_t *out)
{
    for (size_t i = 0; i < c->nsensors; i++) {
        struct sensor_map *s = &c->sensors[i];
        if (strcmp(s->name, sensor))
            continue;
        if (conn > s->max_conn)
            return TB_E_BADFMT;
        if (!s->conn[conn])
            s->conn[conn] = ++c->next;
        *out = s->conn[conn];
        return 0;
    }
    return TB_E_BADFMT;
}

static int on_conn(void *ud, const struct tb_ch_conn_row *r)
{
    struct copy *c = ud;
    char sensor[65], tier[TB_NAME_MAX], proto[16], client[TB_ADDR_STRLEN + 2],
        server[TB_ADDR_STRLEN + 2], saddr[TB_ADDR_STRLEN + 2];
    struct tb_conn k = r->c;
    int rc;
    if (!cstr(r->sensor, sensor, sizeof sensor) || !cstr(r->tier, tier, sizeof tier) ||
        !cstr(r->proto, proto, sizeof proto) || !cstr(r->client, client, sizeof client) ||
        !cstr(r->server, server, sizeof server) ||
        !cstr(r->server_addr, saddr, sizeof saddr) || tb_addr_parse(client, &k.client) ||
        tb_addr_parse(server, &k.server) || map_conn(c, sensor, r->c.conn, &k.conn))
        return TB_E_BADFMT;
    k.tier = k.server_id = 0;
    if (tier[0] && (rc = tb_catalog_tier(c->cat, tier, proto, &k.tier)))
        return rc;
    if (k.tier && saddr[0]) {
        struct tb_addr sa;
        if (tb_addr_parse(saddr, &sa))
            return TB_E_BADFMT;
        if ((rc = tb_catalog_server(c->cat, k.tier, &sa, &k.server_id)))
            return rc;
    }
    return tb_writer_conn(c->w, &k);
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
        tb_addr_parse(client, &q.client) || map_conn(c, sensor, r->conn, &q.conn))
        return TB_E_BADFMT;
    if ((rc = tb_catalog_tier(c->cat, tier, proto, &q.tier)) ||
        (rc = tb_catalog_server(c->cat, q.tier, &sa, &q.server)) ||
        (rc = tb_catalog_class(c->cat, q.tier, r->cls.p, r->cls.n, &q.class_id)))
        return rc;
    q.arrival_ns = r->arrival_ns;
    q.departure_ns = r->departure_ns;
    q.req_bytes = r->req_bytes;
    q.resp_bytes = r->resp_bytes;
    q.status = r->status;
    q.flags = r->flags;
    c->rows++;
    return tb_writer_request(c->w, &q);
}

static int on_server(void *ud, struct tb_ch_text t, struct tb_ch_text p, struct tb_ch_text s)
{
    struct copy *c = ud;
    char tier[TB_NAME_MAX], proto[16], addr[TB_ADDR_STRLEN + 2];
    struct tb_addr a;
    uint32_t tid, sid;
    int rc;
    if (!cstr(t, tier, sizeof tier) || !cstr(p, proto, sizeof proto) ||
        !cstr(s, addr, sizeof addr) || tb_addr_parse(addr, &a))
        return TB_E_BADFMT;
    if ((rc = tb_catalog_tier(c->cat, tier, proto, &tid)))
        return rc;
    return tb_catalog_server(c->cat, tid, &a, &sid);
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
        rc = tb_ch_open(&ch, &u, "reader", false, 0, err, sizeof err);
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
    /* Tiers and servers first, in the order of their first request, so
     * that catalog ids (the order of some listings) are those one sensor
     * that saw everything would have given. */
    rc = tb_ch_scan_sensors(ch, on_sensor, &c);
    if (!rc)
        rc = tb_ch_scan_servers(ch, on_server, &c);
    if (!rc)
        rc = tb_ch_scan_conns(ch, on_conn, &c);
    if (!rc)
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
    for (size_t i = 0; i < c.nsensors; i++)
        free(c.sensors[i].conn);
    free(c.sensors);
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
