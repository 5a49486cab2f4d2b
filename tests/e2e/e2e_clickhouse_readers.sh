#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_clickhouse_readers.sh — `tiers --store` and `serve --store` (issue 17,
# item 1) on a private clickhouse-server (tests/e2e/lib/clickhouse.sh): two
# sensors store disjoint BPF halves of a simulated 3-tier capture
# (sim/examples/quick.conf: `tcp port 3306` and the rest), and
#   - `tiers --store` lists every tier, server and request count exactly as
#     `tiers --db` does for one sensor that saw all of it in SQLite (tiers in
#     the copy's catalog order: by first request);
#   - `serve --store` answers /api/analysis and /api/windows of every tier
#     byte for byte as `serve --db` over that SQLite file, /api/tiers and
#     /metrics with the same entries (tier ids and row order follow the
#     copy's catalog; packets are a sensor's, not stored: 0), and removes its temporary copy when stopped by SIGINT;
#   - `--store sqlite:FILE` is `--db FILE` for both; a malformed URL exits 2
#     and an unreachable server 1, each with one line.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
# shellcheck source=lib/clickhouse.sh
source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
ch_test_setup
# Copies of the store go to $TMPDIR: a folder of our own, so that others' do not count.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q
pcap="$work/sim.pcap"
ch_start a || fail "clickhouse-server did not start"
url="clickhouse://127.0.0.1:${ch_http[a]}/merged"
"$TBNECK" capture -q -r "$pcap" --db "$work/one.db"
"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor db-switch tcp port 3306
"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor web-switch not tcp port 3306

# tiers
"$TBNECK" tiers --db "$work/one.db" >"$work/t1.txt"
"$TBNECK" tiers --store "$url" >"$work/t2.txt"
"$TBNECK" tiers --store "sqlite:$work/one.db" >"$work/t3.txt"
# The same blocks (a tier line and its servers); their order follows catalog
# ids, which in the copy follow each server's first request (docs/clickhouse.md).
python3 - "$work/t1.txt" "$work/t2.txt" <<'PY' || { diff "$work/t1.txt" "$work/t2.txt"; fail "tiers --store differs"; }
import sys
def blocks(p):
    lines = open(p).read().splitlines()
    out, cur = [], None
    for l in lines[1:]:
        if not l.startswith(" "):
            cur = [l]; out.append(cur)
        else:
            cur.append(l)
    return lines[0], sorted(map(tuple, out))
a, b = blocks(sys.argv[1]), blocks(sys.argv[2])
sys.exit(0 if a == b and a[1] else 1)
PY
cmp "$work/t1.txt" "$work/t3.txt" || fail "tiers --store sqlite: differs from --db"
ntiers=$(grep -c '^[a-z]' "$work/t1.txt")
[ "$ntiers" -ge 3 ] || { cat "$work/t1.txt"; fail "only $ntiers tiers listed"; }
echo "tiers --store: $ntiers tiers, servers and counts as one sensor's SQLite"

# serve_start NAME ARGS...: starts serve (its pid in pids), sets port.
serve_start() {
    local name=$1
    shift
    "$TBNECK" serve --listen 127.0.0.1:0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
    for _ in $(seq 100); do
        grep -qs '^serving http' "$work/$name.out" && break
        kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/$name.err"; fail "serve $name exited"; }
        sleep 0.1
    done
    port=$(sed -n 's#^serving http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$work/$name.out")
}
serve_start one --db "$work/one.db"
p1=$port
serve_start ch --store "$url"
p2=$port
spid=${pids[-1]}
grep -q "(database $url)" "$work/ch.out" || { cat "$work/ch.out"; fail "serve --store does not name the store"; }
paths="/api/tiers /metrics"
for t in $(sed -n 's/^\([a-z][a-z0-9-]*\) .*/\1/p' "$work/t1.txt"); do
    paths="$paths /api/analysis?tier=$t /api/windows?tier=$t"
done
for p in $paths; do
    curl -sf "http://127.0.0.1:$p1$p" >"$work/a1" || fail "serve --db: GET $p"
    curl -sf "http://127.0.0.1:$p2$p" >"$work/a2" || fail "serve --store: GET $p"
    [ -s "$work/a1" ] || fail "GET $p: empty"
    # Listings in catalog order (/api/tiers and its ids, /metrics) are
    # compared as sets: the copy numbers tiers by first request.
    python3 - "$work/a1" "$work/a2" "$p" <<'PY' ||
import json, sys
a, b, path = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
if path == "/api/tiers":
    norm = lambda s: sorted((dict(t, id=None) for t in json.loads(s)["tiers"]), key=lambda t: t["name"])
elif path == "/metrics":
    # Capture counters stay with each sensor (not stored in ClickHouse).
    norm = lambda s: sorted(l for l in s.splitlines() if not l.startswith("tbneck_packets_total"))
else:
    norm = lambda s: s
sys.exit(0 if norm(a) == norm(b) else 1)
PY
        { head -c 300 "$work/a1"; echo; head -c 300 "$work/a2"; fail "GET $p differs"; }
done
ls "$TMPDIR"/tbneck-clickhouse-* >/dev/null 2>&1 || fail "serve --store: no copy while serving"
kill -INT "$spid"
wait "$spid" || fail "serve --store: exit status after SIGINT"
ls "$TMPDIR"/tbneck-clickhouse-* >/dev/null 2>&1 && fail "serve --store left its copy behind"
echo "serve --store: $(wc -w <<<"$paths") endpoints as serve --db; the copy removed at the end"

# Errors: one line each.
expect() { # STATUS TEXT COMMAND...
    local want=$1 text=$2 rc=0
    shift 2
    "$@" >/dev/null 2>"$work/err" || rc=$?
    [ "$rc" -eq "$want" ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "$text" "$work/err" ||
        { cat "$work/err"; fail "$* exited $rc, want $want and one line with '$text'"; }
}
expect 2 "expected sqlite:FILE" "$TBNECK" tiers --store "mysql://h/x"
expect 2 "expected sqlite:FILE" "$TBNECK" serve --listen 127.0.0.1:0 --store "mysql://h/x"
expect 1 "Couldn't connect" "$TBNECK" tiers --store "clickhouse://127.0.0.1:1/x"
expect 1 "Couldn't connect" "$TBNECK" serve --listen 127.0.0.1:0 --store "clickhouse://127.0.0.1:1/x"
echo "errors: one line, exit 2 (URL) and 1 (unreachable)"
echo PASS
