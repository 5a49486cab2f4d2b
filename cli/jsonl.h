/* SPDX-License-Identifier: MIT */
/* jsonl.h — JSON lines for log shippers: one object per line, each with an
 * "event" (window, episode, analysis, health), written by `report --format
 * jsonl`, `export windows --format jsonl` and, as things happen, by
 * `capture -i --format jsonl`. Times are int64 ns since the epoch (*_ns, exact)
 * with an ISO-8601 UTC string beside each (start, end, time: what jq and
 * JavaScript can read without rounding); "server" is "ADDR:PORT" or "*" for
 * the tier as a whole. Field list: docs/web.md, "JSON lines". */
#ifndef TB_JSONL_H
#define TB_JSONL_H

#include <stdio.h>

#include "tb.h"
#include "results.h"
#include "analyze.h"
#include "stream.h"

/* "2023-11-14T22:13:20.050000000Z" (9 fraction digits, UTC). */
const char *tb_jsonl_iso(int64_t ns, char *buf, size_t len);

/* congested: 0/1, or -1 when no rule tells (written as null). */
void tb_jsonl_window(FILE *f, const char *tier, const char *server, const struct tb_window *w,
                     int congested);
/* ongoing: 0/1 (live: an episode opened and not yet closed). */
void tb_jsonl_episode(FILE *f, const char *tier, const char *server, const struct tb_episode *ep,
                      bool ongoing);
/* The analysis (or live re-estimate) and the congestion threshold in force;
 * `rs`: the change of work unit the live re-estimate made before it, NULL for
 * none (written as null). */
void tb_jsonl_analysis(FILE *f, const char *tier, const char *server, const struct tb_analysis *a,
                       double threshold, const struct tb_stream_rescale *rs);
void tb_jsonl_health(FILE *f, int64_t ts_ns, uint64_t packets, uint64_t kernel_drops,
                     uint64_t if_drops);
/* A live sensor's ClickHouse sender, each second (capture -i --store
 * clickhouse://): rows stored, waiting, spooled, dropped (docs/clickhouse.md). */
struct tb_ch_live_stats;
void tb_jsonl_store(FILE *f, int64_t ts_ns, const struct tb_ch_live_stats *s);

/* A whole analysis: its analysis line, then its windows (congested by the
 * rule its episodes were cut with) with each episode after the window that
 * ends it. Returns 0, TB_E_NOMEM or TB_E_IO. */
int tb_jsonl_result(FILE *f, const char *tier, const char *server,
                    const struct tb_analysis_result *r);

#endif
