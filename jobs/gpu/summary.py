"""summary.json of the device run (jobs/gpu/check.sh): every check in the
list, its outcome and reason, and the run's record (meta.tsv).

    summary.py --work DIR --out DIR --expect 0|1 --mode M --t0 EPOCH --budget S --checks LIST [--only NAMES]
               [--part 1|2] [--quiet]

A check with no fragment "did not run" (a fail where a GPU is expected, else
a skip); with --expect 1 every skip is a fail ("did not run: ..."), and a
fatal set-up error fails every check. Writes WORK/summary.json and
OUT/summary.json (through a temporary file: a reader never sees half of
one), prints the table unless --quiet; exit 1 when a check failed, else 0.
jobs/gpu/check.sh writes it after every check.
"""
import argparse
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    for k in ("work", "out", "mode", "checks"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--t0", type=int, required=True)
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--only", default="")
    p.add_argument("--part", default="")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args()
    meta = {}
    path = os.path.join(a.work, "meta.tsv")
    if os.path.isfile(path):
        for line in open(path):
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    only = set(a.only.split())
    checks = []
    for order, line in enumerate(a.checks.strip().splitlines(), 1):
        name, limit, *needs = line.split()
        if only and name not in only:
            continue
        f = os.path.join(a.work, "checks", name + ".json")
        c = json.load(open(f)) if os.path.isfile(f) else None
        if "fatal" in meta:
            c = {"status": "fail", "reason": "did not run: " + meta["fatal"], "numbers": {}}
        elif c is None:
            c = {"status": "fail" if a.expect else "skip", "numbers": {},
                 "reason": "did not run (no result; see logs/run-%s.txt)" % name}
        elif a.expect and c["status"] == "skip":
            why = c["reason"] if "not run" in c["reason"] else "did not run: " + c["reason"]
            c = dict(c, status="fail", reason=why + " (VITKD_EXPECT_GPU=1)")
        c.update(name=name, order=order, limit=c.get("limit", int(limit)))
        c.setdefault("seconds", 0)
        checks.append(c)
    counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "skip")}
    summary = {"mode": a.mode, "part": a.part or "all", "expect_gpu": bool(a.expect), "seconds": int(time.time()) - a.t0,
               "budget_seconds": a.budget, "counts": counts, "meta": meta, "checks": checks,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for d in (a.work, a.out):
        with open(os.path.join(d, "summary.json.new"), "w") as fh:
            json.dump(summary, fh, indent=1)
        os.replace(os.path.join(d, "summary.json.new"), os.path.join(d, "summary.json"))
    if a.quiet:
        return 1 if counts["fail"] else 0
    print(f"\n=== vitkd GPU check ({a.mode}{', part ' + a.part if a.part else ''}{', GPU expected' if a.expect else ''}): "
          f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in {summary['seconds']} s "
          f"(budget {a.budget} s) ===")
    if "fatal" in meta:
        print("FATAL: " + meta["fatal"])
    for c in checks:
        print(f"{c['status']:>4}  {c['name']:<24} {c.get('seconds', 0):>4} s  {c['reason']}")
    print(f"summary: {os.path.join(a.out, 'summary.json')}; everything else: {os.path.join(a.out, 'vitkd-gpu.tar.gz')}")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
