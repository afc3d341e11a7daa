"""``bwstack variant new NAME --sglang VERSION [--from VARIANT]``: a GPU variant from a release's own wheel.

The sglang wheel (downloaded from the package index once, :func:`bwstack.know.venvs.release_wheel`) says what
the release needs: its exact ``==`` requirements give the ``[python]`` pins (:data:`WHEEL_PINNED`), its
version the ``[sglang]`` pin and the base image tag (the ``--from`` variant's tag with the version swapped, or
``--base``; a tag no publisher can have made is refused, :func:`check_base`). The parser snapshot comes from
the same wheel (``bwstack lock --args``), versions.json from the new pins.toml; ``[cuda]``, ``[overrides]``
(but packages the new wheel pins itself), ``[sources]`` and ``[env]`` are copied from ``--from``. What
changed is returned as lines.
:func:`plan` builds the new pins.toml text without writing (``bwstack upgrade`` uses it for a bare version).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from bwstack.build.lock import args as lock_args
from bwstack.build.lock import command as lock_command
from bwstack.errors import UserError
from bwstack.files import sha256_file
from bwstack.know import venvs
from bwstack.render import compose
from bwstack.stack import pins

Echo = Callable[[str], None]

#: the packages whose exact pin in the sglang wheel's requirements becomes a ``[python]`` pin
WHEEL_PINNED: tuple[str, ...] = (
    "torch", "transformers", "flashinfer-python", "flashinfer-cubin", "sglang-kernel", "sgl-kernel",
    "sgl-deep-gemm",
)  # fmt: skip

#: a pin the first-contact policy requires although no sglang wheel pins it (0.5.16 and later do not):
#: package -> the package whose version it must equal (tests/stack/test_first_contact.py holds every variant
#: to it)
FOLLOWS: dict[str, str] = {"flashinfer-cubin": "flashinfer-python"}
FOLLOWS_REASON = (
    "not an SGLang {version} requirement: the base's Dockerfile installs it from its own FLASHINFER_VERSION "
    "arg, equal to {leader}; a cubin package of another version is ignored and FlashInfer fetches each cubin "
    "from the network at first use, so the build checks it here (the first-contact policy)"
)

#: files of a variant folder that are generated from other inputs and never copied from ``--from``
NOT_COPIED = {
    "kernel-archs.json": "the old pins' kernel facts; bwstack lock --kernel-facts --variant {name}",
}

#: the official release image tags: ``v<version>-cu<NNN>`` (``-runtime`` for the slim target)
OFFICIAL_REPO = "lmsysorg/sglang"
RELEASE_TAG = re.compile(
    r"^v(?P<version>\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)-cu(?P<cuda>\d{3})(?P<rest>-runtime)?$"
)
#: which CUDA builds lmsysorg/sglang publishes release tags for: the last release of each (None: current) and
#: where that is said (shared/reference/sglang-by-version.md and conventions.md quote both)
CUDA_TAGS_UNTIL: dict[str, tuple[Version | None, str]] = {
    "126": (Version("0.5.13.post1"), "cu126 tags stop before v0.5.14 (latere-ai/fornax)"),
    "129": (Version("0.5.19"), "SGLang docs, install.mdx: v0.5.19-cu129 is the last CUDA 12 tag"),
    "130": (None, ""),
}


@dataclass(frozen=True)
class Release:
    """What one sglang release's wheel says about itself."""

    version: str
    wheel: Path
    sha256: str
    requires: dict[str, str]  # normalised name -> exact ``==`` version (unconditional requirements only)

    @property
    def python_pins(self) -> dict[str, str]:
        return {name: self.requires[name] for name in WHEEL_PINNED if name in self.requires}


def read_release(version: str) -> Release:
    """Download (once) and read the sglang ``version`` wheel; UserError when the index lacks it."""

    wheel = venvs.release_wheel(version)
    return Release(version, wheel, sha256_file(wheel), exact_requirements(wheel))


