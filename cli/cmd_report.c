/* SPDX-License-Identifier: MIT */
/* cmd_report.c — `tbneck report`: analyses one tier and prints it as text,
 * JSON or the episode CSV, optionally drawing it with gnuplot. */
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "jsonl.h"
#include "plot.h"
#include "report_fmt.h"
#include "report_util.h"

static const char report_usage[] =
    "usage: tbneck report --tier NAME [--window " TB_WINDOW_DEFAULT "|auto] [--server ADDR:PORT]"
    " [--from T --to T]\n"
    "                     [--format text|json|csv|jsonl] [--profile] [--plot FILE.png|svg]\n"
    "                     [--service-times FILE | --calibrate CAPTURE] [--recompute]\n"
    "                     [--db FILE | --store URL]\n"
    "\n"
    "Analyses a tier (or one of its servers) at a window length: load and throughput per\n"
    "window, service times and the work unit, the congestion point N* (intervention\n"
    "analysis and a least-squares fit), TPmax, congested windows and episodes.\n"
    "\n"
    "  --format text   for people (default)\n"
    "  --format json   one JSON object (fields in docs/report.md)\n"
    "  --format jsonl  JSON lines: per row (the tier, then each server) an analysis line,\n"
    "                  its windows and its episodes in time order (docs/web.md)\n"
    "  --format csv    the episode list, header\n"
    "                  " TB_EPISODE_CSV_HEADER "\n"
    "  --profile       only the per-class response-time profile of the requests completed in\n"
    "                  the range (count, total, share, mean, p50/p95/p99, max; ranked by total\n"
    "                  time, as pt-query-digest's profile) as text, json or csv, header\n"
    "                  " TB_PROFILE_CSV_HEADER "\n"
    "  --plot FILE     one image: load, throughput and response-time timelines and the\n"
    "                  load vs normalized throughput scatter (needs gnuplot on PATH)\n"
    "  --service-times FILE  lines 'CLASS<TAB>SERVICE' (class fingerprint as the report\n"
    "                  prints it; service as 30ms or 250us, a bare number is ms; # comments)\n"
    "  --calibrate CAPTURE   a pcap taken at low load to estimate service times from\n"
    "  --recompute     ignore results stored by an earlier run\n"
    TB_CLI_TIME_HELP
    "Exit status: 0 success, 1 runtime failure (missing database, unknown tier), 2 usage.\n";

/* The tier (or the one --server) and then each of its servers. */
static int report_jsonl(const struct tb_report *rep, const struct tb_catalog *cat, const char *tier)
{
    char sbuf[TB_ADDR_STRLEN] = "*";
    const struct tb_server_info *si =
        rep->total.a.server ? tb_catalog_server_get(cat, rep->total.a.server) : NULL;
    if (si)
        tb_addr_fmt(&si->addr, sbuf, sizeof sbuf);
    int e = tb_jsonl_result(stdout, tier, sbuf, &rep->total);
    for (size_t i = 0; !e && i < rep->nservers; i++) {
        si = tb_catalog_server_get(cat, rep->servers[i].a.server);
        tb_addr_fmt(&si->addr, sbuf, sizeof sbuf);
        e = tb_jsonl_result(stdout, tier, sbuf, &rep->servers[i]);
    }
    return e;
}

/* --profile: the profile alone; fmt 0 text, 1 JSON, 2 CSV. */
static int write_profile(const struct tb_report *rep, const struct tb_catalog *cat,
                         const char *tier, int fmt)
{
    char sbuf[TB_ADDR_STRLEN] = "*";
    const struct tb_server_info *si =
        rep->total.a.server ? tb_catalog_server_get(cat, rep->total.a.server) : NULL;
    if (si)
        tb_addr_fmt(&si->addr, sbuf, sizeof sbuf);
    if (fmt == 2) {
        tb_profile_write_csv(stdout, rep, cat, tier, sbuf);
    } else if (fmt == 1) {
        fputs("{\"tier\":", stdout);
        tb_json_str(stdout, tier);
        fputs(",\"server\":", stdout);
        tb_json_str(stdout, sbuf);
        fputs(",\"profile\":", stdout);
        tb_profile_write_json(stdout, rep, cat);
        fputs("}\n", stdout);
    } else {
        printf("tier %s, server %s", tier, sbuf);
        tb_profile_write_text(stdout, rep, cat, 0);
    }
    if (ferror(stdout) || fflush(stdout) != 0) {
        tb_log_error("report: cannot write the profile to stdout");
        return TB_EXIT_FAIL;
    }
    return TB_EXIT_OK;
}

