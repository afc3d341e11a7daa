"""Run the stack on this host: ``bwstack up``, ``down`` and ``build``.

``up`` starts one profile's service through Compose, stops any other profile's container first (one backend at
a time on the same GPUs and port), and waits for the container's health with live progress; when it fails it
prints the healthcheck's one-line reason and the server log's classified root cause. ``up --soak S`` then
keeps the sweep's soak (:mod:`bwstack.sweep.soak`, ``stack.soak`` settings) on the healthy service for S
seconds and prints its figures and verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bwstack import __version__, classify, launch
from bwstack.errors import ExternalError, UserError
from bwstack.host import cpubase, enginekind, modelcache, secretfiles, startlog
from bwstack.host.dockercompose import Project
from bwstack.host.doctor import image
from bwstack.host.gitinfo import git
from bwstack.know import next_try
from bwstack.lock import command as locking
from bwstack.lock import wheelhouse
from bwstack.nogpu import ensure
from bwstack.render import compose
from bwstack.stack.baselines import describe
from bwstack.stack.pins import Variant
from bwstack.stack.schema import Stack
from bwstack.sweep import soak
from healthchecks import common, imagelayout, norestart

POLL_SECONDS = 2.0
#: seconds between two progress lines of ``up --soak``
SOAK_PROGRESS_S = 15.0
#: ``up --soak``: the exit status when the soak's verdict is not ``ok`` (hang, nan, garbage, failed requests
#: past the threshold by their class, or no result), the same as a start that does not get healthy
EXIT_SOAK_FAILED = 1


HOST_OVERRIDE_FILE = "compose.host.yaml"


def project_for(stack: Stack, compose_file: Path | None = None, env: dict[str, str] | None = None) -> Project:
    """The compose project of the stack; a host-local ``compose.host.yaml`` next to compose.yaml applies too
    (host adjustments such as dropping ``memlock: -1`` on engines that cannot grant it; never committed)."""
    main_file = compose_file or stack.compose_file
    host_file = main_file.parent / HOST_OVERRIDE_FILE
    return Project(
        files=(main_file, host_file) if host_file.is_file() else (main_file,),
        name=stack.settings.project,
        workdir=stack.root,
        env=env,
    )


def parse_duration(text: str) -> float:
    """Seconds in a compose duration such as ``45m``, ``30s``, ``1h30m`` or ``500ms``."""
    seconds = common.duration_seconds(text)
    if seconds is None:
        raise UserError(f"invalid duration {text!r} (examples: 30s, 45m, 1h30m)")
    return seconds


def ensure_secrets(stack: Stack, kind: enginekind.EngineKind | None = None) -> list[str]:
    """Make each secret file the stack mounts exist (empty, mode 0600) and readable for the serving user only
    (:mod:`bwstack.host.secretfiles`), as the engine runs it (``kind``: SELinux labels, rootless or
    userns-remapped uids; detected when not given); one note per file created or changed."""
    notes: list[str] = []
    if not launch.stack_secrets(stack):
        return notes
    kind = kind or enginekind.detect()
    folder = (stack.root / stack.settings.secrets_dir).resolve()
    for name in launch.stack_secrets(stack):
        path = folder / name
        if not path.exists():
            secretfiles.create_secret(path)
            notes.append(
                f"created empty secret file {path} (mode 0600, readable for the serving user uid "
                f"{imagelayout.UID} only); put your token there if needed"
            )
        secretfiles.check_regular(path)
        if name == "api_key":
            with contextlib.suppress(OSError):  # unreadable here: serve.py checks it in the container
                problem = common.api_key_problem(path.read_text(encoding="utf-8", errors="replace").strip())
                if problem is not None:
                    raise UserError(problem, file=path)
        changed = secretfiles.grant_serving_user(path, kind.serving_uid)
        if changed:
            notes.append(changed)
        if kind.relabel:
            labelled = enginekind.relabel(path)
            notes.append(labelled or f"{path}: SELinux is enforcing and chcon is missing: label it "
                         "container_file_t yourself")  # fmt: skip
    return notes


def refuse_known_bad(stack: Stack, profile_name: str) -> None:
    profile = stack.profile(profile_name)
    if not profile.known_bad:
        return
    evidence = "; ".join(profile.evidence)
    raise UserError(
        f"profile {profile_name!r} is known to fail on {stack.arch_for(profile_name)} "
        f"with '{profile.expect}': "
        f"{profile.why or profile.description} (evidence: {evidence}); pass --force to start it anyway",
        file=stack.path,
        line=stack.line_of("profiles", profile_name, "expect"),
        field=f"profiles.{profile_name}.expect",
    )


def check_fresh(stack: Stack) -> None:
    """Refuse to start from a compose.yaml that is not a fresh render of profiles.yaml."""
    compose_file = stack.compose_file
    if not compose_file.exists():
        raise UserError("compose.yaml missing; run 'bwstack render'", file=compose_file)
    if compose_file.read_text(encoding="utf-8") != compose.render_compose(stack):
        raise UserError(
            "compose.yaml is not a fresh render of profiles.yaml; run 'bwstack render'", file=compose_file
        )


def stop_other_profiles(project: Project, keep: str) -> list[str]:
    """Remove the containers of every other profile (same GPUs, same port); return the services removed."""
    removed = []
    for row in project.containers():
        service = row.get("Service", "")
        if service and service != keep:
            project.run(
                ["rm", "--stop", "--force", service], profiles=["*"], capture=True, timeout=300, check=True
            )
            removed.append(service)
    return removed


def up(
    stack: Stack,
    profile_name: str,
    *,
    force: bool,
    timeout: int | None,
    wait: bool,
    project: Project | None = None,
    out: Any = None,
    skip_model_check: bool = False,
    soak_s: float = 0.0,
    retry: bool = False,
) -> int:
    """Start one profile and wait for health; 0 healthy (or started with wait=False), 1 otherwise. With
    ``soak_s`` (and ``wait``) the healthy service is then soaked (:func:`soak_service`): 1 unless its verdict
    is ``ok``. ``retry``: the serve wrapper forgets a verdict it remembered for this launch spec (a start of
    the same spec otherwise exits at once instead of loading the model again; healthchecks/norestart.py).

    Without ``project`` (the real stack) the model must be fetched first (:func:`modelcache.service_env`
    refuses with ExternalError otherwise), so the start period never covers a download."""
    echo = out or sys.stdout
    stack.profile(profile_name)
    if force:
        if stack.profile(profile_name).known_bad:
            print(f"bwstack: warning: starting known-bad profile {profile_name} (--force)", file=sys.stderr)
    else:
        refuse_known_bad(stack, profile_name)
    started_real = project is None
    if project is None:
        check_fresh(stack)
        warn = lambda text: print(f"bwstack: warning: {text}", file=sys.stderr)  # noqa: E731
        project = project_for(stack, env=modelcache.service_env(stack, skip=skip_model_check, warn=warn))

        print(f"bwstack: {describe(stack)}", file=echo)  # which quality checks the healthcheck runs
    if stack.tiny_models:
        say = lambda m: print(f"bwstack: {m}", file=echo)  # noqa: E731
        python = wheelhouse.host_python(stack.variant(stack.settings.variant), say)
        ensure.ensure_for_stack(stack, echo=say, copy_python=python)
    for note in ensure_secrets(stack):
        print(f"bwstack: {note}", file=echo)
    key_file = (stack.root / stack.settings.secrets_dir / "api_key").resolve()
    if stack.settings.api_key and secretfiles.state_of("api_key", key_file).state == "empty":
        print(f"bwstack: warning: stack.api_key is on but {key_file} is empty: the server takes no API key",
              file=sys.stderr)  # fmt: skip
    if started_real and image.main_check(stack, stack.variant_name_for(profile_name), before_up=True):
        return 1
    for service in stop_other_profiles(project, profile_name):
        print(f"bwstack: stopped {service} (one profile at a time)", file=echo)
    if retry:
        project = dataclasses.replace(project, env={**(project.env or {}), norestart.ENV_RETRY: "1"})
        print(f"bwstack: {profile_name}: --retry: a verdict remembered for this spec is cleared", file=echo)
    result = project.run(["up", "--detach", profile_name], profiles=[profile_name])
    if result.returncode != 0:
        return 1
    if not wait:
        return 0
    limit = float(timeout) if timeout else default_wait_seconds(stack)
    status = wait_healthy(project, profile_name, limit, echo, stack=stack)
    if status != 0 or soak_s <= 0:
        return status
    return soak_service(stack, project, profile_name, soak_s, echo)


def soak_service(stack: Stack, project: Project, service: str, seconds: float, echo: Any) -> int:
    """The sweep's soak step against the started, healthy service: ``soak_client.py`` inside its container
    against 127.0.0.1 (``docker exec``), ``stack.soak`` settings, a progress line every
    :data:`SOAK_PROGRESS_S`; prints the figures and the verdict line. 0 when the verdict is ``ok``, else
    :data:`EXIT_SOAK_FAILED`."""
    settings = soak.for_profile(stack, service)
    cid = container_id(project, service)
    if cid is None:
        print(f"bwstack: {service}: no container to soak", file=echo)
        return EXIT_SOAK_FAILED
    lengths = ",".join(str(n) for n in soak.lengths(settings))
    print(
        f"bwstack: {service}: soaking for {seconds:g} s ({settings.concurrency} streams, prompts of "
        f"{lengths} tokens, {settings.output_len} sampled tokens each, no token for "
        f"{soak.stall_after(settings):g} s = hang)",
        file=echo,
        flush=True,
    )

    def tick(elapsed: float) -> None:
        state = inspect(cid)["State"]
        health = (state.get("Health") or {}).get("Status", "none")
        print(f"bwstack: soak: {elapsed:.0f} of {seconds:g} s, container {state.get('Status')}/{health}",
              file=echo, flush=True)  # fmt: skip

    key = f"{imagelayout.SECRETS_DIR}/api_key" if stack.settings.api_key else None
    found = soak.measure(
        settings, cid, port=stack.settings.port, seconds=seconds, api_key_file=key,
        run=soak.with_progress(tick, SOAK_PROGRESS_S),
    )  # fmt: skip
    for line in soak.summary(found):
        print(f"bwstack: {line}", file=echo, flush=True)
    if found.get("verdict") == "ok":
        return 0
    if found.get("verdict") in soak.FAILING:
        # the verdict stands without a hint
        with contextlib.suppress(UserError, ExternalError, OSError, ValueError):
            print(f"bwstack: {next_try.suggest(stack, service, str(found['verdict'])).line()}", file=echo)
    return EXIT_SOAK_FAILED


def default_wait_seconds(stack: Stack) -> float:
    hc = stack.settings.healthcheck
    return parse_duration(hc.start_period) + (hc.retries + 1) * parse_duration(hc.interval) + 60


def container_id(project: Project, service: str) -> str | None:
    for row in project.containers():
        if row.get("Service") == service:
            return str(row.get("ID") or row.get("Id") or "") or None
    return None


def inspect(container: str) -> dict[str, Any]:
    result = subprocess.run(
        ["docker", "inspect", container], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise ExternalError(f"docker inspect {container} failed: {result.stderr.strip()[:200]}")
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data[0]


def health_reason(state: dict[str, Any]) -> str:
    """The healthcheck's last one-line verdict from a container's State."""
    health = state.get("Health") or {}
    for entry in reversed(health.get("Log") or []):
        lines = [ln for ln in str(entry.get("Output", "")).splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return ""


def wait_healthy(project: Project, service: str, limit: float, echo: Any, stack: Stack | None = None) -> int:
    """Poll the container's health until healthy / unhealthy / exited / timeout, with a progress line."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=echo, highlight=False)
    start = time.monotonic()
    cid = None
    status_text = "starting"
    watch: startlog.StartLog | None = None
    with console.status(f"[bold]{service}[/]: waiting for the container") as status:
        while True:
            elapsed = time.monotonic() - start
            cid = cid or container_id(project, service)
            if cid is not None:
                details = inspect(cid)
                state = details["State"]
                health = (state.get("Health") or {}).get("Status", "none")
                reason = health_reason(state)
                status_text = f"{state.get('Status')}/{health}"
                watch = watch or startlog.StartLog(cid)
                watch.poll()  # the start's phase, from the server's own log
                shown = watch.line() if health == "starting" else reason
                shown = escape(shown[:110])
                status.update(f"[bold]{service}[/]: {status_text} after {elapsed:.0f} s  {shown}")
                if health == "healthy":
                    console.print(f"[green]{service}: healthy[/] after {elapsed:.0f} s: {reason}")
                    if watch.words():
                        console.print(f"  start: {watch.words()}", markup=False)
                    return 0
                # a restart is a failure too: report the first one, not the third reload of the model
                restarted = state.get("Restarting") or int(details.get("RestartCount") or 0) > 0
                if health == "unhealthy" or state.get("Status") in {"exited", "dead"} or restarted:
                    report_failure(console, cid, service, state, elapsed, stack=stack)
                    return 1
            if elapsed > limit:
                console.print(f"[red]{service}: not healthy within {limit:.0f} s[/] (last: {status_text})")
                if cid:
                    report_failure(console, cid, service, inspect(cid)["State"], elapsed, stack=stack)
                return 1
            time.sleep(POLL_SECONDS)


