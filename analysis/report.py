#!/usr/bin/env python3
"""Post-run analysis of vitkd's timing log (RUN_DIR/timing.h5, format "vitkd-timing" v1).

    /usr/bin/python3 analysis/report.py RUN_DIR [RUN_DIR ...] [--out DIR] [--skip-steps N]

Writes DIR/report.md (DIR defaults to the first RUN_DIR) with PNG figures beside
it, and prints the main tables to stdout. With several RUN_DIRs the report has
one section per run and a scaling table across them.

Sections per run: phase breakdown, per-rank load balance, step-time variability
(spikes, periodic patterns), heat maps, training curves, achieved FLOP/s and
MFU, CPU use, and time to accuracy (from RUN_DIR/result.json's
time_to_accuracy: per threshold the first evaluation at or above it; n/a
for a result.json written before vitkd recorded it). A RUN_DIR may also be the path of a timing.h5 file itself.

Exit status: 0 on success, 2 when an input is missing or is not a vitkd-timing
v1 file (one line on stderr naming the file).
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

FORMAT_NAME = "vitkd-timing"
FORMAT_VERSION = 1

# Phases that are waiting, not work: excluded from a rank's busy time.
WAIT_PHASES = ("data_wait", "comm_wait", "all_gather")
# Occasional phases (done once per epoch or run, some by one rank only):
# also excluded from busy time, so that they do not mask the per-step balance.
OCCASIONAL_PHASES = ("checkpoint", "eval")

STRAGGLER_TOLERANCE = 0.10   # busy > (1 + this) x the median rank's busy
SPIKE_MADS = 5.0             # spike: step time > median + SPIKE_MADS * MAD
MAD_FLOOR = 1e-3             # MAD floored at this fraction of the median
DATA_WAIT_FLAG = 0.01        # flag ranks whose data_wait exceeds 1% of step time
PERIOD_MIN_STEPS = 8         # no period search on fewer steps
PERIOD_STRENGTH = 0.5        # autocorrelation at the period for a "periodic" verdict
PERIOD_WEAK = 0.3            # ... and for a "weak" one
PERIOD_SWING = 0.05          # cycle swing (max-min of the folded cycle / mean) to report
MAX_LISTED = 5               # spikes listed in the text

NA = "n/a"


class FormatError(Exception):
    """An input that is missing or not a vitkd-timing v1 file."""


# ---------------------------------------------------------------------------
# small helpers

def _str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _str(v[()])
    return str(v)


def _strs(v):
    if v is None:
        return None
    arr = np.atleast_1d(np.asarray(v, dtype=object))
    return [_str(x) for x in arr.ravel()]


def _num(v, default=None):
    if v is None:
        return default
    try:
        arr = np.asarray(v)
        if arr.size != 1:
            return default
        x = float(arr.ravel()[0])
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def ok(x):
    return x is not None and isinstance(x, (int, float, np.integer, np.floating)) and math.isfinite(float(x))


def f(x, spec=".3f", suffix=""):
    """Formats a number, or n/a for None/NaN/inf."""
    if not ok(x):
        return NA
    return format(float(x), spec) + suffix


def pct(x, digits=1):
    return f(100.0 * x, f".{digits}f", "%") if ok(x) else NA


def si(x, unit=""):
    """Engineering notation: 1.23 G, 456 M ..."""
    if not ok(x):
        return NA
    x = float(x)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return out


def safe_div(a, b):
    if not ok(a) or not ok(b) or b == 0:
        return None
    return float(a) / float(b)


# ---------------------------------------------------------------------------
# loading and validation

class Run:
    """One run's timing log, validated; optional data is None when absent."""

    def __init__(self, run_dir):
        self.arg = run_dir
        if os.path.isfile(run_dir):
            self.path = run_dir
            self.dir = os.path.dirname(os.path.abspath(run_dir))
        else:
            self.dir = run_dir
            self.path = os.path.join(run_dir, "timing.h5")
        self.notes = []
        self._load()
        self.result = self._load_result()

    def _load(self):
        path = self.path
        if not os.path.isfile(path):
            raise FormatError(f"{path}: no such file (expected a vitkd timing log)")
        import h5py
        try:
            h5 = h5py.File(path, "r")
        except OSError as e:
            msg = " ".join(str(e).split())
            raise FormatError(f"{path}: not a readable HDF5 file ({msg})")
        with h5:
            a = h5.attrs
            fmt = _str(a["format"]) if "format" in a else None
            if fmt != FORMAT_NAME:
                raise FormatError(f"{path}: format attribute is {fmt!r}, expected {FORMAT_NAME!r}")
            ver = _num(a.get("format_version"))
            if ver is None or int(ver) != FORMAT_VERSION:
                raise FormatError(f"{path}: format_version is {a.get('format_version')!r}, "
                                  f"expected {FORMAT_VERSION}")
            self.attrs = {k: a[k] for k in a.keys()}
            self.mode = _str(a["mode"]) if "mode" in a else NA
            self.model = _str(a["model"]) if "model" in a else NA
            self.parameters = _num(a.get("parameters"))
            self.teacher_parameters = _num(a.get("teacher_parameters"))
            self.flops_per_sample = _num(a.get("flops_per_sample"))
            self.bytes_per_rank = _num(a.get("bytes_per_rank"))
            # The MFU ceiling in the precision the run computed in (attribute
            # compute); files before 0.4.0 have only the bf16 name.
            self.gemm_ceiling = _num(a.get("gemm_flops_per_core", a.get("gemm_bf16_flops_per_core")))
            self.compute = _str(a["compute"]) if "compute" in a else "bf16"
            self.threads = _num(a.get("threads_per_rank"))
            ws_attr = _num(a.get("world_size"))

            def ds(name, ndim, dtype=float):
                if name not in h5 or not isinstance(h5[name], h5py.Dataset):
                    return None
                d = h5[name]
                if d.ndim != ndim:
                    raise FormatError(f"{path}: /{name.lstrip('/')} has {d.ndim} dimensions, expected {ndim}")
                return np.asarray(d[()], dtype=dtype)

            st = ds("step_seconds", 3)
            if st is not None:
                phases = _strs(h5["step_seconds"].attrs.get("phases"))
                if phases is None:
                    phases = [f"phase{i}" for i in range(st.shape[2])]
                    self.notes.append("/step_seconds has no `phases` attribute; phases are numbered.")
                if len(phases) != st.shape[2]:
                    raise FormatError(f"{path}: /step_seconds has {st.shape[2]} phases but its "
                                      f"`phases` attribute names {len(phases)}")
            else:
                phases = []
                self.notes.append("/step_seconds is missing: no per-phase statistics.")
                r = int(ws_attr) if ws_attr else 1
                st = np.zeros((0, r, 0))
            self.step_seconds = st
            self.phases = phases
            self.steps, self.ranks = st.shape[0], st.shape[1]
            if ws_attr is not None and int(ws_attr) != self.ranks:
                self.notes.append(f"world_size attribute is {int(ws_attr)} but /step_seconds has "
                                  f"{self.ranks} ranks; using {self.ranks}.")
            self.world_size = self.ranks
            hosts = _strs(a.get("hostnames"))
            if hosts is None or len(hosts) != self.ranks:
                hosts = (hosts or []) + ["?"] * self.ranks
            self.hosts = hosts[:self.ranks]

            def ranked(name):
                d = ds(name, 2)
                if d is None:
                    return None
                if d.shape != (self.steps, self.ranks):
                    self.notes.append(f"/{name} has shape {d.shape}, expected "
                                      f"{(self.steps, self.ranks)}; ignored.")
                    return None
                return d

            wall = ranked("step_wall_seconds")
            if wall is None:
                self.notes.append("/step_wall_seconds missing: step wall time taken as the sum of the phases.")
                wall = st.sum(axis=2)
            self.wall = wall
            self.cpu_user = ranked("cpu_user_seconds")
            self.cpu_system = ranked("cpu_system_seconds")

            def group(gname, keys):
                out = {}
                for k in keys:
                    d = ds(f"{gname}/{k}", 1)
                    out[k] = d if d is not None and d.size > 0 else None
                return out

            self.metrics = group("metrics", ("step", "epoch", "loss", "lr", "kept_fraction",
                                             "images_per_second", "samples_seen",
                                             "samples_trained", "teacher_forwards"))
            self.eval = group("eval", ("step", "epoch", "test_top1"))

        ms = self.metrics.get("step")
        if ms is not None and len(ms) == self.steps:
            self.step_numbers = ms.astype(np.int64)
        else:
            self.step_numbers = np.arange(1, self.steps + 1, dtype=np.int64)

    def _load_result(self):
        p = os.path.join(self.dir, "result.json")
        if not os.path.isfile(p):
            return None
        try:
            with open(p) as fh:
                return json.load(fh)
        except (OSError, ValueError) as e:
            self.notes.append(f"{p} unreadable ({e}); ignored.")
            return None

    def phase_index(self, name):
        return self.phases.index(name) if name in self.phases else None


