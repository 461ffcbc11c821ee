# shellcheck shell=bash disable=SC2034  # EXPECT is read by the caller
# Sourced by jobs/gpu/check.sh and tests/gpu/run.sh: whether a GPU is
# expected here, so that no check that skipped can pass for green on a GPU
# machine.
#
#   gpu_device        prints the first /dev/nvidia* device (nothing, exit 1, when none)
#   gpu_expect DRY    sets EXPECT to 0 or 1
#
# VITKD_EXPECT_GPU=1 (or on/yes/true): 1. Unset or empty: 1 wherever a
# /dev/nvidia* device exists (VITKD_GPU_DEVICE_GLOB, for the tools' own
# test), except in the dry run (DRY=1: the CPU stands in). Set to anything
# else (0) on a machine with a GPU: 0, with one warning line on stderr
# (unless VITKD_GPU_EXPECT_DECIDED=1: the caller has warned already).
gpu_device() {
  local dev
  dev=$(compgen -G "${VITKD_GPU_DEVICE_GLOB:-/dev/nvidia[0-9]*}" | head -1)
  [ -n "$dev" ] && echo "$dev"
}
gpu_expect() {
  local dry=${1:-0} dev
  dev=$(gpu_device)
  case "${VITKD_EXPECT_GPU-}" in
    1|ON|on|yes|true) EXPECT=1 ;;
    "") EXPECT=0; [ -n "$dev" ] && [ "$dry" != 1 ] && EXPECT=1 ;;
    *)
      EXPECT=0
      if [ -n "$dev" ] && [ "$dry" != 1 ] && [ "${VITKD_GPU_EXPECT_DECIDED:-0}" != 1 ]; then
        echo "warning: VITKD_EXPECT_GPU=$VITKD_EXPECT_GPU on a machine with a GPU ($dev): a check that does not run counts as skipped, not failed" >&2
      fi ;;
  esac
}
