/* SPDX-License-Identifier: MIT */
/* cmd_capture.c — `tbneck capture`: option parsing, and the offline run
 * (files → engine → store); live runs go to tb_capture_live(). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "ch.h"
#include "cli.h"
#include "diagnose.h"
#include "dump.h"
#include "live.h"
#include "proto.h"
#include "store.h"
#include "tiers.h"
#include "util.h"
#include "whatif.h"

#define MAX_SNAPLEN 262144

static void usage(FILE *f)
{
    char names[256];
    tb_proto_names(names, sizeof names);
    fprintf(f,
            "usage: tbneck capture -r FILE.pcap[ng][.gz]... | -i IFACE [options] [BPF expression]\n"
            "       tbneck capture -D\n"
            "\n"
            "Reconstructs every request at every tier from a capture and stores the records.\n"
            "\n"
            "  -r FILE          read a pcap or pcapng file, gzip'd or not, - for standard input\n"
            "                   (repeatable; further files may follow; merged in time order)\n"
            "  -i IFACE         capture live from an interface\n"
            "  -D               list the interfaces -i accepts, as tcpdump -D does, and exit\n"
            "  -c COUNT         stop after COUNT packets (those the filter passed)\n"
            "  -w FILE          also write the packets to FILE as tcpdump -w does (- = stdout)\n"
            "  -C SIZE          with -w: a new file when the current one is over SIZE million\n"
            "                   bytes (or SIZEk/m/g): FILE, FILE1, FILE2, ...\n"
            "  -G SECONDS       with -w: a new file every SECONDS of capture time; FILE is a\n"
            "                   strftime pattern (local time), e.g. tap-%%Y%%m%%d-%%H%%M%%S.pcap\n"
            "  -W N             with -C: a ring of N files (FILE0..); with -G alone: stop after N\n"
            "  --time-stamp-precision micro|nano\n"
            "                   timestamps -w writes (default: the input's; live: nano)\n"
            "  -n               accepted for tcpdump habits; tbneck never resolves names\n"
            "  --tiers FILE     tiers file: NAME PROTO SERVER[,SERVER...] [hosts=HOST,...]\n"
            "                   (without it tiers are discovered: http, http-8080, mysql)\n"
            "  --db FILE        database (default " TB_DEFAULT_DB ")\n"
            "  --store URL      sqlite:FILE (= --db FILE) or clickhouse://HOST:PORT/DATABASE\n"
            "                   (ClickHouse's HTTP port; a cluster: HOST:PORT,HOST:PORT/DB\n"
            "                   ?cluster=NAME; docs/clickhouse.md)\n"
            "  --sensor NAME    the name this capture's rows carry in ClickHouse (default:\n"
            "                   the host name)\n"
            "  --store-retry D  while ClickHouse refuses connections, try again every second\n"
            "                   for up to D (default 30s; 0: fail at once), and complete an\n"
            "                   insert a cluster stored in part; live: how long\n"
            "                   the end waits for it before leaving rows in the spool\n"
            "  --spool DIR      live, ClickHouse: where batches wait while the server is away,\n"
            "                   replayed in order (default " TB_DEFAULT_SPOOL ")\n"
            "  --spool-max SIZE live: the spool's cap (k, m, g; default 1g; 0: no spool);\n"
            "                   beyond it batches are dropped and counted\n"
            "  -f EXPR          BPF filter (or give it after the options, as in tcpdump)\n"
            "  --proto NAME     parse every connection as NAME (%s)\n"
            "  --duration D     stop after D of capture time (e.g. 60s)\n"
            "  --window D       streaming analysis window, live (default " TB_WINDOW_DEFAULT ")\n"
            "  --serve ADDR     live: serve the dashboard on ADDR while capturing\n"
            "  --format jsonl   live: windows (tier and servers), episodes, N* re-estimates\n"
            "                   and health as JSON lines on stdout while capturing; the\n"
            "                   summary goes to stderr (default: text, the summary)\n"
            "  --allow-remote   let --serve listen on a non-loopback address\n"
            "  --allow-host N   host names the dashboard answers to (comma-separated)\n"
            "  -Z USER          live: drop privileges to USER after opening the interface\n"
            "  -s SNAPLEN       live: bytes kept per packet (default %d)\n"
            "  -B MIB           live: kernel buffer size in MiB (default 64)\n"
            "  --immediate      live: deliver packets without buffering delay\n"
            "  --workers N      live: N capture threads, packets spread by connection\n"
            "                   (Linux PACKET_FANOUT; default 1, at most 64)\n"
            "  --no-store       decode and count only, store nothing (benchmarks)\n"
            "  --diagnose-inputs  at the end, store the per-window aggregates and the critical\n"
            "                   path 'tbneck diagnose' reads, so that its first run does not\n"
            "                   read every request (about 4 s of CPU a million requests)\n"
            "  --whatif-inputs  at the end, link every request and store what 'tbneck whatif'\n"
            "                   needs, so that its first run reads them (about 2.5 s of CPU a\n"
            "                   million requests; docs/whatif.md)\n"
            "  --max-memory SIZE  cap flow and parser state at SIZE bytes (k, m, g: KiB, MiB,\n"
            "                   GiB; at least 1m): the least recently active flows are\n"
            "                   evicted beyond it, their waiting requests counted abandoned\n"
            "  -q               no summary\n"
            "  -v               more messages\n"
            "\n"
            "Exit status: 0 success (also when stopped by SIGINT/SIGTERM in any phase:\n"
            "everything read so far is kept, the database closed cleanly and the capture\n"
            "marked 'interrupted' if its input was not read to the end), 1 runtime failure\n"
            "(unreadable or malformed file, database error; a full disk marks the capture\n"
            "'partial' and the summary says how many requests were lost), 2 usage error\n"
            "or a file already stored in --db (the same name and first packet).\n",
            names, MAX_SNAPLEN);
}

/* The capture's source as stored: its files as given, space-separated. */
static void capture_source(const struct tb_capture_args *a, char *source, size_t len)
{
    size_t used = 0;
    source[0] = '\0';
    for (size_t i = 0; i < a->nfiles && used < len - 1; i++)
        used += (size_t)snprintf(source + used, len - used, "%s%s", i ? " " : "", a->files[i]);
}

