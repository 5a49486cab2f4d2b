/* SPDX-License-Identifier: MIT */
/* profile_fmt.c — the report's per-class response-time profile (the first
 * table pt-query-digest prints) as text, JSON and CSV. */
#include <inttypes.h>
#include <stdio.h>

#include "json.h"
#include "report_fmt.h"
#include "report_util.h"

static const char *cls(const struct tb_catalog *cat, uint32_t id)
{
    return tb_catalog_class_text(cat, id);
}

/* A duration at 3 significant digits or so: "12.3ms", "840us", "1.25s". */
static const char *dur(double ns, char *buf, size_t len)
{
    double a = ns < 0 ? -ns : ns;
    if (a >= 1e9)
        snprintf(buf, len, "%.3gs", ns / 1e9);
    else if (a >= 1e6)
        snprintf(buf, len, "%.3gms", ns / 1e6);
    else if (a >= 1e3)
        snprintf(buf, len, "%.3gus", ns / 1e3);
    else
        snprintf(buf, len, "%.0fns", ns);
    return buf;
}

void tb_profile_write_text(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                           size_t limit)
{
    uint64_t calls = 0;
    for (size_t i = 0; i < r->nprofile; i++)
        calls += r->profile[i].count;
    char b[7][32];
    fprintf(f, "\nprofile: %" PRIu64 " requests completed in the range, %s of response time, "
               "%zu class%s",
            calls, dur((double)r->profile_total_ns, b[0], 32), r->nprofile,
            r->nprofile == 1 ? "" : "es");
    if (limit && r->nprofile > limit)
        fprintf(f, " (the %zu with most time; --profile lists all)", limit);
    fputs("\n", f);
    if (!r->nprofile)
        return;
    fprintf(f, "  %4s  %-40s %8s %9s %6s %8s %8s %8s %8s %8s\n", "rank", "class", "count",
            "time", "share", "mean", "p50", "p95", "p99", "max");
    for (size_t i = 0; i < r->nprofile && (!limit || i < limit); i++) {
        const struct tb_class_profile *p = &r->profile[i];
        fprintf(f, "  %4zu  %-40.40s %8" PRIu64 " %9s %5.1f%% %8s %8s %8s %8s %8s\n", i + 1,
                cls(cat, p->class_id), p->count, dur((double)p->total_ns, b[0], 32),
                100.0 * p->share, dur(p->mean_ns, b[1], 32), dur((double)p->p50_ns, b[2], 32),
                dur((double)p->p95_ns, b[3], 32), dur((double)p->p99_ns, b[4], 32),
                dur((double)p->max_ns, b[5], 32));
    }
}

void tb_profile_write_json(FILE *f, const struct tb_report *r, const struct tb_catalog *cat)
{
    uint64_t calls = 0;
    for (size_t i = 0; i < r->nprofile; i++)
        calls += r->profile[i].count;
    fprintf(f, "{\"requests\":%" PRIu64 ",\"total_ns\":%" PRId64 ",\"classes\":[", calls,
            r->profile_total_ns);
    for (size_t i = 0; i < r->nprofile; i++) {
        const struct tb_class_profile *p = &r->profile[i];
        fprintf(f, "%s{\"rank\":%zu,\"class\":", i ? "," : "", i + 1);
        tb_json_str(f, cls(cat, p->class_id));
        fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRId64 ",\"share\":", p->count,
                p->total_ns);
        tb_json_num(f, p->share);
        fputs(",\"mean_ns\":", f);
        tb_json_num(f, p->mean_ns);
        fprintf(f, ",\"p50_ns\":%" PRId64 ",\"p95_ns\":%" PRId64 ",\"p99_ns\":%" PRId64
                   ",\"max_ns\":%" PRId64 "}",
                p->p50_ns, p->p95_ns, p->p99_ns, p->max_ns);
    }
    fputs("]}", f);
}

int tb_profile_write_csv(FILE *f, const struct tb_report *r, const struct tb_catalog *cat,
                         const char *tier, const char *server)
{
    fputs(TB_PROFILE_CSV_HEADER "\n", f);
    for (size_t i = 0; i < r->nprofile; i++) {
        const struct tb_class_profile *p = &r->profile[i];
        tb_csv_field(f, tier);
        fputc(',', f);
        tb_csv_field(f, server);
        fprintf(f, ",%zu,", i + 1);
        tb_csv_field(f, cls(cat, p->class_id));
        char d[2][40];
        fprintf(f, ",%" PRIu64 ",%" PRId64 ",%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                   "\n",
                p->count, p->total_ns, tb_fmt_double(p->share, d[0], 40),
                tb_fmt_double(p->mean_ns, d[1], 40), p->p50_ns, p->p95_ns, p->p99_ns, p->max_ns);
    }
    return ferror(f) ? TB_E_IO : 0;
}
