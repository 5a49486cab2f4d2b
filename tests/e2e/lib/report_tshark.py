# SPDX-License-Identifier: MIT
# report_tshark.py — compares tbneck's per-window load of one HTTP tier with
# tshark's `-z io,stat,W,"LOAD(http.time)..."` on the same capture.
#
# What tshark 4.0 computes (ui/cli/tap-iostat.c, CALC_TYPE_LOAD): rows start at
# the file's first packet (t0) and are W long. Each frame carrying http.time
# (the frame that completes an HTTP response) adds, in microseconds truncated,
# (http.time mod W) to the row holding that frame and W to each of the
# floor(http.time / W) rows before it; a row prints sum / W with six decimals,
# truncated. So a response is credited as if it ended at its row's end: the
# sum over rows is exact, but a response that crosses a row boundary is
# partly credited to the wrong row. tbneck computes the exact overlap.
#
# Checks (each failure prints both sides):
#  1. tbneck's windows equal the exact load computed here from tbneck's own
#     request records (relative error < 1e-9);
#  2. tshark's rows equal tshark's algorithm applied to tbneck's request
#     records (|diff| <= 2 us per response in the row / W + 1e-6): the
#     arrivals and departures tbneck extracted are the times tshark sees;
#  3. tbneck's load vs tshark's row by row: |diff| <= the misattribution bound
#     (the part of boundary-crossing responses that tshark may move into or
#     out of the row) + the microsecond truncation; rows without a crossing
#     response must agree to the truncation alone;
#  4. the totals over all compared rows agree within the truncation.
#
# Usage: report_tshark.py TSHARK_OUT REQUESTS_CSV WINDOWS_CSV T0_NS WIDTH_NS
import csv
import re
import sys

NORESP = 1 << 3


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_tshark(path):
    rows = []
    pat = re.compile(r"^\|\s*([0-9.]+)\s*<>\s*([0-9.]+|Dur)\s*\|\s*([0-9]+)\.([0-9]{6})\s*\|")
    for line in open(path):
        m = pat.match(line)
        if m:
            rows.append(int(m.group(3)) * 1000000 + int(m.group(4)))  # value in 1e-6
    return rows


