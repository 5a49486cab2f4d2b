/* SPDX-License-Identifier: MIT */
/* stretch.h — how much longer a server's requests live when they arrive into
 * others in flight: a histogram of lives by arrival concurrency, and the
 * knee test's per-request rule that reads it (docs/report.md "The
 * per-request stretch rule (v0.9)"). Pure computation. */
#ifndef TB_STRETCH_H
#define TB_STRETCH_H

#include "tb.h"
#include "request.h"

/* Arrival-concurrency buckets: the number of other requests of the same
 * server in flight when a request arrived, m, falls in bucket b when
 * TB_STRETCH_FROM[b] <= m < TB_STRETCH_FROM[b + 1] (the last is 64 and more). */
#define TB_STRETCH_NCONC 13
extern const uint32_t TB_STRETCH_FROM[TB_STRETCH_NCONC];
/* Life bins: bin 0 holds lives under 1 µs, bin i >= 1 those in
 * [2^((i-1)/16), 2^(i/16)) µs, the last everything from about 100 s up. */
#define TB_STRETCH_BINS_PER_OCTAVE 16
#define TB_STRETCH_NLIFE 434

/* Plain bytes of fixed size: summed by tb_stretch_merge, stored as they are. */
struct tb_stretch {
    uint32_t servers; /* servers with at least one request in it */
    uint32_t pad;
    uint32_t life[TB_STRETCH_NCONC][TB_STRETCH_NLIFE];
};

/* dst += src (counts and servers). */
void tb_stretch_merge(struct tb_stretch *dst, const struct tb_stretch *src);
/* Requests counted in the buckets whose lower bound lies in [from, to] (m:
 * others in flight at arrival), any life. */
uint64_t tb_stretch_count(const struct tb_stretch *s, uint32_t from, uint32_t to);
/* The q-quantile (0 < q < 1) of the lives, in ns, of the requests whose
 * bucket's lower bound lies in [from, to] (geometric interpolation inside a
 * bin, so within 1/16 octave of the exact value); NAN when there are none. */
double tb_stretch_quantile(const struct tb_stretch *s, uint32_t from, uint32_t to, double q);
/* The bin a life (ns) is counted in, and the bounds [lo, hi) of a bin in ns
 * (for tests and tools). */
uint32_t tb_stretch_bin(int64_t life_ns);
void tb_stretch_bin_bounds(uint32_t bin, double *lo_ns, double *hi_ns);

/* ---- the rule ---------------------------------------------------------------
 * A knee candidate K of a series whose requests were counted in s is refused
 * when requests arriving into about 2·K/servers others in flight or more (from
 * the lower bound of the bucket holding it rounded to the nearest integer, at
 * least 1) do not live clearly
 * longer than those arriving alone: the one-sided 95% upper bound of the
 * ratio of their median lives (order-statistic bounds of both medians) is
 * under TB_STRETCH_MAX_RATIO. Judged only when both groups hold at least
 * TB_STRETCH_MIN_REQUESTS requests: with fewer the knee stands (never refuse
 * on no evidence). Why these numbers: docs/report.md. */
#define TB_STRETCH_MIN_REQUESTS 50
#define TB_STRETCH_MAX_RATIO 1.5
/* The baseline on a busy many-core server (docs/report.md "A baseline on a
 * busy server"): when the lone group does not refuse and holds fewer than
 * TB_STRETCH_BASE_REQUESTS requests (too few for a tight bound: 64-100 on a
 * 16-core database at 7 in flight), and the crowded group starts at 8 or
 * more, the baseline becomes every request arriving into fewer than from/4
 * others (about half the knee's per-server share: no contention), judged
 * when it holds TB_STRETCH_MIN_REQUESTS. A verdict m = 0 already reaches
 * (refused, or kept from 500 lone requests) is never revisited. */
#define TB_STRETCH_BASE_REQUESTS 500
struct tb_stretch_verdict {
    uint32_t from;           /* the crowded group: m >= from */
    uint64_t alone, crowded; /* requests in each group */
    double ratio;            /* median life crowded / alone (NAN when a group is empty) */
    double ucb;              /* its upper bound (NAN when not judged) */
    bool judged;             /* both groups large enough */
    bool flat;               /* judged and ucb < TB_STRETCH_MAX_RATIO: no contention */
    uint32_t base_to;        /* the baseline ("alone") group: m <= base_to (0: alone) */
};
void tb_stretch_judge(const struct tb_stretch *s, double knee, struct tb_stretch_verdict *v);

/* ---- the accumulator ---------------------------------------------------------
 * Fed a tier's requests in arrival order (ties in any order), each with its
 * server: per server, the departures of its requests in flight (a sorted
 * array and a heap, stretch.c) give the count at each arrival (a departure at
 * the arrival instant has left). Requests without a life (departure before
 * arrival) are skipped. tb_stretchacc_new also builds, once per process, the
 * tables tb_stretch_bin reads. */
struct tb_stretchacc;
int tb_stretchacc_new(struct tb_stretchacc **out);
int tb_stretchacc_add(struct tb_stretchacc *a, const struct tb_request *r);
/* The histogram of one server id (NULL when it had no request), valid until
 * the next add or free. */
const struct tb_stretch *tb_stretchacc_server(const struct tb_stretchacc *a, uint32_t server);
/* The sum over every server, into *out. */
void tb_stretchacc_total(const struct tb_stretchacc *a, struct tb_stretch *out);
void tb_stretchacc_free(struct tb_stretchacc *a);

#endif
