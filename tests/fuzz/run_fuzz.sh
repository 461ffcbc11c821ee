#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on its seed corpus.
#   run_fuzz.sh TARGET SEED_DIR WORK_DIR SECONDS
# New corpus entries and crash artifacts go to WORK_DIR (the seed corpus in
# the source tree is only read). Fails on any finding: a crash, a sanitizer
# report, an escaped exception, a timeout (> 10 s for one input) or an
# out-of-memory input.
set -uo pipefail
target=$1 seeds=$2 work=$3 secs=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
"$target" "$work/corpus" "$seeds" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  >"$work/log.txt" 2>&1
rc=$?
grep -E "^(#[0-9]+ +(INITED|DONE)|Done [0-9]+ runs|stat::number_of_executed_units)" "$work/log.txt" | tail -3
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  echo "FAIL: $(basename "$target") found a problem (exit $rc); artifacts in $work/artifacts:"
  ls "$work/artifacts"
  grep -m20 -E "ERROR|finding|runtime error|SUMMARY|==[0-9]+==" "$work/log.txt"
  exit 1
fi
echo "ok: $(basename "$target") ran ${secs} s without findings"
