#!/usr/bin/env python3
"""bench-serve.py SOCKET IMAGE: docker-py timings against one Docker-API
socket (lis serve or dockerd), printed as one JSON line:
  exec_ms     median of exec_run("true") in a running container (N_EXEC runs)
  run_rm_ms   median of containers.run("sleep infinity", detach) + remove(force) (N_RUN)
  par_s       wall time of P processes x E execs, each in its own container
  par_lost    execs whose output or exit code was wrong (must be 0)"""
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

import docker

SOCK, IMG = sys.argv[1], sys.argv[2]
N_EXEC = int(os.environ.get("N_EXEC", "200"))
N_RUN = int(os.environ.get("N_RUN", "30"))
P = int(os.environ.get("PAR_N", "64"))
E = int(os.environ.get("PAR_EXECS", "20"))


def client():
    return docker.DockerClient(base_url="unix://" + SOCK, timeout=300)


def exec_median(c):
    ct = c.containers.run(IMG, "sleep infinity", detach=True)
    for _ in range(10):  # warm-up
        ct.exec_run("true")
    ts = []
    for _ in range(N_EXEC):
        t = time.perf_counter()
        ct.exec_run("true")
        ts.append(time.perf_counter() - t)
    ct.remove(force=True)
    return statistics.median(ts) * 1000


def run_rm_median(c):
    ts = []
    for _ in range(N_RUN):
        t = time.perf_counter()
        ct = c.containers.run(IMG, "sleep infinity", detach=True)
        ct.remove(force=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def par_worker(i, q):
    lost = 0
    try:
        c = client()
        ct = c.containers.run(IMG, "sleep infinity", detach=True)
        for k in range(E):
            r = ct.exec_run(["sh", "-c", "echo p%d-%d; exit %d" % (i, k, k % 3)])
            lost += r.output != b"p%d-%d\n" % (i, k) or r.exit_code != k % 3
        ct.remove(force=True)
    except Exception:  # noqa: BLE001 - a failed client counts as all its execs lost
        lost = E
    q.put(lost)


def parallel():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=par_worker, args=(i, q)) for i in range(P)]
    t = time.perf_counter()
    for p in ps:
        p.start()
    lost = sum(q.get(timeout=900) for _ in ps)
    for p in ps:
        p.join()
    return time.perf_counter() - t, lost


c = client()
out = {"exec_ms": exec_median(c), "run_rm_ms": run_rm_median(c)}
out["par_s"], out["par_lost"] = parallel()
print(json.dumps(out), flush=True)
