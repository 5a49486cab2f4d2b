/* SPDX-License-Identifier: MIT */
/* conf.c — tbneck-sim's INI-like configuration: parse, check, write back. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_CONF_BYTES (1 << 20)

void sim_conf_defaults(struct sim_conf *c)
{
    memset(c, 0, sizeof *c);
    char e[8];
    c->seed = 1;
    c->start_ns = INT64_C(1700000000) * TB_NS_PER_SEC;
    c->duration_ns = 10 * TB_NS_PER_SEC;
    c->warmup_ns = TB_NS_PER_SEC;
    c->users = 100;
    sim_dist_parse("exp(1s)", true, &c->think, e, sizeof e);
    sim_dist_parse("exp(2s)", true, &c->burst_on, e, sizeof e);
    sim_dist_parse("exp(8s)", true, &c->burst_off, e, sizeof e);
    c->burst_factor = 0.25;
    c->link_gbps = 1.0;
    c->ack_delay_ns = 200 * 1000;
    c->rtt_ns = 100 * 1000;
    c->mss = 1448;
}

/* Parse state: where we are, for error messages. */
struct pstate {
    struct sim_conf *c;
    const char *name;
    int line;
    char *err;
    size_t errlen;
    enum { SEC_NONE, SEC_SIM, SEC_TIER, SEC_CLASS, SEC_FREEZE, SEC_EXPECT } sec;
    int idx;
    char servers_spec[64];
    int servers_line;
};

TB_PRINTF(2, 3) static int fail(struct pstate *ps, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->line > 0)
        snprintf(ps->err, ps->errlen, "%s:%d: %s", ps->name, ps->line, msg);
    else /* --set: the name is the assignment */
        snprintf(ps->err, ps->errlen, "%s: %s", ps->name, msg);
    return TB_E_BADFMT;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

static int get_int(struct pstate *ps, const char *key, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return fail(ps, "%s: '%s' is not an integer in [%ld, %ld]", key, v, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_double(struct pstate *ps, const char *key, const char *v, double lo, double hi,
                      double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi))
        return fail(ps, "%s: '%s' is not a number in [%g, %g]", key, v, lo, hi);
    *out = x;
    return 0;
}

static int get_duration(struct pstate *ps, const char *key, const char *v, int64_t *out)
{
    if (tb_parse_duration(v, TB_NS_PER_MS, out) < 0)
        return fail(ps, "%s: '%s' is not a duration (e.g. 50ms, 2s)", key, v);
    return 0;
}

static int get_bool(struct pstate *ps, const char *key, const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "1"))
        *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "0"))
        *out = false;
    else
        return fail(ps, "%s: '%s' is not a boolean (true/false)", key, v);
    return 0;
}

static int get_dist(struct pstate *ps, const char *key, const char *v, bool duration,
                    struct sim_dist *d)
{
    char why[160];
    if (sim_dist_parse(v, duration, d, why, sizeof why) < 0)
        return fail(ps, "%s: %s", key, why);
    return 0;
}

static int get_str(struct pstate *ps, const char *key, const char *v, char *out, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || n >= cap)
        return fail(ps, "%s: value empty or longer than %zu characters", key, cap - 1);
    memcpy(out, v, n + 1);
    return 0;
}

int sim_conf_tier_index(const struct sim_conf *c, const char *name)
{
    for (int i = 0; i < c->ntiers; i++)
        if (!strcmp(c->tiers[i].name, name))
            return i;
    return -1;
}

