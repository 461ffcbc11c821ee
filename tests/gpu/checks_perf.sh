#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2153  # checks run indirectly; run.sh sets STEPS, DATA, ...
# The throughput checks of tests/gpu/checks.sh (sourced by it; the list, the
# order and the limits are there). vitkd's steady rate is measured as the
# difference of two runs (N1 and N2 steps): (N2 - N1) x batch over the
# difference of their train_seconds, so that start-up, the first steps'
# CUDA warm-up and the final checkpoint cancel. timm's side is
# benchmarks/timm_step.py in the device's PyTorch (the same shapes, bf16
# autocast, AdamW), timed after its warm-up steps, twice for the
# distillation: on random batches already on the GPU (timm_distill: reads
# no files), and from the same dataset file through a DataLoader
# (timm_distill_loader: uint8 to the GPU, normalised there). MFU: vitkd's FLOPs per trained sample (result.json:
# 3 x the student's forward + the teacher's forward) times the images/s,
# over the card's bf16 dense peak (gpu_peak_tflops), for both. On a GPU a
# rate passes only when it was measured on the GPU (result.json's device is
# cuda, timm's names the card) and 0 < MFU <= 1.

# The 224x224 shapes; the dry run shrinks them (32x32, depth 2, batch 4) so
# that two busy CPU cores get through.
shapes224() {
  if [ "$DRY" = 1 ]; then
    S224=32; B224=4; DEPTH=2; N224=64; K1=2; K2=4; CLASSES=10
  else
    S224=224; B224=256; DEPTH=12; N224=2048; K1=10; K2=40; CLASSES=1000
  fi
  GDATA=$RUNS/synthetic$S224-$N224.h5   # kept between runs
  if [ ! -s "$GDATA" ]; then
    vk prepare synthetic --out "$GDATA" --train "$N224" --test 64 --size "$S224" --channels 3 \
      --classes "$CLASSES" > "$RUNS/synthetic$S224.log" 2>&1 || return 1
  fi
  V224=(--set model.image_size="$S224" --set model.channels=3 --set model.patch=16 --set model.mlp_ratio=4
        --set model.classes="$CLASSES" --set model.norm_eps=1e-6 --set model.depth="$DEPTH" --set data.augment=false
        --set data.batch_size="$B224" --set data.path="$GDATA" --set optim.warmup_steps=5)
  VITS=(--set model.dim=384 --set model.heads=6)
  VITB=(--set model.dim=768 --set model.heads=12)
  TIMM_ARGS=(--image-size "$S224" --classes "$CLASSES" --batch "$B224" --depth "$DEPTH")
  # The dry run's peers in fp32: it rehearses the plumbing, and a CPU without
  # native bf16 emulates bf16 at a few percent of fp32.
  PEER_FP32=(); [ "$DRY" = 1 ] && PEER_FP32=(--fp32)
}
# The card's bf16 dense peak in TFLOP/s, from NVIDIA's data sheets (without
# sparsity): H100 SXM and H200 989, H100 NVL 835, H100 PCIe 756.
# VITKD_GPU_PEAK_TFLOPS overrides it; an unknown card is 989, said so.
gpu_peak_tflops() {
  if [ -n "${VITKD_GPU_PEAK_TFLOPS:-}" ]; then echo "$VITKD_GPU_PEAK_TFLOPS set"; return; fi
  local name
  name=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case "$name" in
    *H100*PCIe*) echo "756 $name" ;;
    *H100*NVL*) echo "835 $name" ;;
    *H100*|*H200*) echo "989 $name" ;;
    *) echo "989 unknown card ${name:-(nvidia-smi gave no name)}: the H100 SXM's peak assumed" ;;
  esac
}
RUN_ARGS=(--set train.epochs=1000 --set train.final_eval=false --set train.eval_every_epochs=0
          --set checkpoint.every_steps=0 --set checkpoint.resume=never --set train.mfu_ceiling=1e12)

