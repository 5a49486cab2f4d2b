/* SPDX-License-Identifier: MIT */
/* blast.c — the benches' packet sender: a pcap file preloaded into one block
 * of memory and sent onto an interface as fast as the kernel takes it (or at
 * --pps), through one AF_PACKET socket with PACKET_QDISC_BYPASS, either with
 * sendmmsg (--batch frames a call, 256 by default) or through a
 * PACKET_TX_RING (--tx-ring: frames written into a mapped ring, one send()
 * a batch). tcpreplay --topspeed makes one syscall a packet and tops out
 * near 430 k pkt/s here.
 *
 *   blast [--loops N] [--count N] [--pps R] [--batch N] [--tx-ring] [--threads N]
 *         IFACE FILE.pcap
 *
 * Bounded: it sends the file LOOPS times (default 1), or COUNT packets when
 * --count is given (looping the file as often as needed). With --threads N
 * (at most 8), N threads with a socket each share the count and the rate,
 * thread i starting at the i-th N-th of the file (on a veth the kernel's
 * work then runs on several CPUs; the packets of a flow may leave out of
 * order). Prints
 *   blast: N packets in S s, R pps
 *   blast: CPU user U s, system S s; K busy retries; rate R1 asked
 * (the CPU of the sending, the file's loading left out).
 * Exit 0; 2 on a usage error, 1 on a runtime one (one line each).
 *
 * Why a token bucket paced per batch, with batches of about one millisecond
 * of traffic at low rates: sleeping per packet costs more CPU than sending
 * it (at 100 k pkt/s a nanosleep a packet would take most of a core that the
 * receiver shares), and bursts of 1 ms are far below what a ring absorbs.
 *
 * Note on a veth pair: with PACKET_QDISC_BYPASS the frame goes straight to
 * veth_xmit, which hands it to the peer's receive path; that path (the
 * packet sockets' copy into their rings, the fan-out hash) runs in the
 * softirq raised on the sender's CPU, usually right when the send returns.
 * So the sender's system time includes the receiving kernel's work. */
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX 1024
#define MAX_THREADS 8
#define RING_FRAMES 4096 /* a power of two: the slot index wraps by mask */

struct pkts {
    unsigned char *data; /* every frame, back to back */
    size_t *off;         /* frame i is data[off[i] .. off[i + 1]) */
    size_t n;
    size_t maxlen;
};

struct opts {
    const char *iface, *file;
    uint64_t loops, count; /* count 0: loops * n */
    double pps;            /* 0: as fast as possible */
    unsigned batch, threads;
    bool ring;
};

static int usage(const char *why)
{
    fprintf(stderr, "blast: %s (usage: blast [--loops N] [--count N] [--pps R] [--batch N] "
                    "[--tx-ring] [--threads N] IFACE FILE.pcap)\n",
            why);
    return 2;
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || x < min || x > max)
        return false;
    *v = x;
    return true;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.loops = 1, .batch = 256, .threads = 1};
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (!strcmp(a, "--tx-ring")) {
            o->ring = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage("an option without its value");
        const char *val = argv[++i];
        if (!strcmp(a, "--loops") && parse_u64(val, 1, 1000000, &v))
            o->loops = v;
        else if (!strcmp(a, "--count") && parse_u64(val, 1, 10000000000ULL, &v))
            o->count = v;
        else if (!strcmp(a, "--pps") && parse_u64(val, 1, 100000000, &v))
            o->pps = (double)v;
        else if (!strcmp(a, "--batch") && parse_u64(val, 1, BATCH_MAX, &v))
            o->batch = (unsigned)v;
        else if (!strcmp(a, "--threads") && parse_u64(val, 1, MAX_THREADS, &v))
            o->threads = (unsigned)v;
        else {
            fprintf(stderr, "blast: bad option %s %s\n", a, val);
            return 2;
        }
    }
    if (argc - i != 2)
        return usage("want IFACE and FILE.pcap");
    o->iface = argv[i];
    o->file = argv[i + 1];
    return 0;
}

