"""``bwstack doctor`` reads the kernel log for NVIDIA Xid events (src/bwstack/host/doctor/kernel.py).

The kernel text is real: the dmesg excerpts of the corpus (akash-network/support#244, leptonai/gpud#46,
NVIDIA/NVSentinel#155, pasted in public issues), read through the real parser and the real recorded-host probe.
"""

from __future__ import annotations

from pathlib import Path

from bwstack.host.doctor import kernel
from bwstack.host.doctor.probe import CommandResult, FixtureProbe
from support.stack import TESTS

CORPUS = TESTS / "healthchecks" / "corpus"


def _corpus(prefix: str) -> str:
    (path,) = CORPUS.glob(f"{prefix}_*.log")
    return path.read_text(encoding="utf-8")


def test_xid_events_are_counted_named_and_ordered_most_serious_first() -> None:
    events = kernel.xid_events(_corpus("akash244") + _corpus("gpud46") + _corpus("nvsentinel155"))
    assert events[0].xid == 79 and events[0].name == "GPU has fallen off the bus"
    by_xid = {e.xid: e for e in events}
    assert {13, 31, 43, 79, 94, 109} <= set(by_xid)
    assert by_xid[43].buses == ("PCI:0000:00:05",) and "pt_main_thread" in by_xid[43].last
    assert by_xid[31].name == "GPU memory page fault (MMU fault)"


def test_only_the_end_of_a_huge_kernel_log_is_parsed() -> None:
    old = "[    1.000000] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
    assert kernel.xid_events(old + "x" * kernel.MAX_BYTES) == []


def _recorded(tmp_path: Path, manifest: str, files: dict[str, str]) -> FixtureProbe:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "host.toml").write_text(manifest, encoding="utf-8")
    return FixtureProbe(tmp_path)


def test_journalctl_is_read_when_dmesg_is_not_permitted(tmp_path: Path) -> None:
    probe = _recorded(
        tmp_path,
        '[commands.dmesg]\nreturncode = 1\nstderr = "denied.txt"\n'
        '[commands.journal_kernel]\nstdout = "journal.txt"\n',
        {
            "denied.txt": "dmesg: read kernel buffer failed: Operation not permitted\n",
            "journal.txt": _corpus("gpud46"),
        },
    )
    read = kernel.read_kernel_log(probe)
    assert read.argv[0] == "journalctl"
    check = kernel.check_kernel_log(read)
    assert check.status == "warn" and "Xid 13" in check.detail and check.fix


def test_an_unreadable_kernel_log_is_a_skip_with_the_command_to_run(tmp_path: Path) -> None:
    probe = _recorded(
        tmp_path,
        '[commands.dmesg]\nreturncode = 1\nstderr = "denied.txt"\n[commands.journal_kernel]\ntimeout = true\n',
        {"denied.txt": "dmesg: read kernel buffer failed: Operation not permitted\n"},
    )
    check = kernel.check_kernel_log(kernel.read_kernel_log(probe))
    assert check.status == "skip" and "Operation not permitted" in check.detail and "sudo dmesg" in check.fix
    assert kernel.check_kernel_log(None).status == "skip"
    empty = kernel.check_kernel_log(CommandResult(("dmesg",), returncode=0, stdout=""))
    assert empty.status == "skip"


def test_a_gsp_timeout_without_an_xid_line_fails_as_xid_119() -> None:
    """NVIDIA/open-gpu-kernel-modules#1230: the GSP time-out banner, no Xid number in the excerpt."""
    log = _corpus("ogkm1230")
    assert "Xid" not in log
    check = kernel.check_kernel_log(CommandResult(("dmesg",), returncode=0, stdout=log))
    assert check.status == "fail" and "Xid 119 (GSP RPC timeout" in check.detail


def test_an_xid_119_line_fails_and_is_named() -> None:
    """leptonai/gpud#500: a dmesg scan with Xid 119 (GSP RPC timeout) lines."""
    check = kernel.check_kernel_log(CommandResult(("dmesg",), returncode=0, stdout=_corpus("gpud500")))
    assert (
        check.status == "fail"
        and "Xid 119 (GSP RPC timeout: the GPU firmware stopped answering)" in check.detail
    )
    assert "PCI:" in check.detail and "Xid 119: update the driver" in check.fix
