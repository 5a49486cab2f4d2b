/* SPDX-License-Identifier: MIT */
/* bench_analysis.c — service times + lives by arrival concurrency (the
 * stretch accumulator) + windows + N* + episodes over 10 million synthetic
 * requests generated on the fly, against a plain pass as baseline. Each part
 * is fed as the report path (analysis/analyze.c run()) feeds it: the service
 * estimator, then a pass of the tier's requests in arrival order into the
 * stretch accumulator (pipe_lives_of: each server's histogram, the tier row
 * their sum), then the windows, then N* per row with that row's lives.
 * BENCH_NOSTRETCH=1 leaves the stretch pass and the rule out (v0.8's bench). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "correlate.h"
#include "stats.h"
#include "stretch.h"

#define NSERVERS 4
#define CORES 4

/* The generator: each of NSERVERS servers is a FCFS queue with CORES cores
 * fed by one Poisson stream whose rate swings slowly between 40% and 140% of
 * the capacity (so load crosses the knee, as in a bursty workload); two
 * classes, 1 ms (70%) and 3 ms (30%) of work. Requests come out in arrival
 * order, as the store returns them, so the service estimator can stream. */
struct gen {
    uint64_t rng;
    int64_t t;
    int64_t rate_at; /* the rate is recomputed once per simulated millisecond */
    double rate;
    int64_t core_free[NSERVERS][CORES];
    uint64_t left;
};

static double unif(struct gen *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return ((double)(g->rng >> 11) + 0.5) / 9007199254740992.0;
}

static void gen_init(struct gen *g, uint64_t n)
{
    memset(g, 0, sizeof *g);
    g->rng = 0x9E3779B97F4A7C15ull;
    g->t = INT64_C(1700000000) * TB_NS_PER_SEC;
    for (int s = 0; s < NSERVERS; s++)
        for (int c = 0; c < CORES; c++)
            g->core_free[s][c] = g->t;
    g->left = n;
    g->rate_at = INT64_MIN;
}

static bool gen_next(struct gen *g, struct tb_request *r)
{
    if (!g->left)
        return false;
    g->left--;
    const double capacity = NSERVERS * CORES / 1.6e-3; /* requests per second */
    if (g->t >= g->rate_at) {
        double phase = (double)(g->t % (20 * TB_NS_PER_SEC)) / (20.0 * TB_NS_PER_SEC);
        g->rate = capacity * (0.9 + 0.5 * sin(2 * M_PI * phase));
        g->rate_at = g->t + TB_NS_PER_MS;
    }
    g->t += (int64_t)(-log(unif(g)) / g->rate * 1e9) + 1;
    uint32_t s = (uint32_t)(unif(g) * NSERVERS);
    bool big = unif(g) < 0.3;
    int64_t work = big ? 3 * TB_NS_PER_MS : 1 * TB_NS_PER_MS;
    int c = 0;
    for (int k = 1; k < CORES; k++)
        if (g->core_free[s][k] < g->core_free[s][c])
            c = k;
    int64_t start = TB_MAX(g->t, g->core_free[s][c]);
    g->core_free[s][c] = start + work;
    memset(r, 0, sizeof *r);
    r->tier = 1;
    r->server = s + 1;
    r->class_id = big ? 2 : 1;
    r->arrival_ns = g->t;
    r->departure_ns = start + work;
    return true;
}

/* CPU time of this process: on a shared, loaded machine the wall clock
 * measures the neighbours too. Wall time is printed alongside. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* What the stretch pass found, and an FNV-1a hash of every row's histogram
 * (the same figure from two builds: the same bytes). */
static const char *a_stretch_note(const struct tb_stretch *lives)
{
    static char buf[160];
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)lives;
    for (size_t i = 0; i < (NSERVERS + 1) * sizeof *lives; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    snprintf(buf, sizeof buf,
             "tier: %" PRIu64 " alone, %" PRIu64 " at 8+ in flight; hash %016" PRIx64,
             tb_stretch_count(&lives[0], 0, 0), tb_stretch_count(&lives[0], 8, UINT32_MAX), h);
    return buf;
}

