#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mkcorpus_db.py — writes the seeds of fuzz_postgres, fuzz_redis and
# fuzz_memcached: whole client and server streams of typical sessions, in the
# harness's input format (pt_fuzz_drive in capture/proto/proto-test.h:
# seed(1) split(2, LE) client-bytes server-bytes). Run from anywhere; rewrites
# tests/fuzz/corpus/{postgres,redis,memcached}/seed-*.
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def seed(name, proto, client, server, s=0):
    d = os.path.join(here, "corpus", proto)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(bytes([s]) + struct.pack("<H", len(client)) + client + server)


# ---- PostgreSQL -------------------------------------------------------------

def pm(t, payload=b""):
    return t + struct.pack(">I", len(payload) + 4) + payload


def cstr(s):
    return s.encode() + b"\0"


def pg_startup():
    params = cstr("user") + cstr("postgres") + cstr("database") + cstr("postgres") + b"\0"
    ssl = struct.pack(">II", 8, 80877103)
    start = struct.pack(">II", 8 + len(params), 0x30000) + params
    return ssl + start, b"N" + pm(b"R", b"\0\0\0\0") + pm(b"S", cstr("a") + cstr("b")) + \
        pm(b"K", b"\0" * 8) + pm(b"Z", b"I")


def pg_row():
    return pm(b"T", b"\0\1" + cstr("c") + b"\0" * 6 + b"\0\0\0\x17\0\4\xff\xff\xff\xff\0\0") + \
        pm(b"D", b"\0\1\0\0\0\x041234") + pm(b"C", cstr("SELECT 1"))


def pg_err(code):
    return pm(b"E", b"S" + cstr("ERROR") + b"C" + cstr(code) + b"M" + cstr("no") + b"\0")


def postgres():
    c0, s0 = pg_startup()
    q = pm(b"Q", cstr("SELECT abalance FROM pgbench_accounts WHERE aid = 42"))
    seed("simple", "postgres", c0 + q + pm(b"Q", cstr("select * from nope")),
         s0 + pg_row() + pm(b"Z", b"I") + pg_err("42P01") + pm(b"Z", b"I"))
    ext = pm(b"P", cstr("") + cstr("UPDATE t SET a = a + $1 WHERE id = $2") + b"\0\0") + \
        pm(b"B", cstr("") + cstr("") + b"\0\0\0\1\0\0\0\1" + b"7" + b"\0\0") + \
        pm(b"D", b"P\0") + pm(b"E", cstr("") + b"\0\0\0\0") + pm(b"S")
    seed("extended", "postgres", c0 + ext + ext,
         s0 + (pm(b"1") + pm(b"2") + pm(b"n") + pm(b"C", cstr("UPDATE 1")) + pm(b"Z", b"T")) * 2,
         1)
    prep = pm(b"P", cstr("P0_1") + cstr("select $1") + b"\0\0") + pm(b"S")
    ex = pm(b"B", cstr("") + cstr("P0_1") + b"\0\0\0\0\0\0") + pm(b"E", cstr("") + b"\0\0\0\0") + \
        pm(b"S")
    seed("pipeline", "postgres", c0 + prep + ex * 3 + pm(b"C", b"SP0_1\0") + pm(b"S"),
         s0 + pm(b"1") + pm(b"Z", b"I") + (pm(b"2") + pg_row() + pm(b"Z", b"I")) +
         pg_err("23505") + pm(b"Z", b"I") + pm(b"2") + pg_row() + pm(b"Z", b"I") +
         pm(b"3") + pm(b"Z", b"I"), 2)
    copy = pm(b"Q", cstr("COPY t FROM STDIN")) + pm(b"d", b"1\tx\n") + pm(b"c") + \
        pm(b"Q", cstr("COPY t TO STDOUT")) + pm(b"F", b"\0\0\4\0\0\0\0\0\0\0")
    seed("copy", "postgres", c0 + copy,
         s0 + pm(b"G", b"\0\0\0") + pm(b"C", cstr("COPY 1")) + pm(b"Z", b"I") +
         pm(b"H", b"\0\0\0") + pm(b"d", b"1\tx\n") + pm(b"c") + pm(b"N", b"SNOTICE\0\0") +
         pm(b"C", cstr("COPY 1")) + pm(b"A", b"\0\0\0\1c\0p\0") + pm(b"Z", b"I") +
         pm(b"V", b"\0\0\0\1x") + pm(b"Z", b"I"), 3)
    seed("midstream", "postgres", q + ext, pg_row() + pm(b"Z", b"I") + pm(b"1") + pm(b"Z", b"I"),
         0x80)
    seed("cancel", "postgres", struct.pack(">IIII", 16, 80877102, 1, 2), b"")
    seed("replication", "postgres", c0 + pm(b"Q", cstr("START_REPLICATION 0/0")),
         s0 + pm(b"W", b"\0\0\0") + pm(b"d", b"w" * 30))


