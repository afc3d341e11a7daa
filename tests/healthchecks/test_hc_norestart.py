"""No reload storms (issue 34): a failure a restart cannot heal is remembered per launch spec, and a start of
the same spec exits at once (healthchecks/norestart.py), through the real serve wrapper (the fake server stands
in for SGLang; tests/sweep/test_cpu_stack.py proves it with real SGLang under Docker's restart policy)."""

from __future__ import annotations

import json
from pathlib import Path

from test_hc_serve import run_serve

from healthchecks import norestart, verdict

NAN = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"  # the multinomial assert


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"BWSTACK_VERDICTS_DIR": str(tmp_path / "verdicts"), **extra}


def test_a_deterministic_failure_is_not_loaded_again_until_retry(tmp_path: Path) -> None:
    (tmp_path / "verdicts").mkdir()
    dump = tmp_path / "dump.json"
    argv = ["--exit", "1", "--say", NAN, "--dump", str(dump)]
    first = run_serve(tmp_path, *argv, **env(tmp_path))
    assert first.returncode == 1 and dump.exists()
    assert "remembered 'nan' for this launch spec" in first.stdout, first.stdout
    [record] = list((tmp_path / "verdicts").iterdir())
    assert json.loads(record.read_text())["class"] == "nan"
    dump.unlink()

    again = run_serve(tmp_path, *argv, **env(tmp_path))
    assert again.returncode == 3 and not dump.exists(), again.stdout  # the server was not started
    line = again.stdout.strip().splitlines()[-1]
    assert line.startswith("bwstack-serve: not starting: the same launch spec (digest "), line
    assert "ended 'unhealthy: nan: " in line and "'bwstack up --retry PROFILE' (BWSTACK_RETRY=1)" in line
    stopped = verdict.Verdict.from_record(json.loads((tmp_path / "hc-state.json.stopped").read_text()))
    assert stopped is not None and stopped[0].cls == "nan"  # the healthcheck repeats the class

    changed = run_serve(tmp_path, *argv, "--extra-flag", **env(tmp_path))
    assert changed.returncode == 1 and dump.exists()  # another spec, another digest: it starts
    dump.unlink()
    retried = run_serve(tmp_path, *argv, **env(tmp_path, BWSTACK_RETRY="1"))
    assert retried.returncode == 1 and dump.exists()  # cleared: loaded once more (and remembered again)


def test_a_failure_a_restart_may_heal_is_not_remembered(tmp_path: Path) -> None:
    (tmp_path / "verdicts").mkdir()
    dump = tmp_path / "dump.json"
    argv = [
        "--exit",
        "1",
        "--say",
        "torch.distributed.DistBackendError: NCCL error in: ...",
        "--dump",
        str(dump),
    ]
    assert run_serve(tmp_path, *argv, **env(tmp_path)).returncode == 1
    assert list((tmp_path / "verdicts").iterdir()) == []
    dump.unlink()
    assert run_serve(tmp_path, *argv, **env(tmp_path)).returncode == 1 and dump.exists()


def test_the_digest_follows_argv_env_and_pins_not_the_bookkeeping(tmp_path: Path) -> None:
    pins = tmp_path / "versions.json"
    pins.write_text('{"sglang": "0.5.23"}')
    base = norestart.digest(["--tp", "8"], {"SGLANG_X": "1", "BWSTACK_HC_INTERVAL": "10s"}, str(pins))
    assert base == norestart.digest(["--tp", "8"], {"SGLANG_X": "1", "BWSTACK_RETRY": "1"}, str(pins))
    assert base != norestart.digest(["--tp", "4"], {"SGLANG_X": "1"}, str(pins))
    assert base != norestart.digest(["--tp", "8"], {"SGLANG_X": "0"}, str(pins))
    pins.write_text('{"sglang": "0.5.22"}')
    assert base != norestart.digest(["--tp", "8"], {"SGLANG_X": "1"}, str(pins))


def test_nothing_is_written_outside_the_image(tmp_path: Path) -> None:
    """Without the JIT volume at its path (a host, a test) the folder is not made and nothing is written."""
    found = verdict.Verdict("nan", "x")
    assert norestart.remember("k", found, {"BWSTACK_VERDICTS_DIR": str(tmp_path / "no" / "verdicts")}) is None
    assert not (tmp_path / "no").exists()
