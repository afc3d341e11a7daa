"""Kernel facts: which GPU archs each kernel library of a variant carries code for (the committed
``images/<variant>/kernel-archs.json``), and the backends of an effective configuration mapped onto them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bwstack.errors import UserError
from bwstack.know import backends
from healthchecks import vocabulary

KERNEL_FACTS_FILE = "kernel-archs.json"
KERNEL_FACTS_SCHEMA = "bwstack.kernel-archs/1"
_OK_KERNEL = ("native", "ptx", "jit")


@dataclass(frozen=True)
class KernelFacts:
    """A variant's committed ``kernel-archs.json``: per kernel library, its verdict on every arch."""

    path: Path
    doc: Mapping[str, Any]

    def verdict(self, key: str, arch: str) -> str | None:
        """native/ptx/jit/missing if audited; ``absent`` when not installed; None when not audited."""
        lib = self.doc.get("libraries", {}).get(key)
        if lib is not None:
            value = lib.get("verdicts", {}).get(arch)
            return str(value) if value is not None else None
        return "absent" if key in self.doc.get("absent", {}) else None

    def reason(self, key: str, arch: str) -> str:
        lib = self.doc.get("libraries", {}).get(key) or {}
        return str(lib.get("reasons", {}).get(arch, ""))

    def label(self) -> str:
        wheels = ", ".join(f"{w['package']} {w['version']}" for w in self.doc.get("wheels", []))
        return f"images/{self.doc.get('variant', '?')}/{KERNEL_FACTS_FILE} (audit of the wheels {wheels})"


def load_kernel_facts(variant_dir: Path) -> KernelFacts | None:
    """The variant's kernel facts, or None when the variant has none committed."""
    path = variant_dir / KERNEL_FACTS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UserError(f"unreadable kernel facts: {exc}", file=path) from None
    if not isinstance(doc, dict) or doc.get("schema") != KERNEL_FACTS_SCHEMA:
        raise UserError(f"not a {KERNEL_FACTS_SCHEMA} document; regenerate it", file=path)
    return KernelFacts(path, doc)


@dataclass(frozen=True)
class KernelUse:
    """One backend the effective configuration runs, and whether its libraries have code for the arch."""

    field: str
    value: str
    status: Literal["ok", "missing", "unknown"]
    missing: tuple[str, ...]
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "value": self.value,
            "status": self.status,
            "missing": list(self.missing),
            "detail": self.detail,
        }


def backends_in_use(eff: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(field, value) of each backend that runs: the common libraries, attention, DSA sides, MoE, FP4 GEMM."""
    used = [("common", "torch"), ("common", "sgl_kernel")]
    attention = eff.get("attention_backend")
    if attention:
        used.append(("attention_backend", attention))
    names = [*vocabulary.DSA_SIDES] if attention == "dsa" else []
    names += ["moe_runner_backend", "fp4_gemm_backend"]
    used += [(name, value) for name in names if (value := eff.get(name))]
    return used


def judge_use(name: str, value: str, facts: KernelFacts | None, arch: str) -> KernelUse | None:
    """The kernel verdict of one backend; None when the backend table does not know the value (``auto``)."""
    use = backends.lookup(name, value)
    if use is None:
        return None
    if facts is None:
        return KernelUse(name, value, "unknown", (), "no kernel facts for this variant")
    missing: list[str] = []
    details: list[str] = []
    unknown = False
    for group in use.needs:
        verdicts = {key: facts.verdict(key, arch) for key in group}
        good = [key for key, v in verdicts.items() if v in _OK_KERNEL]
        bad = [key for key, v in verdicts.items() if v == "missing"]
        if good:
            details.append(f"{good[0]}: {verdicts[good[0]]}")
        elif bad:
            missing += bad
            details += [f"{key}: {facts.reason(key, arch) or 'no kernel'}" for key in bad]
        else:
            unknown = True
            details.append(f"{' or '.join(group)}: not audited")
    status: Literal["ok", "missing", "unknown"] = "missing" if missing else ("unknown" if unknown else "ok")
    return KernelUse(name, value, status, tuple(missing), "; ".join(details))
