#!/usr/bin/env bash
# What a user does: in a fresh venv, `pip install "hwbackends[cuda]"` from the wheels alone
# (plus the core's one index dependency, packaging) installs the core and the cuda plugin and
# nothing else of the eleven, and `hwbackends --version` says the installed version.
#   .ci/install_extra.sh PYTHON DIST
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1
dist=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
v="$tmp/venv/bin/python"
"$v" -m pip install -q --upgrade pip
"$v" -m pip install -q -c .ci/constraints.txt packaging
"$v" -m pip install -q --no-index --find-links "$dist" "hwbackends[cuda]"
cd "$tmp"
got=$("$v" -m pip list --format=freeze 2>/dev/null | grep -i '^hwbackends' | sort | tr '\n' ' ')
version=$("$v" -c 'import importlib.metadata as m; print(m.version("hwbackends"))')
want="hwbackends-cuda==$version hwbackends==$version "
[ "$got" = "$want" ] || { echo "install_extra: installed '$got', expected '$want'" >&2; exit 1; }
shown=$("$tmp/venv/bin/hwbackends" --version)
[ "$shown" = "hwbackends $version" ] || {
  echo "install_extra: hwbackends --version says '$shown', the metadata $version" >&2
  exit 1
}
HWBACKENDS_NO_CACHE=1 "$tmp/venv/bin/hwbackends" plugins --check >"$tmp/plugins.txt" || {
  cat "$tmp/plugins.txt" >&2
  echo "install_extra: hwbackends plugins --check failed" >&2
  exit 1
}
grep -q "cuda" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt" >&2; exit 1; }
echo "install_extra: hwbackends[cuda] from $dist installed ${got% } on $("$v" -V); --version: $shown"
