#!/usr/bin/env python3
"""The source tree's architecture, checked (issue 39; docs/design.md, "Layers").

usage: layout.py SOURCE_DIR BUILD_DIR [BOLTZATTN]

Fails (exit 1, one line per finding) when:
  - a file of src/LAYER includes a private header of a layer above its own
    (core <- ising <- model <- train), or cli/, grid/, lab/ include more
    than design.md allows them;
  - the compiled objects show a call from a lower layer into a higher one,
    or a circle of calls between files (strongly connected components of
    the file graph built from `nm`: file A -> B when A uses a symbol that B
    alone defines);
  - a C file or header of src/, cli/, grid/, lab/, bench/, tests/ or
    examples/ or a public header (include/*.h) is over 800 lines, or one
    of its functions is over 150 lines;
  - a public header is neither included by boltzattn.h (directly or through
    another public header, so that `#include <boltzattn.h>` serves) nor
    marked standalone (the words "standalone header" in its opening
    comment), or CMakeLists.txt does not name it (it would not be
    installed);
  - two headers anywhere in the tree share a file name;
  - docs/design.md does not name every folder of src/ in its layer map or
    every engine of the engine table (`boltzattn engines --names`).
The objects come from BUILD_DIR (the CMake build the tests run in)."""
import os
import re
import subprocess
import sys

LAYERS = ["core", "ising", "model", "train"]
MAX_FILE_LINES = 800
MAX_FUNC_LINES = 150


def rel(root, path):
    return os.path.relpath(path, root)


def walk(root, top, exts):
    out = []
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for f in files:
            if f.endswith(exts):
                out.append(os.path.join(d, f))
    return sorted(out)


def layer_of(relpath):
    parts = relpath.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in LAYERS:
        return parts[1]
    return None


def check_includes(root, findings):
    """src/LAYER may include "L/..." for L at or below LAYER; nothing else
    private. cli/, grid/ and lab/ reach the library through the public headers and
    at most the layer headers below (src/model/model.h, src/train/train.h:
    named in design.md); bench/ and tests/ may include any layer header."""
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for path in walk(root, "src", (".c", ".h")):
        r = rel(root, path)
        me = layer_of(r)
        if me is None:
            findings.append("%s: a source file outside the layer folders %s" % (r, LAYERS))
            continue
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            m = inc.match(line)
            if not m:
                continue
            target = m.group(1)
            if target.startswith("boltzattn"):
                continue
            top = target.split("/")[0]
            if top not in LAYERS:
                findings.append("%s:%d: includes \"%s\", not a layer header (write \"LAYER/file.h\")"
                                % (r, n, target))
            elif LAYERS.index(top) > LAYERS.index(me):
                findings.append("%s:%d: the %s layer includes \"%s\" of the %s layer above it"
                                % (r, n, me, target, top))
    allowed = {top: {"model/model.h", "train/train.h"} for top in ("cli", "grid", "lab")}
    for top, ok in allowed.items():
        for path in walk(root, top, (".c", ".h")):
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = inc.match(line)
                if m and m.group(1).split("/")[0] in LAYERS and m.group(1) not in ok:
                    findings.append("%s:%d: includes the private header \"%s\" (allowed: %s)"
                                    % (rel(root, path), n, m.group(1), ", ".join(sorted(ok))))


def objects(build):
    """source path (relative to the tree) -> object file, one per source."""
    out = {}
    cm = os.path.join(build, "CMakeFiles")
    for d, _, files in os.walk(cm):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            full = os.path.join(d, f)
            sub = full.split(".dir/", 1)
            if len(sub) != 2:
                continue
            src = sub[1][:-2]  # strip ".o"
            if src.split("/")[0] in ("src", "cli", "grid", "lab") and src not in out:
                out[src] = full
    return out


def nm(path, defined):
    args = ["nm", "-g", "--defined-only", path] if defined else ["nm", "-u", path]
    res = subprocess.run(args, capture_output=True, text=True, check=True)
    syms = set()
    for line in res.stdout.splitlines():
        f = line.split()
        if f:
            syms.add(f[-1])
    return syms


def file_graph(objs):
    definer = {}
    for src, o in objs.items():
        for s in nm(o, True):
            definer.setdefault(s, set()).add(src)
    graph = {src: set() for src in objs}
    for src, o in objs.items():
        for s in nm(o, False):
            d = definer.get(s)
            if d and len(d) == 1:  # a symbol two programs both define (main) ties nothing
                (b,) = d
                if b != src:
                    graph[src].add(b)
    return graph


