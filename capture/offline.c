/* SPDX-License-Identifier: MIT */
/* offline.c — the offline source: pcap and pcapng files, merged in time order,
 * filtered by BPF, fed to the engine with nanosecond timestamps. */
#include "capture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "decode-int.h"
#include "pcapfile-int.h"

/* One input file. libpcap opens and validates every file; a regular classic
 * pcap file is then read by pcapfile.c (`fast`), everything else by libpcap. */
struct src {
    pcap_t *p;
    const char *name;
    int linktype;
    struct tb_pcapfile *fast;
    struct bpf_program prog; /* the filter, applied here on the fast path */
    bool has_prog;
    /* The current packet; data valid until the next read. */
    const uint8_t *data;
    uint32_t caplen, len;
    int64_t ts_ns;
    bool live;             /* has a current packet */
    char *buf;             /* stdio buffer of the file (freed after pcap_close) */
};

#define READ_BUF ((size_t)1 << 20)

struct progress {
    bool on;
    uint64_t total_bytes;
    struct timespec last, start;
    uint64_t last_packets;
};

static double mono_s(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static void progress_show(struct progress *pg, const struct tb_engine *e, struct src *s,
                          size_t n, bool final)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = mono_s(&now) - mono_s(&pg->last);
    if (!final && dt < 0.25)
        return;
    const struct tb_capture_stats *st = tb_engine_stats(e);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        FILE *f = s[i].p && !s[i].fast ? pcap_file(s[i].p) : NULL;
        long off = s[i].fast ? (long)tb_pcapfile_offset(s[i].fast) : f ? ftell(f) : -1;
        if (off > 0)
            pos += (uint64_t)off;
    }
    double pct = pg->total_bytes ? 100.0 * (double)pos / (double)pg->total_bytes : 0;
    if (final)
        pct = 100.0;
    double rate = dt > 0 ? (double)(st->packets - pg->last_packets) / dt : 0;
    if (final) {
        double all = mono_s(&now) - mono_s(&pg->start);
        rate = all > 0 ? (double)st->packets / all : 0;
    }
    fprintf(stderr, "\r%5.1f%%  %llu packets  %llu requests  %.0f packets/s   %s",
            pct > 100 ? 100.0 : pct, (unsigned long long)st->packets,
            (unsigned long long)st->requests, rate, final ? "\n" : "");
    fflush(stderr);
    pg->last = now;
    pg->last_packets = st->packets;
}

/* Reads the next packet of a source; false at its end or on an error (which
 * is reported in errbuf once). */
static bool advance(struct src *s, char *errbuf, size_t errlen, int *err)
{
    if (s->fast) {
        struct tb_pcaprec rec;
        char why[PCAP_ERRBUF_SIZE];
        int r;
        while ((r = tb_pcapfile_next(s->fast, &rec, why, sizeof why)) == 1) {
            if (s->has_prog) {
                /* What pcap_setfilter() does on libpcap's own offline path. */
                struct pcap_pkthdr h = {.caplen = rec.caplen, .len = rec.len};
                if (!pcap_offline_filter(&s->prog, &h, rec.data))
                    continue;
            }
            s->data = rec.data;
            s->caplen = rec.caplen;
            s->len = rec.len;
            s->ts_ns = rec.ts_ns;
            return s->live = true;
        }
        if (r < 0 && !*err) {
            snprintf(errbuf, errlen, "%s: %s", s->name, why);
            *err = TB_E_PCAP;
        }
        return s->live = false;
    }
    struct pcap_pkthdr *h;
    int r = pcap_next_ex(s->p, &h, &s->data);
    if (r == 1) {
        s->ts_ns = (int64_t)h->ts.tv_sec * TB_NS_PER_SEC + (int64_t)h->ts.tv_usec;
        s->caplen = h->caplen;
        s->len = h->len;
        return s->live = true;
    }
    if (r == PCAP_ERROR && !*err) {
        snprintf(errbuf, errlen, "%s: %s", s->name, pcap_geterr(s->p));
        *err = TB_E_PCAP;
    }
    return s->live = false;
}

