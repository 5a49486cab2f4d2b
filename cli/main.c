/* SPDX-License-Identifier: MIT */
/* main.c — tbneck's entry point: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *synopsis;
} commands[] = {
    {"capture", tb_cmd_capture,
     "capture -r FILE... | -i IFACE [--tiers FILE] [--db FILE] [-f BPF] [--duration 60s]\n"
     "                 [-Z USER] [--window " TB_WINDOW_DEFAULT "] [--serve ADDR] [-w FILE]"
     " [-c COUNT] | -D"},
    {"report", tb_cmd_report,
     "report --tier NAME [--window " TB_WINDOW_DEFAULT "] [--server ADDR:PORT] [--from T --to T]\n"
     "                 [--plot FILE.png|svg] [--format text|json|csv|jsonl] [--profile]"
     " [--db FILE]"},
    {"diagnose", tb_cmd_diagnose,
     "diagnose [--window " TB_WINDOW_DEFAULT "] [--from T --to T] [--format text|json|csv]\n"
     "                 [--plot FILE.png|svg] [--db FILE]"},
    {"tiers", tb_cmd_tiers, "tiers [--db FILE]"},
    {"export", tb_cmd_export,
     "export requests [--tier NAME] [--db FILE]\n"
     "       export windows --tier NAME --window " TB_WINDOW_DEFAULT
     " [--server ADDR:PORT] [--db FILE]\n"
     "       export connections [--tier NAME] [--from T --to T] [--db FILE]"},
    {"serve", tb_cmd_serve, "serve [--db FILE] [--listen 127.0.0.1:8080] [--allow-remote]"},
    {"events", tb_cmd_events,
     "events import --gc FILE --tier NAME [--db FILE] | events list | events report"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tbneck COMMAND [OPTIONS]\n\n"
               "Finds transient bottlenecks in n-tier stacks from a network tap or a pcap.\n\n");
    for (size_t i = 0; i < TB_ARRAY_SIZE(commands); i++)
        fprintf(f, "  tbneck %s\n", commands[i].synopsis);
    fprintf(f, "\n  tbneck --version\n\n"
               "man tbneck describes every command; T in --from/--to is a UTC time as the\n"
               "report prints it (2023-11-14 22:13:25), now-5m, start+10s or end-1m.\n"
               "Exit status: 0 success, 1 runtime failure (bad input, missing interface),\n"
               "2 usage error. 'tbneck COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return TB_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("tbneck %s\n", TB_VERSION);
        return TB_EXIT_OK;
    }
    for (size_t i = 0; i < TB_ARRAY_SIZE(commands); i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    tb_log_error("unknown command '%s' (try 'tbneck --help')", cmd);
    return TB_EXIT_USAGE;
}
