#!/usr/bin/env python3
"""serve.py DIR [--big MB] - test fixtures for tests/test_net.c and scripts/bench-net.sh.

Builds in DIR: hello.txt, a 1 MiB file, optionally big.bin (MB MiB), a tiny
flat apt repository (apt/: one package built by hand, Packages, Release) and
a PEP 503 simple index with one wheel (simple/lisdemo/). Then serves DIR on
127.0.0.1 with a threading HTTP server and prints the port on stdout.
Only the standard library; no network beyond 127.0.0.1."""
import gzip, hashlib, http.server, io, os, sys, tarfile, time, zipfile


def ar_member(name, data):
    hdr = b"%-16s%-12d%-6d%-6d%-8s%-10d`\n" % (name.encode(), int(time.time()), 0, 0, b"100644", len(data))
    return hdr + data + (b"\n" if len(data) % 2 else b"")


def tar_gz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = int(time.time())
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_deb(path):
    control = (b"Package: lis-demo\nVersion: 1.0\nArchitecture: all\n"
               b"Maintainer: lis tests <lis@localhost>\nDescription: lis proxy test package\n")
    ctl = tar_gz([("./control", control, 0o644)])
    data = tar_gz([("./usr/share/lis-demo/hello", b"hello from a deb\n", 0o644)])
    deb = b"!<arch>\n" + ar_member("debian-binary", b"2.0\n") + \
        ar_member("control.tar.gz", ctl) + ar_member("data.tar.gz", data)
    with open(path, "wb") as f:
        f.write(deb)
    return control, deb


def make_apt(root):
    os.makedirs(root, exist_ok=True)
    control, deb = make_deb(os.path.join(root, "lis-demo_1.0_all.deb"))
    pkgs = control.rstrip(b"\n") + b"\nFilename: ./lis-demo_1.0_all.deb\nSize: %d\nSHA256: %s\n\n" % (
        len(deb), hashlib.sha256(deb).hexdigest().encode())
    with open(os.path.join(root, "Packages"), "wb") as f:
        f.write(pkgs)
    with open(os.path.join(root, "Packages.gz"), "wb") as f:
        f.write(gzip.compress(pkgs))
    rel = ["Origin: lis-test", "Label: lis-test", "Suite: stable", "Codename: lis",
           "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
           "Architectures: all amd64", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = open(os.path.join(root, name), "rb").read()
        rel.append(" %s %d %s" % (hashlib.sha256(data).hexdigest(), len(data), name))
    with open(os.path.join(root, "Release"), "w") as f:
        f.write("\n".join(rel) + "\n")


def make_simple(root):
    d = os.path.join(root, "simple", "lisdemo")
    os.makedirs(d, exist_ok=True)
    name = "lisdemo-1.0-py3-none-any.whl"
    files = {
        "lisdemo/__init__.py": b"VALUE = 42\n",
        "lisdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: lisdemo\nVersion: 1.0\n",
        "lisdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: lis\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join("%s,,\n" % n for n in files) + "lisdemo-1.0.dist-info/RECORD,,\n"
    files["lisdemo-1.0.dist-info/RECORD"] = record.encode()
    path = os.path.join(d, name)
    with zipfile.ZipFile(path, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="%s#sha256=%s">%s</a></body></html>\n' % (name, sha, name))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="lisdemo/">lisdemo</a></body></html>\n')


class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass


def main():
    root = sys.argv[1]
    big = int(sys.argv[sys.argv.index("--big") + 1]) if "--big" in sys.argv else 0
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello through the lis proxy\n")
    with open(os.path.join(root, "one.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    if big:
        with open(os.path.join(root, "big.bin"), "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(big):
                f.write(chunk)
    make_apt(os.path.join(root, "apt"))
    make_simple(root)
    os.chdir(root)
    http.server.ThreadingHTTPServer.daemon_threads = True
    http.server.ThreadingHTTPServer.request_queue_size = 256
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    try:
        sys.stdout.write("%d\n" % srv.server_address[1])
        sys.stdout.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the reader may go away
    except OSError:
        pass
    srv.serve_forever()


if __name__ == "__main__":
    main()
