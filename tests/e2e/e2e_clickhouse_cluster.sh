#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_clickhouse_cluster.sh — the issue's acceptance on a 2-shard ClickHouse
# cluster: two private clickhouse-server processes on loopback (both
# configured with cluster tb2 = shard a + shard b), two sensors reading
# disjoint BPF halves of one simulated 3-tier capture (sim/examples/quick.conf:
# the DB switch's `tcp port 3306`, the web/app switch's `not tcp port 3306`)
# written through --store clickhouse://A,B/tbc?cluster=tb2. Then:
#   - the tables exist on both shards; every server's requests and
#     connections live on exactly one shard, both shards hold some, and the
#     shards' counts add up to the single sensor's (read on each shard's own
#     MergeTree table, not through tbneck);
#   - `report` of every tier (text, JSON), `diagnose` (text, JSON) and
#     `export requests` minus conn,
#     read through the Distributed tables, equal the single-sensor SQLite
#     ones byte for byte (report) and row for row (requests);
#   - a URL naming fewer shards than system.clusters lists exits 2, one line;
#   - an offline capture whose insert the cluster stores in part (shard b's
#     local table made to throw until the insert failed): the requests batch,
#     then in another database the connections batch, is completed — exit 0,
#     every row on its shard once (requests: the shards add up to the SQLite
#     count, export requests equal; connections: as many rows, all distinct,
#     as SQLite holds, and report/diagnose equal);
#   - shard b never mended within --store-retry 3s: exit 1, the error the last
#     line, no staging table left; a capture killed mid-completion leaves one,
#     which the next capture of that sensor drops (one warning line).
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
# shellcheck source=lib/clickhouse.sh
source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
ch_test_setup

ch_cluster_start || exit 1

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q
pcap="$work/sim.pcap"
"$TBNECK" capture -q -r "$pcap" --db "$work/one.db"
"$TBNECK" export requests --db "$work/one.db" >"$work/sqlite.csv"
n=$(($(wc -l <"$work/sqlite.csv") - 1))

"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor db-switch tcp port 3306
"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor web-switch not tcp port 3306

# Where the rows are: each shard's own tables.
ch_check_shards "$n" || { echo "FAIL: rows on the shards"; exit 1; }

ch_same_analyses "$work/one.db" "$url" || exit 1
"$TBNECK" export requests --store "$url" >"$work/merged.csv"
ch_same_requests "$work/sqlite.csv" "$work/merged.csv" || exit 1
echo "two sensors through 2 shards: report of every tier, diagnose and the requests = single SQLite"

set +e
"$TBNECK" capture -q -r "$pcap" --store "clickhouse://127.0.0.1:${ch_http[a]}/tbc?cluster=tb2" \
    >/dev/null 2>"$work/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "has 2 shards" "$work/err" ||
    { echo "FAIL: one endpoint for 2 shards: exit $rc"; cat "$work/err"; exit 1; }

# An offline capture into a cluster that stores its insert only in part.
# Shard b's requests table gets a column whose value throws (MATERIALIZED
# throwIf, as the live test does: a shard failing while it writes), so the
# insert through shard a's Distributed table fails after a wrote its part.
# stage DB [TABLE KEY]: makes DB's tables (a capture that stores nothing)
# and breaks shard b's TABLE (default requests, by seq).
stage() {
    "$TBNECK" capture -q -r "$pcap" --store "${url/\/tbc\?//$1?}" --sensor pre tcp port 9 ||
        { echo "FAIL: making $1's tables"; exit 1; }
    ch_query b "ALTER TABLE $1.${2:-requests}_local ADD COLUMN boom UInt8 MATERIALIZED
        throwIf(${3:-seq} > 0)" || { echo "FAIL: ALTER on shard b"; exit 1; }
}
mend() {
    ch_query b "ALTER TABLE $1.${2:-requests}_local DROP COLUMN boom" || { echo "FAIL: mend $1"; exit 1; }
}
# staging DB: the staging tables (tbneck-*) left on shard a.
# failed FILE: waits (at most 30 s) until the capture writing FILE says its
# insert failed and may be stored in part, so that b is mended only after.
failed() {
    for _ in $(seq 300); do grep -qs "may be stored in part" "$1" && return 0; sleep 0.1; done
    cat "$1"; echo "FAIL: no insert failed"; exit 1
}
staging() {
    ch_query a "SELECT count() FROM system.tables WHERE database = '$1' AND name LIKE 'tbneck-%'"
}