# vitkd_rate NAME CONFIG ARGS...: two runs (K1, K2 steps) -> $RUNS/g-NAME/rate.json
vitkd_rate() {
  local name=$1 config=$2 dev=cuda k; shift 2
  [ "$DRY" = 1 ] && dev=cpu
  for k in "$K1" "$K2"; do
    vk train "$config" --set run.device="$dev" "${RUN_ARGS[@]}" "$@" --set train.max_steps="$k" \
      --set train.timing_every_steps=$(((k + 1) / 2)) --set run.out_dir="$RUNS/g-$name/vitkd-$k" || return 1
    cp "$RUNS/g-$name/vitkd-$k/result.json" "$OUT/results/$name-vitkd-$k.json"
  done
  "$PYTHON" - "$RUNS/g-$name" "$K1" "$K2" > "$RUNS/g-$name/rate.json" <<'PY'
import json, sys
r, k1, k2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a, b = (json.load(open(f"{r}/vitkd-{k}/result.json")) for k in (k1, k2))
batch = b["images_per_second"] * b["train_seconds"] / max(1, k2)  # samples per step, all ranks
dt = b["train_seconds"] - a["train_seconds"]
# A difference that is not positive (noise on a busy CPU) falls back to the longer run's whole-run rate, said so.
steady = dt > 0
print(json.dumps({"images_per_second": (k2 - k1) * batch / dt if steady else b["images_per_second"],
                  "method": f"steps {k1}..{k2}" if steady else f"whole {k2}-step run (the {k1}..{k2} difference was not positive)",
                  "steps": [k1, k2],
                  "train_seconds": [a["train_seconds"], b["train_seconds"]],
                  "whole_run_images_per_second": b["images_per_second"], "flops_per_sample": b["flops_per_sample"],
                  "compute": b.get("compute"), "device": b.get("device", "unknown (no device in result.json)")}))
PY
}
# timm_rate NAME MODE [--compile | --loader]: benchmarks/timm_step.py ->
# $RUNS/g-NAME/peer-timm_MODE[_compile|_loader].json; --loader feeds it the
# check's own dataset file through a DataLoader (half the cores as workers)
# instead of random tensors already on the device.
timm_rate() {
  local name=$1 mode=$2 dev=cuda tag extra=(); shift 2
  [ "$DRY" = 1 ] && dev=cpu
  tag=timm_$mode
  case "${1:-}" in
    --compile) tag=${tag}_compile; extra=(--compile) ;;
    --loader) tag=${tag}_loader; extra=(--data "$GDATA" --workers "$([ "$DRY" = 1 ] && echo 1 || echo $(( $(nproc --all) / 2 )))") ;;
  esac
  "$PYTHON" "$ROOT/benchmarks/timm_step.py" --mode "$mode" --device "$dev" "${TIMM_ARGS[@]}" \
    --steps $((K2 - K1)) --warmup 3 "${extra[@]}" "${PEER_FP32[@]}" --out "$RUNS/g-$name/peer-$tag.json" || return 1
  cp "$RUNS/g-$name/peer-$tag.json" "$OUT/results/$name-$tag.json"
}
# rates_verdict NAME: the verdict from rate.json (vitkd) and the peer-*.json beside it (timm, PyTorch)
rates_verdict() {
  local line peak
  peak=$(gpu_peak_tflops)
  line=$("$PYTHON" - "$RUNS/g-$1" "$DRY" "${peak%% *}" <<'PY'
import glob, json, os, sys
r, dry, peak = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
out = {}
if os.path.exists(f"{r}/rate.json"):
    out["vitkd"] = json.load(open(f"{r}/rate.json"))
for f in sorted(glob.glob(f"{r}/peer-*.json")):
    out[os.path.basename(f)[5:-5]] = json.load(open(f))
fps = out.get("vitkd", {}).get("flops_per_sample", 0)
parts = []
for who, d in out.items():
    ips = d["images_per_second"]
    if fps and not dry:
        d["mfu"] = fps * ips / (peak * 1e12)
    parts.append(f"{who} {ips:.0f} img/s" + (f" (MFU {d['mfu']:.3f})" if "mfu" in d else ""))
for t in [k for k in out if k != "vitkd"] if "vitkd" in out else []:
    parts.append(f"vitkd/{t} {out['vitkd']['images_per_second'] / out[t]['images_per_second']:.2f}")
# On a GPU a rate that is not positive, not measured on the GPU, or with an
# MFU outside (0, 1], or vitkd's steady rate not measured, is a fail.
bad = [w for w, d in out.items() if d["images_per_second"] <= 0]
for w, d in ([] if dry else out.items()):
    dev = str(d.get("device", "none recorded"))
    if w == "vitkd" and not dev.startswith("cuda"):
        bad.append(f"vitkd's rate on {dev}, not cuda")
    if w != "vitkd" and "device" in d and dev == "cpu":
        bad.append(f"{w}'s rate on the CPU")
    if "mfu" in d and not 0 < d["mfu"] <= 1:
        bad.append(f"{w}'s MFU {d['mfu']:.3f} outside (0, 1] (peak {peak:g} TFLOP/s)")
if "vitkd" in out and not out["vitkd"].get("method", "steps").startswith("steps"):
    bad.append("vitkd's steady rate (" + out["vitkd"]["method"] + ")")
status = "fail" if bad and not dry else "pass"
msg = "; ".join(parts) + (" (dry run: CPU, tiny shapes)" if dry else "") + (f"; not measured: {', '.join(bad)}" if bad else "")
print(status + "\t" + json.dumps(out) + "\t" + msg)
PY
) || { emit fail "could not read the runs' results"; return; }
  local st=${line%%$'\t'*} rest=${line#*$'\t'}
  emit "$st" "${rest#*$'\t'}" rates="${rest%%$'\t'*}" peak_tflops="${peak%% *}" peak_source="${peak#* }"
}

# ---- g: ViT-B/16 -> ViT-S/16 at 224, vitkd and timm eager ---------------------------
check_g_distill_vits16() {
  shapes224 || { emit fail "vitkd prepare synthetic ($S224 x $S224) failed"; return; }
  local r=$RUNS/g-distill_vits16 dev=cuda; rm -rf "$r"; mkdir -p "$r"
  [ "$DRY" = 1 ] && dev=cpu
  # The teacher: a ViT-B/16 of one step (random weights; the rate does not depend on them).
  vk train "$ROOT/inputs/fmnist-teacher.toml" --set run.device="$dev" "${RUN_ARGS[@]}" "${V224[@]}" "${VITB[@]}" \
    --set train.max_steps=1 --set run.out_dir="$r/teacher" || { emit fail "the ViT-B/16 teacher run failed"; return; }
  vitkd_rate distill_vits16 "$ROOT/inputs/fmnist-distill.toml" "${V224[@]}" "${VITS[@]}" \
    --set teacher.checkpoint="$(last_ckpt "$r/teacher")" || { emit fail "vitkd distillation runs failed"; return; }
  timm_rate distill_vits16 distill || { emit fail "timm eager distillation failed (see the log)"; return; }
  timm_rate distill_vits16 distill --loader || { emit fail "timm eager distillation from a DataLoader failed (see the log)"; return; }
  rates_verdict distill_vits16
}
check_g_vits16() {
  shapes224 || { emit fail "vitkd prepare synthetic ($S224 x $S224) failed"; return; }
  rm -rf "$RUNS/g-vits16"; mkdir -p "$RUNS/g-vits16"
  vitkd_rate vits16 "$ROOT/inputs/fmnist-teacher.toml" "${V224[@]}" "${VITS[@]}" || { emit fail "vitkd ViT-S/16 runs failed"; return; }
  timm_rate vits16 student || { emit fail "timm eager ViT-S/16 failed (see the log)"; return; }
  rates_verdict vits16
}
check_g_distill_compile() {
  shapes224 || { emit fail "vitkd prepare synthetic ($S224 x $S224) failed"; return; }
  [ "$DRY" = 1 ] && { emit skip "dry run: torch.compile on two busy CPU cores takes minutes"; return; }
  mkdir -p "$RUNS/g-compile"; rm -f "$RUNS/g-compile"/peer-*.json
  cp "$RUNS/g-distill_vits16/rate.json" "$RUNS/g-compile/rate.json" 2>/dev/null
  timm_rate compile distill --compile || { emit fail "timm torch.compile distillation failed (see the log)"; return; }
  rates_verdict compile
}

# ---- g: the Fashion-MNIST teacher recipe, vitkd against the eager PyTorch baseline --
check_g_fmnist() {
  local dev=cuda r=$RUNS/g-fmnist; rm -rf "$r"; mkdir -p "$r"
  K1=20; K2=220; [ "$DRY" = 1 ] && { dev=cpu; K1=2; K2=5; }
  vitkd_rate fmnist "$ROOT/inputs/fmnist-teacher.toml" --set data.augment=false --set data.path="$DATA" ||
    { emit fail "vitkd teacher-recipe runs failed"; return; }
  local fp32=(); [ "$DRY" = 1 ] && fp32=(--fp32)   # as PEER_FP32
  "$PYTHON" "$ROOT/benchmarks/pytorch_baseline.py" --device "$dev" --data "$DATA" --max-steps "$K2" --epochs 1000 "${fp32[@]}" \
    --mode teacher --dim 192 --depth 6 --heads 3 --batch-size 64 --warmup-steps 100 --threads 1 \
    --out "$r/pytorch/result.json" || { emit fail "the eager PyTorch baseline failed"; return; }
  "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); json.dump({"images_per_second": d["images_per_second"], "whole_run": True}, open(sys.argv[2], "w"))' \
    "$r/pytorch/result.json" "$r/peer-pytorch_eager.json"
  rates_verdict fmnist
}

# ---- i: the loader at 224 on every core, next to the GPU's rate ---------------------
check_i_loader() {
  shapes224 || { emit fail "vitkd prepare synthetic ($S224 x $S224) failed"; return; }
  local n model=0 millis=3000
  n=$(nproc --all); [ "$DRY" = 1 ] && { n=2; millis=300; }
  model=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["images_per_second"])' \
    "$RUNS/g-distill_vits16/rate.json" 2>/dev/null || echo 0)
  # shellcheck disable=SC2086
  "$MPIEXEC" ${MPI_BIND:-} ${MPIEXEC_NUMPROC_FLAG:--n} "$n" ${MPIEXEC_PREFLAGS:-} "$VITKD" ${MPIEXEC_POSTFLAGS:-} \
    bench loader --data "$GDATA" --image-size "$S224" --crop random_resized --batch 64 --millis "$millis" \
    --model-rate "$model" --out "$OUT/bench-loader.json" || { emit fail "vitkd bench loader on $n ranks failed"; return; }
  local msg
  msg=$("$PYTHON" - "$OUT/bench-loader.json" "$model" "$S224" <<'PY'
import json, sys
d, m, size = json.load(open(sys.argv[1])), float(sys.argv[2]), sys.argv[3]
s = (f"{d['images_per_s']:.0f} images/s on {d['ranks']} cores ({d['images_per_s_per_core']:.0f} per core), "
     f"random-resized crop + flip at {size}")
if m > 0:
    s += f"; vitkd's distillation trains at {m:.0f}: the GPU {'would wait' if d['images_per_s'] < m else 'does not wait'}"
else:
    s += "; no GPU rate to compare (g_distill_vits16 did not pass)"
print(s)
PY
) || { emit fail "bench loader wrote no rates"; return; }
  # On a GPU the loader's rate means something only beside the GPU's.
  if [ "$DRY" != 1 ] && ! le 1e-9 "$model"; then
    emit fail "$msg" loader="$(cat "$OUT/bench-loader.json")" model_rate="$model"; return
  fi
  emit pass "$msg" loader="$(cat "$OUT/bench-loader.json")" model_rate="$model"
}