def report_failure(
    console: Any, cid: str, service: str, state: dict[str, Any], elapsed: float, *, stack: Stack | None = None
) -> None:

    reason = health_reason(state) or "no healthcheck verdict recorded"
    console.print(
        f"[red]{service}: unhealthy[/] after {elapsed:.0f} s (container {state.get('Status')}, "
        f"exit {state.get('ExitCode')})"
    )
    console.print(f"  healthcheck: {reason}")
    logs = subprocess.run(
        ["docker", "logs", "--tail", "2000", cid], capture_output=True, text=True, timeout=60, check=False
    )
    match = classify.classify_text(logs.stdout + logs.stderr)
    if match["line"] is not None:  # a signature matched (no match: "healthy" or "starting", no line)
        console.print(f"  server log: {match['class']} at line {match['line']}: {str(match['text'])[:200]}")
    console.print(f"  details: docker inspect --format '{{{{json .State.Health}}}}' {cid[:12]}")
    cls = failure_class(reason, str(match["class"]))
    if stack is not None and cls is not None:
        try:
            line = next_try.suggest(stack, service, cls).line()
        except (UserError, ExternalError, OSError, ValueError) as exc:  # the failure report stands without it
            line = f"next to try: no hint ({' '.join(str(exc).split())})"
        console.print(f"  {line}", markup=False)


