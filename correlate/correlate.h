/* SPDX-License-Identifier: MIT */
/* correlate.h — load/throughput correlation: N* (intervention analysis and a
 * least-squares fit), TPmax, congested windows, episodes, throughput levels,
 * cross-tier attribution. Pure computation over tb_window arrays. */
#ifndef TB_CORRELATE_H
#define TB_CORRELATE_H

#include "tb.h"
#include "stats.h"
#include "stretch.h"
#include "results.h" /* struct tb_episode, tb_analysis */

/* ---- N* -----------------------------------------------------------------------
 * DESIGN.md "N*". Both estimates share the slope of the linear part, a: the
 * ratio Σtp/Σload of the lowest-load tenth of the windows, or slope_hint when
 * the data reach 70% of it and not twice it (for a tier that waits on
 * nothing a request alone completes service/u units in its service time, so
 * a = 1/u; less at low load is windows mixing idle and queued moments, a
 * little more is selection, twice as much a wrong service time).
 *
 * Intervention analysis (n_star): windows with load > 0; k even bins over
 * [Nmin, Nmax]; bins with fewer than min_per_bin windows skipped; per bin the
 * mean load ld_i and the mean normalized throughput tp_i of its windows that
 * are not freezes (a window below freeze_frac x the bin's 90th percentile is
 * left out, so stop-the-world pauses do not drag the curve); δ_0 = a over
 * the lowest max(3, bins/10) bins; tp_i smoothed by a running median of 3,
 * then (ld_i, tp_i) by a running mean over 2h+1 bins on both axes (a straight
 * part stays straight), h in {1, 2, 3, 5, 8} the smallest that brings the
 * slopes' noise (from the bins' standard errors) under δ_0/10; slopes δ_1 =
 * tp_1/ld_1, δ_i = Δtp/Δld, then made non-increasing by weighted antitonic
 * regression (the main sequence is concave: a noisy dip must not pass for the
 * knee); tol = tol_frac·δ_0; the first n0 where mean − t(0.95, m−1)·s.e. of
 * the last m = trail slopes {δ_n0−m+1..δ_n0} is <= tol and the curve stays
 * flat after it (least-squares slope <= tol up to twice that load, 3 bins at
 * least) marks the knee; N* = the ld of the middle slope of that set, less
 * the running mean's own delay (0.6·h bins). The interval is taken over a
 * trailing set because over all of δ_1..δ_n0 the mean falls to tol only once
 * ~80% of the slopes are flat, i.e. at ~4x the knee; trail = 0 restores that
 * literal form. When N* lands in the lowest quarter of [Nmin, Nmax] (a few
 * huge loads, typically freezes, stretched the range), the analysis is
 * repeated on [Nmin, 3·N*] (twice at most) for resolution.
 *
 * Least-squares fit (n_star_fit): throughput = a·l / (1 + (l/K)^p)^(1/p), the
 * curve whose asymptotes are a·l (the linear part) and a·K (the plateau);
 * p = ∞ is min(a·l, TPmax) itself. With a fixed as above, K and p are chosen
 * by least squares (p among 1..20 and ∞; K on a log grid then by golden
 * section, over loads that leave max(5, 2%) of the windows at or above K), so
 * that the corner windows smear does not pull the knee: n_star_fit = K, where
 * the asymptotes meet — by the Utilization Law, the number of requests in
 * service at saturation (c for c cores). Windows below freeze_frac x the
 * fitted curve are dropped and the fit repeated (3 rounds). The knee must cut
 * the squared error of the best straight line through the origin by 5%, else
 * NAN (never saturated). On smeared curves the intervention analysis reads
 * where the slope has fallen to ~tol, typically past the asymptotes' corner;
 * the fit reads the corner. Both then go through the knee test below.
 * disagree: both finite and differing by more than disagree_frac of the
 * smaller (never when only one stands).
 *
 * tp_max: median normalized throughput of the non-freeze windows with load >=
 * N* (n_star, else n_star_fit), else the fit's plateau, else NAN. slope: a. */
