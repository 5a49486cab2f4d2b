/* SPDX-License-Identifier: MIT */
/* nstar.c — the congestion point N*: the paper's intervention analysis made
 * robust, and an independent least-squares fit of min(a·load, TPmax).
 *
 * N* by intervention analysis (n_star), as implemented:
 *  1. Windows with load > 0, sorted by load. δ_0 = Σtp / Σload over the
 *     lowest-load max(5, n/10) windows, replaced by the work-unit hint (1/u)
 *     when that ratio is 70-200% of it (linear_slope). tol = 0.2·δ_0.
 *  2. k = 100 even bins over [Nmin, Nmax]; a bin with fewer than
 *     max(3, n/(10k)) windows is merged into the next (not skipped). Per
 *     bin, the mean load and mean throughput of its non-freeze windows
 *     (below 0.3 x the bin's 90th percentile = freeze, left out).
 *  3. Throughput smoothed (running median of 3, then a running mean over
 *     2h + 1 bins on both axes, h the smallest of 1, 2, 3, 5, 8 that brings
 *     the slopes' noise under δ_0/10); slopes δ_1 = tp_1/ld_1, δ_i =
 *     Δtp/Δld; made non-increasing by weighted antitonic regression.
 *  4. The plateau starts at the first n0 where the lower bound of the 90%
 *     confidence interval (mean − t(0.95, m−1)·s.e.) of the trailing m = 3
 *     slopes δ_n0−2..δ_n0 is <= tol and the curve stays flat after it
 *     (least-squares slope <= tol up to twice that load, 3 bins at least);
 *     start = ld at that set's middle slope, less the running mean's delay.
 *     Repeated on [Nmin, 3·start] (twice at most) when start lies in the
 *     lowest quarter of the range. No such n0: N* = NAN (no plateau).
 *  5. N* = level / δ_0: where the linear part meets the plateau. level = the
 *     median throughput of the non-freeze windows at loads >= 2.5·max(start,
 *     N*) whose two neighbours (in time) are loaded as far, iterated from
 *     N* = start to a fixed point (0.5%); with fewer than max(5, n/50) such
 *     windows, any window that far, then the windows >= start.
 * With trail = 0 (the literal form of DESIGN.md step 4: interval over all of
 * δ_1..δ_n0) N* is the paper's ld_n0 itself, without step 5.
 *
 * Where this differs from the paper, and why. The paper takes N* = ld_n0,
 * the load where the slope first becomes negligible. With queueing inside a
 * 50 ms window, a window of mean load near c is partly idle and partly
 * queued: the binned curve bends long before c and flattens long after it,
 * and where its slope first reaches 0.2·δ_0 depends on burstiness and on a
 * few noisy bins (tbneck-sim's CPU-bound tiers, 200 windows: −48% … +5% of c,
 * one run with no knee at all). The slope test still decides whether and
 * where there is a plateau; the number reported is the corner its two
 * unsmeared ends define (Utilization Law: TPmax = c·δ_0 for c cores). For a
 * sharp knee it is ld_n0. δ_0 comes from windows, not bins, because the
 * lowest of k even bins over a range stretched by overload (load 64 at 1
 * core) already reaches into the bend. Thin bins are merged because skipping
 * them left 2 bins on the plateau of a run whose overload loads were spread
 * thinly, and the flatness check then never passed. The plateau is read at
 * 2.5x: just past the bend the windows are still partly idle. Over 60 runs
 * (seeds 1–20 x 1, 2, 4 cores) the runs off by more than 10% were: 1.5x 10,
 * 2x 2, 2.5x 1, 3x 1 (the same run, 1 core seed 19, where the fit is off by
 * as much: −13%), 4x 2. */
#include "correlate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The knee test's constants (see "the knee test" below). */
#define KNEE_CHUNK 8
#define KNEE_GROUPS 20
#define KNEE_MIN_GROUPS 5
#define KNEE_MIN_BEYOND 10
#define KNEE_MAX_RATIO 0.6
/* The slope before K is the chord between the two bands below it, at least
 * this fraction of the slope through the origin (see ksum_ratio). */
#define KNEE_BEFORE_MIN 0.7
/* Below one request in service, with room for the estimates' own error (a
 * 1-core server's knee comes out 0.9-1.1). */
#define KNEE_MIN_LOAD 0.8
/* The slope of a series that waits downstream (see tb_nstar_estimate): its
 * hint (1/u)·S̄/(S̄ + W̄) replaces the calm stretches' slope (chunk_slope)
 * when those read WAITS_HINT_LO-WAITS_HINT_HI of it: calm stretches of a
 * tier that is busy between its bursts already queue, and read low (an app
 * tier offered 1.7x its capacity in bursts, 60% busy between them: 0.64-0.81
 * of 1/R, N* +18...+39%; test_waits_hint's Markov chain 0.63-0.91). Within
 * 7% of the hint the two agree and the stretches' own slope stands
 * (bench/nstar app, whose calm does not queue: 0.95-1.00 on dev seeds 1-10;
 * the reverted v0.5 rule took the hint up to 1.25 and lost 9 of 30 held-out
 * app runs that had passed); above it the hint is the one that is wrong (a
 * callee that queued lengthens W̄). */
#define WAITS_HINT_LO 0.6
#define WAITS_HINT_HI 0.93

void tb_nstar_opts_default(struct tb_nstar_opts *o)
{
    o->bins = 100;
    o->min_per_bin = 0;
    o->tol_frac = 0.2;
    o->trail = 3;
    o->freeze_frac = 0.3;
    o->disagree_frac = 0.2;
    o->slope_hint = 0;
    o->waits_downstream = false;
    o->assume_knee = false;
    o->stretch = NULL;
}

struct tb_nstar_opts tb_nstar_opts_or_default(const struct tb_nstar_opts *opts)
{
    struct tb_nstar_opts o;
    if (opts)
        return *opts;
    tb_nstar_opts_default(&o);
    return o;
}

/* t(0.95, df): the one-sided 95% quantile, i.e. the two-sided 90% interval. */
static double t95(size_t df)
{
    static const double tab[] = {
        0,     6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
        1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721,
        1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
    };
    if (df < TB_ARRAY_SIZE(tab))
        return tab[df];
    /* Beyond 30 degrees of freedom the quantile is 1.645 + ~1.6/df. */
    return 1.645 + 1.6 / (double)df;
}


struct pt {
    double l, t;
    uint32_t grp; /* jackknife group, from the point's position in the input (knee_test) */
    double nb;    /* the lower load of its two neighbours in the input (time) order; 0 for
                   * the first and last (plateau_meet) */
};

static int cmp_pt(const void *a, const void *b)
{
    const struct pt *x = a, *y = b;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

/* Nearest-rank quantile of an unsorted array (sorted in place); NAN when
 * empty. */
static double quantile(double *v, size_t n, double q)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, tb_cmp_double);
    return tb_quantile(v, n, q);
}

static double median3(double a, double b, double c)
{
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    return c < a ? a : (c > b ? b : c);
}

/* ------------------------------------------------ intervention analysis --- */

/* A knee is a knee only if the curve stays flat after it: the least-squares
 * slope of the bins from `from` up to twice its load (at least 3 bins) must
 * be <= tol. Without this, a few noisy slopes on a straight line pass for a
 * knee now and then; with fewer than 3 bins after it the plateau is not
 * observed at all. */
