#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_whatif.sh — time of `tbneck whatif` (load, link, trees, model) on a
# capture of linking.conf (DURATION, default 60 s: about 480 000 requests),
# wall and CPU, and requests per second.
# usage: bench/bench_whatif.sh [BUILD_DIR] [DURATION]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
dur=${2:-60s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/sim/tbneck-sim" "$src/sim/examples/linking.conf" --duration "$dur" --out "$work/b" -q
"$build/tbneck" capture -q -r "$work/b.pcap" --db "$work/b.db"
rm -f "$work/b.pcap"
n=$(($(wc -l <"$work/b.requests.csv") - 1))
/usr/bin/time -f '%e %U %S %M' -o "$work/time" \
    "$build/tbneck" whatif --tier mysql --speedup 2 --db "$work/b.db" >/dev/null
read -r wall user sys rss <"$work/time"
python3 - "$n" "$wall" "$user" "$sys" "$rss" <<'PY'
import sys
n, wall, user, sys_, rss = int(sys.argv[1]), *map(float, sys.argv[2:6])
cpu = user + sys_
print(f"bench_whatif: {n} requests in {wall:.2f} s wall, {cpu:.2f} s CPU "
      f"({n / cpu / 1e6:.2f} M requests/s of CPU; 10 M requests: ~{1e7 / n * cpu:.0f} s), "
      f"peak {rss / 1024:.0f} MiB")
PY
