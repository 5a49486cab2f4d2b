/* SPDX-License-Identifier: MIT */
/* test_pcapfile.c — the classic pcap fast reader: which headers it takes,
 * records and timestamps in both byte orders and resolutions, records that
 * straddle its block buffer, the cut at the snapshot length, libpcap's
 * error texts for truncated and damaged files, and files that grow or shrink
 * while mapped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pcapfile-int.h"

/* A file being written: header, then records. */
struct wf {
    FILE *f;
    bool be, usec;
};

static void put32(struct wf *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(w->be ? v >> (24 - 8 * i) : v >> (8 * i));
    fwrite(b, 1, 4, w->f);
}

static void put16(struct wf *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(w->be ? v >> 8 : v), (uint8_t)(w->be ? v : v >> 8)};
    fwrite(b, 1, 2, w->f);
}

static struct wf wf_open(bool be, bool usec, uint16_t vmaj, uint16_t vmin, uint32_t snap)
{
    struct wf w = {tmpfile(), be, usec};
    assert_non_null(w.f);
    put32(&w, usec ? 0xa1b2c3d4u : 0xa1b23c4du);
    put16(&w, vmaj);
    put16(&w, vmin);
    put32(&w, 0);
    put32(&w, 0);
    put32(&w, snap);
    put32(&w, 1);
    return w;
}

/* A record of `caplen` bytes, byte i being (seed + i) & 0xff. */
static void wf_rec(struct wf *w, int32_t sec, int32_t frac, uint32_t caplen, uint32_t len,
                   uint8_t seed)
{
    put32(w, (uint32_t)sec);
    put32(w, (uint32_t)frac);
    put32(w, caplen);
    put32(w, len);
    for (uint32_t i = 0; i < caplen; i++)
        fputc((seed + i) & 0xff, w->f);
}

static bool pattern(const uint8_t *p, uint32_t n, uint8_t seed)
{
    for (uint32_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)((seed + i) & 0xff))
            return false;
    return true;
}

/* A reader over the finished file. */
static struct tb_pcapfile *wf_reader(struct wf *w, uint32_t snapshot)
{
    uint8_t hdr[TB_PCAPFILE_HDR];
    fflush(w->f);
    assert_int_equal(pread(fileno(w->f), hdr, sizeof hdr, 0), TB_PCAPFILE_HDR);
    assert_true(tb_pcapfile_eligible(hdr));
    struct tb_pcapfile *r = tb_pcapfile_new(fileno(w->f), hdr, snapshot);
    assert_non_null(r);
    return r;
}

static void test_eligible(void **state)
{
    (void)state;
    uint8_t h[TB_PCAPFILE_HDR];
    struct {
        uint32_t magic;
        uint16_t vmaj, vmin;
        bool be, want;
    } c[] = {
        {0xa1b2c3d4u, 2, 4, false, true},  {0xa1b23c4du, 2, 4, false, true},
        {0xa1b2c3d4u, 2, 4, true, true},   {0xa1b23c4du, 2, 4, true, true},
        {0xa1b2c3d4u, 2, 3, false, false}, /* lengths may be swapped: libpcap's */
        {0xa1b2c3d4u, 543, 0, false, false},
        {0xa1b2cd34u, 2, 4, false, false}, /* Kuznetzov: longer record headers */
        {0x0a0d0d0au, 2, 4, false, false}, /* pcapng */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct wf w = {NULL, c[i].be, false};
        w.f = tmpfile();
        put32(&w, c[i].magic);
        put16(&w, c[i].vmaj);
        put16(&w, c[i].vmin);
        for (int k = 0; k < 4; k++)
            put32(&w, 0);
        fflush(w.f);
        assert_int_equal(pread(fileno(w.f), h, sizeof h, 0), TB_PCAPFILE_HDR);
        assert_int_equal(tb_pcapfile_eligible(h), c[i].want);
        fclose(w.f);
    }
}

/* Both byte orders and both resolutions give the same nanoseconds; the time
 * fields are signed 32-bit. */
