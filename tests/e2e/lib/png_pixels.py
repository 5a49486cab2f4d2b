#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""png_pixels.py FILE.png TOL R,G,B [R,G,B...] — counts the pixels of each
colour (every channel within TOL) in an 8-bit RGB or RGBA, non-interlaced PNG,
as Chromium's screenshots are. Standard library only (zlib): decodes the
IDAT stream and undoes the five scanline filters of the PNG specification
(section 9). Prints "WIDTHxHEIGHT COUNT..." (one count per colour)."""
import struct
import sys
import zlib


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("%s: not a PNG" % path)
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit("%s: only 8-bit RGB/RGBA non-interlaced PNGs" % path)
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                line[i] = (line[i] + paeth(a, b, c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = decode(sys.argv[1])
    tol = int(sys.argv[2])
    cols = [tuple(int(x) for x in a.split(",")) for a in sys.argv[3:]]
    counts = [0] * len(cols)
    for line in rows:
        for i in range(0, len(line), bpp):
            px = (line[i], line[i + 1], line[i + 2])
            if px == (255, 255, 255):
                continue
            for k, c in enumerate(cols):
                if abs(px[0] - c[0]) <= tol and abs(px[1] - c[1]) <= tol and abs(px[2] - c[2]) <= tol:
                    counts[k] += 1
    print("%dx%d %s" % (w, h, " ".join(str(n) for n in counts)))


if __name__ == "__main__":
    main()
