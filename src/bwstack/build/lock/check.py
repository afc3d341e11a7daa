"""``bwstack lock --check``: does every pin of every variant still resolve to what was locked?

One :class:`Pin` per pinned input, each asked of the place it comes from, nothing downloaded:

- ``base``: the registry's ``Docker-Content-Digest`` for the base tag (``HEAD /v2/<repo>/manifests/<tag>``,
  :func:`bwstack.build.lock.command.head_manifest`) against ``[base] digest``;
- ``wheel``: each ``name==version`` of overrides.lock / wheelhouse.lock against the files the package index
  serves for it (PEP 691 JSON or PEP 503 HTML, the ``#sha256=`` of each file): every locked sha256 must still
  be served;
- ``source``: each ``[sources]`` commit still fetchable from its repository (``git fetch --depth 1
  --filter=blob:none`` into a throwaway repository);
- ``model``: the profiles file's ``model.revision``, where pinned, on the Hugging Face Hub
  (``/api/models/<repo>/revision/<rev>``).

A pin is ``ok``, ``moved`` (the name resolves to something else), ``missing`` (it no longer resolves),
``unlocked`` (nothing was locked to compare: run ``bwstack lock``), ``local`` (made by bwstack itself,
nothing to resolve) or ``unchecked`` (the source could not be asked: offline, refused). Only ``ok`` and
``local`` hold; any other state makes the exit status 1, so an offline run can never pass as "ok".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from bwstack.build.lock import command as lock_command
from bwstack.errors import ExternalError
from bwstack.stack import pins

HOLDS = ("ok", "local")
SCHEMA = "bwstack.build.lock-check/1"
HF_ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
GIT_TIMEOUT = 300
#: where ``torch==X+cpu`` is served when no ``--index-url`` is given (the CPU variants' wheelhouse)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Pin:
    """One pinned input and what its source says about it now."""

    variant: str
    kind: str  # base | wheel | source | model
    name: str
    locked: str
    state: str  # ok | moved | missing | unlocked | local | unchecked
    detail: str = ""

    @property
    def holds(self) -> bool:
        return self.state in HOLDS

    def line(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.variant}: {self.kind} {self.name}: {self.state}{detail}"

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "kind": self.kind, "name": self.name, "locked": self.locked,
                "state": self.state, "holds": self.holds, "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class Sources:
    """Where to ask: the package index (``None``: PyPI, and PyTorch's CPU index for ``+cpu`` builds)."""

    index_url: str | None = None

    def index_for(self, version: str) -> str:
        if self.index_url:
            return self.index_url.rstrip("/")
        return TORCH_CPU_INDEX if "+cpu" in version else lock_command.PYPI_SIMPLE


# --- base image ---------------------------------------------------------------------------------------------


def check_base(variant: pins.Variant) -> Pin:
    name = variant.base_image
    if not variant.base_pulled and not variant.base_digest:
        return Pin(
            variant.name, "base", name, "", "local", "made by bwstack build from images/cpu-base, not pulled"
        )
    if not variant.base_digest:
        return Pin(
            variant.name,
            "base",
            name,
            "",
            "unlocked",
            f"no digest; run 'bwstack lock --variant {variant.name}'",
        )
    try:
        now = lock_command.head_manifest(name)
    except ExternalError as exc:
        return Pin(variant.name, "base", name, variant.base_digest, "unchecked", str(exc))
    if now is None:
        return Pin(variant.name, "base", name, variant.base_digest, "missing", "the registry has no such tag")
    if now != variant.base_digest:
        again = f"review, then 'bwstack lock --variant {variant.name}'"
        return Pin(variant.name, "base", name, variant.base_digest, "moved",
                   f"locked {variant.base_digest}, now {now}; {again}")  # fmt: skip
    return Pin(variant.name, "base", name, variant.base_digest, "ok", now)


# --- locked wheels ------------------------------------------------------------------------------------------


def locked_files(path: Path) -> dict[str, list[str]]:
    """``name==version`` -> its sha256s, from a requirements file with ``--hash`` lines (a bwstack lock)."""
    out: dict[str, list[str]] = {}
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip().rstrip("\\").strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash=sha256:") and current:
            out[current].append(line.removeprefix("--hash=sha256:"))
        elif "==" in line:
            current = line.split()[0]
            out[current] = []
    return out


class _Links(HTMLParser):
    """The ``href``s of a PEP 503 page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for key, value in attrs if key == "href" and value]


def index_files(index: str, name: str) -> dict[str, str] | None:
    """filename -> sha256 of every file the index serves for project ``name`` (None: no such project)."""
    url = f"{index}/{canonicalize_name(name)}/"
    accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    request = urllib.request.Request(url, headers={"Accept": accept})  # noqa: S310 - http(s) index URL
    answer = lock_command.ask(
        request,
        answered=f"the index answered {{code}} for {url}",
        unreachable=f"cannot reach the index {index}",
    )
    if answer is None:
        return None
    body, kind = answer[1], answer[0].get("Content-Type", "")
    if "json" in kind:
        files = json.loads(body).get("files", [])
        return {f["filename"]: f.get("hashes", {}).get("sha256", "") for f in files if not f.get("yanked")}
    links = _Links()
    links.feed(body.decode("utf-8", "replace"))
    out: dict[str, str] = {}
    for href in links.hrefs:
        path, _, fragment = href.partition("#")
        out[path.rsplit("/", 1)[-1]] = (
            fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else ""
        )
    return out


def _version_files(files: dict[str, str], name: str, version: str) -> dict[str, str]:
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
    except InvalidVersion:
        return {}
    out = {}
    for filename, sha in files.items():
        try:
            parsed = (
                parse_wheel_filename(filename)
                if filename.endswith(".whl")
                else parse_sdist_filename(filename)
            )
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        if parsed[0] == canonicalize_name(name) and parsed[1] == wanted:
            out[filename] = sha
    return out


def check_wheel(variant: str, requirement: str, hashes: list[str], sources: Sources) -> Pin:
    name, _, version = requirement.partition("==")
    locked = ",".join(hashes)
    index = sources.index_for(version)
    try:
        files = index_files(index, name)
    except ExternalError as exc:
        return Pin(variant, "wheel", requirement, locked, "unchecked", str(exc))
    if files is None:
        return Pin(variant, "wheel", requirement, locked, "missing", f"{index} has no project {name}")
    served = _version_files(files, name, version)
    if not served:
        return Pin(
            variant, "wheel", requirement, locked, "missing", f"{index} serves no file of {requirement}"
        )
    gone = [sha for sha in hashes if sha not in served.values()]
    if gone:
        now = ", ".join(f"{f} sha256:{s[:12]}" for f, s in sorted(served.items()))
        return Pin(variant, "wheel", requirement, locked, "moved",
                   f"locked sha256:{gone[0][:12]} no longer served; {index} has {now}")  # fmt: skip
    return Pin(variant, "wheel", requirement, locked, "ok", f"{len(hashes)} file(s) in {index}")


def check_wheels(variant: pins.Variant, sources: Sources) -> list[Pin]:
    out: list[Pin] = []
    local = {pins.normalize_package(n) for n in variant.local_wheels}
    for path in (variant.lock_path, variant.wheelhouse_lock_path):
        if not path.is_file():
            continue
        for requirement, hashes in locked_files(path).items():
            if pins.normalize_package(requirement.partition("==")[0]) in local:
                out.append(Pin(variant.name, "wheel", requirement, ",".join(hashes), "local",
                               "built by bwstack (images/cpu-placeholders)"))  # fmt: skip
            else:
                out.append(check_wheel(variant.name, requirement, hashes, sources))
    for requirement in variant.overrides:
        if variant.lock_path.is_file() and requirement in locked_files(variant.lock_path):
            continue
        again = f"run 'bwstack lock --variant {variant.name}'"
        out.append(Pin(variant.name, "wheel", requirement, "", "unlocked",
                       f"not in {variant.lock_path.name}; {again}"))  # fmt: skip
    return out


# --- git sources ------------------------------------------------------------------------------------------


def check_source(variant: str, source: pins.Source) -> Pin:
    name = f"{source.name} {source.repo}@{source.ref[:12]}"
    with tempfile.TemporaryDirectory(prefix="bwstack-lock-check-") as scratch:
        git = ["git", "-C", scratch, "-c", "protocol.file.allow=always"]
        try:
            subprocess.run([*git, "init", "-q"], capture_output=True, timeout=60, check=True)
            done = subprocess.run(
                [*git, "fetch", "-q", "--depth", "1", "--filter=blob:none", source.repo, source.ref],
                capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return Pin(variant, "source", name, source.ref, "unchecked", f"git: {exc}")
    if done.returncode == 0:
        return Pin(variant, "source", name, source.ref, "ok", "the commit is fetchable")
    said = " ".join(done.stderr.split())
    if re.search(
        r"not our ref|couldn't find remote ref|no such remote ref|upload-pack: not our ref", said, re.I
    ):
        return Pin(
            variant, "source", name, source.ref, "missing", "the repository no longer serves this commit"
        )
    return Pin(variant, "source", name, source.ref, "unchecked", said[-200:] or "git fetch failed")


# --- model revision ---------------------------------------------------------------------------------------


def check_model(path: str, revision: str, endpoint: str = HF_ENDPOINT) -> Pin:
    url = f"{endpoint.rstrip('/')}/api/models/{path}/revision/{revision}"
    try:
        with urllib.request.urlopen(url, timeout=lock_command.TIMEOUT) as response:  # noqa: S310
            sha = str(json.load(response).get("sha", ""))
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return Pin("model", "model", path, revision, "missing", f"the Hub answered {exc.code}")
        return Pin("model", "model", path, revision, "unchecked", f"the Hub answered {exc.code}")
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        return Pin(
            "model",
            "model",
            path,
            revision,
            "unchecked",
            f"cannot reach {endpoint}: {getattr(exc, 'reason', exc)}",
        )
    if sha and sha != revision:
        return Pin("model", "model", path, revision, "moved", f"the revision now resolves to {sha}")
    return Pin("model", "model", path, revision, "ok", "")


# --- all of it ----------------------------------------------------------------------------------------------


def check_variant(variant: pins.Variant, sources: Sources) -> list[Pin]:
    out = [check_base(variant), *check_wheels(variant, sources)]
    out += [check_source(variant.name, source) for source in variant.sources.values()]
    return out


def check(
    images: Path,
    names: Iterable[str],
    *,
    sources: Sources,
    model: tuple[str, str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[Pin]:
    """Every pin of the named variants (and ``model``: path and pinned revision), one :class:`Pin` each,
    echoed as it comes."""
    out: list[Pin] = []
    for name in names:
        for pin in check_variant(pins.load_variant(images, name), sources):
            out.append(pin)
            if echo:
                echo(pin.line())
    if model is not None:
        pin = check_model(*model)
        out.append(pin)
        if echo:
            echo(pin.line())
    return out


def summary(found: list[Pin]) -> str:
    counts: dict[str, int] = {}
    for pin in found:
        counts[pin.state] = counts.get(pin.state, 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    bad = [p for p in found if not p.holds]
    verdict = "every pin holds" if not bad else f"{len(bad)} pin(s) do not hold or were not checked"
    return f"{len(found)} pin(s): {parts}; {verdict}"


def exit_status(found: list[Pin]) -> int:
    return 0 if found and all(p.holds for p in found) else 1


def to_json(found: list[Pin]) -> dict[str, Any]:
    return {"schema": SCHEMA, "holds": exit_status(found) == 0, "summary": summary(found),
            "pins": [p.to_json() for p in found]}  # fmt: skip