def circles(graph):
    """Tarjan's strongly connected components with more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_graph(build, findings):
    objs = objects(build)
    if not any(s.startswith("src/") for s in objs):
        findings.append("no library objects under %s (build the library first)" % build)
        return
    graph = file_graph(objs)
    for a, outs in sorted(graph.items()):
        la = layer_of(a)
        for b in sorted(outs):
            lb = layer_of(b)
            if la and lb and LAYERS.index(lb) > LAYERS.index(la):
                findings.append("%s calls into %s: the %s layer reaches up to %s" % (a, b, la, lb))
            if a.startswith("src/") and not b.startswith("src/"):
                findings.append("%s calls into %s: the library reaches the programs" % (a, b))
            if a.split("/")[0] in ("cli", "grid") and b.startswith("lab/"):
                findings.append("%s calls into %s: the user program reaches the lab" % (a, b))
    for comp in circles(graph):
        findings.append("circle of calls between files: " + " <-> ".join(comp))


def check_sizes(root, findings):
    for top in ("src", "cli", "grid", "lab", "bench", "include", "tests", "examples"):
        for path in walk(root, top, (".c", ".h")):
            r = rel(root, path)
            lines = open(path, encoding="utf-8").read().split("\n")
            if len(lines) - 1 > MAX_FILE_LINES:
                findings.append("%s: %d lines (at most %d)" % (r, len(lines) - 1, MAX_FILE_LINES))
            # the project's style: a function's body opens with '{' and
            # closes with '}' in column 0
            start = None
            for n, line in enumerate(lines, 1):
                if line.startswith("{"):
                    start = n
                elif line.startswith("}") and start is not None:
                    if n - start + 2 > MAX_FUNC_LINES:
                        findings.append("%s:%d: a function of %d lines (at most %d)"
                                        % (r, start - 1, n - start + 2, MAX_FUNC_LINES))
                    start = None


def check_public_headers(root, findings):
    """include/*.h: reached from boltzattn.h through the public headers'
    own #include "..." lines, or standalone; named in CMakeLists.txt."""
    inc = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')
    top = os.path.join(root, "include")
    headers = sorted(f for f in os.listdir(top) if f.endswith(".h"))
    if "boltzattn.h" not in headers:
        findings.append("include/boltzattn.h is missing")
        return
    text = {h: open(os.path.join(top, h), encoding="utf-8").read() for h in headers}
    reached, todo = set(), ["boltzattn.h"]
    while todo:
        h = todo.pop()
        if h in reached:
            continue
        reached.add(h)
        for line in text[h].split("\n"):
            m = inc.match(line)
            if m and m.group(1) in text:
                todo.append(m.group(1))
    cmake = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    for h in headers:
        opening = text[h].split("*/", 1)[0]
        if h not in reached and "standalone header" not in re.sub(r"[\s*]+", " ", opening):
            findings.append("include/%s: not included by boltzattn.h, and its opening comment does "
                            "not call it a standalone header" % h)
        if "include/%s" % h not in cmake:
            findings.append("include/%s: CMakeLists.txt does not name it (not installed)" % h)


def check_header_names(root, findings):
    seen = {}
    for top in ("include", "src", "cli", "grid", "lab", "bench", "tests", "examples", "python"):
        for path in walk(root, top, (".h",)):
            seen.setdefault(os.path.basename(path), []).append(rel(root, path))
    for name, paths in sorted(seen.items()):
        if len(paths) > 1:
            findings.append("headers named %s: %s" % (name, ", ".join(paths)))


def check_design(root, tool, findings):
    doc = open(os.path.join(root, "docs", "design.md"), encoding="utf-8").read()
    head = doc[: doc.find("\n## ", doc.find("## Layers") + 1)] if "## Layers" in doc else ""
    if not head:
        findings.append("docs/design.md has no '## Layers' section")
    for d in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", d)) and "src/%s/" % d not in head:
            findings.append("docs/design.md's layer map does not name src/%s/" % d)
    res = subprocess.run([tool, "engines", "--names"], capture_output=True, text=True)
    names = res.stdout.split()
    if res.returncode != 0 or not names:
        findings.append("`boltzattn engines --names` failed (%d): %s" % (res.returncode,
                                                                         res.stderr.strip()))
    for e in names:
        if not re.search(r"`%s`" % re.escape(e), doc):
            findings.append("docs/design.md does not name the engine `%s`" % e)


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root, build = sys.argv[1], sys.argv[2]
    tool = sys.argv[3] if len(sys.argv) == 4 else os.path.join(build, "boltzattn")
    findings = []
    check_includes(root, findings)
    check_graph(build, findings)
    check_sizes(root, findings)
    check_public_headers(root, findings)
    check_header_names(root, findings)
    check_design(root, tool, findings)
    for f in findings:
        print("layout: " + f)
    print("layout: %s" % ("%d findings" % len(findings) if findings else "ok"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
