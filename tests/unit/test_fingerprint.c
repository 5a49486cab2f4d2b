/* SPDX-License-Identifier: MIT */
/* test_fingerprint.c — request classes: HTTP paths with ids folded, SQL
 * fingerprints with literals folded, lists collapsed, and output capping; the
 * tuned fingerprinters against the plain reference on random inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include "proto.h"

static void http(const char *m, const char *t, const char *want)
{
    char out[256];
    size_t n = tb_fp_http(m, strlen(m), t, strlen(t), out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void sql(const char *q, const char *want)
{
    char out[512];
    size_t n = tb_fp_sql(q, strlen(q), out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

/* ---- reference: the straightforward fingerprinters -------------------------
 *
 * The fingerprinters in fingerprint.c are tuned (table-driven classes, one
 * pass per segment or word, no per-byte room checks where all fits). Below is
 * the plain version they replaced, kept as the specification: the tests feed
 * both the same inputs, at every output capacity, and want the same bytes. */

struct out {
    char *p;
    size_t len, cap;
};

/* Control bytes (NUL included) never reach a class: it is printed, exported
 * as CSV and compared as a C string. */
static void put(struct out *o, char c)
{
    if ((unsigned char)c < 0x20 || c == 0x7f)
        c = '?';
    if (o->len + 1 < o->cap)
        o->p[o->len++] = c;
}

static void puts_n(struct out *o, const char *s, size_t n)
{
    /* When all n bytes and the NUL fit (len < cap whenever cap > 0, so the
     * subtraction cannot wrap), put()'s room check would pass for each of
     * them: copy without it, which the compiler can also vectorise. */
    if (o->cap - o->len > n) {
        char *d = o->p + o->len;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            d[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        }
        o->len += n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        put(o, s[i]);
}

static size_t finish(struct out *o)
{
    if (o->cap)
        o->p[o->len] = '\0';
    return o->len;
}

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static char lower(unsigned char c) { return (char)(c >= 'A' && c <= 'Z' ? c + 32 : c); }

/* ---- HTTP ------------------------------------------------------------- */

/* A path segment names one object rather than a kind of request when it is a
 * number, a long hex string with at least one digit (hashes, object ids), or a
 * UUID; folding those keeps the class count bounded by the application's
 * routes rather than by its data. */
static bool seg_is_id(const char *s, size_t n)
{
    if (n == 0)
        return false;
    bool all_digit = true, all_hex = true, any_digit = false;
    /* Digits are hex digits too, so the first byte that is not a hex digit
     * settles both "all" tests as false: most route words ("story", "img")
     * stop there at their first letter past 'f'. */
    for (size_t i = 0; i < n && all_hex; i++) {
        unsigned char c = (unsigned char)s[i];
        all_digit &= is_digit(c);
        all_hex &= is_hex(c);
        any_digit |= is_digit(c);
    }
    if (all_digit || (all_hex && n >= 8 && any_digit))
        return true;
    if (n == 36) {
        for (size_t i = 0; i < n; i++) {
            bool dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash ? s[i] != '-' : !is_hex((unsigned char)s[i]))
                return false;
        }
        return true;
    }
    return false;
}

