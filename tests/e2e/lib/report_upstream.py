# SPDX-License-Identifier: MIT
# report_upstream.py — a slow HTTP/1.1 upstream for e2e_report_http_tshark.sh:
# each GET sleeps 5-120 ms (so responses span 50 ms windows) and answers a
# body of random length. Usage: report_upstream.py PORT SEED
import http.server
import random
import socketserver
import sys
import time

rng = random.Random(int(sys.argv[2]))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        time.sleep(rng.uniform(0.005, 0.12))
        body = b"x" * rng.randint(10, 3000)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # the client went away when the load generator stopped

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # connections reset at the end of the run are expected


Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
