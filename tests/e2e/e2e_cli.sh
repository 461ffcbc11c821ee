#!/usr/bin/env bash
# The command line as a user meets it, for every subcommand (train, teacher-cache, prepare
# fashion-mnist|synthetic|folder, export, inspect, bench gemm|ops|attention|comm, keys,
# version): an unknown flag, a missing value, a non-numeric number and a
# negative count are each exit 2 with exactly one line on stderr, naming the
# flag, and nothing written in the working directory; `--help` of each exits 0
# and lists every flag; `vitkd --help` is vitkd's page (no Kokkos options);
# `vitkd --version` prints the project's version.
#   e2e_cli.sh WORKDIR     (env: VITKD, SRC)
set -uo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work/cwd"
cwd=$work/cwd
fails=0
passes=0
fail() { echo "FAIL $*"; fails=$((fails+1)); }

# Runs vitkd in the (empty) working directory; stdout, stderr and exit code
# land in $work/out, $work/err and $rc.
run() { (cd "$cwd" && "$VITKD" "$@" >"$work/out" 2>"$work/err"); rc=$?; }

# bad NAME WANT -- ARGS...: exit 2, nothing on stdout, one stderr line
# "vitkd: error: ..." containing WANT, and the working directory still empty.
bad() {
  local name=$1 want=$2
  shift 3
  run "$@"
  local written
  written=$(ls -A "$cwd")
  rm -rf "${cwd:?}"/* "$cwd"/.[!.]* 2>/dev/null
  if [ "$rc" -ne 2 ]; then fail "$name: exit $rc, expected 2"; head -3 "$work/err"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ] || [ -s "$work/out" ]; then
    fail "$name: expected one line on stderr and none on stdout, got:"; cat "$work/out" "$work/err"; return
  fi
  if ! grep -q '^vitkd: error: ' "$work/err" || ! grep -qF -- "$want" "$work/err"; then
    fail "$name: the line lacks '$want': $(cat "$work/err")"; return
  fi
  if [ -n "$written" ]; then fail "$name: wrote $written"; return; fi
  echo "ok   $name: $(cat "$work/err")"
  passes=$((passes+1))
}

# shows_help NAME FLAGS -- ARGS...: exit 0, nothing on stderr, every flag of FLAGS
# (space-separated) on stdout, nothing written.
shows_help() {
  local name=$1 flags=$2
  shift 3
  run "$@"
  if [ "$rc" -ne 0 ] || [ -s "$work/err" ] || [ -n "$(ls -A "$cwd")" ]; then
    fail "$name: exit $rc (expected 0), stderr or files:"; cat "$work/err"; ls -A "$cwd"; return
  fi
  local f
  for f in $flags; do
    if ! grep -qE -- "(^|[ ,])$f( |,|$)" "$work/out"; then fail "$name: help lacks $f"; cat "$work/out"; return; fi
  done
  echo "ok   $name"
  passes=$((passes+1))
}

cfg=$SRC/inputs/smoke.toml
T=(train "$cfg" --set data.path=data.h5 --set run.out_dir=run)

# ---- train (numbers go through --set and the configuration's own checks) ----
bad train_unknown "unknown option '--sett' (did you mean '--set'?)" -- "${T[@]}" --sett model.depth=2
bad train_missing "train: --set needs a value" -- "${T[@]}" --set
bad train_missing_config "train: missing CONFIG.toml" -- train --set model.depth=2
bad train_extra "train: unexpected argument 'extra.toml'" -- "${T[@]}" extra.toml
bad train_not_numeric "'data.batch_size' must be an integer" -- "${T[@]}" --set data.batch_size=abc
bad train_negative "train.epochs" -- "${T[@]}" --set train.epochs=-1
shows_help train_help "--set" -- train --help

# ---- teacher-cache (the distillation configuration, as train) ----
bad tc_unknown "unknown option '--sett' (did you mean '--set'?)" -- teacher-cache "$cfg" --sett model.depth=2
bad tc_missing_config "teacher-cache: missing CONFIG.toml" -- teacher-cache --set model.depth=2
bad tc_not_numeric "'distill.cache_top_k' must be an integer" -- teacher-cache "$cfg" --set distill.cache_top_k=many
bad tc_zero_k "distill.cache_top_k" -- teacher-cache "$cfg" --set distill.cache_top_k=0
bad tc_teacher_mode "teacher-cache reads the distillation configuration" -- teacher-cache "$cfg" --set run.out_dir=run
shows_help tc_help "--set" -- teacher-cache --help

# ---- prepare ----
bad prepare_no_kind "prepare: missing the dataset kind" -- prepare
bad prepare_kind "unknown dataset kind 'synthetc' (did you mean 'synthetic'?)" -- prepare synthetc --out x.h5
shows_help prepare_help "fashion-mnist synthetic folder" -- prepare --help
# fashion-mnist has no numeric flags.
bad fmnist_unknown "unknown option '--sorce' (did you mean '--source'?)" -- prepare fashion-mnist --out x.h5 --sorce d
bad fmnist_missing "prepare fashion-mnist: --out needs a value" -- prepare fashion-mnist --out
bad fmnist_required "prepare fashion-mnist: --out FILE.h5" -- prepare fashion-mnist --source d
shows_help fmnist_help "--out --source" -- prepare fashion-mnist --help
bad syn_unknown "unknown option '--trian' (did you mean '--train'?)" -- prepare synthetic --out x.h5 --trian 5
bad syn_missing "prepare synthetic: --classes needs a value" -- prepare synthetic --out x.h5 --classes
bad syn_not_numeric "prepare synthetic: --size must be an integer >= 4, got 'big'" -- prepare synthetic --out x.h5 --size big
bad syn_negative "prepare synthetic: --test must be an integer >= 1, got '-3'" -- prepare synthetic --out x.h5 --test -3
shows_help syn_help "--out --train --test --size --channels --classes --seed" -- prepare synthetic -h
bad folder_unknown "unknown option '--chanels' (did you mean '--channels'?)" -- \
  prepare folder imgs --out x.h5 --size 8 --chanels 3
bad folder_missing "prepare folder: --size needs a value" -- prepare folder imgs --out x.h5 --size
bad folder_not_numeric "prepare folder: --size must be an integer >= 1, got 'x'" -- prepare folder imgs --out x.h5 --size x
bad folder_negative "prepare folder: --seed must be an integer >= 0, got '-2'" -- \
  prepare folder imgs --out x.h5 --size 8 --seed -2
bad folder_fraction "--test-fraction must be a number in [0, 1), got '1.5'" -- \
  prepare folder imgs --out x.h5 --size 8 --test-fraction 1.5
bad folder_channels "--channels must be 1 or 3, got '2'" -- prepare folder imgs --out x.h5 --size 8 --channels 2
shows_help folder_help "DIR --out --size --test-fraction --seed --channels" -- prepare folder --help

# ---- export ----
bad export_unknown "unknown option '--ot' (did you mean '--out'?)" -- export ck.h5 --ot d
bad export_missing "export: --data needs a value" -- export ck.h5 --out d --data
bad export_not_numeric "export: --batch must be an integer in [1, 4096], got 'four'" -- export ck.h5 --out d --batch four
bad export_negative "export: --batch must be an integer in [1, 4096], got '-8'" -- export ck.h5 --out d --batch -8
bad export_required "export: --out DIR" -- export ck.h5
shows_help export_help "CHECKPOINT.h5 --out --data --batch" -- export --help

# ---- inspect (no flags, one file) ----
bad inspect_unknown "inspect: unknown option '--verbose'" -- inspect f.h5 --verbose
bad inspect_missing "inspect: missing FILE.h5" -- inspect
shows_help inspect_help "FILE.h5" -- inspect --help

# ---- bench ----
bad bench_kind "unknown benchmark 'gem' (did you mean 'gemm'?)" -- bench gem
shows_help bench_help "gemm ops comm" -- bench --help
bad gemm_unknown "unknown option '--thread' (did you mean '--threads'?)" -- bench gemm --thread 2
bad gemm_missing "bench gemm: --out needs a value" -- bench gemm --out
bad gemm_not_numeric "bench gemm: --threads must be an integer >= 1, got 'x'" -- bench gemm --threads x
bad gemm_negative "bench gemm: --millis must be an integer >= 1, got '-5'" -- bench gemm --millis -5
shows_help gemm_help "--threads --millis --out" -- bench gemm --help
bad ops_unknown "unknown option '--milis' (did you mean '--millis'?)" -- bench ops --milis 5
bad ops_missing "bench ops: --threads needs a value" -- bench ops --threads
bad ops_not_numeric "bench ops: --millis must be an integer >= 1, got '1e3'" -- bench ops --millis 1e3
bad ops_negative "bench ops: --threads must be an integer >= 1, got '-1'" -- bench ops --threads -1
shows_help ops_help "--threads --millis" -- bench ops --help
bad attention_unknown "unknown option '--batches' (did you mean '--batch'?)" -- bench attention --batches 2
bad attention_not_numeric "bench attention: --rounds must be an integer >= 1, got '0'" -- bench attention --rounds 0
shows_help attention_help "--threads --batch --rounds --millis --out" -- bench attention --help
# bench loader builds its transform through the configuration (its flags as the keys
# they stand for): a run writes its rates, and a mixing flag without a crop is the
# configuration's one line.
"$VITKD" prepare synthetic --out "$work/syn.h5" --train 64 --test 16 --size 16 > /dev/null
run bench loader --data "$work/syn.h5" --image-size 16 --crop pad --policy trivial_augment --mixup 0.8 \
  --random-erase 0.25 --millis 50 --out "$work/loader.json"
if [ "$rc" -ne 0 ] || ! python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
ks = [k for k in r if k.endswith("per_core")]
assert ks and all(r[k] > 0 for k in ks) and r["views"].startswith("data.augment = true"), r' "$work/loader.json"; then
  fail "bench loader on syn.h5: exit $rc or no rates"; cat "$work/err"
else echo "ok   bench loader: rates written"; passes=$((passes+1)); fi
rm -f "$cwd/loader.json"
bad loader_mixing_without_crop "invalid value for 'data.mixup'" -- bench loader --data "$work/syn.h5" --crop none --mixup 0.8
bad comm_unknown "unknown option '--iter' (did you mean '--iters'?)" -- bench comm --iter 3
bad comm_missing "bench comm: --elements needs a value" -- bench comm --elements
bad comm_not_numeric "bench comm: --elements must be an integer in [1, 2147483647], got 'lots'" -- bench comm --elements lots
bad comm_negative "bench comm: --iters must be an integer >= 1, got '-1'" -- bench comm --iters -1
shows_help comm_help "--elements --iters" -- bench comm --help

# ---- keys, version, help, unknown command ----
bad keys_unknown "keys: unknown option '--all'" -- keys --all
bad keys_extra "keys: unexpected argument 'model'" -- keys model
shows_help keys_help "" -- keys --help
bad version_unknown "version: unknown option '--short'" -- version --short
bad unknown_command "unknown command 'trian' (did you mean 'train'?)" -- trian
shows_help help_command "CHECKPOINT.h5 --out --data --batch" -- help export
sed -n 1p "$work/out" | grep -q "usage: vitkd export" || fail "vitkd help export: not export's help"

# `vitkd --help`, `-h`, `help`: vitkd's own page, not Kokkos's.
for h in --help -h help; do
  run $h
  if [ "$rc" -ne 0 ] || [ -s "$work/err" ] || ! grep -q "^usage: vitkd COMMAND" "$work/out"; then
    fail "vitkd $h: exit $rc"; cat "$work/out" "$work/err"
  elif grep -qi kokkos "$work/out"; then
    fail "vitkd $h mentions Kokkos:"; grep -i kokkos "$work/out" | head -3
  elif ! grep -q "prepare synthetic" "$work/out" || ! grep -q "bench comm" "$work/out"; then
    fail "vitkd $h does not list the commands"; cat "$work/out"
  else
    echo "ok   vitkd $h"; passes=$((passes+1))
  fi
done
# `vitkd` alone: the same page on stderr, exit 2.
run
if [ "$rc" -ne 2 ] || ! grep -q "^usage: vitkd COMMAND" "$work/err"; then fail "vitkd alone: exit $rc"
else echo "ok   vitkd alone: usage, exit 2"; passes=$((passes+1)); fi

# --version: the version of CMakeLists.txt, and the commit when built from git.
want=$(sed -n 's/^project(vitkd VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
for v in --version version; do
  run $v
  if [ "$rc" -ne 0 ] || [ -s "$work/err" ] || ! grep -qE "^vitkd $want( \(git [0-9a-f]{4,}\))?$" "$work/out" ||
     [ "$(wc -l <"$work/out")" -ne 1 ]; then
    fail "vitkd $v: exit $rc, expected 'vitkd $want [(git COMMIT)]', got:"; cat "$work/out" "$work/err"
  else
    echo "ok   vitkd $v: $(cat "$work/out")"; passes=$((passes+1))
  fi
done
# Kokkos still gets its own --kokkos-* arguments, wherever they stand.
run version --kokkos-num-threads=1
if [ "$rc" -ne 0 ] || ! grep -q "^vitkd $want" "$work/out"; then
  fail "vitkd version --kokkos-num-threads=1: exit $rc"; cat "$work/out" "$work/err"
else echo "ok   --kokkos-* arguments go to Kokkos"; passes=$((passes+1)); fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