/* Whether the file behind `fp` goes to the fast reader: a regular file with
 * the common classic header (read with pread, leaving stdio alone), unless
 * TBNECK_PCAP_READER=libpcap asks for libpcap throughout (the tests compare
 * the two; the benchmark shows both). */
static bool fast_eligible(FILE *fp, uint8_t hdr[TB_PCAPFILE_HDR])
{
    const char *env = getenv("TBNECK_PCAP_READER");
    struct stat sb;
    if (env && strcmp(env, "libpcap") == 0)
        return false;
    int fd = fileno(fp);
    return fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
           pread(fd, hdr, TB_PCAPFILE_HDR, 0) == TB_PCAPFILE_HDR && tb_pcapfile_eligible(hdr);
}

static bool is_stdin(const char *name)
{
    return strcmp(name, "-") == 0;
}

/* Opens the files; `skip_stdin` leaves "-" alone (a check must not consume
 * what the run will read). */
static int open_all(struct src *s, const struct tb_offline_opts *o, bool skip_stdin,
                    uint64_t *total, char *errbuf, size_t errlen)
{
    char perr[PCAP_ERRBUF_SIZE];
    for (size_t i = 0; i < o->nfiles; i++) {
        struct stat sb;
        s[i].name = is_stdin(o->files[i]) ? "standard input" : o->files[i];
        if (skip_stdin && is_stdin(o->files[i]))
            continue;
        perr[0] = '\0';
        /* libpcap reads record by record through stdio; a large buffer turns
         * the default 4 KiB reads into few big ones. */
        FILE *fp = is_stdin(o->files[i]) ? stdin : fopen(o->files[i], "rb");
        uint8_t hdr[TB_PCAPFILE_HDR];
        bool fast = false;
        if (fp) {
            fast = fast_eligible(fp, hdr);
            s[i].buf = fast ? NULL : malloc(READ_BUF);
            if (s[i].buf)
                setvbuf(fp, s[i].buf, _IOFBF, READ_BUF);
            s[i].p = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO,
                                                              perr);
            if (!s[i].p)
                fclose(fp);
        } else {
            snprintf(perr, sizeof perr, "%s", strerror(errno));
        }
        if (!s[i].p) {
            /* libpcap names the file itself when it could not open it. */
            size_t fl = strlen(o->files[i]);
            if (strncmp(perr, o->files[i], fl) == 0 && perr[fl] == ':')
                snprintf(errbuf, errlen, "%s", perr);
            else
                snprintf(errbuf, errlen, "%s: %s", o->files[i], perr);
            return TB_E_PCAP;
        }
        if (!is_stdin(o->files[i]) && stat(o->files[i], &sb) == 0)
            *total += (uint64_t)sb.st_size;
        s[i].linktype = pcap_datalink(s[i].p);
        if (!tb_decode_link_supported(s[i].linktype)) {
            const char *nm = pcap_datalink_val_to_name(s[i].linktype);
            snprintf(errbuf, errlen, "%s: unsupported link type %d (%s)", s[i].name,
                     s[i].linktype, nm ? nm : "unknown");
            return TB_E_UNSUPP;
        }
        if (fast &&
            !(s[i].fast = tb_pcapfile_new(fileno(fp), hdr, (uint32_t)pcap_snapshot(s[i].p)))) {
            snprintf(errbuf, errlen, "out of memory");
            return TB_E_NOMEM;
        }
        if (o->bpf && *o->bpf) {
            struct bpf_program prog;
            if (pcap_compile(s[i].p, &prog, o->bpf, 1, PCAP_NETMASK_UNKNOWN) != 0) {
                snprintf(errbuf, errlen, "bad filter expression '%s': %s", o->bpf,
                         pcap_geterr(s[i].p));
                return TB_E_INVAL;
            }
            if (s[i].fast) {
                s[i].prog = prog; /* applied per record by advance() */
                s[i].has_prog = true;
                continue;
            }
            int r = pcap_setfilter(s[i].p, &prog);
            pcap_freecode(&prog);
            if (r != 0) {
                snprintf(errbuf, errlen, "%s: cannot set filter '%s': %s", o->files[i], o->bpf,
                         pcap_geterr(s[i].p));
                return TB_E_INVAL;
            }
        }
    }
    return 0;
}

