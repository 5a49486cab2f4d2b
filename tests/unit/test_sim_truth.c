/* SPDX-License-Identifier: MIT */
/* test_sim_truth.c — the simulator's truth for diagnosis and linking, checked
 * against what it wrote on the wire and against each other: connections.csv
 * equals the connections in the pcap (4-tuple, first and last packet, SYN,
 * FIN, pool sizes) and the requests each carried; every request's parent is
 * an upstream request on the calling host whose life contains the child's;
 * cause intervals are ordered and disjoint, freezes equal freezes.csv, and
 * pool, threads and cpu labels start only where the requests show the
 * resource full. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../sim/sim.h"

/* app has 2 connections to the database per server, 6 threads and one
 * core; the database 2 threads and 2 cores (so its queue is for threads,
 * not CPU); app/2 freezes once. */
static const char conf_text[] = "[sim]\n"
                                "seed = 11\n"
                                "duration = 1200ms\n"
                                "warmup = 100ms\n"
                                "users = 70\n"
                                "think_time = exp(40ms)\n"
                                "[tier web]\n"
                                "cores = 2\n"
                                "pool = 8\n"
                                "keepalive = 5\n"
                                "[tier app]\n"
                                "port = 8080\n"
                                "servers = 2\n"
                                "threads = 6\n"
                                "pool = 2\n"
                                "[tier db]\n"
                                "proto = mysql\n"
                                "port = 3306\n"
                                "cores = 2\n"
                                "threads = 2\n"
                                "[class A]\n"
                                "demand.app = exp(1ms)\n"
                                "demand.db = exp(700us)\n"
                                "queries = 3\n"
                                "[freeze]\n"
                                "server = app/2\n"
                                "at = 300ms:60ms\n";

#define MAXF 24

/* RFC 4180 fields of one line (no line breaks inside fields here). */
static int split(char *line, char **f)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    char *p = line;
    for (;;) {
        assert_true(n < MAXF);
        if (*p == '"') {
            char *w = ++p;
            f[n++] = w;
            while (!(p[0] == '"' && p[1] != '"')) {
                assert_true(*p != 0);
                if (*p == '"')
                    p++; /* a doubled quote */
                *w++ = *p++;
            }
            p++;
            *w = 0;
        } else {
            f[n++] = p;
            p += strcspn(p, ",");
        }
        if (*p != ',')
            return n;
        *p++ = 0;
    }
}

struct req {
    char tier[16], server[32], client[32], cls[16];
    uint64_t conn, id, parent;
    int64_t arr, dep;
};

struct cn {
    char client[32], server[32], ctier[16], stier[16];
    uint64_t id;
    int64_t first, last;
    int syn, nreq;
    int64_t fin; /* -1: none */
    bool matched;
};

struct pk { /* one connection as the pcap shows it */
    char client[32], server[32];
    int64_t first, last;
    int syn;
    int64_t fin; /* the last FIN, -1: none */
};

struct iv {
    char server[32], cause[16];
    int64_t a, b;
};

static struct req *reqs;
static size_t nreqs;
static struct cn cns[4096];
static size_t ncns;
static struct pk pks[4096];
static size_t npks;
static struct iv ivs[200000];
static size_t nivs;

static FILE *open_out(const char *prefix, const char *sfx, const char *header)
{
    char path[300], line[1024];
    snprintf(path, sizeof path, "%s.%s", prefix, sfx);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    if (header) {
        assert_non_null(fgets(line, sizeof line, f));
        assert_string_equal(line, header);
    }
    return f;
}