static int set_sim(struct pstate *ps, const char *k, const char *v)
{
    struct sim_conf *c = ps->c;
    if (!strcmp(k, "seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 0);
        if (errno || *end || end == v || *v == '-')
            return fail(ps, "seed: '%s' is not an unsigned integer", v);
        c->seed = s;
        return 0;
    }
    if (!strcmp(k, "duration"))
        return get_duration(ps, k, v, &c->duration_ns);
    if (!strcmp(k, "warmup"))
        return get_duration(ps, k, v, &c->warmup_ns);
    if (!strcmp(k, "users"))
        return get_int(ps, k, v, 1, 1000000, &c->users);
    if (!strcmp(k, "think_time"))
        return get_dist(ps, k, v, true, &c->think);
    if (!strcmp(k, "start")) {
        int64_t t;
        if (tb_parse_time(v, 0, &t) < 0 || t < 0)
            return fail(ps, "start: '%s' is not a time (seconds since the epoch)", v);
        /* Small values are seconds; tb_parse_time takes big integers as ns. */
        c->start_ns = t < INT64_C(100000000000) ? t * TB_NS_PER_SEC : t;
        return 0;
    }
    if (!strcmp(k, "servers")) {
        if (strlen(v) >= sizeof ps->servers_spec)
            return fail(ps, "servers: value too long");
        strcpy(ps->servers_spec, v);
        ps->servers_line = ps->line;
        return 0;
    }
    if (!strcmp(k, "burst"))
        return get_bool(ps, k, v, &c->burst);
    if (!strcmp(k, "burst_on"))
        return get_dist(ps, k, v, true, &c->burst_on);
    if (!strcmp(k, "burst_off"))
        return get_dist(ps, k, v, true, &c->burst_off);
    if (!strcmp(k, "burst_factor"))
        return get_double(ps, k, v, 0.001, 1000, &c->burst_factor);
    if (!strcmp(k, "link"))
        return get_double(ps, k, v, 0.001, 1000, &c->link_gbps);
    if (!strcmp(k, "ack_delay"))
        return get_duration(ps, k, v, &c->ack_delay_ns);
    if (!strcmp(k, "rtt"))
        return get_duration(ps, k, v, &c->rtt_ns);
    if (!strcmp(k, "mss"))
        return get_int(ps, k, v, 536, 8960, &c->mss);
    if (!strcmp(k, "ipv6"))
        return get_bool(ps, k, v, &c->ipv6);
    if (!strcmp(k, "streams")) {
        if (strcmp(v, "shared") && strcmp(v, "per-user"))
            return fail(ps, "streams: '%s' is not shared or per-user", v);
        c->per_user = !strcmp(v, "per-user");
        return 0;
    }
    if (!strcmp(k, "vlan")) {
        int id = 0;
        if (get_int(ps, k, v, 0, 4094, &id) < 0)
            return TB_E_BADFMT;
        c->vlan = (uint16_t)id;
        return 0;
    }
    return fail(ps, "unknown key '%s' in [sim]", k);
}

static int set_tier(struct pstate *ps, const char *k, const char *v)
{
    struct sim_tier_conf *t = &ps->c->tiers[ps->idx];
    if (!strcmp(k, "proto")) {
        const struct sim_wire *w = sim_wire_find(v);
        if (!w) {
            char names[128];
            sim_wire_names(0, names, sizeof names);
            return fail(ps, "proto: '%s' is not %s", v, names);
        }
        t->wire = w;
        return 0;
    }
    if (!strcmp(k, "port")) {
        int p = 0;
        if (get_int(ps, k, v, 1, 65535, &p) < 0)
            return TB_E_BADFMT;
        t->port = (uint16_t)p;
        return 0;
    }
    if (!strcmp(k, "servers"))
        return get_int(ps, k, v, 1, SIM_MAX_SERVERS, &t->servers);
    if (!strcmp(k, "cores"))
        return get_int(ps, k, v, 1, 1024, &t->cores);
    if (!strcmp(k, "threads"))
        return get_int(ps, k, v, 1, 100000, &t->threads);
    if (!strcmp(k, "pool"))
        return get_int(ps, k, v, 1, 10000, &t->pool);
    if (!strcmp(k, "keepalive"))
        return get_int(ps, k, v, 0, 1000000, &t->keepalive);
    if (!strcmp(k, "host"))
        return get_str(ps, k, v, t->host, sizeof t->host);
    if (!strcmp(k, "name"))
        return get_str(ps, k, v, t->wire_name, sizeof t->wire_name);
    if (!strcmp(k, "mode"))
        return get_str(ps, k, v, t->mode_name, sizeof t->mode_name);
    if (!strcmp(k, "deprecate_eof"))
        return get_bool(ps, k, v, &t->deprecate_eof);
    if (!strcmp(k, "speeds")) {
        char buf[256];
        if (strlen(v) >= sizeof buf)
            return fail(ps, "speeds: value too long");
        strcpy(buf, v);
        t->nspeeds = 0;
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            if (t->nspeeds == SIM_MAX_SPEEDS)
                return fail(ps, "speeds: at most %d levels", SIM_MAX_SPEEDS);
            double s = 0;
            if (get_double(ps, k, trim(tok), 0.01, 100, &s) < 0)
                return TB_E_BADFMT;
            if (t->nspeeds && s <= t->speeds[t->nspeeds - 1])
                return fail(ps, "speeds: levels must be ascending");
            t->speeds[t->nspeeds++] = s;
        }
        if (t->nspeeds == 0)
            return fail(ps, "speeds: no levels");
        return 0;
    }
    if (!strcmp(k, "speed_init"))
        return get_int(ps, k, v, 0, SIM_MAX_SPEEDS - 1, &t->speed_init);
    if (!strcmp(k, "speedup"))
        return get_double(ps, k, v, 0.01, 100, &t->speedup);
    if (!strcmp(k, "governor"))
        return get_duration(ps, k, v, &t->governor_ns);
    if (!strcmp(k, "governor_up"))
        return get_double(ps, k, v, 0, 1, &t->governor_up);
    if (!strcmp(k, "governor_down"))
        return get_double(ps, k, v, 0, 1, &t->governor_down);
    if (!strcmp(k, "speed_every"))
        return get_dist(ps, k, v, true, &t->speed_every);
    return fail(ps, "unknown key '%s' in [tier %s]", k, t->name);
}

/* "demand.app" → tier index of app; "demand" → -1 (all tiers). */
static int key_tier(struct pstate *ps, const char *k, const char *base, int *tier)
{
    size_t n = strlen(base);
    if (strncmp(k, base, n))
        return 1;
    if (k[n] == 0) {
        *tier = -1;
        return 0;
    }
    if (k[n] != '.')
        return 1;
    int i = sim_conf_tier_index(ps->c, k + n + 1);
    if (i < 0)
        return fail(ps, "%s: unknown tier '%s' (tiers must be declared before classes)", k,
                    k + n + 1);
    *tier = i;
    return 0;
}

