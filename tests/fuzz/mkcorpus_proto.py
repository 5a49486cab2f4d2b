#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mkcorpus_proto.py — writes the seeds of fuzz_ajp, fuzz_fastcgi and fuzz_tls:
# whole conversations built by tests/pcap/protomsg.py, in the input format of
# pt_fuzz_drive (capture/proto/proto-test.h): seed(1) split(2, LE) client
# bytes, server bytes. The unit tests replay the same files under every seed.
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "pcap"))
import protomsg as m  # noqa: E402


def seed(name, fname, client, server, s=0):
    d = os.path.join(here, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(bytes([s]) + struct.pack("<H", len(client)) + client + server)


def join(pairs):
    c = b"".join(b for fc, b in pairs if fc)
    s = b"".join(b for fc, b in pairs if not fc)
    return c, s


def main():
    # AJP13
    c1, s1 = m.ajp_exchange("GET", "/app/items/17", 200, 300)
    c2, s2 = m.ajp_exchange("POST", "/app/upload", 201, 20, req_body=b"b" * 20000)
    c3, s3 = m.ajp_exchange("PATCH", "/app/items/3", 204, 0)
    seed("ajp", "get", c1, s1)
    seed("ajp", "post-body", c2, s2, 1)
    seed("ajp", "stored-method", c3, s3, 2)
    seed("ajp", "cping-keepalive", m.AJP_CPING + c1 + m.AJP_CPING + c3, m.AJP_CPONG + s1 + m.AJP_CPONG + s3, 3)
    seed("ajp", "big", *m.ajp_exchange("GET", "/app/big", 200, 40000), s=4)
    seed("ajp", "midstream", c1[7:] + c3, s1[5:] + s3, 0x81)
    # FastCGI
    seed("fastcgi", "get", m.fcgi_request(1, "GET", "/items/42?x=1"), m.fcgi_response(1))
    seed("fastcgi", "status", m.fcgi_request(1, "GET", "/gone", split=40) +
         m.fcgi_request(1, "GET", "/moved"),
         m.fcgi_response(1, b"Status: 404 Not Found\r\nContent-type: text/html\r\n") +
         m.fcgi_response(1, b"Location: /x\r\n", 0, stderr=b"PHP Notice"), 1)
    seed("fastcgi", "multiplexed", m.fcgi_request(1, "GET", "/a/1") + m.fcgi_request(2, "POST", "/b", b"p" * 40000),
         m.fcgi_response(2, body_len=70000) + m.fcgi_response(1, proto_status=2), 2)
    seed("fastcgi", "midstream", m.fcgi_request(3, "GET", "/mid")[30:] + m.fcgi_request(4, "GET", "/x"),
         m.fcgi_response(3)[10:] + m.fcgi_response(4), 0x83)
    # TLS
    for v13 in (True, False):
        hs = m.tls_handshake(v13)
        c, s = join(hs)
        ex = [(True, m.tls_app(300)), (False, m.tls_app(5000) + m.tls_app(40)),
              (True, m.tls_app(120) + m.tls_app(16000)), (False, m.tls_app(90))]
        c2, s2 = join(ex)
        seed("tls", "tls13" if v13 else "tls12", c + c2, s + s2, 4 + v13)
        seed("tls", ("tls13" if v13 else "tls12") + "-close", c + c2 + m.tls_app(19), s + s2 + m.tls_app(19),
             6 + v13)
    seed("tls", "midstream", m.tls_app(400)[100:] + m.tls_app(80) + m.tls_app(90),
         m.tls_app(700) + m.tls_app(3000), 0x85)


if __name__ == "__main__":
    main()
