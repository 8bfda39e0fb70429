#!/usr/bin/env python3
"""rootfs-evil.py KIND OUTSIDE OUT - writes a malicious (or odd) archive for
tests/test_rootfs.c. OUTSIDE is a directory outside the image that the archive
tries to reach; a safe importer leaves it untouched."""
import io, json, os, sys, tarfile

kind, outside, out = sys.argv[1], sys.argv[2], sys.argv[3]


def add(t, name, typ=tarfile.REGTYPE, data=b"", link="", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.type = typ
    ti.mode = mode
    ti.linkname = link
    ti.size = len(data) if typ == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)


def base(t):
    add(t, "./", tarfile.DIRTYPE, mode=0o755)
    add(t, "etc/", tarfile.DIRTYPE, mode=0o755)
    add(t, "etc/ok", data=b"ok\n")


rel_up = os.path.relpath(outside, "/")  # ../../.. then this reaches OUTSIDE
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    if kind == "abs":
        base(t)
        add(t, os.path.join(outside, "pwned"), data=b"pwned\n")
    elif kind == "dotdot":
        base(t)
        add(t, "etc/" + "../" * 40 + rel_up + "/pwned", data=b"pwned\n")
    elif kind == "symlink-parent":
        base(t)
        add(t, "etc/link", tarfile.SYMTYPE, link=outside)
        add(t, "etc/link/pwned", data=b"pwned\n")
    elif kind == "symlink-parent-rel":
        base(t)
        add(t, "up", tarfile.SYMTYPE, link="../" * 40 + rel_up)
        add(t, "up/pwned", data=b"pwned\n")
    elif kind == "hardlink-abs":
        base(t)
        add(t, "etc/secret", tarfile.LNKTYPE, link=os.path.join(outside, "secret"))
    elif kind == "hardlink-dotdot":
        base(t)
        add(t, "etc/secret", tarfile.LNKTYPE, link="../" * 40 + rel_up + "/secret")
    elif kind == "hardlink-via-symlink":
        base(t)
        add(t, "etc/link", tarfile.SYMTYPE, link=outside)
        add(t, "etc/secret", tarfile.LNKTYPE, link="etc/link/secret")
    elif kind == "write-through":
        base(t)
        add(t, "etc/target", tarfile.SYMTYPE, link=os.path.join(outside, "secret"))
        add(t, "etc/target", data=b"overwritten\n")
    elif kind == "write-through-hardlinked-symlink":
        base(t)
        add(t, "etc/s", tarfile.SYMTYPE, link=os.path.join(outside, "secret"))
        add(t, "etc/h", tarfile.LNKTYPE, link="etc/s")
        add(t, "etc/h", data=b"overwritten\n")
    elif kind == "devices":  # not malicious: device nodes are skipped, the rest imported
        base(t)
        add(t, "dev/", tarfile.DIRTYPE, mode=0o755)
        ti = tarfile.TarInfo("dev/null"); ti.type = tarfile.CHRTYPE; ti.devmajor = 1; ti.devminor = 3
        t.addfile(ti)
        add(t, "dev/fifo", tarfile.FIFOTYPE, mode=0o600)
        add(t, "etc/hard", tarfile.LNKTYPE, link="etc/ok")
        add(t, "etc/ro/", tarfile.DIRTYPE, mode=0o555)
        add(t, "etc/ro/file", data=b"in a read-only dir\n", mode=0o400)
        add(t, "bin/", tarfile.DIRTYPE, mode=0o755)
        add(t, "bin/suid", data=b"#!/bin/sh\n", mode=0o4755)
    elif kind in ("docker-escape", "docker-symlink"):
        # a docker-archive whose layer path leaves the archive
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w") as lt:
            add(lt, "etc/", tarfile.DIRTYPE, mode=0o755)
            add(lt, "etc/ok", data=b"ok\n")
        lp = "../" * 40 + rel_up + "/layer.tar" if kind == "docker-escape" else "a" * 64 + "/layer.tar"
        if kind == "docker-symlink":
            add(t, "a" * 64 + "/", tarfile.DIRTYPE, mode=0o755)
            add(t, "a" * 64 + "/layer.tar", tarfile.SYMTYPE, link=os.path.join(outside, "layer.tar"))
        m = json.dumps([{"Config": "cfg.json", "RepoTags": ["evil:1"], "Layers": [lp]}]).encode()
        add(t, "manifest.json", data=m)
        add(t, "cfg.json", data=b"{}")
    elif kind == "opaque-deep":
        # a docker-archive whose one layer nests directories 1,500 deep (3,000
        # characters of path), then marks the top opaque: the clean-up walks
        # every level the layer made
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w", format=tarfile.GNU_FORMAT) as lt:
            add(lt, "etc/", tarfile.DIRTYPE, mode=0o755)
            add(lt, "etc/ok", data=b"ok\n")
            for i in range(1, 1501):
                add(lt, "d/" * i, tarfile.DIRTYPE, mode=0o755)
            add(lt, "d/" * 1500 + "f", data=b"deep\n")
            add(lt, "d/.wh..wh..opq")
        m = json.dumps([{"Config": "cfg.json", "RepoTags": ["deep:1"], "Layers": ["l/layer.tar"]}]).encode()
        add(t, "manifest.json", data=m)  # first: what makes it a docker-archive
        add(t, "cfg.json", data=b"{}")
        add(t, "l/layer.tar", data=layer.getvalue())
    else:
        sys.exit("unknown kind " + kind)
