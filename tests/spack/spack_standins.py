"""Stand-ins for Spack >= 1.0's package API (spack.package, spack_repo.builtin.build_systems)
against which tests/spack/check_spack.py imports the recipe, and the fake specs and
LibTorch prefixes it calls cmake_args() with.
"""

import importlib.util
import os
import re
import sys
import types


DIRECTIVES = []  # (directive, args, kwargs) in the order the class body ran them


def _directive(kind):
    def record(*args, **kwargs):
        DIRECTIVES.append((kind, args, kwargs))
    record.__name__ = kind
    return record


class InstallError(Exception):
    pass


class CMakePackage:
    """Spack's CMakePackage, reduced to what cmake_args() can call."""

    def __init__(self, spec, run_tests=False):
        self.spec = spec
        self.run_tests = run_tests

    @staticmethod
    def define(name, value):
        # Spack: bool -> BOOL ON/OFF, list/tuple -> ';'-joined STRING, else STRING.
        if isinstance(value, bool):
            return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
        if isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
        return f"-D{name}:STRING={value}"

    def define_from_variant(self, name, variant=None):
        variant = variant or name.lower()
        if variant not in self.spec.variants:
            return ""
        return self.define(name, self.spec.variants[variant])


class CudaPackage:
    cuda_arch_values = ("70", "80", "90")


def make_spack_package_module(build_systems=True):
    """spack.package; Spack >= 1.0's (build_systems=False) no longer has the
    build-system classes (they moved to spack_repo.builtin.build_systems)."""
    mod = types.ModuleType("spack.package")
    names = {
        "InstallError": InstallError,
        "join_path": os.path.join,
    }
    if build_systems:
        names.update(CMakePackage=CMakePackage, CudaPackage=CudaPackage)
    for kind in ("version", "variant", "depends_on", "conflicts", "requires", "provides",
                 "maintainers", "license", "patch", "resource"):
        names[kind] = _directive(kind)
    mod.__dict__.update(names)
    mod.__all__ = sorted(names)
    return mod


def install_standins(v2_classes=None):
    """Register fake spack / spack.package (and, for v2, spack_repo.*) modules."""
    for name in [m for m in sys.modules if m == "spack" or m.startswith(("spack.", "spack_repo"))]:
        del sys.modules[name]
    spack = types.ModuleType("spack")
    spack.__path__ = []
    spack.package = make_spack_package_module(build_systems=v2_classes is None)
    sys.modules["spack"] = spack
    sys.modules["spack.package"] = spack.package
    if v2_classes is None:
        sys.modules["spack_repo"] = None  # Spack 0.x: `import spack_repo` fails
        return
    cmake_cls, cuda_cls = v2_classes
    chain = ["spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"]
    for name in chain:
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    for leaf, attr, cls in (("cmake", "CMakePackage", cmake_cls), ("cuda", "CudaPackage", cuda_cls)):
        m = types.ModuleType(f"spack_repo.builtin.build_systems.{leaf}")
        setattr(m, attr, cls)
        sys.modules[m.__name__] = m


def load_recipe(path, v2_classes=(CMakePackage, CudaPackage)):
    """Imports the recipe; by default with Spack >= 1.0's spack_repo modules."""
    DIRECTIVES.clear()
    install_standins(v2_classes)
    modname = "vitkd_recipe_v2" if v2_classes else "vitkd_recipe_v1"
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, list(DIRECTIVES)


class FakeDep:
    def __init__(self, prefix, package=None, **attrs):
        self.prefix = prefix
        self.package = package
        self.__dict__.update(attrs)


class FakeSpec:
    """A concrete vitkd spec: variants plus dependencies looked up by name."""

    def __init__(self, variants, deps):
        self.variants = dict(variants)
        self.deps = dict(deps)

    def satisfies(self, constraint):
        for tok in constraint.split():
            if tok.startswith(("+", "~")):
                want = tok[0] == "+"
                if bool(self.variants.get(tok[1:], False)) != want:
                    return False
            elif "=" in tok:
                key, value = tok.split("=", 1)
                have = self.variants.get(key)
                have = have if isinstance(have, (list, tuple)) else [have]
                if value not in [str(h) for h in have]:
                    return False
            else:
                raise AssertionError(f"stand-in spec cannot evaluate constraint {constraint!r}")
        return True

    __contains__ = satisfies

    def __getitem__(self, name):
        if name not in self.deps:
            raise KeyError(f"stand-in spec has no dependency {name!r}")
        return self.deps[name]


