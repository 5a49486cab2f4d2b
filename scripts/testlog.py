#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""testlog.py — judges one `meson test` run from its testlog.json, for scripts/test.sh.

    testlog.py --log BUILD/meson-logs/testlog.json --expected LIST --since T0
               [--label NAME] [--allow TEST]...

LIST is the output of `meson test --list` for the suites that were run (one
"project:suites / name" per line; other lines, such as ninja's, are ignored).
T0 is the time (seconds since the epoch) at which the run started.

Counted as a pass: a result OK (or EXPECTEDFAIL) of an expected test, started
at or after T0, that did not skip. Everything else is a failure, one per test
(a test never counts twice), each printed as "FAILED: LABEL: NAME (why)":
  - a missing log, or a log with no results (the run died before writing);
  - a line that is not JSON (a truncated log: meson was killed mid-write); its
    test is named when its name can still be read;
  - a result whose start time is before T0 (a stale log from an earlier run);
  - an expected test with no result, a result for a test not in LIST, a test
    with two results;
  - SKIP (exit status 77) and cmocka's skip() (which exits 0 but prints
    "[  SKIPPED ]"), unless the test is allowed to skip with --allow; an
    allowed test that passes is a pass, one that skips counts as neither;
  - any other result (FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, ...).
For each failed test with output, its last lines come first, each printed as
"TAIL: LABEL: NAME: LINE" (scripts/test.sh repeats them just above its last
line, where a log that shows only a run's head and tail still has them).
The last line printed is "RESULT <passed> <failed> <allowed skips>".
Exit status 0 when nothing failed, 1 otherwise, 2 on a usage error.
"""
import argparse
import json
import re
import sys

PASS_RESULTS = ("OK", "EXPECTEDFAIL")
CMOCKA_SKIP = "[  SKIPPED ]"
TAIL_LINES = 12  # of each failed test's output, repeated at the run's end
NAME_RE = re.compile(r'"name":\s*"((?:[^"\\]|\\.)*)"')


def short(name):
    """'tbneck:e2e+e2e-asan / e2e_nginx' -> 'e2e_nginx' (the name people type)."""
    return name.split(" / ", 1)[-1]


def read_expected(path):
    names = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            # meson prints "project:suite[+suite...] / name"; ninja's chatter is skipped.
            if re.match(r"^\S+:\S+ / \S+$", line):
                names.append(line)
    return names


def judge(log, expected, since, allow):
    """Returns (passed, failures [(name, why)], allowed_skips [name], tails
    {name: [last lines of the test's output]})."""
    failures = {}  # name -> why; a test fails once however many reasons it has
    anonymous = []  # problems that cannot be tied to a test
    allowed_skips = []
    passed = set()
    seen = {}
    outputs = {}  # name -> the test's stdout and stderr
    expected_set = set(expected)

    def fail(name, why):
        if name is None:
            anonymous.append(why)
        elif name not in failures:
            failures[name] = why
        passed.discard(name)

    try:
        f = open(log, encoding="utf-8", errors="replace")
    except OSError as e:
        anonymous.append(f"no test log {log}: {e.strerror}")
        f = None
    if f is not None:
        with f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            anonymous.append(f"empty test log {log}")
        for i, line in enumerate(lines, 1):
            try:
                r = json.loads(line)
                name, result = r["name"], r["result"]
                start = float(r["starttime"])
            except (ValueError, KeyError, TypeError):
                m = NAME_RE.search(line)
                who = m.group(1) if m else None
                fail(who, f"{log} line {i} is not a complete result (truncated log?)")
                continue
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                fail(name, "two results in one run")
                continue
            if name not in expected_set:
                fail(name, "a result for a test that `meson test --list` does not list")
                continue
            if start < since:
                fail(name, f"stale result (started {since - start:.0f} s before this run)")
                continue
            out = (r.get("stdout") or "") + (r.get("stderr") or "")
            outputs[name] = out
            skipped = result == "SKIP" or (result in PASS_RESULTS and CMOCKA_SKIP in out)
            if skipped:
                if short(name) in allow:
                    allowed_skips.append(name)
                else:
                    why = "skipped (exit 77)" if result == "SKIP" else "a cmocka test skipped"
                    last = [l for l in out.strip().split("\n") if l][-1:] or [""]
                    fail(name, f"{why}: {last[0][:160]}")
            elif result in PASS_RESULTS:
                if name not in failures:
                    passed.add(name)
            else:
                fail(name, result)
    for name in expected:
        if name not in seen and name not in failures:
            fail(name, "no result (not run, or the log was cut short)")
    out = sorted(failures.items()) + [(None, why) for why in anonymous]
    tails = {}
    for name in failures:
        lines = [l for l in outputs.get(name, "").split("\n") if l.strip()]
        if lines:
            tails[name] = lines[-TAIL_LINES:]
    return len(passed), out, allowed_skips, tails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--since", required=True, type=float)
    ap.add_argument("--label", default="")
    ap.add_argument("--allow", action="append", default=[])
    a = ap.parse_args()
    try:
        expected = read_expected(a.expected)
    except OSError as e:
        print(f"testlog: {a.expected}: {e.strerror}", file=sys.stderr)
        print("RESULT 0 1 0")
        return 1
    passed, failures, allowed, tails = judge(a.log, expected, a.since, set(a.allow))
    if not expected:
        failures.append((None, f"{a.expected} lists no test"))
    label = a.label + ": " if a.label else ""
    for name, lines in sorted(tails.items()):
        for line in lines:
            print(f"TAIL: {label}{short(name)}: {line[:300]}")
    for name, why in failures:
        print(f"FAILED: {label}{short(name) if name else '(log)'} ({why})")
    for name in allowed:
        print(f"ALLOWED SKIP: {label}{short(name)}")
    print(f"RESULT {passed} {len(failures)} {len(allowed)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
