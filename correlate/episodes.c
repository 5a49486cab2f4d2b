/* SPDX-License-Identifier: MIT */
/* episodes.c — congested windows and episodes, throughput levels, cross-tier
 * attribution, and the analysis of one series that ties them together. */
#include "correlate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ------------------------------------------------------ congestion rule --- */

/* Consecutive frozen windows that make an episode a freeze (2 x 50 ms). */
#define FREEZE_RUN 2
/* Completions the curve promises over a stretch before "next to none" can be
 * told from chance: with 5 expected, 0 or 1 happen 4% of the time. */
#define FREEZE_MIN_EXPECTED 5.0
/* correlate's default freeze_frac (tb_nstar_opts_default). */
#define FREEZE_FRAC_DEFAULT 0.3

static double curve(const struct tb_congestion *c, double load)
{
    if (!isfinite(c->slope))
        return NAN;
    /* No plateau shown: the straight line (only tb_congestion_stalled's
     * load 1 is promised whatever the cores). */
    return isfinite(c->tp_max) ? fmin(c->slope * load, c->tp_max) : c->slope * load;
}

double tb_congestion_ubar(const struct tb_window *w, size_t n)
{
    double units = 0, comps = 0;
    for (size_t i = 0; i < n; i++) {
        units += w[i].work_units;
        comps += w[i].completions;
    }
    return comps > 0 && units > 0 ? units / comps : 1.0;
}

void tb_congestion_from_nstar(struct tb_congestion *c, const struct tb_nstar *ns,
                              double freeze_frac, const struct tb_window *w, size_t n)
{
    c->threshold = tb_nstar_threshold(ns);
    c->slope = ns->slope;
    c->tp_max = ns->tp_max;
    c->freeze_frac = freeze_frac;
    c->ubar = tb_congestion_ubar(w, n);
    c->self_tp = NAN;
}

void tb_congestion_self(struct tb_congestion *c, int64_t work_unit_ns, const struct tb_window *w,
                        size_t n)
{
    bool calls = false;
    for (size_t i = 0; i < n && !calls; i++)
        calls = w[i].calls_busy > 0;
    c->self_tp = calls && work_unit_ns > 0 ? (double)TB_NS_PER_SEC / (double)work_unit_ns : NAN;
}

void tb_congestion_from_analysis(struct tb_congestion *c, const struct tb_analysis *a,
                                 const struct tb_window *w, size_t n)
{
    c->threshold = tb_analysis_threshold(a);
    c->slope = a->slope;
    c->tp_max = a->tp_max;
    c->freeze_frac = FREEZE_FRAC_DEFAULT;
    c->ubar = tb_congestion_ubar(w, n);
    tb_congestion_self(c, a->work_unit_ns, w, n);
}

bool tb_congestion_congested(const struct tb_congestion *c, double load)
{
    return isfinite(c->threshold) && load >= c->threshold;
}

bool tb_congestion_frozen(const struct tb_congestion *c, double load, double tp)
{
    double cv = curve(c, load);
    return isfinite(cv) && tp < c->freeze_frac * cv;
}

/* Frozen over `dur_ns`, and the curve promising at least FREEZE_MIN_EXPECTED
 * completions there: with 30 ms requests in 50 ms windows, a window with a
 * single completion is noise, not a pause. */
static bool frozen_over(const struct tb_congestion *c, double load, double tp, int64_t dur_ns)
{
    double expected = curve(c, load) * (double)dur_ns / (double)TB_NS_PER_SEC / c->ubar;
    return tb_congestion_frozen(c, load, tp) && expected >= FREEZE_MIN_EXPECTED;
}

