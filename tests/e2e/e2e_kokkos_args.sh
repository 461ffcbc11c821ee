#!/usr/bin/env bash
# --kokkos-* arguments reach Kokkos in a command that starts it: `vitkd train`
# with --kokkos-tools-library=PROBE (--kokkos-tools-libs from Kokkos 3.7 on)
# loads the tool tests/tools/kokkos_probe.c, which records that Kokkos
# started and which kernels ran (the augmentation kernel among them); the same
# run without the argument loads no tool. `vitkd --help` stays vitkd's own page
# (tests/e2e/e2e_cli.sh).
#   e2e_kokkos_args.sh WORKDIR PROBE.so     (env: VITKD, SRC)
source "$(dirname "$0")/../lib/common.sh"
work=$1 probe=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
synthetic syn.h5 32 16 8 4
tiny_config k.toml train.max_steps=1 train.threads=1 train.final_eval=false 'run.out_dir="run"'
flag=--kokkos-tools-libs
"$VITKD" --kokkos-help 2>&1 | grep -q -- "$flag" || flag=--kokkos-tools-library
export VITKD_KOKKOS_PROBE_OUT=$PWD/probe.txt
LOG=plain.log expect 0 "$VITKD" train k.toml
[ ! -e probe.txt ] || fail "a tool was loaded without $flag: $(head -3 probe.txt)"
LOG=probe.log expect 0 "$VITKD" train k.toml --set run.out_dir=run2 "$flag=$probe"
[ -s probe.txt ] || fail "$flag=$probe: Kokkos loaded no tool ($(grep -m1 'host kernels' probe.log))"
grep -qx init probe.txt || fail "the tool was not initialised: $(head -3 probe.txt)"
grep -qx "Data::normalize_augment" probe.txt || fail "no Data::normalize_augment kernel: $(sort -u probe.txt | head)"
echo "ok: $flag reached Kokkos in vitkd train; kernels: $(grep -v '^init$\|^finalize$' probe.txt | sort -u | tr '\n' ' ')"
