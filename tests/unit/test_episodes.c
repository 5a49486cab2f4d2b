/* SPDX-License-Identifier: MIT */
/* test_episodes.c — congested windows, episodes and their kinds, summary
 * figures, the one-series analysis, load/response-time attribution, and the
 * streaming form of the episode rule against the offline one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "correlate.h"

/* |a - b| <= eps, printing both values on failure (NAN fails). */
#define assert_near(a, b, eps)                                                             \
    do {                                                                                   \
        double a_ = (a), b_ = (b), e_ = (eps);                                             \
        if (!(fabs(a_ - b_) <= e_))                                                        \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, e_);            \
    } while (0)

#define MS TB_NS_PER_MS
#define W (50 * MS)

static void set(struct tb_window *w, size_t k, double load, double tp)
{
    memset(&w[k], 0, sizeof w[k]);
    w[k].start_ns = (int64_t)k * W;
    w[k].width_ns = W;
    w[k].tier = 3;
    w[k].load = load;
    w[k].norm_throughput = tp;
    w[k].completions = (uint32_t)(tp / 20);
}

/* A hand-made series against a given main-sequence curve (slope 100/s per
 * unit load, plateau 400/s, N* = 4). */
static void test_hand(void **state)
{
    (void)state;
    enum { N = 1200 };
    struct tb_window *w = calloc(N, sizeof *w);
    for (size_t k = 0; k < N; k++)
        set(w, k, 2.0, 200);
    for (size_t k = 100; k < 105; k++) /* saturated, 5 windows */
        set(w, k, 6.0, 400);
    for (size_t k = 300; k < 304; k++) /* freeze: load climbs, nothing leaves */
        set(w, k, 10.0 + 2 * (double)(k - 300), k == 300 ? 20 : 0);
    set(w, 500, 4.0, 390); /* exactly N*: congested, one window */
    /* Windows 700..703 congested, but 702 missing from the series (shifted
     * out below): two runs. */
    for (size_t k = 700; k < 704; k++)
        set(w, k, 5.0, 400);
    set(w, N - 1, 7.0, 400); /* a run ending with the series */
    struct tb_window *s = calloc(N - 1, sizeof *s);
    memcpy(s, w, 702 * sizeof *w);
    memcpy(s + 702, w + 703, (N - 703) * sizeof *w);
    size_t n = N - 1;

    struct tb_nstar ns;
    memset(&ns, 0, sizeof ns);
    ns.n_star = 4;
    ns.n_star_fit = NAN;
    ns.slope = 100;
    ns.tp_max = 400;
    struct tb_episode *ep;
    size_t nep;
    assert_int_equal(tb_episodes_find(s, n, 4.0, &ns, 0.3, &ep, &nep), 0);
    assert_int_equal(nep, 6);
    const int64_t st[6] = {100, 300, 500, 700, 703, N - 1};
    const int64_t en[6] = {105, 304, 501, 702, 704, N};
    const enum tb_episode_kind kind[6] = {TB_EP_SATURATED, TB_EP_FREEZE, TB_EP_SATURATED,
                                          TB_EP_SATURATED, TB_EP_SATURATED, TB_EP_SATURATED};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ep[i].start_ns, st[i] * W);
        assert_int_equal(ep[i].end_ns, en[i] * W);
        assert_int_equal(ep[i].kind, kind[i]);
    }
    assert_near(ep[1].peak_load, 16.0, 0);
    assert_near(ep[1].mean_load, 13.0, 1e-12);
    assert_near(ep[1].throughput, 5.0, 1e-12);
    assert_near(ep[0].throughput, 400.0, 1e-12);

    struct tb_episode_summary sum;
    assert_int_equal(tb_episodes_summary(s, n, 4.0, ep, nep, &sum), 0);
    assert_int_equal(sum.n, 6);
    assert_int_equal(sum.n_freeze, 1);
    /* 5 + 4 + 1 + 2 + 1 + 1 = 14 congested of 1199 windows. */
    assert_near(sum.congested_fraction, 14.0 / 1199, 1e-12);
    assert_near(sum.per_min, 6.0, 1e-9); /* 6 in exactly 60 s */
    /* Durations (windows): 5, 4, 1, 2, 1, 1 → sorted 1 1 1 2 4 5. */
    assert_int_equal(sum.dur_min_ns, 1 * W);
    assert_int_equal(sum.dur_median_ns, 1 * W); /* nearest rank 3 of 6 */
    assert_int_equal(sum.dur_p95_ns, 5 * W);
    assert_int_equal(sum.dur_max_ns, 5 * W);
    free(ep);

    /* An undetermined N* congests nothing; the pause is still a stall
     * (load >= 2, next to no output where the curve promises 20), so still
     * a freeze episode (v0.3). */
    assert_int_equal(tb_episodes_find(s, n, NAN, &ns, 0.3, &ep, &nep), 0);
    assert_int_equal(nep, 1);
    assert_int_equal(ep[0].start_ns, 300 * W);
    assert_int_equal(ep[0].end_ns, 304 * W);
    assert_int_equal(ep[0].kind, TB_EP_FREEZE);
    free(ep);
    free(s);
    free(w);
}

/* Window k with load and throughput, and `ubar` work units per completion. */
static void setu(struct tb_window *w, size_t k, double load, double tp, double ubar)
{
    set(w, k, load, tp);
    w[k].work_units = tp * 0.05;
    w[k].completions = (uint32_t)lround(w[k].work_units / ubar);
}

