# SPDX-License-Identifier: MIT
# packet_times.py — shared by the e2e comparisons: the capture times of the
# data packets of every connection to a server port, from tshark's frame list
# (frame.time_epoch, tcp.srcport, tcp.dstport), and the check that a record's
# arrival is a packet its client sent and its departure one its server sent.
from collections import defaultdict
from decimal import Decimal


def load(frames_path, port):
    """(client packets, server packets): client port → set of ns times."""
    cli, srv = defaultdict(set), defaultdict(set)
    for line in open(frames_path):
        f = line.split()
        if len(f) < 3:
            continue
        t = int(Decimal(f[0]) * 1000000000)
        if f[2] == port:
            cli[f[1]].add(t)
        elif f[1] == port:
            srv[f[2]].add(t)
    return cli, srv


def wrong(reqs, frames_path, port):
    """The first record (an export requests row) whose times are not packets
    of its own connection in the right direction, or None."""
    cli, srv = load(frames_path, port)
    for r in reqs:
        cport = r["client"].rsplit(":", 1)[1]
        a, d = int(r["arrival_ns"]), int(r["departure_ns"])
        if a not in cli[cport] or d not in srv[cport] or d < a:
            return r
    return None
