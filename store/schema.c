/* SPDX-License-Identifier: MIT */
/* schema.c — the database schema as a list of migration steps, and the checks run on open.
 *
 * The schema is never edited in place: each released version appends one step
 * taking version N to N + 1, so any older file is brought up to date by the
 * steps it has not seen, in one transaction. The version lives twice: in
 * meta('schema_version') for SQL users and in PRAGMA user_version for tools
 * that read the header only; the larger of the two is believed, so a file
 * touched by a newer build is never mistaken for an older one.
 *
 * Tables (docs/storage.md describes them for users; version added in []):
 *   meta(key, value)                                         [1] app='tbneck',
 *       schema_version, next_conn (first free connection id), created_ns
 *   captures(id, source, started_ns, ended_ns, link_type, packets, bytes, ...counters)  [1]
 *   tiers(id, name, proto, configured)                       [1] ids = catalog ids
 *   servers(id, tier_id, addr 'ip:port')                      [1]
 *   hosts(id, tier_id, addr 'ip')                             [1] id - 1 = catalog host index
 *   classes(id, tier_id, fingerprint)                         [1]
 *   endpoints(id, addr 'ip')                                  [1] interned client addresses
 *   requests(capture_id, tier_id, server_id, client_id, client_port, conn, class_id,
 *            arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags)       [1]
 *       requests_tier_arrival(tier_id, arrival_ns): kept by an offline capture's
 *       writer from its start, created when a live capture ends or on the first read
 *   windows(tier_id, server_id, width_ns, start_ns, load, completions, work_units,
 *           throughput, norm_throughput, rt_mean_ns, rt_p95_ns)  WITHOUT ROWID      [1]
 *   service_times(tier_id, class_id, period_start_ns, service_ns, units, samples,
 *                 requests, method)  WITHOUT ROWID                                  [1]
 *   analyses(id, tier_id, server_id, width_ns, from_ns, to_ns, requests, n_star,
 *            n_star_fit, tp_max, slope, work_unit_ns, congested_fraction,
 *            episodes_per_min, levels (JSON array), disagree, created_ns)          [1]
 *   episodes(id, analysis_id, start_ns, end_ns, peak_load, mean_load, throughput,
 *            kind 'freeze'|'saturated')                                             [1]
 *   health(capture_id, ts_ns, packets, kernel_drops, if_drops)  WITHOUT ROWID       [2]
 *   events(id, kind, host, start_ns, end_ns, detail)                                [2]
 *   connections(conn, capture_id, client 'ip:port', server 'ip:port', tier_id,
 *               server_id (0 = protocol never recognised), open_ns, close_ns,
 *               opened 'syn'|'synack'|'midstream',
 *               closed 'open'|'fin'|'rst'|'idle'|'evicted'|'end', requests, packets,
 *               bytes_c2s, bytes_s2c)                                              [3]
 *   analyses += method_version, n_star_why (enum tb_nstar_why), n_star_reason       [4]
 *   captures += state 'running'|'complete'|'interrupted'|'partial', requests_seen,
 *               requests_lost, unanswered, abandoned, memory_evicted; requests is
 *               the number of request rows stored                                  [5]
 *   capture_tiers(capture_id, tier_id, seen, stored, unanswered, abandoned)
 *               WITHOUT ROWID                                                      [5]
 *   analyses += used_ns (last read or written: the least recently used go first
 *               beyond TB_STORE_ANALYSES_KEEP per tier and server)                 [5]
 *   links(request = requests.rowid, parent = requests.rowid or NULL, score, kind
 *         1 exact|2 ambiguous|3 scored|4 no parent)  one row per downstream request  [6]
 *   models(name, version, stamp, created_ns, bytes, parts)  WITHOUT ROWID;
 *   model_parts(name, part, data BLOB): precomputed inputs (whatif's), valid while
 *         stamp (the requests' largest row id and the captures) is unchanged         [6]
 *   requests rebuilt without declared types or NOT NULL (cheaper inserts), row ids
 *         kept                                                                       [7]
 * Raw payloads are never stored: a class is a fingerprint with literals removed. */
#include "store-int.h"

#include <stdio.h>
#include <string.h>

/* The oldest schema a read-only handle reads without migrating it: every
 * step after it left what readers query unchanged. */
