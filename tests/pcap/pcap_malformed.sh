#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pcap_malformed.sh — hostile and broken input to `tbneck capture`: each case
# is one clear line and the documented exit status, never a crash, and what
# was read before a bad spot is kept.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
mk="python3 $TB_SRCDIR/tests/pcap/mkpcap.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0

# expect STATUS REGEX CMD...: exit status, and the last stderr line matches
# REGEX; a sanitizer report anywhere on stderr fails.
expect() {
    local want=$1 re=$2; shift 2
    local got=0
    "$@" >out 2>err || got=$?
    if [ "$got" != "$want" ] || ! tail -1 err | grep -Eq -- "$re" ||
        grep -q -e "Sanitizer" -e "runtime error" err; then
        echo "FAIL: $*"
        echo "  want exit $want, last stderr line matching /$re/; got exit $got:"
        sed 's/^/  | /' err
        fails=$((fails + 1))
    else
        echo "ok: exit $got: $(tail -1 err)"
    fi
}

requests() { "$TBNECK" export requests --db "$1" | tail -n +2 | wc -l; }

$mk simple good.pcap >/dev/null

# Usage errors: exit 2, nothing created.
expect 2 "give -r FILE or -i IFACE" "$TBNECK" capture
expect 2 "unknown option '--bogus'" "$TBNECK" capture -r good.pcap --bogus
expect 2 "option '-r' needs an argument" "$TBNECK" capture -r
expect 2 "-r and -i cannot be combined" "$TBNECK" capture -r good.pcap -i lo
expect 2 "unknown protocol 'gopher'" "$TBNECK" capture -r good.pcap --proto gopher
expect 2 "bad duration 'soon'" "$TBNECK" capture -r good.pcap --duration soon
expect 2 "bad snaplen '-5'" "$TBNECK" capture -r good.pcap -s -5
expect 2 "--serve works with -i" "$TBNECK" capture -r good.pcap --serve 127.0.0.1:8080
expect 2 "bad filter expression 'tcp port': " "$TBNECK" capture -r good.pcap --db u.db \
    -f "tcp port"
expect 2 "bad filter expression 'port 99999" "$TBNECK" capture -r good.pcap --db u.db port 99999
[ ! -e u.db ] && echo "ok: no database after a usage error" ||
    { echo "FAIL: a usage error created u.db"; fails=$((fails + 1)); }

# Runtime failures: exit 1, the file named.
expect 1 "nosuch.pcap: .*No such file" "$TBNECK" capture -r nosuch.pcap --db r.db
printf 'this is not a capture\n' >text.pcap
expect 1 "text.pcap: " "$TBNECK" capture -r text.pcap --db r.db
$mk linktype user0.pcap 147 >/dev/null
expect 1 "user0.pcap: unsupported link type 147" "$TBNECK" capture -r user0.pcap --db r.db
[ ! -e r.db ] && echo "ok: no database when no input is readable" ||
    { echo "FAIL: r.db created for unreadable input"; fails=$((fails + 1)); }
printf 'web foo 10.0.0.1:80\n' >bad.conf
expect 1 "bad.conf:1: unknown protocol 'foo'" "$TBNECK" capture -r good.pcap --tiers bad.conf \
    --db r.db
expect 1 "nosuch.conf: No such file" "$TBNECK" capture -r good.pcap --tiers nosuch.conf --db r.db
expect 1 "cannot open database 'nosuch.db'" "$TBNECK" tiers --db nosuch.db

# A file cut in the middle of the last record: everything before it is kept.
size=$(stat -c %s good.pcap)
head -c $((size - 30)) good.pcap >cut1.pcap
expect 1 "cut1.pcap: truncated dump file" "$TBNECK" capture -q -r cut1.pcap --db cut1.db
n=$(requests cut1.db)
[ "$n" = 3 ] && echo "ok: 3 requests kept before the cut" ||
    { echo "FAIL: $n requests kept from cut1.pcap, want 3"; fails=$((fails + 1)); }
# Cut inside the third response: two complete exchanges remain.
head -c 760 good.pcap >cut2.pcap
expect 1 "cut2.pcap: truncated dump file" "$TBNECK" capture -q -r cut2.pcap --db cut2.db
n=$(requests cut2.db)
[ "$n" = 2 ] && echo "ok: 2 requests kept before the cut" ||
    { echo "FAIL: $n requests kept from cut2.pcap, want 2"; fails=$((fails + 1)); }
# A record header claiming a huge captured length.
python3 - <<'PY'
import struct
d = bytearray(open("good.pcap", "rb").read())
off = 24
for _ in range(5):
    off += 16 + struct.unpack("<I", d[off + 8:off + 12])[0]
d[off + 8:off + 12] = struct.pack("<I", 0x7fffffff)
open("huge.pcap", "wb").write(d)
PY
expect 1 "huge.pcap: .*(invalid|bogus|bigger)" "$TBNECK" capture -q -r huge.pcap --db huge.db
n=$(requests huge.db)
[ "$n" = 1 ] && echo "ok: 1 request kept before the bad record" ||
    { echo "FAIL: $n requests kept from huge.pcap, want 1"; fails=$((fails + 1)); }
# Several files, one of them truncated: the others are read to the end.
$mk split good.pcap cli.pcap srv.pcap
head -c 300 srv.pcap >srvcut.pcap
expect 1 "srvcut.pcap: truncated dump file" "$TBNECK" capture -q -r cli.pcap srvcut.pcap \
    --db multi.db
n=$("$TBNECK" capture --no-store -r cli.pcap srvcut.pcap 2>&1 | grep -c "^capture: 9 packets" ||
    true)
[ "$n" = 1 ] && echo "ok: all 9 packets before and around the cut read" ||
    { echo "FAIL: packets read with a truncated second file"; fails=$((fails + 1)); }

# Random bytes inside valid records: counted, never fatal.
$mk garbage garbage.pcap
expect 0 "decode errors [1-9][0-9]*" "$TBNECK" capture --no-store -r garbage.pcap
# ... and every file above as fuzz input to every link type the decoder knows.
for lt in 0 1 12 101 108 113 228 229 276; do
    python3 - "$lt" <<'PY'
import struct, sys
d = bytearray(open("garbage.pcap", "rb").read())
d[20:24] = struct.pack("<I", int(sys.argv[1]))
open("g.pcap", "wb").write(d)
PY
    expect 0 "^  gaps " "$TBNECK" capture --no-store -r g.pcap
done

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