/* A pause followed by its drain is a freeze even though the run's mean
 * throughput is on the curve; one window with next to nothing where 20
 * completions were due is a stall, so a freeze too (v0.3; before, one low
 * window was not); and where the curve promises fewer than 5 completions
 * (2 here), low output is chance. */
static void test_freeze_rules(void **state)
{
    (void)state;
    enum { N = 100 };
    struct tb_window w[N];
    struct tb_nstar ns;
    memset(&ns, 0, sizeof ns);
    ns.n_star = 4;
    ns.slope = 100;
    ns.tp_max = 400;
    const double pause[8] = {400, 0, 0, 0, 800, 800, 800, 400};
    const double blip[3] = {400, 20, 400};
    for (int pass = 0; pass < 2; pass++) {
        double ubar = pass ? 10 : 1; /* curve: 20 units per window = 20 or 2 completions */
        for (size_t k = 0; k < N; k++)
            setu(w, k, 2.0, 200, ubar);
        for (size_t k = 0; k < 8; k++)
            setu(w, 10 + k, 6.0, pause[k], ubar);
        for (size_t k = 0; k < 3; k++)
            setu(w, 30 + k, 6.0, blip[k], ubar);
        struct tb_episode *ep;
        size_t nep;
        assert_int_equal(tb_episodes_find(w, N, 4.0, &ns, 0.3, &ep, &nep), 0);
        assert_int_equal(nep, 2);
        assert_int_equal(ep[0].start_ns, 10 * W);
        assert_int_equal(ep[0].end_ns, 18 * W);
        assert_near(ep[0].throughput, 400, 1e-9); /* the mean alone looks saturated */
        assert_int_equal(ep[0].kind, pass ? TB_EP_SATURATED : TB_EP_FREEZE);
        assert_int_equal(ep[1].kind, pass ? TB_EP_SATURATED : TB_EP_FREEZE);
        free(ep);
    }
}

static uint64_t rs = 12345;
static double unif(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif()); }

/* A 10-minute series of a 4-core server (100 units/s per core): load below
 * the knee most of the time, 20 saturated bursts and 12 freezes (GC pauses:
 * load climbs, no output) at known places. The analysis must find N* near 4,
 * and exactly those episodes with the right kinds. */
static void test_series(void **state)
{
    (void)state;
    enum { N = 12000, C = 4 };
    struct tb_window *w = calloc(N, sizeof *w);
    char *truth = calloc(N, 1); /* 'S' saturated, 'F' freeze */
    for (size_t k = 0; k < N; k++) {
        double l = 0.1 + unif() * 3.0; /* below 0.8·C */
        set(w, k, l, 100 * l * (1 + 0.05 * gauss()));
    }
    /* Main-sequence windows across the knee so the curve is known. */
    for (size_t k = 5; k < N; k += 9) {
        double l = unif() * 3 * C + 0.1;
        set(w, k, l, 100 * fmin(l, C) * (1 + 0.05 * gauss()));
    }
    for (int e = 0; e < 32; e++) {
        size_t at = 200 + (size_t)e * 370, len = 2 + (size_t)e % 5;
        bool freeze = e % 8 < 3;
        for (size_t k = at; k < at + len; k++) {
            if (freeze)
                set(w, k, 6 + 4.0 * (double)(k - at), 30 * unif());
            else
                set(w, k, 5.5 + unif() * 4, 400 * (1 + 0.03 * gauss()));
            truth[k] = freeze ? 'F' : 'S';
        }
        /* Calm windows around each episode so runs are exact. */
        set(w, at - 1, 1.0, 100);
        set(w, at + len, 1.0, 100);
    }
    struct tb_analysis a;
    struct tb_episode *ep;
    size_t nep;
    assert_int_equal(tb_correlate_analyze(w, N, 10 * MS, NULL, &a, &ep, &nep), 0);
    assert_int_equal(a.tier, 3);
    assert_int_equal(a.server, 0);
    assert_int_equal(a.width_ns, W);
    assert_int_equal(a.from_ns, 0);
    assert_int_equal(a.to_ns, (int64_t)N * W);
    assert_int_equal(a.work_unit_ns, 10 * MS);
    print_message("n_star=%g fit=%g tp_max=%g slope=%g levels=%u nep=%zu\n", a.n_star, a.n_star_fit,
                  a.tp_max, a.slope, a.n_levels, nep);
    assert_true(fabs(a.n_star - C) <= 0.1 * C);
    assert_true(fabs(a.n_star_fit - C) <= 0.1 * C);
    assert_true(fabs(a.tp_max - 400) <= 0.05 * 400);
    assert_false(a.disagree);
    /* Every true episode found once, with its kind; nothing else is an
     * episode except main-sequence windows above N* (saturated, single). */
    int tp_f = 0, fp_f = 0, found = 0;
    for (size_t i = 0; i < nep; i++) {
        size_t k0 = (size_t)(ep[i].start_ns / W), k1 = (size_t)(ep[i].end_ns / W);
        if (truth[k0]) {
            found++;
            for (size_t k = k0; k < k1; k++)
                assert_int_equal(truth[k], truth[k0]);
            assert_true(k0 == 0 || !truth[k0 - 1]);
            assert_true(!truth[k1]);
            assert_int_equal(ep[i].kind, truth[k0] == 'F' ? TB_EP_FREEZE : TB_EP_SATURATED);
        }
        if (ep[i].kind == TB_EP_FREEZE) {
            if (truth[k0] == 'F')
                tp_f++;
            else
                fp_f++;
        }
    }
    assert_int_equal(found, 32);
    assert_int_equal(tp_f, 12);
    assert_int_equal(fp_f, 0);
    assert_int_equal(a.n_freeze, 12);
    assert_int_equal(a.n_episodes, nep);
    assert_true(a.congested_fraction > 0);
    assert_near(a.episodes_per_min, nep / 10.0, 1e-9);
    /* One plateau among the congested non-freeze windows. */
    assert_int_equal(a.n_levels, 1);
    assert_true(fabs(a.levels[0] - 400) < 0.05 * 400);
    free(ep);

    /* Not one series in time order. */
    w[10].start_ns = w[9].start_ns;
    assert_int_equal(tb_correlate_analyze(w, N, 10 * MS, NULL, &a, &ep, &nep), TB_E_INVAL);
    free(w);
    free(truth);
}

