/* SPDX-License-Identifier: MIT */
/* tiers.c — the --tiers file and the naming of auto-discovered tiers.
 *
 * Format, one tier per line, '#' starts a comment, fields separated by blanks:
 *
 *     NAME PROTO SERVER[,SERVER...] [hosts=HOST[,HOST...]]
 *
 * SERVER is a.b.c.d:port, [v6]:port or *:port; PROTO is auto or a parser name
 * (tb_protos: http, mysql, ajp, fastcgi, tls, generic, ...). Every error names
 * the file and line. */
#include "tiers.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "util.h"

#define MAX_FIELDS 8
#define MAX_ENTRIES 4096 /* servers or hosts per tier: a config, not a capture */

static int fail(char *errbuf, size_t errlen, const char *name, unsigned line, const char *fmt,
                ...) TB_PRINTF(5, 6);
static int fail(char *errbuf, size_t errlen, const char *name, unsigned line, const char *fmt,
                ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(errbuf, errlen, "%s:%u: %s", name, line, msg);
    return TB_E_BADFMT;
}

void tb_tiers_free(struct tb_tiers *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->tiers[i].servers);
        free(t->tiers[i].hosts);
    }
    free(t->tiers);
    free(t);
}

/* Splits a comma list into addresses. `server` requires a port. Returns 0, or
 * TB_E_BADFMT with *bad pointing at the offending item (NUL-terminated in
 * `list`, which is modified). */
static int parse_list(char *list, bool server, struct tb_addr **out, size_t *n, char **bad)
{
    size_t cap = 0;
    char *save = NULL;
    *bad = list;
    if (!*list)
        return TB_E_BADFMT;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        struct tb_addr a;
        *bad = item;
        if (tb_addr_parse(item, &a))
            return TB_E_BADFMT;
        if (server ? a.port == 0 : (a.port != 0 || a.family == 0))
            return TB_E_BADFMT;
        if (*n == MAX_ENTRIES)
            return TB_E_FULL;
        if (tb_grow(out, &cap, *n + 1, sizeof **out))
            return TB_E_NOMEM;
        (*out)[(*n)++] = a;
    }
    return 0;
}

static bool same_server(const struct tb_addr *a, const struct tb_addr *b)
{
    return a->family == b->family && tb_addr_eq(a, b);
}

static int parse_line(struct tb_tiers *t, char *line, const char *name, unsigned ln,
                      char *errbuf, size_t errlen)
{
    char *f[MAX_FIELDS];
    size_t nf = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t\r\v\f", &save); w; w = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (nf == MAX_FIELDS)
            return fail(errbuf, errlen, name, ln, "too many fields");
        f[nf++] = w;
    }
    if (nf == 0)
        return 0;
    if (nf < 3)
        return fail(errbuf, errlen, name, ln,
                    "expected 'NAME PROTO SERVER[,SERVER...] [hosts=HOST,...]'");
    if (nf > 4)
        return fail(errbuf, errlen, name, ln, "unexpected field '%s'", f[4]);
    if (strlen(f[0]) >= TB_NAME_MAX)
        return fail(errbuf, errlen, name, ln, "tier name too long (at most %d bytes)",
                    TB_NAME_MAX - 1);
    for (const char *c = f[0]; *c; c++)
        if (*c == ',' || *c == '=' || (unsigned char)*c < 0x21)
            return fail(errbuf, errlen, name, ln, "invalid tier name '%s'", f[0]);
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->tiers[i].name, f[0]))
            return fail(errbuf, errlen, name, ln, "tier '%s' defined twice", f[0]);
    const struct tb_proto *proto = NULL;
    if (strcmp(f[1], "auto") != 0 && !(proto = tb_proto_find(f[1])))
        return fail(errbuf, errlen, name, ln, "unknown protocol '%s'", f[1]);

    struct tb_tier_cfg *na = realloc(t->tiers, (t->n + 1) * sizeof *na);
    if (!na)
        return TB_E_NOMEM;
    t->tiers = na;
    struct tb_tier_cfg *c = &t->tiers[t->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", f[0]);
    c->proto = proto;

    char *bad;
    int rc = parse_list(f[2], true, &c->servers, &c->nservers, &bad);
    if (rc == TB_E_NOMEM)
        return rc;
    if (rc == TB_E_FULL)
        return fail(errbuf, errlen, name, ln, "more than %d servers", MAX_ENTRIES);
    if (rc)
        return fail(errbuf, errlen, name, ln,
                    "bad server '%s' (want a.b.c.d:port, [v6]:port or *:port)", bad);
    if (nf == 4) {
        if (strncmp(f[3], "hosts=", 6) != 0)
            return fail(errbuf, errlen, name, ln, "unexpected field '%s' (want hosts=...)", f[3]);
        rc = parse_list(f[3] + 6, false, &c->hosts, &c->nhosts, &bad);
        if (rc == TB_E_NOMEM)
            return rc;
        if (rc == TB_E_FULL)
            return fail(errbuf, errlen, name, ln, "more than %d hosts", MAX_ENTRIES);
        if (rc)
            return fail(errbuf, errlen, name, ln, "bad host '%s' (want an address, no port)",
                        bad);
    }
    /* A server in two tiers would make every request's tier ambiguous. */
    for (size_t s = 0; s < c->nservers; s++)
        for (size_t i = 0; i < t->n; i++)
            for (size_t k = 0; k < t->tiers[i].nservers; k++) {
                if (i == t->n - 1 && k == s)
                    continue;
                if (same_server(&c->servers[s], &t->tiers[i].servers[k])) {
                    char a[TB_ADDR_STRLEN];
                    return fail(errbuf, errlen, name, ln, "server %s listed twice",
                                tb_addr_fmt(&c->servers[s], a, sizeof a));
                }
            }
    return 0;
}