/* The freeze rule that needs no knee (correlate.h, "Stalled"). Why two
 * requests' worth of load: on a server that serves one request at a time a
 * window can pass with no completion whenever one request outlives it (an
 * exponential demand does so e^-(w/s) of the time, often enough over hours
 * of windows); requests piling up with none leaving is what a pause does.
 * Why 10 completions promised and 15% of them: fewer than 1.5 of 10
 * (Poisson) has odds 5e-4, and without a knee the promise is one request's
 * worth, which a healthy server with two or more inside exceeds (with two
 * cores, at most 1 of 20 has odds ~4e-8); a server that completes 200
 * requests/s with one request in it promises 10 per 50 ms. Completions are
 * not Poisson when the load came late in the window (a burst whose requests
 * finish in the next one): report_gc.conf seed 5 had a healthy window at
 * load 3.05 with 6 completions of 21 promised (28%), which 30% called a
 * stall; a pause's whole windows have none. gc.conf seed 11 had a 118 ms
 * pause on a server with a knee whose one request's worth is 7.7 completions
 * and its plateau 19.5: the curve at the load is what a knee buys. */
bool tb_congestion_stalled(const struct tb_congestion *c, const struct tb_window *w)
{
    /* A server with a call of its own in flight for most of the window
     * waits on another server, whose stall is that one's: a front tier piles
     * up behind a paused application server (its requests in calls, or
     * queued for a pooled connection that is stuck in one) just as the
     * paused one does. A server that pauses itself sends nothing, and what
     * it had sent comes back within its callee's response time. */
    if (!(w->load >= TB_STALL_MIN_LOAD) || w->calls_busy >= TB_STALL_MAX_CALLS_BUSY)
        return false;
    /* What the server promises at this load: with a knee shown, the curve
     * (its plateau is measured); without one, what one request alone would
     * complete: a server never does less with more inside, whatever its
     * cores, but the line beyond is not promised (a 2-core database without
     * a knee at load 3.6 completes 2 requests' worth, half of slope x 3.6). */
    double promise = isfinite(c->tp_max) ? curve(c, w->load) : curve(c, 1.0);
    double per_promise = (double)w->width_ns / (double)TB_NS_PER_SEC / c->ubar;
    if (promise * per_promise >= TB_STALL_MIN_EXPECTED &&
        w->norm_throughput < TB_STALL_FRAC * promise)
        return true;
    /* A server that waits on its calls completes a few requests' worth per
     * window with one inside (real Tomcat, 99% of each request waiting on
     * MariaDB: about 5), so the line promises nothing there and its pauses
     * were found only when the knee test happened to accept its knee. Its
     * own work promises: a unit is its own time (calls subtracted), so one
     * request outside calls completes self_tp units per second; with two
     * requests' worth outside calls (load - calls_load: not waiting on any
     * call; a burst that came late and sits in its calls has next to no
     * self load) and next to nothing completing, it is stopped, knee or
     * not. The same 15% and 10 completions as above. */
    double self_load = w->load - w->calls_load;
    return isfinite(c->self_tp) && self_load >= TB_STALL_MIN_LOAD &&
           c->self_tp * per_promise >= TB_STALL_MIN_EXPECTED &&
           w->norm_throughput < TB_STALL_FRAC * c->self_tp;
}

void tb_congestion_states(const struct tb_congestion *c, const struct tb_window *w, size_t n,
                          const struct tb_episode *ep, size_t nep, uint8_t *st)
{
    for (size_t i = 0; i < n; i++)
        st[i] = tb_congestion_congested(c, w[i].load) ? TB_WIN_CONGESTED : TB_WIN_NORMAL;
    size_t k = 0;
    for (size_t e = 0; e < nep; e++) {
        while (k < n && w[k].start_ns < ep[e].start_ns)
            k++;
        for (size_t i = k; i < n && w[i].start_ns < ep[e].end_ns; i++) {
            st[i] = TB_MAX(st[i], (uint8_t)TB_WIN_CONGESTED);
            if (ep[e].kind == TB_EP_FREEZE &&
                tb_congestion_frozen(c, w[i].load, w[i].norm_throughput))
                st[i] = TB_WIN_FROZEN;
        }
    }
}

/* -------------------------------------------------------------- episodes --- */

void tb_episode_track_init(struct tb_episode_track *t, const struct tb_congestion *rule)
{
    memset(t, 0, sizeof *t);
    t->rule = *rule;
}

