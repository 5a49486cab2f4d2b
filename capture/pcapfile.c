/* SPDX-License-Identifier: MIT */
/* pcapfile.c — classic pcap records in place from large pread(2) blocks.
 *
 * Layout (pcap-savefile(5)): a 24-byte file header, then per packet a 16-byte
 * record header (seconds, micro- or nanoseconds, captured length, length on
 * the wire) and the captured bytes. The block buffer always holds a whole
 * record before it is handed out: the unread tail moves to the front and the
 * rest is refilled, so a record is never split and never copied twice. */
#include "pcapfile-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC_USEC 0xa1b2c3d4u
#define MAGIC_NSEC 0xa1b23c4du
#define REC_HDR 16
/* Large enough for the largest record (16 + 262144 bytes), small enough to
 * stay in the L2 cache between the read and the decode. */
#define BLOCK ((size_t)512 << 10)

struct tb_pcapfile {
    int fd;
    bool swapped;      /* written in the other byte order */
    bool nsec;         /* nanosecond timestamps */
    bool failed;
    uint32_t snapshot;
    uint64_t file_off; /* where the next pread starts */
    uint64_t consumed; /* bytes of the file handed out, headers included */
    size_t pos, end;   /* unread bytes are buf[pos, end) */
    uint8_t *buf;
};

static uint32_t u32(const uint8_t *p, bool swapped)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swapped ? __builtin_bswap32(v) : v;
}

static uint16_t u16(const uint8_t *p, bool swapped)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return swapped ? __builtin_bswap16(v) : v;
}

/* Magic in the file's order: which byte order and resolution; false when it
 * is none of the two common ones. */
static bool magic(const uint8_t hdr[TB_PCAPFILE_HDR], bool *swapped, bool *nsec)
{
    uint32_t m = u32(hdr, false);
    *swapped = m != MAGIC_USEC && m != MAGIC_NSEC;
    if (*swapped)
        m = __builtin_bswap32(m);
    *nsec = m == MAGIC_NSEC;
    return m == MAGIC_USEC || m == MAGIC_NSEC;
}

bool tb_pcapfile_eligible(const uint8_t hdr[TB_PCAPFILE_HDR])
{
    bool swapped, nsec;
    /* Version 2.4 only: 2.3 and older may have the two lengths the other way
     * round, which libpcap sorts out record by record. */
    return magic(hdr, &swapped, &nsec) && u16(hdr + 4, swapped) == 2 &&
           u16(hdr + 6, swapped) == 4;
}

struct tb_pcapfile *tb_pcapfile_new(int fd, const uint8_t hdr[TB_PCAPFILE_HDR],
                                    uint32_t snapshot)
{
    struct tb_pcapfile *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->buf = malloc(BLOCK);
    if (!r->buf) {
        free(r);
        return NULL;
    }
    magic(hdr, &r->swapped, &r->nsec);
    r->fd = fd;
    r->snapshot = snapshot;
    r->file_off = TB_PCAPFILE_HDR;
    r->consumed = TB_PCAPFILE_HDR;
    return r;
}

void tb_pcapfile_free(struct tb_pcapfile *r)
{
    if (!r)
        return;
    free(r->buf);
    free(r);
}

uint64_t tb_pcapfile_offset(const struct tb_pcapfile *r)
{
    return r->consumed;
}

/* Makes at least `need` unread bytes available unless the file ends first;
 * returns how many are available, or -1 on a read error (errno set). */
static ssize_t fill(struct tb_pcapfile *r, size_t need)
{
    size_t have = r->end - r->pos;
    if (have >= need)
        return (ssize_t)have;
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, have);
        r->pos = 0;
        r->end = have;
    }
    while (r->end < need) {
        ssize_t n = pread(r->fd, r->buf + r->end, BLOCK - r->end, (off_t)r->file_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        r->end += (size_t)n;
        r->file_off += (uint64_t)n;
    }
    return (ssize_t)(r->end - r->pos);
}

/* The reader stops at the first bad record, as libpcap does. */
static int fail(struct tb_pcapfile *r)
{
    r->failed = true;
    return -1;
}

int tb_pcapfile_next(struct tb_pcapfile *r, struct tb_pcaprec *rec, char *errbuf,
                     size_t errlen)
{
    if (r->failed) {
        snprintf(errbuf, errlen, "read after an error");
        return -1;
    }
    ssize_t have = fill(r, REC_HDR);
    if (have < 0)
        goto read_error;
    if (have == 0)
        return 0;
    if (have < REC_HDR) {
        snprintf(errbuf, errlen,
                 "truncated dump file; tried to read %d header bytes, only got %zu", REC_HDR,
                 (size_t)have);
        return fail(r);
    }
    const uint8_t *h = r->buf + r->pos;
    uint32_t caplen = u32(h + 8, r->swapped);
    if (caplen > TB_PCAPFILE_MAX_CAPLEN) {
        /* A damaged or fuzzed file; libpcap's two wordings. */
        if (caplen > r->snapshot)
            snprintf(errbuf, errlen,
                     "invalid packet capture length %u, bigger than snaplen of %u", caplen,
                     r->snapshot);
        else
            snprintf(errbuf, errlen,
                     "invalid packet capture length %u, bigger than maximum of %u", caplen,
                     TB_PCAPFILE_MAX_CAPLEN);
        return fail(r);
    }
    have = fill(r, REC_HDR + (size_t)caplen);
    if (have < 0)
        goto read_error;
    size_t got = (size_t)have - REC_HDR;
    /* A record longer than the file's snapshot length is cut to it, as
     * libpcap does, so that no packet exceeds what the header promised. */
    uint32_t keep = caplen > r->snapshot ? r->snapshot : caplen;
    if (got < caplen) {
        snprintf(errbuf, errlen,
                 "truncated dump file; tried to read %u captured bytes, only got %zu",
                 got < keep ? keep : caplen, got);
        return fail(r);
    }
    h = r->buf + r->pos; /* fill() may have moved the bytes */
    /* Both time fields are signed 32-bit in the format. */
    int64_t sec = (int32_t)u32(h, r->swapped);
    int64_t frac = (int32_t)u32(h + 4, r->swapped);
    rec->ts_ns = sec * 1000000000 + (r->nsec ? frac : frac * 1000);
    rec->caplen = keep;
    rec->len = u32(h + 12, r->swapped);
    rec->data = h + REC_HDR;
    r->pos += REC_HDR + (size_t)caplen;
    r->consumed += REC_HDR + (uint64_t)caplen;
    return 1;
read_error:
    snprintf(errbuf, errlen, "error reading dump file: %s", strerror(errno));
    return fail(r);
}
