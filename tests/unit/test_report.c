/* SPDX-License-Identifier: MIT */
/* test_report.c — the report's text, JSON and CSV output, the plot script,
 * duration summaries and the subcommand option parser, on a hand-built
 * report whose every number is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyze.h"
#include "catalog.h"
#include "plot.h"
#include "report_fmt.h"
#include "report_util.h"

#define MS TB_NS_PER_MS
#define T0 (INT64_C(1700000000) * TB_NS_PER_SEC) /* 2023-11-14 22:13:20 UTC */

struct fixture {
    struct tb_catalog *cat;
    struct tb_report rep;
};

static char *capture_output(int (*fn)(FILE *, const struct tb_report *, const struct tb_catalog *),
                            const struct fixture *fx)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(fn(f, &fx->rep, fx->cat), 0);
    fclose(f);
    return buf;
}

/* The paper's Figure 7 mix at the report's end: a 30 ms and a 10 ms class
 * with a 10 ms work unit, i.e. 3 and 1 units. */
static struct tb_analysis_result make_result(uint32_t server, double n_star, double n_star_fit)
{
    struct tb_analysis_result r;
    memset(&r, 0, sizeof r);
    r.nwin = 6;
    r.win = calloc(r.nwin, sizeof *r.win);
    static const double load[6] = {1.0, 2.0, 3.5, 4.0, 0.5, 0.0};
    static const uint32_t comp[6] = {5, 10, 12, 0, 2, 0};
    for (size_t i = 0; i < r.nwin; i++) {
        r.win[i].start_ns = T0 + (int64_t)i * 50 * MS;
        r.win[i].width_ns = 50 * MS;
        r.win[i].tier = 1;
        r.win[i].server = server;
        r.win[i].load = load[i];
        r.win[i].completions = comp[i];
        r.win[i].throughput = comp[i] * 20.0;
        r.win[i].work_units = comp[i] * 2.0;
        r.win[i].norm_throughput = comp[i] * 40.0;
        r.win[i].rt_mean_ns = comp[i] ? 4e6 * (double)(i + 1) : 0;
    }
    r.a.tier = 1;
    r.a.server = server;
    r.a.width_ns = 50 * MS;
    r.a.from_ns = T0;
    r.a.to_ns = T0 + 300 * MS;
    r.a.requests = 29;
    r.a.n_star = n_star;
    r.a.n_star_fit = n_star_fit;
    r.a.n_star_why = TB_NSTAR_KNEE;
    snprintf(r.a.n_star_reason, sizeof r.a.n_star_reason, "knee shown \"here\"");
    r.a.tp_max = 480;
    r.a.slope = 200;
    r.a.work_unit_ns = 10 * MS;
    r.a.congested_fraction = 0.5;
    r.a.episodes_per_min = 200;
    r.a.n_levels = 2;
    r.a.levels[0] = 480;
    r.a.levels[1] = 250.5;
    r.nspans = 2;
    r.spans = calloc(2, sizeof *r.spans);
    r.spans[0] = (struct tb_level_span){T0 + 50 * MS, T0 + 100 * MS, 250.5, 1, 1};
    r.spans[1] = (struct tb_level_span){T0 + 100 * MS, T0 + 150 * MS, 480, 0, 1};
    r.nep = 2;
    r.ep = calloc(2, sizeof *r.ep);
    r.ep[0] = (struct tb_episode){T0 + 100 * MS, T0 + 150 * MS, 3.5, 3.5, 480, TB_EP_SATURATED};
    r.ep[1] = (struct tb_episode){T0 + 150 * MS, T0 + 200 * MS, 4.0, 4.0, 0, TB_EP_FREEZE};
    r.nsvc = 2;
    r.svc = calloc(2, sizeof *r.svc);
    r.svc[0] = (struct tb_class_service){1, 1, T0, 30 * MS, 3.0, 25, 9, TB_SVC_ISOLATED};
    r.svc[1] = (struct tb_class_service){1, 2, T0, 10 * MS, 1.0, 7, 20, TB_SVC_QUANTILE};
    return r;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    assert_int_equal(tb_catalog_new(&fx->cat), 0);
    uint32_t t, t2, s1, s2, c1, c2;
    assert_int_equal(tb_catalog_tier(fx->cat, "mysql", "mysql", &t), 0);
    assert_int_equal(tb_catalog_tier(fx->cat, "web", "http", &t2), 0);
    assert_int_equal(t, 1);
    struct tb_addr a;
    assert_int_equal(tb_addr_parse("10.0.0.5:3306", &a), 0);
    assert_int_equal(tb_catalog_server(fx->cat, t, &a, &s1), 0);
    assert_int_equal(tb_addr_parse("10.0.0.6:3306", &a), 0);
    assert_int_equal(tb_catalog_server(fx->cat, t, &a, &s2), 0);
    const char *q1 = "SELECT a, b FROM t WHERE id = ?", *q2 = "UPDATE t SET \"n\" = ?";
    assert_int_equal(tb_catalog_class(fx->cat, t, q1, strlen(q1), &c1), 0);
    assert_int_equal(tb_catalog_class(fx->cat, t, q2, strlen(q2), &c2), 0);
    assert_int_equal(c1, 1);
    assert_int_equal(c2, 2);

