/* SPDX-License-Identifier: MIT */
/* test_ch_live.c — the live ClickHouse sender against a stand-in HTTP server in the test (not
 * ClickHouse: it stores each INSERT's body and answers 500 while "down"): batches in seal
 * order, the spool used and replayed in order, what an ended capture left sent by the next
 * one first, drops counted exactly when the spool is full, a batch stored in part
 * completed with its missing rows only (requests by seq, connections by conn id), and a
 * connections batch's conn id range in its spool file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ch.h"

/* ---- the stand-in server ---------------------------------------------------------------- */

struct fake {
    int lfd;
    unsigned port;
    pthread_t th;
    atomic_bool stop, down;
    pthread_mutex_t mu;
    uint64_t seqs[4096]; /* the seq of every request row received, in order */
    size_t nseq;
    unsigned inserts;
    /* The next INSERT into requests keeps only its first half and gets no
     * answer (as a cluster one shard of which failed, or a reset). */
    atomic_bool partial;
    uint64_t staged[4096]; /* rows staged by a fill (INSERT INTO a `table`) */
    size_t nstaged;
    unsigned fills;
    /* The same for connections (their conn ids): stored, staged, and the
     * next INSERT into connections kept in half. */
    uint64_t conns[4096], cstaged[4096];
    size_t nconns, ncstaged;
    atomic_bool cpartial;
};

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Request rows (ch.c's column order): strings are short here (one length byte).
 * Appends their seq to out (at most 4096). */
static void take_rows(uint64_t *out, size_t *nout, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        for (int s = 0; s < 3; s++)
            p += 1 + p[0]; /* sensor, tier, proto */
        p += 8;            /* tier_hash */
        p += 1 + p[0];     /* server */
        p += 1 + p[0];     /* client */
        p += 8;            /* conn */
        p += 1 + p[0];     /* class */
        p += 8 + 8 + 8 + 8 + 8 + 4 + 4; /* class_hash, arrival, departure, bytes x2, status, flags */
        if (*nout < 4096)
            out[(*nout)++] = le(p, 8);
        p += 8;
    }
}

/* Connection rows: appends their conn ids to out. */
static void take_conns(uint64_t *out, size_t *nout, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        p += 1 + p[0]; /* sensor */
        if (*nout < 4096)
            out[(*nout)++] = le(p, 8);
        p += 8;
        for (int s = 0; s < 5; s++)
            p += 1 + p[0]; /* client, server, tier, proto, server_addr */
        p += 8 + 8 + 1 + 1 + 8 * 4; /* open, close, opened, closed, requests, packets, bytes */
    }
}

static bool have_conn(const struct fake *f, uint64_t conn)
{
    for (size_t i = 0; i < f->nconns; i++)
        if (f->conns[i] == conn)
            return true;
    return false;
}

static bool have_seq(const struct fake *f, uint64_t seq)
{
    for (size_t i = 0; i < f->nseq; i++)
        if (f->seqs[i] == seq)
            return true;
    return false;
}

