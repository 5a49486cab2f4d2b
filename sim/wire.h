/* SPDX-License-Identifier: MIT */
/* wire.h — the simulator's protocol operations: what a tier's protocol puts in
 * the TCP payload (login on a pooled connection, a request, its response), one
 * file per protocol (wire_http.c, wire_mysql.c, ...) and one table listing them.
 *
 * The model (model.c) owns time, connections and TCP; a protocol only writes
 * bytes into ctx->msg and draws from ctx->rng. Everything a protocol draws
 * comes from the one model stream, in the order the model calls it, which is
 * what keeps a run reproducible: a protocol must draw the same numbers for the
 * same call whatever else it does.
 *
 * Adding a protocol: write wire_NAME.c defining `const struct sim_wire
 * sim_wire_NAME`, add one line to the table in wire.c (and the file to
 * sim/meson.build). Configuration, truth names and the model find it there. */
#ifndef TB_SIM_WIRE_H
#define TB_SIM_WIRE_H

#include "sim.h"

/* ------------------------------------------------------------ buffer --- */

/* A growing byte buffer. A failed allocation sets err and drops the bytes, so
 * that builders need no error path; the model checks err after each message. */
struct sim_buf {
    uint8_t *p;
    size_t n, cap;
    int err;
};

void sim_buf_put(struct sim_buf *b, const void *p, size_t n);
void sim_buf_str(struct sim_buf *b, const char *s);
void sim_buf_u8(struct sim_buf *b, uint8_t v);
void sim_buf_zero(struct sim_buf *b, size_t n);
/* Decimal text of v. */
void sim_buf_u64(struct sim_buf *b, uint64_t v);
void sim_buf_i64(struct sim_buf *b, int64_t v);
/* printf into the buffer; at most 1023 bytes per call. */
TB_PRINTF(2, 3) void sim_buf_fmt(struct sim_buf *b, const char *fmt, ...);
/* Little-endian and big-endian integers of n <= 8 bytes. */
void sim_buf_le(struct sim_buf *b, uint64_t v, int n);
void sim_buf_be(struct sim_buf *b, uint64_t v, int n);
void sim_buf_free(struct sim_buf *b);

/* Decimal digits of v into buf (at least 21 bytes), NUL-terminated; returns
 * the length. The hot paths format numbers by hand: printf was a tenth of the
 * run time. */
size_t sim_fmt_u64(char *buf, uint64_t v);

/* ----------------------------------------------------------- context --- */

/* What the model lends a protocol for one run. */
struct sim_wire_ctx {
    const struct sim_conf *c;
    struct sim_rng *rng;  /* the model's stream */
    struct sim_buf *msg;  /* the message being built; builders start it empty */
    const char *filler;   /* filler text for bodies and columns */
    size_t filler_len;
    /* Sends ctx->msg on connection `conn` from side `dir` (0 client, 1
     * server) no earlier than t; returns the time of its last packet. Only
     * login uses it: requests and responses are sent by the model. */
    int64_t (*send)(void *model, void *conn, int dir, int64_t t);
    void *model;
};

/* Expands {id} (1–100000), {ids} (2–6 ids, ", "-separated), {n} (1–50) and
 * {word} afresh in a template; other text is copied. Truncates at cap. */
void sim_wire_fill(struct sim_wire_ctx *w, const char *tpl, char *out, size_t cap);

/* One request as the protocol sees it. */
struct sim_wire_req {
    int tier;         /* index of the tier that serves it */
    int cls;          /* index of its class */
    bool close;       /* the last request on its connection (HTTP: Connection: close) */
    uint64_t conn_id; /* the connection's id (MySQL puts it in the greeting) */
    int status;       /* set by response(): the truth's status column */
    uint32_t scratch; /* kept from request() to response() for the protocol */
};

/* ------------------------------------------------------------- table --- */

enum {
    SIM_WIRE_FRONT = 1 << 0,   /* users can speak it: may be the front tier */
    SIM_WIRE_LEAF = 1 << 1,    /* calls nothing downstream: only the last tier */
    SIM_WIRE_QUERIES = 1 << 2, /* a class's `queries` are the calls into this tier */
};