# ---- Redis ------------------------------------------------------------------

def rc(*words):
    out = b"*%d\r\n" % len(words)
    for w in words:
        w = w.encode() if isinstance(w, str) else w
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    return out


def redis():
    seed("basic", "redis", rc("SET", "k", "hello") + rc("GET", "k") + rc("GET", "no") +
         rc("INCR", "k"), b"+OK\r\n$5\r\nhello\r\n$-1\r\n-WRONGTYPE no\r\n")
    seed("pipeline", "redis", (rc("SET", "key:1", "xxx") + rc("GET", "key:1")) * 8,
         b"+OK\r\n$3\r\nxxx\r\n" * 8, 1)
    seed("multi", "redis", rc("MULTI") + rc("SET", "a", "1") + rc("LRANGE", "l", "0", "-1") +
         rc("EXEC") + b"PING\r\n\r\nconfig get save\r\n",
         b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n*1\r\n$1\r\na\r\n+PONG\r\n"
         b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n", 2)
    seed("resp3", "redis", rc("HELLO", "3") + rc("HGETALL", "h") + rc("GET", "k") +
         rc("SUBSCRIBE", "c") + rc("PING"),
         b"%1\r\n$5\r\nproto\r\n:3\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nh\r\n"
         b"%1\r\n$1\r\nf\r\n,1.5\r\n|1\r\n+ttl\r\n:1\r\n_\r\n"
         b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n+PONG\r\n", 3)
    seed("reply", "redis", rc("CLIENT", "REPLY", "OFF") + rc("SET", "a", "1") +
         rc("CLIENT", "REPLY", "ON") + rc("MONITOR"), b"+OK\r\n+OK\r\n+123 \"GET\"\r\n")
    seed("midstream", "redis", b"ue\r\n" + rc("GET", "k"), b"c\r\n$1\r\nv\r\n", 0x80)


# ---- memcached ----------------------------------------------------------------

def mb(magic, op, key=b"", extras=b"", val=b"", status=0, opaque=0):
    body = extras + key + val
    return struct.pack(">BBHBBHIIQ", magic, op, len(key), len(extras), 0, status, len(body),
                       opaque, 0) + body


def memcached():
    seed("text", "memcached",
         b"set k 0 0 5\r\nhello\r\nget k\r\nget a b c\r\ndelete x noreply\r\nincr n 1\r\n"
         b"stats\r\nbogus\r\n",
         b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\nVALUE a 0 1\r\nx\r\nEND\r\n2\r\n"
         b"STAT pid 1\r\nEND\r\nERROR\r\n")
    seed("meta", "memcached",
         b"ms k 2 T0\r\nhi\r\nmg k v k q\r\nmg miss v q Oa\r\nmn\r\nmd k q\r\nmn\r\n",
         b"HD\r\nVA 2 kk\r\nhi\r\nMN\r\nMN\r\n", 1)
    seed("binary", "memcached",
         mb(0x80, 1, b"k", b"\0" * 8, b"hello", opaque=1) + mb(0x80, 9, b"miss", opaque=2) +
         mb(0x80, 0x0d, b"k", opaque=3) + mb(0x80, 0x0a, opaque=4) + mb(0x80, 0x10, opaque=5),
         mb(0x81, 1, opaque=1) + mb(0x81, 0x0d, b"k", b"\0" * 4, b"hello", opaque=3) +
         mb(0x81, 0x0a, opaque=4) + mb(0x81, 0x10, b"pid", val=b"1", opaque=5) +
         mb(0x81, 0x10, opaque=5), 2)
    seed("midstream", "memcached", b"lue\r\nget k\r\nwatch\r\n", b"END\r\nEND\r\n", 0x80)


if __name__ == "__main__":
    postgres()
    redis()
    memcached()
