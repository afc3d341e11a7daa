"""``bwstack explain``: the backends the pinned SGLang will really pick, computed by that SGLang's own code.

:func:`resolve` runs the pinned SGLang's resolution on the CPU in its venv (``foreign/resolve.py`` in a venv
from :mod:`bwstack.know.venvs`) with torch reporting the target GPU (sm120 -> compute capability 12.0, sm100
-> 10.0, sm90 -> 9.0) and the model's config.json. It returns the attention backend, KV-cache dtype, DSA
prefill/decode backends, page size, MoE runner and FP4 GEMM backend SGLang settles on, the lines SGLang would
log, and the error SGLang would raise (while resolving, or when the DSA attention backend starts), each
marked against what was requested. Results are cached per (version, arch, config, request) under
``$BWSTACK_CACHE/explain/`` so that ``bwstack list --arch`` can read them cheaply (:func:`resolve_cached`,
:func:`cached_explanation`); :func:`resolve_many` computes several in one run of the venv.

:func:`explain` does the same for one profile of a stack.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.know import venv_scripts, venvs
from bwstack.launch import launch_spec
from bwstack.stack import modelconfig
from bwstack.tiny import tinymodel
from healthchecks import vocabulary

if TYPE_CHECKING:
    from bwstack.stack.schema import Stack

#: the attention backend's DSA value in each spelling (``dsa``, ``nsa`` up to 0.5.12)
DSA_ATTENTION = vocabulary.spellings("attention_backend", "dsa")
#: the model settings (sglang_cli.MODEL_FLAGS keys) whose flags explain passes on: the ones SGLang's backend
#: resolution reads (the resolver brings its own --model-path)
RESOLVER_MODEL_FLAGS = ("tp_size", "quantization")
RESOLVE_SCRIPT = venv_scripts.RESOLVE
CACHE_FORMAT = "bwstack.explain/1"


@dataclass(frozen=True)
class Problem:
    """An error SGLang would raise: where, its type and its message."""

    stage: str
    type: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"stage": self.stage, "type": self.type, "message": self.message}


@dataclass(frozen=True)
class LogLine:
    level: str
    logger: str
    message: str


@dataclass(frozen=True)
class FieldOutcome:
    """One semantic field: what was requested and what SGLang settles on."""

    name: str
    requested: str | None
    effective: Any
    status: str  # default | kept | normalised | resolved (from auto) | overridden | unused


@dataclass(frozen=True)
class Resolution:
    """What one SGLang version resolves for one arch, model config and request."""

    sglang_version: str
    arch: str
    model_arch: str
    requested: dict[str, str | None]
    resolved: dict[str, Any]
    log: tuple[LogLine, ...]
    error: Problem | None
    startup_error: Problem | None
    argv: tuple[str, ...]
    api: str
    steps: tuple[str, ...] = ()

    @property
    def dsa_active(self) -> bool:
        return self.resolved.get("attention_backend") in DSA_ATTENTION

    @property
    def page_size(self) -> int | None:
        value = self.resolved.get("page_size")
        return value if isinstance(value, int) else None

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(line.message for line in self.log if line.level in ("WARNING", "ERROR", "CRITICAL"))

    def value(self, name: str) -> Any:
        return self.resolved.get(name)

    def outcomes(self) -> list[FieldOutcome]:
        return [self._outcome(name) for name in vocabulary.BACKEND_FIELDS]

    def overridden(self) -> list[FieldOutcome]:
        """Requested values SGLang would not use as given."""
        return [o for o in self.outcomes() if o.status == "overridden"]

    def _outcome(self, name: str) -> FieldOutcome:
        requested = self.requested.get(name)
        effective = self.resolved.get(name)
        if name.startswith("dsa_") and not self.dsa_active:
            return FieldOutcome(name, requested, effective, "unused")
        if requested is None:
            return FieldOutcome(name, None, effective, "default")
        if effective == requested:
            return FieldOutcome(name, requested, effective, "kept")
        if isinstance(effective, str) and vocabulary.same_value(name, requested, effective):
            return FieldOutcome(name, requested, effective, "normalised")
        if requested == "auto":
            return FieldOutcome(name, requested, effective, "resolved")
        return FieldOutcome(name, requested, effective, "overridden")

    def to_json(self) -> dict[str, Any]:
        return {
            "sglang_version": self.sglang_version,
            "arch": self.arch,
            "model_arch": self.model_arch,
            "requested": dict(self.requested),
            "resolved": dict(self.resolved),
            "dsa_active": self.dsa_active,
            "fields": {
                o.name: {"requested": o.requested, "effective": o.effective, "status": o.status}
                for o in self.outcomes()
            },
            "warnings": list(self.warnings),
            "log": [{"level": x.level, "logger": x.logger, "message": x.message} for x in self.log],
            "error": self.error.to_json() if self.error else None,
            "startup_error": self.startup_error.to_json() if self.startup_error else None,
            "argv": list(self.argv),
            "api": self.api,
            "steps": list(self.steps),
        }


@dataclass(frozen=True)
class Explanation:
    """``bwstack explain PROFILE``: a profile's resolution on one arch and variant."""

    profile: str
    variant: str
    arch: str
    resolution: Resolution
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        head = {
            "profile": self.profile,
            "variant": self.variant,
            "arch": self.arch,
            "notes": list(self.notes),
        }
        return {**head,
                **self.resolution.to_json()}  # fmt: skip

    def render_text(self) -> str:
        res = self.resolution
        lines = [
            f"{self.profile} on {self.arch}: variant {self.variant}, sglang {res.sglang_version} "
            f"(its own resolution code, run on the CPU for compute capability "
            f"{'.'.join(map(str, vocabulary.ARCH_CAPABILITY[self.arch]))}, model {res.model_arch})",
            *[f"  note: {note}" for note in self.notes],
        ]
        lines += [_outcome_line(o) for o in res.outcomes()]
        lines.append(f"  {'page size':<22}{_show(res.page_size)}")
        if res.overridden():
            lines.append("  overridden by SGLang: " + ", ".join(
                f"{o.name} {o.requested} -> {_show(o.effective)}" for o in res.overridden()))  # fmt: skip
        if res.log:
            lines.append("SGLang would log:")
            lines += [f"  {x.level}: {x.message}" for x in res.log]
        if res.error:
            lines.append(
                f"SGLang would refuse to start ({res.error.stage}): {res.error.type}: {res.error.message}"
            )
        if res.startup_error:
            lines.append(
                f"SGLang would fail after loading the model ({res.startup_error.stage}): "
                f"{res.startup_error.type}: {res.startup_error.message}"
            )
        return "\n".join(lines)