static void close_all(struct src *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tb_pcapfile_free(s[i].fast);
        if (s[i].has_prog)
            pcap_freecode(&s[i].prog);
        if (s[i].p)
            pcap_close(s[i].p); /* closes the FILE too */
        free(s[i].buf);
    }
    free(s);
}

int tb_offline_check(const struct tb_offline_opts *o, char *errbuf, size_t errlen)
{
    uint64_t total = 0;
    int rc;
    if (o->nfiles == 0) {
        snprintf(errbuf, errlen, "no input files");
        return TB_E_INVAL;
    }
    struct src *s = calloc(o->nfiles, sizeof *s);
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    rc = open_all(s, o, true, &total, errbuf, errlen);
    close_all(s, o->nfiles);
    return rc;
}

int tb_offline_run(struct tb_engine *e, const struct tb_offline_opts *o, char *errbuf,
                   size_t errlen)
{
    struct src *s = NULL;
    struct progress pg = {0};
    int rc = 0, err = 0;
    size_t n = o->nfiles;
    if (n == 0) {
        snprintf(errbuf, errlen, "no input files");
        return TB_E_INVAL;
    }
    s = calloc(n, sizeof *s);
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return TB_E_NOMEM;
    }
    if ((rc = open_all(s, o, false, &pg.total_bytes, errbuf, errlen)))
        goto out;
    pg.on = o->progress && isatty(STDERR_FILENO);
    clock_gettime(CLOCK_MONOTONIC, &pg.start);
    pg.last = pg.start;

    for (size_t i = 0; i < n; i++)
        advance(&s[i], errbuf, errlen, &err);
    int64_t next_expire = INT64_MIN, first_ts = INT64_MIN;
    uint64_t count = 0;
    for (;;) {
        /* k-way merge: the source whose next packet is earliest. A handful of
         * files makes a linear scan cheaper than a heap. */
        struct src *m = NULL;
        for (size_t i = 0; i < n; i++)
            if (s[i].live && (!m || s[i].ts_ns < m->ts_ns))
                m = &s[i];
        if (!m)
            break;
        if (o->stop && *o->stop) {
            rc = TB_E_INTR;
            break;
        }
        if (first_ts == INT64_MIN)
            first_ts = m->ts_ns;
        if (o->duration_ns > 0 && m->ts_ns - first_ts >= o->duration_ns)
            break;
        if (m->ts_ns >= next_expire) {
            /* Idle flows are closed once per second of capture time. */
            if (next_expire != INT64_MIN)
                tb_engine_expire(e, m->ts_ns);
            next_expire = m->ts_ns + TB_NS_PER_SEC;
        }
        if ((rc = tb_engine_packet(e, m->linktype, m->ts_ns, m->data, m->caplen, m->len))) {
            snprintf(errbuf, errlen, "%s: %s", m->name, tb_strerror(rc));
            break;
        }
        if (pg.on && (++count & 1023) == 0)
            progress_show(&pg, e, s, n, false);
        advance(m, errbuf, errlen, &err);
    }
    if (pg.on)
        progress_show(&pg, e, s, n, true);
    if (!rc)
        rc = err;
    /* A signal that interrupted a blocking read (a pipe on "-r -") shows up
     * as a read error; it is the stop that was asked for, not a bad file. */
    if (o->stop && *o->stop)
        rc = TB_E_INTR;
out:
    close_all(s, n);
    return rc;
}