int tb_tiers_parse(const char *text, size_t len, const char *name, struct tb_tiers **out,
                   char *errbuf, size_t errlen)
{
    struct tb_tiers *t = calloc(1, sizeof *t);
    char *buf = malloc(len + 1);
    int rc = 0;
    unsigned ln = 0;
    if (!t || !buf) {
        rc = TB_E_NOMEM;
        snprintf(errbuf, errlen, "%s: out of memory", name);
        goto out;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        rc = fail(errbuf, errlen, name, 1, "binary data in a tiers file");
        goto out;
    }
    char *p = buf;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3; /* a UTF-8 byte order mark some editors write */
    while (p && *p) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        ln++;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = '\0';
        if ((rc = parse_line(t, p, name, ln, errbuf, errlen)) != 0) {
            if (rc == TB_E_NOMEM)
                snprintf(errbuf, errlen, "%s: out of memory", name);
            goto out;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (t->n == 0) {
        rc = TB_E_BADFMT;
        snprintf(errbuf, errlen, "%s: no tiers defined", name);
        goto out;
    }
out:
    free(buf);
    if (rc) {
        tb_tiers_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

int tb_tiers_load(const char *path, struct tb_tiers **out, char *errbuf, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = 0;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
        return TB_E_IO;
    }
    buf = malloc(TB_TIERS_MAX_FILE + 1);
    if (!buf) {
        rc = TB_E_NOMEM;
        snprintf(errbuf, errlen, "%s: out of memory", path);
        goto out;
    }
    len = fread(buf, 1, TB_TIERS_MAX_FILE + 1, f);
    if (ferror(f)) {
        rc = TB_E_IO;
        snprintf(errbuf, errlen, "%s: read error", path);
        goto out;
    }
    if (len > TB_TIERS_MAX_FILE) {
        rc = TB_E_BADFMT;
        snprintf(errbuf, errlen, "%s: larger than %u bytes; not a tiers file", path,
                 TB_TIERS_MAX_FILE);
        goto out;
    }
    rc = tb_tiers_parse(buf, len, path, out, errbuf, errlen);
out:
    free(buf);
    fclose(f);
    return rc;
}

int tb_tiers_register(struct tb_tiers *t, struct tb_catalog *cat)
{
    int rc;
    for (size_t i = 0; i < t->n; i++) {
        struct tb_tier_cfg *c = &t->tiers[i];
        uint32_t sid;
        if ((rc = tb_catalog_tier(cat, c->name, c->proto ? c->proto->name : "auto",
                                  &c->tier_id)) ||
            (rc = tb_catalog_tier_set_configured(cat, c->tier_id, true)))
            return rc;
        for (size_t s = 0; s < c->nservers; s++) {
            if (c->servers[s].family == 0)
                continue; /* "*:port": registered when a server shows up */
            if ((rc = tb_catalog_server(cat, c->tier_id, &c->servers[s], &sid)) ||
                (rc = tb_catalog_host(cat, c->tier_id, &c->servers[s])))
                return rc;
        }
        for (size_t h = 0; h < c->nhosts; h++)
            if ((rc = tb_catalog_host(cat, c->tier_id, &c->hosts[h])))
                return rc;
    }
    return 0;
}

const struct tb_tier_cfg *tb_tiers_match(const struct tb_tiers *t, const struct tb_addr *a)
{
    const struct tb_tier_cfg *any = NULL;
    if (!t)
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        for (size_t s = 0; s < t->tiers[i].nservers; s++) {
            const struct tb_addr *c = &t->tiers[i].servers[s];
            if (c->port != a->port)
                continue;
            if (c->family == 0) {
                if (!any)
                    any = &t->tiers[i];
            } else if (tb_addr_ip_eq(c, a)) {
                return &t->tiers[i];
            }
        }
    return any;
}

void tb_tiers_auto_name(const struct tb_proto *proto, uint16_t port, char *out, size_t len)
{
    if (proto->ports && proto->ports[0] == port)
        snprintf(out, len, "%s", proto->name);
    else
        snprintf(out, len, "%s-%u", proto->name, port);
}
