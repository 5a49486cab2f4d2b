/* SPDX-License-Identifier: MIT */
/* capture_live.c — `tbneck capture -i IFACE`: live capture on a libuv loop with
 * streaming analysis (windows closed as capture time passes, N* re-estimated,
 * episodes flagged while they happen), the store writer off the loop, the
 * optional web dashboard on the same loop, and an offline-equivalent analysis
 * stored at the end.
 *
 * The streaming analysis itself (windows, re-estimates, episodes) is
 * analysis/stream.c; this file feeds it requests and the capture clock, and
 * sends what it closes to the store writer and the dashboard. The capture
 * clock is packet time, with the wall clock (the kernel's CLOCK_REALTIME, as
 * the stamps) only as an idle link's fallback: tb_live_clock. */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "analyze.h"
#include "capture.h"
#include "ch.h"
#include "cli.h"
#include "dump.h"
#include "fanout.h"
#include "jsonl.h"
#include "live.h"
#include "store.h"
#include "stream.h"
#include "tiers.h"
#include "util.h"
#include "web.h"

#define TICK_MS 1000

struct live {
    const struct tb_capture_args *args;
    uint64_t *seen; /* requests by tier id, for capture_tiers */
    size_t nseen;
    uv_loop_t loop;
    uv_timer_t tick, stop_timer;
    uv_signal_t sigint, sigterm;
    struct tb_live *src;
    struct tb_fanout *fo;  /* --workers N > 1: the source instead of src */
    struct tb_engine *eng;
    struct tb_catalog *cat;
    struct tb_tiers *tiers;
    struct tb_store *st;
    struct tb_writer *wr;
    struct tb_web *web;
    struct tb_stream *stream;
    struct tb_dump *dump;  /* -w */
    uint64_t packets;      /* packets taken, for -c */
    bool done;             /* -c reached or -G's -W limit: later packets are not taken */
    bool dump_full;
    int64_t capture_id;
    int64_t width_ns;
    int64_t last_pkt_ns, clock_ns, started_ns;
    uint64_t read_since_tick; /* packets read since the previous tick */
    int64_t last_tick_ns;     /* wall clock at the previous tick */
    int err;             /* first runtime error (stops the capture) */
    bool stopping, interrupted;
    FILE *jsonl;        /* --format jsonl: stdout */
    bool *has_rule;     /* per tier id: a re-estimate has given a congestion rule */
    size_t nhas_rule;
    /* Per tier id: the change of work unit not yet published with an
     * analysis (factor 0: none), the product of the changes if several. */
    struct tb_stream_rescale *rescale;
    size_t nrescale;
    struct tb_live_stats ls;
    /* --store clickhouse:// (docs/clickhouse.md, "Live sensors"): the
     * capture thread's handle and the batching sender with its spool. */
    struct tb_ch *ch;
    struct tb_ch_live *chl;
};

/* A second SIGINT/SIGTERM while the end waits for ClickHouse: stop waiting
 * (what waits goes to the spool). */