/* Whether two stored sources name the same files, compared by their last
 * path components (the same trace read from another directory). */
static bool same_files(const char *x, const char *y)
{
    for (;;) {
        size_t lx = strcspn(x, " "), ly = strcspn(y, " ");
        const char *bx = x, *by = y;
        for (size_t i = 0; i < lx; i++)
            if (x[i] == '/')
                bx = x + i + 1;
        for (size_t i = 0; i < ly; i++)
            if (y[i] == '/')
                by = y + i + 1;
        if (x + lx - bx != y + ly - by || memcmp(bx, by, (size_t)(x + lx - bx)) != 0)
            return false;
        if (!x[lx] || !y[ly])
            return !x[lx] && !y[ly];
        x += lx + 1;
        y += ly + 1;
    }
}

static int usage_error(const char *fmt, ...) TB_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tb_log_error("capture: %s (try 'tbneck capture --help')", msg);
    return TB_EXIT_USAGE;
}

enum {
    OPT_TIERS = 256, OPT_DB, OPT_SERVE, OPT_ALLOW_REMOTE, OPT_PROTO, OPT_DURATION, OPT_WINDOW,
    OPT_IMMEDIATE, OPT_NO_STORE, OPT_ALLOW_HOST, OPT_TSPREC, OPT_NANO, OPT_MICRO, OPT_FORMAT,
    OPT_STORE, OPT_SENSOR, OPT_STORE_RETRY, OPT_MAX_MEMORY, OPT_WORKERS, OPT_SPOOL,
    OPT_SPOOL_MAX, OPT_WHATIF_INPUTS, OPT_DIAGNOSE_INPUTS,
};