/* N* as implemented (supersedes "N* = the ld of the middle slope" above when
 * trail > 0): the slope test above only locates the plateau's start; n_star
 * is where δ_0·load meets the plateau level, the median throughput of the
 * non-freeze windows at loads >= 2.5·max(start, n_star) (a fixed point), and
 * δ_0 is linear_slope over the lowest-load tenth of the windows rather than
 * the lowest bins; bins too thin are merged into the next, not skipped.
 * Details and reasons: nstar.c's header and docs/report.md "N* as
 * implemented". */
struct tb_nstar_opts {
    uint32_t bins;        /* k (default 100) */
    uint32_t min_per_bin; /* 0 = max(3, samples / (10·k)) */
    double tol_frac;      /* default 0.2 */
    uint32_t trail;       /* default 3; 0 = all slopes δ_1..δ_n0 */
    double freeze_frac;   /* default 0.3 */
    double disagree_frac; /* default 0.2 */
    double slope_hint;    /* expected slope of the linear part, units/s per unit of load
                           * (1e9 / work unit for a tier that waits on nothing); 0 = none.
                           * tb_correlate_analyze sets it from the work unit when 0 and
                           * the series does not wait downstream. */
    bool waits_downstream; /* the series' requests call another tier and wait for it: a
                            * request alone in it completes service/u units in its whole
                            * life, which is longer than its service time, so 1/u is not
                            * the slope of the linear part (no hint is derived from the
                            * work unit). The caller may give slope_hint = (1/u)·S̄/(S̄ +
                            * W̄) (tb_analysis_waits_slope): it shapes the estimates when
                            * the calm stretches' own slope reads 60-93% of it (40-60%
                            * with their load past half the knee it gives), and only
                            * after the knee test has shown the knee found without it. */
    bool assume_knee;     /* skip the knee test and the sanity bound below (the estimates
                           * as found, before v0.3; for comparisons). Default false. */
    const struct tb_stretch *stretch; /* the series' requests' lives by arrival concurrency
                                       * (stretch.h): a candidate that passes the knee test
                                       * is refused when they do not stretch
                                       * (tb_stretch_judge). NULL (default): rule off. */
};
void tb_nstar_opts_default(struct tb_nstar_opts *o);
/* *opts, or the defaults when opts is NULL. */
struct tb_nstar_opts tb_nstar_opts_or_default(const struct tb_nstar_opts *opts);

/* ---- the knee test ---------------------------------------------------------------
 * A knee is shown, not assumed. Each candidate K (n_star, n_star_fit) stands
 * only when (nstar.c "the knee test"):
 *   - at least 33 windows have load (fewer cannot bound anything);
 *   - K >= 0.8: throughput that stops growing before one request is in the
 *     server is limited by something other than its own concurrency (0.8,
 *     not 1: a 1-core server's estimates scatter 0.9-1.1);
 *   - at least 10 windows have load >= K and are not freezes;
 *   - r = after / before has a one-sided 95% upper bound <= 0.6, after =
 *     the slope of the chord from the centroid (mean load, mean throughput)
 *     of the windows in [K/2, K) to that of the non-freeze windows at or
 *     above K, before = the chord from [K/4, K/2) to [K/2, K) but at least
 *     0.7 x the slope through the origin of the windows below K
 *     (delete-a-group jackknife over chunks of 8 consecutive windows, so
 *     bursts do not pass for independent evidence).
 * A candidate that fails becomes NAN. With no candidate standing there is no
 * threshold: no congested window, no episode, no TPmax, no levels. */
/*   - (v0.9, when opts->stretch is given) requests that arrive into about
 *     twice K in flight at their server live clearly longer than those that
 *     arrive alone (tb_stretch_judge; not judged, the knee stands).
 */
/* "knee", "no_congestion" (LINEAR, RISING, FEW_BEYOND, FLAT_LIVES) or "undetermined". */
const char *tb_nstar_why_status(enum tb_nstar_why why);

