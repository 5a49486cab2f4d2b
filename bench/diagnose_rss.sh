#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_rss.sh — the whole `tbneck diagnose` command (two streamed reads of
# the store, the report's per-tier pipeline, callers, layered load, the
# wait-for walk) over stores of N synthetic requests (bench_diagnose's 1/2/1
# stack, written with --db), for each N given: wall and CPU time, peak resident
# memory (GNU time) and memory per request; and, measured in the same run on
# the same store, the baseline: one bare streamed read of every request
# (bench_diagnose --read: tb_store_each_request with a callback that only
# touches the record). `ratio` is diagnose's CPU over the baseline's. Flat
# memory shows as the same peak for every N.
#   bench/diagnose_rss.sh [BUILD_DIR] [N...]      (default build, 100000 1000000 10000000)
# DIAG_CRITPATH=1 measures the command with its critical path (it links every
# request in memory; perf14's part), which is otherwise left out with
# --no-critical-path.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${TB_BUILDDIR:-$src/build}}
shift || true
[ $# -gt 0 ] || set -- 100000 1000000 10000000
tb=${TBNECK:-$build/tbneck}
gen=$build/bench/bench_diagnose
[ -x /usr/bin/time ] || { echo "diagnose_rss: needs GNU time (apt-get install time)" >&2; exit 1; }
cp_flag=--no-critical-path
[ "${DIAG_CRITPATH:-0}" = 1 ] && cp_flag=
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "diagnose ${cp_flag:-with the critical path}; baseline: one streamed read of the store"
printf '%-10s %8s %8s %10s %10s %8s %7s  %s\n' requests wall_s cpu_s peak_MiB B/request read_s \
    ratio verdict
for n in "$@"; do
    "$gen" "$n" --db "$work/d.db" >/dev/null
    read -r base _ < <("$gen" --read "$work/d.db")
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" diagnose --db "$work/d.db" --format json \
        $cp_flag >"$work/out.json"
    read -r wall user sys kib <"$work/time"
    verdict=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print(v["tier"] or "-", v["server"], v["cause"])' "$work/out.json")
    awk -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v k="$kib" -v b="$base" -v v="$verdict" \
        'BEGIN { printf "%-10d %8.2f %8.2f %10.1f %10.1f %8.2f %7.2f  %s\n", n, w, u + s, k / 1024,
                 k * 1024 / n, b, (u + s) / (b > 0 ? b : 1), v }'
    rm -f "$work"/d.db*
done
