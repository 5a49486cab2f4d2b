/* SPDX-License-Identifier: MIT */
/* cmd_diagnose.c — `tbneck diagnose`: the root cause of the front tier's
 * transient bottlenecks (analysis/diagnose.h), as text, JSON (DESIGN.md
 * "Interfaces") or per-window CSV, with plots (cli/plot.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "diagnose.h"
#include "plot.h"
#include "report_util.h"

static const char diagnose_usage[] =
    "usage: tbneck diagnose [--window 50ms] [--from T --to T] [--format text|json|csv]\n"
    "                       [--plot FILE.png|svg] [--recompute] [--no-critical-path]\n"
    "                       [--db FILE | --store URL]\n"
    "\n"
    "Which server (or connection pool) holds the front tier up in its congested\n"
    "windows, and why: cpu, freeze, speed, pool, threads (or none). Text: the\n"
    "verdict first, then tiers, servers, pools and episodes. --format json: the\n"
    "object DESIGN.md fixes; csv: per tier and window the self and waiting load,\n"
    "the front tier's congestion and the root found. --plot FILE: stacked self and\n"
    "waiting load per tier with the root marked (FILE), and the wait-for graph\n"
    "drawn by Graphviz (FILE with -graph before the extension). --no-critical-path:\n"
    "leave out the critical path (it links every request, in memory; the rest\n"
    "streams the stored requests in memory that does not grow with them).\n"
    TB_CLI_TIME_HELP;

static const char *tier_name(const struct tb_catalog *cat, uint32_t t)
{
    const struct tb_tier_info *ti = t ? tb_catalog_tier_get(cat, t) : NULL;
    return ti ? ti->name : "";
}

static const char *server_name(const struct tb_catalog *cat, uint32_t s, char *buf, size_t len)
{
    const struct tb_server_info *si = s ? tb_catalog_server_get(cat, s) : NULL;
    if (!si) {
        snprintf(buf, len, "*");
        return buf;
    }
    return tb_addr_fmt(&si->addr, buf, len);
}

/* "%.2f" of v with an optional suffix, or "-" when undetermined. */
static void fmt_num(char *buf, size_t len, double v, const char *suffix)
{
    if (isfinite(v))
        snprintf(buf, len, "%.*f%s", *suffix ? 1 : 2, v, suffix);
    else
        snprintf(buf, len, "-");
}

static void print_row(FILE *f, const struct tb_catalog *cat, const struct tb_diag_row *r,
                      bool server)
{
    char name[TB_ADDR_STRLEN + TB_NAME_MAX], st[16], ns[16], nss[16];
    if (server) {
        char b[TB_ADDR_STRLEN];
        snprintf(name, sizeof name, "%s", server_name(cat, r->server, b, sizeof b));
    } else {
        snprintf(name, sizeof name, "%s", tier_name(cat, r->tier));
    }
    fmt_num(st, sizeof st, r->stretch, "x");
    fmt_num(ns, sizeof ns, r->n_star, "");
    fmt_num(nss, sizeof nss, r->n_star_self, "");
    fprintf(f, "  %-22s %-10s %9" PRIu64 " %8.2f %8.2f %8.2f %8.2f %8s %7s %7s %6.1f%%\n", name,
            tb_diag_state_name(r->state), r->requests, r->load_mean, r->self_load_mean,
            r->wait_load_mean, r->own_load_mean, st, ns, nss, 100 * r->congested_fraction);
}

