/* SPDX-License-Identifier: MIT */
/* workunit.c — the work unit: an approximate greatest common divisor of the
 * classes' service times (DESIGN.md "Work unit"). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

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
