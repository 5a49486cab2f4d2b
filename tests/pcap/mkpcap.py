#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mkpcap.py — writes small synthetic captures for the capture tests and the
# benchmark: HTTP and MySQL conversations with exact, known timings, framed
# in any of the link types tbneck decodes, plus deliberately broken files.
import random
import struct
import sys

LINK = {"en10mb": 1, "vlan": 1, "qinq": 1, "sll": 113, "sll2": 276, "null": 0, "loop": 108,
        "raw": 101, "ipv4": 228, "ipv6": 229}


class Writer:
    """pcap with nanosecond timestamps (magic a1b23c4d)."""

    def __init__(self, path, link="en10mb", snaplen=262144, linktype=None):
        self.f = open(path, "wb")
        self.link = link
        self.snaplen = snaplen
        lt = LINK[link] if linktype is None else linktype
        self.f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, lt))

    def record(self, ts_ns, frame, wirelen=None):
        cap = frame[: self.snaplen]
        wl = len(frame) if wirelen is None else wirelen
        self.f.write(struct.pack("<IIII", ts_ns // 10**9, ts_ns % 10**9, len(cap), wl))
        self.f.write(cap)

    def close(self):
        self.f.close()


def ip4(s):
    return bytes(int(x) for x in s.split("."))


def tcp_ip(src, sport, dst, dport, seq, ack, flags, payload=b""):
    """IPv4 (4-byte addresses) or IPv6 (16-byte) packet with a TCP segment."""
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4,
                      flags, 65535, 0, 0) + payload
    if len(src) == 4:
        return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                           src, dst) + tcp
    return struct.pack(">IHBB16s16s", 0x60000000, len(tcp), 6, 64, src, dst) + tcp


def frame(link, ip):
    v6 = ip[0] >> 4 == 6
    et = b"\x86\xdd" if v6 else b"\x08\x00"
    macs = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    if link == "en10mb":
        return macs + et + ip
    if link == "vlan":
        return macs + b"\x81\x00\x00\x64" + et + ip
    if link == "qinq":
        return macs + b"\x88\xa8\x00\x0a\x81\x00\x00\x64" + et + ip
    if link == "sll":
        return b"\x00\x00\x00\x01\x00\x06" + b"\x00" * 8 + et + ip
    if link == "sll2":
        return et + b"\x00\x00" + b"\x00\x00\x00\x02\x00\x01\x00\x06" + b"\x00" * 8 + ip
    if link == "null":
        return struct.pack("<I", 10 if v6 else 2) + ip
    if link == "loop":
        return struct.pack(">I", 30 if v6 else 2) + ip
    return ip


class Conn:
    """One TCP connection; send() writes a segment and advances the sequence."""

    def __init__(self, w, cli, cport, srv, sport, isn_c=1000, isn_s=5000):
        self.w, self.c, self.cp, self.s, self.sp = w, cli, cport, srv, sport
        self.cn, self.sn = isn_c, isn_s

    def pkt(self, ts, from_client, flags, payload=b"", seq=None):
        if from_client:
            ip = tcp_ip(self.c, self.cp, self.s, self.sp, self.cn if seq is None else seq,
                        self.sn, flags, payload)
        else:
            ip = tcp_ip(self.s, self.sp, self.c, self.cp, self.sn if seq is None else seq,
                        self.cn, flags, payload)
        self.w.record(ts, frame(self.w.link, ip))

    def handshake(self, ts):
        self.pkt(ts, True, 0x02)
        self.cn += 1
        self.pkt(ts + 1000, False, 0x12)
        self.sn += 1
        self.pkt(ts + 2000, True, 0x10)

    def send(self, ts, from_client, payload, skip=False):
        """skip=True: the segment is lost at the tap (not written)."""
        if not skip:
            self.pkt(ts, from_client, 0x18, payload)
        if from_client:
            self.cn += len(payload)
        else:
            self.sn += len(payload)

    def ack(self, ts, from_client):
        self.pkt(ts, from_client, 0x10)

    def fin(self, ts):
        self.pkt(ts, True, 0x11)
        self.cn += 1
        self.pkt(ts + 1000, False, 0x11)
        self.sn += 1
        self.pkt(ts + 2000, True, 0x10)


