/* SPDX-License-Identifier: MIT */
/* link.h — black-box transaction linking: the upstream request during which
 * each downstream request was issued, from the wire alone (docs/linking.md).
 *
 * A request of tier B whose client address is a machine of tier A (callers.h)
 * is a child; its parent is a request of tier A on a server at that address
 * whose life contains the child's, that was not waiting for another call of
 * its own at the child's arrival (calls are sequential), chosen by timing:
 * in the caller's CPU time (processor sharing among the requests that are not
 * waiting for a call), a request's own work between its calls comes in equal
 * pieces, so its next call is due one piece after its last call returned; a
 * request's first piece is checked against its end (its last call returns one
 * piece before it departs). When one request at a time is in progress on the
 * caller the link is exact. A request waiting for a pool connection gets the
 * connection a call just returned (first come, first served). */
#ifndef TB_LINK_H
#define TB_LINK_H

#include "tb.h"
#include "catalog.h"
#include "request.h"
#include "callers.h"

/* The result for requests rq[0..n): parent[i] = index + 1 of the parent in
 * the same array, 0 for none (no caller tier: users' requests) or unknown (no
 * request of the caller contains it). score[i] in [0, 1]: 1 when only one
 * candidate was possible or timing told them apart without doubt, lower the
 * closer the runner-up came; 0 for no parent. pool_wait_ns[i]: for a child,
 * the time it waited for a pool connection on its caller (0 when it did not). */
enum tb_link_kind {
    TB_LINK_NONE = 0,      /* not a downstream request (no caller tier) */
    TB_LINK_EXACT = 1,     /* one candidate only */
    TB_LINK_AMBIGUOUS = 2, /* the runner-up's timing within the tolerance */
    TB_LINK_SCORED = 3,    /* told apart by timing, score says how clearly */
    TB_LINK_UNLINKED = 4,  /* downstream, no request of the caller contains it */
};

/* Steps past their first that the chain walks of one child's candidates may
 * take together in one try; a child whose first try (candidates in their
 * order) runs out gets a second (likeliest first, those that cannot rank not
 * walked): at most twice this a child (link.c, docs/linking.md "Cost per
 * child"). */
#define TB_LINK_CHILD_BUDGET 1024

struct tb_links {
    size_t n;
    uint64_t *parent;
    float *score;
    int64_t *pool_wait_ns;
    uint8_t *kind;      /* enum tb_link_kind per request (the table links stores it) */
    uint64_t children;  /* requests with a caller tier */
    uint64_t linked;    /* of those, given a parent */
    uint64_t exact;     /* linked with one candidate only */
    uint64_t ambiguous; /* linked, runner-up within the timing tolerance */
    /* The chain walks' cost (docs/linking.md, "Cost per child"), over every
     * pass of every caller host: steps past a walk's first (each a search of
     * the children's arrivals), the most of them for one child in one pass
     * (at most 2 x TB_LINK_CHILD_BUDGET), and the child scans whose second
     * try ran out of that budget too (0: the links are those of unbounded
     * walks). */
    uint64_t walk_steps, walk_max, walk_cut;
};

/* For benchmarks: the per-child budget of later tb_link_requests calls (0:
 * none, the walks as before the budget; TB_LINK_CHILD_BUDGET is the
 * default). Process-wide, not thread-safe. */
void tb_link_set_child_budget(size_t steps);

/* Links rq (any order). Memory of *out is owned by the caller
 * (tb_links_free). Returns 0 or TB_E_NOMEM. */
int tb_link_requests(const struct tb_catalog *cat, const struct tb_callers *cl,
                     const struct tb_request *rq, size_t n, struct tb_links *out);
void tb_links_free(struct tb_links *l);

/* Sorts rq into the order of `tbneck export requests`: tier name, then
 * arrival, then connection (stable: equal keys keep their order), so that a
 * request's id (its index + 1 here) is its row in the full export. */
int tb_link_export_order(const struct tb_catalog *cat, struct tb_request *rq, size_t n);

#endif
