/* SPDX-License-Identifier: MIT */
/* levels.c — throughput levels at saturation: the plateaus a server's
 * completed work settles on while it is congested, and when each held (a CPU
 * changing frequency shows as several, the paper's SpeedStep case).
 *
 * Why over time and not only over values. At 50 ms a congested window's
 * normalized throughput scatters by 10-15% (a hundred completions, a window
 * that is partly still filling up): three speeds 0.45/0.7/1.0 give three
 * clouds that overlap, and clustering the windows' values found 1-2 levels
 * where 100 ms windows showed 3. But a speed holds for many windows (a
 * governor moves every few hundred ms), so the series of congested windows is
 * piecewise constant in time: cutting it where its mean steps (binary
 * segmentation with a t test) and clustering the pieces' means, each the
 * average of 10-100 windows, separates levels that the single windows cannot. */
#include "correlate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ------------------------------------------------------ levels of values --- */

/* Lloyd's k-means on sorted values: clusters are contiguous ranges whose
 * boundaries sit at the midpoints between centres, so one iteration is k
 * binary searches plus prefix-sum lookups. bnd[c] = first index of cluster c,
 * bnd[k] = n. wpre: prefix sums of the weights (NULL: every weight 1), pre:
 * of weight x value. Returns false when a cluster came out empty. */
static bool kmeans1d(const double *v, const double *pre, const double *wpre, size_t n, uint32_t k,
                     double *ctr, size_t *bnd)
{
    for (uint32_t c = 0; c < k; c++) {
        size_t q = (size_t)(((double)c + 0.5) / k * (double)n);
        ctr[c] = v[TB_MIN(q, n - 1)];
    }
    for (int it = 0; it < 200; it++) {
        bnd[0] = 0;
        bnd[k] = n;
        for (uint32_t c = 1; c < k; c++) {
            double mid = (ctr[c - 1] + ctr[c]) / 2;
            size_t lo = bnd[c - 1], hi = n;
            while (lo < hi) {
                size_t m = (lo + hi) / 2;
                if (v[m] < mid)
                    lo = m + 1;
                else
                    hi = m;
            }
            bnd[c] = lo;
        }
        bool moved = false;
        for (uint32_t c = 0; c < k; c++) {
            if (bnd[c + 1] <= bnd[c])
                return false;
            double wsum = wpre ? wpre[bnd[c + 1]] - wpre[bnd[c]] : (double)(bnd[c + 1] - bnd[c]);
            double m = (pre[bnd[c + 1]] - pre[bnd[c]]) / wsum;
            moved |= m != ctr[c];
            ctr[c] = m;
        }
        if (!moved)
            break;
    }
    return true;
}

int tb_levels_find(const double *tp, size_t n, uint32_t max_levels, double *levels,
                   uint32_t *nlevels)
{
    if ((n && !tp) || !levels || !nlevels || !max_levels)
        return TB_E_INVAL;
    *nlevels = 0;
    if (!n)
        return 0;
    max_levels = TB_MIN(max_levels, 16u);
    double *v = malloc(n * sizeof *v), *pre = malloc((n + 1) * sizeof *pre);
    double *pre2 = malloc((n + 1) * sizeof *pre2);
    if (!v || !pre || !pre2) {
        free(v);
        free(pre);
        free(pre2);
        return TB_E_NOMEM;
    }
    memcpy(v, tp, n * sizeof *v);
    qsort(v, n, sizeof *v, tb_cmp_double);
    pre[0] = pre2[0] = 0;
    for (size_t i = 0; i < n; i++) {
        pre[i + 1] = pre[i] + v[i];
        pre2[i + 1] = pre2[i] + v[i] * v[i];
    }
    double ctr[16];
    size_t bnd[17];
    size_t minsize = TB_MAX((size_t)3, (n + 19) / 20);
    /* k = 1 always qualifies: the mean. */
    levels[0] = pre[n] / (double)n;
    *nlevels = 1;
    for (uint32_t k = 2; k <= max_levels && k * minsize <= n; k++) {
        if (!kmeans1d(v, pre, NULL, n, k, ctr, bnd))
            continue;
        bool ok = true;
        for (uint32_t c = 0; c < k && ok; c++)
            ok = bnd[c + 1] - bnd[c] >= minsize;
        for (uint32_t c = 1; c < k && ok; c++) {
            /* Pooled within-cluster sd of the two neighbours. */
            double ss = 0;
            for (uint32_t x = c - 1; x <= c; x++) {
                size_t a = bnd[x], b = bnd[x + 1];
                double s1 = pre[b] - pre[a], s2 = pre2[b] - pre2[a];
                ss += fmax(0, s2 - s1 * s1 / (double)(b - a));
            }
            double sd = sqrt(ss / (double)(bnd[c + 1] - bnd[c - 1] - 2));
            double sep = ctr[c] - ctr[c - 1];
            ok = sep >= 4 * sd && sep >= 0.05 * fabs(ctr[k - 1]);
        }
        if (ok) {
            memcpy(levels, ctr, k * sizeof *ctr);
            *nlevels = k;
        }
    }
    free(v);
    free(pre);
    free(pre2);
    return 0;
}

