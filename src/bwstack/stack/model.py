"""The typed stack model: profiles.yaml + the image variants it uses, validated into one source of truth.

Validation happens in two passes. Pydantic checks shape and types (unknown keys, wrong types, bad names); then
every backend value and every extra argument is checked against the parser snapshot of the variant the profile
runs on, so a value the pinned SGLang would reject is refused here with the valid ones for that version. Every
error names ``file:line``, the field and what is valid, and surfaces as exit status 2.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from bwstack.errors import UserError
from bwstack.stack import pins, snapshots
from bwstack.stack.snapshots import Snapshot
from bwstack.stack.yamlload import Lines, load_yaml
from healthchecks import common, signatures, vocabulary

FORMAT_VERSION = 1
COMMIT_RE = re.compile(r"[0-9a-f]{40}")

#: failure classes a profile may expect (the healthcheck's classes; ``healthy`` for a working profile)
EXPECT_CLASSES = ("healthy", *(c for c in signatures.CLASSES if c not in {"healthy", "starting"}))
GPU_ARCHES = vocabulary.PROFILE_ARCHES
BACKEND_FIELDS = vocabulary.BACKEND_FIELDS
COMPOSE_FEATURES = ("start_interval",)

_SHELL_HINT = (
    "letters, digits and . _ - / only; "
    "shell metacharacters such as ; | & $ ` ' \" < > ( ) * ? ~ are not allowed"
)

Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]
SafeToken = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$")]
SafePath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/][A-Za-z0-9._/-]{0,254}$")]
ModelRef = Annotated[str, StringConstraints(pattern=r"^/?[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")]
Duration = Annotated[str, StringConstraints(pattern="^" + common.DURATION_PATTERN + "$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]*$")]
ImageRepo = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")]
HostAddr = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F.:]+$")]
SizeStr = Annotated[str, StringConstraints(pattern=r"^\d+(?:[bkmg]|kb|mb|gb)?$")]
RestartPolicy = Annotated[str, StringConstraints(pattern=r"^(no|always|unless-stopped|on-failure(?::\d+)?)$")]
if TYPE_CHECKING:
    GpuArch = str
else:  # one of the vocabulary's archs (pydantic lists them, in that order, when a value is not one)
    GpuArch = Literal[GPU_ARCHES]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class HealthcheckSettings(_Strict):
    """Docker healthcheck timing and the deep check's own settings."""

    interval: Duration = "30s"
    timeout: Duration = "90s"
    retries: int = Field(default=3, ge=1, le=100)
    start_period: Duration = "45m"
    check_timeout: int = Field(default=75, ge=5, le=3600, description="warmup.py --timeout, seconds")
    decode_every: int = Field(
        default=300, ge=0, le=86400, description="light probes repeat the decode this often"
    )
    expect_text: str | None = None


class BenchSettings(_Strict):
    """The bounded load ``bwstack sweep --bench`` runs against each healthy profile
    (:mod:`bwstack.sweep.bench`)."""

    num_prompts: int = Field(default=64, ge=1, le=100_000, description="requests per profile")
    input_len: int = Field(default=1024, ge=1, le=1_000_000, description="prompt tokens per request")
    output_len: int = Field(default=256, ge=1, le=1_000_000, description="generated tokens per request")
    concurrency: int = Field(default=16, ge=1, le=10_000, description="requests in flight at once")
    time_limit_s: int = Field(default=600, ge=1, le=86_400, description="hard limit of one profile's load")

    @model_validator(mode="after")
    def _concurrency_fits(self) -> BenchSettings:
        if self.concurrency > self.num_prompts:
            raise ValueError(
                f"concurrency {self.concurrency} is more than num_prompts {self.num_prompts}: at most "
                f"{self.num_prompts} requests can be in flight"
            )
        return self


