/* SPDX-License-Identifier: MIT */
/* ch.c — the ClickHouse store over its HTTP interface (libcurl), rows in RowBinary both ways.
 *
 * RowBinary rather than a text format: strings travel as a length and their
 * bytes, so a fingerprint holding a tab, a quote or invalid UTF-8 comes back
 * byte for byte without an escaping rule on either side; integers are
 * little-endian fixed width. The SQL is kept to what ClickHouse 18.16
 * (Debian's) and current releases both accept: MergeTree() with ORDER BY,
 * String/Int/UInt columns, FORMAT RowBinary. */
#include "ch.h"
#include "ch-int.h"
#include "store-int.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "util.h"

struct text_slot {
    char *text; /* NULL = not formatted yet */
    size_t len;
    uint64_t hash;
};

struct tb_ch {
    CURL *curl;
    char base[320]; /* http://host:port/ of the endpoint spoken to */
    char where[300]; /* host:port, for messages */
    char db[64];
    char cluster[64]; /* "" = one server */
    int64_t retry_ns;  /* tb_ch_set_retry */
    int last_cc;       /* the last request's CURLcode */
    bool told;         /* the "retrying" line was logged */
    int64_t answering_ns; /* since when the server answers (0: the last request failed) */
    int64_t started_ns;   /* when opened (CLOCK_REALTIME): names this run's batches */
    uint64_t batches;     /* offline: batches sent so far */
    char sensor[65];
    struct tb_buf body; /* queued rows, RowBinary */
    struct tb_buf conns; /* queued connections */
    uint64_t nconns, conn_lo, conn_hi; /* their count and conn ids' range */
    size_t queued;
    uint64_t rows, seq;
    struct text_slot *servers, *classes, *tiers; /* by catalog id */
    size_t nservers, nclasses, ntiers;
    char err[512];
};

/* ---- URLs -------------------------------------------------------------------------------- */

