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


def req(method, path, body=None, headers=None, prefix="/lis/v1/"):
    c = Conn()
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, prefix + path, body=body, headers=h)
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

# ---- pause, resume, stats ---------------------------------------------------------------------


def stats(i):
    st, _, d = jreq("GET", "sandboxes/%s/stats" % i)
    return d if st == 200 else {"status": st, "body": d}


def cpu_grows(i, base, secs=15):
    """polls until the sandbox's CPU time passes base (a busy loop runs)"""
    t0 = time.time()
    while time.time() - t0 < secs:
        d = stats(i)
        if d.get("cpu_seconds") is not None and d["cpu_seconds"] > base + 0.1:
            return d["cpu_seconds"]
        time.sleep(0.2)
    return None


d = stats(sid)
check("stats -> 200 with the sandbox's numbers", d.get("id") == sid and d["state"] == "running"
      and isinstance(d["cpu_seconds"], (int, float)) and d["cpu_seconds"] >= 0
      and d["memory_bytes"] >= 0 and d["pids"] >= 1 and d["age_seconds"] > 0
      and d["memory_limit_bytes"] == 256 << 20 and d["disk_bytes"] >= 0
      and "disk_limit_bytes" in d and d["limits"] in ("cgroup", "fallback"), d)
out, _, end, _ = run(sid, {"cmd": "sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $! > /tmp/busy.pid"})
c0 = cpu_grows(sid, d["cpu_seconds"])
check("a busy loop's CPU time shows in stats", c0 is not None, stats(sid))
st, _, d = jreq("POST", "sandboxes/%s/pause" % sid)
check("pause -> 200, state paused", st == 200 and d["id"] == sid and d["state"] == "paused", (st, d))
st, _, d = jreq("POST", "sandboxes/%s/pause" % sid)
check("pause again: a no-op, still paused", st == 200 and d["state"] == "paused", (st, d))
st, _, g = jreq("GET", "sandboxes/" + sid)
st2, _, lst = jreq("GET", "sandboxes")
check("get and list show paused", g["state"] == "paused"
      and [x["state"] for x in lst if x["id"] == sid] == ["paused"], (g, lst))
st, _, dj = req("GET", "containers/%s/json" % sid, prefix="/v1.41/")
check("the Docker side's inspect shows State.Paused", st == 200 and json.loads(dj)["State"]["Paused"] is True,
      (st, dj[:300]))
s1 = stats(sid)
time.sleep(1)
s2 = stats(sid)
check("paused: the CPU time does not grow (busy loop stopped)", s1["state"] == "paused"
      and s2["state"] == "paused" and abs(s2["cpu_seconds"] - s1["cpu_seconds"]) <= 0.02, (s1, s2))
st, _, d = jreq("POST", "sandboxes/%s/exec" % sid, {"cmd": "echo no"})
check("exec into a paused sandbox -> 409 with the runtime's one line", st == 409
      and "paused" in d["message"] and "\n" not in d["message"], (st, d))
st, _, data = req("GET", "sandboxes/%s/files?path=/work/dir/blob.bin" % sid)
check("files still read while paused", st == 200 and data == blob, st)
st, _, d = jreq("POST", "sandboxes/%s/resume" % sid)
check("resume -> 200, state running", st == 200 and d["state"] == "running", (st, d))
st, _, d = jreq("POST", "sandboxes/%s/resume" % sid)
check("resume again: a no-op", st == 200 and d["state"] == "running", (st, d))
check("resumed: the busy loop runs again", cpu_grows(sid, s2["cpu_seconds"]) is not None, stats(sid))
out, _, end, _ = run(sid, {"cmd": "kill $(cat /tmp/busy.pid); echo yes"})
check("exec works after resume", out == b"yes\n" and end["exit_code"] == 0, (out, end))
st, _, d = jreq("GET", "sandboxes/%s/pause" % sid)
check("GET pause -> 405", st == 405, (st, d))
st, _, d = jreq("POST", "sandboxes/nosuch/pause")
check("pause of a missing sandbox -> 404", st == 404, (st, d))

