/* SPDX-License-Identifier: MIT */
/* store-int.h — private to store/: one SQLite connection with its cached statements, and the
 * writes the store and the writer thread share. */
#ifndef TB_STORE_INT_H
#define TB_STORE_INT_H

#include <sqlite3.h>

#include "store.h"
#include "util.h"

/* Every statement the module runs more than once, prepared on first use and
 * kept for the connection's life. The SQL text is in db.c, in this order. */
enum tb__stmt_id {
    TB__SQ_TIER_INS,
    TB__SQ_SERVER_INS,
    TB__SQ_HOST_INS,
    TB__SQ_CLASS_INS,
    TB__SQ_ENDPOINT_GET,
    TB__SQ_ENDPOINT_INS,
    TB__SQ_REQUEST_INS,
    TB__SQ_NEXT_CONN_SET,
    TB__SQ_WINDOW_DEL,
    TB__SQ_WINDOW_INS,
    TB__SQ_HEALTH_INS,
    TB__SQ_CAPTURE_RUNNING,
    TB__SQ_CONN_PUT,
    TB__SQ_COUNT
};

/* Other statements are cached by the address of their (static) SQL text. */
#define TB__DB_CACHE 32
struct tb__db_cached {
    const char *sql;
    sqlite3_stmt *stmt;
};

struct tb__db {
    sqlite3 *db;
    char *path;
    bool readonly;
    sqlite3_stmt *stmt[TB__SQ_COUNT];
    struct tb__db_cached cache[TB__DB_CACHE];
};

/* Opens a connection on an existing tbneck database, sets the busy timeout and
 * the per-connection pragmas (the writer's second connection uses it too). */
int tb__db_open(struct tb__db *d, const char *path, int sqlite_flags, char *errbuf,
                size_t errlen);
void tb__db_close(struct tb__db *d);
/* The cached statement, reset and with its bindings cleared. */
int tb__db_stmt(struct tb__db *d, enum tb__stmt_id id, sqlite3_stmt **out);
/* The same for a statement given by its SQL, which must be a string literal
 * (the cache key is its address). Reset it after the last step, so that no
 * read transaction stays open. */
int tb__db_prep(struct tb__db *d, const char *sql, sqlite3_stmt **out);
/* Logs an SQLite failure (naming the file, what was being done and SQLite's
 * message) and returns TB_E_DB. */
int tb__db_fail(struct tb__db *d, const char *what);
/* One stored request decoded from a SELECT's columns base.. (store.c). */
void tb__row_request(sqlite3_stmt *s, int base, const struct tb_addr *ep, size_t nep, bool full,
                     struct tb_request *r);
int tb__db_exec(struct tb__db *d, const char *sql);
/* Builds requests_tier_arrival, the read index, when the file lacks it (a no-op
 * otherwise), with a 64 MiB page cache for that one statement; the
 * connection's cache size is put back. Used at a capture's end and by a
 * writer that keeps the index during its load (tb_writer_opts.keep_index). */
int tb__db_read_index(struct tb__db *d);
int tb__db_begin(struct tb__db *d);
/* Commits when rc == 0, else rolls back; returns rc or the commit's error. */
int tb__db_end(struct tb__db *d, int rc);
/* Runs a statement that returns no rows to completion. */
int tb__db_step_done(struct tb__db *d, sqlite3_stmt *s, const char *what);

/* The one read loop: steps a prepared and bound statement to its end, growing
 * an array of `size`-byte elements by one per row and letting fill() set the
 * new element (zeroed first) from the row; fill returns 0, or a negative error
 * that stops the read. Resets s. On success *out (a T ** passed as void *; the
 * caller frees it, NULL when there are no rows) and *n; on failure neither is
 * touched and nothing is left allocated. SQLite failures name `what`. */
typedef int (*tb__db_fill_fn)(sqlite3_stmt *s, void *elem, void *ctx);
int tb__db_rows(struct tb__db *d, sqlite3_stmt *s, size_t size, tb__db_fill_fn fill, void *ctx,
                const char *what, void *out, size_t *n);
/* The same from the start: empties *out and *n, prepares `sql` (a literal,
 * tb__db_prep), binds ?1..?nargs to args, and reads its rows. */
