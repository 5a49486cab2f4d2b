/* SPDX-License-Identifier: MIT */
/* test_tierfeed.c — the streamed read and the streamed report pipeline that
 * `tbneck diagnose` runs on, against what they replace: tb_store_each_request
 * gives the rows in the order the test wrote them sorted by arrival (ties in
 * writing order), and equals tb_store_requests; tb_busyacc equals
 * tb_windows_calls_busy to the bit, and a hand-worked case; tb_tierfeed fed
 * twice from the stream gives every tier exactly what tb_analyze_tier_servers
 * gives from arrays (service times, every field of every window of the tier
 * and of each server, N*, episodes), on a 1/2/1 stack whose database saturates
 * in bursts, with calls that arrive at the same nanosecond as requests of
 * their caller and calls from a hosts= machine that is no server; and a feed
 * resumed from a first pass's summary (diagnose's stored inputs) gives the
 * same again with no request read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "analyze.h"
#include "catalog.h"
#include "stats.h"
#include "store.h"

#define MS TB_NS_PER_MS
#define T0 (INT64_C(1700000000) * TB_NS_PER_SEC)
#define PAGES 9000
#define MAXREQ (PAGES * 6)

struct fixture {
    char dir[64], path[96];
    struct tb_store *st;
    struct tb_catalog *cat;
    uint32_t tier[3], srv[4], cls[6];
    struct tb_request *rq; /* in writing order */
    size_t n;
};