static int load(const char *file, struct pkts *p)
{
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *pc = pcap_open_offline(file, err);
    if (!pc) {
        fprintf(stderr, "blast: %s\n", err);
        return 1;
    }
    size_t cap = 0, dcap = 0, dn = 0;
    struct pcap_pkthdr *h;
    const u_char *d;
    int r;
    *p = (struct pkts){0};
    while ((r = pcap_next_ex(pc, &h, &d)) == 1) {
        if (p->n + 2 > cap) {
            cap = cap ? cap * 2 : 4096;
            size_t *o = realloc(p->off, cap * sizeof *o);
            if (!o)
                goto nomem;
            p->off = o;
        }
        if (dn + h->caplen > dcap) {
            dcap = dcap ? dcap * 2 : 1 << 20;
            while (dn + h->caplen > dcap)
                dcap *= 2;
            unsigned char *nd = realloc(p->data, dcap);
            if (!nd)
                goto nomem;
            p->data = nd;
        }
        p->off[p->n++] = dn;
        memcpy(p->data + dn, d, h->caplen);
        dn += h->caplen;
        if (h->caplen > p->maxlen)
            p->maxlen = h->caplen;
    }
    if (r == PCAP_ERROR) {
        fprintf(stderr, "blast: %s: %s\n", file, pcap_geterr(pc));
        pcap_close(pc);
        return 1;
    }
    pcap_close(pc);
    if (!p->n) {
        fprintf(stderr, "blast: %s: no packets\n", file);
        return 1;
    }
    p->off[p->n] = dn;
    return 0;
nomem:
    pcap_close(pc);
    fprintf(stderr, "blast: %s: out of memory\n", file);
    return 1;
}

static double tv_s(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits until `sent` packets are due at pps since t0 (token bucket paced
 * per batch); returns at once when unpaced or behind schedule. */
static void pace(double pps, double t0, uint64_t sent)
{
    if (pps <= 0)
        return;
    double due = t0 + (double)sent / pps, wait = due - now_s();
    if (wait > 20e-6) {
        struct timespec d = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&d, NULL);
    }
}

/* A sending thread's state (both send paths): its socket, its share of the
 * count and rate, where in the file, how many sent. */
struct run {
    const struct opts *o;
    const struct pkts *p;
    int sock, rc;
    pthread_t th;
    double pps; /* this thread's share; 0: unpaced */
    uint64_t total, sent, retries;
    size_t next; /* the next frame of the file */
    double t0, t1;
    struct mmsghdr msg[BATCH_MAX];
    struct iovec iov[BATCH_MAX];
};

static unsigned batch_size(const struct run *r)
{
    uint64_t left = r->total - r->sent;
    unsigned b = r->o->batch;
    /* About a millisecond of traffic a batch when paced (at least 1). */
    if (r->pps > 0 && r->pps / 1000 < b)
        b = r->pps >= 1000 ? (unsigned)(r->pps / 1000) : 1;
    return left < b ? (unsigned)left : b;
}

static int send_mmsg(int s, struct run *r)
{
    struct mmsghdr *msg = r->msg;
    struct iovec *iov = r->iov;
    const struct pkts *p = r->p;
    while (r->sent < r->total) {
        pace(r->pps, r->t0, r->sent);
        unsigned k = batch_size(r);
        size_t f = r->next;
        for (unsigned j = 0; j < k; j++) {
            iov[j] = (struct iovec){p->data + p->off[f], p->off[f + 1] - p->off[f]};
            msg[j] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[j], .msg_iovlen = 1}};
            if (++f == p->n)
                f = 0;
        }
        int n = sendmmsg(s, msg, k, 0);
        if (n < 0) {
            if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
                r->retries++; /* the device is busy: the same frames again */
                continue;
            }
            perror("blast: sendmmsg");
            return 1;
        }
        r->sent += (uint64_t)n;
        r->next = (r->next + (size_t)n) % p->n;
    }
    return 0;
}

/* PACKET_TX_RING (TPACKET_V2): frames are written into slots the kernel
 * owns once marked TP_STATUS_SEND_REQUEST; one send() sends all marked. */
