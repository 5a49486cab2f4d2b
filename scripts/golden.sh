#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# golden.sh — are two tbneck binaries' outputs byte-identical on the golden
# captures? For restructuring work: build the baseline (e.g. main at the
# commit before the change) somewhere else, then
#
#   scripts/golden.sh [--keep DIR] [--sim TBNECK_SIM] BASE_TBNECK NEW_TBNECK
#
# The captures are made once by one simulator (by default the tbneck-sim
# built beside BASE_TBNECK, so that a simulator change cannot pass for an
# analysis change) from sim/examples: gc, mix, quick with --drop 0.01 and
# speedstep. Each binary then captures them into its own database and
# writes: the capture summary, `tiers`, `export requests`, `export windows`
# of every tier at 50 ms (and one server at 20 ms), `report` text/json/csv of
# every tier (twice: computed, then reused from the database), the gnuplot
# script `report --plot` sends (a stand-in gnuplot first on PATH keeps it),
# and `events import/list/report` of a GC log made from the simulator's
# freezes. Exit status: 0 identical, 1 some output differs (the differing
# files are listed, with the first lines of their diff), 2 usage.
set -euo pipefail

usage() {
    sed -n '6p' "$0" >&2
    exit 2
}
keep="" sim=""
while [ $# -gt 0 ]; do
    case $1 in
    --keep) keep=${2:?}; shift 2 ;;
    --sim) sim=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) usage ;;
    *) break ;;
    esac
done
[ $# -eq 2 ] || usage
base=$(realpath "$1") new=$(realpath "$2")
for b in "$base" "$new"; do
    [ -x "$b" ] || { echo "golden: $b: not an executable" >&2; exit 2; }
done
[ -n "$sim" ] || sim=$(dirname "$base")/sim/tbneck-sim
[ -x "$sim" ] || { echo "golden: $sim: no simulator there (give --sim)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)

if [ -n "$keep" ]; then
    work=$keep
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/in" "$work/bin"

# The stand-in gnuplot: keeps the script (data inline) and writes a
# non-empty output file, as tbneck checks that gnuplot wrote one.
cat >"$work/bin/gnuplot" <<'EOF'
#!/usr/bin/env bash
script=$(cat)
printf '%s\n' "$script" >"${TB_GOLDEN_PLOT:?}"
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" <<<"$script" | head -1)
[ -n "$out" ] && echo plotted >"$out"
exit 0
EOF
chmod +x "$work/bin/gnuplot"

cases="gc mix quick speedstep"
for c in $cases; do
    [ -s "$work/in/$c.pcap" ] && continue
    extra=()
    [ "$c" = quick ] && extra=(--drop 0.01)
    "$sim" "$src/sim/examples/$c.conf" --out "$work/in/$c" -q "${extra[@]}"
    # A GC log (JDK 9+ unified format) whose pauses are the simulator's
    # freezes: one line per freeze, stamped at its end.
    awk -F, 'NR > 1 {
        end = $3; dur = ($3 - $2) / 1e6; s = int(end / 1e9); ms = int((end % 1e9) / 1e6)
        printf "[%s.%03d+0000][%.3fs][info][gc] GC(%d) Pause Young (G1 Evacuation Pause) 30M->10M(48M) %.3fms\n",
            strftime("%Y-%m-%dT%H:%M:%S", s, 1), ms, NR, NR, dur
    }' "$work/in/$c.freezes.csv" >"$work/in/$c.gc.log"
done

# x OUT CMD...: CMD's stdout and stderr into OUT, then its exit status.
x() {
    local out=$1 rc=0
    shift
    "$@" >"$out" 2>&1 || rc=$?
    echo "exit $rc" >>"$out"
}

# run NAME BINARY: every output of BINARY into $work/NAME/.
run() {
    local name=$1 tb=$2 c t
    for c in $cases; do
        local o="$work/$name/$c" db="$work/$name/$c.db"
        rm -rf "$o" "$db" "$db-wal" "$db-shm"
        mkdir -p "$o"
        x "$o/capture.out" "$tb" capture -r "$work/in/$c.pcap" --db "$db"
        x "$o/tiers.out" "$tb" tiers --db "$db"
        x "$o/requests.csv" "$tb" export requests --db "$db"
        local tiers
        tiers=$(awk -F, 'NR > 1 && NF > 5 {print $1}' "$o/requests.csv" | sort -u)
        for t in $tiers; do
            x "$o/$t.windows.csv" "$tb" export windows --tier "$t" --window 50ms --db "$db"
            for f in text json csv; do
                x "$o/$t.report.$f" "$tb" report --tier "$t" --format $f --db "$db"
            done
            # Again: now from the stored analysis.
            x "$o/$t.report2.json" "$tb" report --tier "$t" --format json --db "$db"
            TB_GOLDEN_PLOT="$o/$t.plot.gp" PATH="$work/bin:$PATH" \
                x "$o/$t.report100.text" "$tb" report --tier "$t" --format text --window 100ms \
                --plot "$o/$t.png" --db "$db"
            rm -f "$o/$t.png"
        done
        local srv
        srv=$(awk -F, '$1 == "http-8080" {print $2; exit}' "$o/requests.csv")
        x "$o/server20.windows.csv" "$tb" export windows --tier http-8080 --server "$srv" \
            --window 20ms --db "$db"
        x "$o/server20.report.json" "$tb" report --tier http-8080 --server "$srv" --window 20ms \
            --format json --db "$db"
        x "$o/events.import" "$tb" events import --gc "$work/in/$c.gc.log" --tier http-8080 \
            --db "$db"
        x "$o/events.list" "$tb" events list --db "$db"
        for f in text json; do
            x "$o/events.report.$f" "$tb" events report --tier http-8080 --format $f --db "$db"
        done
        # The paths of this run's files are not part of the output.
        sed -i "s#$work/$name/#WORK/#g" "$o"/*
        rm -f "$db" "$db-wal" "$db-shm"
    done
}

run base "$base"
run new "$new"
if diff -rq "$work/base" "$work/new" >"$work/diff.txt"; then
    n=$(find "$work/new" -type f | wc -l)
    echo "golden: identical ($n files over $(echo $cases | wc -w) captures)"
    exit 0
fi
echo "golden: outputs differ:"
cat "$work/diff.txt"
diff -r "$work/base" "$work/new" | head -40
exit 1