# 1. b mended once the insert failed: the batch is completed (the
# missing rows sent, only those), exit 0, each request on its shard once,
# the same rows as the SQLite capture; no staging table left.
stage tbo
url_o=${url/\/tbc\?//tbo?}
t0=$(date +%s.%N)
"$TBNECK" capture -q -r "$pcap" --store "$url_o" --sensor all >"$work/o.out" 2>"$work/o.err" &
cap=$!
failed "$work/o.err"
mend tbo
wait "$cap" || { cat "$work/o.err"; echo "FAIL: the offline capture did not complete the batch"; exit 1; }
echo "partial insert completed in $(python3 -c "import time; print('%.1f s' % (time.time() - $t0))")"
cat "$work/o.err"
ch_check_shards "$n" tbo || { echo "FAIL: rows on the shards after the partial insert"; exit 1; }
"$TBNECK" export requests --store "$url_o" >"$work/merged_o.csv"
ch_same_requests "$work/sqlite.csv" "$work/merged_o.csv" || exit 1
grep -q "the store held [1-9][0-9]* of batch [0-9]*'s $n requests after a failed insert; the other [1-9][0-9]* were sent again" \
    "$work/o.err" || { echo "FAIL: no batch was held in part (the test did not split one)"; exit 1; }
[ "$(staging tbo)" = 0 ] || { echo "FAIL: a staging table is left on shard a"; exit 1; }
echo "offline capture, shard b failing its part: batch completed, $n requests stored once"

# 1b. The same with shard b failing its part of the connections: the
# batch is completed by conn id (only the missing rows sent), so the shards
# hold each connection once, as many as the SQLite capture (before: the
# whole batch was sent again, and the rows shard a held were there twice);
# report and diagnose (which reads the connections) equal SQLite's.
stage tbq connections conn
url_q=${url/\/tbc\?//tbq?}
"$TBNECK" capture -q -r "$pcap" --store "$url_q" --sensor all >"$work/q.out" 2>"$work/q.err" &
cap=$!
failed "$work/q.err"
mend tbq connections
wait "$cap" || { cat "$work/q.err"; echo "FAIL: the connections were not completed"; exit 1; }
nconn=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
    "SELECT count(*) FROM connections").fetchone()[0])' "$work/one.db")
got=$(ch_query a "SELECT count(), uniqExact(sensor, conn) FROM tbq.connections WHERE sensor = 'all'
    FORMAT TSV")
[ "$got" = "$nconn	$nconn" ] ||
    { cat "$work/q.err"; echo "FAIL: connections (rows, distinct) $got, SQLite holds $nconn"; exit 1; }
ch_check_shards "$n" tbq || { echo "FAIL: rows on the shards"; exit 1; }
ch_same_analyses "$work/one.db" "$url_q" || exit 1
grep "connections after a failed insert" "$work/q.err" ||
    { cat "$work/q.err"; echo "FAIL: no connections batch was held in part"; exit 1; }
[ "$(staging tbq)" = 0 ] || { echo "FAIL: a staging table is left on shard a"; exit 1; }
echo "offline capture, shard b failing its part of the connections: $nconn connections stored once"

# 2. b never mended within --store-retry 3s: exit 1, the error the last
# line of stderr; the capture drops its staging table before it exits.
stage tbx
url_x=${url/\/tbc\?//tbx?}
set +e
"$TBNECK" capture -q -r "$pcap" --store "$url_x" --sensor all --store-retry 3s >/dev/null 2>"$work/x.err"
rc=$?
set -e
tail -1 "$work/x.err" | grep -q "^tbneck: capture: clickhouse at .*could not be completed" && [ "$rc" -eq 1 ] ||
    { cat "$work/x.err"; echo "FAIL: a batch that cannot be completed: exit $rc"; exit 1; }
tail -1 "$work/x.err"
[ "$(staging tbx)" = 0 ] || { echo "FAIL: the capture that gave up left its staging table"; exit 1; }

# 3. A capture killed while its fill fails leaves the staging table; the
# next capture of that sensor drops it when it starts (one warning line).
"$TBNECK" capture -q -r "$pcap" --store "$url_x" --sensor killed >/dev/null 2>"$work/k.err" &
cap=$!
for _ in $(seq 100); do [ "$(staging tbx)" != 0 ] && break; sleep 0.1; done
{ kill -KILL "$cap"; wait "$cap"; } 2>/dev/null || true
[ "$(staging tbx)" = 1 ] || { cat "$work/k.err"; echo "FAIL: no staging table to clean up"; exit 1; }
mend tbx
"$TBNECK" capture -q -r "$pcap" --store "$url_x" --sensor killed tcp port 9 2>"$work/k2.err" ||
    { cat "$work/k2.err"; echo "FAIL: the next capture"; exit 1; }
grep -q "dropped 1 staging table" "$work/k2.err" || { cat "$work/k2.err"; echo "FAIL: no line about it"; exit 1; }
[ "$(staging tbx)" = 0 ] || { echo "FAIL: the next capture left the staging table"; exit 1; }
echo "a staging table left by a killed capture: dropped by the next capture of its sensor"
echo "PASS"
