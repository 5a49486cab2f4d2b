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

/* Events by time, stably (tb_radix_sort_i64 on the leading t). Events at
 * the same instant keep their order, which the clock does not care about: no
 * time passes between them. */
static int ev_sort(struct ev *ev, size_t n)
{
    return tb_radix_sort_i64(ev, n, sizeof *ev);
}

/* ev[0..n) sorted, ev[n..n + m) appended: the whole sorted as ev_sort would
 * (stably: at equal times the first part's events first), by sorting the
 * appended part alone and merging. */
static int ev_merge_tail(struct ev *ev, size_t n, size_t m)
{
    if (m == 0)
        return 0;
    struct ev *tail = malloc(m * sizeof *tail);
    if (!tail || ev_sort(ev + n, m) != 0) {
        free(tail);
        return TB_E_NOMEM;
    }
    memcpy(tail, ev + n, m * sizeof *tail);
    /* From the back: the merged array fills ev from its end, never over an
     * event of the first part not yet moved. */
    size_t i = n, j = m, k = n + m;
    while (j > 0) {
        if (i > 0 && ev[i - 1].t > tail[j - 1].t)
            ev[--k] = ev[--i];
        else
            ev[--k] = tail[--j];
    }
    free(tail);
    return 0;
}

/* Per parent, in one cache line: a child's scan of the parents in progress
 * reads all of it for each (they were eight arrays: eight misses). */
struct par {
    int64_t pdep;       /* departure (wall) */
    double g;           /* during a pass: its piece of work (-1 unknown) */
    double last_v;      /* during a pass: when its last call returned (CPU clock) */
    double pva, pvd;    /* arrival, departure (CPU clock) */
    double poff;        /* its response's transmission time (its class's median) */
    uint32_t ncalls;    /* during a pass: calls linked to it */
};

/* A parent in progress, with what the scan tests first: the scan reads
 * these in a row and a parent's line only for the few that pass. */
struct act {
    int64_t pdep; /* its departure (wall) */
    int64_t busy; /* the departure of its call in progress (INT64_MIN: none yet) */
    uint32_t p;   /* its local index */
};

/* One caller host of one tier: its requests (parents) and the calls it made
 * (children), each sorted by arrival, with their times on the CPU clock. */
struct group {
    const struct tb_request *rq;
    const uint32_t *par, *kid; /* indices into rq */
    size_t np, nk;
    struct ev *ev;             /* 2 (np + nk), and 2 per pool wait; sorted by time */
    size_t nev;
    struct par *P;             /* per parent: what the scans of link_pass read, together */
    double *kva, *kvd;         /* per child: CPU-clock times */
    double *kva_sorted;        /* children's arrivals (already in order: kva) */
    int64_t *kvd_sorted;       /* the first na children's departures, floored, sorted (+inf: INT64_MAX) */
    bool kvd_ready;            /* kvd_sorted is of the clock last assigned */
    size_t nseen;              /* parents that came into progress in the last pass */
    size_t cap_np, cap_nk;     /* the arrays' room: the largest group's */
    size_t na;                 /* children whose arrival the clock reached (all but in a prefix pass) */
    bool *handoff;             /* child started on a connection just returned */
    int64_t *parr;             /* per parent: arrival (wall) */
    int64_t *karr, *kdep;      /* per child: the same */
    struct act *active;        /* during a pass: the parents in progress */
    uint32_t *cfree;           /* during a child's scan: the free candidates' places in active */
    struct deep *deep;         /* during a child's scan: those whose walk goes past its first step */
    uint64_t walk_steps, walk_max, walk_cut; /* tb_links' counters, over every pass */
    /* per child: the pass's choice */
    uint32_t *choice; /* local parent index + 1, 0 none */
    float *score;
    double *wait_v;
    uint8_t *kind; /* 1 exact, 2 ambiguous */
};

/* Processor sharing on `cores` CPUs among the requests at work (in the tier,
 * not waiting for a call): each progresses at min(1, cores / n). cores 0 =
 * wall time. The clock is run to the end, or (tneed < INT64_MAX: a pass over
 * a prefix of the children, which reads the times of events up to tneed) a
 * little past tneed: until it is 3 tolerances past its value at tneed, so
 * that every event a prefix pass can look at — every child arriving within a
 * tolerance of a piece due before a parent's end — has its time. The
 * children that arrived by then are g->na, the first ones (children are in
 * arrival order); the others are not searched, and a departure not reached
 * is +inf, which no timing test takes. */
