/* SPDX-License-Identifier: MIT */
/* analyze.h — the analysis pipeline over stored requests: service times →
 * work units → windows → N* → episodes, stored back in SQLite and reused.
 * Shared by report, export windows, the web API and events. */
#ifndef TB_ANALYZE_H
#define TB_ANALYZE_H

#include "tb.h"
#include "catalog.h"
#include "store.h"
#include "stats.h"
#include "correlate.h"
#include "diagnose.h"
#include "critpath.h"

struct tb_analyze_opts {
    int64_t width_ns;          /* window width (default 50 ms) */
    int64_t from_ns, to_ns;    /* INT64_MIN / INT64_MAX = everything stored */
    uint32_t server;           /* 0 = the tier as a whole */
    const char *service_file;  /* --service-times FILE, or NULL */
    const char *calibrate;     /* --calibrate CAPTURE (pcap at low load), or NULL */
    bool recompute;            /* ignore stored results */
};

struct tb_analysis_result {
    struct tb_analysis a;
    struct tb_window *win;     /* windows of the analysed tier/server, in time order */
    size_t nwin;
    struct tb_episode *ep;
    size_t nep;
    struct tb_class_service *svc; /* per class (and period) */
    size_t nsvc;
    struct tb_level_span *spans;  /* when each throughput level held, in time order; the
                                   * level indices index a.levels (tb_levels_over_time) */
    size_t nspans;
    bool waits_downstream;        /* the tier's machines called other tiers (N* options) */
    double waits_slope;           /* with waits_downstream: the slope hint N* was given, units/s
                                   * per unit of load (tb_analysis_waits_slope); 0 = none */
    /* For a series that waits downstream: N* on its self-load (load minus
     * the time spent waiting on its calls, tb_diagnose), the congestion
     * point of its own resources; set by the caller that ran the diagnosis.
     * have_self false: not known. */
    bool have_self;
    double n_star_self;
};

/* Runs (or loads) the analysis of one tier. Returns 0, or a TB_E_* code with a
 * one-line message in errbuf. */
int tb_analyze_tier(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                    const struct tb_analyze_opts *o, struct tb_analysis_result *res, char *errbuf,
                    size_t errlen);
void tb_analysis_result_free(struct tb_analysis_result *res);
/* The tier and each of its servers (o->server must be 0): *total as
 * tb_analyze_tier gives it, *servers one result per server of the tier in
 * catalog order (malloc'd; free each with tb_analysis_result_free, then the
 * array). */
int tb_analyze_tier_servers(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                            const struct tb_analyze_opts *o, struct tb_analysis_result *total,
                            struct tb_analysis_result **servers, size_t *nservers, char *errbuf,
                            size_t errlen);

/* ---- the same, fed from a stream (tbneck diagnose) -------------------------------------
 * tb_analyze_tier_servers without holding the requests: every tier's requests
 * in the analysis' query range (tb_analyze_query_range) are fed in store
 * order (tb_store_each_request) twice: tb_tierfeed_add for each, then
 * tb_tierfeed_mid, then tb_tierfeed_add for each again, then
 * tb_tierfeed_finish. The results equal tb_analyze_tier_servers' for the same
 * options (the same estimator, accumulators and additions in the same order);
 * stored analyses are reused and new ones stored the same way. Memory: the
 * windows, the service-time reservoirs and the requests in flight. o->server,
 * service_file and calibrate must be unset (TB_E_INVAL). Errors: a TB_E_*
 * code and one line in errbuf (which must outlive the feed). */
struct tb_tierfeed;
int tb_tierfeed_new(struct tb_tierfeed **out, struct tb_store *st, const struct tb_catalog *cat,
                    uint32_t tier, const struct tb_analyze_opts *o, char *errbuf, size_t errlen);
int tb_tierfeed_add(struct tb_tierfeed *f, const struct tb_request *r);
/* Ends the first pass: service times, the window grid, stored rows. */
int tb_tierfeed_mid(struct tb_tierfeed *f);
/* After tb_tierfeed_mid: the service times (valid until finish or free) and
 * the tier's request count. */
void tb_tierfeed_services(const struct tb_tierfeed *f, const struct tb_class_service **svc,
                          size_t *nsvc);
