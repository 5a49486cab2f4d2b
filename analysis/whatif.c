/* SPDX-License-Identifier: MIT */
/* whatif.c — the what-if forecast (whatif.h; docs/whatif.md has the model
 * and its measured error). Every server is a station: service time per
 * request s, c cores, visits per front request; each caller server's pool
 * to a tier a station of m connections held for a call's duration. Per
 * period (1 s) the workload is what was measured there: a closed population
 * (Little's law: N = X (R + Z)) or an open arrival rate. The model is solved
 * for the measured system and for the changed one; each front request's
 * time in every station is scaled by that station's ratio, which gives the
 * forecast distribution (mean and percentiles), so the model only has to get
 * ratios right, not absolute times. */
#include "whatif.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callers.h"
#include "critpath.h"
#include "link.h"
#include "util.h"

#define PERIOD_NS (100 * TB_NS_PER_MS)
#define THINK_MAX_NS (60 * TB_NS_PER_SEC)
#define MAX_CORES 256

/* Erlang C: probability that an arrival waits at an M/M/c queue of offered
 * load a (< c). */
static double erlang_c(double c, double a)
{
    if (a <= 0)
        return 0;
    /* Far more servers than load (Poisson tail beyond ten deviations): no
     * wait worth counting, and no O(c) sum for a server without a limit. */
    if (c > a + 10 * sqrt(a) + 10)
        return 0;
    int n = (int)c;
    double term = 1, sum = 1; /* a^k / k! for k = 0 */
    for (int k = 1; k < n; k++) {
        term *= a / k;
        sum += term;
    }
    double last = term * a / n * (n / (n - a));
    return last / (sum + last);
}

/* Mean time per visit at a station of c cores and service s under arrival
 * rate lambda (per ns): s plus the M/M/c wait; INFINITY when saturated. */
static double station_rt(double s, double c, double lambda)
{
    double a = lambda * s;
    if (a >= c)
        return INFINITY;
    return s + erlang_c(c, a) * s / (c - a);
}

/* Mean wait for one of m connections held h ns each, at rate lambda. */
static double pool_wait(double m, double h, double lambda)
{
    double a = lambda * h;
    if (a >= m)
        return INFINITY;
    return erlang_c(m, a) * h / (m - a);
}

struct station {
    uint32_t server, tier;
    double s, c;          /* service per visit (ns), cores */
    double s_new, c_new;
    double visits;        /* per front request */
    double *own;          /* per period: own time summed */
    uint64_t *cnt;        /* per period: requests (by their front request's period) */
    uint64_t n;           /* requests in front requests' trees */
    double pool_wait, own_total; /* their waits for a pool connection, own time */
    bool pool_bound;      /* waits on its pool for more than 5% of its own time */
    double *ratio;        /* per period: forecast / baseline residence */
};

struct pool {
    struct tb_addr host;  /* the caller's machine */
    uint32_t caller_server, caller_tier, callee_tier;
    double m, m_new;
    double h;             /* mean call duration (ns) */
    double *wait;         /* per period: waits summed */
    uint64_t *calls;      /* per period */
    double *ratio;
    double *add;          /* per period: wait added per call when the baseline model has none */
};

struct pc {
    uint32_t caller, callee;
    uint64_t conn;
};

static int pc_cmp(const void *a, const void *b)
{
    const struct pc *x = a, *y = b;
    if (x->caller != y->caller)
        return x->caller < y->caller ? -1 : 1;
    if (x->callee != y->callee)
        return x->callee < y->callee ? -1 : 1;
    return x->conn < y->conn ? -1 : x->conn > y->conn;
}

/* The pool a caller server holds (the first with connections reused). */
static const struct pool *pool_of(const struct pool *pl, size_t n, uint32_t server)
{
    for (size_t k = 0; k < n; k++)
        if (pl[k].caller_server == server && pl[k].m > 0)
            return &pl[k];
    return NULL;
}

