#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_redis_compare.py — checks tbneck's Redis requests against INFO
# commandstats and tshark's frame list (e2e_redis.sh).
#
#   proto_redis_compare.py PORT REQUESTS.csv COMMANDSTATS.txt FRAMES.tsv CAPTURE.out
#
# FRAMES.tsv: frame.time_epoch, tcp.srcport, tcp.dstport of every data packet.
import csv
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import packet_times  # noqa: E402

# What the test did that tbneck does not record as requests, by commandstats
# name: the commands its Python client silenced (CLIENT REPLY SKIP and the SET
# after it), the subscription and MONITOR (push streams), and the statistics
# reset before the capture.
SILENCED = {"client|reply": 1, "set": 1}
STREAMS = {"subscribe": 1, "monitor": 1}
BEFORE = {"config|resetstat"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    port, req_path, stats_path, frames_path, summary_path = sys.argv[1:6]
    reqs = list(csv.DictReader(open(req_path, newline="")))
    stats = {}
    for line in open(stats_path):
        m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line.strip())
        if m:
            stats[m.group(1)] = int(m.group(2))
    if not stats:
        fail("no commandstats")
    mine = Counter(r["class"].lower().replace(" ", "|") for r in reqs)
    for cmd in sorted(set(stats) | set(mine)):
        if cmd in BEFORE:
            continue
        want = stats.get(cmd, 0) - SILENCED.get(cmd, 0) - STREAMS.get(cmd, 0)
        if mine[cmd] != want:
            fail("command %s: tbneck %d, commandstats %d (silenced %d, streams %d)"
                 % (cmd, mine[cmd], stats.get(cmd, 0), SILENCED.get(cmd, 0),
                    STREAMS.get(cmd, 0)))
    summary = open(summary_path).read()
    m = re.search(r"push streams (\d+) \(not paired\), unanswered requests (\d+)", summary)
    if not m or int(m.group(1)) != sum(STREAMS.values()) or \
            int(m.group(2)) != sum(SILENCED.values()):
        fail("summary: want %d push streams and %d unanswered requests: %s"
             % (sum(STREAMS.values()), sum(SILENCED.values()), summary))
    tiers = {r["tier"] for r in reqs}
    if tiers != {"redis-%s" % port}:
        fail("tiers %s, want redis-%s" % (sorted(tiers), port))
    # Times: packets of the request's own connection, in the right direction.
    bad = packet_times.wrong(reqs, frames_path, port)
    if bad:
        fail("request %s: its times are not its connection's packets" % bad)
    shared = Counter((r["conn"], r["arrival_ns"]) for r in reqs if r["class"] == "INCR")
    if max(shared.values()) != 16:
        fail("pipelines of 16: at most %d INCR share an arrival" % max(shared.values()))
    wt = [int(r["status"]) for r in reqs if r["class"] == "INCR" and int(r["status"]) != 0]
    if wt != [2]:
        fail("statuses of failed INCR %s, want [2] (WRONGTYPE)" % wt)
    for need in ("MULTI", "EXEC", "CLIENT SETNAME", "CONFIG GET", "HELLO", "HGETALL"):
        if mine[need.lower().replace(" ", "|")] == 0:
            fail("no %s request" % need)
    print("redis: %d requests = INFO commandstats over %d commands (%d silenced, %d streams "
          "excluded); times are packets of their connections; pipelines of 16 share arrivals"
          % (len(reqs), len(stats), sum(SILENCED.values()), sum(STREAMS.values())))


if __name__ == "__main__":
    main()
