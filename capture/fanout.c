/* SPDX-License-Identifier: MIT */
/* fanout.c — live capture on several cores: PACKET_FANOUT workers, each with
 * its own engine and catalog, and the merge stage that makes their output
 * what one engine would have emitted (fanout.h). */
#include "fanout.h"
#include "live-int.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/if_packet.h>
#include <sys/socket.h>
#endif

#include "util.h"

/* ---- batches ---------------------------------------------------------------------------- */

enum ev_type { EV_TIER, EV_SERVER, EV_CLASS, EV_HOST, EV_CONN, EV_REQ };

struct fo_ev {
    int64_t key;
    uint8_t type;       /* enum ev_type */
    bool configured;    /* EV_TIER */
    uint32_t id, tier;  /* catalog entries: the worker's ids */
    uint32_t off, len;  /* text in the batch: a class, or a tier's "name\0proto" */
    struct tb_addr addr;
    union {
        struct tb_request r;
        struct tb_conn c;
    } u;
};

struct tb_fo_batch {
    struct fo_ev *ev;
    size_t n, cap, pos; /* pos: the next event the merge releases */
    char *text;
    size_t tn, tcap;
    struct tb_fo_batch *next;
};

void tb_fo_batch_free(struct tb_fo_batch *b)
{
    if (!b)
        return;
    free(b->ev);
    free(b->text);
    free(b);
}

size_t tb_fo_batch_count(const struct tb_fo_batch *b)
{
    return b ? b->n : 0;
}

static struct fo_ev *push(struct tb_fo_prod *p, int64_t key, enum ev_type type)
{
    if (!p->cur && !(p->cur = calloc(1, sizeof *p->cur)))
        return NULL;
    struct tb_fo_batch *b = p->cur;
    if (tb_grow(&b->ev, &b->cap, b->n + 1, sizeof *b->ev))
        return NULL;
    struct fo_ev *e = &b->ev[b->n++];
    memset(e, 0, sizeof *e);
    e->key = key;
    e->type = (uint8_t)type;
    return e;
}

static int push_text(struct tb_fo_prod *p, struct fo_ev *e, const char *a, size_t alen,
                     const char *b2)
{
    struct tb_fo_batch *b = p->cur;
    size_t blen = b2 ? strlen(b2) + 1 : 0;
    if (tb_grow(&b->text, &b->tcap, b->tn + alen + 1 + blen, 1))
        return TB_E_NOMEM;
    e->off = (uint32_t)b->tn;
    e->len = (uint32_t)alen;
    memcpy(b->text + b->tn, a, alen);
    b->text[b->tn + alen] = '\0';
    if (b2)
        memcpy(b->text + b->tn + alen + 1, b2, blen);
    b->tn += alen + 1 + blen;
    return 0;
}

void tb_fo_prod_init(struct tb_fo_prod *p, struct tb_catalog *worker_cat)
{
    memset(p, 0, sizeof *p);
    p->cat = worker_cat;
    p->tiers = tb_catalog_tier_count(worker_cat);
    p->servers = tb_catalog_server_count(worker_cat);
    p->classes = tb_catalog_class_count(worker_cat);
    p->hosts = tb_catalog_host_count(worker_cat);
}

/* Hands over the catalog entries added since the last event, in id order
 * (tiers before the servers, classes and hosts that name them). */
static int sync_catalog(struct tb_fo_prod *p, int64_t key)
{
    struct fo_ev *e;
    while (p->tiers < tb_catalog_tier_count(p->cat)) {
        const struct tb_tier_info *ti = tb_catalog_tier_get(p->cat, p->tiers + 1);
        if (!(e = push(p, key, EV_TIER)) ||
            push_text(p, e, ti->name, strlen(ti->name), ti->proto) < 0)
            return TB_E_NOMEM;
        e->id = ti->id;
        e->configured = ti->configured;
        p->tiers++;
    }
    while (p->servers < tb_catalog_server_count(p->cat)) {
        const struct tb_server_info *si = tb_catalog_server_get(p->cat, p->servers + 1);
        if (!(e = push(p, key, EV_SERVER)))
            return TB_E_NOMEM;
        e->id = si->id;
        e->tier = si->tier;
        e->addr = si->addr;
        p->servers++;
    }
    while (p->classes < tb_catalog_class_count(p->cat)) {
        const struct tb_class_info *ci = tb_catalog_class_get(p->cat, p->classes + 1);
        if (!(e = push(p, key, EV_CLASS)) ||
            push_text(p, e, ci->text, strlen(ci->text), NULL) < 0)
            return TB_E_NOMEM;
        e->id = ci->id;
        e->tier = ci->tier;
        p->classes++;
    }
    while (p->hosts < tb_catalog_host_count(p->cat)) {
        if (!(e = push(p, key, EV_HOST)) ||
            tb_catalog_host_at(p->cat, p->hosts, &e->tier, &e->addr) < 0)
            return TB_E_NOMEM;
        p->hosts++;
    }
    return 0;
}

