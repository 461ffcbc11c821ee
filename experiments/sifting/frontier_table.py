#!/usr/bin/env python3
"""Does sifting pay? The frontier's tables, plot and short answer, generated from its kept runs.

    /usr/bin/python3 experiments/sifting/frontier_table.py [--results experiments/sifting/results]
                     [--readme experiments/sifting/README.md] [--summary README.md] [--plot PNG]
                     [--check | --write]
    /usr/bin/python3 experiments/sifting/frontier_table.py --print points|stage2-seeds|stage3-seeds|stage3-new-seeds|delay

Reads the runs experiments/sifting/frontier.sh keeps (experiments/distillation/keep_run.py's layout:
results/<NAME>-s<SEED>/ with result.json, test_predictions.json, timing-summary.json) and writes the
three stages of the rule written before any of its runs (experiments/learning-log.md, 2026-12-06,
"does sifting pay?"):
  1. the delay: FSb1 at sift.delay 500, 1000, 2000 (seed 11), chosen on validation top-1;
  2. the grid: the nine points against C at seeds 11 and 12, and the point it chooses;
  3. the chosen point and FSb0.5 against C at seeds 11-14 (E reported beside them), the verdict.
Each point against C of the same seed: the mean paired test top-1 difference and training time
change with 95 % t intervals and McNemar's test (experiments/distillation/lift_stats.py, the
comparison's one rule); a seed's times are compared only when its two runs ran on one machine.

Without --check or --write, prints the block. --write replaces the block between BEGIN and END of
the experiment's page and the short answer between ANSWER_BEGIN and ANSWER_END of the top README, and
draws the frontier (--plot, default experiments/sifting/frontier.png); --check exits 1 with one line
when either block differs from what the files give (test analysis.sifting_frontier_is_generated_from_results).
--print gives the rule's lists for frontier.sh (their one source); "delay" prints the delay stage 1
chooses, or exits 2 while a stage-1 run is missing.

Exit status: 0; 1 for --check with a difference; 2 with one line for a missing marker, a malformed
kept file, or a run whose recipe is not the rule's.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "experiments", "distillation"))
import compare_table  # noqa: E402  (machine(), time_apart(), check_or_write(): the comparison's)
import lift  # noqa: E402  (a kept run, and whether runs are comparable)
import lift_stats  # noqa: E402  (paired differences, intervals, McNemar)

TOOL = "experiments/sifting/frontier_table.py"
# The grid in frontier.sh's order (β, then scope): its rotation per seed depends on it.
SCOPES = (("S", 'scope "sample", separate pass'), ("I", 'scope "sample", ranked in the training forward'),
          ("T", 'scope "teacher"'))
BETAS = ("0.5", "1", "2")
POINTS = tuple((f"F{x}b{b}", f"{what}, β {b}") for b in BETAS for x, what in SCOPES)
STAGE2_SEEDS = ("11", "12")
STAGE3_SEEDS = ("11", "12", "13", "14")
DELAY_SEED, DELAYS = "11", (500, 1000, 2000)
OWN_POINT = "FSb0.5"  # the seeds' operating point, run at four seeds whatever stage 2 chooses
TARGET_TIME, TARGET_TOP1 = -0.30, -0.005  # ≥ 30 % less time, the top-1 interval above −0.5 points
CHOICE_TOP1, FALLBACK_TOP1 = -0.005, -0.010  # stage 2's choice: mean within 0.5 points, else within 1.0
PACE_SKIP, PACE_EPOCHS = 2, 8  # the host's drift within a run: epochs 3-10 against the last 8 (pace())
BEGIN = "<!-- BEGIN experiments/sifting/frontier_table.py: generated from results/; edit the files, not this block -->"
END = "<!-- END experiments/sifting/frontier_table.py -->"
ANSWER_BEGIN = "<!-- BEGIN experiments/sifting/frontier_table.py answer: generated from results/; edit the files, not this block -->"
ANSWER_END = "<!-- END experiments/sifting/frontier_table.py answer -->"
# result.json's phase_seconds_rank0 in the order of its phase_names; the runs kept before result.json
# carried phase_names (before 2026-12-07) wrote them in this order, the timing log's.
PHASES_BEFORE_NAMES = ("data_wait", "teacher_forward", "sift_forward", "student_forward", "backward",
                       "comm_wait", "optimizer", "all_gather", "checkpoint", "eval")
# The profile's columns: the step's compute phases; the rest of the training time is one column.
PROFILE = (("teacher_forward", "teacher forward"), ("sift_forward", "ranking forward"),
           ("student_forward", "student forward"), ("backward", "backward"))


def load(results):
    """{name: {seed: run}} for every kept run under `results` (C, E, the points, the delay runs),
    each run as lift.load_run() gives it with its machine, kept fraction and sift.delay added."""
    runs = {}
    names = ["C", "E"] + [p for p, _ in POINTS] + [f"FSb1d{d}" for d in DELAYS]
    for name in names:
        for s in STAGE3_SEEDS:
            d = os.path.join(results, f"{name}-s{s}")
            if not os.path.exists(os.path.join(d, "result.json")):
                continue
            r = lift.load_run(d)
            result = compare_table.load_json(os.path.join(d, "result.json"))
            r["machine"] = compare_table.machine(result, d)
            r["where"] = compare_table.where(result, d)
            r["kept_fraction"] = float(result.get("kept_fraction", 1.0))
            r["delay"] = (r["recipe"] or {}).get("sift.delay")
            r["epoch_seconds"] = [float(x) for x in result.get("epoch_seconds") or []]
            r["samples_seen"] = float(result["samples_seen"])
            names = result.get("phase_names") or PHASES_BEFORE_NAMES
            seconds = result.get("phase_seconds_rank0") or []
            if len(seconds) != len(names):
                raise lift_stats.InputError(f"{d}/result.json: {len(seconds)} phase_seconds_rank0 for "
                                            f"{len(names)} phase names")
            r["phases"] = {n: float(v) for n, v in zip(names, seconds)}
            runs.setdefault(name, {})[s] = r
    return runs


def chosen_delay(runs):
    """Stage 1's rule: the delay of the highest final validation top-1, the shortest within 0.1 points
    of it; None while a run is missing. Returns (delay, {delay: validation top-1})."""
    val = {d: runs[f"FSb1d{d}"][DELAY_SEED]["evals"][-1][1] for d in DELAYS
           if DELAY_SEED in runs.get(f"FSb1d{d}", {})}
    if len(val) < len(DELAYS):
        return None, val
    best = max(val.values())
    return min(d for d, v in val.items() if v >= best - 0.001), val


def check_recipes(runs, delay):
    """Every point ran at the chosen delay, and every run shares C's recipe outside the arm's keys."""
    for name, by_seed in runs.items():
        for s, r in by_seed.items():
            if name.startswith("F") and "d" not in name[3:] and delay is not None and r["delay"] != delay:
                raise lift_stats.InputError(f"{name}-s{s} ran at sift.delay {r['delay']}, stage 1 chose {delay}")
    pooled = [r for name, by_seed in runs.items() if name != "E" for r in by_seed.values()]
    if pooled:
        lift.check_comparable({"frontier's runs": pooled} if "E" not in runs else
                              {"frontier's runs": pooled, "E's runs": list(runs["E"].values())})


def against_c(runs, name, seeds):
    """NAME against C at the seeds where both ran: (seeds, per-seed rows, means, why the times are
    apart or None) as lift_stats.paired() and compare_table.time_apart() give them; None when none ran."""
    seeds = [s for s in seeds if s in runs.get(name, {}) and s in runs.get("C", {})]
    if not seeds:
        return None
    rows, means = lift_stats.paired(runs[name], runs["C"], seeds)
    return seeds, rows, means, compare_table.time_apart(runs, name, "C", seeds)


def fmt_time(means, apart):
    t, cit = means["time"]
    if apart:
        return f"not compared: {apart}"
    return lift_stats.percent(t) + (f", 95 % {lift_stats.interval(cit, lift_stats.percent)}" if cit else " (one seed)")


def mcnemar(rows):
    return ", ".join("-" if r[5] is None else f"{r[5][2]:.2g}" for r in rows)


def stage1(runs):
    delay, val = chosen_delay(runs)
    out = ["| run | sift.delay (steps) | validation top-1, final | kept fraction | where |", "|---|---:|---:|---:|---|"]
    for d in DELAYS:
        r = runs.get(f"FSb1d{d}", {}).get(DELAY_SEED)
        out.append(f"| FSb1d{d}-s{DELAY_SEED} | {d} | " + ("not run yet | | |" if r is None else
                   f"{val[d]:.4f} | {r['kept_fraction']:.3f} | {r['where']} |"))
    out += ["", "The rule (the highest validation top-1, the shortest delay within 0.1 points of it) chooses "
            + ("nothing yet: a run is missing." if delay is None else f"**sift.delay = {delay}**.")]
    return out


def stage2_rows(runs):
    """Per point: (name, what, seeds, rows, means, apart) at stage 2's seeds, or None where none ran."""
    return [(p, what) + (against_c(runs, p, STAGE2_SEEDS) or (None,) * 4) for p, what in POINTS]