# ---------------------------------------------------------------------------
# analysis

def kept_steps(run, skip):
    """Indices of the steps used for statistics (warm-up dropped when possible)."""
    if run.steps == 0:
        return np.arange(0)
    if run.steps > skip:
        return np.arange(skip, run.steps)
    run.notes.append(f"only {run.steps} step(s): the {skip} warm-up step(s) are kept in the statistics.")
    return np.arange(run.steps)


def robust_threshold(x):
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    mad_eff = max(mad, MAD_FLOOR * abs(med))
    return med, mad, med + SPIKE_MADS * mad_eff


def autocorr(r, lag):
    a, b = r[:-lag], r[lag:]
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def detect_period(x):
    """Dominant period (in steps) of a per-step series by FFT, confirmed by autocorrelation.

    The series is cleaned of spikes (values above median + 5 MAD are set to the
    median) and of a linear trend; the strongest spectral peak with at least
    three whole cycles in the series gives a candidate period, refined to the
    integer lag (within +-1) with the highest autocorrelation. Returns a dict with
    period, strength (autocorrelation at the period), the folded cycle (mean of
    each position in the cycle) and swing ((max-min of the cycle) / mean), or a
    dict with only `why` when no search was possible.
    """
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n < PERIOD_MIN_STEPS:
        return {"why": f"too few steps ({n} < {PERIOD_MIN_STEPS})"}
    med, _, thr = robust_threshold(x)
    x = np.where(x > thr, med, x)
    mean = float(x.mean())
    t = np.arange(n, dtype=float)
    r = x - np.polyval(np.polyfit(t, x, 1), t)
    if r.std() <= 1e-9 * max(abs(mean), 1e-30):
        return {"why": "flat"}
    max_lag = n // 3
    if max_lag < 2:
        return {"why": "too few steps"}
    power = np.abs(np.fft.rfft(r)) ** 2
    ks = np.arange(len(power))
    valid = (ks >= 1) & (n / np.maximum(ks, 1) <= max_lag)
    if not valid.any():
        return {"why": "too few steps"}
    k = int(ks[valid][np.argmax(power[valid])])
    p0 = n / k
    cands = sorted({L for L in (math.floor(p0) - 1, math.floor(p0), math.ceil(p0), math.ceil(p0) + 1)
                    if 2 <= L <= max_lag})
    if not cands:
        return {"why": "too few steps"}
    acfs = {L: autocorr(r, L) for L in cands}
    L = max(cands, key=lambda c: (acfs[c], -c))
    cycle = np.array([r[i::L].mean() for i in range(L)]) + mean
    swing = (cycle.max() - cycle.min()) / mean if mean > 0 else None
    strength = acfs[L]
    if strength >= PERIOD_STRENGTH and ok(swing) and swing >= PERIOD_SWING:
        verdict = "periodic"
    elif strength >= PERIOD_WEAK:
        verdict = "weak"
    else:
        verdict = "none"
    return {"period": L, "strength": strength, "cycle": cycle, "swing": swing,
            "verdict": verdict, "power_share": float(power[k] / power[1:].sum()) if power[1:].sum() > 0 else None}