static const struct option long_opts[] = {
    {"tiers", required_argument, NULL, OPT_TIERS},
    {"db", required_argument, NULL, OPT_DB},
    {"store", required_argument, NULL, OPT_STORE},
    {"sensor", required_argument, NULL, OPT_SENSOR},
    {"store-retry", required_argument, NULL, OPT_STORE_RETRY},
    {"spool", required_argument, NULL, OPT_SPOOL},
    {"spool-max", required_argument, NULL, OPT_SPOOL_MAX},
    {"serve", required_argument, NULL, OPT_SERVE},
    {"allow-remote", no_argument, NULL, OPT_ALLOW_REMOTE},
    {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
    {"proto", required_argument, NULL, OPT_PROTO},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"immediate", no_argument, NULL, OPT_IMMEDIATE},
    {"no-store", no_argument, NULL, OPT_NO_STORE},
    {"time-stamp-precision", required_argument, NULL, OPT_TSPREC},
    {"nano", no_argument, NULL, OPT_NANO},
    {"micro", no_argument, NULL, OPT_MICRO},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"whatif-inputs", no_argument, NULL, OPT_WHATIF_INPUTS},
    {"diagnose-inputs", no_argument, NULL, OPT_DIAGNOSE_INPUTS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

/* Parses argv into *a. Returns -1 on success, else the exit status. The
 * caller frees a->files and *bpf_owned. */
static int parse_args(int argc, char **argv, struct tb_capture_args *a, char **bpf_owned)
{
    memset(a, 0, sizeof *a);
    a->db = TB_DEFAULT_DB;
    a->store_retry_ns = 30 * TB_NS_PER_SEC;
    a->spool_max = (uint64_t)1 << 30;
    a->window_ns = TB_WINDOW_DEFAULT_NS;
    a->snaplen = MAX_SNAPLEN;
    a->bufsize_mib = 64;
    a->dump_prec = -1;
    a->workers = 1;
    *bpf_owned = NULL;
    bool list = false;
    a->files = calloc((size_t)argc + 1, sizeof *a->files);
    if (!a->files) {
        tb_log_error("capture: out of memory");
        return TB_EXIT_FAIL;
    }
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":r:i:f:Z:s:B:c:w:C:G:W:Dnqvh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            a->files[a->nfiles++] = optarg;
            break;
        case 'i':
            if (a->iface)
                return usage_error("-i given twice");
            a->iface = optarg;
            break;
        case 'f':
            a->bpf = optarg;
            break;
        case 'Z':
            a->user = optarg;
            break;
        case 's':
            if (!parse_int(optarg, 0, MAX_SNAPLEN, &a->snaplen))
                return usage_error("bad snaplen '%s' (0 to 262144)", optarg);
            if (a->snaplen == 0)
                a->snaplen = MAX_SNAPLEN;
            break;
        case 'B':
            if (!parse_int(optarg, 1, 4096, &a->bufsize_mib))
                return usage_error("bad buffer size '%s' (1 to 4096 MiB)", optarg);
            break;
        case 'c': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || v == 0 || optarg[0] == '-')
                return usage_error("bad packet count '%s' (a number of packets, 1 or more)",
                                   optarg);
            a->max_packets = v;
            break;
        }
        case 'w':
            a->write = optarg;
            break;
        case 'C':
            if (tb_dump_parse_size(optarg, &a->rotate_bytes))
                return usage_error("bad file size '%s' (millions of bytes, or with k, m, g)",
                                   optarg);
            break;
        case 'G': {
            int secs;
            if (!parse_int(optarg, 1, INT32_MAX, &secs))
                return usage_error("bad rotation period '%s' (whole seconds, 1 or more)", optarg);
            a->rotate_secs = secs;
            break;
        }
        case 'W':
            if (!parse_int(optarg, 1, INT32_MAX, &a->rotate_files))
                return usage_error("bad file count '%s' (1 or more)", optarg);
            break;
        case 'D':
            list = true;
            break;
        case 'n':
            /* tcpdump's "don't resolve names": tbneck never resolves any. */
            break;
        case 'q':
            a->quiet = true;
            break;
        case 'v':
            tb_log_verbosity++;
            break;
        case 'h':
            usage(stdout);
            return TB_EXIT_OK;
        case OPT_TIERS:
            a->tiers_file = optarg;
            break;
        case OPT_DB:
            a->db = optarg;
            break;
        case OPT_STORE: {
            struct tb_store_url u;
            char err[512];
            if (tb_store_url_parse(optarg, &u, err, sizeof err))
                return usage_error("%s", err);
            if (u.kind == TB_STORE_KIND_SQLITE)
                a->db = u.path;
            else
                a->store_url = optarg;
            break;
        }
        case OPT_SENSOR:
            a->sensor = optarg;
            break;
        case OPT_STORE_RETRY:
            if (!strcmp(optarg, "0"))
                a->store_retry_ns = 0;
            else if (tb_parse_duration(optarg, TB_NS_PER_SEC, &a->store_retry_ns) ||
                     a->store_retry_ns < 0)
                return usage_error("bad duration '%s' (e.g. 30s, 0)", optarg);
            break;
        case OPT_SPOOL:
            if (!*optarg)
                return usage_error("--spool needs a directory");
            a->spool_dir = optarg;
            break;
        case OPT_SPOOL_MAX: {
            size_t v;
            if (tb_parse_mem_size(optarg, &v))
                return usage_error("bad --spool-max '%s' (bytes, or with k, m, g; 0: no spool)",
                                   optarg);
            a->spool_max = v;
            a->spool_max_set = true;
            break;
        }
        case OPT_SERVE:
            a->serve = optarg;
            break;
        case OPT_ALLOW_REMOTE:
            a->allow_remote = true;
            break;
        case OPT_ALLOW_HOST:
            a->allow_host = optarg;
            break;
        case OPT_PROTO:
            if (!tb_proto_find(optarg)) {
                char names[256];
                tb_proto_names(names, sizeof names);
                return usage_error("unknown protocol '%s' (%s)", optarg, names);
            }
            a->force_proto = optarg;
            break;
        case OPT_DURATION:
            if (tb_parse_duration(optarg, TB_NS_PER_SEC, &a->duration_ns) || a->duration_ns <= 0)
                return usage_error("bad duration '%s' (e.g. 60s, 5m)", optarg);
            break;
        case OPT_WINDOW:
            if (tb_parse_window(optarg, &a->window_ns))
                return usage_error("bad window '%s' (a duration from 1ms to 1h, e.g. 50ms)",
                                   optarg);
            break;
        case OPT_IMMEDIATE:
            a->immediate = true;
            break;
        case OPT_WORKERS:
            if (!parse_int(optarg, 1, 64, &a->workers))
                return usage_error("bad --workers '%s' (1 to 64 threads)", optarg);
            break;
        case OPT_MAX_MEMORY:
            if (tb_parse_mem_size(optarg, &a->max_memory) || a->max_memory < (1u << 20))
                return usage_error("bad --max-memory '%s' (bytes, or with k, m, g; at least 1m)",
                                   optarg);
            break;
        case OPT_NO_STORE:
            a->no_store = true;
            break;
        case OPT_WHATIF_INPUTS:
            a->whatif_inputs = true;
            break;
        case OPT_DIAGNOSE_INPUTS:
            a->diagnose_inputs = true;
            break;
        case OPT_TSPREC:
            if (!strcmp(optarg, "micro"))
                a->dump_prec = TB_DUMP_MICRO;
            else if (!strcmp(optarg, "nano"))
                a->dump_prec = TB_DUMP_NANO;
            else
                return usage_error("bad time stamp precision '%s' (micro or nano)", optarg);
            break;
        case OPT_NANO:
            a->dump_prec = TB_DUMP_NANO;
            break;
        case OPT_MICRO:
            a->dump_prec = TB_DUMP_MICRO;
            break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "jsonl"))
                a->jsonl = true;
            else if (strcmp(optarg, "text"))
                return usage_error("bad format '%s' (text or jsonl)", optarg);
            break;
        case ':':
            return usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    /* After -r files, further arguments naming existing files are files too;
     * whatever follows is the filter expression, as tcpdump takes it. */
    int i = optind;
    if (a->nfiles)
        while (i < argc && is_file(argv[i]))
            a->files[a->nfiles++] = argv[i++];
    if (i < argc) {
        if (a->bpf)
            return usage_error("filter given twice ('-f %s' and trailing arguments)", a->bpf);
        size_t len = 1;
        for (int k = i; k < argc; k++)
            len += strlen(argv[k]) + 1;
        char *expr = malloc(len);
        if (!expr) {
            tb_log_error("capture: out of memory");
            return TB_EXIT_FAIL;
        }
        expr[0] = '\0';
        for (int k = i; k < argc; k++) {
            if (k > i)
                strcat(expr, " ");
            strcat(expr, argv[k]);
        }
        a->bpf = *bpf_owned = expr;
    }
    if (list) {
        if (a->nfiles || a->iface)
            return usage_error("-D lists the interfaces; it goes with no -r or -i");
        char err[512];
        if (tb_live_list(stdout, err, sizeof err) < 0) {
            tb_log_error("capture: -D: %s", err);
            return TB_EXIT_FAIL;
        }
        return TB_EXIT_OK;
    }
    if (!a->nfiles && !a->iface)
        return usage_error("give -r FILE or -i IFACE");
    if (!a->write && (a->rotate_bytes || a->rotate_secs || a->rotate_files))
        return usage_error("-C, -G and -W rotate the files of -w FILE; give -w");
    if (a->rotate_files && !a->rotate_bytes && !a->rotate_secs)
        return usage_error("-W counts the files of -C or -G; give one of them");
    if (a->write && !strcmp(a->write, "-") &&
        (a->rotate_bytes || a->rotate_secs || a->rotate_files))
        return usage_error("-w - (standard output) cannot be rotated with -C, -G or -W");
    if (a->nfiles && a->iface)
        return usage_error("-r and -i cannot be combined");
    if (a->jsonl && a->nfiles)
        return usage_error("--format jsonl streams a live capture (-i); after an offline "
                           "capture use 'tbneck report --format jsonl'");
    if (a->jsonl && a->write && !strcmp(a->write, "-"))
        return usage_error("-w - and --format jsonl would both write to standard output");
    if ((a->spool_dir || a->spool_max_set) && !(a->store_url && a->iface))
        return usage_error("--spool and --spool-max hold a live capture's rows for ClickHouse; "
                           "give -i and --store clickhouse://...");
    if (a->sensor && !a->store_url)
        return usage_error("--sensor names a sensor's rows in ClickHouse; give --store "
                           "clickhouse://...");
    if (a->nfiles && a->workers > 1)
        return usage_error("--workers spreads a live capture (-i) over threads; an offline "
                           "capture reads one file in order");
    if (a->workers > 1 && (a->write || a->max_packets))
        return usage_error("--workers cannot go with -w or -c (packets arrive on several "
                           "threads, in no one order)");
    if (a->nfiles && a->serve)
        return usage_error("--serve works with -i; after an offline capture use "
                           "'tbneck serve'");
    if (a->whatif_inputs && (a->no_store || a->store_url))
        return usage_error("--whatif-inputs stores whatif's inputs in the SQLite database "
                           "(--db); not with %s", a->no_store ? "--no-store" : "--store");
    if (a->diagnose_inputs && (a->no_store || a->store_url))
        return usage_error("--diagnose-inputs stores diagnose's inputs in the SQLite database "
                           "(--db); not with %s", a->no_store ? "--no-store" : "--store");
    return -1;
}

