/* SPDX-License-Identifier: MIT */
/* analyze.c — the analysis pipeline over stored requests: service times →
 * work units → windows → N* → episodes, stored back and reused; and the
 * report built on it (each server, cross-tier response-time attribution). */
#include "analyze.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "proto.h"
#include "tiers.h"
#include "util.h"

/* Beyond this many windows a run is almost certainly a mistake (a 1 ms window
 * over a day of traffic); refuse it rather than exhaust memory. */
#define MAX_WINDOWS (UINT64_C(20) * 1000 * 1000)
/* Service times drift (DESIGN.md): they are estimated per period of this
 * length, and each request is normalized with its own period's estimate. */
#define SVC_PERIOD_NS (60 * TB_NS_PER_SEC)
/* A --service-times file larger than this is not a service-times file. */
#define SVC_FILE_MAX (16u << 20)

/* ---- inputs ---------------------------------------------------------------- */

/* Everything one run works from: the tier's requests in the range and the
 * window grid they fall on. */
struct pipe {
    struct tb_store *st;
    const struct tb_catalog *cat;
    const struct tb_analyze_opts *o;
    uint32_t tier;
    const char *tier_name;
    struct tb_request *rq;
    size_t nrq;
    /* Every tier's requests in the range, read once when first needed (the
     * downstream calls for service times, the cross-tier correlation). */
    const struct tb_request *all;
    struct tb_request *own_all;  /* what `all` points to when read here, else NULL */
    size_t nall;
    bool have_all;
    int64_t w0;          /* first window start */
    size_t nwin;         /* windows per row */
    uint32_t *servers;   /* rows 1..nservers */
    size_t nservers;
    uint64_t *count;     /* requests per row (row 0 = the tier) */
    bool calls;          /* the tier's machines called other tiers (N*'s hint: call_ns) */
    struct tb_request *down; /* ...those calls (for the freeze rule's waiting) */
    size_t ndown;
    double call_ns;      /* Σ lives of those calls (tb_analysis_waits_slope) */
    struct tb_stretch *lives; /* per row: lives by arrival concurrency (knee test), or NULL */
    char *err;
    size_t errlen;
};

static void pipe_free(struct pipe *p)
{
    free(p->rq);
    free(p->own_all);
    free(p->down);
    free(p->servers);
    free(p->count);
    free(p->lives);
}

/* The rows' lives by arrival concurrency (the knee test's stretch rule) from
 * an accumulator fed the tier's requests: each server's own, the tier row
 * their sum (with --server, that server's). */
static int pipe_lives(struct pipe *p, const struct tb_stretchacc *acc)
{
    free(p->lives);
    if (!(p->lives = calloc(1 + p->nservers, sizeof *p->lives)))
        return TB_E_NOMEM;
    for (size_t k = 0; k < p->nservers; k++) {
        const struct tb_stretch *s = tb_stretchacc_server(acc, p->servers[k]);
        if (s) {
            p->lives[k + 1] = *s;
            tb_stretch_merge(&p->lives[0], s);
        }
    }
    return 0;
}

/* The same from requests in arrival order (the store's order). */
static int pipe_lives_of(struct pipe *p, const struct tb_request *rq, size_t n)
{
    struct tb_stretchacc *acc = NULL;
    int rc = tb_stretchacc_new(&acc);
    for (size_t i = 0; i < n && !rc; i++)
        if (rq[i].tier == p->tier)
            rc = tb_stretchacc_add(acc, &rq[i]);
    if (!rc)
        rc = pipe_lives(p, acc);
    tb_stretchacc_free(acc);
    return rc;
}

static int pipe_all(struct pipe *p)
{
    if (p->have_all)
        return 0;
    /* Over the window grid, as the tier's own requests (pipe_load): a ranged
     * report's first and last windows reach past --from and --to, and calls
     * there left out made their calls_busy and calls_load too low, so that
     * the stall rule took requests waiting on their calls for a pause. */
    int64_t qf, qt;
    tb_analyze_query_range(p->o->from_ns, p->o->to_ns, p->o->width_ns, &qf, &qt);
    int rc = tb_store_requests(p->st, 0, qf, qt, &p->own_all, &p->nall);
    p->all = p->own_all;
    if (rc) {
        tb_seterr(p->err, p->errlen, "reading the requests of every tier: %s",
                  tb_strerror(rc));
        return rc;
    }
    p->have_all = true;
    return 0;
}

/* Loads the requests and fixes the window grid: from the first window holding
 * --from (or the first arrival) to the one holding --to (or the last
 * departure), aligned to multiples of the width since the epoch. */
void tb_analyze_query_range(int64_t from_ns, int64_t to_ns, int64_t width_ns, int64_t *qf,
                            int64_t *qt)
{
    int64_t f;
    *qf = from_ns;
    *qt = to_ns;
    if (from_ns != INT64_MIN && tb_win_floor(from_ns, width_ns, &f) == 0)
        *qf = f;
    if (to_ns != INT64_MAX && tb_win_floor(to_ns, width_ns, &f) == 0 && f != to_ns &&
        f <= INT64_MAX - width_ns)
        *qt = f + width_ns;
}

static int pipe_servers(struct pipe *p);
static void pipe_count(struct pipe *p, const struct tb_request *r, int64_t *lo, int64_t *hi);
static int pipe_grid(struct pipe *p, int64_t lo, int64_t hi);

static int pipe_load(struct pipe *p)
{
    const struct tb_analyze_opts *o = p->o;
    int rc = 0;
    int64_t qf, qt;
    tb_analyze_query_range(o->from_ns, o->to_ns, o->width_ns, &qf, &qt);
    rc = tb_store_requests(p->st, p->tier, qf, qt, &p->rq, &p->nrq);
    if (rc) {
        tb_seterr(p->err, p->errlen, "reading the requests of tier '%s': %s", p->tier_name,
                  tb_strerror(rc));
        return rc;
    }
    if ((rc = pipe_servers(p)) != 0)
        return rc;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < p->nrq; i++)
        pipe_count(p, &p->rq[i], &lo, &hi);
    return pipe_grid(p, lo, hi);
}

/* Rows: with --server only that server, else every server of the tier. */
static int pipe_servers(struct pipe *p)
{
    const struct tb_analyze_opts *o = p->o;
    uint32_t ns = tb_catalog_server_count(p->cat);
    p->servers = calloc(ns ? ns : 1, sizeof *p->servers);
    p->count = calloc((size_t)ns + 1, sizeof *p->count);
    if (!p->servers || !p->count)
        return TB_E_NOMEM;
    for (uint32_t id = 1; id <= ns; id++) {
        const struct tb_server_info *s = tb_catalog_server_get(p->cat, id);
        if (s && s->tier == p->tier && (!o->server || o->server == id))
            p->servers[p->nservers++] = id;
    }
    return 0;
}

/* One of the tier's requests into the row counts and the span [lo, hi]. */
static void pipe_count(struct pipe *p, const struct tb_request *r, int64_t *lo, int64_t *hi)
{
    if (p->o->server && r->server != p->o->server)
        return;
    *lo = TB_MIN(*lo, r->arrival_ns);
    *hi = TB_MAX(*hi, r->departure_ns);
    p->count[0]++;
    for (size_t k = 0; k < p->nservers; k++)
        if (p->servers[k] == r->server)
            p->count[k + 1]++;
}

