/* SPDX-License-Identifier: MIT */
/* test_nstar.c — N* by the intervention analysis and by the least-squares
 * fit on (load, throughput) clouds of a processor-sharing server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "correlate.h"

#include "test_num.h"

#define MU 100.0 /* work units per second per busy core */

/* One window of a processor-sharing server with c cores: the number of
 * requests in it changes within the window (10 stretches of random length,
 * each holding round(L·(1 + jitter·g)) requests), each core serves one
 * request at full speed, so the work done is Σ min(N, c)·len; load is the
 * time average of N. Throughput gets 5% measurement noise (completions are
 * discrete; units are estimates). A fraction of windows are freezes: the
 * server stopped (GC), load high, almost no output. */
static void cloud(int c, size_t n, double jitter, double freeze, uint64_t seed, double *l,
                  double *t)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        if (unif() < freeze) {
            l[i] = c * (2 + 8 * unif());
            t[i] = MU * c * 0.1 * unif();
            continue;
        }
        double L = unif() * 3 * c + 0.01, tot = 0, sn = 0, sw = 0;
        for (int k = 0; k < 10; k++) {
            double len = unif();
            double nn = fmax(0, nearbyint(L * (1 + jitter * gauss())));
            tot += len;
            sn += nn * len;
            sw += fmin(nn, c) * len;
        }
        l[i] = sn / tot;
        t[i] = MU * sw / tot * (1 + 0.05 * gauss());
    }
}

static void test_cores(void **state)
{
    (void)state;
    enum { N = 6000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    for (int c = 1; c <= 8; c *= 2) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            cloud(c, N, 0.15, 0.03, seed + 10 * (uint64_t)c, l, t);
            struct tb_nstar ns;
            assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
            print_message("c=%d seed=%d n_star=%.3f fit=%.3f tp_max=%.1f slope=%.1f\n", c,
                          (int)seed, ns.n_star, ns.n_star_fit, ns.tp_max, ns.slope);
            assert_true(fabs(ns.n_star - c) <= 0.1 * c);
            assert_true(fabs(ns.n_star_fit - c) <= 0.1 * c);
            assert_false(ns.disagree);
            /* The plateau: c cores at MU each (slightly below: stretches
             * with fewer than c requests just above the knee). */
            assert_true(fabs(ns.tp_max - MU * c) <= 0.05 * MU * c);
            assert_true(fabs(ns.slope - MU) <= 0.1 * MU);
            size_t pos = 0;
            for (size_t i = 0; i < N; i++)
                pos += l[i] > 0;
            assert_int_equal(ns.samples, pos);
        }
    }
    free(l);
    free(t);
}

/* Freezes far above the knee must not drag N* or TPmax: 10% of the
 * windows frozen at up to 10x the knee. */
static void test_freezes(void **state)
{
    (void)state;
    enum { N = 6000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    cloud(4, N, 0.15, 0.10, 5, l, t);
    struct tb_nstar ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    assert_true(fabs(ns.n_star - 4) <= 0.4);
    assert_true(fabs(ns.n_star_fit - 4) <= 0.4);
    assert_true(fabs(ns.tp_max - 400) <= 20);
    assert_true(fabs(tb_nstar_curve(&ns, 2.0) - 2.0 * ns.slope) < 1e-9);
    assert_true(tb_nstar_curve(&ns, 100.0) == ns.tp_max);
    free(l);
    free(t);
}

/* A server that never saturates has no knee: both NAN, no TPmax; too little
 * data is not an error. Windows with zero load are ignored. */
static void test_no_knee(void **state)
{
    (void)state;
    enum { N = 3000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    rs = 3;
    for (size_t i = 0; i < N; i++) {
        l[i] = i % 10 == 0 ? 0 : unif() * 4;
        t[i] = l[i] == 0 ? 0 : MU * l[i] * (1 + 0.05 * gauss());
    }
    struct tb_nstar ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    assert_int_equal(ns.samples, N - N / 10);
    print_message("no knee: n_star=%g fit=%g\n", ns.n_star, ns.n_star_fit);
    assert_true(isnan(ns.n_star_fit));
    assert_true(isnan(ns.n_star));
    assert_true(isnan(ns.tp_max));
    assert_true(isnan(tb_nstar_threshold(&ns)));
    assert_false(ns.disagree);
    assert_true(fabs(ns.slope - MU) < 0.05 * MU);
    assert_int_equal(tb_nstar_estimate(l, t, 2, NULL, &ns), 0);
    assert_true(isnan(ns.n_star) && isnan(ns.n_star_fit));
    assert_int_equal(tb_nstar_estimate(NULL, t, 5, NULL, &ns), TB_E_INVAL);
    free(l);
    free(t);
}

/* The literal form of DESIGN.md step 4 (CI over all of δ_1..δ_n0, trail = 0)
 * is available, and it lands far beyond the knee: the reason for the
 * trailing set. */
static void test_literal_lags(void **state)
{
    (void)state;
    enum { N = 6000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    cloud(2, N, 0.15, 0.0, 7, l, t);
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.trail = 0;
    struct tb_nstar lit, rob;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &lit), 0);
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &rob), 0);
    assert_true(fabs(rob.n_star - 2) <= 0.2);
    assert_true(!(lit.n_star < 2.5)); /* NAN or well past the knee */
    free(l);
    free(t);
}

