/* SPDX-License-Identifier: MIT */
/* bare_read.c — the floor for offline capture speed: libpcap reading a file
 * with an empty callback (pcap_dispatch), nanosecond timestamps as tbneck
 * asks for. Prints the packet count, bytes and seconds. */
#include <pcap/pcap.h>
#include <stdio.h>
#include <time.h>

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *data)
{
    unsigned long long *n = (unsigned long long *)user;
    n[0]++;
    n[1] += h->len;
    (void)data;
}

int main(int argc, char **argv)
{
    char err[PCAP_ERRBUF_SIZE];
    unsigned long long n[2] = {0, 0};
    struct timespec t0, t1;
    if (argc != 2) {
        fprintf(stderr, "usage: bare_read FILE.pcap\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pcap_t *p = pcap_open_offline_with_tstamp_precision(argv[1], PCAP_TSTAMP_PRECISION_NANO, err);
    if (!p) {
        fprintf(stderr, "bare_read: %s\n", err);
        return 1;
    }
    int r;
    while ((r = pcap_dispatch(p, -1, on_packet, (u_char *)n)) > 0)
        ;
    if (r == PCAP_ERROR) {
        fprintf(stderr, "bare_read: %s: %s\n", argv[1], pcap_geterr(p));
        pcap_close(p);
        return 1;
    }
    pcap_close(p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%llu packets %llu bytes %.6f s\n", n[0], n[1], s);
    return 0;
}