#define TB__SCHEMA_READABLE 6

struct migration {
    int to;            /* version after the step */
    const char *sql;
};

static const struct migration migrations[] = {
    {1, "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;\n"
        "INSERT INTO meta(key, value) VALUES ('app', 'tbneck'), ('next_conn', 1),\n"
        "  ('created_ns', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
        " * 1000000);\n"
        "CREATE TABLE captures (\n"
        "  id INTEGER PRIMARY KEY, source TEXT NOT NULL,\n"
        "  started_ns INTEGER NOT NULL, ended_ns INTEGER, link_type INTEGER,\n"
        "  packets INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,\n"
        "  truncated INTEGER NOT NULL DEFAULT 0, non_ip INTEGER NOT NULL DEFAULT 0,\n"
        "  non_tcp INTEGER NOT NULL DEFAULT 0, ip_fragments INTEGER NOT NULL DEFAULT 0,\n"
        "  decode_errors INTEGER NOT NULL DEFAULT 0, flows INTEGER NOT NULL DEFAULT 0,\n"
        "  midstream_flows INTEGER NOT NULL DEFAULT 0,\n"
        "  evicted_flows INTEGER NOT NULL DEFAULT 0, gaps INTEGER NOT NULL DEFAULT 0,\n"
        "  gap_bytes INTEGER NOT NULL DEFAULT 0, parse_errors INTEGER NOT NULL DEFAULT 0,\n"
        "  encrypted_flows INTEGER NOT NULL DEFAULT 0,\n"
        "  inflight_dropped INTEGER NOT NULL DEFAULT 0,\n"
        "  requests INTEGER NOT NULL DEFAULT 0, kernel_drops INTEGER NOT NULL DEFAULT 0,\n"
        "  if_drops INTEGER NOT NULL DEFAULT 0, first_ns INTEGER, last_ns INTEGER);\n"
        "CREATE TABLE tiers (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,\n"
        "  proto TEXT NOT NULL, configured INTEGER NOT NULL DEFAULT 0);\n"
        "CREATE TABLE servers (id INTEGER PRIMARY KEY,\n"
        "  tier_id INTEGER NOT NULL REFERENCES tiers(id), addr TEXT NOT NULL,\n"
        "  UNIQUE (tier_id, addr));\n"
        "CREATE TABLE hosts (id INTEGER PRIMARY KEY,\n"
        "  tier_id INTEGER NOT NULL REFERENCES tiers(id), addr TEXT NOT NULL,\n"
        "  UNIQUE (tier_id, addr));\n"
        "CREATE TABLE classes (id INTEGER PRIMARY KEY,\n"
        "  tier_id INTEGER NOT NULL REFERENCES tiers(id), fingerprint TEXT NOT NULL,\n"
        "  UNIQUE (tier_id, fingerprint));\n"
        "CREATE TABLE endpoints (id INTEGER PRIMARY KEY, addr TEXT NOT NULL UNIQUE);\n"
        "CREATE TABLE requests (\n"
        "  capture_id INTEGER NOT NULL, tier_id INTEGER NOT NULL,\n"
        "  server_id INTEGER NOT NULL, client_id INTEGER NOT NULL,\n"
        "  client_port INTEGER NOT NULL, conn INTEGER NOT NULL, class_id INTEGER NOT NULL,\n"
        "  arrival_ns INTEGER NOT NULL, departure_ns INTEGER NOT NULL,\n"
        "  req_bytes INTEGER NOT NULL, resp_bytes INTEGER NOT NULL,\n"
        "  status INTEGER NOT NULL, flags INTEGER NOT NULL);\n"
        "CREATE TABLE windows (\n"
        "  tier_id INTEGER NOT NULL, server_id INTEGER NOT NULL, width_ns INTEGER NOT NULL,\n"
        "  start_ns INTEGER NOT NULL, load REAL NOT NULL, completions INTEGER NOT NULL,\n"
        "  work_units REAL NOT NULL, throughput REAL NOT NULL,\n"
        "  norm_throughput REAL NOT NULL, rt_mean_ns REAL NOT NULL,\n"
        "  rt_p95_ns REAL NOT NULL,\n"
        "  PRIMARY KEY (tier_id, server_id, width_ns, start_ns)) WITHOUT ROWID;\n"
        "CREATE TABLE service_times (\n"
        "  tier_id INTEGER NOT NULL, class_id INTEGER NOT NULL,\n"
        "  period_start_ns INTEGER NOT NULL, service_ns INTEGER NOT NULL,\n"
        "  units REAL NOT NULL, samples INTEGER NOT NULL, requests INTEGER NOT NULL,\n"
        "  method INTEGER NOT NULL,\n"
        "  PRIMARY KEY (tier_id, class_id, period_start_ns)) WITHOUT ROWID;\n"
        "CREATE TABLE analyses (\n"
        "  id INTEGER PRIMARY KEY, tier_id INTEGER NOT NULL, server_id INTEGER NOT NULL,\n"
        "  width_ns INTEGER NOT NULL, from_ns INTEGER NOT NULL, to_ns INTEGER NOT NULL,\n"
        "  requests INTEGER NOT NULL, n_star REAL, n_star_fit REAL, tp_max REAL,\n"
        "  slope REAL, work_unit_ns INTEGER NOT NULL, congested_fraction REAL,\n"
        "  episodes_per_min REAL, levels TEXT NOT NULL DEFAULT '[]',\n"
        "  disagree INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL);\n"
        "CREATE INDEX analyses_key ON analyses(tier_id, server_id, width_ns, id);\n"
        "CREATE TABLE episodes (\n"
        "  id INTEGER PRIMARY KEY,\n"
        "  analysis_id INTEGER NOT NULL REFERENCES analyses(id),\n"
        "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, peak_load REAL,\n"
        "  mean_load REAL, throughput REAL,\n"
        "  kind TEXT NOT NULL CHECK (kind IN ('freeze', 'saturated')));\n"
        "CREATE INDEX episodes_analysis ON episodes(analysis_id, start_ns);\n"},
    /* Version 2: live capture health and external events (GC logs). */
    {2, "CREATE TABLE health (\n"
        "  capture_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL, packets INTEGER NOT NULL,\n"
        "  kernel_drops INTEGER NOT NULL, if_drops INTEGER NOT NULL,\n"
        "  PRIMARY KEY (capture_id, ts_ns)) WITHOUT ROWID;\n"
        "CREATE INDEX health_ts ON health(ts_ns);\n"
        "CREATE TABLE events (\n"
        "  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, host TEXT NOT NULL,\n"
        "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,\n"
        "  detail TEXT NOT NULL DEFAULT '');\n"
        "CREATE INDEX events_kind_start ON events(kind, start_ns);\n"},
    /* Version 3: every TCP connection the tap saw, idle pooled ones too. */
    {3, "CREATE TABLE connections (\n"
        "  conn INTEGER PRIMARY KEY, capture_id INTEGER NOT NULL,\n"
        "  client TEXT NOT NULL, server TEXT NOT NULL,\n"
        "  tier_id INTEGER NOT NULL DEFAULT 0, server_id INTEGER NOT NULL DEFAULT 0,\n"
        "  open_ns INTEGER NOT NULL, close_ns INTEGER NOT NULL,\n"
        "  opened TEXT NOT NULL, closed TEXT NOT NULL,\n"
        "  requests INTEGER NOT NULL, packets INTEGER NOT NULL,\n"
        "  bytes_c2s INTEGER NOT NULL, bytes_s2c INTEGER NOT NULL);\n"
        "CREATE INDEX connections_open ON connections(open_ns);\n"},
    /* Version 4: whether and why a knee was shown (correlate.h "the knee
     * test"), and the analysis method's version, so that an analysis made by
     * an older method is recomputed instead of reused (the rows before it
     * have version 0). */
    {4, "ALTER TABLE analyses ADD COLUMN method_version INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE analyses ADD COLUMN n_star_why INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE analyses ADD COLUMN n_star_reason TEXT NOT NULL DEFAULT '';\n"},
    /* Version 5 (issue 13): what a capture is worth. `state` says whether it
     * is still running, ended with everything stored, was stopped before its
     * input ended (a signal, a bad file), or lost requests it saw (a full
     * disk): readers say "partial data" for the last. `requests` becomes the
     * rows actually stored (it was the engine's count, which a full disk
     * made a lie); what was seen and lost sits beside it. Requests that got
     * no answer are counted per tier. Older rows are taken as they were:
     * complete unless never ended. used_ns lets stored analyses be evicted
     * least recently used first. */
    {5, "ALTER TABLE captures ADD COLUMN state TEXT NOT NULL DEFAULT 'complete'\n"
        "  CHECK (state IN ('running', 'complete', 'interrupted', 'partial'));\n"
        "UPDATE captures SET state = 'running' WHERE ended_ns IS NULL;\n"
        "ALTER TABLE captures ADD COLUMN requests_seen INTEGER NOT NULL DEFAULT 0;\n"
        "UPDATE captures SET requests_seen = requests;\n"
        "ALTER TABLE captures ADD COLUMN requests_lost INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE captures ADD COLUMN unanswered INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE captures ADD COLUMN abandoned INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE captures ADD COLUMN memory_evicted INTEGER NOT NULL DEFAULT 0;\n"
        "CREATE TABLE capture_tiers (\n"
        "  capture_id INTEGER NOT NULL, tier_id INTEGER NOT NULL,\n"
        "  seen INTEGER NOT NULL, stored INTEGER NOT NULL,\n"
        "  unanswered INTEGER NOT NULL, abandoned INTEGER NOT NULL,\n"
        "  PRIMARY KEY (capture_id, tier_id)) WITHOUT ROWID;\n"
        "ALTER TABLE analyses ADD COLUMN used_ns INTEGER NOT NULL DEFAULT 0;\n"
        "UPDATE analyses SET used_ns = created_ns;\n"
        "CREATE INDEX analyses_range ON analyses(tier_id, server_id, width_ns, from_ns, to_ns);\n"},
    /* Version 6 (issue 14): links computed once are kept — each downstream
     * request's parent and how sure the linker was — and so are the inputs
     * whatif's model takes from the linked trees, so that a what-if on 10 M
     * requests reads a few aggregates instead of relinking every request.
     * Both are derived: dropping them loses nothing but time. */
    {6, "CREATE TABLE links (request INTEGER PRIMARY KEY, parent INTEGER,\n"
        "  score REAL NOT NULL, kind INTEGER NOT NULL);\n"
        "CREATE TABLE models (name TEXT PRIMARY KEY, version INTEGER NOT NULL,\n"
        "  stamp TEXT NOT NULL, created_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
        "  parts INTEGER NOT NULL) WITHOUT ROWID;\n"
        "CREATE TABLE model_parts (name TEXT NOT NULL, part INTEGER NOT NULL,\n"
        "  data BLOB NOT NULL, UNIQUE (name, part));\n"},
    /* Version 7 (issue 17, storage cost): requests without declared types or
     * NOT NULL. Every value comes from the writer as a C integer, so neither
     * ever changed a stored byte, but SQLite paid for both on every row: 13
     * HaltIfNull steps and an integer affinity per column, about 510 of the
     * 4 760 instructions a row costs to insert and index (callgrind, the
     * 300 000-row synthetic capture; storage.md "What storage costs"). The
     * types stay in the comments, which SQLite keeps in sqlite_master. The
     * table is rebuilt with the rows' ids kept (links and the model stamps
     * refer to them); the read index goes with the old table and comes back
     * after the step when there were rows (step_done). */
    {7, "CREATE TABLE requests_v7 (\n"
        "  capture_id /* INTEGER */, tier_id /* INTEGER */, server_id /* INTEGER */,\n"
        "  client_id /* INTEGER */, client_port /* INTEGER */, conn /* INTEGER */,\n"
        "  class_id /* INTEGER */, arrival_ns /* INTEGER */, departure_ns /* INTEGER */,\n"
        "  req_bytes /* INTEGER */, resp_bytes /* INTEGER */, status /* INTEGER */,\n"
        "  flags /* INTEGER; undeclared, and no null checks: schema.c version 7 */);\n"
        "INSERT INTO requests_v7(rowid, capture_id, tier_id, server_id, client_id,\n"
        "  client_port, conn, class_id, arrival_ns, departure_ns, req_bytes, resp_bytes,\n"
        "  status, flags)\n"
        "  SELECT rowid, capture_id, tier_id, server_id, client_id, client_port, conn,\n"
        "  class_id, arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags\n"
        "  FROM requests ORDER BY rowid;\n"
        "DROP TABLE requests;\n"
        "ALTER TABLE requests_v7 RENAME TO requests;\n"},
};

