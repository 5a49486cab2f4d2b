/* SPDX-License-Identifier: MIT */
/* http_parse.c — a strict HTTP/1.x request-head parser (RFC 9112) and the Host
 * allow-list check; pure functions, no I/O, so they can be fuzzed on their own.
 *
 * Message layout (RFC 9112 §2.1, §3, §5):
 *     request-line = method SP request-target SP HTTP-version CRLF
 *     field-line   = field-name ":" OWS field-value OWS CRLF
 *     head         = *( CRLF ) request-line *( field-line ) CRLF
 * Strict where lenient parsers open doors: every line ends in CRLF (a bare LF
 * or CR is a 400, RFC 9112 §2.2 allows refusing them, and accepting them is
 * how request smuggling between two parsers starts); no whitespace between a
 * field name and its colon (§5.1: MUST be rejected with 400); no line folding
 * (§5.2); only HTTP/1.0 and HTTP/1.1 (505 for another well-formed version);
 * HTTP/1.1 needs exactly one Host (§3.2); Content-Length is digits only and
 * consistent; any Transfer-Encoding is refused (501; 400 together with a
 * Content-Length), since the API takes no bodies. */
#include "http-int.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#define METHOD_MAX 32

/* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
 *         "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA   (RFC 9110 §5.6.2) */
static bool tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
        return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* field-vchar and the spaces a value may hold: HTAB, SP, VCHAR, obs-text. */
static bool value_char(unsigned char ch)
{
    return ch == '\t' || ch >= 0x20 ? ch != 0x7f : false;
}

static bool ieq(const char *a, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

/* Finds the end of the line starting at p. Returns 1 with *ll the length
 * before CRLF, 0 when no LF has arrived yet (*ll = bytes so far, a trailing
 * CR left out), or -400 for a bare LF or a CR not followed by LF (*ll = the
 * bytes before it, which the caller checks first: an error they show came
 * earlier in the stream). */
static int take_line(const char *p, const char *end, size_t *ll)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    const char *stop = lf ? lf : end;
    const char *cr = memchr(p, '\r', (size_t)(stop - p));
    if (lf) {
        if (!cr || cr != lf - 1) {
            *ll = (size_t)((cr ? cr : lf) - p);
            return -400;
        }
        *ll = (size_t)(cr - p);
        return 1;
    }
    if (cr && cr != end - 1) {
        *ll = (size_t)(cr - p);
        return -400;
    }
    *ll = (size_t)((cr ? cr : end) - p);
    return 0;
}

/* Request line; `complete` false means only its first ll bytes have come,
 * and the check is of what can already be told wrong. */
static long request_line(const char *s, size_t ll, bool complete, struct tb_http_head *h)
{
    const char *p = s, *end = s + ll;
    while (p < end && tchar((unsigned char)*p))
        p++;
    size_t mlen = (size_t)(p - s);
    if (mlen > METHOD_MAX)
        return -400;
    if (p == end)
        return complete ? -400 : 0;
    if (*p != ' ' || mlen == 0)
        return -400;
    const char *t = ++p;
    while (p < end && *p > 0x20 && *p < 0x7f)
        p++;
    size_t tlen = (size_t)(p - t);
    if (tlen > TB_HTTP_URL_MAX)
        return -414;
    if (p == end)
        return complete ? -400 : 0;
    if (*p != ' ' || tlen == 0)
        return -400;
    const char *v = ++p;
    size_t vlen = (size_t)(end - v);
    static const char proto[] = "HTTP/";
    if (memcmp(v, proto, TB_MIN(vlen, sizeof proto - 1)) != 0 || vlen > 8)
        return -400;
    if (!complete)
        return 0;
    if (vlen != 8 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' || v[7] > '9')
        return -400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return -505;
    h->minor = v[7] - '0';
    memcpy(h->method_name, s, mlen);
    h->method_name[mlen] = '\0';
    h->method = !strcmp(h->method_name, "GET")    ? TB_HTTP_GET
                : !strcmp(h->method_name, "HEAD") ? TB_HTTP_HEAD
                                                  : TB_HTTP_OTHER;
    h->target = t;
    h->target_len = tlen;
    return 0;
}

/* A Host value: uri-host [ ":" port ] (RFC 9110 §7.2), the host being an
 * IP-literal in brackets or a reg-name (unreserved / pct-encoded / sub-delims). */
static bool host_syntax(const char *s, size_t n)
{
    size_t i = 0;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return false;
        for (const char *q = s + 1; q < rb; q++)
            if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') ||
                  (*q >= 'A' && *q <= 'F') || *q == ':' || *q == '.'))
                return false;
        i = (size_t)(rb - s) + 1;
    } else {
        for (; i < n && s[i] != ':'; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || strchr("-._~%!$&'()*+,;=", ch)))
                return false;
        }
    }
    if (i == n)
        return true;
    if (s[i] != ':')
        return false;
    for (i++; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Whether the comma-separated list in a Connection value holds `token`. */
static bool list_has(const char *v, size_t n, const char *token)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (i > s && ieq(v + s, i - s, token))
            return true;
    }
    return false;
}

