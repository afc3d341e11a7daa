"""Loading profiles.yaml: YAML with line numbers, the schema, then every profile checked against the
parser snapshot of the variant it runs on, so a value the pinned SGLang would reject is refused with the
valid ones for that version. Every error names ``file:line``, the field and what is valid (exit status 2).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bwstack.errors import UserError
from bwstack.stack import pins, snapshots
from bwstack.stack.schema import Profile, Stack, StackFile
from bwstack.stack.validation import from_validation, kind
from bwstack.stack.yamlload import Lines, load_yaml


def parse_stack_file(path: Path) -> tuple[StackFile, Lines]:
    """First pass only: shape and types of profiles.yaml, without the variants' parser snapshots."""
    data, lines = load_yaml(path)
    if data is None:
        raise UserError(
            "empty file: expected a mapping with version, stack, model and profiles", file=path, line=1
        )
    if not isinstance(data, dict):
        raise UserError(
            f"top level must be a mapping (version, stack, model, profiles), got {kind(data)}",
            file=path,
            line=1,
        )
    try:
        return StackFile.model_validate(data), lines
    except ValidationError as exc:
        raise from_validation(exc, path, lines, data, StackFile) from None


def load_stack(path: Path) -> Stack:
    """Load profiles.yaml and everything it refers to; UserError (exit 2) on any problem."""
    parsed, lines = parse_stack_file(path)
    stack = Stack(
        path=path,
        root=path.resolve().parent,
        settings=parsed.stack,
        model=parsed.model,
        profiles=dict(parsed.profiles),
        tiny_models=dict(parsed.tiny_models),
        variants={},
        snapshots={},
        lines=lines,
    )
    _check_variants(stack)
    _check_model(stack)
    _check_port(stack)
    for name, profile in stack.profiles.items():
        _check_profile(stack, name, profile)
    return stack


def emit_warnings(stack: Stack, stream: Any = None) -> None:
    """Print the stack's warnings (unlocked variants, proxy snapshots, deprecated flags) to stderr."""
    out = stream if stream is not None else sys.stderr
    for warning in dict.fromkeys(stack.warnings):
        print(f"bwstack: warning: {warning}", file=out)


# --- second pass: against variants and parser snapshots ----------------------------------------------------


def _check_variants(stack: Stack) -> None:
    for name in sorted(stack.variants_used()):
        try:
            variant = pins.load_variant(stack.images_dir, name)
        except UserError as exc:
            if exc.file is not None and Path(exc.file).is_file():
                raise  # an error inside the variant's own files: their line (or none), never one of this file
            where = _variant_ref_line(stack, name)
            field = "stack.variant" if stack.settings.variant == name else exc.field
            raise UserError(exc.message, file=stack.path, line=where, field=field) from None
        stack.variants[name] = variant
        stack.snapshots[name] = snapshots.load_snapshot(variant.cli_snapshot_path)
        snapshot = stack.snapshots[name]
        if variant.is_cpu and stack.settings.device != "cpu":
            raise UserError(
                f'variant {name} is a CPU image (device = "cpu" in its pins.toml): set stack.device: cpu',
                file=stack.path,
                line=_variant_ref_line(stack, name),
                field="stack.device",
            )
        if not variant.locked and variant.base_pulled:
            stack.warnings.append(
                f"variant {name} is not locked: its base image {variant.base_image} has no digest, so builds "
                "are not reproducible; run 'bwstack lock' on a machine with registry access"
            )
        if snapshot.is_proxy:
            stack.warnings.append(
                f"variant {name}: the parser snapshot is a proxy "
                f"({snapshot.provenance.get('source', '?')}), "
                f"not the image's own parser; regenerate it with 'bwstack lock --args --variant {name}' "
                "where the image can be pulled"
            )
        _check_transformers_reason(variant, snapshot)


def _check_transformers_reason(variant: pins.Variant, snapshot: snapshots.Snapshot) -> None:
    """A [python] pin that differs from what the pinned SGLang itself requires needs a written reason."""
    required = {pins.normalize_package(k): v for k, v in snapshot.requires_dist.items()}
    for pkg, version in variant.python.items():
        spec = required.get(pins.normalize_package(pkg))
        if spec is None or not spec.startswith("==") or snapshot.is_proxy:
            continue
        wanted = spec[2:].split(";")[0].strip()
        if wanted != version and pkg not in variant.python_reasons:
            raise UserError(
                f"{pkg} is pinned to {version} but {snapshot.label} requires {pkg}{spec}; add a written "
                f"reason under [python.reasons] or pin {wanted}",
                file=variant.pins_path,
                field=f"python.{pkg}",
            )


def _variant_ref_line(stack: Stack, name: str) -> int | None:
    if stack.settings.variant == name:
        return stack.line_of("stack", "variant")
    for pname, profile in stack.profiles.items():
        if profile.variant == name:
            return stack.line_of("profiles", pname, "variant")
    return None


