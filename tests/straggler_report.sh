#!/usr/bin/env bash
# A planted straggler (VITKD_TEST_SLOW_RANK: an injected sleep on one rank)
# must be named by analysis/report.py from the run's timing.h5. The sleep,
# 40 ms per step, stands out of the noise also under AddressSanitizer on a
# loaded machine (15 ms did not).
#   straggler_report.sh NP WORKDIR   (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
np=$1
work=$2
slow=$((np - 1))
rm -rf "$work" && mkdir -p "$work"
"$VITKD" prepare synthetic --out "$work/syn.h5" --train 1024 --test 128 --size 16 --classes 4 >/dev/null
VITKD_TEST_SLOW_RANK="$slow:40" timeout 300 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$np" $MPIEXEC_PREFLAGS \
  -x VITKD_TEST_SLOW_RANK "$VITKD" train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" \
  --set run.out_dir="$work/run" --set train.epochs=2 --set train.timing_every_steps=8 >/dev/null
"$PYTHON" "$SRC/analysis/report.py" "$work/run" > "$work/report.txt"
grep -q "^Most imbalanced rank: $slow " "$work/run/report.md" || { echo "FAIL: report does not name rank $slow"; grep -i "imbalanced\|straggler" "$work/run/report.md"; exit 1; }
grep -q "^Stragglers: $slow " "$work/run/report.md" || { echo "FAIL: straggler list"; grep "Stragglers" "$work/run/report.md"; exit 1; }
grep -q "^Slowest phase: " "$work/run/report.md" || { echo "FAIL: no slowest phase line"; exit 1; }
echo "OK: $(grep '^Most imbalanced rank' "$work/run/report.md")"
