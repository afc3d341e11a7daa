"""The whole sweep: the report document, the compose project, signal handling, each profile in turn."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, cast

from bwstack import __version__, launch, record
from bwstack.build import dockerbuild
from bwstack.build.standin_image import ensure_standin_image
from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.host import dockerimage, modelcache, secretfiles, stackproject, tinyimage
from bwstack.host.dockercompose import Project
from bwstack.know import next_try
from bwstack.record import read
from bwstack.record.types import NextTry, Row
from bwstack.render import compose
from bwstack.stack.schema import Stack
from bwstack.sweep import quality, report
from bwstack.sweep.display import Display, print_summary
from bwstack.sweep.fast import fast_override
from bwstack.sweep.plan import Options, Plan, make_plan, source_label, standin_fault
from bwstack.sweep.runner import Runner
from bwstack.sweep.streams import docker_client
from bwstack.tiny import ensure

#: per-profile budget on the stand-in when --timeout is not given
STANDIN_TIMEOUT_S = 120.0
#: stand-in healthcheck timing (compose interpolates these; the real stack keeps profiles.yaml's values)
STANDIN_HC_ENV = {"BWSTACK_HC_INTERVAL": "1s", "BWSTACK_HC_TIMEOUT": "20s", "BWSTACK_HC_CHECK_TIMEOUT": "15"}


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; the running container is removed before the sweep exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signal_handlers(handler: Any) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def default_out(stack: Stack) -> Path:
    """``reports/<UTC timestamp>/`` next to profiles.yaml."""
    return stack.root / "reports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def default_timeout(stack: Stack, standin: bool) -> float:
    """Per-profile budget: the stand-in's short one, else start period + a few healthcheck rounds."""
    return STANDIN_TIMEOUT_S if standin else stackproject.default_wait_seconds(stack)


def document_for(plan: Plan, options: Options, variant: str | None) -> report.Document:

    stack = plan.stack
    settings = stack.settings
    return report.new_document(
        stack={
            "file": stack.path.name,
            "project": settings.project,
            "model": stack.model.path,
            "revision": stack.model.revision,
            "served_name": stack.model.served_name,
            "gpu_arch": "cpu" if stack.is_cpu else settings.gpu_arch,
            "tp_size": stack.model.tp_size,
        },
        mode={
            "kind": "stand-in" if options.standin else "real",
            "source": source_label(stack, options),
            "standin": options.standin,
            "fast": options.fast,
            "bench": options.bench,
            "soak_s": options.soak_s,
            "compare_to": options.compare_to,
            "retrieval": options.retrieval,
            "variant": variant,
            "timeout_s": options.timeout_s,
        },
        variants=variant_manifests(stack, plan.names),
        plan=plan.names,
        generated_by=f"bwstack {__version__}",
    )


def variant_manifests(stack: Stack, names: Sequence[str]) -> dict[str, Any]:
    used = sorted({stack.variant_name_for(name) for name in names})
    return {name: stack.variant(name).manifest() for name in used}


#: what a resumed report must share with this run: (section, keys, "made ... <key>", "this ... has")
RESUME_MUST_MATCH = (
    ("mode", ("standin", "fast", "variant"), "with", "run"),
    ("stack", ("project", "model", "gpu_arch", "tp_size"), "for", "stack"),
)


def open_document(
    stack: Stack, names: Sequence[str], options: Options, out: Path, *, resume: bool, variant: str | None
) -> tuple[Plan, report.Document]:
    """The plan and the report: a fresh one, or the one in ``out`` when resuming (checked to match)."""
    results = out / record.RESULTS_FILE
    if not resume:
        if results.exists():
            raise UserError(
                "this folder already holds a sweep report; pass --resume to continue it or choose "
                "another --out",
                file=results,
            )
        plan = make_plan(stack, names, variant=variant, standin=options.standin)
        return plan, document_for(plan, options, variant)
    doc = read.load(results)
    plan = make_plan(stack, list(names) or list(doc["plan"]), variant=variant, standin=options.standin)
    fresh = cast(dict[str, Any], document_for(plan, options, variant))
    for section, keys, made, this in RESUME_MUST_MATCH:
        for key in keys:
            had = cast(dict[str, Any], doc)[section].get(key)
            if had != fresh[section][key]:
                raise UserError(
                    f"the report was made {made} {key}={had!r}, this {this} has "
                    f"{key}={fresh[section][key]!r}",
                    file=results,
                    field=f"{section}.{key}",
                )
    for name, manifest in fresh["variants"].items():
        if name in doc["variants"] and doc["variants"][name] != manifest:
            raise UserError(
                f"the pins of variant {name} changed since this report was started; start a new report",
                file=results,
                field=f"variants.{name}",
            )
        doc["variants"][name] = manifest
    for name in plan.names:
        if name not in doc["plan"]:
            doc["plan"].append(name)
    return plan, doc


