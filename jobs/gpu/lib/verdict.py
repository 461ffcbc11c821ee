"""One line on a device run's summary.json (jobs/gpu/summary.py) against a
condition, for the scripts that rehearse it (jobs/gpu/preflight.sh,
jobs/lanes/gpu_rehearsal.sh).

    verdict.py PREFIX SUMMARY WHAT CONDITION

CONDITION is a Python expression over s (the summary), c (its checks by
name) and n (the counts: pass, fail, skip). Prints "PREFIX: WHAT: ok (...)" or "... FAILED
(...): the fatal set-up error or the first failed check"; exit 0 when it
holds, else 1.
"""
import json
import sys


def main():
    prefix, path, what, cond = sys.argv[1:]
    s = json.load(open(path))
    c = {x["name"]: x for x in s["checks"]}
    n = s["counts"]
    ok = eval(cond, {}, {"s": s, "c": c, "n": n})  # noqa: S307 (the callers' own conditions)
    why = ""
    if not ok:
        fails = [f"{x['name']}: {x['reason']}" for x in s["checks"] if x["status"] == "fail"]
        why = ": " + (s["meta"].get("fatal") or (fails[0] if fails else "the condition does not hold"))[:300]
    print(f"{prefix}: {what}: {'ok' if ok else 'FAILED'} ({n['pass']} passed, {n['fail']} failed, "
          f"{n['skip']} skipped in {s['seconds']} s){why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
