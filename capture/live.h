/* SPDX-License-Identifier: MIT */
/* live.h — a live libpcap source on a libuv loop: the device is opened and
 * activated up front (so privileges can be dropped afterwards), its selectable
 * descriptor is watched with uv_poll, and every readable event drains the
 * kernel ring with pcap_dispatch into a packet callback. */
#ifndef TB_LIVE_H
#define TB_LIVE_H

#include <stdio.h>
#include <uv.h>
#include "tb.h"

struct tb_live_opts {
    const char *iface;
    const char *bpf;     /* NULL = every packet */
    int snaplen;         /* default 262144 */
    int bufsize_mib;     /* kernel ring size, default 64 */
    bool immediate;      /* deliver each packet at once instead of per block */
    bool promisc;        /* promiscuous mode (a SPAN port needs it) */
};

/* Timestamps are nanoseconds since the epoch, from the kernel. */
typedef void (*tb_live_packet_cb)(void *ud, int linktype, int64_t ts_ns, const uint8_t *data,
                                  uint32_t caplen, uint32_t wirelen);

struct tb_live_stats {
    uint64_t received;     /* packets handed to us */
    uint64_t kernel_drops; /* ps_drop: dropped for lack of room in the ring */
    uint64_t if_drops;     /* ps_ifdrop: dropped by the interface or driver */
};

struct tb_live;

/* Opens and activates the device and applies the filter. A missing interface
 * returns TB_E_NOTFOUND, no permission TB_E_PERM, a bad filter TB_E_INVAL, any
 * other failure TB_E_PCAP; errbuf gets one line naming the interface. */
int tb_live_open(struct tb_live **out, uv_loop_t *loop, const struct tb_live_opts *o,
                 tb_live_packet_cb cb, void *ud, char *errbuf, size_t errlen);
/* Starts watching the descriptor; packets arrive through the callback. */
int tb_live_start(struct tb_live *l);
/* Drains what the kernel holds right now (also called by tb_live_start's
 * poll; call it before stopping so nothing captured is left behind). Returns
 * the number of packets read, or a negative TB_E_*. */
int tb_live_drain(struct tb_live *l);
/* Whether the last drain stopped at its cap (a flood, or a backlog after a
 * stall) with packets still in the kernel's ring: their times are behind the
 * wall clock, so the wall clock must not stand in for the capture clock. */
bool tb_live_behind(const struct tb_live *l);
int tb_live_linktype(const struct tb_live *l);

/* The live capture clock (DESIGN.md "Live windows"): packet time — the
 * newest packet's stamp, last_pkt_ns — and the wall clock less this lag only
 * as an idle link's fallback, so that windows close while nothing comes. A
 * packet may wait in a ring block up to its 100 ms timeout. */
#define TB_LIVE_CLOCK_LAG_NS (200 * TB_NS_PER_MS)
/* The clock a tick moves to from clock_ns. `idle`: the link looked idle at
 * this tick — no packet read since the previous tick, the last drain emptied
 * the ring (!tb_live_behind) and the tick came on time (one late by more
 * than a tick period, as after a stopped process, may have read its
 * backlog in an earlier poll callback); only then does wall_ns - the lag
 * count, wall_ns read before that drain. After a stall the kernel still
 * holds packets older than any wall-clock lag: the wall clock must not
 * overtake them, or windows close before their requests are read (a stall
 * of the sensor seen as a freeze of the tier). Never goes back (a wall
 * clock stepped back by NTP included). */
int64_t tb_live_clock(int64_t clock_ns, int64_t last_pkt_ns, int64_t wall_ns, bool idle);
/* Cumulative counters; the kernel's 32-bit counters are widened here. */
int tb_live_stats(struct tb_live *l, struct tb_live_stats *s);
/* Lists the devices libpcap can capture on, one a line, as tcpdump -D
 * prints them ("1.eth0 [Up, Running, Connected]"). On failure TB_E_PCAP
 * with libpcap's reason in errbuf. */
int tb_live_list(FILE *out, char *errbuf, size_t errlen);
/* Stops watching and closes the device; freed once libuv closed the poll
 * handle (run the loop). */
void tb_live_close(struct tb_live *l);

#endif
