#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# rule_agree.py — for e2e_rule_agree.sh: the congestion rule of DESIGN.md
# ("Congested window", "Episode", "Freeze episodes") written out here, away
# from tbneck's code, and every view of tbneck held to it.
#
#   rule_agree.py offline DIR TIER...
#       DIR holds, per tier T: report-T.json (report --format json),
#       windows-T.csv (export windows), scatter-T.json and episodes-T.json
#       (the API), and sse.txt (the event stream of `serve` while the reports
#       were stored), requests.csv (export requests: the calls each tier's
#       machines sent, for the stall rule's calls in flight, computed here).
#       Threshold, congested windows and episodes must be the rule's, and
#       the same in the report, the API and the stream.
#   rule_agree.py live SSE
#       the stream of a live capture: each window congested exactly when its
#       load reaches the threshold of the analysis last announced for its
#       tier; each closed episode a maximal run of congested windows, of the
#       kind the announced rule gives, with its throughput; an episode open
#       when a re-estimate changed the work unit is converted as the stream
#       does, by the factor that analysis announces ("rescale").
#   rule_agree.py live SSE JSONL
#       the same, and the capture's JSON lines (--format jsonl) announce the
#       same changes of work unit, in the same order, as the stream.
import csv
import json
import sys
import time

FREEZE_RUN = 2          # consecutive frozen windows that make a freeze
FREEZE_MIN_EXPECTED = 5.0
# A stall (correlate.h "Stalled", v0.3): load >= 2, calls out < half the
# window, normalized throughput < 15% of the promise (the curve at the load
# when a plateau is known, else at load 1), which is >= 10 completions; or
# (v0.4, a server that calls other tiers) load - calls_load >= 2 (its
# requests outside calls) and throughput < 15% of self_tp (1 s / the work
# unit: one request's own work), which is >= 10 completions.
STALL_MIN_LOAD = 2.0
STALL_MAX_CALLS_BUSY = 0.5
STALL_FRAC = 0.15
STALL_MIN_EXPECTED = 10.0


def fail(msg):
    sys.exit("FAIL: " + msg)


def sse_events(path):
    """(event, data) in order."""
    out, ev = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: ") and ev:
            out.append((ev, json.loads(line[6:])))
            ev = None
    return out


def curve(load, slope, tp_max):
    if slope is None or tp_max is None:
        return None
    return min(slope * load, tp_max)


def frozen(load, tp, dur_ns, r):
    c = curve(load, r["slope"], r["tp_max"])
    if c is None:
        return False
    return tp < r["freeze_frac"] * c and c * dur_ns / 1e9 / r["ubar"] >= FREEZE_MIN_EXPECTED


def stalled(w, r):
    if w["load"] < STALL_MIN_LOAD or w["calls_busy"] >= STALL_MAX_CALLS_BUSY:
        return False
    per = w["width_ns"] / 1e9 / r["ubar"]
    if r["slope"] is not None:
        promise = curve(w["load"], r["slope"], r["tp_max"]) if r["tp_max"] is not None \
            else r["slope"]
        if promise * per >= STALL_MIN_EXPECTED and w["norm_throughput"] < STALL_FRAC * promise:
            return True
    st = r.get("self_tp")
    return (st is not None and w["load"] - w["calls_load"] >= STALL_MIN_LOAD
            and st * per >= STALL_MIN_EXPECTED and w["norm_throughput"] < STALL_FRAC * st)


def self_tp(work_unit_ns, wins):
    """One request's own work, units/s, for a series that calls others."""
    if not work_unit_ns or not any(w["calls_busy"] > 0 for w in wins):
        return None
    return 1e9 / work_unit_ns


