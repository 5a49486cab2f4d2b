/* SPDX-License-Identifier: MIT */
/* svcfile.c — the text of a --service-times FILE: lines of a class
 * fingerprint and its service time. */
#include "analyze.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_service_file_parse(const char *text, size_t len, struct tb_service_line **out, size_t *n,
                          char *errbuf, size_t errlen)
{
    if ((!text && len) || !out || !n)
        return TB_E_INVAL;
    size_t nlines = 1;
    for (size_t i = 0; i < len; i++)
        nlines += text[i] == '\n';
    /* One allocation: the entries, then a copy of the text whose fingerprints
     * they point into. */
    size_t head = nlines * sizeof(struct tb_service_line);
    char *mem = malloc(head + len + 1);
    if (!mem)
        return TB_E_NOMEM;
    struct tb_service_line *lines = (struct tb_service_line *)(void *)mem;
    char *copy = mem + head;
    if (len)
        memcpy(copy, text, len);
    copy[len] = '\0';
    size_t cnt = 0;
    uint32_t lineno = 0;
    char *p = copy, *end = copy + len;
    while (p < end) {
        lineno++;
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        char *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r')
            le--;
        *le = '\0';
        char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0' || *q == '#') {
            p = next;
            continue;
        }
        char *tab = strrchr(p, '\t');
        if (!tab || tab == p) {
            if (errbuf && errlen)
                snprintf(errbuf, errlen, "line %u: expected CLASS<TAB>DURATION", lineno);
            free(mem);
            return TB_E_BADFMT;
        }
        *tab = '\0';
        const char *dur = tab + 1;
        while (*dur == ' ')
            dur++;
        char *de = tab + 1 + strlen(tab + 1);
        while (de > dur && de[-1] == ' ')
            *--de = '\0';
        int64_t ns;
        if (tb_parse_duration(dur, TB_NS_PER_MS, &ns) || ns <= 0) {
            if (errbuf && errlen)
                snprintf(errbuf, errlen, "line %u: bad duration \"%s\"", lineno, dur);
            free(mem);
            return TB_E_BADFMT;
        }
        lines[cnt].class_text = p;
        lines[cnt].service_ns = ns;
        lines[cnt].line = lineno;
        cnt++;
        p = next;
    }
    *out = lines;
    *n = cnt;
    return 0;
}

void tb_service_file_free(struct tb_service_line *lines, size_t n)
{
    TB_UNUSED(n);
    free(lines);
}
