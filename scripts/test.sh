#!/usr/bin/env bash
# Install the core, every in-repo plugin and the test tools into .venv, then run every test.
# Works on a fresh machine with only python3 and access to the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
plugins=()
for d in plugins/hwbackends-*/; do
  [ -f "$d/pyproject.toml" ] && plugins+=(-e "$d")
done
# torch==2.13.0 is the CPU wheel; transformers[kernels] is bounded so pip picks a kernels
# release that fits (see pyproject.toml). .ci/constraints.txt pins the versions the tests and
# the generated docs were checked against, so a new upstream release cannot change them.
.venv/bin/python -m pip install -q -c .ci/constraints.txt -e ".[dev,transformers,docs]" "${plugins[@]}"
exec .venv/bin/python -m pytest "$@"
