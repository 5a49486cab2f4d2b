/* SPDX-License-Identifier: MIT */
/* proto.h — the protocol parser descriptor and the one table listing them all.
 *
 * A parser sees one TCP connection as two ordered byte streams (client→server,
 * server→client) delivered by the reassembler, plus explicit GAP events for
 * bytes that were never captured. It pairs requests with responses and hands
 * each finished exchange to ctx->emit(). Parsers do no I/O; their per-flow
 * state is a fixed-size struct (state_size) the flow table allocates. A parser
 * that must buffer a message header split across segments may keep a small,
 * capped, lazily allocated spill buffer, freed in fini(). */
#ifndef TB_PROTO_H
#define TB_PROTO_H

#include "tb.h"

enum tb_dir { TB_DIR_C2S = 0, TB_DIR_S2C = 1 };

enum tb_detect {
    TB_DETECT_NO = 0,    /* certainly not this protocol */
    TB_DETECT_MAYBE = 1, /* need more bytes */
    TB_DETECT_YES = 2,
};

/* What consume()/gap() return: the parser's state after the call. */
enum tb_pstate {
    TB_PS_OK = 0,        /* keep feeding */
    TB_PS_ERROR = 1,     /* malformed bytes: counted; the parser resynchronises itself */
    TB_PS_STOP = 2,      /* stop parsing this flow (encrypted, compressed, hopeless) */
};

/* One finished exchange as the parser sees it. The class text is valid only
 * during the emit() call. */
struct tb_exchange {
    int64_t arrival_ns;   /* earliest packet carrying request bytes */
    int64_t departure_ns; /* latest packet carrying response bytes */
    uint64_t req_bytes, resp_bytes;
    const char *class_text; /* fingerprint: "GET /item/{id}", "SELECT * FROM t WHERE id = ?" */
    size_t class_len;
    /* flags before status, the reverse of struct tb_request: a parser
     * writes them one by one, and GCC copied the pair into the record by one
     * 8-byte load, which the two 4-byte stores could not forward to (a
     * stall on every request: a quarter of the engine's emit time). */
    uint32_t flags;       /* enum tb_req_flag (request.h) */
    int32_t status;       /* per protocol, docs/protocols.md: HTTP status; MySQL 0 OK / ERR
                           * code; PostgreSQL SQLSTATE base 36; -1 unknown */
    /* Optional (NULL: none): the parser's memory of the catalog id of
     * class_text. The engine takes a nonzero id from it instead of looking the
     * text up, and stores the id it looked up when it holds 0. The parser
     * zeroes it whenever the text it stands for changes; ids never change for
     * a (tier, text) and a parser state serves one tier, so the id stays right
     * for as long as the text does. Saves the catalog lookup per request of a
     * connection that repeats its classes (a Redis pipeline: a tenth of its
     * capture time). */
    uint32_t *class_id;
};

/* Counters a parser bumps; owned by the engine. */
struct tb_proto_counters {
    uint64_t parse_errors;
    uint64_t resyncs;
    uint64_t encrypted_flows;
    uint64_t compressed_flows;
    uint64_t inflight_dropped; /* requests dropped because the in-flight cap was hit */
    /* Connections that turned into a server push stream (Redis pub/sub or
     * MONITOR, memcached watch, PostgreSQL replication): no longer paired. */
    uint64_t streams;
    /* Requests that by protocol get no answer (memcached noreply, quiet binary
     * commands whose answer was suppressed, Redis CLIENT REPLY OFF/SKIP): no
     * departure exists, so no record. */
    uint64_t unanswered;
    /* Health probes answered on a connection between requests and not
     * requests of the application (AJP CPing/CPong): no record. */
    uint64_t probes;
};

struct tb_proto_ctx {
    void (*emit)(void *ud, const struct tb_exchange *ex);
    void *ud;
    struct tb_proto_counters *ctr;
};

