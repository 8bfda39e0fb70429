#!/usr/bin/env python3
"""The dockerd side of scripts/bench-fork.sh: a container whose writable layer holds MB
MiB, then REPS times `docker commit` + N x `docker run -d IMAGE sleep infinity` (until all
are running), timed with docker-py; the N containers and the image are removed between
repetitions (not timed). Prints one JSON line: {"fork_ms": median}."""
import json
import statistics
import sys
import time

import docker


def main():
    sock, image, mb, n, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    cli = docker.DockerClient(base_url="unix://" + sock, timeout=600)
    parent = cli.containers.run(image, ["sleep", "infinity"], detach=True)
    try:
        rc, out = parent.exec_run(["sh", "-c", "mkdir -p /work && dd if=/dev/urandom of=/work/data bs=1M count=%d 2>/dev/null" % mb])
        if rc != 0:
            sys.exit("writing the layer failed: %s" % out)
        times = []
        for k in range(reps):
            t0 = time.monotonic()
            img = parent.commit(repository="bench-fork", tag="r%d" % k)
            kids = [cli.containers.run(img.id, ["sleep", "infinity"], detach=True) for _ in range(n)]
            times.append((time.monotonic() - t0) * 1000)
            for c in kids:
                c.remove(force=True)
            cli.images.remove(img.id, force=True)
        print(json.dumps({"fork_ms": statistics.median(times)}))
    finally:
        parent.remove(force=True)


if __name__ == "__main__":
    main()
