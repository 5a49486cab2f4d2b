#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_postgres.sh — PostgreSQL parser against the server's own counters and
# tshark on real captures: a private PostgreSQL (temporary data folder, random
# loopback port, pg_stat_statements loaded) runs pgbench in each of its three
# protocol modes (-M simple, extended, prepared), each in a capture of its own
# taken by tcpdump with nanosecond stamps; the simple-mode capture also holds a
# psql session with COPY in and out, an error, a notice and a notification.
# For each capture:
#   - tbneck's requests equal, one for one, the batches tshark's pgsql
#     dissector shows (first client frame of a batch → its ReadyForQuery frame),
#     with the same arrival and departure to the nanosecond, and each error's
#     SQLSTATE as status (base 36);
#   - per statement, tbneck's count equals pg_stat_statements' calls (the
#     prepares of -M prepared, which the server does not count as calls, equal
#     tshark's Parse-only batches; under the extended protocol,
#     pg_stat_statements under-counts BEGIN/END, which are then held to
#     pgbench's own count of transactions);
#   - the tier is postgres-<port>.
# Then the simple-mode capture without its first third of packets: the
# connections are picked up mid-stream, and every request reported is one of
# the full capture's, with the same times.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
for p in "$pgbin/postgres" "$pgbin/initdb" "$pgbin/pgbench" "$pgbin/psql"; do
    [ -x "$p" ] || { echo "SKIP: $p not installed"; exit 77; }
done
for p in tcpdump tshark editcap python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done

work=$(mktemp -d)
pids=()
pgdir="$work/pg"
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work $pgdir"; else rm -rf "$work" "$pgdir"; fi # TB_KEEP=1: debug
}
trap cleanup EXIT
# PostgreSQL refuses to run as root: as root, the server runs as the package's
# postgres user in a folder of its own — inside the test's folder when that
# user can reach it, else in a private folder it makes in its home.
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "FAIL: no postgres user to run the server"; exit 1; }
    as_pg=(runuser -u postgres --)
    chmod 711 "$work"
    mkdir "$pgdir"
    chown postgres "$pgdir"
    if ! "${as_pg[@]}" test -w "$pgdir"; then
        rmdir "$pgdir"
        pghome=$(getent passwd postgres | cut -d: -f6)
        pgdir=$("${as_pg[@]}" mktemp -d -p "$pghome" tbneck-e2e.XXXXXX) ||
            { echo "FAIL: no folder for the postgres user"; exit 1; }
    fi
else
    mkdir "$pgdir"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$pgbin/initdb" -D "$pgdir/data" -A trust -U postgres --no-sync \
    >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
"${as_pg[@]}" "$pgbin/postgres" -D "$pgdir/data" -p "$port" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories= -c shared_preload_libraries=pg_stat_statements -c fsync=off \
    -c max_connections=20 -c shared_buffers=16MB -c ssl=off >"$work/pg.log" 2>&1 &
pids+=($!)
psql=("$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 postgres)
for _ in $(seq 100); do "${psql[@]}" -c 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
"${psql[@]}" -c 'create extension pg_stat_statements' >/dev/null ||
    { echo "FAIL: postgres did not start"; cat "$work/pg.log"; exit 1; }
"$pgbin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -i -s 1 -q postgres >"$work/init.log" 2>&1 ||
    { cat "$work/init.log"; exit 1; }

# shellcheck source=lib/tcpdump.sh
source "$lib/tcpdump.sh"
# capture NAME CMD...: runs CMD inside a tcpdump capture of the server port
# (repeated, at most 3 times, while tcpdump reports drops), pg_stat_statements
# reset before it and read after it.
capture() {
    local name=$1 attempt=1
    shift
    while :; do
        "${psql[@]}" -c 'select pg_stat_statements_reset()' >/dev/null
        tcpdump_start "$work/$name.pcap" "tcp port $port"
        "$@"
        tcpdump_stop "$work/$name.pcap" && break
        echo "tcpdump dropped packets (attempt $attempt):"; cat "$work/$name.pcap.err"
        [ "$attempt" -lt 3 ] || { echo "FAIL: tcpdump dropped packets in 3 attempts"; exit 1; }
        attempt=$((attempt + 1))
    done
    "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -X -At -F $'\t' postgres \
        -c 'select calls, query from pg_stat_statements' >"$work/$name.pgss"
}

pgbench_run() {
    "$pgbin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -c 2 -t 30 -M "$1" postgres \
        >"$work/pgbench-$1.out" 2>&1 || { cat "$work/pgbench-$1.out"; exit 1; }
}

psql_session() {
    # An error, a notice, a notification, COPY both ways: psql reports the
    # error and goes on (no ON_ERROR_STOP here).
    "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -X -q postgres >"$work/psql.out" 2>&1 <<'SQL'
create temp table t (a int, b text);
copy t from stdin;
1	one
2	two
\.
copy t to stdout;
select * from no_such_table;
drop table if exists no_such_table;
listen ch;
notify ch, 'hi';
select count(*) from t where a > 1;
SQL
}

simple_mode() { pgbench_run simple; psql_session; }

capture simple simple_mode
capture extended pgbench_run extended
capture prepared pgbench_run prepared

for mode in simple extended prepared; do
    "$TBNECK" capture -r "$work/$mode.pcap" --db "$work/$mode.db" >"$work/$mode.out" 2>&1 ||
        { echo "FAIL: tbneck capture ($mode)"; cat "$work/$mode.out"; exit 1; }
    "$TBNECK" export requests --db "$work/$mode.db" >"$work/$mode.csv"
    tshark -r "$work/$mode.pcap" -d "tcp.port==$port,pgsql" -Y pgsql -T fields -E separator=/t \
        -E aggregator=, -e frame.time_epoch -e tcp.stream -e tcp.srcport -e pgsql.type \
        -e pgsql.code >"$work/$mode.tsv" 2>/dev/null
    python3 "$lib/proto_pgsql_compare.py" "$mode" "$port" "$work/$mode.csv" "$work/$mode.tsv" \
        "$work/$mode.pgss" "$work/pgbench-$mode.out"
done

# Mid-stream: the simple-mode capture without its first third.
total=$(tshark -r "$work/simple.pcap" -T fields -e frame.number 2>/dev/null | tail -1)
editcap -r "$work/simple.pcap" "$work/cut.pcap" "$((total / 3))-$total" 2>/dev/null
"$TBNECK" capture -r "$work/cut.pcap" --db "$work/cut.db" >"$work/cut.out" 2>&1 ||
    { echo "FAIL: tbneck capture (mid-stream)"; cat "$work/cut.out"; exit 1; }
"$TBNECK" export requests --db "$work/cut.db" >"$work/cut.csv"
python3 "$lib/proto_pgsql_compare.py" midstream "$port" "$work/cut.csv" "$work/simple.csv"
echo "PASS"