    struct tb_report *r = &fx->rep;
    r->tier = t;
    r->width_ns = 50 * MS;
    r->from_ns = INT64_MIN;
    r->to_ns = INT64_MAX;
    r->total = make_result(0, 2.5, 2.6);
    r->nservers = 1;
    r->servers = calloc(1, sizeof *r->servers);
    r->servers[0] = make_result(s1, NAN, 2.0);
    /* The server waits on calls: its self-load N* (from the diagnosis). */
    r->servers[0].have_self = true;
    r->servers[0].n_star_self = 1.25;
    r->front_tier = t2;
    r->nfront = 6;
    r->front_win = calloc(6, sizeof *r->front_win);
    memcpy(r->front_win, r->total.win, 6 * sizeof *r->front_win);
    r->ncorr = 2;
    r->corr = calloc(2, sizeof *r->corr);
    r->corr[0] = (struct tb_tier_corr){t, 0.875, 29};
    r->corr[1] = (struct tb_tier_corr){t2, NAN, 40};
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    tb_report_free(&fx->rep);
    tb_catalog_free(fx->cat);
    free(fx);
    return 0;
}

static void test_csv(void **state)
{
    struct fixture *fx = *state;
    char *out = capture_output(tb_report_write_csv, fx);
    assert_string_equal(
        out,
        "tier,server,start_ns,end_ns,duration_ns,peak_load,mean_load,throughput,kind\n"
        "mysql,*,1700000000100000000,1700000000150000000,50000000,3.5,3.5,480,saturated\n"
        "mysql,*,1700000000150000000,1700000000200000000,50000000,4,4,0,freeze\n"
        "mysql,10.0.0.5:3306,1700000000100000000,1700000000150000000,50000000,3.5,3.5,480,"
        "saturated\n"
        "mysql,10.0.0.5:3306,1700000000150000000,1700000000200000000,50000000,4,4,0,freeze\n");
    free(out);
}

