#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mutate.sh — the mutation check: breaks a documented claim of tbneck with a
# one-line change, one at a time, runs the tests that ought to notice, and
# prints a table (mutation -> tests that failed). Every mutation must make at
# least one test fail; a mutation that no longer applies (the code moved) or
# does not build is a failure of the check too, so the table stays honest as
# the code changes. Run by hand before a release (not by scripts/test.sh): it
# takes 10-20 minutes. docs/testing.md holds the last table.
#
#   scripts/mutate.sh [--slow] [--no-baseline] [--keep] [--list] [NAME...]
#
# The tree (tracked and untracked, not ignored files) is copied to a scratch
# folder and built there (-Dwerror=true); the working tree is never touched.
# First every test named in the table runs unmutated (the baseline: a test
# that fails already cannot vouch for anything); then each mutation is
# applied (its text must occur exactly once), built, its tests run and judged
# by scripts/testlog.py (a skip is a failure), and the file restored.
# --slow adds the long tests (e2e_stack, about 2 minutes a run); NAME... runs
# only those mutations; --keep leaves the scratch folder. Exit status 0 when
# every mutation was caught, 1 otherwise, 2 on a usage error.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$root" "$@" <<'PY'
import os, shutil, subprocess, sys, tempfile, time

root = sys.argv[1]
args = sys.argv[2:]

# name, claim, file, text, replacement, tests, slow tests
# The text is matched literally and must occur exactly once in the file.
MUTATIONS = [
    ("live-episodes-off", "live episode events are published while they happen",
     "cli/capture_live.c",
     "    tb_web_publish_episode(L->web, tier_name(L, tier), ep, ongoing);",
     "    (void)L; (void)ep; (void)ongoing; (void)tier;",
     ["e2e_live_veth", "test_stream", "test_web_live"], []),
    ("stored-never-reused", "a stored analysis is reused by the next report",
     "analysis/analyze.c",
     "    if (o->recompute || o->service_file || o->calibrate || !p->nwin)\n        return false;",
     "    if (1 || o->recompute || o->service_file || o->calibrate || !p->nwin)\n"
     "        return false;",
     ["e2e_report_sim", "test_report_pipeline", "test_events_cli"], []),
    ("gc-all-in-episode", "events report counts the GC pauses inside episodes",
     "cli/cmd_events.c",
     "            in = overlaps(ev[i].start_ns, ev[i].end_ns, res.ep[e].start_ns, res.ep[e].end_ns);",
     "            in = true;",
     ["test_events_cli"], ["e2e_stack"]),
    ("no-id-folding", "id-like URL path segments become {id} in classes",
     "capture/proto/fingerprint.c",
     "    return n > 0 && ((all & HC_DIGIT) ||",
     "    return false && n > 0 && ((all & HC_DIGIT) ||",
     ["test_fingerprint", "test_engine", "e2e_sim_truth", "e2e_nginx"], []),
    ("drop-every-100th", "every request is reported",
     "capture/engine.c",
     "    e->cb(e->ud, &r);",
     "    if (e->st.requests % 100) e->cb(e->ud, &r);",
     ["test_engine", "pcap_capture", "e2e_report_http_tshark", "e2e_mariadb_midstream",
      "e2e_sim_truth"], []),
    ("nstar-x1.05", "N* within a few percent of the congestion point",
     "correlate/nstar.c",
     "    double thr = tb_nstar_threshold(res);",
     "    res->n_star *= 1.05; double thr = tb_nstar_threshold(res);",
     ["test_nstar", "test_nstar_exact", "test_episodes", "e2e_report_sim"], []),
    ("nstar-x1.3", "N* within 10% of the congestion point",
     "correlate/nstar.c",
     "    double thr = tb_nstar_threshold(res);",
     "    res->n_star *= 1.3; double thr = tb_nstar_threshold(res);",
     ["test_nstar", "test_nstar_exact", "test_episodes", "e2e_report_sim", "e2e_web_api"], []),
    ("generic-departure-late", "a departure is the time of a captured response packet",
     "capture/proto/generic.c",
     "            g->resp_live = true;\n            g->departure_ns = ts;",
     "            g->resp_live = true;\n            g->departure_ns = ts + 1;",
     ["fuzz_generic", "test_generic"], []),
    ("runner-skip-passes", "the runner counts a skip as a failure",
     "scripts/testlog.py",
     '            skipped = result == "SKIP" or (result in PASS_RESULTS and CMOCKA_SKIP in out)',
     '            skipped = False',
     ["test_runner"], []),
    ("runner-keeps-stale-log", "the runner never counts an earlier run's log",
     "scripts/testrun.sh",
     '    rm -f "$logdir"/testlog*.json "$logdir"/testlog*.txt "$list"',
     '    rm -f "$list"',
     ["test_runner"], []),
    # Not a change to the code: the environment loses nginx.
    ("nginx-not-on-path", "a test whose server is missing fails the run",
     None, None, None, ["e2e_nginx", "e2e_report_http_tshark"], []),
]


def usage(msg):
    print("mutate.sh: " + msg, file=sys.stderr)
    print("usage: scripts/mutate.sh [--slow] [--no-baseline] [--keep] [--list] [NAME...]",
          file=sys.stderr)
    sys.exit(2)


slow = baseline = keep = listing = False
baseline = True
names = []
for a in args:
    if a == "--slow":
        slow = True
    elif a == "--no-baseline":
        baseline = False
    elif a == "--keep":
        keep = True
    elif a == "--list":
        listing = True
    elif a.startswith("-"):
        usage("unknown option " + a)
    else:
        names.append(a)
