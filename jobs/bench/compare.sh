#!/usr/bin/env bash
# Side-by-side throughput of vitkd configurations, run alternately on the same
# machine (these machines are noisy: compare medians of alternating runs).
#   jobs/bench/compare.sh CONFIG.toml REPEATS "label A|--set ... " "label B|--set ..." [...]
# A variant may start with bin=PATH to run another vitkd binary (an older
# build, for before/after measurements): "before|bin=../base/build/vitkd --set ...".
# Each variant runs REPEATS times, interleaved A B, then B A, then A B ...
# (the order reverses every repeat, so that a variant never always runs
# first, e.g. right after the other's burst of I/O); prints each run's
# images/s (samples trained per second, evaluation excluded) and the medians,
# and the ratio of every variant to the first.
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
config=$1; repeats=$2; shift 2
NP=${NP:-2}
out=${OUT:-runs/bench-compare}
mkdir -p "$out"
declare -a labels sets
for v in "$@"; do labels+=("${v%%|*}"); sets+=("${v#*|}"); done
for ((r = 0; r < repeats; r++)); do
  order=("${!labels[@]}")
  if ((r % 2 == 1)); then order=(); for ((j = ${#labels[@]} - 1; j >= 0; j--)); do order+=("$j"); done; fi
  for i in "${order[@]}"; do
    dir="$out/v${i}_r${r}"
    bin=build/vitkd args=${sets[$i]}
    if [[ $args == bin=* ]]; then bin=${args%% *}; bin=${bin#bin=}; args=${args#bin=* }; [[ $args == bin=* ]] && args=""; fi
    # shellcheck disable=SC2086
    mpirun -n "$NP" "$bin" train "$config" --set run.out_dir="$dir" --set checkpoint.resume=never $args >"$dir.log" 2>&1 \
      || { echo "run failed: ${labels[$i]} (see $dir.log)"; exit 1; }
    ips=$(/usr/bin/python3 -c "import json;print(round(json.load(open('$dir/result.json'))['images_per_second'],1))")
    echo "repeat $r  ${labels[$i]}: $ips img/s"
  done
done
/usr/bin/python3 - "$out" "$repeats" "${labels[@]}" <<'PY'
import json, statistics, sys
out, reps, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = []
for i, l in enumerate(labels):
    v = [json.load(open(f"{out}/v{i}_r{r}/result.json"))["images_per_second"] for r in range(reps)]
    med.append(statistics.median(v))
    print(f"{l:<40} median {med[-1]:8.1f} img/s  runs {', '.join(f'{x:.1f}' for x in v)}"
          f"  ratio to first {med[-1] / med[0]:.3f}")
PY