static int set_class(struct pstate *ps, const char *k, const char *v)
{
    struct sim_conf *c = ps->c;
    struct sim_class_conf *cl = &c->classes[ps->idx];
    int tier, rc;
    if (!strcmp(k, "weight"))
        return get_double(ps, k, v, 0, 1e9, &cl->weight);
    if (!strcmp(k, "method")) {
        if (strcmp(v, "GET") && strcmp(v, "POST") && strcmp(v, "HEAD") && strcmp(v, "PUT") &&
            strcmp(v, "DELETE"))
            return fail(ps, "method: '%s' is not GET, POST, HEAD, PUT or DELETE", v);
        strcpy(cl->method, v);
        return 0;
    }
    if (!strcmp(k, "req_body"))
        return get_int(ps, k, v, 0, 1 << 24, &cl->req_body);
    if (!strcmp(k, "status"))
        return get_int(ps, k, v, 100, 599, &cl->status);
    if (!strcmp(k, "rows"))
        return get_dist(ps, k, v, false, &cl->rows);
    if (!strcmp(k, "row_bytes"))
        return get_int(ps, k, v, 1, 1 << 20, &cl->row_bytes);
    if (!strcmp(k, "error_rate"))
        return get_double(ps, k, v, 0, 1, &cl->error_rate);
    if (!strcmp(k, "queries")) {
        /* The queries per page are the calls made by the tier in front of the database. */
        int db = -1;
        for (int i = 0; i < c->ntiers; i++)
            if (c->tiers[i].wire->flags & SIM_WIRE_QUERIES)
                db = i;
        if (db < 1)
            return fail(ps, "queries: no database tier behind another tier is declared yet");
        return get_dist(ps, k, v, false, &cl->calls[db - 1]);
    }
    if ((rc = key_tier(ps, k, "demand", &tier)) <= 0) {
        if (rc < 0)
            return rc;
        for (int i = 0; i < c->ntiers; i++)
            if ((tier < 0 || tier == i) && get_dist(ps, k, v, true, &cl->demand[i]) < 0)
                return TB_E_BADFMT;
        return 0;
    }
    if ((rc = key_tier(ps, k, "calls", &tier)) <= 0) {
        if (rc < 0)
            return rc;
        for (int i = 0; i < c->ntiers; i++)
            if ((tier < 0 || tier == i) && get_dist(ps, k, v, false, &cl->calls[i]) < 0)
                return TB_E_BADFMT;
        return 0;
    }
    if ((rc = key_tier(ps, k, "resp_bytes", &tier)) <= 0) {
        if (rc < 0)
            return rc;
        for (int i = 0; i < c->ntiers; i++)
            if ((tier < 0 || tier == i) && get_dist(ps, k, v, false, &cl->resp_bytes[i]) < 0)
                return TB_E_BADFMT;
        return 0;
    }
    /* Request templates under their protocol's key: path, sql, cmd. */
    for (size_t w = 0; w < sim_nwires; w++) {
        const struct sim_wire *wire = sim_wires[w];
        if ((rc = key_tier(ps, k, wire->tmpl_key, &tier)) > 0)
            continue;
        if (rc < 0)
            return rc;
        char why[160];
        if (wire->tmpl_check(v, why, sizeof why) < 0)
            return fail(ps, "%s: %s", k, why);
        int n = 0;
        for (int i = 0; i < c->ntiers; i++) {
            if ((tier >= 0 && tier != i) || strcmp(c->tiers[i].wire->tmpl_key, wire->tmpl_key))
                continue;
            if (get_str(ps, k, v, cl->tmpl[i], sizeof cl->tmpl[i]) < 0)
                return TB_E_BADFMT;
            n++;
        }
        if (n == 0 && tier >= 0)
            return fail(ps, "%s: tier '%s' speaks %s, whose requests take '%s'", k,
                        c->tiers[tier].name, c->tiers[tier].wire->name,
                        c->tiers[tier].wire->tmpl_key);
        if (n == 0)
            return fail(ps, "%s: no tier takes '%s' templates", k, wire->tmpl_key);
        return 0;
    }
    if ((rc = key_tier(ps, k, "class", &tier)) <= 0) {
        /* The expected class, literally: the truth's independent oracle. */
        if (rc < 0)
            return rc;
        for (const char *p = v; *p; p++)
            if ((unsigned char)*p < ' ' || *p == 0x7f)
                return fail(ps, "%s: control characters are not allowed", k);
        for (int i = 0; i < c->ntiers; i++)
            if ((tier < 0 || tier == i) &&
                get_str(ps, k, v, cl->expect[i], sizeof cl->expect[i]) < 0)
                return TB_E_BADFMT;
        return 0;
    }
    return fail(ps, "unknown key '%s' in [class %s]", k, cl->name);
}

