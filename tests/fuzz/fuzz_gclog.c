/* SPDX-License-Identifier: MIT */
/* fuzz_gclog.c — libFuzzer harness for the GC log parser (events/gclog.c):
 * the input is a log, parsed line by line and again as a whole file (through
 * fmemopen). Promises checked: a pause ends no earlier than it starts and
 * has kind "gc"; a malformed line says why; the file parser's counts add up
 * to the lines read and give as many pauses as the line parser found. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    uint64_t pauses = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct tb_event ev;
        const char *why = NULL;
        memset(&ev, 0, sizeof ev);
        int rc = tb_gc_parse_line(p, len, &ev, &why);
        if (rc == TB_GC_PAUSE) {
            if (ev.end_ns < ev.start_ns || strcmp(ev.kind, "gc") != 0)
                abort();
            pauses++;
        } else if (rc == TB_E_BADFMT) {
            if (!why || !why[0])
                abort();
        } else if (rc != TB_GC_OTHER) {
            abort();
        }
        p += len + (nl != NULL);
    }
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    struct tb_event *ev = NULL;
    size_t n = 0;
    struct tb_gc_summary sum;
    memset(&sum, 0, sizeof sum);
    int rc = tb_gc_parse_file(f, "fuzz", &ev, &n, &sum);
    fclose(f);
    if (rc == 0) {
        /* A NUL inside a line ends what the file reader sees of it; the line
         * parser was given the bytes past it too, so compare only NUL-free
         * inputs. */
        if (!memchr(data, 0, size) && n != pauses)
            abort();
        if (sum.pauses != n || sum.pauses + sum.other + sum.bad != sum.lines)
            abort();
        for (size_t i = 0; i < n; i++)
            if (ev[i].end_ns < ev[i].start_ns || strcmp(ev[i].host, "fuzz") != 0)
                abort();
    }
    free(ev);
    return 0;
}
