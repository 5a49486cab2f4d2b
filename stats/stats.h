/* SPDX-License-Identifier: MIT */
/* stats.h — per-window load, completions and work units; request classes'
 * service times and the work unit. Pure computation: arrays in, arrays out. */
#ifndef TB_STATS_H
#define TB_STATS_H

#include "tb.h"
#include "request.h"
#include "results.h" /* struct tb_window, tb_class_service */

/* ---- window alignment ---------------------------------------------------- */

/* Start of the window of width `width_ns` that contains t: the largest multiple
 * of width_ns that is <= t (floor division, right for negative t too).
 * Returns 0, or TB_E_INVAL when width_ns <= 0 or the result would not fit in
 * an int64 (t within one width of INT64_MIN). */
int tb_win_floor(int64_t t, int64_t width_ns, int64_t *start_ns);

/* ---- per-class units lookup ---------------------------------------------- */

/* Work units of a request by (class, period), built from the rows that
 * tb_service_estimate() returns. A request takes the row of its class whose
 * period_start_ns is the latest one <= its arrival (the first row when it
 * arrived before every period of its class); a class without rows is worth
 * `default_units`. */
struct tb_units;
/* The order of service rows: by class, then period start (qsort). */
int tb_class_service_cmp(const void *a, const void *b);
int tb_units_new(struct tb_units **out, const struct tb_class_service *svc, size_t n,
                 double default_units);
double tb_units_get(const struct tb_units *u, uint32_t class_id, int64_t arrival_ns);
void tb_units_free(struct tb_units *u);

/* ---- window accumulator (streaming) ---------------------------------------
 * Memory is proportional to windows x rows, never to requests: each request's
 * load is added as its exact overlap with the windows it spans (the windows it
 * covers completely through a difference array, so a request costs O(1)
 * whatever its length), and response-time percentiles come from a per-window
 * log-bucketed histogram. Requests may be added in any order.
 *
 * Rows: row 0 is the tier as a whole (server = 0), rows 1..nservers are the
 * servers listed, in the order given. A request of a server not listed counts
 * in the tier row only. With tier != 0 a request of another tier is skipped.
 *
 * The windows cover [floor(from), ceil(to)) aligned to multiples of width_ns
 * since the epoch; a request's life is clipped to that range, and it is a
 * completion of the window holding its departure when that lies in the range
 * (a request flagged TB_REQ_NORESP never completed: it adds load only).
 * A request with departure < arrival is skipped. */
struct tb_winacc;

int tb_winacc_new(struct tb_winacc **out, uint32_t tier, int64_t width_ns, int64_t from_ns,
                  int64_t to_ns, const uint32_t *servers, size_t nservers);
/* `units` = the request's work units (see tb_units_get). */
int tb_winacc_add(struct tb_winacc *acc, const struct tb_request *r, double units);
/* Windows per row. */
size_t tb_winacc_nwindows(const struct tb_winacc *acc);
/* Requests skipped (other tier, departure before arrival, entirely outside). */
uint64_t tb_winacc_skipped(const struct tb_winacc *acc);
/* Produces (1 + nservers) x nwindows rows: first every window of the tier in
 * time order, then every window of servers[0], and so on. Every window of the
 * range is present, empty ones included, so runs of windows are contiguous.
 * *out is malloc'd and owned by the caller. The accumulator stays usable
 * (finish can be called again after more adds). rt_p95_ns is within 3.2% of
 * the exact nearest-rank 95th percentile (16 linear sub-buckets per power of
 * two; the value reported is the bucket middle clamped to the window's
 * smallest and largest response time). */
int tb_winacc_finish(struct tb_winacc *acc, struct tb_window **out, size_t *n);
void tb_winacc_free(struct tb_winacc *acc);

/* Convenience over an array: windows of `req` (any order). units may be NULL
 * (every request is worth 1 unit). from/to may be INT64_MIN/INT64_MAX: the
 * range then spans the requests (first arrival to last departure). Output as
 * tb_winacc_finish; with no request and an open range, *n = 0. */
