/* SPDX-License-Identifier: MIT */
/* cli.h — the subcommands; each lives in cli/cmd_<name>.c and returns an exit
 * status (TB_EXIT_OK, TB_EXIT_FAIL, TB_EXIT_USAGE). argv[0] is the subcommand. */
#ifndef TB_CLI_H
#define TB_CLI_H

#include <signal.h>

#include "tb.h"

#include <stdio.h>

struct tb_store;
struct tb_catalog;

int tb_cmd_capture(int argc, char **argv);
int tb_cmd_tiers(int argc, char **argv);
int tb_cmd_report(int argc, char **argv);
int tb_cmd_export(int argc, char **argv);
int tb_cmd_serve(int argc, char **argv);
int tb_cmd_events(int argc, char **argv);
int tb_cmd_diagnose(int argc, char **argv);
int tb_cmd_whatif(int argc, char **argv);

/* Default database path when --db is not given. */
#define TB_DEFAULT_DB "tbneck.db"
/* A live ClickHouse sensor's spool when --spool is not given, next to the default database. */
#define TB_DEFAULT_SPOOL "tbneck.spool"
/* What every --from/--to takes (tb_parse_time_ref), for the --help texts. */
#define TB_CLI_TIME_HELP                                                                        \
    "T: a UTC time as the report prints it (2023-11-14 22:13:25.350, or 22:13:27 on the\n"     \
    "capture's day), ns or seconds since the epoch (1700000000.25), now-5m, start+10s or\n"    \
    "+10s (from the first request), end-1m (from the last response); docs/report.md.\n"

/* Options of `tbneck capture`, parsed by cmd_capture.c. Offline runs are
 * handled there; live runs (-i) go to tb_capture_live() in cli/capture_live.c. */
struct tb_capture_args {
    const char **files; /* -r FILE... */
    size_t nfiles;
    const char *iface;  /* -i IFACE */
    const char *db;
    const char *store_url; /* --store clickhouse://...: requests go there instead of --db */
    const char *sensor;    /* --sensor NAME (default: the host name) */
    int64_t store_retry_ns; /* --store-retry D (default 30 s) */
    const char *spool_dir;  /* --spool DIR (live ClickHouse; NULL: TB_DEFAULT_SPOOL) */
    uint64_t spool_max;     /* --spool-max SIZE (default 1 GiB) */
    bool spool_max_set;
    const char *tiers_file;
    const char *bpf;    /* -f EXPR, or trailing arguments as in tcpdump */
    const char *user;   /* -Z USER */
    const char *serve;  /* --serve ADDR */
    bool allow_remote;
    const char *allow_host; /* --allow-host NAME[,NAME...] for the dashboard */
    const char *force_proto;
    int64_t duration_ns; /* 0 = until interrupted */
    int64_t window_ns;   /* streaming analysis window (default 50 ms) */
    int snaplen;         /* -s, default 262144 */
    int bufsize_mib;     /* -B, default 64 */
    bool immediate;      /* --immediate */
    bool no_store;       /* --no-store: decode and count, store nothing (benchmarks) */
    bool quiet;
    uint64_t max_packets; /* -c COUNT: stop after COUNT packets (after the filter); 0 = all */
    /* -w FILE with tcpdump's rotation (capture/dump.h): -C bytes, -G seconds,
     * -W files; dump_prec -1 = the inputs' precision (live: nanoseconds). */
    const char *write;
    int64_t rotate_bytes, rotate_secs;
    int rotate_files;
    int dump_prec;
    bool jsonl;          /* --format jsonl: live events as JSON lines on stdout */
    size_t max_memory;   /* --max-memory: bytes of flow and parser state; 0 = no cap */
    int workers;         /* --workers N: live capture threads (PACKET_FANOUT); 1 = one engine */
    bool whatif_inputs;  /* --whatif-inputs: link and store whatif's inputs at the end */
    bool diagnose_inputs; /* --diagnose-inputs: store diagnose's aggregates at the end */
};
/* The end of a capture as the store records it (captures.state, capture_tiers)
 * and as the summary says it: seen per tier from the requests handed to the
 * writer, stored from the writer, unanswered/abandoned from the engine.
 * seen and stored are indexed by tier id; one row per tier of the catalog
 * with anything to count. Fills *tiers (malloc'd, caller frees). */
struct tb_engine;
struct tb_catalog;
struct tb_capture_end;
struct tb_capture_tier;
int tb_capture_end_make(const struct tb_engine *e, const struct tb_catalog *cat,
                        const uint64_t *seen, size_t nseen, const uint64_t *stored,
                        size_t nstored, struct tb_capture_tier **tiers, size_t *ntiers);
/* --sensor, else the host name made a valid sensor name (in buf). */
const char *tb_capture_sensor(const struct tb_capture_args *a, char *buf, size_t len);
/* SIGINT and SIGTERM to handler (the previous dispositions in old[0], old[1]),
 * and back. */
void tb_cli_catch_stop(void (*handler)(int), struct sigaction old[2]);
void tb_cli_restore_stop(const struct sigaction old[2]);
/* Parses --max-memory's SIZE: bytes, or with k, m, g (KiB, MiB, GiB). */
int tb_parse_mem_size(const char *s, size_t *out);
int tb_capture_live(const struct tb_capture_args *a);
/* --whatif-inputs: once the capture is finished, whatif's inputs (the links,
 * the model's inputs: analysis/whatif.h tb_whatif_prepare) computed and
 * stored in st, a line on out (NULL: none) saying what it cost. A failure is
 * a warning: the capture stands, whatif computes them on its first run. */
void tb_capture_whatif_inputs(struct tb_store *st, const struct tb_catalog *cat, FILE *out);
/* --diagnose-inputs, at the end of a capture (offline and live): diagnose's
 * inputs computed and stored (tb_diagnose_store_inputs); a failure is a
 * warning (diagnose computes them on its first run). */
struct tb_store;
void tb_cli_store_diagnose_inputs(struct tb_store *st);

#endif
