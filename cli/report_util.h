/* SPDX-License-Identifier: MIT */
/* report_util.h — helpers shared by report and export: open the database with
 * clear one-line errors, resolve tier and server names, parse time bounds. */
#ifndef TB_REPORT_UTIL_H
#define TB_REPORT_UTIL_H

#include <stdio.h>

#include "tb.h"
#include "catalog.h"
#include "store.h"
#include "analyze.h"
#include "json.h"
#include "util.h"

struct tb_cli_db {
    struct tb_store *st;
    struct tb_catalog *cat;
    char *tmp; /* the temporary copy of a ClickHouse store, removed by close */
};

/* Opens `path` (which must exist) and loads its catalog. On failure logs one
 * line naming the file and the problem and returns TB_EXIT_FAIL; else 0. */
int tb_cli_db_open(struct tb_cli_db *db, const char *path, bool readonly);
void tb_cli_db_close(struct tb_cli_db *db);
/* The same for --db FILE or --store URL (NULL: --db): a ClickHouse store is
 * first copied into a temporary SQLite file, which close removes
 * (cli/store_url.c). A malformed URL is a usage error (TB_EXIT_USAGE). */
int tb_cli_db_open_store(struct tb_cli_db *db, const char *path, const char *store,
                         bool readonly);
void tb_cli_db_remove_copy(struct tb_cli_db *db);
/* When a capture marked 'partial' (store.h: a full disk lost some of its
 * requests) overlaps [from_ns, to_ns), says "partial data" in one line on
 * stderr, prefixed with `cmd`, and returns true. */
bool tb_cli_warn_partial(struct tb_store *st, const char *cmd, int64_t from_ns, int64_t to_ns);

/* Tier by name. When unknown, logs one line listing the known tiers and
 * returns TB_EXIT_FAIL. */
int tb_cli_tier(const struct tb_catalog *cat, const char *name, uint32_t *id);
/* Server "ADDR:PORT" of the tier. A malformed address is a usage error
 * (TB_EXIT_USAGE), a server not in the tier a runtime one (TB_EXIT_FAIL, the
 * line lists the tier's servers). */
int tb_cli_server(const struct tb_catalog *cat, uint32_t tier, const char *s, uint32_t *id);
/* --from/--to: absolute times, or "+10s" offsets from the tier's first request.
 * Unset bounds become INT64_MIN / INT64_MAX. Returns 0 or an exit status. */
int tb_cli_range(struct tb_store *st, uint32_t tier, const char *from, const char *to,
                 int64_t *from_ns, int64_t *to_ns);
/* What report and export windows analyse: the tier by name, the optional
 * server into o->server, and --from/--to into o->from_ns/o->to_ns (the three
 * calls above, in that order). Returns 0 or an exit status, the line logged. */
int tb_cli_target(const struct tb_cli_db *db, const char *tier, const char *server,
                  const char *from, const char *to, uint32_t *tid, struct tb_analyze_opts *o);

/* A long option of a subcommand: "--name VALUE" / "--name=VALUE" when `val`
 * is set, a bare "--name" when `flag` is set. */
struct tb_cli_opt {
    const char *name; /* without the dashes */
    const char **val;
    bool *flag;
};
/* Parses argv[first..argc). Positional arguments are refused. On a bad flag
 * logs one line ("CMD: unknown option '--x' ...") and returns TB_EXIT_USAGE;
 * "--help"/"-h" returns -1 so the caller prints its usage. */
int tb_cli_parse(int argc, char **argv, int first, const struct tb_cli_opt *opts, size_t n,
                 const char *cmd);
/* tb_cli_parse as every subcommand calls it: false to go on; true when the
 * command is to end now with status *rc (TB_EXIT_OK once `usage` is printed
 * to stdout for --help, else the parse error's status). */
bool tb_cli_args(int argc, char **argv, int first, const struct tb_cli_opt *opts, size_t n,
                 const char *cmd, const char *usage, int *rc);

/* The critical path as text: per class (the six largest), each component's
 * share of response time (mean, p95, p99), diagnose's and report's section. */
struct tb_critpath;
void tb_cli_print_critpath(FILE *f, const struct tb_catalog *cat, const struct tb_critpath *cp);

#endif
