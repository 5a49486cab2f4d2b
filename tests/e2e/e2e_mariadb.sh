#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_mariadb.sh — MySQL parser against tshark and pt-query-digest on a real
# capture: a private mariadbd on a random loopback port is driven by the
# mariadb client (queries, an error, a multi-result CALL, USE), mariadb-admin
# (ping, status) and sysbench oltp_read_only, once with text queries and once
# with prepared statements, bounded by --events; tcpdump records it all with
# nanosecond stamps, handshakes included. Then:
#   - every command tshark decodes that has a response is reported by tbneck
#     once, at the same client port and arrival (the command's packet), so the
#     counts per command are equal, and tbneck reports nothing else;
#   - pt-query-digest (--type tcpdump) counts as many queries as tbneck reports
#     COM_QUERY exchanges, and the same count per fingerprint;
#   - each departure is the last server packet before the client's next data
#     packet, computed from tshark's frame list alone;
#   - statuses and classes of known statements are exact;
#   - cut to a snaplen of 128 bytes, the capture gives the same exchanges.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: capturing on lo needs root"; exit 77; }
for p in mariadbd mariadb-install-db mariadb mariadb-admin sysbench tcpdump tshark editcap \
    pt-query-digest python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
}
trap cleanup EXIT
# shellcheck source=lib/proto_mariadb.sh
source "$lib/proto_mariadb.sh"
proto_mariadb_start || { echo "FAIL: mariadbd did not start"; exit 1; }

sb=(sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$dbport"
    --mysql-user=root --mysql-db=sbtest --mysql-ssl=off --tables=1 --table-size=1000)
proto_sql -e 'CREATE DATABASE sbtest'
"${sb[@]}" prepare >"$work/sb-prepare.out" 2>&1 || { cat "$work/sb-prepare.out"; exit 1; }

# A loaded machine can make tcpdump drop packets on lo; the comparison is
# meant to be on a complete capture, so the capture is repeated (at most 3
# times) until tcpdump reports no drop. (Body kept unindented: it holds a
# here-document.)
capture_once() {
tcpdump -i lo -s 0 -B 32768 --time-stamp-precision=nano -U -w "$work/cap.pcap" \
    "tcp port $dbport" 2>"$work/tcpdump.err" &
tpid=$!
pids+=($tpid)
for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
sleep 0.2

proto_sql --force -D sbtest >"$work/client.out" 2>&1 <<'SQL' || true
SELECT c FROM sbtest1 WHERE id IN (1, 2, 3);
SELECT * FROM no_such_table;
CREATE TEMPORARY TABLE tmp_t (a INT);
INSERT INTO tmp_t VALUES (1), (2), (3);
DELIMITER //
CREATE OR REPLACE PROCEDURE two_results() BEGIN SELECT 1; SELECT 2, 'two'; END//
DELIMITER ;
CALL two_results();
USE mysql
SELECT COUNT(*) FROM sbtest.sbtest1 WHERE k > 10;
SQL
mariadb-admin --no-defaults -h 127.0.0.1 -P "$dbport" --protocol=tcp -u root --skip-ssl \
    ping status >/dev/null
for mode in disable auto; do
    "${sb[@]}" --threads=2 --events=60 --time=0 --rate=150 --db-ps-mode=$mode run \
        >"$work/sb-$mode.out" 2>&1 || { cat "$work/sb-$mode.out"; exit 1; }
done
sleep 1.2 # tcpdump hands over its buffer at least once a second
kill -INT "$tpid"
wait "$tpid" 2>/dev/null || true
grep -q "^0 packets dropped by kernel" "$work/tcpdump.err"
}
attempt=1
until capture_once; do
    echo "tcpdump dropped packets (attempt $attempt):"; cat "$work/tcpdump.err"
    [ "$attempt" -lt 3 ] || { echo "FAIL: tcpdump dropped packets in 3 attempts (machine too loaded)"; exit 1; }
    attempt=$((attempt + 1))
done

db="$work/t.db"
"$TBNECK" capture -r "$work/cap.pcap" --db "$db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
"$TBNECK" export requests --db "$db" >"$work/requests.csv"

tshark -r "$work/cap.pcap" -d "tcp.port==$dbport,mysql" -Y mysql.command -T fields \
    -E separator=/t -E aggregator=, -e frame.time_epoch -e tcp.srcport -e mysql.command \
    >"$work/commands.tsv" 2>/dev/null
tshark -r "$work/cap.pcap" -T fields -E separator=/t -e tcp.stream -e frame.time_epoch \
    -e tcp.len -e tcp.srcport -e tcp.dstport >"$work/frames.tsv" 2>/dev/null
tcpdump -r "$work/cap.pcap" -x -n -q -tttt 2>/dev/null >"$work/cap.txt"
pt-query-digest --type tcpdump --watch-server "127.0.0.1:$dbport" --limit 100% \
    --output json --no-version-check "$work/cap.txt" >"$work/pt.json" 2>"$work/pt.err" ||
    { echo "FAIL: pt-query-digest"; cat "$work/pt.err"; exit 1; }

python3 "$lib/proto_mysql_compare.py" "$work/requests.csv" "$work/commands.tsv" \
    "$work/frames.tsv" "$work/pt.json" "$dbport"

# The same capture cut to a snaplen of 128 bytes (as tcpdump -s 128 would):
# every command and response is still framed by its length, or bounded by the next command.
editcap -s 128 "$work/cap.pcap" "$work/cut.pcap"
"$TBNECK" capture -r "$work/cut.pcap" --db "$work/cut.db" >"$work/cut.out" 2>&1 ||
    { echo "FAIL: tbneck capture (snaplen)"; cat "$work/cut.out"; exit 1; }
"$TBNECK" export requests --db "$work/cut.db" >"$work/cut.csv"
python3 "$lib/proto_snaplen_compare.py" "$work/requests.csv" "$work/cut.csv" 1.0
echo "PASS"
