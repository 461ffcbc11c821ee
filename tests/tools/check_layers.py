"""Checks that the folders under src/ include each other one way only, in the
order docs/layout.md states (the one place that order is written).

    check_layers.py SRC_DIR [--doc LAYOUT_MD]
                                  checks the tree against the order of LAYOUT_MD
                                  (default: SRC_DIR/../docs/layout.md); exit 1
                                  listing every violation
    check_layers.py --self-test   checks the checker on small trees it writes
                                  (a clean one passes; a planted upward include,
                                  a same-layer include, a cycle, an unknown
                                  folder, a dangling include, a doc whose order
                                  the code breaks, a doc naming a folder src/
                                  lacks and a doc whose table disagrees with its
                                  order each fail)

The order is the line of docs/layout.md's first fenced block that reads
`util  <  comm, config  <  ...`: layers from low to high separated by '<',
the folders of one layer by ','; files directly in src/ (main.cpp) are above
every layer. The table below it gives each src/ folder's layer number, which
must be its place in that line.

Every `#include "..."` of every file under SRC_DIR is resolved to the folder
it names (the first path component, as the build's include root is src/, or
the including file's own folder for a bare name). A file may include its own
folder or a lower layer; an include of the same or a higher layer is an
error, and so is any cycle between folders. A folder of src/ missing from the
order is an error, and so is a folder in the order that src/ lacks, so that
the doc says what the code is.
"""
import os
import re
import shutil
import sys
import tempfile

ORDER_LINE = re.compile(r"^\s*[a-z_]+(\s*,\s*[a-z_]+)*(\s*<\s*[a-z_]+(\s*,\s*[a-z_]+)*)+\s*$")
TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`src/([a-z_]+)/`\s*\|")


class DocError(Exception):
    """docs/layout.md without a readable order."""


def read_layers(doc):
    """{folder: layer} from docs/layout.md's order line (layer 0 the lowest; '' for files
    directly in src/, above all), and the errors of its table's layer numbers."""
    try:
        text = open(doc, encoding="utf-8").read()
    except OSError as e:
        raise DocError(f"{doc}: {e.strerror}")
    in_block, line = False, None
    for raw in text.split("\n"):
        if raw.strip().startswith("```"):
            in_block = not in_block
            continue
        if in_block and ORDER_LINE.match(raw):
            line = raw
            break
    if line is None:
        raise DocError(f"{doc}: no layer order (a fenced line like 'util  <  comm, config  <  ...')")
    layers = {}
    for i, group in enumerate(line.split("<")):
        for folder in group.split(","):
            folder = folder.strip()
            if folder in layers:
                raise DocError(f"{doc}: {folder} appears twice in the layer order")
            layers[folder] = i
    layers[""] = len(line.split("<"))
    errors = []
    for raw in text.split("\n"):
        m = TABLE_ROW.match(raw)
        if not m:
            continue
        n, folder = int(m.group(1)), m.group(2)
        if folder not in layers:
            errors.append(f"{doc}: the table gives src/{folder}/ layer {n}, but the order does not name it")
        elif n != layers[folder] + 1:
            errors.append(f"{doc}: the table gives src/{folder}/ layer {n}, the order {layers[folder] + 1}")
    return layers, errors


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


def check(root, doc):
    """Returns the list of violations in the tree at `root` against the order of `doc`."""
    try:
        layers, errors = read_layers(doc)
    except DocError as e:
        return [str(e)]
    edges, dangling = edges_of(root)
    errors += dangling
    folders = {e[0] for e in edges} | {e[1] for e in edges}
    for d in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, d)):
            folders.add(d)
    for f in sorted(folders):
        if f not in layers:
            errors.append(f"folder src/{f} has no layer: add it to the order in {doc}")
    for f in sorted(layers):
        if f and f not in folders:
            errors.append(f"{doc} orders a folder src/{f} that does not exist")
    graph = {}
    for a, b, rel, n, inc in edges:
        if a == b or a not in layers or b not in layers:
            continue
        graph.setdefault(a, set()).add(b)
        if layers[b] > layers[a]:
            errors.append(f"{rel}:{n}: #include \"{inc}\" goes up from {label(a)} (layer {layers[a] + 1}) "
                          f"to {label(b)} (layer {layers[b] + 1}) against {doc}")
        elif layers[b] == layers[a]:
            errors.append(f"{rel}:{n}: #include \"{inc}\": {label(a)} includes {label(b)} of its own layer "
                          f"({layers[a] + 1}); {doc} must put {label(b)} below {label(a)}")
    for comp in cycles(graph):
        where = [f"{rel}:{n} -> {inc}" for a, b, rel, n, inc in edges if a in comp and b in comp and a != b]
        errors.append("include cycle between folders " + ", ".join(label(c) for c in comp) +
                      " (" + "; ".join(where) + ")")
    return errors