# ---- snapshots: files only --------------------------------------------------------------------
st, _, dimg = req("GET", "images/%s/json" % IMAGE, prefix="/v1.41/")  # the Docker side: its id
base_id = json.loads(dimg)["Id"] if st == 200 else None
out, _, end, _ = run(sid, {"cmd": "mkdir -p /work/snap && echo from-parent > /work/snap/a.txt && "
                                  "echo tmpdata > /tmp/t.txt && rm /etc/debian_version"})
check("snapshot set-up", end["exit_code"] == 0, (out, end))
st, _, snap = jreq("POST", "sandboxes/%s/snapshot" % sid, {"tag": "api-snap:v1"})
check("snapshot -> 201: id, tag, parent, depth, files, bytes, paused_ms",
      st == 201 and snap["id"].startswith("sha256:") and len(snap["id"]) == 71
      and snap["tag"] == "api-snap:v1" and snap["parent"] == base_id and snap["depth"] == 2
      and snap["files"] > 0 and snap["bytes"] >= len(blob) and snap["paused_ms"] >= 0
      and snap["existed"] is False, (st, snap, base_id))
st, _, again = jreq("POST", "sandboxes/%s/snapshot" % sid)
check("an unchanged sandbox snapshots to the same image (content-addressed)",
      st == 201 and again["id"] == snap["id"] and again["existed"] is True and again["tag"] is None,
      (st, again))
st, _, g = jreq("GET", "sandboxes/" + sid)
check("the parent runs on after its snapshot", g["state"] == "running", g)
st, _, sl = jreq("GET", "snapshots")
mine = [x for x in sl if x["id"] == snap["id"]] if st == 200 else []
check("snapshots lists it with its tag and parent", len(mine) == 1
      and mine[0]["tags"] == ["api-snap:v1"] and mine[0]["parent"] == base_id
      and mine[0]["created"] and mine[0]["size"] >= 0 and mine[0]["depth"] == 2
      and all(x["id"] != base_id for x in sl),
      (st, sl))
st, _, one = jreq("GET", "snapshots/api-snap:v1")
check("snapshots/{tag}", st == 200 and one["id"] == snap["id"], (st, one))
st, _, d = jreq("GET", "snapshots/" + IMAGE)
check("snapshots/{an image that is no snapshot} -> 404", st == 404, (st, d))
st, _, d = jreq("POST", "sandboxes/%s/snapshot" % sid, {"tag": 5})
check("snapshot with a bad tag -> 400", st == 400 and "tag" in d["message"], (st, d))
st, _, d = req("POST", "sandboxes/%s/snapshot" % sid, b"[1]")
check("snapshot with a body that is no object -> 400", st == 400, (st, d))
st, _, d = jreq("POST", "sandboxes/nosuch/snapshot", {})
check("snapshot of a missing sandbox -> 404", st == 404, (st, d))
made = []
for ref in ("api-snap:v1", snap["id"]):
    st, _, sb2 = jreq("POST", "sandboxes", {"image": ref})
    ok = st == 201
    if ok:
        made.append(sb2["id"])
    out, _, end, _ = run(sb2["id"], {"cmd": "cat /work/snap/a.txt /tmp/t.txt; test -e /etc/debian_version "
                                            "&& echo present; wc -c < /work/dir/blob.bin"}) if ok else (None, 0, 0, 0)
    check("create from the snapshot (%s) sees its files, /tmp and deletions" % ("tag" if ref == "api-snap:v1" else "id"),
          ok and sb2["image"] == ref and out == b"from-parent\ntmpdata\n%d\n" % len(blob), (st, sb2, out))
