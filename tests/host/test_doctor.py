"""``bwstack doctor`` end to end: profiles.yaml + pins.toml -> expectations, recorded hosts -> report and exit status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bwstack.cli import main
from bwstack.errors import UserError
from bwstack.host.doctor.command import expectations, run_doctor
from bwstack.host.doctor.probe import FIXTURE_ENV, FixtureProbe, SystemProbe
from support.stack import ROOT, TESTS

FIXTURES = TESTS / "fixtures" / "doctor"
VARIANT = "v0.5.23-cu130"
CHECK_IDS = [
    "variant",
    "driver",
    "gpu_arch",
    "gpu_count",
    "gpu_memory",
    "kernel_xid",
    "docker_engine",
    "gpu_runtime",
    "compose",
    "shm",
    "memlock",
    "disk",
    "model_cache",
    "secrets",
    "p2p",
    "iommu",
]

PROFILES = f"""\
version: 1
stack:
  variant: {VARIANT}
  compose_features: [start_interval]
model:
  path: nvidia/GLM-5-NVFP4
  config: glm-5
  tp_size: 4
  size_gb: 371
  mem_fraction_static: 0.9
  extra_args: [--disable-custom-all-reduce]
  env:
    NCCL_P2P_LEVEL: SYS
profiles:
  dense:
    attention_backend: flashinfer
  other:
    variant: v0.5.9-cu130
"""


@pytest.fixture()
def doctor_stack_file(tmp_path: Path) -> Path:
    """A small profiles.yaml next to a copy of the repository's pinned variants."""
    for name in (VARIANT, "v0.5.9-cu130"):
        (tmp_path / "images" / name).mkdir(parents=True)
        shutil.copy2(ROOT / "images" / name / "pins.toml", tmp_path / "images" / name / "pins.toml")
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES)
    return path


def doctor(args: list[str], host: str | None) -> tuple[int, str, str]:
    env = {FIXTURE_ENV: str(FIXTURES / host)} if host else {}
    result = CliRunner().invoke(main, ["doctor", *args], env={"COLUMNS": "200", **env})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_expectations_come_from_profiles_and_pins(doctor_stack_file: Path) -> None:
    exp = expectations(doctor_stack_file, None)
    assert (exp.variant, exp.cuda_toolkit, exp.gpu_archs, exp.torch_cuda_arch_list) == (
        VARIANT,
        "13.0",
        ("sm120",),
        "12.0a",
    )
    assert (exp.tp_size, exp.weights_gb, exp.mem_fraction, exp.model) == (4, 371, 0.9, "nvidia/GLM-5-NVFP4")
    assert exp.custom_all_reduce_off and exp.nccl_p2p_level == "SYS" and exp.start_interval
    assert exp.other_variants == ("v0.5.9-cu130",) and exp.source == "profiles.yaml stack.variant"
    picked = expectations(doctor_stack_file, "v0.5.9-cu130")
    assert (
        picked.variant == "v0.5.9-cu130"
        and picked.source == "--variant"
        and picked.other_variants == (VARIANT,)
    )


def test_expectations_without_a_profiles_file(tmp_path: Path) -> None:
    missing = expectations(tmp_path / "profiles.yaml", None)
    assert missing.variant is None and missing.problem is not None and "not found" in missing.problem


def test_flag_only_in_some_profiles_does_not_count(doctor_stack_file: Path) -> None:
    doctor_stack_file.write_text(
        PROFILES.replace("  extra_args: [--disable-custom-all-reduce]\n", "").replace(
            "    attention_backend: flashinfer\n",
            "    attention_backend: flashinfer\n    extra_args: [--disable-custom-all-reduce]\n",
        )
    )
    assert not expectations(doctor_stack_file, None).custom_all_reduce_off


def test_ready_host_exits_0(doctor_stack_file: Path) -> None:
    code, out, _ = doctor(["-f", str(doctor_stack_file)], "rtx-pro-6000-8x")
    assert code == 0, out
    assert "ready (0 fail" in out and "GPU P2P topology" in out and "Traceback" not in out
    assert out.strip().splitlines()[-1].startswith(f"bwstack doctor against {VARIANT}: ready")


def test_wrong_arch_host_exits_1(doctor_stack_file: Path) -> None:
    code, out, _ = doctor(["-f", str(doctor_stack_file)], "b200-8x")
    assert code == 1
    assert "NVIDIA B200 is sm100" in out and "NOT READY" in out


def test_host_without_nvidia_says_so_once_and_exits_1(doctor_stack_file: Path) -> None:
    code, out, err = doctor(["-f", str(doctor_stack_file)], "no-nvidia")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("bwstack doctor: no NVIDIA GPU or driver on this host (nvidia-smi not found")
    assert "NOT READY: no NVIDIA GPU or driver on this host" in out.splitlines()[-1]
    assert "Traceback" not in out + err


