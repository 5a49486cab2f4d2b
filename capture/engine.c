/* SPDX-License-Identifier: MIT */
/* engine.c — packets in, requests out: decode, flow tracking, which side
 * serves, reassembly, protocol choice, tier assignment and the request record.
 *
 * Per packet the engine allocates nothing: decoding reads the caller's frame,
 * in-order payload goes straight from the frame to the parser. Memory is taken
 * when a flow is created (its struct), when its protocol is chosen (the
 * parser's state, once per flow), and on the exceptional paths (out-of-order
 * segments, undecided detection). */
#include "capture.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "decode-int.h"
#include "flow-int.h"
#include "proto.h"
#include "reasm-int.h"
#include "tiers.h"
#include "util.h"

#define DEFAULT_MAX_FLOWS ((size_t)1 << 20)
#define DEFAULT_MAX_OOO ((size_t)256 << 10)
#define DEFAULT_IDLE_NS (300 * TB_NS_PER_SEC)
/* A closed flow is remembered this long so that its late segments (the last
 * ACK, retransmitted FINs) do not open a mid-stream connection. */
#define CLOSED_LINGER_NS (30 * TB_NS_PER_SEC)

/* Detection sees the first bytes of each direction; while every protocol of
 * higher priority than a matching one still says "maybe", the bytes wait here
 * (with their packets' times, to be replayed exactly). Bounded, and freed as
 * soon as the protocol is chosen. */
#define DET_BYTES 1024
#define DET_CHUNKS 16
struct tb_detbuf {
    uint32_t len[2]; /* per side */
    uint32_t nchunks;
    struct {
        uint8_t side;
        uint32_t len;
        int64_t ts_ns;
    } chunk[DET_CHUNKS];
    uint8_t data[2][DET_BYTES];
};

struct tb_engine {
    struct tb_catalog *cat;
    const struct tb_tiers *tiers;
    size_t max_flows, max_ooo;
    int64_t idle_ns;
    const struct tb_proto *force;
    tb_request_cb cb;
    void *ud;
    tb_conn_cb conn_cb;
    void *conn_ud;
    struct tb_capture_stats st;
    struct tb_reasm_ctr rctr;
    struct tb_proto_counters pctr;
    struct tb_proto_ctx pctx;
    struct tb_reasm_env renv;
    struct tb_flow_table ft;
    struct tb_flow *cur; /* the flow whose bytes the parser is being fed */
    struct tb_flow *last; /* the previous packet's flow: the next one is often the same */
    /* The client address of the last request emitted, for the next one: a
     * pipelined connection emits many in a row. Valid for that flow struct,
     * connection number and client side only. */
    const struct tb_flow *caddr_flow;
    uint64_t caddr_conn;
    int caddr_side;
    struct tb_addr caddr;
    uint64_t next_conn;
    bool have_linktype;
    int nomem;
    /* Per tier id: requests unanswered by protocol and abandoned at close. */
    struct tier_cnt {
        uint64_t unanswered, abandoned;
    } *tc;
    size_t ntc;
    /* tb_engine_set_batch_cb: records waiting to be handed over. Built in
     * place, one after the other in a few KiB that stay in the cache; the
     * consumer is called once per batch instead of once per request (on a
     * pipelined capture, a request every few dozen bytes). */
    tb_requests_cb bcb;
    void *bud;
    size_t nb;
    struct tb_request batch[TB_ENGINE_BATCH];
};

static void on_exchange(void *ud, const struct tb_exchange *ex);
static void on_data(void *ud, int side, const uint8_t *p, size_t n, int64_t ts);
static void on_gap(void *ud, int side, uint64_t len, int64_t ts);

int tb_engine_new(struct tb_engine **out, struct tb_catalog *cat, const struct tb_tiers *tiers,
                  const struct tb_engine_opts *opts, tb_request_cb cb, void *ud)
{
    struct tb_engine *e;
    *out = NULL;
    if (!cat || !cb)
        return TB_E_INVAL;
    e = calloc(1, sizeof *e);
    if (!e)
        return TB_E_NOMEM;
    e->cat = cat;
    e->tiers = tiers;
    e->cb = cb;
    e->ud = ud;
    e->max_flows = opts && opts->max_flows ? opts->max_flows : DEFAULT_MAX_FLOWS;
    e->max_ooo = opts && opts->max_ooo_bytes ? opts->max_ooo_bytes : DEFAULT_MAX_OOO;
    if (opts && opts->max_memory) {
        /* --max-memory: what a flow may hold at most, in the common case of
         * a few requests in flight: its struct, the largest parser state, a
         * first in-flight ring, and detection bytes. Out-of-order buffers
         * are capped so that a thousandth of the budget covers both sides
         * of a flow; the flow cap follows (eviction: least recently active
         * first, counted in evicted_flows). */
        size_t per = tb_engine_flow_bytes() + tb_engine_parser_bytes() + TB_ENGINE_FLOW_EXTRA;
        size_t ooo = opts->max_memory / 2048;
        if (ooo < e->max_ooo)
            e->max_ooo = TB_MAX(ooo, (size_t)4096);
        size_t flows = opts->max_memory / per;
        e->max_flows = TB_MIN(e->max_flows, TB_MAX(flows, (size_t)16));
    }
    e->idle_ns = opts && opts->idle_timeout_ns > 0 ? opts->idle_timeout_ns : DEFAULT_IDLE_NS;
    e->next_conn = opts && opts->first_conn ? opts->first_conn : 1;
    if (opts && opts->force_proto && !(e->force = tb_proto_find(opts->force_proto))) {
        free(e);
        return TB_E_INVAL;
    }
    if (tb_flow_table_init(&e->ft)) {
        free(e);
        return TB_E_NOMEM;
    }
    e->pctx.emit = on_exchange;
    e->pctx.ud = e;
    e->pctx.ctr = &e->pctr;
    e->renv.data = on_data;
    e->renv.gap = on_gap;
    e->renv.ud = e;
    e->renv.ctr = &e->rctr;
    e->renv.max_ooo = e->max_ooo;
    *out = e;
    return 0;
}

