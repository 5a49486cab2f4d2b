#!/usr/bin/env python3
# link_score.py — scores `tbneck export requests`' id,parent columns against
# the simulator's requests.csv (id,parent: the true parent of each request).
# Captured rows are matched to truth rows by who talked to whom and when
# (tier, server, client address:port, arrival_ns, departure_ns), never by id:
# tbneck's ids are its own row numbers.
# usage: link_score.py TRUTH.requests.csv EXPORT.csv [MIN_FRACTION]
# Prints "linked C of N downstream requests to their true parent (P%)";
# exits 1 when P < MIN_FRACTION (default 0.99) or a row does not match.
import csv
import sys


def key(r):
    return (r["tier"], r["server"], r["client"], int(r["arrival_ns"]), int(r["departure_ns"]))


def main():
    truth, export = sys.argv[1], sys.argv[2]
    need = float(sys.argv[3]) if len(sys.argv) > 3 else 0.99
    t_by_key, t_by_id = {}, {}
    for r in csv.DictReader(open(truth, newline="")):
        k = key(r)
        t_by_key[k] = r
        t_by_id[r["id"]] = k
    e_by_id, rows = {}, []
    for r in csv.DictReader(open(export, newline="")):
        e_by_id[r["id"]] = key(r)
        rows.append(r)
    if len(rows) != len(t_by_key):
        print(f"export has {len(rows)} rows, the truth {len(t_by_key)}")
        return 1
    n = ok = wrong_front = 0
    for r in rows:
        k = key(r)
        t = t_by_key.get(k)
        if t is None:
            print(f"row {r['id']} {k} is not in the truth")
            return 1
        if not t["parent"]:
            if r["parent"]:
                wrong_front += 1
            continue
        n += 1
        if r["parent"] and e_by_id.get(r["parent"]) == t_by_id.get(t["parent"]):
            ok += 1
    frac = ok / n if n else 0.0
    print(f"linked {ok} of {n} downstream requests to their true parent ({100 * frac:.2f}%); "
          f"{wrong_front} front requests given a parent")
    return 0 if frac >= need and wrong_front == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