_Static_assert(sizeof migrations / sizeof migrations[0] == TB_STORE_SCHEMA_VERSION,
               "one migration step per schema version");

/* One integer from a query; *found = false when it returns no row. */
static int query_int(struct tb__db *d, const char *sql, int64_t *v, bool *found, int *src_out)
{
    sqlite3_stmt *s = NULL;
    int src = sqlite3_prepare_v2(d->db, sql, -1, &s, NULL);
    *found = false;
    if (src == SQLITE_OK) {
        src = sqlite3_step(s);
        if (src == SQLITE_ROW) {
            *v = sqlite3_column_int64(s, 0);
            *found = true;
            src = SQLITE_OK;
        } else if (src == SQLITE_DONE) {
            src = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    *src_out = src;
    return src == SQLITE_OK ? 0 : TB_E_DB;
}

/* The version the file says it has: 0 for an empty database, -1 when the file
 * is an SQLite database of something else (errbuf says why). */
static int read_version(struct tb__db *d, int64_t *version, char *errbuf, size_t errlen)
{
    int64_t uv = 0, ntables = 0, has_meta = 0, meta_ver = 0;
    bool found;
    int src;
    /* The first read of the file's header: where a non-database shows. */
    if (query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", &ntables,
                  &found, &src)) {
        if ((src & 0xff) == SQLITE_NOTADB) {
            snprintf(errbuf, errlen, "%s: not a tbneck database (not an SQLite file)", d->path);
            return TB_E_BADFMT;
        }
        goto dberr;
    }
    if (query_int(d, "PRAGMA user_version", &uv, &found, &src) ||
        query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                  &has_meta, &found, &src))
        goto dberr;
    if (!has_meta) {
        if (ntables == 0 && uv == 0) {
            *version = 0;
            return 0;
        }
        snprintf(errbuf, errlen, "%s: an SQLite database but not a tbneck one (no meta table)",
                 d->path);
        return TB_E_BADFMT;
    }
    sqlite3_stmt *s = NULL;
    bool is_tbneck = false;
    if (sqlite3_prepare_v2(d->db, "SELECT value FROM meta WHERE key = 'app'", -1, &s, NULL) !=
        SQLITE_OK) {
        sqlite3_finalize(s);
        snprintf(errbuf, errlen, "%s: an SQLite database but not a tbneck one (its meta table "
                 "has no key/value)", d->path);
        return TB_E_BADFMT;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        const unsigned char *app = sqlite3_column_text(s, 0);
        is_tbneck = app && strcmp((const char *)app, "tbneck") == 0;
    }
    sqlite3_finalize(s);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        goto dberr;
    if (!is_tbneck) {
        snprintf(errbuf, errlen, "%s: an SQLite database but not a tbneck one (meta.app is not "
                 "'tbneck')", d->path);
        return TB_E_BADFMT;
    }
    if (query_int(d, "SELECT value FROM meta WHERE key = 'schema_version'", &meta_ver, &found,
                  &src))
        goto dberr;
    if (!found) {
        snprintf(errbuf, errlen, "%s: damaged tbneck database (no schema_version in meta)",
                 d->path);
        return TB_E_BADFMT;
    }
    *version = TB_MAX(uv, meta_ver);
    return 0;
dberr:
    /* A truncated or overwritten file: say so rather than "cannot read". */
    if ((src & 0xff) == SQLITE_CORRUPT) {
        snprintf(errbuf, errlen, "%s: damaged database file (SQLite: %s)", d->path,
                 sqlite3_errmsg(d->db));
        return TB_E_BADFMT;
    }
    snprintf(errbuf, errlen, "%s: cannot read: %s", d->path, sqlite3_errmsg(d->db));
    return (src & 0xff) == SQLITE_IOERR || (src & 0xff) == SQLITE_CANTOPEN ? TB_E_IO : TB_E_DB;
}

