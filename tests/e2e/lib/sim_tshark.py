#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sim_tshark.py — tshark's PostgreSQL and RESP dissectors as the oracle for
tbneck-sim's postgres and redis tiers.

Usage: sim_tshark.py pgsql|resp PREFIX TSHARK.tsv

TSHARK.tsv: `tshark -T fields -E separator=/t -E occurrence=a -E aggregator=,`
with, for pgsql: frame.time_epoch ip.src tcp.srcport ip.dst tcp.dstport
pgsql.type pgsql.query pgsql.code; for resp: frame.time_epoch ip.src tcp.srcport
ip.dst tcp.dstport resp.array.length resp.string resp.integer resp.error
resp.bulk_string.length resp.bulk_string.value.

Each request tshark shows (a Simple query, or a Parse...Sync batch; a RESP
command array) is paired, per connection and in order, with the next answer
that ends it (ReadyForQuery; a whole RESP reply). The (client, server,
arrival, departure) of these pairs must equal the truth's rows of that tier,
as a set; each request's text must be its class's template with the
placeholders filled ({id}, {n}: digits; {ids}: a list of them; {word}:
letters; in the extended protocol the numbers are $N parameters); an error
(SQLSTATE 55P03, a RESP -ERR) exactly where the truth's status says so.
Exits 1 on a mismatch, printing both sides.
"""
import collections
import csv
import re
import sys
from decimal import Decimal


def ns(t):
    return int(Decimal(t) * 10**9)


def templates(prefix, key):
    """{class: template} of the last tier, from PREFIX.truth.conf."""
    out, cls = {}, None
    for line in open(prefix + ".truth.conf"):
        m = re.match(r"\[class (.*)\]", line.strip())
        if m:
            cls = m.group(1)
        elif cls and line.startswith(key + "."):
            out[cls] = line.split("=", 1)[1].strip()  # the last tier's wins
    return out


def pattern(tpl, params):
    """The template as a regular expression of what may be sent."""
    num = r"\$[0-9]+" if params else r"[0-9]+"
    parts = re.split(r"(\{id\}|\{n\}|\{ids\}|\{word\})", tpl)
    rx = {"{id}": num, "{n}": num, "{ids}": f"{num}(?:, {num})+", "{word}": "[a-z]+"}
    return re.compile("".join(rx.get(p, re.escape(p)) for p in parts) + "$")


def main():
    mode, prefix, tsv = sys.argv[1], sys.argv[2], sys.argv[3]
    tier = "postgres" if mode == "pgsql" else "redis"
    port = "5432" if mode == "pgsql" else "6379"
    truth = [r for r in csv.DictReader(open(prefix + ".requests.csv")) if r["tier"] == tier]
    tpl = templates(prefix, "sql" if mode == "pgsql" else "cmd")
    reqs = collections.defaultdict(list)  # conn -> [(time, text)]
    ends = collections.defaultdict(list)  # conn -> [(time, error)]
    for row in csv.reader(open(tsv), delimiter="\t"):
        t, src, sp, dst, dp = row[:5]
        f = row[5:]
        to_server = dp == port
        conn = (f"{src}:{sp}", f"{dst}:{dp}") if to_server else (f"{dst}:{dp}", f"{src}:{sp}")
        if mode == "pgsql":
            types = f[0].split(",") if f[0] else []
            if to_server and ("Simple query" in types or "Parse" in types):
                reqs[conn].append((ns(t), f[1]))
            elif not to_server and "Ready for query" in types:
                ends[conn].append((ns(t), f[2]))
        else:
            if to_server and f[0]:
                words = [bytes.fromhex(v.replace(":", "")).decode() for v in f[5].split(",")]
                # A command is one array whose length counts its bulk strings.
                text = " ".join(words) if f[0] == str(len(words)) else f"*{f[0]} {words}"
                reqs[conn].append((ns(t), text))
            elif not to_server and any(f[:5]):
                ends[conn].append((ns(t), f[3]))
    seen = {}
    bad = 0
    for conn, rq in reqs.items():
        en = ends[conn]
        if mode == "pgsql":
            en = en[len(en) - len(rq):]  # the first ReadyForQuery ends the start-up
        if len(en) != len(rq):
            print(f"MISMATCH: {conn}: {len(rq)} requests, {len(en)} answers")
            bad += 1
            continue
        for (a, text), (d, err) in zip(rq, en):
            seen[(conn[0], conn[1], a, d)] = (text, err)
    rows = {(r["client"], r["server"], int(r["arrival_ns"]), int(r["departure_ns"])): r
            for r in truth}
    for k in sorted(set(rows) ^ set(seen))[:10]:
        print("MISMATCH:", "only in the truth" if k in rows else "only in tshark", k)
    bad += len(set(rows) ^ set(seen))
    params = False
    for k, r in rows.items():
        if k not in seen:
            continue
        text, err = seen[k]
        params = params or "$" in text
        if not pattern(tpl[r["class"]], "$1" in text).match(text):
            print(f"MISMATCH: {r['class']} sent '{text}', template '{tpl[r['class']]}'")
            bad += 1
        want = {"pgsql": int("55P03", 36), "resp": 1}[mode] if err else 0
        if int(r["status"]) != want:
            print(f"MISMATCH: status {r['status']} where tshark shows error '{err}'")
            bad += 1
    print(f"{mode}: truth {len(rows)} requests, tshark {len(seen)}, "
          f"errors {sum(1 for v in seen.values() if v[1])}, parameters {params}, mismatches {bad}")
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