static size_t ref_fp_http(const char *method, size_t mlen, const char *target, size_t tlen,
                          char *out, size_t cap)
{
    struct out o = {out, 0, cap};
    puts_n(&o, method, mlen);
    put(&o, ' ');

    const char *p = target, *end = target + tlen;
    /* absolute-form (RFC 9112 §3.2.2, sent to proxies): drop scheme and authority. */
    /* Origin-form targets start with '/': the first byte settles it without
     * two calls to strncasecmp on every request. */
    bool h = p < end && (*p == 'h' || *p == 'H');
    size_t skip = h && end - p >= 7 && strncasecmp(p, "http://", 7) == 0    ? 7
                  : h && end - p >= 8 && strncasecmp(p, "https://", 8) == 0 ? 8
                                                                             : 0;
    if (skip) {
        p += skip;
        while (p < end && *p != '/' && *p != '?' && *p != '#')
            p++;
        if (p == end || *p != '/') {
            put(&o, '/');
            return finish(&o);
        }
    }
    if (p == end) {
        put(&o, '/');
        return finish(&o);
    }
    if (*p != '/') { /* asterisk-form or authority-form (CONNECT host:port) */
        const char *q = p;
        while (q < end && *q != '?' && *q != '#')
            q++;
        puts_n(&o, p, (size_t)(q - p));
        return finish(&o);
    }
    while (p < end && *p != '?' && *p != '#') {
        /* p points at '/' */
        put(&o, '/');
        p++;
        const char *s = p;
        while (p < end && *p != '/' && *p != '?' && *p != '#')
            p++;
        /* "<hash>.png": the name is an id, the extension says what kind. */
        const char *dot = memchr(s, '.', (size_t)(p - s));
        if (seg_is_id(s, (size_t)(p - s))) {
            puts_n(&o, "{id}", 4);
        } else if (dot && seg_is_id(s, (size_t)(dot - s))) {
            puts_n(&o, "{id}", 4);
            puts_n(&o, dot, (size_t)(p - dot));
        } else
            puts_n(&o, s, (size_t)(p - s));
    }
    return finish(&o);
}

/* ---- SQL -------------------------------------------------------------- */

enum tok { T_NONE, T_WORD, T_LIT, T_PUNCT };

/* Character classes of the SQL tokeniser as one table lookup: the chains of
 * comparisons ran for every byte of every query and were the bulk of its cost.
 * The table is built by the same tests, at compile time. */
enum { CC_WORD_START = 1, CC_WORD = 2, CC_SPACE = 4 };
#define CC_WS_(c) \
    (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || (c) == '_' || (c) == '$' || \
     (c) == '@' || (c) >= 0x80)
