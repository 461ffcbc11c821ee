#!/usr/bin/env bash
# vitkd against the same recipe in PyTorch (benchmarks/pytorch_baseline.py:
# DDP over gloo, ZeroRedundancyOptimizer(AdamW)), run alternately on this
# machine, REPEATS times each; prints each run, the medians and the ratios,
# with the CPU model, its bf16 flags and the precision each program ran in.
#   jobs/bench/vs_pytorch.sh [REPEATS] [STEPS]
# Needs build/vitkd, data/fmnist.h5 and, for distillation, a teacher
# checkpoint (TEACHER=runs/fmnist-teacher/checkpoint.h5 by default).
#
# Peers (PEERS, comma-separated; default "pt2-eager,pt2-compiled"):
#   pt2-eager     today's PyTorch from PyPI (jobs/setup-torch2.sh makes the
#                 virtual environment; PT2_PYTHON overrides its interpreter), eager
#   pt2-compiled  the same with torch.compile (the compilation falls in the first
#                 WARMUP_TIMING steps, which images/s leaves out)
#   pt113         Debian's PyTorch 1.13 (/usr/bin/python3), eager
# Precision: every program runs in the precision vitkd's precision.compute =
# "auto" chooses on this CPU (bf16 autocast where bf16 matrix products are
# native, fp32 elsewhere); PRECISION=bf16|fp32 forces one for all.
# Scenarios (ONLY, comma-separated; default "teacher,distill"; the inputs/
# model sizes, batch 64 per rank, 2 ranks, no augmentation):
#   teacher        teacher training
#   distill        distillation without sifting
#   sift           vitkd with sifting (ce, beta 1, from step 20) vs the peers' plain distillation
#   scaling        vitkd teacher training at 1 and 2 ranks (weak scaling)
# images/s = samples trained per second, evaluation and start-up excluded.
# Writes $OUT/summary.json (medians, ratios, CPU, versions).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
REPEATS=${1:-3}
STEPS=${2:-150}
TEACHER=${TEACHER:-runs/fmnist-teacher/checkpoint.h5}
OUT=${OUT:-runs/bench-vs-pytorch}
ONLY=${ONLY:-teacher,distill}
PEERS=${PEERS:-pt2-eager,pt2-compiled}
WARMUP_TIMING=${WARMUP_TIMING:-10}
mkdir -p "$OUT"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
peer_on() { [[ ",$PEERS," == *",$1,"* ]]; }
if want distill || want sift; then
  [ -f "$TEACHER" ] || { echo "no teacher checkpoint at $TEACHER (set TEACHER=...)" >&2; exit 2; }
fi
if peer_on pt2-eager || peer_on pt2-compiled; then
  PT2_PYTHON=${PT2_PYTHON:-$(bash jobs/setup-torch2.sh | tail -1)/bin/python}
fi
# The precision: what vitkd's auto picks here, unless forced.
if [ -z "${PRECISION:-}" ]; then
  PRECISION=$(build/vitkd bench gemm --auto-only | sed -n 's/.*"auto" chooses \([a-z0-9]*\) here.*/\1/p')
fi
case $PRECISION in bf16) PT_PREC=() ;; fp32) PT_PREC=(--fp32) ;; *) echo "PRECISION must be bf16 or fp32" >&2; exit 2 ;; esac
echo "vs_pytorch: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); precision $PRECISION;" \
     "peers $PEERS; $REPEATS repeats of $STEPS steps"
COMMON=(--set checkpoint.resume=never --set checkpoint.every_steps=0 --set train.final_eval=false
        --set train.eval_every_epochs=0 --set train.max_steps="$STEPS" --set train.threads=1
        --set train.mfu_ceiling=0 --set precision.compute="$PRECISION")
PT_ARGS=(benchmarks/pytorch_baseline.py --data data/fmnist.h5 --max-steps "$STEPS" --epochs 1
         --warmup-timing-steps "$WARMUP_TIMING" "${PT_PREC[@]}")

