/* SPDX-License-Identifier: MIT */
/* critpath.h — the critical path of front requests from the linked request
 * trees (link.h): where each front request's response time went, per tier —
 * its own work, local queueing, waiting for a pool connection — and on the
 * wire (what no tier's request covers), aggregated per class as shares of
 * response time (docs/whatif.md). Also the trees themselves, which whatif
 * shares. */
#ifndef TB_CRITPATH_H
#define TB_CRITPATH_H

#include "tb.h"
#include "catalog.h"
#include "store.h"
#include "link.h"
#include "callers.h"

/* The linked trees of requests rq[0..n) (in arrival order): root[i] = index
 * of the front request i belongs to (-1: none); own[i] = its duration minus
 * its calls' durations and its waits for a connection (>= 0); pool[i] = its
 * waits for a connection; svc[server id] = the server's time of own work per
 * request when alone at arrival (the mean of those; of all when fewer than
 * 20), 0 for servers without requests; busy[i] = own[i] x svc / (the
 * server's mean own): the work part of own, the rest local queueing. */
struct tb_trees {
    size_t n;
    uint32_t front;
    int64_t *root;
    double *own, *pool, *work;
    double *svc;   /* per server id, nsrv + 1 */
    /* Per server id: the cores that conserve work — the c for which the time
     * integral of min(requests at work, c) is nearest to requests x svc (a
     * processor-sharing server at work on n requests does min(n, c) units of
     * work a second); 0 without requests. */
    double *cores;
    double *svc_alone; /* per server id: own time of requests alone at arrival (mean) */
    /* Per server id: own time of requests that arrived at an empty server
     * (no other request of it in progress: at work, out on a call or waiting
     * for a connection; their first connection is free), mean, and how many. */
    double *svc_solo;
    uint64_t *nsolo;
    uint32_t nsrv;
};
int tb_trees_build(const struct tb_catalog *cat, const struct tb_request *rq, size_t n,
                   const struct tb_links *lk, uint32_t front, struct tb_trees *t);
void tb_trees_free(struct tb_trees *t);

/* What critical path and whatif both start from: the requests stored in
 * [from, to) in arrival order, who calls whom, the call graph (its front
 * tier), then (tb_linked_link) the links and the trees. tb_linked_load:
 * TB_E_NOTFOUND when there are no requests or no front tier. */
struct tb_linked {
    struct tb_request *rq;
    size_t n;
    struct tb_callers *cl;
    struct tb_callgraph g;
    struct tb_links lk;
    struct tb_trees t;
};
int tb_linked_load(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                   int64_t to_ns, struct tb_linked *l);
int tb_linked_link(const struct tb_catalog *cat, struct tb_linked *l);
void tb_linked_free(struct tb_linked *l);

enum tb_cp_kind { TB_CP_WORK = 0, TB_CP_QUEUE = 1, TB_CP_POOL = 2, TB_CP_KINDS = 3 };

/* Shares of response time per component: component i * TB_CP_KINDS + kind
 * for the tier tiers[i] (struct tb_critpath), and the wire last (index ntiers * TB_CP_KINDS). mean: over all the
 * class's requests (sum of component / sum of response time); p95 / p99:
 * the same over its requests at or above the class's 95th / 99th percentile. */
struct tb_cp_class {
    uint32_t class_id;  /* 0: every class together */
    uint64_t requests;
    double rt_mean_ns, rt_p95_ns, rt_p99_ns;
    double *mean, *p95, *p99;
};
struct tb_critpath {
    uint32_t front, ntiers;
    /* tiers[i]: the tier of components i * TB_CP_KINDS .. + TB_CP_KINDS - 1;
     * tiers in name order, so the output does not depend on which tier a
     * catalog registered first (a merged ClickHouse store's order differs). */
    uint32_t *tiers;
    size_t ncomp;
    struct tb_cp_class *cls; /* all classes first, then by requests, most first */
    size_t ncls;
    uint64_t linked, children;
};
/* Requests in [from, to) (INT64_MIN/INT64_MAX: all). TB_E_NOTFOUND when no
 * front tier has requests. */
int tb_critpath_build(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                      int64_t to_ns, struct tb_critpath *cp);
void tb_critpath_free(struct tb_critpath *cp);
/* tb_critpath_build, kept: over the whole capture (from INT64_MIN, to
 * INT64_MAX) with no capture running, the critical path stored for these
 * requests and this catalog (blob "critpath", the same stamp as diagnose's
 * stored inputs) is read if there is one, else built and stored (a read-only
 * file: not stored); reuse false (--recompute) builds it and stores it anew.
 * TBNECK_DIAGNOSE_STORED=0 neither reads nor stores. */
int tb_critpath_stored(struct tb_store *st, const struct tb_catalog *cat, int64_t from_ns,
                       int64_t to_ns, bool reuse, struct tb_critpath *cp);
/* "mysql work", "http-8080 pool", "wire". */
const char *tb_cp_kind_name(unsigned kind);
struct tb_buf;
void tb_critpath_json(struct tb_buf *b, const struct tb_catalog *cat, const struct tb_critpath *cp);

#endif