struct tb_proto {
    const char *name;             /* "http", "mysql", "generic" */
    const uint16_t *ports;        /* well-known ports, 0-terminated (a hint, not a rule) */
    size_t state_size;
    /* Look at the first bytes seen in direction `dir` of a flow whose sides are
     * known (dir == TB_DIR_C2S means the bytes come from the side believed to be
     * the client). `*client_sent` is set to true when the bytes look like what a
     * client sends, false when like a server's; detection may thereby correct a
     * wrong guess about which side is the server. */
    enum tb_detect (*detect)(const uint8_t *p, size_t n, enum tb_dir dir, bool *client_sent);
    /* midstream: the handshake was not seen; skip to the first recognisable
     * message boundary. */
    void (*init)(void *st, bool midstream);
    enum tb_pstate (*consume)(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                              const uint8_t *p, size_t n, int64_t ts_ns);
    /* `len` bytes of direction `dir` were never captured (0 = unknown amount).
     * Inside a message of known length the hole is skipped and the exchange
     * keeps pairing (TB_REQ_GAP). Otherwise the parser resynchronises at the
     * next message start it recognises; a request is never invented, and a
     * response whose end fell in the hole is closed (TB_REQ_GAP) by the next
     * response start (HTTP) or the next command (MySQL), or dropped when its
     * end cannot be bounded.
     * `ts_ns` is the capture time of the missing bytes when it is known (a
     * packet cut by snaplen: the packet's own time), else TB_TS_UNKNOWN (a
     * lost segment, found later by an ACK or a segment beyond it: no packet
     * time belongs to those bytes, so they never move an arrival or a
     * departure; the departure stays at the latest response packet captured,
     * off from the truth by at most the span of the lost packets). */
    enum tb_pstate (*gap)(void *st, const struct tb_proto_ctx *ctx, enum tb_dir dir,
                          uint64_t len, int64_t ts_ns);
    /* Connection ended (FIN/RST/idle/end of capture): emit what can be
     * completed (e.g. an HTTP response delimited by close). `fin_dir` is the
     * direction whose FIN was seen first, or -1 for RST/idle/end. A response
     * cut short is emitted with TB_REQ_NORESP and the times seen so far; a
     * request with no response byte at all is not emitted. */
    void (*close)(void *st, const struct tb_proto_ctx *ctx, int fin_dir, int64_t ts_ns);
    void (*fini)(void *st); /* release spill buffers; must be safe after init() only */
    /* Requests still waiting for their first response byte (NULL: the parser
     * does not say; counted as 0). The engine asks just before close() and
     * counts them as abandoned: the connection ended, timed out or was
     * evicted with them unanswered (close() does not emit them). */
    uint32_t (*waiting)(const void *st);
    /* Exchanges are emitted in request order, except by a protocol whose
     * requests are answered out of order on one connection (FastCGI request
     * ids): it sets `multiplexed`. */
    bool multiplexed;
};

/* The table: NULL-terminated, in detection priority order (generic last). */
extern const struct tb_proto *const tb_protos[];
const struct tb_proto *tb_proto_find(const char *name);
/* The parsers' names in table order, ", "-separated, into out (NUL-terminated,
 * cut after the last name that fits); returns the length. For help texts. */
size_t tb_proto_names(char *out, size_t cap);

extern const struct tb_proto tb_proto_http1;
extern const struct tb_proto tb_proto_mysql;
extern const struct tb_proto tb_proto_generic;
extern const struct tb_proto tb_proto_postgres;
extern const struct tb_proto tb_proto_redis;
extern const struct tb_proto tb_proto_memcached;
extern const struct tb_proto tb_proto_ajp;
extern const struct tb_proto tb_proto_fastcgi;
extern const struct tb_proto tb_proto_tls;

/* Fingerprinting (capture/proto/fingerprint.c). Both write a NUL-terminated
 * string of at most cap-1 bytes into out and return its length. */
size_t tb_fp_http(const char *method, size_t mlen, const char *target, size_t tlen, char *out,
                  size_t cap);
size_t tb_fp_sql(const char *sql, size_t len, char *out, size_t cap);

#endif
