/* SPDX-License-Identifier: MIT */
/* test_store.c — opening, versions and migration, and the round trip of every store table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "capture.h"
#include "catalog.h"
#include "store.h"

struct fix {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tb_test_store_XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    char p[160];
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/other", f->dir);
    unlink(p);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *s;
    int64_t v = -12345;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static struct tb_store *open_new(const char *path)
{
    struct tb_store *st = NULL;
    char err[256] = "";
    int rc = tb_store_open(&st, path, TB_STORE_CREATE, err, sizeof err);
    if (rc)
        fail_msg("open %s: %d %s", path, rc, err);
    return st;
}

static struct tb_addr addr(const char *s)
{
    struct tb_addr a;
    assert_int_equal(tb_addr_parse(s, &a), 0);
    return a;
}

/* ---- open, versions, migration ---------------------------------------------------------- */

static void test_open_errors(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = (struct tb_store *)1;
    char err[256], want[512];

    /* Missing file: read-only and read-write without CREATE. */
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err),
                     TB_E_NOTFOUND);
    assert_null(st);
    snprintf(want, sizeof want, "%s: No such file or directory", f->path);
    assert_string_equal(err, want);
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_NOTFOUND);
    assert_int_equal(access(f->path, F_OK), -1); /* and nothing was created */

    /* A text file. */
    FILE *fp = fopen(f->path, "w");
    for (int i = 0; i < 200; i++)
        fputs("this is not an SQLite database, only text\n", fp);
    fclose(fp);
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_BADFMT);
    snprintf(want, sizeof want, "%s: not a tbneck database (not an SQLite file)", f->path);
    assert_string_equal(err, want);
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err),
                     TB_E_BADFMT);
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_CREATE, err, sizeof err),
                     TB_E_BADFMT);
    unlink(f->path);

    /* An empty file is not a database unless we may create one. */
    fp = fopen(f->path, "w");
    fclose(fp);
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_BADFMT);
    snprintf(want, sizeof want, "%s: empty file, not a tbneck database", f->path);
    assert_string_equal(err, want);
    unlink(f->path);

    /* Another program's SQLite database. */
    raw_exec(f->path, "CREATE TABLE moz_places(id INTEGER PRIMARY KEY, url TEXT)");
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_CREATE, err, sizeof err),
                     TB_E_BADFMT);
    snprintf(want, sizeof want, "%s: an SQLite database but not a tbneck one (no meta table)",
             f->path);
    assert_string_equal(err, want);
    raw_exec(f->path, "CREATE TABLE meta(key TEXT, value); INSERT INTO meta VALUES('app','x')");
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_BADFMT);
    snprintf(want, sizeof want,
             "%s: an SQLite database but not a tbneck one (meta.app is not 'tbneck')", f->path);
    assert_string_equal(err, want);
    unlink(f->path);

    /* A tbneck database whose meta page (page 2, the first table created) was
     * overwritten: damaged, not "cannot read". */
    tb_store_close(open_new(f->path));
    fp = fopen(f->path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 16384, SEEK_SET), 0); /* page size 16 KiB */
    for (int i = 0; i < 4096; i++)
        putc(0xab, fp);
    fclose(fp);
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_BADFMT);
    snprintf(want, sizeof want, "%s: damaged database file (SQLite: ", f->path);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
    unlink(f->path);

    /* Contradictory flags. */
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_CREATE | TB_STORE_READONLY, err,
                                   sizeof err),
                     TB_E_INVAL);
}

