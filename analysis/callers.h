/* SPDX-License-Identifier: MIT */
/* callers.h — who calls whom: the tier (and server) a client address belongs
 * to, and the tier call graph derived from the requests and connections seen.
 *
 * The rule (DESIGN.md "Who calls whom"): a machine that is a server of tier A
 * — its address is the IP of one of A's servers, or one of A's hosts= from
 * the tiers file (the catalog keeps both as A's hosts) — and a client of tier
 * B makes A a caller of B. A tier never calls itself through this rule (a
 * server's calls to its own tier are not "downstream"). An address that
 * belongs to several other tiers (two tiers on one machine) is ambiguous:
 * calls from it have no caller, never a guess; hosts= on distinct addresses
 * is how a tiers file tells them apart. The caller *server* is the one server
 * of the caller tier on that IP; none or several (a hosts= machine, several
 * servers on one IP) give server 0, the tier as a whole. */
#ifndef TB_CALLERS_H
#define TB_CALLERS_H

#include "tb.h"
#include "catalog.h"
#include "conn.h"
#include "request.h"

struct tb_callers;

/* Built from the catalog's servers and hosts (a snapshot: later additions to
 * the catalog are not seen). */
int tb_callers_new(struct tb_callers **out, const struct tb_catalog *cat);
void tb_callers_free(struct tb_callers *c);

/* The caller of a request or connection from `client` to a server of tier
 * `callee` (0 = any tier): *tier = 0 when none (users, or an ambiguous
 * address), *server = 0 for the caller tier as a whole. */
void tb_callers_of(const struct tb_callers *c, const struct tb_addr *client, uint32_t callee,
                   uint32_t *tier, uint32_t *server);

/* The tier of every (server) address: 0 when the catalog has none. */
uint32_t tb_callers_server_tier(const struct tb_callers *c, const struct tb_addr *server,
                                uint32_t *server_id);

/* ---- the tier call graph --------------------------------------------------------
 * calls[a * (ntiers + 1) + b] = requests of tier b whose caller is tier a
 * (a = 0: callers that are no tier, i.e. users); conns likewise for
 * connections. The front tier is the tier with requests whose share of
 * requests made by other tiers is smallest (ties: more requests), as users
 * call it and tiers do not; 0 when no tier has requests. depth[t] = calls
 * from the front to t along the graph (front 0, its callees 1, ...; UINT32_MAX
 * when t is not reachable from the front). */
struct tb_callgraph {
    uint32_t ntiers;
    uint64_t *calls;   /* (ntiers + 1)^2 */
    uint64_t *conns;   /* (ntiers + 1)^2 */
    uint64_t *requests;/* per tier */
    uint32_t front;
    uint32_t *depth;   /* per tier, index 0 unused */
};
int tb_callgraph_build(struct tb_callgraph *g, const struct tb_callers *c, uint32_t ntiers,
                       const struct tb_request *rq, size_t nrq, const struct tb_conn *cn,
                       size_t ncn);
/* The same in three steps, for requests streamed from the store: init, add
 * every request (any order), finish with the connections. tb_callgraph_build
 * is exactly these. */
int tb_callgraph_init(struct tb_callgraph *g, uint32_t ntiers);
void tb_callgraph_add(struct tb_callgraph *g, const struct tb_callers *c,
                      const struct tb_request *r);
/* The same as tb_callgraph_add called n times with requests of tier `tier`
 * from `client` (counts from tb_store_tier_clients, linkstore.h). */
void tb_callgraph_add_n(struct tb_callgraph *g, const struct tb_callers *c, uint32_t tier,
                        const struct tb_addr *client, uint64_t n);
void tb_callgraph_finish(struct tb_callgraph *g, const struct tb_callers *c,
                         const struct tb_conn *cn, size_t ncn);
/* Whether tier a calls tier b (requests or connections seen). */
bool tb_callgraph_calls(const struct tb_callgraph *g, uint32_t a, uint32_t b);
void tb_callgraph_free(struct tb_callgraph *g);

#endif
