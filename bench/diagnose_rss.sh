#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_rss.sh — the whole `tbneck diagnose` command over stores of N
# synthetic requests (bench_diagnose's 1/2/1 stack, written with --db), for
# each N given. Per store, in this order:
#   streamed  diagnose as before issue 11's stored inputs (TBNECK_DIAGNOSE_STORED=0:
#             two passes over the requests), on a copy of the fresh store;
#   store_s   what `tbneck capture` now pays when it ends: diagnose's inputs
#             computed from the requests and stored (bench_diagnose
#             --store-inputs, CPU seconds), on the fresh store;
#   diagnose  then, reading those inputs: wall and CPU time, peak resident
#             memory (GNU time), best of REPS (default 3) runs interleaved with
#   read_s    the baseline: one bare streamed read of every request
#             (bench_diagnose --read: tb_store_each_request with a callback
#             that only touches the record), best of REPS.
# `ratio` is diagnose's CPU over the baseline read's; `same` says whether the
# stored and the streamed diagnose printed the same JSON. Flat memory shows as
# the same peak for every N.
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
reps=${REPS:-3}
[ -x /usr/bin/time ] || { echo "diagnose_rss: needs GNU time (apt-get install time)" >&2; exit 1; }
cp_flag=--no-critical-path
[ "${DIAG_CRITPATH:-0}" = 1 ] && cp_flag=
work=$(mktemp -d "${TMPDIR:-/tmp}/diagnose_rss.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "diagnose ${cp_flag:-with the critical path}; baseline: one streamed read of the store;" \
    "best of $reps"
printf '%-9s %9s %7s %10s %9s %9s %8s %7s %7s %7s  %s\n' requests streamed_s stream_MiB \
    store_s wall_s cpu_s peak_MiB read_s ratio same verdict
# run_diag OUT ENV... : one diagnose, "wall cpu KiB" on stdout
run_diag() {
    local out=$1
    shift
    env "$@" /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" diagnose --db "$work/d.db" \
        --format json $cp_flag >"$out"
    awk '{ printf "%s %.3f %s\n", $1, $2 + $3, $4 }' "$work/time"
}
for n in "$@"; do
    "$gen" "$n" --db "$work/d.db" >/dev/null
    # The streamed command on a copy of the fresh store (what it cost before).
    cp "$work/d.db" "$work/s.db"
    env TBNECK_DIAGNOSE_STORED=0 /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" diagnose \
        --db "$work/s.db" --format json $cp_flag >"$work/streamed.json"
    read -r _ s_cpu s_kib < <(awk '{ printf "%s %.3f %s\n", $1, $2 + $3, $4 }' "$work/time")
    rm -f "$work"/s.db*
    read -r store_s < <("$gen" --store-inputs "$work/d.db")
    best_cpu= best_wall= best_kib= best_read=
    for _ in $(seq "$reps"); do
        read -r base _ < <("$gen" --read "$work/d.db")
        read -r wall cpu kib < <(run_diag "$work/out.json")
        if [ -z "$best_cpu" ] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
            best_cpu=$cpu best_wall=$wall
        fi
        if [ -z "$best_read" ] || awk -v a="$base" -v b="$best_read" 'BEGIN { exit !(a < b) }'; then
            best_read=$base
        fi
        [ -z "$best_kib" ] || [ "$kib" -gt "$best_kib" ] && best_kib=$kib
    done
    same=no
    cmp -s "$work/out.json" "$work/streamed.json" && same=yes
    verdict=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print(v["tier"] or "-", v["server"], v["cause"])' "$work/out.json")
    awk -v n="$n" -v sc="$s_cpu" -v sk="$s_kib" -v st="$store_s" -v w="$best_wall" \
        -v u="$best_cpu" -v k="$best_kib" -v b="$best_read" -v same="$same" -v v="$verdict" \
        'BEGIN { printf "%-9d %9.2f %10.1f %7.2f %9.2f %9.2f %8.1f %7.2f %7.3f %7s  %s\n", n, sc,
                 sk / 1024, st, w, u, k / 1024, b, u / (b > 0 ? b : 1), same, v }'
    rm -f "$work"/d.db*
done