class StackSettings(_Strict):
    """How the stack is deployed: image, ports, secrets, volumes, compose features."""

    project: Name = "bwstack"
    variant: Name
    image_repo: ImageRepo = "bwstack/sglang"
    gpu_arch: GpuArch = "sm120"
    #: what the services run on: ``gpu`` reserves ``model.tp_size`` NVIDIA GPUs, ``cpu`` reserves none
    device: Literal["gpu", "cpu"] = "gpu"
    bind_address: HostAddr = "127.0.0.1"
    port: int = Field(default=30000, ge=1, le=65535)
    shm_size: SizeStr = "32gb"
    restart: RestartPolicy = "on-failure:3"
    model_cache: Name = "hf-cache"
    model_cache_path: SafePath | None = Field(
        default=None,
        description="host folder bind-mounted as the model cache instead of the model_cache volume",
    )
    secrets_dir: SafePath = "./secrets"
    hf_token: bool = True
    api_key: bool = False
    compose_features: list[Literal["start_interval"]] = []
    healthcheck: HealthcheckSettings = HealthcheckSettings()
    bench: BenchSettings = BenchSettings()

    @field_validator("model_cache_path")
    @classmethod
    def _host_path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("/", "./", "../")):
            raise ValueError(
                f"invalid value {_short(value)}: a host folder starting with /, ./ or ../ "
                "(a bare name would be a volume: use model_cache for that)"
            )
        return value


class ModelSettings(_Strict):
    """The model every profile serves."""

    path: ModelRef
    revision: str | None = Field(
        default=None, description="commit of the model repo (40 hex), passed as SGLang's --revision"
    )
    served_name: SafeToken | None = None
    config: SafePath | None = Field(
        default=None,
        description="model-config fixture name for explain (glm-5, deepseek-v3.2) or a path; "
        "a tiny_models entry needs none",
    )
    tp_size: int = Field(ge=1, le=1024)
    quantization: SafeToken | None = None
    reasoning_parser: SafeToken | None = None
    tool_call_parser: SafeToken | None = None
    context_length: int | None = Field(default=None, ge=1)
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    trust_remote_code: bool = False
    size_gb: int | None = Field(default=None, ge=1, description="checkpoint size, for the disk check")
    extra_args: list[str] = []
    env: dict[EnvName, str] = {}

    @field_validator("revision")
    @classmethod
    def _commit(cls, value: str | None) -> str | None:
        if value is not None and not COMMIT_RE.fullmatch(value):
            raise ValueError(
                f"invalid value {_short(value)}: a commit of the model repo, 40 lowercase hex digits "
                "(a branch or tag name can move; copy the commit id from the repo's history)"
            )
        return value

    @field_validator("mem_fraction_static", mode="before")
    @classmethod
    def _int_to_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _ProfileHead(_Strict):
    """The fields a profile starts with; the backend fields follow, then :class:`Profile`'s own."""

    description: str = ""
    variant: Name | None = None


if not TYPE_CHECKING:  # one optional field per semantic backend field of the vocabulary, in its order
    _ProfileBackends = create_model(
        "_ProfileBackends",
        __base__=_ProfileHead,
        **{name: (SafeToken | None, None) for name in BACKEND_FIELDS},
    )
else:  # mypy's view: the backend fields are read by name (Profile.backends), so it need not list them

    class _ProfileBackends(_ProfileHead):
        pass


class Profile(_ProfileBackends):
    """One backend combination, rendered as one compose service under its own compose profile.

    Its fields: ``description``, ``variant``, the semantic backend fields (``vocabulary.BACKEND_FIELDS``,
    each an optional token), then the ones below."""

    extra_args: list[str] = []
    env: dict[EnvName, str] = {}
    tags: list[Name] = Field(default=[], description="labels for selecting profiles (bwstack sweep --tag)")
    model_path: ModelRef | None = Field(
        default=None,
        description="this profile's checkpoint, instead of model.path (e.g. a faulty tiny model)",
    )
    expect: str = Field(default="healthy", json_schema_extra={"enum": list(EXPECT_CLASSES)})
    arch: GpuArch | None = None
    device: Literal["gpu", "cpu"] | None = None  # default: stack.device
    why: str = ""
    evidence: list[str] = []

    @field_validator("expect")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if value not in EXPECT_CLASSES:
            raise ValueError(f"invalid value {value!r} (valid: {', '.join(EXPECT_CLASSES)})")
        return value

    def backends(self) -> dict[str, str | None]:
        """The semantic backend fields, None where the profile leaves SGLang to choose."""
        return {name: getattr(self, name) for name in BACKEND_FIELDS}

    @property
    def known_bad(self) -> bool:
        return self.expect != "healthy"


