#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_stack.sh — tbneck on a real nginx → Tomcat → MariaDB stack (scripts/stack/run.sh,
# tiers auto-discovered): the three tiers are found, every tier's request count matches
# what the servers counted themselves, Tomcat's long GC pauses sit inside its congestion
# episodes and its freeze episodes are GC pauses, and the plots are drawn.
set -euo pipefail
: "${TBNECK:?set by meson}" "${TB_SRCDIR:?set by meson}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (namespaces, capture)"; exit 77; }

out=$(mktemp -d /tmp/e2e-stack.XXXXXX)
ok=0
finish() { if [ "$ok" = 1 ]; then rm -rf "$out"; else echo "e2e_stack: outputs kept in $out" >&2; fi; }
trap finish EXIT

bash "$TB_SRCDIR/scripts/stack/run.sh" --out "$out" --discover --duration "${TB_STACK_SECONDS:-40}" \
    --tbneck "$TBNECK"

"$TBNECK" tiers --db "$out/stack.db" >"$out/tiers-again.txt"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
failed = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed.append(what)

names = dict(l.split() for l in open(os.path.join(out, "tier-names.txt")))
rows = [l.split() for l in open(os.path.join(out, "tier-counts.txt"))]
per_tier = {}
for tier, server, n in rows:
    per_tier[tier] = per_tier.get(tier, 0) + int(n)
counts = dict((k, int(v)) for k, v in (l.split() for l in open(os.path.join(out, "counts.txt"))))
tiers_out = open(os.path.join(out, "tiers-again.txt")).read()

# Discovery: one tier per server, named after the protocol (and port when not 80).
check(names == {"web": "http", "app": "http-8080", "db": "mysql"},
      f"discovered tiers http, http-8080, mysql: {names}")
check(len(per_tier) == 3, f"exactly three tiers carry requests: {sorted(per_tier)}")
for t in ("http", "http-8080", "mysql"):
    check(t in tiers_out.split(), f"'tbneck tiers' lists {t}")

def close(a, b, what):
    check(b > 1000 and abs(a - b) <= 0.005 * b, f"{what}: tbneck {a} vs {b} (within 0.5%)")

check(counts["app_errors"] == 0, f"webapp errors: {counts['app_errors']}")
close(per_tier.get(names["web"], 0), counts["nginx_requests"], "web tier vs nginx access log")
close(per_tier.get(names["app"], 0), counts["nginx_requests"], "tomcat tier vs nginx access log")
close(per_tier.get(names["app"], 0), counts["tomcat_requests"], "tomcat tier vs webapp's own count")
close(per_tier.get(names["db"], 0), counts["jdbc_queries"], "mysql tier vs JDBC query count")
close(per_tier.get(names["db"], 0), counts["mysql_questions"], "mysql tier vs MariaDB's Questions")

r = json.load(open(os.path.join(out, "events-report.json")))
print("events report:", json.dumps(r))
check(r["long_pauses"] >= 5, f"at least 5 GC pauses of 50 ms or more in the run: {r['long_pauses']}")
f = r["long_pauses_in_episodes_fraction"]
check(f is not None and f >= 0.9,
      f"GC pauses >= 50 ms inside a Tomcat congestion episode: {r['long_pauses_in_episodes']}"
      f"/{r['long_pauses']} >= 90%")
check(r["freeze_episodes"] >= 3, f"Tomcat has freeze episodes: {r['freeze_episodes']}")
f = r["freeze_with_pause_fraction"]
check(f is not None and f >= 0.8,
      f"Tomcat freeze episodes overlapping a GC pause: {r['freeze_with_pause']}"
      f"/{r['freeze_episodes']} >= 80%")

c = r["correlation"]
check(c is not None and c >= 0.5,
      f"GC running ratio and Tomcat load correlate per window (paper's Figure 10a): r = {c}")

for p in ["gc-load.png", "gc-load-12s.png"] + [f"report-{t}.png" for t in per_tier]:
    path = os.path.join(out, p)
    good = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n" \
        and os.path.getsize(path) > 2000
    check(good, f"plot {p} drawn")
sys.exit(1 if failed else 0)
PY
ok=1
