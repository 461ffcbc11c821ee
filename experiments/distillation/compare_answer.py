"""The answer to "Does distillation pay?" in sentences, every figure from the kept runs.

experiments/distillation/compare_table.py writes these sentences into the comparison's generated blocks
(experiments/distillation/README.md and the top README's short answer), so that a figure
changed in the prose by hand fails its --check like a figure changed in a table.
"""
import lift_stats

# The arms the answer needs at every seed before it is given.
NEEDED = ("A", "C", "Cs", "D", "E", "S")


def _seeds(runs, x, y, seeds):
    return [s for s in seeds if s in runs.get(x, {}) and s in runs.get(y, {})]


def _top1(runs, x, y, seeds):
    """Mean paired test top-1 difference X - Y (points, formatted) and its 95 % interval."""
    _, means = lift_stats.paired(runs[x], runs[y], _seeds(runs, x, y, seeds))
    m, ci = means["top1"]
    return m, ci, f"{lift_stats.pts(m)} points (95 % {lift_stats.interval(ci, lift_stats.pts)})"


def _time_by_host(runs, x, y, seeds):
    """X's training time against Y's, per group of seeds whose X and Y ran on one machine with one
    precision: [(seeds, mean change)], the groups in seed order (a seed whose X and Y ran apart is left out)."""
    groups = {}
    for s in _seeds(runs, x, y, seeds):
        if runs[x][s]["machine"] != runs[y][s]["machine"]:
            continue
        change = runs[x][s]["train_seconds"] / runs[y][s]["train_seconds"] - 1
        groups.setdefault(runs[x][s]["machine"], []).append((s, change))
    out = [([s for s, _ in g], sum(c for _, c in g) / len(g)) for g in groups.values()]
    return sorted(out, key=lambda t: t[0][0])


def _seed_list(seeds):
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(seeds)


def _times(groups):
    return "; ".join(f"{lift_stats.percent(c)} at {_seed_list(s)}" for s, c in groups)


def answer(runs, seeds, equal_time_from, teacher_minutes):
    """The answer's bullet lines. `equal_time_from`: the fraction of A's schedule from which C is ahead of
    A at equal training time (None: never); `teacher_minutes`: {name: minutes} of the teachers' own
    training (the convnet's, the chosen ViT's)."""
    missing = [a for a in NEEDED if len(runs.get(a, {})) < len(seeds)]
    if missing:
        return [f"The answer waits for every seed of arms {', '.join(missing)}."]
    ca, ca_ci, ca_text = _top1(runs, "C", "A", seeds)
    da, da_ci, da_text = _top1(runs, "D", "A", seeds)
    _, _, csa_text = _top1(runs, "Cs", "A", seeds)
    ce, ce_ci, ce_text = _top1(runs, "C", "E", seeds)
    sc, sc_ci, sc_text = _top1(runs, "S", "C", seeds)
    cse = [runs["Cs"][s]["final"] - runs["E"][s]["final"] for s in seeds]
    lifts = ca_ci is not None and ca_ci[0] > 0 and da_ci is not None and da_ci[0] > 0
    early = equal_time_from is not None and equal_time_from <= 1 / 3
    ahead = ("never, within A's schedule" if equal_time_from is None
             else f"from {equal_time_from:.2f} of A's schedule on")
    e_beats_c = ce_ci is not None and ce_ci[1] < 0
    e_min = sorted(runs["E"][s]["train_seconds"] / 60 for s in seeds)
    teachers = ", ".join(f"{name}'s {m:.0f} min" for name, m in teacher_minutes.items())
    first = ("**Given a teacher, at equal epochs (32), distillation lifts the student**" if lifts else
             "**Given a teacher, at equal epochs (32), the lift is not clear**")
    target = "meeting the +1.0 target" if ca >= 0.010 and ca_ci is not None and ca_ci[0] > 0 else "short of the +1.0 target"
    cs_e = ("comes level with Cs" if min(cse) < 0 < max(cse) else
            "stays ahead of Cs" if max(cse) < 0 else "stays behind Cs")
    return [
        f"- {first}: hard distillation through DeiT's token from the convnet teacher (C) by {ca_text} "
        f"over the student alone (A), {target}; from the ViT teacher (D) by {da_text}. "
        f"The soft loss (Cs, reported, deciding nothing) gave {csa_text}.",
        f"- **At equal training time it pays {'early' if early else 'late'}**: the live teacher makes C's training "
        f"longer than A's ({_times(_time_by_host(runs, 'C', 'A', seeds))}, each group of seeds on one machine), "
        f"and C is ahead of A at equal training time {ahead} (the target was from 0.33).",
        f"- **Counting the teacher's training, {'no' if e_beats_c else 'not clearly'}**: the student alone for 64 "
        f"epochs (E) {'beats' if e_beats_c else 'is not clearly ahead of'} C, C − E {ce_text}, and {cs_e} "
        f"(Cs − E from {lift_stats.pts(min(cse))} to {lift_stats.pts(max(cse))} points per seed), in {e_min[0]:.0f} to "
        f"{e_min[-1]:.0f} minutes of training per seed, against the teachers' own ({teachers}).",
        f"- **Sifting** (S: C with scope \"sample\", beta 2) costs {sc_text} against C; its time against C's: "
        f"{_times(_time_by_host(runs, 'S', 'C', seeds)) or 'not compared (never on one machine)'}.",
    ]