def chosen_point(runs):
    """Stage 2's choice once every point ran at both seeds with its times paired: (point, note), else
    None. Among the points whose mean test change is ≥ −0.5 points, the largest mean time saving; when
    none is, the largest among those within 1.0 points, and the note says so."""
    rows = stage2_rows(runs)
    if any(seeds is None or len(seeds) < len(STAGE2_SEEDS) or apart for _, _, seeds, _, _, apart in rows):
        return None
    for bound, note in ((CHOICE_TOP1, ""), (FALLBACK_TOP1, "no point is within 0.5 points of C; within 1.0 points: ")):
        ok = [(means["time"][0], p) for p, _, _, _, means, _ in rows if means["top1"][0] >= bound]
        if ok:
            return min(ok)[1], note
    return None


def pace(r):
    """The host's drift over one run: the mean of its last PACE_EPOCHS epochs over the mean of the
    PACE_EPOCHS after the first PACE_SKIP (sifting starts within them); None for a shorter run."""
    e = r.get("epoch_seconds") or []
    if len(e) < PACE_SKIP + 2 * PACE_EPOCHS:
        return None
    early = e[PACE_SKIP:PACE_SKIP + PACE_EPOCHS]
    return (sum(e[-PACE_EPOCHS:]) / PACE_EPOCHS) / (sum(early) / PACE_EPOCHS)