static void serve_one(struct fake *f, int fd)
{
    static char buf[1 << 20];
    size_t n = 0;
    char *hend = NULL;
    while (!hend && n < sizeof buf - 1) {
        ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
        if (k <= 0)
            return;
        n += (size_t)k;
        buf[n] = '\0';
        hend = strstr(buf, "\r\n\r\n");
    }
    if (!hend)
        return;
    const char *cl = strcasestr(buf, "content-length:");
    size_t blen = cl ? strtoul(cl + 15, NULL, 10) : 0, hlen = (size_t)(hend + 4 - buf);
    while (n < hlen + blen && n < sizeof buf) {
        ssize_t k = read(fd, buf + n, sizeof buf - n);
        if (k <= 0)
            return;
        n += (size_t)k;
    }
    const char *body = buf + hlen;
    char answer[256];
    if (atomic_load(&f->down)) {
        snprintf(answer, sizeof answer, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 16"
                 "\r\nConnection: close\r\n\r\nCode: 999, down\n");
        if (write(fd, answer, strlen(answer)) < 0)
            return;
        return;
    }
    /* The request line: INSERTs carry their SQL there (URL-encoded). */
    const char *eol = strstr(buf, "\r\n");
    bool insert = strstr(buf, "query=INSERT") && strstr(buf, "query=INSERT") < eol;
    bool select = !strstr(buf, "query=") && blen >= 6 && !memcmp(body, "SELECT", 6);
    bool staging = insert && strstr(buf, "%60") && strstr(buf, "%60") < eol;
    bool fill = insert && strstr(buf, "%20SELECT%20") && strstr(buf, "%20SELECT%20") < eol;
    /* Connections: their column list (sensor, conn, ...) or table name. */
    bool conn = (strstr(buf, "sensor%2C%20conn%2C") && strstr(buf, "sensor%2C%20conn%2C") < eol) ||
                (strstr(buf, ".connections%20SELECT") && strstr(buf, ".connections%20SELECT") < eol);
    uint64_t answer_n = 0;
    pthread_mutex_lock(&f->mu);
    if (conn && fill) {
        for (size_t i = 0; i < f->ncstaged; i++)
            if (!have_conn(f, f->cstaged[i]) && f->nconns < 4096)
                f->conns[f->nconns++] = f->cstaged[i];
        f->fills++;
    } else if (conn && staging) {
        take_conns(f->cstaged, &f->ncstaged, (const uint8_t *)body, (const uint8_t *)body + blen);
    } else if (conn && insert) {
        size_t from = f->nconns;
        take_conns(f->conns, &f->nconns, (const uint8_t *)body, (const uint8_t *)body + blen);
        if (atomic_exchange(&f->cpartial, false)) {
            f->nconns = from + (f->nconns - from) / 2;
            pthread_mutex_unlock(&f->mu);
            return; /* no answer: the connection closes */
        }
    } else if (select && strstr(body, "WHERE conn IN (")) {
        /* The staged connections the store holds. */
        for (size_t i = 0; i < f->ncstaged; i++)
            answer_n += have_conn(f, f->cstaged[i]);
    } else if (fill) {
        /* INSERT INTO requests SELECT * FROM `stage` WHERE seq NOT IN (stored). */
        for (size_t i = 0; i < f->nstaged; i++)
            if (!have_seq(f, f->staged[i]) && f->nseq < 4096)
                f->seqs[f->nseq++] = f->staged[i];
        f->fills++;
    } else if (staging) {
        take_rows(f->staged, &f->nstaged, (const uint8_t *)body, (const uint8_t *)body + blen);
    } else if (insert && strstr(buf, "requests") && strstr(buf, "requests") < eol) {
        size_t from = f->nseq;
        take_rows(f->seqs, &f->nseq, (const uint8_t *)body, (const uint8_t *)body + blen);
        f->inserts++;
        if (atomic_exchange(&f->partial, false)) {
            f->nseq = from + (f->nseq - from) / 2;
            pthread_mutex_unlock(&f->mu);
            return; /* no answer: the connection closes */
        }
    } else if (select && strstr(body, "seq >= ")) {
        /* The sender counting a batch's seq range. */
        uint64_t lo = strtoull(strstr(body, "seq >= ") + 7, NULL, 10);
        uint64_t hi = strtoull(strstr(body, "seq <= ") + 7, NULL, 10);
        for (size_t i = 0; i < f->nseq; i++)
            answer_n += f->seqs[i] >= lo && f->seqs[i] <= hi;
    }
    pthread_mutex_unlock(&f->mu);
    /* A SELECT gets zeros but a range count: count() 0, max() 0 (three
     * UInt64 cover every query here). */
    size_t alen = select ? 24 : 0;
    snprintf(answer, sizeof answer,
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", alen);
    if (write(fd, answer, strlen(answer)) < 0)
        return;
    if (alen) {
        uint8_t v[24] = {0};
        for (int i = 0; i < 8; i++)
            v[i] = (uint8_t)(answer_n >> (8 * i));
        if (write(fd, v, alen) < 0)
            return;
    }
}

static void *fake_run(void *arg)
{
    struct fake *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {f->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        serve_one(f, fd);
        close(fd);
    }
    return NULL;
}

static void fake_start(struct fake *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lfd, 64), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    close(f->lfd);
    pthread_mutex_destroy(&f->mu);
}