/* The window grid from the requests' span [lo, hi] and --from/--to. */
static int pipe_grid(struct pipe *p, int64_t lo, int64_t hi)
{
    const struct tb_analyze_opts *o = p->o;
    if (o->from_ns != INT64_MIN)
        lo = o->from_ns;
    if (o->to_ns != INT64_MAX)
        hi = o->to_ns;
    p->nwin = 0;
    p->w0 = 0;
    if (!p->count[0] || hi < lo)
        return 0;
    int64_t w1;
    if (tb_win_floor(lo, o->width_ns, &p->w0) || tb_win_floor(hi, o->width_ns, &w1)) {
        tb_seterr(p->err, p->errlen, "time range outside what windows of %lld ns can cover",
                  (long long)o->width_ns);
        return TB_E_INVAL;
    }
    /* [w0, w1 + width) covers hi itself: a departure exactly at a boundary
     * belongs to the window starting there. */
    uint64_t nw = (uint64_t)(w1 - p->w0) / (uint64_t)o->width_ns + 1;
    if (hi == w1 && o->to_ns != INT64_MAX)
        nw--; /* --to is exclusive */
    if (nw > MAX_WINDOWS) {
        char b[32];
        tb_seterr(p->err, p->errlen,
                  "%llu windows of %s: too many; use a longer --window or a shorter --from/--to "
                  "range",
                  (unsigned long long)nw, tb_fmt_duration(o->width_ns, b, sizeof b));
        return TB_E_FULL;
    }
    p->nwin = (size_t)nw;
    return 0;
}

/* ---- service-time overrides -------------------------------------------------- */

/* The class of the tier whose fingerprint is `text`; 0 when none. */
static uint32_t class_by_text(const struct tb_catalog *cat, uint32_t tier, const char *text)
{
    uint32_t n = tb_catalog_class_count(cat);
    for (uint32_t id = 1; id <= n; id++) {
        const struct tb_class_info *c = tb_catalog_class_get(cat, id);
        if (c && c->tier == tier && c->text && !strcmp(c->text, text))
            return id;
    }
    return 0;
}

static int read_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tb_seterr(err, errlen, "%s: %s", path, strerror(errno));
        return TB_E_IO;
    }
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= SVC_FILE_MAX) {
                tb_seterr(err, errlen, "%s: larger than %u MiB, not a service-times file", path,
                          SVC_FILE_MAX >> 20);
                rc = TB_E_FULL;
                break;
            }
            if (tb_grow(&buf, &cap, n + 4096, 1)) {
                tb_seterr(err, errlen, "%s: out of memory", path);
                rc = TB_E_NOMEM;
                break;
            }
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                tb_seterr(err, errlen, "%s: read error", path);
                rc = TB_E_IO;
            }
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return 0;
}

/* --service-times FILE: every line must name a class the tier has, so a typo
 * does not silently leave a class at its estimated service time. */
static int overrides_from_file(const struct pipe *p, struct tb_svc_override **out, size_t *n)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(p->o->service_file, &text, &len, p->err, p->errlen);
    if (rc)
        return rc;
    struct tb_service_line *lines = NULL;
    size_t nl = 0;
    char perr[256] = "";
    rc = tb_service_file_parse(text, len, &lines, &nl, perr, sizeof perr);
    free(text);
    if (rc) {
        tb_seterr(p->err, p->errlen, "%s: %s", p->o->service_file,
                  perr[0] ? perr : tb_strerror(rc));
        return rc;
    }
    struct tb_svc_override *ov = calloc(nl ? nl : 1, sizeof *ov);
    if (!ov) {
        tb_service_file_free(lines, nl);
        return TB_E_NOMEM;
    }
    for (size_t i = 0; i < nl; i++) {
        uint32_t cid = class_by_text(p->cat, p->tier, lines[i].class_text);
        if (!cid) {
            tb_seterr(p->err, p->errlen, "%s: line %u: tier '%s' has no class '%s'",
                      p->o->service_file, lines[i].line, p->tier_name, lines[i].class_text);
            tb_service_file_free(lines, nl);
            free(ov);
            return TB_E_BADFMT;
        }
        ov[i].class_id = cid;
        ov[i].service_ns = lines[i].service_ns;
        ov[i].method = TB_SVC_OVERRIDE;
    }
    tb_service_file_free(lines, nl);
    *out = ov;
    *n = nl;
    return 0;
}

/* --calibrate CAPTURE: the pcap (taken at low load) is decoded into a private
 * in-memory catalog, with the stored tiers as its tiers configuration so that
 * the same servers land in the same tiers; the service times estimated from
 * it then override the stored traffic's own estimates, class by class. */
struct calib {
    struct tb_request *rq;
    size_t n, cap;
    int err;
};

static void calib_cb(void *ud, const struct tb_request *r)
{
    struct calib *c = ud;
    if (c->err)
        return;
    if (tb_grow(&c->rq, &c->cap, c->n + 1, sizeof *c->rq)) {
        c->err = TB_E_NOMEM;
        return;
    }
    c->rq[c->n++] = *r;
}

static int tiers_from_catalog(const struct tb_catalog *cat, struct tb_tiers *t)
{
    uint32_t nt = tb_catalog_tier_count(cat), ns = tb_catalog_server_count(cat);
    t->tiers = calloc(nt ? nt : 1, sizeof *t->tiers);
    if (!t->tiers)
        return TB_E_NOMEM;
    for (uint32_t id = 1; id <= nt; id++) {
        const struct tb_tier_info *ti = tb_catalog_tier_get(cat, id);
        struct tb_tier_cfg *c = &t->tiers[t->n];
        snprintf(c->name, sizeof c->name, "%s", ti->name);
        c->proto = tb_proto_find(ti->proto);
        c->servers = calloc(ns ? ns : 1, sizeof *c->servers);
        if (!c->servers)
            return TB_E_NOMEM;
        for (uint32_t s = 1; s <= ns; s++) {
            const struct tb_server_info *si = tb_catalog_server_get(cat, s);
            if (si && si->tier == id)
                c->servers[c->nservers++] = si->addr;
        }
        size_t nh = tb_catalog_tier_hosts(cat, id, NULL, 0);
        if (nh) {
            c->hosts = calloc(nh, sizeof *c->hosts);
            if (!c->hosts)
                return TB_E_NOMEM;
            c->nhosts = tb_catalog_tier_hosts(cat, id, c->hosts, nh);
        }
        t->n++;
    }
    return 0;
}

static void tiers_free_local(struct tb_tiers *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->tiers[i].servers);
        free(t->tiers[i].hosts);
    }
    free(t->tiers);
}

static int downstream(const struct tb_request *all, size_t nall, uint32_t tier,
                      const struct tb_svc_host *hosts, size_t nhosts, struct tb_request **out,
                      size_t *n);

