/* SPDX-License-Identifier: MIT */
/* pcapfile.c — classic pcap records in place: from a read-only mapping of the
 * file, else from large pread(2) blocks.
 *
 * Layout (pcap-savefile(5)): a 24-byte file header, then per packet a 16-byte
 * record header (seconds, micro- or nanoseconds, captured length, length on
 * the wire) and the captured bytes.
 *
 * Mapped: the file as it was when the reader was made is mapped read-only and
 * every whole record inside it is handed out where it lies, with no copy at
 * all. The first record that does not lie wholly inside the mapping (a cut
 * last record, or one the file gained since) switches the reader to the block
 * path at that offset for good, so a truncated tail and a growing file read
 * exactly as before. A file cut shorter while mapped would raise SIGBUS on the
 * vanished pages: the size is checked with fstat every MAP_CHECK bytes (a cut
 * seen there also switches to the block path, which then reports the
 * truncation in libpcap's words), and a SIGBUS that still slips between two
 * checks ends the process with one line on stderr and exit status 1 instead
 * of a silent "Bus error".
 *
 * Block path: the buffer always holds a whole record before it is handed out:
 * the unread tail moves to the front and the rest is refilled, so a record is
 * never split and never copied twice. */
#include "pcapfile-int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC_USEC 0xa1b2c3d4u
#define MAGIC_NSEC 0xa1b23c4du
#define REC_HDR 16
/* Large enough for the largest record (16 + 262144 bytes), small enough to
 * stay in the L2 cache between the read and the decode. */
#define BLOCK ((size_t)512 << 10)
/* How often the mapped reader checks that the file has not shrunk. */
#define MAP_CHECK ((uint64_t)8 << 20)

struct tb_pcapfile {
    int fd;
    bool swapped;      /* written in the other byte order */
    bool nsec;         /* nanosecond timestamps */
    bool failed;
    uint32_t snapshot;
    uint64_t file_off; /* where the next pread starts */
    uint64_t consumed; /* bytes of the file handed out, headers included */
    size_t pos, end;   /* unread bytes are buf[pos, end) */
    uint8_t *buf;      /* the block buffer, allocated when first needed */
    const uint8_t *map; /* the mapped file, or NULL on the block path */
    size_t map_len;
    uint64_t next_check; /* offset of the next window of the mapping */
    size_t dropped;      /* pages below this offset are unmapped again */
};

/* SIGBUS while a mapping is live: the file was cut under it. One line and
 * the status of a bad input file, with async-signal-safe calls only. */
static int maps_live;
static struct sigaction old_bus;

static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] = "tbneck: capture file shrank while being read (SIGBUS)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void map_open(struct tb_pcapfile *r)
{
    const char *env = getenv("TBNECK_PCAP_READER");
    struct stat sb;
    if ((env && strcmp(env, "pread") == 0) || fstat(r->fd, &sb) != 0 ||
        !S_ISREG(sb.st_mode) || sb.st_size <= TB_PCAPFILE_HDR ||
        (uint64_t)sb.st_size > SIZE_MAX)
        return;
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, r->fd, 0);
    if (m == MAP_FAILED)
        return; /* the block path reads it */
    (void)madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
    if (maps_live++ == 0) {
        struct sigaction sa = {.sa_handler = on_sigbus};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &old_bus);
    }
    r->map = m;
    r->map_len = (size_t)sb.st_size;
    r->next_check = 0; /* the first record opens the first window */
}

static void map_close(struct tb_pcapfile *r)
{
    if (!r->map)
        return;
    munmap((void *)r->map, r->map_len);
    r->map = NULL;
    if (--maps_live == 0)
        sigaction(SIGBUS, &old_bus, NULL);
}

/* Leaves the mapping for the block path at the first byte not handed out. */
static void map_leave(struct tb_pcapfile *r)
{
    map_close(r);
    r->file_off = r->consumed;
    r->pos = r->end = 0;
}

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
    magic(hdr, &r->swapped, &r->nsec);
    r->fd = fd;
    r->snapshot = snapshot;
    r->file_off = TB_PCAPFILE_HDR;
    r->consumed = TB_PCAPFILE_HDR;
    map_open(r);
    if (!r->map && !(r->buf = malloc(BLOCK))) {
        free(r);
        return NULL;
    }
    return r;
}

