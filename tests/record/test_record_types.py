"""The record's type, its schemas and its one reader, on the record files the repository ships: the shipped
evidence (``evidence/merged.json``) and the results.json inside every shipped bundle (``evidence/bundles/``,
``tests/fixtures/bundles/``), each written by a real sweep."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bwstack.errors import UserError
from bwstack.record import read, schema
from support.stack import ROOT

BUNDLES = sorted(
    [*(ROOT / "evidence" / "bundles").glob("*.tar.gz"), *(ROOT / "tests/fixtures/bundles").glob("*.tar.gz")]
)


def _results(bundle: Path) -> bytes:
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("results.json")
        assert member is not None
        return member.read()


def _validator(name: str) -> Draft202012Validator:
    generated = schema.generate(name)
    Draft202012Validator.check_schema(generated)
    return Draft202012Validator(generated)


@pytest.mark.parametrize("name", sorted(schema.SCHEMAS))
def test_the_committed_schema_is_the_one_the_types_generate(name: str) -> None:
    assert schema.committed(name) == schema.text(name), (
        f"run python -m bwstack.record.schema --write ({name})"
    )


def test_the_schema_check_command_agrees() -> None:
    done = subprocess.run([sys.executable, "-m", "bwstack.record.schema"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "")


def test_every_field_has_a_docstring() -> None:
    for name in schema.SCHEMAS:
        for title, definition in schema.generate(name)["$defs"].items():
            assert definition["description"], title
            for field, value in definition["properties"].items():
                assert value.get("description"), f"{title}.{field} has no docstring"


def test_the_shipped_merged_evidence_validates() -> None:
    doc = json.loads((ROOT / "evidence" / "merged.json").read_text(encoding="utf-8"))
    assert list(_validator("merged.schema.json").iter_errors(doc)) == []
    assert doc["cells"], "the shipped evidence has cells"


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_every_shipped_bundles_results_validate_and_read_back(bundle: Path, tmp_path: Path) -> None:
    raw = _results(bundle)
    doc = json.loads(raw)
    assert list(_validator("results.schema.json").iter_errors(doc)) == []
    (tmp_path / "results.json").write_bytes(raw)
    loaded = read.load(tmp_path / "results.json")
    assert loaded == doc and list(loaded["results"]) == list(doc["results"])


def _first_row(bundle: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = json.loads(_results(bundle))
    return doc, doc["results"][next(iter(doc["results"]))]


def test_the_schema_refuses_a_field_the_type_does_not_declare() -> None:
    doc, row = _first_row(BUNDLES[0])
    row["verdikt"] = row["verdict"]
    errors = [e.message for e in _validator("results.schema.json").iter_errors(doc)]
    assert any("verdikt" in message for message in errors), errors


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("verdict", 3, "expected str, got int"),
        ("match", "yes", "expected bool, got str"),
        ("elapsed_s", True, "expected int or float, got bool"),
        ("evidence", [], "expected dict or NoneType, got list"),
        ("fast", None, "expected bool, got NoneType"),  # a field only the type names (no hand-kept list)
        ("scores", "high", "expected dict, got str"),
    ],
)
def test_the_reader_refuses_a_row_field_of_another_type(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    doc, row = _first_row(BUNDLES[0])
    bad = copy.deepcopy(doc)
    bad["results"][row["profile"]][field] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read.load(path)
    assert message in str(caught.value)
    assert f"results.{row['profile']}.{field}" in str(caught.value)
    assert read.load_or_none(path) is None
