/* SPDX-License-Identifier: MIT */
/* cmd_serve.c — `tbneck serve`: the web dashboard over a database, on a libuv
 * loop, until SIGINT or SIGTERM. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "cli.h"
#include "report_util.h"
#include "web.h"

static const char usage_text[] =
    "usage: tbneck serve [--db FILE | --store URL] [--listen 127.0.0.1:8080]\n"
    "                    [--allow-remote]\n"
    "                    [--allow-host NAME[,NAME...]] [--static DIR]"
    " [--window " TB_WINDOW_DEFAULT "]\n\n"
    "Serves the dashboard and its JSON API (/api/tiers, /api/windows, /api/scatter,\n"
    "/api/episodes, /api/analysis, /api/health, /api/stream) over the database.\n"
    "Binds loopback only unless --allow-remote; port 0 picks a free port. Requests\n"
    "naming another host than an IP address, localhost or an --allow-host name are\n"
    "refused (403: DNS rebinding). New rows\n"
    "written by a running capture are pushed to /api/stream every second.\n"
    "--window is the width of the windows announced on the stream.\n"
    "--store sqlite:FILE is --db FILE; --store clickhouse://HOST:PORT/DATABASE serves\n"
    "what every sensor stored there when serve started (a copy in $TMPDIR, removed\n"
    "at the end; restart serve to see newer rows): docs/clickhouse.md.\n"
    "Exit status: 0 after SIGINT/SIGTERM, 1 on a runtime failure (missing database,\n"
    "address in use), 2 on a usage error (bad option, non-loopback address).\n";

struct serve_ctx {
    struct tb_web *web;
    uv_signal_t sigint, sigterm;
};

static void on_signal(uv_signal_t *s, int signum)
{
    struct serve_ctx *ctx = s->data;
    (void)signum;
    tb_web_close(ctx->web);
    uv_close((uv_handle_t *)&ctx->sigint, NULL);
    uv_close((uv_handle_t *)&ctx->sigterm, NULL);
}

static int serve(const char *db, const char *store, const char *listen, const char *static_dir,
                 bool allow_remote, const char *allow_host, int64_t width_ns);

int tb_cmd_serve(int argc, char **argv)
{
    const char *db = TB_DEFAULT_DB, *listen = "127.0.0.1:8080", *static_dir = NULL;
    const char *window = NULL, *allow_host = NULL, *store = NULL;
    bool allow_remote = false;
    const struct tb_cli_opt opts[] = {
        {"db", &db, NULL},
        {"store", &store, NULL},
        {"listen", &listen, NULL},
        {"static", &static_dir, NULL},
        {"window", &window, NULL},
        {"allow-remote", NULL, &allow_remote},
        {"allow-host", &allow_host, NULL},
    };
    int rc;
    if (tb_cli_args(argc, argv, 1, opts, TB_ARRAY_SIZE(opts), "serve", usage_text, &rc))
        return rc;
    int64_t width_ns = TB_WINDOW_DEFAULT_NS;
    if (window && tb_parse_window(window, &width_ns) != 0) {
        tb_log_error("serve: bad --window '%s' (expected a duration from 1ms to 1h, such as 50ms)",
                     window);
        return TB_EXIT_USAGE;
    }

    /* A ClickHouse store is served from its merged copy (cli/store_url.c). */
    struct tb_cli_db copy = {0};
    if (store) {
        if ((rc = tb_cli_db_open_store(&copy, db, store, true)) != 0)
            return rc;
        if (copy.tmp)
            db = copy.tmp;
        else
            db = store + strlen("sqlite:");
    }
    int exit_code = serve(db, store, listen, static_dir, allow_remote, allow_host, width_ns);
    tb_cli_db_close(&copy);
    return exit_code;
}

static int serve(const char *db, const char *store, const char *listen, const char *static_dir,
                 bool allow_remote, const char *allow_host, int64_t width_ns)
{
    int rc;
    uv_loop_t loop;
    if (uv_loop_init(&loop) < 0) {
        tb_log_error("serve: cannot create the event loop");
        return TB_EXIT_FAIL;
    }
    struct serve_ctx ctx = {0};
    struct tb_web_opts wo = {
        .listen = listen,
        .allow_remote = allow_remote,
        .allow_hosts = allow_host,
        .static_dir = static_dir,
        .db_path = db,
        .poll_db = true,
        .stream_width_ns = width_ns,
    };
    char err[512] = "";
    rc = tb_web_new(&ctx.web, &loop, &wo, err, sizeof err);
    if (rc < 0) {
        tb_log_error("serve: %s", err);
        uv_run(&loop, UV_RUN_DEFAULT); /* lets a failed listener finish closing */
        uv_loop_close(&loop);
        return rc == TB_E_PERM || rc == TB_E_INVAL ? TB_EXIT_USAGE : TB_EXIT_FAIL;
    }
    uv_signal_init(&loop, &ctx.sigint);
    uv_signal_init(&loop, &ctx.sigterm);
    ctx.sigint.data = ctx.sigterm.data = &ctx;
    uv_signal_start(&ctx.sigint, on_signal, SIGINT);
    uv_signal_start(&ctx.sigterm, on_signal, SIGTERM);
    /* Scripts read the bound address (port 0 picks one) from this line. */
    printf("serving http://%s/ (database %s)\n", tb_web_bound(ctx.web), store ? store : db);
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&loop);
    return rc == 0 ? TB_EXIT_OK : TB_EXIT_FAIL;
}
