#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_clickhouse.sh — the ClickHouse store against the SQLite store, on a
# private clickhouse-server (tests/e2e/lib/clickhouse.sh) and a simulated
# 3-tier capture (sim/examples/quick.conf):
#   - one sensor: `export requests --store clickhouse://...` is byte for byte
#     the export of the same capture stored in SQLite, whole and per tier;
#   - two sensors on disjoint BPF halves of the capture (the DB switch's
#     `tcp port 3306`, the web/app switch's `not tcp port 3306`) into one
#     database: the merged export holds exactly the single sensor's rows
#     (every column but conn, whose ids are per sensor; within a sensor they
#     map one to one), each sensor's row count is its tiers' count in SQLite,
#     and every class_hash / tier_hash is FNV-1a of the text, recomputed in
#     Python, so identities do not depend on a sensor's catalog ids;
#   - report of every tier (text, --format json, csv), export windows and diagnose read
#     back from the two sensors' store (--store: copied into a temporary SQLite
#     file) equal the single sensor's SQLite ones byte for byte, and the copy
#     is removed;
#   - a second capture by the same sensor continues conn and seq above its
#     stored maximum;
#   - a server down when the capture starts and back 3 s later: the capture
#     waits (--store-retry), says so once, and the export equals SQLite's;
#   - errors: an unreachable server (--store-retry 0) and a missing database give one line and
#     exit 1, a malformed URL and a cluster the server does not know exit 2.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
# shellcheck source=lib/clickhouse.sh
source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
ch_test_setup

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q
pcap="$work/sim.pcap"
[ -s "$pcap" ] || { echo "FAIL: the simulator wrote no capture"; exit 1; }
ch_start a || { echo "FAIL: clickhouse-server did not start"; exit 1; }
url="clickhouse://127.0.0.1:${ch_http[a]}"

"$TBNECK" capture -q -r "$pcap" --db "$work/one.db"
"$TBNECK" export requests --db "$work/one.db" >"$work/sqlite.csv"
n=$(($(wc -l <"$work/sqlite.csv") - 1))
[ "$n" -gt 1000 ] || { echo "FAIL: only $n requests in the simulated capture"; exit 1; }

# One sensor: byte-identical exports, whole and per tier.
"$TBNECK" capture -q -r "$pcap" --store "$url/single" --sensor all
"$TBNECK" export requests --store "$url/single" >"$work/ch.csv"
cmp "$work/sqlite.csv" "$work/ch.csv" ||
    { echo "FAIL: ClickHouse export differs from SQLite's"; diff "$work/sqlite.csv" "$work/ch.csv" | head; exit 1; }
for tier in $(tail -n +2 "$work/sqlite.csv" | cut -d, -f1 | sort -u); do
    "$TBNECK" export requests --db "$work/one.db" --tier "$tier" >"$work/t1.csv"
    "$TBNECK" export requests --store "$url/single" --tier "$tier" >"$work/t2.csv"
    cmp "$work/t1.csv" "$work/t2.csv" || { echo "FAIL: tier $tier differs"; exit 1; }
done
echo "one sensor: $n requests, export identical to SQLite's (whole and per tier)"

# Two sensors, disjoint halves, one database.
"$TBNECK" capture -q -r "$pcap" --store "$url/merged" --sensor db-switch tcp port 3306
"$TBNECK" capture -q -r "$pcap" --store "$url/merged" --sensor web-switch not tcp port 3306
"$TBNECK" export requests --store "$url/merged" >"$work/merged.csv"
ch_query a "SELECT sensor, tier, class, class_hash, tier_hash, count() FROM merged.requests
    GROUP BY sensor, tier, class, class_hash, tier_hash FORMAT JSONEachRow" >"$work/ids.json"
