#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_live_veth.sh — live capture end to end. In a network namespace of its
# own with a veth pair, a simulator capture (tests/e2e/lib/live_freeze.conf:
# one application server that freezes four times for 300 ms) is replayed
# with tcpreplay at its own pace into one end while `tbneck capture -i`
# listens on the other (with --serve, so the live event stream is checked
# too); then the same file is captured offline and both databases' requests
# are compared.
#
# What must match: arrival and departure become receive times, so timestamps
# cannot be compared one to one; everything else the engine derives from the
# packet bytes and their order can: the multiset of (tier, server, client,
# conn, class, req_bytes, resp_bytes, status, flags) rows must be identical,
# which implies equal counts per tier and class. Zero kernel drops is
# required at this rate (about 2200 packets a second; bench/bench_live.sh
# measures the limit). The live stream must flag every simulated freeze while
# it happens: an `episode` event "ongoing" for the application tier, then the
# same episode closed as kind `freeze`, at the freeze's time (shifted by the
# replay's offset); and no freeze episode where the simulator froze nothing.
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
  if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
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

"$TBNECK_SIM" "$TB_SRCDIR/tests/e2e/lib/live_freeze.conf" --out "$work/sim" -q || fail "simulator"
npkts=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)
[ "$npkts" -gt 1000 ] || fail "simulated capture too small ($npkts packets)"
# The replay takes 13 s at the capture's own pace. tcpreplay runs at a
# real-time priority: the packets are stamped as it sends them, so a loaded
# machine that delays it would stretch the pauses and add others (what drift
# remains, the checks below measure and allow for). The live capture is
# stopped by SIGINT 2 s after the replay; --duration only bounds it.
dur=120
ok "$npkts packets to replay at their own pace"

# A missing interface is one line naming it, exit 1.
nsx "$TBNECK" capture -i nosuch0 --db "$work/x.db" >/dev/null 2>"$work/missing.err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$work/missing.err")" -eq 1 ] && grep -q nosuch0 "$work/missing.err" ||
  { cat "$work/missing.err"; fail "missing interface: exit $rc, want 1 and one line naming it"; }
[ ! -e "$work/x.db" ] || fail "missing interface: a database was created anyway"
ok "missing interface: $(cat "$work/missing.err")"

