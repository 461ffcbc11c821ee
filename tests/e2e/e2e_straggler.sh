#!/usr/bin/env bash
# A planted straggler (VITKD_TEST_SLOW_RANK: an injected sleep on one rank)
# must be named by analysis/report.py from the run's timing.h5. The sleep,
# 40 ms per step, stands out of the noise also under AddressSanitizer on a
# loaded machine (15 ms did not).
#   report_names_the_planted_straggler    the report's imbalance, straggler and slowest-phase lines
#   e2e_straggler.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(report_names_the_planted_straggler)

case_report_names_the_planted_straggler() {
  local slow=$((NP - 1))
  synthetic syn.h5 1024 128 16 4
  vk "$NP" VITKD_TEST_SLOW_RANK="$slow:40" train "$SRC/inputs/smoke.toml" --set data.path="$WORK/syn.h5" \
    --set run.out_dir="$WORK/run" --set train.epochs=2 --set train.timing_every_steps=8 > /dev/null
  "$PYTHON" "$SRC/analysis/report.py" "$WORK/run" > report.txt
  grep -q "^Most imbalanced rank: $slow " run/report.md || { grep -i "imbalanced\|straggler" run/report.md; fail "report does not name rank $slow"; }
  grep -q "^Stragglers: $slow " run/report.md || { grep "Stragglers" run/report.md; fail "straggler list"; }
  grep -q "^Slowest phase: " run/report.md || fail "no slowest phase line"
  grep '^Most imbalanced rank' run/report.md
}

e2e_main "$@"