def failure_class(health_reason: str, log_class: str | None) -> str | None:
    """The failure class of a failed ``up``: the server log's root cause, else the healthcheck's class."""

    if log_class and log_class != "healthy":
        return log_class
    cls = classify.probe_class(health_reason)
    return None if cls in (None, "healthy", "starting") else cls


def down(stack: Stack, *, volumes: bool, project: Project | None = None) -> int:
    project = project or project_for(stack)
    args = ["down", "--remove-orphans"] + (["--volumes"] if volumes else [])
    return project.run(args, profiles=["*"]).returncode


def build(
    stack: Stack,
    variant_name: str,
    *,
    tag: str | None,
    base_image: str | None,
    dry_run: bool,
    quiet: bool = False,
) -> int:
    """``docker build`` of one variant with every pin as a build arg; returns docker's exit status."""
    variant = stack.variant(variant_name)
    if variant.is_cpu and not dry_run and base_image is None:
        prepare_cpu_build(stack, variant, echo=(lambda _m: None) if quiet else print)
    argv = docker_build_argv(stack, variant_name, tag=tag, base_image=base_image)
    if dry_run:
        print(" ".join(_shell_quote(a) for a in argv))
        return 0
    result = subprocess.run(argv, cwd=stack.root, check=False, capture_output=quiet, text=True)
    if result.returncode != 0 and quiet:
        sys.stderr.write((result.stdout or "")[-4000:] + (result.stderr or "")[-4000:])
    prune_build_leftovers(argv)
    if result.returncode == 0 and tag is None and base_image is None:
        return image.main_check(stack, variant_name)
    return result.returncode


