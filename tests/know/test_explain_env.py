"""The SGLang venvs (bwstack.know.venvs) without building one: pins, markers, shims, environment, and the one
clear line a missing network gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bwstack.errors import ExternalError, UserError
from bwstack.know import venvs

pytestmark = pytest.mark.usefixtures("scratch_cache")  # an empty $BWSTACK_CACHE per test


def test_cache_root_and_venv_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert venvs.venv_dir("0.5.23") == tmp_path / "cache" / "venvs" / "sglang-0.5.23"
    monkeypatch.delenv("BWSTACK_CACHE")
    assert venvs.cache_root() == Path.home() / ".cache" / "bwstack"


@pytest.mark.parametrize("bad", ["", "latest", "0.5", "0.5.23; rm -rf /", "../0.5.23"])
def test_versions_are_checked(bad: str) -> None:
    with pytest.raises(UserError):
        venvs.venv_dir(bad)


def test_packages_are_exact_pins_with_cpu_torch() -> None:
    for version in ("0.5.9", "0.5.15", "0.5.23", "0.5.24", "0.5.10"):
        packages = venvs.packages_for(version)
        assert packages[0] == "torch==2.13.0+cpu"
        assert all("==" in p for p in packages)
        names = [p.split("==")[0] for p in packages]
        assert len(names) == len(set(names)) and "torchvision" not in names and "sglang" not in names
    assert "transformers==5.2.0" in venvs.packages_for("0.5.9")
    assert "transformers==5.19.0" in venvs.packages_for("0.5.23")
    assert "transformers==5.19.0" in venvs.packages_for("0.5.24")  # newest known line
    assert "transformers==5.2.0" in venvs.packages_for("0.5.10")  # nearest older line
    # 0.5.16 imports xgrammar on the way to its parser (srt/function_call/inkling_detector.py L9); 0.5.15 does not
    assert "xgrammar==0.2.1" in venvs.packages_for("0.5.17")
    assert not any(p.startswith("xgrammar==") for p in venvs.packages_for("0.5.15"))


def _fake_venv(version: str, **marker_changes: object) -> Path:
    root = venvs.venv_dir(version)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("")
    (root / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    marker = {
        **venvs.expected_marker(version),
        "wheel": "w.whl",
        "wheel_sha256": "ab" * 32,
        **marker_changes,
    }
    (root / venvs.MARKER).write_text(json.dumps(marker))
    return root


def test_find_env_needs_a_complete_matching_marker() -> None:
    assert venvs.find_env("0.5.23") is None
    _fake_venv("0.5.23")
    env = venvs.find_env("0.5.23")
    assert env is not None and env.wheel_sha256 == "ab" * 32 and env.python.name == "python"
    _fake_venv("0.5.9", packages=["torch==2.9.1"])  # built with other pins: rebuild
    assert venvs.find_env("0.5.9") is None


def test_outdated_shims_are_refreshed_without_a_rebuild() -> None:
    root = _fake_venv("0.5.23", shims_sha256="old")
    assert venvs.find_env("0.5.23") is not None
    site = root / "lib" / "python3.11" / "site-packages"
    assert (site / "bwstack_venv_shims.py").read_text() == venvs.shim_source()
    assert (site / "bwstack_venv_shims.pth").read_text() == "import bwstack_venv_shims\n"
    assert json.loads((root / venvs.MARKER).read_text())["shims_sha256"] != "old"


def test_clean_env_drops_the_callers_sglang_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_ENABLE_JIT_DEEPGEMM", "0")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("HF_TOKEN", "secret")
    env = venvs.clean_env()
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" not in env and "PYTHONPATH" not in env and "HF_TOKEN" not in env
    assert env["PYTHONHASHSEED"] == "0" and env["HF_HUB_OFFLINE"] == "1"


def test_shim_stands_in_for_torchvision_only_when_missing() -> None:
    code = (
        "import importlib.util, sys; real = importlib.util.find_spec('torchvision') is not None; "
        "import bwstack.know.venv_scripts.venv_shims as s; import torchvision.transforms as T; "
        "print('real' if real else T.InterpolationMode.NEAREST.__name__, "
        "sys.modules['torchvision'].__version__ if not real else '')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[0] != "real":
        assert out == ["Placeholder", "0.0.0+bwstack.placeholder"]


def test_missing_network_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pip cannot reach any index: ExternalError naming what failed, not a traceback."""
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = http://127.0.0.1:9/simple\nretries = 0\ntimeout = 2\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    progress: list[str] = []
    with pytest.raises(ExternalError) as err:
        venvs.ensure_env("0.5.23", progress=progress.append)
    message = str(err.value)
    assert "\n" not in message and message.startswith("downloading sglang==0.5.23 failed")
    assert "PyPI reachable" in message or "No matching distribution" in message or "127.0.0.1" in message
    assert any("building a CPU venv for sglang 0.5.23" in line for line in progress)
    assert venvs.find_env("0.5.23") is None  # half-built: no marker


def test_reason_picks_the_network_line() -> None:
    output = (
        "Collecting x\nWARNING: Retrying ... NewConnectionError\nERROR: Could not find a version that ...\n"
    )
    assert venvs._reason(output).endswith("(is PyPI reachable?)")
    assert venvs._reason("ERROR: boom\n") == "ERROR: boom"
