#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_same.sh — the same answers from two tbneck binaries (a restructure
# of diagnose or the report pipeline must not change them): for each
# configuration given (default: sim/examples/cause-*.conf, gc.conf (the
# demo's), tests/e2e/lib/diag/*.conf), one simulated run captured by each
# binary into its own database (so NEW's capture stores diagnose's inputs when
# it does, and NEW's first diagnose reads them): `diagnose --format json`
# and `--format csv`, `report --format json` of every tier, then the same again
# (the stored analyses reused), and `diagnose --window 20ms --recompute`.
# Prints one line per configuration and fails on any difference (with the diff).
#   scripts/diagnose_same.sh BASE_TBNECK NEW_TBNECK [SIM] [CONF...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BASE_TBNECK NEW_TBNECK [SIM] [CONF...]" >&2; exit 2; }
base=$1 new=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
sim=${1:-$(dirname "$base")/tbneck-sim}
[ $# -gt 0 ] && shift
[ -x "$sim" ] || sim=$(dirname "$base")/sim/tbneck-sim
[ $# -gt 0 ] || set -- "$root"/sim/examples/cause-*.conf "$root"/sim/examples/gc.conf \
    "$root"/tests/e2e/lib/diag/*.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
outputs() { # outputs TBNECK DB DIR
    local tb=$1 db=$2 dir=$3
    mkdir -p "$dir"
    for pass in 1 2; do
        "$tb" diagnose --db "$db" --format json >"$dir/diag$pass.json"
        "$tb" diagnose --db "$db" --format csv >"$dir/diag$pass.csv"
        for t in $("$tb" tiers --db "$db" | awk 'NR > 1 && !/^ / {print $1}' | sort -u); do
            "$tb" report --tier "$t" --db "$db" --format json >"$dir/report-$t-$pass.json" 2>&1 || true
        done
    done
    "$tb" diagnose --db "$db" --window 20ms --recompute --format json >"$dir/diag20.json"
}
for conf in "$@"; do
    name=$(basename "$(dirname "$conf")")-$(basename "$conf" .conf)
    "$sim" "$conf" --out "$work/$name" --seed 1 -q
    "$base" capture -q -r "$work/$name.pcap" --db "$work/$name.db"
    "$new" capture -q -r "$work/$name.pcap" --db "$work/$name-new.db"
    outputs "$base" "$work/$name.db" "$work/$name.base"
    outputs "$new" "$work/$name-new.db" "$work/$name.new"
    if diff -r "$work/$name.base" "$work/$name.new" >"$work/$name.diff"; then
        printf '%-28s same (%s files)\n' "$name" "$(ls "$work/$name.base" | wc -l)"
    else
        printf '%-28s DIFFERENT\n' "$name"
        head -40 "$work/$name.diff"
        fail=1
    fi
    rm -f "$work/$name".pcap "$work/$name"*.db*
done
exit $fail
