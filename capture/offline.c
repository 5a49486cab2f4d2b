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
#include "dump.h"
#include "gzin-int.h"
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
    struct tb_gzin *gz;    /* gzip (or standard input) read through zlib; else NULL */
    int nano;              /* the file's timestamps: 1 ns, 0 us (for -w) */
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

#define PREFETCH_AHEAD 1024u

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
            /* The next record follows in the mapping: its first kilobyte
             * asked for now arrives while this one is parsed. Mapped pages
             * are not contiguous in memory, so the hardware's stream
             * prefetch stops at every page's end. */
            for (unsigned k = 0; k < PREFETCH_AHEAD; k += 64)
                __builtin_prefetch(rec.data + rec.caplen + k, 0, 3);
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
    const char *gzerr = tb_gzin_error(s->gz);
    if ((r == PCAP_ERROR || gzerr) && !*err) {
        /* A damaged or cut gzip stream shows in libpcap as a short read;
         * zlib's reason is the useful half. */
        if (gzerr)
            snprintf(errbuf, errlen, "%s: %s%sgzip: %s", s->name,
                     r == PCAP_ERROR ? pcap_geterr(s->p) : "", r == PCAP_ERROR ? "; " : "",
                     gzerr);
        else
            snprintf(errbuf, errlen, "%s: %s", s->name, pcap_geterr(s->p));
        *err = TB_E_PCAP;
    }
    return s->live = false;
}

/* Whether the file behind `fp` goes to the fast reader: a regular file with
 * the common classic header (read with pread, leaving stdio alone), unless
 * TBNECK_PCAP_READER=libpcap asks for libpcap throughout (the tests compare
 * the two; the benchmark shows both). */
static bool fast_eligible(const uint8_t hdr[TB_PCAPFILE_HDR])
{
    const char *env = getenv("TBNECK_PCAP_READER");
    if (env && strcmp(env, "libpcap") == 0)
        return false;
    return tb_pcapfile_eligible(hdr);
}

/* The file header of a regular file (read with pread, leaving stdio
 * alone); false for anything else or a file shorter than a header. */
static bool regular_header(FILE *fp, uint8_t hdr[TB_PCAPFILE_HDR])
{
    struct stat sb;
    int fd = fileno(fp);
    return fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
           pread(fd, hdr, TB_PCAPFILE_HDR, 0) == TB_PCAPFILE_HDR;
}

/* The timestamp precision a file starting with `m` was written with: 0 for
 * the microsecond pcap magic (and the old variants), 1 for the nanosecond
 * one and for pcapng (whose resolution is per interface; libpcap scales it
 * to what was asked, nanoseconds). */
static int magic_nano(const uint8_t m[4])
{
    uint32_t be = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3];
    uint32_t le = (uint32_t)m[3] << 24 | (uint32_t)m[2] << 16 | (uint32_t)m[1] << 8 | m[0];
    if (be == 0xa1b2c3d4u || le == 0xa1b2c3d4u || be == 0xa1b2cd34u || le == 0xa1b2cd34u)
        return 0;
    return 1;
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
        FILE *fp = NULL;
        uint8_t hdr[TB_PCAPFILE_HDR];
        bool fast = false, have_hdr = false;
        s[i].nano = 1;
        if (is_stdin(o->files[i])) {
            /* zlib passes plain data through: a pipe may carry either. */
            int fd = dup(STDIN_FILENO);
            fp = fd >= 0 ? tb_gzin_open(fd, &s[i].gz) : NULL;
            if (!fp && fd >= 0)
                close(fd);
        } else if ((fp = fopen(o->files[i], "rb")) != NULL &&
                   (have_hdr = regular_header(fp, hdr)) && tb_gzin_magic(hdr)) {
            int fd = dup(fileno(fp));
            fclose(fp);
            fp = fd >= 0 ? tb_gzin_open(fd, &s[i].gz) : NULL;
            if (!fp && fd >= 0)
                close(fd);
            have_hdr = false;
        }
        if (fp) {
            uint8_t m[4];
            if (have_hdr)
                s[i].nano = magic_nano(hdr);
            else if (s[i].gz && tb_gzin_peek(s[i].gz, m, 4) == 4)
                s[i].nano = magic_nano(m);
            fast = have_hdr && fast_eligible(hdr);
            s[i].buf = fast ? NULL : malloc(READ_BUF);
            if (s[i].buf)
                setvbuf(fp, s[i].buf, _IOFBF, READ_BUF);
            s[i].p = pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_NANO,
                                                              perr);
            if (!s[i].p) {
                const char *gzerr = tb_gzin_error(s[i].gz);
                if (gzerr) {
                    size_t pl = strlen(perr);
                    snprintf(perr + pl, sizeof perr - pl, "; gzip: %s", gzerr);
                }
                fclose(fp); /* frees s[i].gz too */
                s[i].gz = NULL;
            }
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

