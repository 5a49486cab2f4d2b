#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_sim_protocols.sh — tbneck-sim's PostgreSQL (simple and extended query
# protocol) and Redis (RESP2) tiers, with tshark's pgsql and resp dissectors
# as the oracle: no malformed packet, no protocol or TCP warning, no bad
# checksum; every request tshark sees paired with its answer gives exactly the
# truth's client, server, arrival and departure; its text is its class's
# template filled in ($N parameters in the extended protocol); errors
# (SQLSTATE 55P03, -ERR) where the truth's status says. Then tbneck's own
# parsers reproduce the truth exactly (requests, classes, statuses,
# connections).
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
command -v tshark >/dev/null || { echo "FAIL: tshark is needed (scripts/deps.sh installs it)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib="$TB_SRCDIR/tests/e2e/lib"
. "$lib/tshark_clean.sh"
fail=0

run() { # run NAME CONFIG DISSECTOR [sim options...]
    local name=$1 conf=$2 diss=$3
    shift 3
    echo "== $name: $(basename "$conf") $*"
    "$TBNECK_SIM" "$conf" --out "$work/$name" -q "$@"
    tshark_clean "$work/$name.pcap" || fail=1
    local fields=(-e frame.time_epoch -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport)
    if [ "$diss" = pgsql ]; then
        fields+=(-e pgsql.type -e pgsql.query -e pgsql.code)
    else
        fields+=(-e resp.array.length -e resp.string -e resp.integer -e resp.error
                 -e resp.bulk_string.length -e resp.bulk_string.value)
    fi
    tshark -r "$work/$name.pcap" -Y "$diss" -T fields -E separator=/t -E occurrence=a \
        -E aggregator=, "${fields[@]}" >"$work/$name.tsv" 2>/dev/null
    python3 "$lib/sim_tshark.py" "$diss" "$work/$name" "$work/$name.tsv" || fail=1
    "$TBNECK" capture -q -r "$work/$name.pcap" --db "$work/$name.db"
    "$TBNECK" export requests --db "$work/$name.db" >"$work/$name.export.csv"
    python3 "$lib/sim_compare.py" exact "$work/$name.requests.csv" "$work/$name.export.csv" 0 ||
        fail=1
    "$TBNECK" export connections --db "$work/$name.db" >"$work/$name.conns.csv"
    python3 "$lib/sim_compare.py" connections "$work/$name.connections.csv" \
        "$work/$name.conns.csv" || fail=1
}

run pg "$lib/sim_pg.conf" pgsql
run pgx "$lib/sim_pg.conf" pgsql --set tier.db.mode=extended
run redis "$lib/sim_redis.conf" resp
# The runs covered what this test claims: both query protocols, errors.
grep -q 'Parse' "$work/pgx.tsv" || { echo "FAIL: no Parse in the extended run"; fail=1; }
grep -q 'Simple query' "$work/pg.tsv" || { echo "FAIL: no simple query"; fail=1; }
for n in pg pgx redis; do
    python3 -c 'import csv, sys
sys.exit(not any(r["status"] != "0" and r["tier"] in ("postgres", "redis")
                 for r in csv.DictReader(open(sys.argv[1]))))' "$work/$n.requests.csv" ||
        { echo "FAIL: $n has no error reply"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "e2e_sim_protocols: OK"
exit "$fail"