static int overrides_from_capture(const struct pipe *p, struct tb_svc_override **out, size_t *n)
{
    const char *path = p->o->calibrate;
    struct tb_catalog *cc = NULL;
    struct tb_engine *e = NULL;
    struct tb_tiers tiers = {0};
    struct calib cal = {0};
    struct tb_svc_host *hosts = NULL;
    struct tb_request *down = NULL;
    struct tb_class_service *svc = NULL;
    size_t nhosts = 0, ndown = 0, nsvc = 0;
    int64_t wu = 0;
    uint32_t ctier = 0;
    int rc = tb_catalog_new(&cc);
    if (!rc)
        rc = tiers_from_catalog(p->cat, &tiers);
    if (!rc)
        rc = tb_tiers_register(&tiers, cc);
    if (rc) {
        tb_seterr(p->err, p->errlen, "--calibrate %s: %s", path, tb_strerror(rc));
        goto out;
    }
    struct tb_engine_opts eo = {0};
    rc = tb_engine_new(&e, cc, &tiers, &eo, calib_cb, &cal);
    if (rc) {
        tb_seterr(p->err, p->errlen, "--calibrate %s: %s", path, tb_strerror(rc));
        goto out;
    }
    const char *files[1] = {path};
    struct tb_offline_opts oo = {.files = files, .nfiles = 1};
    char perr[256] = "";
    rc = tb_offline_run(e, &oo, perr, sizeof perr);
    if (rc) {
        tb_seterr(p->err, p->errlen, "--calibrate %s: %s", path, perr[0] ? perr : tb_strerror(rc));
        goto out;
    }
    tb_engine_finish(e, tb_engine_stats(e)->last_ns);
    if (cal.err) {
        rc = cal.err;
        tb_seterr(p->err, p->errlen, "--calibrate %s: %s", path, tb_strerror(rc));
        goto out;
    }
    if (tb_catalog_tier_find(cc, p->tier_name, &ctier) != 0) {
        rc = TB_E_NOTFOUND;
        tb_seterr(p->err, p->errlen, "--calibrate %s: no traffic of tier '%s' in it", path,
                  p->tier_name);
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < cal.n; i++)
        if (cal.rq[i].tier == ctier)
            k++;
    struct tb_request *mine = malloc((k ? k : 1) * sizeof *mine);
    if (!mine) {
        rc = TB_E_NOMEM;
        goto out;
    }
    k = 0;
    for (size_t i = 0; i < cal.n; i++)
        if (cal.rq[i].tier == ctier)
            mine[k++] = cal.rq[i];
    if ((rc = tb_analysis_svc_hosts(cc, ctier, &hosts, &nhosts)) == 0 &&
        (rc = downstream(cal.rq, cal.n, ctier, hosts, nhosts, &down, &ndown)) == 0) {
        struct tb_svc_opts so;
        tb_svc_opts_default(&so);
        rc = tb_service_estimate(mine, k, down, ndown, hosts, nhosts, NULL, 0, &so, &svc, &nsvc,
                                 &wu);
    }
    free(mine);
    if (rc) {
        tb_seterr(p->err, p->errlen, "--calibrate %s: estimating service times: %s", path,
                  tb_strerror(rc));
        goto out;
    }
    /* Map the calibration's classes onto the stored ones by fingerprint; a
     * class seen only in the calibration capture has nothing to override. */
    struct tb_svc_override *ov = calloc(nsvc ? nsvc : 1, sizeof *ov);
    if (!ov) {
        rc = TB_E_NOMEM;
        goto out;
    }
    size_t nov = 0;
    for (size_t i = 0; i < nsvc; i++) {
        const struct tb_class_info *ci = tb_catalog_class_get(cc, svc[i].class_id);
        uint32_t cid = ci ? class_by_text(p->cat, p->tier, ci->text) : 0;
        if (!cid)
            continue;
        /* One calibration period is expected; if there are several, the
         * first one seen per class wins. */
        bool dup = false;
        for (size_t j = 0; j < nov; j++)
            dup |= ov[j].class_id == cid;
        if (dup)
            continue;
        ov[nov].class_id = cid;
        ov[nov].service_ns = svc[i].service_ns;
        ov[nov].method = TB_SVC_CALIBRATED;
        nov++;
    }
    if (!nov) {
        free(ov);
        rc = TB_E_NOTFOUND;
        tb_seterr(p->err, p->errlen, "--calibrate %s: none of its request classes of tier '%s' "
                  "occurs in the stored traffic", path, p->tier_name);
        goto out;
    }
    *out = ov;
    *n = nov;
out:
    free(svc);
    free(down);
    free(hosts);
    free(cal.rq);
    if (e)
        tb_engine_free(e);
    tiers_free_local(&tiers);
    if (cc)
        tb_catalog_free(cc);
    return rc;
}

/* ---- service times ------------------------------------------------------------ */

int tb_analysis_svc_hosts(const struct tb_catalog *cat, uint32_t tier,
                          struct tb_svc_host **out, size_t *n)
{
    uint32_t ns = tb_catalog_server_count(cat);
    size_t nh = tb_catalog_tier_hosts(cat, tier, NULL, 0);
    struct tb_svc_host *h = calloc((size_t)ns + nh + 1, sizeof *h);
    struct tb_addr *ha = calloc(nh + 1, sizeof *ha);
    if (!h || !ha) {
        free(h);
        free(ha);
        return TB_E_NOMEM;
    }
    size_t k = 0;
    for (uint32_t id = 1; id <= ns; id++) {
        const struct tb_server_info *s = tb_catalog_server_get(cat, id);
        if (s && s->tier == tier && s->addr.family != 0) {
            h[k].server = id;
            h[k].addr = s->addr;
            k++;
        }
    }
    nh = tb_catalog_tier_hosts(cat, tier, ha, nh);
    for (size_t i = 0; i < nh; i++) {
        h[k].server = 0;
        h[k].addr = ha[i];
        k++;
    }
    free(ha);
    *out = h;
    *n = k;
    return 0;
}

bool tb_analysis_called_from(const struct tb_request *r, const struct tb_svc_host *hosts,
                             size_t n)
{
    for (size_t h = 0; h < n; h++)
        if (tb_addr_ip_eq(&r->client, &hosts[h].addr))
            return true;
    return false;
}

int tb_analysis_fill_calls(const struct tb_catalog *cat, const struct tb_request *down,
                           size_t ndown, const uint32_t *servers, size_t nservers,
                           struct tb_window *w, size_t per_row)
{
    if (!ndown || !per_row)
        return 0;
    int rc = tb_windows_calls_busy(w, per_row, down, ndown);
    struct tb_request *calls = malloc(ndown * sizeof *calls);
    if (!calls)
        return TB_E_NOMEM;
    for (size_t k = 0; k < nservers && !rc; k++) {
        const struct tb_server_info *si = tb_catalog_server_get(cat, servers[k]);
        if (!si)
            continue;
        size_t nc = 0;
        for (size_t i = 0; i < ndown; i++) {
            bool own = tb_addr_ip_eq(&down[i].client, &si->addr), other = false;
            for (size_t j = 0; j < nservers && !own && !other; j++) {
                const struct tb_server_info *sj = tb_catalog_server_get(cat, servers[j]);
                other = j != k && sj && tb_addr_ip_eq(&down[i].client, &sj->addr);
            }
            if (own || !other)
                calls[nc++] = down[i];
        }
        rc = tb_windows_calls_busy(w + (k + 1) * per_row, per_row, calls, nc);
    }
    free(calls);
    return rc;
}

double tb_analysis_call_life(const struct tb_request *r)
{
    return r->departure_ns > r->arrival_ns ? (double)(r->departure_ns - r->arrival_ns) : 0;
}

/* Requests of other tiers called from the tier's machines. */
static int downstream(const struct tb_request *all, size_t nall, uint32_t tier,
                      const struct tb_svc_host *hosts, size_t nhosts, struct tb_request **out,
                      size_t *n)
{
    size_t k = 0;
    struct tb_request *d = NULL;
    for (int pass = 0; pass < 2; pass++) {
        k = 0;
        for (size_t i = 0; i < nall; i++) {
            if (all[i].tier == tier)
                continue;
            if (!tb_analysis_called_from(&all[i], hosts, nhosts))
                continue;
            if (pass)
                d[k] = all[i];
            k++;
        }
        if (pass == 0) {
            d = malloc((k ? k : 1) * sizeof *d);
            if (!d)
                return TB_E_NOMEM;
        }
    }
    *out = d;
    *n = k;
    return 0;
}

static int estimate_services(struct pipe *p, struct tb_class_service **svc, size_t *nsvc,
                             int64_t *wu)
{
    struct tb_svc_override *ov = NULL;
    size_t nov = 0;
    struct tb_svc_host *hosts = NULL;
    size_t nhosts = 0;
    struct tb_request *down = NULL;
    size_t ndown = 0;
    int rc = 0;
    if (p->o->service_file)
        rc = overrides_from_file(p, &ov, &nov);
    else if (p->o->calibrate)
        rc = overrides_from_capture(p, &ov, &nov);
    if (rc)
        return rc;
    rc = tb_analysis_svc_hosts(p->cat, p->tier, &hosts, &nhosts);
    if (rc)
        goto out;
    /* The downstream calls only matter while a request of this tier is in
     * flight, so the same range bounds them. */
    if (nhosts && tb_catalog_tier_count(p->cat) > 1) {
        if ((rc = pipe_all(p)) != 0)
            goto out;
        rc = downstream(p->all, p->nall, p->tier, hosts, nhosts, &down, &ndown);
        if (rc)
            goto out;
        p->calls = ndown > 0;
    }
    struct tb_svc_opts so;
    tb_svc_opts_default(&so);
    so.period_ns = SVC_PERIOD_NS;
    rc = tb_service_estimate(p->rq, p->nrq, down, ndown, hosts, nhosts, ov, nov, &so, svc, nsvc,
                             wu);
    if (rc)
        tb_seterr(p->err, p->errlen, "estimating the service times of tier '%s': %s", p->tier_name,
                  tb_strerror(rc));
out:
    free(p->down);
    p->down = down; /* kept for the calls in flight */
    p->ndown = ndown;
    p->call_ns = 0;
    for (size_t i = 0; i < ndown; i++)
        p->call_ns += tb_analysis_call_life(&down[i]);
    free(hosts);
    free(ov);
    return rc;
}

