"""What a prediction is made from: the profile's requested values, the variant's package versions, and
the static fallback that imitates the part of SGLang's resolution that holds for every pinned release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from bwstack.know import explain
from bwstack.know.rules.book import version_or_none
from bwstack.stack import pins, snapshots
from bwstack.stack.schema import Stack
from healthchecks import vocabulary


@dataclass(frozen=True)
class ProfileInputs:
    """What SGLang sees for one profile: the same inputs ``bwstack explain`` passes to the resolution."""

    profile: str
    variant: str
    sglang_version: str | None
    model_config: Mapping[str, Any]
    requested: Mapping[str, str | None]
    extra_argv: tuple[str, ...]
    env: Mapping[str, str]
    packages: Mapping[str, str]
    quantization: str | None


def profile_inputs(stack: Stack, profile_name: str) -> ProfileInputs:
    """A profile's inputs, from :func:`bwstack.know.explain.profile_query` itself (so explain's cache is
    found)."""
    variant_name = stack.variant_name_for(profile_name)
    pinned = stack.variant(variant_name)
    snapshot = stack.snapshot(variant_name)
    version, query, _notes = explain.profile_query(stack, profile_name, arch=stack.settings.gpu_arch)
    return ProfileInputs(
        profile=profile_name,
        variant=variant_name,
        sglang_version=version or None,
        model_config=query.model_config,
        requested=dict(query.requested),
        extra_argv=tuple(query.extra_argv),
        env=dict(query.env),
        packages=package_versions(pinned, snapshot),
        quantization=stack.model.quantization,
    )


def package_versions(variant: pins.Variant, snapshot: snapshots.Snapshot | None) -> dict[str, str]:
    """Normalised package -> version in the image: the variant's pins, else the pinned SGLang's own ``==``."""
    out: dict[str, str] = {}
    if snapshot is not None and not snapshot.is_proxy:
        for name, spec in snapshot.requires_dist.items():
            exact = _exact_pin(spec)
            if exact:
                out[pins.normalize_package(name)] = exact
    for requirement in variant.overrides:
        name, sep, version = requirement.partition("==")
        if sep:
            out[pins.normalize_package(name)] = version.strip()
    out.update({pins.normalize_package(name): version for name, version in variant.python.items()})
    if variant.sglang_version:
        out["sglang"] = variant.sglang_version
    return out


def is_dsa_model(config: Mapping[str, Any]) -> bool:
    """SGLang's is_deepseek_dsa: a DSA architecture with ``index_topk`` set."""
    archs = config.get("architectures") or ["?"]
    return str(archs[0]) in vocabulary.DSA_ARCHS and config.get("index_topk") is not None


def canonical(name: str, value: Any) -> str | None:
    """A resolved or requested value in semantic spelling (``nsa`` -> ``dsa``, ``bf16`` -> ``bfloat16``)."""
    return None if value is None else vocabulary.canonical_value(name, str(value))


def dsa_default(
    version: str | None, arch: str, model_arch: str, kv: str | None
) -> vocabulary.DsaDefault | None:
    """SGLang's DSA prefill/decode default for a release (version text), arch, model and KV dtype, from the
    vocabulary's table; None when the version or KV dtype is unknown or no row holds."""
    parsed = version_or_none(version)
    if parsed is None or kv is None:
        return None
    major = vocabulary.ARCH_CAPABILITY[arch][0]
    return vocabulary.dsa_default(parsed.release, kv, major, model_arch)


def static_effective(inputs: ProfileInputs, arch: str) -> tuple[dict[str, str | None], list[str]]:
    """The static fallback (module docstring, step 1): requested values plus version-independent facts."""
    eff = {name: canonical(name, inputs.requested.get(name)) for name in vocabulary.BACKEND_FIELDS}
    config = inputs.model_config
    if not is_dsa_model(config):
        return eff, ["not a DSA model: values left to SGLang stay unknown without a cached explain"]
    notes: list[str] = []
    major = vocabulary.ARCH_CAPABILITY[arch][0]
    if eff["attention_backend"] is None:
        eff["attention_backend"] = "dsa"
    if eff["kv_cache_dtype"] in (None, "auto"):
        sinks = bool(config.get("learnable_sink"))
        eff["kv_cache_dtype"] = "fp8_e4m3" if major >= 10 and not sinks else "bfloat16"
    model_arch = config_arch(config)
    row = dsa_default(inputs.sglang_version, arch, model_arch, eff["kv_cache_dtype"])
    for side, default in zip(
        vocabulary.DSA_SIDES, (row.prefill, row.decode) if row else (None, None), strict=True
    ):
        if eff[side] is None:
            eff[side] = default
    if row is None and None in (eff[side] for side in vocabulary.DSA_SIDES):
        notes.append(
            f"DSA backends SGLang {inputs.sglang_version or '?'} picks on {arch} are not in the vocabulary's "
            "DSA defaults; run 'bwstack explain' to resolve them"
        )
    return eff, notes


def dsa_kv_layout(eff: Mapping[str, str | None], *, dsa_model: bool, version: str | None) -> str | None:
    """How a DSA model stores its KV: ``packed_fp8`` (FP8 nope + scales + bf16 rope), ``raw_fp8`` or ``bf16``.

    Packed unless a DSA side is trtllm (read in sglang 0.5.9 wheel model_runner_kv_cache_mixin.py:219-246) or,
    from 0.5.23, both sides are tilelang (kv_cache_configurator.py:3412-3470); the DSA sides are resolved for
    DSA models whatever the attention backend. None when not a DSA model or a side is unknown.
    """
    if not dsa_model:
        return None
    kv = eff.get("kv_cache_dtype")
    if kv == "bfloat16":
        return "bf16"
    if kv != "fp8_e4m3":
        return None
    sides = tuple(eff.get(side) for side in vocabulary.DSA_SIDES)
    if "trtllm" in sides:
        return "raw_fp8"
    parsed = version_or_none(version)
    if sides == ("tilelang", "tilelang") and parsed is not None and parsed >= Version("0.5.23"):
        return "raw_fp8"
    return None if None in sides else "packed_fp8"


def _exact_pin(spec: str) -> str | None:
    head = spec.split(";", maxsplit=1)[0].strip()
    return head[2:].strip() if head.startswith("==") and "," not in head else None


def config_arch(config: Mapping[str, Any]) -> str:
    archs = config.get("architectures") or ["?"]
    return str(archs[0])
