#!/usr/bin/env bash
# Pre-flight for a GPU lease, run here before the device's clock starts
# (docs/gpu.md, "When a GPU is lent"). In order, each a one-line verdict:
#  1. the Python whose torch the device has (jobs/gpu/device.env): the venv
#     PYTHON (default ~/.cache/vitkd/torch211-venv, made by
#     jobs/setup-torch2.sh when missing); a torch other than the device's is
#     one line naming both, exit 1;
#  2. the carry: the Debian packages (jobs/gpu/prepare.sh, seconds when
#     present) and the prebuilt binaries: missing, built against another
#     torch, or older than the sources (one line naming the changed files)
#     means a build (jobs/gpu/pack.sh: about 5 minutes cold on 2 cores);
#  3. the size: the working tree as the device receives it (tracked and
#     untracked, not ignored) and gpu-carry/ at most PREFLIGHT_MAX_MIB
#     (default 60 of the device's 64);
#  4. the rehearsal with that exact carry (jobs/gpu/rehearse.sh, root): the
#     start (a_launch from carried files alone) and the whole dry run
#     (--dry-run; --quick leaves it out); with --other-os also the whole dry
#     run in a Debian 13 root file system (jobs/gpu/rehearse_rootfs.sh:
#     another glibc and Python, no tools of this machine);
#  5. the two device commands to run, with their limits.
# Exit 0 only when all of it holds.
#
#   bash jobs/gpu/preflight.sh            # everything (the dry run: a few minutes)
#   bash jobs/gpu/preflight.sh --quick    # without the dry run
#   bash jobs/gpu/preflight.sh --other-os # and the dry run in Debian 13 too (minutes more)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
QUICK=0 OTHER_OS=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --other-os) OTHER_OS=1 ;;
    *) echo "preflight.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
# shellcheck source=jobs/gpu/device.env
. "$ROOT/jobs/gpu/device.env"
VENV=${VITKD_DEVICE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vitkd/torch211-venv}
PYTHON=${PYTHON:-$VENV/bin/python}
CARRY=${CARRY:-$ROOT/gpu-carry}
MAX_MIB=${PREFLIGHT_MAX_MIB:-60}
t0=$(date +%s)
say() { printf 'preflight: %s\n' "$*"; }
fail() { printf 'preflight: FAILED: %s\n' "$*" >&2; exit 1; }

# ---- 1. the device's torch here ------------------------------------------------
if [ ! -x "$PYTHON" ] && [ -z "${VITKD_DEVICE_VENV:-}" ] && [ "$PYTHON" = "$VENV/bin/python" ]; then
  say "no venv with the device's torch at $VENV: making it (jobs/setup-torch2.sh; a few GB the first time)"
  VITKD_TORCH2_SPEC="torch==${DEVICE_TORCH%%+*}" VITKD_TORCH2_VENV=$VENV bash jobs/setup-torch2.sh > /tmp/vitkd-preflight-venv.log 2>&1 ||
    fail "jobs/setup-torch2.sh failed (/tmp/vitkd-preflight-venv.log)"
fi
here=$(timeout 120 "$PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda, int(torch.compiled_with_cxx11_abi()))' 2>/dev/null) ||
  fail "$PYTHON cannot import torch: set PYTHON to a Python with torch $DEVICE_TORCH"
read -r v c a <<< "$here"
[ "$v $c $a" = "$DEVICE_TORCH $DEVICE_TORCH_CUDA $DEVICE_CXX11_ABI" ] ||
  fail "$PYTHON has torch $v (CUDA $c, C++ ABI $a), the device has torch $DEVICE_TORCH (CUDA $DEVICE_TORCH_CUDA, C++ ABI $DEVICE_CXX11_ABI) (jobs/gpu/device.env): binaries built here would not load there"
say "torch $v (CUDA $c, C++ ABI $a) in $PYTHON: the device's"

# ---- 2. the carry ------------------------------------------------------------------
CARRY=$CARRY bash jobs/gpu/prepare.sh > /tmp/vitkd-preflight-prepare.log 2>&1 ||
  fail "jobs/gpu/prepare.sh failed (/tmp/vitkd-preflight-prepare.log)"
why=""
if [ ! -s "$CARRY/prebuilt/build.json" ]; then
  why="no prebuilt binaries in $CARRY/prebuilt"
else
  built=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["torch"])' "$CARRY/prebuilt/build.json" 2>/dev/null)
  changed=$("$PYTHON" jobs/gpu/lib/prebuilt.py changed --carry "$CARRY" --root "$ROOT")
  if [ "$built" != "$v" ]; then why="the prebuilt binaries are for torch $built, not $v"
  elif [ -n "$changed" ]; then why="the carry is older than the sources: $changed"; fi
