/* SPDX-License-Identifier: MIT */
/* capture_live.c — `tbneck capture -i IFACE`: live capture on a libuv loop with
 * streaming analysis (windows closed as capture time passes, N* re-estimated,
 * episodes flagged while they happen), the store writer off the loop, the
 * optional web dashboard on the same loop, and an offline-equivalent analysis
 * stored at the end.
 *
 * Streaming windows. The capture clock is the later of the newest packet
 * timestamp and the wall clock minus CLOCK_LAG (both are the kernel's
 * CLOCK_REALTIME; the lag covers packets still sitting in a ring block). A
 * window [s, s+w) closes once the clock passes s + w + grace, grace =
 * max(1 s, 2w): requests still in flight when it closes (the engine emits a
 * request when its response completes) are not in its load, so live windows
 * are provisional for exchanges longer than the grace; the analysis stored at
 * the end recomputes every window from the stored requests and replaces them,
 * so `tbneck report` afterwards matches an offline run. */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "analyze.h"
#include "capture.h"
#include "cli.h"
#include "correlate.h"
#include "live.h"
#include "stats.h"
#include "store.h"
#include "tiers.h"
#include "web.h"

#define TICK_MS 1000
#define CLOCK_LAG_NS (200 * TB_NS_PER_MS)
#define GRACE_MIN_NS TB_NS_PER_SEC
#define RING_SPAN_NS (120 * TB_NS_PER_SEC)  /* requests kept for windows and service times */
#define RING_CAP ((size_t)1 << 19)          /* ...and at most this many (~48 MB) */
#define NSTAR_EVERY_NS (10 * TB_NS_PER_SEC) /* N* and service times re-estimated this often */
#define NSTAR_SPAN_NS (300 * TB_NS_PER_SEC) /* ...from this much recent history */
#define MAX_CLOSE_WINDOWS 200000            /* one tick never closes more (clock jumps) */
#define MIN_REQ_FOR_SVC 50
#define FREEZE_RATIO 0.3 /* as correlate's default: below 30% of the curve = freeze */

/* Streaming state of one tier. */
struct live_tier {
    bool used;
    int64_t next_start;       /* start of the next window to close; INT64_MIN before traffic */
    struct tb_units *units;   /* work units from the last service-time estimate */
    int64_t work_unit_ns;
    struct tb_window *recent; /* closed tier windows for N*, oldest first */
    size_t nrecent, caprecent;
    struct tb_analysis a;
    bool have_a;
    double threshold;         /* congestion threshold: N*, else the fit's knee (NAN: none) */
    bool calls;               /* its machines called other tiers at the last re-estimate */
    /* The episode in progress, if any. */
    bool in_ep;
    struct tb_episode ep;
    size_t ep_n;
    double ep_load_sum, ep_tp_sum;
    uint64_t episodes;
};

struct live {
    const struct tb_capture_args *args;
    uv_loop_t loop;
    uv_timer_t tick, stop_timer;
    uv_signal_t sigint, sigterm;
    struct tb_live *src;
    struct tb_engine *eng;
    struct tb_catalog *cat;
    struct tb_tiers *tiers;
    struct tb_store *st;
    struct tb_writer *wr;
    struct tb_web *web;
    int64_t capture_id;
    int64_t width_ns, grace_ns;
    int64_t last_pkt_ns, clock_ns, started_ns, last_nstar_ns;
    int err;             /* first runtime error (stops the capture) */
    bool stopping, interrupted;
    struct tb_live_stats ls;
    /* Recent requests of every tier, in completion order. */
    struct tb_request *ring;
    size_t rhead, rn;
    struct live_tier *lt; /* indexed by tier id */
    size_t nlt;
};

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
}

static int64_t floor_to(int64_t t, int64_t w)
{
    int64_t s;
    return tb_win_floor(t, w, &s) == 0 ? s : t;
}

static struct live_tier *tier_state(struct live *L, uint32_t tier)
{
    if (tier >= L->nlt) {
        size_t n = L->nlt ? L->nlt : 8;
        while (n <= tier)
            n *= 2;
        struct live_tier *p = realloc(L->lt, n * sizeof *p);
        if (!p)
            return NULL;
        memset(p + L->nlt, 0, (n - L->nlt) * sizeof *p);
        for (size_t i = L->nlt; i < n; i++)
            p[i].next_start = INT64_MIN;
        L->lt = p;
        L->nlt = n;
    }
    L->lt[tier].used = true;
    return &L->lt[tier];
}