/* Ends parsing of a flow: parser state and detection buffer. Safe inside a
 * reassembly callback (the segments being delivered are left alone). */
static void stop_parser(struct tb_flow *f)
{
    if (f->pstate) {
        if (f->proto->fini)
            f->proto->fini(f->pstate);
        free(f->pstate);
        f->pstate = NULL;
    }
    free(f->det);
    f->det = NULL;
}

/* Everything a flow holds besides its struct. */
static void release(struct tb_flow *f)
{
    stop_parser(f);
    tb_reasm_free(&f->rs[0]);
    tb_reasm_free(&f->rs[1]);
}

void tb_engine_set_conn_cb(struct tb_engine *e, tb_conn_cb cb, void *ud)
{
    e->conn_cb = cb;
    e->conn_ud = ud;
}

/* Hands the waiting records over (tb_engine_set_batch_cb). */
static void flush(struct tb_engine *e)
{
    if (e->nb) {
        size_t n = e->nb;
        e->nb = 0;
        e->bcb(e->bud, e->batch, n);
    }
}

void tb_engine_set_batch_cb(struct tb_engine *e, tb_requests_cb cb, void *ud)
{
    if (e->bcb)
        flush(e);
    e->bcb = cb;
    e->bud = ud;
}

/* The connection record of flow f as it stands (conn.h). */
static void emit_conn(struct tb_engine *e, const struct tb_flow *f, enum tb_conn_close closed)
{
    if (!e->conn_cb)
        return;
    if (e->bcb)
        flush(e); /* the connection's requests before it */
    struct tb_conn c;
    memset(&c, 0, sizeof c);
    c.conn = f->conn;
    tb_flow_addr(f, 1 - f->server_side, &c.client);
    tb_flow_addr(f, f->server_side, &c.server);
    c.tier = f->tier;
    c.server_id = f->server;
    c.open_ns = f->open_ns;
    c.close_ns = f->last_ns;
    c.requests = f->nreq;
    c.packets = f->npkt;
    c.bytes_c2s = f->nbytes[1 - f->server_side];
    c.bytes_s2c = f->nbytes[f->server_side];
    c.opened = (f->flags & TB_FF_MIDSTREAM) ? TB_CONN_MIDSTREAM
               : (f->flags & TB_FF_OPEN_SYN) ? TB_CONN_SYN
                                              : TB_CONN_SYNACK;
    c.closed = (uint8_t)closed;
    e->conn_cb(e->conn_ud, &c);
}

void tb_engine_free(struct tb_engine *e)
{
    if (!e)
        return;
    for (int l = 0; l < 2; l++)
        for (struct tb_flow *f = e->ft.lists[l].head; f; f = f->next)
            release(f);
    tb_flow_table_fini(&e->ft);
    free(e->tc);
    free(e);
}

static int proto_dir(const struct tb_flow *f, int side)
{
    return side == f->server_side ? TB_DIR_S2C : TB_DIR_C2S;
}

static int64_t clamp_ts(struct tb_flow *f, int64_t ts)
{
    /* Timestamps handed to a parser never go back within a flow, so that no
     * record can depart before it arrived even when the capture's clock
     * stepped back or merged files overlap. */
    if (ts < f->ts_floor)
        return f->ts_floor;
    f->ts_floor = ts;
    return ts;
}

/* ---- protocol choice and tier assignment -------------------------------- */

static bool well_known(uint16_t port)
{
    for (size_t i = 0; tb_protos[i]; i++)
        for (const uint16_t *p = tb_protos[i]->ports; p && *p; p++)
            if (*p == port)
                return true;
    return false;
}

/* Assigns tier and server ids for the flow's server endpoint. */
static int assign_tier(struct tb_engine *e, struct tb_flow *f, const struct tb_proto *proto)
{
    struct tb_addr srv;
    int rc;
    tb_flow_addr(f, f->server_side, &srv);
    const struct tb_tier_cfg *cfg = tb_tiers_match(e->tiers, &srv);
    if (cfg) {
        f->tier = cfg->tier_id;
    } else if (tb_catalog_server_find(e->cat, &srv, &f->server) == 0) {
        /* Known from an earlier capture into the same database. */
        f->tier = tb_catalog_server_get(e->cat, f->server)->tier;
        return 0;
    } else {
        char name[TB_NAME_MAX];
        tb_tiers_auto_name(proto, srv.port, name, sizeof name);
        if ((rc = tb_catalog_tier(e->cat, name, proto->name, &f->tier)))
            return rc;
    }
    if ((rc = tb_catalog_server(e->cat, f->tier, &srv, &f->server)))
        return rc;
    return tb_catalog_host(e->cat, f->tier, &srv);
}

