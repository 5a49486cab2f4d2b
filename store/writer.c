/* SPDX-License-Identifier: MIT */
/* writer.c — the asynchronous request writer: batches filled on the capture thread, inserted
 * by a thread of its own on a connection of its own, one transaction per batch.
 *
 * The capture thread only copies: a request into the current batch, new
 * catalog entries into the same batch (the catalog is not thread-safe, so it
 * is never read from the writer thread). A full batch goes onto a queue under
 * a mutex; the writer thread inserts it in one transaction, catalog entries
 * first, so every request row finds its tier, server and class already
 * stored. When SQLite falls behind, at most queue_cap batches wait in memory
 * and then the caller blocks: requests are never dropped. */
#include "store-int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH_ROWS 16384 /* defaults of struct tb_writer_opts */
#define QUEUE_CAP 64
#define BATCH_ROWS_MAX (1u << 20)
#define FREE_KEEP 4 /* empty batches kept for reuse */

struct batch {
    struct batch *next;
    struct tb__cat_delta cat;
    struct tb_request *req; /* batch_rows entries */
    size_t nreq;
    struct tb_health_row *health;
    size_t nhealth, cap_health;
    struct tb_window *win;
    size_t nwin, cap_win;
    struct tb_conn *conn;
    size_t nconn, cap_conn;
};

/* Client IP → endpoints.id, known to the writer thread only. */
struct ep_slot {
    struct tb_addr ip;
    uint32_t id; /* 0 = empty */
};

struct tb_writer {
    struct tb__db d;
    int64_t capture_id;
    size_t batch_rows, queue_cap;
    struct tb_catalog *cat; /* remembered by the first tb_writer_catalog */
    struct batch *cur;      /* being filled by the caller */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;  /* a batch was queued, or stop */
    pthread_cond_t cv_space; /* a batch was done (room in the queue) */
    struct batch *head, *tail;
    size_t qlen;             /* queued plus the one being written */
    struct batch *free_list;
    size_t nfree;
    uint64_t queued, done;
    bool stop;
    uint64_t max_queued;
    int64_t blocked_ns, write_ns, cpu_ns;

    bool bulk;               /* tb_writer_opts.bulk */
    bool keep_index;         /* tb_writer_opts.keep_index */
    int wal_frames;          /* frames in the write-ahead log after the last commit */
    int64_t page_size;       /* the file's (older files have 4 KiB pages) */
    int64_t bulk_wal;        /* checkpoint when the log holds this many bytes */

    atomic_int err;          /* first error, 0 while all is well */
    atomic_uint_fast64_t rows;
    /* Request rows committed per tier id (under mu): what a capture's
     * capture_tiers rows say was stored, a full disk or not. */
    uint64_t *tier_rows;
    size_t ntier_rows;

    /* Writer thread only. */
    sqlite3_stmt *ins_batch; /* INSERT ... SELECT ... FROM tb_batch: one step a batch */
    const struct tb_request *brq; /* the batch tb_batch shows, and its client ids */
    uint32_t *bcid;
    size_t bn, cap_bcid;
    struct ep_slot *ep;
    uint32_t ep_mask, ep_used;
};

/* ---- batches --------------------------------------------------------------------------- */

static void batch_free(struct batch *b)
{
    if (!b)
        return;
    tb__cat_delta_free(&b->cat);
    free(b->req);
    free(b->health);
    free(b->win);
    free(b->conn);
    free(b);
}

static bool batch_empty(const struct batch *b)
{
    return b->nreq == 0 && b->nhealth == 0 && b->nwin == 0 && b->nconn == 0 &&
           tb__cat_delta_empty(&b->cat);
}

static void batch_clear(struct batch *b)
{
    tb__cat_delta_clear(&b->cat);
    b->nreq = b->nhealth = b->nwin = b->nconn = 0;
    b->next = NULL;
}

