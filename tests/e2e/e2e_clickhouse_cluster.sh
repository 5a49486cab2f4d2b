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
#   - a URL naming fewer shards than system.clusters lists exits 2, one line.
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
echo "PASS"
