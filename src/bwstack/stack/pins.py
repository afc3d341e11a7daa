"""Image variants: load ``images/<variant>/pins.toml`` and derive build args, OCI labels and versions.json.

pins.toml is the only place a pin lives. Everything else that carries a pin -- the Dockerfile's build args,
the image's labels, the generated ``versions.json`` manifest and the compose ``build:`` section -- is computed
here from that one file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError

PINS_FILE = "pins.toml"
LOCK_FILE = "overrides.lock"
WHEELHOUSE_LOCK_FILE = "wheelhouse.lock"
#: the folder of a CPU variant's staged wheelhouse that holds its wheels
# (bwstack.build.lock.wheelhouse.stage_wheelhouse)
WHEELHOUSE_DIR = "wheelhouse"
#: the git-ignored folder of images/<variant>/ where `bwstack build` stages a CPU variant's override wheels
#: (bwstack.build.lock.wheelhouse.stage_overrides); the Dockerfile installs them --no-index
OVERRIDE_WHEELS_DIR = "override-wheels"
SNAPSHOT_FILE = "sglang-args.json"
MANIFEST_FILE = "versions.json"
MANIFEST_SCHEMA = "bwstack.versions/1"

VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}\Z")
PACKAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*\Z")
REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)\Z"
)
#: a Docker image reference (``[registry[:port]/]name[:tag][@sha256:…]``, lower-case names) or an image id;
#: never starting with ``-`` (never read as an option in an argv); ``\Z``: no trailing newline slips through
IMAGE_REF = re.compile(
    r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?\Z"
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
GIT_SHA = re.compile(r"^[0-9a-f]{7,40}\Z")
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")
ARCH_LIST = re.compile(r"^\d+\.\d+[af]?(?:[ ;]\d+\.\d+[af]?)*(?:\+PTX)?\Z")
GPU_ARCH = re.compile(r"^sm\d{2,3}[af]?\Z")
KINDS = ("release", "nightly")
#: what a variant runs on: "gpu" (the CUDA images) or "cpu" (real SGLang on the CPU with a tiny model);
#: the same words as a stack's ``device``
DEVICES = ("gpu", "cpu")
#: how a CPU variant's local base holds SGLang, as the real base of that SGLang version does
#: (images/cpu-base/install.sh; first-contact.md rows 1.1, 1.3, 1.4): "venv" = a venv at /opt/sglang on
#: PATH (the 0.5.23 base, sgl-project/sglang PR #30612), "system" = the system site-packages as root, PEP 668
#: lifted by root's pip config (the 0.5.9 base)
BASE_LAYOUTS = ("venv", "system")
#: how the CPU base installs SGLang: its wheel, or "editable" from its source tree under /sgl-workspace/sglang
#: (``pip install -e python``, as the real bases do; needs the sdist and ``[wheelhouse] build``)
SGLANG_INSTALLS = ("wheel", "editable")

SECTIONS: dict[str, tuple[str, ...]] = {
    "variant": ("kind", "description", "evidence", "device"),
    "base": ("image", "digest", "layout"),
    "sglang": ("version", "commit", "install"),
    "cuda": ("toolkit", "torch_cuda_arch_list", "flashinfer_cuda_arch_list", "gpu_archs"),
    "python": (),  # package -> version, plus "reasons"
    "overrides": ("packages",),
    "wheelhouse": ("packages", "local", "build"),
    "sources": (),  # name -> Source table
    "env": (),  # NAME -> value
}
SOURCE_KEYS = ("repo", "ref", "replaces", "submodules", "build_env")


@dataclass(frozen=True)
class Source:
    """A Python package built from a git repository at a pinned commit, replacing the base image's wheel."""

    name: str
    repo: str
    ref: str
    replaces: tuple[str, ...] = ()
    submodules: tuple[str, ...] = ()
    build_env: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> str:
        """One line for the Dockerfile's SOURCES build arg: ``name|repo|ref|replaces|submodules|K=V,...``."""
        env = ",".join(f"{k}={v}" for k, v in sorted(self.build_env.items()))
        return "|".join(
            [self.name, self.repo, self.ref, ",".join(self.replaces), ",".join(self.submodules), env]
        )


