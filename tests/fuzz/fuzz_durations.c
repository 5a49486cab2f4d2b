/* SPDX-License-Identifier: MIT */
/* fuzz_durations.c — libFuzzer harness for the duration, window and time
 * parsers (common/tb.c) and --max-memory's size parser (cli): the input is
 * an argument as a user types it. Promises checked: a duration is never
 * negative; a window lies in 1 ms..1 h; "+D" is the base plus the duration D
 * (or refused when it would overflow); formatting a parsed duration gives
 * text that parses back to within its printed precision; a size is refused
 * or fits in size_t. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[128];
    if (size >= sizeof s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t d, w, t;
    if (tb_parse_duration(s, TB_NS_PER_MS, &d) == 0) {
        if (d < 0)
            abort();
    }
    /* Near the top of the range six printed digits may round past it. */
    if (tb_parse_duration(s, TB_NS_PER_MS, &d) == 0 && d < 9000000000000000000LL) {
        char f[64];
        int64_t back;
        tb_fmt_duration(d, f, sizeof f);
        if (tb_parse_duration(f, TB_NS_PER_MS, &back) != 0)
            abort(); /* what we print, we read */
        int64_t diff = back > d ? back - d : d - back;
        if (diff > d / 100 + 1000)
            abort(); /* within the printed precision (3 significant digits) */
    }
    if (tb_parse_window(s, &w) == 0 && (w < TB_WINDOW_MIN_NS || w > TB_WINDOW_MAX_NS))
        abort();
    const int64_t base = 1700000000LL * TB_NS_PER_SEC;
    if (tb_parse_time(s, base, &t) == 0 && s[0] == '+') {
        int64_t off;
        if (tb_parse_duration(s + 1, TB_NS_PER_SEC, &off) != 0 || t != base + off)
            abort();
    }
    size_t m;
    if (tb_parse_mem_size(s, &m) == 0 && s[0] == '0' && m != 0 && strspn(s, "0") == size)
        abort();
    return 0;
}