/* -------------------------------------------------------- levels in time --- */

/* Shortest piece: 4 windows. A stretch of congested windows begins and ends
 * with windows that are partly idle (the queue filling, the last drain); a
 * piece that short would be one of those, not a speed. */
#define LV_MINSEG 4
/* Windows this far past the threshold: a plateau is the capacity, and a
 * window just past N* can be congested (queued) without being at capacity,
 * its throughput the arrival rate (a CPU at 70% speed and 70% busy showed a
 * "level" at the offered 1000/s between the 0.45 and 0.7 plateaus). */
#define LV_DEEP 2.0
/* A step between two pieces must be this many standard errors: the largest
 * of ~100 candidate cuts of a flat stretch reaches about 3.5 by chance. */
#define LV_STEP_Z 4.5

struct piece {
    size_t from, to; /* window indices [from, to), one stretch */
    double mean;
    uint32_t level;
};

/* Binary segmentation of x[from, to): cut where the two sides' means differ
 * most (in standard errors, sd the series' noise), recursively, while that
 * is >= LV_STEP_Z and both sides hold LV_MINSEG windows. pre: prefix sums of
 * x over the whole series. Appends the pieces in time order. */
static int segment(const double *pre, size_t from, size_t to, double sd, struct piece **ps,
                   size_t *np, size_t *cap)
{
    size_t best = 0;
    double bz = 0;
    if (sd > 0 && to - from >= 2 * LV_MINSEG) {
        for (size_t k = from + LV_MINSEG; k + LV_MINSEG <= to; k++) {
            double n1 = (double)(k - from), n2 = (double)(to - k);
            double m1 = (pre[k] - pre[from]) / n1, m2 = (pre[to] - pre[k]) / n2;
            double z = fabs(m1 - m2) / (sd * sqrt(1 / n1 + 1 / n2));
            if (z > bz) {
                bz = z;
                best = k;
            }
        }
    }
    if (bz >= LV_STEP_Z) {
        int rc = segment(pre, from, best, sd, ps, np, cap);
        return rc ? rc : segment(pre, best, to, sd, ps, np, cap);
    }
    if (*np == *cap) {
        size_t nc = *cap ? 2 * *cap : 32;
        struct piece *n = realloc(*ps, nc * sizeof *n);
        if (!n)
            return TB_E_NOMEM;
        *ps = n;
        *cap = nc;
    }
    (*ps)[(*np)++] = (struct piece){from, to, (pre[to] - pre[from]) / (double)(to - from), 0};
    return 0;
}

static int cmp_piece_mean(const void *a, const void *b)
{
    const struct piece *x = *(const struct piece *const *)a, *y = *(const struct piece *const *)b;
    return (x->mean > y->mean) - (x->mean < y->mean);
}

