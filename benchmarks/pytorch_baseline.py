"""PyTorch baseline for vitkd's throughput: vitkd's training recipe written the
way a PyTorch user would write it (DDP + ZeroRedundancyOptimizer + bf16
autocast, CPU, gloo), so that the two can be timed side by side on the same
machine.

This is a benchmark, not a test: it checks nothing about vitkd and is not part
of the test suite. Its output is a result.json with the same
`images_per_second` key as vitkd's, so that jobs/bench (compare.sh and
friends) can run it alternately with `build/vitkd train` and compare medians:

    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        --redirects 2 --tee 2 \\
        benchmarks/pytorch_baseline.py --data data/fmnist.h5 --mode teacher \\
        --epochs 1 --max-steps 200 --out runs/bench-pt/result.json

    # distillation, with a teacher checkpoint written by vitkd:
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        --redirects 2 --tee 2 \\
        benchmarks/pytorch_baseline.py --data data/fmnist.h5 --mode distill \\
        --teacher runs/fmnist-teacher/checkpoint.h5 --dim 96 --depth 4 \\
        --dist-token --max-steps 200 --out runs/bench-pt-distill/result.json

`--redirects 2 --tee 2` is a workaround, not a choice: Debian's torch 1.13
launcher fails on Python 3.11 with its defaults ("AttributeError: 'NoneType'
object has no attribute 'get'" in elastic/multiprocessing/api.py to_map:
Std.from_str cannot parse "0" or "3" because Python 3.11 no longer iterates
IntFlag's zero and multi-bit members). With 1 or 2 for both flags it parses;
2 sends the ranks' stderr through a log file and back to the console, rank 0's
stdout (progress and result) is untouched. Without the launcher the script
starts its own ranks with torch.multiprocessing.spawn (same gloo group, same
timing):

    /usr/bin/python3 benchmarks/pytorch_baseline.py --nproc 2 --data data/fmnist.h5 ...

and with neither (`--nproc 1`, the default) it trains as a one-rank world.
Use Debian's /usr/bin/python3 (torch, h5py, numpy); the model and the
checkpoint loader come from analysis/vitkd_model.py, so the parameter layout
and names match vitkd's.

The flags are named after vitkd's configuration keys (--batch-size =
data.batch_size, --dim = model.dim, --warmup-steps = optim.warmup_steps, ...)
and the recipe follows vitkd's:
  * data: each epoch a permutation of the training set from (seed, epoch);
    global step k takes permutation[k*G : (k+1)*G] (G = batch size x ranks)
    and rank r its r-th share of it (the last, partial batch is kept unless
    --drop-last, and split as evenly as vitkd splits it);
  * loss: teacher mode = cross-entropy of the prediction (mean of the class
    and distillation heads when the model has a distillation token); distill
    soft = (1-alpha) CE(s_cls, y) + alpha T^2 KL(softmax(t/T) || softmax(s_kd/T))
    (KL summed over classes, mean over samples), hard = 1/2 CE(s_cls, y) +
    1/2 CE(s_kd, argmax t), s_kd = distillation head if any, else class head;
    the teacher (frozen, eval, no_grad) gives its prediction;
  * AdamW with decoupled weight decay on >= 2-D weights except cls_token,
    dist_token and pos_embed (two parameter groups, which 1.13's
    ZeroRedundancyOptimizer supports), optimizer state sharded over ranks;
  * global gradient-norm clipping, a step with a non-finite norm is skipped
    on every rank (as vitkd does);
  * learning rate: linear warm-up then cosine decay to --min-lr, counted in
    samples seen, as vitkd's schedule_lr (so lr(step k) = lr * k / warmup
    during the warm-up, and the decay ends at the last step);
  * bf16 autocast around the forward passes, fp32 weights, fp32 losses;
  * weights initialised as vitkd does (normal(0, 0.02) clamped to +-0.04,
    zero biases, unit norm weights, zero tokens and position embedding).

Differences from vitkd (none changes the model's compute per step; the
communication and the bookkeeping around it differ):
  * the data order: torch.randperm seeded with seed + epoch (like
    DistributedSampler), not vitkd's hash-based shuffle, so the two see the
    samples in different orders;
  * the whole split is normalized once at start-up and held as one float
    tensor (a TensorDataset-style loader; vitkd normalizes each batch in a
    prefetch thread); no augmentation (vitkd's data.augment, off by default
    and in inputs/fmnist-*.toml);
  * communication is DDP's (gradient allreduce in 25 MB buckets overlapped
    with backward, then ZeroRedundancyOptimizer's parameter broadcast), not
    vitkd's bucketed reduce-scatter + all-gather; gloo, not MPI;
  * --threads defaults to 1 compute thread per rank (vitkd's train.threads =
    0 means cores / ranks; jobs/env.sh sets OMP_NUM_THREADS=1);
  * no sifting, no timing log (vitkd also allreduces the step's loss every
    step for it; this script only every --log-every steps), no MFU probe, no
    checkpoint; --eval evaluates once, after training, outside the timed
    region, and --eval-every-epoch after each epoch (its time left out of
    train_seconds and images_per_second);
  * with --grad-clip 0 the norm is not computed and nothing is skipped;
  * images_per_second leaves out the first --warmup-timing-steps steps
    (vitkd's counts every step): the timed region starts at a barrier before
    step W+1 (W = --warmup-timing-steps, lowered so that at least the last
    step is timed) and ends at a barrier after the last step, and its length
    is the slowest rank's (allreduce MAX). train_seconds is the whole
    training loop, all steps and no evaluation (vitkd's includes its
    evaluations); timed_steps, timed_samples and timed_seconds say what
    images_per_second was measured on;
  * --fp32 stands for vitkd's precision.compute = "fp32";
  * --compile (PyTorch 2.x) runs the model and the teacher through
    torch.compile (TorchInductor; on the CPU it needs a C++ compiler); the
    compilation happens in the first --warmup-timing-steps steps, which
    images_per_second leaves out. Its time is in train_seconds.

The recipe's knobs that vitkd also has (same defaults as vitkd's keys):
--init (model.init), --decay (model.decay), --norm-eps (model.norm_eps),
--min-lr (optim.min_lr, 0 allowed), --grad-clip (optim.grad_clip, 0 = off),
and --warmup-fraction F, warm-up over a fraction of the total steps (rounded;
overrides --warmup-steps). `--recipe plain` is the plain PyTorch recipe:
--init torch (what nn.Linear and nn.MultiheadAttention give: kaiming-uniform
Linear weights and biases, xavier-uniform qkv (MHA's in_proj_weight) with zero
qkv and output-projection biases, position embedding randn * 0.02, zero
class/distillation tokens), --warmup-fraction 0.1, --min-lr 0 (cosine to 0),
--grad-clip 0, --decay all (weight decay on every parameter), --norm-eps 1e-5;
a flag given explicitly still wins over the preset. In vitkd's keys:
model.init = "torch", model.decay = "all", model.norm_eps = 1e-5,
optim.grad_clip = 0, optim.min_lr = 0, optim.warmup_steps = 10 % of the steps
(jobs/bench/tta.sh runs both).

Time to accuracy: --eval-every-epoch evaluates test top-1 after every epoch
(and at the last step when --max-steps ends an epoch early), and result.json
then gets vitkd's `evaluations` (step, epoch, samples_seen, train_seconds =
training time without evaluations, elapsed_seconds = with them, test_top1) and
`time_to_accuracy` (per --accuracy-thresholds value: the first evaluation at
or above it; null fields when none). Times are rank 0's. train_seconds and
timed_seconds leave the evaluations out.

--device cuda (vitkd's run.device = "cuda"): each rank uses GPU LOCAL_RANK
modulo the visible GPUs, the process group is NCCL instead of gloo, the
autocast is torch.autocast("cuda", dtype=torch.bfloat16), the whole
normalized training split is moved to the GPU once at start-up, and the
timed region's ends synchronize the device. --threads still sets the host
threads.
"""

