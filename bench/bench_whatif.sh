#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_whatif.sh — time of `tbneck whatif --tier mysql --speedup 2` at about
# 1 M and 10 M requests, in the same run (same machine load):
#   baseline  TBNECK_WHATIF_STORED=0: every request read, linked, the trees
#             built, the model solved (what every run cost before schema 6)
#   first     the same, and the links and the model's inputs stored (a
#             database captured without --whatif-inputs)
#   stored    the inputs read from the store (best of three)
#   capture   what --whatif-inputs adds to a capture: `capture --whatif-inputs`
#             of an empty pcap onto the database (a new capture: every
#             request linked and the inputs stored) against the same capture
#             without the flag; then whatif's first run after it (read from
#             the store)
# and on the 60 s capture itself (480 776 requests): capture with and without
# --whatif-inputs (best of three each, interleaved).
# The data: a 60 s capture of linking.conf (480 776 requests, ~1 000 users,
# 60 in flight at the application tier), copied end to end in time (each
# copy shifted past the previous one, connection ids kept apart) until the
# size is reached; the copies' index is dropped (whatif does not use it).
# usage: bench/bench_whatif.sh [BUILD_DIR] [MILLIONS...]   (default: 1 10)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
shift || true
sizes=${*:-1 10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tb=$build/tbneck
"$build/sim/tbneck-sim" "$src/sim/examples/linking.conf" --duration 60s --out "$work/b" -q
"$tb" capture -q -r "$work/b.pcap" --db "$work/b.db"
rm -f "$work"/b.*.csv
python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 262144, 1))" "$work/empty.pcap"
# cap DB FLAGS...: wall user sys maxrss of one capture of the empty pcap
cap() {
    local d=$1
    shift
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" capture -q -r "$work/empty.pcap" --db "$d" "$@"
    cat "$work/time"
}
# The real capture, with and without the flag, interleaved, best of three.
bestof() { # bestof T... : the one with the least CPU
    python3 -c "import sys; print(min(sys.argv[1:], key=lambda t: sum(map(float, t.split()[1:3]))))" "$@"
}
plain=() withf=()
for _ in 1 2 3; do
    rm -f "$work/c.db"
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" capture -q -r "$work/b.pcap" --db "$work/c.db"
    plain+=("$(cat "$work/time")")
    rm -f "$work/c.db"
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$tb" capture -q -r "$work/b.pcap" --db "$work/c.db" --whatif-inputs
    withf+=("$(cat "$work/time")")
done
python3 - "$(sqlite3 "$work/c.db" "SELECT count(*) FROM requests")" "$(bestof "${plain[@]}")" "$(bestof "${withf[@]}")" <<'PY'
import sys
n = int(sys.argv[1])
p = list(map(float, sys.argv[2].split())); w = list(map(float, sys.argv[3].split()))
pc, wc = p[1] + p[2], w[1] + w[2]
print(f"bench_whatif: capture of linking.conf 60 s ({n} requests), best of 3 interleaved:")
print(f"  capture                 {p[0]:7.2f} s wall {pc:7.2f} s CPU  peak {p[3] / 1024:5.0f} MiB")
print(f"  capture --whatif-inputs {w[0]:7.2f} s wall {wc:7.2f} s CPU  peak {w[3] / 1024:5.0f} MiB"
      f"  (+{wc - pc:.2f} s CPU, {wc / pc:.2f}x)")
PY
rm -f "$work/b.pcap" "$work/c.db"
# one TIME: wall user sys maxrss of one run of tbneck whatif on $db
one() {
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
        env "$@" "$tb" whatif --tier mysql --speedup 2 --format json --db "$db" >"$work/out.json"
    cat "$work/time"
}
for m in $sizes; do
    db=$work/m$m.db
    cp "$work/b.db" "$db"
    python3 - "$db" "$m" <<'PY'
