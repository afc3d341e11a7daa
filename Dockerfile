# bwstack serving image: a pinned SGLang base image + bwstack's serve wrapper and deep healthcheck.
#
# Every pinned input arrives as a build arg computed from images/<variant>/pins.toml; nothing is pinned in this
# file, so a build without the args fails at once. Build with one of:
#   bwstack build --variant v0.5.23-cu130
#   docker compose --profile <profile> build          (compose.yaml carries the same args)
#
# Entrypoint: python3 /opt/bwstack/healthchecks/serve.py <SGLang launch_server argv>   (CMD = that argv)
#   - starts `python3 -m sglang.launch_server <argv>` and exits with its status (128+N when killed by signal N);
#   - tees the server's output to stdout and to /var/log/bwstack/server.log (size-bounded, one rotation);
#   - forwards SIGTERM/SIGINT to the server;
#   - reads the HF token from /run/secrets/hf_token and the API key from /run/secrets/api_key (compose
#     secrets) into the server's environment/argv only; neither is ever printed or logged;
#   - fail-fast: a fatal healthcheck verdict (NaN, assert, unsupported arch, ...) stops the server, so the
#     container exits instead of serving garbage (BWSTACK_FAIL_FAST=0 turns this off).
# HEALTHCHECK: python3 /opt/bwstack/healthchecks/warmup.py -- liveness, log scan, effective backends, sampled
#   decode; prints "healthy: ..." or "unhealthy: <class>: <reason>" (read it with docker inspect).
# User: bwstack (uid 10001). Writable: /var/log/bwstack, /var/cache/bwstack (JIT caches), /var/lib/bwstack/hf
#   (HF_HOME, the model cache volume).

ARG BASE_IMAGE

# --- stage 1: packages pinned to a git commit (pins.toml [sources]); a no-op for variants without any ---------
# DL3006: the base is the BASE_IMAGE build arg, name:tag@digest from pins.toml, which hadolint cannot see.
# hadolint ignore=DL3006
FROM ${BASE_IMAGE} AS sources
ARG SOURCES=""
ARG PINNED_INSTALL=1
# DL3002: a build-only stage; only its /wheelhouse is copied out, so root here never reaches the final image.
# hadolint ignore=DL3002
USER 0
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]
LABEL io.bwstack.stage="build-only"
COPY images/build-sources.sh /usr/local/bin/bwstack-build-sources
RUN if [ "${PINNED_INSTALL}" = "1" ]; then SOURCES="${SOURCES}" bwstack-build-sources /wheelhouse; \
    else mkdir -p /wheelhouse && : >/wheelhouse/REPLACES; fi
# Names this build's build-only stage, so that `bwstack build` removes its own leftover and never another
# build's stage image while that build is still running (the classic builder keeps it untagged).
ARG BWSTACK_BUILD_ID=""
LABEL io.bwstack.build-id="${BWSTACK_BUILD_ID}"

# --- stage 2: the serving image -------------------------------------------------------------------------------
# DL3006: as above, the tag and digest arrive in BASE_IMAGE.
# hadolint ignore=DL3006
FROM ${BASE_IMAGE} AS serve
ARG BASE_IMAGE
# PIN_*: pins whose plain names are environment variables of the bases (nvidia/cuda sets CUDA_VERSION) or of
# this image (a rebuild FROM a bwstack image): an inherited ENV beats a build arg of the same name.
ARG PIN_VARIANT=""
ARG SGLANG_VERSION=""
ARG SGLANG_COMMIT=""
ARG PIN_CUDA_VERSION=""
ARG PIN_TORCH_CUDA_ARCH_LIST=""
ARG PIN_FLASHINFER_CUDA_ARCH_LIST=""
ARG GPU_ARCHS=""
ARG TRANSFORMERS_VERSION=""
ARG PYTHON_PINS=""
ARG SOURCES=""
ARG ENV_SWITCHES=""
# gpu (the CUDA variants) or cpu (real SGLang on the CPU). The one CPU difference in this file: a CPU variant
# needs no CUDA args (its pins.toml has no [cuda]). Its base, [base] image, is made locally by `bwstack build`
# (images/cpu-base/install.sh) from Debian + the variant's wheelhouse, laid out like the real base of its SGLang
# (0.5.23: a venv at /opt/sglang; 0.5.9: system site-packages, editable SGLang in /sgl-workspace/sglang), so
# every step below runs on it as it does on lmsysorg/sglang, everything but CUDA.
ARG DEVICE=""
# 1: install and verify the pinned overrides and source builds. 0 only for the stand-in build (tests, demo),
# whose Debian base carries none of the pinned packages and which must not reach PyPI from a build container.
ARG PINNED_INSTALL=1

USER 0
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]

