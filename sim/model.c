/* SPDX-License-Identifier: MIT */
/* model.c — the discrete-event model of a closed n-tier system (users, tiers of
 * processor-sharing servers with thread and connection pools, freezes, a CPU
 * speed governor, bursts) and the TCP/IP packets it puts on the wire. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire.h"

enum ev_kind {
    EV_THINK,       /* a user finished thinking: starts a page */
    EV_REQ_ARRIVE,  /* a request's last byte reached its server */
    EV_PS,          /* a CPU burst finished at a server */
    EV_RESP_ARRIVE, /* a response's last byte reached the caller */
    EV_FREEZE_START,
    EV_FREEZE_END,
    EV_GOV,   /* the speed governor samples utilisation */
    EV_SPEED, /* a random speed switch (speed_every) */
    EV_ACK0,  /* delayed ACK from the client side of a connection */
    EV_ACK1,  /* delayed ACK from the server side */
    EV_BURST, /* the arrival modulation toggles */
};

enum { TH_FIN = 0x01, TH_SYN = 0x02, TH_RST = 0x04, TH_PSH = 0x08, TH_ACK = 0x10 };

#define WIN_SCALE 7
#define WINDOW 502 /* x 2^7 = 64256 bytes */

struct pkt {
    int64_t ts;
    uint32_t len;
    struct pkt *next_free;
    struct sim_pkt_meta meta;
    uint8_t data[];
};

struct tcp_dir {
    uint32_t nxt;      /* next sequence number this side sends */
    int64_t busy;      /* timestamp of the last packet this side sent */
    uint16_t ip_id;
    uint32_t tsval_off;
    uint32_t last_tsval;
    uint32_t ack_gen;  /* bumps cancel a scheduled delayed ACK */
    uint32_t ack_val;
    bool ack_pending;
    int unacked;       /* segments received and not yet acknowledged */
};

struct conn {
    uint64_t id;
    uint8_t ip[2][4]; /* [0] client, [1] server */
    uint16_t port[2];
    char caddr[40]; /* the client as tbneck prints it, for the truth */
    struct tcp_dir d[2];
    struct server *srv;
    int ctier; /* tier of the client end; -1 for a user */
    int nreq;
    bool open;
    /* What the tap saw of it, for connections.csv. */
    int64_t seen_first, seen_last; /* INT64_MAX, INT64_MIN until a packet is captured */
    int64_t seen_fin;              /* the last FIN captured; INT64_MIN for none */
    bool seen_syn;
    uint32_t nreq_truth; /* its requests listed in requests.csv */
    struct conn *next_free;
};

struct job;
struct jobq {
    struct job *head, *tail;
    int n;
};

/* What limits a server at an instant (docs/sim.md, "causes.csv"). */
enum cause { C_NONE, C_CPU, C_SPEED, C_FREEZE, C_POOL, C_THREADS };
static const char *const cause_names[] = {"none", "cpu", "speed", "freeze", "pool", "threads"};

struct pool {
    struct conn **idle;
    int nidle;
    struct jobq waiters;
};

struct server {
    int tier, idx;
    uint8_t ip[4];
    uint16_t port;
    char addr[40];
    struct sim_ps ps;
    uint32_t ps_gen;
    int busy_threads;
    struct jobq accept;
    struct pool *pools; /* one per server of the next tier */
    uint32_t rr;
    int level;
    double busy_mark;
    int frozen;
    uint16_t next_port;
    int pool_waiting;   /* its requests waiting for a downstream connection */
    uint32_t speed_bag; /* speed_every: levels left in this round */
    enum cause cause;   /* current label and since when */
    int64_t cause_since;
};

struct user {
    int id;
    uint8_t ip[4];
    struct conn *conn[SIM_MAX_SERVERS];
    uint32_t gen;
    bool thinking;
    int64_t think_end;
    struct sim_rng rng;  /* streams = per-user: its pages' stream */
    double think_left;   /* per-user: think still to do, in calm time, at think_mark */
    int64_t think_mark;
};

struct job {
    uint64_t id; /* the truth's request id */
    struct sim_rng *rng; /* its page's stream */
    struct server *srv;
    struct conn *in;
    struct job *parent;
    struct user *user;
    struct pool *down_pool;
    struct job *qnext;
    int cls;
    int ncalls, done_calls;
    double burst;
    int64_t arrival;
    struct job *next_free;
    struct sim_wire_req w; /* what its protocol knows of it */
};

struct freeze_inst {
    const struct sim_freeze_conf *fc;
    struct server *srv;
    int k;
};

struct model {
    const struct sim_conf *c;
    struct sim_out *out;
    struct sim_stats *st;
    /* One stream for everything (streams = shared), or (per-user) this one for
     * the environment (freezes, speeds, bursts), one per user for its pages
     * (think times, classes, demands, calls, message contents) and one for
     * the wire (sequence numbers, logins). Per-user streams keep a user's
     * pages the same whatever the timing, so a run with one resource changed
     * replays the same workload. */
    struct sim_rng rng;
    struct sim_rng wire_rng;
    struct sim_heap ev, pk;
    struct server *srv[SIM_MAX_TIERS];
    int nsrv[SIM_MAX_TIERS];
    uint32_t front_rr;
    struct user *users;
    struct freeze_inst *fi;
    int nfi;
    struct pkt *pkt_free;
    size_t pkt_size;
    struct conn *conn_free;
    struct job *job_free;
    uint64_t next_conn_id;
    uint64_t next_req_id;
    uint16_t user_port[256];
    int64_t end_ns;
    bool burst_on;
    double class_wsum;
    struct sim_buf msg, line;
    struct sim_wire_ctx wc;                /* what the protocols see of the model */
    void *wstate[SIM_MAX_WIRES];           /* each protocol's setup() state */
    char *filler;
    size_t filler_len;
    int err;
};

/* ------------------------------------------------------------ helpers --- */

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static void push_ev(struct model *m, int64_t t, enum ev_kind k, void *obj, uint32_t gen)
{
    if (sim_heap_push(&m->ev, t, k, obj, gen) < 0)
        m->err = TB_E_NOMEM;
}

