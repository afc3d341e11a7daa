"""``bwstack upgrade OLD NEW --measure``: the divergence an upgrade brings, measured, not predicted. For CPU
variants (``images/<v>/`` with ``device = "cpu"``), the old and the new variant's image each serve one
healthy profile (the first of the named ones whose ``expect`` is ``healthy``) in a container of its own on a
free loopback port, one after the other: the old one serves, its answers to :mod:`bwstack.quality.compare`'s
seeded prompts are recorded (``compare --save-a``'s file), it is removed; the new one serves and is scored
against the recording (``compare --a-from``): teacher-forced KL divergence, top-1 agreement, retrieval by
length. One server at a time is what a GPU host can hold (two GLM-5 servers do not fit at once), so it is the
one path. Each container is removed when its phase ends, also on failure or Ctrl-C; each phase says so on
stderr.

On a CPU stack a side given as a bare SGLang version is measured on the CPU variant of ``images/`` that pins
that release. Two GPU variants of a GPU stack are measured on this host's GPUs, the same sequence, each side
the profile's rendered compose service started as ``bwstack up`` starts it (:mod:`bwstack.ops.measure_gpu`);
one GPU and one CPU variant are refused (the device would be the difference).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bwstack import launch
from bwstack.errors import ExternalError, UserError
from bwstack.host import secretfiles, stackproject
from bwstack.ops import measure_gpu
from bwstack.quality import compare, recorded, show
from bwstack.render import k8s
from bwstack.stack import modelconfig, snapshots
from bwstack.stack.schema import Stack
from bwstack.sweep import plan, run
from bwstack.sweep.streams import docker_client
from healthchecks import common, imagelayout

LABEL = "io.bwstack.upgrade-measure"


def cpu_variant(stack: Stack, variant: str, version: str) -> str:
    """The CPU variant of images/ that measures one side: the side's own variant when it is a CPU variant of
    images/, else the one pinning SGLang ``version``; UserError otherwise."""
    names = sorted(p.parent.name for p in stack.images_dir.glob("*/pins.toml"))
    if variant in names and stack.variant(variant).device == "cpu":
        return variant
    for name in names:
        if stack.variant(name).device == "cpu" and stack.variant(name).sglang_version == version:
            return name
    cpu = [n for n in names if stack.variant(n).device == "cpu"]
    raise UserError(
        f"--measure on a CPU stack runs CPU variants; {variant} is not one and no CPU variant pins sglang "
        f"{version} (CPU variants: {', '.join(cpu) or 'none'}); GPU variants are measured on a GPU host from "
        "the GPU stack: bwstack upgrade OLD NEW --measure -f profiles.yaml",
        field="--measure",
    )


def measured_profile(stack: Stack, names: Sequence[str], variants: Sequence[str] = ()) -> str:
    """The profile both variants serve: the first of ``names`` (default all) that is expected healthy and that
    each of ``variants``' SGLang can launch (a backend field an older release has no flag for cannot)."""
    refused: list[str] = []
    for name in list(names) or list(stack.profiles):
        if stack.profile(name).expect != "healthy":
            continue
        try:
            for variant in variants:
                launch.launch_spec(_on(stack, name, variant), name, variant).argv  # noqa: B018 (renders it)
        except launch.LaunchError as exc:
            refused.append(str(exc))
            continue
        return name
    why = f" ({'; '.join(refused)})" if refused else ""
    raise UserError(
        f"--measure needs a profile whose expect is healthy and that both variants can launch{why}",
        field="PROFILES",
    )


