"""Small facts with one home each (issue 22, item 2), proved by reading every product module's source:

- the serving image's paths live in ``healthchecks/imagelayout.py`` (launch renders them, the Dockerfile creates
  them): no other module spells a string that starts with an in-image folder (``/opt/``, ``/var/lib/bwstack``,
  ``/var/log/bwstack``, ``/var/cache/bwstack``, ``/run/secrets``, ``/tmp/bwstack``, ``/sgl-workspace/``);
- the ``io.bwstack.profile/variant/expect`` labels in ``launch.py`` (every renderer asks the launch spec);
- the duration grammar (a Compose duration's units) in ``healthchecks/common.py``;
- the ``--expect KEY=VALUE`` key normalisation in ``healthchecks/settings.py``;
- a renderer never edits the argv the launch spec built (no ``set_option`` / ``drop_option``);
- the healthcheck's verdict line, state record and the serve wrapper's markers in ``healthchecks/verdict.py``.

Each rule is a pattern that may match in its home and nowhere else; the detector is tested on planted copies.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.stack import ROOT

PRODUCT = [*sorted((ROOT / "src" / "bwstack").rglob("*.py")), *sorted((ROOT / "healthchecks").rglob("*.py"))]

RULES: dict[str, tuple[str, set[str]]] = {
    # a prefix guard: any string that starts with a folder of the image, not only the paths named today
    "in-image paths": (
        r"""["'](/opt/|/var/(lib|log|cache)/bwstack|/run/secrets|/tmp/bwstack|/sgl-workspace/)""",
        {"healthchecks/imagelayout.py"},
    ),
    "profile labels": (r"""["']io\.bwstack\.(profile|variant|expect)["']""", {"src/bwstack/launch.py"}),
    "duration grammar": (r"""ms\|s\|m\|h""", {"healthchecks/common.py"}),
    "--expect key normalisation": (
        r"""\.replace\(["']-["'], ["']_["']\)\.lstrip\(["']_["']\)""",
        {"healthchecks/settings.py"},
    ),
    "argv surgery in a renderer": (r"""def (set|drop)_option\b""", set()),
    "the verdict line and markers": (
        r"""["']((un)?healthy: |bwstack-serve: |server stopped by fail-fast)""",
        {"healthchecks/verdict.py"},
    ),
}


def offenders(files: list[Path], root: Path) -> dict[str, list[str]]:
    """rule -> the files outside its home whose source matches it."""
    found: dict[str, list[str]] = {}
    for rule, (pattern, homes) in RULES.items():
        for path in files:
            rel = path.relative_to(root).as_posix()
            if rel not in homes and re.search(pattern, path.read_text(encoding="utf-8")):
                found.setdefault(rule, []).append(rel)
    return found


def test_each_fact_has_one_home() -> None:
    assert offenders(PRODUCT, ROOT) == {}


def test_each_home_holds_its_fact() -> None:
    for rule, (pattern, homes) in RULES.items():
        for home in homes:
            assert re.search(pattern, (ROOT / home).read_text(encoding="utf-8")), f"{rule}: gone from {home}"


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ('LOG = "/var/log/bwstack/server.log"\n', "in-image paths"),
        ('mount = "/run/secrets/api_key"\n', "in-image paths"),
        ('VERSIONS = "/opt/bwstack/versions.json"\n', "in-image paths"),
        ("venv = '/opt/sglang'\n", "in-image paths"),
        ('path = f"/var/lib/bwstack/{name}"\n', "in-image paths"),
        ('out = f"/tmp/bwstack-bench-{run}.jsonl"\n', "in-image paths"),
        ('root = "/sgl-workspace/sglang/python"\n', "in-image paths"),
        ('labels = {"io.bwstack.profile": name}\n', "profile labels"),
        ('UNITS = re.compile(r"(\\d+)(ms|s|m|h)")\n', "duration grammar"),
        ('key = key.strip().replace("-", "_").lstrip("_")\n', "--expect key normalisation"),
        ("def set_option(argv, option, value):\n    pass\n", "argv surgery in a renderer"),
        ('return 1, f"unhealthy: {cls}: {reason}"\n', "the verdict line and markers"),
        ('print("bwstack-serve: starting")\n', "the verdict line and markers"),
    ],
)
def test_a_planted_copy_is_found(tmp_path: Path, source: str, rule: str) -> None:
    planted = tmp_path / "src" / "bwstack" / "copy.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(source, encoding="utf-8")
    assert offenders([planted], tmp_path) == {rule: ["src/bwstack/copy.py"]}
