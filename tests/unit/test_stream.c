/* SPDX-License-Identifier: MIT */
/* test_stream.c — the streaming analysis of a live capture (analysis/stream.c)
 * fed a simulated single-core server: 10 ms requests served one at a time,
 * quiet stretches and overload bursts, and one 400 ms pause. Requests go in
 * completion order with a tick per simulated second, as a live capture does.
 * Checked against oracles written here: every closed window's load and
 * completions equal the exact ones computed from the requests; every
 * window's congested flag is load >= the threshold of the analysis in force
 * when it closed; the episodes handed out are the maximal runs of those
 * congested windows, opened and closed in order, with their peak and mean;
 * and the pause is one freeze episode while bursts are saturated ones.
 * Then a capture stall (a clock jump) with a re-estimate that makes the work
 * unit ten times smaller while an episode is open: no window skipped, no
 * freeze where nothing froze; and the factor published for each change of
 * unit (the rescale sink) is the one applied: the windows handed out,
 * converted by it, give each rule's units per completion, and every closed
 * episode's throughput (those open across the 10-fold change included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "catalog.h"
#include "stream.h"

#define MS TB_NS_PER_MS
#define SEC TB_NS_PER_SEC
#define T0 (INT64_C(1700000000) * SEC)
#define W (50 * MS)
#define SVC (10 * MS)
#define DURATION (60 * SEC)
#define PAUSE_AT (T0 + 41 * SEC + 20 * MS)
#define PAUSE (400 * MS)
#define MAXREQ 20000
#define MAXWIN 2000

static uint64_t rs = 88172645463325252u;
static double unif(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}

/* What the sink saw. */
struct seen {
    struct tb_window win[MAXWIN];
    bool cong[MAXWIN];
    double thr_at[MAXWIN]; /* threshold in force when the window closed */
    size_t nwin;
    double thr;            /* of the last analysis event; NAN before */
    size_t nanalysis;
    struct tb_episode closed[MAXWIN];
    size_t nclosed;
    int64_t opened[MAXWIN];
    size_t nopened;
    size_t rows;           /* windows handed to the store callback */
    uint32_t tier;
};

static void on_windows(void *ud, const struct tb_window *w, size_t n)
{
    struct seen *s = ud;
    s->rows += n;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(w[i].width_ns, W);
}

static void on_window(void *ud, uint32_t tier, const struct tb_window *w, bool congested)
{
    struct seen *s = ud;
    assert_int_equal(tier, s->tier);
    assert_int_equal(w->server, 0);
    assert_true(s->nwin < MAXWIN);
    s->win[s->nwin] = *w;
    s->cong[s->nwin] = congested;
    s->thr_at[s->nwin] = s->thr;
    s->nwin++;
}

static void on_episode(void *ud, uint32_t tier, const struct tb_episode *ep, bool ongoing)
{
    struct seen *s = ud;
    assert_int_equal(tier, s->tier);
    if (ongoing) {
        s->opened[s->nopened++] = ep->start_ns;
    } else {
        s->closed[s->nclosed++] = *ep;
    }
}

static void on_analysis(void *ud, uint32_t tier, const struct tb_analysis *a,
                        const struct tb_congestion *rule)
{
    struct seen *s = ud;
    assert_int_equal(tier, s->tier);
    assert_int_equal(a->width_ns, W);
    s->thr = rule->threshold;
    s->nanalysis++;
}

/* One server, FIFO, one request in service at a time: a 10 ms demand each;
 * arrivals at 30/s, with a 150/s burst of 0.5 s every 4 s; nothing departs
 * during the pause (the requests in service and queued wait it out). */
