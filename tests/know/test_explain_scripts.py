"""The scripts that run inside SGLang's venv or image (foreign/dump_args.py, foreign/resolve.py), on a stand-in parser: they
must turn any argparse action into the snapshot form and spell requested values the way each parser does."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bwstack.build.lock import args as lockargs
from bwstack.know import explain
from bwstack.know.venv_scripts import dump_args as _dump_args
from bwstack.know.venv_scripts import resolve as _resolve


class DeprecatedAliasStoreAction(argparse.Action):
    """Same shape as SGLang 0.5.15+'s action of that name."""

    def __init__(
        self, option_strings: list[str], dest: str, new_flag: str | None = None, **kwargs: Any
    ) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)


class DeprecatedAction(argparse.Action):
    def __init__(
        self, option_strings: list[str], dest: str, error_message: str | None = None, **kw: Any
    ) -> None:
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        parser.error(self.error_message)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", "--model", type=str, required=True, help="The path.")
    p.add_argument("--sampling-backend", choices={"pytorch", "flashinfer", "ascend"}, default=None)
    p.add_argument("--dsa-decode-backend", choices=["flashmla_kv", "trtllm"])
    p.add_argument("--nsa-decode-backend", dest="dsa_decode_backend", action=DeprecatedAliasStoreAction,
                   new_flag="--dsa-decode-backend", choices=["flashmla_kv", "trtllm"])  # fmt: skip
    p.add_argument("--enable-nan-detection", action=DeprecatedAction, error_message="use the env var")
    p.add_argument("--json-model-override-args", type=json.loads, default="{}")
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--flag", action=argparse.BooleanOptionalAction)
    p.add_argument("--lora-paths", nargs="*", default=None)
    p.add_argument("--obj", default=object())
    p.add_argument("--mem", type=float, default=float("nan"))
    return p


def _flags() -> dict[str, dict[str, Any]]:
    return {a.option_strings[0]: _dump_args.describe(a) for a in _parser()._actions}


def test_describe_plain_actions() -> None:
    flags = _flags()
    assert flags["--model-path"] == {
        "dest": "model_path",
        "option_strings": ["--model-path", "--model"],
        "action": "store",
        "nargs": None,
        "const": None,
        "type": "str",
        "choices": None,
        "default": None,
        "required": True,
        "help": "The path.",
        "deprecated": None,
    }
    assert flags["-h"]["action"] == "help"
    assert flags["--tp-size"]["type"] == "int" and flags["--tp-size"]["default"] == 1
    assert flags["--json-model-override-args"]["type"] == "json"
    assert flags["--flag"]["action"] == "BooleanOptionalAction"
    assert flags["--flag"]["option_strings"] == ["--flag", "--no-flag"]
    assert flags["--lora-paths"]["nargs"] == "*"
    assert flags["--obj"]["default"].startswith("<object object")  # not JSON: its repr
    assert flags["--mem"]["default"] == "nan"
    json.dumps(flags, allow_nan=False)


def test_describe_sorts_set_choices_and_marks_deprecations() -> None:
    flags = _flags()
    assert flags["--sampling-backend"]["choices"] == ["ascend", "flashinfer", "pytorch"]
    alias = flags["--nsa-decode-backend"]
    assert alias["action"] == "store" and alias["deprecated"] == {"use": "--dsa-decode-backend"}
    assert alias["dest"] == "dsa_decode_backend"
    gone = flags["--enable-nan-detection"]
    assert gone["action"] == "DeprecatedAction"
    assert gone["deprecated"] == {"use": None, "error": "use the env var"}


def test_requires_dist_drops_extras_keeps_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        "transformers==5.19.0",
        "flashinfer_python[cu13]==0.7.2",
        'av==16.1.0; sys_platform == "linux" and platform_machine == "aarch64"',
        "aiohttp",
        "torch (==2.9.1)",
        'pytest; extra == "test"',
    ]
    monkeypatch.setattr(_dump_args.importlib.metadata, "requires", lambda _name: lines)
    assert _dump_args.requires_dist("sglang") == {
        "aiohttp": "",
        "av": '==16.1.0; sys_platform == "linux" and platform_machine == "aarch64"',
        "flashinfer_python": "==0.7.2",
        "torch": "==2.9.1",
        "transformers": "==5.19.0",
    }