# Refuse a build without the pins (a plain `docker build .`): the values live in images/<variant>/pins.toml.
RUN required="PIN_VARIANT PIN_CUDA_VERSION PIN_TORCH_CUDA_ARCH_LIST PIN_FLASHINFER_CUDA_ARCH_LIST GPU_ARCHS"; \
    if [ "${DEVICE}" = "cpu" ]; then required="PIN_VARIANT"; fi; \
    for arg in ${required}; do \
      if [ -z "${!arg}" ]; then \
        echo "bwstack: build arg $arg is empty; build with 'bwstack build --variant V' or 'docker compose build'" >&2; \
        exit 1; \
      fi; \
    done; \
    if [ -z "${SGLANG_VERSION}${SGLANG_COMMIT}" ]; then echo "bwstack: SGLANG_VERSION or SGLANG_COMMIT required" >&2; exit 1; fi

# Python overrides (hash-locked) and source-built wheels replace what the base image ships. `python3` is the
# base's interpreter through its PATH (first-contact.md 1.1): /opt/sglang/bin/python3 on a venv base.
# Overrides: from PyPI, `pip install --no-deps --require-hashes -r overrides.lock`. The one difference for a CPU
# variant: its build container has no network, so `bwstack build` stages exactly the locked override wheels
# (checked against overrides.lock) in images/<variant>/override-wheels/ (git-ignored; absent for a GPU variant,
# hence the [s] pattern, which lets COPY match nothing), and the same command runs with --no-index --find-links
# on them. Same lock, same hashes, same --no-deps; a CPU variant without staged wheels fails here. The copied
# wheels stay in that COPY layer (about 11 MB on v0.5.9-cpu; the classic builder has no build mounts); a GPU
# build copies the lock alone.
COPY --from=sources /wheelhouse /tmp/bwstack-wheelhouse
COPY images/${PIN_VARIANT}/overrides.lock images/${PIN_VARIANT}/override-wheel[s] /tmp/bwstack-overrides/
RUN lock=/tmp/bwstack-overrides/overrides.lock; \
    if [ "${PINNED_INSTALL}" = "1" ] && grep -q '^[A-Za-z0-9]' "$lock"; then \
      offline=(); \
      if compgen -G '/tmp/bwstack-overrides/*.whl' >/dev/null; then \
        offline=(--no-index --find-links /tmp/bwstack-overrides); \
      elif [ "${DEVICE}" = "cpu" ]; then \
        echo "bwstack: no override wheels in images/${PIN_VARIANT}/override-wheels; build with 'bwstack build --variant ${PIN_VARIANT}'" >&2; \
        exit 1; \
      fi; \
      echo "bwstack: pip install ${offline[*]} --no-deps --require-hashes -r overrides.lock"; \
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir "${offline[@]}" --no-deps --require-hashes \
        -r "$lock"; \
    fi; \
    if [ "${PINNED_INSTALL}" = "1" ] && compgen -G '/tmp/bwstack-wheelhouse/*.whl' >/dev/null; then \
      if [ -s /tmp/bwstack-wheelhouse/REPLACES ]; then \
        xargs -r env PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip uninstall -y </tmp/bwstack-wheelhouse/REPLACES; \
      fi; \
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir --no-deps --force-reinstall \
        /tmp/bwstack-wheelhouse/*.whl; \
    fi; \
    rm -rf /tmp/bwstack-wheelhouse /tmp/bwstack-overrides

# The image must contain exactly what pins.toml says (skipped only for the CPU stand-in build).
COPY images/verify_pins.py /opt/bwstack/verify_pins.py
RUN if [ "${PINNED_INSTALL}" = "1" ]; then \
      SGLANG_VERSION="${SGLANG_VERSION}" PYTHON_PINS="${PYTHON_PINS}" SOURCES="${SOURCES}" \
        python3 /opt/bwstack/verify_pins.py; \
    fi

# Unprivileged user and the writable paths.
RUN if ! getent group bwstack >/dev/null; then groupadd --system --gid 10001 bwstack; fi; \
    if ! getent passwd bwstack >/dev/null; then \
      useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/bwstack --shell /usr/sbin/nologin bwstack; \
    fi; \
    mkdir -p /opt/bwstack /var/log/bwstack /var/cache/bwstack /var/lib/bwstack/hf; \
    chown -R bwstack:bwstack /var/log/bwstack /var/cache/bwstack /var/lib/bwstack

COPY healthchecks/ /opt/bwstack/healthchecks/
COPY images/${PIN_VARIANT}/versions.json /opt/bwstack/versions.json
COPY images/${PIN_VARIANT}/sglang-args.json /opt/bwstack/sglang-args.json
RUN chmod 0755 /opt/bwstack/healthchecks/*.py; \
    python3 -m compileall -q /opt/bwstack/healthchecks; \
    printf '%s\n' ${ENV_SWITCHES} >/opt/bwstack/env; \
    chmod -R a+rX /opt/bwstack

ENV BWSTACK_VARIANT=${PIN_VARIANT} \
    TORCH_CUDA_ARCH_LIST=${PIN_TORCH_CUDA_ARCH_LIST} \
    FLASHINFER_CUDA_ARCH_LIST=${PIN_FLASHINFER_CUDA_ARCH_LIST} \
    BWSTACK_ENV_FILE=/opt/bwstack/env \
    B12X_COMPILE_CACHE_DIR=/var/cache/bwstack/b12x \
    BWSTACK_LOG=/var/log/bwstack/server.log \
    CUDA_CACHE_PATH=/var/cache/bwstack/cuda \
    CUTE_DSL_CACHE_DIR=/var/cache/bwstack/cute_dsl \
    DG_JIT_CACHE_DIR=/var/cache/bwstack/deep_gemm \
    FLASHINFER_NO_DOWNLOAD=1 \
    FLASHINFER_WORKSPACE_BASE=/var/cache/bwstack/flashinfer \
    HF_HOME=/var/lib/bwstack/hf \
    HOME=/var/lib/bwstack \
    PYTHONUNBUFFERED=1 \
    SGLANG_CACHE_DIR=/var/cache/bwstack/sglang \
    SGLANG_DG_CACHE_DIR=/var/cache/bwstack/deep_gemm \
    SGLANG_JIT_CACHE_DIR=/var/cache/bwstack/sglang/jit \
    SGLANG_RUST_BUILD_MODE=never \
    TILELANG_CACHE_DIR=/var/cache/bwstack/tilelang \
    TORCHINDUCTOR_CACHE_DIR=/var/cache/bwstack/torchinductor \
    TRITON_CACHE_DIR=/var/cache/bwstack/triton \
    TRTLLM_DG_CACHE_DIR=/var/cache/bwstack/trtllm_dg \
    TVM_FFI_CACHE_DIR=/var/cache/bwstack/tvm-ffi \
    XDG_CACHE_HOME=/var/cache/bwstack/xdg

# The fixed environment above is healthchecks/imagelayout.py (FIXED_ENV, CACHE_ENV; a test keeps both equal).
# As root: the cache folders for the serving user, SGLang and site-packages byte-compiled (uid 10001 cannot
# write __pycache__ there), an old FlashInfer's cubin folder made writable. Then, as the serving user, the
# image checks itself: HOME, caches, FlashInfer cubin/jit-cache versions and (pinned builds) the imports the
# server needs first, so a broken override fails the build, not the first start.
RUN python3 /opt/bwstack/healthchecks/selfcheck.py --prepare
USER 10001:10001
RUN if [ "${PINNED_INSTALL}" = "1" ]; then python3 /opt/bwstack/healthchecks/selfcheck.py --build; \
    else python3 /opt/bwstack/healthchecks/selfcheck.py --build --no-imports; fi

# Declared late so that a new revision or build date never invalidates the cached layers above.
ARG BWSTACK_VERSION=""
ARG BWSTACK_REVISION=""
ARG BUILD_DATE=""

LABEL io.bwstack.stage="serve" \
      org.opencontainers.image.title="bwstack SGLang ${PIN_VARIANT}" \
      org.opencontainers.image.description="SGLang for NVIDIA Blackwell, pinned by bwstack variant ${PIN_VARIANT}" \
      org.opencontainers.image.version="${PIN_VARIANT}" \
      org.opencontainers.image.revision="${BWSTACK_REVISION}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      io.bwstack.version="${BWSTACK_VERSION}" \
      io.bwstack.variant="${PIN_VARIANT}" \
      io.bwstack.sglang="${SGLANG_VERSION}" \
      io.bwstack.sglang-commit="${SGLANG_COMMIT}" \
      io.bwstack.transformers="${TRANSFORMERS_VERSION}" \
      io.bwstack.cuda="${PIN_CUDA_VERSION}" \
      io.bwstack.torch-cuda-arch-list="${PIN_TORCH_CUDA_ARCH_LIST}" \
      io.bwstack.flashinfer-cuda-arch-list="${PIN_FLASHINFER_CUDA_ARCH_LIST}" \
      io.bwstack.gpu-archs="${GPU_ARCHS}" \
      io.bwstack.python-pins="${PYTHON_PINS}" \
      io.bwstack.sources="${SOURCES}" \
      io.bwstack.env="${ENV_SWITCHES}" \
      io.bwstack.device="${DEVICE}" \
      io.bwstack.pins-verified="${PINNED_INSTALL}"

# numeric, so Kubernetes runAsNonRoot can verify it (the name is bwstack)
USER 10001:10001
WORKDIR /var/lib/bwstack
EXPOSE 30000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=90s --start-period=45m --retries=3 \
  CMD ["python3", "/opt/bwstack/healthchecks/warmup.py", "--mode", "light"]
ENTRYPOINT ["python3", "/opt/bwstack/healthchecks/serve.py"]
