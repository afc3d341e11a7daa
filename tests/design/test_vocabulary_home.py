"""One home for SGLang's vocabulary: ``healthchecks/vocabulary.py``.

The backend field list, the value/key/flag alias tables, the GPU arch table, the DSA architectures and
SGLang's DSA defaults are each written once, there; everything else imports them. These tests read every
Python file of the product (``src/``, ``healthchecks/``, ``images/``) with ``ast`` and fail when a literal
copy of one of those facts appears anywhere else -- the same guard the pins have (``test_pins.py``) -- and
the detector itself is tested on planted copies so that it can fail.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from healthchecks import vocabulary
from support.stack import ROOT

HOME = ROOT / "healthchecks" / "vocabulary.py"
SCANNED = ("src", "healthchecks", "images")

#: groups of names that mean the same to SGLang: two of one group side by side are an alias table
ALIAS_GROUPS: tuple[frozenset[str], ...] = (
    *(
        frozenset({spelling, value})
        for aliases in vocabulary.FIELD_VALUE_ALIASES.values()
        for spelling, value in aliases.items()
    ),
    *(frozenset(names) for names in vocabulary.KEY_ALIASES.values()),
    *(frozenset(flags) for flags in vocabulary.SEMANTIC_FLAGS.values() if len(flags) > 1),
    frozenset(vocabulary.TP_FLAGS),
)
DSA_BACKEND_VALUES = frozenset(v for row in vocabulary.DSA_DEFAULTS for v in (row.prefill, row.decode))
KV_DTYPES = frozenset(row.kv for row in vocabulary.DSA_DEFAULTS)
#: the product-name parts that tell an arch from nvidia-smi's GPU name
PRODUCTS = frozenset(part for arch in vocabulary.ARCHS.values() for part in arch.products)
#: names only the vocabulary may bind to data of its own (anything else may only refer to its tables)
HOME_ONLY_NAMES = ("DSA_DEFAULTS", "DSA_ARCHS", "DSA_ARCHS_SINCE", "DsaDefault", "KEY_ALIASES")


def product_files() -> list[Path]:
    files = [p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))]
    return [p for p in files if p != HOME and ".venv" not in p.parts]


def _strings(nodes: list[ast.expr | None]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _collections(tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """(line, string constants) of every literal tuple/list/set, of every call's arguments, and of every
    dict (its keys and values, tuple keys included)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            yield node.lineno, _strings(list(node.elts))
        elif isinstance(node, ast.Call):
            yield node.lineno, _strings([*node.args, *(k.value for k in node.keywords)])
        elif isinstance(node, ast.Dict):
            parts: list[ast.expr | None] = [*node.keys, *node.values]
            parts += [e for k in node.keys if isinstance(k, ast.Tuple) for e in k.elts]
            yield node.lineno, _strings(parts)


