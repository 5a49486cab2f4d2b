/* SPDX-License-Identifier: MIT */
/* dump.c — `-w FILE` with tcpdump's rotation (-C, -G, -W) and file names,
 * written through libpcap's pcap_dump so the bytes are tcpdump's. */
#include "dump.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pcap/pcap.h>

struct tb_dump {
    struct tb_dump_opts o;
    pcap_t *dead;           /* carries link type, snapshot length and precision */
    pcap_dumper_t *pd;
    bool nano;
    bool to_stdout;
    int width;              /* digits of -W's numbers (tcpdump's WflagChars) */
    int64_t period_s;       /* -G: second the current period started */
    int64_t gcount;         /* -G: time rotations so far (tcpdump's Gflag_count) */
    int64_t ccount;         /* -C: number of the current file (tcpdump's Cflag_count) */
    uint64_t files;
    char name[PATH_MAX + 1];
};

/* Digits needed for the numbers 0..n-1 (none for n <= 1). */
static int digits_below(int n)
{
    int c = 0;
    for (int x = n - 1; x > 0; x /= 10)
        c++;
    return c;
}

/* The file name for number `cnt` padded to `width` digits, after strftime
 * when -G is on: tcpdump's MakeFilename. */
static int make_name(struct tb_dump *d, int64_t cnt, int width, char *errbuf, size_t errlen)
{
    char base[PATH_MAX + 1];
    if (d->o.rotate_secs > 0) {
        time_t t = (time_t)d->period_s;
        struct tm tm;
        if (!localtime_r(&t, &tm)) {
            snprintf(errbuf, errlen, "-w %s: the time %lld has no local time", d->o.path,
                     (long long)d->period_s);
            return TB_E_INVAL;
        }
        /* The pattern is the user's -w argument, as in tcpdump; strftime
         * cannot read past its arguments whatever it holds. A zero return
         * may be an empty expansion, not an error (as tcpdump takes it). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (strftime(base, sizeof base, d->o.path, &tm) == 0)
            base[0] = '\0';
#pragma GCC diagnostic pop
    } else {
        snprintf(base, sizeof base, "%s", d->o.path);
    }
    int n = cnt == 0 && width == 0
                ? snprintf(d->name, sizeof d->name, "%s", base)
                : snprintf(d->name, sizeof d->name, "%s%0*lld", base, width, (long long)cnt);
    if (n < 0 || (size_t)n >= sizeof d->name) {
        snprintf(errbuf, errlen, "-w %s: file name too long", d->o.path);
        return TB_E_INVAL;
    }
    return 0;
}

static int open_current(struct tb_dump *d, char *errbuf, size_t errlen)
{
    d->pd = d->to_stdout ? pcap_dump_fopen(d->dead, stdout) : pcap_dump_open(d->dead, d->name);
    if (!d->pd) {
        /* libpcap's message names the file already ("x: Permission denied"). */
        snprintf(errbuf, errlen, "-w %s", pcap_geterr(d->dead));
        return TB_E_IO;
    }
    d->files++;
    return 0;
}

static int close_current(struct tb_dump *d, char *errbuf, size_t errlen)
{
    if (!d->pd)
        return 0;
    int rc = 0;
    if (pcap_dump_flush(d->pd) != 0) {
        snprintf(errbuf, errlen, "-w %s: write failed: %s", d->to_stdout ? "-" : d->name,
                 strerror(errno));
        rc = TB_E_IO;
    }
    if (d->to_stdout)
        fflush(stdout); /* stdout stays open: pcap_dump_close would close it */
    else
        pcap_dump_close(d->pd);
    d->pd = NULL;
    return rc;
}

