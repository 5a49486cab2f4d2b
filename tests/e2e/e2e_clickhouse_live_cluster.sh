#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_clickhouse_live_cluster.sh — the issue's acceptance with live sensors:
# two `capture -i` sensors write one 3-tier capture into a 2-shard
# ClickHouse cluster (two private clickhouse-server processes on loopback,
# cluster tb2 = shard a + shard b, tests/e2e/lib/clickhouse.sh) through
# --store clickhouse://A,B/tbc?cluster=tb2. tcpreplay sends a simulated
# capture (sim/examples/quick.conf: 1/2/1 stack, 4 s, two scripted freezes)
# at its own pace from a network namespace of the test's own into a veth
# pair; on the other end listen, at once:
#   - sensor db-switch:  capture -i, BPF `tcp port 3306` (one thread);
#   - sensor web-switch: capture -i --workers 2 (PACKET_FANOUT), BPF `not
#     tcp port 3306`;
#   - tcpdump -w, the oracle's copy: the sockets share the kernel's receive
#     timestamps, so an offline `capture -r` of that copy into SQLite is
#     what one sensor seeing everything would have stored, times included.
# Then:
#   - tcpdump's copy holds every packet of the file, no sensor counted a
#     kernel drop, and each sensor's store line says 0 dropped;
#   - the single-sensor SQLite capture has the simulator's request count;
#   - the tables exist on both shards, every server's requests and
#     connections live on one shard, and the shards add up to that count
#     (each shard's own MergeTree tables, not through tbneck);
#   - `report` of every tier (text, JSON) and `diagnose` (text, JSON) read
#     through the cluster equal the single-sensor SQLite ones byte for byte,
#     and `export requests` row for row (minus conn, a sensor's numbering).
# And again with one sensor while shard b fails its part of every insert
# for 3 s: a batch the cluster held in part is completed (the rest sent, only
# the rest): the shards hold each request once, equal to the single sensor.
# Root only (packet sockets, namespaces): exit 77 otherwise.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, packet sockets)"; exit 77; }
for p in tcpreplay tcpdump; do
    command -v "$p" >/dev/null || fail "$p missing (scripts/deps.sh)"
done
# shellcheck source=lib/clickhouse.sh
source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
ch_test_setup

readers=()
errs=()
cleanup() {
    local p
    for p in "${readers[@]}"; do kill -KILL "$p" 2>/dev/null; done
    ch_veth_cleanup
    ch_test_cleanup
}
trap cleanup EXIT
ch_veth bl || exit 1

ch_cluster_start || fail "the cluster did not start"
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q || fail "simulator"
truth=$(($(wc -l <"$work/sim.requests.csv") - 1))
sent=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)

