/* SPDX-License-Identifier: MIT */
/* jsonl.c — JSON lines of windows, episodes, analyses and health (jsonl.h),
 * through the one JSON encoder (common/json.c). */
#include "jsonl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "ch.h"
#include "json.h"

const char *tb_jsonl_iso(int64_t ns, char *buf, size_t len)
{
    return tb_fmt_iso(ns, buf, len);
}

static void head(FILE *f, const char *event, const char *tier, const char *server)
{
    fprintf(f, "{\"event\":\"%s\",\"tier\":", event);
    tb_json_str(f, tier);
    fputs(",\"server\":", f);
    tb_json_str(f, server);
}

static void time_pair(FILE *f, const char *name, int64_t ns)
{
    char iso[64];
    fprintf(f, ",\"%s_ns\":%" PRId64 ",\"%s\":\"%s\"", name, ns, name,
            tb_jsonl_iso(ns, iso, sizeof iso));
}

static void num(FILE *f, const char *name, double v)
{
    fprintf(f, ",\"%s\":", name);
    tb_json_num(f, v);
}

void tb_jsonl_window(FILE *f, const char *tier, const char *server, const struct tb_window *w,
                     int congested)
{
    head(f, "window", tier, server);
    time_pair(f, "start", w->start_ns);
    fprintf(f, ",\"width_ns\":%" PRId64, w->width_ns);
    num(f, "load", w->load);
    fprintf(f, ",\"completions\":%u", w->completions);
    num(f, "throughput", w->throughput);
    num(f, "work_units", w->work_units);
    num(f, "norm_throughput", w->norm_throughput);
    /* No completion: no response time (null), not zero. */
    num(f, "rt_mean_ns", w->completions ? w->rt_mean_ns : NAN);
    num(f, "rt_p95_ns", w->completions ? w->rt_p95_ns : NAN);
    fprintf(f, ",\"congested\":%s}\n", congested < 0 ? "null" : congested ? "true" : "false");
}

void tb_jsonl_episode(FILE *f, const char *tier, const char *server, const struct tb_episode *ep,
                      bool ongoing)
{
    head(f, "episode", tier, server);
    time_pair(f, "start", ep->start_ns);
    time_pair(f, "end", ep->end_ns);
    fprintf(f, ",\"duration_ns\":%" PRId64, ep->end_ns - ep->start_ns);
    num(f, "peak_load", ep->peak_load);
    num(f, "mean_load", ep->mean_load);
    num(f, "throughput", ep->throughput);
    fprintf(f, ",\"kind\":\"%s\",\"ongoing\":%s}\n",
            ep->kind == TB_EP_FREEZE ? "freeze" : "saturated", ongoing ? "true" : "false");
}

void tb_jsonl_analysis(FILE *f, const char *tier, const char *server, const struct tb_analysis *a,
                       double threshold, const struct tb_stream_rescale *rs)
{
    head(f, "analysis", tier, server);
    fprintf(f, ",\"width_ns\":%" PRId64, a->width_ns);
    if (a->from_ns != INT64_MIN && a->to_ns != INT64_MAX) {
        time_pair(f, "from", a->from_ns);
        time_pair(f, "to", a->to_ns);
    }
    fprintf(f, ",\"requests\":%" PRIu64, a->requests);
    num(f, "n_star", a->n_star);
    num(f, "n_star_fit", a->n_star_fit);
    num(f, "threshold", threshold);
    num(f, "tp_max", a->tp_max);
    fprintf(f, ",\"work_unit_ns\":%" PRId64, a->work_unit_ns);
    if (rs) {
        fputs(",\"rescale\":{\"factor\":", f);
        tb_json_num(f, rs->factor);
        time_pair(f, "from", rs->from_ns);
        fputs("}}\n", f);
    } else {
        fputs(",\"rescale\":null}\n", f);
    }
}

void tb_jsonl_health(FILE *f, int64_t ts_ns, uint64_t packets, uint64_t kernel_drops,
                     uint64_t if_drops)
{
    fputs("{\"event\":\"health\"", f);
    time_pair(f, "time", ts_ns);
    fprintf(f, ",\"packets\":%" PRIu64 ",\"kernel_drops\":%" PRIu64 ",\"if_drops\":%" PRIu64 "}\n",
            packets, kernel_drops, if_drops);
}

void tb_jsonl_store(FILE *f, int64_t ts_ns, const struct tb_ch_live_stats *s)
{
    fputs("{\"event\":\"store\"", f);
    time_pair(f, "time", ts_ns);
    fprintf(f,
            ",\"up\":%s,\"stored_requests\":%" PRIu64 ",\"stored_connections\":%" PRIu64
            ",\"pending_requests\":%" PRIu64 ",\"spool_bytes\":%" PRIu64
            ",\"spool_files\":%" PRIu64 ",\"dropped_requests\":%" PRIu64
            ",\"dropped_connections\":%" PRIu64 "}\n",
            s->down ? "false" : "true", s->stored_requests, s->stored_conns, s->pending_requests,
            s->spool_bytes, s->spool_files, s->dropped_requests, s->dropped_conns);
}

int tb_jsonl_result(FILE *f, const char *tier, const char *server,
                    const struct tb_analysis_result *r)
{
    struct tb_congestion rule;
    tb_congestion_from_analysis(&rule, &r->a, r->win, r->nwin);
    tb_jsonl_analysis(f, tier, server, &r->a, rule.threshold, NULL);
    /* In time order, as a live capture writes them: an episode right after
     * the window that ends it. */
    size_t e = 0;
    for (size_t i = 0; i < r->nwin; i++) {
        /* Congested as /api/scatter and the live stream mark it: load >= the
         * threshold (a stall is in its episode without being congested). */
        tb_jsonl_window(f, tier, server, &r->win[i],
                        tb_congestion_congested(&rule, r->win[i].load));
        int64_t end = r->win[i].start_ns + r->win[i].width_ns;
        for (; e < r->nep && r->ep[e].end_ns <= end; e++)
            tb_jsonl_episode(f, tier, server, &r->ep[e], false);
    }
    for (; e < r->nep; e++)
        tb_jsonl_episode(f, tier, server, &r->ep[e], false);
    return ferror(f) ? TB_E_IO : 0;
}
