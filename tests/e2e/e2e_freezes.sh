#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_freezes.sh — the freeze rule that needs no knee (correlate.h,
# "Stalled"), over simulator seeds, against the simulator's truth
# (tests/e2e/lib/freeze_seeds.py; PREFIX.freezes.csv is the oracle):
#  - quick.conf (lightly loaded application servers: no knee, N*
#    undetermined), report_gc.conf and gc.conf (busy ones), 5 seeds each:
#    every simulated freeze of 100 ms or more is overlapped by a freeze
#    episode of the frozen server, and every freeze episode of a server lies
#    on one of its freezes (none on the healthy web, database and other
#    application servers, which wait on the frozen one);
#  - cause-app-cpu.conf (CPU-bound application servers, no pause), 3 seeds:
#    no freeze episode;
#  - cause-none.conf and bench/nstar/light.conf (no bottleneck, light load),
#    5 seeds each: no episode of any kind on any tier or server.
# Issue 12's knee test had left quick.conf's pauses with no episode at all.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
check="python3 $TB_SRCDIR/tests/e2e/lib/freeze_seeds.py"
ex="$TB_SRCDIR/sim/examples"
failed=0
$check freezes "$ex/quick.conf" 1 2 3 4 5 || failed=1
$check freezes "$TB_SRCDIR/tests/e2e/lib/report_gc.conf" 1 2 3 4 5 || failed=1
# gc.conf is report_gc.conf for 30 s: other seeds, the full length.
$check freezes "$ex/gc.conf" 11 12 13 14 15 || failed=1
# Saturated application servers with no pause: no freeze episode (a
# one-window run once passed for one, seed 1).
$check freezes "$ex/cause-app-cpu.conf" 1 2 3 || failed=1
$check quiet "$ex/cause-none.conf" 1 2 3 4 5 || failed=1
$check quiet "$TB_SRCDIR/bench/nstar/light.conf" 1 2 3 4 5 || failed=1
exit $failed