def exact_requirements(wheel: Path) -> dict[str, str]:
    """``name -> version`` for every requirement of the wheel pinned with a single ``==`` and no marker."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(meta).decode("utf-8"))
    out: dict[str, str] = {}
    for line in message.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if req.marker is not None or len(specs) != 1 or specs[0].operator != "==":
            continue
        out.setdefault(pins.normalize_package(req.name), specs[0].version)
    return out


# --- the base image -----------------------------------------------------------------------------------------


def base_for(source: pins.Variant, version: str) -> str:
    """``source``'s base image with its release swapped for ``version``, or the official cu130 tag."""
    repo, _, tag = source.base_image.rpartition(":")
    match = RELEASE_TAG.match(tag)
    if repo and match:
        return f"{repo}:v{version}-cu{match.group('cuda')}{match.group('rest') or ''}"
    return f"{OFFICIAL_REPO}:v{version}-cu130"


def check_base(image: str, version: str) -> str:
    """``image`` if it can exist for sglang ``version``, else UserError naming why (one line, exit 2)."""
    if not pins.IMAGE_REF.match(image):
        raise UserError(f"invalid image reference {image!r} (expected repo[:tag])", field="--base")
    repo, _, tag = image.rpartition(":")
    if repo != OFFICIAL_REPO:
        return image
    match = RELEASE_TAG.match(tag)
    if match is None:
        raise UserError(
            f"{image} is not a release tag of {OFFICIAL_REPO} (expected v{version}-cu130 or "
            f"v{version}-cu130-runtime)",
            field="--base",
        )
    if match.group("version") != version:
        raise UserError(f"{image} holds sglang {match.group('version')}, not {version}", field="--base")
    cuda = match.group("cuda")
    if cuda not in CUDA_TAGS_UNTIL:
        known = ", ".join(f"cu{c}" for c in CUDA_TAGS_UNTIL)
        raise UserError(f"{image} cannot exist: {OFFICIAL_REPO} publishes {known} only", field="--base")
    last, source = CUDA_TAGS_UNTIL[cuda]
    if last is not None and Version(version) > last:
        raise UserError(
            f"{image} cannot exist: the last cu{cuda} release tag of {OFFICIAL_REPO} is v{last}-cu{cuda} "
            f"({source})",
            field="--base",
        )
    return image


def toolkit_of(image: str, fallback: str) -> str:
    """The CUDA toolkit a release tag names (``cu130`` -> ``13.0``), else ``fallback``."""
    match = RELEASE_TAG.match(image.rpartition(":")[2])
    if match is None:
        return fallback
    cuda = match.group("cuda")
    return f"{cuda[:2]}.{cuda[2:]}"


# --- the new pins.toml --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A new variant, not yet written: its pins.toml text and what differs from ``--from``."""

    name: str
    source: pins.Variant
    release: Release
    base_image: str
    pins_text: str
    changes: tuple[str, ...]


def check_name(name: str) -> None:
    """UserError unless ``name`` is a variant name (:data:`pins.VARIANT_NAME`: no ``..``, no empty name, no
    trailing newline, at most 63 characters), checked before the name touches the file system."""
    if not pins.VARIANT_NAME.match(name):
        shown = repr(name[:40] + ("…" if len(name) > 40 else ""))
        raise UserError(
            f"invalid variant name {shown}: lowercase letters, digits, '.', '_', '-', starting with a letter "
            "or digit, at most 63 characters",
            field="NAME",
        )


def plan(name: str, version: str, source: pins.Variant, *, base: str | None = None) -> Plan:
    """The new variant ``name`` for sglang ``version``, from ``source``'s pins (reads the wheel)."""
    check_name(name)
    if source.is_cpu:
        raise UserError(
            f"--from {source.name} is a CPU variant: its [wheelhouse] is a whole closure found by hand; "
            "variant new makes GPU variants (--from a GPU variant)",
            field="--from",
        )
    venvs.check_version(version)
    image = check_base(base or base_for(source, version), version)
    release = read_release(version)
    toolkit = toolkit_of(image, source.cuda_toolkit)
    text = pins_text(name, source, release, image, toolkit)
    return Plan(name, source, release, image, text, tuple(_changes(name, source, release, image, toolkit)))


