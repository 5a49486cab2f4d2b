/* SPDX-License-Identifier: MIT */
/* cmd_export.c — `tbneck export requests|windows|connections`: stored records
 * and analysis windows as CSV on stdout, in the layouts DESIGN.md fixes for
 * scripts. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "callers.h"
#include "ch.h"
#include "cli.h"
#include "jsonl.h"
#include "link.h"
#include "linkstore.h"
#include "report_util.h"
#include "whatif.h"

static const char export_usage[] =
    "usage: tbneck export requests [--tier NAME] [--db FILE | --store URL]\n"
    "       tbneck export windows --tier NAME [--window " TB_WINDOW_DEFAULT "]"
    " [--server ADDR:PORT]\n"
    "                             [--from T --to T] [--service-times FILE]\n"
    "                             [--db FILE | --store URL]\n"
    "                             [--format csv|jsonl] [--recompute]\n"
    "       tbneck export connections [--tier NAME] [--from T --to T] [--db FILE]\n"
    "\n"
    "requests: every stored request as CSV, header\n"
    "  tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags,\n"
    "  id,parent\n"
    "  (id: the row's number in the full export from 1; parent: the id of the upstream\n"
    "  request during which the caller issued it, empty for none or unknown; the\n"
    "  share of links that were ambiguous is printed on stderr, docs/linking.md)\n"
    "  (--store sqlite:FILE = --db FILE; clickhouse://HOST:PORT/DATABASE: every sensor's\n"
    "  requests merged, docs/clickhouse.md)\n"
    "windows: the per-window analysis as CSV, header\n"
    "  tier,server,start_ns,width_ns,load,completions,throughput,work_units,norm_throughput,"
    "rt_mean_ns\n"
    "  (server '*' = the tier as a whole; throughputs per second; windows aligned to\n"
    "  multiples of the width since the epoch). --format jsonl: one JSON object a line,\n"
    "  {\"event\":\"window\", ..., \"congested\"} (docs/web.md, \"JSON lines\").\n"
    "connections: every TCP connection the tap saw (idle pooled ones too), header\n"
    "  conn,client,server,client_tier,server_tier,open_ns,close_ns,opened,closed,requests,\n"
    "  packets,bytes_c2s,bytes_s2c\n"
    "  (client_tier: the tier whose machine the client is, empty for users; opened\n"
    "  syn|synack|midstream; closed fin|rst|idle|evicted|end|open; with --tier the\n"
    "  connections to or from that tier).\n"
    TB_CLI_TIME_HELP;

struct link_tail {
    const struct tb_links *l;
    size_t next; /* index of the row being written */
};

static void link_row(void *ctx, FILE *out)
{
    struct link_tail *t = ctx;
    size_t i = t->next++;
    if (i >= t->l->n) {
        fputs(",,", out);
        return;
    }
    if (t->l->parent[i])
        fprintf(out, ",%zu,%" PRIu64, i + 1, t->l->parent[i]);
    else
        fprintf(out, ",%zu,", i + 1);
}

/* Table links (written by whatif) as tb_link_requests' result in export
 * order: the requests with their row ids (tb_store_link_rows), put in export
 * order by the sort the linking path uses, so that ids are the same rows.
 * TB_E_NOTFOUND when the table does not fit these requests. */
static int stored_links(struct tb_store *st, const struct tb_catalog *cat, struct tb_request **rq,
                        size_t *n, struct tb_links *lk)
{
    int64_t *rowid = NULL, *ordered = NULL;
    int rc = tb_store_link_rows(st, rq, &rowid, n);
    if (rc)
        goto out;
    /* Row order (arrival, then row id) is tb_store_requests' order; the sort
     * is stable, so ties end as the export orders them. The position before
     * the sort rides in req_bytes, which tb_store_link_rows leaves 0. */
    for (size_t i = 0; i < *n; i++)
        (*rq)[i].req_bytes = i;
    if ((rc = tb_link_export_order(cat, *rq, *n)))
        goto out;
    ordered = malloc((*n + 1) * sizeof *ordered);
    lk->parent = malloc((*n + 1) * sizeof *lk->parent);
    if (!ordered || !lk->parent) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < *n; i++) {
        ordered[i] = rowid[(*rq)[i].req_bytes];
        (*rq)[i].req_bytes = 0;
    }
    lk->n = *n;
    rc = tb_store_links_get(st, ordered, *n, lk->parent, &lk->children, &lk->linked, &lk->exact,
                            &lk->ambiguous);
out:
    if (rc) {
        tb_links_free(lk);
        free(*rq);
        *rq = NULL;
        *n = 0;
    }
    free(rowid);
    free(ordered);
    return rc;
}

