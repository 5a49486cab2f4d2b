#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pcap_tcpdump.sh — tbneck capture's tcpdump habits against tcpdump itself:
# -w writes byte for byte what `tcpdump -r IN -w OUT FILTER` writes (micro- and
# nanosecond inputs, --time-stamp-precision, a snaplen-cut input); -c COUNT;
# -C SIZE, -C with -W (the ring, zero-padded names) equal to tcpdump's files;
# -G SECS (strftime names, local time) alone, with -W (the stop) and with -C,
# against tests/pcap/rotate_oracle.py (tcpdump's rules over its own output);
# gzip'd input (file and standard input; a cut one is one error line, exit 1);
# -D equal to tcpdump -D; -n accepted; usage errors exit 2, unwritable -w 1.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
oracle="python3 $TB_SRCDIR/tests/pcap/rotate_oracle.py"
cap() { "$TBNECK" capture -q --no-store "$@"; }

"$TBNECK_SIM" -q "$TB_SRCDIR/sim/examples/quick.conf" --users 16 --out sim
"$TBNECK_SIM" -q "$TB_SRCDIR/sim/examples/quick.conf" --users 6 --snaplen 150 --out cut
# A microsecond capture of the same packets, written by tcpdump.
tcpdump -r sim.pcap -w us.pcap 2>/dev/null
filter='tcp port 3306 or (tcp port 8080 and tcp[tcpflags] & tcp-push != 0)'

same() { # same NAME A B: byte-identical files
    if cmp -s "$2" "$3"; then
        echo "ok: $1 ($(stat -c %s "$2") bytes)"
    else
        fail "$1: $2 and $3 differ"
        cmp "$2" "$3" | head -2 | sed 's/^/  | /'
    fi
}

# -w against tcpdump -w, the same filter.
tcpdump -r us.pcap -w ref_us.pcap "$filter" 2>/dev/null
cap -r us.pcap -w got_us.pcap "$filter"
same "-w, microsecond input, filter" ref_us.pcap got_us.pcap
tcpdump --time-stamp-precision=nano -r sim.pcap -w ref_ns.pcap "$filter" 2>/dev/null
cap -r sim.pcap -w got_ns.pcap -f "$filter"
same "-w, nanosecond input kept in nanoseconds (tcpdump --nano)" ref_ns.pcap got_ns.pcap
tcpdump -r sim.pcap -w ref_ns_us.pcap 2>/dev/null
cap -r sim.pcap -w got_ns_us.pcap --time-stamp-precision micro
same "-w --time-stamp-precision micro (tcpdump's default)" ref_ns_us.pcap got_ns_us.pcap
tcpdump --nano -r cut.pcap -w ref_cut.pcap 2>/dev/null
cap -r cut.pcap -w got_cut.pcap -n
same "-w, snaplen-150 input (-n accepted)" ref_cut.pcap got_cut.pcap
[ "$(od -An -tu4 -j16 -N4 got_cut.pcap | tr -d ' ')" = 150 ] || fail "-w: snaplen 150 not kept"
TBNECK_PCAP_READER=libpcap "$TBNECK" capture -q --no-store -r sim.pcap -w got_lib.pcap -f "$filter"
same "-w through libpcap's reader" ref_ns.pcap got_lib.pcap
cap -r sim.pcap -w - "$filter" >got_stdout.pcap
same "-w - (standard output)" ref_ns.pcap got_stdout.pcap

# -c COUNT: the first COUNT packets the filter passed, and only those analysed.
tcpdump --nano -r sim.pcap -c 777 -w ref_c.pcap "$filter" 2>/dev/null
"$TBNECK" capture --no-store -r sim.pcap -c 777 -w got_c.pcap "$filter" 2>c.err
same "-c 777 with -w and a filter" ref_c.pcap got_c.pcap
grep -q "^capture: 777 packets" c.err || { fail "-c 777: summary"; sed 's/^/  | /' c.err; }
"$TBNECK" capture --db c.db -r sim.pcap -c 5000 2>/dev/null
tcpdump --nano -r sim.pcap -c 5000 -w first5000.pcap 2>/dev/null
"$TBNECK" capture --db f.db -r first5000.pcap 2>/dev/null
"$TBNECK" export requests --db c.db >c.csv
"$TBNECK" export requests --db f.db >f.csv
if cmp -s c.csv f.csv && [ "$(wc -l <c.csv)" -gt 100 ]; then
    echo "ok: -c 5000 stores what the first 5000 packets hold ($(($(wc -l <c.csv) - 1)) requests)"