static size_t simulate(struct tb_request *rq, uint32_t tier, uint32_t server, uint32_t cls)
{
    size_t n = 0;
    int64_t t = T0, free_at = T0;
    while (t < T0 + DURATION && n < MAXREQ) {
        int64_t off = (t - T0) % (4 * SEC);
        double rate = off < 500 * MS ? 150 : 30;
        t += (int64_t)(-log(unif()) / rate * 1e9);
        struct tb_request *r = &rq[n++];
        memset(r, 0, sizeof *r);
        int64_t start = t > free_at ? t : free_at;
        if (start < PAUSE_AT + PAUSE && start + SVC > PAUSE_AT)
            start = PAUSE_AT + PAUSE; /* stopped the world */
        r->arrival_ns = t;
        r->departure_ns = start + SVC;
        free_at = r->departure_ns;
        r->tier = tier;
        r->server = server;
        r->class_id = cls;
        r->conn = 1;
        r->status = 200;
        assert_int_equal(tb_addr_parse("10.0.0.9:40000", &r->client), 0);
    }
    return n;
}

static int by_departure(const void *pa, const void *pb)
{
    const struct tb_request *a = pa, *b = pb;
    return (a->departure_ns > b->departure_ns) - (a->departure_ns < b->departure_ns);
}

/* The simulated server's catalog: one tier, its one server, its classes. */
struct fixture {
    struct tb_catalog *cat;
    uint32_t tier, server, cls[2];
};

static void one_server(struct fixture *f, const char *tier, const char *proto, const char *addr,
                       const char *const *classes, size_t ncls)
{
    struct tb_addr a;
    assert_true(ncls <= 2);
    assert_int_equal(tb_catalog_new(&f->cat), 0);
    assert_int_equal(tb_catalog_tier(f->cat, tier, proto, &f->tier), 0);
    assert_int_equal(tb_addr_parse(addr, &a), 0);
    assert_int_equal(tb_catalog_server(f->cat, f->tier, &a, &f->server), 0);
    for (size_t i = 0; i < ncls; i++)
        assert_int_equal(tb_catalog_class(f->cat, f->tier, classes[i], strlen(classes[i]),
                                          &f->cls[i]),
                         0);
}

/* Streams rq[0..n) as a live capture does: in completion order, a tick per
 * simulated second from T0 + 1 s up to `end`, each after the requests
 * completed by then. With stall_to > stall_from the capture stops after
 * stall_from: no tick until one at stall_to, the clock having jumped.
 * Returns the stream (the caller frees it). */
static struct tb_stream *drive(const struct fixture *f, const struct tb_stream_sink *sink,
                               struct tb_request *rq, size_t n, int64_t end, int64_t stall_from,
                               int64_t stall_to)
{
    qsort(rq, n, sizeof *rq, by_departure);
    const struct tb_stream_opts o = {.width_ns = W};
    struct tb_stream *st;
    assert_int_equal(tb_stream_new(&st, f->cat, &o, sink), 0);
    bool stalls = stall_to > stall_from;
    size_t k = 0;
    for (int64_t clock = T0 + SEC; clock <= end; clock += SEC) {
        if (stalls && clock > stall_from && clock < stall_to)
            continue; /* stopped: the next tick comes when it resumes */
        int64_t c = stalls && clock >= stall_to && clock - SEC < stall_to ? stall_to : clock;
        while (k < n && rq[k].departure_ns <= c)
            assert_int_equal(tb_stream_request(st, &rq[k++]), 0);
        tb_stream_tick(st, c);
    }
    assert_int_equal(k, n);
    return st;
}