static void load(const char *prefix)
{
    char line[2048], *f[MAXF];
    FILE *in = open_out(prefix, "requests.csv", "tier,server,client,conn,class,fingerprint,"
                                                "arrival_ns,departure_ns,status,id,parent\n");
    size_t cap = 1024;
    nreqs = 0;
    reqs = realloc(reqs, cap * sizeof *reqs);
    while (fgets(line, sizeof line, in)) {
        assert_int_equal(split(line, f), 11);
        if (nreqs == cap)
            reqs = realloc(reqs, (cap *= 2) * sizeof *reqs);
        assert_non_null(reqs);
        struct req *r = &reqs[nreqs++];
        snprintf(r->tier, sizeof r->tier, "%s", f[0]);
        snprintf(r->server, sizeof r->server, "%s", f[1]);
        snprintf(r->client, sizeof r->client, "%s", f[2]);
        snprintf(r->cls, sizeof r->cls, "%s", f[4]);
        r->conn = strtoull(f[3], NULL, 10);
        r->arr = strtoll(f[6], NULL, 10);
        r->dep = strtoll(f[7], NULL, 10);
        r->id = strtoull(f[9], NULL, 10);
        r->parent = strtoull(f[10], NULL, 10); /* empty: 0 */
    }
    fclose(in);
    in = open_out(prefix, "connections.csv",
                  "conn,client,server,client_tier,server_tier,first_ns,last_ns,syn,fin_ns,requests\n");
    ncns = 0;
    while (fgets(line, sizeof line, in)) {
        assert_int_equal(split(line, f), 10);
        assert_true(ncns < TB_ARRAY_SIZE(cns));
        struct cn *c = &cns[ncns++];
        *c = (struct cn){.id = strtoull(f[0], NULL, 10),
                         .first = strtoll(f[5], NULL, 10),
                         .last = strtoll(f[6], NULL, 10),
                         .syn = atoi(f[7]),
                         .fin = f[8][0] ? strtoll(f[8], NULL, 10) : -1,
                         .nreq = atoi(f[9])};
        snprintf(c->client, sizeof c->client, "%s", f[1]);
        snprintf(c->server, sizeof c->server, "%s", f[2]);
        snprintf(c->ctier, sizeof c->ctier, "%s", f[3]);
        snprintf(c->stier, sizeof c->stier, "%s", f[4]);
    }
    fclose(in);
    in = open_out(prefix, "causes.csv", "server,tier,start_ns,end_ns,cause\n");
    nivs = 0;
    while (fgets(line, sizeof line, in)) {
        assert_int_equal(split(line, f), 5);
        assert_true(nivs < TB_ARRAY_SIZE(ivs));
        struct iv *v = &ivs[nivs++];
        snprintf(v->server, sizeof v->server, "%s", f[0]);
        snprintf(v->cause, sizeof v->cause, "%s", f[4]);
        v->a = strtoll(f[2], NULL, 10);
        v->b = strtoll(f[3], NULL, 10);
    }
    fclose(in);
}

/* The pcap's connections, keyed by (client, server): the SYN's sender is the
 * client; mid-stream, the side on a server port (8080, 3306, 80) is the server. */
static void read_pcap(const char *prefix)
{
    FILE *f = open_out(prefix, "pcap", NULL);
    uint32_t gh[6], rec[4];
    uint8_t pkt[65536];
    assert_int_equal(fread(gh, sizeof gh, 1, f), 1);
    npks = 0;
    while (fread(rec, sizeof rec, 1, f) == 1) {
        assert_true(rec[2] <= sizeof pkt);
        assert_int_equal(fread(pkt, 1, rec[2], f), rec[2]);
        int64_t ts = (int64_t)rec[0] * TB_NS_PER_SEC + rec[1];
        const uint8_t *ip = pkt + 14, *tcp = ip + 20;
        uint16_t sp = (uint16_t)(tcp[0] << 8 | tcp[1]), dp = (uint16_t)(tcp[2] << 8 | tcp[3]);
        bool to_server = dp == 80 || dp == 8080 || dp == 3306;
        char a[32], b[32];
        snprintf(a, sizeof a, "%u.%u.%u.%u:%u", ip[12], ip[13], ip[14], ip[15], sp);
        snprintf(b, sizeof b, "%u.%u.%u.%u:%u", ip[16], ip[17], ip[18], ip[19], dp);
        const char *cl = to_server ? a : b, *sv = to_server ? b : a;
        struct pk *k = NULL;
        for (size_t i = npks; i-- > 0;)
            if (!strcmp(pks[i].client, cl) && !strcmp(pks[i].server, sv)) {
                k = &pks[i];
                break;
            }
        if (!k) {
            assert_true(npks < TB_ARRAY_SIZE(pks));
            k = &pks[npks++];
            *k = (struct pk){.first = ts, .fin = -1};
            snprintf(k->client, sizeof k->client, "%s", cl);
            snprintf(k->server, sizeof k->server, "%s", sv);
        }
        k->last = ts;
        if ((tcp[13] & 0x12) == 0x02)
            k->syn = 1;
        if (tcp[13] & 0x01)
            k->fin = ts;
    }
    fclose(f);
}

