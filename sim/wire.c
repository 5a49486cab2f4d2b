/* SPDX-License-Identifier: MIT */
/* wire.c — the simulator's protocol table and what its protocol files share:
 * the byte buffer, number formatting and template expansion. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* The protocols, one line each. Order is the order of names in messages. */
const struct sim_wire *const sim_wires[] = {
    &sim_wire_http,
    &sim_wire_mysql,
    &sim_wire_postgres,
    &sim_wire_redis,
};
const size_t sim_nwires = TB_ARRAY_SIZE(sim_wires);
_Static_assert(TB_ARRAY_SIZE(sim_wires) <= SIM_MAX_WIRES, "raise SIM_MAX_WIRES in sim.h");

const struct sim_wire *sim_wire_find(const char *name)
{
    for (size_t i = 0; i < sim_nwires; i++)
        if (!strcmp(sim_wires[i]->name, name))
            return sim_wires[i];
    return NULL;
}

void sim_wire_names(unsigned flags, char *buf, size_t cap)
{
    size_t n = 0, o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sim_nwires; i++)
        n += (sim_wires[i]->flags & flags) == flags;
    for (size_t i = 0, k = 0; i < sim_nwires && o < cap; i++) {
        if ((sim_wires[i]->flags & flags) != flags)
            continue;
        k++;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", k == 1 ? "" : k < n ? ", " : " or ",
                              sim_wires[i]->name);
    }
}

