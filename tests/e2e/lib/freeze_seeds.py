#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""freeze_seeds.py — the freeze rule over simulator seeds, against the truth.

    freeze_seeds.py freezes|quiet CONFIG SEED... [--duration D] [--work DIR]

For each seed: tbneck-sim CONFIG --seed SEED, tbneck capture, then
`tbneck report --tier T --format csv` (the episodes of the tier and of each
of its servers) for every tier tbneck found. The
oracle is the simulator's own PREFIX.freezes.csv (server, start_ns, end_ns),
never tbneck's code.

freezes: every simulated freeze of 100 ms or more is overlapped by an episode
  of kind freeze on the frozen server (per-server rows of the report); every
  freeze episode of a server lies on one of that server's freezes (it may
  reach one window past the freeze's end: the drain of what queued); servers
  with no freeze have no freeze episode.
quiet: no episode of any kind, on any tier or server.

Prints one line per seed and a summary; exit 1 on any failure."""
import csv
import os
import subprocess
import sys
import tempfile

TBNECK = os.environ["TBNECK"]
SIM = os.environ["TBNECK_SIM"]
MIN_FREEZE_NS = 100_000_000
WIDTH_NS = 50_000_000  # the report's default window


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def tiers(db):
    out = run(TBNECK, "tiers", "--db", db)
    return [l.split()[0] for l in out.splitlines()[1:] if l and not l.startswith(" ")]


def one_seed(mode, conf, seed, work, extra):
    p = os.path.join(work, f"s{seed}")
    run(SIM, conf, "--out", p, "--seed", str(seed), "-q", *extra)
    run(TBNECK, "capture", "-r", p + ".pcap", "--db", p + ".db")
    os.unlink(p + ".pcap")
    truth = {}
    with open(p + ".freezes.csv") as f:
        for r in csv.DictReader(f):
            truth.setdefault(r["server"], []).append((int(r["start_ns"]), int(r["end_ns"])))
    # The episode list of every tier and server (report --format csv: the
    # report's episodes, without its diagnosis, which costs 4x the time).
    eps_of = {}  # (tier, server) -> episodes
    for t in tiers(p + ".db"):
        out = run(TBNECK, "report", "--tier", t, "--db", p + ".db", "--format", "csv")
        for r in csv.DictReader(out.splitlines()):
            e = {"start_ns": int(r["start_ns"]), "end_ns": int(r["end_ns"]),
                 "peak_load": float(r["peak_load"]), "kind": r["kind"]}
            eps_of.setdefault((r["tier"], r["server"]), []).append(e)
    rows = [(t, s, eps) for (t, s), eps in eps_of.items()]
    width = WIDTH_NS
    errs = []
    found = total = nfe = 0
    if mode == "quiet":
        for t, s, eps in rows:
            for e in eps:
                errs.append(f"{t} {s}: {e['kind']} episode at {e['start_ns']} "
                            f"({(e['end_ns'] - e['start_ns']) / 1e6:.0f} ms, "
                            f"peak load {e['peak_load']:.2f})")
    else:
        servers = {s: eps for t, s, eps in rows if s != "*"}
        for srv, fr in truth.items():
            fe = [e for e in servers.get(srv, []) if e["kind"] == "freeze"]
            for a, b in fr:
                if b - a < MIN_FREEZE_NS:
                    continue
                total += 1
                if any(e["start_ns"] < b and e["end_ns"] > a for e in fe):
                    found += 1
                else:
                    errs.append(f"{srv}: freeze [{a}, {b}) ({(b - a) / 1e6:.0f} ms) missed")
        for srv, eps in servers.items():
            for e in eps:
                if e["kind"] != "freeze":
                    continue
                nfe += 1
                if not any(e["start_ns"] < b + width and e["end_ns"] > a
                           for a, b in truth.get(srv, [])):
                    errs.append(f"{srv}: freeze episode [{e['start_ns']}, {e['end_ns']}) on no "
                                f"simulated freeze of it")
    return errs, found, total, nfe, sum(len(eps) for _, _, eps in rows)


def main():
    a = sys.argv[1:]
    extra = []
    work = None
    if "--duration" in a:
        i = a.index("--duration")
        extra = ["--duration", a[i + 1]]
        del a[i:i + 2]
    if "--work" in a:
        i = a.index("--work")
        work = a[i + 1]
        del a[i:i + 2]
    if len(a) < 3 or a[0] not in ("freezes", "quiet"):
        sys.exit(__doc__)
    mode, conf, seeds = a[0], a[1], a[2:]
    tmp = tempfile.TemporaryDirectory() if work is None else None
    work = work or tmp.name
    bad = 0
    sf = st = sn = se = 0
    name = os.path.basename(conf)
    for seed in seeds:
        errs, found, total, nfe, neps = one_seed(mode, conf, int(seed), work, extra)
        sf, st, sn, se = sf + found, st + total, sn + nfe, se + neps
        if mode == "quiet":
            print(f"{name} seed {seed}: {neps} episodes (tiers and servers)")
        else:
            print(f"{name} seed {seed}: {found}/{total} freezes >= 100 ms found, "
                  f"{nfe} freeze episodes on servers")
        for e in errs:
            print(f"FAIL: {name} seed {seed}: {e}")
        bad += len(errs) > 0
    if mode == "quiet":
        print(f"{name}: {len(seeds)} seeds, {se} episodes")
    else:
        print(f"{name}: {len(seeds)} seeds, {sf}/{st} freezes found, {sn} freeze episodes, "
              f"{bad} seeds failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