import sqlite3, sys
db, millions = sys.argv[1], float(sys.argv[2])
c = sqlite3.connect(db)
c.execute("DROP INDEX IF EXISTS requests_tier_arrival")
n0, lo, hi, mc = c.execute("SELECT count(*), min(arrival_ns), max(departure_ns), max(conn) "
                           "FROM requests").fetchone()
shift = (hi - lo) // 10**9 * 10**9 + 2 * 10**9
copies = max(1, round(millions * 1e6 / n0))
cols = ("capture_id, tier_id, server_id, client_id, client_port, conn, class_id, arrival_ns, "
        "departure_ns, req_bytes, resp_bytes, status, flags")
for k in range(1, copies):
    c.execute(f"INSERT INTO requests ({cols}) SELECT capture_id, tier_id, server_id, client_id, "
              f"client_port, conn + {k} * {mc + 1}, class_id, arrival_ns + {k} * {shift}, "
              f"departure_ns + {k} * {shift}, req_bytes, resp_bytes, status, flags "
              f"FROM requests WHERE rowid <= {n0}")
c.commit()
PY
    n=$(sqlite3 "$db" "SELECT count(*) FROM requests")
    base=$(one TBNECK_WHATIF_STORED=0)
    cp "$work/out.json" "$work/base.json"
    first=$(one TBNECK_WHATIF_STORED=1)
    best=""
    for _ in 1 2 3; do
        t=$(one TBNECK_WHATIF_STORED=1)
        if [ -z "$best" ] || python3 -c "import sys; sys.exit(not float('${t%% *}') < float('${best%% *}'))"; then
            best=$t
        fi
    done
    cmp -s "$work/base.json" "$work/out.json" || { echo "bench_whatif: stored and computed forecasts differ" >&2; diff "$work/base.json" "$work/out.json" >&2; exit 1; }
    bytes=$(sqlite3 "$db" "SELECT bytes FROM models WHERE name = 'whatif'")
    # What the flag adds to a capture at this size: an empty capture onto the
    # database, without then with it (the new capture makes the stored
    # inputs stale: the flag computes them again for every request).
    capn=$(cap "$db")
    capw=$(cap "$db" --whatif-inputs)
    after=$(one TBNECK_WHATIF_STORED=1)
    cmp -s "$work/base.json" "$work/out.json" || { echo "bench_whatif: forecast after capture --whatif-inputs differs" >&2; exit 1; }
    python3 - "$n" "$bytes" "$base" "$first" "$best" "$capn" "$capw" "$after" <<'PY'
import sys
n, nbytes = int(sys.argv[1]), int(sys.argv[2])
def f(label, t):
    wall, user, sys_, rss = map(float, t.split())
    cpu = user + sys_
    print(f"  {label:9s} {wall:7.2f} s wall {cpu:7.2f} s CPU  {n / cpu / 1e6:6.2f} M requests/s "
          f"of CPU  peak {rss / 1024:5.0f} MiB")
    return wall
print(f"bench_whatif: {n} requests ({n / 1e6:.2f} M), stored inputs {nbytes / 2**20:.1f} MiB")
b = f("baseline", sys.argv[3])
f("first", sys.argv[4])
s = f("stored", sys.argv[5])
print(f"  stored vs baseline: {b / s:.0f}x faster (wall); same forecast")
def cpu(t):
    v = list(map(float, t.split()))
    return v[1] + v[2]
print(f"  capture of an empty pcap onto it: {cpu(sys.argv[6]):.2f} s CPU; with --whatif-inputs "
      f"{cpu(sys.argv[7]):.2f} s CPU (+{cpu(sys.argv[7]) - cpu(sys.argv[6]):.2f} s: "
      f"{(cpu(sys.argv[7]) - cpu(sys.argv[6])) / cpu(sys.argv[3]):.2f}x the baseline run)")
f("after", sys.argv[8])
print(f"  whatif after capture --whatif-inputs vs baseline: "
      f"{cpu(sys.argv[3]) / cpu(sys.argv[8]):.0f}x less CPU; same forecast")
PY
    rm -f "$db"
done
