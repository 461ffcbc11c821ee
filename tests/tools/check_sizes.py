"""Keeps the sources readable: no file under src/ over MAX_FILE lines, no
function over MAX_FUNCTION lines, train_main at most MAX_TRAIN_MAIN lines.

  check_sizes.py SRC_DIR [--report N]     exit 1 naming every violation
  check_sizes.py --self-test              the checker finds planted violations

A function is a brace block opened by a line that looks like a definition
(ends with '{', has a parameter list, is not a control statement, a type or
a lambda); its length is counted from that line to its closing brace.
"""
import os
import re
import sys
import tempfile

MAX_FILE, MAX_FUNCTION, MAX_TRAIN_MAIN = 500, 120, 250
NOT_FUNCTIONS = ("if", "for", "while", "switch", "else", "do", "namespace", "class", "struct",
                 "enum", "union", "try", "catch", "}", "//", "#", "return", "[", "extern")


def strip(line):
    line = re.sub(r'"([^"\\]|\\.)*"', '""', line)
    line = re.sub(r"'([^'\\]|\\.)*'", "''", line)
    return line.split("//")[0]


def functions(path):
    """(length, first line number, signature) of each function in `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        s = strip(lines[i]).strip()
        head = s.split("(")[0]
        opens = (s.endswith("{") and not s.startswith(NOT_FUNCTIONS) and "=" not in head
                 and ("(" in s or ")" in s) and not re.search(r"\[[&=]|\]\s*\(|=\s*\[", s))
        if not opens:
            i += 1
            continue
        depth, j = 0, i
        for k in range(i, len(lines)):
            t = strip(lines[k])
            depth += t.count("{") - t.count("}")
            if depth <= 0:
                j = k
                break
        out.append((j - i + 1, i + 1, s[:-1].strip()))
        i = j + 1
    return out


def check(src):
    problems, report = [], []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            n = len(open(path, encoding="utf-8").read().rstrip("\n").split("\n"))
            if n > MAX_FILE:
                problems.append(f"{rel}: {n} lines (at most {MAX_FILE}); split it by concern")
            for length, line, sig in functions(path):
                report.append((length, f"{rel}:{line}", sig))
                limit = MAX_TRAIN_MAIN if re.search(r"\btrain_main\s*\(", sig) else MAX_FUNCTION
                if length > limit:
                    problems.append(f"{rel}:{line}: function of {length} lines (at most {limit}): {sig}")
    report.sort(reverse=True)
    return problems, report


def self_test():
    with tempfile.TemporaryDirectory() as d:
        body = "\n".join(f"  x += {i};" for i in range(130))
        open(os.path.join(d, "long.cpp"), "w").write(
            "int ok(int a) {\n  return a;\n}\n\nint too_long(int x) {\n" + body + "\n  return x;\n}\n")
        open(os.path.join(d, "big.hpp"), "w").write("\n".join("// line" for _ in range(501)) + "\n")
        problems, report = check(d)
        assert any("too_long" in p for p in problems), problems
        assert any("big.hpp: 501 lines" in p for p in problems), problems
        assert not any("ok(" in p for p in problems), problems
        assert report[0][0] == 133, report[0]
    print("self-test passed: planted long function and long file found")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    src = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--report") + 1]) if "--report" in sys.argv else 3
    problems, report = check(src)
    print("longest functions:")
    for length, where, sig in report[:top]:
        print(f"  {length:4d} lines  {where}  {sig}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)