/* "2s:150ms" → start and length. */
static int parse_at(struct pstate *ps, struct sim_freeze_conf *f, const char *v)
{
    char buf[4096];
    if (strlen(v) >= sizeof buf)
        return fail(ps, "at: value too long");
    strcpy(buf, v);
    f->nat = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        char *colon = strchr(tok, ':');
        if (!colon)
            return fail(ps, "at: '%s' is not START:LENGTH (e.g. 2s:150ms)", tok);
        *colon = 0;
        if (f->nat == SIM_MAX_FREEZE_AT)
            return fail(ps, "at: at most %d freezes", SIM_MAX_FREEZE_AT);
        if (get_duration(ps, "at", trim(tok), &f->at_ns[f->nat]) < 0 ||
            get_duration(ps, "at", trim(colon + 1), &f->len_ns[f->nat]) < 0)
            return TB_E_BADFMT;
        if (f->len_ns[f->nat] <= 0)
            return fail(ps, "at: freeze length must be positive");
        if (f->nat && f->at_ns[f->nat] < f->at_ns[f->nat - 1] + f->len_ns[f->nat - 1])
            return fail(ps, "at: freezes must be in order and must not overlap");
        f->nat++;
    }
    return 0;
}

/* "TIER" (every server) or "TIER/N" (1-based) into target, tier, server. */
static int get_target(struct pstate *ps, const char *k, const char *v, char *target, size_t cap,
                      int *tier, int *server)
{
    if (get_str(ps, k, v, target, cap) < 0)
        return TB_E_BADFMT;
    char name[48];
    snprintf(name, sizeof name, "%s", v);
    char *slash = strchr(name, '/');
    *server = -1;
    if (slash) {
        *slash = 0;
        int n = 0;
        if (get_int(ps, k, slash + 1, 1, SIM_MAX_SERVERS, &n) < 0)
            return TB_E_BADFMT;
        *server = n - 1;
    }
    *tier = sim_conf_tier_index(ps->c, name);
    if (*tier < 0)
        return fail(ps, "%s: unknown tier '%s' (tiers must be declared first)", k, name);
    return 0;
}

static int set_expect(struct pstate *ps, const char *k, const char *v)
{
    struct sim_expect_conf *e = &ps->c->expect;
    if (!strcmp(k, "server"))
        return get_target(ps, k, v, e->target, sizeof e->target, &e->tier, &e->server);
    if (!strcmp(k, "cause")) {
        static const char *const causes[] = {"cpu", "freeze", "speed", "pool", "threads", "none"};
        for (size_t i = 0; i < TB_ARRAY_SIZE(causes); i++)
            if (!strcmp(v, causes[i])) {
                strcpy(e->cause, v);
                return 0;
            }
        return fail(ps, "cause: '%s' is not cpu, freeze, speed, pool, threads or none", v);
    }
    return fail(ps, "unknown key '%s' in [expect]", k);
}

static int set_freeze(struct pstate *ps, const char *k, const char *v)
{
    struct sim_freeze_conf *f = &ps->c->freezes[ps->idx];
    if (!strcmp(k, "server"))
        return get_target(ps, k, v, f->target, sizeof f->target, &f->tier, &f->server);
    if (!strcmp(k, "every")) {
        f->random = true;
        return get_dist(ps, k, v, true, &f->every);
    }
    if (!strcmp(k, "length"))
        return get_dist(ps, k, v, true, &f->length);
    if (!strcmp(k, "at"))
        return parse_at(ps, f, v);
    return fail(ps, "unknown key '%s' in [freeze]", k);
}

