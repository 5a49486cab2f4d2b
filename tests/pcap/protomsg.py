#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# protomsg.py — AJP13, FastCGI and TLS messages built byte by byte from their
# specifications (the layouts are sketched in capture/proto/ajp.c, fastcgi.c,
# tls.c), for the fuzz seeds (tests/fuzz/mkcorpus_proto.py) and the capture
# benchmark; and, run as a script, a benchmark capture of one protocol:
#   protomsg.py bench ajp|fastcgi|tls FILE [CONNECTIONS [EXCHANGES]]
import os
import random
import struct
import sys

# ---- AJP13 ----------------------------------------------------------------
AJP_METHODS = {"OPTIONS": 1, "GET": 2, "HEAD": 3, "POST": 4, "PUT": 5, "DELETE": 6}


def ajp_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">H", len(b)) + b + b"\0"


def ajp_c(payload):
    return b"\x12\x34" + struct.pack(">H", len(payload)) + payload


def ajp_s(payload):
    return b"AB" + struct.pack(">H", len(payload)) + payload


def ajp_forward(method, uri, headers=(("Host", "shop"),), attrs=(), query=None):
    """A Forward Request; a method without a code goes by name (attribute 0x0d)."""
    code = AJP_METHODS.get(method, 0xFF)
    p = bytes([2, code]) + ajp_str("HTTP/1.1") + ajp_str(uri) + ajp_str("10.0.0.9")
    p += ajp_str("client") + ajp_str("shop") + struct.pack(">HBH", 80, 0, len(headers))
    for name, value in headers:
        # 0xA00B is Host's code; other names are spelled out.
        p += (b"\xa0\x0b" if name == "Host" else ajp_str(name)) + ajp_str(value)
    for code_, value in attrs:
        p += bytes([code_]) + (struct.pack(">H", value) if code_ == 0x0B else ajp_str(value))
    if query is not None:
        p += b"\x05" + ajp_str(query)
    if code == 0xFF:
        p += b"\x0d" + ajp_str(method)
    return ajp_c(p + b"\xff")


def ajp_data(data):
    return ajp_c(struct.pack(">H", len(data)) + data)


def ajp_headers(status, reason="OK", length=None):
    hs = [(0xA001, "text/plain")]
    if length is not None:
        hs.append((0xA003, str(length)))
    p = b"\x04" + struct.pack(">H", status) + ajp_str(reason) + struct.pack(">H", len(hs))
    for code, value in hs:
        p += struct.pack(">H", code) + ajp_str(value)
    return ajp_s(p)


def ajp_body(data):
    return ajp_s(b"\x03" + struct.pack(">H", len(data)) + data + b"\0")


def ajp_get_body(n):
    return ajp_s(b"\x06" + struct.pack(">H", n))


AJP_END = ajp_s(b"\x05\x01")
AJP_CPING = ajp_c(b"\x0a")
AJP_CPONG = ajp_s(b"\x09")


def ajp_exchange(method, uri, status, body_len=100, req_body=b""):
    """(client bytes, server bytes) of one complete exchange."""
    c = ajp_forward(method, uri, query="a=1")
    s = b""
    if req_body:
        c += ajp_data(req_body[:8186])
        rest = req_body[8186:]
        while rest:
            s += ajp_get_body(8186)
            c += ajp_data(rest[:8186])
            rest = rest[8186:]
        s += ajp_get_body(8186)
        c += ajp_data(b"")
    s += ajp_headers(status, length=body_len)
    body = b"x" * body_len
    while body:
        s += ajp_body(body[:8184])
        body = body[8184:]
    return c, s + AJP_END


# ---- FastCGI --------------------------------------------------------------
FCGI_BEGIN, FCGI_ABORT, FCGI_END, FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = range(1, 8)


def fcgi_rec(rtype, rid, content=b"", pad=None):
    if pad is None:
        pad = (-len(content)) % 8
    return struct.pack(">BBHHBB", 1, rtype, rid, len(content), pad, 0) + content + b"\0" * pad


def fcgi_len(n):
    return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)


def fcgi_pairs(params):
    out = b""
    for k, v in params:
        k, v = k.encode(), v.encode()
        out += fcgi_len(len(k)) + fcgi_len(len(v)) + k + v
    return out


def fcgi_request(rid, method, uri, body=b"", script="/index.php", keep=True, split=None):
    """Client records of one request; `split` cuts the PARAMS stream into two
    records at that byte (a pair may straddle them)."""
    params = fcgi_pairs([("SCRIPT_FILENAME", "/srv/www" + script), ("QUERY_STRING", ""),
                         ("REQUEST_METHOD", method), ("CONTENT_LENGTH", str(len(body))),
                         ("SCRIPT_NAME", script), ("REQUEST_URI", uri),
                         ("DOCUMENT_URI", script), ("SERVER_PROTOCOL", "HTTP/1.1"),
                         ("HTTP_USER_AGENT", "t" * 140)])
    out = fcgi_rec(FCGI_BEGIN, rid, struct.pack(">HB5x", 1, 1 if keep else 0))
    if split is None:
        out += fcgi_rec(FCGI_PARAMS, rid, params)
    else:
        out += fcgi_rec(FCGI_PARAMS, rid, params[:split]) + fcgi_rec(FCGI_PARAMS, rid, params[split:])
    out += fcgi_rec(FCGI_PARAMS, rid)
    while body:
        out += fcgi_rec(FCGI_STDIN, rid, body[:32768])
        body = body[32768:]
    return out + fcgi_rec(FCGI_STDIN, rid)


