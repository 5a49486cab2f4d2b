/* SPDX-License-Identifier: MIT */
/* test_msg.h — a byte buffer the protocol unit tests build messages in, a
 * check of one exchange, and the replay of a parser's fuzz seeds through the
 * invariant driver. Include after cmocka.h. */
#ifndef TB_TEST_MSG_H
#define TB_TEST_MSG_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto-test.h"

/* One recorded exchange, field by field (cmocka must be included first). */
static inline void mb_check(const struct pt_ex *e, int64_t arr, int64_t dep, uint64_t rq,
                            uint64_t rs, int32_t status, uint32_t flags, const char *cls)
{
    assert_int_equal(e->arr, arr);
    assert_int_equal(e->dep, dep);
    assert_int_equal(e->rq, rq);
    assert_int_equal(e->rs, rs);
    assert_int_equal(e->status, status);
    assert_int_equal(e->flags, flags);
    assert_string_equal(e->cls, cls);
}

struct mb {
    uint8_t b[140000];
    size_t n;
};

static inline struct mb *mb_new(void)
{
    struct mb *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    return m;
}

static inline void mb_put(struct mb *m, const void *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL (an empty record's content) */
    if (n > sizeof m->b - m->n)
        abort();
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static inline void mb_u8(struct mb *m, uint8_t v) { mb_put(m, &v, 1); }

static inline void mb_be16(struct mb *m, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    mb_put(m, b, 2);
}

static inline void mb_be32(struct mb *m, uint32_t v)
{
    mb_be16(m, (uint16_t)(v >> 16));
    mb_be16(m, (uint16_t)v);
}

static inline void mb_fill(struct mb *m, uint8_t c, size_t n)
{
    if (n > sizeof m->b - m->n)
        abort();
    memset(m->b + m->n, c, n);
    m->n += n;
}

/* Runs every seed file of tests/fuzz/corpus/<name>/ through pt_fuzz_drive
 * under each of the 256 values of its first byte (other splits, holes and
 * the mid-stream start), so the parser's invariants hold on the very
 * conversations its unit tests and the fuzzer start from. Returns the
 * number of files replayed. */
static inline unsigned mb_replay_corpus(const struct tb_proto *pr, const char *name)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", TB_SRCDIR, name);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    unsigned files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "README") == 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        struct mb *m = mb_new();
        m->n = fread(m->b, 1, sizeof m->b, f);
        fclose(f);
        for (int s = 0; s < 256 && m->n > 0; s++) {
            m->b[0] = (uint8_t)s;
            pt_fuzz_drive(pr, m->b, m->n);
        }
        free(m);
        files++;
    }
    closedir(d);
    return files;
}

#endif