static void run_set(const char *prefix, int64_t capture_from_ms, const char *const *sets)
{
    static struct sim_conf c;
    char err[256] = "";
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c, conf_text, "truth", err, sizeof err), 0);
    for (; sets && *sets; sets++) {
        sim_conf_set(&c, *sets, err, sizeof err);
        assert_string_equal(err, "");
    }
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    struct sim_out out;
    struct sim_impair imp = {.capture_from_ns = capture_from_ms
                                                    ? c.start_ns + capture_from_ms * TB_NS_PER_MS
                                                    : 0};
    assert_int_equal(sim_out_open(&out, prefix, &imp, c.seed, err, sizeof err), 0);
    struct sim_stats st;
    assert_int_equal(sim_run(&c, &out, &st, err, sizeof err), 0);
    assert_int_equal(sim_out_close(&out), 0);
    load(prefix);
    read_pcap(prefix);
}

static void run(const char *prefix, int64_t capture_from_ms)
{
    run_set(prefix, capture_from_ms, NULL);
}

/* The tier of a client's host: 10.0.1.x are users, 10.0.T.x servers of tier T-2. */
static const char *tier_of_host(const char *addr)
{
    static const char *const names[] = {"", "http", "http-8080", "mysql"};
    int t = addr[5] - '0'; /* "10.0.T." */
    assert_true(t >= 1 && t <= 4);
    return names[t - 1];
}

static void check_connections(int64_t capture_from_ns)
{
    /* One row per connection the pcap shows, as it shows it. */
    assert_int_equal(ncns, npks);
    for (size_t i = 0; i < npks; i++) {
        const struct pk *k = &pks[i];
        struct cn *c = NULL;
        for (size_t j = 0; j < ncns; j++)
            if (!strcmp(cns[j].client, k->client) && !strcmp(cns[j].server, k->server) &&
                !cns[j].matched)
                c = &cns[j];
        assert_non_null(c);
        c->matched = true;
        assert_int_equal(c->first, k->first);
        assert_int_equal(c->last, k->last);
        assert_int_equal(c->syn, k->syn);
        assert_int_equal(c->fin, k->fin);
        assert_true(c->first >= capture_from_ns);
        assert_string_equal(c->ctier, tier_of_host(c->client));
        int nreq = 0;
        for (size_t r = 0; r < nreqs; r++)
            if (reqs[r].conn == c->id) {
                nreq++;
                assert_string_equal(reqs[r].client, c->client);
                assert_string_equal(reqs[r].server, c->server);
                assert_string_equal(reqs[r].tier, c->stier);
            }
        assert_int_equal(c->nreq, nreq);
    }
}

static const struct req *find_req(uint64_t id)
{
    /* ids are issued in order; rows are written at departure: search. */
    for (size_t i = 0; i < nreqs; i++)
        if (reqs[i].id == id)
            return &reqs[i];
    return NULL;
}

static void check_parents(bool complete)
{
    size_t linked = 0;
    for (size_t i = 0; i < nreqs; i++) {
        const struct req *r = &reqs[i];
        for (size_t j = i + 1; j < nreqs && j < i + 64; j++)
            assert_true(reqs[j].id != r->id);
        if (!strcmp(r->tier, "http")) {
            assert_int_equal(r->parent, 0);
            continue;
        }
        assert_true(r->parent != 0);
        const struct req *p = find_req(r->parent);
        if (!p) {
            /* Only a tap started late misses a parent: it began before. */
            assert_false(complete);
            continue;
        }
        linked++;
        assert_string_equal(p->tier, !strcmp(r->tier, "mysql") ? "http-8080" : "http");
        /* Issued by the parent's server host, during the parent's life. */
        assert_memory_equal(p->server, r->client, strcspn(p->server, ":") + 1);
        assert_true(p->arr <= r->arr && r->dep <= p->dep);
    }
    assert_true(linked > 1000);
}