struct tb_nstar {
    double n_star, n_star_fit, tp_max, slope;
    double delta0;        /* slope of the linear part (intervention analysis) */
    double fit_tp_max;    /* a·K of the fit; NAN when no knee */
    bool disagree;        /* both estimates stand and differ by > disagree_frac */
    uint32_t bins_used;   /* non-empty bins of the (last) pass */
    size_t samples;       /* windows with load > 0 */
    double fit_sharpness; /* p of the fit (INFINITY = a sharp min()); NAN when no knee */
    /* The knee test (of the threshold when one stands, else of the first
     * candidate that failed; see tb_nstar_why). */
    enum tb_nstar_why why;
    double candidate;     /* the K tested; NAN when there was none */
    double knee_ratio;    /* r (NAN when not measured) */
    double knee_ucb;      /* its 95% upper bound (INFINITY when one group holds all the
                           * evidence) */
    size_t beyond;        /* non-freeze windows with load >= candidate */
    double load_top;      /* the highest load of a window that is not a freeze (below
                           * freeze_frac x delta0 x load) */
    struct tb_stretch_verdict lives; /* the stretch rule on candidate (judged false when
                                      * off or not reached) */
    bool hinted;          /* a series that waits downstream: the knee stood as found
                           * without its slope hint (candidate), the estimates are the
                           * hint's (tb_nstar_opts.waits_downstream) */
};

/* One line saying whether and why there is a congestion point, e.g. "no
 * congestion: throughput still rises with load up to 1.93" or "knee shown:
 * beyond 2.01 throughput rises at 1% of the slope below it (at most 2% at 95%
 * confidence, 140 windows)". Returns what snprintf returns. */
int tb_nstar_reason(const struct tb_nstar *ns, char *buf, size_t len);

/* Over (load, normalized throughput) pairs; opts may be NULL (defaults).
 * Returns TB_E_INVAL on bad arguments; too little data is not an error (the
 * estimates are NAN). */
int tb_nstar_estimate(const double *load, const double *tp, size_t n,
                      const struct tb_nstar_opts *o, struct tb_nstar *res);
/* The same over windows (their load and norm_throughput). */
int tb_nstar_windows(const struct tb_window *w, size_t n, const struct tb_nstar_opts *o,
                     struct tb_nstar *res);
/* Main-sequence curve min(slope·load, tp_max); NAN when either is unknown. */
double tb_nstar_curve(const struct tb_nstar *ns, double load);
/* The congestion threshold: n_star when finite, else n_star_fit (may be NAN). */
double tb_nstar_threshold(const struct tb_nstar *ns);
/* The same rule for a stored analysis: the one place that says which N* the
 * congested windows are counted against (report, dashboard, live stream). */
double tb_analysis_threshold(const struct tb_analysis *a);

/* ---- the congestion rule -------------------------------------------------------
 * DESIGN.md "Congested window", "Episode". The one definition of congested,
 * frozen and episode that every view applies — the report and its plot, the
 * dashboard API, the live stream and the stream of a polled database — so
 * that they cannot disagree: a rule is made once from an analysis (or an N*
 * estimate) and its series, then asked.
 *
 * Congested: load >= threshold (a NAN threshold: nothing is). Frozen (a
 * window or a stretch): normalized throughput below freeze_frac x the
 * main-sequence curve min(slope·load, tp_max) at its load. An episode is a
 * maximal run of consecutive windows each congested or stalled (below; consecutive: the next starts
 * where the previous ends; a missing window breaks the run); its kind is
 * TB_EP_FREEZE when its mean normalized throughput is frozen at its mean
 * load, or when 2 consecutive windows of it are (a pause is followed, inside
 * the same run, by the drain of what queued during it, which lifts the run's
 * mean; the means count only for runs of 2 windows or more), else
 * TB_EP_SATURATED; windows (or a run's mean) with calls in
 * flight for TB_STALL_MAX_CALLS_BUSY of the time or more wait on another
 * server and do not count as frozen. Frozen counts for the kind only where the
 * curve promises at least 5 completions over the stretch (from ubar, the
 * series' mean work units per completion): with long requests in short
 * windows, one completion instead of three is chance, not a pause.
 *
 * Stalled (v0.3, the freeze rule that needs no knee): a window whose load
 * is at least TB_STALL_MIN_LOAD, during less than TB_STALL_MAX_CALLS_BUSY of
 * which the server had a call to another tier in flight (calls_busy; else
 * it waits on that tier, whose stall is not its own), and whose normalized
 * throughput is below TB_STALL_FRAC x the promise — the curve at its load
 * when a plateau is known (tp_max), else what one request alone completes
 * (the curve at load 1) — where that promises at least TB_STALL_MIN_EXPECTED
 * completions in the window. A stalled window is in an episode whether or
 * not it is congested (so a GC pause on a lightly loaded server, which has
 * no knee and so no threshold, is still an episode), and an episode holding
 * one is a freeze (one window is enough: a stall is evidence, not noise,
 * once 10 completions were due). The curve at load 1 is promised whatever the cores; the
 * line beyond is not (without a knee, the cores are unknown; the curve is
 * then slope·load, used only for the other kind tests inside episodes, which
 * are all stalls there).
 *
 * A server that waits on its calls (an application server waiting on its
 * database) completes only a few requests' worth per window with one inside,
 * under TB_STALL_MIN_EXPECTED, so the curve at load 1 promises nothing there.
 * Its own work does (v0.4, self_tp): a window is also stalled when, besides
 * load >= TB_STALL_MIN_LOAD and calls_busy < TB_STALL_MAX_CALLS_BUSY, its
 * requests outside calls (load - calls_load, the self load) are at least
 * TB_STALL_MIN_LOAD and its normalized throughput is below TB_STALL_FRAC x
 * self_tp (one request's own work), which promises at least
 * TB_STALL_MIN_EXPECTED completions: requests inside, not waiting on any call,
 * and next to nothing completing — whether or not a knee was shown. Why
 * these bounds: see tb_congestion_stalled in correlate/episodes.c. */