static void test_stream_live(void **state)
{
    (void)state;
    struct fixture f;
    one_server(&f, "db", "mysql", "10.0.0.1:3306", (const char *const[]){"select ?"}, 1);
    uint32_t tier = f.tier;
    struct tb_request *rq = calloc(MAXREQ, sizeof *rq);
    struct seen *s = calloc(1, sizeof *s);
    assert_true(rq && s);
    size_t n = simulate(rq, tier, f.server, f.cls[0]);
    assert_true(n > 2000);
    s->tier = tier;
    s->thr = NAN;
    const struct tb_stream_sink sink = {
        .ud = s,
        .windows = on_windows,
        .window = on_window,
        .episode = on_episode,
        .analysis = on_analysis,
    };
    struct tb_stream *st = drive(&f, &sink, rq, n, T0 + DURATION + 5 * SEC, 0, 0);

    /* Windows: consecutive from the first arrival's, exact loads. */
    assert_true(s->nwin > 1000);
    assert_int_equal(s->rows, 2 * s->nwin); /* the tier, then its one server */
    for (size_t i = 0; i < s->nwin; i++) {
        const struct tb_window *w = &s->win[i];
        assert_int_equal(w->start_ns, T0 + (int64_t)i * W);
        double busy = 0;
        uint32_t done = 0;
        for (size_t j = 0; j < n; j++) {
            int64_t lo = rq[j].arrival_ns > w->start_ns ? rq[j].arrival_ns : w->start_ns;
            int64_t hi = rq[j].departure_ns < w->start_ns + W ? rq[j].departure_ns
                                                              : w->start_ns + W;
            if (hi > lo)
                busy += (double)(hi - lo);
            done += rq[j].departure_ns >= w->start_ns && rq[j].departure_ns < w->start_ns + W;
        }
        if (fabs(w->load - busy / (double)W) > 1e-9)
            fail_msg("window %zu: load %.12f, expected %.12f", i, w->load, busy / (double)W);
        assert_int_equal(w->completions, done);
        /* Congested by the threshold in force when it closed. */
        bool want = isfinite(s->thr_at[i]) && w->load >= s->thr_at[i];
        if (s->cong[i] != want)
            fail_msg("window %zu: load %.3f threshold %.3f congested %d", i, w->load,
                     s->thr_at[i], s->cong[i]);
    }
    /* A few re-estimates, each with a threshold near the one core. */
    assert_true(s->nanalysis >= 5);
    assert_true(s->thr > 0.5 && s->thr < 2.0);

    /* Episodes: the maximal runs of congested windows, in order; the last run
     * may still be open when the stream stops. */
    size_t ne = 0, freeze = 0, sat = 0;
    for (size_t i = 0; i < s->nwin; i++) {
        if (!s->cong[i] || (i > 0 && s->cong[i - 1]))
            continue;
        size_t j = i;
        while (j + 1 < s->nwin && s->cong[j + 1])
            j++;
        assert_true(ne < s->nopened);
        assert_int_equal(s->opened[ne], s->win[i].start_ns);
        if (j + 1 == s->nwin)
            break; /* still open */
        assert_true(ne < s->nclosed);
        const struct tb_episode *e = &s->closed[ne];
        double peak = 0, sum = 0;
        for (size_t m = i; m <= j; m++) {
            peak = fmax(peak, s->win[m].load);
            sum += s->win[m].load;
        }
        assert_int_equal(e->start_ns, s->win[i].start_ns);
        assert_int_equal(e->end_ns, s->win[j].start_ns + W);
        assert_true(peak == e->peak_load);
        assert_true(fabs(e->mean_load - sum / (double)(j - i + 1)) < 1e-9);
        bool in_pause = e->start_ns < PAUSE_AT + PAUSE && e->end_ns > PAUSE_AT;
        if (in_pause) {
            assert_int_equal(e->kind, TB_EP_FREEZE);
            freeze++;
        } else {
            sat += e->kind == TB_EP_SATURATED;
        }
        ne++;
    }
    assert_int_equal(ne, s->nclosed);
    assert_int_equal(freeze, 1);
    assert_true(sat >= 8); /* the bursts */
    assert_int_equal(tb_stream_episodes(st, tier), s->nclosed);
    tb_stream_free(st);
    tb_catalog_free(f.cat);
    free(rq);
    free(s);
}