static int export_requests(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB, *store = NULL;
    const struct tb_cli_opt opts[] = {
        {"tier", &tier, NULL}, {"db", &dbpath, NULL}, {"store", &store, NULL}};
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "export requests", export_usage, &rc))
        return rc;
    /* A ClickHouse store is read through its merged copy, as report reads it,
     * so that ids and parents come from the one linker. */
    struct tb_cli_db db;
    if ((rc = tb_cli_db_open_store(&db, dbpath, store, true)) != 0)
        return rc;
    uint32_t tid = 0;
    struct tb_request *rq = NULL;
    size_t n = 0;
    struct tb_callers *cl = NULL;
    struct tb_links lk;
    memset(&lk, 0, sizeof lk);
    if (tier && (rc = tb_cli_tier(db.cat, tier, &tid)) != 0)
        goto out;
    /* Ids count rows of the full export, so that a parent on another tier
     * keeps its id when --tier leaves it out. The links whatif stored are
     * read when current (the same bytes, docs/linking.md); else linked. */
    bool stored = false;
    int err = tb_whatif_links_current(db.st, &stored);
    if (!err && stored) {
        err = stored_links(db.st, db.cat, &rq, &n, &lk);
        if (err == TB_E_NOTFOUND) {
            stored = false;
            err = 0;
        }
    }
    if (!err && !stored)
        err = tb_store_requests(db.st, 0, INT64_MIN, INT64_MAX, &rq, &n);
    if (!err && !stored)
        err = tb_link_export_order(db.cat, rq, n);
    if (!err && !stored)
        err = tb_callers_new(&cl, db.cat);
    if (!err && !stored)
        err = tb_link_requests(db.cat, cl, rq, n, &lk);
    struct link_tail lt = {.l = &lk, .next = 0};
    if (!err && tid) {
        while (lt.next < n && rq[lt.next].tier != tid)
            lt.next++;
    }
    struct tb_export_tail tail = {",id,parent", link_row, &lt};
    if (!err)
        err = tb_store_export_requests_tail(db.st, tier, stdout, &tail);
    if (!err && fflush(stdout) != 0)
        err = TB_E_IO;
    if (err) {
        tb_log_error("export requests from %s: %s", dbpath, tb_strerror(err));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    if (lk.children)
        fprintf(stderr,
                "linked %" PRIu64 " of %" PRIu64 " downstream requests to a parent (%.2f%%): "
                "%" PRIu64 " exact, %" PRIu64 " ambiguous (%.2f%% of links)\n",
                lk.linked, lk.children, 100.0 * (double)lk.linked / (double)lk.children,
                lk.exact, lk.ambiguous,
                lk.linked ? 100.0 * (double)lk.ambiguous / (double)lk.linked : 0.0);
out:
    tb_links_free(&lk);
    tb_callers_free(cl);
    free(rq);
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
        /* The shortest form that reads back as the exact double. */
        char d[5][40];
        fprintf(f, ",%lld,%lld,%s,%u,%s,%s,%s,%s\n", (long long)w[i].start_ns,
                (long long)w[i].width_ns, tb_fmt_double(w[i].load, d[0], 40), w[i].completions,
                tb_fmt_double(w[i].throughput, d[1], 40), tb_fmt_double(w[i].work_units, d[2], 40),
                tb_fmt_double(w[i].norm_throughput, d[3], 40),
                tb_fmt_double(w[i].rt_mean_ns, d[4], 40));
    }
}

static int export_windows(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB, *window = TB_WINDOW_DEFAULT, *server = NULL;
    const char *from = NULL, *to = NULL, *svcfile = NULL, *format = "csv", *store = NULL;
    bool recompute = false;
    const struct tb_cli_opt opts[] = {
        {"format", &format, NULL},   {"store", &store, NULL},
        {"tier", &tier, NULL},       {"db", &dbpath, NULL},   {"window", &window, NULL},
        {"server", &server, NULL},   {"from", &from, NULL},   {"to", &to, NULL},
        {"service-times", &svcfile, NULL}, {"recompute", NULL, &recompute},
    };
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "export windows", export_usage, &rc))
        return rc;
    if (!tier) {
        tb_log_error("export windows: --tier NAME is required (see 'tbneck tiers')");
        return TB_EXIT_USAGE;
    }
    bool jsonl = !strcmp(format, "jsonl");
    if (!jsonl && strcmp(format, "csv")) {
        tb_log_error("export windows: --format '%s': expected csv or jsonl", format);
        return TB_EXIT_USAGE;
    }
    struct tb_analyze_opts o = {.from_ns = INT64_MIN, .to_ns = INT64_MAX};
    if (tb_parse_window(window, &o.width_ns) != 0) {
        tb_log_error("--window '%s': expected a duration from 1ms to 1h, such as 50ms", window);
        return TB_EXIT_USAGE;
    }
    o.service_file = svcfile;
    o.recompute = recompute;

    struct tb_cli_db db;
    if ((rc = tb_cli_db_open_store(&db, dbpath, store, false)) != 0)
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
    if (jsonl) {
        /* Congested by the rule the analysis' episodes were cut with. */
        struct tb_congestion rule;
        tb_congestion_from_analysis(&rule, &res.a, res.win, res.nwin);
        for (size_t i = 0; i < res.nwin; i++)
            tb_jsonl_window(stdout, tier, sbuf, &res.win[i],
                            tb_congestion_congested(&rule, res.win[i].load));
    } else {
        print_windows(stdout, tier, sbuf, res.win, res.nwin);
    }
    if (fflush(stdout) != 0) {
        tb_log_error("export windows: cannot write to stdout");
        rc = TB_EXIT_FAIL;
    }