static bool plateau_confirmed(const double *ld, const double *tp, uint32_t from, uint32_t nb,
                              double tol)
{
    uint32_t to = from;
    while (to < nb && (to - from < 3 || ld[to] <= 2 * ld[from]))
        to++;
    if (to - from < 3)
        return false;
    double ml = 0, mt = 0, sxy = 0, sxx = 0;
    for (uint32_t b = from; b < to; b++) {
        ml += ld[b];
        mt += tp[b];
    }
    ml /= to - from;
    mt /= to - from;
    for (uint32_t b = from; b < to; b++) {
        sxy += (ld[b] - ml) * (tp[b] - mt);
        sxx += (ld[b] - ml) * (ld[b] - ml);
    }
    return sxx > 0 && sxy / sxx <= tol;
}

/* Weighted antitonic regression in place (pool adjacent violators): v becomes
 * the closest non-increasing sequence, weight of v[i] = ld[i] − ld[i−1]
 * (ld[0] for v[0]). scratch holds 3·nb doubles. */
static bool antitonic(double *v, const double *ld, uint32_t nb, double *scratch)
{
    double *bs = scratch, *bw = scratch + nb, *bn = scratch + 2 * (size_t)nb;
    uint32_t top = 0;
    for (uint32_t i = 0; i < nb; i++) {
        double w = i ? ld[i] - ld[i - 1] : ld[0];
        if (!(w > 0))
            w = 1e-12;
        bs[top] = v[i] * w;
        bw[top] = w;
        bn[top] = 1;
        top++;
        while (top > 1 && bs[top - 2] / bw[top - 2] < bs[top - 1] / bw[top - 1]) {
            bs[top - 2] += bs[top - 1];
            bw[top - 2] += bw[top - 1];
            bn[top - 2] += bn[top - 1];
            top--;
        }
    }
    uint32_t i = 0;
    for (uint32_t b = 0; b < top; b++)
        for (uint32_t c = 0; c < (uint32_t)bn[b]; c++)
            v[i++] = bs[b] / bw[b];
    return i == nb;
}

/* The slope of the linear part from the lowest loads: Σtp / Σld over the
 * lowest `nlow` (load, tp) pairs, a ratio estimator (a median of tp/ld would
 * be ruled by the noisiest, smallest loads). When a slope hint is given and
 * the data reach 70% of it but not twice it, the hint wins: for a tier that does not wait on
 * another, a request alone in service completes service/u units in its
 * service time, so the slope is 1/u; below it at low load is windows mixing
 * idle and queued moments, above it is selection (a window of little load
 * that still saw a completion got it from a request that mostly lived in the
 * window before). */
static double linear_slope(const double *ld, const double *tp, size_t nlow, double hint)
{
    double sl = 0, st = 0;
    for (size_t b = 0; b < nlow; b++) {
        sl += ld[b];
        st += tp[b];
    }
    double a = sl > 0 ? st / sl : NAN;
    /* Selection lifts the data a little (up to +25% seen); twice the hint
     * and more means the hint is wrong: a server never idle has no isolated
     * request, and the fallback service time (a low quantile of lives that
     * all queued) was 8x the true one on an 8-core database pinned at load
     * 64, which put the knee at 64: no congestion. */
    if (hint > 0 && a >= 0.7 * hint && a <= 2 * hint)
        return hint;
    return a;
}

/* The slope of the linear part for a series that waits downstream (no hint
 * applies): Little's law over stretches of time. Over any stretch, the work
 * completed per unit of load-time is 1/R (R the mean life of its requests,
 * in work units) — but only for a stretch chosen independently of its own
 * requests. Picking the windows of lowest load picks the ones whose load
 * came out low against completions that belong to the window before, and
 * picking stretches of lowest load picks the ones whose requests happened
 * to be short: on an M/G/inf tier with exponential lives (test_waits_slope)
 * those gave 5.7x and 1.4x the true slope. So the stretches are chosen by
 * their neighbours: chunks of KNEE_CHUNK consecutive points (the input's
 * order, time for a series), each ranked by the mean load of the chunks
 * before and after it (the arrival rate carries over, the sizes of its own
 * requests do not), and the slope is Σtp / Σload over the lowest-ranked
 * tenth of the chunks (at least 5), freezes left out: +3% there, and on a simulated app
 * tier (R/D = 1.375) 179 against the true 180 units/s per unit of load,
 * where the lowest-load tenth of the windows gave 221-237 (N* 17% low).
 * NAN with fewer than 5 chunks. */
static double chunk_slope(const struct pt *p, size_t m, double freeze_frac, double *scratch,
                          double *mean_load)
{
    *mean_load = NAN;
    size_t nc = m / KNEE_CHUNK;
    if (nc < 5)
        return NAN;
    double *own = scratch, *rank = scratch + nc, *sorted = scratch + 2 * nc;
    double *ratio = scratch + 3 * nc;
    for (size_t c = 0; c < nc; c++) {
        double sl = 0;
        for (size_t i = c * KNEE_CHUNK; i < (c + 1) * KNEE_CHUNK; i++)
            sl += p[i].l;
        own[c] = sl;
    }
    for (size_t c = 0; c < nc; c++) {
        double sum = 0;
        int k = 0;
        if (c > 0) {
            sum += own[c - 1];
            k++;
        }
        if (c + 1 < nc) {
            sum += own[c + 1];
            k++;
        }
        rank[c] = sorted[c] = sum / k;
    }
    size_t k = TB_MAX((size_t)5, nc / 10);
    double cut = quantile(sorted, nc, (double)k / (double)nc);
    /* The chosen chunks, and each one's own slope. */
    size_t taken = 0;
    for (size_t c = 0; c < nc && taken < k; c++) {
        if (rank[c] > cut)
            continue;
        double sl = 0, st = 0;
        for (size_t i = c * KNEE_CHUNK; i < (c + 1) * KNEE_CHUNK; i++) {
            sl += p[i].l;
            st += p[i].t;
        }
        own[taken] = sl;
        ratio[taken] = sorted[taken] = st / sl;
        taken++;
    }
    /* A stop-the-world pause can fall between two quiet neighbours: its
     * load piles up with next to no output and would rule the sums (one
     * such chunk took a GC-pausing app server's slope from 2300 to 640).
     * As everywhere else, below freeze_frac x the typical value is a
     * freeze and left out. */
    double med = quantile(sorted, taken, 0.5);
    double sl = 0, st = 0;
    size_t used = 0;
    for (size_t c = 0; c < taken; c++)
        if (!(ratio[c] < freeze_frac * med)) {
            sl += own[c];
            st += ratio[c] * own[c];
            used++;
        }
    if (used)
        *mean_load = sl / (double)(used * KNEE_CHUNK);
    return sl > 0 ? st / sl : NAN;
}

/* One pass over [lo, hi] of the points sorted by load. Returns N* or NAN;
 * *delta0 and *nbins report the linear slope and the bins used. */
