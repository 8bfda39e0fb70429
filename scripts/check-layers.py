#!/usr/bin/env python3
"""check-layers.py - the one-way layers of lis (docs/architecture.md), checked.

Reads what each source file includes (`cc -MM`) and, from the objects of the
build, which global symbols each file defines and uses (`nm`). It fails when

  * a file includes a header of an area it may not use (a higher area, or a
    sibling), or a header of a lower area other than the one it exposes;
  * a file calls (or references data of) a file of an area it may not use;
  * files of one area call each other in a loop. Each loop is printed edge by
    edge, `a.c -> b.c: symbol`.

Areas, bottom-up: runtime < net < rootfs < agent < batch < rl < serve < cli
(serve uses rl, the episodes API, and not agent or batch directly);
monitor above runtime and net, beside rootfs, below agent, batch, serve, cli. tests/
and fuzz/ are exempt. Edges listed in scripts/layers.allow (`a.c -> b.c`, one a
line) are left out of the graph: a known debt, named, not hidden.

The tables of each area's rows in docs/architecture.md are generated from the
same graph (--write-docs FILE) and checked (--docs FILE), so they cannot drift.

Usage: check-layers.py [--root DIR] [--objdir DIR]... [--allow FILE] [--levels]
                       [--docs FILE | --write-docs FILE]
       check-layers.py --self-test
Exit 0 when clean, 1 on a violation, 2 on a usage or tool error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict, deque

# What each area may use, and the one header it exposes to the areas above.
USES = {
    "runtime": [],
    "net": ["runtime"],
    "rootfs": ["runtime", "net"],
    "monitor": ["runtime", "net"],
    "agent": ["runtime", "net", "rootfs", "monitor"],
    "batch": ["runtime", "net", "rootfs", "agent", "monitor"],
    "rl": ["runtime", "net", "rootfs", "agent", "batch", "monitor"],
    "serve": ["runtime", "net", "rootfs", "monitor", "rl"],
    "cli": ["runtime", "net", "rootfs", "monitor", "agent", "batch", "rl", "serve"],
}
PUBLIC = {
    "runtime": "runtime/lis.h",
    "net": "net/lis_net.h",
    "rootfs": "rootfs/rootfs.h",
    "monitor": "monitor/lis_monitor.h",
    "agent": "agent/agent.h",
    "batch": "batch/lis_batch.h",
    "rl": "rl/lis_rl.h",
    "serve": "serve/lis_serve.h",
}
MAX_LOOPS = 30  # per strongly connected group of files


def area_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in USES and "/" in rel else None


def run(cmd, cwd=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    except OSError as e:
        sys.exit(f"check-layers: cannot run {cmd[0]}: {e}")
    if p.returncode != 0:
        sys.exit(f"check-layers: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return p.stdout


def sources(root):
    out = []
    for area in USES:
        d = os.path.join(root, area)
        for dirpath, _, files in os.walk(d):
            for f in files:
                if f.endswith(".c"):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def includes(root, src, cc):
    """The project headers src includes, directly or not, relative to root."""
    flags = ["-std=c11", "-D_GNU_SOURCE"] + [f"-I{a}" for a in USES]
    # -MG: a header not found (a library's, without its pkg-config -I) is named, not fatal
    text = run(cc + ["-MM", "-MG"] + flags + [src], cwd=root)
    deps = text.replace("\\\n", " ").split(":", 1)[1].split()
    res = []
    for d in deps:
        d = os.path.normpath(d)
        if d != src and d.endswith(".h") and area_of(d):
            res.append(d)
    return res


def symbols(obj):
    defined, used = set(), set()
    for line in run(["nm", "-P", "-g", obj]).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        sym, kind = parts[0], parts[1]
        if kind in ("U", "w", "v"):
            used.add(sym)
        else:
            defined.add(sym)
    return defined, used


def objects(root, objdirs):
    """source (relative to root) -> list of its objects, for existing sources."""
    res = defaultdict(list)
    for od in objdirs:
        for dirpath, _, files in os.walk(od):
            for f in files:
                if not f.endswith(".o"):
                    continue
                obj = os.path.join(dirpath, f)
                src = os.path.relpath(obj, od)[:-2] + ".c"
                if area_of(src) and os.path.exists(os.path.join(root, src)):
                    res[src].append(obj)
    return res


def read_allow(path):
    allow = set()
    if not path or not os.path.exists(path):
        return allow
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"(\S+)\s*->\s*(\S+)", line)
            if not m:
                sys.exit(f"check-layers: {path}:{n}: expected `a.c -> b.c`, got: {line}")
            allow.add((m.group(1), m.group(2)))
    return allow


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative. Returns the groups of more than one node."""
    index, low, on, stack, groups = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                g = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    g.append(w)
                    if w == v:
                        break
                if len(g) > 1:
                    groups.append(sorted(g))
    return groups


