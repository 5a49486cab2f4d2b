/* SPDX-License-Identifier: MIT */
/* cmd_tiers.c — `tbneck tiers`: the tiers of a database, their servers, and
 * how many requests each recorded. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report_util.h"
#include "store.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tbneck tiers [--db FILE | --store URL]\n\n"
               "Lists the tiers of a database (configured by --tiers or discovered), their\n"
               "servers and the number of requests recorded at each.\n\n"
               "  --db FILE   database (default " TB_DEFAULT_DB ")\n"
               "  --store URL sqlite:FILE (= --db FILE) or clickhouse://HOST:PORT/DATABASE:\n"
               "              every sensor's rows merged (docs/clickhouse.md)\n\n"
               "Exit status: 0 success, 1 the database cannot be read, 2 usage error.\n");
}

static int list(struct tb_store *st, const struct tb_catalog *cat, const char *db)
{
    uint32_t ntier = tb_catalog_tier_count(cat), nsrv = tb_catalog_server_count(cat);
    uint64_t *per_server = calloc((size_t)nsrv + 1, sizeof *per_server);
    int rc = 0;
    if (!per_server)
        return TB_E_NOMEM;
    if (ntier == 0) {
        printf("no tiers in %s (run 'tbneck capture' first)\n", db);
        goto out;
    }
    printf("%-24s %-8s %-10s %8s %12s\n", "TIER", "PROTO", "SOURCE", "SERVERS", "REQUESTS");
    for (uint32_t t = 1; t <= ntier; t++) {
        const struct tb_tier_info *ti = tb_catalog_tier_get(cat, t);
        uint64_t n = 0;
        uint32_t servers = 0;
        if (!ti)
            continue;
        if ((rc = tb_store_request_count(st, t, &n)) ||
            (rc = tb_store_server_counts(st, t, per_server, (size_t)nsrv + 1)))
            goto out;
        for (uint32_t s = 1; s <= nsrv; s++)
            if (tb_catalog_server_get(cat, s)->tier == t)
                servers++;
        printf("%-24s %-8s %-10s %8" PRIu32 " %12" PRIu64 "\n", ti->name, ti->proto,
               ti->configured ? "configured" : "discovered", servers, n);
        for (uint32_t s = 1; s <= nsrv; s++) {
            const struct tb_server_info *si = tb_catalog_server_get(cat, s);
            char buf[TB_ADDR_STRLEN];
            if (si->tier == t)
                printf("  %-52s %12" PRIu64 "\n", tb_addr_fmt(&si->addr, buf, sizeof buf),
                       per_server[s]);
        }
    }
out:
    free(per_server);
    return rc;
}

int tb_cmd_tiers(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"store", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *db = TB_DEFAULT_DB, *store = NULL;
    struct tb_store *st = NULL;
    struct tb_catalog *cat = NULL;
    char err[512] = "";
    int c, rc, exit_code = TB_EXIT_FAIL;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            db = optarg;
            break;
        case 's':
            store = optarg;
            break;
        case 'h':
            usage(stdout);
            return TB_EXIT_OK;
        case ':':
            tb_log_error("tiers: option '%s' needs an argument", argv[optind - 1]);
            return TB_EXIT_USAGE;
        default:
            tb_log_error("tiers: unknown option '%s' (try 'tbneck tiers --help')",
                         argv[optind - 1]);
            return TB_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        tb_log_error("tiers: unexpected argument '%s' (try 'tbneck tiers --help')", argv[optind]);
        return TB_EXIT_USAGE;
    }
    if (store) {
        struct tb_cli_db sdb = {0};
        if ((rc = tb_cli_db_open_store(&sdb, db, store, true)) != 0)
            return rc;
        rc = list(sdb.st, sdb.cat, store);
        if (rc)
            tb_log_error("tiers: %s: %s", store, tb_strerror(rc));
        tb_cli_db_close(&sdb);
        return rc ? TB_EXIT_FAIL : TB_EXIT_OK;
    }
    struct stat sb;
    if (stat(db, &sb) != 0) {
        tb_log_error("tiers: cannot open database '%s': %s", db, strerror(errno));
        return TB_EXIT_FAIL;
    }
    if (tb_store_open(&st, db, TB_STORE_READONLY, err, sizeof err)) {
        tb_log_error("tiers: %s", err);
        goto out;
    }
    if ((rc = tb_catalog_new(&cat)) || (rc = tb_store_load_catalog(st, cat))) {
        tb_log_error("tiers: %s: cannot load the catalog: %s", db, tb_strerror(rc));
        goto out;
    }
    if ((rc = list(st, cat, db))) {
        tb_log_error("tiers: %s: %s", db, tb_strerror(rc));
        goto out;
    }
    exit_code = TB_EXIT_OK;
out:
    tb_catalog_free(cat);
    tb_store_close(st);
    return exit_code;
}