static void test_attribution(void **state)
{
    (void)state;
    enum { N = 50 };
    struct tb_window db[N], front[N + 5];
    double x[N], y[N];
    for (size_t k = 0; k < N; k++) {
        set(db, k, (double)(k % 7) + 0.5 * (double)(k % 3), 0);
        x[k] = db[k].load;
    }
    /* The front tier's series starts 5 windows earlier; its response time
     * tracks the db load plus a bit of noise; window 20 has no completion. */
    for (size_t k = 0; k < N + 5; k++) {
        memset(&front[k], 0, sizeof front[k]);
        front[k].start_ns = ((int64_t)k - 5) * W;
        front[k].width_ns = W;
        front[k].completions = 3;
        if (k >= 5) {
            front[k].rt_mean_ns = 1e6 * (2 + db[k - 5].load) + 1e5 * (double)((k * 7919) % 11);
            y[k - 5] = front[k].rt_mean_ns;
        } else {
            front[k].rt_mean_ns = 9e9;
        }
    }
    front[25].completions = 0;
    /* Independent Pearson over the matched windows with completions. */
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    int m = 0;
    for (size_t k = 0; k < N; k++) {
        if (k == 20)
            continue;
        mx += x[k];
        my += y[k];
        m++;
    }
    mx /= m;
    my /= m;
    for (size_t k = 0; k < N; k++) {
        if (k == 20)
            continue;
        sxy += (x[k] - mx) * (y[k] - my);
        sxx += (x[k] - mx) * (x[k] - mx);
        syy += (y[k] - my) * (y[k] - my);
    }
    double r;
    assert_int_equal(tb_correlate_load_rt(db, N, front, N + 5, &r), 0);
    assert_near(r, sxy / sqrt(sxx * syy), 1e-12);
    assert_true(r > 0.9);
    /* Too few pairs. */
    assert_int_equal(tb_correlate_load_rt(db, 2, front + 5, 2, &r), 0);
    assert_true(isnan(r));
}

/* Degenerate series: empty, all idle, one window. */
static void test_degenerate(void **state)
{
    (void)state;
    struct tb_analysis a;
    struct tb_episode *ep;
    size_t nep;
    assert_int_equal(tb_correlate_analyze(NULL, 0, 0, NULL, &a, &ep, &nep), 0);
    assert_int_equal(nep, 0);
    assert_true(isnan(a.n_star) && isnan(a.n_star_fit) && isnan(a.tp_max));
    assert_int_equal(a.n_levels, 0);
    assert_near(a.congested_fraction, 0, 0);
    struct tb_window w[50];
    for (size_t k = 0; k < 50; k++)
        set(w, k, 0, 0);
    assert_int_equal(tb_correlate_analyze(w, 50, 1000000, NULL, &a, &ep, &nep), 0);
    assert_int_equal(nep, 0);
    assert_true(isnan(a.n_star_used));
    assert_int_equal(a.requests, 0);
    set(w, 0, 3, 300);
    assert_int_equal(tb_correlate_analyze(w, 1, 1000000, NULL, &a, &ep, &nep), 0);
    assert_int_equal(a.requests, 15);
    assert_int_equal(a.from_ns, 0);
    assert_int_equal(a.to_ns, W);
    free(ep);
    assert_int_equal(tb_correlate_analyze(w, 1, 0, NULL, NULL, &ep, &nep), TB_E_INVAL);
}


/* ---- one rule, offline and streaming ---------------------------------------- */

/* The rule of DESIGN.md "Episode" and correlate.h "Stalled" written out
 * again, independently of correlate: runs of consecutive windows each with
 * load >= thr or stalled (load >= 2, calls out < half the window, throughput
 * below 15% of the curve min(slope·l, tpmax) at its load, which promises >= 10
 * completions); peak and means over the run; freeze when it holds a stalled
 * window, or 2 consecutive windows of it that are not waiting on calls, or
 * (not waiting on average, 2 windows or more) the run's means, are below ff x the curve where
 * it promises >= 5 completions (ubar work units each) over the stretch.
 * Windows' in-episode flags go to inep[]. */
static bool oracle_frozen(double l, double tp, int64_t dur, double slope, double tpmax,
                          double ff, double ubar)
{
    double c = fmin(slope * l, tpmax);
    return tp < ff * c && c * ((double)dur / 1e9) / ubar >= 5.0;
}

