"""The parts of benchmarks/pytorch_baseline.py around its training loop: the command
line, the process group, the data, the initialisations, the schedule, the heads and
the evaluation (tests/tools/train_reference.py uses the data and the schedule too).
"""

import argparse
import math
import os
import socket
import sys
import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
import vitkd_model  # noqa: E402


def parse_args(argv=None, doc=""):
    """The command line of pytorch_baseline.py (doc: its docstring, whose first paragraph is --help's)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default="data/fmnist.h5", help="vitkd dataset (HDF5)")
    p.add_argument("--mode", choices=("teacher", "distill"), default="teacher")
    p.add_argument("--teacher", default="", help="vitkd checkpoint of the teacher (distill mode)")
    p.add_argument("--kind", choices=("soft", "hard"), default="soft", help="distillation loss")
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--temperature", type=float, default=4.0)
    # model (vitkd's [model] keys)
    p.add_argument("--image-size", type=int, default=28)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--dim", type=int, default=192)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--mlp-ratio", type=float, default=4.0)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--dist-token", action="store_true", help="DeiT distillation token and head")
    p.add_argument("--timm-student", default="",
                   help="train this timm model (e.g. vit_small_patch16_224, random weights, timm's own "
                        "init) instead of vitkd's ViT; the model flags other than --image-size and "
                        "--classes are then unused")
    p.add_argument("--timm-teacher", default="",
                   help="distill mode: this timm model (random weights, eval, no grad) as the teacher "
                        "instead of --teacher's checkpoint (a throughput benchmark: the targets are "
                        "meaningless)")
    p.add_argument("--norm-eps", type=float, default=1e-6, help="LayerNorm epsilon")
    p.add_argument("--init", choices=("trunc_normal", "torch"), default="trunc_normal",
                   help="weight initialisation (vitkd's model.init)")
    p.add_argument("--decay", choices=("matrices", "all"), default="matrices",
                   help="weight decay on >= 2-D weights except tokens and pos_embed, or on all")
    p.add_argument("--recipe", choices=("vitkd", "plain"), default="vitkd",
                   help="plain: the plain PyTorch recipe (see the top of this file)")
    # data / training
    p.add_argument("--batch-size", type=int, default=64, help="samples per rank per step")
    p.add_argument("--drop-last", action="store_true", help="drop the last partial global batch")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=0, help="0 = no limit")
    p.add_argument("--threads", type=int, default=1, help="torch compute threads per rank")
    # optimizer
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-5)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--warmup-fraction", type=float, default=None,
                   help="warm-up over this fraction of the total steps (overrides --warmup-steps)")
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 = off")
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (and the teacher) first (PyTorch 2.x; the compilation "
                        "happens in the first steps, which images_per_second leaves out)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the model and the data live (cuda: NCCL process group)")
    # reporting
    p.add_argument("--eval", action="store_true", help="test top-1 after training")
    p.add_argument("--eval-every-epoch", action="store_true",
                   help="test top-1 after every epoch; evaluations and time_to_accuracy in result.json")
    p.add_argument("--accuracy-thresholds", default="0.85,0.87,0.88,0.89,0.90",
                   help="comma-separated test top-1 levels for time_to_accuracy")
    p.add_argument("--log-every", type=int, default=50, help="progress line every N steps")
    p.add_argument("--warmup-timing-steps", type=int, default=3,
                   help="steps left out of images_per_second")
    p.add_argument("--out", default="", help="result.json (written by rank 0)")
    p.add_argument("--nproc", type=int, default=1,
                   help="without torch.distributed.run: spawn this many ranks "
                        "(torch.multiprocessing)")
    if p.parse_known_args(argv)[0].recipe == "plain":
        p.set_defaults(**PLAIN_RECIPE)  # explicit flags still win
    a = p.parse_args(argv)
    try:
        a.accuracy_thresholds = [float(t) for t in a.accuracy_thresholds.split(",") if t.strip()]
    except ValueError:
        p.error(f"--accuracy-thresholds: not a comma-separated list of numbers: "
                f"{a.accuracy_thresholds!r}")
    if not all(0 < t <= 1 for t in a.accuracy_thresholds):
        p.error("--accuracy-thresholds: every threshold must be in (0, 1]")
    if a.warmup_fraction is not None and not 0 <= a.warmup_fraction <= 1:
        p.error("--warmup-fraction must be in [0, 1]")
    if not 0 < a.norm_eps < 1 or a.min_lr < 0 or a.grad_clip < 0:
        p.error("--norm-eps must be in (0, 1), --min-lr and --grad-clip >= 0")
    if a.mode == "distill" and not (a.teacher or a.timm_teacher):
        p.error("--mode distill needs --teacher CHECKPOINT.h5 or --timm-teacher NAME")
    if a.image_size % a.patch or a.dim % a.heads:
        p.error("--patch must divide --image-size and --heads must divide --dim")
    if min(a.batch_size, a.epochs, a.log_every, a.nproc) < 1 or a.max_steps < 0:
        p.error("--batch-size, --epochs, --log-every and --nproc must be >= 1, --max-steps >= 0")
    return a


# --recipe plain: the defaults it sets.
PLAIN_RECIPE = dict(init="torch", warmup_fraction=0.1, min_lr=0.0, grad_clip=0.0, decay="all",
                    norm_eps=1e-5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(device="cpu"):
    """gloo (cpu) or NCCL (cuda) process group from the launcher's environment,
    or a 1-rank world. Returns (rank, world, torch.device)."""
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(free_port()))
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch.cuda.is_available() is False "
                             f"(torch {torch.__version__})")
        local = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), dev


def load_split(path, split):
    """Normalized images [N, C, H, W] float32 and labels [N] int64."""
    with h5py.File(path, "r") as f:
        mean = np.asarray(f.attrs["mean"], dtype=np.float32).reshape(1, -1, 1, 1)
        std = np.asarray(f.attrs["std"], dtype=np.float32).reshape(1, -1, 1, 1)
        images = f[split]["images"][()]  # uint8 [N, H, W, C]
        labels = f[split]["labels"][()]
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0)
    x = x.sub_(torch.from_numpy(mean)).div_(torch.from_numpy(std)).contiguous()
    return x, torch.from_numpy(labels.astype(np.int64))


def rank_share(begin, total, rank, world):
    """[lo, hi) of rank's share of `total` samples from `begin` (vitkd's split)."""
    return begin + (rank * total) // world, begin + ((rank + 1) * total) // world


def init_like_vitkd(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02).clamp_(-0.04, 0.04)


def init_like_torch(model):
    """vitkd's model.init = "torch": a plain PyTorch ViT's defaults, with the
    qkv projection as nn.MultiheadAttention's in_proj."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(0.0 if name.endswith(".bias") else 1.0)
            elif name.endswith(("cls_token", "dist_token")):
                p.zero_()
            elif name.endswith("pos_embed"):
                p.normal_(0.0, 0.02)
            elif name.endswith("attn.qkv.weight"):
                nn.init.xavier_uniform_(p)
            elif name.endswith(("attn.qkv.bias", "attn.proj.bias")):
                p.zero_()
            else:  # nn.Linear: U(+-1/sqrt(fan_in)) for weight and bias
                fan_in = model.get_parameter(name[:-len("bias")] + "weight").shape[1] \
                    if name.endswith(".bias") else p.shape[1]
                bound = 1.0 / math.sqrt(fan_in)
                p.uniform_(-bound, bound)