def compose_project(
    plan: Plan, options: Options, out: Path, client: Any, console: Any
) -> tuple[Project, list[str]]:
    """Write the compose file(s) this sweep runs into the report folder; the project using them and the host
    adjustments made (stand-in only: see :func:`memlock_reset`). The stand-in runs the rendered GPU services
    with their GPU reservation removed by its own override (:func:`gpu_reservation_reset`), so any Docker
    engine runs it: no NVIDIA runtime, no hook on the host."""
    stack = plan.stack
    overrides = compose.Overrides()
    env: dict[str, str] | None = None
    name = stack.settings.project
    adjustments: list[str] = []
    files = [out / "compose.sweep.yaml"]
    if options.standin:
        images = {
            variant: ensure_standin_image(stack, variant=variant, echo=console.print)
            for variant in sorted({stack.variant_name_for(n) for n in plan.names})
        }
        overrides = compose.Overrides(
            image_by_variant=images, env_by_profile=standin_env(stack, plan.names, options)
        )
        env = {**STANDIN_HC_ENV, "BWSTACK_HC_START_PERIOD": f"{math.ceil(options.timeout_s)}s"}
        name = f"{stack.settings.project}-standin"
        files.append(out / STANDIN_OVERRIDE)
        atomic_write(files[-1], gpu_reservation_reset(plan.names))
        if not engine_allows_unlimited_memlock(client, next(iter(images.values()))):
            files.append(out / "compose.host.yaml")
            atomic_write(files[-1], memlock_reset(plan.names))
            adjustments.append(MEMLOCK_NOTE)
    else:
        env = model_env(stack, options)
        if stack.is_cpu:
            prepare_real_cpu(plan, console)
    atomic_write(files[0], compose.render_compose(stack, overrides))
    if options.fast:
        files.append(out / "compose.fast.yaml")
        atomic_write(files[-1], fast_override(stack, plan.names))
    return Project(files=tuple(files), name=name, workdir=stack.root, env=env), adjustments


def prepare_real_cpu(plan: Plan, console: Any) -> None:
    """A CPU stack's real sweep: its images (built once; the stack's own variant too: its image makes the copy
    model) and its tiny models in the model cache."""

    stack = plan.stack
    say = lambda m: console.print(m, markup=False)  # noqa: E731
    for variant in sorted({stack.variant_name_for(n) for n in plan.names} | {stack.settings.variant}):
        ref = launch.image_ref(stack, variant)
        if dockerimage.image_exists(ref):
            continue
        console.print(f"sweep: building {ref} (real SGLang on the CPU; once)", markup=False)
        status = dockerbuild.build(stack, variant, tag=ref, base_image=None, dry_run=False, quiet=True)
        if status != 0:
            raise ExternalError(f"docker build of {ref} failed (exit status {status})")
    ensure.ensure_for_stack(stack, echo=say, copy_writer=tinyimage.for_stack(stack))


def model_env(stack: Stack, options: Options) -> dict[str, str]:
    """Compose variables from the model cache for a GPU sweep: a full sweep refuses (ExternalError) until
    `bwstack fetch` verified the model, so no profile's start period covers a download; a --fast sweep (dummy
    weights, only config and tokenizer read) runs either way, offline when the model is fetched."""

    if not options.fast:
        return modelcache.service_env(stack)
    try:
        return modelcache.service_env(stack)
    except ExternalError:
        return {}