#define CC_(c)                                                                        \
    (CC_WS_(c) ? CC_WORD_START | CC_WORD                                              \
     : ((c) >= '0' && (c) <= '9') ? CC_WORD                                           \
     : ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' || (c) == '\f' || \
        (c) == '\v')                                                                 \
         ? CC_SPACE                                                                   \
         : 0)
#define CC4_(b) CC_(b), CC_((b) + 1), CC_((b) + 2), CC_((b) + 3)
#define CC16_(b) CC4_(b), CC4_((b) + 4), CC4_((b) + 8), CC4_((b) + 12)
#define CC64_(b) CC16_(b), CC16_((b) + 16), CC16_((b) + 32), CC16_((b) + 48)
static const uint8_t sql_cc[256] = {CC64_(0), CC64_(64), CC64_(128), CC64_(192)};

static bool is_word_start(unsigned char c) { return sql_cc[c] & CC_WORD_START; }
static bool is_word(unsigned char c) { return sql_cc[c] & CC_WORD; }

/* Skips a quoted literal starting at s[i] (the quote); returns the index past
 * its end. Doubled quotes and backslash escapes stay inside the literal. */
static size_t skip_quoted(const char *s, size_t i, size_t n)
{
    char q = s[i++];
    while (i < n) {
        if (s[i] == '\\' && q != '`') {
            i += 2;
            continue;
        }
        if (s[i] == q) {
            if (i + 1 < n && s[i + 1] == q) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i++;
    }
    return n;
}

static bool ends_with_word(const char *s, size_t n, const char *w)
{
    size_t k = strlen(w);
    return n >= k && memcmp(s + n - k, w, k) == 0 &&
           (n == k || !is_word((unsigned char)s[n - k - 1]));
}

/* Called after each ')': rewrites a just-closed literal list at the end of
 * the output, "in (?, ?, ?)" → "in (?+)", "values (?, ?)" → "values (?+)",
 * and drops further tuples after "values (?+)", so that the class does not
 * depend on how many rows or ids a query carries. The tokeniser has made
 * spacing canonical: no space after '(' or before ',' and ')', one after ','. */
static void collapse_tail(struct out *o)
{
    char *s = o->p;
    size_t n = o->len;
    if (n < 3 || s[n - 1] != ')' || s[n - 2] != '?')
        return;
    size_t i = n - 2; /* at the last '?' */
    while (i >= 3 && s[i - 1] == ' ' && s[i - 2] == ',' && s[i - 3] == '?')
        i -= 3;
    if (i == 0 || s[i - 1] != '(')
        return;
    size_t k = i - 1; /* at '(' */
    if (k > 0 && s[k - 1] == ' ')
        k--;
    if (k > 0 && s[k - 1] == ',' &&
        (ends_with_word(s, k - 1, "values (?+)") || ends_with_word(s, k - 1, "value (?+)"))) {
        o->len = k - 1;
        return;
    }
    if (ends_with_word(s, k, "in") || ends_with_word(s, k, "values") ||
        ends_with_word(s, k, "value")) {
        o->len = k;
        puts_n(o, " (?+)", 5);
    }
}

/* Keywords after which '-' or '+' is a sign, not an operator ("where -1"). */
static bool sign_follows(const char *w, size_t n)
{
    static const char *const kws[] = {"select", "where", "and", "or", "not", "by", "limit",
                                      "offset", "values", "set", "when", "then", "else",
                                      "between", "in", "like", "is", "on", "having", "return",
                                      "case", "interval"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(kws); i++)
        if (strlen(kws[i]) == n && strncasecmp(kws[i], w, n) == 0)
            return true;
    return false;
}

/* PostgreSQL: "$<digits>" (not followed by a word byte) is a parameter and
 * "$tag$ … $tag$" a string (tag: word bytes but '$', none to start with a
 * digit); both are literals, an unterminated string runs to the end. Returns
 * the end of the literal at s[i], or 0. */
static size_t ref_dollar(const char *s, size_t i, size_t n)
{
    if (s[i] != '$')
        return 0;
    size_t j = i + 1;
    if (j < n && is_digit((unsigned char)s[j])) {
        while (j < n && is_digit((unsigned char)s[j]))
            j++;
        if (j < n && is_word((unsigned char)s[j]))
            return 0;
        return j;
    }
    while (j < n && s[j] != '$' && is_word((unsigned char)s[j]))
        j++;
    if (j == n || s[j] != '$')
        return 0;
    const char *tag = s + i;
    size_t tl = j - i + 1;
    for (size_t k = j + 1; k + tl <= n; k++)
        if (strncmp(s + k, tag, tl) == 0)
            return k + tl;
    return n;
}

static size_t ref_fp_sql(const char *sql, size_t len, char *out, size_t cap)
{
    struct out o = {out, 0, cap};
    const char *s = sql;
    size_t i = 0, n = len;
    enum tok prev = T_NONE;
    char prev_c = 0; /* last punctuation emitted */
    size_t prev_w = 0, prev_wlen = 0; /* last word, in the input */
    bool space = false;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (sql_cc[c] & CC_SPACE) {
            space = true;
            i++;
            continue;
        }
        if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            size_t j = i + 2;
            while (j + 1 < n && !(s[j] == '*' && s[j + 1] == '/'))
                j++;
            i = j + 1 < n ? j + 2 : n;
            space = true;
            continue;
        }
        if (c == '#' || (c == '-' && i + 1 < n && s[i + 1] == '-' &&
                         (i + 2 == n || s[i + 2] == ' ' || s[i + 2] == '\t' ||
                          s[i + 2] == '\n' || s[i + 2] == '\r'))) {
            while (i < n && s[i] != '\n')
                i++;
            space = true;
            continue;
        }

        /* The common token, a plain word (keyword or name), with the rest of
         * the query sure to fit the output: found, lowered and copied in one
         * pass. Not a word when it opens X'..', b'..' or N'..'; otherwise the
         * same steps as the general path below (spacing, then the word). */
        if ((sql_cc[c] & CC_WORD_START) && !ref_dollar(s, i, n) &&
            !(i + 1 < n && s[i + 1] == '\'' &&
              (c == 'x' || c == 'X' || c == 'b' || c == 'B' || c == 'n' || c == 'N')) &&
            o.len + 1 + (n - i) < o.cap) {
            if (prev != T_NONE && !(prev == T_PUNCT && prev_c == '(') &&
                (space || (prev == T_PUNCT && prev_c == ',')))
                o.p[o.len++] = ' ';
            space = false;
            size_t j = i;
            do
                o.p[o.len++] = lower((unsigned char)s[j++]);
            while (j < n && (sql_cc[(unsigned char)s[j]] & CC_WORD));
            prev = T_WORD;
            prev_c = 0;
            prev_w = i;
            prev_wlen = j - i;
            i = j;
            continue;
        }

        /* Classify the token and find its extent. */
        enum tok t;
        size_t j = i;
        if (ref_dollar(s, i, n)) {
            t = T_LIT;
            j = ref_dollar(s, i, n);
        } else if (c == '\'' || c == '"') {
            t = T_LIT;
            j = skip_quoted(s, i, n);
        } else if ((c == 'x' || c == 'X' || c == 'b' || c == 'B' || c == 'n' || c == 'N') &&
                   i + 1 < n && s[i + 1] == '\'') {
            t = T_LIT; /* X'0a', b'101', N'text' */
            j = skip_quoted(s, i + 1, n);
        } else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit((unsigned char)s[i + 1]) &&
                                    prev != T_WORD) ||
                   ((c == '-' || c == '+') && i + 1 < n && is_digit((unsigned char)s[i + 1]) &&
                    (prev == T_NONE || (prev == T_PUNCT && prev_c != ')') ||
                     (prev == T_WORD && sign_follows(s + prev_w, prev_wlen))))) {
            t = T_LIT;
            j = i + 1;
            while (j < n) {
                unsigned char d = (unsigned char)s[j];
                if (is_word(d) || d == '.')
                    j++;
                else if ((d == '+' || d == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E') &&
                         !(j - i >= 2 && (s[i + 1] == 'x' || s[i + 1] == 'X')))
                    j++;
                else
                    break;
            }
        } else if (c == '?') {
            t = T_LIT;
            j = i + 1;
        } else if (c == '`') {
            t = T_WORD;
            j = skip_quoted(s, i, n);
        } else if (is_word_start(c)) {
            t = T_WORD;
            while (j < n && is_word((unsigned char)s[j]))
                j++;
        } else {
            t = T_PUNCT;
            j = i + 1;
        }

        /* Canonical spacing so that "IN(1,2)" and "in ( 1 , 2 )" agree. */
        bool tight = (t == T_PUNCT && (c == ')' || c == ',')) ||
                     (prev == T_PUNCT && prev_c == '(');
        if (prev != T_NONE && !tight && (space || (prev == T_PUNCT && prev_c == ',')))
            put(&o, ' ');
        space = false;

        if (t == T_LIT) {
            put(&o, '?');
        } else if (t == T_WORD && c != '`') {
            /* Word bytes are never control bytes, so when the whole word fits
             * put()'s checks cannot change anything and are skipped. */
            if (o.len + (j - i) < o.cap) {
                for (size_t k = i; k < j; k++)
                    o.p[o.len++] = lower((unsigned char)s[k]);
            } else {
                for (size_t k = i; k < j; k++)
                    put(&o, lower((unsigned char)s[k]));
            }
        } else {
            puts_n(&o, s + i, j - i);
            if (c == ')')
                collapse_tail(&o);
        }
        prev = t;
        prev_c = t == T_PUNCT ? (char)c : 0;
        if (t == T_WORD) {
            prev_w = i;
            prev_wlen = j - i;
        }
        i = j;
    }
    /* A trailing statement terminator does not make a different query. */
    while (o.len > 0 && (o.p[o.len - 1] == ';' || o.p[o.len - 1] == ' '))
        o.len--;
    return finish(&o);
}