@dataclass(frozen=True)
class Variant:
    """One image variant, as pinned in ``images/<name>/pins.toml``."""

    name: str
    dir: Path
    kind: str
    description: str
    evidence: tuple[str, ...]
    base_image: str
    base_digest: str
    sglang_version: str
    sglang_commit: str
    cuda_toolkit: str
    torch_cuda_arch_list: str
    flashinfer_cuda_arch_list: str
    gpu_archs: tuple[str, ...]
    python: Mapping[str, str]
    python_reasons: Mapping[str, str]
    overrides: tuple[str, ...]
    sources: Mapping[str, Source]
    env: Mapping[str, str]
    device: str = "gpu"
    #: the whole Python closure of a CPU variant (name==version), installed --no-index from its wheelhouse
    wheelhouse: tuple[str, ...] = ()
    #: distributions bwstack builds itself into the wheelhouse (images/cpu-placeholders), by name
    local_wheels: tuple[str, ...] = ()
    #: a CPU variant's base layout (BASE_LAYOUTS; empty for the GPU variants, whose base is pulled)
    base_layout: str = ""
    #: how a CPU variant's base installs SGLang (SGLANG_INSTALLS)
    sglang_install: str = "wheel"
    #: the build backend of an editable SGLang (name==version), used only while the base is built
    wheelhouse_build: tuple[str, ...] = ()

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def wheelhouse_lock_path(self) -> Path:
        return self.dir / WHEELHOUSE_LOCK_FILE

    @property
    def pins_path(self) -> Path:
        return self.dir / PINS_FILE

    @property
    def lock_path(self) -> Path:
        return self.dir / LOCK_FILE

    @property
    def cli_snapshot_path(self) -> Path:
        return self.dir / SNAPSHOT_FILE

    @property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST_FILE

    @property
    def locked(self) -> bool:
        """True when the base image is pinned by digest (reproducible)."""
        return bool(self.base_digest)

    @property
    def base_pulled(self) -> bool:
        """True when the base is pulled from a registry (and so locked by digest): every GPU variant, and a
        CPU variant whose ``[base] image`` names a registry host (``127.0.0.1:5000/…``, ``nvcr.io/…``);
        False for a CPU base made locally by ``bwstack build`` (``bwstack/cpu-base:…``)."""
        if not self.is_cpu:
            return True
        first, _, rest = self.base_image.partition("/")
        return bool(rest) and ("." in first or ":" in first or first == "localhost")

    @property
    def base_ref(self) -> str:
        """The base image reference passed to FROM: ``name:tag@sha256:…`` once locked."""
        return f"{self.base_image}@{self.base_digest}" if self.base_digest else self.base_image

    @property
    def sglang_label(self) -> str:
        if self.sglang_version:
            return self.sglang_version
        return f"git-{self.sglang_commit}"

    def build_args(self) -> dict[str, str]:
        """Every pin as a Dockerfile build arg (names as the Dockerfile declares them; ``PIN_*`` where the
        plain name is an environment variable a base image may set, which would beat the build arg)."""
        return {
            "PIN_VARIANT": self.name,
            "BASE_IMAGE": self.base_ref,
            "SGLANG_VERSION": self.sglang_version,
            "SGLANG_COMMIT": self.sglang_commit,
            "PIN_CUDA_VERSION": self.cuda_toolkit,
            "PIN_TORCH_CUDA_ARCH_LIST": self.torch_cuda_arch_list,
            "PIN_FLASHINFER_CUDA_ARCH_LIST": self.flashinfer_cuda_arch_list,
            "GPU_ARCHS": " ".join(self.gpu_archs),
            "TRANSFORMERS_VERSION": self.python.get("transformers", ""),
            "PYTHON_PINS": " ".join(f"{k}=={v}" for k, v in sorted(self.python.items())),
            "SOURCES": ";".join(s.encode() for _, s in sorted(self.sources.items())),
            "ENV_SWITCHES": " ".join(f"{k}={v}" for k, v in sorted(self.env.items())),
            "DEVICE": self.device,
        }

    def manifest(self) -> dict[str, Any]:
        """The machine-readable pins manifest (``versions.json``), generated from pins.toml."""
        return {
            "schema": MANIFEST_SCHEMA,
            "generated_from": f"images/{self.name}/{PINS_FILE}",
            "variant": self.name,
            "kind": self.kind,
            "device": self.device,
            "locked": self.locked,
            "base": {"image": self.base_image, "digest": self.base_digest or None, "ref": self.base_ref}
            | ({"layout": self.base_layout} if self.base_layout else {}),
            "sglang": {"version": self.sglang_version or None, "commit": self.sglang_commit or None}
            | ({"install": self.sglang_install} if self.is_cpu else {}),
            "cuda": {
                "toolkit": self.cuda_toolkit,
                "torch_cuda_arch_list": self.torch_cuda_arch_list,
                "flashinfer_cuda_arch_list": self.flashinfer_cuda_arch_list,
                "gpu_archs": list(self.gpu_archs),
            },
            "python": dict(sorted(self.python.items())),
            "python_reasons": dict(sorted(self.python_reasons.items())),
            "overrides": list(self.overrides),
            "sources": {
                name: {
                    "repo": s.repo,
                    "ref": s.ref,
                    "replaces": list(s.replaces),
                    "submodules": list(s.submodules),
                    "build_env": dict(sorted(s.build_env.items())),
                }
                for name, s in sorted(self.sources.items())
            },
            "env": dict(sorted(self.env.items())),
            "wheelhouse": {"packages": list(self.wheelhouse), "local": list(self.local_wheels)}
            | ({"build": list(self.wheelhouse_build)} if self.wheelhouse_build else {}),
            "build_args": self.build_args(),
        }


