/* SPDX-License-Identifier: MIT */
/* gzin.c — gzip-compressed captures inflated by zlib behind a stdio stream
 * (glibc's fopencookie), so libpcap reads them as any other file.
 *
 * zlib's gzread is not used: it fills its whole buffer before returning, so
 * on a pipe it holds back what already arrived, and a signal interrupting
 * the read (Ctrl-C on `... | tbneck capture -r -`) loses it. Here each read
 * takes what one read(2) gives, as stdio does, and hands it on at once. */
#include "gzin-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#define IN_BUF (256u << 10)

struct tb_gzin {
    int fd;
    z_stream zs;
    bool decided;      /* the first bytes were read: gzip or not */
    bool gzip;         /* inflating (else bytes pass through) */
    bool zinit;        /* zs initialised */
    bool member_end;   /* a gzip member ended; another may follow */
    bool in_eof;       /* read(2) returned 0 */
    bool cut;          /* the input ended inside a gzip member */
    uint8_t *in;       /* raw input not yet consumed: in[in_pos, in_len) */
    size_t in_pos, in_len;
    uint8_t peek[16];  /* decompressed bytes peeked, served first */
    size_t npeek, peekpos;
    char err[128];
};

/* One read(2) into the free part of the input buffer (which is compacted
 * first). Returns what read returned. */
static ssize_t fill(struct tb_gzin *h)
{
    if (h->in_pos == h->in_len)
        h->in_pos = h->in_len = 0;
    else if (h->in_pos > 0) {
        memmove(h->in, h->in + h->in_pos, h->in_len - h->in_pos);
        h->in_len -= h->in_pos;
        h->in_pos = 0;
    }
    ssize_t n = read(h->fd, h->in + h->in_len, IN_BUF - h->in_len);
    if (n > 0)
        h->in_len += (size_t)n;
    else if (n == 0)
        h->in_eof = true;
    return n;
}

static int start_member(struct tb_gzin *h)
{
    int rc = h->zinit ? inflateReset(&h->zs) : inflateInit2(&h->zs, 16 + MAX_WBITS);
    if (rc != Z_OK) {
        snprintf(h->err, sizeof h->err, "%s", h->zs.msg ? h->zs.msg : "cannot start inflating");
        return -1;
    }
    h->zinit = true;
    h->member_end = false;
    return 0;
}

/* Reads the first two bytes (or what there is) to tell gzip from plain. */
static int decide(struct tb_gzin *h)
{
    while (!h->decided) {
        if (h->in_len >= 2 || h->in_eof) {
            h->decided = true;
            h->gzip = h->in_len >= 2 && tb_gzin_magic(h->in);
            if (h->gzip && start_member(h) < 0)
                return -1;
            break;
        }
        if (fill(h) < 0)
            return -1;
    }
    return 0;
}

static ssize_t read_plain(struct tb_gzin *h, char *buf, size_t size)
{
    if (h->in_pos < h->in_len) {
        size_t k = h->in_len - h->in_pos < size ? h->in_len - h->in_pos : size;
        memcpy(buf, h->in + h->in_pos, k);
        h->in_pos += k;
        return (ssize_t)k;
    }
    return read(h->fd, buf, size);
}

/* Inflates into buf; returns once something is there and no more input is
 * at hand (a pipe is not waited on for more), at the end, or on an error. */
