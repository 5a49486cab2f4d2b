/* SPDX-License-Identifier: MIT */
/* live-int.h — what live.c shares with the fan-out source (fanout.c). */
#ifndef TB_LIVE_INT_H
#define TB_LIVE_INT_H

#include <pcap/pcap.h>
#include "live.h"

/* Creates, configures (snaplen, promiscuous mode, ring size, 100 ms block
 * timeout, nanosecond stamps), activates and filters one handle on o->iface,
 * in non-blocking mode. Errors as tb_live_open's, one line in errbuf. */
int tb__live_pcap_open(pcap_t **out, const struct tb_live_opts *o, char *errbuf, size_t errlen);

#endif