int tb_fo_prod_request(struct tb_fo_prod *p, int64_t key, const struct tb_request *r)
{
    struct fo_ev *e;
    if (sync_catalog(p, key) < 0 || !(e = push(p, key, EV_REQ)))
        return TB_E_NOMEM;
    e->u.r = *r;
    return 0;
}

int tb_fo_prod_conn(struct tb_fo_prod *p, int64_t key, const struct tb_conn *c)
{
    struct fo_ev *e;
    if (sync_catalog(p, key) < 0 || !(e = push(p, key, EV_CONN)))
        return TB_E_NOMEM;
    e->u.c = *c;
    return 0;
}

struct tb_fo_batch *tb_fo_prod_take(struct tb_fo_prod *p)
{
    struct tb_fo_batch *b = p->cur;
    p->cur = NULL;
    if (b && b->n == 0) {
        tb_fo_batch_free(b);
        return NULL;
    }
    return b;
}

void tb_fo_prod_fini(struct tb_fo_prod *p)
{
    tb_fo_batch_free(p->cur);
    p->cur = NULL;
}

int tb_fo_catalog_copy(struct tb_catalog *dst, const struct tb_catalog *src)
{
    uint32_t id;
    int rc;
    for (uint32_t i = 1; i <= tb_catalog_tier_count(src); i++) {
        const struct tb_tier_info *t = tb_catalog_tier_get(src, i);
        if ((rc = tb_catalog_tier(dst, t->name, t->proto, &id)) ||
            (rc = tb_catalog_tier_set_configured(dst, id, t->configured)))
            return rc;
    }
    for (uint32_t i = 1; i <= tb_catalog_server_count(src); i++) {
        const struct tb_server_info *s = tb_catalog_server_get(src, i);
        if ((rc = tb_catalog_server(dst, s->tier, &s->addr, &id)))
            return rc;
    }
    for (uint32_t i = 1; i <= tb_catalog_class_count(src); i++) {
        const struct tb_class_info *c = tb_catalog_class_get(src, i);
        if ((rc = tb_catalog_class(dst, c->tier, c->text, strlen(c->text), &id)))
            return rc;
    }
    for (uint32_t i = 0; i < tb_catalog_host_count(src); i++) {
        uint32_t tier;
        struct tb_addr a;
        if ((rc = tb_catalog_host_at(src, i, &tier, &a)) || (rc = tb_catalog_host(dst, tier, &a)))
            return rc;
    }
    /* Ids are dense and given in order, so the copy's are the original's. */
    if (tb_catalog_tier_count(dst) != tb_catalog_tier_count(src) ||
        tb_catalog_server_count(dst) != tb_catalog_server_count(src) ||
        tb_catalog_class_count(dst) != tb_catalog_class_count(src))
        return TB_E_INVAL;
    return 0;
}

/* ---- the merge -------------------------------------------------------------------------- */

struct fo_map {
    uint32_t *v;
    size_t n;
};

struct fo_in {
    struct tb_fo_batch *head, *tail;
    int64_t wm;
    struct fo_map tier, server, klass;
    uint64_t *conn; /* the worker's connection id -> the capture's; 0 = not yet */
    size_t nconn;
};

