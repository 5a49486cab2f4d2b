/* SPDX-License-Identifier: MIT */
/* critpath.c — request trees and the critical path of front requests
 * (critpath.h has the contract). */
#include "critpath.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "linkstore.h"
#include "sort.h"
#include "util.h"

/* Levels of concurrency told apart (and cores tried). */
#define LEVELS 256

struct cevent {
    int64_t t;
    uint32_t server;
    int32_t delta;
    uint32_t self; /* request index + 1 at its own arrival, else 0 */
};

/* Events by server, then time, a departure before an arrival at the same
 * instant: stable sorts (tb_radix_sort) on the arrival bit, on the time
 * (tb_radix_sort_i64: t leads the record),
 * then on the server, each keeping the order of the one before among its
 * equals. */
static uint64_t cevent_arrival_key(const void *e, const void *ctx)
{
    (void)ctx;
    return ((const struct cevent *)e)->delta > 0;
}

static uint64_t cevent_server_key(const void *e, const void *ctx)
{
    (void)ctx;
    return ((const struct cevent *)e)->server;
}

static int cevent_sort(struct cevent *ev, size_t n)
{
    int rc;
    if ((rc = tb_radix_sort(ev, n, sizeof *ev, cevent_arrival_key, NULL)) ||
        (rc = tb_radix_sort_i64(ev, n, sizeof *ev)))
        return rc;
    return tb_radix_sort(ev, n, sizeof *ev, cevent_server_key, NULL);
}

void tb_trees_free(struct tb_trees *t)
{
    free(t->root);
    free(t->own);
    free(t->pool);
    free(t->work);
    free(t->svc);
    free(t->cores);
    free(t->svc_alone);
    free(t->svc_solo);
    free(t->nsolo);
    memset(t, 0, sizeof *t);
}

/* svc_solo, nsolo: the own time of requests (in arrival order) that
 * arrived at an empty server: no other request of it in progress, at work,
 * out on a call or waiting for a connection. */
static int solo_own(const struct tb_request *rq, size_t n, struct tb_trees *t)
{
    int64_t *last_dep = malloc((t->nsrv + 1) * sizeof *last_dep); /* latest departure so far */
    if (!last_dep)
        return TB_E_NOMEM;
    for (uint32_t s = 0; s <= t->nsrv; s++)
        last_dep[s] = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = rq[i].server;
        if (s == 0 || s > t->nsrv)
            continue;
        if (rq[i].arrival_ns >= last_dep[s]) {
            t->svc_solo[s] += t->own[i];
            t->nsolo[s]++;
        }
        if (rq[i].departure_ns > last_dep[s])
            last_dep[s] = rq[i].departure_ns;
    }
    for (uint32_t s = 1; s <= t->nsrv; s++)
        if (t->nsolo[s])
            t->svc_solo[s] /= (double)t->nsolo[s];
    free(last_dep);
    return 0;
}

