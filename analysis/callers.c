/* SPDX-License-Identifier: MIT */
/* callers.c — who calls whom: client address → caller tier and server, and the
 * tier call graph (callers.h has the rule). */
#include "callers.h"

#include <stdlib.h>
#include <string.h>

/* Tiers one address can belong to before it is simply "ambiguous". */
#define MAX_TIERS_PER_IP 4

struct ip_entry {
    struct tb_addr ip;     /* port 0 */
    bool used;
    uint8_t ntiers;        /* > MAX_TIERS_PER_IP: more than we keep */
    uint32_t tier[MAX_TIERS_PER_IP];
    uint32_t server[MAX_TIERS_PER_IP]; /* the one server of that tier on the IP; 0 none/several */
};

struct tb_callers {
    const struct tb_catalog *cat;
    struct ip_entry *tab;
    size_t mask;
};

static struct tb_addr ip_only(const struct tb_addr *a)
{
    struct tb_addr ip = *a;
    ip.port = 0;
    ip.pad_ = 0;
    return ip;
}

static struct ip_entry *slot(const struct tb_callers *c, const struct tb_addr *a, bool *found)
{
    struct tb_addr ip = ip_only(a);
    size_t i = (size_t)tb_addr_hash(&ip) & c->mask;
    while (c->tab[i].used) {
        if (tb_addr_ip_eq(&c->tab[i].ip, &ip)) {
            *found = true;
            return &c->tab[i];
        }
        i = (i + 1) & c->mask;
    }
    *found = false;
    return &c->tab[i];
}

/* Notes that `tier` has a machine at `a`; server = its server there (0: a
 * host without a server of its own). */
static void add(struct tb_callers *c, const struct tb_addr *a, uint32_t tier, uint32_t server)
{
    bool found;
    struct ip_entry *e = slot(c, a, &found);
    if (!found) {
        memset(e, 0, sizeof *e);
        e->used = true;
        e->ip = ip_only(a);
    }
    for (unsigned k = 0; k < e->ntiers && k < MAX_TIERS_PER_IP; k++) {
        if (e->tier[k] != tier)
            continue;
        /* A second server of the same tier on this IP: the calls cannot be
         * told apart, they belong to the tier. A host entry adds nothing. */
        if (server && e->server[k] && e->server[k] != server)
            e->server[k] = UINT32_MAX;
        else if (server && !e->server[k])
            e->server[k] = server;
        return;
    }
    if (e->ntiers < MAX_TIERS_PER_IP) {
        e->tier[e->ntiers] = tier;
        e->server[e->ntiers] = server;
    }
    if (e->ntiers <= MAX_TIERS_PER_IP)
        e->ntiers++;
}

int tb_callers_new(struct tb_callers **out, const struct tb_catalog *cat)
{
    *out = NULL;
    struct tb_callers *c = calloc(1, sizeof *c);
    if (!c)
        return TB_E_NOMEM;
    c->cat = cat;
    size_t n = (size_t)tb_catalog_server_count(cat) + tb_catalog_host_count(cat);
    size_t cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    c->tab = calloc(cap, sizeof *c->tab);
    if (!c->tab) {
        free(c);
        return TB_E_NOMEM;
    }
    c->mask = cap - 1;
    for (uint32_t id = 1; id <= tb_catalog_server_count(cat); id++) {
        const struct tb_server_info *s = tb_catalog_server_get(cat, id);
        /* A wildcard server (*:3306 from a tiers file) names no machine. */
        if (s && s->addr.family)
            add(c, &s->addr, s->tier, id);
    }
    for (uint32_t i = 0; i < tb_catalog_host_count(cat); i++) {
        uint32_t tier;
        struct tb_addr h;
        if (tb_catalog_host_at(cat, i, &tier, &h) == 0 && h.family)
            add(c, &h, tier, 0);
    }
    *out = c;
    return 0;
}

void tb_callers_free(struct tb_callers *c)
{
    if (!c)
        return;
    free(c->tab);
    free(c);
}

void tb_callers_of(const struct tb_callers *c, const struct tb_addr *client, uint32_t callee,
                   uint32_t *tier, uint32_t *server)
{
    bool found;
    const struct ip_entry *e = slot(c, client, &found);
    *tier = 0;
    *server = 0;
    if (!found || e->ntiers > MAX_TIERS_PER_IP)
        return;
    uint32_t t = 0, s = 0;
    unsigned hits = 0;
    for (unsigned k = 0; k < e->ntiers; k++) {
        if (e->tier[k] == callee)
            continue;
        t = e->tier[k];
        s = e->server[k] == UINT32_MAX ? 0 : e->server[k];
        hits++;
    }
    if (hits != 1)
        return;
    *tier = t;
    *server = s;
}

