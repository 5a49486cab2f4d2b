/* SPDX-License-Identifier: MIT */
/* diagnose.h — root cause of transient bottlenecks from the wire: the tier
 * call graph, layered load (own time vs waiting on downstream calls), pool
 * and thread ceilings, and a wait-for graph walked per congested window to
 * the server (or pool) that holds everyone else up. docs/diagnose.md has the
 * method, every rule and threshold, and the JSON fields. */
#ifndef TB_DIAGNOSE_H
#define TB_DIAGNOSE_H

#include "tb.h"
#include "catalog.h"
#include "correlate.h"
#include "store.h"
#include "critpath.h"

/* The fixed vocabulary of causes (DESIGN.md, `tbneck diagnose`). */
enum tb_cause {
    TB_CAUSE_NONE = 0,
    TB_CAUSE_CPU,     /* own work saturated: completed work at a plateau, own time stretched */
    TB_CAUSE_FREEZE,  /* stall: requests inside, no completions, no calls answered */
    TB_CAUSE_SPEED,   /* the completed-work rate steps between levels: a CPU changing speed */
    TB_CAUSE_POOL,    /* a caller's connections to a tier all busy while that tier idles */
    TB_CAUSE_THREADS, /* a server's concurrency capped while work queues in front of it */
};
#define TB_CAUSE_COUNT 6
const char *tb_cause_name(enum tb_cause c);

/* What a tier (or server) is in the capture's bottlenecks. */
enum tb_diag_state {
    TB_DIAG_OK = 0,     /* never congested, or congested by nothing it does */
    TB_DIAG_DOWNSTREAM, /* congested, but only waiting on a tier it calls */
    TB_DIAG_ROOT,       /* the root of some of the front tier's congested time */
};
const char *tb_diag_state_name(enum tb_diag_state s);

struct tb_diag_opts {
    int64_t width_ns;        /* window (default 50 ms) */
    int64_t from_ns, to_ns;  /* INT64_MIN / INT64_MAX = everything stored */
    bool recompute;          /* ignore stored per-tier analyses */
    bool critical_path;      /* also link every request and build the critical path (the
                              * CLI does; it costs about as much again as the rest) */
};

/* One tier (server == 0) or one server, means over the windows analysed. */
struct tb_diag_row {
    uint32_t tier, server;
    uint64_t requests;
    uint32_t depth;          /* calls from the front tier (0 = front; UINT32_MAX unreachable) */
    double load_mean;        /* mean load */
    double self_load_mean;   /* mean of load - waiting */
    double wait_load_mean;   /* mean waiting on downstream calls */
    double own_load_mean;    /* mean work (completions x service time / w) */
    double stretch;          /* self / own over the front tier's congested windows (all
                              * windows when it has none): how much longer than their work
                              * requests stay in it by themselves; NAN without work */
    double n_star;           /* N* on load (the report's), NAN when undetermined */
    double n_star_self;      /* N* on self-load; NAN when undetermined */
    double congested_fraction;
    enum tb_diag_state state;
};

/* One caller server and callee tier. */
struct tb_diag_pool {
    uint32_t from_tier, from_server, to_tier;
    uint32_t connections;    /* most connections open at once from that server to the tier */
    uint32_t connections_seen; /* distinct connections seen in the range */
    uint32_t max_concurrent; /* most calls outstanding at once */
    double calls_mean;       /* mean calls outstanding in the front tier's congested windows
                              * (all windows when it has none): the wait-for edge's weight */
    bool pooled;             /* connections reused (a pool), not one per call */
    double full_fraction;    /* of the caller's congested windows: spent with every
                              * connection busy while the callee was not stretched */
    uint32_t recommended;    /* a pool size to try, 0 = no change advised */
    char reason[480];        /* why that size */
};

struct tb_diag_episode {
    int64_t start_ns, end_ns;
    uint32_t tier, server;   /* server 0 = the tier as a whole */
    enum tb_episode_kind kind;
    uint32_t root_tier, root_server; /* 0 = none found (cause none) */
    enum tb_cause cause;
};

struct tb_diag_verdict {
    uint32_t tier, server;   /* 0 / 0 with cause none */
    enum tb_cause cause;
    double share;            /* of the front tier's congested time held by this root */
    int64_t quota_period_ns; /* cause cpu from a CFS CPU quota: its period; 0 otherwise */
    char resource[160];      /* "cpu of 10.0.4.1:3306", "http-8080 → mysql connections" */
    char evidence[512];      /* one sentence */
};

struct tb_diagnosis {
    int64_t width_ns, from_ns, to_ns; /* the window grid: [from, to) */
    size_t nwin;
    uint32_t front;                   /* front tier, 0 when none */
    struct tb_diag_verdict verdict;
    struct tb_diag_row *tiers;        /* every tier with requests, front first, by depth */
    size_t ntiers;
    struct tb_diag_row *servers;      /* every server with requests, by tier order */
    size_t nservers;
    struct tb_diag_pool *pools;
    size_t npools;
    struct tb_diag_episode *episodes; /* by start, then tier */
    size_t nepisodes;
    size_t dismissed;                 /* the report's episodes without any stretched server
                                       * below them (no bottleneck), not listed */
    /* Per window, for plots and the CSV: self and waiting load of each tier
     * (tiers[i] at [i * nwin + k]), whether the front tier was congested,
     * and the root found then (server id, cause; 0 = none). */
    double *self, *wait;
    bool *front_congested;
    bool front_by_slowness;           /* the front tier had no congestion point (N*): its
                                       * congested windows are those it was slow in */
    uint32_t *root_server;
    uint8_t *root_cause;
    /* The critical path of the front tier's requests (critpath.h); have_cp
     * false when it could not be built (no front tier). */
    bool have_cp;
    struct tb_critpath cp;
};

/* Everything stored in the range. Returns 0, or TB_E_* with one line in err.
 * A capture with nothing to diagnose (one tier, no callers, no congestion)
 * is not an error: the verdict is `none` and its evidence says why. */
int tb_diagnose(struct tb_store *st, const struct tb_catalog *cat, const struct tb_diag_opts *o,
                struct tb_diagnosis *d, char *err, size_t errlen);
void tb_diagnosis_free(struct tb_diagnosis *d);

/* Computes what tb_diagnose reads from the requests for its default window
 * over everything — request counts, who calls whom, each tier's service
 * times and analyses, the layered load of every server and the calls of
 * every pool, per window — and stores it (table model_parts, name
 * "diagnose", stamped with the requests; the analyses as any report's), so
 * that tb_diagnose with those options reads a few aggregates instead of every
 * request. Called when a capture ends; costs one streamed diagnose. Nothing
 * is stored while a capture is running, into a read-only file, or with
 * TBNECK_DIAGNOSE_STORED=0. cat: the store's catalog, or NULL to load it
 * from st. Returns 0 or TB_E_* with one line in err. */
int tb_diagnose_store_inputs(struct tb_store *st, const struct tb_catalog *cat, char *err,
                             size_t errlen);

/* The diagnosis as the JSON object DESIGN.md fixes ("Interfaces"), for the
 * CLI and the dashboard's /api/diagnose alike. */
struct tb_buf;
void tb_diagnosis_json(struct tb_buf *b, const struct tb_catalog *cat,
                       const struct tb_diagnosis *d);

#endif
