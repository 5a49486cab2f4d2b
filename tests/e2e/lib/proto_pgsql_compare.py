#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_pgsql_compare.py — checks tbneck's PostgreSQL requests against tshark's
# pgsql dissection and pg_stat_statements (e2e_postgres.sh).
#
#   proto_pgsql_compare.py MODE PORT REQUESTS.csv TSHARK.tsv PGSS.tsv PGBENCH.out
#       MODE simple|extended|prepared. TSHARK.tsv: frame.time_epoch, tcp.stream,
#       tcp.srcport, pgsql.type (aggregated), pgsql.code (aggregated).
#       PGSS.tsv: calls <tab> query. PGBENCH.out: pgbench's report.
#   proto_pgsql_compare.py midstream PORT CUT.csv FULL.csv
#
# The oracle's requests are built from tshark's message list alone: per
# connection, the client's messages after start-up form batches, each ended by
# a Simple query, a Sync or a Function call; the k-th batch is answered by the
# k-th ReadyForQuery after start-up. Arrival = the frame of the batch's first
# message, departure = the frame of its ReadyForQuery, status = the SQLSTATE of
# the first Error in between (base 36, 0 when none).
import csv
import re
import sys
from collections import Counter, defaultdict
from decimal import Decimal

NOT_BATCH = {"Startup message", "SSL request", "GSSENC request", "Cancel request",
             "Termination", "Copy data", "Copy completion", "Copy failure",
             "Password message", "SASLInitialResponse message", "SASLResponse message"}
BATCH_END = {"Simple query", "Sync", "Function call"}
PREP_ONLY = {"Parse", "Describe", "Sync", "Flush", "Close"}