# DELETE /lis/v1/snapshots/{ref}: refused while a sandbox runs on it, then gone with its tags
out, _, end, _ = run(sid, {"cmd": "echo to-delete > /work/snap/del.txt"})
st, _, ds = jreq("POST", "sandboxes/%s/snapshot" % sid, {"tag": "api-del:v1"})
st2, _, on = jreq("POST", "sandboxes", {"image": "api-del:v1"}) if st == 201 else (0, 0, {})
st3, _, d = jreq("DELETE", "snapshots/api-del:v1")
check("delete of a snapshot a sandbox runs on -> 409", st == 201 and st2 == 201 and st3 == 409
      and on.get("id", "")[:12] in d["message"], (st, st2, st3, d))
if st2 == 201:
    jreq("DELETE", "sandboxes/" + on["id"])
st, _, d = jreq("DELETE", "snapshots/api-del:v1")
st2, _, g = jreq("GET", "snapshots/" + ds.get("id", "x"))
st3, _, d3 = jreq("DELETE", "snapshots/" + ds.get("id", "x"))
check("delete of a snapshot -> 200; then it is gone (404), by id too", st == 200
      and d.get("deleted") == ds.get("id") and st2 == 404 and st3 == 404, (st, d, st2, st3))
st, _, d = jreq("DELETE", "snapshots/" + IMAGE)
check("delete of an image that is no snapshot -> 404 (the image stays)", st == 404
      and jreq("GET", "snapshots")[0] == 200
      and req("GET", "images/%s/json" % IMAGE, prefix="/v1.41/")[0] == 200, (st, d))

# ---- fork -----------------------------------------------------------------------------------------------
fkey = {"Idempotency-Key": "fork-%d" % time.time_ns()}
st, _, fk = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 4}, fkey)
kids = [x for x in fk["sandboxes"] if "error" not in x] if st == 201 else []
check("fork count 4 -> 201: one snapshot, 4 sandboxes on it", st == 201
      and fk["snapshot"]["id"].startswith("sha256:") and fk["snapshot"]["parent"] == base_id
      and len(kids) == 4 and len({x["id"] for x in kids}) == 4
      and all(x["state"] == "running" and x["image"] == fk["snapshot"]["id"] for x in kids), (st, fk))
kid_ids = [x["id"] for x in kids]
made += kid_ids
reads = [run(k, {"cmd": "cat /work/snap/a.txt"})[0] for k in kid_ids]
check("every fork starts from the parent's files", reads == [b"from-parent\n"] * 4, reads)
if kid_ids:
    run(kid_ids[0], {"cmd": "echo fork0 > /work/snap/a.txt; echo mine > /work/snap/only0"})
    run(sid, {"cmd": "echo parent-later > /work/snap/a.txt"})
probe = {"cmd": "cat /work/snap/a.txt; test -e /work/snap/only0 && echo has-only0; true"}
reads = [run(k, probe)[0] for k in kid_ids]
pout = run(sid, probe)[0]
check("forks are independent: a write in one is seen by no other fork nor the parent",
      reads == [b"fork0\nhas-only0\n"] + [b"from-parent\n"] * 3 and pout == b"parent-later\n",
      (reads, pout))
st, h, fk2 = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 4}, fkey)
st3, _, lst = jreq("GET", "sandboxes")
check("a retried fork with the same Idempotency-Key returns the same set and makes none",
      st == 200 and h.get("Idempotent-Replayed") == "true"
      and [x.get("id") for x in fk2["sandboxes"]] == kid_ids
      and fk2["snapshot"]["id"] == fk["snapshot"]["id"] and len(lst) == 1 + len(made), (st, fk2, len(lst)))
for bad in (0, 65, "4", 1.5, -1):
    st, _, d = jreq("POST", "sandboxes/%s/fork" % sid, {"count": bad})
    check("fork with count %r -> 400" % (bad,), st == 400 and "count" in d["message"], (st, d))
