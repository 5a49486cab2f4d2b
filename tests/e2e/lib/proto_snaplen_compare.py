#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# proto_snaplen_compare.py — the same capture read whole and cut to a
# snaplen: every exchange reported from the cut capture must be one reported
# from the whole capture (same client, arrival, departure and status: holes
# never invent or shift an exchange), and at least MIN_FRACTION of them must
# survive the cut.
#
# usage: proto_snaplen_compare.py full.csv cut.csv MIN_FRACTION
import csv
import sys
from collections import Counter


def key(r):
    return (r["client"], r["arrival_ns"], r["departure_ns"], r["status"])


def main():
    full_csv, cut_csv, min_frac = sys.argv[1], sys.argv[2], float(sys.argv[3])
    full = Counter(key(r) for r in csv.DictReader(open(full_csv)))
    cut_rows = list(csv.DictReader(open(cut_csv)))
    cut = Counter(key(r) for r in cut_rows)
    invented = cut - full
    gaps = sum(1 for r in cut_rows if int(r["flags"]) & 1)
    n_full, n_cut = sum(full.values()), sum(cut.values())
    print("snaplen: %d of %d exchanges kept, %d with GAP, %d not in the whole capture"
          % (n_cut, n_full, gaps, sum(invented.values())))
    for k in list(invented)[:10]:
        print("INVENTED or SHIFTED: %r" % (k,))
    if invented:
        print("FAIL: the cut capture reports exchanges the whole one does not")
        sys.exit(1)
    if n_cut < min_frac * n_full or gaps == 0:
        print("FAIL: too few exchanges survive the cut (or no hole was seen)")
        sys.exit(1)


if __name__ == "__main__":
    main()
