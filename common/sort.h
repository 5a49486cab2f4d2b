/* SPDX-License-Identifier: MIT */
/* sort.h — the two orderings several modules had each written for
 * themselves: a stable radix sort on a 64-bit key (event timelines in
 * analysis/) and a binary min-heap (the simulator's event queue, the
 * departures of stats/layer.c). One definition each. */
#ifndef TB_SORT_H
#define TB_SORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The key of one element, an unsigned integer: elements sort by it
 * ascending. `ctx` is passed through. */
typedef uint64_t (*tb_sort_key_fn)(const void *elem, const void *ctx);

/* Sorts n elements of `size` bytes at base by key(), stably (equal keys keep
 * their order): an LSD radix sort, 11 bits a pass, on the key less the
 * smallest key, so that only the passes the keys' spread needs are made
 * (one for a spread below 2048). key() is called once per element. Returns 0
 * or TB_E_NOMEM with base untouched. */
int tb_radix_sort(void *base, size_t n, size_t size, tb_sort_key_fn key, const void *ctx);

/* Sorts n records of `size` bytes (a multiple of 8) at base by the int64_t
 * each starts with, ascending and stably, moving the records themselves (no
 * key function, no gather at the end: the event timelines of analysis/link.c,
 * 16-byte records), in digits of up to 14 bits (three passes for a spread of
 * up to 42 bits), less any pass whose digit is the same in every key.
 * Returns 0 or TB_E_NOMEM with base untouched. */
int tb_radix_sort_i64(void *base, size_t n, size_t size);

/* A signed key mapped to an unsigned one of the same order. */
static inline uint64_t tb_sort_key_i64(int64_t v)
{
    return (uint64_t)v ^ UINT64_C(1) << 63;
}

/* TB_HEAP_DEFINE(name, T, less) defines, for an array of T ordered by
 * `bool less(const T *a, const T *b)`, a binary min-heap:
 *   void name_up(T *h, size_t i)            element i moved towards the root
 *   void name_down(T *h, size_t n, size_t i) element i moved towards the leaves
 *   int  name_push(T **h, size_t *n, size_t *cap, const T *x)  0 or TB_E_NOMEM
 *   void name_pop(T *h, size_t *n, T *out)  the least into *out (n > 0)
 * The moves shift a hole rather than swapping and stop at the first element
 * not less than the one moving, so among equals the layout — and the order
 * elements equal under less() leave in — is that of the textbook swapping
 * heap. Type-specific on purpose: the simulator's queue is its hot loop. */
#define TB_HEAP_DEFINE(name, T, less)                                                          \
    static inline void name##_up(T *h, size_t i)                                               \
    {                                                                                          \
        T x = h[i];                                                                            \
        while (i > 0) {                                                                        \
            size_t p = (i - 1) / 2;                                                            \
            if (!less(&x, &h[p]))                                                              \
                break;                                                                         \
            h[i] = h[p];                                                                       \
            i = p;                                                                             \
        }                                                                                      \
        h[i] = x;                                                                              \
    }                                                                                          \
    static inline void name##_down(T *h, size_t n, size_t i)                                   \
    {                                                                                          \
        T x = h[i];                                                                            \
        for (;;) {                                                                             \
            size_t c = 2 * i + 1;                                                              \
            if (c >= n)                                                                        \
                break;                                                                         \
            if (c + 1 < n && less(&h[c + 1], &h[c]))                                           \
                c++;                                                                           \
            if (!less(&h[c], &x))                                                              \
                break;                                                                         \
            h[i] = h[c];                                                                       \
            i = c;                                                                             \
        }                                                                                      \
        h[i] = x;                                                                              \
    }                                                                                          \
    static inline int name##_push(T **h, size_t *n, size_t *cap, const T *x)                   \
    {                                                                                          \
        int rc_ = tb_grow(h, cap, *n + 1, sizeof **h);                                         \
        if (rc_)                                                                               \
            return rc_;                                                                        \
        (*h)[*n] = *x;                                                                         \
        name##_up(*h, (*n)++);                                                                 \
        return 0;                                                                              \
    }                                                                                          \
    static inline void name##_pop(T *h, size_t *n, T *out)                                     \
    {                                                                                          \
        *out = h[0];                                                                           \
        if (--*n) {                                                                            \
            h[0] = h[*n];                                                                      \
            name##_down(h, *n, 0);                                                             \
        }                                                                                      \
    }

#endif