MEMLOCK_NOTE = (
    "this Docker engine cannot raise RLIMIT_MEMLOCK (rootless or nested Docker), so the stand-in services "
    "run without 'ulimits: memlock: -1' (compose.host.yaml); the CPU stand-in pins no memory"
)


def engine_allows_unlimited_memlock(client: Any, image: str) -> bool:
    """Whether the engine can start a container with ``memlock: -1`` (the rendered services ask for it)."""
    import docker

    container = client.containers.create(
        image,
        ["-c", ""],
        entrypoint=["python3"],
        ulimits=[docker.types.Ulimit(name="memlock", soft=-1, hard=-1)],
        network_mode="none",
        labels={"io.bwstack.sweep": "memlock-probe"},
    )
    try:
        container.start()
    except docker.errors.APIError as exc:
        return "rlimit" not in str(exc).lower()
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
    return True


#: the stand-in's own compose override file (in the report folder), next to the rendered compose file
STANDIN_OVERRIDE = "compose.nogpu.yaml"


def gpu_reservation_reset(names: Sequence[str]) -> str:
    """A compose override that removes each service's GPU reservation with Compose's ``!reset`` tag
    (``deploy.resources.reservations.devices``): the CPU stand-in runs the rendered GPU services on any
    engine."""
    lines = [
        "# GENERATED by `bwstack sweep --standin`: the CPU stand-in runs these services without GPUs",
        "services:",
    ]
    for name in names:
        lines += [
            f"  {json.dumps(name)}:",
            "    deploy:",
            "      resources:",
            "        reservations:",
            "          devices: !reset []",
        ]
    return "\n".join(lines) + "\n"


def memlock_reset(names: Sequence[str]) -> str:
    """A compose override that drops ``ulimits.memlock`` (Compose's ``!reset`` tag) for each service."""
    lines = ["# GENERATED by `bwstack sweep --standin`: " + MEMLOCK_NOTE, "services:"]
    for name in names:
        lines += [f"  {json.dumps(name)}:", "    ulimits:", "      memlock: !reset null"]
    return "\n".join(lines) + "\n"


def standin_env(stack: Stack, names: Sequence[str], options: Options) -> dict[str, dict[str, str]]:
    """Per profile: the fault its expectation needs, the arch it targets, the simulated load time."""
    env = {}
    for name in names:
        values = {
            "BWSTACK_STANDIN_FAULT": standin_fault(stack, name),
            "BWSTACK_STANDIN_ARCH": stack.arch_for(name),
        }
        if options.load_seconds is not None:
            values["BWSTACK_STANDIN_LOAD_SECONDS"] = f"{options.load_seconds:g}"
        env[name] = values
    return env


def run_sweep(
    stack: Stack,
    profiles: Sequence[str],
    *,
    variant: str | None,
    fast: bool,
    standin: bool,
    out: Path | None,
    resume: bool,
    timeout: float | None,
    keep: bool = False,
    standin_load_seconds: float | None = None,
    bench: bool = False,
    console: Any = None,
    soak: float = 0.0,
    compare_to: str | None = None,
    retrieval: bool = False,
) -> int:
    """Sweep ``profiles`` (all when empty): 0 when every verdict matches, 1 otherwise, 128+N on a signal.

    Bad input (unknown profile, --resume without a matching report, a class the stand-in cannot imitate)
    raises UserError; Docker/Compose failures raise ExternalError.
    """
    from rich.console import Console

    console = console or Console(highlight=False, soft_wrap=True)
    options = Options(
        fast=fast,
        standin=standin,
        timeout_s=float(timeout) if timeout else default_timeout(stack, standin),
        keep=keep,
        load_seconds=standin_load_seconds,
        bench=bench,
        soak_s=soak,
        compare_to=compare_to,
        retrieval=retrieval or compare_to is not None,
    )
    if compare_to is not None:
        stack.profile(compare_to)  # a UserError naming the profiles when unknown
        if standin:
            raise UserError(
                "the stand-in serves no logprobs to compare; drop --standin", field="--compare-to"
            )
        if profiles and compare_to not in profiles:
            profiles = [compare_to, *profiles]
    if retrieval and standin:
        raise UserError("the stand-in serves no logprobs to score; drop --standin", field="--retrieval")
    out_dir = out if out is not None else default_out(stack)
    plan, doc = open_document(stack, profiles, options, out_dir, resume=resume, variant=variant)
    if not standin:
        model_env(stack, options)  # refuse before any report or container when the model is not fetched
    for skipped in plan.skipped:
        console.print(f"bwstack: warning: skipped {skipped}", markup=False)
    todo = quality.ordered([name for name in plan.names if name not in doc["results"]], compare_to)
    report.write_report(out_dir, doc)
    where = (
        "the CPU stand-in" if standin else ("real SGLang on the CPU" if stack.is_cpu else "this host's GPUs")
    )
    console.print(
        f"sweep: {len(todo)} profile(s) to run on {where}, {len(report.decided(doc))} already decided; "
        f"report in {out_dir}",
        markup=False,
    )
    code = execute(plan, options, doc, out_dir, todo=todo, console=console) if todo else 0
    print_summary(doc, out_dir, console)
    if code:
        return code
    return 0 if report.all_match(doc) else 1


