"""``bwstack up``'s view of a start in progress: the container's log, read a little at every poll, through
:class:`healthchecks.phases.PhaseReader` (weights n/N, KV cache, CUDA graphs done/total, JIT compiles, the
first decode, and the seconds spent in each).

Every poll runs ``docker logs --timestamps --since <the newest stamp read>``: Docker's own stamp (RFC 3339,
nanoseconds, fixed width) dates each line on the host's clock, so the current phase counts up to now. The
lines with the newest stamp already read come again (``--since`` includes it) and are skipped.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

from healthchecks import phases

DOCKER_TIMEOUT_S = 30


class StartLog:
    """One container's start, followed by polling its log."""

    def __init__(self, container: str) -> None:
        self.container = container
        self.reader = phases.PhaseReader()
        self.newest = ""  # Docker's stamp of the newest line read
        self._at_newest: set[str] = set()  # the lines read with that stamp

    def poll(self) -> None:
        """Read the lines written since the last poll (a failing ``docker logs`` reads nothing)."""
        argv = ["docker", "logs", "--timestamps"] + (["--since", self.newest] if self.newest else [])
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                [*argv, self.container],
                capture_output=True,
                timeout=DOCKER_TIMEOUT_S,
                check=False,
            )
            if done.returncode == 0:
                self.feed((done.stdout + done.stderr).decode("utf-8", "replace"))

    def feed(self, text: str) -> None:
        """Lines as ``docker logs --timestamps`` prints them (stdout and stderr, merged by their stamps)."""
        stamped = []
        for line in text.split("\n"):  # a tqdm bar's \r updates stay in their line (one stamp)
            stamp = line.split(" ", 1)[0]
            if stamp[:4].isdigit() and "T" in stamp:
                stamped.append((stamp, line))
        for stamp, line in sorted(stamped, key=lambda pair: pair[0]):
            if stamp < self.newest or (stamp == self.newest and line in self._at_newest):
                continue  # --since repeats the lines of the newest stamp already read
            if stamp != self.newest:
                self.newest, self._at_newest = stamp, set()
            self._at_newest.add(line)
            self.reader.feed(line)

    def line(self, now: float | None = None) -> str:
        """The live one-liner (the current phase counted up to ``now``, epoch seconds)."""
        return self.reader.progress(time.time() if now is None else now).line()

    def words(self) -> str:
        """Seconds per phase, for the closing line."""
        return phases.words(self.reader.progress().seconds)
