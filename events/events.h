/* SPDX-License-Identifier: MIT */
/* events.h — sources of outside events (struct tb_event, common/event.h):
 * the parser of JVM garbage-collection logs into pause events for `tbneck
 * events import --gc`. Pure text in, events out; no I/O but the FILE the
 * caller hands over. */
#ifndef TB_EVENTS_H
#define TB_EVENTS_H

#include <stdio.h>

#include "tb.h"
#include "event.h"

/* What one line turned out to be. */
enum tb_gc_line {
    TB_GC_PAUSE = 1,  /* a stop-the-world pause; the event is filled in */
    TB_GC_OTHER = 0,  /* a well-formed line that is not a pause (heap sizes, phases, …) */
};

/* Parses one line (no newline needed; `len` bytes, NUL not required) of either
 *   - a JDK 9+ unified log (-Xlog:gc:…:utctime,uptime,level,tags or with `time`):
 *     "[2026-11-22T01:02:03.456+0000][12.345s][info][gc] GC(12) Pause Young
 *      (Allocation Failure) 30M->10M(48M) 12.345ms" — logged when the pause
 *     ends, so end = the timestamp and start = end − duration;
 *   - a JDK 8 log with -XX:+PrintGCDateStamps:
 *     "2026-11-22T01:02:03.456+0000: 12.345: [GC (Allocation Failure) …,
 *      0.0123456 secs]" — stamped when the pause starts, so end = start + duration.
 * Returns TB_GC_PAUSE (ev->start_ns, end_ns, kind "gc" and detail filled; host
 * left to the caller), TB_GC_OTHER, or TB_E_BADFMT for a line that is neither;
 * *why (optional) then names what was wrong. */
int tb_gc_parse_line(const char *line, size_t len, struct tb_event *ev, const char **why);

struct tb_gc_summary {
    uint64_t lines;      /* lines read */
    uint64_t pauses;     /* pause events produced */
    uint64_t other;      /* well-formed lines that are not pauses */
    uint64_t bad;        /* malformed lines, skipped */
    uint64_t first_bad;  /* line number of the first malformed line (1-based), 0 if none */
    const char *first_why;
};

/* Reads a whole log. Events get `host` as their host. *out is malloc'd and owned
 * by the caller (NULL when no pause). Malformed lines are counted, not fatal;
 * returns 0, TB_E_NOMEM, or TB_E_IO on a read error. */
int tb_gc_parse_file(FILE *f, const char *host, struct tb_event **out, size_t *n,
                     struct tb_gc_summary *sum);

#endif