static bool oracle_stalled(const struct tb_window *w, double slope, double tpmax, double ff,
                           double ubar)
{
    double c = fmin(slope * w->load, tpmax);
    (void)ff;
    return w->load >= 2 && w->calls_busy < 0.5 && c * 0.05 / ubar >= 10 &&
           w->norm_throughput < 0.15 * c;
}

static size_t oracle_episodes(const struct tb_window *w, size_t n, double thr, double slope,
                              double tpmax, double ff, struct tb_episode *out, bool *inep)
{
    double u = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        u += w[i].work_units;
        c += w[i].completions;
    }
    double ubar = u > 0 && c > 0 ? u / c : 1;
    size_t ne = 0;
    for (size_t i = 0; i < n; i++)
        inep[i] = w[i].load >= thr || oracle_stalled(&w[i], slope, tpmax, ff, ubar);
    for (size_t i = 0; i < n; i++) {
        if (!inep[i] || (i > 0 && inep[i - 1] && w[i].start_ns == w[i - 1].start_ns + W))
            continue; /* not the first window of a run */
        size_t j = i;
        while (j + 1 < n && inep[j + 1] && w[j + 1].start_ns == w[j].start_ns + W)
            j++;
        struct tb_episode *e = &out[ne++];
        memset(e, 0, sizeof *e);
        double sl = 0, st = 0, sc = 0;
        int run = 0, longest = 0;
        bool stall = false;
        for (size_t k = i; k <= j; k++) {
            e->peak_load = fmax(e->peak_load, w[k].load);
            sl += w[k].load;
            st += w[k].norm_throughput;
            sc += w[k].calls_busy;
            stall = stall || oracle_stalled(&w[k], slope, tpmax, ff, ubar);
            run = oracle_frozen(w[k].load, w[k].norm_throughput, W, slope, tpmax, ff, ubar) &&
                          w[k].calls_busy < 0.5
                      ? run + 1
                      : 0;
            longest = run > longest ? run : longest;
        }
        double m = (double)(j - i + 1);
        e->start_ns = w[i].start_ns;
        e->end_ns = w[j].start_ns + W;
        e->mean_load = sl / m;
        e->throughput = st / m;
        e->kind = stall || longest >= 2 ||
                          (sc / m < 0.5 && m >= 2 &&
                           oracle_frozen(e->mean_load, e->throughput,
                                                         e->end_ns - e->start_ns, slope, tpmax,
                                                         ff, ubar))
                      ? TB_EP_FREEZE
                      : TB_EP_SATURATED;
    }
    return ne;
}

static void assert_same_episode(const struct tb_episode *a, const struct tb_episode *b)
{
    assert_int_equal(a->start_ns, b->start_ns);
    assert_int_equal(a->end_ns, b->end_ns);
    assert_near(a->peak_load, b->peak_load, 0);
    assert_near(a->mean_load, b->mean_load, 1e-12 * b->mean_load);
    assert_near(a->throughput, b->throughput, 1e-12 * fmax(1, b->throughput));
    assert_int_equal(a->kind, b->kind);
}

/* The same windows through tb_episodes_find (offline) and pushed one at a
 * time through the streaming tracker (as a live capture closes them) give
 * the same episodes, and both are the oracle's; the tracker's per-window
 * flags are the oracle's congested windows and run starts, and an episode
 * in progress reads as the oracle's episode cut at that window. 20 random
 * series with missing windows, pauses, drains and ties at the threshold. */