DOC_ORDER = "util  <  comm  <  io, data  <  train  <  cmd"
DOC = ("# Source layout\n\nThe order:\n\n```\n{order}\n```\n\n| layer | path | what |\n|---:|---|---|\n"
       "| 1 | `src/util/` | errors |\n| 2 | `src/comm/` | MPI |\n| 3 | `src/io/` | HDF5 |\n"
       "| 3 | `src/data/` | datasets |\n| 4 | `src/train/` | the job |\n| 5 | `src/cmd/` | commands |\n"
       "| | `src/main.cpp` | dispatch |\n")


def self_test():
    """The checker must pass a clean tree and fail each planted violation."""
    def tree(files, doc):
        d = tempfile.mkdtemp(prefix="check_layers_")
        for rel, text in {**files, "docs/layout.md": doc}.items():
            p = os.path.join(d, rel if rel.startswith("docs/") else os.path.join("src", rel))
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
        "data/dataset.cpp": '#include "comm/world.hpp"\n',
        "train/trainer.cpp": '#include "data/dataset.cpp"\n  #  include "util/fs.hpp"\n#include "io/h5.hpp"\n',
        "cmd/train.cpp": '#include "train/trainer.cpp"\n',
        "main.cpp": '#include "cmd/train.cpp"\n',
    }
    doc = DOC.format(order=DOC_ORDER)
    cases = {
        "upward include": ({"util/bad.cpp": '#include "train/trainer.cpp"\n'}, doc, "goes up from util"),
        "main included from below": ({"util/bad.hpp": '#include "main.cpp"\n'}, doc, "goes up from util"),
        "indented upward include": ({"comm/x.cpp": '  #  include "io/h5.hpp"\n'}, doc, "goes up from comm"),
        "same-layer include": ({"data/x.hpp": '#include "io/h5.hpp"\n'}, doc,
                               "data includes io of its own layer (3)"),
        "cycle": ({"data/x.hpp": '#include "io/h5.hpp"\n', "io/y.hpp": '#include "data/dataset.cpp"\n'}, doc,
                  "include cycle between folders data, io"),
        "unknown folder": ({"extra/x.hpp": '#include "util/error.hpp"\n'}, doc, "folder src/extra has no layer"),
        "dangling include": ({"util/y.cpp": '#include "util/none.hpp"\n'}, doc, "is not a file under"),
        # The doc's order edited so that the code breaks it: io above train.
        "doc order the code breaks": ({}, DOC.format(order="util  <  comm  <  data  <  train  <  io  <  cmd"),
                                      "goes up from train (layer 4) to io (layer 5)"),
        "doc naming a folder src/ lacks": ({}, DOC.format(order=DOC_ORDER + "  <  tools"),
                                           "orders a folder src/tools that does not exist"),
        "doc's table against its order": ({}, doc.replace("| 4 | `src/train/`", "| 3 | `src/train/`"),
                                          "the table gives src/train/ layer 3, the order 4"),
        "doc without an order": ({}, doc.replace("```", ""), "no layer order"),
    }

    def check_tree(files, doc):
        d = tree(files, doc)
        try:
            return check(os.path.join(d, "src"), os.path.join(d, "docs", "layout.md"))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    failures = []
    found = check_tree(clean, doc)
    if found:
        failures.append(f"clean tree reported: {found}")
    for what, (extra, case_doc, expected) in cases.items():
        found = check_tree({**clean, **extra}, case_doc)
        if not any(expected in e for e in found):
            failures.append(f"{what}: expected an error containing '{expected}', got {found}")
    for f in failures:
        print("FAIL self-test:", f)
    if not failures:
        print(f"OK: self-test: the clean tree passes and all {len(cases)} planted violations are caught")
    return not failures


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    doc = None
    if len(args) == 3 and args[1] == "--doc":
        doc = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit(__doc__)
    root = args[0]
    if doc is None:
        doc = os.path.join(os.path.dirname(os.path.abspath(root)), "docs", "layout.md")
    errors = check(root, doc)
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit(1)
    n = len(edges_of(root)[0])
    order = "  <  ".join(", ".join(f for f, i in read_layers(doc)[0].items() if i == k and f)
                         for k in range(max(read_layers(doc)[0].values())))
    print(f"OK: {n} quoted includes under {root} follow the layer order of {doc}: {order}")


if __name__ == "__main__":
    main()
