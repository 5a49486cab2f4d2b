/* SPDX-License-Identifier: MIT */
/* test_report_pipeline.c — the analysis pipeline end to end on a database:
 * the paper's Figure 7 classes (30 ms and 10 ms) stored as requests, then the
 * service times, the work unit (10 ms), the units (3 and 1), the normalized
 * windows, the report's class table, stored-result reuse and a second window
 * width that adds to the first. */
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
#include "report_fmt.h"
#include "store.h"

#define MS TB_NS_PER_MS
#define T0 (INT64_C(1700000000) * TB_NS_PER_SEC)
#define NREQ 60

struct fixture {
    char dir[64], path[96];
    struct tb_store *st;
    struct tb_catalog *cat;
    uint32_t tier, server, cls[2];
    struct tb_request rq[NREQ];
};

/* Requests one after the other (each alone in the server: isolated), class
 * A (30 ms) and B (10 ms) alternating, 5 ms apart. */
static void make_requests(struct fixture *fx)
{
    int64_t t = T0 + 2 * MS;
    for (int i = 0; i < NREQ; i++) {
        struct tb_request *r = &fx->rq[i];
        memset(r, 0, sizeof *r);
        int64_t d = (i % 2 == 0) ? 30 * MS : 10 * MS;
        r->arrival_ns = t;
        r->departure_ns = t + d;
        r->conn = 1;
        r->req_bytes = 100;
        r->resp_bytes = 1000;
        assert_int_equal(tb_addr_parse("10.0.0.9:40000", &r->client), 0);
        r->tier = fx->tier;
        r->server = fx->server;
        r->class_id = fx->cls[i % 2];
        r->status = 200;
        t += d + 5 * MS;
    }
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/tb_test_report_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof fx->path, "%s/t.db", fx->dir);
    char err[256];
    assert_int_equal(tb_store_open(&fx->st, fx->path, TB_STORE_CREATE, err, sizeof err), 0);
    assert_int_equal(tb_catalog_new(&fx->cat), 0);
    assert_int_equal(tb_catalog_tier(fx->cat, "app", "http", &fx->tier), 0);
    struct tb_addr a;
    assert_int_equal(tb_addr_parse("10.0.0.1:8080", &a), 0);
    assert_int_equal(tb_catalog_server(fx->cat, fx->tier, &a, &fx->server), 0);
    assert_int_equal(tb_catalog_class(fx->cat, fx->tier, "GET /req1", 9, &fx->cls[0]), 0);
    assert_int_equal(tb_catalog_class(fx->cat, fx->tier, "GET /req2", 9, &fx->cls[1]), 0);
    make_requests(fx);
    int64_t cap;
    struct tb_writer *w;
    assert_int_equal(tb_store_capture_begin(fx->st, "fig7", &cap), 0);
    assert_int_equal(tb_writer_start(&w, fx->st, cap), 0);
    assert_int_equal(tb_writer_catalog(w, fx->cat), 0);
    for (int i = 0; i < NREQ; i++)
        assert_int_equal(tb_writer_request(w, &fx->rq[i]), 0);
    assert_int_equal(tb_writer_finish(w), 0);
    /* Read back the way the CLI does: a fresh catalog from the file. */
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
    free(fx);
    return 0;
}

/* Work units completed in each window of `width` from `w0`, computed here
 * from the requests: class A is worth 3 units, B 1. */
static void expected_units(const struct fixture *fx, int64_t w0, int64_t width, double *units,
                           uint32_t *comp, size_t n)
{
    memset(units, 0, n * sizeof *units);
    memset(comp, 0, n * sizeof *comp);
    for (int i = 0; i < NREQ; i++) {
        size_t k = (size_t)((fx->rq[i].departure_ns - w0) / width);
        assert_true(k < n);
        units[k] += (i % 2 == 0) ? 3.0 : 1.0;
        comp[k]++;
    }
}

static void check_windows(const struct fixture *fx, const struct tb_analysis_result *r,
                          int64_t width)
{
    int64_t last = fx->rq[NREQ - 1].departure_ns;
    size_t n = (size_t)((last - T0) / width) + 1;
    assert_int_equal(r->nwin, n);
    double *units = calloc(n, sizeof *units);
    uint32_t *comp = calloc(n, sizeof *comp);
    expected_units(fx, T0, width, units, comp, n);
    for (size_t k = 0; k < n; k++) {
        const struct tb_window *w = &r->win[k];
        assert_int_equal(w->start_ns, T0 + (int64_t)k * width);
        assert_int_equal(w->width_ns, width);
        assert_int_equal(w->completions, comp[k]);
        if (fabs(w->work_units - units[k]) > 1e-9)
            fail_msg("window %zu: %.17g work units, expected %.17g", k, w->work_units, units[k]);
        double secs = (double)width / 1e9;
        assert_true(fabs(w->norm_throughput - units[k] / secs) < 1e-6);
    }
    free(units);
    free(comp);
}

