/* SPDX-License-Identifier: MIT */
/* blast.c — bench_fanout's second sender: a pcap file preloaded in memory and
 * sent LOOPS times onto an interface as fast as the kernel takes it, through
 * one AF_PACKET socket with sendmmsg (256 frames a call) and
 * PACKET_QDISC_BYPASS, where tcpreplay --topspeed makes one syscall a packet.
 * Prints "blast: N packets in S s, R pps". Usage: blast IFACE FILE.pcap LOOPS */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 256

struct frame {
    unsigned char *data;
    size_t len;
};

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: blast IFACE FILE.pcap LOOPS\n");
        return 2;
    }
    long loops = strtol(argv[3], NULL, 10);
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(argv[2], err);
    if (!p || loops < 1) {
        fprintf(stderr, "blast: %s: %s\n", argv[2], p ? "bad loop count" : err);
        return 1;
    }
    struct frame *f = NULL;
    size_t n = 0, cap = 0;
    struct pcap_pkthdr *h;
    const u_char *d;
    while (pcap_next_ex(p, &h, &d) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            f = realloc(f, cap * sizeof *f);
            if (!f)
                return 1;
        }
        f[n].len = h->caplen;
        f[n].data = malloc(h->caplen);
        if (!f[n].data)
            return 1;
        memcpy(f[n].data, d, h->caplen);
        n++;
    }
    pcap_close(p);
    int s = socket(AF_PACKET, SOCK_RAW, 0);
    if (s < 0) {
        perror("blast: socket");
        return 1;
    }
    int one = 1;
    setsockopt(s, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(argv[1])};
    if (!sll.sll_ifindex || bind(s, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "blast: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    struct mmsghdr msg[BATCH];
    struct iovec iov[BATCH];
    struct timespec t0, t1;
    uint64_t sent = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long l = 0; l < loops; l++) {
        for (size_t i = 0; i < n;) {
            unsigned k = 0;
            for (; k < BATCH && i + k < n; k++) {
                iov[k] = (struct iovec){f[i + k].data, f[i + k].len};
                memset(&msg[k], 0, sizeof msg[k]);
                msg[k].msg_hdr.msg_iov = &iov[k];
                msg[k].msg_hdr.msg_iovlen = 1;
            }
            int r = sendmmsg(s, msg, k, 0);
            if (r < 0) {
                if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR)
                    continue; /* the device is busy: the same frames again */
                perror("blast: sendmmsg");
                return 1;
            }
            i += (size_t)r;
            sent += (uint64_t)r;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("blast: %llu packets in %.3f s, %.0f pps\n", (unsigned long long)sent, secs,
           secs > 0 ? (double)sent / secs : 0);
    for (size_t i = 0; i < n; i++)
        free(f[i].data);
    free(f);
    return 0;
}