def pace_lines(runs):
    """Per seed of stage 2: C's drift beside the points' range. A C that ran at a slower pace early
    than late (or the reverse) biases every paired time of its seed by about the difference."""
    out = []
    for s in STAGE2_SEEDS:
        c = runs.get("C", {}).get(s)
        pts = [pace(runs[p][s]) for p, _ in POINTS if s in runs.get(p, {})]
        pts = [x for x in pts if x is not None]
        if c is None or pace(c) is None:
            continue
        out.append(f"seed {s}: C {pace(c):.2f}" + (f", the points {min(pts):.2f}–{max(pts):.2f}" if pts else ""))
    if not out:
        return []
    return ["", f"The host's pace within each run (the last {PACE_EPOCHS} epochs' mean time over that of "
            f"epochs {PACE_SKIP + 1}–{PACE_SKIP + PACE_EPOCHS}; 1.00: steady): " + "; ".join(out) +
            ". Where C's differs from the points', its seed's time changes are biased by about the difference."]


def profile(runs):
    """Where each point's training time goes: rank 0's phases as a share of C's training time at the
    same seed (the mean over the stage-2 seeds whose times are paired with C's), and the ranking
    forward's cost per sample seen against C's training forward per sample. The phases other than
    PROFILE's, and what no phase times, are one column ("the rest")."""
    out = ["| run | seeds | " + " | ".join(w for _, w in PROFILE) + " | the rest | training time | "
           "ranking forward per sample, against C's student forward per sample |",
           "|---|---|" + "---:|" * (len(PROFILE) + 3)]
    c = runs.get("C", {})
    for p in ["C"] + [q for q, _ in POINTS]:
        if p == "C":
            seeds = [s for s in STAGE2_SEEDS if s in c]
        else:
            got = against_c(runs, p, STAGE2_SEEDS)
            if got is None or got[3]:
                continue
            seeds = got[0]
        if not seeds:
            continue
        share = {k: 0.0 for k, _ in PROFILE}
        rest = total = rank = 0.0
        for s in seeds:
            r, base = runs[p][s], c[s]["train_seconds"]
            for k, _ in PROFILE:
                share[k] += r["phases"].get(k, 0.0) / base / len(seeds)
            rest += (r["train_seconds"] - sum(r["phases"].get(k, 0.0) for k, _ in PROFILE)) / base / len(seeds)
            total += r["train_seconds"] / base / len(seeds)
            seen, c_seen = r["samples_seen"], c[s]["samples_seen"]
            rank += (r["phases"].get("sift_forward", 0.0) / seen) / (c[s]["phases"]["student_forward"] / c_seen) / len(seeds)
        pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
        out.append(f"| {p} | {', '.join(seeds)} | " + " | ".join(pct(share[k]) for k, _ in PROFILE) +
                   f" | {pct(rest)} | {pct(total)} | " + (f"{rank:.2f}" if p[1:2] == "S" else "") + " |")
    if len(out) == 2:
        return []
    return ["", "**Where the time goes** (rank 0's phases as a share of C's training time at the same seed, "
            "the mean over the seeds; the ranking forward is the separate pass's no-grad forward of every "
            "sample seen)", ""] + out