int tb_trees_build(const struct tb_catalog *cat, const struct tb_request *rq, size_t n,
                   const struct tb_links *lk, uint32_t front, struct tb_trees *t)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->front = front;
    t->nsrv = tb_catalog_server_count(cat);
    t->root = malloc((n + 1) * sizeof *t->root);
    t->own = malloc((n + 1) * sizeof *t->own);
    t->pool = calloc(n + 1, sizeof *t->pool);
    t->work = malloc((n + 1) * sizeof *t->work);
    t->svc = calloc(t->nsrv + 1, sizeof *t->svc);
    t->cores = calloc(t->nsrv + 1, sizeof *t->cores);
    t->svc_alone = calloc(t->nsrv + 1, sizeof *t->svc_alone);
    t->svc_solo = calloc(t->nsrv + 1, sizeof *t->svc_solo);
    t->nsolo = calloc(t->nsrv + 1, sizeof *t->nsolo);
    /* Time spent at each number of requests at work, per server. */
    double *at = calloc((size_t)(t->nsrv + 1) * (LEVELS + 1), sizeof *at);
    double *iso = calloc(t->nsrv + 1, sizeof *iso), *all = calloc(t->nsrv + 1, sizeof *all);
    uint64_t *niso = calloc(t->nsrv + 1, sizeof *niso), *nall = calloc(t->nsrv + 1, sizeof *nall);
    struct cevent *ev = malloc((4 * n + 1) * sizeof *ev);
    int rc = 0;
    if (!t->root || !t->own || !t->pool || !t->work || !t->svc || !t->cores || !t->svc_alone ||
        !t->svc_solo || !t->nsolo || !at || !iso || !all || !niso || !nall || !ev) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        t->own[i] = (double)(rq[i].departure_ns - rq[i].arrival_ns);
        t->root[i] = rq[i].tier == front ? (int64_t)i : -1;
    }
    /* Parents mostly come first in arrival order; a few passes settle ties. */
    for (int pass = 0; pass < 8; pass++) {
        bool changed = false;
        for (size_t i = 0; i < n; i++) {
            if (t->root[i] >= 0 || !lk->parent[i])
                continue;
            int64_t pr = t->root[lk->parent[i] - 1];
            if (pr >= 0) {
                t->root[i] = pr;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
    for (size_t i = 0; i < n; i++) {
        if (!lk->parent[i])
            continue;
        size_t p = lk->parent[i] - 1;
        double w = (double)lk->pool_wait_ns[i];
        t->own[p] -= (double)(rq[i].departure_ns - rq[i].arrival_ns) + w;
        t->pool[p] += w;
    }
    /* A wait estimated longer than the time left for it is cut to that time,
     * so that the parts of a request add up to its duration. */
    for (size_t i = 0; i < n; i++)
        if (t->own[i] < 0) {
            t->pool[i] = fmax(0, t->pool[i] + t->own[i]);
            t->own[i] = 0;
        }
    /* Own-work concurrency at each request's arrival: its server's requests
     * not out on a call (nor waiting for a connection to make one). */
    size_t nev = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].server == 0 || rq[i].server > t->nsrv)
            continue;
        ev[nev++] = (struct cevent){rq[i].arrival_ns, rq[i].server, +1, (uint32_t)i + 1};
        ev[nev++] = (struct cevent){rq[i].departure_ns, rq[i].server, -1, 0};
        if (lk->parent[i]) {
            uint32_t ps = rq[lk->parent[i] - 1].server;
            if (ps == 0 || ps > t->nsrv)
                continue;
            ev[nev++] = (struct cevent){rq[i].arrival_ns - lk->pool_wait_ns[i], ps, -1, 0};
            ev[nev++] = (struct cevent){rq[i].departure_ns, ps, +1, 0};
        }
    }
    if ((rc = cevent_sort(ev, nev)))
        goto out;
    long cur = 0;
    uint32_t srv = UINT32_MAX;
    for (size_t k = 0; k < nev; k++) {
        if (ev[k].server != srv) {
            srv = ev[k].server;
            cur = 0;
        } else if (cur > 0) {
            at[(size_t)srv * (LEVELS + 1) + (size_t)TB_MIN(cur, LEVELS)] +=
                (double)(ev[k].t - ev[k - 1].t);
        }
        if (ev[k].self) {
            size_t i = ev[k].self - 1;
            if (cur <= 0) {
                iso[srv] += t->own[i];
                niso[srv]++;
            }
            all[srv] += t->own[i];
            nall[srv]++;
        }
        cur += ev[k].delta;
    }
    if ((rc = solo_own(rq, n, t)))
        goto out;
    for (uint32_t s = 1; s <= t->nsrv; s++)
        t->svc_alone[s] = t->svc[s] = niso[s] >= 20 ? iso[s] / (double)niso[s]
                                                    : (nall[s] ? all[s] / (double)nall[s] : 0);
    for (uint32_t s = 1; s <= t->nsrv; s++) {
        if (!nall[s])
            continue;
        double want = t->svc[s] * (double)nall[s], best = INFINITY, err[LEVELS + 1];
        const double *h = &at[(size_t)s * (LEVELS + 1)];
        for (int c = 1; c <= LEVELS; c++) {
            double work = 0;
            for (int l = 1; l <= LEVELS; l++)
                work += h[l] * (double)TB_MIN(l, c);
            err[c] = fabs(work - want);
            best = fmin(best, err[c]);
        }
        /* A server that never had more requests at work than some n fits
         * every c >= n equally: it showed no limit, so the most. */
        for (int c = LEVELS; c >= 1; c--)
            if (err[c] <= best + 0.01 * want) {
                t->cores[s] = c;
                break;
            }
        /* With the cores known, work conservation also gives the service
         * time exactly (requests alone at arrival can still be slowed by
         * others arriving during a burst). */
        double work = 0;
        for (int l = 1; l <= LEVELS; l++)
            work += h[l] * (double)TB_MIN(l, (int)t->cores[s]);
        if (work > 0)
            t->svc[s] = work / (double)nall[s];
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t s = rq[i].server;
        double m = s && s <= t->nsrv && nall[s] ? all[s] / (double)nall[s] : 0;
        double f = m > 0 ? fmin(1.0, t->svc[s] / m) : 1.0;
        t->work[i] = t->own[i] * f;
    }
