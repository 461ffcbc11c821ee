#!/usr/bin/env bash
# A user error found by one rank alone reaches the user exactly once, with
# exit code 2, and the job ends promptly; an error every rank finds is printed
# once by rank 0 and the job ends cleanly (util/error.cpp, die()). 2 ranks.
#   e2e_rank_error.sh WORKDIR   (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, MPIEXEC_PREFLAGS, SRC)
set -uo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails+1)); }
run2() { timeout 120 $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 $MPIEXEC_PREFLAGS "$VITKD" "$@"; }

"$VITKD" prepare synthetic --out "$work/syn.h5" --train 256 --test 64 --size 16 --classes 4 >/dev/null ||
  { echo "FAIL: prepare synthetic"; exit 1; }
T=(train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set train.epochs=1)

# expect_once NAME MESSAGE -- COMMAND...: exit 2 within a minute, MESSAGE on
# exactly one line of stderr.
expect_once() {
  local name=$1 msg=$2
  shift 3
  local t0=$SECONDS
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$? n
  n=$(grep -cF -- "$msg" "$work/$name.err")
  if [ "$rc" -ne 2 ]; then
    fail "$name: exit $rc, expected 2"; tail -5 "$work/$name.err"
  elif [ "$n" -ne 1 ]; then
    fail "$name: the message is on $n lines of stderr, expected 1:"; cat "$work/$name.err"
  elif [ $((SECONDS - t0)) -gt 60 ]; then
    fail "$name: took $((SECONDS - t0)) s"
  else
    echo "ok   $name ($((SECONDS - t0)) s): $(grep -F -- "$msg" "$work/$name.err")"
  fi
}

# Rank 1 alone: rank 0 never sees the error and would not print it.
VITKD_TEST_USER_ERROR_RANK=1 expect_once rank1_alone \
  "vitkd: error [rank 1]: VITKD_TEST_USER_ERROR_RANK: rank 1 alone found this user error" -- \
  run2 "${T[@]}" --set run.out_dir="$work/r1"
# Rank 0 alone: it prints at once, then the job is aborted.
VITKD_TEST_USER_ERROR_RANK=0 expect_once rank0_alone \
  "VITKD_TEST_USER_ERROR_RANK: rank 0 alone found this user error" -- \
  run2 "${T[@]}" --set run.out_dir="$work/r0"
# Every rank finds it: rank 0 prints, no abort.
expect_once collective "unknown configuration key 'model.detph'" -- \
  run2 "${T[@]}" --set run.out_dir="$work/all" --set model.detph=2
if grep -q "MPI_ABORT" "$work/collective.err"; then fail "collective: the job was aborted"; cat "$work/collective.err"; fi
if grep -q "\[rank" "$work/collective.err"; then fail "collective: a rank printed it too"; fi

[ "$fails" -eq 0 ] && echo "all passed"
[ "$fails" -eq 0 ]
