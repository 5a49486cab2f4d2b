#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_time_profile.sh — issue 16: --from/--to in the forms the report prints
# (2023-11-14 22:13:25.350, a bare time of day), relative to the stored span
# (start+1s, end-1.5s) and to the wall clock (now-2s, the clock pinned by
# libfaketime), on report, export windows, diagnose and the API; and the
# per-class profile (report --profile, json and csv) against a Python
# recomputation over `export requests` (tests/e2e/lib/profile_check.py).
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"
work=$(mktemp -d "$TB_BUILDDIR/e2e-time.XXXXXX")
trap 'stop_serve; rm -rf "$work"' EXIT
check="$TB_SRCDIR/tests/e2e/lib/profile_check.py"
faketime_so=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
[ -n "$faketime_so" ] || fail "libfaketime not installed (scripts/deps.sh: faketime)"

# quick.conf starts at 1700000000 s = 2023-11-14 22:13:20 UTC.
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/q" --duration 5s -q ||
  fail "simulator"
db="$work/q.db"
"$TBNECK" capture -r "$work/q.pcap" --db "$db" >"$work/capture.out" 2>&1 ||
  { cat "$work/capture.out"; fail "capture"; }
"$TBNECK" export requests --db "$db" >"$work/req.csv" || fail "export requests"

# profile TIER SERVER FROM_ORACLE TO_ORACLE [tbneck args...]: the profile of the
# range given to tbneck equals the oracle's over FROM_ORACLE..TO_ORACLE.
n=0
tbn() { "$TBNECK" "$@"; }
profile() {
  local tier=$1 server=$2 lo=$3 hi=$4; shift 4
  n=$((n + 1))
  local sv=()
  [ "$server" != "*" ] && sv=(--server "$server")
  tbn report --db "$db" --tier "$tier" "${sv[@]}" --profile --format json "$@" \
    >"$work/p$n.json" 2>"$work/p$n.err" || { cat "$work/p$n.err"; fail "report --profile $*"; }
  tbn report --db "$db" --tier "$tier" "${sv[@]}" --profile --format csv "$@" \
    >"$work/p$n.csv" 2>>"$work/p$n.err" || { cat "$work/p$n.err"; fail "report --profile csv $*"; }
  python3 "$check" "$work/req.csv" "$tier" "$server" "$lo" "$hi" "$work/p$n.json" \
    "$work/p$n.csv" || fail "profile of $tier $server $*"
  ok "profile $tier $server $*"
}

S=1700000000
profile mysql '*' - -
profile http-8080 '*' - -
profile http-8080 10.0.3.2:8080 - -
profile http '*' - -
# The report's own format, UTC, to the ns the oracle is given.
profile mysql '*' 1700000001000000000 1700000003500000000 \
  --from "2023-11-14 22:13:21" --to "2023-11-14 22:13:23.5"
profile http-8080 '*' 1700000001250000000 1700000004000000000 \
  --from "22:13:21.250" --to "2023-11-14T22:13:24Z"
profile mysql '*' 1700000002000000001 1700000004000000000 \
  --from "2023-11-14 22:13:22.000000001 UTC" --to 1700000004
# Relative to the tier's first arrival and last departure.
profile mysql '*' start+1 end-1.5 --from start+1s --to end-1.5s
profile http-8080 10.0.3.1:8080 start+1.5 end-0 --from +1.5 --to end
# Relative to the wall clock, pinned by libfaketime at 22:13:24 (frozen).
export FAKETIME_DONT_FAKE_MONOTONIC=1
pin() {
  LD_PRELOAD="$faketime_so" FAKETIME="2023-11-14 22:13:24" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$@"
}
[ "$(pin date -u +%s)" = 1700000004 ] || fail "libfaketime does not pin the clock"
tbn() { pin "$TBNECK" "$@"; }
profile mysql '*' 1700000002000000000 1700000003750000000 --from now-2s --to now-250ms
tbn() { "$TBNECK" "$@"; }

# export windows: exactly the 50 windows of [22:13:21, 22:13:23.5).
"$TBNECK" export windows --db "$db" --tier mysql --from "2023-11-14 22:13:21" \
  --to "22:13:23.500" >"$work/w.csv" || fail "export windows with UTC times"
python3 - "$work/w.csv" <<'PY' || fail "export windows range"
import csv, sys
got = [int(r["start_ns"]) for r in csv.DictReader(open(sys.argv[1]))]
want = [1700000001000000000 + k * 50000000 for k in range(50)]
assert got == want, (len(got), got[:2], got[-2:])
PY
ok "export windows --from '2023-11-14 22:13:21' --to 22:13:23.500: the 50 windows"
# diagnose: the UTC form and a time of day give the answer of the same bounds in ns.
"$TBNECK" diagnose --db "$db" --format json --from "2023-11-14 22:13:21" --to 22:13:23.5 \
  >"$work/d1.json" || fail "diagnose with UTC times"