/* A fully smeared corner: windows that follow the stationary M/M/2 relation
 * L = 2ρ/(1 − ρ²), tp = 2·MU·ρ = 2·MU·(√(1 + L²) − 1)/L (the queue swings so
 * much within a window that the curve bends from the origin on). Its
 * asymptotes MU·L and 2·MU meet at 2, but the low-load windows show less
 * than MU, so asymptotes built on them meet late; the slope hint (MU: what
 * 1e9 / work unit gives for a tier that waits on nothing) puts the corner
 * back. A hint the data do not come near (below 70%) is ignored. */
static void test_slope_hint(void **state)
{
    (void)state;
    enum { N = 6000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    rs = 21;
    for (size_t i = 0; i < N; i++) {
        l[i] = 0.05 + 16 * unif();
        t[i] = 2 * MU * (sqrt(1 + l[i] * l[i]) - 1) / l[i] * (1 + 0.05 * gauss());
    }
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    struct tb_nstar plain, hinted, wrong;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &plain), 0);
    o.slope_hint = MU;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &hinted), 0);
    o.slope_hint = 3 * MU;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &wrong), 0);
    print_message("M/M/2 cloud: fit %.3f (slope %.1f), with hint %.3f (slope %.1f), wrong hint "
                  "%.3f\n",
                  plain.n_star_fit, plain.slope, hinted.n_star_fit, hinted.slope, wrong.n_star_fit);
    assert_true(plain.slope < 0.9 * MU);  /* the bend shows at low load */
    assert_near(hinted.slope, MU, 0);     /* the hint is taken */
    assert_near(hinted.n_star_fit, 2.0, 0.2);
    assert_true(fabs(hinted.n_star_fit - 2) < fabs(plain.n_star_fit - 2));
    assert_near(wrong.slope, plain.slope, 1e-9); /* and ignored when far off */
    assert_near(wrong.n_star_fit, plain.n_star_fit, 1e-9);
    /* A hint far below the data (a server never idle: its fallback service
     * time is a queued life, 8x too long) is ignored too. */
    o.slope_hint = MU / 3;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &wrong), 0);
    assert_near(wrong.slope, plain.slope, 1e-9);
    assert_near(wrong.n_star_fit, plain.n_star_fit, 1e-9);
    free(l);
    free(t);
}

/* An M/M/c server (at most 64 requests in it) seen through 50 ms windows, as
 * tbneck-sim's CPU-bound database is: the queue swings within each window, so
 * a window of mean load near c is partly idle and partly queued, and the
 * binned curve bends well before c and flattens well after it. The arrival
 * rate changes every 20 windows (bursts), over 10 levels from idle to 1.6x
 * capacity; 200 windows, a 10 s capture. Throughput is work done (no
 * discreteness) with 5% noise. */
static void mmc_windows(int c, size_t n, uint64_t seed, double *l, double *t)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 1;
    const double w = 0.05;
    int q = 0;
    double lam = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 20 == 0)
            lam = 1.6 * c * MU * ((double)((i / 20 * 7) % 10) + unif()) / 10;
        double now = 0, sn = 0, sw = 0;
        for (;;) {
            double ra = q < 64 ? lam : 0, rd = MU * (q < c ? q : c), r = ra + rd;
            double dt = r > 0 ? -log(unif()) / r : w;
            double busy = q < c ? q : c;
            if (now + dt >= w) {
                sn += q * (w - now);
                sw += busy * (w - now);
                break;
            }
            sn += q * dt;
            sw += busy * dt;
            now += dt;
            q += unif() * r < ra ? 1 : -1;
        }
        l[i] = sn / w;
        t[i] = MU * sw / w * (1 + 0.05 * gauss());
    }
}