def test_json_report(doctor_stack_file: Path) -> None:
    code, out, _ = doctor(["-f", str(doctor_stack_file), "--json"], "h200-8x")
    report = json.loads(out)
    assert code == 1 and report["exit_status"] == 1
    assert (
        report["schema"] == "bwstack.doctor/1" and report["variant"] == VARIANT and report["headline"] is None
    )
    assert [c["id"] for c in report["checks"]] == CHECK_IDS
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert status["driver"] == "fail" and status["gpu_arch"] == "fail" and status["memlock"] == "pass"
    assert sum(report["summary"].values()) == len(CHECK_IDS)
    assert all(set(c) == {"id", "group", "title", "status", "detail", "fix"} for c in report["checks"])


def test_json_report_without_gpu(doctor_stack_file: Path) -> None:
    code, out, _ = doctor(["-f", str(doctor_stack_file), "--json"], "no-nvidia")
    report = json.loads(out)
    assert code == 1 and report["headline"].startswith("no NVIDIA GPU or driver")


def test_variant_option_overrides_the_stack(doctor_stack_file: Path) -> None:
    code, out, _ = doctor(
        ["-f", str(doctor_stack_file), "--variant", "v0.5.9-cu130", "--json"], "rtx-pro-6000-8x"
    )
    assert code == 0 and json.loads(out)["variant"] == "v0.5.9-cu130"


def test_unknown_variant_is_a_usage_error(doctor_stack_file: Path) -> None:
    code, _, err = doctor(["-f", str(doctor_stack_file), "--variant", "v9.9.9-cu999"], "rtx-pro-6000-8x")
    assert code == 2
    assert "unknown variant 'v9.9.9-cu999'" in err and VARIANT in err and len(err.strip().splitlines()) == 1


def test_bad_profiles_file_is_a_usage_error_with_its_line(doctor_stack_file: Path) -> None:
    doctor_stack_file.write_text(PROFILES.replace("tp_size: 4", "tp_size: four"))
    code, _, err = doctor(["-f", str(doctor_stack_file)], "rtx-pro-6000-8x")
    assert code == 2 and f"{doctor_stack_file}:8: model.tp_size:" in err


def test_missing_profiles_file_still_reports_the_host(tmp_path: Path) -> None:
    code, out, _ = doctor(["-f", str(tmp_path / "profiles.yaml"), "--json"], "rtx-pro-6000-8x")
    report = json.loads(out)
    assert code == 0 and report["variant"] is None
    assert report["checks"][0]["status"] == "warn" and "not found" in report["checks"][0]["detail"]


def test_run_doctor_accepts_a_probe_and_echo(doctor_stack_file: Path) -> None:
    lines: list[str] = []

    def echo(message: str = "", nl: bool = True) -> None:
        lines.append(message)

    status = run_doctor(
        doctor_stack_file, variant=None, as_json=False, echo=echo, probe=FixtureProbe(FIXTURES / "h200-8x")
    )
    assert status == 1 and "against v0.5.23-cu130: NOT READY" in lines[-1]


def test_this_machine_without_nvidia_gets_one_clear_report(doctor_stack_file: Path) -> None:
    """The real probe on a machine with no NVIDIA driver (the project's CI): exit 1, the headline, no traceback."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    lines: list[str] = []
    status = run_doctor(
        doctor_stack_file,
        variant=None,
        as_json=False,
        echo=lambda m="", nl=True: lines.append(m),
        probe=SystemProbe(),
    )
    assert status == 1
    assert lines[0].startswith("bwstack doctor: no NVIDIA GPU or driver on this host")


def test_fixture_hook_with_a_bad_folder_is_a_usage_error(doctor_stack_file: Path, tmp_path: Path) -> None:
    code, _, err = doctor(
        ["-f", str(doctor_stack_file)], str(tmp_path / "nowhere")
    )  # an absolute path replaces FIXTURES
    assert code == 2 and "cannot read recorded host" in err


def test_invalid_variant_name_is_a_user_error(doctor_stack_file: Path) -> None:
    with pytest.raises(UserError, match="invalid variant name"):
        expectations(doctor_stack_file, "bad name!")


@pytest.mark.parametrize("host", ["rtx-pro-6000-8x", "h200-8x", "b200-8x"])
def test_table_fits_an_80_column_terminal(doctor_stack_file: Path, host: str) -> None:
    """Every line but the one-line verdict fits 80 columns; each check's title is whole on its own row."""
    env = {FIXTURE_ENV: str(FIXTURES / host)}
    result = CliRunner().invoke(main, ["doctor", "-f", str(doctor_stack_file)], env={"COLUMNS": "80", **env})
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1]), [ln for ln in lines if len(ln) > 80]
    report = json.loads(
        CliRunner().invoke(main, ["doctor", "-f", str(doctor_stack_file), "--json"], env=env).stdout
    )
    for check in report["checks"]:
        row = next(ln for ln in lines if f" {check['status'].upper()} " in ln and check["title"] in ln)
        assert row.startswith(f"  {check['status'].upper()}")
