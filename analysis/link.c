/* SPDX-License-Identifier: MIT */
/* link.c — transaction linking (link.h has the contract, docs/linking.md the
 * method and what it was measured at). */
#include "link.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"
#include "util.h"

/* Timing tolerance in caller CPU time: a piece that comes due within it of
 * the predicted instant is "on time". The simulator's tap puts 89% of true
 * pieces within 10 us of their request's first piece, all within 100 us. */
#define TOL_NS 20000.0
/* A call that starts within this long (wall time) after the previous call on
 * the same connection returned was handed the connection by the pool: its
 * parent was waiting for one. */
#define HANDOFF_NS 20000
/* Cost tiers: a late parent (waited for a connection, or the timing fits no
 * better) ranks after every on-time one; an impossible one after all. */
#define LATE 1e13
#define IMPOSSIBLE 1e16
/* Caller core counts tried for the processor-sharing clock (0 = no sharing:
 * wall time). The one that puts most calls on time wins. */
static const double cores_try[] = {0, 1, 2, 4, 8, 16, 32, 64, 128};
/* Children per group on which the core count is chosen, and on which the
 * response transmission times are learned. */
#define CHOOSE_PREFIX 1000
#define OFFSET_PREFIX 3000

struct ev {
    int64_t t;
    int32_t delta;  /* change of the number of requests at work */
    uint32_t slot;  /* (local index << 2) | child << 1 | departure */
};

/* Events by time, stably (tb_radix_sort). Events at the same instant keep
 * their order, which the clock does not care about: no time passes between
 * them. */
static uint64_t ev_key(const void *e, const void *ctx)
{
    (void)ctx;
    return tb_sort_key_i64(((const struct ev *)e)->t);
}

static int ev_sort(struct ev *ev, size_t n)
{
    return tb_radix_sort(ev, n, sizeof *ev, ev_key, NULL);
}

/* One caller host of one tier: its requests (parents) and the calls it made
 * (children), each sorted by arrival, with their times on the CPU clock. */
struct group {
    const struct tb_request *rq;
    const uint32_t *par, *kid; /* indices into rq */
    size_t np, nk;
    struct ev *ev;             /* 2 (np + nk), and 2 per pool wait; sorted by time */
    size_t nev;
    double *pva, *pvd, *kva, *kvd; /* CPU-clock times */
    double *kva_sorted;        /* children's arrivals (already in order: kva) */
    bool *handoff;             /* child started on a connection just returned */
    /* per parent, during a pass */
    double *g, *last_v;
    double *poff; /* per parent: its response's transmission time (its class's median) */
    int64_t *busy_until;
    int64_t *pdep, *parr;      /* per parent: departure, arrival (wall), kept close for the scans */
    int64_t *karr, *kdep;      /* per child: the same */
    uint32_t *ncalls;
    uint32_t *active;
    /* per child: the pass's choice */
    uint32_t *choice; /* local parent index + 1, 0 none */
    float *score;
    double *wait_v;
    uint8_t *kind; /* 1 exact, 2 ambiguous */
};

/* Processor sharing on `cores` CPUs among the requests at work (in the tier,
 * not waiting for a call): each progresses at min(1, cores / n). cores 0 =
 * wall time. */
static void clock_assign(struct group *g, double cores)
{
    double v = 0;
    long n = 0;
    int64_t last = g->np + g->nk ? g->ev[0].t : 0;
    for (size_t i = 0; i < g->nev; i++) {
        const struct ev *e = &g->ev[i];
        double dt = (double)(e->t - last);
        if (cores > 0 && n > cores)
            dt *= cores / (double)n;
        v += dt;
        last = e->t;
        n += e->delta;
        if (e->slot == UINT32_MAX)
            continue; /* a wait for a connection: changes n only */
        size_t li = e->slot >> 2;
        bool child = e->slot & 2, dep = e->slot & 1;
        if (child)
            (dep ? g->kvd : g->kva)[li] = v;
        else
            (dep ? g->pvd : g->pva)[li] = v;
    }
}

