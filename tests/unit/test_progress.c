/* SPDX-License-Identifier: MIT */
/* test_progress.c — the two wire signals diagnose names a busy server's
 * cause with (stats.h): tb_call_progress (threads or CPU) on a server
 * simulated here step by step, once sharing its cores among every request it
 * holds (processor sharing) and once running only K of them on K threads
 * with the rest queued first come, first served, both with EQUAL demands (so
 * both keep arrival order and overtaking cannot tell them apart); and
 * tb_isolated_speed (speed or CPU) on requests served alone by a CPU of one
 * speed against one switching between two speeds; tb_isolated_logrank
 * against a long-way log-rank computed here, and on exponential demands
 * censored by the next arrival, where the F test is blind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stats.h"
#include "test_num.h"

#define US INT64_C(1000)
#define MS INT64_C(1000000)
#define STEP (10 * US)
#define SPAN (20000 * MS)
#define WIDTH (50 * MS)
#define NWIN ((size_t)(SPAN / WIDTH))
#define MAXRQ 4096

/* One request: its pieces of CPU (demand / (calls + 1) each) between calls. */
struct rq {
    int64_t arrival, call_until; /* call_until: in a call until then, 0 when not */
    double left;                 /* ns of CPU left in the current piece */
    int piece;                   /* 0..calls */
    bool started, done;
};

struct server {
    int cores, threads;          /* threads 0: no cap (processor sharing of all) */
    int calls;
    int64_t demand, call_ns;
};

static double expo(double mean) { return -mean * log(unif()); }

/* Bursts: 500 ms at `hi` requests/s every second, `lo` the rest of it.
 * Windows holding at least BUSY_N requests in flight on average are the busy
 * ones (mark 2, as diagnose marks the windows where the server's requests
 * queue), the rest calm (1). */
#define BUSY_N 8.0
static size_t simulate(const struct server *sv, double hi, double lo, struct tb_prog_ev *ev,
                       uint8_t *mark)
{
    static struct rq r[MAXRQ];
    size_t nr = 0, nev = 0;
    int64_t next = (int64_t)expo(1e9 / lo);
    static double inflight[NWIN];
    memset(inflight, 0, sizeof inflight);
    for (int64_t t = 0; t < SPAN; t += STEP) {
        while (next <= t && nr < MAXRQ) {
            r[nr] = (struct rq){.arrival = next, .left = (double)sv->demand / (sv->calls + 1)};
            ev[nev++] = (struct tb_prog_ev){next, TB_PROG_ARRIVAL};
            nr++;
            double rate = (next % (1000 * MS)) < 500 * MS ? hi : lo;
            next += (int64_t)expo(1e9 / rate) + 1;
        }
        /* Threads are taken first come, first served (by arrival). */
        int holding = 0;
        for (size_t i = 0; i < nr; i++)
            holding += r[i].started && !r[i].done;
        for (size_t i = 0; i < nr && (!sv->threads || holding < sv->threads); i++)
            if (!r[i].started && r[i].arrival <= t) {
                r[i].started = true;
                holding++;
            }
        int on_cpu = 0;
        for (size_t i = 0; i < nr; i++)
            on_cpu += r[i].started && !r[i].done && !r[i].call_until;
        double share = on_cpu > sv->cores ? (double)sv->cores / on_cpu : 1.0;
        for (size_t i = 0; i < nr; i++) {
            struct rq *q = &r[i];
            if (!q->started || q->done)
                continue;
            if (q->call_until) {
                if (q->call_until <= t)
                    q->call_until = 0;
                continue;
            }
            q->left -= share * (double)STEP;
            if (q->left > 0)
                continue;
            if (q->piece == sv->calls) {
                q->done = true;
                ev[nev++] = (struct tb_prog_ev){t + STEP, TB_PROG_DEPARTURE};
            } else {
                q->piece++;
                q->left = (double)sv->demand / (sv->calls + 1);
                q->call_until = t + STEP + sv->call_ns;
                ev[nev++] = (struct tb_prog_ev){t + STEP, TB_PROG_CALL};
            }
        }
        /* Drop finished requests to keep the scan short. */
        size_t m = 0;
        for (size_t i = 0; i < nr; i++)
            if (!r[i].done)
                r[m++] = r[i];
        nr = m;
        size_t arrived = 0;
        for (size_t i = 0; i < nr; i++)
            arrived += r[i].arrival <= t;
        inflight[t / WIDTH] += (double)arrived * STEP / WIDTH;
    }
    for (size_t k = 0; k < NWIN; k++)
        mark[k] = inflight[k] >= BUSY_N ? 2 : 1;
    return nev;
}