static void feed(struct tb_engine *e, struct tb_flow *f, int side, const uint8_t *p, size_t n,
                 int64_t ts);

/* Starts parsing the flow with `proto`: tier, parser state, and the bytes that
 * waited for the decision. */
static void choose(struct tb_engine *e, struct tb_flow *f, const struct tb_proto *proto)
{
    f->flags |= TB_FF_DETECT_DONE;
    if (assign_tier(e, f, proto)) {
        e->nomem = 1;
        goto drop;
    }
    f->pstate = calloc(1, proto->state_size ? proto->state_size : 1);
    if (!f->pstate) {
        e->nomem = 1;
        goto drop;
    }
    f->proto = proto;
    proto->init(f->pstate, (f->flags & (TB_FF_MIDSTREAM | TB_FF_PREGAP)) != 0);
    if (f->det) {
        struct tb_detbuf *d = f->det;
        uint32_t off[2] = {0, 0};
        f->det = NULL;
        for (uint32_t i = 0; i < d->nchunks && f->pstate; i++) {
            int side = d->chunk[i].side;
            feed(e, f, side, d->data[side] + off[side], d->chunk[i].len, d->chunk[i].ts_ns);
            off[side] += d->chunk[i].len;
        }
        free(d);
    }
    return;
drop:
    free(f->det);
    f->det = NULL;
}

/* Mid-stream, the first bytes are likely the middle of a message, which no
 * specific protocol recognises and the catch-all (the table's last entry)
 * would take. So each chunk is tried on its own, and only after
 * MIDSTREAM_TRIES chunks without a recognisable message start does the
 * catch-all get the flow. Bytes before the chosen chunk are not replayed: the
 * parser, started in mid-stream mode, would skip them anyway. */
#define MIDSTREAM_TRIES 8
static bool detect_midstream(struct tb_engine *e, struct tb_flow *f, int side, const uint8_t *p,
                             size_t n)
{
    int dir = proto_dir(f, side);
    bool client_sent = dir == TB_DIR_C2S;
    size_t i;
    for (i = 0; tb_protos[i] && tb_protos[i + 1]; i++) {
        bool cs = client_sent;
        if (tb_protos[i]->detect(p, n, (enum tb_dir)dir, &cs) == TB_DETECT_YES) {
            if (cs != client_sent && !(f->flags & TB_FF_SERVER_SURE))
                f->server_side = (uint8_t)(1 - f->server_side);
            choose(e, f, tb_protos[i]);
            return true;
        }
    }
    if (++f->det_tries < MIDSTREAM_TRIES || !tb_protos[i])
        return false;
    bool cs = client_sent;
    if (tb_protos[i]->detect(p, n, (enum tb_dir)dir, &cs) == TB_DETECT_YES)
        choose(e, f, tb_protos[i]);
    else
        f->flags |= TB_FF_DETECT_DONE;
    return true;
}

/* Which protocol, by content. Returns true when decided (or given up). */
static bool detect(struct tb_engine *e, struct tb_flow *f, int side, const uint8_t *p, size_t n,
                   int64_t ts, bool *consumed)
{
    int dir = proto_dir(f, side);
    const uint8_t *dp = p;
    size_t dn = n;
    bool last_chance = false;
    *consumed = false;
    if (f->det) {
        struct tb_detbuf *d = f->det;
        if (d->nchunks < DET_CHUNKS && DET_BYTES - d->len[side] >= n) {
            memcpy(d->data[side] + d->len[side], p, n);
            d->chunk[d->nchunks].side = (uint8_t)side;
            d->chunk[d->nchunks].len = (uint32_t)n;
            d->chunk[d->nchunks].ts_ns = ts;
            d->nchunks++;
            d->len[side] += (uint32_t)n;
            *consumed = true;
        } else {
            last_chance = true;
        }
        dn = d->len[side];
        dp = d->data[side];
        if (dn == 0) {
            dp = p;
            dn = n;
        }
    }
    const struct tb_proto *yes = NULL;
    bool maybe_before = false, client_sent = dir == TB_DIR_C2S, yes_cs = client_sent;
    for (size_t i = 0; tb_protos[i]; i++) {
        bool cs = dir == TB_DIR_C2S;
        enum tb_detect r = tb_protos[i]->detect(dp, dn, (enum tb_dir)dir, &cs);
        if (r == TB_DETECT_YES) {
            yes = tb_protos[i];
            yes_cs = cs;
            break;
        }
        if (r == TB_DETECT_MAYBE)
            maybe_before = true;
    }
    if (yes && (!maybe_before || last_chance)) {
        /* Detection may correct a guessed server side; a handshake or the
         * tiers file is never overruled. */
        if (yes_cs != client_sent && !(f->flags & TB_FF_SERVER_SURE))
            f->server_side = (uint8_t)(1 - f->server_side);
        /* choose() replays what was buffered; an unbuffered chunk is fed by
         * the caller. */
        choose(e, f, yes);
        return true;
    }
    if (!yes && !maybe_before) {
        f->flags |= TB_FF_DETECT_DONE; /* nothing will ever parse it */
        free(f->det);
        f->det = NULL;
        return true;
    }
    if (last_chance) {
        f->flags |= TB_FF_DETECT_DONE;
        free(f->det);
        f->det = NULL;
        return true;
    }
    if (!f->det) {
        f->det = calloc(1, sizeof *f->det);
        if (!f->det) {
            e->nomem = 1;
            f->flags |= TB_FF_DETECT_DONE;
            return true;
        }
        return detect(e, f, side, p, n, ts, consumed);
    }
    return false;
}