/* ---- one row's analysis --------------------------------------------------------- */

double tb_analysis_waits_slope(const struct tb_class_service *svc, size_t nsvc, int64_t wu,
                               double call_ns, uint64_t requests)
{
    double s = 0, n = 0;
    for (size_t i = 0; i < nsvc; i++) {
        s += (double)svc[i].service_ns * svc[i].requests;
        n += svc[i].requests;
    }
    if (!(wu > 0) || !(n > 0) || !(s > 0) || !requests || !(call_ns >= 0))
        return 0;
    double sbar = s / n, wbar = call_ns / (double)requests;
    return (double)TB_NS_PER_SEC / (double)wu * sbar / (sbar + wbar);
}

/* N*, TPmax, congestion, episodes and levels of one row. The identity and the
 * request count are the pipeline's: correlate only sees windows, so it would
 * count completions and take the range from the (possibly empty) windows. */
static int analyze_row(struct tb_analysis_result *res, int64_t work_unit_ns, bool calls,
                       double waits_hint, const struct tb_stretch *lives)
{
    struct tb_analysis keep = res->a;
    struct tb_nstar_opts no;
    tb_nstar_opts_default(&no);
    no.stretch = lives;
    no.waits_downstream = calls;
    if (calls)
        no.slope_hint = waits_hint;
    int rc = tb_correlate_analyze(res->win, res->nwin, work_unit_ns, &no, &res->a, &res->ep,
                                  &res->nep);
    res->a.tier = keep.tier;
    res->a.server = keep.server;
    res->a.width_ns = keep.width_ns;
    res->a.from_ns = keep.from_ns;
    res->a.to_ns = keep.to_ns;
    res->a.requests = keep.requests;
    res->a.work_unit_ns = work_unit_ns;
    return rc;
}

/* ---- stored results ----------------------------------------------------------- */

/* A stored analysis is reused when it covers the same windows over the same
 * requests: same (tier, server, width), same range, same request count, same
 * method version (TB_ANALYSIS_VERSION). Runs
 * with overridden service times are never stored-over nor reused, since the
 * stored rows do not say which service times made them. */
static bool load_stored(struct pipe *p, uint32_t server, uint64_t count,
                        struct tb_analysis_result *res)
{
    const struct tb_analyze_opts *o = p->o;
    if (o->recompute || o->service_file || o->calibrate || !p->nwin)
        return false;
    struct tb_analysis a;
    struct tb_episode *ep = NULL;
    size_t nep = 0;
    int64_t to = p->w0 + (int64_t)p->nwin * o->width_ns;
    /* The analysis of exactly this range: another range's newer analysis
     * must not hide it (it would be recomputed and stored again). */
    if (tb_store_find_analysis(p->st, p->tier, server, o->width_ns, p->w0, to, &a, &ep, &nep) !=
        0)
        return false;
    /* An analysis made by another version of the method is stale. */
    if (a.from_ns != p->w0 || a.to_ns != to || a.requests != count ||
        a.method_version != TB_ANALYSIS_VERSION) {
        free(ep);
        return false;
    }
    struct tb_window *w = NULL;
    size_t nw = 0;
    if (tb_store_get_windows(p->st, p->tier, server, o->width_ns, p->w0, to, &w, &nw) != 0 ||
        nw != p->nwin) {
        free(w);
        free(ep);
        return false;
    }
    res->a = a;
    res->win = w;
    res->nwin = nw;
    res->ep = ep;
    res->nep = nep;
    return true;
}

static void store_result(struct pipe *p, const struct tb_analysis_result *res)
{
    if (p->o->service_file || p->o->calibrate || !res->nwin)
        return;
    /* The analysis first, then its windows: a reader that polls the windows
     * and then the analysis (web.c, poll_tier) never sees windows without
     * the analysis that says which of them are congested. */
    int64_t id;
    int rc = tb_store_put_analysis(p->st, &res->a, res->ep, res->nep, &id);
    if (!rc)
        rc = tb_store_put_windows(p->st, res->win, res->nwin);
    /* The analysis stands without its stored copy; say so and go on. */
    if (rc)
        tb_log_warn("could not store the analysis of tier '%s': %s", p->tier_name,
                    tb_strerror(rc));
}

/* ---- the pipeline --------------------------------------------------------------- */

static int copy_svc(struct tb_analysis_result *res, const struct tb_class_service *svc, size_t n)
{
    if (!n)
        return 0;
    res->svc = malloc(n * sizeof *res->svc);
    if (!res->svc)
        return TB_E_NOMEM;
    memcpy(res->svc, svc, n * sizeof *svc);
    res->nsvc = n;
    return 0;
}

/* When each throughput level held, from the row's windows and its analysis
 * (computed or stored: recomputing them costs one pass over the windows).
 * The same rule and windows give the same levels as a.levels. */
static int row_spans(struct tb_analysis_result *res)
{
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, &res->a, res->win, res->nwin);
    double lv[TB_ARRAY_SIZE(res->a.levels)];
    uint32_t nl;
    return tb_levels_over_time(res->win, res->nwin, &rule, (uint32_t)TB_ARRAY_SIZE(lv), lv, &nl,
                               &res->spans, &res->nspans);
}

/* Rows already stored for this grid and these counts are loaded into rows[];
 * returns whether every row was. */
static bool load_rows(struct pipe *p, struct tb_analysis_result *rows, size_t nrows)
{
    bool all_stored = true;
    for (size_t r = 0; r < nrows; r++) {
        /* Row 0 is the tier, or with --server the server (stored under its id). */
        uint32_t sv = r == 0 ? p->o->server : p->servers[r - 1];
        uint64_t cnt = r == 0 ? p->count[0] : p->count[r];
        if (!load_stored(p, sv, cnt, &rows[r]))
            all_stored = false;
    }
    return all_stored;
}

/* The rest of the pipeline once the service times and (unless every row was
 * stored) the windows are known: N*, episodes and levels per row, stored
 * back, handed out. Takes rows, svc and w (the windows of every row, calls in
 * flight filled; NULL when all_stored or no window). */
