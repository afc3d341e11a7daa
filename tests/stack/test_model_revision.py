"""model.revision: the weights pinned to a commit of the model repo (issue 14 item 6).

The commit reaches SGLang as ``--revision`` (a flag every pinned variant's parser snapshot has), shows in
``bwstack list`` and in the sweep report, and ``validate`` warns while it is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bwstack import launch
from bwstack.stack import loader, snapshot_argparse
from bwstack.sweep import report
from support.stack import edit_yaml

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _pin(profiles: Path, revision: str = COMMIT) -> Path:
    text = profiles.read_text()
    assert "  path: nvidia/GLM-5-NVFP4\n" in text
    pinned = f"  path: nvidia/GLM-5-NVFP4\n  revision: {revision}\n"
    profiles.write_text(text.replace("  path: nvidia/GLM-5-NVFP4\n", pinned))
    return profiles


def _bwstack(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ, COLUMNS="200"),
    )


def test_revision_is_passed_as_revision_and_parsed_by_every_variant(stack_copy: Path) -> None:
    stack = loader.load_stack(_pin(stack_copy))
    for name in stack.profiles:
        argv = launch.launch_spec(stack, name).argv
        assert argv[argv.index("--revision") + 1] == COMMIT
        # the variant's own parser (rebuilt from its snapshot) takes it as the revision
        snapshot = stack.snapshot_for(name).raw
        namespace, error, _ = snapshot_argparse.check_argv(snapshot, argv)
        assert error == "" and namespace is not None, error
        assert namespace.revision == COMMIT


def test_unpinned_warns_and_renders_no_revision(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    assert any("model.revision is not set" in w for w in stack.warnings)
    assert all("--revision" not in launch.launch_spec(stack, n).argv for n in stack.profiles)
    pinned = loader.load_stack(_pin(stack_copy))
    assert not any("model.revision" in w for w in pinned.warnings)


def test_validate_warns_once_then_is_quiet_when_pinned(stack_copy: Path) -> None:
    unpinned = _bwstack("validate", "-f", str(stack_copy), cwd=stack_copy.parent)
    assert unpinned.returncode == 0, unpinned.stderr
    warnings = [ln for ln in unpinned.stderr.splitlines() if "model.revision is not set" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("bwstack: warning: ")
    assert "profiles.yaml:" in warnings[0]
    pinned = _bwstack("validate", "-f", str(_pin(stack_copy)), cwd=stack_copy.parent)
    assert pinned.returncode == 0, pinned.stderr
    assert "model.revision" not in pinned.stderr


def test_revision_extra_arg_is_refused(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["model"]["extra_args"].append("--revision=main"))
    result = _bwstack("validate", "-f", str(stack_copy), cwd=stack_copy.parent)
    assert result.returncode == 2
    assert "--revision is set by bwstack: set model.revision" in result.stderr


def test_list_shows_the_revision(stack_copy: Path) -> None:
    listed = _bwstack("list", "-f", str(_pin(stack_copy)), "--json", cwd=stack_copy.parent)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["model"] == {
        "path": "nvidia/GLM-5-NVFP4",
        "revision": COMMIT,
        "unpinnable": None,
    }
    text = _bwstack("list", "-f", str(stack_copy), cwd=stack_copy.parent)
    assert f"model: nvidia/GLM-5-NVFP4 @ {COMMIT}" in text.stdout


def test_list_of_a_made_tiny_model_asks_for_no_revision(stack_copy: Path) -> None:
    """The CPU stack serves a model bwstack makes (tiny_models): there is no Hub commit to pin, so list does not
    ask for one."""
    cpu = stack_copy.parent / "profiles.cpu.yaml"
    listed = _bwstack("list", "-f", str(cpu), "--json", cwd=stack_copy.parent)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["model"] == {
        "path": "tiny",
        "revision": None,
        "unpinnable": "made by bwstack (tiny_models; no revision to pin)",
    }
    text = _bwstack("list", "-f", str(cpu), cwd=stack_copy.parent)
    assert "model: tiny @ made by bwstack (tiny_models; no revision to pin)" in text.stdout
    assert "set model.revision" not in text.stdout


def test_report_records_the_revision(stack_copy: Path) -> None:
    from bwstack.sweep.plan import Options, make_plan
    from bwstack.sweep.run import document_for

    stack = loader.load_stack(_pin(stack_copy))
    plan = make_plan(stack, [], variant=None, standin=True)
    options = Options(fast=False, standin=True, timeout_s=60.0, keep=False, load_seconds=None)
    doc = document_for(plan, options, None)
    assert doc["stack"]["revision"] == COMMIT
    assert f"- model: nvidia/GLM-5-NVFP4 @ {COMMIT}" in report.render_markdown(doc)
    assert f"weights {COMMIT}" in report.render_html(doc)
