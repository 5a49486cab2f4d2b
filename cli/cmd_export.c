/* SPDX-License-Identifier: MIT */
/* cmd_export.c — `tbneck export requests|windows`: stored records and analysis
 * windows as CSV on stdout, in the layouts DESIGN.md fixes for scripts. */
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "report_util.h"

static const char export_usage[] =
    "usage: tbneck export requests [--tier NAME] [--db FILE]\n"
    "       tbneck export windows --tier NAME [--window " TB_WINDOW_DEFAULT "]"
    " [--server ADDR:PORT]\n"
    "                             [--from T --to T] [--service-times FILE] [--db FILE]\n"
    "\n"
    "requests: every stored request as CSV, header\n"
    "  tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags\n"
    "windows: the per-window analysis as CSV, header\n"
    "  tier,server,start_ns,width_ns,load,completions,throughput,work_units,norm_throughput,"
    "rt_mean_ns\n"
    "  (server '*' = the tier as a whole; throughputs per second; windows aligned to\n"
    "  multiples of the width since the epoch).\n"
    "T is ns since the epoch, seconds (1700000000.25), or +OFFSET from the first request.\n";

static int export_requests(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB;
    const struct tb_cli_opt opts[] = {{"tier", &tier, NULL}, {"db", &dbpath, NULL}};
    int rc = tb_cli_parse(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "export requests");
    if (rc < 0) {
        fputs(export_usage, stdout);
        return TB_EXIT_OK;
    }
    if (rc)
        return rc;
    struct tb_cli_db db;
    if ((rc = tb_cli_db_open(&db, dbpath, true)) != 0)
        return rc;
    uint32_t tid;
    if (tier && (rc = tb_cli_tier(db.cat, tier, &tid)) != 0)
        goto out;
    int err = tb_store_export_requests(db.st, tier, stdout);
    if (!err && fflush(stdout) != 0)
        err = TB_E_IO;
    if (err) {
        tb_log_error("export requests from %s: %s", dbpath, tb_strerror(err));
        rc = TB_EXIT_FAIL;
    }
out:
    tb_cli_db_close(&db);
    return rc;
}

static void print_windows(FILE *f, const char *tier, const char *server,
                          const struct tb_window *w, size_t n)
{
    fputs("tier,server,start_ns,width_ns,load,completions,throughput,work_units,norm_throughput,"
          "rt_mean_ns\n",
          f);
    for (size_t i = 0; i < n; i++) {
        tb_csv_field(f, tier);
        fputc(',', f);
        tb_csv_field(f, server);
        /* %.17g so a script reading the CSV gets back the exact double. */
        fprintf(f, ",%lld,%lld,%.17g,%u,%.17g,%.17g,%.17g,%.17g\n", (long long)w[i].start_ns,
                (long long)w[i].width_ns, w[i].load, w[i].completions, w[i].throughput,
                w[i].work_units, w[i].norm_throughput, w[i].rt_mean_ns);
    }
}

static int export_windows(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB, *window = TB_WINDOW_DEFAULT, *server = NULL;
    const char *from = NULL, *to = NULL, *svcfile = NULL;
    bool recompute = false;
    const struct tb_cli_opt opts[] = {
        {"tier", &tier, NULL},       {"db", &dbpath, NULL},   {"window", &window, NULL},
        {"server", &server, NULL},   {"from", &from, NULL},   {"to", &to, NULL},
        {"service-times", &svcfile, NULL}, {"recompute", NULL, &recompute},
    };
    int rc = tb_cli_parse(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "export windows");
    if (rc < 0) {
        fputs(export_usage, stdout);
        return TB_EXIT_OK;
    }
    if (rc)
        return rc;
    if (!tier) {
        tb_log_error("export windows: --tier NAME is required (see 'tbneck tiers')");
        return TB_EXIT_USAGE;
    }
    struct tb_analyze_opts o = {.from_ns = INT64_MIN, .to_ns = INT64_MAX};
    if (tb_parse_duration(window, TB_NS_PER_MS, &o.width_ns) != 0 || o.width_ns <= 0) {
        tb_log_error("--window '%s': expected a positive duration such as 50ms or 1s", window);
        return TB_EXIT_USAGE;
    }
    o.service_file = svcfile;
    o.recompute = recompute;

    struct tb_cli_db db;
    if ((rc = tb_cli_db_open(&db, dbpath, false)) != 0)
        return rc;
    uint32_t tid;
    struct tb_analysis_result res;
    memset(&res, 0, sizeof res);
    if ((rc = tb_cli_target(&db, tier, server, from, to, &tid, &o)) != 0)
        goto out;
    char err[512] = "";
    int e = tb_analyze_tier(db.st, db.cat, tid, &o, &res, err, sizeof err);
    if (e) {
        tb_log_error("%s", err[0] ? err : tb_strerror(e));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    char sbuf[TB_ADDR_STRLEN] = "*";
    if (o.server) {
        const struct tb_server_info *sv = tb_catalog_server_get(db.cat, o.server);
        tb_addr_fmt(&sv->addr, sbuf, sizeof sbuf);
    }
    print_windows(stdout, tier, sbuf, res.win, res.nwin);
    if (fflush(stdout) != 0) {
        tb_log_error("export windows: cannot write to stdout");
        rc = TB_EXIT_FAIL;
    }
out:
    tb_analysis_result_free(&res);
    tb_cli_db_close(&db);
    return rc;
}

int tb_cmd_export(int argc, char **argv)
{
    if (argc < 2) {
        tb_log_error("export: what to export? 'requests' or 'windows' (see 'tbneck export "
                     "--help')");
        return TB_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(export_usage, stdout);
        return TB_EXIT_OK;
    }
    if (!strcmp(argv[1], "requests"))
        return export_requests(argc, argv);
    if (!strcmp(argv[1], "windows"))
        return export_windows(argc, argv);
    tb_log_error("export: unknown kind '%s' (expected 'requests' or 'windows')", argv[1]);
    return TB_EXIT_USAGE;
}
