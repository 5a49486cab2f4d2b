#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_max_memory.sh — issue 13, finding 10: `capture --max-memory` caps flow
# and parser state, evicting the least recently active flows (counted), and
# requests left without an answer are counted per tier and stored.
#
# Input (tests/e2e/lib/mkpcap_abandoned.py): N HTTP connections in waves of
# 5000, each with one answered request and then one that is never answered,
# none closed. Exact by construction: N requests, N abandoned, 0 unanswered;
# with a flow cap F every connection but the last F is evicted (N - F).
# Oracles: the construction, the connections table's close reasons, and the
# kernel's VmHWM for memory: peak RSS minus the same run's baseline on a
# 100-connection file stays under the cap (the same file without the cap
# needs several times more).
set -uo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 not installed (scripts/deps.sh)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
gen="$TB_SRCDIR/tests/e2e/lib/mkpcap_abandoned.py"
N=60000
CAP_MIB=32

python3 "$gen" "$work/ab.pcap" "$N" --wave 5000 || { echo "FAIL: generator"; exit 1; }
python3 "$gen" "$work/tiny.pcap" 100 --wave 100 || { echo "FAIL: generator"; exit 1; }

# peak KIB CMD...: runs CMD and prints its VmHWM in KiB (GNU time's %M).
peak() { /usr/bin/time -f '%M' -o "$work/time" "$@" >/dev/null 2>"$work/peak.err" || {
    cat "$work/peak.err"; echo "FAIL: $*" >&2; }; tail -1 "$work/time"; }
# The cap is on flow and parser state: measured with the pread reader, whose
# buffer is fixed (the mapped reader keeps up to two 8 MiB windows of the
# file's pages resident, page cache counted in RSS; bounded separately below).
base=$(TBNECK_PCAP_READER=pread peak "$TBNECK" capture -q --no-store -r "$work/tiny.pcap" \
    --max-memory "${CAP_MIB}m")
capped=$(TBNECK_PCAP_READER=pread peak "$TBNECK" capture -q --no-store -r "$work/ab.pcap" \
    --max-memory "${CAP_MIB}m")
mapped=$(peak "$TBNECK" capture -q --no-store -r "$work/ab.pcap" --max-memory "${CAP_MIB}m")
echo "peak RSS: baseline $base KiB, $N connections under --max-memory ${CAP_MIB}m: $capped KiB" \
    "($mapped KiB with the mapped reader)"
[ $((capped - base)) -le $((CAP_MIB * 1024)) ] ||
    fail "flow and parser state took $((capped - base)) KiB, over the cap of $((CAP_MIB * 1024))"
[ $((mapped - capped)) -le $((17 * 1024)) ] ||
    fail "the mapped reader added $((mapped - capped)) KiB, more than two 8 MiB windows"

# The counts, stored.
rc=0
"$TBNECK" capture -v -r "$work/ab.pcap" --db "$work/ab.db" --max-memory "${CAP_MIB}m" \
    >"$work/cap.out" 2>"$work/cap.err" || rc=$?
cat "$work/cap.err"
[ "$rc" = 0 ] || fail "capture: exit $rc"
F=$(sed -n 's/.*--max-memory [0-9]* bytes: at most \([0-9]*\) flows.*/\1/p' "$work/cap.err")
[ -n "$F" ] && [ "$F" -lt "$N" ] || fail "no flow cap below $N reported ('$F')"
ev=$((N - F))
row=$(sqlite3 "$work/ab.db" "SELECT requests, requests_seen, unanswered, abandoned, evicted_flows, \
    memory_evicted, state FROM captures")
[ "$row" = "$N|$N|0|$N|$ev|$ev|complete" ] ||
    fail "captures row '$row', want '$N|$N|0|$N|$ev|$ev|complete'"
tiers=$(sqlite3 "$work/ab.db" "SELECT t.name, c.seen, c.stored, c.unanswered, c.abandoned \
    FROM capture_tiers c JOIN tiers t ON t.id = c.tier_id")
[ "$tiers" = "http|$N|$N|0|$N" ] || fail "capture_tiers '$tiers', want 'http|$N|$N|0|$N'"
closed=$(sqlite3 "$work/ab.db" "SELECT closed, count(*) FROM connections GROUP BY closed ORDER BY 1" |
    tr '\n' ' ')
[ "$closed" = "end|$F evicted|$ev " ] || fail "connections closed '$closed', want 'end|$F evicted|$ev'"
n=$(sqlite3 "$work/ab.db" "SELECT count(*) FROM requests r JOIN classes c ON c.id = r.class_id \
    WHERE c.fingerprint = 'GET /answered' AND r.status = 200")
[ "$n" = "$N" ] || fail "$n answered requests stored, want $N"
grep -q "tier http  *$N requests, 0 unanswered, $N abandoned" "$work/cap.err" ||
    fail "the summary's tier line"
grep -q "abandoned requests $N .*evicted flows $ev (--max-memory)" "$work/cap.err" ||
    fail "the summary's abandoned line"
"$TBNECK" capture -q -r "$work/ab.pcap" --max-memory 10k --db "$work/x.db" 2>"$work/bad.err"
rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$work/bad.err")" = 1 ] && grep -q "bad --max-memory '10k'" "$work/bad.err" ||
    fail "--max-memory 10k: exit $rc, $(cat "$work/bad.err")"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "PASS: $N requests, $N abandoned, $ev evicted (cap $F flows), state $((capped - base)) KiB <= ${CAP_MIB} MiB"