int tb_windows_compute(const struct tb_request *req, size_t nreq, const struct tb_units *units,
                       uint32_t tier, const uint32_t *servers, size_t nservers, int64_t width_ns,
                       int64_t from_ns, int64_t to_ns, struct tb_window **out, size_t *n);

/* Sets w[k].calls_busy, for the n consecutive windows w[0..n) (one series,
 * w[0].start_ns on, width w[0].width_ns), to the fraction of each window
 * during which at least one of `calls` (requests of other tiers the series'
 * machines sent) was in flight, and w[k].calls_load to their mean number in
 * flight over the window ((1/w) ∫ C dτ). Calls with departure < arrival are skipped.
 * Returns 0, TB_E_INVAL or TB_E_NOMEM. */
int tb_windows_calls_busy(struct tb_window *w, size_t n, const struct tb_request *calls,
                          size_t ncalls);
/* The same as a stream, for calls too many to hold: the n windows from w0 on;
 * calls added in non-decreasing arrival order (TB_E_INVAL otherwise; calls
 * with departure < arrival are skipped); finish sets w[0..n).calls_busy and
 * calls_load to exactly what tb_windows_calls_busy gives for the same calls (the same
 * additions in the same order). Memory: 2n doubles and the calls in flight. */
struct tb_busyacc;
int tb_busyacc_new(struct tb_busyacc **out, int64_t w0, int64_t width_ns, size_t n);
int tb_busyacc_add(struct tb_busyacc *b, const struct tb_request *call);
int tb_busyacc_finish(struct tb_busyacc *b, struct tb_window *w);
void tb_busyacc_free(struct tb_busyacc *b);

/* ---- layered load -----------------------------------------------------------
 * DESIGN.md "Layered load" (docs/diagnose.md). Per server ("row") and window,
 * the load split into what the server does itself and what it waits for:
 *
 *   load  = (1/w) ∫ N(τ) dτ            N: its requests in flight (as tb_winacc)
 *   wait  = (1/w) ∫ min(C(τ), N(τ)) dτ C: the downstream calls it has
 *                                       outstanding; counted only while it has
 *                                       requests in flight, and at most one per
 *                                       request in flight (a request waiting on
 *                                       two parallel calls waits once)
 *   self  = load - wait                 its own time: work and local queueing
 *   own   = (1/w) Σ service time of the requests completed in the window
 *                                       (the work they cost: busy servers), kept
 *                                       as Σ work units like tb_winacc (own =
 *                                       work_units x work unit / w)
 *   queue = self - own                  (may be < 0 in a window: a completion
 *                                       counts all its work where it ends)
 *
 * Integrals are kept in integer request-nanoseconds, so load and wait are
 * exact (load equals tb_winacc's to the last bit of the division). A call is
 * a request whose caller (the client's machine) is another row: it adds to
 * the caller's C and to the per-edge count of calls from that caller to the
 * callee group (a tier), whose per-window mean, maximum and time at that
 * maximum show a ceiling (a pool whose every connection is busy).
 *
 * Streaming: requests are added in non-decreasing arrival order (the store's
 * order); memory is windows x (rows + edges in use) plus the requests in
 * flight at once, never the number of requests. Windows cover [floor(from),
 * ceil(to)) aligned to multiples of the width since the epoch; a request
 * counts where its life overlaps that range, and completes in the window of
 * its departure when that lies in the range. */
struct tb_layer_win {
    int64_t load_ns;       /* ∫ N over the window, request-ns */
    int64_t wait_ns;       /* ∫ min(C, N), request-ns */
    double work_units;     /* Σ units of the completions (as tb_winacc) */
    uint32_t completions;  /* departures in the window (not TB_REQ_NORESP) */
    uint32_t arrivals;
    uint32_t max_n;        /* largest N held for a positive time in the window */
    uint32_t max_c;        /* largest C (calls outstanding, all callees) held for a
                            * positive time while N > 0 */
};
struct tb_layer_edge_win {
    int64_t calls_ns;      /* ∫ C_edge, call-ns */
    int64_t at_max_ns;     /* time C_edge spent at max_calls */
    uint32_t max_calls;    /* largest C_edge held for a positive time */
    uint32_t started;      /* calls that began in the window */
};
struct tb_layer;
/* rows: row ids 1..nrows-1 are usable (row 0 = none); groups: callee groups
 * 1..ngroups-1. TB_E_FULL beyond 20 million windows x rows. */