struct tb_fo_merge {
    unsigned n;
    struct fo_in *in;
    struct tb_catalog *cat;
    uint32_t base_tiers, base_servers, base_classes;
    uint64_t next_conn;
    tb_request_cb rcb;
    tb_conn_cb ccb;
    void *ud;
    int64_t released_key;
};

int tb_fo_merge_new(struct tb_fo_merge **out, unsigned nworkers, struct tb_catalog *cat,
                    uint64_t first_conn, tb_request_cb rcb, tb_conn_cb ccb, void *ud)
{
    struct tb_fo_merge *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m || !(m->in = calloc(nworkers, sizeof *m->in))) {
        free(m);
        return TB_E_NOMEM;
    }
    m->n = nworkers;
    for (unsigned w = 0; w < nworkers; w++)
        m->in[w].wm = INT64_MIN;
    m->cat = cat;
    m->base_tiers = tb_catalog_tier_count(cat);
    m->base_servers = tb_catalog_server_count(cat);
    m->base_classes = tb_catalog_class_count(cat);
    m->next_conn = first_conn ? first_conn : 1;
    m->rcb = rcb;
    m->ccb = ccb;
    m->ud = ud;
    m->released_key = INT64_MIN;
    *out = m;
    return 0;
}

void tb_fo_merge_free(struct tb_fo_merge *m)
{
    if (!m)
        return;
    for (unsigned w = 0; w < m->n; w++) {
        struct fo_in *in = &m->in[w];
        while (in->head) {
            struct tb_fo_batch *b = in->head;
            in->head = b->next;
            tb_fo_batch_free(b);
        }
        free(in->tier.v);
        free(in->server.v);
        free(in->klass.v);
        free(in->conn);
    }
    free(m->in);
    free(m);
}

void tb_fo_merge_add(struct tb_fo_merge *m, unsigned worker, struct tb_fo_batch *b)
{
    if (!b)
        return;
    struct fo_in *in = &m->in[worker];
    b->next = NULL;
    b->pos = 0;
    if (in->tail)
        in->tail->next = b;
    else
        in->head = b;
    in->tail = b;
}

void tb_fo_merge_watermark(struct tb_fo_merge *m, unsigned worker, int64_t wm)
{
    if (wm > m->in[worker].wm)
        m->in[worker].wm = wm;
}

/* Ids up to the base are the same everywhere (the workers' catalogs began as
 * copies); later ones were handed over and mapped. */
static uint32_t map_get(const struct fo_map *mp, uint32_t base, uint32_t id)
{
    if (id <= base)
        return id;
    return id - base - 1 < mp->n ? mp->v[id - base - 1] : 0;
}

static int map_set(struct fo_map *mp, uint32_t base, uint32_t id, uint32_t to)
{
    if (id <= base)
        return 0;
    size_t i = id - base - 1;
    if (i >= mp->n && tb_grow_zero(&mp->v, &mp->n, i + 1, sizeof *mp->v))
        return TB_E_NOMEM;
    mp->v[i] = to;
    return 0;
}

uint32_t tb_fo_merge_tier(const struct tb_fo_merge *m, unsigned worker, uint32_t tier)
{
    return map_get(&m->in[worker].tier, m->base_tiers, tier);
}

int64_t tb_fo_merge_released_key(const struct tb_fo_merge *m)
{
    return m->released_key;
}

/* The capture's id of a worker's connection, given at its first event. */
static int map_conn(struct tb_fo_merge *m, struct fo_in *in, uint64_t local, uint64_t *out)
{
    if (local >= in->nconn && tb_grow_zero(&in->conn, &in->nconn, (size_t)local + 1,
                                           sizeof *in->conn))
        return TB_E_NOMEM;
    if (!in->conn[local])
        in->conn[local] = m->next_conn++;
    *out = in->conn[local];
    return 0;
}