def main():
    tshark_out, req_csv, win_csv, t0, width = sys.argv[1:6]
    t0, width = int(t0), int(width)
    w_us = width // 1000
    assert width % 1000 == 0 and t0 % width == 0, "t0 must lie on a window boundary"

    ts = read_tshark(tshark_out)
    if len(ts) < 10:
        fail("tshark printed %d rows; expected at least 10" % len(ts))
    # The last row covers a partial interval (divided by its own length).
    ts = ts[:-1]

    reqs = []
    for r in csv.DictReader(open(req_csv)):
        a, d, fl = int(r["arrival_ns"]), int(r["departure_ns"]), int(r["flags"])
        reqs.append((a, d, fl))
    if len(reqs) < 200:
        fail("only %d requests exported; the load generator did not run?" % len(reqs))

    wins = {}
    for r in csv.DictReader(open(win_csv)):
        s = int(r["start_ns"])
        if int(r["width_ns"]) != width:
            fail("window width %s, expected %d" % (r["width_ns"], width))
        if r["server"] != "*":
            fail("server column %r, expected '*'" % r["server"])
        wins[s] = float(r["load"])

    nrows = len(ts)
    exact = [0] * (nrows + 1)    # ns of busy time per row
    model = [0] * (nrows + 1)    # tshark's algorithm, us
    cross = [0] * (nrows + 1)    # bound of misattributed us
    ncomp = [0] * (nrows + 1)    # responses credited to the row
    for a, d, fl in reqs:
        # 1. exact overlap with each row
        for k in range(max(0, (a - t0) // width), min(nrows, (d - t0) // width + 1)):
            lo, hi = t0 + k * width, t0 + (k + 1) * width
            ov = min(d, hi) - max(a, lo)
            if ov > 0:
                exact[k] += ov
        if fl & NORESP:
            # tshark never credits a response that did not come.
            for k in range(max(0, (a - t0) // width), min(nrows, (d - t0) // width + 1)):
                cross[k] += min(d - a, width) // 1000 + 1
            continue
        # 2. tshark's crediting: frame time rounded to us, http.time truncated
        rel = d - t0
        rel_us = (rel // 1000000000) * 1000000 + ((rel % 1000000000) + 500) // 1000
        dur_us = (d - a) // 1000
        row = rel_us // w_us
        if row >= nrows + 1:
            continue
        k, left = row, dur_us
        model[k] += left % w_us
        ncomp[k] += 1
        left -= left % w_us
        while left > 0 and k > 0:
            k -= 1
            model[k] += w_us
            ncomp[k] += 1
            left -= w_us
        # 3. a response crossing a row boundary may move up to its length
        #    (at most W) into or out of every row it touches
        first, last = (a - t0) // width, (d - t0) // width
        if first != last or row != last:
            for k in range(max(0, first), min(nrows, max(last, row) + 1)):
                cross[k] += min(d - a, width) // 1000 + 1

    worst1 = 0.0
    for k in range(nrows):
        s = t0 + k * width
        mine = wins.get(s, 0.0)
        ex = exact[k] / width
        err = abs(mine - ex) / max(1e-12, abs(ex)) if ex else abs(mine)
        worst1 = max(worst1, err)
        if err > 1e-9:
            fail("window %d (start %d): tbneck load %.17g, exact from its requests %.17g"
                 % (k, s, mine, ex))
    print("check 1: %d windows equal the exact load of tbneck's requests (worst rel err %.2g)"
          % (nrows, worst1))

    worst2 = 0.0
    for k in range(1, nrows):  # row 0 can receive tshark's wrap-around credit
        want = model[k] * 1000000 // w_us  # tshark truncates to 1e-6
        tol = 2 * ncomp[k] * 1000000 // w_us + 1
        diff = abs(ts[k] - want)
        worst2 = max(worst2, diff / 1e6)
        if diff > tol:
            fail("row %d: tshark LOAD %.6f, tshark's algorithm on tbneck's requests %.6f "
                 "(tolerance %.6f)" % (k, ts[k] / 1e6, want / 1e6, tol / 1e6))
    print("check 2: tshark's %d rows equal its algorithm on tbneck's requests (worst %.6f)"
          % (nrows - 1, worst2))

    same = 0
    worst3 = 0.0
    for k in range(1, nrows):
        mine = wins.get(t0 + k * width, 0.0)
        tol = (cross[k] + 2 * ncomp[k]) / w_us + 2e-6
        diff = abs(mine - ts[k] / 1e6)
        worst3 = max(worst3, diff)
        if diff > tol:
            fail("row %d (start %d): tbneck load %.6f, tshark LOAD %.6f, |diff| %.6f > "
                 "tolerance %.6f" % (k, t0 + k * width, mine, ts[k] / 1e6, diff, tol))
        if tol < 0.01:
            same += 1
    print("check 3: tbneck vs tshark row by row within the stated tolerance (worst |diff| "
          "%.6f; %d of %d rows with a tolerance below 0.01)" % (worst3, same, nrows - 1))
    # Most rows must hold only short responses, or the comparison says little.
    if same * 2 < nrows - 1:
        fail("only %d of %d rows have a tolerance below 0.01: the comparison is too loose"
             % (same, nrows - 1))

    tot_mine = sum(wins.get(t0 + k * width, 0.0) for k in range(1, nrows))
    tot_ts = sum(ts[k] for k in range(1, nrows)) / 1e6
    tot_n = sum(ncomp[k] for k in range(1, nrows))
    # Responses crossing the edges of the compared rows are split differently.
    edge = (cross[1] + cross[nrows - 1]) / w_us
    tol = 2 * tot_n / w_us + edge + 1e-4
    if abs(tot_mine - tot_ts) > tol:
        fail("total load over rows 1..%d: tbneck %.6f, tshark %.6f (tolerance %.6f)"
             % (nrows - 1, tot_mine, tot_ts, tol))
    print("check 4: totals tbneck %.6f, tshark %.6f (tolerance %.6f)" % (tot_mine, tot_ts, tol))


main()