static double progress_of(const struct server *sv, double hi, double lo)
{
    size_t cap = 64 * 1024 * 1024 / sizeof(struct tb_prog_ev);
    struct tb_prog_ev *ev = malloc(cap * sizeof *ev);
    uint8_t mark[NWIN];
    assert_non_null(ev);
    size_t n = simulate(sv, hi, lo, ev, mark);
    assert_true(n < cap);
    struct tb_progress p;
    assert_int_equal(tb_call_progress(ev, n, mark, 0, WIDTH, NWIN, 0.5, &p), 0);
    assert_near(p.calls_per_request, sv->calls, 0.01);
    free(ev);
    return p.ratio;
}

/* The progress ratio of a server of `cores` cores and `threads` threads (0:
 * no cap) whose requests each take 4 ms of CPU in four pieces around 3 calls
 * of 500 us, under bursts at `hi`/s (150/s between them), from the same
 * random stream whatever ran before. */
static double burst_ratio(const char *what, int cores, int threads, double hi)
{
    rs = 20261129;
    struct server sv = {.cores = cores, .threads = threads, .calls = 3, .demand = 4 * MS,
                        .call_ns = 500 * US};
    double r = progress_of(&sv, hi, 150);
    print_message("%s: progress ratio %.3f\n", what, r);
    return r;
}

/* Processor sharing, 2 cores: bursts at 700/s overrun its 500/s. Every
 * queued request has begun: the calls made per request in flight are the
 * same in the bursts as outside them. */
static void processor_sharing_keeps_progress(void **state)
{
    (void)state;
    double r = burst_ratio("processor sharing", 2, 0, 700);
    assert_true(r >= 0.85 && r <= 1.15);
}

/* 4 threads on 8 cores, the same equal demands: 4 / 5.5 ms = 727/s, bursts
 * at 1000/s. Only the 4 started requests have made calls: the ratio falls
 * with the queue. */
static void thread_cap_holds_progress(void **state)
{
    (void)state;
    double r = burst_ratio("thread cap", 8, 4, 1000);
    assert_true(r < 0.6);
}

/* Too little time on one side: NAN; a zero width is refused. */
static void progress_edges(void **state)
{
    (void)state;
    struct tb_prog_ev ev[] = {{0, TB_PROG_ARRIVAL}, {MS, TB_PROG_CALL}, {2 * MS, TB_PROG_DEPARTURE}};
    uint8_t mark[1] = {1};
    struct tb_progress p;
    assert_int_equal(tb_call_progress(ev, 3, mark, 0, WIDTH, 1, 0.5, &p), 0);
    assert_true(isnan(p.ratio));
    assert_near(p.calls_per_request, 1, 0);
    assert_int_equal(tb_call_progress(ev, 3, mark, 0, 0, 1, 0.5, &p), TB_E_INVAL);
}

/* Requests served alone: demands lognormal around 2 ms (class 1) and 6 ms
 * (class 2, 30% of them) with sigma `sigma` of the log, 40 a second for
 * 20 s; `slow` the speed of every other 2 s (1: one speed). */