static int release(struct tb_fo_merge *m, struct fo_in *in, const struct tb_fo_batch *b,
                   const struct fo_ev *e)
{
    uint32_t id;
    int rc;
    switch ((enum ev_type)e->type) {
    case EV_TIER: {
        const char *name = b->text + e->off, *proto = name + e->len + 1;
        if ((rc = tb_catalog_tier(m->cat, name, proto, &id)))
            return rc;
        if (e->configured && (rc = tb_catalog_tier_set_configured(m->cat, id, true)))
            return rc;
        return map_set(&in->tier, m->base_tiers, e->id, id);
    }
    case EV_SERVER:
        if ((rc = tb_catalog_server(m->cat, map_get(&in->tier, m->base_tiers, e->tier), &e->addr,
                                    &id)))
            return rc;
        return map_set(&in->server, m->base_servers, e->id, id);
    case EV_CLASS:
        if ((rc = tb_catalog_class(m->cat, map_get(&in->tier, m->base_tiers, e->tier),
                                   b->text + e->off, e->len, &id)))
            return rc;
        return map_set(&in->klass, m->base_classes, e->id, id);
    case EV_HOST:
        return tb_catalog_host(m->cat, map_get(&in->tier, m->base_tiers, e->tier), &e->addr);
    case EV_CONN: {
        struct tb_conn c = e->u.c;
        if ((rc = map_conn(m, in, c.conn, &c.conn)))
            return rc;
        c.tier = c.tier ? map_get(&in->tier, m->base_tiers, c.tier) : 0;
        c.server_id = c.server_id ? map_get(&in->server, m->base_servers, c.server_id) : 0;
        if (m->ccb)
            m->ccb(m->ud, &c);
        return 0;
    }
    case EV_REQ: {
        struct tb_request r = e->u.r;
        if ((rc = map_conn(m, in, r.conn, &r.conn)))
            return rc;
        r.tier = map_get(&in->tier, m->base_tiers, r.tier);
        r.server = map_get(&in->server, m->base_servers, r.server);
        r.class_id = map_get(&in->klass, m->base_classes, r.class_id);
        m->rcb(m->ud, &r);
        return 0;
    }
    }
    return TB_E_INVAL;
}

int tb_fo_merge_run(struct tb_fo_merge *m, uint64_t *released)
{
    uint64_t count = 0;
    int rc = 0;
    for (;;) {
        /* The queued event with the smallest key ... */
        unsigned best = m->n;
        int64_t bkey = 0;
        for (unsigned w = 0; w < m->n; w++) {
            const struct tb_fo_batch *b = m->in[w].head;
            if (b && (best == m->n || b->ev[b->pos].key < bkey)) {
                best = w;
                bkey = b->ev[b->pos].key;
            }
        }
        if (best == m->n)
            break;
        /* ... goes when no worker with nothing queued may still send an
         * earlier one. */
        bool wait = false;
        for (unsigned w = 0; w < m->n && !wait; w++)
            wait = w != best && !m->in[w].head && m->in[w].wm < bkey;
        if (wait)
            break;
        struct fo_in *in = &m->in[best];
        struct tb_fo_batch *b = in->head;
        rc = release(m, in, b, &b->ev[b->pos]);
        if (bkey > m->released_key)
            m->released_key = bkey;
        count++;
        if (++b->pos == b->n) {
            in->head = b->next;
            if (!in->head)
                in->tail = NULL;
            tb_fo_batch_free(b);
        }
        if (rc < 0)
            break;
    }
    if (released)
        *released = count;
    return rc;
}

/* ---- the live source -------------------------------------------------------------------- */

/* A worker hands over what it has after each pass over its ring; a worker
 * whose ring was empty says that nothing older than this is still coming (a
 * packet can wait in a ring block up to its 100 ms timeout). */
#define IDLE_LAG_NS (500 * TB_NS_PER_MS)
#define POLL_MS 100
#define DISPATCH_BATCH 4096
#define DRAIN_MAX_CALLS 64
/* Events queued for the loop, per worker, beyond which the worker waits (its
 * ring then fills and the kernel counts drops): memory stays bounded when
 * the loop falls behind. */
#define PENDING_MAX 262144

struct fo_worker {
    struct tb_fanout *fo;
    unsigned idx;
    pcap_t *pcap;
    int fd;
    pthread_t th;
    bool started;
    struct tb_catalog *cat;
    struct tb_engine *eng;
    struct tb_fo_prod prod;
    int64_t key;  /* capture time of the latest packet (or expiry) given to the engine */
    int err;      /* the worker's first error */
    uint64_t packets;
    double cpu_s;
    uint32_t last_recv, last_drop, last_ifdrop;
    struct tb_live_stats ls; /* widened counters, read by the loop under fo->mu */
    /* Handed over, under fo->mu. */
    struct tb_fo_batch *pend_head, *pend_tail;
    size_t pend_events;
    int64_t wm;
};