int tb_whatif(struct tb_store *st, const struct tb_catalog *cat, const struct tb_whatif_opts *o,
              struct tb_whatif_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    struct tb_linked L;
    memset(&L, 0, sizeof L);
    const int64_t *root = NULL;
    const double *own = NULL;
    int64_t *period = NULL;
    double *rt = NULL, *delta = NULL;
    struct station *sts = NULL;
    struct pool *pls = NULL;
    size_t nst = 0, npl = 0, nper = 0;
    uint64_t *nf_p = NULL;
    double *sum_rt_p = NULL, *xb = NULL, *xn = NULL;
    int rc = tb_linked_load(st, cat, INT64_MIN, INT64_MAX, &L);
    if (rc) {
        if (rc == TB_E_NOTFOUND)
            snprintf(err, errlen, "whatif: no requests stored, or no front tier among them");
        return rc;
    }
    const struct tb_request *rq = L.rq;
    size_t n = L.n;
    uint32_t ntiers = tb_catalog_tier_count(cat);
    uint32_t front = L.g.front;
    r->front_tier = front;
    const char *tname = tb_catalog_tier_get(cat, o->tier)->name;
    bool called = false;
    for (uint32_t a = 1; a <= ntiers; a++)
        called |= L.g.calls[a * (ntiers + 1) + o->tier] > 0;
    if (!called) {
        snprintf(err, errlen,
                 "whatif: tier '%s' has no callers: no other tier calls it%s; whatif changes a "
                 "tier that the front tier's requests reach through calls",
                 tname, o->tier == front ? " (it is the front tier, called by users)" : "");
        rc = TB_E_INVAL;
        goto out;
    }
    /* Links; roots (front requests), own time, pool waits, service times. */
    if ((rc = tb_linked_link(cat, &L)))
        goto out;
    const struct tb_links lk = L.lk;
    const struct tb_trees tr = L.t;
    root = tr.root;
    own = tr.own;

    /* Front requests: the baseline, and periods. */
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    size_t nfront = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].tier != front)
            continue;
        nfront++;
        t0 = TB_MIN(t0, rq[i].arrival_ns);
        t1 = TB_MAX(t1, rq[i].departure_ns);
    }
    if (nfront == 0 || t1 <= t0) {
        snprintf(err, errlen, "whatif: the front tier has no complete requests");
        rc = TB_E_NOTFOUND;
        goto out;
    }
    nper = (size_t)((t1 - t0) / PERIOD_NS) + 1;
    period = malloc(n * sizeof *period);
    rt = malloc(nfront * sizeof *rt);
    delta = calloc(n, sizeof *delta);
    nf_p = calloc(nper, sizeof *nf_p);
    sum_rt_p = calloc(nper, sizeof *sum_rt_p);
    xb = calloc(nper, sizeof *xb);
    xn = calloc(nper, sizeof *xn);
    if (!period || !rt || !delta || !nf_p || !sum_rt_p || !xb || !xn) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        period[i] = root[i] >= 0 ? (rq[root[i]].arrival_ns - t0) / PERIOD_NS : -1;
    {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (rq[i].tier != front)
                continue;
            rt[k++] = (double)(rq[i].departure_ns - rq[i].arrival_ns);
            nf_p[period[i]]++;
            sum_rt_p[period[i]] += (double)(rq[i].departure_ns - rq[i].arrival_ns);
        }
    }
    double span_s = (double)(t1 - t0) / 1e9;
    {
        double *srt = malloc(nfront * sizeof *srt);
        if (!srt) {
            rc = TB_E_NOMEM;
            goto out;
        }
        memcpy(srt, rt, nfront * sizeof *srt);
        qsort(srt, nfront, sizeof *srt, tb_cmp_double);
        double sum = 0;
        for (size_t i = 0; i < nfront; i++)
            sum += srt[i];
        r->baseline.rt_mean_ns = sum / (double)nfront;
        r->baseline.rt_p50_ns = tb_quantile(srt, nfront, 0.50);
        r->baseline.rt_p95_ns = tb_quantile(srt, nfront, 0.95);
        r->baseline.rt_p99_ns = tb_quantile(srt, nfront, 0.99);
        r->baseline.throughput = (double)nfront / span_s;
        free(srt);
    }

    /* Closed or open: users on keep-alive connections think between a
     * response and their next request on the same connection. */
    double think_sum = 0;
    size_t nthink = 0;
    {
        const struct tb_request **fr = malloc(nfront * sizeof *fr);
        if (!fr) {
            rc = TB_E_NOMEM;
            goto out;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (rq[i].tier == front)
                fr[k++] = &rq[i];
        struct ct {
            uint64_t conn;
            int64_t a, d;
        } *cts = malloc((k + 1) * sizeof *cts);
        if (!cts) {
            free(fr);
            rc = TB_E_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < k; i++)
            cts[i] = (struct ct){fr[i]->conn, fr[i]->arrival_ns, fr[i]->departure_ns};
        free(fr);
        /* By connection, keeping arrival order within one (a stable merge sort). */
        size_t m = k;
        for (size_t step = 1; step < m; step *= 2) { /* bottom-up merge sort: stable */
            struct ct *tmp = malloc(m * sizeof *tmp);
            if (!tmp) {
                free(cts);
                rc = TB_E_NOMEM;
                goto out;
            }
            for (size_t lo = 0; lo < m; lo += 2 * step) {
                size_t mid = TB_MIN(lo + step, m), hi = TB_MIN(lo + 2 * step, m);
                size_t a = lo, b = mid, w = lo;
                while (a < mid && b < hi)
                    tmp[w++] = (cts[b].conn < cts[a].conn) ? cts[b++] : cts[a++];
                while (a < mid)
                    tmp[w++] = cts[a++];
                while (b < hi)
                    tmp[w++] = cts[b++];
            }
            memcpy(cts, tmp, m * sizeof *tmp);
            free(tmp);
        }
        for (size_t i = 1; i < m; i++) {
            if (cts[i].conn != cts[i - 1].conn)
                continue;
            int64_t gap = cts[i].a - cts[i - 1].d;
            if (gap > 0 && gap < THINK_MAX_NS) {
                think_sum += (double)gap;
                nthink++;
            }
        }
        free(cts);
    }
    r->closed = nthink >= nfront / 10 && nthink >= 20;
    r->think_ns = nthink ? think_sum / (double)nthink : 0;
    if (r->closed)
        snprintf(r->why, sizeof r->why,
                 "closed: %zu idle gaps between a response and the next request on the front "
                 "tier's keep-alive connections (users thinking, mean %.3g ms)",
                 nthink, r->think_ns / 1e6);
    else
        snprintf(r->why, sizeof r->why,
                 "open: the front tier's connections show %zu idle gaps for %zu requests (no "
                 "users waiting on their own responses)",
                 nthink, nfront);

    /* Stations: every server with requests in the front requests' trees. */
    uint32_t nsrv = tb_catalog_server_count(cat);
    size_t *sidx = malloc((nsrv + 1) * sizeof *sidx);
    if (!sidx) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (uint32_t s = 0; s <= nsrv; s++)
        sidx[s] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (root[i] < 0 || rq[i].server == 0 || rq[i].server > nsrv || sidx[rq[i].server] != SIZE_MAX)
            continue;
        sidx[rq[i].server] = nst++;
    }
    sts = calloc(nst + 1, sizeof *sts);
    if (!sts) {
        free(sidx);
        rc = TB_E_NOMEM;
        goto out;
    }
    for (uint32_t s = 1; s <= nsrv; s++) {
        if (sidx[s] == SIZE_MAX)
            continue;
        struct station *x = &sts[sidx[s]];
        x->server = s;
        x->tier = tb_catalog_server_get(cat, s)->tier;
        x->own = calloc(nper, sizeof *x->own);
        x->cnt = calloc(nper, sizeof *x->cnt);
        x->ratio = malloc(nper * sizeof *x->ratio);
        if (!x->own || !x->cnt || !x->ratio) {
            free(sidx);
            rc = TB_E_NOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (root[i] < 0 || sidx[rq[i].server] == SIZE_MAX)
            continue;
        struct station *x = &sts[sidx[rq[i].server]];
        x->own[period[i]] += own[i];
        x->cnt[period[i]]++;
        x->n++;
        x->pool_wait += tr.pool[i];
        x->own_total += own[i];
    }
    for (size_t k = 0; k < nst; k++) {
        struct station *x = &sts[k];
        x->s = tr.svc[x->server];
        x->visits = (double)x->n / (double)nfront;
        /* Cores by work conservation (critpath.c, tb_trees). */
        x->c = tr.cores[x->server] > 0 ? tr.cores[x->server] : MAX_CORES;
        /* Requests that wait for a pool connection look at work to the
         * clock when the linker missed their wait: a caller that waits on
         * its pool shows a CPU limit that may be the pool's. It is given
         * none, and the time of its requests alone. */
        if (x->pool_wait > 0.05 * x->own_total) {
            x->pool_bound = true;
            x->c = MAX_CORES;
            x->s = tr.svc_alone[x->server];
        }
        x->s_new = x->s;
        x->c_new = x->c;
        bool hit = x->tier == o->tier && (!o->server || o->server == x->server);
        if (hit && o->change == TB_WHATIF_SPEEDUP)
            x->s_new = x->s / o->value;
        if (hit && o->change == TB_WHATIF_CORES)
            x->c_new = o->value;
        if (hit) {
            r->service_ns = x->s;
            r->cores = x->c;
            r->visits += x->visits;
        }
    }

    /* Pools: a caller server's calls to a tier over reused connections. */
    {
        /* (caller server, callee tier) -> pool; connections counted per pair. */
        struct pc *pcs = malloc((n + 1) * sizeof *pcs);
        if (!pcs) {
            free(sidx);
            rc = TB_E_NOMEM;
            goto out;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (lk.parent[i] && root[i] >= 0)
                pcs[m++] = (struct pc){rq[lk.parent[i] - 1].server, rq[i].tier, rq[i].conn};
        /* distinct pairs, and distinct connections per pair: small sets; a
         * quadratic scan over pairs is fine, connections by sort. */
        qsort(pcs, m, sizeof *pcs, pc_cmp);
        for (size_t i = 0; i < m;) {
            size_t j = i;
            uint64_t conns = 0;
            while (j < m && pcs[j].caller == pcs[i].caller && pcs[j].callee == pcs[i].callee) {
                if (j == i || pcs[j].conn != pcs[j - 1].conn)
                    conns++;
                j++;
            }
            struct pool *np = realloc(pls, (npl + 1) * sizeof *pls);
            if (!np) {
                free(pcs);
                free(sidx);
                rc = TB_E_NOMEM;
                goto out;
            }
            pls = np;
            struct pool *x = &pls[npl++];
            memset(x, 0, sizeof *x);
            x->caller_server = pcs[i].caller;
            x->caller_tier = tb_catalog_server_get(cat, pcs[i].caller)->tier;
            x->callee_tier = pcs[i].callee;
            /* Reused connections (more calls than connections) make a pool. */
            x->m = (j - i) >= 2 * conns ? (double)conns : 0;
            x->m_new = x->m;
            x->wait = calloc(nper, sizeof *x->wait);
            x->calls = calloc(nper, sizeof *x->calls);
            x->ratio = malloc(nper * sizeof *x->ratio);
            x->add = calloc(nper, sizeof *x->add);
            if (!x->wait || !x->calls || !x->ratio || !x->add) {
                free(pcs);
                free(sidx);
                rc = TB_E_NOMEM;
                goto out;
            }
            i = j;
        }
        free(pcs);
    }
    free(sidx);
    for (size_t i = 0; i < n; i++) {
        if (!lk.parent[i] || root[i] < 0)
            continue;
        uint32_t caller = rq[lk.parent[i] - 1].server;
        for (size_t k = 0; k < npl; k++) {
            if (pls[k].caller_server != caller || pls[k].callee_tier != rq[i].tier)
                continue;
            pls[k].wait[period[i]] += (double)lk.pool_wait_ns[i];
            pls[k].calls[period[i]]++;
            pls[k].h += (double)(rq[i].departure_ns - rq[i].arrival_ns);
            break;
        }
    }
    bool any_pool = false;
    for (size_t k = 0; k < npl; k++) {
        uint64_t c = 0;
        for (size_t p = 0; p < nper; p++)
            c += pls[k].calls[p];
        pls[k].h = c ? pls[k].h / (double)c : 0;
        bool hit = pls[k].caller_tier == o->tier &&
                   (!o->server || o->server == pls[k].caller_server) && pls[k].m > 0;
        if (hit && o->change == TB_WHATIF_POOL) {
            pls[k].m_new = o->value;
            any_pool = true;
            r->cores = pls[k].m;
        }
    }
    if (o->change == TB_WHATIF_POOL && !any_pool) {
        snprintf(err, errlen,
                 "whatif: tier '%s' holds no connection pool: its servers make no calls over "
                 "reused connections (--pool sets the connections of the tier that calls)",
                 tname);
        rc = TB_E_INVAL;
        goto out;
    }

    /* Per period: solve the model for the measured and the changed system. */
    for (size_t p = 0; p < nper; p++) {
        if (!nf_p[p])
            continue;
        double len = (double)PERIOD_NS;
        double xm = (double)nf_p[p] / len;           /* front requests per ns */
        double rmeas = sum_rt_p[p] / (double)nf_p[p];
        double users = xm * (rmeas + r->think_ns);
        /* Station model times at throughput x. */
        double xs[2];
        for (int v = 0; v < 2; v++) {
            bool nw = v == 1;
            double x = xm;
            if (r->closed) {
                /* N = x (Z + R(x)): R grows with x, so bisection. */
                double lo = 0, hi = users / TB_MAX(r->think_ns, 1.0);
                for (int it = 0; it < 100; it++) {
                    double mid = (lo + hi) / 2, rr = 0;
                    for (size_t k = 0; k < nst; k++) {
                        double s = nw ? sts[k].s_new : sts[k].s, c = nw ? sts[k].c_new : sts[k].c;
                        double v1 = (double)sts[k].cnt[p] / (double)nf_p[p];
                        rr += v1 * station_rt(s, c, mid * v1);
                    }
                    for (size_t k = 0; k < npl; k++) {
                        if (pls[k].m <= 0)
                            continue;
                        double v1 = (double)pls[k].calls[p] / (double)nf_p[p];
                        rr += v1 * pool_wait(nw ? pls[k].m_new : pls[k].m, pls[k].h, mid * v1);
                    }
                    if (!isfinite(rr) || mid * (r->think_ns + rr) > users)
                        hi = mid;
                    else
                        lo = mid;
                }
                x = lo;
            }
            xs[v] = x;
        }
        xb[p] = xs[0];
        xn[p] = xs[1];
        for (size_t k = 0; k < nst; k++) {
            struct station *y = &sts[k];
            double v1 = (double)y->cnt[p] / (double)nf_p[p];
            double f = station_rt(y->s_new, y->c_new, xs[1] * v1);
            /* A changed station is forecast in absolute terms (the model's
             * time against the time measured there): its baseline may sit in
             * a transient the steady-state model overstates; the others by
             * the model's own ratio. */
            bool changed = y->s_new != y->s || y->c_new != y->c;
            double meas = y->cnt[p] ? y->own[p] / (double)y->cnt[p] : 0;
            /* The others keep their measured times: the model's feedback
             * through throughput is small when users think far longer than
             * they wait, and a ratio of two near-saturated model times is
             * unstable (one server's pool changed, the other's near full). */
            if (changed && meas > 0 && isfinite(f))
                y->ratio[p] = f / meas;
            else
                y->ratio[p] = 1.0;
        }
        for (size_t k = 0; k < npl; k++) {
            struct pool *y = &pls[k];
            if (y->m <= 0) {
                y->ratio[p] = 1;
                continue;
            }
            double v1 = (double)y->calls[p] / (double)nf_p[p];
            double b = pool_wait(y->m, y->h, xs[0] * v1), f = pool_wait(y->m_new, y->h, xs[1] * v1);
            if (!isfinite(f))
                f = b;
            if (y->m_new == y->m) {
                y->ratio[p] = 1;
            } else if (b > 1 && isfinite(b)) {
                y->ratio[p] = f / b;
            } else {
                y->ratio[p] = 1;
                y->add[p] = f - (isfinite(b) ? b : 0);
            }
        }
    }
    /* Each front request's time in each station, scaled. */
    for (size_t i = 0; i < n; i++) {
        if (root[i] < 0)
            continue;
        size_t p = (size_t)period[i];
        for (size_t k = 0; k < nst; k++) {
            if (sts[k].server != rq[i].server)
                continue;
            const struct pool *pb = sts[k].pool_bound ? pool_of(pls, npl, rq[i].server) : NULL;
            if (pb) {
                /* A pool-bound caller: its time beyond its work is taken
                 * for waits the linker did not attribute, and scales as
                 * the pool's. */
                double work = fmin(own[i], tr.work[i]);
                delta[root[i]] += work * (sts[k].ratio[p] - 1) +
                                  (own[i] - work) * (pb->ratio[p] - 1);
            } else {
                delta[root[i]] += own[i] * (sts[k].ratio[p] - 1);
            }
            break;
        }
        if (lk.parent[i]) {
            uint32_t caller = rq[lk.parent[i] - 1].server;
            for (size_t k = 0; k < npl; k++)
                if (pls[k].caller_server == caller && pls[k].callee_tier == rq[i].tier) {
                    delta[root[i]] += (double)lk.pool_wait_ns[i] * (pls[k].ratio[p] - 1) +
                                      pls[k].add[p];
                    break;
                }
        }
    }
    {
        double *f = malloc(nfront * sizeof *f), sum = 0;
        if (!f) {
            rc = TB_E_NOMEM;
            goto out;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (rq[i].tier != front)
                continue;
            double v = (double)(rq[i].departure_ns - rq[i].arrival_ns) + delta[i];
            f[k++] = v > 0 ? v : 0;
            sum += f[k - 1];
        }
        qsort(f, nfront, sizeof *f, tb_cmp_double);
        r->forecast.rt_mean_ns = sum / (double)nfront;
        r->forecast.rt_p50_ns = tb_quantile(f, nfront, 0.50);
        r->forecast.rt_p95_ns = tb_quantile(f, nfront, 0.95);
        r->forecast.rt_p99_ns = tb_quantile(f, nfront, 0.99);
        free(f);
    }
    r->forecast.throughput = r->baseline.throughput;
    {
        double users_total = 0;
        for (size_t p = 0; p < nper; p++)
            if (nf_p[p])
                users_total += (double)nf_p[p] / (double)PERIOD_NS *
                               (sum_rt_p[p] / (double)nf_p[p] + r->think_ns);
        r->users = users_total / (double)nper;
    }
    /* The forecast throughput: the baseline's, scaled by the model's ratio
     * of throughputs per period (closed); the same (open). */
    if (r->closed) {
        double b = 0, f = 0;
        for (size_t p = 0; p < nper; p++) {
            b += xb[p];
            f += xn[p];
        }
        r->forecast.throughput = b > 0 ? r->baseline.throughput * f / b : r->baseline.throughput;
    }
out:
    if (sts)
        for (size_t k = 0; k < nst; k++) {
            free(sts[k].own);
            free(sts[k].cnt);
            free(sts[k].ratio);
        }
    if (pls)
        for (size_t k = 0; k < npl; k++) {
            free(pls[k].wait);
            free(pls[k].calls);
            free(pls[k].ratio);
            free(pls[k].add);
        }
    free(sts);
    free(pls);
    free(period);
    free(rt);
    free(delta);
    free(nf_p);
    free(sum_rt_p);
    free(xb);
    free(xn);
    tb_linked_free(&L);
    return rc;
}