/* ---- a stall, and a re-estimate that changes the work unit inside an episode -----
 * The same server without a pause, and two classes: A (10 ms) throughout, B
 * (4 ms) one request in 120 until UNIT_AT, one in two after. While B is
 * under 1% of the requests it cannot shape the work unit (tb_work_unit's
 * min share): about 10 ms, A 1 unit. Once it is common the unit is under
 * 1 ms: every window closed after that re-estimate is in units 10 times
 * smaller. Overload bursts (160/s for 0.8 s every 3 s) make saturated
 * episodes, and the capture stalls for 2.6 s at STALL_AT (no tick, then the
 * clock jumps, as after a stopped sensor), so that the re-estimate comes
 * with the tick that resumes, and with it the windows closed since, while
 * an episode is open. Nothing froze: no episode may be a freeze. Before
 * the episode tracker was rescaled with the windows, the old-unit windows of
 * such an episode were ten times too slow for the new rule's curve: a
 * freeze where nothing froze, as e2e_live_veth showed after its capture
 * stall (phases 2750 and 2900 ms here). Several burst phases, so that the
 * test does not rest on one coincidence. */
#define UNIT_AT (T0 + 60 * SEC)
#define STALL_AT (T0 + 65 * SEC)
#define STALL (2600 * MS)
#define DURATION2 (80 * SEC)
#define MAXAN 64

static size_t simulate_mix(struct tb_request *rq, int64_t phase, uint32_t tier, uint32_t server,
                           uint32_t ca, uint32_t cb)
{
    size_t n = 0;
    int64_t t = T0, free_at = T0;
    rs = 88172645463325252u; /* the same traffic for a phase, whatever ran before */
    while (t < T0 + DURATION2 && n < MAXREQ) {
        int64_t off = (t - T0 + phase) % (3 * SEC);
        double rate = off < 800 * MS ? 160 : 30;
        t += (int64_t)(-log(unif()) / rate * 1e9);
        struct tb_request *r = &rq[n++];
        memset(r, 0, sizeof *r);
        bool b = unif() < (t < UNIT_AT ? 1.0 / 120 : 0.5);
        int64_t start = t > free_at ? t : free_at;
        r->arrival_ns = t;
        r->departure_ns = start + (b ? 4 * MS : SVC);
        free_at = r->departure_ns;
        r->tier = tier;
        r->server = server;
        r->class_id = b ? cb : ca;
        r->conn = 1;
        r->status = 200;
        assert_int_equal(tb_addr_parse("10.0.0.9:40000", &r->client), 0);
    }
    return n;
}

struct seen_units {
    struct seen s;
    int64_t unit[MAXAN]; /* the work unit of each analysis, in order */
    bool open_at[MAXAN]; /* an episode was open when it came */
    size_t n;
    bool open;
    /* Each change of unit published (the rescale sink), with the number of
     * windows handed out before it. */
    double factor[MAXAN];
    size_t factor_nwin[MAXAN];
    size_t nfactor;
    double pending; /* the product of the factors since the last analysis; 0: none */
    /* The windows handed out, work units converted by every factor published
     * since: what the stream's recent windows must hold. */
    double units_now[MAXWIN];
};

static void on_rescale_u(void *ud, uint32_t tier, const struct tb_stream_rescale *r)
{
    struct seen_units *u = ud;
    assert_int_equal(tier, u->s.tier);
    assert_true(u->nfactor < MAXAN);
    assert_true(isfinite(r->factor) && r->factor > 0);
    /* The new units start with the next window to be handed out. */
    assert_int_equal(r->from_ns, T0 + (int64_t)u->s.nwin * W);
    u->factor[u->nfactor] = r->factor;
    u->factor_nwin[u->nfactor++] = u->s.nwin;
    for (size_t i = 0; i < u->s.nwin; i++)
        u->units_now[i] *= r->factor;
    u->pending = u->pending > 0 ? u->pending * r->factor : r->factor;
}

static void on_window_u(void *ud, uint32_t tier, const struct tb_window *w, bool congested)
{
    struct seen_units *u = ud;
    u->units_now[u->s.nwin] = w->work_units;
    on_window(&u->s, tier, w, congested);
}