def throughput(run, idx):
    """Samples trained per second over the kept steps, from /metrics/samples_trained deltas.

    Time is the sum over kept steps of the slowest rank's step wall time minus
    the slowest rank's eval time (as result.json's images_per_second does).
    Returns (samples_per_second, samples, seconds, per_rank_batch) or Nones.
    """
    st = run.metrics.get("samples_trained")
    if st is None or run.steps == 0 or len(idx) == 0:
        return None, None, None, None
    n = min(len(st), run.steps)
    if len(st) != run.steps:
        run.notes.append(f"/metrics has {len(st)} steps, /step_seconds {run.steps}; "
                         f"throughput uses the first {n}.")
    idx = idx[idx < n]
    if len(idx) == 0:
        return None, None, None, None
    st = st[:n].astype(float)
    delta = np.diff(np.concatenate([[0.0], st]))
    t = run.wall[:n].max(axis=1)
    ie = run.phase_index("eval")
    if ie is not None:
        t = t - run.step_seconds[:n, :, ie].max(axis=1)
    samples = float(delta[idx].sum())
    secs = float(t[idx].sum())
    batch = float(np.median(delta[idx])) / run.world_size
    return safe_div(samples, secs), samples, secs, batch


def analyse(run, skip):
    """All per-run numbers, in one dict."""
    A = {}
    idx = kept_steps(run, skip)
    A["idx"] = idx
    n = len(idx)
    A["n"] = n
    P = len(run.phases)
    st = run.step_seconds[idx]                           # [n, R, P]
    wall = run.wall[idx]                                 # [n, R]
    step_time = wall.max(axis=1) if n else np.zeros(0)   # [n]
    A["step_time"] = step_time
    per_phase = st.max(axis=1) if n else np.zeros((0, P))  # [n, P] slowest rank per step
    A["per_phase"] = per_phase
    mean_step = float(step_time.mean()) if n else None
    A["mean_step"] = mean_step

    # 1. phase breakdown
    rows = []
    for p, name in enumerate(run.phases):
        s = per_phase[:, p]
        rows.append({"phase": name,
                     "mean": float(s.mean()) if n else None,
                     "median": float(np.median(s)) if n else None,
                     "p95": float(np.percentile(s, 95)) if n else None,
                     "share": safe_div(float(s.mean()), mean_step) if n else None})
    if n and P:
        untracked = (wall - st.sum(axis=2)).max(axis=1)
        A["untracked"] = {"phase": "(untracked: wall - sum of phases)",
                          "mean": float(untracked.mean()), "median": float(np.median(untracked)),
                          "p95": float(np.percentile(untracked, 95)),
                          "share": safe_div(float(untracked.mean()), mean_step)}
    else:
        A["untracked"] = None
    A["phase_rows"] = rows
    valid = [r for r in rows if ok(r["mean"])]
    A["slowest"] = max(valid, key=lambda r: r["mean"]) if valid and max(r["mean"] for r in valid) > 0 else None

    # 2. load balance
    busy_mask = np.array([nm not in WAIT_PHASES and nm not in OCCASIONAL_PHASES for nm in run.phases], bool)
    A["busy_phases"] = [nm for nm, b in zip(run.phases, busy_mask) if b]
    A["excluded_phases"] = [nm for nm, b in zip(run.phases, busy_mask) if not b]
    R = run.ranks
    if n and busy_mask.any():
        busy = st[:, :, busy_mask].sum(axis=2)           # [n, R]
        busy_mean = busy.mean(axis=0)                    # [R]
        bm = float(busy_mean.mean())
        A["busy_mean"] = busy_mean
        A["busy_ratio"] = busy_mean / bm if bm > 0 else np.full(R, np.nan)
        A["imbalance"] = safe_div(float(busy_mean.max()), bm)
        step_means = busy.mean(axis=1)
        good = step_means > 0
        A["step_imbalance"] = float((busy.max(axis=1)[good] / step_means[good]).mean()) if good.any() else None
        A["most_imbalanced"] = int(np.argmax(busy_mean)) if R > 1 and bm > 0 else None
        med = float(np.median(busy_mean))
        A["median_busy"] = med
        A["stragglers"] = [int(r) for r in range(R) if busy_mean[r] > (1 + STRAGGLER_TOLERANCE) * med] if R > 1 else []
    else:
        A["busy_mean"] = None
        A["busy_ratio"] = None
        A["imbalance"] = A["step_imbalance"] = A["most_imbalanced"] = A["median_busy"] = None
        A["stragglers"] = []

    def mean_phase(name):
        i = run.phase_index(name)
        return st[:, :, i].mean(axis=0) if (n and i is not None) else None

    A["data_wait_rank"] = mean_phase("data_wait")
    cw, ag = mean_phase("comm_wait"), mean_phase("all_gather")
    A["comm_rank"] = (cw if cw is not None else 0) + (ag if ag is not None else 0) \
        if (cw is not None or ag is not None) else None
    A["wall_rank"] = wall.mean(axis=0) if n else None
    A["phase_rank_mean"] = st.mean(axis=0) if n else np.zeros((R, P))   # [R, P]

    # 3. variability
    if n:
        A["cv"] = safe_div(float(step_time.std()), mean_step)
        med, mad, thr = robust_threshold(step_time)
        A["median_step"], A["mad"], A["spike_threshold"] = med, mad, thr
        spikes = np.nonzero(step_time > thr)[0]
        phase_med = np.median(per_phase, axis=0) if P else None
        sp = []
        for i in spikes:
            cause = None
            if P:
                excess = per_phase[i] - phase_med
                j = int(np.argmax(excess))
                cause = (run.phases[j], float(excess[j]))
            sp.append((int(run.step_numbers[idx[i]]), float(step_time[i]), cause))
        A["spikes"] = sp
    else:
        A["cv"] = A["median_step"] = A["mad"] = A["spike_threshold"] = None
        A["spikes"] = []
    series = [("step wall time", step_time)] + [(nm, per_phase[:, p]) for p, nm in enumerate(run.phases)]
    A["periods"] = [(nm, detect_period(s)) for nm, s in series]

    # 6. FLOP/s
    ips, samples, secs, batch = throughput(run, idx)
    A["ips"], A["samples"], A["train_secs"], A["per_rank_batch"] = ips, samples, secs, batch
    fps = run.flops_per_sample if ok(run.flops_per_sample) and run.flops_per_sample > 0 else None
    A["flops_total"] = fps * ips if (fps and ok(ips)) else None
    A["flops_rank"] = A["flops_total"] / R if ok(A["flops_total"]) else None
    if ok(A["flops_rank"]) and A["busy_mean"] is not None and ok(samples) and n:
        busy_tot = st[:, :, busy_mask].sum(axis=(0, 2))   # [R] seconds busy over the kept steps
        A["flops_rank_busy"] = [safe_div(fps * samples / R, b) for b in busy_tot]
    else:
        A["flops_rank_busy"] = None
    ceil = run.gemm_ceiling if ok(run.gemm_ceiling) and run.gemm_ceiling > 0 else None
    thr_ = run.threads if ok(run.threads) and run.threads > 0 else None
    A["peak_total"] = ceil * thr_ * R if (ceil and thr_) else None
    A["mfu"] = safe_div(A["flops_total"], A["peak_total"]) if A["peak_total"] else None
    # Above 1 the ceiling is wrong (measured under load or given too low), not the run: no MFU.
    A["mfu_above_ceiling"] = ok(A["mfu"]) and A["mfu"] > 1
    if A["mfu_above_ceiling"]:
        A["mfu"] = None

    # 7. CPU
    if n and run.cpu_user is not None and run.cpu_system is not None:
        cpu = run.cpu_user[idx] + run.cpu_system[idx]
        A["cpu_per_wall"] = cpu.sum(axis=0) / np.maximum(wall.sum(axis=0), 1e-30)
        A["cpu_user_share"] = run.cpu_user[idx].sum(axis=0) / np.maximum(cpu.sum(axis=0), 1e-30)
    else:
        A["cpu_per_wall"] = A["cpu_user_share"] = None
    i = run.phase_index("data_wait")
    if n and i is not None:
        A["data_wait_share"] = st[:, :, i].sum(axis=0) / np.maximum(wall.sum(axis=0), 1e-30)
    else:
        A["data_wait_share"] = None
    return A


