/* SPDX-License-Identifier: MIT */
/* wire_redis.c — Redis RESP2 for tbneck-sim
 * (https://redis.io/docs/latest/develop/reference/protocol-spec/).
 *
 * A command is the class's `cmd` template, its words (split at spaces) sent
 * as an array of bulk strings:
 *   *<words> CRLF ( $<len> CRLF <word> CRLF ){words}
 * The reply follows from the command's name:
 *   GET, HGET, GETSET, GETDEL, LPOP, RPOP, LINDEX  bulk string of resp_bytes
 *   MGET (one per key), HMGET (one per field)      array of bulk strings of row_bytes
 *   LRANGE, SMEMBERS, ZRANGE, HVALS, KEYS,
 *   SRANDMEMBER (rows), HGETALL (2 x rows)         array of bulk strings of row_bytes
 *   INCR, DECR, INCRBY, DECRBY, DEL, UNLINK, EXISTS, LPUSH, RPUSH, SADD, SREM,
 *   HSET, HDEL, ZADD, EXPIRE, LLEN, SCARD, HLEN, ZCARD, TTL, PUBLISH  integer
 *   PING                                           +PONG
 *   anything else                                  +OK
 * and for a fraction error_rate: -ERR value is not an integer or out of range.
 * No login: a pooled connection sends commands right after its handshake. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wire.h"

#define REDIS_MAX_WORDS 64
#define REDIS_ERR_STATUS 1 /* tbneck's status of an -ERR reply (docs/sim.md) */

enum reply { R_OK, R_PONG, R_BULK, R_ARRAY_ARGS, R_ARRAY_FIELDS, R_ARRAY_ROWS, R_ARRAY_PAIRS,
             R_INT };

static const struct {
    const char *name;
    enum reply reply;
} replies[] = {
    {"GET", R_BULK},           {"HGET", R_BULK},          {"GETSET", R_BULK},
    {"GETDEL", R_BULK},        {"LPOP", R_BULK},          {"RPOP", R_BULK},
    {"LINDEX", R_BULK},        {"MGET", R_ARRAY_ARGS},    {"HMGET", R_ARRAY_FIELDS},
    {"LRANGE", R_ARRAY_ROWS},  {"SMEMBERS", R_ARRAY_ROWS}, {"ZRANGE", R_ARRAY_ROWS},
    {"HVALS", R_ARRAY_ROWS},   {"KEYS", R_ARRAY_ROWS},    {"SRANDMEMBER", R_ARRAY_ROWS},
    {"HGETALL", R_ARRAY_PAIRS}, {"INCR", R_INT},          {"DECR", R_INT},
    {"INCRBY", R_INT},         {"DECRBY", R_INT},         {"DEL", R_INT},
    {"UNLINK", R_INT},         {"EXISTS", R_INT},         {"LPUSH", R_INT},
    {"RPUSH", R_INT},          {"SADD", R_INT},           {"SREM", R_INT},
    {"HSET", R_INT},           {"HDEL", R_INT},           {"ZADD", R_INT},
    {"EXPIRE", R_INT},         {"LLEN", R_INT},           {"SCARD", R_INT},
    {"HLEN", R_INT},           {"ZCARD", R_INT},          {"TTL", R_INT},
    {"PUBLISH", R_INT},        {"PING", R_PONG},
};

/* Commands whose class names a subcommand too ("CONFIG GET"): the rule below
 * cannot know every subcommand's spelling, so such a class must be stated. */
static const char *const containers[] = {"ACL",   "CLIENT",  "CLUSTER", "COMMAND", "CONFIG",
                                         "DEBUG", "FUNCTION", "LATENCY", "MEMORY", "MODULE",
                                         "OBJECT", "PUBSUB",  "SCRIPT",  "SLOWLOG", "XINFO"};

static enum reply reply_of(const char *cmd, size_t n)
{
    for (size_t i = 0; i < TB_ARRAY_SIZE(replies); i++)
        if (strlen(replies[i].name) == n && !strncasecmp(cmd, replies[i].name, n))
            return replies[i].reply;
    return R_OK;
}

static void bulk(struct sim_buf *b, const char *s, size_t n)
{
    sim_buf_put(b, "$", 1);
    sim_buf_u64(b, n);
    sim_buf_put(b, "\r\n", 2);
    sim_buf_put(b, s, n);
    sim_buf_put(b, "\r\n", 2);
}

static void count(struct sim_buf *b, char type, uint64_t n)
{
    sim_buf_put(b, &type, 1);
    sim_buf_u64(b, n);
    sim_buf_put(b, "\r\n", 2);
}

