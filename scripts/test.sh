#!/usr/bin/env bash
# Install the core, every in-repo plugin and the test tools into .venv, then run every test.
# Works on a fresh machine with only python3 and access to the package registry.
# This is the same .venv as the README's first command: afterwards it also holds torch,
# Transformers, Accelerate and the plugins as editable installs, so `hwbackends env` there
# reports torch as installed. Use another folder for a clean report.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
plugins=()
for d in plugins/hwbackends-*/; do
  [ -f "$d/pyproject.toml" ] && plugins+=(-e "$d")
done
# Where no GPU is present, torch comes from PyTorch's CPU wheel index: on PyPI, torch==2.13.0
# for Linux is the CUDA build and pulls about 20 CUDA packages. --extra-index-url (not
# --index-url) keeps PyPI for torch's own dependencies; pip takes 2.13.0+cpu, the higher
# version of the two. Where the index cannot be reached, pip warns and takes what the
# configured registry offers. On an NVIDIA or AMD machine the default build is kept.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
if [ -e /dev/nvidiactl ] || [ -e /dev/kfd ] || [ -e /dev/dxg ]; then
  torch_index=()
else
  torch_index=(--extra-index-url "$TORCH_CPU_INDEX")
fi
.venv/bin/python -m pip install -q --retries 2 -c .ci/constraints.txt ${torch_index[@]+"${torch_index[@]}"} "torch==2.13.0"
# .ci/constraints.txt pins the versions the tests and the generated docs were checked
# against (the published extras take ranges), so a new upstream release cannot change them.
# torch is already satisfied. The developer's tools are PEP 735 dependency groups of
# pyproject.toml, not published extras: pip >= 25.1 installs them with --group.
.venv/bin/python -m pip install -q -c .ci/constraints.txt --group dev --group docs -e ".[transformers]" "${plugins[@]}"
# One process, as CI runs it; pass -n 2 to run it in two (pytest-xdist, about 25 % faster
# here).
exec .venv/bin/python -m pytest "$@"
