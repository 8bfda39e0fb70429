#!/usr/bin/env python3
"""docker-py (python3-docker) against `lis serve`: the llm-in-sandbox
DockerRuntime and rLLM DockerSandbox call sequences, the protocol details
traced against dockerd (docs/serve.md: the 101 alone, framing, half-close,
exit codes before EOF) and the errors docker-py maps.
Usage: docker_py.py SOCKET|tcp://HOST:PORT IMAGE [concurrency]. tcp://: over
mutual TLS (docker.tls.TLSConfig) with $DOCKER_CERT_PATH's ca.pem, cert.pem,
key.pem. Prints one line per check, then "N passed, M failed"."""
import http.client
import io
import os
import socket
import ssl
import sys
import tarfile
import threading
import time

import docker

SOCK, IMG = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "main"
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok", name, flush=True)
    else:
        failed += 1
        print("FAIL", name, detail, flush=True)


def cert(name):
    return os.path.join(os.environ["DOCKER_CERT_PATH"], name)


def client():
    if SOCK.startswith("tcp://"):
        # requests prefers these to docker-py's ca_cert (docker/docker-py#2433)
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
        os.environ.pop("CURL_CA_BUNDLE", None)
        tls = docker.tls.TLSConfig(client_cert=(cert("cert.pem"), cert("key.pem")),
                                   ca_cert=cert("ca.pem"), verify=True)
        return docker.DockerClient(base_url=SOCK, tls=tls, timeout=120)
    return docker.DockerClient(base_url="unix://" + SOCK, timeout=120)


def raw_socket():
    """A connection to the server for hand-written HTTP (TLS over tcp://)."""
    if SOCK.startswith("tcp://"):
        host, port = SOCK[6:].rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=cert("ca.pem"))
        ctx.load_cert_chain(cert("cert.pem"), cert("key.pem"))
        return ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
    s = socket.socket(socket.AF_UNIX)
    s.connect(SOCK)
    return s


def make_tar(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:  # PAX, as Python's default
        for name, data in files.items():
            if data is None:
                ti = tarfile.TarInfo(name)
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                tf.addfile(ti)
            elif isinstance(data, tuple):  # ("symlink", target)
                ti = tarfile.TarInfo(name)
                ti.type = tarfile.SYMTYPE
                ti.linkname = data[1]
                tf.addfile(ti)
            else:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                ti.mtime = time.time()
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def concurrency(n, per):
    """n client processes (docker-py's hijacked sockets are freed only by the
    GC, and its select() cannot take fds above 1024: one process each), each
    with its own client and container, per execs each."""
    import multiprocessing as mp

    def worker(i, q):
        errors = []
        try:
            c = client()
            ct = c.containers.run(IMG, "sleep infinity", detach=True)
            for k in range(per):
                r = ct.exec_run(["sh", "-c", "echo t%d-%d; exit %d" % (i, k, k % 5)])
                if r.output != b"t%d-%d\n" % (i, k) or r.exit_code != k % 5:
                    errors.append((i, k, r))
            ct.remove(force=True)
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            errors.append((i, repr(e)))
        q.put(repr(errors) if errors else "")

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(i, q)) for i in range(n)]
    t0 = time.time()
    for p in ps:
        p.start()
    results = [q.get(timeout=240) for _ in ps]
    for p in ps:
        p.join()
    errors = [r for r in results if r]
    print("info %d x %d execs: %.2f s" % (n, per, time.time() - t0), flush=True)
    check("%d clients x %d execs: no lost output, every exit code right" % (n, per), not errors,
          str(errors[:3]))


