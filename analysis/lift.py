#!/usr/bin/env python3
"""Moved to experiments/distillation/lift.py (the distillation experiment's own scripts)."""
import os
import sys

if __name__ != "__main__":
    raise ImportError("analysis/lift.py moved to experiments/distillation/lift.py: import it from there")
new = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments/distillation/lift.py")
print("analysis/lift.py: moved to experiments/distillation/lift.py; running that", file=sys.stderr)
os.execv(sys.executable, [sys.executable, new] + sys.argv[1:])
