#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_fanout.sh — live capture on several cores (`capture -i IF --workers N`)
# at the highest rate tcpreplay reaches here. In a network namespace of its
# own with a veth pair, a simulated capture (sim/examples/gc.conf) is
# replayed with `tcpreplay --topspeed --preload-pcap` (looped up to about
# TB_BENCH_PACKETS packets, default 2 000 000) once for each reader, one
# reader at a time:
#   none                                no reader: the sender's own ceiling
#   tcpdump -w /dev/null                the baseline: libpcap's bare read
#   tbneck --workers 1 --no-store       one engine on the loop's thread
#   tbneck --workers 2 --no-store       two fan-out workers and the merge
#   tbneck --workers 1 / 2 --db FILE    the same, storing (the writer thread)
# Prints per reader: the rate tcpreplay achieved, packets captured, kernel
# drops (pcap_stats), the reader's CPU seconds (utime + stime of all its
# threads, read from /proc once it listens and again before it is stopped:
# opening, which zeroes the rings, is left out), packets per CPU-second (the
# rate one core sustains) and ns of CPU per packet; for the workers, each
# worker thread's packets and CPU. Needs root. TB_BENCH_READERS="tcpdump w1
# w2 w1db w2db" chooses the readers (default: none first, then all five);
# TB_BENCH_SENDER=blast sends with bench/blast.c (sendmmsg, 256 frames a
# call) instead of tcpreplay.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
[ "$(id -u)" -eq 0 ] || { echo "bench_fanout: needs root" >&2; exit 1; }
for p in tcpreplay tcpdump; do
  command -v "$p" >/dev/null || { echo "bench_fanout: $p missing" >&2; exit 1; }
done

want=${TB_BENCH_PACKETS:-2000000}
readers=(${TB_BENCH_READERS:-none tcpdump w1 w2 w1db w2db})
sender=${TB_BENCH_SENDER:-tcpreplay}
ns="fobench$$"
work=$(mktemp -d "$TB_BUILDDIR/bench-fanout.XXXXXX")
rpid=""
cleanup() {
  [ -n "$rpid" ] && kill -KILL "$rpid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns" || exit 1
ip -n "$ns" link add foba type veth peer name fobb || exit 1
for l in lo foba fobb; do ip -n "$ns" link set "$l" up; done
ip -n "$ns" link set foba mtu 65535
ip -n "$ns" link set fobb mtu 65535

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/gc.conf" --out "$work/sim" -q || exit 1
total=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)
loops=$(( (want + total - 1) / total ))
tck=$(getconf CLK_TCK)
echo "bench_fanout: sender $sender, $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$total packets x $loops loops = $(( total * loops )) packets per run"
printf '%-22s %10s %10s %8s %8s %12s %9s\n' reader "sent/s" captured k-drops "CPU s" \
  "pkt/CPU-s" "ns/pkt"

cpu_of() { # utime + stime of a process and all its threads, in seconds
  awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0
}

for r in "${readers[@]}"; do
  case $r in
  none) cmd=(sleep 600) ;;
  tcpdump) cmd=(tcpdump -i fobb -s 262144 -B 65536 -w /dev/null) ;;
  w1) cmd=("$TBNECK" capture -i fobb --no-store) ;;
  w2) cmd=("$TBNECK" capture -i fobb --no-store --workers 2) ;;
  w1db) cmd=("$TBNECK" capture -i fobb --db "$work/w1.db") ;;
  w2db) cmd=("$TBNECK" capture -i fobb --db "$work/w2.db" --workers 2) ;;
  *) echo "bench_fanout: unknown reader $r" >&2; exit 1 ;;
  esac
  rm -f "$work"/*.db*
  ip netns exec "$ns" "${cmd[@]}" >"$work/out" 2>"$work/err" &
  rpid=$!
  for _ in $(seq 1 100); do
    [ "$r" = none ] || grep -qs 'capturing on\|listening on' "$work/err" && break
    sleep 0.1
  done
  sleep 0.3
  # Opening costs CPU of its own (the kernel zeroes each socket's 64 MiB
  # ring): what is counted is the CPU used from here to the end of the
  # replay.
  cpu0=$(cpu_of "$rpid")
  if [ "$sender" = blast ]; then
    ip netns exec "$ns" timeout 300 "$TB_BUILDDIR/bench/blast" foba "$work/sim.pcap" "$loops" \
      >"$work/replay" 2>&1
  else
    ip netns exec "$ns" timeout 300 tcpreplay -i foba --topspeed --preload-pcap --loop "$loops" \
      "$work/sim.pcap" >"$work/replay" 2>&1
  fi
  sleep 1
  cpu=$(awk -v a="$cpu0" -v b="$(cpu_of "$rpid")" 'BEGIN {print b - a}')
  # (a background job ignores SIGINT unless it sets its own handler, as the
  # readers do; the stand-in for no reader gets SIGTERM)
  if [ "$r" = none ]; then kill "$rpid"; else kill -INT "$rpid"; fi
  wait "$rpid"
  rpid=""
  sent=$(sed -n 's/.*Rated: [0-9.]* Bps, [0-9.]* Mbps, \([0-9.]*\) pps.*/\1/p; s/^blast: .*, \([0-9]*\) pps$/\1/p' \
    "$work/replay" | head -1)
  if [ "$r" = none ]; then
    got=0 drops=-
  elif [ "$r" = tcpdump ]; then
    got=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$work/err")
    drops=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$work/err")
  else
    sum=$(grep -h '^capture fobb:' "$work/out" "$work/err" | head -1)
    got=$(sed -n 's/.* \([0-9]*\) packets (.*/\1/p' <<<"$sum")
    drops=$(sed -n 's/.* \([0-9]*\) kernel drops, .*/\1/p' <<<"$sum")
  fi
  awk -v r="$r" -v s="${sent:-0}" -v g="${got:-0}" -v d="${drops:-?}" -v c="$cpu" 'BEGIN {
    printf "%-22s %10.0f %10d %8s %8.2f %12.0f %9.0f\n", r, s, g, d, c,
      (c > 0 ? g / c : 0), (g > 0 ? c * 1e9 / g : 0) }'
  # The workers' threads, and what is left for the loop's thread (merge,
  # streaming analysis, the writer's thread with --db).
  grep -h '^  worker' "$work/out" "$work/err" | awk -v c="$cpu" '{ w += $11 } END {
    if (NR) printf "  %-20s %10s %10s %8s %8.2f\n", "other threads", "", "", "", c - w }'
  grep -h '^  worker' "$work/out" "$work/err" | awk '{
    printf "  %-20s %10s %10s %8s %8s %12.0f %9.0f\n", $1 " " $2, "", $3, $7, $11,
      ($11 > 0 ? $3 / $11 : 0), ($3 > 0 ? $11 * 1e9 / $3 : 0) }'
done
