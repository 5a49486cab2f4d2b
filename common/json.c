/* SPDX-License-Identifier: MIT */
/* json.c — the JSON encoder (json.h): one string and one number rule, written
 * through a small output adapter so a buffer and a stream get the same bytes. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* Where the encoder writes: a tb_buf or a FILE. */
struct out {
    struct tb_buf *b;
    FILE *f;
};

static void put(const struct out *o, const void *p, size_t n)
{
    if (o->b)
        tb_buf_add(o->b, p, n);
    else
        fwrite(p, 1, n, o->f);
}

/* Length of the well-formed UTF-8 sequence at s (2..4), or 0 when there is
 * none; s[0] >= 0x80. Reads stop at the first byte that is not a
 * continuation, so the NUL terminator is never passed. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0], min;
    size_t n;
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
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

static void json_str(const struct out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    put(o, "\"", 1);
    while (*p) {
        /* The longest run that needs no escaping goes out in one piece. */
        const unsigned char *q = p;
        while (*q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\')
            q++;
        if (q > p) {
            put(o, p, (size_t)(q - p));
            p = q;
            continue;
        }
        unsigned char c = *p;
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            put(o, esc, 2);
            p++;
        } else if (c < 0x80) { /* other control characters and DEL */
            e[1] = 'u';
            e[2] = e[3] = '0';
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            put(o, e, 6);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n) {
                put(o, p, n);
                p += n;
            } else {
                put(o, "\\ufffd", 6);
                p++;
            }
        }
    }
    put(o, "\"", 1);
}

static void json_num(const struct out *o, double v)
{
    char b[40];
    int n = isfinite(v) ? snprintf(b, sizeof b, "%.17g", v) : snprintf(b, sizeof b, "null");
    put(o, b, (size_t)n);
}

void tb_buf_json_str(struct tb_buf *b, const char *s)
{
    json_str(&(struct out){.b = b}, s);
}

void tb_buf_json_num(struct tb_buf *b, double v)
{
    json_num(&(struct out){.b = b}, v);
}

void tb_buf_json_i64(struct tb_buf *b, int64_t v)
{
    tb_buf_printf(b, "%" PRId64, v);
}

void tb_buf_json_knum(struct tb_buf *b, const char *key, double v)
{
    tb_buf_puts(b, key);
    tb_buf_json_num(b, v);
}

void tb_buf_json_ki64(struct tb_buf *b, const char *key, int64_t v)
{
    tb_buf_puts(b, key);
    tb_buf_json_i64(b, v);
}

void tb_buf_json_kstr(struct tb_buf *b, const char *key, const char *s)
{
    tb_buf_puts(b, key);
    tb_buf_json_str(b, s);
}

void tb_json_str(FILE *f, const char *s)
{
    json_str(&(struct out){.f = f}, s);
}

void tb_json_num(FILE *f, double v)
{
    json_num(&(struct out){.f = f}, v);
}