static double intervention(const struct pt *p, size_t n, double lo, double hi,
                           const struct tb_nstar_opts *o, double d0, uint32_t *nbins,
                           double *scratch)
{
    uint32_t k = o->bins;
    size_t minb = o->min_per_bin ? o->min_per_bin : TB_MAX((size_t)3, n / (10 * (size_t)k));
    double *ld = calloc(k, sizeof *ld), *tp = calloc(k, sizeof *tp);
    double *sm = calloc(k, sizeof *sm), *dl = calloc(k, sizeof *dl);
    double *se2 = calloc(k, sizeof *se2);
    double res = NAN;
    *nbins = 0;
    if (!(d0 > 0) || !ld || !tp || !sm || !dl || !se2)
        goto out;
    double width = (hi - lo) / k;
    if (!(width > 0))
        goto out;
    uint32_t nb = 0;
    size_t i = 0;
    while (i < n && p[i].l < lo)
        i++;
    for (uint32_t b = 0; b < k; b++) {
        double edge = b + 1 == k ? INFINITY : lo + width * (b + 1);
        size_t j = i;
        while (j < n && p[j].l < edge && p[j].l <= hi)
            j++;
        if (j - i >= minb) {
            /* Freeze windows (high load, next to no output) would pull the
             * bin's mean under the main sequence: leave out those below
             * freeze_frac x the bin's 90th percentile. */
            for (size_t x = i; x < j; x++)
                scratch[x - i] = p[x].t;
            double ref = quantile(scratch, j - i, 0.9);
            double sl = 0, st = 0, stt = 0;
            size_t c = 0;
            for (size_t x = i; x < j; x++) {
                if (p[x].t < o->freeze_frac * ref)
                    continue;
                sl += p[x].l;
                st += p[x].t;
                stt += p[x].t * p[x].t;
                c++;
            }
            if (c) {
                ld[nb] = sl / (double)c;
                tp[nb] = st / (double)c;
                /* squared standard error of the bin's mean throughput */
                se2[nb] = c > 1 ? fmax(0, stt - st * st / (double)c) / (double)(c - 1) / (double)c
                                : 0;
                nb++;
            }
        }
        /* A bin with too few windows is not skipped but merged into the
         * next: where overload spreads the loads thinly (past the knee, the
         * plateau), skipping left too few bins to see the curve stay flat. */
        if (j - i >= minb)
            i = j;
    }
    *nbins = nb;
    if (nb < 3)
        goto out;
    /* Running median of 3 (removes single-bin spikes), then a running mean
     * over 2h + 1 bins on both axes (a straight part stays straight, so δ
     * stays at δ_0 below N*). The slope between two smoothed points is the
     * slope over 2h + 1 bins, so its noise falls as 1/(2h + 1): h is the
     * smallest that brings the slopes' typical noise under δ_0/10, so that
     * the confidence bound below is not tripped by noise alone. */
    for (uint32_t b = 0; b < nb; b++)
        sm[b] = (b == 0 || b + 1 == nb) ? tp[b] : median3(tp[b - 1], tp[b], tp[b + 1]);
    for (uint32_t b = 0; b < nb; b++)
        scratch[b] = b ? ld[b] - ld[b - 1] : ld[0];
    double step = quantile(scratch, nb, 0.5);
    for (uint32_t b = 0; b < nb; b++)
        scratch[b] = se2[b];
    double noise2 = quantile(scratch, nb, 0.5);
    uint32_t h = 1;
    static const uint32_t halves[] = {1, 2, 3, 5, 8};
    for (size_t x = 0; x < TB_ARRAY_SIZE(halves); x++) {
        h = halves[x];
        if (sqrt(2 * noise2) / ((2.0 * h + 1) * step) <= 0.1 * d0 || 4 * h >= nb)
            break;
    }
    for (uint32_t b = 0; b < nb; b++)
        dl[b] = ld[b];
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t from = b >= h ? b - h : 0;
        uint32_t to = TB_MIN(b + h, nb - 1);
        double st = 0, sl = 0;
        for (uint32_t x = from; x <= to; x++) {
            st += sm[x];
            sl += dl[x];
        }
        tp[b] = st / (to - from + 1);
        ld[b] = sl / (to - from + 1);
    }
    double tol = o->tol_frac * d0;
    /* DESIGN.md "N*" step 2: the slopes. */
    dl[0] = tp[0] / ld[0];
    for (uint32_t b = 1; b < nb; b++)
        dl[b] = (tp[b] - tp[b - 1]) / (ld[b] - ld[b - 1]);
    /* A main-sequence curve is concave: its slopes only fall. Least-squares
     * non-increasing slopes (pool-adjacent-violators, weighted by the load
     * each slope spans) keep a noisy dip from passing for the knee and a
     * noisy bump from hiding it. */
    if (!antitonic(dl, ld, nb, scratch))
        goto out;
    /* Step 4: the first n0 whose 90% lower confidence bound is <= tol. The
     * interval needs at least `trail` slopes (t(0.95, 1) = 6.3 would let any
     * two slightly different slopes pass for a knee). */
    for (uint32_t n0 = TB_MAX(2u, o->trail); n0 <= nb; n0++) {
        uint32_t first = o->trail && n0 > o->trail ? n0 - o->trail : 0;
        uint32_t m = n0 - first;
        double mean = 0, ss = 0;
        for (uint32_t b = first; b < n0; b++)
            mean += dl[b];
        mean /= m;
        for (uint32_t b = first; b < n0; b++)
            ss += (dl[b] - mean) * (dl[b] - mean);
        double se = sqrt(ss / (m - 1)) / sqrt((double)m);
        if (mean - t95(m - 1) * se <= tol && plateau_confirmed(ld, tp, n0 - 1, nb, tol)) {
            /* The ld of the middle slope of the set (for a sharp knee the
             * set that first passes straddles it: δ0, δ0, 0), moved back by
             * the running mean's own delay: over 2h + 1 bins it turns a
             * corner into a ramp whose slope reaches tol = 0.2·δ0 some 0.6·h
             * bins (of the typical spacing) past the corner. */
            res = fmax(ld[n0 - 1 - m / 2] - 0.6 * h * step, ld[0]);
            break;
        }
    }
out:
    free(ld);
    free(tp);
    free(sm);
    free(dl);
    free(se2);
    return res;
}

/* Where the linear part meets the plateau. `start` is where the slope test
 * says the plateau begins (ld_n0); the plateau level is the median
 * throughput of the non-freeze windows at loads >= 2.5·max(start, N*) whose
 * two neighbours in time are loaded as far (pt.nb), iterated from N* = start
 * to a fixed point, and N* = level / δ_0. With fewer than max(5, 2%) such
 * windows: any window that far (v0.4), then any window >= start.
 *
 * Why not ld_n0 itself: with queueing inside a window, a window of mean load
 * near c is partly idle and partly queued, so the binned curve bends well
 * before c and flattens well after it; where its slope first reaches 0.2·δ_0
 * depends on how bursty the load is and on the noise of a handful of bins,
 * not on c (on tbneck-sim's CPU-bound tiers it scattered over −48% … +5%).
 * The two ends of the curve are not smeared: the linear part (a lone request
 * gets a whole core, δ_0 per unit of load) and the plateau (c cores busy
 * throughout, windows far past the bend). For a sharp knee, level / δ_0 is
 * ld_n0; for a smeared one it is the corner the smearing rounded off.
 * 2.5x: the windows just past where the test fired, or just past N*, are
 * still in the bend (partly idle); well beyond it they are saturated
 * throughout — except where a burst begins or ends inside the window: on
 * one bursty worker (bench/nstar py1) windows of load 2.5-5 still idled
 * ~25% (median 770/s for 1000/s), and the level read 870-900/s. A window
 * whose neighbours are loaded as far lies inside the stretch, busy
 * throughout; choosing windows by their neighbours' load, not by their own
 * throughput, adds no upward bias (an upper quantile would: +9% on Poisson
 * completions of 50 a window). */
#define PLATEAU_FAR 2.5