def stage2(runs):
    out = [f"| point | what | seeds (of {len(STAGE2_SEEDS)}) | kept fraction | test top-1, mean | "
           "test top-1 − C (points) | 95 % interval | McNemar p per seed | training time against C |",
           "|---|---|---|---:|---:|---:|---|---|---|"]
    for p, what, seeds, rows, means, apart in stage2_rows(runs):
        if seeds is None:
            out.append(f"| {p} | {what} | 0 | | | | | | not run yet |")
            continue
        mine = [runs[p][s] for s in seeds]
        kept = sum(r["kept_fraction"] for r in mine) / len(mine)
        top1 = sum(r["final"] for r in mine) / len(mine)
        m, ci = means["top1"]
        out.append(f"| {p} | {what} | {len(seeds)} | {kept:.2f} | {top1:.4f} | {lift_stats.pts(m)} | "
                   f"{lift_stats.interval(ci, lift_stats.pts)} | {mcnemar(rows)} | {fmt_time(means, apart)} |")
    c = runs.get("C", {})
    cs = [c[s] for s in STAGE2_SEEDS if s in c]
    out += ["", "C (no sifting): " + ("not run yet." if not cs else ", ".join(
        f"seed {r['name'][-2:]}: test top-1 {r['final']:.4f} in {r['train_seconds'] / 60:.1f} min" for r in cs) + ".")]
    out += pace_lines(runs)
    out += profile(runs)
    choice = chosen_point(runs)
    done = sum(1 for p, _ in POINTS for s in STAGE2_SEEDS if s in runs.get(p, {})) + len(cs)
    total = (len(POINTS) + 1) * len(STAGE2_SEEDS)
    out += ["", f"Stage 2 has {done} of its {total} runs. The point it chooses: " +
            ("none until every point has run at both seeds, its times paired with C's." if choice is None else
             f"{choice[1]}**{choice[0]}**.")]
    return out