uint64_t tb_tierfeed_requests(const struct tb_tierfeed *f);
/* After tb_tierfeed_mid or _resume: the lives by arrival concurrency of the
 * tier (server 0) or one of its servers (the knee test's stretch rule);
 * NULL when unknown. Valid until free. */
const struct tb_stretch *tb_tierfeed_lives(const struct tb_tierfeed *f, uint32_t server);
int tb_tierfeed_finish(struct tb_tierfeed *f, struct tb_analysis_result *total,
                       struct tb_analysis_result **servers, size_t *nservers);
void tb_tierfeed_free(struct tb_tierfeed *f);

/* What a feed's first pass learned — enough to skip that pass next time
 * (diagnose's stored inputs, docs/diagnose.md "Speed"): the request count of
 * each row (the tier, then its servers in catalog order), the tier's span,
 * how many calls its machines made, the service times and the work unit. */
struct tb_tierfeed_sum {
    uint64_t *count;             /* nrows entries */
    size_t nrows;
    int64_t lo, hi;              /* first arrival, last departure (INT64_MAX/MIN: none) */
    uint64_t ndown;
    struct tb_class_service *svc;
    size_t nsvc;
    int64_t wu;
    const struct tb_stretch *lives; /* nrows entries (the knee test's stretch rule), or NULL */
};
/* After tb_tierfeed_mid: the summary, pointing into f (valid until finish or
 * free). */
void tb_tierfeed_summary(const struct tb_tierfeed *f, struct tb_tierfeed_sum *s);
/* In place of the first pass and tb_tierfeed_mid on a new feed: takes the
 * summary (copied) of an earlier feed over the same requests and options.
 * Returns 0 when every row's analysis is stored, so that tb_tierfeed_finish
 * follows with no second pass; TB_E_NOTFOUND when one is not (or the summary
 * does not fit the catalog): the feed is then of no use, free it. */
int tb_tierfeed_resume(struct tb_tierfeed *f, const struct tb_tierfeed_sum *s);

/* ---- --window auto ----------------------------------------------------------
 * The shortest window at which the main-sequence curve is stable (the method
 * paper's future work): widths 10, 20, 50, 100, 200, 500 ms and 1 s are
 * analysed in turn (tb_analyze_tier with o's range, server and options; their
 * results are stored like any other), and the first whose N* has a 90%
 * interval within ±10% (tb_nstar_interval) is chosen. When none is that
 * stable, the one with the narrowest interval; when no width shows a knee,
 * 50 ms. Widths that would make too many windows are skipped. */
struct tb_window_try {
    int64_t width_ns;
    double n_star; /* the threshold at that width; NAN: no knee */
    double half;   /* its interval's half-width (NAN: no knee; INFINITY: unbounded) */
};
struct tb_window_choice {
    int64_t width_ns;
    struct tb_window_try tried[8];
    uint32_t ntried;
    char reason[512]; /* one line: the choice and why, with what the shorter widths gave */
};
int tb_analyze_window_auto(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                           const struct tb_analyze_opts *o, struct tb_window_choice *c,
                           char *errbuf, size_t errlen);

/* ---- the report: one tier, each of its servers, cross-tier attribution ---- */

/* How well one tier's load explains the front tier's response time: Pearson
 * correlation over the windows of the report, per window width. */
struct tb_tier_corr {
    uint32_t tier;
    double r;            /* NAN when undefined (constant series, no windows) */
    uint64_t requests;   /* requests of that tier in the range */
};

struct tb_report {
    uint32_t tier;
    int64_t width_ns, from_ns, to_ns;
    struct tb_analysis_result total;    /* the tier as a whole, or the one --server */
    struct tb_analysis_result *servers; /* each server of the tier (none with --server) */
    size_t nservers;
    uint32_t front_tier;                /* the tier users talk to; 0 when unknown */
    struct tb_window *front_win;        /* its windows over the same range (response times) */
    size_t nfront;
    struct tb_tier_corr *corr;          /* every tier with requests, strongest first */
    size_t ncorr;
    /* The root cause over the same range (tb_diagnose), when the caller ran
     * it: the formats print it instead of the correlation's "explains". */
    bool have_verdict;
    struct tb_diag_verdict verdict;
    char window_reason[512];            /* --window auto: the choice and why (else empty) */
    /* Per-class response-time profile of the tier (or the one server): the
     * requests that completed in the range (tb_class_profile). */
    struct tb_class_profile *profile;
    size_t nprofile;
    int64_t profile_total_ns;
    /* The front requests' critical path over the same range (critpath.h),
     * when the caller built it (the diagnosis does); freed with the report. */
    bool have_cp;
    struct tb_critpath cp;
};