static void test_create_and_newer(void **state)
{
    struct fix *f = *state;
    struct tb_store *st;
    char err[256], want[512];

    st = open_new(f->path);
    assert_string_equal(tb_store_path(st), f->path);
    tb_store_close(st);
    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), TB_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
                     TB_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                      "AND name IN ('meta','captures','tiers','servers','hosts',"
                                      "'classes','endpoints','requests','windows','service_times',"
                                      "'analyses','episodes','health','events')"),
                     14);
    /* No request index until a capture ends or someone reads. */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                                      "AND tbl_name = 'requests'"),
                     0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM pragma_journal_mode "
                                      "WHERE journal_mode = 'wal'"),
                     1);
    /* Reopening an up-to-date file, read-write and read-only. */
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), 0);
    tb_store_close(st);
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err), 0);
    uint64_t n = 99;
    assert_int_equal(tb_store_request_count(st, 0, &n), 0);
    assert_int_equal(n, 0);
    tb_store_close(st);

    /* A newer build's file, by user_version alone, then by meta alone. */
    raw_exec(f->path, "PRAGMA user_version = 99");
    st = (struct tb_store *)1;
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_DBVER);
    assert_null(st);
    snprintf(want, sizeof want, "%s: written by a newer tbneck (schema 99, this build knows %d)",
             f->path, TB_STORE_SCHEMA_VERSION);
    assert_string_equal(err, want);
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err),
                     TB_E_DBVER);
    assert_string_equal(err, want);
    raw_exec(f->path, "PRAGMA user_version = 2; "
                      "UPDATE meta SET value = 42 WHERE key = 'schema_version'");
    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), TB_E_DBVER);
    snprintf(want, sizeof want, "%s: written by a newer tbneck (schema 42, this build knows %d)",
             f->path, TB_STORE_SCHEMA_VERSION);
    assert_string_equal(err, want);
    /* The file was not touched by the refused opens. */
    assert_int_equal(raw_int(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"), 42);
}

/* The schema of version 1 as released, written by hand: if a later edit of
 * migration step 1 changes what old files look like, this test notices. */
static const char v1_sql[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('app','tbneck'),('next_conn',43),('created_ns',1),"
    "  ('schema_version',1);"
    "CREATE TABLE captures (id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
    "  started_ns INTEGER NOT NULL, ended_ns INTEGER, link_type INTEGER,"
    "  packets INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,"
    "  truncated INTEGER NOT NULL DEFAULT 0, non_ip INTEGER NOT NULL DEFAULT 0,"
    "  non_tcp INTEGER NOT NULL DEFAULT 0, ip_fragments INTEGER NOT NULL DEFAULT 0,"
    "  decode_errors INTEGER NOT NULL DEFAULT 0, flows INTEGER NOT NULL DEFAULT 0,"
    "  midstream_flows INTEGER NOT NULL DEFAULT 0, evicted_flows INTEGER NOT NULL DEFAULT 0,"
    "  gaps INTEGER NOT NULL DEFAULT 0, gap_bytes INTEGER NOT NULL DEFAULT 0,"
    "  parse_errors INTEGER NOT NULL DEFAULT 0, encrypted_flows INTEGER NOT NULL DEFAULT 0,"
    "  inflight_dropped INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0,"
    "  kernel_drops INTEGER NOT NULL DEFAULT 0, if_drops INTEGER NOT NULL DEFAULT 0,"
    "  first_ns INTEGER, last_ns INTEGER);"
    "CREATE TABLE tiers (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
    "  proto TEXT NOT NULL, configured INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE servers (id INTEGER PRIMARY KEY, tier_id INTEGER NOT NULL,"
    "  addr TEXT NOT NULL, UNIQUE (tier_id, addr));"
    "CREATE TABLE hosts (id INTEGER PRIMARY KEY, tier_id INTEGER NOT NULL,"
    "  addr TEXT NOT NULL, UNIQUE (tier_id, addr));"
    "CREATE TABLE classes (id INTEGER PRIMARY KEY, tier_id INTEGER NOT NULL,"
    "  fingerprint TEXT NOT NULL, UNIQUE (tier_id, fingerprint));"
    "CREATE TABLE endpoints (id INTEGER PRIMARY KEY, addr TEXT NOT NULL UNIQUE);"
    "CREATE TABLE requests (capture_id INTEGER NOT NULL, tier_id INTEGER NOT NULL,"
    "  server_id INTEGER NOT NULL, client_id INTEGER NOT NULL, client_port INTEGER NOT NULL,"
    "  conn INTEGER NOT NULL, class_id INTEGER NOT NULL, arrival_ns INTEGER NOT NULL,"
    "  departure_ns INTEGER NOT NULL, req_bytes INTEGER NOT NULL,"
    "  resp_bytes INTEGER NOT NULL, status INTEGER NOT NULL, flags INTEGER NOT NULL);"
    "CREATE TABLE windows (tier_id INTEGER NOT NULL, server_id INTEGER NOT NULL,"
    "  width_ns INTEGER NOT NULL, start_ns INTEGER NOT NULL, load REAL NOT NULL,"
    "  completions INTEGER NOT NULL, work_units REAL NOT NULL, throughput REAL NOT NULL,"
    "  norm_throughput REAL NOT NULL, rt_mean_ns REAL NOT NULL, rt_p95_ns REAL NOT NULL,"
    "  PRIMARY KEY (tier_id, server_id, width_ns, start_ns)) WITHOUT ROWID;"
    "CREATE TABLE service_times (tier_id INTEGER NOT NULL, class_id INTEGER NOT NULL,"
    "  period_start_ns INTEGER NOT NULL, service_ns INTEGER NOT NULL, units REAL NOT NULL,"
    "  samples INTEGER NOT NULL, requests INTEGER NOT NULL, method INTEGER NOT NULL,"
    "  PRIMARY KEY (tier_id, class_id, period_start_ns)) WITHOUT ROWID;"
    "CREATE TABLE analyses (id INTEGER PRIMARY KEY, tier_id INTEGER NOT NULL,"
    "  server_id INTEGER NOT NULL, width_ns INTEGER NOT NULL, from_ns INTEGER NOT NULL,"
    "  to_ns INTEGER NOT NULL, requests INTEGER NOT NULL, n_star REAL, n_star_fit REAL,"
    "  tp_max REAL, slope REAL, work_unit_ns INTEGER NOT NULL, congested_fraction REAL,"
    "  episodes_per_min REAL, levels TEXT NOT NULL DEFAULT '[]',"
    "  disagree INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL);"
    "CREATE TABLE episodes (id INTEGER PRIMARY KEY, analysis_id INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, peak_load REAL, mean_load REAL,"
    "  throughput REAL, kind TEXT NOT NULL CHECK (kind IN ('freeze', 'saturated')));"
    "INSERT INTO tiers VALUES (1, 'mysql', 'mysql', 1);"
    "INSERT INTO servers VALUES (1, 1, '10.0.0.3:3306');"
    "INSERT INTO hosts VALUES (1, 1, '10.0.0.3');"
    "INSERT INTO classes VALUES (1, 1, 'select ?');"
    "INSERT INTO endpoints VALUES (1, '10.0.0.2');"
    "INSERT INTO captures(id, source, started_ns) VALUES (1, 'old.pcap', 5);"
    "INSERT INTO captures(id, source, started_ns, ended_ns, requests)"
    "  VALUES (2, 'done.pcap', 6, 7, 1);"
    "INSERT INTO requests VALUES (1, 1, 1, 1, 40000, 42, 1, 1000, 2000, 10, 20, 0, 0);"
    "PRAGMA user_version = 1;";

static void test_migrate_v1(void **state)
{
    struct fix *f = *state;
    struct tb_store *st;
    struct tb_catalog *cat;
    char err[256], want[512];
    raw_exec(f->path, v1_sql);

    /* Read-only cannot migrate. */
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err),
                     TB_E_UNSUPP);
    snprintf(want, sizeof want, "%s: schema 1 needs migrating to %d; open it once without "
             "read-only (e.g. tbneck serve)", f->path, TB_STORE_SCHEMA_VERSION);
    assert_string_equal(err, want);

    assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), 0);
    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), TB_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(f->path, "SELECT value FROM meta WHERE key = 'schema_version'"),
                     TB_STORE_SCHEMA_VERSION);

    /* Old rows are intact and readable through the current code. */
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_store_load_catalog(st, cat), 0);
    assert_int_equal(tb_catalog_tier_count(cat), 1);
    assert_string_equal(tb_catalog_tier_get(cat, 1)->name, "mysql");
    assert_true(tb_catalog_tier_get(cat, 1)->configured);
    assert_string_equal(tb_catalog_class_get(cat, 1)->text, "select ?");
    assert_int_equal(tb_catalog_host_count(cat), 1);
    tb_catalog_free(cat);
    struct tb_request *rq;
    size_t n;
    assert_int_equal(tb_store_requests(st, 1, INT64_MIN, INT64_MAX, &rq, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rq[0].conn, 42);
    assert_int_equal(rq[0].client.port, 40000);
    struct tb_addr c = addr("10.0.0.2:40000");
    assert_true(tb_addr_eq(&rq[0].client, &c));
    free(rq);
    uint64_t next;
    assert_int_equal(tb_store_next_conn(st, &next), 0);
    assert_int_equal(next, 43);

    /* The tables version 2 added work. */
    struct tb_event ev = {.start_ns = 10, .end_ns = 20, .kind = "gc", .host = "tomcat",
                          .detail = "G1 Young"};
    assert_int_equal(tb_store_put_events(st, &ev, 1), 0);
    struct tb_event *got;
    assert_int_equal(tb_store_get_events(st, "gc", 0, 100, &got, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(got[0].detail, "G1 Young");
    free(got);
    /* Version 3's connections table exists and starts empty: an old capture
     * simply has no connection records. */
    struct tb_conn *cn;
    assert_int_equal(tb_store_connections(st, INT64_MIN, INT64_MAX, &cn, &n), 0);
    assert_int_equal(n, 0);
    free(cn);

    /* The columns version 4 added: an analysis keeps its knee test's
     * verdict and the method version. */
    struct tb_analysis an = {.tier = 1, .width_ns = 1000, .n_star = NAN, .n_star_fit = NAN,
                             .n_star_why = TB_NSTAR_RISING, .method_version = 7};
    snprintf(an.n_star_reason, sizeof an.n_star_reason, "no congestion: why");
    assert_int_equal(tb_store_put_analysis(st, &an, NULL, 0, NULL), 0);
    struct tb_analysis back;
    assert_int_equal(tb_store_get_analysis(st, 1, 0, 1000, &back, NULL, NULL), 0);
    assert_int_equal(back.n_star_why, TB_NSTAR_RISING);
    assert_int_equal(back.method_version, 7);
    assert_string_equal(back.n_star_reason, "no congestion: why");

    /* Version 5: an old capture never ended is 'running', an ended one
     * 'complete' with what it counted taken as seen and stored. */
    struct tb_capture_row *cr;
    assert_int_equal(tb_store_captures(st, &cr, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cr[0].state, TB_CAPTURE_RUNNING);
    assert_int_equal(cr[1].state, TB_CAPTURE_COMPLETE);
    assert_int_equal(cr[1].requests, 1);
    assert_int_equal(cr[1].requests_seen, 1);
    assert_int_equal(cr[1].requests_lost, 0);
    free(cr);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM capture_tiers"), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses WHERE used_ns = 0"), 0);
    tb_store_close(st);

    /* A second open finds nothing to do. */
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err), 0);
    tb_store_close(st);
}

