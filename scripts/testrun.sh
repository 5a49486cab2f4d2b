# SPDX-License-Identifier: MIT
# testrun.sh — sourced by scripts/test.sh (and by tests/unit/test_runner.sh, which
# drives it with a fake meson): runs meson test suites in a build folder and
# counts the results strictly with scripts/testlog.py.
#
# The caller defines: passed, failed (numbers), failures and failure_tails
# (arrays of lines) and
# allow_skip (array of test names allowed to skip; see test.sh). TB_ROOT is the
# source folder.

# tb_run_suites DIR LABEL [meson test options...]: deletes DIR's old test logs,
# lists the tests the options select, runs them, and adds the outcome to
# passed/failed/failures. A log that is missing, cut short or older than this
# run fails; so does a skip (unless allowed) and a listed test with no result.
tb_run_suites() {
    local dir=$1 label=$2
    shift 2
    local logdir=$dir/meson-logs list=$dir/meson-logs/expected-tests.txt since out line
    mkdir -p "$logdir"
    # A log from an earlier run must never be counted as this run's.
    rm -f "$logdir"/testlog*.json "$logdir"/testlog*.txt "$list"
    if ! meson test -C "$dir" --no-rebuild --list "$@" >"$list" 2>"$list.err"; then
        cat "$list.err"
        failed=$((failed + 1)); failures+=("$label: meson test --list failed")
        return
    fi
    since=$(date +%s.%N)
    meson test -C "$dir" --no-rebuild --print-errorlogs "$@" || true
    local allow=()
    for t in "${allow_skip[@]}"; do allow+=(--allow "$t"); done
    out=$(python3 "$TB_ROOT/scripts/testlog.py" --log "$logdir/testlog.json" --expected "$list" \
          --since "$since" --label "$label" "${allow[@]}")
    local p="" f="" a=""
    while IFS= read -r line; do
        case $line in
            "RESULT "*) read -r _ p f a <<<"$line" ;;
            FAILED:*) failures+=("${line#FAILED: }") ;;
            "TAIL: "*) failure_tails+=("${line#TAIL: }") ;;
            "ALLOWED SKIP: "*) allowed_skipped+=("${line#ALLOWED SKIP: }") ;;
        esac
    done <<<"$out"
    if [[ ! $p =~ ^[0-9]+$ || ! $f =~ ^[0-9]+$ ]]; then
        # testlog.py itself broke: that is a failure of the run, not a pass.
        echo "$out"
        failed=$((failed + 1)); failures+=("$label: testlog.py gave no result")
        return
    fi
    passed=$((passed + p)); failed=$((failed + f))
}

# tb_run_summary: the closing lines, the last one "N passed, N failed".
tb_run_summary() {
    local t
    if [ ${#allow_skip[@]} -eq 0 ]; then
        echo "allowed to skip: (none)"
    else
        echo "allowed to skip: ${allow_skip[*]}"
        for t in "${allowed_skipped[@]}"; do echo "  skipped (allowed): $t"; done
    fi
    # The failed tests' last lines, where a log that keeps only a run's head
    # and tail still shows why.
    if [ ${#failure_tails[@]} -gt 0 ]; then
        echo "last lines of the failed tests:"
        for t in "${failure_tails[@]}"; do echo "  $t"; done
    fi
    for t in "${failures[@]}"; do echo "FAILED: $t"; done
    echo "$passed passed, $failed failed"
}