known = {m[0] for m in MUTATIONS}
for n in names:
    if n not in known:
        usage("no mutation named %s (--list shows them)" % n)
todo = [m for m in MUTATIONS if not names or m[0] in names]
if listing:
    for m in todo:
        print("%-24s %s" % (m[0], m[1]))
    sys.exit(0)


def tests_of(m):
    return m[5] + (m[6] if slow else [])


work = tempfile.mkdtemp(prefix="tb-mutate.")
src, build = os.path.join(work, "src"), os.path.join(work, "build")
os.makedirs(src)
files = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                       check=True, capture_output=True).stdout.split(b"\0")
for f in files:
    if not f:
        continue
    p = f.decode()
    s = os.path.join(root, p)
    if os.path.isfile(s):
        os.makedirs(os.path.dirname(os.path.join(src, p)), exist_ok=True)
        shutil.copy2(s, os.path.join(src, p))
log = open(os.path.join(work, "mutate.log"), "w")
print("mutate: scratch tree %s (log: %s)" % (work, log.name), flush=True)


def run(cmd, env=None, timeout=3600):
    log.write("$ %s\n" % " ".join(cmd))
    log.flush()
    return subprocess.run(["nice"] + cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                          timeout=timeout).returncode


def ninja():
    return run(["ninja", "-C", build]) == 0


def judge(tests, env=None):
    """Runs the tests; returns (failed names, passed names) as testlog.py judges them."""
    logdir = os.path.join(build, "meson-logs")
    for f in ("testlog.json", "testlog.txt"):
        try:
            os.unlink(os.path.join(logdir, f))
        except FileNotFoundError:
            pass
    lst = os.path.join(work, "expected.txt")
    with open(lst, "w") as out:
        subprocess.run(["meson", "test", "-C", build, "--no-rebuild", "--list"] + tests,
                       stdout=out, stderr=log, env=env)
    since = time.time()
    run(["meson", "test", "-C", build, "--no-rebuild", "--print-errorlogs"] + tests, env=env)
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "testlog.py"), "--log",
                        os.path.join(logdir, "testlog.json"), "--expected", lst, "--since",
                        repr(since)], capture_output=True, text=True)
    log.write(r.stdout)
    failed = set()
    for line in r.stdout.splitlines():
        if line.startswith("FAILED: "):
            failed.add(line[8:].split(" (", 1)[0])
    if not any(l.startswith("RESULT ") for l in r.stdout.splitlines()):
        failed.add("(testlog.py gave no result)")
    return sorted(failed), sorted(t for t in tests if t not in failed)


def no_nginx_env():
    """PATH without nginx: every other program of PATH's folders, linked."""
    d = os.path.join(work, "path-without-nginx")
    os.makedirs(d, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(":"):
        if not os.path.isdir(folder):
            continue
        for n in os.listdir(folder):
            t = os.path.join(d, n)
            if n != "nginx" and not os.path.lexists(t):
                os.symlink(os.path.join(folder, n), t)
    env = dict(os.environ)
    env["PATH"] = d
    return env


if run(["meson", "setup", build, src, "-Dwerror=true"]) != 0 or not ninja():
    print("mutate: the unmutated tree does not build (see %s)" % log.name)
    sys.exit(1)

broken = set()
if baseline:
    every = sorted({t for m in todo for t in tests_of(m)})
    print("baseline: %d tests unmutated ..." % len(every), flush=True)
    broken, _ = judge(every)
    broken = set(broken)
    print("baseline: %s" % ("all pass" if not broken else "FAILING ALREADY: " + " ".join(
        sorted(broken))), flush=True)

rows = []
for name, claim, path, old, new, fast, slow_tests in todo:
    tests = fast + (slow_tests if slow else [])
    print("%s ..." % name, flush=True)
    env = None
    restore = None
    if path is None:
        env = no_nginx_env()
        verdict = None
    else:
        target = os.path.join(src, path)
        text = open(target).read()
        n = text.count(old)
        if n != 1:
            rows.append((name, claim, tests, [], "does not apply (text found %d times)" % n))
            continue
        restore = text
        open(target, "w").write(text.replace(old, new))
        if not ninja():
            open(target, "w").write(restore)
            ninja()
            rows.append((name, claim, tests, [], "does not build"))
            continue
    failed, _ = judge(tests, env)
    if restore is not None:
        open(os.path.join(src, path), "w").write(restore)
        if not ninja():
            print("mutate: the tree does not build after restoring %s" % path)
            sys.exit(1)
    real = [t for t in failed if t not in broken]
    rows.append((name, claim, tests, failed, "caught" if real else "SURVIVED"))
    print("  %s: %s" % (rows[-1][4], " ".join(failed) if failed else "no test failed"),
          flush=True)

print()
print("| mutation | claim broken | tests run | tests that failed | verdict |")
print("|---|---|---|---|---|")
for name, claim, tests, failed, verdict in rows:
    print("| %s | %s | %s | %s | %s |" % (name, claim, ", ".join(tests),
                                          ", ".join(failed) if failed else "none", verdict))
bad = [r for r in rows if r[4] != "caught"]
print()
print("%d mutations, %d caught, %d not" % (len(rows), len(rows) - len(bad), len(bad)))
if not keep:
    log.close()
    shutil.rmtree(work, ignore_errors=True)
else:
    print("kept %s" % work)
sys.exit(1 if bad else 0)
PY
