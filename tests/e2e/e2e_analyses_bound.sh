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
# 3. 400 simultaneous analyses no cache holds: all answered, 200 or, past the
#    128 database jobs the server queues, an immediate 503.
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
# The tier's own rows (server 0): the capture stores each server's 50 ms
# analysis too (diagnose's inputs), bounded on its own (tier, server).
kept = sorted(r[0] // 10**6 for r in q("SELECT width_ns FROM analyses WHERE tier_id = %d "
                                       "AND server_id = 0" % tier))
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

# 3. 400 clients at once, each asking an analysis no cache holds: every one is
#    answered, 200 or (past the 128 queued database jobs) 503 at once.
import socket, threading, time
res = []
lock = threading.Lock()
def one(i):
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(b"GET /api/analysis?tier=mysql&width=%dms HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Connection: close\r\n\r\n" % (2000 + i))
    data = b""
    t0 = time.time()
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    st = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    with lock:
        res.append((st, time.time() - t0))
th = [threading.Thread(target=one, args=(i,)) for i in range(400)]
for t in th:
    t.start()
for t in th:
    t.join()
import collections
cnt = collections.Counter(st for st, _ in res)
slow503 = max((d for st, d in res if st == 503), default=0)
print("ok: 400 at once:", dict(cnt), "slowest 503 after %.2f s" % slow503)
assert len(res) == 400 and set(cnt) <= {200, 503}, cnt
assert cnt[503] > 0 and cnt[200] >= 129, cnt
PY
rc=$?
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=""
[ "$rc" = 0 ] || { tail -5 "$work/serve.err"; echo "FAIL"; exit 1; }
ls -la "$db"* | awk '{ print "  " $5, $9 }'
echo "PASS"
