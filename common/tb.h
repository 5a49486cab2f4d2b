/* SPDX-License-Identifier: MIT */
/* tb.h — error codes, attributes and small helpers shared by every module. */
#ifndef TB_H
#define TB_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* One list generates the error enum and tb_strerror(); functions return 0 or
 * one of these negative codes. */
#define TB_ERR_MAP(XX)                                          \
    XX(NOMEM, "out of memory")                                  \
    XX(INVAL, "invalid argument")                               \
    XX(IO, "input/output error")                                \
    XX(TRUNC, "truncated input")                                \
    XX(BADFMT, "malformed input")                               \
    XX(NOTFOUND, "not found")                                   \
    XX(UNSUPP, "unsupported")                                   \
    XX(FULL, "capacity exceeded")                               \
    XX(DB, "database error")                                    \
    XX(DBVER, "database written by a newer tbneck")             \
    XX(PCAP, "packet capture error")                            \
    XX(PERM, "permission denied")                               \
    XX(INTR, "interrupted")

enum tb_err {
    TB_OK = 0,
#define TB__ERR_ENUM(name, msg) TB_E_##name,
    TB__ERR_FIRST = -1000,
    TB_ERR_MAP(TB__ERR_ENUM)
#undef TB__ERR_ENUM
    TB__ERR_LAST
};

const char *tb_strerror(int err);

/* Exit statuses of the tbneck commands (documented in README). */
enum { TB_EXIT_OK = 0, TB_EXIT_FAIL = 1, TB_EXIT_USAGE = 2 };

#define TB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TB_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TB_UNUSED(x) ((void)(x))
#if defined(__GNUC__)
#define TB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TB_NODISCARD __attribute__((warn_unused_result))
/* Rare work kept out of a hot caller, so that the caller stays small. */
#define TB_NOINLINE __attribute__((noinline))
/* A case that falls into the next one on purpose (gcc and clang both check). */
#define TB_FALLTHROUGH __attribute__((fallthrough))
#else
#define TB_FALLTHROUGH ((void)0)
#define TB_PRINTF(f, a)
#define TB_NODISCARD
#define TB_NOINLINE
#endif

/* The capture time of bytes that were never seen (a parser's gap()). */
#define TB_TS_UNKNOWN INT64_MIN

#define TB_NS_PER_SEC INT64_C(1000000000)
#define TB_NS_PER_MS INT64_C(1000000)
/* The window width when none is given (DESIGN.md "Window"): every default
 * of every command, the API and the live stream. */
#define TB_WINDOW_DEFAULT_NS (50 * TB_NS_PER_MS)
#define TB_WINDOW_DEFAULT "50ms"

/* One clear line on stderr, prefixed "tbneck: ". */
void tb_log_error(const char *fmt, ...) TB_PRINTF(1, 2);
void tb_log_warn(const char *fmt, ...) TB_PRINTF(1, 2);
/* Informational line, only when verbosity >= 1 (set by -v). */
void tb_log_info(const char *fmt, ...) TB_PRINTF(1, 2);
extern int tb_log_verbosity;

/* Parses a duration such as "50ms", "1s", "250us", "100ns", "2m", "1.5s".
 * A bare number is taken in the default unit `unit_ns`. */
int tb_parse_duration(const char *s, int64_t unit_ns, int64_t *out_ns);
/* Window widths every command and the API accept: 1 ms to 1 h. Below, a
 * window holds no whole request and the windows of a capture outgrow memory;
 * above, the 50 ms-scale congestion the method looks for averages away. */
#define TB_WINDOW_MIN_NS TB_NS_PER_MS
#define TB_WINDOW_MAX_NS (3600 * TB_NS_PER_SEC)
/* A window width ("50ms"; a bare number is milliseconds) within those
 * bounds; TB_E_INVAL otherwise (say "a duration from 1ms to 1h"). */
int tb_parse_window(const char *s, int64_t *out_ns);
/* Parses a time bound: ns since epoch, seconds with fraction ("1700000000.25"),
 * or an offset "+10s" relative to `base_ns` (TB_E_INVAL if the sum would not
 * fit in 64 bits). */
int tb_parse_time(const char *s, int64_t base_ns, int64_t *out_ns);
/* What a time bound may be relative to: the stored requests' span (first
 * arrival, last departure) and the wall clock. */
struct tb_time_ref {
    int64_t start_ns;
    int64_t end_ns;
    int64_t now_ns;
};
/* Parses a time bound as --from/--to and the API's from/to take it
 * (docs/report.md, "Time bounds"):
 *   1700000000123456789        ns since the epoch (13 digits or more)
 *   1700000000.25              seconds since the epoch, optional fraction
 *   2023-11-14 22:13:25[.350]  UTC, as the report prints it; 'T' for the
 *                              space, a trailing 'Z' or ' UTC', and a bare
 *                              date (midnight) are accepted
 *   22:13:27.350               a time of day as the episode list prints it:
 *                              its occurrence in [start - 1h, start + 23h)
 *   now, now-5m                the wall clock (ref->now_ns), +/- a duration
 *   start+10s, end-5m, +10s    the first request's arrival or the last
 *                              request's departure, +/- a duration
 * Durations take the units of tb_parse_duration plus 'd', a bare number is
 * seconds. TB_E_INVAL for anything else, or a result outside 64 bits. */
int tb_parse_time_ref(const char *s, const struct tb_time_ref *ref, int64_t *out_ns);
/* True when `s` names the stored span (start, end, +OFFSET, a time of day),
 * so the caller has to read it before tb_parse_time_ref. */
bool tb_time_needs_span(const char *s);
/* "2023-11-14T22:13:20.050000000Z": ISO-8601 UTC with 9 fraction digits,
 * written beside every *_ns integer of the JSON outputs (jq and JavaScript
 * round 19-digit integers; the string keeps the ns). */
const char *tb_fmt_iso(int64_t ns, char *buf, size_t len);
/* The shortest of %.15g..%.17g that reads back as the same double ("0.05",
 * not "0.050000000000000003"): CSV and Prometheus numbers, exact and short.
 * Finite values only (callers write their own NaN). */
const char *tb_fmt_double(double v, char *buf, size_t len);
/* Formats a duration for humans: "50ms", "1.25s", "830us". */
const char *tb_fmt_duration(int64_t ns, char *buf, size_t len);

#endif
