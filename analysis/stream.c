/* SPDX-License-Identifier: MIT */
/* stream.c — the streaming analysis of a live capture (stream.h): a ring of
 * recent requests, per-tier window closing, periodic re-estimates of service
 * times and N*, and episodes by correlate's streaming rule. */
#include "stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "util.h"

#define RING_SPAN_NS (120 * TB_NS_PER_SEC) /* requests kept for windows and service times */
#define RING_CAP ((size_t)1 << 19)         /* ...and at most this many (~48 MB) */
#define GRACE_MIN_NS TB_NS_PER_SEC
#define MAX_CLOSE_WINDOWS 200000 /* one tick never closes more (clock jumps) */
#define MIN_REQ_FOR_SVC 50       /* fewer requests give no service-time estimate */
#define MIN_WIN_FOR_NSTAR 20     /* fewer closed windows give no N* */

/* Streaming state of one tier. */
struct tier {
    bool used;
    int64_t next_start;       /* start of the next window to close; INT64_MIN before traffic */
    struct tb_units *units;   /* work units from the last service-time estimate */
    int64_t work_unit_ns;
    bool calls;               /* its machines called other tiers at the last re-estimate */
    double waits_slope;       /* ...and the slope hint of N* then (tb_analysis_waits_slope) */
    struct tb_window *recent; /* closed tier windows for N*, oldest first */
    size_t nrecent, caprecent;
    struct tb_stretch *lives; /* the recent requests' lives by arrival concurrency (N*'s
                               * stretch rule); NULL before the first estimate */
    bool have_rule;
    struct tb_episode_track track; /* the rule in force and the episode in progress */
    uint64_t episodes;
};

struct tb_stream {
    const struct tb_catalog *cat;
    struct tb_stream_opts o;
    struct tb_stream_sink sink;
    int64_t started_ns, last_est_ns; /* capture clock; INT64_MIN before the first tick */
    /* Recent requests of every tier, in completion order. */
    struct tb_request *ring;
    size_t rhead, rn;
    struct tier *t; /* indexed by tier id */
    size_t nt;
};

static int64_t floor_to(int64_t t, int64_t w)
{
    int64_t s;
    return tb_win_floor(t, w, &s) == 0 ? s : t;
}

static const struct tb_request *ring_at(const struct tb_stream *s, size_t i)
{
    return &s->ring[(s->rhead + i) % RING_CAP];
}

static struct tier *tier_state(struct tb_stream *s, uint32_t tier)
{
    if (tier >= s->nt) {
        size_t old = s->nt;
        if (tb_grow_zero(&s->t, &s->nt, (size_t)tier + 1, sizeof *s->t))
            return NULL;
        for (size_t i = old; i < s->nt; i++)
            s->t[i].next_start = INT64_MIN;
    }
    s->t[tier].used = true;
    return &s->t[tier];
}

int tb_stream_new(struct tb_stream **out, const struct tb_catalog *cat,
                  const struct tb_stream_opts *o, const struct tb_stream_sink *sink)
{
    if (!out || !cat || (o && o->width_ns < 0))
        return TB_E_INVAL;
    struct tb_stream *s = calloc(1, sizeof *s);
    if (!s)
        return TB_E_NOMEM;
    s->ring = malloc(RING_CAP * sizeof *s->ring);
    if (!s->ring) {
        free(s);
        return TB_E_NOMEM;
    }
    s->cat = cat;
    if (o)
        s->o = *o;
    if (sink)
        s->sink = *sink;
    if (s->o.width_ns <= 0)
        s->o.width_ns = TB_WINDOW_DEFAULT_NS;
    if (s->o.grace_ns <= 0)
        s->o.grace_ns = TB_MAX(GRACE_MIN_NS, 2 * s->o.width_ns);
    if (s->o.reestimate_ns <= 0)
        s->o.reestimate_ns = 10 * TB_NS_PER_SEC;
    if (s->o.history_ns <= 0)
        s->o.history_ns = 300 * TB_NS_PER_SEC;
    s->started_ns = s->last_est_ns = INT64_MIN;
    *out = s;
    return 0;
}

void tb_stream_free(struct tb_stream *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nt; i++) {
        if (s->t[i].units)
            tb_units_free(s->t[i].units);
        free(s->t[i].recent);
        free(s->t[i].lives);
    }
    free(s->t);
    free(s->ring);
    free(s);
}