/* In-flight requests at a server at t, from the request truth alone. */
static int in_flight(const char *server, int64_t t)
{
    int n = 0;
    for (size_t i = 0; i < nreqs; i++)
        n += !strcmp(reqs[i].server, server) && reqs[i].arr <= t && t <= reqs[i].dep;
    return n;
}

/* Downstream calls in flight from a host to one server at t. */
static int calls_out(const char *from, const char *to, int64_t t)
{
    int n = 0;
    size_t hl = strcspn(from, ":") + 1;
    for (size_t i = 0; i < nreqs; i++)
        n += !strcmp(reqs[i].server, to) && !strncmp(reqs[i].client, from, hl) &&
             reqs[i].arr <= t + 1000 && t <= reqs[i].dep;
    return n;
}

static void check_causes(const char *prefix)
{
    int seen[5] = {0};
    bool seen_app_pool = false;
    static const char *const kinds[] = {"cpu", "freeze", "pool", "threads", "speed"};
    for (size_t i = 0; i < nivs; i++) {
        const struct iv *v = &ivs[i];
        assert_true(v->a < v->b);
        /* Disjoint and in order per server. */
        for (size_t j = i + 1; j < nivs; j++)
            if (!strcmp(ivs[j].server, v->server)) {
                assert_true(ivs[j].a >= v->b);
                break;
            }
        int k = 0;
        while (k < 5 && strcmp(v->cause, kinds[k]))
            k++;
        assert_true(k < 5);
        seen[k]++;
        if (!strcmp(v->cause, "pool")) {
            /* Every connection from this server to one server of the next tier
             * is busy: 8 from web to an app server, 2 from app to the database. */
            bool web = !strncmp(v->server, "10.0.2.", 7);
            assert_true(web || !strncmp(v->server, "10.0.3.", 7));
            int full = web ? TB_MAX(calls_out(v->server, "10.0.3.1:8080", v->a),
                                    calls_out(v->server, "10.0.3.2:8080", v->a))
                           : calls_out(v->server, "10.0.4.1:3306", v->a);
            assert_int_equal(full, web ? 8 : 2);
            seen_app_pool |= !web;
        } else if (!strcmp(v->cause, "threads")) {
            int threads = !strncmp(v->server, "10.0.4.", 7) ? 2 : 6;
            assert_true(in_flight(v->server, v->a) >= threads + 1);
        } else if (!strcmp(v->cause, "cpu")) {
            int cores = !strncmp(v->server, "10.0.3.", 7) ? 1 : 2;
            assert_true(in_flight(v->server, v->a) >= cores + 1);
        }
    }
    assert_true(seen[0] > 0 && seen[3] > 0 && seen_app_pool); /* cpu, threads, pool */
    assert_int_equal(seen[4], 0);                           /* one speed only */
    /* Freeze labels are exactly the freezes. */
    char line[256], *f[MAXF];
    FILE *in = open_out(prefix, "freezes.csv", "server,start_ns,end_ns\n");
    int nfz = 0;
    while (fgets(line, sizeof line, in)) {
        assert_int_equal(split(line, f), 3);
        int64_t a = strtoll(f[1], NULL, 10), b = strtoll(f[2], NULL, 10);
        bool found = false;
        for (size_t i = 0; i < nivs; i++)
            found |= !strcmp(ivs[i].cause, "freeze") && !strcmp(ivs[i].server, f[0]) &&
                     ivs[i].a == a && ivs[i].b == b;
        assert_true(found);
        nfz++;
    }
    fclose(in);
    assert_int_equal(nfz, 1);
    assert_int_equal(seen[1], 1);
}

