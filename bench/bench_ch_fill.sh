#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_ch_fill.sh — what completing a ClickHouse batch held in part costs
# (store/ch.c fill(): stage the batch in a Memory table, count it against the
# sensor's stored rows, insert the missing rows from the stage, drop the
# stage), against the plain INSERT of the same rows it replaces on a retry.
# One private clickhouse-server (tests/e2e/lib/clickhouse.sh) on loopback;
# quick.conf's connections (118 rows) captured into it, then
# TB_BENCH_PAIRS (default 20) interleaved pairs of the six requests a
# connections completion sends and of one plain insert. Prints best and median
# of each, and their ratio.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
# shellcheck source=../tests/e2e/lib/clickhouse.sh
source "$TB_SRCDIR/tests/e2e/lib/clickhouse.sh"
ch_test_setup
ch_start s || exit 1
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q
"$TBNECK" capture -q -r "$work/sim.pcap" --store "clickhouse://127.0.0.1:${ch_http[s]}/tf" --sensor x
python3 - "${ch_http[s]}" "${TB_BENCH_PAIRS:-20}" <<'PY'
import sys, time, urllib.parse, urllib.request
port, pairs = sys.argv[1], int(sys.argv[2])
def q(sql, data=None):
    url = "http://127.0.0.1:%s/" % port
    if data is not None:
        url += "?query=" + urllib.parse.quote(sql)
    else:
        data = sql.encode()
    return urllib.request.urlopen(urllib.request.Request(url, data=data)).read()
body = q("SELECT * FROM tf.connections FORMAT RowBinary")
rows = int(q("SELECT count() FROM tf.connections"))
q("CREATE TABLE IF NOT EXISTS tf.plain AS tf.connections")
stored = "conn IN (SELECT conn FROM tf.connections WHERE sensor = 'x' AND conn >= 1 AND conn <= %d)" % rows
def fill():
    q("DROP TABLE IF EXISTS tf.`stage`")
    q("CREATE TABLE tf.`stage` AS tf.connections ENGINE = Memory")
    q("INSERT INTO tf.`stage` FORMAT RowBinary", body)
    q("SELECT count() FROM tf.`stage` WHERE %s FORMAT RowBinary" % stored)
    q("INSERT INTO tf.connections SELECT * FROM tf.`stage` WHERE NOT (%s)" % stored, b"")
    q("DROP TABLE IF EXISTS tf.`stage`")
def plain():
    q("INSERT INTO tf.plain FORMAT RowBinary", body)
t = {fill: [], plain: []}
for _ in range(pairs):
    for f in (fill, plain):
        t0 = time.perf_counter()
        f()
        t[f].append(time.perf_counter() - t0)
for f in t:
    t[f].sort()
bf, mf = t[fill][0] * 1e3, t[fill][pairs // 2] * 1e3
bp, mp = t[plain][0] * 1e3, t[plain][pairs // 2] * 1e3
print("connections batch: %d rows, %d bytes; %d interleaved pairs" % (rows, len(body), pairs))
print("  completion (stage, count, insert the missing, drop): best %.1f ms, median %.1f ms" % (bf, mf))
print("  plain insert (the resend it replaces):              best %.1f ms, median %.1f ms" % (bp, mp))
print("  ratio: best %.1fx, median %.1fx" % (bf / bp, mf / mp))
assert int(q("SELECT count() FROM tf.connections")) == rows, "a completion stored a row twice"
PY