def episodes(wins, cong, rules, fac=None):
    """Maximal runs of consecutive windows each congested or stalled. wins:
    dicts with start_ns, width_ns, load, norm_throughput, calls_busy;
    rules[i]: the rule in force at window i (a run's kind uses the rule in
    force when it closes, i.e. at the window after it, or the last one);
    fac[i]: the change of work unit announced between windows i-1 and i
    (live: new units per completion over old; none: 1): the throughput summed
    so far of a run open across it is multiplied by it, the windows streamed
    before it being in the old units (analysis/stream.c rescale_recent).
    Freeze: a stalled window, or FREEZE_RUN consecutive frozen windows not
    waiting on calls, or (not waiting on average, two windows or more) the
    run's means frozen.
    Returns (episodes, open_at_end, in_episode flags)."""
    eps, i, n = [], 0, len(wins)
    stall = [stalled(w, r) for w, r in zip(wins, rules)]
    inep = [c or st for c, st in zip(cong, stall)]
    while i < n:
        if not inep[i]:
            i += 1
            continue
        j = i
        while (j + 1 < n and inep[j + 1]
               and wins[j + 1]["start_ns"] == wins[j]["start_ns"] + wins[j]["width_ns"]):
            j += 1
        run = longest = 0
        peak = sl = st = sc = 0.0
        moved = False
        for k in range(i, j + 1):
            w = wins[k]
            if fac is not None and k > i:
                st *= fac[k]
                moved |= fac[k] != 1.0
            peak = max(peak, w["load"])
            sl += w["load"]
            st += w["norm_throughput"]
            sc += w["calls_busy"]
            fr = frozen(w["load"], w["norm_throughput"], w["width_ns"], rules[k])
            run = run + 1 if fr and w["calls_busy"] < STALL_MAX_CALLS_BUSY else 0
            longest = max(longest, run)
        # A change announced before the window that closes the run came while
        # it was open too.
        if fac is not None and j + 1 < n:
            st *= fac[j + 1]
            moved |= fac[j + 1] != 1.0
        start = wins[i]["start_ns"]
        end = wins[j]["start_ns"] + wins[j]["width_ns"]
        m, t = sl / (j - i + 1), st / (j - i + 1)
        waits = sc / (j - i + 1) >= STALL_MAX_CALLS_BUSY
        rc = rules[j + 1] if j + 1 < n else rules[j]
        kind = "freeze" if (any(stall[i:j + 1]) or longest >= FREEZE_RUN
                            or (not waits and j > i and frozen(m, t, end - start, rc))) \
            else "saturated"
        eps.append({"start_ns": start, "end_ns": end, "peak_load": peak, "mean_load": m,
                    "throughput": t, "kind": kind, "first": i, "last": j, "moved": moved})
        i = j + 1
    return eps, bool(n and inep[-1]), inep


def ip_of(addr):
    """The address part of 'ip:port' or '[ip6]:port'."""
    a = addr.rsplit(":", 1)[0]
    return a[1:-1] if a.startswith("[") else a


