#!/usr/bin/env python3
"""No client stalls another (issue 33 item 2): one case of a tty container or
stream that used to hold the server's one loop thread, then `docker ps` from
another client, then SIGTERM to the server in that state.
Usage: stall.py SOCKET SERVER_PID IMAGE CASE, CASE one of tty_prints,
tty_never_stops, exec_tty_attached, run_tty_attached, never_reads,
disconnects. "hung" is a generous bound (HUNG seconds), not a timing
assertion; the measured figures are printed as "info" lines.
Prints one line per check, then "N passed, M failed"."""
import json
import os
import socket
import subprocess
import sys
import time

from checks import check, finish  # tests/serve/checks.py

SOCK, PID, IMG, CASE = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
HUNG = 5.0  # a `docker ps` slower than this is a hung server
ENV = dict(os.environ, DOCKER_HOST="unix://" + SOCK)
bg = []


def docker(*args, timeout=30):
    try:
        r = subprocess.run(("docker",) + args, env=ENV, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"docker {args[0]}: no answer in {timeout:.0f} s (hung)"
    return r.returncode, r.stdout + r.stderr


def docker_bg(*args):
    p = subprocess.Popen(("docker",) + args, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    bg.append(p)
    return p


def ps_answers(what, times=3):
    """docker ps from another client, `times` times: each answers within HUNG."""
    worst = 0.0
    for _ in range(times):
        t0 = time.monotonic()
        code, out = docker("ps", "-a", timeout=HUNG)
        worst = max(worst, time.monotonic() - t0)
        if code != 0:
            check(f"docker ps answers while {what}", False, out)
            return False
        time.sleep(0.3)
    print(f"info {CASE}: docker ps x{times}, slowest {worst * 1000:.0f} ms", flush=True)
    check(f"docker ps answers while {what}", True)
    return True


def http(s, method, path, body=None):
    """One request on s; returns the status and the body (not for a 101)."""
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(rest) < n:
        rest += s.recv(65536)
    return status, rest


def connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2 * HUNG)
    s.connect(SOCK)
    return s


def exec_stream(cid, cmd, tty):
    """Starts an exec on a raw connection and returns it after the 101 header."""
    s = connect()
    st, body = http(s, "POST", f"/v1.41/containers/{cid}/exec",
                    {"Cmd": cmd, "Tty": tty, "AttachStdout": True, "AttachStderr": True})
    eid = json.loads(body)["Id"]
    data = json.dumps({"Detach": False, "Tty": tty})
    s.sendall(f"POST /v1.41/exec/{eid}/start HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\n"
              f"Upgrade: tcp\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n{data}".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    check(f"exec start upgraded (tty={tty})", b" 101 " in head.split(b"\r\n")[0], head)
    return s


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def gone(pid):
    """The server exited (a zombie until the test reaps it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def sigterm_ends_server(what):
    t0 = time.monotonic()
    os.kill(PID, 15)
    while not gone(PID) and time.monotonic() - t0 < 30:
        time.sleep(0.1)
    took = time.monotonic() - t0
    print(f"info {CASE}: exited {took * 1000:.0f} ms after SIGTERM", flush=True)
    check(f"SIGTERM ends the server while {what}", gone(PID), "still running 30 s after SIGTERM")


def run_d(*args):
    code, out = docker("run", "-d", *args)
    check(f"run -d {' '.join(args[:2])}", code == 0, out)
    return out.strip().splitlines()[-1] if code == 0 else ""


# a tty whose output stops for a while: the read that waited for more used to
# hold the loop thread until the command ended
PAUSE = "yes | head -c 100000; echo; echo printed; sleep 60"

def main():
    if CASE == "tty_prints":
        cid = run_d("-t", IMG, "sh", "-c", "echo hi; sleep 100")
        time.sleep(1)
        ps_answers("a detached tty container printed and sleeps")
        code, out = docker("logs", cid, timeout=HUNG)
        check("its logs hold what it printed", code == 0 and "hi" in out, out)
        sigterm_ends_server("a tty container sleeps after printing")
    elif CASE == "tty_never_stops":
        run_d("-t", IMG, "yes")
        run_d(IMG, "yes")  # and one on pipes
        time.sleep(1)
        ps_answers("two containers print without end", times=5)
        sigterm_ends_server("containers print without end")
    elif CASE == "exec_tty_attached":
        cid = run_d(IMG, "sleep", "100")
        p = docker_bg("exec", "-t", cid, "sh", "-c", "echo started; sleep 8; echo ended")
        time.sleep(2)
        ps_answers("a docker exec -t is attached")
        check("the exec -t is still running", p.poll() is None)
        sigterm_ends_server("a docker exec -t is attached")
    elif CASE == "run_tty_attached":
        p = docker_bg("run", "--rm", "-t", IMG, "sh", "-c", "echo started; sleep 8; echo ended")
        time.sleep(3)
        ps_answers("a docker run -t is attached")
        check("the run -t is still running", p.poll() is None)
        sigterm_ends_server("a docker run -t is attached")
    elif CASE == "never_reads":
        cid = run_d(IMG, "sleep", "100")
        # a client that reads nothing after the 101: one tty exec that prints then
        # waits, one that prints without end; the server holds a bounded backlog
        s1 = exec_stream(cid, ["sh", "-c", PAUSE], True)
        s2 = exec_stream(cid, ["yes"], True)
        time.sleep(2)
        before = rss_kb(PID)
        ps_answers("a client reads nothing of two tty execs")
        time.sleep(2)
        after = rss_kb(PID)
        print(f"info {CASE}: server RSS {before} kB, then {after} kB", flush=True)
        check("the server's memory stays bounded", after < 256 * 1024, f"{after} kB")
        sigterm_ends_server("a client reads nothing of two tty execs")
        s1.close()
        s2.close()
    elif CASE == "disconnects":
        cid = run_d(IMG, "sleep", "100")
        # clients that leave while their exec runs: once the execs end, the server
        # holds nothing of them (each left stream used to keep its socket)
        docker("exec", cid, "true")  # what the first exec opens for good
        before = len(os.listdir(f"/proc/{PID}/fd"))
        for tty in (True, False, True):
            s = exec_stream(cid, ["sh", "-c", "yes | head -c 100000; sleep 2"], tty)
            s.recv(1000)
            s.close()
        time.sleep(5)
        after = len(os.listdir(f"/proc/{PID}/fd"))
        print(f"info {CASE}: server fds {before} before, {after} after", flush=True)
        check("clients that left hold no fd of the server", after <= before, f"{before} -> {after}")
        for tty in (True, False):
            s = exec_stream(cid, ["sh", "-c", PAUSE], tty)
            s.recv(1000)
            s.close()  # mid-stream
        s = exec_stream(cid, ["yes"], True)
        s.recv(1000)
        s.close()
        time.sleep(1)
        ps_answers("clients left in mid-stream")
        code, out = docker("exec", cid, "echo", "still", timeout=HUNG)
        check("another exec still runs", code == 0 and "still" in out, out)
        sigterm_ends_server("clients left in mid-stream")
    else:
        sys.exit(f"unknown case {CASE}")


try:
    main()
except (OSError, ValueError, KeyError, IndexError) as e:  # a hung or broken server
    check(f"{CASE} ran to its end", False, repr(e))

for p in bg:
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
finish()
