#!/usr/bin/env python3
"""stamp-proxy.py UPSTREAM_PORT LOG: an HTTP proxy in front of a model endpoint on 127.0.0.1
that appends one JSON line per request to LOG: {"t": arrival time, "way", "group", "step"},
where way and group come from a marker RL-WAY-GNNN in the first user message and step is the
number of assistant messages in the request (0: an episode's first model call). Prints its
port on the first line. For the benchmarks (scripts/bench-rl.sh, bench-scale.sh)."""
import http.client, json, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
upstream, log = int(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
MARK = re.compile(r"RL-([a-z]+)-G(\d+)")

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        t = time.time()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            req = json.loads(body)
            msgs = req.get("messages") or []
            user = next((m.get("content") for m in msgs if m.get("role") == "user"), "") or ""
            m = MARK.search(user if isinstance(user, str) else json.dumps(user))
            rec = {"t": t, "way": m.group(1) if m else None, "group": int(m.group(2)) if m else None,
                   "step": sum(1 for x in msgs if x.get("role") == "assistant")}
        except (ValueError, AttributeError):
            rec = {"t": t, "way": None}
        with lock:
            log.write(json.dumps(rec) + "\n")
        c = http.client.HTTPConnection("127.0.0.1", upstream, timeout=600)
        c.request("POST", self.path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        self.send_response(r.status)
        self.send_header("Content-Type", r.getheader("Content-Type") or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

ThreadingHTTPServer.request_queue_size = 4096
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
