#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sim_compare.py — compares tbneck's exported requests with tbneck-sim's truth.

Usage: sim_compare.py exact TRUTH.requests.csv EXPORT.csv [ALLOWED_FLAGS]
       sim_compare.py mostly TRUTH.requests.csv EXPORT.csv MIN_EXACT_FRACTION
       sim_compare.py impaired TRUTH.requests.csv EXPORT.csv DROPPED.csv best PCAP
       sim_compare.py reordered TRUTH.requests.csv EXPORT.csv PCAP
       sim_compare.py connections TRUTH.connections.csv EXPORT_CONNECTIONS.csv

exact: every truth request must be reported once with the same tier, server,
client, class (the fingerprint), arrival and departure to the nanosecond and
status, no flags (no gap, truncation, mid-stream or close-delimited response),
and the connection ids must map one to one; nothing else reported.
ALLOWED_FLAGS (a number, e.g. 4 = MIDSTREAM for a capture that started late)
lists flags that may be set.

mostly: at least MIN_EXACT_FRACTION of the truth requests are reported exactly
(for captures whose packets were reordered); the rest are listed.

impaired: packets listed in DROPPED.csv never reached the capture. Exactly the
truth requests that kept their first request packet and their last response
packet (the best any reconstruction can do) must be reported exactly ("best";
a number instead is a minimum exact fraction, kept for old callers), and every
other reported request must lie on a connection that lost a packet
of the exchange it overlaps, with its arrival and departure inside the span of
that exchange widened to the hole: from the last packet captured before a lost
packet to the first one captured after it on that connection (the packets that
reveal the hole; PCAP is the impaired capture, read for their timestamps).

reordered: PCAP's packets are not all in time order (tbneck-sim --reorder). A
reader that takes packets in file order cannot pair a request whose first
packet is written after the first packet of its response (the parser meets
the answer before the question; the design keeps file order, docs/DESIGN.md
"Arrival and departure under reordering"). Every other truth request must be
reported exactly; those may be missing, never reported wrong; nothing extra.

connections: tbneck's `export connections` lists exactly the connections of
the truth (client, server), with the same tiers at both ends, opened by a SYN
exactly when the truth saw one, open_ns = the first packet, close_ns = the last
FIN when one was captured, else the last packet, closed `fin` exactly then, and
the same number of requests.
Prints both sides of every mismatch and exits 1 on failure.
"""
import bisect
import csv
import struct
import sys
from collections import defaultdict

MAX_SHOWN = 15


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def key(r):
    return (r["tier"], r["server"], r["client"], int(r["arrival_ns"]))


def show(label, r):
    if r is None:
        return f"    {label}: (none)"
    cols = ["tier", "server", "client", "conn", "class", "fingerprint", "arrival_ns",
            "departure_ns", "status", "flags"]
    return f"    {label}: " + ", ".join(f"{c}={r[c]}" for c in cols if c in r)


def status_of(r):
    return int(r["status"])


def exact(truth, got, allowed=0):
    problems = []
    tmap = {}
    for r in truth:
        k = key(r)
        if k in tmap:
            problems.append(("truth has a duplicate key", r, tmap[k]))
        tmap[k] = r
    gmap = {}
    for r in got:
        k = key(r)
        if k in gmap:
            problems.append(("reported twice", gmap[k], r))
        gmap[k] = r
    conn_fwd, conn_back = {}, {}
    ok = 0
    for k, t in tmap.items():
        g = gmap.get(k)
        if g is None:
            problems.append(("missing from tbneck", t, None))
            continue
        why = []
        if int(g["departure_ns"]) != int(t["departure_ns"]):
            why.append(f"departure differs by {int(g['departure_ns']) - int(t['departure_ns'])} ns")
        if g["class"] != t["fingerprint"]:
            why.append("class differs")
        if status_of(g) != status_of(t):
            why.append("status differs")
        if int(g.get("flags", "0")) & ~allowed:
            why.append("flags set on a clean exchange")
        a = conn_fwd.setdefault(t["conn"], g["conn"])
        b = conn_back.setdefault(g["conn"], t["conn"])
        if a != g["conn"] or b != t["conn"]:
            why.append("connection ids do not map one to one")
        if why:
            problems.append(("; ".join(why), t, g))
        else:
            ok += 1
    for k, g in gmap.items():
        if k not in tmap:
            problems.append(("reported but not in the truth", None, g))
    return ok, problems


def pcap_packets(path):
    """(time_ns, "src:port", "dst:port", payload length) of each TCP packet, in file order."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic != 0xa1b23c4d:
        raise SystemExit(f"{path}: not a little-endian nanosecond pcap")
    off = 24
    while off + 16 <= len(data):
        sec, nsec, caplen, _ = struct.unpack_from("<IIII", data, off)
        pkt = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        if len(pkt) < 54 or pkt[12:14] != b"\x08\x00" or pkt[23] != 6:
            continue
        ihl = (pkt[14] & 15) * 4
        src = ".".join(str(x) for x in pkt[26:30])
        dst = ".".join(str(x) for x in pkt[30:34])
        sp, dp = struct.unpack_from(">HH", pkt, 14 + ihl)
        doff = (pkt[14 + ihl + 12] >> 4) * 4
        plen = struct.unpack_from(">H", pkt, 16)[0] - ihl - doff
        out.append((sec * 10**9 + nsec, f"{src}:{sp}", f"{dst}:{dp}", plen))
    return out