out:
    free(at);
    free(iso);
    free(all);
    free(niso);
    free(nall);
    free(ev);
    if (rc)
        tb_trees_free(t);
    return rc;
}

const char *tb_cp_kind_name(unsigned kind)
{
    static const char *const names[] = {"work", "queue", "pool"};
    return kind < TB_CP_KINDS ? names[kind] : "wire";
}

void tb_critpath_free(struct tb_critpath *cp)
{
    for (size_t k = 0; k < cp->ncls; k++) {
        free(cp->cls[k].mean);
        free(cp->cls[k].p95);
        free(cp->cls[k].p99);
    }
    free(cp->cls);
    free(cp->tiers);
    memset(cp, 0, sizeof *cp);
}

struct fr {
    uint32_t cls;
    double rt;
    size_t idx; /* front request index */
};

static int fr_cmp(const void *a, const void *b)
{
    const struct fr *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return x->rt < y->rt ? -1 : x->rt > y->rt;
}

/* Shares of the requests fr[lo..hi) with rt >= the class's quantile q
 * (q 0: all), written to out[ncomp]. */
/* Shares of each component in the response time of f[lo..hi) (sorted by
 * response time) at or above its q quantile (q 0: all of them); *qv, when
 * given, the quantile's response time. Returns the response time summed. */
static double shares(const struct fr *f, size_t lo, size_t hi, double q, const double *comp,
                     size_t ncomp, double *out, double *qv)
{
    size_t m = hi - lo;
    size_t rank = q > 0 ? (size_t)ceil(q * (double)m) : 1;
    if (rank < 1)
        rank = 1;
    if (rank > m)
        rank = m;
    if (qv)
        *qv = f[lo + rank - 1].rt;
    double tot = 0;
    for (size_t c = 0; c < ncomp; c++)
        out[c] = 0;
    for (size_t k = lo + rank - 1; k < hi; k++) {
        tot += f[k].rt;
        for (size_t c = 0; c < ncomp; c++)
            out[c] += comp[f[k].idx * ncomp + c];
    }
    for (size_t c = 0; c < ncomp; c++)
        out[c] = tot > 0 ? out[c] / tot : 0;
    return tot;
}

