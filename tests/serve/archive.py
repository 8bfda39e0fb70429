#!/usr/bin/env python3
"""docker-py against `lis serve`'s archive endpoints with hostile and unusual archives
(issue 22): a sparse file declaring more than the writable budget, a gzip bomb, hard
links (inside the archive and out of it), owners kept, GET of sparse files streamed.
Usage: archive.py SOCKET IMAGE SERVER_PID [SCRATCH_DIR]. Prints one line per check, then
"N passed, M failed"; "info" lines carry figures."""
import gzip
import io
import os
import sys
import tarfile
import time

import docker

SOCK, IMG, PID = sys.argv[1], sys.argv[2], int(sys.argv[3])
SCRATCH = sys.argv[4] if len(sys.argv) > 4 else None
passed = failed = 0
GIB = 1 << 30


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok", name, flush=True)
    else:
        failed += 1
        print("FAIL", name, detail, flush=True)


def rss_kib():
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def sparse_member(tf, name, realsize, data=b"x" * 512, uid=0, gid=0):
    """A PAX GNU.sparse 1.0 member: realsize bytes of which only the last
    len(data) are data (what GNU tar and libarchive write for a sparse file)."""
    assert len(data) % 512 == 0
    mapblock = ("1\n%d\n%d\n" % (realsize - len(data), len(data))).encode()
    mapblock += b"\0" * (512 - len(mapblock))
    ti = tarfile.TarInfo("GNUSparseFile.0/" + name)
    ti.size = len(mapblock) + len(data)
    ti.uid, ti.gid = uid, gid
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": name, "GNU.sparse.realsize": str(realsize)}
    tf.addfile(ti, io.BytesIO(mapblock + data))