static volatile sig_atomic_t g_store_abort;
static void on_store_abort(int sig)
{
    (void)sig;
    g_store_abort = 1;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static void fail(struct live *L, int rc);
static void stop(struct live *L, bool drain);

/* ---- requests in --------------------------------------------------------------- */

/* Live, a connection is stored when it opens (so that pools show while the
 * capture runs) and again when it ends. */
static void on_conn(void *ud, const struct tb_conn *c)
{
    struct live *L = ud;
    if (L->wr) {
        int rc = tb_writer_conn(L->wr, c);
        if (rc < 0)
            fail(L, rc);
    }
    /* ClickHouse keeps only a connection's final record, as offline. */
    if (L->chl && c->closed != TB_CONN_OPEN) {
        int rc = tb_ch_live_conn(L->chl, L->cat, c);
        if (rc < 0)
            fail(L, rc);
    }
}

static void on_request(void *ud, const struct tb_request *r)
{
    struct live *L = ud;
    /* Out of memory, the per-tier count is short; the request is not lost. */
    if (r->tier < L->nseen ||
        tb_grow_zero(&L->seen, &L->nseen, (size_t)r->tier + 1, sizeof *L->seen) == 0)
        L->seen[r->tier]++;
    if (L->wr) {
        int rc = tb_writer_request(L->wr, r);
        if (rc < 0)
            fail(L, rc);
    }
    if (L->chl) {
        int rc = tb_ch_live_request(L->chl, L->cat, r);
        if (rc < 0)
            fail(L, rc);
    }
    if (tb_stream_request(L->stream, r) < 0)
        fail(L, TB_E_NOMEM);
    tb_web_publish_request(L->web, r);
}

static void on_packet(void *ud, int linktype, int64_t ts_ns, const uint8_t *data, uint32_t caplen,
                      uint32_t wirelen)
{
    struct live *L = ud;
    /* The rest of a batch the kernel handed over after -c was reached. */
    if (L->done)
        return;
    if (L->dump) {
        char err[512];
        int rc = tb_dump_packet(L->dump, ts_ns, data, caplen, wirelen, err, sizeof err);
        if (rc == 1) {
            L->dump_full = L->done = true;
            stop(L, false);
            return;
        }
        if (rc < 0) {
            tb_log_error("capture: %s", err);
            fail(L, rc);
            return;
        }
    }
    if (ts_ns > L->last_pkt_ns)
        L->last_pkt_ns = ts_ns;
    L->read_since_tick++;
    if (tb_engine_packet(L->eng, linktype, ts_ns, data, caplen, wirelen) < 0)
        fail(L, TB_E_NOMEM);
    if (L->args->max_packets && ++L->packets >= L->args->max_packets) {
        L->done = true;
        stop(L, false);
    }
}

/* ---- what the streaming analysis closes ---------------------------------------- */

static const char *tier_name(struct live *L, uint32_t tier)
{
    const struct tb_tier_info *ti = tb_catalog_tier_get(L->cat, tier);
    return ti ? ti->name : "?";
}

static void server_name(struct live *L, uint32_t server, char *buf, size_t len)
{
    const struct tb_server_info *si = tb_catalog_server_get(L->cat, server);
    if (si)
        tb_addr_fmt(&si->addr, buf, len);
    else
        snprintf(buf, len, "?");
}

static void on_windows(void *ud, const struct tb_window *w, size_t n)
{
    struct live *L = ud;
    tb_web_publish_windows(L->web, w, n);
    /* The servers' rows here; the tier's come through on_window with their
     * congestion (a server has no live rule: null). */
    for (size_t i = 0; L->jsonl && i < n; i++) {
        if (!w[i].server)
            continue;
        char sb[TB_ADDR_STRLEN];
        server_name(L, w[i].server, sb, sizeof sb);
        tb_jsonl_window(L->jsonl, tier_name(L, w[i].tier), sb, &w[i], -1);
    }
    if (L->wr) {
        int rc = tb_writer_windows(L->wr, w, n);
        if (rc < 0)
            fail(L, rc);
    }
}

static void on_window(void *ud, uint32_t tier, const struct tb_window *w, bool congested)
{
    struct live *L = ud;
    tb_web_publish_window(L->web, tier_name(L, tier), w, congested);
    if (L->jsonl) {
        bool known = tier < L->nhas_rule && L->has_rule[tier];
        tb_jsonl_window(L->jsonl, tier_name(L, tier), "*", w, known ? congested : -1);
    }
}

static void on_episode(void *ud, uint32_t tier, const struct tb_episode *ep, bool ongoing)
{
    struct live *L = ud;
    tb_web_publish_episode(L->web, tier_name(L, tier), ep, ongoing);
    if (L->jsonl)
        tb_jsonl_episode(L->jsonl, tier_name(L, tier), "*", ep, ongoing);
}

/* A change of work unit goes out with the analysis that follows it (stream.h). */
static void on_rescale(void *ud, uint32_t tier, const struct tb_stream_rescale *r)
{
    struct live *L = ud;
    if (tier >= L->nrescale &&
        tb_grow_zero(&L->rescale, &L->nrescale, (size_t)tier + 1, sizeof *L->rescale))
        return;
    struct tb_stream_rescale *p = &L->rescale[tier];
    p->factor = p->factor > 0 ? p->factor * r->factor : r->factor;
    p->from_ns = r->from_ns;
}

static void on_analysis(void *ud, uint32_t tier, const struct tb_analysis *a,
                        const struct tb_congestion *rule)
{
    struct live *L = ud;
    struct tb_stream_rescale rs = {0};
    if (tier < L->nrescale) {
        rs = L->rescale[tier];
        L->rescale[tier].factor = 0;
    }
    const struct tb_stream_rescale *rsp = rs.factor > 0 ? &rs : NULL;
    tb_web_publish_analysis(L->web, tier_name(L, tier), a, rule, rsp);
    if (L->jsonl) {
        if (tier >= L->nhas_rule)
            tb_grow_zero(&L->has_rule, &L->nhas_rule, (size_t)tier + 1, sizeof *L->has_rule);
        if (tier < L->nhas_rule)
            L->has_rule[tier] = true;
        tb_jsonl_analysis(L->jsonl, tier_name(L, tier), "*", a, rule->threshold, rsp);
    }
}

static void health(struct live *L, int64_t now)
{
    if (L->fo)
        tb_fanout_stats(L->fo, &L->ls);
    else
        tb_live_stats(L->src, &L->ls);
    tb_engine_set_drops(L->eng, L->ls.kernel_drops, L->ls.if_drops);
    if (L->wr) {
        int rc = tb_writer_health(L->wr, now, L->ls.received, L->ls.kernel_drops, L->ls.if_drops);
        if (rc < 0)
            fail(L, rc);
    }
    tb_web_publish_health(L->web, now, L->ls.received, L->ls.kernel_drops, L->ls.if_drops);
    if (L->jsonl)
        tb_jsonl_health(L->jsonl, now, L->ls.received, L->ls.kernel_drops, L->ls.if_drops);
    if (L->chl) {
        struct tb_ch_live_stats cs;
        int rc = tb_ch_live_tick(L->chl);
        if (rc < 0)
            fail(L, rc);
        tb_ch_live_stats(L->chl, &cs);
        if (L->jsonl)
            tb_jsonl_store(L->jsonl, now, &cs);
        tb_web_publish_store(L->web, &(struct tb_web_store){
            .stored_requests = cs.stored_requests, .stored_conns = cs.stored_conns,
            .pending_requests = cs.pending_requests, .dropped_requests = cs.dropped_requests,
            .dropped_conns = cs.dropped_conns, .spool_bytes = cs.spool_bytes, .up = !cs.down});
    }
}

static void on_tick(uv_timer_t *h)
{
    struct live *L = h->data;
    int64_t now = wall_ns();
    if (L->fo) {
        /* The workers expire their own flows; here their output is merged,
         * and the capture clock is what the merge released. */
        int frc = tb_fanout_poll(L->fo);
        if (frc < 0) {
            fail(L, frc);
            return;
        }
        L->last_pkt_ns = TB_MAX(L->last_pkt_ns, tb_fanout_clock(L->fo));
        /* The workers move their clocks with the wall clock only when their
         * rings are empty (fanout.c): the merge's clock is already right. */
        L->clock_ns = TB_MAX(L->clock_ns, L->last_pkt_ns);
    } else {
        /* Read what the kernel holds before the wall clock may move the
         * capture clock: after a stall (a long re-estimate on a loaded
         * machine, a stopped process) the ring holds packets older than the
         * wall clock's lag, and the timers run before the descriptor is
         * polled. Windows closed past unread packets would miss their
         * requests (a stall of the sensor seen as a freeze of the tier). */
        int n = tb_live_drain(L->src);
        if (n < 0) {
            fail(L, n);
            return;
        }
        /* Packet time; the wall clock only for an idle link (tb_live_clock):
         * nothing read since the last tick, here or in the poll callback,
         * and this tick on time. */
        bool late = L->last_tick_ns && now - L->last_tick_ns > 2 * TICK_MS * TB_NS_PER_MS;
        bool idle = !L->read_since_tick && !tb_live_behind(L->src) && !late;
        L->clock_ns = tb_live_clock(L->clock_ns, L->last_pkt_ns, now, idle);
        L->read_since_tick = 0;
    }
    L->last_tick_ns = now;
    if (L->clock_ns <= 0) { /* fan-out: nothing released yet */
        health(L, now);
        return;
    }
    tb_engine_expire(L->eng, L->clock_ns);
    health(L, now);
    tb_stream_tick(L->stream, L->clock_ns);
    /* A reader that went away (`| head`) stops the capture as SIGINT would:
     * what was captured is kept and analysed. */
    if (L->jsonl && (fflush(L->jsonl) != 0 || ferror(L->jsonl))) {
        tb_log_warn("capture: --format jsonl: standard output is closed; stopping");
        L->jsonl = NULL;
        L->interrupted = true;
        stop(L, true);
    }
}

/* ---- stopping ------------------------------------------------------------------ */

static void stop(struct live *L, bool drain)
{
    if (L->stopping)
        return;
    L->stopping = true;
    /* What the kernel already holds belongs to the capture (but a failure
     * inside the packet callback must not re-enter pcap_dispatch). */
    if (L->fo) {
        /* The workers drain their rings; what they emitted is merged once
         * the loop is over (tb_fanout_finish). */
        tb_fanout_stop(L->fo);
        tb_fanout_stats(L->fo, &L->ls);
    } else {
        if (drain)
            tb_live_drain(L->src);
        tb_live_stats(L->src, &L->ls);
        tb_live_close(L->src);
        L->src = NULL;
    }
    uv_timer_stop(&L->tick);
    uv_close((uv_handle_t *)&L->tick, NULL);
    uv_close((uv_handle_t *)&L->stop_timer, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    tb_web_close(L->web);
    L->web = NULL;
}

static void fail(struct live *L, int rc)
{
    if (!L->err)
        L->err = rc;
    stop(L, false);
}

static void on_stop_timer(uv_timer_t *h)
{
    stop(h->data, true);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct live *L = s->data;
    (void)signum;
    L->interrupted = true;
    stop(L, true);
}

/* ---- privileges ---------------------------------------------------------------- */

/* As tcpdump does: supplementary groups, then the group, then the user, and a
 * check that root cannot be regained. The database and its WAL files were
 * opened as root; they are handed to USER so that SQLite can go on writing
 * them and remove the WAL at the end (which also needs the folder writable
 * by USER — otherwise the WAL file stays behind, harmless). */
static int drop_privileges(const char *user, const char *db, const char *dump,
                           const char *spool)
{
    struct passwd *pw = getpwnam(user);
    if (!pw) {
        tb_log_error("capture: -Z: no such user '%s'", user);
        return TB_E_NOTFOUND;
    }
    if (db) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (size_t i = 0; i < TB_ARRAY_SIZE(suffix); i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s%s", db, suffix[i]);
            if (chown(p, pw->pw_uid, pw->pw_gid) < 0 && errno != ENOENT) {
                tb_log_error("capture: -Z %s: cannot hand '%s' over: %s", user, p,
                             strerror(errno));
                return TB_E_PERM;
            }
        }
    }
    /* The -w file open now; the files rotation opens later are USER's. */
    if (dump && strcmp(dump, "-") != 0 && chown(dump, pw->pw_uid, pw->pw_gid) < 0) {
        tb_log_error("capture: -Z %s: cannot hand '%s' over: %s", user, dump, strerror(errno));
        return TB_E_PERM;
    }
    /* The spool folder and its lock; batch files are USER's from now on. */
    for (int i = 0; spool && i < 2; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", spool, i ? "/lock" : "");
        if (chown(p, pw->pw_uid, pw->pw_gid) < 0) {
            tb_log_error("capture: -Z %s: cannot hand '%s' over: %s", user, p, strerror(errno));
            return TB_E_PERM;
        }
    }
    if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
        setuid(pw->pw_uid) < 0) {
        tb_log_error("capture: -Z %s: cannot switch to that user: %s", user, strerror(errno));
        return TB_E_PERM;
    }
    if (pw->pw_uid != 0 && setuid(0) == 0) {
        tb_log_error("capture: -Z %s: root privileges could be regained; refusing to go on",
                     user);
        return TB_E_PERM;
    }
    return 0;
}

