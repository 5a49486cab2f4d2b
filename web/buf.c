/* SPDX-License-Identifier: MIT */
/* buf.c — growable byte buffer and JSON emitters for the web server. */
#include "buf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static bool reserve(struct tb_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->cap - b->len > extra)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
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

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        min = 0x80;
        c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        min = 0x800;
        c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the NUL terminator */
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

void tb_buf_json_str(struct tb_buf *b, const char *s)
{
    tb_buf_add(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            tb_buf_add(b, e, 2);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            tb_buf_printf(b, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            tb_buf_add(b, p, 1);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                tb_buf_puts(b, "\\ufffd");
                p++;
            } else {
                tb_buf_add(b, p, n);
                p += n;
            }
        }
    }
    tb_buf_add(b, "\"", 1);
}

void tb_buf_json_num(struct tb_buf *b, double v)
{
    if (!isfinite(v)) {
        tb_buf_puts(b, "null");
        return;
    }
    /* %.17g round-trips but bloats every point of a scatter; 9 significant
     * digits is far below the measurement error of a 50 ms window. */
    if (v == (double)(int64_t)v && fabs(v) < 1e15)
        tb_buf_printf(b, "%" PRId64, (int64_t)v);
    else
        tb_buf_printf(b, "%.9g", v);
}

void tb_buf_json_i64(struct tb_buf *b, int64_t v)
{
    tb_buf_printf(b, "%" PRId64, v);
}

void tb_buf_trim_comma(struct tb_buf *b)
{
    if (b->len && b->p[b->len - 1] == ',')
        b->p[--b->len] = '\0';
}