/* Index of the child whose arrival is nearest x (kva is sorted). */
static size_t nearest_idx(const double *s, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n || (lo > 0 && x - s[lo - 1] < s[lo] - x))
        return lo - 1;
    return lo;
}

/* How well "child c, then one piece of `piece`, a call, one piece, ... the
 * end" fits: walks the calls such a parent would make next (a child arriving
 * one piece after the last returned; every child within the tolerance is
 * tried) until one piece before `end`. Returns the summed timing error of
 * the best walk, plus BREAK for a walk that finds neither a call nor the end
 * where one is due; *steps the calls the walk went through. */
#define BREAK (5 * TOL_NS)
static double chain_walk(const struct group *g, double cur, double piece, double end, double tol,
                         int depth, int *budget)
{
    double next = cur + piece;
    double e = fabs(end - next);
    if (e <= TOL_NS) /* the end is estimated (response transmission): full tolerance */
        return e;
    if (next > end + TOL_NS || depth >= 64 || --*budget <= 0)
        return BREAK;
    size_t j = nearest_idx(g->kva_sorted, g->nk, next);
    if (j >= g->nk)
        return BREAK;
    /* The nearest arrival first: the true next call is usually it. */
    size_t lo = j, hi = j + 1;
    double best = BREAK;
    while (best > tol) {
        size_t k;
        if (lo < g->nk && (hi >= g->nk || next - g->kva[lo] <= g->kva[hi] - next))
            k = lo, lo = lo > 0 ? lo - 1 : g->nk;
        else if (hi < g->nk)
            k = hi++;
        else
            break;
        if (fabs(g->kva[k] - next) > tol)
            break; /* the nearest left is out of reach: so is every other */
        if (g->kvd[k] > end + TOL_NS)
            continue;
        double r = fabs(g->kva[k] - next) + chain_walk(g, g->kvd[k], piece, end, tol, depth + 1,
                                                        budget);
        if (r < best)
            best = r;
    }
    return best;
}

static double chain_err(const struct group *g, size_t c, double piece, double end)
{
    /* The clock's error grows with the piece: a tolerance to match, so that
     * short pieces do not open a window wide enough for many calls. */
    double tol = fmin(TOL_NS, 2000.0 + 0.05 * piece);
    int budget = 256;
    return chain_walk(g, g->kvd[c], piece, end, tol, 0, &budget);
}

/* What it costs to make parent p the issuer of child c (lower is likelier). */
static double cost_of(const struct group *g, size_t p, size_t c, double *wait)
{
    *wait = 0;
    if (g->pdep[p] < g->kdep[c] || g->busy_until[p] > g->karr[c])
        return IMPOSSIBLE;
    double va = g->kva[c], end = g->pvd[p] - g->poff[p];
    if (g->g[p] >= 0) {
        double dev = va - (g->last_v[p] + g->g[p]);
        if (dev < -TOL_NS)
            return IMPOSSIBLE + (-dev);
        if (dev <= TOL_NS) {
            /* Two parents can come due within a microsecond of each other;
             * the calls after this one tell them apart. */
            return fabs(dev) + chain_err(g, c, g->g[p], end);
        }
        *wait = dev;
        /* Late: the parent waited for a connection (first come, first served:
         * the longest wait goes first), or the timing fits no better. */
        return g->handoff[c] ? LATE + 1e12 - fmin(dev, 1e12) : LATE + 2e12 + dev;
    }
    double base = g->ncalls[p] ? g->last_v[p] : g->pva[p];
    double piece = va - base;
    /* Its first piece of work sets the length of every later one. */
    double e = chain_err(g, c, piece, end);
    if (e < BREAK)
        return e;
    if (g->handoff[c]) {
        *wait = piece;
        return LATE + 1e12 - fmin(piece, 1e12);
    }
    return LATE + 2e12 + piece;
}