static double plateau_meet(const struct pt *p, size_t n, double start, double d0,
                           double freeze_frac, double *scratch)
{
    if (!(d0 > 0))
        return NAN;
    /* Freezes (next to no output at high load) are not the plateau: the cut
     * is freeze_frac x the 90th percentile of all windows past the start, so
     * that a far tail made of freezes alone cannot pass for the plateau. */
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].l >= start)
            scratch[c++] = p[i].t;
    if (!c)
        return NAN;
    double cut = freeze_frac * quantile(scratch, c, 0.9);
    size_t need = TB_MAX((size_t)5, n / 50);
    double ns = start;
    for (int it = 0; it < 20; it++) {
        size_t k = 0;
        for (int pass = 0; pass < 3 && k < need; pass++) {
            double from = pass == 2 ? start : PLATEAU_FAR * fmax(start, ns);
            k = 0;
            for (size_t i = 0; i < n; i++)
                if (p[i].l >= from && p[i].t >= cut && (pass || p[i].nb >= from))
                    scratch[k++] = p[i].t;
        }
        if (!k)
            return NAN;
        double next = quantile(scratch, k, 0.5) / d0;
        if (!(next > 0))
            return NAN;
        bool done = fabs(next - ns) <= 0.005 * ns;
        ns = next;
        if (done)
            break;
    }
    return ns;
}

/* ------------------------------------------------------- least squares --- */

/* The fit runs on groups of consecutive points (by load): up to FIT_GROUPS of
 * them, each with its count, mean load and sum of t. With fewer
 * points every point is its own group and the fit is exact; with more, the
 * loads inside a group (1/512 of the windows, close together where the
 * windows are dense, i.e. around the knee) are taken at their mean. */
#define FIT_GROUPS 512

struct grp {
    double n, l, st;
};

/* Knee sharpnesses tried: tp = a·l / (1 + (l/K)^p)^(1/p) tends to a·min(l, K)
 * as p grows (p = 0 below stands for that limit). Both asymptotes — a·l at low
 * load and a·K on the plateau — are physical (one core-second of work per
 * second per request in service, and the capacity), so their intersection K
 * is the congestion point even when windows smear the corner: a window of
 * mean load c is partly idle and partly queued, which bends the cloud below
 * the corner and pulls a sharp min() fit's knee past c. */
static const double sharpness[] = {0, 1, 1.5, 2, 3, 4, 6, 10, 20};

static double knee_shape(double l, double K, double p)
{
    if (p == 0)
        return fmin(l, K);
    double x = l / K;
    return l * exp(-log1p(pow(x, p)) / p);
}

/* Σ St·g and Σ n·g² of a shape over the groups: with slope a the squared
 * error is Σt² − 2a·Σ St·g + a²·Σ n·g². */
static void shape_sums(const struct grp *g, size_t ng, double K, double p, double *sg,
                       double *gg)
{
    *sg = *gg = 0;
    for (size_t i = 0; i < ng; i++) {
        double v = knee_shape(g[i].l, K, p);
        *sg += g[i].st * v;
        *gg += g[i].n * v * v;
    }
}

/* What a shape takes off the squared error, slope fixed at a. */
static double shape_gain(const struct grp *g, size_t ng, double K, double p, double a)
{
    double sg, gg;
    shape_sums(g, ng, K, p, &sg, &gg);
    return 2 * a * sg - a * a * gg;
}

/* Best (p, K) for the used points (sorted by load). The slope a of the linear
 * part comes from the lowest-load tenth of the windows (linear_slope, with the
 * hint); what the fit decides is where the plateau lies and how the corner
 * bends. K is searched on a log grid over [lowest load, the load with
 * max(5, 2%) of the points at or above it], then by golden section. Returns
 * K or NAN; *a_out the slope, *p_out the sharpness. */
static double fit_knee(const struct pt *p, size_t n, const bool *use, double hint, double a_fixed,
                       double *a_out, double *p_out)
{
    *a_out = NAN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += use[i];
    if (m < 10)
        return NAN;
    size_t ngrp = TB_MIN(m, (size_t)FIT_GROUPS);
    struct grp *g = calloc(ngrp, sizeof *g);
    if (!g)
        return NAN;
    double stt = 0, lmin = INFINITY, lsup = NAN, low_l = 0, low_t = 0;
    size_t support = TB_MAX((size_t)5, m / 50), nlow = TB_MAX((size_t)5, m / 10), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!use[i])
            continue;
        size_t gi = k * ngrp / m;
        g[gi].n += 1;
        g[gi].l += p[i].l;
        g[gi].st += p[i].t;
        stt += p[i].t * p[i].t;
        lmin = fmin(lmin, p[i].l);
        if (k < nlow) {
            low_l += p[i].l;
            low_t += p[i].t;
        }
        k++;
        if (k == m - support + 1)
            lsup = p[i].l; /* `support` points lie at or above it */
    }
    for (size_t i = 0; i < ngrp; i++)
        g[i].l /= g[i].n;
    double a = isfinite(a_fixed) ? a_fixed : linear_slope(&low_l, &low_t, 1, hint);
    /* The best straight line through the origin, for comparison. */
    double sg_line, gg_line;
    shape_sums(g, ngrp, INFINITY, 0, &sg_line, &gg_line);
    double sse_line = gg_line > 0 ? stt - sg_line * sg_line / gg_line : stt;
    double best_gain = -INFINITY, best_k = NAN, best_p = NAN;
    if (a > 0 && lmin > 0 && lsup > lmin) {
        enum { GRID = 48 };
        double ll = log(lmin), lh = log(lsup);
        for (size_t s = 0; s < TB_ARRAY_SIZE(sharpness); s++) {
            double sp = sharpness[s], bg = -INFINITY;
            int bi = 0;
            for (int i = 0; i < GRID; i++) {
                double gain = shape_gain(g, ngrp, exp(ll + (lh - ll) * i / (GRID - 1)), sp, a);
                if (gain > bg) {
                    bg = gain;
                    bi = i;
                }
            }
            /* Golden section on log K inside the neighbouring grid cells. */
            double x0 = ll + (lh - ll) * TB_MAX(bi - 1, 0) / (GRID - 1);
            double x3 = ll + (lh - ll) * TB_MIN(bi + 1, GRID - 1) / (GRID - 1);
            const double r = 0.6180339887498949;
            double x1 = x3 - r * (x3 - x0), x2 = x0 + r * (x3 - x0);
            double f1 = shape_gain(g, ngrp, exp(x1), sp, a);
            double f2 = shape_gain(g, ngrp, exp(x2), sp, a);
            for (int it = 0; it < 30; it++) {
                if (f1 > f2) {
                    x3 = x2;
                    x2 = x1;
                    f2 = f1;
                    x1 = x3 - r * (x3 - x0);
                    f1 = shape_gain(g, ngrp, exp(x1), sp, a);
                } else {
                    x0 = x1;
                    x1 = x2;
                    f1 = f2;
                    x2 = x0 + r * (x3 - x0);
                    f2 = shape_gain(g, ngrp, exp(x2), sp, a);
                }
            }
            double K = exp((x1 + x2) / 2), gain = shape_gain(g, ngrp, K, sp, a);
            double Kg = exp(ll + (lh - ll) * bi / (GRID - 1));
            if (bg > gain) {
                gain = bg;
                K = Kg;
            }
            if (gain > best_gain) {
                best_gain = gain;
                best_k = K;
                best_p = sp;
            }
        }
    }
    free(g);
    /* A knee must explain the data clearly better than a straight line
     * through the origin; a server that never saturated has none. */
    if (!isfinite(best_k) || !(stt - best_gain < 0.95 * sse_line))
        return NAN;
    *a_out = a;
    *p_out = best_p == 0 ? INFINITY : best_p;
    return best_k;
}

static double fit_robust(const struct pt *p, size_t n, double freeze_frac, double hint,
                         double a_fixed, double *a_out, double *p_out)
{
    bool *use = malloc((n ? n : 1) * sizeof *use);
    if (!use)
        return NAN;
    for (size_t i = 0; i < n; i++)
        use[i] = true;
    double K = NAN, a = NAN, sp = NAN;
    for (int round = 0; round < 3; round++) {
        K = fit_knee(p, n, use, hint, a_fixed, &a, &sp);
        if (!isfinite(K))
            break;
        /* Freeze windows sit far below the curve; drop them and refit. */
        bool changed = false;
        double pp = isinf(sp) ? 0 : sp;
        for (size_t i = 0; i < n; i++) {
            bool u = p[i].t >= freeze_frac * a * knee_shape(p[i].l, K, pp);
            changed |= u != use[i];
            use[i] = u;
        }
        if (!changed)
            break;
    }
    free(use);
    *a_out = a;
    *p_out = sp;
    return K;
}