def pcap_times(path):
    """Timestamps of the captured packets of each TCP connection, keyed both ways."""
    times = defaultdict(list)
    for t, a, b, _ in pcap_packets(path):
        times[(a, b) if a < b else (b, a)].append(t)
    for v in times.values():
        v.sort()
    return times


def impaired(truth, got, dropped, min_frac, pcap):
    captured = pcap_times(pcap)
    # Connections are named by (server, client) on both sides; each loss is
    # widened to the captured packets around it.
    lost = defaultdict(list)
    for d in dropped:
        a, b = d["src"], d["dst"]
        t = int(d["t_ns"])
        seen = captured.get((a, b) if a < b else (b, a), [])
        i = bisect.bisect_left(seen, t)
        before = seen[i - 1] if i > 0 else t
        after = seen[i] if i < len(seen) else t
        lost[(a, b)].append((t, before, after))
        lost[(b, a)].append((t, before, after))
    by_conn = defaultdict(list)
    for t in truth:
        by_conn[(t["server"], t["client"])].append(t)
    tkeys = {key(t): t for t in truth}
    problems = []
    exact_n = 0
    for g in got:
        k = key(g)
        t = tkeys.get(k)
        if t is not None and int(g["departure_ns"]) == int(t["departure_ns"]) \
                and g["class"] == t["fingerprint"]:
            exact_n += 1
            continue
        conn = (g["server"], g["client"])
        losses = lost.get(conn, [])
        if not losses:
            problems.append(("differs from the truth on a connection that lost no packet", t, g))
            continue
        ga, gd = int(g["arrival_ns"]), int(g["departure_ns"])
        over = [x for x in by_conn.get(conn, [])
                if int(x["arrival_ns"]) <= gd and ga <= int(x["departure_ns"])]
        if not over:
            problems.append(("overlaps no request of the truth", None, g))
            continue
        span_lo = min(int(x["arrival_ns"]) for x in over)
        span_hi = max(int(x["departure_ns"]) for x in over)
        # Losses of the overlapped exchanges: a lost packet inside their span.
        near = [x for x in losses if span_lo <= x[0] <= span_hi]
        if not near:
            problems.append(("differs but no packet of its exchange was lost", over[0], g))
            continue
        lo = min([span_lo] + [x[1] for x in near])
        hi = max([span_hi] + [x[2] for x in near])
        if not (lo <= ga and gd <= hi):
            problems.append((f"times outside the exchange widened to its hole [{lo}, {hi}]",
                             over[0], g))
    frac = exact_n / len(truth) if truth else 1.0
    # The best any reconstruction can do: a request whose first request packet
    # or last response packet was lost cannot come out with exact times.
    timing = set()
    for d in dropped:
        if int(d["len"]) > 0:
            timing.add((d["src"], d["dst"], int(d["t_ns"])))
    hit = sum(1 for t in truth
              if (t["client"], t["server"], int(t["arrival_ns"])) in timing
              or (t["server"], t["client"], int(t["departure_ns"])) in timing)
    oracle = 1 - hit / len(truth) if truth else 1.0
    print(f"best possible: {len(truth) - hit} exact ({100 * oracle:.2f}%): {hit} requests lost "
          f"their first request packet or last response packet")
    return exact_n, frac, problems, len(truth) - hit


def reordered(truth, got, pcap):
    """Truth requests a file-order reader can pair, then the exact() comparison."""
    first_seen = {}  # (src, dst, time) of a payload packet -> its first index in the file
    payload = defaultdict(list)  # (src, dst) -> [(time, index)] of payload packets
    for i, (t, a, b, n) in enumerate(pcap_packets(pcap)):
        if n > 0:
            first_seen.setdefault((a, b, t), i)
            payload[(a, b)].append((t, i))
    for v in payload.values():
        v.sort()
    late = set()
    for r in truth:
        a, d = int(r["arrival_ns"]), int(r["departure_ns"])
        qi = first_seen.get((r["client"], r["server"], a))
        resp = payload.get((r["server"], r["client"]), [])
        # Its response's packets: server payload after the arrival, up to the departure.
        lo = bisect.bisect_right(resp, (a, float("inf")))
        hi = bisect.bisect_right(resp, (d, float("inf")))
        if qi is not None and any(i < qi for _, i in resp[lo:hi]):
            late.add(key(r))
    ok, problems = exact(truth, got)
    bad = [p for p in problems if not (p[0] == "missing from tbneck" and key(p[1]) in late)]
    print(f"truth {len(truth)} requests, {len(late)} with their request written after the "
          f"start of their response: best possible for a file-order reader {len(truth) - len(late)}")
    return ok, bad, len(truth) - len(late)


