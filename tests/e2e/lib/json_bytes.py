#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# json_bytes.py — for e2e_json_utf8.sh.
#   json_bytes.py pcap FILE   writes a capture whose HTTP paths and SQL carry
#                             bytes that are not UTF-8, control bytes and
#                             well-formed UTF-8 (tests/pcap/mkpcap.py framing)
#   json_bytes.py check TIER FILE CSV
#                             FILE (a report or API answer) must be valid JSON
#                             whose strings are exactly what the classes of
#                             TIER in CSV (tbneck export requests, the raw
#                             bytes) become under the documented rule: valid
#                             UTF-8 kept, every other byte U+FFFD; every such
#                             class must appear.
import csv
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "pcap"))
import mkpcap  # noqa: E402

PATHS = [b"/caf\xe9", b"/caf\xc3\xa9", b"/x\xff\xfe/y", b"/half\xe2\x82"]
SQL = [b"SELECT a FROM caf\xe9 WHERE id = 1", b"SELECT n\xc3\xa9 FROM t",
       b"SELECT \xed\xa0\x80 FROM u", b"SELECT `a\x01\x1fb\x7f` FROM v"]


def http_req(path):
    return b"GET " + path + b" HTTP/1.1\r\nHost: shop\r\n\r\n"


def mysql_query(sql):
    p = b"\x03" + sql
    return struct.pack("<I", len(p))[:3] + b"\x00" + p


def write_pcap(path):
    w = mkpcap.Writer(path)
    cli, web, db = mkpcap.ip4("10.0.0.9"), mkpcap.ip4("10.0.0.1"), mkpcap.ip4("10.0.0.2")
    h = mkpcap.Conn(w, cli, 51000, web, 80)
    m = mkpcap.Conn(w, cli, 51001, db, 3306)
    t = mkpcap.T0
    h.handshake(t)  # the MySQL connection is picked up mid-stream (a pool)
    for i in range(60):
        t += 20_000_000
        h.send(t, True, http_req(PATHS[i % len(PATHS)]))
        h.send(t + 3_000_000, False, mkpcap.http_resp(5))
        m.send(t + 5_000_000, True, mysql_query(SQL[i % len(SQL)]))
        m.send(t + 7_000_000, False, mkpcap.MYSQL_OK)
    h.fin(t + 50_000_000)
    w.close()


def expected(raw):
    """Valid UTF-8 kept; each byte outside a well-formed sequence -> U+FFFD.
    Python's own decoder finds the well-formed sequences; it replaces whole
    broken subparts, so the replacement count is done per byte here."""
    out, i = [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                ch = raw[i:i + n].decode("utf-8", "strict")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                out.append(ch)
                i += n
                break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)


def check(tier, path, csv_path):
    raw = open(path, "rb").read()
    raw.decode("utf-8")  # strict: the document itself is UTF-8
    doc = json.loads(raw)
    found = set(strings(doc))
    with open(csv_path, "rb") as f:
        rows = list(csv.reader(line.decode("latin-1") for line in f))
    hdr = rows[0]
    classes = {r[hdr.index("class")].encode("latin-1") for r in rows[1:] if r[0] == tier}
    broken = 0
    for c in sorted(classes):
        want = expected(c)
        if want not in found:
            sys.exit("%s: class %r should read %r; strings there: %r"
                     % (path, c, want, sorted(s for s in found if len(s) < 80)))
        broken += "\ufffd" in want
    if not broken:
        sys.exit("%s: no class of %s had a byte to replace: the test saw nothing" % (path, tier))
    print("ok: %s: %d classes of %s, %d with replaced bytes" % (os.path.basename(path),
                                                                 len(classes), tier, broken))


if __name__ == "__main__":
    if sys.argv[1] == "pcap":
        write_pcap(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("json_bytes.py: unknown command")
