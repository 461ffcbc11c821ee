#!/usr/bin/env python3
"""Per-operator table of a Chrome trace: vitkd's train.profile_steps trace
(run.out_dir/profile-rank<R>.json, LibTorch's autograd profiler) or the trace
torch.profiler's export_chrome_trace writes (benchmarks/timm_step.py
--profile-out).

    python3 analysis/profile_ops.py TRACE.json [--top N] [--steps S] [--json OUT]

Every complete event ("ph": "X", but for torch.profiler's own "Trace" span)
is one call of its name. Per name: calls,
total ms (the events' durations), self ms (a duration less the time of the
events directly nested in it on the same thread, so that nothing is counted
twice), self % of the profiled time, and self ms and calls per step; sorted by
self time. The profiled time is the span of the trace's events, from the
first start to the last end. The steps are the events named vitkd::step
(vitkd), timm::step (timm_step.py) or ProfilerStep#N (torch.profiler's
step()), unless --steps gives the count. On a GPU, vitkd's trace has the
host's times only; torch.profiler's has the kernels too, on their own
streams (threads), so there the self times can sum to more than the span.

--within NAME keeps the events inside events named NAME (on the same
thread) and those events themselves, whose self time is then the time in no
operator: vitkd's traces name each phase of a step as a scope,
vitkd::teacher_forward, vitkd::student_forward, vitkd::backward, ... (the
timing log's phase names), so that `--within vitkd::teacher_forward` is the
teacher's share of the step. The percentages stay of the whole trace's span.

--json OUT writes every operator (not only the top N) and the totals.
Pure Python standard library. Exit 2 on a file that is not such a trace.
"""
import argparse
import json
import re
import signal
import sys

STEP_NAME = re.compile(r"^(vitkd::step|timm::step|ProfilerStep#\d+)$")


def die(msg):
    print(f"profile_ops.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load_events(path):
    """The trace's complete events as (name, thread, start us, duration us, category)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        die(f"cannot read {path} as JSON: {e}")
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        die(f"{path} is not a Chrome trace (a list of events or an object with traceEvents)")
    events = []
    for e in raw:
        # (torch.profiler's "Trace" event is the profiler's own span, not an operator.)
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") == "Trace":
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        events.append((str(e.get("name", "?")), (str(e.get("pid", "")), str(e.get("tid", ""))),
                       ts, max(dur, 0.0), str(e.get("cat", ""))))
    return events


def within(events, name):
    """The events inside an event named `name` on the same thread, and those events."""
    spans = {}
    for e in events:
        if e[0] == name:
            spans.setdefault(e[1], []).append((e[2], e[2] + e[3]))
    return [e for e in events
            if any(a <= e[2] and e[2] + e[3] <= b for a, b in spans.get(e[1], ()))]


def self_times(events):
    """Self time of each event (same order): its duration less the part of it
    its direct children cover. Events nest per thread; a child reaching past
    its parent's end counts up to that end only."""
    out = [0.0] * len(events)
    by_thread = {}
    for i, e in enumerate(events):
        by_thread.setdefault(e[1], []).append(i)
    for idx in by_thread.values():
        # Parents first: earlier start, then the longer event.
        idx.sort(key=lambda i: (events[i][2], -events[i][3]))
        stack = []  # (index, end)
        for i in idx:
            ts, dur = events[i][2], events[i][3]
            while stack and stack[-1][1] <= ts:
                stack.pop()
            out[i] = dur
            if stack:
                parent, pend = stack[-1]
                out[parent] -= min(ts + dur, pend) - ts
            stack.append((i, ts + dur))
    return [max(s, 0.0) for s in out]


def aggregate(events, steps=None, inside=None):
    """The per-operator table and its totals, as a dict (what --json writes); with `inside`, of the
    events within() it, against the whole trace's span and steps."""
    kept = within(events, inside) if inside else events
    selfs = self_times(kept)
    ops = {}
    for e, s in zip(kept, selfs):
        o = ops.setdefault(e[0], {"name": e[0], "calls": 0, "total_ms": 0.0, "self_ms": 0.0, "categories": set()})
        o["calls"] += 1
        o["total_ms"] += e[3] / 1e3
        o["self_ms"] += s / 1e3
        if e[4]:
            o["categories"].add(e[4])
    step_events = sum(1 for e in events if STEP_NAME.match(e[0]))
    steps_from = "--steps" if steps else ("step events" if step_events else "none (counted as 1)")
    n = steps or step_events or 1
    wall_ms = (max(e[2] + e[3] for e in events) - min(e[2] for e in events)) / 1e3 if events else 0.0
    rows = sorted(ops.values(), key=lambda o: (-o["self_ms"], o["name"]))
    for o in rows:
        o["categories"] = sorted(o["categories"])
        o["self_pct"] = 100.0 * o["self_ms"] / wall_ms if wall_ms > 0 else 0.0
        o["self_ms_per_step"] = o["self_ms"] / n
        o["calls_per_step"] = o["calls"] / n
    return {"events": len(kept), "within": inside, "threads": len({e[1] for e in kept}), "steps": n,
            "steps_from": steps_from, "wall_ms": wall_ms, "wall_ms_per_step": wall_ms / n,
            "self_ms_total": sum(selfs) / 1e3, "operators": rows}


def table(r, top, path):
    part = f" within {r['within']}" if r.get("within") else ""
    lines = [f"{path}: {r['events']} events{part} on {r['threads']} thread(s), {r['steps']} step(s) "
             f"(from {r['steps_from']}), {r['wall_ms']:.3f} ms profiled ({r['wall_ms_per_step']:.3f} ms per step)"]
    w = max([len("operator")] + [len(o["name"]) for o in r["operators"][:top]])
    lines.append(f"{'operator':<{w}}  {'calls':>7}  {'total ms':>10}  {'self ms':>10}  {'self %':>6}  "
                 f"{'self ms/step':>12}  {'calls/step':>10}")
    for o in r["operators"][:top]:
        lines.append(f"{o['name']:<{w}}  {o['calls']:>7}  {o['total_ms']:>10.3f}  {o['self_ms']:>10.3f}  "
                     f"{o['self_pct']:>6.1f}  {o['self_ms_per_step']:>12.4f}  {o['calls_per_step']:>10.2f}")
    shown = min(top, len(r["operators"]))
    pct = 100.0 * r["self_ms_total"] / r["wall_ms"] if r["wall_ms"] > 0 else 0.0
    lines.append(f"({shown} of {len(r['operators'])} operators; the self times sum to {r['self_ms_total']:.3f} ms, "
                 f"{pct:.1f} % of the profiled time)")
    return "\n".join(lines)


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `profile_ops.py TRACE | head` ends quietly
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=25, help="operators shown (default 25)")
    p.add_argument("--steps", type=int, default=None, help="steps in the trace (default: its step events)")
    p.add_argument("--json", metavar="OUT", help="also write every operator as JSON")
    p.add_argument("--within", metavar="NAME", help="only the events inside events named NAME, e.g. "
                   "vitkd::teacher_forward")
    a = p.parse_args(argv)
    if a.top < 1 or (a.steps is not None and a.steps < 1):
        p.error("--top and --steps must be at least 1")
    events = load_events(a.trace)
    if not events:
        die(f"{a.trace} has no complete (\"ph\": \"X\") events")
    if a.within and not any(e[0] == a.within for e in events):
        die(f"{a.trace} has no event named {a.within}")
    r = aggregate(events, a.steps, a.within)
    r["trace"] = a.trace
    print(table(r, a.top, a.trace))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