static void clock_assign(struct group *g, double cores, int64_t tneed)
{
    double v = 0, vneed = 0;
    long n = 0;
    int64_t last = g->np + g->nk ? g->ev[0].t : 0;
    size_t na = 0;
    bool part = tneed != INT64_MAX;
    for (size_t i = 0; i < g->nev; i++) {
        const struct ev *e = &g->ev[i];
        double dt = (double)(e->t - last);
        if (cores > 0 && n > cores)
            dt *= cores / (double)n;
        v += dt;
        last = e->t;
        n += e->delta;
        if (e->t <= tneed)
            vneed = v;
        else if (v > vneed + 3 * TOL_NS)
            break;
        if (e->slot == UINT32_MAX)
            continue; /* a wait for a connection: changes n only */
        size_t li = e->slot >> 2;
        bool child = e->slot & 2, dep = e->slot & 1;
        if (child && dep) {
            g->kvd[li] = v;
        } else if (child) {
            g->kva[li] = v;
            if (part)
                g->kvd[li] = INFINITY;
            na++;
        } else {
            *(dep ? &g->P[li].pvd : &g->P[li].pva) = v;
        }
    }
    g->na = na;
    g->kvd_ready = false; /* kvd_index on the first child that needs it */
}

/* The children's departures on the clock just assigned, sorted: a walk can
 * end well (a call from which the end is one piece on) only if one lies
 * where such a call must end, which one search tells (kvd_any). */
static int kvd_index(struct group *g)
{
    for (size_t k = 0; k < g->na; k++)
        g->kvd_sorted[k] = isfinite(g->kvd[k]) ? (int64_t)floor(g->kvd[k]) : INT64_MAX;
    return tb_radix_sort_i64(g->kvd_sorted, g->na, sizeof *g->kvd_sorted);
}

/* Whether one of the first na children departs within [lo, hi] (a whole
 * nanosecond wider on either side: the index is floored); *nearest, when one
 * does, its distance from x less that nanosecond (0 at least). */
static bool kvd_any(const struct group *g, double lo, double hi, double x, double *nearest)
{
    const int64_t *s = g->kvd_sorted;
    size_t n = g->na, a = 0, b = n;
    if (!(lo < 9e18) || hi < 0)
        return false;
    int64_t klo = lo < 0 ? 0 : (int64_t)floor(lo) - 1, khi = (int64_t)ceil(hi) + 1;
    while (a < b) { /* the first key >= klo */
        size_t m = a + (b - a) / 2;
        if (s[m] < klo)
            a = m + 1;
        else
            b = m;
    }
    if (a == n || s[a] > khi)
        return false;
    /* The nearest to x: the first key >= x or the one before it. */
    size_t b2 = n;
    while (a < b2) {
        size_t m = a + (b2 - a) / 2;
        if ((double)s[m] < x)
            a = m + 1;
        else
            b2 = m;
    }
    double dist = INFINITY;
    if (a < n)
        dist = (double)s[a] - x;
    if (a > 0)
        dist = fmin(dist, x - (double)s[a - 1]);
    *nearest = fmax(0, dist - 1);
    return true;
}

/* Index of the child whose arrival is nearest x (kva is sorted), searched
 * from child h on: the next call is a piece after a call's return, a few
 * children on, and galloping there reads fewer, closer lines than a binary
 * search of the whole host. The index found is the binary search's. */
static size_t nearest_idx(const double *s, size_t n, double x, size_t h)
{
    size_t lo = 0, hi = n;
    if (h < n && s[h] < x) {
        /* s[h] < x: the first s[i] >= x is after h, within a doubling step. */
        size_t step = 1;
        lo = h + 1;
        while (lo + step - 1 < n && s[lo + step - 1] < x) {
            lo += step;
            step *= 2;
        }
        hi = lo + step - 1 < n ? lo + step - 1 : n;
    } else if (h < n) {
        hi = h;
    }
    /* The first s[i] >= x in [lo, hi) (hi if none), halving without a
     * branch on the comparison (a select): its outcome is a coin toss. */
    size_t len = hi - lo;
    if (len > 0) {
        const double *b = s + lo;
        while (len > 1) {
            size_t half = len / 2;
            b = b[half] < x ? b + half : b;
            len -= half;
        }
        lo = (size_t)(b - s) + (*b < x);
    }
    if (lo == n || (lo > 0 && x - s[lo - 1] < s[lo] - x))
        return lo - 1;
    return lo;
}

/* How well "child `from` returns, then one piece of `piece`, a call, one
 * piece, ... the end" fits: walks the calls such a parent would make next (a
 * child arriving one piece after the last returned; every child within the
 * tolerance is tried) until one piece before `end`. Returns the summed timing error of
 * the best walk, plus BREAK for a walk that finds neither a call nor the end
 * where one is due. A walk takes at most WALK_BUDGET steps (calls it goes
 * through) and, beyond its first, at most what is left of its child's
 * CHILD_BUDGET (struct walk): see link_pass. */
