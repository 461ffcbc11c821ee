"""The prebuilt binaries of the device run (docs/gpu.md, "The device run").

    prebuilt.py record --build DIR --carry DIR --deps DIR --python PY
        copies DIR/vitkd and DIR/tests/gpu/vitkd_h5cmp into CARRY/prebuilt and
        writes CARRY/prebuilt/build.json: the torch they were built against
        (version, CUDA, C++ ABI), the newest GLIBC_ and GLIBCXX_ symbol
        versions they and the primary carried libraries (DEPS/primary) need
        (the support libraries' apart: they are used only where the machine
        lacks its own), the source hash.
    prebuilt.py match --carry DIR --root DIR
        compares build.json with this machine (the Python running it: its
        torch, glibc, libstdc++) and the source tree; prints "use" or
        "build<TAB>one line naming both sides"; exit 0 either way, 2 when
        there is no build.json.

The match needs no binutils (the machine's glibc from confstr, its
libstdc++'s versions read from the file the process loaded).
"""
import argparse
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

SOURCES = ("CMakeLists.txt", "cmake", "src", "tests/gpu/h5cmp.c")  # what the binaries are made of


def source_hash(root):
    h = hashlib.sha256()
    for top in SOURCES:
        p = os.path.join(root, top)
        files = [p] if os.path.isfile(p) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs)
        for f in sorted(files):
            h.update(os.path.relpath(f, root).encode() + b"\0" + open(f, "rb").read() + b"\0")
    return h.hexdigest()[:16]


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def newest(versions):
    return ".".join(map(str, max(map(vkey, versions)))) if versions else None


def needed_versions(files):
    """The newest GLIBC_ and GLIBCXX_ versions the files' dynamic symbols need (objdump -T)."""
    glibc, glibcxx = set(), set()
    for f in files:
        out = subprocess.run(["objdump", "-T", f], capture_output=True, text=True).stdout
        glibc.update(re.findall(r"\bGLIBC_(\d+\.\d+(?:\.\d+)?)\b", out))
        glibcxx.update(re.findall(r"\bGLIBCXX_(\d+\.\d+(?:\.\d+)?)\b", out))
    return newest(glibc), newest(glibcxx)


def torch_info():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return {"torch": f"not importable ({e.__class__.__name__})", "cuda": None, "cxx11_abi": None}
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cxx11_abi": int(torch.compiled_with_cxx11_abi())}


def machine_libstdcxx():
    ctypes.CDLL("libstdc++.so.6")
    path = next((line.split()[-1] for line in open("/proc/self/maps") if "libstdc++.so.6" in line), None)
    if not path:
        return None, None
    found = re.findall(rb"GLIBCXX_(\d+\.\d+(?:\.\d+)?)\x00", open(path, "rb").read())
    return path, newest({v.decode() for v in found})


def record(a):
    if torch_info()["cuda"] is None:
        sys.exit(f"prebuilt.py record: {sys.executable} has no CUDA torch; run it with the torch the binaries were built against")
    dest = os.path.join(a.carry, "prebuilt")
    os.makedirs(dest, exist_ok=True)
    bins = {"vitkd": os.path.join(a.build, "vitkd"), "vitkd_h5cmp": os.path.join(a.build, "tests/gpu/vitkd_h5cmp")}
    for name, src in bins.items():
        shutil.copy2(src, os.path.join(dest, name))
    def libs(top):
        return [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(a.deps, top)) for f in fs
                if ".so" in f and os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f))]
    # The binaries and the primary libraries (MPI, HDF5, Kokkos, ...) are always
    # used; the support ones only where the machine lacks them (lib/deps.sh), so
    # what they need is recorded but not required.
    glibc, glibcxx = needed_versions([os.path.join(dest, n) for n in bins] + libs("primary"))
    support_glibc, _ = needed_versions(libs("support"))
    newer = {os.path.basename(f): v for f in libs("support")
             for v in [needed_versions([f])[0]] if v and glibc and vkey(v) > vkey(glibc)}
    info = dict(torch_info(), glibc_needed=glibc, glibcxx_needed=glibcxx, support_glibc_needed=support_glibc,
                support_needing_newer_glibc=newer,
                source=source_hash(a.root),
                built=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), build_dir=os.path.abspath(a.build),
                built_on=os.confstr("CS_GNU_LIBC_VERSION"))
    json.dump(info, open(os.path.join(dest, "build.json"), "w"), indent=1)
    print(json.dumps(info))


def match(a):
    path = os.path.join(a.carry, "prebuilt", "build.json")
    if not os.path.isfile(path):
        print("build\tno prebuilt binaries (" + path + ")")
        return 2
    want = json.load(open(path))
    have = torch_info()
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    _, glibcxx = machine_libstdcxx()
    built = f"torch {want['torch']} (CUDA {want['cuda']}, C++ ABI {want['cxx11_abi']}), glibc >= {want['glibc_needed']}, " \
            f"libstdc++ >= GLIBCXX_{want['glibcxx_needed']}"
    here = f"torch {have['torch']} (CUDA {have['cuda']}, C++ ABI {have['cxx11_abi']}), glibc {glibc}, " \
           f"libstdc++ GLIBCXX_{glibcxx}"
    why = []
    if (have["torch"], have["cuda"], have["cxx11_abi"]) != (want["torch"], want["cuda"], want["cxx11_abi"]):
        why.append("torch differs")
    if want["glibc_needed"] and vkey(glibc) < vkey(want["glibc_needed"]):
        why.append("glibc too old")
    if want["glibcxx_needed"] and (not glibcxx or vkey(glibcxx) < vkey(want["glibcxx_needed"])):
        why.append("libstdc++ too old")
    src = source_hash(a.root)
    if src != want["source"]:
        why.append(f"the source changed since the prebuild ({want['source']} -> {src})")
    warn = ""
    if want.get("support_glibc_needed") and vkey(glibc) < vkey(want["support_glibc_needed"]):
        names = ", ".join(f"{k} {v}" for k, v in sorted(want.get("support_needing_newer_glibc", {}).items()))
        warn = (f" (warning: carried support libraries need a newer glibc ({names or want['support_glibc_needed']}): "
                "this machine must have its own copies of them)")
    if why:
        print(f"build\tprebuilt for {built}; this machine has {here}: {', '.join(why)}: building here{warn}")
    else:
        print(f"use\tprebuilt for {built}; this machine has {here}: using the prebuilt binaries{warn}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("record", "match"))
    p.add_argument("--build")
    p.add_argument("--carry", required=True)
    p.add_argument("--deps")
    p.add_argument("--root", default=os.getcwd())
    a = p.parse_args()
    return record(a) if a.command == "record" else match(a)


if __name__ == "__main__":
    sys.exit(main())
