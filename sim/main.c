/* SPDX-License-Identifier: MIT */
/* main.c — tbneck-sim's command line: configuration, overrides, run, summary. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tbneck-sim [-c] CONFIG --out PREFIX [options]\n"
            "\n"
            "Simulates a closed n-tier system (HTTP front, HTTP application, and a MySQL,\n"
            "PostgreSQL or Redis tier) and writes what a tap would see as PREFIX.pcap, with\n"
            "the ground truth beside it: PREFIX.requests.csv, .connections.csv, .causes.csv,\n"
            ".verdict.csv, .freezes.csv, .speed.csv, .expected.csv, .dropped.csv and\n"
            ".truth.conf. The configuration format is described in docs/sim.md.\n"
            "\n"
            "  -c, --config FILE     configuration (or give it as the first argument)\n"
            "  -o, --out PREFIX      output prefix (required), e.g. out/sim\n"
            "      --seed N          override [sim] seed\n"
            "      --duration D      override [sim] duration (e.g. 30s)\n"
            "      --users N         override [sim] users\n"
            "      --servers A/B/C   override the servers of each tier\n"
            "      --drop F          drop a fraction F of packets from the pcap\n"
            "      --reorder F       swap a fraction F of packets with their successor\n"
            "      --duplicate F     write a fraction F of packets twice\n"
            "      --snaplen N       cut packets to N bytes in the pcap\n"
            "      --capture-from D  the tap starts D after the start: connections are\n"
            "                        picked up mid-stream; the truth starts there too\n"
            "      --set S.KEY=VALUE override one configuration value (repeatable), e.g.\n"
            "                        --set tier.db.cores=3 --set tier.app.pool=8\n"
            "                        --set tier.db.speedup=2 --set class.A.demand.app=exp(2ms);\n"
            "                        sections sim, tier.NAME, class.NAME, freeze.N, expect\n"
            "  -q, --quiet           no summary on stderr\n"
            "  -h, --help            this text\n"
            "\n"
            "The same configuration and seed give a byte-identical pcap. Impairments change\n"
            "only the pcap, never the truth files. Exit status: 0 success, 1 runtime\n"
            "failure (unwritable output, bad configuration file), 2 usage error.\n");
}

static int parse_fraction(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= 0 && v <= 1)) {
        fprintf(stderr, "tbneck-sim: %s: '%s' is not a fraction between 0 and 1\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    enum {
        O_SEED = 256, O_DURATION, O_USERS, O_SERVERS, O_DROP, O_REORDER, O_DUP, O_SNAPLEN,
        O_CAPFROM, O_SET
    };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"out", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, O_SEED},
        {"duration", required_argument, NULL, O_DURATION},
        {"users", required_argument, NULL, O_USERS},
        {"servers", required_argument, NULL, O_SERVERS},
        {"drop", required_argument, NULL, O_DROP}, {"reorder", required_argument, NULL, O_REORDER},
        {"duplicate", required_argument, NULL, O_DUP},
        {"snaplen", required_argument, NULL, O_SNAPLEN},
        {"capture-from", required_argument, NULL, O_CAPFROM},
        {"set", required_argument, NULL, O_SET}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *prefix = NULL, *seed = NULL, *duration = NULL, *users = NULL,
               *servers = NULL, *capfrom = NULL;
    struct sim_impair imp = {0};
    bool quiet = false;
    static const char *sets[256];
    int nsets = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:o:qh", opts, NULL)) != -1) {
        switch (opt) {
        case 'c': config = optarg; break;
        case 'o': prefix = optarg; break;
        case O_SEED: seed = optarg; break;
        case O_DURATION: duration = optarg; break;
        case O_USERS: users = optarg; break;
        case O_SERVERS: servers = optarg; break;
        case O_DROP:
            if (parse_fraction("--drop", optarg, &imp.drop) < 0)
                return TB_EXIT_USAGE;
            break;
        case O_REORDER:
            if (parse_fraction("--reorder", optarg, &imp.reorder) < 0)
                return TB_EXIT_USAGE;
            break;
        case O_DUP:
            if (parse_fraction("--duplicate", optarg, &imp.duplicate) < 0)
                return TB_EXIT_USAGE;
            break;
        case O_SNAPLEN: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 54 || v > 262144) {
                fprintf(stderr, "tbneck-sim: --snaplen: '%s' is not in [54, 262144]\n", optarg);
                return TB_EXIT_USAGE;
            }
            imp.snaplen = (int)v;
            break;
        }
        case O_CAPFROM: capfrom = optarg; break;
        case O_SET:
            if (nsets == (int)TB_ARRAY_SIZE(sets)) {
                fprintf(stderr, "tbneck-sim: --set: at most %zu overrides\n", TB_ARRAY_SIZE(sets));
                return TB_EXIT_USAGE;
            }
            sets[nsets++] = optarg;
            break;
        case 'q': quiet = true; break;
        case 'h': usage(stdout); return TB_EXIT_OK;
        default: usage(stderr); return TB_EXIT_USAGE;
        }
    }
    if (!config && optind < argc)
        config = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "tbneck-sim: unexpected argument '%s'\n", argv[optind]);
        return TB_EXIT_USAGE;
    }
    if (!config || !prefix) {
        fprintf(stderr, "tbneck-sim: %s is required (see --help)\n",
                !config ? "a configuration file" : "--out PREFIX");
        return TB_EXIT_USAGE;
    }

    static struct sim_conf conf;
    char err[512];
    sim_conf_defaults(&conf);
    if (sim_conf_load(&conf, config, err, sizeof err) < 0) {
        fprintf(stderr, "tbneck-sim: %s\n", err);
        return TB_EXIT_FAIL;
    }
    /* Overrides in the order given, then the dedicated options. */
    for (int i = 0; i < nsets; i++)
        if (sim_conf_set(&conf, sets[i], err, sizeof err) < 0) {
            fprintf(stderr, "tbneck-sim: %s\n", err);
            return TB_EXIT_USAGE;
        }
    if (seed) {
        char *end;
        errno = 0;
        conf.seed = strtoull(seed, &end, 0);
        if (errno || *end || end == seed || *seed == '-') {
            fprintf(stderr, "tbneck-sim: --seed: '%s' is not an unsigned integer\n", seed);
            return TB_EXIT_USAGE;
        }
    }
    if (duration && (tb_parse_duration(duration, TB_NS_PER_SEC, &conf.duration_ns) < 0 ||
                     conf.duration_ns <= 0)) {
        fprintf(stderr, "tbneck-sim: --duration: '%s' is not a duration (e.g. 30s)\n", duration);
        return TB_EXIT_USAGE;
    }
    if (users) {
        char *end;
        long v = strtol(users, &end, 10);
        if (*end || end == users || v < 1 || v > 1000000) {
            fprintf(stderr, "tbneck-sim: --users: '%s' is not in [1, 1000000]\n", users);
            return TB_EXIT_USAGE;
        }
        conf.users = (int)v;
    }
    if (servers && sim_conf_set_servers(&conf, servers, err, sizeof err) < 0) {
        fprintf(stderr, "tbneck-sim: --servers: %s\n", err);
        return TB_EXIT_USAGE;
    }
    if (sim_conf_finish(&conf, err, sizeof err) < 0) {
        fprintf(stderr, "tbneck-sim: %s: %s\n", config, err);
        return TB_EXIT_FAIL;
    }

    if (capfrom) {
        int64_t off;
        if (tb_parse_duration(capfrom, TB_NS_PER_SEC, &off) < 0) {
            fprintf(stderr, "tbneck-sim: --capture-from: '%s' is not a duration (e.g. 2s)\n",
                    capfrom);
            return TB_EXIT_USAGE;
        }
        imp.capture_from_ns = conf.start_ns + off;
    }
    struct sim_out out;
    if (sim_out_open(&out, prefix, &imp, conf.seed, err, sizeof err) < 0) {
        fprintf(stderr, "tbneck-sim: %s\n", err);
        return TB_EXIT_FAIL;
    }
    out.ipv6 = conf.ipv6;
    sim_conf_write(&conf, out.conf);
    sim_write_expected(&conf, out.expected);
    sim_write_verdict(&conf, out.verdict);
    struct sim_stats st;
    double t0 = now_s();
    int rc = sim_run(&conf, &out, &st, err, sizeof err);
    int crc = sim_out_close(&out);
    double el = now_s() - t0;
    if (rc < 0) {
        fprintf(stderr, "tbneck-sim: %s\n", err);
        return TB_EXIT_FAIL;
    }
    if (crc < 0) {
        fprintf(stderr, "tbneck-sim: %s: write error (disk full?)\n", prefix);
        return TB_EXIT_FAIL;
    }
    if (!quiet) {
        fprintf(stderr, "tbneck-sim: %s.pcap: %" PRIu64 " packets (%" PRIu64 " written, %" PRIu64
                        " dropped, %" PRIu64 " reordered, %" PRIu64 " duplicated), %" PRIu64
                        " pages, requests",
                prefix, st.packets, st.packets_written, st.dropped, st.reordered, st.duplicated,
                st.pages);
        for (int t = 0; t < conf.ntiers; t++)
            fprintf(stderr, " %s=%" PRIu64, conf.tiers[t].wire_name, st.requests[t]);
        fprintf(stderr,
                ", %" PRIu64 " freezes, %" PRIu64 " speed changes; %.2f s, %.0f packets/s\n",
                st.freezes, st.speed_changes, el, el > 0 ? (double)st.packets / el : 0.0);
    }
    return TB_EXIT_OK;
}