static int begin_section(struct pstate *ps, char *hdr)
{
    struct sim_conf *c = ps->c;
    char *sp = strchr(hdr, ' ');
    char *arg = NULL;
    if (sp) {
        *sp = 0;
        arg = trim(sp + 1);
        if (!*arg)
            arg = NULL;
    }
    if (!strcmp(hdr, "sim") && !arg) {
        ps->sec = SEC_SIM;
        return 0;
    }
    if (!strcmp(hdr, "expect") && !arg) {
        if (c->expect.set)
            return fail(ps, "[expect] given twice");
        ps->sec = SEC_EXPECT;
        c->expect.set = true;
        c->expect.tier = -1;
        c->expect.server = -1;
        return 0;
    }
    if (!strcmp(hdr, "freeze") && !arg) {
        if (c->nfreezes == SIM_MAX_FREEZES)
            return fail(ps, "at most %d [freeze] sections", SIM_MAX_FREEZES);
        ps->sec = SEC_FREEZE;
        ps->idx = c->nfreezes++;
        c->freezes[ps->idx].tier = -1;
        c->freezes[ps->idx].server = -1;
        return 0;
    }
    if (!strcmp(hdr, "tier") && arg) {
        if (c->nclasses)
            return fail(ps, "[tier %s] after a [class]: declare tiers first", arg);
        if (c->ntiers == SIM_MAX_TIERS)
            return fail(ps, "at most %d tiers", SIM_MAX_TIERS);
        if (sim_conf_tier_index(c, arg) >= 0)
            return fail(ps, "tier '%s' declared twice", arg);
        ps->sec = SEC_TIER;
        ps->idx = c->ntiers++;
        struct sim_tier_conf *t = &c->tiers[ps->idx];
        if (get_str(ps, "tier name", arg, t->name, sizeof t->name) < 0)
            return TB_E_BADFMT;
        t->wire = &sim_wire_http;
        t->port = 80;
        t->servers = 1;
        t->cores = 1;
        t->threads = 64;
        t->pool = 16;
        t->keepalive = 100;
        t->speeds[0] = 1.0;
        t->nspeeds = 1;
        t->speedup = 1.0;
        t->governor_up = 0.8;
        t->governor_down = 0.3;
        return 0;
    }
    if (!strcmp(hdr, "class") && arg) {
        if (c->nclasses == SIM_MAX_CLASSES)
            return fail(ps, "at most %d classes", SIM_MAX_CLASSES);
        for (int i = 0; i < c->nclasses; i++)
            if (!strcmp(c->classes[i].name, arg))
                return fail(ps, "class '%s' declared twice", arg);
        ps->sec = SEC_CLASS;
        ps->idx = c->nclasses++;
        struct sim_class_conf *cl = &c->classes[ps->idx];
        if (get_str(ps, "class name", arg, cl->name, sizeof cl->name) < 0)
            return TB_E_BADFMT;
        for (const char *p = arg; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
                return fail(ps, "class name '%s': use letters, digits, '_' and '-'", arg);
        char e[8];
        cl->weight = 1.0;
        strcpy(cl->method, "GET");
        cl->status = 200;
        cl->row_bytes = 64;
        sim_dist_parse("1", false, &cl->rows, e, sizeof e);
        for (int i = 0; i < SIM_MAX_TIERS; i++) {
            /* A server never answers in zero time: 50 us unless configured. */
            sim_dist_parse("50us", true, &cl->demand[i], e, sizeof e);
            /* Every tier but the last calls the next one once unless told otherwise. */
            sim_dist_parse(i + 1 < c->ntiers ? "1" : "0", false, &cl->calls[i], e, sizeof e);
            sim_dist_parse("2048", false, &cl->resp_bytes[i], e, sizeof e);
            if (i < c->ntiers) {
                /* The protocol's default template, "{class}" the class name. */
                const char *d = c->tiers[i].wire->tmpl_default, *at = strstr(d, "{class}");
                if (at)
                    snprintf(cl->tmpl[i], sizeof cl->tmpl[i], "%.*s%s%s", (int)(at - d), d, arg,
                             at + 7);
                else
                    snprintf(cl->tmpl[i], sizeof cl->tmpl[i], "%s", d);
            }
        }
        return 0;
    }
    return fail(ps, "unknown section [%s%s%s] (sim, tier NAME, class NAME, freeze, expect)", hdr,
                arg ? " " : "", arg ? arg : "");
}

int sim_conf_set_servers(struct sim_conf *c, const char *spec, char *err, size_t errlen)
{
    int n[SIM_MAX_TIERS + 1], k = 0;
    const char *p = spec;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x > SIM_MAX_SERVERS || k == SIM_MAX_TIERS + 1) {
            snprintf(err, errlen, "servers '%s': expected counts 1..%d like 1/2/1", spec,
                     SIM_MAX_SERVERS);
            return TB_E_INVAL;
        }
        n[k++] = (int)x;
        p = end;
        if (*p == '/')
            p++;
        else if (*p) {
            snprintf(err, errlen, "servers '%s': expected counts like 1/2/1", spec);
            return TB_E_INVAL;
        }
    }
    if (k != c->ntiers) {
        snprintf(err, errlen, "servers '%s' names %d tiers, the configuration has %d", spec, k,
                 c->ntiers);
        return TB_E_INVAL;
    }
    for (int i = 0; i < k; i++)
        c->tiers[i].servers = n[i];
    return 0;
}

int sim_conf_set(struct sim_conf *c, const char *assignment, char *err, size_t errlen)
{
    char name[600], buf[512];
    snprintf(name, sizeof name, "--set %s", assignment);
    struct pstate ps = {.c = c, .name = name, .err = err, .errlen = errlen};
    if (strlen(assignment) >= sizeof buf)
        return fail(&ps, "longer than %zu characters", sizeof buf - 1);
    strcpy(buf, assignment);
    char *eq = strchr(buf, '=');
    if (!eq)
        return fail(&ps, "expected SECTION.KEY=VALUE (e.g. tier.db.cores=4)");
    *eq = 0;
    char *lhs = trim(buf), *v = trim(eq + 1), *k = NULL;
    if (!*v)
        return fail(&ps, "missing value");
    char *dot = strchr(lhs, '.');
    if (!dot)
        return fail(&ps, "expected SECTION.KEY=VALUE (e.g. tier.db.cores=4)");
    *dot = 0;
    const char *sec = lhs;
    if (!strcmp(sec, "sim") || !strcmp(sec, "expect")) {
        k = dot + 1;
        if (!strcmp(sec, "expect") && !c->expect.set)
            return fail(&ps, "the configuration has no [expect] section");
        ps.sec = !strcmp(sec, "sim") ? SEC_SIM : SEC_EXPECT;
    } else if (!strcmp(sec, "tier") || !strcmp(sec, "class") || !strcmp(sec, "freeze")) {
        /* tier.NAME.KEY, class.NAME.KEY, freeze.N.KEY (N 1-based, in file order) */
        char *obj = dot + 1, *d2 = strchr(obj, '.');
        if (!d2 || !d2[1])
            return fail(&ps, "expected %s.%s.KEY=VALUE", sec, *sec == 'f' ? "N" : "NAME");
        *d2 = 0;
        k = d2 + 1;
        ps.idx = -1;
        if (*sec == 't') {
            ps.sec = SEC_TIER;
            ps.idx = sim_conf_tier_index(c, obj);
        } else if (*sec == 'c') {
            ps.sec = SEC_CLASS;
            for (int i = 0; i < c->nclasses; i++)
                if (!strcmp(c->classes[i].name, obj))
                    ps.idx = i;
        } else {
            ps.sec = SEC_FREEZE;
            char *end;
            long n = strtol(obj, &end, 10);
            if (!*end && n >= 1 && n <= c->nfreezes)
                ps.idx = (int)n - 1;
        }
        if (ps.idx < 0)
            return fail(&ps, "the configuration has no %s '%s'", sec, obj);
    } else
        return fail(&ps, "unknown section '%s' (sim, tier, class, freeze, expect)", sec);
    int rc;
    switch (ps.sec) {
    case SEC_SIM:
        rc = set_sim(&ps, k, v);
        if (rc == 0 && ps.servers_spec[0]) {
            char why[200];
            if (sim_conf_set_servers(c, ps.servers_spec, why, sizeof why) < 0)
                return fail(&ps, "%s", why);
        }
        return rc;
    case SEC_TIER: return set_tier(&ps, k, v);
    case SEC_CLASS: return set_class(&ps, k, v);
    case SEC_FREEZE: return set_freeze(&ps, k, v);
    default: return set_expect(&ps, k, v);
    }
}

