#!/usr/bin/env bash
# Install the release wheels alone into a fresh venv for one Python, then run the tests of
# this checkout against them: nothing of the checkout is importable there (src/ and
# plugins/*/src are not on sys.path; the check below proves it).
#   .ci/wheels.sh PYTHON DIST [pytest arguments]
# Index dependencies: the `test`, `lint` and `release` dependency groups (the `integration`
# group needs torch), the core's own (packaging) and Transformers
# with kernels (the reports read the installed Transformers' files), at the versions of
# .ci/constraints.txt; the 11 distributions come from DIST only (--no-index). torch (and so
# Accelerate) is not installed: for this Python the index offers only the CUDA build
# (gigabytes), so the tests that import torch skip here, declared in HWBACKENDS_TESTS_WITHOUT;
# they run in scripts/test.sh's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1
dist=$(cd "$2" && pwd)
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
v="$tmp/venv/bin/python"
"$v" -m pip install -q --upgrade pip
hf=("transformers[kernels]")
# The pinned Transformers (.ci/constraints.txt) needs Python 3.11: on 3.10 the tests that read
# an installed Transformers skip.
"$v" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || hf=()
# What this run lacks on purpose: importing it skips the test that does (conftest.py); any
# other missing module is a failure, as in scripts/test.sh's run.
without=torch,accelerate,lightning_fabric
[ ${#hf[@]} -gt 0 ] || without=$without,transformers,kernels
export HWBACKENDS_TESTS_WITHOUT=$without
"$v" -m pip install -q -c .ci/constraints.txt --group test --group lint --group release --group docs packaging ${hf[@]+"${hf[@]}"}
"$v" -m pip install -q --no-index --find-links "$dist" "hwbackends[all]"
# Run from outside the checkout so that only the installed files can be imported.
(cd "$tmp" && "$v" - "$dist") <<'PY'
import importlib.metadata as md
import sys
from pathlib import Path

import hwbackends

site = Path(hwbackends.__file__).resolve().parents[1]
names = ["hwbackends"] + [f"hwbackends-{n}" for n in
         ("cuda", "rocm", "xpu", "mps", "neuron", "tpu", "hpu", "npu", "mlu", "musa")]
for name in names:
    d = md.distribution(name)
    assert d.read_text("direct_url.json") is None or '"editable"' not in d.read_text("direct_url.json"), name
    module = __import__(name.replace("-", "_"))
    assert Path(module.__file__).resolve().is_relative_to(site), (name, module.__file__)
    assert d.version == module.__version__, (name, d.version, module.__version__)
print(f"wheels: {len(names)} distributions from {sys.argv[1]} in {site} on Python {sys.version.split()[0]}")
PY
"$tmp/venv/bin/pytest" "$@"
