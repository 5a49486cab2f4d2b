/* SPDX-License-Identifier: MIT */
/* buf.c — a growable byte buffer that remembers an allocation failure. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void tb_buf_init(struct tb_buf *b)
{
    memset(b, 0, sizeof *b);
}

void tb_buf_free(struct tb_buf *b)
{
    free(b->p);
    tb_buf_init(b);
}

char *tb_buf_steal(struct tb_buf *b, size_t *len)
{
    char *p = b->p;
    if (len)
        *len = b->len;
    tb_buf_init(b);
    return p;
}

/* Room for `extra` more bytes and the NUL kept after them. */
static bool reserve(struct tb_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX - b->len - 1 || tb_grow(&b->p, &b->cap, b->len + extra + 1, 1)) {
        b->oom = true;
        return false;
    }
    return true;
}

void tb_buf_add(struct tb_buf *b, const void *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0'; /* always NUL-terminated, so it can be logged or parsed as text */
}

void tb_buf_puts(struct tb_buf *b, const char *s)
{
    tb_buf_add(b, s, strlen(s));
}

void tb_buf_printf(struct tb_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        tb_buf_add(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tb_buf_trim_comma(struct tb_buf *b)
{
    if (b->len && b->p[b->len - 1] == ',')
        b->p[--b->len] = '\0';
}