def http_req(path):
    return ("GET %s HTTP/1.1\r\nHost: shop\r\nUser-Agent: t\r\n\r\n" % path).encode()


def http_resp(n):
    body = b"x" * n
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + body


def mysql_query(sql):
    p = b"\x03" + sql.encode()
    return struct.pack("<I", len(p))[:3] + b"\x00" + p


MYSQL_OK = b"\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00"

T0 = 1700000000 * 10**9


def simple(path, link="en10mb", n=3, snaplen=262144, v6=False, linktype=None):
    """n HTTP exchanges on one keep-alive connection: request at T0+i*100ms+10ms,
    response at +20ms, FIN after. Prints the expected export lines (arrival,
    departure) on stdout."""
    w = Writer(path, link, snaplen, linktype)
    if v6:
        cli = bytes.fromhex("20010db8000000000000000000000009")
        srv = bytes.fromhex("20010db8000000000000000000000001")
    else:
        cli, srv = ip4("10.0.0.9"), ip4("10.0.0.1")
    c = Conn(w, cli, 51000, srv, 80)
    c.handshake(T0)
    for i in range(n):
        t = T0 + i * 100_000_000
        c.send(t + 10_000_000, True, http_req("/item/%d" % (i + 1)))
        c.send(t + 20_000_000, False, http_resp(10 + i))
        print("%d,%d" % (t + 10_000_000, t + 20_000_000))
    c.fin(T0 + n * 100_000_000)
    w.close()


def split(src, path_a, path_b, port=80):
    """Copies the records of a pcap written by this script into two files:
    packets from the server (source port `port`) into path_b, the rest into
    path_a. Only a time-ordered merge of the two pairs requests again."""
    data = open(src, "rb").read()
    hdr, off = data[:24], 24
    a, b = open(path_a, "wb"), open(path_b, "wb")
    a.write(hdr)
    b.write(hdr)
    lt = struct.unpack("<I", hdr[20:24])[0]
    l3 = {1: 14, 113: 16, 276: 20, 0: 4, 108: 4}.get(lt, 0)
    while off < len(data):
        rh = data[off:off + 16]
        cap = struct.unpack("<IIII", rh)[2]
        rec = data[off + 16:off + 16 + cap]
        ihl = (rec[l3] & 15) * 4 if rec[l3] >> 4 == 4 else 40
        sport = struct.unpack(">H", rec[l3 + ihl:l3 + ihl + 2])[0]
        (b if sport == port else a).write(rh + rec)
        off += 16 + cap
    a.close()
    b.close()