def make_torch_prefix(root, platlib):
    """A fake py-torch prefix holding <platlib>/torch/share/cmake/Torch/TorchConfig.cmake."""
    torch_dir = os.path.join(root, platlib, "torch", "share", "cmake", "Torch")
    os.makedirs(torch_dir, exist_ok=True)
    with open(os.path.join(torch_dir, "TorchConfig.cmake"), "w") as f:
        f.write("# stand-in\n")
    return torch_dir


def fake_spec(tmp, cuda, torch_package, torch_prefix):
    mpi = FakeDep(os.path.join(tmp, "openmpi"),
                  mpicc=os.path.join(tmp, "openmpi", "bin", "mpicc"),
                  mpicxx=os.path.join(tmp, "openmpi", "bin", "mpicxx"))
    python = FakeDep(os.path.join(tmp, "python"),
                     package=types.SimpleNamespace(platlib="lib/python3.11/site-packages"))
    deps = {
        "mpi": mpi, "openmpi": mpi, "python": python,
        "hdf5": FakeDep(os.path.join(tmp, "hdf5")),
        "kokkos": FakeDep(os.path.join(tmp, "kokkos")),
        "tomlplusplus": FakeDep(os.path.join(tmp, "tomlplusplus")),
        "zlib-api": FakeDep(os.path.join(tmp, "zlib")),
        "zlib": FakeDep(os.path.join(tmp, "zlib")),
        "googletest": FakeDep(os.path.join(tmp, "googletest")),
        "py-torch": FakeDep(torch_prefix, package=torch_package),
    }
    variants = {"cuda": cuda, "cuda_arch": ("90",) if cuda else ("none",)}
    if cuda:
        deps["cuda"] = FakeDep(os.path.join(tmp, "cuda"))
        deps["nccl"] = FakeDep(os.path.join(tmp, "nccl"))
    return FakeSpec(variants, deps)


def defines(args):
    """['-DA:BOOL=ON', ...] -> {'A': ('BOOL', 'ON'), ...}; other entries -> None keys."""
    out = {}
    for a in args:
        m = re.match(r"^-D([^:=]+)(?::([A-Z]+))?=(.*)$", a or "")
        if m:
            out[m.group(1)] = (m.group(2) or "", m.group(3))
        elif a:
            out.setdefault(None, []).append(a)
    return out


# Where py-torch or LibTorch prefixes keep TorchConfig.cmake (relative paths).
TORCH_LAYOUTS = (
    ("pip-site-packages", "lib/python3.12/site-packages/torch/share/cmake/Torch"),
    ("debian-python3-torch", "lib/python3/dist-packages/torch/share/cmake/Torch"),
    ("libtorch-zip", "share/cmake/Torch"),
    ("cmake-install-lib", "lib/cmake/Torch"),
    ("cmake-install-lib64", "lib64/cmake/Torch"),
    ("debian-libtorch-dev", "lib/x86_64-linux-gnu/cmake/Torch"),
    ("aarch64-triplet", "lib/aarch64-linux-gnu/cmake/Torch"),
)


def make_torch_at(prefix, rel):
    torch_dir = os.path.join(prefix, rel)
    os.makedirs(torch_dir, exist_ok=True)
    with open(os.path.join(torch_dir, "TorchConfig.cmake"), "w") as f:
        f.write("# stand-in\n")
    return torch_dir


# ---------------------------------------------------------------------------
# 4. A small matcher for the recipe's spec strings, against concrete
#    configurations: vitkd's variants, one Kokkos node and the compiler.
#    It knows variants (+v ~v k=v), ^dependency and %compiler@range clauses:
#    what the recipe's Kokkos and compiler directives use.
# ---------------------------------------------------------------------------