void tb_episode_track_rule(struct tb_episode_track *t, const struct tb_congestion *rule)
{
    t->rule = *rule;
}

void tb_episode_track_rescale(struct tb_episode_track *t, double f)
{
    if (!(f > 0) || !isfinite(f))
        return;
    t->sum_tp *= f;
    t->rule.slope *= f;
    t->rule.tp_max *= f;
    t->rule.ubar *= f;
    t->rule.self_tp *= f;
}

/* The episode in progress with its mean and kind as they stand. */
static void track_fill(const struct tb_episode_track *t, struct tb_episode *e)
{
    *e = t->ep;
    e->mean_load = t->sum_load / (double)t->n;
    e->throughput = t->sum_tp / (double)t->n;
    /* Freeze: the run's mean throughput is far below the curve, or it holds
     * FREEZE_RUN consecutive windows that are: a stop-the-world pause is
     * followed by the drain of what queued during it, at full speed and
     * inside the same run of congested windows, so the run's mean alone
     * would look saturated. */
    /* Frozen stretches of a server that waits on its calls are its callee's
     * (tb_congestion_stalled). */
    /* One window alone is judged by the stall test only (15%, 10
     * completions): at 30% and 5, a saturated window with a late burst
     * passed for a pause (cause-app-cpu.conf seed 1: 3 completions of 15). */
    bool waits = t->sum_calls / (double)t->n >= TB_STALL_MAX_CALLS_BUSY;
    e->kind = t->stalled || t->longest >= FREEZE_RUN ||
                      (!waits && t->n >= FREEZE_RUN &&
                       frozen_over(&t->rule, e->mean_load, e->throughput,
                                   e->end_ns - e->start_ns))
                  ? TB_EP_FREEZE
                  : TB_EP_SATURATED;
}

bool tb_episode_track_current(const struct tb_episode_track *t, struct tb_episode *cur)
{
    if (!t->open)
        return false;
    track_fill(t, cur);
    return true;
}

bool tb_episode_track_end(struct tb_episode_track *t, struct tb_episode *closed)
{
    if (!t->open)
        return false;
    track_fill(t, closed);
    t->open = false;
    return true;
}

unsigned tb_episode_track_push(struct tb_episode_track *t, const struct tb_window *w,
                               struct tb_episode *closed)
{
    unsigned r = 0;
    bool congested = tb_congestion_congested(&t->rule, w->load);
    bool stalled = tb_congestion_stalled(&t->rule, w);
    /* DESIGN.md "Episode": a maximal run of consecutive windows each
     * congested or stalled; a missing window breaks the run. */
    if (t->open && (!(congested || stalled) || w->start_ns != t->ep.end_ns) &&
        tb_episode_track_end(t, closed))
        r |= TB_TRACK_CLOSED;
    if (!(congested || stalled))
        return r;
    r |= (congested ? TB_TRACK_CONGESTED : 0u) | (stalled ? TB_TRACK_STALLED : 0u);
    if (!t->open) {
        r |= TB_TRACK_OPENED;
        t->open = true;
        memset(&t->ep, 0, sizeof t->ep);
        t->ep.start_ns = w->start_ns;
        t->n = t->run = t->longest = 0;
        t->stalled = false;
        t->sum_load = t->sum_tp = t->sum_calls = 0;
    }
    t->stalled |= stalled;
    t->sum_calls += w->calls_busy;
    t->ep.end_ns = w->start_ns + w->width_ns;
    t->ep.peak_load = fmax(t->ep.peak_load, w->load);
    t->sum_load += w->load;
    t->sum_tp += w->norm_throughput;
    t->n++;
    t->run = frozen_over(&t->rule, w->load, w->norm_throughput, w->width_ns) &&
                     w->calls_busy < TB_STALL_MAX_CALLS_BUSY
                 ? t->run + 1
                 : 0;
    t->longest = TB_MAX(t->longest, t->run);
    return r;
}

static int episodes_of_rule(const struct tb_congestion *rule, const struct tb_window *w, size_t n,
                            struct tb_episode **out, size_t *nout);

