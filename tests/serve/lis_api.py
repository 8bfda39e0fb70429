"""Checks lis serve's native API (/lis/v1/, docs/api.md) over its unix socket with
http.client only. Usage: lis_api.py SOCKET IMAGE. Prints "ok ..."/"FAIL ..." lines
and "N passed, M failed"; exits non-zero when a check failed."""
import base64
import http.client
import json
import socket
import sys
import threading
import time

SOCK, IMAGE = sys.argv[1], sys.argv[2]
passed = failed = 0


class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=120)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(SOCK)


def req(method, path, body=None, headers=None):
    c = Conn()
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, "/lis/v1/" + path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.headers, data


def jreq(method, path, body=None, headers=None):
    st, h, data = req(method, path, body, headers)
    return st, h, json.loads(data) if data else None


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok", name)
    else:
        failed += 1
        print("FAIL", name, detail)


def run(sid, body):
    """exec: (stdout bytes, stderr bytes, exit event, event names in order)."""
    st, h, data = req("POST", "sandboxes/%s/exec" % sid, body)
    if st != 200:
        return None, None, {"status": st, "body": data.decode()}, []
    out, err, end, names = b"", b"", None, []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        names.append(lines["event"])
        d = json.loads(lines["data"])
        if lines["event"] == "stdout":
            out += base64.b64decode(d["data"])
        elif lines["event"] == "stderr":
            err += base64.b64decode(d["data"])
        elif lines["event"] == "exit":
            end = d
    return out, err, end, names


st, _, d = jreq("GET", "health")
check("health answers ok", st == 200 and d["status"] == "ok" and d["api"] == "v1", d)
st, _, d = jreq("GET", "capacity")
check("capacity is a count", st == 200 and isinstance(d["available"], int) and d["available"] >= 0
      and d["memory_per_sandbox"] > 0, d)

st, _, d = jreq("POST", "sandboxes", {"memory": "64m"})
check("create without image -> 400 with a message", st == 400 and "image" in d["message"], d)
st, _, d = jreq("POST", "sandboxes", {"image": IMAGE, "net": "moon"})
check("create with a bad net -> 400", st == 400 and "net" in d["message"], d)
st, _, d = jreq("POST", "sandboxes", {"image": IMAGE, "memory": "lots"})
check("create with a bad memory -> 400", st == 400 and "memory" in d["message"], d)
st, _, d = req("POST", "sandboxes", b"{not json")
check("create with bad JSON -> 400", st == 400, d)
st, _, d = jreq("POST", "sandboxes", {"image": "no-such-image:v9"})
check("create with a missing image -> 404", st == 404 and "No such image" in d["message"], d)

# idempotency: a retried create makes no second sandbox
key = {"Idempotency-Key": "key-%d" % time.time_ns()}
body = {"image": IMAGE, "memory": "256m", "net": "none", "env": {"GREETING": "hello"},
        "name": "api-sb"}
st, _, sb = jreq("POST", "sandboxes", body, key)
check("create -> 201 with an id", st == 201 and len(sb["id"]) == 64 and sb["state"] == "running", sb)
sid = sb["id"]
st, h, again = jreq("POST", "sandboxes", body, key)
check("a retried create with the same Idempotency-Key returns the same sandbox",
      st == 200 and again["id"] == sid and h.get("Idempotent-Replayed") == "true", (st, again))
st, _, lst = jreq("GET", "sandboxes")
check("list holds it once", st == 200 and [s["id"] for s in lst].count(sid) == 1
      and sum(s["name"] == "api-sb" for s in lst) == 1, lst)
st, _, d = jreq("POST", "sandboxes", body)
check("a second create with the same name (no key) -> 409", st == 409, d)
st, _, g = jreq("GET", "sandboxes/" + sid[:12])
check("get by id prefix", st == 200 and g["id"] == sid and g["memory"] == 256 << 20
      and g["net"] == "none" and g["image"] == IMAGE, g)
st, _, g = jreq("GET", "sandboxes/api-sb")
check("get by name", st == 200 and g["id"] == sid, g)

out, err, end, names = run(sid, {"cmd": "echo hi; echo err >&2; exit 3"})
check("exec streams stdout and stderr and ends with the exit code",
      out == b"hi\n" and err == b"err\n" and end["exit_code"] == 3 and names[-1] == "exit",
      (out, err, end))
out, err, end, _ = run(sid, {"cmd": ["sh", "-c", "echo $GREETING $EXTRA; pwd"],
                              "env": {"EXTRA": "world"}, "cwd": "/tmp"})
check("exec argv: sandbox env, request env and cwd", out == b"hello world\n/tmp\n"
      and end["exit_code"] == 0, (out, err, end))
out, err, end, _ = run(sid, {"cmd": "printf '\\000\\377\\001'"})
check("exec output is binary-safe", out == b"\x00\xff\x01", out)
out, err, end, _ = run(sid, {"cmd": "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo done >&2"})
check("exec: 3 MB of stdout arrive whole", len(out) == 3000001 and out.count(b"a") == 3000000
      and err == b"done\n" and end["exit_code"] == 0, (len(out), err, end))
out, err, end, _ = run(sid, {"cmd": "sleep 30", "timeout": 1})
check("exec timeout kills the command", end["timed_out"] is True and end["exit_code"] != 0, end)
out, err, end, _ = run(sid, {"cmd": ["/no/such/binary"]})
check("exec of a missing binary -> exit 127 with an error", end["exit_code"] == 127
      and "error" in end, end)