struct fields {
    int hosts, lengths;
    bool te, close, keep;
    uint64_t length;
};

/* One field line (complete, or the first ll bytes of it). */
static long field_line(const char *s, size_t ll, bool complete, struct fields *f,
                       struct tb_http_head *h)
{
    if (ll && (s[0] == ' ' || s[0] == '\t'))
        return -400; /* obs-fold */
    const char *p = s, *end = s + ll;
    while (p < end && tchar((unsigned char)*p))
        p++;
    if (p == end)
        return complete ? -400 : 0;
    if (*p != ':' || p == s)
        return -400; /* "Host : x", or a name with a byte no token has */
    const char *name = s;
    size_t nlen = (size_t)(p - s);
    p++;
    for (const char *q = p; q < end; q++)
        if (!value_char((unsigned char)*q))
            return -400;
    if (!complete)
        return 0;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vlen = (size_t)(end - p);
    if (ieq(name, nlen, "Host")) {
        if (++f->hosts > 1 || !vlen || !host_syntax(p, vlen))
            return -400;
        h->host = p;
        h->host_len = vlen;
    } else if (ieq(name, nlen, "Content-Length")) {
        uint64_t v = 0;
        if (!vlen || vlen > 18)
            return -400;
        for (size_t i = 0; i < vlen; i++) {
            if (p[i] < '0' || p[i] > '9')
                return -400;
            v = v * 10 + (uint64_t)(p[i] - '0');
        }
        if (f->lengths++ && v != f->length)
            return -400;
        f->length = v;
    } else if (ieq(name, nlen, "Transfer-Encoding")) {
        f->te = true;
    } else if (ieq(name, nlen, "Connection")) {
        f->close |= list_has(p, vlen, "close");
        f->keep |= list_has(p, vlen, "keep-alive");
    }
    return 0;
}

/* Absolute-form targets ("http://host:port/path", RFC 9112 §3.2.2) carry the
 * authority the client means; it replaces Host, and the target becomes the
 * origin-form path. */
static long absolute_form(struct tb_http_head *h)
{
    const char *t = h->target;
    size_t n = h->target_len, skip;
    if (n >= 7 && !strncasecmp(t, "http://", 7))
        skip = 7;
    else if (n >= 8 && !strncasecmp(t, "https://", 8))
        skip = 8;
    else
        return -400;
    const char *a = t + skip, *end = t + n, *q = a;
    while (q < end && *q != '/' && *q != '?')
        q++;
    if (q == a || !host_syntax(a, (size_t)(q - a)) || memchr(a, '@', (size_t)(q - a)))
        return -400;
    h->host = a;
    h->host_len = (size_t)(q - a);
    /* An empty path is "/" (RFC 9112 §3.2.2); a query alone keeps its '?'. */
    h->target = q;
    h->target_len = (size_t)(end - q);
    if (!h->target_len || h->target[0] == '?')
        h->root_path = true;
    return 0;
}

