#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_runner.sh — the test runner's own test: scripts/testrun.sh (what
# scripts/test.sh runs each build's suites with) driven by a fake `meson` that
# lists three tests and writes a made-up testlog.json. Each case states the
# counts a strict runner must give: a skip, a cmocka skip(), a truncated log, a
# stale log left by an earlier run, a missing log, a result for an unlisted
# test and a duplicate all fail; an allow-listed skip does not.
set -uo pipefail
: "${TB_SRCDIR:?set by meson}"
work=$(mktemp -d "${TMPDIR:-/tmp}/test-runner.XXXXXX")
trap 'rm -rf "$work"' EXIT
bad=0

# The fake meson: `meson test -C DIR ... --list` prints $work/list;
# `meson test -C DIR ...` writes $work/log (if present) as DIR's testlog.json,
# with NOW replaced by the current time, as meson would.
mkdir -p "$work/bin" "$work/build/meson-logs"
cat >"$work/bin/meson" <<'SH'
#!/usr/bin/env bash
[ "$1" = test ] || exit 2
dir=
for ((i = 1; i <= $#; i++)); do [ "${!i}" = -C ] && { j=$((i + 1)); dir=${!j}; }; done
for a in "$@"; do
    if [ "$a" = --list ]; then echo "ninja: no work to do."; cat "$FAKE/list"; exit 0; fi
done
if [ -f "$FAKE/log" ]; then
    now=$(date +%s.%N)
    sed "s/NOW/$now/g" "$FAKE/log" >"$dir/meson-logs/testlog.json"
fi
exit "${FAKE_RC:-0}"
SH
chmod +x "$work/bin/meson"
export FAKE=$work PATH="$work/bin:$PATH"
printf '%s\n' "tbneck:unit / a" "tbneck:e2e+e2e-asan / b" "tbneck:fuzz / c" >"$work/list"

res() { # res NAME RESULT [STDERR]
    printf '{"name": "%s", "stdout": "", "stderr": "%s", "result": "%s", "starttime": NOW, "returncode": 0}\n' \
        "$1" "${3:-}" "$2"
}
ok3() { res "tbneck:unit / a" OK; res "tbneck:e2e+e2e-asan / b" OK; res "tbneck:fuzz / c" OK; }

# run CASE EXPECT_PASSED EXPECT_FAILED [GREP...]: runs the suites as test.sh
# does, then checks the counts, the last line, and that each GREP pattern is
# among the printed lines.
run() {
    local name=$1 want_p=$2 want_f=$3
    shift 3
    passed=0; failed=0; failures=(); failure_tails=(); allowed_skipped=()
    TB_ROOT=$TB_SRCDIR
    # shellcheck source=../../scripts/testrun.sh
    source "$TB_SRCDIR/scripts/testrun.sh"
    tb_run_suites "$work/build" plain --suite unit >"$work/out.txt" 2>&1
    tb_run_summary >>"$work/out.txt"
    local last
    last=$(tail -1 "$work/out.txt")
    if [ "$last" != "$want_p passed, $want_f failed" ]; then
        echo "FAIL $name: last line '$last', want '$want_p passed, $want_f failed'"
        sed 's/^/    /' "$work/out.txt"
        bad=1
        return
    fi
    for pat in "$@"; do
        if ! grep -qF -- "$pat" "$work/out.txt"; then
            echo "FAIL $name: no line with '$pat'"
            sed 's/^/    /' "$work/out.txt"
            bad=1
            return
        fi
    done
    echo "ok   $name: $last"
}

allow_skip=()
ok3 >"$work/log"
run "all pass" 3 0 "allowed to skip: (none)"

{ res "tbneck:unit / a" OK; res "tbneck:e2e+e2e-asan / b" SKIP; res "tbneck:fuzz / c" OK; } >"$work/log"
run "a skip (exit 77) fails" 2 1 "FAILED: plain: b (skipped (exit 77)"

allow_skip=(b)
run "an allow-listed skip neither passes nor fails" 2 0 "skipped (allowed): plain: b" \
    "allowed to skip: b"
allow_skip=()

{ res "tbneck:unit / a" OK '[  SKIPPED ] test_x\n[  PASSED  ] 0 test(s).'
  res "tbneck:e2e+e2e-asan / b" OK; res "tbneck:fuzz / c" OK; } >"$work/log"
run "a cmocka skip() exiting 0 fails" 2 1 "FAILED: plain: a (a cmocka test skipped"

{ res "tbneck:unit / a" OK; res "tbneck:e2e+e2e-asan / b" FAIL; res "tbneck:fuzz / c" TIMEOUT; } \
    >"$work/log"
run "FAIL and TIMEOUT fail" 1 2 "FAILED: plain: b (FAIL)" "FAILED: plain: c (TIMEOUT)"
# A failed test's last lines are repeated at the end, above the counts; a
# passing test's output is not.
{ res "tbneck:unit / a" OK 'all fine'; res "tbneck:e2e+e2e-asan / b" FAIL 'step 1 ok\nFAIL: the reason'
  res "tbneck:fuzz / c" OK; } >"$work/log"
run "a failed test's last lines come last" 2 1 "  plain: b: FAIL: the reason" "  plain: b: step 1 ok"
if grep -q "plain: a: all fine" "$work/out.txt" ||
    [ "$(tail -3 "$work/out.txt" | head -1)" != "  plain: b: FAIL: the reason" ]; then
    echo "FAIL tails: a passing test's output shown, or the tail not just above the summary"
    sed 's/^/    /' "$work/out.txt"
    bad=1
fi

# Truncated: meson killed while writing c's line, after its name.
{ res "tbneck:unit / a" OK; res "tbneck:e2e+e2e-asan / b" OK
  res "tbneck:fuzz / c" OK | cut -c1-60 | tr -d '\n'; } >"$work/log"
run "a log cut inside a result fails that test" 2 1 "FAILED: plain: c (" "truncated"
# Cut before any name could be read: the cut and the missing result both fail.
{ res "tbneck:unit / a" OK; res "tbneck:e2e+e2e-asan / b" OK; printf '{"na'; } >"$work/log"
run "a log cut before a name fails twice" 2 2 "FAILED: plain: (log) (" "FAILED: plain: c (no result"

# Stale: an earlier run's log is still there and this run writes none.
rm -f "$work/log"
ok3 | sed 's/NOW/1000000000.0/' >"$work/build/meson-logs/testlog.json"
run "a stale log from an earlier run is not counted" 0 4 "no test log" "FAILED: plain: a (no result"
[ ! -e "$work/build/meson-logs/testlog.json" ] || { echo "FAIL stale log not deleted"; bad=1; }
# Stale results inside this run's log (older than the run's start).
ok3 | sed '2s/NOW/1000000000.0/' >"$work/log"
run "a result older than the run fails" 2 1 "FAILED: plain: b (stale result"

rm -f "$work/log"
run "a missing log fails" 0 4 "no test log"

: >"$work/log"
run "an empty log fails" 0 4 "empty test log"

{ ok3; res "tbneck:unit / zz" OK; } >"$work/log"
run "a result for an unlisted test fails" 3 1 "FAILED: plain: zz (a result for a test"

{ ok3; res "tbneck:fuzz / c" OK; } >"$work/log"
run "two results for one test fail it once" 2 1 "FAILED: plain: c (two results"

# A listing that names no test at all is a failure, not "0 passed, 0 failed".
: >"$work/list"
ok3 >"$work/log"
run "an empty test list fails" 0 4 "lists no test"

exit $bad