int tb_layer_new(struct tb_layer **out, int64_t width_ns, int64_t from_ns, int64_t to_ns,
                 uint32_t nrows, uint32_t ngroups);
/* One request of server `row`. caller_row: the row that issued it as a call
 * (0 = none), group: the callee group of that call (the request's tier).
 * units: what its completion adds to work_units. TB_E_INVAL when arrivals go
 * back in time, a row/group is out of range, or departure < arrival. */
int tb_layer_add(struct tb_layer *L, const struct tb_request *r, uint32_t row, uint32_t caller_row,
                 uint32_t group, double units);
/* Ends the sweep (every request still in flight departs); call once, before
 * reading. */
int tb_layer_finish(struct tb_layer *L);
size_t tb_layer_nwindows(const struct tb_layer *L);
int64_t tb_layer_start(const struct tb_layer *L);
/* The windows of a row (nwindows entries, zeros for a row never used). */
const struct tb_layer_win *tb_layer_row(const struct tb_layer *L, uint32_t row);
/* The windows of the calls from caller_row to group; NULL when none was made. */
const struct tb_layer_edge_win *tb_layer_edge(const struct tb_layer *L, uint32_t caller_row,
                                              uint32_t group);
/* Largest number of requests in flight at once at any time (the heap). */
size_t tb_layer_max_inflight(const struct tb_layer *L);
void tb_layer_free(struct tb_layer *L);

/* ---- service times --------------------------------------------------------- */

/* Caller-given service time of a class (--service-times FILE, --calibrate). */
struct tb_svc_override {
    uint32_t class_id;
    int64_t service_ns;
    enum tb_svc_method method; /* TB_SVC_OVERRIDE or TB_SVC_CALIBRATED */
};

/* An address of the machines of the analysed tier, from which its servers
 * call the downstream tier. server = the server whose machine it is, or 0 when
 * it belongs to the tier as a whole (a tier host listed in the tiers file).
 * Only the IP is compared. */
struct tb_svc_host {
    uint32_t server;
    struct tb_addr addr;
};

struct tb_svc_opts {
    int64_t period_ns;       /* re-estimation period; 0 = one period for everything */
    uint32_t min_isolated;   /* isolated samples needed for their mean (default 20) */
    double fallback_q;       /* quantile of all samples otherwise (default 0.10) */
    uint32_t reservoir;      /* samples kept per (class, period) and kind (default 4096) */
    double wu_tolerance;     /* work unit: |s/u - round(s/u)| allowed (default 0.12) */
    int64_t wu_floor_ns;     /* work unit: smallest u tried (default 100 us) */
    double wu_min_share;     /* work unit: classes below this share of requests are not
                              * allowed to shrink u (default 0.01) */
    uint32_t levels;         /* largest level k tried: a request is censored when more
                              * than k are in flight at its server (default and at most
                              * TB_SVC_LEVELS_MAX; 1 = alone at arrival only, as v0.7) */
};
#define TB_SVC_LEVELS_MAX 16
void tb_svc_opts_default(struct tb_svc_opts *o);

