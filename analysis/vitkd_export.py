"""Loads a student exported by `vitkd export CHECKPOINT.h5 --out DIR` into
PyTorch, checks it against the logits vitkd computed, and saves it as
TorchScript for serving.

    python3 DIR/vitkd_export.py DIR [--torchscript FILE.pt]   # default DIR/student.pt
        [--timm FILE.safetensors]   # also timm's state dict (needs safetensors; checked in timm if installed)
        [--torch-export FILE.pt2]   # also a torch.export program (PyTorch 2.x)

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
  TS_TOL:   the saved TorchScript module vs the eager module, and the same
            for timm's model and the torch.export program.

timm: the weights, with timm's names and shapes, load into
timm.create_model(NAME, pretrained=False, **kwargs) with strict=True, NAME
vit_tiny_patch16_224 (deit_tiny_distilled_patch16_224 with a distillation
token) and kwargs the shape; the file's metadata and the printed line give
both (vitkd_model.timm_model_args; docs/timm.md).
"""
import argparse
import json
import os
import sys
import warnings

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


def check_same(other, model, x, said, differs):
    """other(x) against model(x) within TS_TOL: prints `said` and the
    difference; raises RuntimeError(differs) beyond the tolerance."""
    with torch.no_grad():
        d = max_rel_diff(other(x), model(x))
    print(f"vitkd_export: {said}: {d:.3e} (tolerance {TS_TOL:g})")
    if d > TS_TOL:
        raise RuntimeError(differs)
    return d


def save_torchscript(model, path, x):
    """torch.jit.script + save; reloads the file and checks it on x. Newer
    PyTorch deprecates TorchScript: its warnings become one line here."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scripted = torch.jit.script(model)
        torch.jit.save(scripted, path)
        loaded = torch.jit.load(path)
    if any(issubclass(w.category, (DeprecationWarning, FutureWarning)) for w in caught):
        print(f"vitkd_export: note: PyTorch {torch.__version__} deprecates TorchScript; --torch-export FILE.pt2 "
              "writes its successor, and --timm / --timm-dir a timm model")
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return check_same(loaded, model, x, f"wrote {path} (TorchScript); reloaded vs eager",
                      f"{path}: the reloaded TorchScript module differs from the model")


def spec_of_meta(meta):
    spec = {k: meta[k] for k in vitkd_model.SPEC_KEYS}
    spec["dist_token"] = bool(meta["dist_token"])
    spec["norm_eps"] = float(meta.get("norm_eps", 1e-6))
    return spec


def pretrained_cfg(meta, spec):
    """timm's pretrained_cfg of the exported model: its input, normalisation,
    evaluation view (bilinear resize to image_size / crop_pct, centre crop)
    and class names, so that timm.data.resolve_data_config(model=m) gives the
    transform the model was trained for."""
    s, c = int(spec["image_size"]), int(spec["channels"])
    cfg = {"input_size": [c, s, s], "interpolation": meta.get("interpolation", "bilinear"),
           "crop_pct": float(meta.get("crop_pct", 0.875)), "crop_mode": "center",
           "num_classes": int(spec["classes"])}
    if meta.get("mean") and meta.get("std"):
        cfg["mean"], cfg["std"] = list(meta["mean"]), list(meta["std"])
    if meta.get("class_names"):
        cfg["label_names"] = list(meta["class_names"])
    return cfg


def save_timm(model, meta, path, x):
    """Writes the weights as a timm state dict (safetensors, with the
    timm.create_model name and arguments in its metadata); when timm is
    installed, loads them into timm's model (strict) and checks its logits."""
    try:
        from safetensors.torch import save_file
    except ImportError:
        raise RuntimeError("--timm needs the safetensors package (pip install safetensors)")
    spec = spec_of_meta(meta)
    name, kwargs = vitkd_model.timm_model_args(spec)
    plain = {k: v for k, v in kwargs.items() if k != "norm_layer"}
    metadata = {"format": "pt", "timm_model": name, "timm_kwargs": json.dumps(plain),
                "norm_eps": repr(spec["norm_eps"]), "vitkd_version": str(meta.get("vitkd_version", "")),
                "source_checkpoint": str(meta.get("source_checkpoint", "")),
                "pretrained_cfg": json.dumps(pretrained_cfg(meta, spec))}
    tmp = path + ".tmp"
    save_file(vitkd_model.timm_state_dict(model), tmp, metadata=metadata)
    os.replace(tmp, path)
    call = vitkd_model.timm_call(spec)
    print(f"vitkd_export: wrote {path} (timm state dict, safetensors); load with: model = {call}; "
          f"model.load_state_dict(safetensors.torch.load_file({path!r}))")
    try:
        import timm
    except ImportError:
        print("vitkd_export: timm is not installed here, so the timm model was not checked")
        return None
    from safetensors.torch import load_file
    tm = timm.create_model(name, pretrained=False, **kwargs).eval()
    tm.load_state_dict(load_file(path), strict=True)
    return check_same(tm, model, x, f"timm {timm.__version__} {name} with strict=True vs this model",
                      f"{path}: timm's model with these weights differs from the model")