/* A batch from the free list, or a new one. */
static struct batch *batch_get(struct tb_writer *w)
{
    pthread_mutex_lock(&w->mu);
    struct batch *b = w->free_list;
    if (b) {
        w->free_list = b->next;
        w->nfree--;
    }
    pthread_mutex_unlock(&w->mu);
    if (b) {
        b->next = NULL;
        return b;
    }
    b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->req = malloc(w->batch_rows * sizeof *b->req);
    if (!b->req) {
        free(b);
        return NULL;
    }
    return b;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static void set_err(struct tb_writer *w, int rc)
{
    int expected = 0;
    atomic_compare_exchange_strong(&w->err, &expected, rc);
}

/* Hands the current batch to the writer thread, blocking while the queue is
 * full, and starts a fresh one. */
static int submit(struct tb_writer *w)
{
    if (!w->cur)
        return TB_E_NOMEM;
    if (batch_empty(w->cur))
        return 0;
    pthread_mutex_lock(&w->mu);
    if (w->qlen >= w->queue_cap) {
        int64_t t0 = clock_ns(CLOCK_MONOTONIC);
        while (w->qlen >= w->queue_cap)
            pthread_cond_wait(&w->cv_space, &w->mu);
        w->blocked_ns += clock_ns(CLOCK_MONOTONIC) - t0;
    }
    if (w->tail)
        w->tail->next = w->cur;
    else
        w->head = w->cur;
    w->tail = w->cur;
    w->qlen++;
    w->queued++;
    w->max_queued = TB_MAX(w->max_queued, w->qlen);
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->mu);
    w->cur = batch_get(w);
    if (!w->cur) {
        set_err(w, TB_E_NOMEM);
        return TB_E_NOMEM;
    }
    return atomic_load(&w->err);
}

/* ---- the writer thread ---------------------------------------------------------------------- */

static void ep_reset(struct tb_writer *w)
{
    if (w->ep)
        memset(w->ep, 0, ((size_t)w->ep_mask + 1) * sizeof *w->ep);
    w->ep_used = 0;
}

static void ep_put(struct ep_slot *tab, uint32_t mask, const struct tb_addr *ip, uint32_t id)
{
    uint32_t i = (uint32_t)tb_addr_hash(ip) & mask;
    while (tab[i].id)
        i = (i + 1) & mask;
    tab[i].ip = *ip;
    tab[i].id = id;
}

/* endpoints.id of a client's IP: from the map, else from the table, else a
 * new row (inside the batch's transaction). */
static int endpoint_id(struct tb_writer *w, const struct tb_addr *client, uint32_t *id)
{
    struct tb_addr ip = *client;
    char buf[TB_ADDR_STRLEN];
    sqlite3_stmt *s;
    int rc, src;
    ip.port = 0;
    ip.pad_ = 0;
    for (uint32_t i = (uint32_t)tb_addr_hash(&ip) & w->ep_mask; w->ep[i].id;
         i = (i + 1) & w->ep_mask) {
        if (tb_addr_eq(&w->ep[i].ip, &ip) && w->ep[i].ip.family == ip.family) {
            *id = w->ep[i].id;
            return 0;
        }
    }
    if ((w->ep_used + 1) * 2 > w->ep_mask + 1) {
        uint32_t nmask = w->ep_mask * 2 + 1;
        struct ep_slot *tab = calloc((size_t)nmask + 1, sizeof *tab);
        if (!tab)
            return TB_E_NOMEM;
        for (uint32_t i = 0; i <= w->ep_mask; i++)
            if (w->ep[i].id)
                ep_put(tab, nmask, &w->ep[i].ip, w->ep[i].id);
        free(w->ep);
        w->ep = tab;
        w->ep_mask = nmask;
    }
    tb__ip_fmt(&ip, buf, sizeof buf);
    if ((rc = tb__db_stmt(&w->d, TB__SQ_ENDPOINT_GET, &s)))
        return rc;
    sqlite3_bind_text(s, 1, buf, -1, SQLITE_STATIC);
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        *id = (uint32_t)sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
    } else {
        sqlite3_reset(s);
        if (src != SQLITE_DONE)
            return tb__db_fail(&w->d, "looking up a client address");
        if ((rc = tb__db_stmt(&w->d, TB__SQ_ENDPOINT_INS, &s)))
            return rc;
        sqlite3_bind_text(s, 1, buf, -1, SQLITE_STATIC);
        if ((rc = tb__db_step_done(&w->d, s, "storing a client address")))
            return rc;
        *id = (uint32_t)sqlite3_last_insert_rowid(w->d.db);
    }
    ep_put(w->ep, w->ep_mask, &ip, *id);
    w->ep_used++;
    return 0;
}

