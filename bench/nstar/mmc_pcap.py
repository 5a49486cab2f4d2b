#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mmc_pcap.py — a second, independent traffic generator for the N* sweep: a
# closed M/M/c (or M/D/c) HTTP server written as a pcap, sharing no code and
# no model with tbneck-sim (which simulates processor sharing in C; this is
# first-come-first-served on c servers, in Python).
#
#   mmc_pcap.py --cores C --users N --think MS --service MS [--const]
#               [--burst ON_MS,OFF_MS,FACTOR] [--speeds S1,S2,... --switch A_MS,B_MS]
#               [--duration S] --out PREFIX --seed N
#
# N users think (exponential, mean --think ms; during a burst the mean is
# multiplied by FACTOR, bursts and calms exponential with means ON and OFF),
# then send one request each to one server 10.9.0.1:8080 and wait for the
# answer. The server has C identical workers taking requests first come,
# first served; a request needs an exponential amount of work (mean
# --service ms at speed 1; --const: exactly that), done at the CPU's current
# speed: with --speeds the speed switches among the given values, each time
# to another one at random, after uniform(A, B) ms.
#
# On the wire: Ethernet/IPv4/TCP with correct checksums, one persistent
# connection per user (three-way handshake at its first request), the
# request `GET /item/ID HTTP/1.1` in one segment at its arrival, the answer
# (200 with a small body) in one segment at its departure, the client's ACK
# 50 us later. Nanosecond pcap (magic a1b23c4d).
#
# Truth, in tbneck-sim's formats so bench/nstar/sweep.py reads both:
#   PREFIX.expected.csv  tier,server,cores,expected_n_star  (N* = C: a request
#                        in the system is on a worker or queued for one)
#   PREFIX.speed.csv     server,t_ns,speed  (the start, then every change)
#   PREFIX.deep.csv      server,start_ns,end_ns  the intervals during which
#                        at least 2C requests were in the server (every
#                        worker busy and as many queued): when it ran at its
#                        capacity, the only time a speed's plateau can show
# Exit status 0, 2 on a usage error.
import argparse
import bisect
import heapq
import random
import struct
import sys

