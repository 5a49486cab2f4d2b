/* SPDX-License-Identifier: MIT */
/* fingerprint.c — request classes: HTTP method + path with ids folded, and SQL
 * query fingerprints with literals folded (in the manner of pt-query-digest).
 *
 * Both functions are total: any byte sequence gives a NUL-terminated result of
 * at most cap-1 bytes, so they can be fed raw wire bytes. */
#include <string.h>
#include <strings.h>

#include "proto.h"

/* The writers keep their position in a local pointer rather than in a
 * struct: every byte stored through a char pointer may alias a length kept in
 * memory, which then had to be reloaded and stored again for each byte. `lim`
 * is out + cap - 1, the room left for the NUL; a byte that does not fit is
 * dropped, and so is everything after it but what a later rewind makes room
 * for (SQL list folding). */
static inline char *sput(char *d, const char *lim, char c)
{
    if (d < lim)
        *d++ = c;
    return d;
}

/* Control bytes (NUL included) never reach a class: it is printed, exported
 * as CSV and compared as a C string. The table maps them to '?' and every
 * other byte to itself. */
#define SAFE_(c) ((c) < 0x20 || (c) == 0x7f ? '?' : (c))
#define SAFE4_(b) SAFE_(b), SAFE_((b) + 1), SAFE_((b) + 2), SAFE_((b) + 3)
#define SAFE16_(b) SAFE4_(b), SAFE4_((b) + 4), SAFE4_((b) + 8), SAFE4_((b) + 12)
#define SAFE64_(b) SAFE16_(b), SAFE16_((b) + 16), SAFE16_((b) + 32), SAFE16_((b) + 48)
static const unsigned char safe[256] = {SAFE64_(0), SAFE64_(64), SAFE64_(128), SAFE64_(192)};

static char *sputs(char *d, const char *lim, const unsigned char *s, size_t n)
{
    if (n > (size_t)(lim - d))
        n = (size_t)(lim - d);
    char *e = d + n;
    while (d < e)
        *d++ = (char)safe[*s++];
    return d;
}

/* ---- HTTP ------------------------------------------------------------- */