/* ---- tb_batch: the batch as a virtual table ------------------------------------------------
 *
 * Requests go in as "INSERT INTO requests(...) SELECT <capture id>, ... FROM
 * tb_batch", one statement step a batch: SQLite reads each value straight from
 * the batch through xColumn instead of 12 sqlite3_bind calls and 12 Variable
 * copies a row, and prepares nothing per row group. tb_batch is an
 * eponymous-only module of the writer's connection: nothing of it is written
 * into the database's schema. */

enum { BC_TIER, BC_SERVER, BC_CLIENT, BC_PORT, BC_CONN, BC_CLASS, BC_ARRIVAL, BC_DEPARTURE,
       BC_REQ_BYTES, BC_RESP_BYTES, BC_STATUS, BC_FLAGS };

struct bvtab {
    sqlite3_vtab base;
    struct tb_writer *w;
};

/* The cursor holds the row's record and client id, so that xColumn, called
 * 12 times a row, only loads the value. */
struct bcur {
    sqlite3_vtab_cursor base;
    size_t i;
    const struct tb_request *r;
    const uint32_t *cid;
};

static int bt_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc;
    (void)argv;
    (void)err;
    int src = sqlite3_declare_vtab(db, "CREATE TABLE x(tier, server, client, port, conn, class, "
                                       "arrival, departure, req_bytes, resp_bytes, status, flags)");
    if (src != SQLITE_OK)
        return src;
    struct bvtab *v = sqlite3_malloc(sizeof *v);
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->w = aux;
    *out = &v->base;
    return SQLITE_OK;
}

static int bt_disconnect(sqlite3_vtab *v)
{
    sqlite3_free(v);
    return SQLITE_OK;
}

static int bt_best_index(sqlite3_vtab *v, sqlite3_index_info *info)
{
    (void)v;
    info->estimatedCost = 1e6;
    return SQLITE_OK;
}

static int bt_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    (void)v;
    struct bcur *c = sqlite3_malloc(sizeof *c);
    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static int bt_close(sqlite3_vtab_cursor *c)
{
    sqlite3_free(c);
    return SQLITE_OK;
}

static int bt_filter(sqlite3_vtab_cursor *c, int idx, const char *idxs, int argc,
                     sqlite3_value **argv)
{
    (void)idx;
    (void)idxs;
    (void)argc;
    (void)argv;
    struct bcur *bc = (struct bcur *)c;
    const struct tb_writer *w = ((struct bvtab *)c->pVtab)->w;
    bc->i = 0;
    bc->r = w->brq;
    bc->cid = w->bcid;
    return SQLITE_OK;
}

static int bt_next(sqlite3_vtab_cursor *c)
{
    struct bcur *bc = (struct bcur *)c;
    bc->i++;
    bc->r++;
    bc->cid++;
    return SQLITE_OK;
}

static int bt_eof(sqlite3_vtab_cursor *c)
{
    const struct tb_writer *w = ((struct bvtab *)c->pVtab)->w;
    return ((struct bcur *)c)->i >= w->bn;
}