/* -------------------------------------------------------------- packets --- */

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
    while (n > 1) {
        sum += (uint32_t)(p[0] << 8 | p[1]);
        p += 2;
        n -= 2;
    }
    if (n)
        sum += (uint32_t)(p[0] << 8);
    return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Time the frame occupies the link: payload plus preamble, FCS and gap. */
static int64_t wire_ns(const struct model *m, size_t frame_len)
{
    return (int64_t)ceil((double)(frame_len + 24) * 8.0 / m->c->link_gbps);
}

/* Builds one Ethernet/IPv4/TCP frame from side `dir` of c at ts and queues it. */
static void emit(struct model *m, struct conn *c, int dir, int64_t ts, uint8_t flags, uint32_t seq,
                 uint32_t ack, const uint8_t *payload, size_t plen)
{
    struct tcp_dir *d = &c->d[dir];
    const uint8_t *sip = c->ip[dir], *dip = c->ip[!dir];
    bool v6 = m->c->ipv6;
    size_t l2 = m->c->vlan ? 18 : 14, l3 = v6 ? 40 : 20;
    size_t optlen = (flags & TH_SYN) ? 20 : 12;
    size_t tcplen = 20 + optlen;
    size_t len = l2 + l3 + tcplen + plen;
    struct pkt *p = m->pkt_free;
    if (p)
        m->pkt_free = p->next_free;
    else if (!(p = malloc(sizeof *p + m->pkt_size))) {
        m->err = TB_E_NOMEM;
        return;
    }
    uint8_t *f = p->data;
    /* Locally administered MACs derived from the IP: one tap sees every host. */
    f[0] = 0x02, f[1] = 0x00, memcpy(f + 2, dip, 4);
    f[6] = 0x02, f[7] = 0x00, memcpy(f + 8, sip, 4);
    if (m->c->vlan) {
        put16(f + 12, 0x8100);
        put16(f + 14, m->c->vlan);
    }
    put16(f + l2 - 2, v6 ? 0x86dd : 0x0800);
    uint8_t *ip = f + l2;
    /* The addresses as the checksum's pseudo-header and the header carry them. */
    uint8_t src[16], dst[16];
    size_t alen = v6 ? 16 : 4;
    if (v6) {
        static const uint8_t pfx[12] = {0xfd, 0x00};
        memcpy(src, pfx, 12), memcpy(dst, pfx, 12);
        src[12] = 0, src[13] = sip[2], src[14] = 0, src[15] = sip[3];
        dst[12] = 0, dst[13] = dip[2], dst[14] = 0, dst[15] = dip[3];
        put32(ip, 0x60000000u);
        put16(ip + 4, (uint16_t)(tcplen + plen));
        ip[6] = 6;
        ip[7] = 64;
        memcpy(ip + 8, src, 16);
        memcpy(ip + 24, dst, 16);
        d->ip_id++;
    } else {
        memcpy(src, sip, 4), memcpy(dst, dip, 4);
        ip[0] = 0x45;
        ip[1] = 0;
        put16(ip + 2, (uint16_t)(20 + tcplen + plen));
        put16(ip + 4, d->ip_id++);
        put16(ip + 6, 0x4000); /* DF */
        ip[8] = 64;
        ip[9] = 6;
        put16(ip + 10, 0);
        memcpy(ip + 12, sip, 4);
        memcpy(ip + 16, dip, 4);
        put16(ip + 10, csum_fold(csum_add(0, ip, 20)));
    }
    uint8_t *t = ip + l3;
    put16(t, c->port[dir]);
    put16(t + 2, c->port[!dir]);
    put32(t + 4, seq);
    put32(t + 8, (flags & TH_ACK) ? ack : 0);
    t[12] = (uint8_t)((tcplen / 4) << 4);
    t[13] = flags;
    put16(t + 14, (flags & TH_SYN) ? 64240 : WINDOW);
    put16(t + 16, 0);
    put16(t + 18, 0);
    uint8_t *o = t + 20;
    uint32_t tsval = (uint32_t)(ts / TB_NS_PER_MS) + d->tsval_off;
    uint32_t tsecr = c->d[!dir].last_tsval;
    if (flags & TH_SYN) {
        /* MSS, SACK permitted, timestamps, NOP, window scale: Linux's order. */
        o[0] = 2, o[1] = 4;
        put16(o + 2, (uint16_t)(m->c->mss + 12));
        o[4] = 4, o[5] = 2;
        o[6] = 8, o[7] = 10;
        put32(o + 8, tsval);
        put32(o + 12, (flags & TH_ACK) ? tsecr : 0);
        o[16] = 1;
        o[17] = 3, o[18] = 3, o[19] = WIN_SCALE;
    } else {
        o[0] = 1, o[1] = 1, o[2] = 8, o[3] = 10;
        put32(o + 4, tsval);
        put32(o + 8, tsecr);
    }
    d->last_tsval = tsval;
    if (ts >= m->out->imp.capture_from_ns) {
        c->seen_first = ts < c->seen_first ? ts : c->seen_first;
        c->seen_last = ts > c->seen_last ? ts : c->seen_last;
        c->seen_syn |= (flags & (TH_SYN | TH_ACK)) == TH_SYN;
        if ((flags & TH_FIN) && ts > c->seen_fin)
            c->seen_fin = ts;
    }
    if (plen)
        memcpy(t + tcplen, payload, plen);
    uint32_t sum = csum_add(0, src, alen);
    sum = csum_add(sum, dst, alen);
    sum += 6 + (uint32_t)(tcplen + plen);
    sum = csum_add(sum, t, tcplen + plen);
    put16(t + 16, csum_fold(sum));
    p->ts = ts;
    p->len = (uint32_t)len;
    p->meta = (struct sim_pkt_meta){.sport = c->port[dir], .dport = c->port[!dir], .seq = seq,
                                    .payload = (uint32_t)plen, .flags = flags};
    memcpy(p->meta.src, sip, 4);
    memcpy(p->meta.dst, dip, 4);
    if (ts > d->busy)
        d->busy = ts;
    if (sim_heap_push(&m->pk, ts, 0, p, 0) < 0)
        m->err = TB_E_NOMEM;
}

