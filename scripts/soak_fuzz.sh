#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# soak_fuzz.sh — runs libFuzzer targets for many executions each (issue 13:
# >= 10 M), under ASan+UBSan, each on a scratch copy of its seed corpus, and
# prints one line per target: executions, seconds, rate, corpus size, result.
# Any crash, leak, timeout or out-of-memory is a finding: its input is kept
# as build-fuzz/soak-<target>-crash-* and the script exits 1.
#
#   scripts/soak_fuzz.sh [-n RUNS] [-j JOBS] [TARGET...]
#
# TARGET names a folder of tests/fuzz/corpus (default: all of them). RUNS
# defaults to 10000000. JOBS (default 1) runs that many targets at once: the
# machine is shared, so be modest. Builds build-fuzz with clang first when a
# target is missing (as scripts/test.sh does). Long: about 1-4 minutes per
# million executions per target on a loaded 2-core machine.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=10000000
jobs=1
while getopts "n:j:h" o; do
    case $o in
        n) runs=$OPTARG ;;
        j) jobs=$OPTARG ;;
        *) sed -n '2,15p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for c in tests/fuzz/corpus/*/; do targets+=("$(basename "$c")"); done
fi
for t in "${targets[@]}"; do
    [ -d "tests/fuzz/corpus/$t" ] || { echo "soak_fuzz: no corpus tests/fuzz/corpus/$t" >&2; exit 2; }
done

need_build=false
for t in "${targets[@]}"; do [ -x "build-fuzz/tests/fuzz/fuzz_$t" ] || need_build=true; done
if $need_build; then
    if [ ! -d build-fuzz ]; then
        CC=clang nice meson setup build-fuzz -Dwerror=true -Dfuzz=true \
            -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false >/dev/null ||
            { echo "soak_fuzz: cannot configure build-fuzz (clang installed? scripts/deps.sh)"; exit 1; }
    fi
    nice ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >/dev/null ||
        { echo "soak_fuzz: build failed"; exit 1; }
fi

# soak NAME: one target, its figures on one line.
soak() {
    local t=$1 f=build-fuzz/tests/fuzz/fuzz_$1 corpus log start end execs rate
    corpus=$(mktemp -d)
    log=build-fuzz/soak-$t.log
    cp -r "tests/fuzz/corpus/$t/." "$corpus/" 2>/dev/null || true
    start=$(date +%s)
    # UBSan only prints by default, and libFuzzer would carry on: halt, so
    # that undefined behaviour is a finding with its input kept.
    if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 nice "$f" -runs="$runs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="build-fuzz/soak-$t-" "$corpus" >"$log" 2>&1; then
        res="0 findings"
    else
        res="FINDING (see $log)"
    fi
    end=$(date +%s)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(( ${execs:-0} / ( end - start > 0 ? end - start : 1 ) ))
    printf '%-12s %10s execs %6ss %8s/s corpus %5s  %s\n' "$t" "${execs:-?}" "$((end - start))" \
        "$rate" "$(ls "$corpus" | wc -l)" "$res"
    rm -rf "$corpus"
    [ "$res" = "0 findings" ]
}

echo "soak_fuzz: $runs executions per target, ASan+UBSan ($(date -u +%FT%TZ))"
fail=0
pids=()
for t in "${targets[@]}"; do
    soak "$t" &
    pids+=($!)
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
exit $fail