/* Version 7 rebuilds requests without types or NOT NULL. What must survive:
 * every row with its row id (links and model stamps refer to them), the
 * values as integers, the read index when the file had one (and no index
 * when it had none: the next capture would otherwise keep it up row by
 * row), and a file SQLite itself finds consistent. */
static void check_v7_requests(const char *path, bool had_index)
{
    assert_int_equal(raw_int(path, "PRAGMA user_version"), TB_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM pragma_integrity_check "
                                   "WHERE integrity_check = 'ok'"), 1);
    assert_int_equal(raw_int(path, "SELECT instr(sql, 'NOT NULL') FROM sqlite_master "
                                   "WHERE name = 'requests'"), 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'requests_v7'"),
                     0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM requests"), 3);
    /* Each row keeps its id: conn 42 is row 1, 43 row 7, 44 row 9. */
    assert_int_equal(raw_int(path, "SELECT sum(rowid * conn) FROM requests"),
                     1 * 42 + 7 * 43 + 9 * 44);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM requests WHERE typeof(arrival_ns) = "
                                   "'integer' AND typeof(tier_id) = 'integer' AND "
                                   "typeof(flags) = 'integer'"), 3);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                   "name = 'requests_tier_arrival'"), had_index ? 1 : 0);
}

/* requests as schemas 1 to 6 declared it. */
static const char v6_requests_sql[] =
    "CREATE TABLE r6 (capture_id INTEGER NOT NULL, tier_id INTEGER NOT NULL,"
    "  server_id INTEGER NOT NULL, client_id INTEGER NOT NULL, client_port INTEGER NOT NULL,"
    "  conn INTEGER NOT NULL, class_id INTEGER NOT NULL, arrival_ns INTEGER NOT NULL,"
    "  departure_ns INTEGER NOT NULL, req_bytes INTEGER NOT NULL,"
    "  resp_bytes INTEGER NOT NULL, status INTEGER NOT NULL, flags INTEGER NOT NULL);"
    "INSERT INTO r6(rowid, capture_id, tier_id, server_id, client_id, client_port, conn,"
    "  class_id, arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags)"
    "  SELECT rowid, * FROM requests;"
    "DROP TABLE requests;"
    "ALTER TABLE r6 RENAME TO requests;"
    /* Rows out of arrival order and with gaps in their ids, as a file with
     * deleted or relinked rows has. */
    "INSERT INTO requests(rowid, capture_id, tier_id, server_id, client_id, client_port, conn,"
    "  class_id, arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags) VALUES"
    "  (9, 2, 1, 1, 1, 40002, 44, 1, 500, 2500, 11, 21, 0, 4),"
    "  (7, 2, 1, 1, 1, 40001, 43, 1, 1500, 1600, 12, 22, 1, 0);"
    "PRAGMA user_version = 6;"
    "UPDATE meta SET value = 6 WHERE key = 'schema_version';";

/* The three rows through the current code: arrival order, every value kept. */
static void check_requests_read(struct tb_store *st)
{
    struct tb_request *rq;
    size_t n;
    assert_int_equal(tb_store_requests(st, 1, INT64_MIN, INT64_MAX, &rq, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rq[0].conn, 44);
    assert_int_equal(rq[0].departure_ns, 2500);
    assert_int_equal(rq[0].flags, 4);
    assert_int_equal(rq[1].conn, 42);
    assert_int_equal(rq[2].conn, 43);
    assert_int_equal(rq[2].arrival_ns, 1500);
    assert_int_equal(rq[2].client.port, 40001);
    free(rq);
}

static void test_migrate_v6_requests(void **state)
{
    struct fix *f = *state;
    struct tb_store *st;
    char err[256], p[160];
    for (int had_index = 0; had_index < 2; had_index++) {
        const char *sfx[] = {"", "-wal", "-shm"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
            unlink(p);
        }
        /* A schema 6 file: every table as steps 1 to 6 made it. */
        raw_exec(f->path, v1_sql);
        assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), 0);
        tb_store_close(st);
        raw_exec(f->path, v6_requests_sql);
        if (had_index)
            raw_exec(f->path,
                     "CREATE INDEX requests_tier_arrival ON requests(tier_id, arrival_ns)");
        /* Read-only reads it as it is, and leaves it at 6. */
        assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err), 0);
        check_requests_read(st);
        tb_store_close(st);
        assert_int_equal(raw_int(f->path, "PRAGMA user_version"), 6);
        assert_true(raw_int(f->path, "SELECT instr(sql, 'NOT NULL') FROM sqlite_master "
                                     "WHERE name = 'requests'") > 0);
        /* Read-write migrates it. */
        assert_int_equal(tb_store_open(&st, f->path, 0, err, sizeof err), 0);
        tb_store_close(st);
        check_v7_requests(f->path, had_index);
        assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err), 0);
        check_requests_read(st);
        tb_store_close(st);
    }
}

/* ---- catalog ------------------------------------------------------------------------------ */