# ---------------------------------------------------------------------------
# figures

def fig_heatmaps(run, A, out_dir, prefix, label):
    import matplotlib.pyplot as plt
    files = []
    R, P = run.ranks, len(run.phases)
    ylabels = [f"{r} ({h})" for r, h in enumerate(run.hosts)]

    # rank x phase
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * P + 3), max(2.5, 0.45 * R + 1.8)))
    data = A["phase_rank_mean"] if A["n"] and P else np.zeros((R, max(P, 1)))
    im = ax.imshow(data, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xticks(range(P))
    ax.set_xticklabels(run.phases, rotation=40, ha="right")
    ax.set_yticks(range(R))
    ax.set_yticklabels(ylabels)
    ax.set_xlabel("phase")
    ax.set_ylabel("rank (host)")
    ax.set_title(f"{label}: mean seconds per step, rank x phase")
    if R * P <= 300 and A["n"] and P:
        vmax = data.max() if data.size else 0
        for r in range(R):
            for p in range(P):
                v = data[r, p]
                ax.text(p, r, f"{v:.3g}", ha="center", va="center", fontsize=7,
                        color="black" if vmax and v > 0.6 * vmax else "white")
    if not (A["n"] and P):
        ax.text(0.5, 0.5, "n/a: no steps", transform=ax.transAxes, ha="center")
    fig.colorbar(im, ax=ax, label="seconds")
    fig.tight_layout()
    name = f"{prefix}heatmap_rank_phase.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    files.append(("Rank x phase: mean seconds per step (kept steps)", name))

    # rank x step
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.35 * R + 1.8)))
    if run.steps:
        data = run.wall.T
        vmax = float(np.percentile(data, 99)) if data.size else None
        im = ax.imshow(data, aspect="auto", cmap="magma", interpolation="nearest",
                       vmin=float(data.min()), vmax=vmax if vmax and vmax > data.min() else None,
                       extent=(run.step_numbers[0] - 0.5, run.step_numbers[-1] + 0.5, R - 0.5, -0.5))
        fig.colorbar(im, ax=ax, label="step wall s (clipped at p99)")
        if len(A["idx"]) and A["idx"][0] > 0:
            ax.axvline(run.step_numbers[A["idx"][0]] - 0.5, color="cyan", lw=1, ls="--")
    else:
        ax.text(0.5, 0.5, "n/a: no steps", transform=ax.transAxes, ha="center")
    ax.set_yticks(range(R))
    ax.set_yticklabels(ylabels)
    ax.set_xlabel("step")
    ax.set_ylabel("rank (host)")
    ax.set_title(f"{label}: step wall time, rank x step (dashed: end of warm-up)")
    fig.tight_layout()
    name = f"{prefix}heatmap_rank_step.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    files.append(("Rank x step: step wall time", name))
    return files


def fig_step_time(run, A, out_dir, prefix, label):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 3.5))
    if run.steps:
        ax.plot(run.step_numbers, run.wall.max(axis=1), lw=0.8, label="step wall time (slowest rank)")
        if ok(A["spike_threshold"]):
            ax.axhline(A["spike_threshold"], color="red", ls="--", lw=0.8, label="spike threshold")
        if A["spikes"]:
            ax.scatter([s[0] for s in A["spikes"]], [s[1] for s in A["spikes"]], color="red", zorder=3,
                       s=14, label="spikes")
        ax.legend(loc="upper right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "n/a: no steps", transform=ax.transAxes, ha="center")
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.set_title(f"{label}: step time")
    fig.tight_layout()
    name = f"{prefix}step_time.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return [("Step wall time per step", name)]


def fig_training(run, out_dir, prefix, label):
    import matplotlib.pyplot as plt
    m, e = run.metrics, run.eval
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5))
    panels = [("loss", "loss", m.get("loss"), m.get("step")),
              ("learning rate", "lr", m.get("lr"), m.get("step")),
              ("kept fraction", "kept_fraction", m.get("kept_fraction"), m.get("step")),
              ("test top-1", "test_top1", e.get("test_top1"), e.get("step"))]
    for ax, (title, key, y, x) in zip(axes.ravel(), panels):
        ax.set_title(title)
        ax.set_xlabel("step")
        if y is None or len(y) == 0:
            ax.text(0.5, 0.5, "n/a", transform=ax.transAxes, ha="center", va="center", fontsize=14)
            continue
        if x is None or len(x) != len(y):
            x = np.arange(1, len(y) + 1)
        ax.plot(x, y, marker="o" if len(y) <= 30 else None, ms=3, lw=1)
        if key == "loss" and np.all(np.asarray(y)[np.isfinite(y)] > 0) and np.isfinite(y).sum() > 1:
            if np.nanmax(y) / max(np.nanmin(y), 1e-30) > 20:
                ax.set_yscale("log")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{label}: training curves")
    fig.tight_layout()
    name = f"{prefix}training_curves.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return [("Training curves: loss, lr, kept fraction, test top-1", name)]