int tb__db_select(struct tb__db *d, const char *sql, const int64_t *args, int nargs, size_t size,
                  tb__db_fill_fn fill, void *ctx, const char *what, void *out, size_t *n);

/* The one write loop: a statement run once per element of an array, each
 * bound by bind(). It runs inside the caller's transaction (see
 * tb__db_put_all for one of its own). */
struct tb__db_put {
    const char *sql;     /* a string literal, cached by address; NULL: the cached `id` */
    enum tb__stmt_id id; /* used when sql is NULL */
    const char *what;    /* for the error message: "storing events" */
    void (*bind)(sqlite3_stmt *s, const void *elem, const void *ctx);
    /* A failed step's error; NULL: tb__db_fail. */
    int (*fail)(struct tb__db *d, const char *what);
};
int tb__db_put_rows(struct tb__db *d, const struct tb__db_put *p, const void *elems, size_t n,
                    size_t size, const void *ctx);
/* The same in a transaction of its own (none when n == 0). */
int tb__db_put_all(struct tb__db *d, const struct tb__db_put *p, const void *elems, size_t n,
                   size_t size, const void *ctx);

/* Creates the file's schema or migrates it to TB_STORE_SCHEMA_VERSION (schema.c). */
int tb__schema_check(struct tb__db *d, bool create, char *errbuf, size_t errlen);

/* Catalog entries added since the last persistence, copied off the catalog so
 * they can be written on another thread (the catalog is not thread-safe). */
struct tb__cat_class {
    uint32_t id, tier;
    size_t off, len; /* into text */
};
struct tb__cat_host {
    uint32_t index, tier; /* index = insertion position, 0-based */
    struct tb_addr addr;
};
struct tb__cat_delta {
    struct tb_tier_info *tiers;
    size_t ntiers, cap_tiers;
    struct tb_server_info *servers;
    size_t nservers, cap_servers;
    struct tb__cat_class *classes;
    size_t nclasses, cap_classes;
    struct tb__cat_host *hosts;
    size_t nhosts, cap_hosts;
    char *text;
    size_t ntext, cap_text;
};
/* Appends the entries of `cat` above its persisted marks and moves the marks. */
int tb__cat_delta_take(struct tb__cat_delta *dl, struct tb_catalog *cat);
void tb__cat_delta_clear(struct tb__cat_delta *dl);
void tb__cat_delta_free(struct tb__cat_delta *dl);
bool tb__cat_delta_empty(const struct tb__cat_delta *dl);
/* Inserts the entries (inside the caller's transaction). */
int tb__put_catalog(struct tb__db *d, const struct tb__cat_delta *dl);
/* Replaces windows per (tier, server, width) over the range the input covers. */
int tb__put_windows(struct tb__db *d, const struct tb_window *w, size_t n);
/* The counters of a running capture (its row before the end): the last
 * health row's packets and drops, and the requests stored so far. */
int tb__put_capture_running(struct tb__db *d, int64_t capture_id, const struct tb_health_row *h,
                            uint64_t requests);
int tb__put_health(struct tb__db *d, int64_t capture_id, const struct tb_health_row *h,
                   size_t n);

/* The CSV export of tb_store_export_requests (export.c). */
/* Decimal digits at p, without printf; returns the end. */
char *tb__put_u64(char *p, uint64_t v);
char *tb__put_i64(char *p, int64_t v);
/* The CSV header line of tb_store_export_requests, shared by the stores. */
#define TB__REQUESTS_CSV_HEADER                                                                 \
    "tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags"
int tb__store_export(struct tb__db *d, const char *tier_name, FILE *out,
                     const struct tb_export_tail *tail);

/* Formats an endpoint's address without its port, as stored in
 * endpoints.addr and hosts.addr ("10.0.0.1", "2001:db8::1"). */
const char *tb__ip_fmt(const struct tb_addr *a, char *buf, size_t len);

/* The store's connection and its client addresses by endpoint id (store.c), for
 * linkstore.c. */
struct tb__db *tb__store_db(struct tb_store *st);
int tb__store_endpoints(struct tb_store *st, struct tb_addr **out, size_t *n);

#endif
