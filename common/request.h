/* SPDX-License-Identifier: MIT */
/* request.h — the one record that crosses from capture to analysis. */
#ifndef TB_REQUEST_H
#define TB_REQUEST_H

#include "tb.h"
#include "addr.h"

/* Flags of a request record (DESIGN.md "request records"). */
enum tb_req_flag {
    TB_REQ_GAP = 1u << 0,       /* a capture hole touched this exchange */
    TB_REQ_TRUNC = 1u << 1,     /* packets cut by snaplen; sizes are lower bounds */
    TB_REQ_MIDSTREAM = 1u << 2, /* connection picked up without its handshake */
    TB_REQ_NORESP = 1u << 3,    /* closed before a response was complete */
    TB_REQ_CLOSE_DELIM = 1u << 4, /* response delimited by connection close */
};

/* One request/response exchange at one server.
 * Times are ns since the epoch on the tap's clock: arrival = the earliest
 * packet carrying request bytes, departure = the latest packet carrying
 * response bytes. Ids are those of the tb_catalog the capture used. */
struct tb_request {
    int64_t arrival_ns;
    int64_t departure_ns;
    uint64_t conn;       /* connection id, unique within the store */
    uint64_t req_bytes;  /* payload bytes of the request */
    uint64_t resp_bytes; /* payload bytes of the response */
    struct tb_addr client; /* caller (may be a host of another tier) */
    uint32_t tier;       /* catalog tier id (>= 1) */
    uint32_t server;     /* catalog server id (>= 1) */
    uint32_t class_id;   /* catalog class id (>= 1) */
    int32_t status;      /* HTTP status; MySQL 0 = OK, else ERR code; -1 unknown */
    uint32_t flags;      /* enum tb_req_flag */
};

#endif