SERVER_IP = (10, 9, 0, 1)
PORT = 8080
T0 = 1_700_000_000 * 1_000_000_000


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src, sport, dst, dport, seq, ack, flags, payload=b""):
    """Ethernet + IPv4 + TCP (20-byte header) around payload."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 65535, 0, 0)
    pseudo = struct.pack("!4B4BBBH", *src, *dst, 0, 6, len(tcp) + len(payload))
    c = csum(pseudo + tcp + payload)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4B4B", 0x45, 0, total, 0, 0x4000, 64, 6, 0, *src, *dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    mac_s = bytes([2, 0]) + bytes(src)
    mac_d = bytes([2, 0]) + bytes(dst)
    return mac_d + mac_s + b"\x08\x00" + ip + tcp + payload


SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01


class Conn:
    def __init__(self, user, rng):
        self.ip = (10, 9, 1 + user // 250, 1 + user % 250)
        self.port = 40000 + user
        self.cseq = rng.getrandbits(32)
        self.sseq = rng.getrandbits(32)
        self.open = False


class Speed:
    """Piecewise-constant CPU speed and the work it has done by time t."""

    def __init__(self, speeds, switch, horizon, rng):
        self.t = [0.0]
        self.v = [speeds[-1] if speeds else 1.0]
        if speeds and len(speeds) > 1:
            cur = len(speeds) - 1
            t = 0.0
            while t < horizon:
                t += rng.uniform(*switch)
                cur = rng.choice([i for i in range(len(speeds)) if i != cur])
                self.t.append(t)
                self.v.append(speeds[cur])
        self.cum = [0.0]
        for i in range(1, len(self.t)):
            self.cum.append(self.cum[-1] + self.v[i - 1] * (self.t[i] - self.t[i - 1]))

    def work(self, t):
        i = max(0, bisect.bisect_right(self.t, t) - 1)
        return self.cum[i] + self.v[i] * (t - self.t[i])

    def finish(self, start, w):
        """The time at which `w` work started at `start` is done."""
        target = self.work(start) + w
        lo = 0
        hi = len(self.t) - 1
        while lo < hi:  # last segment whose cumulative work at its start <= target
            mid = (lo + hi + 1) // 2
            if self.cum[mid] <= target:
                lo = mid
            else:
                hi = mid - 1
        return self.t[lo] + (target - self.cum[lo]) / self.v[lo]


def main():
    ap = argparse.ArgumentParser(description="closed M/M/c HTTP server as a pcap")
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--users", type=int, required=True)
    ap.add_argument("--think", type=float, required=True, help="mean think time, ms")
    ap.add_argument("--service", type=float, required=True, help="mean work, ms at speed 1")
    ap.add_argument("--const", action="store_true")
    ap.add_argument("--burst", default=None, help="ON_MS,OFF_MS,FACTOR")
    ap.add_argument("--speeds", default=None)
    ap.add_argument("--switch", default="600,6000", help="A_MS,B_MS")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.cores < 1 or a.users < 1 or a.think <= 0 or a.service <= 0 or a.duration <= 0:
        print("mmc_pcap.py: cores, users, think, service and duration must be positive",
              file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    horizon = a.duration
    speeds = [float(x) for x in a.speeds.split(",")] if a.speeds else []
    sw = tuple(float(x) / 1000 for x in a.switch.split(","))
    cpu = Speed(speeds, sw, horizon + 5, rng)
    bursts = []  # (start, end) of bursts
    factor = 1.0
    if a.burst:
        on, off, factor = (float(x) for x in a.burst.split(","))
        t = rng.expovariate(1000 / off)
        while t < horizon:
            e = t + rng.expovariate(1000 / on)
            bursts.append((t, e))
            t = e + rng.expovariate(1000 / off)

    def think(t):
        m = a.think / 1000
        if any(s <= t < e for s, e in bursts):
            m *= factor
        return rng.expovariate(1 / m)

    def work():
        return a.service / 1000 if a.const else rng.expovariate(1000 / a.service)

    conns = [Conn(u, rng) for u in range(a.users)]
    ev = []  # (time, seq, kind, user)
    seq = 0
    for u in range(a.users):
        heapq.heappush(ev, (rng.uniform(0, 1.0) + think(0), seq, "arrive", u))
        seq += 1
    free = a.cores
    queue = []
    deep = []  # [start, end) with >= 2C requests in the server
    deep_from = None

    def inside_changed(t):
        nonlocal deep_from
        n = a.cores - free + len(queue)
        if n >= 2 * a.cores and deep_from is None:
            deep_from = t
        elif n < 2 * a.cores and deep_from is not None:
            deep.append((deep_from, t))
            deep_from = None

    pkts = []
    ids = rng.randrange(1, 100000)
    while ev:
        t, _, kind, u = heapq.heappop(ev)
        c = conns[u]
        if kind == "arrive":
            if t >= horizon:
                continue
            ns = T0 + int(t * 1e9)
            if not c.open:  # handshake just before the first request
                pkts.append((ns - 300_000, frame(c.ip, c.port, SERVER_IP, PORT, c.cseq, 0, SYN)))
                c.cseq += 1
                pkts.append((ns - 200_000, frame(SERVER_IP, PORT, c.ip, c.port, c.sseq, c.cseq,
                                                 SYN | ACK)))
                c.sseq += 1
                pkts.append((ns - 100_000, frame(c.ip, c.port, SERVER_IP, PORT, c.cseq, c.sseq,
                                                 ACK)))
                c.open = True
            ids = ids * 48271 % 2147483647
            req = b"GET /item/%d HTTP/1.1\r\nHost: svc.test:8080\r\n\r\n" % (ids % 100000)
            pkts.append((ns, frame(c.ip, c.port, SERVER_IP, PORT, c.cseq, c.sseq, PSH | ACK,
                                   req)))
            c.cseq += len(req)
            if free:
                free -= 1
                heapq.heappush(ev, (cpu.finish(t, work()), seq, "depart", u))
            else:
                queue.append(u)
            inside_changed(t)
            seq += 1
        else:  # depart
            ns = T0 + int(t * 1e9)
            body = b"x" * 200
            resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            pkts.append((ns, frame(SERVER_IP, PORT, c.ip, c.port, c.sseq, c.cseq, PSH | ACK,
                                   resp)))
            c.sseq += len(resp)
            pkts.append((ns + 50_000, frame(c.ip, c.port, SERVER_IP, PORT, c.cseq, c.sseq, ACK)))
            if queue:
                nxt = queue.pop(0)
                heapq.heappush(ev, (cpu.finish(t, work()), seq, "depart", nxt))
                seq += 1
            else:
                free += 1
            inside_changed(t)
            heapq.heappush(ev, (t + think(t), seq, "arrive", u))
            seq += 1
    pkts.sort(key=lambda p: p[0])
    with open(a.out + ".pcap", "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ns, fr in pkts:
            f.write(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(fr),
                                len(fr)))
            f.write(fr)
    server = "%d.%d.%d.%d:%d" % (*SERVER_IP, PORT)
    with open(a.out + ".expected.csv", "w") as f:
        f.write("tier,server,cores,expected_n_star\n")
        f.write("http-8080,%s,%d,%.2f\nhttp-8080,*,%d,%.2f\n" % (server, a.cores, a.cores,
                                                               a.cores, a.cores))
    with open(a.out + ".speed.csv", "w") as f:
        f.write("server,t_ns,speed\n")
        for t, v in zip(cpu.t, cpu.v):
            if t <= horizon:
                f.write("%s,%d,%g\n" % (server, T0 + int(t * 1e9), v))
    if deep_from is not None:
        deep.append((deep_from, horizon))
    with open(a.out + ".deep.csv", "w") as f:
        f.write("server,start_ns,end_ns\n")
        for s0, e0 in deep:
            if s0 < horizon:
                f.write("%s,%d,%d\n" % (server, T0 + int(s0 * 1e9), T0 + int(min(e0, horizon) * 1e9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
