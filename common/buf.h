/* SPDX-License-Identifier: MIT */
/* buf.h — a growable byte buffer: HTTP responses, JSON documents (json.h). */
#ifndef TB_BUF_H
#define TB_BUF_H

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

#endif
