/* SPDX-License-Identifier: MIT */
/* sim.h — tbneck-sim's internal interfaces: PRNG, distributions, event heap,
 * processor-sharing server, configuration, wire writer and the model. */
#ifndef TB_SIM_H
#define TB_SIM_H

#include <stdio.h>

#include "tb.h"

/* ---------------------------------------------------------------- PRNG --- */

/* xoshiro256** seeded through splitmix64: fast, 2^256-1 period, and the same
 * stream on every platform, which is what makes a run reproducible. */
struct sim_rng {
    uint64_t s[4];
};

void sim_rng_seed(struct sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *r);
/* Uniform in the open interval (0, 1): never 0, so log() is always safe. */
double sim_rng_unit(struct sim_rng *r);
/* Uniform integer in [0, n); n > 0. */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n);

enum sim_dist_kind { SIM_DIST_CONST, SIM_DIST_EXP, SIM_DIST_UNIFORM, SIM_DIST_LOGNORMAL };

/* A random quantity. For durations the parameters are in nanoseconds.
 * const(a) | exp(mean) | uniform(lo, hi) | lognormal(mean, sigma). */
struct sim_dist {
    enum sim_dist_kind kind;
    double a, b;
    char text[64]; /* as written, echoed into PREFIX.truth.conf */
};

/* Parses "5ms", "exp(5ms)", "uniform(1s, 3s)", "lognormal(10ms, 0.5)", "3".
 * `duration` selects whether parameters carry time units (a bare number is
 * then milliseconds). Returns 0 or TB_E_INVAL with a reason in err. */
int sim_dist_parse(const char *s, bool duration, struct sim_dist *d, char *err, size_t errlen);
double sim_dist_sample(const struct sim_dist *d, struct sim_rng *r);
double sim_dist_mean(const struct sim_dist *d);

/* ---------------------------------------------------------- event heap --- */

/* Events are ordered by time, then by insertion order, so that events at the
 * same nanosecond run in the order they were scheduled: determinism does not
 * depend on the heap's internal layout. */
struct sim_event {
    int64_t t;
    uint64_t seq;
    void *obj;
    uint32_t kind;
    uint32_t gen; /* generation of obj when scheduled; stale events are skipped */
};

struct sim_heap {
    struct sim_event *v;
    size_t n, cap;
    uint64_t next_seq;
};

void sim_heap_init(struct sim_heap *h);
void sim_heap_free(struct sim_heap *h);
int sim_heap_push(struct sim_heap *h, int64_t t, uint32_t kind, void *obj, uint32_t gen);
/* Removes the earliest event into *out; false when empty. */
bool sim_heap_pop(struct sim_heap *h, struct sim_event *out);
const struct sim_event *sim_heap_peek(const struct sim_heap *h);

/* ------------------------------------------------ processor sharing ----- */

/* One server's CPUs shared by its active requests: with n active and c cores
 * each progresses at min(1, c/n) x speed (0 while frozen). Implemented with a
 * virtual clock V that advances at that per-request rate; a request admitted
 * at V0 with work w finishes when V reaches V0 + w, so only admissions, rate
 * changes and completions cost anything. Work is in nanoseconds at speed 1. */
struct sim_ps_job {
    double tag; /* V at which it is done */
    void *ud;
};

struct sim_ps {
    double v;        /* virtual clock */
    int64_t last_ns; /* time v was last advanced to */
    double speed;
    int cores;
    bool frozen;
    struct sim_ps_job *jobs;
    size_t n, cap;
    double busy_core_ns; /* integral of min(n, c)/c dt while running: utilisation */
};

void sim_ps_init(struct sim_ps *ps, int cores, double speed, int64_t now);
void sim_ps_free(struct sim_ps *ps);
/* Advances the virtual clock to now (call before any change). */
void sim_ps_advance(struct sim_ps *ps, int64_t now);
int sim_ps_add(struct sim_ps *ps, int64_t now, double work_ns, void *ud);
void sim_ps_set_speed(struct sim_ps *ps, int64_t now, double speed);
void sim_ps_set_frozen(struct sim_ps *ps, int64_t now, bool frozen);
/* Time of the next completion, or INT64_MAX when none can happen. */
int64_t sim_ps_next(const struct sim_ps *ps, int64_t now);
/* Removes one request that is done at `now` (after sim_ps_advance); returns its
 * ud, or NULL when none is. Ties leave in admission order. */
void *sim_ps_pop_done(struct sim_ps *ps);

