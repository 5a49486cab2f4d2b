/* SPDX-License-Identifier: MIT */
/* dump.h — keeps the packets tbneck analyses in pcap files, as `tcpdump -w`
 * does: the same records (those that passed the filter, as captured), the
 * same file header (written by libpcap's own pcap_dump), and tcpdump's
 * rotation and file names:
 *
 *   -C SIZE   before writing a packet, when the current file is larger than
 *             SIZE bytes, close it and open the next: FILE, FILE1, FILE2, ...
 *   -W N      with -C: a ring of N files FILE0..FILE<N-1>, numbers padded
 *             with zeros to the width of N-1 (-W 12: FILE00..FILE11); with -G
 *             alone: stop after N files (tcpdump exits)
 *   -G SECS   when a packet comes SECS or more (whole seconds) after the
 *             current file was opened, open the next; FILE is a strftime(3)
 *             pattern expanded in local time at the opening (with -C also:
 *             the time file, then its numbered continuations from 0)
 *
 * One difference, on purpose: time is the packets' capture time, not the
 * wall clock, so rotating a capture file read with -r cuts it as it was
 * captured (tcpdump reading a file rotates by the time the reading takes).
 * Live, the two agree. */
#ifndef TB_DUMP_H
#define TB_DUMP_H

#include "tb.h"

struct tb_dump_opts {
    const char *path;       /* -w FILE ("-" = standard output, no rotation) */
    int64_t rotate_bytes;   /* -C in bytes; 0 = no size rotation */
    int64_t rotate_secs;    /* -G; 0 = no time rotation */
    int files;              /* -W; 0 = unlimited */
};

/* Timestamp precision of the files written (the pcap magic). */
enum tb_dump_prec { TB_DUMP_MICRO = 0, TB_DUMP_NANO = 1 };

struct tb_dump;

/* Opens the first file. `linktype` (DLT) and `snaplen` go into every file
 * header; `start_ns` is the time the first file is opened at (names with -G,
 * and the start of its period). A file that cannot be created: TB_E_IO with
 * "FILE: why" in errbuf. */
int tb_dump_open(struct tb_dump **out, const struct tb_dump_opts *o, int linktype,
                 uint32_t snaplen, enum tb_dump_prec prec, int64_t start_ns, char *errbuf,
                 size_t errlen);
/* Writes one packet (rotating first when due). Returns 0; 1 when -G's -W
 * limit was reached before this packet, which is then not written and the
 * capture should stop, as tcpdump stops; a negative TB_E_* on a write or
 * open failure, described in errbuf. */
int tb_dump_packet(struct tb_dump *d, int64_t ts_ns, const uint8_t *data, uint32_t caplen,
                   uint32_t len, char *errbuf, size_t errlen);
/* The file being written now. */
const char *tb_dump_current(const struct tb_dump *d);
/* Files opened so far (a ring's reused names counted each time). */
uint64_t tb_dump_files(const struct tb_dump *d);
/* Flushes and closes; a failed flush is TB_E_IO with errbuf filled. NULL is
 * a no-op. */
int tb_dump_close(struct tb_dump *d, char *errbuf, size_t errlen);

/* Parses -C's argument as tcpdump does: a whole number of millions of bytes,
 * or with a suffix k, m or g (KiB, MiB, GiB: later tcpdump releases accept
 * them). TB_E_INVAL unless > 0. */
int tb_dump_parse_size(const char *s, int64_t *bytes);

#endif
