/* SPDX-License-Identifier: MIT */
/* whatif.h — forecast of the front tier's response time and throughput for
 * the same workload with one tier changed: its servers' CPUs faster, more
 * cores, or a larger connection pool (docs/whatif.md has the model). */
#ifndef TB_WHATIF_H
#define TB_WHATIF_H

#include "tb.h"
#include "catalog.h"
#include "store.h"

enum tb_whatif_change { TB_WHATIF_SPEEDUP = 0, TB_WHATIF_CORES = 1, TB_WHATIF_POOL = 2 };

struct tb_whatif_opts {
    uint32_t tier;    /* the tier changed (for a pool: the tier that holds it) */
    uint32_t server;  /* 0 = every server of the tier */
    enum tb_whatif_change change;
    double value;     /* speedup factor (> 0), cores (>= 1), pool connections (>= 1) */
};

struct tb_whatif_stats {
    double rt_mean_ns, rt_p50_ns, rt_p95_ns, rt_p99_ns;
    double throughput; /* front requests per second */
};

struct tb_whatif_result {
    uint32_t front_tier;
    bool closed;           /* closed model (users with think time) or open */
    char why[256];         /* one line: which model and why */
    struct tb_whatif_stats baseline; /* measured */
    struct tb_whatif_stats forecast;
    /* What the model rests on, for the text output. */
    double think_ns;       /* closed: mean think time inferred */
    double users;          /* closed: mean population (Little's law) */
    double service_ns;     /* the changed servers' service time per request (estimate) */
    double cores;          /* their cores (estimate), or the pool's connections */
    double visits;         /* requests at the changed tier per front request */
    /* Linking (link.h): downstream requests, linked, exact, ambiguous. */
    uint64_t children, linked, exact, ambiguous;
    bool stored_inputs;    /* the model's inputs were read from the store */
};

/* The inputs the model takes from the requests (linked trees, per-period
 * sums, per front request its time per station) are read from the store when
 * stored for the requests as they are now; else they are computed (every
 * request read and linked) and stored, with each downstream request's link
 * in table links, unless a capture is running or the file is read-only.
 * TBNECK_WHATIF_STORED=0 in the environment neither reads nor stores them.
 * TB_E_INVAL with one line in err for a request the data cannot answer (a
 * tier no other tier calls — the front tier too —, a pool on a tier that
 * holds none); TB_E_NOTFOUND when there are no requests. */
int tb_whatif(struct tb_store *st, const struct tb_catalog *cat, const struct tb_whatif_opts *o,
              struct tb_whatif_result *r, char *err, size_t errlen);

/* Computes and stores the inputs tb_whatif would compute on its first run
 * (every request read and linked, the trees, the per-period sums; the links
 * in table links), unless they are stored and current already, so that a
 * later whatif reads them: `capture --whatif-inputs` calls it once the
 * capture is finished. *computed says whether it computed. Nothing is done
 * (0) while a capture is running or with TBNECK_WHATIF_STORED=0;
 * TB_E_NOTFOUND (a line in err) when there are no requests or no front tier;
 * other errors as tb_whatif. A store that fails (read-only file, full disk)
 * is a warning, as in tb_whatif. */
int tb_whatif_prepare(struct tb_store *st, const struct tb_catalog *cat, bool *computed,
                      char *err, size_t errlen);

/* Whether table links holds the links of the requests as stored now: written
 * by whatif with its inputs, whose stamp and version still match (the check
 * tb_whatif makes before reading them). False when TBNECK_WHATIF_STORED=0,
 * as whatif then neither reads nor stores. `export requests` reads them
 * instead of linking again when true. */
int tb_whatif_links_current(struct tb_store *st, bool *current);

#endif
