"""Trains vitkd's ViT in PyTorch from the same initial weights, on the same
sequence of batches, with torch.optim.AdamW and vitkd's learning-rate schedule,
and compares the result with a vitkd run: the per-step loss and lr from the
run's timing.h5 and the final weights from its checkpoint.h5.

    train_reference.py --data D.h5 --init INIT/checkpoint.h5 --run RUN_DIR \\
        --steps N --batch-size B --seed S --lr ... [--perturb NAME]

INIT/checkpoint.h5 holds vitkd's initial weights (a run of the same seed and
model whose one step used lr 1e-30: every weight is unchanged, zero biases
move by about 1e-30, which this script sets back to 0). RUN_DIR is a vitkd
run of 1 rank, precision.compute = "fp32", data.augment = false,
train.timing_every_steps = 1, that stopped after N steps (train.max_steps).

The reference is independent of vitkd's kernels: analysis/vitkd_model.py's
model (F.gelu, matmul attention, nn.LayerNorm), torch.optim.AdamW with
vitkd's two weight-decay groups (or one, for model.decay = "all"),
torch.nn.utils.clip_grad_norm_, F.cross_entropy. What it shares with vitkd
is the data order (vitkd's epoch permutation, written here from
src/data/loader.cpp's definition), the schedule (benchmarks/baseline_parts.py's
schedule_lr) and the normalisation (baseline_parts.load_split).

Exit 0 when every logged step's loss agrees within --loss-rtol (relative) and
the final parameters within --param-rtol (relative L2 over all parameters);
exit 1 otherwise, with the first mismatches printed. --perturb NAME adds 1e-2
to one element of parameter NAME before training, and --eps overrides the
reference's AdamW epsilon: both exist to show that the comparison fails.
"""
import argparse
import json
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "analysis"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import vitkd_model  # noqa: E402
import baseline_parts as base  # noqa: E402  (pytorch_baseline.py's data and schedule)

M64 = (1 << 64) - 1


def mix64(z):
    """SplitMix64 finalizer (src/util/hash.hpp)."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def hash64(a, *rest):
    for b in rest:
        a = mix64(a) ^ (b & M64)
    return mix64(a)


def epoch_permutation(n, seed, epoch):
    """vitkd's global permutation of [0, n) for (seed, epoch) (src/data/loader.cpp)."""
    key = hash64(seed & M64, 0x5045524D, epoch)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = (hash64(key, i) * (i + 1)) >> 64
        p[i], p[j] = p[j], p[i]
    return p


def vitkd_batches(n, g, seed, steps):
    """Index tensors of the first `steps` global batches (1 rank: sorted slices)."""
    spe = (n + g - 1) // g
    out = []
    epoch, perm = -1, None
    for s in range(steps):
        e, k = divmod(s, spe)
        if e != epoch:
            epoch, perm = e, epoch_permutation(n, seed, e)
        out.append(torch.tensor(sorted(perm[k * g:min((k + 1) * g, n)]), dtype=torch.int64))
    return out


