#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pcap_capture.sh — `tbneck capture -r` on synthetic captures with known
# timings: every link type, IPv6, pcapng, several files merged in time order,
# BPF filters, snaplen cuts, a tiers file, and `tbneck tiers`.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
mk="python3 $TB_SRCDIR/tests/pcap/mkpcap.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The expected records of mkpcap's "simple" conversation (3 exchanges).
expected() { # expected FLAGS [SERVER CLIENT TIER]
    local f=$1 srv=${2:-10.0.0.1:80} cli=${3:-10.0.0.9:51000} tier=${4:-http}
    # (id,parent: the rows' numbers; no parent, the client is no tier's)
    echo "tier,server,client,conn,class,arrival_ns,departure_ns,req_bytes,resp_bytes,status,flags,id,parent"
    echo "$tier,$srv,$cli,1,GET /item/{id},1700000000010000000,1700000000020000000,51,49,200,$f,1,"
    echo "$tier,$srv,$cli,1,GET /item/{id},1700000000110000000,1700000000120000000,51,50,200,$f,2,"
    echo "$tier,$srv,$cli,1,GET /item/{id},1700000000210000000,1700000000220000000,51,51,200,$f,3,"
}

# check NAME EXPECTED_FILE DB: the exported requests equal the expectation.
check() {
    "$TBNECK" export requests --db "$3" >"$work/got.csv" 2>"$work/export.err" || true
    if diff -u "$2" "$work/got.csv" >"$work/diff"; then
        echo "ok: $1"
    else
        fail "$1"
        sed 's/^/  | /' "$work/diff" "$work/export.err"
    fi
}

capture_ok() { # capture_ok NAME DB ARGS...: exit 0 expected
    local name=$1 db=$2; shift 2
    rm -f "$db"
    if ! "$TBNECK" capture -q --db "$db" "$@" 2>"$work/err"; then
        fail "$name: capture failed"
        sed 's/^/  | /' "$work/err"
    fi
}

expected 0 >"$work/exp.csv"

for link in en10mb vlan qinq sll sll2 null loop raw ipv4; do
    $mk simple "$work/$link.pcap" "$link" >/dev/null
    capture_ok "$link" "$work/$link.db" -r "$work/$link.pcap"
    check "link type $link" "$work/exp.csv" "$work/$link.db"
done
expected 0 "[2001:db8::1]:80" "[2001:db8::9]:51000" >"$work/exp6.csv"
for link in en10mb sll2 null raw ipv6; do
    $mk simple "$work/v6$link.pcap" "$link" v6 >/dev/null
    capture_ok "v6 $link" "$work/v6$link.db" -r "$work/v6$link.pcap"
    check "IPv6 over $link" "$work/exp6.csv" "$work/v6$link.db"
done

# pcapng, as tshark writes it.
if command -v editcap >/dev/null; then
    editcap -F pcapng "$work/en10mb.pcap" "$work/ng.pcapng"
    capture_ok pcapng "$work/ng.db" -r "$work/ng.pcapng"
    check "pcapng input" "$work/exp.csv" "$work/ng.db"
else
    fail "editcap (wireshark-common) not installed: pcapng input untested"
fi

# Client packets in one file, server packets in the other: merged by time.
$mk split "$work/en10mb.pcap" "$work/cli.pcap" "$work/srv.pcap"
capture_ok "merge" "$work/merge.db" -r "$work/srv.pcap" "$work/cli.pcap"
check "two files merged in time order (-r A B)" "$work/exp.csv" "$work/merge.db"
capture_ok "merge2" "$work/merge2.db" -r "$work/cli.pcap" -r "$work/srv.pcap"
check "two files merged in time order (-r A -r B)" "$work/exp.csv" "$work/merge2.db"

# "-r -" reads standard input, alone or merged with a file.
rm -f "$work/stdin.db"
"$TBNECK" capture -q -r - --db "$work/stdin.db" <"$work/en10mb.pcap" ||
    fail "capture -r - failed"
check "-r - (standard input)" "$work/exp.csv" "$work/stdin.db"
rm -f "$work/stdin2.db"
"$TBNECK" capture -q -r "$work/cli.pcap" -r - --db "$work/stdin2.db" <"$work/srv.pcap" ||
    fail "capture -r FILE -r - failed"
check "a file merged with standard input" "$work/exp.csv" "$work/stdin2.db"

# BPF: -f, and trailing arguments as tcpdump takes them.
capture_ok "bpf" "$work/bpf.db" -r "$work/en10mb.pcap" -f "tcp port 80"
check "filter -f 'tcp port 80' keeps the exchange" "$work/exp.csv" "$work/bpf.db"
capture_ok "bpf2" "$work/bpf2.db" -r "$work/en10mb.pcap" tcp port 81
head -1 "$work/exp.csv" >"$work/none.csv"
check "trailing filter 'tcp port 81' drops everything" "$work/none.csv" "$work/bpf2.db"
capture_ok "bpf3" "$work/bpf3.db" -r "$work/cli.pcap" "$work/srv.pcap" host 10.0.0.9
check "files then a trailing filter" "$work/exp.csv" "$work/bpf3.db"

# A snaplen that cuts each response's body and the request's last 5 bytes:
# sizes are what was seen, flagged TRUNC|GAP.
$mk snap "$work/snap.pcap" 100 >/dev/null
capture_ok "snaplen" "$work/snap.db" -r "$work/snap.pcap"
expected 3 | sed 's/,51,\(4[0-9]\|5[0-9]\),200,3,\([0-9]\),$/,46,\1,200,3,\2,/' >"$work/expsnap.csv"
check "snaplen 100: TRUNC|GAP, request bytes as captured" "$work/expsnap.csv" "$work/snap.db"