/* ---- the end ------------------------------------------------------------------- */

static void final_analysis(struct live *L, FILE *out)
{
    uint32_t nt = tb_catalog_tier_count(L->cat);
    for (uint32_t tier = 1; tier <= nt; tier++) {
        uint64_t n = 0;
        if (tb_store_request_count(L->st, tier, &n) < 0 || n == 0)
            continue;
        struct tb_analyze_opts o = {
            .width_ns = L->width_ns,
            .from_ns = INT64_MIN,
            .to_ns = INT64_MAX,
            .recompute = true,
        };
        struct tb_analysis_result res;
        memset(&res, 0, sizeof res);
        char err[256] = "";
        int rc = tb_analyze_tier(L->st, L->cat, tier, &o, &res, err, sizeof err);
        if (rc < 0) {
            tb_log_warn("capture: analysis of tier '%s': %s", tier_name(L, tier),
                        err[0] ? err : tb_strerror(rc));
            continue;
        }
        if (out) {
            char buf[32];
            fprintf(out, "  tier %-16s %10" PRIu64 " requests", tier_name(L, tier), n);
            double thr = tb_analysis_threshold(&res.a);
            if (isfinite(thr))
                fprintf(out, ", N* %.2f, TPmax %.1f/s, congested %.1f%%, %zu episode%s", thr,
                        res.a.tp_max, 100.0 * res.a.congested_fraction, res.nep,
                        res.nep == 1 ? "" : "s");
            else
                fprintf(out, ", %s",
                        res.a.n_star_reason[0] ? res.a.n_star_reason : "N* undetermined");
            fprintf(out, " (window %s)\n", tb_fmt_duration(L->width_ns, buf, sizeof buf));
        }
        tb_analysis_result_free(&res);
    }
}

