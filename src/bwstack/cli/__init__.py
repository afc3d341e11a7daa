"""The ``bwstack`` command line: option parsing and output only; every decision lives in a room module.

Command groups live in modules of their own (``run.py``: up, down, fetch, calibrate; ``image.py``: build,
lock, standin; ``sweep.py``: sweep, demo; ``bisect.py``, ``upgrade.py``, ``report.py``), registered here.
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

from bwstack.cli import image, run, sweep
from bwstack.cli.bisect import bisect as bisect_command
from bwstack.cli.compare import compare as compare_command
from bwstack.cli.options import DEFAULT_PROFILES, ImageRef, file_option
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
@click.option(
    "--retrieval", is_flag=True, help="Needle retrieval by length and the comparison (newest real sweep)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(
    file: Path, arch: str | None, show_rules: bool, wide: bool, phases: bool, retrieval: bool, as_json: bool
) -> None:
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
        listing.print_list(stack, arch=arch, wide=wide, phases=phases, retrieval=retrieval)


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
    from bwstack.know import inventory

    sys.exit(
        audit_mod.run_audit(
            image=image,
            site=site,
            wheel=wheel,
            arch=arch,
            as_json=as_json,
            echo=click.echo,
            reader=inventory.checked_reader(reader),
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


for _command in (
    run.up,
    run.down,
    run.fetch,
    run.calibrate,
    image.build,
    image.lock,
    image.standin,
    sweep.sweep,
    sweep.demo,
    bisect_command,
    compare_command,
    upgrade_command,
    variant_command,
):
    main.add_command(_command)