static int bt_column(sqlite3_vtab_cursor *c, sqlite3_context *ctx, int col)
{
    const struct bcur *bc = (const struct bcur *)c;
    const struct tb_request *r = bc->r;
    int64_t v;
    switch (col) {
    case BC_TIER: v = r->tier; break;
    case BC_SERVER: v = r->server; break;
    case BC_CLIENT: v = *bc->cid; break;
    case BC_PORT: v = r->client.port; break;
    case BC_CONN: v = (int64_t)r->conn; break;
    case BC_CLASS: v = r->class_id; break;
    case BC_ARRIVAL: v = r->arrival_ns; break;
    case BC_DEPARTURE: v = r->departure_ns; break;
    case BC_REQ_BYTES: v = (int64_t)r->req_bytes; break;
    case BC_RESP_BYTES: v = (int64_t)r->resp_bytes; break;
    case BC_STATUS: v = r->status; break;
    default: v = r->flags; break;
    }
    sqlite3_result_int64(ctx, v);
    return SQLITE_OK;
}

static int bt_rowid(sqlite3_vtab_cursor *c, sqlite3_int64 *rowid)
{
    *rowid = (sqlite3_int64)((struct bcur *)c)->i;
    return SQLITE_OK;
}

static const sqlite3_module batch_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: "FROM tb_batch", no CREATE VIRTUAL TABLE */
    .xConnect = bt_connect,
    .xBestIndex = bt_best_index,
    .xDisconnect = bt_disconnect,
    .xDestroy = bt_disconnect,
    .xOpen = bt_open,
    .xClose = bt_close,
    .xFilter = bt_filter,
    .xNext = bt_next,
    .xEof = bt_eof,
    .xColumn = bt_column,
    .xRowid = bt_rowid,
};

static int write_requests(struct tb_writer *w, const struct tb_request *rq, size_t n)
{
    sqlite3_stmt *one;
    uint64_t max_conn = 0;
    uint32_t cid = 0;
    int rc;
    if (n == 0)
        return 0;
    if (n > w->cap_bcid && (rc = tb_grow(&w->bcid, &w->cap_bcid, n, sizeof *w->bcid)))
        return rc;
    /* Client ids first: endpoint_id may insert into endpoints, which cannot
     * happen while the request insert is running. */
    for (size_t i = 0; i < n; i++) {
        const struct tb_request *r = &rq[i];
        /* Consecutive requests mostly come from the same caller: skip the
         * map for a repeat. */
        if (i == 0 || !tb_addr_ip_eq(&r->client, &rq[i - 1].client) ||
            r->client.family != rq[i - 1].client.family) {
            if ((rc = endpoint_id(w, &r->client, &cid)))
                return rc;
        }
        w->bcid[i] = cid;
        max_conn = TB_MAX(max_conn, r->conn);
    }
    w->brq = rq;
    w->bn = n;
    int src = sqlite3_step(w->ins_batch);
    sqlite3_reset(w->ins_batch);
    w->brq = NULL;
    w->bn = 0;
    if (src != SQLITE_DONE)
        return tb__db_fail(&w->d, "storing requests");
    if ((rc = tb__db_stmt(&w->d, TB__SQ_NEXT_CONN_SET, &one)))
        return rc;
    sqlite3_bind_int64(one, 1, (int64_t)(max_conn + 1));
    return tb__db_step_done(&w->d, one, "recording the next connection id");
}

/* The capture id is a literal: the statement belongs to this capture's writer. */
static int prepare_batch_insert(struct tb_writer *w)
{
    char sql[512];
    if (sqlite3_create_module_v2(w->d.db, "tb_batch", &batch_module, w, NULL) != SQLITE_OK)
        return tb__db_fail(&w->d, "registering the batch table");
    snprintf(sql, sizeof sql,
             "INSERT INTO requests(capture_id, tier_id, server_id, client_id, client_port, conn, "
             "class_id, arrival_ns, departure_ns, req_bytes, resp_bytes, status, flags) "
             "SELECT %lld, tier, server, client, port, conn, class, arrival, departure, "
             "req_bytes, resp_bytes, status, flags FROM tb_batch",
             (long long)w->capture_id);
    int src = sqlite3_prepare_v3(w->d.db, sql, -1, SQLITE_PREPARE_PERSISTENT, &w->ins_batch,
                                 NULL);
    return src == SQLITE_OK ? 0 : tb__db_fail(&w->d, "preparing the request insert");
}