static void build_catalog(struct tb_catalog *cat)
{
    uint32_t t, id;
    struct tb_addr a;
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &t), 0);
    assert_int_equal(tb_catalog_tier_set_configured(cat, t, true), 0);
    assert_int_equal(tb_catalog_tier(cat, "http-8080", "http", &t), 0);
    a = addr("10.0.0.3:3306");
    assert_int_equal(tb_catalog_server(cat, 1, &a, &id), 0);
    a = addr("[2001:db8::5]:8080");
    assert_int_equal(tb_catalog_server(cat, 2, &a, &id), 0);
    a = addr("10.0.0.3");
    assert_int_equal(tb_catalog_host(cat, 1, &a), 0);
    a = addr("2001:db8::5");
    assert_int_equal(tb_catalog_host(cat, 2, &a), 0);
    assert_int_equal(tb_catalog_class(cat, 1, "select * from t where a in (?+)", 31, &id), 0);
    assert_int_equal(tb_catalog_class(cat, 2, "GET /a,b \"q\"", 12, &id), 0);
    assert_int_equal(tb_catalog_class(cat, 2, "", 0, &id), 0);
    assert_int_equal(tb_catalog_class(cat, 2, "GET /\0", 6, &id), 0); /* "other" */
    assert_int_equal(id, 4);
}

static void assert_catalogs_equal(const struct tb_catalog *a, const struct tb_catalog *b)
{
    assert_int_equal(tb_catalog_tier_count(a), tb_catalog_tier_count(b));
    assert_int_equal(tb_catalog_server_count(a), tb_catalog_server_count(b));
    assert_int_equal(tb_catalog_class_count(a), tb_catalog_class_count(b));
    assert_int_equal(tb_catalog_host_count(a), tb_catalog_host_count(b));
    for (uint32_t i = 1; i <= tb_catalog_tier_count(a); i++) {
        const struct tb_tier_info *x = tb_catalog_tier_get(a, i), *y = tb_catalog_tier_get(b, i);
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->proto, y->proto);
        assert_int_equal(x->configured, y->configured);
    }
    for (uint32_t i = 1; i <= tb_catalog_server_count(a); i++) {
        const struct tb_server_info *x = tb_catalog_server_get(a, i),
                                    *y = tb_catalog_server_get(b, i);
        assert_int_equal(x->tier, y->tier);
        assert_true(tb_addr_eq(&x->addr, &y->addr));
        assert_int_equal(x->addr.family, y->addr.family);
    }
    for (uint32_t i = 1; i <= tb_catalog_class_count(a); i++) {
        const struct tb_class_info *x = tb_catalog_class_get(a, i),
                                   *y = tb_catalog_class_get(b, i);
        assert_int_equal(x->tier, y->tier);
        assert_string_equal(x->text, y->text);
    }
    for (uint32_t i = 0; i < tb_catalog_host_count(a); i++) {
        uint32_t ta, tb;
        struct tb_addr ha, hb;
        assert_int_equal(tb_catalog_host_at(a, i, &ta, &ha), 0);
        assert_int_equal(tb_catalog_host_at(b, i, &tb, &hb), 0);
        assert_int_equal(ta, tb);
        assert_true(tb_addr_eq(&ha, &hb));
    }
}

static void test_catalog_roundtrip(void **state)
{
    struct fix *f = *state;
    struct tb_catalog *cat, *back;
    struct tb_store *st = open_new(f->path);
    uint32_t id;
    assert_int_equal(tb_catalog_new(&cat), 0);
    build_catalog(cat);
    assert_int_equal(tb_store_put_catalog(st, cat), 0);
    assert_int_equal(tb_catalog_persisted(cat)->classes, 4);
    /* Nothing new: nothing written, no error. */
    assert_int_equal(tb_store_put_catalog(st, cat), 0);
    tb_store_close(st);

    char err[256];
    assert_int_equal(tb_store_open(&st, f->path, TB_STORE_READONLY, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&back), 0);
    assert_int_equal(tb_store_load_catalog(st, back), 0);
    assert_catalogs_equal(cat, back);
    assert_int_equal(tb_catalog_persisted(back)->servers, 2);
    assert_int_equal(tb_catalog_persisted(back)->hosts, 2);
    /* The reloaded catalog finds the "other" class by the same rule. */
    assert_int_equal(tb_catalog_class(back, 2, "x\0y", 3, &id), 0);
    assert_int_equal(id, 4);
    /* Loading into a non-empty catalog is refused. */
    assert_int_equal(tb_store_load_catalog(st, back), TB_E_INVAL);
    tb_catalog_free(back);
    tb_store_close(st);

    /* Grow the catalog and persist only the difference. */
    st = open_new(f->path);
    assert_int_equal(tb_catalog_class(cat, 1, "commit", 6, &id), 0);
    assert_int_equal(id, 5);
    assert_int_equal(tb_catalog_tier(cat, "redis", "generic", &id), 0);
    assert_int_equal(tb_store_put_catalog(st, cat), 0);
    assert_int_equal(tb_catalog_new(&back), 0);
    assert_int_equal(tb_store_load_catalog(st, back), 0);
    assert_catalogs_equal(cat, back);
    tb_catalog_free(back);

    /* A catalog not loaded from this file clashes on ids: refused, not mixed. */
    struct tb_catalog *stray;
    assert_int_equal(tb_catalog_new(&stray), 0);
    assert_int_equal(tb_catalog_tier(stray, "postgres", "generic", &id), 0);
    assert_int_equal(tb_store_put_catalog(st, stray), TB_E_INVAL);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM tiers"), 3);
    tb_catalog_free(stray);
    tb_catalog_free(cat);
    tb_store_close(st);
}

/* ---- captures, requests and export --------------------------------------------------------- */