static void check_services(const struct fixture *fx, const struct tb_analysis_result *r)
{
    assert_int_equal(r->a.work_unit_ns, 10 * MS);
    assert_int_equal(r->nsvc, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct tb_class_service *s = &r->svc[i];
        bool a = s->class_id == fx->cls[0];
        assert_true(a || s->class_id == fx->cls[1]);
        assert_int_equal(s->tier, fx->tier);
        assert_int_equal(s->service_ns, a ? 30 * MS : 10 * MS);
        assert_true(s->units == (a ? 3.0 : 1.0));
        assert_int_equal(s->samples, NREQ / 2);
        assert_int_equal(s->requests, NREQ / 2);
        assert_int_equal(s->method, TB_SVC_ISOLATED);
    }
}

static void test_fig7_pipeline(void **state)
{
    struct fixture *fx = *state;
    struct tb_analyze_opts o = {.width_ns = 100 * MS, .from_ns = INT64_MIN, .to_ns = INT64_MAX};
    struct tb_analysis_result r;
    char err[256] = "";
    assert_int_equal(tb_analyze_tier(fx->st, fx->cat, fx->tier, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.a.requests, NREQ);
    assert_int_equal(r.a.from_ns, T0);
    check_services(fx, &r);
    check_windows(fx, &r, 100 * MS);

    /* Again: served from the stored analysis, the same numbers. */
    struct tb_analysis_result r2;
    assert_int_equal(tb_analyze_tier(fx->st, fx->cat, fx->tier, &o, &r2, err, sizeof err), 0);
    check_services(fx, &r2);
    check_windows(fx, &r2, 100 * MS);
    assert_int_equal(r2.a.requests, r.a.requests);
    assert_int_equal(r2.nep, r.nep);
    assert_true(r2.a.n_star == r.a.n_star || (isnan(r2.a.n_star) && isnan(r.a.n_star)));
    tb_analysis_result_free(&r2);

    /* Another width adds its own windows; the 100 ms ones stay. */
    struct tb_analyze_opts o50 = o;
    o50.width_ns = 50 * MS;
    assert_int_equal(tb_analyze_tier(fx->st, fx->cat, fx->tier, &o50, &r2, err, sizeof err), 0);
    check_windows(fx, &r2, 50 * MS);
    struct tb_window *w = NULL;
    size_t n = 0;
    assert_int_equal(
        tb_store_get_windows(fx->st, fx->tier, 0, 100 * MS, INT64_MIN, INT64_MAX, &w, &n), 0);
    assert_int_equal(n, r.nwin);
    for (size_t k = 0; k < n; k++)
        assert_true(w[k].work_units == r.win[k].work_units && w[k].load == r.win[k].load);
    free(w);
    assert_int_equal(
        tb_store_get_windows(fx->st, fx->tier, 0, 50 * MS, INT64_MIN, INT64_MAX, &w, &n), 0);
    assert_int_equal(n, r2.nwin);
    free(w);
    tb_analysis_result_free(&r2);
    tb_analysis_result_free(&r);
}

static void test_fig7_report_text(void **state)
{
    struct fixture *fx = *state;
    struct tb_analyze_opts o = {.width_ns = 100 * MS, .from_ns = INT64_MIN, .to_ns = INT64_MAX};
    struct tb_report rep;
    char err[256] = "";
    assert_int_equal(tb_report_build(fx->st, fx->cat, fx->tier, &o, &rep, err, sizeof err), 0);
    assert_int_equal(rep.nservers, 1);
    assert_int_equal(rep.front_tier, fx->tier);
    check_services(fx, &rep.total);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tb_report_write_text(f, &rep, fx->cat), 0);
    fclose(f);
    const char *want[] = {
        "work unit: 10ms",
        "top classes (2 of 2 by requests):\n",
        "  GET /req1                                      30ms    3.00       30        30  "
        "isolated\n",
        "  GET /req2                                      10ms    1.00       30        30  "
        "isolated\n",
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(want); i++) {
        if (!strstr(buf, want[i])) {
            fprintf(stderr, "report lacks:\n%s\n--- got ---\n%s", want[i], buf);
            fail();
        }
    }
    free(buf);
    tb_report_free(&rep);
}

/* A range that holds no request: no windows, not an error. */
static void test_empty_range(void **state)
{
    struct fixture *fx = *state;
    struct tb_analyze_opts o = {.width_ns = 50 * MS, .from_ns = T0 + 3600 * TB_NS_PER_SEC,
                                .to_ns = T0 + 3601 * TB_NS_PER_SEC};
    struct tb_analysis_result r;
    char err[256] = "";
    assert_int_equal(tb_analyze_tier(fx->st, fx->cat, fx->tier, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.nwin, 0);
    assert_int_equal(r.a.requests, 0);
    tb_analysis_result_free(&r);
    o.width_ns = 0;
    assert_int_equal(tb_analyze_tier(fx->st, fx->cat, fx->tier, &o, &r, err, sizeof err),
                     TB_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fig7_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fig7_report_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_range, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
