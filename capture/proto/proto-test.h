/* SPDX-License-Identifier: MIT */
/* proto-test.h — test and fuzz helper: drives one parser descriptor over
 * hand-built byte sequences and records every exchange it emits. */
#ifndef TB_PROTO_TEST_H
#define TB_PROTO_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "request.h"

#define PT_MAX_EX 256

struct pt_ex {
    int64_t arr, dep;
    uint64_t rq, rs;
    int32_t status;
    uint32_t flags;
    char cls[600];
};

/* A stand-in for the catalog, for the tb_exchange.class_id contract: ids
 * are given to class texts in turn, and an id a parser hands back must name
 * the text it comes with (else the engine would file the request under
 * another class). PT_CLASSES texts of at most PT_CLASS_LEN bytes; others get
 * no id. */
#define PT_CLASSES 32
#define PT_CLASS_LEN 128
struct pt_class {
    size_t len;
    char text[PT_CLASS_LEN];
};

struct pt {
    const struct tb_proto *pr;
    struct pt_class classes[PT_CLASSES];
    uint32_t nclasses;
    size_t ids_reused; /* exchanges whose id came from the parser's memory */
    void *st;
    struct tb_proto_counters ctr;
    struct tb_proto_ctx ctx;
    struct pt_ex v[PT_MAX_EX];
    size_t n;       /* recorded (at most PT_MAX_EX) */
    size_t emitted; /* all emits */
    int last;       /* last pstate returned */
};

static inline void pt_emit(void *ud, const struct tb_exchange *ex)
{
    struct pt *t = ud;
    t->emitted++;
    if (ex->class_len > 0 && !ex->class_text)
        abort(); /* a parser bug the fuzzers should find */
    if (ex->class_len > 0 && memchr(ex->class_text, '\0', ex->class_len))
        abort(); /* a NUL inside the class would cut it in the catalog */
    if (ex->class_id && *ex->class_id) {
        uint32_t id = *ex->class_id;
        if (id > t->nclasses || t->classes[id - 1].len != ex->class_len ||
            (ex->class_len && memcmp(t->classes[id - 1].text, ex->class_text, ex->class_len)))
            abort(); /* a remembered id that names another text */
        t->ids_reused++;
    } else if (ex->class_id && ex->class_len <= PT_CLASS_LEN) {
        uint32_t id = 0;
        for (uint32_t i = 0; i < t->nclasses && !id; i++)
            if (t->classes[i].len == ex->class_len &&
                (!ex->class_len || memcmp(t->classes[i].text, ex->class_text, ex->class_len) == 0))
                id = i + 1;
        if (!id && t->nclasses < PT_CLASSES) {
            struct pt_class *c = &t->classes[t->nclasses++];
            c->len = ex->class_len;
            if (ex->class_len)
                memcpy(c->text, ex->class_text, ex->class_len);
            id = t->nclasses;
        }
        *ex->class_id = id; /* as the engine does; 0 (none) when the table is full */
    }
    if (t->n >= PT_MAX_EX)
        return;
    struct pt_ex *e = &t->v[t->n++];
    e->arr = ex->arrival_ns;
    e->dep = ex->departure_ns;
    e->rq = ex->req_bytes;
    e->rs = ex->resp_bytes;
    e->status = ex->status;
    e->flags = ex->flags;
    /* No class is NULL with length 0 (tb_exchange), which memcpy may not take. */
    size_t k = !ex->class_text ? 0 : ex->class_len < sizeof e->cls - 1 ? ex->class_len
                                                                       : sizeof e->cls - 1;
    if (k)
        memcpy(e->cls, ex->class_text, k);
    e->cls[k] = '\0';
}

static inline struct pt *pt_new(const struct tb_proto *pr, bool midstream)
{
    struct pt *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    t->pr = pr;
    t->st = calloc(1, pr->state_size);
    if (!t->st)
        abort();
    t->ctx.emit = pt_emit;
    t->ctx.ud = t;
    t->ctx.ctr = &t->ctr;
    pr->init(t->st, midstream);
    return t;
}

static inline void pt_free(struct pt *t)
{
    t->pr->fini(t->st);
    free(t->st);
    free(t);
}

/* Feeds n bytes as chunks of `step` bytes (0 = one chunk), all stamped ts. */
static inline int pt_feed_split(struct pt *t, int dir, const void *p, size_t n, int64_t ts,
                                size_t step)
{
    const uint8_t *b = p;
    if (step == 0)
        step = n ? n : 1;
    for (size_t off = 0; off < n; off += step) {
        size_t k = n - off < step ? n - off : step;
        t->last = t->pr->consume(t->st, &t->ctx, (enum tb_dir)dir, b + off, k, ts);
    }
    return t->last;
}

static inline int pt_feed(struct pt *t, int dir, const void *p, size_t n, int64_t ts)
{
    return pt_feed_split(t, dir, p, n, ts, 0);
}

static inline int pt_str(struct pt *t, int dir, const char *s, int64_t ts)
{
    return pt_feed(t, dir, s, strlen(s), ts);
}

static inline int pt_gap(struct pt *t, int dir, uint64_t len, int64_t ts)
{
    t->last = t->pr->gap(t->st, &t->ctx, (enum tb_dir)dir, len, ts);
    return t->last;
}

