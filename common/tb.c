/* SPDX-License-Identifier: MIT */
/* tb.c — error strings, logging, duration/time parsing, connection record names. */
#include "tb.h"
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_log_verbosity = 0;

const char *tb_strerror(int err)
{
    switch (err) {
    case TB_OK:
        return "success";
#define TB__ERR_STR(name, msg) \
    case TB_E_##name:          \
        return msg;
        TB_ERR_MAP(TB__ERR_STR)
#undef TB__ERR_STR
    default:
        return "unknown error";
    }
}

TB_PRINTF(2, 0) static void vlog(const char *level, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    /* One line per message, whatever the caller passed. */
    for (char *p = line; *p; p++)
        if (*p == '\n')
            *p = ' ';
    fprintf(stderr, "tbneck: %s%s\n", level, line);
}

void tb_log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

void tb_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("warning: ", fmt, ap);
    va_end(ap);
}

void tb_log_info(const char *fmt, ...)
{
    if (tb_log_verbosity < 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

static const struct {
    const char *suffix;
    int64_t ns;
} units[] = {
    {"ns", 1}, {"us", 1000}, {"µs", 1000}, {"ms", TB_NS_PER_MS}, {"s", TB_NS_PER_SEC},
    {"m", 60 * TB_NS_PER_SEC}, {"min", 60 * TB_NS_PER_SEC}, {"h", 3600 * TB_NS_PER_SEC},
};

int tb_parse_duration(const char *s, int64_t unit_ns, int64_t *out_ns)
{
    if (!s || !*s)
        return TB_E_INVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return TB_E_INVAL;
    int64_t mul = unit_ns;
    if (*end) {
        mul = 0;
        for (size_t i = 0; i < TB_ARRAY_SIZE(units); i++)
            if (strcmp(end, units[i].suffix) == 0)
                mul = units[i].ns;
        if (!mul)
            return TB_E_INVAL;
    }
    double ns = v * (double)mul;
    if (ns >= 9.2e18)
        return TB_E_INVAL;
    *out_ns = (int64_t)llround(ns);
    return 0;
}

int tb_parse_window(const char *s, int64_t *out_ns)
{
    int64_t ns;
    if (tb_parse_duration(s, TB_NS_PER_MS, &ns) != 0 || ns < TB_WINDOW_MIN_NS ||
        ns > TB_WINDOW_MAX_NS)
        return TB_E_INVAL;
    *out_ns = ns;
    return 0;
}

int tb_parse_time(const char *s, int64_t base_ns, int64_t *out_ns)
{
    if (!s || !*s)
        return TB_E_INVAL;
    if (*s == '+') {
        int64_t off;
        int rc = tb_parse_duration(s + 1, TB_NS_PER_SEC, &off);
        if (rc)
            return rc;
        if (base_ns > INT64_MAX - off)
            return TB_E_INVAL;
        *out_ns = base_ns + off;
        return 0;
    }
    /* A plain integer of 13+ digits is ns since the epoch; otherwise seconds. */
    char *end;
    errno = 0;
    long long iv = strtoll(s, &end, 10);
    if (!errno && *end == '\0' && strlen(s) >= 13) {
        *out_ns = iv;
        return 0;
    }
    /* Seconds with an optional fraction, parsed as integers: a double would
     * lose the nanoseconds of a present-day timestamp. */
    errno = 0;
    long long sec = strtoll(s, &end, 10);
    if (end == s || errno || sec < 0 || sec > INT64_C(9200000000))
        return TB_E_INVAL;
    int64_t frac = 0;
    if (*end == '.') {
        const char *q = end + 1;
        int digits = 0;
        while (*q >= '0' && *q <= '9') {
            if (digits < 9) {
                frac = frac * 10 + (*q - '0');
                digits++;
            }
            q++;
        }
        if (q == end + 1)
            return TB_E_INVAL;
        for (; digits < 9; digits++)
            frac *= 10;
        end = (char *)q;
    }
    if (*end)
        return TB_E_INVAL;
    *out_ns = (int64_t)sec * TB_NS_PER_SEC + frac;
    return 0;
}

const char *tb_fmt_duration(int64_t ns, char *buf, size_t len)
{
    int64_t a = ns < 0 ? -ns : ns;
    if (a >= TB_NS_PER_SEC && a % TB_NS_PER_MS == 0 && a % TB_NS_PER_SEC != 0)
        snprintf(buf, len, "%gs", (double)ns / 1e9);
    else if (a >= TB_NS_PER_SEC)
        snprintf(buf, len, "%gs", (double)ns / 1e9);
    else if (a >= TB_NS_PER_MS)
        snprintf(buf, len, "%gms", (double)ns / 1e6);
    else if (a >= 1000)
        snprintf(buf, len, "%gus", (double)ns / 1e3);
    else
        snprintf(buf, len, "%" PRId64 "ns", ns);
    return buf;
}

/* ---- connection records (conn.h) ---------------------------------------------- */

const char *tb_conn_open_name(unsigned v)
{
    static const char *const names[] = {"syn", "synack", "midstream"};
    return v < TB_ARRAY_SIZE(names) ? names[v] : "?";
}

const char *tb_conn_close_name(unsigned v)
{
    static const char *const names[] = {"open", "fin", "rst", "idle", "evicted", "end"};
    return v < TB_ARRAY_SIZE(names) ? names[v] : "?";
}