static struct tb_iso_speed iso_run(double slow, double sigma)
{
    static struct tb_iso_sample s[800];
    size_t n = 0;
    for (int64_t sec = 0; sec < 20; sec++)
        for (int i = 0; i < 40; i++) {
            uint32_t cls = 1 + (unif() < 0.3);
            double speed = (sec / 2) % 2 ? slow : 1.0;
            double d = (cls == 1 ? 2e6 : 6e6) * exp(sigma * gauss());
            s[n++] = (struct tb_iso_sample){sec * 1000 * MS + i * 25 * MS, d / speed, cls, false};
        }
    struct tb_iso_speed o;
    assert_int_equal(tb_isolated_speed(s, n, 1000 * MS, &o), 0);
    assert_int_equal(o.samples, 800);
    assert_int_equal(o.groups, 20);
    return o;
}

/* One speed: the seconds differ no more than their samples scatter (F about
 * 1), whatever the scatter. */
static void isolated_speed_one_speed(void **state)
{
    (void)state;
    rs = 7;
    struct tb_iso_speed o = iso_run(1.0, 0.3);
    print_message("one speed, sigma 0.3: F %.2f effect %.3f\n", o.f, o.effect);
    assert_true(o.f < 3);
    o = iso_run(1.0, 1.0);
    print_message("one speed, sigma 1.0: F %.2f effect %.3f\n", o.f, o.effect);
    assert_true(o.f < 3);
}

/* Speeds 1.0 and 0.6 two seconds each: F above diagnose's 20 (expected
 * about 1 + 40 x 0.51^2 / 4 / 0.09 = 30), and the effect 1 / 0.6 = 1.67 to
 * the noise of 40 samples a second (the second slowest and second fastest
 * of 10 seconds each lean outwards by about 0.05 in log each). */
static void isolated_speed_two_speeds(void **state)
{
    (void)state;
    rs = 7;
    struct tb_iso_speed o = iso_run(0.6, 0.3);
    print_message("speeds 1.0/0.6, sigma 0.3: F %.2f effect %.3f\n", o.f, o.effect);
    assert_true(o.f > 20);
    assert_true(o.effect > 1.5 && o.effect < 2.1);
}

/* Fewer than 6 seconds with 3 samples: not measured; bad width refused. */
static void isolated_speed_edges(void **state)
{
    (void)state;
    struct tb_iso_sample s[15];
    for (int i = 0; i < 15; i++)
        s[i] = (struct tb_iso_sample){(int64_t)i * 400 * MS, 1e6, 1, false};
    struct tb_iso_speed o;
    assert_int_equal(tb_isolated_speed(s, 15, 1000 * MS, &o), 0);
    assert_true(isnan(o.f));
    assert_int_equal(tb_isolated_speed(s, 15, 0, &o), TB_E_INVAL);
}

/* ---- tb_isolated_logrank ---------------------------------------------------- */

/* The textbook k-sample log-rank, computed here the long way and
 * independently of isolated.c's Nelson-Aalen sums: per class, at each
 * distinct time at which some request left alone, every period's expected
 * count grows by (leaving then) x (its requests still at risk) / (all still
 * at risk). Periods of group_ns by arrival; O/E and the conservative chi2
 * over periods with E >= min_e; z its Wilson-Hilferty score; effect the
 * second highest O/E over the second lowest. */
