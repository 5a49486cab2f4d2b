/* SPDX-License-Identifier: MIT */
/* correlate.h — load/throughput correlation: N* (intervention analysis and a
 * least-squares fit), TPmax, congested windows, episodes, throughput levels,
 * cross-tier attribution. Pure computation over tb_window arrays. */
#ifndef TB_CORRELATE_H
#define TB_CORRELATE_H

#include "tb.h"
#include "stats.h"

enum tb_episode_kind { TB_EP_SATURATED = 0, TB_EP_FREEZE = 1 };

struct tb_episode {
    int64_t start_ns, end_ns;  /* [start of first window, end of last window) */
    double peak_load, mean_load;
    double throughput;         /* mean normalized throughput over the episode, per s */
    enum tb_episode_kind kind;
};

/* One analysis of one tier (server == 0) or server at one window width over
 * [from_ns, to_ns). */
struct tb_analysis {
    uint32_t tier, server;
    int64_t width_ns, from_ns, to_ns;
    uint64_t requests;
    double n_star;            /* intervention analysis; NAN when undetermined */
    double n_star_fit;        /* least-squares min(a·load, TPmax) knee; NAN when undetermined */
    double tp_max;            /* plateau normalized throughput, per s */
    double slope;             /* a: normalized throughput per unit load below N* */
    int64_t work_unit_ns;
    double congested_fraction;
    double episodes_per_min;
    uint32_t n_levels;        /* throughput levels among congested windows */
    double levels[8];
    bool disagree;            /* |n_star - n_star_fit| > 20% */
};

#endif
