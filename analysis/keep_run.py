#!/usr/bin/env python3
"""Moved to experiments/distillation/keep_run.py (the distillation experiment's own scripts)."""
import os
import sys

if __name__ != "__main__":
    raise ImportError("analysis/keep_run.py moved to experiments/distillation/keep_run.py: import it from there")
new = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments/distillation/keep_run.py")
print("analysis/keep_run.py: moved to experiments/distillation/keep_run.py; running that", file=sys.stderr)
os.execv(sys.executable, [sys.executable, new] + sys.argv[1:])