vitkd() {  # NP DIR ARGS...
  local np=$1 dir=$2; shift 2
  mpirun -n "$np" build/vitkd train "$@" --set run.out_dir="$dir" "${COMMON[@]}" > "$dir.log" 2>&1 \
    || { echo "vitkd run failed (see $dir.log)" >&2; exit 1; }
}
pytorch() {  # PEER NP DIR ARGS...
  local peer=$1 np=$2 dir=$3; shift 3
  local py=$PT2_PYTHON extra=()
  case $peer in pt2-compiled) extra=(--compile) ;; pt113) py=/usr/bin/python3 ;; esac
  mkdir -p "$dir"
  "$py" "${PT_ARGS[@]}" "${extra[@]}" --nproc "$np" "$@" --out "$dir/result.json" > "$dir.log" 2>&1 \
    || { echo "PyTorch run failed (see $dir.log)" >&2; exit 1; }
}
IFS=, read -r -a PEER_LIST <<< "$PEERS"
for ((r = 0; r < REPEATS; r++)); do
  if want teacher; then
    vitkd 2 "$OUT/teacher-vitkd-$r" inputs/fmnist-teacher.toml --set data.augment=false  # as the baselines
    for p in "${PEER_LIST[@]}"; do pytorch "$p" 2 "$OUT/teacher-$p-$r" --mode teacher; done
  fi
  if want distill; then
    vitkd 2 "$OUT/distill-vitkd-$r" inputs/fmnist-distill.toml --set data.augment=false --set teacher.checkpoint="$TEACHER"
    for p in "${PEER_LIST[@]}"; do
      pytorch "$p" 2 "$OUT/distill-$p-$r" --mode distill --teacher "$TEACHER" --dim 96 --depth 4
    done
  fi
  if want sift; then
    vitkd 2 "$OUT/sift-vitkd-$r" inputs/fmnist-distill.toml --set data.augment=false --set teacher.checkpoint="$TEACHER" \
      --set sift.enabled=true --set sift.beta=1 --set sift.delay=20
  fi
  if want scaling; then vitkd 1 "$OUT/teacher1-vitkd-$r" inputs/fmnist-teacher.toml --set data.augment=false; fi
  echo "repeat $((r + 1))/$REPEATS done"
done
/usr/bin/python3 - "$OUT" "$REPEATS" "$ONLY" "$PEERS" "$PRECISION" "${PT2_PYTHON:-}" <<'PY'
import json, statistics, subprocess, sys
out, reps, only, peers, precision, pt2 = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), \
    sys.argv[4].split(","), sys.argv[5], sys.argv[6]
def res(name, r):
    return json.load(open(f"{out}/{name}-{r}/result.json"))
def med(name, key="images_per_second"):
    v = [res(name, r)[key] for r in range(reps)]
    return statistics.median(v), v
flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split()
cpu = {"model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
       "isa": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]}
import os
cpu["restriction"] = {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ}
summary = {"cpu": cpu, "precision": precision, "repeats": reps, "rows": []}
print(f"CPU: {cpu['model']} ({' '.join(cpu['isa'])})" +
      (f", restricted: {cpu['restriction']}" if cpu["restriction"] else "") + f"; precision {precision}")
print(f"{'scenario':<34}{'peer':<14}{'vitkd img/s':>12}{'peer img/s':>12}{'ratio':>8}")
for scen, label in (("teacher", "teacher training"), ("distill", "distillation, no sifting")):
    if scen not in only:
        continue
    mv, vv = med(f"{scen}-vitkd")
    mfu = statistics.median(res(f"{scen}-vitkd", r)["mfu"] for r in range(reps))
    for p in peers:
        mp, vp = med(f"{scen}-{p}")
        ver = res(f"{scen}-{p}", 0)["torch_version"]
        print(f"{label:<34}{p + ' ' + ver.split('+')[0]:<14}{mv:12.1f}{mp:12.1f}{mv / mp:8.2f}   "
              f"runs {['%.0f' % x for x in vv]} vs {['%.0f' % x for x in vp]}")
        summary["rows"].append({"scenario": scen, "peer": p, "torch": ver, "vitkd_ips": mv, "peer_ips": mp,
                                "ratio": mv / mp, "vitkd_runs": vv, "peer_runs": vp, "vitkd_mfu": mfu})
    print(f"{'':<34}{'vitkd MFU':<14}{mfu:12.3f}   (against the {precision} ceiling)")
if "sift" in only and "distill" in only:
    seen = [res("sift-vitkd", r) for r in range(reps)]
    seen = [j["images_per_second"] * j["samples_seen"] / j["samples_trained"] for j in seen]
    print(f"vitkd with ce sifting: {statistics.median(seen):.1f} samples seen/s")
if "scaling" in only and "teacher" in only:
    (m1, _), (m2, _) = med("teacher1-vitkd"), med("teacher-vitkd")
    print(f"vitkd teacher, 1 rank {m1:.1f} img/s, 2 ranks {m2:.1f} img/s: weak-scaling efficiency {m2 / (2 * m1):.3f}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(f"-> {out}/summary.json")
PY
