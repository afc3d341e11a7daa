"""The committed parser snapshots (images/<variant>/sglang-args.json): regenerated from PyPI wheels, or checked
for form where the variant's SGLang is not on PyPI; and ``lock_args`` on a nightly (image only, never PyPI).

The regeneration tests (marked ``wheels``) build one CPU venv per SGLang version under $BWSTACK_CACHE (reused
across runs and shared with the explain tests) and fail on any drift from the committed file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from bwstack.build.lock import args as lockargs
from bwstack.errors import ExternalError
from bwstack.stack import snapshots
from support.stack import ROOT

VARIANTS = sorted(p.parent.name for p in (ROOT / "images").glob("*/pins.toml"))


def _sglang_version(variant: str) -> str:
    with open(ROOT / "images" / variant / "pins.toml", "rb") as handle:
        return str(tomllib.load(handle)["sglang"]["version"])


ON_PYPI = [v for v in VARIANTS if _sglang_version(v)]
NOT_ON_PYPI = [v for v in VARIANTS if not _sglang_version(v)]


def test_every_variant_has_a_snapshot() -> None:
    assert VARIANTS
    for variant in VARIANTS:
        raw = json.loads((ROOT / "images" / variant / "sglang-args.json").read_text(encoding="utf-8"))
        assert snapshots.snapshot_form_problems(raw) == [], variant


@pytest.mark.wheels
@pytest.mark.parametrize("variant", ON_PYPI)
def test_snapshot_matches_the_pinned_wheel(variant: str, tmp_path: Path) -> None:
    """Regenerate from the pinned wheel in a scratch copy of the variant folder; the text must be identical."""
    scratch = tmp_path / "images" / variant
    shutil.copytree(ROOT / "images" / variant, scratch)
    messages: list[str] = []
    written = lockargs.lock_args(scratch, echo=messages.append)
    committed = (ROOT / "images" / variant / "sglang-args.json").read_text(encoding="utf-8")
    fresh = written.read_text(encoding="utf-8")
    assert fresh == committed, (
        f"images/{variant}/sglang-args.json drifted; run 'bwstack lock --args --variant {variant}'"
    )
    raw = json.loads(fresh)
    assert raw["sglang_version"] == _sglang_version(variant)
    assert raw["provenance"]["method"] == "wheel"


@pytest.mark.parametrize("variant", NOT_ON_PYPI)
def test_snapshot_of_a_nightly_is_a_declared_proxy_or_image_dump(variant: str) -> None:
    raw = json.loads((ROOT / "images" / variant / "sglang-args.json").read_text(encoding="utf-8"))
    prov = raw["provenance"]
    assert prov["method"] in ("proxy-wheel", "image")
    assert prov["source"] and prov["note"] and prov["generated_by"]
    assert len(prov["sha256"].removeprefix("sha256:")) == 64
    firsts = [f["option_strings"][0] for f in raw["flags"]]
    assert firsts == sorted(firsts)
    snap = snapshots.load_snapshot(ROOT / "images" / variant / "sglang-args.json")
    # the nightly's parser generation: --dsa-* spelling, no flashinfer_sparse_mla (the recipe patches it in)
    assert snap.option_for("dsa_decode_backend") == "--dsa-decode-backend"
    assert "flashinfer_sparse_mla" not in (snap.valid_values("dsa_decode_backend") or ())
    if prov["method"] == "proxy-wheel":
        assert snap.is_proxy and "not on PyPI" in prov["note"]


def _nightly_copy(tmp_path: Path, image: str) -> Path:
    source = ROOT / "images" / NOT_ON_PYPI[0]
    scratch = tmp_path / "images" / source.name
    shutil.copytree(source, scratch)
    pins = scratch / "pins.toml"
    text = pins.read_text(encoding="utf-8")
    start = text.index('image = "', text.index("[base]"))
    end = text.index('"', start + len('image = "'))
    pins.write_text(text[:start] + f'image = "{image}' + text[end:], encoding="utf-8")
    return scratch


@pytest.mark.skipif(not NOT_ON_PYPI, reason="no nightly variant")
def test_lock_args_never_overwrites_a_nightly_from_pypi(tmp_path: Path) -> None:
    image = f"bwstack-absent/sglang:{uuid.uuid4().hex[:12]}"
    scratch = _nightly_copy(tmp_path, image)
    before = (scratch / "sglang-args.json").read_text(encoding="utf-8")
    messages: list[str] = []
    with pytest.raises(ExternalError) as err:
        lockargs.lock_args(scratch, echo=messages.append)
    assert "not on this machine" in str(err.value)
    assert (scratch / "sglang-args.json").read_text(encoding="utf-8") == before
    shown = "\n".join(messages)
    assert f"docker run --rm -i --network none --entrypoint python3 {image} - <" in shown
    assert "venv_scripts/dump_args.py" in shown and f"docker pull {image}" in shown


FAKE_SERVER_ARGS = """
import argparse

class DeprecatedAliasStoreAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--dsa-decode-backend", choices=["flashmla_kv", "trtllm"], default=None)
        parser.add_argument("--nsa-decode-backend", dest="dsa_decode_backend", action=DeprecatedAliasStoreAction,
                            new_flag="--dsa-decode-backend", choices=["flashmla_kv", "trtllm"])
        parser.add_argument("--tp-size", type=int, default=1)
        parser.add_argument("--skip-server-warmup", action="store_true")
"""


@pytest.mark.docker
@pytest.mark.skipif(not NOT_ON_PYPI, reason="no nightly variant")
def test_nightly_snapshot_is_dumped_inside_the_image(tmp_path: Path, python_image: str) -> None:
    """lock_args pipes venv_scripts/dump_args.py into the image's own python3; no bwstack, no network inside."""
    base = python_image
    ctx = tmp_path / "ctx"
    (ctx / "pkg" / "sglang" / "srt").mkdir(parents=True)
    (ctx / "pkg" / "sglang" / "__init__.py").write_text("")
    (ctx / "pkg" / "sglang" / "srt" / "__init__.py").write_text("")
    (ctx / "pkg" / "sglang" / "srt" / "server_args.py").write_text(FAKE_SERVER_ARGS)
    (ctx / "pkg" / "sglang-0.0.0.dist-info").mkdir()
    (ctx / "pkg" / "sglang-0.0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.0.0\nRequires-Dist: transformers==5.12.1\n"
        'Requires-Dist: pytest; extra == "test"\n'
    )
    (ctx / "Dockerfile").write_text(
        f"FROM {base}\nCOPY pkg/ /opt/fake/\n"
        'RUN python3 -c "import shutil, site; '
        "shutil.copytree('/opt/fake', site.getsitepackages()[0], dirs_exist_ok=True)\" && rm -rf /opt/fake\n"
    )
    tag = f"bwstack-lockargs-test:{uuid.uuid4().hex[:12]}"
    build = subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], capture_output=True, text=True,
                           check=False)  # fmt: skip
    try:
        assert build.returncode == 0, build.stderr
        scratch = _nightly_copy(tmp_path, tag)
        path = lockargs.lock_args(scratch, echo=lambda _m: None)
        raw = json.loads(path.read_text(encoding="utf-8"))
        image_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                                  text=True, check=True).stdout.strip()  # fmt: skip
        assert raw["provenance"]["method"] == "image" and raw["provenance"]["source"] == tag
        assert raw["provenance"]["sha256"] == image_id
        assert raw["requires_dist"] == {"transformers": "==5.12.1"}
        by_option = {f["option_strings"][0]: f for f in raw["flags"]}
        assert list(by_option) == sorted(by_option)
        assert by_option["--nsa-decode-backend"]["deprecated"] == {"use": "--dsa-decode-backend"}
        assert by_option["--nsa-decode-backend"]["action"] == "store"
        assert by_option["--model-path"]["option_strings"] == ["--model-path", "--model"]
        assert by_option["--tp-size"]["type"] == "int" and by_option["--tp-size"]["default"] == 1
        assert by_option["--skip-server-warmup"]["action"] == "store_true"
        snap = snapshots.load_snapshot(path)
        assert snap.option_for("dsa_decode_backend") == "--dsa-decode-backend"
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


#: the releases between the shipped variants (0.5.9 and 0.5.23) whose parser snapshots are shipped
RELEASES_BETWEEN = ["0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22"]


def test_every_release_between_has_a_shipped_snapshot() -> None:
    shipped = sorted(p.name for p in lockargs.RELEASES_DIR.glob("*.json"))
    assert shipped == [f"sglang-{v}.json" for v in RELEASES_BETWEEN]
    for version in RELEASES_BETWEEN:
        snap = snapshots.load_snapshot(lockargs.release_snapshot_path(version))
        assert snap.sglang_version == version and snap.provenance["method"] == "wheel"
        assert snap.option_for("dsa_decode_backend") == "--dsa-decode-backend"
        assert "flashinfer_sparse_mla" in (snap.valid_values("dsa_decode_backend") or ())


@pytest.mark.wheels
@pytest.mark.parametrize("version", RELEASES_BETWEEN)
def test_release_snapshot_matches_its_wheel(version: str) -> None:
    fresh = lockargs.render_snapshot(
        lockargs.wheel_snapshot(version, f"python -m bwstack.build.lock.args --release {version}")
    )
    committed = lockargs.release_snapshot_path(version).read_text(encoding="utf-8")
    assert fresh == committed, (
        f"{version}'s snapshot drifted; run 'python -m bwstack.build.lock.args --release {version}'"
    )
