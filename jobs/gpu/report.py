"""The README's GPU table from a device run's summary.json (jobs/gpu/check.sh).

    python3 jobs/gpu/report.py OUT/summary.json > report.md

Prints Markdown: the run (date, mode, host, versions), one row per check
(outcome, seconds, reason), and the throughput rows (images/s, MFU) of the
g_* checks and the loader's rate where they ran. Reads only summary.json.
"""
import json
import sys


def rates(c):
    """(who, images/s, MFU or None) of a throughput check's numbers."""
    out = []
    for who, d in (c.get("numbers", {}).get("rates") or {}).items():
        if isinstance(d, dict) and "images_per_second" in d:
            out.append((who, d["images_per_second"], d.get("mfu")))
    return out


def main():
    s = json.load(open(sys.argv[1]))
    m = s.get("meta", {})
    n = s["counts"]
    part = f", part {s['part']}" if s.get("part", "all") != "all" else ""
    print(f"GPU check of {s['date'][:10]} ({s['mode']}{part}{', GPU expected' if s.get('expect_gpu') else ''}): "
          f"{n['pass']} passed, {n['fail']} failed, {n['skip']} skipped in {s['seconds']} s of {s['budget_seconds']}.")
    for k in ("host", "versions", "prebuilt", "build", "launcher", "no_gpu", "fatal", "stopped"):
        if k in m:
            print(f"- {k}: {m[k].split(chr(9))[-1]}")
    print("\n| check | outcome | s | what it found |\n|---|---|---|---|")
    for c in s["checks"]:
        print(f"| {c['name']} | {c['status']} | {c.get('seconds', 0)} | {c['reason'].replace('|', '/')} |")
    rows = [(c["name"], *r) for c in s["checks"] if c["status"] == "pass" for r in rates(c)]
    if rows:
        print("\n| check | who | images/s | MFU |\n|---|---|---|---|")
        for name, who, ips, mfu in rows:
            print(f"| {name} | {who} | {ips:,.0f} | {'' if mfu is None else f'{mfu:.3f}'} |")
    loader = next((c for c in s["checks"] if c["name"] == "i_loader" and c["status"] == "pass"), None)
    if loader:
        d = loader["numbers"].get("loader", {})
        print(f"\nLoader: {d.get('images_per_s', 0):,.0f} images/s on {d.get('ranks')} cores "
              f"(GPU step: {float(loader['numbers'].get('model_rate', 0)):,.0f} images/s).")


if __name__ == "__main__":
    main()