/* Levels among the pieces: weighted k-means of their means (weight = its
 * windows) for k = 1..max; the largest k is kept whose levels each hold
 * max(LV_MINSEG, 5%) of the windows and whose neighbours are apart by >= 4
 * window-weighted standard deviations of the pieces' means around their
 * levels (at least the noise of the mean of an average piece, sd/sqrt(its
 * windows)) and by >= 5% of the top level. Sets each piece's level; returns
 * k. */
static uint32_t cluster(struct piece **ord, size_t np, double sd, uint32_t max_levels,
                        double *levels, double *v, double *pre, double *wpre)
{
    double total = 0;
    for (size_t i = 0; i < np; i++) {
        v[i] = ord[i]->mean;
        double wgt = (double)(ord[i]->to - ord[i]->from);
        pre[i + 1] = pre[i] + wgt * v[i];
        wpre[i + 1] = wpre[i] + wgt;
        total += wgt;
    }
    double ctr[16];
    size_t bnd[17];
    uint32_t best = 1;
    levels[0] = pre[np] / wpre[np];
    for (size_t i = 0; i < np; i++)
        ord[i]->level = 0;
    double minw = fmax(LV_MINSEG, 0.05 * total);
    for (uint32_t k = 2; k <= max_levels && k <= np; k++) {
        if (!kmeans1d(v, pre, wpre, np, k, ctr, bnd))
            continue;
        bool ok = true;
        for (uint32_t c = 0; c < k && ok; c++)
            ok = wpre[bnd[c + 1]] - wpre[bnd[c]] >= minw;
        for (uint32_t c = 1; c < k && ok; c++) {
            /* The spread of the pieces' means around their levels, each
             * weighted by its windows: a piece's mean varies as sd²/its
             * windows, so for pieces of one true level this is about the
             * noise of an average piece's mean, and a short piece off its
             * level (a stretch's last windows, draining) weighs as little
             * as it is long. */
            double ss = 0;
            size_t cnt = bnd[c + 1] - bnd[c - 1];
            for (uint32_t x = c - 1; x <= c; x++)
                for (size_t i = bnd[x]; i < bnd[x + 1]; i++)
                    ss += (wpre[i + 1] - wpre[i]) * (v[i] - ctr[x]) * (v[i] - ctr[x]);
            double wins = wpre[bnd[c + 1]] - wpre[bnd[c - 1]];
            double spread = fmax(sqrt(ss / wins), sd / sqrt(wins / (double)cnt));
            double sep = ctr[c] - ctr[c - 1];
            ok = sep >= 4 * spread && sep >= 0.05 * fabs(ctr[k - 1]);
        }
        if (!ok)
            continue;
        best = k;
        memcpy(levels, ctr, k * sizeof *ctr);
        for (uint32_t c = 0; c < k; c++)
            for (size_t i = bnd[c]; i < bnd[c + 1]; i++)
                ord[i]->level = c;
    }
    return best;
}