static void on_episode_u(void *ud, uint32_t tier, const struct tb_episode *ep, bool ongoing)
{
    struct seen_units *u = ud;
    on_episode(&u->s, tier, ep, ongoing);
    u->open = ongoing;
}

static void on_analysis_u(void *ud, uint32_t tier, const struct tb_analysis *a,
                          const struct tb_congestion *rule)
{
    struct seen_units *u = ud;
    on_analysis(&u->s, tier, a, rule);
    assert_true(u->n < MAXAN);
    /* Every rule after the first comes right after its re-estimate's change
     * of unit; and the rule's units per completion are the mean of the
     * windows handed out, each converted by the factors published since it:
     * the factors are the ones applied to the windows the rule is made of
     * (all of them: 85 s of windows, under the 300 s history). */
    if (u->n) {
        assert_true(u->pending > 0);
        /* And near the ratio of the work units, old over new (the work unit
         * is 1 unit, but a class's units also move with its service-time
         * estimate: 9.4 for a unit 11.95 times smaller, 0.93 for 0.98). */
        double ratio = (double)u->unit[u->n - 1] / (double)a->work_unit_ns;
        if (!(u->pending > ratio * 0.75 && u->pending < ratio / 0.75))
            fail_msg("analysis %zu: factor %.4f, the work unit went from %lld to %lld ns", u->n,
                     u->pending, (long long)u->unit[u->n - 1], (long long)a->work_unit_ns);
    }
    u->pending = 0;
    double units = 0, comps = 0;
    for (size_t i = 0; i < u->s.nwin; i++) {
        units += u->units_now[i];
        comps += u->s.win[i].completions;
    }
    double want = comps > 0 && units > 0 ? units / comps : 1.0;
    if (fabs(rule->ubar - want) > 1e-12 * want)
        fail_msg("analysis %zu: units per completion %.17g, the windows handed out with the "
                 "published factors give %.17g", u->n, rule->ubar, want);
    u->unit[u->n] = a->work_unit_ns;
    u->open_at[u->n++] = u->open;
}

/* One phase; returns whether a re-estimate shrank the unit 5-fold or more
 * while an episode was open. */