/* Service time of every (class, period) of a tier, and the work unit.
 *
 * req: the tier's requests, any order. down/ndown: requests of the tier it
 * calls (may be NULL/0); those whose client IP is one of `hosts` are the
 * calls the tier's servers made. A request is isolated when its server had no
 * other request in flight during its whole life (DESIGN.md "Service time");
 * its sample is its duration minus the time during which calls from its
 * server's machine (hosts with that server, or server 0) were in flight
 * (union of the calls, clipped to its life). Per (class, period), when
 * there are at least min_isolated isolated samples: the mean given by a
 * product-limit (Kaplan-Meier) estimate over the class's requests that
 * arrived at an idle server, each either dying alone (an isolated sample)
 * or censored by the next arrival at its server, with an exponential tail
 * where most are censored (stats/service.c "service times of the requests
 * alone at arrival"); generalised to level k: over the requests that
 * arrived with at most k in flight at their server (themselves included),
 * censored when more than k were, k chosen per server and period from the
 * data, 1..o->levels (stats/service.c "the level k"; k = 1 is the rule
 * above, exactly); otherwise that estimate over all the class's periods
 * when those are enough (a period of sustained overload has
 * no request alone, and its low quantile would be queueing); otherwise the
 * fallback_q quantile of all its samples (non-isolated ones minus their
 * calls' time likewise). An override replaces all of these in every period.
 * Then, per period, the estimated classes are scaled together to the work
 * their servers did, W(c) = Σ_m (time with m in flight) × min(m, c), for
 * the c whose W is nearest the estimates' total, when it is within 25% of
 * it, not within 1%, and both neighbouring candidates are ≥ 22% away
 * (servers with calls subtracted or unclassified requests left out;
 * stats/service.c "the work done").
 *
 * The work unit is computed once over all periods (so normalized throughput
 * stays comparable across periods) from per-class service times over the
 * whole range weighted by request counts (tb_work_unit); each row's units =
 * its service_ns / unit. Rows come sorted by class, then period.
 * *out is malloc'd and owned by the caller. */
int tb_service_estimate(const struct tb_request *req, size_t nreq, const struct tb_request *down,
                        size_t ndown, const struct tb_svc_host *hosts, size_t nhosts,
                        const struct tb_svc_override *ov, size_t nov, const struct tb_svc_opts *o,
                        struct tb_class_service **out, size_t *nout, int64_t *work_unit_ns);

/* Streaming form of the same, for inputs too large to hold: feed the tier's
 * requests (tb_svcest_add) and the downstream calls (tb_svcest_add_down)
 * merged in non-decreasing arrival order; memory is bounded by the
 * reservoirs (per (class, period) and per (server, period): one for the
 * requests alone, one per level 2..levels; and 16 bytes per level and bin
 * of the times at which a request was cut short, at most 113 bins; per
 * (server, period) 560 bytes of times by requests in flight and 24 per
 * class served; 8 bytes per request in flight, with downstream hosts 60
 * more, and 68 more for each of the at most 16 per server that arrived
 * with at most 16 in flight). Unclassified requests (class 0) belong in
 * the same order: the count in flight at an arrival (for the levels) is
 * the work done's, brought up to the latest arrival seen at its server.
 * Results are identical to tb_service_estimate while no (class, period)
 * exceeds the reservoir size. */
struct tb_svcest;
int tb_svcest_new(struct tb_svcest **out, const struct tb_svc_host *hosts, size_t nhosts,
                  const struct tb_svc_opts *o);
int tb_svcest_add(struct tb_svcest *e, const struct tb_request *r);
int tb_svcest_add_down(struct tb_svcest *e, const struct tb_request *r);
int tb_svcest_finish(struct tb_svcest *e, const struct tb_svc_override *ov, size_t nov,
                     struct tb_class_service **out, size_t *nout, int64_t *work_unit_ns);
void tb_svcest_free(struct tb_svcest *e);

/* ---- work unit --------------------------------------------------------------
 * The approximate greatest common divisor of service times (DESIGN.md "Work
 * unit"). Rule: the reference s_ref is the smallest service time among the
 * classes holding at least min_share of the weight (all classes when weight is
 * NULL); candidates u = s_ref / k for k = 1, 2, ... while u >= max(floor_ns,
 * s_ref / 20); the first (largest) u for which every such class has
 * |s/u - round(s/u)| <= tolerance is kept, refined by least squares given the
 * integers (u = Σ w·s·m / Σ w·m²), and rounded to two significant digits when
 * that still fits. No candidate fits: u = s_ref. Rare classes cannot force a
 * tiny unit; their units are simply fractional. */
