/* SPDX-License-Identifier: MIT */
/* generic.c — request/response pairing for any TCP service whose two sides
 * take turns (RFC 9293 gives the byte streams; the service defines nothing
 * we read).
 *
 * Layout assumed:  client run │ server run │ client run │ server run …
 * A request is the run of client bytes until the server answers; its response
 * is the run of server bytes until the client sends again (or the close).
 * Server bytes before any client byte (a banner) answer nothing.
 */
#include <string.h>

#include "proto-int.h"

static const char generic_class[] = "generic";

struct gen {
    bool req_live;   /* client run seen, exchange open */
    bool resp_live;  /* server has started answering it */
    uint32_t flags;
    int64_t arrival_ns, departure_ns;
    uint64_t req_bytes, resp_bytes;
    bool stopped;
};

static void gen_emit(struct gen *g, const struct tb_proto_ctx *ctx, uint32_t extra)
{
    if (g->departure_ns == TB_TS_UNKNOWN) {
        /* Only a hole answered: no time to report, and none is invented. */
        g->req_live = g->resp_live = false;
        g->flags = 0;
        return;
    }
    struct tb_exchange ex = {
        .arrival_ns = g->arrival_ns,
        .departure_ns = g->departure_ns,
        .req_bytes = g->req_bytes,
        .resp_bytes = g->resp_bytes,
        .class_text = generic_class,
        .class_len = sizeof generic_class - 1,
        .status = -1,
        .flags = g->flags | extra,
    };
    g->req_live = g->resp_live = false;
    g->flags = 0;
    if (ctx->emit)
        ctx->emit(ctx->ud, &ex);
}

static enum tb_pstate gen_consume(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                                  const uint8_t *p, size_t n, int64_t ts)
{
    struct gen *g = st;
    TB_UNUSED(p);
    if (g->stopped)
        return TB_PS_STOP;
    if (n == 0)
        return TB_PS_OK;
    if (dir == TB_DIR_C2S) {
        if (g->resp_live)
            gen_emit(g, ctx, 0); /* the client speaks again: the answer is over */
        if (!g->req_live) {
            g->req_live = true;
            g->arrival_ns = ts;
            g->req_bytes = g->resp_bytes = 0;
        }
        if (ts < g->arrival_ns)
            g->arrival_ns = ts;
        g->req_bytes += n;
    } else if (g->req_live) {
        if (!g->resp_live) {
            g->resp_live = true;
            g->departure_ns = ts;
        }
        if (ts > g->departure_ns)
            g->departure_ns = ts;
        g->resp_bytes += n;
    }
    return TB_PS_OK;
}

static enum tb_pstate gen_gap(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                              uint64_t len, int64_t ts)
{
    struct gen *g = st;
    TB_UNUSED(ctx);
    if (g->stopped)
        return TB_PS_STOP;
    /* A hole only blurs the byte counts; turns are still told by direction. */
    if (g->req_live) {
        g->flags |= TB_REQ_GAP;
        if (dir == TB_DIR_C2S && !g->resp_live)
            g->req_bytes += len;
        else if (dir == TB_DIR_S2C) {
            /* A lost segment's hole has no time of its own (TB_TS_UNKNOWN):
             * the departure stays with the response bytes actually captured,
             * and an answer lost whole is not reported. */
            if (!g->resp_live) {
                g->resp_live = true;
                g->departure_ns = TB_TS_UNKNOWN;
            }
            g->resp_bytes += len;
            if (ts != TB_TS_UNKNOWN && ts > g->departure_ns)
                g->departure_ns = ts;
        }
    }
    return TB_PS_OK;
}

static void gen_close(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts)
{
    struct gen *g = st;
    TB_UNUSED(fin_dir);
    TB_UNUSED(ts);
    if (!g->stopped && g->resp_live)
        gen_emit(g, ctx, 0);
    g->stopped = true;
}

static void gen_init(void *st, bool midstream)
{
    struct gen *g = st;
    TB_UNUSED(midstream);
    memset(g, 0, sizeof *g);
}

static void gen_fini(void *st) { TB_UNUSED(st); }

/* Anything can be a generic exchange; it comes last in the table. */
static enum tb_detect gen_detect(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent)
{
    TB_UNUSED(p);
    TB_UNUSED(n);
    *client_sent = dir == TB_DIR_C2S;
    return TB_DETECT_YES;
}

static const uint16_t gen_ports[] = {0};

const struct tb_proto tb_proto_generic = {
    .name = "generic",
    .ports = gen_ports,
    .state_size = sizeof(struct gen),
    .detect = gen_detect,
    .init = gen_init,
    .consume = gen_consume,
    .gap = gen_gap,
    .close = gen_close,
    .fini = gen_fini,
};