static void test_stream_same(void **state)
{
    (void)state;
    enum { N = 4000 };
    struct tb_window *w = calloc(N, sizeof *w);
    struct tb_episode *want = calloc(N, sizeof *want), *cut = calloc(N, sizeof *cut);
    bool *cong = calloc(N, sizeof *cong), *cong2 = calloc(N, sizeof *cong2);
    assert_true(w && want && cut && cong && cong2);
    size_t total = 0, nfreeze = 0, nstall = 0;
    for (int seed = 0; seed < 20; seed++) {
        double ubar = 1 + 4 * unif();
        size_t n = 0;
        for (size_t k = 0; n < N; k++) {
            if (unif() < 0.01)
                continue; /* a missing window */
            double l = unif() < 0.3 ? 4 + 4 * unif() : 3 * unif();
            if (unif() < 0.02)
                l = 4.0; /* exactly at the threshold: congested */
            double tp = 100 * fmin(l, 4) * (1 + 0.05 * gauss());
            if (unif() < 0.05)
                tp *= 0.1; /* a paused window */
            setu(w, n, l, tp, ubar);
            w[n].start_ns = (int64_t)k * W;
            /* Now and then a server that waits on its calls. */
            w[n].calls_busy = unif() < 0.1 ? 0.5 + 0.5 * unif() : 0.49 * unif();
            n++;
        }
        struct tb_nstar ns;
        memset(&ns, 0, sizeof ns);
        ns.n_star = 4;
        ns.n_star_fit = NAN;
        ns.slope = 100;
        ns.tp_max = 400;
        size_t nw = oracle_episodes(w, n, 4.0, 100, 400, 0.3, want, cong);
        struct tb_episode *ep;
        size_t nep;
        assert_int_equal(tb_episodes_find(w, n, 4.0, &ns, 0.3, &ep, &nep), 0);
        assert_int_equal(nep, nw);
        for (size_t i = 0; i < nep; i++)
            assert_same_episode(&ep[i], &want[i]);

        struct tb_congestion rule;
        tb_congestion_from_nstar(&rule, &ns, 0.3, w, n);
        assert_near(rule.threshold, 4.0, 0);
        struct tb_episode_track t;
        tb_episode_track_init(&t, &rule);
        size_t got = 0;
        for (size_t i = 0; i < n; i++) {
            struct tb_episode closed, cur;
            unsigned r = tb_episode_track_push(&t, &w[i], &closed);
            assert_int_equal((r & TB_TRACK_CONGESTED) != 0, w[i].load >= 4.0);
            assert_int_equal((r & (TB_TRACK_CONGESTED | TB_TRACK_STALLED)) != 0, cong[i]);
            nstall += (r & TB_TRACK_STALLED) && !(r & TB_TRACK_CONGESTED);
            bool starts = cong[i] && (i == 0 || !cong[i - 1] ||
                                      w[i].start_ns != w[i - 1].start_ns + W);
            assert_int_equal((r & TB_TRACK_OPENED) != 0, starts);
            if (r & TB_TRACK_CLOSED) {
                assert_true(got < nw);
                assert_same_episode(&closed, &want[got]);
                got++;
            }
            assert_int_equal(tb_episode_track_current(&t, &cur), cong[i]);
            if (cong[i]) {
                /* In progress: the oracle over the run so far. */
                size_t s0 = i;
                while (s0 > 0 && cong[s0 - 1] && w[s0].start_ns == w[s0 - 1].start_ns + W)
                    s0--;
                size_t m = oracle_episodes(w, i + 1, 4.0, 100, 400, 0.3, cut, cong2);
                /* ubar differs over the prefix: compare the times and means only. */
                assert_true(m > 0);
                assert_int_equal(cur.start_ns, w[s0].start_ns);
                assert_int_equal(cur.end_ns, cut[m - 1].end_ns);
                assert_near(cur.mean_load, cut[m - 1].mean_load, 1e-12 * cur.mean_load);
                assert_near(cur.peak_load, cut[m - 1].peak_load, 0);
            }
        }
        struct tb_episode last;
        if (tb_episode_track_end(&t, &last)) {
            assert_true(got < nw);
            assert_same_episode(&last, &want[got]);
            got++;
        }
        assert_false(tb_episode_track_end(&t, &last));
        assert_int_equal(got, nw);
        total += nw;
        for (size_t i = 0; i < nw; i++)
            nfreeze += want[i].kind == TB_EP_FREEZE;
        free(ep);
    }
    /* The series exercise both kinds, many times. */
    assert_true(total > 2000);
    assert_true(nfreeze > 100 && nfreeze < total - 100);
    /* ...and stalls below the threshold, which open episodes of their own. */
    assert_true(nstall > 50);
    free(w);
    free(want);
    free(cut);
    free(cong);
    free(cong2);
}

/* A rule replaced between windows (a live re-estimate) decides from then on:
 * the window after the change is judged by the new threshold. */
static void test_stream_rule_change(void **state)
{
    (void)state;
    struct tb_window w[6];
    const double load[6] = {5, 5, 3, 3, 5, 1};
    for (size_t k = 0; k < 6; k++)
        setu(w, k, load[k], 300, 1);
    struct tb_congestion a = {.threshold = 4, .slope = 100, .tp_max = 400, .freeze_frac = 0.3,
                              .ubar = 1};
    struct tb_congestion b = a;
    b.threshold = 2;
    struct tb_episode_track t;
    struct tb_episode e;
    tb_episode_track_init(&t, &a);
    assert_int_equal(tb_episode_track_push(&t, &w[0], &e), TB_TRACK_CONGESTED | TB_TRACK_OPENED);
    assert_int_equal(tb_episode_track_push(&t, &w[1], &e), TB_TRACK_CONGESTED);
    assert_int_equal(tb_episode_track_push(&t, &w[2], &e), TB_TRACK_CLOSED);
    assert_int_equal(e.start_ns, 0);
    assert_int_equal(e.end_ns, 2 * W);
    tb_episode_track_rule(&t, &b);
    assert_int_equal(tb_episode_track_push(&t, &w[3], &e), TB_TRACK_CONGESTED | TB_TRACK_OPENED);
    assert_int_equal(tb_episode_track_push(&t, &w[4], &e), TB_TRACK_CONGESTED);
    assert_int_equal(tb_episode_track_push(&t, &w[5], &e), TB_TRACK_CLOSED);
    assert_int_equal(e.start_ns, 3 * W);
    assert_int_equal(e.end_ns, 5 * W);
    assert_near(e.mean_load, 4, 1e-12);
    /* No rule threshold: nothing is congested. */
    struct tb_congestion none = {.threshold = NAN};
    assert_false(tb_congestion_congested(&none, 1e9));
}

/* The work unit changes inside an episode (a live re-estimate made it 5
 * times smaller): tb_episode_track_rescale brings the episode so far and the
 * rule to the new units, so the episode is the one the same windows give all
 * in the new units (the oracle: tb_episodes_find over them). Six saturated
 * windows at 300 units/s, then one at 1900 in the new units, then one
 * below the threshold. Unscaled, the first six would read 300 against a
 * plateau of 2000: a mean of 529, under 30% of it, a freeze. */