/* ---- differential tests ----------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static void print_bytes(const char *what, const char *s, size_t n)
{
    fprintf(stderr, "%s (%zu): \"", what, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\"\n");
}

/* Both fingerprints of one input at one capacity; the output buffers are
 * poisoned so that a byte written past the result shows up too. */
static void same_sql(const char *q, size_t n, size_t cap)
{
    char a[1200], b[1200];
    assert_true(cap <= sizeof a);
    memset(a, 0x5a, sizeof a);
    memset(b, 0x5a, sizeof b);
    size_t na = tb_fp_sql(q, n, a, cap), nb = ref_fp_sql(q, n, b, cap);
    if (na != nb || memcmp(a, b, sizeof a) != 0) {
        print_bytes("query", q, n);
        fprintf(stderr, "cap %zu\n", cap);
        print_bytes("tuned", a, na);
        print_bytes("reference", b, nb);
        fail();
    }
}

static void same_http(const char *m, size_t ml, const char *t, size_t tl, size_t cap)
{
    char a[1200], b[1200];
    assert_true(cap <= sizeof a);
    memset(a, 0x5a, sizeof a);
    memset(b, 0x5a, sizeof b);
    size_t na = tb_fp_http(m, ml, t, tl, a, cap), nb = ref_fp_http(m, ml, t, tl, b, cap);
    if (na != nb || memcmp(a, b, sizeof a) != 0) {
        print_bytes("method", m, ml);
        print_bytes("target", t, tl);
        fprintf(stderr, "cap %zu\n", cap);
        print_bytes("tuned", a, na);
        print_bytes("reference", b, nb);
        fail();
    }
}

