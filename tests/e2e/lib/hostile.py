#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hostile.py — hostile HTTP clients against a tbneck dashboard (issue 13).

Runs, for --seconds, a mix of clients at once: pipelined requests whose last
one says "Connection: close", clients that send a complete request and
vanish (FIN or RST, also from the event stream), bursts of --burst
simultaneous connections each with one complete request, slowloris heads,
garbage bytes, foreign Host names. It checks what a client can check:

- every complete request on a connection the client kept open is answered
  with a status line (2xx/4xx/503), in order, before the server closes;
- garbage, bad versions and foreign Hosts get 4xx/5xx, never 200;
- a slowloris head gets 408 (or, at worst, a close) and the server keeps
  serving meanwhile.

A request written on a fresh connection the client itself left silent for
LATE_S or more (its own event loop busy opening a burst) that gets no byte
back is counted "late", not sent: the server reclaims the slots of silent
newcomers after 1 s when others wait (web/http-int.h), before the request
arrives. Prints one JSON object of counts; exits 1 if any request went unanswered or
the server stopped answering (a probe request fails), 2 on a usage error.
The oracle is the wire as this client sees it, not tbneck's own counters.
"""
import argparse
import asyncio
import json
import random
import socket
import struct
import sys
import time

STATIC = ["/", "/app.js", "/style.css", "/index.html", "/nope.css"]


LATE_S = 0.9  # a little under the server's 1 s grace for silent newcomers


class Stats:
    def __init__(self):
        self.late = 0          # requests written after the client sat silent >= LATE_S
        self.sent = 0          # complete requests on connections we kept open
        self.answered = 0
        self.status = {}
        self.unanswered = []   # (kind, detail)
        self.bad = []          # answers that break a rule
        self.vanished = 0
        self.garbage = 0
        self.slowloris = {"408": 0, "closed": 0}
        self.bursts = 0
        self.streams = 0
        self.probes = 0

    def answer(self, st):
        self.answered += 1
        self.status[str(st)] = self.status.get(str(st), 0) + 1


async def read_response(reader, timeout):
    """One response: (status, headers dict, body) or None on EOF/timeout."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError,
            asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        return None
    hdr = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            hdr[k.strip().lower()] = v.strip()
    n = int(hdr.get("content-length", "0"))
    if hdr.get("content-type", "").startswith("text/event-stream"):
        return int(parts[1]), hdr, b""
    try:
        body = await asyncio.wait_for(reader.readexactly(n), timeout)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
        return None
    return int(parts[1]), hdr, body


def req(path, host, close=False, method="GET"):
    h = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
    if close:
        h += "Connection: close\r\n"
    return (h + "\r\n").encode()