class TinyModel(_Strict):
    """A tiny model bwstack makes itself (``bwstack tiny-model``) in the model cache before up or a sweep."""

    arch: Literal["llama", "qwen2"] = "llama"
    fault: Literal["none", "nan-lm-head", "nan-norm", "noise"] = "none"
    seed: int = Field(default=0, ge=0)


class StackFile(_Strict):
    """The whole profiles.yaml."""

    version: Literal[1]
    stack: StackSettings
    model: ModelSettings
    tiny_models: dict[Name, TinyModel] = Field(
        default={}, description="tiny models made in stack.model_cache_path (a CPU stack's checkpoints)"
    )
    profiles: dict[Name, Profile] = Field(min_length=1)


@dataclass
class Stack:
    """profiles.yaml plus the variants its profiles run on, validated."""

    path: Path
    root: Path
    settings: StackSettings
    model: ModelSettings
    profiles: dict[str, Profile]
    variants: dict[str, pins.Variant]
    snapshots: dict[str, Snapshot]
    lines: Lines
    warnings: list[str] = field(default_factory=list)
    tiny_models: dict[str, TinyModel] = field(default_factory=dict)

    @property
    def is_cpu(self) -> bool:
        """A CPU stack: real SGLang on the CPU, no GPU reservations (``stack.device: cpu``)."""
        return self.settings.device == "cpu"

    def tagged(self, tags: Sequence[str]) -> list[str]:
        """Profiles carrying any of ``tags``, in file order; UserError when a tag matches none."""
        for tag in tags:
            if not any(tag in p.tags for p in self.profiles.values()):
                known = sorted({t for p in self.profiles.values() for t in p.tags})
                raise UserError(
                    f"no profile is tagged {tag!r} (tags in {self.path.name}: {', '.join(known) or 'none'})"
                )
        return [name for name, p in self.profiles.items() if set(tags) & set(p.tags)]

    def model_path_for(self, profile_name: str) -> str:
        """The checkpoint a profile serves: its own ``model_path``, else ``model.path``."""
        return self.profile(profile_name).model_path or self.model.path

    @property
    def compose_file(self) -> Path:
        """The rendered compose file of this stack: profiles.yaml -> compose.yaml, profiles.X.yaml ->
        compose.X.yaml (so profiles.cpu.yaml renders compose.cpu.yaml)."""
        stem = self.path.name.removesuffix(".yaml").removesuffix(".yml")
        middle = stem.removeprefix("profiles")
        return self.root / f"compose{middle}.yaml"

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            raise UserError(
                f"unknown profile {name!r} (profiles: {', '.join(self.profiles)})", file=self.path
            ) from None

    def variant_name_for(self, profile_name: str) -> str:
        return self.profile(profile_name).variant or self.settings.variant

    def variant_for(self, profile_name: str) -> pins.Variant:
        return self.variants[self.variant_name_for(profile_name)]

    def snapshot_for(self, profile_name: str) -> Snapshot:
        return self.snapshots[self.variant_name_for(profile_name)]

    def variant(self, name: str) -> pins.Variant:
        """A variant by name, loading it if no profile uses it yet."""
        if name not in self.variants:
            self.variants[name] = pins.load_variant(self.images_dir, name)
        return self.variants[name]

    def snapshot(self, name: str) -> Snapshot:
        if name not in self.snapshots:
            self.snapshots[name] = snapshots.load_snapshot(self.variant(name).cli_snapshot_path)
        return self.snapshots[name]

    def variants_used(self) -> set[str]:
        return {p.variant or self.settings.variant for p in self.profiles.values()}

    def arch_for(self, profile_name: str) -> str:
        return self.profile(profile_name).arch or self.settings.gpu_arch

    def device_for(self, profile_name: str) -> str:
        """``gpu`` or ``cpu``: the profile's ``device``, else the stack's."""
        return self.profile(profile_name).device or self.settings.device

    def line_of(self, *path: str | int) -> int | None:
        return self.lines.line(path)

    def iter_profiles(self) -> Iterator[tuple[str, Profile]]:
        yield from self.profiles.items()


