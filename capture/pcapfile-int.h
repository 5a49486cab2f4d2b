/* SPDX-License-Identifier: MIT */
/* pcapfile-int.h — private to capture/: the fast path for classic pcap files:
 * records handed out in place from a read-only mapping of the file (large
 * pread(2) blocks when it cannot be mapped, for a cut last record and for what
 * the file gained after it was mapped).  libpcap reads a
 * savefile through stdio, two fread() calls and a copy per record; on a file in
 * the page cache that costs more than everything tbneck does with the packet
 * afterwards. This reader takes over once libpcap has opened and validated a
 * regular file whose header is the common kind (version 2.4, micro- or
 * nanosecond magic, either byte order), and keeps libpcap's rules for each
 * record: the same length checks, the same cut at the file's snapshot length,
 * the same error texts. Anything else (pcapng, older versions, the Kuznetzov
 * format, pipes and standard input) stays with libpcap. docs/DESIGN.md ("Offline
 * reading") has the reasoning. */
#ifndef TB_PCAPFILE_H
#define TB_PCAPFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* The file header's size, and the largest captured length libpcap accepts
 * for the link types tbneck decodes (its MAXIMUM_SNAPLEN). */
#define TB_PCAPFILE_HDR 24
#define TB_PCAPFILE_MAX_CAPLEN 262144u

struct tb_pcapfile;

/* One record. `data` stays valid until the next call on the same reader. */
struct tb_pcaprec {
    int64_t ts_ns;
    uint32_t caplen; /* at most the file's snapshot length */
    uint32_t len;    /* on the wire, as the record says */
    const uint8_t *data;
};

/* Whether a file that starts with these 24 bytes is one this reader takes. */
bool tb_pcapfile_eligible(const uint8_t hdr[TB_PCAPFILE_HDR]);

/* A reader of the records of `fd` (a regular file; mapped, or read with
 * pread(2) from offset 24, so the descriptor's own position is left alone;
 * TBNECK_PCAP_READER=pread keeps it off the mapping). While a mapping is live
 * a SIGBUS (the file cut under it between two size checks) ends the process
 * with one line on stderr and exit status 1. `hdr` is the
 * file header (eligible), `snapshot` the snapshot length libpcap settled on
 * for the file (pcap_snapshot()). NULL when memory ran out. The descriptor
 * stays the caller's. */
struct tb_pcapfile *tb_pcapfile_new(int fd, const uint8_t hdr[TB_PCAPFILE_HDR],
                                    uint32_t snapshot);
void tb_pcapfile_free(struct tb_pcapfile *r);

/* The next record: 1 with *rec filled, 0 at the end of the file, -1 on a
 * truncated or invalid record or a read error, described in errbuf with
 * libpcap's words. After -1 the reader only returns -1. */
int tb_pcapfile_next(struct tb_pcapfile *r, struct tb_pcaprec *rec, char *errbuf,
                     size_t errlen);

/* Bytes of the file consumed so far (for progress). */
uint64_t tb_pcapfile_offset(const struct tb_pcapfile *r);

#endif