def ns(t):
    return int(Decimal(t) * 1000000000)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_requests(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def oracle(tsv, port):
    """The batches of every connection as (client port, arrival, departure,
    status, types of the batch's messages)."""
    conns = defaultdict(lambda: {"batches": [], "open": None, "z": [], "err": [],
                                 "started": False, "client": None})
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        if len(f) < 4 or not f[3]:
            continue
        t, stream, sport, types = ns(f[0]), f[1], f[2], f[3].split(",")
        codes = f[4].split(",") if len(f) > 4 and f[4] else []
        c = conns[stream]
        if sport != str(port):
            c["client"] = sport
            for ty in types:
                if ty in NOT_BATCH:
                    continue
                if c["open"] is None:
                    c["open"] = {"arr": t, "types": []}
                c["open"]["types"].append(ty)
                if ty in BATCH_END:
                    c["batches"].append(c["open"])
                    c["open"] = None
        else:
            for ty in types:
                if ty in ("Error", "Notice"):
                    code = codes.pop(0) if codes else ""
                    if ty == "Error":
                        c["err"].append((len(c["z"]), code))
                if ty == "Ready for query":
                    if not c["started"]:
                        c["started"] = True  # the end of start-up answers nothing
                        c["err"] = []
                        continue
                    c["z"].append(t)
    out = []
    for stream, c in conns.items():
        if len(c["z"]) > len(c["batches"]):
            fail("stream %s: %d ReadyForQuery for %d batches" % (stream, len(c["z"]),
                                                                len(c["batches"])))
        for i, z in enumerate(c["z"]):
            errs = [code for k, code in c["err"] if k == i]
            st = int(errs[0], 36) if errs else 0
            b = c["batches"][i]
            out.append((c["client"], b["arr"], z, st, tuple(b["types"])))
    return out


def norm(q):
    q = q.lower()
    q = re.sub(r"'(?:[^']|'')*'", "?", q)
    q = re.sub(r"\$\d+", "?", q)
    q = re.sub(r"\b(?:true|false)\b", "?", q)
    q = re.sub(r"(?<![\w$])-?\d+(?:\.\d+)?\b", "?", q)
    q = re.sub(r"\s+", " ", q).strip().rstrip(";").strip()
    return q


def check_mode(mode, port, reqs, tsv, pgss, pgbench_out):
    want = oracle(tsv, port)
    m = re.search(r"number of transactions actually processed: (\d+)/", open(pgbench_out).read())
    txs = int(m.group(1)) if m else -1
    tiers = {r["tier"] for r in reqs}
    if tiers != {"postgres-%s" % port}:
        fail("%s: tiers %s, want postgres-%s" % (mode, sorted(tiers), port))
    got = Counter((r["client"].rsplit(":", 1)[1], int(r["arrival_ns"]), int(r["departure_ns"]),
                   int(r["status"])) for r in reqs)
    exp = Counter((c, a, d, s) for c, a, d, s, _ in want)
    if got != exp:
        miss = list((exp - got).elements())[:5]
        extra = list((got - exp).elements())[:5]
        fail("%s: %d requests, tshark %d; missing %s; extra %s"
             % (mode, len(reqs), len(want), miss, extra))
    errors = sum(1 for w in want if w[3])
    # Per statement, against the server's own counters.
    calls = Counter()
    for line in open(pgss):
        n, _, q = line.rstrip("\n").partition("\t")
        if "pg_stat_statements" in q:
            continue
        calls[norm(q)] += int(n)
    mine = Counter()
    prepares = 0
    for r in reqs:
        if r["class"].startswith("PREPARE "):
            prepares += 1
        elif int(r["status"]) == 0:
            mine[norm(r["class"])] += 1
    tshark_prep = sum(1 for w in want if set(w[4]) <= PREP_ONLY and "Parse" in w[4])
    if prepares != tshark_prep:
        fail("%s: %d PREPARE requests, tshark shows %d Parse-only batches"
             % (mode, prepares, tshark_prep))
    if mode == "prepared" and prepares == 0:
        fail("prepared: no PREPARE request")
    keys = set(calls) | set(mine)
    for k in sorted(keys):
        if mine[k] == calls[k]:
            continue
        if mode != "simple" and k in ("begin", "end") and mine[k] == txs:
            # Under the extended protocol pg_stat_statements (15) counts these
            # utility statements erratically (once per connection in most
            # runs): pgbench's own count of transactions decides.
            continue
        fail("%s: statement '%s': tbneck %d, pg_stat_statements %d" % (mode, k, mine[k], calls[k]))
    stmts = sum(calls.values())
    print("%s: %d requests = tshark's batches (times to the ns, %d errors with SQLSTATE), "
          "%d statement executions = pg_stat_statements over %d statements, %d prepares"
          % (mode, len(reqs), errors, sum(mine.values()), len(calls), prepares))
    if mode == "simple":
        need = {"copy t from stdin", "copy t to stdout", "listen ch", "notify ch, ?"}
        have = {r["class"] for r in reqs}
        if not need <= have:
            fail("simple: classes %s missing" % sorted(need - have))
        st = [int(r["status"]) for r in reqs if r["class"] == "select * from no_such_table"]
        if st != [int("42P01", 36)]:
            fail("simple: status of the failing select %s, want [%d]" % (st, int("42P01", 36)))
    if stmts == 0:
        fail("%s: pg_stat_statements counted nothing" % mode)


def check_midstream(cut, full):
    full_set = Counter((r["client"], r["arrival_ns"], r["departure_ns"], r["class"])
                       for r in full)
    got = Counter((r["client"], r["arrival_ns"], r["departure_ns"], r["class"]) for r in cut)
    wrong = got - full_set
    if wrong:
        fail("midstream: %d requests not in the full capture: %s"
             % (sum(wrong.values()), list(wrong.elements())[:5]))
    if not any(int(r["flags"]) & 4 for r in cut):
        fail("midstream: no record carries the mid-stream flag")
    t0 = min(int(r["arrival_ns"]) for r in cut)
    conns = {r["conn"] for r in cut}
    expect = sum(1 for r in full if int(r["arrival_ns"]) >= t0)
    if len(cut) < expect - 2 * len(conns):
        fail("midstream: %d requests, %d in the full capture after the cut" % (len(cut), expect))
    print("midstream: %d requests, all in the full capture (%d there after the cut)"
          % (len(cut), expect))


def main():
    mode, port = sys.argv[1], sys.argv[2]
    if mode == "midstream":
        check_midstream(load_requests(sys.argv[3]), load_requests(sys.argv[4]))
    else:
        check_mode(mode, port, load_requests(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])


if __name__ == "__main__":
    main()