/* The protocol decision for feed(), while it is pending. Returns whether the
 * bytes go on to the parser (if one was chosen) now. Out of line, so that
 * feed() stays small for the bytes of every other packet. */
TB_NOINLINE static bool decide(struct tb_engine *e, struct tb_flow *f, int side,
                                             const uint8_t *p, size_t n, int64_t ts)
{
    bool consumed;
    if (e->force) {
        choose(e, f, e->force);
        return true;
    }
    struct tb_addr srv;
    tb_flow_addr(f, f->server_side, &srv);
    const struct tb_tier_cfg *cfg = tb_tiers_match(e->tiers, &srv);
    if (cfg && cfg->proto) {
        choose(e, f, cfg->proto);
        return true;
    }
    if (f->flags & (TB_FF_MIDSTREAM | TB_FF_PREGAP))
        return detect_midstream(e, f, side, p, n);
    /* Not yet decided: waiting for more bytes. Consumed: the bytes were
     * buffered and replayed by choose(). */
    return detect(e, f, side, p, n, ts, &consumed) && !consumed;
}

/* Bytes of one side, in order, to the parser (deciding the protocol first). */
/* Out of memory, a tier's count stays short; the totals do not. */
static void tier_count(struct tb_engine *e, uint32_t tier, uint64_t unanswered,
                       uint64_t abandoned)
{
    if (tier >= e->ntc && tb_grow_zero(&e->tc, &e->ntc, (size_t)tier + 1, sizeof *e->tc))
        return;
    e->tc[tier].unanswered += unanswered;
    e->tc[tier].abandoned += abandoned;
}

static void feed(struct tb_engine *e, struct tb_flow *f, int side, const uint8_t *p, size_t n,
                 int64_t ts)
{
    if (!(f->flags & TB_FF_DETECT_DONE) && !decide(e, f, side, p, n, ts))
        return;
    if (!f->pstate)
        return;
    uint64_t unans = e->pctr.unanswered;
    enum tb_pstate ps =
        f->proto->consume(f->pstate, &e->pctx, (enum tb_dir)proto_dir(f, side), p, n, ts);
    if (e->pctr.unanswered != unans)
        tier_count(e, f->tier, e->pctr.unanswered - unans, 0);
    if (ps == TB_PS_STOP)
        stop_parser(f);
}

static void on_data(void *ud, int side, const uint8_t *p, size_t n, int64_t ts)
{
    struct tb_engine *e = ud;
    struct tb_flow *f = e->cur;
    feed(e, f, side, p, n, clamp_ts(f, ts));
}

static void on_gap(void *ud, int side, uint64_t len, int64_t ts)
{
    struct tb_engine *e = ud;
    struct tb_flow *f = e->cur;
    /* A hole found later has no time of its own (TB_TS_UNKNOWN) and must
     * reach the parser as such; a snaplen cut carries its packet's time. */
    if (ts != TB_TS_UNKNOWN)
        ts = clamp_ts(f, ts);
    if (!(f->flags & TB_FF_DETECT_DONE)) {
        /* Bytes kept for detection are no longer contiguous with what
         * follows: start detection afresh after the hole, and let the parser
         * know it starts in the middle of a stream. */
        free(f->det);
        f->det = NULL;
        f->flags |= TB_FF_PREGAP;
        return;
    }
    if (!f->pstate)
        return;
    enum tb_pstate ps =
        f->proto->gap(f->pstate, &e->pctx, (enum tb_dir)proto_dir(f, side), len, ts);
    if (ps == TB_PS_STOP)
        stop_parser(f);
}

/* The catalog id of an exchange's class text (and the parser's memory of it
 * set); false when memory ran out. */
static bool class_lookup(struct tb_engine *e, const struct tb_flow *f,
                                     const struct tb_exchange *ex, uint32_t *id)
{
    static const char unknown[] = "unknown";
    const char *txt = ex->class_text && ex->class_len ? ex->class_text : unknown;
    size_t tlen = ex->class_text && ex->class_len ? ex->class_len : sizeof unknown - 1;
    if (tb_catalog_class(e->cat, f->tier, txt, tlen, id)) {
        e->nomem = 1;
        return false;
    }
    if (ex->class_id)
        *ex->class_id = *id;
    return true;
}

/* The client address of flow f, for this and the next requests (a
 * pipelined connection emits many in a row). */
