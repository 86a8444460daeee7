#!/usr/bin/env bash
# The tree mypy checks, printed for `mypy $(bash .ci/typecheck-tree.sh)`: build/typecheck/nnsql holds
# nnsql/'s modules and the design folders as symbolic links, the layout of the installed package. mypy
# cannot follow nnsql/__init__.py, which adds the checkout's root to the package's path at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck/nnsql
rm -rf "$tree"
mkdir -p "$tree"
for path in nnsql/*.py export train serve bench demo imagedata; do
    ln -s "$PWD/$path" "$tree/"
done
echo "$tree"
