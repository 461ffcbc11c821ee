"""The prebuilt binaries of the device run (docs/gpu.md, "The device run").

    prebuilt.py record --build DIR --carry DIR --deps DIR --python PY
        copies DIR/vitkd and DIR/tests/gpu/vitkd_h5cmp into CARRY/prebuilt and
        writes CARRY/prebuilt/build.json: the torch they were built against
        (version, CUDA, C++ ABI), the newest GLIBC_ and GLIBCXX_ symbol
        versions they and the primary carried libraries (DEPS/primary) need
        (the support libraries' apart: they are used only where the machine
        lacks its own), the source hash and each source file's.
    prebuilt.py match --carry DIR --root DIR
        compares build.json with this machine (the Python running it: its
        torch, glibc, libstdc++) and the source tree; prints "use<TAB>..." or
        "stale<TAB>one line naming both sides and the source files that
        changed"; exit 0 either way, 2 when there is no build.json.
    prebuilt.py changed --carry DIR --root DIR
        the source files changed since the prebuild, in one line ("" when
        none); exit 1 when some changed, 2 when there is no build.json.
    prebuilt.py python --carry DIR
        the Python the binaries were built with (build.json), the default
        for the rehearsals; exit 2 when build.json names none.
    prebuilt.py sonames < FILES
        "FILE<TAB>SONAME" for each shared library named on standard input
        (one path a line) that has one: read from its ELF dynamic section,
        so that the device needs no objdump.

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
import struct
import subprocess
import sys
import time

SOURCES = ("CMakeLists.txt", "cmake", "src", "tests/gpu/h5cmp.c")  # what the binaries are made of


def source_files(root):
    """{path relative to root: its SHA-256 (16 hex digits)} of what the binaries are made of."""
    out = {}
    for top in SOURCES:
        p = os.path.join(root, top)
        files = [p] if os.path.isfile(p) else [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
        for f in files:
            out[os.path.relpath(f, root)] = hashlib.sha256(open(f, "rb").read()).hexdigest()[:16]
    return out


def source_hash(root):
    h = hashlib.sha256()
    for rel, digest in sorted(source_files(root).items()):
        h.update(rel.encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()[:16]


def changed_files(want, root, most=8):
    """One line naming the source files that differ from build.json's, or "" when none."""
    if "files" not in want:
        return "" if want.get("source") == source_hash(root) else "the sources (this build.json lists no files)"
    have = source_files(root)
    names = sorted(f for f in set(have) | set(want["files"]) if have.get(f) != want["files"].get(f))
    tag = {f: " (new)" if f not in want["files"] else " (removed)" if f not in have else "" for f in names}
    shown = ", ".join(f + tag[f] for f in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


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


def soname(path):
    """DT_SONAME of a 64-bit ELF shared library, or None (what `objdump -p` prints as SONAME)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    e = "<" if data[5] == 1 else ">"
    phoff, = struct.unpack_from(e + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(e + "HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(e + "IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return None
    strtab = name = None
    for j in range(dynamic[1] // 16):
        tag, val = struct.unpack_from(e + "qQ", data, dynamic[0] + 16 * j)
        if tag == 0:  # DT_NULL
            break
        if tag == 5:  # DT_STRTAB (an address)
            strtab = val
        elif tag == 14:  # DT_SONAME (an offset into it)
            name = val
    if strtab is None or name is None:
        return None
    for vaddr, offset, size in loads:
        if vaddr <= strtab < vaddr + size:
            at = offset + strtab - vaddr + name
            return data[at:data.index(b"\0", at)].decode()
    return None


def sonames(_a):
    for line in sys.stdin:
        path = line.strip()
        try:
            name = soname(path) if path else None
        except (OSError, struct.error, ValueError):
            name = None
        if name:
            print(f"{path}\t{name}")
    return 0


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
                source=source_hash(a.root), files=source_files(a.root),
                built=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), build_dir=os.path.abspath(a.build),
                built_on=os.confstr("CS_GNU_LIBC_VERSION"), python=sys.executable)
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
    changed = changed_files(want, a.root)
    if changed:
        why.append(f"sources changed since the prebuild: {changed}")
    warn = ""
    if want.get("support_glibc_needed") and vkey(glibc) < vkey(want["support_glibc_needed"]):
        names = ", ".join(f"{k} {v}" for k, v in sorted(want.get("support_needing_newer_glibc", {}).items()))
        warn = (f" (warning: carried support libraries need a newer glibc ({names or want['support_glibc_needed']}): "
                "this machine must have its own copies of them)")
    if why:
        print(f"stale\tprebuilt for {built}; this machine has {here}: {'; '.join(why)}{warn}")
    else:
        print(f"use\tprebuilt for {built}; this machine has {here}: using the prebuilt binaries{warn}")
    return 0


def changed(a):
    path = os.path.join(a.carry, "prebuilt", "build.json")
    if not os.path.isfile(path):
        print(f"no prebuilt binaries ({path})")
        return 2
    line = changed_files(json.load(open(path)), a.root)
    print(line)
    return 1 if line else 0


def python(a):
    path = os.path.join(a.carry, "prebuilt", "build.json")
    exe = json.load(open(path)).get("python", "") if os.path.isfile(path) else ""
    print(exe)
    return 0 if exe else 2


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("record", "match", "changed", "python", "sonames"))
    p.add_argument("--build")
    p.add_argument("--carry")
    p.add_argument("--deps")
    p.add_argument("--root", default=os.getcwd())
    a = p.parse_args()
    if a.command != "sonames" and not a.carry:
        p.error("--carry is needed")
    return {"record": record, "match": match, "changed": changed, "python": python, "sonames": sonames}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