/* The low bias of the intervention analysis on smeared windows. Taking ld_n0
 * (where the binned curve's slope first reaches 0.2·δ_0) as N*, these clouds
 * gave −67% … +72% (mostly 10–50% low: with 200 windows a few noisy bins
 * fire the test inside the bend); N* as the load where δ_0·load meets the
 * plateau the test finds is within ±10%, and so is the fit. */
static void test_smeared_mmc(void **state)
{
    (void)state;
    enum { N = 200 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.slope_hint = MU;
    /* 20 seeds per core count (issue 18: N* checked over >= 20 seeds with a
     * stated pass rate): all 80 within 10%, by both estimates. */
    for (int c = 1; c <= 8; c *= 2) {
        for (uint64_t seed = 1; seed <= 20; seed++) {
            mmc_windows(c, N, seed, l, t);
            struct tb_nstar ns;
            assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
            print_message("M/M/%d seed=%d n_star=%.3f fit=%.3f why=%d K=%.3f r=%.3f ucb=%.3f "
                          "beyond=%zu\n",
                          c, (int)seed, ns.n_star, ns.n_star_fit, (int)ns.why, ns.candidate,
                          ns.knee_ratio, ns.knee_ucb, ns.beyond);
            assert_near(ns.n_star, c, 0.1 * c);
            assert_near(ns.n_star_fit, c, 0.1 * c);
            assert_false(ns.disagree);
        }
    }
    free(l);
    free(t);
}


/* A bursty M/M/1 first-come-first-served server through 50 ms windows, as
 * bench/nstar's py1: 400 users each thinking an exponential time (mean 1 s,
 * 0.33 s during bursts) before a request of exponential work (1 ms, MU1),
 * one worker; bursts and calms of exponential length (means 1 s and 3 s), in
 * continuous time, so that a burst starts or ends anywhere in a window.
 * Throughput is the window's completions / w (discrete, as captured). A
 * burst offers 1.2x the capacity, so its queue builds slowly: many windows
 * reach loads of 2.5-5 while the worker still idled for part of them. */
#define MU1 1000.0 /* completions per second of the worker (1 ms of work each) */

/* One step of the bursty Markov chains below: the next event at total rate r,
 * unless the burst flips (on ~1 s, off ~3 s) or the window ends first; `inside`
 * requests accumulate load over the step. Returns 0 at the window's end, 1
 * when the burst flipped (memoryless: the pending event is redrawn), 2 for an
 * event of the chain. */
static int chain_step(double r, double end, double inside, double *now, double *flip, bool *burst,
                      double *area)
{
    double dt = -log(unif()) / r;
    double next = fmin(fmin(*now + dt, *flip), end);
    *area += inside * (next - *now);
    *now = next;
    if (next == end)
        return 0;
    if (next == *flip) {
        *burst = !*burst;
        *flip = *now - (*burst ? 1 : 3) * log(unif());
        return 1;
    }
    return 2;
}

static void mm1_bursty(size_t n, uint64_t seed, double *l, double *t)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 7;
    const double w = 0.05;
    int q = 0;
    bool burst = false;
    double now = 0, flip = -3 * log(unif());
    for (size_t i = 0; i < n; i++) {
        double end = (double)(i + 1) * w, sn = 0;
        unsigned done = 0;
        for (;;) {
            double ra = (400 - q) / (burst ? 0.33 : 1.0), rd = q ? MU1 : 0;
            int ev = chain_step(ra + rd, end, q, &now, &flip, &burst, &sn);
            if (ev == 0)
                break;
            if (ev == 1)
                continue;
            if (unif() * (ra + rd) < ra) {
                q++;
            } else {
                q--;
                done++;
            }
        }
        l[i] = sn / w;
        t[i] = done / w;
    }
}

/* The plateau level of a single bursty worker. Read as the median throughput
 * of every window at load >= 2.5·N* (v0.4), it takes in the windows where a
 * burst begins, partly idle: N* 0.90 … 1.02 over these 20 seeds, mean 0.976
 * (seed 1: −10%, seed 6: −6%). Read from the windows whose two neighbours
 * are loaded as far (inside a burst, busy throughout): 0.96 … 1.04, mean
 * 0.993. The oracle is the worker itself: N* = 1. */