static inline void pt_close(struct pt *t, int fin_dir, int64_t ts)
{
    t->pr->close(t->st, &t->ctx, fin_dir, ts);
}

/* Sorted (non-decreasing) times: is t among the first n? */
static inline bool pt_has_time(const int64_t *v, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == t;
}

/* Aborts with the broken promise named (the replay build prints it; libFuzzer
 * keeps the input). */
static inline void pt_broken(const char *what, size_t i, const struct pt_ex *e)
{
    fprintf(stderr, "pt_fuzz_drive: exchange %zu breaks \"%s\" (arrival %lld departure %lld "
                    "req %llu resp %llu status %d flags %#x class \"%.80s\")\n",
            i, what, (long long)e->arr, (long long)e->dep, (unsigned long long)e->rq,
            (unsigned long long)e->rs, (int)e->status, (unsigned)e->flags, e->cls);
    abort();
}

/* Fuzz driver. Input: seed(1) split(2, LE) client-bytes server-bytes. The
 * two streams are fed in interleaved chunks of pseudo-random sizes, with
 * occasional holes (bytes skipped and reported as a gap, of known or unknown
 * length, at a known capture time or TB_TS_UNKNOWN), then closed. Checks, in
 * every build (the plain replay too), what proto.h promises of every parser:
 *  - an arrival is the time of a client chunk (or of a client hole whose time
 *    was given), a departure that of a server chunk or server hole with a
 *    time: an unknown time never moves either, and close() invents none;
 *  - arrival <= departure, and arrivals come in request order (unless the
 *    protocol is multiplexed);
 *  - the recorded exchanges' request bytes add up to at most the client
 *    stream's length, their response bytes to at most the server's;
 *  - flags are known bits; a status is -1 or more; a class is shorter than
 *    the parsers' class cap, has no NUL inside and is never NULL with a
 *    length (checked in pt_emit). */
static inline void pt_fuzz_drive(const struct tb_proto *pr, const uint8_t *data, size_t size)
{
    if (size < 3)
        return;
    uint32_t s = data[0] * 2654435761u + 1;
    size_t split = (size_t)(data[1] | (data[2] << 8));
    data += 3;
    size -= 3;
    if (split > size)
        split = size;
    const uint8_t *st[2] = {data, data + split};
    size_t left[2] = {split, size - split};
    const uint64_t total[2] = {split, size - split};
    /* Times at which each direction delivered bytes (at most one per byte). */
    int64_t *times[2] = {malloc((split + 1) * sizeof(int64_t)),
                         malloc((size - split + 1) * sizeof(int64_t))};
    size_t ntimes[2] = {0, 0};
    if (!times[0] || !times[1])
        abort();
    struct pt *t = pt_new(pr, (s & 0x100) != 0);
    int64_t ts = 1000;
    while (left[0] || left[1]) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        int dir = left[0] == 0 ? 1 : left[1] == 0 ? 0 : (int)(s & 1);
        size_t k = 1 + (s >> 4) % (s & 2 ? 8 : 512);
        if (k > left[dir])
            k = left[dir];
        ts += (int64_t)(s >> 28);
        if ((s & 0x70) == 0x70) {
            /* a hole: the bytes are skipped, the length told or not, the
             * time known (snaplen cut) or not (lost segment) */
            bool known = (s & 0x200) != 0;
            pt_gap(t, dir, (s & 0x80) ? k : 0, known ? ts : TB_TS_UNKNOWN);
            if (known)
                times[dir][ntimes[dir]++] = ts;
        } else {
            pt_feed(t, dir, st[dir], k, ts);
            times[dir][ntimes[dir]++] = ts;
        }
        st[dir] += k;
        left[dir] -= k;
        if (t->last == TB_PS_STOP)
            break;
    }
    pt_close(t, (int)(s & 1) - (int)((s >> 1) & 1), ts + 1);
    const uint32_t known_flags = TB_REQ_GAP | TB_REQ_TRUNC | TB_REQ_MIDSTREAM | TB_REQ_NORESP |
                                 TB_REQ_CLOSE_DELIM;
    uint64_t rq = 0, rs = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct pt_ex *e = &t->v[i];
        if (e->dep < e->arr)
            pt_broken("arrival <= departure", i, e);
        if (!pt_has_time(times[0], ntimes[0], e->arr))
            pt_broken("arrival is the time of a client chunk", i, e);
        if (!pt_has_time(times[1], ntimes[1], e->dep))
            pt_broken("departure is the time of a server chunk", i, e);
        if (i && e->arr < t->v[i - 1].arr && !pr->multiplexed)
            pt_broken("arrivals in request order", i, e);
        if (e->flags & ~known_flags)
            pt_broken("known flags only", i, e);
        if (e->status < -1)
            pt_broken("status -1 or more", i, e);
        if (strlen(e->cls) >= 512)
            pt_broken("class shorter than the class cap", i, e);
        rq += e->rq;
        rs += e->rs;
        if (rq > total[0])
            pt_broken("request bytes within the client stream", i, e);
        if (rs > total[1])
            pt_broken("response bytes within the server stream", i, e);
    }
    free(times[0]);
    free(times[1]);
    pt_free(t);
}

#endif