int tb_dump_open(struct tb_dump **out, const struct tb_dump_opts *o, int linktype,
                 uint32_t snaplen, enum tb_dump_prec prec, int64_t start_ns, char *errbuf,
                 size_t errlen)
{
    *out = NULL;
    struct tb_dump *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(errbuf, errlen, "-w %s: out of memory", o->path);
        return TB_E_NOMEM;
    }
    d->o = *o;
    d->nano = prec == TB_DUMP_NANO;
    d->to_stdout = strcmp(o->path, "-") == 0;
    if (d->to_stdout && (o->rotate_bytes || o->rotate_secs || o->files)) {
        snprintf(errbuf, errlen, "-w -: standard output cannot be rotated (-C, -G, -W)");
        free(d);
        return TB_E_INVAL;
    }
    d->dead = pcap_open_dead_with_tstamp_precision(
        linktype, (int)snaplen, d->nano ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
    if (!d->dead) {
        snprintf(errbuf, errlen, "-w %s: out of memory", o->path);
        free(d);
        return TB_E_NOMEM;
    }
    d->width = o->files > 0 ? digits_below(o->files) : 0;
    /* Floor division: times before 1970 still fall in the right second. */
    d->period_s = start_ns / TB_NS_PER_SEC - (start_ns % TB_NS_PER_SEC < 0);
    int rc = make_name(d, 0, o->rotate_bytes ? d->width : 0, errbuf, errlen);
    if (!rc)
        rc = open_current(d, errbuf, errlen);
    if (rc) {
        pcap_close(d->dead);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int tb_dump_packet(struct tb_dump *d, int64_t ts_ns, const uint8_t *data, uint32_t caplen,
                   uint32_t len, char *errbuf, size_t errlen)
{
    int rc;
    int64_t sec = ts_ns / TB_NS_PER_SEC - (ts_ns % TB_NS_PER_SEC < 0);
    int64_t frac = ts_ns - sec * TB_NS_PER_SEC;
    if (!d->pd) /* a failed rotation left no file open */
        return TB_E_IO;
    /* tcpdump checks time first, then size: a time rotation starts a file
     * that cannot be over the size limit. */
    if (d->o.rotate_secs > 0 && sec - d->period_s >= d->o.rotate_secs) {
        d->period_s = sec;
        d->gcount++;
        if ((rc = close_current(d, errbuf, errlen)))
            return rc;
        if (!d->o.rotate_bytes && d->o.files > 0 && d->gcount >= d->o.files)
            return 1;
        d->ccount = 0;
        if ((rc = make_name(d, 0, d->o.rotate_bytes ? d->width : 0, errbuf, errlen)) ||
            (rc = open_current(d, errbuf, errlen)))
            return rc;
    }
    if (d->o.rotate_bytes > 0) {
        int64_t size = pcap_dump_ftell64(d->pd);
        if (size < 0) {
            snprintf(errbuf, errlen, "-w %s: cannot tell its size", d->name);
            return TB_E_IO;
        }
        if (size > d->o.rotate_bytes) {
            if ((rc = close_current(d, errbuf, errlen)))
                return rc;
            d->ccount++;
            if (d->o.files > 0 && d->ccount >= d->o.files)
                d->ccount = 0;
            if ((rc = make_name(d, d->ccount, d->width, errbuf, errlen)) ||
                (rc = open_current(d, errbuf, errlen)))
                return rc;
        }
    }
    struct pcap_pkthdr h = {.caplen = caplen, .len = len};
    h.ts.tv_sec = (time_t)sec;
    /* pcap_dump writes the field as it is: the file's precision decides
     * whether it holds micro- or nanoseconds. */
    h.ts.tv_usec = (suseconds_t)(d->nano ? frac : frac / 1000);
    pcap_dump((u_char *)d->pd, &h, data);
    return 0;
}

const char *tb_dump_current(const struct tb_dump *d)
{
    return d->to_stdout ? "-" : d->name;
}

uint64_t tb_dump_files(const struct tb_dump *d)
{
    return d->files;
}

int tb_dump_close(struct tb_dump *d, char *errbuf, size_t errlen)
{
    if (!d)
        return 0;
    int rc = close_current(d, errbuf, errlen);
    pcap_close(d->dead);
    free(d);
    return rc;
}

int tb_dump_parse_size(const char *s, int64_t *bytes)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v <= 0)
        return TB_E_INVAL;
    int64_t mul;
    if (!*end)
        mul = 1000000;
    else if (!end[1] && (*end == 'k' || *end == 'K'))
        mul = 1024;
    else if (!end[1] && (*end == 'm' || *end == 'M'))
        mul = 1024 * 1024;
    else if (!end[1] && (*end == 'g' || *end == 'G'))
        mul = 1024 * 1024 * 1024;
    else
        return TB_E_INVAL;
    if (v > INT64_MAX / mul)
        return TB_E_INVAL;
    *bytes = v * mul;
    return 0;
}
