#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_memcached_client.py — drives a memcached over both protocols and writes
# what it sent as JSON, the oracle of e2e_memcached.sh:
#   answered: per tbneck class, the commands that got an answer;
#   silent: commands that by protocol got none (noreply, quiet binary);
#   silent_sets / silent_deletes / silent_incrs: those of each kind;
#   keys: keys asked for by all retrievals (memcached's cmd_get).
#
#   proto_memcached_client.py PORT OUT.json
import json
import socket
import struct
import sys
import time
from collections import Counter

port = int(sys.argv[1])
log = {"answered": Counter(), "silent": 0, "silent_sets": 0, "silent_deletes": 0,
       "silent_incrs": 0, "keys": 0, "not_found": 0}


def bucket(n):
    if n == 1:
        return ""
    b, lo = 2, 2
    while b <= 64 and n > b:
        lo, b = b + 1, b * 2
    if n > 64:
        return " 65+ keys"
    return " %d keys" % n if lo == b else " %d-%d keys" % (lo, b)


class Text:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def until(self, end, count=1):
        """Reads until `count` answers ending with one of `end` are in."""
        deadline = time.time() + 5
        while time.time() < deadline:
            n = sum(self.buf.count(e) for e in end)
            if n >= count:
                out, self.buf = self.buf, b""
                return out
            self.buf += self.s.recv(65536)
        raise SystemExit("memcached client: no answer %r in %r" % (end, self.buf))


def miss(answer, keys):
    """A retrieval that found fewer values than keys reads as NOT_FOUND."""
    if answer.count(b"VALUE ") < keys:
        log["not_found"] += 1


def text_session():
    c = Text()
    val = b"v" * 100
    # Sets, half of them noreply, all in one write.
    out = b""
    for i in range(80):
        nr = i < 50
        out += b"set key:%d 0 0 %d%s\r\n%s\r\n" % (i, len(val), b" noreply" if nr else b"", val)
        if nr:
            log["silent"] += 1
            log["silent_sets"] += 1
        else:
            log["answered"]["set"] += 1
    c.send(out)
    c.until([b"STORED\r\n"], 30)
    c.send(b"add key:1 0 0 1\r\nx\r\n")
    c.until([b"NOT_STORED\r\n"])
    log["answered"]["add"] += 1
    # Single gets, hits and misses, one at a time.
    for i in range(50):
        c.send(b"get key:%d\r\n" % (i if i < 40 else 1000 + i))
        miss(c.until([b"END\r\n"]), 1)
        log["answered"]["get"] += 1
        log["keys"] += 1
    # Multi-gets of 2 to 11 keys, some missing.
    for n in range(2, 12):
        keys = [b"key:%d" % (k * 7 % 120) for k in range(n)]
        c.send(b"get " + b" ".join(keys) + b"\r\n")
        miss(c.until([b"END\r\n"]), n)
        log["answered"]["get" + bucket(n)] += 1
        log["keys"] += n
    for _ in range(5):
        c.send(b"gets key:1 key:2\r\n")
        miss(c.until([b"END\r\n"]), 2)
        log["answered"]["gets 2 keys"] += 1
        log["keys"] += 2
    # A pipeline of 20 gets in one write.
    c.send(b"".join(b"get key:%d\r\n" % i for i in range(20)))
    miss(c.until([b"END\r\n"], 20), 20)
    log["answered"]["get"] += 20
    log["keys"] += 20
    # Deletes: hits, misses, noreply.
    for i in range(60, 65):
        c.send(b"delete key:%d\r\n" % i)
        c.until([b"DELETED\r\n"])
    for i in range(3):
        c.send(b"delete nokey:%d\r\n" % i)
        c.until([b"NOT_FOUND\r\n"])
        log["not_found"] += 1
    log["answered"]["delete"] += 8
    c.send(b"delete key:70 noreply\r\ndelete key:71 noreply\r\n")
    log["silent"] += 2
    log["silent_deletes"] += 2
    # Counters.
    c.send(b"set counter 0 0 1\r\n0\r\n")
    c.until([b"STORED\r\n"])
    log["answered"]["set"] += 1
    for _ in range(10):
        c.send(b"incr counter 1\r\n")
        c.until([b"\r\n"])
    for _ in range(2):
        c.send(b"incr nocounter 1\r\n")
        c.until([b"NOT_FOUND\r\n"])
        log["not_found"] += 1
    log["answered"]["incr"] += 12
    c.send(b"incr counter 1 noreply\r\n" * 3)
    log["silent"] += 3
    log["silent_incrs"] += 3
    for _ in range(3):
        c.send(b"touch key:1 100\r\n")
        c.until([b"TOUCHED\r\n"])
    log["answered"]["touch"] += 3
    # Check-and-set: one good, one stale.
    c.send(b"gets key:2\r\n")
    ans = c.until([b"END\r\n"])
    log["answered"]["gets"] += 1
    log["keys"] += 1
    unique = int(ans.split(b"\r\n")[0].split()[4])
    c.send(b"cas key:2 0 0 1 %d\r\ny\r\n" % unique)
    c.until([b"STORED\r\n"])
    c.send(b"cas key:2 0 0 1 %d\r\nz\r\n" % unique)
    c.until([b"EXISTS\r\n"])
    log["answered"]["cas"] += 2
    # Meta commands: a store, a hit, a quiet miss and hit tied by key, mn.
    c.send(b"ms mkey 2 T0\r\nhi\r\n")
    c.until([b"HD\r\n"])
    c.send(b"mg mkey v\r\n")
    c.until([b"hi\r\n"])
    c.send(b"mg nomkey v q k\r\nmg mkey v q k\r\nmn\r\n")
    c.until([b"MN\r\n"])
    log["answered"]["ms"] += 1
    log["answered"]["mg"] += 2
    log["answered"]["mn"] += 1
    log["silent"] += 1
    log["keys"] += 3
    c.send(b"version\r\n")
    c.until([b"\r\n"])
    log["answered"]["version"] += 1
    c.send(b"quit\r\n")
    c.s.close()