static bool ident_ok(const char *s, size_t n, size_t max)
{
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

int tb_store_url_parse(const char *url, struct tb_store_url *u, char *err, size_t errlen)
{
    static const char ch_scheme[] = "clickhouse://";
    memset(u, 0, sizeof *u);
    if (!strncmp(url, "sqlite:", 7)) {
        u->kind = TB_STORE_KIND_SQLITE;
        u->path = url + 7;
        if (!*u->path) {
            snprintf(err, errlen, "--store %s: no file after 'sqlite:'", url);
            return TB_E_INVAL;
        }
        return 0;
    }
    if (strncmp(url, ch_scheme, sizeof ch_scheme - 1)) {
        snprintf(err, errlen, "--store %s: expected sqlite:FILE or "
                 "clickhouse://HOST:PORT/DATABASE[?cluster=NAME]", url);
        return TB_E_INVAL;
    }
    u->kind = TB_STORE_KIND_CLICKHOUSE;
    const char *p = url + sizeof ch_scheme - 1;
    char *end;
    for (;;) {
        const char *h, *he;
        if (u->nep == TB_CH_MAX_SHARDS) {
            snprintf(err, errlen, "--store %s: at most %d endpoints", url, TB_CH_MAX_SHARDS);
            return TB_E_INVAL;
        }
        struct tb_ch_endpoint *e = &u->ep[u->nep];
        if (*p == '[') {
            h = p + 1;
            he = strchr(h, ']');
            p = he ? he + 1 : NULL;
        } else {
            h = p;
            he = p + strcspn(p, ":/?,");
            p = he;
        }
        if (!p || he == h || (size_t)(he - h) >= sizeof e->host || *p != ':') {
            snprintf(err, errlen, "--store %s: expected HOST:PORT after clickhouse://", url);
            return TB_E_INVAL;
        }
        memcpy(e->host, h, (size_t)(he - h));
        unsigned long port = strtoul(p + 1, &end, 10);
        if (end == p + 1 || port == 0 || port > 65535 || (*end != '/' && *end != ',')) {
            snprintf(err, errlen, "--store %s: expected a port (1-65535) and /DATABASE", url);
            return TB_E_INVAL;
        }
        e->port = (unsigned)port;
        u->nep++;
        if (*end == '/')
            break;
        p = end + 1;
    }
    const char *d = end + 1, *de = d + strcspn(d, "?");
    if (!ident_ok(d, (size_t)(de - d), sizeof u->db)) {
        snprintf(err, errlen, "--store %s: the database name must be letters, digits or '_' "
                 "(at most %zu)", url, sizeof u->db - 1);
        return TB_E_INVAL;
    }
    memcpy(u->db, d, (size_t)(de - d));
    if (*de == '?') {
        const char *c = de + 1;
        if (strncmp(c, "cluster=", 8) || !ident_ok(c + 8, strlen(c + 8), sizeof u->cluster)) {
            snprintf(err, errlen, "--store %s: the only option is ?cluster=NAME (letters, "
                     "digits, '_')", url);
            return TB_E_INVAL;
        }
        memcpy(u->cluster, c + 8, strlen(c + 8));
    }
    if (u->nep > 1 && !u->cluster[0]) {
        snprintf(err, errlen, "--store %s: several HOST:PORT are a cluster's shards; name it "
                 "with ?cluster=NAME", url);
        return TB_E_INVAL;
    }
    return 0;
}

/* ---- HTTP -------------------------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    tb_buf_add(ud, p, size * n);
    return tb_buf_ok(ud) ? size * n : 0;
}

/* One request: the SQL in the URL when a body of data goes with it, else the
 * SQL is the body. The response (or ClickHouse's error text) lands in resp. */
static int http_id(struct tb_ch *ch, const char *sql, const void *data, size_t len,
                   const char *query_id, struct tb_buf *resp)
{
    char *url = NULL;
    int rc = 0;
    resp->len = 0;
    if (data) {
        char *q = curl_easy_escape(ch->curl, sql, 0);
        char *id = query_id ? curl_easy_escape(ch->curl, query_id, 0) : NULL;
        if (!q || (query_id && !id)) {
            curl_free(q);
            curl_free(id);
            return TB_E_NOMEM;
        }
        size_t n = strlen(ch->base) + strlen(q) + (id ? strlen(id) : 0) + 64;
        url = malloc(n);
        if (url)
            snprintf(url, n, "%s?query=%s%s%s%s", ch->base, q,
                     ch->cluster[0] ? "&insert_distributed_sync=1" : "", id ? "&query_id=" : "",
                     id ? id : "");
        curl_free(q);
        curl_free(id);
        if (!url)
            return TB_E_NOMEM;
    } else {
        data = sql;
        len = strlen(sql);
    }
    curl_easy_setopt(ch->curl, CURLOPT_URL, url ? url : ch->base);
    curl_easy_setopt(ch->curl, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(ch->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(ch->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(ch->curl, CURLOPT_WRITEDATA, resp);
    CURLcode cc = curl_easy_perform(ch->curl);
    /* Nothing reached the server: wait for it, as long as we were told to. */
    for (int64_t waited = 0;
         (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) &&
         waited < ch->retry_ns;
         waited += TB_NS_PER_SEC) {
        if (!ch->told) {
            tb_log_warn("clickhouse at %s: %s; trying again every second for up to %lld s",
                        ch->where, curl_easy_strerror(cc),
                        (long long)(ch->retry_ns / TB_NS_PER_SEC));
            ch->told = true;
        }
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        resp->len = 0;
        cc = curl_easy_perform(ch->curl);
    }
    long code = 0;
    ch->last_cc = (int)cc;
    curl_easy_getinfo(ch->curl, CURLINFO_RESPONSE_CODE, &code);
    if (cc != CURLE_OK) {
        snprintf(ch->err, sizeof ch->err, "clickhouse at %s: %s", ch->where,
                 curl_easy_strerror(cc));
        rc = TB_E_IO;
    } else if (!tb_buf_ok(resp)) {
        rc = TB_E_NOMEM;
    } else if (code != 200) {
        /* ClickHouse's message is the body's first line ("Code: 60, e.displayText() = ..."). */
        size_t n = resp->len;
        const char *nl = resp->p ? memchr(resp->p, '\n', n) : NULL;
        if (nl)
            n = (size_t)(nl - resp->p);
        snprintf(ch->err, sizeof ch->err, "clickhouse at %s: HTTP %ld: %.*s", ch->where, code,
                 (int)TB_MIN(n, 400), resp->p ? resp->p : "");
        rc = TB_E_DB;
    }
    /* tb__ch_settle's clock: a failure restarts it. */
    if (rc)
        ch->answering_ns = 0;
    free(url);
    return rc;
}

static int http(struct tb_ch *ch, const char *sql, const void *data, size_t len,
                struct tb_buf *resp)
{
    return http_id(ch, sql, data, len, NULL, resp);
}

static int exec_sql(struct tb_ch *ch, const char *sql)
{
    struct tb_buf r;
    tb_buf_init(&r);
    int rc = http(ch, sql, NULL, 0, &r);
    tb_buf_free(&r);
    return rc;
}

/* ---- RowBinary --------------------------------------------------------------------------- */

static void put_le(struct tb_buf *b, uint64_t v, int bytes)
{
    uint8_t x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    tb_buf_add(b, x, (size_t)bytes);
}

static void put_str(struct tb_buf *b, const char *s, size_t n)
{
    uint8_t v[10];
    int k = 0;
    uint64_t len = n;
    do {
        v[k] = (uint8_t)(len & 0x7f);
        len >>= 7;
        if (len)
            v[k] |= 0x80;
        k++;
    } while (len);
    tb_buf_add(b, v, (size_t)k);
    tb_buf_add(b, s, n);
}

struct rd {
    const uint8_t *p, *end;
};

static bool get_le(struct rd *r, int bytes, uint64_t *v)
{
    if (r->end - r->p < bytes)
        return false;
    *v = 0;
    for (int i = 0; i < bytes; i++)
        *v |= (uint64_t)r->p[i] << (8 * i);
    r->p += bytes;
    return true;
}

static bool get_str(struct rd *r, const char **s, size_t *n)
{
    uint64_t len = 0;
    for (int shift = 0;; shift += 7) {
        if (r->p == r->end || shift > 63)
            return false;
        uint8_t c = *r->p++;
        len |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    if ((uint64_t)(r->end - r->p) < len)
        return false;
    *s = (const char *)r->p;
    *n = (size_t)len;
    r->p += len;
    return true;
}

#define SHORT_ROW 1 /* a row parser's "the answer ended inside me" */
static int scan(struct tb_ch *ch, const char *sql, int (*row)(struct rd *d, void *arg),
                void *arg);

/* ---- the store --------------------------------------------------------------------------- */

uint64_t tb_ch_fnv1a(const void *p, size_t len, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The tables, each with %s for the database and %s for the suffix ("" on one
 * server, "_local" under a cluster's Distributed tables). */
static const char table_sql[] =
    "CREATE TABLE IF NOT EXISTS %s.requests%s (sensor String, tier String, proto String, "
    "tier_hash UInt64, server String, client String, conn UInt64, class String, "
    "class_hash UInt64, arrival_ns Int64, departure_ns Int64, req_bytes UInt64, "
    "resp_bytes UInt64, status Int32, flags UInt32, seq UInt64) "
    "ENGINE = MergeTree() ORDER BY (tier, arrival_ns, conn, sensor, seq)";

static const char hosts_sql[] =
    "CREATE TABLE IF NOT EXISTS %s.hosts%s (sensor String, tier String, addr String) "
    "ENGINE = MergeTree() ORDER BY (tier, addr, sensor)";

static const char conns_sql[] =
    "CREATE TABLE IF NOT EXISTS %s.connections%s (sensor String, conn UInt64, client String, "
    "server String, tier String, proto String, server_addr String, open_ns Int64, "
    "close_ns Int64, opened UInt8, closed UInt8, requests UInt64, packets UInt64, "
    "bytes_c2s UInt64, bytes_s2c UInt64) ENGINE = MergeTree() ORDER BY (sensor, conn)";

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool sensor_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

static void set_endpoint(struct tb_ch *ch, const struct tb_ch_endpoint *e)
{
    bool v6 = strchr(e->host, ':') != NULL;
    snprintf(ch->where, sizeof ch->where, "%s%s%s:%u", v6 ? "[" : "", e->host, v6 ? "]" : "",
             e->port);
    snprintf(ch->base, sizeof ch->base, "http://%s/", ch->where);
}

/* The tables on the endpoint spoken to: plain MergeTree on one server; under
 * a cluster the shard's MergeTree tables and the Distributed ones over all. */
static int create_tables(struct tb_ch *ch)
{
    static const char *const names[] = {"requests", "connections", "hosts"};
    /* By server, so each server's requests — and so its windows — live on one
     * shard; hosts by address. */
    static const char *const keys[] = {"cityHash64(server)", "cityHash64(server)",
                                       "cityHash64(addr)"};
    char sql[1024];
    int rc;
    snprintf(sql, sizeof sql, "CREATE DATABASE IF NOT EXISTS %s", ch->db);
    if ((rc = exec_sql(ch, sql)))
        return rc;
    const char *sfx = ch->cluster[0] ? "_local" : "";
    for (size_t i = 0; i < TB_ARRAY_SIZE(names); i++) {
        /* Literal formats, so that the compiler checks them. */
        if (i == 0)
            snprintf(sql, sizeof sql, table_sql, ch->db, sfx);
        else if (i == 1)
            snprintf(sql, sizeof sql, conns_sql, ch->db, sfx);
        else
            snprintf(sql, sizeof sql, hosts_sql, ch->db, sfx);
        if ((rc = exec_sql(ch, sql)))
            return rc;
        if (!ch->cluster[0])
            continue;
        snprintf(sql, sizeof sql,
                 "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_local ENGINE = Distributed(%s, %s, "
                 "%s_local, %s)", ch->db, names[i], ch->db, names[i], ch->cluster, ch->db,
                 names[i], keys[i]);
        if ((rc = exec_sql(ch, sql)))
            return rc;
    }
    return 0;
}

/* The entry endpoint's system.clusters must list as many shards as the URL
 * names endpoints: the tables are made on those, the rows go to those. */
static int check_cluster(struct tb_ch *ch, const struct tb_store_url *u)
{
    char sql[256];
    struct tb_buf r;
    uint64_t n = 0;
    set_endpoint(ch, &u->ep[0]);
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT shard_num) FROM system.clusters "
             "WHERE cluster = '%s' FORMAT RowBinary", u->cluster);
    tb_buf_init(&r);
    int rc = http(ch, sql, NULL, 0, &r);
    if (!rc) {
        struct rd d = {(const uint8_t *)r.p, (const uint8_t *)r.p + r.len};
        if (!get_le(&d, 8, &n)) {
            snprintf(ch->err, sizeof ch->err, "clickhouse at %s: short answer", ch->where);
            rc = TB_E_BADFMT;
        } else if (n != u->nep) {
            snprintf(ch->err, sizeof ch->err, "clickhouse at %s: cluster %s has %llu shards in "
                     "system.clusters, the URL names %zu (one HOST:PORT, the HTTP interface, "
                     "per shard)", ch->where, u->cluster, (unsigned long long)n, u->nep);
            rc = TB_E_INVAL;
        }
    }
    tb_buf_free(&r);
    return rc;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

static int64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

void tb__ch_batch_id(const struct tb_ch *ch, uint64_t no, char *buf, size_t n)
{
    snprintf(buf, n, "tbneck-%s-%" PRId64 "-%" PRIu64, ch->sensor, ch->started_ns, no);
}

static bool all_digits(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

bool tb__ch_is_staging(const char *name, const char *sensor)
{
    size_t n = strlen(name), sn = strlen(sensor);
    /* tbneck-SENSOR-START-NO: the sensor may hold '-', so read from the end. */
    const char *no = memrchr(name, '-', n);
    if (!no || !all_digits(no + 1, n - (size_t)(no - name) - 1))
        return false;
    const char *start = no > name ? memrchr(name, '-', (size_t)(no - name)) : NULL;
    if (!start || !all_digits(start + 1, (size_t)(no - start) - 1))
        return false;
    return (size_t)(start - name) == 7 + sn && !strncmp(name, "tbneck-", 7) &&
           !memcmp(name + 7, sensor, sn);
}

void tb__ch_drop_staging(struct tb_ch *ch, const char *query_id)
{
    char sql[512];
    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s.`%s`", ch->db, query_id);
    exec_sql(ch, sql);
}

static int name_row(struct rd *d, void *arg)
{
    const char *s;
    size_t n;
    if (!get_str(d, &s, &n))
        return SHORT_ROW;
    /* Names NUL-separated; a name cannot hold a NUL worth keeping. */
    tb_buf_add(arg, s, n);
    tb_buf_add(arg, "", 1);
    return 0;
}

/* A fill that never succeeded (the capture gave up while the server failed,
 * or it was killed) leaves its staging table behind: the next capture of the
 * same sensor drops it, since only one capture of a sensor runs at a time and
 * a batch it left in a spool is filled under this run's id, never the old one.
 * Best effort: a table that cannot be listed or dropped is said in a warning
 * line and left (readers never read it); the capture goes on. */
static void drop_leftovers(struct tb_ch *ch)
{
    char sql[256];
    struct tb_buf names;
    unsigned dropped = 0;
    tb_buf_init(&names);
    snprintf(sql, sizeof sql, "SELECT name FROM system.tables WHERE database = '%s' AND name "
             "LIKE 'tbneck-%%' FORMAT RowBinary", ch->db);
    int rc = scan(ch, sql, name_row, &names);
    if (!rc && !tb_buf_ok(&names))
        rc = TB_E_NOMEM;
    for (size_t at = 0; !rc && at < names.len; at += strlen(names.p + at) + 1) {
        const char *name = names.p + at;
        if (!tb__ch_is_staging(name, ch->sensor))
            continue;
        snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s.`%s`", ch->db, name);
        if (!(rc = exec_sql(ch, sql)))
            dropped++;
    }
    if (dropped)
        tb_log_warn("clickhouse at %s: dropped %u staging table%s an earlier capture of sensor %s "
                    "left (the completion of a batch held in part that never succeeded)",
                    ch->where, dropped, dropped == 1 ? "" : "s", ch->sensor);
    if (rc)
        tb_log_warn("%s: the staging tables an earlier capture of sensor %s may have left (%s.`"
                    "tbneck-%s-*`) are not dropped", ch->err[0] ? ch->err : tb_strerror(rc),
                    ch->sensor, ch->db, ch->sensor);
    ch->err[0] = '\0';
    tb_buf_free(&names);
}

void tb_ch_set_retry(struct tb_ch *ch, int64_t ns)
{
    ch->retry_ns = ns > 0 ? ns : 0;
}

int tb_ch_open(struct tb_ch **out, const struct tb_store_url *u, const char *sensor,
               bool create, int64_t retry_ns, char *err, size_t errlen)
{
    char sql[1024];
    int rc;
    *out = NULL;
    if (u->kind != TB_STORE_KIND_CLICKHOUSE)
        return TB_E_INVAL;
    if (!sensor_ok(sensor)) {
        snprintf(err, errlen, "--sensor %s: 1 to 64 letters, digits or '_.:-'", sensor);
        return TB_E_INVAL;
    }
    pthread_once(&curl_once, curl_init);
    struct tb_ch *ch = calloc(1, sizeof *ch);
    if (!ch)
        return TB_E_NOMEM;
    tb_buf_init(&ch->body);
    tb_buf_init(&ch->conns);
    tb_ch_set_retry(ch, retry_ns);
    ch->started_ns = wall_ns();
    snprintf(ch->db, sizeof ch->db, "%s", u->db);
    snprintf(ch->cluster, sizeof ch->cluster, "%s", u->cluster);
    snprintf(ch->sensor, sizeof ch->sensor, "%s", sensor);
    ch->curl = curl_easy_init();
    if (!ch->curl) {
        rc = TB_E_NOMEM;
        goto out;
    }
    curl_easy_setopt(ch->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ch->curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(ch->curl, CURLOPT_PROTOCOLS_STR, "http");
    if (u->cluster[0] && (rc = check_cluster(ch, u)))
        goto out;
    /* The entry endpoint last, so that it is the one spoken to afterwards. */
    for (size_t i = create ? u->nep : 1; i-- > 0;) {
        set_endpoint(ch, &u->ep[i]);
        if (create && (rc = create_tables(ch)))
            goto out;
    }
    snprintf(sql, sizeof sql, "SELECT count() FROM %s.requests WHERE 0", ch->db);
    if ((rc = exec_sql(ch, sql)))
        goto out;
    if (create)
        drop_leftovers(ch);
    *out = ch;
    ch = NULL;
out:
    if (ch) {
        snprintf(err, errlen, "%s", ch->err[0] ? ch->err : tb_strerror(rc));
        tb_ch_close(ch);
    }
    return rc;
}

static void slots_free(struct text_slot *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i].text);
    free(s);
}

void tb_ch_close(struct tb_ch *ch)
{
    if (!ch)
        return;
    if (ch->curl)
        curl_easy_cleanup(ch->curl);
    tb_buf_free(&ch->body);
    tb_buf_free(&ch->conns);
    slots_free(ch->servers, ch->nservers);
    slots_free(ch->classes, ch->nclasses);
    slots_free(ch->tiers, ch->ntiers);
    free(ch);
}

const char *tb_ch_error(const struct tb_ch *ch)
{
    return ch->err;
}

uint64_t tb_ch_rows(const struct tb_ch *ch)
{
    return ch->rows;
}

int tb_ch_next_conn(struct tb_ch *ch, uint64_t *conn)
{
    char sql[256];
    struct tb_buf r;
    snprintf(sql, sizeof sql, "SELECT max(conn), max(seq), count() FROM %s.requests "
             "WHERE sensor = '%s' FORMAT RowBinary", ch->db, ch->sensor);
    tb_buf_init(&r);
    int rc = http(ch, sql, NULL, 0, &r);
    if (rc == 0) {
        struct rd d = {(const uint8_t *)r.p, (const uint8_t *)r.p + r.len};
        uint64_t mc, ms, n;
        if (!get_le(&d, 8, &mc) || !get_le(&d, 8, &ms) || !get_le(&d, 8, &n)) {
            snprintf(ch->err, sizeof ch->err, "clickhouse at %s: short answer to max(conn)",
                     ch->where);
            rc = TB_E_BADFMT;
        } else {
            *conn = n ? mc + 1 : 1;
            ch->seq = n ? ms + 1 : 1;
        }
    }
    tb_buf_free(&r);
    return rc;
}

/* The text and hash of a catalog entry, formatted on its first request. */
static struct text_slot *slot(struct text_slot **arr, size_t *n, uint32_t id)
{
    if ((size_t)id >= *n && tb_grow_zero(arr, n, (size_t)id + 1, sizeof **arr))
        return NULL;
    return &(*arr)[id];
}

static int slot_set(struct text_slot *s, const char *text, size_t len, uint64_t hash)
{
    s->text = malloc(len + 1);
    if (!s->text)
        return TB_E_NOMEM;
    memcpy(s->text, text, len);
    s->text[len] = '\0';
    s->len = len;
    s->hash = hash;
    return 0;
}

int tb__ch_put_request(struct tb_ch *ch, const struct tb_catalog *cat,
                       const struct tb_request *r, struct tb_buf *b, uint64_t *seq)
{
    struct text_slot *t = slot(&ch->tiers, &ch->ntiers, r->tier);
    struct text_slot *sv = slot(&ch->servers, &ch->nservers, r->server);
    struct text_slot *cl = slot(&ch->classes, &ch->nclasses, r->class_id);
    int rc;
    if (!t || !sv || !cl)
        return TB_E_NOMEM;
    const struct tb_tier_info *ti = tb_catalog_tier_get(cat, r->tier);
    if (!ti)
        return TB_E_NOTFOUND;
    if (!t->text) {
        /* The tier's slot holds its name; its protocol is read from the catalog. */
        size_t n = strlen(ti->name);
        if ((rc = slot_set(t, ti->name, n, tb_ch_fnv1a(ti->name, n, TB_CH_FNV_SEED))))
            return rc;
    }
    if (!sv->text) {
        const struct tb_server_info *si = tb_catalog_server_get(cat, r->server);
        char buf[TB_ADDR_STRLEN];
        if (!si)
            return TB_E_NOTFOUND;
        tb_addr_fmt(&si->addr, buf, sizeof buf);
        if ((rc = slot_set(sv, buf, strlen(buf), 0)))
            return rc;
    }
    if (!cl->text) {
        const struct tb_class_info *ci = tb_catalog_class_get(cat, r->class_id);
        if (!ci)
            return TB_E_NOTFOUND;
        /* (tier, class): the same fingerprint in two tiers is two classes. */
        size_t n = strlen(ci->text);
        uint64_t h = tb_ch_fnv1a(ti->name, strlen(ti->name) + 1, TB_CH_FNV_SEED);
        if ((rc = slot_set(cl, ci->text, n, tb_ch_fnv1a(ci->text, n, h))))
            return rc;
    }
    char client[TB_ADDR_STRLEN];
    tb_addr_fmt(&r->client, client, sizeof client);
    put_str(b, ch->sensor, strlen(ch->sensor));
    put_str(b, t->text, t->len);
    put_str(b, ti->proto, strlen(ti->proto));
    put_le(b, t->hash, 8);
    put_str(b, sv->text, sv->len);
    put_str(b, client, strlen(client));
    put_le(b, r->conn, 8);
    put_str(b, cl->text, cl->len);
    put_le(b, cl->hash, 8);
    put_le(b, (uint64_t)r->arrival_ns, 8);
    put_le(b, (uint64_t)r->departure_ns, 8);
    put_le(b, r->req_bytes, 8);
    put_le(b, r->resp_bytes, 8);
    put_le(b, (uint32_t)r->status, 4);
    put_le(b, r->flags, 4);
    if (seq)
        *seq = ch->seq;
    put_le(b, ch->seq++, 8);
    return tb_buf_ok(b) ? 0 : TB_E_NOMEM;
}

int tb_ch_request(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_request *r)
{
    int rc = tb__ch_put_request(ch, cat, r, &ch->body, NULL);
    if (rc)
        return rc;
    if (++ch->queued >= TB_CH_BATCH)
        return tb_ch_flush(ch);
    return 0;
}

static const char *const table_names[] = {"requests", "connections", "hosts"};

/* The INSERT of a batch of table t's rows, into `into` (a backquoted table
 * name) instead of the table itself when not NULL. */
static void insert_sql(const struct tb_ch *ch, enum tb__ch_table t, const char *into, char *sql,
                       size_t n)
{
    static const char *const cols[] = {
        "sensor, tier, proto, tier_hash, server, client, conn, class, class_hash, arrival_ns, "
        "departure_ns, req_bytes, resp_bytes, status, flags, seq",
        "sensor, conn, client, server, tier, proto, server_addr, open_ns, close_ns, opened, "
        "closed, requests, packets, bytes_c2s, bytes_s2c",
        "sensor, tier, addr"};
    snprintf(sql, n, "INSERT INTO %s.%s%s%s (%s) FORMAT RowBinary", ch->db, into ? "`" : "",
             into ? into : table_names[t], into ? "`" : "", cols[t]);
}

int tb__ch_insert(struct tb_ch *ch, enum tb__ch_table t, const void *p, size_t len,
                  const char *query_id, bool *maybe_sent)
{
    char sql[512];
    struct tb_buf r;
    insert_sql(ch, t, NULL, sql, sizeof sql);
    tb_buf_init(&r);
    int rc = http_id(ch, sql, p, len, query_id, &r);
    tb_buf_free(&r);
    /* Refused or unresolved: nothing reached the server. On one server an
     * answer, even an error, settles it (an INSERT of one block is all or
     * nothing); through a cluster's Distributed table it does not: an error
     * (a shard away) may come after other shards wrote their parts. Anything
     * else (a timeout, a reset) may have come after the server read it all. */
    *maybe_sent = (rc == TB_E_IO && ch->last_cc != CURLE_COULDNT_CONNECT &&
                   ch->last_cc != CURLE_COULDNT_RESOLVE_HOST) ||
                  (rc == TB_E_DB && ch->cluster[0]);
    return rc;
}

/* The key that tells a sensor's rows of table t apart, within a batch's
 * [first, last]: requests by seq, connections by conn (a connection's final
 * record is stored once). */
static const char *const fill_keys[] = {"seq", "conn"};

/* Completes batch b of table t (requests or connections) in a store that may
 * hold part of it: the batch is staged in a Memory table on the endpoint
 * spoken to, named after its query id (one per sensor, run and batch), and
 * the rows whose key the sensor's table does not hold yet are inserted from
 * there through the (Distributed) table, each to its shard, under the
 * batch's query id; then the stage is dropped. With held, how many of its
 * rows the store held is counted first (into *held), and nothing is
 * inserted when it held them all. Any failure may leave part done (the
 * insert through a cluster): count again, then call again. */
static int fill(struct tb_ch *ch, const struct tb__ch_batch *b, uint64_t *held)
{
    char sql[1024], key_in[384];
    struct tb_buf r;
    const char *tn = table_names[b->t], *key = fill_keys[b->t];
    tb_buf_init(&r);
    /* Made anew, so a fill interrupted after staging does not stage the
     * rows twice. */
    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s.`%s`", ch->db, b->query_id);
    int rc = exec_sql(ch, sql);
    if (!rc) {
        snprintf(sql, sizeof sql, "CREATE TABLE %s.`%s` AS %s.%s%s ENGINE = Memory", ch->db,
                 b->query_id, ch->db, tn, ch->cluster[0] ? "_local" : "");
        rc = exec_sql(ch, sql);
    }
    if (!rc) {
        insert_sql(ch, b->t, b->query_id, sql, sizeof sql);
        rc = http(ch, sql, b->p, b->len, &r);
    }
    snprintf(key_in, sizeof key_in, "%s IN (SELECT %s FROM %s.%s WHERE sensor = '%s' AND %s >= %"
             PRIu64 " AND %s <= %" PRIu64 ")", key, key, ch->db, tn, ch->sensor, key, b->first,
             key, b->last);
    if (!rc && held) {
        snprintf(sql, sizeof sql, "SELECT count() FROM %s.`%s` WHERE %s FORMAT RowBinary", ch->db,
                 b->query_id, key_in);
        rc = tb__ch_count(ch, sql, held);
    }
    if (!rc && !(held && *held >= b->rows)) {
        /* Under the batch's query id, so that a wait for a running insert
         * covers this one too; the SQL as the query with an empty body, so
         * that the cluster's settings go with it. */
        snprintf(sql, sizeof sql, "INSERT INTO %s.%s SELECT * FROM %s.`%s` WHERE NOT (%s)", ch->db,
                 tn, ch->db, b->query_id, key_in);
        rc = http_id(ch, sql, "", 0, b->query_id, &r);
    }
    tb_buf_free(&r);
    if (!rc)
        tb__ch_drop_staging(ch, b->query_id); /* one left is dropped by the next fill or capture */
    return rc;
}

/* After a failure, the server must answer this long before a batch that may
 * have reached it is counted (tb__ch_settle). */
#define SETTLE_NS (2 * TB_NS_PER_SEC)

int tb__ch_settle(struct tb_ch *ch, const struct tb__ch_batch *b, bool *filled)
{
    char sql[512];
    uint64_t n;
    int rc;
    *filled = false;
    /* Hosts are a set (readers take each once); connections without a range
     * (a spool file of an older tbneck) are taken once per (sensor, conn) by
     * readers: both are sent again whole. */
    if (b->t == TB__CH_HOSTS || (b->t == TB__CH_CONNECTIONS && !b->last))
        return TB__CH_RESEND;
    snprintf(sql, sizeof sql,
             "SELECT count() FROM system.processes WHERE query_id = '%s' FORMAT RowBinary",
             b->query_id);
    if ((rc = tb__ch_count(ch, sql, &n)))
        return rc;
    /* The server answers again. An insert it received before it went away
     * may still be waiting in its accept queue, not yet among its processes:
     * give it SETTLE_NS to start before counting (once per return, not per
     * batch). */
    if (!ch->answering_ns)
        ch->answering_ns = mono_ns();
    if (n || mono_ns() < ch->answering_ns + SETTLE_NS)
        return TB__CH_BUSY;
    if (b->t == TB__CH_REQUESTS) {
        /* A batch's seq range is its own: counting it settles all or none
         * without staging anything. */
        snprintf(sql, sizeof sql,
                 "SELECT count() FROM %s.requests WHERE sensor = '%s' AND seq >= %" PRIu64
                 " AND seq <= %" PRIu64 " FORMAT RowBinary", ch->db, ch->sensor, b->first,
                 b->last);
        if ((rc = tb__ch_count(ch, sql, &n)))
            return rc;
        if (n >= b->rows)
            return 0;
        if (!n)
            return TB__CH_RESEND;
        /* A cluster whose shards took their parts apart: the rows not there
         * go again (each to its shard), the others not. A fill that fails
         * may itself store part: the caller settles again. */
        rc = fill(ch, b, NULL);
    } else {
        /* Connections that ended in one batch have ids spread among other
         * batches': only the staged batch itself can be counted. */
        rc = fill(ch, b, &n);
        if (!rc && (n == 0 || n >= b->rows))
            return 0;
    }
    if (rc)
        return rc;
    tb_log_warn("clickhouse at %s: the store held %" PRIu64 " of batch %" PRIu64 "'s %" PRIu64
                " %s after a failed insert; the other %" PRIu64 " were sent again",
                ch->where, n, b->no, b->rows, table_names[b->t], b->rows - n);
    *filled = true;
    return 0;
}

int tb__ch_count(struct tb_ch *ch, const char *sql, uint64_t *n)
{
    struct tb_buf r;
    tb_buf_init(&r);
    int rc = http(ch, sql, NULL, 0, &r);
    if (!rc) {
        struct rd d = {(const uint8_t *)r.p, (const uint8_t *)r.p + r.len};
        if (!get_le(&d, 8, n)) {
            snprintf(ch->err, sizeof ch->err, "clickhouse at %s: short answer to a count",
                     ch->where);
            rc = TB_E_BADFMT;
        }
    }
    tb_buf_free(&r);
    return rc;
}

void tb__ch_set_timeout(struct tb_ch *ch, long ms)
{
    curl_easy_setopt(ch->curl, CURLOPT_CONNECTTIMEOUT_MS, TB_MIN(ms, 10000L));
    curl_easy_setopt(ch->curl, CURLOPT_TIMEOUT_MS, ms);
}

const char *tb__ch_sensor(const struct tb_ch *ch)
{
    return ch->sensor;
}

const char *tb__ch_db(const struct tb_ch *ch)
{
    return ch->db;
}

const char *tb__ch_where(const struct tb_ch *ch)
{
    return ch->where;
}

/* Sends one batch of table t's rows (offline): one INSERT, which blocks the
 * capture (its back-pressure). When it may have reached the server — a
 * cluster's error answer can come after some shards wrote their parts — the
 * batch is settled as a live sensor's is (tb__ch_settle: the part stored
 * completed, or the whole sent again), once a second for up to the retry
 * time; then, given up, its staging table is dropped and the error says
 * what may be stored. */
static int send_batch(struct tb_ch *ch, enum tb__ch_table t, const struct tb_buf *body,
                      uint64_t rows, uint64_t first, uint64_t last)
{
    char qid[160], last_err[sizeof ch->err];
    bool maybe = false, filled;
    struct tb__ch_batch b = {.t = t, .p = body->p, .len = body->len, .no = ++ch->batches,
                             .rows = rows, .first = first, .last = last, .query_id = qid};
    tb__ch_batch_id(ch, b.no, qid, sizeof qid);
    int rc = tb__ch_insert(ch, t, b.p, b.len, qid, &maybe);
    if (!rc || !maybe)
        return rc;
    snprintf(last_err, sizeof last_err, "%s", ch->err);
    int64_t retry = ch->retry_ns, deadline = mono_ns() + retry;
    if (retry)
        tb_log_warn("%s; the %s batch %" PRIu64 " may be stored in part: settling it every "
                    "second for up to %lld s", last_err, table_names[t], b.no,
                    (long long)(retry / TB_NS_PER_SEC));
    /* The loop keeps the time; each request fails at once. */
    ch->retry_ns = 0;
    while (mono_ns() < deadline) {
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        rc = tb__ch_settle(ch, &b, &filled);
        if (rc == TB__CH_RESEND)
            rc = tb__ch_insert(ch, t, b.p, b.len, qid, &maybe);
        if (rc == 0)
            break;
        if (rc < 0)
            snprintf(last_err, sizeof last_err, "%s", ch->err);
    }
    ch->retry_ns = retry;
    if (rc == 0)
        return 0;
    tb__ch_drop_staging(ch, qid);
    if (t == TB__CH_REQUESTS)
        snprintf(ch->err, sizeof ch->err, "%.380s; the insert of requests %" PRIu64 "-%" PRIu64
                 " (seq) could not be completed within --store-retry, part of them may be "
                 "stored", last_err, first, last);
    else
        snprintf(ch->err, sizeof ch->err, "%.400s; the insert of %s rows could not be completed "
                 "within --store-retry", last_err, table_names[t]);
    return rc < 0 ? rc : TB_E_IO;
}

int tb_ch_flush(struct tb_ch *ch)
{
    if (ch->conns.len) {
        int rc = send_batch(ch, TB__CH_CONNECTIONS, &ch->conns, ch->nconns, ch->conn_lo,
                            ch->conn_hi);
        if (rc)
            return rc;
        ch->conns.len = 0;
        ch->nconns = ch->conn_lo = ch->conn_hi = 0;
    }
    if (!ch->queued)
        return 0;
    int rc = send_batch(ch, TB__CH_REQUESTS, &ch->body, ch->queued, ch->seq - ch->queued,
                        ch->seq - 1);
    if (rc == 0) {
        ch->rows += ch->queued;
        ch->queued = 0;
        ch->body.len = 0;
    }
    return rc;
}

int tb_ch_put_hosts(struct tb_ch *ch, const struct tb_catalog *cat)
{
    struct tb_buf body;
    uint32_t n = tb_catalog_host_count(cat);
    if (n == 0)
        return 0;
    tb_buf_init(&body);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tier;
        struct tb_addr a;
        char buf[TB_ADDR_STRLEN];
        const struct tb_tier_info *ti;
        if (tb_catalog_host_at(cat, i, &tier, &a) || !(ti = tb_catalog_tier_get(cat, tier)))
            continue;
        tb_addr_fmt(&a, buf, sizeof buf);
        put_str(&body, ch->sensor, strlen(ch->sensor));
        put_str(&body, ti->name, strlen(ti->name));
        put_str(&body, buf, strlen(buf));
    }
    if (!tb_buf_ok(&body)) {
        tb_buf_free(&body);
        return TB_E_NOMEM;
    }
    /* A set: readers take each (tier, addr) once, so a retry may resend it whole. */
    int rc = send_batch(ch, TB__CH_HOSTS, &body, n, 0, 0);
    tb_buf_free(&body);
    return rc;
}

static bool get_text(struct rd *d, struct tb_ch_text *t)
{
    return get_str(d, &t->p, &t->n);
}



int tb__ch_put_conn(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_conn *c,
                    struct tb_buf *b)
{
    char cb[TB_ADDR_STRLEN], sb[TB_ADDR_STRLEN], ab[TB_ADDR_STRLEN] = "";
    const struct tb_tier_info *ti = c->tier ? tb_catalog_tier_get(cat, c->tier) : NULL;
    const struct tb_server_info *si = c->server_id ? tb_catalog_server_get(cat, c->server_id)
                                                   : NULL;
    tb_addr_fmt(&c->client, cb, sizeof cb);
    tb_addr_fmt(&c->server, sb, sizeof sb);
    if (si)
        tb_addr_fmt(&si->addr, ab, sizeof ab);
    put_str(b, ch->sensor, strlen(ch->sensor));
    put_le(b, c->conn, 8);
    put_str(b, cb, strlen(cb));
    put_str(b, sb, strlen(sb));
    put_str(b, ti ? ti->name : "", ti ? strlen(ti->name) : 0);
    put_str(b, ti ? ti->proto : "", ti ? strlen(ti->proto) : 0);
    put_str(b, ab, strlen(ab));
    put_le(b, (uint64_t)c->open_ns, 8);
    put_le(b, (uint64_t)c->close_ns, 8);
    put_le(b, c->opened, 1);
    put_le(b, c->closed, 1);
    put_le(b, c->requests, 8);
    put_le(b, c->packets, 8);
    put_le(b, c->bytes_c2s, 8);
    put_le(b, c->bytes_s2c, 8);
    return tb_buf_ok(b) ? 0 : TB_E_NOMEM;
}

int tb_ch_conn(struct tb_ch *ch, const struct tb_catalog *cat, const struct tb_conn *c)
{
    struct tb_buf *b = &ch->conns;
    int rc = tb__ch_put_conn(ch, cat, c, b);
    if (rc)
        return rc;
    if (!ch->nconns++ || c->conn < ch->conn_lo)
        ch->conn_lo = c->conn;
    ch->conn_hi = TB_MAX(ch->conn_hi, c->conn);
    /* Connections are few next to requests; bound them all the same. */
    if (b->len >= 16u << 20)
        return tb_ch_flush(ch);
    return 0;
}

/* ---- scans: one query, one parser per row -------------------------------------------- */


/* Runs sql (FORMAT RowBinary) and hands the reader to row() until the answer
 * is consumed, row() returns nonzero, or a row is cut short (TB_E_BADFMT,
 * with the error text set). */
static int scan(struct tb_ch *ch, const char *sql, int (*row)(struct rd *d, void *arg),
                void *arg)
{
    struct tb_buf resp;
    tb_buf_init(&resp);
    int rc = http(ch, sql, NULL, 0, &resp);
    struct rd d = {(const uint8_t *)resp.p, (const uint8_t *)resp.p + resp.len};
    while (rc == 0 && d.p < d.end)
        rc = row(&d, arg);
    if (rc == SHORT_ROW) {
        snprintf(ch->err, sizeof ch->err, "clickhouse at %s: truncated row in the answer",
                 ch->where);
        rc = TB_E_BADFMT;
    }
    tb_buf_free(&resp);
    return rc;
}

/* The caller's callback and its argument, for the row parsers below. */
struct scan_cb {
    void (*cb)(void); /* called through its real type only */
    void *ud;
};

/* scan() of a query formatted from fmt (the database's name in it), each row
 * handed to row() with the caller's callback and argument. */
TB_PRINTF(5, 6)
static int scan_sql(struct tb_ch *ch, int (*row)(struct rd *d, void *arg), void (*cb)(void),
                    void *ud, const char *fmt, ...)
{
    char sql[512];
    struct scan_cb sc = {cb, ud};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return scan(ch, sql, row, &sc);
}

/* tb_ch_scan's state: the caller's callback and the last row's (sensor, seq). */
struct request_scan {
    struct scan_cb sc;
    struct tb_ch_text sensor;
    uint64_t seq;
    bool any;
};

static int request_row(struct rd *d, void *arg)
{
    struct request_scan *rs = arg;
    const struct scan_cb *sc = &rs->sc;
    int (*cb)(void *, const struct tb_ch_row *) = (int (*)(void *, const struct tb_ch_row *))sc->cb;
    struct tb_ch_row r;
    uint64_t arr, dep, st, fl, seq;
    if (!get_text(d, &r.sensor) || !get_text(d, &r.tier) || !get_text(d, &r.proto) ||
        !get_text(d, &r.server) || !get_text(d, &r.client) || !get_text(d, &r.cls) ||
        !get_le(d, 8, &r.conn) || !get_le(d, 8, &arr) || !get_le(d, 8, &dep) ||
        !get_le(d, 8, &r.req_bytes) || !get_le(d, 8, &r.resp_bytes) || !get_le(d, 4, &st) ||
        !get_le(d, 4, &fl) || !get_le(d, 8, &seq))
        return SHORT_ROW;
    /* A live sensor's batch stored twice (an insert the server ran after
     * the sender had already found it missing and sent it again,
     * ch_live.c): the same (sensor, seq) is the same request. */
    bool again = rs->any && seq == rs->seq && r.sensor.n == rs->sensor.n &&
                 !memcmp(r.sensor.p, rs->sensor.p, r.sensor.n);
    rs->any = true;
    rs->seq = seq;
    rs->sensor = r.sensor;
    if (again)
        return 0;
    r.arrival_ns = (int64_t)arr;
    r.departure_ns = (int64_t)dep;
    r.status = (int32_t)(uint32_t)st;
    r.flags = (uint32_t)fl;
    return cb(sc->ud, &r);
}

int tb_ch_scan(struct tb_ch *ch, int (*cb)(void *ud, const struct tb_ch_row *r), void *ud)
{
    char sql[512];
    struct request_scan rs = {.sc = {(void (*)(void))cb, ud}};
    snprintf(sql, sizeof sql,
             "SELECT sensor, tier, proto, server, client, class, conn, arrival_ns, departure_ns, "
             "req_bytes, resp_bytes, status, flags, seq FROM %s.requests ORDER BY sensor, seq "
             "FORMAT RowBinary", ch->db);
    return scan(ch, sql, request_row, &rs);
}

static int conn_row(struct rd *d, void *arg)
{
    const struct scan_cb *sc = arg;
    int (*cb)(void *, const struct tb_ch_conn_row *) =
        (int (*)(void *, const struct tb_ch_conn_row *))sc->cb;
    struct tb_ch_conn_row r;
    uint64_t on, cn, op, cl;
    memset(&r, 0, sizeof r);
    if (!get_text(d, &r.sensor) || !get_le(d, 8, &r.c.conn) || !get_text(d, &r.client) ||
        !get_text(d, &r.server) || !get_text(d, &r.tier) || !get_text(d, &r.proto) ||
        !get_text(d, &r.server_addr) || !get_le(d, 8, &on) || !get_le(d, 8, &cn) ||
        !get_le(d, 1, &op) || !get_le(d, 1, &cl) || !get_le(d, 8, &r.c.requests) ||
        !get_le(d, 8, &r.c.packets) || !get_le(d, 8, &r.c.bytes_c2s) ||
        !get_le(d, 8, &r.c.bytes_s2c))
        return SHORT_ROW;
    r.c.open_ns = (int64_t)on;
    r.c.close_ns = (int64_t)cn;
    r.c.opened = (uint8_t)op;
    r.c.closed = (uint8_t)cl;
    return cb(sc->ud, &r);
}

int tb_ch_scan_conns(struct tb_ch *ch, int (*cb)(void *ud, const struct tb_ch_conn_row *r),
                     void *ud)
{
    return scan_sql(ch, conn_row, (void (*)(void))cb, ud,
                    "SELECT sensor, conn, client, server, tier, proto, server_addr, open_ns, "
                    "close_ns, opened, closed, requests, packets, bytes_c2s, bytes_s2c FROM "
                    "%s.connections ORDER BY open_ns, sensor, conn FORMAT RowBinary", ch->db);
}

static int sensor_row(struct rd *d, void *arg)
{
    const struct scan_cb *sc = arg;
    int (*cb)(void *, struct tb_ch_text, uint64_t) =
        (int (*)(void *, struct tb_ch_text, uint64_t))sc->cb;
    struct tb_ch_text s;
    uint64_t m;
    if (!get_text(d, &s) || !get_le(d, 8, &m))
        return SHORT_ROW;
    return cb(sc->ud, s, m);
}

int tb_ch_scan_sensors(struct tb_ch *ch, int (*cb)(void *ud, struct tb_ch_text sensor,
                                                   uint64_t max_conn), void *ud)
{
    return scan_sql(ch, sensor_row, (void (*)(void))cb, ud,
                    "SELECT sensor, max(conn) FROM (SELECT sensor, conn FROM %s.requests UNION "
                    "ALL SELECT sensor, conn FROM %s.connections) GROUP BY sensor ORDER BY "
                    "sensor FORMAT RowBinary", ch->db, ch->db);
}

/* Rows of two texts (hosts) or three (servers): the callback takes them in order. */
static int texts2_row(struct rd *d, void *arg)
{
    const struct scan_cb *sc = arg;
    int (*cb)(void *, struct tb_ch_text, struct tb_ch_text) =
        (int (*)(void *, struct tb_ch_text, struct tb_ch_text))sc->cb;
    struct tb_ch_text a, b;
    if (!get_text(d, &a) || !get_text(d, &b))
        return SHORT_ROW;
    return cb(sc->ud, a, b);
}

static int texts3_row(struct rd *d, void *arg)
{
    const struct scan_cb *sc = arg;
    int (*cb)(void *, struct tb_ch_text, struct tb_ch_text, struct tb_ch_text) =
        (int (*)(void *, struct tb_ch_text, struct tb_ch_text, struct tb_ch_text))sc->cb;
    struct tb_ch_text a, b, c;
    if (!get_text(d, &a) || !get_text(d, &b) || !get_text(d, &c))
        return SHORT_ROW;
    return cb(sc->ud, a, b, c);
}

int tb_ch_scan_hosts(struct tb_ch *ch,
                     int (*cb)(void *ud, struct tb_ch_text tier, struct tb_ch_text addr),
                     void *ud)
{
    return scan_sql(ch, texts2_row, (void (*)(void))cb, ud,
                    "SELECT DISTINCT tier, addr FROM %s.hosts ORDER BY tier, addr FORMAT "
                    "RowBinary", ch->db);
}

int tb_ch_scan_servers(struct tb_ch *ch,
                       int (*cb)(void *ud, struct tb_ch_text tier, struct tb_ch_text proto,
                                 struct tb_ch_text server),
                       void *ud)
{
    return scan_sql(ch, texts3_row, (void (*)(void))cb, ud,
                    "SELECT tier, proto, server FROM %s.requests GROUP BY tier, proto, server "
                    "ORDER BY min(arrival_ns), tier, server FORMAT RowBinary", ch->db);
}
