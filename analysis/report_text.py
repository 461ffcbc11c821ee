"""The text of analysis/report.py: the sections of report.md (per run, growth with
the rank count, scaling, time to accuracy) and the lines printed to stdout.
"""

import os
import re
import numpy as np

from report_read import (DATA_WAIT_FLAG, MAD_FLOOR, MAX_LISTED, NA, OCCASIONAL_PHASES,
                         PERIOD_MIN_STEPS, PERIOD_STRENGTH, PERIOD_SWING, SPIKE_MADS,
                         STRAGGLER_TOLERANCE, WAIT_PHASES, _num, f, md_table, ok, pct, safe_div, si)
from report_figures import fig_heatmaps, fig_step_time, fig_training


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
