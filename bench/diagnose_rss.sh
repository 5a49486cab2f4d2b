#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_rss.sh — the whole `tbneck diagnose` command (store reads, the report's
# per-tier pipeline, callers, layered load, the wait-for walk) over stores of N
# synthetic requests (bench_diagnose's 1/2/1 stack, written with --db), for each N
# given: wall and CPU time and peak resident memory (GNU time), and memory per
# request. Flat memory would show the same peak for every N.
#   bench/diagnose_rss.sh [BUILD_DIR] [N...]      (default build, 1000000 10000000)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${TB_BUILDDIR:-$src/build}}
shift || true
[ $# -gt 0 ] || set -- 1000000 10000000
tb=${TBNECK:-$build/tbneck}
gen=$build/bench/bench_diagnose
[ -x /usr/bin/time ] || { echo "diagnose_rss: needs GNU time (apt-get install time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-10s %8s %8s %10s %10s  %s\n' requests wall_s cpu_s peak_MiB B/request verdict
for n in "$@"; do
    "$gen" "$n" --db "$work/d.db" >/dev/null
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" diagnose --db "$work/d.db" --format json \
        >"$work/out.json"
    read -r wall user sys kib <"$work/time"
    verdict=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print(v["tier"] or "-", v["server"], v["cause"])' "$work/out.json")
    awk -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v k="$kib" -v v="$verdict" \
        'BEGIN { printf "%-10d %8.2f %8.2f %10.1f %10.1f  %s\n", n, w, u + s, k / 1024, k * 1024 / n, v }'
    rm -f "$work"/d.db*
done
