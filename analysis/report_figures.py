"""The PNG figures of analysis/report.py: per-rank heat maps, step times, training curves.
"""

import os
import numpy as np

from report_read import ok


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
