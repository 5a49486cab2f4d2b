#!/usr/bin/env bash
# test.sh — the one test command: installs dependencies, builds tbneck twice
# (plain, and with ASan+UBSan), runs every suite, builds release builds with
# gcc and clang (default options, as packagers do), runs each libFuzzer target
# briefly, and ends with the line "N passed, N failed"; exits non-zero on any
# failure. Strict counting (scripts/testrun.sh, scripts/testlog.py): a skipped
# test fails unless it is on the allow-list below; a missing, truncated or
# stale test log fails; every test `meson test --list` names must have a result.
# Tests that need root exit 77 without it, so run this as root (CI does).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/deps.sh || { echo "test: dependency install failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; failures=(); failure_tails=(); allowed_skipped=()
TB_ROOT=$root
source scripts/testrun.sh

# Tests allowed to skip (exit 77, or cmocka's skip()) without failing the run,
# one a line with the reason beside it. A skip is otherwise a failure: it is a
# test that did not run. Keep this list empty; it is printed at the end.
allow_skip=(
)

build() { # build DIR [meson options...]
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }; fi
  ninja -C "$dir" >"$dir.ninja.log" 2>&1 || { tail -50 "$dir.ninja.log"; return 1; }
}

suites=(--suite unit --suite pcap --suite fuzz --suite e2e)
if build build -Dwerror=true; then
  tb_run_suites build plain "${suites[@]}" --num-processes 2
else failed=$((failed+1)); failures+=("plain build"); fi

if build build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false; then
  ASAN_OPTIONS=detect_leaks=1 tb_run_suites build-asan asan --suite unit --suite pcap --suite fuzz \
    --suite e2e-asan --num-processes 2
else failed=$((failed+1)); failures+=("asan build"); fi

# libFuzzer smoke: each target for a few seconds on its corpus (clang is
# installed by deps.sh, so a failed clang build is a failure, not a skip).
if CC=clang build build-fuzz -Dwerror=true -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false; then
  # One target per corpus folder; a folder without its target is a failure.
  for c in tests/fuzz/corpus/*/; do
    name=$(basename "$c"); f=build-fuzz/tests/fuzz/fuzz_$name
    [ -x "$f" ] || { failed=$((failed+1)); failures+=("libfuzzer $name: no target $f"); continue; }
    corpus=$(mktemp -d)
    cp -r tests/fuzz/corpus/"$name"/. "$corpus"/ 2>/dev/null || true
    # UBSan only prints unless told to halt, and libFuzzer then exits 0.
    if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
         "$f" -max_total_time="${TB_FUZZ_SECONDS:-15}" -rss_limit_mb=2048 \
         -artifact_prefix="build-fuzz/$name-" "$corpus" >"build-fuzz/$name.log" 2>&1; then
      passed=$((passed+1)); echo "libfuzzer $name: $(tail -1 "build-fuzz/$name.log")"
    else failed=$((failed+1)); failures+=("libfuzzer $name"); tail -30 "build-fuzz/$name.log"; fi
    rm -rf "$corpus"
  done
else failed=$((failed+1)); failures+=("libfuzzer build (clang)"); fi

# Distribution builds (issue 16): the default options a packager keeps
# (release, no -Werror, no test suites), with gcc and with clang; each counts.
for cc in gcc clang; do
  if CC=$cc build "build-release-$cc" --buildtype=release -Dtests=false; then
    passed=$((passed+1)); echo "release build ($cc): ok"
  else failed=$((failed+1)); failures+=("release build ($cc)"); fi
done

tb_run_summary
[ "$failed" -eq 0 ]