static void test_bursty_mm1(void **state)
{
    (void)state;
    enum { N = 400 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.slope_hint = MU1;
    double sum = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        mm1_bursty(N, seed, l, t);
        struct tb_nstar ns;
        assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
        print_message("bursty M/M/1 seed=%d n_star=%.3f fit=%.3f why=%d K=%.3f d0=%.1f\n",
                      (int)seed, ns.n_star, ns.n_star_fit, (int)ns.why, ns.candidate, ns.delta0);
        assert_near(ns.n_star, 1, 0.05);
        sum += ns.n_star;
    }
    /* and without the low bias: the old level's mean was 0.976 */
    assert_near(sum / 20, 1, 0.015);
    free(l);
    free(t);
}

/* A light load: a cloud that bends a little (a window's completions lag its
 * load, so the highest-load windows show less than their share) but never
 * flattens, as a 4-core database whose load stays under 2. The fit finds a
 * candidate knee; the knee test refuses it: beyond it, throughput still
 * rises at about 60% of the slope below. No threshold, a reason. */
static void test_light_load_refused(void **state)
{
    (void)state;
    enum { N = 400 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    rs = 41;
    for (size_t i = 0; i < N; i++) {
        l[i] = 2 * unif() * unif() + 0.01;
        double bend = l[i] > 1.2 ? 0.4 * (l[i] - 1.2) : 0;
        t[i] = MU * (l[i] - bend) * (1 + 0.08 * gauss());
    }
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.assume_knee = true;
    struct tb_nstar as, ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &as), 0);
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    char why[192];
    tb_nstar_reason(&ns, why, sizeof why);
    print_message("light: assumed %.3f / %.3f; tested %.3f / %.3f: %s\n", as.n_star,
                  as.n_star_fit, ns.n_star, ns.n_star_fit, why);
    assert_true(isfinite(as.n_star_fit)); /* there is a candidate to refuse */
    assert_true(isnan(ns.n_star) && isnan(ns.n_star_fit));
    assert_true(isnan(tb_nstar_threshold(&ns)) && isnan(ns.tp_max));
    assert_int_equal(ns.why, TB_NSTAR_RISING);
    assert_string_equal(tb_nstar_why_status(ns.why), "no_congestion");
    assert_true(ns.knee_ucb > 0.5);
    assert_false(ns.disagree);
    double top = 0;
    for (size_t i = 0; i < N; i++)
        top = fmax(top, l[i]);
    assert_near(ns.load_top, top, 0);
    char want[64];
    snprintf(want, sizeof want, "no congestion: throughput still rises with load up to %.2f",
             top);
    assert_memory_equal(why, want, strlen(want));
    free(l);
    free(t);
}

/* One request at a time, and throughput that stops growing long before one
 * request is in service (a near-idle server whose clients pace it): the
 * candidate (about 0.05) is below one request, "undetermined". */
