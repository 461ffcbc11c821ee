#!/usr/bin/env python3
"""Self-contained test of analysis/report.py on synthetic vitkd timing logs.

    python3 tests/analysis/test_report.py SRC_DIR WORK_DIR

SRC_DIR is the repository root, WORK_DIR a scratch directory (created; only the
subdirectories named below are replaced in it). The test
writes timing.h5 files in the "vitkd-timing" v1 format with h5py, runs
report.py on them with the same interpreter and checks what it reports:

  straggler/   3 ranks; rank 2's student_forward and backward take 1.5x longer
               (ranks 0 and 1 wait in comm_wait), backward alternates fast/slow
               every other step (period 2) and is the largest phase; one spike.
  ws1/, ws2/   1 and 2 ranks, fixed per-rank batch, for the scaling table
               (ws1 has no /eval group and no GEMM ceiling).
               straggler/ has a result.json with time_to_accuracy (one threshold
               reached, one not), ws2/ one without it (an older vitkd's).
  growth/      the report of ws1 then ws2: communication named as the group that grew.
               straggler/ also checks the host lines (nodeB the most imbalanced host,
               nodeA, whose ranks wait, the most communication-bound).
  tiny/        1 rank, 2 steps, empty /eval, no result.json: renders with n/a.
  empty/       attributes only, no datasets: renders with n/a.
  badformat/   wrong `format` attribute; missing/: no timing.h5 -> exit 2.

Exits 1 if any check fails, and prints one line per check plus a summary.
"""
import json
import os
import re
import shutil
import subprocess
import sys

# Skipped (exit 77, CTest's SKIP_RETURN_CODE) without the modules it checks with.
try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks {e.name} (Debian: python3-<module>; Spack: py-<module>)")
    sys.exit(77)

PYTHON = sys.executable  # the interpreter running this test (CMake found it)
PHASES = ["data_wait", "teacher_forward", "sift_forward", "student_forward", "backward",
          "comm_wait", "optimizer", "all_gather", "checkpoint", "eval"]
P = {name: i for i, name in enumerate(PHASES)}
SUBDIRS = ("straggler", "ws1", "ws2", "tiny", "empty", "scaling", "growth", "badformat", "missing", "nothdf5")


def write_timing(path, *, step_seconds, hosts, batch_per_rank, threads=4, fmt="vitkd-timing",
                 eval_rows=((),), gemm=2.0e11, mode="distill"):
    """Writes a timing.h5 from step_seconds [S, R, P]; the rest is derived from it."""
    S, R, _ = step_seconds.shape
    os.makedirs(os.path.dirname(path), exist_ok=True)
    str_t = h5py.string_dtype()
    with h5py.File(path, "w") as h5:
        a = h5.attrs
        a["format"] = fmt
        a["format_version"] = np.int64(1)
        a["world_size"] = np.int64(R)
        a.create("hostnames", np.array(hosts, dtype=object), dtype=str_t)
        a["mode"] = mode
        a["model"] = "ViT-Ti/4 student, ViT-S/4 teacher (synthetic)"
        a["parameters"] = np.int64(5_000_000)
        a["teacher_parameters"] = np.int64(21_000_000 if mode == "distill" else 0)
        a["flops_per_sample"] = np.float64(3.0e9)
        a["bytes_per_rank"] = np.int64(80_000_000)
        if gemm is not None:
            a["gemm_bf16_flops_per_core"] = np.float64(gemm)
        a["threads_per_rank"] = np.int64(threads)

        d = h5.create_dataset("step_seconds", data=step_seconds.astype(np.float64))
        d.attrs.create("phases", np.array(PHASES, dtype=object), dtype=str_t)
        wall = step_seconds.sum(axis=2) + 0.001
        h5["step_wall_seconds"] = wall
        busy = wall - step_seconds[:, :, P["comm_wait"]] - step_seconds[:, :, P["data_wait"]]
        h5["cpu_user_seconds"] = threads * 0.9 * busy
        h5["cpu_system_seconds"] = 0.05 * wall

        steps = np.arange(1, S + 1, dtype=np.int64)
        m = h5.create_group("metrics")
        m["step"] = steps
        m["epoch"] = (steps - 1) // max(1, S // 2)
        m["loss"] = 2.3 * np.exp(-steps / 20.0) + 0.3
        m["lr"] = 1e-3 * np.minimum(1.0, steps / 5.0)
        m["kept_fraction"] = np.ones(S)
        global_batch = batch_per_rank * R
        m["images_per_second"] = global_batch / wall.max(axis=1)
        m["samples_seen"] = steps * global_batch
        m["samples_trained"] = steps * global_batch
        m["teacher_forwards"] = steps * global_batch
        if eval_rows is not None:
            e = h5.create_group("eval")
            st, ep, top = (list(x) for x in zip(*eval_rows)) if eval_rows and eval_rows[0] else ([], [], [])
            e.create_dataset("step", data=np.array(st, dtype=np.int64))
            e.create_dataset("epoch", data=np.array(ep, dtype=np.int64))
            e.create_dataset("test_top1", data=np.array(top, dtype=np.float64))