int tb_episodes_find(const struct tb_window *w, size_t n, double threshold,
                     const struct tb_nstar *ns, double freeze_frac, struct tb_episode **out,
                     size_t *nout)
{
    if ((n && !w) || !ns || !out || !nout)
        return TB_E_INVAL;
    /* A NAN threshold congests nothing, but stalls are still episodes. */
    struct tb_congestion rule;
    tb_congestion_from_nstar(&rule, ns, freeze_frac, w, n);
    rule.threshold = threshold;
    return episodes_of_rule(&rule, w, n, out, nout);
}

/* The episodes of `rule` over w[0..n) (tb_episodes_find). */
static int episodes_of_rule(const struct tb_congestion *rule, const struct tb_window *w, size_t n,
                            struct tb_episode **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    struct tb_episode_track t;
    tb_episode_track_init(&t, rule);
    struct tb_episode *ep = NULL;
    size_t nep = 0, cap = 0;
    for (size_t i = 0; i <= n; i++) {
        struct tb_episode e;
        bool closed = i < n ? (tb_episode_track_push(&t, &w[i], &e) & TB_TRACK_CLOSED) != 0
                            : tb_episode_track_end(&t, &e);
        if (!closed)
            continue;
        if (tb_grow(&ep, &cap, nep + 1, sizeof *ep)) {
            free(ep);
            return TB_E_NOMEM;
        }
        ep[nep++] = e;
    }
    *out = ep;
    *nout = nep;
    return 0;
}

int tb_episodes_summary(const struct tb_window *w, size_t n, double threshold,
                        const struct tb_episode *ep, size_t nep, struct tb_episode_summary *s)
{
    if ((n && !w) || (nep && !ep) || !s)
        return TB_E_INVAL;
    memset(s, 0, sizeof *s);
    s->n = (uint32_t)nep;
    size_t congested = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    const struct tb_congestion rule = {.threshold = threshold};
    for (size_t i = 0; i < n; i++) {
        congested += tb_congestion_congested(&rule, w[i].load);
        lo = TB_MIN(lo, w[i].start_ns);
        hi = TB_MAX(hi, w[i].start_ns + w[i].width_ns);
    }
    s->congested_fraction = n ? (double)congested / (double)n : 0;
    double minutes = n ? (double)(hi - lo) / (60.0 * (double)TB_NS_PER_SEC) : 0;
    s->per_min = minutes > 0 ? (double)nep / minutes : 0;
    if (!nep)
        return 0;
    int64_t *d = malloc(nep * sizeof *d);
    if (!d)
        return TB_E_NOMEM;
    for (size_t i = 0; i < nep; i++) {
        d[i] = ep[i].end_ns - ep[i].start_ns;
        s->n_freeze += ep[i].kind == TB_EP_FREEZE;
    }
    qsort(d, nep, sizeof *d, tb_cmp_i64);
    s->dur_min_ns = d[0];
    s->dur_max_ns = d[nep - 1];
    s->dur_median_ns = tb_quantile_i64(d, nep, 0.5);
    s->dur_p95_ns = tb_quantile_i64(d, nep, 0.95);
    free(d);
    return 0;
}

/* ----------------------------------------------------------- attribution --- */

