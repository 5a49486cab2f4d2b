#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_fanout.sh — live capture on two threads (`capture -i IF --workers 2`,
# PACKET_FANOUT by flow hash) against one thread and against tcpdump, all
# three listening at once on one end of a veth pair in a network namespace of
# the test's own, while tcpreplay sends a simulated 3-tier capture at its own
# pace (tests/e2e/lib/report_cpu2.conf: 10 s, 116 k packets, 22 785 requests,
# a database with a knee at N* = 2) into the other.
#
# The three readers see the same packets with the same kernel timestamps, so
# the comparison is exact, times and connection ids included:
#   - `export requests` and `export connections` of --workers 2 are
#     byte-identical to those of --workers 1 and of an offline `capture -r`
#     of tcpdump's copy; `report --format json` of every tier is identical;
#   - the requests equal an offline capture of the replayed file apart from
#     the times (receive times there), and their number is the simulator's;
#   - both workers carried connections, their packets add up to the
#     summary's and to tcpdump's count, and no reader dropped a packet;
#   - usage errors (--workers with -r, -w or -c; a bad count) are one line,
#     exit 2.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, packet sockets)"; exit 77; }
for p in tcpreplay tcpdump python3; do
  command -v "$p" >/dev/null || fail "$p missing (scripts/deps.sh)"
done

ns="fo$$"
work=$(mktemp -d "$TB_BUILDDIR/e2e-fanout.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null # takes the veth pair with it
  if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$TBNECK_SIM" "$TB_SRCDIR/tests/e2e/lib/report_cpu2.conf" --out "$work/sim" -q || fail "simulator"
truth=$(($(wc -l <"$work/sim.requests.csv") - 1))
[ "$truth" -gt 1000 ] || fail "simulated capture too small ($truth requests)"

# Usage errors first: one line, exit 2, nothing created.
usage() {
  local want=$1
  shift
  "$TBNECK" capture "$@" --db "$work/u.db" >/dev/null 2>"$work/u.err"
  local rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$work/u.err")" -eq 1 ] && grep -q -- "$want" "$work/u.err" ||
    { cat "$work/u.err"; fail "capture $*: exit $rc, want 2 and one line saying $want"; }
  [ ! -e "$work/u.db" ] || fail "capture $*: a database was created"
}
usage "--workers" -r "$work/sim.pcap" --workers 2
usage "--workers" -i lo --workers 2 -w "$work/x.pcap"
usage "--workers" -i lo --workers 2 -c 10
usage "bad --workers" -i lo --workers 0
usage "bad --workers" -i lo --workers 65
ok "usage errors: one line, exit 2"

ip netns add "$ns" || fail "ip netns add"
ip -n "$ns" link add foa type veth peer name fob || fail "veth pair"
for l in lo foa fob; do ip -n "$ns" link set "$l" up || fail "link up $l"; done
ip -n "$ns" link set foa mtu 65535 && ip -n "$ns" link set fob mtu 65535 || fail "mtu"

# Started with `ip netns exec` directly (it execs): $! is the reader's pid.
ip netns exec "$ns" "$TBNECK" capture -i fob --workers 2 --db "$work/w2.db" >"$work/w2.out" \
  2>"$work/w2.err" &
pids+=($!)
ip netns exec "$ns" "$TBNECK" capture -i fob --db "$work/w1.db" >"$work/w1.out" 2>"$work/w1.err" &
pids+=($!)
ip netns exec "$ns" tcpdump -i fob -s 0 -B 65536 --time-stamp-precision=nano -w "$work/dump.pcap" \
  2>"$work/td.err" &
pids+=($!)
for _ in $(seq 1 300); do
  grep -qs 'capturing on fob' "$work/w2.err" && grep -qs 'capturing on fob' "$work/w1.err" &&
    grep -qs listening "$work/td.err" && break
  sleep 0.1
done
grep -q 'capturing on fob (window 50 ms, fan-out workers)' "$work/w2.err" ||
  { cat "$work/w2.err"; fail "--workers 2 did not start"; }
grep -q 'capturing on fob' "$work/w1.err" || { cat "$work/w1.err"; fail "--workers 1 did not start"; }
sleep 0.3
# At its own pace (so the report has its knee), at a real-time priority as
# e2e_live_veth does; the three readers see the same packets either way.
ip netns exec "$ns" timeout 60 chrt -f 10 tcpreplay -q -T nano -i foa "$work/sim.pcap" \
  >"$work/replay.out" 2>&1 || { cat "$work/replay.out"; fail "tcpreplay"; }
