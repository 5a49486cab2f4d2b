/* SPDX-License-Identifier: MIT */
/* fuzz_decode.c — libFuzzer harness over tb_engine_packet: link decoding, the
 * flow table, reassembly, detection and the parsers, for every link type.
 *
 * Input: one byte choosing the link type, then packets, each as a 2-byte
 * big-endian captured length, one byte of "bytes cut by snaplen" (added to the
 * wire length), one byte of timestamp step (ms), and the captured bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "catalog.h"
#include "decode-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const int links[] = {
    TB_DLT_EN10MB, TB_DLT_LINUX_SLL, TB_DLT_LINUX_SLL2, TB_DLT_NULL, TB_DLT_LOOP,
    TB_DLT_RAW12, TB_DLT_LINKTYPE_RAW, TB_DLT_IPV4, TB_DLT_IPV6, 147 /* unknown */,
};

static uint64_t nreq;

static void on_req(void *ud, const struct tb_request *r)
{
    (void)ud;
    /* The engine's promises, checked on every record. */
    if (r->departure_ns < r->arrival_ns || r->tier == 0 || r->server == 0 || r->class_id == 0)
        abort();
    nreq++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tb_catalog *cat = NULL;
    struct tb_engine *e = NULL;
    /* Small caps so that eviction and the out-of-order limit are reached. */
    struct tb_engine_opts o = {.max_flows = 8, .max_ooo_bytes = 2048,
                               .idle_timeout_ns = 5 * TB_NS_PER_MS};
    if (size < 1 || tb_catalog_new(&cat))
        return 0;
    if (tb_engine_new(&e, cat, NULL, &o, on_req, NULL))
        goto out;
    int link = links[data[0] % TB_ARRAY_SIZE(links)];
    const uint8_t *p = data + 1, *end = data + size;
    int64_t ts = INT64_C(1700000000000000000);
    while (end - p >= 4) {
        uint32_t len = (uint32_t)(p[0] << 8 | p[1]);
        uint32_t cut = p[2];
        ts += (int64_t)p[3] * TB_NS_PER_MS;
        p += 4;
        if ((uint32_t)(end - p) < len)
            len = (uint32_t)(end - p);
        /* A private copy, so that reading past the packet trips ASan. */
        uint8_t *pkt = malloc(len ? len : 1);
        if (!pkt)
            break;
        memcpy(pkt, p, len);
        tb_engine_packet(e, link, ts, pkt, len, len + cut);
        free(pkt);
        p += len;
        tb_engine_expire(e, ts);
    }
    tb_engine_finish(e, ts);
    const struct tb_capture_stats *s = tb_engine_stats(e);
    if (s->requests != nreq || s->flows_open != 0)
        abort();
out:
    tb_engine_free(e);
    tb_catalog_free(cat);
    nreq = 0;
    return 0;
}