def prepare_cpu_build(stack: Stack, variant: Variant, *, echo: Callable[[str], object]) -> str:
    """A CPU variant's base, ``[base] image``: made locally from the Debian root file system (mmdebstrap, no
    registry) and the verified wheelhouse, laid out like the real base (:mod:`bwstack.host.cpubase`); its
    override wheels, verified against overrides.lock, staged in ``images/<variant>/override-wheels/`` for the
    Dockerfile's offline override step. The serving image is then built from the repository's own context, as
    a GPU variant's is."""
    base = cpubase.ensure_base(stack.root, variant, echo=echo)
    staged = wheelhouse.stage_overrides(variant, echo=echo)
    echo(f"overrides: {len(variant.overrides)} wheel(s) staged in images/{variant.name}/{staged.name}/")
    return base


#: what the Dockerfile reads from its build context (see .dockerignore); a staged context copies these
CONTEXT_ITEMS = (
    "Dockerfile",
    "healthchecks",
    "images/build-sources.sh",
    "images/verify_pins.py",
)

BUILD_ID_ARG = "BWSTACK_BUILD_ID"
#: the build ids of this process's builds (tests prune what a crashed build left)
BUILD_IDS: list[str] = []


def prune_build_leftovers(argv: Sequence[str] | None = None) -> None:
    """Keep the build-only stage of the build ``argv`` ran as the build cache of its target, tagged
    ``bwstack/build-stage:<target>`` (the legacy builder leaves it untagged; pruning it would throw away the
    cached wheelhouse install of a CPU variant), and remove the stage image that tag held before. Without
    ``argv``: prune what the builds of this process left untagged. Never touches another build's images,
    which may still be running."""
    prefix = f"{BUILD_ID_ARG}="
    if argv is None:
        for own in BUILD_IDS:
            _docker("image", "prune", "--force", *_stage_filters(own))
        return
    build_id = next((a.removeprefix(prefix) for a in argv if a.startswith(prefix)), None)
    target = argv[argv.index("--tag") + 1] if "--tag" in argv else None
    if build_id is None or target is None:
        return
    found = _docker("images", "--quiet", "--no-trunc", *_stage_filters(build_id)).stdout.split()
    if not found:
        return
    stage_tag = f"{STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', target)[:120]}"
    old = _docker("image", "inspect", "--format", "{{.Id}}", stage_tag).stdout.strip()
    _docker("tag", found[0], stage_tag)
    if old and old != found[0]:
        _docker("rmi", old)