static void fail(struct live *L, int rc);

/* ---- requests in --------------------------------------------------------------- */

static void on_request(void *ud, const struct tb_request *r)
{
    struct live *L = ud;
    if (L->wr) {
        int rc = tb_writer_request(L->wr, r);
        if (rc < 0)
            fail(L, rc);
    }
    struct live_tier *t = tier_state(L, r->tier);
    if (t && t->next_start == INT64_MIN)
        t->next_start = floor_to(r->arrival_ns, L->width_ns);
    if (L->rn == RING_CAP) {
        L->rhead = (L->rhead + 1) % RING_CAP;
        L->rn--;
    }
    L->ring[(L->rhead + L->rn) % RING_CAP] = *r;
    L->rn++;
}

static void on_packet(void *ud, int linktype, int64_t ts_ns, const uint8_t *data, uint32_t caplen,
                      uint32_t wirelen)
{
    struct live *L = ud;
    if (ts_ns > L->last_pkt_ns)
        L->last_pkt_ns = ts_ns;
    if (tb_engine_packet(L->eng, linktype, ts_ns, data, caplen, wirelen) < 0)
        fail(L, TB_E_NOMEM);
}

/* ---- streaming analysis -------------------------------------------------------- */

static const char *tier_name(struct live *L, uint32_t tier)
{
    const struct tb_tier_info *ti = tb_catalog_tier_get(L->cat, tier);
    return ti ? ti->name : "?";
}

static void episode_end(struct live *L, uint32_t tier, struct live_tier *t)
{
    if (!t->in_ep)
        return;
    t->in_ep = false;
    t->ep.mean_load = t->ep_load_sum / (double)t->ep_n;
    t->ep.throughput = t->ep_tp_sum / (double)t->ep_n;
    /* Far below the main-sequence curve at that load: the tier held work but
     * did not complete it (a stop-the-world pause), DESIGN.md "Episode". */
    double curve = t->a.slope > 0 ? fmin(t->a.slope * t->ep.mean_load, t->a.tp_max) : t->a.tp_max;
    t->ep.kind = curve > 0 && t->ep.throughput < FREEZE_RATIO * curve ? TB_EP_FREEZE
                                                                      : TB_EP_SATURATED;
    t->episodes++;
    tb_web_publish_episode(L->web, tier_name(L, tier), &t->ep, false);
}

static void track_episode(struct live *L, uint32_t tier, struct live_tier *t,
                          const struct tb_window *w, bool congested)
{
    if (!congested) {
        episode_end(L, tier, t);
        return;
    }
    if (!t->in_ep) {
        t->in_ep = true;
        memset(&t->ep, 0, sizeof t->ep);
        t->ep.start_ns = w->start_ns;
        t->ep_n = 0;
        t->ep_load_sum = t->ep_tp_sum = 0;
    }
    t->ep.end_ns = w->start_ns + w->width_ns;
    t->ep.peak_load = fmax(t->ep.peak_load, w->load);
    t->ep_n++;
    t->ep_load_sum += w->load;
    t->ep_tp_sum += w->norm_throughput;
    if (t->ep_n == 1) {
        t->ep.mean_load = w->load;
        t->ep.throughput = w->norm_throughput;
        tb_web_publish_episode(L->web, tier_name(L, tier), &t->ep, true);
    }
}

static void remember_window(struct live_tier *t, const struct tb_window *w, int64_t span)
{
    /* Drop what fell out of the N* span, then append. */
    size_t drop = 0;
    while (drop < t->nrecent && t->recent[drop].start_ns < w->start_ns - span)
        drop++;
    if (drop) {
        memmove(t->recent, t->recent + drop, (t->nrecent - drop) * sizeof *t->recent);
        t->nrecent -= drop;
    }
    if (t->nrecent == t->caprecent) {
        size_t cap = t->caprecent ? t->caprecent * 2 : 1024;
        struct tb_window *p = realloc(t->recent, cap * sizeof *p);
        if (!p)
            return; /* N* then rests on fewer windows; nothing else depends on it */
        t->recent = p;
        t->caprecent = cap;
    }
    t->recent[t->nrecent++] = *w;
}