static void test_below_one(void **state)
{
    (void)state;
    enum { N = 600 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    rs = 43;
    for (size_t i = 0; i < N; i++) {
        l[i] = 0.2 * unif() + 0.001;
        t[i] = MU * fmin(l[i], 0.05) * (1 + 0.05 * gauss());
    }
    struct tb_nstar ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    char why[192];
    tb_nstar_reason(&ns, why, sizeof why);
    print_message("below one: %s\n", why);
    assert_true(isnan(tb_nstar_threshold(&ns)));
    assert_int_equal(ns.why, TB_NSTAR_BELOW_ONE);
    assert_near(ns.candidate, 0.05, 0.01);
    assert_string_equal(tb_nstar_why_status(ns.why), "undetermined");
    assert_memory_equal(why, "undetermined: the candidate knee 0.05 is below one request", 58);
    free(l);
    free(t);
}

/* Fewer than 33 windows with load cannot show a knee, however sharp. */
static void test_few_windows(void **state)
{
    (void)state;
    double l[32], t[32];
    for (int i = 0; i < 32; i++) {
        l[i] = 0.25 * (i + 1);
        t[i] = MU * fmin(l[i], 2);
    }
    struct tb_nstar ns, as;
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.assume_knee = true;
    assert_int_equal(tb_nstar_estimate(l, t, 32, &o, &as), 0);
    assert_int_equal(tb_nstar_estimate(l, t, 32, NULL, &ns), 0);
    assert_near(as.n_star_fit, 2, 0.05);
    assert_true(isnan(tb_nstar_threshold(&ns)));
    assert_int_equal(ns.why, TB_NSTAR_FEW_WINDOWS);
    char why[192];
    tb_nstar_reason(&ns, why, sizeof why);
    assert_string_equal(why, "undetermined: 32 windows with load, at least 33 needed");
}

/* A single burst of saturation in an otherwise light series (time order):
 * 60 consecutive windows at 2-6x the knee of a 2-core server, 940 below it.
 * Interleaved jackknife groups spread the burst, so the knee is shown. And
 * the same burst made of freezes (no output) shows nothing: a pause is not
 * a plateau. */
static void test_one_burst(void **state)
{
    (void)state;
    enum { N = 1000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    rs = 47;
    for (size_t i = 0; i < N; i++) {
        bool burst = i >= 500 && i < 560;
        l[i] = burst ? 2 * (2 + 4 * unif()) : 1.8 * unif() + 0.01;
        t[i] = MU * fmin(l[i], 2) * (1 + 0.05 * gauss());
    }
    struct tb_nstar ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    print_message("one burst: n_star %.3f fit %.3f r %.3f ucb %.3f beyond %zu\n", ns.n_star,
                  ns.n_star_fit, ns.knee_ratio, ns.knee_ucb, ns.beyond);
    assert_int_equal(ns.why, TB_NSTAR_KNEE);
    assert_near(tb_nstar_threshold(&ns), 2, 0.2);
    assert_true(ns.beyond >= 60);
    for (size_t i = 500; i < 560; i++)
        t[i] = MU * 0.02 * unif();
    assert_int_equal(tb_nstar_estimate(l, t, N, NULL, &ns), 0);
    print_message("one freeze burst: n_star %.3f fit %.3f why %d\n", ns.n_star, ns.n_star_fit,
                  (int)ns.why);
    assert_true(isnan(tb_nstar_threshold(&ns)));
    free(l);
    free(t);
}

/* "The two estimates disagree" needs two estimates. */
static void test_disagree_needs_both(void **state)
{
    (void)state;
    enum { N = 6000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    cloud(2, N, 0.15, 0.0, 9, l, t);
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.bins = 3; /* too coarse for the intervention analysis to find a plateau */
    struct tb_nstar ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
    print_message("coarse: n_star %g fit %g\n", ns.n_star, ns.n_star_fit);
    assert_true(isnan(ns.n_star));
    assert_near(ns.n_star_fit, 2, 0.2);
    assert_false(ns.disagree);
    free(l);
    free(t);
}

/* The slope of the linear part for a tier that waits downstream (no work-
 * unit hint): an M/G/inf tier (no queueing: each request lives R = 5.5 ms
 * on average, exponential, and is worth 1 unit) seen through 50 ms windows
 * in time order, arrivals at a rate that drifts between 50 and 500 per
 * second. By Little's law the slope is 1/R = 181.8 units/s per unit of load.
 * The lowest-load tenth of the windows overstates it (their load came out
 * low against completions that belong to requests of the window before);
 * chunks of consecutive windows do not. */
static void test_waits_slope(void **state)
{
    (void)state;
    enum { N = 2000 };
    const double w = 0.05, R = 0.0055;
    double *l = calloc(N, sizeof *l), *t = calloc(N, sizeof *t);
    rs = 53;
    double now = 0, rate = 100;
    while (now < N * w) {
        rate = fmin(500, fmax(50, rate * exp(0.05 * gauss())));
        now += -log(unif()) / rate;
        double end = now + -log(unif()) * R;
        for (size_t k = (size_t)(now / w); k < N && k * w < end; k++) {
            double lo = fmax(now, k * w), hi = fmin(end, (k + 1) * w);
            l[k] += (hi - lo) / w;
        }
        if (end < N * w)
            t[(size_t)(end / w)] += 1 / w;
    }
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    struct tb_nstar plain, waits;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &plain), 0);
    o.waits_downstream = true;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &waits), 0);
    print_message("M/G/inf: lowest windows %.1f, chunks %.1f, 1/R %.1f\n", plain.delta0,
                  waits.delta0, 1 / R);
    assert_true(plain.delta0 > 1.1 / R);
    assert_near(waits.delta0, 1 / R, 0.05 / R);
    /* And no congestion either way. */
    assert_true(isnan(tb_nstar_threshold(&waits)));
    /* A pause in the quietest stretch (load piles up, nothing completes)
     * is a freeze, not the linear part: the slope stays. (Every window gets
     * a trace of load, so that chunks of 8 windows start at multiples of 8
     * and the pause fills one chunk between quiet ones.) */
    for (size_t i = 0; i < N; i++)
        l[i] += 1e-9;
    size_t q = 8;
    for (size_t i = 8; i + 16 < N; i += 8)
        if (l[i - 8] + l[i + 8] < l[q - 8] + l[q + 8])
            q = i;
    for (size_t i = q; i < q + 8; i++) {
        l[i] += 10;
        t[i] = 0;
    }
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &waits), 0);
    print_message("M/G/inf with a pause: chunks %.1f\n", waits.delta0);
    /* 8%: one chunk fewer to average (+6% here); counting the pause gives
     * less than half the slope. */
    assert_near(waits.delta0, 1 / R, 0.08 / R);
    free(l);
    free(t);
}

