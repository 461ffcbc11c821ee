#!/usr/bin/env python3
"""analysis/profile_ops.py on hand-written Chrome traces whose table is known.

    python3 tests/analysis/test_profile_ops.py SRC_DIR WORK_DIR

Thread 1 of the trace runs two steps (vitkd::step, 0-100 and 100-160 us):

    step 1 [0, 100]:  A [0, 90] holding B [10, 40] (holding C [20, 30]) and
                      D [50, 70]; A again [90, 100] alone
    step 2 [100, 160]: D [110, 150] holding C [120, 125] and C [130, 140]

thread 2 has A [0, 50] (not nested in thread 1's events), and thread 3 has
B [0, 10] with a D [5, 15] that reaches past B's end (timestamps rounded in a
trace): it is B's child up to B's end. The self times (a duration less its
direct children's): A (90-30-20) + 10 + 50, B (30-10) + (10-5),
C 10+5+10, D 20 + (40-15) + 10, the steps 0 and 60-40; they sum to the
threads' busy time, 160 + 50 + 15 us. Also: the same events as
torch.profiler writes them ({"traceEvents": [...]}, with metadata and
instant events and the profiler's own "Trace" span, which are not calls),
--steps overriding the step events, --top, and exit 2 on a file that is not
a trace. Exits 1 if a check fails.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

SRC, WORK = sys.argv[1], sys.argv[2]
SCRIPT = os.path.join(SRC, "analysis", "profile_ops.py")
os.makedirs(WORK, exist_ok=True)


def x(name, ts, dur, tid=1):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": "CPU Functions", "tid": tid, "args": {}}


EVENTS = [x("vitkd::step", 0, 100), x("A", 0, 90), x("B", 10, 30), x("C", 20, 10), x("D", 50, 20),
          x("A", 90, 10), x("vitkd::step", 100, 60), x("D", 110, 40), x("C", 120, 5), x("C", 130, 10),
          x("A", 0, 50, tid=2), x("B", 0, 10, tid=3), x("D", 5, 10, tid=3)]
# By hand (us): self = duration - direct children.
SELF = {"A": (90 - 30 - 20) + 10 + 50, "B": (30 - 10) + (10 - 5), "C": 10 + 5 + 10, "D": 20 + (40 - 15) + 10,
        "vitkd::step": (100 - 90 - 10) + (60 - 40)}
TOTAL = {"A": 150, "B": 40, "C": 25, "D": 70, "vitkd::step": 160}
CALLS = {"A": 3, "B": 2, "C": 3, "D": 3, "vitkd::step": 2}


def run(trace, *args):
    path = os.path.join(WORK, trace[0])
    with open(path, "w") as f:
        json.dump(trace[1], f)
    out = os.path.join(WORK, trace[0] + ".out.json")
    p = subprocess.run([sys.executable, SCRIPT, path, "--json", out, *args], capture_output=True, text=True)
    return p, (json.load(open(out)) if p.returncode == 0 else None)


def check_table(r, label, steps):
    ops = {o["name"]: o for o in r["operators"]}
    for name in SELF:
        o = ops.get(name, {})
        check(o.get("calls") == CALLS[name], f"{label}: {name} calls {o.get('calls')} == {CALLS[name]}")
        check(abs(o.get("total_ms", -1) - TOTAL[name] / 1e3) < 1e-9,
              f"{label}: {name} total {o.get('total_ms')} ms == {TOTAL[name] / 1e3}")
        check(abs(o.get("self_ms", -1) - SELF[name] / 1e3) < 1e-9,
              f"{label}: {name} self {o.get('self_ms')} ms == {SELF[name] / 1e3}")
        check(abs(o.get("self_ms_per_step", -1) - SELF[name] / 1e3 / steps) < 1e-9,
              f"{label}: {name} self per step over {steps} step(s)")
    check(set(ops) == set(SELF), f"{label}: the operators are {sorted(ops)}")
    check(r["steps"] == steps, f"{label}: {r['steps']} steps == {steps}")
    check(abs(r["wall_ms"] - 0.160) < 1e-9, f"{label}: profiled {r['wall_ms']} ms == 0.160 (first start to last end)")
    # Every microsecond of each thread is one event's self time, once.
    check(abs(r["self_ms_total"] - (160 + 50 + 15) / 1e3) < 1e-9,
          f"{label}: the self times sum to {r['self_ms_total']} ms == the threads' busy time 0.225")
    names = [o["name"] for o in r["operators"]]
    check(names == ["A", "D", "B", "C", "vitkd::step"], f"{label}: sorted by self time, then name: {names}")
    a = ops["A"]
    check(abs(a["self_pct"] - 100 * SELF["A"] / 160) < 1e-9, f"{label}: A's self % {a['self_pct']:.2f}")


legacy = ("legacy.json", EVENTS)
p, r = run(legacy)
check(p.returncode == 0, f"a vitkd (legacy profiler) trace: exit {p.returncode} {p.stderr.strip()}")
if r:
    check_table(r, "legacy", 2)
    check(r["steps_from"] == "step events", "the steps come from the vitkd::step events")
    check("A" in p.stdout and "self ms" in p.stdout, "the table is printed")

kineto = ("kineto.json", {"schemaVersion": 1, "traceEvents": [
    {"name": "process_name", "ph": "M", "pid": "CPU Functions", "args": {"name": "python"}},
    {"name": "mark", "ph": "i", "ts": 5, "pid": "CPU Functions", "tid": 1, "s": "t"},
    {"name": "PyTorch Profiler (0)", "ph": "X", "cat": "Trace", "ts": 0, "dur": 160, "pid": "Spans", "tid": 0}]
    + [dict(e, cat="cpu_op") for e in EVENTS]})
p, r = run(kineto, "--steps", "4", "--top", "2")
check(p.returncode == 0, f"a torch.profiler trace: exit {p.returncode} {p.stderr.strip()}")
if r:
    check_table(r, "torch.profiler --steps 4", 4)
    check(r["steps_from"] == "--steps", "--steps overrides the step events")
    rows = [l for l in p.stdout.splitlines()[2:] if not l.startswith("(")]
    check(len(rows) == 2, f"--top 2 prints 2 rows, got {len(rows)}")

# --within B: B's two calls and what they hold on their own thread (C inside thread 1's B; thread 3's
# D reaches past its B's end, so it is not inside), self times as in the whole table, the span the
# whole trace's.
p, r = run(legacy, "--within", "B")
check(p.returncode == 0, f"--within B: exit {p.returncode} {p.stderr.strip()}")
if r:
    ops = {o["name"]: o for o in r["operators"]}
    check(set(ops) == {"B", "C"} and ops["C"]["calls"] == 1 and abs(ops["C"]["self_ms"] - 0.010) < 1e-9
          and ops["B"]["calls"] == 2 and abs(ops["B"]["self_ms"] - (20 + 10) / 1e3) < 1e-9,
          f"--within B: B (2 calls, 30 us self) and the C inside it (got {sorted(ops)})")
    check(abs(r["wall_ms"] - 0.160) < 1e-9 and r["within"] == "B", "--within: the whole trace's span")
p = subprocess.run([sys.executable, SCRIPT, os.path.join(WORK, "legacy.json"), "--within", "Z"], capture_output=True, text=True)
check(p.returncode == 2 and "no event named Z" in p.stderr, f"--within a name not in the trace: exit 2 ({p.stderr.strip()})")

for bad, content in (("not_json.json", "[{"), ("no_events.json", {"traceEvents": [{"ph": "M"}]}),
                     ("scalar.json", 3)):
    path = os.path.join(WORK, bad)
    with open(path, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    p = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
    check(p.returncode == 2 and "profile_ops.py: error:" in p.stderr and "Traceback" not in p.stderr,
          f"{bad}: exit {p.returncode}, one line: {p.stderr.strip()}")

finish()