static int finish_rows(struct pipe *p, struct tb_analysis_result *rows, size_t nrows,
                       bool all_stored, struct tb_class_service *svc, size_t nsvc, int64_t wu,
                       struct tb_window *w, struct tb_analysis_result *total,
                       struct tb_analysis_result **servers, size_t *nservers)
{
    const struct tb_analyze_opts *o = p->o;
    int rc = 0;
    /* A hint the data refute is not taken (nstar.c, WAITS_HINT_LO/HI). */
    double waits_hint = p->calls && p->count
                            ? tb_analysis_waits_slope(svc, nsvc, wu, p->call_ns, p->count[0])
                            : 0;
    if (!all_stored) {
        for (size_t r = 0; r < nrows && !rc; r++) {
            /* With --server the wanted row is that server's (row 1). */
            size_t src = (r == 0 && o->server) ? 1 : r;
            struct tb_analysis_result *res = &rows[r];
            res->a.tier = p->tier;
            res->a.server = r == 0 ? o->server : p->servers[r - 1];
            res->a.width_ns = o->width_ns;
            res->a.from_ns = p->w0;
            res->a.to_ns = p->w0 + (int64_t)p->nwin * o->width_ns;
            res->a.requests = r == 0 ? p->count[0] : p->count[r];
            if (p->nwin) {
                res->win = malloc(p->nwin * sizeof *res->win);
                if (!res->win) {
                    rc = TB_E_NOMEM;
                    break;
                }
                memcpy(res->win, w + src * p->nwin, p->nwin * sizeof *w);
                res->nwin = p->nwin;
            }
            rc = analyze_row(res, wu, p->calls, waits_hint, p->lives ? &p->lives[src] : NULL);
            if (rc)
                tb_seterr(p->err, p->errlen, "analysing tier '%s': %s", p->tier_name,
                          tb_strerror(rc));
            else
                store_result(p, res);
        }
        if (rc)
            goto fail;
    }
    for (size_t r = 0; r < nrows; r++) {
        if ((rc = copy_svc(&rows[r], svc, nsvc)) != 0 || (rc = row_spans(&rows[r])) != 0)
            goto fail;
        rows[r].waits_downstream = p->calls;
        rows[r].waits_slope = p->calls ? waits_hint : 0;
    }
    if (nsvc && !o->service_file && !o->calibrate && !all_stored &&
        (rc = tb_store_put_services(p->st, svc, nsvc)) != 0) {
        tb_log_warn("could not store the service times of tier '%s': %s", p->tier_name,
                    tb_strerror(rc));
        rc = 0;
    }
    free(svc);
    free(w);
    *total = rows[0];
    if (servers) {
        if (p->nservers) {
            *servers = malloc(p->nservers * sizeof **servers);
            if (!*servers) {
                for (size_t r = 0; r < nrows; r++)
                    tb_analysis_result_free(&rows[r]);
                free(rows);
                memset(total, 0, sizeof *total);
                return TB_E_NOMEM;
            }
            memcpy(*servers, rows + 1, p->nservers * sizeof **servers);
        } else {
            *servers = NULL;
        }
        *nservers = p->nservers;
    }
    free(rows);
    return 0;
fail:
    free(svc);
    free(w);
    for (size_t r = 0; r < nrows; r++)
        tb_analysis_result_free(&rows[r]);
    free(rows);
    return rc;
}

/* Runs the pipeline for the rows asked: row 0 (the tier, or the --server) into
 * *total, and with `servers` each server of the tier. */
static int run(struct pipe *p, struct tb_analysis_result *total,
               struct tb_analysis_result **servers,
               size_t *nservers)
{
    const struct tb_analyze_opts *o = p->o;
    int rc = pipe_load(p);
    if (rc)
        return rc;
    size_t nrows = servers ? 1 + p->nservers : 1;
    struct tb_analysis_result *rows = calloc(nrows, sizeof *rows);
    if (!rows)
        return TB_E_NOMEM;
    bool all_stored = load_rows(p, rows, nrows);
    struct tb_class_service *svc = NULL;
    size_t nsvc = 0;
    int64_t wu = 0;
    struct tb_window *w = NULL;
    if (p->count[0]) {
        rc = estimate_services(p, &svc, &nsvc, &wu);
        if (rc)
            goto fail;
    }
    if (!all_stored) {
        for (size_t r = 0; r < nrows; r++)
            tb_analysis_result_free(&rows[r]);
        if ((rc = pipe_lives_of(p, p->rq, p->nrq)) != 0)
            goto fail;
        struct tb_units *u = NULL;
        size_t nw = 0;
        rc = tb_units_new(&u, svc, nsvc, 1.0);
        if (!rc && p->nwin)
            rc = tb_windows_compute(p->rq, p->nrq, u, p->tier, p->servers, p->nservers,
                                    o->width_ns, p->w0,
                                    p->w0 + (int64_t)p->nwin * o->width_ns, &w, &nw);
        if (u)
            tb_units_free(u);
        if (rc) {
            tb_seterr(p->err, p->errlen, "computing the windows of tier '%s': %s", p->tier_name,
                   tb_strerror(rc));
            goto fail;
        }
        if (p->nwin && nw != (1 + p->nservers) * p->nwin) {
            rc = TB_E_INVAL;
            tb_seterr(p->err, p->errlen, "window computation returned %zu rows, expected %zu", nw,
                   (1 + p->nservers) * p->nwin);
            goto fail;
        }
        if (p->nwin &&
            (rc = tb_analysis_fill_calls(p->cat, p->down, p->ndown, p->servers, p->nservers, w,
                                         p->nwin)) != 0) {
            tb_seterr(p->err, p->errlen, "computing the calls in flight of tier '%s': %s",
                   p->tier_name, tb_strerror(rc));
            goto fail;
        }
    }
    return finish_rows(p, rows, nrows, all_stored, svc, nsvc, wu, w, total, servers, nservers);
fail:
    free(svc);
    free(w);
    for (size_t r = 0; r < nrows; r++)
        tb_analysis_result_free(&rows[r]);
    free(rows);
    return rc;
}

static int pipe_init(struct pipe *p, struct tb_store *st, const struct tb_catalog *cat,
                     uint32_t tier, const struct tb_analyze_opts *o, char *errbuf, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->st = st;
    p->cat = cat;
    p->o = o;
    p->tier = tier;
    p->err = errbuf;
    p->errlen = errlen;
    const struct tb_tier_info *ti = tb_catalog_tier_get(cat, tier);
    if (!ti) {
        tb_seterr(errbuf, errlen, "unknown tier id %u", tier);
        return TB_E_NOTFOUND;
    }
    p->tier_name = ti->name;
    if (o->width_ns <= 0) {
        tb_seterr(errbuf, errlen, "the window width must be positive");
        return TB_E_INVAL;
    }
    if (o->server) {
        const struct tb_server_info *s = tb_catalog_server_get(cat, o->server);
        if (!s || s->tier != tier) {
            tb_seterr(errbuf, errlen, "server %u is not a server of tier '%s'", o->server,
                      ti->name);
            return TB_E_NOTFOUND;
        }
    }
    return 0;
}

int tb_analyze_tier(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                    const struct tb_analyze_opts *o, struct tb_analysis_result *res, char *errbuf,
                    size_t errlen)
{
    memset(res, 0, sizeof *res);
    struct pipe p;
    int rc = pipe_init(&p, st, cat, tier, o, errbuf, errlen);
    if (!rc)
        rc = run(&p, res, NULL, NULL);
    pipe_free(&p);
    return rc;
}

int tb_analyze_tier_servers(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                            const struct tb_analyze_opts *o, struct tb_analysis_result *total,
                            struct tb_analysis_result **servers, size_t *nservers, char *errbuf,
                            size_t errlen)
{
    memset(total, 0, sizeof *total);
    *servers = NULL;
    *nservers = 0;
    struct pipe p;
    int rc = pipe_init(&p, st, cat, tier, o, errbuf, errlen);
    if (!rc && o->server) {
        tb_seterr(errbuf, errlen, "every server of a tier is analysed, not one");
        rc = TB_E_INVAL;
    }
    if (!rc)
        rc = run(&p, total, servers, nservers);
    pipe_free(&p);
    return rc;
}

/* ---- the same pipeline over a stream ---------------------------------------------------
 * Two passes over every tier's requests in store order: the first counts rows,
 * spans the grid and feeds the service-time estimator (tb_svcest) the tier's
 * requests and its machines' calls exactly as tb_service_estimate orders them
 * (by arrival; at one instant the tier's requests first, then the calls, each
 * in store order); the second feeds the window accumulator (tb_winacc) and the
 * calls in flight per row (tb_busyacc) as tb_windows_compute and
 * tb_analysis_fill_calls do. Then finish_rows, as run() does. */
struct tb_tierfeed {
    struct pipe p;
    struct tb_analyze_opts o;
    int phase;                   /* 1: counting and service times, 2: windows, 3: done */
    struct tb_svc_host *hosts;
    size_t nhosts;
    bool want_down;
    struct tb_svcest *est;
    struct tb_stretchacc *lacc;  /* phase 1: lives by arrival concurrency */
    struct tb_request *pend;     /* calls at the latest instant, held behind the requests */
    size_t npend, cappend;
    int64_t lo, hi;
    uint64_t ndown;
    struct tb_analysis_result *rows;
    size_t nrows;
    bool all_stored;
    struct tb_class_service *svc;
    size_t nsvc;
    int64_t wu;
    struct tb_units *units;
    struct tb_winacc *acc;
    struct tb_busyacc **busy;    /* per row: the tier, then each server */
    const struct tb_addr **saddr; /* per server row: its address (NULL: unknown) */
};

