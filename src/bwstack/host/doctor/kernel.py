"""The kernel log's NVIDIA Xid events, for ``bwstack doctor``: read where readable, bounded, named.

A GPU that fell off the bus (Xid 79), whose firmware stopped answering (Xid 119, the 2026 H2 GSP hang on
RTX PRO 6000 under sustained load, NVIDIA/open-gpu-kernel-modules#1111) or whose driver asks for a reset or a
reboot (Xid 154) serves nothing until it is recovered, whatever the image (newer drivers also report a GPU
fallen off the bus without an Xid, NVIDIA/NVSentinel#155: read as Xid 79). ``dmesg`` is read first, then
``journalctl -k`` (a user in the ``adm`` or ``systemd-journal`` group may read one and not the other); an
unreadable kernel log is a skipped check with the command to run, never a traceback. Only the last
:data:`MAX_BYTES` of it are parsed. Names and actions from NVIDIA's Xid catalog
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from bwstack.host.doctor.facts import G_GPU, Check
from bwstack.host.doctor.probe import CommandResult, HostProbe

DMESG = ("dmesg",)
JOURNAL_KERNEL = ("journalctl", "-k", "-q", "--no-pager", "-n", "20000")
TIMEOUT = 10.0
MAX_BYTES = 4 * 1024 * 1024

_XID = re.compile(r"NVRM: Xid \((PCI:[0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)")
#: Xid -> what it means (NVIDIA's Xid catalog)
NAMES: dict[int, str] = {
    13: "graphics engine exception (a kernel fault, as an illegal memory access)",
    31: "GPU memory page fault (MMU fault)",
    43: "GPU stopped processing (after a software fault)",
    45: "preemptive cleanup after a fault",
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout: the GPU firmware stopped answering",
    120: "GSP error",
    154: "GPU recovery action changed: the driver asks for a reset or a reboot",
}
#: the events after which the GPU serves nothing until recovered
FATAL = frozenset({79, 119, 154})


@dataclass(frozen=True)
class XidEvent:
    """One Xid number as the kernel log reports it: how often, on which GPUs, the last line."""

    xid: int
    count: int
    buses: tuple[str, ...]
    last: str

    @property
    def name(self) -> str:
        return NAMES.get(self.xid, "see NVIDIA's Xid catalog")


def xid_events(kernel_log: str) -> list[XidEvent]:
    """The Xid events of a kernel log (its last MAX_BYTES), most serious first, then by number."""
    text = kernel_log[-MAX_BYTES:]
    counts: Counter[int] = Counter()
    buses: dict[int, dict[str, None]] = {}
    last: dict[int, str] = {}
    if "Xid" in text:
        for found in _XID.finditer(text):
            xid = int(found.group(2))
            counts[xid] += 1
            buses.setdefault(xid, {})[found.group(1)] = None
            last[xid] = " ".join(found.group(0).split())[:200]
    if not counts[79] and "fallen off the bus" in text:  # newer drivers also print it without an Xid
        lines = [line for line in text.splitlines() if "fallen off the bus" in line]
        counts[79], buses[79], last[79] = len(lines), {"?": None}, " ".join(lines[-1].split())[:200]
    if (
        not counts[119] and "GSP Timeout" in text
    ):  # the driver's banner (kernel_gsp.c) when no Xid line is in view
        lines = [line for line in text.splitlines() if "GSP Timeout" in line]
        counts[119], buses[119], last[119] = len(lines), {"?": None}, " ".join(lines[-1].split())[:200]
    return [
        XidEvent(xid, counts[xid], tuple(buses[xid]), last[xid])
        for xid in sorted(counts, key=lambda x: (x not in FATAL, x))
    ]


def read_kernel_log(probe: HostProbe) -> CommandResult:
    """``dmesg``, else ``journalctl -k`` (bounded): the first that could be read, else dmesg's answer."""
    first = probe.run("dmesg", DMESG, timeout=TIMEOUT)
    if first.ok and first.stdout.strip():
        return first
    journal = probe.run("journal_kernel", JOURNAL_KERNEL, timeout=TIMEOUT)
    return journal if journal.ok and journal.stdout.strip() else first


def check_kernel_log(kernel_log: CommandResult | None) -> Check:
    """Fail on Xid 79/119/154, warn on any other Xid, pass on none; skip when unreadable."""
    title = "kernel log: NVIDIA Xid"
    if kernel_log is None or not kernel_log.ok or not kernel_log.stdout.strip():
        why = "not run" if kernel_log is None else kernel_log.failure_text()
        return Check(
            "kernel_xid",
            G_GPU,
            title,
            "skip",
            f"kernel log not readable ({why})",
            "run `sudo dmesg | grep -i xid` (or `journalctl -k | grep -i xid`) yourself",
        )
    events = xid_events(kernel_log.stdout)
    if not events:
        return Check("kernel_xid", G_GPU, title, "pass", f"no Xid in {kernel_log.argv[0]}'s kernel log")
    detail = "; ".join(
        f"Xid {e.xid} ({e.name}) x{e.count} on {', '.join(e.buses)}; last: {e.last}" for e in events
    )
    fatal = [e.xid for e in events if e.xid in FATAL]
    if fatal:
        return Check(
            "kernel_xid",
            G_GPU,
            title,
            "fail",
            detail,
            "drain the GPU(s) named; reset (nvidia-smi -r) or reboot before serving; Xid 79: check power and "
            "PCIe seating; Xid 119: update the driver (GSP firmware)",
        )
    return Check(
        "kernel_xid",
        G_GPU,
        title,
        "warn",
        detail,
        "past GPU faults: Xid 13/31/43 follow a kernel fault (rerun the workload with "
        "CUDA_LAUNCH_BLOCKING=1); ECC/NVLink Xids are hardware",
    )