# ---------------------------------------------------------------------------
# report text

def phase_table(run, A):
    header = ["phase", "mean s", "median s", "p95 s", "share of step"]
    rows = [[r["phase"], f(r["mean"], ".4f"), f(r["median"], ".4f"), f(r["p95"], ".4f"), pct(r["share"])]
            for r in A["phase_rows"]]
    u = A["untracked"]
    if u:
        rows.append([u["phase"], f(u["mean"], ".4f"), f(u["median"], ".4f"), f(u["p95"], ".4f"), pct(u["share"])])
    st = A["step_time"]
    rows.append(["**step wall time**", f(A["mean_step"], ".4f"),
                 f(float(np.median(st)) if len(st) else None, ".4f"),
                 f(float(np.percentile(st, 95)) if len(st) else None, ".4f"), "100.0%" if len(st) else NA])
    return md_table(header, rows)


def slowest_line(A):
    s = A["slowest"]
    if not s:
        return "Slowest phase: n/a"
    return f"Slowest phase: {s['phase']} ({pct(s['share'])} of step time)"


def imbalance_line(run, A):
    r = A["most_imbalanced"]
    if r is None:
        why = "single rank" if run.ranks == 1 else "no busy time"
        return f"Most imbalanced rank: n/a ({why})"
    return f"Most imbalanced rank: {r} (host {run.hosts[r]}, busy {A['busy_ratio'][r]:.2f}x the mean)"


def host_groups(run):
    """{host: [ranks]} in order of first appearance."""
    g = {}
    for r, h in enumerate(run.hosts):
        g.setdefault(h, []).append(r)
    return g


# A rank's own compute before the gradient exchange: what no other rank can make it wait
# for. (The optimizer phase holds the allreduce of the gradient norm, so a rank that
# waits for a straggler waits there as well, and its busy time grows with the straggler's.)
OWN_PHASES = ("teacher_forward", "sift_forward", "student_forward", "backward")


def host_lines(run, A):
    """The most imbalanced host (the mean over its ranks of the compute before the gradient
    exchange, OWN_PHASES, over the mean host's) and the host whose ranks spend the longest in
    communication (comm_wait + all_gather)."""
    g = host_groups(run)
    if len(g) < 2 or "?" in g:
        why = "one host" if len(g) < 2 else "hostnames missing from the timing log"
        return [f"Most imbalanced host: n/a ({why})", f"Most communication-bound host: n/a ({why})"]
    out = []
    own = [run.phase_index(p) for p in OWN_PHASES if run.phase_index(p) is not None]
    pr = A["phase_rank_mean"]
    if own and A["n"] and float(pr[:, own].sum()) > 0:
        per_rank = pr[:, own].sum(axis=1)
        hb = {h: float(per_rank[rs].mean()) for h, rs in g.items()}
        m = float(np.mean(list(hb.values())))
        h = max(hb, key=hb.get)
        out.append(f"Most imbalanced host: {h} (ranks {', '.join(map(str, g[h]))}; compute before the "
                   f"gradient exchange {hb[h]:.4f} s/step, {hb[h] / m:.2f}x the mean host)")
    else:
        out.append("Most imbalanced host: n/a (no compute phases)")
    if A["comm_rank"] is not None and float(np.max(A["comm_rank"])) > 0:
        hc = {h: float(A["comm_rank"][rs].mean()) for h, rs in g.items()}
        med = float(np.median(list(hc.values())))
        h = max(hc, key=hc.get)
        ratio = f"{hc[h] / med:.2f}x the median host" if med > 0 else "the median host has none"
        out.append(f"Most communication-bound host: {h} (comm_wait+all_gather {hc[h]:.4f} s/step, {ratio})")
    else:
        out.append("Most communication-bound host: n/a (no communication phases)")
    return out


PHASE_GROUPS = (("communication", ("comm_wait", "all_gather")),
                ("compute", ("teacher_forward", "sift_forward", "student_forward", "backward", "optimizer")),
                ("data", ("data_wait",)),
                ("checkpoint and eval", OCCASIONAL_PHASES))


def growth_section(runs, analyses, labels):
    """Which group of phases grew most from the first run to each other one (the
    per-step mean of the slowest rank's time in the group's phases)."""
    L = ["## Growth from the first run", "",
         f"Per-step mean of the slowest rank's time in each group of phases, against `{labels[0]}`: "
         + "; ".join(f"{g} = {' + '.join(ps)}" for g, ps in PHASE_GROUPS) + ".", ""]
    stdout = [f"== growth from {labels[0]} =="]

    def group_means(run, A):
        out = {}
        for g, ps in PHASE_GROUPS:
            idx = [run.phase_index(p) for p in ps if run.phase_index(p) is not None]
            if A["n"] and idx:
                st = run.step_seconds[A["idx"]][:, :, idx].sum(axis=2)   # [n, R]
                out[g] = float(st.max(axis=1).mean())
        return out

    base = group_means(runs[0], analyses[0])
    rows = []
    for run, A, label in zip(runs[1:], analyses[1:], labels[1:]):
        cur = group_means(run, A)
        d = {g: cur[g] - base[g] for g in cur if g in base}
        for g in d:
            rows.append([label, g, f(base[g], ".4f"), f(cur[g], ".4f"), f"{d[g] * 1e3:+.1f}"])
        if d:
            g = max(d, key=d.get)
            line = (f"Grew most from {labels[0]} to {label}: {g} ({d[g] * 1e3:+.1f} ms/step, "
                    f"{base[g] * 1e3:.1f} -> {cur[g] * 1e3:.1f} ms)")
        else:
            line = f"Grew most from {labels[0]} to {label}: n/a (no common phases)"
        L += [line, ""]
        stdout.append(line)
    L += md_table(["run", "group", f"{labels[0]} s/step", "run s/step", "change ms/step"], rows)
    L.append("")
    return L, stdout


def stragglers_line(A):
    s = A["stragglers"]
    names = ", ".join(str(r) for r in s) if s else "none"
    return (f"Stragglers: {names} (ranks whose mean busy time exceeds the median rank's, "
            f"{f(A['median_busy'], '.4f', ' s')}, by more than {STRAGGLER_TOLERANCE:.0%})")


