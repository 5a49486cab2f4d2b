#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_sim.sh — how fast tbneck-sim writes packets: runs sim/examples/bench.conf
# (about ten million packets) and prints packets/s. Usage:
#   bench/bench_sim.sh [BUILD_DIR] [extra tbneck-sim options, e.g. --duration 5s]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
if [ $# -gt 0 ]; then shift; fi
sim=${TBNECK_SIM:-$build/sim/tbneck-sim}
if [ ! -x "$sim" ]; then
    echo "bench_sim: $sim not built (meson setup $build && ninja -C $build)" >&2
    exit 1
fi
# Prefer memory-backed storage so that the disk does not set the pace.
base=/tmp
[ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR==2{print $4}')" -gt 4000000 ] && base=/dev/shm
work=$(mktemp -d "$base/bench_sim.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 - "$sim" "$here/sim/examples/bench.conf" "$work/bench" "$@" <<'PY'
import os, resource, subprocess, sys, time
sim, conf, prefix, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
t0 = time.monotonic()
r = subprocess.run([sim, conf, "--out", prefix] + extra, stderr=subprocess.PIPE, text=True)
wall = time.monotonic() - t0
sys.stderr.write(r.stderr)
if r.returncode:
    sys.exit(r.returncode)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
packets = int(r.stderr.split("pcap: ")[1].split(" packets")[0])
size = os.path.getsize(prefix + ".pcap")
print(f"bench_sim: {packets} packets, {size / 1e6:.0f} MB pcap; wall {wall:.2f} s = "
      f"{packets / wall:,.0f} packets/s; cpu {cpu:.2f} s = {packets / cpu:,.0f} packets/s "
      f"(the wall figure is the one that counts on an idle machine)")
PY