int sim_wire_index(const struct sim_wire *wire)
{
    for (size_t i = 0; i < sim_nwires; i++)
        if (sim_wires[i] == wire)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------ buffer --- */

static int buf_reserve(struct sim_buf *b, size_t more)
{
    if (b->cap - b->n >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->n < more)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->err = TB_E_NOMEM;
        return TB_E_NOMEM;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void sim_buf_put(struct sim_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return;
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void sim_buf_str(struct sim_buf *b, const char *s)
{
    sim_buf_put(b, s, strlen(s));
}

void sim_buf_u8(struct sim_buf *b, uint8_t v)
{
    sim_buf_put(b, &v, 1);
}

void sim_buf_zero(struct sim_buf *b, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return;
    memset(b->p + b->n, 0, n);
    b->n += n;
}

size_t sim_fmt_u64(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = 0;
    return n;
}

void sim_buf_u64(struct sim_buf *b, uint64_t v)
{
    char d[24];
    sim_buf_put(b, d, sim_fmt_u64(d, v));
}

void sim_buf_i64(struct sim_buf *b, int64_t v)
{
    if (v < 0) {
        sim_buf_put(b, "-", 1);
        sim_buf_u64(b, (uint64_t)0 - (uint64_t)v);
    } else
        sim_buf_u64(b, (uint64_t)v);
}

void sim_buf_fmt(struct sim_buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        n = (int)sizeof tmp - 1;
    sim_buf_put(b, tmp, (size_t)n);
}

void sim_buf_le(struct sim_buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    sim_buf_put(b, x, (size_t)n);
}

void sim_buf_be(struct sim_buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    sim_buf_put(b, x, (size_t)n);
}

void sim_buf_free(struct sim_buf *b)
{
    free(b->p);
    *b = (struct sim_buf){0};
}

/* ---------------------------------------------------------- templates --- */

const struct sim_subst *sim_wire_subst(const char *tpl, const char *stop,
                                       const struct sim_subst *rule, size_t nrule, char *out,
                                       size_t cap)
{
    size_t o = strlen(out);
    for (const char *p = tpl; *p && !strchr(stop, *p) && o + 1 < cap;) {
        size_t i = 0;
        while (i < nrule && strncmp(p, rule[i].ph, strlen(rule[i].ph)))
            i++;
        if (i == nrule) {
            out[o++] = *p++;
            continue;
        }
        if (!rule[i].rep) {
            out[o] = 0;
            return &rule[i];
        }
        size_t n = strlen(rule[i].rep);
        if (o + n >= cap)
            break;
        memcpy(out + o, rule[i].rep, n);
        o += n;
        p += strlen(rule[i].ph);
    }
    out[o] = 0;
    return NULL;
}

int sim_wire_expect_sql(const struct sim_conf *c, int cls, int tier, char *out, size_t cap,
                        char *why, size_t whylen)
{
    TB_UNUSED(tier), TB_UNUSED(why), TB_UNUSED(whylen);
    static const struct sim_subst rule[] = {
        {"'{word}'", "?"}, {"{word}", "?"}, {"{ids}", "?+"}, {"{id}", "?"}, {"{n}", "?"}};
    out[0] = 0;
    sim_wire_subst(c->classes[cls].tmpl[tier], "", rule, TB_ARRAY_SIZE(rule), out, cap);
    return 0;
}

int sim_wire_sql_check(const char *tmpl, char *why, size_t whylen)
{
    if (strncmp(tmpl, "SELECT", 6) && strncmp(tmpl, "UPDATE", 6) && strncmp(tmpl, "INSERT", 6) &&
        strncmp(tmpl, "DELETE", 6)) {
        snprintf(why, whylen, "template must start with SELECT, UPDATE, INSERT or DELETE");
        return TB_E_INVAL;
    }
    return 0;
}

bool sim_wire_sql_is_id(const char *col)
{
    return !strcmp(col, "id") || strstr(col, "_id") != NULL;
}

static int sql_columns(const char *sql, struct sim_sql_cols *cs)
{
    const char *from = strstr(sql, " FROM ");
    snprintf(cs->table, sizeof cs->table, "t");
    if (!from)
        return 0;
    const char *tb = from + 6;
    size_t tl = strcspn(tb, " ;");
    snprintf(cs->table, sizeof cs->table, "%.*s", (int)TB_MIN(tl, sizeof cs->table - 1), tb);
    const char *p = sql + 6;
    int n = 0;
    while (p < from && n < SIM_MAX_COLUMNS) {
        while (*p == ' ' || *p == ',')
            p++;
        if (p >= from)
            break;
        size_t l = strcspn(p, ",");
        if (p + l > from)
            l = (size_t)(from - p);
        while (l && p[l - 1] == ' ')
            l--;
        snprintf(cs->cols[n++], sizeof cs->cols[0], "%.*s",
                 (int)TB_MIN(l, sizeof cs->cols[0] - 1), p);
        p += l;
        while (p < from && *p != ',')
            p++;
    }
    if (n == 1 && !strcmp(cs->cols[0], "*")) {
        strcpy(cs->cols[0], "id");
        strcpy(cs->cols[1], "title");
        strcpy(cs->cols[2], "body");
        n = 3;
    }
    return n;
}

int sim_wire_sql_setup(struct sim_wire_ctx *w, const struct sim_wire *wire, void **state)
{
    const struct sim_conf *c = w->c;
    struct sim_sql_cols *cs = calloc((size_t)TB_MAX(c->nclasses, 1), sizeof *cs);
    if (!cs)
        return TB_E_NOMEM;
    int t = c->ntiers - 1;
    for (int k = 0; k < c->nclasses && c->tiers[t].wire == wire; k++) {
        cs[k].n = sql_columns(c->classes[k].tmpl[t], &cs[k]);
        if (cs[k].n == 0) {
            strcpy(cs[k].cols[0], "1");
            cs[k].n = 1;
        }
    }
    *state = cs;
    return 0;
}

static const char *const words[] = {"kernel", "cache", "tier", "latency", "queue", "thread",
                                    "garbage", "collector", "speedstep", "bottleneck"};

void sim_wire_fill(struct sim_wire_ctx *w, const char *tpl, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = tpl; *p && o + 1 < cap;) {
        char val[128];
        const char *rep = NULL;
        size_t skip = 0;
        if (*p != '{') {
            out[o++] = *p++;
            continue;
        }
        if (!strncmp(p, "{id}", 4)) {
            sim_fmt_u64(val, 1 + sim_rng_below(w->rng, 100000));
            rep = val, skip = 4;
        } else if (!strncmp(p, "{ids}", 5)) {
            int n = 2 + (int)sim_rng_below(w->rng, 5), k = 0;
            for (int i = 0; i < n; i++)
                k += snprintf(val + k, sizeof val - (size_t)k, "%s%" PRIu64, i ? ", " : "",
                              1 + sim_rng_below(w->rng, 100000));
            rep = val, skip = 5;
        } else if (!strncmp(p, "{n}", 3)) {
            sim_fmt_u64(val, 1 + sim_rng_below(w->rng, 50));
            rep = val, skip = 3;
        } else if (!strncmp(p, "{word}", 6)) {
            snprintf(val, sizeof val, "%s", words[sim_rng_below(w->rng, TB_ARRAY_SIZE(words))]);
            rep = val, skip = 6;
        }
        if (rep) {
            size_t n = strlen(rep);
            if (o + n >= cap)
                break;
            memcpy(out + o, rep, n);
            o += n;
            p += skip;
        } else
            out[o++] = *p++;
    }
    out[o] = 0;
}
