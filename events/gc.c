/* SPDX-License-Identifier: MIT */
/* gc.c — JVM GC log lines (JDK 9+ unified logging, JDK 8 date stamps)
 * to stop-the-world pause events with wall-clock start and end. */
#include "events.h"

#include <stdlib.h>
#include <sys/types.h>
#include <string.h>

#include "util.h"

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil): exact for every year, and free of the process's time
 * zone, which timegm()/mktime() would consult. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Exactly `n` digits at *p (bounded by end) as an integer. */
static bool fixed_digits(const char **p, const char *end, int n, int *out)
{
    if (end - *p < n)
        return false;
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static bool expect(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return false;
    (*p)++;
    return true;
}

/* "2026-11-22T01:02:03.456+0000" (also "+00:00", "Z" or no zone = UTC) to ns
 * since the epoch. *p is left after the time. */
static bool parse_iso(const char **pp, const char *end, int64_t *ns)
{
    const char *p = *pp;
    int y, mo, d, h, mi, s;
    if (!fixed_digits(&p, end, 4, &y) || !expect(&p, end, '-') || !fixed_digits(&p, end, 2, &mo) ||
        !expect(&p, end, '-') || !fixed_digits(&p, end, 2, &d) ||
        !(expect(&p, end, 'T') || expect(&p, end, ' ')) || !fixed_digits(&p, end, 2, &h) ||
        !expect(&p, end, ':') || !fixed_digits(&p, end, 2, &mi) || !expect(&p, end, ':') ||
        !fixed_digits(&p, end, 2, &s))
        return false;
    /* Times are int64 ns since the epoch, which end in April 2262: a later
     * year would overflow (found by fuzz_gclog); an earlier one than the
     * epoch is no GC log either. */
    if (y < 1970 || y > 2261 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        s > 60)
        return false;
    int64_t frac = 0;
    if (p < end && (*p == '.' || *p == ',')) {
        p++;
        int64_t place = TB_NS_PER_SEC / 10;
        if (p >= end || !is_digit(*p))
            return false;
        for (; p < end && is_digit(*p); p++) {
            frac += (*p - '0') * place;
            place /= 10;
        }
    }
    int64_t off_s = 0;
    if (p < end && (*p == '+' || *p == '-')) {
        int sign = *p == '-' ? -1 : 1;
        p++;
        int oh, om;
        if (!fixed_digits(&p, end, 2, &oh))
            return false;
        expect(&p, end, ':');
        if (!fixed_digits(&p, end, 2, &om) || oh > 23 || om > 59)
            return false;
        off_s = sign * (oh * 3600 + om * 60);
    } else if (p < end && *p == 'Z') {
        p++;
    }
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - off_s;
    *ns = secs * TB_NS_PER_SEC + frac;
    *pp = p;
    return true;
}

/* A decimal number "12.345" in [p, end), entirely, times `unit_ns` — exact to
 * the nanosecond, unlike strtod. */
static bool parse_scaled(const char *p, const char *end, int64_t unit_ns, int64_t *ns)
{
    if (p >= end)
        return false;
    int64_t v = 0;
    const char *q = p;
    for (; q < end && is_digit(*q); q++) {
        if (v > INT64_MAX / 10 / unit_ns)
            return false;
        v = v * 10 + (*q - '0');
    }
    if (q == p)
        return false;
    v *= unit_ns;
    if (q < end && *q == '.') {
        q++;
        int64_t place = unit_ns / 10;
        for (; q < end && is_digit(*q); q++) {
            v += (*q - '0') * place;
            place /= 10;
        }
    }
    if (q != end)
        return false;
    *ns = v;
    return true;
}

static const char *find(const char *p, const char *end, const char *needle)
{
    size_t n = strlen(needle);
    for (; end - p >= (ptrdiff_t)n; p++)
        if (!memcmp(p, needle, n))
            return p;
    return NULL;
}

static void set_detail(struct tb_event *ev, const char *p, const char *end)
{
    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    size_t n = TB_MIN((size_t)(end - p), sizeof ev->detail - 1);
    memcpy(ev->detail, p, n);
    ev->detail[n] = '\0';
}

static void fail(const char **why, const char *msg)
{
    if (why)
        *why = msg;
}

static bool is_level(const char *p, size_t n)
{
    static const char *const levels[] = {"trace", "debug", "info", "warning", "error"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(levels); i++)
        if (strlen(levels[i]) == n && !memcmp(levels[i], p, n))
            return true;
    return false;
}

/* "gc", "gc,start": lower-case tag names separated by commas. */
static bool looks_like_tags(const char *p, const char *end)
{
    if (p >= end || *p < 'a' || *p > 'z')
        return false;
    for (; p < end; p++)
        if (!((*p >= 'a' && *p <= 'z') || is_digit(*p) || *p == '_' || *p == ','))
            return false;
    return true;
}

/* JDK 9+: "[decoration]...[decoration] message". The decorations come in the
 * JVM's fixed order (time, utctime, uptime, …, level, tags); we need a wall
 * clock one and the tag set, which follows the level. */
static int parse_unified(const char *p, const char *end, struct tb_event *ev, const char **why)
{
    bool have_time = false, have_level = false;
    const char *tags = NULL;
    size_t tags_len = 0;
    int64_t t = 0;
    while (p < end && *p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (!close) {
            fail(why, "unterminated '[' decoration");
            return TB_E_BADFMT;
        }
        const char *f = p + 1, *fe = close;
        while (f < fe && *f == ' ')
            f++;
        while (fe > f && fe[-1] == ' ')
            fe--;
        const char *q = f;
        int64_t v;
        if (!have_time && fe - f >= 19 && is_digit(f[0]) && f[4] == '-' && parse_iso(&q, fe, &v) &&
            q == fe) {
            t = v;
            have_time = true;
        } else if (!have_level && is_level(f, (size_t)(fe - f))) {
            have_level = true;
        } else if (have_level && !tags) {
            tags = f;
            tags_len = (size_t)(fe - f);
        } else if (!have_level && looks_like_tags(f, fe)) {
            /* Logged without the level decoration: the tag set is the
             * last group made of tag names. */
            tags = f;
            tags_len = (size_t)(fe - f);
        }
        p = close + 1;
    }
    const char *msg = p;
    /* The plain [gc] tag set carries one line per finished pause (ZGC logs its
     * pauses under [gc,phases] instead, where the other collectors log no
     * "Pause"); [gc,start] repeats "Pause Young" without a duration, [gc,heap]
     * and the others describe the same collection again. */
    if (tags && !(tags_len == 2 && !memcmp(tags, "gc", 2)) &&
        !(tags_len == 9 && !memcmp(tags, "gc,phases", 9)))
        return TB_GC_OTHER;
    const char *pause = find(msg, end, "Pause ");
    if (!pause)
        return TB_GC_OTHER;
    /* The duration ends the line: "… 12.345ms". */
    const char *e = end;
    if (e - msg < 3 || e[-1] != 's' || e[-2] != 'm') {
        if (!tags)
            return TB_GC_OTHER; /* untagged: may be a start line, nothing to reject */
        fail(why, "GC pause without a duration");
        return TB_E_BADFMT;
    }
    const char *ne = e - 2, *nb = ne;
    while (nb > msg && (is_digit(nb[-1]) || nb[-1] == '.'))
        nb--;
    int64_t dur;
    if (nb == ne || nb == msg || nb[-1] != ' ' || !parse_scaled(nb, ne, TB_NS_PER_MS, &dur)) {
        fail(why, "GC pause with a malformed duration");
        return TB_E_BADFMT;
    }
    if (!have_time) {
        fail(why, "GC pause without a wall-clock time (log with -Xlog:gc:FILE:utctime,...)");
        return TB_E_BADFMT;
    }
    ev->end_ns = t;
    ev->start_ns = t - dur;
    set_detail(ev, msg, nb);
    return TB_GC_PAUSE;
}

/* JDK 8: "2026-11-22T01:02:03.456+0000: 12.345: [GC (Allocation Failure) …,
 * 0.0123456 secs] [Times: user=0.01 sys=0.00, real=0.01 secs]". The stamp is
 * the pause's start; the outer ", N secs]" before "[Times:" its duration (with
 * -XX:+PrintGCDetails, inner collector entries carry their own). */
static int parse_jdk8(const char *p, const char *end, struct tb_event *ev, const char **why)
{
    int64_t t;
    if (!parse_iso(&p, end, &t) || !expect(&p, end, ':')) {
        fail(why, "malformed date stamp");
        return TB_E_BADFMT;
    }
    const char *gc = find(p, end, "[GC");
    const char *full = find(p, end, "[Full GC");
    if (full && (!gc || full < gc))
        gc = full;
    if (!gc || find(gc, end, "[GC concurrent") == gc)
        return TB_GC_OTHER; /* safepoint statistics, concurrent phases */
    const char *stop = find(gc, end, " [Times:");
    if (!stop)
        stop = end;
    const char *last = NULL;
    for (const char *s = gc; (s = find(s, stop, " secs]")) != NULL; s++)
        last = s;
    if (!last) {
        fail(why, "GC pause without a duration");
        return TB_E_BADFMT;
    }
    const char *nb = last;
    while (nb > gc && (is_digit(nb[-1]) || nb[-1] == '.'))
        nb--;
    int64_t dur;
    if (nb - gc < 2 || nb[-1] != ' ' || nb[-2] != ',' ||
        !parse_scaled(nb, last, TB_NS_PER_SEC, &dur)) {
        fail(why, "GC pause with a malformed duration");
        return TB_E_BADFMT;
    }
    ev->start_ns = t;
    ev->end_ns = t + dur;
    /* "GC (Allocation Failure)": up to the first nested entry or size. */
    const char *de = gc + 1;
    while (de < nb && *de != '[' && *de != ',' && !(*de == ' ' && de + 1 < nb && is_digit(de[1])))
        de++;
    set_detail(ev, gc + 1, de);
    return TB_GC_PAUSE;
}

/* Lines a JDK 8 log has besides the collections: its header and the
 * multi-line heap printouts. */
static bool jdk8_furniture(const char *p, const char *end)
{
    static const char *const prefixes[] = {"Java HotSpot", "OpenJDK", "Memory:",
                                           "CommandLine flags:", "Heap", "{Heap", "}"};
    if (p < end && (*p == ' ' || *p == '\t'))
        return true;
    for (size_t i = 0; i < TB_ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if ((size_t)(end - p) >= n && !memcmp(p, prefixes[i], n))
            return true;
    }
    return false;
}

int tb_gc_parse_line(const char *line, size_t len, struct tb_event *ev, const char **why)
{
    const char *p = line, *end = line + len;
    while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    memset(ev, 0, sizeof *ev);
    snprintf(ev->kind, sizeof ev->kind, "gc");
    if (p == end || jdk8_furniture(p, end))
        return TB_GC_OTHER;
    if (*p == '[')
        return parse_unified(p, end, ev, why);
    if (is_digit(*p))
        return parse_jdk8(p, end, ev, why);
    fail(why, "not a JVM GC log line");
    return TB_E_BADFMT;
}

int tb_gc_parse_file(FILE *f, const char *host, struct tb_event **out, size_t *n,
                     struct tb_gc_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    struct tb_event *ev = NULL;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &linecap, f)) >= 0) {
        sum->lines++;
        struct tb_event e;
        const char *why = NULL;
        int r = tb_gc_parse_line(line, (size_t)got, &e, &why);
        if (r == TB_GC_OTHER) {
            sum->other++;
            continue;
        }
        if (r < 0) {
            sum->bad++;
            if (!sum->first_bad) {
                sum->first_bad = sum->lines;
                sum->first_why = why ? why : "malformed line";
            }
            continue;
        }
        snprintf(e.host, sizeof e.host, "%s", host);
        if (tb_grow(&ev, &cap, *n + 1, sizeof *ev)) {
            rc = TB_E_NOMEM;
            goto out;
        }
        ev[(*n)++] = e;
        sum->pauses++;
    }
    if (ferror(f))
        rc = TB_E_IO;
out:
    free(line);
    if (rc) {
        free(ev);
        *n = 0;
        return rc;
    }
    *out = ev;
    return 0;
}
