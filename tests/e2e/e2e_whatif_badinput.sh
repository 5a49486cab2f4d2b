#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_whatif_badinput.sh — whatif refuses a change the data cannot answer
# before computing anything (issue 14): on a fresh database (cause-db-cpu,
# seed 1: users -> web `http` -> app `http-8080` -> db `mysql`, per the
# simulator's configuration) `--tier http` (the front tier: users call it)
# and `--pool` on `mysql` (it calls no tier) exit 2 with the documented line
# and leave no `models` and no `links` row behind (the inputs were not
# computed). A good tier afterwards still gets the right forecast (the
# database 2x faster against the simulator re-run, whatif_check.py), and the
# same refusals on the now stored inputs give the same line and status.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
b=$work/b
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/cause-db-cpu.conf" --out "$b.base" --seed 1 -q
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/cause-db-cpu.conf" --out "$b.rerun" --seed 1 \
    --set tier.db.speedup=2 -q
"$TBNECK" capture -q -r "$b.base.pcap" --db "$b.db"
front="tbneck: whatif: tier 'http' has no callers: no other tier calls it (it is the front tier, \
called by users); whatif changes a tier that the front tier's requests reach through calls"
nopool="tbneck: whatif: tier 'mysql' holds no connection pool: its servers make no calls over \
reused connections (--pool sets the connections of the tier that calls)"
refuse() { # refuse WHEN EXPECTED-LINE ARGS...
    local when=$1 want=$2 rc=0
    shift 2
    "$TBNECK" whatif --db "$b.db" "$@" >"$work/out" 2>"$work/err" || rc=$?
    if [ "$rc" != 2 ] || [ "$(cat "$work/err")" != "$want" ] || [ -s "$work/out" ]; then
        echo "$when whatif $*: exit $rc (want 2), stderr:"; cat "$work/err"
        echo "want: $want"; fail=1
    fi
}
refuse fresh "$front" --tier http --speedup 2
refuse fresh "$front" --tier http --pool 4 --format json
refuse fresh "$nopool" --tier mysql --pool 4
# (the capture stores diagnose's inputs under name 'diagnose': not whatif's)
for t in "models WHERE name = 'whatif'" "model_parts WHERE name = 'whatif'" links; do
    n=$(sqlite3 "$b.db" "SELECT count(*) FROM $t")
    [ "$n" = 0 ] || { echo "table $t has $n rows after refusals: the inputs were computed"; fail=1; }
done
"$TBNECK" whatif --tier mysql --speedup 2 --format json --db "$b.db" >"$b.json"
python3 "$TB_SRCDIR/tests/e2e/lib/whatif_check.py" "$b.json" "$b.base.requests.csv" \
    "$b.rerun.requests.csv" "db-speedup-2 seed 1 after refusals" || fail=1
n=$(sqlite3 "$b.db" "SELECT count(*) FROM models WHERE name = 'whatif'")
[ "$n" = 1 ] || { echo "the good run stored no inputs ($n)"; fail=1; }
refuse stored "$front" --tier http --speedup 2
refuse stored "$nopool" --tier mysql --pool 4
exit $fail