int tb_work_unit(const int64_t *service_ns, const double *weight, size_t n, double tolerance,
                 int64_t floor_ns, double min_share, int64_t *unit_ns);

/* ---- units per period -------------------------------------------------------
 * Sets rows[i].units (rows as tb_service_estimate returns them: sorted by
 * class, then period). The logs of the estimated rows' service times
 * (isolated or quantile) are fitted as class effect + period effect + rest
 * (request-weighted least squares, the period effects centred); an
 * estimated row is worth service_ns x exp(-period effect) / unit_ns units.
 * So a class keeps its own drift against the others, but a change every
 * class of a period shares (a CPU changing speed) stays in the normalized
 * throughput instead of being absorbed by the units (workunit.c says why).
 * One period: service_ns / unit_ns. Overridden and calibrated rows:
 * service_ns / unit_ns. unit_ns 0: 1 unit. */
int tb_work_units_assign(struct tb_class_service *rows, size_t n, int64_t unit_ns);

/* ---- per-class profile -----------------------------------------------------
 * pt-query-digest's first table: per class, the requests that completed in
 * [from_ns, to_ns) (departure; INT64_MIN/INT64_MAX for no bound) of `server`
 * (0: every server), their count, total, mean, nearest-rank p50/p95/p99 and
 * max response time (departure - arrival), and the share of the total time.
 * Rows sorted by total time, most first (ties: class id). *out is malloc'd
 * (NULL when no request); *total_ns is the sum over every row. */
struct tb_class_profile {
    uint32_t class_id;
    uint64_t count;
    int64_t total_ns;
    double mean_ns;
    int64_t p50_ns, p95_ns, p99_ns, max_ns;
    double share; /* total_ns / the sum over every class */
};
int tb_class_profile(const struct tb_request *rq, size_t n, uint32_t server, int64_t from_ns,
                     int64_t to_ns, struct tb_class_profile **out, size_t *nout,
                     int64_t *total_ns);

/* ---- a CPU quota's period (quota.c) -------------------------------------- */

/* A process held to a CFS CPU quota stops once it has used the quota of a
 * period and resumes when the next period begins: the long gaps between its
 * completions while requests are in flight end a whole number of periods
 * apart. */
struct tb_quota {
    int64_t period_ns; /* 0: the stops are not in step with any period */
    size_t stops;      /* long gaps with requests in flight */
    size_t steps;      /* intervals between consecutive stops' ends considered */
    size_t in_step;    /* of them, a whole number of periods to the jitter */
};
/* arr: the server's arrivals, ascending; dep: its departures, any order
 * (copied). TB_E_NOMEM only. */
int tb_quota_period(const int64_t *arr, size_t na, const int64_t *dep, size_t nd,
                    struct tb_quota *q);

/* ---- calls made by the requests in flight (progress.c) ------------------- */

/* Whether the requests queued at a server have started: the calls its
 * requests made so far, counted for those still in flight, against how many
 * are in flight (docs/diagnose.md "threads"). With every request served at
 * once (processor sharing) each one is somewhere in its work, and the calls
 * made grow with the requests in flight (about half a request's calls
 * each); under a cap of K threads only the K started ones have made any, and
 * the calls made stay at K's worth however long the queue. Seen from the
 * wire without knowing which request made which call: the calls issued from
 * the server's host, less the mean calls per request for each departure,
 * back to 0 whenever nothing is in flight. */
