/* SPDX-License-Identifier: MIT */
/* tb.c — error strings, logging, duration/time parsing, connection record names. */
#include "tb.h"
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    {"d", 86400 * TB_NS_PER_SEC},
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

/* An optional ".fraction" of a second into ns (digits past the ninth are
 * read and dropped); false for a '.' without digits. The cursor moves. */
static bool fraction(const char **p, int64_t *ns)
{
    const char *q = *p;
    int64_t frac = 0;
    if (*q == '.') {
        q++;
        int nd = 0;
        for (; *q >= '0' && *q <= '9'; q++)
            if (nd < 9) {
                frac = frac * 10 + (*q - '0');
                nd++;
            }
        if (!nd)
            return false;
        for (; nd < 9; nd++)
            frac *= 10;
    }
    *ns = frac;
    *p = q;
    return true;
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
    int64_t frac;
    const char *q = end;
    if (!fraction(&q, &frac) || *q)
        return TB_E_INVAL;
    *out_ns = (int64_t)sec * TB_NS_PER_SEC + frac;
    return 0;
}

/* base +/- a duration of `s` (after the sign); false on overflow or a bad
 * duration. */
static bool add_offset(int64_t base, const char *s, int64_t *out)
{
    if (*s != '+' && *s != '-')
        return false;
    int64_t off;
    if (tb_parse_duration(s + 1, TB_NS_PER_SEC, &off) != 0)
        return false;
    if (*s == '-')
        off = -off;
    if ((off > 0 && base > INT64_MAX - off) || (off < 0 && base < INT64_MIN - off))
        return false;
    *out = base + off;
    return true;
}

/* `n` digits into *v; the cursor moves past them. */
static bool digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return false;
        x = x * 10 + (c - '0');
    }
    *p += n;
    *v = x;
    return true;
}

/* "HH:MM:SS[.fraction]" into seconds of the day and ns; the cursor moves. */
static bool clock_part(const char **p, int64_t *sec, int64_t *ns)
{
    int h, m, sc;
    const char *q = *p;
    if (!digits(&q, 2, &h) || *q++ != ':' || !digits(&q, 2, &m) || *q++ != ':' ||
        !digits(&q, 2, &sc) || h > 23 || m > 59 || sc > 59)
        return false;
    int64_t frac;
    if (!fraction(&q, &frac))
        return false;
    *sec = (int64_t)h * 3600 + m * 60 + sc;
    *ns = frac;
    *p = q;
    return true;
}

/* "Z", " UTC", "UTC" or nothing: every wall-clock time here is UTC. */
static bool utc_suffix(const char *q)
{
    return !*q || !strcmp(q, "Z") || !strcmp(q, " UTC") || !strcmp(q, "UTC");
}

/* "YYYY-MM-DD[( |T)HH:MM:SS[.fraction]][Z| UTC]" in UTC. */
static bool parse_datetime(const char *s, int64_t *out)
{
    const char *q = s;
    int y, mo, d;
    if (!digits(&q, 4, &y) || *q++ != '-' || !digits(&q, 2, &mo) || *q++ != '-' ||
        !digits(&q, 2, &d))
        return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d};
    int64_t sec = 0, ns = 0;
    if ((*q == ' ' || *q == 'T') && q[1] >= '0' && q[1] <= '9') {
        q++;
        if (!clock_part(&q, &sec, &ns))
            return false;
    }
    if (!utc_suffix(q))
        return false;
    time_t day = timegm(&tm);
    /* timegm normalizes 2023-02-30 to March 2nd: refuse a date that moved. */
    if (day == (time_t)-1 || tm.tm_year != y - 1900 || tm.tm_mon != mo - 1 || tm.tm_mday != d)
        return false;
    int64_t t = (int64_t)day + sec;
    if (t < 0 || t > INT64_C(9200000000))
        return false;
    *out = t * TB_NS_PER_SEC + ns;
    return true;
}

bool tb_time_needs_span(const char *s)
{
    if (!s)
        return false;
    if (*s == '+' || !strncmp(s, "start", 5) || !strncmp(s, "end", 3))
        return true;
    /* A time of day: "HH:" first. */
    return s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && s[2] == ':';
}

int tb_parse_time_ref(const char *s, const struct tb_time_ref *ref, int64_t *out_ns)
{
    if (!s || !*s)
        return TB_E_INVAL;
    static const struct {
        const char *name;
        size_t off;
    } anchors[] = {
        {"now", offsetof(struct tb_time_ref, now_ns)},
        {"start", offsetof(struct tb_time_ref, start_ns)},
        {"end", offsetof(struct tb_time_ref, end_ns)},
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(anchors); i++) {
        size_t n = strlen(anchors[i].name);
        if (strncmp(s, anchors[i].name, n) != 0)
            continue;
        int64_t base;
        memcpy(&base, (const char *)ref + anchors[i].off, sizeof base);
        if (!s[n]) {
            *out_ns = base;
            return 0;
        }
        return add_offset(base, s + n, out_ns) ? 0 : TB_E_INVAL;
    }
    if (*s == '+')
        return add_offset(ref->start_ns, s, out_ns) ? 0 : TB_E_INVAL;
    if (tb_time_needs_span(s)) {
        const char *q = s;
        int64_t sec, ns;
        if (!clock_part(&q, &sec, &ns) || !utc_suffix(q))
            return TB_E_INVAL;
        /* The occurrence of that time of day in [start - 1h, start + 23h):
         * a capture that crosses midnight reads on into the next day. */
        int64_t day_ns = 86400 * TB_NS_PER_SEC;
        int64_t lo = ref->start_ns - 3600 * TB_NS_PER_SEC;
        int64_t midnight = lo - ((lo % day_ns) + day_ns) % day_ns;
        int64_t t = midnight + sec * TB_NS_PER_SEC + ns;
        if (t < lo)
            t += day_ns;
        *out_ns = t;
        return 0;
    }
    if (strlen(s) >= 10 && s[4] == '-')
        return parse_datetime(s, out_ns) ? 0 : TB_E_INVAL;
    return tb_parse_time(s, ref->start_ns, out_ns);
}

const char *tb_fmt_double(double v, char *buf, size_t len)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

const char *tb_fmt_iso(int64_t ns, char *buf, size_t len)
{
    int64_t sec = ns / TB_NS_PER_SEC, frac = ns % TB_NS_PER_SEC;
    if (frac < 0) {
        frac += TB_NS_PER_SEC;
        sec--;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(buf, len, "?");
        return buf;
    }
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRId64 "Z", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
    return buf;
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
