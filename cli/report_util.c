/* SPDX-License-Identifier: MIT */
/* report_util.c — database opening, name resolution and output escaping shared
 * by the report and export commands. */
#include "report_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "cli.h"
#include "critpath.h"

int tb_cli_db_open(struct tb_cli_db *db, const char *path, bool readonly)
{
    memset(db, 0, sizeof *db);
    struct stat sb;
    /* The store would create a missing file; a report on a database that does
     * not exist is a mistake worth naming instead. */
    if (stat(path, &sb) != 0) {
        tb_log_error("%s: %s (run 'tbneck capture' first, or pass --db FILE)", path,
                     strerror(errno));
        return TB_EXIT_FAIL;
    }
    char err[512] = "";
    int rc = tb_store_open(&db->st, path, readonly ? TB_STORE_READONLY : 0, err, sizeof err);
    if (rc == TB_E_UNSUPP && readonly) {
        /* An older schema cannot be read without its migration, which needs
         * write access: migrate, as any other command would. */
        err[0] = '\0';
        rc = tb_store_open(&db->st, path, 0, err, sizeof err);
    }
    if (rc) {
        /* The store's line already starts with the path; add it otherwise. */
        size_t pl = strlen(path);
        if (err[0] && !strncmp(err, path, pl))
            tb_log_error("%s", err);
        else if (rc == TB_E_DBVER)
            tb_log_error("%s: written by a newer tbneck%s%s; upgrade tbneck to read it", path,
                         err[0] ? ": " : "", err);
        else
            tb_log_error("%s: %s", path, err[0] ? err : tb_strerror(rc));
        db->st = NULL;
        return TB_EXIT_FAIL;
    }
    rc = tb_catalog_new(&db->cat);
    if (!rc)
        rc = tb_store_load_catalog(db->st, db->cat);
    if (rc) {
        tb_log_error("%s: cannot load tiers and classes: %s", path, tb_strerror(rc));
        tb_cli_db_close(db);
        return TB_EXIT_FAIL;
    }
    return 0;
}

void tb_cli_db_close(struct tb_cli_db *db)
{
    if (db->cat)
        tb_catalog_free(db->cat);
    if (db->st)
        tb_store_close(db->st);
    db->cat = NULL;
    db->st = NULL;
    tb_cli_db_remove_copy(db);
}

int tb_cli_tier(const struct tb_catalog *cat, const char *name, uint32_t *id)
{
    if (tb_catalog_tier_find(cat, name, id) == 0)
        return 0;
    char known[512] = "";
    size_t len = 0;
    uint32_t n = tb_catalog_tier_count(cat);
    for (uint32_t i = 1; i <= n && len < sizeof known - 1; i++) {
        const struct tb_tier_info *t = tb_catalog_tier_get(cat, i);
        if (!t)
            continue;
        int w = snprintf(known + len, sizeof known - len, "%s%s", len ? ", " : "", t->name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (len >= sizeof known - 1)
        strcpy(known + sizeof known - 5, "...");
    if (n == 0)
        tb_log_error("unknown tier '%s': the database holds no tiers yet", name);
    else
        tb_log_error("unknown tier '%s' (known tiers: %s)", name, known);
    return TB_EXIT_FAIL;
}

int tb_cli_server(const struct tb_catalog *cat, uint32_t tier, const char *s, uint32_t *id)
{
    struct tb_addr a;
    if (tb_addr_parse(s, &a) != 0 || a.port == 0) {
        tb_log_error("--server '%s': expected ADDR:PORT (e.g. 10.0.0.5:3306)", s);
        return TB_EXIT_USAGE;
    }
    char list[512] = "";
    size_t len = 0;
    uint32_t n = tb_catalog_server_count(cat);
    for (uint32_t i = 1; i <= n; i++) {
        const struct tb_server_info *sv = tb_catalog_server_get(cat, i);
        if (!sv || sv->tier != tier)
            continue;
        if (tb_addr_eq(&sv->addr, &a)) {
            *id = sv->id;
            return 0;
        }
        char buf[TB_ADDR_STRLEN];
        if (len < sizeof list - TB_ADDR_STRLEN - 8) {
            int w = snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                             tb_addr_fmt(&sv->addr, buf, sizeof buf));
            if (w > 0)
                len += (size_t)w;
        }
    }
    const struct tb_tier_info *t = tb_catalog_tier_get(cat, tier);
    tb_log_error("--server %s is not a server of tier '%s' (its servers: %s)", s,
                 t ? t->name : "?", len ? list : "none");
    return TB_EXIT_FAIL;
}

int tb_cli_target(const struct tb_cli_db *db, const char *tier, const char *server,
                  const char *from, const char *to, uint32_t *tid, struct tb_analyze_opts *o)
{
    int rc = tb_cli_tier(db->cat, tier, tid);
    if (rc == 0 && server)
        rc = tb_cli_server(db->cat, *tid, server, &o->server);
    if (rc == 0)
        rc = tb_cli_range(db->st, *tid, from, to, &o->from_ns, &o->to_ns);
    return rc;
}

int tb_cli_range(struct tb_store *st, uint32_t tier, const char *from, const char *to,
                 int64_t *from_ns, int64_t *to_ns)
{
    *from_ns = INT64_MIN;
    *to_ns = INT64_MAX;
    struct tb_time_ref ref = {0};
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) == 0)
        ref.now_ns = (int64_t)now.tv_sec * TB_NS_PER_SEC + now.tv_nsec;
    if (tb_time_needs_span(from) || tb_time_needs_span(to)) {
        int rc = tb_store_time_span(st, tier, &ref.start_ns, &ref.end_ns);
        if (rc) {
            tb_log_error("cannot read the time span of the stored requests: %s",
                         tb_strerror(rc));
            return TB_EXIT_FAIL;
        }
    }
    const char *name[2] = {"--from", "--to"}, *val[2] = {from, to};
    int64_t *out[2] = {from_ns, to_ns};
    for (int i = 0; i < 2; i++)
        if (val[i] && tb_parse_time_ref(val[i], &ref, out[i]) != 0) {
            tb_log_error("%s '%s': expected a UTC time (2023-11-14 22:13:25.350, 22:13:27), "
                         "ns or seconds since the epoch, now-5m, start+10s or end-1m",
                         name[i], val[i]);
            return TB_EXIT_USAGE;
        }
    if (*from_ns >= *to_ns) {
        tb_log_error("--from must be before --to");
        return TB_EXIT_USAGE;
    }
    return 0;
}

