"""Throwaway venvs holding one pinned SGLang wheel next to a CPU build of torch.

bwstack asks the pinned SGLang itself for its argument parser (``bwstack lock --args``) and for the backends
it would pick on a GPU arch (``bwstack explain``). Both run SGLang's own code on the CPU, in a venv per SGLang
version under ``$BWSTACK_CACHE/venvs/sglang-<version>`` (default ``~/.cache/bwstack``), built once and reused:

- ``python3.11 -m venv`` (SGLang 0.5.23 wheels are cp311; 3.11 runs every version bwstack pins);
- the sglang wheel from PyPI (``pip download --no-deps``; its sha256 goes into the snapshot's provenance);
- torch 2.13.0 **CPU** and the pure-Python packages SGLang imports, all pinned and installed ``--no-deps`` so
  that pip can never pull a CUDA torch or drift to newer releases;
- ``bwstack_venv_shims`` (see :mod:`bwstack.know.venv_scripts.venv_shims`), a marker file last.

A venv without its marker is half-built and is rebuilt. A lock file serialises builders.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bwstack.errors import ExternalError, UserError
from bwstack.know import venv_scripts

Progress = Callable[[str], None]

CPU_TORCH = "torch==2.13.0+cpu"
#: where ``torch==X+cpu`` lives when no local wheel (pip find-links) provides it; override for a mirror
TORCH_CPU_INDEX = os.environ.get("BWSTACK_TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")

#: what every supported SGLang imports on the way to its parser and resolution code (exact closure, --no-deps)
BASE_PACKAGES: tuple[str, ...] = (
    "aiohappyeyeballs==2.7.1", "aiohttp==3.14.5", "aiosignal==1.4.0", "annotated-doc==0.0.7",
    "annotated-types==0.8.0", "anyio==4.16.0", "apache-tvm-ffi==0.1.11", "asttokens==3.0.2", "attrs==26.1.0",
    "certifi==2026.10.19.post1", "charset-normalizer==3.5.3", "click==8.5.1", "dill==0.4.1",
    "executing==2.3.0", "filelock==4.3.1", "frozenlist==1.8.0", "fsspec==2026.9.0", "gguf==0.19.0",
    "h11==0.16.0", "hf-xet==1.8.0", "idna==3.20", "ipython==9.18.1", "ipython-pygments-lexers==1.1.1",
    "jedi==0.20.1", "jinja2==3.1.6", "loguru==0.7.3", "markdown-it-py==4.3.0", "markupsafe==3.0.4",
    "matplotlib-inline==0.2.2", "mdurl==0.1.2", "mpmath==1.3.0", "msgspec==0.23.0", "multidict==7.2.1",
    "networkx==3.6.1", "numpy==2.4.6", "orjson==3.13.0", "packaging==26.4", "parso==0.8.7", "pexpect==4.9.0",
    "pillow==13.0.0", "prompt-toolkit==3.0.53", "propcache==0.5.4", "psutil==7.2.2", "ptyprocess==0.7.0",
    "pure-eval==0.2.4", "pybase64==1.5.1", "pydantic==2.14.4", "pydantic-core==2.50.5", "pygments==2.21.0",
    "pyyaml==6.0.4", "pyzmq==27.3.0", "regex==2026.11.19", "requests==2.34.2", "rich==15.0.0",
    "safetensors==0.8.0", "sentencepiece==0.2.1", "shellingham==1.5.4", "stack-data==0.6.3",
    "starlette==1.10.0", "sympy==1.14.0", "tqdm==4.70.1", "traitlets==5.16.1", "triton==3.8.0",
    "truststore==0.10.5", "typer==0.29.2", "typing-extensions==4.16.0", "typing-inspection==0.4.5",
    "urllib3==2.8.0", "wcwidth==0.9.4", "yarl==1.25.1",
)  # fmt: skip

#: per SGLang release line: the transformers family it needs (its own pin where that knows GLM-5) and the rest
EXTRA_PACKAGES: dict[str, tuple[str, ...]] = {
    # 0.5.9 pins transformers 4.57.1, which does not know glm_moe_dsa; the image overrides it with 5.2.0
    "0.5.9": (
        "transformers==5.2.0", "tokenizers==0.22.2", "huggingface-hub==1.33.0", "httpx==0.28.1",
        "httpcore==1.0.9", "httpx2==2.16.2", "httpcore2==2.16.2", "sniffio==1.3.1", "typer-slim==0.24.0",
        "openai==2.6.1", "jiter==0.19.0", "distro==1.9.0", "partial-json-parser==0.2.1.1.post7",
        "compressed-tensors==0.18.0",
    ),
    "0.5.15": (
        "transformers==5.12.1", "tokenizers==0.22.2", "huggingface-hub==1.33.0", "httpx==0.28.1",
        "httpcore==1.0.9", "httpx2==2.16.2", "httpcore2==2.16.2", "sniffio==1.3.1", "typer-slim==0.24.0",
        "openai==2.8.0", "jiter==0.19.0", "distro==1.9.0", "partial-json-parser==0.2.1.1.post7",
        "compressed-tensors==0.18.0", "einops==0.8.2",
    ),
    # 0.5.16 imports xgrammar on the way to its parser (srt/function_call/inkling_detector.py L9)
    "0.5.16": (
        "transformers==5.12.1", "tokenizers==0.22.2", "huggingface-hub==1.33.0", "httpx==0.28.1",
        "httpcore==1.0.9", "httpx2==2.16.2", "httpcore2==2.16.2", "sniffio==1.3.1", "typer-slim==0.24.0",
        "openai==2.8.0", "jiter==0.19.0", "distro==1.9.0", "partial-json-parser==0.2.1.1.post7",
        "compressed-tensors==0.18.0", "einops==0.8.2", "xgrammar==0.2.1",
    ),
    "0.5.23": (
        "transformers==5.19.0", "tokenizers==0.23.2", "huggingface-hub==2.4.0", "httpx2==2.16.2",
        "httpcore2==2.16.2", "compressed-tensors==0.18.0",
    ),
}  # fmt: skip

MARKER = ".bwstack-complete.json"
SHIM_NAME = "bwstack_venv_shims"
VERSION_RE = re.compile(r"\d+\.\d+\.\d+(\.post\d+|rc\d+)?")
PIP_TIMEOUT = 1800
#: pip output lines that mean "no network / no such file on the index"
NETWORK_SIGNS = ("Failed to establish", "Temporary failure in name resolution", "NewConnectionError",
                 "No matching distribution", "Could not find a version", "ConnectTimeout",
                 "ReadTimeout")  # fmt: skip


@dataclass(frozen=True)
class SglangEnv:
    """A complete venv for one SGLang version."""

    version: str
    root: Path
    wheel: str
    wheel_sha256: str

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"


def cache_root() -> Path:
    """``$BWSTACK_CACHE`` or ``~/.cache/bwstack``."""
    configured = os.environ.get("BWSTACK_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "bwstack"


def venv_dir(version: str) -> Path:
    return cache_root() / "venvs" / f"sglang-{check_version(version)}"


def check_version(version: str) -> str:
    if not VERSION_RE.fullmatch(version):
        raise UserError(
            f"not an SGLang release version: {version!r} (expected e.g. 0.5.23)", field="sglang.version"
        )
    return version


def packages_for(version: str) -> list[str]:
    """The pinned packages installed next to sglang ``version`` (the nearest older line for unknown ones)."""
    line = version if version in EXTRA_PACKAGES else _nearest_line(version)
    return [CPU_TORCH, *BASE_PACKAGES, *EXTRA_PACKAGES[line]]


def _nearest_line(version: str) -> str:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", v)[:3])

    older = [v for v in EXTRA_PACKAGES if key(v) <= key(version)]
    return max(older or EXTRA_PACKAGES, key=key)


def shim_source() -> str:
    return venv_scripts.VENV_SHIMS.read_text(encoding="utf-8")


def expected_marker(version: str) -> dict[str, object]:
    """What a complete venv's marker records (a venv whose marker differs is rebuilt)."""
    return {
        "sglang": version,
        "packages": packages_for(version),
        "shims_sha256": hashlib.sha256(shim_source().encode()).hexdigest(),
    }


