/* SPDX-License-Identifier: MIT */
/* workunit.c — the work unit: an approximate greatest common divisor of the
 * classes' service times (DESIGN.md "Work unit"). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every significant class within `tol` of a whole number (>= 1) of units u. */
static bool fits(const int64_t *s, const bool *sig, size_t n, double u, double tol)
{
    for (size_t i = 0; i < n; i++) {
        if (!sig[i])
            continue;
        double r = (double)s[i] / u;
        double m = nearbyint(r);
        if (m < 1 || fabs(r - m) > tol)
            return false;
    }
    return true;
}

/* Least-squares unit given the multiples each class fits: u = Σ w·s·m / Σ w·m². */
static double refine(const int64_t *s, const double *w, const bool *sig, size_t n, double u)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!sig[i])
            continue;
        double m = nearbyint((double)s[i] / u), wi = w ? w[i] : 1.0;
        num += wi * (double)s[i] * m;
        den += wi * m * m;
    }
    return den > 0 ? num / den : u;
}

int tb_work_unit(const int64_t *service_ns, const double *weight, size_t n, double tolerance,
                 int64_t floor_ns, double min_share, int64_t *unit_ns)
{
    if (!service_ns || !unit_ns || tolerance < 0 || tolerance >= 0.5)
        return TB_E_INVAL;
    double total = 0;
    size_t npos = 0;
    for (size_t i = 0; i < n; i++) {
        if (service_ns[i] <= 0)
            continue;
        npos++;
        total += weight ? TB_MAX(weight[i], 0.0) : 1.0;
    }
    if (!npos)
        return TB_E_NOTFOUND;
    bool sigbuf[64], *sig = n <= 64 ? sigbuf : malloc(n * sizeof *sig);
    if (!sig)
        return TB_E_NOMEM;
    /* Classes holding less than min_share of the requests do not constrain the
     * unit: a rare class with a noisy estimate would otherwise force a tiny u
     * on everything. When weights are all zero every class counts. */
    size_t nsig = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = weight ? TB_MAX(weight[i], 0.0) : 1.0;
        sig[i] = service_ns[i] > 0 && (total <= 0 || wi >= min_share * total);
        nsig += sig[i];
    }
    if (!nsig)
        for (size_t i = 0; i < n; i++)
            nsig += (sig[i] = service_ns[i] > 0);
    int64_t sref = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (sig[i])
            sref = TB_MIN(sref, service_ns[i]);
    double lowest = TB_MAX((double)floor_ns, (double)sref / 20.0);
    double best = (double)sref;
    for (int k = 1;; k++) {
        double u = (double)sref / k;
        if (u < lowest)
            break;
        if (!fits(service_ns, sig, n, u, tolerance))
            continue;
        best = u;
        double r = refine(service_ns, weight, sig, n, u);
        if (r > 0 && fits(service_ns, sig, n, r, tolerance))
            best = r;
        /* Two significant digits read better ("10ms", not "10.1ms") and are
         * kept only when every class still fits. */
        double p = pow(10.0, floor(log10(best)) - 1);
        double r2 = nearbyint(best / p) * p;
        if (r2 >= 1 && fits(service_ns, sig, n, r2, tolerance))
            best = r2;
        break;
    }
    if (sig != sigbuf)
        free(sig);
    *unit_ns = TB_MAX((int64_t)llround(best), 1);
    return 0;
}

/* ---- units per period ---------------------------------------------------------
 * Why a common factor is taken out. Service times are estimated per period
 * because they drift (DESIGN.md), but a CPU changing speed moves every
 * class of the period by the same factor, and units that followed it would
 * hide it: the congested windows of a slow period would come out at the same
 * normalized throughput as those of a fast one, and the speed levels
 * (correlate, levels.c) would vanish. Drift that matters to the work unit
 * moves classes relative to each other; the common part is capacity. It also
 * removes the estimator's own swing with utilization (isolated samples read
 * low on busy periods). */
static bool estimated(const struct tb_class_service *r)
{
    return (r->method == TB_SVC_ISOLATED || r->method == TB_SVC_QUANTILE) && r->service_ns > 0;
}

static int cmp_period(const void *a, const void *b)
{
    const struct tb_class_service *x = *(const struct tb_class_service *const *)a;
    const struct tb_class_service *y = *(const struct tb_class_service *const *)b;
    return (x->period_start_ns > y->period_start_ns) - (x->period_start_ns < y->period_start_ns);
}

int tb_work_units_assign(struct tb_class_service *rows, size_t n, int64_t unit_ns)
{
    if ((n && !rows) || unit_ns < 0)
        return TB_E_INVAL;
    if (!n)
        return 0;
    /* ln s(c, p) = a_c + b_p + rest, fitted by request-weighted least squares
     * (alternating means: a_c given b, b_p given a, to convergence); units
     * then use ln s - b_p, so the period effect b_p (shared by every class:
     * a speed) is gone and each class's own drift (the rest) stays. b is
     * centred on the request-weighted mean of all rows. */
    double *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    const struct tb_class_service **ord = malloc(n * sizeof *ord);
    if (!a || !b || !ord) {
        free(a);
        free(b);
        free(ord);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = &rows[i];
    qsort(ord, n, sizeof *ord, cmp_period);
    for (int it = 0; it < 100; it++) {
        /* a_c over the class's rows (rows come sorted by class). */
        for (size_t i = 0; i < n;) {
            size_t j = i;
            double sw = 0, sl = 0;
            for (; j < n && rows[j].class_id == rows[i].class_id; j++)
                if (estimated(&rows[j])) {
                    double w = rows[j].requests ? (double)rows[j].requests : 1.0;
                    sw += w;
                    sl += w * (log((double)rows[j].service_ns) - b[j]);
                }
            for (size_t k = i; k < j; k++)
                a[k] = sw > 0 ? sl / sw : 0;
            i = j;
        }
        /* b_p over the period's rows. */
        double moved = 0, cw = 0, cs = 0;
        for (size_t i = 0; i < n;) {
            size_t j = i;
            double sw = 0, sl = 0;
            for (; j < n && ord[j]->period_start_ns == ord[i]->period_start_ns; j++) {
                size_t r = (size_t)(ord[j] - rows);
                if (estimated(ord[j])) {
                    double w = ord[j]->requests ? (double)ord[j]->requests : 1.0;
                    sw += w;
                    sl += w * (log((double)ord[j]->service_ns) - a[r]);
                }
            }
            double bp = sw > 0 ? sl / sw : 0;
            for (size_t k = i; k < j; k++) {
                size_t r = (size_t)(ord[k] - rows);
                moved = fmax(moved, fabs(bp - b[r]));
                b[r] = bp;
            }
            cw += sw;
            cs += sw * bp;
            i = j;
        }
        if (cw > 0)
            for (size_t i = 0; i < n; i++)
                b[i] -= cs / cw;
        if (moved < 1e-12)
            break;
    }
    for (size_t i = 0; i < n; i++) {
        double s = (double)rows[i].service_ns;
        if (estimated(&rows[i]))
            s *= exp(-b[i]);
        rows[i].units = unit_ns > 0 ? s / (double)unit_ns : 1.0;
    }
    free(a);
    free(b);
    free(ord);
    return 0;
}
