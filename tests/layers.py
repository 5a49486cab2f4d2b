#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# layers.py — the module map of docs/DESIGN.md as a test: every symbol a
# module's static library uses from another module's library must come from
# a module it may use. Read from the libraries themselves (nm), not from the
# build files or the includes, so a call declared by hand (an `extern`
# written past the headers) is caught as well.
#
#   layers.py NAME LIBRARY [NAME LIBRARY ...]
#
# Prints one line per offending (module, symbol) and exits 1; exits 0 with a
# summary line when the map holds. A library that is not in the map below
# fails too: a new module takes its place in the map first.
import collections
import subprocess
import sys

# May use (directly or not): the picture of docs/DESIGN.md "Module map".
ALLOWED = {
    "common": set(),
    "proto": {"common"},
    "capture": {"proto", "common"},
    "store": {"common"},
    "stats": {"common"},
    "correlate": {"stats", "common"},
    "events": {"common"},
    "analysis": {"correlate", "stats", "store", "capture", "proto", "common"},
    "web": {"analysis", "correlate", "stats", "store", "capture", "proto", "common"},
    "cli": {"web", "analysis", "events", "correlate", "stats", "store", "capture", "proto",
            "common"},
}


def symbols(lib):
    """(defined, undefined) global symbol names of a static library."""
    out = subprocess.run(["nm", "--no-sort", lib], capture_output=True, text=True, check=True)
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            undefined.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRCGSVW":
            defined.add(f[2])
    return defined, undefined - defined


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        sys.exit("usage: layers.py NAME LIBRARY [NAME LIBRARY ...]")
    libs = dict(zip(argv[0::2], argv[1::2]))
    bad = []
    unknown = sorted(set(libs) - set(ALLOWED))
    for m in unknown:
        bad.append("layers: module '%s' is not in the map of tests/layers.py "
                   "(docs/DESIGN.md \"Module map\")" % m)
    owner = {}
    syms = {}
    for m, lib in libs.items():
        syms[m] = symbols(lib)
        for s in syms[m][0]:
            if s in owner and owner[s] != m:
                bad.append("layers: %s is defined by both %s and %s" % (s, owner[s], m))
            owner[s] = m
    uses = collections.Counter()
    for m in sorted(libs):
        for s in sorted(syms[m][1]):
            o = owner.get(s)
            if o is None or o == m:
                continue  # the C library, libpcap, SQLite, libuv, ...
            if o not in ALLOWED.get(m, set()):
                bad.append("layers: %s calls %s of %s, a module it may not use "
                           "(%s may use: %s)" % (m, s, o, m,
                                                 ", ".join(sorted(ALLOWED.get(m, ()))) or
                                                 "nothing"))
            else:
                uses[(m, o)] += 1
    if bad:
        print("\n".join(bad))
        return 1
    print("layers: %d modules, %d module-to-module uses, all down the map" %
          (len(libs), len(uses)))
    for (m, o), n in sorted(uses.items()):
        print("  %-9s -> %-9s %4d symbols" % (m, o, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