def test_snapshot_document_is_sorted_and_stable(tmp_path: Path) -> None:
    dump = {"sglang_version": "9.9.9", "requires_dist": {"a": "==1"}, "flags": list(_flags().values())[::-1]}
    prov = {"method": "wheel", "source": "s", "sha256": "0" * 64, "generated_by": "g", "note": "n"}
    snap = lockargs.snapshot_from_dump(dump, provenance=prov)
    assert list(snap) == ["schema", "sglang_version", "provenance", "requires_dist", "flags"]
    firsts = [f["option_strings"][0] for f in snap["flags"]]
    assert firsts == sorted(firsts)
    path = lockargs.write_snapshot(tmp_path / "sglang-args.json", snap)
    assert path.read_text() == lockargs.render_snapshot(snap) and path.read_text().endswith("}\n")
    assert [p.name for p in tmp_path.iterdir()] == ["sglang-args.json"]  # no temp file left


def test_dump_script_runs_standalone_against_a_fake_sglang(tmp_path: Path) -> None:
    """What an image gets: the script on stdin of a bare python3, SGLang importable, bwstack not."""
    pkg = tmp_path / "site" / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(
        "import argparse\nprint('noise on stdout at import')\n"
        "class ServerArgs:\n    @staticmethod\n    def add_cli_args(p):\n"
        "        p.add_argument('--zeta', type=int, default=3)\n        p.add_argument('--alpha', action='store_true')\n"
    )
    dist = tmp_path / "site" / "sglang-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 1.2.3\nRequires-Dist: torch==2.0\n"
    )
    script = Path(_dump_args.__file__).read_text()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([sys.executable, "-"], input=script, env=env, cwd=tmp_path, capture_output=True,
                          text=True, check=True)  # fmt: skip
    data = json.loads(done.stdout)
    assert data["sglang_version"] == "1.2.3" and data["requires_dist"] == {"torch": "==2.0"}
    assert [f["option_strings"][0] for f in data["flags"]] == ["--alpha", "--zeta", "-h"]
    assert "noise on stdout" in done.stderr


def _old_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path")
    p.add_argument("--attention-backend", choices=["triton", "flashinfer", "nsa"])
    p.add_argument("--nsa-prefill-backend", choices=["flashmla_auto", "trtllm"])
    p.add_argument("--nsa-decode-backend", choices=["flashmla_kv", "trtllm"])
    p.add_argument("--kv-cache-dtype", choices=["auto", "bf16", "fp8_e4m3"])
    return p


def test_resolver_spells_flags_like_the_parser_in_front_of_it() -> None:
    request = {
        "model_dir": "/m",
        "requested": {"attention_backend": "dsa", "dsa_decode_backend": "trtllm", "kv_cache_dtype": None},
        "extra_argv": ["--tp-size", "8"],
        **explain._flag_tables(),  # the tables the host sends with every request
    }
    argv = _resolve.build_argv(_old_parser(), request)
    assert argv == ["--model-path", "/m", "--attention-backend", "nsa", "--nsa-decode-backend", "trtllm",
                    "--tp-size", "8"]  # fmt: skip
    request["requested"] = {"moe_runner_backend": "triton"}
    with pytest.raises(_resolve.ArgvRefused):
        _resolve.build_argv(_old_parser(), request)


def test_resolver_reports_argparse_refusals_instead_of_exiting() -> None:
    class Mod:
        class ServerArgs:
            @staticmethod
            def add_cli_args(p: argparse.ArgumentParser) -> None:
                for action in _old_parser()._actions[1:]:
                    p._add_action(action)

    with pytest.raises(_resolve.ArgvRefused) as err:
        _resolve.parse(Mod, ["--model-path", "/m", "--nsa-decode-backend", "flashinfer_sparse_mla"])
    assert "invalid choice" in str(err.value)
    assert _resolve.parse(Mod, ["--model-path", "/m"]).model_path == "/m"