def argv_for(argv: Sequence[str], snapshot: snapshots.Snapshot) -> tuple[list[str], list[str]]:
    """``argv`` less the options ``snapshot``'s SGLang does not have (with their values), and what was left
    out: the stack's extra args are spelled for its own variant (the CPU stack's for 0.5.23), and an older
    release refuses an option it does not know."""
    kept: list[str] = []
    left: list[str] = []
    index = 0
    while index < len(argv):
        item = argv[index]
        option = item.partition("=")[0]
        if item.startswith("--") and snapshot.flag(option) is None:
            takes = "=" not in item and index + 1 < len(argv) and not argv[index + 1].startswith("--")
            left += argv[index : index + 1 + takes]
            index += 1 + takes
            continue
        kept.append(item)
        index += 1
    return kept, left


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, container: Any, deadline: float) -> None:
    """Until ``/v1/models`` answers 200; ExternalError when the container stops or the deadline passes."""
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url + "/v1/models", timeout=5) as answer,  # noqa: S310 (loopback http)
        ):
            if answer.status == 200:
                return
        container.reload()
        if container.status in ("exited", "dead"):
            tail = container.logs(tail=5).decode("utf-8", "replace").strip().splitlines()
            raise ExternalError(f"{container.name} stopped before it served: {' | '.join(tail)[-400:]}")
        time.sleep(2)
    raise ExternalError(f"{container.name} did not answer {url}/v1/models in time")


@contextlib.contextmanager
def serving(
    stack: Stack,
    profile: str,
    variant: str,
    client: Any,
    wait_s: float,
    *,
    echo: Callable[[str], None] = lambda _m: None,
) -> Iterator[str]:
    """``profile`` on ``variant``'s image in a container of its own on a free loopback port, the options
    its SGLang lacks left out and fail-fast off; its base URL. The container and its JIT volume are removed
    when the block ends."""
    spec = launch.launch_spec(stack, profile, variant)
    argv, left = argv_for(spec.argv, stack.snapshot(variant))
    if left:
        echo(f"measure: {variant}'s SGLang has no {' '.join(left)}: left out")
    cache = stack.settings.model_cache_path
    if cache is None:
        raise UserError("--measure needs stack.model_cache_path (the CPU stacks set it)", file=stack.path)
    port = _free_port()
    name = f"bwstack-measure-{variant}-{uuid.uuid4().hex[:8]}"
    # a fresh named volume at the JIT cache: Docker fills it from the image's folder, owner included (as the
    # rendered services' per-variant volume); removed with the container
    jit = client.volumes.create(name=f"{name}-jit", labels={LABEL: variant})
    container = client.containers.run(
        spec.image,
        command=argv,
        detach=True,
        name=name,
        # fail-fast off: a server its healthcheck judges broken keeps serving, so what is measured is its
        # divergence, not its exit
        environment={
            key: k8s.from_compose(value) for key, value in spec.env({common.ENV_FAIL_FAST: "0"}).items()
        },
        ports={f"{spec.port}/tcp": ("127.0.0.1", port)},
        shm_size=spec.shm_size,
        volumes={
            str((stack.root / cache).resolve()): {"bind": imagelayout.HF_HOME, "mode": "rw"},
            jit.name: {"bind": imagelayout.JIT_CACHE, "mode": "rw"},
        },
        labels={LABEL: variant},
    )
    started = time.monotonic()
    echo(f"measure: {variant}: started {name} ({spec.image}) on 127.0.0.1:{port}")
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, container, started + wait_s)
        echo(f"measure: {variant}: serving after {time.monotonic() - started:.0f} s")
        yield url
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
        with contextlib.suppress(Exception):
            jit.remove(force=True)
        echo(f"measure: {variant}: {name} stopped and removed")


def on_gpus(stack: Stack, old: str, new: str) -> bool:
    """Whether the two side variants are measured on this host's GPUs: both GPU variants, on a GPU stack
    (its own variant not a CPU one); UserError for one of each on a GPU stack."""
    if stack.variant(stack.settings.variant).device == "cpu":
        return False
    gpu = [stack.variant(v).device != "cpu" for v in (old, new)]
    if all(gpu):
        return True
    if any(gpu):
        raise UserError(
            f"both sides run on one device: {old} and {new} are one GPU and one CPU variant "
            "(the difference would be the device, not the upgrade)",
            field="--measure",
        )
    return False


