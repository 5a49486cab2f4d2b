/* SPDX-License-Identifier: MIT */
/* quota.c — a CPU quota's period read from one server's completions
 * (stats.h, tb_quota_period; docs/diagnose.md "cpu quota").
 *
 * A process held to a CFS bandwidth quota (cgroup cpu.max, systemd's
 * CPUQuota=, a container's CPU limit) runs until it has used its quota in the
 * period and is then stopped until the next period begins. Seen from the
 * wire: while it has requests in flight, answers stop for a while and resume
 * at the start of the next period, so the long gaps between its completions
 * end a whole number of periods apart, to the scheduler's jitter. A garbage
 * collection or any other stall ends whenever it is done: the gaps between
 * its ends scatter. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

/* A gap counts when it is at least this long and this many times the
 * server's median gap while busy: the stops, not the spacing of its
 * answers. */
#define GAP_MIN_NS 5000000
#define GAP_REL 8
/* Periods the kernel accepts for a quota: 1 ms to 1 s; below 5 ms the stops
 * are shorter than the gaps counted. */
#define PERIOD_MIN_NS 5000000
#define PERIOD_MAX_NS 1000000000
/* A gap's end is in step when it is within this of a whole number (1..MULT_MAX)
 * of periods after the previous one's: the larger of 0.5 ms and 3% of the
 * period (the jitter of waking a throttled process on a busy machine). */
#define TOL_MIN_NS 500000
#define TOL_REL 0.03
#define MULT_MAX 20
/* Enough of them: at least this many steps, this share of all. Scattered
 * ends fall in step by chance with probability ~2*TOL_REL per step. */
#define LOCK_MIN 12
#define LOCK_SHARE 0.6

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* How many of the steps d[0..n) are a whole number of periods p. */
static size_t in_step(const int64_t *d, size_t n, double p)
{
    double tol = fmax(TOL_MIN_NS, TOL_REL * p);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        double m = round((double)d[i] / p);
        if (m >= 1 && m <= MULT_MAX && fabs((double)d[i] - m * p) <= tol)
            k++;
    }
    return k;
}

/* The period that fits the steps in step best: least squares of
 * step = m x period over them (the search's grid is coarser than the
 * tolerance). */
static double refine(const int64_t *d, size_t n, double p)
{
    double tol = fmax(TOL_MIN_NS, TOL_REL * p), sdm = 0, smm = 0;
    for (size_t i = 0; i < n; i++) {
        double m = round((double)d[i] / p);
        if (m >= 1 && m <= MULT_MAX && fabs((double)d[i] - m * p) <= tol) {
            sdm += (double)d[i] * m;
            smm += m * m;
        }
    }
    return smm > 0 ? sdm / smm : p;
}

int tb_quota_period(const int64_t *arr, size_t na, const int64_t *dep, size_t nd,
                    struct tb_quota *q)
{
    q->period_ns = 0;
    q->stops = q->steps = q->in_step = 0;
    if (nd < 3)
        return 0;
    int64_t *d = malloc(nd * sizeof *d), *g = malloc(nd * sizeof *g);
    int64_t *ends = malloc(nd * sizeof *ends);
    if (!d || !g || !ends) {
        free(d);
        free(g);
        free(ends);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i < nd; i++)
        d[i] = dep[i];
    qsort(d, nd, sizeof *d, cmp_i64);
    /* Gaps between consecutive completions during which a request was in
     * flight throughout: more arrived by the first completion than had left
     * with it. */
    size_t ng = 0, a = 0;
    int64_t *gs = malloc(nd * sizeof *gs);
    if (!gs) {
        free(d);
        free(g);
        free(ends);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i + 1 < nd; i++) {
        while (a < na && arr[a] <= d[i])
            a++;
        if (a > i + 1) {
            g[ng] = d[i + 1] - d[i];
            ends[ng] = d[i + 1];
            gs[ng] = g[ng];
            ng++;
        }
    }
    if (ng >= LOCK_MIN) {
        qsort(gs, ng, sizeof *gs, cmp_i64);
        int64_t gmin = gs[ng / 2] * GAP_REL;
        if (gmin < GAP_MIN_NS)
            gmin = GAP_MIN_NS;
        /* The ends of the long gaps, and the steps between them; the
         * shortest gaps counted may be the spacing of slow answers rather
         * than stops, so longer and longer ones are tried too. */
        for (int twice = 0; twice < 4 && !q->period_ns; twice++, gmin *= 2) {
            size_t ne = 0;
            for (size_t i = 0; i < ng; i++)
                if (g[i] >= gmin)
                    d[ne++] = ends[i];
            if (twice == 0)
                q->stops = ne;
            size_t ns = 0;
            for (size_t i = 0; i + 1 < ne; i++) {
                int64_t s = d[i + 1] - d[i];
                if (s <= (int64_t)MULT_MAX * PERIOD_MAX_NS)
                    gs[ns++] = s;
            }
            if (ns < LOCK_MIN)
                break;
            /* Candidate periods: the 10th, 25th and 50th percentile steps
             * (the shortest are most often one period; with stops in few
             * periods the median is several) and their halves, thirds,
             * quarters; around each a fine search for the period that puts
             * the most steps in step. Of those that pass, the longest whose
             * count in step is at least 90% of the best one's (a period's
             * divisors are in step too). */
            for (size_t i = 0; i < ns; i++)
                d[i] = gs[i];
            qsort(d, ns, sizeof *d, cmp_i64);
            const double qv[3] = {(double)d[ns / 10], (double)d[ns / 4], (double)d[ns / 2]};
            double cp[12];
            size_t ck[12], nc = 0, kmax = 0;
            for (int qi = 0; qi < 3; qi++)
                for (int m = 1; m <= 4; m++) {
                    double c = qv[qi] / m, best_p = 0;
                    size_t best = 0;
                    if (c < PERIOD_MIN_NS * 0.9 || c > PERIOD_MAX_NS * 1.1)
                        continue;
                    for (int j = -80; j <= 80; j++) {
                        double p = c * (1 + j * 0.001);
                        size_t k = in_step(gs, ns, p);
                        if (k > best) {
                            best = k;
                            best_p = p;
                        }
                    }
                    if (best_p < PERIOD_MIN_NS || best_p > PERIOD_MAX_NS)
                        continue;
                    /* Steps longer than MULT_MAX periods (the server not
                     * throttled for a while) are not counted either way; a
                     * short period's tolerance is a large share of it, so
                     * its chance of steps in step is high and it must beat
                     * that three times over. */
                    size_t within = 0;
                    for (size_t i = 0; i < ns; i++)
                        within += (double)gs[i] < (MULT_MAX + 0.5) * best_p;
                    double chance = 2 * fmax(TOL_MIN_NS, TOL_REL * best_p) / best_p;
                    if (best >= LOCK_MIN &&
                        (double)best >= fmax(LOCK_SHARE, 3 * chance) * (double)within) {
                        cp[nc] = best_p;
                        ck[nc++] = best;
                        kmax = best > kmax ? best : kmax;
                    }
                }
            double pbest = 0;
            size_t kbest = 0;
            for (size_t i = 0; i < nc; i++)
                if ((double)ck[i] >= 0.9 * (double)kmax && cp[i] > pbest) {
                    pbest = cp[i];
                    kbest = ck[i];
                }
            if (pbest > 0) {
                q->period_ns = (int64_t)llround(refine(gs, ns, pbest));
                q->in_step = kbest;
                q->stops = ne;
            }
            q->steps = ns;
        }
    }
    free(gs);
    free(d);
    free(g);
    free(ends);
    return 0;
}