void tb_pcapfile_free(struct tb_pcapfile *r)
{
    if (!r)
        return;
    map_close(r);
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
    if (!r->buf && !(r->buf = malloc(BLOCK))) {
        errno = ENOMEM;
        return -1;
    }
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

/* libpcap's words for a captured length no record may have. */
static int bad_caplen(struct tb_pcapfile *r, uint32_t caplen, char *errbuf, size_t errlen)
{
    if (caplen > r->snapshot)
        snprintf(errbuf, errlen, "invalid packet capture length %u, bigger than snaplen of %u",
                 caplen, r->snapshot);
    else
        snprintf(errbuf, errlen, "invalid packet capture length %u, bigger than maximum of %u",
                 caplen, TB_PCAPFILE_MAX_CAPLEN);
    return fail(r);
}

/* Fills *rec from the record header at h (its bytes follow it). */
static void take(const struct tb_pcapfile *r, const uint8_t *h, uint32_t caplen,
                 struct tb_pcaprec *rec)
{
    /* Both time fields are signed 32-bit in the format. */
    int64_t sec = (int32_t)u32(h, r->swapped);
    int64_t frac = (int32_t)u32(h + 4, r->swapped);
    rec->ts_ns = sec * 1000000000 + (r->nsec ? frac : frac * 1000);
    /* A record longer than the file's snapshot length is cut to it, as
     * libpcap does, so that no packet exceeds what the header promised. */
    rec->caplen = caplen > r->snapshot ? r->snapshot : caplen;
    rec->len = u32(h + 12, r->swapped);
    rec->data = h + REC_HDR;
}

/* The next record from the mapping: 1 as tb_pcapfile_next, -1 on an invalid
 * length, 0 when the record does not lie wholly in the mapping (or the file
 * shrank): the caller then goes on with the block path. */
static int map_next(struct tb_pcapfile *r, struct tb_pcaprec *rec, char *errbuf,
                    size_t errlen)
{
    if (r->consumed >= r->next_check) {
        /* A new window: the file still as long as the mapping; the window's
         * page table entries made in one call (a fault per page costs more
         * than the copy pread would make); the pages behind it handed back,
         * so that resident memory stays at a window and not the file. */
        struct stat sb;
        if (fstat(r->fd, &sb) != 0 || (uint64_t)sb.st_size < r->map_len)
            return 0;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t at = (size_t)r->consumed & ~(page - 1);
        size_t len = r->map_len - at < MAP_CHECK ? r->map_len - at : MAP_CHECK;
        if (madvise((void *)(r->map + at), len, MADV_POPULATE_READ) != 0 && errno == EFAULT)
            return 0; /* cut between the fstat and here */
        if (at > r->dropped) {
            (void)madvise((void *)(r->map + r->dropped), at - r->dropped, MADV_DONTNEED);
            r->dropped = at;
        }
        r->next_check = r->consumed + MAP_CHECK;
    }
    size_t left = r->map_len - (size_t)r->consumed;
    if (left < REC_HDR)
        return 0;
    const uint8_t *h = r->map + r->consumed;
    uint32_t caplen = u32(h + 8, r->swapped);
    if (caplen > TB_PCAPFILE_MAX_CAPLEN)
        return bad_caplen(r, caplen, errbuf, errlen);
    if (left - REC_HDR < caplen)
        return 0;
    take(r, h, caplen, rec);
    r->consumed += REC_HDR + (uint64_t)caplen;
    return 1;
}

int tb_pcapfile_next(struct tb_pcapfile *r, struct tb_pcaprec *rec, char *errbuf,
                     size_t errlen)
{
    if (r->failed) {
        snprintf(errbuf, errlen, "read after an error");
        return -1;
    }
    if (r->map) {
        int m = map_next(r, rec, errbuf, errlen);
        if (m != 0)
            return m;
        map_leave(r);
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
    if (caplen > TB_PCAPFILE_MAX_CAPLEN)
        return bad_caplen(r, caplen, errbuf, errlen); /* a damaged or fuzzed file */
    have = fill(r, REC_HDR + (size_t)caplen);
    if (have < 0)
        goto read_error;
    size_t got = (size_t)have - REC_HDR;
    uint32_t keep = caplen > r->snapshot ? r->snapshot : caplen;
    if (got < caplen) {
        snprintf(errbuf, errlen,
                 "truncated dump file; tried to read %u captured bytes, only got %zu",
                 got < keep ? keep : caplen, got);
        return fail(r);
    }
    take(r, r->buf + r->pos, caplen, rec); /* fill() may have moved the bytes */
    r->pos += REC_HDR + (size_t)caplen;
    r->consumed += REC_HDR + (uint64_t)caplen;
    return 1;
read_error:
    snprintf(errbuf, errlen, "error reading dump file: %s", strerror(errno));
    return fail(r);
}
