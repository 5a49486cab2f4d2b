#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rotate_oracle.py — the files tcpdump's -w rotation would leave, written
independently of tbneck, from one unrotated pcap (tcpdump's own -w output).

    rotate_oracle.py IN.pcap OUTDIR PATTERN [-G SECS] [-C MILLION_BYTES] [-W N]

tcpdump's rules (tcpdump.c, dump_packet_and_trunc and MakeFilename), with the
packets' own capture time in place of the wall clock:
  - before each packet, -G: when the packet's whole second minus the current
    period's start second is >= SECS, close the file, count a time rotation;
    without -C, stop when -W rotations were counted; else open
    strftime(PATTERN, localtime(that second)) (with -C: + number 0, padded);
  - then -C: when the current file (24-byte header + 16 + caplen per record
    written) is larger than MILLION_BYTES * 1000000, the next number (modulo -W), padded to the
    digits of W-1;
  - the first file: period = the first packet's second, number 0 padded only
    with -C.
Writes each expected file into OUTDIR (a later file of the same name replaces
an earlier one) and prints "FILES <names in order of opening>" and
"PACKETS <packets written>".
"""
import os
import struct
import sys
import time


def main():
    a = sys.argv[1:]
    src, outdir, pattern = a[0], a[1], a[2]
    opts = {"-G": 0, "-C": 0, "-W": 0}
    i = 3
    while i < len(a):
        opts[a[i]] = int(a[i + 1])
        i += 2
    G, C, W = opts["-G"], opts["-C"] * 1000000, opts["-W"]
    data = open(src, "rb").read()
    header = data[:24]
    magic = struct.unpack("<I", data[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), "little-endian pcap expected"
    recs = []
    off = 24
    while off < len(data):
        sec, frac, caplen, length = struct.unpack("<IIII", data[off:off + 16])
        recs.append((sec, data[off:off + 16 + caplen]))
        off += 16 + caplen
    width = len(str(W - 1)) if W > 1 else 0

    def name(period, cnt, wd):
        base = time.strftime(pattern, time.localtime(period)) if G else pattern
        return base if cnt == 0 and wd == 0 else "%s%0*d" % (base, wd, cnt)

    files = {}
    order = []
    period = recs[0][0] if recs else int(time.time())
    cur = name(period, 0, width if C else 0)
    files[cur] = bytearray(header)
    order.append(cur)
    gcount = ccount = written = 0
    for sec, rec in recs:
        if G and sec - period >= G:
            period = sec
            gcount += 1
            if not C and W and gcount >= W:
                break
            ccount = 0
            cur = name(period, 0, width if C else 0)
            files[cur] = bytearray(header)
            order.append(cur)
        if C and len(files[cur]) > C:
            ccount += 1
            if W and ccount >= W:
                ccount = 0
            cur = name(period, ccount, width)
            files[cur] = bytearray(header)
            order.append(cur)
        files[cur] += rec
        written += 1
    for n, b in files.items():
        with open(os.path.join(outdir, n), "wb") as f:
            f.write(b)
    print("FILES " + " ".join(order))
    print("PACKETS %d" % written)


if __name__ == "__main__":
    main()