static uint64_t rng = 88172645463325252ull;
static double unif(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static int64_t expo(double mean_ns)
{
    return (int64_t)(-log(unif()) * mean_ns) + 1;
}

/* Pages over 75 s (two service-time periods): web → app (one of two, or a
 * third app machine given only as hosts=) → 1-3 queries; the database's
 * two cores work 15 times slower in the second of every 4 s, so it saturates
 * in bursts. Every 7th page's first query arrives at the very nanosecond its app
 * request does. Requests are written in departure order, as a capture
 * writes them. */
static void make_requests(struct fixture *fx)
{
    struct tb_addr web, app[3], user;
    assert_int_equal(tb_addr_parse("10.0.2.1:80", &web), 0);
    assert_int_equal(tb_addr_parse("10.0.3.1:8080", &app[0]), 0);
    assert_int_equal(tb_addr_parse("10.0.3.2:8080", &app[1]), 0);
    assert_int_equal(tb_addr_parse("10.0.3.9:41000", &app[2]), 0);
    assert_int_equal(tb_addr_parse("10.0.1.7:40000", &user), 0);
    fx->rq = calloc(MAXREQ, sizeof *fx->rq);
    assert_non_null(fx->rq);
    int64_t t = T0 + 3 * MS, core[2] = {0, 0};
    for (int p = 0; p < PAGES; p++) {
        t += expo(1e9 / 120.0);
        bool slow = ((t - T0) / TB_NS_PER_SEC) % 4 == 1;
        int a = p % 11 == 10 ? 2 : p % 2;
        struct tb_request *f = &fx->rq[fx->n++];
        *f = (struct tb_request){.tier = fx->tier[0], .server = fx->srv[0], .client = user,
                                 .class_id = fx->cls[p % 2], .arrival_ns = t, .conn = 1,
                                 .status = 200};
        f->client.port = (uint16_t)(40000 + p % 50);
        int64_t u = t + expo(80e3);
        struct tb_request *ap = &fx->rq[fx->n++];
        *ap = (struct tb_request){.tier = fx->tier[1], .server = fx->srv[1 + (a == 1)],
                                  .client = web, .class_id = fx->cls[2 + p % 2],
                                  .arrival_ns = u, .conn = 2 + (uint64_t)(p % 8), .status = 200};
        ap->client.port = (uint16_t)(50000 + p % 8);
        int64_t q0 = p % 7 == 0 ? u : u + expo(300e3);
        int nq = 1 + p % 3;
        for (int q = 0; q < nq; q++) {
            struct tb_request *d = &fx->rq[fx->n++];
            *d = (struct tb_request){.tier = fx->tier[2], .server = fx->srv[3],
                                     .client = app[a], .class_id = fx->cls[4 + q % 2],
                                     .arrival_ns = q0, .conn = 100 + (uint64_t)(p % 4),
                                     .status = 0};
            d->client.port = (uint16_t)(41000 + p % 4);
            /* Two cores taken first come, first served (near enough:
             * pages overlap little), so the database saturates. */
            int c = core[0] <= core[1] ? 0 : 1;
            int64_t start = TB_MAX(q0, core[c]);
            core[c] = start + expo((slow ? 15 : 1) * (q % 2 ? 900e3 : 400e3));
            q0 = core[c];
            d->departure_ns = q0;
            q0 += expo(100e3);
        }
        ap->departure_ns = q0 + expo(200e3);
        f->departure_ns = ap->departure_ns + expo(50e3);
        /* A response cut short now and then: load, no completion. */
        if (p % 97 == 0)
            f->flags = TB_REQ_NORESP;
    }
}

static int cmp_dep(const void *a, const void *b)
{
    const struct tb_request *x = a, *y = b;
    return (x->departure_ns > y->departure_ns) - (x->departure_ns < y->departure_ns);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/tb_test_tierfeed_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof fx->path, "%s/t.db", fx->dir);
    char err[256];
    assert_int_equal(tb_store_open(&fx->st, fx->path, TB_STORE_CREATE, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&fx->cat), 0);
    static const char *const names[3] = {"http", "http-8080", "mysql"};
    static const char *const protos[3] = {"http", "http", "mysql"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tb_catalog_tier(fx->cat, names[i], protos[i], &fx->tier[i]), 0);
    static const char *const addrs[4] = {"10.0.2.1:80", "10.0.3.1:8080", "10.0.3.2:8080",
                                         "10.0.4.1:3306"};
    static const int tier_of[4] = {0, 1, 1, 2};
    for (int i = 0; i < 4; i++) {
        struct tb_addr a;
        assert_int_equal(tb_addr_parse(addrs[i], &a), 0);
        assert_int_equal(tb_catalog_server(fx->cat, fx->tier[tier_of[i]], &a, &fx->srv[i]), 0);
    }
    /* An application machine that is no server of its own (hosts=). */
    struct tb_addr h;
    assert_int_equal(tb_addr_parse("10.0.3.9:0", &h), 0);
    assert_int_equal(tb_catalog_host(fx->cat, fx->tier[1], &h), 0);
    static const char *const cls[6] = {"GET /a", "GET /b", "GET /x", "GET /y", "select ?",
                                       "update t set a = ?"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(tb_catalog_class(fx->cat, fx->tier[i / 2], cls[i], strlen(cls[i]),
                                          &fx->cls[i]),
                         0);
    make_requests(fx);
    qsort(fx->rq, fx->n, sizeof *fx->rq, cmp_dep);
    int64_t cap;
    struct tb_writer *w;
    assert_int_equal(tb_store_capture_begin(fx->st, "tierfeed", &cap), 0);
    assert_int_equal(tb_writer_start(&w, fx->st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, fx->cat), 0);
    for (size_t i = 0; i < fx->n; i++)
        assert_int_equal(tb_writer_request(w, &fx->rq[i]), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    assert_int_equal(tb_store_capture_end(fx->st, cap, NULL), 0);
    tb_catalog_free(fx->cat);
    tb_store_close(fx->st);
    assert_int_equal(tb_store_open(&fx->st, fx->path, 0, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&fx->cat), 0);
    assert_int_equal(tb_store_load_catalog(fx->st, fx->cat), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    tb_catalog_free(fx->cat);
    tb_store_close(fx->st);
    char p[128];
    static const char *const files[] = {"t.db", "t.db-wal", "t.db-shm"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(files); i++) {
        snprintf(p, sizeof p, "%s/%s", fx->dir, files[i]);
        unlink(p);
    }
    rmdir(fx->dir);
    free(fx->rq);
    free(fx);
    return 0;
}

/* ---- the streamed read ---------------------------------------------------------------- */

struct collect {
    struct tb_request *rq;
    size_t n, cap;
};

static int collect_cb(void *u, const struct tb_request *r)
{
    struct collect *c = u;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->rq = realloc(c->rq, c->cap * sizeof *c->rq);
        assert_non_null(c->rq);
    }
    c->rq[c->n++] = *r;
    return 0;
}

/* Writing order is the row order: a stable sort by arrival is the order the
 * store promises. */
struct ord {
    int64_t t;
    size_t i;
};

static int cmp_ord(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static void same_request(const struct tb_request *a, const struct tb_request *b, size_t k)
{
    if (a->tier != b->tier || a->server != b->server || a->class_id != b->class_id ||
        a->arrival_ns != b->arrival_ns || a->departure_ns != b->departure_ns ||
        a->conn != b->conn || a->flags != b->flags || !tb_addr_ip_eq(&a->client, &b->client) ||
        a->client.port != b->client.port)
        fail_msg("row %zu: tier %u server %u arrival %lld, expected tier %u server %u arrival "
                 "%lld",
                 k, a->tier, a->server, (long long)a->arrival_ns, b->tier, b->server,
                 (long long)b->arrival_ns);
}

static void test_each_request_order(void **state)
{
    struct fixture *fx = *state;
    struct ord *o = malloc(fx->n * sizeof *o);
    assert_non_null(o);
    for (size_t i = 0; i < fx->n; i++)
        o[i] = (struct ord){fx->rq[i].arrival_ns, i};
    qsort(o, fx->n, sizeof *o, cmp_ord);
    struct collect c = {0};
    assert_int_equal(tb_store_each_request(fx->st, 0, INT64_MIN, INT64_MAX, collect_cb, &c), 0);
    assert_int_equal(c.n, fx->n);
    size_t ties = 0;
    for (size_t k = 0; k < fx->n; k++) {
        same_request(&c.rq[k], &fx->rq[o[k].i], k);
        /* The lean read leaves the columns it does not need at 0. */
        assert_int_equal(c.rq[k].status, 0);
        ties += k && c.rq[k].arrival_ns == c.rq[k - 1].arrival_ns;
    }
    assert_true(ties > 100); /* the tie-break was exercised */
    /* The array read: the same rows in the same order, every column. */
    struct tb_request *arr;
    size_t na;
    assert_int_equal(tb_store_requests(fx->st, 0, INT64_MIN, INT64_MAX, &arr, &na), 0);
    assert_int_equal(na, fx->n);
    for (size_t k = 0; k < na; k++) {
        same_request(&arr[k], &c.rq[k], k);
        assert_int_equal(arr[k].status, fx->rq[o[k].i].status);
    }
    free(arr);
    /* One tier and a bounded range: that tier's rows of the range, in order. */
    int64_t from = T0 + 20 * TB_NS_PER_SEC, to = T0 + 30 * TB_NS_PER_SEC;
    struct collect c1 = {0};
    assert_int_equal(tb_store_each_request(fx->st, fx->tier[2], from, to, collect_cb, &c1), 0);
    size_t m = 0;
    for (size_t k = 0; k < fx->n; k++) {
        const struct tb_request *r = &fx->rq[o[k].i];
        if (r->tier != fx->tier[2] || r->arrival_ns >= to || r->departure_ns < from)
            continue;
        assert_true(m < c1.n);
        same_request(&c1.rq[m++], r, k);
    }
    assert_int_equal(m, c1.n);
    assert_true(m > 1000);
    free(c1.rq);
    free(c.rq);
    free(o);
}

/* ---- calls in flight, streamed ----------------------------------------------------------- */

static void test_busyacc(void **state)
{
    (void)state;
    /* By hand: windows of 10 ms from 0; calls [2, 5) and [4, 12) overlap into
     * [2, 12): 0.8 of window 0 and 0.2 of window 1; [25, 25) adds nothing,
     * [28, 40) runs past the 3 windows. */
    struct tb_request c[4] = {{.arrival_ns = 2 * MS, .departure_ns = 5 * MS},
                              {.arrival_ns = 4 * MS, .departure_ns = 12 * MS},
                              {.arrival_ns = 25 * MS, .departure_ns = 25 * MS},
                              {.arrival_ns = 28 * MS, .departure_ns = 40 * MS}};
    struct tb_busyacc *b;
    struct tb_window w[3] = {{.start_ns = 0, .width_ns = 10 * MS}};
    assert_int_equal(tb_busyacc_new(&b, 0, 10 * MS, 3), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tb_busyacc_add(b, &c[i]), 0);
    assert_int_equal(tb_busyacc_finish(b, w), 0);
    tb_busyacc_free(b);
    assert_true(fabs(w[0].calls_busy - 0.8) < 1e-12);
    assert_true(fabs(w[1].calls_busy - 0.2) < 1e-12);
    assert_true(fabs(w[2].calls_busy - 0.2) < 1e-12);
    /* calls_load counts the overlap twice: 3 + 6 call-ms in window 0. */
    assert_true(fabs(w[0].calls_load - 0.9) < 1e-12);
    assert_true(fabs(w[1].calls_load - 0.2) < 1e-12);
    assert_true(fabs(w[2].calls_load - 0.2) < 1e-12);
    /* Out of arrival order is refused. */
    assert_int_equal(tb_busyacc_new(&b, 0, 10 * MS, 3), 0);
    assert_int_equal(tb_busyacc_add(b, &c[1]), 0);
    assert_int_equal(tb_busyacc_add(b, &c[0]), TB_E_INVAL);
    tb_busyacc_free(b);
    /* Random overlapping calls, many ending at one instant: bit for bit what
     * the array form gives. */
    enum { N = 5000, NW = 400 };
    struct tb_request *r = calloc(N, sizeof *r);
    struct tb_window *wa = calloc(NW, sizeof *wa), *wb = calloc(NW, sizeof *wb);
    assert_true(r && wa && wb);
    int64_t t = 0;
    for (int i = 0; i < N; i++) {
        t += (int64_t)(unif() * 800e3);
        r[i].arrival_ns = t;
        r[i].departure_ns = i % 5 == 0 ? (t / MS + 3) * MS : t + (int64_t)(unif() * 6e6);
        if (i % 101 == 0)
            r[i].departure_ns = t - 1; /* skipped by both */
    }
    for (int k = 0; k < NW; k++) {
        wa[k].start_ns = wb[k].start_ns = 7 * MS + k * 10 * MS;
        wa[k].width_ns = wb[k].width_ns = 10 * MS;
    }
    assert_int_equal(tb_windows_calls_busy(wa, NW, r, N), 0);
    assert_int_equal(tb_busyacc_new(&b, 7 * MS, 10 * MS, NW), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(tb_busyacc_add(b, &r[i]), 0);
    assert_int_equal(tb_busyacc_finish(b, wb), 0);
    tb_busyacc_free(b);
    for (int k = 0; k < NW; k++)
        if (memcmp(&wa[k].calls_busy, &wb[k].calls_busy, sizeof(double)) ||
            memcmp(&wa[k].calls_load, &wb[k].calls_load, sizeof(double)))
            fail_msg("window %d: %.17g/%.17g streamed, %.17g/%.17g from the array", k,
                     wb[k].calls_busy, wb[k].calls_load, wa[k].calls_busy, wa[k].calls_load);
    free(r);
    free(wa);
    free(wb);
}

/* ---- the report pipeline, streamed ------------------------------------------------------ */

static void same_double(double a, double b, const char *what, size_t k)
{
    if (!(a == b || (isnan(a) && isnan(b))))
        fail_msg("%s [%zu]: %.17g streamed, %.17g from arrays", what, k, a, b);
}

/* Stored windows do not keep calls_busy (table windows has no column for it:
 * it only feeds the freeze rule, whose episodes are stored); comparing a
 * result read back from the store with one computed skips it. */
static bool skip_calls_busy;

static void same_result(const struct tb_analysis_result *s, const struct tb_analysis_result *a)
{
    assert_int_equal(s->a.requests, a->a.requests);
    assert_int_equal(s->a.from_ns, a->a.from_ns);
    assert_int_equal(s->a.to_ns, a->a.to_ns);
    assert_int_equal(s->a.work_unit_ns, a->a.work_unit_ns);
    same_double(s->a.n_star, a->a.n_star, "n_star", 0);
    same_double(s->a.n_star_fit, a->a.n_star_fit, "n_star_fit", 0);
    same_double(s->a.tp_max, a->a.tp_max, "tp_max", 0);
    same_double(s->a.congested_fraction, a->a.congested_fraction, "congested_fraction", 0);
    assert_int_equal(s->a.n_levels, a->a.n_levels);
    assert_int_equal(s->waits_downstream, a->waits_downstream);
    assert_int_equal(s->nwin, a->nwin);
    for (size_t k = 0; k < s->nwin; k++) {
        const struct tb_window *x = &s->win[k], *y = &a->win[k];
        assert_int_equal(x->start_ns, y->start_ns);
        assert_int_equal(x->server, y->server);
        assert_int_equal(x->completions, y->completions);
        same_double(x->load, y->load, "load", k);
        same_double(x->work_units, y->work_units, "work_units", k);
        same_double(x->norm_throughput, y->norm_throughput, "norm_throughput", k);
        same_double(x->rt_mean_ns, y->rt_mean_ns, "rt_mean_ns", k);
        same_double(x->rt_p95_ns, y->rt_p95_ns, "rt_p95_ns", k);
        if (!skip_calls_busy) {
            same_double(x->calls_busy, y->calls_busy, "calls_busy", k);
            same_double(x->calls_load, y->calls_load, "calls_load", k);
        }
    }
    assert_int_equal(s->nep, a->nep);
    for (size_t e = 0; e < s->nep; e++) {
        assert_int_equal(s->ep[e].start_ns, a->ep[e].start_ns);
        assert_int_equal(s->ep[e].end_ns, a->ep[e].end_ns);
        assert_int_equal(s->ep[e].kind, a->ep[e].kind);
        same_double(s->ep[e].mean_load, a->ep[e].mean_load, "episode mean_load", e);
    }
    assert_int_equal(s->nsvc, a->nsvc);
    for (size_t i = 0; i < s->nsvc; i++) {
        assert_int_equal(s->svc[i].class_id, a->svc[i].class_id);
        assert_int_equal(s->svc[i].period_start_ns, a->svc[i].period_start_ns);
        assert_int_equal(s->svc[i].service_ns, a->svc[i].service_ns);
        assert_int_equal(s->svc[i].samples, a->svc[i].samples);
        same_double(s->svc[i].units, a->svc[i].units, "units", i);
    }
}

struct feeds {
    struct tb_tierfeed *f[3];
};

static int feed_cb(void *u, const struct tb_request *r)
{
    struct feeds *fs = u;
    int rc = 0;
    for (int t = 0; t < 3 && !rc; t++)
        rc = tb_tierfeed_add(fs->f[t], r);
    return rc;
}

static void test_tierfeed_equals_arrays(void **state)
{
    struct fixture *fx = *state;
    struct tb_analyze_opts o = {.width_ns = 50 * MS, .from_ns = INT64_MIN, .to_ns = INT64_MAX,
                                .recompute = true};
    char err[256] = "";
    struct feeds fs;
    for (int t = 0; t < 3; t++)
        assert_int_equal(tb_tierfeed_new(&fs.f[t], fx->st, fx->cat, fx->tier[t], &o, err,
                                         sizeof err),
                         0);
    int64_t qf, qt;
    tb_analyze_query_range(o.from_ns, o.to_ns, o.width_ns, &qf, &qt);
    assert_int_equal(tb_store_each_request(fx->st, 0, qf, qt, feed_cb, &fs), 0);
    for (int t = 0; t < 3; t++)
        assert_int_equal(tb_tierfeed_mid(fs.f[t]), 0);
    assert_int_equal(tb_store_each_request(fx->st, 0, qf, qt, feed_cb, &fs), 0);
    bool congested = false, calls = false;
    for (int t = 0; t < 3; t++) {
        struct tb_analysis_result st, *ss, at, *as;
        size_t nss, nas;
        assert_int_equal(tb_tierfeed_finish(fs.f[t], &st, &ss, &nss), 0);
        tb_tierfeed_free(fs.f[t]);
        assert_int_equal(tb_analyze_tier_servers(fx->st, fx->cat, fx->tier[t], &o, &at, &as,
                                                 &nas, err, sizeof err),
                         0);
        same_result(&st, &at);
        assert_int_equal(nss, nas);
        for (size_t i = 0; i < nss; i++) {
            same_result(&ss[i], &as[i]);
            tb_analysis_result_free(&ss[i]);
            tb_analysis_result_free(&as[i]);
        }
        congested |= st.nep > 0;
        for (size_t k = 0; k < st.nwin; k++)
            calls |= st.win[k].calls_busy > 0;
        free(ss);
        free(as);
        tb_analysis_result_free(&st);
        tb_analysis_result_free(&at);
    }
    /* The comparison meant something: congestion and calls were there. */
    assert_true(congested);
    assert_true(calls);
    /* Overridden service times are the array pipeline's alone. */
    o.service_file = "x";
    struct tb_tierfeed *f;
    assert_int_equal(tb_tierfeed_new(&f, fx->st, fx->cat, fx->tier[0], &o, err, sizeof err),
                     TB_E_INVAL);
}

/* A feed resumed from an earlier feed's summary (diagnose's stored inputs)
 * finishes with exactly what two streamed passes give, and what the array
 * pipeline gives, without a request read; it refuses (TB_E_NOTFOUND) when the
 * analyses it relies on are not stored (--recompute) or the summary is of
 * another set of rows. */
static void test_tierfeed_resume(void **state)
{
    struct fixture *fx = *state;
    struct tb_analyze_opts o = {.width_ns = 50 * MS, .from_ns = INT64_MIN, .to_ns = INT64_MAX};
    char err[256] = "";
    struct feeds fs;
    for (int t = 0; t < 3; t++)
        assert_int_equal(tb_tierfeed_new(&fs.f[t], fx->st, fx->cat, fx->tier[t], &o, err,
                                         sizeof err),
                         0);
    int64_t qf, qt;
    tb_analyze_query_range(o.from_ns, o.to_ns, o.width_ns, &qf, &qt);
    assert_int_equal(tb_store_each_request(fx->st, 0, qf, qt, feed_cb, &fs), 0);
    /* The summaries, copied as diagnose keeps them. */
    struct tb_tierfeed_sum sum[3];
    for (int t = 0; t < 3; t++) {
        assert_int_equal(tb_tierfeed_mid(fs.f[t]), 0);
        struct tb_tierfeed_sum s;
        tb_tierfeed_summary(fs.f[t], &s);
        sum[t] = s;
        sum[t].count = malloc(s.nrows * sizeof *s.count);
        sum[t].svc = malloc((s.nsvc ? s.nsvc : 1) * sizeof *s.svc);
        assert_non_null(sum[t].count);
        assert_non_null(sum[t].svc);
        memcpy(sum[t].count, s.count, s.nrows * sizeof *s.count);
        memcpy(sum[t].svc, s.svc, s.nsvc * sizeof *s.svc);
        /* The rows' lives (the knee test's stretch rule) go with them. */
        assert_non_null(s.lives);
        struct tb_stretch *lv = malloc(s.nrows * sizeof *lv);
        assert_non_null(lv);
        memcpy(lv, s.lives, s.nrows * sizeof *lv);
        sum[t].lives = lv;
    }
    assert_int_equal(sum[1].nrows, 3); /* the tier and its two servers */
    assert_true(sum[1].ndown > 0);
    assert_int_equal(tb_store_each_request(fx->st, 0, qf, qt, feed_cb, &fs), 0);
    struct tb_analysis_result st[3], *ss[3];
    size_t nss[3];
    for (int t = 0; t < 3; t++) {
        assert_int_equal(tb_tierfeed_finish(fs.f[t], &st[t], &ss[t], &nss[t]), 0);
        tb_tierfeed_free(fs.f[t]);
    }
    for (int t = 0; t < 3; t++) {
        struct tb_tierfeed *f;
        struct tb_analysis_result rt, *rs, at, *as;
        size_t nrs, nas;
        assert_int_equal(tb_tierfeed_new(&f, fx->st, fx->cat, fx->tier[t], &o, err, sizeof err),
                         0);
        assert_int_equal(tb_tierfeed_resume(f, &sum[t]), 0);
        assert_int_equal(tb_tierfeed_requests(f), sum[t].count[0]);
        assert_int_equal(tb_tierfeed_finish(f, &rt, &rs, &nrs), 0);
        tb_tierfeed_free(f);
        assert_int_equal(tb_analyze_tier_servers(fx->st, fx->cat, fx->tier[t], &o, &at, &as,
                                                 &nas, err, sizeof err),
                         0);
        /* The arrays read the same stored analyses: everything equal. */
        same_result(&rt, &at);
        skip_calls_busy = true;
        same_result(&rt, &st[t]);
        skip_calls_busy = false;
        assert_int_equal(nrs, nss[t]);
        assert_int_equal(nrs, nas);
        for (size_t i = 0; i < nrs; i++) {
            same_result(&rs[i], &as[i]);
            skip_calls_busy = true;
            same_result(&rs[i], &ss[t][i]);
            skip_calls_busy = false;
            tb_analysis_result_free(&rs[i]);
            tb_analysis_result_free(&ss[t][i]);
            tb_analysis_result_free(&as[i]);
        }
        free(rs);
        free(ss[t]);
        free(as);
        tb_analysis_result_free(&rt);
        tb_analysis_result_free(&st[t]);
        tb_analysis_result_free(&at);
    }
    /* Nothing stored to rely on, or the rows of another tier: refused. */
    struct tb_tierfeed *f;
    o.recompute = true;
    assert_int_equal(tb_tierfeed_new(&f, fx->st, fx->cat, fx->tier[2], &o, err, sizeof err), 0);
    assert_int_equal(tb_tierfeed_resume(f, &sum[2]), TB_E_NOTFOUND);
    tb_tierfeed_free(f);
    o.recompute = false;
    assert_int_equal(tb_tierfeed_new(&f, fx->st, fx->cat, fx->tier[2], &o, err, sizeof err), 0);
    assert_int_equal(tb_tierfeed_resume(f, &sum[1]), TB_E_NOTFOUND);
    tb_tierfeed_free(f);
    for (int t = 0; t < 3; t++) {
        free(sum[t].count);
        free(sum[t].svc);
        free((void *)sum[t].lives);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_request_order, setup, teardown),
        cmocka_unit_test(test_busyacc),
        cmocka_unit_test_setup_teardown(test_tierfeed_equals_arrays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tierfeed_resume, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