/* Target byte classes: what ends a path segment, and what an id is made of. */
enum { HC_END = 1, HC_DOT = 2, HC_DIGIT = 4, HC_HEX = 8 };
#define HC_(c)                                                                     \
    (((c) == '/' || (c) == '?' || (c) == '#' ? HC_END : 0) | ((c) == '.' ? HC_DOT : 0) | \
     ((c) >= '0' && (c) <= '9' ? HC_DIGIT | HC_HEX : 0) |                            \
     (((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F') ? HC_HEX : 0))
#define HC4_(b) HC_(b), HC_((b) + 1), HC_((b) + 2), HC_((b) + 3)
#define HC16_(b) HC4_(b), HC4_((b) + 4), HC4_((b) + 8), HC4_((b) + 12)
#define HC64_(b) HC16_(b), HC16_((b) + 16), HC16_((b) + 32), HC16_((b) + 48)
static const uint8_t http_cc[256] = {HC64_(0), HC64_(64), HC64_(128), HC64_(192)};

static bool is_uuid(const unsigned char *s)
{
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !(http_cc[s[i]] & HC_HEX))
            return false;
    }
    return true;
}

/* A path segment names one object rather than a kind of request when it is a
 * number, a long hex string with at least one digit (hashes, object ids), or a
 * UUID; folding those keeps the class count bounded by the application's
 * routes rather than by its data. `all` and `any` are the AND and the OR of
 * the http_cc classes of its n bytes (all starts with every bit set). */
static inline bool seg_is_id(const unsigned char *s, size_t n, unsigned all, unsigned any)
{
    return n > 0 && ((all & HC_DIGIT) || ((all & HC_HEX) && n >= 8 && (any & HC_DIGIT)) ||
                     (n == 36 && is_uuid(s)));
}

/* "{id}" in one store when it fits. */
static char *put_id(char *d, const char *lim)
{
    if (lim - d >= 4) {
        memcpy(d, "{id}", 4);
        return d + 4;
    }
    return sputs(d, lim, (const unsigned char *)"{id}", 4);
}

size_t tb_fp_http(const char *method, size_t mlen, const char *target, size_t tlen, char *out,
                  size_t cap)
{
    if (cap == 0)
        return 0;
    char *d = out;
    const char *const lim = out + cap - 1;
    d = sputs(d, lim, (const unsigned char *)method, mlen);
    d = sput(d, lim, ' ');

    const unsigned char *p = (const unsigned char *)target, *end = p + tlen;
    /* absolute-form (RFC 9112 §3.2.2, sent to proxies): drop scheme and authority. */
    /* Origin-form targets start with '/': the first byte settles it without
     * two calls to strncasecmp on every request. */
    bool h = p < end && (*p == 'h' || *p == 'H');
    size_t skip = h && end - p >= 7 && strncasecmp((const char *)p, "http://", 7) == 0    ? 7
                  : h && end - p >= 8 && strncasecmp((const char *)p, "https://", 8) == 0 ? 8
                                                                                           : 0;
    if (skip) {
        p += skip;
        while (p < end && *p != '/' && *p != '?' && *p != '#')
            p++;
        if (p == end || *p != '/') {
            d = sput(d, lim, '/');
            goto done;
        }
    }
    if (p == end) {
        d = sput(d, lim, '/');
        goto done;
    }
    if (*p != '/') { /* asterisk-form or authority-form (CONNECT host:port) */
        const unsigned char *q = p;
        while (q < end && *q != '?' && *q != '#')
            q++;
        d = sputs(d, lim, p, (size_t)(q - p));
        goto done;
    }
    /* p points at '/' whenever the loop tests it. */
    while (p < end && *p == '/') {
        d = sput(d, lim, '/');
        const unsigned char *s = ++p, *dot = NULL;
        /* One pass finds the segment's end and its first dot, and gathers the
         * byte classes that tell an id, for the segment and for the part
         * before the dot. */
        unsigned all = ~0u, any = 0, dall = 0, dany = 0;
        for (; p < end; p++) {
            unsigned c = http_cc[*p];
            if (c & (HC_END | HC_DOT)) {
                if (c & HC_END)
                    break;
                if (!dot) {
                    dot = p;
                    dall = all;
                    dany = any;
                }
            }
            all &= c;
            any |= c;
        }
        /* "<hash>.png": the name is an id, the extension says what kind. */
        if (seg_is_id(s, (size_t)(p - s), all, any)) {
            d = put_id(d, lim);
        } else if (dot && seg_is_id(s, (size_t)(dot - s), dall, dany)) {
            d = put_id(d, lim);
            d = sputs(d, lim, dot, (size_t)(p - dot));
        } else {
            d = sputs(d, lim, s, (size_t)(p - s));
        }
    }
done:
    *d = '\0';
    return (size_t)(d - out);
}

/* ---- SQL -------------------------------------------------------------- */

enum tok { T_NONE, T_WORD, T_LIT, T_PUNCT };

/* Character classes of the SQL tokeniser as one table lookup: the chains of
 * comparisons ran for every byte of every query and were the bulk of its cost.
 * The table is built by the same tests, at compile time. CC_PUNCT marks the
 * printable bytes that are always a token of their own, with no second
 * meaning (comment, sign, literal, quote). */
enum {
    CC_WORD_START = 0x01,
    CC_WORD = 0x02,
    CC_SPACE = 0x04,
    CC_DIGIT = 0x08,
    CC_PUNCT = 0x10,
    CC_LITPFX = 0x20, /* x X b B n N: may open X'..', b'..', N'..' */
};
#define CC_WS_(c) \
    (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || (c) == '_' || (c) == '$' || \
     (c) == '@' || (c) >= 0x80)
#define CC_PU_(c)                                                                           \
    ((c) > 0x20 && (c) < 0x7f && !CC_WS_(c) && !((c) >= '0' && (c) <= '9') && (c) != '\'' && \
     (c) != '"' && (c) != '`' && (c) != '?' && (c) != '/' && (c) != '#' && (c) != '-' &&     \
     (c) != '+' && (c) != '.')
#define CC_LP_(c) \
    ((c) == 'x' || (c) == 'X' || (c) == 'b' || (c) == 'B' || (c) == 'n' || (c) == 'N')
#define CC_(c)                                                                              \
    ((CC_WS_(c) ? CC_WORD_START | CC_WORD                                                   \
      : ((c) >= '0' && (c) <= '9') ? CC_WORD | CC_DIGIT                                     \
      : ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' || (c) == '\f' ||       \
         (c) == '\v')                                                                       \
          ? CC_SPACE                                                                        \
      : CC_PU_(c) ? CC_PUNCT                                                                \
                  : 0) |                                                                    \
     (CC_LP_(c) ? CC_LITPFX : 0))
#define CC4_(b) CC_(b), CC_((b) + 1), CC_((b) + 2), CC_((b) + 3)
#define CC16_(b) CC4_(b), CC4_((b) + 4), CC4_((b) + 8), CC4_((b) + 12)
#define CC64_(b) CC16_(b), CC16_((b) + 16), CC16_((b) + 32), CC16_((b) + 48)
static const uint8_t sql_cc[256] = {CC64_(0), CC64_(64), CC64_(128), CC64_(192)};

static bool is_word(unsigned char c) { return sql_cc[c] & CC_WORD; }

/* A word byte lowered, or 0 for a byte that ends a word (NUL is not a word
 * byte, so 0 is free): one load both tests and lowers. */
#define WL_(c)                                                                  \
    (CC_WS_(c) || ((c) >= '0' && (c) <= '9') ? (c) + ((c) >= 'A' && (c) <= 'Z' ? 32 : 0) \
                                              : 0)
#define WL4_(b) WL_(b), WL_((b) + 1), WL_((b) + 2), WL_((b) + 3)
#define WL16_(b) WL4_(b), WL4_((b) + 4), WL4_((b) + 8), WL4_((b) + 12)
#define WL64_(b) WL16_(b), WL16_((b) + 16), WL16_((b) + 32), WL16_((b) + 48)
static const unsigned char word_lower[256] = {WL64_(0), WL64_(64), WL64_(128), WL64_(192)};

/* Skips a quoted literal starting at s[i] (the quote); returns the index past
 * its end. Doubled quotes and backslash escapes stay inside the literal. */
static size_t skip_quoted(const unsigned char *s, size_t i, size_t n)
{
    unsigned char q = s[i++];
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
 * spacing canonical: no space after '(' or before ',' and ')', one after ','.
 * Returns the new end of the output. */
static char *collapse_tail(char *s, char *d, const char *lim)
{
    size_t n = (size_t)(d - s);
    if (n < 3 || s[n - 1] != ')' || s[n - 2] != '?')
        return d;
    size_t i = n - 2; /* at the last '?' */
    while (i >= 3 && s[i - 1] == ' ' && s[i - 2] == ',' && s[i - 3] == '?')
        i -= 3;
    if (i == 0 || s[i - 1] != '(')
        return d;
    size_t k = i - 1; /* at '(' */
    if (k > 0 && s[k - 1] == ' ')
        k--;
    if (k > 0 && s[k - 1] == ',' &&
        (ends_with_word(s, k - 1, "values (?+)") || ends_with_word(s, k - 1, "value (?+)")))
        return s + k - 1;
    if (ends_with_word(s, k, "in") || ends_with_word(s, k, "values") ||
        ends_with_word(s, k, "value"))
        return sputs(s + k, lim, (const unsigned char *)" (?+)", 5);
    return d;
}

/* PostgreSQL's "$1" parameters and "$tag$ … $tag$" strings are literals:
 * returns the index past the one starting at s[i] (a '$'), or 0 when the '$'
 * starts neither (a name such as MySQL's "$x"). A parameter folds to '?' so
 * that a statement gets the same class whether its values travel inline
 * (simple query) or as parameters (extended protocol). */
static size_t dollar_literal(const unsigned char *s, size_t i, size_t n)
{
    size_t j = i + 1;
    if (j < n && (sql_cc[s[j]] & CC_DIGIT)) {
        while (j < n && (sql_cc[s[j]] & CC_DIGIT))
            j++;
        return j < n && is_word(s[j]) ? 0 : j;
    }
    while (j < n && s[j] != '$' && is_word(s[j]))
        j++;
    if (j >= n || s[j] != '$')
        return 0;
    size_t tag = j + 1 - i; /* "$tag$" */
    for (size_t k = j + 1; k + tag <= n; k++)
        if (s[k] == '$' && memcmp(s + k, s + i, tag) == 0)
            return k + tag;
    return n; /* unterminated: a literal to the end */
}

/* Keywords after which '-' or '+' is a sign, not an operator ("where -1"). */
static bool sign_follows(const unsigned char *w, size_t n)
{
    static const char *const kws[] = {"select", "where", "and", "or", "not", "by", "limit",
                                      "offset", "values", "set", "when", "then", "else",
                                      "between", "in", "like", "is", "on", "having", "return",
                                      "case", "interval"};
    for (size_t i = 0; i < TB_ARRAY_SIZE(kws); i++)
        if (strlen(kws[i]) == n && strncasecmp(kws[i], (const char *)w, n) == 0)
            return true;
    return false;
}

size_t tb_fp_sql(const char *sql, size_t len, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    const unsigned char *s = (const unsigned char *)sql;
    char *d = out;
    const char *const lim = out + cap - 1;
    size_t i = 0, n = len;
    enum tok prev = T_NONE;
    unsigned char prev_c = 0;         /* last punctuation emitted */
    size_t prev_w = 0, prev_wlen = 0; /* last word, in the input */
    bool space = false;

    while (i < n) {
        unsigned char c = s[i];
        unsigned cc = sql_cc[c];
        if (cc & CC_SPACE) {
            space = true;
            i++;
            continue;
        }

        /* The common token, a plain word (keyword or name): found, lowered
         * and copied in one pass. Not a word when it opens X'..', b'..' or
         * N'..'. Word bytes are never control bytes, so the output is that of
         * put() for each lowered byte. */
        size_t dl = c == '$' ? dollar_literal(s, i, n) : 0;
        if ((cc & CC_WORD_START) && !((cc & CC_LITPFX) && i + 1 < n && s[i + 1] == '\'') &&
            dl == 0) {
            if (prev != T_NONE && !(prev == T_PUNCT && prev_c == '(') &&
                (space || (prev == T_PUNCT && prev_c == ',')))
                d = sput(d, lim, ' ');
            space = false;
            size_t j = i;
            if ((size_t)(lim - d) >= n - i) {
                /* The rest of the query fits: no room check per byte. */
                const unsigned char *q = s + i, *qe = s + n;
                unsigned char w = word_lower[*q];
                do {
                    *d++ = (char)w;
                } while (++q < qe && (w = word_lower[*q]) != 0);
                j = (size_t)(q - s);
                /* Words are mostly followed by one space: noted here, it
                 * saves a turn of the main loop. */
                if (q < qe && *q == ' ') {
                    prev = T_WORD;
                    prev_c = 0;
                    prev_w = i;
                    prev_wlen = j - i;
                    space = true;
                    i = j + 1;
                    continue;
                }
            } else {
                while (j < n && word_lower[s[j]])
                    j++;
                for (size_t k = i; k < j && d < lim; k++)
                    *d++ = (char)word_lower[s[k]];
            }
            prev = T_WORD;
            prev_c = 0;
            prev_w = i;
            prev_wlen = j - i;
            i = j;
            continue;
        }

        /* Classify the token and find its extent. */
        enum tok t;
        size_t j;
        if (dl) {
            t = T_LIT;
            j = dl;
        } else if (cc & CC_DIGIT) {
            t = T_LIT;
            goto number;
        } else if (cc & CC_PUNCT) {
            t = T_PUNCT;
            j = i + 1;
        } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            j = i + 2;
            while (j + 1 < n && !(s[j] == '*' && s[j + 1] == '/'))
                j++;
            i = j + 1 < n ? j + 2 : n;
            space = true;
            continue;
        } else if (c == '#' || (c == '-' && i + 1 < n && s[i + 1] == '-' &&
                                (i + 2 == n || s[i + 2] == ' ' || s[i + 2] == '\t' ||
                                 s[i + 2] == '\n' || s[i + 2] == '\r'))) {
            while (i < n && s[i] != '\n')
                i++;
            space = true;
            continue;
        } else if (c == '\'' || c == '"') {
            t = T_LIT;
            j = skip_quoted(s, i, n);
        } else if (cc & CC_LITPFX) {
            t = T_LIT; /* X'0a', b'101', N'text' (a plain word was taken above) */
            j = skip_quoted(s, i + 1, n);
        } else if ((c == '.' && i + 1 < n && (sql_cc[s[i + 1]] & CC_DIGIT) && prev != T_WORD) ||
                   ((c == '-' || c == '+') && i + 1 < n && (sql_cc[s[i + 1]] & CC_DIGIT) &&
                    (prev == T_NONE || (prev == T_PUNCT && prev_c != ')') ||
                     (prev == T_WORD && sign_follows(s + prev_w, prev_wlen))))) {
            t = T_LIT;
        number:
            j = i + 1;
            while (j < n) {
                unsigned char e = s[j];
                if ((sql_cc[e] & CC_WORD) || e == '.')
                    j++;
                else if ((e == '+' || e == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E') &&
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
        } else {
            t = T_PUNCT; /* control bytes and the signs and dots that are operators */
            j = i + 1;
        }

        /* Canonical spacing so that "IN(1,2)" and "in ( 1 , 2 )" agree. */
        bool tight = (t == T_PUNCT && (c == ')' || c == ',')) ||
                     (prev == T_PUNCT && prev_c == '(');
        if (prev != T_NONE && !tight && (space || (prev == T_PUNCT && prev_c == ',')))
            d = sput(d, lim, ' ');
        space = false;

        if (t == T_LIT) {
            d = sput(d, lim, '?');
        } else {
            d = sputs(d, lim, s + i, j - i);
            if (c == ')')
                d = collapse_tail(out, d, lim);
        }
        prev = t;
        prev_c = t == T_PUNCT ? c : 0;
        if (t == T_WORD) {
            prev_w = i;
            prev_wlen = j - i;
        }
        i = j;
    }
    /* A trailing statement terminator does not make a different query. */
    while (d > out && (d[-1] == ';' || d[-1] == ' '))
        d--;
    *d = '\0';
    return (size_t)(d - out);
}
