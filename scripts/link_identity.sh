#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# link_identity.sh OLD_BUILD NEW_BUILD [SEED] — for work on the linker's
# speed: the links (table links: parent, score, kind of every downstream
# request) and whatif's forecast (JSON) of two builds, byte for byte, on five
# simulator databases (linking.conf 60 s, cause-db-cpu, cause-app-cpu,
# cause-pool, mix), then on bench/nstar/db8.conf at 40 s for each seed in
# $DB8_SEEDS (default 101; "" for none; 113 and 114 are the captures whose
# linking took minutes, docs/linking.md "Cost per child"). Exit 1 when any
# differs (every case is still run and printed). The simulator's truth
# cannot tell a faster linker that links differently but as well (e2e_linking
# scores 100% either way); this can. About 2-3 min on the shared machine.
set -euo pipefail
old=$1 new=$2 seed=${3:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cases=(linking cause-db-cpu cause-app-cpu cause-pool mix)
for s in ${DB8_SEEDS-101}; do
    cases+=("db8:$s")
done
for c in "${cases[@]}"; do
    dur=() conf=$src/sim/examples/$c.conf cseed=$seed
    [ "$c" = linking ] && dur=(--duration 60s)
    if [ "${c%%:*}" = db8 ]; then
        conf=$src/bench/nstar/db8.conf cseed=${c#db8:} dur=(--duration 40s)
    fi
    c=${c/:/-}
    "$new/sim/tbneck-sim" "$conf" --out "$work/$c" --seed "$cseed" "${dur[@]}" -q
    "$new/tbneck" capture -q -r "$work/$c.pcap" --db "$work/$c.db"
    rm -f "$work/$c.pcap" "$work/$c".*.csv
    change=(--tier mysql --speedup 2)
    [ "$c" = cause-pool ] && change=(--tier http-8080 --pool 8)
    for b in old new; do
        dir=$old
        [ $b = new ] && dir=$new
        cp "$work/$c.db" "$work/$b.db"
        TIMEFORMAT="%U"
        { time "$dir/tbneck" whatif "${change[@]}" --format json --db "$work/$b.db" \
            >"$work/$b.json" 2>/dev/null; } 2>"$work/$b.cpu"
        sqlite3 "$work/$b.db" "SELECT request, parent, score, kind FROM links ORDER BY request" \
            >"$work/$b.links"
    done
    n=$(wc -l <"$work/new.links")
    cpu="whatif CPU $(cat "$work/old.cpu") s old, $(cat "$work/new.cpu") s new"
    if cmp -s "$work/old.links" "$work/new.links" && cmp -s "$work/old.json" "$work/new.json"; then
        echo "link_identity: $c: $n links and the forecast identical ($cpu)"
    else
        d=$(diff "$work/old.links" "$work/new.links" | grep -c '^>' || true)
        echo "link_identity: $c: DIFFER: $d of $n links ($cpu)"
        fail=1
    fi
done
exit $fail