/* ------------------------------------------------------- configuration --- */

#define SIM_MAX_TIERS 4
#define SIM_MAX_SERVERS 32
#define SIM_MAX_CLASSES 32
#define SIM_MAX_FREEZES 16
#define SIM_MAX_FREEZE_AT 256
#define SIM_MAX_SPEEDS 8
#define SIM_MAX_COLUMNS 16
#define SIM_CLASS_CAP 512 /* bytes of an expected class, NUL included */
#define SIM_TMPL_CAP 512  /* bytes of a request template, NUL included */

#define SIM_MAX_WIRES 8

struct sim_wire; /* a protocol's operations (wire.h) */

struct sim_tier_conf {
    char name[32];      /* name in the configuration ("app") */
    char wire_name[40]; /* name tbneck discovers ("http-8080"); derived unless set */
    const struct sim_wire *wire; /* the protocol its clients speak to it */
    char mode_name[16];          /* `mode` as written; checked against the protocol at finish */
    int mode;                    /* index into wire->modes (0 = the protocol's default) */
    uint16_t port;
    int servers;
    int cores;
    int threads;   /* thread pool; further requests wait in the accept queue */
    int pool;      /* connections from each server to each server of the next tier */
    int keepalive; /* requests per user connection before it closes (front tier) */
    double speeds[SIM_MAX_SPEEDS]; /* relative CPU speeds, ascending */
    int nspeeds;
    int speed_init;            /* index into speeds of the starting level */
    double speedup;            /* every speed level times this (what-if: a faster CPU) */
    int64_t governor_ns;       /* sampling period of the governor; 0 = none */
    double governor_up, governor_down;
    struct sim_dist speed_every; /* random level switching: time between switches;
                                    text empty = none */
    char host[64];             /* HTTP Host header of requests to this tier */
    bool deprecate_eof;        /* MySQL CLIENT_DEPRECATE_EOF negotiated */
};

struct sim_class_conf {
    char name[32];
    double weight;
    struct sim_dist demand[SIM_MAX_TIERS]; /* CPU work per request at each tier */
    struct sim_dist calls[SIM_MAX_TIERS];  /* downstream calls made per request */
    struct sim_dist resp_bytes[SIM_MAX_TIERS]; /* HTTP response body sizes */
    /* The request template at each tier, under its protocol's key (path,
     * sql, cmd): an HTTP target, an SQL statement, a Redis command. */
    char tmpl[SIM_MAX_TIERS][SIM_TMPL_CAP];
    char method[8];
    int req_body;                              /* bytes of a POST body */
    int status;                                /* HTTP status the front tier returns */
    /* The class tbneck must report at each tier, stated literally by
     * `class.TIER` or, when not, given by the protocol's template rule at
     * sim_conf_finish (docs/sim.md). Never computed by tbneck's own
     * fingerprint code: the truth is an independent oracle. */
    char expect[SIM_MAX_TIERS][SIM_CLASS_CAP];
    struct sim_dist rows;
    int row_bytes;                             /* size of each text column value */
    double error_rate;                         /* fraction of queries answered by ERR */
};

struct sim_freeze_conf {
    char target[48];
    int tier;
    int server; /* 0-based, or -1 for every server of the tier */
    bool random;
    struct sim_dist every, length;
    int64_t at_ns[SIM_MAX_FREEZE_AT], len_ns[SIM_MAX_FREEZE_AT];
    int nat;
};

/* The diagnosis the configuration expects tbneck to give ([expect]). */
struct sim_expect_conf {
    bool set;
    char target[48]; /* as written: TIER or TIER/N; empty with cause none */
    int tier;        /* -1 when none is expected */
    int server;      /* 0-based, or -1 for the whole tier ("*") */
    char cause[16];  /* cpu, freeze, speed, pool, threads or none */
};

struct sim_conf {
    uint64_t seed;
    int64_t start_ns;    /* wall-clock time of the first packet */
    int64_t duration_ns; /* users stop starting pages after this */
    int64_t warmup_ns;   /* users start spread over this ramp */
    int users;
    struct sim_dist think;
    bool burst;
    struct sim_dist burst_on, burst_off;
    double burst_factor; /* think time multiplier while a burst is on */
    double link_gbps;
    int64_t ack_delay_ns;
    int64_t rtt_ns;
    int mss;
    bool per_user; /* streams = per-user: each user's pages draw from its own stream */
    bool ipv6;     /* hosts get fd00::T:N instead of 10.0.T.N */
    uint16_t vlan; /* 802.1Q tag on every frame; 0 = untagged */
    struct sim_tier_conf tiers[SIM_MAX_TIERS];
    int ntiers;
    struct sim_class_conf classes[SIM_MAX_CLASSES];
    int nclasses;
    struct sim_freeze_conf freezes[SIM_MAX_FREEZES];
    int nfreezes;
    struct sim_expect_conf expect;
};

