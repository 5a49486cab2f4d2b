/* SPDX-License-Identifier: MIT */
/* test_json.c — the one JSON encoder (common/json.c): strings worked out by
 * hand for every rule (escapes, control bytes, well-formed and broken UTF-8:
 * overlong forms, surrogates, code points past U+10FFFF, truncated
 * sequences), random byte strings whose encoding glibc's iconv must accept
 * as UTF-8 with no raw control byte left, numbers that read back as the
 * same double, and the buffer and stream forms writing the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <iconv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static char *enc_buf(const char *s)
{
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_json_str(&b, s);
    assert_true(tb_buf_ok(&b));
    return tb_buf_steal(&b, NULL);
}

static char *enc_file(const char *s)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    tb_json_str(f, s);
    assert_int_equal(fclose(f), 0);
    return out;
}

static void check_str(const char *in, const char *want)
{
    char *a = enc_buf(in), *b = enc_file(in);
    if (strcmp(a, want) != 0)
        fail_msg("encoding gave %s, expected %s", a, want);
    assert_string_equal(b, want);
    free(a);
    free(b);
}

static void test_strings(void **state)
{
    (void)state;
    check_str("", "\"\"");
    check_str(NULL, "\"\"");
    check_str("GET /rubbos/ViewStory", "\"GET /rubbos/ViewStory\"");
    check_str("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
    check_str("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
    check_str("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
    /* Well-formed UTF-8, 2, 3 and 4 bytes, copied as they are. */
    check_str("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
              "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    /* Latin-1 bytes in a path (GET /caf\xe9): each one U+FFFD. */
    check_str("GET /caf\xe9", "\"GET /caf\\ufffd\"");
    check_str("\xe9\xe9x", "\"\\ufffd\\ufffdx\"");
    /* A lone continuation byte, a truncated sequence at the end and before
     * ASCII: every byte that is not part of a whole sequence. */
    check_str("\x80", "\"\\ufffd\"");
    check_str("a\xe2\x82", "\"a\\ufffd\\ufffd\"");
    check_str("\xe2\x82(", "\"\\ufffd\\ufffd(\"");
    /* Overlong forms of '/' and NUL, a UTF-16 surrogate, beyond U+10FFFF,
     * bytes that never occur (0xf8..0xff). */
    check_str("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    check_str("\xe0\x80\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    check_str("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    check_str("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
    check_str("\xf8\xff", "\"\\ufffd\\ufffd\"");
    /* The largest code point and U+FFFD itself are fine. */
    check_str("\xf4\x8f\xbf\xbf\xef\xbf\xbd", "\"\xf4\x8f\xbf\xbf\xef\xbf\xbd\"");
}

static uint64_t rs = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* Whatever bytes go in, what comes out is UTF-8 (by iconv, not by our own
 * decoder) with no byte below 0x20 and no DEL, starts and ends with a quote,
 * and the stream form agrees. */
static void test_random_bytes(void **state)
{
    (void)state;
    iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
    assert_true(cd != (iconv_t)-1);
    char in[64];
    static char u32[64 * 4 * 6 + 16];
    size_t fffd = 0;
    for (int k = 0; k < 20000; k++) {
        size_t n = rnd() % (sizeof in - 1);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd();
            /* Mostly high bytes and controls, the interesting part. */
            in[i] = (char)(r % 4 == 0 ? 0x20 + (r >> 8) % 0x60 : 1 + (r >> 8) % 255);
        }
        in[n] = '\0';
        char *out = enc_buf(in), *out2 = enc_file(in);
        assert_string_equal(out, out2);
        size_t len = strlen(out);
        assert_true(len >= 2 && out[0] == '"' && out[len - 1] == '"');
        for (size_t i = 0; i < len; i++)
            assert_true((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
        char *ip = out, *op = u32;
        size_t il = len, ol = sizeof u32;
        iconv(cd, NULL, NULL, NULL, NULL);
        if (iconv(cd, &ip, &il, &op, &ol) == (size_t)-1)
            fail_msg("not UTF-8 at byte %zu of %s", (size_t)(ip - out), out);
        fffd += strstr(out, "\\ufffd") != NULL;
        free(out);
        free(out2);
    }
    assert_true(fffd > 10000); /* the broken input was really there */
    iconv_close(cd);
}

static void check_num(double v, const char *want)
{
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_json_num(&b, v);
    assert_true(tb_buf_ok(&b));
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    tb_json_num(f, v);
    fclose(f);
    assert_string_equal(b.p, out);
    if (want)
        assert_string_equal(b.p, want);
    else if (strtod(b.p, NULL) != v)
        fail_msg("%s reads back as %.17g, not %.17g", b.p, strtod(b.p, NULL), v);
    tb_buf_free(&b);
    free(out);
}

static void test_numbers(void **state)
{
    (void)state;
    check_num(NAN, "null");
    check_num(INFINITY, "null");
    check_num(-INFINITY, "null");
    check_num(42, "42");
    check_num(-3, "-3");
    check_num(2.5, "2.5");
    check_num(0.1, "0.10000000000000001");
    check_num(1e300, "1.0000000000000001e+300");
    for (int k = 0; k < 100000; k++) {
        uint64_t bits = rnd();
        double v;
        memcpy(&v, &bits, sizeof v);
        if (isfinite(v))
            check_num(v, NULL);
    }
    struct tb_buf b;
    tb_buf_init(&b);
    tb_buf_json_i64(&b, INT64_MIN);
    assert_string_equal(b.p, "-9223372036854775808");
    tb_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
