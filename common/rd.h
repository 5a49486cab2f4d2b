/* SPDX-License-Identifier: MIT */
/* rd.h — the checked byte reader every parser reads wire bytes through.
 *
 * Each getter checks what remains before it reads and returns false, leaving
 * the cursor unchanged, when the bytes are not there. "Not there" is the
 * truncated case; whether the bytes that are there make sense is the caller's
 * (the invalid case), as in tcpdump's split of the two. */
#ifndef TB_RD_H
#define TB_RD_H

#include <string.h>
#include "tb.h"

struct tb_rd {
    const uint8_t *p;
    const uint8_t *end;
};

static inline struct tb_rd tb_rd_make(const uint8_t *p, size_t n)
{
    struct tb_rd r = {p, p + n};
    return r;
}
static inline size_t tb_rd_left(const struct tb_rd *r) { return (size_t)(r->end - r->p); }
static inline bool tb_rd_has(const struct tb_rd *r, size_t n) { return (size_t)(r->end - r->p) >= n; }

/* Unchecked big-endian loads, for a caller that has checked once that a whole
 * fixed header is present and then reads its fields in place (the decoder's
 * fast path). Everything else reads through the checked getters below. */
static inline uint16_t tb_load_be16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t tb_load_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline bool tb_rd_skip(struct tb_rd *r, size_t n)
{
    if (!tb_rd_has(r, n))
        return false;
    r->p += n;
    return true;
}

static inline bool tb_rd_u8(struct tb_rd *r, uint8_t *v)
{
    if (!tb_rd_has(r, 1))
        return false;
    *v = r->p[0];
    r->p += 1;
    return true;
}

static inline bool tb_rd_be16(struct tb_rd *r, uint16_t *v)
{
    if (!tb_rd_has(r, 2))
        return false;
    *v = (uint16_t)((r->p[0] << 8) | r->p[1]);
    r->p += 2;
    return true;
}

static inline bool tb_rd_be32(struct tb_rd *r, uint32_t *v)
{
    if (!tb_rd_has(r, 4))
        return false;
    *v = ((uint32_t)r->p[0] << 24) | ((uint32_t)r->p[1] << 16) | ((uint32_t)r->p[2] << 8) |
         r->p[3];
    r->p += 4;
    return true;
}

static inline bool tb_rd_le16(struct tb_rd *r, uint16_t *v)
{
    if (!tb_rd_has(r, 2))
        return false;
    *v = (uint16_t)(r->p[0] | (r->p[1] << 8));
    r->p += 2;
    return true;
}

static inline bool tb_rd_le24(struct tb_rd *r, uint32_t *v)
{
    if (!tb_rd_has(r, 3))
        return false;
    *v = (uint32_t)r->p[0] | ((uint32_t)r->p[1] << 8) | ((uint32_t)r->p[2] << 16);
    r->p += 3;
    return true;
}

static inline bool tb_rd_le32(struct tb_rd *r, uint32_t *v)
{
    if (!tb_rd_has(r, 4))
        return false;
    *v = (uint32_t)r->p[0] | ((uint32_t)r->p[1] << 8) | ((uint32_t)r->p[2] << 16) |
         ((uint32_t)r->p[3] << 24);
    r->p += 4;
    return true;
}

static inline bool tb_rd_le64(struct tb_rd *r, uint64_t *v)
{
    uint32_t lo, hi;
    struct tb_rd save = *r;
    if (!tb_rd_le32(r, &lo) || !tb_rd_le32(r, &hi)) {
        *r = save;
        return false;
    }
    *v = ((uint64_t)hi << 32) | lo;
    return true;
}

static inline bool tb_rd_bytes(struct tb_rd *r, void *dst, size_t n)
{
    if (!tb_rd_has(r, n))
        return false;
    memcpy(dst, r->p, n);
    r->p += n;
    return true;
}

/* MySQL length-encoded integer (0xfb = NULL is reported as false with *isnull). */
static inline bool tb_rd_lenenc(struct tb_rd *r, uint64_t *v, bool *isnull)
{
    struct tb_rd save = *r;
    uint8_t b;
    if (isnull)
        *isnull = false;
    if (!tb_rd_u8(r, &b))
        return false;
    if (b < 0xfb) {
        *v = b;
        return true;
    }
    if (b == 0xfb) {
        if (isnull)
            *isnull = true;
        *v = 0;
        return true;
    }
    if (b == 0xfc) {
        uint16_t x;
        if (!tb_rd_le16(r, &x))
            goto trunc;
        *v = x;
        return true;
    }
    if (b == 0xfd) {
        uint32_t x;
        if (!tb_rd_le24(r, &x))
            goto trunc;
        *v = x;
        return true;
    }
    if (b == 0xfe) {
        if (!tb_rd_le64(r, v))
            goto trunc;
        return true;
    }
trunc: /* 0xff is not a length; treat like a short read for the caller */
    *r = save;
    return false;
}

#endif
