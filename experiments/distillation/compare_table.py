#!/usr/bin/env python3
"""The answer to "Does distillation pay?", generated from the kept runs of the comparison.

    /usr/bin/python3 experiments/distillation/compare_table.py [--results results] [--readme experiments/distillation/README.md]
                                               [--summary README.md] [--check | --write]
    /usr/bin/python3 experiments/distillation/compare_table.py --print seeds|arms|vit-candidates

Reads what experiments/distillation/compare.sh and experiments/distillation/teacher_vit.sh keep (experiments/distillation/keep_run.py):
experiments/distillation/results/compare/<ARM>-s<SEED>/ (result.json,
test_predictions.json, timing-summary.json), results/compare/teacher-cnn.json
(the convnet teacher) and results/teacher-vit/<V>/ (the ViT teacher's candidates), and writes the
tables of the pre-registered comparison (experiments/learning-log.md, 2026-12-02 and
its amendments): the teachers, each arm over the seeds run, and each
comparison against its target, decided before the runs. A comparison is
judged only once every seed of SEEDS has run both its arms; before that its
figures over the seeds run so far are shown as "pending". Paired differences,
intervals, McNemar's test and the equal-time read-out use experiments/distillation/lift.py's
functions (one rule for both).

Without --check or --write, prints the block. --write replaces the block
between the markers (BEGIN and END below) of the experiment's page
(experiments/distillation/README.md), and the short answer between
ANSWER_BEGIN and ANSWER_END of the top README; --check exits 1 with one line
when either differs from what the files give (the test
analysis.readme_comparison_is_generated_from_results runs it), 0 when equal.
Every figure of the answer's sentences comes from the files too
(experiments/distillation/compare_answer.py), so a figure edited by hand fails the check.
--print gives the comparison's seeds, arms or the ViT teacher's candidates,
one line, for experiments/distillation/compare.sh and experiments/distillation/teacher_vit.sh (their one source).

Exit status: 0; 1 for --check with a difference; 2 with one line for a
missing marker or a malformed kept file.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lift  # noqa: E402  (the runs and their comparability)
import lift_stats  # noqa: E402  (paired differences, intervals, McNemar, the equal-time rule)
import compare_answer  # noqa: E402  (the answer's sentences)

SEEDS = ("11", "12", "13", "14")
# The arms in experiments/distillation/compare.sh's order, with what each is (experiments/learning-log.md's table).
ARMS = (("A", "student alone, 32 epochs"),
        ("B", "A with label smoothing 0.1"),
        ("C", "distilled from the convnet teacher, DeiT hard distillation token, 32 epochs"),
        ("Cs", "C with the soft loss (tau 4, alpha 0.5)"),
        ("S", "C with sifting (scope \"sample\", beta 2)"),
        ("D", "distilled (hard, token) from the chosen ViT teacher, 32 epochs"),
        ("E", "student alone, 64 epochs"))
# The ViT teacher's candidates (experiments/distillation/teacher_vit.sh), in the order they run.
VIT_CANDIDATES = (("V2", "ViT dim 128, depth 6, 4 heads"), ("V1", "ViT dim 192, depth 6, 3 heads"))
BEGIN = "<!-- BEGIN experiments/distillation/compare_table.py: generated from results/; edit the files, not this block -->"
END = "<!-- END experiments/distillation/compare_table.py -->"
# The short answer in the top README (the same sentences, no tables).
ANSWER_BEGIN = "<!-- BEGIN experiments/distillation/compare_table.py answer: generated from results/; edit the files, not this block -->"
ANSWER_END = "<!-- END experiments/distillation/compare_table.py answer -->"


def fmt_pts(x):
    return lift_stats.pts(x)


def convnet_teacher(results):
    """(path, record) of the kept convnet teacher (experiments/distillation/teacher_cnn.py's JSON); record None when not kept."""
    path = os.path.join(results, "compare", "teacher-cnn.json")
    return path, (load_json(path) if os.path.exists(path) else None)


def teachers(results, cnn):
    """The teachers' table: the convnet and the ViT candidates, validation and test top-1."""
    out = ["| teacher | parameters | epochs | validation top-1 | test top-1 (read once) | its training, as measured "
           "(median epoch) | where | kept in |",
           "|---|---|---|---|---|---|---|---|"]
    cnn, t = cnn
    if t is not None:
        out.append(f"| convnet, `experiments/distillation/teacher_cnn.py` | {t['parameters']:,} | {t['epochs']} | {t['val_top1']:.4f} "
                   f"| {t['test_top1']:.4f} | {cost(sum(t['epoch_seconds']), t['epoch_seconds'])} "
                   f"| PyTorch {t.get('torch', '?')}, {t.get('threads', '?')} threads, {t.get('cpu', t.get('machine', '?'))} "
                   f"| `{rel(cnn, results)}` |")
    else:
        out.append("| convnet, `experiments/distillation/teacher_cnn.py` | | | not trained yet | | | | |")
    kept = vit_candidates(results)
    for name, what in VIT_CANDIDATES:
        if name not in kept:
            out.append(f"| ViT candidate {name} ({what}), `experiments/distillation/teacher_vit.sh` | | | not finished yet | | | | |")
            continue
        path, r, val = kept[name]
        out.append(f"| ViT candidate {name} ({what}), `experiments/distillation/teacher_vit.sh` | {r['parameters']:,} | {r['epochs']} "
                   f"| {val:.4f} | {r['test_top1']:.4f} "
                   f"| {cost(r['evaluations'][-1]['train_seconds'], r.get('epoch_seconds', []))} "
                   f"| {where(r, os.path.dirname(path))} | `{rel(os.path.dirname(path), results)}` |")
    out.append("")
    best = vit_choice(kept)
    if best is not None:
        out.append(f"Arm D's teacher: **{best}**, the higher final validation top-1 (the rule's choice).")
    else:
        out.append("Arm D's teacher: not chosen yet (the choice waits for every candidate: " +
                   ", ".join(n for n, _ in VIT_CANDIDATES if n not in kept) + " missing).")
    return out


def vit_candidates(results):
    """The kept ViT candidates: {name: (path of result.json, record, final validation top-1)}."""
    kept = {}
    for name, _ in VIT_CANDIDATES:
        path = os.path.join(results, "teacher-vit", name, "result.json")
        if os.path.exists(path):
            r = load_json(path)
            kept[name] = (path, r, final_val(r, path))
    return kept


def vit_choice(kept):
    """Arm D's teacher, the rule's choice: the candidate of higher final validation top-1, once every
    candidate is kept; None before."""
    return max(kept, key=lambda n: kept[n][2]) if len(kept) == len(VIT_CANDIDATES) else None


def cost(seconds, epoch_seconds):
    """A teacher's training time (min) and its median epoch (s): the second shows a shared machine."""
    median = sorted(epoch_seconds)[len(epoch_seconds) // 2] if epoch_seconds else None
    return f"{seconds / 60:.0f} min" + ("" if median is None else f" ({median:.0f} s)")


def timing_summary(folder):
    """The kept timing summary (experiments/distillation/keep_run.py: median step, CPU), {} when absent."""
    summary = os.path.join(folder, lift_stats.KEPT_TIMING)
    return load_json(summary) if os.path.exists(summary) else {}


def machine(r, folder):
    """A vitkd run's ranks, precision, LibTorch and CPU (result.json and the kept timing summary):
    what must be equal for two runs' times to be compared."""
    cpu = timing_summary(folder).get("cpu", "?")
    return f"{r.get('world_size', '?')} ranks, {r.get('compute', '?')}, LibTorch {r.get('libtorch', '?')}, {cpu}"


def where(r, folder):
    """machine(), with the vitkd version and the day the run finished (result.json since 2026-12-03)."""
    day = r.get("finished_utc", "")[:10]
    return (f"vitkd {r['vitkd_version']}" + (f", {day}" if day else "") + ", "
            if "vitkd_version" in r else "") + machine(r, folder)


def final_val(r, path):
    vals = [e["val_top1"] for e in r.get("evaluations", []) if "val_top1" in e]
    if not vals:
        raise lift_stats.InputError(f"{path}: no validation evaluations")
    return float(vals[-1])


def load_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        raise lift_stats.InputError(f"{path}: {e}")


def rel(path, results):
    return os.path.join("results", os.path.relpath(path, results))


def load_arms(results):
    """{arm: {seed: run}} for every kept run of the comparison, and each seed's CPU."""
    runs, cpus = {}, {}
    for arm, _ in ARMS:
        for s in SEEDS:
            d = os.path.join(results, "compare", f"{arm}-s{s}")
            if os.path.exists(os.path.join(d, "result.json")):
                r = runs.setdefault(arm, {})[s] = lift.load_run(d)
                result = load_json(os.path.join(d, "result.json"))
                r["machine"] = machine(result, d)
                r["median_step_ms"] = timing_summary(d).get("median_step_ms")
                cpus.setdefault(s, set()).add(where(result, d))
    return runs, cpus


def arms_table(runs):
    # Times per seed, not a mean over seeds: seeds may run on machines of different speed (seed 11 in
    # fp32 on an AVX2-only CPU, others in bf16). The median step per seed shows a machine whose speed
    # drifted between runs of the same work.
    out = [f"| arm | what | seeds run (of {len(SEEDS)}) | test top-1, mean | training time per seed (min) "
           "| median step per seed (ms) |",
           "|---|---|---|---|---|---|"]
    for arm, what in ARMS:
        rs = list(runs.get(arm, {}).values())
        if rs:
            top1 = sum(r["final"] for r in rs) / len(rs)
            per_seed = sorted(runs[arm].items())
            minutes = ", ".join(f"{s}: {r['train_seconds'] / 60:.1f}" for s, r in per_seed)
            steps = ", ".join(f"{s}: " + ("?" if r["median_step_ms"] is None else f"{r['median_step_ms']:.0f}")
                              for s, r in per_seed)
            out.append(f"| {arm} | {what} | {len(rs)} | {top1:.4f} | {minutes} | {steps} |")
        else:
            out.append(f"| {arm} | {what} | 0 | not run yet | | |")
    return out


# The comparisons decided before the runs (experiments/learning-log.md): X, Y, target text, test on
# (mean top-1 difference, its interval, mean time change, its interval) -> met or not; None: reported only.
COMPARISONS = (
    ("C", "A", "≥ +1.0 point, interval above 0", lambda m, ci, t, cit: m >= 0.010 and ci is not None and ci[0] > 0),
    ("C", "B", "> 0", lambda m, ci, t, cit: m > 0),
    ("C", "E", "≥ 0 (32 epochs against 64)", lambda m, ci, t, cit: m >= 0),
    ("D", "A", "> 0, interval reported", lambda m, ci, t, cit: m > 0),
    ("S", "C", "time ≤ −30 %, top-1 ≥ −0.5 points", lambda m, ci, t, cit: t <= -0.30 and m >= -0.005),
    ("Cs", "A", "reported, decides nothing", None),
)


def comparisons_table(runs):
    out = ["| comparison | target | seeds | test top-1, mean paired difference (points) | 95 % interval | "
           "McNemar p per seed | training time, mean change | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for x, y, target, test in COMPARISONS:
        seeds = [s for s in SEEDS if s in runs.get(x, {}) and s in runs.get(y, {})]
        name = f"{x} − {y}"
        if not seeds:
            out.append(f"| {name} | {target} | 0 of {len(SEEDS)} | | | | | not run yet |")
            continue
        # Both arms' runs: one recipe but for the arms' own keys, one precision within each seed
        # (E's runs apart only for their epochs).
        xs, ys = [runs[x][s] for s in seeds], [runs[y][s] for s in seeds]
        lift.check_comparable({f"arm {x}": xs, f"arm {y}": ys} if y == "E" else {f"arms {x} and {y}": xs + ys})
        rows, means = lift_stats.paired(runs[x], runs[y], seeds)
        (m, ci), (t, cit) = means["top1"], means["time"]
        mcn = ", ".join("-" if r[5] is None else f"{r[5][2]:.2g}" for r in rows)
        apart = time_apart(runs, x, y, seeds)
        time = (f"not compared: {apart}" if apart else
                f"{lift_stats.percent(t)}, 95 % {lift_stats.interval(cit, lift_stats.percent)}")
        if len(seeds) < len(SEEDS):
            verdict = f"pending ({len(seeds)} of {len(SEEDS)} seeds)"
        elif apart and x == "S":
            # The target needs both parts: a top-1 part missed at every seed decides it without the time.
            verdict = ("**missed** (top-1; its time is not comparable)" if m < -0.005 else
                       "not decidable (its time is not comparable)")
        else:
            verdict = "reported" if test is None else ("**met**" if test(m, ci, t, cit) else "**missed**")
        out.append(f"| {name} | {target} | {len(seeds)} of {len(SEEDS)} | {fmt_pts(m)} | "
                   f"{lift_stats.interval(ci, fmt_pts)} | {mcn} | {time} | {verdict} |")
    return out


def time_apart(runs, x, y, seeds):
    """Why the paired times of X and Y cannot be compared (their runs of a seed on different
    machines: the rule runs a seed's arms in one session on one machine), or None. D's times are
    never compared: D may run in a later session, on another host (the amendment of 2026-12-03)."""
    if "D" in (x, y):
        return "D may run in another session than its seed's other arms"
    for s in seeds:
        if runs[x][s]["machine"] != runs[y][s]["machine"]:
            return f"seed {s}'s {x} and {y} ran on different machines"
    return None


def equal_time_start(runs):
    """(seeds, the fraction of A's schedule from which C is ahead of A to the end or None, each seed's A
    time) for C against A at equal training time; None when not comparable or not run."""
    seeds = [s for s in SEEDS if s in runs.get("C", {}) and s in runs.get("A", {})]
    if not seeds or time_apart(runs, "C", "A", seeds):
        return None

    def in_fractions(r, base):
        return {**r, "evals": [(t / base, v, e) for t, v, e in r["evals"]]}
    base = {s: runs["A"][s]["train_seconds"] for s in seeds}
    c = [in_fractions(runs["C"][s], base[s]) for s in seeds]
    a = [in_fractions(runs["A"][s], base[s]) for s in seeds]
    return seeds, lift_stats.ahead_from(c, a, 0.0), base


def equal_time(runs):
    """C against A at equal training time (validation curves, the live teacher's passes counted):
    from which point on C's mean is at or above A's to the end, against the first third of A's
    schedule (the target). Each seed's C and A ran on one machine, but seeds on machines of
    different speed (seed 11 in fp32 on an AVX2-only CPU, others in bf16): so each seed's times are
    divided by its A's training time, and the curves are pooled over fractions of A's schedule
    (the amendment of 2026-12-04 in experiments/learning-log.md). Within a seed, equal fractions are
    equal seconds."""
    seeds = [s for s in SEEDS if s in runs.get("C", {}) and s in runs.get("A", {})]
    if not seeds:
        return "Equal training time (C against A, validation top-1, from the first third of A's schedule on): not run yet."
    apart = time_apart(runs, "C", "A", seeds)
    if apart:
        return f"Equal training time (C against A): not compared, {apart}."

    _, start, base = equal_time_start(runs)
    state = ("behind at the end" if start is None else f"ahead at every evaluation from {start:.2f} of A's "
             "schedule on (" + ", ".join(f"seed {s}: {start * base[s]:.0f} s" for s in seeds) + ")")
    verdict = ("pending" if len(seeds) < len(SEEDS) else
               "**met**" if start is not None and start <= 1 / 3 else "**missed**")
    return (f"Equal training time (C against A, mean validation top-1 against training time without evaluation, "
            f"the live teacher's passes counted, each seed's time as a fraction of its A's training time; "
            f"{len(seeds)} of {len(SEEDS)} seeds): C is {state}; the target: from 0.33 on: {verdict}.")


def counting_the_teacher(runs, cnn):
    """The student's training "counting the teacher's training", per seed (each seed's students on one
    machine): C's time plus the convnet teacher's own (as measured on its machine, once for every
    student), against A and E, the students alone."""
    if "C" not in runs or cnn[1] is None:
        return "Counting the teacher's training: not run yet."
    teacher = sum(cnn[1]["epoch_seconds"]) / 60
    return (f"Counting the teacher's training (the convnet's {teacher:.0f} min, as measured on its machine, charged "
            f"whole to one student; each seed's students on their own machine): "
            + with_teacher(runs, "C", teacher) + ".")


def with_teacher(runs, arm, teacher, every=None):
    """Per seed: ARM's training time plus TEACHER minutes (and EVERY, all candidates' minutes, when
    given), its test top-1, against A and E, the students alone."""
    parts = []
    for s, d in sorted(runs[arm].items()):
        own = d["train_seconds"] / 60
        also = "" if every is None else f"({own + every:.0f} with every candidate) "
        seed = [f"seed {s}: {arm} {own:.0f} + {teacher:.0f} = {own + teacher:.0f} min {also}"
                f"for test top-1 {d['final']:.4f}"]
        for alone in ("A", "E"):
            r = runs.get(alone, {}).get(s)
            if r is not None:
                seed.append(f"{alone} {r['train_seconds'] / 60:.0f} min for {r['final']:.4f}")
        parts.append(", ".join(seed))
    return "; ".join(parts)


def counting_the_vit_teacher(runs, results):
    """The same for arm D: D's time plus the chosen ViT teacher's training (as measured on its machine),
    and the candidates' training together, since the choice between them needed every one."""
    kept = vit_candidates(results)
    best = vit_choice(kept)
    if "D" not in runs or best is None:
        return "Counting the ViT teacher's training: not run yet."
    minutes = {n: r["evaluations"][-1]["train_seconds"] / 60 for n, (_, r, _) in kept.items()}
    chosen, every = minutes[best], sum(minutes.values())
    return (f"Counting the ViT teacher's training ({best}'s {chosen:.0f} min; {every:.0f} min for the "
            f"{len(kept)} candidates, since the choice needed each; as measured on their machine, charged whole "
            f"to one student; D's time at each seed on its own machine, which may differ from A's and E's): "
            + with_teacher(runs, "D", chosen, every) + ".")


def answer_lines(results, runs, cnn):
    """The answer's sentences (experiments/distillation/compare_answer.py) from the kept runs."""
    eq = equal_time_start(runs)
    minutes = {}
    if cnn[1] is not None:
        minutes["the convnet"] = sum(cnn[1]["epoch_seconds"]) / 60
    kept = vit_candidates(results)
    best = vit_choice(kept)
    if best is not None:
        minutes[best] = kept[best][1]["evaluations"][-1]["train_seconds"] / 60
    return compare_answer.answer(runs, list(SEEDS), eq[1] if eq else None, minutes)


def answer_block(results):
    runs, _ = load_arms(results)
    return "\n".join([ANSWER_BEGIN, ""] + answer_lines(results, runs, convnet_teacher(results)) + ["", ANSWER_END]) + "\n"


def block(results):
    runs, cpus = load_arms(results)
    cnn = convnet_teacher(results)
    out = [BEGIN, "", "**The answer**", ""] + answer_lines(results, runs, cnn)
    out += ["", "**Teachers**", ""] + teachers(results, cnn)
    out += ["", f"**Arms** (seeds {', '.join(SEEDS)}; final test top-1; training time without evaluation)", ""]
    out += arms_table(runs)
    out += ["", "**Comparisons**, decided before the runs "
            "([`learning-log.md`](../learning-log.md), 2026-12-02 and its amendments)", ""]
    out += comparisons_table(runs)
    out += ["", equal_time(runs), "", counting_the_teacher(runs, cnn), "", counting_the_vit_teacher(runs, results)]
    if cpus:
        out += ["", "Where each seed ran: " + "; ".join(f"{s}: {' / '.join(sorted(cpus[s]))}" for s in sorted(cpus)) + "."]
    out += ["", END]
    return "\n".join(out) + "\n"


def readme_parts(path, begin=BEGIN, end=END):
    try:
        text = open(path).read()
    except OSError as e:
        raise lift_stats.InputError(f"{path}: {e}")
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise lift_stats.InputError(f"{path}: no single block between '{begin}' and '{end}'")
    head, rest = text.split(begin, 1)
    current, tail = rest.split(end, 1)
    return head, begin + current + end + "\n", tail[1:] if tail.startswith("\n") else tail


def check_or_write(path, begin, end, new, write, tool="experiments/distillation/compare_table.py"):
    """--write: replaces the block of `path`; else 0 when it equals `new`, 1 with one line when not.
    `tool` names the script that generates the block (experiments/sifting/frontier_table.py uses it too)."""
    head, current, tail = readme_parts(path, begin, end)
    if write:
        with open(path + ".tmp", "w") as fh:
            fh.write(head + new + tail)
        os.replace(path + ".tmp", path)
        print(f"{os.path.basename(tool)}: wrote the block of {path}")
        return 0
    if current != new:
        old_lines, new_lines = current.splitlines(), new.splitlines()
        k = next((i for i, (o, n) in enumerate(zip(old_lines, new_lines)) if o != n), min(len(old_lines), len(new_lines)))
        print(f"{os.path.basename(tool)}: {path}'s block differs from the kept results at its line {k + 1} "
              f"({old_lines[k] if k < len(old_lines) else '(end)'!r}); regenerate it: "
              f"/usr/bin/python3 {tool} --write", file=sys.stderr)
        return 1
    return 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(root, "experiments", "distillation", "results"))
    ap.add_argument("--readme", default=os.path.join(root, "experiments", "distillation", "README.md"),
                    help="the experiment's page, which holds the whole block")
    ap.add_argument("--summary", default=os.path.join(root, "README.md"),
                    help="the page that holds the short answer ('' for none)")
    ap.add_argument("--print", choices=("seeds", "arms", "vit-candidates"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    a = ap.parse_args()
    if a.print:
        print(" ".join({"seeds": SEEDS, "arms": [x for x, _ in ARMS],
                        "vit-candidates": [x for x, _ in VIT_CANDIDATES]}[a.print]))
        return 0
    try:
        new = block(a.results)
        if not (a.check or a.write):
            print(new, end="")
            return 0
        rc = check_or_write(a.readme, BEGIN, END, new, a.write)
        if a.summary:
            rc = max(rc, check_or_write(a.summary, ANSWER_BEGIN, ANSWER_END, answer_block(a.results), a.write))
        return rc
    except lift_stats.InputError as e:
        print(f"compare_table.py: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"compare_table.py: a kept file under {a.results} lacks a field or has one of the wrong type "
              f"({type(e).__name__}: {e}); was it written by experiments/distillation/keep_run.py or experiments/distillation/teacher_cnn.py?", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