def pins_text(name: str, source: pins.Variant, release: Release, image: str, toolkit: str) -> str:
    """pins.toml for the new variant (the layout of the shipped ones)."""
    q = _toml_str
    cuda = f"cu{toolkit.replace('.', '')}"
    lines = [
        f"# Every pinned input of the image variant {q(name)}, made by `bwstack variant new {name} --sglang "
        f"{release.version} --from {source.name}`:",
        f"# [python] and [sglang] from the sglang {release.version} wheel's own requirements; [cuda], "
        f"[overrides], [sources] and [env] copied from {source.name}.",
        "",
        "[variant]",
        'kind = "release"',
        f"description = {q(f'SGLang {release.version} on CUDA {toolkit} ({cuda}), pins from its wheel.')}",
        "evidence = [",
        f"  {q(f'pypi.org/project/sglang/{release.version} ({release.wheel.name})')},",
        f"  {q(f'{release.wheel.name} sha256 {release.sha256}')},",
        "]",
        "",
        "[base]",
        f"image = {q(image)}",
        'digest = ""  # filled by `bwstack lock` on a machine with registry access',
        "",
        "[sglang]",
        f"version = {q(release.version)}",
        'commit = ""',
        "",
        "[cuda]",
        f"toolkit = {q(toolkit)}",
        f"torch_cuda_arch_list = {q(source.torch_cuda_arch_list)}",
        f"flashinfer_cuda_arch_list = {q(source.flashinfer_cuda_arch_list)}",
        f"gpu_archs = {_toml_list(source.gpu_archs)}",
        "",
        "# Versions the image must contain after the build (the sglang wheel's own == requirements).",
        "[python]",
        *(f"{key} = {q(value)}" for key, value in _python(source, release).items()),
        "",
        "# Where a [python] pin differs from what the pinned SGLang itself requires, say why.",
        "[python.reasons]",
        *(f"{key} = {q(value)}" for key, value in _reasons(source, release).items()),
        "",
        "# Installed over the base image from overrides.lock (pip --require-hashes --no-deps).",
        "[overrides]",
        f"packages = {_toml_list(_overrides(source, release))}",
        "",
        "# Built from source at a pinned git commit (optional).",
        *_sources(source),
        "# Environment switches this variant needs, baked into the image.",
        "[env]",
        *(f"{key} = {q(value)}" for key, value in source.env.items()),
    ]
    return "\n".join(lines) + "\n"


def _python(source: pins.Variant, release: Release) -> dict[str, str]:
    """The wheel's pins, then a ``--from`` override of a package the wheel does not pin (kept, see
    :func:`_overrides`), then the pins that follow another (:data:`FOLLOWS`)."""
    out = release.python_pins
    for requirement in _overrides(source, release):
        pkg, _, version = requirement.partition("==")
        if pkg in source.python:
            out[pkg] = version
    for pkg, leader in FOLLOWS.items():
        if leader in out and pkg not in out:
            out[pkg] = out[leader]
    return out


def _reasons(source: pins.Variant, release: Release) -> dict[str, str]:
    """``[python.reasons]``: why a following pin (:data:`FOLLOWS`) is there though the wheel does not ask."""
    python = _python(source, release)
    return {
        pkg: FOLLOWS_REASON.format(version=release.version, leader=leader)
        for pkg, leader in FOLLOWS.items()
        if pkg in python and pkg not in release.python_pins
    }


def _overrides(source: pins.Variant, release: Release) -> tuple[str, ...]:
    """``--from``'s overrides but those of packages the new wheel pins itself (its own pin wins)."""
    return tuple(
        item
        for item in source.overrides
        if pins.normalize_package(item.partition("==")[0]) not in release.requires
    )