/* ---- the test ---------------------------------------------------------------------------- */

struct env {
    struct tb_catalog *cat;
    uint32_t tier, server, cls;
    struct tb_ch *enc;
    struct tb_store_url u;
    int64_t arrival;
};

static void add(struct env *e, struct tb_ch_live *cl, int n)
{
    for (int i = 0; i < n; i++) {
        struct tb_request r = {.arrival_ns = ++e->arrival, .departure_ns = e->arrival + 5,
                               .conn = 1, .tier = e->tier, .server = e->server,
                               .class_id = e->cls, .status = 200};
        assert_int_equal(tb_addr_parse("10.0.0.2:1234", &r.client), 0);
        assert_int_equal(tb_ch_live_request(cl, e->cat, &r), 0);
    }
    assert_int_equal(tb_ch_live_tick(cl), 0);
}

/* Ended connections with these ids, in this order (as connections end). */
static void add_conns(struct env *e, struct tb_ch_live *cl, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct tb_conn c = {.conn = ids[i], .closed = 1};
        assert_int_equal(tb_addr_parse("10.0.0.2:1234", &c.client), 0);
        assert_int_equal(tb_addr_parse("10.0.0.1:80", &c.server), 0);
        assert_int_equal(tb_ch_live_conn(cl, e->cat, &c), 0);
    }
}