struct tb_fanout {
    uv_loop_t *loop;
    uv_async_t async;
    bool async_closing;
    unsigned n;
    struct fo_worker *w;
    int linktype;
    char iface[64];
    pthread_mutex_t mu;
    atomic_int stop;
    struct tb_fo_merge *merge;
    int err;
};

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static void on_worker_request(void *ud, const struct tb_request *r)
{
    struct fo_worker *w = ud;
    if (tb_fo_prod_request(&w->prod, w->key, r) < 0 && !w->err)
        w->err = TB_E_NOMEM;
}

static void on_worker_conn(void *ud, const struct tb_conn *c)
{
    struct fo_worker *w = ud;
    if (tb_fo_prod_conn(&w->prod, w->key, c) < 0 && !w->err)
        w->err = TB_E_NOMEM;
}

static void on_worker_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
    struct fo_worker *w = (struct fo_worker *)user;
    /* Opened with nanosecond precision: tv_usec holds ns. */
    int64_t ts = (int64_t)h->ts.tv_sec * TB_NS_PER_SEC + (int64_t)h->ts.tv_usec;
    if (ts > w->key)
        w->key = ts;
    w->packets++;
    if (tb_engine_packet(w->eng, w->fo->linktype, ts, bytes, h->caplen, h->len) < 0 && !w->err)
        w->err = TB_E_NOMEM;
}

static void discard_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
    (void)user;
    (void)h;
    (void)bytes;
}

/* Reads what the ring holds now, bounded; the number of packets or < 0. */
static int drain(struct fo_worker *w, pcap_handler cb)
{
    int total = 0;
    for (int i = 0; i < DRAIN_MAX_CALLS; i++) {
        int n = pcap_dispatch(w->pcap, DISPATCH_BATCH, cb, (u_char *)w);
        if (n < 0)
            return n == PCAP_ERROR_BREAK ? total : TB_E_PCAP;
        if (n == 0)
            break;
        total += n;
    }
    return total;
}

static void read_stats(struct fo_worker *w, struct tb_live_stats *s)
{
    struct pcap_stat ps;
    *s = w->ls;
    if (pcap_stats(w->pcap, &ps) == 0) {
        /* Unsigned subtraction absorbs one wrap of the 32-bit counters. */
        s->received += (uint32_t)(ps.ps_recv - w->last_recv);
        s->kernel_drops += (uint32_t)(ps.ps_drop - w->last_drop);
        s->if_drops += (uint32_t)(ps.ps_ifdrop - w->last_ifdrop);
        w->last_recv = ps.ps_recv;
        w->last_drop = ps.ps_drop;
        w->last_ifdrop = ps.ps_ifdrop;
    }
}

/* Hands the batch over with the worker's watermark, and wakes the loop. */
static void hand_over(struct fo_worker *w, int64_t wm, const struct tb_live_stats *ls)
{
    struct tb_fanout *fo = w->fo;
    struct tb_fo_batch *b = tb_fo_prod_take(&w->prod);
    pthread_mutex_lock(&fo->mu);
    if (b) {
        if (w->pend_tail)
            w->pend_tail->next = b;
        else
            w->pend_head = b;
        w->pend_tail = b;
        w->pend_events += tb_fo_batch_count(b);
    }
    if (wm > w->wm)
        w->wm = wm;
    if (ls)
        w->ls = *ls;
    pthread_mutex_unlock(&fo->mu);
    uv_async_send(&fo->async);
}

static bool backlogged(struct fo_worker *w)
{
    pthread_mutex_lock(&w->fo->mu);
    bool full = w->pend_events >= PENDING_MAX;
    pthread_mutex_unlock(&w->fo->mu);
    return full;
}

