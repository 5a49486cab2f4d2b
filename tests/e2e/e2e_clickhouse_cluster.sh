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

for s in a b; do ch_http[$s]=$(ch_freeport); ch_tcp[$s]=$(ch_freeport); done
cluster="<tb2>"
for s in a b; do
    cluster+="<shard><replica><host>127.0.0.1</host><port>${ch_tcp[$s]}</port></replica></shard>"
done
cluster+="</tb2>"
ch_start a "$cluster" || { echo "FAIL: shard a did not start"; exit 1; }
ch_start b "$cluster" || { echo "FAIL: shard b did not start"; exit 1; }
url="clickhouse://127.0.0.1:${ch_http[a]},127.0.0.1:${ch_http[b]}/tbc?cluster=tb2"

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q
pcap="$work/sim.pcap"
"$TBNECK" capture -q -r "$pcap" --db "$work/one.db"
"$TBNECK" export requests --db "$work/one.db" >"$work/sqlite.csv"
n=$(($(wc -l <"$work/sqlite.csv") - 1))

"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor db-switch tcp port 3306
"$TBNECK" capture -q -r "$pcap" --store "$url" --sensor web-switch not tcp port 3306

# Where the rows are: each shard's own tables.
for s in a b; do
    ch_query "$s" "SELECT server, count() FROM tbc.requests_local GROUP BY server ORDER BY server
        FORMAT TabSeparated" >"$work/req.$s.tsv"
    ch_query "$s" "SELECT server_addr, count() FROM tbc.connections_local WHERE server_addr != ''
        GROUP BY server_addr ORDER BY server_addr FORMAT TabSeparated" >"$work/conn.$s.tsv"
done
python3 - "$work" "$n" <<'PY'
import sys
work, n = sys.argv[1], int(sys.argv[2])
def load(kind, s):
    return dict((l.split("\t")[0], int(l.split("\t")[1])) for l in open("%s/%s.%s.tsv" % (work, kind, s)) if l.strip())
for kind in ("req", "conn"):
    a, b = load(kind, "a"), load(kind, "b")
    assert a and b, "%s: a shard holds nothing (%s / %s)" % (kind, a, b)
    both = set(a) & set(b)
    assert not both, "%s: servers on both shards: %s" % (kind, both)
    if kind == "req":
        assert sum(a.values()) + sum(b.values()) == n, (sum(a.values()), sum(b.values()), n)
        print("shards: a holds %s, b holds %s (%d requests in all, each server on one shard)"
              % (sorted(a.items()), sorted(b.items()), n))
PY

for args in "--tier http" "--tier http-8080" "--tier mysql --format json"; do
    # shellcheck disable=SC2086
    "$TBNECK" report --db "$work/one.db" $args >"$work/r1.txt" 2>&1
    # shellcheck disable=SC2086
    "$TBNECK" report --store "$url" $args >"$work/r2.txt" 2>&1
    cmp "$work/r1.txt" "$work/r2.txt" ||
        { echo "FAIL: report $args differs"; diff "$work/r1.txt" "$work/r2.txt" | head; exit 1; }
done
for cmd in "diagnose" "diagnose --format json"; do
    # shellcheck disable=SC2086
    "$TBNECK" $cmd --db "$work/one.db" >"$work/d1.txt" 2>&1
    # shellcheck disable=SC2086
    "$TBNECK" $cmd --store "$url" >"$work/d2.txt" 2>&1
    cmp "$work/d1.txt" "$work/d2.txt" ||
        { echo "FAIL: $cmd differs"; diff "$work/d1.txt" "$work/d2.txt" | head; exit 1; }
done
"$TBNECK" export requests --store "$url" >"$work/merged.csv"
python3 - "$work/sqlite.csv" "$work/merged.csv" <<'PY'
import csv, sys
a = list(csv.reader(open(sys.argv[1])))
b = list(csv.reader(open(sys.argv[2])))
c = a[0].index("conn")
strip = lambda rows: sorted(tuple(r[:c] + r[c + 1:]) for r in rows[1:])
assert a[0] == b[0] and strip(a) == strip(b), "merged requests differ from the single sensor's"
print("two sensors through 2 shards: report of every tier, diagnose and %d requests = single SQLite" % (len(a) - 1))
PY

set +e
"$TBNECK" capture -q -r "$pcap" --store "clickhouse://127.0.0.1:${ch_http[a]}/tbc?cluster=tb2" \
    >/dev/null 2>"$work/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "has 2 shards" "$work/err" ||
    { echo "FAIL: one endpoint for 2 shards: exit $rc"; cat "$work/err"; exit 1; }
echo "PASS"