/* ---- whatif's inputs at the end --------------------------------------------- */

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tb_capture_whatif_inputs(struct tb_store *st, const struct tb_catalog *cat, FILE *out)
{
    char err[256] = "";
    bool computed = false;
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    int rc = tb_whatif_prepare(st, cat, &computed, err, sizeof err);
    double dt = clock_s(CLOCK_MONOTONIC) - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (rc) {
        tb_log_warn("capture: --whatif-inputs: %s; 'tbneck whatif' computes them on its first "
                    "run", err[0] ? err : tb_strerror(rc));
        return;
    }
    if (out && computed)
        fprintf(out, "  whatif inputs: every request linked, links and inputs stored in %.2f s "
                     "(%.2f s CPU)\n", dt, dc);
    else if (out)
        fprintf(out, "  whatif inputs: already stored for these requests\n");
}

/* ---- offline run ----------------------------------------------------------- */

static volatile int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

struct run {
    struct tb_writer *w;
    struct tb_ch *ch;
    const struct tb_catalog *cat;
    int werr;
    uint64_t *per_tier; /* requests by tier id */
    size_t ntier;
    /* The end, for the store and the summary. */
    bool st_open;
    enum tb_capture_state state;
    uint64_t stored;
    struct tb_capture_tier *end;
    size_t nend;
    char why_lost[160];
};