def shortest_path(a, b, succ, inside):
    """Shortest path a -> ... -> b through the nodes of inside (BFS)."""
    prev, q = {a: None}, deque([a])
    while q:
        v = q.popleft()
        if v == b:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in sorted(succ[v]):
            if w in inside and w not in prev:
                prev[w] = v
                q.append(w)
    return None


def loops_of(group, succ):
    """One shortest loop through each edge of the group, without repeats."""
    inside, seen, loops = set(group), set(), []
    for u in group:
        for v in sorted(succ[u]):
            if v not in inside:
                continue
            back = shortest_path(v, u, succ, inside)
            cyc = [u] + back  # u -> v ... -> u
            body = cyc[:-1]
            k = body.index(min(body))
            key = tuple(body[k:] + body[:k])
            if key not in seen:
                seen.add(key)
                loops.append(list(key) + [key[0]])
    return loops


def levels_of(objs, edges):
    """{area: {level: [file, ...]}}: a file uses only files of lower levels."""
    out = {}
    for area in USES:
        nodes = sorted(s for s in objs if area_of(s) == area)
        if not nodes:
            continue
        level = {}

        def lv(n, seen=()):
            if n not in level:
                below = [b for (a, b) in edges if a == n and b in nodes and b not in seen]
                level[n] = 1 + max((lv(b, seen + (n,)) for b in below), default=-1)
            return level[n]
        rows = defaultdict(list)
        for n in nodes:
            rows[lv(n)].append(n)
        out[area] = rows
    return out


def in_area(src):
    """A file's name inside its area: copy.c, init/lis_init.c."""
    return src.split("/", 1)[1]


def print_levels(levels):
    for area, rows in levels.items():
        print(f"{area}/ (bottom-up):")
        for k in sorted(rows):
            print(f"  {k}: {' '.join(in_area(n) for n in rows[k])}")


def purpose(root, src):
    """The first sentence of a file's opening comment, without its 'name.c - '."""
    try:
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            text = f.read(4000)
    except OSError:
        return ""
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    if not m:
        return ""
    body = " ".join(l.strip().lstrip("*").strip() for l in m.group(1).splitlines())
    body = re.sub(r"\s+", " ", body).strip()
    body = re.sub(r"^" + re.escape(os.path.basename(src)) + r"\s*[-:]\s*", "", body)
    depth = 0  # the first sentence ends at a '.' or ';' outside parentheses
    for i, c in enumerate(body):
        depth += (c == "(") - (c == ")")
        if c in ".;" and depth <= 0 and (i + 1 == len(body) or body[i + 1] == " "):
            body = body[:i]
            break
    if len(body) > 160:
        body = body[:157].rsplit(" ", 1)[0] + " ..."
    return body.replace("|", "\\|")


DOCS_BEGIN = "<!-- begin: layers, generated by scripts/check-layers.py --write-docs; do not edit -->"
DOCS_END = "<!-- end: layers -->"


def render_docs(root, levels):
    out = [DOCS_BEGIN, ""]
    for area, rows in levels.items():
        out += [f"**{area}/** (`{PUBLIC.get(area, 'no header')}`), bottom-up rows:", "",
                "| row | file | what it owns (its opening comment) |", "|---|---|---|"]
        for k in sorted(rows, reverse=True):
            for n in rows[k]:
                out.append(f"| {k} | `{in_area(n)}` | {purpose(root, n)} |")
        out.append("")
    out.append(DOCS_END)
    return "\n".join(out)


