#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_cli_errors.sh — report and export fail the way DESIGN.md promises: a
# usage error exits 2, a runtime failure 1, each with exactly one line on
# stderr naming what is wrong and nothing on stdout.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0

# expect STATUS REGEX CMD...: runs CMD, checks its exit status, that stderr
# is one line matching REGEX (extended, case-insensitive), stdout empty.
expect() {
    local want=$1 re=$2; shift 2
    local got=0
    "$@" >"$work/out" 2>"$work/err" || got=$?
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$got" != "$want" ] || [ "$lines" != 1 ] || ! grep -Eqi -- "$re" "$work/err" ||
        [ -s "$work/out" ]; then
        echo "FAIL: $*"
        echo "  want exit $want, one stderr line matching /$re/, empty stdout"
        echo "  got exit $got, $lines stderr lines, $(wc -c <"$work/out") stdout bytes:"
        sed 's/^/  | /' "$work/err"
        fails=$((fails + 1))
    else
        echo "ok: exit $got: $(cat "$work/err")"
    fi
}

# A small real database: the simulator's quick stack, captured.
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/q" --duration 1s -q
db="$work/q.db"
"$TBNECK" capture -r "$work/q.pcap" --db "$db" >/dev/null 2>&1
tier=$("$TBNECK" export requests --db "$db" | awk -F, 'NR == 2 { print $1 }')
[ -n "$tier" ] || { echo "FAIL: no requests captured from the simulator's pcap"; exit 1; }

# Usage errors: exit 2.
# whatif (issue 14): a tier no other tier calls (the front tier), a speedup
# of 0 or below, --pool on a tier that holds no pool (the database calls no
# one), a missing or double change: one line, exit 2.
expect 2 "whatif: tier 'http' has no callers" "$TBNECK" whatif --tier http --speedup 2 --db "$db"
expect 2 "whatif: --speedup '0': expected a factor greater than 0" \
    "$TBNECK" whatif --tier mysql --speedup 0 --db "$db"
expect 2 "whatif: --speedup '-2': expected a factor greater than 0" \
    "$TBNECK" whatif --tier mysql --speedup -2 --db "$db"
expect 2 "whatif: --cores '1.5': expected a whole number" \
    "$TBNECK" whatif --tier mysql --cores 1.5 --db "$db"
expect 2 "whatif: tier 'mysql' holds no connection pool" \
    "$TBNECK" whatif --tier mysql --pool 8 --db "$db"
expect 2 "whatif: give exactly one of" "$TBNECK" whatif --tier mysql --db "$db"
expect 2 "whatif: give exactly one of" "$TBNECK" whatif --tier mysql --speedup 2 --cores 3 --db "$db"
expect 2 "whatif: --format 'xml'" "$TBNECK" whatif --tier mysql --speedup 2 --format xml --db "$db"

expect 2 "--tier" "$TBNECK" report --db "$db"
expect 2 "unknown option '--bogus'" "$TBNECK" report --tier "$tier" --db "$db" --bogus
expect 2 "needs a value" "$TBNECK" report --tier "$tier" --db "$db" --window
expect 2 "--window 'abc'" "$TBNECK" report --tier "$tier" --db "$db" --window abc
expect 2 "--window '0ms'" "$TBNECK" report --tier "$tier" --db "$db" --window 0ms
# Issue 13, finding 9: every command's window lies in 1 ms..1 h, as the API's.
expect 2 "--window '999999h'.*1ms to 1h" "$TBNECK" report --tier "$tier" --db "$db" --window 999999h
expect 2 "--window '500us'.*1ms to 1h" "$TBNECK" report --tier "$tier" --db "$db" --window 500us
expect 2 "--window '61m'.*1ms to 1h" "$TBNECK" export windows --tier "$tier" --db "$db" --window 61m
expect 2 "--window '2h'.*1ms to 1h" "$TBNECK" events report --tier "$tier" --db "$db" --window 2h
expect 2 "--window '0.5ms'.*1ms to 1h" "$TBNECK" serve --db "$db" --window 0.5ms
# The same file into the same database again (from another directory too):
# refused, one line naming the stored capture, nothing added; a file of
# other packets (the simulator's traces all begin at the same instant) is
# stored.
n0=$(sqlite3 "$db" "SELECT count(*) FROM requests")
expect 2 "already holds capture 1 \\($work/q.pcap, complete\\) of the same file.*count every request twice" \
    "$TBNECK" capture -r "$work/q.pcap" --db "$db"
(cd "$work" && expect 2 "already holds capture 1 .*of the same file" "$TBNECK" capture -r q.pcap --db q.db)
n1=$(sqlite3 "$db" "SELECT count(*) FROM requests")
[ "$n1" = "$n0" ] || { echo "FAIL: the refused capture changed the rows: $n0 -> $n1"; fails=$((fails + 1)); }
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/q2" --duration 1s --seed 9 -q
"$TBNECK" capture -q -r "$work/q2.pcap" --db "$db" ||
    { echo "FAIL: a capture of another trace into the same database"; fails=$((fails + 1)); }
