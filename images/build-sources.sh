#!/bin/bash
# Build the Python packages a variant pins to a git commit (pins.toml [sources]) into a wheelhouse.
# Runs in the Dockerfile's "sources" stage. Input: the SOURCES build arg, one entry per package, ';'-separated:
#   name|repo|ref|replaces (comma list)|submodules (comma list, "*" = all, recursive)|build env (K=V comma list)
# Output: <wheelhouse>/*.whl and <wheelhouse>/REPLACES (distributions the wheels replace). No SOURCES: no-op.
set -euo pipefail

wheelhouse=${1:?usage: build-sources.sh WHEELHOUSE}
mkdir -p "$wheelhouse"
: >"$wheelhouse/REPLACES"
[ -n "${SOURCES:-}" ] || { echo "bwstack: no source builds for this variant"; exit 0; }

IFS=';' read -r -a entries <<<"$SOURCES"
for entry in "${entries[@]}"; do
  IFS='|' read -r name repo ref replaces submodules build_env <<<"$entry"
  echo "bwstack: building $name from $repo @ $ref"
  src="/tmp/src-$name"
  git init -q "$src"
  git -C "$src" remote add origin "$repo"
  git -C "$src" fetch -q --depth 1 origin "$ref"
  git -C "$src" checkout -q --detach FETCH_HEAD
  test "$(git -C "$src" rev-parse HEAD)" = "$ref"
  if [ "$submodules" = "*" ]; then
    git -C "$src" submodule update -q --init --recursive
  elif [ -n "$submodules" ]; then
    IFS=',' read -r -a paths <<<"$submodules"
    git -C "$src" submodule update -q --init --depth 1 -- "${paths[@]}"
  fi
  (
    if [ -n "$build_env" ]; then
      IFS=',' read -r -a pairs <<<"$build_env"
      for pair in "${pairs[@]}"; do export "${pair?}"; done
    fi
    cd "$src"
    python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir "$wheelhouse" .
  )
  if [ -n "$replaces" ]; then tr ',' '\n' <<<"$replaces" >>"$wheelhouse/REPLACES"; fi
  rm -rf "$src"
done