/* ---------------------------------------------------------- the knee test --- */

/* A candidate knee K is shown, not assumed (DESIGN.md "N*": "the smallest
 * load beyond which more load brings negligible throughput" is a claim about
 * the windows beyond K, so they must be there and must say so):
 *   after  = the slope of the chord from the centroid (mean load, mean
 *            throughput) of the windows in [K/2, K) — [K/4, K) when that
 *            holds fewer than 3 — to the centroid of the windows at or above
 *            K that are not freezes (below freeze_frac x a·K: a pause says
 *            nothing about where the curve flattens, and would make any K
 *            look flat);
 *   before = the chord from [K/4, K/2) to [K/2, K), but at least
 *            KNEE_BEFORE_MIN x the slope through the origin of the windows
 *            below K;
 *   r = after / before. K stands when at least KNEE_MIN_BEYOND windows lie
 *   at or above it and the one-sided 95% upper bound of r is at most
 *   KNEE_MAX_RATIO: beyond K throughput rises at most 60% as fast as below
 *   (0.5 refused the knee of CPU-bound runs that only just saturate, 18
 *   windows beyond K: r 0.26, bound 0.56; light clouds have r >= 0.6).
 * Chords, not least-squares slopes: the windows beyond K often share one
 * load (a pool or thread cap pins it at 16 while the throughput varies with
 * the CPU's speed), and a slope over no spread of load is noise. Chord
 * against chord: within-window noise flattens every local slope alike —
 * with exponential service, half of a steady stream's load variation is
 * the sizes of its requests, which do not change how many complete, so a
 * light M/M/4 shows a local slope of half the linear part's below K and
 * beyond it — and only the comparison of like with like tells a bend from
 * that. The floor keeps a thin band below K (a server overloaded nearly
 * throughout) from making r large by chance.
 * The bound comes from a delete-a-group jackknife. Windows next to each other
 * in time are alike (a burst lasts many windows), so a bound that treated
 * them as independent would be far too narrow; the points are cut, in the
 * order given (time order for a series), into chunks of KNEE_CHUNK
 * consecutive ones, chunk c joins group c mod G (G = min(KNEE_GROUPS,
 * chunks)), and r is recomputed with each group left out. Interleaving keeps
 * one long burst spread over many groups, so a single transient bottleneck
 * can still be shown.
 *
 * Why: the fit finds some knee in any cloud that bends at all, and a cloud
 * with no congestion bends too (a window's completions lag its load; its
 * requests' sizes vary). On a simulated stack with no bottleneck (a 4-core
 * database whose load never passed 2, idle app servers) the fit put knees
 * at 1.0-2.0 and flagged 2-4% of the windows of every tier; there r is
 * 0.81-0.86, bound 0.96-1.02, and on a light M/M/4 from the independent
 * generator 0.60, bound 0.73. On saturated tiers r is 0.03-0.11, bound under
 * 0.19 (tbneck-sim and the independent generator, 1 to 4 cores, steady or
 * bursty); a database whose load a connection pool pins at 16 while its CPU
 * changes speed: 0.26, bound 0.30. */

/* Sums of one group: through-origin sums of the windows below K; plain sums
 * (load taken relative to K, for precision) of those in [K/4, K/2), in
 * [K/2, K), and of the non-freeze ones at or above K. */
struct ksum {
    double bll, blt;
    double n1, x1, t1; /* [K/4, K/2) */
    double na, xa, ta; /* [K/2, K) */
    double n, x, t;    /* >= K, not freezes */
};

static double ksum_ratio(const struct ksum *s)
{
    /* The band just below K anchors the chord after it; when it holds fewer
     * than 3 windows, the band below that joins it. */
    bool split = s->na >= 3 && s->n1 >= 3;
    double na = s->na, xa = s->xa, ta = s->ta;
    if (s->na < 3) {
        na += s->n1;
        xa += s->x1;
        ta += s->t1;
    }
    if (!(s->bll > 0) || s->n < 3 || na < 3)
        return NAN;
    double dx = s->x / s->n - xa / na;
    if (!(dx > 0))
        return NAN;
    double after = (s->t / s->n - ta / na) / dx;
    /* Before: the same kind of chord one band lower, but at least
     * KNEE_BEFORE_MIN x the slope through the origin (a thin or mixed band
     * makes that chord noise). */
    double before = KNEE_BEFORE_MIN * s->blt / s->bll;
    double dxb = split ? s->xa / s->na - s->x1 / s->n1 : 0;
    if (dxb > 0)
        before = fmax(before, (s->ta / s->na - s->t1 / s->n1) / dxb);
    if (!(before > 0))
        return NAN;
    return after / before;
}

struct knee {
    double ratio, ucb;
    size_t beyond;
};

static void knee_test(const struct pt *p, size_t n, uint32_t groups, double K, double a,
                      double freeze_frac, struct knee *kt)
{
    struct ksum g[KNEE_GROUPS], tot;
    memset(g, 0, sizeof g);
    memset(&tot, 0, sizeof tot);
    kt->ratio = kt->ucb = NAN;
    kt->beyond = 0;
    double cut = a > 0 ? freeze_frac * a * K : -INFINITY;
    for (size_t i = 0; i < n; i++) {
        struct ksum *s = &g[p[i].grp];
        double l = p[i].l, t = p[i].t;
        if (l < K) {
            s->bll += l * l;
            s->blt += l * t;
            if (l >= K / 2) {
                s->na += 1;
                s->xa += l - K;
                s->ta += t;
            } else if (l >= K / 4) {
                s->n1 += 1;
                s->x1 += l - K;
                s->t1 += t;
            }
        } else if (t >= cut) {
            s->n += 1;
            s->x += l - K;
            s->t += t;
            kt->beyond++;
        }
    }
    for (uint32_t j = 0; j < groups; j++) {
        tot.bll += g[j].bll;
        tot.blt += g[j].blt;
        tot.n1 += g[j].n1;
        tot.x1 += g[j].x1;
        tot.t1 += g[j].t1;
        tot.na += g[j].na;
        tot.xa += g[j].xa;
        tot.ta += g[j].ta;
        tot.n += g[j].n;
        tot.x += g[j].x;
        tot.t += g[j].t;
    }
    kt->ratio = ksum_ratio(&tot);
    if (!isfinite(kt->ratio) || groups < 2)
        return;
    double r[KNEE_GROUPS], mean = 0;
    for (uint32_t j = 0; j < groups; j++) {
        struct ksum s = tot;
        s.bll -= g[j].bll;
        s.blt -= g[j].blt;
        s.n1 -= g[j].n1;
        s.x1 -= g[j].x1;
        s.t1 -= g[j].t1;
        s.na -= g[j].na;
        s.xa -= g[j].xa;
        s.ta -= g[j].ta;
        s.n -= g[j].n;
        s.x -= g[j].x;
        s.t -= g[j].t;
        r[j] = ksum_ratio(&s);
        if (!isfinite(r[j])) {
            /* Leaving one group out leaves nothing to measure: the evidence
             * rests on that group alone. */
            kt->ucb = INFINITY;
            return;
        }
        mean += r[j];
    }
    mean /= groups;
    double ss = 0;
    for (uint32_t j = 0; j < groups; j++)
        ss += (r[j] - mean) * (r[j] - mean);
    double se = sqrt((double)(groups - 1) / groups * ss);
    kt->ucb = kt->ratio + t95(groups - 1) * se;
}

