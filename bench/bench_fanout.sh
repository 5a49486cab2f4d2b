#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_fanout.sh — live capture on several cores (`capture -i IF --workers N`)
# at the highest rate reachable here. In a network namespace of its own with
# a veth pair, a simulated capture (sim/examples/gc.conf: 543 k packets of
# 760 bytes on average) is sent about TB_BENCH_PACKETS packets a run
# (default 2 000 000, the file looped) once for each reader, one reader at a
# time:
#   none                                no reader: the sender's own ceiling
#   tcpdump -w /dev/null                the baseline: libpcap's bare read
#   tbneck --workers 1 --no-store       one engine on the loop's thread
#   tbneck --workers 2 --no-store       two fan-out workers and the merge
#   tbneck --workers 1 / 2 --db FILE    the same, storing (the writer thread)
# The sender is `tcpreplay --topspeed --preload-pcap` (one syscall a packet)
# or, with TB_BENCH_SENDER=blast, bench/blast.c (the file preloaded,
# sendmmsg 256 frames a call, PACKET_QDISC_BYPASS). With blast,
# TB_BENCH_RATES="100000 300000 max" sends at each of these rates in turn
# (blast --pps; `max` = as fast as it can; a paced run sends
# TB_BENCH_SECONDS, default 4, of traffic, at most TB_BENCH_PACKETS), from
# TB_BENCH_THREADS sending threads (default 1; blast --threads).
# Prints per reader and rate: the rate asked and the rate the sender
# achieved, packets captured, kernel drops (pcap_stats), lost (sent -
# captured: every packet the capture did not process, wherever it went),
# the sender's CPU per packet (blast: its user + system time, which on a
# veth includes the receiving kernel's work, see blast.c), the reader's CPU
# seconds (utime + stime of all its threads, read from /proc once it listens
# and again before it is stopped: opening, which zeroes the rings, is left
# out), packets per CPU-second (the rate one core sustains), ns of CPU per
# packet, and how busy the host's CPUs were over the send (/proc/stat, all
# processes: other users of the machine included); for the workers, each
# worker thread's packets and CPU; for a full-speed run with blast, the
# `ceiling` two whole cores would carry (2 s / (sender + reader CPU a
# packet)). 1 M pkt/s into --workers 2 with 0 drops took TB_BENCH_THREADS=2
# on a quiet host (docs/capture.md). Needs root. TB_BENCH_READERS="tcpdump
# w1 w2 w1db w2db" chooses the readers (default: none first, then all five).
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
[ "$(id -u)" -eq 0 ] || { echo "bench_fanout: needs root" >&2; exit 1; }
for p in tcpreplay tcpdump; do
  command -v "$p" >/dev/null || { echo "bench_fanout: $p missing" >&2; exit 1; }
done

want=${TB_BENCH_PACKETS:-2000000}
readers=(${TB_BENCH_READERS:-none tcpdump w1 w2 w1db w2db})
sender=${TB_BENCH_SENDER:-tcpreplay}
rates=(max)
if [ "$sender" = blast ]; then
  read -ra rates <<<"${TB_BENCH_RATES:-max}"
  secs=${TB_BENCH_SECONDS:-4}
  for r in "${rates[@]}"; do
    [[ "$r" =~ ^([1-9][0-9]*|max)$ ]] || { echo "bench_fanout: bad rate $r" >&2; exit 1; }
  done
elif [ -n "${TB_BENCH_RATES:-}" ]; then
  echo "bench_fanout: TB_BENCH_RATES needs TB_BENCH_SENDER=blast" >&2
  exit 1
fi
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
# IPv6 off, so that the reader's end sends nothing of its own (its router
# solicitations would count as captured packets the sender did not send).
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$ns" link add foba type veth peer name fobb || exit 1
for l in lo foba fobb; do ip -n "$ns" link set "$l" up; done
ip -n "$ns" link set foba mtu 65535
ip -n "$ns" link set fobb mtu 65535

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/gc.conf" --out "$work/sim" -q || exit 1
total=$(tcpdump -nr "$work/sim.pcap" 2>/dev/null | wc -l)
loops=$(( (want + total - 1) / total ))
tck=$(getconf CLK_TCK)
echo "bench_fanout: sender $sender, $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$total packets a loop, $(( total * loops )) packets a run at max"
printf '%-12s %8s %8s %9s %8s %8s %8s %7s %7s %10s %7s %6s\n' reader asked "sent/s" captured \
  k-drops lost "snd ns" "CPU s" "CPU/s" "pkt/CPU-s" "ns/pkt" "host%"

cpu_of() { # utime + stime of a process and all its threads, in seconds
  awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0
}
host_ticks() { # busy and total jiffies of all CPUs (/proc/stat)
  awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}

