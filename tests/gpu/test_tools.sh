#!/usr/bin/env bash
# Self-test of the device run's tools, no GPU and no vitkd needed (CTest:
# gpu_tools.no_false_greens, label unit):
#  - jobs/gpu/summary.py: without VITKD_EXPECT_GPU skips stay skips (exit 0);
#    with it every skip and every check without a result is a fail whose
#    reason says it did not run (exit 1); a fatal set-up error fails them all;
#  - jobs/gpu/report.py renders that summary;
#  - jobs/gpu/lib/prebuilt.py match: a build.json for another torch gives one
#    "build" line naming both sides; a missing one exit 2.
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
check "prebuilt for another torch: one 'build' line naming both sides" \
  bash -c '[[ "$0" == build$'"'"'\t'"'"'"prebuilt for torch 0.0.0+cu000"*"this machine has torch "*"building here" ]] && [ "$(wc -l <<< "$0")" = 1 ]' "$line"
"$PY" "$ROOT/jobs/gpu/lib/prebuilt.py" match --carry "$T/nothing" --root "$ROOT" > /dev/null; rc=$?
check "no build.json: exit 2" [ "$rc" = 2 ]
echo "$line"
[ "$fails" = 0 ] || { echo "test_tools: $fails failed"; exit 1; }
echo "test_tools: all passed"