static void print_text(FILE *f, const struct tb_catalog *cat, const struct tb_diagnosis *d)
{
    char b[TB_ADDR_STRLEN], b2[TB_ADDR_STRLEN], w[32];
    const struct tb_diag_verdict *v = &d->verdict;
    fprintf(f, "verdict: %s\n", v->evidence);
    if (v->cause != TB_CAUSE_NONE)
        fprintf(f, "  root %s %s, cause %s (%s), %.0f%% of the front tier's congested time\n",
                tier_name(cat, v->tier), server_name(cat, v->server, b, sizeof b),
                tb_cause_name(v->cause), v->resource, 100 * v->share);
    if (!d->ntiers)
        return;
    fprintf(f, "\nwindow %s, front tier %s; loads are means over every window, stretch = self / "
               "own in the front tier's congested windows\n",
            tb_fmt_duration(d->width_ns, w, sizeof w), tier_name(cat, d->front));
#define ROW_HDR "  %-22s %-10s %9s %8s %8s %8s %8s %8s %7s %7s %7s\n"
    fprintf(f, ROW_HDR, "tier", "state", "requests", "load", "self", "wait", "own", "stretch", "N*",
            "N*self", "cong");
    for (size_t i = 0; i < d->ntiers; i++)
        print_row(f, cat, &d->tiers[i], false);
    fprintf(f, "\n");
    fprintf(f, ROW_HDR, "server", "state", "requests", "load", "self", "wait", "own", "stretch",
            "N*", "N*self", "cong");
    for (size_t i = 0; i < d->nservers; i++)
        print_row(f, cat, &d->servers[i], true);
    if (d->npools) {
        fprintf(f, "\npools (caller server -> callee tier):\n");
        fprintf(f, "  %-22s %-12s %5s %5s %6s %6s %5s %5s  %s\n", "from", "to", "conns", "seen",
                "maxcon", "pooled", "full", "rec", "reason");
        for (size_t i = 0; i < d->npools; i++) {
            const struct tb_diag_pool *p = &d->pools[i];
            fprintf(f, "  %-22s %-12s %5u %5u %6u %6s %4.0f%% %5u  %s\n",
                    server_name(cat, p->from_server, b, sizeof b), tier_name(cat, p->to_tier),
                    p->connections, p->connections_seen, p->max_concurrent,
                    p->pooled ? "yes" : "no", 100 * p->full_fraction, p->recommended, p->reason);
        }
    }
    fprintf(f, "\nepisodes: %zu", d->nepisodes);
    if (d->dismissed)
        fprintf(f, " (%zu more of the report's had no stretched server below them: not "
                   "bottlenecks)",
                d->dismissed);
    fprintf(f, "\n");
    if (d->nepisodes)
        fprintf(f, "  %-14s %8s %-12s %-22s %-9s %-12s %-22s %s\n", "start (s)", "length",
                "tier", "server", "kind", "root tier", "root server", "cause");
    for (size_t i = 0; i < d->nepisodes; i++) {
        const struct tb_diag_episode *e = &d->episodes[i];
        fprintf(f, "  %-14.3f %8s %-12s %-22s %-9s %-12s %-22s %s\n",
                (double)(e->start_ns - d->from_ns) / 1e9,
                tb_fmt_duration(e->end_ns - e->start_ns, w, sizeof w), tier_name(cat, e->tier),
                server_name(cat, e->server, b, sizeof b),
                e->kind == TB_EP_FREEZE ? "freeze" : "saturated", tier_name(cat, e->root_tier),
                server_name(cat, e->root_server, b2, sizeof b2), tb_cause_name(e->cause));
    }
    if (d->have_cp)
        tb_cli_print_critpath(f, cat, &d->cp);
}

/* Per tier and window: the layers, and the front tier's state and root. */
static void print_csv(FILE *f, const struct tb_catalog *cat, const struct tb_diagnosis *d)
{
    char b[TB_ADDR_STRLEN];
    fputs("tier,start_ns,width_ns,self_load,wait_load,front_congested,root_tier,root_server,"
          "cause\n",
          f);
    for (size_t i = 0; i < d->ntiers; i++)
        for (size_t k = 0; k < d->nwin; k++) {
            tb_csv_field(f, tier_name(cat, d->tiers[i].tier));
            uint32_t r = d->root_server[k];
            const struct tb_server_info *si = r ? tb_catalog_server_get(cat, r) : NULL;
            char v[2][40];
            fprintf(f, ",%" PRId64 ",%" PRId64 ",%s,%s,%d,", d->from_ns + (int64_t)k * d->width_ns,
                    d->width_ns, tb_fmt_double(d->self[i * d->nwin + k], v[0], 40),
                    tb_fmt_double(d->wait[i * d->nwin + k], v[1], 40),
                    d->front_congested[k] ? 1 : 0);
            tb_csv_field(f, si ? tier_name(cat, si->tier) : "");
            fputc(',', f);
            tb_csv_field(f, si ? server_name(cat, r, b, sizeof b) : "");
            fprintf(f, ",%s\n", r ? tb_cause_name((enum tb_cause)d->root_cause[k]) : "");
        }
}