def preflight(stack: Stack, old: str, new: str, names: Sequence[str]) -> None:
    """What ``--measure`` can refuse in seconds, before the prediction runs (UserError): one GPU and one CPU
    variant; for two GPU variants, a host without usable GPUs, no profile both can launch, an image not
    built."""
    if on_gpus(stack, old, new):
        measure_gpu.check_host(old)
        profile = measured_profile(stack, names, (old, new))
        for variant in (old, new):
            measure_gpu.check_image(_on(stack, profile, variant), profile, variant)


def measure(
    stack: Stack,
    old: tuple[str, str],
    new: tuple[str, str],
    names: Sequence[str],
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """The comparison of ``old`` and ``new`` ((variant, SGLang version) each) on real servers: the variants
    measured (on this host's GPUs for two GPU variants of a GPU stack, :mod:`bwstack.ops.measure_gpu`; else
    the CPU variants), the profile, and ``compare``'s report as JSON (:func:`bwstack.quality.show.to_json`)
    and as text."""
    gpus = on_gpus(stack, old[0], new[0])
    profile = measured_profile(stack, names, (old[0], new[0]) if gpus else ())
    window = modelconfig.sparse_window(stack)
    serve: Callable[[str], contextlib.AbstractContextManager[str]]
    api_key: str | None = None
    if gpus:
        variants = old[0], new[0]
        api_key = secretfiles.api_key(stack)
        echo(f"measure: {profile} on {variants[0]}, then on {variants[1]}, one server at a time, on this "
             "host's GPUs")  # fmt: skip

        def serve(variant: str) -> contextlib.AbstractContextManager[str]:
            return measure_gpu.serving(_on(stack, profile, variant), profile, variant, echo=echo)

    else:
        variants = cpu_variant(stack, *old), cpu_variant(stack, *new)
        from rich.console import Console

        console = Console(stderr=True, highlight=False, soft_wrap=True)
        for variant in variants:  # the tiny models in the cache and each image (built once)
            run.prepare_real_cpu(
                plan.Plan(stack=_on(stack, profile, variant), names=[profile], skipped=[]), console
            )
        client = docker_client()
        wait_s = stackproject.default_wait_seconds(stack)
        echo(f"measure: {profile} on {variants[0]}, then on {variants[1]}, one server at a time")

        def serve(variant: str) -> contextlib.AbstractContextManager[str]:
            return serving(_on(stack, profile, variant), profile, variant, client, wait_s, echo=echo)

    with tempfile.TemporaryDirectory(prefix="bwstack-measure-") as scratch:
        answers_file = Path(scratch) / "answers-old.json"
        with serve(variants[0]) as url:
            recording = time.monotonic()
            answers = compare.record(compare.Side(f"{profile}@{variants[0]}", url, api_key), window=window,
                                     echo=echo)  # fmt: skip
            recording = time.monotonic() - recording
            recorded.save(answers_file, answers)
            echo(f"measure: {variants[0]}: recorded {len(answers.prompts)} prompts' answers")
        old_answers = recorded.load(answers_file)
        with serve(variants[1]) as url:
            report = compare.run(old_answers, compare.Side(f"{profile}@{variants[1]}", url, api_key),
                                 window=window, echo=echo)  # fmt: skip
    report.seconds += recording  # the comparison: recording the old, scoring the new (starts not counted)
    return {"profile": profile, "variants": list(variants), "report": show.to_json(report),
            "lines": show.lines(report)}  # fmt: skip


def _on(stack: Stack, profile: str, variant: str) -> Stack:
    """The stack with ``profile`` on ``variant``."""
    profiles = dict(stack.profiles)
    profiles[profile] = profiles[profile].model_copy(update={"variant": variant})
    return dataclasses.replace(stack, profiles=profiles)
