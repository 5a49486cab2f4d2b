/* SPDX-License-Identifier: MIT */
/* heap.c — the simulator's event queue: a binary min-heap on (time, seq). */
#include <stdlib.h>

#include "sim.h"

static inline bool before(const struct sim_event *a, const struct sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void sim_heap_init(struct sim_heap *h)
{
    h->v = NULL;
    h->n = h->cap = 0;
    h->next_seq = 0;
}

void sim_heap_free(struct sim_heap *h)
{
    free(h->v);
    sim_heap_init(h);
}

int sim_heap_push(struct sim_heap *h, int64_t t, uint32_t kind, void *obj, uint32_t gen)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct sim_event *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return TB_E_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    struct sim_event e = {.t = t, .seq = h->next_seq++, .obj = obj, .kind = kind, .gen = gen};
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = e;
    return 0;
}

const struct sim_event *sim_heap_peek(const struct sim_heap *h)
{
    return h->n ? &h->v[0] : NULL;
}

bool sim_heap_pop(struct sim_heap *h, struct sim_event *out)
{
    if (h->n == 0)
        return false;
    *out = h->v[0];
    struct sim_event last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n)
        h->v[i] = last;
    return true;
}