void sim_conf_defaults(struct sim_conf *c);
/* Parses configuration text; `name` is used in messages. On error returns a
 * negative TB_E_* and writes one line "name:LINE: what is wrong" into err. */
int sim_conf_parse(struct sim_conf *c, const char *text, const char *name, char *err,
                   size_t errlen);
int sim_conf_load(struct sim_conf *c, const char *path, char *err, size_t errlen);
/* One override "SECTION.KEY=VALUE" (tbneck-sim --set), applied after the
 * file and before sim_conf_finish: sim.KEY, tier.NAME.KEY, class.NAME.KEY,
 * freeze.N.KEY (N 1-based) or expect.KEY, with the file's keys and checks.
 * On error returns a negative TB_E_* and writes "--set ASSIGNMENT: why". */
int sim_conf_set(struct sim_conf *c, const char *assignment, char *err, size_t errlen);
/* "1/2/1": servers per tier in order. */
int sim_conf_set_servers(struct sim_conf *c, const char *spec, char *err, size_t errlen);
/* Checks cross-references and fills derived fields (wire names). */
int sim_conf_finish(struct sim_conf *c, char *err, size_t errlen);
int sim_conf_write(const struct sim_conf *c, FILE *f);
int sim_conf_tier_index(const struct sim_conf *c, const char *name);

/* ------------------------------------------------------------- output --- */

struct sim_impair {
    double drop, reorder, duplicate;
    int snaplen;             /* 0 = whole packets */
    int64_t capture_from_ns; /* the tap starts here (absolute); 0 = from the start */
};

/* Everything a run writes: the pcap (through the impairments) and the truth. */
struct sim_out {
    FILE *pcap, *requests, *freezes, *speed, *expected, *conf, *dropped, *conns, *causes,
        *verdict;
    struct sim_impair imp;
    struct sim_rng rng; /* impairments draw from their own stream: the run stays the same */
    uint8_t *held;      /* a packet held back to be written after its successor */
    size_t held_len, held_orig;
    int64_t held_ts;
    uint64_t packets, written, dropped_n, reordered, duplicated, bytes;
    bool ipv6; /* how addresses are named in dropped.csv */
};

/* What dropped.csv records about a packet that was left out of the pcap. */
struct sim_pkt_meta {
    uint8_t src[4], dst[4];
    uint16_t sport, dport;
    uint32_t seq;
    uint32_t payload;
    uint8_t flags;
};

/* Opens PREFIX.pcap and the truth files. */
int sim_out_open(struct sim_out *o, const char *prefix, const struct sim_impair *imp,
                 uint64_t seed, char *err, size_t errlen);
/* Writes one frame (through the impairments) at ts. */
int sim_out_packet(struct sim_out *o, int64_t ts, const uint8_t *frame, size_t len,
                   const struct sim_pkt_meta *meta);
/* Flushes and closes everything; returns 0 or TB_E_IO. */
int sim_out_close(struct sim_out *o);
/* A host's endpoint as tbneck prints it: "10.0.T.N:port", or with ipv6
 * "[fd00::T:N]:port" (the same host numbering). */
void sim_fmt_addr(char *buf, size_t n, const uint8_t ip4[4], uint16_t port, bool ipv6);

struct sim_stats {
    uint64_t packets, packets_written, dropped, reordered, duplicated;
    uint64_t bytes;
    uint64_t requests[SIM_MAX_TIERS];
    uint64_t pages;
    uint64_t freezes, speed_changes;
};

/* Runs the whole simulation of conf into out. */
int sim_run(const struct sim_conf *conf, struct sim_out *out, struct sim_stats *st, char *err,
            size_t errlen);
/* Writes PREFIX.expected.csv: the expected N* of each server and tier. */
int sim_write_expected(const struct sim_conf *conf, FILE *f);
/* Writes PREFIX.verdict.csv: the [expect] section as tier, server, cause
 * (nothing below the header when the configuration states none). */
int sim_write_verdict(const struct sim_conf *conf, FILE *f);

#endif
