#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_mariadb_midstream.sh — connections opened before the capture (a pool):
# two sysbench runs (text queries and prepared statements, 2 threads each,
# rate-limited) connect and prepare, then tcpdump starts, records ~3 s and
# stops while they are still running. Neither handshakes, capabilities nor
# the PREPAREs are in the capture. From the frame list alone, every client
# data packet answered by the server before the client's next one is a
# command issued during the capture; tbneck must report at least 99% of them,
# nothing that is not one of them, and each with the departure the frames
# give (the last server packet before the client's next data packet).
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: capturing on lo needs root"; exit 77; }
for p in mariadbd mariadb-install-db mariadb sysbench tcpdump tshark python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
}
trap cleanup EXIT
# shellcheck source=lib/proto_mariadb.sh
source "$lib/proto_mariadb.sh"
proto_mariadb_start || { echo "FAIL: mariadbd did not start"; exit 1; }

sb=(sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$dbport"
    --mysql-user=root --mysql-db=sbtest --mysql-ssl=off --tables=1 --table-size=1000)
proto_sql -e 'CREATE DATABASE sbtest'
"${sb[@]}" prepare >"$work/sb-prepare.out" 2>&1 || { cat "$work/sb-prepare.out"; exit 1; }

# Bounded: 9 s at most, 40 transactions/s each (about 650 commands/s in all).
"${sb[@]}" --threads=2 --time=9 --rate=40 --db-ps-mode=disable run >"$work/sb-text.out" 2>&1 &
sb1=$!
pids+=($sb1)
"${sb[@]}" --threads=2 --time=9 --rate=40 --db-ps-mode=auto run >"$work/sb-ps.out" 2>&1 &
sb2=$!
pids+=($sb2)
sleep 2.5 # connected, statements prepared, queries flowing

tcpdump -i lo -s 0 -B 32768 --time-stamp-precision=nano -U -w "$work/cap.pcap" \
    "tcp port $dbport" 2>"$work/tcpdump.err" &
tpid=$!
pids+=($tpid)
for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
sleep 3
sleep 1.2 # tcpdump hands over its buffer at least once a second
kill -INT "$tpid"
wait "$tpid" 2>/dev/null || true
wait "$sb1" || { cat "$work/sb-text.out"; echo "FAIL: sysbench"; exit 1; }
wait "$sb2" || { cat "$work/sb-ps.out"; echo "FAIL: sysbench"; exit 1; }
if ! grep -q "^0 packets dropped by kernel" "$work/tcpdump.err"; then
    echo "FAIL: tcpdump dropped packets (machine too loaded)"; cat "$work/tcpdump.err"; exit 1
fi

db="$work/t.db"
"$TBNECK" capture -r "$work/cap.pcap" --db "$db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
"$TBNECK" export requests --db "$db" >"$work/requests.csv"
tshark -r "$work/cap.pcap" -T fields -E separator=/t -e tcp.stream -e frame.time_epoch \
    -e tcp.len -e tcp.srcport -e tcp.dstport >"$work/frames.tsv" 2>/dev/null

python3 - "$work/requests.csv" "$work/frames.tsv" "$dbport" <<'EOF'
import csv, sys
from collections import Counter

def ns(s):
    sec, _, frac = s.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])

req_csv, frames_tsv, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = {}
for line in open(frames_tsv):
    f = line.rstrip("\n").split("\t")
    if len(f) < 5 or not f[2] or int(f[2]) == 0:
        continue
    c2s = int(f[4]) == port
    frames.setdefault(int(f[3]) if c2s else int(f[4]), []).append((ns(f[1]), c2s))
# Commands answered during the capture: (client port, arrival) -> departure.
truth = {}
for cport, fl in frames.items():
    i = 0
    while i < len(fl):
        if not fl[i][1]:
            i += 1  # server bytes answering something sent before the capture
            continue
        arr = fl[i][0]
        j = i + 1
        while j < len(fl) and fl[j][1]:
            j += 1
        last = None
        while j < len(fl) and not fl[j][1]:
            last = fl[j][0]
            j += 1
        if last is not None:
            truth[(cport, arr)] = last
        i = j
recs = [r for r in csv.DictReader(open(req_csv)) if r["server"].endswith(":%d" % port)]
got = {}
for r in recs:
    got[(int(r["client"].rsplit(":", 1)[1]), int(r["arrival_ns"]))] = r
extra = [k for k in got if k not in truth]
wrong = [k for k in got if k in truth and int(got[k]["departure_ns"]) != truth[k]]
found = sum(1 for k in truth if k in got)
classes = Counter(r["class"] for r in recs)
print("connections: %d, answered commands in the capture: %d, reported: %d (%.2f%%), "
      "extra: %d, wrong departure: %d" % (len(frames), len(truth), found,
                                          100.0 * found / max(1, len(truth)), len(extra),
                                          len(wrong)))
for c, n in classes.most_common(12):
    print("  %5d %s" % (n, c))
for k in extra[:5]:
    print("EXTRA", k, got[k])
for k in wrong[:5]:
    print("WRONG", k, got[k]["departure_ns"], truth[k])
assert len(frames) == 4, "expected the 4 pooled connections, saw %d" % len(frames)
assert len(truth) >= 500, "too few commands captured: %d" % len(truth)
assert not extra and not wrong
assert found == len(truth), "only %d of %d reported" % (found, len(truth))
# Without the PREPAREs the executions cannot be named, but they are counted;
# text queries keep their fingerprints.
assert classes["COM_STMT_EXECUTE"] > 100, classes
assert classes["select c from sbtest1 where id=?"] > 100, classes
assert all(r["flags"] == "0" or int(r["flags"]) & 4 for r in recs)
EOF
echo "PASS"
