"""The doctor's host probes: the recorded-host reader, df parsing, and the real probe's error handling."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from bwstack.errors import UserError
from bwstack.host.doctor.probe import (
    FIXTURE_ENV,
    CommandResult,
    FixtureProbe,
    FsStats,
    SystemProbe,
    default_probe,
    df_lookup,
)
from support.stack import TESTS

FIXTURES = TESTS / "fixtures" / "doctor"
HOSTS = ["rtx-pro-6000-8x", "b200-8x", "h200-8x", "no-nvidia"]


@pytest.mark.parametrize("host", HOSTS)
def test_every_recorded_host_loads_and_answers(host: str) -> None:
    probe = FixtureProbe(FIXTURES / host)
    info = probe.run("docker_info", ["docker", "info"])
    assert info.ok and info.stdout.startswith("{")
    assert probe.fs_stats("/dev/shm") is not None
    assert probe.memlock() in {"unlimited", "8192"}
    assert probe.read_text("/proc/cmdline")
    assert probe.count_entries("/sys/kernel/iommu_groups") is not None


def test_fixture_probe_missing_unknown_and_timeout(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("hello\n")
    (tmp_path / "err.txt").write_text("boom\n")
    (tmp_path / "host.toml").write_text(
        """
[commands.gone]
missing = true
[commands.slow]
timeout = true
[commands.bad]
stdout = "out.txt"
stderr = "err.txt"
returncode = 9
"""
    )
    probe = FixtureProbe(tmp_path)
    assert probe.run("gone", ["x"]).problem == "not found"
    assert probe.run("never-recorded", ["y"]).problem == "not found"
    assert probe.run("slow", ["z"], timeout=5).problem == "timed out after 5 s"
    bad = probe.run("bad", ["nvidia-smi"])
    assert (bad.returncode, bad.stdout, bad.stderr, bad.ok) == (9, "hello\n", "boom\n", False)
    assert bad.failure_text() == "nvidia-smi: boom"
    assert (
        probe.fs_stats("/") is None and probe.memlock() is None and probe.read_text("/proc/cmdline") is None
    )


def test_fixture_probe_bad_manifest_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read recorded host"):
        FixtureProbe(tmp_path)
    (tmp_path / "host.toml").write_text("[commands\n")
    with pytest.raises(UserError, match="malformed recorded host"):
        FixtureProbe(tmp_path)
    (tmp_path / "host.toml").write_text('memlock = "gone.txt"\n')
    with pytest.raises(UserError, match="cannot read recorded output"):
        FixtureProbe(tmp_path).memlock()


DF = """Filesystem         1B-blocks         Used     Available Use% Mounted on
tmpfs          540920090624            0  540920090624   0% /dev/shm
/dev/nvme0n1p2 1000000000000 400000000000 600000000000  40% /
/dev/md0      7681139245056 2209452785664 5080960163840  31% /data
garbage line
"""


@pytest.mark.parametrize(
    ("path", "free"),
    [
        ("/dev/shm", 540920090624),
        ("/data/docker", 5080960163840),
        ("/data", 5080960163840),
        ("/database", 600000000000),  # a sibling of /data lives on /
        ("/var/lib/docker", 600000000000),
    ],
)
def test_df_lookup_picks_the_longest_mount(path: str, free: int) -> None:
    stats = df_lookup(DF, path)
    assert stats is not None and stats.free_bytes == free


def test_df_lookup_without_a_match() -> None:
    assert df_lookup("Filesystem 1B-blocks Used Available Use% Mounted on\n", "/x") is None
    assert df_lookup(DF, "relative/path") is None


def test_system_probe_reports_a_missing_binary() -> None:
    result = SystemProbe().run("x", ["bwstack-no-such-binary-anywhere"])
    assert result.problem == "not found" and not result.ok
    assert result.failure_text() == "bwstack-no-such-binary-anywhere: not found"


def test_system_probe_captures_exit_status_and_output() -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = SystemProbe().run("x", [sys.executable, "-c", code])
    assert (result.returncode, result.stdout, result.stderr, result.problem) == (3, "out\n", "err\n", None)


def test_system_probe_times_out() -> None:
    result = SystemProbe().run("x", [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    assert result.problem == "timed out after 0.5 s"


def test_system_probe_files_and_limits(tmp_path: Path) -> None:
    probe = SystemProbe()
    (tmp_path / "a").write_text("text")
    (tmp_path / "b").write_text("")
    assert probe.read_text(str(tmp_path / "a")) == "text"
    assert probe.read_text(str(tmp_path / "missing")) is None
    assert probe.count_entries(str(tmp_path)) == 2
    assert probe.count_entries(str(tmp_path / "missing")) is None
    stats = probe.fs_stats(str(tmp_path))
    assert isinstance(stats, FsStats) and stats.size_bytes >= stats.free_bytes
    assert stats.size_bytes == shutil.disk_usage(tmp_path).total  # the stdlib's own statvfs arithmetic
    assert probe.fs_stats(str(tmp_path / "missing")) is None
    memlock = probe.memlock()
    assert memlock == "unlimited" or (memlock is not None and memlock.isdigit())


def test_default_probe_honours_the_fixture_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FIXTURE_ENV, str(FIXTURES / "b200-8x"))
    assert isinstance(default_probe(), FixtureProbe)
    monkeypatch.delenv(FIXTURE_ENV)
    assert isinstance(default_probe(), SystemProbe)


def test_command_result_failure_text_falls_back_to_status() -> None:
    assert CommandResult(("docker",), returncode=1).failure_text() == "docker: exit status 1"
    assert CommandResult(("docker",), returncode=0).ok