int tb_tierfeed_new(struct tb_tierfeed **out, struct tb_store *st, const struct tb_catalog *cat,
                    uint32_t tier, const struct tb_analyze_opts *o, char *errbuf, size_t errlen)
{
    *out = NULL;
    if (o->server || o->service_file || o->calibrate) {
        tb_seterr(errbuf, errlen, "a streamed analysis is of every server, with estimated service "
                               "times");
        return TB_E_INVAL;
    }
    struct tb_tierfeed *f = calloc(1, sizeof *f);
    if (!f)
        return TB_E_NOMEM;
    f->o = *o;
    int rc = pipe_init(&f->p, st, cat, tier, &f->o, errbuf, errlen);
    if (!rc)
        rc = pipe_servers(&f->p);
    if (!rc)
        rc = tb_analysis_svc_hosts(cat, tier, &f->hosts, &f->nhosts);
    struct tb_svc_opts so;
    tb_svc_opts_default(&so);
    so.period_ns = SVC_PERIOD_NS;
    if (!rc)
        rc = tb_svcest_new(&f->est, f->hosts, f->nhosts, &so);
    if (!rc)
        rc = tb_stretchacc_new(&f->lacc);
    if (rc) {
        tb_tierfeed_free(f);
        return rc;
    }
    f->want_down = f->nhosts && tb_catalog_tier_count(cat) > 1;
    f->lo = INT64_MAX;
    f->hi = INT64_MIN;
    f->phase = 1;
    *out = f;
    return 0;
}

/* The window grid and the stored rows of a feed whose span (lo, hi) and
 * calls (ndown) are known: after a first pass (tb_tierfeed_mid) or from its
 * stored summary (tb_tierfeed_resume). As estimate_services: a tier without
 * requests estimates nothing. */
static int feed_rows(struct pipe *p, struct tb_tierfeed *f)
{
    int rc = pipe_grid(p, f->lo, f->hi);
    if (rc)
        return rc;
    p->calls = p->count[0] && f->ndown > 0;
    f->nrows = 1 + p->nservers;
    if (!(f->rows = calloc(f->nrows, sizeof *f->rows)))
        return TB_E_NOMEM;
    f->all_stored = load_rows(p, f->rows, f->nrows);
    return 0;
}

static int feed_flush_calls(struct tb_tierfeed *f)
{
    int rc = 0;
    for (size_t i = 0; i < f->npend && !rc; i++)
        rc = tb_svcest_add_down(f->est, &f->pend[i]);
    f->npend = 0;
    return rc;
}

int tb_tierfeed_add(struct tb_tierfeed *f, const struct tb_request *r)
{
    struct pipe *p = &f->p;
    bool own = r->tier == p->tier;
    bool call = !own && f->want_down && tb_analysis_called_from(r, f->hosts, f->nhosts);
    if (!own && !call)
        return 0;
    int rc = 0;
    if (f->phase == 1) {
        if (f->npend && r->arrival_ns > f->pend[0].arrival_ns && (rc = feed_flush_calls(f)))
            return rc;
        if (own) {
            pipe_count(p, r, &f->lo, &f->hi);
            if ((rc = tb_stretchacc_add(f->lacc, r)))
                return rc;
            return tb_svcest_add(f->est, r);
        }
        f->ndown++;
        p->call_ns += tb_analysis_call_life(r);
        if ((rc = tb_grow(&f->pend, &f->cappend, f->npend + 1, sizeof *f->pend)))
            return rc;
        f->pend[f->npend++] = *r;
        return 0;
    }
    if (f->phase != 2 || !f->acc)
        return 0;
    if (own)
        return tb_winacc_add(f->acc, r, tb_units_get(f->units, r->class_id, r->arrival_ns));
    /* A call counts for the tier row, and for the server whose address sent
     * it, or for every server when none of them did (tb_analysis_fill_calls). */
    rc = tb_busyacc_add(f->busy[0], r);
    bool any = false;
    for (size_t k = 0; k < p->nservers && !any; k++)
        any = f->saddr[k] && tb_addr_ip_eq(&r->client, f->saddr[k]);
    for (size_t k = 0; k < p->nservers && !rc; k++)
        if (!any || (f->saddr[k] && tb_addr_ip_eq(&r->client, f->saddr[k])))
            rc = tb_busyacc_add(f->busy[k + 1], r);
    return rc;
}

int tb_tierfeed_mid(struct tb_tierfeed *f)
{
    struct pipe *p = &f->p;
    if (f->phase != 1)
        return TB_E_INVAL;
    int rc = feed_flush_calls(f);
    if (!rc)
        rc = feed_rows(p, f);
    if (!rc)
        rc = pipe_lives(p, f->lacc);
    if (rc)
        return rc;
    tb_stretchacc_free(f->lacc);
    f->lacc = NULL;
    if (p->count[0]) {
        rc = tb_svcest_finish(f->est, NULL, 0, &f->svc, &f->nsvc, &f->wu);
        if (rc) {
            tb_seterr(p->err, p->errlen, "estimating the service times of tier '%s': %s",
                   p->tier_name, tb_strerror(rc));
            return rc;
        }
    }
    tb_svcest_free(f->est);
    f->est = NULL;
    free(f->pend);
    f->pend = NULL;
    f->phase = 2;
    if ((rc = tb_units_new(&f->units, f->svc, f->nsvc, 1.0)))
        return rc;
    if (f->all_stored || !p->nwin)
        return 0;
    for (size_t r = 0; r < f->nrows; r++)
        tb_analysis_result_free(&f->rows[r]);
    int64_t to = p->w0 + (int64_t)p->nwin * f->o.width_ns;
    rc = tb_winacc_new(&f->acc, p->tier, f->o.width_ns, p->w0, to, p->servers, p->nservers);
    f->busy = calloc(f->nrows, sizeof *f->busy);
    f->saddr = calloc(p->nservers + 1, sizeof *f->saddr);
    if (!rc && (!f->busy || !f->saddr))
        rc = TB_E_NOMEM;
    for (size_t r = 0; r < f->nrows && !rc; r++)
        rc = tb_busyacc_new(&f->busy[r], p->w0, f->o.width_ns, p->nwin);
    for (size_t k = 0; k < p->nservers && !rc; k++) {
        const struct tb_server_info *si = tb_catalog_server_get(p->cat, p->servers[k]);
        f->saddr[k] = si ? &si->addr : NULL;
    }
    if (rc)
        tb_seterr(p->err, p->errlen, "computing the windows of tier '%s': %s", p->tier_name,
               tb_strerror(rc));
    return rc;
}

void tb_tierfeed_summary(const struct tb_tierfeed *f, struct tb_tierfeed_sum *s)
{
    s->count = f->p.count;
    s->nrows = 1 + f->p.nservers;
    s->lo = f->lo;
    s->hi = f->hi;
    s->ndown = f->ndown;
    s->svc = f->svc;
    s->nsvc = f->nsvc;
    s->wu = f->wu;
    s->lives = f->p.lives;
}

/* tb_tierfeed_mid with the first pass's results given instead of gathered:
 * the same grid, stored rows, service times and units. */
