/* SPDX-License-Identifier: MIT */
/* isolated.c — whether a CPU changed speed, from the requests it served
 * alone (stats.h tb_isolated_speed; docs/diagnose.md "speed").
 *
 * Why: the saturated work rate and the time per request over busy seconds
 * both move with bursts of load on a CPU of one speed (requests share the
 * CPUs, completions lag the work done in short episodes), so thresholds on
 * them were measured on few configurations and misread a fixed CPU with
 * bursty exponential demands as a changing one. A request alone in its
 * server is not shared with anything: its own time is demand / speed. The
 * demands are random, so the question is statistical: do the seconds differ
 * more than their samples scatter within each second (F of a one-way
 * analysis of variance), and by how much (effect). Logs, so that a speed
 * change is a shift whatever the demand, and exponential demands' long tail
 * does not dominate; each class centred on its own mean, so that a change of
 * mix is not a change of speed. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

static int cmp_iso(const void *a, const void *b)
{
    const struct tb_iso_sample *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean log own time per class: classes are few and small ids, but any id
 * works (a linear table of the ones seen). */
struct cls_mean {
    uint32_t cls;
    double sum;
    size_t n;
};

int tb_isolated_speed(struct tb_iso_sample *s, size_t n, int64_t group_ns,
                      struct tb_iso_speed *out)
{
    *out = (struct tb_iso_speed){.f = NAN, .effect = NAN};
    if (group_ns <= 0)
        return TB_E_INVAL;
    if (!n)
        return 0;
    struct cls_mean *cm = NULL;
    size_t ncm = 0, cap = 0;
    double *x = malloc(n * sizeof *x), *gm = malloc(n * sizeof *gm);
    int rc = 0;
    if (!x || !gm) {
        rc = TB_E_NOMEM;
        goto out;
    }
    size_t *ci = malloc(n * sizeof *ci);
    if (!ci) {
        rc = TB_E_NOMEM;
        goto out;
    }
    /* Censored samples (tb_isolated_logrank's) are left out: their times
     * are lower bounds. The rest move to the front, in time order. */
    size_t nu = 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i].censored) {
            struct tb_iso_sample tmp = s[nu];
            s[nu++] = s[i];
            s[i] = tmp;
        }
    n = nu;
    qsort(s, n, sizeof *s, cmp_iso);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < ncm && cm[j].cls != s[i].cls)
            j++;
        if (j == ncm) {
            if (tb_grow(&cm, &cap, ncm + 1, sizeof *cm)) {
                free(ci);
                rc = TB_E_NOMEM;
                goto out;
            }
            cm[ncm++] = (struct cls_mean){.cls = s[i].cls};
        }
        ci[i] = j;
        x[i] = log(s[i].own_ns > 1 ? s[i].own_ns : 1);
        cm[j].sum += x[i];
        cm[j].n++;
    }
    for (size_t i = 0; i < n; i++)
        x[i] -= cm[ci[i]].sum / (double)cm[ci[i]].n;
    free(ci);
    /* Groups: runs of samples in one group_ns slot (sorted by time). */
    double grand = 0, within = 0, between = 0;
    size_t used = 0, ng = 0;
    for (size_t i = 0; i < n;) {
        int64_t g = s[i].t / group_ns;
        size_t j = i;
        double sum = 0;
        while (j < n && s[j].t / group_ns == g)
            sum += x[j++];
        if (j - i >= 3) {
            double m = sum / (double)(j - i);
            for (size_t k = i; k < j; k++)
                within += (x[k] - m) * (x[k] - m);
            gm[ng++] = m;
            grand += sum;
            used += j - i;
        }
        i = j;
    }
    out->samples = used;
    out->groups = ng;
    if (ng >= 6 && used > ng) {
        grand /= (double)used;
        /* Between-group sum of squares, weighted by group size: recomputed
         * from the groups' means and sizes in a second walk. */
        size_t gi = 0;
        for (size_t i = 0; i < n;) {
            int64_t g = s[i].t / group_ns;
            size_t j = i;
            while (j < n && s[j].t / group_ns == g)
                j++;
            if (j - i >= 3) {
                double d = gm[gi++] - grand;
                between += (double)(j - i) * d * d;
            }
            i = j;
        }
        double msb = between / (double)(ng - 1), msw = within / (double)(used - ng);
        out->f = msw > 0 ? msb / msw : (msb > 0 ? INFINITY : 0);
        qsort(gm, ng, sizeof *gm, cmp_d);
        /* The second slowest second over the second fastest: a level may
         * hold only a few seconds of the capture, and one odd second alone
         * does not make a speed. */
        out->effect = exp(gm[ng - 2] - gm[1]);
    }
