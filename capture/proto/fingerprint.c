/* SPDX-License-Identifier: MIT */
/* fingerprint.c — request classes: HTTP method + path with ids folded, and SQL
 * query fingerprints with literals folded (in the manner of pt-query-digest).
 *
 * Both functions are total: any byte sequence gives a NUL-terminated result of
 * at most cap-1 bytes, so they can be fed raw wire bytes. */
#include <string.h>
#include <strings.h>

#include "proto.h"

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

size_t tb_fp_http(const char *method, size_t mlen, const char *target, size_t tlen, char *out,
                  size_t cap)
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

size_t tb_fp_sql(const char *sql, size_t len, char *out, size_t cap)
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
        if ((sql_cc[c] & CC_WORD_START) &&
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
        if (c == '\'' || c == '"') {
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