def _outcome_line(outcome: FieldOutcome) -> str:
    text = f"  {vocabulary.FIELD_LABELS[outcome.name]:<22}{_show(outcome.effective)}"
    if outcome.status == "default":
        return f"{text}  (SGLang's choice)"
    if outcome.status == "unused":
        return f"{text}  (not used: the attention backend is not DSA)"
    if outcome.status == "overridden":
        return f"{text}  OVERRIDDEN: requested {outcome.requested}"
    if outcome.status == "resolved":
        return f"{text}  (requested auto)"
    return f"{text}  (requested {outcome.requested})"


def _show(value: Any) -> str:
    return "-" if value is None else str(value)


# --- the profile level --------------------------------------------------------------------------------------


def explain(stack: Stack, profile_name: str, *, arch: str, variant: str | None) -> Explanation:
    """Resolve one profile of ``stack`` with its variant's SGLang (or ``variant``'s) on ``arch``."""
    version, query, notes = profile_query(stack, profile_name, arch=arch, variant=variant)
    resolution = resolve_many(version, [query])[0]
    bound = launch_spec(stack, profile_name, variant).hang_bound.line()
    return Explanation(
        profile_name, variant or stack.variant_name_for(profile_name), arch, resolution, (*notes, bound)
    )


def cached_explanation(
    stack: Stack, profile_name: str, *, arch: str, variant: str | None = None
) -> Explanation | None:
    """The explanation if it is cached (cheap: for ``bwstack list --arch``), else None; never runs SGLang."""
    version, query, notes = profile_query(stack, profile_name, arch=arch, variant=variant)
    found = _cached(version, query)
    if found is None:
        return None
    return Explanation(profile_name, variant or stack.variant_name_for(profile_name), arch, found, notes)


def profile_query(
    stack: Stack, profile_name: str, *, arch: str, variant: str | None = None
) -> tuple[str, Query, tuple[str, ...]]:
    """The SGLang version and query that explain a profile.

    The query holds the profile's backends, the model's config.json, the parts of the server's argv (its
    launch spec, :mod:`bwstack.launch`) that SGLang's resolution reads besides the backends (``--tp-size``,
    ``--quantization``, the model's and the profile's extra args) and the env the stack file asks for.
    """

    profile = stack.profile(profile_name)
    spec = launch_spec(stack, profile_name, variant)
    pinned = stack.variant(spec.variant)
    snapshot = stack.snapshot(spec.variant)
    version = pinned.sglang_version or snapshot.sglang_version
    notes: list[str] = []
    if not pinned.sglang_version:
        notes.append(
            f"{spec.variant} pins an SGLang that is not on PyPI; computed with sglang {version}, "
            f"which its parser snapshot stands in with ({snapshot.provenance.get('method', '?')})"
        )
    query = Query(
        arch=arch,
        model_config=stack_model_config(stack),
        requested=profile.backends(),
        extra_argv=(*spec.model_argv(*RESOLVER_MODEL_FLAGS), *spec.extra_argv),
        env=spec.stack_env,
    )
    return version, query, tuple(notes)