static void flush_packets(struct model *m, int64_t upto)
{
    const struct sim_event *top;
    while ((top = sim_heap_peek(&m->pk)) && top->t <= upto) {
        struct sim_event e;
        sim_heap_pop(&m->pk, &e);
        struct pkt *p = e.obj;
        sim_out_packet(m->out, p->ts, p->data, p->len, &p->meta);
        p->next_free = m->pkt_free;
        m->pkt_free = p;
    }
}

/* A pure ACK from side `dir`, no earlier than `t`. */
static void pure_ack(struct model *m, struct conn *c, int dir, int64_t t, uint32_t ack)
{
    struct tcp_dir *d = &c->d[dir];
    emit(m, c, dir, max64(t, d->busy + 1), TH_ACK, d->nxt, ack, NULL, 0);
    d->unacked = 0;
    d->ack_pending = false;
    d->ack_gen++;
}

/* Sends a message from side `dir`, cut into MSS segments paced at link speed.
 * The receiver acknowledges every second segment at once and the rest after
 * the delayed-ACK time unless its own data carries the ACK first. */
static void tcp_send(struct model *m, struct conn *c, int dir, int64_t t, const uint8_t *data,
                     size_t len, int64_t *first, int64_t *last)
{
    struct tcp_dir *d = &c->d[dir], *r = &c->d[!dir];
    int64_t ts = max64(t, d->busy + 1);
    size_t mss = (size_t)m->c->mss;
    size_t hdr = (m->c->vlan ? 18 : 14) + (m->c->ipv6 ? 40 : 20) + 32;
    int64_t ack_gap = wire_ns(m, hdr);
    *first = ts;
    for (size_t off = 0; off < len;) {
        size_t n = TB_MIN(mss, len - off);
        uint8_t flags = TH_ACK | (off + n == len ? TH_PSH : 0);
        emit(m, c, dir, ts, flags, d->nxt, r->nxt, data + off, n);
        /* Our data acknowledges everything we had received. */
        d->unacked = 0;
        d->ack_pending = false;
        d->ack_gen++;
        d->nxt += (uint32_t)n;
        *last = ts;
        off += n;
        if (++r->unacked >= 2)
            pure_ack(m, c, !dir, ts + ack_gap, d->nxt);
        ts += wire_ns(m, hdr + n);
    }
    if (r->unacked) {
        r->ack_pending = true;
        r->ack_gen++;
        r->ack_val = d->nxt;
        push_ev(m, *last + m->c->ack_delay_ns, dir ? EV_ACK0 : EV_ACK1, c, r->ack_gen);
    }
}

/* The protocols' way to send m->msg during a login (wire.h). */
static int64_t wire_send(void *model, void *conn, int dir, int64_t t)
{
    struct model *m = model;
    int64_t first, last = t;
    if (m->msg.err)
        m->err = m->msg.err;
    tcp_send(m, conn, dir, t, m->msg.p, m->msg.n, &first, &last);
    return last;
}

static void on_ack(struct model *m, struct conn *c, int dir, uint32_t gen, int64_t now)
{
    struct tcp_dir *d = &c->d[dir];
    if (!c->open || gen != d->ack_gen || !d->ack_pending)
        return;
    pure_ack(m, c, dir, now, d->ack_val);
}

static struct conn *conn_new(struct model *m, const uint8_t cip[4], uint16_t cport,
                             struct server *srv)
{
    struct conn *c = m->conn_free;
    if (c)
        m->conn_free = c->next_free;
    else if (!(c = calloc(1, sizeof *c))) {
        m->err = TB_E_NOMEM;
        return NULL;
    }
    /* Generations survive reuse so that events of the previous life stay stale. */
    uint32_t g0 = c->d[0].ack_gen, g1 = c->d[1].ack_gen;
    memset(c, 0, sizeof *c);
    c->d[0].ack_gen = g0 + 1;
    c->d[1].ack_gen = g1 + 1;
    c->id = ++m->next_conn_id;
    memcpy(c->ip[0], cip, 4);
    memcpy(c->ip[1], srv->ip, 4);
    c->port[0] = cport;
    c->port[1] = srv->port;
    sim_fmt_addr(c->caddr, sizeof c->caddr, cip, cport, m->c->ipv6);
    c->srv = srv;
    c->ctier = -1;
    c->open = true;
    c->seen_first = INT64_MAX;
    c->seen_last = INT64_MIN;
    c->seen_fin = INT64_MIN;
    for (int i = 0; i < 2; i++) {
        uint64_t r = sim_rng_next(m->c->per_user ? &m->wire_rng : &m->rng);
        c->d[i].nxt = (uint32_t)r;
        c->d[i].ip_id = (uint16_t)(r >> 32);
        c->d[i].tsval_off = (uint32_t)(r >> 40);
    }
    return c;
}

/* One row of connections.csv: a connection the tap saw, as it saw it. */
static void write_conn(struct model *m, const struct conn *c)
{
    if (c->seen_first == INT64_MAX)
        return;
    char saddr[48], fin[24] = "";
    sim_fmt_addr(saddr, sizeof saddr, c->ip[1], c->port[1], m->c->ipv6);
    if (c->seen_fin != INT64_MIN)
        snprintf(fin, sizeof fin, "%" PRId64, c->seen_fin);
    fprintf(m->out->conns, "%" PRIu64 ",%s,%s,%s,%s,%" PRId64 ",%" PRId64 ",%d,%s,%" PRIu32 "\n",
            c->id, c->caddr, saddr, c->ctier < 0 ? "" : m->c->tiers[c->ctier].wire_name,
            m->c->tiers[c->srv->tier].wire_name, c->seen_first, c->seen_last, c->seen_syn, fin,
            c->nreq_truth);
}