out:
    free(cm);
    free(x);
    free(gm);
    return rc;
}

/* ---- log-rank over periods (tb_isolated_logrank) ------------------------ */

/* A sample reduced to what the test needs: its stratum, observed own time,
 * whether it left alone (an event) and its period's dense index. */
struct lr_obs {
    uint32_t cls;
    double t;
    bool event;
    size_t g;
};

static int cmp_lr(const void *a, const void *b)
{
    const struct lr_obs *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

int tb_isolated_logrank(struct tb_iso_sample *s, size_t n, int64_t group_ns, double min_expected,
                        struct tb_iso_logrank *out)
{
    *out = (struct tb_iso_logrank){.chi2 = NAN, .z = NAN, .effect = NAN};
    if (group_ns <= 0)
        return TB_E_INVAL;
    if (!n)
        return 0;
    struct lr_obs *o = malloc(n * sizeof *o);
    double *obs = NULL, *exp_ = NULL;
    int rc = 0;
    if (!o) {
        rc = TB_E_NOMEM;
        goto out;
    }
    qsort(s, n, sizeof *s, cmp_iso);
    /* Periods: dense indices in time order (at most n of them). */
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && s[i].t / group_ns != s[i - 1].t / group_ns)
            ng++;
        o[i] = (struct lr_obs){s[i].cls, s[i].own_ns, !s[i].censored, ng};
        out->events += !s[i].censored;
    }
    ng++;
    out->samples = n;
    obs = calloc(ng, sizeof *obs);
    exp_ = calloc(ng, sizeof *exp_);
    if (!obs || !exp_) {
        rc = TB_E_NOMEM;
        goto out;
    }
    qsort(o, n, sizeof *o, cmp_lr);
    /* Per class: walk the observed times upwards; the Nelson-Aalen
     * cumulative hazard H grows by (events at t) / (at risk at t) at each
     * distinct time t; a sample adds H at its own time (ties included) to its
     * period's expected count E and, if it left alone, 1 to its observed O.
     * Summing H over a period's samples is the textbook sum over event times
     * of events x (the period's share of those at risk). */
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && o[end].cls == o[i].cls)
            end++;
        double h = 0;
        size_t at_risk = end - i;
        for (size_t j = i; j < end;) {
            size_t k = j, d = 0;
            while (k < end && o[k].t == o[j].t)
                d += o[k++].event;
            h += (double)d / (double)at_risk;
            for (size_t q = j; q < k; q++) {
                exp_[o[q].g] += h;
                obs[o[q].g] += o[q].event;
            }
            at_risk -= k - j;
            j = k;
        }
        i = end;
    }
    double chi2 = 0;
    size_t used = 0;
    for (size_t g = 0; g < ng; g++)
        if (exp_[g] >= min_expected && exp_[g] > 0) {
            chi2 += (obs[g] - exp_[g]) * (obs[g] - exp_[g]) / exp_[g];
            obs[used] = obs[g] / exp_[g]; /* O/E, kept in place for the effect */
            used++;
        }
    out->groups = used;
    if (used >= 6) {
        double df = (double)(used - 1), v = 2 / (9 * df);
        out->chi2 = chi2;
        out->z = (cbrt(chi2 / df) - (1 - v)) / sqrt(v);
        qsort(obs, used, sizeof *obs, cmp_d);
        /* A slower CPU leaves fewer requests alone than expected (low O/E):
         * second highest over second lowest, as the effect above. */
        out->effect = obs[1] > 0 ? obs[used - 2] / obs[1] : INFINITY;
    }
out:
    free(o);
    free(obs);
    free(exp_);
    return rc;
}
