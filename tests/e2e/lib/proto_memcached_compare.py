#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_memcached_compare.py — checks tbneck's memcached requests against the
# client's log, memcached's stats and tshark's frame list (e2e_memcached.sh).
#
# The client counts a miss (NOT_FOUND, or a retrieval with fewer values than
# keys) from the answers it read; tbneck's status 1 must match.
#
#   proto_memcached_compare.py PORT REQUESTS.csv CLIENT.json STATS.txt FRAMES.tsv CAPTURE.out
import csv
import json
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import packet_times  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    port, req_path, log_path, stats_path, frames_path, summary_path = sys.argv[1:7]
    reqs = list(csv.DictReader(open(req_path, newline="")))
    log = json.load(open(log_path))
    stats = {}
    for line in open(stats_path):
        f = line.split()
        if len(f) == 3 and f[0] == "STAT":
            stats[f[1]] = f[2]
    st = lambda k: int(stats[k])  # noqa: E731
    mine = Counter(r["class"] for r in reqs)
    want = Counter(log["answered"])
    if mine != want:
        fail("per class: tbneck %s, client %s" % (dict(mine), dict(want)))
    m = re.search(r"unanswered requests (\d+)", open(summary_path).read())
    if not m or int(m.group(1)) != log["silent"]:
        fail("unanswered: tbneck %s, client %d" % (m and m.group(1), log["silent"]))
    tiers = {r["tier"] for r in reqs}
    if tiers != {"memcached-%s" % port}:
        fail("tiers %s, want memcached-%s" % (sorted(tiers), port))
    # The server's counters.
    sets = sum(mine[c] for c in ("set", "add", "cas", "ms"))
    checks = [
        ("cmd_set", st("cmd_set"), sets + log["silent_sets"]),
        ("cmd_get", st("cmd_get"), log["keys"]),
        ("delete_hits+delete_misses", st("delete_hits") + st("delete_misses"),
         mine["delete"] + log["silent_deletes"]),
        ("incr_hits+incr_misses", st("incr_hits") + st("incr_misses"),
         mine["incr"] + log["silent_incrs"]),
        ("cmd_touch", st("cmd_touch"), mine["touch"]),
        ("cas_hits+cas_badval+cas_misses", st("cas_hits") + st("cas_badval") + st("cas_misses"),
         mine["cas"]),
        ("misses (client) / status 1 (tbneck)", log["not_found"],
         sum(1 for r in reqs if int(r["status"]) == 1)),
    ]
    for name, server, tb in checks:
        if server != tb:
            fail("%s: memcached %d, tbneck (+ silent) %d" % (name, server, tb))
    bad = packet_times.wrong(reqs, frames_path, port)
    if bad:
        fail("request %s: its times are not its connection's packets" % bad)
    print("memcached: %d requests = the client's answered commands over %d classes, %d "
          "unanswered; stats agree (%s)" % (len(reqs), len(mine), log["silent"],
                                            ", ".join("%s %d" % (n, s) for n, s, _ in checks)))


if __name__ == "__main__":
    main()
