"""The statistics of analysis/report.py: kept steps, spikes, periods, throughput
and the per-run analysis the figures and the text are made from.
"""

import math
import numpy as np

from report_read import (MAD_FLOOR, OCCASIONAL_PHASES, PERIOD_MIN_STEPS, PERIOD_STRENGTH,
                         PERIOD_SWING, PERIOD_WEAK, SPIKE_MADS, STRAGGLER_TOLERANCE, WAIT_PHASES,
                         ok, safe_div)


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