int tb_stream_request(struct tb_stream *s, const struct tb_request *r)
{
    struct tier *t = tier_state(s, r->tier);
    if (!t)
        return TB_E_NOMEM;
    if (t->next_start == INT64_MIN)
        t->next_start = floor_to(r->arrival_ns, s->o.width_ns);
    if (s->rn == RING_CAP) {
        s->rhead = (s->rhead + 1) % RING_CAP;
        s->rn--;
    }
    s->ring[(s->rhead + s->rn) % RING_CAP] = *r;
    s->rn++;
    return 0;
}

uint64_t tb_stream_episodes(const struct tb_stream *s, uint32_t tier)
{
    return tier < s->nt ? s->t[tier].episodes : 0;
}

/* ---- windows ------------------------------------------------------------------ */

static void remember_window(struct tier *t, const struct tb_window *w, int64_t span)
{
    /* Drop what fell out of the N* span, then append. */
    size_t drop = 0;
    while (drop < t->nrecent && t->recent[drop].start_ns < w->start_ns - span)
        drop++;
    if (drop) {
        memmove(t->recent, t->recent + drop, (t->nrecent - drop) * sizeof *t->recent);
        t->nrecent -= drop;
    }
    if (tb_grow(&t->recent, &t->caprecent, t->nrecent + 1, sizeof *t->recent))
        return; /* N* then rests on fewer windows; nothing else depends on it */
    t->recent[t->nrecent++] = *w;
}

static uint32_t *tier_servers(const struct tb_stream *s, uint32_t tier, size_t *n)
{
    uint32_t ns = tb_catalog_server_count(s->cat);
    uint32_t *sv = malloc((ns ? ns : 1) * sizeof *sv);
    *n = 0;
    if (!sv)
        return NULL;
    for (uint32_t i = 1; i <= ns; i++) {
        const struct tb_server_info *si = tb_catalog_server_get(s->cat, i);
        if (si && si->tier == tier)
            sv[(*n)++] = i;
    }
    return sv;
}

/* One closed window of the tier as a whole: congestion and episodes by the
 * rule in force (none before the first re-estimate). */
static void tier_window(struct tb_stream *s, uint32_t tier, struct tier *t,
                        const struct tb_window *w)
{
    struct tb_episode closed, cur;
    unsigned r = t->have_rule ? tb_episode_track_push(&t->track, w, &closed) : 0;
    remember_window(t, w, s->o.history_ns);
    if (s->sink.window)
        s->sink.window(s->sink.ud, tier, w, (r & TB_TRACK_CONGESTED) != 0);
    if (r & TB_TRACK_CLOSED) {
        t->episodes++;
        if (s->sink.episode)
            s->sink.episode(s->sink.ud, tier, &closed, false);
    }
    if ((r & TB_TRACK_OPENED) && s->sink.episode && tb_episode_track_current(&t->track, &cur))
        s->sink.episode(s->sink.ud, tier, &cur, true);
}

/* The calls in flight of the windows being closed (tb_window.calls_busy, for
 * the freeze rule), from the recent requests the tier's machines sent, as
 * the offline analysis does. Best effort: without memory the windows keep 0
 * (a caller waiting on a paused callee may then look stalled itself). */
static void fill_calls(struct tb_stream *s, uint32_t tier, const struct tier *t,
                       const uint32_t *sv, size_t nsv, struct tb_window *win, size_t per_row,
                       int64_t until)
{
    if (!t->calls || !per_row)
        return;
    struct tb_svc_host *hosts = NULL;
    size_t nhosts = 0, n = 0;
    if (tb_analysis_svc_hosts(s->cat, tier, &hosts, &nhosts))
        return;
    int64_t from = win[0].start_ns;
    for (int pass = 0; pass < 2; pass++) {
        struct tb_request *down = NULL;
        if (pass) {
            if (!n || !(down = malloc(n * sizeof *down)))
                break;
            n = 0;
        }
        for (size_t i = 0; i < s->rn; i++) {
            const struct tb_request *r = ring_at(s, i);
            if (r->tier == tier || r->departure_ns < from || r->arrival_ns >= until ||
                !tb_analysis_called_from(r, hosts, nhosts))
                continue;
            if (pass)
                down[n] = *r;
            n++;
        }
        if (pass) {
            tb_analysis_fill_calls(s->cat, down, n, sv, nsv, win, per_row);
            free(down);
        }
    }
    free(hosts);
}