def attr_str(a, key, default):
    if key not in a:
        return default
    v = a[key]
    return v.decode() if isinstance(v, bytes) else str(v)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--init", required=True, help="checkpoint.h5 with vitkd's initial weights")
    p.add_argument("--run", required=True, help="vitkd out_dir (timing.h5, checkpoint.h5)")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--epochs", type=int, required=True, help="train.epochs of the run (schedule)")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--min-lr", type=float, required=True)
    p.add_argument("--warmup-steps", type=int, required=True)
    p.add_argument("--weight-decay", type=float, required=True)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--grad-clip", type=float, default=0.0)
    p.add_argument("--loss-rtol", type=float, default=0.01)
    p.add_argument("--param-rtol", type=float, required=True)
    p.add_argument("--perturb", default="", help="parameter to perturb (to see the check fail)")
    p.add_argument("--resync-every", type=int, default=0,
                   help="K > 0: every K steps load vitkd's weights and AdamW moments from "
                        "RUN/checkpoint-step<s, 8 digits>.h5 (checkpoint.every_steps = K, keep all), so "
                        "the comparison measures at most K steps of drift")
    p.add_argument("--free-running", action="store_true",
                   help="with --resync-every: also train without resynchronising and report "
                        "(not check) how far the two free-running trajectories drift")
    p.add_argument("--sensitivity", type=float, default=0.0,
                   help="also train the reference a second time with one weight moved by this "
                        "much and report how far the two references drift (rounding sensitivity)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="", help="JSON summary")
    return p.parse_args(argv)


def load_vitkd_state(path, model, opt, named):
    """Weights and AdamW moments of vitkd checkpoint `path` into the reference
    (vitkd's flat buffers hold the parameters in registration order, the
    order of named_parameters() here)."""
    with h5py.File(path, "r") as f:
        step = int(f.attrs["step"])
        m, v = f["optimizer/m"][()], f["optimizer/v"][()]
        with torch.no_grad():
            off = 0
            for nm, p in named:
                p.copy_(torch.from_numpy(f["model"][nm][()]))
                k = p.numel()
                opt.state[p] = {"step": torch.tensor(float(step)),
                                "exp_avg": torch.from_numpy(m[off:off + k].copy()).view_as(p),
                                "exp_avg_sq": torch.from_numpy(v[off:off + k].copy()).view_as(p)}
                off += k
    return step


def train_reference(a, x_all, y_all, perturb_name="", perturb_size=0.0, resync_every=0):
    """Per-step losses and lrs, and the final named parameters. resync_every K:
    every K steps the weights and moments are replaced by vitkd's
    (RUN/checkpoint-step<s, 8 digits>.h5), so the losses measure K steps of drift at most."""
    n = x_all.shape[0]
    g = a.batch_size
    model = vitkd_model.load_checkpoint(a.init).train()
    with h5py.File(a.init, "r") as f:
        decay_scope = attr_str(f.attrs, "model_decay", "matrices")
        assert int(f.attrs["step"]) == 1, "the init checkpoint must be the one-step lr-1e-30 run"
    with torch.no_grad():
        for p in model.parameters():
            p.masked_fill_(p.abs() < 1e-20, 0.0)  # the 1e-30 step on zero biases
        if perturb_name:
            dict(model.named_parameters())[perturb_name].view(-1)[0] += perturb_size

    named = list(model.named_parameters())
    if decay_scope == "all":
        groups = [{"params": [p for _, p in named], "weight_decay": a.weight_decay}]
    else:
        groups = [
            {"params": [p for nm, p in named if base.decays(nm, p)], "weight_decay": a.weight_decay},
            {"params": [p for nm, p in named if not base.decays(nm, p)], "weight_decay": 0.0},
        ]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)

    total_samples = min(float(n) * a.epochs, float(a.steps) * g)
    warmup_samples = float(a.warmup_steps) * g
    seen = 0
    losses, lrs = [], []
    for s, idx in enumerate(vitkd_batches(n, g, a.seed, a.steps)):
        if resync_every and s > 0 and s % resync_every == 0:
            assert load_vitkd_state(os.path.join(a.run, f"checkpoint-step{s:08d}.h5"), model, opt, named) == s
        seen += idx.numel()
        lr = base.schedule_lr(seen, warmup_samples, total_samples, a.lr, a.min_lr)
        for grp in opt.param_groups:
            grp["lr"] = lr
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        losses.append(float(loss))
        lrs.append(lr)
    return losses, lrs, named, decay_scope


