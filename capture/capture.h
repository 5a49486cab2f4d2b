/* SPDX-License-Identifier: MIT */
/* capture.h — the capture engine: link/IP/TCP decode, flow table, stream
 * reassembly, protocol parsers, tier assignment; packets in, tb_request out.
 *
 * The engine does no I/O: a source (offline files here, a live interface on a
 * libuv loop in live.c) feeds it packets, and finished requests leave through
 * the callback. It is single-threaded. */
#ifndef TB_CAPTURE_H
#define TB_CAPTURE_H

#include "tb.h"
#include "request.h"
#include "catalog.h"

struct tb_tiers;    /* capture/tiers.h */
struct tb_dump_opts; /* capture/dump.h */

struct tb_capture_stats {
    int linktype;              /* first link type seen (DLT_*) */
    uint64_t packets, bytes;   /* bytes = on-wire lengths */
    uint64_t truncated;        /* packets cut short by snaplen */
    uint64_t non_ip, non_tcp;
    uint64_t ip_fragments;     /* counted and skipped */
    uint64_t decode_errors;    /* malformed link/IP/TCP headers */
    uint64_t flows, flows_active_max, evicted_flows, idle_closed;
    uint64_t midstream_flows;
    uint64_t retransmitted_bytes, overlap_bytes, ooo_buffered_bytes, ooo_dropped_bytes;
    uint64_t gaps, gap_bytes;
    uint64_t parse_errors, resyncs, encrypted_flows, compressed_flows, inflight_dropped;
    uint64_t requests;
    uint64_t kernel_drops, if_drops; /* live only */
    int64_t first_ns, last_ns;
    uint64_t hdr_truncated;    /* snaplen cut inside the headers: skipped */
    uint64_t unknown_link;     /* packets of a link type the decoder does not know */
    uint64_t flows_open;       /* flows open now */
    uint64_t tcp_packets;      /* packets that decoded to a TCP segment */
    uint64_t streams;          /* connections that became push streams (proto.h) */
    uint64_t unanswered;       /* requests that by protocol got no answer (proto.h) */
    uint64_t probes;           /* health probes, not requests (proto.h) */
    /* Requests still waiting for their first response byte when their
     * connection ended, timed out, was evicted or the capture ended: no
     * departure, so no record (proto.h, waiting()). */
    uint64_t abandoned;
};

struct tb_engine_opts {
    size_t max_flows;          /* flow cap; LRU-idle eviction beyond it (default 1<<20) */
    size_t max_ooo_bytes;      /* per-direction out-of-order buffer cap (default 256 KiB) */
    int64_t idle_timeout_ns;   /* default 300 s */
    const char *force_proto;   /* NULL = detect by content (tiers file may also force) */
    uint64_t first_conn;       /* first connection id (tb_store_next_conn); 0 = 1 */
    /* --max-memory: bytes of flow and parser state; 0 = no cap. Lowers the
     * flow cap and the out-of-order cap to fit (see tb_engine_max_flows). */
    size_t max_memory;
};
/* What --max-memory counts per flow beyond its struct and parser state: a
 * first in-flight ring of 4 requests with their class text, malloc headers. */
#define TB_ENGINE_FLOW_EXTRA 2400

typedef void (*tb_request_cb)(void *ud, const struct tb_request *r);

/* Connection records (common/conn.h). The engine reports each connection
 * twice: when it opens (closed = TB_CONN_OPEN, the server side as guessed
 * then, tier 0 until a protocol is recognised) and when it ends (FIN, RST,
 * idle timeout, eviction, or the end of the capture in tb_engine_finish):
 * the second record, with the same conn id, replaces the first. Every
 * connection followed is reported, also one that never carried a request
 * (an idle pooled connection); a connection whose packets all carry no
 * payload and no SYN (pure ACKs of a connection opened before the capture)
 * is not followed and so not reported. */
struct tb_conn;
typedef void (*tb_conn_cb)(void *ud, const struct tb_conn *c);

struct tb_engine;

/* The catalog and tiers are borrowed and must outlive the engine; tiers may be
 * NULL (auto-discovery). */
int tb_engine_new(struct tb_engine **out, struct tb_catalog *cat, const struct tb_tiers *tiers,
                  const struct tb_engine_opts *opts, tb_request_cb cb, void *ud);
void tb_engine_free(struct tb_engine *e);
/* Asks for connection records (NULL cb: none, the default). */
void tb_engine_set_conn_cb(struct tb_engine *e, tb_conn_cb cb, void *ud);

