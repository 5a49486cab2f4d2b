#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# conn_compare.py — `tbneck export connections` against two independent
# oracles: tshark's TCP streams of the same pcap (endpoints, first and last
# packet, packets, payload bytes each way, how it opened and closed) and the
# simulator's request truth (requests carried per connection 4-tuple).
#
# usage: conn_compare.py TSHARK_FIELDS.csv TRUTH_REQUESTS.csv EXPORT.csv SERVER_PORTS
# TSHARK_FIELDS: tcp.stream,ip.src,tcp.srcport,ip.dst,tcp.dstport,syn,ack,fin,rst,tcp.len,
#                frame.time_epoch (ns digits)
# What tbneck counts for a connection ends with the packet that closes it (the
# second FIN, or the RST): the last ACK after a FIN exchange is a late segment
# of a closed connection. The oracle applies the same cut.
import csv, sys
from collections import defaultdict

fields, truth, export, ports = sys.argv[1:5]
server_ports = {int(p) for p in ports.split(",")}

def ns(t):
    s, _, f = t.partition(".")
    return int(s) * 10**9 + int((f + "000000000")[:9])

streams = defaultdict(list)
for row in csv.reader(open(fields)):
    if len(row) < 11 or not row[0]:
        continue
    streams[int(row[0])].append(row)

want = {}
for sid, pk in streams.items():
    first = pk[0]
    syn, ack = first[5] in ("1", "True"), first[6] in ("1", "True")
    if syn and not ack:
        client, server = (first[1], first[2]), (first[3], first[4])
        opened = "syn"
    elif syn and ack:
        client, server = (first[3], first[4]), (first[1], first[2])
        opened = "synack"
    else:
        a, b = (first[1], first[2]), (first[3], first[4])
        client, server = (a, b) if int(b[1]) in server_ports else (b, a)
        opened = "midstream"
    fins, n, closed, last = set(), 0, "end", None
    by = {"c2s": 0, "s2c": 0}
    for p in pk:
        n += 1
        last = ns(p[10])
        side = "c2s" if (p[1], p[2]) == client else "s2c"
        by[side] += int(p[9] or 0)
        if p[8] in ("1", "True"):
            closed = "rst"
            break
        if p[7] in ("1", "True"):
            fins.add(side)
            if len(fins) == 2:
                closed = "fin"
                break
    key = (f"{client[0]}:{client[1]}", f"{server[0]}:{server[1]}", ns(first[10]))
    want[key] = dict(packets=n, bytes_c2s=by["c2s"], bytes_s2c=by["s2c"], close_ns=last,
                     opened=opened, closed=closed)

got = {}
for r in csv.DictReader(open(export)):
    key = (r["client"], r["server"], int(r["open_ns"]))
    if key in got:
        print("FAIL: connection listed twice:", key)
        sys.exit(1)
    got[key] = r

ok = True
missing = set(want) - set(got)
extra = set(got) - set(want)
for k in sorted(missing)[:5]:
    print("FAIL: tshark stream not exported:", k, want[k])
for k in sorted(extra)[:5]:
    print("FAIL: exported connection tshark does not have:", k)
ok = not missing and not extra
bad = 0
for k in set(want) & set(got):
    w, g = want[k], got[k]
    for f in ("packets", "bytes_c2s", "bytes_s2c", "close_ns"):
        if int(g[f]) != w[f]:
            bad += 1
            if bad <= 5:
                print(f"FAIL: {k} {f}: tbneck {g[f]}, tshark {w[f]}")
    for f in ("opened", "closed"):
        if g[f] != w[f]:
            bad += 1
            if bad <= 5:
                print(f"FAIL: {k} {f}: tbneck {g[f]}, tshark {w[f]}")
ok = ok and bad == 0

# Requests carried, per 4-tuple, against the simulator's truth.
per_tuple = defaultdict(int)
for r in csv.DictReader(open(truth)):
    per_tuple[(r["client"], r["server"])] += 1
exp_tuple = defaultdict(int)
for g in got.values():
    exp_tuple[(g["client"], g["server"])] += int(g["requests"])
diff = [(k, exp_tuple.get(k, 0), v) for k, v in per_tuple.items() if exp_tuple.get(k, 0) != v]
for k, e, v in diff[:5]:
    print(f"FAIL: requests on {k}: tbneck {e}, truth {v}")
extra_req = [k for k, v in exp_tuple.items() if v and k not in per_tuple]
for k in extra_req[:5]:
    print(f"FAIL: tbneck counts requests on {k}, the truth none")
ok = ok and not diff and not extra_req

idle = sum(1 for g in got.values() if g["requests"] == "0")
tiers = {(g["client_tier"], g["server_tier"]) for g in got.values()}
print(f"connections: {len(got)} exported, {len(want)} tshark streams, {idle} without a request,"
      f" {sum(1 for g in got.values() if g['opened'] == 'midstream')} mid-stream; "
      f"tier pairs {sorted(tiers)}")
sys.exit(0 if ok else 1)