static void client_addr(struct tb_engine *e, const struct tb_flow *f, int cside)
{
    tb_flow_addr(f, cside, &e->caddr);
    e->caddr_flow = f;
    e->caddr_conn = f->conn;
    e->caddr_side = cside;
}

static void on_exchange(void *ud, const struct tb_exchange *ex)
{
    struct tb_engine *e = ud;
    struct tb_flow *f = e->cur;
    if (ex->arrival_ns == TB_TS_UNKNOWN || ex->departure_ns == TB_TS_UNKNOWN) {
        /* A parser's promise is that captured packets bound both times; a
         * record without them would be invented. */
        e->pctr.parse_errors++;
        return;
    }
    uint32_t cid;
    if (ex->class_id && *ex->class_id)
        cid = *ex->class_id; /* the parser's memory of this text's id (proto.h) */
    else if (!class_lookup(e, f, ex, &cid))
        return;
    int cside = 1 - f->server_side;
    if (e->caddr_flow != f || e->caddr_conn != f->conn || e->caddr_side != cside)
        client_addr(e, f, cside);
    /* Built in place, every field set (no memset): the next slot of the
     * batch, also for the per-request callback (which takes it at once). */
    struct tb_request *r = &e->batch[e->nb];
    r->arrival_ns = ex->arrival_ns;
    r->departure_ns = TB_MAX(ex->departure_ns, ex->arrival_ns);
    r->conn = f->conn;
    r->req_bytes = ex->req_bytes;
    r->resp_bytes = ex->resp_bytes;
    r->client = e->caddr;
    r->tier = f->tier;
    r->server = f->server;
    r->class_id = cid;
    r->status = ex->status;
    uint32_t flags = ex->flags;
    if (f->flags & TB_FF_MIDSTREAM)
        flags |= TB_REQ_MIDSTREAM;
    if (f->flags & TB_FF_TRUNC)
        flags |= TB_REQ_TRUNC;
    r->flags = flags;
    f->flags &= (uint16_t)~TB_FF_TRUNC;
    e->st.requests++;
    f->nreq++;
    if (!e->bcb)
        e->cb(e->ud, r);
    else if (++e->nb == TB_ENGINE_BATCH)
        flush(e);
}

/* ---- flow life ----------------------------------------------------------- */

/* Ends a connection: holes declared, buffered bytes delivered, the parser
 * closed; the struct stays as a closed flow until removed. */
static void close_flow(struct tb_engine *e, struct tb_flow *f, int fin_side,
                       enum tb_conn_close why)
{
    if (f->state == TB_FS_CLOSED)
        return;
    e->cur = f;
    int64_t ts = f->last_ns;
    int c = 1 - f->server_side, s = f->server_side;
    tb_reasm_flush(&f->rs[c], &e->renv, ts);
    tb_reasm_flush(&f->rs[s], &e->renv, ts);
    if (f->pstate && f->proto->waiting) {
        uint32_t w = f->proto->waiting(f->pstate);
        if (w) {
            e->st.abandoned += w;
            tier_count(e, f->tier, 0, w);
        }
    }
    if (f->pstate && f->proto->close)
        f->proto->close(f->pstate, &e->pctx, fin_side < 0 ? -1 : proto_dir(f, fin_side),
                        clamp_ts(f, ts));
    release(f);
    e->cur = NULL;
    f->state = TB_FS_CLOSED;
    tb_flow_touch(&e->ft, f, TB_FL_CLOSED);
    emit_conn(e, f, why);
}

static void drop_flow(struct tb_engine *e, struct tb_flow *f)
{
    if (e->last == f)
        e->last = NULL;
    release(f);
    tb_flow_remove(&e->ft, f);
}

/* Makes room for one more flow: a closed flow goes first, else the least
 * recently active open one is evicted (closed through its parser). */
static void make_room(struct tb_engine *e)
{
    while (e->ft.count >= e->max_flows) {
        struct tb_flow *f = tb_flow_oldest(&e->ft, TB_FL_CLOSED);
        if (!f) {
            f = tb_flow_oldest(&e->ft, TB_FL_ACTIVE);
            if (!f)
                return;
            close_flow(e, f, -1, TB_CONN_EVICTED);
            e->st.evicted_flows++;
        }
        drop_flow(e, f);
    }
}

/* Resets a flow struct for a new connection on the same 4-tuple. */
static void start_conn(struct tb_engine *e, struct tb_flow *f)
{
    f->state = TB_FS_EST;
    f->flags = 0;
    f->fin_first = 0;
    f->det_tries = 0;
    f->tier = f->server = 0;
    f->proto = NULL;
    tb_reasm_init(&f->rs[0], 0);
    tb_reasm_init(&f->rs[1], 1);
    f->conn = e->next_conn++;
    f->open_ns = f->last_ns;
    f->nreq = 0;
    f->npkt = 1; /* the packet that opens it */
    f->nbytes[0] = f->nbytes[1] = 0;
    e->st.flows++;
    tb_flow_touch(&e->ft, f, TB_FL_ACTIVE);
    if (e->ft.lists[TB_FL_ACTIVE].count > e->st.flows_active_max)
        e->st.flows_active_max = e->ft.lists[TB_FL_ACTIVE].count;
}

