/* SPDX-License-Identifier: MIT */
/* cmd_whatif.c — `tbneck whatif`: the front tier's response time and
 * throughput forecast for one change (analysis/whatif.c computes; this file
 * parses and prints, docs/whatif.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "report_util.h"
#include "whatif.h"

static const char whatif_usage[] =
    "usage: tbneck whatif --tier NAME (--speedup X | --cores N | --pool N)\n"
    "                     [--server ADDR:PORT] [--format text|json] [--db FILE]\n"
    "\n"
    "Forecasts the front tier's response time (mean, p50, p95, p99) and throughput\n"
    "for the same workload with one change to tier NAME (or one --server of it):\n"
    "  --speedup X  its CPUs X times as fast (X > 0)\n"
    "  --cores N    N cores per server\n"
    "  --pool N     N connections in each of its servers' pools to the tier it calls\n"
    "A closed queueing model when users think between requests on keep-alive\n"
    "connections, an open one otherwise (the output says which and why).\n"
    "Exit status: 0 done, 1 runtime failure, 2 usage error or a change the data\n"
    "cannot answer (a tier no one calls, --pool on a tier without a pool).\n";

static bool positive(const char *s, double *v, bool integer)
{
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !(x > 0) || x > 1e6)
        return false;
    if (integer && (x != (double)(long)x))
        return false;
    *v = x;
    return true;
}

static void stats_json(FILE *f, const struct tb_whatif_stats *s)
{
    fputs("{\"rt_mean_ns\": ", f);
    tb_json_num(f, s->rt_mean_ns);
    fputs(", \"rt_p50_ns\": ", f);
    tb_json_num(f, s->rt_p50_ns);
    fputs(", \"rt_p95_ns\": ", f);
    tb_json_num(f, s->rt_p95_ns);
    fputs(", \"rt_p99_ns\": ", f);
    tb_json_num(f, s->rt_p99_ns);
    fputs(", \"throughput\": ", f);
    tb_json_num(f, s->throughput);
    fputc('}', f);
}

static double pct(double f, double b)
{
    return b > 0 ? 100.0 * (f - b) / b : 0;
}

int tb_cmd_whatif(int argc, char **argv)
{
    const char *tier = NULL, *server = NULL, *speedup = NULL, *cores = NULL, *pool = NULL;
    const char *format = "text", *dbpath = TB_DEFAULT_DB;
    const struct tb_cli_opt opts[] = {
        {"tier", &tier, NULL},       {"server", &server, NULL}, {"speedup", &speedup, NULL},
        {"cores", &cores, NULL},     {"pool", &pool, NULL},     {"format", &format, NULL},
        {"db", &dbpath, NULL},
    };
    int rc;
    if (tb_cli_args(argc, argv, 1, opts, TB_ARRAY_SIZE(opts), "whatif", whatif_usage, &rc))
        return rc;
    if (!tier) {
        tb_log_error("whatif: --tier NAME is required (see 'tbneck tiers')");
        return TB_EXIT_USAGE;
    }
    int nchange = !!speedup + !!cores + !!pool;
    if (nchange != 1) {
        tb_log_error("whatif: give exactly one of --speedup X, --cores N, --pool N");
        return TB_EXIT_USAGE;
    }
    bool json = !strcmp(format, "json");
    if (!json && strcmp(format, "text")) {
        tb_log_error("whatif: --format '%s': expected text or json", format);
        return TB_EXIT_USAGE;
    }
    struct tb_whatif_opts o = {0};
    const char *what = speedup ? "speedup" : cores ? "cores" : "pool";
    const char *val = speedup ? speedup : cores ? cores : pool;
    o.change = speedup ? TB_WHATIF_SPEEDUP : cores ? TB_WHATIF_CORES : TB_WHATIF_POOL;
    if (!positive(val, &o.value, !speedup)) {
        tb_log_error("whatif: --%s '%s': expected a %s greater than 0", what, val,
                     speedup ? "factor" : "whole number");
        return TB_EXIT_USAGE;
    }
    struct tb_cli_db db;
    /* Read-write: the first run keeps the links and the model's inputs. */
    if ((rc = tb_cli_db_open(&db, dbpath, false)) != 0)
        return rc;
    if ((rc = tb_cli_tier(db.cat, tier, &o.tier)) != 0)
        goto out;
    if (server && (rc = tb_cli_server(db.cat, o.tier, server, &o.server)) != 0)
        goto out;
    struct tb_whatif_result r;
    char err[512] = "";
    int e = tb_whatif(db.st, db.cat, &o, &r, err, sizeof err);
    if (e) {
        tb_log_error("%s", err[0] ? err : tb_strerror(e));
        rc = e == TB_E_INVAL ? TB_EXIT_USAGE : TB_EXIT_FAIL;
        goto out;
    }
    const char *front = tb_catalog_tier_get(db.cat, r.front_tier)->name;
    if (json) {
        fputs("{\"tier\": ", stdout);
        tb_json_str(stdout, tier);
        printf(", \"change\": {\"%s\": ", what);
        tb_json_num(stdout, o.value);
        if (server) {
            fputs(", \"server\": ", stdout);
            tb_json_str(stdout, server);
        }
        fputs("}, \"front_tier\": ", stdout);
        tb_json_str(stdout, front);
        fputs(", \"model\": ", stdout);
        tb_json_str(stdout, r.closed ? "closed" : "open");
        fputs(", \"baseline\": ", stdout);
        stats_json(stdout, &r.baseline);
        fputs(", \"forecast\": ", stdout);
        stats_json(stdout, &r.forecast);
        fputs("}\n", stdout);
    } else {
        printf("what if: %s%s%s %s %s (front tier %s)\n", tier, server ? " " : "",
               server ? server : "", what, val, front);
        printf("model: %s\n", r.why);
        if (r.closed)
            printf("  %.1f users on average, think time %.3f ms\n", r.users, r.think_ns / 1e6);
        char lim[64];
        if (o.change != TB_WHATIF_POOL && r.cores >= 256)
            snprintf(lim, sizeof lim, "no CPU limit seen");
        else
            snprintf(lim, sizeof lim, "%.0f %s", r.cores,
                     o.change == TB_WHATIF_POOL ? "connections" : "cores");
        printf("  changed tier: %.3f ms of work per request, %s, %.2f requests per front "
               "request\n",
               r.service_ns / 1e6, lim, r.visits);
        printf("  links: %" PRIu64 " of %" PRIu64 " downstream requests linked (%.1f%%): %" PRIu64
               " exact, %" PRIu64 " ambiguous (%.2f%% of links); inputs %s\n",
               r.linked, r.children, r.children ? 100.0 * (double)r.linked / (double)r.children : 0,
               r.exact, r.ambiguous,
               r.linked ? 100.0 * (double)r.ambiguous / (double)r.linked : 0,
               r.stored_inputs ? "read from the store" : "computed (and stored)");
        printf("%-12s %12s %12s %8s\n", "", "measured", "forecast", "change");
        const struct {
            const char *name;
            double b, f;
        } rows[] = {
            {"mean ms", r.baseline.rt_mean_ns / 1e6, r.forecast.rt_mean_ns / 1e6},
            {"p50 ms", r.baseline.rt_p50_ns / 1e6, r.forecast.rt_p50_ns / 1e6},
            {"p95 ms", r.baseline.rt_p95_ns / 1e6, r.forecast.rt_p95_ns / 1e6},
            {"p99 ms", r.baseline.rt_p99_ns / 1e6, r.forecast.rt_p99_ns / 1e6},
            {"req/s", r.baseline.throughput, r.forecast.throughput},
        };
        for (size_t i = 0; i < TB_ARRAY_SIZE(rows); i++)
            printf("%-12s %12.3f %12.3f %+7.1f%%\n", rows[i].name, rows[i].b, rows[i].f,
                   pct(rows[i].f, rows[i].b));
    }
    if (fflush(stdout) != 0) {
        tb_log_error("whatif: cannot write to stdout");
        rc = TB_EXIT_FAIL;
    }
out:
    tb_cli_db_close(&db);
    return rc;
}
