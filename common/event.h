/* SPDX-License-Identifier: MIT */
/* event.h — an outside event that may explain congestion (a JVM GC pause
 * today): what events/ parses, store/ keeps and the events report overlays. */
#ifndef TB_EVENT_H
#define TB_EVENT_H

#include "tb.h"

/* One event over [start_ns, end_ns), ns since the epoch on the wall clock of
 * the machine that logged it (the tap's clock is assumed to agree). */
struct tb_event {
    int64_t start_ns, end_ns;
    char kind[16];    /* "gc" */
    char host[64];    /* the tier or host it belongs to ("tomcat") */
    char detail[128];
};

#endif
