/* SPDX-License-Identifier: MIT */
/* proto-util.c — the in-flight request queue and the line assembler shared by
 * the protocol parsers (see proto-int.h). */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"

_Static_assert((TB__PQ_MAX & (TB__PQ_MAX - 1)) == 0, "the ring's capacity wraps by masking");

struct tb__pend *tb__pq_push_slow(struct tb__pq *q, struct tb_proto_counters *ctr, int64_t ts)
{
    uint32_t seq = q->next_seq++;
    if (q->untracked > 0 || q->len == TB__PQ_MAX)
        goto drop;
    if (q->len == q->cap) {
        uint32_t ncap = q->cap ? q->cap * 2 : 4;
        if (ncap > TB__PQ_MAX)
            ncap = TB__PQ_MAX;
        struct tb__pend *nv = malloc((size_t)ncap * sizeof *nv);
        char *nt = NULL;
        if (!nv || (q->txt && !(nt = malloc((size_t)ncap * TB__CLASS_MAX)))) {
            free(nv);
            goto drop;
        }
        /* Unroll the ring into the new array so head is 0 again; the class
         * texts move with their entries. */
        for (uint32_t i = 0; i < q->len; i++) {
            uint32_t at = (q->head + i) & (q->cap - 1);
            nv[i] = q->v[at];
            if (nt)
                memcpy(nt + (size_t)i * TB__CLASS_MAX, q->txt + (size_t)at * TB__CLASS_MAX,
                       nv[i].class_len);
        }
        free(q->v);
        free(q->txt);
        q->v = nv;
        q->txt = nt;
        q->cap = ncap;
        q->head = 0;
    }
    struct tb__pend *e = &q->v[(q->head + q->len) & (q->cap - 1)];
    q->len++;
    memset(e, 0, sizeof *e);
    e->seq = seq;
    e->arrival_ns = ts;
    return e;
drop:
    q->untracked++;
    if (ctr)
        ctr->inflight_dropped++;
    return NULL;
}

char *tb__pq_cls_alloc(struct tb__pq *q, const struct tb__pend *e)
{
    /* Entries exist only once the ring does: cap > 0 here. Not zeroed: a
     * text is written before its length says it is there. */
    if (!q->txt && !(q->txt = malloc((size_t)q->cap * TB__CLASS_MAX)))
        return NULL;
    return q->txt + (size_t)(e - q->v) * TB__CLASS_MAX;
}

struct tb__pend *tb__pq_find_any(struct tb__pq *q, uint32_t seq)
{
    for (uint32_t i = 0; i < q->len; i++) {
        struct tb__pend *e = &q->v[(q->head + i) & (q->cap - 1)];
        if (e->seq == seq)
            return e;
    }
    return NULL;
}

void tb__pq_clear(struct tb__pq *q)
{
    q->len = 0;
    q->head = 0;
    q->untracked = 0;
}

void tb__pq_free(struct tb__pq *q)
{
    free(q->v);
    free(q->txt);
    memset(q, 0, sizeof *q);
}

uint32_t tb__pq_waiting(const struct tb__pq *q)
{
    uint32_t n = q->untracked;
    for (uint32_t i = 0; i < q->len; i++)
        if (!q->v[(q->head + i) & (q->cap - 1)].resp_seen)
            n++;
    return n;
}

void tb__pend_emit(const struct tb__pend *e, const struct tb_proto_ctx *ctx, int32_t status,
                   uint32_t extra_flags, const char *cls, size_t cls_len)
{
    tb__pend_emit_id(e, ctx, status, extra_flags, cls, cls_len, NULL);
}


void tb__pq_emit_head(struct tb__pq *q, const struct tb_proto_ctx *ctx, int32_t status,
                      uint32_t extra_flags, const char *cls, size_t cls_len)
{
    struct tb__pend *e = tb__pq_head(q);
    if (!e) {
        tb__pq_pop(q);
        return;
    }
    /* Popped after the emit: the entry (and the class it may hold) stays valid
     * through the callback, and nothing is pushed meanwhile. */
    if (!cls) {
        /* tb__pq_text(q, e), the head's position known. */
        cls = e->class_len && q->txt ? q->txt + (size_t)q->head * TB__CLASS_MAX : NULL;
        cls_len = e->class_len;
    }
    tb__pend_emit(e, ctx, status, extra_flags, cls, cls_len);
    tb__pq_pop(q);
}

int tb__line_take_any(struct tb__line *l, const uint8_t **pp, const uint8_t *end, size_t max,
                      int64_t ts, const char **line, size_t *llen, uint64_t *raw, int64_t *ts0)
{
    const uint8_t *p = *pp;
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    if (l->skipping) {
        if (!nl) {
            *pp = end;
            return TB__LINE_MORE;
        }
        *pp = nl + 1;
        l->skipping = false;
        l->len = 0;
        if (nl + 1 == end)
            return TB__LINE_MORE;
        p = nl + 1;
        nl = memchr(p, '\n', (size_t)(end - p));
    }
    if (l->len == 0)
        l->first_ts = ts;
    size_t take = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    if (l->len == 0 && nl) {
        /* Whole line in this chunk: no copy. */
        size_t n = (size_t)(nl - p);
        *pp = nl + 1;
        if (n > max) {
            return TB__LINE_LONG;
        }
        if (n > 0 && p[n - 1] == '\r')
            n--;
        *line = (const char *)p;
        *llen = n;
        *raw = take;
        *ts0 = ts;
        return TB__LINE_OK;
    }
    if ((size_t)l->len + take > max + 1) {
        /* Too long: forget what was kept, drop the rest up to the LF. */
        l->len = 0;
        *pp = p + take;
        l->skipping = !nl;
        return TB__LINE_LONG;
    }
    if (l->cap < (size_t)l->len + take) {
        size_t ncap = l->cap ? l->cap : 256;
        while (ncap < (size_t)l->len + take)
            ncap *= 2;
        if (ncap > max + 1)
            ncap = max + 1;
        char *nb = realloc(l->buf, ncap);
        if (!nb) {
            l->len = 0;
            *pp = p + take;
            l->skipping = !nl;
            return TB__LINE_NOMEM;
        }
        l->buf = nb;
        l->cap = (uint32_t)ncap;
    }
    memcpy(l->buf + l->len, p, take);
    l->len += (uint32_t)take;
    *pp = p + take;
    if (!nl)
        return TB__LINE_MORE;
    size_t n = l->len - 1; /* without LF */
    if (n > 0 && l->buf[n - 1] == '\r')
        n--;
    *line = l->buf;
    *llen = n;
    *raw = l->len;
    *ts0 = l->first_ts;
    l->len = 0;
    return TB__LINE_OK;
}

void tb__line_free(struct tb__line *l)
{
    free(l->buf);
    memset(l, 0, sizeof *l);
}