static void *worker_main(void *arg)
{
    struct fo_worker *w = arg;
    struct tb_fanout *fo = w->fo;
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    int64_t last_expire = wall_ns(), last_stats = 0;
    struct tb_live_stats ls = {0};
    while (!atomic_load(&fo->stop) && !w->err) {
        if (backlogged(w)) {
            struct timespec d = {0, 1000000};
            nanosleep(&d, NULL);
            continue;
        }
        poll(&pfd, 1, POLL_MS);
        /* Read before the ring is looked at: a worker preempted between an
         * empty drain and reading the clock must not vouch for the packets
         * that reached its ring meanwhile (a loaded machine stalls a thread
         * for longer than IDLE_LAG_NS). */
        int64_t seen = wall_ns();
        int n = drain(w, on_worker_packet);
        if (n < 0) {
            w->err = n;
            break;
        }
        int64_t now = wall_ns();
        /* Idle flows close on the capture clock, as the one-engine path's
         * tick closes them (capture_live.c). */
        if (now - last_expire >= TB_NS_PER_SEC) {
            int64_t clock = TB_MAX(w->key, seen - IDLE_LAG_NS); /* w->key is the watermark too */
            w->key = clock;
            tb_engine_expire(w->eng, clock);
            last_expire = now;
        }
        bool stats = now - last_stats >= TB_NS_PER_SEC;
        if (stats) {
            read_stats(w, &ls);
            last_stats = now;
        }
        hand_over(w, n > 0 ? w->key : TB_MAX(w->key, seen - IDLE_LAG_NS), stats ? &ls : NULL);
    }
    /* What the kernel already holds belongs to the capture. */
    if (!w->err) {
        int n;
        for (int i = 0; i < 64 && (n = drain(w, on_worker_packet)) > 0; i++)
            ;
    }
    read_stats(w, &ls);
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        w->cpu_s = (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9;
    hand_over(w, w->key, &ls);
    return NULL;
}

static void on_async(uv_async_t *h)
{
    struct tb_fanout *fo = h->data;
    tb_fanout_poll(fo);
}

int tb_fanout_open(struct tb_fanout **out, uv_loop_t *loop, const struct tb_live_opts *o,
                   unsigned n, char *errbuf, size_t errlen)
{
    *out = NULL;
#ifndef __linux__
    (void)loop;
    (void)n;
    snprintf(errbuf, errlen, "interface '%s': --workers needs Linux's PACKET_FANOUT", o->iface);
    return TB_E_UNSUPP;
#else
    int rc;
    struct tb_fanout *fo = calloc(1, sizeof *fo);
    if (!fo || !(fo->w = calloc(n, sizeof *fo->w))) {
        free(fo);
        snprintf(errbuf, errlen, "interface '%s': out of memory", o->iface);
        return TB_E_NOMEM;
    }
    fo->loop = loop;
    fo->n = n;
    snprintf(fo->iface, sizeof fo->iface, "%s", o->iface);
    pthread_mutex_init(&fo->mu, NULL);
    fo->async.data = fo;
    if (uv_async_init(loop, &fo->async, on_async) < 0) {
        snprintf(errbuf, errlen, "interface '%s': cannot create the wake-up handle", o->iface);
        pthread_mutex_destroy(&fo->mu);
        free(fo->w);
        free(fo);
        return TB_E_IO;
    }
    *out = fo; /* from here on, tb_fanout_close frees it */
    int group = 0;
    for (unsigned i = 0; i < n; i++) {
        struct fo_worker *w = &fo->w[i];
        w->fo = fo;
        w->idx = i;
        w->wm = INT64_MIN;
        w->key = INT64_MIN;
        if ((rc = tb__live_pcap_open(&w->pcap, o, errbuf, errlen)) < 0)
            return rc;
        w->fd = pcap_get_selectable_fd(w->pcap);
        if (i == 0)
            fo->linktype = pcap_datalink(w->pcap);
        /* The first socket asks the kernel for a group id no other process
         * uses; the others join it with the same mode. */
        unsigned mode = PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG;
        if (i == 0)
            mode |= PACKET_FANOUT_FLAG_UNIQUEID;
        /* The mode in the upper 16 bits, the group id in the lower. */
        int val = (int)((mode << 16) | (unsigned)group);
        if (setsockopt(pcap_fileno(w->pcap), SOL_PACKET, PACKET_FANOUT, &val, sizeof val) < 0) {
            snprintf(errbuf, errlen, "interface '%s': --workers: PACKET_FANOUT: %s", o->iface,
                     strerror(errno));
            return TB_E_UNSUPP;
        }
        if (i == 0) {
            socklen_t len = sizeof val;
            if (getsockopt(pcap_fileno(w->pcap), SOL_PACKET, PACKET_FANOUT, &val, &len) < 0) {
                snprintf(errbuf, errlen, "interface '%s': --workers: PACKET_FANOUT: %s",
                         o->iface, strerror(errno));
                return TB_E_UNSUPP;
            }
            group = val & 0xffff;
        }
    }
    /* Until the last socket joined, the earlier ones saw every packet and a
     * socket not yet in the group saw them too: what the rings hold from
     * then is dropped, so that no packet is counted twice. The capture
     * starts with a complete group. */
    for (unsigned i = 0; i < n; i++)
        if ((rc = drain(&fo->w[i], discard_packet)) < 0) {
            snprintf(errbuf, errlen, "interface '%s': %s", o->iface, pcap_geterr(fo->w[i].pcap));
            return TB_E_PCAP;
        }
    for (unsigned i = 0; i < n; i++) {
        struct pcap_stat ps;
        if (pcap_stats(fo->w[i].pcap, &ps) == 0) {
            fo->w[i].last_recv = ps.ps_recv;
            fo->w[i].last_drop = ps.ps_drop;
            fo->w[i].last_ifdrop = ps.ps_ifdrop;
        }
    }
    return 0;
#endif
}

int tb_fanout_linktype(const struct tb_fanout *fo)
{
    return fo->linktype;
}

int tb_fanout_start(struct tb_fanout *fo, struct tb_catalog *cat, const struct tb_tiers *tiers,
                    const struct tb_engine_opts *eo, tb_request_cb rcb, tb_conn_cb ccb, void *ud)
{
    int rc;
    if ((rc = tb_fo_merge_new(&fo->merge, fo->n, cat, eo->first_conn, rcb, ccb, ud)) < 0)
        return rc;
    for (unsigned i = 0; i < fo->n; i++) {
        struct fo_worker *w = &fo->w[i];
        struct tb_engine_opts o = *eo;
        /* Each worker numbers its own connections; the merge renumbers. */
        o.first_conn = 1;
        if ((rc = tb_catalog_new(&w->cat)) < 0 || (rc = tb_fo_catalog_copy(w->cat, cat)) < 0 ||
            (rc = tb_engine_new(&w->eng, w->cat, tiers, &o, on_worker_request, w)) < 0)
            return rc;
        tb_engine_set_conn_cb(w->eng, on_worker_conn, w);
        tb_fo_prod_init(&w->prod, w->cat);
    }
    for (unsigned i = 0; i < fo->n; i++) {
        if (pthread_create(&fo->w[i].th, NULL, worker_main, &fo->w[i]) != 0) {
            tb_fanout_stop(fo);
            return TB_E_NOMEM;
        }
        fo->w[i].started = true;
    }
    return 0;
}

int tb_fanout_poll(struct tb_fanout *fo)
{
    if (!fo->merge)
        return 0;
    for (unsigned i = 0; i < fo->n; i++) {
        struct fo_worker *w = &fo->w[i];
        pthread_mutex_lock(&fo->mu);
        struct tb_fo_batch *b = w->pend_head;
        int64_t wm = w->wm;
        int err = w->err;
        w->pend_head = w->pend_tail = NULL;
        w->pend_events = 0;
        pthread_mutex_unlock(&fo->mu);
        while (b) {
            struct tb_fo_batch *next = b->next;
            tb_fo_merge_add(fo->merge, i, b);
            b = next;
        }
        tb_fo_merge_watermark(fo->merge, i, wm);
        if (err && !fo->err)
            fo->err = err;
    }
    int rc = tb_fo_merge_run(fo->merge, NULL);
    if (rc < 0 && !fo->err)
        fo->err = rc;
    return fo->err;
}

int64_t tb_fanout_clock(const struct tb_fanout *fo)
{
    return fo->merge ? tb_fo_merge_released_key(fo->merge) : INT64_MIN;
}

void tb_fanout_stats(struct tb_fanout *fo, struct tb_live_stats *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&fo->mu);
    for (unsigned i = 0; i < fo->n; i++) {
        s->received += fo->w[i].ls.received;
        s->kernel_drops += fo->w[i].ls.kernel_drops;
        s->if_drops += fo->w[i].ls.if_drops;
    }
    pthread_mutex_unlock(&fo->mu);
}