def bin_pkt(op, key=b"", extras=b"", val=b"", opaque=0):
    body = extras + key + val
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(body), opaque,
                       0) + body


class Binary:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def sendall(self, data):
        self.s.sendall(data)

    def read(self, n):
        """Reads n response packets, as (opcode, status, key, value)."""
        out = []
        while len(out) < n:
            while len(out) < n and len(self.buf) >= 24:
                body = struct.unpack(">I", self.buf[8:12])[0]
                if len(self.buf) < 24 + body:
                    break
                b = self.buf
                kl, el = struct.unpack(">H", b[2:4])[0], b[4]
                out.append((b[1], struct.unpack(">H", b[6:8])[0], b[24 + el:24 + el + kl],
                            b[24 + el + kl:24 + body]))
                self.buf = b[24 + body:]
            if len(out) < n:
                self.buf += self.s.recv(65536)
        return out


def binary_session():
    s = Binary()
    bin_read = lambda _s, n: s.read(n)  # noqa: E731
    ext = struct.pack(">II", 0, 0)
    s.sendall(bin_pkt(0x01, b"bkey", ext, b"hello", 1))             # Set
    bin_read(s, 1)
    log["answered"]["set"] += 1
    s.sendall(b"".join(bin_pkt(0x11, b"bq:%d" % i, ext, b"x", 10 + i) for i in range(5)) +
              bin_pkt(0x0a, opaque=20))                             # SetQ x5, Noop
    bin_read(s, 1)
    log["answered"]["noop"] += 1
    log["silent"] += 5
    log["silent_sets"] += 5
    s.sendall(bin_pkt(0x00, b"bkey", opaque=21))                    # Get hit
    s.sendall(bin_pkt(0x00, b"nobkey", opaque=22))                  # Get miss
    r = bin_read(s, 2)
    assert r[1][1] == 1, r
    log["answered"]["get"] += 2
    log["keys"] += 2
    log["not_found"] += 1
    s.sendall(b"".join(bin_pkt(0x09, b"miss:%d" % i, opaque=30 + i) for i in range(3)) +
              bin_pkt(0x0d, b"bkey", opaque=40) + bin_pkt(0x0d, b"bq:1", opaque=41) +
              bin_pkt(0x0a, opaque=42))                             # GetQ x3 miss, GetKQ x2, Noop
    bin_read(s, 3)
    log["answered"]["getkq"] += 2
    log["answered"]["noop"] += 1
    log["silent"] += 3
    log["keys"] += 5
    s.sendall(bin_pkt(0x04, b"bq:0", opaque=50))                    # Delete
    s.sendall(bin_pkt(0x05, b"counter", struct.pack(">QQI", 1, 0, 0), opaque=51))  # Incr
    bin_read(s, 2)
    log["answered"]["delete"] += 1
    log["answered"]["incr"] += 1
    s.sendall(bin_pkt(0x10, opaque=60))                             # Stat: many packets
    while True:
        op, st, k, v = bin_read(s, 1)[0]
        if not k and not v:
            break
    log["answered"]["stat"] += 1
    s.sendall(bin_pkt(0x0b, opaque=61))                             # Version
    bin_read(s, 1)
    log["answered"]["version"] += 1
    s.s.close()


text_session()
binary_session()
json.dump(log, open(sys.argv[2], "w"), indent=1, sort_keys=True)