static void test_stream_unit_rescale(void **state)
{
    (void)state;
    enum { N = 8 };
    const double f = 5;
    struct tb_window w[N], wn[N];
    for (size_t k = 0; k < N; k++)
        setu(w, k, k < N - 1 ? 6 : 1, k < N - 2 ? 300 : 1900, k < N - 2 ? 1 : f);
    for (size_t k = 0; k < N; k++) {
        wn[k] = w[k];
        if (k < N - 2) {
            wn[k].norm_throughput *= f;
            wn[k].work_units *= f;
        }
    }
    const struct tb_congestion a = {.threshold = 4, .slope = 100, .tp_max = 400,
                                    .freeze_frac = 0.3, .ubar = 1, .self_tp = NAN};
    struct tb_congestion b = a;
    b.slope *= f;
    b.tp_max *= f;
    b.ubar *= f;
    /* The oracle: the series in the new units, by the new rule. */
    struct tb_nstar ns = {.slope = b.slope, .tp_max = b.tp_max};
    struct tb_episode *want = NULL;
    size_t nwant = 0;
    assert_int_equal(tb_episodes_find(wn, N, b.threshold, &ns, b.freeze_frac, &want, &nwant), 0);
    assert_int_equal(nwant, 1);
    assert_int_equal(want[0].kind, TB_EP_SATURATED);

    for (int pass = 0; pass < 3; pass++) {
        /* 0: rescaled, then the re-estimate's rule; 1: rescaled only (the
         * re-estimate gave no rule); 2: the control, as before the rescale
         * existed: the new rule judges old-unit windows (a freeze). */
        struct tb_episode_track t;
        struct tb_episode e;
        tb_episode_track_init(&t, &a);
        for (size_t k = 0; k < N - 2; k++)
            assert_int_equal(tb_episode_track_push(&t, &w[k], &e) & TB_TRACK_CLOSED, 0);
        if (pass < 2)
            tb_episode_track_rescale(&t, f);
        if (pass != 1)
            tb_episode_track_rule(&t, &b);
        assert_int_equal(tb_episode_track_push(&t, &w[N - 2], &e), TB_TRACK_CONGESTED);
        assert_int_equal(tb_episode_track_push(&t, &w[N - 1], &e), TB_TRACK_CLOSED);
        assert_int_equal(e.start_ns, want[0].start_ns);
        assert_int_equal(e.end_ns, want[0].end_ns);
        if (pass == 2) {
            assert_int_equal(e.kind, TB_EP_FREEZE);
            assert_near(e.throughput, (6 * 300 + 1900) / 7.0, 1e-9);
            continue;
        }
        assert_int_equal(e.kind, want[0].kind);
        assert_near(e.throughput, want[0].throughput, 1e-9);
        assert_near(e.mean_load, want[0].mean_load, 1e-12);
        assert_near(t.rule.slope, b.slope, 1e-9);
        assert_near(t.rule.tp_max, b.tp_max, 1e-9);
        assert_near(t.rule.ubar, b.ubar, 1e-12);
    }
    /* A factor that is no factor changes nothing. */
    struct tb_episode_track t;
    tb_episode_track_init(&t, &a);
    const double bad[] = {0, -2, NAN, INFINITY};
    for (size_t i = 0; i < TB_ARRAY_SIZE(bad); i++)
        tb_episode_track_rescale(&t, bad[i]);
    assert_near(t.rule.slope, a.slope, 0);
    assert_near(t.rule.tp_max, a.tp_max, 0);
    assert_near(t.rule.ubar, a.ubar, 0);
    free(want);
}

/* The freeze rule that needs no knee, on built windows. One request alone
 * completes 2000 units/s (slope 2000, no plateau) and a completion is worth
 * 5 units: 20 completions per 50 ms window promised by one request, so a
 * stall needs load >= 2, calls out < 50% of the window and throughput below
 * 300 units/s (15% of 2000). The oracle is the rule as correlate.h states
 * it, applied by hand to each window below. */