def execute(
    plan: Plan, options: Options, doc: report.Document, out: Path, *, todo: Sequence[str], console: Any
) -> int:
    """Run ``todo`` one by one, recording each verdict; returns 128+N when a signal stopped the sweep."""
    client = docker_client()
    for note in secretfiles.ensure_secrets(plan.stack):
        console.print(note, markup=False)
    runner: Runner | None = None
    with signal_handlers(_raise_interrupted):
        try:
            project, adjustments = compose_project(plan, options, out, client, console)
            for note in adjustments:
                console.print(f"bwstack: warning: {note}", markup=False)
            if adjustments:
                doc["host_adjustments"] = adjustments
            with Display(console, len(todo)) as display:
                step = quality.Step(plan.stack, out, options.compare_to) if options.retrieval else None
                runner = Runner(plan.stack, project, client, options, display, quality=step)
                runner.remove_leftovers()
                for index, name in enumerate(todo, 1):
                    display.begin(index, name, profile_detail(plan.stack, name, options))
                    row = runner.run_profile(name)
                    add_next_try(plan.stack, doc, row)
                    report.record(doc, row)
                    report.write_report(out, doc)
                    display.end(row)
        except Interrupted as exc:
            console.print(
                f"bwstack: interrupted by {signal.Signals(exc.signum).name}; removing the running container",
                markup=False,
            )
            return 128 + exc.signum
        finally:
            with signal_handlers(signal.SIG_IGN):
                if runner is not None:
                    runner.finish()
    return 0


def add_next_try(stack: Stack, doc: report.Document, row: Row) -> None:
    """A failed row gets ``next_try`` ({profile, why}): the nearest profile worth trying, never one that is
    known, predicted or (in this sweep) seen to fail on the row's arch (:mod:`bwstack.know.next_try`)."""

    if row["verdict"] == "healthy":
        return
    seen = {name: str(r["verdict"]) for name, r in doc["results"].items()}
    seen[row["profile"]] = str(row["verdict"])
    try:
        hint = next_try.suggest(stack, row["profile"], str(row["verdict"]), verdicts=seen).to_json()
    except (UserError, ExternalError, OSError, ValueError) as exc:  # a hint never stops the sweep
        hint = {"profile": None, "why": f"no hint: {' '.join(str(exc).split())}"}
    row["next_try"] = cast(NextTry, hint)


def profile_detail(stack: Stack, name: str, options: Options) -> str:
    detail = f"expect {stack.profile(name).expect}, {stack.variant_name_for(name)}"
    if options.standin:
        detail += f", fault {standin_fault(stack, name)}"
    detail += (", fast" if options.fast else "") + (", bench" if options.bench else "")
    detail += f", compare to {options.compare_to}" if options.compare_to else ""
    return detail + (f", soak {options.soak_s:g} s" if options.soak_s else "")