static void test_json(void **state)
{
    struct fixture *fx = *state;
    char *out = capture_output(tb_report_write_json, fx);
    /* The head of the object, with the fields DESIGN.md makes binding. */
    const char *head =
        "{\"tier\":\"mysql\",\"proto\":\"mysql\",\"server\":\"*\",\"window_ns\":50000000,"
        "\"from_ns\":1700000000000000000,\"to_ns\":1700000000300000000,"
        "\"from\":\"2023-11-14T22:13:20.000000000Z\",\"to\":\"2023-11-14T22:13:20.300000000Z\","
        "\"requests\":29,"
        "\"windows\":6,\"n_star\":2.5,\"n_star_fit\":2.6000000000000001,"
        "\"n_star_disagree\":false,\"n_star_status\":\"knee\","
        "\"n_star_reason\":\"knee shown \\\"here\\\"\",\"n_star_self\":null,\"threshold\":2.5,\"tp_max\":480,\"slope\":200,"
        "\"work_unit_ns\":10000000,"
        "\"congested_fraction\":0.5,\"episodes_per_min\":200,\"levels\":[480,250.5],"
        "\"level_spans\":[{\"level\":1,\"start_ns\":1700000000050000000,"
        "\"end_ns\":1700000000100000000,\"start\":\"2023-11-14T22:13:20.050000000Z\","
        "\"end\":\"2023-11-14T22:13:20.100000000Z\",\"windows\":1,\"throughput\":250.5},"
        "{\"level\":0,\"start_ns\":1700000000100000000,\"end_ns\":1700000000150000000,"
        "\"start\":\"2023-11-14T22:13:20.100000000Z\",\"end\":\"2023-11-14T22:13:20.150000000Z\","
        "\"windows\":1,"
        "\"throughput\":480}],"
        "\"load\":{\"min\":0,\"mean\":1.8333333333333333,\"max\":4},"
        "\"throughput\":{\"min\":0,\"mean\":96.666666666666671,\"max\":240},"
        "\"norm_throughput\":{\"min\":0,\"mean\":193.33333333333334,\"max\":480},"
        "\"rt_ns\":{\"min\":4000000,\"mean\":11000000,\"max\":20000000},"
        "\"episode_durations\":{\"count\":2,\"min_ns\":50000000,\"p50_ns\":50000000,"
        "\"p90_ns\":50000000,\"max_ns\":50000000,\"histogram\":{\"<100ms\":2,\"100-200ms\":0,"
        "\"200-500ms\":0,\"500ms-1s\":0,\">=1s\":0}},"
        "\"episodes\":[{\"start_ns\":1700000000100000000,\"end_ns\":1700000000150000000,"
        "\"start\":\"2023-11-14T22:13:20.100000000Z\",\"end\":\"2023-11-14T22:13:20.150000000Z\","
        "\"duration_ns\":50000000,\"peak_load\":3.5,\"mean_load\":3.5,\"throughput\":480,"
        "\"kind\":\"saturated\"},{\"start_ns\":1700000000150000000,"
        "\"end_ns\":1700000000200000000,\"start\":\"2023-11-14T22:13:20.150000000Z\","
        "\"end\":\"2023-11-14T22:13:20.200000000Z\",\"duration_ns\":50000000,\"peak_load\":4,"
        "\"mean_load\":4,\"throughput\":0,\"kind\":\"freeze\"}],"
        "\"classes\":[{\"class\":\"UPDATE t SET \\\"n\\\" = ?\",\"period_start_ns\":"
        "1700000000000000000,\"period_start\":\"2023-11-14T22:13:20.000000000Z\",\"service_ns\":10000000,\"units\":1,\"samples\":7,"
        "\"requests\":20,\"method\":\"quantile\"},{\"class\":\"SELECT a, b FROM t WHERE id = ?\","
        "\"period_start_ns\":1700000000000000000,\"period_start\":"
        "\"2023-11-14T22:13:20.000000000Z\",\"service_ns\":30000000,\"units\":3,"
        "\"samples\":25,\"requests\":9,\"method\":\"isolated\"}],"
        "\"profile\":{\"requests\":0,\"total_ns\":0,\"classes\":[]},"
        "\"servers\":[{\"server\":\"10.0.0.5:3306\",\"requests\":29,\"windows\":6,"
        "\"n_star\":null,\"n_star_fit\":2,\"n_star_disagree\":false,\"n_star_status\":\"knee\","
        "\"n_star_reason\":\"knee shown \\\"here\\\"\",\"n_star_self\":1.25,\"threshold\":2,";
    assert_true(strlen(out) > strlen(head));
    if (strncmp(out, head, strlen(head)) != 0) {
        size_t i = 0;
        while (out[i] == head[i])
            i++;
        fail_msg("JSON differs at byte %zu:\n got: %.80s\nwant: %.80s", i, out + i, head + i);
    }
    const char *tail = "\"correlation\":{\"front_tier\":\"web\",\"explained_by\":\"mysql\","
                       "\"tiers\":[{\"tier\":\"mysql\","
                       "\"r\":0.875,\"requests\":29},{\"tier\":\"web\",\"r\":null,"
                       "\"requests\":40}]}}\n";
    assert_true(strlen(out) > strlen(tail));
    assert_string_equal(out + strlen(out) - strlen(tail), tail);
    free(out);
}