static int write_conns(struct tb_writer *w, const struct tb_conn *c, size_t n)
{
    sqlite3_stmt *s;
    uint64_t max_conn = 0;
    int rc;
    for (size_t i = 0; i < n; i++) {
        char cb[TB_ADDR_STRLEN], sb[TB_ADDR_STRLEN];
        if ((rc = tb__db_stmt(&w->d, TB__SQ_CONN_PUT, &s)))
            return rc;
        sqlite3_bind_int64(s, 1, (int64_t)c[i].conn);
        sqlite3_bind_int64(s, 2, w->capture_id);
        sqlite3_bind_text(s, 3, tb_addr_fmt(&c[i].client, cb, sizeof cb), -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, tb_addr_fmt(&c[i].server, sb, sizeof sb), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, c[i].tier);
        sqlite3_bind_int64(s, 6, c[i].server_id);
        sqlite3_bind_int64(s, 7, c[i].open_ns);
        sqlite3_bind_int64(s, 8, c[i].close_ns);
        sqlite3_bind_text(s, 9, tb_conn_open_name(c[i].opened), -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 10, tb_conn_close_name(c[i].closed), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 11, (int64_t)c[i].requests);
        sqlite3_bind_int64(s, 12, (int64_t)c[i].packets);
        sqlite3_bind_int64(s, 13, (int64_t)c[i].bytes_c2s);
        sqlite3_bind_int64(s, 14, (int64_t)c[i].bytes_s2c);
        if ((rc = tb__db_step_done(&w->d, s, "storing connections")))
            return rc;
        max_conn = TB_MAX(max_conn, c[i].conn);
    }
    if (!n)
        return 0;
    /* A connection that carried no request still takes its id. */
    if ((rc = tb__db_stmt(&w->d, TB__SQ_NEXT_CONN_SET, &s)))
        return rc;
    sqlite3_bind_int64(s, 1, (int64_t)(max_conn + 1));
    return tb__db_step_done(&w->d, s, "recording the next connection id");
}

static int write_batch(struct tb_writer *w, const struct batch *b)
{
    int rc = tb__db_begin(&w->d);
    if (rc)
        return rc;
    if ((rc = tb__put_catalog(&w->d, &b->cat)) ||
        (rc = write_requests(w, b->req, b->nreq)) ||
        (rc = write_conns(w, b->conn, b->nconn)) ||
        (rc = tb__put_health(&w->d, w->capture_id, b->health, b->nhealth)) ||
        (b->nhealth &&
         (rc = tb__put_capture_running(&w->d, w->capture_id, &b->health[b->nhealth - 1],
                                       atomic_load(&w->rows) + b->nreq))) ||
        (b->nwin && (rc = tb__put_windows(&w->d, b->win, b->nwin))))
        goto out;
out:
    rc = tb__db_end(&w->d, rc);
    /* Endpoint ids handed out inside a rolled-back transaction do not exist. */
    if (rc)
        ep_reset(w);
    return rc;
}

/* SQLite's commit hook for a WAL database: the log's size in frames. Setting
 * it replaces the automatic checkpoint, which bulk mode makes by itself. */
static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    ((struct tb_writer *)arg)->wal_frames = frames;
    return SQLITE_OK;
}

/* A checkpoint with sync on: the log is synced before the database file is
 * written and the file after (synchronous = NORMAL in WAL mode), so what
 * was committed is on disk whatever happens next. */