#define BREAK (5 * TOL_NS)
#define WALK_BUDGET 256
/* Steps past their first that the walks of one child's candidates may take
 * together. A child of a caller with hundreds of requests in progress (db8
 * at 40 s, seed 113: up to 686 free parents, each walked up to WALK_BUDGET
 * steps) cost up to 96 000 steps without it. When a first try, in the
 * candidates' order, runs out of it, a second walks them least lower bound
 * first and skips those that cannot rank first or second (link_pass, exact);
 * where the budget binds there too (tb_links.walk_cut)
 * the links may differ from unbounded walks: on db8 seed 113, 6.5% of them,
 * at the same share of true parents (35%); on the simulator's linking
 * configurations it never binds (the most one child took: 190 steps). */
static size_t child_budget = TB_LINK_CHILD_BUDGET;
#define CHILD_BUDGET child_budget

void tb_link_set_child_budget(size_t steps)
{
    child_budget = steps ? steps : SIZE_MAX;
}

struct walk {
    int budget;    /* steps left to this candidate's walk */
    size_t left;   /* steps past their first left to this child's walks */
    uint64_t steps;
    bool cut;      /* a walk was stopped by the child's budget */
};

static double chain_walk(const struct group *g, size_t from, double piece, double end, double tol,
                         int depth, struct walk *w)
{
    double next = g->kvd[from] + piece;
    double e = fabs(end - next);
    if (e <= TOL_NS) /* the end is estimated (response transmission): full tolerance */
        return e;
    if (next > end + TOL_NS || depth >= 64 || --w->budget <= 0)
        return BREAK;
    if (depth > 0) {
        if (w->left == 0) {
            w->cut = true;
            return BREAK;
        }
        w->left--;
        w->steps++;
    }
    size_t na = g->na; /* the children the clock has reached */
    size_t j = nearest_idx(g->kva_sorted, na, next, from);
    if (j >= na)
        return BREAK;
    /* The nearest arrival first: the true next call is usually it. */
    size_t lo = j, hi = j + 1;
    double best = BREAK;
    while (best > tol) {
        size_t k;
        if (lo < na && (hi >= na || next - g->kva[lo] <= g->kva[hi] - next))
            k = lo, lo = lo > 0 ? lo - 1 : na;
        else if (hi < na)
            k = hi++;
        else
            break;
        if (fabs(g->kva[k] - next) > tol)
            break; /* the nearest left is out of reach: so is every other */
        if (g->kvd[k] > end + TOL_NS)
            continue;
        double r = fabs(g->kva[k] - next) + chain_walk(g, k, piece, end, tol, depth + 1, w);
        if (r < best)
            best = r;
        if (w->cut)
            break; /* the child's budget is spent: no call on is walked */
    }
    return best;
}

/* The clock's error grows with the piece: a tolerance to match, so that
 * short pieces do not open a window wide enough for many calls. */
static double walk_tol(double piece)
{
    return fmin(TOL_NS, 2000.0 + 0.05 * piece);
}

static double chain_err(const struct group *g, size_t c, double piece, double end, struct walk *w)
{
    if (!w)
        return BREAK; /* chain_deep found that no walk ends well */
    w->budget = WALK_BUDGET;
    return chain_walk(g, c, piece, end, walk_tol(piece), 0, w);
}

/* How far chain_err(c, piece, end) has to go, from its first step and one
 * search of the departures: WALK_FIRST, it ends at its first step (its
 * value costs one search); WALK_BREAK, it cannot end well: no call it could
 * go on to, or none that departs one piece before the end (the walk would
 * return BREAK, whatever its budget); WALK_DEEP, it has to be walked, and
 * *lb is a lower bound of its value: the least timing error of a call it
 * can go on to plus the least error at the end (errors add up; BREAK is
 * above the two). */
enum { WALK_FIRST, WALK_BREAK, WALK_DEEP };
static int chain_deep(const struct group *g, size_t c, double piece, double end, double *lb)
{
    double next = g->kvd[c] + piece, tol = walk_tol(piece);
    if (fabs(end - next) <= TOL_NS || next > end + TOL_NS)
        return WALK_FIRST;
    size_t na = g->na;
    size_t j = nearest_idx(g->kva_sorted, na, next, c);
    double m = INFINITY;
    /* Nearest first on each side, as chain_walk tries them. */
    for (size_t k = j; k < na && g->kva[k] - next <= tol; k++) {
        if (fabs(g->kva[k] - next) <= tol && g->kvd[k] <= end + TOL_NS) {
            m = fabs(g->kva[k] - next);
            break;
        }
    }
    for (size_t k = j < na ? j : na; k-- > 0 && next - g->kva[k] <= tol;) {
        if (fabs(g->kva[k] - next) <= tol && g->kvd[k] <= end + TOL_NS) {
            m = fmin(m, fabs(g->kva[k] - next));
            break;
        }
    }
    if (m == INFINITY)
        return WALK_FIRST;
    double elast;
    if (!kvd_any(g, end - piece - TOL_NS, end - piece + TOL_NS, end - piece, &elast))
        return WALK_BREAK;
    *lb = m + elast;
    return WALK_DEEP;
}