def list_variants(images_dir: Path) -> list[str]:
    """Names of the variant folders under ``images/`` (those holding a pins.toml)."""
    if not images_dir.is_dir():
        return []
    return sorted(p.name for p in images_dir.iterdir() if (p / PINS_FILE).is_file())


def load_variant(images_dir: Path, name: str) -> Variant:
    """Load and validate ``images/<name>/pins.toml``; UserError names file, line and field."""
    if not VARIANT_NAME.match(name):
        raise UserError(f"invalid variant name {name!r} (lowercase letters, digits, '.', '_', '-')")
    pins_path = images_dir / name / PINS_FILE
    if not pins_path.is_file():
        known = list_variants(images_dir)
        raise UserError(
            f"unknown variant {name!r}: no {PINS_FILE} (known: {', '.join(known) or 'none'})", file=pins_path
        )
    try:
        text = pins_path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise UserError(
            f"malformed TOML: {exc}", file=pins_path, line=int(match.group(1)) if match else None
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read: {exc}", file=pins_path) from None
    return _Parser(pins_path, text, data, name).variant()


class _Parser:
    """Validate the parsed TOML of one pins.toml, with line numbers found in its text."""

    def __init__(self, path: Path, text: str, data: dict[str, Any], name: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.data = data
        self.name = name

    def line_of(self, section: str, key: str | None = None) -> int | None:
        header = re.compile(rf"^\s*\[{re.escape(section)}\]\s*(#.*)?$")
        start = next((i for i, ln in enumerate(self.lines) if header.match(ln)), None)
        if start is None:
            return None
        if key is None:
            return start + 1
        keypat = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
        for i in range(start + 1, len(self.lines)):
            if re.match(r"^\s*\[", self.lines[i]):
                break
            if keypat.match(self.lines[i]):
                return i + 1
        return start + 1

    def fail(self, section: str, key: str | None, message: str) -> UserError:
        fieldname = f"{section}.{key}" if key else section
        return UserError(message, file=self.path, line=self.line_of(section, key), field=fieldname)

    def table(self, section: str) -> dict[str, Any]:
        value = self.data.get(section, {})
        if not isinstance(value, dict):
            raise self.fail(section, None, "must be a table")
        return value

    def str_value(self, section: str, key: str, pattern: re.Pattern[str] | None, *, required: bool) -> str:
        value = self.table(section).get(key, "")
        if not isinstance(value, str):
            raise self.fail(section, key, f"must be a string, got {type(value).__name__}")
        if not value:
            if required:
                raise self.fail(section, key, "required")
            return ""
        if pattern is not None and not pattern.match(value):
            raise self.fail(section, key, f"invalid value {value!r} (expected {pattern.pattern})")
        return value

    def str_list(self, section: str, key: str, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        value = self.table(section).get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(section, key, "must be a list of strings")
        if pattern is not None:
            for v in value:
                if not pattern.match(v):
                    raise self.fail(section, key, f"invalid item {v!r} (expected {pattern.pattern})")
        return tuple(value)

    def check_keys(self, section: str, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in self.table(section):
            if key not in allowed:
                raise self.fail(section, key, f"unknown key {key!r} (valid: {', '.join(allowed)})")

    def variant(self) -> Variant:
        for section in self.data:
            if section not in SECTIONS:
                raise self.fail(section, None, f"unknown section [{section}] (valid: {', '.join(SECTIONS)})")
        for section, keys in SECTIONS.items():
            if keys:
                self.check_keys(section, keys)
        kind = self.str_value("variant", "kind", None, required=True)
        if kind not in KINDS:
            raise self.fail("variant", "kind", f"invalid kind {kind!r} (valid: {', '.join(KINDS)})")
        sglang_version = self.str_value("sglang", "version", VERSION, required=False)
        sglang_commit = self.str_value("sglang", "commit", GIT_SHA, required=False)
        if not sglang_version and not sglang_commit:
            raise self.fail("sglang", None, "needs version (a release) or commit (a nightly)")
        python, reasons = self.python()
        device = self.str_value("variant", "device", None, required=False) or "gpu"
        if device not in DEVICES:
            raise self.fail("variant", "device", f"invalid device {device!r} (valid: {', '.join(DEVICES)})")
        cuda_required = device == "gpu"
        variant = Variant(
            name=self.name,
            dir=self.path.parent,
            kind=kind,
            description=self.str_value("variant", "description", None, required=True),
            evidence=self.str_list("variant", "evidence"),
            base_image=self.str_value("base", "image", IMAGE_REF, required=True),
            base_digest=self.str_value("base", "digest", DIGEST, required=False),
            sglang_version=sglang_version,
            sglang_commit=sglang_commit,
            cuda_toolkit=self.str_value(
                "cuda", "toolkit", re.compile(r"^\d+\.\d+(\.\d+)?\Z"), required=cuda_required
            ),
            torch_cuda_arch_list=self.str_value(
                "cuda", "torch_cuda_arch_list", ARCH_LIST, required=cuda_required
            ),
            flashinfer_cuda_arch_list=self.str_value(
                "cuda", "flashinfer_cuda_arch_list", ARCH_LIST, required=cuda_required
            ),
            gpu_archs=self.str_list("cuda", "gpu_archs", GPU_ARCH),
            python=python,
            python_reasons=reasons,
            overrides=self.overrides(python),
            sources=self.sources(),
            env=self.env(),
            device=device,
            wheelhouse=self.wheelhouse(device, python, self.overrides(python)),
            local_wheels=self.str_list("wheelhouse", "local", PACKAGE_NAME),
            base_layout=self.choice("base", "layout", BASE_LAYOUTS if device == "cpu" else ()),
            sglang_install=self.choice("sglang", "install", SGLANG_INSTALLS if device == "cpu" else ())
            or "wheel",
            wheelhouse_build=self.requirements("wheelhouse", "build"),
        )
        if variant.is_cpu:
            if variant.gpu_archs:
                raise self.fail("cuda", "gpu_archs", 'a device = "cpu" variant has no GPU archs')
            if not variant.base_layout:
                raise self.fail(
                    "base", "layout", f"a CPU variant says its base layout ({', '.join(BASE_LAYOUTS)})"
                )
            if (variant.sglang_install == "editable") != bool(variant.wheelhouse_build):
                raise self.fail(
                    "wheelhouse", "build", 'list the build backend exactly when [sglang] install = "editable"'
                )
            return variant
        if variant.wheelhouse_build:
            raise self.fail("wheelhouse", "build", 'only device = "cpu" variants install from a wheelhouse')
        if not variant.gpu_archs:
            raise self.fail("cuda", "gpu_archs", 'list at least one GPU arch, e.g. ["sm120"]')
        return variant

    def python(self) -> tuple[dict[str, str], dict[str, str]]:
        table = dict(self.table("python"))
        reasons = table.pop("reasons", {})
        if not isinstance(reasons, dict):
            raise self.fail("python", "reasons", 'must be a table of package = "reason"')
        pins: dict[str, str] = {}
        for pkg, version in table.items():
            if not PACKAGE_NAME.match(pkg):
                raise self.fail("python", pkg, f"invalid package name {pkg!r}")
            if _normalize(pkg) == "sglang":
                raise self.fail(
                    "python", pkg, "the SGLang pin lives in [sglang] version; do not repeat it here"
                )
            if not isinstance(version, str) or not VERSION.match(version):
                raise self.fail("python", pkg, f'invalid version {version!r} (a string like "5.19.0")')
            pins[pkg] = version
        for pkg, reason in reasons.items():
            if pkg not in pins:
                raise self.fail(
                    "python.reasons", pkg, f"reason given for {pkg!r}, which [python] does not pin"
                )
            if not isinstance(reason, str) or len(reason.split()) < 4:
                raise self.fail("python.reasons", pkg, "give a written reason (a sentence with its evidence)")
        return pins, dict(reasons)

    def overrides(self, python: Mapping[str, str]) -> tuple[str, ...]:
        packages = self.str_list("overrides", "packages")
        pins_norm = {_normalize(k): v for k, v in python.items()}
        for req in packages:
            match = REQUIREMENT.match(req)
            if not match:
                raise self.fail("overrides", "packages", f"invalid requirement {req!r} (write name==version)")
            name, version = match.group("name"), match.group("version")
            if pins_norm.get(_normalize(name)) != version:
                raise self.fail(
                    "overrides",
                    "packages",
                    f"{req!r} must match the [python] pin ({name} = {pins_norm.get(_normalize(name))!r}); "
                    "pin the version once in [python] and list the override here",
                )
        return packages

    def choice(self, section: str, key: str, valid: tuple[str, ...]) -> str:
        """An optional key with a fixed set of values; no values: the key is refused (GPU variants)."""
        value = self.str_value(section, key, None, required=False)
        if value and value not in valid:
            allowed = f"valid: {', '.join(valid)}" if valid else 'only device = "cpu" variants set it'
            raise self.fail(section, key, f"invalid {key} {value!r} ({allowed})")
        return value

    def requirements(self, section: str, key: str) -> tuple[str, ...]:
        packages = self.str_list(section, key)
        for req in packages:
            if not REQUIREMENT.match(req):
                raise self.fail(section, key, f"invalid requirement {req!r} (write name==version)")
        return packages

    def wheelhouse(
        self, device: str, python: Mapping[str, str], overrides: Iterable[str] = ()
    ) -> tuple[str, ...]:
        """The closure of the CPU base. A [python] pin matches it, or an override (the base holds what the
        real base does; [overrides] replaces it in the image, as on the GPU variant)."""
        packages = self.str_list("wheelhouse", "packages")
        if packages and device != "cpu":
            raise self.fail(
                "wheelhouse", "packages", 'only device = "cpu" variants install from a wheelhouse'
            )
        if device == "cpu" and not packages:
            raise self.fail("wheelhouse", "packages", "a CPU variant lists its whole Python closure here")
        seen: dict[str, str] = {}
        for req in packages:
            match = REQUIREMENT.match(req)
            if not match:
                raise self.fail(
                    "wheelhouse", "packages", f"invalid requirement {req!r} (write name==version)"
                )
            seen[_normalize(match.group("name"))] = match.group("version")
        overridden = {_normalize(req.partition("==")[0]) for req in overrides}
        for pkg, version in python.items():
            if seen and _normalize(pkg) not in overridden and seen.get(_normalize(pkg)) != version:
                raise self.fail(
                    "python", pkg, f"pinned {version!r}; the wheelhouse holds {seen.get(_normalize(pkg))!r}"
                )
        return packages

    def sources(self) -> dict[str, Source]:
        out: dict[str, Source] = {}
        for name, spec in self.table("sources").items():
            section = f"sources.{name}"
            if not isinstance(spec, dict):
                raise self.fail(section, None, "must be a table with repo and ref")
            for key in spec:
                if key not in SOURCE_KEYS:
                    raise self.fail(section, key, f"unknown key {key!r} (valid: {', '.join(SOURCE_KEYS)})")
            repo, ref = spec.get("repo"), spec.get("ref")
            if not isinstance(repo, str) or not re.match(r"^https://[A-Za-z0-9./_-]+$", repo):
                raise self.fail(section, "repo", "must be an https:// git URL")
            if not isinstance(ref, str) or not re.match(r"^[0-9a-f]{40}$", ref):
                raise self.fail(section, "ref", "must be a full 40-hex commit SHA (branches and tags move)")
            build_env = spec.get("build_env", {})
            if not isinstance(build_env, dict) or not all(
                ENV_NAME.match(k) and isinstance(v, str) and re.match(r"^[A-Za-z0-9._-]*$", v)
                for k, v in build_env.items()
            ):
                raise self.fail(section, "build_env", "must map NAMES to plain values")
            lists = {}
            for key in ("replaces", "submodules"):
                value = spec.get(key, [])
                if not isinstance(value, list) or not all(
                    isinstance(v, str) and re.match(r"^[A-Za-z0-9*._/-]+$", v) for v in value
                ):
                    raise self.fail(section, key, "must be a list of plain names")
                lists[key] = tuple(value)
            out[name] = Source(name, repo, ref, lists["replaces"], lists["submodules"], dict(build_env))
        return out

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in self.table("env").items():
            if not ENV_NAME.match(key):
                raise self.fail("env", key, f"invalid environment variable name {key!r}")
            if not isinstance(value, str):
                raise self.fail("env", key, "values must be strings (quote them)")
            if not re.match(r"^[A-Za-z0-9._:/=,+-]*$", value):
                raise self.fail("env", key, f"value {value!r} holds characters that are not allowed here")
            out[key] = value
        return out


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_package(name: str) -> str:
    """PEP 503 normalised package name."""
    return _normalize(name)
