#!/usr/bin/env python3
"""Checks vitkd's Spack support without Spack.

    python3 tests/spack/check_spack.py SRC_DIR

1. spack.yaml (PyYAML): the environment lists every dependency and vitkd,
   unifies, has a view, and its "repos" entry is the in-tree repository.
2. spack/repo/packages/vitkd/package.py, imported against small stand-ins for
   Spack >= 1.0's package API (tests/spack/spack_standins.py: spack.package
   and spack_repo.builtin.build_systems): class Vitkd(CMakePackage, CudaPackage),
   its depends_on directives, and cmake_args() for ~cuda and +cuda.
3. Where the recipe finds TorchConfig.cmake: a fake py-torch or LibTorch
   prefix for each layout (site-packages, Debian's dist-packages,
   share/cmake/Torch, lib*/cmake/Torch, lib/<triplet>/cmake/Torch), and one
   error naming every place looked in when there is none.
4. The recipe's depends_on/conflicts directives, evaluated by a small matcher
   against concrete configurations: Serial, OpenMP and CUDA Kokkos accepted
   where they should be (CUDA Kokkos: vitkd+cuda, the same cuda_arch, C++20),
   C++20 compilers accepted and older ones refused.
5. .gitignore covers what `spack -e .` writes (.spack-env/, spack.lock).

Prints one summary line; exits 0 when everything holds, 1 otherwise (each
failure on its own line), 2 on bad usage.
"""

import fnmatch
import os
import re
import sys
import tempfile
import traceback
import types

sys.dont_write_bytecode = True  # importing the recipe must not litter the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spack_standins import (CMakePackage, CudaPackage, TORCH_LAYOUTS, defines, fake_spec,  # noqa: E402
                            load_recipe, make_torch_at, make_torch_prefix)


FAILURES = []


def check(cond, message):
    if not cond:
        FAILURES.append(message)
    return bool(cond)