/* How far cost_of(p, c)'s walk has to go (chain_deep; WALK_FIRST when it
 * walks none), and for WALK_DEEP a lower bound of the cost in *lb. */
static int cost_deep(const struct group *g, size_t p, size_t c, double *lb)
{
    double va = g->kva[c], end = g->P[p].pvd - g->P[p].poff;
    if (g->P[p].g >= 0) {
        double dev = va - (g->P[p].last_v + g->P[p].g);
        if (dev < -TOL_NS || dev > TOL_NS)
            return WALK_FIRST;
        int d = chain_deep(g, c, g->P[p].g, end, lb);
        *lb += fabs(dev);
        return d;
    }
    double base = g->P[p].ncalls ? g->P[p].last_v : g->P[p].pva;
    /* Its cost is the walk's error, or LATE and more when that is BREAK. */
    return chain_deep(g, c, va - base, end, lb);
}

/* What it costs to make parent p the issuer of child c (lower is likelier). */
static double cost_of(const struct group *g, size_t p, size_t c, double *wait, struct walk *w)
{
    *wait = 0;
    /* link_pass asks only of parents that end after the child and are not
     * out on another call at its arrival. */
    double va = g->kva[c], end = g->P[p].pvd - g->P[p].poff;
    if (g->P[p].g >= 0) {
        double dev = va - (g->P[p].last_v + g->P[p].g);
        if (dev < -TOL_NS)
            return IMPOSSIBLE + (-dev);
        if (dev <= TOL_NS) {
            /* Two parents can come due within a microsecond of each other;
             * the calls after this one tell them apart. */
            return fabs(dev) + chain_err(g, c, g->P[p].g, end, w);
        }
        *wait = dev;
        /* Late: the parent waited for a connection (first come, first served:
         * the longest wait goes first), or the timing fits no better. */
        return g->handoff[c] ? LATE + 1e12 - fmin(dev, 1e12) : LATE + 2e12 + dev;
    }
    double base = g->P[p].ncalls ? g->P[p].last_v : g->P[p].pva;
    double piece = va - base;
    /* Its first piece of work sets the length of every later one. */
    double e = chain_err(g, c, piece, end, w);
    if (e < BREAK)
        return e;
    if (g->handoff[c]) {
        *wait = piece;
        return LATE + 1e12 - fmin(piece, 1e12);
    }
    return LATE + 2e12 + piece;
}

struct deep {
    double lb;   /* a lower bound of its cost */
    uint32_t k;  /* its place in active */
    uint32_t p;  /* its local index */
};

