"""Each configuration choice's words are spelled once: in src/config/ (the
table in choices.cpp, the parser and the key table). Elsewhere in src/ code
names a choice by its enum and prints it through choice_name(); a word written
as a string literal outside src/config/ is a second spelling that can drift.

  check_choices.py SRC_DIR        exit 1 naming each literal outside src/config/
  check_choices.py --self-test    the checker finds a planted spelling

Comments are not code and are skipped. Lines that name an HDF5 attribute
(h5_attr_*) use a file format's names, which may coincide with a word, as do
the dataset's split names (SPLIT_NAMES); ALLOWED lists the other
coincidences, each with its reason.
"""
import os
import re
import sys
import tempfile

# (file relative to SRC_DIR, word): why that literal is not the option's word.
ALLOWED = {
    ("cmd/commands.hpp", "none"): "bench loader --crop's word for the evaluation view, beside data.crop's",
    ("model/precision.cpp", "none"): "the CPU's bf16 flags when it has none",
    ("cmd/command_table.cpp", "auto"): "bench adamw --device-update's own choice (tensor, kokkos-device)",
}
# Words that are also the dataset file's split names (data/dataset.hpp: /train,
# /val, /test), which data.eval_split's words name by design.
SPLIT_NAMES = {"test", "val"}


def words(src):
    """The configurable words of choices.cpp's rows."""
    text = open(os.path.join(src, "config", "choices.cpp"), encoding="utf-8").read()
    rows = re.findall(r'\{\s*\w+::\w+,\s*"([^"]+)"(\s*,\s*false)?\s*\}', text)
    return {w for w, fixed in rows if not fixed} - SPLIT_NAMES


def code(line):
    """The line without its // comment (string literals kept)."""
    out, quoted, i = [], False, 0
    while i < len(line):
        c = line[i]
        if quoted and c == "\\":
            out.append(line[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


def violations(src):
    found = []
    ws = words(src)
    if len(ws) < 20:
        return [f"{src}/config/choices.cpp: only {len(ws)} words read; the table's form changed"]
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            if rel.startswith("config" + os.sep):
                continue
            in_block = False
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                s = line.strip()
                if in_block or s.startswith("/*"):
                    in_block = "*/" not in s
                    continue
                c = code(line)
                if "h5_attr_" in c:
                    continue
                literals = re.findall(r'"((?:[^"\\]|\\.)*)"', c)
                quoted = [q for lit in literals for q in re.findall(r'\\"([^"\\]*)\\"', lit)]
                for w in [lit for lit in literals if "\\" not in lit] + quoted:
                    if w in ws and (rel, w) not in ALLOWED:
                        found.append(f'{rel}:{n}: "{w}" is a configuration choice\'s word; name the enum '
                                     f"(config/choices.hpp) and print it with choice_name()")
    return found


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "..", "src")
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "config"))
        os.makedirs(os.path.join(d, "data"))
        with open(os.path.join(src, "config", "choices.cpp"), encoding="utf-8") as f:
            table = f.read()
        open(os.path.join(d, "config", "choices.cpp"), "w").write(table)
        ok = os.path.join(d, "data", "ok.cpp")
        open(ok, "w").write('// data.crop = "random_resized" in a comment\nint f() { return 0; }\n'
                            'void g() { h5_attr_write(f, "teacher", t); }\n')
        if violations(d):
            print("self-test: comments and attribute names were reported:", violations(d))
            return 1
        open(os.path.join(d, "data", "bad.cpp"), "w").write(
            'bool f(const std::string& c) { return c == "random_resized"; }  // "pad"\n'
            'std::string g() { return "set data.policy = \\"trivial_augment\\" here"; }\n')
        v = violations(d)
        if len(v) != 2 or "bad.cpp:1" not in v[0] or "random_resized" not in v[0] or "trivial_augment" not in v[1]:
            print("self-test: the planted spellings (a literal, a word quoted in a message) were not found:", v)
            return 1
    print("self-test: the planted spellings found (a literal, a word quoted in a message); comments and attribute names pass")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = violations(sys.argv[1])
    for v in found:
        print(v)
    if not found:
        print(f"{len(words(sys.argv[1]))} choice words: each spelled only in src/config/")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
