"""timm's side of the GPU check's throughput (tests/gpu/checks_perf.sh): the
training step vitkd runs, written with timm's models in plain PyTorch, timed
on one device. Not a test: it checks nothing about vitkd.

    python benchmarks/timm_step.py --mode distill --device cuda --out timm.json
    python benchmarks/timm_step.py --mode student --device cuda --compile --out c.json

--mode distill: a ViT-B/16 teacher (eval, no gradient) and a ViT-S/16 student
(timm's vit_base_patch16_224 and vit_small_patch16_224, random weights), the
loss of vitkd's distill.kind = "soft" (alpha x cross-entropy + (1 - alpha) x
T^2 x KL of the temperature-T softmaxes; T = 4, alpha = 0.5 as
inputs/fmnist-distill.toml); --mode student: the student alone, cross-entropy.
Both: bf16 autocast (fp32 master weights; --fp32: no autocast, the precision
vitkd's "auto" picks on a CPU without native bf16), AdamW (lr 1e-3, weight decay
0.05; fused on CUDA), gradient clipping at 1.0. The batches are random
tensors already on the device: no loader, no files (vitkd reads its HDF5
file while it trains); with --data FILE.h5 they come instead from that vitkd
dataset's /train split through a DataLoader (--workers processes reading
with h5py, uint8 images in pinned memory, copied without blocking, turned
to float and normalised with the file's mean and std on the device), as a
PyTorch user would feed a GPU. --compile wraps both models in
torch.compile; the first step's time (the compilation) is reported apart.

Writes JSON: images_per_second (after --warmup steps, over --steps steps),
first_step_seconds, input (which of the two feeds), and the versions; exit 0.

--profile-steps N --profile-out FILE: after the timed steps (their time is
not the profiler's), N more steps run under torch.profiler (CPU activity,
and CUDA on a GPU), each in a timm::step scope; the Chrome trace goes to FILE
(per operator: python3 analysis/profile_ops.py FILE) and the operators'
table, by self CPU time, is printed. A tiny run on the CPU:

    python benchmarks/timm_step.py --device cpu --depth 1 --batch 2 --steps 2 --image-size 32 \
        --out t.json --profile-steps 2 --profile-out timm-trace.json
"""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("distill", "student"), default="distill")
    p.add_argument("--device", default="cuda")
    p.add_argument("--teacher", default="vit_base_patch16_224")
    p.add_argument("--student", default="vit_small_patch16_224")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--depth", type=int, default=12, help="blocks of both models (the dry run uses fewer)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast: everything in fp32")
    p.add_argument("--data", help="a vitkd dataset file: batches from its /train split through a DataLoader")
    p.add_argument("--workers", type=int, default=8, help="DataLoader worker processes with --data")
    p.add_argument("--out", required=True)
    p.add_argument("--profile-steps", type=int, default=0,
                   help="profile N steps after the timed ones (0 = off; needs --profile-out)")
    p.add_argument("--profile-out", help="the Chrome trace of the profiled steps")
    a = p.parse_args()
    if a.profile_steps < 0 or (a.profile_steps > 0) != bool(a.profile_out):
        p.error("--profile-steps N (N >= 1) and --profile-out FILE go together")
    import timm  # the device's timm; imported here so that --help works without it

    dev = torch.device(a.device)
    torch.manual_seed(0)
    kw = dict(pretrained=False, num_classes=a.classes, img_size=a.image_size, depth=a.depth)
    student = timm.create_model(a.student, **kw).to(dev).train()
    teacher = None
    if a.mode == "distill":
        teacher = timm.create_model(a.teacher, **kw).to(dev).eval().requires_grad_(False)
    fused = dev.type == "cuda"
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3, weight_decay=0.05, fused=fused)
    s_fwd, t_fwd = student, teacher
    if a.compile:
        s_fwd = torch.compile(student)
        t_fwd = torch.compile(teacher) if teacher is not None else None
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    T = a.temperature
    batches, input_kind = None, "random tensors already on the device (no loader)"
    if a.data:
        batches, mean, std = data_batches(a, dev)
        input_kind = f"DataLoader, {a.workers} worker(s), uint8 from {os.path.basename(a.data)}, normalised on the device"

    def step():
        nonlocal x, y
        if batches is not None:
            u8, labels = next(batches)
            x = (u8.to(dev, non_blocking=True).float().div_(255) - mean) / std
            y = labels.to(dev, non_blocking=True).long()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=not a.fp32):
            logits = s_fwd(x)
            loss = F.cross_entropy(logits, y)
            if t_fwd is not None:
                with torch.no_grad():
                    t = t_fwd(x)
                kl = F.kl_div(F.log_softmax(logits.float() / T, -1), F.softmax(t.float() / T, -1),
                              reduction="batchmean")
                loss = a.alpha * loss + (1 - a.alpha) * T * T * kl
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - t0
    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    dt = time.perf_counter() - t0
    out = {"images_per_second": a.steps * a.batch / dt, "seconds": dt, "first_step_seconds": first,
           "mode": a.mode, "compile": a.compile, "input": input_kind, "precision": "fp32" if a.fp32 else "bf16",
           "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
           "image_size": a.image_size, "depth": a.depth, "torch": torch.__version__, "timm": timm.__version__,
           "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
    if a.profile_steps:
        profile(step, sync, dev, a.profile_steps, a.profile_out)
        out["profile"] = {"steps": a.profile_steps, "trace": a.profile_out}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f)
    print(json.dumps(out))


def data_batches(a, dev):
    """An endless iterator of (uint8 [B, C, H, W], labels [B]) from a.data,
    and the file's mean and std as [1, C, 1, 1] tensors on `dev`."""
    from h5_train import H5Train  # the benchmarks' folder (h5py only when asked)
    ds = H5Train(a.data)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True,
                                         num_workers=a.workers, pin_memory=dev.type == "cuda",
                                         persistent_workers=a.workers > 0, prefetch_factor=4 if a.workers > 0 else None)
    if len(loader) == 0:
        raise SystemExit(f"timm_step.py: {a.data} has fewer than --batch {a.batch} training samples")

    def forever():
        while True:
            yield from loader
    stats = [torch.tensor(v, device=dev, dtype=torch.float32).view(1, -1, 1, 1) for v in (ds.mean, ds.std)]
    return forever(), stats[0], stats[1]


def profile(step, sync, dev, steps, path):
    """`steps` calls of step() under torch.profiler, each in a timm::step
    scope; the Chrome trace to `path`, the table by self CPU time printed."""
    from torch.profiler import ProfilerActivity, record_function
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function("timm::step"):
                step()
        sync()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    prof.export_chrome_trace(path)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    print(f"profile: {steps} step(s) in {path}; per operator: python3 analysis/profile_ops.py {path}")


if __name__ == "__main__":
    main()