def period_lines(A):
    out = []
    for name, d in A["periods"]:
        if d.get("verdict") != "periodic":
            continue
        L = d["period"]
        text = (f"Periodic pattern: {name} repeats every {L} steps (autocorrelation "
                f"{d['strength']:.2f} at lag {L}; cycle swing {pct(d['swing'], 0)} of its mean)")
        if L == 2:
            lo, hi = sorted(d["cycle"])
            text += f": alternates between fast ({lo:.4f} s) and slow ({hi:.4f} s) steps"
        else:
            text += ": cycle " + " / ".join(f"{c:.4f}" for c in d["cycle"]) + " s"
        out.append(text)
    return out


def tta_rows(result):
    """The time-to-accuracy table's rows from result.json, or None when it has
    no time_to_accuracy list (no result.json, or one from an older vitkd)."""
    tta = result.get("time_to_accuracy") if isinstance(result, dict) else None
    if not isinstance(tta, list):
        return None
    rows = []
    for e in tta:
        e = e if isinstance(e, dict) else {}
        reached = e.get("reached") is True
        rows.append([f(_num(e.get("threshold")), ".4f"),
                     f(_num(e.get("step")), ".0f") if reached else "not reached",
                     f(_num(e.get("samples_seen")), ".0f") if reached else NA,
                     f(_num(e.get("train_seconds")), ".1f", " s") if reached else NA,
                     f(_num(e.get("elapsed_seconds")), ".1f", " s") if reached else NA])
    return rows


def tta_section(run, label):
    """Section 8 (markdown lines) and its stdout lines."""
    L = ["### 8. Time to accuracy", ""]
    rows = tta_rows(run.result)
    if rows is None:
        line = ("Time to accuracy: n/a (no result.json beside the timing log)" if not run.result else
                "Time to accuracy: n/a (this result.json has no time_to_accuracy: written by a "
                "vitkd before train.accuracy_thresholds)")
        return L + [line, ""], [line]
    evals = run.result.get("evaluations")
    n = len(evals) if isinstance(evals, list) else NA
    L += ["From result.json: for each of train.accuracy_thresholds, the first test evaluation "
          "(train.eval_every_steps, train.eval_every_epochs) whose top-1 is at or above it. Train "
          "time leaves the evaluations out, elapsed time includes them; both count from the start of "
          f"training (earlier runs of a resumed job included). Evaluations: {n}.", ""]
    tbl = md_table(["threshold", "step", "samples seen", "train time", "elapsed time"], rows)
    return L + tbl + [""], [f"== {label}: time to accuracy ({n} evaluations) =="] + tbl