int tb_tierfeed_resume(struct tb_tierfeed *f, const struct tb_tierfeed_sum *s)
{
    struct pipe *p = &f->p;
    if (f->phase != 1 || s->nrows != 1 + p->nservers)
        return TB_E_NOTFOUND;
    memcpy(p->count, s->count, s->nrows * sizeof *p->count);
    f->lo = s->lo;
    f->hi = s->hi;
    f->ndown = s->ndown;
    int rc = feed_rows(p, f);
    if (rc)
        return rc;
    if (s->nsvc) {
        if (!(f->svc = malloc(s->nsvc * sizeof *f->svc)))
            return TB_E_NOMEM;
        memcpy(f->svc, s->svc, s->nsvc * sizeof *f->svc);
    }
    f->nsvc = s->nsvc;
    f->wu = s->wu;
    if (s->lives) {
        if (!(p->lives = malloc(s->nrows * sizeof *p->lives)))
            return TB_E_NOMEM;
        memcpy(p->lives, s->lives, s->nrows * sizeof *p->lives);
    }
    tb_svcest_free(f->est);
    f->est = NULL;
    f->phase = 2;
    if ((rc = tb_units_new(&f->units, f->svc, f->nsvc, 1.0)))
        return rc;
    return f->all_stored || !p->nwin ? 0 : TB_E_NOTFOUND;
}

void tb_tierfeed_services(const struct tb_tierfeed *f, const struct tb_class_service **svc,
                          size_t *nsvc)
{
    *svc = f->svc;
    *nsvc = f->nsvc;
}

const struct tb_stretch *tb_tierfeed_lives(const struct tb_tierfeed *f, uint32_t server)
{
    const struct pipe *p = &f->p;
    if (!p->lives)
        return NULL;
    if (!server)
        return &p->lives[0];
    for (size_t k = 0; k < p->nservers; k++)
        if (p->servers[k] == server)
            return &p->lives[k + 1];
    return NULL;
}

uint64_t tb_tierfeed_requests(const struct tb_tierfeed *f)
{
    return f->p.count ? f->p.count[0] : 0;
}

int tb_tierfeed_finish(struct tb_tierfeed *f, struct tb_analysis_result *total,
                       struct tb_analysis_result **servers, size_t *nservers)
{
    struct pipe *p = &f->p;
    memset(total, 0, sizeof *total);
    *servers = NULL;
    *nservers = 0;
    if (f->phase != 2)
        return TB_E_INVAL;
    f->phase = 3;
    struct tb_window *w = NULL;
    int rc = 0;
    if (f->acc) {
        size_t nw = 0;
        rc = tb_winacc_finish(f->acc, &w, &nw);
        if (rc) {
            tb_seterr(p->err, p->errlen, "computing the windows of tier '%s': %s", p->tier_name,
                   tb_strerror(rc));
        } else if (nw != f->nrows * p->nwin) {
            rc = TB_E_INVAL;
            tb_seterr(p->err, p->errlen, "window computation returned %zu rows, expected %zu", nw,
                   f->nrows * p->nwin);
        }
        /* Calls in flight only where the tier's machines called at all, as
         * tb_analysis_fill_calls (which leaves them 0 without calls). */
        for (size_t r = 0; r < f->nrows && !rc && f->ndown; r++)
            rc = tb_busyacc_finish(f->busy[r], w + r * p->nwin);
        if (rc) {
            free(w);
            return rc;
        }
    }
    struct tb_analysis_result *rows = f->rows;
    struct tb_class_service *svc = f->svc;
    f->rows = NULL;
    f->svc = NULL;
    return finish_rows(p, rows, f->nrows, f->all_stored, svc, f->nsvc, f->wu, w, total, servers,
                       nservers);
}

void tb_tierfeed_free(struct tb_tierfeed *f)
{
    if (!f)
        return;
    pipe_free(&f->p);
    tb_svcest_free(f->est);
    tb_stretchacc_free(f->lacc);
    free(f->pend);
    free(f->hosts);
    if (f->rows)
        for (size_t r = 0; r < f->nrows; r++)
            tb_analysis_result_free(&f->rows[r]);
    free(f->rows);
    free(f->svc);
    if (f->units)
        tb_units_free(f->units);
    tb_winacc_free(f->acc);
    for (size_t r = 0; f->busy && r < f->nrows; r++)
        tb_busyacc_free(f->busy[r]);
    free(f->busy);
    free(f->saddr);
    free(f);
}

void tb_analysis_result_free(struct tb_analysis_result *res)
{
    free(res->win);
    free(res->ep);
    free(res->svc);
    free(res->spans);
    memset(res, 0, sizeof *res);
}

/* ---- --window auto ------------------------------------------------------------------ */

/* Within ±10% at 90%: the accuracy the N* sweep asks of the estimate. */
#define AUTO_STABLE 0.10

static void auto_trials(char *buf, size_t len, const struct tb_window_choice *c, uint32_t upto)
{
    size_t off = strlen(buf);
    for (uint32_t i = 0; i < upto && off < len; i++) {
        const struct tb_window_try *t = &c->tried[i];
        char b[32];
        tb_fmt_duration(t->width_ns, b, sizeof b);
        if (!isfinite(t->n_star))
            off += (size_t)snprintf(buf + off, len - off, "%s%s no knee", i ? ", " : "", b);
        else if (!isfinite(t->half))
            off += (size_t)snprintf(buf + off, len - off, "%s%s %.2f unbounded", i ? ", " : "",
                                    b, t->n_star);
        else
            off += (size_t)snprintf(buf + off, len - off, "%s%s %.2f ±%.0f%%", i ? ", " : "", b,
                                    t->n_star, 100 * t->half / t->n_star);
    }
}

int tb_analyze_window_auto(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                           const struct tb_analyze_opts *o, struct tb_window_choice *c,
                           char *errbuf, size_t errlen)
{
    static const int64_t widths[] = {10, 20, 50, 100, 200, 500, 1000};
    memset(c, 0, sizeof *c);
    /* The lives do not depend on the width: the row's, once, over the
     * default width's range. */
    struct pipe lp;
    struct tb_analyze_opts lo = *o;
    lo.width_ns = TB_WINDOW_DEFAULT_NS;
    const struct tb_stretch *lives = NULL;
    int64_t qf, qt;
    tb_analyze_query_range(lo.from_ns, lo.to_ns, lo.width_ns, &qf, &qt);
    int lrc = pipe_init(&lp, st, cat, tier, &lo, errbuf, errlen);
    if (!lrc)
        lrc = tb_store_requests(st, tier, qf, qt, &lp.rq, &lp.nrq);
    if (!lrc)
        lrc = pipe_servers(&lp);
    if (!lrc)
        lrc = pipe_lives_of(&lp, lp.rq, lp.nrq);
    if (lrc) {
        if (!errbuf[0])
            tb_seterr(errbuf, errlen, "reading the requests of tier %u: %s", tier,
                      tb_strerror(lrc));
        pipe_free(&lp);
        return lrc;
    }
    lives = &lp.lives[o->server ? 1 : 0];
    int64_t best = 0;
    double best_rel = INFINITY;
    bool stable = false;
    for (size_t i = 0; i < TB_ARRAY_SIZE(widths) && !stable; i++) {
        struct tb_analyze_opts ow = *o;
        ow.width_ns = widths[i] * TB_NS_PER_MS;
        struct tb_analysis_result res;
        char err[256] = "";
        int rc = tb_analyze_tier(st, cat, tier, &ow, &res, err, sizeof err);
        if (rc == TB_E_FULL)
            continue; /* too many windows at this width: try a longer one */
        if (rc) {
            snprintf(errbuf, errlen, "%s", err[0] ? err : tb_strerror(rc));
            pipe_free(&lp);
            return rc;
        }
        struct tb_nstar_opts no;
        tb_nstar_opts_default(&no);
        no.stretch = lives;
        no.waits_downstream = res.waits_downstream;
        if (res.waits_downstream)
            no.slope_hint = res.waits_slope;
        else if (res.a.work_unit_ns > 0)
            no.slope_hint = (double)TB_NS_PER_SEC / (double)res.a.work_unit_ns;
        struct tb_nstar est;
        double half = NAN;
        rc = tb_nstar_interval(res.win, res.nwin, &no, &est, &half);
        tb_analysis_result_free(&res);
        if (rc) {
            snprintf(errbuf, errlen, "N* interval at %lld ms: %s", (long long)widths[i],
                     tb_strerror(rc));
            pipe_free(&lp);
            return rc;
        }
        struct tb_window_try *t = &c->tried[c->ntried++];
        t->width_ns = ow.width_ns;
        t->n_star = tb_nstar_threshold(&est);
        t->half = isfinite(t->n_star) ? half : NAN;
        double rel = isfinite(t->n_star) && t->n_star > 0 ? t->half / t->n_star : NAN;
        if (rel < best_rel) {
            best_rel = rel;
            best = ow.width_ns;
        }
        stable = rel <= AUTO_STABLE;
    }
    char b[32];
    if (stable) {
        c->width_ns = best;
        snprintf(c->reason, sizeof c->reason,
                 "window %s: the shortest at which N* is stable (within ±%.0f%% at 90%%): ",
                 tb_fmt_duration(best, b, sizeof b), 100 * AUTO_STABLE);
    } else if (best) {
        c->width_ns = best;
        snprintf(c->reason, sizeof c->reason,
                 "window %s: no width gives N* within ±%.0f%% at 90%%; this one comes closest: ",
                 tb_fmt_duration(best, b, sizeof b), 100 * AUTO_STABLE);
    } else {
        c->width_ns = 50 * TB_NS_PER_MS;
        snprintf(c->reason, sizeof c->reason,
                 "window 50ms (the default): no width from 10ms to 1s shows a knee: ");
    }
    auto_trials(c->reason, sizeof c->reason, c, c->ntried);
    pipe_free(&lp);
    return 0;
}

