#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_analyses_bound.sh — issue 13, finding 6: GET requests no longer store
# analyses without bound. Against `tbneck serve` on a 3 s quick.conf capture:
# 1. 1000 widths (20 ms .. 1019 ms): every answer 200, and afterwards the store
#    holds exactly TB_STORE_ANALYSES_KEEP (64) analyses of the tier, the most
#    recent widths, and windows of no other width (SQLite's own counts).
# 2. 12 ranges asked 3 times each in turn (more than the server's 8-entry
#    memory cache, so the later rounds reach the store): one row per range, no
#    row added after the first round (max(id) unchanged), and each answer
#    byte-identical to the first.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 not installed (scripts/deps.sh)"; exit 1; }
work=$(mktemp -d)
serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$work"' EXIT
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/s" --duration 3s -q ||
    { echo "FAIL: simulator"; exit 1; }
db="$work/s.db"
"$TBNECK" capture -q -r "$work/s.pcap" --db "$db" || { echo "FAIL: capture"; exit 1; }
"$TBNECK" serve --db "$db" --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 100); do grep -q serving "$work/serve.out" && break; sleep 0.1; done
port=$(sed -n 's/^serving http:\/\/127.0.0.1:\([0-9]*\)\/.*/\1/p' "$work/serve.out")
[ -n "$port" ] || { cat "$work/serve.err"; echo "FAIL: serve did not start"; exit 1; }

python3 - "$port" "$db" <<'PY'
import http.client, sqlite3, sys
port, db = int(sys.argv[1]), sys.argv[2]
KEEP = 64
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

def get(path):
    c.request("GET", path, headers={"Host": "127.0.0.1"})
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, (path, r.status, body[:200])
    return body

def q(sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()

tier = q("SELECT id FROM tiers WHERE name = 'mysql'")[0][0]
widths = [20 + k for k in range(1000)]
for w in widths:
    get("/api/analysis?tier=mysql&width=%dms" % w)
n = q("SELECT count(*) FROM analyses WHERE tier_id = %d AND server_id = 0" % tier)[0][0]
assert n == KEEP, "%d analyses of the tier stored after 1000 widths, want %d" % (n, KEEP)
kept = sorted(r[0] // 10**6 for r in q("SELECT width_ns FROM analyses WHERE tier_id = %d" % tier))
assert kept == widths[-KEEP:], ("not the most recent widths", kept[:5])
stray = q("SELECT count(*) FROM windows w WHERE NOT EXISTS (SELECT 1 FROM analyses a "
          "WHERE a.tier_id = w.tier_id AND a.server_id = w.server_id AND a.width_ns = w.width_ns)")
assert stray[0][0] == 0, "%d windows of evicted widths left" % stray[0][0]
print("ok: 1000 widths -> %d analyses (widths %d..%d ms), no stray windows" % (n, kept[0], kept[-1]))

ranges = ["/api/analysis?tier=mysql&width=50ms&from=%%2B%dms&to=%%2B%dms" % (100 * i, 100 * i + 1500)
          for i in range(12)]
first = [get(p) for p in ranges]
top = q("SELECT max(id) FROM analyses")[0][0]
for rnd in range(2):
    for p, want in zip(ranges, first):
        assert get(p) == want, "a repeated request got another answer: " + p
assert q("SELECT max(id) FROM analyses")[0][0] == top, "a repeated request stored a new row"
dup = q("SELECT count(*) FROM (SELECT 1 FROM analyses GROUP BY tier_id, server_id, width_ns, "
        "from_ns, to_ns HAVING count(*) > 1)")[0][0]
assert dup == 0, "%d (tier, server, width, range) stored more than once" % dup
print("ok: 12 ranges x 3 rounds: one row each, answers identical, max(id) %d unchanged" % top)
PY
rc=$?
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""
[ "$rc" = 0 ] || { tail -5 "$work/serve.err"; echo "FAIL"; exit 1; }
ls -la "$db"* | awk '{ print "  " $5, $9 }'
echo "PASS"
