#!/usr/bin/env bash
# Build the 22 release artifacts (an sdist and a wheel for the core and each plugin in
# plugins/) into dist/ (or $1), then check them: `twine check --strict` and
# scripts/check_dist.py (licence text, metadata version, versions, ranges, links).
# The core first, then the plugins: the order docs/release.md uploads them in.
# Each wheel is built from its sdist (python -m build), so a file missing from an sdist fails
# here. Needs the `release` dependency group (build, twine): `pip install --group release`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
out=${1:-dist}
rm -rf "$out"
mkdir -p "$out"
projects=(.)
for d in plugins/hwbackends-*/; do
  [ -f "$d/pyproject.toml" ] && projects+=("${d%/}")
done
for p in "${projects[@]}"; do
  # --no-isolation: the build backend comes from this environment (the `test` group pins the
  # same hatchling range as build-system.requires), so building needs no index access.
  "$PY" -m build --no-isolation --outdir "$out" "$p" >"$out/.build.log" 2>&1 || {
    cat "$out/.build.log" >&2
    echo "build_dist: building $p failed (log above)" >&2
    exit 1
  }
done
rm -f "$out/.build.log"
"$PY" -m twine check --strict "$out"/*
"$PY" scripts/check_dist.py "$out"