run() { # READER RATE: one reader listening while the sender sends at RATE
  local r=$1 rate=$2 cmd
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
  local cpu0 h0 h1 cpu t0 t1
  cpu0=$(cpu_of "$rpid")
  h0=$(host_ticks)
  t0=$(date +%s.%N)
  if [ "$sender" = blast ]; then
    local count=$(( total * loops )) pace=()
    if [ "$rate" != max ]; then
      count=$(( rate * secs < count ? rate * secs : count ))
      pace=(--pps "$rate")
    fi
    ip netns exec "$ns" timeout 300 "$TB_BUILDDIR/bench/blast" --count "$count" "${pace[@]}" \
      --threads "${TB_BENCH_THREADS:-1}" foba "$work/sim.pcap" >"$work/replay" 2>&1
  else
    ip netns exec "$ns" timeout 300 tcpreplay -i foba --topspeed --preload-pcap --loop "$loops" \
      "$work/sim.pcap" >"$work/replay" 2>&1
  fi
  h1=$(host_ticks)
  t1=$(date +%s.%N)
  sleep 1
  cpu=$(awk -v a="$cpu0" -v b="$(cpu_of "$rpid")" 'BEGIN {print b - a}')
  # (a background job ignores SIGINT unless it sets its own handler, as the
  # readers do; the stand-in for no reader gets SIGTERM)
  if [ "$r" = none ]; then kill "$rpid"; else kill -INT "$rpid"; fi
  wait "$rpid"
  rpid=""
  local sent npk scpu got drops
  sent=$(sed -n 's/.*Rated: [0-9.]* Bps, [0-9.]* Mbps, \([0-9.]*\) pps.*/\1/p; s/^blast: .*, \([0-9]*\) pps$/\1/p' \
    "$work/replay" | head -1)
  npk=$(sed -n 's/.*Actual: \([0-9]*\) packets.*/\1/p; s/^blast: \([0-9]*\) packets in.*/\1/p' \
    "$work/replay" | head -1)
  # blast's own CPU (user + system); tcpreplay does not say.
  scpu=$(sed -n 's/^blast: CPU user \([0-9.]*\) s, system \([0-9.]*\) s.*/\1 \2/p' "$work/replay" |
    awk '{print $1 + $2}')
  if [ "$r" = none ]; then
    got=0 drops=-
  elif [ "$r" = tcpdump ]; then
    got=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$work/err")
    drops=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$work/err")
  else
    local sum
    sum=$(grep -h '^capture fobb:' "$work/out" "$work/err" | head -1)
    got=$(sed -n 's/.* \([0-9]*\) packets (.*/\1/p' <<<"$sum")
    drops=$(sed -n 's/.* \([0-9]*\) kernel drops, .*/\1/p' <<<"$sum")
  fi
  awk -v r="$r" -v a="$rate" -v s="${sent:-0}" -v n="${npk:-0}" -v g="${got:-0}" -v d="${drops:-?}" \
    -v sc="${scpu:-}" -v c="$cpu" -v h0="$h0" -v h1="$h1" -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" '
    BEGIN { split(h0, x, " "); split(h1, y, " ")
      host = (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0
      lost = (r == "none") ? "-" : sprintf("%d", n - g)
      snd = (sc != "" && n > 0) ? sprintf("%.0f", sc * 1e9 / n) : "-"
      printf "%-12s %8s %8.0f %9d %8s %8s %8s %7.2f %7.2f %10.0f %7.0f %6.0f\n", r, a, s, g, d, lost,
        snd, c, (w > 0 ? c / w : 0), (c > 0 ? g / c : 0), (g > 0 ? c * 1e9 / g : 0), host }'
  # At full speed, what two cores dedicated to this would carry: every
  # packet costs the sender's CPU (with the receiving kernel's on a veth)
  # plus the reader's.
  if [ "$rate" = max ] && [ "$r" != none ] && [ -n "$scpu" ] && [ "${got:-0}" -gt 0 ]; then
    awk -v sc="$scpu" -v n="$npk" -v c="$cpu" -v g="$got" 'BEGIN { s = sc * 1e9 / n; d = c * 1e9 / g
      printf "  ceiling: sender %.0f + reader %.0f ns a packet: 2 whole cores carry %.0f pkt/s\n",
        s, d, 2e9 / (s + d) }'
  fi
  # The workers' threads, and what is left for the loop's thread (merge,
  # streaming analysis, the writer's thread with --db).
  grep -h '^  worker' "$work/out" "$work/err" | awk -v c="$cpu" '{ w += $11 } END {
    if (NR) printf "  %-10s %8s %8s %9s %8s %8s %8s %7.2f\n", "other thr", "", "", "", "", "", "", c - w }'
  grep -h '^  worker' "$work/out" "$work/err" | awk '{
    printf "  %-10s %8s %8s %9s %8s %8s %8s %7.2f %7s %10.0f %7.0f\n", $1 " " $2, "", "", $3, $7, "",
      "", $11, "", ($11 > 0 ? $3 / $11 : 0), ($3 > 0 ? $11 * 1e9 / $3 : 0) }'
}

for r in "${readers[@]}"; do
  for rate in "${rates[@]}"; do
    run "$r" "$rate"
  done
done