def straggler_run(work):
    """3 ranks, 40 steps; rank 2 is 1.5x slower in student_forward and backward."""
    rng = np.random.default_rng(7)
    S, R = 40, 3
    t = np.zeros((S, R, len(PHASES)))
    for s in range(S):
        back = 0.10 if s % 2 == 0 else 0.16          # fast/slow every other step
        for r in range(R):
            k = 1.5 if r == 2 else 1.0
            t[s, r, P["data_wait"]] = 0.002
            t[s, r, P["teacher_forward"]] = 0.03
            t[s, r, P["student_forward"]] = 0.05 * k
            t[s, r, P["backward"]] = back * k
            t[s, r, P["optimizer"]] = 0.01
            t[s, r, P["all_gather"]] = 0.004
    t *= rng.normal(1.0, 0.01, size=t.shape)           # 1% noise
    busy = t[:, :, [P["teacher_forward"], P["student_forward"], P["backward"]]].sum(axis=2)
    t[:, :, P["comm_wait"]] = busy.max(axis=1, keepdims=True) - busy + 0.003   # wait for rank 2
    t[29, :, P["data_wait"]] += 0.5                     # spike at step 30
    t[19, :, P["eval"]] = 0.02                          # eval at the end of epoch 0
    t[39, :, P["eval"]] = 0.02
    t[39, 0, P["checkpoint"]] = 0.05
    write_timing(os.path.join(work, "straggler", "timing.h5"), step_seconds=t,
                 hosts=["nodeA", "nodeA", "nodeB"], batch_per_rank=32,
                 eval_rows=((20, 0, 0.81), (40, 1, 0.86)))


def scaling_run(work, name, ranks, step):
    S = 20
    t = np.zeros((S, ranks, len(PHASES)))
    t[:, :, P["data_wait"]] = 0.001
    t[:, :, P["student_forward"]] = 0.06
    t[:, :, P["backward"]] = 0.12
    t[:, :, P["optimizer"]] = 0.01
    t[:, :, P["comm_wait"]] = step - 0.001 - 0.191     # so that the step wall time is `step`
    write_timing(os.path.join(work, name, "timing.h5"), step_seconds=t,
                 hosts=[f"h{r}" for r in range(ranks)], batch_per_rank=32, mode="teacher",
                 eval_rows=None if ranks == 1 else ((20, 0, 0.8),), gemm=None if ranks == 1 else 2.0e11)


def write_result(run_dir, result):
    with open(os.path.join(run_dir, "result.json"), "w") as fh:
        json.dump(result, fh)


# Evaluations of the straggler run; 0.85 is first reached at step 20 (again at 40).
EVALS = [{"step": 10, "epoch": 0, "samples_seen": 320, "train_seconds": 0.75, "elapsed_seconds": 1.0,
          "test_top1": 0.8},
         {"step": 20, "epoch": 0, "samples_seen": 640, "train_seconds": 1.5, "elapsed_seconds": 2.0,
          "test_top1": 0.86},
         {"step": 40, "epoch": 1, "samples_seen": 1280, "train_seconds": 3.0, "elapsed_seconds": 4.5,
          "test_top1": 0.87}]
TTA = [{"threshold": 0.85, "reached": True, "step": 20, "samples_seen": 640, "train_seconds": 1.5,
        "elapsed_seconds": 2.0},
       {"threshold": 0.9, "reached": False, "step": None, "samples_seen": None, "train_seconds": None,
        "elapsed_seconds": None}]


def tiny_run(work):
    t = np.zeros((2, 1, len(PHASES)))
    t[:, :, P["backward"]] = 0.1
    t[:, :, P["student_forward"]] = 0.05
    write_timing(os.path.join(work, "tiny", "timing.h5"), step_seconds=t, hosts=["solo"],
                 batch_per_rank=8, eval_rows=((),))


