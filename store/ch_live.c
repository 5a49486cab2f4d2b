/* SPDX-License-Identifier: MIT */
/* ch_live.c — a live sensor's way into ClickHouse: rows batched on the capture thread, sent by a
 * thread of its own, a bounded on-disk spool while the server is away, replayed in order,
 * and every row that had to be dropped counted (docs/clickhouse.md, "Live sensors").
 *
 * Why not block as an offline capture does: a live capture that waits for
 * the network stops reading the interface and the kernel drops packets —
 * a loss nobody can count by request. So the capture thread never waits
 * here. A sealed batch (every second, or at TB_CH_BATCH rows) waits for
 * the sender in memory while fewer than MEM_BATCHES do, else in a file of
 * the spool; when the spool would grow past its cap the batch is dropped
 * whole and its rows counted. Memory is bounded by MEM_BATCHES + 2 batches
 * (those waiting, the one being filled, one read back from the spool).
 *
 * Order: batches are numbered as they are sealed, and the sender takes
 * them strictly in that order, from memory or from the spool, so a
 * sensor's rows arrive in the order it stored them (seq).
 *
 * Never twice: only a refused connection proves the server did not get a
 * batch. After any other failure (a timeout against a stopped server, a
 * reset) the sender waits until the server answers again, SETTLE_NS more
 * (an insert it received before it stalled may still sit in its accept
 * queue), and until it no longer runs the INSERT's query id; then it
 * counts the batch's seq range: all there, it is done; none, it is sent
 * again; some (a cluster whose shards took their parts apart: an error
 * answer through a Distributed table counts as maybe sent too), the rows
 * missing are sent again, the others not (tb__ch_settle: the one rule, which
 * offline captures follow too). That wait cannot be
 * proven long enough — a server frozen long enough may start the old
 * insert after the count — so readers
 * also skip a (sensor, seq) they have seen (tb_ch_scan): a batch stored
 * twice is read once. Connections are settled by conn id the same way (a
 * batch's range of conn ids goes in its spool header); a connection row
 * stored twice all the same is one connection to every reader (the SQLite
 * copy replaces by (sensor, conn)). */
#include "ch-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* One INSERT of 65 536 rows (about 10 MB) takes well under a second; past
 * this the server counts as away (and the batch as maybe sent). */
#define SEND_TIMEOUT_MS 5000
/* Sealed batches kept in memory while the sender is busy, before the spool:
 * a tick's requests and connections, twice. */
#define MEM_BATCHES 4
#define SPOOL_MAGIC "tbneck-spool 1"

struct batch {
    struct batch *next;
    uint64_t no;
    enum tb__ch_table t;
    uint64_t rows, seq_first, seq_last; /* connections: their conn ids' range */
    struct tb_buf body;  /* in memory (empty when on disk) */
    bool on_disk;
    uint64_t disk_bytes;
    bool maybe_sent;     /* an earlier attempt may have reached the server */
};