def run_section(run, A, label, prefix, out_dir, skip):
    L = []
    stdout = []
    add = L.append
    R = run.ranks
    add(f"## Run: {label}")
    add("")
    add(f"Source: `{run.path}`")
    add("")
    info = [
        ["mode", run.mode], ["model", run.model], ["world size (ranks)", R],
        ["hosts", ", ".join(sorted(set(run.hosts))) or NA],
        ["threads per rank", f(run.threads, ".0f")],
        ["parameters (trained)", f(run.parameters, ",.0f")],
        ["teacher parameters", f(run.teacher_parameters, ",.0f")],
        ["FLOPs per trained sample", si(run.flops_per_sample, "FLOP")],
        ["bytes per rank (params+grads+optimizer)", si(run.bytes_per_rank, "B")],
        ["bf16 GEMM ceiling per core", si(run.gemm_ceiling, "FLOP/s") if ok(run.gemm_ceiling) and run.gemm_ceiling > 0 else NA],
        ["steps logged / used for statistics", f"{run.steps} / {A['n']}"
         + (f" (first {A['idx'][0]} skipped as warm-up)" if A["n"] and A["idx"][0] > 0 else "")],
    ]
    if run.result:
        res = run.result
        info.append(["result.json: images/s (whole run)", f(_num(res.get("images_per_second")), ".1f")])
        info.append(["result.json: test top-1", f(_num(res.get("test_top1")), ".4f")])
        info.append(["result.json: train seconds", f(_num(res.get("train_seconds")), ".1f")])
    L += md_table(["item", "value"], info)
    add("")
    for note in run.notes:
        add(f"> Note: {note}")
        add("")

    # 1
    add("### 1. Phase breakdown")
    add("")
    add("A phase's time at a step is the **maximum over ranks** (the time the slowest rank spent in "
        "that phase); mean, median and p95 are over the kept steps. The step time is likewise the "
        "slowest rank's step wall time. Share = mean phase time / mean step time; since each phase's "
        "maximum may come from a different rank, the shares need not add up to 100%.")
    add("")
    tbl = phase_table(run, A)
    L += tbl
    add("")
    add(slowest_line(A))
    add("")
    stdout += [f"== {label}: phase breakdown (max over ranks per step, {A['n']} steps) =="] + tbl
    stdout.append(slowest_line(A))

    # 2
    add("### 2. Load balance across ranks")
    add("")
    add("Busy time of a rank at a step = the sum of its compute phases: "
        f"{', '.join(A['busy_phases']) or NA}. Excluded: the waiting phases "
        f"({', '.join(p for p in A['excluded_phases'] if p in WAIT_PHASES) or 'none'}) and the "
        f"occasional ones ({', '.join(p for p in A['excluded_phases'] if p in OCCASIONAL_PHASES) or 'none'}; "
        "checkpoints are written by one rank, eval runs once per epoch). "
        "busy/mean is a rank's mean busy time over the mean across ranks; imbalance = max/mean.")
    add("")
    rows = []
    for r in range(R):
        rows.append([r, run.hosts[r],
                     f(A["busy_mean"][r], ".4f") if A["busy_mean"] is not None else NA,
                     f(A["busy_ratio"][r], ".2f") if A["busy_ratio"] is not None else NA,
                     f(A["comm_rank"][r], ".4f") if A["comm_rank"] is not None else NA,
                     f(A["data_wait_rank"][r], ".4f") if A["data_wait_rank"] is not None else NA,
                     f(A["wall_rank"][r], ".4f") if A["wall_rank"] is not None else NA])
    L += md_table(["rank", "host", "busy s/step", "busy / mean", "comm_wait+all_gather s/step",
                   "data_wait s/step", "step wall s"], rows)
    add("")
    add(f"Load imbalance (max/mean of the ranks' mean busy time): {f(A['imbalance'], '.2f')}; "
        f"mean over steps of the per-step max/mean: {f(A['step_imbalance'], '.2f')}.")
    add("")
    add(imbalance_line(run, A))
    add("")
    add(stragglers_line(A))
    add("")
    hl = host_lines(run, A)
    for x in hl:
        add(x)
        add("")
    stdout += [imbalance_line(run, A), stragglers_line(A)] + hl

    # 3
    add("### 3. Step-time variability")
    add("")
    add("Step time = the slowest rank's step wall time, over the kept steps.")
    add("")
    add(f"- mean {f(A['mean_step'], '.4f', ' s')}, median {f(A['median_step'], '.4f', ' s')}, "
        f"coefficient of variation (std/mean) {f(A['cv'], '.3f')}")
    sp = A["spikes"]
    add(f"- spikes: steps above median + {SPIKE_MADS:g} x MAD (MAD = median absolute deviation, "
        f"{f(A['mad'], '.4f', ' s')}, floored at {MAD_FLOOR:.1%} of the median) = "
        f"{f(A['spike_threshold'], '.4f', ' s')}: {len(sp) if A['n'] else NA}")
    add("")
    if sp:
        parts = []
        for s, t, cause in sp[:MAX_LISTED]:
            c = f", mostly {cause[0]} +{cause[1]:.4f} s over its median" if cause and cause[1] > 0 else ""
            parts.append(f"step {s} ({t:.4f} s{c})")
        more = f" and {len(sp) - MAX_LISTED} more" if len(sp) > MAX_LISTED else ""
        add("Spikes: " + "; ".join(parts) + more)
        add("")
    add("Periodic patterns: for each per-step series (slowest rank per step) with at least "
        f"{PERIOD_MIN_STEPS} kept steps, spikes are replaced by the median and a linear trend is "
        "removed; the strongest FFT peak with at least three whole cycles gives the period, refined "
        "to the integer lag with the highest autocorrelation. Strength = that autocorrelation; swing = "
        "(slowest - fastest position of the averaged cycle) / mean. Reported as periodic when strength "
        f">= {PERIOD_STRENGTH} and swing >= {PERIOD_SWING:.0%}.")
    add("")
    rows = []
    for name, d in A["periods"]:
        if "why" in d:
            rows.append([name, NA, NA, NA, d["why"]])
        else:
            rows.append([name, d["period"], f(d["strength"], ".2f"), pct(d["swing"], 0), d["verdict"]])
    L += md_table(["series", "period (steps)", "strength", "swing", "verdict"], rows)
    add("")
    pl = period_lines(A)
    for line in pl or ["Periodic pattern: none found"]:
        add(line)
        add("")
    stdout += pl

    # figures 3/4/5
    figs = fig_step_time(run, A, out_dir, prefix, label)
    for cap, name in figs:
        add(f"![{cap}]({name})")
        add("")
    add("### 4. Heat maps")
    add("")
    for cap, name in fig_heatmaps(run, A, out_dir, prefix, label):
        add(f"{cap}:")
        add("")
        add(f"![{cap}]({name})")
        add("")
    add("### 5. Training curves")
    add("")
    m, e = run.metrics, run.eval
    loss = m.get("loss")
    top1 = e.get("test_top1")
    add(f"- final loss {f(loss[-1] if loss is not None else None, '.4f')}, final lr "
        f"{f(m['lr'][-1] if m.get('lr') is not None else None, '.3g')}, final kept fraction "
        f"{f(m['kept_fraction'][-1] if m.get('kept_fraction') is not None else None, '.3f')}")
    if top1 is not None:
        best = int(np.nanargmax(top1)) if np.isfinite(top1).any() else None
        add(f"- test top-1: last {f(top1[-1], '.4f')}, best {f(top1[best] if best is not None else None, '.4f')}"
            f" ({len(top1)} evaluations)")
    else:
        add("- test top-1: n/a (no /eval entries)")
    add("")
    for cap, name in fig_training(run, out_dir, prefix, label):
        add(f"![{cap}]({name})")
        add("")

    # 6
    add("### 6. Achieved FLOP/s")
    add("")
    add("Samples trained per second = the sum of /metrics/samples_trained increments over the kept "
        "steps / the sum of their step times (slowest rank, eval time excluded, as result.json does). "
        "Achieved FLOP/s = flops_per_sample x that rate (flops_per_sample counts the student's forward "
        "and backward plus the teacher's forward). Per rank = total / world size (every rank trains "
        "the same number of samples per step); 'while busy' divides a rank's share by its busy time "
        "only. MFU = achieved FLOP/s / (GEMM ceiling per core in the run's compute precision x threads per rank x world size).")
    add("")
    info = [["samples trained per second", f(A["ips"], ".1f")],
            ["samples / seconds used", f"{f(A['samples'], '.0f')} / {f(A['train_secs'], '.2f')}"],
            ["per-rank batch (median samples per step / world size)", f(A["per_rank_batch"], ".1f")],
            ["achieved FLOP/s, total", si(A["flops_total"], "FLOP/s")],
            ["achieved FLOP/s, per rank", si(A["flops_rank"], "FLOP/s")],
            ["peak (ceiling x threads x ranks)", si(A["peak_total"], "FLOP/s")],
            ["MFU", pct(A["mfu"], 2) if ok(A["mfu"]) else NA + (" (no GEMM ceiling in the file)" if not A["peak_total"] else
                                                              " (the rate reached is above the file's GEMM ceiling)"
                                                              if A["mfu_above_ceiling"] else "")]]
    L += md_table(["quantity", "value"], info)
    add("")
    if A["flops_rank_busy"] is not None:
        ceil_core = run.gemm_ceiling if ok(run.gemm_ceiling) and run.gemm_ceiling > 0 else None
        rows = []
        for r in range(R):
            fb = A["flops_rank_busy"][r]
            mfu_b = safe_div(fb, ceil_core * run.threads) if (ceil_core and ok(run.threads) and run.threads > 0) else None
            rows.append([r, run.hosts[r], si(A["flops_rank"], "FLOP/s"), si(fb, "FLOP/s"), pct(mfu_b, 2)])
        L += md_table(["rank", "host", "FLOP/s (wall)", "FLOP/s while busy", "MFU while busy"], rows)
        add("")
    stdout.append(f"samples/s {f(A['ips'], '.1f')}, achieved {si(A['flops_total'], 'FLOP/s')} total, "
                  f"{si(A['flops_rank'], 'FLOP/s')} per rank, MFU {pct(A['mfu'], 2)}")

    # 7
    add("### 7. CPU use")
    add("")
    add("CPU seconds (getrusage user + system) per wall second, per rank, over the kept steps: near "
        "threads_per_rank means the rank's threads were busy, near 0 that it waited. Ranks whose "
        f"data_wait exceeds {DATA_WAIT_FLAG:.0%} of their step wall time are flagged (input pipeline "
        "not keeping up).")
    add("")
    rows = []
    flagged = []
    for r in range(R):
        cpw = A["cpu_per_wall"][r] if A["cpu_per_wall"] is not None else None
        us = A["cpu_user_share"][r] if A["cpu_user_share"] is not None else None
        dws = A["data_wait_share"][r] if A["data_wait_share"] is not None else None
        flag = ok(dws) and dws > DATA_WAIT_FLAG
        if flag:
            flagged.append(r)
        rows.append([r, run.hosts[r], f(cpw, ".2f"), f(run.threads, ".0f"),
                     pct(safe_div(cpw, run.threads)) if ok(run.threads) and run.threads > 0 else NA,
                     pct(us), pct(dws, 2), "**data_wait > 1%**" if flag else ""])
    L += md_table(["rank", "host", "CPU s / wall s", "threads", "of threads", "user share",
                   "data_wait share", "flag"], rows)
    add("")
    add("Ranks waiting on data (data_wait > 1% of step time): "
        + (", ".join(str(r) for r in flagged) if flagged else
           ("none" if A["data_wait_share"] is not None else NA)))
    add("")
    tl, ts = tta_section(run, label)
    return L + tl, stdout + ts