def save_timm_dir(model, meta, out_dir, x):
    """A folder timm loads by itself: out_dir/model.safetensors and
    out_dir/config.json (timm's hub layout: architecture, model_args,
    pretrained_cfg), for timm.create_model("local-dir:" + out_dir,
    pretrained=True); when timm is installed, loads it so and checks the
    logits and resolve_data_config's transform."""
    spec = spec_of_meta(meta)
    name, kwargs = vitkd_model.timm_model_args(spec)
    if "norm_layer" in kwargs:
        raise ValueError(f"--timm-dir: model.norm_eps = {spec['norm_eps']} is not timm's 1e-6, and timm's "
                         "config.json cannot name another LayerNorm; use --timm (its metadata names it)")
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    pcfg = pretrained_cfg(meta, spec)
    config = {"architecture": name, "num_classes": int(spec["classes"]), "num_features": int(spec["dim"]),
              "model_args": kwargs, "pretrained_cfg": pcfg}
    if "label_names" in pcfg:
        config["label_names"] = pcfg["label_names"]
    weights = os.path.join(out_dir, "model.safetensors")
    save_file(vitkd_model.timm_state_dict(model), weights + ".tmp", metadata={"format": "pt"})
    os.replace(weights + ".tmp", weights)
    with open(os.path.join(out_dir, "config.json") + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
    os.replace(os.path.join(out_dir, "config.json") + ".tmp", os.path.join(out_dir, "config.json"))
    print(f"vitkd_export: wrote {out_dir}/ (model.safetensors, config.json); load with: "
          f"timm.create_model({'local-dir:' + out_dir!r}, pretrained=True)")
    try:
        import timm
        import timm.data
    except ImportError:
        print("vitkd_export: timm is not installed here, so the folder was not checked")
        return None
    tm = timm.create_model("local-dir:" + out_dir, pretrained=True).eval()
    dc = timm.data.resolve_data_config(model=tm)
    want = {k: pcfg[k] for k in ("crop_pct", "interpolation", "mean", "std") if k in pcfg}
    got = {k: (list(dc[k]) if isinstance(dc[k], tuple) else dc[k]) for k in want}
    if any(abs(g - w) > 1e-9 for k in ("mean", "std") if k in want for g, w in zip(got[k], want[k])) or \
            got.get("crop_pct") != want.get("crop_pct") or got.get("interpolation") != want.get("interpolation"):
        raise ValueError(f"{out_dir}: timm's resolve_data_config gives {got}, the model was trained for {want}")
    return check_same(tm, model, x, f"timm {timm.__version__} local-dir:{out_dir} (pretrained=True) vs this model; "
                      f"resolve_data_config: {got}", f"{out_dir}: timm's model from the folder differs from the model")


def save_torch_export(model, path, x):
    """torch.export (PyTorch 2.x) with a dynamic batch; reloads and checks it on x."""
    if not hasattr(torch, "export") or not hasattr(torch.export, "save"):
        raise RuntimeError(f"--torch-export: PyTorch {torch.__version__} has no torch.export "
                           "(PyTorch 2.1 and newer have it); run this with a newer torch")
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    tmp = path + ".tmp.pt2"  # torch.export.save warns about names not ending in .pt2
    torch.export.save(ep, tmp)
    os.replace(tmp, path)
    return check_same(torch.export.load(path).module(), model, x,
                      f"wrote {path} (torch.export program, load with torch.export.load({path!r}).module()); "
                      "reloaded vs eager", f"{path}: the reloaded torch.export program differs from the model")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory written by `vitkd export`")
    ap.add_argument("--torchscript", help="output TorchScript file (default DIR/student.pt)")
    ap.add_argument("--timm", metavar="FILE.safetensors",
                    help="also write the weights as a timm state dict (safetensors)")
    ap.add_argument("--timm-dir", metavar="DIR",
                    help="also write a folder timm loads by itself: DIR/model.safetensors and DIR/config.json "
                         "(timm.create_model('local-dir:DIR', pretrained=True), with the normalisation, "
                         "evaluation crop and class names in its pretrained_cfg)")
    ap.add_argument("--torch-export", metavar="FILE.pt2", help="also write a torch.export program")
    a = ap.parse_args(argv)
    model, meta = load(a.dir)
    check(model, a.dir)
    x, _, _ = reference(a.dir)
    save_torchscript(model, a.torchscript or os.path.join(a.dir, "student.pt"), x)
    if a.timm:
        save_timm(model, meta, a.timm, x)
    if a.timm_dir:
        save_timm_dir(model, meta, a.timm_dir, x)
    if a.torch_export:
        save_torch_export(model, a.torch_export, x)
    names = meta.get("class_names") or []
    print(f"vitkd_export: OK ({sum(p.numel() for p in model.parameters())} parameters, "
          f"{meta['classes']} classes{': ' + ', '.join(names) if names else ''})")


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, ValueError, OSError, KeyError) as e:
        print(f"vitkd_export: error: {e}", file=sys.stderr)
        sys.exit(1)