fi
if [ -n "$why" ]; then
  say "$why: rebuilding (jobs/gpu/pack.sh, log /tmp/vitkd-preflight-pack.log)"
  CARRY=$CARRY PYTHON=$PYTHON bash jobs/gpu/pack.sh > /tmp/vitkd-preflight-pack.log 2>&1 ||
    fail "jobs/gpu/pack.sh failed (tail of /tmp/vitkd-preflight-pack.log: $(tail -1 /tmp/vitkd-preflight-pack.log))"
  changed=$("$PYTHON" jobs/gpu/lib/prebuilt.py changed --carry "$CARRY" --root "$ROOT") ||
    fail "the rebuilt carry still differs from the sources: $changed"
fi
say "prebuilt binaries up to date: $("$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print("torch", d["torch"] + ", sources", d["source"] + ", built", d["built"])' "$CARRY/prebuilt/build.json")"

# ---- 3. the size the device receives ---------------------------------------------------
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
carry=$(du -sb "$CARRY" | cut -f1)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
total=$((tree + carry))
[ "$total" -le $((MAX_MIB * 1048576)) ] ||
  fail "the working tree ($(mib "$tree") MiB) and $CARRY ($(mib "$carry") MiB) make $(mib "$total") MiB, over $MAX_MIB of the device's $DEVICE_CARRY_MIB MiB: remove untracked files or shrink the carry"
say "size: working tree $(mib "$tree") MiB + carry $(mib "$carry") MiB = $(mib "$total") MiB (at most $MAX_MIB of $DEVICE_CARRY_MIB)"

# ---- 4. the rehearsal with this carry ------------------------------------------------------
R=/tmp/vitkd-preflight
rm -rf "$R" && mkdir -p "$R"
verdict() { "$PYTHON" jobs/gpu/lib/verdict.py "preflight: rehearsal" "$@"; }  # SUMMARY WHAT CONDITION
CARRY=$CARRY PYTHON=$PYTHON OUT=$R/start bash jobs/gpu/rehearse.sh > "$R/start.log" 2>&1
verdict "$R/start/summary.json" "the device run's start from carried files" \
  'c["a_launch"]["status"] == "pass" and n["fail"] == 0' || fail "see $R/start.log"
if [ "$QUICK" = 0 ]; then
  CARRY=$CARRY PYTHON=$PYTHON OUT=$R/dry bash jobs/gpu/rehearse.sh --dry-run > "$R/dry.log" 2>&1
  verdict "$R/dry/summary.json" "the whole dry run from carried files" 'n["fail"] == 0 and n["pass"] >= 10' ||
    fail "see $R/dry.log"
fi

if [ "$OTHER_OS" = 1 ]; then
  CARRY=$CARRY PYTHON=$PYTHON OUT=$R/rootfs bash jobs/gpu/rehearse_rootfs.sh > "$R/rootfs.log" 2>&1
  verdict "$R/rootfs/summary.json" "the whole dry run in Debian 13" 'n["fail"] == 0 and n["pass"] >= 10' ||
    fail "see $R/rootfs.log"
fi

# ---- 5. what to run there ------------------------------------------------------------------
say "ready in $(($(date +%s) - t0)) s. On the GPU machine (the device tool's run, carry [\"gpu-carry\"], timeout_s $((DEVICE_PART_S + 30))), one after the other:"
say "  OUT=\$OUT PYTHON=python3 bash jobs/gpu/check.sh --part=1"
say "  OUT=\$OUT PYTHON=python3 bash jobs/gpu/check.sh --part=2"
