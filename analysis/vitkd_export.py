"""Loads a student exported by `vitkd export CHECKPOINT.h5 --out DIR` into
PyTorch, checks it against the logits vitkd computed, and saves it as
TorchScript for serving.

    python3 DIR/vitkd_export.py DIR [--torchscript FILE.pt]   # default DIR/student.pt

or from Python:

    import vitkd_export
    model, meta = vitkd_export.load("DIR")         # torch.nn.Module in eval mode, model.json
    x = vitkd_export.preprocess(images, meta)      # uint8 [N,H,W,C] -> float [N,C,H,W]
    logits = model(x)                              # [N, classes]

The export directory (see src/cmd/export.hpp and the README) holds weights.h5
(/model/<parameter> float32, vitkd's parameter names), model.json (the
architecture, the input normalization and the class names), reference.h5 (a
fixed input and vitkd's logits for it, fp32 and bf16) and this loader with
vitkd_model.py (the same ViT as vitkd's C++ one).

Tolerances of the check, relative to scale = max(1, max |logit|):
  FP32_TOL: PyTorch fp32 vs vitkd fp32 logits (same arithmetic, different
            kernels' summation order);
  BF16_TOL: PyTorch fp32 vs vitkd's bf16-autocast logits (bf16 keeps 8
            significant bits, 2^-8 relative per rounding, accumulated over
            the layers);
  TS_TOL:   the saved TorchScript module vs the eager module.
"""
import argparse
import json
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vitkd_model  # noqa: E402

FORMAT = "vitkd-export"
VERSION = 1
FP32_TOL = 1e-4
BF16_TOL = 2.0 ** -5
TS_TOL = 1e-5


def _str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load(export_dir):
    """Builds the ViT described by DIR/model.json and loads DIR/weights.h5.
    Returns (model in eval mode, the model.json dict)."""
    with open(os.path.join(export_dir, "model.json")) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT or int(meta.get("format_version", -1)) != VERSION:
        raise ValueError(f"{export_dir}/model.json: format {meta.get('format')!r} version "
                         f"{meta.get('format_version')!r}, expected {FORMAT!r} version {VERSION}")
    model = vitkd_model.ViT(image_size=int(meta["image_size"]), channels=int(meta["channels"]),
                            patch=int(meta["patch"]), dim=int(meta["dim"]),
                            depth=int(meta["depth"]), heads=int(meta["heads"]),
                            mlp_ratio=float(meta["mlp_ratio"]), classes=int(meta["classes"]),
                            dist_token=bool(meta["dist_token"]),
                            norm_eps=float(meta.get("norm_eps", 1e-6)))
    path = os.path.join(export_dir, meta.get("weights", "weights.h5"))
    with h5py.File(path, "r") as f:
        if _str(f.attrs.get("format")) != FORMAT:
            raise ValueError(f"{path}: not a vitkd export (format {f.attrs.get('format')!r})")
        names = set(f["model"].keys())
        want = set(model.state_dict().keys())
        if names != want:
            raise ValueError(f"{path}: parameters differ from the model: missing "
                             f"{sorted(want - names)}, unexpected {sorted(names - want)}")
        state = {k: torch.from_numpy(f["model"][k][()]) for k in want}
    model.load_state_dict(state)
    return model.eval(), meta


def preprocess(images, meta):
    """uint8 images [N,H,W,C] (numpy or tensor) -> normalized float [N,C,H,W],
    exactly as vitkd feeds its models: (pixel/255 - mean[c]) / std[c]."""
    x = torch.as_tensor(images).to(torch.float32) / 255.0
    if meta.get("mean"):
        x = (x - torch.tensor(meta["mean"], dtype=torch.float32)) / torch.tensor(
            meta["std"], dtype=torch.float32)
    return x.permute(0, 3, 1, 2).contiguous()


def reference(export_dir):
    """vitkd's fixed input and its fp32 and bf16 logits: (x, logits, logits_bf16)."""
    with h5py.File(os.path.join(export_dir, "reference.h5"), "r") as f:
        return tuple(torch.from_numpy(f[k][()]) for k in ("input", "logits", "logits_bf16"))


def max_rel_diff(a, b):
    scale = max(1.0, b.abs().max().item())
    return (a - b).abs().max().item() / scale


def check(model, export_dir):
    """Compares the model's logits on the reference input with vitkd's; returns
    the two relative differences, raises if one exceeds its tolerance."""
    x, want32, want16 = reference(export_dir)
    with torch.no_grad():
        got = model(x)
    d32, d16 = max_rel_diff(got, want32), max_rel_diff(got, want16)
    print(f"vitkd_export: PyTorch vs vitkd logits on {x.shape[0]} samples: "
          f"fp32 {d32:.3e} (tolerance {FP32_TOL:g}), bf16 {d16:.3e} (tolerance {BF16_TOL:g}); "
          f"relative to max(1, max|logit|)")
    if not (d32 <= FP32_TOL and d16 <= BF16_TOL):
        raise RuntimeError(f"{export_dir}: the PyTorch model's logits differ from vitkd's")
    return d32, d16


def save_torchscript(model, path, x):
    """torch.jit.script + save; reloads the file and checks it on x."""
    scripted = torch.jit.script(model)
    torch.jit.save(scripted, path)
    loaded = torch.jit.load(path)
    with torch.no_grad():
        d = max_rel_diff(loaded(x), model(x))
    print(f"vitkd_export: wrote {path} (TorchScript); reloaded vs eager: {d:.3e} "
          f"(tolerance {TS_TOL:g})")
    if d > TS_TOL:
        raise RuntimeError(f"{path}: the reloaded TorchScript module differs from the model")
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory written by `vitkd export`")
    ap.add_argument("--torchscript", help="output TorchScript file (default DIR/student.pt)")
    a = ap.parse_args(argv)
    model, meta = load(a.dir)
    check(model, a.dir)
    x, _, _ = reference(a.dir)
    save_torchscript(model, a.torchscript or os.path.join(a.dir, "student.pt"), x)
    names = meta.get("class_names") or []
    print(f"vitkd_export: OK ({sum(p.numel() for p in model.parameters())} parameters, "
          f"{meta['classes']} classes{': ' + ', '.join(names) if names else ''})")


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, ValueError, OSError, KeyError) as e:
        print(f"vitkd_export: error: {e}", file=sys.stderr)
        sys.exit(1)