st, _, d = jreq("POST", "sandboxes/%s/exec" % sid, {"cmd": []})
check("exec with an empty cmd -> 400", st == 400 and "cmd" in d["message"], d)
st, _, d = jreq("POST", "sandboxes/%s/exec" % sid, {"cmd": "true", "timeout": -1})
check("exec with a negative timeout -> 400", st == 400, d)

blob = bytes(range(256)) * 100
st, _, d = jreq("PUT", "sandboxes/%s/files?path=/work/dir/blob.bin" % sid, blob)
check("files write (parents made)", st == 200 and d["size"] == len(blob), d)
st, _, data = req("GET", "sandboxes/%s/files?path=/work/dir/blob.bin" % sid)
check("files read gives the bytes back", st == 200 and data == blob, len(data))
out, _, end, _ = run(sid, {"cmd": "wc -c < /work/dir/blob.bin"})
check("a written file is seen by commands", out.strip() == str(len(blob)).encode(), out)
st, _, d = jreq("GET", "sandboxes/%s/files/stat?path=/work/dir/blob.bin" % sid)
check("files stat", st == 200 and d["type"] == "file" and d["size"] == len(blob), d)
st, _, d = jreq("GET", "sandboxes/%s/files/stat?path=/work/dir" % sid)
check("files stat of a dir", st == 200 and d["type"] == "dir", d)
run(sid, {"cmd": "mkdir /work/dir/sub; ln -s blob.bin /work/dir/link"})
st, _, d = jreq("GET", "sandboxes/%s/files/list?path=/work/dir" % sid)
ents = {e["name"]: e for e in d["entries"]} if st == 200 else {}
check("files list", st == 200 and set(ents) == {"blob.bin", "sub", "link"}
      and ents["blob.bin"]["type"] == "file" and ents["blob.bin"]["size"] == len(blob)
      and ents["sub"]["type"] == "dir" and ents["link"]["type"] == "symlink"
      and ents["sub"]["path"] == "/work/dir/sub", d)
st, _, d = jreq("GET", "sandboxes/%s/files?path=/work/missing" % sid)
check("files read of a missing file -> 404", st == 404 and d["message"], d)
st, _, d = jreq("GET", "sandboxes/%s/files/list?path=/work/dir/blob.bin" % sid)
check("files list of a file -> 400", st == 400 and "not a directory" in d["message"], d)
st, _, d = jreq("GET", "sandboxes/%s/files?path=relative" % sid)
check("files with a relative path -> 400", st == 400, d)
st, _, d = jreq("GET", "sandboxes/%s/files/stat?path=/../../etc/shadow" % sid)
check("files stay inside the sandbox", st == 404 or (st == 200 and d["type"] != "file") or st == 400, d)

for op in ("snapshot", "fork", "pause", "resume"):
    st, _, d = jreq("POST", "sandboxes/%s/%s" % (sid, op), {})
    check("%s -> 501 not yet" % op, st == 501 and "not yet" in d["message"], d)
st, _, d = jreq("GET", "nothing-here")
check("unknown endpoint -> JSON 404", st == 404 and d["message"], d)
c = Conn()
c.request("GET", "/lis/v2/health")
r = c.getresponse()
d = json.loads(r.read())
check("unknown API version -> 404 naming v1", r.status == 404 and "v1" in d["message"], d)
c.close()

# concurrent creates with one key: one sandbox, every answer names it or asks to retry
key2 = {"Idempotency-Key": "race-%d" % time.time_ns()}
answers = []


def racer():
    answers.append(jreq("POST", "sandboxes", {"image": IMAGE}, key2))


threads = [threading.Thread(target=racer) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
ids = {d["id"] for st, _, d in answers if st in (200, 201)}
st, _, lst = jreq("GET", "sandboxes")
check("concurrent creates with one Idempotency-Key make one sandbox",
      len(answers) == 4 and len(ids) == 1 and all(st in (200, 201, 409) for st, _, _ in answers)
      and sum(st == 201 for st, _, _ in answers) == 1 and len(lst) == 2, (answers, lst))
for i in ids:
    req("DELETE", "sandboxes/" + i)

# a delete while a command runs ends its stream with an exit event
result = {}


def long_exec():
    result["r"] = run(sid, {"cmd": "echo started; sleep 60"})


t = threading.Thread(target=long_exec)
t.start()
time.sleep(1.5)
st, _, _ = req("DELETE", "sandboxes/" + sid)
check("delete -> 204", st == 204, st)
t.join(60)
out, err, end, _ = result.get("r", (None, None, None, None))
check("delete ends a running exec's stream with an exit event",
      not t.is_alive() and out == b"started\n" and end and end["exit_code"] == 137
      and "deleted" in end.get("error", ""), (out, end))
st, _, d = jreq("GET", "sandboxes/" + sid)
check("get after delete -> 404", st == 404 and "no such sandbox" in d["message"], d)
st, _, d = jreq("POST", "sandboxes/%s/exec" % sid, {"cmd": "true"})
check("exec after delete -> 404", st == 404, d)
st, _, lst = jreq("GET", "sandboxes")
check("list is empty again", st == 200 and lst == [], lst)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