/* Pieces that exercise every branch of the SQL tokeniser: keywords before
 * signs, quotes with escapes and doubled quotes, prefixed literals, comments
 * of three kinds, lists that fold, exponents, hex, backticks, control bytes,
 * non-ASCII bytes, and the same pieces with odd spacing. */
static const char *const sql_pieces[] = {
    "SELECT", "select", "name", "price", "FROM", "items", "WHERE", "id", "=", " ", "  ", "\t",
    "\n", "\r\n", ",", ", ", "(", ")", " (", "IN", "in", "VALUES", "value", "values", "-", "+",
    "-1", "+2.5e-3", "1e+5", "0x1F", "0X1e-2", "X'0a'", "x'", "b'101'", "N'tx'", "n", "'O''Brien'",
    "'a\\'b'", "\"q\\\"d\"", "\"", "'", "`", "`Weird Col`", "`a``b`", "?", ".5", ".", "t1.c2",
    "/*", "*/", "/* c */", "--", "-- x\n", "--x", "#", "# c\n", ";", " ;", "@@session.sql_mode",
    "@v", "$x", "_y", "\x01", "\x7f", "\xc3\xa9", "\xff", "NULL", "LIMIT", "OFFSET", "BY",
    "between", "AND", "or", "Set", "return", "case", "when", "interval", "like", "is", "having",
    "123", "0", "007", "1.5", "e", "E", "-e", "a-1", "*", "<=", "!=", "%", "\\", "(?, ?)", "(?)",
    "$1", "$23", "$1a", "$", "$$", "$$ x $$", "$q$", "$q$ 'a' $q$", "$Q$", "$_1$", "$9$",
};