def tar_of(build, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        build(tf)
    return buf.getvalue()


def add_file(tf, name, data, uid=0, gid=0, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.uid, ti.gid, ti.mode = uid, gid, mode
    ti.mtime = 1700000000
    tf.addfile(ti, io.BytesIO(data))


def add_link(tf, name, target):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.LNKTYPE
    ti.linkname = target
    tf.addfile(ti)


class Zeros:
    """n bytes of zeros, read in pieces (a bomb is never held whole)."""

    def __init__(self, n):
        self.left = n

    def read(self, n=-1):
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def sh(ct, cmd):
    r = ct.exec_run(["sh", "-c", cmd])
    return r.exit_code, r.output.decode(errors="replace")


def put_status(ct, path, data):
    try:
        return 200 if ct.put_archive(path, data) else 0, ""
    except docker.errors.APIError as e:
        return e.status_code, str(e)


def scratch_files():
    if not SCRATCH or not os.path.isdir(SCRATCH):
        return 0
    return sum(len(f) for _, _, f in os.walk(SCRATCH))


c = docker.DockerClient(base_url="unix://" + SOCK, timeout=300)
ct = c.containers.run(IMG, command="sleep infinity", detach=True)
sh(ct, "mkdir -p /dst")

# --- a sparse file declaring 10 GB: past the 1 GiB budget, refused before a byte lands
t0 = time.time()
st, msg = put_status(ct, "/dst", tar_of(lambda tf: (add_file(tf, "before.txt", b"b"),
                                                    sparse_member(tf, "huge", 10 * GIB))))
print("info sparse 10 GB PUT answered in %.2f s" % (time.time() - t0), flush=True)
check("sparse 10 GB PUT -> 413", st == 413, (st, msg))
check("413 says what the budget has left", "writable budget" in msg, msg)
code, out = sh(ct, "ls -A /dst")
check("413 left nothing half-written", code == 0 and out == "", out)

# --- a sparse file within the budget stays sparse inside
st, msg = put_status(ct, "/dst", tar_of(lambda tf: sparse_member(tf, "holes", 100 << 20,
                                                                 b"y" * 4096)))
check("sparse 100 MB PUT -> 200", st == 200, (st, msg))
code, out = sh(ct, "stat -c '%s %b %B' /dst/holes && tail -c 4096 /dst/holes | tr -d y | wc -c")
f = out.split()
check("sparse PUT stays sparse (apparent 100 MiB, a few blocks)",
      code == 0 and len(f) == 4 and int(f[0]) == 100 << 20 and int(f[1]) * int(f[2]) < 1 << 20
      and f[3] == "0", out)
sh(ct, "rm -f /dst/holes")

# --- a gzip bomb: 8 x 200 MiB of zeros in a small .tar.gz; stops at the budget while
# decompressing, no scratch copy, nothing left
bomb = io.BytesIO()
with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=1) as gz:
    with tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tf:
        for i in range(8):
            ti = tarfile.TarInfo("z%d" % i)
            ti.size = 200 << 20

            tf.addfile(ti, Zeros(ti.size))
body = bomb.getvalue()
rss0 = rss_kib()
t0 = time.time()
st, msg = put_status(ct, "/dst", body)
print("info gzip bomb: %d bytes compressed, 1600 MiB inside: %d in %.2f s, server RSS %+d KiB: %s"
      % (len(body), st, time.time() - t0, rss_kib() - rss0, msg), flush=True)
check("gzip bomb -> 413", st == 413, (st, msg))
code, out = sh(ct, "ls -A /dst")
check("gzip bomb left nothing in the container", code == 0 and out == "", out)
check("gzip bomb left no scratch copy on the host", scratch_files() == 0, scratch_files())

# --- hard links: made, inside the archive; one to a file outside it refused
st, msg = put_status(ct, "/dst", tar_of(lambda tf: (add_file(tf, "d/a", b"linked\n"),
                                                    add_link(tf, "d/b", "d/a"))))
check("hard link PUT -> 200", st == 200, (st, msg))
code, out = sh(ct, "stat -c '%i %h' /dst/d/a /dst/d/b; cat /dst/d/b")
lines = out.split("\n")
check("the hard link is one file with 2 links", code == 0 and lines[0] == lines[1]
      and lines[0].endswith(" 2") and lines[2] == "linked", out)
st, msg = put_status(ct, "/dst", tar_of(lambda tf: (add_file(tf, "e/ok", b"x"),
                                                    add_link(tf, "e/pw", "../../etc/passwd"))))
check("hard link out of the archive refused", st == 500 and "link" in msg, (st, msg))
st, msg = put_status(ct, "/dst", tar_of(lambda tf: (add_file(tf, "f/ok", b"x"),
                                                    add_link(tf, "f/pw", "etc/passwd"))))
check("hard link to a file the archive did not write refused", st == 500, (st, msg))
code, out = sh(ct, "ls -A /dst/e /dst/f 2>&1; stat -c %h /etc/passwd")
check("refused archives wrote nothing; /etc/passwd untouched",
      "ok" not in out and out.strip().endswith("1"), out)

# --- owners kept (the sandbox has a full id map when the user has subordinate ids)
st, msg = put_status(ct, "/dst", tar_of(lambda tf: (add_file(tf, "own/f", b"o", 1042, 1043),
                                                    add_file(tf, "own/r", b"r", 0, 0))))
check("PUT with owners -> 200", st == 200, (st, msg))
code, out = sh(ct, "stat -c '%u:%g' /dst/own/f /dst/own/r")
full = "65535" in sh(ct, "cat /proc/self/uid_map")[1]
want = "1042:1043\n0:0\n" if full else "0:0\n0:0\n"
check("put_archive keeps the entry's uid/gid (full id map; else root)", out == want, (out, want))
if full:
    bits, _ = ct.get_archive("/dst/own/f")
    m = tarfile.open(fileobj=io.BytesIO(b"".join(bits))).getmembers()[0]
    check("get_archive gives the owner back", (m.uid, m.gid) == (1042, 1043), (m.uid, m.gid))

# --- GET of three sparse 1000 MB files: streamed, bounded memory, sparse
sh(ct, "mkdir -p /out && for i in 1 2 3; do truncate -s 1000M /out/sp$i; done; echo tail >> /out/sp3")
rss0 = rss_kib()
t0 = time.time()
bits, stat = ct.get_archive("/out")
raw = b"".join(bits)
print("info GET of 3 sparse 1000 MB files: %d bytes of tar in %.2f s, server RSS %+d KiB"
      % (len(raw), time.time() - t0, rss_kib() - rss0), flush=True)
members = {m.name: m for m in tarfile.open(fileobj=io.BytesIO(raw)).getmembers()}
check("GET layout", sorted(members) == ["out", "out/sp1", "out/sp2", "out/sp3"], sorted(members))
check("GET keeps the sizes", members["out/sp1"].size == 1000 << 20
      and members["out/sp3"].size == (1000 << 20) + 5, [(m.name, m.size) for m in members.values()])
check("GET sends holes as holes (PAX sparse, tar under 1 MB)", len(raw) < 1 << 20
      and members["out/sp1"].issparse(), len(raw))
tf = tarfile.open(fileobj=io.BytesIO(raw))
f = tf.extractfile("out/sp3")
f.seek((1000 << 20) - 2)
check("GET sparse data where it was", f.read() == b"\0\0tail\n")
check("GET did not grow the server by the files", rss_kib() - rss0 < 64 << 10, rss_kib() - rss0)

# --- HEAD and GET still follow dockerd for the usual cases
st_ = c.api.get_archive(ct.id, "/out/sp1")[1]
check("path stat of a file", st_["name"] == "sp1" and st_["size"] == 1000 << 20, st_)
try:
    ct.get_archive("/nonexistent")
    check("GET missing -> NotFound", False)
except docker.errors.NotFound:
    check("GET missing -> NotFound", True)

ct.remove(force=True)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