static void stop_threads(struct tb_fanout *fo)
{
    atomic_store(&fo->stop, 1);
    for (unsigned i = 0; i < fo->n; i++)
        if (fo->w[i].started) {
            pthread_join(fo->w[i].th, NULL);
            fo->w[i].started = false;
        }
}

void tb_fanout_stop(struct tb_fanout *fo)
{
    if (!fo)
        return;
    stop_threads(fo);
    if (!fo->async_closing) {
        fo->async_closing = true;
        uv_close((uv_handle_t *)&fo->async, NULL);
    }
}

static uint32_t absorb_tier(void *ud, uint32_t tier)
{
    struct fo_worker *w = ud;
    return tb_fo_merge_tier(w->fo->merge, w->idx, tier);
}

int tb_fanout_finish(struct tb_fanout *fo, int64_t now_ns, struct tb_engine *sum)
{
    tb_fanout_stop(fo);
    if (!fo->merge)
        return fo->err;
    /* The threads are gone: their engines are the loop's now. */
    tb_fanout_poll(fo);
    for (unsigned i = 0; i < fo->n; i++) {
        struct fo_worker *w = &fo->w[i];
        w->key = TB_MAX(w->key, now_ns);
        tb_engine_finish(w->eng, w->key);
        tb_fo_merge_add(fo->merge, i, tb_fo_prod_take(&w->prod));
        tb_fo_merge_watermark(fo->merge, i, INT64_MAX);
    }
    int rc = tb_fo_merge_run(fo->merge, NULL);
    if (rc < 0 && !fo->err)
        fo->err = rc;
    struct tb_live_stats ls;
    tb_fanout_stats(fo, &ls);
    for (unsigned i = 0; i < fo->n; i++)
        tb_engine_absorb(sum, fo->w[i].eng, absorb_tier, &fo->w[i]);
    tb_engine_set_drops(sum, ls.kernel_drops, ls.if_drops);
    return fo->err;
}

