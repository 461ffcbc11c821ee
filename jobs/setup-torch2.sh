#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment with today's PyTorch from
# PyPI: the peer for jobs/bench/vs_pytorch.sh and the LibTorch 2.x build lane
# (jobs/lanes/torch2.sh). Never needed by the README's two commands, and never
# installed into the system Python.
#
#   bash jobs/setup-torch2.sh            # prints the environment's folder last
#   VITKD_TORCH2_VENV=DIR                # where it lives (default below)
#   VITKD_TORCH2_SPEC='torch==2.15.0'    # what pip installs
#
# Beside torch: numpy and h5py (vitkd's files), timm and safetensors (the
# timm import/export tests, docs/timm.md). The extras are installed in one pip
# call together with the torch spec, so the resolver keeps that torch: timm
# pulls in torchvision, whose wheels pin one torch each, and pip picks the
# torchvision of the torch that is there instead of replacing torch. An
# existing venv without an extra gets it the same way on the next run.
#
# PyPI's Linux torch is a CUDA build; it also runs on a CPU-only machine, and
# its LibTorch (headers, share/cmake/Torch, libtorch_cuda.so) is what a C++
# build against a recent torch uses. The download is several GB the first time.
set -euo pipefail
VENV=${VITKD_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vitkd/torch2-venv}
SPEC=${VITKD_TORCH2_SPEC:-torch==2.15.0}
EXTRA=(numpy h5py timm safetensors)
EXTRA_MODULES=(numpy h5py timm safetensors)   # their import names

if [ ! -x "$VENV/bin/python" ]; then
  if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends python3-venv
  fi
  echo "setup-torch2: creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv "$VENV"
fi
if "$VENV/bin/python" - "$SPEC" "${EXTRA_MODULES[@]}" <<'PY' 2>/dev/null
import importlib.util, sys
from importlib.metadata import version
name, _, want = sys.argv[1].partition("==")
have = version(name)
missing = [m for m in sys.argv[2:] if importlib.util.find_spec(m) is None]
sys.exit(0 if (not want or have.split("+")[0] == want) and not missing else 1)
PY
then
  echo "setup-torch2: $SPEC and ${EXTRA[*]} already in $VENV"
else
  echo "setup-torch2: installing $SPEC ${EXTRA[*]} into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "$SPEC" "${EXTRA[@]}"
fi
"$VENV/bin/python" - "$SPEC" <<'PY'
import sys
import torch
name, _, want = sys.argv[1].partition("==")
if name == "torch" and want and torch.__version__.split("+")[0] != want:
    sys.exit(f"setup-torch2: pip left torch {torch.__version__} in the venv, not {want}; "
             f"remove the venv and run jobs/setup-torch2.sh again")
print("setup-torch2: torch", torch.__version__, "CUDA", torch.version.cuda, "cmake prefix",
      torch.utils.cmake_prefix_path)
PY
echo "$VENV"