def decays(name, p, scope="matrices"):
    if scope == "all":
        return True
    return p.dim() >= 2 and not name.endswith(("cls_token", "dist_token", "pos_embed"))


def time_to_accuracy(evaluations, thresholds):
    """vitkd's time_to_accuracy: per threshold the first evaluation at or above it."""
    out = []
    for t in thresholds:
        e = next((e for e in evaluations if e["test_top1"] >= t), None)
        out.append({"threshold": t, "reached": e is not None,
                    **{k: (e[k] if e else None)
                       for k in ("step", "samples_seen", "train_seconds", "elapsed_seconds")}})
    return out


def schedule_lr(seen, warmup, total, peak, floor):
    """vitkd's schedule_lr: all arguments in samples."""
    if warmup > 0 and seen < warmup:
        return peak * seen / warmup
    span = max(1.0, total - warmup)
    t = min(1.0, max(0.0, (seen - warmup) / span))
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * t))


class TimmHeads(nn.Module):
    """A timm model behind vitkd_model.ViT's forward_heads (no distillation head)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)

    def forward_heads(self, x):
        return self.model(x), None


def timm_model(name, args):
    import timm  # PyPI's; only this option needs it
    return timm.create_model(name, pretrained=False, num_classes=args.classes, img_size=args.image_size,
                             in_chans=args.channels)


class Heads(nn.Module):
    """DDP needs the call to go through forward: returns (cls, dist or None)."""

    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return self.vit.forward_heads(x)


def per_sample_loss(args, cls, dist_logits, y, t):
    cls = cls.float()
    if args.mode == "teacher":
        pred = cls if dist_logits is None else (cls + dist_logits.float()) * 0.5
        return F.cross_entropy(pred, y, reduction="none")
    s_kd = cls if dist_logits is None else dist_logits.float()
    ce = F.cross_entropy(cls, y, reduction="none")
    if args.kind == "hard":
        return 0.5 * ce + 0.5 * F.cross_entropy(s_kd, t.argmax(-1), reduction="none")
    tau = args.temperature
    kl = F.kl_div(F.log_softmax(s_kd / tau, -1), F.log_softmax(t / tau, -1),
                  reduction="none", log_target=True).sum(-1)
    return (1.0 - args.alpha) * ce + args.alpha * tau * tau * kl


def evaluate(model, x, y, batch, rank, world, autocast):
    """Top-1 on the test split, each rank on its contiguous share."""
    lo, hi = rank_share(0, x.shape[0], rank, world)
    correct = 0
    model.eval()
    with torch.no_grad():
        for i in range(lo, hi, batch):
            j = min(hi, i + batch)
            with autocast():
                pred = model(x[i:j])
            correct += int((pred.float().argmax(-1) == y[i:j]).sum())
    model.train()
    t = torch.tensor([correct, hi - lo], dtype=torch.float64, device=x.device)
    dist.all_reduce(t)
    return float(t[0] / t[1]) if t[1] > 0 else 0.0
