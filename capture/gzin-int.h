/* SPDX-License-Identifier: MIT */
/* gzin-int.h — private to capture/: a gzip-compressed capture (x.pcap.gz,
 * `gzip -c x.pcap | tbneck capture -r -`) handed to libpcap as a stdio
 * stream, inflated by zlib as libpcap reads. A stream that does not start
 * with gzip's magic passes through unchanged, so standard input always goes
 * through here. The first bytes can be peeked (for the timestamp precision)
 * and are then read again. */
#ifndef TB_GZIN_H
#define TB_GZIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tb_gzin;

/* Takes over `fd` (closed with the stream). *h receives the handle that
 * tb_gzin_error() asks; it lives as long as the stream (fclose frees it).
 * NULL with errno set when memory ran out. A cut gzip stream reads as an
 * early end (libpcap then says "truncated"), damaged data as a read error
 * (EIO); tb_gzin_error() has zlib's words for either. */
FILE *tb_gzin_open(int fd, struct tb_gzin **h);
/* The first `n` (<= 16) bytes of the decompressed stream, without consuming
 * them; returns how many there are (fewer at a short stream). */
size_t tb_gzin_peek(struct tb_gzin *h, uint8_t *buf, size_t n);
/* zlib's description of the last decompression error ("invalid block
 * type", "unexpected end of file"), or NULL when there was none. */
const char *tb_gzin_error(const struct tb_gzin *h);
/* Whether the stream was gzip data (false: read as it is). Known once
 * something was read or peeked. */
bool tb_gzin_compressed(const struct tb_gzin *h);

/* Whether a file starting with these two bytes is gzip data. */
static inline bool tb_gzin_magic(const uint8_t b[2])
{
    return b[0] == 0x1f && b[1] == 0x8b;
}

#endif