/* What the -w files are written with: the inputs' link type (one for all,
 * as a pcap file has one), the largest snapshot length among them, and
 * nanoseconds when any input has them, unless asked otherwise. Standard
 * input, not opened by a check, counts as nanosecond. */
struct dump_params {
    int linktype;
    uint32_t snaplen;
    enum tb_dump_prec prec;
};

static int dump_params(const struct src *s, size_t n, const struct tb_offline_opts *o,
                       struct dump_params *dp, char *errbuf, size_t errlen)
{
    const struct src *first = NULL;
    bool nano = false;
    dp->snaplen = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].p) {
            nano = true;
            continue;
        }
        if (first && s[i].linktype != first->linktype) {
            const char *a = pcap_datalink_val_to_name(first->linktype);
            const char *b = pcap_datalink_val_to_name(s[i].linktype);
            snprintf(errbuf, errlen,
                     "-w %s: the inputs have different link types (%s: %s, %s: %s) and a "
                     "pcap file holds one",
                     o->dump->path, first->name, a ? a : "?", s[i].name, b ? b : "?");
            return TB_E_UNSUPP;
        }
        if (!first)
            first = &s[i];
        nano |= s[i].nano != 0;
        uint32_t snap = (uint32_t)pcap_snapshot(s[i].p);
        if (snap > dp->snaplen)
            dp->snaplen = snap;
    }
    dp->linktype = first ? first->linktype : 1;
    if (!dp->snaplen)
        dp->snaplen = TB_PCAPFILE_MAX_CAPLEN;
    dp->prec = o->dump_prec >= 0 ? (enum tb_dump_prec)o->dump_prec
                                 : nano ? TB_DUMP_NANO : TB_DUMP_MICRO;
    return 0;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * TB_NS_PER_SEC + ts.tv_nsec;
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
    struct dump_params dp;
    if (!rc && o->dump)
        rc = dump_params(s, o->nfiles, o, &dp, errbuf, errlen);
    if (o->first_ns)
        *o->first_ns = INT64_MAX;
    for (size_t i = 0; !rc && o->first_ns && i < o->nfiles; i++) {
        int err = 0;
        if ((s[i].p || s[i].fast) && advance(&s[i], errbuf, errlen, &err))
            *o->first_ns = TB_MIN(*o->first_ns, s[i].ts_ns);
        rc = err;
    }
    close_all(s, o->nfiles);
    return rc;
}

int tb_offline_run(struct tb_engine *e, const struct tb_offline_opts *o, char *errbuf,
                   size_t errlen)
{
    struct src *s = NULL;
    struct tb_dump *dump = NULL;
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
    if (o->dump) {
        /* The first file is opened at the first packet's time (its name with
         * -G), or now when there is none: an empty capture still leaves a
         * valid empty file, as tcpdump's does. */
        struct dump_params dp;
        int64_t start = INT64_MAX;
        for (size_t i = 0; i < n; i++)
            if (s[i].live && s[i].ts_ns < start)
                start = s[i].ts_ns;
        if (start == INT64_MAX)
            start = wall_ns();
        if ((rc = dump_params(s, n, o, &dp, errbuf, errlen)) ||
            (rc = tb_dump_open(&dump, o->dump, dp.linktype, dp.snaplen, dp.prec, start, errbuf,
                               errlen)))
            goto out;
    }
    int64_t next_expire = INT64_MIN, first_ts = INT64_MIN;
    uint64_t count = 0, fed = 0;
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
        if (o->max_packets && fed >= o->max_packets)
            break;
        if (dump) {
            int dr = tb_dump_packet(dump, m->ts_ns, m->data, m->caplen, m->len, errbuf, errlen);
            if (dr == 1) {
                if (o->dump_full)
                    *o->dump_full = true;
                break;
            }
            if (dr < 0) {
                rc = dr;
                break;
            }
        }
        fed++;
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
    if (dump) {
        /* The packets read so far are kept in the file either way; a failed
         * flush is the error to report when nothing else went wrong. */
        char derr[512];
        int drc = tb_dump_close(dump, derr, sizeof derr);
        if (drc && (!rc || rc == TB_E_INTR)) {
            snprintf(errbuf, errlen, "%s", derr);
            rc = drc;
        }
    }
    close_all(s, n);
    return rc;
}