void tb_fanout_report(const struct tb_fanout *fo, FILE *out)
{
    for (unsigned i = 0; i < fo->n; i++) {
        const struct fo_worker *w = &fo->w[i];
        const struct tb_capture_stats *s = w->eng ? tb_engine_stats(w->eng) : NULL;
        fprintf(out,
                "  worker %u: %" PRIu64 " packets, %" PRIu64 " requests, %" PRIu64
                " kernel drops, CPU %.3f s\n",
                i, w->packets, s ? s->requests : 0, w->ls.kernel_drops, w->cpu_s);
    }
}

static void free_all(struct tb_fanout *fo)
{
    for (unsigned i = 0; i < fo->n; i++) {
        struct fo_worker *w = &fo->w[i];
        if (w->pcap)
            pcap_close(w->pcap);
        if (w->eng)
            tb_engine_free(w->eng);
        tb_fo_prod_fini(&w->prod);
        if (w->cat)
            tb_catalog_free(w->cat);
        while (w->pend_head) {
            struct tb_fo_batch *b = w->pend_head;
            w->pend_head = b->next;
            tb_fo_batch_free(b);
        }
    }
    tb_fo_merge_free(fo->merge);
    pthread_mutex_destroy(&fo->mu);
    free(fo->w);
    free(fo);
}

static void on_async_closed(uv_handle_t *h)
{
    free_all(h->data);
}

void tb_fanout_close(struct tb_fanout *fo)
{
    if (!fo)
        return;
    stop_threads(fo);
    if (fo->async_closing) {
        /* tb_fanout_stop closed it and the loop has run since. */
        free_all(fo);
        return;
    }
    fo->async_closing = true;
    uv_close((uv_handle_t *)&fo->async, on_async_closed);
}
