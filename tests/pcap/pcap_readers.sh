#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pcap_readers.sh — the fast classic-pcap reader (capture/pcapfile.c; mapped,
# and on its pread block path with TBNECK_PCAP_READER=pread) and libpcap's own
# reader (TBNECK_PCAP_READER=libpcap) give the same capture:
# the same summary, counters, exit status, last error line and request
# records, on files in both byte orders and both timestamp resolutions,
# records longer than the header's snapshot length, truncated and damaged
# files, filters, merged files and standard input.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
mk="python3 $TB_SRCDIR/tests/pcap/mkpcap.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0
cases=0

# run TAG ARGS...: one capture into TAG.db; its stderr (without the memory
# figure, which differs by the reader's buffers), exit status and records.
run() {
    local tag=$1 rc=0; shift
    rm -f "$tag.db"*
    "$TBNECK" capture -v --db "$tag.db" "$@" >"$tag.out" 2>"$tag.err" || rc=$?
    sed -i 's/peak memory [0-9]* KiB//; s/stored in [^ ]*//' "$tag.err"
    echo "exit $rc" >>"$tag.err"
    if [ -e "$tag.db" ]; then
        "$TBNECK" export requests --db "$tag.db" >"$tag.csv" 2>&1 || true
    else
        echo "no database" >"$tag.csv"
    fi
}

# same NAME WANT_EXIT ARGS...: both readers, compared; the exit status as expected.
same() {
    local name=$1 want=$2; shift 2
    cases=$((cases + 1))
    run fast "$@"
    TBNECK_PCAP_READER=libpcap run slow "$@"
    TBNECK_PCAP_READER=pread run blocks "$@"
    if ! diff -u slow.err fast.err >d.err || ! diff -u slow.csv fast.csv >d.csv ||
        ! diff -u slow.err blocks.err >>d.err || ! diff -u slow.csv blocks.csv >>d.csv; then
        echo "FAIL: $name: the readers differ"
        sed 's/^/  | /' d.err d.csv | head -40
        fails=$((fails + 1))
    elif ! grep -qx "exit $want" fast.err; then
        echo "FAIL: $name: want exit $want"
        sed 's/^/  | /' fast.err
        fails=$((fails + 1))
    else
        echo "ok: $name ($(($(wc -l <fast.csv) - 1)) records, $(tail -2 fast.err | head -1 | cut -c1-70))"
    fi
}

# The conversions below rewrite a little-endian nanosecond pcap.
conv() { # conv IN OUT [be] [usec] [snap=N] [ver=MAJ.MIN]
    python3 - "$@" <<'PY'
import struct, sys
src, dst, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
d = open(src, "rb").read()
magic, vmaj, vmin, zone, sig, snap, lt = struct.unpack("<IHHiIII", d[:24])
o = ">" if "be" in opts else "<"
usec = "usec" in opts
for x in opts:
    if x.startswith("snap="):
        snap = int(x[5:])
    if x.startswith("ver="):
        vmaj, vmin = map(int, x[4:].split("."))
out = [struct.pack(o + "IHHiIII", 0xA1B2C3D4 if usec else 0xA1B23C4D, vmaj, vmin, zone, sig,
                   snap, lt)]
off = 24
while off + 16 <= len(d):
    s, f, cap, wl = struct.unpack("<IIII", d[off:off + 16])
    if usec:
        assert f % 1000 == 0
        f //= 1000
    out.append(struct.pack(o + "IIII", s, f, cap, wl))
    out.append(d[off + 16:off + 16 + cap])
    off += 16 + cap
open(dst, "wb").write(b"".join(out))
PY
}

$mk simple s.pcap >/dev/null
$mk simple s6.pcap vlan v6 >/dev/null
$mk snap cut.pcap 80 >/dev/null
$mk bench mix.pcap 30 40
$mk split s.pcap cli.pcap srv.pcap
$mk garbage garbage.pcap