import json
import math
import os
import sys
import time
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))
import vitkd_model  # noqa: E402
from baseline_parts import (  # noqa: E402
    Heads, TimmHeads, decays, evaluate, free_port, init_distributed, init_like_torch, init_like_vitkd, load_split,
    parse_args, per_sample_loss, rank_share, schedule_lr, time_to_accuracy, timm_model)


def spawned_rank(rank, args, port):
    """--nproc: one rank started by torch.multiprocessing.spawn."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(args)


def main(argv=None):
    args = parse_args(argv, __doc__)
    if args.nproc > 1 and "RANK" not in os.environ:
        import torch.multiprocessing as mp
        mp.spawn(spawned_rank, args=(args, free_port()), nprocs=args.nproc)
    else:
        train(args)


def train(args):
    rank, world, device = init_distributed(args.device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    def log0(msg):
        if rank == 0:
            print(msg, flush=True)

    def autocast_ctx():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=not args.fp32)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    t_setup = time.perf_counter()

    train_x, train_y = load_split(args.data, "train")
    test_x, test_y = (load_split(args.data, "test") if args.eval or args.eval_every_epoch
                      else (None, None))
    train_x, train_y = train_x.to(device), train_y.to(device)
    if test_x is not None:
        test_x, test_y = test_x.to(device), test_y.to(device)
    n, c, h, w = train_x.shape
    if (c, h, w) != (args.channels, args.image_size, args.image_size):
        raise SystemExit(f"{args.data}: images are {c}x{h}x{w}, the model expects "
                         f"{args.channels}x{args.image_size}x{args.image_size}")

    if args.timm_student:
        vit = TimmHeads(timm_model(args.timm_student, args))  # timm's own initialisation
    else:
        vit = vitkd_model.ViT(args.image_size, args.channels, args.patch, args.dim, args.depth,
                              args.heads, args.mlp_ratio, args.classes, args.dist_token, args.norm_eps)
        (init_like_torch if args.init == "torch" else init_like_vitkd)(vit)
    vit = vit.to(device)
    parameters = sum(p.numel() for p in vit.parameters())
    # broadcasts rank 0's weights
    model = DDP(Heads(vit), device_ids=[device.index] if device.type == "cuda" else None)
    step_model = model
    if args.compile:
        if not hasattr(torch, "compile"):
            raise SystemExit(f"--compile needs PyTorch 2.x (this is torch {torch.__version__})")
        # Compiling the DDP module lets TorchDynamo split the graph at DDP's
        # bucket boundaries, so the allreduces still overlap with backward.
        step_model = torch.compile(model)

    teacher = None
    if args.mode == "distill" and args.timm_teacher:
        teacher = timm_model(args.timm_teacher, args).to(device)
        teacher.requires_grad_(False)
        teacher.eval()
        if args.compile:
            teacher = torch.compile(teacher)
    elif args.mode == "distill":
        teacher = vitkd_model.load_checkpoint(args.teacher).to(device)
        teacher.requires_grad_(False)
        teacher.eval()
        if args.compile:
            teacher = torch.compile(teacher)
        tm = getattr(teacher, "_orig_mod", teacher)
        tp = tm.patch_embed.proj.in_features // (tm.patch_embed.patch ** 2)
        if tm.head.out_features != args.classes or tp != args.channels:
            raise SystemExit(f"{args.teacher}: teacher has {tm.head.out_features} classes and "
                             f"{tp} channels, the student {args.classes} and {args.channels}")

    named = list(model.module.vit.named_parameters())
    groups = [
        {"params": [p for nm, p in named if decays(nm, p, args.decay)], "weight_decay": args.weight_decay},
        {"params": [p for nm, p in named if not decays(nm, p, args.decay)], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    opt = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=args.lr,
                                  betas=(args.beta1, args.beta2), eps=args.eps,
                                  weight_decay=args.weight_decay)

    G = args.batch_size * world
    steps_per_epoch = n // G if args.drop_last else (n + G - 1) // G
    if steps_per_epoch < 1:
        raise SystemExit(f"{n} training samples: fewer than one global batch of {G}")
    total_steps = steps_per_epoch * args.epochs
    if args.max_steps > 0:
        total_steps = min(total_steps, args.max_steps)
    total_samples = min(float(n) * args.epochs,
                        float(args.max_steps) * G if args.max_steps > 0 else math.inf)
    if args.warmup_fraction is not None:
        args.warmup_steps = int(round(args.warmup_fraction * total_steps))
    warmup_samples = float(args.warmup_steps) * G
    timing_start = min(args.warmup_timing_steps, max(total_steps - 1, 0))

    log0(f"pytorch baseline: torch {torch.__version__}, {world} rank(s) x {args.threads} thread(s), "
         f"device {device}, "
         f"{'fp32' if args.fp32 else 'bf16 autocast'}{', torch.compile' if args.compile else ''}, mode {args.mode}"
         + (f" ({args.kind})" if teacher is not None else ""))
    log0(f"model: dim {args.dim} depth {args.depth} heads {args.heads} patch {args.patch} "
         f"dist_token {args.dist_token} norm_eps {args.norm_eps:g} init {args.init}: "
         f"{parameters} parameters"
         + (f"; teacher {sum(p.numel() for p in teacher.parameters())} parameters"
            if teacher is not None else ""))
    log0(f"schedule: {total_steps} steps ({steps_per_epoch} per epoch, global batch {G}), "
         f"warm-up {args.warmup_steps} steps, lr {args.lr:g} -> {args.min_lr:g}, grad clip "
         f"{args.grad_clip:g}, weight decay {args.weight_decay:g} on {args.decay}; "
         f"timing from step {timing_start + 1}")
    log0(f"setup took {time.perf_counter() - t_setup:.1f} s")

    step = samples_seen = samples_trained = timed_samples = skipped = 0
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    loss_n = 0
    lr = 0.0
    t_timed = None
    stop = False
    epochs_done = 0
    evaluations = []
    eval_seconds = eval_seconds_timed = 0.0  # evaluation time, all of it / since t_timed

    def evaluate_now(epoch):
        """Test top-1 now, recorded with the step, samples and times (vitkd's EvalRecord)."""
        nonlocal eval_seconds, eval_seconds_timed
        if evaluations and evaluations[-1]["step"] == step:
            return evaluations[-1]["test_top1"]  # same weights
        sync()
        t0 = time.perf_counter()
        elapsed = t0 - t_train
        top1 = evaluate(model.module.vit, test_x, test_y, max(args.batch_size, 256), rank, world,
                        autocast_ctx)
        evaluations.append({"step": step, "epoch": epoch, "samples_seen": samples_seen,
                            "train_seconds": elapsed - eval_seconds, "elapsed_seconds": elapsed,
                            "test_top1": top1})
        dt = time.perf_counter() - t0
        eval_seconds += dt
        if t_timed is not None:
            eval_seconds_timed += dt
        return top1

    dist.barrier()
    t_train = time.perf_counter()
    t_window, window_samples = t_train, 0
    step_seconds = []  # on the CPU, rank 0's wall time of every step (the steps end in a collective)
    t_step = t_train
    for epoch in range(args.epochs):
        gen = torch.Generator()
        gen.manual_seed(args.seed + epoch)
        perm = torch.randperm(n, generator=gen)
        for k in range(steps_per_epoch):
            if step == timing_start and t_timed is None:
                sync()
                dist.barrier()
                t_timed = time.perf_counter()
            begin = k * G
            global_n = min(G, n - begin)
            lo, hi = rank_share(begin, global_n, rank, world)
            idx = perm[lo:hi].to(device)
            x, y = train_x[idx], train_y[idx]
            samples_seen += global_n
            lr = schedule_lr(samples_seen, warmup_samples, total_samples, args.lr, args.min_lr)
            for g in opt.param_groups:
                g["lr"] = lr

            t_logits = None
            if teacher is not None:
                with torch.no_grad(), autocast_ctx():
                    t_logits = teacher(x).float()
            with autocast_ctx():
                cls, dist_logits = step_model(x)
                per = per_sample_loss(args, cls, dist_logits, y, t_logits)
            # Sum scaled so that DDP's mean over ranks is the mean over the
            # global batch, also when the last batch is split unevenly.
            loss = per.sum() * (world / global_n)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if args.grad_clip > 0:
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
                if torch.isfinite(gnorm):  # same on every rank: gradients are allreduced
                    opt.step()
                else:
                    skipped += 1
            else:
                opt.step()
            step += 1
            if device.type == "cpu":  # on a GPU a per-step sync would cost the launches' overlap
                now = time.perf_counter()
                step_seconds.append(now - t_step)
                t_step = now
            samples_trained += global_n
            window_samples += global_n
            if t_timed is not None:
                timed_samples += global_n
            loss_sum += per.detach().double().sum()
            loss_n += per.shape[0]

            if step % args.log_every == 0:
                s = torch.stack([loss_sum, torch.tensor(float(loss_n), dtype=torch.float64,
                                                        device=device)])
                dist.all_reduce(s)
                now = time.perf_counter()
                log0(f"step {step}/{total_steps} | epoch {epoch + 1}/{args.epochs} | "
                     f"loss {float(s[0] / max(s[1], 1)):.4f} | lr {lr:.2e} | "
                     f"{window_samples / max(now - t_window, 1e-9):.0f} img/s")
                loss_sum.zero_()
                loss_n = 0
                t_window, window_samples = now, 0
            if step >= total_steps:
                stop = True
                break
        epochs_done = epoch + 1
        if args.eval_every_epoch:
            log0(f"epoch {epochs_done}: test top-1 {evaluate_now(epoch):.4f}")
        if stop:
            break
    sync()
    dist.barrier()
    t_end = time.perf_counter()
    times = torch.tensor([t_end - t_timed - eval_seconds_timed, t_end - t_train - eval_seconds],
                         dtype=torch.float64, device=device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    timed_seconds, train_seconds = float(times[0]), float(times[1])
    ips = timed_samples / max(timed_seconds, 1e-9)

    test_top1 = None
    if args.eval or args.eval_every_epoch:
        test_top1 = evaluate_now(epochs_done - 1)
        if not args.eval_every_epoch:
            log0(f"test top-1 {test_top1:.4f}")

    if rank == 0:
        result = {
            "framework": "pytorch",
            "torch_version": torch.__version__,
            "mode": args.mode,
            "kind": args.kind if teacher is not None else None,
            "world_size": world,
            "threads_per_rank": args.threads,
            "batch_size": args.batch_size,
            "steps": step,
            "epochs": epochs_done,
            "samples_trained": samples_trained,
            "timed_steps": step - timing_start,
            "timed_samples": timed_samples,
            "timed_seconds": timed_seconds,
            "train_seconds": train_seconds,
            "images_per_second": ips,
            "skipped_steps": skipped,
            "test_top1": test_top1,
            "parameters": parameters,
            "teacher_parameters": (sum(p.numel() for p in teacher.parameters())
                                   if teacher is not None else 0),
            "compute": "fp32" if args.fp32 else "bf16",
            "compiled": bool(args.compile),
            "recipe": {k: getattr(args, k) for k in
                       ("recipe", "init", "decay", "norm_eps", "lr", "min_lr", "warmup_steps",
                        "weight_decay", "grad_clip")},
            "evaluations": evaluations,
            "step_seconds": step_seconds,
            "models": {"student": args.timm_student or "vitkd_model.ViT",
                       "teacher": (args.timm_teacher or args.teacher) if teacher is not None else None},
            "time_to_accuracy": time_to_accuracy(evaluations, args.accuracy_thresholds),
            "device": str(device),
        }
        if args.out:
            d = os.path.dirname(os.path.abspath(args.out))
            os.makedirs(d, exist_ok=True)
            with open(args.out, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
        log0(f"done: {step} steps, {ips:.0f} img/s (steps {timing_start + 1}..{step}), "
             f"{train_seconds:.1f} s" + (f" -> {args.out}" if args.out else ""))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