# Read back: report (every tier; text, JSON, CSV) and export windows from the two
# sensors' merged store equal the single sensor's SQLite ones byte for byte.
for args in "--tier http" "--tier http-8080 --format json" "--tier mysql" "--tier mysql --format csv"; do
    # shellcheck disable=SC2086
    "$TBNECK" report --db "$work/one.db" $args >"$work/r1.txt" 2>&1
    # shellcheck disable=SC2086
    "$TBNECK" report --store "$url/merged" $args >"$work/r2.txt" 2>&1
    cmp "$work/r1.txt" "$work/r2.txt" ||
        { echo "FAIL: report $args differs"; diff "$work/r1.txt" "$work/r2.txt" | head; exit 1; }
done
"$TBNECK" export windows --db "$work/one.db" --tier http >"$work/w1.csv"
"$TBNECK" export windows --store "$url/merged" --tier http >"$work/w2.csv"
cmp "$work/w1.csv" "$work/w2.csv" || { echo "FAIL: export windows differs"; exit 1; }
"$TBNECK" diagnose --db "$work/one.db" >"$work/d1.txt" 2>&1
"$TBNECK" diagnose --store "$url/merged" >"$work/d2.txt" 2>&1
cmp "$work/d1.txt" "$work/d2.txt" ||
    { echo "FAIL: diagnose differs"; diff "$work/d1.txt" "$work/d2.txt" | head; exit 1; }
ls "${TMPDIR:-/tmp}"/tbneck-clickhouse-* >/dev/null 2>&1 &&
    { echo "FAIL: a temporary copy was left behind"; exit 1; }
echo "two sensors: report of every tier (text, json, csv), export windows and diagnose = single SQLite"
# A second capture by one sensor: its conn and seq continue above what it stored.
ch_query a "SELECT max(conn), max(seq), count() FROM merged.requests WHERE sensor = 'db-switch'
    FORMAT TabSeparated" >"$work/before.tsv"
"$TBNECK" capture -q -r "$pcap" --store "$url/merged" --sensor db-switch tcp port 3306
ch_query a "SELECT min(conn), min(seq), count() FROM merged.requests WHERE sensor = 'db-switch'
    AND seq > $(cut -f2 "$work/before.tsv") FORMAT TabSeparated" >"$work/after.tsv"

python3 - "$work/sqlite.csv" "$work/merged.csv" "$work/ids.json" "$work/before.tsv" \
    "$work/after.tsv" <<'PY'
import csv, json, sys
single = list(csv.reader(open(sys.argv[1])))
merged = list(csv.reader(open(sys.argv[2])))
assert single[0] == merged[0], "headers differ"
CONN = single[0].index("conn")
def strip(rows):
    return sorted(tuple(r[:CONN] + r[CONN + 1:]) for r in rows[1:])
a, b = strip(single), strip(merged)
if a != b:
    sa, sb = set(a), set(b)
    sys.exit("FAIL: merged rows differ from the single sensor's: %d only in single, %d only in "
             "merged (e.g. %s / %s)" % (len(sa - sb), len(sb - sa), sorted(sa - sb)[:1],
                                         sorted(sb - sa)[:1]))
# conn: the single capture's ids and each sensor's map one to one (the sensors
# are told apart by tier: the db switch saw tier mysql only).
def key(r):
    return tuple(r[:CONN] + r[CONN + 1:])
m1 = {}
for r in single[1:]:
    m1.setdefault(key(r), []).append(r[CONN])
pairs = set()
for r in merged[1:]:
    pairs.add((r[0] == "mysql", m1[key(r)][0], r[CONN]))
fwd, back = {}, {}
for side, c1, c2 in pairs:
    assert fwd.setdefault((side, c1), c2) == c2, "conn %s maps to two ids" % c1
    assert back.setdefault((side, c2), c1) == c1, "conn %s of a sensor maps to two ids" % c2

def fnv(data, h=0xcbf29ce484222325):
    for x in data:
        h ^= x
        h = (h * 0x100000001b3) % (1 << 64)
    return h
