/* SPDX-License-Identifier: MIT */
/* fuzz_http_parse.c — libFuzzer harness for the web server's request head
 * parser (web/http_parse.c), the query string reader and the Host check: the
 * input is what a client sent. Promises checked (http-int.h): the result is
 * 0, a head length within the input, or one of the documented error
 * statuses; a valid head's pointers stay inside it and its fields within
 * their limits; every proper prefix of a valid head needs more bytes (0),
 * and a prefix of an invalid input is 0 or already the same error (errors
 * show as soon as their bytes have arrived, and never change). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool known(long r)
{
    return r == -400 || r == -413 || r == -414 || r == -431 || r == -501 || r == -505;
}

static bool inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy: the parser must not read past n (ASan sees to it). */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct tb_http_head h;
    long r = tb_http_parse_head(buf, size, &h);
    if (r > 0) {
        size_t len = (size_t)r;
        if (len > size || len > TB_HTTP_HEAD_MAX)
            abort();
        if (!inside(h.target, h.target_len, buf, len) || h.target_len > TB_HTTP_URL_MAX)
            abort();
        if (h.host && !inside(h.host, h.host_len, buf, len))
            abort();
        if ((h.minor != 0 && h.minor != 1) || h.content_length > TB_HTTP_BODY_MAX)
            abort();
        if (h.minor == 1 && !h.host)
            abort(); /* HTTP/1.1 requires one Host */
        char q[256];
        const char *qm = memchr(h.target, '?', h.target_len);
        if (qm) {
            /* The query as the API reads it: NUL-terminated, bounded. */
            char query[TB_HTTP_URL_MAX + 1];
            size_t ql = h.target_len - (size_t)(qm + 1 - h.target);
            memcpy(query, qm + 1, ql);
            query[ql] = '\0';
            int g = tb_http_query_get(query, "tier", q, sizeof q);
            if (g == 1 && strlen(q) >= sizeof q)
                abort();
        }
        if (h.host)
            (void)tb_http_host_allowed(h.host, h.host_len, NULL, 0);
    } else if (r < 0 && !known(r)) {
        abort();
    }
    /* Prefixes: a few cut points spread over the input. */
    size_t lim = r > 0 ? (size_t)r : size;
    for (size_t k = 1; k < lim && k <= 16; k++) {
        size_t cut = lim * k / 17;
        struct tb_http_head hp;
        long rp = tb_http_parse_head(buf, cut, &hp);
        if (r > 0 && rp != 0)
            abort(); /* a valid head's prefix is only incomplete */
        if (r == 0 && rp != 0)
            abort(); /* nothing wrong in the whole: nothing wrong in a part */
        if (r < 0 && rp != 0 && rp != r && rp != -431 && r != -431)
            abort(); /* an error, once shown, is the error */
    }
    free(buf);
    return 0;
}