static int synced_checkpoint(struct tb_writer *w, int mode)
{
    int rc = tb__db_exec(&w->d, "PRAGMA synchronous = NORMAL");
    if (rc)
        return rc;
    int src = sqlite3_wal_checkpoint_v2(w->d.db, NULL, mode, NULL, NULL);
    /* BUSY: a reader holds part of the log; what is in it is synced anyway. */
    if (src != SQLITE_OK && src != SQLITE_BUSY)
        return tb__db_fail(&w->d, "checkpointing the write-ahead log");
    w->wal_frames = 0;
    return w->bulk ? tb__db_exec(&w->d, "PRAGMA synchronous = OFF") : 0;
}

/* Adds a committed batch's requests to the per-tier counts. Out of memory,
 * those counts stay short (the rows are stored all the same). */
static void count_tiers(struct tb_writer *w, const struct batch *b)
{
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < b->nreq; i++) {
        uint32_t t = b->req[i].tier;
        if (t >= w->ntier_rows &&
            tb_grow_zero(&w->tier_rows, &w->ntier_rows, (size_t)t + 1, sizeof *w->tier_rows))
            break;
        w->tier_rows[t]++;
    }
    pthread_mutex_unlock(&w->mu);
}

static void *writer_main(void *arg)
{
    struct tb_writer *w = arg;
    /* The read index kept during the load rather than sorted at the end: on
     * a fresh file this is instant, on one whose rows lack it (a capture
     * killed before its end) it sorts them here, beside the capture thread.
     * A failure stops the writer as a failed batch would. */
    if (w->keep_index) {
        int rc = tb__db_read_index(&w->d);
        if (rc)
            set_err(w, rc);
    }
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv_work, &w->mu);
        struct batch *b = w->head;
        if (!b) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        w->head = b->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);

        /* After the first failure later batches are discarded, not written:
         * they may need catalog entries that went down with the failed one,
         * and the caller learns of the error and stops. Draining keeps the
         * caller from blocking on a full queue meanwhile. */
        int64_t t0 = clock_ns(CLOCK_MONOTONIC);
        if (atomic_load(&w->err) == 0) {
            int rc = write_batch(w, b);
            if (!rc) { /* committed: counted, even if the checkpoint below fails */
                atomic_fetch_add(&w->rows, b->nreq);
                count_tiers(w, b);
            }
            if (!rc && w->bulk && (int64_t)w->wal_frames * w->page_size >= w->bulk_wal)
                rc = synced_checkpoint(w, SQLITE_CHECKPOINT_PASSIVE);
            if (rc)
                set_err(w, rc);
        }
        int64_t t1 = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);

        batch_clear(b);
        pthread_mutex_lock(&w->mu);
        if (w->nfree < FREE_KEEP) {
            b->next = w->free_list;
            w->free_list = b;
            w->nfree++;
            b = NULL;
        }
        w->qlen--;
        w->done++;
        w->write_ns += t1 - t0;
        w->cpu_ns = cpu;
        pthread_cond_broadcast(&w->cv_space);
        pthread_mutex_unlock(&w->mu);
        batch_free(b);
    }
    return NULL;
}

/* ---- the caller's side ------------------------------------------------------------------- */

static void writer_free(struct tb_writer *w)
{
    batch_free(w->cur);
    for (struct batch *b = w->head, *next; b; b = next) {
        next = b->next;
        batch_free(b);
    }
    for (struct batch *b = w->free_list, *next; b; b = next) {
        next = b->next;
        batch_free(b);
    }
    free(w->ep);
    free(w->tier_rows);
    sqlite3_finalize(w->ins_batch);
    free(w->bcid);
    tb__db_close(&w->d);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv_work);
    pthread_cond_destroy(&w->cv_space);
    free(w);
}

int tb_writer_start(struct tb_writer **out, struct tb_store *st, int64_t capture_id)
{
    return tb_writer_start_opts(out, st, capture_id, NULL);
}

