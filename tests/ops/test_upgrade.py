"""``bwstack variant new`` and ``bwstack upgrade`` without the network: the wheel's requirements, the base tag
checks, the new pins.toml, flag successors read from the committed parser snapshots, ``--apply`` and bad input.
The real wheels run in tests/ops/test_upgrade_wheels.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bwstack.build.lock import variant_new
from bwstack.errors import UserError
from bwstack.ops import upgrade
from bwstack.stack import loader, pins, snapshots
from support.stack import ROOT

CLI = [sys.executable, "-m", "bwstack.cli"]
OLD = snapshots.load_snapshot(ROOT / "images" / "v0.5.9-cu130" / "sglang-args.json")
NEW = snapshots.load_snapshot(ROOT / "images" / "v0.5.23-cu130" / "sglang-args.json")


def _wheel(tmp_path: Path, requires: list[str]) -> Path:
    path = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("sglang-9.9.9.dist-info/METADATA", meta)
    return path


def test_exact_requirements_only_unconditional_double_equals(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, ["torch==2.11.0", "flashinfer_python[cu13]==0.6.14", "cuda-python>=13.0",
                              "numpy", "av==16.1.0; sys_platform == \"linux\"", "Sgl_Deep_Gemm==0.1.4.post1",
                              "sglang[test]; extra == \"dev\""])  # fmt: skip
    assert variant_new.exact_requirements(wheel) == {
        "torch": "2.11.0", "flashinfer-python": "0.6.14", "sgl-deep-gemm": "0.1.4.post1",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("lmsysorg/sglang:v0.5.22-cu129", "last cu129 release tag of lmsysorg/sglang is v0.5.19-cu129"),
        ("lmsysorg/sglang:v0.5.22-cu126", "last cu126 release tag of lmsysorg/sglang is v0.5.13.post1-cu126"),
        ("lmsysorg/sglang:v0.5.22-cu128", "publishes cu126, cu129, cu130 only"),
        ("lmsysorg/sglang:v0.5.21-cu130", "holds sglang 0.5.21, not 0.5.22"),
        ("lmsysorg/sglang:latest", "is not a release tag"),
        ("Not An Image", "invalid image reference"),
    ],
)
def test_base_tags_that_cannot_exist(image: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        variant_new.check_base(image, "0.5.22")
    assert caught.value.field == "--base"


def test_base_tags_that_can_exist() -> None:
    for image, version in (("lmsysorg/sglang:v0.5.22-cu130", "0.5.22"),
                           ("lmsysorg/sglang:v0.5.22-cu130-runtime", "0.5.22"),
                           ("lmsysorg/sglang:v0.5.19-cu129", "0.5.19"), ("example.org/mine:anything", "0.5.22")):  # fmt: skip
        assert variant_new.check_base(image, version) == image


def test_base_follows_the_source_tag() -> None:
    source = pins.load_variant(ROOT / "images", "v0.5.23-cu130")
    assert variant_new.base_for(source, "0.5.17") == "lmsysorg/sglang:v0.5.17-cu130"
    nightly = pins.load_variant(ROOT / "images", "nightly-cu13-20260705-754524d8")
    assert variant_new.base_for(nightly, "0.5.17") == "lmsysorg/sglang:v0.5.17-cu130"
    assert variant_new.toolkit_of("lmsysorg/sglang:v0.5.19-cu129", "13.0") == "12.9"


def test_pins_text_is_a_valid_variant(tmp_path: Path) -> None:
    source = pins.load_variant(ROOT / "images", "nightly-cu13-20260705-754524d8")
    wheel = _wheel(tmp_path, ["torch==2.11.0", "transformers==5.12.1", "flashinfer_python[cu13]==0.6.14"])
    release = variant_new.Release("0.5.16", wheel, "0" * 64, variant_new.exact_requirements(wheel))
    text = variant_new.pins_text("v0.5.16-cu130", source, release, "lmsysorg/sglang:v0.5.16-cu130", "13.0")
    (tmp_path / "images" / "v0.5.16-cu130").mkdir(parents=True)
    (tmp_path / "images" / "v0.5.16-cu130" / "pins.toml").write_text(text, encoding="utf-8")
    made = pins.load_variant(tmp_path / "images", "v0.5.16-cu130")
    # the wheel pins flashinfer-python itself, so the nightly's override of it is dropped; flashinfer-cubin
    # (not pinned by the wheel) stays an override, with its version in [python]
    assert made.python == {"torch": "2.11.0", "transformers": "5.12.1", "flashinfer-python": "0.6.14",
                           "flashinfer-cubin": "0.6.13"}  # fmt: skip
    assert made.overrides == ("flashinfer-cubin==0.6.13",)
    assert made.sources.keys() == source.sources.keys() and made.env == source.env
    assert made.sglang_version == "0.5.16" and not made.base_digest
    changes = variant_new._changes("v0.5.16-cu130", source, release, made.base_image, "13.0")
    assert "python.torch: (none) -> 2.11.0" in changes


def test_successor_from_the_snapshots() -> None:
    gone = upgrade.successor("--cuda-graph-max-bs", OLD, NEW)
    assert gone.use is None
    assert "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" in gone.why
    assert upgrade.successor("--no-such-flag", OLD, NEW).why.endswith("no successor is named")


def _side(name: str, snapshot: snapshots.Snapshot) -> upgrade.Side:
    return upgrade.Side(name, name, snapshot.sglang_version, snapshot)


def test_deprecated_flags_are_rewritten_only_when_exact() -> None:
    old, new = _side("a", OLD), _side("b", NEW)
    found = upgrade._argv_findings(
        "p.extra_args", ["--disable-cuda-graph", "--cuda-graph-max-bs", "8"], old, new, {}
    )
    kinds = {f.old: (f.kind, f.rewrite) for f in found}
    # 0.5.23 says "use --cuda-graph-backend-{decode,prefill}=disabled": not one flag, so not rewritten
    assert kinds["--disable-cuda-graph"] == ("deprecated", False)
    assert kinds["--cuda-graph-max-bs"] == ("removed", False)


def test_deprecated_successor_is_applied(tmp_path: Path) -> None:
    raw = dict(NEW.raw)
    flags = [dict(f) for f in raw["flags"]]
    flags.append({**next(f for f in flags if f["option_strings"] == ["--cuda-graph-max-bs-decode"]),
                  "option_strings": ["--cuda-graph-max-bs"], "dest": "cuda_graph_max_bs",
                  "deprecated": {"use": "--cuda-graph-max-bs-decode"}})  # fmt: skip
    path = tmp_path / "sglang-args.json"
    path.write_text(json.dumps({**raw, "flags": flags}), encoding="utf-8")
    middle = snapshots.load_snapshot(path)
    found = upgrade.successor("--cuda-graph-max-bs", middle, NEW)
    assert found.use == "--cuda-graph-max-bs-decode" and "deprecated it for" in found.why


def test_apply_rewrites_only_the_renamed_item(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    finding = upgrade.Finding("renamed", "profiles.legacy-dense-fi-bf16.extra_args[0]", "--cuda-graph-max-bs",
                              "--cuda-graph-max-bs-decode", "test", rewrite=True)  # fmt: skip
    prof = upgrade.ProfileUpgrade("legacy-dense-fi-bf16", (finding,), ())
    report = upgrade.Report(_side("a", OLD), _side("b", NEW), ("sm120",), (prof,), ())
    before = stack_copy.read_text(encoding="utf-8")
    diff = upgrade.apply(stack_copy, report)
    after = stack_copy.read_text(encoding="utf-8")
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-      - --cuda-graph-max-bs", "+      - --cuda-graph-max-bs-decode"]
    assert before.replace("- --cuda-graph-max-bs\n", "- --cuda-graph-max-bs-decode\n", 1) == after
    assert stack.profile("legacy-dense-fi-bf16").extra_args[0] == "--cuda-graph-max-bs"
    assert upgrade.apply(stack_copy, report) == ""  # nothing left to rewrite


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["upgrade", "nope", "v0.5.23-cu130"], "'nope' is neither a variant"),
        (["upgrade", "v0.5.9-cu130", "v0.5.23-cu130", "no-profile"], "unknown profile 'no-profile'"),
        (["upgrade", "v0.5.9-cu130", "v0.5.23-cu130", "--arch", "sm7"], "unknown arch 'sm7'"),
        (["variant", "new", "Bad_Name", "--sglang", "0.5.17"], "invalid variant name 'Bad_Name'"),
        (["variant", "new", "x", "--sglang", "latest"], "not an SGLang release version: 'latest'"),
        (
            ["variant", "new", "x", "--sglang", "0.5.22", "--base", "lmsysorg/sglang:v0.5.22-cu129"],
            "cannot exist",
        ),
        (["variant", "new", "x", "--sglang", "0.5.22", "--from", "v0.5.23-cpu"], "is a CPU variant"),
        (["variant", "new", "v0.5.9-cu130", "--sglang", "0.5.22"], "variant v0.5.9-cu130 exists already"),
    ],
)
def test_bad_input_is_one_line_exit_2(stack_copy: Path, argv: list[str], message: str) -> None:
    done = subprocess.run([*CLI, "-f", str(stack_copy), *argv], capture_output=True, text=True, timeout=60,
                          cwd=stack_copy.parent)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not (stack_copy.parent / "images" / "x").exists()


def test_an_equal_or_older_sglang_is_said_not_passed_over() -> None:
    """Issue 37: upgrade between equal versions, or to an older one, says so (a note in the report)."""
    stack = loader.load_stack(ROOT / "profiles.yaml")
    old, new = upgrade.side(stack, "v0.5.9-cu130"), upgrade.side(stack, "v0.5.23-cu130")
    assert upgrade.direction_notes(old, new) == []
    same = upgrade.direction_notes(new, new)
    assert len(same) == 1 and "same SGLang 0.5.23" in same[0]
    down = upgrade.direction_notes(new, old)
    assert len(down) == 1 and down[0].startswith("a downgrade: v0.5.9-cu130 (sglang 0.5.9)")


def test_measure_leaves_out_what_the_older_sglang_does_not_know_and_a_gpu_variant_is_refused_on_cpu() -> None:
    """``upgrade --measure`` starts the CPU profile on both variants: the stack's extra args are 0.5.23's
    spelling, so on v0.5.9-cpu the options its parser lacks are left out (with their values), named; and a
    side no CPU variant pins is one line naming the CPU variants."""
    from bwstack import launch
    from bwstack.ops import upgrade_measure

    stack = loader.load_stack(ROOT / "profiles.cpu.yaml")
    argv = launch.launch_spec(stack, "cpu-torch-native", "v0.5.9-cpu").argv
    kept, left = upgrade_measure.argv_for(argv, stack.snapshot("v0.5.9-cpu"))
    assert left == ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
    assert kept == [a for a in argv if a not in left] and "--sleep-on-idle" in kept
    new = launch.launch_spec(stack, "cpu-torch-native", "v0.5.23-cpu").argv
    assert upgrade_measure.argv_for(new, stack.snapshot("v0.5.23-cpu")) == (new, [])
    assert upgrade_measure.cpu_variant(stack, "sglang-0.5.23", "0.5.23") == "v0.5.23-cpu"
    with pytest.raises(
        UserError, match=r"--measure on a CPU stack runs CPU variants; v0.5.23-cu130 is not one"
    ) as refused:
        upgrade_measure.cpu_variant(stack, "v0.5.23-cu130", "9.9.9")
    # it names where GPU variants are measured
    assert "bwstack upgrade OLD NEW --measure -f profiles.yaml" in str(refused.value)
    assert upgrade_measure.measured_profile(stack, []) == "cpu-torch-native"
