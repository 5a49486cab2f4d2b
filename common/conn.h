/* SPDX-License-Identifier: MIT */
/* conn.h — the record of one TCP connection as the tap saw it: who called
 * whom, when it opened and closed, and how many requests it carried. It
 * crosses from capture to analysis beside struct tb_request, so that idle
 * pooled connections (which carry no request) are counted too. */
#ifndef TB_CONN_H
#define TB_CONN_H

#include "tb.h"
#include "addr.h"

/* How the tap saw a connection begin. */
enum tb_conn_open {
    TB_CONN_SYN = 0,       /* the client's SYN */
    TB_CONN_SYNACK = 1,    /* the SYN was missed, its SYN-ACK was seen */
    TB_CONN_MIDSTREAM = 2, /* opened before the capture (or its handshake lost): open_ns is
                            * its first packet seen */
};

/* How it ended, as far as the tap knows. */
enum tb_conn_close {
    TB_CONN_OPEN = 0,    /* still open: a record written while the capture runs */
    TB_CONN_FIN = 1,     /* FIN exchange (close_ns = its last packet) */
    TB_CONN_RST = 2,     /* reset (close_ns = the RST), or a new SYN on the same 4-tuple */
    TB_CONN_IDLE = 3,    /* silent longer than the idle timeout: close_ns = last packet */
    TB_CONN_EVICTED = 4, /* pushed out of a full flow table: close_ns = last packet */
    TB_CONN_END = 5,     /* still open when the capture ended: close_ns = last packet */
};

/* One connection. Ids are those of the capture engine (tb_request.conn: the
 * requests a connection carried name it). tier/server are the catalog ids of
 * its server end, 0 while no protocol was recognised on it (an idle pooled
 * connection that never carried a byte after its handshake): readers then
 * resolve the server address against the catalog. */
struct tb_conn {
    uint64_t conn;
    struct tb_addr client, server;
    uint32_t tier, server_id;
    int64_t open_ns, close_ns;  /* first and last packet seen (SYN ... FIN/RST) */
    uint64_t requests;          /* request records it carried */
    uint64_t packets;
    uint64_t bytes_c2s, bytes_s2c; /* TCP payload bytes each way, retransmissions included */
    uint8_t opened;             /* enum tb_conn_open */
    uint8_t closed;             /* enum tb_conn_close */
};

/* "syn", "synack", "midstream"; "open", "fin", "rst", "idle", "evicted",
 * "end" (what the CSV export and the JSON API print). "?" out of range. */
const char *tb_conn_open_name(unsigned v);
const char *tb_conn_close_name(unsigned v);

#endif