uint32_t tb_callers_server_tier(const struct tb_callers *c, const struct tb_addr *server,
                                uint32_t *server_id)
{
    uint32_t id = 0;
    *server_id = 0;
    if (tb_catalog_server_find(c->cat, server, &id) != 0)
        return 0;
    const struct tb_server_info *s = tb_catalog_server_get(c->cat, id);
    if (!s)
        return 0;
    *server_id = id;
    return s->tier;
}

/* ---- the call graph ----------------------------------------------------------------- */

int tb_callgraph_init(struct tb_callgraph *g, uint32_t ntiers)
{
    memset(g, 0, sizeof *g);
    size_t m = (size_t)ntiers + 1;
    g->ntiers = ntiers;
    g->calls = calloc(m * m, sizeof *g->calls);
    g->conns = calloc(m * m, sizeof *g->conns);
    g->requests = calloc(m, sizeof *g->requests);
    g->depth = calloc(m, sizeof *g->depth);
    if (!g->calls || !g->conns || !g->requests || !g->depth) {
        tb_callgraph_free(g);
        return TB_E_NOMEM;
    }
    return 0;
}

void tb_callgraph_add(struct tb_callgraph *g, const struct tb_callers *c,
                      const struct tb_request *r)
{
    size_t m = (size_t)g->ntiers + 1;
    uint32_t b = r->tier, a, s;
    if (b == 0 || b > g->ntiers)
        return;
    tb_callers_of(c, &r->client, b, &a, &s);
    g->calls[a * m + b]++;
    g->requests[b]++;
}

void tb_callgraph_add_n(struct tb_callgraph *g, const struct tb_callers *c, uint32_t tier,
                        const struct tb_addr *client, uint64_t n)
{
    size_t m = (size_t)g->ntiers + 1;
    uint32_t a, s;
    if (tier == 0 || tier > g->ntiers || n == 0)
        return;
    tb_callers_of(c, client, tier, &a, &s);
    g->calls[a * m + tier] += n;
    g->requests[tier] += n;
}

int tb_callgraph_build(struct tb_callgraph *g, const struct tb_callers *c, uint32_t ntiers,
                       const struct tb_request *rq, size_t nrq, const struct tb_conn *cn,
                       size_t ncn)
{
    int rc = tb_callgraph_init(g, ntiers);
    if (rc)
        return rc;
    for (size_t i = 0; i < nrq; i++)
        tb_callgraph_add(g, c, &rq[i]);
    tb_callgraph_finish(g, c, cn, ncn);
    return 0;
}

void tb_callgraph_finish(struct tb_callgraph *g, const struct tb_callers *c,
                         const struct tb_conn *cn, size_t ncn)
{
    size_t m = (size_t)g->ntiers + 1;
    uint32_t ntiers = g->ntiers;
    for (size_t i = 0; i < ncn; i++) {
        uint32_t b = cn[i].tier, a, s, sid;
        if (b == 0)
            b = tb_callers_server_tier(c, &cn[i].server, &sid);
        if (b == 0 || b > ntiers)
            continue;
        tb_callers_of(c, &cn[i].client, b, &a, &s);
        g->conns[a * m + b]++;
    }
    /* The front tier: users call it, tiers do not. */
    double best = 2;
    for (uint32_t t = 1; t <= ntiers; t++) {
        if (!g->requests[t])
            continue;
        uint64_t by_tiers = g->requests[t] - g->calls[0 * m + t];
        double share = (double)by_tiers / (double)g->requests[t];
        if (share < best || (share == best && g->requests[t] > g->requests[g->front])) {
            best = share;
            g->front = t;
        }
    }
    for (uint32_t t = 0; t <= ntiers; t++)
        g->depth[t] = UINT32_MAX;
    if (g->front) {
        /* Breadth-first from the front, so a tier's depth is its shortest
         * call path (a cycle cannot loop). */
        g->depth[g->front] = 0;
        for (uint32_t d = 0; d < ntiers; d++) {
            bool more = false;
            for (uint32_t a = 1; a <= ntiers; a++) {
                if (g->depth[a] != d)
                    continue;
                for (uint32_t b = 1; b <= ntiers; b++) {
                    if (g->depth[b] == UINT32_MAX && tb_callgraph_calls(g, a, b)) {
                        g->depth[b] = d + 1;
                        more = true;
                    }
                }
            }
            if (!more)
                break;
        }
    }
}

bool tb_callgraph_calls(const struct tb_callgraph *g, uint32_t a, uint32_t b)
{
    if (a == 0 || b == 0 || a > g->ntiers || b > g->ntiers || a == b)
        return false;
    size_t m = (size_t)g->ntiers + 1;
    return g->calls[a * m + b] || g->conns[a * m + b];
}

void tb_callgraph_free(struct tb_callgraph *g)
{
    free(g->calls);
    free(g->conns);
    free(g->requests);
    free(g->depth);
    memset(g, 0, sizeof *g);
}
