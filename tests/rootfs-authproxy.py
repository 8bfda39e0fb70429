#!/usr/bin/env python3
"""A bearer-token front for a real registry, for the pull tests.

    rootfs-authproxy.py UPSTREAM_PORT

Listens on 127.0.0.1 (a free port, printed on stdout), answers /v2/ requests
without a valid token with 401 and a Bearer challenge (realm = its own /token),
hands out an anonymous token per scope on /token, and forwards authorised GET
and HEAD requests to the registry on 127.0.0.1:UPSTREAM_PORT. /stats says how
many tokens were issued and how many requests were refused."""
import http.client
import os
import http.server
import json
import sys
import urllib.parse

UPSTREAM = int(sys.argv[1])
STATS = {"tokens": 0, "challenged": 0, "forwarded": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        port = self.server.server_address[1]
        if url.path == "/stats":
            return self.reply(200, json.dumps(STATS).encode())
        if url.path == "/token":
            q = urllib.parse.parse_qs(url.query)
            if q.get("service") != ["lis-test"] or not q.get("scope"):
                return self.reply(400, b"service and scope required")
            STATS["tokens"] += 1
            token = "anon-" + q["scope"][0].replace(":", "-").replace("/", "_")
            return self.reply(200, json.dumps({"token": token}).encode(),
                              [("Content-Type", "application/json")])
        auth = self.headers.get("Authorization", "")
        parts = url.path.split("/")
        # /v2/<name...>/(manifests|blobs)/<ref>
        name = "/".join(parts[2:-2]) if len(parts) > 4 else ""
        want = "Bearer anon-" + ("repository-%s-pull" % name.replace("/", "_")) if name else None
        if url.path != "/v2/" and (not want or auth != want):
            STATS["challenged"] += 1
            scope = "repository:%s:pull" % name
            chal = 'Bearer realm="http://127.0.0.1:%d/token",service="lis-test",scope="%s"' % (
                port, scope)
            return self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                              [("WWW-Authenticate", chal), ("Content-Type", "application/json")])
        STATS["forwarded"] += 1
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
        conn.request(self.command, self.path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        keep = [(k, v) for k, v in resp.getheaders()
                if k.lower() in ("content-type", "docker-content-digest", "location")]
        self.reply(resp.status, body, keep)
        conn.close()

    do_GET = handle_any
    do_HEAD = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
# one write, then stdout is done: the test closes its end after reading the line
os.write(1, b"%d\n" % server.server_address[1])
os.close(1)
server.serve_forever()