def _sources(source: pins.Variant) -> list[str]:
    if not source.sources:
        return ["[sources]", ""]
    lines: list[str] = []
    for key, item in source.sources.items():
        lines += [
            f"[sources.{key}]",
            f"repo = {_toml_str(item.repo)}",
            f"ref = {_toml_str(item.ref)}",
            f"replaces = {_toml_list(item.replaces)}",
            f"submodules = {_toml_list(item.submodules)}",
        ]
        if item.build_env:
            env = ", ".join(f"{k} = {_toml_str(v)}" for k, v in item.build_env.items())
            lines.append(f"build_env = {{ {env} }}")
        lines.append("")
    return lines


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string for everything json escapes


def _toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def _changes(name: str, source: pins.Variant, release: Release, image: str, toolkit: str) -> list[str]:
    out = [
        f"sglang.version: {source.sglang_label} -> {release.version}",
        f"base.image: {source.base_image} -> {image}",
    ]
    if source.base_digest:
        out.append(f"base.digest: {source.base_digest} -> (empty; bwstack lock fills it)")
    if toolkit != source.cuda_toolkit:
        out.append(f"cuda.toolkit: {source.cuda_toolkit} -> {toolkit} (from the tag)")
    new = _python(source, release)
    for key in sorted({*source.python, *new}):
        old_value, new_value = source.python.get(key), new.get(key)
        if old_value != new_value:
            out.append(
                f"python.{key}: {old_value or '(none)'} -> {new_value or '(none: the wheel pins no ==)'}"
            )
    reasons = _reasons(source, release)
    for key in source.python_reasons:
        if key not in reasons:
            out.append(f"python.reasons.{key}: dropped (the pins are now the wheel's own)")
    for key in reasons:
        out.append(f"python.reasons.{key}: equal to {FOLLOWS[key]} (the base installs it; first contact)")
    copied = [f"[cuda] arch lists {source.torch_cuda_arch_list}/{source.flashinfer_cuda_arch_list}"]
    kept = _overrides(source, release)
    for item in source.overrides:
        if item not in kept:
            out.append(f"overrides: {item} dropped (sglang {release.version} pins that package itself)")
    if kept:
        copied.append(f"[overrides] {', '.join(kept)}")
    if source.sources:
        copied.append(f"[sources] {', '.join(source.sources)}")
    if source.env:
        copied.append(f"[env] {', '.join(source.env)}")
    out.append(f"copied from {source.name}: " + "; ".join(copied))
    for file, why in NOT_COPIED.items():
        if (source.dir / file).exists():
            out.append(f"not copied: {file} ({why.format(name=name)})")
    return out


# --- writing ------------------------------------------------------------------------------------------------


def write(images_dir: Path, made: Plan, *, echo: Echo) -> Path:
    """Write ``images/<name>/`` (pins.toml, overrides.lock with PyPI's hashes, sglang-args.json,
    versions.json) at once: built in a temp folder beside it and renamed into place, so a failure leaves
    nothing behind."""

    target = images_dir / made.name
    if target.exists():
        raise UserError(f"variant {made.name} exists already ({target}); pick another NAME", field="NAME")
    staging = Path(tempfile.mkdtemp(prefix=f".{made.name}.", dir=images_dir))
    try:
        folder = staging / made.name
        folder.mkdir()
        (folder / pins.PINS_FILE).write_text(made.pins_text, encoding="utf-8")
        variant = pins.load_variant(staging, made.name)
        (folder / pins.LOCK_FILE).write_text(
            lock_command.lock_text(variant, lock_command.fetch_hashes), encoding="utf-8"
        )
        echo(f"  reading sglang {made.release.version}'s parser from its wheel (bwstack lock --args)")
        lock_args.lock_args(folder, echo=echo)
        (folder / pins.MANIFEST_FILE).write_text(compose.manifest_text(variant), encoding="utf-8")
        folder.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
