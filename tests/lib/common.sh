# Shared helpers of the end-to-end scripts, tests/e2e/e2e_*.sh (sourced).
#
# A script sets CASES, defines one function case_<name> per case, and ends
# with `e2e_main "$@"`:
#   e2e_<subject>.sh --list          one case per line, NAME[:NEEDED ...]
#                                    (tests/CMakeLists.txt registers each as a CTest test)
#   e2e_<subject>.sh CASE NP ROOT    runs case CASE at NP ranks in ROOT/CASE
# A case NEEDED by another (a CTest fixture, usually "setup") leaves its
# files in ROOT/NEEDED for it to read; a case writes only below ROOT/CASE.
#
# Environment (CTest sets it): VITKD, SRC (the source tree), PYTHON, and
# MPIEXEC, MPIEXEC_NUMPROC_FLAG, MPIEXEC_PREFLAGS, MPIEXEC_POSTFLAGS (CMake's
# FindMPI names). Environment variables reach the ranks through `env` run by
# the launcher (see mpi_cmd), whatever the MPI: no launcher-specific flags.
set -euo pipefail
# Listing the cases needs none of the environment.
if [ "${1-}" = --list ]; then : "${SRC:=}" "${VITKD:=}" "${PYTHON:=}"; fi

fail() { echo "FAIL: $*" >&2; exit 1; }

# leading_envs ARG ...: sets the array ENVS to the leading NAME=VALUE
# arguments (the caller then shifts them off with `shift ${#ENVS[@]}`).
leading_envs() {
  ENVS=()
  while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
    ENVS+=("$1")
    shift
  done
}