int tb_writer_start_opts(struct tb_writer **out, struct tb_store *st, int64_t capture_id,
                         const struct tb_writer_opts *o)
{
    char err[256];
    int rc;
    *out = NULL;
    size_t batch_rows = o && o->batch_rows ? o->batch_rows : BATCH_ROWS;
    size_t queue_cap = o && o->queue_cap ? o->queue_cap : QUEUE_CAP;
    if (batch_rows > BATCH_ROWS_MAX)
        return TB_E_INVAL;
    struct tb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return TB_E_NOMEM;
    w->batch_rows = batch_rows;
    w->queue_cap = queue_cap;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv_work, NULL);
    pthread_cond_init(&w->cv_space, NULL);
    atomic_init(&w->err, 0);
    atomic_init(&w->rows, 0);
    w->capture_id = capture_id;
    w->bulk = o && o->bulk;
    w->keep_index = o && o->keep_index;
    w->bulk_wal = o && o->bulk_wal ? (int64_t)o->bulk_wal : TB_WRITER_BULK_WAL;
    w->ep_mask = 255;
    w->ep = calloc((size_t)w->ep_mask + 1, sizeof *w->ep);
    w->cur = batch_get(w);
    if (!w->ep || !w->cur) {
        rc = TB_E_NOMEM;
        goto out;
    }
    /* The store's file has been opened, checked and migrated already. */
    if ((rc = tb__db_open(&w->d, tb_store_path(st), SQLITE_OPEN_READWRITE, err, sizeof err))) {
        tb_log_error("%s", err);
        goto out;
    }
    /* synchronous is per connection. The page cache holds a batch's pages
     * (16 384 rows take about 50 pages of 16 KiB) many times over; a larger
     * one (it was 32 MiB) only costs fresh memory the kernel must zero, 13%
     * of the writer thread's samples under perf. Each checkpoint costs two
     * fsyncs, which on virtual disks take longer than the copying:
     * checkpointing every 2048 pages (32 MiB at our 16 KiB pages) instead of
     * SQLite's 1000 removes most of that stall, and the size limit hands the
     * space back once a checkpoint has reset it. In bulk mode nothing is
     * synced until a checkpoint, made every TB_WRITER_BULK_WAL bytes. */
    if ((rc = tb__db_exec(&w->d, w->bulk ? "PRAGMA synchronous = OFF"
                                         : "PRAGMA synchronous = NORMAL")) ||
        (rc = tb__db_exec(&w->d, "PRAGMA cache_size = -8192")) ||
        (rc = tb__db_exec(&w->d, "PRAGMA wal_autocheckpoint = 2048")) ||
        (rc = tb__db_exec(&w->d, "PRAGMA journal_size_limit = 67108864")) ||
        (rc = prepare_batch_insert(w)))
        goto out;
    if (w->bulk) {
        sqlite3_stmt *ps = NULL;
        w->page_size = 4096;
        if (sqlite3_prepare_v2(w->d.db, "PRAGMA page_size", -1, &ps, NULL) == SQLITE_OK &&
            sqlite3_step(ps) == SQLITE_ROW)
            w->page_size = sqlite3_column_int64(ps, 0);
        sqlite3_finalize(ps);
        sqlite3_wal_hook(w->d.db, on_wal_commit, w);
    }
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        tb_log_error("%s: cannot start the writer thread", tb_store_path(st));
        rc = TB_E_NOMEM;
        goto out;
    }
    *out = w;
    w = NULL;
out:
    if (w)
        writer_free(w);
    return rc;
}

int tb_writer_catalog(struct tb_writer *w, struct tb_catalog *cat)
{
    w->cat = cat;
    if (!w->cur)
        return TB_E_NOMEM;
    int rc = tb__cat_delta_take(&w->cur->cat, cat);
    if (rc)
        set_err(w, rc);
    return rc;
}

int tb_writer_request(struct tb_writer *w, const struct tb_request *r)
{
    int rc;
    if (!w->cur)
        return TB_E_NOMEM;
    if (w->cur->nreq == w->batch_rows && (rc = submit(w)))
        return rc;
    if (w->cat && (rc = tb__cat_delta_take(&w->cur->cat, w->cat))) {
        set_err(w, rc);
        return rc;
    }
    w->cur->req[w->cur->nreq++] = *r;
    return atomic_load_explicit(&w->err, memory_order_relaxed);
}