static void test_json_disagree(void **state)
{
    struct fixture *fx = *state;
    fx->rep.total.a.n_star_fit = 4.0; /* 60% more than 2.5 */
    fx->rep.total.a.disagree = true;  /* as correlate decides (the formats re-derive nothing) */
    char *out = capture_output(tb_report_write_json, fx);
    assert_non_null(strstr(out, "\"n_star\":2.5,\"n_star_fit\":4,\"n_star_disagree\":true,"));
    free(out);
    char *txt = capture_output(tb_report_write_text, fx);
    assert_non_null(strstr(txt, "warning: tier mysql: the two N* estimates disagree by 60% "
                                "(intervention 2.50, fit 4.00)"));
    free(txt);
}

static void test_text(void **state)
{
    struct fixture *fx = *state;
    char *out = capture_output(tb_report_write_text, fx);
    const char *want[] = {
        "tier mysql (mysql), window 50ms\n",
        "range 2023-11-14 22:13:20.000 .. 22:13:20.300 UTC (300ms, 6 windows)\n",
        "  tier mysql                    29    0.00   1.83    4.00      96.7    240.0     2.50"
        "    2.60      480.0    50.0%   200.0\n",
        "  10.0.0.5:3306                 29    0.00   1.83    4.00      96.7    240.0        -"
        "    2.00      480.0    50.0%   200.0\n",
        "note: 10.0.0.5:3306: only one N* estimate (fit) could be made\n",
        "note: 10.0.0.5:3306: waits on the tiers it calls; N* of its own resources, on "
        "self-load (load minus that waiting): 1.25\n",
        "work unit: 10ms",
        "top classes (2 of 2 by requests):\n",
        "  UPDATE t SET \"n\" = ?                           10ms    1.00        7        20  "
        "quantile\n",
        "  SELECT a, b FROM t WHERE id = ?                30ms    3.00       25         9  "
        "isolated\n",
        "congested (load >= 2.50): 50.0% of windows; 2 episodes (1 freeze, 1 saturated), 200.0 "
        "per minute\n",
        "episode durations: min 50ms, median 50ms, p90 50ms, max 50ms\n",
        "  <100ms: 2 | 100-200ms: 0 | 200-500ms: 0 | 500ms-1s: 0 | >=1s: 0\n",
        "throughput levels among congested windows: 2 (480.0, 250.5 work units/s): several "
        "plateaus",
        "  level 1: 480.0 work units/s (192% of the top), 1 interval, 50ms: 22:13:20.100 for "
        "50ms\n",
        "  level 2: 250.5 work units/s (100% of the top), 1 interval, 50ms: 22:13:20.050 for "
        "50ms\n",
        "response time of the front tier web per window: mean 11ms, max 20ms\n",
        "correlation of each tier's load with it:  mysql r=0.88  web r=-\n",
        "-> mysql's load explains the response-time spikes best (r=0.88)\n",
        "     1  22:13:20.100    +0.100s      50ms      3.50      3.50      480.0  saturated\n",
        "     2  22:13:20.150    +0.150s      50ms      4.00      4.00        0.0  freeze\n",
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(want); i++) {
        if (!strstr(out, want[i])) {
            /* cmocka truncates long messages: print both sides in full. */
            fprintf(stderr, "text report lacks:\n%s\n--- got ---\n%s", want[i], out);
            fail();
        }
    }
    /* One server: its episodes are the tier's and are not listed twice. */
    assert_null(strstr(out, "-- server"));
    /* Both estimates within 20%: no warning for the tier. */
    assert_null(strstr(out, "warning: tier mysql"));
    free(out);
}

/* The front tier's own load always follows its response time: it never
 * "explains" it; the strongest tier behind it does, when r >= 0.5. */
static void test_explains(void **state)
{
    struct fixture *fx = *state;
    struct tb_report *r = &fx->rep;
    assert_ptr_equal(tb_report_explains(r), &r->corr[0]);
    r->corr[1] = r->corr[0];
    r->corr[0] = (struct tb_tier_corr){r->front_tier, 0.99, 40};
    assert_ptr_equal(tb_report_explains(r), &r->corr[1]);
    r->corr[1].r = 0.49;
    assert_null(tb_report_explains(r));
    r->ncorr = 1;
    assert_null(tb_report_explains(r));
}