int tb_linked_load(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                   int64_t to_ns, struct tb_linked *l)
{
    memset(l, 0, sizeof *l);
    int rc = tb_store_requests(st, 0, from_ns, to_ns, &l->rq, &l->n);
    if (!rc)
        rc = tb_callers_new(&l->cl, cat);
    if (!rc)
        rc = tb_callgraph_build(&l->g, l->cl, tb_catalog_tier_count(cat), l->rq, l->n, NULL, 0);
    if (!rc && (!l->n || !l->g.front))
        rc = TB_E_NOTFOUND;
    if (rc)
        tb_linked_free(l);
    return rc;
}

int tb_linked_link(const struct tb_catalog *cat, struct tb_linked *l)
{
    int rc = tb_link_requests(cat, l->cl, l->rq, l->n, &l->lk);
    if (!rc)
        rc = tb_trees_build(cat, l->rq, l->n, &l->lk, l->g.front, &l->t);
    return rc;
}

void tb_linked_free(struct tb_linked *l)
{
    tb_trees_free(&l->t);
    tb_links_free(&l->lk);
    tb_callgraph_free(&l->g);
    tb_callers_free(l->cl);
    free(l->rq);
    memset(l, 0, sizeof *l);
}

int tb_critpath_build(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                      int64_t to_ns, struct tb_critpath *cp)
{
    memset(cp, 0, sizeof *cp);
    struct tb_linked L;
    double *comp = NULL;
    size_t *fidx = NULL;
    uint32_t *pos = NULL;
    struct fr *f = NULL;
    uint32_t ntiers = tb_catalog_tier_count(cat);
    int rc = tb_linked_load(st, cat, from_ns, to_ns, &L);
    if (rc)
        return rc;
    if ((rc = tb_linked_link(cat, &L)))
        goto out;
    const struct tb_request *rq = L.rq;
    size_t n = L.n;
    const struct tb_callgraph g = L.g;
    const struct tb_links lk = L.lk;
    const struct tb_trees t = L.t;
    cp->front = g.front;
    cp->ntiers = ntiers;
    cp->tiers = malloc(((size_t)ntiers + 1) * sizeof *cp->tiers);
    pos = malloc(((size_t)ntiers + 1) * sizeof *pos);
    if (!cp->tiers || !pos) {
        rc = TB_E_NOMEM;
        goto out;
    }
    /* Tiers in name order (a handful: insertion sort). */
    for (uint32_t i = 0; i < ntiers; i++) {
        uint32_t j = i;
        for (; j > 0 && strcmp(tb_catalog_tier_get(cat, i + 1)->name,
                               tb_catalog_tier_get(cat, cp->tiers[j - 1])->name) < 0;
             j--)
            cp->tiers[j] = cp->tiers[j - 1];
        cp->tiers[j] = i + 1;
    }
    for (uint32_t i = 0; i < ntiers; i++)
        pos[cp->tiers[i]] = i;
    cp->ncomp = (size_t)ntiers * TB_CP_KINDS + 1;
    cp->linked = lk.linked;
    cp->children = lk.children;
    size_t nf = 0;
    fidx = malloc((n + 1) * sizeof *fidx);
    if (!fidx) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        fidx[i] = rq[i].tier == g.front ? nf++ : SIZE_MAX;
    comp = calloc(nf * cp->ncomp + 1, sizeof *comp);
    f = malloc((2 * nf + 1) * sizeof *f);
    if (!comp || !f) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (t.root[i] < 0 || rq[i].tier == 0 || rq[i].tier > ntiers)
            continue;
        double *c = &comp[fidx[t.root[i]] * cp->ncomp + (size_t)pos[rq[i].tier] * TB_CP_KINDS];
        c[TB_CP_WORK] += t.work[i];
        c[TB_CP_QUEUE] += t.own[i] - t.work[i];
        c[TB_CP_POOL] += t.pool[i];
    }
    /* The wire: what no request's own time, call or wait covers. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (rq[i].tier != g.front)
            continue;
        double rt = (double)(rq[i].departure_ns - rq[i].arrival_ns), sum = 0;
        double *c = &comp[k * cp->ncomp];
        for (size_t j = 0; j + 1 < cp->ncomp; j++)
            sum += c[j];
        c[cp->ncomp - 1] = rt > sum ? rt - sum : 0;
        f[k] = (struct fr){rq[i].class_id, rt, k};
        f[nf + k] = (struct fr){0, rt, k};
        k++;
    }
    qsort(f, 2 * nf, sizeof *f, fr_cmp);
    /* Class 0 (all) sorts first; then each class. */
    for (size_t lo = 0; lo < 2 * nf;) {
        size_t hi = lo;
        while (hi < 2 * nf && f[hi].cls == f[lo].cls)
            hi++;
        struct tb_cp_class *x = realloc(cp->cls, (cp->ncls + 1) * sizeof *cp->cls);
        if (!x) {
            rc = TB_E_NOMEM;
            goto out;
        }
        cp->cls = x;
        x = &cp->cls[cp->ncls++];
        memset(x, 0, sizeof *x);
        x->class_id = f[lo].cls;
        x->requests = hi - lo;
        x->mean = malloc(cp->ncomp * sizeof(double));
        x->p95 = malloc(cp->ncomp * sizeof(double));
        x->p99 = malloc(cp->ncomp * sizeof(double));
        if (!x->mean || !x->p95 || !x->p99) {
            rc = TB_E_NOMEM;
            goto out;
        }
        double rt_sum = shares(f, lo, hi, 0, comp, cp->ncomp, x->mean, NULL);
        x->rt_mean_ns = rt_sum / (double)(hi - lo);
        shares(f, lo, hi, 0.95, comp, cp->ncomp, x->p95, &x->rt_p95_ns);
        shares(f, lo, hi, 0.99, comp, cp->ncomp, x->p99, &x->rt_p99_ns);
        lo = hi;
    }
    /* Classes by requests, most first, ties by text (all stays first). */
    for (size_t a = 2; a < cp->ncls; a++)
        for (size_t b = a; b > 1 && (cp->cls[b].requests > cp->cls[b - 1].requests ||
                                     (cp->cls[b].requests == cp->cls[b - 1].requests &&
                                      strcmp(tb_catalog_class_text(cat, cp->cls[b].class_id),
                                             tb_catalog_class_text(cat, cp->cls[b - 1].class_id)) <
                                          0));
             b--) {
            struct tb_cp_class tmp = cp->cls[b];
            cp->cls[b] = cp->cls[b - 1];
            cp->cls[b - 1] = tmp;
        }