int tb_cmd_report(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB, *window = TB_WINDOW_DEFAULT, *server = NULL;
    const char *from = NULL, *to = NULL, *format = "text", *plot = NULL, *svcfile = NULL;
    const char *calibrate = NULL, *store = NULL;
    bool recompute = false, profile = false;
    const struct tb_cli_opt opts[] = {
        {"tier", &tier, NULL},
        {"profile", NULL, &profile},
        {"db", &dbpath, NULL},
        {"store", &store, NULL},
        {"window", &window, NULL},
        {"server", &server, NULL},
        {"from", &from, NULL},
        {"to", &to, NULL},
        {"format", &format, NULL},
        {"plot", &plot, NULL},
        {"service-times", &svcfile, NULL},
        {"calibrate", &calibrate, NULL},
        {"recompute", NULL, &recompute},
    };
    int rc;
    if (tb_cli_args(argc, argv, 1, opts, TB_ARRAY_SIZE(opts), "report", report_usage, &rc))
        return rc;
    if (!tier) {
        tb_log_error("report: --tier NAME is required (see 'tbneck tiers' for the names)");
        return TB_EXIT_USAGE;
    }
    enum { F_TEXT, F_JSON, F_CSV, F_JSONL } fmt;
    if (!strcmp(format, "text")) {
        fmt = F_TEXT;
    } else if (!strcmp(format, "json")) {
        fmt = F_JSON;
    } else if (!strcmp(format, "csv")) {
        fmt = F_CSV;
    } else if (!strcmp(format, "jsonl")) {
        fmt = F_JSONL;
    } else {
        tb_log_error("--format '%s': expected text, json, csv or jsonl", format);
        return TB_EXIT_USAGE;
    }
    struct tb_analyze_opts o = {.from_ns = INT64_MIN, .to_ns = INT64_MAX};
    bool window_auto = !strcmp(window, "auto");
    if (window_auto)
        o.width_ns = 50 * TB_NS_PER_MS; /* until the choice is made */
    else if (tb_parse_window(window, &o.width_ns) != 0) {
        tb_log_error("--window '%s': expected a duration from 1ms to 1h, such as 50ms, or auto",
                     window);
        return TB_EXIT_USAGE;
    }
    if (profile && (fmt == F_JSONL || plot)) {
        tb_log_error("report: --profile prints one table (text, json or csv), not %s",
                     plot ? "a plot" : "JSON lines");
        return TB_EXIT_USAGE;
    }
    if (svcfile && calibrate) {
        tb_log_error("report: --service-times and --calibrate exclude each other");
        return TB_EXIT_USAGE;
    }
    if (plot && tb_plot_format(plot) < 0) {
        tb_log_error("--plot %s: the file name must end in .png or .svg", plot);
        return TB_EXIT_USAGE;
    }
    /* Fail before a long analysis, not after it. */
    char gp[4096];
    if (plot && tb_plot_find("gnuplot", gp, sizeof gp) != 0) {
        tb_log_error("gnuplot not found: install the gnuplot-nox package");
        return TB_EXIT_FAIL;
    }
    o.service_file = svcfile;
    o.calibrate = calibrate;
    o.recompute = recompute;

    struct tb_cli_db db;
    if ((rc = tb_cli_db_open_store(&db, dbpath, store, false)) != 0)
        return rc;
    struct tb_report rep;
    memset(&rep, 0, sizeof rep);
    uint32_t tid;
    if ((rc = tb_cli_target(&db, tier, server, from, to, &tid, &o)) != 0)
        goto out;

    char err[512] = "";
    struct tb_window_choice wc;
    if (window_auto) {
        int e = tb_analyze_window_auto(db.st, db.cat, tid, &o, &wc, err, sizeof err);
        if (e) {
            tb_log_error("report: --window auto: %s", err[0] ? err : tb_strerror(e));
            rc = TB_EXIT_FAIL;
            goto out;
        }
        o.width_ns = wc.width_ns;
    }
    int e = tb_report_build(db.st, db.cat, tid, &o, &rep, err, sizeof err);
    if (!e && window_auto)
        snprintf(rep.window_reason, sizeof rep.window_reason, "%s", wc.reason);
    if (e) {
        tb_log_error("report: %s", err[0] ? err : tb_strerror(e));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    if (profile) {
        rc = write_profile(&rep, db.cat, tier, fmt == F_TEXT ? 0 : fmt == F_JSON ? 1 : 2);
        goto out;
    }
    if (fmt != F_CSV && fmt != F_JSONL) {
        /* The cross-tier line is the diagnosis of the same range. */
        struct tb_diag_opts dopt = {.width_ns = o.width_ns, .from_ns = o.from_ns,
                                    .to_ns = o.to_ns, .recompute = recompute,
                                    .critical_path = true};
        struct tb_diagnosis dg;
        char derr[512] = "";
        if (tb_diagnose(db.st, db.cat, &dopt, &dg, derr, sizeof derr) == 0) {
            rep.have_verdict = true;
            rep.verdict = dg.verdict;
            /* The critical path moves to the report. */
            rep.have_cp = dg.have_cp;
            rep.cp = dg.cp;
            dg.have_cp = false;
            /* A tier that waits on its calls: its own resources' N* is the
             * one on self-load (load N* is cores x R/D there, and smeared). */
            if (rep.total.waits_downstream) {
                for (size_t i = 0; i < dg.ntiers && !rep.total.a.server; i++)
                    if (dg.tiers[i].tier == rep.tier) {
                        rep.total.have_self = true;
                        rep.total.n_star_self = dg.tiers[i].n_star_self;
                    }
                for (size_t i = 0; i < dg.nservers; i++) {
                    if (dg.servers[i].server == rep.total.a.server && rep.total.a.server) {
                        rep.total.have_self = true;
                        rep.total.n_star_self = dg.servers[i].n_star_self;
                    }
                    for (size_t k = 0; k < rep.nservers; k++)
                        if (dg.servers[i].server == rep.servers[k].a.server) {
                            rep.servers[k].have_self = true;
                            rep.servers[k].n_star_self = dg.servers[i].n_star_self;
                        }
                }
            }
            tb_diagnosis_free(&dg);
        } else {
            tb_log_warn("report: no root cause: %s", derr);
        }
    }
    if (plot && !rep.total.nwin) {
        /* Say so before printing anything: the command fails as a whole. */
        tb_log_error("--plot %s: nothing to draw, tier '%s' has no requests in the range", plot,
                     tier);
        rc = TB_EXIT_FAIL;
        goto out;
    }
    tb_cli_warn_partial(db.st, "report", o.from_ns, o.to_ns);
    if (fmt == F_JSONL)
        e = report_jsonl(&rep, db.cat, tier);
    else if (fmt == F_JSON)
        e = tb_report_write_json(stdout, &rep, db.cat);
    else if (fmt == F_CSV)
        e = tb_report_write_csv(stdout, &rep, db.cat);
    else
        e = tb_report_write_text(stdout, &rep, db.cat);
    if (!e && fflush(stdout) != 0)
        e = TB_E_IO;
    if (e) {
        tb_log_error("report: cannot write the report to stdout: %s", tb_strerror(e));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    if (plot) {
        err[0] = '\0';
        e = tb_plot_report(&rep, db.cat, plot, err, sizeof err);
        if (e) {
            tb_log_error("%s", err);
            rc = TB_EXIT_FAIL;
            goto out;
        }
        if (fmt == F_TEXT)
            printf("\nplot: %s\n", plot);
    }
out:
    tb_report_free(&rep);
    tb_cli_db_close(&db);
    return rc;
}