static int conn_cmp_id(const void *a, const void *b)
{
    const struct conn *x = *(struct conn *const *)a, *y = *(struct conn *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void conn_release(struct model *m, struct conn *c)
{
    write_conn(m, c);
    c->open = false;
    c->next_free = m->conn_free;
    m->conn_free = c;
}

/* Three-way handshake starting at t; returns when the client may send. */
static int64_t tcp_open(struct model *m, struct conn *c, int64_t t)
{
    int64_t half = m->c->rtt_ns / 2;
    struct tcp_dir *cl = &c->d[0], *sv = &c->d[1];
    t = max64(t, cl->busy + 1);
    emit(m, c, 0, t, TH_SYN, cl->nxt, 0, NULL, 0);
    cl->nxt++;
    emit(m, c, 1, t + half, TH_SYN | TH_ACK, sv->nxt, cl->nxt, NULL, 0);
    sv->nxt++;
    emit(m, c, 0, t + 2 * half, TH_ACK, cl->nxt, sv->nxt, NULL, 0);
    return t + 2 * half + 1;
}

/* Orderly close begun by side `dir` at t: FIN, FIN+ACK, ACK. */
static void tcp_close(struct model *m, struct conn *c, int dir, int64_t t)
{
    int64_t half = m->c->rtt_ns / 2;
    struct tcp_dir *a = &c->d[dir], *b = &c->d[!dir];
    t = max64(t, a->busy + 1);
    emit(m, c, dir, t, TH_FIN | TH_ACK, a->nxt, b->nxt, NULL, 0);
    a->nxt++;
    int64_t t2 = max64(t + half, b->busy + 1);
    emit(m, c, !dir, t2, TH_FIN | TH_ACK, b->nxt, a->nxt, NULL, 0);
    b->nxt++;
    emit(m, c, dir, t2 + half, TH_ACK, a->nxt, b->nxt, NULL, 0);
    for (int i = 0; i < 2; i++) {
        c->d[i].ack_pending = false;
        c->d[i].ack_gen++;
    }
}

/* ---------------------------------------------------------------- model --- */

static struct job *job_new(struct model *m, struct server *srv, struct conn *in, int cls)
{
    struct job *j = m->job_free;
    if (j)
        m->job_free = j->next_free;
    else if (!(j = malloc(sizeof *j))) {
        m->err = TB_E_NOMEM;
        return NULL;
    }
    memset(j, 0, sizeof *j);
    j->id = ++m->next_req_id;
    j->srv = srv;
    j->in = in;
    j->cls = cls;
    j->w.tier = srv->tier;
    j->w.cls = cls;
    j->w.conn_id = in->id;
    return j;
}

static void job_free(struct model *m, struct job *j)
{
    j->next_free = m->job_free;
    m->job_free = j;
}

static void q_push(struct jobq *q, struct job *j)
{
    q->n++;
    j->qnext = NULL;
    if (q->tail)
        q->tail->qnext = j;
    else
        q->head = j;
    q->tail = j;
}

static struct job *q_pop(struct jobq *q)
{
    struct job *j = q->head;
    if (j) {
        q->n--;
        q->head = j->qnext;
        if (!q->head)
            q->tail = NULL;
    }
    return j;
}

/* The server's cause label now, by the precedence of docs/sim.md. */
static enum cause cause_of(const struct model *m, const struct server *s)
{
    const struct sim_tier_conf *t = &m->c->tiers[s->tier];
    if (s->frozen)
        return C_FREEZE;
    if (s->pool_waiting)
        return C_POOL;
    if (s->ps.n > (size_t)t->cores)
        return s->level + 1 < t->nspeeds ? C_SPEED : C_CPU;
    if (s->accept.n)
        return C_THREADS;
    return C_NONE;
}

static void cause_write(struct model *m, const struct server *s, int64_t now)
{
    if (s->cause != C_NONE && now > s->cause_since)
        fprintf(m->out->causes, "%s,%s,%" PRId64 ",%" PRId64 ",%s\n", s->addr,
                m->c->tiers[s->tier].wire_name, s->cause_since, now, cause_names[s->cause]);
}

/* Called after anything that may change a server's label: closes the
 * interval of the old label when it changes. */
static void cause_update(struct model *m, struct server *s, int64_t now)
{
    enum cause c = cause_of(m, s);
    if (c == s->cause)
        return;
    cause_write(m, s, now);
    s->cause = c;
    s->cause_since = now;
}

static void ps_resched(struct model *m, struct server *s, int64_t now)
{
    s->ps_gen++;
    int64_t t = sim_ps_next(&s->ps, now);
    if (t != INT64_MAX)
        push_ev(m, t, EV_PS, s, s->ps_gen);
    cause_update(m, s, now);
}

static int sample_count(const struct sim_dist *d, struct sim_rng *r)
{
    long n = lround(sim_dist_sample(d, r));
    return (int)TB_MAX(0, TB_MIN(n, 10000));
}

/* Sends j's request on its connection and schedules its arrival at the server. */
static void send_request(struct model *m, struct job *j, int64_t t)
{
    const struct sim_wire *w = m->c->tiers[j->srv->tier].wire;
    m->msg.n = 0;
    m->wc.rng = j->rng;
    w->request(&m->wc, m->wstate[sim_wire_index(w)], &j->w);
    if (m->msg.err)
        m->err = m->msg.err;
    int64_t first = 0, last = 0; /* set by tcp_send; gcc -O3 cannot see it */
    tcp_send(m, j->in, 0, t, m->msg.p, m->msg.n, &first, &last);
    j->arrival = first;
    j->in->nreq++;
    push_ev(m, last, EV_REQ_ARRIVE, j, 0);
}

static void job_start(struct model *m, struct job *j, int64_t now)
{
    struct server *s = j->srv;
    const struct sim_class_conf *cl = &m->c->classes[j->cls];
    s->busy_threads++;
    j->ncalls = s->tier + 1 < m->c->ntiers ? sample_count(&cl->calls[s->tier], j->rng) : 0;
    double demand = sim_dist_sample(&cl->demand[s->tier], j->rng);
    /* The thread computes between its downstream calls: ncalls+1 equal bursts. */
    j->burst = demand / (j->ncalls + 1);
    if (sim_ps_add(&s->ps, now, j->burst, j) < 0)
        m->err = TB_E_NOMEM;
    ps_resched(m, s, now);
}

static void issue_call(struct model *m, struct job *parent, struct conn *c, int64_t now)
{
    struct job *child = job_new(m, c->srv, c, parent->cls);
    if (!child)
        return;
    child->parent = parent;
    child->rng = parent->rng;
    send_request(m, child, now);
}

static void write_truth(struct model *m, struct job *j, int64_t departure)
{
    /* Requests that began before a late tap started are not in its capture. */
    if (j->arrival < m->out->imp.capture_from_ns)
        return;
    const struct sim_tier_conf *t = &m->c->tiers[j->srv->tier];
    struct sim_buf *b = &m->line;
    b->n = 0;
    sim_buf_str(b, t->wire_name);
    sim_buf_put(b, ",", 1);
    sim_buf_str(b, j->srv->addr);
    sim_buf_put(b, ",", 1);
    sim_buf_str(b, j->in->caddr);
    sim_buf_put(b, ",", 1);
    sim_buf_u64(b, j->in->id);
    sim_buf_put(b, ",", 1);
    sim_buf_str(b, m->c->classes[j->cls].name);
    sim_buf_put(b, ",", 1);
    const char *expect = m->c->classes[j->cls].expect[j->srv->tier];
    if (strpbrk(expect, ",\"\r\n")) {
        /* RFC 4180: quoted, with quotes doubled. */
        sim_buf_put(b, "\"", 1);
        for (const char *p = expect; *p; p++) {
            if (*p == '"')
                sim_buf_put(b, "\"", 1);
            sim_buf_put(b, p, 1);
        }
        sim_buf_put(b, "\"", 1);
    } else
        sim_buf_str(b, expect);
    sim_buf_put(b, ",", 1);
    sim_buf_i64(b, j->arrival);
    sim_buf_put(b, ",", 1);
    sim_buf_i64(b, departure);
    sim_buf_put(b, ",", 1);
    sim_buf_i64(b, j->w.status);
    sim_buf_put(b, ",", 1);
    sim_buf_u64(b, j->id);
    sim_buf_put(b, ",", 1);
    if (j->parent)
        sim_buf_u64(b, j->parent->id);
    sim_buf_put(b, "\n", 1);
    j->in->nreq_truth++;
    if (b->err)
        m->err = b->err;
    fwrite(b->p, 1, b->n, m->out->requests);
    m->st->requests[j->srv->tier]++;
}

static void respond(struct model *m, struct job *j, int64_t now)
{
    struct server *s = j->srv;
    const struct sim_wire *w = m->c->tiers[s->tier].wire;
    m->msg.n = 0;
    m->wc.rng = j->rng;
    w->response(&m->wc, m->wstate[sim_wire_index(w)], &j->w, now);
    if (m->msg.err)
        m->err = m->msg.err;
    int64_t first = 0, last = 0; /* set by tcp_send; gcc -O3 cannot see it */
    tcp_send(m, j->in, 1, now, m->msg.p, m->msg.n, &first, &last);
    write_truth(m, j, last);
    push_ev(m, last, EV_RESP_ARRIVE, j, 0);
    if (j->w.close) {
        /* The server closes after a "Connection: close" exchange; the user
         * opens a new connection for its next page. */
        tcp_close(m, j->in, 1, last + 40000);
        struct user *u = j->user;
        for (int i = 0; i < m->nsrv[0]; i++)
            if (u->conn[i] == j->in)
                u->conn[i] = NULL;
        conn_release(m, j->in);
        j->in = NULL;
    }
    s->busy_threads--;
    struct job *next = q_pop(&s->accept);
    if (next)
        job_start(m, next, now);
}

static void burst_done(struct model *m, struct job *j, int64_t now)
{
    struct server *s = j->srv;
    if (j->done_calls >= j->ncalls) {
        respond(m, j, now);
        return;
    }
    int nt = s->tier + 1;
    struct pool *p = &s->pools[s->rr++ % (uint32_t)m->nsrv[nt]];
    j->down_pool = p;
    if (p->nidle)
        issue_call(m, j, p->idle[--p->nidle], now);
    else {
        q_push(&p->waiters, j); /* holds its thread while it waits for a connection */
        s->pool_waiting++;
    }
}

static struct sim_rng *user_rng(struct model *m, struct user *u)
{
    return m->c->per_user ? &u->rng : &m->rng;
}

static int pick_class(struct model *m, struct user *u)
{
    double x = sim_rng_unit(user_rng(m, u)) * m->class_wsum;
    for (int i = 0; i < m->c->nclasses; i++) {
        x -= m->c->classes[i].weight;
        if (x < 0)
            return i;
    }
    return m->c->nclasses - 1;
}

/* A think time drawn now, in calm time (bursts shorten it as it runs). */
static double think_draw(struct model *m, struct user *u)
{
    return sim_dist_sample(&m->c->think, user_rng(m, u));
}

/* Starts a think of t ns of calm time; during a burst it takes burst_factor
 * times as long in wall time. */
static void start_think(struct model *m, struct user *u, int64_t now, double t)
{
    u->thinking = true;
    u->think_left = t;
    u->think_mark = now;
    u->think_end = now + (int64_t)llround(m->burst_on ? t * m->c->burst_factor : t);
    push_ev(m, u->think_end, EV_THINK, u, ++u->gen);
}

static void start_page(struct model *m, struct user *u, int64_t now)
{
    u->thinking = false;
    int si = (int)(m->front_rr++ % (uint32_t)m->nsrv[0]);
    struct server *s = &m->srv[0][si];
    int64_t t = now;
    struct conn *c = u->conn[si];
    if (!c) {
        uint8_t hi = u->ip[3];
        uint16_t port = m->user_port[hi];
        m->user_port[hi] = port >= 60999 ? 32768 : (uint16_t)(port + 1);
        c = conn_new(m, u->ip, port, s);
        if (!c)
            return;
        u->conn[si] = c;
        t = tcp_open(m, c, now);
    }
    struct job *j = job_new(m, s, c, pick_class(m, u));
    if (!j)
        return;
    j->user = u;
    j->rng = user_rng(m, u);
    int ka = m->c->tiers[0].keepalive;
    j->w.close = ka > 0 && c->nreq + 1 >= ka;
    send_request(m, j, t);
}

static void on_resp_arrive(struct model *m, struct job *j, int64_t now)
{
    struct job *parent = j->parent;
    if (!parent) {
        m->st->pages++;
        struct user *u = j->user;
        job_free(m, j);
        if (now < m->end_ns)
            start_think(m, u, now, think_draw(m, u));
        return;
    }
    struct conn *c = j->in;
    struct pool *p = parent->down_pool;
    job_free(m, j);
    struct job *w = q_pop(&p->waiters);
    if (w) {
        parent->srv->pool_waiting--;
        issue_call(m, w, c, now);
    } else
        p->idle[p->nidle++] = c;
    parent->done_calls++;
    struct server *s = parent->srv;
    if (sim_ps_add(&s->ps, now, parent->burst, parent) < 0)
        m->err = TB_E_NOMEM;
    ps_resched(m, s, now);
}

static void log_speed(struct model *m, struct server *s, int64_t now)
{
    fprintf(m->out->speed, "%s,%" PRId64 ",%g\n", s->addr, now,
            m->c->tiers[s->tier].speeds[s->level] * m->c->tiers[s->tier].speedup);
}

static void set_level(struct model *m, struct server *s, int level, int64_t now)
{
    if (level == s->level)
        return;
    s->level = level;
    sim_ps_set_speed(&s->ps, now,
                     m->c->tiers[s->tier].speeds[level] * m->c->tiers[s->tier].speedup);
    ps_resched(m, s, now);
    log_speed(m, s, now);
    m->st->speed_changes++;
}

static void on_gov(struct model *m, struct server *s, int64_t now)
{
    const struct sim_tier_conf *t = &m->c->tiers[s->tier];
    sim_ps_advance(&s->ps, now);
    double util = (s->ps.busy_core_ns - s->busy_mark) / (double)t->governor_ns;
    s->busy_mark = s->ps.busy_core_ns;
    int level = s->level;
    /* One level per sample: the lag is what makes SpeedStep hurt bursts. */
    if (util > t->governor_up && level + 1 < t->nspeeds)
        level++;
    else if (util < t->governor_down && level > 0)
        level--;
    set_level(m, s, level, now);
    if (now + t->governor_ns <= m->end_ns)
        push_ev(m, now + t->governor_ns, EV_GOV, s, 0);
}

static void schedule_speed(struct model *m, struct server *s, int64_t after)
{
    const struct sim_tier_conf *t = &m->c->tiers[s->tier];
    int64_t next = after + (int64_t)llround(sim_dist_sample(&t->speed_every, &m->rng));
    if (next < m->end_ns)
        push_ev(m, next, EV_SPEED, s, 0);
}

/* speed_every: the CPU moves to another of its levels whatever the load (a
 * frequency set from outside, e.g. by a power cap). Levels are drawn in
 * shuffled rounds: from the level a round starts at, its nspeeds-1 switches
 * visit every other level once, so that a short run still sees them all. */
static void on_speed(struct model *m, struct server *s, int64_t now)
{
    const struct sim_tier_conf *t = &m->c->tiers[s->tier];
    uint32_t here = 1u << s->level;
    if (!(s->speed_bag & ~here))
        s->speed_bag = ((1u << t->nspeeds) - 1) & ~here;
    uint32_t bag = s->speed_bag & ~here;
    int k = (int)sim_rng_below(&m->rng, (uint64_t)__builtin_popcount(bag)), level = 0;
    for (;; level++)
        if ((bag >> level & 1) && k-- == 0)
            break;
    s->speed_bag &= ~(1u << level);
    set_level(m, s, level, now);
    schedule_speed(m, s, now);
}

static void schedule_freeze(struct model *m, struct freeze_inst *fi, int64_t after)
{
    const struct sim_freeze_conf *fc = fi->fc;
    int64_t t;
    if (fc->random)
        t = after + (int64_t)llround(sim_dist_sample(&fc->every, &m->rng));
    else if (fi->k < fc->nat)
        t = m->c->start_ns + fc->at_ns[fi->k];
    else
        return;
    if (t < m->end_ns)
        push_ev(m, t, EV_FREEZE_START, fi, 0);
}

static void on_freeze_start(struct model *m, struct freeze_inst *fi, int64_t now)
{
    const struct sim_freeze_conf *fc = fi->fc;
    int64_t len = fc->random ? (int64_t)llround(sim_dist_sample(&fc->length, &m->rng))
                             : fc->len_ns[fi->k];
    fi->k++;
    if (len < 1)
        len = 1;
    struct server *s = fi->srv;
    if (s->frozen++ == 0) {
        sim_ps_set_frozen(&s->ps, now, true);
        ps_resched(m, s, now);
    }
    fprintf(m->out->freezes, "%s,%" PRId64 ",%" PRId64 "\n", s->addr, now, now + len);
    m->st->freezes++;
    push_ev(m, now + len, EV_FREEZE_END, fi, 0);
}

static void on_freeze_end(struct model *m, struct freeze_inst *fi, int64_t now)
{
    struct server *s = fi->srv;
    if (--s->frozen == 0) {
        sim_ps_set_frozen(&s->ps, now, false);
        ps_resched(m, s, now);
    }
    schedule_freeze(m, fi, now);
}

static void on_burst(struct model *m, int64_t now)
{
    m->burst_on = !m->burst_on;
    for (int i = 0; i < m->c->users; i++) {
        struct user *u = &m->users[i];
        if (!u->thinking || u->think_end <= now)
            continue;
        if (m->c->per_user) {
            /* The rest of the think runs at the new rate: nothing drawn, so
             * the user's stream does not depend on when it was thinking. */
            double rate = m->burst_on ? 1 : m->c->burst_factor; /* the old one */
            double done = (double)(now - u->think_mark) / rate;
            start_think(m, u, now, u->think_left > done ? u->think_left - done : 0);
        } else {
            /* Think times are memoryless, so redrawing the rest of every
             * running think at the new rate is exact for exponential ones. */
            start_think(m, u, now, think_draw(m, u));
        }
    }
    const struct sim_dist *d = m->burst_on ? &m->c->burst_on : &m->c->burst_off;
    int64_t next = now + (int64_t)llround(sim_dist_sample(d, &m->rng));
    if (next < m->end_ns)
        push_ev(m, next, EV_BURST, NULL, 0);
}

static void dispatch(struct model *m, const struct sim_event *e)
{
    int64_t now = e->t;
    switch ((enum ev_kind)e->kind) {
    case EV_THINK: {
        struct user *u = e->obj;
        if (e->gen != u->gen)
            return;
        if (now >= m->end_ns) {
            u->thinking = false;
            return;
        }
        start_page(m, u, now);
        return;
    }
    case EV_REQ_ARRIVE: {
        struct job *j = e->obj;
        if (j->srv->busy_threads < m->c->tiers[j->srv->tier].threads)
            job_start(m, j, now);
        else {
            q_push(&j->srv->accept, j);
            cause_update(m, j->srv, now);
        }
        return;
    }
    case EV_PS: {
        struct server *s = e->obj;
        if (e->gen != s->ps_gen)
            return;
        sim_ps_advance(&s->ps, now);
        struct job *j;
        while ((j = sim_ps_pop_done(&s->ps)) != NULL)
            burst_done(m, j, now);
        ps_resched(m, s, now);
        return;
    }
    case EV_RESP_ARRIVE:
        on_resp_arrive(m, e->obj, now);
        return;
    case EV_FREEZE_START:
        on_freeze_start(m, e->obj, now);
        return;
    case EV_FREEZE_END:
        on_freeze_end(m, e->obj, now);
        return;
    case EV_GOV:
        on_gov(m, e->obj, now);
        return;
    case EV_SPEED:
        on_speed(m, e->obj, now);
        return;
    case EV_ACK0:
    case EV_ACK1:
        on_ack(m, e->obj, e->kind == EV_ACK0 ? 0 : 1, e->gen, now);
        return;
    case EV_BURST:
        on_burst(m, now);
        return;
    }
}

static int setup(struct model *m, char *err, size_t errlen)
{
    const struct sim_conf *c = m->c;
    sim_rng_seed(&m->rng, c->seed);
    sim_rng_seed(&m->wire_rng, c->seed ^ UINT64_C(0x77697265)); /* "wire" */
    sim_heap_init(&m->ev);
    sim_heap_init(&m->pk);
    m->pkt_size = 18 + 40 + 60 + (size_t)c->mss;
    m->end_ns = c->start_ns + c->duration_ns;
    for (int i = 0; i < c->nclasses; i++)
        m->class_wsum += c->classes[i].weight;
    for (int i = 0; i < 256; i++)
        m->user_port[i] = 32768;
    /* Filler text for bodies and text columns. */
    static const char lorem[] = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed "
                                "do eiusmod tempor incididunt ut labore et dolore magna aliqua. ";
    m->filler_len = 65536;
    m->filler = malloc(m->filler_len);
    if (!m->filler)
        goto nomem;
    for (size_t i = 0; i < m->filler_len; i++)
        m->filler[i] = lorem[i % (sizeof lorem - 1)];
    m->wc = (struct sim_wire_ctx){.c = c, .rng = &m->rng, .msg = &m->msg, .filler = m->filler,
                                  .filler_len = m->filler_len, .send = wire_send, .model = m};
    for (size_t i = 0; i < sim_nwires; i++)
        if (sim_wires[i]->setup && sim_wires[i]->setup(&m->wc, &m->wstate[i]) < 0)
            goto nomem;

    int64_t t0 = c->start_ns;
    for (int t = 0; t < c->ntiers; t++) {
        const struct sim_tier_conf *tc = &c->tiers[t];
        m->nsrv[t] = tc->servers;
        m->srv[t] = calloc((size_t)tc->servers, sizeof *m->srv[t]);
        if (!m->srv[t])
            goto nomem;
        for (int i = 0; i < tc->servers; i++) {
            struct server *s = &m->srv[t][i];
            s->tier = t;
            s->idx = i;
            s->ip[0] = 10, s->ip[1] = 0, s->ip[2] = (uint8_t)(2 + t), s->ip[3] = (uint8_t)(1 + i);
            s->port = tc->port;
            s->level = tc->speed_init;
            s->next_port = 40000;
            sim_fmt_addr(s->addr, sizeof s->addr, s->ip, s->port, c->ipv6);
            sim_ps_init(&s->ps, tc->cores, tc->speeds[s->level] * tc->speedup, t0);
            log_speed(m, s, t0);
        }
    }
    /* Pools: every server opens `pool` connections to every server of the next
     * tier before users arrive, as Tomcat's and Apache's pools do at start-up. */
    int64_t ready = t0;
    int64_t open_at = t0;
    for (int t = 0; t + 1 < c->ntiers; t++) {
        const struct sim_tier_conf *tc = &c->tiers[t], *nc = &c->tiers[t + 1];
        for (int i = 0; i < tc->servers; i++) {
            struct server *s = &m->srv[t][i];
            s->pools = calloc((size_t)nc->servers, sizeof *s->pools);
            if (!s->pools)
                goto nomem;
            for (int d = 0; d < nc->servers; d++) {
                struct pool *p = &s->pools[d];
                p->idle = calloc((size_t)tc->pool, sizeof *p->idle);
                if (!p->idle)
                    goto nomem;
                for (int k = 0; k < tc->pool; k++) {
                    struct conn *cn = conn_new(m, s->ip, s->next_port++, &m->srv[t + 1][d]);
                    if (!cn)
                        goto nomem;
                    cn->ctier = t;
                    open_at += 20000;
                    int64_t r = tcp_open(m, cn, open_at);
                    if (nc->wire->login) {
                        struct sim_wire_req wr = {.tier = t + 1, .conn_id = cn->id};
                        m->wc.rng = c->per_user ? &m->wire_rng : &m->rng;
                        r = nc->wire->login(&m->wc, m->wstate[sim_wire_index(nc->wire)], cn, &wr,
                                            r);
                    }
                    ready = max64(ready, r);
                    p->idle[p->nidle++] = cn;
                }
            }
        }
    }
    m->users = calloc((size_t)c->users, sizeof *m->users);
    if (!m->users)
        goto nomem;
    int64_t ustart = ready + TB_NS_PER_MS;
    for (int i = 0; i < c->users; i++) {
        struct user *u = &m->users[i];
        u->id = i;
        /* 10.0.1.1 .. 10.0.1.250: users share addresses and differ by port. */
        u->ip[0] = 10, u->ip[1] = 0, u->ip[2] = 1, u->ip[3] = (uint8_t)(1 + i % 250);
        if (c->per_user)
            sim_rng_seed(&u->rng, c->seed + UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(i + 1));
        double off = c->warmup_ns > 0 ? sim_rng_unit(user_rng(m, u)) * (double)c->warmup_ns : 0;
        start_think(m, u, ustart, off);
    }
    for (int t = 0; t < c->ntiers; t++)
        if (c->tiers[t].governor_ns)
            for (int i = 0; i < m->nsrv[t]; i++)
                push_ev(m, ustart + c->tiers[t].governor_ns, EV_GOV, &m->srv[t][i], 0);
    for (int t = 0; t < c->ntiers; t++)
        if (c->tiers[t].speed_every.text[0])
            for (int i = 0; i < m->nsrv[t]; i++)
                schedule_speed(m, &m->srv[t][i], ustart);
    int nfi = 0;
    for (int f = 0; f < c->nfreezes; f++)
        nfi += c->freezes[f].server < 0 ? m->nsrv[c->freezes[f].tier] : 1;
    m->fi = calloc((size_t)TB_MAX(nfi, 1), sizeof *m->fi);
    if (!m->fi)
        goto nomem;
    for (int f = 0; f < c->nfreezes; f++) {
        const struct sim_freeze_conf *fc = &c->freezes[f];
        for (int i = 0; i < m->nsrv[fc->tier]; i++) {
            if (fc->server >= 0 && fc->server != i)
                continue;
            struct freeze_inst *fi = &m->fi[m->nfi++];
            fi->fc = fc;
            fi->srv = &m->srv[fc->tier][i];
            schedule_freeze(m, fi, ustart);
        }
    }
    if (c->burst) {
        int64_t first = ustart + (int64_t)llround(sim_dist_sample(&c->burst_off, &m->rng));
        if (first < m->end_ns)
            push_ev(m, first, EV_BURST, NULL, 0);
    }
    if (m->err)
        goto nomem;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory setting up the model");
    return TB_E_NOMEM;
}

static void teardown(struct model *m)
{
    for (int t = 0; t < SIM_MAX_TIERS; t++) {
        if (!m->srv[t])
            continue;
        for (int i = 0; i < m->nsrv[t]; i++) {
            struct server *s = &m->srv[t][i];
            sim_ps_free(&s->ps);
            if (s->pools) {
                int nd = t + 1 < m->c->ntiers ? m->nsrv[t + 1] : 0;
                for (int d = 0; d < nd; d++) {
                    /* Pooled connections outlive the run; free them here. */
                    for (int k = 0; k < s->pools[d].nidle; k++)
                        free(s->pools[d].idle[k]);
                    free(s->pools[d].idle);
                }
                free(s->pools);
            }
        }
        free(m->srv[t]);
    }
    if (m->users) {
        for (int i = 0; i < m->c->users; i++)
            for (int s = 0; s < SIM_MAX_SERVERS; s++)
                free(m->users[i].conn[s]);
        free(m->users);
    }
    for (struct conn *c = m->conn_free, *n; c; c = n) {
        n = c->next_free;
        free(c);
    }
    for (struct job *j = m->job_free, *n; j; j = n) {
        n = j->next_free;
        free(j);
    }
    for (struct pkt *p = m->pkt_free, *n; p; p = n) {
        n = p->next_free;
        free(p);
    }
    struct sim_event e;
    while (sim_heap_pop(&m->pk, &e))
        free(e.obj);
    sim_heap_free(&m->ev);
    sim_heap_free(&m->pk);
    free(m->fi);
    for (size_t i = 0; i < sim_nwires; i++)
        free(m->wstate[i]);
    sim_buf_free(&m->msg);
    sim_buf_free(&m->line);
    free(m->filler);
}

/* The end of the run: the labels still open end now, and the connections
 * still open (pooled ones, users' keep-alive ones) are listed by id. */
static int finish_truth(struct model *m, int64_t now)
{
    size_t n = 0, cap = 0;
    for (int t = 0; t < m->c->ntiers; t++)
        for (int i = 0; i < m->nsrv[t]; i++) {
            cause_write(m, &m->srv[t][i], now);
            if (t + 1 < m->c->ntiers)
                cap += (size_t)m->nsrv[t + 1] * (size_t)m->c->tiers[t].pool;
        }
    cap += (size_t)m->c->users * (size_t)m->nsrv[0];
    struct conn **v = malloc(TB_MAX(cap, 1) * sizeof *v);
    if (!v)
        return TB_E_NOMEM;
    for (int t = 0; t + 1 < m->c->ntiers; t++)
        for (int i = 0; i < m->nsrv[t]; i++)
            for (int d = 0; d < m->nsrv[t + 1]; d++) {
                const struct pool *p = &m->srv[t][i].pools[d];
                for (int k = 0; k < p->nidle && n < cap; k++)
                    v[n++] = p->idle[k];
            }
    for (int u = 0; u < m->c->users; u++)
        for (int s = 0; s < m->nsrv[0]; s++)
            if (m->users[u].conn[s] && n < cap)
                v[n++] = m->users[u].conn[s];
    qsort(v, n, sizeof *v, conn_cmp_id);
    for (size_t i = 0; i < n; i++)
        write_conn(m, v[i]);
    free(v);
    return 0;
}

int sim_run(const struct sim_conf *conf, struct sim_out *out, struct sim_stats *st, char *err,
            size_t errlen)
{
    struct model m = {.c = conf, .out = out, .st = st};
    memset(st, 0, sizeof *st);
    int rc = setup(&m, err, errlen);
    if (rc == 0) {
        struct sim_event e;
        int64_t last = conf->start_ns;
        while (sim_heap_pop(&m.ev, &e)) {
            last = e.t;
            flush_packets(&m, e.t);
            dispatch(&m, &e);
            if (m.err) {
                snprintf(err, errlen, "out of memory while simulating");
                rc = m.err;
                break;
            }
        }
        flush_packets(&m, INT64_MAX);
        if (rc == 0 && (rc = finish_truth(&m, last)) < 0)
            snprintf(err, errlen, "out of memory writing the truth");
    }
    st->packets = out->packets;
    st->packets_written = out->written;
    st->dropped = out->dropped_n;
    st->reordered = out->reordered;
    st->duplicated = out->duplicated;
    st->bytes = out->bytes;
    teardown(&m);
    return rc;
}