def stage3(runs):
    choice = chosen_point(runs)
    if choice is None:
        return ["Stage 3 (the chosen point and FSb0.5 at seeds 11-14, beside C and E): not begun, it waits for stage 2."]
    out = [f"| point | seeds (of {len(STAGE3_SEEDS)}) | test top-1 − C (points) | 95 % interval | McNemar p per seed | "
           "training time against C | target: ≤ −30 % time, interval above −0.5 points |", "|---|---|---:|---|---|---|---|"]
    for p in sorted({choice[0], OWN_POINT}, key=[q for q, _ in POINTS].index) + ["E"]:
        got = against_c(runs, p, STAGE3_SEEDS)
        if got is None:
            out.append(f"| {p} | 0 | | | | | not run yet |")
            continue
        seeds, rows, means, apart = got
        (m, ci), (t, _) = means["top1"], means["time"]
        if p == "E":
            verdict = "reported (the student alone, 64 epochs; the rule runs it at the new seeds only)"
        elif len(seeds) < len(STAGE3_SEEDS):
            verdict = f"pending ({len(seeds)} of {len(STAGE3_SEEDS)} seeds)"
        elif apart:
            verdict = "not decidable (its times are not comparable)"
        else:
            verdict = "**met**" if t <= TARGET_TIME and ci[0] >= TARGET_TOP1 else "**missed**"
        out.append(f"| {p} | {len(seeds)} | {lift_stats.pts(m)} | {lift_stats.interval(ci, lift_stats.pts)} | "
                   f"{mcnemar(rows)} | {fmt_time(means, apart)} | {verdict} |")
    return out


def answer_lines(runs):
    """The top README's one line on sifting, from the tables."""
    choice = chosen_point(runs)
    if choice is None:
        done = sum(1 for p in ["C"] + [q for q, _ in POINTS] for s in STAGE2_SEEDS if s in runs.get(p, {}))
        return [f"- Not answered yet: the pre-registered frontier (9 points × 2 seeds, then "
                f"4 seeds) is in its stage 2, {done} of {(len(POINTS) + 1) * len(STAGE2_SEEDS)} runs kept."]
    got = against_c(runs, choice[0], STAGE3_SEEDS)
    if got is None or len(got[0]) < len(STAGE3_SEEDS) or got[3]:
        return [f"- Not answered yet: stage 2 chose {choice[0]}; stage 3 (four seeds) is running."]
    _, _, means, _ = got
    (m, ci), (t, cit) = means["top1"], means["time"]
    met = t <= TARGET_TIME and ci[0] >= TARGET_TOP1
    return [f"- **{'Yes' if met else 'Not at the target'}**: its best point, {choice[0]}, "
            f"changes test top-1 by {lift_stats.pts(m)} points (95 % {lift_stats.interval(ci, lift_stats.pts)}) "
            f"for {lift_stats.percent(t)} training time (95 % {lift_stats.interval(cit, lift_stats.percent)}) "
            "against distillation without sifting, four seeds (the target: −30 % at ≥ −0.5 points)."]


def block(runs):
    delay, _ = chosen_delay(runs)
    check_recipes(runs, delay)
    out = [BEGIN, "", "**Stage 1, the delay** (scope \"sample\", separate pass, β 1, seed 11)", ""] + stage1(runs)
    out += ["", f"**Stage 2, the grid** (seeds {', '.join(STAGE2_SEEDS)}; each point against C of its seed; "
            "final test top-1; training time without evaluation)", ""] + stage2(runs)
    out += ["", "**Stage 3, the answer** (four seeds)", ""] + stage3(runs)
    hosts = {}
    for by_seed in runs.values():
        for s, r in by_seed.items():
            hosts.setdefault(s, set()).add(r["where"])
    if hosts:
        out += ["", "Where each seed ran: " + "; ".join(f"{s}: {' / '.join(sorted(hosts[s]))}" for s in sorted(hosts)) + "."]
    return "\n".join(out + ["", END]) + "\n"


def answer_block(runs):
    return "\n".join([ANSWER_BEGIN, ""] + answer_lines(runs) + ["", ANSWER_END]) + "\n"