/* Closes the tier's windows that ended before `until`. */
static void close_windows(struct tb_stream *s, uint32_t tier, struct tier *t, int64_t until)
{
    int64_t width = s->o.width_ns;
    if (t->next_start == INT64_MIN || until <= t->next_start)
        return;
    if ((until - t->next_start) / width > MAX_CLOSE_WINDOWS)
        t->next_start = until - MAX_CLOSE_WINDOWS * width;
    size_t nsv;
    uint32_t *sv = tier_servers(s, tier, &nsv);
    struct tb_winacc *acc = NULL;
    struct tb_window *win = NULL;
    size_t nwin = 0;
    if (!sv || tb_winacc_new(&acc, tier, width, t->next_start, until, sv, nsv) < 0)
        goto out;
    for (size_t i = 0; i < s->rn; i++) {
        const struct tb_request *r = ring_at(s, i);
        if (r->tier != tier || r->departure_ns < t->next_start || r->arrival_ns >= until)
            continue;
        double u = t->units ? tb_units_get(t->units, r->class_id, r->arrival_ns) : 1.0;
        tb_winacc_add(acc, r, u);
    }
    if (tb_winacc_finish(acc, &win, &nwin) < 0)
        goto out;
    fill_calls(s, tier, t, sv, nsv, win, tb_winacc_nwindows(acc), until);
    if (s->sink.windows && nwin)
        s->sink.windows(s->sink.ud, win, nwin);
    /* Row 0 — the tier as a whole — drives congestion and the episodes. */
    size_t per_row = tb_winacc_nwindows(acc);
    for (size_t i = 0; i < per_row && i < nwin; i++)
        tier_window(s, tier, t, &win[i]);
    t->next_start = until;
out:
    free(win);
    if (acc)
        tb_winacc_free(acc);
    free(sv);
}

/* ---- re-estimates --------------------------------------------------------------- */

/* New work units: the recent windows, closed in the old units, are brought
 * to the new ones, so that the rule estimated from them (its slope, plateau
 * and units per completion) is in the units of the windows it will judge.
 * Without this a re-estimate that changed the unit 2.6-fold left the rule's
 * slope 2.6 times the new windows' throughput, and healthy windows passed
 * for stalls (e2e_live_veth). The factor is the ratio of the mean units per
 * completion of the ring's requests of the tier, new units over old, over
 * the recent windows' span. */
static void rescale_recent(struct tb_stream *s, uint32_t tier, struct tier *t,
                           const struct tb_units *nu)
{
    if (!t->nrecent)
        return;
    int64_t from = t->recent[0].start_ns;
    double un = 0, uo = 0;
    for (size_t i = 0; i < s->rn; i++) {
        const struct tb_request *r = ring_at(s, i);
        if (r->tier != tier || r->departure_ns < from)
            continue;
        un += tb_units_get(nu, r->class_id, r->arrival_ns);
        uo += t->units ? tb_units_get(t->units, r->class_id, r->arrival_ns) : 1.0;
    }
    if (!(un > 0) || !(uo > 0))
        return;
    double f = un / uo;
    for (size_t i = 0; i < t->nrecent; i++) {
        t->recent[i].work_units *= f;
        t->recent[i].norm_throughput *= f;
    }
    /* And the episode in progress with the rule that judges it: the windows
     * closed after this re-estimate come in the new units. */
    if (t->have_rule)
        tb_episode_track_rescale(&t->track, f);
    /* Published, so that whoever rebuilds an episode open across this
     * re-estimate from the windows as they were streamed can convert it as
     * the tracker did (e2e_rule_agree). */
    if (s->sink.rescale)
        s->sink.rescale(s->sink.ud, tier,
                        &(struct tb_stream_rescale){.factor = f, .from_ns = t->next_start});
}

static int cmp_arrival(const void *pa, const void *pb)
{
    const struct tb_request *a = pa, *b = pb;
    return (a->arrival_ns > b->arrival_ns) - (a->arrival_ns < b->arrival_ns);
}

/* The lives by arrival concurrency of the tier's recent requests (rq, in
 * completion order, reordered here), as the offline analysis counts them:
 * the knee test of reestimate_rule applies the same stretch rule. On a
 * failure the previous profile stays. */
static void recent_lives(struct tier *t, struct tb_request *rq, size_t n)
{
    struct tb_stretchacc *acc = NULL;
    qsort(rq, n, sizeof *rq, cmp_arrival);
    int rc = tb_stretchacc_new(&acc);
    for (size_t i = 0; i < n && !rc; i++)
        rc = tb_stretchacc_add(acc, &rq[i]);
    if (!rc && !t->lives && !(t->lives = malloc(sizeof *t->lives)))
        rc = TB_E_NOMEM;
    if (!rc)
        tb_stretchacc_total(acc, t->lives);
    tb_stretchacc_free(acc);
}

