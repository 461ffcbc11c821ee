"""The whole configuration (`Config`, src/config/config.hpp) is seen at the
configuration's edge only: src/config/ itself, the commands (src/cmd/) and the
training job's builders (src/train/setup.hpp declares them, src/train/setup.cpp
defines them). Every other file under src/ takes narrow specs the builders
make (ModelSpec, AugmentSpec, TeacherSpec, TrainPlan, StepSpec, ...), so that
what a layer reads of the configuration is written in its own signature.

  check_config_scope.py SRC_DIR       exit 1 naming each file outside those that
                                      includes "config/config.hpp" (directly, or
                                      through a header of src/ that does) or names
                                      the type Config in code
  check_config_scope.py --self-test   the checker passes a clean tree and finds
                                      each planted violation

Comments and string literals are not code: a comment may speak of Config.
`ConfigKeyInfo` and other longer names are other types.
"""
import os
import re
import shutil
import sys
import tempfile

HEADER = "config/config.hpp"
# Relative to SRC_DIR: the folders whose files may see Config, and single files.
ALLOWED_DIRS = ("config", "cmd")
ALLOWED_FILES = ("train/setup.hpp", "train/setup.cpp", "train/setup_echo.cpp")
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
NAMES_CONFIG = re.compile(r"\bConfig\b")
RULE = ("only src/config/, src/cmd/ and src/train/setup{.hpp,.cpp,_echo.cpp} may see Config: take a narrow spec "
        "built by a builder of src/train/setup.cpp (docs/layout.md)")


def allowed(rel):
    parts = rel.split("/")
    return (len(parts) > 1 and parts[0] in ALLOWED_DIRS) or rel in ALLOWED_FILES


def code_of(text):
    """`text` with comments and string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def sources(src):
    """{path relative to src with '/': text} of every C/C++ file under src."""
    found = {}
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if name.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    found[rel] = f.read()
    return found


def resolve(rel, inc, files):
    """The file under src an include names (the include root is src/, or the includer's folder)."""
    here = os.path.dirname(rel)
    for cand in (inc, os.path.normpath(os.path.join(here, inc)).replace(os.sep, "/")):
        if cand in files:
            return cand
    return None


def violations(src):
    files = sources(src)
    if HEADER not in files:
        return [f"{src}/{HEADER} does not exist; the configuration moved and this check must follow it"]
    includes = {rel: [(text.count("\n", 0, m.start()) + 1, resolve(rel, m.group(1), files))
                      for m in INCLUDE.finditer(text)] for rel, text in files.items()}

    # The headers through which Config arrives: config.hpp and whatever includes one of them.
    via = {HEADER: [HEADER]}
    changed = True
    while changed:
        changed = False
        for rel in sorted(files):
            if rel in via:
                continue
            for _, target in includes[rel]:
                if target in via:
                    via[rel] = [rel] + via[target]
                    changed = True
                    break

    found = []
    for rel in sorted(files):
        if allowed(rel):
            continue
        for line, target in includes[rel]:
            if target in via:
                chain = " -> ".join(via[target])
                found.append(f"{rel}:{line}: includes {chain}; {RULE}")
        code = code_of(files[rel])
        for m in NAMES_CONFIG.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            found.append(f"{rel}:{line}: names the type Config; {RULE}")
    return found


def self_test():
    clean = {
        "config/config.hpp": "#pragma once\nstruct Config { int x; };\n",
        "config/config.cpp": '#include "config/config.hpp"\nConfig parse();\n',
        "cmd/train.cpp": '#include "config/config.hpp"\n#include "train/setup.hpp"\nConfig c;\n',
        "train/setup.hpp": "#pragma once\nstruct Config;\nstruct StepSpec {};\nStepSpec step_spec(const Config&);\n",
        "train/setup.cpp": '#include "train/setup.hpp"\n#include "config/config.hpp"\n',
        "train/step.cpp": ('#include "train/setup.hpp"\n// built from the Config in setup.cpp\n'
                           '/* Config\n*/ const char* s = "Config";\nstruct ConfigKeyInfo; int Configs;\n'),
    }
    cases = {
        "direct include": ({"train/report.cpp": '#include "config/config.hpp"\n'},
                           "train/report.cpp:1: includes config/config.hpp"),
        "include through a header": ({"train/spec.hpp": '#include "config/config.hpp"\n',
                                      "train/report.cpp": '\n#include "train/spec.hpp"\n'},
                                     "train/report.cpp:2: includes train/spec.hpp -> config/config.hpp"),
        "allowed header that includes it": ({"train/setup.hpp": '#include "config/config.hpp"\n'},
                                            "train/step.cpp:1: includes train/setup.hpp -> config/config.hpp"),
        "the type named": ({"data/loader.hpp": "\nvoid f(const Config& c);\n"},
                           "data/loader.hpp:2: names the type Config"),
        "the type named after a comment": ({"train/trainer.cpp": "/* x */ int train_main(const vitkd::Config&);\n"},
                                           "train/trainer.cpp:1: names the type Config"),
        "main.cpp": ({"main.cpp": '#include "config/config.hpp"\n'}, "main.cpp:1: includes config/config.hpp"),
    }

    def run(files):
        d = tempfile.mkdtemp(prefix="check_config_scope_")
        try:
            for rel, text in files.items():
                p = os.path.join(d, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as f:
                    f.write(text)
            return violations(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    failures = []
    found = run(clean)
    if found:
        failures.append(f"clean tree reported: {found}")
    for what, (extra, expected) in cases.items():
        found = run({**clean, **extra})
        if not any(e.startswith(expected) for e in found):
            failures.append(f"{what}: expected an error starting '{expected}', got {found}")
    for f in failures:
        print("FAIL self-test:", f)
    if not failures:
        print(f"OK: self-test: the clean tree passes and all {len(cases)} planted violations are caught")
    return not failures


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    if len(args) != 1:
        sys.exit(__doc__)
    found = violations(args[0])
    for e in found:
        print("FAIL:", e)
    if found:
        sys.exit(1)
    n = sum(1 for rel in sources(args[0]) if not allowed(rel))
    print(f"OK: none of the {n} files under {args[0]} outside src/config/, src/cmd/ and "
          f"src/train/setup.{{hpp,cpp}} includes {HEADER} or names Config")


if __name__ == "__main__":
    main()
