#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_mysql_compare.py — checks tbneck's MySQL request records against
# tshark's decoded commands, pt-query-digest's query counts, and response
# times computed from the raw frame list.
#
# usage: proto_mysql_compare.py requests.csv commands.tsv frames.tsv pt.json PORT
#   commands.tsv: frame.time_epoch, tcp.srcport, mysql.command (',' joined)
#   frames.tsv:   tcp.stream, frame.time_epoch, tcp.len, tcp.srcport, tcp.dstport
import csv
import json
import sys
from collections import Counter

NO_RESPONSE = {1, 0x18, 0x19}  # COM_QUIT, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE
NAMES = {2: "COM_INIT_DB", 3: "COM_QUERY", 9: "COM_STATISTICS", 14: "COM_PING",
         22: "COM_STMT_PREPARE", 23: "COM_STMT_EXECUTE", 26: "COM_STMT_RESET"}


def ns(s):
    sec, _, frac = s.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    req_csv, cmd_tsv, frames_tsv, pt_json, port = sys.argv[1:6]
    port = int(port)
    recs = [r for r in csv.DictReader(open(req_csv)) if r["server"].endswith(":%d" % port)]

    # 1. Commands: tshark's, keyed by (client port, frame time).
    want = Counter()
    cmd_at = {}
    tshark_cmds = Counter()
    for line in open(cmd_tsv):
        f = line.rstrip("\n").split("\t")
        if len(f) < 3 or not f[2]:
            continue
        key = (int(f[1]), ns(f[0]))
        for c in f[2].split(","):
            c = int(c)
            tshark_cmds[c] += 1
            if c in NO_RESPONSE:
                continue
            want[key] += 1
            cmd_at.setdefault(key, []).append(c)
    got = Counter((int(r["client"].rsplit(":", 1)[1]), int(r["arrival_ns"])) for r in recs)
    missing = want - got
    extra = got - want
    for k in list(missing)[:10]:
        print("MISSING: command %r at client port %d, %d" % (cmd_at[k], k[0], k[1]))
    for k in list(extra)[:10]:
        print("EXTRA: tbneck record at client port %d, %d" % k)
    per_cmd_tb = Counter()
    tb_queries = Counter()
    executes = []
    for r in recs:
        k = (int(r["client"].rsplit(":", 1)[1]), int(r["arrival_ns"]))
        cs = cmd_at.get(k)
        if cs:
            c = cs.pop(0)
            per_cmd_tb[c] += 1
            if c == 3:
                tb_queries[r["class"]] += 1
            if c == 23:
                executes.append(r["class"])
    per_cmd_ts = Counter({c: n for c, n in tshark_cmds.items() if c not in NO_RESPONSE})
    print("commands (tshark / tbneck): " + ", ".join(
        "%s %d/%d" % (NAMES.get(c, c), per_cmd_ts[c], per_cmd_tb[c]) for c in sorted(per_cmd_ts)))
    if missing or extra or per_cmd_ts != per_cmd_tb:
        fail("%d commands missing, %d extra records" % (sum(missing.values()),
                                                         sum(extra.values())))
    for c in (3, 22, 23, 14, 2, 9):
        if per_cmd_ts[c] == 0:
            fail("the capture holds no %s" % NAMES[c])

    # Executions take the class of the statement they run.
    prepared = {r["class"][len("PREPARE "):] for r in recs if r["class"].startswith("PREPARE ")}
    wrong = [c for c in executes if c not in prepared]
    if wrong:
        fail("%d executions not classed by their prepared text: %r" % (len(wrong), wrong[:3]))

    # 2. Response times from the frame list alone: the response ends with
    # the last server data packet before the client's next data packet.
    frames = {}
    for line in open(frames_tsv):
        f = line.rstrip("\n").split("\t")
        if len(f) < 5 or not f[2] or int(f[2]) == 0:
            continue
        to_server = int(f[4]) == port
        cport = int(f[3]) if to_server else int(f[4])
        frames.setdefault(cport, []).append((ns(f[1]), to_server))
    idx = {}
    for cport, fl in frames.items():
        for i, (t, c2s) in enumerate(fl):
            if c2s:
                idx.setdefault((cport, t), i)
    bad_rt = 0
    for r in recs:
        cport, arr = int(r["client"].rsplit(":", 1)[1]), int(r["arrival_ns"])
        i = idx.get((cport, arr))
        if i is None:
            fail("record at %d has no client packet at its arrival" % arr)
        fl = frames[cport]
        j = i + 1
        while j < len(fl) and fl[j][1]:
            j += 1  # the rest of a request that spans packets
        last = None
        while j < len(fl) and not fl[j][1]:
            last = fl[j][0]
            j += 1
        if last != int(r["departure_ns"]):
            bad_rt += 1
            if bad_rt <= 10:
                print("RT: %s at %d: departure %s, frames say %s" % (r["class"], arr,
                                                                   r["departure_ns"], last))
    if bad_rt:
        fail("%d response times differ" % bad_rt)

    # 3. pt-query-digest: queries per fingerprint; tbneck's COM_QUERY records
    # are those whose command is 3. Fingerprints differ in detail between the
    # tools, so the comparison is of the sorted list of per-class counts.
    pt = json.load(open(pt_json))
    pt_counts = Counter()
    for c in pt.get("classes", []):
        fp = c.get("fingerprint", "")
        # pt also lists prepared-statement commands (and COM_STMT_CLOSE as
        # "deallocate prepare", which has no response): compared above.
        if fp.startswith(("administrator command", "prepare ", "execute ",
                          "deallocate prepare")):
            continue
        pt_counts[fp] += int(c["query_count"])
    print("pt-query-digest: %d queries in %d classes; tbneck: %d in %d"
          % (sum(pt_counts.values()), len(pt_counts), sum(tb_queries.values()), len(tb_queries)))
    if sorted(pt_counts.values()) != sorted(tb_queries.values()):
        for fp, n in sorted(pt_counts.items(), key=lambda x: -x[1]):
            print("  pt     %5d %s" % (n, fp[:100]))
        for fp, n in sorted(tb_queries.items(), key=lambda x: -x[1]):
            print("  tbneck %5d %s" % (n, fp[:100]))
        fail("per-class query counts differ from pt-query-digest's")

    # 4. Known statements.
    by_class = Counter(r["class"] for r in recs)
    for cls, st in (("select * from no_such_table", "1146"),
                    ("select c from sbtest1 where id in (?+)", "0"),
                    ("call two_results()", "0"), ("COM_PING", "0"), ("COM_INIT_DB", "0")):
        rs = [r for r in recs if r["class"] == cls]
        if len(rs) != 1 or rs[0]["status"] != st:
            fail("class %r: %r" % (cls, [(r["class"], r["status"]) for r in rs]))
    print("records: %d in %d classes" % (len(recs), len(by_class)))


if __name__ == "__main__":
    main()
