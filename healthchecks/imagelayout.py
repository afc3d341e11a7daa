"""Where the serving image keeps things: paths, cache variables and the fixed environment (stdlib only).

The one home of every path and environment name the image sets. The Dockerfile's ``ENV`` block, the rendered
Compose/Kubernetes mounts (through :mod:`bwstack.launch`), the in-image self-check (``selfcheck.py``) and the
docs are checked against these tables by tests, so a cache variable is named here once. Each cache variable
points under ``JIT_CACHE``, the per-variant volume, so compiled kernels survive a container re-create.
"""

from __future__ import annotations

#: the serving user (numeric, so Kubernetes runAsNonRoot can verify it) and its home
UID = 10001
GID = 10001
HOME = "/var/lib/bwstack"
HC_DIR = "/opt/bwstack/healthchecks"
SERVER_LOG = "/var/log/bwstack/server.log"
HF_HOME = "/var/lib/bwstack/hf"
#: where the model cache helper (bwstack.host.cachevolume) mounts bwstack's host packages
HOST_SOURCE = "/opt/bwstack-host"


def image_ref(image_repo: str, variant_name: str) -> str:
    """A variant's serving image: ``<stack.image_repo>:<variant>`` (launch.image_ref, and the model cache's
    helper container, which cannot import the stack's schema)."""
    return f"{image_repo}:{variant_name}"


JIT_CACHE = "/var/cache/bwstack"
ENV_FILE = "/opt/bwstack/env"
#: the healthcheck's state file (a fixed path inside the container)
HC_STATE = "/tmp/bwstack-hc.json"  # noqa: S108 - a fixed path inside the container, by design
#: the Kubernetes readiness probe's own state file (apart from the liveness probe's HC_STATE)
HC_READY_STATE = "/tmp/bwstack-hc-ready.json"  # noqa: S108 - a fixed path inside the container, by design
#: where Compose and Kubernetes mount secret files
SECRETS_DIR = "/run/secrets"
#: the image's pins manifest (images/<variant>/versions.json, copied in by the Dockerfile)
VERSIONS_FILE = "/opt/bwstack/versions.json"
#: the pinned SGLang's parser snapshot in a stand-in image (images/<variant>/sglang-args.json)
PARSER_SNAPSHOT = "/opt/bwstack/sglang-args.json"
#: the stand-in's stdlib-only code in its base image (on PYTHONPATH)
STANDIN_CODE = "/opt/standin"
#: ``bwstack lock --inspect``: where the healthchecks folder is mounted, read-only, in a base image under test
INSPECT_MOUNT = "/opt/bwstack-inspect/healthchecks"
#: a bench run's output file, inside the container (one per run: the suffix is a random hex)
BENCH_OUTPUT_PREFIX = "/tmp/bwstack-bench-"  # noqa: S108 - inside the container, by design
#: the upstream base images' own layout (first-contact.md rows 1.1, 1.4): 0.5.23's venv of SGLang, 0.5.9's
#: editable SGLang source tree
SGLANG_VENV = "/opt/sglang"
SGLANG_WORKSPACE = "/sgl-workspace/sglang"

#: every cache SGLang and its kernels write, on the JIT volume (name -> path). Sources: first-contact 3.4-3.6
#: (SGLang 0.5.9/0.5.23 ``srt/environ.py``, FlashInfer ``jit/env.py``, apache-tvm-ffi ``cpp/extension.py``).
CACHE_ENV: dict[str, str] = {
    # the catch-all of torch extensions, FlashInfer b12x and other XDG-aware writers
    "XDG_CACHE_HOME": f"{JIT_CACHE}/xdg",
    "TRITON_CACHE_DIR": f"{JIT_CACHE}/triton",
    "TORCHINDUCTOR_CACHE_DIR": f"{JIT_CACHE}/torchinductor",
    "CUDA_CACHE_PATH": f"{JIT_CACHE}/cuda",
    # FlashInfer appends .cache/flashinfer itself
    "FLASHINFER_WORKSPACE_BASE": f"{JIT_CACHE}/flashinfer",
    # SGLang's own root (0.5.23: deep_gemm, cute_aot, rust_extensions, torch_compile_cache; 0.5.9: p2p cache)
    "SGLANG_CACHE_DIR": f"{JIT_CACHE}/sglang",
    # SGLang's JIT kernels (default the literal ~/.cache/sglang/jit, not derived from SGLANG_CACHE_DIR)
    "SGLANG_JIT_CACHE_DIR": f"{JIT_CACHE}/sglang/jit",
    # SGLang writes DG_JIT_CACHE_DIR from this one at import (0.5.9 and 0.5.23 compile_utils.py)
    "SGLANG_DG_CACHE_DIR": f"{JIT_CACHE}/deep_gemm",
    # the same path, for DeepGEMM imported without SGLang (SGLang overwrites it with SGLANG_DG_CACHE_DIR)
    "DG_JIT_CACHE_DIR": f"{JIT_CACHE}/deep_gemm",
    "TVM_FFI_CACHE_DIR": f"{JIT_CACHE}/tvm-ffi",
    "TILELANG_CACHE_DIR": f"{JIT_CACHE}/tilelang",
    # FlashInfer's internal TRT-LLM DeepGEMM (default $HOME/.tensorrt_llm)
    "TRTLLM_DG_CACHE_DIR": f"{JIT_CACHE}/trtllm_dg",
    # CuTe DSL's compiled kernels (nvidia-cutlass-dsl, an SGLang 0.5.23 dependency, and FlashInfer 0.7.2's
    # vendored copy: ``base_dsl/cache_helpers.py``): default /tmp/<user>/cutlass_python_cache, in the
    # container layer. FlashInfer's ``prims_ts`` sets it under FLASHINFER_WORKSPACE_BASE only when it happens
    # to be imported first, so it is pinned here
    "CUTE_DSL_CACHE_DIR": f"{JIT_CACHE}/cute_dsl",
    # FlashInfer 0.7.2 b12x (``experimental/b12x/_lib/compiler.py`` ``_cute_compile_cache_dir``): this
    # variable, else $XDG_CACHE_HOME/b12x/compile; named so it stays on the volume whatever XDG says
    "B12X_COMPILE_CACHE_DIR": f"{JIT_CACHE}/b12x",
}

#: the rest of the fixed environment of the serving image (the Dockerfile's ENV block, beside CACHE_ENV and
#: the values that come from pins.toml)
FIXED_ENV: dict[str, str] = {
    # set, so a runtime user without a passwd entry (Kubernetes runAsUser) does not get HOME=/
    "HOME": HOME,
    "HF_HOME": HF_HOME,
    "BWSTACK_LOG": SERVER_LOG,
    "BWSTACK_ENV_FILE": ENV_FILE,
    # SGLang 0.5.23 would otherwise try `cargo build` of its Rust radix tree at start (rust_extensions/)
    "SGLANG_RUST_BUILD_MODE": "never",
    # a missing FlashInfer cubin fails at first use instead of reaching for the network
    "FLASHINFER_NO_DOWNLOAD": "1",
    "PYTHONUNBUFFERED": "1",
}


def image_env() -> dict[str, str]:
    """Every variable the Dockerfile's final ENV sets from a constant (not a build arg), sorted by name."""
    return dict(sorted({**FIXED_ENV, **CACHE_ENV}.items()))


#: folders the serving user must be able to write (created and chowned by the Dockerfile)
WRITABLE = (SERVER_LOG.rsplit("/", 1)[0], JIT_CACHE, HF_HOME, HOME)
