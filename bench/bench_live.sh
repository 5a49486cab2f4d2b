#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_live.sh — live capture capacity on this machine. In a private network
# namespace with a veth pair, a simulated capture (sim/examples/gc.conf) is
# replayed with tcpreplay at fixed rates stepping up over a bounded list; for
# each rate `tbneck capture -i` (store and streaming analysis on) runs until
# the replay ends, then stops on SIGINT and prints its summary. Prints, per
# rate, the rate tcpreplay achieved, the kernel and interface drops, and the
# CPU tbneck used (getrusage, all threads) expressed per 100 k packets per
# second; then the highest rate with zero kernel drops.
# The last step, "max", replays with --topspeed: on a small machine tcpreplay
# itself (one core, one packet per syscall) saturates before tbneck drops, so
# the figure printed is the highest rate *achieved* with zero drops, marked
# sender-limited when tcpreplay fell short of its target.
# Needs root. Environment: TB_BENCH_RATES="10000 20000 ... max" overrides the
# list, TB_BENCH_SECONDS (default 3) the replay length per step.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
[ "$(id -u)" -eq 0 ] || { echo "bench_live: needs root" >&2; exit 1; }
command -v tcpreplay >/dev/null || { echo "bench_live: tcpreplay missing" >&2; exit 1; }

rates=(${TB_BENCH_RATES:-10000 25000 50000 100000 150000 200000 300000 max})
secs=${TB_BENCH_SECONDS:-3}
ns="tbbench$$"
work=$(mktemp -d "$TB_BUILDDIR/bench-live.XXXXXX")
cap_pid=""
cleanup() {
  [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns" || exit 1
ip -n "$ns" link add tbva type veth peer name tbvb || exit 1
for l in lo tbva tbvb; do ip -n "$ns" link set "$l" up; done
ip -n "$ns" link set tbva mtu 65535
ip -n "$ns" link set tbvb mtu 65535

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/gc.conf" --out "$work/sim" -q || exit 1
total=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)
echo "bench_live: $(nproc) CPUs, $(uname -r); $total packets in the simulated capture"
printf '%10s %10s %10s %10s %10s %10s %14s\n' "target/s" "sent/s" "captured" "k-drops" \
  "if-drops" "CPU s" "CPU/100kpps"

best=0
for rate in "${rates[@]}"; do
  if [ "$rate" = max ]; then
    limit=$total
    speed=(--topspeed)
  else
    limit=$(( rate * secs ))
    speed=(--pps "$rate")
  fi
  [ "$limit" -gt "$total" ] && limit=$total
  rm -f "$work"/live.db*
  ip netns exec "$ns" "$TBNECK" capture -i tbvb --db "$work/live.db" >"$work/out" 2>"$work/err" &
  cap_pid=$!
  for _ in $(seq 1 100); do grep -qs 'capturing on' "$work/err" && break; sleep 0.1; done
  ip netns exec "$ns" timeout $(( secs * 4 + 30 )) tcpreplay -i tbva "${speed[@]}" --limit "$limit" \
    "$work/sim.pcap" >"$work/replay" 2>&1
  sleep 1.5 # the last ring block reaches tbneck within its 100 ms timeout
  kill -INT "$cap_pid"
  for _ in $(seq 1 600); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
  wait "$cap_pid"
  cap_pid=""
  sum=$(grep '^capture tbvb:' "$work/out")
  sent_pps=$(sed -n 's/.*Rated: .* Mbps, \([0-9.]*\) pps.*/\1/p' "$work/replay" | head -1)
  elapsed=$(sed -n 's/.*Actual: .* sent in \([0-9.]*\) seconds.*/\1/p' "$work/replay" | head -1)
  pk=$(sed -n 's/.* \([0-9]*\) packets (.*/\1/p' <<<"$sum")
  kd=$(sed -n 's/.* \([0-9]*\) kernel drops.*/\1/p' <<<"$sum")
  idr=$(sed -n 's/.* \([0-9]*\) interface drops.*/\1/p' <<<"$sum")
  cpu=$(sed -n 's/.*CPU \([0-9.]*\) s.*/\1/p' <<<"$sum")
  if [ -z "$sum" ] || [ -z "$sent_pps" ]; then
    echo "bench_live: step $rate/s failed:"; cat "$work/err" "$work/replay"; exit 1
  fi
  # CPU seconds per second of replay, scaled to 100 k packets per second.
  per100k=$(awk -v c="$cpu" -v e="$elapsed" -v p="$sent_pps" \
    'BEGIN { if (e > 0 && p > 0) printf "%.3f", (c / e) / (p / 100000); else print "-" }')
  printf '%10s %10.0f %10s %10s %10s %10s %14s\n' "$rate" "$sent_pps" "$pk" "$kd" "$idr" "$cpu" \
    "$per100k"
  if [ "$kd" = 0 ] && [ "$idr" = 0 ]; then
    if awk -v a="$sent_pps" -v b="${best_sent:-0}" 'BEGIN { exit !(a > b) }'; then
      best=$rate
      best_sent=$sent_pps
    fi
    short=$(awk -v r="$rate" -v s="$sent_pps" 'BEGIN { print (r != "max" && s < 0.9 * r) }')
    [ "$short" = 1 ] && sender_limited=1
  else
    break # drops at this rate: higher ones will not do better
  fi
done
printf 'bench_live: highest rate with zero kernel drops: %.0f packets/s achieved (step %s)\n' \
  "${best_sent:-0}" "$best"
if [ -n "${sender_limited:-}" ] || [ "$best" = max ]; then
  echo "bench_live: sender-limited: tcpreplay could not go faster on this machine, tbneck"
  echo "            never dropped; the real limit of tbneck is higher than this figure"
fi
echo "bench_live: CPU/100kpps = CPU seconds per second of capture, per 100 000 packets/s"
echo "            (includes the store writer thread and the streaming analysis; setup"
echo "            and the final analysis are in the CPU total, so low rates read high)"