static void test_records_and_time(void **state)
{
    (void)state;
    for (int v = 0; v < 4; v++) {
        bool be = v & 1, usec = v & 2;
        struct wf w = wf_open(be, usec, 2, 4, 65535);
        wf_rec(&w, 1700000000, usec ? 123456 : 123456789, 60, 1514, 7);
        wf_rec(&w, 1700000001, 0, 0, 0, 0);
        wf_rec(&w, -1, usec ? 999999 : 999999999, 3, 3, 200);
        struct tb_pcapfile *r = wf_reader(&w, 65535);
        struct tb_pcaprec rec;
        char err[256];
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
        assert_int_equal(rec.ts_ns, usec ? 1700000000123456000 : 1700000000123456789);
        assert_int_equal(rec.caplen, 60);
        assert_int_equal(rec.len, 1514);
        assert_true(pattern(rec.data, 60, 7));
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
        assert_int_equal(rec.ts_ns, 1700000001000000000);
        assert_int_equal(rec.caplen, 0);
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
        assert_int_equal(rec.ts_ns, usec ? -1000 : -1);
        assert_true(pattern(rec.data, 3, 200));
        assert_int_equal(tb_pcapfile_offset(r), 24 + 3 * 16 + 63);
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 0);
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 0);
        tb_pcapfile_free(r);
        fclose(w.f);
    }
}

/* Records of every size up to the maximum, so that many straddle the
 * reader's block buffer: every byte arrives, in order. */
static void test_block_boundaries(void **state)
{
    (void)state;
    struct wf w = wf_open(false, false, 2, 4, TB_PCAPFILE_MAX_CAPLEN);
    uint32_t sizes[64];
    size_t n = 0;
    uint64_t total = 24;
    for (uint32_t s = 1; n < 64; n++) {
        sizes[n] = n % 9 == 8 ? TB_PCAPFILE_MAX_CAPLEN : s;
        wf_rec(&w, (int32_t)n, 0, sizes[n], sizes[n], (uint8_t)n);
        total += 16 + sizes[n];
        s = s * 3 + 1000;
        if (s > 200000)
            s = 1;
    }
    struct tb_pcapfile *r = wf_reader(&w, TB_PCAPFILE_MAX_CAPLEN);
    struct tb_pcaprec rec;
    char err[256];
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
        assert_int_equal(rec.ts_ns, (int64_t)i * 1000000000);
        assert_int_equal(rec.caplen, sizes[i]);
        assert_true(pattern(rec.data, sizes[i], (uint8_t)i));
    }
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 0);
    assert_int_equal(tb_pcapfile_offset(r), total);
    tb_pcapfile_free(r);
    fclose(w.f);
}

/* A record longer than the snapshot length is cut to it; the next record
 * starts where the long one ends. */
static void test_snapshot_cut(void **state)
{
    (void)state;
    struct wf w = wf_open(true, false, 2, 4, 60);
    wf_rec(&w, 1, 0, 100, 100, 1);
    wf_rec(&w, 2, 0, 40, 40, 2);
    struct tb_pcapfile *r = wf_reader(&w, 60);
    struct tb_pcaprec rec;
    char err[256];
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    assert_int_equal(rec.caplen, 60);
    assert_int_equal(rec.len, 100);
    assert_true(pattern(rec.data, 60, 1));
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    assert_int_equal(rec.ts_ns, 2000000000);
    assert_int_equal(rec.caplen, 40);
    assert_true(pattern(rec.data, 40, 2));
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 0);
    tb_pcapfile_free(r);
    fclose(w.f);
}

/* next() on a file cut to `keep` bytes of the records after the header. */
static int cut_at(struct wf *w, long keep, uint32_t snapshot, int good, char *err, size_t n)
{
    fflush(w->f);
    assert_int_equal(ftruncate(fileno(w->f), 24 + keep), 0);
    struct tb_pcapfile *r = wf_reader(w, snapshot);
    struct tb_pcaprec rec;
    for (int i = 0; i < good; i++)
        assert_int_equal(tb_pcapfile_next(r, &rec, err, n), 1);
    int rc = tb_pcapfile_next(r, &rec, err, n);
    /* A failed reader stays failed. */
    char again[256];
    if (rc < 0)
        assert_int_equal(tb_pcapfile_next(r, &rec, again, sizeof again), -1);
    tb_pcapfile_free(r);
    return rc;
}

