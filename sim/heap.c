/* SPDX-License-Identifier: MIT */
/* heap.c — the simulator's event queue: a binary min-heap on (time, seq). */
#include <stdlib.h>

#include "sim.h"
#include "sort.h"

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

TB_HEAP_DEFINE(event_heap, struct sim_event, before)

int sim_heap_push(struct sim_heap *h, int64_t t, uint32_t kind, void *obj, uint32_t gen)
{
    struct sim_event e = {.t = t, .seq = h->next_seq, .obj = obj, .kind = kind, .gen = gen};
    int rc = event_heap_push(&h->v, &h->n, &h->cap, &e);
    if (rc == 0)
        h->next_seq++;
    return rc;
}

const struct sim_event *sim_heap_peek(const struct sim_heap *h)
{
    return h->n ? &h->v[0] : NULL;
}

bool sim_heap_pop(struct sim_heap *h, struct sim_event *out)
{
    if (h->n == 0)
        return false;
    event_heap_pop(h->v, &h->n, out);
    return true;
}
