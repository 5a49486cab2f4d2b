#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_live_veth.sh — live capture end to end. In a network namespace of its
# own with a veth pair, a simulator capture is replayed with tcpreplay at a
# fixed rate into one end while `tbneck capture -i` listens on the other
# (with --serve, so the live event stream is checked too); then the same file
# is captured offline and both databases' requests are compared.
#
# What must match: tcpreplay --pps re-times the packets (arrival and
# departure become receive times at N packets per second), so timestamps and
# response times cannot be compared; everything else the engine derives from
# the packet bytes and their order can: the multiset of (tier, server, client,
# conn, class, req_bytes, resp_bytes, status, flags) rows must be identical,
# which implies equal counts per tier and class. Zero kernel drops is
# required at this rate (bench/bench_live.sh measures the limit).
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, packet sockets)"; exit 77; }
command -v tcpreplay >/dev/null || fail "tcpreplay missing (scripts/deps.sh)"

ns="tbns$$"
work=$(mktemp -d "$TB_BUILDDIR/e2e-live-veth.XXXXXX")
cap_pid=""
cleanup() {
  [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null # takes the veth pair with it
  rm -rf "$work"
}
trap cleanup EXIT
# Background jobs are started with `ip netns exec` directly (it execs), never
# through a shell function: $! must be tbneck's pid for the signals below.
nsx() { ip netns exec "$ns" "$@"; }

ip netns add "$ns" || fail "ip netns add"
ip -n "$ns" link add tbva type veth peer name tbvb || fail "veth pair"
for l in lo tbva tbvb; do ip -n "$ns" link set "$l" up || fail "link up $l"; done
# Simulated segments may exceed 1500 bytes; the pair must carry them whole.
ip -n "$ns" link set tbva mtu 65535 && ip -n "$ns" link set tbvb mtu 65535 || fail "mtu"

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q || fail "simulator"
npkts=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)
[ "$npkts" -gt 1000 ] || fail "simulated capture too small ($npkts packets)"
pps=4000
dur=$(( npkts / pps + 6 ))
ok "$npkts packets to replay at $pps/s; live capture for ${dur}s"

# A missing interface is one line naming it, exit 1.
nsx "$TBNECK" capture -i nosuch0 --db "$work/x.db" >/dev/null 2>"$work/missing.err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$work/missing.err")" -eq 1 ] && grep -q nosuch0 "$work/missing.err" ||
  { cat "$work/missing.err"; fail "missing interface: exit $rc, want 1 and one line naming it"; }
[ ! -e "$work/x.db" ] || fail "missing interface: a database was created anyway"
ok "missing interface: $(cat "$work/missing.err")"

ip netns exec "$ns" "$TBNECK" capture -i tbvb --duration "${dur}s" --db "$work/live.db" --serve 127.0.0.1:0 \
  >"$work/live.out" 2>"$work/live.err" &
cap_pid=$!
port=""
for _ in $(seq 1 100); do
  grep -qs 'capturing on tbvb' "$work/live.err" && break
  kill -0 "$cap_pid" 2>/dev/null || { cat "$work/live.err"; fail "live capture exited early"; }
  sleep 0.1