/* ---- the report: servers and cross-tier attribution ------------------------------- */

static int cmp_corr(const void *pa, const void *pb)
{
    const struct tb_tier_corr *a = pa, *b = pb;
    bool fa = isfinite(a->r), fb = isfinite(b->r);
    if (fa != fb)
        return fa ? -1 : 1;
    if (fa && a->r != b->r)
        return a->r > b->r ? -1 : 1;
    return (a->tier > b->tier) - (a->tier < b->tier);
}

/* Share of a tier's requests made by the machines of other tiers (their
 * servers' IPs or configured hosts): near 0 for the front tier, which users
 * call, near 1 for a tier only other tiers call. */
static double called_by_tiers_share(const struct tb_catalog *cat, uint32_t tier,
                                    const struct tb_request *rq, size_t n)
{
    uint32_t ns = tb_catalog_server_count(cat);
    uint32_t nh = tb_catalog_host_count(cat);
    size_t hit = 0, tot = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].tier != tier)
            continue;
        tot++;
        bool m = false;
        for (uint32_t s = 1; s <= ns && !m; s++) {
            const struct tb_server_info *si = tb_catalog_server_get(cat, s);
            m = si && si->tier != tier && si->addr.family &&
                tb_addr_ip_eq(&si->addr, &rq[i].client);
        }
        /* Every configured host of every other tier (no cap: the same
         * hosts tb_analysis_svc_hosts hands the service-time estimate). */
        for (uint32_t h = 0; h < nh && !m; h++) {
            uint32_t ht;
            struct tb_addr ha;
            m = tb_catalog_host_at(cat, h, &ht, &ha) == 0 && ht != tier &&
                tb_addr_ip_eq(&ha, &rq[i].client);
        }
        hit += m;
    }
    return tot ? (double)hit / (double)tot : 1.0;
}

/* Which tier explains the front tier's response-time spikes: each tier's
 * load per window against the front tier's mean response time per window
 * (windows without front-tier completions have no response time and are
 * left out). Windows here count every request as one unit: only load and
 * response time are used. */
static int build_corr(struct pipe *p, struct tb_report *rep)
{
    const struct tb_catalog *cat = p->cat;
    char *errbuf = p->err;
    size_t errlen = p->errlen;
    const struct tb_analysis_result *tot = &rep->total;
    if (!tot->nwin)
        return 0;
    int64_t from = tot->win[0].start_ns, to = from + (int64_t)tot->nwin * rep->width_ns;
    int rc = pipe_all(p);
    if (rc)
        return rc;
    const struct tb_request *all = p->all;
    size_t nall = p->nall;
    uint32_t nt = tb_catalog_tier_count(cat);
    struct tb_window **tw = calloc((size_t)nt + 1, sizeof *tw);
    size_t *ntw = calloc((size_t)nt + 1, sizeof *ntw);
    uint64_t *cnt = calloc((size_t)nt + 1, sizeof *cnt);
    rep->corr = calloc((size_t)nt + 1, sizeof *rep->corr);
    if (!tw || !ntw || !cnt || !rep->corr) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < nall; i++)
        if (all[i].tier <= nt && all[i].departure_ns >= from && all[i].arrival_ns < to)
            cnt[all[i].tier]++;
    double best = 2;
    for (uint32_t t = 1; t <= nt; t++) {
        if (!cnt[t])
            continue;
        double share = called_by_tiers_share(cat, t, all, nall);
        if (share < best || (share == best && cnt[t] > cnt[rep->front_tier])) {
            best = share;
            rep->front_tier = t;
        }
    }
    if (!rep->front_tier)
        goto out;
    for (uint32_t t = 1; t <= nt; t++) {
        if (!cnt[t])
            continue;
        rc = tb_windows_compute(all, nall, NULL, t, NULL, 0, rep->width_ns, from, to, &tw[t],
                                &ntw[t]);
        if (rc) {
            tb_seterr(errbuf, errlen, "computing the windows of tier %u: %s", t, tb_strerror(rc));
            goto out;
        }
    }
    for (uint32_t t = 1; t <= nt; t++) {
        if (!cnt[t])
            continue;
        struct tb_tier_corr *c = &rep->corr[rep->ncorr++];
        c->tier = t;
        c->requests = cnt[t];
        rc = tb_correlate_load_rt(tw[t], ntw[t], tw[rep->front_tier], ntw[rep->front_tier],
                                  &c->r);
        if (rc) {
            tb_seterr(errbuf, errlen, "correlating tier %u: %s", t, tb_strerror(rc));
            goto out;
        }
    }
    rep->front_win = tw[rep->front_tier];
    rep->nfront = ntw[rep->front_tier];
    tw[rep->front_tier] = NULL;
    qsort(rep->corr, rep->ncorr, sizeof *rep->corr, cmp_corr);
out:
    for (uint32_t t = 0; tw && t <= nt; t++)
        free(tw[t]);
    free(tw);
    free(ntw);
    free(cnt);
    return rc;
}

int tb_report_build(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                    const struct tb_analyze_opts *o, struct tb_report *rep, char *errbuf,
                    size_t errlen)
{
    memset(rep, 0, sizeof *rep);
    rep->tier = tier;
    rep->width_ns = o->width_ns;
    rep->from_ns = o->from_ns;
    rep->to_ns = o->to_ns;
    struct pipe p;
    int rc = pipe_init(&p, st, cat, tier, o, errbuf, errlen);
    if (!rc)
        rc = run(&p, &rep->total, o->server ? NULL : &rep->servers,
                 o->server ? NULL : &rep->nservers);
    if (!rc)
        rc = build_corr(&p, rep);
    if (!rc && (rc = tb_class_profile(p.rq, p.nrq, o->server, o->from_ns, o->to_ns,
                                      &rep->profile, &rep->nprofile,
                                      &rep->profile_total_ns)) != 0)
        tb_seterr(errbuf, errlen, "the class profile: %s", tb_strerror(rc));
    pipe_free(&p);
    if (rc)
        tb_report_free(rep);
    return rc;
}

void tb_report_free(struct tb_report *rep)
{
    tb_analysis_result_free(&rep->total);
    for (size_t i = 0; i < rep->nservers; i++)
        tb_analysis_result_free(&rep->servers[i]);
    free(rep->servers);
    free(rep->front_win);
    free(rep->corr);
    free(rep->profile);
    if (rep->have_cp)
        tb_critpath_free(&rep->cp);
    memset(rep, 0, sizeof *rep);
}