out:
    free(pos);
    free(comp);
    free(fidx);
    free(f);
    tb_linked_free(&L);
    if (rc)
        tb_critpath_free(cp);
    return rc;
}

static void json_shares(struct tb_buf *b, const struct tb_catalog *cat,
                        const struct tb_critpath *cp, const double *v)
{
    tb_buf_puts(b, "{");
    bool first = true;
    for (size_t c = 0; c < cp->ncomp; c++) {
        bool wire = c + 1 == cp->ncomp;
        uint32_t tier = wire ? 0 : cp->tiers[c / TB_CP_KINDS];
        if (!wire && v[c] == 0)
            continue;
        char name[160];
        if (wire)
            snprintf(name, sizeof name, "wire");
        else
            snprintf(name, sizeof name, "%s %s", tb_catalog_tier_get(cat, tier)->name,
                     tb_cp_kind_name((unsigned)(c % TB_CP_KINDS)));
        tb_buf_puts(b, first ? "" : ", ");
        first = false;
        tb_buf_json_str(b, name);
        tb_buf_json_knum(b, ": ", v[c]);
    }
    tb_buf_puts(b, "}");
}

void tb_critpath_json(struct tb_buf *b, const struct tb_catalog *cat, const struct tb_critpath *cp)
{
    tb_buf_json_kstr(b, "{\"front_tier\": ",
                     cp->front ? tb_catalog_tier_get(cat, cp->front)->name : "");
    tb_buf_printf(b, ", \"linked\": %" PRIu64 ", \"downstream\": %" PRIu64 ", \"classes\": [",
                  cp->linked, cp->children);
    for (size_t k = 0; k < cp->ncls; k++) {
        const struct tb_cp_class *x = &cp->cls[k];
        tb_buf_puts(b, k ? ",\n   {\"class\": " : "\n   {\"class\": ");
        tb_buf_json_str(b, x->class_id ? tb_catalog_class_text(cat, x->class_id) : "*");
        tb_buf_printf(b, ", \"requests\": %" PRIu64 ", \"rt_mean_ns\": ", x->requests);
        tb_buf_json_num(b, x->rt_mean_ns);
        tb_buf_json_knum(b, ", \"rt_p95_ns\": ", x->rt_p95_ns);
        tb_buf_json_knum(b, ", \"rt_p99_ns\": ", x->rt_p99_ns);
        tb_buf_puts(b, ", \"mean\": ");
        json_shares(b, cat, cp, x->mean);
        tb_buf_puts(b, ", \"p95\": ");
        json_shares(b, cat, cp, x->p95);
        tb_buf_puts(b, ", \"p99\": ");
        json_shares(b, cat, cp, x->p99);
        tb_buf_puts(b, "}");
    }
    tb_buf_puts(b, "]}");
}