static void summary(struct live *L, FILE *out, double cpu_s, double secs)
{
    const struct tb_capture_stats *s = tb_engine_stats(L->eng);
    fprintf(out,
            "capture %s: %.1f s, %" PRIu64 " packets (%" PRIu64 " bytes), %" PRIu64
            " requests, %" PRIu64 " kernel drops, %" PRIu64 " interface drops, %" PRIu64
            " gaps, %" PRIu64 " parse errors, CPU %.2f s%s\n",
            L->args->iface, secs, s->packets, s->bytes, s->requests, L->ls.kernel_drops,
            L->ls.if_drops, s->gaps, s->parse_errors, cpu_s,
            L->interrupted ? " (interrupted)" : "");
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* ---- ClickHouse ------------------------------------------------------------------ */

/* Opens the store twice (the capture thread encodes, the sender sends), sends
 * what an earlier capture left in the spool, and raises *first_conn above
 * what this sensor stored. Returns 0 or an exit status. */
static int open_clickhouse(struct live *L, uint64_t *first_conn)
{
    const struct tb_capture_args *a = L->args;
    struct tb_store_url u;
    struct tb_ch *send = NULL;
    char host[256], err[600] = "";
    const char *sensor = tb_capture_sensor(a, host, sizeof host);
    uint64_t next = 1;
    int rc;
    tb_store_url_parse(a->store_url, &u, err, sizeof err);
    if ((rc = tb_ch_open(&L->ch, &u, sensor, true, a->store_retry_ns, err, sizeof err)) == 0)
        rc = tb_ch_open(&send, &u, sensor, false, 0, err, sizeof err);
    if (rc == 0) {
        const struct tb_ch_live_opts o = {
            .spool_dir = a->spool_dir ? a->spool_dir : TB_DEFAULT_SPOOL,
            .spool_max = a->spool_max,
            .retry_ns = a->store_retry_ns,
        };
        rc = tb_ch_live_start(&L->chl, L->ch, send, &o, err, sizeof err);
    }
    if (rc == 0 && (rc = tb_ch_next_conn(L->ch, &next)) != 0)
        snprintf(err, sizeof err, "%s", tb_ch_error(L->ch));
    if (rc) {
        tb_log_error("capture: %s", err);
        return rc == TB_E_INVAL || rc == TB_E_UNSUPP ? TB_EXIT_USAGE : TB_EXIT_FAIL;
    }
    *first_conn = TB_MAX(*first_conn, next);
    return 0;
}

/* The end of the ClickHouse side: what waits is sent (for up to
 * --store-retry while the server fails), the rest kept in the spool, the
 * tier hosts written, and the counts said. Returns 0 or an error. */
static int finish_clickhouse(struct live *L, FILE *out)
{
    const struct tb_capture_args *a = L->args;
    struct tb_ch_live_stats s;
    const char *spool = tb_ch_live_spool(L->chl);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", spool);
    /* The loop's signal watchers are gone: a second Ctrl-C ends the wait. */
    struct sigaction old_sig[2];
    tb_cli_catch_stop(on_store_abort, old_sig);
    int rc = tb_ch_live_finish(L->chl, a->store_retry_ns, &g_store_abort, &s);
    L->chl = NULL;
    tb_cli_restore_stop(old_sig);
    /* The tier hosts go last, straight (they are few and not spooled): with
     * the server still away they are not stored, and diagnose of this
     * sensor's rows tells callers from users by address alone. */
    int hrc = s.pending_requests + s.pending_conns ? TB_E_IO : tb_ch_put_hosts(L->ch, L->cat);
    if (hrc)
        tb_log_warn("capture: the tier hosts were not stored (%s)",
                    s.pending_requests + s.pending_conns ? "the server is away"
                                                         : tb_ch_error(L->ch));
    if (out) {
        fprintf(out, "  clickhouse %s: %" PRIu64 " requests and %" PRIu64 " connections stored, "
                "%" PRIu64 " requests and %" PRIu64 " connections dropped (spool full)",
                a->store_url, s.stored_requests, s.stored_conns, s.dropped_requests,
                s.dropped_conns);
        if (s.spooled_batches || s.outages)
            fprintf(out, "; %" PRIu64 " outage%s, %" PRIu64 " batches through the spool %s",
                    s.outages, s.outages == 1 ? "" : "s", s.spooled_batches, dir);
        if (s.refilled_batches)
            fprintf(out, "; %" PRIu64 " batch%s held in part completed",
                    s.refilled_batches, s.refilled_batches == 1 ? "" : "es");
        fputc('\n', out);
    }
    if (s.dropped_requests || s.dropped_conns)
        tb_log_warn("capture: %" PRIu64 " requests and %" PRIu64 " connections were dropped: the "
                    "store was away and the spool %s reached --spool-max %" PRIu64 " bytes",
                    s.dropped_requests, s.dropped_conns, dir, a->spool_max);
    if (s.pending_requests || s.pending_conns)
        tb_log_warn("capture: %" PRIu64 " requests and %" PRIu64 " connections wait in the spool "
                    "%s (%" PRIu64 " bytes): the next capture with --spool %s sends them first",
                    s.pending_requests, s.pending_conns, dir, s.spool_bytes, dir);
    return rc;
}

/* ---- entry --------------------------------------------------------------------- */

int tb_capture_live(const struct tb_capture_args *a)
{
    struct live *L = calloc(1, sizeof *L);
    int exit_code = TB_EXIT_FAIL;
    char err[512] = "";
    int rc;
    bool loop_ok = false;
    if (!L)
        return TB_EXIT_FAIL;
    L->args = a;
    L->width_ns = a->window_ns > 0 ? a->window_ns : TB_WINDOW_DEFAULT_NS;
    if (a->jsonl) {
        L->jsonl = stdout;
        /* A closed reader must be an error on write, not a signal that
         * kills the capture before it stores what it has. */
        signal(SIGPIPE, SIG_IGN);
    }
    const struct tb_stream_opts so = {.width_ns = L->width_ns};
    const struct tb_stream_sink sink = {
        .ud = L,
        .windows = on_windows,
        .window = on_window,
        .episode = on_episode,
        .analysis = on_analysis,
        .rescale = on_rescale,
    };
    if (tb_catalog_new(&L->cat) < 0 || tb_stream_new(&L->stream, L->cat, &so, &sink) < 0) {
        tb_log_error("capture: out of memory");
        goto out;
    }
    if (a->serve && a->no_store) {
        tb_log_error("capture: --serve needs the database; it cannot go with --no-store");
        exit_code = TB_EXIT_USAGE;
        goto out;
    }
    const char *db = a->db ? a->db : TB_DEFAULT_DB;

    /* Everything that needs privileges or creates files happens before -Z,
     * the device first: a missing interface or no permission must not leave a
     * database (or a capture row) behind. Packets flow only once the loop
     * runs, after the engine exists. */
    if (uv_loop_init(&L->loop) < 0) {
        tb_log_error("capture: cannot create the event loop");
        goto out;
    }
    loop_ok = true;
    struct tb_live_opts lo = {
        .iface = a->iface,
        .bpf = a->bpf,
        .snaplen = a->snaplen,
        .bufsize_mib = a->bufsize_mib,
        .immediate = a->immediate,
        .promisc = true,
    };
    if (a->workers > 1)
        rc = tb_fanout_open(&L->fo, &L->loop, &lo, (unsigned)a->workers, err, sizeof err);
    else
        rc = tb_live_open(&L->src, &L->loop, &lo, on_packet, L, err, sizeof err);
    if (rc < 0) {
        tb_log_error("capture: %s", err);
        exit_code = rc == TB_E_INVAL || rc == TB_E_UNSUPP ? TB_EXIT_USAGE : TB_EXIT_FAIL;
        goto out;
    }
    /* With ClickHouse the local database is written only for the dashboard. */
    if (!a->no_store && (!a->store_url || a->serve)) {
        rc = tb_store_open(&L->st, db, TB_STORE_CREATE, err, sizeof err);
        if (rc < 0) {
            tb_log_error("capture: %s", err);
            goto out;
        }
        if ((rc = tb_store_load_catalog(L->st, L->cat)) < 0) {
            tb_log_error("capture: database '%s': cannot load its catalog: %s", db,
                         tb_strerror(rc));
            goto out;
        }
    }
    if (a->tiers_file) {
        rc = tb_tiers_load(a->tiers_file, &L->tiers, err, sizeof err);
        if (rc < 0) {
            tb_log_error("capture: %s", err);
            exit_code = rc == TB_E_BADFMT ? TB_EXIT_USAGE : TB_EXIT_FAIL;
            goto out;
        }
        if ((rc = tb_tiers_register(L->tiers, L->cat)) < 0) {
            tb_log_error("capture: tiers file '%s': %s", a->tiers_file, tb_strerror(rc));
            goto out;
        }
    }
    uint64_t first_conn = 1;
    char source[300];
    snprintf(source, sizeof source, "live:%s", a->iface);
    if (L->st) {
        if ((rc = tb_store_put_catalog(L->st, L->cat)) < 0 ||
            (rc = tb_store_next_conn(L->st, &first_conn)) < 0 ||
            (rc = tb_store_capture_begin(L->st, source, &L->capture_id)) < 0) {
            tb_log_error("capture: database '%s': %s", db, tb_strerror(rc));
            goto out;
        }
    }
    if (a->store_url && !a->no_store && (rc = open_clickhouse(L, &first_conn)) != 0) {
        exit_code = rc;
        goto out;
    }
    struct tb_engine_opts eo = {.force_proto = a->force_proto, .first_conn = first_conn,
                                .max_memory = a->max_memory};
    if ((rc = tb_engine_new(&L->eng, L->cat, L->tiers, &eo, on_request, L)) < 0) {
        tb_log_error("capture: cannot start the capture engine: %s", tb_strerror(rc));
        goto out;
    }
    tb_engine_set_conn_cb(L->eng, on_conn, L);
    /* With workers, L->eng sees no packet: it sums theirs at the end. */
    if (L->fo && (rc = tb_fanout_start(L->fo, L->cat, L->tiers, &eo, on_request, on_conn, L)) < 0) {
        tb_log_error("capture: cannot start the capture workers: %s", tb_strerror(rc));
        goto out;
    }
    if (L->st && (rc = tb_writer_start(&L->wr, L->st, L->capture_id)) == 0)
        rc = tb_writer_catalog(L->wr, L->cat);
    if (L->st && rc < 0) {
        tb_log_error("capture: database '%s': cannot start the writer: %s", db, tb_strerror(rc));
        goto out;
    }
    if (a->serve) {
        struct tb_web_opts wo = {
            .listen = a->serve,
            .allow_remote = a->allow_remote,
            .allow_hosts = a->allow_host,
            .db_path = db,
            .stream_width_ns = L->width_ns,
            .live_catalog = L->cat,
        };
        rc = tb_web_new(&L->web, &L->loop, &wo, err, sizeof err);
        if (rc < 0) {
            tb_log_error("capture: --serve: %s", err);
            exit_code = rc == TB_E_PERM || rc == TB_E_INVAL ? TB_EXIT_USAGE : TB_EXIT_FAIL;
            goto out;
        }
        if (!a->quiet)
            fprintf(stderr, "tbneck: dashboard at http://%s/\n", tb_web_bound(L->web));
    }
    if (a->write) {
        const struct tb_dump_opts dopt = {
            .path = a->write,
            .rotate_bytes = a->rotate_bytes,
            .rotate_secs = a->rotate_secs,
            .files = a->rotate_files,
        };
        /* Live, tcpdump's -w writes microseconds unless told otherwise;
         * tbneck keeps the kernel's nanoseconds, the precision it analyses. */
        enum tb_dump_prec prec = a->dump_prec >= 0 ? (enum tb_dump_prec)a->dump_prec
                                                   : TB_DUMP_NANO;
        rc = tb_dump_open(&L->dump, &dopt, tb_live_linktype(L->src),
                          (uint32_t)(a->snaplen > 0 ? a->snaplen : 262144), prec, wall_ns(), err,
                          sizeof err);
        if (rc < 0) {
            tb_log_error("capture: %s", err);
            goto out;
        }
    }
    if (a->user && (rc = drop_privileges(a->user, L->st ? db : NULL,
                                         L->dump ? tb_dump_current(L->dump) : NULL,
                                         L->chl ? tb_ch_live_spool(L->chl) : NULL)) < 0)
        goto out;

    uv_timer_init(&L->loop, &L->tick);
    uv_timer_init(&L->loop, &L->stop_timer);
    uv_signal_init(&L->loop, &L->sigint);
    uv_signal_init(&L->loop, &L->sigterm);
    L->tick.data = L->stop_timer.data = L->sigint.data = L->sigterm.data = L;
    uv_signal_start(&L->sigint, on_signal, SIGINT);
    uv_signal_start(&L->sigterm, on_signal, SIGTERM);
    uv_timer_start(&L->tick, on_tick, TICK_MS, TICK_MS);
    if (a->duration_ns > 0)
        uv_timer_start(&L->stop_timer, on_stop_timer, (uint64_t)(a->duration_ns / TB_NS_PER_MS),
                       0);
    L->started_ns = wall_ns();
    if (L->src && (rc = tb_live_start(L->src)) < 0) {
        tb_log_error("capture: interface '%s': cannot watch it", a->iface);
        fail(L, rc);
    }
    if (!a->quiet)
        fprintf(stderr, "tbneck: capturing on %s (window %" PRId64 " ms%s)%s\n", a->iface,
                L->width_ns / TB_NS_PER_MS, L->fo ? ", fan-out workers" : "",
                a->duration_ns > 0 ? "" : "; Ctrl-C stops");
    uv_run(&L->loop, UV_RUN_DEFAULT);

    /* The loop is over: complete what can be completed, then store it all. */
    double secs = (double)(wall_ns() - L->started_ns) / 1e9;
    if (L->fo && (rc = tb_fanout_finish(L->fo, TB_MAX(L->last_pkt_ns, L->clock_ns), L->eng)) < 0 &&
        !L->err)
        L->err = rc;
    tb_engine_finish(L->eng, TB_MAX(L->last_pkt_ns, L->clock_ns));
    tb_engine_set_drops(L->eng, L->ls.kernel_drops, L->ls.if_drops);
    uint64_t stored = 0, *stored_tier = NULL;
    size_t nstored_tier = 0;
    if (L->wr) {
        rc = tb_writer_finish_counts(L->wr, &stored, &stored_tier, &nstored_tier);
        L->wr = NULL;
        if (rc < 0 && !L->err)
            L->err = rc;
    }
    const struct tb_capture_stats *cs = tb_engine_stats(L->eng);
    struct tb_capture_tier *ends = NULL;
    size_t nends = 0;
    if (tb_capture_end_make(L->eng, L->cat, L->seen, L->nseen, stored_tier, nstored_tier, &ends,
                            &nends))
        tb_log_warn("capture: out of memory: the per-tier counts are not stored");
    free(stored_tier);
    /* Live, SIGINT is how a capture ends: complete, unless requests seen
     * were not stored. */
    struct tb_capture_end ce = {
        .state = stored < cs->requests ? TB_CAPTURE_PARTIAL : TB_CAPTURE_COMPLETE,
        .stored = stored,
        .unanswered = cs->unanswered,
        .abandoned = cs->abandoned,
        .memory_evicted = a->max_memory ? cs->evicted_flows : 0,
        .tiers = ends,
        .ntiers = nends,
    };
    if (L->st && (rc = tb_store_capture_finish(L->st, L->capture_id, cs, &ce)) < 0 && !L->err)
        L->err = rc;
    if (L->st && ce.state == TB_CAPTURE_PARTIAL)
        tb_log_warn("capture: partial: %" PRIu64 " of %" PRIu64 " requests stored in %s, %" PRIu64
                    " lost", stored, cs->requests, a->db, cs->requests - stored);
    if (!a->quiet && (cs->abandoned || cs->unanswered || cs->evicted_flows)) {
        for (size_t i = 0; i < nends; i++) {
            const struct tb_tier_info *ti = tb_catalog_tier_get(L->cat, ends[i].tier);
            if (ti && (ends[i].unanswered || ends[i].abandoned))
                fprintf(stderr, "  tier %-20s %" PRIu64 " unanswered, %" PRIu64 " abandoned\n",
                        ti->name, ends[i].unanswered, ends[i].abandoned);
        }
        fprintf(stderr, "  abandoned requests %" PRIu64 ", evicted flows %" PRIu64 "%s\n",
                cs->abandoned, cs->evicted_flows, a->max_memory ? " (--max-memory)" : "");
    }
    free(ends);
    if (L->dump) {
        rc = tb_dump_close(L->dump, err, sizeof err);
        L->dump = NULL;
        if (rc < 0) {
            tb_log_error("capture: %s", err);
            if (!L->err)
                L->err = rc;
        }
    }
    if (L->dump_full)
        tb_log_warn("capture: -w: maximum file limit reached: %d (as tcpdump, the capture "
                    "stopped there)", a->rotate_files);
    /* With -w - the packets own standard output. */
    /* Standard output may carry packets (-w -) or JSON lines: the summary
     * then goes to stderr. */
    FILE *out = a->quiet                                            ? NULL
                : (a->write && !strcmp(a->write, "-")) || a->jsonl ? stderr
                                                                    : stdout;
    if (L->jsonl)
        fflush(L->jsonl);
    if (out)
        summary(L, out, cpu_seconds(), secs);
    if (out && L->fo)
        tb_fanout_report(L->fo, out);
    if (L->chl && (rc = finish_clickhouse(L, out)) < 0 && !L->err)
        L->err = rc;
    if (L->st && !L->err)
        final_analysis(L, out);
    if (L->st && !L->err && a->whatif_inputs)
        tb_capture_whatif_inputs(L->st, L->cat, out);
    if (L->st && !L->err && a->diagnose_inputs)
        tb_cli_store_diagnose_inputs(L->st);
    if (L->err) {
        tb_log_error("capture: interface '%s': stopped on an error: %s", a->iface,
                     tb_strerror(L->err));
        exit_code = TB_EXIT_FAIL;
    } else {
        exit_code = TB_EXIT_OK;
    }
out:
    if (L->dump)
        tb_dump_close(L->dump, err, sizeof err);
    if (L->wr)
        tb_writer_finish(L->wr);
    if (L->web)
        tb_web_close(L->web);
    if (L->src)
        tb_live_close(L->src);
    tb_fanout_close(L->fo);
    if (loop_ok) {
        /* Runs the close callbacks of whatever was opened on the loop. */
        uv_run(&L->loop, UV_RUN_DEFAULT);
        uv_loop_close(&L->loop);
    }
    if (L->eng)
        tb_engine_free(L->eng);
    if (L->st)
        tb_store_close(L->st);
    if (L->chl)
        tb_ch_live_finish(L->chl, 0, NULL, NULL);
    tb_ch_close(L->ch);
    if (L->tiers)
        tb_tiers_free(L->tiers);
    tb_stream_free(L->stream);
    if (L->cat)
        tb_catalog_free(L->cat);
    free(L->has_rule);
    free(L->rescale);
    free(L->seen);
    free(L);
    return exit_code;
}
