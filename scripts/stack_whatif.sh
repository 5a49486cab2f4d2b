#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stack_whatif.sh — `tbneck whatif` on the real nginx → Tomcat → MariaDB stack
# (scripts/stack/run.sh, tiers discovered): Tomcat's JDBC pool 2 → 16 forecast
# from a run with a pool of 2, against a measured run with a pool of 16 (same
# load: wrk, 16 users, think 45 ms), front tier mean and p95; and on both runs
# every stored link (table links) checked: the query lies inside its parent's
# interval and comes from its parent's host (the parent's server address or a
# host of its tier). Too long for CI (two stack runs, ~2-5 min); figures in
# docs/whatif.md. Needs root.
# usage: sudo bash scripts/stack_whatif.sh [BUILD_DIR] [SECONDS] [RUNS]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
secs=${2:-20}
runs=${3:-1}
tb=$build/tbneck
[ "$(id -u)" -eq 0 ] || { echo "stack_whatif: needs root (namespaces, capture)" >&2; exit 2; }
export STACK_BRIDGE=${STACK_BRIDGE:-pfbr0} STACK_NET=${STACK_NET:-10.78.0} STACK_PRIORITY=${STACK_PRIORITY:-1}
out=${STACK_WHATIF_OUT:-$(mktemp -d /tmp/stack-whatif.XXXXXX)}
mkdir -p "$out"
bash "$src/scripts/deps.sh" --stack >"$out/deps.log" 2>&1 ||
    { tail -20 "$out/deps.log" >&2; echo "stack_whatif: scripts/deps.sh --stack failed" >&2; exit 1; }
fail=0
for r in $(seq 1 "$runs"); do
    for pool in 2 16; do
        d=$out/r$r-pool$pool
        STACK_JDBC_POOL=$pool bash "$src/scripts/stack/run.sh" --out "$d" --discover --cause pool \
            --duration "$secs" --tbneck "$tb" --no-deps --quick >"$d.log" 2>&1 ||
            { tail -30 "$d.log" >&2; echo "stack_whatif: run.sh (pool $pool) failed" >&2; exit 1; }
    done
    app=$(awk '$1 == "app" {print $2}' "$out/r$r-pool2/tier-names.txt")
    "$tb" whatif --tier "$app" --pool 16 --db "$out/r$r-pool2/stack.db" >"$out/r$r-forecast.txt"
    "$tb" whatif --tier "$app" --pool 16 --format json --db "$out/r$r-pool2/stack.db" >"$out/r$r-forecast.json"
    # The pool-16 run's measured baseline (a no-op change: speed-up 1).
    "$tb" whatif --tier "$app" --speedup 1 --format json --db "$out/r$r-pool16/stack.db" >"$out/r$r-measured16.json"
    "$tb" whatif --tier "$app" --speedup 1 --db "$out/r$r-pool16/stack.db" >/dev/null # links of the pool-16 run
    cat "$out/r$r-forecast.txt"
    python3 - "$out" "$r" <<'PY' || fail=1
import json, sqlite3, sys
out, r = sys.argv[1], sys.argv[2]
fc = json.load(open(f"{out}/r{r}-forecast.json"))
m16 = json.load(open(f"{out}/r{r}-measured16.json"))["baseline"]
b, f = fc["baseline"], fc["forecast"]
err = {k: 100 * (f[k] - m16[k]) / m16[k] for k in ("rt_mean_ns", "rt_p95_ns")}
print(f"run {r}: pool 2 measured mean {b['rt_mean_ns'] / 1e6:.2f} ms p95 {b['rt_p95_ns'] / 1e6:.2f} ms; "
      f"forecast for 16 mean {f['rt_mean_ns'] / 1e6:.2f} p95 {f['rt_p95_ns'] / 1e6:.2f}; "
      f"pool 16 measured mean {m16['rt_mean_ns'] / 1e6:.2f} p95 {m16['rt_p95_ns'] / 1e6:.2f}; "
      f"error mean {err['rt_mean_ns']:+.1f}% p95 {err['rt_p95_ns']:+.1f}% ({fc['model']} model)")
bad_all = 0
for pool in (2, 16):
    c = sqlite3.connect(f"{out}/r{r}-pool{pool}/stack.db")
    # A link's child inside its parent, from the parent's host: the parent's
    # server address, or a host listed for the parent's tier.
    rows = c.execute("""SELECT ch.arrival_ns, ch.departure_ns, pa.arrival_ns, pa.departure_ns,
                               e.addr, s.addr, pa.tier_id
                        FROM links l JOIN requests ch ON ch.rowid = l.request
                        JOIN requests pa ON pa.rowid = l.parent
                        JOIN servers s ON s.id = pa.server_id
                        JOIN endpoints e ON e.id = ch.client_id""").fetchall()
    hosts = {}
    for t, a in c.execute("SELECT tier_id, addr FROM hosts"):
        hosts.setdefault(t, set()).add(a)
    outside = sum(1 for ca, cd, pa, pd, *_ in rows if ca < pa or cd > pd)
    def ip(a):  # 10.0.0.3:8080 or [2001:db8::1]:8080
        return a[1:a.index("]")] if a.startswith("[") else a.rsplit(":", 1)[0]
    elsewhere = sum(1 for *_, ea, sa, t in rows if ea != ip(sa) and ea not in hosts.get(t, ()))
    total, linked = c.execute("SELECT count(*), count(parent) FROM links").fetchone()
    amb = c.execute("SELECT count(*) FROM links WHERE kind = 2").fetchone()[0]
    print(f"run {r} pool {pool}: {linked} of {total} downstream requests linked "
          f"({100 * linked / max(total, 1):.1f}%, {100 * amb / max(linked, 1):.2f}% ambiguous); "
          f"{outside} outside their parent's interval, {elsewhere} not from its host")
    bad_all += outside + elsewhere + (linked == 0)
sys.exit(1 if bad_all else 0)
PY
done
echo "stack_whatif: outputs in $out"
exit $fail
