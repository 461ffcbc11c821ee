#!/usr/bin/env bash
# Moved to experiments/distillation/lift.sh (the distillation experiment's own scripts).
echo "jobs/lift.sh: moved to experiments/distillation/lift.sh; running that" >&2
exec bash "$(dirname "$0")/../experiments/distillation/lift.sh" "$@"