def stack_model_config(stack: Stack) -> dict[str, Any]:
    """The config.json explain feeds SGLang: model.config, else the tiny model's own (``tiny_models``)."""
    if stack.model.config:
        return load_model_config(stack.model.config, base=stack.root)
    tiny = stack.tiny_models.get(stack.model.path)
    if tiny is not None:
        return tinymodel.config_json(tinymodel.TinySpec(arch=tiny.arch))
    raise UserError(
        "model.config is not set: name a model-config fixture or a config.json path for explain",
        file=stack.path,
        field="model.config",
    )


def load_model_config(name: str, *, base: Path | None = None) -> dict[str, Any]:
    """A model-config fixture by name (``glm-5``), or a config.json / folder path relative to ``base``."""
    return modelconfig.load(name, base=base)


# --- the version level --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One resolution to compute: arch, model config.json, requested semantic values, extra argv and env."""

    arch: str
    model_config: Mapping[str, Any]
    requested: Mapping[str, str | None]
    extra_argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def request(self) -> dict[str, str | None]:
        return _request(self.arch, self.requested)


def resolve(
    sglang_version: str,
    arch: str,
    model_config: Mapping[str, Any],
    requested: Mapping[str, str | None],
    *,
    extra_argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    use_cache: bool = True,
) -> Resolution:
    """Run ``sglang_version``'s own resolution for ``arch`` (building its venv when missing); cached.

    ``requested`` maps the semantic fields (attention_backend, dsa_prefill_backend, dsa_decode_backend,
    kv_cache_dtype, moe_runner_backend, fp4_gemm_backend) to a value or None (not given). ``extra_argv`` is
    passed to SGLang's parser as well (e.g. ``--tp-size 8``); ``env`` is set for SGLang's code (``SGLANG_*``).
    """
    query = Query(arch, model_config, requested, tuple(extra_argv), dict(env or {}))
    return resolve_many(sglang_version, [query], use_cache=use_cache)[0]


def resolve_many(
    sglang_version: str, queries: Sequence[Query], *, use_cache: bool = True
) -> list[Resolution]:
    """Several resolutions of one SGLang version; the uncached ones in one run of its venv (one import)."""
    results: list[Resolution | None] = [
        _cached(sglang_version, query) if use_cache else None for query in queries
    ]
    missing = [i for i, found in enumerate(results) if found is None]
    if missing:
        venv = venvs.ensure_env(sglang_version)
        venvs.progress_line(
            f"running sglang {sglang_version}'s own resolution on the CPU ({len(missing)} case(s), ~15 s)"
        )
        raws = _run_resolver(venv, [queries[i] for i in missing])
        for index, raw in zip(missing, raws, strict=True):
            query = queries[index]
            _store(_cache_path(sglang_version, query), raw)
            results[index] = _from_raw(raw, query.arch, query.request())
    return [r for r in results if r is not None]


def resolve_cached(
    sglang_version: str,
    arch: str,
    model_config: Mapping[str, Any],
    requested: Mapping[str, str | None],
    *,
    extra_argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    compute: bool = False,
) -> Resolution | None:
    """The cached resolution; None when not cached, unless ``compute`` (then it is computed and cached)."""
    query = Query(arch, model_config, requested, tuple(extra_argv), dict(env or {}))
    found = _cached(sglang_version, query)
    if found is None and compute:
        return resolve_many(sglang_version, [query])[0]
    return found


def _cached(sglang_version: str, query: Query) -> Resolution | None:
    try:
        stored = json.loads(_cache_path(sglang_version, query).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(stored, dict)
        or stored.get("format") != CACHE_FORMAT
        or not isinstance(stored.get("result"), dict)
    ):
        return None
    return _from_raw(stored["result"], query.arch, query.request())


def _request(arch: str, requested: Mapping[str, str | None]) -> dict[str, str | None]:
    if arch not in vocabulary.ARCH_CAPABILITY:
        raise UserError(
            f"unknown arch {arch!r} (known: {', '.join(vocabulary.ARCH_CAPABILITY)})", field="--arch"
        )
    unknown = sorted(set(requested) - set(vocabulary.BACKEND_FIELDS))
    if unknown:
        raise UserError(
            f"unknown backend field(s) {', '.join(unknown)} (known: {', '.join(vocabulary.BACKEND_FIELDS)})"
        )
    return {name: requested.get(name) for name in vocabulary.BACKEND_FIELDS}


#: what the resolver reports, by ServerArgs field (= /server_info key; aliases: the healthcheck table)
RESULT_KEYS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    *vocabulary.DSA_SIDES,
    "kv_cache_dtype",
    "page_size",
    "moe_runner_backend",
    "fp4_gemm_backend",
    "quantization",
)


