"""Turns a timm ViT's weights (a PyTorch state dict .pth/.bin, or .safetensors)
into a vitkd checkpoint usable as teacher.checkpoint: the teacher then runs as
vitkd's own ViT (bf16 where the CPU has it, FLOPs counted, cacheable).

    python analysis/vitkd_import.py FILE --preset vit_b16 --out teacher.h5 \
        [--set model.KEY=VALUE ...] [--data DATA.h5 --timm-mean M,M,M --timm-std S,S,S]

The architecture comes from --preset (vitkd's model.preset: vit_ti16, vit_s16,
vit_b16, vit_l16, timm's vit_{tiny,small,base,large}_patch16_224) and --set
model.KEY=VALUE (image_size, channels, patch, dim, depth, heads, mlp_ratio,
classes, norm_eps); model.classes defaults to the rows of the file's head.
Every tensor of the file must have the shape that architecture gives it; the
first that does not is named in a one-line error, and nothing is written.

Normalisation: vitkd feeds its teacher images normalised with the dataset's
mean and std. A timm model was trained on (pixel/255 - timm_mean) / timm_std
(its pretrained_cfg). With --data and --timm-mean/--timm-std the importer folds
the difference into the patch embedding (exact: the embedding is linear), so
the teacher sees what timm fed it; without them the teacher gets the
dataset-normalised images as they are.

Needs torch (2.x), numpy and h5py; safetensors for .safetensors files. The
venv of jobs/setup-torch2.sh has them. docs/timm.md has the whole workflow.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vitkd_model  # noqa: E402

FORMAT, VERSION = "vitkd-checkpoint", 1
# vitkd's model.preset (src/config/presets.cpp, model_presets()).
PRESETS = {"vit_ti16": (192, 12, 3), "vit_s16": (384, 12, 6), "vit_b16": (768, 12, 12),
           "vit_l16": (1024, 24, 16)}
KEYS = {"image_size": int, "channels": int, "patch": int, "dim": int, "depth": int, "heads": int,
        "mlp_ratio": float, "classes": int, "norm_eps": float}
# timm features vitkd's ViT does not have, by a piece of the tensor's name.
NOT_IN_VITKD = [
    ("fc_norm.", "a norm after average pooling (global_pool='avg'); vitkd's head reads the class token"),
    ("norm_pre.", "a norm before the blocks (pre_norm=True, as in CLIP models)"),
    (".ls1.", "LayerScale (init_values, as in DeiT III)"), (".ls2.", "LayerScale (init_values)"),
    ("q_norm.", "query/key normalisation (qk_norm=True)"), ("k_norm.", "qk_norm=True"),
    ("reg_token", "register tokens (reg_tokens > 0)"), ("attn_pool.", "attention pooling (global_pool='map')"),
    ("mlp.fc1_g", "a gated MLP (SwiGLU)"), ("mlp.norm.", "a norm inside the MLP (scale_mlp_norm=True)"),
    ("attn.norm.", "a norm inside attention (scale_attn_norm=True)"),
]


class UserError(Exception):
    """A user mistake: printed as one line, exit 2, nothing written."""


def vitkd_version():
    cm = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "CMakeLists.txt")
    try:
        m = re.search(r"project\(vitkd VERSION ([0-9.]+)", open(cm).read())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


def shape(t):
    return "[" + ",".join(str(s) for s in t) + "]"


def read_state(path):
    """{name: tensor} from a .safetensors file or a torch.save'd state dict
    (also {'state_dict': ...} / {'model': ...} as timm's and DeiT's training
    scripts save them; a DDP 'module.' prefix is removed)."""
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}; pass a timm .safetensors, .pth or .bin file")
    n = int.from_bytes(head[:8], "little") if len(head) >= 9 else 0
    if path.endswith(".safetensors") or (head[8:9] == b"{" and 0 < n < 100_000_000):
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise UserError(f"{path}: reading .safetensors needs the safetensors package "
                            "(pip install safetensors, or the venv of jobs/setup-torch2.sh)")
        try:
            return load_file(path)
        except Exception as e:  # the library's own error types differ by version
            raise UserError(f"{path}: not a readable safetensors file ({str(e).splitlines()[0]}); "
                            "pass the file timm saved (save_file(model.state_dict(), ...))")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        last = [l for l in str(e).splitlines() if l.strip()]
        why = type(e).__name__ + (f": {last[-1]}" if last and len(last[-1]) <= 120 else "")
        raise UserError(f"{path}: not a PyTorch state dict or safetensors file (torch.load: {why}); "
                        "save the weights with "
                        "torch.save(model.state_dict(), FILE) or safetensors, or clean a timm training "
                        "checkpoint with timm's clean_checkpoint.py")
    if isinstance(obj, dict):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not obj:
        raise UserError(f"{path}: holds a {type(obj).__name__}, not a state dict (a dict of name -> "
                        "tensor); save the weights with torch.save(model.state_dict(), FILE)")
    state = {}
    for k, v in obj.items():
        if not isinstance(v, torch.Tensor):
            raise UserError(f"{path}: entry {k!r} ({type(v).__name__}) is not a tensor, so the file is "
                            "not a state dict; save the weights with torch.save(model.state_dict(), FILE)")
        state[k[len("module."):] if str(k).startswith("module.") else k] = v
    return state


def build_spec(args, state):
    if args.preset not in PRESETS:
        raise UserError(f"--preset {args.preset!r} is not one of {', '.join(PRESETS)}")
    dim, depth, heads = PRESETS[args.preset]
    spec = dict(image_size=224, channels=3, patch=16, dim=dim, depth=depth, heads=heads,
                mlp_ratio=4.0, classes=None, norm_eps=1e-6)
    for kv in args.set:
        key, eq, val = kv.partition("=")
        name = key[len("model."):] if key.startswith("model.") else None
        if not eq or name not in KEYS:
            raise UserError(f"--set {kv!r}: expected model.KEY=VALUE with KEY one of {', '.join(KEYS)}")
        try:
            spec[name] = KEYS[name](val)
        except ValueError:
            raise UserError(f"--set {kv!r}: {val!r} is not {'an integer' if KEYS[name] is int else 'a number'}")
    # Another kind of model first (a ResNet, a ConvNeXt...): none of a ViT's
    # patch embedding and transformer blocks.
    if "patch_embed.proj.weight" not in state and not any(k.startswith("blocks.") for k in state):
        first = ", ".join(sorted(state)[:3])
        raise UserError(f"{args.file}: not a ViT: no patch_embed.proj.weight and no blocks.* tensors (it holds "
                        f"{first}, ...); import a timm ViT (vit_*_patch16_*, deit_*_patch16_*), or use another "
                        "kind of teacher through teacher.torchscript")
    if spec["classes"] is None:
        head = state.get("head.weight")
        if head is None or head.dim() != 2:
            raise UserError(f"{args.file}: no classifier head.weight (a timm model made with "
                               "num_classes=0?); vitkd's teacher needs its head: export the fine-tuned model")
        spec["classes"] = int(head.shape[0])
    if spec["dim"] % spec["heads"] or spec["image_size"] % spec["patch"]:
        raise UserError(f"model.heads={spec['heads']} must divide model.dim={spec['dim']} and model.patch="
                        f"{spec['patch']} model.image_size={spec['image_size']}; fix --set")
    spec["dist_token"] = "dist_token" in state
    return spec


def what_is(name):
    for piece, meaning in NOT_IN_VITKD:
        if piece in name:
            return meaning
    return "vitkd's ViT has no tensor of that name"


def check_and_map(path, state, spec, arch):
    """timm tensors -> vitkd's fp32 state dict; UserError at the first tensor
    vitkd cannot take. QKV without bias (qkv_bias=False) maps to a zero bias."""
    with torch.device("meta"):
        want = vitkd_model.timm_state_dict(vitkd_model.ViT(**spec))
    state = dict(state)
    notes = []
    for i in range(spec["depth"]):
        k = f"blocks.{i}.attn.qkv.bias"
        if k not in state and f"blocks.{i}.attn.qkv.weight" in state:
            state[k] = torch.zeros(want[k].shape)
            if not notes:
                notes.append("the file's attention has no QKV bias (qkv_bias=False): imported as a zero bias")
    # Names vitkd has no place for first (another kind of model), then the
    # shapes in the model's order (safetensors files keep their names sorted).
    for k, v in state.items():
        if k not in want:
            if k in ("head_dist.weight", "head_dist.bias"):
                meaning = "a distillation head without dist_token"
            else:
                meaning = what_is(k)
            raise UserError(f"{path}: tensor {k!r} {shape(v.shape)} has no place in vitkd's ViT ({meaning}); "
                            "import only plain timm ViTs (vit_*_patch16_*, deit_*_patch16_*)")
    for k in (k for k in want if k in state):
        v = state[k]
        if tuple(v.shape) != tuple(want[k].shape):
            raise UserError(f"{path}: tensor {k!r} is {shape(v.shape)} in the file, the model of {arch} expects "
                            f"{shape(want[k].shape)}; {hint(k, v, spec)}")
        if not v.is_floating_point():
            raise UserError(f"{path}: tensor {k!r} is {v.dtype}, not floating point; the file is not "
                            "a model's weights")
    missing = [k for k in want if k not in state]
    if missing:
        k = missing[0]
        meaning = {"cls_token": " (a timm model without class token, class_token=False, has no place "
                                "for vitkd's head)",
                   "head.weight": " (made with num_classes=0?)"}.get(k, "")
        raise UserError(f"{path}: tensor {k!r} {shape(want[k].shape)} that the model of {arch} needs is not in the "
                        f"file{meaning} ({len(missing)} missing); pass the whole model's state dict")
    return vitkd_model.from_timm_state_dict({k: state[k].to(torch.float32) for k in want}), notes


def hint(name, v, spec):
    """What to change so that `name` fits: a preset, a key."""
    if name == "pos_embed" and v.dim() == 3:
        prefix = 2 if spec["dist_token"] else 1
        side = int(round((v.shape[1] - prefix) ** 0.5))
        if side * side == v.shape[1] - prefix:
            return (f"the file was made for {side * spec['patch']}x{side * spec['patch']} images at patch "
                    f"{spec['patch']}: --set model.image_size={side * spec['patch']} (vitkd does not "
                    "interpolate position embeddings)")
        if v.shape[1] == (spec["image_size"] // spec["patch"]) ** 2:
            return "its position embedding has no class-token row (no_embed_class=True, DeiT III): not supported"
    if name.startswith("head") and v.dim() >= 1 and v.shape[-1 if v.dim() == 1 else 0] != spec["classes"]:
        return f"--set model.classes={v.shape[0]} or pass the matching file"
    if v.dim() >= 1:
        d = v.shape[-1] if name in ("cls_token", "pos_embed", "dist_token") else v.shape[0]
        fits = [p for p, (pd, _, _) in PRESETS.items() if pd == d]
        if fits and d != spec["dim"]:
            return f"the file is {d} wide: --preset {fits[0]}"
    return "pass the --preset and --set model.KEY=VALUE of the model the file was saved from"


def fold_normalisation(state, spec, data_path, tmean, tstd):
    """vitkd feeds (p - m)/s with the dataset's m, s; timm wants (p - tm)/ts.
    x_timm = x * s/ts + (m - tm)/ts per channel, folded into patch_embed.proj."""
    with h5py.File(data_path, "r") as f:
        m = np.asarray(f.attrs["mean"], dtype=np.float64)
        s = np.asarray(f.attrs["std"], dtype=np.float64)
    c, p = spec["channels"], spec["patch"]
    for name, v in (("dataset mean", m), ("dataset std", s), ("--timm-mean", tmean), ("--timm-std", tstd)):
        if len(v) != c:
            raise UserError(f"{name} has {len(v)} values, the model has {c} channels; "
                            f"give one per channel ({data_path})")
    w = state[vitkd_model.PATCH_WEIGHT].to(torch.float64).reshape(-1, c, p * p)
    scale = torch.tensor(s / tstd).reshape(1, c, 1)
    shift = torch.tensor((m - tmean) / tstd).reshape(1, c, 1)
    b = state["patch_embed.proj.bias"].to(torch.float64) + (w * shift).sum(dim=(1, 2))
    state[vitkd_model.PATCH_WEIGHT] = (w * scale).reshape(w.shape[0], -1).to(torch.float32)
    state["patch_embed.proj.bias"] = b.to(torch.float32)


def config_toml(spec, args, source):
    model = "\n".join(f"{k} = {str(spec[k]).lower() if isinstance(spec[k], bool) else repr(spec[k])}"
                      for k in (*vitkd_model.SPEC_KEYS, "dist_token", "norm_eps"))
    return (f"# imported by analysis/vitkd_import.py from {source}\n"
            f"[run]\nmode = \"teacher\"\n\n[data]\npath = {json.dumps(args.data or '')}\n\n[model]\n{model}\n")


def write_checkpoint(out, state, spec, args, source):
    # Strings as vitkd writes them (src/io/h5.cpp): fixed-length, null-padded
    # (h5py's default, variable-length UTF-8, has no conversion to vitkd's type).
    def text(s):
        return np.bytes_(s.encode("utf-8"))

    tmp = out + ".tmp"
    with h5py.File(tmp, "w") as f:
        a = f.attrs
        a["format"], a["format_version"] = text(FORMAT), np.int64(VERSION)
        a["vitkd_version"] = text(vitkd_version())
        a["imported_from"] = text(source)
        for k, v in (("step", 0), ("epoch", 0), ("world_size", 1), ("has_state", 0)):
            a[k] = np.int64(v)
        a["mode"], a["test_top1"] = text("teacher"), np.float64(-1.0)
        a["config"] = text(config_toml(spec, args, source))
        for k in vitkd_model.SPEC_KEYS:
            a["model_" + k] = np.float64(spec[k]) if k == "mlp_ratio" else np.int64(spec[k])
        a["model_dist_token"] = np.int64(spec["dist_token"])
        a["model_norm_eps"] = np.float64(spec["norm_eps"])
        a["model_init"], a["model_decay"] = text("trunc_normal"), text("matrices")
        g = f.create_group("model")
        for k, v in state.items():
            g.create_dataset(k, data=v.detach().contiguous().numpy().astype(np.float32))
    os.replace(tmp, out)


def floats(text, flag):
    try:
        return np.array([float(x) for x in text.split(",")], dtype=np.float64)
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected comma-separated numbers, e.g. {flag} 0.5,0.5,0.5")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="timm weights: .safetensors, or a torch.save'd state dict (.pth, .bin)")
    ap.add_argument("--out", required=True, help="the vitkd checkpoint to write (e.g. teacher.h5)")
    ap.add_argument("--preset", required=True, help=f"vitkd's model.preset: {', '.join(PRESETS)}")
    ap.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE",
                    help="override a model key (image_size, channels, patch, dim, depth, heads, "
                         "mlp_ratio, classes, norm_eps)")
    ap.add_argument("--data", help="the vitkd dataset the teacher will see (for its mean and std)")
    ap.add_argument("--timm-mean", help="the mean timm normalised with, per channel (pretrained_cfg['mean'])")
    ap.add_argument("--timm-std", help="the std timm normalised with, per channel (pretrained_cfg['std'])")
    a = ap.parse_args(argv)
    fold = (a.data, a.timm_mean, a.timm_std)
    if any(fold) and not all(fold):
        raise UserError("--data, --timm-mean and --timm-std go together (the normalisation to fold in); "
                        "give all three or none")
    state = read_state(a.file)
    spec = build_spec(a, state)
    arch = f"--preset {a.preset}" + "".join(f" --set {kv}" for kv in a.set)
    if not a.set or not any(kv.startswith("model.classes=") for kv in a.set):
        arch += f" (classes {spec['classes']} from the head)"
    mapped, notes = check_and_map(a.file, state, spec, arch)
    if all(fold):
        if not os.path.exists(a.data):
            raise UserError(f"--data {a.data}: no such file; pass the dataset made by vitkd prepare")
        fold_normalisation(mapped, spec, a.data, floats(a.timm_mean, "--timm-mean"),
                           floats(a.timm_std, "--timm-std"))
        notes.append(f"folded timm's normalisation (mean {a.timm_mean}, std {a.timm_std}) against "
                     f"{a.data}'s into patch_embed")
    h = hashlib.sha256()
    with open(a.file, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    source = (f"timm weights {os.path.abspath(a.file)} (sha256 {h.hexdigest()[:16]}), "
              f"{datetime.date.today().isoformat()}")
    write_checkpoint(a.out, mapped, spec, a, source)
    n = sum(v.numel() for v in mapped.values())
    for note in notes:
        print(f"vitkd_import: {note}")
    if not all(fold):
        print("vitkd_import: note: the teacher will see images normalised with the dataset's mean and std; "
              "pass --data, --timm-mean and --timm-std if timm's differ")
    print(f"vitkd_import: {a.file} -> {a.out}: {n} parameters, image {spec['image_size']}x{spec['image_size']}"
          f"x{spec['channels']}, patch {spec['patch']}, dim {spec['dim']}, depth {spec['depth']}, heads "
          f"{spec['heads']}, classes {spec['classes']}{', dist token' if spec['dist_token'] else ''}; "
          f"use it as teacher.checkpoint")


if __name__ == "__main__":
    try:
        main()
    except UserError as e:
        print(f"vitkd_import: error: {e}", file=sys.stderr)
        sys.exit(2)