int tb_correlate_load_rt(const struct tb_window *tier, size_t ntier, const struct tb_window *front,
                         size_t nfront, double *r)
{
    if ((ntier && !tier) || (nfront && !front) || !r)
        return TB_E_INVAL;
    *r = NAN;
    size_t cap = TB_MIN(ntier, nfront);
    double *x = malloc((cap ? cap : 1) * sizeof *x), *y = malloc((cap ? cap : 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return TB_E_NOMEM;
    }
    size_t i = 0, j = 0, m = 0;
    while (i < ntier && j < nfront) {
        if (tier[i].start_ns < front[j].start_ns) {
            i++;
        } else if (tier[i].start_ns > front[j].start_ns) {
            j++;
        } else {
            if (front[j].completions) {
                x[m] = tier[i].load;
                y[m] = front[j].rt_mean_ns;
                m++;
            }
            i++;
            j++;
        }
    }
    *r = tb_pearson(x, y, m);
    free(x);
    free(y);
    return 0;
}

/* -------------------------------------------------------------- analysis --- */

int tb_correlate_analyze(const struct tb_window *w, size_t n, int64_t work_unit_ns,
                         const struct tb_nstar_opts *opts, struct tb_analysis *a,
                         struct tb_episode **ep, size_t *nep)
{
    if ((n && !w) || !a || !ep || !nep)
        return TB_E_INVAL;
    struct tb_nstar_opts o = tb_nstar_opts_or_default(opts);
    /* The work unit's slope, 1/u, is the linear part of a tier that waits
     * on nothing; one that waits on its calls completes the same units over
     * a longer life (slope (1/u)·D/R): with the hint, app tiers came out at
     * about c instead of c·R/D (-35...-50%). */
    if (!(o.slope_hint > 0) && !o.waits_downstream && work_unit_ns > 0)
        o.slope_hint = (double)TB_NS_PER_SEC / (double)work_unit_ns;
    for (size_t i = 1; i < n; i++)
        if (w[i].start_ns <= w[i - 1].start_ns || w[i].tier != w[0].tier ||
            w[i].server != w[0].server || w[i].width_ns != w[0].width_ns)
            return TB_E_INVAL; /* not one series in time order */
    memset(a, 0, sizeof *a);
    *ep = NULL;
    *nep = 0;
    if (n) {
        a->tier = w[0].tier;
        a->server = w[0].server;
        a->width_ns = w[0].width_ns;
        a->from_ns = w[0].start_ns;
        a->to_ns = w[n - 1].start_ns + w[n - 1].width_ns;
    }
    for (size_t i = 0; i < n; i++)
        a->requests += w[i].completions;
    a->work_unit_ns = work_unit_ns;
    struct tb_nstar ns;
    int rc = tb_nstar_windows(w, n, &o, &ns);
    if (rc)
        return rc;
    a->n_star = ns.n_star;
    a->n_star_fit = ns.n_star_fit;
    a->tp_max = ns.tp_max;
    a->slope = ns.slope;
    a->disagree = ns.disagree;
    a->n_star_why = ns.why;
    a->method_version = TB_ANALYSIS_VERSION;
    tb_nstar_reason(&ns, a->n_star_reason, sizeof a->n_star_reason);
    double thr = tb_nstar_threshold(&ns);
    a->n_star_used = thr;
    /* The rule every view rebuilds from this analysis (tb_congestion_from_analysis):
     * with the work unit, a server waiting on its calls has its own work's
     * promise (correlate.h "Stalled"). */
    struct tb_congestion rule;
    tb_congestion_from_nstar(&rule, &ns, o.freeze_frac, w, n);
    tb_congestion_self(&rule, work_unit_ns, w, n);
    struct tb_episode *e = NULL;
    size_t ne = 0;
    if ((rc = episodes_of_rule(&rule, w, n, &e, &ne)))
        return rc;
    struct tb_episode_summary s;
    if ((rc = tb_episodes_summary(w, n, thr, e, ne, &s))) {
        free(e);
        return rc;
    }
    a->congested_fraction = s.congested_fraction;
    a->episodes_per_min = s.per_min;
    a->n_episodes = s.n;
    a->n_freeze = s.n_freeze;
    a->ep_dur_min_ns = s.dur_min_ns;
    a->ep_dur_median_ns = s.dur_median_ns;
    a->ep_dur_p95_ns = s.dur_p95_ns;
    a->ep_dur_max_ns = s.dur_max_ns;
    /* Levels among congested windows that are not freezes, over time. */
    rc = tb_levels_over_time(w, n, &rule, (uint32_t)TB_ARRAY_SIZE(a->levels), a->levels,
                             &a->n_levels, NULL, NULL);
    if (rc) {
        free(e);
        return rc;
    }
    *ep = e;
    *nep = ne;
    return 0;
}
