"""The analysis tests' checks: each prints one line, ok or FAIL; `finish()` exits 1 when any failed."""
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def finish():
    print(f"{len(failures)} of the checks failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)