static void test_captures(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    int64_t c1, c2;
    uint64_t conn;
    assert_int_equal(tb_store_next_conn(st, &conn), 0);
    assert_int_equal(conn, 1);
    assert_int_equal(tb_store_capture_begin(st, "a.pcap", &c1), 0);
    assert_int_equal(tb_store_capture_begin(st, "eth0", &c2), 0);
    assert_int_equal(c1, 1);
    assert_int_equal(c2, 2);
    struct tb_capture_stats cs = {.linktype = 1, .packets = 1000, .bytes = 123456,
                                  .kernel_drops = 3, .if_drops = 4, .parse_errors = 5,
                                  .gaps = 6, .evicted_flows = 7, .requests = 480,
                                  .first_ns = 100, .last_ns = 900};
    assert_int_equal(tb_store_capture_end(st, c1, &cs), 0);
    assert_int_equal(tb_store_capture_end(st, 77, &cs), TB_E_NOTFOUND);
    assert_int_equal(tb_store_capture_end(st, 77, NULL), TB_E_NOTFOUND);
    struct tb_capture_row *rows;
    size_t n;
    assert_int_equal(tb_store_captures(st, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].id, 1);
    assert_string_equal(rows[0].source, "a.pcap");
    assert_true(rows[0].started_ns > INT64_C(1600000000000000000));
    assert_true(rows[0].ended_ns >= rows[0].started_ns);
    assert_int_equal(rows[0].packets, 1000);
    assert_int_equal(rows[0].bytes, 123456);
    assert_int_equal(rows[0].kernel_drops, 3);
    assert_int_equal(rows[0].if_drops, 4);
    assert_int_equal(rows[0].parse_errors, 5);
    assert_int_equal(rows[0].gaps, 6);
    assert_int_equal(rows[0].evicted_flows, 7);
    assert_int_equal(rows[0].requests, 480);
    assert_string_equal(rows[1].source, "eth0");
    assert_int_equal(rows[1].ended_ns, 0); /* still running */
    assert_int_equal(rows[1].packets, 0);
    free(rows);
    /* Ending without statistics keeps the counters. */
    assert_int_equal(tb_store_capture_end(st, c1, NULL), 0);
    assert_int_equal(tb_store_captures(st, &rows, &n), 0);
    assert_int_equal(rows[0].packets, 1000);
    assert_true(rows[0].ended_ns > 0);
    free(rows);
    assert_int_equal(raw_int(f->path, "SELECT link_type FROM captures WHERE id = 1"), 1);
    assert_int_equal(raw_int(f->path, "SELECT last_ns FROM captures WHERE id = 1"), 900);
    /* Ending a capture builds the read index. */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                                      "AND name = 'requests_tier_arrival'"),
                     1);
    tb_store_close(st);
}

static const char expect_csv[] =
    "tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags\n"
    "http,10.0.0.2:8080,10.0.0.1:40001,5,GET /{id},1000,1800,80,512,404,1\n"
    "http,10.0.0.2:8080,[2001:db8::1]:40000,7,\"GET /a,b \"\"x\"\"\",1000,2500,120,3000,200,0\n"
    "mysql,10.0.0.3:3306,10.0.0.2:50000,9,\"line\nbreak\",900,1000,25,7,-1,8\n"
    "mysql,10.0.0.3:3306,10.0.0.2:50000,9,select ?,1200,1300,30,11,0,0\n";