int tb_levels_over_time(const struct tb_window *w, size_t n, const struct tb_congestion *rule,
                        uint32_t max_levels, double *levels, uint32_t *nlevels,
                        struct tb_level_span **spans, size_t *nspans)
{
    if ((n && !w) || !rule || !levels || !nlevels || !max_levels)
        return TB_E_INVAL;
    *nlevels = 0;
    if (spans) {
        *spans = NULL;
        *nspans = 0;
    }
    max_levels = TB_MIN(max_levels, 16u);
    bool *use = malloc((n ? n : 1) * sizeof *use);
    double *pre = malloc((n + 1) * sizeof *pre), *d = malloc((n ? n : 1) * sizeof *d);
    struct piece *ps = NULL, **ord = NULL;
    double *v = NULL, *cpre = NULL, *wpre = NULL;
    size_t np = 0, cap = 0, nd = 0;
    int rc = 0;
    if (!use || !pre || !d) {
        rc = TB_E_NOMEM;
        goto out;
    }
    pre[0] = 0;
    for (size_t i = 0; i < n; i++) {
        use[i] = tb_congestion_congested(rule, w[i].load) &&
                 w[i].load >= LV_DEEP * rule->threshold &&
                 !tb_congestion_frozen(rule, w[i].load, w[i].norm_throughput);
        pre[i + 1] = pre[i] + w[i].norm_throughput;
    }
    /* The noise of one window: from the differences of neighbours inside
     * stretches (a step adds one large difference, not a spread), median
     * |difference| / 0.954 for a normal noise. */
    for (size_t i = 1; i < n; i++)
        if (use[i] && use[i - 1] && w[i].start_ns == w[i - 1].start_ns + w[i - 1].width_ns)
            d[nd++] = fabs(w[i].norm_throughput - w[i - 1].norm_throughput);
    double sd = 0;
    if (nd) {
        qsort(d, nd, sizeof *d, tb_cmp_double);
        sd = d[nd / 2] / 0.954;
    }
    /* But never under one completion's worth: a window's count moves by one
     * with where its edges fall, whatever the service times. Without this
     * floor a server of constant service times (neighbours' differences
     * mostly 0, so the median 0) had sd = 0 and no stretch was ever cut: a
     * stretch at 0.7 then 1.0 speed read as one level between the two. */
    size_t nq = 0;
    for (size_t i = 0; i < n; i++)
        if (use[i] && w[i].completions)
            d[nq++] = w[i].norm_throughput / (double)w[i].completions;
    if (nq) {
        qsort(d, nq, sizeof *d, tb_cmp_double);
        sd = fmax(sd, d[nq / 2]);
    }
    /* Stretches: maximal runs of consecutive congested non-freeze windows
     * of LV_MINSEG or more, each cut into pieces. */
    for (size_t i = 0; i < n;) {
        if (!use[i]) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && use[j] && w[j].start_ns == w[j - 1].start_ns + w[j - 1].width_ns)
            j++;
        if (j - i >= LV_MINSEG && (rc = segment(pre, i, j, sd, &ps, &np, &cap)))
            goto out;
        i = j;
    }
    if (!np)
        goto out;
    ord = malloc(np * sizeof *ord);
    v = malloc(np * sizeof *v);
    cpre = calloc(np + 1, sizeof *cpre);
    wpre = calloc(np + 1, sizeof *wpre);
    if (!ord || !v || !cpre || !wpre) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        ord[i] = &ps[i];
    qsort(ord, np, sizeof *ord, cmp_piece_mean);
    *nlevels = cluster(ord, np, sd, max_levels, levels, v, cpre, wpre);
    if (!spans)
        goto out;
    /* Spans: the pieces in time order, neighbours of one level inside one
     * stretch joined. */
    struct tb_level_span *sp = malloc(np * sizeof *sp);
    if (!sp) {
        rc = TB_E_NOMEM;
        goto out;
    }
    size_t ns = 0;
    for (size_t i = 0; i < np; i++) {
        const struct piece *p = &ps[i];
        if (ns && sp[ns - 1].level == p->level && i && ps[i - 1].to == p->from) {
            struct tb_level_span *s = &sp[ns - 1];
            double nw = (double)s->windows + (double)(p->to - p->from);
            s->throughput = (s->throughput * s->windows + p->mean * (double)(p->to - p->from)) / nw;
            s->windows += (uint32_t)(p->to - p->from);
            s->end_ns = w[p->to - 1].start_ns + w[p->to - 1].width_ns;
            continue;
        }
        sp[ns++] = (struct tb_level_span){
            .start_ns = w[p->from].start_ns,
            .end_ns = w[p->to - 1].start_ns + w[p->to - 1].width_ns,
            .throughput = p->mean,
            .level = p->level,
            .windows = (uint32_t)(p->to - p->from),
        };
    }
    *spans = sp;
    *nspans = ns;
out:
    free(use);
    free(pre);
    free(d);
    free(ps);
    free(ord);
    free(v);
    free(cpre);
    free(wpre);
    return rc;
}