#define TB_STALL_MIN_LOAD 2.0
#define TB_STALL_MIN_EXPECTED 10.0
#define TB_STALL_MAX_CALLS_BUSY 0.5
#define TB_STALL_FRAC 0.15
struct tb_congestion {
    double threshold;   /* congested at load >= threshold; NAN: never */
    double slope;       /* the main-sequence curve: min(slope·load, tp_max) */
    double tp_max;
    double freeze_frac; /* frozen below freeze_frac x the curve (default 0.3) */
    double ubar;        /* mean work units per completion of the series (1 when unknown) */
    double self_tp;     /* what one request in the server's own work completes, in work
                         * units per second (1 s / the work unit), for a series that
                         * calls other tiers (calls_busy > 0 somewhere); NAN otherwise
                         * or when the work unit is unknown (tb_congestion_self) */
};
/* From an N* estimate: threshold tb_nstar_threshold(ns), its curve, and ubar
 * over the series w[0..n). */
void tb_congestion_from_nstar(struct tb_congestion *c, const struct tb_nstar *ns,
                              double freeze_frac, const struct tb_window *w, size_t n);
/* From an analysis (stored, re-estimated live, or just computed): threshold
 * tb_analysis_threshold(a), its slope and tp_max, the default freeze_frac,
 * ubar over w[0..n) (the series the analysis was made from), self_tp from
 * its work unit (tb_congestion_self). */
void tb_congestion_from_analysis(struct tb_congestion *c, const struct tb_analysis *a,
                                 const struct tb_window *w, size_t n);
/* Sets c->self_tp: 1 s / work_unit_ns when the series w[0..n) has calls in
 * flight somewhere (a work unit is the server's own time, its calls
 * subtracted: one request doing its own work completes one unit per unit of
 * time), else NAN (tb_congestion_from_nstar leaves it NAN). */
void tb_congestion_self(struct tb_congestion *c, int64_t work_unit_ns, const struct tb_window *w,
                        size_t n);
/* Mean work units per completion over w[0..n); 1 when there is none. */
double tb_congestion_ubar(const struct tb_window *w, size_t n);
bool tb_congestion_congested(const struct tb_congestion *c, double load);
/* Throughput tp at load `load` is below freeze_frac x the curve (the curve
 * known). */
bool tb_congestion_frozen(const struct tb_congestion *c, double load, double tp);
/* The window is stalled (above): requests inside, next to no completions. */
bool tb_congestion_stalled(const struct tb_congestion *c, const struct tb_window *w);