/* Server side of a connection picked up without its handshake. */
static void guess_server(struct tb_engine *e, struct tb_flow *f, int src_side)
{
    struct tb_addr a[2];
    tb_flow_addr(f, 0, &a[0]);
    tb_flow_addr(f, 1, &a[1]);
    int dst = 1 - src_side;
    if (tb_tiers_match(e->tiers, &a[dst])) {
        f->server_side = (uint8_t)dst;
        f->flags |= TB_FF_SERVER_SURE;
    } else if (tb_tiers_match(e->tiers, &a[src_side])) {
        f->server_side = (uint8_t)src_side;
        f->flags |= TB_FF_SERVER_SURE;
    } else if (well_known(a[dst].port)) {
        f->server_side = (uint8_t)dst;
    } else if (well_known(a[src_side].port)) {
        f->server_side = (uint8_t)src_side;
    } else {
        /* Servers listen on the low, fixed port; clients get ephemeral ones. */
        f->server_side = (uint8_t)(a[src_side].port < a[dst].port ? src_side : dst);
    }
}

static bool monitored(const struct tb_engine *e, const struct tb_pkt *pk)
{
    return !e->tiers || tb_tiers_match(e->tiers, &pk->dst) || tb_tiers_match(e->tiers, &pk->src);
}

/* The first packet of a connection on a flow struct that is new or closed:
 * who serves, where each direction starts. Returns whether the packet is done
 * with (a SYN or SYN-ACK carries nothing more to handle). */
TB_NOINLINE static bool open_conn(struct tb_engine *e, struct tb_flow *f,
                                                const struct tb_pkt *pk, int side)
{
    bool syn = pk->flags & TB_TCP_SYN, ack = pk->flags & TB_TCP_ACK;
    bool rst = pk->flags & TB_TCP_RST;
    start_conn(e, f);
    if (syn && !ack && !rst) {
        f->state = TB_FS_SYN;
        f->server_side = (uint8_t)(1 - side);
        f->flags |= TB_FF_SERVER_SURE | TB_FF_ISN | TB_FF_OPEN_SYN;
        f->syn_isn = pk->seq;
        tb_reasm_start(&f->rs[side], pk->seq + 1);
        emit_conn(e, f, TB_CONN_OPEN);
        return true;
    }
    if (syn && ack) {
        /* The SYN was missed but its answer says who serves. */
        f->state = TB_FS_SYNACK;
        f->server_side = (uint8_t)side;
        f->flags |= TB_FF_SERVER_SURE | TB_FF_SYNACK_SEEN | TB_FF_ISN;
        f->syn_isn = pk->ack - 1;
        tb_reasm_start(&f->rs[side], pk->seq + 1);
        tb_reasm_start(&f->rs[1 - side], pk->ack);
        emit_conn(e, f, TB_CONN_OPEN);
        return true;
    }
    f->flags |= TB_FF_MIDSTREAM;
    e->st.midstream_flows++;
    guess_server(e, f, side);
    emit_conn(e, f, TB_CONN_OPEN);
    return false;
}

/* The flow of a packet that is not the previous packet's: looked up by its
 * key, or added (*added) for the first packet of a connection worth following.
 * NULL, with *rc 0 or TB_E_NOMEM, when there is none. Out of line: most
 * packets belong to the previous packet's flow. */
TB_NOINLINE static struct tb_flow *find_or_add(struct tb_engine *e,
                                                             const struct tb_pkt *pk, int64_t ts,
                                                             int *side, bool *added, int *rc)
{
    struct tb_flow_key key;
    uint32_t hash;
    struct tb_flow *f = tb_flow_lookup(&e->ft, &pk->src, &pk->dst, &key, &hash, side);
    *added = false;
    *rc = 0;
    if (f)
        return f;
    bool syn = pk->flags & TB_TCP_SYN, rst = pk->flags & TB_TCP_RST;
    bool data = pk->paylen + pk->missing > 0;
    if (rst || !(syn || data) || !monitored(e, pk))
        return NULL;
    make_room(e);
    f = tb_flow_add(&e->ft, &key, hash, pk->src.family);
    if (!f) {
        *rc = TB_E_NOMEM;
        return NULL;
    }
    f->state = TB_FS_CLOSED;
    f->ts_floor = ts;
    *added = true;
    return f;
}