#define CHECK(x)                                                                 \
    do {                                                                         \
        int rc_ = (x);                                                           \
        if (rc_) {                                                               \
            fprintf(stderr, "bench_analysis: %s: %s\n", #x, tb_strerror(rc_));   \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    struct gen g;
    struct tb_request r;

    /* Baseline: generate every request and sum durations, nothing else. */
    double w0 = wall();
    double t0 = now();
    gen_init(&g, n);
    int64_t first = g.t, last = first, sum = 0;
    while (gen_next(&g, &r)) {
        sum += r.departure_ns - r.arrival_ns;
        last = TB_MAX(last, r.departure_ns);
    }
    double t_base = now() - t0;
    long rss_base = rss_kb();

    /* Pass 1: service times (streaming, arrival order). */
    t0 = now();
    struct tb_svcest *est;
    CHECK(tb_svcest_new(&est, NULL, 0, NULL));
    gen_init(&g, n);
    while (gen_next(&g, &r))
        CHECK(tb_svcest_add(est, &r));
    struct tb_class_service *svc;
    size_t nsvc;
    int64_t unit;
    CHECK(tb_svcest_finish(est, NULL, 0, &svc, &nsvc, &unit));
    tb_svcest_free(est);
    struct tb_units *units;
    CHECK(tb_units_new(&units, svc, nsvc, 1.0));
    double t_svc = now() - t0;
    if (getenv("BENCH_SVC"))
        for (size_t i = 0; i < nsvc; i++)
            fprintf(stderr, "class %u period %" PRId64 " service %" PRId64 " units %.3f n %u/%u m %d\n",
                    svc[i].class_id, svc[i].period_start_ns, svc[i].service_ns, svc[i].units,
                    svc[i].samples, svc[i].requests, (int)svc[i].method);

    /* Pass 2: lives by arrival concurrency, as pipe_lives_of then pipe_lives
     * do: every request of the tier in arrival order, then each server's
     * histogram copied into its row and summed into the tier's (row 0). */
    bool stretch = !getenv("BENCH_NOSTRETCH");
    double t_str = 0;
    struct tb_stretch *lives = NULL;
    if (stretch) {
        t0 = now();
        struct tb_stretchacc *lacc;
        CHECK(tb_stretchacc_new(&lacc));
        gen_init(&g, n);
        while (gen_next(&g, &r))
            CHECK(tb_stretchacc_add(lacc, &r));
        if (!(lives = calloc(NSERVERS + 1, sizeof *lives)))
            CHECK(TB_E_NOMEM);
        for (uint32_t s = 0; s < NSERVERS; s++) {
            const struct tb_stretch *h = tb_stretchacc_server(lacc, s + 1);
            if (h) {
                lives[s + 1] = *h;
                tb_stretch_merge(&lives[0], h);
            }
        }
        tb_stretchacc_free(lacc);
        t_str = now() - t0;
    }

    /* Pass 3: windows of the tier and its servers (streaming). */
    t0 = now();
    uint32_t servers[NSERVERS];
    for (uint32_t s = 0; s < NSERVERS; s++)
        servers[s] = s + 1;
    struct tb_winacc *acc;
    CHECK(tb_winacc_new(&acc, 1, 50 * TB_NS_PER_MS, first, last + 1, servers, NSERVERS));
    gen_init(&g, n);
    while (gen_next(&g, &r))
        CHECK(tb_winacc_add(acc, &r, tb_units_get(units, r.class_id, r.arrival_ns)));
    struct tb_window *w;
    size_t nw;
    CHECK(tb_winacc_finish(acc, &w, &nw));
    size_t per_row = tb_winacc_nwindows(acc);
    tb_winacc_free(acc);
    double t_win = now() - t0;

    /* N*, episodes and levels of the tier (row 0) and of each server. */
    t0 = now();
    struct tb_analysis a[NSERVERS + 1];
    size_t neps = 0;
    for (size_t row = 0; row <= NSERVERS; row++) {
        struct tb_episode *ep;
        size_t nep;
        struct tb_nstar_opts no;
        tb_nstar_opts_default(&no);
        no.stretch = lives ? &lives[row] : NULL;
        CHECK(tb_correlate_analyze(w + row * per_row, per_row, unit, &no, &a[row], &ep, &nep));
        neps += nep;
        free(ep);
    }
    double t_corr = now() - t0;
    double t_wall = wall() - w0;
    long rss = rss_kb();

    double total = t_svc + t_str + t_win + t_corr;
    int passes = stretch ? 3 : 2;
    printf("requests            %" PRIu64 " (%.0f s of traffic, %zu windows x %d rows)\n", n,
           (double)(last - first) / 1e9, per_row, NSERVERS + 1);
    printf("(times are CPU seconds of this process)\n");
    printf("baseline pass       %.3f s (generate + sum durations; checksum %" PRId64 ")\n",
           t_base, sum % 1000);
    printf("service times       %.3f s (%zu class-periods, work unit %.3f ms)\n", t_svc, nsvc,
           unit / 1e6);
    if (stretch)
        printf("stretch (lives)     %.3f s; minus its generation pass %.3f s = %.1f%% of the "
               "analysis (%s)\n",
               t_str, t_str - t_base, 100 * (t_str - t_base) / (total - passes * t_base),
               a_stretch_note(lives));
    else
        printf("stretch (lives)     off (BENCH_NOSTRETCH)\n");
    printf("windows             %.3f s\n", t_win);
    printf("N*+episodes+levels  %.3f s (%zu episodes over %d series)\n", t_corr, neps,
           NSERVERS + 1);
    printf("total               %.3f s CPU; minus %d generation passes: %.3f s (target < 3 s) "
           "= %.1fx the baseline pass; wall for everything incl. baseline %.3f s\n",
           total, passes, total - passes * t_base, (total - passes * t_base) / t_base, t_wall);
    printf("tier: N* %.3f, fit %.3f, TPmax %.0f units/s, congested %.1f%%, %u levels\n",
           a[0].n_star, a[0].n_star_fit, a[0].tp_max, 100 * a[0].congested_fraction,
           a[0].n_levels);
    printf("tier knee test: %s\n", a[0].n_star_reason);
    printf("server 1: N* %.3f, fit %.3f, slope %.1f, TPmax %.0f (cores: %d)\n", a[1].n_star,
           a[1].n_star_fit, a[1].slope, a[1].tp_max, CORES);
    if (getenv("BENCH_DUMP")) {
        FILE *f = fopen(getenv("BENCH_DUMP"), "w");
        for (size_t k = 0; f && k < per_row; k++)
            fprintf(f, "%.4f %.2f\n", w[per_row + k].load, w[per_row + k].norm_throughput);
        if (f)
            fclose(f);
    }
    printf("peak RSS            %ld kB (after baseline %ld kB); the requests as an array "
           "would take %.0f MB, the windows take %.1f MB\n",
           rss, rss_base, (double)n * sizeof(struct tb_request) / 1e6,
           (double)nw * sizeof(struct tb_window) / 1e6);
    free(w);
    free(lives);
    free(svc);
    tb_units_free(units);
    return 0;
}