static int send_ring(int s, struct run *r)
{
    const struct pkts *p = r->p;
    int v = TPACKET_V2;
    if (setsockopt(s, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0) {
        perror("blast: PACKET_VERSION");
        return 1;
    }
    size_t hdr = TPACKET_ALIGN(sizeof(struct tpacket2_hdr));
    size_t fsz = 64;
    while (fsz < hdr + p->maxlen)
        fsz *= 2;
    size_t bsz = fsz < 4096 ? 4096 : fsz;
    struct tpacket_req req = {.tp_block_size = (unsigned)bsz,
                              .tp_block_nr = (unsigned)(RING_FRAMES * fsz / bsz),
                              .tp_frame_size = (unsigned)fsz,
                              .tp_frame_nr = RING_FRAMES};
    if (setsockopt(s, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) {
        fprintf(stderr, "blast: PACKET_TX_RING (%zu-byte frames): %s\n", fsz, strerror(errno));
        return 1;
    }
    size_t len = (size_t)req.tp_block_nr * bsz;
    unsigned char *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
    if (ring == MAP_FAILED) {
        perror("blast: mmap of the tx ring");
        return 1;
    }
    size_t slot = 0;
    int rc = 0;
    while (r->sent < r->total) {
        pace(r->pps, r->t0, r->sent);
        unsigned k = batch_size(r), filled = 0;
        for (; filled < k; filled++) {
            struct tpacket2_hdr *h = (void *)(ring + (slot & (RING_FRAMES - 1)) * fsz);
            unsigned st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
            if (st & TP_STATUS_WRONG_FORMAT) {
                fprintf(stderr, "blast: the kernel refused a frame of %u bytes (tx ring)\n",
                        h->tp_len);
                rc = 1;
                goto out;
            }
            if (st != TP_STATUS_AVAILABLE)
                break; /* the kernel still holds it */
            size_t l = p->off[r->next + 1] - p->off[r->next];
            memcpy((unsigned char *)h + hdr, p->data + p->off[r->next], l);
            h->tp_len = (unsigned)l;
            __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
            slot++;
            if (++r->next == p->n)
                r->next = 0;
        }
        if (!filled) {
            /* Every slot is still the kernel's: wait for it to free some. */
            struct pollfd pfd = {.fd = s, .events = POLLOUT};
            poll(&pfd, 1, 10);
            r->retries++;
        }
        /* Blocking send: returns once the marked frames went out. Marked
         * frames are the kernel's: a transient error leaves them to the
         * next send, so they count as sent either way. */
        r->sent += filled;
        if (send(s, NULL, 0, 0) < 0) {
            if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
                r->retries++;
                continue;
            }
            perror("blast: send (tx ring)");
            rc = 1;
            break;
        }
    }
    /* Flush: the last frames are sent before the ring goes. */
    for (int i = 0; i < 1000 && !rc; i++) {
        struct tpacket2_hdr *h = (void *)(ring + ((slot - 1) & (RING_FRAMES - 1)) * fsz);
        if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) == TP_STATUS_AVAILABLE)
            break;
        send(s, NULL, 0, 0);
    }
out:
    munmap(ring, len);
    return rc;
}

/* A packet socket bound to the interface, bypassing the qdisc. */
static int open_socket(const struct opts *o, unsigned ifindex, int *out)
{
    int s = socket(AF_PACKET, SOCK_RAW, 0);
    if (s < 0) {
        perror("blast: socket");
        return 1;
    }
    int one = 1;
    if (setsockopt(s, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0)
        perror("blast: PACKET_QDISC_BYPASS (sending through the qdisc)");
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_ifindex = (int)ifindex};
    if (bind(s, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "blast: %s: %s\n", o->iface, strerror(errno));
        close(s);
        return 1;
    }
    *out = s;
    return 0;
}

static void *sender_main(void *arg)
{
    struct run *r = arg;
    r->rc = r->o->ring ? send_ring(r->sock, r) : send_mmsg(r->sock, r);
    r->t1 = now_s();
    return NULL;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    unsigned ifindex = if_nametoindex(o.iface);
    if (!ifindex) {
        fprintf(stderr, "blast: %s: %s\n", o.iface, strerror(errno));
        return 1;
    }
    struct pkts p;
    if ((rc = load(o.file, &p)))
        return rc;
    uint64_t total = o.count ? o.count : o.loops * p.n;
    struct run *runs = calloc(o.threads, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "blast: out of memory\n");
        return 1;
    }
    for (unsigned i = 0; i < o.threads && !rc; i++) {
        struct run *r = &runs[i];
        *r = (struct run){.o = &o, .p = &p, .pps = o.pps / o.threads,
                          .total = total / o.threads + (i < total % o.threads),
                          .next = p.n * i / o.threads};
        rc = open_socket(&o, ifindex, &r->sock);
    }
    /* The CPU of the sending only: loading the file (and faulting its
     * memory in) costs about 0.5 s for 400 MB, which would swamp a short run. */
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s(), t1 = t0;
    unsigned started = 0;
    for (; started < o.threads && !rc; started++) {
        runs[started].t0 = t0;
        if (pthread_create(&runs[started].th, NULL, sender_main, &runs[started])) {
            fprintf(stderr, "blast: cannot start a sending thread\n");
            rc = 1;
            break;
        }
    }
    uint64_t sent = 0, retries = 0;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(runs[i].th, NULL);
        rc = rc ? rc : runs[i].rc;
        sent += runs[i].sent;
        retries += runs[i].retries;
        t1 = runs[i].t1 > t1 ? runs[i].t1 : t1;
    }
    getrusage(RUSAGE_SELF, &ru1);
    double secs = t1 - t0;
    printf("blast: %llu packets in %.3f s, %.0f pps\n", (unsigned long long)sent, secs,
           secs > 0 ? (double)sent / secs : 0);
    printf("blast: CPU user %.3f s, system %.3f s; %llu busy retries; rate %.0f asked; "
           "%u thread%s\n",
           tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime), tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime),
           (unsigned long long)retries, o.pps, o.threads, o.threads == 1 ? "" : "s");
    for (unsigned i = 0; i < o.threads; i++)
        if (runs[i].sock > 0)
            close(runs[i].sock);
    free(runs);
    free(p.data);
    free(p.off);
    return rc;
}