/* One pass over the first `limit` children; returns how many were on time. */
static size_t link_pass(struct group *g, size_t limit)
{
    for (size_t p = 0; p < g->np; p++) {
        g->g[p] = -1;
        g->last_v[p] = g->pva[p];
        g->busy_until[p] = INT64_MIN;
        g->ncalls[p] = 0;
    }
    size_t nact = 0, pi = 0, ontime = 0;
    for (size_t c = 0; c < limit; c++) {
        int64_t ca = g->karr[c], cd = g->kdep[c];
        while (pi < g->np && g->parr[pi] <= ca)
            g->active[nact++] = (uint32_t)pi++;
        double best = INFINITY, second = INFINITY, bwait = 0;
        size_t bp = SIZE_MAX, feasible = 0;
        for (size_t k = 0; k < nact;) {
            size_t p = g->active[k];
            if (g->pdep[p] < ca) {
                g->active[k] = g->active[--nact];
                continue;
            }
            k++;
            /* A request that ends before the child does cannot have issued
             * it: never a candidate, not even the last resort (on the real
             * stack such picks put 1-3% of queries outside their parent). */
            if (g->pdep[p] < cd)
                continue;
            double w, cst = IMPOSSIBLE;
            if (g->busy_until[p] <= ca)
                cst = cost_of(g, p, c, &w);
            else
                w = 0;
            if (cst < IMPOSSIBLE)
                feasible++;
            if (cst < best || (cst == best && bp != SIZE_MAX && p < bp)) {
                second = best;
                best = cst;
                bp = p;
                bwait = w;
            } else if (cst < second) {
                second = cst;
            }
        }
        g->choice[c] = 0;
        g->score[c] = 0;
        g->wait_v[c] = 0;
        g->kind[c] = 0;
        if (bp == SIZE_MAX || best >= 2 * IMPOSSIBLE)
            continue; /* no request of the caller contains it */
        /* Impossible choices (the parent busy with another call) are kept as
         * a last resort only: containment still holds (a parent that ends
         * first was never a candidate). */
        g->choice[c] = (uint32_t)bp + 1;
        if (best <= 2 * TOL_NS)
            ontime++;
        if (feasible <= 1) {
            g->score[c] = best < IMPOSSIBLE ? 1.0f : 0.1f;
            g->kind[c] = best < IMPOSSIBLE ? 1 : 0;
        } else {
            double s = second > 0 ? (second - best) / second : 0;
            g->score[c] = (float)fmin(1.0, fmax(0.0, s));
            if (second - best <= TOL_NS)
                g->kind[c] = 2;
        }
        if (g->handoff[c])
            g->wait_v[c] = bwait;
        if (g->g[bp] < 0 && best <= 2 * TOL_NS)
            g->g[bp] = g->kva[c] - (g->ncalls[bp] ? g->last_v[bp] : g->pva[bp]);
        g->ncalls[bp]++;
        g->last_v[bp] = g->kvd[c];
        g->busy_until[bp] = cd;
    }
    return ontime;
}

struct cls_off {
    uint32_t cls;
    double off;
    uint32_t p;
};