static void wait_for(struct tb_ch_live *cl, uint64_t stored, struct tb_ch_live_stats *s)
{
    for (int i = 0; i < 200; i++) {
        tb_ch_live_stats(cl, s);
        if (s->stored_requests >= stored && !s->pending_requests)
            return;
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    tb_ch_live_stats(cl, s);
}

static struct tb_ch_live *start(struct env *e, const char *dir, uint64_t max)
{
    struct tb_ch *send;
    struct tb_ch_live *cl;
    char err[512];
    assert_int_equal(tb_ch_open(&send, &e->u, "unit", false, 0, err, sizeof err), 0);
    const struct tb_ch_live_opts o = {.spool_dir = dir, .spool_max = max,
                                      .retry_ns = 10 * TB_NS_PER_SEC};
    int rc = tb_ch_live_start(&cl, e->enc, send, &o, err, sizeof err);
    if (rc)
        print_error("tb_ch_live_start: %s\n", err);
    assert_int_equal(rc, 0);
    return cl;
}

static size_t spool_files(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".spool") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* The stand-in server, a store URL to it, an encoder and a catalog of one
 * tier, server and class; dir (a mkdtemp template) made for the spool. */
static void env_open(struct fake *f, struct env *e, char *dir)
{
    struct tb_addr sa;
    char url[128], err[512];
    fake_start(f);
    assert_non_null(mkdtemp(dir));
    snprintf(url, sizeof url, "clickhouse://127.0.0.1:%u/t", f->port);
    assert_int_equal(tb_store_url_parse(url, &e->u, err, sizeof err), 0);
    assert_int_equal(tb_ch_open(&e->enc, &e->u, "unit", true, 0, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&e->cat), 0);
    assert_int_equal(tb_catalog_tier(e->cat, "http", "http", &e->tier), 0);
    assert_int_equal(tb_addr_parse("10.0.0.1:80", &sa), 0);
    assert_int_equal(tb_catalog_server(e->cat, e->tier, &sa, &e->server), 0);
    assert_int_equal(tb_catalog_class(e->cat, e->tier, "GET /", 5, &e->cls), 0);
}

static void env_close(struct fake *f, struct env *e, const char *dir)
{
    tb_ch_close(e->enc);
    tb_catalog_free(e->cat);
    fake_stop(f);
    char lock[64];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    unlink(lock);
    rmdir(dir);
}

/* env_open, a sender with a 1 MiB spool, and a first batch of 10 that goes
 * straight through (the server up). */
static struct tb_ch_live *open_up(struct fake *f, struct env *e, char *dir,
                                  struct tb_ch_live_stats *s)
{
    env_open(f, e, dir);
    struct tb_ch_live *cl = start(e, dir, 1 << 20);
    add(e, cl, 10);
    wait_for(cl, 10, s);
    assert_int_equal(s->stored_requests, 10);
    assert_int_equal(s->spooled_batches, 0);
    return cl;
}

static void test_live(void **state)
{
    (void)state;
    struct fake f;
    struct env e = {0};
    struct tb_ch_live_stats s;
    char dir[] = "/tmp/test_ch_live.XXXXXX";
    struct tb_ch_live *cl = open_up(&f, &e, dir, &s);

    /* Down for six batches: four wait in memory, two in the spool; up: all
     * sent, in order. */
    atomic_store(&f.down, true);
    for (int k = 0; k < 6; k++)
        add(&e, cl, 10);
    tb_ch_live_stats(cl, &s);
    assert_int_equal(s.pending_requests, 60);
    assert_int_equal(s.spool_files, 2);
    assert_int_equal(spool_files(dir), 2);
    atomic_store(&f.down, false);
    wait_for(cl, 70, &s);
    assert_int_equal(s.stored_requests, 70);
    assert_int_equal(s.dropped_requests, 0);
    assert_int_equal(s.replayed_batches, 2);
    assert_int_equal(spool_files(dir), 0);

    /* Ending while down: the batch waits in the spool for the next capture,
     * which sends it at its start. */
    atomic_store(&f.down, true);
    add(&e, cl, 10);
    assert_int_equal(tb_ch_live_finish(cl, 0, NULL, &s), 0);
    assert_int_equal(s.pending_requests, 10);
    assert_int_equal(spool_files(dir), 1);
    atomic_store(&f.down, false);

    /* The next capture, with a spool too small for any batch: it first sends
     * what was left; then, down, four batches wait in memory, two are
     * dropped, and at the end the four cannot go to the spool either: 60
     * dropped, counted exactly. */
    cl = start(&e, dir, 100);
    tb_ch_live_stats(cl, &s);
    assert_int_equal(s.pending_requests, 0);
    assert_int_equal(spool_files(dir), 0);
    atomic_store(&f.down, true);
    for (int k = 0; k < 6; k++)
        add(&e, cl, 10);
    tb_ch_live_stats(cl, &s);
    assert_int_equal(s.dropped_requests, 20);
    assert_int_equal(tb_ch_live_finish(cl, 0, NULL, &s), 0);
    assert_int_equal(s.dropped_requests, 60);
    assert_int_equal(s.pending_requests, 0);
    assert_int_equal(spool_files(dir), 0);

    /* Received: seq 0..79, each once, in order. */
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.nseq, 80);
    for (size_t i = 0; i < f.nseq; i++)
        assert_int_equal(f.seqs[i], i);
    pthread_mutex_unlock(&f.mu);

    env_close(&f, &e, dir);
}

/* A batch the store took only in part (the stand-in keeps the first half of
 * an insert and closes without answering): once the store answers again and
 * the settling wait is over, the sender counts the batch's seq range, finds
 * half, and sends the rest (staged, then INSERT ... SELECT ... NOT IN): every
 * seq stored once, nothing counted dropped. */
