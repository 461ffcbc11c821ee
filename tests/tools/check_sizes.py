"""Keeps the sources readable: no C++, Python or shell file over MAX_FILE lines
in the folders checked (src/, tests/, analysis/, benchmarks/, jobs/,
experiments/), no C++ function over MAX_FUNCTION lines, train_main at most
MAX_TRAIN_MAIN lines.

  check_sizes.py DIR... [--report N]      exit 1 naming every violation
  check_sizes.py --self-test              the checker finds planted violations

Each DIR is walked (hidden folders and __pycache__ left out) and its files
named from DIR's own name on (src/train/trainer.cpp). A function is a brace
block opened by a line that looks like a definition (ends with '{', has a
parameter list, is not a control statement, a type or a lambda); its length
is counted from that line to its closing brace.
"""
import os
import re
import sys
import tempfile

MAX_FILE, MAX_FUNCTION, MAX_TRAIN_MAIN = 500, 120, 250
CPP = (".cpp", ".hpp", ".h", ".cu", ".cuh")   # file and function limits
SIZED = CPP + (".c", ".py", ".sh", ".sbatch")  # the file limit: C++, C, Python, shell
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


def check(*dirs):
    problems, report = [], []
    for top in dirs:
        top = os.path.normpath(top)
        for root, subdirs, files in os.walk(top):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(SIZED):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(top))
                n = len(open(path, encoding="utf-8").read().rstrip("\n").split("\n"))
                if n > MAX_FILE:
                    problems.append(f"{rel}: {n} lines (at most {MAX_FILE}); split it by concern")
                if not name.endswith(CPP):
                    continue
                for length, line, sig in functions(path):
                    report.append((length, f"{rel}:{line}", sig))
                    limit = MAX_TRAIN_MAIN if re.search(r"\btrain_main\s*\(", sig) else MAX_FUNCTION
                    if length > limit:
                        problems.append(f"{rel}:{line}: function of {length} lines (at most {limit}): {sig}")
    report.sort(reverse=True)
    return problems, report


def self_test():
    with tempfile.TemporaryDirectory() as d:
        src, jobs = os.path.join(d, "src"), os.path.join(d, "jobs")
        os.makedirs(os.path.join(src, "train"))
        os.makedirs(os.path.join(jobs, "lanes"))
        body = "\n".join(f"  x += {i};" for i in range(130))
        open(os.path.join(src, "train", "long.cpp"), "w").write(
            "int ok(int a) {\n  return a;\n}\n\nint too_long(int x) {\n" + body + "\n  return x;\n}\n")
        open(os.path.join(src, "big.hpp"), "w").write("\n".join("// line" for _ in range(501)) + "\n")
        # A Python and a shell file of 501 lines are too long; a Python function of
        # 130 lines is not checked (the function limit is C++'s), nor a long data file.
        py = "def long_python():\n" + "\n".join(f"    x = {i}" for i in range(130)) + "\n"
        open(os.path.join(jobs, "tool.py"), "w").write(py + "\n".join("# line" for _ in range(501 - 131)) + "\n")
        open(os.path.join(jobs, "lanes", "lane.sh"), "w").write("\n".join("echo" for _ in range(501)) + "\n")
        open(os.path.join(jobs, "lanes", "short.sh"), "w").write("\n".join("echo" for _ in range(500)) + "\n")
        open(os.path.join(jobs, "table.json"), "w").write("\n".join("1," for _ in range(900)) + "\n")
        problems, report = check(src, jobs)
        assert any("src/train/long.cpp:5: function of 133 lines" in p and "too_long" in p for p in problems), problems
        assert any(p.startswith("src/big.hpp: 501 lines") for p in problems), problems
        assert any(p.startswith("jobs/tool.py: 501 lines") for p in problems), problems
        assert any(p.startswith("jobs/lanes/lane.sh: 501 lines") for p in problems), problems
        assert not any("ok(" in p or "short.sh" in p or "table.json" in p or "long_python" in p
                       for p in problems), problems
        assert len(problems) == 4, problems
        assert report[0][0] == 133, report[0]
    print("self-test passed: planted long C++ function and long C++, Python and shell files found")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    args = sys.argv[1:]
    top = 3
    if "--report" in args:
        i = args.index("--report")
        top = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        sys.exit("usage: check_sizes.py DIR... [--report N] | --self-test")
    problems, report = check(*args)
    print("longest functions:")
    for length, where, sig in report[:top]:
        print(f"  {length:4d} lines  {where}  {sig}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)
