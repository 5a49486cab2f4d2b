#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_diagnose_stored.sh — diagnose's stored inputs (issue 11, docs/diagnose.md
# "Speed"), on two short simulated runs whose verdicts have a root (db-pool:
# a pool; gc-one: a freeze, the root tests reading one tier's requests):
#  * `capture --diagnose-inputs` stores blob 'diagnose' in models/model_parts,
#    stamped with the requests' largest row id and the captures' count; a
#    capture without the flag stores none;
#  * diagnose reading it prints the same JSON and CSV as the streamed path
#    (TBNECK_DIAGNOSE_STORED=0) and --recompute, and its verdict is the
#    simulator's cause (diag_check.py against the truth files);
#  * it really reads the blob: with every departure moved by 7 ms in the
#    requests table (row ids and counts unchanged, so the stamp holds) the
#    stored per-tier loads and pools are those before, the streamed ones are
#    not (a root's cause tests still read its tier's requests);
#  * more requests captured (a new stamp), a damaged blob, the analyses it
#    relies on deleted, another window or range: the requests are read, the
#    answer equals the streamed one, and the stale blob is replaced;
#  * TBNECK_DIAGNOSE_STORED=0 capture --diagnose-inputs stores nothing.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib="$TB_SRCDIR/tests/e2e/lib"
fail=0
check() { # check WHAT FILE_A FILE_B: the same bytes
    cmp -s "$2" "$3" && return 0
    echo "FAIL: $1"
    diff "$2" "$3" | head -20 || true
    fail=1
}
stamp_of() { sqlite3 "$1" "SELECT 'rows ' || (SELECT max(rowid) FROM requests) || ' captures ' ||
                                   (SELECT count(*) FROM captures)"; }
blob_stamp() { sqlite3 "$1" "SELECT version || ' ' || stamp FROM models WHERE name = 'diagnose'"; }
iv=2 # diagnose.c INPUTS_VERSION (2: the tiers' lives by arrival concurrency, v0.9)

for c in db-pool gc-one; do
    p=$work/$c db=$work/$c.db
    "$TBNECK_SIM" "$lib/diag/$c.conf" --out "$p" --seed 3 --duration 8s -q
    "$TBNECK" capture -q -r "$p.pcap" --db "$db" --diagnose-inputs
    want="$iv $(stamp_of "$db")"
    got=$(blob_stamp "$db")
    [ "$got" = "$want" ] || { echo "FAIL: $c: stored inputs '$got', expected '$want'"; fail=1; }
    dg() { "$TBNECK" diagnose --db "$db" --no-critical-path "$@"; }
    dg --format json >"$p.stored.json"
    dg --format csv >"$p.stored.csv"
    TBNECK_DIAGNOSE_STORED=0 dg --format json >"$p.streamed.json"
    TBNECK_DIAGNOSE_STORED=0 dg --format csv >"$p.streamed.csv"
    dg --recompute --format json >"$p.recomputed.json"
    check "$c: stored vs streamed json" "$p.streamed.json" "$p.stored.json"
    check "$c: stored vs streamed csv" "$p.streamed.csv" "$p.stored.csv"
    check "$c: stored vs --recompute json" "$p.recomputed.json" "$p.stored.json"
    extra=()
    if [ "$c" = db-pool ]; then
        tshark -r "$p.pcap" -T fields -E separator=, -e tcp.stream -e ip.src \
            -e tcp.srcport -e ip.dst -e tcp.dstport 2>/dev/null >"$p.streams.csv"
        extra=("$p.streams.csv")
    fi
    python3 "$lib/diag_check.py" "$c" "$p.stored.json" "$p" "${extra[@]}" || fail=1

    # Another window or range never takes the blob: equal to the streamed path.
    dg --window 20ms --format json >"$p.w20.json"
    TBNECK_DIAGNOSE_STORED=0 dg --window 20ms --format json >"$p.w20s.json"
    check "$c: --window 20ms" "$p.w20s.json" "$p.w20.json"
    from=$(sqlite3 "$db" "SELECT min(arrival_ns) + 2000000000 FROM requests")
    dg --from "$from" --format json >"$p.from.json"
    TBNECK_DIAGNOSE_STORED=0 dg --from "$from" --format json >"$p.froms.json"
    check "$c: --from" "$p.froms.json" "$p.from.json"

    # The blob is what is read: requests moved under an unchanged stamp.
    cp "$db" "$p.moved.db"
    sqlite3 "$p.moved.db" "UPDATE requests SET departure_ns = departure_ns + 7000000"
    "$TBNECK" diagnose --db "$p.moved.db" --no-critical-path --format json >"$p.moved.json"
    TBNECK_DIAGNOSE_STORED=0 "$TBNECK" diagnose --db "$p.moved.db" --no-critical-path \
        --format json >"$p.moveds.json"
    # The per-tier loads and the pools come from the blob alone; a root's
    # cause tests (queue discipline, CPU quota) still read its tier's requests.
    python3 - "$c" "$p.stored.json" "$p.moved.json" "$p.moveds.json" <<'PY' || fail=1
import json, sys
c, before, moved, streamed = sys.argv[1], *(json.load(open(f)) for f in sys.argv[2:5])
part = lambda d: (d["tiers"], d["pools"])
ok = part(moved) == part(before) and part(streamed) != part(before)
print(f"{c}: moved requests under the same stamp: stored tiers/pools "
      f"{'unchanged' if part(moved) == part(before) else 'CHANGED'}, streamed "
      f"{'changed' if part(streamed) != part(before) else 'UNCHANGED'}" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
    rm -f "$p".moved.db*

    # The critical path (blob 'critpath', stored by capture --diagnose-inputs
    # beside the inputs): the same JSON as linking every request again, and
    # really read — every arrival 5 ms earlier under the same stamp leaves the
    # stored path as it was, while linking again (and --recompute, which
    # stores it anew) sees every response time 5 ms longer.
    got=$(sqlite3 "$db" "SELECT version || ' ' || stamp FROM models WHERE name = 'critpath'")
    [ "$got" = "1 $(stamp_of "$db")" ] ||
        { echo "FAIL: $c: stored critical path '$got', expected '1 $(stamp_of "$db")'"; fail=1; }
    "$TBNECK" diagnose --db "$db" --format json >"$p.cp.json"
    TBNECK_DIAGNOSE_STORED=0 "$TBNECK" diagnose --db "$db" --format json >"$p.cps.json"
    check "$c: stored vs linked critical path" "$p.cps.json" "$p.cp.json"
    cp "$db" "$p.early.db"
    sqlite3 "$p.early.db" "UPDATE requests SET arrival_ns = arrival_ns - 5000000"
    "$TBNECK" diagnose --db "$p.early.db" --format json >"$p.early.json"
    TBNECK_DIAGNOSE_STORED=0 "$TBNECK" diagnose --db "$p.early.db" --format json >"$p.earlys.json"
    "$TBNECK" diagnose --db "$p.early.db" --recompute --format json >/dev/null
    "$TBNECK" diagnose --db "$p.early.db" --format json >"$p.early2.json"
    python3 - "$c" "$p.cp.json" "$p.early.json" "$p.earlys.json" "$p.early2.json" <<'PY' || fail=1
import json, sys
c, before, stored, linked, again = sys.argv[1], *(json.load(open(f))["critical_path"]
                                               for f in sys.argv[2:6])
mean = lambda cp: cp["classes"][0]["rt_mean_ns"]
ok = (stored == before and linked != before and again == linked and
      abs(mean(linked) - mean(before) - 5e6) < 1)
print(f"{c}: arrivals 5 ms earlier under the same stamp: stored critical path "
      f"{'unchanged' if stored == before else 'CHANGED'}, linked again mean "
      f"{mean(before) / 1e6:.3f} -> {mean(linked) / 1e6:.3f} ms, after --recompute "
      f"{'the new one' if again == linked else 'NOT the new one'}" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
    rm -f "$p".early.db*

    # Damaged blob, analyses gone: read the requests, the same answer.
    cp "$db" "$p.bad.db"
    sqlite3 "$p.bad.db" "UPDATE model_parts SET data = substr(data, 1, length(data) - 24)
                         WHERE name = 'diagnose'"
    "$TBNECK" diagnose --db "$p.bad.db" --no-critical-path --format json >"$p.bad.json"
    check "$c: damaged blob" "$p.streamed.json" "$p.bad.json"
    cp "$db" "$p.noan.db"
    sqlite3 "$p.noan.db" "DELETE FROM episodes; DELETE FROM analyses; DELETE FROM windows"
    "$TBNECK" diagnose --db "$p.noan.db" --no-critical-path --format json >"$p.noan.json"
    check "$c: stored analyses deleted" "$p.streamed.json" "$p.noan.json"
    rm -f "$p".bad.db* "$p".noan.db*
done

# More requests: a new stamp, the old blob stale; the capture stores a new one.
db=$work/gc-one.db
TBNECK_DIAGNOSE_STORED=0 "$TBNECK" capture -q -r "$work/db-pool.pcap" --db "$db" --diagnose-inputs
stale=$(blob_stamp "$db")
[ "$stale" != "$iv $(stamp_of "$db")" ] || { echo "FAIL: STORED=0 capture stored"; fail=1; }
"$TBNECK" diagnose --db "$db" --no-critical-path --format json >"$work/two.json"
TBNECK_DIAGNOSE_STORED=0 "$TBNECK" diagnose --db "$db" --no-critical-path --format json \
    >"$work/two.streamed.json"
check "two captures: stale blob not used" "$work/two.streamed.json" "$work/two.json"
got=$(blob_stamp "$db")
[ "$got" = "$iv $(stamp_of "$db")" ] ||
    { echo "FAIL: diagnose did not replace the stale blob ('$got')"; fail=1; }
"$TBNECK" diagnose --db "$db" --no-critical-path --format json >"$work/two.again.json"
check "two captures: the replaced blob" "$work/two.streamed.json" "$work/two.again.json"
TBNECK_DIAGNOSE_STORED=0 "$TBNECK" capture -q -r "$work/db-pool.pcap" --db "$work/none.db" \
    --diagnose-inputs
[ -z "$(sqlite3 "$work/none.db" "SELECT name FROM models")" ] ||
    { echo "FAIL: TBNECK_DIAGNOSE_STORED=0 capture stored inputs"; fail=1; }
"$TBNECK" capture -q -r "$work/db-pool.pcap" --db "$work/noflag.db"
[ -z "$(sqlite3 "$work/noflag.db" "SELECT name FROM models")" ] ||
    { echo "FAIL: a capture without --diagnose-inputs stored inputs"; fail=1; }
"$TBNECK" capture -q -r "$work/db-pool.pcap" --no-store --diagnose-inputs 2>"$work/usage.err" &&
    { echo "FAIL: --diagnose-inputs with --no-store accepted"; fail=1; }
[ "$(wc -l <"$work/usage.err")" -eq 1 ] && grep -q -- '--diagnose-inputs' "$work/usage.err" ||
    { cat "$work/usage.err"; echo "FAIL: --diagnose-inputs --no-store: want one line"; fail=1; }
[ $fail = 0 ] && echo "e2e_diagnose_stored: ok"
exit $fail