st, _, d = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 1, "net": "moon"})
check("fork with a bad net -> 400", st == 400 and "net" in d["message"], (st, d))
st, _, d = jreq("POST", "sandboxes/nosuch/fork", {"count": 2})
check("fork of a missing sandbox -> 404", st == 404 and "no such sandbox" in d["message"], (st, d))
st, _, fk3 = jreq("POST", "sandboxes/%s/fork" % sid, {"memory": "128m", "env": {"FORKVAR": "x"},
                                                      "tag": "api-fork:v1"})
k3 = fk3["sandboxes"][0] if st == 201 else {}
if k3.get("id"):
    made.append(k3["id"])
out = run(k3["id"], {"cmd": "echo $GREETING $FORKVAR; cat /work/snap/a.txt"})[0] if k3.get("id") else None
check("fork overrides (count defaults to 1): memory, env over the parent's, a tagged snapshot",
      st == 201 and len(fk3["sandboxes"]) == 1 and k3["memory"] == 128 << 20
      and fk3["snapshot"]["tag"] == "api-fork:v1" and fk3["snapshot"]["depth"] == 2
      and out == b"hello x\nparent-later\n", (st, fk3, out))
if kid_ids:
    out = run(kid_ids[1], {"cmd": "echo again > /work/snap/b.txt"})
    st, _, gs = jreq("POST", "sandboxes/%s/snapshot" % kid_ids[1])
    check("a fork's snapshot is a layer over the fork's snapshot (depth 3)",
          st == 201 and gs["parent"] == fk["snapshot"]["id"] and gs["depth"] == 3, (st, gs))
    st, _, gsb = jreq("POST", "sandboxes", {"image": gs["id"]})
    if st == 201:
        made.append(gsb["id"])
    out = run(gsb["id"], {"cmd": "cat /work/snap/a.txt /work/snap/b.txt"})[0] if st == 201 else None
    check("a sandbox on a chain of three layers sees them all", out == b"from-parent\nagain\n", (st, out))
if len(kid_ids) > 2:
    st, _, d = jreq("POST", "sandboxes/%s/pause" % kid_ids[2])
    check("a fork pauses on its own", st == 200 and d["state"] == "paused"
          and jreq("GET", "sandboxes/" + kid_ids[3])[2]["state"] == "running", (st, d))
for i in made:  # a paused one among them
    st, _, _ = req("DELETE", "sandboxes/" + i)
    if st != 204:
        check("delete " + i, False, st)
st, _, lst = jreq("GET", "sandboxes")
check("the forks and snapshot sandboxes are deleted", [x["id"] for x in lst] == [sid], lst)
st, h, fk4 = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 1}, fkey)
if st == 201:
    for x in fk4["sandboxes"]:
        req("DELETE", "sandboxes/" + x.get("id", "none"))
check("a fork's key is forgotten once its sandboxes are deleted", st == 201, (st, fk4))

# a fork's untagged snapshot goes with its last sandbox; a tagged one stays, and
# one that another snapshot is made on stays until that one is deleted
def snap_status(ref):
    return jreq("GET", "snapshots/" + ref)[0]


check("a tagged fork snapshot stays after its sandboxes", snap_status("api-fork:v1") == 200)
if kid_ids:
    check("a fork snapshot with a snapshot made on it stays", snap_status(fk["snapshot"]["id"]) == 200)
    st, _, d = jreq("DELETE", "snapshots/" + gs["id"])
    check("... until that snapshot is deleted", st == 200 and snap_status(fk["snapshot"]["id"]) == 404,
          (st, d))