struct tb_ch_live {
    struct tb_ch *enc, *send;
    char dir[4096];
    int lock_fd;
    uint64_t spool_max;
    /* The capture thread's batches being filled. */
    struct tb_buf cur[2];
    uint64_t cur_rows[2], cur_seq_first, cur_seq_last;
    uint64_t cur_conn_lo, cur_conn_hi; /* the conn ids' range of the connections filled */
    bool disk_told; /* the capture thread said the spool failed */

    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a batch, stop or abort */
    struct batch *head, *tail;
    size_t in_memory; /* queued batches held in memory */
    uint64_t next_no;
    bool stop, gave_up;
    int64_t deadline_ns;
    volatile sig_atomic_t *abort;
    struct tb_ch_live_stats st;
    char last_err[512];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static const char *table_name(enum tb__ch_table t)
{
    return t == TB__CH_REQUESTS ? "requests" : "connections";
}

static void spool_path(const struct tb_ch_live *cl, uint64_t no, const char *sfx, char *p,
                       size_t n)
{
    snprintf(p, n, "%s/%020" PRIu64 ".spool%s", cl->dir, no, sfx);
}

static void count_dropped(struct tb_ch_live *cl, enum tb__ch_table t, uint64_t rows)
{
    if (t == TB__CH_REQUESTS)
        cl->st.dropped_requests += rows;
    else
        cl->st.dropped_conns += rows;
}

static void pending_add(struct tb_ch_live *cl, enum tb__ch_table t, int64_t rows)
{
    if (t == TB__CH_REQUESTS)
        cl->st.pending_requests += (uint64_t)rows;
    else
        cl->st.pending_conns += (uint64_t)rows;
}

/* ---- the spool's files: a header line, then the rows as sent ---------------------------- */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return errno == ENOSPC ? TB_E_FULL : TB_E_IO;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int header(const struct batch *b, char *h, size_t n)
{
    return snprintf(h, n, SPOOL_MAGIC " %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                    table_name(b->t), b->rows, b->seq_first, b->seq_last);
}

/* Writes b's rows to its file (a .tmp renamed into place, so a file under
 * its final name is whole). */
static int spool_write(const struct tb_ch_live *cl, const struct batch *b)
{
    char tmp[4200], fin[4200], h[160];
    int hl = header(b, h, sizeof h);
    spool_path(cl, b->no, ".tmp", tmp, sizeof tmp);
    spool_path(cl, b->no, "", fin, sizeof fin);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == ENOSPC ? TB_E_FULL : TB_E_IO;
    int rc = write_all(fd, h, (size_t)hl);
    if (!rc)
        rc = write_all(fd, b->body.p, b->body.len);
    if (close(fd) < 0 && !rc)
        rc = TB_E_IO;
    if (!rc && rename(tmp, fin) < 0)
        rc = TB_E_IO;
    if (rc)
        unlink(tmp);
    return rc;
}

/* Reads a spool file: its header into b (when hdr_only) or its rows into
 * body. */
static int spool_read(const char *path, struct batch *b, struct tb_buf *body, bool hdr_only)
{
    FILE *f = fopen(path, "rb");
    char line[160], kind[32];
    int rc = 0;
    if (!f)
        return TB_E_IO;
    if (!fgets(line, sizeof line, f) || strncmp(line, SPOOL_MAGIC " ", sizeof SPOOL_MAGIC) ||
        sscanf(line + sizeof SPOOL_MAGIC, "%31s %" SCNu64 " %" SCNu64 " %" SCNu64, kind, &b->rows,
               &b->seq_first, &b->seq_last) != 4 ||
        (strcmp(kind, "requests") && strcmp(kind, "connections"))) {
        fclose(f);
        return TB_E_BADFMT;
    }
    b->t = strcmp(kind, "requests") ? TB__CH_CONNECTIONS : TB__CH_REQUESTS;
    if (!hdr_only) {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            tb_buf_add(body, buf, n);
        if (ferror(f))
            rc = TB_E_IO;
        else if (!tb_buf_ok(body))
            rc = TB_E_NOMEM;
    }
    fclose(f);
    return rc;
}

/* ---- the queue -------------------------------------------------------------------------- */

/* Called with mu held. */
static void push(struct tb_ch_live *cl, struct batch *b)
{
    b->next = NULL;
    if (cl->tail)
        cl->tail->next = b;
    else
        cl->head = b;
    cl->tail = b;
    pthread_cond_broadcast(&cl->cv);
}

static void batch_free(struct batch *b)
{
    if (b) {
        tb_buf_free(&b->body);
        free(b);
    }
}

/* Takes the filled rows of table t off the capture thread and queues them:
 * in memory (fewer than MEM_BATCHES there), else in the spool, else dropped
 * and counted. */
static int seal(struct tb_ch_live *cl, enum tb__ch_table t)
{
    if (!cl->cur_rows[t])
        return 0;
    struct batch *b = calloc(1, sizeof *b);
    if (!b)
        return TB_E_NOMEM;
    b->t = t;
    b->rows = cl->cur_rows[t];
    if (t == TB__CH_REQUESTS) {
        b->seq_first = cl->cur_seq_first;
        b->seq_last = cl->cur_seq_last;
    } else {
        b->seq_first = cl->cur_conn_lo;
        b->seq_last = cl->cur_conn_hi;
    }
    b->body = cl->cur[t];
    tb_buf_init(&cl->cur[t]);
    cl->cur_rows[t] = 0;

    pthread_mutex_lock(&cl->mu);
    b->no = cl->next_no++;
    pending_add(cl, t, (int64_t)b->rows);
    if (cl->in_memory < MEM_BATCHES && !cl->stop) {
        cl->in_memory++;
        push(cl, b);
        pthread_mutex_unlock(&cl->mu);
        return 0;
    }
    char h[160];
    uint64_t need = b->body.len + (uint64_t)header(b, h, sizeof h);
    bool fits = cl->st.spool_bytes + need <= cl->spool_max;
    if (fits)
        cl->st.spool_bytes += need; /* reserved while the file is written */
    pthread_mutex_unlock(&cl->mu);
    int rc = fits ? spool_write(cl, b) : TB_E_FULL;
    pthread_mutex_lock(&cl->mu);
    if (rc) {
        if (fits) {
            cl->st.spool_bytes -= need;
            if (!cl->disk_told)
                tb_log_warn("clickhouse spool %s: cannot write: %s; what it cannot take is "
                            "dropped and counted", cl->dir, tb_strerror(rc));
            cl->disk_told = true;
        }
        pending_add(cl, t, -(int64_t)b->rows);
        count_dropped(cl, t, b->rows);
        pthread_mutex_unlock(&cl->mu);
        batch_free(b);
        return 0;
    }
    tb_buf_free(&b->body);
    b->on_disk = true;
    b->disk_bytes = need;
    cl->st.spool_files++;
    cl->st.spooled_batches++;
    push(cl, b);
    pthread_mutex_unlock(&cl->mu);
    return 0;
}

/* ---- the sender ------------------------------------------------------------------------- */

/* Sends b; on success *stored is how many of its rows the server holds. A
 * batch that may have reached the server is settled first (tb__ch_settle, the
 * rule offline captures follow too). */
static int ship(struct tb_ch_live *cl, struct batch *b, const struct tb_buf *body,
                uint64_t *stored)
{
    char qid[160];
    int rc;
    tb__ch_batch_id(cl->send, b->no, qid, sizeof qid);
    if (b->maybe_sent) {
        const struct tb__ch_batch tb = {.t = b->t, .p = body->p, .len = body->len, .no = b->no,
                                        .rows = b->rows, .first = b->seq_first,
                                        .last = b->seq_last, .query_id = qid};
        bool filled;
        rc = tb__ch_settle(cl->send, &tb, &filled);
        if (rc == 0) {
            if (filled)
                cl->st.refilled_batches++;
            *stored = b->rows;
            return 0;
        }
        if (rc != TB__CH_RESEND)
            return rc; /* still maybe sent: settled again next time */
        b->maybe_sent = false;
    }
    bool maybe = false;
    rc = tb__ch_insert(cl->send, b->t, body->p, body->len, qid, &maybe);
    if (!rc)
        *stored = b->rows;
    else if (maybe)
        b->maybe_sent = true;
    return rc;
}

static void *sender(void *arg)
{
    struct tb_ch_live *cl = arg;
    pthread_mutex_lock(&cl->mu);
    for (;;) {
        while (!cl->head && !cl->stop)
            pthread_cond_wait(&cl->cv, &cl->mu);
        if (!cl->head || (cl->abort && *cl->abort))
            break;
        struct batch *b = cl->head;
        pthread_mutex_unlock(&cl->mu);

        struct tb_buf disk;
        tb_buf_init(&disk);
        char path[4200];
        uint64_t stored = 0;
        bool unreadable = false;
        int rc = 0;
        if (b->on_disk) {
            struct batch h = {0};
            spool_path(cl, b->no, "", path, sizeof path);
            rc = spool_read(path, &h, &disk, false);
            if (rc && rc != TB_E_NOMEM) {
                /* Gone or damaged under us: its rows cannot be sent. */
                tb_log_warn("clickhouse spool %s: cannot read batch %" PRIu64 ": %s; its %" PRIu64
                            " rows are dropped", cl->dir, b->no, tb_strerror(rc), b->rows);
                unreadable = true;
            }
        }
        if (!rc)
            rc = ship(cl, b, b->on_disk ? &disk : &b->body, &stored);
        tb_buf_free(&disk);

        pthread_mutex_lock(&cl->mu);
        if (rc == 0 || unreadable) {
            /* Done: stored (whole: ship() completes a batch held in part) or
             * unreadable. */
            if (stored < b->rows)
                count_dropped(cl, b->t, b->rows - stored);
            if (b->t == TB__CH_REQUESTS)
                cl->st.stored_requests += stored;
            else
                cl->st.stored_conns += stored;
            pending_add(cl, b->t, -(int64_t)b->rows);
            if (b->on_disk) {
                unlink(path);
                cl->st.spool_bytes -= b->disk_bytes;
                cl->st.spool_files--;
                if (rc == 0)
                    cl->st.replayed_batches++;
            }
            cl->head = b->next;
            if (!cl->head)
                cl->tail = NULL;
            if (!b->on_disk)
                cl->in_memory--;
            batch_free(b);
            if (cl->st.down && rc == 0) {
                cl->st.down = false;
                tb_log_warn("clickhouse at %s: back; %" PRIu64 " batches waiting in the spool "
                            "are sent in order", tb__ch_where(cl->send), cl->st.spool_files);
            }
            continue;
        }
        /* Not now: the server is away (or busy settling an insert). */
        snprintf(cl->last_err, sizeof cl->last_err, "%s",
                 rc == TB__CH_BUSY ? "an interrupted insert is still running"
                 : tb_ch_error(cl->send)[0] ? tb_ch_error(cl->send) : tb_strerror(rc));
        if (!cl->st.down) {
            cl->st.down = true;
            cl->st.outages++;
            tb_log_warn("%s; spooling to %s (at most %" PRIu64 " bytes) and trying again every "
                        "second", cl->last_err, cl->dir, cl->spool_max);
        }
        if (cl->stop && now_ns() >= cl->deadline_ns) {
            cl->gave_up = true;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        if (!(cl->abort && *cl->abort))
            pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
        if (cl->abort && *cl->abort) {
            cl->gave_up = true;
            break;
        }
    }
    pthread_mutex_unlock(&cl->mu);
    return NULL;
}

/* ---- start and finish ------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Queues the spool files an earlier capture left, in their order. */
static int load_leftovers(struct tb_ch_live *cl, char *err, size_t errlen)
{
    DIR *d = opendir(cl->dir);
    uint64_t *nos = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (!d) {
        snprintf(err, errlen, "--spool %s: %s", cl->dir, strerror(errno));
        return TB_E_IO;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        uint64_t no = strtoull(e->d_name, &end, 10);
        if (end - e->d_name != 20)
            continue;
        if (!strcmp(end, ".spool.tmp")) {
            /* A write cut short by a crash: never whole, never sent. */
            char p[4200];
            spool_path(cl, no, ".tmp", p, sizeof p);
            tb_log_warn("clickhouse spool %s: removing %s, a batch whose writing was cut short",
                        cl->dir, e->d_name);
            unlink(p);
            continue;
        }
        if (strcmp(end, ".spool"))
            continue;
        if ((rc = tb_grow(&nos, &cap, n + 1, sizeof *nos)))
            break;
        nos[n++] = no;
    }
    closedir(d);
    if (n)
        qsort(nos, n, sizeof *nos, cmp_u64);
    for (size_t i = 0; !rc && i < n; i++) {
        char p[4200];
        struct stat sb;
        struct batch *b = calloc(1, sizeof *b);
        if (!b) {
            rc = TB_E_NOMEM;
            break;
        }
        b->no = nos[i];
        spool_path(cl, b->no, "", p, sizeof p);
        if ((rc = spool_read(p, b, NULL, true)) || stat(p, &sb) < 0) {
            snprintf(err, errlen, "--spool %s: %s is not a spool file of tbneck's", cl->dir, p);
            free(b);
            rc = TB_E_BADFMT;
            break;
        }
        b->on_disk = true;
        b->disk_bytes = (uint64_t)sb.st_size;
        /* A run that ended (or died) while sending it may have sent it. */
        b->maybe_sent = true;
        cl->st.spool_bytes += b->disk_bytes;
        cl->st.spool_files++;
        pending_add(cl, b->t, (int64_t)b->rows);
        if (b->t == TB__CH_REQUESTS)
            cl->st.leftover_requests += b->rows;
        push(cl, b);
        cl->next_no = b->no + 1;
    }
    free(nos);
    return rc;
}

static void stop_sender(struct tb_ch_live *cl, int64_t wait_ns)
{
    if (!cl->running)
        return;
    pthread_mutex_lock(&cl->mu);
    cl->stop = true;
    cl->deadline_ns = now_ns() + wait_ns;
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    pthread_join(cl->thread, NULL);
    cl->running = false;
}

static void live_free(struct tb_ch_live *cl)
{
    while (cl->head) {
        struct batch *b = cl->head;
        cl->head = b->next;
        batch_free(b);
    }
    tb_buf_free(&cl->cur[0]);
    tb_buf_free(&cl->cur[1]);
    if (cl->lock_fd >= 0)
        close(cl->lock_fd);
    tb_ch_close(cl->send);
    pthread_mutex_destroy(&cl->mu);
    pthread_cond_destroy(&cl->cv);
    free(cl);
}

int tb_ch_live_start(struct tb_ch_live **out, struct tb_ch *enc, struct tb_ch *send,
                     const struct tb_ch_live_opts *o, char *err, size_t errlen)
{
    *out = NULL;
    struct tb_ch_live *cl = calloc(1, sizeof *cl);
    if (!cl) {
        tb_ch_close(send);
        snprintf(err, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    cl->enc = enc;
    cl->send = send;
    cl->lock_fd = -1;
    cl->spool_max = o->spool_max;
    cl->next_no = 1;
    tb_buf_init(&cl->cur[0]);
    tb_buf_init(&cl->cur[1]);
    pthread_mutex_init(&cl->mu, NULL);
    pthread_cond_init(&cl->cv, NULL);
    tb_ch_set_retry(send, 0);
    tb__ch_set_timeout(send, SEND_TIMEOUT_MS);
    int rc = 0;
    if (strlen(o->spool_dir) >= sizeof cl->dir - 64) {
        snprintf(err, errlen, "--spool %s: path too long", o->spool_dir);
        rc = TB_E_INVAL;
        goto fail;
    }
    snprintf(cl->dir, sizeof cl->dir, "%s", o->spool_dir);
    if (mkdir(cl->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "--spool %s: cannot create it: %s", cl->dir, strerror(errno));
        rc = TB_E_IO;
        goto fail;
    }
    char lp[4200];
    snprintf(lp, sizeof lp, "%s/lock", cl->dir);
    cl->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (cl->lock_fd < 0) {
        snprintf(err, errlen, "--spool %s: %s", cl->dir, strerror(errno));
        rc = TB_E_IO;
        goto fail;
    }
    if (flock(cl->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errlen, "--spool %s: in use by another capture (each sensor needs a spool "
                 "of its own)", cl->dir);
        rc = TB_E_INVAL;
        goto fail;
    }
    if ((rc = load_leftovers(cl, err, errlen)))
        goto fail;
    uint64_t left = cl->st.spool_files;
    if (pthread_create(&cl->thread, NULL, sender, cl)) {
        snprintf(err, errlen, "cannot start the ClickHouse sender thread");
        rc = TB_E_NOMEM;
        goto fail;
    }
    cl->running = true;
    if (left) {
        /* Before this capture numbers its rows: what an earlier one left
         * must be stored first, so that conn and seq continue above it. */
        tb_log_warn("clickhouse spool %s: sending %" PRIu64 " batches (%" PRIu64 " requests) an "
                    "earlier capture left", cl->dir, left, cl->st.leftover_requests);
        pthread_mutex_lock(&cl->mu);
        cl->deadline_ns = now_ns() + o->retry_ns;
        cl->stop = true; /* the sender ends once they are sent or the deadline passed */
        pthread_cond_broadcast(&cl->cv);
        pthread_mutex_unlock(&cl->mu);
        pthread_join(cl->thread, NULL);
        cl->running = false;
        if (cl->head) {
            snprintf(err, errlen, "--spool %s: %" PRIu64 " batches an earlier capture left could "
                     "not be sent (%s); they stay there", cl->dir, cl->st.spool_files,
                     cl->last_err);
            rc = TB_E_IO;
            goto fail;
        }
        cl->stop = cl->gave_up = false;
        cl->st.down = false;
        if (pthread_create(&cl->thread, NULL, sender, cl)) {
            snprintf(err, errlen, "cannot start the ClickHouse sender thread");
            rc = TB_E_NOMEM;
            goto fail;
        }
        cl->running = true;
    }
    *out = cl;
    return 0;
fail:
    stop_sender(cl, 0);
    live_free(cl);
    return rc;
}

int tb_ch_live_request(struct tb_ch_live *cl, const struct tb_catalog *cat,
                       const struct tb_request *r)
{
    uint64_t seq;
    int rc = tb__ch_put_request(cl->enc, cat, r, &cl->cur[TB__CH_REQUESTS], &seq);
    if (rc)
        return rc;
    if (!cl->cur_rows[TB__CH_REQUESTS]++)
        cl->cur_seq_first = seq;
    cl->cur_seq_last = seq;
    if (cl->cur_rows[TB__CH_REQUESTS] >= TB_CH_BATCH)
        return seal(cl, TB__CH_REQUESTS);
    return 0;
}

int tb_ch_live_conn(struct tb_ch_live *cl, const struct tb_catalog *cat, const struct tb_conn *c)
{
    int rc = tb__ch_put_conn(cl->enc, cat, c, &cl->cur[TB__CH_CONNECTIONS]);
    if (rc)
        return rc;
    if (!cl->cur_rows[TB__CH_CONNECTIONS] || c->conn < cl->cur_conn_lo)
        cl->cur_conn_lo = c->conn;
    if (!cl->cur_rows[TB__CH_CONNECTIONS] || c->conn > cl->cur_conn_hi)
        cl->cur_conn_hi = c->conn;
    if (++cl->cur_rows[TB__CH_CONNECTIONS] >= TB_CH_BATCH)
        return seal(cl, TB__CH_CONNECTIONS);
    return 0;
}

int tb_ch_live_tick(struct tb_ch_live *cl)
{
    int rc = seal(cl, TB__CH_REQUESTS);
    if (!rc)
        rc = seal(cl, TB__CH_CONNECTIONS);
    return rc;
}

void tb_ch_live_stats(struct tb_ch_live *cl, struct tb_ch_live_stats *s)
{
    pthread_mutex_lock(&cl->mu);
    *s = cl->st;
    pthread_mutex_unlock(&cl->mu);
}

int tb_ch_live_finish(struct tb_ch_live *cl, int64_t wait_ns, volatile sig_atomic_t *abort,
                      struct tb_ch_live_stats *s)
{
    if (!cl)
        return 0;
    int rc = tb_ch_live_tick(cl);
    pthread_mutex_lock(&cl->mu);
    cl->abort = abort;
    pthread_mutex_unlock(&cl->mu);
    /* The deadline counts only while the server fails: one that answers
     * takes everything in. */
    stop_sender(cl, wait_ns);
    /* What is still in memory goes to the spool, for the next capture. */
    for (struct batch *b = cl->head; b; b = b->next) {
        if (b->on_disk)
            continue;
        char h[160];
        uint64_t need = b->body.len + (uint64_t)header(b, h, sizeof h);
        int wrc = cl->st.spool_bytes + need <= cl->spool_max ? spool_write(cl, b) : TB_E_FULL;
        if (wrc) {
            count_dropped(cl, b->t, b->rows);
            pending_add(cl, b->t, -(int64_t)b->rows);
            b->rows = 0;
            continue;
        }
        b->on_disk = true;
        b->disk_bytes = need;
        cl->st.spool_bytes += need;
        cl->st.spool_files++;
        cl->st.spooled_batches++;
    }
    if (s)
        *s = cl->st;
    live_free(cl);
    return rc;
}

const char *tb_ch_live_spool(const struct tb_ch_live *cl)
{
    return cl->dir;
}