static void test_partial(void **state)
{
    (void)state;
    struct fake f;
    struct env e = {0};
    struct tb_ch_live_stats s;
    char dir[] = "/tmp/test_ch_live.XXXXXX";
    struct tb_ch_live *cl = open_up(&f, &e, dir, &s);
    atomic_store(&f.partial, true);
    add(&e, cl, 20); /* seq 10..29: 10..19 stored, then the connection closes */
    add(&e, cl, 5);  /* seq 30..34: waits behind it */
    wait_for(cl, 35, &s);
    assert_int_equal(s.stored_requests, 35);
    assert_int_equal(s.dropped_requests, 0);
    assert_int_equal(s.refilled_batches, 1);
    assert_int_equal(tb_ch_live_finish(cl, 0, NULL, &s), 0);

    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.fills, 1);
    assert_int_equal(f.nstaged, 20); /* the whole batch staged, only its missing half inserted */
    assert_int_equal(f.nseq, 35);
    for (size_t i = 0; i < f.nseq; i++)
        assert_int_equal(f.seqs[i], i); /* each once, in order */
    pthread_mutex_unlock(&f.mu);

    env_close(&f, &e, dir);
}

/* A connections batch the store took only in part (the stand-in keeps the
 * first half and closes without answering): once settled, the batch is
 * staged, the stage counted against what is stored, and only the missing
 * connections inserted from it: each conn id stored once. */
static void test_conn_partial(void **state)
{
    (void)state;
    struct fake f;
    struct env e = {0};
    struct tb_ch_live_stats s;
    char dir[] = "/tmp/test_ch_live.XXXXXX";
    struct tb_ch_live *cl = open_up(&f, &e, dir, &s);
    atomic_store(&f.cpartial, true);
    static const uint64_t ids[] = {7, 3, 9, 5, 4, 8};
    add_conns(&e, cl, ids, sizeof ids / sizeof ids[0]);
    assert_int_equal(tb_ch_live_tick(cl), 0);
    for (int i = 0; i < 200; i++) {
        tb_ch_live_stats(cl, &s);
        if (s.stored_conns >= 6)
            break;
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    assert_int_equal(s.stored_conns, 6);
    assert_int_equal(s.dropped_conns, 0);
    assert_int_equal(s.refilled_batches, 1);
    assert_int_equal(tb_ch_live_finish(cl, 0, NULL, &s), 0);

    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.ncstaged, 6); /* the whole batch staged */
    assert_int_equal(f.nconns, 6);   /* 3 kept by the failed insert, 3 filled */
    uint64_t got[6];
    memcpy(got, f.conns, sizeof got);
    pthread_mutex_unlock(&f.mu);
    for (size_t i = 0; i < 6; i++)
        for (size_t j = i + 1; j < 6; j++)
            assert_true(got[i] != got[j]); /* each once */
    env_close(&f, &e, dir);
}

/* A connections batch carries the range of its conn ids (not their order:
 * connections end out of order) to the spool file's header, which is what a
 * later completion of that batch counts within. */
static void test_conn_range(void **state)
{
    (void)state;
    struct fake f;
    struct env e = {0};
    struct tb_ch_live_stats s;
    char dir[] = "/tmp/test_ch_live.XXXXXX";
    struct tb_ch_live *cl = open_up(&f, &e, dir, &s);
    atomic_store(&f.down, true);
    static const uint64_t ids[] = {7, 3, 9, 5};
    add_conns(&e, cl, ids, sizeof ids / sizeof ids[0]);
    assert_int_equal(tb_ch_live_finish(cl, 0, NULL, &s), 0);
    assert_int_equal(s.pending_conns, 4);
    assert_int_equal(spool_files(dir), 1);

    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512] = "", line[160] = "";
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".spool"))
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    closedir(d);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    assert_string_equal(line, "tbneck-spool 1 connections 4 3 9\n");
    unlink(path);
    atomic_store(&f.down, false);
    env_close(&f, &e, dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live),
        cmocka_unit_test(test_partial),
        cmocka_unit_test(test_conn_range),
        cmocka_unit_test(test_conn_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