/* Requests in batches instead of one call each (NULL cb: per request, the
 * default): once set, it replaces the callback given to tb_engine_new. A
 * batch holds up to TB_ENGINE_BATCH records (valid during the call), in the
 * order their exchanges completed; it is handed over when full, before a
 * connection record (so the two callbacks see the order a per-request
 * callback would) and before tb_engine_expire and tb_engine_finish return.
 * Between packets records may wait: an offline reader, which reads the
 * results after tb_engine_finish, loses nothing by it; a live one that
 * reads them per packet keeps the per-request callback. */
#define TB_ENGINE_BATCH 16
typedef void (*tb_requests_cb)(void *ud, const struct tb_request *r, size_t n);
void tb_engine_set_batch_cb(struct tb_engine *e, tb_requests_cb cb, void *ud);

/* One captured packet. `linktype` is the pcap DLT of its interface. Malformed
 * packets are counted, never fatal: returns 0 unless memory ran out. */
int tb_engine_packet(struct tb_engine *e, int linktype, int64_t ts_ns, const uint8_t *data,
                     uint32_t caplen, uint32_t wirelen);
/* Close idle flows as of `now_ns` (call periodically, e.g. once a second of
 * capture time). */
void tb_engine_expire(struct tb_engine *e, int64_t now_ns);
/* End of capture: close every flow, emitting what can be completed. */
void tb_engine_finish(struct tb_engine *e, int64_t now_ns);
const struct tb_capture_stats *tb_engine_stats(const struct tb_engine *e);
/* Approximate bytes held per tracked flow (for the memory figures). */
size_t tb_engine_flow_bytes(void);
/* Bytes of parser state a flow holds once its protocol is known (the largest
 * state_size in tb_protos). */
size_t tb_engine_parser_bytes(void);
/* Requests of one tier unanswered by protocol and abandoned (see
 * tb_capture_stats), so far. */
void tb_engine_tier_counts(const struct tb_engine *e, uint32_t tier, uint64_t *unanswered,
                           uint64_t *abandoned);
/* The flow cap in force (max_flows, or what max_memory leaves room for). */
size_t tb_engine_max_flows(const struct tb_engine *e);
/* Adds src's counters (packets, flows, requests, the reassembler's and the
 * parsers' counters) and its per-tier counts into dst: the live capture's
 * workers (fanout.h) are summed into the engine the capture reports. Tier
 * ids are src's, translated by tier_map (NULL: the same ids). */
void tb_engine_absorb(struct tb_engine *dst, const struct tb_engine *src,
                      uint32_t (*tier_map)(void *ud, uint32_t tier), void *ud);
/* Live sources report the kernel's and the interface's drop counters. */
void tb_engine_set_drops(struct tb_engine *e, uint64_t kernel_drops, uint64_t if_drops);

/* Offline source: reads several pcap/pcapng files (each may be gzip
 * compressed) merged in time order with nanosecond timestamps, applies an
 * optional BPF filter, feeds the engine.
 * On a bad or truncated file: a one-line message in errbuf, TB_E_* returned,
 * and everything read before it has been fed (and so is kept). */
struct tb_offline_opts {
    const char *const *files;
    size_t nfiles;
    const char *bpf;       /* NULL = none */
    bool progress;         /* progress line on stderr (only when it is a terminal) */
    volatile int *stop;    /* set non-zero (e.g. by SIGINT) to stop early */
    int64_t duration_ns;   /* stop after this much capture time; 0 = no limit */
    uint64_t max_packets;  /* -c: stop after this many packets (those the filter passed) */
    /* -w: every packet fed to the engine is also written to pcap files
     * (dump.h), header and records as tcpdump -w writes them; NULL = none.
     * The inputs must share one link type. */
    const struct tb_dump_opts *dump;
    int dump_prec;         /* enum tb_dump_prec, or -1: nanoseconds when any input has them */
    bool *dump_full;       /* out (may be NULL): -G's -W limit stopped the run */
    /* out of tb_offline_check (may be NULL): the time of the earliest first
     * packet the filter passes among the files that are not standard input,
     * INT64_MAX when there is none: what the capture's first_ns will be. */
    int64_t *first_ns;
};
/* A bad BPF expression is TB_E_INVAL (a usage error); an unreadable or
 * malformed file TB_E_PCAP; a link type the decoder does not know TB_E_UNSUPP
 * (before any packet is read). The caller ends the capture with
 * tb_engine_finish() either way. */
int tb_offline_run(struct tb_engine *e, const struct tb_offline_opts *o, char *errbuf,
                   size_t errlen);
/* Opens every file, checks its link type and compiles the filter, then closes
 * them: the same errors as tb_offline_run, before anything is created. */
int tb_offline_check(const struct tb_offline_opts *o, char *errbuf, size_t errlen);

#endif
