/* SPDX-License-Identifier: MIT */
/* buf.h — a growable byte buffer with JSON helpers, used to build HTTP responses. */
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
/* A JSON string literal, quotes included; bytes that are not valid UTF-8 are
 * replaced by U+FFFD so a class fingerprint can never break the document. */
void tb_buf_json_str(struct tb_buf *b, const char *s);
/* A JSON number; NaN and infinities (undetermined N*) become null. */
void tb_buf_json_num(struct tb_buf *b, double v);
void tb_buf_json_i64(struct tb_buf *b, int64_t v);
/* Drops a trailing ',' so loops can emit "x," for every element. */
void tb_buf_trim_comma(struct tb_buf *b);

#endif