static bool knee_passes(const struct knee *kt)
{
    return kt->beyond >= KNEE_MIN_BEYOND && kt->ucb <= KNEE_MAX_RATIO;
}

/* Puts both candidates through the sanity bound and the knee test; a
 * candidate that fails becomes NAN. res->why and the knee_* fields describe
 * the threshold's test when one stands, else the first candidate's failure
 * (the intervention analysis before the fit), else why there was none. */
static void show_knee(const struct pt *p, size_t m, uint32_t groups, const struct tb_nstar_opts *o,
                      double a, struct tb_nstar *res)
{
    double *est[2] = {&res->n_star, &res->n_star_fit};
    bool any = false;
    res->why = TB_NSTAR_LINEAR;
    res->candidate = res->knee_ratio = res->knee_ucb = NAN;
    res->lives = (struct tb_stretch_verdict){0, 0, 0, NAN, NAN, false, false, 0};
    res->beyond = 0;
    for (int e = 0; e < 2; e++) {
        double K = *est[e];
        if (!isfinite(K))
            continue;
        enum tb_nstar_why why;
        struct knee kt = {NAN, NAN, 0};
        struct tb_stretch_verdict lv = {0, 0, 0, NAN, NAN, false, false, 0};
        if (groups < KNEE_MIN_GROUPS) {
            why = TB_NSTAR_FEW_WINDOWS;
        } else if (K < KNEE_MIN_LOAD) {
            /* Throughput that stops growing before one request is in the
             * server on average is limited by something else (the clients,
             * a rate limit, another tier): not this server's congestion. */
            why = TB_NSTAR_BELOW_ONE;
        } else {
            knee_test(p, m, groups, K, a, o->freeze_frac, &kt);
            /* A curve seen rising beyond K says more than "too few
             * windows", so that reason goes first. */
            why = knee_passes(&kt)               ? TB_NSTAR_KNEE
                  : !(kt.ucb <= KNEE_MAX_RATIO)  ? TB_NSTAR_RISING
                                                 : TB_NSTAR_FEW_BEYOND;
            /* The windows say the cloud flattens; the requests say whether
             * anything queued. A long request raises a window's load without
             * raising its completions, so heavy-tailed demands flatten the
             * cloud of a server nobody waits on (docs/report.md "The
             * per-request stretch rule (v0.9)"). */
            if (why == TB_NSTAR_KNEE && o->stretch) {
                tb_stretch_judge(o->stretch, K, &lv);
                if (lv.flat)
                    why = TB_NSTAR_FLAT_LIVES;
            }
        }
        if (why != TB_NSTAR_KNEE)
            *est[e] = NAN;
        /* The first candidate that stands, else the first that failed —
         * but one the windows showed and the requests refuted says more
         * than one the windows already refused. */
        if (!any || (why == TB_NSTAR_KNEE && res->why != TB_NSTAR_KNEE) ||
            (why == TB_NSTAR_FLAT_LIVES && res->why != TB_NSTAR_KNEE &&
             res->why != TB_NSTAR_FLAT_LIVES)) {
            res->why = why;
            res->candidate = K;
            res->knee_ratio = kt.ratio;
            res->knee_ucb = kt.ucb;
            res->beyond = kt.beyond;
            res->lives = lv;
            any = true;
        }
    }
    if (!any && groups < KNEE_MIN_GROUPS)
        res->why = TB_NSTAR_FEW_WINDOWS;
}

/* Both estimates with the linear part's slope d0 (intervention analysis,
 * zoomed in when a few extreme loads squeezed its knee into the first
 * quarter of the range; the fit with its slope fixed at d0). *a and *sp:
 * the fit's slope and sharpness. */
static void estimates(const struct pt *p, size_t m, const struct tb_nstar_opts *o, double d0,
                      double *scratch, struct tb_nstar *res, double *a, double *sp)
{
    double lo = p[0].l, hi = p[m - 1].l;
    uint32_t nb;
    double ns = intervention(p, m, lo, hi, o, d0, &nb, scratch);
    res->delta0 = d0 > 0 ? d0 : NAN;
    res->bins_used = nb;
    for (int zoom = 0; zoom < 2 && isfinite(ns) && ns < lo + 0.25 * (hi - lo); zoom++) {
        double hi2 = TB_MIN(hi, 3 * ns);
        if (!(hi2 > lo) || hi2 >= hi)
            break;
        uint32_t nb2;
        double ns2 = intervention(p, m, lo, hi2, o, d0, &nb2, scratch);
        if (!isfinite(ns2))
            break;
        ns = ns2;
        hi = hi2;
        res->bins_used = nb2;
    }
    res->n_star = o->trail && isfinite(ns) ? plateau_meet(p, m, ns, d0, o->freeze_frac, scratch)
                                           : ns;
    res->n_star_fit = fit_robust(p, m, o->freeze_frac, o->slope_hint, d0, a, sp);
}

/* -------------------------------------------------------------- public --- */

const char *tb_nstar_why_status(enum tb_nstar_why why)
{
    switch (why) {
    case TB_NSTAR_KNEE:
        return "knee";
    case TB_NSTAR_LINEAR:
    case TB_NSTAR_RISING:
    case TB_NSTAR_FEW_BEYOND:
    case TB_NSTAR_FLAT_LIVES:
        return "no_congestion";
    case TB_NSTAR_BELOW_ONE:
    case TB_NSTAR_FEW_WINDOWS:
        break;
    }
    return "undetermined";
}