/* Out of memory, the count is lost; the requests are not. The array is grown
 * only for a new tier: a call per request was measurable. */
static void tier_add(struct run *run, uint32_t tier, uint64_t n)
{
    if (tier < run->ntier ||
        tb_grow_zero(&run->per_tier, &run->ntier, (size_t)tier + 1, sizeof *run->per_tier) == 0)
        run->per_tier[tier] += n;
}

static void store_request(struct run *run, const struct tb_request *r)
{
    if (run->w && !run->werr) {
        int rc = tb_writer_request(run->w, r);
        if (rc)
            run->werr = rc;
    }
    if (run->ch && !run->werr) {
        int rc = tb_ch_request(run->ch, run->cat, r);
        if (rc)
            run->werr = rc;
    }
}

static void on_request(void *ud, const struct tb_request *r)
{
    tier_add(ud, r->tier, 1);
    store_request(ud, r);
}

/* Offline, requests come in batches (tb_engine_set_batch_cb): one call per
 * batch, and a run of one tier's requests counted at once (an increment per
 * request in memory was a chain of dependent stores). */
static void on_requests(void *ud, const struct tb_request *r, size_t n)
{
    struct run *run = ud;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && r[j].tier == r[i].tier; j++)
            ;
        tier_add(run, r[i].tier, j - i);
    }
    if (run->w || run->ch)
        for (size_t i = 0; i < n; i++)
            store_request(run, &r[i]);
}

static void on_conn(void *ud, const struct tb_conn *c)
{
    struct run *run = ud;
    /* Offline, a connection's opening record would be replaced before anyone
     * reads it: only the final one is stored. */
    if (c->closed == TB_CONN_OPEN)
        return;
    if (run->w && !run->werr) {
        int rc = tb_writer_conn(run->w, c);
        if (rc)
            run->werr = rc;
    }
    if (run->ch && !run->werr) {
        int rc = tb_ch_conn(run->ch, run->cat, c);
        if (rc)
            run->werr = rc;
    }
}

/* Peak resident memory of this process image (VmHWM: unlike getrusage's
 * maxrss it does not count what the parent held before exec). -1 unknown. */
static long peak_rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

void tb_cli_catch_stop(void (*handler)(int), struct sigaction old[2])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

void tb_cli_restore_stop(const struct sigaction old[2])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

const char *tb_capture_sensor(const struct tb_capture_args *a, char *buf, size_t len)
{
    if (a->sensor)
        return a->sensor;
    /* The host name, with what a sensor name may not hold made '_'. */
    if (len < 65 || gethostname(buf, len) != 0 || !buf[0]) {
        snprintf(buf, len, "sensor");
        return buf;
    }
    buf[64] = '\0';
    for (char *c = buf; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", *c))
            *c = '_';
    return buf;
}

int tb_parse_mem_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    if (!s || *s < '0' || *s > '9')
        return TB_E_INVAL;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (errno || *end || v > (SIZE_MAX >> shift))
        return TB_E_INVAL;
    *out = (size_t)(v << shift);
    return 0;
}

int tb_capture_end_make(const struct tb_engine *e, const struct tb_catalog *cat,
                        const uint64_t *seen, size_t nseen, const uint64_t *stored,
                        size_t nstored, struct tb_capture_tier **tiers, size_t *ntiers)
{
    size_t n = 0, cap = 0;
    struct tb_capture_tier *t = NULL;
    *tiers = NULL;
    *ntiers = 0;
    /* Every tier the catalog knows: one with abandoned requests only (a
     * server that never answered) has no record but a row all the same. */
    uint32_t last = tb_catalog_tier_count(cat);
    for (uint32_t id = 1; id <= last; id++) {
        uint64_t un, ab;
        tb_engine_tier_counts(e, id, &un, &ab);
        uint64_t se = id < nseen ? seen[id] : 0, so = id < nstored ? stored[id] : 0;
        if (!se && !so && !un && !ab)
            continue;
        if (tb_grow(&t, &cap, n + 1, sizeof *t)) {
            free(t);
            return TB_E_NOMEM;
        }
        t[n++] = (struct tb_capture_tier){id, se, so, un, ab};
    }
    *tiers = t;
    *ntiers = n;
    return 0;
}

/* What diagnose reads from the requests, computed once now that they are all
 * stored (docs/diagnose.md "Speed"): a diagnose of the capture then reads a
 * few aggregates. It stands without them: a failure is a warning. */
