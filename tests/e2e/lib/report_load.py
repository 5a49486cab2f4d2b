# SPDX-License-Identifier: MIT
# report_load.py — a bounded, paced HTTP load for e2e_report_http_tshark.sh:
# three keep-alive clients fetch static files with 0-2 ms pauses (about a
# thousand short responses a second: enough to load the tier, few enough
# that tshark's microsecond truncation stays far below the tolerance) and one
# client fetches /slow/ every 400 ms. Usage: report_load.py PORT SECONDS SEED
# Prints "requests: N static: S slow: L" (what the clients got answered, an
# oracle for the request counts). A client that fails (an error status, a
# refused or dropped connection) makes the whole script exit 1: the threads
# report into `errors`, since sys.exit() in a thread ends only that thread.
import http.client
import random
import sys
import threading
import time

port, secs, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
end = time.monotonic() + secs
counts = {}
errors = []


def client(idx, slow):
    try:
        run_client(idx, slow)
    except Exception as e:  # noqa: BLE001 - any failure of a client fails the load
        errors.append("client %d: %r" % (idx, e))


def run_client(idx, slow):
    rng = random.Random(seed * 100 + idx)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    n = 0
    while time.monotonic() < end:
        if slow:
            path = "/slow/item/%d" % n
        else:
            path = "/index.html" if rng.random() < 0.5 else "/mid.txt"
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            errors.append("client %d: GET %s: status %d" % (idx, path, resp.status))
            return
        n += 1
        time.sleep(0.4 if slow else rng.uniform(0, 0.002))
    conn.close()
    counts[idx] = n


threads = [threading.Thread(target=client, args=(i, i == 3)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors:
    print("FAIL: " + e, file=sys.stderr)
if errors or len(counts) != len(threads):
    sys.exit(1)
print("requests: %d static: %d slow: %d" % (sum(counts.values()), sum(counts[i] for i in range(3)),
                                         counts[3]))