same "little-endian, nanoseconds" 0 -r s.pcap
conv s.pcap be.pcap be
same "big-endian, nanoseconds" 0 -r be.pcap
conv s.pcap us.pcap usec
same "little-endian, microseconds" 0 -r us.pcap
conv s.pcap beus.pcap be usec
same "big-endian, microseconds" 0 -r beus.pcap
same "IPv6 in a VLAN" 0 -r s6.pcap
same "records cut by snaplen" 0 -r cut.pcap
# The header promises 60 bytes, the records carry whole frames: both cut
# every record to the file's snapshot length.
conv s.pcap snap60.pcap snap=60
same "records longer than the header's snaplen" 0 -r snap60.pcap
# A header snaplen of 0 is taken as the maximum.
conv s.pcap snap0.pcap snap=0
same "header snaplen 0" 0 -r snap0.pcap
# Version 2.3 (libpcap reads it either way; the fast reader leaves it to libpcap).
conv s.pcap v23.pcap ver=2.3
same "version 2.3" 0 -r v23.pcap
same "mixed HTTP and MySQL, 3 600 packets" 0 -r mix.pcap
same "two files merged in time order" 0 -r cli.pcap srv.pcap
same "filter tcp port 80" 0 -r mix.pcap -f "tcp port 80"
same "filter matching nothing" 0 -r mix.pcap -f "port 9"
same "filter on merged files" 0 -r cli.pcap srv.pcap -f "src port 80"
same "random bytes inside records" 0 -r garbage.pcap
head -c 24 s.pcap >empty.pcap
same "only a file header" 0 -r empty.pcap

# Truncations at every offset of the last two records (header and data),
# and inside a record longer than the snapshot length.
size=$(stat -c %s s.pcap)
for cut in 1 5 15 16 17 40 $((size - 24 - 100)); do
    head -c $((size - cut)) s.pcap >t.pcap
    same "cut $cut bytes before the end" 1 -r t.pcap
done
# The file ends with a 105-byte response and three 54-byte segments (70 bytes
# each with their headers): cut 250 bytes and the response keeps 65 (more
# than the snaplen of 60), cut 290 and it keeps 25.
size=$(stat -c %s snap60.pcap)
for cut in 250 290; do
    head -c $((size - cut)) snap60.pcap >t60.pcap
    same "cut $cut bytes before the end, records longer than the snaplen" 1 -r t60.pcap
done
# A record header claiming a huge captured length, in both byte orders.
python3 - <<'PY'
import struct
for src, dst, o in (("s.pcap", "huge.pcap", "<"), ("be.pcap", "hugebe.pcap", ">")):
    d = bytearray(open(src, "rb").read())
    off = 24
    for _ in range(4):
        off += 16 + struct.unpack(o + "I", d[off + 8:off + 12])[0]
    d[off + 8:off + 12] = struct.pack(o + "I", 300000)
    open(dst, "wb").write(d)
PY
same "captured length above the maximum" 1 -r huge.pcap
same "captured length above the maximum, big-endian" 1 -r hugebe.pcap
same "a good file and a damaged one" 1 -r cli.pcap huge.pcap

# Past the mapped reader's first 8 MiB window (about 19 MiB), whole and cut
# in the middle of a record near its end.
$mk bench big.pcap 60 700 >/dev/null
same "19 MiB, past the first mapping window" 0 -r big.pcap
head -c $(($(stat -c %s big.pcap) - 37)) big.pcap >bigcut.pcap
same "19 MiB, cut in its last record" 1 -r bigcut.pcap

# Standard input always goes through libpcap; it must agree with the file.
cases=$((cases + 1))
run a -r s.pcap
run b -r - <s.pcap
if diff -q a.csv b.csv >/dev/null; then echo "ok: standard input"; else
    echo "FAIL: standard input differs from the file"; fails=$((fails + 1)); fi

[ "$fails" -eq 0 ] || { echo "$fails of $cases failed"; exit 1; }
echo "all $cases passed"