static void test_truncated(void **state)
{
    (void)state;
    char err[256];
    struct wf w = wf_open(false, false, 2, 4, 65535);
    wf_rec(&w, 1, 0, 50, 50, 1);
    wf_rec(&w, 2, 0, 50, 50, 2);
    assert_int_equal(cut_at(&w, 66 + 7, 65535, 1, err, sizeof err), -1);
    assert_string_equal(err, "truncated dump file; tried to read 16 header bytes, only got 7");
    fclose(w.f);

    w = wf_open(false, false, 2, 4, 65535);
    wf_rec(&w, 1, 0, 50, 50, 1);
    wf_rec(&w, 2, 0, 50, 50, 2);
    assert_int_equal(cut_at(&w, 66 + 16 + 20, 65535, 1, err, sizeof err), -1);
    assert_string_equal(err, "truncated dump file; tried to read 50 captured bytes, only got 20");
    fclose(w.f);

    /* Longer than the snapshot: libpcap names the snapshot while fewer than
     * it are there, the whole record after that. */
    w = wf_open(false, false, 2, 4, 30);
    wf_rec(&w, 1, 0, 50, 50, 1);
    assert_int_equal(cut_at(&w, 16 + 20, 30, 0, err, sizeof err), -1);
    assert_string_equal(err, "truncated dump file; tried to read 30 captured bytes, only got 20");
    fclose(w.f);
    w = wf_open(false, false, 2, 4, 30);
    wf_rec(&w, 1, 0, 50, 50, 1);
    assert_int_equal(cut_at(&w, 16 + 40, 30, 0, err, sizeof err), -1);
    assert_string_equal(err, "truncated dump file; tried to read 50 captured bytes, only got 40");
    fclose(w.f);

    /* Cut exactly between records: a clean end. */
    w = wf_open(false, false, 2, 4, 65535);
    wf_rec(&w, 1, 0, 50, 50, 1);
    wf_rec(&w, 2, 0, 50, 50, 2);
    assert_int_equal(cut_at(&w, 66, 65535, 1, err, sizeof err), 0);
    fclose(w.f);
}

/* The reader maps the file as it is when made: records appended later are
 * read too (on the block path), as before the mapping. */
static void test_grows_while_mapped(void **state)
{
    (void)state;
    char err[256];
    struct tb_pcaprec rec;
    struct wf w = wf_open(false, false, 2, 4, 65535);
    wf_rec(&w, 1, 0, 50, 50, 1);
    wf_rec(&w, 2, 0, 50, 50, 2);
    struct tb_pcapfile *r = wf_reader(&w, 65535);
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    wf_rec(&w, 3, 0, 40, 40, 3);
    fflush(w.f);
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    assert_true(rec.ts_ns == 2000000000 && pattern(rec.data, 50, 2));
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    assert_true(rec.ts_ns == 3000000000 && rec.caplen == 40 && pattern(rec.data, 40, 3));
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 0);
    assert_int_equal(tb_pcapfile_offset(r), 24 + 66 * 2 + 56);
    tb_pcapfile_free(r);
    fclose(w.f);
}

/* A file cut shorter while mapped (past the first 8 MiB window): no SIGBUS;
 * every whole record before the cut, then libpcap's truncation error. */
static void test_shrinks_while_mapped(void **state)
{
    (void)state;
    char err[256];
    struct tb_pcaprec rec;
    enum { N = 12000, CAP = 1000, KEEP = 10000 };
    struct wf w = wf_open(false, false, 2, 4, 65535);
    for (int i = 0; i < N; i++)
        wf_rec(&w, i, 0, CAP, CAP, (uint8_t)i);
    struct tb_pcapfile *r = wf_reader(&w, 65535);
    assert_int_equal(tb_pcapfile_next(r, &rec, err, sizeof err), 1);
    assert_int_equal(ftruncate(fileno(w.f), 24 + (off_t)KEEP * (16 + CAP) + 16 + 100), 0);
    int n = 1, rc;
    while ((rc = tb_pcapfile_next(r, &rec, err, sizeof err)) == 1) {
        assert_true(rec.ts_ns == (int64_t)n * 1000000000 && pattern(rec.data, CAP, (uint8_t)n));
        n++;
    }
    assert_int_equal(rc, -1);
    assert_int_equal(n, KEEP);
    assert_string_equal(err, "truncated dump file; tried to read 1000 captured bytes, only got 100");
    tb_pcapfile_free(r);
    fclose(w.f);
}

static void test_huge_caplen(void **state)
{
    (void)state;
    char err[256];
    struct wf w = wf_open(true, true, 2, 4, 262144);
    wf_rec(&w, 1, 0, 10, 10, 1);
    put32(&w, 2);
    put32(&w, 0);
    put32(&w, 0x7fffffffu);
    put32(&w, 60);
    assert_int_equal(cut_at(&w, 26 + 16, 262144, 1, err, sizeof err), -1);
    assert_string_equal(err,
                        "invalid packet capture length 2147483647, bigger than snaplen of 262144");
    fclose(w.f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eligible),
        cmocka_unit_test(test_records_and_time),
        cmocka_unit_test(test_block_boundaries),
        cmocka_unit_test(test_snapshot_cut),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_huge_caplen),
        cmocka_unit_test(test_grows_while_mapped),
        cmocka_unit_test(test_shrinks_while_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