static ssize_t read_gzip(struct tb_gzin *h, char *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        if (h->member_end) {
            /* Another member may follow (`cat a.gz b.gz`); anything else
             * after a member is ignored, as gzip -d ignores it. */
            if (h->in_len - h->in_pos < 2 && !h->in_eof) {
                if (got)
                    break;
                if (fill(h) < 0)
                    return -1;
                continue;
            }
            if (h->in_len - h->in_pos >= 2 && tb_gzin_magic(h->in + h->in_pos)) {
                if (start_member(h) < 0)
                    return got ? (ssize_t)got : (errno = EIO, -1);
            } else {
                break; /* the end */
            }
        }
        if (h->in_pos == h->in_len) {
            if (h->in_eof) {
                snprintf(h->err, sizeof h->err, "unexpected end of file");
                h->cut = true;
                break;
            }
            if (got)
                break;
            ssize_t n = fill(h);
            if (n < 0)
                return -1;
            continue;
        }
        h->zs.next_in = h->in + h->in_pos;
        h->zs.avail_in = (uInt)(h->in_len - h->in_pos);
        h->zs.next_out = (Bytef *)buf + got;
        size_t room = size - got;
        h->zs.avail_out = room > UINT32_MAX ? UINT32_MAX : (uInt)room;
        uInt out_before = h->zs.avail_out;
        int rc = inflate(&h->zs, Z_NO_FLUSH);
        h->in_pos = h->in_len - h->zs.avail_in;
        got += out_before - h->zs.avail_out;
        if (rc == Z_STREAM_END) {
            h->member_end = true;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            snprintf(h->err, sizeof h->err, "%s",
                     h->zs.msg ? h->zs.msg : rc == Z_MEM_ERROR ? "out of memory" : "invalid data");
            if (got)
                break;
            errno = EIO;
            return -1;
        }
    }
    return (ssize_t)got;
}

static ssize_t cookie_read(void *cookie, char *buf, size_t size)
{
    struct tb_gzin *h = cookie;
    size_t done = 0;
    if (h->peekpos < h->npeek) {
        done = h->npeek - h->peekpos < size ? h->npeek - h->peekpos : size;
        memcpy(buf, h->peek + h->peekpos, done);
        h->peekpos += done;
        return (ssize_t)done;
    }
    if (decide(h) < 0)
        return -1;
    if (h->err[0]) {
        /* A cut stream stays at its end; damaged data stays an error. */
        if (h->cut)
            return 0;
        errno = EIO;
        return -1;
    }
    return h->gzip ? read_gzip(h, buf, size) : read_plain(h, buf, size);
}

static int cookie_close(void *cookie)
{
    struct tb_gzin *h = cookie;
    if (h->zinit)
        inflateEnd(&h->zs);
    int rc = close(h->fd);
    free(h->in);
    free(h);
    return rc;
}

FILE *tb_gzin_open(int fd, struct tb_gzin **hp)
{
    struct tb_gzin *h = calloc(1, sizeof *h);
    if (h)
        h->in = malloc(IN_BUF);
    if (!h || !h->in) {
        if (h)
            free(h->in);
        free(h);
        errno = ENOMEM;
        return NULL;
    }
    h->fd = fd;
    cookie_io_functions_t io = {.read = cookie_read, .close = cookie_close};
    FILE *f = fopencookie(h, "rb", io);
    if (!f) {
        free(h->in);
        free(h);
        return NULL;
    }
    *hp = h;
    return f;
}

size_t tb_gzin_peek(struct tb_gzin *h, uint8_t *buf, size_t n)
{
    if (n > sizeof h->peek)
        n = sizeof h->peek;
    /* Only before anything was handed out: the peeked bytes come first. */
    while (h->npeek < n && h->peekpos == 0 && !h->err[0]) {
        h->peekpos = h->npeek; /* so cookie_read reads past the peeked bytes */
        ssize_t k = cookie_read(h, (char *)h->peek + h->npeek, n - h->npeek);
        h->peekpos = 0;
        if (k <= 0)
            break;
        h->npeek += (size_t)k;
    }
    size_t k = n < h->npeek ? n : h->npeek;
    memcpy(buf, h->peek, k);
    return k;
}

const char *tb_gzin_error(const struct tb_gzin *h)
{
    return h && h->err[0] ? h->err : NULL;
}

bool tb_gzin_compressed(const struct tb_gzin *h)
{
    return h && h->decided && h->gzip;
}
