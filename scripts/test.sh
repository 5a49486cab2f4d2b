#!/usr/bin/env bash
# test.sh — the one test command: installs dependencies, builds tbneck twice
# (plain, and with ASan+UBSan), runs every suite, runs each libFuzzer target
# briefly, and ends with the line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/deps.sh || { echo "test: dependency install failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; failures=()
count() { # count BUILD_DIR LABEL: adds up meson's testlog.json
  local log="$1/meson-logs/testlog.json"
  [ -f "$log" ] || { failed=$((failed+1)); failures+=("$2: no test log"); return; }
  local p f
  p=$(python3 - "$log" <<'PY'
import json, sys
ok = bad = 0; names = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["result"] in ("OK", "EXPECTEDFAIL"): ok += 1
    elif r["result"] == "SKIP": pass
    else: bad += 1; names.append(r["name"])
print(ok, bad, " ".join(names))
PY
)
  read -r pp ff names <<<"$p"
  passed=$((passed+pp)); failed=$((failed+ff))
  [ "$ff" -eq 0 ] || failures+=("$2: $names")
}

build() { # build DIR [meson options...]
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }; fi
  ninja -C "$dir" >"$dir.ninja.log" 2>&1 || { tail -50 "$dir.ninja.log"; return 1; }
}

suites=(--suite unit --suite pcap --suite fuzz --suite e2e)
if build build -Dwerror=true; then
  meson test -C build "${suites[@]}" --print-errorlogs --num-processes 2 || true
  count build plain
else failed=$((failed+1)); failures+=("plain build"); fi

if build build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false; then
  ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --suite unit --suite pcap --suite fuzz \
    --suite e2e-asan --print-errorlogs --num-processes 2 || true
  count build-asan asan
else failed=$((failed+1)); failures+=("asan build"); fi

# libFuzzer smoke: each target for a few seconds on its corpus (clang is
# installed by deps.sh, so a failed clang build is a failure, not a skip).
if CC=clang build build-fuzz -Dwerror=true -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false; then
  for f in build-fuzz/tests/fuzz/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    name=${f##*/fuzz_}; corpus=$(mktemp -d)
    cp -r tests/fuzz/corpus/"$name"/. "$corpus"/ 2>/dev/null || true
    if "$f" -max_total_time="${TB_FUZZ_SECONDS:-15}" -rss_limit_mb=2048 \
         -artifact_prefix="build-fuzz/$name-" "$corpus" >"build-fuzz/$name.log" 2>&1; then
      passed=$((passed+1)); echo "libfuzzer $name: $(tail -1 "build-fuzz/$name.log")"
    else failed=$((failed+1)); failures+=("libfuzzer $name"); tail -30 "build-fuzz/$name.log"; fi
    rm -rf "$corpus"
  done
else failed=$((failed+1)); failures+=("libfuzzer build (clang)"); fi

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
