#!/usr/bin/env bash
# Does sifting pay? The frontier of experiments/learning-log.md (2026-12-06, issue 58), run with
# experiments/distillation/compare.sh's machinery (kept runs, resume, the seed's precision, the
# rotated order), its points as arms F<S|I|T>b<beta>[d<delay>] (compare.sh's sift_point_args):
# S = scope "sample", separate pass; I = scope "sample", ranked in the training forward; T = scope
# "teacher". Kept runs go to experiments/sifting/results/ (commit them).
#   experiments/sifting/frontier.sh delay       stage 1: FSb1 at sift.delay 500, 1000, 2000, seed 11;
#                                               then prints the delay the rule chooses
#   DELAY=N experiments/sifting/frontier.sh grid
#                                               stage 2: C and the nine points at seeds 11 and 12
#   DELAY=N POINT=FXbB experiments/sifting/frontier.sh four
#                                               stage 3: POINT and FSb0.5 at seeds 11-14, C and E
#                                               at the new seeds 13 and 14
# Environment as compare.sh's (OUT=runs/frontier, KEEP=experiments/sifting/results, NP, EXTRA, DATA);
# SEEDS overrides a stage's seeds; each stage ends by regenerating the page (frontier_table.py --write).
# A rehearsal: EXTRA="--set train.max_steps=3" KEEP=/tmp/k OUT=/tmp/o.
# A seed's runs and its C on one host: result.json records the host.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-runs/frontier} KEEP=${KEEP:-experiments/sifting/results}
TEACHER=${TEACHER:-teachers/fmnist-cnn.pt}
if [ ! -f "$TEACHER" ]; then  # the comparison's convnet teacher, kept with its runs
  mkdir -p "$(dirname "$TEACHER")"
  cp experiments/distillation/results/compare/teacher-cnn.pt "$TEACHER"
fi
export TEACHER
table() { /usr/bin/python3 experiments/sifting/frontier_table.py "$@"; }  # the rule's lists and tables
run() { ARMS="$1" SEEDS="${SEEDS:-$2}" SIFT_DELAY="${DELAY:-}" bash experiments/distillation/compare.sh; }
case ${1:-} in
  delay)
    run "FSb1d500 FSb1d1000 FSb1d2000" 11
    /usr/bin/python3 experiments/sifting/frontier_table.py --results "$KEEP" --print delay
    ;;
  grid)
    [ -n "${DELAY:-}" ] || { echo "frontier grid: set DELAY (frontier.sh delay prints it)" >&2; exit 2; }
    run "C $(table --print points)" "$(table --print stage2-seeds)" ;;
  four)
    [ -n "${DELAY:-}" ] && [ -n "${POINT:-}" ] || { echo "frontier four: set DELAY and POINT (stage 2's choice)" >&2; exit 2; }
    # The rule: POINT and FSb0.5 at seeds 11-14; C and E run again only at the seeds stage 2 did not
    # run (13, 14). Stage 2's seeds hold POINT, FSb0.5 and C already, so the first line runs nothing
    # unless one of them was lost.
    if [ -z "${SEEDS:-}" ]; then
      SEEDS="$(table --print stage2-seeds)" run "C $POINT FSb0.5" ""
      SEEDS="$(table --print stage3-new-seeds)" run "C E $POINT FSb0.5" ""
    else
      run "C E $POINT FSb0.5" ""
    fi ;;
  *) echo "usage: experiments/sifting/frontier.sh delay | grid | four (see its header)" >&2; exit 2 ;;
esac
# The page's tables, plot and the README's line from the kept runs (commit them with the runs).
if [ "$KEEP" = experiments/sifting/results ]; then table --write; fi