run(sid, {"cmd": "echo five > /work/snap/five"})  # new files: a snapshot not in the store yet
st, _, fk5 = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 2})
k5 = [x["id"] for x in fk5.get("sandboxes", []) if x.get("id")]
check("fork count 2 (untagged, new)", st == 201 and len(k5) == 2 and not fk5["snapshot"]["existed"], fk5)
left = []
if len(k5) == 2:
    req("DELETE", "sandboxes/" + k5[0])
    check("a fork snapshot stays while one of its sandboxes runs",
          snap_status(fk5["snapshot"]["id"]) == 200)
    req("DELETE", "sandboxes/" + k5[1])
    check("an untagged fork snapshot is removed with its last sandbox",
          snap_status(fk5["snapshot"]["id"]) == 404)
    run(sid, {"cmd": "echo nine > /work/snap/nine"})
    fa = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 1})[2]
    fb = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 1})[2]  # nothing changed since
    ka = [x["id"] for x in fa.get("sandboxes", []) if x.get("id")]
    kb = [x["id"] for x in fb.get("sandboxes", []) if x.get("id")]
    check("a second fork of an unchanged sandbox is on the same snapshot (existed)",
          len(ka) == 1 and len(kb) == 1 and fa["snapshot"]["id"] == fb["snapshot"]["id"]
          and fb["snapshot"]["existed"], (fa, fb))
    if ka and kb:
        req("DELETE", "sandboxes/" + ka[0])
        check("... which stays while the second fork's sandbox runs",
              snap_status(fa["snapshot"]["id"]) == 200
              and run(kb[0], {"cmd": "cat /work/snap/nine"})[0] == b"nine\n")
        req("DELETE", "sandboxes/" + kb[0])
        check("... and goes with it", snap_status(fa["snapshot"]["id"]) == 404)
    run(sid, {"cmd": "echo seven > /work/snap/seven"})
    st, _, fk7 = jreq("POST", "sandboxes/%s/fork" % sid, {"count": 1})
    k7 = [x["id"] for x in fk7.get("sandboxes", []) if x.get("id")]
    st8, _, fk8 = jreq("POST", "sandboxes/%s/fork" % k7[0], {"count": 1}) if k7 else (0, 0, {})
    left = [x["id"] for x in fk8.get("sandboxes", []) if x.get("id")]
    if k7:
        req("DELETE", "sandboxes/" + k7[0])
    check("a fork snapshot stays while a fork of its fork runs (a snapshot made on it)",
          st == 201 and st8 == 201 and len(left) == 1 and snap_status(fk7["snapshot"]["id"]) == 200,
          (fk7, fk8))
    # left running: lis serve removes both snapshots when it stops (the C test looks)
    if left:
        print("info leftover fork snapshots %s %s" % (fk7["snapshot"]["id"], fk8["snapshot"]["id"]))

# a sandbox's timeout: the server deletes it when it ends
st, _, d = jreq("POST", "sandboxes", {"image": IMAGE, "timeout": "soon"})
check("create with a bad timeout -> 400", st == 400 and "timeout" in d["message"], d)
st, _, g = jreq("GET", "sandboxes/" + sid)
check("no timeout by default", st == 200 and g.get("end_at", 1) is None, g)
st, _, t1 = jreq("POST", "sandboxes", {"image": IMAGE, "timeout": 300})
check("create with a timeout names its end", st == 201 and (t1.get("end_at") or "").endswith("Z"), t1)
st, _, d = jreq("POST", "sandboxes/%s/timeout" % t1.get("id"), {"timeout": -3})
check("a negative timeout -> 400", st == 400 and "timeout" in d["message"], d)
st, _, d = jreq("POST", "sandboxes/%s/timeout" % t1.get("id"), {})
check("a timeout body without timeout -> 400", st == 400, d)
st, _, d = jreq("POST", "sandboxes/%s/timeout" % t1.get("id"), {"timeout": 1})
check("set timeout -> 200 with the new end", st == 200 and d.get("end_at"), d)
for _ in range(300):
    st, _, d = jreq("GET", "sandboxes/%s" % t1.get("id"))
    if st == 404:
        break
    time.sleep(0.1)
check("a sandbox whose timeout ended is deleted", st == 404, d)

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
check("list is empty again (but the fork left for the server's exit)",
      st == 200 and [x["id"] for x in lst] == left, lst)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