def scaling_section(runs, analyses, labels):
    L = ["## Scaling across runs", ""]
    stdout = []
    rows = []
    data = []
    for run, A, label in zip(runs, analyses, labels):
        ips = A["ips"]
        src = "metrics"
        if not ok(ips) and run.result and ok(_num(run.result.get("images_per_second"))):
            ips, src = _num(run.result.get("images_per_second")), "result.json"
        data.append((run.world_size, label, ips, A["median_step"], A["per_rank_batch"], src))
    data.sort(key=lambda d: d[0])
    base = next((d for d in data if ok(d[2]) and d[2] > 0), None)
    for P, label, ips, t, batch, src in data:
        if base:
            P0, ips0, t0 = base[0], base[2], base[3]
            speedup = safe_div(ips, ips0)
            strong = safe_div(speedup, P / P0) if ok(speedup) else None
            weak = safe_div(t0, t)
        else:
            speedup = strong = weak = None
        rows.append([label, P, f(ips, ".1f") + ("" if src == "metrics" else " (result.json)"),
                     f(speedup, ".2f"), f(t, ".4f"), f(batch, ".1f"), f(strong, ".2f"), f(weak, ".2f")])
    L.append("Images/s = samples trained per second (section 6). Efficiencies are relative to the "
             f"run with the smallest world size P0 = {base[0] if base else NA}:")
    L.append("")
    L.append("- strong-scaling efficiency = (ips_P / ips_P0) / (P / P0): the throughput gained per "
             "added rank. It is a true strong-scaling figure only if the global batch is the same in "
             "both runs.")
    L.append("- weak-scaling efficiency = t_P0 / t_P with t the median step wall time (slowest rank): "
             "with a fixed per-rank batch the work per rank and step is constant, so any growth of the "
             "step time is scaling overhead. This assumes the per-rank batch is the same in every run; "
             "the per-rank batch column (median samples trained per step / world size) lets you check "
             "that. With a fixed per-rank batch the throughput form of weak efficiency, "
             "ips_P / (ips_P0 x P / P0), is numerically the strong column, which is why it is not repeated.")
    L.append("")
    tbl = md_table(["run", "world size", "images/s", "speedup", "median step s", "per-rank batch",
                    "strong eff.", "weak eff."], rows)
    L += tbl
    batches = {round(d[4], 3) for d in data if ok(d[4])}
    if len(batches) > 1:
        L.append("")
        L.append("> Note: the per-rank batch differs between runs, so the weak-scaling column does not "
                 "compare equal work per rank.")
    L.append("")
    stdout += ["== scaling ==", *tbl]
    return L, stdout


def unique_labels(runs):
    labels, seen = [], {}
    for run in runs:
        base = os.path.basename(os.path.normpath(run.dir)) or "run"
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", base)
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return labels


def main(argv=None):
    ap = argparse.ArgumentParser(description="Report on vitkd timing logs (RUN_DIR/timing.h5).")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directory holding timing.h5")
    ap.add_argument("--out", default=None, help="output directory (default: the first RUN_DIR)")
    ap.add_argument("--skip-steps", type=int, default=2,
                    help="warm-up steps dropped from statistics (default 2)")
    args = ap.parse_args(argv)
    if args.skip_steps < 0:
        ap.error("--skip-steps must be >= 0")

    try:
        runs = [Run(d) for d in args.runs]
    except FormatError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2

    out_dir = args.out or runs[0].dir
    os.makedirs(out_dir, exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")

    labels = unique_labels(runs)
    prefixes = [""] if len(runs) == 1 else [f"{lb}_" for lb in labels]
    analyses = [analyse(r, args.skip_steps) for r in runs]

    md = ["# vitkd timing report", "",
          "Generated by `analysis/report.py` from: " + ", ".join(f"`{r.path}`" for r in runs) + ".", "",
          f"Statistics skip the first {args.skip_steps} step(s) of each run as warm-up (`--skip-steps`); "
          "figures show every step.", ""]
    out_lines = []
    for run, A, label, prefix in zip(runs, analyses, labels, prefixes):
        L, s = run_section(run, A, label, prefix, out_dir, args.skip_steps)
        md += L
        out_lines += s + [""]
    if len(runs) > 1:
        L, s = scaling_section(runs, analyses, labels)
        md += L
        out_lines += s + [""]
        L, s = growth_section(runs, analyses, labels)
        md += L
        out_lines += s + [""]

    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as fh:
        fh.write("\n".join(md).rstrip() + "\n")
    print("\n".join(out_lines).rstrip())
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
