#!/usr/bin/env python3
"""Keep the evidence of a finished `vitkd train` run, small enough for the repository.

    /usr/bin/python3 experiments/distillation/keep_run.py RUN DEST [--weights FILE.h5]

Copies RUN/result.json (the figures, the recipe, the evaluation curve) and
RUN/test_predictions.json (when written) into DEST, and writes
DEST/timing-summary.json with the median step time experiments/distillation/lift.py reads from
the timing log and this machine's CPU (the log itself, megabytes for a long run, and the checkpoints
stay behind). experiments/distillation/lift.py reads DEST as it reads RUN: the same tables.
experiments/distillation/compare.sh keeps every run it finishes this way (experiments/distillation/results/compare/), so
that the comparison can be run seed by seed in separate sessions.

--weights FILE.h5 also writes the model of RUN/checkpoint.h5 without its
optimizer, sifting and data state (has_state = 0; a tenth to a third of the
file): what `teacher.checkpoint` reads, so a chosen teacher can be kept
(experiments/distillation/teacher_vit.sh). Training cannot resume from it.

Exit status: 0, or 2 with one line naming the file when RUN has no
result.json or timing.h5.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lift_stats  # noqa: E402  (the step-time rule lives there once)


def cpu_model():
    """This machine's CPU (keep_run.py runs where the run ran): model name and bf16 flags."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return "unknown"
    model = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("model name")), "unknown")
    flags = next((l.split(":", 1)[1].split() for l in text.splitlines() if l.startswith("flags")), [])
    bf16 = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return model + (" (" + ", ".join(bf16) + ")" if bf16 else " (no bf16 flags)")


def keep_weights(checkpoint, out):
    """The checkpoint's /model group and root attributes, has_state = 0 (the checkpoint format of
    src/io/checkpoint.hpp, weights only), written to out.tmp and renamed."""
    import h5py  # only here: the rest of keep_run.py needs no HDF5 module
    with h5py.File(checkpoint, "r") as src, h5py.File(out + ".tmp", "w") as dst:
        if "model" not in src:
            raise lift_stats.InputError(f"{checkpoint}: no /model group (not a vitkd checkpoint?)")
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        dst.attrs["has_state"] = 0
        src.copy(src["model"], dst, "model")
    os.replace(out + ".tmp", out)


def main():
    args = sys.argv[1:]
    weights = None
    if len(args) == 4 and args[2] == "--weights":
        weights = args[3]
        args = args[:2]
    if len(args) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    run, dest = args
    try:
        step_ms = lift_stats.median_step_ms(os.path.join(run, "timing.h5"))
        if not os.path.exists(os.path.join(run, "result.json")):
            raise lift_stats.InputError(f"{os.path.join(run, 'result.json')}: missing (has the run finished?)")
        if weights and not os.path.exists(os.path.join(run, "checkpoint.h5")):
            raise lift_stats.InputError(f"{os.path.join(run, 'checkpoint.h5')}: missing (no checkpoint to keep)")
    except lift_stats.InputError as e:
        print(f"keep_run.py: error: {e}", file=sys.stderr)
        return 2
    os.makedirs(dest, exist_ok=True)
    for name in ("result.json", "test_predictions.json"):
        if os.path.exists(os.path.join(run, name)):
            shutil.copyfile(os.path.join(run, name), os.path.join(dest, name))
    with open(os.path.join(dest, lift_stats.KEPT_TIMING), "w") as fh:
        json.dump({"median_step_ms": step_ms, "from": "timing.h5: median over steps of the slowest rank's "
                   "step_wall_seconds", "cpu": cpu_model()}, fh)
        fh.write("\n")
    if weights:
        try:
            keep_weights(os.path.join(run, "checkpoint.h5"), weights)
        except (lift_stats.InputError, OSError) as e:
            print(f"keep_run.py: error: {e}", file=sys.stderr)
            return 2
        print(f"keep_run.py: {run}/checkpoint.h5 -> {weights} (weights only)")
    print(f"keep_run.py: {run} -> {dest} (median step {step_ms:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
