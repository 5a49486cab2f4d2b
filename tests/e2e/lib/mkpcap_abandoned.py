#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mkpcap_abandoned.py — issue 13, finding 10: a capture of N HTTP connections
# (port 80), each opened with a handshake, carrying one answered request and
# then one request that never gets an answer, and never closed. The expected
# counts are exact by construction: N requests recorded, N abandoned. Written
# as raw IPv4 (DLT_RAW), with connections interleaved in waves of `--wave` so
# that that many are open at once before the next wave begins (the oldest idle
# ones are what a memory cap evicts).
#
#   mkpcap_abandoned.py OUT.pcap N [--wave W] [--pad BYTES]
import argparse
import struct
import sys

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__),
                                               "..", "..", "pcap"))
from mkpcap import Writer, tcp_ip  # noqa: E402  (the repository's pcap writer)

SYN, ACK, PSH = 0x02, 0x10, 0x08


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("n", type=int)
    ap.add_argument("--wave", type=int, default=10000)
    ap.add_argument("--pad", type=int, default=0, help="bytes of header padding per request")
    a = ap.parse_args()
    w = Writer(a.out, link="raw")
    srv = bytes([10, 0, 0, 80])
    pad = b"X-Pad: " + b"p" * a.pad + b"\r\n" if a.pad else b""
    req1 = b"GET /answered HTTP/1.1\r\nHost: s\r\n" + pad + b"\r\n"
    req2 = b"GET /never HTTP/1.1\r\nHost: s\r\n" + pad + b"\r\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    t = 1_700_000_000 * 10**9
    step = 1000  # 1 us between packets
    for base in range(0, a.n, a.wave):
        wave = range(base, min(a.n, base + a.wave))
        # Each phase for every connection of the wave before the next phase,
        # so a wave's connections are all open together.
        for phase in range(5):
            for i in wave:
                cli = bytes([10, 1 + (i >> 16) % 200, (i >> 8) & 255, i & 255])
                cp = 1024 + i % 60000
                cs, ss = 1000, 5000
                if phase == 0:
                    pk = [tcp_ip(cli, cp, srv, 80, cs, 0, SYN)]
                elif phase == 1:
                    pk = [tcp_ip(srv, 80, cli, cp, ss, cs + 1, SYN | ACK),
                          tcp_ip(cli, cp, srv, 80, cs + 1, ss + 1, ACK)]
                elif phase == 2:
                    pk = [tcp_ip(cli, cp, srv, 80, cs + 1, ss + 1, ACK | PSH, req1)]
                elif phase == 3:
                    pk = [tcp_ip(srv, 80, cli, cp, ss + 1, cs + 1 + len(req1), ACK | PSH, resp)]
                else:
                    s2 = cs + 1 + len(req1)
                    pk = [tcp_ip(cli, cp, srv, 80, s2, ss + 1 + len(resp), ACK | PSH, req2),
                          tcp_ip(srv, 80, cli, cp, ss + 1 + len(resp), s2 + len(req2), ACK)]
                for p in pk:
                    w.record(t, p)
                    t += step
    w.close()


if __name__ == "__main__":
    main()