def connections(truth, got):
    problems = []
    tmap = {(r["client"], r["server"]): r for r in truth}
    gmap = {(r["client"], r["server"]): r for r in got}
    for k in sorted(set(tmap) | set(gmap)):
        t, g = tmap.get(k), gmap.get(k)
        if t is None or g is None:
            problems.append(("only in " + ("tbneck" if t is None else "the truth"), t, g))
            continue
        close = t["fin_ns"] or t["last_ns"]
        why = [f"{a} {t[b]} != {g[a]}" for a, b in (("client_tier", "client_tier"),
                                                     ("server_tier", "server_tier"),
                                                     ("open_ns", "first_ns"),
                                                     ("requests", "requests")) if t[b] != g[a]]
        if g["close_ns"] != close:
            why.append(f"close_ns {close} != {g['close_ns']}")
        if (t["syn"] == "1") != (g["opened"] == "syn"):
            why.append(f"syn {t['syn']} but opened {g['opened']}")
        if bool(t["fin_ns"]) != (g["closed"] == "fin"):
            why.append(f"fin_ns '{t['fin_ns']}' but closed {g['closed']}")
        if why:
            problems.append(("; ".join(why), t, g))
    return problems


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mode, truth, got = sys.argv[1], load(sys.argv[2]), load(sys.argv[3])
    if mode == "exact":
        ok, problems = exact(truth, got, int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        print(f"truth {len(truth)} requests, tbneck {len(got)}, exact matches {ok}")
        for why, t, g in problems[:MAX_SHOWN]:
            print(f"  MISMATCH: {why}")
            print(show("truth ", t))
            print(show("tbneck", g))
        if len(problems) > MAX_SHOWN:
            print(f"  ... and {len(problems) - MAX_SHOWN} more")
        return 0 if not problems and ok == len(truth) == len(got) else 1
    if mode == "mostly":
        ok, problems = exact(truth, got)
        frac = ok / len(truth) if truth else 1.0
        need = float(sys.argv[4])
        print(f"truth {len(truth)} requests, tbneck {len(got)}, exact {ok} "
              f"({100 * frac:.2f}%, need {100 * need:.2f}%)")
        for why, t, g in problems[:MAX_SHOWN]:
            print(f"  {'MISMATCH' if frac < need else 'inexact'}: {why}")
            print(show("truth ", t))
            print(show("tbneck", g))
        return 0 if frac >= need else 1
    if mode == "impaired":
        dropped = load(sys.argv[4])
        best = sys.argv[5] == "best"
        min_frac = 0.0 if best else float(sys.argv[5])
        exact_n, frac, problems, possible = impaired(truth, got, dropped, min_frac, sys.argv[6])
        need = f"need {possible}, the best possible" if best else f"need {100 * min_frac:.2f}%"
        print(f"truth {len(truth)} requests, tbneck {len(got)}, exact {exact_n} "
              f"({100 * frac:.2f}%, {need}), dropped packets {len(dropped)}")
        for why, t, g in problems[:MAX_SHOWN]:
            print(f"  MISMATCH: {why}")
            print(show("truth ", t))
            print(show("tbneck", g))
        if len(problems) > MAX_SHOWN:
            print(f"  ... and {len(problems) - MAX_SHOWN} more")
        if best:
            return 0 if not problems and exact_n == possible else 1
        return 0 if not problems and frac >= min_frac else 1
    if mode == "reordered":
        ok, problems, possible = reordered(truth, got, sys.argv[4])
        print(f"tbneck {len(got)}, exact {ok}, need {possible}")
        for why, t, g in problems[:MAX_SHOWN]:
            print(f"  MISMATCH: {why}")
            print(show("truth ", t))
            print(show("tbneck", g))
        return 0 if not problems and ok == possible else 1
    if mode == "connections":
        problems = connections(truth, got)
        print(f"connections: truth {len(truth)}, tbneck {len(got)}, mismatches {len(problems)}")
        for why, t, g in problems[:MAX_SHOWN]:
            print(f"  MISMATCH: {why}")
            print(f"    truth : {t}")
            print(f"    tbneck: {g}")
        return 0 if not problems and truth else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