done
grep -q 'capturing on tbvb' "$work/live.err" || fail "live capture did not start"
port=$(sed -n 's#.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$work/live.err")
[ -n "$port" ] || fail "no dashboard address printed"
ip netns exec "$ns" curl -sN --max-time $(( npkts / pps + 4 )) "http://127.0.0.1:$port/api/stream" \
  >"$work/sse.out" 2>/dev/null &
sse_pid=$!
sleep 0.3
nsx timeout $(( npkts / pps + 30 )) tcpreplay -q -i tbva --pps "$pps" "$work/sim.pcap" \
  >"$work/replay.out" 2>&1 || { cat "$work/replay.out"; fail "tcpreplay"; }
ok "replayed: $(grep -m1 -i 'Actual' "$work/replay.out" | sed 's/^ *//')"
wait "$sse_pid"
for _ in $(seq 1 $(( dur * 10 + 300 ))); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cap_pid" 2>/dev/null && fail "live capture did not stop after --duration"
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/live.err"; fail "live capture exit $rc"; }
cat "$work/live.out"
grep -q '^capture tbvb: .* 0 kernel drops, 0 interface drops' "$work/live.out" ||
  fail "live capture dropped packets or printed no summary"
grep -qi 'sanitizer\|runtime error' "$work/live.err" && { cat "$work/live.err"; fail "sanitizer"; }

nwin=$(grep -c '^event: window' "$work/sse.out")
nhealth=$(grep -c '^event: health' "$work/sse.out")
[ "$nwin" -gt 0 ] && [ "$nhealth" -gt 0 ] ||
  { head -c 500 "$work/sse.out"; fail "live stream: $nwin window and $nhealth health events"; }
ok "live stream: $nwin window events, $nhealth health events"

"$TBNECK" capture -r "$work/sim.pcap" --db "$work/off.db" >"$work/off.out" 2>&1 ||
  { cat "$work/off.out"; fail "offline capture"; }
"$TBNECK" export requests --db "$work/live.db" >"$work/live.csv" || fail "export live"
"$TBNECK" export requests --db "$work/off.db" >"$work/off.csv" || fail "export offline"
python3 - "$work/live.csv" "$work/off.csv" <<'PY' || fail "live and offline requests differ"
import collections, csv, sys

def rows(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        out = []
        for row in r:
            if int(row["departure_ns"]) < int(row["arrival_ns"]):
                print("%s: departure before arrival: %r" % (path, row)); sys.exit(1)
            out.append(tuple(row[k] for k in ("tier", "server", "client", "conn", "class",
                                              "req_bytes", "resp_bytes", "status", "flags")))
        return out

live, off = rows(sys.argv[1]), rows(sys.argv[2])
cl, co = collections.Counter(live), collections.Counter(off)
per = lambda rs: collections.Counter((r[0], r[4]) for r in rs)
print("requests: live %d, offline %d" % (len(live), len(off)))
for (tier, cls), n in sorted(per(off).items())[:8]:
    print("  %-10s %-50.50s offline %5d live %5d" % (tier, cls, n, per(live)[(tier, cls)]))
if not off:
    print("no requests offline"); sys.exit(1)
if cl != co:
    print("only live:", list((cl - co).items())[:5])
    print("only offline:", list((co - cl).items())[:5])
    sys.exit(1)
PY
ok "live and offline requests identical apart from times ($(($(wc -l <"$work/off.csv") - 1)) rows)"

# The live database holds per-second health and the analysis stored at the end.
"$TBNECK" report --tier mysql --window 50ms --db "$work/live.db" --format json >"$work/live-report.json" ||
  fail "report on the live database"
python3 - "$work/live-report.json" "$work/live.csv" <<'PY' || fail "live report's request count"
import csv, json, sys
d = json.load(open(sys.argv[1]))
n = sum(1 for r in csv.DictReader(open(sys.argv[2], newline="")) if r["tier"] == "mysql")
print("live report: mysql %d requests, %d stored" % (d["requests"], n))
sys.exit(0 if n > 0 and d["requests"] == n else 1)
PY

# SIGINT ends a capture cleanly: exit 0 and the summary.
ip netns exec "$ns" "$TBNECK" capture -i tbvb --db "$work/int.db" >"$work/int.out" 2>"$work/int.err" &
cap_pid=$!
for _ in $(seq 1 100); do grep -qs 'capturing on' "$work/int.err" && break; sleep 0.1; done
kill -INT "$cap_pid"
for _ in $(seq 1 100); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] && grep -q '^capture tbvb: .*(interrupted)' "$work/int.out" ||
  { cat "$work/int.out" "$work/int.err"; fail "SIGINT: exit $rc, want 0 and a summary"; }
ok "SIGINT: clean stop with a summary"

# -Z: the device and the database are opened as root, then the process runs
# as the user (checked from /proc while it captures) and still stores.
if id nobody >/dev/null 2>&1; then
  chmod 755 "$work"
  ip netns exec "$ns" "$TBNECK" capture -i tbvb -Z nobody --duration 3s --db "$work/z.db" \
    >"$work/z.out" 2>"$work/z.err" &
  cap_pid=$!
  for _ in $(seq 1 100); do grep -qs 'capturing on' "$work/z.err" && break; sleep 0.1; done
  uid=$(awk '/^Uid:/ {print $2 "," $3 "," $4}' "/proc/$cap_pid/status" 2>/dev/null)
  nobody=$(id -u nobody)
  ip netns exec "$ns" timeout 30 tcpreplay -q -i tbva --pps 4000 --limit 4000 "$work/sim.pcap" \
    >/dev/null 2>&1
  wait "$cap_pid"
  rc=$?
  cap_pid=""
  [ "$uid" = "$nobody,$nobody,$nobody" ] || fail "-Z nobody: uids $uid while capturing, want $nobody"
  [ "$rc" -eq 0 ] || { cat "$work/z.err"; fail "-Z nobody: exit $rc"; }
  [ "$(stat -c %u "$work/z.db")" = "$nobody" ] || fail "-Z nobody: database not handed over"
  "$TBNECK" export requests --db "$work/z.db" >"$work/z.csv" || fail "-Z nobody: export"
  [ "$(wc -l <"$work/z.csv")" -gt 1 ] || fail "-Z nobody: no requests stored"
  ok "-Z nobody: ran as uid $nobody after opening the device; requests stored"
fi
echo "PASS e2e_live_veth"