"$TBNECK" diagnose --db "$db" --format json --from 1700000001000000000 \
  --to 1700000003500000000 >"$work/d2.json" || fail "diagnose with ns"
cmp -s "$work/d1.json" "$work/d2.json" || fail "diagnose: UTC times differ from the same ns"
ok "diagnose --from '2023-11-14 22:13:21' --to 22:13:23.5 = the same range in ns"

# ISO-8601 strings beside the *_ns integers of report and diagnose JSON:
# each equal to Python's rendering of the integer; an episode's ISO start
# given back as --from starts the range at that episode's first window.
"$TBNECK" report --db "$db" --tier http --format json >"$work/r.json" || fail "report json"
"$TBNECK" diagnose --db "$db" --format json >"$work/d.json" || fail "diagnose json"
python3 - "$work/r.json" "$work/d.json" >"$work/iso.out" <<'PY' || { cat "$work/iso.out"; fail "ISO times"; }
import datetime, json, sys
def iso(ns):
    s, f = divmod(ns, 10**9)
    t = datetime.datetime.fromtimestamp(s, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % f
n = 0
def walk(o):
    global n
    if isinstance(o, dict):
        for k, v in o.items():
            if k.endswith("_ns") and k[:-3] in ("from", "to", "start", "end", "period_start"):
                assert o[k[:-3]] == iso(v), (k, v, o[k[:-3]])
                n += 1
            walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
r = json.load(open(sys.argv[1]))
walk(r); walk(json.load(open(sys.argv[2])))
assert len(r["episodes"]) >= 5 and n >= 2 * len(r["episodes"]) + 4, (n, len(r["episodes"]))
print(n, r["episodes"][3]["start"], r["episodes"][3]["start_ns"])
PY
read -r niso ep_iso ep_ns <"$work/iso.out"
"$TBNECK" report --db "$db" --tier http --format json --from "$ep_iso" >"$work/r2.json" ||
  fail "report --from $ep_iso"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["from_ns"] == int(sys.argv[2]), d["from_ns"]' \
  "$work/r2.json" "$ep_ns" || fail "--from $ep_iso: the range does not start at $ep_ns"
ok "$niso ISO strings equal their *_ns; --from $ep_iso (an episode's start) starts there"

# The API: the windows of the range given as the report prints it.
start_serve "$db" "$work"
api() {
  curl -s -o "$work/api.json" -w '%{http_code}' "http://127.0.0.1:$port/api/windows?$1"
}
code=$(api "tier=mysql&from=2023-11-14%2022:13:21&to=2023-11-14%2022:13:23.5")
[ "$code" = 200 ] || { cat "$work/api.json"; fail "API from/to as UTC: HTTP $code"; }
python3 - "$work/api.json" <<'PY' || fail "API window range"
import json, sys
d = json.load(open(sys.argv[1]))
want = [1700000001000000000 + k * 50000000 for k in range(50)]
assert d["count"] == 50 and d["start_ns"] == want, (d["count"], d["start_ns"][:2])
PY
code=$(api "tier=mysql&from=start%2B1s&to=end-1.5s")
[ "$code" = 200 ] || { cat "$work/api.json"; fail "API from=start+1s: HTTP $code"; }
ok "API from=2023-11-14 22:13:21&to=...23.5: the 50 windows; start+1s/end-1.5s answered"
code=$(api "tier=mysql&from=2023-02-30%2000:00:00")
[ "$code" = 400 ] && grep -q "bad 'from' time" "$work/api.json" ||
  { cat "$work/api.json"; fail "API bad date: HTTP $code, want 400"; }
ok "API from=2023-02-30: 400"
stop_serve

# Bad times: exit 2, one line naming the option and the value.
for t in "2023-02-30 00:00:00" "2023-11-14 22:13" "now-5parsecs" "yesterday" "25:00:00"; do
  rc=0
  "$TBNECK" report --db "$db" --tier mysql --from "$t" >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -qF -- "--from '$t'" "$work/err" &&
    [ ! -s "$work/out" ] || { cat "$work/err"; fail "--from '$t': exit $rc, want 2 and one line"; }
done
ok "bad times: exit 2, one line each"
# --profile is one table: not with jsonl or --plot.
rc=0
"$TBNECK" report --db "$db" --tier mysql --profile --format jsonl >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 2 ] || fail "--profile --format jsonl: exit $rc, want 2"
echo "PASS"
