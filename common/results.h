/* SPDX-License-Identifier: MIT */
/* results.h — what the analysis produces and the store keeps: windows,
 * service times, episodes, analyses. Records only (as request.h is for
 * capture): stats/ and correlate/ compute them, store/ persists them,
 * analysis/, web/ and cli/ read them, and none of those needs another's
 * code to hold one. */
#ifndef TB_RESULTS_H
#define TB_RESULTS_H

#include "tb.h"

/* One window [start_ns, start_ns + width_ns) of one server, or of a whole tier
 * when server == 0. Windows are aligned to multiples of width_ns since the
 * epoch. Throughputs are per second of window. */
struct tb_window {
    int64_t start_ns;
    int64_t width_ns;
    uint32_t tier;
    uint32_t server;       /* 0 = the tier as a whole */
    double load;           /* (1/w) ∫ N(τ) dτ, exact */
    uint32_t completions;  /* departures in the window */
    double work_units;     /* Σ units of those completions */
    double throughput;     /* completions / w, per second */
    double norm_throughput;/* work_units / w, per second */
    double rt_mean_ns;     /* mean response time of the completions (0 when none) */
    double rt_p95_ns;      /* 95th percentile of the same */
    double calls_busy;     /* fraction of the window during which the server (the tier: any
                            * of its servers) had a call to another tier in flight
                            * (tb_windows_calls_busy); 0 when it calls nothing. The freeze
                            * rule's "waiting, not stalled". Not stored: windows read back
                            * have 0. */
    double calls_load;     /* (1/w) ∫ C(τ) dτ: the calls of calls_busy in flight, counted
                            * each (the load the server's requests spend waiting on
                            * them: load - calls_load is its own, "self" load; the
                            * stall rule's promise from the work it does itself).
                            * Set with calls_busy; not stored either. */
};

/* How a class's service time was obtained. */
enum tb_svc_method {
    TB_SVC_ISOLATED = 0, /* weighted mean of isolated requests */
    TB_SVC_QUANTILE = 1, /* fallback: low quantile of all samples */
    TB_SVC_OVERRIDE = 2, /* --service-times FILE */
    TB_SVC_CALIBRATED = 3, /* --calibrate CAPTURE */
};

struct tb_class_service {
    uint32_t tier;
    uint32_t class_id;
    int64_t period_start_ns; /* start of the period the estimate is for */
    int64_t service_ns;
    double units;            /* service_ns / work unit */
    uint32_t samples;        /* samples the estimate rests on */
    uint32_t requests;       /* requests of this class in the period */
    enum tb_svc_method method;
};

enum tb_episode_kind { TB_EP_SATURATED = 0, TB_EP_FREEZE = 1 };

/* Whether a congestion point was shown (correlate.h, "the knee test"). */
enum tb_nstar_why {
    TB_NSTAR_KNEE = 0,        /* a knee is shown; the fields describe the threshold's test */
    TB_NSTAR_LINEAR = 1,      /* no candidate at all: throughput rises with load throughout */
    TB_NSTAR_RISING = 2,      /* a candidate, but beyond it throughput still rises (bound > 0.5) */
    TB_NSTAR_FEW_BEYOND = 3,  /* a candidate, but fewer than 10 windows at or above it */
    TB_NSTAR_BELOW_ONE = 4,   /* a candidate below one request in service */
    TB_NSTAR_FEW_WINDOWS = 5, /* too few windows with load to show anything */
    TB_NSTAR_FLAT_LIVES = 6,  /* a knee in the windows, but requests arriving into twice it
                               * live as long as those arriving alone (v0.9) */
};

struct tb_episode {
    int64_t start_ns, end_ns;  /* [start of first window, end of last window) */
    double peak_load, mean_load;
    double throughput;         /* mean normalized throughput over the episode, per s */
    enum tb_episode_kind kind;
};

/* The analysis method's version, stored with each analysis: a stored analysis
 * of another version is recomputed, not reused. Bump it whenever the same
 * requests would give different windows or results (stats/ or correlate/).
 * 1: v0.3, the knee test (before it: 0). 2: levels over time, units per
 * period without the common factor, the chord knee test, the work-unit
 * slope's 40%/200% rules. 3: stalled windows (the freeze rule that needs no
 * knee) are episodes, also where N* is undetermined. 4: a level's step is
 * judged against at least one completion's worth of noise (levels.c); also
 * the number of the reverted slope hint for tiers that wait on their calls.
 * 5: such a tier's N* takes the hint (1/u)·S̄/(S̄ + W̄) when its calm
 * stretches read 40-93% of it, once the knee test has shown the knee found
 * without it. 6: a server that waits on its calls is also stalled by its own
 * work's promise (calls_load, tb_congestion.self_tp). 7: a server's
 * service times are scaled to the work it did, Σ time × min(in flight, c),
 * when that is near the product-limit estimate (stats/service.c "the work
 * done"): the work unit and so N* change on busy servers. 8: the
 * product-limit estimate censors at "more than k in flight" with k chosen
 * per server and period (stats/service.c "the level k"): service times
 * change on busy servers with several cores. 9: the per-request stretch rule
 * of the knee test (stats/stretch.h): a knee whose requests do not live
 * longer when they arrive into twice it in flight is refused. 10: on a busy
 * server with few lone requests the rule's baseline widens to m < from/4
 * (stats/stretch.h TB_STRETCH_BASE_REQUESTS). */
#define TB_ANALYSIS_VERSION 10

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
    bool disagree;            /* both stand and |n_star - n_star_fit| > 20% */
    /* Added by correlate (filled by tb_correlate_analyze). */
    uint32_t n_episodes, n_freeze;
    int64_t ep_dur_min_ns, ep_dur_median_ns, ep_dur_p95_ns, ep_dur_max_ns;
    double n_star_used;       /* the threshold that defined congestion (n_star, else
                               * n_star_fit; NAN = nothing congested) */
    enum tb_nstar_why n_star_why; /* whether a knee was shown, and if not why not */
    uint32_t method_version;  /* TB_ANALYSIS_VERSION of the method that made it */
    char n_star_reason[192];  /* tb_nstar_reason's sentence */
};

#endif