#define LR_MAXG 64
static void logrank_oracle(const struct tb_iso_sample *s, size_t n, int64_t group_ns,
                           double min_e, double *chi2, double *z, double *effect, size_t *groups)
{
    double O[LR_MAXG] = {0}, E[LR_MAXG] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t g = (size_t)(s[i].t / group_ns);
        assert_true(g < LR_MAXG);
        O[g] += !s[i].censored;
        if (s[i].censored)
            continue;
        /* An event at s[i].own_ns: counted once per distinct (class, time). */
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = !(!s[j].censored && s[j].cls == s[i].cls && s[j].own_ns == s[i].own_ns);
        if (!first)
            continue;
        double d = 0, at = 0, atg[LR_MAXG] = {0};
        for (size_t j = 0; j < n; j++) {
            if (s[j].cls != s[i].cls || s[j].own_ns < s[i].own_ns)
                continue;
            at++;
            atg[s[j].t / group_ns]++;
            d += !s[j].censored && s[j].own_ns == s[i].own_ns;
        }
        for (size_t g2 = 0; g2 < LR_MAXG; g2++)
            E[g2] += d * atg[g2] / at;
    }
    double r[LR_MAXG];
    size_t k = 0;
    *chi2 = 0;
    for (size_t g = 0; g < LR_MAXG; g++)
        if (E[g] > 0 && E[g] >= min_e) {
            *chi2 += (O[g] - E[g]) * (O[g] - E[g]) / E[g];
            r[k++] = O[g] / E[g];
        }
    *groups = k;
    double df = (double)k - 1, v = 2 / (9 * df);
    *z = (cbrt(*chi2 / df) - (1 - v)) / sqrt(v);
    for (size_t a = 1; a < k; a++) /* insertion sort */
        for (size_t b = a; b > 0 && r[b - 1] > r[b]; b--) {
            double t = r[b];
            r[b] = r[b - 1];
            r[b - 1] = t;
        }
    *effect = r[k - 2] / r[1];
}

/* Hand-made samples with ties, two classes and censoring: the function's
 * chi2, z and effect equal the long way's to rounding. */
static void isolated_logrank_exact(void **state)
{
    (void)state;
    static const double own[] = {3, 5, 5, 8, 2, 9, 4, 4, 7, 1, 6, 3};
    struct tb_iso_sample s[96];
    size_t n = 0;
    for (int64_t g = 0; g < 8; g++)
        for (size_t i = 0; i < 12; i++) {
            /* Period g's times stretched by 1 + g/4 in class 1 only, every
             * third one censored. */
            uint32_t cls = 1 + (i % 2);
            double t = own[i] * (cls == 1 ? 1 + (double)g / 4 : 1);
            s[n] = (struct tb_iso_sample){g * 1000 * MS + (int64_t)i * MS, t * 1e6, cls,
                                          i % 3 == 2};
            n++;
        }
    double chi2, z, effect;
    size_t groups;
    logrank_oracle(s, n, 1000 * MS, 1.0, &chi2, &z, &effect, &groups);
    struct tb_iso_logrank o;
    assert_int_equal(tb_isolated_logrank(s, n, 1000 * MS, 1.0, &o), 0);
    print_message("exact: chi2 %.6f z %.6f effect %.6f groups %zu\n", o.chi2, o.z, o.effect,
                  o.groups);
    assert_int_equal(o.samples, 96);
    assert_int_equal(o.events, 64);
    assert_int_equal(o.groups, groups);
    assert_near(o.chi2, chi2, 1e-9);
    assert_near(o.z, z, 1e-9);
    assert_near(o.effect, effect, 1e-9);
    /* Class 1 slower in the later periods: fewer leave alone than expected. */
    assert_true(o.effect > 1.2);
}

/* Requests arriving at an empty CPU, exponential demands of 1 ms over the
 * speed, 100 a second for 20 s, each censored by the next arrival after
 * exp(1/lambda): speed `slow` and arrival rate `lam_slow` every other 2 s,
 * 1.0 and 0.5/ms the rest. At speeds 1 and 0.6 with arrival rates 0.5 and
 * 0.9/ms, the requests that leave alone take exp(1/1.5 ms) in both (the
 * hazards add: 1 + 0.5 = 0.6 + 0.9) — a busier slow CPU keeps only its short
 * requests alone, which is why the isolated-speed F test reads 1-2 on
 * diagnose's speed changes with exponential demands. */