per_sensor, per_tier = {}, {}
for line in open(sys.argv[3]):
    o = json.loads(line)
    t, c = o["tier"].encode(), o["class"].encode()
    assert int(o["tier_hash"]) == fnv(t), "tier_hash of %r" % t
    assert int(o["class_hash"]) == fnv(c, fnv(t + b"\0")), "class_hash of %r/%r" % (t, c)
    per_sensor[o["sensor"]] = per_sensor.get(o["sensor"], 0) + int(o["count()"])
    per_tier.setdefault(o["tier"], set()).add(o["sensor"])
want_db = sum(1 for r in single[1:] if r[0] == "mysql")
assert per_sensor == {"db-switch": want_db, "web-switch": len(single) - 1 - want_db}, per_sensor
assert per_tier["mysql"] == {"db-switch"}, per_tier
mc, ms, n = map(int, open(sys.argv[4]).read().split())
c2, s2, n2 = map(int, open(sys.argv[5]).read().split())
assert n == want_db and n2 == want_db, (n, n2, want_db)
assert c2 == mc + 1 and s2 == ms + 1, "second capture starts at conn %d seq %d after %d %d" % (
    c2, s2, mc, ms)
print("two sensors: %d + %d requests merged = the single sensor's %d (conn mapped one to one); "
      "%d identities hashed as FNV-1a of their text; a second capture continues at conn %d, "
      "seq %d" % (per_sensor["web-switch"], want_db, len(single) - 1, sum(1 for _ in
      open(sys.argv[3])), c2, s2))
PY

# Errors: one line each, documented exit statuses.
expect() { # expect STATUS PATTERN CMD...
    local want=$1 pat=$2
    shift 2
    set +e
    "$@" >/dev/null 2>"$work/err"
    local got=$?
    set -e
    [ "$got" -eq "$want" ] || { echo "FAIL: $* exited $got, not $want"; cat "$work/err"; exit 1; }
    [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "$pat" "$work/err" ||
        { echo "FAIL: $*: expected one line matching '$pat':"; cat "$work/err"; exit 1; }
}
dead=$(ch_freeport)
expect 1 "Couldn't connect" "$TBNECK" capture -q -r "$pcap" --store-retry 0 \
    --store "clickhouse://127.0.0.1:$dead/x"
expect 1 "nodb" "$TBNECK" export requests --store "$url/nodb"
expect 2 "expected sqlite:FILE" "$TBNECK" export requests --store "mysql://h/x"
expect 2 "expected HOST:PORT" "$TBNECK" capture -q -r "$pcap" --store "clickhouse://127.0.0.1/x"
expect 2 "has 0 shards" "$TBNECK" capture -q -r "$pcap" --store "$url/x?cluster=c"
expect 2 "name it with ?cluster" "$TBNECK" export requests --store "$url,127.0.0.1:1/x"
expect 2 "give --store" "$TBNECK" capture -q -r "$pcap" --sensor s --db "$work/x.db"
expect 2 "bad duration" "$TBNECK" capture -q -r "$pcap" --store-retry soon --store "$url/x"

# An outage: the server is down when the capture starts and comes back 3 s
# later on the same ports and data; the capture waits (--store-retry, default
# 30 s), says so in one line, and stores everything.
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
"$TBNECK" capture -q -r "$pcap" --store "$url/late" --sensor late 2>"$work/late.err" &
cpid=$!
sleep 3
ch_start a || { echo "FAIL: clickhouse-server did not restart"; exit 1; }
wait "$cpid" || { echo "FAIL: the capture did not survive the outage"; cat "$work/late.err"; exit 1; }
grep -q "trying again every second" "$work/late.err" ||
    { echo "FAIL: no word of the outage"; cat "$work/late.err"; exit 1; }
"$TBNECK" export requests --store "$url/late" >"$work/late.csv"
cmp "$work/sqlite.csv" "$work/late.csv" || { echo "FAIL: rows lost in the outage"; exit 1; }
echo "outage: the capture waited for the server (3 s) and stored all $n requests"
echo "PASS"