static void cleanup(const char *dir, const char *prefix)
{
    static const char *const sfx[] = {"pcap",         "requests.csv", "freezes.csv",
                                      "speed.csv",    "expected.csv", "truth.conf",
                                      "dropped.csv",  "connections.csv", "causes.csv",
                                      "verdict.csv"};
    char path[300];
    for (size_t i = 0; i < TB_ARRAY_SIZE(sfx); i++) {
        snprintf(path, sizeof path, "%s.%s", prefix, sfx[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

static void test_truth_complete(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sim_truth.XXXXXX", prefix[256];
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    run(prefix, 0);
    check_connections(0);
    /* Every pool seen whole: 8 per web->app server pair, 2 per app->db. */
    int pooled[2] = {0};
    for (size_t i = 0; i < ncns; i++) {
        pooled[0] += !strcmp(cns[i].ctier, "http");
        pooled[1] += !strcmp(cns[i].ctier, "http-8080");
        if (cns[i].ctier[0])
            assert_int_equal(cns[i].syn, 1);
    }
    assert_int_equal(pooled[0], 8 * 2);
    assert_int_equal(pooled[1], 2 * 2);
    check_parents(true);
    check_causes(prefix);
    cleanup(dir, prefix);
}

static void test_truth_late_tap(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sim_truth.XXXXXX", prefix[256];
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    run(prefix, 500);
    int64_t from = INT64_C(1700000000) * TB_NS_PER_SEC + 500 * TB_NS_PER_MS;
    check_connections(from);
    /* Pooled connections opened before the tap: listed, without a SYN. */
    int mid = 0;
    for (size_t i = 0; i < ncns; i++)
        mid += cns[i].ctier[0] && !cns[i].syn;
    assert_true(mid >= 8);
    check_parents(false);
    cleanup(dir, prefix);
}

/* speed_every: a switch after every interval, to another level, in shuffled
 * rounds: from the level a round starts at, its switches visit every other
 * level once. */
static void test_speed_rounds(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sim_truth.XXXXXX", prefix[256], err[256] = "", line[256], *f[MAXF];
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    static struct sim_conf c;
    sim_conf_defaults(&c);
    assert_int_equal(sim_conf_parse(&c,
                                    "[sim]\nduration = 2s\nusers = 5\n[tier web]\n"
                                    "speeds = 0.45, 0.7, 1.0\nspeed_init = 2\n"
                                    "speed_every = 100ms\n[class A]\n",
                                    "speed", err, sizeof err),
                     0);
    assert_int_equal(sim_conf_finish(&c, err, sizeof err), 0);
    struct sim_out out;
    struct sim_impair imp = {0};
    struct sim_stats st;
    assert_int_equal(sim_out_open(&out, prefix, &imp, c.seed, err, sizeof err), 0);
    assert_int_equal(sim_run(&c, &out, &st, err, sizeof err), 0);
    assert_int_equal(sim_out_close(&out), 0);
    FILE *in = open_out(prefix, "speed.csv", "server,t_ns,speed\n");
    double lv[64];
    int64_t t[64];
    int n = 0;
    while (fgets(line, sizeof line, in)) {
        assert_int_equal(split(line, f), 3);
        assert_true(n < 64);
        t[n] = strtoll(f[1], NULL, 10);
        lv[n++] = atof(f[2]);
    }
    fclose(in);
    /* The start, then one switch per 100 ms from the users' start until 2 s. */
    assert_true(n >= 18 && n <= 21);
    assert_int_equal(st.speed_changes, n - 1);
    for (int i = 2; i < n; i++)
        assert_int_equal(t[i] - t[i - 1], 100 * TB_NS_PER_MS);
    for (int i = 1; i < n; i++)
        assert_true(lv[i] != lv[i - 1]);
    /* Rounds: from the level a round starts at, its two switches visit the
     * two other levels. */
    for (int r = 0; r + 2 < n; r += 2)
        assert_true(lv[r] != lv[r + 1] && lv[r] != lv[r + 2] && lv[r + 1] != lv[r + 2]);
    cleanup(dir, prefix);
}

/* Each user's pages as (class, database calls), in order, by user address
 * (the 70 users have one address each), written into sig as text. */
static void page_sequences(char *sig, size_t cap)
{
    uint64_t maxid = 0;
    for (size_t i = 0; i < nreqs; i++)
        maxid = TB_MAX(maxid, reqs[i].id);
    size_t *at = calloc(maxid + 1, sizeof *at); /* id -> row + 1 */
    int *calls = calloc(maxid + 1, sizeof *calls);
    assert_non_null(at);
    assert_non_null(calls);
    for (size_t i = 0; i < nreqs; i++)
        at[reqs[i].id] = i + 1;
    for (size_t i = 0; i < nreqs; i++)
        if (!strcmp(reqs[i].tier, "mysql")) {
            const struct req *app = &reqs[at[reqs[i].parent] - 1];
            calls[app->parent]++;
        }
    size_t o = 0;
    for (int u = 1; u <= 70; u++) {
        char ip[16];
        snprintf(ip, sizeof ip, "10.0.1.%d:", u);
        /* Rows are in departure order; a user's pages do not overlap. */
        o += (size_t)snprintf(sig + o, cap - o, "%d:", u);
        for (size_t i = 0; i < nreqs && o < cap; i++)
            if (!strcmp(reqs[i].tier, "http") && !strncmp(reqs[i].client, ip, strlen(ip)))
                o += (size_t)snprintf(sig + o, cap - o, "%s/%d ", reqs[i].cls,
                                      calls[reqs[i].id]);
        o += (size_t)snprintf(sig + o, cap - o, "\n");
        assert_true(o < cap);
    }
    free(at);
    free(calls);
}

/* Compares two signatures user by user over the pages both runs made:
 * returns how many pages agree, or -1 at the first that does not. */
static long same_workload(const char *a, const char *b)
{
    long pages = 0;
    while (*a && *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        const char *pa = a, *pb = b;
        for (;;) {
            const char *sa = memchr(pa, ' ', (size_t)(ea - pa)), *sb = memchr(pb, ' ', (size_t)(eb - pb));
            if (!sa || !sb)
                break;
            if (sa - pa != sb - pb || memcmp(pa, pb, (size_t)(sa - pa)))
                return -1;
            pages++;
            pa = sa + 1, pb = sb + 1;
        }
        a = ea + 1, b = eb + 1;
    }
    return pages;
}

/* streams = per-user: a run with one resource changed (the database twice as
 * fast, another core, larger pools, bursts on) replays every user's pages
 * (class and number of queries) as long as both runs go; with one shared
 * stream they part at once. The runs differ: the comparison is not trivial. */
static void test_same_workload(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sim_truth.XXXXXX", prefix[256];
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    static char base[1 << 16], other[1 << 16];
#define BURSTS "sim.burst=true", "sim.burst_on=exp(100ms)", "sim.burst_off=exp(200ms)"
    static const char *const per_user[] = {"sim.streams=per-user", BURSTS,
                                           "class.A.queries=uniform(1, 5)", NULL};
    static const char *const changed[] = {"sim.streams=per-user", BURSTS,
                                          "class.A.queries=uniform(1, 5)", "tier.db.speedup=2",
                                          "tier.db.cores=3", "tier.app.pool=6", NULL};
    static const char *const shared[] = {BURSTS, "class.A.queries=uniform(1, 5)", NULL};
    static const char *const shared_changed[] = {BURSTS, "class.A.queries=uniform(1, 5)",
                                                 "tier.db.speedup=2", NULL};
#undef BURSTS
    run_set(prefix, 0, per_user);
    page_sequences(base, sizeof base);
    size_t n0 = nreqs;
    run_set(prefix, 0, changed);
    page_sequences(other, sizeof other);
    assert_true(nreqs != n0 || strcmp(base, other)); /* the change changed the run */
    long pages = same_workload(base, other);
    printf("per-user streams: %ld pages alike in both runs (%zu and %zu requests)\n", pages, n0,
           nreqs);
    assert_true(pages > 500);
    run_set(prefix, 0, shared);
    page_sequences(base, sizeof base);
    run_set(prefix, 0, shared_changed);
    page_sequences(other, sizeof other);
    assert_int_equal(same_workload(base, other), -1);
    cleanup(dir, prefix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truth_complete),
        cmocka_unit_test(test_truth_late_tap),
        cmocka_unit_test(test_speed_rounds),
        cmocka_unit_test(test_same_workload),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(reqs);
    return rc;
}