STAGE_REPO = "bwstack/build-stage"


def _stage_filters(build_id: str) -> list[str]:
    return ["--filter", "dangling=true", "--filter", "label=io.bwstack.stage=build-only",
            "--filter", f"label=io.bwstack.build-id={build_id}"]  # fmt: skip


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=False)


def docker_build_argv(
    stack: Stack,
    variant_name: str,
    *,
    tag: str | None,
    base_image: str | None,
    context: Path | None = None,
) -> list[str]:
    """The ``docker build`` command line of a variant's serving image (pins checked first)."""

    variant = stack.variant(variant_name)
    for path in (variant.lock_path, variant.manifest_path, variant.cli_snapshot_path):
        if not path.is_file():
            hint = "bwstack lock" if path == variant.lock_path else "bwstack render"
            raise UserError(f"missing {path.name}; run '{hint}'", file=path)
    for problem in locking.lock_problems(variant):
        raise UserError(problem, file=variant.lock_path)
    args = variant.build_args()
    if base_image:
        args["BASE_IMAGE"] = base_image
        args["PINNED_INSTALL"] = "0"  # the CPU stand-in base carries none of the pinned packages
    args["BWSTACK_VERSION"] = __version__
    args["BWSTACK_REVISION"] = _git_revision(stack.root)
    args["BUILD_DATE"] = _build_date(stack.root)
    args[BUILD_ID_ARG] = uuid.uuid4().hex[:16]
    BUILD_IDS.append(args[BUILD_ID_ARG])
    argv = [
        "docker",
        "build",
        "--file",
        str(stack.root / "Dockerfile"),
        "--tag",
        tag or launch.image_ref(stack, variant.name),
    ]
    for key, value in args.items():
        argv += ["--build-arg", f"{key}={value}"]
    argv.append(str(context or stack.root))
    return argv


def _build_date(root: Path) -> str:
    """The commit time of HEAD (reproducible, like SOURCE_DATE_EPOCH), else now; UTC ISO 8601."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        stamp = datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    committed = git(root, "log", "-1", "--format=%ct")
    if committed is not None and committed.isdigit():
        return datetime.fromtimestamp(int(committed), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _git_revision(root: Path) -> str:
    return git(root, "rev-parse", "HEAD") or ""


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
