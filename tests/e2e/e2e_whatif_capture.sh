#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_whatif_capture.sh — `capture --whatif-inputs` (issue 14): whatif's
# inputs computed when the data is captured, on linking.conf (5 s, seed 3,
# ~37 000 downstream requests):
#  * the capture prints its whatif line and stores the inputs: whatif's first
#    run on the database says it read them from the store, and its forecast
#    is the same bytes as one computed from every request
#    (TBNECK_WHATIF_STORED=0) for two changes;
#  * table links is row for row the one a plain capture + whatif stores, and
#    scores >= 99% against the simulator's true parents (link_score.py);
#  * a second capture appended with the flag: the inputs are computed again
#    for the new stamp, whatif reads them, same forecast as from scratch;
#  * with --no-store: exit 2, one line.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
db=$work/c.db
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/linking.conf" --out "$work/s" --seed 3 --duration 5s -q
"$TBNECK" capture -r "$work/s.pcap" --db "$db" --whatif-inputs >"$work/cap.txt" 2>&1
grep -q '^  whatif inputs: every request linked, links and inputs stored in ' "$work/cap.txt" ||
    { echo "no whatif line in the capture's summary"; cat "$work/cap.txt"; fail=1; }
[ "$(sqlite3 "$db" "SELECT count(*) FROM models WHERE name = 'whatif'")" = 1 ] ||
    { echo "no stored inputs after the capture"; fail=1; }
wi() { "$TBNECK" whatif --db "$db" "$@"; }
wi --tier mysql --speedup 2 >"$work/t1.txt"
grep -q 'inputs read from the store$' "$work/t1.txt" ||
    { echo "whatif's first run did not read the stored inputs"; cat "$work/t1.txt"; fail=1; }
for c in "--tier mysql --speedup 2" "--tier http-8080 --pool 16"; do
    # shellcheck disable=SC2086
    TBNECK_WHATIF_STORED=0 wi $c --format json >"$work/scratch.json"
    # shellcheck disable=SC2086
    wi $c --format json >"$work/stored.json"
    cmp -s "$work/scratch.json" "$work/stored.json" ||
        { echo "$c: stored differs from scratch"; diff "$work/scratch.json" "$work/stored.json"; fail=1; }
done

# The same links as a plain capture and whatif's first run store.
"$TBNECK" capture -q -r "$work/s.pcap" --db "$work/p.db"
"$TBNECK" whatif --db "$work/p.db" --tier mysql --speedup 2 >/dev/null
for d in "$db" "$work/p.db"; do
    sqlite3 "$d" "SELECT request, parent, score, kind FROM links ORDER BY request"
done >"$work/both.txt"
rows=$(sqlite3 "$db" "SELECT count(*) FROM links")
[ "$rows" -gt 30000 ] || { echo "links table has $rows rows"; fail=1; }
python3 - "$work/both.txt" "$rows" <<'PY' || fail=1
import sys
lines = open(sys.argv[1]).read().splitlines()
n = int(sys.argv[2])
ok = len(lines) == 2 * n and lines[:n] == lines[n:]
print(f"links: {n} rows, capture --whatif-inputs and capture + whatif "
      f"{'identical' if ok else 'DIFFER'}")
sys.exit(0 if ok else 1)
PY
bash "$TB_SRCDIR/tests/e2e/lib/links_score.sh" "$db" "$work/s.requests.csv" "$work" || fail=1

# A second capture appended: a new stamp, computed again at its end.
stamp1=$(sqlite3 "$db" "SELECT stamp FROM models WHERE name = 'whatif'")
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/linking.conf" --out "$work/u" --seed 4 --duration 1s -q
"$TBNECK" capture -r "$work/u.pcap" --db "$db" --whatif-inputs >"$work/cap2.txt" 2>&1
stamp2=$(sqlite3 "$db" "SELECT stamp FROM models WHERE name = 'whatif'")
[ "$stamp1" != "$stamp2" ] || { echo "stamp unchanged after a second capture: $stamp1"; fail=1; }
wi --tier mysql --speedup 2 >"$work/t2.txt"
grep -q 'inputs read from the store$' "$work/t2.txt" ||
    { echo "after a second capture: inputs not read from the store"; cat "$work/t2.txt"; fail=1; }
TBNECK_WHATIF_STORED=0 wi --tier mysql --speedup 2 --format json >"$work/scratch2.json"
wi --tier mysql --speedup 2 --format json | cmp -s - "$work/scratch2.json" ||
    { echo "after a second capture: stored differs from scratch"; fail=1; }

# Bad input: nothing to store the inputs in.
rc=0
"$TBNECK" capture -q -r "$work/u.pcap" --no-store --whatif-inputs 2>"$work/err.txt" || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$work/err.txt")" = 1 ] &&
    grep -q -- '--whatif-inputs stores whatif' "$work/err.txt" ||
    { echo "--no-store --whatif-inputs: exit $rc"; cat "$work/err.txt"; fail=1; }
echo "stamps: $stamp1 -> $stamp2"
exit $fail