else
    fail "-c 5000: requests differ from a capture of tcpdump's first 5000 packets"
fi

# -C SIZE and the ring -W against tcpdump's own files (-Z root: Debian's
# tcpdump would otherwise write the later files as the tcpdump user).
rot_same() { # rot_same NAME DIR_A DIR_B
    local a b
    a=$(cd "$2" && ls | sort | tr '\n' ' ')
    b=$(cd "$3" && ls | sort | tr '\n' ' ')
    if [ "$a" != "$b" ]; then
        fail "$1: files differ: tcpdump [$a] tbneck [$b]"
        return
    fi
    for f in $a; do
        cmp -s "$2/$f" "$3/$f" || { fail "$1: $f differs"; return; }
    done
    echo "ok: $1 ($a)"
}
zroot=()
[ "$(id -u)" -eq 0 ] && zroot=(-Z root)
mkdir t1 g1 t2 g2 t3 g3
tcpdump --nano "${zroot[@]}" -r sim.pcap -C 1 -w t1/x.pcap 2>/dev/null
cap -r sim.pcap -C 1 -w g1/x.pcap
rot_same "-C 1" t1 g1
tcpdump --nano "${zroot[@]}" -r sim.pcap -C 1 -W 2 -w t2/ring.pcap 2>/dev/null
cap -r sim.pcap -C 1 -W 2 -w g2/ring.pcap
rot_same "-C 1 -W 2 (a ring)" t2 g2
tcpdump "${zroot[@]}" -r us.pcap -C 1 -W 10 -w t3/r "$filter" 2>/dev/null
cap -r us.pcap -C 1 -W 10 -w g3/r "$filter"
rot_same "-C 1 -W 10 (one digit: 0..9), filter" t3 g3
[ "$(ls t1 | wc -l)" -ge 3 ] || fail "-C 1: the test input should make at least 3 files"

# -G against the oracle: packet time, strftime names in local time (a zone
# with a half-hour offset shows local time is used), -W as tcpdump's stop,
# -G with -C.
g_case() { # g_case NAME TZ PATTERN OPTS...
    local name=$1 tz=$2 pat=$3; shift 3
    rm -rf exp got && mkdir exp got
    local out
    out=$(TZ=$tz $oracle ref_all.pcap exp "$pat" "$@")
    local want_pk=${out##*PACKETS }
    (cd got && TZ=$tz "$TBNECK" capture --no-store -r ../sim.pcap -w "$pat" "$@" 2>../g.err) ||
        { fail "$name: exit status"; sed 's/^/  | /' g.err; return; }
    rot_same "$name" exp got
    grep -q "^capture: $want_pk packets" g.err ||
        { fail "$name: want $want_pk packets analysed"; sed 's/^/  | /' g.err; }
}
tcpdump --nano -r sim.pcap -w ref_all.pcap 2>/dev/null
g_case "-G 1 strftime names (UTC)" UTC 'tap-%Y%m%d-%H%M%S.pcap' -G 1
g_case "-G 2 (Asia/Kolkata local time)" Asia/Kolkata 'k-%H.%M.%S.pcap' -G 2
g_case "-G 1 -W 3 stops after 3 files" UTC 's-%S.pcap' -G 1 -W 3
grep -q "maximum file limit reached: 3" g.err || fail "-G 1 -W 3: no 'limit reached' line"
g_case "-G 2 -C 1 -W 2 (a ring in each period)" UTC 'gc-%S.pcap' -G 2 -C 1 -W 2

# gzip'd input: the same packets, from a file and from standard input.
gzip -c sim.pcap >sim.pcap.gz
cap -r sim.pcap.gz -w got_gz.pcap "$filter"
same "-r FILE.pcap.gz" ref_ns.pcap got_gz.pcap
gzip -c us.pcap | cap -r - -w got_gzin.pcap "$filter"
same "-r - (gzip on standard input, microseconds kept)" ref_us.pcap got_gzin.pcap
"$TBNECK" capture -q --db gz.db -r sim.pcap.gz
"$TBNECK" capture -q --db plain.db -r sim.pcap
"$TBNECK" export requests --db gz.db >gz.csv
"$TBNECK" export requests --db plain.db >plain.csv
cmp -s gz.csv plain.csv && echo "ok: the gzip'd capture stores the same requests" ||
    fail "gzip'd and plain captures store different requests"
head -c 200000 sim.pcap.gz >cut.pcap.gz
rc=0
"$TBNECK" capture -q --no-store -r cut.pcap.gz 2>cut.err || rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <cut.err)" -eq 1 ] && grep -q "cut.pcap.gz: .*gzip: unexpected end of file" cut.err; then
    echo "ok: a cut .gz is one line, exit 1: $(cat cut.err)"