#: Linux's default ``net.ipv4.ip_local_port_range``: the ports the kernel hands out for port 0. SGLang takes
#: its distributed-init port that way before its HTTP server binds (``get_free_port`` in its engine), so a
#: serving port in this range can be taken from under it ("address already in use" at start).
EPHEMERAL_PORTS = range(32768, 61000)


def _check_port(stack: Stack) -> None:
    port = stack.settings.port
    if port not in EPHEMERAL_PORTS:
        return
    default = type(stack.settings).model_fields["port"].default
    where = stack.line_of("stack", "port") or stack.line_of("stack")
    stack.warnings.append(
        f"{stack.path}:{where}: stack.port {port} is in Linux's ephemeral range ({EPHEMERAL_PORTS.start}-"
        f"{EPHEMERAL_PORTS.stop - 1}), where SGLang picks its own internal ports before its HTTP server"
        f" binds: a start can fail with 'address already in use'; pick a port below {EPHEMERAL_PORTS.start}"
        f" (the default is {default})"
    )


def _check_model(stack: Stack) -> None:
    model = stack.model
    if model.revision is None and stack.model_unpinnable is None:
        stack.warnings.append(
            f"{stack.path}:{stack.line_of('model', 'path')}: model.revision is not set: {model.path} is not "
            "pinned to a commit, so two hosts can serve different weights under one profile; set "
            "model.revision to a commit of the model repo"
        )
    for vname in sorted(stack.variants_used()):
        snapshot = stack.snapshots[vname]
        if model.revision is not None and snapshot.flag(snapshots.MODEL_FLAGS["revision"]) is None:
            raise UserError(
                f"{snapshot.label} has no {snapshots.MODEL_FLAGS['revision']} flag",
                file=stack.path,
                line=stack.line_of("model", "revision"),
                field="model.revision",
            )
        values = {
            "quantization": model.quantization,
            "reasoning_parser": model.reasoning_parser,
            "tool_call_parser": model.tool_call_parser,
        }
        for key, value in values.items():
            if value is None:
                continue
            flag = snapshot.flag(snapshots.MODEL_FLAGS[key])
            if flag is None:
                raise UserError(
                    f"{snapshot.label} has no {snapshots.MODEL_FLAGS[key]} flag",
                    file=stack.path,
                    line=stack.line_of("model", key),
                    field=f"model.{key}",
                )
            if flag.choices is not None and value not in flag.choices:
                raise UserError(
                    f"unknown {key} {value!r} (valid for {snapshot.label}: {', '.join(flag.choices)})",
                    file=stack.path,
                    line=stack.line_of("model", key),
                    field=f"model.{key}",
                )
        _check_extra_args(stack, snapshot, model.extra_args, ("model", "extra_args"))


def _check_profile(stack: Stack, name: str, profile: Profile) -> None:
    snapshot = stack.snapshot_for(name)
    for key, value in profile.backends().items():
        if value is None:
            continue
        where = {
            "file": stack.path,
            "line": stack.line_of("profiles", name, key),
            "field": f"profiles.{name}.{key}",
        }
        option = snapshot.option_for(key)
        if option is None:
            raise UserError(f"{snapshot.label} has no flag for {key}", **where)  # type: ignore[arg-type]
        if snapshot.spell_value(key, value) is None:
            valid = snapshot.valid_values(key) or ()
            raise UserError(
                f"unknown {key} {value!r} (valid for {snapshot.label}: {', '.join(valid)})",
                **where,  # type: ignore[arg-type]
            )
    _check_extra_args(stack, snapshot, profile.extra_args, ("profiles", name, "extra_args"))
    if profile.known_bad and not profile.evidence:
        raise UserError(
            f"expect: {profile.expect} needs evidence (issue/PR references) so users can check the claim",
            file=stack.path,
            line=stack.line_of("profiles", name, "expect"),
            field=f"profiles.{name}.evidence",
        )


def _check_extra_args(
    stack: Stack, snapshot: snapshots.Snapshot, argv: Sequence[str], path: tuple[str, ...]
) -> None:
    dotted = ".".join(path)
    for index, token in enumerate(argv):
        option = token.partition("=")[0]
        if option in snapshots.OWNED_FLAGS:
            raise UserError(
                f"{option} is set by bwstack: {snapshots.OWNED_FLAGS[option]}",
                file=stack.path,
                line=stack.line_of(*path, index),
                field=f"{dotted}[{index}]",
            )
    for problem in snapshots.check_argv(snapshot, argv):
        if problem.message.startswith("deprecated:"):
            stack.warnings.append(
                f"{stack.path}:{stack.line_of(*path, problem.index)}: {problem.message[12:]}"
            )
            continue
        raise UserError(
            problem.message,
            file=stack.path,
            line=stack.line_of(*path, problem.index),
            field=f"{dotted}[{problem.index}]",
        )