long tb_http_parse_head(const char *buf, size_t n, struct tb_http_head *h)
{
    memset(h, 0, sizeof *h);
    const char *p = buf, *end = buf + n;
    /* RFC 9112 §2.2: empty lines before the request line are ignored (some
     * clients send CRLF after a body). */
    while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
        p += 2;
    struct fields f = {0};
    bool first = true;
    for (;;) {
        size_t ll;
        int lr = take_line(p, end, &ll);
        if (lr < 0) {
            /* What came before the bad line end is judged first, as it was
             * when those bytes arrived alone (a target past the limit is a
             * 414 however the line ends): one answer whatever the segments
             * (found by fuzz_http_parse). */
            long early = first ? request_line(p, ll, false, h) : field_line(p, ll, false, &f, h);
            if (early == 0 && (size_t)(p - buf) + ll > TB_HTTP_HEAD_MAX)
                early = -431;
            return early < 0 ? early : lr;
        }
        bool complete = lr == 1;
        long rc = first ? request_line(p, ll, complete, h)
                        : (ll || !complete ? field_line(p, ll, complete, &f, h) : 0);
        if (rc < 0)
            return rc;
        size_t used = (size_t)(p - buf) + ll + (complete ? 2 : 0);
        if (used > TB_HTTP_HEAD_MAX)
            return -431;
        if (!complete)
            return 0;
        p += ll + 2;
        if (!first && ll == 0)
            break;
        first = false;
    }
    if (h->target[0] != '/') {
        if (h->target_len == 1 && h->target[0] == '*' && !strcmp(h->method_name, "OPTIONS"))
            h->asterisk = true;
        else if (absolute_form(h) < 0)
            return -400;
    }
    if (h->minor == 1 && f.hosts != 1)
        return -400;
    if (f.te)
        return f.lengths ? -400 : -501;
    if (f.length > TB_HTTP_BODY_MAX)
        return -413;
    h->content_length = f.length;
    h->keep_alive = h->minor == 1 ? !f.close : (f.keep && !f.close);
    return (long)(p - buf);
}

bool tb_http_host_allowed(const char *host, size_t n, const char *const *extra, size_t nextra)
{
    if (!host || !n)
        return false;
    char name[256];
    size_t nl;
    if (host[0] == '[') {
        const char *rb = memchr(host, ']', n);
        if (!rb || (size_t)(rb - host - 1) >= sizeof name)
            return false;
        nl = (size_t)(rb - host - 1);
        memcpy(name, host + 1, nl);
        name[nl] = '\0';
        struct in6_addr a6;
        /* An address typed by the user: DNS rebinding needs a name. */
        if (inet_pton(AF_INET6, name, &a6) == 1)
            return true;
        return false;
    }
    const char *colon = memchr(host, ':', n);
    nl = colon ? (size_t)(colon - host) : n;
    if (nl == 0 || nl >= sizeof name)
        return false;
    memcpy(name, host, nl);
    name[nl] = '\0';
    struct in_addr a4;
    if (inet_pton(AF_INET, name, &a4) == 1)
        return true;
    /* A trailing dot names the same host. */
    if (nl > 1 && name[nl - 1] == '.')
        name[--nl] = '\0';
    /* RFC 6761 §6.3: localhost and its subdomains are loopback, resolved by
     * the client itself, never by a DNS an attacker controls. */
    if (!strcasecmp(name, "localhost") ||
        (nl > 10 && !strcasecmp(name + nl - 10, ".localhost")))
        return true;
    for (size_t i = 0; i < nextra; i++) {
        if (!strcmp(extra[i], "*"))
            return true;
        size_t el = strlen(extra[i]);
        if (el && extra[i][el - 1] == '.')
            el--;
        if (el == nl && !strncasecmp(extra[i], name, nl))
            return true;
    }
    return false;
}
