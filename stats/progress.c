/* SPDX-License-Identifier: MIT */
/* progress.c — the calls made by a server's requests in flight, against how
 * many are in flight (stats.h tb_call_progress; docs/diagnose.md "threads").
 *
 * Why: a server that calls downstream and saturates either shares its CPUs
 * among every request it holds (processor sharing) or runs only K of them on
 * K threads while the rest wait unstarted. Arrival order does not tell them
 * apart when demands are equal (both keep it), and neither do the response
 * times (both grow by one spacing of departures per request ahead). What
 * differs is whether a queued request has begun: under processor sharing
 * each one makes its first call a stretched first piece after it arrives,
 * and at any moment the requests in flight are spread over their work, so
 * the calls they have made grow with their number; under a thread cap only
 * the K started requests have made calls, however long the queue behind
 * them. Which request made which call is not on the wire (the linker
 * assumes processor sharing and gives queued requests calls), so the count
 * is an aggregate: calls issued from the server's host, less the mean calls
 * per request at each departure, reset to 0 whenever the server is empty
 * (so a mix of classes making different numbers of calls drifts only within
 * one busy period). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_pev(const void *a, const void *b)
{
    const struct tb_prog_ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (int)x->kind - (int)y->kind;
}

/* Adds [t0, t1) with n in flight and `made` requests' worth of calls made
 * to the windows it covers, by their mark. */
static void add_span(struct tb_progress *o, const uint8_t *mark, int64_t from_ns, int64_t width_ns,
                     size_t nwin, int64_t t0, int64_t t1, double n, double made)
{
    if (t1 <= from_ns || t0 >= t1)
        return;
    if (t0 < from_ns)
        t0 = from_ns;
    for (size_t k = (size_t)((t0 - from_ns) / width_ns); k < nwin && t0 < t1; k++) {
        int64_t end = from_ns + (int64_t)(k + 1) * width_ns;
        int64_t e = t1 < end ? t1 : end;
        double dt = (double)(e - t0) / 1e9;
        if (mark[k] == 2) {
            o->busy_n += n * dt;
            o->busy_made += made * dt;
        } else if (mark[k] == 1) {
            o->calm_n += n * dt;
            o->calm_made += made * dt;
        }
        t0 = e;
    }
}

int tb_call_progress(struct tb_prog_ev *ev, size_t n, const uint8_t *mark, int64_t from_ns,
                     int64_t width_ns, size_t nwin, double min_req_s, struct tb_progress *out)
{
    *out = (struct tb_progress){.ratio = NAN, .calls_per_request = NAN};
    if (width_ns <= 0)
        return TB_E_INVAL;
    size_t calls = 0, deps = 0;
    for (size_t i = 0; i < n; i++) {
        calls += ev[i].kind == TB_PROG_CALL;
        deps += ev[i].kind == TB_PROG_DEPARTURE;
    }
    if (!calls || !deps)
        return 0;
    double q = (double)calls / (double)deps;
    out->calls_per_request = q;
    qsort(ev, n, sizeof *ev, cmp_pev);
    long inflight = 0;
    double made = 0; /* calls made by the requests in flight */
    for (size_t i = 0; i < n; i++) {
        if (i && inflight > 0)
            add_span(out, mark, from_ns, width_ns, nwin, ev[i - 1].t, ev[i].t, (double)inflight,
                     made / q);
        switch (ev[i].kind) {
        case TB_PROG_ARRIVAL:
            inflight++;
            break;
        case TB_PROG_CALL:
            /* A call while nothing is in flight is another process's. */
            if (inflight > 0)
                made += 1;
            break;
        default:
            if (inflight > 0 && --inflight > 0)
                made -= q;
            else
                made = 0;
            break;
        }
    }
    if (out->busy_n >= min_req_s && out->calm_n >= min_req_s && out->calm_made > 0)
        out->ratio = (out->busy_made / out->busy_n) / (out->calm_made / out->calm_n);
    return 0;
}