def docs_block(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    a, b = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if a < 0 or b < a:
        return text, None
    return text, (a, b + len(DOCS_END))


def check(root, objdirs, allow_path, cc, levels=False, docs=None, write_docs=False):
    allow = read_allow(allow_path)
    problems = []
    srcs = sources(root)

    for src in srcs:
        a = area_of(src)
        for h in includes(root, src, cc):
            b = area_of(h)
            if b == a:
                continue
            if b not in USES[a]:
                problems.append(f"upward include: {src} ({a}/) includes {h} ({b}/ is not below {a}/)")
            elif h != PUBLIC[b]:
                problems.append(f"private include: {src} includes {h}; {b}/ exposes {PUBLIC[b]} only")

    objs = objects(root, objdirs)
    if not objs:
        sys.exit(f"check-layers: no objects of runtime/, agent/, rootfs/ ... under {' '.join(objdirs)}"
                 " (build first)")
    defs, uses = defaultdict(set), {}
    for src, ol in objs.items():
        u = set()
        for o in ol:
            d, us = symbols(o)
            for s in d:
                defs[s].add(src)
            u |= us
        uses[src] = u

    edges = defaultdict(set)  # (a, b) -> symbols
    for src, us in uses.items():
        for s in us:
            for d in defs.get(s, ()):
                if d != src:
                    edges[(src, d)].add(s)
    used_allow = set()
    for (a, b) in list(edges):
        if (a, b) in allow:
            used_allow.add((a, b))
            del edges[(a, b)]
    for (a, b), syms in sorted(edges.items()):
        aa, ab = area_of(a), area_of(b)
        if aa != ab and ab not in USES[aa]:
            problems.append(f"upward call: {a} -> {b}: {', '.join(sorted(syms))} "
                            f"({ab}/ is not below {aa}/)")

    lv = levels_of(objs, edges)
    if levels:
        print_levels(lv)
    if docs:
        want = render_docs(root, lv)
        text, span = docs_block(docs)
        fix = f"python3 scripts/check-layers.py --write-docs {docs} (make layers-docs)"
        if span is None:
            problems.append(f"{docs} has no generated layer tables ({DOCS_BEGIN} ... {DOCS_END})")
        elif write_docs:
            with open(docs, "w", encoding="utf-8") as f:
                f.write(text[:span[0]] + want + text[span[1]:])
            print(f"check-layers: wrote the layer tables of {docs}")
        elif text[span[0]:span[1]] != want:
            problems.append(f"{docs}: the layer tables are out of date (a file was added, moved "
                            f"between rows or its opening comment changed): run {fix}")
    for area in USES:
        nodes = {s for s in objs if area_of(s) == area}
        succ = defaultdict(set)
        for (a, b) in edges:
            if a in nodes and b in nodes:
                succ[a].add(b)
        for group in strongly_connected(nodes, succ):
            loops = loops_of(group, succ)
            lines = [f"loop in {area}/ among {len(group)} files ({', '.join(group)}), "
                     f"{len(loops)} loop(s):"]
            for cyc in loops[:MAX_LOOPS]:
                lines.append(f"  loop {' -> '.join(cyc)}")
                for x, y in zip(cyc, cyc[1:]):
                    lines.append(f"    {x} -> {y}: {', '.join(sorted(edges[(x, y)]))}")
            if len(loops) > MAX_LOOPS:
                lines.append(f"  ... and {len(loops) - MAX_LOOPS} more")
            problems.append("\n".join(lines))

    for (a, b) in sorted(allow - used_allow):
        print(f"check-layers: note: allowed edge {a} -> {b} no longer exists; "
              f"remove it from {allow_path}")
    if problems:
        print("\n".join(problems))
        print(f"check-layers: FAILED ({len(problems)} problem(s)); the rule: docs/architecture.md")
        return 1
    print(f"check-layers: ok: {len(srcs)} files, {len(edges)} call edges between files, "
          f"{len(used_allow)} allowed by {os.path.basename(allow_path or '-')}; "
          "no upward include or call, no loop")
    return 0


# ---- self-test: tiny fixture trees, compiled, checked -----------------------------------------

def self_test(cc):
    tmp = tempfile.mkdtemp(prefix="check-layers-")
    me = os.path.abspath(__file__)
    failures = []

    def tree(name, files, allow=None):
        root = os.path.join(tmp, name)
        for rel, text in files.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        od = os.path.join(root, "obj")
        for rel in files:
            if rel.endswith(".c"):
                o = os.path.join(od, rel[:-2] + ".o")
                os.makedirs(os.path.dirname(o), exist_ok=True)
                run(cc + ["-c", "-I" + os.path.join(root, "runtime"), "-I" + os.path.join(root, "agent"),
                          os.path.join(root, rel), "-o", o])
        cmd = [sys.executable, me, "--root", root, "--objdir", od, "--cc", " ".join(cc)]
        if allow is not None:
            ap = os.path.join(root, "layers.allow")
            with open(ap, "w") as f:
                f.write(allow)
            cmd += ["--allow", ap]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.returncode, p.stdout

    def expect(what, got, rc, *needles):
        code, out = got
        missing = [n for n in needles if n not in out]
        if code != rc or missing:
            failures.append(f"{what}: exit {code} (want {rc}), missing {missing!r} in:\n{out}")

    loop = {
        "runtime/lis.h": "int a_fn(void);\n",
        "runtime/a.c": "int b_fn(void);\nint a_fn(void) { return b_fn() + 1; }\n",
        "runtime/b.c": "int c_fn(void);\nint b_fn(void) { return c_fn(); }\n",
        "runtime/c.c": "int a_fn(void);\nint c_fn(void) { return a_fn(); }\n",
        "runtime/d.c": "int a_fn(void);\nint d_fn(void) { return a_fn(); }\n",
    }
    got = tree("loop", loop)
    expect("a loop of three files", got, 1,
           "loop runtime/a.c -> runtime/b.c -> runtime/c.c -> runtime/a.c",
           "runtime/a.c -> runtime/b.c: b_fn", "runtime/b.c -> runtime/c.c: c_fn",
           "runtime/c.c -> runtime/a.c: a_fn")
    if "runtime/d.c" in got[1]:
        failures.append("d.c, which only calls into the loop, was named:\n" + got[1])
    expect("the loop, one edge allowed, one stale", tree("loop-allowed", loop,
           "# a known debt\nruntime/c.c -> runtime/a.c\nruntime/a.c -> runtime/d.c\n"), 0,
           "check-layers: ok", "1 allowed", "allowed edge runtime/a.c -> runtime/d.c no longer exists")

    expect("an upward include", tree("upinc", {
        "agent/agent.h": "int g_fn(void);\n",
        "runtime/a.c": "#include \"../agent/agent.h\"\nint a_fn(void) { return 1; }\n",
        "agent/g.c": "int g_fn(void) { return 2; }\n",
    }), 1, "upward include: runtime/a.c (runtime/) includes agent/agent.h")
    expect("an upward call", tree("upcall", {
        "runtime/a.c": "int g_fn(void);\nint a_fn(void) { return g_fn(); }\n",
        "agent/g.c": "int a_fn(void);\nint g_fn(void) { return 2; }\nint h_fn(void) { return a_fn(); }\n",
    }), 1, "upward call: runtime/a.c -> agent/g.c: g_fn")
    expect("a private header of a lower area", tree("private", {
        "runtime/lis.h": "int a_fn(void);\n",
        "runtime/internal.h": "int b_fn(void);\n",
        "runtime/a.c": "int a_fn(void) { return 1; }\n",
        "agent/g.c": "#include \"../runtime/internal.h\"\nint g_fn(void) { return 2; }\n",
    }), 1, "private include: agent/g.c includes runtime/internal.h")
    expect("a clean stack", tree("clean", {
        "runtime/lis.h": "int a_fn(void);\n",
        "runtime/a.c": "int b_fn(void);\nint a_fn(void) { return b_fn(); }\n",
        "runtime/b.c": "int b_fn(void) { return 1; }\n",
        "agent/agent.h": "#include \"lis.h\"\n",
        "agent/g.c": "#include \"agent.h\"\nint g_fn(void) { return a_fn(); }\n",
    }), 0, "check-layers: ok")
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("check-layers self-test FAILED:\n" + "\n".join(failures))
        return 1
    print("check-layers self-test: ok (a loop, an allowed edge, an upward include and call, "
          "a private header, a clean stack)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--objdir", action="append")
    ap.add_argument("--allow", default=None)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--levels", action="store_true", help="also print each area's layers")
    ap.add_argument("--docs", help="check that FILE's generated layer tables are current")
    ap.add_argument("--write-docs", metavar="FILE", help="rewrite FILE's generated layer tables")
    o = ap.parse_args()
    cc = o.cc.split()
    if o.self_test:
        return self_test(cc)
    objdirs = o.objdir or [os.path.join(o.root, "build", "obj"), os.path.join(o.root, "build", "pobj")]
    allow = o.allow if o.allow is not None else os.path.join(o.root, "scripts", "layers.allow")
    docs = o.write_docs or o.docs
    return check(o.root, objdirs, allow, cc, o.levels, docs, bool(o.write_docs))


if __name__ == "__main__":
    sys.exit(main())
