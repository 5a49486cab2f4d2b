/* SPDX-License-Identifier: MIT */
/* report_fmt.h — the report's three output formats (text for people, JSON and
 * CSV for scripts) and the small summaries they share. */
#ifndef TB_REPORT_FMT_H
#define TB_REPORT_FMT_H

#include <stdio.h>

#include "analyze.h"

/* min / mean / max of one window column. */
struct tb_range {
    double min, mean, max;
};
enum tb_win_col { TB_COL_LOAD, TB_COL_TPUT, TB_COL_NORM_TPUT, TB_COL_RT };
struct tb_range tb_win_range(const struct tb_window *w, size_t n, enum tb_win_col col);

/* Episode durations: count, min, median, p90, max (ns) and a histogram over
 * the bins [0,100ms) [100,200) [200,500) [500ms,1s) [1s,∞). */
#define TB_DUR_BINS 5
struct tb_dur_dist {
    size_t n;
    int64_t min, p50, p90, max;
    size_t bins[TB_DUR_BINS];
};
extern const char *const tb_dur_bin_names[TB_DUR_BINS];
void tb_dur_dist(const struct tb_episode *ep, size_t n, struct tb_dur_dist *d);

const char *tb_episode_kind_name(enum tb_episode_kind k);
/* The tier behind the front tier whose load correlates best (r >= 0.5) with
 * the front tier's response time; NULL when none does. */
const struct tb_tier_corr *tb_report_explains(const struct tb_report *r);
const char *tb_svc_method_name(enum tb_svc_method m);

/* Text for people: per server and for the tier, with warnings and lists. */
int tb_report_write_text(FILE *f, const struct tb_report *r, const struct tb_catalog *cat);
/* One JSON object (DESIGN.md "Interfaces"); NaN and infinities as null. */
int tb_report_write_json(FILE *f, const struct tb_report *r, const struct tb_catalog *cat);
/* The episode list as CSV, header TB_EPISODE_CSV_HEADER. */
#define TB_EPISODE_CSV_HEADER                                                                   \
    "tier,server,start_ns,end_ns,duration_ns,peak_load,mean_load,throughput,kind"
int tb_report_write_csv(FILE *f, const struct tb_report *r, const struct tb_catalog *cat);

/* The per-class response-time profile (profile_fmt.c): text (the first
 * `limit` rows, 0 = all), the JSON object the report's "profile" holds, and
 * CSV with header TB_PROFILE_CSV_HEADER (server '*' = the tier). */
#define TB_PROFILE_CSV_HEADER                                                                   \
    "tier,server,rank,class,count,total_ns,share,mean_ns,p50_ns,p95_ns,p99_ns,max_ns"
void tb_profile_write_text(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                           size_t limit);
void tb_profile_write_json(FILE *f, const struct tb_report *r, const struct tb_catalog *cat);
int tb_profile_write_csv(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                         const char *tier, const char *server);

#endif