static void iso_exp_run(double slow, double lam_slow, struct tb_iso_logrank *lr,
                        struct tb_iso_speed *sp)
{
    static struct tb_iso_sample s[2000];
    size_t n = 0;
    for (int64_t sec = 0; sec < 20; sec++)
        for (int i = 0; i < 100; i++) {
            bool is_slow = (sec / 2) % 2;
            double speed = is_slow ? slow : 1.0, lam = is_slow ? lam_slow : 0.5;
            double d = expo(1e6) / speed, cens = expo(1e6 / lam);
            s[n++] = (struct tb_iso_sample){sec * 1000 * MS + i * 10 * MS, d < cens ? d : cens,
                                            1, cens <= d};
        }
    assert_int_equal(tb_isolated_logrank(s, n, 2000 * MS, 5.0, lr), 0);
    assert_int_equal(tb_isolated_speed(s, n, 1000 * MS, sp), 0);
    assert_int_equal(lr->samples, 2000);
    assert_int_equal(lr->groups, 10);
}

/* One speed, arrivals twice as dense every other 2 s: the censoring is not a
 * speed (z below diagnose's 2.5). */
static void isolated_logrank_one_speed(void **state)
{
    (void)state;
    rs = 11;
    struct tb_iso_logrank lr;
    struct tb_iso_speed sp;
    for (int rep = 0; rep < 5; rep++) {
        iso_exp_run(1.0, 1.0, &lr, &sp);
        print_message("one speed: log-rank z %.2f effect %.3f; F %.2f\n", lr.z, lr.effect, sp.f);
        assert_true(lr.z < 2.5);
    }
}

/* Speeds 1.0 and 0.6: the F test on the requests left alone sees nothing
 * (below its 20), the log-rank sees the speeds (z far above 2.5; with 2 000
 * samples the expected chi2 is about 9 x 40 = 360 on 9 degrees of freedom)
 * and the effect is their ratio, 1/0.6 = 1.67, to the noise of ~100 events
 * a period. */
static void isolated_logrank_two_speeds(void **state)
{
    (void)state;
    rs = 11;
    struct tb_iso_logrank lr;
    struct tb_iso_speed sp;
    for (int rep = 0; rep < 5; rep++) {
        iso_exp_run(0.6, 0.9, &lr, &sp);
        print_message("speeds 1.0/0.6: log-rank z %.2f effect %.3f; F %.2f\n", lr.z, lr.effect,
                      sp.f);
        assert_true(sp.f < 20);
        assert_true(lr.z > 5);
        assert_true(lr.effect > 1.3 && lr.effect < 2.2);
    }
}

/* Fewer than 6 periods with E >= min_expected: not measured; one speed and
 * one time: chi2 0; bad width refused. */
static void isolated_logrank_edges(void **state)
{
    (void)state;
    struct tb_iso_sample s[15];
    for (int i = 0; i < 15; i++)
        s[i] = (struct tb_iso_sample){(int64_t)i * 400 * MS, 1e6, 1, false};
    struct tb_iso_logrank o;
    /* Equal times: E = O in each second (2 or 3 of them): 3 seconds with 3. */
    assert_int_equal(tb_isolated_logrank(s, 15, 1000 * MS, 3.0, &o), 0);
    assert_int_equal(o.groups, 3);
    assert_true(isnan(o.z) && isnan(o.effect));
    assert_int_equal(tb_isolated_logrank(s, 15, 1000 * MS, 1.0, &o), 0);
    assert_int_equal(o.groups, 6);
    assert_near(o.chi2, 0, 1e-12);
    assert_int_equal(tb_isolated_logrank(s, 15, 0, 1.0, &o), TB_E_INVAL);
    assert_int_equal(tb_isolated_logrank(s, 0, 1000 * MS, 1.0, &o), 0);
    assert_true(isnan(o.z));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processor_sharing_keeps_progress),
        cmocka_unit_test(thread_cap_holds_progress),
        cmocka_unit_test(progress_edges),
        cmocka_unit_test(isolated_speed_one_speed),
        cmocka_unit_test(isolated_speed_two_speeds),
        cmocka_unit_test(isolated_speed_edges),
        cmocka_unit_test(isolated_logrank_exact),
        cmocka_unit_test(isolated_logrank_one_speed),
        cmocka_unit_test(isolated_logrank_two_speeds),
        cmocka_unit_test(isolated_logrank_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