def fcgi_response(rid, headers=b"Content-type: text/html\r\n", body_len=100, stderr=b"",
                  proto_status=0):
    out = b""
    data = headers + b"\r\n" + b"y" * body_len
    while data:
        out += fcgi_rec(FCGI_STDOUT, rid, data[:32768])
        data = data[32768:]
    if stderr:
        out += fcgi_rec(FCGI_STDERR, rid, stderr)
    out += fcgi_rec(FCGI_STDOUT, rid)
    return out + fcgi_rec(FCGI_END, rid, struct.pack(">IB3x", 0, proto_status))


# ---- TLS ------------------------------------------------------------------
def tls_rec(ctype, payload, ver=0x0303):
    return struct.pack(">BHH", ctype, ver, len(payload)) + payload


def tls_hs(mtype, body):
    return bytes([mtype]) + struct.pack(">I", len(body))[1:] + body


def tls_ext(etype, data):
    return struct.pack(">HH", etype, len(data)) + data


def client_hello(sni=None, rnd=None):
    exts = b""
    if sni:
        name = sni.encode()
        entry = b"\x00" + struct.pack(">H", len(name)) + name
        exts += tls_ext(0, struct.pack(">H", len(entry)) + entry)
    exts += tls_ext(10, b"\x00\x04\x00\x1d\x00\x17")            # supported_groups
    exts += tls_ext(43, b"\x04\x03\x04\x03\x03")                 # supported_versions
    exts += tls_ext(51, b"\x00\x26\x00\x1d\x00\x20" + b"k" * 32)  # key_share
    body = b"\x03\x03" + (rnd or b"r" * 32) + b"\x20" + b"s" * 32
    body += b"\x00\x04\x13\x01\xc0\x2f" + b"\x01\x00" + struct.pack(">H", len(exts)) + exts
    return tls_rec(22, tls_hs(1, body), ver=0x0301)


def server_hello(v13):
    exts = tls_ext(43, b"\x03\x04") + tls_ext(51, b"\x00\x1d\x00\x20" + b"K" * 32) if v13 else b""
    body = b"\x03\x03" + b"R" * 32 + b"\x20" + b"s" * 32 + (b"\x13\x01" if v13 else b"\xc0\x2f")
    body += b"\x00" + (struct.pack(">H", len(exts)) + exts if exts else b"")
    return tls_rec(22, tls_hs(2, body))


def tls_app(n):
    return tls_rec(23, b"\xaa" * n)


def tls_handshake(v13, sni="shop.example"):
    """[(from_client, bytes), …]: a full handshake, TLS 1.3 or 1.2."""
    if v13:
        return [(True, client_hello(sni)),
                (False, server_hello(True) + tls_rec(20, b"\x01") + tls_app(2100)),
                (True, tls_rec(20, b"\x01") + tls_app(53))]
    return [(True, client_hello(sni)),
            (False, server_hello(False) + tls_rec(22, tls_hs(11, b"c" * 1500)) +
             tls_rec(22, tls_hs(12, b"k" * 300)) + tls_rec(22, tls_hs(14, b""))),
            (True, tls_rec(22, tls_hs(16, b"e" * 66)) + tls_rec(20, b"\x01") +
             tls_rec(22, b"f" * 40)),
            (False, tls_rec(20, b"\x01") + tls_rec(22, b"F" * 40))]


# ---- benchmark captures ---------------------------------------------------
def bench(proto, path, flows=300, exchanges=1000, seed=11):
    """Connections with handshakes to one server, interleaved in time; each
    exchange a request segment and a response segment, then an ACK."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mkpcap
    rnd = random.Random(seed)
    w = mkpcap.Writer(path)
    port = {"ajp": 8009, "fastcgi": 9000, "tls": 443}[proto]
    conns = [mkpcap.Conn(w, mkpcap.ip4("10.1.%d.%d" % (i // 250, i % 250 + 1)), 20000 + i,
                         mkpcap.ip4("10.0.0.7"), port, rnd.randrange(2**32), rnd.randrange(2**32))
             for i in range(flows)]
    events = []
    for idx in range(flows):
        t = mkpcap.T0 + rnd.randrange(10_000_000)
        for j in range(exchanges):
            events.append((t, idx, j))
            t += 2_000_000 + rnd.randrange(8_000_000)
    events.sort()
    started = set()
    for t, idx, j in events:
        c = conns[idx]
        if idx not in started:
            started.add(idx)
            c.handshake(t - 100_000)
            if proto == "tls":
                for k, (fc, b) in enumerate(tls_handshake(idx % 2 == 0)):
                    c.send(t - 90_000 + k * 10_000, fc, b)
        n = 200 + j % 300
        if proto == "ajp":
            req, resp = ajp_exchange("GET", "/app/item/%d" % j, 200, n)
        elif proto == "fastcgi":
            req, resp = fcgi_request(1, "GET", "/item/%d?x=%d" % (j, idx)), fcgi_response(1, body_len=n)
        else:
            req, resp = tls_app(120), tls_app(n)
        c.send(t, True, req)
        c.send(t + 400_000, False, resp)
        c.ack(t + 410_000, True)
    w.close()


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "bench":
        bench(sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:6]))
    else:
        sys.exit("usage: protomsg.py bench ajp|fastcgi|tls FILE [CONNECTIONS [EXCHANGES]]")