int sim_conf_parse(struct sim_conf *c, const char *text, const char *name, char *err,
                   size_t errlen)
{
    struct pstate ps = {.c = c, .name = name, .err = err, .errlen = errlen};
    const char *p = text;
    char line[8192];
    while (*p) {
        ps.line++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof line)
            return fail(&ps, "line longer than %zu characters", sizeof line - 1);
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (nl ? 1 : 0);
        /* Comments start with '#' or ';' at the beginning of a line or after
         * whitespace, so that '#' inside a URL path survives. */
        for (char *q = line; *q; q++)
            if ((*q == '#' || *q == ';') && (q == line || isspace((unsigned char)q[-1]))) {
                *q = 0;
                break;
            }
        char *s = trim(line);
        if (!*s)
            continue;
        int rc;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close || trim(close + 1)[0])
                return fail(&ps, "section header must look like [name] or [kind NAME]");
            *close = 0;
            if ((rc = begin_section(&ps, trim(s + 1))) < 0)
                return rc;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq)
            return fail(&ps, "expected 'key = value'");
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        if (!*k)
            return fail(&ps, "missing key before '='");
        if (!*v)
            return fail(&ps, "%s: missing value", k);
        switch (ps.sec) {
        case SEC_NONE:
            return fail(&ps, "'%s' outside any section", k);
        case SEC_SIM:
            rc = set_sim(&ps, k, v);
            break;
        case SEC_TIER:
            rc = set_tier(&ps, k, v);
            break;
        case SEC_CLASS:
            rc = set_class(&ps, k, v);
            break;
        case SEC_FREEZE:
            rc = set_freeze(&ps, k, v);
            break;
        case SEC_EXPECT:
            rc = set_expect(&ps, k, v);
            break;
        default:
            rc = TB_E_INVAL;
        }
        if (rc < 0)
            return rc;
    }
    if (ps.servers_spec[0]) {
        char why[200];
        ps.line = ps.servers_line;
        if (sim_conf_set_servers(c, ps.servers_spec, why, sizeof why) < 0)
            return fail(&ps, "%s", why);
    }
    for (int i = 0; i < c->nfreezes; i++) {
        struct sim_freeze_conf *f = &c->freezes[i];
        if (f->tier < 0) {
            snprintf(err, errlen, "%s: a [freeze] section has no 'server'", name);
            return TB_E_BADFMT;
        }
        if (f->random == (f->nat > 0) || (f->random && !f->length.text[0])) {
            snprintf(err, errlen,
                     "%s: [freeze] for %s needs either 'at' or both 'every' and 'length'", name,
                     f->target);
            return TB_E_BADFMT;
        }
    }
    const struct sim_expect_conf *e = &c->expect;
    if (e->set && (!e->cause[0] || (e->tier < 0) != !strcmp(e->cause, "none"))) {
        snprintf(err, errlen, "%s: [expect] needs 'cause', and 'server' unless the cause is none",
                 name);
        return TB_E_BADFMT;
    }
    return 0;
}

int sim_conf_load(struct sim_conf *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return TB_E_IO;
    }
    char *buf = malloc(MAX_CONF_BYTES + 1);
    if (!buf) {
        fclose(f);
        return TB_E_NOMEM;
    }
    size_t n = fread(buf, 1, MAX_CONF_BYTES + 1, f);
    int rc = 0;
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        rc = TB_E_IO;
    } else if (n > MAX_CONF_BYTES) {
        snprintf(err, errlen, "%s: larger than %d bytes", path, MAX_CONF_BYTES);
        rc = TB_E_BADFMT;
    } else if (memchr(buf, 0, n)) {
        snprintf(err, errlen, "%s: contains a NUL byte, not a text file", path);
        rc = TB_E_BADFMT;
    } else {
        buf[n] = 0;
        rc = sim_conf_parse(c, buf, path, err, errlen);
    }
    free(buf);
    fclose(f);
    return rc;
}