def copies_in(source: str) -> list[str]:
    """What in this source restates a fact whose home is the vocabulary (empty: nothing)."""
    tree = ast.parse(source)
    found: list[str] = []
    fields = set(vocabulary.BACKEND_FIELDS)
    for line, strings in _collections(tree):
        names = set(strings)
        if len(names & fields) >= len(fields) - 1:
            found.append(f"line {line}: a backend field list {sorted(names & fields)}")
        if set(vocabulary.DSA_SIDES) <= names:
            found.append(f"line {line}: the DSA sides")
        found += [f"line {line}: an alias table {sorted(g)}" for g in ALIAS_GROUPS if g <= names]
        if len(names & set(vocabulary.ARCHS)) >= 2:
            found.append(f"line {line}: an arch list {sorted(names & set(vocabulary.ARCHS))}")
        if len(names & vocabulary.DSA_ARCHS) >= 3:
            found.append(f"line {line}: a DSA architecture list")
        if names & KV_DTYPES and sum(s in DSA_BACKEND_VALUES for s in strings) >= 2:
            found.append(f"line {line}: a DSA default row {strings}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in vocabulary.DEVICE_NAMES.values():
            found.append(f"line {node.lineno}: a device name {node.value!r}")
        if isinstance(node, ast.Constant) and node.value in PRODUCTS:
            found.append(f"line {node.lineno}: a product name {node.value!r}")
        if isinstance(node, ast.ClassDef):
            own = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            if node.name in HOME_ONLY_NAMES or len(own & fields) >= len(fields) - 1:
                found.append(f"line {node.lineno}: class {node.name} restates the vocabulary")
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and not isinstance(
            node.value, (ast.Name, ast.Attribute)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in HOME_ONLY_NAMES:
                    found.append(f"line {node.lineno}: {target.id} defined outside the vocabulary")
    return found


def test_each_fact_of_the_vocabulary_has_one_home() -> None:
    problems = {
        str(path.relative_to(ROOT)): found
        for path in product_files()
        if (found := copies_in(path.read_text(encoding="utf-8")))
    }
    assert problems == {}


def test_the_home_holds_every_fact() -> None:
    """The detector finds each fact in its home (so a rename there cannot make the guard blind)."""
    found = "\n".join(copies_in(HOME.read_text(encoding="utf-8")))
    for fact in ("backend field list", "DSA sides", "alias table", "arch list", "DSA architecture list",
                 "DSA default row", "device name", "class DsaDefault", "DSA_DEFAULTS defined"):  # fmt: skip
        assert fact in found, fact


@pytest.mark.parametrize(
    ("planted", "fact"),
    [
        ('FIELDS = ("attention_backend", "dsa_prefill_backend", "dsa_decode_backend", "kv_cache_dtype",'
         ' "moe_runner_backend")', "backend field list"),
        ('LABELS = {"attention_backend": "a", "dsa_prefill_backend": "b", "dsa_decode_backend": "c",'
         ' "kv_cache_dtype": "d", "moe_runner_backend": "e", "fp4_gemm_backend": "f"}', "backend field list"),
        ("class P:\n" + "".join(f"    {f}: str | None = None\n" for f in vocabulary.BACKEND_FIELDS),
         "restates the vocabulary"),
        ('for side in ("dsa_prefill_backend", "dsa_decode_backend"): pass', "DSA sides"),
        ('SAME = {("attention_backend", "nsa"): "dsa"}', "alias table"),
        ('ok = value in ("dsa", "nsa")', "alias table"),
        ('KV = {"bf16": "bfloat16"}', "alias table"),
        ('KEYS = ("dsa_decode_backend", "nsa_decode_backend")', "alias table"),
        ('ARCH = Literal["sm120", "sm100"]', "arch list"),
        ('CAP = {"sm90": (9, 0), "sm120": (12, 0)}', "arch list"),
        ('NAME = "NVIDIA GB10"', "device name"),
        ('KNOWN = (("RTX 5090", (12, 0)),)', "product name"),
        ('GLM = {"GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM"}',
         "DSA architecture list"),
        ('ROW = ((0, 5, 12), "fp8_e4m3", "trtllm", "trtllm")', "DSA default row"),
        ('DSA_DEFAULTS = ()', "DSA_DEFAULTS defined"),
        ("class DsaDefault:\n    pass\n", "restates the vocabulary"),
    ],
)  # fmt: skip
def test_a_planted_copy_is_found(planted: str, fact: str) -> None:
    assert any(fact in problem for problem in copies_in(planted)), copies_in(planted)


def test_references_to_the_vocabulary_are_no_copies() -> None:
    source = (
        "from healthchecks import vocabulary\n"
        "DSA_DEFAULTS = vocabulary.DSA_DEFAULTS\n"
        'KEYS = ("attention_backend", *vocabulary.DSA_SIDES, "kv_cache_dtype")\n'
        'ok = value in vocabulary.spellings("attention_backend", "dsa")\n'
        'SOURCES = (("sm90", "a.cu"), ("sm120", "b.cu"))\n'
    )
    assert copies_in(source) == []


def test_no_data_file_keeps_a_dsa_table_or_an_arch_enum() -> None:
    assert (
        "dsa_defaults"
        not in (ROOT / "src/bwstack/data/rules.yaml")
        .read_text(encoding="utf-8")
        .split("\nversion: 1\n", 1)[1]
    )
    for schema in sorted((ROOT / "src/bwstack/data/schemas").glob("*.json")):
        text = schema.read_text(encoding="utf-8")
        assert "dsa_default" not in text, schema.name
        for value in _json_lists(json.loads(text)):
            assert len({v for v in value if isinstance(v, str)} & set(vocabulary.ARCHS)) < 2, schema.name


def _json_lists(data: object) -> Iterator[list[object]]:
    if isinstance(data, list):
        yield data
        for item in data:
            yield from _json_lists(item)
    elif isinstance(data, dict):
        for item in data.values():
            yield from _json_lists(item)


def test_the_standin_is_imported_only_by_itself_and_the_sweep() -> None:
    """The real predictor never depends on the fake server: only the stand-in's own modules and the
    sweep's stand-in mode import ``bwstack.standin``."""
    allowed = (ROOT / "src/bwstack/standin", ROOT / "src/bwstack/sweep")
    importers = []
    for path in product_files():
        if path.is_relative_to(allowed[0]) or path.is_relative_to(allowed[1]):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            if any(m == "bwstack.standin" or m.startswith("bwstack.standin.") for m in modules):
                importers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert importers == []
