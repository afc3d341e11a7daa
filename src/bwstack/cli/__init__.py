"""The ``bwstack`` command line: option parsing and output only; every decision lives in a room module.

Room modules are imported inside each command so that ``bwstack --help`` and the light commands start fast.
Bad input raises :class:`bwstack.errors.UserError`, printed here as one line with exit status 2.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from bwstack.cli.bisect import bisect as bisect_command
from bwstack.cli.options import (
    DEFAULT_PROFILES,
    MAX_SOAK_S,
    ImageRef,
    SoakSeconds,
    file_option,
    keep_option,
    standin_load_option,
)
from bwstack.cli.report import bundle_cmd, merge_cmd, verify_cmd
from bwstack.cli.upgrade import upgrade as upgrade_command
from bwstack.cli.upgrade import variant as variant_command
from bwstack.errors import EXIT_USAGE, ExternalError, UserError

CPU_PROFILES = "profiles.cpu.yaml"


def _err(message: str, *, redacted: bool = False) -> None:
    """One line to stderr; control characters (from a hostile file's keys or values) printed escaped, and
    no secret (a token in a URL, a header, a file's value) in any form (``redacted``: already done)."""
    from bwstack.textlayout import printable
    from healthchecks import secretscan

    click.echo(f"bwstack: {printable(message if redacted else secretscan.redact(message))}", err=True)


def _user_error_line(exc: UserError) -> str:
    """A UserError's line with its message and field redacted each on its own, so that a field named like a
    secret (``stack.api_key``) never makes the message's first word look like its value."""
    from healthchecks import secretscan

    exc.message = secretscan.redact(exc.message)
    exc.field = secretscan.redact(exc.field) if exc.field else exc.field
    exc.file = secretscan.redact(exc.file) if exc.file else exc.file
    return exc.render()


class _Group(click.Group):
    """A click group that turns UserError into one line + exit 2, and ExternalError into one line + exit 1.

    Click's own usage errors (unknown option, bad choice, missing argument) are printed as one line too.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(EXIT_USAGE)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "bwstack"
            _err(f"{command}: {' '.join(exc.format_message().split())} (see '{command} --help')")
            sys.exit(EXIT_USAGE)
        except click.exceptions.Abort:
            _err("aborted")
            sys.exit(130)
        except click.ClickException as exc:
            _err(" ".join(exc.format_message().split()))
            sys.exit(exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            _err(_user_error_line(exc), redacted=True)
            sys.exit(EXIT_USAGE)
        except ExternalError as exc:
            _err(" ".join(str(exc).split()))
            if exc.abandons_threads:  # a library's worker threads would keep the interpreter from exiting
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
            sys.exit(1)
        except KeyboardInterrupt:
            _err("interrupted")
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bwstack")
@click.option(
    "-f",
    "--file",
    "stack_file",
    default=None,
    type=click.Path(path_type=Path),
    help=f"The profiles file for every command (default {DEFAULT_PROFILES}; e.g. profiles.cpu.yaml).",
)
def main(stack_file: Path | None) -> None:
    """Reproducible SGLang serving on NVIDIA Blackwell (SM120 / SM100).

    Profiles (backend combinations) live in profiles.yaml; image pins in images/<variant>/.
    """


# --- profiles: validate / render / list ---------------------------------------------------------------


@main.command()
@file_option
@click.option("--arch", default=None, help="Also predict each verdict on this GPU arch (sm120, sm100, sm90).")
def validate(file: Path, arch: str | None) -> None:
    """Check profiles.yaml and the image variants it uses; exit 2 with file:line on any error."""
    from bwstack.know import rules
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    for warning in rules.check_stack(stack):
        _err(f"warning: {warning}")
    from bwstack.know import evidence

    for found in evidence.contradictions(stack):
        _err(f"warning: {found.warning()}")
        for line in found.change():
            click.echo(f"  {line}", err=True)
    click.echo(
        f"{file}: ok: {len(stack.profiles)} profiles, variants: {', '.join(sorted(stack.variants_used()))}"
    )
    if arch is not None:
        from bwstack.ops import listing

        listing.print_list(stack, arch=arch)


@main.command()
@file_option
@click.option(
    "--check", is_flag=True, help="Exit 1 with a diff when the committed output differs from a fresh render."
)
@click.option(
    "--target",
    type=click.Choice(["compose", "k8s"]),
    default="compose",
    show_default=True,
    help="compose: compose.yaml next to the profiles file; k8s: LeaderWorkerSet manifests.",
)
@click.option(
    "--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="Hosts per model replica."
)
@click.option(
    "--profile", "profiles", multiple=True, help="Only these profiles (k8s or --nodes > 1); default all."
)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output folder or file.")
@click.option(
    "--lws-version",
    default=None,
    help="k8s: the LeaderWorkerSet release installed; refused when older than the manifests need.",
)
@click.option(
    "--fit",
    default=None,
    metavar="NODESxGPUS",
    help="k8s: simulate the scheduler on NODES nodes of GPUS GPUs each; exit 1 if a group packs or cannot "
    "be placed.",
)
def render(
    file: Path,
    check: bool,
    target: str,
    nodes: int,
    profiles: Sequence[str],
    out: Path | None,
    lws_version: str | None,
    fit: str | None,
) -> None:
    """Render compose.yaml (or Kubernetes manifests) from profiles.yaml and templates/.

    With the default stack file, the CPU stack beside it (profiles.cpu.yaml -> compose.cpu.yaml) is rendered
    and checked too.
    """
    from bwstack.render import compose as render_mod
    from bwstack.render import k8s, k8sfit, lwsversions, multihost
    from bwstack.stack import loader

    if target != "k8s" and (lws_version is not None or fit is not None):
        raise UserError("--lws-version and --fit apply to --target k8s only", field="--target")
    cluster = k8sfit.parse_cluster(fit) if fit is not None else None

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    for name in profiles:
        stack.profile(name)  # UserError for an unknown name, before any target's own checks
    if target == "k8s":
        outputs = k8s.render_k8s(stack, nodes=nodes, profiles=profiles, out=out, lws_version=lws_version)
        needed = lwsversions.newest([k8s.requirement_of(o.text) for o in outputs])
        if needed is not None:
            click.echo(f"manifests for {needed.line()}")
        if cluster is not None:
            verdicts = [(o.path.stem, k8s.fit(o.text, cluster)) for o in outputs]
            for name, verdict in verdicts:
                click.echo(f"{name}: {verdict.status} on {cluster}: {verdict.detail}")
            if not all(verdict.ok for _, verdict in verdicts):
                _err(f"a group would not run as swept on {cluster}; nothing written")
                sys.exit(1)
    elif nodes > 1:
        outputs = multihost.render_multihost(stack, nodes=nodes, profiles=profiles, out=out)
    else:
        outputs = render_mod.render_outputs(stack, profiles=profiles, out=out)
    cpu_file = file.parent / CPU_PROFILES
    if (
        file.name == DEFAULT_PROFILES
        and cpu_file.is_file()
        and target == "compose"
        and nodes == 1
        and not out
    ):
        cpu_stack = loader.load_stack(cpu_file)
        outputs += [o for o in render_mod.render_outputs(cpu_stack) if o.path.name.startswith("compose")]
    if check:
        drift = render_mod.check_outputs(outputs)
        if drift:
            click.echo(drift, nl=False)
            _err(
                "rendered output differs from the committed files; run 'bwstack render' and commit the result"
            )
            sys.exit(1)
        click.echo(f"ok: {len(outputs)} file(s) match a fresh render")
        return
    for path in render_mod.write_outputs(outputs):
        click.echo(f"wrote {path}")


@main.command("list")
@file_option
@click.option(
    "--arch", default=None, help="Predict a verdict per profile on this GPU arch (sm120, sm100, sm90)."
)
@click.option("--rules", "show_rules", is_flag=True, help="List the known-bad rules (with evidence) instead.")
@click.option("--wide", is_flag=True, help="Details per profile: variant, backends, prediction, evidence.")
@click.option("--phases", is_flag=True, help="Seconds per start-up phase (newest real sweep).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(file: Path, arch: str | None, show_rules: bool, wide: bool, phases: bool, as_json: bool) -> None:
    """List profiles grouped like NIM's list-model-profiles: expected to work / known to fail.

    One line per profile with its whole name, verdict and a short reason, at any terminal width.
    """
    from bwstack.ops import listing
    from bwstack.stack import loader

    if show_rules:
        from bwstack.know import rules

        click.echo(json.dumps(rules.rules_data(), indent=2) if as_json else rules.render_rules_text())
        return
    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    if as_json:
        click.echo(json.dumps(listing.list_data(stack, arch=arch), indent=2))
    else:
        listing.print_list(stack, arch=arch, wide=wide, phases=phases)


@main.command()
@file_option
@click.argument("profile")
@click.option("--url", default=None, help="The running known-good server (default http://127.0.0.1:<port>).")
@click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Nats/token below the baseline that read as garbage (default 1.0).",
)
def calibrate(file: Path, profile: str, url: str | None, margin: float | None) -> None:
    """Record the quality probe's baseline (passage score) of a running known-good server for the model."""
    from bwstack.host import calibrate as calib
    from bwstack.stack import loader
    from healthchecks import judging

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    baseline, path = calib.calibrate(
        stack, profile, url=url, margin=judging.DEFAULT_MARGIN if margin is None else margin
    )
    click.echo(
        f"{path}: {stack.model_path_for(profile)} passage {baseline.passage}: {baseline.score:.4f} "
        "nats/token over "
        f"{baseline.tokens} tokens (SGLang {baseline.sglang or '?'}, profile {profile}); healthchecks report "
        f"garbage below {baseline.score - baseline.margin:.4f}. Run 'bwstack render' and commit both files."
    )


# --- running: up / down / build / lock ------------------------------------------------------------------


@main.command()
@file_option
@click.argument("profile", required=False)
@click.option("--force", is_flag=True, help="Start a profile that is known to fail.")
@click.option(
    "--retry",
    is_flag=True,
    help="Load the model again although this launch spec already failed in a way a restart cannot heal.",
)
@click.option("--timeout", type=click.IntRange(min=1), default=None, help="Seconds to wait for healthy.")
@click.option("--no-wait", is_flag=True, help="Return once the container is started.")
@click.option("--dry-run", is_flag=True, help="Print the profile that would start and why; start nothing.")
@click.option(
    "--skip-model-check",
    is_flag=True,
    help="Start even when 'bwstack fetch' has not verified the model (SGLang then downloads it).",
)
@click.option(
    "--soak",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Once healthy, keep the sweep's soak (stack.soak settings) on the service for SECONDS; "
    "exit 1 unless its verdict is ok.",
)
def up(
    file: Path,
    profile: str | None,
    force: bool,
    retry: bool,
    timeout: int | None,
    no_wait: bool,
    dry_run: bool,
    skip_model_check: bool,
    soak: float | None,
) -> None:
    """Start one profile's service and wait until it is healthy (or print why it is not).

    Without PROFILE (and without BWSTACK_PROFILE), pick one for this host: its GPUs' arch and count, the
    profiles expected and predicted healthy there, the fastest measured, else the first in profiles.yaml.
    Refuses (exit 1) while the model is not fetched: run 'bwstack fetch' first.

    With --soak SECONDS, the healthy service then carries the sweep's soak: stack.soak.concurrency streamed
    requests from inside the container against 127.0.0.1, every logprob checked, a request with no token for
    stack.soak.stall_after_s ending it as hang, more than 2% failed requests named by their class; a progress
    line every 15 s, then the figures (requests, tokens, ITL p50/p99, stalls, worst window) and 'soak verdict:
    ...'. Exit 0 when the verdict is ok, 1 on hang, nan, garbage, failed requests or no result (the service is
    left as it is), 2 on bad input.
    """
    from bwstack.ops import choose, updown
    from bwstack.stack import loader

    if soak is not None:
        _check_soak(soak, dry_run=dry_run, no_wait=no_wait)
    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    if profile is None:
        from bwstack.host.doctor.probe import default_probe

        choice = choose.choose(stack, default_probe(), pinned=choose.pinned_profile())
        if dry_run or choice.profile is None:
            from bwstack import textlayout

            for line in choice.lines(textlayout.terminal_width()):
                click.echo(line)
            if choice.profile is not None:
                from bwstack.know.evidence import dry_run_line

                for line in textlayout.wrap(dry_run_line(stack, choice.profile), textlayout.terminal_width()):
                    click.echo(line)
        if choice.profile is None:
            sys.exit(1)
        if dry_run:
            return
        click.echo(f"bwstack: starting {choice.profile}: {choice.why}")
        profile = choice.profile
    elif dry_run:
        stack.profile(profile)
        click.echo(f"choice: {profile}: named on the command line")
        from bwstack import textlayout
        from bwstack.know.evidence import dry_run_line

        for line in textlayout.wrap(dry_run_line(stack, profile), textlayout.terminal_width()):
            click.echo(line)
        return
    sys.exit(
        updown.up(
            stack,
            profile,
            force=force,
            timeout=timeout,
            wait=not no_wait,
            skip_model_check=skip_model_check,
            soak_s=soak or 0.0,
            retry=retry,
        )
    )


def _check_soak(seconds: float, *, dry_run: bool, no_wait: bool) -> None:
    """``up --soak``: a positive, finite number of seconds on a start that waits for health."""
    import math

    if dry_run:
        raise UserError("up: --soak runs load against the started service; --dry-run starts nothing")
    if no_wait:
        raise UserError("up: --soak needs a healthy service; --no-wait does not wait for one")
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_SOAK_S:
        raise UserError(f"up: --soak wants seconds, more than 0 and at most {MAX_SOAK_S}, got {seconds:g}")


@main.command()
@file_option
@click.argument("profile", required=False)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Host folder of the cache (the services' HF_HOME); default stack.model_cache_path or the volume.",
)
@click.option(
    "--max-workers", type=click.IntRange(1, 64), default=8, show_default=True, help="Files in parallel."
)
def fetch(file: Path, profile: str | None, cache_dir: Path | None, max_workers: int) -> None:
    """Download the model at its pinned revision into the services' cache, verify it, record a manifest.

    Resumable: run it again after an interruption. Exit 0 when the cache holds the model complete, 1 when
    the download or the verification failed (what is left is printed), 2 on bad input.
    """
    from bwstack.host import fetch as fetch_mod
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    if profile is not None:
        stack.profile(profile)  # every profile serves model.path; the name is checked, not needed
    if stack.tiny_models:  # a CPU stack: its checkpoints are made here, not downloaded
        from bwstack.build.lock import wheelhouse
        from bwstack.tiny import ensure

        python = wheelhouse.host_python(stack.variant(stack.settings.variant), click.echo)
        made = ensure.ensure_for_stack(stack, echo=click.echo, copy_python=python)
        click.echo(f"ok: {len(made)} tiny model(s) in {made[0].parent}")
        return
    sys.exit(fetch_mod.fetch(stack, cache_dir=cache_dir, max_workers=max_workers, echo=click.echo))


@main.command()
@file_option
@click.option("--volumes", "-v", is_flag=True, help="Also remove volumes (model cache!).")
def down(file: Path, volumes: bool) -> None:
    """Stop and remove every bwstack service of this project."""
    from bwstack.ops import updown
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    sys.exit(updown.down(stack, volumes=volumes))


@main.command()
@file_option
@click.option("--variant", required=True, help="Image variant (a folder under images/).")
@click.option("--tag", default=None, help="Image tag; default <image_repo>:<variant>.")
@click.option(
    "--base-image", default=None, help="Build on this base instead of the pinned one (testing only)."
)
@click.option("--dry-run", is_flag=True, help="Print the docker build argv and exit.")
def build(file: Path, variant: str, tag: str | None, base_image: str | None, dry_run: bool) -> None:
    """Build the serving image of one variant, passing every pin as a build arg."""
    from bwstack.build import dockerbuild
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    sys.exit(dockerbuild.build(stack, variant, tag=tag, base_image=base_image, dry_run=dry_run))


@main.command()
@file_option
@click.option("--variant", "variants", multiple=True, help="Variant(s) to lock; default all.")
@click.option(
    "--digest/--no-digest", default=True, help="Resolve the base image digest (needs registry access)."
)
@click.option(
    "--python/--no-python", "python_", default=True, help="Hash the Python overrides into overrides.lock."
)
@click.option(
    "--args", "args_", is_flag=True, help="Regenerate sglang-args.json from the pinned SGLang's parser."
)
@click.option(
    "--kernel-facts",
    is_flag=True,
    help="Regenerate kernel-archs.json from the pinned wheels (downloads ~1 GB); with --check only compare.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Check that every pin still resolves (base digest, locked wheels, git sources, model revision): one "
    "line per pin, exit 1 when one moved, vanished or could not be checked. With --kernel-facts: compare.",
)
@click.option(
    "--index-url", default=None, metavar="URL", help="With --check: the package index (default PyPI)."
)
@click.option("--json", "as_json", is_flag=True, help="With --check: machine-readable output.")
@click.option(
    "--inspect", "inspect_variant", metavar="VARIANT", help="Pull the base, judge the first-contact read."
)
@click.option(
    "--image", type=ImageRef(), default=None, help="With --inspect: a local image instead of the pulled base."
)
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --inspect: JSON record.",
)
def lock(
    file: Path,
    variants: Sequence[str],
    digest: bool,
    python_: bool,
    args_: bool,
    kernel_facts: bool,
    check: bool,
    index_url: str | None,
    as_json: bool,
    inspect_variant: str | None,
    image: str | None,
    out: Path | None,
) -> None:
    """Fill what pins.toml cannot hold by hand: digest, override hashes, parser snapshot, kernel facts."""
    from bwstack.build.lock import command as locking
    from bwstack.stack import pins

    root = file.parent
    if inspect_variant is not None:
        from bwstack.build.lock.inspect import inspect as inspect_base

        sys.exit(inspect_base(root, inspect_variant, image=image, out=out, echo=click.echo))
    if kernel_facts:
        from bwstack.build.lock import kernel_facts as facts_mod

        names = list(variants) or [v for v in pins.list_variants(root / "images") if v.startswith("v")]
        sys.exit(facts_mod.run_kernel_facts(root / "images", names, check=check, echo=click.echo))
    if check:
        sys.exit(_lock_check(file, list(variants), index_url, as_json))
    sys.exit(
        locking.lock(
            root, variants=list(variants), digest=digest, python=python_, args=args_, echo=click.echo
        )
    )


def _lock_check(file: Path, variants: list[str], index_url: str | None, as_json: bool) -> int:
    from bwstack.build.lock import check as pin_check
    from bwstack.stack import loader, pins

    images = file.parent / "images"
    names = variants or pins.list_variants(images)
    model = None
    if file.is_file():
        stack = loader.load_stack(file)
        if stack.model.revision:
            model = (stack.model.path, stack.model.revision)
    found = pin_check.check(
        images,
        names,
        sources=pin_check.Sources(index_url),
        model=model,
        echo=None if as_json else click.echo,
    )
    if as_json:
        click.echo(json.dumps(pin_check.to_json(found), indent=2))
    else:
        click.echo(pin_check.summary(found))
    return pin_check.exit_status(found)


# --- knowledge before launch ----------------------------------------------------------------------------


@main.command()
@file_option
@click.argument("profile")
@click.option("--arch", default="sm120", show_default=True, help="Target GPU arch: sm120, sm100, sm90.")
@click.option("--variant", default=None, help="Image variant; default the profile's.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain(file: Path, profile: str, arch: str, variant: str | None, as_json: bool) -> None:
    """Show the backends the pinned SGLang will really pick for a profile on a GPU arch."""
    from bwstack.know import explain as explain_mod
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    result = explain_mod.explain(stack, profile, arch=arch, variant=variant)
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else result.render_text())


@main.command()
@click.option(
    "--image", type=ImageRef(), default=None, help="A local Docker image to inspect (never pulled)."
)
@click.option("--path", "site", default=None, type=click.Path(path_type=Path), help="A site-packages folder.")
@click.option("--wheel", default=None, type=click.Path(path_type=Path), help="A wheel file.")
@click.option("--arch", default="sm_120", show_default=True, help="Target GPU (sm_120, sm_100, sm_90).")
@click.option(
    "--reader",
    type=click.Choice(["auto", "python", "cuobjdump"]),
    default="auto",
    show_default=True,
    help="auto: cuobjdump when found, else the built-in ELF/fatbin reader.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def audit(
    *, image: str | None, site: Path | None, wheel: Path | None, arch: str, reader: str, as_json: bool
) -> None:
    """List the SASS/PTX archs in each CUDA library and the backends without a kernel for the target.

    Exit status: 0 when every installed backend has a kernel for the target (native, PTX or JIT sources),
    1 when at least one has none, 2 for bad input.
    """
    from bwstack.know import audit as audit_mod

    sys.exit(
        audit_mod.run_audit(
            image=image,
            site=site,
            wheel=wheel,
            arch=arch,
            as_json=as_json,
            echo=click.echo,
            reader=audit_mod.checked_reader(reader),
        )
    )


@main.command("classify-log")
@file_option
@click.argument("logfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {class, line, text, also, startup, structure}.")
@click.option(
    "--expect",
    "expects",
    multiple=True,
    metavar="KEY=VALUE",
    help="A backend the server was asked for (attention_backend=triton); mismatches are reported.",
)
@click.option("--profile", default=None, help="Compare with what this profile of the stack file asks for.")
def classify_log(
    file: Path, logfile: Path, as_json: bool, expects: Sequence[str], profile: str | None
) -> None:
    """Classify an SGLang server log with the healthcheck's failure catalog.

    Then the backends its startup logged: the SGLang version, each effective backend with its log line and
    whether a flag or SGLang itself set it, and every ``backend_override`` against --expect / --profile (or,
    without them, against the command line in the log).
    """
    from bwstack import classify
    from bwstack.textlayout import printable
    from healthchecks import secretscan

    result = classify.classify_log_file(logfile)
    expect = classify.parse_expect(list(expects))
    by = "--expect"
    if profile is not None:
        expect = {**classify.profile_request(file, profile), **expect}
        by = f"profile {profile}"
    result["startup"] = classify.backends_of_log_file(logfile, expect or None, by)
    result["structure"] = classify.structure_of_log_file(logfile)
    result = secretscan.redact_data(result)  # the failing line may carry a token: never printed
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(printable(result["class"]))
    for line in [*classify.structure_lines(result["structure"]), *_startup_lines(result["startup"])]:
        click.echo(printable(line))


def _startup_lines(found: dict[str, Any]) -> list[str]:
    """classify-log's text lines about the backends (none when the log has no startup)."""
    lines = []
    if found["version"]:
        lines.append(f"sglang {found['version']} (line {found['version_line']})")
    elif found["version_hint"]:
        lines.append(f"sglang version not logged; {found['version_hint']}")
    origin_words = {
        "flag": "flag",
        "sglang": "set by SGLang",
        "default": "default",
        "unknown": "origin unknown",
    }
    for name, stated in found["effective"].items():
        logged = f", logged as {stated['logged']}" if stated.get("logged") else ""
        where = f"line {stated['line']}"
        if stated.get("warning_line"):
            where = f"line {stated['warning_line']}, {stated['source']} line {stated['line']}"
        lines.append(f"{name}: {stated['value']} ({origin_words[stated['origin']]}{logged}, {where})")
    for evidence in found["overrides"]:
        lines.append(f"backend_override: {evidence['message']}")
    return lines


@main.command("tiny-model")
@click.argument("target", type=click.Path(file_okay=False, path_type=Path))
@click.option("--arch", default="llama", show_default=True, help="llama or qwen2.")
@click.option(
    "--fault",
    default="none",
    show_default=True,
    help="Weights, not code: none, nan-lm-head, nan-norm, noise (finite garbage).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Seed of the random weights.",
)
def tiny_model(target: Path, arch: str, fault: str, seed: int) -> None:
    """Write a tiny random model (config, safetensors, a local tokenizer) for real SGLang on the CPU."""
    from bwstack.tiny import tinymodel

    path = tinymodel.write(target, tinymodel.TinySpec(arch=arch, fault=fault, seed=seed))
    click.echo(f"wrote {path} ({arch}, fault {fault})")


# --- sweep / demo / doctor ------------------------------------------------------------------------------


@main.command()
@file_option
@click.argument("profiles", nargs=-1)
@click.option(
    "--variant", default=None, help="Run every profile on this image variant (one variant's matrix)."
)
@click.option(
    "--fast", is_flag=True, help="Dummy weights and fewer layers: minutes per profile, not a full load."
)
@click.option(
    "--standin", is_flag=True, help="Run on the CPU stand-in server, each profile with its expected fault."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder (default reports/<UTC timestamp>/ next to the profiles file).",
)
@click.option("--resume", is_flag=True, help="Continue the report in --out; skip profiles already decided.")
@click.option(
    "--timeout", type=click.IntRange(min=1), default=None, help="Seconds per profile before 'timeout'."
)
@keep_option
@standin_load_option
@click.option("--tag", "tags", multiple=True, help="Only the profiles carrying this tag (repeatable).")
@click.option("--bench", is_flag=True, help="Measure each healthy profile's speed (stack.bench settings).")
@click.option(
    "--soak",
    type=SoakSeconds(),
    default=0.0,
    help="Seconds of sustained load with a stall watchdog on each healthy profile (stack.soak settings).",
)
def sweep(
    file: Path,
    profiles: Sequence[str],
    variant: str | None,
    fast: bool,
    standin: bool,
    out: Path | None,
    resume: bool,
    timeout: int | None,
    keep: bool,
    standin_load_seconds: float | None,
    tags: Sequence[str],
    bench: bool,
    soak: float,
) -> None:
    """Try every profile, stop each as soon as the verdict is decisive, and write a compatibility matrix.

    Exit status 0 when every verdict matches the profile's expect, 1 otherwise, 2 on bad input.
    """
    from bwstack.stack import loader
    from bwstack.sweep.run import run_sweep

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    sys.exit(
        run_sweep(stack, [*profiles, *stack.tagged(tags)], variant=variant, fast=fast,
                            standin=standin, out=out, resume=resume, timeout=timeout, keep=keep,
                            standin_load_seconds=standin_load_seconds, bench=bench, soak=soak)
    )  # fmt: skip


@main.command()
@file_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Report folder.")
@keep_option
@standin_load_option
def demo(file: Path, out: Path | None, keep: bool, standin_load_seconds: float | None) -> None:
    """The stand-in sweep over every profile: the whole pipeline on a machine without a GPU."""
    from bwstack.stack import loader
    from bwstack.sweep.demo import run_demo

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    sys.exit(run_demo(stack, out=out, keep=keep, standin_load_seconds=standin_load_seconds))


@main.command()
@file_option
@click.option("--variant", default=None, help="Check the host against this variant; default the stack's.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--image", "image_variant", metavar="VARIANT", help="Instead: the built image's self-check.")
def doctor(file: Path, variant: str | None, as_json: bool, image_variant: str | None) -> None:
    """Host preflight: driver, GPUs, container runtime, Compose, shm, memlock, disk."""
    from bwstack.host.doctor import command as doctor_mod

    sys.exit(
        doctor_mod.run_doctor(file, variant=variant, as_json=as_json, echo=click.echo, image=image_variant)
    )


@main.group("report")
def report_group() -> None:
    """Work with sweep reports (results.json)."""


@report_group.command("diff")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def report_diff(old: Path, new: Path, as_json: bool) -> None:
    """List the profiles whose verdict changed between two sweeps (results.json or their folders).

    Exit status 1 when a profile regressed (healthy -> failing, or a failure class of a worse tier), 0
    otherwise, 2 for unreadable input. A CI gate on a new image is one command.
    """
    from bwstack import textlayout
    from bwstack.sweep import reportdiff

    result = reportdiff.diff(reportdiff.load(old), reportdiff.load(new))
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        for line in reportdiff.render_text(result, textlayout.terminal_width()):
            click.echo(line)
    sys.exit(1 if result["regressions"] else 0)


for _command in (bundle_cmd, verify_cmd, merge_cmd):
    report_group.add_command(_command)


@main.group()
def standin() -> None:
    """The CPU stand-in for the SGLang server (tests and the demo)."""


@standin.command("build")
@file_option
@click.option("--variant", default=None, help="Variant whose serving image is rebuilt on the stand-in base.")
def standin_build(file: Path, variant: str | None) -> None:
    """Build the stand-in base image and the project's Dockerfile on top of it."""
    from bwstack.build import standin_image
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    click.echo(standin_image.ensure_standin_image(stack, variant=variant, echo=click.echo))


main.add_command(bisect_command)
main.add_command(upgrade_command)
main.add_command(variant_command)