/* Per-window state for plots and the dashboard's scatter. */
enum tb_win_state { TB_WIN_NORMAL = 0, TB_WIN_CONGESTED = 1, TB_WIN_FROZEN = 2 };
/* st[i] for w[i]: FROZEN inside a freeze episode of ep[0..nep) (sorted) when
 * the window itself is frozen (an episode also holds the drain after a
 * pause, which is not), else CONGESTED when congested or inside an episode,
 * else NORMAL. */
void tb_congestion_states(const struct tb_congestion *c, const struct tb_window *w, size_t n,
                          const struct tb_episode *ep, size_t nep, uint8_t *st);

/* The streaming form: windows of one series pushed one at a time, in time
 * order, as a live capture closes them; tb_episodes_find is this over an
 * array, so offline and live episodes are the same for the same windows and
 * rule. The rule may be replaced between windows (a live re-estimate); an
 * episode in progress is judged by the rule in force when it closes. */
struct tb_episode_track {
    struct tb_congestion rule;
    bool open;
    struct tb_episode ep; /* the episode in progress (start, end, peak) */
    size_t n, run, longest;
    bool stalled; /* the episode in progress holds a stalled window */
    double sum_load, sum_tp, sum_calls;
};
/* What pushing a window did (bits). */
enum {
    TB_TRACK_CONGESTED = 1, /* the window is congested */
    TB_TRACK_OPENED = 2,    /* it opened an episode */
    TB_TRACK_CLOSED = 4,    /* the episode before it ended; *closed holds it */
    TB_TRACK_STALLED = 8,   /* the window is stalled (in an episode, congested or not) */
};
void tb_episode_track_init(struct tb_episode_track *t, const struct tb_congestion *rule);
void tb_episode_track_rule(struct tb_episode_track *t, const struct tb_congestion *rule);
/* The series' work unit changed: a work unit of the windows pushed so far is
 * worth f of the windows that follow (f = new units / old units per
 * completion). The episode in progress (its throughput so far) and the rule
 * in force (slope, tp_max, ubar, self_tp; loads have no unit) are brought to
 * the new units, so that the episode is judged in one unit whether or not a
 * new rule replaces this one before it closes. Without this, a live
 * re-estimate that made the unit 6 times smaller inside a saturated episode
 * left its first windows 6 times too slow for the new rule's curve: a freeze
 * where nothing froze (e2e_live_veth). f not finite or <= 0: nothing. */
void tb_episode_track_rescale(struct tb_episode_track *t, double f);
unsigned tb_episode_track_push(struct tb_episode_track *t, const struct tb_window *w,
                               struct tb_episode *closed);
/* The episode in progress as it stands (mean so far, kind if it closed now);
 * false when none. */
bool tb_episode_track_current(const struct tb_episode_track *t, struct tb_episode *cur);
/* Ends the series: closes the episode in progress into *closed; false when
 * none was open. */
bool tb_episode_track_end(struct tb_episode_track *t, struct tb_episode *closed);

/* ---- N*'s uncertainty ---------------------------------------------------------
 * *est = tb_nstar_windows(w, n, o) and *half the half-width of the 90%
 * interval of its threshold (tb_nstar_threshold), from a delete-a-group
 * jackknife over the knee test's groups (chunks of 8 consecutive windows
 * with load, chunk c in group c mod G, G = min(20, chunks)): each group left
 * out in turn, the whole estimate made again; of the two estimates' relative
 * intervals (those that stand) the wider, times the threshold. *half is NAN
 * when there is no threshold, INFINITY when fewer than 5 groups or when
 * leaving some group out leaves a standing estimate with no knee. Costs G + 1
 * estimates. */
int tb_nstar_interval(const struct tb_window *w, size_t n, const struct tb_nstar_opts *o,
                      struct tb_nstar *est, double *half);

/* ---- episodes -------------------------------------------------------------------
 * w: one series (one tier or one server, one width) in time order. The
 * episodes of the rule tb_congestion_from_nstar(threshold, ns, freeze_frac,
 * w, n) (ns supplies the curve; its own N* is not read). A NAN threshold
 * congests nothing: only stalled windows make episodes then (all freezes).
 * *out is malloc'd (NULL when none) and owned by the
 * caller. */