/* More episodes than the text lists: the longest 100, in time order. */
static void test_text_many_episodes(void **state)
{
    struct fixture *fx = *state;
    struct tb_analysis_result *t = &fx->rep.total;
    free(t->ep);
    t->nep = 250;
    t->ep = calloc(t->nep, sizeof *t->ep);
    for (size_t i = 0; i < t->nep; i++) {
        /* Every 5th episode lasts 100 ms, the others 50 ms: 50 long ones,
         * then the first 50 short ones by time. */
        int64_t d = (i % 5 == 0) ? 100 * MS : 50 * MS;
        t->ep[i] = (struct tb_episode){T0 + (int64_t)i * TB_NS_PER_SEC,
                                       T0 + (int64_t)i * TB_NS_PER_SEC + d, 3, 3, 100,
                                       TB_EP_SATURATED};
    }
    char *out = capture_output(tb_report_write_text, fx);
    assert_non_null(strstr(out, "episodes (the 100 longest of 250; --format csv lists all):\n"));
    size_t rows = 0, longr = 0;
    for (const char *p = out; (p = strstr(p, " saturated\n")) != NULL; p++) {
        rows++;
        const char *ls = p;
        while (ls > out && ls[-1] != '\n')
            ls--;
        longr += strstr(ls, "    100ms ") != NULL && strstr(ls, "    100ms ") < p;
    }
    assert_int_equal(rows, 100);
    assert_int_equal(longr, 50);
    /* Episode 246 (a long one) is listed, 245 (a short one after the first
     * 50 short ones) is not; rows keep their numbers, in time order. */
    assert_non_null(strstr(out, "   246  "));
    assert_null(strstr(out, "   245  "));
    assert_true(strstr(out, "     2  ") < strstr(out, "     6  "));
    free(out);
}

/* Without either N* nothing is congested, and the text and JSON say why in
 * the words correlate's knee test gave. */
static void test_text_no_threshold(void **state)
{
    struct fixture *fx = *state;
    fx->rep.total.a.n_star = NAN;
    fx->rep.total.a.n_star_fit = NAN;
    fx->rep.total.a.n_star_why = TB_NSTAR_LINEAR;
    snprintf(fx->rep.total.a.n_star_reason, sizeof fx->rep.total.a.n_star_reason,
             "no congestion: throughput still rises with load up to 4.00");
    assert_true(isnan(tb_analysis_threshold(&fx->rep.total.a)));
    char *out = capture_output(tb_report_write_text, fx);
    assert_non_null(
        strstr(out, "note: tier mysql: no congestion: throughput still rises with load up to "
                    "4.00\n"));
    assert_non_null(strstr(out, "congested: none; no congestion: throughput still rises with "
                                "load up to 4.00\n"));
    free(out);
    out = capture_output(tb_report_write_json, fx);
    assert_non_null(strstr(out, "\"n_star\":null,\"n_star_fit\":null,\"n_star_disagree\":false,"
                                "\"n_star_status\":\"no_congestion\",\"n_star_reason\":\"no "
                                "congestion: throughput still rises with load up to 4.00\","
                                "\"n_star_self\":null,\"threshold\":null,"));
    free(out);
    fx->rep.total.a.n_star_fit = 1.5;
    assert_true(tb_analysis_threshold(&fx->rep.total.a) == 1.5);
    out = capture_output(tb_report_write_text, fx);
    assert_non_null(strstr(out, "congested (load >= 1.50, the fit's N*): 50.0% of windows"));
    free(out);
}