int sim_conf_finish(struct sim_conf *c, char *err, size_t errlen)
{
    if (c->ntiers == 0) {
        snprintf(err, errlen, "no [tier NAME] section");
        return TB_E_INVAL;
    }
    if (c->nclasses == 0) {
        snprintf(err, errlen, "no [class NAME] section");
        return TB_E_INVAL;
    }
    if (!(c->tiers[0].wire->flags & SIM_WIRE_FRONT)) {
        char names[128];
        sim_wire_names(SIM_WIRE_FRONT, names, sizeof names);
        snprintf(err, errlen, "tier '%s': the front tier must speak %s", c->tiers[0].name, names);
        return TB_E_INVAL;
    }
    double wsum = 0;
    for (int i = 0; i < c->nclasses; i++)
        wsum += c->classes[i].weight;
    if (!(wsum > 0)) {
        snprintf(err, errlen, "class weights add up to zero");
        return TB_E_INVAL;
    }
    for (int i = 0; i < c->ntiers; i++) {
        struct sim_tier_conf *t = &c->tiers[i];
        if ((t->wire->flags & SIM_WIRE_LEAF) && i + 1 != c->ntiers) {
            snprintf(err, errlen, "tier '%s': a %s tier must be the last one", t->name,
                     t->wire->name);
            return TB_E_INVAL;
        }
        if (t->speed_init >= t->nspeeds) {
            snprintf(err, errlen, "tier '%s': speed_init %d but only %d speed levels", t->name,
                     t->speed_init, t->nspeeds);
            return TB_E_INVAL;
        }
        t->mode = 0;
        if (t->mode_name[0]) {
            const char *const *m = t->wire->modes;
            while (m && *m && strcmp(*m, t->mode_name))
                m++;
            if (!m || !*m) {
                char names[128] = "";
                for (size_t o = 0, j = 0; t->wire->modes && t->wire->modes[j]; j++)
                    o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", j ? ", " : "",
                                          t->wire->modes[j]);
                snprintf(err, errlen, "tier '%s': mode '%s' is not one of %s's (%s)", t->name,
                         t->mode_name, t->wire->name, names[0] ? names : "it has none");
                return TB_E_INVAL;
            }
            t->mode = (int)(m - t->wire->modes);
        }
        if (t->speed_every.text[0] && (t->governor_ns || t->nspeeds < 2)) {
            snprintf(err, errlen, "tier '%s': speed_every needs two speeds or more and no governor",
                     t->name);
            return TB_E_INVAL;
        }
        if (t->governor_ns && t->governor_down >= t->governor_up) {
            snprintf(err, errlen, "tier '%s': governor_down must be below governor_up", t->name);
            return TB_E_INVAL;
        }
        for (int j = 0; j < i; j++)
            if (c->tiers[j].port == t->port) {
                /* Discovery tells tiers apart by port only through their names. */
                snprintf(err, errlen, "tiers '%s' and '%s' share port %u", c->tiers[j].name,
                         t->name, t->port);
                return TB_E_INVAL;
            }
        if (!t->host[0])
            snprintf(t->host, sizeof t->host, "%s.tbneck.test", t->name);
    }
    /* Names as tbneck's discovery will give them: the protocol, with the port
     * added when two tiers would share a name (the default port keeps the bare
     * name). */
    for (int i = 0; i < c->ntiers; i++) {
        struct sim_tier_conf *t = &c->tiers[i];
        if (t->wire_name[0])
            continue;
        const char *base = t->wire->name;
        uint16_t defport = t->wire->port;
        int same = 0;
        for (int j = 0; j < c->ntiers; j++)
            same += c->tiers[j].wire == t->wire;
        if (same == 1 || t->port == defport)
            snprintf(t->wire_name, sizeof t->wire_name, "%s", base);
        else
            snprintf(t->wire_name, sizeof t->wire_name, "%s-%u", base, t->port);
    }
    /* Expected classes the configuration does not state follow each
     * protocol's literal template rule. */
    for (int k = 0; k < c->nclasses; k++) {
        struct sim_class_conf *cl = &c->classes[k];
        for (int i = 0; i < c->ntiers; i++) {
            char why[256];
            if (cl->expect[i][0])
                continue;
            if (c->tiers[i].wire->expect(c, k, i, cl->expect[i], sizeof cl->expect[i], why,
                                         sizeof why) < 0) {
                snprintf(err, errlen, "class '%s' at tier '%s': %s; state it with class.%s",
                         cl->name, c->tiers[i].name, why, c->tiers[i].name);
                return TB_E_INVAL;
            }
        }
    }
    for (int i = 0; i < c->nfreezes; i++) {
        struct sim_freeze_conf *f = &c->freezes[i];
        if (f->server >= c->tiers[f->tier].servers) {
            snprintf(err, errlen, "freeze %s: tier '%s' has only %d servers", f->target,
                     c->tiers[f->tier].name, c->tiers[f->tier].servers);
            return TB_E_INVAL;
        }
    }
    if (c->expect.tier >= 0 && c->expect.server >= c->tiers[c->expect.tier].servers) {
        snprintf(err, errlen, "expect %s: tier '%s' has only %d servers", c->expect.target,
                 c->tiers[c->expect.tier].name, c->tiers[c->expect.tier].servers);
        return TB_E_INVAL;
    }
    return 0;
}