static int migrate(struct tb__db *d, char *errbuf, size_t errlen)
{
    int64_t version = 0;
    char sql[160];
    int rc;
    if (sqlite3_exec(d->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s: cannot lock for migration: %s", d->path,
                 sqlite3_errmsg(d->db));
        return TB_E_DB;
    }
    /* Read again under the lock: another process may have migrated the file
     * between our first look and now. */
    if ((rc = read_version(d, &version, errbuf, errlen)))
        goto out;
    /* Step 7 rebuilds requests, which drops its read index: an index the
     * file had comes back after the steps, so readers do not sort anew. */
    int64_t had_index = 0;
    bool found;
    int src;
    if (version >= 1 && version < 7 &&
        query_int(d, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                  "name = 'requests_tier_arrival'", &had_index, &found, &src)) {
        snprintf(errbuf, errlen, "%s: cannot read the schema: %s", d->path,
                 sqlite3_errmsg(d->db));
        rc = TB_E_DB;
        goto out;
    }
    for (size_t i = 0; i < TB_ARRAY_SIZE(migrations); i++) {
        if (migrations[i].to <= version)
            continue;
        snprintf(sql, sizeof sql,
                 "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', %d);"
                 "PRAGMA user_version = %d;", migrations[i].to, migrations[i].to);
        if (sqlite3_exec(d->db, migrations[i].sql, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            snprintf(errbuf, errlen, "%s: migration to schema %d failed: %s", d->path,
                     migrations[i].to, sqlite3_errmsg(d->db));
            rc = TB_E_DB;
            goto out;
        }
    }
    if (had_index && sqlite3_exec(d->db, "CREATE INDEX requests_tier_arrival ON "
                                         "requests(tier_id, arrival_ns)", NULL, NULL,
                                  NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s: migration to schema 7 failed (read index): %s", d->path,
                 sqlite3_errmsg(d->db));
        rc = TB_E_DB;
        goto out;
    }
    if (sqlite3_exec(d->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s: cannot commit the migration: %s", d->path,
                 sqlite3_errmsg(d->db));
        rc = TB_E_DB;
    }
out:
    if (rc)
        sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int tb__schema_check(struct tb__db *d, bool create, char *errbuf, size_t errlen)
{
    int64_t version = 0;
    int rc = read_version(d, &version, errbuf, errlen);
    if (rc)
        return rc;
    if (version == 0 && !create) {
        snprintf(errbuf, errlen, "%s: empty file, not a tbneck database", d->path);
        return TB_E_BADFMT;
    }
    if (version > TB_STORE_SCHEMA_VERSION) {
        snprintf(errbuf, errlen, "%s: written by a newer tbneck (schema %lld, this build knows %d)",
                 d->path, (long long)version, TB_STORE_SCHEMA_VERSION);
        return TB_E_DBVER;
    }
    if (d->readonly) {
        /* Schema 7 changed how requests are stored, not what a reader sees
         * (the same tables and columns): a read-only reader takes a schema 6
         * file as it is rather than asking for a migration it cannot make. */
        if (version < TB_STORE_SCHEMA_VERSION && version < TB__SCHEMA_READABLE) {
            snprintf(errbuf, errlen, "%s: schema %lld needs migrating to %d; open it once "
                     "without read-only (e.g. tbneck serve)", d->path, (long long)version,
                     TB_STORE_SCHEMA_VERSION);
            return TB_E_UNSUPP;
        }
        return 0;
    }
    /* WAL lets reports and the web server read while a capture writes;
     * NORMAL sync is durable across a process crash, which is what matters
     * for a monitor (a power loss may lose the last batches, never corrupt). */
    /* Larger pages: fewer b-tree splits per request row in bulk inserts.
     * Only a file without tables can still change its page size. */
    if (version == 0 && tb__db_exec(d, "PRAGMA page_size = 16384")) {
        snprintf(errbuf, errlen, "%s: cannot set the page size: %s", d->path,
                 sqlite3_errmsg(d->db));
        return TB_E_DB;
    }
    if (tb__db_exec(d, "PRAGMA journal_mode = WAL") ||
        tb__db_exec(d, "PRAGMA synchronous = NORMAL")) {
        snprintf(errbuf, errlen, "%s: cannot set up the journal: %s", d->path,
                 sqlite3_errmsg(d->db));
        return TB_E_DB;
    }
    if (version < TB_STORE_SCHEMA_VERSION)
        return migrate(d, errbuf, errlen);
    return 0;
}