int tb_writer_conn(struct tb_writer *w, const struct tb_conn *c)
{
    struct batch *b = w->cur;
    if (!b)
        return TB_E_NOMEM;
    int rc = tb_grow(&b->conn, &b->cap_conn, b->nconn + 1, sizeof *b->conn);
    if (!rc && w->cat)
        rc = tb__cat_delta_take(&b->cat, w->cat);
    if (rc) {
        set_err(w, rc);
        return rc;
    }
    b->conn[b->nconn++] = *c;
    /* Connections are few next to requests, but a scan of short-lived ones
     * must not grow one batch without bound. */
    if (b->nconn >= w->batch_rows && (rc = submit(w)))
        return rc;
    return atomic_load_explicit(&w->err, memory_order_relaxed);
}

int tb_writer_health(struct tb_writer *w, int64_t ts_ns, uint64_t packets, uint64_t kernel_drops,
                     uint64_t if_drops)
{
    struct batch *b = w->cur;
    if (!b)
        return TB_E_NOMEM;
    int rc = tb_grow(&b->health, &b->cap_health, b->nhealth + 1, sizeof *b->health);
    if (rc) {
        set_err(w, rc);
        return rc;
    }
    b->health[b->nhealth++] = (struct tb_health_row){ts_ns, packets, kernel_drops, if_drops};
    /* Health comes about once a second on a live capture: a good moment to
     * make the requests gathered meanwhile visible to readers. */
    return submit(w);
}

int tb_writer_windows(struct tb_writer *w, const struct tb_window *win, size_t n)
{
    struct batch *b = w->cur;
    if (!b)
        return TB_E_NOMEM;
    int rc = tb_grow(&b->win, &b->cap_win, b->nwin + n, sizeof *b->win);
    if (rc) {
        set_err(w, rc);
        return rc;
    }
    if (n)
        memcpy(b->win + b->nwin, win, n * sizeof *win);
    b->nwin += n;
    return atomic_load(&w->err);
}

int tb_writer_flush(struct tb_writer *w)
{
    int rc = submit(w);
    if (rc)
        return rc;
    pthread_mutex_lock(&w->mu);
    while (w->done != w->queued)
        pthread_cond_wait(&w->cv_space, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return atomic_load(&w->err);
}

int tb_writer_finish(struct tb_writer *w)
{
    return tb_writer_finish_counts(w, NULL, NULL, NULL);
}

int tb_writer_finish_counts(struct tb_writer *w, uint64_t *rows, uint64_t **per_tier,
                            size_t *ntier)
{
    if (rows)
        *rows = 0;
    if (per_tier) {
        *per_tier = NULL;
        *ntier = 0;
    }
    if (!w)
        return 0;
    int rc = w->cur ? submit(w) : 0;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    int err = atomic_load(&w->err);
    /* The safe end of a bulk load: everything committed goes to disk now. */
    if (!err && w->bulk)
        err = synced_checkpoint(w, SQLITE_CHECKPOINT_PASSIVE);
    if (rows)
        *rows = atomic_load(&w->rows);
    if (per_tier) {
        *per_tier = w->tier_rows;
        *ntier = w->ntier_rows;
        w->tier_rows = NULL;
    }
    writer_free(w);
    return err ? err : rc;
}

void tb_writer_stats(struct tb_writer *w, struct tb_writer_stats *s)
{
    pthread_mutex_lock(&w->mu);
    *s = (struct tb_writer_stats){
        .rows = atomic_load(&w->rows),
        .batches = w->done,
        .max_queued = w->max_queued,
        .caller_blocked_ns = w->blocked_ns,
        .write_ns = w->write_ns,
        .cpu_ns = w->cpu_ns,
    };
    pthread_mutex_unlock(&w->mu);
}

uint64_t tb_writer_rows(const struct tb_writer *w)
{
    return atomic_load(&w->rows);
}