def main_checks():
    c = client()
    check("version: ApiVersion 1.41", c.version()["ApiVersion"] == "1.41")
    check("ping", c.ping() is True)
    # --- llm-in-sandbox DockerRuntime -----------------------------------------
    name = "cdx123-llm-in-sandbox-v0.1-0123456789"
    try:
        c.containers.get(name)
        check("get missing container -> NotFound", False)
    except docker.errors.NotFound:
        check("get missing container -> NotFound", True)
    check("images.get", c.images.get(IMG).id.startswith("sha256:"))
    env = {"PATH": "/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    ct = c.containers.run(IMG, command="sleep infinity", name=name, detach=True, stdin_open=True,
                          tty=True, environment=env, working_dir="/testbed")
    ct.reload()
    check("run detach: running", ct.status == "running", ct.status)
    check("name", ct.name == name, ct.name)
    check("id is 64 hex", len(ct.id) == 64 and all(ch in "0123456789abcdef" for ch in ct.id))
    check("get by name", c.containers.get(name).id == ct.id)
    check("get by id prefix", c.containers.get(ct.id[:12]).id == ct.id)
    r = ct.exec_run(["bash", "-c", "pwd; echo $PIP_DISABLE_PIP_VERSION_CHECK $HOME $HOSTNAME"],
                    workdir="/testbed", environment=env)
    check("exec_run workdir (created) + env + HOME + HOSTNAME",
          r.exit_code == 0 and r.output == b"/testbed\n1 /root %s\n" % ct.id[:12].encode(), r)
    r = ct.exec_run(["bash", "-c", "echo to-stdout; echo to-stderr >&2"], demux=True)
    check("demux=True splits stdout/stderr", r.output == (b"to-stdout\n", b"to-stderr\n"), r)
    r = ct.exec_run(["bash", "-c", "echo out; exit 3"], demux=True)
    check("demux: empty stderr is None, exit code 3", r.output == (b"out\n", None) and r.exit_code == 3, r)
    r = ct.exec_run("true")
    check("no output: b''", r.exit_code == 0 and r.output == b"", r)
    r = ct.exec_run(["sh", "-c", "printf 'a\\000b\\001\\377'"])
    check("binary output byte-exact", r.output == b"a\x00b\x01\xff", r)
    r = ct.exec_run(["sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x; head -c 1048576 /dev/zero | tr '\\0' y >&2"],
                    demux=True)
    check("3 MB stdout + 1 MB stderr framed", r.output[0] == b"x" * 3145728 and r.output[1] == b"y" * 1048576,
          (len(r.output[0] or b""), len(r.output[1] or b"")))
    r = ct.exec_run(["sh", "-c", "echo a; echo b"], tty=True)
    check("exec tty: raw with \\r\\n", r.output == b"a\r\nb\r\n", r)
    r = ct.exec_run(["/nonexistent/bin"])
    check("missing binary: 126 + message in the stream", r.exit_code == 126 and b"nonexistent" in r.output, r)
    r = ct.exec_run(["sh", "-c", "sleep 30 & echo started"])
    check("background child does not hang the exec", r.output == b"started\n" and r.exit_code == 0, r)
    ct.exec_run(["mkdir", "-p", "/testbed/input"])
    tar = make_tar({"x.txt": b"hello\n", "d": None, "d/y": b"yy", "link": ("symlink", "x.txt"),
                    "/abs.txt": b"abs"})
    check("put_archive -> True (200)", ct.put_archive("/testbed/input", tar) is True)
    r = ct.exec_run(["sh", "-c", "cat /testbed/input/x.txt /testbed/input/d/y /testbed/input/abs.txt; readlink /testbed/input/link"])
    check("put_archive contents (abs path under P)", r.output == b"hello\nyyabsx.txt\n", r)
    bits, st = ct.get_archive("/testbed/input")
    names = sorted(tarfile.open(fileobj=io.BytesIO(b"".join(bits))).getnames())
    check("get_archive layout", names == ["input", "input/abs.txt", "input/d", "input/d/y", "input/link", "input/x.txt"], names)
    check("path stat: dir mode bits (Go FileMode)", st["name"] == "input" and st["mode"] & (1 << 31) and (st["mode"] & 0o777) == 0o755, st)
    bits, st = ct.get_archive("/testbed/input/x.txt")
    tf = tarfile.open(fileobj=io.BytesIO(b"".join(bits)))
    check("get_archive of a file", tf.getnames() == ["x.txt"] and tf.extractfile("x.txt").read() == b"hello\n" and st["size"] == 6, st)
    try:
        ct.get_archive("/nonexistent")
        check("get_archive missing -> NotFound", False)
    except docker.errors.NotFound as e:
        check("get_archive missing -> NotFound", "Could not find the file" in str(e), str(e))
    try:
        ct.put_archive("/testbed/input", make_tar({"../../escape.txt": b"x"}))
        check("put_archive with .. refused", False)
    except docker.errors.APIError as e:
        check("put_archive with .. refused", e.status_code == 500, str(e))
    # a symlink entry to /etc, then a file through it: stays inside the sandbox
    try:
        ct.put_archive("/tmp", make_tar({"ln": ("symlink", "/etc"), "ln/pwned": b"p"}))
    except docker.errors.APIError:
        pass
    r = ct.exec_run(["sh", "-c", "test -e /etc/pwned && echo in-sandbox; true"])
    check("symlink tar entries never reach the host", not os.path.exists("/etc/pwned"), r)
    try:
        ct.put_archive("/nonexistent", tar)
        check("put_archive to a missing dir -> NotFound", False)
    except docker.errors.NotFound:
        check("put_archive to a missing dir -> NotFound", True)
    # --- slow client (§6.6): the 101 header must arrive alone ----------------
    orig = http.client.HTTPResponse.begin

    def slow_begin(self):
        time.sleep(0.3)
        return orig(self)
    http.client.HTTPResponse.begin = slow_begin
    try:
        r = ct.exec_run(["echo", "hi"])
    finally:
        http.client.HTTPResponse.begin = orig
    check("[strict] slow client still gets exec output", r.output == b"hi\n", r)
    # raw socket: the first recv holds the header only
    eid = c.api.exec_create(ct.id, ["echo", "hi"])["Id"]
    s = raw_socket()
    body = b'{"Detach": false, "Tty": false}'
    s.sendall(b"POST /v1.41/exec/%s/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\n"
              b"Upgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (eid.encode(), len(body), body))
    time.sleep(0.2)
    first = s.recv(65536)
    rest = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    s.close()
    check("101 header alone in the first recv", first.startswith(b"HTTP/1.1 101") and first.endswith(b"\r\n\r\n"), first)
    check("then the frame", rest == b"\x01\x00\x00\x00\x00\x00\x00\x03hi\n", rest)
    t0 = time.time()
    for i in range(200):
        r = ct.exec_run(["echo", str(i)])
        if r.output != b"%d\n" % i or r.exit_code != 0:
            break
    check("200 fast execs", i == 199 and r.output == b"199\n", (i, r))
    print("info 200 execs: %.3f s" % (time.time() - t0), flush=True)
    ct.stop(timeout=5)
    ct.reload()
    check("stop -> exited", ct.status == "exited", ct.status)
    try:
        ct.exec_run("true")
        check("exec in a stopped container -> 409", False)
    except docker.errors.APIError as e:
        check("exec in a stopped container -> 409", e.status_code == 409, str(e))
    check("get_archive after stop", ct.get_archive("/testbed/input/x.txt")[1]["size"] == 6)
    ct.remove(force=True)
    try:
        c.containers.get(ct.id)
        check("removed", False)
    except docker.errors.NotFound:
        check("removed", True)
    # --- rLLM DockerSandbox -----------------------------------------------------
    ct = c.containers.run(IMG, command="sleep infinity", name="rllm-sandbox-x", detach=True, remove=False)
    check("short_id", ct.short_id == ct.id[:10] or ct.short_id == ct.id[:12])
    r = ct.exec_run(["bash", "-c", "id -u; id -g"], demux=True, user="1000")
    check('user="1000" -> uid 1000 gid 0', r.output[0] == b"1000\n0\n", r)
    r = ct.exec_run(["id"], user="nosuchuser")
    check("unknown user: 126 + message", r.exit_code == 126 and b"unable to find user nosuchuser" in r.output, r)
    # --- docker pause / unpause ---------------------------------------------------
    ct.pause()
    ct.reload()
    check("pause -> status paused, State.Paused", ct.status == "paused"
          and ct.attrs["State"]["Paused"] is True and ct.attrs["State"]["Running"] is True,
          ct.attrs["State"])
    ps = c.api.containers(filters={"status": "paused"})
    check("listed as paused (status filter), Status ends in (Paused)",
          [x["Id"] for x in ps] == [ct.id] and ps[0]["State"] == "paused"
          and ps[0]["Status"].endswith("(Paused)"), ps)
    for what, call, word in (("exec in a paused container", lambda: ct.exec_run("true"), "paused"),
                             ("pause again", ct.pause, "already paused")):
        try:
            call()
            check(what + " -> 409", False)
        except docker.errors.APIError as e:
            check(what + " -> 409 " + word, e.status_code == 409 and word in str(e), str(e))
    ct.unpause()
    ct.reload()
    check("unpause -> running", ct.status == "running" and ct.attrs["State"]["Paused"] is False,
          ct.attrs["State"])
    r = ct.exec_run(["echo", "back"])
    check("exec after unpause", r.exit_code == 0 and r.output == b"back\n", r)
    try:
        ct.unpause()
        check("unpause a running container -> 409", False)
    except docker.errors.APIError as e:
        check("unpause a running container -> 409 not paused",
              e.status_code == 409 and "not paused" in str(e), str(e))
    ct.kill()
    ct.reload()
    check("kill -> exited 137", ct.status == "exited" and ct.attrs["State"]["ExitCode"] == 137, ct.attrs["State"])
    try:
        ct.kill()
        check("kill when not running -> 409", False)
    except docker.errors.APIError as e:
        check("kill when not running -> 409", e.status_code == 409)
    try:
        ct.pause()
        check("pause when not running -> 409", False)
    except docker.errors.APIError as e:
        check("pause when not running -> 409", e.status_code == 409 and "not running" in str(e),
              str(e))
    ct.remove(force=True)
    # --- errors and lists -----------------------------------------------------
    try:
        c.images.get("nosuch/image:v9")
        check("images.get missing -> ImageNotFound", False)
    except docker.errors.ImageNotFound:
        check("images.get missing -> ImageNotFound", True)
    try:
        c.containers.create("nosuch/image:v9", "true")
        check("create with a missing image -> ImageNotFound", False)
    except docker.errors.ImageNotFound:
        check("create with a missing image -> ImageNotFound", True)
    a = c.containers.run(IMG, "sleep infinity", detach=True, name="lista")
    b = c.containers.create(IMG, "sleep infinity", name="listb")
    ids = [x.id for x in c.containers.list(filters={"ancestor": IMG})]
    check("list running, ancestor filter (list encoding)", ids == [a.id], ids)
    ids = sorted(x.id for x in c.containers.list(all=True, filters={"name": "list"}))
    check("list all, name filter", ids == sorted([a.id, b.id]), ids)
    ids = [x.id for x in c.containers.list(all=True, filters={"status": "created"})]
    check("status filter", ids == [b.id], ids)
    try:
        c.containers.create(IMG, "true", name="lista")
        check("name in use -> 409", False)
    except docker.errors.APIError as e:
        check("name in use -> 409", e.status_code == 409 and "already in use" in str(e))
    try:
        a.remove()
        check("remove running without force -> 409", False)
    except docker.errors.APIError as e:
        check("remove running without force -> 409", e.status_code == 409)
    a.remove(force=True)
    b.remove()
    r = c.api._get(c.api.base_url + "/v1.99/version")
    check("version too new -> 400", r.status_code == 400 and "too new" in r.json()["message"])
    r = c.api._get(c.api.base_url + "/v1.41/nosuch/route")
    check("unknown route -> 404 JSON", r.status_code == 404 and r.json()["message"] == "page not found")
    # tag / images list / remove
    c.images.get(IMG).tag("cdx123/llm-in-sandbox", "v0.1")
    check("tag + images.get by the new name", c.images.get("docker.io/cdx123/llm-in-sandbox:v0.1").id == c.images.get(IMG).id)
    check("images.list shows the tag", any("cdx123/llm-in-sandbox:v0.1" in i.tags for i in c.images.list()))
    c.images.remove("cdx123/llm-in-sandbox:v0.1")
    try:
        c.images.get("cdx123/llm-in-sandbox:v0.1")
        check("images.remove untags", False)
    except docker.errors.ImageNotFound:
        check("images.remove untags", True)
    # commit: a snapshot of the container's files as an image
    ct = c.containers.run(IMG, "sleep infinity", detach=True, name="to-commit")
    ct.exec_run(["sh", "-c", "echo committed > /root/c.txt; rm /etc/debian_version"])
    img = ct.commit("lis-commit", "v1")
    check("commit -> an image tagged repo:tag", img.id.startswith("sha256:") and "lis-commit:v1" in img.tags,
          (img.id, img.tags))
    check("the committed image names its Parent", img.attrs["Parent"] == c.images.get(IMG).id, img.attrs)
    out = c.containers.run("lis-commit:v1", ["sh", "-c", "cat /root/c.txt; test -e /etc/debian_version || echo gone"],
                           remove=True)
    check("containers.run on the committed image sees its files", out == b"committed\ngone\n", out)
    check("the committed container runs on", ct.exec_run(["echo", "up"]).output == b"up\n")
    try:
        c.api.commit("nosuchct", "x", "y")
        check("commit of a missing container -> NotFound", False)
    except docker.errors.NotFound as e:
        check("commit of a missing container -> NotFound", "No such container" in str(e), str(e))
    ct.remove(force=True)
    # run attached (not detached) returns the output; auto_remove
    out = c.containers.run(IMG, ["sh", "-c", "echo attached"], remove=True)
    check("containers.run attached, remove=True", out == b"attached\n", out)
    check("auto-removed", not c.containers.list(all=True))


def proxy_checks():
    """run under `lis serve --net proxy`"""
    c = client()
    ct = c.containers.run(IMG, "sleep infinity", detach=True)
    r = ct.exec_run(["sh", "-c", "echo $http_proxy"])
    check("--net proxy: http_proxy set", r.output == b"http://127.0.0.1:3128\n", r)
    check("inspect: NetworkMode default", ct.attrs["HostConfig"]["NetworkMode"] == "default")
    ct2 = c.containers.run(IMG, "sleep infinity", detach=True, network_mode="none")
    r = ct2.exec_run(["sh", "-c", "echo x${http_proxy}x"])
    check("NetworkMode none: no proxy", r.output == b"xx\n", r)
    ct.remove(force=True)
    ct2.remove(force=True)


def options_checks():
    """docker-py's create options (issue 22, item 2): honoured, or refused with a 400."""
    import shutil
    import tempfile
    from docker.types import Mount, Ulimit
    c = client()
    host = tempfile.mkdtemp()
    with open(os.path.join(host, "f"), "w") as f:
        f.write("from the host\n")

    def run(cmd, **kw):
        return c.containers.run(IMG, ["sh", "-c", cmd], remove=True, **kw).decode()
    out = run("cat /mnt/f; touch /mnt/x 2>/dev/null || echo ro",
              volumes={host: {"bind": "/mnt", "mode": "ro"}})
    check("volumes= ro: the host's file, read-only", out == "from the host\nro\n", out)
    run("echo w > /mnt/w", volumes=["%s:/mnt:rw" % host])
    check("volumes= rw: the write reached the host",
          open(os.path.join(host, "w")).read() == "w\n")
    out = run("cat /m/f", mounts=[Mount("/m", host, type="bind", read_only=True)])
    check("mounts= bind", out == "from the host\n", out)
    out = run("df -k /t | awk 'NR==2{print $2}'", tmpfs={"/t": "size=1m"})
    check("tmpfs= size", out == "1024\n", out)
    out = run("touch /x 2>/dev/null || echo ro; touch /dev/shm/y && echo shm", read_only=True)
    check("read_only=True", out == "ro\nshm\n", out)
    out = run("df -k /dev/shm | awk 'NR==2{print $2}'", shm_size="4m")
    check("shm_size", out == "4096\n", out)
    out = run("echo $(ulimit -n) $(ulimit -Hn)", ulimits=[Ulimit(name="nofile", soft=64, hard=128)])
    check("ulimits", out == "64 128\n", out)
    out = run("awk '/CapEff/{print $2}' /proc/self/status", cap_drop=["ALL"])
    check("cap_drop ALL", out == "0000000000000000\n", out)
    out = run("hostname", hostname="pyhost", init=True)
    check("hostname, init", out == "pyhost\n", out)
    refusals = [("privileged", {"privileged": True}, "Privileged"),
                ("cap_add SYS_ADMIN", {"cap_add": ["SYS_ADMIN"]}, "CapAdd"),
                ("devices", {"devices": ["/dev/null:/dev/null:rwm"]}, "Devices"),
                ("pid_mode host", {"pid_mode": "host"}, "PidMode"),
                ("ipc_mode host", {"ipc_mode": "host"}, "IpcMode"),
                ("userns_mode host", {"userns_mode": "host"}, "UsernsMode"),
                ("security_opt seccomp=unconfined", {"security_opt": ["seccomp=unconfined"]},
                 "SecurityOpt"),
                ("sysctls", {"sysctls": {"net.ipv4.ip_forward": "1"}}, "Sysctls"),
                ("cgroup_parent", {"cgroup_parent": "x"}, "CgroupParent"),
                ("volumes_from", {"volumes_from": ["other"]}, "VolumesFrom"),
                ("a named volume", {"volumes": {"myvol": {"bind": "/data"}}}, "no volumes"),
                ("restart_policy", {"restart_policy": {"Name": "always"}, "detach": True},
                 "RestartPolicy")]
    for name, kw, word in refusals:
        try:
            kw.setdefault("remove", True)
            c.containers.run(IMG, "true", **kw)
            check("refused: " + name, False, "it ran")
        except docker.errors.APIError as e:
            check("refused: " + name, e.status_code == 400 and word in str(e), str(e))
    # MaskedPaths/ReadonlyPaths have no docker-py keyword: the raw API (issue 29)
    for name, hc, word in [("MaskedPaths []", {"MaskedPaths": []}, "MaskedPaths is refused"),
                           ("ReadonlyPaths []", {"ReadonlyPaths": []}, "ReadonlyPaths is refused"),
                           ("MaskedPaths [/proc/kcore]", {"MaskedPaths": ["/proc/kcore"]},
                            "MaskedPaths is refused"),
                           ("security_opt systempaths=unconfined",
                            {"SecurityOpt": ["systempaths=unconfined"]}, "systempaths")]:
        r = c.api._post_json(c.api._url("/containers/create"),
                             data={"Image": IMG, "Cmd": ["true"], "HostConfig": hc})
        msg = r.json().get("message", "") if r.status_code == 400 else r.text
        check("refused: " + name, r.status_code == 400 and word in msg and "\n" not in msg,
              "%d %s" % (r.status_code, msg))
    check("nothing left", not c.containers.list(all=True))
    shutil.rmtree(host)


if MODE == "concurrency":
    concurrency(int(sys.argv[4]), int(sys.argv[5]))
elif MODE == "proxy":
    proxy_checks()
elif MODE == "options":
    options_checks()
else:
    main_checks()
print("%d passed, %d failed" % (passed, failed), flush=True)
sys.exit(1 if failed else 0)
