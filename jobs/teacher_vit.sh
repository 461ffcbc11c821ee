#!/usr/bin/env bash
# Moved to experiments/distillation/teacher_vit.sh (the distillation experiment's own scripts).
echo "jobs/teacher_vit.sh: moved to experiments/distillation/teacher_vit.sh; running that" >&2
exec bash "$(dirname "$0")/../experiments/distillation/teacher_vit.sh" "$@"