# A tiers file names the tier; `tbneck tiers` lists it as configured.
printf '# test\nfront http 10.0.0.1:80 hosts=10.0.0.1\n' >"$work/t.conf"
capture_ok "tiers" "$work/tiers.db" -r "$work/en10mb.pcap" --tiers "$work/t.conf"
expected 0 10.0.0.1:80 10.0.0.9:51000 front >"$work/expt.csv"
check "tiers file" "$work/expt.csv" "$work/tiers.db"
"$TBNECK" tiers --db "$work/tiers.db" >"$work/tiers.out"
cat >"$work/tiers.exp" <<'T'
TIER                     PROTO    SOURCE      SERVERS     REQUESTS
front                    http     configured        1            3
  10.0.0.1:80                                                     3
T
if diff -u "$work/tiers.exp" "$work/tiers.out" >"$work/diff"; then echo "ok: tbneck tiers (configured)"
else fail "tbneck tiers (configured)"; sed 's/^/  | /' "$work/diff"; fi
"$TBNECK" tiers --db "$work/raw.db" >"$work/tiers.out"
sed 's/^front                    http     configured/http                     http     discovered/' \
    "$work/tiers.exp" >"$work/tiers2.exp"
if diff -u "$work/tiers2.exp" "$work/tiers.out" >"$work/diff"; then echo "ok: tbneck tiers (discovered)"
else fail "tbneck tiers (discovered)"; sed 's/^/  | /' "$work/diff"; fi

# A second capture into the same database continues the connection ids.
"$TBNECK" capture -q -r "$work/en10mb.pcap" --db "$work/raw.db"
n=$("$TBNECK" export requests --db "$work/raw.db" | awk -F, 'NR > 1 { print $4 }' | sort -u |
    tr '\n' ' ')
[ "$n" = "1 2 " ] && echo "ok: second capture gets conn 2" || fail "conn ids after a second capture: '$n'"

# --no-store touches no database.
"$TBNECK" capture -q --no-store -r "$work/en10mb.pcap" --db "$work/nostore.db"
[ ! -e "$work/nostore.db" ] && echo "ok: --no-store creates no database" ||
    fail "--no-store created $work/nostore.db"

# The summary names the tier and counts.
"$TBNECK" capture --no-store -r "$work/en10mb.pcap" 2>"$work/sum.txt"
grep -q "^capture: 12 packets (951 bytes, 12 TCP), 3 requests, 1 flows (0 mid-stream, at most 1 open)$" \
    "$work/sum.txt" && grep -q "tier http  *3 requests" "$work/sum.txt" &&
    echo "ok: summary" || { fail "summary"; sed 's/^/  | /' "$work/sum.txt"; }

# --duration counts capture time from the first packet: 150ms keeps the first
# two exchanges (their responses at +20ms and +120ms), not the third (+220ms).
capture_ok "duration" "$work/dur.db" -r "$work/en10mb.pcap" --duration 150ms
head -3 "$work/exp.csv" >"$work/expdur.csv"
check "--duration 150ms" "$work/expdur.csv" "$work/dur.db"

# SIGINT while blocked reading a pipe: a clean stop, not a read error, and the
# exchanges completed before it are kept (and whole: no departure before its
# arrival).
$mk bench "$work/big.pcap" 60 400
mkfifo "$work/fifo"
"$TBNECK" capture -r - --db "$work/pipe.db" <"$work/fifo" 2>"$work/pipe.err" &
pid=$!
exec 3>"$work/fifo"
size=$(stat -c %s "$work/big.pcap")
head -c $((size / 2)) "$work/big.pcap" >&3
# head has returned: all but the pipe's 64 KiB went to tbneck; give it time
# (generously, for a loaded machine) to process that and block on the read.
for _ in $(seq 100); do [ -e "$work/pipe.db" ] && break; sleep 0.1; done
sleep 2
kill -INT "$pid" 2>/dev/null || true
st=0
wait "$pid" || st=$?
exec 3>&-
n=$("$TBNECK" export requests --db "$work/pipe.db" | tail -n +2 | wc -l)
bad=$("$TBNECK" export requests --db "$work/pipe.db" | awk -F, 'NR > 1 && $7 < $6' | wc -l)
# Every exchange of the bench file is one request packet and one response
# packet: tbneck must keep exactly as many as there are whole response records
# in the half it was given (the record cut by the half is never complete).
want=$(python3 - "$work/big.pcap" $((size / 2)) <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()[:int(sys.argv[2])]
off, n = 24, 0
while len(data) - off >= 16:
    cap = struct.unpack_from("<I", data, off + 8)[0]
    if len(data) - off - 16 < cap:
        break
    ip = data[off + 16 + 14:off + 16 + cap]  # Ethernet
    ihl = (ip[0] & 15) * 4
    sport = struct.unpack_from(">H", ip, ihl)[0]
    payload = struct.unpack_from(">H", ip, 2)[0] - ihl - (ip[ihl + 12] >> 4) * 4
    n += sport in (80, 8080, 3306) and payload > 0
    off += 16 + cap
print(n)
PY
)
if [ "$st" = 0 ] && [ "$n" = "$want" ] && [ "$bad" = 0 ] &&
    grep -q "interrupted; everything read so far is kept" "$work/pipe.err"; then
    echo "ok: SIGINT on a pipe: exit 0, $n requests of the first half kept (all of them)"
else
    fail "SIGINT on a pipe: exit $st, $n requests, $want answered in the half given"
    sed 's/^/  | /' "$work/pipe.err"
fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
