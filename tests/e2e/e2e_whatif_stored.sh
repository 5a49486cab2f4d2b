#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_whatif_stored.sh — whatif's stored inputs and the stored links (schema
# 6), on linking.conf (5 s, seed 3, ~37 000 downstream requests):
#  * the forecast computed from every request (TBNECK_WHATIF_STORED=0), the
#    first run's (which stores) and the next runs' (read from the store) are
#    the same bytes, for three changes; the text says where the inputs came
#    from;
#  * table links against the simulator's true parents (link_score.py, rows
#    matched by tier, server, client and times; >= 99%), kinds and scores in
#    range, and its exact/ambiguous counts equal to what whatif prints and to
#    what `export requests` (its own read and link) prints;
#  * more requests captured, or the stored blob damaged: recomputed, and the
#    forecast equals the one computed from scratch.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
db=$work/s.db
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/linking.conf" --out "$work/s" --seed 3 --duration 5s -q
"$TBNECK" capture -q -r "$work/s.pcap" --db "$db"
wi() { "$TBNECK" whatif --db "$db" "$@"; }
changes=("--tier mysql --speedup 2" "--tier mysql --cores 4" "--tier http-8080 --speedup 1.5"
    "--tier http-8080 --pool 16")
for c in "${changes[@]}"; do
    # shellcheck disable=SC2086
    TBNECK_WHATIF_STORED=0 wi $c --format json >"$work/scratch.json"
    [ -z "$(sqlite3 "$db" "SELECT name FROM models WHERE name = 'whatif'")" ] || { echo "STORED=0 stored"; fail=1; }
    # shellcheck disable=SC2086
    wi $c --format json >"$work/first.json"
    # shellcheck disable=SC2086
    wi $c --format json >"$work/stored.json"
    for f in first stored; do
        cmp -s "$work/scratch.json" "$work/$f.json" ||
            { echo "$c: $f differs from scratch"; diff "$work/scratch.json" "$work/$f.json"; fail=1; }
    done
    sqlite3 "$db" 'DELETE FROM models; DELETE FROM model_parts; DELETE FROM links'
done
wi --tier mysql --speedup 2 >"$work/t1.txt"
wi --tier mysql --speedup 2 >"$work/t2.txt"
grep -q 'inputs computed (and stored)$' "$work/t1.txt" || { cat "$work/t1.txt"; fail=1; }
grep -q 'inputs read from the store$' "$work/t2.txt" || { cat "$work/t2.txt"; fail=1; }

# Table links as an export (id = row id) scored against the truth.
bash "$TB_SRCDIR/tests/e2e/lib/links_score.sh" "$db" "$work/s.requests.csv" "$work" || fail=1
"$TBNECK" export requests --db "$db" 2>"$work/export.err" >/dev/null
python3 - "$db" "$work/t2.txt" "$work/export.err" "$work/s.requests.csv" <<'PY' || fail=1
import csv, re, sqlite3, sys
db, txt, err, truth = sys.argv[1:5]
c = sqlite3.connect(db)
kinds = dict(c.execute("SELECT kind, count(*) FROM links GROUP BY kind").fetchall())
bad = c.execute("SELECT count(*) FROM links WHERE NOT (score BETWEEN 0 AND 1) OR kind NOT IN "
                "(1, 2, 3, 4) OR (kind = 1 AND score != 1) OR ((kind = 4) != (parent IS NULL))"
                ).fetchone()[0]
downstream = sum(1 for r in csv.DictReader(open(truth, newline="")) if r["parent"])
rows = sum(kinds.values())
linked = rows - kinds.get(4, 0)
m = re.search(r"links: (\d+) of (\d+) downstream requests linked \(.*\): (\d+) exact, "
              r"(\d+) ambiguous \(([0-9.]+)% of links\)", open(txt).read())
e = re.search(r"linked (\d+) of (\d+) downstream requests to a parent \(.*\): (\d+) exact, "
              r"(\d+) ambiguous", open(err).read())
want = (linked, rows, kinds.get(1, 0), kinds.get(2, 0))
print(f"links table: {rows} rows (truth: {downstream} downstream), kinds {sorted(kinds.items())}, "
      f"{bad} out of range; whatif prints {m and m.groups()}; export prints {e and e.groups()}")
ok = (bad == 0 and rows == downstream and m and e
      and tuple(map(int, m.groups()[:4])) == want and tuple(map(int, e.groups())) == want
      and abs(float(m.group(5)) - 100 * want[3] / max(linked, 1)) < 0.01)
sys.exit(0 if ok else 1)
PY

# Damaged blob: recomputed, same forecast.
wi --tier mysql --speedup 2 --format json >"$work/before.json"
sqlite3 "$db" "UPDATE model_parts SET data = zeroblob(length(data)) WHERE name = 'whatif'"
wi --tier mysql --speedup 2 >"$work/t3.txt"
grep -q 'inputs computed (and stored)$' "$work/t3.txt" || { echo "damaged blob used"; fail=1; }
wi --tier mysql --speedup 2 --format json | cmp -s - "$work/before.json" ||
    { echo "recomputed after damage differs"; fail=1; }
# More requests (a second capture): the stored inputs are stale.
stamp1=$(sqlite3 "$db" "SELECT stamp FROM models WHERE name = 'whatif'")
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/linking.conf" --out "$work/u" --seed 4 --duration 1s -q
"$TBNECK" capture -q -r "$work/u.pcap" --db "$db"
wi --tier mysql --speedup 2 >"$work/t4.txt"
grep -q 'inputs computed (and stored)$' "$work/t4.txt" || { echo "stale inputs used"; fail=1; }
stamp2=$(sqlite3 "$db" "SELECT stamp FROM models WHERE name = 'whatif'")
[ "$stamp1" != "$stamp2" ] || { echo "stamp unchanged: $stamp1"; fail=1; }
TBNECK_WHATIF_STORED=0 wi --tier mysql --speedup 2 --format json >"$work/scratch2.json"
wi --tier mysql --speedup 2 --format json | cmp -s - "$work/scratch2.json" ||
    { echo "after a second capture: stored differs from scratch"; fail=1; }
cmp -s "$work/scratch2.json" "$work/before.json" && { echo "second capture changed nothing"; fail=1; }
echo "stamps: $stamp1 -> $stamp2"
exit $fail