static void test_sql_differential(void **state)
{
    (void)state;
    static const size_t caps[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 31, 32, 33, 48,
                                  64, 100, 128, 255, 256, 511, 512, 1024, 1200};
    char q[1100];
    for (int iter = 0; iter < 60000; iter++) {
        size_t n = 0;
        int pieces = (int)(rnd() % 40);
        for (int k = 0; k < pieces; k++) {
            const char *pc = sql_pieces[rnd() % TB_ARRAY_SIZE(sql_pieces)];
            size_t l = strlen(pc);
            if (n + l >= sizeof q)
                break;
            memcpy(q + n, pc, l);
            n += l;
        }
        /* Now and then a raw byte, NUL included (pieces cannot hold one). */
        if (n > 0 && rnd() % 8 == 0)
            q[rnd() % n] = (char)(rnd() & 0xff);
        same_sql(q, n, caps[rnd() % TB_ARRAY_SIZE(caps)]);
        same_sql(q, n, 1200);
        same_sql(q, n, n / 2 + 1);
    }
    /* Random bytes over a small alphabet, where tokens collide oddly. */
    static const char alpha[] = "aXbN'\"`\\-+.#/*?()0123 ,e;\n";
    for (int iter = 0; iter < 60000; iter++) {
        size_t n = rnd() % 64;
        for (size_t k = 0; k < n; k++)
            q[k] = alpha[rnd() % (sizeof alpha - 1)];
        same_sql(q, n, caps[rnd() % TB_ARRAY_SIZE(caps)]);
        same_sql(q, n, 1200);
    }
    /* A long query around the capacity of a queued request's class. */
    size_t n = 0;
    while (n + 40 < sizeof q) {
        memcpy(q + n, "SELECT a, b FROM t WHERE id IN (1, 2) ", 38);
        n += 38;
    }
    for (size_t cap = 0; cap <= 1200; cap++)
        same_sql(q, n, cap);
}

static const char *const path_pieces[] = {
    "/", "/", "/", "item", "story", "0", "12345", "-7", "deadbeef", "deadbeef01",
    "9f86d081884c7d65",
    "550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-44665544000g", ".png",
    ".css", ".", "..", "a.b.c", "?", "?x=1", "#top", "#", "%2F", "%41bc", "&", "=", ";v=1",
    "\x01", "\x7f", "\xc3\xa9", "api", "v2", "ABCDEF12", "Abc", "_", "~",
};

static void test_http_differential(void **state)
{
    (void)state;
    static const char *const heads[] = {"", "http://", "HTTPS://", "http://h:1", "https://x.y",
                                        "hTtp://a", "*", "h", "example.com:443", "http:/"};
    static const char *const methods[] = {"GET", "POST", "", "M\x01", "PROPPATCH", "A_B-C"};
    static const size_t caps[] = {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 16, 20, 32, 64, 512, 1200};
    char t[1100];
    for (int iter = 0; iter < 100000; iter++) {
        const char *h = heads[rnd() % TB_ARRAY_SIZE(heads)];
        size_t n = strlen(h);
        memcpy(t, h, n);
        int pieces = (int)(rnd() % 16);
        for (int k = 0; k < pieces; k++) {
            const char *pc = path_pieces[rnd() % TB_ARRAY_SIZE(path_pieces)];
            size_t l = strlen(pc);
            if (n + l >= sizeof t)
                break;
            memcpy(t + n, pc, l);
            n += l;
        }
        if (n > 0 && rnd() % 8 == 0)
            t[rnd() % n] = (char)(rnd() & 0xff);
        const char *m = methods[rnd() % TB_ARRAY_SIZE(methods)];
        same_http(m, strlen(m), t, n, caps[rnd() % TB_ARRAY_SIZE(caps)]);
        same_http(m, strlen(m), t, n, 1200);
    }
}

static void test_http(void **state)
{
    (void)state;
    http("GET", "/story/12345", "GET /story/{id}");
    http("GET", "/story/12345?page=2#top", "GET /story/{id}");
    http("POST", "/api/v2/users/550e8400-e29b-41d4-a716-446655440000/avatar",
         "POST /api/v2/users/{id}/avatar");
    http("GET", "/obj/deadbeef01", "GET /obj/{id}");
    http("GET", "/obj/deadbeef", "GET /obj/deadbeef");  /* hex but no digit: a word */
    http("GET", "/obj/abc123", "GET /obj/abc123");      /* too short for a hash */
    http("GET", "/static/9f86d081884c7d65.css", "GET /static/{id}.css");
    http("GET", "http://example.com:8080/a/7?x", "GET /a/{id}");
    http("GET", "http://example.com", "GET /");
    http("OPTIONS", "*", "OPTIONS *");
    http("CONNECT", "example.com:443", "CONNECT example.com:443");
    http("GET", "/", "GET /");
    http("GET", "/a//b/", "GET /a//b/");
    http("GET", "?x=1", "GET ");
}