# One attempt: live capture of the replay, checked against the offline
# capture and the simulator's freezes. Returns 3 when the replay itself
# stalled around too many freezes to judge them (a loaded machine delays
# tcpreplay: see the judge below); every real mismatch fails at once.
attempt() {
rm -f "$work"/live.* "$work"/off.* "$work"/sse.out "$work"/replay.out "$work"/live-conns.csv \
  "$work"/off-conns.csv
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
ip netns exec "$ns" curl -sN --max-time "$dur" "http://127.0.0.1:$port/api/stream" \
  >"$work/sse.out" 2>/dev/null &
sse_pid=$!
sleep 0.3
ip netns exec "$ns" timeout 100 chrt -f 10 tcpreplay -q -T nano -i tbva "$work/sim.pcap" \
  >"$work/replay.out" 2>&1 &
replay_pid=$!
# The capture process stalls for 1.6 s while the traffic goes on (as a
# long re-estimate on a loaded machine or a paging storm would stall it;
# longer than the live windows' 1 s grace): the kernel keeps the packets
# with their receive times, so nothing may change — no window closed before
# its packets were read, no freeze where the wire had none. With
# tcpreplay's start-up, 5.6 s after it is launched the replay is at about
# capture time +4.6 s .. +5.0 s: the stall takes in the second pause (+5.0 s
# .. +5.3 s), which must still be flagged from its own windows. Without the
# tick's drain (capture_live.c) that pause came out late and short, or not
# a freeze at all, in 3 runs of 3.
sleep 5.6
kill -STOP "$cap_pid"
sleep 1.6
kill -CONT "$cap_pid"
wait "$replay_pid" || { cat "$work/replay.out"; fail "tcpreplay"; }
ok "replayed: $(grep -m1 -i 'Actual' "$work/replay.out" | sed 's/^ *//')"
sleep 2
kill "$sse_pid" 2>/dev/null
wait "$sse_pid" 2>/dev/null
kill -INT "$cap_pid"
for _ in $(seq 1 300); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cap_pid" 2>/dev/null && fail "live capture did not stop after SIGINT"
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

# Connections, live as offline: the same connections with the same requests,
# packets and bytes, opened and closed the same way (times differ).
"$TBNECK" export connections --db "$work/live.db" >"$work/live-conns.csv" || fail "export live conns"
"$TBNECK" export connections --db "$work/off.db" >"$work/off-conns.csv" || fail "export offline conns"
python3 - "$work/live-conns.csv" "$work/off-conns.csv" <<'PY' || fail "live and offline connections differ"
import collections, csv, sys
key = ("client", "server", "client_tier", "server_tier", "opened", "closed", "requests", "packets",
       "bytes_c2s", "bytes_s2c")
def rows(p):
    return collections.Counter(tuple(r[k] for k in key) for r in csv.DictReader(open(p)))
live, off = rows(sys.argv[1]), rows(sys.argv[2])
print("connections: live %d, offline %d, idle (no request) %d" %
      (sum(live.values()), sum(off.values()), sum(n for r, n in off.items() if r[6] == "0")))
if not off or live != off:
    print("only live:", list((live - off).items())[:3])
    print("only offline:", list((off - live).items())[:3])
    sys.exit(1)
PY
ok "live and offline connections identical apart from times"
# Live episodes against the simulator's freezes. Requests paired by connection
# and order give receive time against capture time; a live time is mapped back
# by the median offset of the requests around it (tcpreplay drifts when the
# machine is loaded). An episode is cut at 50 ms windows, so it may start up
# to one window before a freeze and end up to one window after it, plus the
# replay's local jitter. The front tier (http) waits on the frozen one
# (http-8080) and stops with it; a freeze must be flagged by an episode that
# covers its start, within 1 s of it either side, announced
# "ongoing" before it ended and then closed as kind `freeze`, on a tier with
# an `analysis` event before it (the rule in force; since v0.3 a stall is a
# freeze episode with or without a threshold), and is judged only when one
# of the two has one. The front tier waits on the frozen one (its calls are
# in flight), so its episode there is not a freeze: the hit is the frozen
# tier's. Where the replay itself stalled (offsets of the requests around,
# less the replay's steady drift, spread by more than two windows around a
# pause, by more than one window around a freeze episode elsewhere) the live
# wire had pauses the capture does not have, and the span is reported, not
# judged. At least 3 of the 4 freezes must be judged (the first gives the
# analysis its first congestion to estimate from); with fewer, the attempt
# is made again (exit 3), at most three times.
python3 - "$work/sse.out" "$work/sim.freezes.csv" "$work/live.csv" "$work/off.csv" <<'PY'
import bisect, collections, csv, json, sys
sse, freezes_csv, live_csv, off_csv = sys.argv[1:]
W, AROUND, STEP = 50_000_000, 200_000_000, 30_000_000

def arrivals(path):
    by = collections.defaultdict(list)
    for r in csv.DictReader(open(path, newline="")):
        by[r["conn"]].append(int(r["arrival_ns"]))
    return by

live, off = arrivals(live_csv), arrivals(off_csv)
pl = sorted((a, a - b) for c in off for a, b in zip(sorted(live[c]), sorted(off[c])))
pc = sorted((a - o, o) for a, o in pl)  # by capture time

def around(pairs, t0, t1):
    """Offsets of the requests within AROUND of [t0, t1] (at least the nearest 10)."""
    keys = [p[0] for p in pairs]
    i, j = bisect.bisect_left(keys, t0 - AROUND), bisect.bisect_right(keys, t1 + AROUND)
    i, j = min(i, max(0, j - 10)), max(j, min(len(pairs), i + 10))
    return sorted(o for _, o in pairs[i:j])

def stalled(pairs, t0, t1):
    """How far the replay stalled around [t0, t1]: the spread of the offsets
    of the requests around it after a straight line through them is taken
    out. A replay that runs uniformly slow (it drifts on a loaded machine)
    stretches time without making pauses: ~0; one that stopped for X ms
    leaves a step of X, and a step keeps a spread of about X."""
    keys = [p[0] for p in pairs]
    i, j = bisect.bisect_left(keys, t0 - AROUND), bisect.bisect_right(keys, t1 + AROUND)
    i, j = min(i, max(0, j - 10)), max(j, min(len(pairs), i + 10))
    xs, ys = [p[0] for p in pairs[i:j]], [p[1] for p in pairs[i:j]]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    r = [y - my - b * (x - mx) for x, y in zip(xs, ys)]
    return max(r) - min(r)

def back(t0, t1):
    """A live span as capture time, with its slack and the replay's spread there."""
    o = around(pl, t0, t1)
    med, spread = o[len(o) // 2], o[-1] - o[0]
    return t0 - med, t1 - med, W + spread, spread

print("replay: offset drifted %.3f s from start to end" % ((pl[-1][1] - pl[0][1]) / 1e9))
freezes = [(int(r["start_ns"]), int(r["end_ns"])) for r in csv.DictReader(open(freezes_csv))]
f0 = freezes[0][0]
rel = lambda t: (t - f0) / 1e9
TIERS = ("http", "http-8080")  # the front tier waits on the frozen one: it stops too
ongoing, closed = {}, []
last_window = {t: 0 for t in TIERS}  # newest window start published so far, live
rules = {t: [] for t in TIERS}  # (capture time from which in force, has a threshold)
ev = None
for line in open(sse):
    line = line.rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev in ("analysis", "episode", "window"):
        e = json.loads(line[6:])
        if e["tier"] not in TIERS:
            continue
        if ev == "window":
            last_window[e["tier"]] = max(last_window[e["tier"]], e["start_ns"])
        elif ev == "analysis":
            has = e.get("n_star") is not None or e.get("n_star_fit") is not None
            rules[e["tier"]].append((back(e["to_ns"], e["to_ns"])[0], has))
            print("analysis of %s over windows up to %+.3f s: N* %s, fit %s"
                  % (e["tier"], rel(rules[e["tier"]][-1][0]), e.get("n_star"),
                     e.get("n_star_fit")))
        elif e["ongoing"]:
            ongoing.setdefault((e["tier"], e["start_ns"]), last_window[e["tier"]])
        else:
            # Announced while it happened: "ongoing" published before the
            # window where the episode ended had been.
            seen = ongoing.get((e["tier"], e["start_ns"]))
            a, b, slack, spread = back(e["start_ns"], e["end_ns"])
            closed.append((a, b, e["kind"], seen is not None and seen < e["end_ns"], slack, spread,
                           e["tier"]))

def in_force(tier, t):
    """Whether a rule is in force for the tier at capture time t: an analysis
    came before it (with or without a threshold: since v0.3 a stall is a
    freeze episode without a knee)."""
    return any(when <= t for when, _ in rules[tier])

bad = judged = 0
for fa, fb in freezes:
    spread = stalled(pc, fa, fb)
    near = [c for c in closed if c[0] < fb + c[4] and fa - c[4] < c[1]]
    desc = ["%s %+.3f..%+.3f %s%s" % (h[6], rel(h[0]), rel(h[1]), h[2],
                                      "" if h[3] else " (not announced while ongoing)")
            for h in near]
    tiers = [t for t in TIERS if in_force(t, fa)]
    if not tiers:
        print("freeze %+.3f s: no rule in force yet, not judged: %s" % (rel(fa), desc))
        continue
    if spread > 2 * W:
        print("freeze %+.3f s: the replay stalled around it (spread %.0f ms), not judged: %s"
              % (rel(fa), spread / 1e6, desc))
        continue
    judged += 1
    # Covers the pause's start, and is the pause's: an episode is a maximal
    # run of congested windows, so it may begin with load that was already
    # high and end once the backlog is drained below the threshold in force;
    # up to 1 s either side (the pauses are 2.5 s apart).
    S = 1_000_000_000
    hit = [h for h in near if h[6] in tiers and h[2] == "freeze" and h[3] and
           fa - S <= h[0] <= fa + h[4] and fa < h[1] <= fb + S + h[4]]
    print("%s freeze %+.3f s .. %+.3f s (rule in force for %s): live episodes %s"
          % ("ok  " if hit else "FAIL", rel(fa), rel(fb), " ".join(tiers), desc))
    bad += not hit
for a, b, kind, _, slack, spread, tier in closed:
    if kind != "freeze" or any(a < fb + slack and fa - slack < b for fa, fb in freezes):
        continue
    # One stalled window (under 15% of its completions with 2 requests
    # inside) makes a freeze episode: a replay that stopped for about 40 ms
    # makes one on the live wire, and there the freeze is right. Only that
    # exempts: the replay's step there net of its steady drift (a replay
    # that runs uniformly slow makes no pause) over STEP, 30 ms (measured:
    # 39 ms and 115 ms where a loaded machine delayed tcpreplay into such a
    # window; 4-5 ms around the false freezes below). The raw spread, drift
    # included, used to exempt too and hid a false freeze at the tick after
    # the 1.6 s stop below (a re-estimate that changed the work unit inside
    # an episode: stream.c); and the step was measured on the live time axis
    # at capture times, so it was always 0. a and b are capture times: pc.
    st = stalled(pc, a, b)
    if st > STEP:
        print("a live freeze episode of %s %+.3f s .. %+.3f s where the replay stalled (step "
              "%.0f ms net of the drift)" % (tier, rel(a), rel(b), st / 1e6))
    else:
        print("FAIL: a live freeze episode of %s %+.3f s .. %+.3f s where nothing froze (replay "
              "step %.0f ms net of the drift)" % (tier, rel(a), rel(b), st / 1e6))
        bad += 1
print("live episodes of %s: %d closed (%d freeze), %d opened; simulated freezes: %d, judged %d"
      % ("/".join(TIERS), len(closed), sum(1 for c in closed if c[2] == "freeze"), len(ongoing),
         len(freezes), judged))
if bad or len(freezes) != 4:
    sys.exit(1)
if judged < 3:
    print("only %d of the freezes after the first could be judged" % judged)
    sys.exit(3)
PY
rc=$?
[ "$rc" -eq 3 ] && return 3
[ "$rc" -eq 0 ] || fail "live episode events do not match the simulator's freezes"
ok "live stream: every simulated freeze flagged while it happened, nothing else flagged freeze"
}

# Up to three attempts (each about 25 s): only a replay that stalled around
# the freezes, not a wrong answer, is tried again.
for try in 1 2 3; do
  attempt
  rc=$?
  [ "$rc" -eq 0 ] && break
  [ "$try" -lt 3 ] ||
    fail "the replay stalled around the freezes in 3 attempts of 3: too loaded a machine to judge them"
  echo "attempt $try: the replay stalled around the freezes; once more"
done

# The live database holds per-second health and the analysis stored at the end.
"$TBNECK" report --tier http-8080 --window 50ms --db "$work/live.db" --format json >"$work/live-report.json" ||
  fail "report on the live database"
python3 - "$work/live-report.json" "$work/live.csv" <<'PY' || fail "live report's request count"
import csv, json, sys
d = json.load(open(sys.argv[1]))
n = sum(1 for r in csv.DictReader(open(sys.argv[2], newline="")) if r["tier"] == "http-8080")
print("live report: http-8080 %d requests, %d stored" % (d["requests"], n))
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