def find_env(version: str) -> SglangEnv | None:
    """The complete venv for ``version``, or None when it is not built (never builds).

    A venv whose shims are outdated gets the current ones (no rebuild); other differences mean "not built".
    """
    root = venv_dir(version)
    try:
        marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not (root / "bin" / "python").exists():
        return None
    expected = expected_marker(version)
    if marker.get("sglang") != expected["sglang"] or marker.get("packages") != expected["packages"]:
        return None
    if marker.get("shims_sha256") != expected["shims_sha256"]:
        _install_shims(root)
        marker["shims_sha256"] = expected["shims_sha256"]
        (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return SglangEnv(version, root, str(marker.get("wheel", "")), str(marker.get("wheel_sha256", "")))


def ensure_env(version: str, *, progress: Progress | None = None) -> SglangEnv:
    """The venv for ``version``, built first when missing (a minute or two; progress goes to ``progress``)."""
    say = progress or _stderr
    existing = find_env(version)
    if existing is not None:
        return existing
    root = venv_dir(version)
    root.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(root):
        existing = find_env(version)  # another builder may have finished meanwhile
        if existing is not None:
            return existing
        return _build(version, root, say)


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    with open(root.with_name(root.name + ".lock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(version: str, root: Path, say: Progress) -> SglangEnv:
    start = time.monotonic()
    if root.exists():
        say(f"removing the half-built venv {root}")
        shutil.rmtree(root)
    say(f"building a CPU venv for sglang {version} in {root} (once; a minute or two)")
    _run([base_python(), "-m", "venv", str(root)], f"creating the venv {root}")
    python = str(root / "bin" / "python")
    wheel_dir = root / "wheel"
    say(f"  downloading sglang=={version} from PyPI")
    wheel = download_wheel(version, wheel_dir, python=python)
    say(f"  installing {CPU_TORCH} and {len(packages_for(version)) - 1} pinned packages")
    install = ["install", "--no-deps", "--no-compile", *packages_for(version)]
    try:
        _pip(python, install, "installing CPU torch and SGLang's imports")
    except ExternalError as exc:
        # the CPU torch build is not on PyPI itself: use PyTorch's CPU index where no local wheel served it
        if "torch" not in str(exc):
            raise
        say(f"  {CPU_TORCH} not found locally; retrying with PyTorch's CPU index {TORCH_CPU_INDEX}")
        _pip(
            python,
            [*install, "--extra-index-url", TORCH_CPU_INDEX],
            "installing CPU torch and SGLang's imports",
        )
    say(f"  installing {wheel.name}")
    _pip(python, ["install", "--no-deps", "--no-compile", str(wheel)], f"installing {wheel.name}")
    _install_shims(root)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    marker = {**expected_marker(version), "wheel": wheel.name, "wheel_sha256": digest}
    (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    say(f"  sglang {version} venv ready in {time.monotonic() - start:.0f} s")
    return SglangEnv(version, root, wheel.name, digest)


def release_wheel(version: str) -> Path:
    """The sglang ``version`` wheel from the package index, downloaded once into ``$BWSTACK_CACHE/wheels``.

    UserError (exit 2) when the index has no such release, naming the newest it has."""
    check_version(version)
    wheel_dir = cache_root() / "wheels" / f"sglang-{version}"
    found = sorted(wheel_dir.glob(f"sglang-{version}-*.whl"))
    if len(found) == 1:
        return found[0]
    wheel_dir.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(wheel_dir):
        return download_wheel(version, wheel_dir, python=sys.executable)


def download_wheel(version: str, wheel_dir: Path, *, python: str) -> Path:
    """``pip download --no-deps`` the sglang ``version`` wheel into ``wheel_dir``; its path."""
    try:
        _pip(python, ["download", "--no-deps", "--only-binary=:all:", f"sglang=={version}", "-d",
                      str(wheel_dir)], f"downloading sglang=={version}")  # fmt: skip
    except ExternalError as exc:
        listed = re.search(r"\(from versions: ([^)]*)\)", str(exc))
        if listed is None or listed.group(1).strip() == "none":
            raise  # no answer from the index (offline?) is not "no such release"
        versions = [v.strip() for v in (listed.group(1) if listed else "").split(",") if v.strip()]
        newest = f" (newest there: {versions[-1]})" if versions else ""
        raise UserError(f"sglang {version} is not on the package index{newest}", field="--sglang") from None
    return _single_wheel(wheel_dir, version)


def base_python() -> str:
    configured = os.environ.get("BWSTACK_VENV_PYTHON")
    if configured:
        return configured
    found = shutil.which("python3.11")
    if found:
        return found
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    raise ExternalError("python3.11 not found on PATH (needed for SGLang's venvs); set BWSTACK_VENV_PYTHON")


def _single_wheel(wheel_dir: Path, version: str) -> Path:
    wheels = sorted(wheel_dir.glob(f"sglang-{version}-*.whl"))
    if len(wheels) != 1:
        raise ExternalError(f"expected one sglang {version} wheel in {wheel_dir}, found {len(wheels)}")
    return wheels[0]


def _install_shims(root: Path) -> None:
    site = _site_packages(root)
    (site / f"{SHIM_NAME}.py").write_text(shim_source(), encoding="utf-8")
    (site / f"{SHIM_NAME}.pth").write_text(f"import {SHIM_NAME}\n", encoding="utf-8")


def _site_packages(root: Path) -> Path:
    found = sorted((root / "lib").glob("python3*/site-packages"))
    if not found:
        raise ExternalError(f"no site-packages in {root}")
    return found[0]


def _pip(python: str, args: Sequence[str], what: str) -> None:
    _run([python, "-m", "pip", "--disable-pip-version-check", "--no-input", *args], what)


def _run(argv: Sequence[str], what: str) -> None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise ExternalError(f"{what}: timed out after {PIP_TIMEOUT} s") from None
    except OSError as exc:
        raise ExternalError(f"{what}: {exc}") from None
    if done.returncode != 0:
        raise ExternalError(f"{what} failed: {_reason(done.stderr + done.stdout)}")


def _reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and "WARNING" not in line]
    for line in lines:
        if any(sign in line for sign in NETWORK_SIGNS):
            return f"{line} (is PyPI reachable?)"
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]


def clean_env() -> dict[str, str]:
    """The environment for SGLang's code in a venv: no caller SGLANG_* switches, offline, fixed hash seed."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "SGL_", "PYTHON", "CUDA_", "HF_", "TRANSFORMERS_", "VIRTUAL_ENV"))
    }
    env.update(
        PYTHONHASHSEED="0",
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run_script(
    env: SglangEnv,
    script: Path,
    args: Sequence[str] = (),
    *,
    timeout: int = 600,
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """Run one of bwstack's in-venv scripts with the venv's python; its stdout (ExternalError on failure).

    ``extra_env`` (e.g. a profile's ``SGLANG_*`` switches) is set on top of :func:`clean_env`.
    """
    argv = [str(env.python), str(script), *args]
    environment = {**clean_env(), **(extra_env or {})}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=environment, check=False
        )
    except subprocess.TimeoutExpired:
        raise ExternalError(
            f"{script.name} in the sglang {env.version} venv timed out after {timeout} s"
        ) from None
    if done.returncode != 0:
        raise ExternalError(
            f"{script.name} failed in the sglang {env.version} venv ({env.root}): {_last_line(done.stderr)}"
        )
    return done.stdout


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def progress_line(message: str) -> None:
    """One progress line on stderr (``bwstack: …``); stdout stays clean for --json."""
    print(f"bwstack: {message}", file=sys.stderr, flush=True)


_stderr = progress_line