/* Service times (hence work units) from the recent requests. */
static void reestimate_units(struct tb_stream *s, uint32_t tier, struct tier *t)
{
    /* The tier's own recent requests, and the calls its machines made to
     * other tiers meanwhile: subtracted from the callers' times as the
     * offline analysis does. */
    struct tb_svc_host *hosts = NULL;
    size_t nhosts = 0, n = 0, ndown = 0;
    if (tb_analysis_svc_hosts(s->cat, tier, &hosts, &nhosts))
        nhosts = 0;
    for (size_t i = 0; i < s->rn; i++) {
        const struct tb_request *r = ring_at(s, i);
        if (r->tier == tier)
            n++;
        else if (tb_analysis_called_from(r, hosts, nhosts))
            ndown++;
    }
    t->calls = ndown > 0;
    struct tb_request *req = n >= MIN_REQ_FOR_SVC ? malloc((n + ndown) * sizeof *req) : NULL;
    if (req) {
        struct tb_request *down = req + n;
        size_t k = 0, kd = 0;
        for (size_t i = 0; i < s->rn; i++) {
            const struct tb_request *r = ring_at(s, i);
            if (r->tier == tier)
                req[k++] = *r;
            else if (tb_analysis_called_from(r, hosts, nhosts))
                down[kd++] = *r;
        }
        struct tb_svc_opts so;
        tb_svc_opts_default(&so);
        struct tb_class_service *svc = NULL;
        size_t nsvc = 0;
        int64_t wu = 0;
        struct tb_units *u = NULL;
        if (tb_service_estimate(req, n, down, ndown, hosts, nhosts, NULL, 0, &so, &svc, &nsvc,
                                &wu) == 0 &&
            tb_units_new(&u, svc, nsvc, 1.0) == 0) {
            rescale_recent(s, tier, t, u);
            if (t->units)
                tb_units_free(t->units);
            t->units = u;
            t->work_unit_ns = wu;
            double call_ns = 0;
            for (size_t i = 0; i < ndown; i++)
                call_ns += tb_analysis_call_life(&down[i]);
            t->waits_slope = tb_analysis_waits_slope(svc, nsvc, wu, call_ns, n);
        }
        free(svc);
        recent_lives(t, req, n);
        free(req);
    }
    free(hosts);
}

/* N* and the congestion rule from the recent windows. */
static void reestimate_rule(struct tb_stream *s, uint32_t tier, struct tier *t)
{
    if (t->nrecent < MIN_WIN_FOR_NSTAR)
        return;
    struct tb_analysis a;
    struct tb_episode *ep = NULL;
    size_t nep = 0;
    struct tb_nstar_opts no;
    tb_nstar_opts_default(&no);
    no.stretch = t->lives;
    no.waits_downstream = t->calls;
    if (t->calls)
        no.slope_hint = t->waits_slope;
    if (tb_correlate_analyze(t->recent, t->nrecent, t->work_unit_ns, &no, &a, &ep, &nep) == 0) {
        struct tb_congestion rule;
        tb_congestion_from_analysis(&rule, &a, t->recent, t->nrecent);
        if (t->have_rule) {
            tb_episode_track_rule(&t->track, &rule);
        } else {
            tb_episode_track_init(&t->track, &rule);
            t->have_rule = true;
        }
        if (s->sink.analysis)
            s->sink.analysis(s->sink.ud, tier, &a, &rule);
    }
    free(ep);
}

static void drop_old_requests(struct tb_stream *s, int64_t clock_ns)
{
    while (s->rn && s->ring[s->rhead].departure_ns < clock_ns - RING_SPAN_NS) {
        s->rhead = (s->rhead + 1) % RING_CAP;
        s->rn--;
    }
}

void tb_stream_tick(struct tb_stream *s, int64_t clock_ns)
{
    if (s->started_ns == INT64_MIN)
        s->started_ns = s->last_est_ns = clock_ns;
    /* Early estimates rest on a few seconds of traffic: re-estimate every
     * half of the time streamed so far (1 s, 2 s, 4 s, ...) up to every
     * reestimate_ns. */
    int64_t every = TB_MIN(s->o.reestimate_ns,
                           TB_MAX(TB_NS_PER_SEC, (clock_ns - s->started_ns) / 2));
    bool due = clock_ns - s->last_est_ns >= every;
    int64_t until = floor_to(clock_ns - s->o.grace_ns, s->o.width_ns);
    for (size_t tier = 1; tier < s->nt; tier++) {
        struct tier *t = &s->t[tier];
        if (!t->used)
            continue;
        if (due || !t->units) {
            reestimate_units(s, (uint32_t)tier, t);
            reestimate_rule(s, (uint32_t)tier, t);
        }
        close_windows(s, (uint32_t)tier, t, until);
    }
    if (due)
        s->last_est_ns = clock_ns;
    drop_old_requests(s, clock_ns);
}