static uint32_t *tier_servers(struct live *L, uint32_t tier, size_t *n)
{
    uint32_t ns = tb_catalog_server_count(L->cat);
    uint32_t *s = malloc((ns ? ns : 1) * sizeof *s);
    *n = 0;
    if (!s)
        return NULL;
    for (uint32_t i = 1; i <= ns; i++) {
        const struct tb_server_info *si = tb_catalog_server_get(L->cat, i);
        if (si && si->tier == tier)
            s[(*n)++] = i;
    }
    return s;
}

/* Closes the tier's windows that ended before `until`. */
static void close_windows(struct live *L, uint32_t tier, struct live_tier *t, int64_t until)
{
    if (t->next_start == INT64_MIN || until <= t->next_start)
        return;
    if ((until - t->next_start) / L->width_ns > MAX_CLOSE_WINDOWS)
        t->next_start = until - MAX_CLOSE_WINDOWS * L->width_ns;
    size_t nsv;
    uint32_t *sv = tier_servers(L, tier, &nsv);
    struct tb_winacc *acc = NULL;
    struct tb_window *win = NULL;
    size_t nwin = 0;
    if (!sv || tb_winacc_new(&acc, tier, L->width_ns, t->next_start, until, sv, nsv) < 0)
        goto out;
    for (size_t i = 0; i < L->rn; i++) {
        const struct tb_request *r = &L->ring[(L->rhead + i) % RING_CAP];
        if (r->tier != tier || r->departure_ns < t->next_start || r->arrival_ns >= until)
            continue;
        double u = t->units ? tb_units_get(t->units, r->class_id, r->arrival_ns) : 1.0;
        tb_winacc_add(acc, r, u);
    }
    if (tb_winacc_finish(acc, &win, &nwin) < 0)
        goto out;
    if (L->wr && nwin) {
        int rc = tb_writer_windows(L->wr, win, nwin);
        if (rc < 0)
            fail(L, rc);
    }
    /* Row 0 — the tier as a whole — drives the stream and the episodes. */
    size_t per_row = tb_winacc_nwindows(acc);
    for (size_t i = 0; i < per_row && i < nwin; i++) {
        const struct tb_window *w = &win[i];
        bool congested = t->have_a && isfinite(t->threshold) && w->load >= t->threshold;
        remember_window(t, w, NSTAR_SPAN_NS);
        tb_web_publish_window(L->web, tier_name(L, tier), w, congested);
        track_episode(L, tier, t, w, congested);
    }
    t->next_start = until;
out:
    free(win);
    if (acc)
        tb_winacc_free(acc);
    free(sv);
}