int tb_nstar_reason(const struct tb_nstar *ns, char *buf, size_t len)
{
    char ucb[32];
    if (isfinite(ns->knee_ucb))
        snprintf(ucb, sizeof ucb, "%.0f%%", 100 * ns->knee_ucb);
    else
        snprintf(ucb, sizeof ucb, "unbounded");
    /* The baseline: alone, or (a busy server, stretch.h) 0 to base_to in
     * flight; short, the sentence is stored in 192 bytes. */
    char lives[128] = "", base[32] = "alone";
    if (ns->lives.base_to)
        snprintf(base, sizeof base, "into 0-%u", ns->lives.base_to);
    if (ns->lives.judged)
        snprintf(lives, sizeof lives, "; lives x%.2f (ucb %.2f, %llu) at %u+ in flight%s%s",
                 ns->lives.ratio, ns->lives.ucb, (unsigned long long)ns->lives.crowded,
                 ns->lives.from, ns->lives.base_to ? " vs " : "",
                 ns->lives.base_to ? base + 5 : "");
    switch (ns->why) {
    case TB_NSTAR_KNEE: {
        int n = snprintf(buf, len,
                         "knee shown: beyond %.2f throughput rises at %.0f%% of the slope below "
                         "it (at most %s at 95%% confidence, %zu windows)%s%s",
                         ns->candidate, 100 * ns->knee_ratio, ucb, ns->beyond,
                         ns->hinted ? "; N* on the calls' slope hint" : "", lives);
        /* Too long with the baseline: without it, rather than cut mid-word. */
        char *vs = ns->lives.base_to && n >= 0 && (size_t)n >= len ? strstr(lives, " vs ") : NULL;
        if (!vs)
            return n;
        *vs = '\0';
        return snprintf(buf, len,
                        "knee shown: beyond %.2f throughput rises at %.0f%% of the slope below "
                        "it (at most %s at 95%% confidence, %zu windows)%s%s",
                        ns->candidate, 100 * ns->knee_ratio, ucb, ns->beyond,
                        ns->hinted ? "; N* on the calls' slope hint" : "", lives);
    }
    case TB_NSTAR_LINEAR:
        return snprintf(buf, len, "no congestion: throughput still rises with load up to %.2f",
                        ns->load_top);
    case TB_NSTAR_RISING:
        return snprintf(buf, len,
                        "no congestion: throughput still rises with load up to %.2f (beyond "
                        "the candidate knee %.2f it rises at %.0f%% of the slope below it, up "
                        "to %s at 95%% confidence; a knee needs at most %.0f%%)",
                        ns->load_top, ns->candidate, 100 * ns->knee_ratio, ucb,
                        100 * KNEE_MAX_RATIO);
    case TB_NSTAR_FEW_BEYOND:
        return snprintf(buf, len,
                        "no congestion: throughput still rises with load up to %.2f (only %zu "
                        "windows at or beyond the candidate knee %.2f; %d needed)",
                        ns->load_top, ns->beyond, ns->candidate, KNEE_MIN_BEYOND);
    case TB_NSTAR_FLAT_LIVES:
        return snprintf(buf, len,
                        "no congestion: requests arriving into %u+ in flight live x%.2f as long "
                        "as those arriving %s (at most x%.2f at 95%%, %llu and %llu requests; "
                        "a knee needs x%.2f; candidate %.2f)",
                        ns->lives.from, ns->lives.ratio, base, ns->lives.ucb,
                        (unsigned long long)ns->lives.crowded, (unsigned long long)ns->lives.alone,
                        TB_STRETCH_MAX_RATIO, ns->candidate);
    case TB_NSTAR_BELOW_ONE:
        return snprintf(buf, len,
                        "undetermined: the candidate knee %.2f is below one request in service "
                        "(%.1f allowing for error), so what limits throughput is not this "
                        "server's concurrency",
                        ns->candidate, KNEE_MIN_LOAD);
    case TB_NSTAR_FEW_WINDOWS:
        break;
    }
    return snprintf(buf, len, "undetermined: %zu windows with load, at least %d needed",
                    ns->samples, KNEE_MIN_GROUPS * KNEE_CHUNK - KNEE_CHUNK + 1);
}



static double threshold_of(double n_star, double n_star_fit)
{
    return isfinite(n_star) ? n_star : n_star_fit;
}

double tb_nstar_threshold(const struct tb_nstar *ns)
{
    return threshold_of(ns->n_star, ns->n_star_fit);
}

double tb_analysis_threshold(const struct tb_analysis *a)
{
    return threshold_of(a->n_star, a->n_star_fit);
}

double tb_nstar_curve(const struct tb_nstar *ns, double load)
{
    if (!isfinite(ns->slope) || !isfinite(ns->tp_max))
        return NAN;
    return fmin(ns->slope * load, ns->tp_max);
}