/* The span of requests an analysis of [from_ns, to_ns) reads: the whole
 * windows of width_ns that the range touches, so that a window's load does not
 * depend on where --from/--to cut it (windows are stored by start and shared
 * by every analysis of the width). INT64_MIN/INT64_MAX stay unbounded. */
void tb_analyze_query_range(int64_t from_ns, int64_t to_ns, int64_t width_ns, int64_t *qf,
                            int64_t *qt);

/* Runs the analysis of the tier (or o->server), of each of its servers, and
 * the cross-tier correlation with the front tier's response time. */
int tb_report_build(struct tb_store *st, const struct tb_catalog *cat, uint32_t tier,
                    const struct tb_analyze_opts *o, struct tb_report *rep, char *errbuf,
                    size_t errlen);
void tb_report_free(struct tb_report *rep);

/* ---- --service-times FILE ---------------------------------------------------
 * Lines "CLASS_FINGERPRINT<TAB>DURATION" (the last tab separates; duration as
 * "30ms", "250us", a bare number is milliseconds); blank lines and lines whose
 * first non-blank character is '#' are ignored; CRLF accepted. The text is
 * given in memory (the caller reads the file). *out is malloc'd; each entry's
 * class points into one allocation freed with tb_service_file_free(). On a
 * malformed line: TB_E_BADFMT and "line N: what" in errbuf. */
struct tb_service_line {
    const char *class_text;
    int64_t service_ns;
    uint32_t line;
};
int tb_service_file_parse(const char *text, size_t len, struct tb_service_line **out, size_t *n,
                          char *errbuf, size_t errlen);
void tb_service_file_free(struct tb_service_line *lines, size_t n);

/* The addresses a tier's servers call downstream from, for the service-time
 * estimate: each server's own IP (its machine) and the tier's configured
 * hosts. *out is malloc'd (possibly with *n = 0). */
int tb_analysis_svc_hosts(const struct tb_catalog *cat, uint32_t tier,
                          struct tb_svc_host **out, size_t *n);
/* Whether request r (of another tier) was sent from one of those addresses:
 * a call made downstream, whose time is subtracted from the caller's. */
bool tb_analysis_called_from(const struct tb_request *r, const struct tb_svc_host *hosts,
                             size_t n);
/* The slope of the linear part of a tier that waits on its calls, units/s
 * per unit of load, for tb_nstar_opts.slope_hint: a request alone in the tier
 * completes its S/u units over its whole life S + W (S its service time, W
 * the time in its calls), so the slope is (1/u)·S̄/(S̄ + W̄) over the tier's
 * requests: S̄ from svc (weighted by their requests), W̄ = call_ns (Σ lives
 * of the calls its machines made) / requests. 0 when unknown. The report,
 * the streamed diagnosis and the live stream all take it from here. */
double tb_analysis_waits_slope(const struct tb_class_service *svc, size_t nsvc, int64_t wu,
                               double call_ns, uint64_t requests);
/* A call's life for call_ns: departure - arrival, 0 when not positive. */
double tb_analysis_call_life(const struct tb_request *r);
/* Calls in flight per window of a tier (tb_window.calls_busy, which the
 * freeze rule reads: a caller whose requests wait on a paused callee is
 * not itself stalled). w: rows as tb_winacc_finish gives them (the tier,
 * then servers[0..nservers)), per_row windows each; down the calls the
 * tier's machines sent (tb_analysis_called_from). A call counts for the
 * server whose address is its client's; one sent from another of the
 * tier's hosts (a hosts= entry) for every server of the tier (which of
 * them sent it cannot be told: waiting is then over-, never under-counted);
 * the tier row counts them all. */
int tb_analysis_fill_calls(const struct tb_catalog *cat, const struct tb_request *down,
                           size_t ndown, const uint32_t *servers, size_t nservers,
                           struct tb_window *w, size_t per_row);

#endif