static int tcp_packet(struct tb_engine *e, const struct tb_pkt *pk, int64_t ts)
{
    int side, rc;
    struct tb_flow *f = e->last;
    bool syn = pk->flags & TB_TCP_SYN, ack = pk->flags & TB_TCP_ACK;
    bool rst = pk->flags & TB_TCP_RST, fin = pk->flags & TB_TCP_FIN;
    bool data = pk->paylen + pk->missing > 0;
    bool fresh_syn = syn && !ack && !rst;
    bool added = false;

    if (!f || !tb_flow_has(f, &pk->src, &pk->dst, &side)) {
        f = find_or_add(e, pk, ts, &side, &added, &rc);
        if (!f)
            return rc;
    }
    if (added) {
        /* No connection on it yet: it opens below. */
    } else if (fresh_syn && (f->flags & TB_FF_ISN) && f->syn_isn == pk->seq) {
        return 0; /* the same SYN again: retransmitted or duplicated by the tap */
    } else if (fresh_syn) {
        /* A new SYN on a finished 4-tuple, or port reuse we did not see the
         * end of: the old connection ends here, a new one starts. */
        close_flow(e, f, -1, f->fin_first ? TB_CONN_FIN : TB_CONN_RST);
    } else if (f->state == TB_FS_CLOSED) {
        return 0; /* a late segment of a closed connection */
    }
    e->last = f;
    f->last_ns = ts;
    if (f->state == TB_FS_CLOSED) {
        if (open_conn(e, f, pk, side))
            return 0;
    } else {
        tb_flow_touch(&e->ft, f, TB_FL_ACTIVE);
        f->npkt++;
    }
    f->nbytes[side] += pk->paylen;

    if (syn) {
        if (ack && side == f->server_side && !(f->flags & TB_FF_SYNACK_SEEN) &&
            f->state == TB_FS_SYN) {
            f->state = TB_FS_SYNACK;
            f->flags |= TB_FF_SYNACK_SEEN;
            tb_reasm_start(&f->rs[side], pk->seq + 1);
        }
        return 0; /* retransmitted SYN or SYN-ACK; a SYN carries no data we parse */
    }
    e->cur = f;
    /* Picked up mid-stream, the other side's next byte is what this packet
     * acknowledges: starting there lets a lost first segment show as a hole. */
    if ((f->flags & TB_FF_MIDSTREAM) && ack && !f->rs[1 - side].started)
        tb_reasm_start(&f->rs[1 - side], pk->ack);
    /* What a segment carries may answer bytes it acknowledges (a response
     * acknowledging its request): holes those left are declared first. A
     * pure ACK only takes note (see tb_reasm_ack_note). */
    if (ack && (data || fin))
        tb_reasm_acked(&f->rs[1 - side], &e->renv, pk->ack, ts);
    if (rst) {
        close_flow(e, f, -1, TB_CONN_RST);
        return e->nomem ? (e->nomem = 0, TB_E_NOMEM) : 0;
    }
    if (data || fin) {
        if (f->state < TB_FS_EST)
            f->state = TB_FS_EST;
        if (pk->missing)
            f->flags |= TB_FF_TRUNC;
        if (tb_reasm_segment(&f->rs[side], &e->renv, pk->seq, pk->payload, pk->paylen,
                             pk->missing, fin, ts))
            e->nomem = 1;
        if (fin && !f->fin_first)
            f->fin_first = (uint8_t)(side + 1);
    }
    /* ACKs noted on earlier packets: what is still missing now is a hole. */
    tb_reasm_settle(&f->rs[0], &e->renv);
    tb_reasm_settle(&f->rs[1], &e->renv);
    if (ack && !(data || fin))
        tb_reasm_ack_note(&f->rs[1 - side], pk->ack, ts);
    if (f->fin_first && tb_reasm_finished(&f->rs[0]) && tb_reasm_finished(&f->rs[1]))
        close_flow(e, f, f->fin_first - 1, TB_CONN_FIN);
    e->cur = NULL;
    if (e->nomem) {
        e->nomem = 0;
        return TB_E_NOMEM;
    }
    return 0;
}

int tb_engine_packet(struct tb_engine *e, int linktype, int64_t ts_ns, const uint8_t *data,
                     uint32_t caplen, uint32_t wirelen)
{
    struct tb_capture_stats *s = &e->st;
    struct tb_pkt pk;
    if (!e->have_linktype) {
        e->have_linktype = true;
        s->linktype = linktype;
    }
    if (s->packets == 0 || ts_ns < s->first_ns)
        s->first_ns = ts_ns;
    if (s->packets == 0 || ts_ns > s->last_ns)
        s->last_ns = ts_ns;
    s->packets++;
    s->bytes += TB_MAX(wirelen, caplen);
    if (caplen < wirelen)
        s->truncated++;
    switch (tb_decode(linktype, data, caplen, wirelen, &pk)) {
    case TB_DEC_TCP:
        s->tcp_packets++;
        return tcp_packet(e, &pk, ts_ns);
    case TB_DEC_NON_IP:
        s->non_ip++;
        return 0;
    case TB_DEC_NON_TCP:
        s->non_tcp++;
        return 0;
    case TB_DEC_FRAGMENT:
        s->ip_fragments++;
        return 0;
    case TB_DEC_MALFORMED:
        s->decode_errors++;
        return 0;
    case TB_DEC_HDR_TRUNC:
        s->hdr_truncated++;
        return 0;
    case TB_DEC_UNKNOWN_LINK:
        s->unknown_link++;
        return 0;
    }
    return 0;
}

void tb_engine_expire(struct tb_engine *e, int64_t now_ns)
{
    struct tb_flow *f;
    while ((f = tb_flow_oldest(&e->ft, TB_FL_ACTIVE)) && now_ns - f->last_ns >= e->idle_ns) {
        close_flow(e, f, -1, TB_CONN_IDLE);
        e->st.idle_closed++;
        drop_flow(e, f);
    }
    int64_t linger = TB_MIN(CLOSED_LINGER_NS, e->idle_ns);
    while ((f = tb_flow_oldest(&e->ft, TB_FL_CLOSED)) && now_ns - f->last_ns >= linger)
        drop_flow(e, f);
    if (e->bcb)
        flush(e);
}