def plot(runs, path):
    """Test top-1 change against training time change, each point against C of its seed (stage 2's
    seeds; stage 3's where they all ran), C at the origin, the target's corner shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.fill_between([-70, 100 * TARGET_TIME], 100 * TARGET_TOP1, 1.0, color="tab:green", alpha=0.12,
                    label="target: ≤ −30 % time, ≥ −0.5 points")
    colours = {"S": "tab:blue", "I": "tab:orange", "T": "tab:purple"}
    marks = {"0.5": "o", "1": "s", "2": "^"}
    for p, _, seeds, _, means, apart in stage2_rows(runs):
        if seeds is None or apart:
            continue
        (m, ci), (t, cit) = means["top1"], means["time"]
        err = ([[100 * (m - ci[0])], [100 * (ci[1] - m)]] if ci else None)
        xerr = ([[100 * (t - cit[0])], [100 * (cit[1] - t)]] if cit else None)
        ax.errorbar(100 * t, 100 * m, yerr=err, xerr=xerr, fmt=marks[p.split("b")[1]], color=colours[p[1]],
                    mfc="none" if len(seeds) < len(STAGE2_SEEDS) else colours[p[1]], capsize=2,
                    label=f"{p} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
    cs = [runs["C"][s]["final"] for s in STAGE2_SEEDS if s in runs.get("C", {})]
    if cs:
        m, ci = lift_stats.paired_ci(cs)
        what = f"C: test top-1 {m:.4f}" + (f", 95 % [{ci[0]:.4f}, {ci[1]:.4f}] over seeds" if ci else " (one seed)")
        ax.plot([0], [0], "k*", markersize=12, label=what)
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(0, color="k", lw=0.5)
    ax.set_xlabel("training time against C (%)")
    ax.set_ylabel("test top-1 − C (points)")
    ax.set_title("Sifting's frontier, Fashion-MNIST (hollow: one seed so far)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"frontier_table.py: drew {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--readme", default=os.path.join(HERE, "README.md"))
    ap.add_argument("--summary", default=os.path.join(ROOT, "README.md"), help="'' for none")
    ap.add_argument("--plot", default=os.path.join(HERE, "frontier.png"), help="drawn by --write ('' for none)")
    ap.add_argument("--print", choices=("points", "stage2-seeds", "stage3-seeds", "stage3-new-seeds", "delay"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    a = ap.parse_args()
    try:
        if a.print in ("points", "stage2-seeds", "stage3-seeds", "stage3-new-seeds"):
            print(" ".join({"points": [p for p, _ in POINTS], "stage2-seeds": STAGE2_SEEDS,
                            "stage3-seeds": STAGE3_SEEDS,
                            "stage3-new-seeds": [s for s in STAGE3_SEEDS if s not in STAGE2_SEEDS]}[a.print]))
            return 0
        runs = load(a.results)
        if a.print == "delay":
            delay, val = chosen_delay(runs)
            if delay is None:
                print(f"frontier_table.py: stage 1 has {len(val)} of its {len(DELAYS)} runs under {a.results}",
                      file=sys.stderr)
                return 2
            print(f"frontier: validation top-1 by delay: " + ", ".join(f"{d}: {v:.4f}" for d, v in val.items())
                  + f"; the rule chooses DELAY={delay}")
            return 0
        new = block(runs)
        if not (a.check or a.write):
            print(new, end="")
            return 0
        rc = compare_table.check_or_write(a.readme, BEGIN, END, new, a.write, TOOL)
        if a.summary:
            rc = max(rc, compare_table.check_or_write(a.summary, ANSWER_BEGIN, ANSWER_END, answer_block(runs),
                                                      a.write, TOOL))
        if a.write and a.plot:
            plot(runs, a.plot)
        return rc
    except lift_stats.InputError as e:
        print(f"frontier_table.py: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"frontier_table.py: a kept file under {a.results} lacks a field or has one of the wrong type "
              f"({type(e).__name__}: {e}); was it kept by experiments/distillation/keep_run.py?", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