static void test_stall(void **state)
{
    (void)state;
    enum { N = 40 };
    struct tb_window w[N];
    for (size_t k = 0; k < N; k++) /* healthy, lightly loaded */
        setu(w, k, 0.2 + 0.02 * (double)k, 2000 * (0.2 + 0.02 * (double)k), 5);
    /* A pause: requests pile up, none leaves; then the drain at full speed
     * (4000 units/s at load 3: not a stall; only load 1's 2000 is promised
     * without a knee). */
    setu(w, 5, 2.5, 0, 5);
    setu(w, 6, 5.0, 0, 5);
    setu(w, 7, 7.0, 200, 5);
    setu(w, 8, 3.0, 4000, 5);
    /* One long request alone holds a window: load 1, nothing completes. */
    setu(w, 12, 1.0, 0, 5);
    /* Requests inside, but the server waits on its calls (a front tier
     * behind a paused callee). */
    setu(w, 16, 4.0, 0, 5);
    w[16].calls_busy = 0.6;
    setu(w, 17, 4.0, 0, 5);
    w[17].calls_busy = 0.45; /* ...less than half the window: its own stall */
    /* Just above 15% of one request's worth; just below. */
    setu(w, 21, 2.5, 310, 5);
    setu(w, 24, 2.5, 290, 5);
    /* A 2-core server saturated at load 3.6 without a knee: 2 requests'
     * worth, far below slope x 3.6 but above one request's. */
    setu(w, 28, 3.6, 4000, 5);
    /* Exactly load 2 stalls; just below does not. */
    setu(w, 31, 2.0, 0, 5);
    setu(w, 34, 1.99, 0, 5);

    struct tb_nstar ns;
    memset(&ns, 0, sizeof ns);
    ns.n_star = ns.n_star_fit = NAN;
    ns.slope = 2000;
    ns.tp_max = NAN;
    struct tb_congestion rule;
    tb_congestion_from_nstar(&rule, &ns, 0.3, w, N);
    assert_true(isnan(rule.threshold));
    assert_near(rule.ubar, 5.0, 0.01); /* completions rounded */
    const bool want_stall[N] = {[5] = true, [6] = true, [7] = true, [17] = true,
                                [24] = true, [31] = true};
    for (size_t k = 0; k < N; k++)
        if (tb_congestion_stalled(&rule, &w[k]) != want_stall[k])
            fail_msg("window %zu: stalled %d, expected %d", k, !want_stall[k], want_stall[k]);

    /* Offline: every stall is an episode, a freeze, though N* is undetermined. */
    struct tb_episode *ep;
    size_t nep;
    assert_int_equal(tb_episodes_find(w, N, NAN, &ns, 0.3, &ep, &nep), 0);
    const int64_t st[4] = {5, 17, 24, 31}, en[4] = {8, 18, 25, 32};
    assert_int_equal(nep, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(ep[i].start_ns, st[i] * W);
        assert_int_equal(ep[i].end_ns, en[i] * W);
        assert_int_equal(ep[i].kind, TB_EP_FREEZE);
    }
    assert_near(ep[0].peak_load, 7.0, 0);
    assert_near(ep[0].mean_load, 14.5 / 3, 1e-12);
    free(ep);

    /* Streaming: the same episodes, the flags say stalled and not congested. */
    struct tb_episode_track t;
    tb_episode_track_init(&t, &rule);
    size_t got = 0;
    for (size_t k = 0; k <= N; k++) {
        struct tb_episode e;
        unsigned r = 0;
        bool closed = k < N ? ((r = tb_episode_track_push(&t, &w[k], &e)) & TB_TRACK_CLOSED)
                            : tb_episode_track_end(&t, &e);
        if (k < N) {
            assert_int_equal((r & TB_TRACK_STALLED) != 0, want_stall[k]);
            assert_int_equal(r & TB_TRACK_CONGESTED, 0);
        }
        if (closed) {
            assert_true(got < 4);
            assert_int_equal(e.start_ns, st[got] * W);
            assert_int_equal(e.end_ns, en[got] * W);
            assert_int_equal(e.kind, TB_EP_FREEZE);
            got++;
        }
    }
    assert_int_equal(got, 4);

    /* With a knee at 4: a stall below the threshold opens the episode the
     * congested windows after it continue; the congested windows alone
     * (without it) are saturated. */
    struct tb_window k2[6];
    setu(k2, 0, 1.0, 2000, 5);
    setu(k2, 1, 2.5, 0, 5);    /* stalled, below N* */
    setu(k2, 2, 5.0, 8000, 5); /* congested, at the plateau */
    setu(k2, 3, 6.0, 8000, 5);
    setu(k2, 4, 1.0, 2000, 5);
    setu(k2, 5, 6.0, 8000, 5); /* congested alone: saturated */
    ns.n_star = 4;
    ns.tp_max = 8000;
    assert_int_equal(tb_episodes_find(k2, 6, 4.0, &ns, 0.3, &ep, &nep), 0);
    assert_int_equal(nep, 2);
    assert_int_equal(ep[0].start_ns, 1 * W);
    assert_int_equal(ep[0].end_ns, 4 * W);
    assert_int_equal(ep[0].kind, TB_EP_FREEZE);
    assert_int_equal(ep[1].start_ns, 5 * W);
    assert_int_equal(ep[1].kind, TB_EP_SATURATED);
    free(ep);

    /* Too slow to tell: one request alone completes 100 units/s, 1 per
     * window promised; a window with nothing is no evidence. */
    ns.n_star = NAN;
    ns.tp_max = NAN;
    ns.slope = 100;
    struct tb_window slow[3];
    setu(slow, 0, 0.5, 50, 5);
    setu(slow, 1, 3.0, 0, 5);
    setu(slow, 2, 0.5, 50, 5);
    assert_int_equal(tb_episodes_find(slow, 3, NAN, &ns, 0.3, &ep, &nep), 0);
    assert_int_equal(nep, 0);
}

/* The episodes the streaming tracker closes over w[0..n) by `rule`, at most
 * max of them into out[]; returns how many closed. */
static size_t track_all(const struct tb_congestion *rule, const struct tb_window *w, size_t n,
                        struct tb_episode *out, size_t max)
{
    struct tb_episode_track t;
    tb_episode_track_init(&t, rule);
    size_t got = 0;
    for (size_t k = 0; k <= n; k++) {
        struct tb_episode e;
        bool closed = k < n ? (tb_episode_track_push(&t, &w[k], &e) & TB_TRACK_CLOSED) != 0
                            : tb_episode_track_end(&t, &e);
        if (closed && got < max)
            out[got] = e;
        got += closed;
    }
    return got;
}

/* A window of a server that calls others: 1 unit per completion, calls out
 * for `busy` of it, `cload` of them in flight on average. */
static void setc(struct tb_window *w, size_t k, double load, double tp, double busy,
                 double cload)
{
    setu(w, k, load, tp, 1);
    w[k].calls_busy = busy;
    w[k].calls_load = cload;
}