def report(src, *args):
    cmd = [PYTHON, os.path.join(src, "analysis", "report.py"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def __call__(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed.append(name)
            print(f"FAIL {name}" + (f": {detail}" if detail else ""))


def line(text, pattern):
    m = re.search(pattern, text, re.M)
    return m


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    for sub in SUBDIRS:   # only what this test writes; WORK_DIR itself is left alone
        shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
    straggler_run(work)
    scaling_run(work, "ws1", 1, 0.20)
    scaling_run(work, "ws2", 2, 0.22)
    tiny_run(work)
    write_result(os.path.join(work, "straggler"), {"test_top1": 0.87, "evaluations": EVALS,
                                                   "time_to_accuracy": TTA})
    write_result(os.path.join(work, "ws2"), {"test_top1": 0.8, "train_seconds": 5.0})
    check = Checks()

    # (a) straggler run
    p = report(src, os.path.join(work, "straggler"))
    check("straggler: exit 0", p.returncode == 0, p.stderr.strip()[-2000:])
    md_path = os.path.join(work, "straggler", "report.md")
    check("straggler: report.md exists", os.path.isfile(md_path))
    md = open(md_path).read() if os.path.isfile(md_path) else ""
    pngs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    check("straggler: report links >= 4 PNGs", len(pngs) >= 4, str(pngs))
    missing = [x for x in pngs if not os.path.isfile(os.path.join(work, "straggler", x))]
    check("straggler: linked PNGs exist", pngs and not missing, f"missing {missing}")
    for want in ("heatmap_rank_phase.png", "heatmap_rank_step.png", "training_curves.png"):
        check(f"straggler: {want} linked", want in pngs)

    m = line(md, r"^Most imbalanced rank: (\d+) \(host (\S+), busy ([\d.]+)x the mean\)")
    check("most imbalanced rank is 2 on nodeB", m and m.group(1) == "2" and m.group(2) == "nodeB",
          m.group(0) if m else "no line")
    m = line(md, r"^Stragglers: ([^(]*)\(")
    strag = [int(x) for x in re.findall(r"\d+", m.group(1))] if m else None
    check("stragglers list is exactly [2]", strag == [2], m.group(0) if m else "no line")
    m = line(md, r"^Slowest phase: (\w+) \(([\d.]+)% of step time\)")
    check("slowest phase is backward", m and m.group(1) == "backward", m.group(0) if m else "no line")
    m = line(md, r"^Periodic pattern: backward repeats every (\d+) steps.*fast.*slow")
    check("backward has a period-2 fast/slow pattern", m and m.group(1) == "2",
          m.group(0) if m else "no line")
    m = line(md, r"^Spikes: (.*)$")
    check("spike at step 30 attributed to data_wait", m and "step 30 " in m.group(1) and "data_wait" in m.group(1),
          m.group(0) if m else "no line")
    check("no spurious period for optimizer",
          not line(md, r"^Periodic pattern: optimizer "))
    check("MFU reported", line(md, r"^\| MFU \| [\d.]+% \|") is not None)
    check("stdout carries the phase table and slowest phase",
          "Slowest phase: backward" in p.stdout and "| backward |" in p.stdout)
    check("time to accuracy: 0.85 first reached at step 20",
          line(md, r"^\| 0\.8500 \| 20 \| 640 \| 1\.5 s \| 2\.0 s \|$") is not None,
          md.split("### 8.")[-1][:600])
    check("time to accuracy: 0.90 not reached",
          line(md, r"^\| 0\.9000 \| not reached \| n/a \| n/a \| n/a \|$") is not None)
    m = line(md, r"^Most imbalanced host: (\S+) \(ranks ([\d, ]+); compute before the gradient exchange "
                 r"[\d.]+ s/step, ([\d.]+)x the mean host\)")
    check("most imbalanced host is nodeB (rank 2)", m and m.group(1) == "nodeB" and m.group(2) == "2",
          m.group(0) if m else "no line")
    m = line(md, r"^Most communication-bound host: (\S+) ")
    check("most communication-bound host is nodeA (its ranks wait for rank 2)", m and m.group(1) == "nodeA",
          m.group(0) if m else "no line")
    check("host lines on stdout", "Most imbalanced host: nodeB" in p.stdout)
    check("time to accuracy on stdout, with the evaluation count",
          "time to accuracy (3 evaluations)" in p.stdout and "| 0.8500 | 20 |" in p.stdout)

    # (b) scaling
    out = os.path.join(work, "scaling")
    p = report(src, os.path.join(work, "ws2"), os.path.join(work, "ws1"), "--out", out)
    check("scaling: exit 0", p.returncode == 0, p.stderr.strip()[-2000:])
    md = open(os.path.join(out, "report.md")).read() if os.path.isfile(os.path.join(out, "report.md")) else ""
    sec = md.split("## Scaling across runs", 1)[1] if "## Scaling across runs" in md else ""
    rows = {}
    for ln in sec.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if ln.startswith("|") and len(cells) == 8 and cells[1].isdigit():
            rows[int(cells[1])] = cells
    check("scaling table lists world sizes 1 and 2", sorted(rows) == [1, 2], str(sorted(rows)))
    if sorted(rows) == [1, 2]:
        r1, r2 = rows[1], rows[2]
        # ws1: 32 samples / 0.20 s = 160/s; ws2: 64 / 0.22 = 290.9/s
        check("scaling: images/s 160.0 and 290.9", r1[2] == "160.0" and r2[2] == "290.9", f"{r1[2]} {r2[2]}")
        check("scaling: base efficiencies 1.00", r1[6] == "1.00" and r1[7] == "1.00", str(r1))
        check("scaling: ws2 strong and weak efficiency 0.91", r2[6] == "0.91" and r2[7] == "0.91", str(r2))
    # ws1 -> ws2: only comm_wait grew (0.008 -> 0.028 s per step)
    g = os.path.join(work, "growth")
    pg = report(src, os.path.join(work, "ws1"), os.path.join(work, "ws2"), "--out", g)
    m = line(pg.stdout, r"^Grew most from ws1 to ws2: (\w+) \(([-+\d.]+) ms/step")
    check("growth: communication grew most from ws1 to ws2, by 20 ms/step",
          pg.returncode == 0 and m is not None and m.group(1) == "communication" and m.group(2) == "+20.0",
          m.group(0) if m else (pg.stderr.strip() or pg.stdout)[-500:])
    check("single host: host lines n/a", "Most imbalanced host: n/a (one host)" in md)
    pngs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    missing = [x for x in pngs if not os.path.isfile(os.path.join(out, x))]
    check("scaling: per-run PNGs exist and are distinct", pngs and not missing and len(set(pngs)) == len(pngs),
          f"missing {missing}")
    check("scaling: ws1 without /eval renders n/a", "test top-1: n/a" in md)
    check("scaling: single rank imbalance is n/a", "Most imbalanced rank: n/a (single rank)" in md)
    check("scaling: a result.json without time_to_accuracy renders n/a",
          "Time to accuracy: n/a (this result.json has no time_to_accuracy" in md)

    # tiny run: fewer steps than the warm-up skip, empty /eval
    p = report(src, os.path.join(work, "tiny"))
    check("tiny: exit 0", p.returncode == 0, p.stderr.strip()[-2000:])
    md = open(os.path.join(work, "tiny", "report.md")).read() if p.returncode == 0 else ""
    check("tiny: renders with n/a and notes the kept warm-up", "n/a" in md and "warm-up step(s) are kept" in md)
    check("tiny: no result.json, time to accuracy n/a", "Time to accuracy: n/a (no result.json" in md)

    # attributes only: no datasets at all
    empty = os.path.join(work, "empty", "timing.h5")
    os.makedirs(os.path.dirname(empty))
    with h5py.File(empty, "w") as h5:
        h5.attrs["format"] = "vitkd-timing"
        h5.attrs["format_version"] = np.int64(1)
        h5.attrs["world_size"] = np.int64(2)
    p = report(src, os.path.dirname(empty))
    check("empty: exit 0 with n/a", p.returncode == 0 and "Slowest phase: n/a" in p.stdout,
          (p.stderr.strip() or p.stdout)[-2000:])

    # bad inputs
    bad = os.path.join(work, "badformat", "timing.h5")
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    with h5py.File(bad, "w") as h5:
        h5.attrs["format"] = "something-else"
        h5.attrs["format_version"] = np.int64(1)
    p = report(src, os.path.dirname(bad))
    err = p.stderr.strip()
    check("wrong format: exit 2, one line naming the file",
          p.returncode == 2 and bad in err and len(err.splitlines()) == 1 and "format" in err,
          f"rc {p.returncode}: {err}")
    miss = os.path.join(work, "missing")
    p = report(src, miss)
    err = p.stderr.strip()
    check("missing timing.h5: exit 2 naming the file",
          p.returncode == 2 and os.path.join(miss, "timing.h5") in err and len(err.splitlines()) == 1,
          f"rc {p.returncode}: {err}")
    noth5 = os.path.join(work, "nothdf5", "timing.h5")
    os.makedirs(os.path.dirname(noth5))
    with open(noth5, "w") as fh:
        fh.write("not hdf5\n")
    p = report(src, os.path.dirname(noth5))
    err = p.stderr.strip()
    check("non-HDF5 file: exit 2 naming the file",
          p.returncode == 2 and noth5 in err and len(err.splitlines()) == 1, f"rc {p.returncode}: {err}")

    total = check.passed + len(check.failed)
    print(f"\n{check.passed}/{total} checks passed" + (f"; FAILED: {', '.join(check.failed)}" if check.failed else ""))
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
