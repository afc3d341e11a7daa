#!/usr/bin/env bash
# The local base of a CPU variant, laid out like the real lmsysorg/sglang base of the same SGLang version, so
# that the Dockerfile's GPU path (overrides, verify_pins.py, the user, the caches, compileall, selfcheck.py)
# meets that layout in CI. Run as root by `bwstack build --variant <cpu variant>` (bwstack.build.cpubase) in a
# container of bwstack/standin-rootfs:bookworm with --network none and the variant's verified wheelhouse
# mounted read-only at $WHEELHOUSE; the container is then committed as the base image ([base] image).
#
#   LAYOUT=venv    the v0.5.23 base: `python3 -m venv /opt/sglang`, the closure installed into it, its bin/
#                  first on PATH (sgl-project/sglang PR #30612; first-contact.md rows 1.1, 1.2)
#   LAYOUT=system  the v0.5.9 base: the closure in the system site-packages as root; Debian's python3.11 is
#                  EXTERNALLY-MANAGED like Ubuntu's, and the base lifts PEP 668 only through root's pip config
#                  (`pip config set global.break-system-packages true`; first-contact.md rows 1.1, 1.3)
#   SGLANG_INSTALL=editable  SGLang's sdist unpacked as root into /sgl-workspace/sglang/python and installed
#                  `pip install --no-deps -e python` from /sgl-workspace/sglang, offline, with the locked build
#                  backend (first-contact.md row 1.4); =wheel: SGLang's wheel is part of the closure
# Both: no __pycache__ in site-packages (the bases delete it; the Dockerfile byte-compiles as root), root-owned
# caches under a 0700 /root as the bases leave them (/root/.cache/huggingface, /root/.cache/sglang/kernels.lock;
# first-contact.md rows 2.3, 3.8), WORKDIR /sgl-workspace/sglang (the commit sets it, row 6.3).
# CPU-only: Debian's python3.11 instead of Ubuntu's 3.12, the wheelhouse instead of PyPI, no CUDA.
set -euo pipefail

: "${WHEELHOUSE:?}" "${LAYOUT:?}" "${SGLANG_INSTALL:?}" "${SGLANG_VERSION:?}"
VENV=/opt/sglang
WORKSPACE=/sgl-workspace/sglang

pipwhl=""
for found in "$WHEELHOUSE"/pip-*.whl; do if [ -e "$found" ]; then pipwhl="$found"; fi; done
if [ -z "$pipwhl" ]; then echo "bwstack cpu-base: no pip wheel in $WHEELHOUSE" >&2; exit 1; fi

case "$LAYOUT" in
  venv)
    # Debian ships venv without ensurepip; pip comes from the closure (pip is locked like every other file).
    python3 -m venv --without-pip "$VENV"
    py="$VENV/bin/python3"
    bootstrap=()
    ;;
  system)
    py=$(command -v python3)  # /usr/bin/python3: the interpreter the base's PATH finds
    bootstrap=(env PIP_BREAK_SYSTEM_PACKAGES=1)  # the first pip run only; root's pip config below after that
    ;;
  *) echo "bwstack cpu-base: unknown LAYOUT $LAYOUT" >&2; exit 1 ;;
esac

install=(--no-index --find-links "$WHEELHOUSE" --no-deps --no-cache-dir --no-compile --disable-pip-version-check
         --no-warn-script-location --root-user-action=ignore)
echo "bwstack cpu-base: $py -m pip install ${install[*]} --require-hashes -r $WHEELHOUSE/closure.lock"
"${bootstrap[@]}" "$py" "$pipwhl/pip" install "${install[@]}" --require-hashes -r "$WHEELHOUSE/closure.lock"
if [ "$LAYOUT" = system ]; then
  "$py" -m pip config set global.break-system-packages true >/dev/null  # root's user config, as upstream (row 1.3)
fi

mkdir -p "$WORKSPACE"
if [ "$SGLANG_INSTALL" = editable ]; then
  mkdir -p "$WORKSPACE/python"
  tar --no-same-owner -xzf "$WHEELHOUSE/sglang-${SGLANG_VERSION}.tar.gz" -C "$WORKSPACE/python" --strip-components=1
  # build isolation, offline: the locked setuptools/setuptools-scm/wheel come from the wheelhouse and stay out
  echo "bwstack cpu-base: (cd $WORKSPACE && $py -m pip install ${install[*]} -e python)"
  (cd "$WORKSPACE" && "$py" -m pip install "${install[@]}" -e python)
fi

site=$("$py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
find "$site" -depth -name __pycache__ -type d -exec rm -rf {} +

mkdir -p /root/.cache/huggingface /root/.cache/sglang
: >/root/.cache/sglang/kernels.lock
chown -R root:root /root
chmod 0700 /root

where=$(cd / && "$py" -c 'import importlib.util as u; print(u.find_spec("sglang").origin)')
echo "bwstack cpu-base: $LAYOUT layout, python3 $py, site $site, sglang $where"
