/* SPDX-License-Identifier: MIT */
/* buf.h — a growable byte buffer: HTTP responses, JSON documents (json.h). */
#ifndef TB_BUF_H
#define TB_BUF_H

#include <stdint.h>
#include <string.h>

#include "tb.h"

/* The buffer remembers an allocation failure instead of reporting it on every
 * append, so a response can be built with straight-line code and checked once
 * (tb_buf_ok) before it is sent. */
struct tb_buf {
    char *p;
    size_t len, cap;
    bool oom;
};

void tb_buf_init(struct tb_buf *b);
void tb_buf_free(struct tb_buf *b);
/* Hands the bytes over to the caller (free() them); the buffer is reset. */
char *tb_buf_steal(struct tb_buf *b, size_t *len);
static inline bool tb_buf_ok(const struct tb_buf *b) { return !b->oom; }

void tb_buf_add(struct tb_buf *b, const void *s, size_t n);
void tb_buf_puts(struct tb_buf *b, const char *s);
void tb_buf_printf(struct tb_buf *b, const char *fmt, ...) TB_PRINTF(2, 3);
/* Drops a trailing ',' so loops can emit "x," for every element. */
void tb_buf_trim_comma(struct tb_buf *b);
/* Binary blobs (stored model inputs): a 64-bit value in host byte order. */
static inline void tb_buf_u64(struct tb_buf *b, uint64_t v) { tb_buf_add(b, &v, sizeof v); }

/* Reading such a blob back: a cursor over [p, end); each read copies n bytes
 * out and moves on, or is false (and moves nothing) when fewer remain. */
struct tb_rd {
    const unsigned char *p, *end;
};
static inline bool tb_rd_get(struct tb_rd *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    memcpy(dst, r->p, n);
    r->p += n;
    return true;
}
static inline bool tb_rd_u64(struct tb_rd *r, uint64_t *v) { return tb_rd_get(r, v, sizeof *v); }

#endif