# mpi_cmd N [NAME=VALUE ...] PROGRAM [ARG ...]: sets the array MPI_CMD to the
# command line that starts PROGRAM on N ranks with NAME=VALUE in each rank's
# environment: MPIEXEC NUMPROC_FLAG N PREFLAGS [env NAME=VALUE ...] PROGRAM POSTFLAGS ARG...
mpi_cmd() {
  local n=$1
  shift
  leading_envs "$@"
  local envs=("${ENVS[@]}")
  shift ${#envs[@]}
  local prog=$1
  shift
  # shellcheck disable=SC2206  # the flag variables are lists of words
  MPI_CMD=($MPIEXEC $MPIEXEC_NUMPROC_FLAG "$n" ${MPIEXEC_PREFLAGS-})
  if [ ${#envs[@]} -gt 0 ]; then MPI_CMD+=(env "${envs[@]}"); fi
  # shellcheck disable=SC2206
  MPI_CMD+=("$prog" ${MPIEXEC_POSTFLAGS-} "$@")
}

# mpi N [NAME=VALUE ...] PROGRAM [ARG ...]: runs it (at most MPI_TIMEOUT s, default 300).
mpi() {
  mpi_cmd "$@"
  timeout "${MPI_TIMEOUT:-300}" "${MPI_CMD[@]}"
}

# vk N [NAME=VALUE ...] ARG ...: vitkd ARG ... at N ranks.
vk() {
  local n=$1
  shift
  leading_envs "$@"
  local envs=("${ENVS[@]}")
  shift ${#envs[@]}
  mpi "$n" "${envs[@]}" "$VITKD" "$@"
}

# expect CODE COMMAND ...: runs COMMAND with its output in $LOG (last.log
# unless set) and fails unless it exits with CODE; CODE "nonzero" is any
# failure except a timeout (124).
expect() {
  local want=$1
  shift
  local log=${LOG:-last.log} rc=0
  "$@" > "$log" 2>&1 || rc=$?
  if [ "$want" = nonzero ]; then
    if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then cat "$log"; fail "exit code $rc: $*"; fi
  elif [ "$rc" != "$want" ]; then
    cat "$log"
    fail "exit code $rc, expected $want: $*"
  fi
}

# expect_error CODE MESSAGE COMMAND ...: `expect CODE`, and the output holds
# MESSAGE (fixed string), a 'vitkd: error' line (CODE != 0), no crash
# (uncaught exception, signal, sanitizer report, Python traceback) and no
# HDF5 error stack (h5_silence_errors routes HDF5's errors to the one line).
expect_error() {
  local code=$1 message=$2
  shift 2
  expect "$code" "$@"
  local log=${LOG:-last.log}
  grep -qF -- "$message" "$log" || { head -5 "$log"; fail "the output lacks '$message'"; }
  if grep -qE "terminate called|Segmentation fault|core dumped|Traceback|ERROR: AddressSanitizer|runtime error:" "$log"; then
    head -5 "$log"
    fail "crashed"
  fi
  if grep -q "HDF5-DIAG" "$log"; then head -5 "$log"; fail "HDF5 printed its error stack"; fi
  if [ "$code" -ne 0 ] && ! grep -q 'vitkd: error' "$log"; then head -5 "$log"; fail "no 'vitkd: error' line"; fi
  echo "ok: $(grep -m1 'vitkd: error' "$log" || true)"
}

# synthetic OUT TRAIN TEST SIZE CLASSES [FLAG ...]: a synthetic dataset (vitkd prepare synthetic).
synthetic() {
  local out=$1 train=$2 test=$3 size=$4 classes=$5
  shift 5
  "$VITKD" prepare synthetic --out "$out" --train "$train" --test "$test" --size "$size" \
    --classes "$classes" "$@" > /dev/null
}

# tiny_config FILE [SECTION.KEY=VALUE ...]: writes a configuration of a tiny
# model (8x8 images, one block of width 16) on syn.h5, batches of 4, one
# epoch, as TOML; each SECTION.KEY=VALUE (VALUE in TOML syntax) replaces the
# key's value or adds the key.
#
# precision.compute stays "auto": its choice follows from what the machine
# is (model/precision.hpp), so runs that a test compares compute alike.
#
# auto_compute: what "auto" chooses here, as `vitkd bench gemm --auto-only` says (the run's probe,
# about a second; the timed shapes take minutes where bf16 is emulated).
auto_compute() {
  "$VITKD" bench gemm --auto-only 2> /dev/null |
    sed -n 's/^precision.compute = "auto" chooses \(bf16\|fp32\) here.*/\1/p'
}
tiny_config() {
  local file=$1
  shift
  local keys=(run.seed=5 'data.path="syn.h5"' data.batch_size=4 model.image_size=8 model.channels=1
              model.patch=4 model.dim=16 model.depth=1 model.heads=2 model.mlp_ratio=2.0 model.classes=4
              train.epochs=1 train.log_every_steps=8 train.mfu_ceiling=1e11 optim.lr=2e-3
              optim.warmup_steps=5 'precision.compute="auto"')
  local kv i found
  for kv in "$@"; do
    found=0
    for i in "${!keys[@]}"; do
      if [ "${keys[i]%%=*}" = "${kv%%=*}" ]; then keys[i]=$kv; found=1; fi
    done
    if [ $found = 0 ]; then keys+=("$kv"); fi
  done
  local sections=() s key
  for kv in "${keys[@]}"; do
    s=${kv%%.*}
    if [[ " ${sections[*]} " != *" $s "* ]]; then sections+=("$s"); fi
  done
  {
    for s in "${sections[@]}"; do
      echo "[$s]"
      for kv in "${keys[@]}"; do
        key=${kv%%=*}
        if [ "${key%%.*}" = "$s" ]; then echo "${key#*.} = ${kv#*=}"; fi
      done
    done
  } > "$file"
}

# json_get FILE KEY: a value of a JSON object (result.json).
json_get() { "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# h5_attr FILE NAME: a root attribute of an HDF5 file, as an integer.
h5_attr() { "$PYTHON" -c 'import h5py, sys; print(int(h5py.File(sys.argv[1], "r").attrs[sys.argv[2]]))' "$1" "$2"; }
# cmp_ckpt A B [--exact | --rtol R]: tests/tools/compare_checkpoints.py
cmp_ckpt() { "$PYTHON" "$SRC/tests/tools/compare_checkpoints.py" "$@"; }

# same_model_at_one_and_np_ranks MAKE NP KEY=VALUE...: the configuration MAKE
# writes (MAKE FILE NP KEY=VALUE...) trained 8 steps in fp32 on one thread at
# 1 rank and at NP ranks; the models agree within 1e-5 (rank invariance).
same_model_at_one_and_np_ranks() {
  local make=$1 np=$2
  shift 2
  local K=('precision.compute="fp32"' train.threads=1 train.max_steps=8 "$@")
  "$make" one.toml 1 "${K[@]}" 'run.out_dir="one"'
  "$make" many.toml "$np" "${K[@]}" 'run.out_dir="many"'
  LOG=one.log expect 0 vk 1 train one.toml
  LOG=many.log expect 0 vk "$np" train many.toml
  cmp_ckpt one/checkpoint.h5 many/checkpoint.h5 --rtol 1e-5 --groups model
}

# resumed_equals_uninterrupted MAKE NP KEY=VALUE...: the run MAKE writes, once
# whole (full/) and once preempted at step 7 and resumed (cut/); the models
# are bitwise equal.
resumed_equals_uninterrupted() {
  local make=$1 np=$2
  shift 2
  "$make" full.toml "$np" "$@" 'run.out_dir="full"'
  "$make" cut.toml "$np" "$@" 'run.out_dir="cut"'
  LOG=full.log expect 0 vk "$np" train full.toml
  LOG=cut1.log expect 75 vk "$np" VITKD_TEST_PREEMPT_AT_STEP=7 train cut.toml
  LOG=cut2.log expect 0 vk "$np" train cut.toml
  grep -q "resume: from cut/checkpoint.h5" cut2.log || { cat cut2.log; fail "did not resume"; }
  cmp_ckpt full/checkpoint.h5 cut/checkpoint.h5 --exact --groups model
}

# The Python modules the checks of a script use (a script may set its own
# list before e2e_main, e.g. with torch).
PYTHON_MODULES=(h5py numpy)
# require_python_modules MODULE ...: exits with 77, which CTest reports as a
# skip (SKIP_RETURN_CODE), naming what is missing, unless $PYTHON imports each.
require_python_modules() {
  local m missing=()
  for m in "$@"; do
    "$PYTHON" -c "import $m" 2> /dev/null || missing+=("$m")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIP: $PYTHON lacks the Python module(s) ${missing[*]} this test checks with" \
      "(Debian: python3-<module>; Spack: py-<module>)"
    exit 77
  fi
}

# The dispatcher (see the top of this file).
e2e_main() {
  if [ "${1-}" = --list ]; then
    printf '%s\n' "${CASES[@]}"
    return 0
  fi
  [ $# -eq 3 ] || fail "usage: $0 --list | CASE NP ROOT"
  CASE=$1 NP=$2 ROOT=$3
  local spec known=0
  for spec in "${CASES[@]}"; do
    if [ "${spec%%:*}" = "$CASE" ]; then known=1; fi
  done
  [ $known = 1 ] || fail "no case '$CASE' in $0 (--list shows them)"
  : "${VITKD:?}" "${SRC:?}" "${PYTHON:?}" "${MPIEXEC:?}" "${MPIEXEC_NUMPROC_FLAG:?}"
  require_python_modules "${PYTHON_MODULES[@]}"
  WORK=$ROOT/$CASE
  rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
  "case_$CASE"
  echo "OK: $CASE at $NP rank(s)"
}