static int cls_off_cmp(const void *a, const void *b)
{
    const struct cls_off *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int end_offsets(struct group *g)
{
    struct cls_off *co = malloc((g->np + 1) * sizeof *co);
    if (!co)
        return TB_E_NOMEM;
    size_t n = 0;
    for (size_t p = 0; p < g->np; p++) {
        double off = NAN;
        if (g->ncalls[p] && g->g[p] >= 0)
            off = g->pvd[p] - g->last_v[p] - g->g[p];
        co[n++] = (struct cls_off){g->rq[g->par[p]].class_id, off, (uint32_t)p};
    }
    /* NaN sorts nowhere in particular with < ; give it +inf and skip it. */
    for (size_t i = 0; i < n; i++)
        if (isnan(co[i].off))
            co[i].off = INFINITY;
    qsort(co, n, sizeof *co, cls_off_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i, fin = 0;
        while (j < n && co[j].cls == co[i].cls) {
            fin += isfinite(co[j].off);
            j++;
        }
        double med = fin ? co[i + (fin - 1) / 2].off : 0;
        if (!(med > 0) || med > 1e7) /* a transmission time: positive, below 10 ms */
            med = 0;
        for (size_t k = i; k < j; k++)
            g->poff[co[k].p] = med;
        i = j;
    }
    free(co);
    return 0;
}

static void group_free(struct group *g)
{
    free(g->ev);
    free(g->pva);
    free(g->handoff);
    free(g->g);
    free(g->poff);
    free(g->busy_until);
    free(g->pdep);
    free(g->parr);
    free(g->karr);
    free(g->kdep);
    free(g->ncalls);
    free(g->active);
    free(g->choice);
    free(g->score);
    free(g->wait_v);
    free(g->kind);
}

/* Chooses the core count on a prefix, learns the response offsets, links
 * every child of the host. */
static int link_rounds(struct group *g, double *cores_out)
{
    size_t nk = g->nk;
    double cores = 0;
    size_t best = 0;
    size_t lim = nk < CHOOSE_PREFIX ? nk : CHOOSE_PREFIX;
    for (size_t k = 0; k < TB_ARRAY_SIZE(cores_try); k++) {
        clock_assign(g, cores_try[k]);
        size_t on = link_pass(g, lim);
        if (k == 0 || on > best) {
            best = on;
            cores = cores_try[k];
        }
    }
    clock_assign(g, cores);
    /* A parent departs when the last packet of its response passes the tap,
     * a transmission time after its last piece of work ended: learned per
     * class (the median) from the links of a longer prefix, then the whole
     * host is linked. */
    link_pass(g, nk < OFFSET_PREFIX ? nk : OFFSET_PREFIX);
    int rc = end_offsets(g);
    if (rc)
        return rc;
    link_pass(g, nk);
    *cores_out = cores;
    return 0;
}

static int link_group(struct group *g, const int64_t *prev_dep, struct tb_links *out)
{
    size_t np = g->np, nk = g->nk, ne = 2 * (np + nk);
    g->ev = malloc((ne + 2 * nk + 1) * sizeof *g->ev);
    g->pva = malloc((2 * np + 2 * nk + 1) * sizeof(double));
    g->handoff = calloc(nk + 1, sizeof *g->handoff);
    g->g = malloc((2 * np + 1) * sizeof(double));
    g->poff = calloc(np + 1, sizeof(double));
    g->busy_until = malloc((np + 1) * sizeof *g->busy_until);
    g->pdep = malloc((np + 1) * sizeof *g->pdep);
    g->parr = malloc((np + 1) * sizeof *g->parr);
    g->karr = malloc((nk + 1) * sizeof *g->karr);
    g->kdep = malloc((nk + 1) * sizeof *g->kdep);
    g->ncalls = malloc((np + 1) * sizeof *g->ncalls);
    g->active = malloc((np + 1) * sizeof *g->active);
    g->choice = malloc((nk + 1) * sizeof *g->choice);
    g->score = malloc((nk + 1) * sizeof *g->score);
    g->wait_v = malloc((nk + 1) * sizeof *g->wait_v);
    g->kind = malloc(nk + 1);
    if (!g->ev || !g->pva || !g->handoff || !g->g || !g->poff || !g->busy_until || !g->pdep || !g->parr || !g->karr || !g->kdep ||
        !g->ncalls || !g->active || !g->choice || !g->score || !g->wait_v || !g->kind) {
        group_free(g);
        return TB_E_NOMEM;
    }
    g->pvd = g->pva + np;
    g->kva = g->pvd + np;
    g->kvd = g->kva + nk;
    g->kva_sorted = g->kva; /* children are in arrival order */
    g->last_v = g->g + np;
    size_t e = 0;
    for (size_t i = 0; i < np; i++) {
        const struct tb_request *r = &g->rq[g->par[i]];
        g->pdep[i] = r->departure_ns;
        g->parr[i] = r->arrival_ns;
        g->ev[e++] = (struct ev){r->arrival_ns, +1, (uint32_t)(i << 2)};
        g->ev[e++] = (struct ev){r->departure_ns, -1, (uint32_t)(i << 2 | 1)};
    }
    for (size_t i = 0; i < nk; i++) {
        const struct tb_request *r = &g->rq[g->kid[i]];
        g->karr[i] = r->arrival_ns;
        g->kdep[i] = r->departure_ns;
        g->ev[e++] = (struct ev){r->arrival_ns, -1, (uint32_t)(i << 2 | 2)};
        g->ev[e++] = (struct ev){r->departure_ns, +1, (uint32_t)(i << 2 | 3)};
        int64_t pd = prev_dep[g->kid[i]];
        g->handoff[i] = pd != INT64_MIN && r->arrival_ns >= pd && r->arrival_ns - pd <= HANDOFF_NS;
    }
    g->nev = ne;
    if (ev_sort(g->ev, g->nev) != 0) {
        group_free(g);
        return TB_E_NOMEM;
    }
    double cores = 0;
    if (link_rounds(g, &cores) != 0) {
        group_free(g);
        return TB_E_NOMEM;
    }
    /* A request waiting for a pool connection is not at work: once the
     * waits are known, the clock is rebuilt without them and the host linked
     * again. */
    size_t nw = 0;
    for (size_t c = 0; c < nk; c++) {
        if (!g->handoff[c] || g->wait_v[c] <= 0)
            continue;
        const struct tb_request *r = &g->rq[g->kid[c]];
        int64_t from = r->arrival_ns - (int64_t)llround(g->wait_v[c]);
        g->ev[g->nev++] = (struct ev){from, -1, UINT32_MAX};
        g->ev[g->nev++] = (struct ev){r->arrival_ns, +1, UINT32_MAX};
        nw++;
    }
    if (nw > nk / 100) {
        if (ev_sort(g->ev, g->nev) != 0) {
            group_free(g);
            return TB_E_NOMEM;
        }
        if (link_rounds(g, &cores) != 0) {
            group_free(g);
            return TB_E_NOMEM;
        }
    }
    for (size_t c = 0; c < nk; c++) {
        size_t i = g->kid[c];
        if (!g->choice[c])
            continue;
        out->parent[i] = (uint64_t)g->par[g->choice[c] - 1] + 1;
        out->score[i] = g->score[c];
        out->pool_wait_ns[i] = (int64_t)llround(g->wait_v[c]);
        out->linked++;
        out->kind[i] = g->kind[c] == 1   ? TB_LINK_EXACT
                       : g->kind[c] == 2 ? TB_LINK_AMBIGUOUS
                                         : TB_LINK_SCORED;
        out->exact += g->kind[c] == 1;
        out->ambiguous += g->kind[c] == 2;
    }
    group_free(g);
    return 0;
}

/* Open-addressing map from a 64-bit key (and, for groups, a 16-byte address)
 * to a slot; sized once for at most `cap` keys. */
struct gkey {
    uint8_t ip[16];
    uint32_t tier;
    uint32_t used;
};

static size_t gslot(struct gkey *tab, size_t mask, const uint8_t ip[16], uint32_t tier, bool *fresh)
{
    uint64_t h, lo;
    memcpy(&h, ip, 8);
    memcpy(&lo, ip + 8, 8);
    size_t i = (size_t)tb_mix64(h ^ tb_mix64(lo ^ tier)) & mask;
    while (tab[i].used) {
        if (tab[i].tier == tier && !memcmp(tab[i].ip, ip, 16)) {
            *fresh = false;
            return i;
        }
        i = (i + 1) & mask;
    }
    memcpy(tab[i].ip, ip, 16);
    tab[i].tier = tier;
    tab[i].used = 1;
    *fresh = true;
    return i;
}

struct by_time {
    int64_t t;
    uint32_t idx;
};

static int by_time_cmp(const void *a, const void *b)
{
    const struct by_time *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int tb_link_requests(const struct tb_catalog *cat, const struct tb_callers *cl,
                     const struct tb_request *rq, size_t n, struct tb_links *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->parent = calloc(n + 1, sizeof *out->parent);
    out->score = calloc(n + 1, sizeof *out->score);
    out->pool_wait_ns = calloc(n + 1, sizeof *out->pool_wait_ns);
    out->kind = calloc(n + 1, sizeof *out->kind);
    size_t mask = 1023;
    while (mask < 2 * n + 1)
        mask = mask * 2 + 1;
    uint32_t *order = malloc((n + 1) * sizeof *order);
    int64_t *prev_dep = malloc((n + 1) * sizeof *prev_dep);
    uint32_t *pg = malloc((n + 1) * sizeof *pg), *cg = malloc((n + 1) * sizeof *cg);
    uint32_t *idx = malloc((2 * n + 1) * sizeof *idx);
    /* Connection map: conn id -> last departure seen (arrival order). */
    struct cslot {
        uint64_t conn;
        int64_t dep;
        bool used;
    } *ctab = calloc(mask + 1, sizeof *ctab);
    struct gkey *gtab = calloc(mask + 1, sizeof *gtab);
    size_t *gnum = malloc((mask + 1) * sizeof *gnum);
    size_t *np = NULL, *nk = NULL, *pos = NULL;
    struct by_time *bt = NULL;
    int rc = 0;
    if (!out->parent || !out->score || !out->pool_wait_ns || !out->kind || !order || !prev_dep || !pg || !cg ||
        !idx || !ctab || !gtab || !gnum || n > UINT32_MAX / 4) {
        rc = TB_E_NOMEM;
        goto out;
    }
    /* Arrival order: the store's order already; sorted here otherwise. */
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = rq[i - 1].arrival_ns <= rq[i].arrival_ns;
    if (sorted) {
        for (size_t i = 0; i < n; i++)
            order[i] = (uint32_t)i;
    } else {
        if (!(bt = malloc((n + 1) * sizeof *bt))) {
            rc = TB_E_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            bt[i] = (struct by_time){rq[i].arrival_ns, (uint32_t)i};
        qsort(bt, n, sizeof *bt, by_time_cmp);
        for (size_t i = 0; i < n; i++)
            order[i] = bt[i].idx;
    }
    /* The previous call's departure on each connection (pool hand-offs), and
     * each request's group as a parent (its server's host) and as a child
     * (its client's host, when that is a machine of a caller tier). */
    size_t ngroups = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        size_t h = (size_t)tb_mix64(rq[i].conn) & mask;
        while (ctab[h].used && ctab[h].conn != rq[i].conn)
            h = (h + 1) & mask;
        prev_dep[i] = ctab[h].used ? ctab[h].dep : INT64_MIN;
        ctab[h] = (struct cslot){rq[i].conn, rq[i].departure_ns, true};
        bool fresh;
        pg[i] = cg[i] = UINT32_MAX;
        const struct tb_server_info *sv = tb_catalog_server_get(cat, rq[i].server);
        if (sv) {
            size_t sl = gslot(gtab, mask, sv->addr.ip, rq[i].tier, &fresh);
            if (fresh)
                gnum[sl] = ngroups++;
            pg[i] = (uint32_t)gnum[sl];
        }
        uint32_t ct, cs;
        tb_callers_of(cl, &rq[i].client, rq[i].tier, &ct, &cs);
        if (!ct)
            continue;
        out->children++;
        out->kind[i] = TB_LINK_UNLINKED;
        size_t sl = gslot(gtab, mask, rq[i].client.ip, ct, &fresh);
        if (fresh)
            gnum[sl] = ngroups++;
        cg[i] = (uint32_t)gnum[sl];
    }
    np = calloc(ngroups + 1, sizeof *np);
    nk = calloc(ngroups + 1, sizeof *nk);
    pos = calloc(2 * ngroups + 2, sizeof *pos);
    if (!np || !nk || !pos) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (pg[i] != UINT32_MAX)
            np[pg[i]]++;
        if (cg[i] != UINT32_MAX)
            nk[cg[i]]++;
    }
    /* Each group's parents then its children, both in arrival order. */
    size_t at = 0;
    for (size_t gi = 0; gi < ngroups; gi++) {
        pos[2 * gi] = at;
        pos[2 * gi + 1] = at + np[gi];
        at += np[gi] + nk[gi];
    }
    size_t *fill = pos + 0; /* advanced while filling, reset below */
    size_t *start = malloc((2 * ngroups + 2) * sizeof *start);
    if (!start) {
        rc = TB_E_NOMEM;
        goto out;
    }
    memcpy(start, pos, (2 * ngroups + 2) * sizeof *start);
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        if (pg[i] != UINT32_MAX)
            idx[fill[2 * pg[i]]++] = i;
        if (cg[i] != UINT32_MAX)
            idx[fill[2 * cg[i] + 1]++] = i;
    }
    for (size_t gi = 0; gi < ngroups && rc == 0; gi++) {
        if (np[gi] == 0 || nk[gi] == 0)
            continue;
        struct group g = {.rq = rq, .par = &idx[start[2 * gi]], .kid = &idx[start[2 * gi + 1]],
                          .np = np[gi], .nk = nk[gi]};
        rc = link_group(&g, prev_dep, out);
    }
    free(start);
out:
    free(order);
    free(prev_dep);
    free(pg);
    free(cg);
    free(idx);
    free(ctab);
    free(gtab);
    free(gnum);
    free(np);
    free(nk);
    free(pos);
    free(bt);
    if (rc)
        tb_links_free(out);
    return rc;
}