/* ---- stored critical path ------------------------------------------------------ */

/* The critical path over the whole capture depends on the requests and the
 * catalog only, so it is kept beside diagnose's stored inputs as blob
 * "critpath" (models/model_parts), stamped like them: a diagnose of the
 * whole capture reads it instead of loading and linking every request.
 * Host byte order; a blob that does not decode exactly is "not stored". */
#define CP_NAME "critpath"
#define CP_VERSION 1
#define CP_MAGIC 0x3130485441505043ull /* "CPPATH01" */

static bool cp_stored_enabled(void)
{
    const char *e = getenv("TBNECK_DIAGNOSE_STORED");
    return !(e && !strcmp(e, "0"));
}


static int cp_encode(const struct tb_critpath *cp, struct tb_buf *b)
{
    tb_buf_u64(b, CP_MAGIC);
    tb_buf_u64(b, cp->front);
    tb_buf_u64(b, cp->ntiers);
    tb_buf_u64(b, cp->ncomp);
    tb_buf_u64(b, cp->ncls);
    tb_buf_u64(b, cp->linked);
    tb_buf_u64(b, cp->children);
    for (uint32_t i = 0; i < cp->ntiers; i++)
        tb_buf_u64(b, cp->tiers[i]);
    for (size_t i = 0; i < cp->ncls; i++) {
        const struct tb_cp_class *x = &cp->cls[i];
        tb_buf_u64(b, x->class_id);
        tb_buf_u64(b, x->requests);
        tb_buf_add(b, &x->rt_mean_ns, sizeof(double));
        tb_buf_add(b, &x->rt_p95_ns, sizeof(double));
        tb_buf_add(b, &x->rt_p99_ns, sizeof(double));
        tb_buf_add(b, x->mean, cp->ncomp * sizeof(double));
        tb_buf_add(b, x->p95, cp->ncomp * sizeof(double));
        tb_buf_add(b, x->p99, cp->ncomp * sizeof(double));
    }
    return tb_buf_ok(b) ? 0 : TB_E_NOMEM;
}