static void write_dists(FILE *f, const char *key, const struct sim_dist *d, int n,
                        const struct sim_conf *c)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "%s.%s = %s\n", key, c->tiers[i].name, d[i].text);
}

int sim_conf_write(const struct sim_conf *c, FILE *f)
{
    fprintf(f, "# Effective configuration of this tbneck-sim run (defaults and overrides "
               "applied).\n[sim]\n");
    fprintf(f, "seed = %" PRIu64 "\n", c->seed);
    fprintf(f, "start = %" PRId64 ".%09" PRId64 "\n", c->start_ns / TB_NS_PER_SEC,
            c->start_ns % TB_NS_PER_SEC);
    fprintf(f, "duration = %" PRId64 "ns\nwarmup = %" PRId64 "ns\n", c->duration_ns,
            c->warmup_ns);
    fprintf(f, "users = %d\nthink_time = %s\n", c->users, c->think.text);
    fprintf(f, "burst = %s\nburst_on = %s\nburst_off = %s\nburst_factor = %g\n",
            c->burst ? "true" : "false", c->burst_on.text, c->burst_off.text, c->burst_factor);
    fprintf(f, "link = %g\nack_delay = %" PRId64 "ns\nrtt = %" PRId64 "ns\nmss = %d\n",
            c->link_gbps, c->ack_delay_ns, c->rtt_ns, c->mss);
    fprintf(f, "ipv6 = %s\nvlan = %u\nstreams = %s\n", c->ipv6 ? "true" : "false", c->vlan,
            c->per_user ? "per-user" : "shared");
    for (int i = 0; i < c->ntiers; i++) {
        const struct sim_tier_conf *t = &c->tiers[i];
        fprintf(f, "\n[tier %s]\nname = %s\nproto = %s\nport = %u\nservers = %d\ncores = %d\n",
                t->name, t->wire_name, t->wire->name, t->port,
                t->servers, t->cores);
        fprintf(f, "threads = %d\npool = %d\nkeepalive = %d\nhost = %s\ndeprecate_eof = %s\n",
                t->threads, t->pool, t->keepalive, t->host, t->deprecate_eof ? "true" : "false");
        fprintf(f, "speeds = ");
        for (int s = 0; s < t->nspeeds; s++)
            fprintf(f, "%s%g", s ? ", " : "", t->speeds[s]);
        fprintf(f, "\nspeed_init = %d\nspeedup = %.15g\n", t->speed_init, t->speedup);
        if (t->governor_ns)
            fprintf(f, "governor = %" PRId64 "ns\ngovernor_up = %g\ngovernor_down = %g\n",
                    t->governor_ns, t->governor_up, t->governor_down);
        if (t->speed_every.text[0])
            fprintf(f, "speed_every = %s\n", t->speed_every.text);
        if (t->wire->modes)
            fprintf(f, "mode = %s\n", t->wire->modes[t->mode]);
    }
    for (int i = 0; i < c->nclasses; i++) {
        const struct sim_class_conf *cl = &c->classes[i];
        fprintf(f, "\n[class %s]\nweight = %g\nmethod = %s\nreq_body = %d\nstatus = %d\n",
                cl->name, cl->weight, cl->method, cl->req_body, cl->status);
        for (int t = 0; t < c->ntiers; t++)
            fprintf(f, "%s.%s = %s\n", c->tiers[t].wire->tmpl_key, c->tiers[t].name, cl->tmpl[t]);
        write_dists(f, "demand", cl->demand, c->ntiers, c);
        write_dists(f, "calls", cl->calls, c->ntiers, c);
        write_dists(f, "resp_bytes", cl->resp_bytes, c->ntiers, c);
        fprintf(f, "rows = %s\nrow_bytes = %d\nerror_rate = %g\n", cl->rows.text, cl->row_bytes,
                cl->error_rate);
        for (int t = 0; t < c->ntiers; t++)
            fprintf(f, "class.%s = %s\n", c->tiers[t].name, cl->expect[t]);
    }
    for (int i = 0; i < c->nfreezes; i++) {
        const struct sim_freeze_conf *fr = &c->freezes[i];
        fprintf(f, "\n[freeze]\nserver = %s\n", fr->target);
        if (fr->random)
            fprintf(f, "every = %s\nlength = %s\n", fr->every.text, fr->length.text);
        else {
            fprintf(f, "at = ");
            for (int k = 0; k < fr->nat; k++)
                fprintf(f, "%s%" PRId64 "ns:%" PRId64 "ns", k ? ", " : "", fr->at_ns[k],
                        fr->len_ns[k]);
            fprintf(f, "\n");
        }
    }
    if (c->expect.set) {
        fprintf(f, "\n[expect]\n");
        if (c->expect.target[0])
            fprintf(f, "server = %s\n", c->expect.target);
        fprintf(f, "cause = %s\n", c->expect.cause);
    }
    return ferror(f) ? TB_E_IO : 0;
}