enum tb_prog_kind { TB_PROG_ARRIVAL = 0, TB_PROG_CALL = 1, TB_PROG_DEPARTURE = 2 };
struct tb_prog_ev {
    int64_t t;
    uint8_t kind; /* enum tb_prog_kind */
};
struct tb_progress {
    double calls_per_request;   /* calls / departures over the events */
    double busy_n, calm_n;      /* ∫ in flight dt over marked windows, request-seconds */
    double busy_made, calm_made; /* ∫ calls made by the in-flight dt, in requests' worth */
    /* (busy_made / busy_n) / (calm_made / calm_n): about 1 when the calls
     * made grow with the requests in flight, well below 1 when a cap holds
     * them; NAN when either side has less than min_req_s or no call was made. */
    double ratio;
};
/* ev: one server's arrivals and departures and the calls it issued, any
 * order (sorted here, in place). mark[k] for window k of width width_ns from
 * from_ns: 0 not counted, 1 calm, 2 busy (its requests queue); time outside
 * the nwin windows is not counted. TB_E_INVAL for width_ns <= 0. */
int tb_call_progress(struct tb_prog_ev *ev, size_t n, const uint8_t *mark, int64_t from_ns,
                     int64_t width_ns, size_t nwin, double min_req_s, struct tb_progress *out);

/* ---- a CPU's speed from its requests served alone (isolated.c) ----------- */

/* A request served while nothing else was in the server runs alone on a
 * CPU: its own time (duration less its downstream calls) is its demand over
 * the CPU's speed, whatever the load around it. At one speed those times
 * scatter the same way in every second; a CPU changing frequency makes them
 * longer for seconds at a time. One-way analysis of variance of log(own
 * time), each class centred on its own mean, grouped by the second the
 * request arrived in (docs/diagnose.md "speed"). */
struct tb_iso_sample {
    int64_t t;      /* arrival */
    double own_ns;  /* > 0 */
    uint32_t cls;   /* class, for centring */
    bool censored;  /* another request arrived before it left: own_ns is its own
                     * time until then, a lower bound (tb_isolated_logrank only;
                     * tb_isolated_speed skips these) */
};
struct tb_iso_speed {
    size_t samples, groups; /* counted: groups of at least 3 samples */
    double f;       /* between-group over within-group mean square; NAN under 6 groups */
    double effect;  /* exp(second highest - second lowest of the groups' mean log
                     * time): how much slower the slow seconds are; NAN under 6 groups */
};
/* s: any order (sorted here by time, in place). TB_E_INVAL for group_ns <= 0,
 * TB_E_NOMEM. */
int tb_isolated_speed(struct tb_iso_sample *s, size_t n, int64_t group_ns,
                      struct tb_iso_speed *out);

/* The same question without the bias of "alone": a request is alone until it
 * leaves or another arrives, and on a busy CPU the next arrival comes soon, so
 * the requests that stay alone to the end are the short ones (the slower the
 * CPU, the busier it is and the shorter the survivors: with exponential
 * demands the test above reads F 1-2 on speed changes). Here every request
 * that arrived at an empty server counts, the ones overtaken by an arrival as
 * censored at that moment: a log-rank test, stratified by class, of their own
 * times across periods of group_ns. Under one speed the own-time hazard is
 * the same in every period whatever the censoring (the next arrival does not
 * depend on this request's demand), for any demand distribution; a slower CPU
 * lowers it. Per period O (requests that left alone) and E (the sum of the
 * class's Nelson-Aalen cumulative hazard at each request's observed time);
 * chi2 = sum (O - E)^2 / E over the periods with E >= min_expected (a
 * conservative form of the test), z its Wilson-Hilferty normal score on
 * groups - 1 degrees of freedom (about N(0,1) at one speed), effect the
 * second highest O/E over the second lowest (with exponential demands, the
 * ratio of the speeds). The censoring must not depend on the demand: true
 * of own time that runs all the time (a server that calls nothing), not of
 * one that stops during downstream calls (an arrival during a call censors
 * the request at the pieces of its demand already done). */
struct tb_iso_logrank {
    size_t samples, events, groups; /* groups: periods with E >= min_expected */
    double chi2, z, effect;         /* NAN under 6 groups */
};
/* s: any order (sorted here, in place). TB_E_INVAL for group_ns <= 0,
 * TB_E_NOMEM. */
int tb_isolated_logrank(struct tb_iso_sample *s, size_t n, int64_t group_ns, double min_expected,
                        struct tb_iso_logrank *out);

#endif