/* Service times (hence work units) and N* from the recent past. */
static void reestimate(struct live *L, uint32_t tier, struct live_tier *t)
{
    /* The tier's own recent requests, and the calls its machines made to
     * other tiers meanwhile: subtracted from the callers' times as the
     * offline analysis does (tb_cli_svc_hosts, tb_cli_called_from). */
    struct tb_svc_host *hosts = NULL;
    size_t nhosts = 0, n = 0, ndown = 0;
    if (tb_cli_svc_hosts(L->cat, tier, &hosts, &nhosts))
        nhosts = 0;
    for (size_t i = 0; i < L->rn; i++) {
        const struct tb_request *r = &L->ring[(L->rhead + i) % RING_CAP];
        if (r->tier == tier)
            n++;
        else if (tb_cli_called_from(r, hosts, nhosts))
            ndown++;
    }
    t->calls = ndown > 0;
    struct tb_request *req = n >= MIN_REQ_FOR_SVC ? malloc((n + ndown) * sizeof *req) : NULL;
    if (req) {
        struct tb_request *down = req + n;
        size_t k = 0, kd = 0;
        for (size_t i = 0; i < L->rn; i++) {
            const struct tb_request *r = &L->ring[(L->rhead + i) % RING_CAP];
            if (r->tier == tier)
                req[k++] = *r;
            else if (tb_cli_called_from(r, hosts, nhosts))
                down[kd++] = *r;
        }
        struct tb_svc_opts so;
        tb_svc_opts_default(&so);
        struct tb_class_service *svc = NULL;
        size_t nsvc = 0;
        int64_t wu = 0;
        struct tb_units *u = NULL;
        if (tb_service_estimate(req, n, down, ndown, hosts, nhosts, NULL, 0, &so, &svc, &nsvc,
                                &wu) == 0 &&
            tb_units_new(&u, svc, nsvc, 1.0) == 0) {
            if (t->units)
                tb_units_free(t->units);
            t->units = u;
            t->work_unit_ns = wu;
        }
        free(svc);
        free(req);
    }
    free(hosts);
    if (t->nrecent < 20)
        return;
    struct tb_analysis a = {
        .tier = tier,
        .width_ns = L->width_ns,
        .from_ns = t->recent[0].start_ns,
        .to_ns = t->recent[t->nrecent - 1].start_ns + L->width_ns,
        .work_unit_ns = t->work_unit_ns,
    };
    struct tb_episode *ep = NULL;
    size_t nep = 0;
    struct tb_nstar_opts no;
    tb_nstar_opts_default(&no);
    no.waits_downstream = t->calls;
    if (tb_correlate_analyze(t->recent, t->nrecent, t->work_unit_ns, &no, &a, &ep, &nep) == 0) {
        t->a = a;
        t->have_a = true;
        t->threshold = tb_analysis_threshold(&a);
        tb_web_publish_analysis(L->web, tier_name(L, tier), &a);
    }
    free(ep);
}

static void drop_old_requests(struct live *L)
{
    while (L->rn && L->ring[L->rhead].departure_ns < L->clock_ns - RING_SPAN_NS) {
        L->rhead = (L->rhead + 1) % RING_CAP;
        L->rn--;
    }
}

static void health(struct live *L, int64_t now)
{
    tb_live_stats(L->src, &L->ls);
    tb_engine_set_drops(L->eng, L->ls.kernel_drops, L->ls.if_drops);
    if (L->wr) {
        int rc = tb_writer_health(L->wr, now, L->ls.received, L->ls.kernel_drops, L->ls.if_drops);
        if (rc < 0)
            fail(L, rc);
    }
    tb_web_publish_health(L->web, now, L->ls.received, L->ls.kernel_drops, L->ls.if_drops);
}

static void on_tick(uv_timer_t *h)
{
    struct live *L = h->data;
    int64_t now = wall_ns();
    L->clock_ns = TB_MAX(L->last_pkt_ns, now - CLOCK_LAG_NS);
    tb_engine_expire(L->eng, L->clock_ns);
    health(L, now);
    /* Early estimates rest on a few seconds of traffic: re-estimate every
     * half of the time captured so far (1 s, 2 s, 4 s, ...) up to every 10 s,
     * so the first rough work unit does not stay for long. */
    int64_t every = TB_MIN(NSTAR_EVERY_NS, TB_MAX(TB_NS_PER_SEC, (now - L->started_ns) / 2));
    bool nstar = L->clock_ns - L->last_nstar_ns >= every;
    int64_t until = floor_to(L->clock_ns - L->grace_ns, L->width_ns);
    for (size_t tier = 1; tier < L->nlt; tier++) {
        struct live_tier *t = &L->lt[tier];
        if (!t->used)
            continue;
        if (nstar || !t->units)
            reestimate(L, (uint32_t)tier, t);
        close_windows(L, (uint32_t)tier, t, until);
    }
    if (nstar)
        L->last_nstar_ns = L->clock_ns;
    drop_old_requests(L);
}

/* ---- stopping ------------------------------------------------------------------ */