/* A server that waits on its calls, with no knee (issue 12's gap): an
 * application server whose requests spend 99% of their life waiting on the
 * database, like real Tomcat. One request inside completes 100 units/s (5
 * per 50 ms window: the line promises under 10, so the old rule never
 * spoke), while its own work is 100 us a request: self_tp 10 000 units/s,
 * 500 completions per window for one request outside calls (1 unit each).
 * The oracle is correlate.h's rule applied by hand: stalled when load >= 2,
 * calls out < half the window, load - calls_load >= 2 and throughput below
 * 1 500 units/s (15% of 10 000). */
static void test_stall_waiting(void **state)
{
    (void)state;
    enum { N = 40 };
    struct tb_window w[N];
    for (size_t k = 0; k < N; k++) { /* healthy: its requests in their calls */
        double l = 0.5 + 0.05 * (double)k;
        setc(w, k, l, 100 * l, fmin(0.95, 0.9 * l), 0.98 * l);
    }
    /* A GC pause: requests pile up, no call goes out, none completes; its
     * first window still had calls for 40% of it, and the drain after. */
    setc(w, 5, 3.0, 50, 0.4, 0.4);
    for (size_t k = 6; k <= 8; k++)
        setc(w, k, 4.0 * (double)(k - 4), 0, 0, 0);
    setc(w, 9, 6.0, 1200, 1.0, 3.0); /* the drain: 1 200 units/s, calls flowing again */
    /* A burst that came late: 2.5 requests' worth, all in their calls for the
     * last 20% of the window, none completed yet — not a stall. */
    setc(w, 13, 2.5, 0, 0.2, 2.4);
    /* Waiting on a paused callee: its calls out all the window. */
    setc(w, 16, 6.0, 0, 1.0, 1.0);
    /* Its own CPU saturated (2 cores): 20 000 units/s — not a stall. */
    setc(w, 19, 4.0, 20000, 0.3, 0.3);
    /* Self load exactly 2 stalls; 1.99 does not. */
    setc(w, 22, 2.0, 0, 0, 0);
    setc(w, 25, 2.3, 0, 0.31, 0.31);
    /* Just below and just above 15% of self_tp. */
    setc(w, 28, 3.0, 1490, 0.1, 0.1);
    setc(w, 31, 3.0, 1510, 0.1, 0.1);
    /* Load 1.99 whatever else: one request alone may outlive a window. */
    setc(w, 34, 1.99, 0, 0, 0);

    /* The analysis: no knee (N* undetermined), the line's slope 100, work
     * unit 100 us; the rule every view builds from it. */
    struct tb_analysis a;
    memset(&a, 0, sizeof a);
    a.n_star = a.n_star_fit = a.tp_max = NAN;
    a.slope = 100;
    a.work_unit_ns = 100000; /* 100 us */
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, &a, w, N);
    assert_true(isnan(rule.threshold));
    assert_near(rule.self_tp, 10000, 1e-9);
    const bool want[N] = {[5] = true, [6] = true, [7] = true, [8] = true, [22] = true,
                          [28] = true};
    for (size_t k = 0; k < N; k++)
        if (tb_congestion_stalled(&rule, &w[k]) != want[k])
            fail_msg("window %zu: stalled %d, expected %d", k, !want[k], want[k]);

    /* The old rule (v0.3: no own-work promise) misses the whole pause. */
    struct tb_congestion old = rule;
    old.self_tp = NAN;
    for (size_t k = 0; k < N; k++)
        if (tb_congestion_stalled(&old, &w[k]))
            fail_msg("window %zu: stalled by the line's promise alone", k);

    /* Episodes, streamed: the pause and its drain are one freeze episode,
     * [5, 9), the drain not being stalled; then 22 and 28 alone. */
    const int64_t st[3] = {5, 22, 28}, en[3] = {9, 23, 29};
    struct tb_episode got[4];
    assert_int_equal(track_all(&rule, w, N, got, 4), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(got[i].start_ns, st[i] * W);
        assert_int_equal(got[i].end_ns, en[i] * W);
        assert_int_equal(got[i].kind, TB_EP_FREEZE);
    }

    /* The one-series analysis applies the same rule from the work unit it is
     * given: the pause is a freeze episode whether or not a knee is shown. */
    struct tb_analysis b;
    struct tb_episode *ep;
    size_t nep;
    assert_int_equal(tb_correlate_analyze(w, N, a.work_unit_ns, NULL, &b, &ep, &nep), 0);
    bool pause = false;
    for (size_t i = 0; i < nep; i++)
        pause |= ep[i].start_ns <= 6 * W && 6 * W < ep[i].end_ns && ep[i].kind == TB_EP_FREEZE;
    assert_true(pause);
    free(ep);

    /* A series that never calls anything has no own-work promise (its line
     * is its own work already). */
    for (size_t k = 0; k < N; k++)
        w[k].calls_busy = w[k].calls_load = 0;
    tb_congestion_from_analysis(&rule, &a, w, N);
    assert_true(isnan(rule.self_tp));
    tb_congestion_self(&rule, 0, NULL, 0);
    assert_true(isnan(rule.self_tp));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_freeze_rules),
        cmocka_unit_test(test_series),
        cmocka_unit_test(test_attribution),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_stream_same),
        cmocka_unit_test(test_stream_rule_change),
        cmocka_unit_test(test_stream_unit_rescale),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_stall_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
