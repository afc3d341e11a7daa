"""``bwstack up`` and ``down``: run the stack on this host.

``up`` starts one profile's service through Compose, stops any other profile's container first (one backend at
a time on the same GPUs and port), and waits for the container's health with live progress; when it fails it
prints the healthcheck's one-line reason and the server log's classified root cause. ``up --soak S`` then
keeps the sweep's soak (:mod:`bwstack.sweep.soak`, ``stack.soak`` settings) on the healthy service for S
seconds and prints its figures and verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import time
from typing import Any

from bwstack import classify
from bwstack.errors import ExternalError, UserError
from bwstack.host import modelcache, secretfiles, startlog, tinyimage
from bwstack.host.dockercompose import Project
from bwstack.host.doctor import image
from bwstack.host.stackproject import (
    container_id,
    default_wait_seconds,
    health_reason,
    inspect,
    project_for,
    stop_other_profiles,
)
from bwstack.know import next_try
from bwstack.render import compose
from bwstack.stack.baselines import describe
from bwstack.stack.schema import Stack
from bwstack.sweep import soak
from bwstack.tiny import ensure
from healthchecks import imagelayout, norestart

POLL_SECONDS = 2.0

#: seconds between two progress lines of ``up --soak``
SOAK_PROGRESS_S = 15.0

#: ``up --soak``: the exit status when the soak's verdict is not ``ok`` (hang, nan, garbage, failed requests
#: past the threshold by their class, or no result), the same as a start that does not get healthy
EXIT_SOAK_FAILED = 1


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
    """Refuse to start from a rendered compose file that is not a fresh render of its profiles file (the
    files named as they are: profiles.cpu.yaml renders compose.cpu.yaml)."""
    compose_file = stack.compose_file
    render = (
        f"bwstack render -f {stack.path.name}" if stack.path.name != "profiles.yaml" else "bwstack render"
    )
    if not compose_file.exists():
        raise UserError(f"{compose_file.name} missing; run '{render}'", file=compose_file)
    if compose_file.read_text(encoding="utf-8") != compose.render_compose(stack):
        raise UserError(
            f"{compose_file.name} is not a fresh render of {stack.path.name}; run '{render}'",
            file=compose_file,
        )


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
        project = project_for(stack, env=modelcache.service_env(stack, skip=skip_model_check))

        print(f"bwstack: {describe(stack)}", file=echo)  # which quality checks the healthcheck runs
    if stack.tiny_models:
        say = lambda m: print(f"bwstack: {m}", file=echo)  # noqa: E731
        ensure.ensure_for_stack(stack, echo=say, copy_writer=tinyimage.for_stack(stack))
    for note in secretfiles.ensure_secrets(stack):
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