# ---- h: the phase times and the timing log of g_vits16's runs -----------------------
# Each run flushes its timing log twice (train.timing_every_steps = half its
# steps, vitkd_rate): the log's cost is held to 1 % of the run (5 % in the
# dry run, whose runs last a few steps), and reported per flush.
check_h_phase_timing() {
  local runs rows status bound=0.01
  runs=$(ls "$RUNS"/g-vits16/vitkd-*/result.json 2>/dev/null)
  [ -n "$runs" ] || { emit skip "no ViT-S/16 runs (g_vits16 did not pass)"; return; }
  [ "$DRY" = 1 ] && bound=0.05
  # shellcheck disable=SC2086
  rows=$("$PYTHON" - $runs <<'PY'
import json, os, sys
rows = []
for f in sys.argv[1:]:
    r = json.load(open(f))
    phases = r["phase_seconds_rank0"]
    # train_seconds ends before the final checkpoint: checkpoint and eval are outside it.
    if isinstance(phases, dict):
        covered = sum(v for k, v in phases.items() if k not in ("checkpoint", "eval"))
    else:
        covered = sum(phases[:8])  # util/timing.hpp's order: checkpoint and eval are 8 and 9
    over = r["timing_log_overhead_fraction"]
    rows.append({"run": os.path.basename(os.path.dirname(f)), "phases_over_run": round(covered / r["train_seconds"], 4),
                 "log_overhead": over, "log_seconds_per_flush": over * r["train_seconds"] / 3})
print(json.dumps(rows))
PY
) || { emit fail "could not read the runs' result.json"; return; }
  echo "$rows"
  # The dry run's runs last a tenth of a second: there a flush under 10 ms
  # passes whatever its fraction (2 ms was 5.3 % of a 2-step run, 2026-12-06).
  status=$("$PYTHON" -c 'import json, sys
dry = sys.argv[3] == "1"
ok = all(0.75 <= r["phases_over_run"] <= 1.05 and
         (r["log_overhead"] < float(sys.argv[2]) or (dry and r["log_seconds_per_flush"] < 0.01))
         for r in json.loads(sys.argv[1]))
print("pass" if ok else "fail")' "$rows" "$bound" "$DRY")
  emit "$status" "phase times within 0.75-1.05 of the run, timing log below $bound of it$([ "$DRY" = 1 ] && echo " or 10 ms a flush") (two flushes per run)" runs="$rows"
}
