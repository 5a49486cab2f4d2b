#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# links_score.sh DB TRUTH.requests.csv WORKDIR — table links (written by
# whatif or capture --whatif-inputs) as an export (id = row id, parent = the
# parent's row id) scored against the simulator's true parents by
# link_score.py at 99%. Exit status: link_score.py's.
set -euo pipefail
db=$1 truth=$2 work=$3
sqlite3 -csv -header "$db" "
  SELECT t.name AS tier, s.addr AS server, e.addr || ':' || r.client_port AS client,
         r.arrival_ns, r.departure_ns, r.rowid AS id, l.parent AS parent
  FROM requests r JOIN tiers t ON t.id = r.tier_id JOIN servers s ON s.id = r.server_id
  LEFT JOIN endpoints e ON e.id = r.client_id LEFT JOIN links l ON l.request = r.rowid" \
    >"$work/links.csv"
python3 "$(dirname "$0")/link_score.py" "$truth" "$work/links.csv" 0.99
