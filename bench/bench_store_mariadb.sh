#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_store_mariadb.sh — the storage cost on a real capture: a private
# mariadbd on a random loopback port (tests/e2e/lib/proto_mariadb.sh) is
# driven by sysbench oltp_read_only (TB_BENCH_EVENTS events, default 10 000,
# about 16 queries each) while tcpdump records it; then, on that capture and
# in the same run, the bare libpcap read (bench/bare_read), `tbneck capture
# --no-store` and `tbneck capture --db` (a fresh file each run), each the best
# of TB_BENCH_RUNS (default 5) by wall time and by CPU time (user + sys of the
# process and its threads), and the ratio --db / --no-store (target <= 2).
# With clickhouse-server installed, `capture --store clickhouse://...` into a
# private instance (tests/e2e/lib/clickhouse.sh; a fresh database each run)
# too: tbneck's own CPU (the server's is not counted) and wall time.
# TB_BENCH_CH=0 skips ClickHouse. TB_BENCH_PCAP=FILE reuses (or, when missing, keeps) the capture; root only
# (tcpdump on lo). Prints one line per contender and the ratio lines.
set -uo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
bare="$TB_BUILDDIR/bench/bare_read"
runs=${TB_BENCH_RUNS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-store-mariadb.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
pcap=${TB_BENCH_PCAP:-$work/cap.pcap}

if [ ! -s "$pcap" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "bench_store_mariadb: capturing on lo needs root"; exit 77; }
    for p in mariadbd mariadb-install-db mariadb sysbench tcpdump; do
        command -v "$p" >/dev/null || { echo "bench_store_mariadb: $p not installed"; exit 77; }
    done
    # shellcheck source=../tests/e2e/lib/proto_mariadb.sh
    source "$TB_SRCDIR/tests/e2e/lib/proto_mariadb.sh"
    proto_mariadb_start || { echo "bench_store_mariadb: mariadbd did not start"; exit 1; }
    sb=(sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$dbport"
        --mysql-user=root --mysql-db=sbtest --mysql-ssl=off --tables=1 --table-size=10000)
    proto_sql -e 'CREATE DATABASE sbtest'
    "${sb[@]}" prepare >"$work/prepare.out" 2>&1 || { cat "$work/prepare.out"; exit 1; }
    tcpdump -i lo -s 0 -B 65536 --time-stamp-precision=nano -w "$pcap" "tcp port $dbport" \
        2>"$work/tcpdump.err" &
    tpid=$!
    pids+=($tpid)
    for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
    sleep 0.2
    "${sb[@]}" --threads=4 --events="${TB_BENCH_EVENTS:-10000}" --time=0 run \
        >"$work/run.out" 2>&1 || { cat "$work/run.out"; exit 1; }
    sleep 1.2 # tcpdump hands over its buffer at least once a second
    kill -INT "$tpid"
    wait "$tpid" 2>/dev/null || true
    grep "dropped by kernel" "$work/tcpdump.err" | sed 's/^/tcpdump: /'
fi
cat "$pcap" >/dev/null # into the page cache for every contender alike
churl=""
if [ "${TB_BENCH_CH:-1}" != 0 ] && command -v clickhouse-server >/dev/null; then
    # shellcheck source=../tests/e2e/lib/clickhouse.sh
    source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
    ch_start bench >/dev/null && churl="clickhouse://127.0.0.1:${ch_http[bench]}"
fi

python3 - "$runs" "$bare" "$TBNECK" "$pcap" "$work/s.db" "$churl" <<'PY'
import glob, os, resource, subprocess, sys, time
runs, bare, tbneck, pcap, db = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
churl = sys.argv[6]
nch = [0]

def rm_db():
    for f in glob.glob(db + "*"):
        os.unlink(f)

def once(cmd, pre=None):
    if pre:
        pre()
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w = time.monotonic() - t
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit("bench_store_mariadb: %s exited %d" % (" ".join(cmd), r.returncode))
    return w, a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime

cont = [("bare libpcap read", [bare, pcap], None),
        ("capture --no-store", [tbneck, "capture", "-q", "--no-store", "-r", pcap], None),
        ("capture --db", [tbneck, "capture", "-q", "--db", db, "-r", pcap], rm_db)]
class ChCmd(list):
    # A fresh database per run, so every run inserts into empty tables.
    def fresh(self):
        nch[0] += 1
        self[6] = "%s/bench%d" % (churl, nch[0])
if churl:
    cont.append(("capture --store ch", ChCmd([tbneck, "capture", "-q", "--sensor", "b",
                                               "--store", "", "-r", pcap]), None))
best = {n: [float("inf"), float("inf")] for n, _, _ in cont}
# Interleaved, so that a burst of load elsewhere touches every contender alike.
for _ in range(runs):
    for name, cmd, pre in cont:
        if isinstance(cmd, ChCmd):
            cmd.fresh()
        w, c = once(cmd, pre)
        best[name][0] = min(best[name][0], w)
        best[name][1] = min(best[name][1], c)
out = subprocess.run([tbneck, "capture", "--no-store", "-r", pcap], capture_output=True,
                     text=True).stderr
line = next((l for l in out.splitlines() if l.startswith("capture:")), "")
print("bench_store_mariadb: %d CPUs, load %s; %s" % (
    os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), line))
print("%-22s %10s %10s" % ("", "wall s", "CPU s"))
for name, _, _ in cont:
    print("%-22s %10.4f %10.4f" % (name, best[name][0], best[name][1]))
n, d = best["capture --no-store"], best["capture --db"]
for i, what in ((0, "wall"), (1, "CPU")):
    r = d[i] / n[i]
    print("ratio --db / --no-store by %s time: %.2f (target <= 2: %s)" % (
        what, r, "met" if r <= 2 else "NOT met"))
if churl:
    c = best["capture --store ch"]
    print("ratio --store clickhouse / --no-store: wall %.2f, CPU %.2f (tbneck's own; the "
          "server's CPU is not counted)" % (c[0] / n[0], c[1] / n[1]))
PY