def bench(path, flows=200, exchanges=200, seed=7):
    """A mix for the benchmark: HTTP on :80 and :8080, MySQL on :3306 (picked up
    mid-stream, as pooled connections are), interleaved in time."""
    rnd = random.Random(seed)
    w = Writer(path)
    conns = []
    for i in range(flows):
        kind = i % 3
        cli = ip4("10.1.%d.%d" % (i // 250, i % 250 + 1))
        if kind == 0:
            c = Conn(w, cli, 20000 + i, ip4("10.0.0.1"), 80, rnd.randrange(2**32),
                     rnd.randrange(2**32))
        elif kind == 1:
            c = Conn(w, cli, 20000 + i, ip4("10.0.0.2"), 8080, rnd.randrange(2**32),
                     rnd.randrange(2**32))
        else:
            c = Conn(w, cli, 20000 + i, ip4("10.0.0.3"), 3306, rnd.randrange(2**32),
                     rnd.randrange(2**32))
        conns.append((kind, c))
    events = []
    for idx, (kind, c) in enumerate(conns):
        t = T0 + rnd.randrange(10_000_000)
        for j in range(exchanges):
            events.append((t, idx, j))
            t += 2_000_000 + rnd.randrange(8_000_000)
    events.sort()
    first = set()
    for t, idx, j in events:
        kind, c = conns[idx]
        if kind != 2 and idx not in first:
            c.handshake(t - 10_000)
            first.add(idx)
        if kind == 2:
            c.send(t, True, mysql_query("SELECT name, price FROM items WHERE id = %d" % j))
            c.send(t + 300_000, False, MYSQL_OK)
        else:
            c.send(t, True, http_req("/item/%d?x=%d" % (j, idx)))
            c.send(t + 500_000, False, http_resp(200 + j % 300))
        c.ack(t + 510_000, True)
    w.close()


def pg_msg(t, payload=b""):
    return t + struct.pack(">I", len(payload) + 4) + payload


def redis_cmd(*words):
    out = b"*%d\r\n" % len(words)
    for w in words:
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    return out


def dbbench(path, proto, flows=100, exchanges=1000, seed=7):
    """One protocol for its benchmark figure, on its well-known port, every
    connection with its handshake. postgres: pgbench-like extended batches
    (Parse/Bind/Describe/Execute/Sync, answered 1/2/T/D/C/Z) alternating with
    simple queries; redis: SET and GET one at a time (redis-benchmark);
    redis-p16: pipelines of 16 SET/GET (redis-benchmark -P 16); memcached: a
    get hit, a set with its data block, a multi-get of 4 keys."""
    rnd = random.Random(seed)
    w = Writer(path)
    port = {"postgres": 5432, "redis": 6379, "redis-p16": 6379, "memcached": 11211}[proto]
    conns = []
    for i in range(flows):
        cli = ip4("10.2.%d.%d" % (i // 250, i % 250 + 1))
        conns.append(Conn(w, cli, 30000 + i, ip4("10.0.0.5"), port, rnd.randrange(2**32),
                          rnd.randrange(2**32)))
    events = []
    for idx in range(flows):
        t = T0 + rnd.randrange(10_000_000)
        for j in range(exchanges):
            events.append((t, idx, j))
            t += 2_000_000 + rnd.randrange(8_000_000)
    events.sort()
    started = set()
    row = pg_msg(b"T", b"\0\1abalance\0" + b"\0" * 6 + b"\0\0\0\x17\0\4\xff\xff\xff\xff\0\0") + \
        pg_msg(b"D", b"\0\1\0\0\0\x04" + b"1234")
    for t, idx, j in events:
        c = conns[idx]
        if idx not in started:
            started.add(idx)
            c.handshake(t - 20_000)
            if proto == "postgres":
                params = b"user\0postgres\0database\0bench\0\0"
                c.send(t - 15_000, True, struct.pack(">II", 8 + len(params), 0x30000) + params)
                c.send(t - 12_000, False, pg_msg(b"R", b"\0\0\0\0") +
                       pg_msg(b"S", b"server_version\0" + b"15.18\0") +
                       pg_msg(b"K", b"\0" * 8) + pg_msg(b"Z", b"I"))
        if proto == "postgres":
            if j % 2:
                q = b"SELECT abalance FROM pgbench_accounts WHERE aid = %d" % (j * 7919 % 100000)
                c.send(t, True, pg_msg(b"Q", q + b"\0"))
                c.send(t + 300_000, False, row + pg_msg(b"C", b"SELECT 1\0") + pg_msg(b"Z", b"I"))
            else:
                sql = b"UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
                c.send(t, True, pg_msg(b"P", b"\0" + sql + b"\0\0\0") +
                       pg_msg(b"B", b"\0\0\0\0\0\2\0\0\0\x02-5\0\0\0\x0442424\0\0") +
                       pg_msg(b"D", b"P\0") + pg_msg(b"E", b"\0\0\0\0\0") + pg_msg(b"S"))
                c.send(t + 300_000, False, pg_msg(b"1") + pg_msg(b"2") + pg_msg(b"n") +
                       pg_msg(b"C", b"UPDATE 1\0") + pg_msg(b"Z", b"T"))
        elif proto == "redis-p16":
            key = b"key:%012d" % (j * 7919 % 100000)
            c.send(t, True, b"".join(redis_cmd(b"SET", key, b"xxx") if k % 2 else
                                     redis_cmd(b"GET", key) for k in range(16)))
            c.send(t + 300_000, False, b"".join(b"+OK\r\n" if k % 2 else b"$3\r\nxxx\r\n"
                                                for k in range(16)))
        elif proto == "redis":
            key = b"key:%012d" % (j * 7919 % 100000)
            if j % 2:
                c.send(t, True, redis_cmd(b"SET", key, b"xxx"))
                c.send(t + 300_000, False, b"+OK\r\n")
            else:
                c.send(t, True, redis_cmd(b"GET", key))
                c.send(t + 300_000, False, b"$3\r\nxxx\r\n")
        else:
            k = j % 3
            if k == 0:
                c.send(t, True, b"get key:%d\r\n" % j)
                c.send(t + 300_000, False, b"VALUE key:%d 0 32\r\n%s\r\nEND\r\n" % (j, b"v" * 32))
            elif k == 1:
                c.send(t, True, b"set key:%d 0 0 32\r\n%s\r\n" % (j, b"v" * 32))
                c.send(t + 300_000, False, b"STORED\r\n")
            else:
                c.send(t, True, b"get a:%d b:%d c:%d d:%d\r\n" % (j, j, j, j))
                c.send(t + 300_000, False, b"VALUE a:%d 0 4\r\nxxxx\r\nEND\r\n" % j)
        c.ack(t + 310_000, True)
    w.close()


def synflood(path, n):
    """n half-open connections: one SYN each from distinct client endpoints."""
    w = Writer(path, "raw")
    for i in range(n):
        ip = tcp_ip(ip4("172.%d.%d.%d" % (16 + (i >> 16), (i >> 8) & 255, i & 255)),
                    1024 + i % 60000, ip4("10.0.0.1"), 80, i * 7919, 0, 0x02)
        w.record(T0 + i * 1000, ip)
    w.close()


def garbage(path, n=2000, seed=3):
    """Valid pcap framing, random bytes inside the records (some with an
    Ethernet+IPv4+TCP prefix so decoding gets deep)."""
    rnd = random.Random(seed)
    w = Writer(path)
    for i in range(n):
        ln = rnd.randrange(0, 300)
        body = bytes(rnd.randrange(256) for _ in range(ln))
        if i % 2 and ln > 60:
            hdr = frame("en10mb", tcp_ip(ip4("10.0.0.9"), 4000 + i % 7, ip4("10.0.0.1"), 80,
                                          rnd.randrange(2**32), rnd.randrange(2**32),
                                          rnd.randrange(256), b""))
            body = hdr[:14 + rnd.randrange(40)] + body
        w.record(T0 + i * 1000, body, len(body) + rnd.randrange(3))
    w.close()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "simple":
        link = sys.argv[3] if len(sys.argv) > 3 else "en10mb"
        simple(sys.argv[2], link, v6=(len(sys.argv) > 4 and sys.argv[4] == "v6"))
    elif cmd == "linktype":
        simple(sys.argv[2], "en10mb", linktype=int(sys.argv[3]))
    elif cmd == "snap":
        simple(sys.argv[2], "en10mb", snaplen=int(sys.argv[3]))
    elif cmd == "split":
        split(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "bench":
        bench(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "dbbench":
        dbbench(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "synflood":
        synflood(sys.argv[2], int(sys.argv[3]))
    elif cmd == "garbage":
        garbage(sys.argv[2])
    else:
        sys.exit("mkpcap: unknown command " + cmd)
