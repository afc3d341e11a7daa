"""The stack file's schema: profiles.yaml as typed pydantic models, and :class:`Stack`, the loaded stack with
the variants and parser snapshots its profiles use. Shape and types are checked here; the second pass against
each variant's parser snapshot is :mod:`bwstack.stack.loader`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

from bwstack.errors import UserError
from bwstack.stack import pins, safevalues, snapshots
from bwstack.stack.snapshots import Snapshot
from bwstack.stack.validation import DURATION_PATTERN, SIZE_PATTERN, short
from bwstack.stack.yamlload import Lines
from healthchecks import signatures, vocabulary

FORMAT_VERSION = 1
COMMIT_RE = re.compile(r"[0-9a-f]{40}")

#: failure classes a profile may expect (the healthcheck's classes; ``healthy`` for a working profile)
EXPECT_CLASSES = ("healthy", *(c for c in signatures.CLASSES if c not in {"healthy", "starting"}))
COMPOSE_FEATURES = ("start_interval",)
#: a tiny model's context (max_position_embeddings): 4x the default sparse window (2048), so the long probe
#: and the soak's long prompts pass the window with room for the soak's concurrency
TINY_CONTEXT = 8192
#: the context of the copy pair (bwstack.tiny.tinycopy: positional heads built for 4096 positions)
COPY_CONTEXT = 4096


Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$")]
SafeToken = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$")]
SafePath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/][A-Za-z0-9._/-]{0,254}$")]
ModelRef = Annotated[str, StringConstraints(pattern=r"^/?[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")]
Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]*$")]
ImageRepo = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")]
HostAddr = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F.:]+$")]
SizeStr = Annotated[str, StringConstraints(pattern=SIZE_PATTERN)]
RestartPolicy = Annotated[str, StringConstraints(pattern=r"^(no|always|unless-stopped|on-failure(?::\d+)?)$")]
if TYPE_CHECKING:
    GpuArch = str
else:  # one of the vocabulary's archs (pydantic lists them, in that order, when a value is not one)
    GpuArch = Literal[vocabulary.PROFILE_ARCHES]


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


class SoakSettings(_Strict):
    """The load ``bwstack sweep --soak SECONDS`` keeps on each healthy profile (:mod:`bwstack.sweep.soak`)."""

    concurrency: int = Field(default=4, ge=1, le=64, description="streamed requests in flight at once")
    lengths: list[Annotated[int, Field(ge=1, le=1_000_000)]] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="prompt lengths in tokens, cycled; unset: half the model's sparse window and 256 tokens "
        "past it (index_topk of model.config, else 2048); the client caps each by the served context length",
    )
    output_len: int = Field(default=64, ge=1, le=65_536, description="sampled tokens per request")
    duration_s: int = Field(default=60, ge=1, le=86_400, description="seconds of load when --soak has none")
    stall_after_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="a request with no token for this long ends the soak: hang (default: the profile's "
        "derived hang bound, bwstack.stack.hangbound)",
    )
    window_s: float = Field(default=10.0, gt=0, le=3600, description="seconds per window of the figures")


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
    soak: SoakSettings = SoakSettings()

    @field_validator("model_cache_path")
    @classmethod
    def _host_path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("/", "./", "../")):
            raise ValueError(
                f"invalid value {short(value)}: a host folder starting with /, ./ or ../ "
                "(a bare name would be a volume: use model_cache for that)"
            )
        return safevalues.not_a_system_folder(value)

    _address = field_validator("bind_address")(safevalues.host_address)


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
    context_length: int | None = Field(default=None, ge=1, le=1 << 30)
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    trust_remote_code: bool = False
    size_gb: int | None = Field(default=None, ge=1, description="checkpoint size, for the disk check")
    extra_args: list[str] = []
    env: dict[EnvName, str] = {}

    _env = field_validator("env")(safevalues.no_secret_env)
    _args = field_validator("extra_args")(safevalues.no_secret_args)

    @field_validator("revision")
    @classmethod
    def _commit(cls, value: str | None) -> str | None:
        if value is not None and not COMMIT_RE.fullmatch(value):
            raise ValueError(
                f"invalid value {short(value)}: a commit of the model repo, 40 lowercase hex digits "
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
        **{name: (SafeToken | None, None) for name in vocabulary.BACKEND_FIELDS},
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

    _env = field_validator("env")(safevalues.no_secret_env)
    _args = field_validator("extra_args")(safevalues.no_secret_args)
    tags: list[Name] = Field(default=[], description="labels for selecting profiles (bwstack sweep --tag)")
    model_path: ModelRef | None = Field(
        default=None,
        description="this profile's checkpoint, instead of model.path (e.g. a faulty tiny model)",
    )
    expect: str = Field(default="healthy", json_schema_extra={"enum": list(EXPECT_CLASSES)})
    arch: GpuArch | None = None
    device: Literal["gpu", "cpu"] | None = None  # default: stack.device
    shm_size: SizeStr | None = Field(
        default=None,
        description="this profile's /dev/shm size, instead of stack.shm_size (e.g. a CPU profile, "
        "whose shm is its own, or a Kubernetes pod's memory-backed dshm volume)",
    )
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
        return {name: getattr(self, name) for name in vocabulary.BACKEND_FIELDS}

    @property
    def known_bad(self) -> bool:
        return self.expect != "healthy"


class TinyModel(_Strict):
    """A tiny model bwstack makes itself (``bwstack tiny-model``) in the model cache before up or a sweep."""

    #: random: seeded random weights (numpy); copy: the long-context model of bwstack.tiny.tinycopy (an
    #: induction circuit that copies across 2,000+ tokens); arch, fault, seed and context_length: random only
    kind: Literal["random", "copy"] = "random"
    arch: Literal["llama", "qwen2"] = "llama"
    fault: Literal["none", "nan-lm-head", "nan-norm", "noise"] = "none"
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    context_length: int = Field(
        default=TINY_CONTEXT,
        ge=256,
        le=65_536,
        description="max_position_embeddings of the tiny model: at least twice the sparse window (2048), so "
        "the long-context probe and the soak's long prompts really pass it",
    )

    @property
    def context(self) -> int:
        """The context the made model has (the copy pair's is fixed by its construction)."""
        return COPY_CONTEXT if self.kind != "random" else self.context_length


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

    @property
    def model_unpinnable(self) -> str | None:
        """Why ``model.path`` has no Hub commit to pin (a ``tiny_models`` entry bwstack makes, a local
        folder), or None for a Hub repo (then ``model.revision`` should pin it)."""
        if self.model.path in self.tiny_models:
            return "made by bwstack (tiny_models; no revision to pin)"
        if self.model.path.startswith("/"):
            return "a local folder (no revision to pin)"
        return None

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
