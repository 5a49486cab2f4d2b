#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_critpath.sh — the critical path in `diagnose --format json` and `report
# --format json` against the simulator's truth (tests/e2e/lib/critpath_check.py:
# each tier's share of the front tier's response time, mean and within the
# p95 requests, from the true request trees), on a database-bound run
# (cause-db-cpu) and a pool-bound one (cause-pool), and the text sections.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
for conf in cause-db-cpu cause-pool; do
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/$conf.conf" --out "$work/$conf" --seed 1 -q
    "$TBNECK" capture -q -r "$work/$conf.pcap" --db "$work/$conf.db"
    "$TBNECK" diagnose --format json --db "$work/$conf.db" >"$work/$conf.diag.json"
    echo "== $conf: diagnose"
    python3 "$TB_SRCDIR/tests/e2e/lib/critpath_check.py" "$work/$conf.requests.csv" \
        "$work/$conf.diag.json" || fail=1
    "$TBNECK" report --tier mysql --format json --db "$work/$conf.db" >"$work/$conf.rep.json"
    echo "== $conf: report"
    python3 "$TB_SRCDIR/tests/e2e/lib/critpath_check.py" "$work/$conf.requests.csv" \
        "$work/$conf.rep.json" >/dev/null || { echo "report differs"; fail=1; }
    "$TBNECK" diagnose --db "$work/$conf.db" >"$work/$conf.diag.txt"
    grep -q '^critical path of http requests' "$work/$conf.diag.txt" ||
        { echo "diagnose text: no critical path"; fail=1; }
done
# The stacked bars per class: diagnose --plot's third picture, FILE-path.EXT.
"$TBNECK" diagnose --db "$work/cause-db-cpu.db" --plot "$work/d.png" >/dev/null
"$TBNECK" diagnose --db "$work/cause-db-cpu.db" --plot "$work/d.svg" >/dev/null
head -c 4 "$work/d-path.png" | od -An -tx1 | grep -q '89 50 4e 47' &&
    grep -q 'mysql queue' "$work/d-path.svg" || { echo "FAIL: critical path plot"; fail=1; }
# The database-bound run's slow requests are the database's queue.
python3 - "$work/cause-db-cpu.diag.json" <<'PY' || fail=1
import json, sys
p95 = json.load(open(sys.argv[1]))["critical_path"]["classes"][0]["p95"]
print("cause-db-cpu p95:", p95)
sys.exit(0 if p95["mysql queue"] > 0.5 and p95["mysql queue"] == max(p95.values()) else 1)
PY
# A damaged database: requests whose class id the catalog does not hold (a
# segfault in the critical path's class order before). diagnose still
# answers, naming such a class "?".
cp "$work/cause-db-cpu.db" "$work/damaged.db"
sqlite3 "$work/damaged.db" "UPDATE requests SET class_id = 9999 WHERE rowid % 7 = 0" ||
    { echo "FAIL: sqlite3"; fail=1; }
"$TBNECK" diagnose --recompute --db "$work/damaged.db" >"$work/damaged.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q '^  ?: [0-9]* requests' "$work/damaged.txt" ||
    { echo "FAIL: diagnose on unknown class ids: exit $rc"; tail -3 "$work/damaged.txt"; fail=1; }
exit $fail