/* An application server that waits on its calls, written here as a Markov
 * chain: requests arrive (Poisson; bursts of ~1 s every ~4 s), queue for c
 * cores (each exponential D of work, first come first served), then wait in
 * a call (exponential W, a callee that never queues), then leave; at most 64
 * inside (a connection pool). Between bursts it is 60% busy, in bursts it is
 * offered 1.7x its capacity (bench/nstar appcpu.conf's shape). Load counts
 * both phases; throughput is completions (one unit each). The oracle is the
 * configuration: the linear part is 1/(D + W), the plateau c/D, N* =
 * c·(D + W)/D. */
static void waiting_windows(int c, size_t n, uint64_t seed, double D, double W, double calm,
                            double *l, double *t)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 11;
    const double w = 0.05, cap = c / D;
    int q = 0, nd = 0;
    bool burst = false;
    double now = 0, flip = -3 * log(unif());
    for (size_t i = 0; i < n; i++) {
        double end = (double)(i + 1) * w, sn = 0;
        unsigned done = 0;
        for (;;) {
            double ra = q + nd < 64 ? (burst ? 1.7 : calm) * cap : 0;
            double rc = (q < c ? q : c) / D, rw = nd / W, r = ra + rc + rw;
            int ev = chain_step(r, end, q + nd, &now, &flip, &burst, &sn);
            if (ev == 0)
                break;
            if (ev == 1)
                continue;
            double u = unif() * r;
            if (u < ra) {
                q++;
            } else if (u < ra + rc) {
                q--;
                nd++;
            } else {
                nd--;
                done++;
            }
        }
        l[i] = sn / w;
        t[i] = done / w;
    }
}

/* The slope of a tier that waits on its calls, from the hint (1/u)·S/(S + W)
 * (tb_analysis_waits_slope). Between its bursts this server is
 * 60% busy, so the calm stretches' slope (chunk_slope, all the estimate had
 * before v0.5b) already holds queueing: it reads 0.63-0.91 of 1/(D + W) and
 * N* +7...+57%. With the hint N* is within 4% of c·(D + W)/D on all 20 runs
 * (2 and 4 cores x 10 seeds); from the windows' slope alone 1 of 20 is
 * within 10% (the test allows half). The knee test judges the candidate
 * found without the hint in every run. A hint the data refute (3x too low:
 * a callee that queued lengthens W) is not taken. */