struct sim_wire {
    const char *name; /* `proto = NAME`, and the base of tbneck's tier name */
    uint16_t port;    /* well-known port: a tier there keeps the bare name */
    unsigned flags;
    /* The class key of its request template (`path`, `sql`, `cmd`), the
     * template a class has when the configuration gives none ("{class}"
     * stands for the class name), and its check (0, or TB_E_INVAL with a
     * reason). */
    const char *tmpl_key;
    const char *tmpl_default;
    int (*tmpl_check)(const char *tmpl, char *why, size_t whylen);
    /* Ways of speaking it a tier can choose with `mode` (NULL-terminated,
     * the first is the default), or NULL. */
    const char *const *modes;
    /* Once per run, before any message: prepares the protocol's state, handed
     * back to every other operation and freed with free() (may leave it NULL).
     * Returns 0 or TB_E_NOMEM. Optional. */
    int (*setup)(struct sim_wire_ctx *w, void **state);
    /* Once per pooled connection after its handshake: the protocol's opening
     * exchange, sent with w->send from t on. Returns when the client may send
     * its first request. Optional. */
    int64_t (*login)(struct sim_wire_ctx *w, void *state, void *conn, const struct sim_wire_req *r,
                     int64_t t);
    /* Builds r's request into w->msg. */
    void (*request)(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r);
    /* Builds r's response, as the server sends it at `now`, and sets r->status. */
    void (*response)(struct sim_wire_ctx *w, void *state, struct sim_wire_req *r, int64_t now);
    /* The protocol's literal template rule: the class tbneck must report for
     * class `cls` at tier `tier` when the configuration does not state it
     * with class.TIER. Works on the configured template only, never on
     * generated text. Returns 0, or TB_E_INVAL with a reason in why when the
     * template gives no class by the rule (class.TIER is then required). */
    int (*expect)(const struct sim_conf *c, int cls, int tier, char *out, size_t cap, char *why,
                  size_t whylen);
};

/* A placeholder and what a template rule writes for it (NULL: the rule gives
 * no class for a template holding it). */
struct sim_subst {
    const char *ph, *rep;
};

/* Appends tpl to the string in out (cap bytes, NUL-terminated), up to the
 * first byte found in `stop`, with every placeholder of `rule` replaced
 * (the first listed wins at a position). Returns NULL, or the rule of a
 * placeholder that has no replacement (out then ends before it). */
const struct sim_subst *sim_wire_subst(const char *tpl, const char *stop,
                                       const struct sim_subst *rule, size_t nrule, char *out,
                                       size_t cap);

/* A result set's columns, from "SELECT a, b FROM t ...": the select list
 * ("*" stands for id, title, body), or one column "1" for other statements. */
struct sim_sql_cols {
    char cols[SIM_MAX_COLUMNS][32];
    char table[64];
    int n;
};

/* setup() of the SQL protocols: the columns of every class's template at the
 * tier that speaks `wire` (the last tier: SQL protocols are leaves), as an
 * array indexed by class. */
int sim_wire_sql_setup(struct sim_wire_ctx *w, const struct sim_wire *wire, void **state);
/* An id column ("id", "..._id") gets numbers, the others text. */
bool sim_wire_sql_is_id(const char *col);
/* Template check of the SQL protocols: SELECT, UPDATE, INSERT or DELETE. */
int sim_wire_sql_check(const char *tmpl, char *why, size_t whylen);

/* Expected class by the SQL template rule, shared by the SQL protocols:
 * the template with {id} and {n} as ?, {ids} as ?+ and {word} as ? (quotes
 * around it included); every other byte as written. */
int sim_wire_expect_sql(const struct sim_conf *c, int cls, int tier, char *out, size_t cap,
                        char *why, size_t whylen);

/* Every protocol the simulator speaks, in table order, and their number. */
extern const struct sim_wire *const sim_wires[];
extern const size_t sim_nwires;

/* The protocol called name, or NULL. */
const struct sim_wire *sim_wire_find(const char *name);
/* The names of the protocols having every flag in `flags`, as a list for a
 * message: "http, mysql or redis". */
void sim_wire_names(unsigned flags, char *buf, size_t cap);
/* Its index in sim_wires: the model keeps each protocol's setup() state there. */
int sim_wire_index(const struct sim_wire *wire);

extern const struct sim_wire sim_wire_http, sim_wire_mysql, sim_wire_postgres, sim_wire_redis;

#endif