void tb_engine_finish(struct tb_engine *e, int64_t now_ns)
{
    struct tb_flow *f;
    (void)now_ns;
    while ((f = tb_flow_oldest(&e->ft, TB_FL_ACTIVE)))
        close_flow(e, f, -1, TB_CONN_END);
    while ((f = tb_flow_oldest(&e->ft, TB_FL_CLOSED)))
        drop_flow(e, f);
    if (e->bcb)
        flush(e);
}

const struct tb_capture_stats *tb_engine_stats(const struct tb_engine *ce)
{
    /* The reassembler's and parsers' counters live in their own structs (they
     * are shared by every flow); the stats are a view gathered on demand. */
    struct tb_engine *e = (struct tb_engine *)ce;
    struct tb_capture_stats *s = &e->st;
    s->retransmitted_bytes = e->rctr.retransmitted_bytes;
    s->overlap_bytes = e->rctr.overlap_bytes;
    s->ooo_buffered_bytes = e->rctr.ooo_buffered_bytes;
    s->ooo_dropped_bytes = e->rctr.ooo_dropped_bytes;
    s->gaps = e->rctr.gaps;
    s->gap_bytes = e->rctr.gap_bytes;
    s->parse_errors = e->pctr.parse_errors;
    s->resyncs = e->pctr.resyncs;
    s->encrypted_flows = e->pctr.encrypted_flows;
    s->compressed_flows = e->pctr.compressed_flows;
    s->inflight_dropped = e->pctr.inflight_dropped;
    s->streams = e->pctr.streams;
    s->unanswered = e->pctr.unanswered;
    s->probes = e->pctr.probes;
    s->flows_open = e->ft.lists[TB_FL_ACTIVE].count;
    return s;
}

void tb_engine_tier_counts(const struct tb_engine *e, uint32_t tier, uint64_t *unanswered,
                           uint64_t *abandoned)
{
    *unanswered = tier < e->ntc ? e->tc[tier].unanswered : 0;
    *abandoned = tier < e->ntc ? e->tc[tier].abandoned : 0;
}

void tb_engine_absorb(struct tb_engine *dst, const struct tb_engine *src,
                      uint32_t (*tier_map)(void *ud, uint32_t tier), void *ud)
{
    const struct tb_capture_stats *s = &src->st;
    struct tb_capture_stats *d = &dst->st;
    if (!dst->have_linktype && src->have_linktype) {
        dst->have_linktype = true;
        d->linktype = s->linktype;
    }
    if (s->packets && (d->packets == 0 || s->first_ns < d->first_ns))
        d->first_ns = s->first_ns;
    if (s->packets && (d->packets == 0 || s->last_ns > d->last_ns))
        d->last_ns = s->last_ns;
#define ADD(f) d->f += s->f
    ADD(packets); ADD(bytes); ADD(truncated); ADD(non_ip); ADD(non_tcp); ADD(ip_fragments);
    ADD(decode_errors); ADD(flows); ADD(evicted_flows); ADD(idle_closed); ADD(midstream_flows);
    ADD(requests); ADD(hdr_truncated); ADD(unknown_link); ADD(tcp_packets); ADD(abandoned);
    /* An upper bound: the workers' peaks need not coincide. */
    ADD(flows_active_max);
#undef ADD
#define ADD(f) dst->rctr.f += src->rctr.f
    ADD(retransmitted_bytes); ADD(overlap_bytes); ADD(ooo_buffered_bytes); ADD(ooo_dropped_bytes);
    ADD(gaps); ADD(gap_bytes);
#undef ADD
#define ADD(f) dst->pctr.f += src->pctr.f
    ADD(parse_errors); ADD(resyncs); ADD(encrypted_flows); ADD(compressed_flows);
    ADD(inflight_dropped); ADD(streams); ADD(unanswered); ADD(probes);
#undef ADD
    for (uint32_t t = 1; t < src->ntc; t++)
        if (src->tc[t].unanswered || src->tc[t].abandoned)
            tier_count(dst, tier_map ? tier_map(ud, t) : t, src->tc[t].unanswered,
                       src->tc[t].abandoned);
}

size_t tb_engine_max_flows(const struct tb_engine *e)
{
    return e->max_flows;
}

void tb_engine_set_drops(struct tb_engine *e, uint64_t kernel_drops, uint64_t if_drops)
{
    e->st.kernel_drops = kernel_drops;
    e->st.if_drops = if_drops;
}

size_t tb_engine_flow_bytes(void)
{
    /* The struct, malloc's header, and up to two hash bucket slots (the table
     * doubles at load factor 1). Parser state is extra, once per flow that
     * carried payload: tb_engine_parser_bytes(). */
    return sizeof(struct tb_flow) + 16 + 2 * sizeof(void *);
}

size_t tb_engine_parser_bytes(void)
{
    size_t m = 0;
    for (size_t i = 0; tb_protos[i]; i++)
        m = TB_MAX(m, tb_protos[i]->state_size);
    return m;
}
