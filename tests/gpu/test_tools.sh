#!/usr/bin/env bash
# Self-test of the device run's tools, no GPU and no vitkd needed (CTest:
# gpu_tools.no_false_greens, label unit):
#  - jobs/gpu/summary.py: without VITKD_EXPECT_GPU skips stay skips (exit 0);
#    with it every skip and every check without a result is a fail whose
#    reason says it did not run (exit 1); a fatal set-up error fails them all;
#  - jobs/gpu/report.py renders that summary;
#  - jobs/gpu/lib/prebuilt.py match: a build.json for another torch gives one
#    "stale" line naming both sides; a missing one exit 2; `changed` names the
#    source files changed since the prebuild, in one line;
#  - summary.py --quiet writes summary.json and prints nothing;
#  - tests/gpu/expect.sh: a GPU is expected where a /dev/nvidia* device
#    exists, unless VITKD_EXPECT_GPU=0, which warns in one line.
#   bash tests/gpu/test_tools.sh [PYTHON]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${1:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() {  # WHAT CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
mkdir -p "$T/work/checks" "$T/out"
LIST=$'a_launch 20\na_info 10\nc_cuda_vs_cpu 30\nh_phase_timing 10 g_vits16'
echo '{"name": "a_launch", "status": "pass", "reason": "one CPU step", "numbers": {}}' > "$T/work/checks/a_launch.json"
echo '{"name": "a_info", "status": "skip", "reason": "no CUDA GPU visible", "numbers": {}}' > "$T/work/checks/a_info.json"
echo '{"name": "h_phase_timing", "status": "skip", "reason": "not run: it needs gpu.g_vits16", "numbers": {}}' > "$T/work/checks/h_phase_timing.json"
summ() { "$PY" "$ROOT/jobs/gpu/summary.py" --work "$T/work" --out "$T/out" --mode gpu --t0 "$(date +%s)" --budget 540 --checks "$LIST" "$@" > "$T/summary.txt"; }
field() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/out/summary.json" "$1"; }

summ --expect 0; rc=$?
check "no GPU expected: skips stay skips, exit 0" [ "$rc" = 0 ]
check "no GPU expected: a check without a result is a skip saying so" \
  [ "$(field '[c["status"] + ":" + c["reason"][:11] for c in d["checks"] if c["name"] == "c_cuda_vs_cpu"][0]')" = "skip:did not run" ]

summ --expect 1; rc=$?
check "GPU expected: exit 1" [ "$rc" = 1 ]
check "GPU expected: 1 passed, 3 failed, 0 skipped" [ "$(field 'd["counts"]')" = "{'pass': 1, 'fail': 3, 'skip': 0}" ]
check "GPU expected: each failed reason says it did not run" \
  [ "$(field 'all("not run" in c["reason"] for c in d["checks"] if c["status"] == "fail")')" = True ]
check "report.py renders it" bash -c '"$0" "$1/jobs/gpu/report.py" "$2/out/summary.json" | grep -q "| a_info | fail |"' "$PY" "$ROOT" "$T"

printf 'fatal\tunresolved libraries: libmpi.so.40 => not found\n' > "$T/work/meta.tsv"
summ --expect 0; rc=$?
check "a fatal set-up error fails every check, exit 1" [ "$rc" = 1 ] && [ "$(field 'd["counts"]["fail"]')" = 4 ]

mkdir -p "$T/carry/prebuilt"
echo '{"torch": "0.0.0+cu000", "cuda": "0.0", "cxx11_abi": 1, "glibc_needed": "2.17", "glibcxx_needed": "3.4.19", "source": "x"}' \
  > "$T/carry/prebuilt/build.json"
line=$("$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" match --carry "$T/carry" --root "$ROOT")
check "prebuilt for another torch: one 'stale' line naming both sides" \
  bash -c '[[ "$0" == stale$'"'"'\t'"'"'"prebuilt for torch 0.0.0+cu000"*"this machine has torch "*"torch differs"* ]] && [ "$(wc -l <<< "$0")" = 1 ]' "$line"
"$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" match --carry "$T/nothing" --root "$ROOT" > /dev/null; rc=$?
check "no build.json: exit 2" [ "$rc" = 2 ]
echo "$line"

# The files changed since the prebuild, named in one line.
mkdir -p "$T/carry2/prebuilt"
"$PY" - "$ROOT" "$T/carry2/prebuilt/build.json" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("prebuilt", sys.argv[1] + "/jobs/gpu/lib/prebuilt.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
files = m.source_files(sys.argv[1])
files["src/main.cpp"] = "0" * 16          # changed since
files["src/gone.cpp"] = "1" * 16          # removed since
json.dump({"torch": "0", "cuda": "0", "cxx11_abi": 1, "glibc_needed": None, "glibcxx_needed": None,
           "source": "x", "files": files}, open(sys.argv[2], "w"))
PY
changed=$("$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" changed --carry "$T/carry2" --root "$ROOT"); rc=$?
check "changed sources: exit 1, both files named in one line" \
  bash -c '[ "$1" = 1 ] && [ "$0" = "src/gone.cpp (removed), src/main.cpp" ]' "$changed" "$rc"
line=$("$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" match --carry "$T/carry2" --root "$ROOT")
check "a stale carry's match line names the changed files" grep -q "sources changed since the prebuild: src/gone.cpp (removed), src/main.cpp" <<< "$line"

# sonames from ELF headers, as objdump reads them (the device may lack binutils).
libz=$(readlink -f /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null)
if [ -n "$libz" ]; then
  got=$(echo "$libz" | "$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" sonames)
  check "prebuilt.py sonames reads libz's SONAME" [ "$got" = "$libz"$'\t'"libz.so.1" ]
fi

# summary.py --quiet: the file, no table.
rm -f "$T/work/meta.tsv" "$T/out/summary.json"
out=$(summ --expect 0 --quiet --part 1; cat "$T/summary.txt")
check "summary.py --quiet prints nothing and writes summary.json" \
  bash -c '[ -z "$0" ] && [ -s "$1" ]' "$out" "$T/out/summary.json"
check "summary.json records the part" [ "$(field 'd["part"]')" = 1 ]

# Expect-GPU mode: on by itself where a GPU device exists.
: > "$T/nvidia0"
expect_of() {  # DRY [VITKD_EXPECT_GPU value|unset] -> "EXPECT warnings"
  local v=$2
  # shellcheck disable=SC2016
  env ${v:+VITKD_EXPECT_GPU="${v#unset}"} VITKD_GPU_DEVICE_GLOB="$T/nvidia[0-9]*" bash -c \
    '. "$0"; gpu_expect "$1" 2> "$2"; echo "$EXPECT $(wc -l < "$2")"' "$ROOT/tests/gpu/expect.sh" "$1" "$T/warn.txt"
}
check "a GPU device, VITKD_EXPECT_GPU unset: expected, no warning" [ "$(expect_of 0 unset)" = "1 0" ]
check "a GPU device, VITKD_EXPECT_GPU=0: not expected, one warning line" [ "$(expect_of 0 0)" = "0 1" ]
check "a GPU device, the dry run: not expected, no warning" [ "$(expect_of 1 unset)" = "0 0" ]
rm -f "$T/nvidia0"
check "no GPU device: not expected" [ "$(expect_of 0 unset)" = "0 0" ]
check "no GPU device, VITKD_EXPECT_GPU=1: expected" [ "$(expect_of 0 1)" = "1 0" ]
[ "$fails" = 0 ] || { echo "test_tools: $fails failed"; exit 1; }
echo "test_tools: all passed"
