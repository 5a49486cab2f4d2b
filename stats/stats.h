/* SPDX-License-Identifier: MIT */
/* stats.h — per-window load, completions and work units; request classes'
 * service times and the work unit. Pure computation: arrays in, arrays out. */
#ifndef TB_STATS_H
#define TB_STATS_H

#include "tb.h"
#include "request.h"

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
};

/* How a class's service time was obtained. */
enum tb_svc_method {
    TB_SVC_ISOLATED = 0, /* median of isolated requests */
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

#endif