out:
    tb_analysis_result_free(&res);
    tb_cli_db_close(&db);
    return rc;
}

static const char *tier_name(const struct tb_catalog *cat, uint32_t id)
{
    const struct tb_tier_info *t = id ? tb_catalog_tier_get(cat, id) : NULL;
    return t ? t->name : "";
}

static int export_connections(int argc, char **argv)
{
    const char *tier = NULL, *dbpath = TB_DEFAULT_DB, *from = NULL, *to = NULL;
    const struct tb_cli_opt opts[] = {{"tier", &tier, NULL}, {"db", &dbpath, NULL},
                                      {"from", &from, NULL}, {"to", &to, NULL}};
    int rc;
    if (tb_cli_args(argc, argv, 2, opts, TB_ARRAY_SIZE(opts), "export connections", export_usage, &rc))
        return rc;
    struct tb_cli_db db;
    if ((rc = tb_cli_db_open(&db, dbpath, true)) != 0)
        return rc;
    uint32_t tid = 0;
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    struct tb_callers *cl = NULL;
    struct tb_conn *c = NULL;
    size_t n = 0;
    if (tier && (rc = tb_cli_tier(db.cat, tier, &tid)) != 0)
        goto out;
    if ((rc = tb_cli_range(db.st, 0, from, to, &lo, &hi)) != 0)
        goto out;
    int err = tb_store_connections(db.st, lo, hi, &c, &n);
    if (!err)
        err = tb_callers_new(&cl, db.cat);
    if (err) {
        tb_log_error("export connections from %s: %s", dbpath, tb_strerror(err));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    fputs("conn,client,server,client_tier,server_tier,open_ns,close_ns,opened,closed,requests,"
          "packets,bytes_c2s,bytes_s2c\n",
          stdout);
    for (size_t i = 0; i < n; i++) {
        uint32_t st = c[i].tier, sid, ct, cs;
        if (!st)
            st = tb_callers_server_tier(cl, &c[i].server, &sid);
        tb_callers_of(cl, &c[i].client, st, &ct, &cs);
        if (tid && st != tid && ct != tid)
            continue;
        char cb[TB_ADDR_STRLEN], sb[TB_ADDR_STRLEN];
        printf("%" PRIu64 ",%s,%s,", c[i].conn, tb_addr_fmt(&c[i].client, cb, sizeof cb),
               tb_addr_fmt(&c[i].server, sb, sizeof sb));
        tb_csv_field(stdout, tier_name(db.cat, ct));
        fputc(',', stdout);
        tb_csv_field(stdout, tier_name(db.cat, st));
        printf(",%" PRId64 ",%" PRId64 ",%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
               "\n",
               c[i].open_ns, c[i].close_ns, tb_conn_open_name(c[i].opened),
               tb_conn_close_name(c[i].closed), c[i].requests, c[i].packets, c[i].bytes_c2s,
               c[i].bytes_s2c);
    }
    if (fflush(stdout) != 0) {
        tb_log_error("export connections: cannot write to stdout");
        rc = TB_EXIT_FAIL;
    }
out:
    tb_callers_free(cl);
    free(c);
    tb_cli_db_close(&db);
    return rc;
}

int tb_cmd_export(int argc, char **argv)
{
    if (argc < 2) {
        tb_log_error("export: what to export? 'requests', 'windows' or 'connections' (see "
                     "'tbneck export --help')");
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
    if (!strcmp(argv[1], "connections"))
        return export_connections(argc, argv);
    tb_log_error("export: unknown kind '%s' (expected 'requests', 'windows' or 'connections')",
                 argv[1]);
    return TB_EXIT_USAGE;
}