static void test_dur_dist(void **state)
{
    (void)state;
    struct tb_episode ep[5];
    static const int64_t d[5] = {50, 250, 100, 1500, 600};
    for (int i = 0; i < 5; i++) {
        ep[i].start_ns = T0;
        ep[i].end_ns = T0 + d[i] * MS;
    }
    struct tb_dur_dist dd;
    tb_dur_dist(ep, 5, &dd);
    assert_int_equal(dd.n, 5);
    assert_int_equal(dd.min, 50 * MS);
    assert_int_equal(dd.p50, 250 * MS); /* nearest rank: 3rd of 5 */
    assert_int_equal(dd.p90, 1500 * MS);
    assert_int_equal(dd.max, 1500 * MS);
    size_t want[TB_DUR_BINS] = {1, 1, 1, 1, 1};
    for (int i = 0; i < TB_DUR_BINS; i++)
        assert_int_equal(dd.bins[i], want[i]);
    tb_dur_dist(ep, 0, &dd);
    assert_int_equal(dd.n, 0);
    assert_int_equal(dd.max, 0);
}

static void test_win_range(void **state)
{
    struct fixture *fx = *state;
    const struct tb_analysis_result *r = &fx->rep.total;
    struct tb_range g = tb_win_range(r->win, r->nwin, TB_COL_RT);
    /* Windows without completions have no response time: 4 of 6 count. */
    assert_true(g.min == 4e6 && g.max == 20e6 && g.mean == 11e6);
    g = tb_win_range(r->win, 0, TB_COL_LOAD);
    assert_true(isnan(g.min) && isnan(g.mean) && isnan(g.max));
}

static void test_plot_script(void **state)
{
    struct fixture *fx = *state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tb_plot_script(f, &fx->rep, fx->cat, "/tmp/it's.png", TB_PLOT_PNG), 0);
    fclose(f);
    /* Data rows: time (window middle), load, completions/s, units/s, RT ms,
     * state (0 normal, 1 congested = load >= N*, 2 freeze episode), front RT. */
    const char *data = "$D << EOD\n"
                       "0.025000 1 100 200 4 0 4\n"
                       "0.075000 2 200 400 8 0 8\n"
                       "0.125000 3.5 240 480 12 1 12\n"
                       "0.175000 4 0 0 NaN 2 NaN\n"
                       "0.225000 0.5 40 80 20 0 20\n"
                       "0.275000 0 0 0 NaN 0 NaN\n"
                       "EOD\n";
    assert_true(len > strlen(data));
    assert_memory_equal(buf, data, strlen(data));
    /* The front tier (web) differs from the tier, so its RT column is filled. */
    assert_non_null(strstr(buf, "set terminal pngcairo size 1800,1050"));
    assert_non_null(strstr(buf, "set output '/tmp/it''s.png'\n"));
    assert_non_null(strstr(buf, "set arrow 1 from graph 0, first 2.5 to graph 1, first 2.5"));
    assert_non_null(strstr(buf, "set arrow 3 from first 2.5, graph 0 to first 2.5, graph 1"));
    assert_non_null(strstr(buf, "set arrow 5 from graph 0, first 2.6 to graph 1, first 2.6"));
    assert_non_null(strstr(buf, "set arrow 6 from first 2.6, graph 0 to first 2.6, graph 1"));
    assert_non_null(strstr(buf, "set arrow 4 from graph 0, first 480 to graph 1, first 480"));
    assert_non_null(strstr(buf, "N* = 2.50 (fit 2.60), TPmax = 480 units/s, 50.0% congested"));
    assert_non_null(strstr(buf, "set ylabel 'normalized throughput (work units/s)'"));
    assert_non_null(strstr(buf, "front tier web"));
    /* Issue 16: N* (2.5) below the fit (2.6): its label under its line, the
     * fit's above, so they cannot overlap; completions/s on their own axis;
     * response times on a log scale (a 0.6 ms tier under a 180 ms front). */
    assert_non_null(strstr(buf, "set label 1 'N*' at graph 1.005, first 2.5 left offset 0,-0.6"));
    assert_non_null(strstr(buf, "set label 5 'fit' at graph 1.005, first 2.6 left offset 0,0.6"));
    assert_non_null(strstr(buf, "'' using 1:3 axes x1y2 with lines"));
    assert_non_null(strstr(buf, "set y2label 'completions/s'"));
    assert_non_null(strstr(buf, "set logscale y 10\n"));
    assert_true(strstr(buf, "unset logscale y\n") > strstr(buf, "set logscale y 10\n"));
    free(buf);

    /* No intervention N*, the fit's knee as the threshold: the title says so
     * (it said "N* undetermined" above the windows it marked congested). */
    struct tb_report fit_only = fx->rep;
    fit_only.total.a.n_star = NAN;
    f = open_memstream(&buf, &len);
    assert_int_equal(tb_plot_script(f, &fit_only, fx->cat, "/tmp/x.png", TB_PLOT_PNG), 0);
    fclose(f);
    assert_non_null(strstr(buf, "N* from the fit only = 2.60, TPmax = 480 units/s, 50.0% "
                                "congested"));
    assert_null(strstr(buf, "undetermined"));
    assert_non_null(strstr(buf, "0.125000 3.5 240 480 12 1 12\n")); /* still congested */
    free(buf);
    fit_only.total.a.n_star_fit = NAN;
    f = open_memstream(&buf, &len);
    assert_int_equal(tb_plot_script(f, &fit_only, fx->cat, "/tmp/x.png", TB_PLOT_PNG), 0);
    fclose(f);
    assert_non_null(strstr(buf, "N* undetermined, no congestion"));
    free(buf);

    assert_int_equal(tb_plot_format("a.PNG"), TB_PLOT_PNG);
    assert_int_equal(tb_plot_format("dir/a.svg"), TB_PLOT_SVG);
    assert_int_equal(tb_plot_format("a.gif"), -1);
    assert_int_equal(tb_plot_format(".png"), -1);
    char path[256];
    assert_int_equal(tb_plot_find("sh", path, sizeof path), 0);
    assert_int_equal(tb_plot_find("no-such-program-tbneck", path, sizeof path), TB_E_NOTFOUND);
}

