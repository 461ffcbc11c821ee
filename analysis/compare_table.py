#!/usr/bin/env python3
"""Moved to experiments/distillation/compare_table.py (the distillation experiment's own scripts)."""
import os
import sys

if __name__ != "__main__":
    raise ImportError("analysis/compare_table.py moved to experiments/distillation/compare_table.py: import it from there")
new = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments/distillation/compare_table.py")
print("analysis/compare_table.py: moved to experiments/distillation/compare_table.py; running that", file=sys.stderr)
os.execv(sys.executable, [sys.executable, new] + sys.argv[1:])