def first_above(rel, tol):
    i = np.nonzero(rel > tol)[0]
    return int(i[0]) + 1 if len(i) else None


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    x_all, y_all = base.load_split(a.data, "train")
    losses, lrs, named, decay_scope = train_reference(
        a, x_all, y_all, a.perturb, 1e-2 if a.perturb else 0.0, a.resync_every)

    with h5py.File(os.path.join(a.run, "timing.h5"), "r") as f:
        v_steps = f["metrics/step"][()] if "metrics/step" in f else None
        v_loss = f["metrics/loss"][()].astype(np.float64)
        v_lr = f["metrics/lr"][()].astype(np.float64)
    with h5py.File(os.path.join(a.run, "checkpoint.h5"), "r") as f:
        v_step = int(f.attrs["step"])
        v_params = {nm: torch.from_numpy(f["model"][nm][()]) for nm, _ in named}

    fails = []
    if v_step != a.steps:
        fails.append(f"the vitkd run stopped at step {v_step}, not {a.steps}")
    if len(v_loss) != a.steps:
        fails.append(f"timing.h5 has {len(v_loss)} losses, expected one per step ({a.steps}); "
                     "run with train.timing_every_steps = 1")
    m = min(len(v_loss), a.steps)
    ref_loss = np.asarray(losses[:m])
    rel = np.abs(v_loss[:m] - ref_loss) / np.abs(ref_loss)
    bad = np.nonzero(rel > a.loss_rtol)[0]
    for i in bad[:5]:
        fails.append(f"step {i + 1}: loss vitkd {v_loss[i]:.6f}, reference {ref_loss[i]:.6f} "
                     f"(relative difference {rel[i]:.2e} > {a.loss_rtol})")
    lr_rel = np.abs(v_lr[:m] - np.asarray(lrs[:m])) / np.maximum(np.abs(np.asarray(lrs[:m])), 1e-30)
    if m and lr_rel.max() > 1e-5:
        i = int(lr_rel.argmax())
        fails.append(f"step {i + 1}: lr vitkd {v_lr[i]:.6e}, reference {lrs[i]:.6e}")

    num = den = 0.0
    worst = ("", 0.0)
    for nm, p in named:
        d = float((v_params[nm] - p.detach()).double().norm())
        r = float(p.detach().double().norm())
        num += d * d
        den += r * r
        if d / max(r, 1e-30) > worst[1]:
            worst = (nm, d / max(r, 1e-30))
    param_rel = math.sqrt(num / max(den, 1e-300))
    if not param_rel <= a.param_rtol:
        fails.append(f"final parameters: relative L2 difference {param_rel:.3e} > {a.param_rtol} "
                     f"(worst tensor {worst[0]}: {worst[1]:.3e})")

    summary = {
        "steps": a.steps, "decay": decay_scope, "resync_every": a.resync_every,
        "loss_first": [float(v_loss[0]), losses[0]] if m else None,
        "loss_last": [float(v_loss[m - 1]), losses[m - 1]] if m else None,
        "loss_max_rel_diff": float(rel.max()) if m else None,
        "loss_max_rel_diff_step": int(rel.argmax()) + 1 if m else None,
        "lr_max_rel_diff": float(lr_rel.max()) if m else None,
        "param_rel_l2": param_rel, "param_worst_tensor": worst[0], "param_worst_rel_l2": worst[1],
        "loss_rtol": a.loss_rtol, "param_rtol": a.param_rtol, "ok": not fails,
    }
    extra = {}
    if a.free_running and a.resync_every:
        free, _, _, _ = train_reference(a, x_all, y_all)
        r = np.abs(v_loss[:m] - np.asarray(free[:m])) / np.abs(np.asarray(free[:m]))
        summary["free_running_loss_max_rel_diff"] = float(r.max())
        summary["free_running_first_step_above_1e-3"] = first_above(r, 1e-3)
        summary["free_running_first_step_above_loss_rtol"] = first_above(r, a.loss_rtol)
        extra["loss_reference_free_running"] = free[:m]
    if a.sensitivity:
        other, _, _, _ = train_reference(a, x_all, y_all, "blocks.0.attn.qkv.weight", a.sensitivity)
        base_run = extra.get("loss_reference_free_running", losses) if a.resync_every else losses
        r = np.abs(np.asarray(other[:m]) - np.asarray(base_run[:m])) / np.abs(np.asarray(base_run[:m]))
        summary["sensitivity_perturbation"] = a.sensitivity
        summary["sensitivity_loss_max_rel_diff"] = float(r.max())
        summary["sensitivity_first_step_above_1e-3"] = first_above(r, 1e-3)
        summary["sensitivity_first_step_above_loss_rtol"] = first_above(r, a.loss_rtol)
        extra["loss_reference_perturbed"] = other[:m]
    print(json.dumps(summary, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({**summary, "loss_vitkd": v_loss[:m].tolist(), "loss_reference": losses[:m],
                       **extra}, f, indent=1)
    if fails:
        print("reference training disagrees with vitkd:\n  " + "\n  ".join(fails), file=sys.stderr)
        return 1
    print(f"vitkd matches the PyTorch reference over {a.steps} steps: loss within "
          f"{summary['loss_max_rel_diff']:.2e} (tolerance {a.loss_rtol}), parameters within "
          f"{param_rel:.2e} relative L2 (tolerance {a.param_rtol})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
