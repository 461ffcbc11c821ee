#!/usr/bin/env python3
"""Moved to experiments/distillation/teacher_cnn.py (the distillation experiment's own scripts)."""
import os
import sys

if __name__ != "__main__":
    raise ImportError("jobs/teacher_cnn.py moved to experiments/distillation/teacher_cnn.py: import it from there")
new = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments/distillation/teacher_cnn.py")
print("jobs/teacher_cnn.py: moved to experiments/distillation/teacher_cnn.py; running that", file=sys.stderr)
os.execv(sys.executable, [sys.executable, new] + sys.argv[1:])
