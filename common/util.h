/* SPDX-License-Identifier: MIT */
/* util.h — the small helpers every module had written for itself: a checked
 * growing array, qsort comparators, the nearest-rank quantile and Pearson's
 * correlation. One definition each, so two modules cannot answer the same
 * question differently. */
#ifndef TB_UTIL_H
#define TB_UTIL_H

#include <stdio.h>

#include "tb.h"

/* Makes room for `need` elements of `elem` bytes in the malloc'd array *pp
 * (a T ** passed as void *) of capacity *cap elements: the capacity doubles,
 * from 16, until it holds them. Sizes are checked for overflow. Returns 0, or
 * TB_E_NOMEM with *pp and *cap untouched. */
int tb_grow(void *pp, size_t *cap, size_t need, size_t elem);
/* The same, and the elements it adds (from the old capacity to the new) are
 * zero bytes: for arrays indexed by an id that grow to the largest id seen. */
int tb_grow_zero(void *pp, size_t *cap, size_t need, size_t elem);

/* A min-heap of int64 values (departure times waiting for time to pass
 * them), zero-initialised to empty; tb_i64heap_free releases its array. */
struct tb_i64heap {
    int64_t *v;
    size_t n, cap;
};
/* Adds x; TB_E_NOMEM leaves the heap as it was. */
int tb_i64heap_push(struct tb_i64heap *h, int64_t x);
/* Removes and returns the smallest value; h->n must be > 0. */
int64_t tb_i64heap_pop(struct tb_i64heap *h);
void tb_i64heap_free(struct tb_i64heap *h);

/* Entries of `size` bytes in numbered slots, a free list and a min-heap of
 * (time, tie, slot): things in flight until their time passes (requests
 * until their departure). Zero-initialised but for `size`. The three
 * arrays grow in step; slots are taken lowest first, and only once all
 * are in use, so the numbering does not depend on the growth steps. The
 * heap keeps the time beside the slot (no indirection when it is sifted).
 * Equal times leave in the order of `tie` (serial numbers: the smaller,
 * after wrapping, first) when it differs, else in an order the heap's
 * layout decides (the same for the same sequence of calls). */
struct tb_slot {
    int64_t d;
    int32_t slot;
    uint32_t tie;
};
struct tb_slots {
    char *v;
    size_t size; /* bytes per entry */
    int32_t *free;
    struct tb_slot *heap;
    size_t n, nfree, nheap; /* n: slots allocated */
};
static inline void *tb_slots_at(const struct tb_slots *p, int32_t slot)
{
    return p->v + (size_t)slot * p->size;
}
/* A free slot into *out, its entry as it was; TB_E_NOMEM leaves all as it
 * was. */
int tb_slots_take(struct tb_slots *p, int32_t *out);
/* Gives a taken slot back (it must not be in the heap). */
static inline void tb_slots_put(struct tb_slots *p, int32_t slot)
{
    p->free[p->nfree++] = slot;
}
/* Slot (taken, not in the heap) leaves at d: into the heap. */
void tb_slots_push(struct tb_slots *p, int64_t d, uint32_t tie, int32_t slot);
/* Removes p->heap[0], the first to leave (nheap > 0); its slot stays taken. */
void tb_slots_pop(struct tb_slots *p);
void tb_slots_free(struct tb_slots *p);

/* qsort comparators, ascending. NaN sorts as equal to everything: callers
 * keep NaN out. */
int tb_cmp_i64(const void *a, const void *b);
int tb_cmp_u32(const void *a, const void *b);
int tb_cmp_double(const void *a, const void *b);

/* Nearest-rank quantile of n >= 1 sorted values: the value of rank
 * ceil(q·n), clamped to [1, n] (q = 0.5 is the lower median, q = 1 the
 * maximum). */
int64_t tb_quantile_i64(const int64_t *sorted, size_t n, double q);
double tb_quantile(const double *sorted, size_t n, double q);

/* Pearson's correlation of x[i] and y[i], two passes (means, then centred
 * sums) so that large, nearly constant values keep their accuracy. NAN with
 * fewer than 3 pairs or a constant series. */
double tb_pearson(const double *x, const double *y, size_t n);

/* Writes `len` bytes at s as one CSV field, quoted per RFC 4180 when they
 * hold a comma, a quote or a line break (quotes then doubled). */
void tb_csv_field_n(FILE *f, const char *s, size_t len);
/* The same for a string. */
void tb_csv_field(FILE *f, const char *s);

/* Formats a message into the caller's error buffer (cut to fit); does
 * nothing when buf is NULL or len is 0. */
TB_PRINTF(3, 4) void tb_seterr(char *buf, size_t len, const char *fmt, ...);

/* A 64-bit key mixed so that every bit of it moves every bit of the result
 * (MurmurHash3's finaliser): the slot of an open-addressing table is
 * tb_mix64(key) & mask. */
static inline uint64_t tb_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

#endif
