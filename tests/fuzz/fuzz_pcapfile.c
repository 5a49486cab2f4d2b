/* SPDX-License-Identifier: MIT */
/* fuzz_pcapfile.c — libFuzzer harness for the classic pcap fast reader
 * (capture/pcapfile.c): the input is a whole file, put in an anonymous memory
 * file and read to its end or its first error, every captured byte touched.
 * The snapshot length is the header's as libpcap settles it (0 or above the
 * maximum: the maximum), so the cut of longer records is reached too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pcapfile-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < TB_PCAPFILE_HDR || !tb_pcapfile_eligible(data))
        return 0;
    int fd = memfd_create("fuzz_pcapfile", 0);
    if (fd < 0)
        return 0;
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)n;
    }
    uint32_t magic, snap;
    memcpy(&magic, data, 4);
    memcpy(&snap, data + 16, 4);
    if (magic != 0xa1b2c3d4u && magic != 0xa1b23c4du)
        snap = __builtin_bswap32(snap);
    if (snap == 0 || snap > TB_PCAPFILE_MAX_CAPLEN)
        snap = TB_PCAPFILE_MAX_CAPLEN;
    struct tb_pcapfile *r = tb_pcapfile_new(fd, data, snap);
    if (r) {
        struct tb_pcaprec rec;
        char err[256];
        unsigned sum = 0;
        int rc;
        while ((rc = tb_pcapfile_next(r, &rec, err, sizeof err)) == 1) {
            if (rec.caplen > snap)
                abort(); /* a record is never longer than the snapshot */
            for (uint32_t i = 0; i < rec.caplen; i++)
                sum += rec.data[i];
        }
        if (rc < 0 && err[0] == '\0')
            abort(); /* an error always says what it was */
        if (tb_pcapfile_offset(r) > size)
            abort();
        tb_pcapfile_free(r);
        (void)sum;
    }
    close(fd);
    return 0;
}