static int deep_cmp(const void *a, const void *b)
{
    const struct deep *x = a, *y = b;
    if (x->lb != y->lb)
        return x->lb < y->lb ? -1 : 1;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* One pass over the first `limit` children; returns how many were on time,
 * SIZE_MAX when out of memory. */
static size_t link_pass(struct group *g, size_t limit)
{
    /* A parent's state is set when it comes into progress: a prefix pass
     * touches only the parents of its prefix (end_offsets reads those). */
    struct act *act = g->active;
    uint32_t *cfree = g->cfree;
    size_t nact = 0, pi = 0, ontime = 0;
    for (size_t c = 0; c < limit; c++) {
        int64_t ca = g->karr[c], cd = g->kdep[c];
        while (pi < g->np && g->parr[pi] <= ca) {
            g->P[pi].g = -1;
            g->P[pi].last_v = g->P[pi].pva;
            g->P[pi].ncalls = 0;
            act[nact++] = (struct act){g->P[pi].pdep, INT64_MIN, (uint32_t)pi};
            pi++;
        }
        /* The parents that end after the child: those free at its arrival
         * are costed; those out on another call are all IMPOSSIBLE, a last
         * resort, of which the least index wins a tie. The choice does not
         * depend on the order the candidates are seen in (the least cost,
         * the least index among equal costs; the runner-up the second least
         * cost), so the scan only sorts them into the two kinds, without a
         * branch on either test: they came out as a coin toss. */
        size_t nfree = 0, nbusy = 0, bbusy = SIZE_MAX, kbusy = 0;
        for (size_t k = 0; k < nact;) {
            if (act[k].pdep < ca) {
                act[k] = act[--nact];
                continue;
            }
            /* A request that ends before the child does cannot have issued
             * it: never a candidate, not even the last resort (on the real
             * stack such picks put 1-3% of queries outside their parent). */
            bool cand = act[k].pdep >= cd, busy = act[k].busy > ca;
            size_t p = act[k].p;
            cfree[nfree] = (uint32_t)k;
            nfree += cand & !busy;
            bool least = cand & busy & (p < bbusy);
            bbusy = least ? p : bbusy;
            kbusy = least ? k : kbusy;
            nbusy += cand & busy;
            k++;
        }
        double best, second, bwait;
        size_t bp, bk, feasible;
        struct walk wk;
        struct deep *dp = g->deep;
        uint64_t steps = 0;
        /* First as they come, each walked in turn, as long as the child's
         * budget lasts (it does but on callers with hundreds of requests in
         * progress). When it runs out, again: those whose cost ends at the
         * first step of its walk first; those whose walk goes on after,
         * least bound first, and only while the bound is not above the
         * runner-up's cost: a cost above it changes nothing (not the choice,
         * the runner-up, the score or the count of feasible ones: every
         * walked candidate is feasible). With at most 16 to walk they keep
         * their order: sorting would cost more. */
        for (bool few = true;; few = false) {
            best = second = INFINITY;
            bwait = 0;
            bp = SIZE_MAX;
            bk = 0;
            feasible = 0;
            size_t ndeep = 0;
            wk = (struct walk){.left = CHILD_BUDGET};
            if (!few && !g->kvd_ready) {
                if (kvd_index(g) != 0)
                    return SIZE_MAX;
                g->kvd_ready = true;
            }
            for (size_t j = 0; j < nfree + ndeep; j++) {
                size_t k, p;
                struct walk *wp = &wk;
                if (few) {
                    k = cfree[j];
                    p = act[k].p;
                } else if (j < nfree) {
                    k = cfree[j];
                    p = act[k].p;
                    double lb = 0;
                    int d = cost_deep(g, p, c, &lb);
                    if (d == WALK_DEEP) {
                        dp[ndeep++] = (struct deep){lb, (uint32_t)k, (uint32_t)p};
                        continue;
                    }
                    wp = d == WALK_BREAK ? NULL : &wk;
                } else {
                    if (j == nfree && ndeep > 16)
                        qsort(dp, ndeep, sizeof *dp, deep_cmp);
                    const struct deep *d = &dp[j - nfree];
                    if (d->lb > second && ndeep > 16) {
                        feasible += nfree + ndeep - j; /* sorted: so are the rest */
                        break;
                    }
                    if (d->lb > second) {
                        feasible++;
                        continue;
                    }
                    k = d->k;
                    p = d->p;
                    /* The budget is spent: the rest are not walked, as if
                     * their walks found nothing (BREAK). */
                    if (wk.cut)
                        wp = NULL;
                }
                double w, cst = cost_of(g, p, c, &w, wp);
                if (cst < IMPOSSIBLE)
                    feasible++;
                if (cst < best || (cst == best && bp != SIZE_MAX && p < bp)) {
                    second = best;
                    best = cst;
                    bp = p;
                    bk = k;
                    bwait = w;
                } else if (cst < second) {
                    second = cst;
                }
            }
            steps += wk.steps;
            if (!few || !wk.cut)
                break;
        }
        g->walk_steps += steps;
        g->walk_max = steps > g->walk_max ? steps : g->walk_max;
        g->walk_cut += wk.cut;
        /* The busy ones: the least index at IMPOSSIBLE, and a second
         * IMPOSSIBLE when there are two or more. */
        for (size_t j = 0; j < nbusy && j < 2; j++) {
            double cst = IMPOSSIBLE;
            size_t p = j == 0 ? bbusy : SIZE_MAX;
            if (cst < best || (cst == best && bp != SIZE_MAX && p < bp)) {
                second = best;
                best = cst;
                bp = p;
                bk = kbusy;
                bwait = 0;
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
        if (g->P[bp].g < 0 && best <= 2 * TOL_NS)
            g->P[bp].g = g->kva[c] - (g->P[bp].ncalls ? g->P[bp].last_v : g->P[bp].pva);
        g->P[bp].ncalls++;
        g->P[bp].last_v = g->kvd[c];
        act[bk].busy = cd;
    }
    g->nseen = pi;
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
        if (p < g->nseen && g->P[p].ncalls && g->P[p].g >= 0)
            off = g->P[p].pvd - g->P[p].last_v - g->P[p].g;
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
            g->P[co[k].p].poff = med;
        i = j;
    }
    free(co);
    return 0;
}

static void group_free(struct group *g)
{
    free(g->ev);
    free(g->P);
    free(g->kva);
    free(g->handoff);
    free(g->parr);
    free(g->karr);
    free(g->kdep);
    free(g->active);
    free(g->cfree);
    free(g->deep);
    free(g->kvd_sorted);
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
    /* The prefix passes read the times of events up to the last departure
     * of their children and of the parents that arrived before the last of
     * them. */
    int64_t tneed = INT64_MIN;
    for (size_t c = 0; c < lim; c++)
        tneed = g->kdep[c] > tneed ? g->kdep[c] : tneed;
    for (size_t p = 0; p < g->np && lim && g->parr[p] <= g->karr[lim - 1]; p++)
        tneed = g->P[p].pdep > tneed ? g->P[p].pdep : tneed;
    if (lim == nk)
        tneed = INT64_MAX;
    for (size_t k = 0; k < TB_ARRAY_SIZE(cores_try); k++) {
        clock_assign(g, cores_try[k], tneed);
        size_t on = link_pass(g, lim);
        if (on == SIZE_MAX)
            return TB_E_NOMEM;
        if (k == 0 || on > best) {
            best = on;
            cores = cores_try[k];
        }
    }
    clock_assign(g, cores, INT64_MAX);
    /* A parent departs when the last packet of its response passes the tap,
     * a transmission time after its last piece of work ended: learned per
     * class (the median) from the links of a longer prefix, then the whole
     * host is linked. */
    if (link_pass(g, nk < OFFSET_PREFIX ? nk : OFFSET_PREFIX) == SIZE_MAX)
        return TB_E_NOMEM;
    int rc = end_offsets(g);
    if (rc)
        return rc;
    if (link_pass(g, nk) == SIZE_MAX)
        return TB_E_NOMEM;
    *cores_out = cores;
    return 0;
}

/* A request's times, gathered from the request array in its one sequential
 * pass: the groups read these 16 bytes, not an 80-byte request each. */
struct span {
    int64_t arr, dep;
};

static int link_group(struct group *g, const struct span *sp, const uint8_t *handoff,
                      struct tb_links *out)
{
    size_t np = g->np, nk = g->nk, ne = 2 * (np + nk);
    /* The arrays are allocated once, for the largest group (g->cap_np,
     * g->cap_nk), and kept for the next: fresh pages cost a fault each. */
    if (!g->ev) {
        size_t cp = g->cap_np, ck = g->cap_nk;
        g->ev = malloc((2 * (cp + ck) + 2 * ck + 1) * sizeof *g->ev);
        g->P = malloc((cp + 1) * sizeof *g->P);
        g->kva = malloc((2 * ck + 1) * sizeof(double));
        g->handoff = malloc((ck + 1) * sizeof *g->handoff);
        g->parr = malloc((cp + 1) * sizeof *g->parr);
        g->karr = malloc((ck + 1) * sizeof *g->karr);
        g->kdep = malloc((ck + 1) * sizeof *g->kdep);
        g->cfree = malloc((cp + 1) * sizeof *g->cfree);
        g->deep = malloc((cp + 1) * sizeof *g->deep);
        g->kvd_sorted = malloc((ck + 1) * sizeof *g->kvd_sorted);
        g->active = malloc((cp + 1) * sizeof *g->active);
        g->choice = malloc((ck + 1) * sizeof *g->choice);
        g->score = malloc((ck + 1) * sizeof *g->score);
        g->wait_v = malloc((ck + 1) * sizeof *g->wait_v);
        g->kind = malloc(ck + 1);
        if (!g->ev || !g->P || !g->kva || !g->handoff || !g->parr || !g->karr || !g->kdep ||
            !g->active || !g->cfree || !g->deep || !g->kvd_sorted || !g->choice || !g->score || !g->wait_v || !g->kind)
            return TB_E_NOMEM;
    }
    memset(g->P, 0, np * sizeof *g->P);
    g->kvd = g->kva + nk;
    g->kva_sorted = g->kva; /* children are in arrival order */
    size_t e = 0;
    for (size_t i = 0; i < np; i++) {
        const struct span *r = &sp[g->par[i]];
        g->P[i].pdep = r->dep;
        g->parr[i] = r->arr;
        g->ev[e++] = (struct ev){r->arr, +1, (uint32_t)(i << 2)};
        g->ev[e++] = (struct ev){r->dep, -1, (uint32_t)(i << 2 | 1)};
    }
    for (size_t i = 0; i < nk; i++) {
        const struct span *r = &sp[g->kid[i]];
        g->karr[i] = r->arr;
        g->kdep[i] = r->dep;
        g->ev[e++] = (struct ev){r->arr, -1, (uint32_t)(i << 2 | 2)};
        g->ev[e++] = (struct ev){r->dep, +1, (uint32_t)(i << 2 | 3)};
        g->handoff[i] = handoff[g->kid[i]];
    }
    g->nev = ne;
    if (ev_sort(g->ev, g->nev) != 0) {
        return TB_E_NOMEM;
    }
    double cores = 0;
    if (link_rounds(g, &cores) != 0) {
        return TB_E_NOMEM;
    }
    /* A request waiting for a pool connection is not at work: once the
     * waits are known, the clock is rebuilt without them and the host linked
     * again. */
    size_t nw = 0;
    for (size_t c = 0; c < nk; c++) {
        if (!g->handoff[c] || g->wait_v[c] <= 0)
            continue;
        int64_t arr = g->karr[c], from = arr - (int64_t)llround(g->wait_v[c]);
        g->ev[g->nev++] = (struct ev){from, -1, UINT32_MAX};
        g->ev[g->nev++] = (struct ev){arr, +1, UINT32_MAX};
        nw++;
    }
    if (nw > nk / 100) {
        if (ev_merge_tail(g->ev, ne, g->nev - ne) != 0) {
            return TB_E_NOMEM;
        }
        if (link_rounds(g, &cores) != 0) {
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
    return 0;
}

/* Groups: (host address, tier) -> group number, in an open-addressing table
 * that grows (there are about as many groups as hosts: a table sized for
 * every request cost page faults and cache misses for nothing). */
struct gkey {
    uint8_t ip[16];
    uint32_t tier;
    uint32_t num; /* group number + 1, 0 = free slot */
};

struct gtab {
    struct gkey *tab;
    size_t mask, used;
};

static size_t gtab_find(const struct gkey *tab, size_t mask, const uint8_t ip[16], uint32_t tier)
{
    uint64_t h, lo;
    memcpy(&h, ip, 8);
    memcpy(&lo, ip + 8, 8);
    size_t i = (size_t)tb_mix64(h ^ tb_mix64(lo ^ tier)) & mask;
    while (tab[i].num && (tab[i].tier != tier || memcmp(tab[i].ip, ip, 16)))
        i = (i + 1) & mask;
    return i;
}

/* The group number of (ip, tier), numbered in order of first sight;
 * UINT32_MAX when out of memory. */
static uint32_t gtab_get(struct gtab *t, const uint8_t ip[16], uint32_t tier)
{
    size_t i = gtab_find(t->tab, t->mask, ip, tier);
    if (t->tab[i].num)
        return t->tab[i].num - 1;
    if (2 * (t->used + 1) > t->mask) {
        size_t mask = 2 * t->mask + 1;
        struct gkey *tab = calloc(mask + 1, sizeof *tab);
        if (!tab)
            return UINT32_MAX;
        for (size_t k = 0; k <= t->mask; k++)
            if (t->tab[k].num)
                tab[gtab_find(tab, mask, t->tab[k].ip, t->tab[k].tier)] = t->tab[k];
        free(t->tab);
        t->tab = tab;
        t->mask = mask;
        i = gtab_find(tab, mask, ip, tier);
    }
    memcpy(t->tab[i].ip, ip, 16);
    t->tab[i].tier = tier;
    t->tab[i].num = (uint32_t)++t->used;
    return t->tab[i].num - 1;
}

/* Connection -> the last departure seen on it (arrival order): an array by
 * connection id when the ids are dense (the store numbers them in order),
 * else an open-addressing table. */
struct cslot {
    uint64_t conn;
    int64_t dep;
    bool used;
};

struct ctab {
    int64_t *dense; /* dep by conn - lo; INT64_MIN unseen */
    uint64_t lo;
    struct cslot *tab;
    size_t mask;
};

static int ctab_init(struct ctab *c, const struct tb_request *rq, size_t n)
{
    memset(c, 0, sizeof *c);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = rq[i].conn < lo ? rq[i].conn : lo;
        hi = rq[i].conn > hi ? rq[i].conn : hi;
    }
    if (n && hi - lo < 4 * (uint64_t)n + 1024) {
        c->lo = lo;
        size_t m = (size_t)(hi - lo) + 1;
        if (!(c->dense = malloc(m * sizeof *c->dense)))
            return TB_E_NOMEM;
        for (size_t k = 0; k < m; k++)
            c->dense[k] = INT64_MIN;
        return 0;
    }
    c->mask = 1023;
    while (c->mask < 2 * n + 1)
        c->mask = c->mask * 2 + 1;
    c->tab = calloc(c->mask + 1, sizeof *c->tab);
    return c->tab ? 0 : TB_E_NOMEM;
}

/* The previous departure on conn (INT64_MIN: none), and dep recorded. */
static int64_t ctab_swap(struct ctab *c, uint64_t conn, int64_t dep)
{
    int64_t prev;
    if (c->dense) {
        prev = c->dense[conn - c->lo];
        c->dense[conn - c->lo] = dep;
        return prev;
    }
    size_t h = (size_t)tb_mix64(conn) & c->mask;
    while (c->tab[h].used && c->tab[h].conn != conn)
        h = (h + 1) & c->mask;
    prev = c->tab[h].used ? c->tab[h].dep : INT64_MIN;
    c->tab[h] = (struct cslot){conn, dep, true};
    return prev;
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
    uint32_t *order = NULL; /* NULL: rq is in arrival order already */
    struct span *sp = malloc((n + 1) * sizeof *sp);
    /* Per request: a call that started within HANDOFF_NS after the previous
     * call on its connection returned (the pool handed the connection on). */
    uint8_t *handoff = malloc(n + 1);
    uint32_t *pg = malloc((n + 1) * sizeof *pg), *cg = malloc((n + 1) * sizeof *cg);
    uint32_t *idx = malloc((2 * n + 1) * sizeof *idx);
    uint32_t nsrv = tb_catalog_server_count(cat);
    /* Per server id: its group as a parent and the tier it was looked up
     * for (0: not yet). */
    uint32_t *sgroup = malloc(2 * ((size_t)nsrv + 1) * sizeof *sgroup);
    struct ctab ct;
    memset(&ct, 0, sizeof ct);
    struct gtab gt = {.tab = calloc(64, sizeof(struct gkey)), .mask = 63};
    size_t *np = NULL, *nk = NULL, *pos = NULL;
    struct by_time *bt = NULL;
    int rc = 0;
    if (!out->parent || !out->score || !out->pool_wait_ns || !out->kind || !sp || !handoff || !pg ||
        !cg || !idx || !sgroup || !gt.tab || n > UINT32_MAX / 4 || ctab_init(&ct, rq, n)) {
        rc = TB_E_NOMEM;
        goto out;
    }
    for (uint32_t s = 0; s <= nsrv; s++)
        sgroup[2 * s + 1] = 0;
    /* Arrival order: the store's order already; sorted here otherwise. */
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = rq[i - 1].arrival_ns <= rq[i].arrival_ns;
    if (!sorted) {
        if (!(bt = malloc((n + 1) * sizeof *bt)) || !(order = malloc((n + 1) * sizeof *order))) {
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
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order ? order[k] : (uint32_t)k;
        int64_t pd = ctab_swap(&ct, rq[i].conn, rq[i].departure_ns), arr = rq[i].arrival_ns;
        sp[i] = (struct span){arr, rq[i].departure_ns};
        handoff[i] = pd != INT64_MIN && arr >= pd && arr - pd <= HANDOFF_NS;
        pg[i] = cg[i] = UINT32_MAX;
        uint32_t s = rq[i].server;
        /* A server's requests are of one tier: its group is looked up once. */
        uint32_t *sgp = s <= nsrv ? &sgroup[2 * s] : NULL;
        if (sgp && sgp[1] == rq[i].tier) {
            pg[i] = sgp[0];
        } else {
            const struct tb_server_info *sv = tb_catalog_server_get(cat, s);
            if (sv) {
                uint32_t gnum = gtab_get(&gt, sv->addr.ip, rq[i].tier);
                if (gnum == UINT32_MAX) {
                    rc = TB_E_NOMEM;
                    goto out;
                }
                pg[i] = gnum;
            }
            if (sgp) {
                sgp[0] = pg[i];
                sgp[1] = rq[i].tier;
            }
        }
        uint32_t ctier, cs;
        tb_callers_of(cl, &rq[i].client, rq[i].tier, &ctier, &cs);
        if (!ctier)
            continue;
        out->children++;
        out->kind[i] = TB_LINK_UNLINKED;
        cg[i] = gtab_get(&gt, rq[i].client.ip, ctier);
        if (cg[i] == UINT32_MAX) {
            rc = TB_E_NOMEM;
            goto out;
        }
    }
    size_t ngroups = gt.used;
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
        uint32_t i = order ? order[k] : (uint32_t)k;
        if (pg[i] != UINT32_MAX)
            idx[fill[2 * pg[i]]++] = i;
        if (cg[i] != UINT32_MAX)
            idx[fill[2 * cg[i] + 1]++] = i;
    }
    struct group g = {.rq = rq};
    for (size_t gi = 0; gi < ngroups; gi++) {
        if (np[gi] && nk[gi]) {
            g.cap_np = np[gi] > g.cap_np ? np[gi] : g.cap_np;
            g.cap_nk = nk[gi] > g.cap_nk ? nk[gi] : g.cap_nk;
        }
    }
    for (size_t gi = 0; gi < ngroups && rc == 0; gi++) {
        if (np[gi] == 0 || nk[gi] == 0)
            continue;
        g.par = &idx[start[2 * gi]];
        g.kid = &idx[start[2 * gi + 1]];
        g.np = np[gi];
        g.nk = nk[gi];
        rc = link_group(&g, sp, handoff, out);
    }
    out->walk_steps = g.walk_steps;
    out->walk_max = g.walk_max;
    out->walk_cut = g.walk_cut;
    group_free(&g);
    free(start);
out:
    free(order);
    free(sp);
    free(handoff);
    free(pg);
    free(cg);
    free(idx);
    free(ct.dense);
    free(ct.tab);
    free(gt.tab);
    free(sgroup);
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