sleep 1.5
kill -INT "${pids[@]}"
for i in 0 1 2; do
  wait "${pids[$i]}"
  rc=$?
  [ "$rc" -eq 0 ] || { cat "$work"/*.err; fail "reader $i exited $rc"; }
done
pids=()
cat "$work/w2.out"
grep -qi 'sanitizer\|runtime error' "$work/w2.err" "$work/w1.err" && { cat "$work/w2.err"; fail "sanitizer"; }
grep -q '^capture fob: .* 0 kernel drops, 0 interface drops' "$work/w2.out" ||
  fail "--workers 2 dropped packets or printed no summary"
grep -q '^capture fob: .* 0 kernel drops, 0 interface drops' "$work/w1.out" ||
  fail "--workers 1 dropped packets or printed no summary"
grep -q '^0 packets dropped by kernel' "$work/td.err" || { cat "$work/td.err"; fail "tcpdump dropped"; }

# The workers: two lines, both busy, adding up to the summary and to tcpdump.
python3 - "$work/w2.out" "$work/td.err" <<'PY' || fail "per-worker counts"
import re, sys
out = open(sys.argv[1]).read()
total = int(re.search(r"^capture fob: [0-9.]+ s, (\d+) packets", out, re.M).group(1))
reqs = int(re.search(r"packets \(\d+ bytes\), (\d+) requests", out).group(1))
w = [tuple(map(int, m)) for m in re.findall(r"^  worker \d+: (\d+) packets, (\d+) requests", out, re.M)]
td = int(re.search(r"^(\d+) packets captured", open(sys.argv[2]).read(), re.M).group(1))
print("workers (packets, requests):", w, "summary", total, reqs, "tcpdump", td)
# tcpdump's group formed earlier; the fan-out group drops what its rings held
# before it was complete (at most the few packets of the link coming up).
ok = len(w) == 2 and all(p > 0 and r > 0 for p, r in w) and sum(p for p, _ in w) == total \
    and sum(r for _, r in w) == reqs and 0 <= td - total <= 8
sys.exit(0 if ok else 1)
PY
ok "both workers carried traffic; their packets and requests add up"

"$TBNECK" capture -r "$work/dump.pcap" --db "$work/dump.db" -q || fail "offline capture of the copy"
"$TBNECK" capture -r "$work/sim.pcap" --db "$work/sim.db" -q || fail "offline capture of the file"
for d in w2 w1 dump sim; do
  "$TBNECK" export requests --db "$work/$d.db" >"$work/$d.csv" 2>/dev/null || fail "export $d"
  "$TBNECK" export connections --db "$work/$d.db" >"$work/$d-conns.csv" || fail "export conns $d"
done
n=$(($(wc -l <"$work/w2.csv") - 1))
[ "$n" -eq "$truth" ] || fail "--workers 2: $n requests, the simulator made $truth"
for d in w1 dump; do
  cmp -s "$work/w2.csv" "$work/$d.csv" ||
    { diff <(sort "$work/w2.csv") <(sort "$work/$d.csv") | head; fail "requests: --workers 2 != $d"; }
  cmp -s "$work/w2-conns.csv" "$work/$d-conns.csv" ||
    { diff "$work/w2-conns.csv" "$work/$d-conns.csv" | head; fail "connections: --workers 2 != $d"; }
done
ok "--workers 2: $n requests and $(($(wc -l <"$work/w2-conns.csv") - 1)) connections byte-identical to --workers 1 and to the offline capture of tcpdump's copy"
python3 - "$work/w2.csv" "$work/sim.csv" <<'PY' || fail "live and offline requests differ apart from times"
import collections, csv, sys
keys = ("tier", "server", "client", "conn", "class", "req_bytes", "resp_bytes", "status", "flags")
rows = lambda p: collections.Counter(tuple(r[k] for k in keys) for r in csv.DictReader(open(p)))
a, b = rows(sys.argv[1]), rows(sys.argv[2])
print("live %d, offline %d" % (sum(a.values()), sum(b.values())))
sys.exit(0 if a == b and a else 1)
PY
ok "the same requests as the offline capture of the replayed file, apart from receive times"

for tier in $("$TBNECK" tiers --db "$work/w1.db" | awk 'NR > 1 && !/^ / {print $1}'); do
  for d in w2 w1 dump; do
    "$TBNECK" report --tier "$tier" --db "$work/$d.db" --format json >"$work/$d-$tier.json" ||
      fail "report $tier on $d"
  done
  cmp -s "$work/w2-$tier.json" "$work/w1-$tier.json" && cmp -s "$work/w2-$tier.json" "$work/dump-$tier.json" ||
    { diff "$work/w2-$tier.json" "$work/w1-$tier.json" | head; fail "report $tier differs"; }
  ok "report $tier identical: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["requests"], "requests, N*", d["n_star"])' "$work/w2-$tier.json")"
done