def _flag_tables() -> dict[str, Any]:
    """The flag/field name tables ``foreign/resolve.py`` needs, from their one home on the host side."""
    return {
        "semantic_options": {k: list(v) for k, v in vocabulary.SEMANTIC_FLAGS.items()},
        "value_aliases": {
            k: {v: list(s) for v, s in m.items()} for k, m in vocabulary.VALUE_SPELLINGS.items()
        },
        "result_fields": {k: list(vocabulary.KEY_ALIASES.get(k, (k,))) for k in RESULT_KEYS},
    }


def _run_resolver(venv: venvs.SglangEnv, queries: Sequence[Query]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bwstack-explain-") as tmp:
        payload = []
        for index, query in enumerate(queries):
            model_dir = Path(tmp) / f"model-{index}"
            model_dir.mkdir()
            (model_dir / "config.json").write_text(json.dumps(dict(query.model_config)), encoding="utf-8")
            (model_dir / "generation_config.json").write_text(
                _generation_config(query.model_config), encoding="utf-8"
            )
            payload.append({
                "capability": list(vocabulary.ARCH_CAPABILITY[query.arch]),
                "device_name": vocabulary.DEVICE_NAMES[query.arch],
                "model_dir": str(model_dir), "requested": query.request(),
                "extra_argv": list(query.extra_argv),
                "env": dict(query.env),
                **_flag_tables(),
            })  # fmt: skip
        request_path = Path(tmp) / "requests.json"
        request_path.write_text(json.dumps(payload), encoding="utf-8")
        out = venvs.run_script(venv, RESOLVE_SCRIPT, [str(request_path)], timeout=300 + 60 * len(queries))
    try:
        raws = json.loads(out)
    except ValueError:
        raise ExternalError(f"sglang {venv.version}'s resolution printed no JSON") from None
    if not isinstance(raws, list) or len(raws) != len(queries):
        raise ExternalError(f"sglang {venv.version}'s resolution returned no result list")
    for raw in raws:
        if not isinstance(raw, dict) or raw.get("internal_error"):
            detail = raw.get("internal_error") if isinstance(raw, dict) else "no result"
            raise ExternalError(f"sglang {venv.version}'s resolution code could not run on the CPU: {detail}")
    return raws


def _generation_config(model_config: Mapping[str, Any]) -> str:
    """A checkpoint ships one; without it SGLang logs a warning that a real launch would not."""
    keys = ("bos_token_id", "eos_token_id", "pad_token_id")
    return json.dumps({k: model_config[k] for k in keys if model_config.get(k) is not None})


def _from_raw(raw: Mapping[str, Any], arch: str, request: dict[str, str | None]) -> Resolution:
    def problem(value: Any) -> Problem | None:
        if not isinstance(value, dict):
            return None
        return Problem(str(value.get("stage", "")), str(value.get("type", "")), str(value.get("message", "")))

    return Resolution(
        sglang_version=str(raw.get("sglang_version", "")),
        arch=arch,
        model_arch=str(raw.get("model_arch", "")),
        requested=dict(request),
        resolved=dict(raw.get("resolved") or {}),
        log=tuple(
            LogLine(str(x["level"]), str(x["logger"]), str(x["message"])) for x in raw.get("log") or []
        ),
        error=problem(raw.get("error")),
        startup_error=problem(raw.get("startup_error")),
        argv=tuple(str(a) for a in raw.get("argv") or []),
        api=str(raw.get("api", "")),
        steps=tuple(str(s) for s in raw.get("steps") or []),
    )


# --- the cache ----------------------------------------------------------------------------------------------


def cache_key(sglang_version: str, query: Query) -> str:
    """Hash of everything the result depends on: the query, the venv's pins, the resolver script and the
    vocabulary's tables it is sent."""
    material = {
        "format": CACHE_FORMAT,
        "sglang": sglang_version,
        "arch": query.arch,
        "config": dict(query.model_config),
        "requested": query.request(),
        "extra_argv": list(query.extra_argv),
        "env": dict(sorted(query.env.items())),
        "resolver": hashlib.sha256(RESOLVE_SCRIPT.read_bytes()).hexdigest(),
        "tables": _flag_tables(),
        "venv": venvs.expected_marker(sglang_version),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def _cache_path(sglang_version: str, query: Query) -> Path:
    key = cache_key(sglang_version, query)
    return venvs.cache_root() / "explain" / f"sglang-{sglang_version}-{query.arch}-{key}.json"


def _store(path: Path, raw: Mapping[str, Any]) -> None:

    atomic_write(path, json.dumps({"format": CACHE_FORMAT, "result": dict(raw)}, indent=1))


def clear_cache() -> None:
    """Forget every cached resolution."""
    shutil.rmtree(venvs.cache_root() / "explain", ignore_errors=True)
