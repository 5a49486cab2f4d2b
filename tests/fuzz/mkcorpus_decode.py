#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# mkcorpus_decode.py — writes the fuzz_decode seeds: mkpcap.py's conversations
# framed in every link type, in the harness's input format.
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "pcap"))
import mkpcap  # noqa: E402

LINKS = ["en10mb", "sll", "sll2", "null", "loop", "raw", "raw", "ipv4", "ipv6"]


def records(path):
    d = open(path, "rb").read()
    off = 24
    while off < len(d):
        cap, wl = struct.unpack("<II", d[off + 8:off + 16])
        yield d[off + 16:off + 16 + cap], wl - cap
        off += 16 + cap


def main():
    out = os.path.join(here, "corpus", "decode")
    tmp = os.path.join(out, "tmp.pcap")
    for i, link in enumerate(LINKS):
        for variant in ("plain", "lossy", "snap"):
            v6 = link == "ipv6" or (variant == "lossy" and i % 2)
            old = sys.stdout
            sys.stdout = open(os.devnull, "w")
            mkpcap.simple(tmp, "en10mb" if link == "vlan" else link, n=2,
                          snaplen=90 if variant == "snap" else 262144, v6=v6)
            sys.stdout = old
            recs = list(records(tmp))
            if variant == "lossy":
                # Drop the first response, swap the last two records.
                recs = recs[:4] + recs[5:]
                recs[-1], recs[-2] = recs[-2], recs[-1]
            blob = bytes([i])
            for r, cut in recs:
                blob += struct.pack(">HBB", len(r), min(cut, 255), 1) + r
            with open(os.path.join(out, "%s-%s" % (link if i != 6 else "raw101", variant)),
                      "wb") as f:
                f.write(blob)
    os.remove(tmp)


main()
