/* SPDX-License-Identifier: MIT */
/* out.c — writes the nanosecond pcap through the capture impairments (drop,
 * reorder, duplicate, snaplen), opens the truth files beside it and writes
 * those that follow from the configuration alone (expected N*, verdict). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define PCAP_MAGIC_NS 0xa1b23c4du
#define LINKTYPE_ETHERNET 1
#define HELD_CAP 65536
#define OUT_BUFSZ (1 << 20)

static FILE *open_file(const char *prefix, const char *suffix, char *err, size_t errlen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s%s", prefix, suffix) >= sizeof path) {
        snprintf(err, errlen, "%s%s: path too long", prefix, suffix);
        return NULL;
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    else
        setvbuf(f, NULL, _IOFBF, OUT_BUFSZ);
    return f;
}

int sim_out_open(struct sim_out *o, const char *prefix, const struct sim_impair *imp,
                 uint64_t seed, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->imp = *imp;
    /* A stream of its own, so impairing a capture never changes the run. */
    sim_rng_seed(&o->rng, seed ^ UINT64_C(0x5eed1a9a1badcafe));
    o->held = malloc(HELD_CAP);
    if (!o->held) {
        snprintf(err, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    static const struct {
        const char *suffix;
        size_t off;
        const char *header;
    } files[] = {
        {".pcap", offsetof(struct sim_out, pcap), NULL},
        {".requests.csv", offsetof(struct sim_out, requests),
         "tier,server,client,conn,class,fingerprint,arrival_ns,departure_ns,status,id,parent\n"},
        {".freezes.csv", offsetof(struct sim_out, freezes), "server,start_ns,end_ns\n"},
        {".speed.csv", offsetof(struct sim_out, speed), "server,t_ns,speed\n"},
        {".expected.csv", offsetof(struct sim_out, expected),
         "tier,server,cores,expected_n_star\n"},
        {".truth.conf", offsetof(struct sim_out, conf), NULL},
        {".dropped.csv", offsetof(struct sim_out, dropped), "t_ns,src,dst,seq,len,flags\n"},
        {".connections.csv", offsetof(struct sim_out, conns),
         "conn,client,server,client_tier,server_tier,first_ns,last_ns,syn,fin_ns,requests\n"},
        {".causes.csv", offsetof(struct sim_out, causes), "server,tier,start_ns,end_ns,cause\n"},
        {".verdict.csv", offsetof(struct sim_out, verdict), "tier,server,cause\n"},
    };
    for (size_t i = 0; i < TB_ARRAY_SIZE(files); i++) {
        FILE *f = open_file(prefix, files[i].suffix, err, errlen);
        if (!f) {
            sim_out_close(o);
            return TB_E_IO;
        }
        *(FILE **)((char *)o + files[i].off) = f;
        if (files[i].header)
            fputs(files[i].header, f);
    }
    uint32_t hdr[6] = {PCAP_MAGIC_NS, 2 | (4u << 16), 0, 0,
                       imp->snaplen > 0 ? (uint32_t)imp->snaplen : 262144u, LINKTYPE_ETHERNET};
    fwrite(hdr, sizeof hdr, 1, o->pcap);
    return 0;
}

static void write_frame(struct sim_out *o, int64_t ts, const uint8_t *frame, size_t len)
{
    size_t cap = len;
    if (o->imp.snaplen > 0 && cap > (size_t)o->imp.snaplen)
        cap = (size_t)o->imp.snaplen;
    uint32_t rec[4] = {(uint32_t)(ts / TB_NS_PER_SEC), (uint32_t)(ts % TB_NS_PER_SEC),
                       (uint32_t)cap, (uint32_t)len};
    fwrite(rec, sizeof rec, 1, o->pcap);
    fwrite(frame, 1, cap, o->pcap);
    o->written++;
    o->bytes += len;
}

void sim_fmt_addr(char *buf, size_t n, const uint8_t ip[4], uint16_t port, bool ipv6)
{
    if (ipv6)
        snprintf(buf, n, "[fd00::%x:%x]:%u", ip[2], ip[3], port);
    else
        snprintf(buf, n, "%u.%u.%u.%u:%u", ip[0], ip[1], ip[2], ip[3], port);
}

int sim_out_packet(struct sim_out *o, int64_t ts, const uint8_t *frame, size_t len,
                   const struct sim_pkt_meta *meta)
{
    /* A tap started late sees nothing before; the truth then starts there too. */
    if (ts < o->imp.capture_from_ns)
        return 0;
    o->packets++;
    if (o->imp.drop > 0 && sim_rng_unit(&o->rng) < o->imp.drop) {
        char s[48], d[48], fl[8];
        int k = 0;
        static const char names[] = "FSRPAU";
        for (int b = 0; b < 6; b++)
            if (meta->flags & (1u << b))
                fl[k++] = names[b];
        fl[k] = 0;
        sim_fmt_addr(s, sizeof s, meta->src, meta->sport, o->ipv6);
        sim_fmt_addr(d, sizeof d, meta->dst, meta->dport, o->ipv6);
        fprintf(o->dropped, "%" PRId64 ",%s,%s,%" PRIu32 ",%" PRIu32 ",%s\n", ts, s, d, meta->seq,
                meta->payload, fl);
        o->dropped_n++;
        return 0;
    }
    if (o->imp.reorder > 0 && o->held_len == 0 && len <= HELD_CAP &&
        sim_rng_unit(&o->rng) < o->imp.reorder) {
        /* Swapped with its successor; each keeps its own timestamp, as a tap
         * that stamps on the wire but hands packets over out of order would. */
        memcpy(o->held, frame, len);
        o->held_len = len;
        o->held_ts = ts;
        o->reordered++;
        return 0;
    }
    write_frame(o, ts, frame, len);
    if (o->imp.duplicate > 0 && sim_rng_unit(&o->rng) < o->imp.duplicate) {
        write_frame(o, ts, frame, len);
        o->duplicated++;
    }
    if (o->held_len) {
        write_frame(o, o->held_ts, o->held, o->held_len);
        o->held_len = 0;
    }
    return 0;
}

int sim_out_close(struct sim_out *o)
{
    int rc = 0;
    if (o->held_len && o->pcap) {
        write_frame(o, o->held_ts, o->held, o->held_len);
        o->held_len = 0;
    }
    FILE **fs[] = {&o->pcap,    &o->requests, &o->freezes, &o->speed, &o->expected,
                   &o->conf,    &o->dropped,  &o->conns,   &o->causes, &o->verdict};
    for (size_t i = 0; i < TB_ARRAY_SIZE(fs); i++) {
        if (!*fs[i])
            continue;
        if (ferror(*fs[i]) || fclose(*fs[i]) != 0)
            rc = TB_E_IO;
        *fs[i] = NULL;
    }
    free(o->held);
    o->held = NULL;
    return rc;
}

/* Server s (0-based) of tier t as tbneck prints it. */
static void server_addr(const struct sim_conf *c, int t, int s, char *buf, size_t n)
{
    const uint8_t ip[4] = {10, 0, (uint8_t)(2 + t), (uint8_t)(1 + s)};
    sim_fmt_addr(buf, n, ip, c->tiers[t].port, c->ipv6);
}

int sim_write_verdict(const struct sim_conf *c, FILE *f)
{
    const struct sim_expect_conf *e = &c->expect;
    if (e->set) {
        char addr[48] = "*";
        if (e->tier >= 0 && e->server >= 0)
            server_addr(c, e->tier, e->server, addr, sizeof addr);
        fprintf(f, "%s,%s,%s\n", e->tier >= 0 ? c->tiers[e->tier].wire_name : "",
                e->tier >= 0 ? addr : "", e->cause);
    }
    return ferror(f) ? TB_E_IO : 0;
}

int sim_write_expected(const struct sim_conf *c, FILE *f)
{
    /* A CPU-bound server congests once its cores are all busy. A request in a
     * tier that calls downstream is on the CPU only for the fraction D/R of
     * its stay (D its CPU demand, R its uncongested residence: D plus the
     * residence of its calls at the next tier), so the load at the knee is
     * cores x R/D; for the last tier R = D and N* = cores. Means are weighted
     * by how often each class visits the tier. */
    double visits[SIM_MAX_CLASSES][SIM_MAX_TIERS], res[SIM_MAX_CLASSES][SIM_MAX_TIERS + 1];
    for (int k = 0; k < c->nclasses; k++) {
        const struct sim_class_conf *cl = &c->classes[k];
        double v = cl->weight;
        for (int t = 0; t < c->ntiers; t++) {
            visits[k][t] = v;
            v *= t + 1 < c->ntiers ? sim_dist_mean(&cl->calls[t]) : 0;
        }
        res[k][c->ntiers] = 0;
        for (int t = c->ntiers - 1; t >= 0; t--) {
            double calls = t + 1 < c->ntiers ? sim_dist_mean(&cl->calls[t]) : 0;
            res[k][t] = sim_dist_mean(&cl->demand[t]) + calls * res[k][t + 1];
        }
    }
    for (int t = 0; t < c->ntiers; t++) {
        const struct sim_tier_conf *tc = &c->tiers[t];
        double vd = 0, vr = 0;
        for (int k = 0; k < c->nclasses; k++) {
            vd += visits[k][t] * sim_dist_mean(&c->classes[k].demand[t]);
            vr += visits[k][t] * res[k][t];
        }
        double nstar = vd > 0 ? tc->cores * vr / vd : tc->cores;
        for (int s = 0; s < tc->servers; s++) {
            char addr[48];
            server_addr(c, t, s, addr, sizeof addr);
            fprintf(f, "%s,%s,%d,%.2f\n", tc->wire_name, addr, tc->cores, nstar);
        }
        fprintf(f, "%s,*,%d,%.2f\n", tc->wire_name, tc->cores * tc->servers,
                nstar * tc->servers);
    }
    return ferror(f) ? TB_E_IO : 0;
}