bool tb_cli_args(int argc, char **argv, int first, const struct tb_cli_opt *opts, size_t n,
                 const char *cmd, const char *usage, int *rc)
{
    *rc = tb_cli_parse(argc, argv, first, opts, n, cmd);
    if (*rc < 0) {
        fputs(usage, stdout);
        *rc = TB_EXIT_OK;
        return true;
    }
    return *rc != 0;
}

int tb_cli_parse(int argc, char **argv, int first, const struct tb_cli_opt *opts, size_t n,
                 const char *cmd)
{
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return -1;
        if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
            tb_log_error("%s: unexpected argument '%s' (see 'tbneck %s --help')", cmd, arg, cmd);
            return TB_EXIT_USAGE;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const struct tb_cli_opt *o = NULL;
        for (size_t k = 0; k < n; k++)
            if (strlen(opts[k].name) == nlen && !strncmp(opts[k].name, name, nlen))
                o = &opts[k];
        if (!o) {
            tb_log_error("%s: unknown option '%.*s' (see 'tbneck %s --help')", cmd,
                         (int)(nlen + 2), arg, cmd);
            return TB_EXIT_USAGE;
        }
        if (o->flag) {
            if (eq) {
                tb_log_error("%s: option '--%s' takes no value", cmd, o->name);
                return TB_EXIT_USAGE;
            }
            *o->flag = true;
            continue;
        }
        if (eq) {
            *o->val = eq + 1;
        } else if (i + 1 < argc) {
            *o->val = argv[++i];
        } else {
            tb_log_error("%s: option '--%s' needs a value", cmd, o->name);
            return TB_EXIT_USAGE;
        }
        if (!**o->val) {
            tb_log_error("%s: option '--%s' needs a non-empty value", cmd, o->name);
            return TB_EXIT_USAGE;
        }
    }
    return 0;
}

/* The critical path: per class, the share of response time in each
 * component (mean; within the p95 and p99 requests), largest first. */
void tb_cli_print_critpath(FILE *f, const struct tb_catalog *cat, const struct tb_critpath *cp)
{
    fprintf(f, "\ncritical path of %s requests (%" PRIu64 " of %" PRIu64
               " downstream requests linked):\n",
            tb_catalog_tier_get(cat, cp->front)->name, cp->linked, cp->children);
    for (size_t k = 0; k < cp->ncls && k < 6; k++) {
        const struct tb_cp_class *x = &cp->cls[k];
        fprintf(f, "  %s: %" PRIu64 " requests, mean %.2f ms, p95 %.2f ms, p99 %.2f ms\n",
                x->class_id ? tb_catalog_class_text(cat, x->class_id) : "all classes",
                x->requests, x->rt_mean_ns / 1e6, x->rt_p95_ns / 1e6, x->rt_p99_ns / 1e6);
        fprintf(f, "    %-24s %7s %7s %7s\n", "share of response time", "mean", "p95", "p99");
        for (size_t c = 0; c < cp->ncomp; c++) {
            if (x->mean[c] < 0.0005 && x->p95[c] < 0.0005 && x->p99[c] < 0.0005)
                continue;
            char name[160];
            if (c + 1 == cp->ncomp)
                snprintf(name, sizeof name, "wire");
            else
                snprintf(name, sizeof name, "%s %s",
                         tb_catalog_tier_get(cat, cp->tiers[c / TB_CP_KINDS])->name,
                         tb_cp_kind_name((unsigned)(c % TB_CP_KINDS)));
            fprintf(f, "    %-24s %6.1f%% %6.1f%% %6.1f%%\n", name, 100 * x->mean[c],
                    100 * x->p95[c], 100 * x->p99[c]);
        }
    }
}

bool tb_cli_warn_partial(struct tb_store *st, const char *cmd, int64_t from_ns, int64_t to_ns)
{
    uint64_t n = 0, lost = 0;
    if (tb_store_partial(st, from_ns, to_ns, &n, &lost) != 0 || n == 0)
        return false;
    tb_log_warn("%s: partial data: %" PRIu64 " capture%s in this range stored only part of "
                "what %s saw (%" PRIu64 " requests lost, e.g. to a full disk); the figures "
                "undercount",
                cmd, n, n == 1 ? "" : "s", n == 1 ? "it" : "they", lost);
    return true;
}