void tb_links_free(struct tb_links *l)
{
    free(l->parent);
    free(l->score);
    free(l->pool_wait_ns);
    free(l->kind);
    memset(l, 0, sizeof *l);
}

static const uint32_t *g_rank; /* qsort has no context argument */

static int export_cmp(const void *a, const void *b)
{
    const struct tb_request *x = a, *y = b;
    uint32_t rx = g_rank[x->tier], ry = g_rank[y->tier];
    if (rx != ry)
        return rx < ry ? -1 : 1;
    if (x->arrival_ns != y->arrival_ns)
        return x->arrival_ns < y->arrival_ns ? -1 : 1;
    if (x->conn != y->conn)
        return x->conn < y->conn ? -1 : 1;
    return 0;
}

struct ord {
    struct tb_request r;
    size_t pos;
};

static int export_cmp_pos(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    int c = export_cmp(&x->r, &y->r);
    if (c)
        return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

struct tier_name {
    const char *name;
    uint32_t id;
};

static int name_cmp(const void *a, const void *b)
{
    const struct tier_name *x = a, *y = b;
    return strcmp(x->name, y->name);
}

int tb_link_export_order(const struct tb_catalog *cat, struct tb_request *rq, size_t n)
{
    uint32_t nt = tb_catalog_tier_count(cat);
    struct tier_name *tn = malloc((nt + 1) * sizeof *tn);
    uint32_t *rank = calloc(nt + 2, sizeof *rank);
    /* A stable sort: equal keys keep the store's (arrival, rowid) order. */
    struct ord *tmp = malloc((n + 1) * sizeof *tmp);
    if (!tn || !rank || !tmp) {
        free(tn);
        free(rank);
        free(tmp);
        return TB_E_NOMEM;
    }
    for (uint32_t t = 1; t <= nt; t++)
        tn[t - 1] = (struct tier_name){tb_catalog_tier_get(cat, t)->name, t};
    qsort(tn, nt, sizeof *tn, name_cmp);
    for (uint32_t k = 0; k < nt; k++)
        rank[tn[k].id] = k;
    g_rank = rank;
    /* A tie-break on the original position makes qsort stable. */
    for (size_t i = 0; i < n; i++) {
        tmp[i].r = rq[i];
        tmp[i].pos = i;
    }
    qsort(tmp, n, sizeof *tmp, export_cmp_pos);
    for (size_t i = 0; i < n; i++)
        rq[i] = tmp[i].r;
    g_rank = NULL;
    free(tn);
    free(rank);
    free(tmp);
    return 0;
}