static bool unit_change_phase(int64_t phase, struct tb_request *rq, struct seen_units *u)
{
    struct fixture f;
    one_server(&f, "app", "http", "10.0.0.1:8080", (const char *const[]){"GET /a", "GET /b"}, 2);
    size_t n = simulate_mix(rq, phase, f.tier, f.server, f.cls[0], f.cls[1]);
    assert_true(n > 4000);
    memset(u, 0, sizeof *u);
    u->s.tier = f.tier;
    u->s.thr = NAN;
    const struct tb_stream_sink sink = {
        .ud = u,
        .windows = on_windows,
        .window = on_window_u,
        .episode = on_episode_u,
        .analysis = on_analysis_u,
        .rescale = on_rescale_u,
    };
    struct tb_stream *st =
        drive(&f, &sink, rq, n, T0 + DURATION2 + 5 * SEC, STALL_AT, STALL_AT + STALL);

    /* The stall skipped no window and cut none short: consecutive windows,
     * their completions those of the requests. */
    assert_true(u->s.nwin > 1500);
    size_t j = 0;
    for (size_t i = 0; i < u->s.nwin; i++) {
        const struct tb_window *w = &u->s.win[i];
        assert_int_equal(w->start_ns, T0 + (int64_t)i * W);
        uint32_t done = 0;
        while (j < n && rq[j].departure_ns < w->start_ns + W)
            done += rq[j++].departure_ns >= w->start_ns;
        if (w->completions != done)
            fail_msg("phase %lld window %zu: %u completions, expected %u", (long long)phase, i,
                     w->completions, done);
    }
    /* Nothing froze. */
    for (size_t i = 0; i < u->s.nclosed; i++)
        if (u->s.closed[i].kind == TB_EP_FREEZE)
            fail_msg("phase %lld ms: a freeze episode %.3f s .. %.3f s where nothing froze "
                     "(mean load %.2f, throughput %.1f)",
                     (long long)(phase / MS), (double)(u->s.closed[i].start_ns - T0) / 1e9,
                     (double)(u->s.closed[i].end_ns - T0) / 1e9, u->s.closed[i].mean_load,
                     u->s.closed[i].throughput);
    assert_true(u->s.nclosed >= 20);
    /* Each closed episode's throughput rebuilt from its windows as they were
     * handed out: summed in order, the sum multiplied by each factor
     * published while the episode was open (after its first window, up to
     * the window that closed it), then averaged. Returns whether some
     * episode spanned a change of unit of 5-fold or more. */
    bool spanned = false;
    for (size_t e = 0, i = 0; e < u->s.nclosed; e++) {
        const struct tb_episode *ep = &u->s.closed[e];
        while (i < u->s.nwin && u->s.win[i].start_ns < ep->start_ns)
            i++;
        double sum = 0;
        size_t m = i, q = 0;
        while (q < u->nfactor && u->factor_nwin[q] <= i)
            q++;
        for (; m < u->s.nwin && u->s.win[m].start_ns < ep->end_ns; m++) {
            sum += u->s.win[m].norm_throughput;
            for (; q < u->nfactor && u->factor_nwin[q] == m + 1; q++) {
                sum *= u->factor[q];
                spanned |= u->factor[q] >= 5 || u->factor[q] <= 0.2;
            }
        }
        assert_true(m > i);
        double want = sum / (double)(m - i);
        if (fabs(ep->throughput - want) > 1e-9 * fmax(1.0, want))
            fail_msg("phase %lld ms: episode %.3f s .. %.3f s: throughput %.17g, its windows "
                     "with the published factors give %.17g", (long long)(phase / MS),
                     (double)(ep->start_ns - T0) / 1e9, (double)(ep->end_ns - T0) / 1e9,
                     ep->throughput, want);
    }
    /* The unit: about 10 ms at first, under 2 ms at the end. */
    assert_true(u->n >= 8);
    assert_true(u->unit[0] > 9 * MS && u->unit[0] < 11 * MS);
    assert_true(u->unit[u->n - 1] < 2 * MS);
    bool inside = false;
    for (size_t i = 1; i < u->n; i++)
        inside |= u->open_at[i] && u->unit[i] * 5 <= u->unit[i - 1];
    /* The change of unit an episode was open across was published. */
    if (inside)
        assert_true(spanned);
    tb_stream_free(st);
    tb_catalog_free(f.cat);
    return inside;
}

static void test_stream_unit_change(void **state)
{
    (void)state;
    struct tb_request *rq = calloc(MAXREQ, sizeof *rq);
    struct seen_units *u = calloc(1, sizeof *u);
    assert_true(rq && u);
    size_t inside = 0;
    for (int64_t phase = 2700 * MS; phase <= 2900 * MS; phase += 50 * MS)
        inside += unit_change_phase(phase, rq, u);
    /* The case is exercised: the unit changed inside an episode. */
    assert_true(inside >= 3);
    free(rq);
    free(u);
}

static void test_stream_args(void **state)
{
    (void)state;
    struct tb_stream *st;
    struct tb_catalog *cat;
    assert_int_equal(tb_catalog_new(&cat), 0);
    assert_int_equal(tb_stream_new(&st, NULL, NULL, NULL), TB_E_INVAL);
    const struct tb_stream_opts bad = {.width_ns = -1};
    assert_int_equal(tb_stream_new(&st, cat, &bad, NULL), TB_E_INVAL);
    /* No sink, no traffic: ticks do nothing. */
    assert_int_equal(tb_stream_new(&st, cat, NULL, NULL), 0);
    tb_stream_tick(st, T0);
    tb_stream_tick(st, T0 + 100 * SEC);
    assert_int_equal(tb_stream_episodes(st, 1), 0);
    tb_stream_free(st);
    tb_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_live),
        cmocka_unit_test(test_stream_unit_change),
        cmocka_unit_test(test_stream_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