def calls_busy(reqcsv, tier, wins, server=None):
    """Per window of the tier (or of one of its servers, 'ip:port'), the
    fraction of it during which a request of another tier sent from one of
    the tier's servers' machines (its client's address is a server's; with
    `server`, that server's) was in flight, and their mean number in flight
    (calls_load), from `export requests`: (busy, load) pairs."""
    rows = list(csv.DictReader(open(reqcsv)))
    width = wins[0]["width_ns"] if wins else 1  # consecutive windows from w0 on
    w0 = wins[0]["start_ns"] if wins else 0
    ips = {ip_of(r["server"]) for r in rows if r["tier"] == tier} if server is None \
        else {ip_of(server)}
    iv = sorted((int(r["arrival_ns"]), int(r["departure_ns"])) for r in rows
                if r["tier"] != tier and ip_of(r["client"]) in ips
                and int(r["departure_ns"]) >= int(r["arrival_ns"]))
    merged, by_win = [], {}
    for a, b in iv:
        for k in range((a - w0) // width, (b - w0) // width + 1):
            lo = w0 + k * width
            ov = min(b, lo + width) - max(a, lo)
            if ov > 0:
                by_win[lo] = by_win.get(lo, 0) + ov
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, k = [], 0
    for w in wins:
        lo, hi = w["start_ns"], w["start_ns"] + w["width_ns"]
        while k < len(merged) and merged[k][1] <= lo:
            k += 1
        busy, q = 0, k
        while q < len(merged) and merged[q][0] < hi:
            busy += min(hi, merged[q][1]) - max(lo, merged[q][0])
            q += 1
        out.append((busy / w["width_ns"], by_win.get(lo, 0) / w["width_ns"]))
    return out


def same_episodes(what, got, want):
    if len(got) != len(want):
        fail("%s: %d episodes, the rule gives %d" % (what, len(got), len(want)))
    for g, w in zip(got, want):
        for k in ("start_ns", "end_ns", "kind"):
            if g[k] != w[k]:
                fail("%s: episode %s: %s = %r, the rule gives %r" % (what, w["start_ns"], k, g[k],
                                                                     w[k]))
        for k in ("peak_load", "mean_load", "throughput"):
            if abs(g[k] - w[k]) > 1e-9 * max(1.0, abs(w[k])):
                fail("%s: episode %s: %s = %r, the rule gives %r" % (what, w["start_ns"], k, g[k],
                                                                     w[k]))


def offline(d, tiers):
    sse = sse_events(d + "/sse.txt")
    tot_cong = tot_freeze = tot_sat = tot_stall = 0
    fit_only = False
    for t in tiers:
        rep = json.load(open("%s/report-%s.json" % (d, t)))
        with open("%s/windows-%s.csv" % (d, t)) as f:
            wins = [{"start_ns": int(r["start_ns"]), "width_ns": int(r["width_ns"]),
                     "load": float(r["load"]), "completions": int(r["completions"]),
                     "work_units": float(r["work_units"]),
                     "norm_throughput": float(r["norm_throughput"])}
                    for r in csv.DictReader(f) if r["server"] == "*"]
        if not wins:
            fail("%s: no windows exported" % t)
        for w, (b, cl) in zip(wins, calls_busy(d + "/requests.csv", t, wins)):
            w["calls_busy"], w["calls_load"] = b, cl
        # The threshold: the intervention N*, else the fit's knee.
        thr = rep["n_star"] if rep["n_star"] is not None else rep["n_star_fit"]
        if rep["threshold"] != thr:
            fail("%s: report threshold %r, the rule gives %r" % (t, rep["threshold"], thr))
        fit_only |= rep["n_star"] is None and thr is not None
        units = sum(w["work_units"] for w in wins)
        comps = sum(w["completions"] for w in wins)
        rule = {"slope": rep["slope"], "tp_max": rep["tp_max"], "freeze_frac": 0.3,
                "ubar": units / comps if units > 0 and comps > 0 else 1.0,
                "self_tp": self_tp(rep["work_unit_ns"], wins)}
        cong = [thr is not None and w["load"] >= thr for w in wins]
        want, _, inep = episodes(wins, cong, [rule] * len(wins))
        nstall = sum(e and not c for e, c in zip(inep, cong))
        tot_stall += nstall
        ncong = sum(cong)
        if rep["congested_fraction"] != ncong / len(wins):
            fail("%s: report congested_fraction %r, the rule gives %d/%d" %
                 (t, rep["congested_fraction"], ncong, len(wins)))
        same_episodes(t + ": report", rep["episodes"], want)
        # Each server's episodes in the report, by its own rule and calls.
        for sv in rep.get("servers", []):
            with open("%s/windows-%s-%s.csv" % (d, t, sv["server"])) as f:
                allw = list(csv.DictReader(f))
            sw_ = [{"start_ns": int(r["start_ns"]), "width_ns": int(r["width_ns"]),
                    "load": float(r["load"]), "completions": int(r["completions"]),
                    "work_units": float(r["work_units"]),
                    "norm_throughput": float(r["norm_throughput"])}
                   for r in allw if r["server"] == sv["server"]]
            for w, (b, cl) in zip(sw_, calls_busy(d + "/requests.csv", t, sw_, sv["server"])):
                w["calls_busy"], w["calls_load"] = b, cl
            sthr = sv["n_star"] if sv["n_star"] is not None else sv["n_star_fit"]
            su = sum(w["work_units"] for w in sw_)
            sc_ = sum(w["completions"] for w in sw_)
            srule = {"slope": sv["slope"], "tp_max": sv["tp_max"], "freeze_frac": 0.3,
                     "ubar": su / sc_ if su > 0 and sc_ > 0 else 1.0,
                     "self_tp": self_tp(sv["work_unit_ns"], sw_)}
            scong = [sthr is not None and w["load"] >= sthr for w in sw_]
            swant, _, sinep = episodes(sw_, scong, [srule] * len(sw_))
            sst = sum(e and not c for e, c in zip(sinep, scong))
            tot_stall += sst
            same_episodes("%s %s: report" % (t, sv["server"]), sv["episodes"], swant)
            print("ok: %-10s %s: %d windows stalled below the threshold, %d episodes (%d freeze):"
                  " the report's are the rule's" %
                  (t, sv["server"], sst, len(swant),
                   sum(e["kind"] == "freeze" for e in swant)))
        # The API: the same threshold, windows, congested column, episodes.
        sc = json.load(open("%s/scatter-%s.json" % (d, t)))
        if sc["threshold"] != thr:
            fail("%s: /api/scatter threshold %r, the report's %r" % (t, sc["threshold"], thr))
        if sc["start_ns"] != [w["start_ns"] for w in wins]:
            fail("%s: /api/scatter windows differ from export windows" % t)
        if sc["congested"] != [int(c) for c in cong]:
            bad = [i for i, (a, b) in enumerate(zip(sc["congested"], cong)) if a != b]
            fail("%s: /api/scatter congested differs from the rule at windows %s" % (t, bad[:5]))
        same_episodes(t + ": /api/episodes", json.load(open("%s/episodes-%s.json" % (d, t)))
                      ["episodes"], want)
        # The stream of the polled database.
        sw = [e for ev, e in sse if ev == "window" and e["tier"] == t]
        by_start = {w["start_ns"]: c for w, c in zip(wins, cong)}
        if len(sw) != len(wins) or any(by_start.get(e["start_ns"]) != e["congested"] for e in sw):
            fail("%s: stream: %d windows, the congested flags of %d differ from the rule" %
                 (t, len(sw), sum(by_start.get(e["start_ns"]) != e["congested"] for e in sw)))
        sa = [e for ev, e in sse if ev == "analysis" and e["tier"] == t]
        if thr is not None and (not sa or sa[-1]["threshold"] != thr):
            fail("%s: stream: analysis threshold %r, the report's %r" %
                 (t, sa[-1]["threshold"] if sa else None, thr))
        same_episodes(t + ": stream", [e for ev, e in sse if ev == "episode" and e["tier"] == t],
                      want)
        nf = sum(e["kind"] == "freeze" for e in want)
        print("ok: %-10s threshold %.4f%s, %d of %d windows congested, %d stalled below it, "
              "%d episodes (%d freeze): report, API and stream agree with the rule" %
              (t, thr if thr is not None else float("nan"),
               " (the fit's: N* undetermined)" if rep["n_star"] is None else "", ncong, len(wins),
               nstall, len(want), nf))
        tot_cong += ncong
        tot_freeze += nf
        tot_sat += len(want) - nf
    if not (tot_cong and tot_freeze and tot_sat and fit_only and tot_stall):
        fail("the data did not exercise the rule: %d congested windows, %d stalled below the "
             "threshold, %d freeze and %d saturated episodes, a tier with only the fit's N*: %s" %
             (tot_cong, tot_stall, tot_freeze, tot_sat, fit_only))


def same_rescales(ev, jsonl):
    """The changes of work unit of the JSON lines' analyses are the stream's."""
    lines = [json.loads(l) for l in open(jsonl, encoding="utf-8")]
    got = [(d["tier"], d["rescale"]["factor"], d["rescale"]["from_ns"]) for d in lines
           if d["event"] == "analysis" and d["rescale"] is not None]
    want = [(e["tier"], e["rescale"]["factor"], e["rescale"]["from_ns"]) for k, e in ev
            if k == "analysis" and e["rescale"] is not None]
    if got != want or not want:
        fail("live: the JSON lines announce %d changes of work unit, the stream %d: %s / %s" %
             (len(got), len(want), got[:3], want[:3]))
    for d in lines:
        if d["event"] == "analysis" and d["rescale"] is not None:
            r = d["rescale"]
            iso = "%s.%09dZ" % (time.strftime("%Y-%m-%dT%H:%M:%S",
                                               time.gmtime(r["from_ns"] // 10**9)),
                                r["from_ns"] % 10**9)
            if r["from"] != iso:
                fail("live: JSON lines rescale from %r, from_ns %d is %s" %
                     (r["from"], r["from_ns"], iso))
    print("ok: live JSON lines: the same %d changes of work unit as the stream" % len(got))


def live(path, jsonl=None):
    ev = sse_events(path)
    if jsonl:
        same_rescales(ev, jsonl)
    tiers = sorted({e["tier"] for k, e in ev if k == "window"})
    tot_cong = tot_closed = 0
    for t in tiers:
        rule = {"threshold": None, "slope": None, "tp_max": None, "freeze_frac": 0.3, "ubar": 1}
        wins, cong, rules, closed, opened, fac = [], [], [], [], [], []
        pending = 1.0  # changes of unit announced since the last window
        nfac = 0
        for k, e in ev:
            if e.get("tier") != t:
                continue
            if k == "analysis":
                rule = {"threshold": e["threshold"], "slope": e["slope"], "tp_max": e["tp_max"],
                        "freeze_frac": e["freeze_frac"], "ubar": e["units_per_completion"],
                        "self_tp": e["self_tp"]}
                rs = e["rescale"]
                if rs is not None:
                    nxt = wins[-1]["start_ns"] + wins[-1]["width_ns"] if wins else None
                    if nxt is not None and rs["from_ns"] != nxt:
                        fail("live %s: rescale from %d, the next window starts at %d" %
                             (t, rs["from_ns"], nxt))
                    pending *= rs["factor"]
                    nfac += 1
            elif k == "window":
                c = rule["threshold"] is not None and e["load"] >= rule["threshold"]
                if e["congested"] != c:
                    fail("live %s: window %d: load %r, threshold %r, congested %r" %
                         (t, e["start_ns"], e["load"], rule["threshold"], e["congested"]))
                wins.append(e)
                cong.append(c)
                rules.append(rule)
                fac.append(pending)
                pending = 1.0
            elif k == "episode":
                (opened if e["ongoing"] else closed).append(e)
        want, still_open, inep = episodes(wins, cong, rules, fac)
        if still_open:
            want = want[:-1]
        moved = sum(1 for w in want if w["moved"])
        same_episodes("live " + t, closed, want)
        starts = [e["start_ns"] for e in want] + ([wins[-1]["start_ns"]] if still_open else [])
        if still_open:
            i = len(wins) - 1
            while i > 0 and inep[i - 1] and wins[i]["start_ns"] == wins[i - 1]["start_ns"] + \
                    wins[i - 1]["width_ns"]:
                i -= 1
            starts[-1] = wins[i]["start_ns"]
        if [e["start_ns"] for e in opened] != starts:
            fail("live %s: episodes opened at %s, the rule opens them at %s" %
                 ([e["start_ns"] for e in opened][:5], starts[:5]))
        print("ok: live %-10s %d windows, %d congested, %d episodes closed: as the announced "
              "rule gives (%d open across a change of work unit, converted by the announced "
              "factor; %d changes announced)" % (t, len(wins), sum(cong), len(closed), moved, nfac))
        tot_cong += sum(cong)
        tot_closed += len(closed)
    # Since the knee test, the live re-estimates of this short run show no
    # knee (nothing congested); its pauses are episodes by the stall rule.
    if not tiers or not tot_closed:
        fail("live stream: %d tiers, %d congested windows, %d closed episodes: nothing to check"
             % (len(tiers), tot_cong, tot_closed))


if __name__ == "__main__":
    if sys.argv[1] == "offline":
        offline(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "live":
        live(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        fail("rule_agree.py: unknown command " + sys.argv[1])