static void test_waits_hint(void **state)
{
    (void)state;
    enum { N = 400, SEEDS = 10 };
    const double D = 0.004, W = 0.0015;
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    int ok_hint = 0, ok_plain = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        for (int c = 2; c <= 4; c += 2) {
            waiting_windows(c, N, seed, D, W, 0.6, l, t);
            double want = c * (D + W) / D;
            struct tb_nstar_opts o;
            tb_nstar_opts_default(&o);
            o.waits_downstream = true;
            struct tb_nstar plain, hinted, wrong;
            assert_int_equal(tb_nstar_estimate(l, t, N, &o, &plain), 0);
            o.slope_hint = 1 / (D + W);
            assert_int_equal(tb_nstar_estimate(l, t, N, &o, &hinted), 0);
            o.slope_hint = 1 / (3 * (D + W));
            assert_int_equal(tb_nstar_estimate(l, t, N, &o, &wrong), 0);
            double kp = tb_nstar_threshold(&plain), kh = tb_nstar_threshold(&hinted);
            print_message("waiting, %d cores, seed %d: N* %.2f hinted (%+.1f%%), %.2f from the "
                          "windows (%+.1f%%), slope %.1f / %.1f for 1/(D+W) %.1f\n",
                          c, (int)seed, kh, 100 * (kh - want) / want, kp,
                          100 * (kp - want) / want, hinted.delta0, plain.delta0, 1 / (D + W));
            assert_true(fabs(kh - want) <= 0.10 * want);
            /* The hint never moves the knee test's baseline: the candidate
             * judged, and its figures, are those found without it (judged
             * on the hint's own candidate, real Tomcat's knee was refused). */
            assert_int_equal(hinted.why, plain.why);
            assert_near(hinted.candidate, plain.candidate, 1e-12);
            assert_near(hinted.knee_ucb, plain.knee_ucb, 1e-12);
            assert_true(hinted.hinted || fabs(plain.delta0 * (D + W) - 1) < 0.07);
            ok_hint++;
            ok_plain += fabs(kp - want) <= 0.10 * want;
            assert_near(wrong.delta0, plain.delta0, 1e-9);
        }
    }
    assert_int_equal(ok_hint, 2 * SEEDS);
    assert_true(ok_plain <= SEEDS);
    /* Busier still between bursts (80%): the calm stretches' slope falls to
     * 0.35-0.66 of the hint. From 0.4 to 0.6 they lie past half the knee
     * the hint gives, so they cannot refute it and it stands (7 of 10 seeds,
     * within 8%); under 0.4 the hint is refused as wrong, as the work
     * unit's is (N* +165/+172% on seeds 3 and 5: not asserted, a known
     * limit). */
    int rescued = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        waiting_windows(2, N, seed, D, W, 0.8, l, t);
        double want = 2 * (D + W) / D;
        struct tb_nstar_opts o;
        tb_nstar_opts_default(&o);
        o.waits_downstream = true;
        struct tb_nstar plain, hinted;
        assert_int_equal(tb_nstar_estimate(l, t, N, &o, &plain), 0);
        o.slope_hint = 1 / (D + W);
        assert_int_equal(tb_nstar_estimate(l, t, N, &o, &hinted), 0);
        double kh = tb_nstar_threshold(&hinted), r = plain.delta0 * (D + W);
        print_message("waiting, 80%% busy between bursts, seed %d: N* %.2f hinted (%+.1f%%), "
                      "windows' slope %.2f of the hint\n", (int)seed, kh,
                      100 * (kh - want) / want, r);
        if (r >= 0.4)
            assert_true(fabs(kh - want) <= 0.10 * want);
        rescued += r >= 0.4 && r < 0.6;
    }
    assert_true(rescued >= 5);
    free(l);
    free(t);
}

/* N*'s interval (for --window auto): the M/M/c windows in time order. With
 * 2000 or 200 windows the 90% interval of a 4-core knee is a few percent
 * wide, not zero, and holds the truth; with 32 windows it is unbounded; a
 * straight line has no N* and no interval. */
