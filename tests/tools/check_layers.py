"""Checks that the folders under src/ include each other one way only.

    check_layers.py SRC_DIR       checks the tree; exit 1 listing every violation
    check_layers.py --self-test   checks the checker on small trees it writes
                                  (a clean one passes; a planted upward include,
                                  a cycle, an unknown folder and a dangling
                                  include each fail)

Every `#include "..."` of every file under SRC_DIR is resolved to the folder
it names (the first path component, as the build's include root is src/, or
the including file's own folder for a bare name). The layers, low to high:

    util(0) < comm, config(1) < optim, model, data, io(2) < sift, distill(3)
            < train(4) < cmd(5) < files directly in src/, i.e. main.cpp (6)

A file may include its own folder, a lower layer or the same layer; an
include of a higher layer is an error, and so is any cycle between folders
(which same-layer includes could still form). A folder missing from the
table is an error too, so that a new folder gets a place in the order.
"""
import os
import re
import shutil
import sys
import tempfile

LAYERS = {
    "util": 0,
    "comm": 1, "config": 1,
    "optim": 2, "model": 2, "data": 2, "io": 2,
    "sift": 3, "distill": 3,
    "train": 4,
    "cmd": 5,
    "": 6,  # files directly in src/ (main.cpp)
}
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(path, root):
    """The top folder of `path` under `root` ('' for a file directly in root)."""
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    return parts[0] if len(parts) > 1 else ""


def label(folder):
    return folder if folder else "src/ (main)"


def edges_of(root):
    """(from_folder, to_folder, file, line number, include text) for every
    quoted include; plus a list of errors for includes that do not resolve."""
    edges, errors = [], []
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    rel = os.path.relpath(path, root)
                    # The build's include root is src/; a bare or relative
                    # name may also be found next to the including file.
                    candidates = [os.path.join(root, inc), os.path.join(dirpath, inc)]
                    target = next((c for c in candidates if os.path.isfile(c)), None)
                    if target is None:
                        errors.append(f"{rel}:{n}: #include \"{inc}\" is not a file under {root}")
                        continue
                    target = os.path.normpath(target)
                    if os.path.relpath(target, root).startswith(".."):
                        errors.append(f"{rel}:{n}: #include \"{inc}\" leaves {root}")
                        continue
                    edges.append((folder_of(path, root), folder_of(target, root), rel, n, inc))
    return edges, errors


def cycles(graph):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root):
    """Returns the list of violations in the tree at `root` (empty: fine)."""
    edges, errors = edges_of(root)
    folders = {e[0] for e in edges} | {e[1] for e in edges}
    for d in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, d)):
            folders.add(d)
    for f in sorted(folders):
        if f not in LAYERS:
            errors.append(f"folder src/{f} has no layer: add it to LAYERS in {os.path.basename(__file__)}")
    graph = {}
    for a, b, rel, n, inc in edges:
        if a == b or a not in LAYERS or b not in LAYERS:
            continue
        graph.setdefault(a, set()).add(b)
        if LAYERS[b] > LAYERS[a]:
            errors.append(f"{rel}:{n}: #include \"{inc}\" goes up from {label(a)} (layer {LAYERS[a]}) "
                          f"to {label(b)} (layer {LAYERS[b]})")
    for comp in cycles(graph):
        where = [f"{rel}:{n} -> {inc}" for a, b, rel, n, inc in edges if a in comp and b in comp and a != b]
        errors.append("include cycle between folders " + ", ".join(label(c) for c in comp) +
                      " (" + "; ".join(where) + ")")
    return errors


def self_test():
    """The checker must pass a clean tree and fail each planted violation."""
    def tree(files):
        d = tempfile.mkdtemp(prefix="check_layers_")
        for rel, text in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        return d

    clean = {
        "util/error.hpp": "#pragma once\n#include <string>\n",
        "util/fs.cpp": '#include "util/error.hpp"\n#include "fs.hpp"\n',
        "util/fs.hpp": "#pragma once\n",
        "comm/world.hpp": '#include "util/error.hpp"\n',
        "io/h5.hpp": '#include "comm/world.hpp"\n',
        "data/dataset.cpp": '#include "io/h5.hpp"\n',           # same layer, one way
        "train/trainer.cpp": '#include "data/dataset.cpp"\n  #  include "util/fs.hpp"\n',
        "cmd/train.cpp": '#include "train/trainer.cpp"\n',
        "main.cpp": '#include "cmd/train.cpp"\n',
    }
    cases = {
        "upward include": ({"util/bad.cpp": '#include "train/trainer.cpp"\n'}, "goes up from util"),
        "main included from below": ({"util/bad.hpp": '#include "main.cpp"\n'}, "goes up from util"),
        "indented upward include": ({"comm/x.cpp": '  #  include "io/h5.hpp"\n'}, "goes up from comm"),
        "same-layer cycle": ({"io/x.hpp": '#include "data/dataset.cpp"\n'}, "include cycle between folders data, io"),
        "unknown folder": ({"extra/x.hpp": '#include "util/error.hpp"\n'}, "folder src/extra has no layer"),
        "dangling include": ({"util/y.cpp": '#include "util/none.hpp"\n'}, "is not a file under"),
    }
    def check_tree(files):
        d = tree(files)
        try:
            return check(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    failures = []
    found = check_tree(clean)
    if found:
        failures.append(f"clean tree reported: {found}")
    for what, (extra, expected) in cases.items():
        found = check_tree({**clean, **extra})
        if not any(expected in e for e in found):
            failures.append(f"{what}: expected an error containing '{expected}', got {found}")
    for f in failures:
        print("FAIL self-test:", f)
    if not failures:
        print(f"OK: self-test: the clean tree passes and all {len(cases)} planted violations are caught")
    return not failures


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        sys.exit(0 if self_test() else 1)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    errors = check(root)
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit(1)
    n = len(edges_of(root)[0])
    print(f"OK: {n} quoted includes under {root} follow the layer order, no cycle between folders")


if __name__ == "__main__":
    main()