void tb_cli_store_diagnose_inputs(struct tb_store *st)
{
    char err[512] = "";
    int rc = tb_diagnose_store_inputs(st, NULL, err, sizeof err);
    if (rc)
        tb_log_warn("capture: diagnose's inputs are not stored (%s); diagnose reads the requests",
                    err[0] ? err : tb_strerror(rc));
}

static void summary(const struct tb_capture_args *a, const struct tb_capture_stats *s,
                    const struct tb_catalog *cat, const struct run *run)
{
    fprintf(stderr,
            "capture: %" PRIu64 " packets (%" PRIu64 " bytes, %" PRIu64 " TCP), %" PRIu64
            " requests, %" PRIu64 " flows (%" PRIu64 " mid-stream, at most %" PRIu64
            " open)\n",
            s->packets, s->bytes, s->tcp_packets, s->requests, s->flows, s->midstream_flows,
            s->flows_active_max);
    for (size_t i = 0; i < run->nend; i++) {
        const struct tb_capture_tier *ct = &run->end[i];
        const struct tb_tier_info *ti = tb_catalog_tier_get(cat, ct->tier);
        if (!ti)
            continue;
        fprintf(stderr, "  tier %-20s %" PRIu64 " requests", ti->name, ct->seen);
        if (run->st_open && ct->stored != ct->seen)
            fprintf(stderr, " (%" PRIu64 " stored)", ct->stored);
        if (ct->unanswered || ct->abandoned)
            fprintf(stderr, ", %" PRIu64 " unanswered, %" PRIu64 " abandoned", ct->unanswered,
                    ct->abandoned);
        fputc('\n', stderr);
    }
    fprintf(stderr,
            "  gaps %" PRIu64 " (%" PRIu64 " bytes), parse errors %" PRIu64 ", truncated %" PRIu64
            ", evicted flows %" PRIu64 ", fragments %" PRIu64 ", decode errors %" PRIu64
            ", retransmitted bytes %" PRIu64 "\n",
            s->gaps, s->gap_bytes, s->parse_errors, s->truncated, s->evicted_flows,
            s->ip_fragments, s->decode_errors, s->retransmitted_bytes);
    if (s->encrypted_flows || s->compressed_flows || s->streams || s->unanswered)
        fprintf(stderr,
                "  encrypted flows %" PRIu64 ", compressed flows %" PRIu64
                ", push streams %" PRIu64 " (not paired), unanswered requests %" PRIu64
                " (noreply, quiet: not recorded)\n",
                s->encrypted_flows, s->compressed_flows, s->streams, s->unanswered);
    if (s->probes)
        fprintf(stderr, "  health probes %" PRIu64 " (AJP CPing: not requests, not recorded)\n",
                s->probes);
    if (s->abandoned || s->evicted_flows)
        fprintf(stderr,
                "  abandoned requests %" PRIu64 " (no answer when their connection ended, timed "
                "out or was evicted: not recorded), evicted flows %" PRIu64 "%s\n",
                s->abandoned, s->evicted_flows, a->max_memory ? " (--max-memory)" : "");
    if (run->ch) {
        fprintf(stderr, "  stored in %s\n", a->store_url);
    } else if (!run->st_open) {
        /* --no-store, or the database never opened: nothing to say. */
    } else if (run->state == TB_CAPTURE_PARTIAL) {
        fprintf(stderr,
                "  partial: %" PRIu64 " of %" PRIu64 " requests stored in %s, %" PRIu64
                " lost (%s); the capture is marked 'partial' and reports say so\n",
                run->stored, s->requests, a->db, s->requests - TB_MIN(run->stored, s->requests),
                run->why_lost[0] ? run->why_lost : "the database failed");
    } else if (run->state == TB_CAPTURE_INTERRUPTED) {
        fprintf(stderr, "  stored in %s (interrupted: the input was not read to its end)\n",
                a->db);
    } else {
        fprintf(stderr, "  stored in %s\n", a->db);
    }
    tb_log_info("capture: flow state %zu bytes per flow, plus %zu of parser state once a flow "
                "carries payload; peak memory %ld KiB; %" PRIu64 " idle-closed, %" PRIu64
                " out-of-order bytes buffered, %" PRIu64 " overlapping, %" PRIu64 " non-IP, %"
                PRIu64 " non-TCP",
                tb_engine_flow_bytes(), tb_engine_parser_bytes(), peak_rss_kib(), s->idle_closed,
                s->ooo_buffered_bytes, s->overlap_bytes, s->non_ip, s->non_tcp);
}