/* TB_E_NOTFOUND when the blob is not one this build wrote for this catalog. */
static int cp_decode(const unsigned char *p, size_t len, const struct tb_catalog *cat,
                     struct tb_critpath *cp)
{
    struct tb_rd k = {p, p + len};
    uint64_t magic, front, ntiers, ncomp, ncls;
    memset(cp, 0, sizeof *cp);
    if (!tb_rd_u64(&k, &magic) || magic != CP_MAGIC || !tb_rd_u64(&k, &front) ||
        !tb_rd_u64(&k, &ntiers) || !tb_rd_u64(&k, &ncomp) || !tb_rd_u64(&k, &ncls) ||
        !tb_rd_u64(&k, &cp->linked) || !tb_rd_u64(&k, &cp->children) ||
        ntiers != tb_catalog_tier_count(cat) || front == 0 || front > ntiers ||
        ncomp != ntiers * TB_CP_KINDS + 1 || ncls == 0 ||
        ncls > (size_t)(k.end - k.p) / (8 * sizeof(uint64_t)))
        return TB_E_NOTFOUND;
    cp->front = (uint32_t)front;
    cp->ntiers = (uint32_t)ntiers;
    cp->ncomp = (size_t)ncomp;
    int rc = TB_E_NOMEM;
    if (!(cp->tiers = malloc(((size_t)ntiers + 1) * sizeof *cp->tiers)) ||
        !(cp->cls = calloc((size_t)ncls, sizeof *cp->cls)))
        goto fail;
    rc = TB_E_NOTFOUND;
    for (uint32_t i = 0; i < cp->ntiers; i++) {
        uint64_t t;
        if (!tb_rd_u64(&k, &t) || t == 0 || t > ntiers)
            goto fail;
        cp->tiers[i] = (uint32_t)t;
    }
    for (size_t i = 0; i < ncls; i++) {
        struct tb_cp_class *x = &cp->cls[i];
        uint64_t id;
        cp->ncls = i + 1; /* freed with what it holds */
        if (!tb_rd_u64(&k, &id) || id > UINT32_MAX || !tb_rd_u64(&k, &x->requests) ||
            !tb_rd_get(&k, &x->rt_mean_ns, sizeof(double)) ||
            !tb_rd_get(&k, &x->rt_p95_ns, sizeof(double)) ||
            !tb_rd_get(&k, &x->rt_p99_ns, sizeof(double)))
            goto fail;
        x->class_id = (uint32_t)id;
        size_t bytes = cp->ncomp * sizeof(double);
        if (!(x->mean = malloc(bytes)) || !(x->p95 = malloc(bytes)) || !(x->p99 = malloc(bytes))) {
            rc = TB_E_NOMEM;
            goto fail;
        }
        if (!tb_rd_get(&k, x->mean, bytes) || !tb_rd_get(&k, x->p95, bytes) || !tb_rd_get(&k, x->p99, bytes))
            goto fail;
    }
    if (k.p != k.end)
        goto fail;
    return 0;
fail:
    tb_critpath_free(cp);
    return rc;
}

int tb_critpath_stored(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                       int64_t to_ns, bool reuse, struct tb_critpath *cp)
{
    char stamp[128];
    bool stable = false;
    bool whole = from_ns == INT64_MIN && to_ns == INT64_MAX && cp_stored_enabled() &&
                 tb_store_stamp(st, stamp, sizeof stamp, &stable) == 0 && stable;
    if (whole && reuse) {
        void *blob = NULL;
        size_t len = 0;
        int rc = tb_store_model_get(st, CP_NAME, CP_VERSION, stamp, &blob, &len);
        if (rc == 0) {
            rc = cp_decode(blob, len, cat, cp);
            free(blob);
            if (rc == 0)
                return 0;
        }
        if (rc != TB_E_NOTFOUND)
            return rc;
    }
    int rc = tb_critpath_build(st, cat, from_ns, to_ns, cp);
    if (rc || !whole)
        return rc;
    /* Storing is a saving, not a result: a read-only file stores nothing,
     * another failure is a warning. */
    struct tb_buf b;
    tb_buf_init(&b);
    int prc = cp_encode(cp, &b);
    if (!prc)
        prc = tb_store_model_put(st, CP_NAME, CP_VERSION, stamp, b.p, b.len);
    if (prc && prc != TB_E_PERM)
        tb_log_warn("diagnose: could not store the critical path (%s); the next run links the "
                    "requests again", tb_strerror(prc));
    tb_buf_free(&b);
    return 0;
}