int tb_episodes_find(const struct tb_window *w, size_t n, double threshold,
                     const struct tb_nstar *ns, double freeze_frac, struct tb_episode **out,
                     size_t *nout);

struct tb_episode_summary {
    uint32_t n, n_freeze;
    double congested_fraction; /* congested windows / windows */
    double per_min;            /* episodes per minute of the series' span */
    int64_t dur_min_ns, dur_median_ns, dur_p95_ns, dur_max_ns; /* nearest rank; 0 when none */
};
int tb_episodes_summary(const struct tb_window *w, size_t n, double threshold,
                        const struct tb_episode *ep, size_t nep, struct tb_episode_summary *s);

/* ---- throughput levels --------------------------------------------------------
 * Plateaus among the normalized throughputs of congested, non-freeze windows
 * (several = a CPU changing frequency). 1-D k-means (exact Lloyd iterations on
 * the sorted values, started at quantiles) for k = 1..max_levels; the largest k
 * is kept whose clusters each hold max(3, 5%) of the values and whose adjacent
 * centres are apart by >= 4 pooled within-cluster standard deviations and by
 * >= 5% of the top centre (splitting one noisy plateau gives ~2.7 sd at most).
 * levels[] receives the centres in ascending order. Values only, no time:
 * tb_levels_over_time is what analyses use. */
int tb_levels_find(const double *tp, size_t n, uint32_t max_levels, double *levels,
                   uint32_t *nlevels);

/* A stretch of time during which a congested series held one level. */
struct tb_level_span {
    int64_t start_ns, end_ns; /* [start of its first window, end of its last) */
    double throughput;        /* mean normalized throughput of its windows, per s */
    uint32_t level;           /* index into the levels (ascending) */
    uint32_t windows;
};

/* Levels over time (levels.c): w one series in time order; the windows the
 * rule calls congested and not frozen with load >= 2 x its threshold (deep
 * enough to be at capacity), in stretches of >= 4 consecutive ones,
 * are cut where their mean steps (binary segmentation: the cut that best
 * separates the two sides' means, kept while they differ by >= 4.5 standard
 * errors, the noise of a window estimated from neighbours' differences, and
 * both sides hold >= 4 windows); the pieces' means, weighted by their
 * windows, are clustered (1-D k-means, k = 1..max_levels; the largest k kept
 * whose levels each hold max(4, 5%) of the windows and whose neighbours are
 * apart by >= 4 window-weighted standard deviations of the pieces around
 * their levels, at least the noise of an average piece's mean, and by >= 5%
 * of the top level). levels[] (max_levels entries) receives the levels ascending, 0 of
 * them when nothing is congested. With spans non-NULL, *spans (malloc'd,
 * owned by the caller; NULL when none) receives the pieces in time order,
 * neighbours of one level joined: when each level held. */
int tb_levels_over_time(const struct tb_window *w, size_t n, const struct tb_congestion *rule,
                        uint32_t max_levels, double *levels, uint32_t *nlevels,
                        struct tb_level_span **spans, size_t *nspans);

/* ---- cross-tier attribution ---------------------------------------------------
 * Pearson correlation between a tier's load and the front tier's mean response
 * time per window, over the windows present in both series (matched on
 * start_ns; both in time order) in which the front tier completed something.
 * *r = NAN with fewer than 3 pairs or a constant series. */
int tb_correlate_load_rt(const struct tb_window *tier, size_t ntier, const struct tb_window *front,
                         size_t nfront, double *r);

/* ---- everything for one series --------------------------------------------------
 * Fills every field of *a from the windows of one series (w as for
 * tb_episodes_find): tier, server, width and the range from the windows,
 * requests = the completions counted, work_unit_ns as given, N* (both), TPmax,
 * slope, congestion and episodes, levels; *ep and *nep the episodes (malloc'd,
 * may be NULL/0). opts may be NULL. */
int tb_correlate_analyze(const struct tb_window *w, size_t n, int64_t work_unit_ns,
                         const struct tb_nstar_opts *o, struct tb_analysis *a,
                         struct tb_episode **ep, size_t *nep);

#endif