int tb_nstar_estimate(const double *load, const double *tp, size_t n,
                      const struct tb_nstar_opts *opts, struct tb_nstar *res)
{
    if ((n && (!load || !tp)) || !res)
        return TB_E_INVAL;
    struct tb_nstar_opts o = tb_nstar_opts_or_default(opts);
    if (o.bins < 3 || !(o.tol_frac >= 0) || !(o.freeze_frac >= 0) || !(o.disagree_frac >= 0))
        return TB_E_INVAL;
    memset(res, 0, sizeof *res);
    res->n_star = res->n_star_fit = res->tp_max = res->slope = NAN;
    res->delta0 = res->fit_tp_max = res->fit_sharpness = NAN;
    struct pt *p = malloc((n ? n : 1) * sizeof *p);
    double *scratch = malloc((n + 3 * (size_t)o.bins) * sizeof *scratch);
    if (!p || !scratch) {
        free(p);
        free(scratch);
        return TB_E_NOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (load[i] > 0 && isfinite(load[i]) && isfinite(tp[i]))
            m++;
    /* Jackknife groups of the knee test, from the input order (knee_test). */
    size_t chunks = (m + KNEE_CHUNK - 1) / KNEE_CHUNK;
    uint32_t groups = (uint32_t)TB_MIN(chunks, (size_t)KNEE_GROUPS);
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (load[i] > 0 && isfinite(load[i]) && isfinite(tp[i])) {
            p[m] = (struct pt){load[i], tp[i], (uint32_t)((m / KNEE_CHUNK) % TB_MAX(groups, 1u)),
                               0};
            m++;
        }
    for (size_t i = 1; i + 1 < m; i++)
        p[i].nb = fmin(p[i - 1].l, p[i + 1].l);
    res->samples = m;
    /* Before sorting: the points are still in time order. */
    double chunk_load = NAN;
    double d0_chunks =
        o.waits_downstream ? chunk_slope(p, m, o.freeze_frac, scratch, &chunk_load) : NAN;
    qsort(p, m, sizeof *p, cmp_pt);
    double a = NAN, sp = NAN;
    /* A series that waits downstream and whose calm stretches read low
     * against its hint: the estimates made with the hint (waits_alt), used
     * only once the knee test has shown the knee found without it. */
    struct tb_nstar waits_alt;
    bool have_alt = false;
    double a_alt = NAN, sp_alt = NAN;
    if (m >= 3) {
        /* δ_0 from the lowest-load tenth of the windows (at least 5), not
         * from the lowest bins: even bins over [Nmin, Nmax] are wide when
         * overload stretches the range, and the lowest ones already reach
         * into the bend. With the work-unit hint, linear_slope decides; a
         * series that waits downstream takes chunk_slope. */
        size_t nlow = TB_MIN(m, TB_MAX((size_t)5, m / 10));
        double low_l = 0, low_t = 0;
        for (size_t i = 0; i < nlow; i++) {
            low_l += p[i].l;
            low_t += p[i].t;
        }
        double d0 = isfinite(d0_chunks) ? d0_chunks : linear_slope(&low_l, &low_t, 1, o.slope_hint);
        estimates(p, m, &o, d0, scratch, res, &a, &sp);
        if (isfinite(d0_chunks) && o.slope_hint > 0 && d0_chunks >= 0.4 * o.slope_hint &&
            d0_chunks < WAITS_HINT_HI * o.slope_hint) {
            /* Calm stretches that read low against the hint of a series
             * that waits downstream: the estimates again with the hint, used
             * only after the knee test (below). Under WAITS_HINT_LO, down to
             * the work unit's 40% floor, the stretches refute the hint only
             * when they lie below half the knee it gives (an app tier
             * congested in 65% of its windows had them at 0.55 of it, past
             * that, and read N* +80% without it). */
            waits_alt = *res;
            estimates(p, m, &o, o.slope_hint, scratch, &waits_alt, &a_alt, &sp_alt);
            double thr = tb_nstar_threshold(&waits_alt);
            have_alt = isfinite(thr) && (d0_chunks >= WAITS_HINT_LO * o.slope_hint ||
                                         chunk_load > thr / 2);
        }
        /* The hint was refused (the lowest windows' slope is under 70% of
         * it), but those windows lie, on average, past half the knee the
         * hint itself gives: by its account they are not the linear part
         * but the bend and the plateau (a server overloaded nearly
         * throughout: a one-core run with 84% of its windows congested and
         * steady near-saturation runs came out +42...+49%), so they cannot
         * refute it, and it stands — unless they are below 40% of it,
         * further than queueing took those runs (64-69%): then the hint is
         * wrong (test_slope_hint: a hint 3x too high). */
        if (!isfinite(d0_chunks) && o.slope_hint > 0 && d0 != o.slope_hint &&
            d0 >= 0.4 * o.slope_hint) {
            struct tb_nstar alt = *res;
            double a2 = NAN, sp2 = NAN;
            estimates(p, m, &o, o.slope_hint, scratch, &alt, &a2, &sp2);
            double thr = tb_nstar_threshold(&alt);
            if (isfinite(thr) && low_l / (double)nlow > thr / 2) {
                *res = alt;
                a = a2;
                sp = sp2;
            }
        }
    }
    res->fit_sharpness = isfinite(res->n_star_fit) ? sp : NAN;
    if (isfinite(res->n_star_fit))
        res->fit_tp_max = a * res->n_star_fit;
    /* The highest load reached, freezes aside (a stopped server at load 64
     * is no sign that throughput still rises up to 64). */
    res->load_top = NAN;
    for (size_t i = m; i-- > 0;)
        if (!(p[i].t < o.freeze_frac * res->delta0 * p[i].l)) {
            res->load_top = p[i].l;
            break;
        }
    if (!o.assume_knee)
        show_knee(p, m, groups, &o, isfinite(res->n_star_fit) ? a : res->delta0, res);
    /* The hint of a series that waits downstream shapes the estimates, never
     * the knee test: the test judges the candidates found without it (its
     * baseline), and each one that stood is replaced by its counterpart with
     * the hint. Judged on the hint's own candidate the test had refused
     * real Tomcat's knee (nginx -> Tomcat -> MariaDB, e2e_stack: candidate
     * 3.95 -> 3.53, the slope beyond it up to 63% of the one below, over the
     * 60% limit; docs/DESIGN.md), and the stack lost every congestion and
     * freeze episode. When a candidate that stood has no counterpart, or
     * one below one request in service, both keep the tested values. */
    if (have_alt && isfinite(tb_nstar_threshold(res)) &&
        (!isfinite(res->n_star) || waits_alt.n_star >= KNEE_MIN_LOAD) &&
        (!isfinite(res->n_star_fit) || waits_alt.n_star_fit >= KNEE_MIN_LOAD)) {
        if (isfinite(res->n_star))
            res->n_star = waits_alt.n_star;
        if (isfinite(res->n_star_fit)) {
            res->n_star_fit = waits_alt.n_star_fit;
            a = a_alt;
            sp = sp_alt;
        }
        res->delta0 = waits_alt.delta0;
        res->bins_used = waits_alt.bins_used;
        res->fit_sharpness = isfinite(res->n_star_fit) ? sp : NAN;
        if (isfinite(res->n_star_fit))
            res->fit_tp_max = a * res->n_star_fit;
        res->hinted = true;
    }
    if (!isfinite(res->n_star_fit))
        res->fit_tp_max = res->fit_sharpness = NAN;
    res->slope = isfinite(res->n_star_fit) ? a : res->delta0;
    double thr = tb_nstar_threshold(res);
    if (isfinite(thr)) {
        /* TPmax: the plateau, i.e. the median of the non-freeze windows at or
         * beyond N*. The freeze cut uses the fit's plateau when there is one,
         * else the windows' own 90th percentile. */
        size_t c = 0;
        for (size_t i = 0; i < m; i++)
            if (p[i].l >= thr)
                scratch[c++] = p[i].t;
        double ref = isfinite(res->fit_tp_max) ? res->fit_tp_max : quantile(scratch, c, 0.9);
        size_t k = 0;
        for (size_t i = 0; i < c; i++)
            if (scratch[i] >= o.freeze_frac * ref)
                scratch[k++] = scratch[i];
        res->tp_max = k ? quantile(scratch, k, 0.5) : res->fit_tp_max;
    }
    /* Two estimates that disagree: only when there are two (one alone
     * disagrees with nothing; the report says which one is missing). */
    if (isfinite(res->n_star) && isfinite(res->n_star_fit)) {
        double lo = fmin(res->n_star, res->n_star_fit);
        res->disagree = fabs(res->n_star - res->n_star_fit) > o.disagree_frac * lo;
    }
    free(p);
    free(scratch);
    return 0;
}

int tb_nstar_windows(const struct tb_window *w, size_t n, const struct tb_nstar_opts *o,
                     struct tb_nstar *res)
{
    if ((n && !w) || !res)
        return TB_E_INVAL;
    double *l = malloc((n ? n : 1) * sizeof *l), *t = malloc((n ? n : 1) * sizeof *t);
    if (!l || !t) {
        free(l);
        free(t);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        l[i] = w[i].load;
        t[i] = w[i].norm_throughput;
    }
    int rc = tb_nstar_estimate(l, t, n, o, res);
    free(l);
    free(t);
    return rc;
}

/* ------------------------------------------------------ N*'s uncertainty --- */

/* The relative half-width of a jackknife interval of the replicates r[0..g)
 * around `est`; INFINITY when a replicate is missing. */
static double jack_rel(const double *r, uint32_t g, double est)
{
    double mean = 0, ss = 0;
    for (uint32_t i = 0; i < g; i++) {
        if (!isfinite(r[i]))
            return INFINITY;
        mean += r[i];
    }
    mean /= g;
    for (uint32_t i = 0; i < g; i++)
        ss += (r[i] - mean) * (r[i] - mean);
    return t95(g - 1) * sqrt((double)(g - 1) / g * ss) / est;
}

int tb_nstar_interval(const struct tb_window *w, size_t n, const struct tb_nstar_opts *o,
                      struct tb_nstar *est, double *half)
{
    if ((n && !w) || !est || !half)
        return TB_E_INVAL;
    *half = NAN;
    int rc = tb_nstar_windows(w, n, o, est);
    double k = tb_nstar_threshold(est);
    if (rc || !isfinite(k))
        return rc;
    /* The same groups as the knee test: chunks of KNEE_CHUNK consecutive
     * windows with load, chunk c in group c mod G. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += w[i].load > 0 && isfinite(w[i].load) && isfinite(w[i].norm_throughput);
    uint32_t groups = (uint32_t)TB_MIN((m + KNEE_CHUNK - 1) / KNEE_CHUNK, (size_t)KNEE_GROUPS);
    if (groups < KNEE_MIN_GROUPS) {
        *half = INFINITY;
        return 0;
    }
    struct tb_window *sub = malloc(n * sizeof *sub);
    if (!sub)
        return TB_E_NOMEM;
    double rs[KNEE_GROUPS], rf[KNEE_GROUPS];
    for (uint32_t g = 0; g < groups && !rc; g++) {
        /* Leaving a group out leaves a series with holes; the estimate does
         * not look at time except through the order, which stays. */
        size_t k2 = 0, j = 0;
        for (size_t i = 0; i < n; i++) {
            bool valid = w[i].load > 0 && isfinite(w[i].load) && isfinite(w[i].norm_throughput);
            if (valid && (j++ / KNEE_CHUNK) % groups == g)
                continue;
            sub[k2++] = w[i];
        }
        struct tb_nstar e;
        rc = tb_nstar_windows(sub, k2, o, &e);
        rs[g] = e.n_star;
        rf[g] = e.n_star_fit;
    }
    free(sub);
    if (rc)
        return rc;
    /* Both estimates' intervals, the wider counting: the intervention
     * analysis reads its plateau as a median, and a median of throughputs
     * that come in steps of one completion per window barely moves when a
     * group is left out (a jackknife of a median is known to fail); the
     * fit's knee moves smoothly. Without one group there is no knee at all:
     * the one found rests on it (INFINITY). */
    double rel = 0;
    if (isfinite(est->n_star))
        rel = fmax(rel, jack_rel(rs, groups, est->n_star));
    if (isfinite(est->n_star_fit))
        rel = fmax(rel, jack_rel(rf, groups, est->n_star_fit));
    *half = rel * k;
    return 0;
}