class Hostile:
    def __init__(self, a):
        self.host, self.port = a.addr.rsplit(":", 1)
        self.port = int(self.port)
        self.hosthdr = f"127.0.0.1:{self.port}"
        self.a = a
        self.s = Stats()
        self.opened = {}  # id(writer) -> when its connection was opened
        self.deadline = time.monotonic() + a.seconds
        self.rng = random.Random(a.seed)
        self.api = [f"/api/tiers", "/api/health"]
        if a.tier:
            t = a.tier
            self.api += [f"/api/windows?tier={t}&width={w}" for w in ("50ms", "100ms", "1s")]
            self.api += [f"/api/analysis?tier={t}", f"/api/episodes?tier={t}&width=100ms",
                         f"/api/scatter?tier={t}&width=1s", f"/api/windows?tier=nosuch"]

    def left(self):
        return self.deadline - time.monotonic()

    async def open(self):
        # From before the connect: the kernel may complete it (and the server
        # accept it) long before this busy event loop gets back to us.
        t0 = time.monotonic()
        r, w = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 30)
        self.opened[id(w)] = t0
        return r, w

    def late(self, w):
        """Whether this connection sat silent long enough to be reclaimed."""
        return time.monotonic() - self.opened.pop(id(w), time.monotonic()) >= LATE_S

    def pick(self):
        return self.rng.choice(self.api + STATIC)

    async def expect(self, reader, n, kind, detail, timeout=30, late=False):
        got = 0
        for _ in range(n):
            r = await read_response(reader, timeout)
            if r is None:
                break
            got += 1
            self.s.answer(r[0])
            if r[0] not in (200, 404, 400, 503, 405):
                self.s.bad.append((kind, detail, r[0]))
        if got == 0 and late:
            self.s.sent -= n
            self.s.late += n
        elif got < n:
            self.s.unanswered.append((kind, detail, n - got))
        return got

    async def pipeline(self):
        k = self.rng.randint(2, 8)
        paths = [self.pick() for _ in range(k)]
        data = b"".join(req(p, self.hosthdr, close=(i == k - 1)) for i, p in enumerate(paths))
        r, w = await self.open()
        try:
            late = self.late(w)
            w.write(data)
            await w.drain()
            self.s.sent += k
            got = await self.expect(r, k, "pipeline", paths, late=late)
            if got == 0 and late:
                return
            # After "Connection: close" the server ends the connection.
            try:
                rest = await asyncio.wait_for(r.read(1), 10)
                if rest:
                    self.s.bad.append(("pipeline", "bytes after the last answer", 0))
            except (asyncio.TimeoutError, ConnectionError):
                self.s.bad.append(("pipeline", "no close after Connection: close", 0))
        finally:
            w.close()

    async def vanish(self):
        r, w = await self.open()
        path = self.rng.choice(self.api + ["/app.js", "/api/stream"])
        w.write(req(path, self.hosthdr) * self.rng.randint(1, 3))
        await w.drain()
        if self.rng.random() < 0.5:
            await asyncio.sleep(self.rng.random() * 0.05)
            try:
                await r.read(self.rng.randint(1, 300))
            except ConnectionError:
                pass
        sock = w.get_extra_info("socket")
        if self.rng.random() < 0.5 and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.close()
        self.s.vanished += 1

    async def garbage(self):
        r, w = await self.open()
        kinds = [
            bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 400))),
            b"GET /api/tiers HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
            b"GET /api/tiers HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n",
            b"GET /api/tiers HTTP/1.1\nHost: 127.0.0.1\n\n",
            b"GET /api/tiers HTTP/1.1\r\nHost: attacker.example\r\n\r\n",
            b"GET /api/tiers HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(40),
            b"GET /nonexist HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + bytes(range(256)) * 4,
        ]
        i = self.rng.randrange(len(kinds))
        data = kinds[i]
        late = self.late(w)
        w.write(data)
        await w.drain()
        self.s.garbage += 1
        if i == 0:
            w.write_eof() if w.can_write_eof() else None
        res = await read_response(r, 15)
        if res is None and late and i in (1, 2, 3, 4, 5, 7):
            self.s.late += 1
        elif i in (1, 2, 3, 4, 5):
            want = {1: 505, 2: 400, 3: 400, 4: 403, 5: 501}[i]
            self.s.sent += 1
            if res is None:
                self.s.unanswered.append(("garbage", data[:40].decode("latin-1"), 1))
            else:
                self.s.answer(res[0])
                if res[0] != want:
                    self.s.bad.append(("garbage", data[:40].decode("latin-1"), res[0]))
        elif i == 7:
            # A complete request, then garbage: the request gets its 404,
            # the garbage its 400.
            self.s.sent += 1
            if res is None or res[0] != 404:
                self.s.unanswered.append(("garbage", "404 before garbage", 1))
            else:
                self.s.answer(res[0])
        elif res is not None and res[0] == 200:
            self.s.bad.append(("garbage", "random bytes answered 200", 200))
        w.close()

    async def slowloris(self):
        r, w = await self.open()
        part = b"GET /api/tiers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: "
        w.write(part)
        try:
            await w.drain()
            end = time.monotonic() + min(15.0, max(1.0, self.left()))
            while time.monotonic() < end:
                w.write(b"a")
                await w.drain()
                try:
                    res = await asyncio.wait_for(read_response(r, 1), 0.5)
                except asyncio.TimeoutError:
                    res = None
                if res is not None:
                    if res[0] == 408:
                        self.s.slowloris["408"] += 1
                    else:
                        self.s.bad.append(("slowloris", "answered", res[0]))
                    return
                if r.at_eof():
                    self.s.slowloris["closed"] += 1
                    return
        except ConnectionError:
            self.s.slowloris["closed"] += 1
        finally:
            w.close()

    async def stream(self):
        r, w = await self.open()
        late = self.late(w)
        w.write(req("/api/stream", self.hosthdr))
        await w.drain()
        res = await read_response(r, 15)
        if res is None and late:
            self.s.late += 1
            self.s.sent -= 1  # counted below
        elif res is None or res[0] not in (200, 503):
            self.s.unanswered.append(("stream", "no stream head", 1))
        else:
            self.s.answer(res[0])
        self.s.sent += 1
        self.s.streams += 1
        try:
            await asyncio.wait_for(r.read(self.rng.randint(1, 64)), self.rng.random() * 3)
        except (asyncio.TimeoutError, ConnectionError):
            pass
        w.close()

    async def burst_one(self, i, results):
        try:
            r, w = await self.open()
        except (OSError, asyncio.TimeoutError) as e:
            results.append(("connect", str(e)))
            return
        try:
            path = self.api[i % len(self.api)] if i % 3 else "/app.js"
            late = self.late(w)
            w.write(req(path, self.hosthdr, close=bool(i % 2)))
            await w.drain()
            res = await read_response(r, 60)
            results.append(("ok", res[0]) if res else ("late", path) if late else
                           ("unanswered", path))
        except ConnectionError as e:
            results.append(("unanswered", str(e)))
        finally:
            w.close()

    async def burst(self):
        results = []
        await asyncio.gather(*(self.burst_one(i, results) for i in range(self.a.burst)))
        self.s.bursts += 1
        for kind, v in results:
            if kind == "late":
                self.s.late += 1
                continue
            self.s.sent += 1
            if kind == "ok":
                self.s.answer(v)
            else:
                self.s.unanswered.append(("burst", str(v), 1))

    async def probe(self):
        """The server still answers a plain request promptly."""
        r, w = await self.open()
        late = self.late(w)
        w.write(req("/api/tiers", self.hosthdr, close=True))
        await w.drain()
        res = await read_response(r, 30)
        w.close()
        self.s.probes += 1
        if res is None and late:
            self.s.late += 1
            return
        self.s.sent += 1
        # 503 is an answer too: the server is alive and says it is busy (its
        # database queue is full behind a burst of API requests).
        if res is None or res[0] not in (200, 503):
            self.s.unanswered.append(("probe", "/api/tiers", 1))
        else:
            self.s.answer(res[0])

    async def worker(self, fn, pause):
        while self.left() > 0:
            try:
                await fn()
            except (OSError, asyncio.TimeoutError) as e:
                # Our own connect failing means the server is not accepting.
                self.s.unanswered.append((fn.__name__, f"{type(e).__name__}: {e}", 1))
            await asyncio.sleep(pause * self.rng.random())

    async def bursts(self):
        while self.left() > 0:
            await self.burst()
            await asyncio.sleep(min(self.a.burst_every, max(0, self.left())))

    async def run(self):
        tasks = [self.worker(self.pipeline, 0.05) for _ in range(4)]
        tasks += [self.worker(self.vanish, 0.05) for _ in range(3)]
        tasks += [self.worker(self.garbage, 0.1) for _ in range(2)]
        tasks += [self.worker(self.slowloris, 0.5) for _ in range(self.a.slowloris)]
        tasks += [self.worker(self.stream, 0.3), self.worker(self.probe, 1.0)]
        if self.a.burst:
            tasks.append(self.bursts())
        await asyncio.gather(*tasks)
        try:
            await self.probe()
        except (OSError, asyncio.TimeoutError) as e:
            self.s.unanswered.append(("probe", f"{type(e).__name__}: {e}", 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("addr", help="HOST:PORT of the dashboard")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--burst", type=int, default=1000, help="connections per burst (0: none)")
    ap.add_argument("--burst-every", type=float, default=15)
    ap.add_argument("--slowloris", type=int, default=20, help="slowloris clients at once")
    ap.add_argument("--tier", default="", help="a tier to ask the API about")
    ap.add_argument("--seed", type=int, default=13)
    a = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    h = Hostile(a)
    t0 = time.monotonic()
    asyncio.run(h.run())
    s = h.s
    out = {
        "seconds": round(time.monotonic() - t0, 1), "sent": s.sent, "answered": s.answered,
        "status": s.status, "unanswered": len(s.unanswered), "bad": len(s.bad),
        "vanished": s.vanished, "garbage": s.garbage, "slowloris": s.slowloris,
        "bursts": s.bursts, "streams": s.streams, "probes": s.probes, "late": s.late,
        "unanswered_examples": s.unanswered[:5], "bad_examples": s.bad[:5],
    }
    print(json.dumps(out))
    sys.exit(1 if s.unanswered or s.bad or s.answered != s.sent else 0)


if __name__ == "__main__":
    main()