int tb_cmd_diagnose(int argc, char **argv)
{
    const char *dbpath = TB_DEFAULT_DB, *window = TB_WINDOW_DEFAULT, *from = NULL, *to = NULL;
    const char *format = "text", *plot = NULL, *store = NULL;
    bool recompute = false, no_cp = false;
    const struct tb_cli_opt opts[] = {
        {"db", &dbpath, NULL},     {"store", &store, NULL},     {"window", &window, NULL}, {"from", &from, NULL},
        {"to", &to, NULL},         {"format", &format, NULL}, {"plot", &plot, NULL},
        {"recompute", NULL, &recompute}, {"no-critical-path", NULL, &no_cp},
    };
    int rc;
    if (tb_cli_args(argc, argv, 1, opts, TB_ARRAY_SIZE(opts), "diagnose", diagnose_usage, &rc))
        return rc;
    if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "csv")) {
        tb_log_error("diagnose: --format '%s': expected text, json or csv", format);
        return TB_EXIT_USAGE;
    }
    struct tb_diag_opts o = {.from_ns = INT64_MIN, .to_ns = INT64_MAX, .recompute = recompute,
                             .critical_path = !no_cp};
    if (tb_parse_window(window, &o.width_ns) != 0) {
        tb_log_error("--window '%s': expected a duration from 1ms to 1h, such as 50ms", window);
        return TB_EXIT_USAGE;
    }
    if (plot && tb_plot_format(plot) < 0) {
        tb_log_error("--plot %s: the file name must end in .png or .svg", plot);
        return TB_EXIT_USAGE;
    }
    struct tb_cli_db db;
    if ((rc = tb_cli_db_open_store(&db, dbpath, store, false)) != 0)
        return rc;
    if ((rc = tb_cli_range(db.st, 0, from, to, &o.from_ns, &o.to_ns)) != 0)
        goto out;
    struct tb_diagnosis d;
    char err[512] = "";
    int e = tb_diagnose(db.st, db.cat, &o, &d, err, sizeof err);
    if (e) {
        tb_log_error("diagnose: %s", err[0] ? err : tb_strerror(e));
        rc = TB_EXIT_FAIL;
        goto out;
    }
    tb_cli_warn_partial(db.st, "diagnose", o.from_ns, o.to_ns);
    if (!strcmp(format, "json")) {
        struct tb_buf b;
        tb_buf_init(&b);
        tb_diagnosis_json(&b, db.cat, &d);
        if (!tb_buf_ok(&b))
            rc = TB_EXIT_FAIL;
        else
            fwrite(b.p, 1, b.len, stdout);
        tb_buf_free(&b);
    }
    else if (!strcmp(format, "csv"))
        print_csv(stdout, db.cat, &d);
    else
        print_text(stdout, db.cat, &d);
    if (fflush(stdout) != 0) {
        tb_log_error("diagnose: cannot write to stdout");
        rc = TB_EXIT_FAIL;
    }
    if (!rc && plot) {
        char perr[512] = "";
        if (tb_plot_diagnosis(plot, db.cat, &d, perr, sizeof perr) != 0) {
            tb_log_error("diagnose: --plot %s: %s", plot, perr);
            rc = TB_EXIT_FAIL;
        }
    }
    tb_diagnosis_free(&d);
out:
    tb_cli_db_close(&db);
    return rc;
}