static void test_interval(void **state)
{
    (void)state;
    enum { N = 2000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    struct tb_window *w = calloc(N, sizeof *w);
    mmc_windows(4, N, 3, l, t);
    for (size_t i = 0; i < N; i++) {
        w[i].start_ns = (int64_t)i * 50000000;
        w[i].width_ns = 50000000;
        w[i].load = l[i];
        w[i].norm_throughput = t[i];
    }
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    o.slope_hint = MU;
    struct tb_nstar e;
    double half_long, half_short, half;
    assert_int_equal(tb_nstar_interval(w, N, &o, &e, &half_long), 0);
    double k = tb_nstar_threshold(&e);
    assert_int_equal(tb_nstar_interval(w, 200, &o, &e, &half_short), 0);
    print_message("interval: 2000 windows %.3f ± %.3f, 200 windows %.3f ± %.3f\n", k, half_long,
                  tb_nstar_threshold(&e), half_short);
    assert_true(half_long > 0 && half_long < 0.05 * k);
    assert_true(fabs(k - 4) <= half_long + 0.05 * 4);
    assert_true(half_short > 0 && half_short < 0.1 * 4);
    assert_int_equal(tb_nstar_interval(w, 32, &o, &e, &half), 0);
    assert_true(isnan(tb_nstar_threshold(&e)) ? isnan(half) : isinf(half));
    for (size_t i = 0; i < N; i++)
        w[i].norm_throughput = MU * w[i].load;
    assert_int_equal(tb_nstar_interval(w, N, &o, &e, &half), 0);
    assert_true(isnan(tb_nstar_threshold(&e)) && isnan(half));
    assert_int_equal(tb_nstar_interval(NULL, 5, &o, &e, &half), TB_E_INVAL);
    free(w);
    free(l);
    free(t);
}

/* The per-request stretch rule (v0.9): the 2-core cloud of test_cores bends
 * at 2; with a profile whose requests arriving into 4+ in flight (2·K) live
 * as long as those arriving alone the knee is refused (no threshold, status
 * no_congestion, the reason says why); with lives 2.5x longer there it
 * stands unchanged; with too few crowded requests it stands too. */
static void lives(struct tb_stretch *s, double crowded_factor, size_t ncrowded)
{
    memset(s, 0, sizeof *s);
    s->servers = 1;
    for (size_t i = 0; i < 3000; i++) {
        double g = exp(1.5 * gauss());
        s->life[0][tb_stretch_bin((int64_t)(3e5 * g))]++;
        if (i < ncrowded)
            s->life[4][tb_stretch_bin((int64_t)(3e5 * crowded_factor * exp(1.5 * gauss())))]++;
    }
}

static void test_stretch_rule(void **state)
{
    (void)state;
    enum { N = 3000 };
    double *l = malloc(N * sizeof *l), *t = malloc(N * sizeof *t);
    static struct tb_stretch flat, stretched, few;
    cloud(2, N, 0.15, 0.03, 21, l, t);
    rs = 5;
    lives(&flat, 1.0, 1000);
    lives(&stretched, 2.5, 1000);
    lives(&few, 1.0, TB_STRETCH_MIN_REQUESTS - 1);
    struct tb_nstar_opts o;
    tb_nstar_opts_default(&o);
    struct tb_nstar off, ns;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &off), 0);
    assert_int_equal(off.why, TB_NSTAR_KNEE);
    assert_true(fabs(tb_nstar_threshold(&off) - 2) <= 0.2);
    /* Flat lives: refused. */
    o.stretch = &flat;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
    char why[192];
    tb_nstar_reason(&ns, why, sizeof why);
    print_message("flat lives: %s\n", why);
    assert_int_equal(ns.why, TB_NSTAR_FLAT_LIVES);
    assert_string_equal(tb_nstar_why_status(ns.why), "no_congestion");
    assert_true(isnan(ns.n_star) && isnan(ns.n_star_fit) && isnan(tb_nstar_threshold(&ns)));
    assert_true(isnan(ns.tp_max));
    assert_int_equal(ns.lives.from, 4);
    assert_true(ns.lives.judged && ns.lives.flat && ns.lives.ucb < TB_STRETCH_MAX_RATIO);
    const char *want = "no congestion: requests arriving into 4+ in flight live x";
    assert_memory_equal(why, want, strlen(want));
    /* Stretched lives: the knee stands, as without the rule. */
    o.stretch = &stretched;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
    tb_nstar_reason(&ns, why, sizeof why);
    print_message("stretched lives: %s\n", why);
    assert_int_equal(ns.why, TB_NSTAR_KNEE);
    assert_near(ns.n_star, off.n_star, 0);
    assert_near(ns.n_star_fit, off.n_star_fit, 0);
    assert_true(ns.lives.judged && !ns.lives.flat && ns.lives.ratio > 2);
    /* Too few requests arriving into a crowd: no evidence, the knee stands. */
    o.stretch = &few;
    assert_int_equal(tb_nstar_estimate(l, t, N, &o, &ns), 0);
    assert_int_equal(ns.why, TB_NSTAR_KNEE);
    assert_near(tb_nstar_threshold(&ns), tb_nstar_threshold(&off), 0);
    assert_false(ns.lives.judged);
    free(l);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cores),
        cmocka_unit_test(test_freezes),
        cmocka_unit_test(test_no_knee),
        cmocka_unit_test(test_literal_lags),
        cmocka_unit_test(test_slope_hint),
        cmocka_unit_test(test_smeared_mmc),
        cmocka_unit_test(test_bursty_mm1),
        cmocka_unit_test(test_light_load_refused),
        cmocka_unit_test(test_below_one),
        cmocka_unit_test(test_few_windows),
        cmocka_unit_test(test_one_burst),
        cmocka_unit_test(test_disagree_needs_both),
        cmocka_unit_test(test_waits_slope),
        cmocka_unit_test(test_waits_hint),
        cmocka_unit_test(test_interval),
        cmocka_unit_test(test_stretch_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
