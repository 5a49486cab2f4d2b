#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# link_identity.sh OLD_BUILD NEW_BUILD [SEED] — for work on the linker's
# speed: the links (table links: parent, score, kind of every downstream
# request) and whatif's forecast (JSON) of two builds, byte for byte, on five
# simulator databases (linking.conf 60 s, cause-db-cpu, cause-app-cpu,
# cause-pool, mix). Exit 1 on the first difference. The simulator's truth
# cannot tell a faster linker that links differently but as well (e2e_linking
# scores 100% either way); this can. About 1-2 min on the shared machine.
set -euo pipefail
old=$1 new=$2 seed=${3:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
for c in linking cause-db-cpu cause-app-cpu cause-pool mix; do
    dur=()
    [ "$c" = linking ] && dur=(--duration 60s)
    "$new/sim/tbneck-sim" "$src/sim/examples/$c.conf" --out "$work/$c" --seed "$seed" "${dur[@]}" -q
    "$new/tbneck" capture -q -r "$work/$c.pcap" --db "$work/$c.db"
    rm -f "$work/$c.pcap" "$work/$c".*.csv
    change=(--tier mysql --speedup 2)
    [ "$c" = cause-pool ] && change=(--tier http-8080 --pool 8)
    for b in old new; do
        dir=$old
        [ $b = new ] && dir=$new
        cp "$work/$c.db" "$work/$b.db"
        "$dir/tbneck" whatif "${change[@]}" --format json --db "$work/$b.db" >"$work/$b.json"
        sqlite3 "$work/$b.db" "SELECT request, parent, score, kind FROM links ORDER BY request" \
            >"$work/$b.links"
    done
    n=$(wc -l <"$work/new.links")
    if cmp -s "$work/old.links" "$work/new.links" && cmp -s "$work/old.json" "$work/new.json"; then
        echo "link_identity: $c: $n links and the forecast identical"
    else
        echo "link_identity: $c: DIFFER ($n links)"
        fail=1
    fi
done
exit $fail