n2=$(sqlite3 "$db" "SELECT count(*) FROM captures")
[ "$n2" = 2 ] || { echo "FAIL: $n2 captures stored, want 2"; fails=$((fails + 1)); }

expect 2 "window '999999h'.*1ms to 1h" "$TBNECK" capture -r "$work/q.pcap" --db "$work/w.db" --window 999999h
expect 2 "--format 'xml'.*text, json, csv or jsonl" "$TBNECK" report --tier "$tier" --db "$db" \
    --format xml
expect 2 "--format 'xml'.*csv or jsonl" "$TBNECK" export windows --tier "$tier" --db "$db" \
    --format xml
expect 2 "bad format 'xml'" "$TBNECK" capture -i lo --format xml --db "$work/never.db"
expect 2 "--format jsonl streams a live capture" "$TBNECK" capture -r "$work/q.pcap" \
    --format jsonl --db "$work/never.db"
expect 2 "both write to standard output" "$TBNECK" capture -i lo -w - --format jsonl \
    --db "$work/never.db"
expect 2 "--plot out.gif.*png or .svg" "$TBNECK" report --tier "$tier" --db "$db" \
    --plot out.gif
expect 2 "--from 'yesterday'" "$TBNECK" report --tier "$tier" --db "$db" --from yesterday
expect 2 "--from must be before --to" "$TBNECK" report --tier "$tier" --db "$db" \
    --from +2s --to +1s
expect 2 "--server 'nonsense'.*ADDR:PORT" "$TBNECK" report --tier "$tier" --db "$db" \
    --server nonsense
expect 2 "exclude each other" "$TBNECK" report --tier "$tier" --db "$db" \
    --service-times a.txt --calibrate b.pcap
expect 2 "unexpected argument 'extra'" "$TBNECK" report --tier "$tier" --db "$db" extra
expect 2 "'requests', 'windows' or 'connections'" "$TBNECK" export
expect 2 "unknown kind 'rows'" "$TBNECK" export rows --db "$db"
expect 2 "--tier NAME is required" "$TBNECK" export windows --db "$db"
expect 2 "unknown option '--width'" "$TBNECK" export windows --tier "$tier" --width 50ms

# Runtime failures: exit 1.
expect 1 "$work/none.db.*(no such file|not found)" "$TBNECK" report --tier "$tier" \
    --db "$work/none.db"
expect 1 "$work/none.db" "$TBNECK" export requests --db "$work/none.db"
expect 1 "unknown tier 'nosuch'.*known tiers: .*$tier" "$TBNECK" report --tier nosuch \
    --db "$db"
expect 1 "unknown tier 'nosuch'" "$TBNECK" export windows --tier nosuch --db "$db"
expect 1 "unknown tier 'nosuch'" "$TBNECK" export requests --tier nosuch --db "$db"
expect 1 "--server 10.9.9.9:1 is not a server of tier '$tier'" "$TBNECK" report \
    --tier "$tier" --db "$db" --server 10.9.9.9:1
printf 'not a database\n' >"$work/text.db"
expect 1 "$work/text.db.*not (a tbneck database|an SQLite)" "$TBNECK" report --tier "$tier" \
    --db "$work/text.db"
expect 1 "service.*(no such file|No such)" "$TBNECK" report --tier "$tier" --db "$db" \
    --service-times "$work/missing-service.txt"
printf 'no-such-class\t10ms\n' >"$work/svc.txt"
expect 1 "svc.txt: line 1: tier '$tier' has no class 'no-such-class'" "$TBNECK" report \
    --tier "$tier" --db "$db" --service-times "$work/svc.txt"

# gnuplot missing: PATH without it (the test's own tools are not needed).
mkdir -p "$work/emptybin"
expect 1 "^tbneck: gnuplot not found: install the gnuplot-nox package$" \
    env PATH="$work/emptybin" "$TBNECK" report --tier "$tier" --db "$db" --plot "$work/p.png"
[ ! -e "$work/p.png" ] || { echo "FAIL: a plot was written without gnuplot"; fails=$((fails+1)); }

expect 1 "nothing to draw, tier '$tier' has no requests in the range" "$TBNECK" report \
    --tier "$tier" --db "$db" --from 1900000000 --to 1900000001 --plot "$work/p.png" --format csv

# A database written by a newer tbneck (schema version 99).
cp "$db" "$work/new.db"
sqlite3 "$work/new.db" \
    "PRAGMA user_version = 99; UPDATE meta SET value = 99 WHERE key = 'schema_version';"
expect 1 "$work/new.db.*newer" "$TBNECK" report --tier "$tier" --db "$work/new.db"
expect 1 "$work/new.db.*newer" "$TBNECK" export windows --tier "$tier" --db "$work/new.db"
expect 1 "$work/new.db.*newer" "$TBNECK" export requests --db "$work/new.db"

# And the same database still works, so the failures above were the inputs'.
"$TBNECK" report --tier "$tier" --db "$db" >/dev/null ||
    { echo "FAIL: report on the good database"; fails=$((fails + 1)); }

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "PASS"
