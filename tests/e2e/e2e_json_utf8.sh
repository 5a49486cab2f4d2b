#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_json_utf8.sh — JSON stays valid whatever bytes the wire carried: a
# capture whose HTTP paths (GET /caf\xe9, a truncated sequence, 0xff 0xfe)
# and SQL (a Latin-1 identifier, an encoded surrogate) are not UTF-8, beside
# well-formed UTF-8 ones, through `report --format json` and the dashboard's
# API (/api/analysis lists the classes; an unknown tier named with a
# non-UTF-8 byte gets a JSON error). Python's json module parses each answer;
# every class must read as its raw bytes (from `export requests`) with valid
# UTF-8 kept and each other byte U+FFFD (tests/e2e/lib/json_bytes.py).
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"
jb="python3 $TB_SRCDIR/tests/e2e/lib/json_bytes.py"
work=$(mktemp -d "$TB_BUILDDIR/e2e-json.XXXXXX")
trap 'stop_serve; rm -rf "$work"' EXIT

$jb pcap "$work/bytes.pcap" || fail "writing the capture"
"$TBNECK" capture -r "$work/bytes.pcap" --db "$work/j.db" >"$work/capture.out" 2>&1 ||
  { cat "$work/capture.out"; fail "capture"; }
"$TBNECK" export requests --db "$work/j.db" >"$work/req.csv" || fail "export requests"
for t in http mysql; do
  "$TBNECK" report --tier "$t" --format json --db "$work/j.db" >"$work/report-$t.json" ||
    fail "report --tier $t"
  $jb check "$t" "$work/report-$t.json" "$work/req.csv" || fail "report --format json, tier $t"
done

start_serve "$work/j.db" "$work"
for t in http mysql; do
  curl -sf "http://127.0.0.1:$port/api/analysis?tier=$t" >"$work/api-$t.json" ||
    fail "/api/analysis?tier=$t"
  $jb check "$t" "$work/api-$t.json" "$work/req.csv" || fail "/api/analysis, tier $t"
done
code=$(curl -s -o "$work/err.json" -w '%{http_code}' \
  "http://127.0.0.1:$port/api/scatter?tier=caf%E9")
[ "$code" = 404 ] || fail "/api/scatter?tier=caf%E9: HTTP $code, want 404"
python3 - "$work/err.json" <<'PY' || fail "the 404 answer is not valid JSON naming the tier"
import json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw.decode("utf-8"))
assert d["error"] == "unknown tier 'caf\ufffd'", d
PY
ok "404 for tier caf%E9: $(cat "$work/err.json")"
stop_serve
[ "$serve_rc" = 0 ] || fail "serve exit $serve_rc"
echo "PASS e2e_json_utf8"