else
    fail "cut .gz: exit $rc"; sed 's/^/  | /' cut.err
fi

# -D lists the interfaces as tcpdump -D does (retried: interfaces come and go
# while other tests run).
for i in 1 2 3; do
    tcpdump -D >D.ref 2>/dev/null || true
    "$TBNECK" capture -D >D.got
    cmp -s D.ref D.got && break
    sleep 0.5
done
if cmp -s D.ref D.got; then echo "ok: -D ($(wc -l <D.got) interfaces)"; else
    fail "-D differs from tcpdump -D"; diff D.ref D.got | head | sed 's/^/  | /'
fi

# Errors: one line, documented status.
err_case() { # err_case NAME WANT_EXIT PATTERN ARGS...
    local name=$1 want=$2 pat=$3 rc=0; shift 3
    "$TBNECK" capture -q --db e.db "$@" >/dev/null 2>e.err || rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l <e.err)" -eq 1 ] && grep -q -- "$pat" e.err; then
        echo "ok: $name: $(cat e.err)"
    else
        fail "$name: exit $rc (want $want)"; sed 's/^/  | /' e.err
    fi
    [ ! -e e.db ] || fail "$name: left a database behind"
    rm -f e.db
}
err_case "-C without -w" 2 "give -w" -r sim.pcap -C 1
err_case "-W without -C or -G" 2 "give one of them" -r sim.pcap -w x.pcap -W 3
err_case "-C 0" 2 "bad file size '0'" -r sim.pcap -w x.pcap -C 0
err_case "-c x" 2 "bad packet count 'x'" -r sim.pcap -c x
err_case "-w - rotated" 2 "cannot be rotated" -r sim.pcap -w - -C 1
err_case "-D with -r" 2 "-D lists" -D -r sim.pcap
err_case "-w into a missing folder" 1 "nodir/x.pcap" -r sim.pcap -w nodir/x.pcap
"$TBNECK_SIM" -q "$TB_SRCDIR/sim/examples/quick.conf" --duration 1s --out sim2
# The same packets as Linux cooked (SLL) frames.
python3 - sim2.pcap sll.pcap <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
out = bytearray(d[:20] + struct.pack("<I", 113))
off = 24
while off < len(d):
    s, f, cl, ln = struct.unpack("<IIII", d[off:off + 16]); p = d[off + 16:off + 16 + cl]
    sll = struct.pack(">HHH8sH", 0, 1, 6, p[6:12] + b"\0\0", 0x0800)
    out += struct.pack("<IIII", s, f, cl - 14 + 16, ln - 14 + 16) + sll + p[14:]
    off += 16 + cl
open(sys.argv[2], "wb").write(out)
PY
err_case "-w with inputs of two link types" 1 "different link types" -r sim.pcap sll.pcap -w x.pcap

echo "pcap_tcpdump: $fails failures"
[ "$fails" -eq 0 ]