static void test_http_cap(void **state)
{
    (void)state;
    char out[10];
    size_t n = tb_fp_http("GET", 3, "/abcdefghijkl", 13, out, sizeof out);
    assert_int_equal(n, 9);
    assert_string_equal(out, "GET /abcd");
    assert_int_equal(tb_fp_http("GET", 3, "/", 1, out, 0), 0);
}

static void test_sql(void **state)
{
    (void)state;
    sql("SELECT c FROM sbtest1 WHERE id=42", "select c from sbtest1 where id=?");
    sql("SELECT  *\n FROM t\tWHERE name = 'O''Brien' AND x = \"a\\\"b\"",
        "select * from t where name = ? and x = ?");
    sql("select * from t where id IN (1, 2, 3) and y in ('a','b')",
        "select * from t where id in (?+) and y in (?+)");
    sql("SELECT * FROM t WHERE id IN(4)", "select * from t where id in (?+)");
    sql("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'),(3,'z')",
        "insert into t (a, b) values (?+)");
    sql("INSERT INTO t VALUES (NOW(), 1)", "insert into t values (now(), ?)");
    sql("select -1, +2.5e-3, 0x1F, X'0a', b'101', 1.5, .5 from dual",
        "select ?, ?, ?, ?, ?, ?, ? from dual");
    sql("select a-1 from t", "select a-? from t");
    sql("select t1.c2 from t1", "select t1.c2 from t1");
    sql("SELECT /* hint */ 1 -- trailing\n, 2 # mysql comment\n;",
        "select ?, ?");
    sql("select `Weird Col`, @@session.sql_mode, @v from `T`",
        "select `Weird Col`, @@session.sql_mode, @v from `T`");
    sql("SELECT * FROM t WHERE a IS NULL AND b = TRUE",
        "select * from t where a is null and b = true");
    sql("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
        "select c from sbtest1 where id between ? and ? order by c");
    sql("COMMIT", "commit");
    /* PostgreSQL parameters and dollar-quoted strings: the same class as the
     * statement with its values inline. */
    sql("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
        "update pgbench_accounts set abalance = abalance + ? where aid = ?");
    sql("UPDATE pgbench_accounts SET abalance = abalance + -4210 WHERE aid = 77",
        "update pgbench_accounts set abalance = abalance + ? where aid = ?");
    sql("select * from t where id in ($1, $2, $3)", "select * from t where id in (?+)");
    sql("SELECT $fn$ select 'x'; $fn$ || $$a$b$$, $1x, $x", "select ? || ?, $1x, $x");
    sql("select $body$ never closed", "select ?");
    sql("  ", "");
    sql("select 'unterminated", "select ?");
    /* Control bytes, NUL included, are replaced: the class is a C string. */
    char out[32];
    assert_int_equal(tb_fp_sql("*\x01\x00\xc1", 4, out, sizeof out), 4);
    assert_string_equal(out, "*??\xc1");
    assert_int_equal(tb_fp_http("GET", 3, "/a\0" "b", 4, out, sizeof out), 8);
    assert_string_equal(out, "GET /a?b");
}

static void test_sql_cap(void **state)
{
    (void)state;
    char out[16];
    size_t n = tb_fp_sql("SELECT column_a FROM table_b", 28, out, sizeof out);
    assert_int_equal(n, 15);
    assert_string_equal(out, "select column_a");
    char big[3000];
    memset(big, '9', sizeof big);
    memcpy(big, "select ", 7);
    char o2[64];
    assert_int_equal(tb_fp_sql(big, sizeof big, o2, sizeof o2), 8);
    assert_string_equal(o2, "select ?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_http_cap),
        cmocka_unit_test(test_sql),
        cmocka_unit_test(test_sql_cap),
        cmocka_unit_test(test_sql_differential),
        cmocka_unit_test(test_http_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
