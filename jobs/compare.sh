#!/usr/bin/env bash
# Moved to experiments/distillation/compare.sh (the distillation experiment's own scripts).
echo "jobs/compare.sh: moved to experiments/distillation/compare.sh; running that" >&2
exec bash "$(dirname "$0")/../experiments/distillation/compare.sh" "$@"