# sensor STORE NAME ARGS...: a live sensor on $vb into STORE.
sensor() {
    local store=$1 name=$2
    shift 2
    "$TBNECK" capture -i "$vb" --store "$store" --sensor "$name" --spool "$work/$name.spool" \
        --duration 60s "$@" >"$work/$name.out" 2>"$work/$name.err" &
    readers+=($!)
    errs+=("$work/$name.err")
}
# copy NAME: tcpdump's copy into $work/NAME.pcap; then waits until every
# reader listens.
copy() {
    tcpdump -i "$vb" -s 0 -B 65536 --time-stamp-precision=nano -w "$work/$1.pcap" 2>"$work/$1.err" &
    readers+=($!)
    errs+=("$work/$1.err")
    local p e all
    for _ in $(seq 300); do
        all=1
        for e in "${errs[@]}"; do grep -qs "capturing on $vb\|listening on $vb" "$e" || all=0; done
        [ "$all" = 1 ] && break
        for p in "${readers[@]}"; do kill -0 "$p" 2>/dev/null || { tail -3 "${errs[@]}"; fail "a reader exited"; }; done
        sleep 0.1
    done
    [ "$all" = 1 ] || fail "the readers did not start"
    sleep 0.5
}
# replay: the file at its own pace; then every reader stopped (SIGINT).
replay() {
    timeout 60 ip netns exec "$ns" tcpreplay -q -T nano -i "$va" "$work/sim.pcap" >"$work/replay" 2>&1 ||
        { cat "$work/replay"; fail "tcpreplay"; }
    sleep 1
    local p
    for p in "${readers[@]}"; do kill -INT "$p"; done
    for p in "${readers[@]}"; do
        for _ in $(seq 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$p" 2>/dev/null && fail "a reader did not end after SIGINT"
        wait "$p" || { tail -5 "${errs[@]}"; fail "a reader exited with an error"; }
    done
    readers=()
    errs=()
}
# sensor_ok NAME: no kernel drop, no row dropped; prints the summary line.
sensor_ok() {
    grep -qi 'sanitizer\|runtime error' "$work/$1.err" && { cat "$work/$1.err"; fail "$1: sanitizer"; }
    grep -h "^capture $vb:" "$work/$1.out" "$work/$1.err" | head -1
    grep -hq "^capture $vb: .* 0 kernel drops, 0 interface drops" "$work/$1.out" "$work/$1.err" ||
        fail "$1: kernel drops (the comparison could not be exact)"
    grep -hq "^  clickhouse .*: [0-9]* requests and [0-9]* connections stored, 0 requests and 0 connections dropped" \
        "$work/$1.out" "$work/$1.err" || { cat "$work/$1.err"; fail "$1: the store line does not say 0 dropped"; }
}
# copy_ok NAME: tcpdump's copy holds every packet of the file.
copy_ok() {
    local got
    got=$(tcpdump -nr "$work/$1.pcap" 2>/dev/null | wc -l)
    [ "$got" -eq "$sent" ] || fail "tcpdump's copy holds $got packets, the file $sent"
}
# single NAME: tcpdump's copy captured offline into $work/NAME.db (the single
# sensor) and exported to $work/NAME.csv; sets n, checked against the simulator.
single() {
    "$TBNECK" capture -q -r "$work/$1.pcap" --db "$work/$1.db" || fail "offline capture of the copy"
    "$TBNECK" export requests --db "$work/$1.db" >"$work/$1.csv" || fail "export $1.db"
    n=$(($(wc -l <"$work/$1.csv") - 1))
    [ "$n" -eq "$truth" ] || fail "the single sensor stored $n requests, the simulator made $truth"
}

# 1. Two sensors, disjoint halves, one with fan-out workers.
sensor "$url" db-switch tcp port 3306
sensor "$url" web-switch --workers 2 not tcp port 3306
copy dump
replay
for s in db-switch web-switch; do sensor_ok "$s"; done
grep -q "^  worker 1: [1-9]" "$work/web-switch.out" "$work/web-switch.err" ||
    fail "web-switch: the second worker carried nothing"
copy_ok dump
ok "sent $sent packets; tcpdump's copy holds them all; both sensors: 0 kernel drops, 0 rows dropped"

# The single sensor: tcpdump's copy captured offline into SQLite.
single dump
ch_check_shards "$n" || fail "rows on the shards"
ch_same_analyses "$work/dump.db" "$url" || fail "an analysis through the cluster differs"
"$TBNECK" export requests --store "$url" >"$work/merged.csv" || fail "export --store"
ch_same_requests "$work/dump.csv" "$work/merged.csv" || fail "requests through the cluster"
ok "two live sensors (one with --workers 2) through 2 shards: report of every tier and diagnose = single SQLite sensor"

# 2. A shard that fails its part of inserts: 1.5 s into the replay shard
# b's requests table gets a column whose value throws (MATERIALIZED
# throwIf(seq > 0): as a shard with a full disk or too many parts fails
# while it writes), dropped again 3 s later. An insert through shard a's
# Distributed table then fails after a wrote its own part; the sensor,
# which counts an error answer from a cluster as maybe sent, finds that
# batch held in part and, once b takes rows again, sends the rest (only
# the rest): every request stored once, none dropped. (A shard killed, or
# its table detached, makes no such batch on 18.16: a's insert asks every
# shard for its table before it writes anything.)
url2=${url/\/tbc\?/\/tbp?}
sensor "$url2" all
copy dump2
(
    sleep 1.5
    ch_query b "ALTER TABLE tbp.requests_local ADD COLUMN boom UInt8 MATERIALIZED throwIf(seq > 0)" ||
        exit 1
    sleep 3
    ch_query b "ALTER TABLE tbp.requests_local DROP COLUMN boom" || exit 1
) &
outage=$!
replay_start=$(date +%s.%N)
replay
wait "$outage" || fail "shard b: ALTER TABLE failed"
echo "outage run: replay and the sensor's end took $(python3 -c "import time; print('%.1f s' % (time.time() - $replay_start))")"
sensor_ok all
grep -v '^  tier' "$work/all.err" | grep -i 'clickhouse' | head -6
grep -q "the store held [0-9]* of batch [0-9]*'s [0-9]* requests after a failed insert; the other [0-9]* were sent again" \
    "$work/all.err" || fail "no batch was held in part by the cluster (the outage did not split one)"
copy_ok dump2
single dump2
ch_check_shards "$n" tbp || fail "rows on the shards after the outage"
"$TBNECK" export requests --store "$url2" >"$work/merged2.csv" || fail "export --store"
ch_same_requests "$work/dump2.csv" "$work/merged2.csv" || fail "requests through the cluster after the outage"
ok "shard b failing its part for 3 s: batches held in part completed, each of the $n requests stored once"
echo PASS
