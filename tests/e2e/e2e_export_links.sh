#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_export_links.sh — `export requests` reads table links (stored by
# whatif) when they are current instead of linking again, with the same
# bytes (issue 14). On cause-pool (seed 1: pool hand-offs, the linker's
# hardest case) and linking.conf (seed 3, 3 s):
#  * the export (all tiers and --tier) and its stderr line before and after
#    a whatif run are the same bytes (diff empty);
#  * the stored table is what was read: one link's parent set to NULL in
#    the table shows in exactly that row of the export (parent empty) and
#    in the stderr counts (one fewer linked), and TBNECK_WHATIF_STORED=0
#    links again (the first export's bytes);
#  * more requests captured (a new stamp): linked again, the same bytes as
#    TBNECK_WHATIF_STORED=0.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
ex() { "$TBNECK" export requests --db "$db" "$@"; }
check() { # check NAME CONF SEED DURATION WHATIF-ARGS...
    local name=$1 conf=$2 seed=$3 dur=$4
    shift 4
    local b=$work/$name
    db=$b.db
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/$conf" --out "$b" --seed "$seed" --duration "$dur" -q
    "$TBNECK" capture -q -r "$b.pcap" --db "$db"
    ex >"$b.a.csv" 2>"$b.a.err"
    ex --tier mysql >"$b.at.csv" 2>"$b.at.err"
    "$TBNECK" whatif --db "$db" "$@" >/dev/null
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM links')" -gt 1000 ] ||
        { echo "$name: whatif stored no links"; fail=1; }
    ex >"$b.b.csv" 2>"$b.b.err"
    ex --tier mysql >"$b.bt.csv" 2>"$b.bt.err"
    for x in csv err; do
        for t in "" t; do
            diff "$b.a$t.$x" "$b.b$t.$x" >"$b.diff" ||
                { echo "$name: export$t.$x differs after whatif"; head "$b.diff"; fail=1; }
        done
    done
    # Tamper with one stored link: the export must show it.
    local rid
    rid=$(sqlite3 "$db" "SELECT request FROM links WHERE parent IS NOT NULL ORDER BY request
                         LIMIT 1 OFFSET 500")
    local key
    key=$(sqlite3 "$db" "SELECT t.name || ',' || r.arrival_ns || ',' || r.departure_ns
                         FROM requests r JOIN tiers t ON t.id = r.tier_id WHERE r.rowid = $rid")
    sqlite3 "$db" "UPDATE links SET parent = NULL WHERE request = $rid"
    ex >"$b.c.csv" 2>"$b.c.err"
    python3 - "$b.a.csv" "$b.c.csv" "$b.a.err" "$b.c.err" "$key" "$name" <<'PY' || fail=1
import csv, re, sys
a, c, ae, ce, key, name = sys.argv[1:7]
ra, rc = list(csv.reader(open(a))), list(csv.reader(open(c)))
tier, arr, dep = key.split(",")
h = ra[0]
ix = [i for i, r in enumerate(ra) if i and r[h.index("tier")] == tier
      and r[h.index("arrival_ns")] == arr and r[h.index("departure_ns")] == dep]
diff = [i for i in range(len(ra)) if i >= len(rc) or ra[i] != rc[i]]
ok = (len(ra) == len(rc) and len(ix) == 1 and diff == ix and ra[ix[0]][-1] != ""
      and rc[ix[0]][-1] == "" and rc[ix[0]][:-1] == ra[ix[0]][:-1])
num = lambda f: tuple(map(int, re.search(r"linked (\d+) of (\d+) downstream requests to a "
                                         r"parent .*: (\d+) exact", open(f).read()).groups()))
la, lc = num(ae), num(ce)
ok = ok and lc == (la[0] - 1, la[1], la[2])  # exact counts kinds: unchanged
print(f"{name}: tampered row {ix}, rows differing {diff[:5]}, stderr {la} -> {lc}")
sys.exit(0 if ok else 1)
PY
    TBNECK_WHATIF_STORED=0 ex >"$b.d.csv" 2>"$b.d.err"
    cmp -s "$b.a.csv" "$b.d.csv" && cmp -s "$b.a.err" "$b.d.err" ||
        { echo "$name: TBNECK_WHATIF_STORED=0 export differs from the first"; fail=1; }
    # A second capture: the stored links are stale, linked again.
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/$conf" --out "$b.u" --seed 9 --duration 1s -q
    "$TBNECK" capture -q -r "$b.u.pcap" --db "$db"
    ex >"$b.e.csv" 2>"$b.e.err"
    TBNECK_WHATIF_STORED=0 ex >"$b.f.csv" 2>"$b.f.err"
    cmp -s "$b.e.csv" "$b.f.csv" && cmp -s "$b.e.err" "$b.f.err" ||
        { echo "$name: stale links read after a second capture"; fail=1; }
    cmp -s "$b.e.csv" "$b.a.csv" && { echo "$name: second capture added nothing"; fail=1; }
    echo "$name: $(cat "$b.a.err")"
    rm -f "$b".pcap "$b".u.pcap
}
check pool cause-pool.conf 1 15s --tier http-8080 --pool 8
check linking linking.conf 3 3s --tier mysql --speedup 2
exit $fail