static void redis_request(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r)
{
    TB_UNUSED(state);
    char text[1024];
    sim_wire_fill(w, w->c->classes[r->cls].tmpl[r->tier], text, sizeof text);
    const char *word[REDIS_MAX_WORDS];
    size_t len[REDIS_MAX_WORDS];
    int n = 0;
    for (const char *p = text; *p && n < REDIS_MAX_WORDS;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        word[n] = p;
        len[n] = strcspn(p, " ");
        p += len[n++];
    }
    struct sim_buf *b = w->msg;
    count(b, '*', (uint64_t)n);
    for (int i = 0; i < n; i++)
        bulk(b, word[i], len[i]);
    /* The reply's shape, and how many keys or fields it answers for. */
    r->scratch = (uint32_t)reply_of(word[0], len[0]) | (uint32_t)n << 8;
}

static void redis_response(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r,
                           int64_t now)
{
    TB_UNUSED(state), TB_UNUSED(now);
    const struct sim_class_conf *cl = &w->c->classes[r->cls];
    struct sim_buf *b = w->msg;
    if (cl->error_rate > 0 && sim_rng_unit(w->rng) < cl->error_rate) {
        sim_buf_str(b, "-ERR value is not an integer or out of range\r\n");
        r->status = REDIS_ERR_STATUS;
        return;
    }
    r->status = 0;
    enum reply kind = (enum reply)(r->scratch & 0xff);
    long words = (long)(r->scratch >> 8), items = 0;
    switch (kind) {
    case R_OK: sim_buf_str(b, "+OK\r\n"); return;
    case R_PONG: sim_buf_str(b, "+PONG\r\n"); return;
    case R_INT:
        count(b, ':', 1 + sim_rng_below(w->rng, 100));
        return;
    case R_BULK: {
        size_t n = (size_t)TB_MAX(0L, lround(sim_dist_sample(&cl->resp_bytes[r->tier], w->rng)));
        size_t off = (size_t)sim_rng_below(w->rng, w->filler_len / 2);
        bulk(b, w->filler + off, TB_MIN(n, w->filler_len - off));
        return;
    }
    case R_ARRAY_ARGS: items = words - 1; break;
    case R_ARRAY_FIELDS: items = words - 2; break;
    case R_ARRAY_ROWS: items = lround(sim_dist_sample(&cl->rows, w->rng)); break;
    case R_ARRAY_PAIRS: items = 2 * lround(sim_dist_sample(&cl->rows, w->rng)); break;
    }
    items = TB_MAX(items, 0L);
    count(b, '*', (uint64_t)items);
    for (long i = 0; i < items; i++) {
        size_t off = (size_t)sim_rng_below(w->rng, w->filler_len / 2);
        bulk(b, w->filler + off, TB_MIN((size_t)cl->row_bytes, w->filler_len - off));
    }
}

static int redis_check(const char *tmpl, char *why, size_t whylen)
{
    size_t n = strcspn(tmpl, " ");
    for (size_t i = 0; i < n; i++)
        if (!((tmpl[i] >= 'A' && tmpl[i] <= 'Z') || (tmpl[i] >= 'a' && tmpl[i] <= 'z'))) {
            snprintf(why, whylen, "'%s' does not start with a command name", tmpl);
            return TB_E_INVAL;
        }
    if (n == 0) {
        snprintf(why, whylen, "'%s' does not start with a command name", tmpl);
        return TB_E_INVAL;
    }
    return 0;
}

/* The rule: the command's name in upper case. */
static int redis_expect(const struct sim_conf *c, int cls, int tier, char *out, size_t cap,
                        char *why, size_t whylen)
{
    const char *t = c->classes[cls].tmpl[tier];
    size_t n = strcspn(t, " ");
    for (size_t i = 0; i < TB_ARRAY_SIZE(containers); i++)
        if (strlen(containers[i]) == n && !strncasecmp(t, containers[i], n)) {
            snprintf(why, whylen, "%s names its class with a subcommand", containers[i]);
            return TB_E_INVAL;
        }
    size_t o = 0;
    for (; o < n && o + 1 < cap; o++)
        out[o] = (char)(t[o] >= 'a' && t[o] <= 'z' ? t[o] - 32 : t[o]);
    out[o] = 0;
    return 0;
}

const struct sim_wire sim_wire_redis = {
    .name = "redis",
    .port = 6379,
    .flags = SIM_WIRE_LEAF | SIM_WIRE_QUERIES,
    .tmpl_key = "cmd",
    .tmpl_default = "GET story:{id}",
    .tmpl_check = redis_check,
    .request = redis_request,
    .response = redis_response,
    .expect = redis_expect,
};