static void stop(struct live *L, bool drain)
{
    if (L->stopping)
        return;
    L->stopping = true;
    /* What the kernel already holds belongs to the capture (but a failure
     * inside the packet callback must not re-enter pcap_dispatch). */
    if (drain)
        tb_live_drain(L->src);
    tb_live_stats(L->src, &L->ls);
    tb_live_close(L->src);
    L->src = NULL;
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
static int drop_privileges(const char *user, const char *db)
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
            if (isfinite(res.a.n_star))
                fprintf(out, ", N* %.2f, TPmax %.1f/s, congested %.1f%%, %zu episode%s",
                        res.a.n_star, res.a.tp_max, 100.0 * res.a.congested_fraction, res.nep,
                        res.nep == 1 ? "" : "s");
            else
                fprintf(out, ", N* undetermined");
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
    L->width_ns = a->window_ns > 0 ? a->window_ns : 50 * TB_NS_PER_MS;
    L->grace_ns = TB_MAX(GRACE_MIN_NS, 2 * L->width_ns);
    L->ring = malloc(RING_CAP * sizeof *L->ring);
    if (!L->ring || tb_catalog_new(&L->cat) < 0) {
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
    rc = tb_live_open(&L->src, &L->loop, &lo, on_packet, L, err, sizeof err);
    if (rc < 0) {
        tb_log_error("capture: %s", err);
        exit_code = rc == TB_E_INVAL ? TB_EXIT_USAGE : TB_EXIT_FAIL;
        goto out;
    }
    if (!a->no_store) {
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
    struct tb_engine_opts eo = {.force_proto = a->force_proto, .first_conn = first_conn};
    if ((rc = tb_engine_new(&L->eng, L->cat, L->tiers, &eo, on_request, L)) < 0) {
        tb_log_error("capture: cannot start the capture engine: %s", tb_strerror(rc));
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
            .db_path = db,
            .stream_width_ns = L->width_ns,
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
    if (a->user && (rc = drop_privileges(a->user, L->st ? db : NULL)) < 0)
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
    L->last_nstar_ns = L->started_ns;
    if ((rc = tb_live_start(L->src)) < 0) {
        tb_log_error("capture: interface '%s': cannot watch it", a->iface);
        fail(L, rc);
    }
    if (!a->quiet)
        fprintf(stderr, "tbneck: capturing on %s (window %" PRId64 " ms)%s\n", a->iface,
                L->width_ns / TB_NS_PER_MS, a->duration_ns > 0 ? "" : "; Ctrl-C stops");
    uv_run(&L->loop, UV_RUN_DEFAULT);

    /* The loop is over: complete what can be completed, then store it all. */
    double secs = (double)(wall_ns() - L->started_ns) / 1e9;
    tb_engine_finish(L->eng, TB_MAX(L->last_pkt_ns, L->clock_ns));
    tb_engine_set_drops(L->eng, L->ls.kernel_drops, L->ls.if_drops);
    if (L->wr) {
        rc = tb_writer_finish(L->wr);
        L->wr = NULL;
        if (rc < 0 && !L->err)
            L->err = rc;
    }
    if (L->st && (rc = tb_store_capture_end(L->st, L->capture_id, tb_engine_stats(L->eng))) < 0 &&
        !L->err)
        L->err = rc;
    FILE *out = a->quiet ? NULL : stdout;
    if (out)
        summary(L, out, cpu_seconds(), secs);
    if (L->st && !L->err)
        final_analysis(L, out);
    if (L->err) {
        tb_log_error("capture: interface '%s': stopped on an error: %s", a->iface,
                     tb_strerror(L->err));
        exit_code = TB_EXIT_FAIL;
    } else {
        exit_code = TB_EXIT_OK;
    }
out:
    if (L->wr)
        tb_writer_finish(L->wr);
    if (L->web)
        tb_web_close(L->web);
    if (L->src)
        tb_live_close(L->src);
    if (loop_ok) {
        /* Runs the close callbacks of whatever was opened on the loop. */
        uv_run(&L->loop, UV_RUN_DEFAULT);
        uv_loop_close(&L->loop);
    }
    if (L->eng)
        tb_engine_free(L->eng);
    if (L->st)
        tb_store_close(L->st);
    if (L->tiers)
        tb_tiers_free(L->tiers);
    for (size_t i = 0; i < L->nlt; i++) {
        if (L->lt[i].units)
            tb_units_free(L->lt[i].units);
        free(L->lt[i].recent);
    }
    free(L->lt);
    if (L->cat)
        tb_catalog_free(L->cat);
    free(L->ring);
    free(L);
    return exit_code;
}
