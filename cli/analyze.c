/* SPDX-License-Identifier: MIT */
/* analyze.c — the analysis pipeline over stored requests: loads a tier's
 * requests, computes its windows, and hands them to report, export and web. */
#include "analyze.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this many windows a run is almost certainly a mistake (a 1 ms window
 * over a day of traffic); refuse it rather than exhaust memory. */
#define MAX_WINDOWS (UINT64_C(50) * 1000 * 1000)

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Exact per-window load, completions and response times of the requests of
 * one server (or all, server == 0) over [w0, w0 + n·width). Each request adds
 * its overlap with its first and last window directly and full windows in
 * between through a difference array, so the cost is O(requests + windows);
 * busy time is summed in integer nanoseconds so the load is exact. */
static int compute_windows(const struct tb_request *rq, size_t nrq, uint32_t tier, uint32_t server,
                           int64_t w0, int64_t width, size_t n, struct tb_window **out)
{
    struct tb_window *w = calloc(n ? n : 1, sizeof *w);
    int64_t *busy = calloc(n ? n : 1, sizeof *busy);
    int64_t *diff = calloc(n + 1, sizeof *diff);
    double *rtsum = calloc(n ? n : 1, sizeof *rtsum);
    if (!w || !busy || !diff || !rtsum) {
        free(w);
        free(busy);
        free(diff);
        free(rtsum);
        return TB_E_NOMEM;
    }
    int64_t w1 = w0 + (int64_t)n * width;
    for (size_t k = 0; k < nrq; k++) {
        const struct tb_request *r = &rq[k];
        if (server && r->server != server)
            continue;
        if (r->departure_ns < r->arrival_ns)
            continue;
        int64_t a = TB_MAX(r->arrival_ns, w0), d = TB_MIN(r->departure_ns, w1);
        if (d > a) {
            size_t i = (size_t)((a - w0) / width), j = (size_t)((d - w0) / width);
            if (i == j) {
                busy[i] += d - a;
            } else {
                busy[i] += w0 + (int64_t)(i + 1) * width - a;
                if (j < n)
                    busy[j] += d - (w0 + (int64_t)j * width);
                diff[i + 1] += 1;
                diff[j] -= 1;
            }
        }
        if (r->departure_ns >= w0 && r->departure_ns < w1 && !(r->flags & TB_REQ_NORESP)) {
            size_t c = (size_t)((r->departure_ns - w0) / width);
            w[c].completions++;
            w[c].work_units += 1.0;
            rtsum[c] += (double)(r->departure_ns - r->arrival_ns);
        }
    }
    int64_t full = 0;
    for (size_t i = 0; i < n; i++) {
        full += diff[i];
        w[i].start_ns = w0 + (int64_t)i * width;
        w[i].width_ns = width;
        w[i].tier = tier;
        w[i].server = server;
        w[i].load = (double)(busy[i] + full * width) / (double)width;
        double secs = (double)width / 1e9;
        w[i].throughput = w[i].completions / secs;
        w[i].norm_throughput = w[i].work_units / secs;
        w[i].rt_mean_ns = w[i].completions ? rtsum[i] / w[i].completions : 0;
    }
    free(busy);
    free(diff);
    free(rtsum);
    *out = w;
    return 0;
}

int tb_analyze_tier(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                    const struct tb_analyze_opts *o, struct tb_analysis_result *res, char *errbuf,
                    size_t errlen)
{
    memset(res, 0, sizeof *res);
    const struct tb_tier_info *ti = tb_catalog_tier_get(cat, tier);
    if (!ti) {
        snprintf(errbuf, errlen, "unknown tier id %u", tier);
        return TB_E_NOTFOUND;
    }
    if (o->width_ns <= 0) {
        snprintf(errbuf, errlen, "window width must be positive");
        return TB_E_INVAL;
    }
    struct tb_request *rq = NULL;
    size_t nrq = 0;
    int rc = tb_store_requests(st, tier, o->from_ns, o->to_ns, &rq, &nrq);
    if (rc) {
        snprintf(errbuf, errlen, "reading the requests of tier '%s': %s", ti->name,
                 tb_strerror(rc));
        return rc;
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    uint64_t count = 0;
    for (size_t i = 0; i < nrq; i++) {
        if (o->server && rq[i].server != o->server)
            continue;
        lo = TB_MIN(lo, rq[i].arrival_ns);
        hi = TB_MAX(hi, rq[i].departure_ns);
        count++;
    }
    if (o->from_ns != INT64_MIN)
        lo = o->from_ns;
    if (o->to_ns != INT64_MAX)
        hi = o->to_ns;
    size_t n = 0;
    int64_t w0 = 0;
    if (count && hi > lo) {
        w0 = floor_div(lo, o->width_ns) * o->width_ns;
        int64_t w1 = (floor_div(hi - 1, o->width_ns) + 1) * o->width_ns;
        uint64_t nw = (uint64_t)((w1 - w0) / o->width_ns);
        if (nw > MAX_WINDOWS) {
            snprintf(errbuf, errlen,
                     "%llu windows of %lld ns: too many; use a longer --window or a shorter "
                     "--from/--to range",
                     (unsigned long long)nw, (long long)o->width_ns);
            free(rq);
            return TB_E_FULL;
        }
        n = (size_t)nw;
    }
    rc = compute_windows(rq, nrq, tier, o->server, w0, o->width_ns, n, &res->win);
    free(rq);
    if (rc) {
        snprintf(errbuf, errlen, "computing windows: %s", tb_strerror(rc));
        return rc;
    }
    res->nwin = n;
    res->a.tier = tier;
    res->a.server = o->server;
    res->a.width_ns = o->width_ns;
    res->a.from_ns = w0;
    res->a.to_ns = w0 + (int64_t)n * o->width_ns;
    res->a.requests = count;
    res->a.n_star = NAN;
    res->a.n_star_fit = NAN;
    res->a.tp_max = NAN;
    res->a.slope = NAN;
    res->a.episodes_per_min = 0;
    return 0;
}

void tb_analysis_result_free(struct tb_analysis_result *res)
{
    free(res->win);
    free(res->ep);
    free(res->svc);
    memset(res, 0, sizeof *res);
}