static int run_offline(const struct tb_capture_args *a)
{
    struct tb_tiers *tiers = NULL;
    struct tb_catalog *cat = NULL;
    struct tb_store *st = NULL;
    struct tb_engine *e = NULL;
    struct run run = {0};
    int64_t capture_id = 0;
    uint64_t first_conn = 1;
    char err[768] = "";
    int rc, exit_code = TB_EXIT_FAIL;
    bool dump_full = false;
    const struct tb_dump_opts dump = {
        .path = a->write,
        .rotate_bytes = a->rotate_bytes,
        .rotate_secs = a->rotate_secs,
        .files = a->rotate_files,
    };
    int64_t first_ns = INT64_MAX;
    struct tb_offline_opts oo = {
        .files = a->files,
        .nfiles = a->nfiles,
        .bpf = a->bpf,
        .progress = !a->quiet,
        .stop = &g_stop,
        .duration_ns = a->duration_ns,
        .max_packets = a->max_packets,
        .dump = a->write ? &dump : NULL,
        .dump_prec = a->dump_prec,
        .dump_full = &dump_full,
        .first_ns = &first_ns,
    };

    /* From here on an interrupt stops the run cleanly, whatever phase it is in. */
    struct sigaction old_sig[2];
    tb_cli_catch_stop(on_signal, old_sig);

    /* Inputs are checked before the database is created or touched. */
    if (a->tiers_file && tb_tiers_load(a->tiers_file, &tiers, err, sizeof err)) {
        tb_log_error("capture: %s", err);
        goto out;
    }
    if ((rc = tb_offline_check(&oo, err, sizeof err))) {
        tb_log_error("capture: %s", err);
        exit_code = rc == TB_E_INVAL ? TB_EXIT_USAGE : TB_EXIT_FAIL;
        goto out;
    }
    if (tb_catalog_new(&cat)) {
        tb_log_error("capture: out of memory");
        goto out;
    }
    if (a->store_url && !a->no_store) {
        struct tb_store_url u;
        char host[256];
        const char *sensor = tb_capture_sensor(a, host, sizeof host);
        tb_store_url_parse(a->store_url, &u, err, sizeof err);
        if ((rc = tb_ch_open(&run.ch, &u, sensor, true, a->store_retry_ns, err, sizeof err)) ||
            (rc = tb_ch_next_conn(run.ch, &first_conn))) {
            tb_log_error("capture: %s", run.ch ? tb_ch_error(run.ch) : err);
            if (rc == TB_E_INVAL || rc == TB_E_UNSUPP)
                exit_code = TB_EXIT_USAGE;
            goto out;
        }
        run.cat = cat;
    } else if (!a->no_store) {
        if (tb_store_open(&st, a->db, TB_STORE_CREATE, err, sizeof err)) {
            tb_log_error("capture: %s", err);
            goto out;
        }
        if ((rc = tb_store_load_catalog(st, cat))) {
            tb_log_error("capture: %s: cannot load the catalog: %s", a->db, tb_strerror(rc));
            goto out;
        }
        /* The same trace read again (the same first packet) would store
         * every request twice and double every load: refused, before
         * anything is written. */
        int64_t same = 0;
        char src[256], state[32], when[40], mine[256];
        if (first_ns != INT64_MAX &&
            (rc = tb_store_capture_starting(st, first_ns, &same, src, sizeof src, state,
                                            sizeof state))) {
            tb_log_error("capture: %s: %s", a->db, tb_strerror(rc));
            goto out;
        }
        capture_source(a, mine, sizeof mine);
        if (same && same_files(src, mine)) {
            tb_log_error("capture: %s already holds capture %" PRId64 " (%s, %s) of the same "
                         "file, from the same first packet at %s: storing it again would count "
                         "every request twice; give another --db, or remove the file first",
                         a->db, same, src, state, tb_fmt_iso(first_ns, when, sizeof when));
            exit_code = TB_EXIT_USAGE;
            goto out;
        }
    }
    if (tiers && (rc = tb_tiers_register(tiers, cat))) {
        tb_log_error("capture: %s: %s", a->tiers_file, tb_strerror(rc));
        goto out;
    }
    if (st) {
        char source[256];
        capture_source(a, source, sizeof source);
        if ((rc = tb_store_capture_begin(st, source, &capture_id)) ||
            (first_ns != INT64_MAX && (rc = tb_store_capture_first(st, capture_id, first_ns))) ||
            (rc = tb_store_next_conn(st, &first_conn)) ||
            (rc = tb_writer_start_opts(&run.w, st, capture_id,
                                       &(struct tb_writer_opts){.bulk = true,
                                                                .keep_index = true})) ||
            (rc = tb_writer_catalog(run.w, cat))) {
            tb_log_error("capture: %s: %s", a->db, tb_strerror(rc));
            goto out;
        }
    }
    struct tb_engine_opts eo = {.force_proto = a->force_proto, .first_conn = first_conn,
                                .max_memory = a->max_memory};
    if ((rc = tb_engine_new(&e, cat, tiers, &eo, on_request, &run))) {
        tb_log_error("capture: cannot start the engine: %s", tb_strerror(rc));
        goto out;
    }
    if (a->max_memory)
        tb_log_info("capture: --max-memory %zu bytes: at most %zu flows", a->max_memory,
                    tb_engine_max_flows(e));
    tb_engine_set_conn_cb(e, on_conn, &run);
    tb_engine_set_batch_cb(e, on_requests, &run);

    rc = tb_offline_run(e, &oo, err, sizeof err);

    /* Whatever was read is kept, whether the run ended well or not. */
    tb_engine_finish(e, tb_engine_stats(e)->last_ns);
    /* The summary comes first so that an error, if any, is the last line. */
    int run_rc = rc, wrc = 0, erc = 0;
    uint64_t *stored_tier = NULL;
    size_t nstored_tier = 0;
    if (run.w) {
        wrc = tb_writer_finish_counts(run.w, &run.stored, &stored_tier, &nstored_tier);
        run.w = NULL;
        if (!wrc)
            wrc = run.werr;
    }
    if (run.ch) {
        wrc = run.werr ? run.werr : tb_ch_flush(run.ch);
        if (!wrc)
            wrc = tb_ch_put_hosts(run.ch, cat);
    }
    const struct tb_capture_stats *cs = tb_engine_stats(e);
    if (tb_capture_end_make(e, cat, run.per_tier, run.ntier, stored_tier, nstored_tier, &run.end,
                            &run.nend))
        tb_log_warn("capture: out of memory: the per-tier counts are not stored");
    free(stored_tier);
    run.st_open = st != NULL;
    run.state = TB_CAPTURE_COMPLETE;
    if (wrc || run.stored < cs->requests) {
        run.state = TB_CAPTURE_PARTIAL;
        snprintf(run.why_lost, sizeof run.why_lost, "%s",
                 wrc == TB_E_FULL ? "disk full" : wrc ? tb_strerror(wrc) : "the writer stopped");
    } else if (run_rc) {
        run.state = TB_CAPTURE_INTERRUPTED;
    }
    if (st) {
        struct tb_capture_end ce = {
            .state = run.state,
            .stored = run.stored,
            .unanswered = cs->unanswered,
            .abandoned = cs->abandoned,
            .memory_evicted = a->max_memory ? cs->evicted_flows : 0,
            .tiers = run.end,
            .ntiers = run.nend,
        };
        erc = tb_store_capture_finish(st, capture_id, cs, &ce);
    }
    if (a->diagnose_inputs && st && !erc && !wrc)
        tb_cli_store_diagnose_inputs(st);
    if (!a->quiet)
        summary(a, tb_engine_stats(e), cat, &run);
    if (a->whatif_inputs && st && !wrc && !erc && !run_rc)
        tb_capture_whatif_inputs(st, cat, a->quiet ? NULL : stderr); /* with the summary */
    exit_code = TB_EXIT_OK;
    if (dump_full)
        tb_log_warn("capture: -w: maximum file limit reached: %d (as tcpdump, the capture "
                    "stopped there)", a->rotate_files);
    if (run_rc == TB_E_INTR) {
        tb_log_warn("capture: interrupted; everything read so far is kept");
    } else if (run_rc) {
        tb_log_error("capture: %s", err);
        exit_code = TB_EXIT_FAIL;
    }
    if (wrc && run.ch) {
        tb_log_error("capture: %s", tb_ch_error(run.ch)[0] ? tb_ch_error(run.ch)
                                                           : tb_strerror(wrc));
        exit_code = TB_EXIT_FAIL;
    } else if (wrc) {
        tb_log_error("capture: %s: writing requests failed (%s): %" PRIu64 " of %" PRIu64
                     " requests stored, the capture is marked %s",
                     a->db, run.why_lost, run.stored, cs->requests,
                     erc ? "'running' (its row could not be updated either)" : "'partial'");
        exit_code = TB_EXIT_FAIL;
    } else if (erc) {
        tb_log_error("capture: %s: %s", a->db, tb_strerror(erc));
        exit_code = TB_EXIT_FAIL;
    }
out:
    if (run.w)
        tb_writer_finish(run.w);
    tb_engine_free(e);
    tb_ch_close(run.ch);
    /* The handlers stay until the store is closed (issue 13, finding 7: a
     * SIGTERM in this last phase killed the process with 143 after a full
     * summary and left -wal and -shm behind). A signal now only sets g_stop,
     * which nothing reads any more: the exit status is the run's. */
    tb_store_close(st);
    tb_cli_restore_stop(old_sig);
    tb_catalog_free(cat);
    tb_tiers_free(tiers);
    free(run.per_tier);
    free(run.end);
    return exit_code;
}

/* -w's folder must exist and be writable before anything else is created
 * (a database must not be left behind by a capture that cannot start). The
 * file itself is created when the capture starts, as tcpdump creates it. */
static int check_dump_dir(const char *path)
{
    if (!strcmp(path, "-"))
        return -1;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    /* A folder named by -G's time pattern exists only once expanded. */
    if (strchr(dir, '%'))
        return -1;
    if (access(dir, W_OK | X_OK) != 0) {
        tb_log_error("capture: -w %s: %s: %s", path, dir, strerror(errno));
        return TB_EXIT_FAIL;
    }
    return -1;
}

int tb_cmd_capture(int argc, char **argv)
{
    struct tb_capture_args a;
    char *bpf = NULL;
    int rc = parse_args(argc, argv, &a, &bpf);
    if (rc < 0 && a.write)
        rc = check_dump_dir(a.write);
    if (rc < 0)
        rc = a.iface ? tb_capture_live(&a) : run_offline(&a);
    free(a.files);
    free(bpf);
    return rc;
}