static void fill_small(struct tb_store *st, struct tb_request rq[4])
{
    struct tb_catalog *cat;
    struct tb_writer *w;
    uint32_t mysql, http, s_db, s_web, c[4];
    struct tb_addr a;
    int64_t cap;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "mysql", "mysql", &mysql), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &http), 0);
    a = addr("10.0.0.3:3306");
    assert_int_equal(tb_catalog_server(cat, mysql, &a, &s_db), 0);
    a = addr("10.0.0.2:8080");
    assert_int_equal(tb_catalog_server(cat, http, &a, &s_web), 0);
    assert_int_equal(tb_catalog_class(cat, http, "GET /a,b \"x\"", 12, &c[0]), 0);
    assert_int_equal(tb_catalog_class(cat, http, "GET /{id}", 9, &c[1]), 0);
    assert_int_equal(tb_catalog_class(cat, mysql, "select ?", 8, &c[2]), 0);
    assert_int_equal(tb_catalog_class(cat, mysql, "line\nbreak", 10, &c[3]), 0);
    rq[0] = (struct tb_request){1000, 2500, 7, 120, 3000, addr("[2001:db8::1]:40000"), http,
                                s_web, c[0], 200, 0};
    rq[1] = (struct tb_request){1000, 1800, 5, 80, 512, addr("10.0.0.1:40001"), http, s_web,
                                c[1], 404, 1};
    rq[2] = (struct tb_request){1200, 1300, 9, 30, 11, addr("10.0.0.2:50000"), mysql, s_db,
                                c[2], 0, 0};
    rq[3] = (struct tb_request){900, 1000, 9, 25, 7, addr("10.0.0.2:50000"), mysql, s_db, c[3],
                                -1, 8};
    assert_int_equal(tb_store_capture_begin(st, "small", &cap), 0);
    assert_int_equal(tb_writer_start(&w, st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tb_writer_request(w, &rq[i]), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    tb_catalog_free(cat);
}

static void assert_request_equal(const struct tb_request *x, const struct tb_request *y)
{
    assert_int_equal(x->arrival_ns, y->arrival_ns);
    assert_int_equal(x->departure_ns, y->departure_ns);
    assert_int_equal(x->conn, y->conn);
    assert_int_equal(x->req_bytes, y->req_bytes);
    assert_int_equal(x->resp_bytes, y->resp_bytes);
    assert_true(tb_addr_eq(&x->client, &y->client));
    assert_int_equal(x->client.family, y->client.family);
    assert_int_equal(x->tier, y->tier);
    assert_int_equal(x->server, y->server);
    assert_int_equal(x->class_id, y->class_id);
    assert_int_equal(x->status, y->status);
    assert_int_equal(x->flags, y->flags);
}

static void test_requests_export(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_request rq[4], *got;
    size_t n;
    fill_small(st, rq);

    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_int_equal(tb_store_export_requests(st, NULL, mem), 0);
    fclose(mem);
    assert_int_equal(len, strlen(expect_csv));
    assert_string_equal(buf, expect_csv);
    free(buf);

    mem = open_memstream(&buf, &len);
    assert_int_equal(tb_store_export_requests(st, "mysql", mem), 0);
    fclose(mem);
    const char *mysql_part = strstr(expect_csv, "mysql,");
    size_t header = (size_t)(strchr(expect_csv, '\n') + 1 - expect_csv);
    assert_int_equal(strncmp(buf, expect_csv, header), 0);
    assert_string_equal(buf + header, mysql_part);
    free(buf);
    mem = open_memstream(&buf, &len);
    assert_int_equal(tb_store_export_requests(st, "nosuch", mem), TB_E_NOTFOUND);
    fclose(mem);
    assert_int_equal(len, 0);
    free(buf);

    /* Reads: all tiers by arrival (ties in insertion order), one tier, ranges. */
    assert_int_equal(tb_store_requests(st, 0, INT64_MIN, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 4);
    assert_request_equal(&got[0], &rq[3]);
    assert_request_equal(&got[1], &rq[0]);
    assert_request_equal(&got[2], &rq[1]);
    assert_request_equal(&got[3], &rq[2]);
    free(got);
    assert_int_equal(tb_store_requests(st, 2, 1900, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 1);
    assert_request_equal(&got[0], &rq[0]);
    free(got);
    assert_int_equal(tb_store_requests(st, 1, INT64_MIN, 1000, &got, &n), 0);
    assert_int_equal(n, 1);
    assert_request_equal(&got[0], &rq[3]);
    free(got);
    assert_int_equal(tb_store_requests(st, 1, 1301, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 0);
    assert_null(got);

    uint64_t count;
    assert_int_equal(tb_store_request_count(st, 0, &count), 0);
    assert_int_equal(count, 4);
    assert_int_equal(tb_store_request_count(st, 2, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(tb_store_request_count(st, 99, &count), 0);
    assert_int_equal(count, 0);
    /* Per server: the two web requests on server 2, the two database ones on
     * server 1; ids past the array are skipped, counts are added. */
    uint64_t per[3] = {0, 0, 5};
    assert_int_equal(tb_store_server_counts(st, 2, per, 3), 0);
    assert_int_equal(per[0], 0);
    assert_int_equal(per[1], 0);
    assert_int_equal(per[2], 7);
    assert_int_equal(tb_store_server_counts(st, 1, per, 2), 0);
    assert_int_equal(per[1], 2);
    assert_int_equal(per[2], 7);
    assert_int_equal(tb_store_server_counts(st, 99, per, 3), 0);
    assert_int_equal(per[0] + per[1] + per[2], 9);
    int64_t first, last;
    assert_int_equal(tb_store_time_span(st, 0, &first, &last), 0);
    assert_int_equal(first, 900);
    assert_int_equal(last, 2500);
    assert_int_equal(tb_store_time_span(st, 1, &first, &last), 0);
    assert_int_equal(first, 900);
    assert_int_equal(last, 1300);
    assert_int_equal(tb_store_time_span(st, 99, &first, &last), TB_E_NOTFOUND);
    uint64_t next;
    assert_int_equal(tb_store_next_conn(st, &next), 0);
    assert_int_equal(next, 10);
    /* Clients are interned: 3 addresses for 4 requests. */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM endpoints"), 3);
    /* Reads during a running capture scan rather than build the index under
     * the writer's feet; ending the capture builds it, and reads still agree. */
    const char *q_index = "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                          "AND name = 'requests_tier_arrival'";
    assert_int_equal(raw_int(f->path, q_index), 0);
    assert_int_equal(tb_store_capture_end(st, 1, NULL), 0);
    assert_int_equal(raw_int(f->path, q_index), 1);
    assert_int_equal(tb_store_requests(st, 2, 1900, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 1);
    assert_request_equal(&got[0], &rq[0]);
    free(got);
    mem = open_memstream(&buf, &len);
    assert_int_equal(tb_store_export_requests(st, NULL, mem), 0);
    fclose(mem);
    assert_string_equal(buf, expect_csv);
    free(buf);
    tb_store_close(st);
}

/* ---- windows, service times, analyses, health, events ------------------------------------ */

static struct tb_window win(uint32_t server, int64_t width, int64_t start, double load)
{
    return (struct tb_window){.start_ns = start, .width_ns = width, .tier = 1, .server = server,
                              .load = load, .completions = (uint32_t)(load * 10),
                              .work_units = load * 3, .throughput = load * 200,
                              .norm_throughput = load * 60, .rt_mean_ns = 1.25e6 * load,
                              .rt_p95_ns = 4.5e6};
}

static void test_windows(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    const int64_t W = 50 * TB_NS_PER_MS, W2 = 100 * TB_NS_PER_MS;
    struct tb_window in[8], *out;
    size_t n;
    for (int i = 0; i < 4; i++)
        in[i] = win(0, W, i * W, 0.5 + i);
    in[4] = win(3, W, 0, 7.25);
    in[5] = win(0, W2, 0, 1.0 / 3);
    in[6] = win(0, W2, W2, 2.0);
    assert_int_equal(tb_store_put_windows(st, in, 7), 0);

    assert_int_equal(tb_store_get_windows(st, 1, 0, W, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(out[i].start_ns, in[i].start_ns);
        assert_int_equal(out[i].width_ns, W);
        assert_int_equal(out[i].tier, 1);
        assert_int_equal(out[i].server, 0);
        assert_true(out[i].load == in[i].load);
        assert_int_equal(out[i].completions, in[i].completions);
        assert_true(out[i].work_units == in[i].work_units);
        assert_true(out[i].throughput == in[i].throughput);
        assert_true(out[i].norm_throughput == in[i].norm_throughput);
        assert_true(out[i].rt_mean_ns == in[i].rt_mean_ns);
        assert_true(out[i].rt_p95_ns == in[i].rt_p95_ns);
    }
    free(out);
    assert_int_equal(tb_store_get_windows(st, 1, 0, W2, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_true(out[0].load == 1.0 / 3);
    free(out);

    /* A rerun of server 0 over window 2 and of server 3 over window 1: each
     * group replaces its own covered range only; the other width stays. */
    struct tb_window again[2] = {win(0, W, 1 * W, 9.0), win(0, W, 2 * W, 10.0)};
    again[0].server = 3; /* belongs to server 3's group: covers start 1*W only */
    assert_int_equal(tb_store_put_windows(st, again, 2), 0);
    assert_int_equal(tb_store_get_windows(st, 1, 0, W, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 4);
    assert_true(out[2].load == 10.0);
    assert_true(out[1].load == 1.5);
    free(out);
    assert_int_equal(tb_store_get_windows(st, 1, 3, W, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_true(out[0].load == 7.25);
    assert_true(out[1].load == 9.0);
    free(out);
    struct tb_window gap[2] = {win(0, W, 0, 4.0), win(0, W, 2 * W, 5.0)};
    assert_int_equal(tb_store_put_windows(st, gap, 2), 0);
    assert_int_equal(tb_store_get_windows(st, 1, 0, W, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].start_ns, 0);
    assert_true(out[0].load == 4.0);
    assert_int_equal(out[1].start_ns, 2 * W); /* window 1, inside the range, is gone */
    assert_true(out[1].load == 5.0);
    assert_int_equal(out[2].start_ns, 3 * W);
    assert_true(out[2].load == 3.5);
    free(out);
    assert_int_equal(tb_store_get_windows(st, 1, 0, W2, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 2);
    free(out);
    /* Range reads: [from, to) on the window start. */
    assert_int_equal(tb_store_get_windows(st, 1, 0, W, 2 * W, 3 * W, &out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].start_ns, 2 * W);
    free(out);
    assert_int_equal(tb_store_get_windows(st, 2, 0, W, INT64_MIN, INT64_MAX, &out, &n), 0);
    assert_int_equal(n, 0);
    assert_null(out);
    tb_store_close(st);
}

static void test_services(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_class_service in[3] = {
        {2, 5, 0, 30 * TB_NS_PER_MS, 3.0, 40, 400, TB_SVC_ISOLATED},
        {1, 1, 0, 10 * TB_NS_PER_MS, 1.0, 12, 90, TB_SVC_QUANTILE},
        {1, 1, 60 * TB_NS_PER_SEC, 11 * TB_NS_PER_MS, 1.1, 3, 9, TB_SVC_OVERRIDE},
    }, *out;
    size_t n;
    assert_int_equal(tb_store_put_services(st, in, 3), 0);
    in[1].service_ns = 9 * TB_NS_PER_MS; /* same key: replaces */
    in[1].method = TB_SVC_CALIBRATED;
    assert_int_equal(tb_store_put_services(st, &in[1], 1), 0);
    assert_int_equal(tb_store_get_services(st, 0, &out, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].tier, 1);
    assert_int_equal(out[0].class_id, 1);
    assert_int_equal(out[0].period_start_ns, 0);
    assert_int_equal(out[0].service_ns, 9 * TB_NS_PER_MS);
    assert_int_equal(out[0].method, TB_SVC_CALIBRATED);
    assert_true(out[0].units == 1.0);
    assert_int_equal(out[0].samples, 12);
    assert_int_equal(out[0].requests, 90);
    assert_int_equal(out[1].period_start_ns, 60 * TB_NS_PER_SEC);
    assert_true(out[1].units == 1.1);
    assert_int_equal(out[2].tier, 2);
    assert_int_equal(out[2].service_ns, 30 * TB_NS_PER_MS);
    free(out);
    assert_int_equal(tb_store_get_services(st, 2, &out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].class_id, 5);
    free(out);
    tb_store_close(st);
}

static void test_analyses(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    const int64_t W = 50 * TB_NS_PER_MS;
    struct tb_analysis a = {.tier = 1, .server = 0, .width_ns = W, .from_ns = 1000,
                            .to_ns = 61000, .requests = 123456, .n_star = 4.75,
                            .n_star_fit = NAN, .tp_max = 812.5, .slope = 171.0 / 7,
                            .work_unit_ns = 10 * TB_NS_PER_MS, .congested_fraction = 0.125,
                            .episodes_per_min = 2.5, .n_levels = 3,
                            .levels = {600.25, 700.0, 0.1}, .disagree = true};
    struct tb_episode ep[2] = {
        {5 * W, 9 * W, 7.5, 6.25, 120.0, TB_EP_FREEZE},
        {2 * W, 3 * W, 5.0, 5.0, 800.0, TB_EP_SATURATED},
    }, *got;
    struct tb_analysis b;
    size_t n;
    int64_t id1, id2;
    assert_int_equal(tb_store_get_analysis(st, 1, 0, W, &b, &got, &n), TB_E_NOTFOUND);
    assert_int_equal(tb_store_put_analysis(st, &a, ep, 2, &id1), 0);
    /* Another range of the same width is a row of its own. */
    a.from_ns = 2000;
    a.n_star = 5.0;
    a.n_levels = 1;
    a.disagree = false;
    assert_int_equal(tb_store_put_analysis(st, &a, ep, 2, &id2), 0);
    assert_int_equal(id2, id1 + 1);
    a.server = 4; /* another key: not the newest of (1, 0, W) */
    assert_int_equal(tb_store_put_analysis(st, &a, NULL, 0, NULL), 0);
    a.server = 0;
    a.from_ns = 1000;

    assert_int_equal(tb_store_get_analysis(st, 1, 0, W, &b, &got, &n), 0);
    assert_int_equal(b.tier, 1);
    assert_int_equal(b.server, 0);
    assert_int_equal(b.width_ns, W);
    assert_int_equal(b.from_ns, 2000);
    assert_int_equal(b.to_ns, 61000);
    assert_int_equal(b.requests, 123456);
    assert_true(b.n_star == 5.0);
    assert_true(isnan(b.n_star_fit));
    assert_true(b.tp_max == 812.5);
    assert_true(b.slope == 171.0 / 7);
    assert_int_equal(b.work_unit_ns, 10 * TB_NS_PER_MS);
    assert_true(b.congested_fraction == 0.125);
    assert_true(b.episodes_per_min == 2.5);
    assert_int_equal(b.n_levels, 1);
    assert_true(b.levels[0] == 600.25);
    assert_false(b.disagree);
    assert_int_equal(n, 2);
    /* Episodes come back in time order. */
    assert_int_equal(got[0].start_ns, 2 * W);
    assert_int_equal(got[0].kind, TB_EP_SATURATED);
    assert_int_equal(got[1].start_ns, 5 * W);
    assert_int_equal(got[1].end_ns, 9 * W);
    assert_true(got[1].peak_load == 7.5);
    assert_true(got[1].mean_load == 6.25);
    assert_true(got[1].throughput == 120.0);
    assert_int_equal(got[1].kind, TB_EP_FREEZE);
    free(got);
    assert_int_equal(tb_store_get_analysis(st, 1, 4, W, &b, &got, &n), 0);
    assert_int_equal(n, 0);
    assert_null(got);
    assert_int_equal(tb_store_get_analysis(st, 1, 0, 2 * W, &b, &got, &n), TB_E_NOTFOUND);
    /* The first range's analysis, with its three levels, is still stored and
     * found by its range, though not the newest of its width. */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses"), 3);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM episodes"), 4);
    assert_int_equal(tb_store_find_analysis(st, 1, 0, W, 1000, 61000, &b, &got, &n), 0);
    assert_int_equal(b.from_ns, 1000);
    assert_int_equal(b.n_levels, 3);
    assert_int_equal(n, 2);
    free(got);
    assert_int_equal(tb_store_find_analysis(st, 1, 0, W, 1000, 60000, &b, NULL, NULL),
                     TB_E_NOTFOUND);
    sqlite3 *db;
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT levels FROM analyses WHERE id = ?1", -1, &s,
                                        NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(s, 1, id1);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0),
                        "[600.25,700,0.10000000000000001]");
    sqlite3_finalize(s);
    sqlite3_close(db);
    tb_store_close(st);
}

/* Issue 13, finding 6: the same question stored once; at most
 * TB_STORE_ANALYSES_KEEP per (tier, server), least recently used out first,
 * with their episodes and the windows of a width left without analysis. */
static void test_analyses_bounded(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    const int64_t W = 50 * TB_NS_PER_MS;
    struct tb_analysis a = {.tier = 1, .width_ns = W, .from_ns = 0, .to_ns = 10 * W,
                            .requests = 10, .n_star = 2.0, .n_star_fit = 2.0, .tp_max = 1.0,
                            .slope = 1.0, .work_unit_ns = 1000};
    struct tb_episode ep = {W, 2 * W, 3.0, 2.5, 0.0, TB_EP_FREEZE};
    int64_t id;
    for (int i = 0; i < 5; i++)
        assert_int_equal(tb_store_put_analysis(st, &a, &ep, 1, &id), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses"), 1);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM episodes"), 1);
    /* A thousand widths, each with a window: the store keeps 64, the first
     * width (read every 16 puts, so always recently used) among them. */
    struct tb_window win = {.tier = 1, .server = 0, .load = 1.0};
    for (int k = 1; k <= 1000; k++) {
        a.width_ns = W + k;
        win.width_ns = a.width_ns;
        win.start_ns = 0;
        assert_int_equal(tb_store_put_analysis(st, &a, &ep, 1, &id), 0);
        assert_int_equal(tb_store_put_windows(st, &win, 1), 0);
        if (k % 16 == 0) {
            struct tb_analysis b;
            assert_int_equal(tb_store_find_analysis(st, 1, 0, W, 0, 10 * W, &b, NULL, NULL), 0);
        }
    }
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses"), TB_STORE_ANALYSES_KEEP);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM episodes"), TB_STORE_ANALYSES_KEEP);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses WHERE width_ns = 50000000"),
                     1);
    assert_int_equal(raw_int(f->path, "SELECT min(width_ns) FROM analyses WHERE width_ns > "
                                      "50000000"), W + 1000 - (TB_STORE_ANALYSES_KEEP - 2));
    /* Windows follow their analyses: one per kept width with a window. */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM windows"), TB_STORE_ANALYSES_KEEP - 1);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM windows w WHERE NOT EXISTS (SELECT 1 "
                                      "FROM analyses a WHERE a.width_ns = w.width_ns)"), 0);
    /* Another server's analyses are counted apart. */
    a.server = 2;
    assert_int_equal(tb_store_put_analysis(st, &a, NULL, 0, &id), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM analyses"),
                     TB_STORE_ANALYSES_KEEP + 1);
    tb_store_close(st);
}

static void test_health_events(void **state)
{
    struct fix *f = *state;
    struct tb_store *st = open_new(f->path);
    struct tb_writer *w;
    int64_t cap;
    assert_int_equal(tb_store_capture_begin(st, "eth1", &cap), 0);
    assert_int_equal(tb_writer_start(&w, st, cap), 0);
    assert_int_equal(tb_writer_health(w, 2 * TB_NS_PER_SEC, 1500, 0, 0), 0);
    assert_int_equal(tb_writer_health(w, 3 * TB_NS_PER_SEC, 3100, 12, 1), 0);
    assert_int_equal(tb_writer_flush(w), 0);
    struct tb_health_row *h;
    size_t n;
    /* Flushed: visible to the store's own connection before the writer ends. */
    assert_int_equal(tb_store_get_health(st, 0, INT64_MAX, &h, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(h[1].ts_ns, 3 * TB_NS_PER_SEC);
    assert_int_equal(h[1].packets, 3100);
    assert_int_equal(h[1].kernel_drops, 12);
    assert_int_equal(h[1].if_drops, 1);
    free(h);
    /* The running capture's row carries the latest counters, and the requests
     * stored so far. */
    struct tb_request rq = {.arrival_ns = 2500000000, .departure_ns = 2600000000, .conn = 1,
                            .client = addr("10.0.0.9:5000"), .tier = 1, .server = 1,
                            .class_id = 1};
    struct tb_catalog *cat;
    uint32_t tier, srv, cls;
    struct tb_addr sa = addr("10.0.0.1:80");
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_catalog_tier(cat, "http", "http", &tier), 0);
    assert_int_equal(tb_catalog_server(cat, tier, &sa, &srv), 0);
    assert_int_equal(tb_catalog_class(cat, tier, "GET /", 5, &cls), 0);
    assert_int_equal(tb_writer_catalog(w, cat), 0);
    assert_int_equal(tb_writer_request(w, &rq), 0);
    assert_int_equal(tb_writer_request(w, &rq), 0);
    assert_int_equal(tb_writer_health(w, 3500 * TB_NS_PER_SEC / 1000, 3300, 13, 1), 0);
    assert_int_equal(tb_writer_flush(w), 0);
    struct tb_capture_row *cr;
    assert_int_equal(tb_store_captures(st, &cr, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(cr[0].ended_ns, 0);
    assert_int_equal(cr[0].packets, 3300);
    assert_int_equal(cr[0].kernel_drops, 13);
    assert_int_equal(cr[0].if_drops, 1);
    assert_int_equal(cr[0].requests, 2);
    free(cr);
    assert_int_equal(tb_writer_health(w, 4 * TB_NS_PER_SEC, 4000, 12, 1), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    /* The end writes the final figures, and a finished row stays as it is. */
    struct tb_capture_stats cs = {.packets = 4100, .kernel_drops = 12, .requests = 2};
    assert_int_equal(tb_store_capture_end(st, cap, &cs), 0);
    assert_int_equal(tb_store_captures(st, &cr, &n), 0);
    assert_int_equal(cr[0].packets, 4100);
    assert_true(cr[0].ended_ns != 0);
    free(cr);
    tb_catalog_free(cat);
    assert_int_equal(tb_store_get_health(st, 3 * TB_NS_PER_SEC, INT64_MAX, &h, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(h[0].packets, 3100);
    assert_int_equal(h[1].packets, 3300);
    assert_int_equal(h[2].packets, 4000);
    free(h);

    struct tb_event ev[3] = {
        {100, 200, "gc", "tomcat", "G1 Evacuation Pause (young) 100ms"},
        {500, 900, "gc", "tomcat2", "Full GC"},
        {150, 160, "cpu", "mysql", "freq 1.2GHz"},
    }, *got;
    strcpy(ev[1].detail, "Full GC, with \"quotes\"");
    assert_int_equal(tb_store_put_events(st, ev, 3), 0);
    assert_int_equal(tb_store_get_events(st, "gc", INT64_MIN, INT64_MAX, &got, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(got[0].start_ns, 100);
    assert_int_equal(got[0].end_ns, 200);
    assert_string_equal(got[0].kind, "gc");
    assert_string_equal(got[0].host, "tomcat");
    assert_string_equal(got[0].detail, "G1 Evacuation Pause (young) 100ms");
    assert_string_equal(got[1].detail, "Full GC, with \"quotes\"");
    free(got);
    /* All kinds overlapping [155, 600): the gc at 100–200 ends after 155. */
    assert_int_equal(tb_store_get_events(st, NULL, 155, 600, &got, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(got[0].kind, "gc");
    assert_string_equal(got[1].kind, "cpu");
    assert_string_equal(got[2].host, "tomcat2");
    free(got);
    assert_int_equal(tb_store_get_events(st, NULL, 201, 500, &got, &n), 0);
    assert_int_equal(n, 0);
    tb_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_and_newer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v6_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catalog_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_captures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_requests_export, setup, teardown),
        cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_services, setup, teardown),
        cmocka_unit_test_setup_teardown(test_analyses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_analyses_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_events, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