def spec_name(spec):
    """'hdf5+mpi' -> 'hdf5', 'vitkd@main +cuda' -> 'vitkd'."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]*)", spec)
    return m.group(1) if m else ""


def spec_tokens(spec):
    """'hdf5 +mpi~cxx cuda_arch=90' -> {'+mpi', '~cxx', 'cuda_arch=90', ...}."""
    return set(re.findall(r"[+~][A-Za-z0-9_]+|[A-Za-z0-9_]+=[^\s+~]+", spec))


# ---------------------------------------------------------------------------
# 1. spack.yaml
# ---------------------------------------------------------------------------
def check_environment(src):
    try:
        import yaml
    except ImportError:
        print(f"SKIP: {sys.executable} lacks PyYAML (Debian: python3-yaml; Spack: py-pyyaml)")
        sys.exit(77)
    path = os.path.join(src, "spack.yaml")
    if not check(os.path.isfile(path), f"{path}: no such file"):
        return None
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except yaml.YAMLError as e:
        FAILURES.append(f"spack.yaml: not valid YAML: {e}")
        return None
    if not check(isinstance(doc, dict) and isinstance(doc.get("spack"), dict),
                 "spack.yaml: no top-level 'spack:' mapping"):
        return None
    env = doc["spack"]

    specs = env.get("specs")
    if not check(isinstance(specs, list) and all(isinstance(s, str) for s in specs),
                 "spack.yaml: spack.specs is not a list of spec strings"):
        specs = []
    names = {spec_name(s) for s in specs}
    for want in ("openmpi", "hdf5", "kokkos", "py-torch", "cmake", "googletest",
                 "tomlplusplus", "zlib", "vitkd"):
        check(want in names, f"spack.yaml: spack.specs lacks {want} (has {sorted(names)})")
    # OpenMP Kokkos (threads for the host kernels), asked for or preferred
    # (packages: kokkos: variants), so that an external Serial Kokkos still serves.
    kokkos = [s for s in specs if spec_name(s) == "kokkos"]
    prefs = ((env.get("packages") or {}).get("kokkos") or {}).get("variants") or ""
    prefs = " ".join(prefs) if isinstance(prefs, list) else str(prefs)
    check(any("+openmp" in spec_tokens(s) for s in kokkos) or "+openmp" in spec_tokens(prefs),
          f"spack.yaml: kokkos +openmp is neither asked for nor preferred (specs {kokkos}, variants {prefs!r})")
    hdf5 = [s for s in specs if spec_name(s) == "hdf5"]
    check(any("+mpi" in spec_tokens(s) for s in hdf5),
          f"spack.yaml: the hdf5 spec must ask for +mpi (got {hdf5})")

    concretizer = env.get("concretizer") or {}
    check(isinstance(concretizer, dict) and concretizer.get("unify") is True,
          "spack.yaml: spack.concretizer.unify must be true")
    check(env.get("view") not in (None, False), "spack.yaml: spack.view must be set (true)")

    # repos: the old list form or the Spack 1.x mapping form (name: path).
    repos = env.get("repos")
    if isinstance(repos, dict):
        repos = [v for v in repos.values() if isinstance(v, str)]
    if not check(isinstance(repos, list) and repos, "spack.yaml: spack.repos is missing or empty"):
        return env
    base = os.path.dirname(os.path.abspath(path))
    repo_dirs = []
    for entry in repos:
        p = re.sub(r"^\$(env|\{env\})(?=/|$)", base.replace("\\", "/"), entry)
        p = os.path.normpath(os.path.join(base, os.path.expanduser(p)))
        if os.path.isfile(os.path.join(p, "repo.yaml")):
            repo_dirs.append(p)
    if check(repo_dirs, f"spack.yaml: no spack.repos entry {repos} is a directory holding repo.yaml"):
        with open(os.path.join(repo_dirs[0], "repo.yaml")) as f:
            repo_doc = yaml.safe_load(f) or {}
        ns = (repo_doc.get("repo") or {}).get("namespace")
        check(ns == "vitkd", f"{repo_dirs[0]}/repo.yaml: namespace is {ns!r}, expected 'vitkd'")
        check(os.path.isfile(os.path.join(repo_dirs[0], "packages", "vitkd", "package.py")),
              f"{repo_dirs[0]}: no packages/vitkd/package.py")

    develop = (env.get("develop") or {}).get("vitkd")
    if develop is not None:
        dev = os.path.normpath(os.path.join(base, develop.get("path", "")))
        check(os.path.isfile(os.path.join(dev, "CMakeLists.txt")),
              f"spack.yaml: develop.vitkd.path -> {dev}, which holds no CMakeLists.txt")
    return env


# ---------------------------------------------------------------------------
# 2. Stand-ins for the parts of Spack's package API the recipe uses
# ---------------------------------------------------------------------------
def parse_spec(text):
    """'kokkos+cuda cuda_arch=90 ^cuda@12: %gcc@:9' ->
    [('root', 'kokkos', None, {...}), ('dep', 'cuda', '12:', {}), ('compiler', 'gcc', ':9', {})]."""
    clauses = []
    kind = "root"
    for chunk in re.findall(r"[\^%]?[^\s^%]+", text.strip()):
        if chunk[0] in "^%":
            kind = "dep" if chunk[0] == "^" else "compiler"
            chunk = chunk[1:]
            clauses.append([kind, "", None, {}])
        elif not clauses:
            clauses.append(["root", "", None, {}])
        cur = clauses[-1]
        m = re.match(r"([A-Za-z][A-Za-z0-9_-]*)?(@[^\s+~]*)?(.*)$", chunk)
        if "=" in chunk and not chunk.startswith(("+", "~")):
            key, value = chunk.split("=", 1)
            cur[3][key] = value
            continue
        name, version, rest = m.groups()
        if name:
            cur[1] = name
        if version:
            cur[2] = version[1:]
        for sign, var in re.findall(r"([+~])([A-Za-z0-9_]+)", rest or ""):
            cur[3][var] = sign == "+"
    return [tuple(c) for c in clauses]


def version_in(version, rng):
    """'12.2.0' in '10:' / ':9' / '9.1:9.4' (Spack's prefix semantics)."""
    have = tuple(int(x) for x in version.split("."))
    lo, _, hi = rng.partition(":") if ":" in rng else (rng, "", rng)
    lo = tuple(int(x) for x in lo.split(".")) if lo else None
    hi = tuple(int(x) for x in hi.split(".")) if hi else None
    return (lo is None or have[:len(lo)] >= lo) and (hi is None or have[:len(hi)] <= hi)


def node_matches(node, variants, version=None):
    if node is None:
        return False
    if version is not None and not version_in(node.get("@", "0"), version):
        return False
    for key, want in variants.items():
        have = node.get(key, False if isinstance(want, bool) else None)
        if isinstance(want, bool):
            if bool(have) != want:
                return False
        elif want not in ([str(h) for h in have] if isinstance(have, (list, tuple)) else [str(have)]):
            return False
    return True


def config_matches(config, text, root="vitkd"):
    """Does the configuration satisfy the spec `text`, read as a constraint on `root`?"""
    for kind, name, version, variants in parse_spec(text or ""):
        if kind == "root":
            node = config.get(name or root)
        elif kind == "dep":
            node = config.get(name)
        else:
            compiler_name, compiler_version = config["%"]
            if name != compiler_name or (version and not version_in(compiler_version, version)):
                return False
            continue
        if not node_matches(node, variants, version):
            return False
    return True


def violations(config, directives):
    """The directives a configuration breaks: conflicts that hold, and
    depends_on (on a node the configuration has) or requires that do not."""
    out = []
    for kind, args, kwargs in directives:
        when = kwargs.get("when") or ""
        if kind not in ("conflicts", "depends_on", "requires") or not args:
            continue
        if not config_matches(config, when):
            continue
        if kind == "conflicts" and config_matches(config, args[0]):
            out.append(f"conflicts({args[0]!r}, when={when!r})")
        elif kind == "requires" and not any(config_matches(config, a) for a in args):
            out.append(f"requires{args!r} when={when!r}")
        elif kind == "depends_on":
            name = spec_name(args[0])
            if name in config and not config_matches(config, args[0], root=name):
                out.append(f"depends_on({args[0]!r}, when={when!r})")
    return out


def kokkos(**variants):
    node = {"@": "4.6.2", "cxxstd": "17", "serial": True}
    node.update(variants)
    return node


# label, vitkd variants, kokkos node, compiler, accepted?
CONSTRAINT_CASES = [
    ("~cuda, Serial Kokkos (Spack's default)", {}, kokkos(), ("gcc", "12.2.0"), True),
    ("~cuda, Debian's Kokkos 3.4 (Serial, C++14)", {}, kokkos(**{"@": "3.4.1", "cxxstd": "14"}),
     ("gcc", "12.2.0"), True),
    ("~cuda, OpenMP Kokkos", {}, kokkos(serial=False, openmp=True), ("gcc", "12.2.0"), True),
    ("~cuda, OpenMP Kokkos, C++20", {}, kokkos(serial=False, openmp=True, cxxstd="20"),
     ("gcc", "12.2.0"), True),
    ("+cuda cuda_arch=90, Serial Kokkos", {"cuda": True, "cuda_arch": ("90",)}, kokkos(),
     ("gcc", "12.2.0"), True),
    ("+cuda cuda_arch=90, OpenMP Kokkos", {"cuda": True, "cuda_arch": ("90",)},
     kokkos(serial=False, openmp=True), ("gcc", "12.2.0"), True),
    ("+cuda cuda_arch=90, CUDA Kokkos cuda_arch=90 C++20 +cuda_lambda+wrapper",
     {"cuda": True, "cuda_arch": ("90",)},
     kokkos(cuda=True, cuda_arch="90", cxxstd="20", cuda_lambda=True, wrapper=True), ("gcc", "12.2.0"), True),
    ("~cuda, Serial Kokkos, %gcc@10.5", {}, kokkos(), ("gcc", "10.5.0"), True),
    ("~cuda, Serial Kokkos, %clang@16", {}, kokkos(), ("clang", "16.0.6"), True),
    ("~cuda, CUDA Kokkos (would need a GPU to start)", {},
     kokkos(cuda=True, cuda_arch="90", cxxstd="20", cuda_lambda=True, wrapper=True), ("gcc", "12.2.0"), False),
    ("+cuda cuda_arch=90, CUDA Kokkos cuda_arch=80", {"cuda": True, "cuda_arch": ("90",)},
     kokkos(cuda=True, cuda_arch="80", cxxstd="20", cuda_lambda=True, wrapper=True), ("gcc", "12.2.0"), False),
    ("+cuda cuda_arch=90, CUDA Kokkos with cxxstd=17", {"cuda": True, "cuda_arch": ("90",)},
     kokkos(cuda=True, cuda_arch="90", cxxstd="17", cuda_lambda=True, wrapper=True), ("gcc", "12.2.0"), False),
    ("+cuda cuda_arch=90, CUDA Kokkos without device lambdas", {"cuda": True, "cuda_arch": ("90",)},
     kokkos(cuda=True, cuda_arch="90", cxxstd="20", cuda_lambda=False, wrapper=True), ("gcc", "12.2.0"), False),
    ("+cuda cuda_arch=90, CUDA Kokkos +cmake_lang", {"cuda": True, "cuda_arch": ("90",)},
     kokkos(cuda=True, cuda_arch="90", cxxstd="20", cuda_lambda=True, cmake_lang=True), ("gcc", "12.2.0"), False),
    ("+cuda cuda_arch=none", {"cuda": True, "cuda_arch": ("none",)}, kokkos(), ("gcc", "12.2.0"), False),
    ("~cuda, %gcc@9.4 (no C++20)", {}, kokkos(), ("gcc", "9.4.0"), False),
    ("~cuda, %gcc@8.5 (no C++20)", {}, kokkos(), ("gcc", "8.5.0"), False),
    ("~cuda, %clang@9 (no C++20)", {}, kokkos(), ("clang", "9.0.1"), False),
]


def check_constraints(where, directives):
    for label, vitkd_variants, kokkos_node, compiler, accepted in CONSTRAINT_CASES:
        config = {"vitkd": dict({"cuda": False, "cuda_arch": ("none",)}, **vitkd_variants),
                  "kokkos": kokkos_node, "%": compiler}
        broken = violations(config, directives)
        if accepted:
            check(not broken, f"{where}: {label}: should be accepted, but breaks {broken}")
        else:
            check(broken, f"{where}: {label}: should be refused, but no directive refuses it")
    return len(CONSTRAINT_CASES)


def check_recipe(src):
    path = os.path.join(src, "spack", "repo", "packages", "vitkd", "package.py")
    if not check(os.path.isfile(path), f"{path}: no such file"):
        return 0, 0, 0
    where = os.path.relpath(path, src)
    try:
        module, directives = load_recipe(path)
    except Exception:
        FAILURES.append(f"{where}: import against the Spack stand-ins failed:\n"
                        + traceback.format_exc(limit=3).rstrip())
        return 0, 0, 0

    cls = getattr(module, "Vitkd", None)
    if not check(isinstance(cls, type), f"{where}: no class Vitkd"):
        return 0, 0, 0
    check(issubclass(cls, CMakePackage) and issubclass(cls, CudaPackage),
          f"{where}: Vitkd must derive from CMakePackage and CudaPackage (bases: {cls.__bases__})")
    check((cls.__doc__ or "").strip(), f"{where}: Vitkd has no docstring")
    check(any(k == "version" for k, _, _ in directives), f"{where}: no version() directive")
    git = getattr(cls, "git", "")
    if git.startswith("file://"):
        check(os.path.samefile(git[len("file://"):], src),
              f"{where}: git = {git!r} does not point at the checkout {src}")

    deps = []  # (name, spec string, when, type)
    for kind, args, kwargs in directives:
        if kind == "depends_on" and args:
            deps.append((spec_name(args[0]), args[0], kwargs.get("when") or "", kwargs.get("type")))
    uncond = {n: s for n, s, w, _ in deps if not w}

    for want in ("mpi", "hdf5", "kokkos", "py-torch", "tomlplusplus"):
        check(want in uncond, f"{where}: no unconditional depends_on('{want}...')")
    check("+mpi" in spec_tokens(uncond.get("hdf5", "")),
          f"{where}: hdf5 dependency must be hdf5+mpi (got {uncond.get('hdf5')!r})")
    check("zlib-api" in uncond or "zlib" in uncond, f"{where}: no depends_on zlib-api (or zlib)")
    check("googletest" in {n for n, _, _, _ in deps}, f"{where}: no depends_on('googletest')")
    cmake = [(s, t) for n, s, w, t in deps if n == "cmake"]
    check(any("@3.20:" in s and t in ("build", ("build",)) for s, t in cmake),
          f"{where}: need depends_on('cmake@3.20:', type='build') (got {cmake})")
    check(any(n == "nccl" and "+cuda" in spec_tokens(w) for n, _, w, _ in deps),
          f"{where}: no depends_on('nccl', when='+cuda')")
    check("nccl" not in uncond, f"{where}: nccl must only be a dependency when +cuda")
    # Kokkos: any backend the code can use (Serial, OpenMP, CUDA); the
    # unconditional dependency names none (spack.yaml prefers +openmp).
    backends = {t for t in spec_tokens(uncond.get("kokkos", ""))
                if t.lstrip("+~") in ("serial", "openmp", "threads", "cuda")}
    check(not backends, f"{where}: depends_on({uncond.get('kokkos')!r}) requires a Kokkos backend "
          f"({sorted(backends)}); Serial, OpenMP and CUDA Kokkos must all be accepted")
    doc = cls.__doc__ or ""
    check("C++20" in doc and "C++17" not in doc,
          f"{where}: the docstring must say C++20 (CMakeLists.txt requires it), not C++17")
    with open(path) as f:
        text = f.read()
    check(re.search(r"Spack\s*>=\s*1\.0", text),
          f"{where}: must say it needs Spack >= 1.0 (tomlplusplus, spack_repo.builtin)")
    check(not re.search(r"Spack 0\.x(?! is not)", text) or "not supported" in text,
          f"{where}: claims Spack 0.x support")
    nconfigs = check_constraints(where, directives)
    # The test suite's Python modules are declared (type="test").
    test_deps = {n for n, _, _, t in deps if t in ("test", ("test",))}
    for module in ("python", "py-numpy", "py-h5py", "py-matplotlib", "py-pyyaml", "py-pillow",
                   "py-torch"):
        check(module in test_deps, f"{where}: no depends_on('{module}', type='test') (the tests use it)")

    # cmake_args() for ~cuda and +cuda, with a fake py-torch prefix on disk.
    runs = 0
    with tempfile.TemporaryDirectory(prefix="vitkd-spack-") as tmp:
        platlib = "lib/python3.11/site-packages"
        modern_prefix = os.path.join(tmp, "py-torch-modern")
        modern_torch = make_torch_prefix(modern_prefix, platlib)
        old_prefix = os.path.join(tmp, "py-torch-old")
        old_torch = make_torch_prefix(old_prefix, platlib)

        class ModernTorch:  # recent recipes: cmake_prefix_paths -> <platlib>/torch/share/cmake
            cmake_prefix_paths = [os.path.dirname(modern_torch)]

        class OldTorch:  # property that fails outside a build (python_platlib unset)
            @property
            def cmake_prefix_paths(self):
                raise NameError("name 'python_platlib' is not defined")

        cases = [
            # label, cuda, run_tests, torch package, torch prefix, expected Torch_DIR
            ("~cuda", False, False, OldTorch(), old_prefix, old_torch),
            ("+cuda cuda_arch=90", True, True, ModernTorch(), modern_prefix, modern_torch),
        ]
        # The layouts of a py-torch or LibTorch prefix (external or not), each
        # found by a recipe whose py-torch package names no cmake_prefix_paths.
        for layout, rel in TORCH_LAYOUTS:
            prefix = os.path.join(tmp, "torch-" + layout)
            want = make_torch_at(prefix, rel)
            if layout == "debian-libtorch-dev":  # python3-torch too, without a CMake package
                os.makedirs(os.path.join(prefix, "lib/python3/dist-packages/torch/lib"))
            cases.append((f"~cuda, {layout} ({rel})", False, False, types.SimpleNamespace(), prefix, want))
        for label, cuda, run_tests, tpkg, tprefix, want_torch in cases:
            spec = fake_spec(tmp, cuda, tpkg, tprefix)
            try:
                args = cls(spec, run_tests=run_tests).cmake_args()
            except Exception:
                FAILURES.append(f"{where}: cmake_args() for {label} raised:\n"
                                + traceback.format_exc(limit=3).rstrip())
                continue
            runs += 1
            if not check(isinstance(args, list) and all(isinstance(a, str) for a in args),
                         f"{where}: cmake_args() for {label} must return a list of strings"):
                continue
            d = defines(args)
            nccl = d.get("VITKD_WITH_NCCL", ("", None))[1]
            check(nccl == ("ON" if cuda else "OFF"),
                  f"{label}: VITKD_WITH_NCCL={nccl}, expected {'ON' if cuda else 'OFF'} ({args})")
            tests = d.get("VITKD_BUILD_TESTS", ("", None))
            check(tests == ("BOOL", "ON" if run_tests else "OFF"),
                  f"{label}: VITKD_BUILD_TESTS={tests}, expected BOOL {'ON' if run_tests else 'OFF'}")
            torch_dir = d.get("Torch_DIR", ("", None))[1]
            prefix_path = d.get("CMAKE_PREFIX_PATH", ("", ""))[1]
            check(torch_dir == want_torch or os.path.dirname(want_torch) in prefix_path.split(";"),
                  f"{label}: Torch_DIR={torch_dir}, expected {want_torch}")
            if cuda:
                check(d.get("NCCL_ROOT", ("", None))[1] == spec["nccl"].prefix,
                      f"{label}: NCCL_ROOT should point at the nccl prefix ({args})")

        # No TorchConfig.cmake anywhere: one clear error naming every place
        # looked in (each layout's, once), not a silent bad build.
        empty = os.path.join(tmp, "py-torch-empty")
        os.makedirs(os.path.join(empty, "lib", "python3", "dist-packages", "torch"))
        os.makedirs(os.path.join(empty, "lib", "x86_64-linux-gnu"))
        try:
            cls(fake_spec(tmp, False, OldTorch(), empty)).cmake_args()
            FAILURES.append(f"{where}: cmake_args() accepted a py-torch without TorchConfig.cmake")
        except Exception as e:
            msg = str(e)
            check("TorchConfig.cmake" in msg and msg.count("\n") == 0,
                  f"{where}: missing Torch should be one line naming TorchConfig.cmake, got: {msg!r}")
            places = [p.rstrip(".") for p in re.findall(re.escape(empty) + r"/[^\s;,]*", msg)]
            check(len(places) == len(set(places)), f"{where}: missing Torch lists a place twice: {msg}")
            for layout, rel in TORCH_LAYOUTS:
                target = os.path.join(empty, rel)
                check(any(fnmatch.fnmatchcase(target, p) for p in places),
                      f"{where}: missing Torch: the error does not name {rel} ({layout}) among {places}")

    # Spack >= 1.0: the base classes come from spack_repo.builtin.build_systems.
    class CMakePackageV2(CMakePackage):
        pass

    class CudaPackageV2(CudaPackage):
        pass

    try:
        module2, _ = load_recipe(path, (CMakePackageV2, CudaPackageV2))
        cls2 = module2.Vitkd
        check(issubclass(cls2, CMakePackageV2) and issubclass(cls2, CudaPackageV2),
              f"{where}: with spack_repo.builtin present, Vitkd should use its build-system classes")
    except Exception:
        FAILURES.append(f"{where}: import with Spack 1.x-style spack_repo stand-ins failed:\n"
                        + traceback.format_exc(limit=3).rstrip())
    finally:
        for name in [m for m in sys.modules if m == "spack" or m.startswith(("spack.", "spack_repo"))]:
            del sys.modules[name]
    return len(deps), runs, nconfigs


def check_gitignore(src):
    """`spack -e .` writes .spack-env/ and spack.lock into the checkout."""
    path = os.path.join(src, ".gitignore")
    lines = []
    if os.path.isfile(path):
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    for name, forms in ((".spack-env/", (".spack-env", ".spack-env/", "/.spack-env", "/.spack-env/")),
                        ("spack.lock", ("spack.lock", "/spack.lock"))):
        check(any(ln in forms for ln in lines), f".gitignore: does not cover {name} (spack -e . writes it)")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(f"usage: {os.path.basename(argv[0])} SRC_DIR", file=sys.stderr)
        return 2
    src = os.path.abspath(argv[1])
    env = check_environment(src)
    ndeps, runs, nconfigs = check_recipe(src)
    check_gitignore(src)
    if FAILURES:
        for f in FAILURES:
            print(f"FAIL: {f}", file=sys.stderr)
        print(f"check_spack: FAILED ({len(FAILURES)} problem(s)) in {src}")
        return 1
    nspecs = len((env or {}).get("specs") or [])
    print(f"check_spack: OK: spack.yaml ({nspecs} specs, unify, view, repo 'vitkd'); "
          f"package.py Vitkd(CMakePackage, CudaPackage) with {ndeps} depends_on; "
          f"cmake_args checked for ~cuda/+cuda and the Torch layouts ({runs} runs), missing Torch; "
          f"{nconfigs} Kokkos/compiler configurations; Spack 1.x import; .gitignore")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
