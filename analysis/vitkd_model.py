"""vitkd's ViT in PyTorch, with the same parameter names and layout as the C++
model (src/model/vit.hpp), and a loader for vitkd checkpoint files.

    import vitkd_model
    model = vitkd_model.load_checkpoint("runs/fmnist-distill/checkpoint.h5")
    logits = model(images)          # images: float [B, C, H, W], normalized

Normalization: (pixel / 255 - mean[c]) / std[c], with mean and std from the
dataset file's attributes.
"""
import math

import h5py
import torch
import torch.nn as nn
import torch.nn.functional as F


class PatchEmbed(nn.Module):
    def __init__(self, channels, patch, dim):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(channels * patch * patch, dim)

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.patch
        x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        return self.proj(x.reshape(b, (h // p) * (w // p), c * p * p))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(dim // heads)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.matmul(q * self.scale, k.transpose(-2, -1)).softmax(-1)
        return self.proj(torch.matmul(attn, v).transpose(1, 2).reshape(b, t, d))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, norm_eps=1e-6):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Returns the prediction: the class head, or the mean of the class and
    distillation heads when the model has a distillation token (DeiT).
    Scriptable: torch.jit.script(model) works (has_dist is a constant)."""

    has_dist: torch.jit.Final[bool]

    def __init__(self, image_size, channels, patch, dim, depth, heads, mlp_ratio, classes,
                 dist_token=False, norm_eps=1e-6):
        super().__init__()
        n = (image_size // patch) ** 2
        tokens = n + 1 + (1 if dist_token else 0)
        hidden = int(dim * mlp_ratio + 0.5)
        self.has_dist = dist_token
        self.patch_embed = PatchEmbed(channels, patch, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        if dist_token:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, dim))
        self.blocks = nn.ModuleList([Block(dim, heads, hidden, norm_eps) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=norm_eps)
        self.head = nn.Linear(dim, classes)
        if dist_token:
            self.head_dist = nn.Linear(dim, classes)

    def forward_heads(self, x):
        b = x.shape[0]
        x = self.patch_embed(x)
        toks = [self.cls_token.expand(b, -1, -1)]
        if self.has_dist:
            toks.append(self.dist_token.expand(b, -1, -1))
        x = torch.cat(toks + [x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        cls = self.head(x[:, 0])
        dist = self.head_dist(x[:, 1]) if self.has_dist else None
        return cls, dist

    def forward(self, x):
        cls, dist = self.forward_heads(x)
        return cls if dist is None else (cls + dist) * 0.5


SPEC_KEYS = ("image_size", "channels", "patch", "dim", "depth", "heads", "mlp_ratio", "classes")


def spec_of(h5file):
    """The ViT hyperparameters stored as model_* attributes of a checkpoint."""
    a = h5file.attrs
    spec = {k: (float(a["model_" + k]) if k == "mlp_ratio" else int(a["model_" + k]))
            for k in SPEC_KEYS}
    spec["dist_token"] = bool(int(a["model_dist_token"]))
    # model.norm_eps (vitkd checkpoints before it have 1e-6)
    spec["norm_eps"] = float(a["model_norm_eps"]) if "model_norm_eps" in a else 1e-6
    return spec


def load_checkpoint(path):
    """Builds the ViT described by a vitkd checkpoint and loads its weights."""
    with h5py.File(path, "r") as f:
        fmt = f.attrs.get("format")
        fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
        if fmt != "vitkd-checkpoint":
            raise ValueError(f"{path}: not a vitkd checkpoint (format attribute {fmt!r})")
        model = ViT(**spec_of(f))
        state = {name: torch.from_numpy(f["model"][name][()]) for name in model.state_dict()}
    model.load_state_dict(state)
    return model.eval()


# ---- timm (PyPI timm 1.0) -----------------------------------------------------
# timm's vit_*_patch16_224 models (VisionTransformer with its defaults) are this
# ViT: class token, learned position embedding over [cls, patches], pre-norm
# blocks with QKV bias, exact (erf) GELU, LayerNorm eps 1e-6, the head on the
# class token after the final norm; timm's deit_*_distilled_patch16_224
# (VisionTransformerDistilled) adds the distillation token and head_dist and
# predicts the mean of the two heads in eval mode, as vitkd does. The parameter
# names are the same; only the patch embedding's shape differs: timm's Conv2d
# weight [D, C, p, p] is vitkd's Linear weight [D, C*p*p], flattened in the
# same (c, y, x) order.
PATCH_WEIGHT = "patch_embed.proj.weight"
DEFAULT_NORM_EPS = 1e-6  # timm's ViT LayerNorm


def timm_state_dict(model):
    """A vitkd ViT's weights with timm's names and shapes (fp32, contiguous)."""
    p = model.patch_embed.patch
    out = {}
    for k, v in model.state_dict().items():
        v = v.detach().to(torch.float32)
        if k == PATCH_WEIGHT:
            v = v.reshape(v.shape[0], -1, p, p)
        out[k] = v.contiguous()
    return out


def from_timm_state_dict(state):
    """timm names and shapes -> vitkd's (the inverse of timm_state_dict)."""
    return {k: (v.reshape(v.shape[0], -1) if k == PATCH_WEIGHT and v.dim() == 4 else v)
            for k, v in state.items()}


def timm_model_args(spec):
    """(name, kwargs) such that timm.create_model(name, pretrained=False, **kwargs)
    builds the architecture of `spec` (SPEC_KEYS, dist_token, norm_eps), with
    exactly vitkd's parameter shapes. kwargs is JSON-serialisable except
    norm_layer, present only when norm_eps differs from timm's 1e-6."""
    d = int(spec["dim"])
    hidden = int(d * float(spec["mlp_ratio"]) + 0.5)  # vitkd: round(D * ratio)
    ratio = hidden / d                                 # timm: int(D * ratio)
    if int(d * ratio) != hidden:
        ratio = (hidden + 0.5) / d
    kwargs = dict(img_size=int(spec["image_size"]), patch_size=int(spec["patch"]),
                  in_chans=int(spec["channels"]), embed_dim=d, depth=int(spec["depth"]),
                  num_heads=int(spec["heads"]), mlp_ratio=ratio, num_classes=int(spec["classes"]))
    eps = float(spec.get("norm_eps", DEFAULT_NORM_EPS))
    if eps != DEFAULT_NORM_EPS:
        import functools
        kwargs["norm_layer"] = functools.partial(nn.LayerNorm, eps=eps)
    name = "deit_tiny_distilled_patch16_224" if spec.get("dist_token") else "vit_tiny_patch16_224"
    return name, kwargs


def timm_call(spec):
    """The timm.create_model call of timm_model_args, as Python source."""
    name, kw = timm_model_args(spec)
    args = ", ".join(f"{k}={v!r}" if k != "norm_layer" else
                     f"norm_layer=functools.partial(torch.nn.LayerNorm, eps={kw[k].keywords['eps']!r})"
                     for k, v in kw.items())
    return f"timm.create_model({name!r}, pretrained=False, {args})"