def parse_stack_file(path: Path) -> tuple[StackFile, Lines]:
    """First pass only: shape and types of profiles.yaml, without the variants' parser snapshots."""
    data, lines = load_yaml(path)
    if data is None:
        raise UserError(
            "empty file: expected a mapping with version, stack, model and profiles", file=path, line=1
        )
    if not isinstance(data, dict):
        raise UserError(
            f"top level must be a mapping (version, stack, model, profiles), got {_kind(data)}",
            file=path,
            line=1,
        )
    try:
        return StackFile.model_validate(data), lines
    except ValidationError as exc:
        raise _from_validation(exc, path, lines, data) from None


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
            where = _variant_ref_line(stack, name)
            raise UserError(
                exc.message, file=exc.file or stack.path, line=exc.line or where, field=exc.field
            ) from None
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
        if not variant.locked and not variant.is_cpu:
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


def _check_model(stack: Stack) -> None:
    model = stack.model
    if model.revision is None and not model.path.startswith("/") and model.path not in stack.tiny_models:
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


# --- pydantic errors -> one line with file:line -------------------------------------------------------------


def _from_validation(exc: ValidationError, path: Path, lines: Lines, data: Any) -> UserError:
    err = exc.errors(include_url=False)[0]
    loc: tuple[str | int, ...] = tuple(err["loc"])
    etype = err["type"]
    dotted = field_path(loc)
    line = lines.line(loc)
    if etype == "extra_forbidden":
        parent = loc[:-1]
        model_cls = _model_at(parent, data)
        valid = ", ".join(model_cls.model_fields) if model_cls else ""
        return UserError(
            f"unknown key {loc[-1]!r}" + (f" (valid: {valid})" if valid else ""),
            file=path,
            line=line,
            field=field_path(parent) or "top level",
        )
    if etype == "missing":
        return UserError("required key missing", file=path, line=lines.line(loc[:-1]), field=dotted)
    if etype == "string_pattern_mismatch":
        value = _value_at(data, loc)
        return UserError(f"invalid value {value!r}: {_SHELL_HINT}", file=path, line=line, field=dotted)
    if etype == "literal_error":
        value = _value_at(data, loc)
        expected = err.get("ctx", {}).get("expected", "")
        return UserError(
            f"invalid value {value!r} (valid: {_clean_expected(expected)})",
            file=path,
            line=line,
            field=dotted,
        )
    if etype in {
        "string_type",
        "int_type",
        "float_type",
        "bool_type",
        "dict_type",
        "list_type",
        "tuple_type",
        "model_type",
        "int_from_float",
        "float_parsing",
        "int_parsing",
    }:
        value = _value_at(data, loc)
        want = {
            "string_type": "a string",
            "int_type": "an integer",
            "float_type": "a number",
            "bool_type": "true or false",
            "dict_type": "a mapping",
            "list_type": "a list",
            "tuple_type": "a list",
            "model_type": "a mapping",
            "int_from_float": "an integer",
            "float_parsing": "a number",
            "int_parsing": "an integer",
        }[etype]
        return UserError(
            f"expected {want}, got {_kind(value)} {_short(value)}", file=path, line=line, field=dotted
        )
    message = str(err["msg"])
    if etype == "value_error":
        message = message.removeprefix("Value error, ")
    return UserError(message, file=path, line=line, field=dotted or None)


def _clean_expected(expected: str) -> str:
    return ", ".join(re.findall(r"'([^']*)'", expected)) or expected


def _model_at(loc: tuple[str | int, ...], data: Any) -> type[BaseModel] | None:
    cls: type[BaseModel] | None = StackFile
    index = 0
    while cls is not None and index < len(loc):
        key = loc[index]
        if cls is StackFile and key == "profiles":
            if index + 1 < len(loc):
                cls = Profile
                index += 2
                continue
            return None
        info = cls.model_fields.get(str(key))
        if info is None:
            return None
        annotation = info.annotation
        cls = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        index += 1
    return cls


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    cur = data
    for key in loc:
        try:
            cur = cur[key]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def field_path(loc: Iterable[str | int]) -> str:
    """A validation location as a field path: ``profiles[0].backends``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _kind(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        type(None): "nothing (null)",
    }.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