static void test_cli_parse(void **state)
{
    (void)state;
    const char *tier = NULL, *win = "50ms";
    bool flag = false;
    const struct tb_cli_opt opts[] = {
        {"tier", &tier, NULL}, {"window", &win, NULL}, {"recompute", NULL, &flag}};
    char *a1[] = {"report", "--tier", "mysql", "--window=20ms", "--recompute"};
    assert_int_equal(tb_cli_parse(5, a1, 1, opts, 3, "report"), 0);
    assert_string_equal(tier, "mysql");
    assert_string_equal(win, "20ms");
    assert_true(flag);
    char *a2[] = {"report", "--tie", "x"};
    assert_int_equal(tb_cli_parse(3, a2, 1, opts, 3, "report"), TB_EXIT_USAGE);
    char *a3[] = {"report", "--tier"};
    assert_int_equal(tb_cli_parse(2, a3, 1, opts, 3, "report"), TB_EXIT_USAGE);
    char *a4[] = {"report", "--recompute=1"};
    assert_int_equal(tb_cli_parse(2, a4, 1, opts, 3, "report"), TB_EXIT_USAGE);
    char *a5[] = {"report", "stray"};
    assert_int_equal(tb_cli_parse(2, a5, 1, opts, 3, "report"), TB_EXIT_USAGE);
    char *a6[] = {"report", "--window="};
    assert_int_equal(tb_cli_parse(2, a6, 1, opts, 3, "report"), TB_EXIT_USAGE);
    char *a7[] = {"report", "--tier", "a", "-h"};
    assert_int_equal(tb_cli_parse(4, a7, 1, opts, 3, "report"), -1);
}

static void test_escaping(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tb_csv_field(f, "plain");
    fputc('|', f);
    tb_csv_field(f, "a,\"b\"");
    fputc('|', f);
    tb_json_str(f, "q\"\\\n\t\x01");
    fputc('|', f);
    tb_json_num(f, NAN);
    fputc('|', f);
    tb_json_num(f, 0.1);
    fclose(f);
    assert_string_equal(buf, "plain|\"a,\"\"b\"\"\"|\"q\\\"\\\\\\n\\t\\u0001\"|null|"
                             "0.10000000000000001");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_csv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_disagree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_win_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plot_script, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_many_episodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_no_threshold, setup, teardown),
        cmocka_unit_test(test_dur_dist),
        cmocka_unit_test(test_cli_parse),
        cmocka_unit_test(test_escaping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
