"""Busy and stuck on real SGLang 0.5.23 (CPU host venv): the serve wrapper, the soak and the healthcheck.

The image's own entrypoint (``healthchecks/serve.py``) runs the real server from the host venv of the
v0.5.23-cpu closure (support/realserve.py); ``healthchecks/soak_client.py`` loads it; the real scheduler
process is frozen with SIGSTOP in the middle of the soak. The soak must say ``hang`` within the stall bound
+ 5 s, the healthcheck ``unhealthy: hang``, and fail-fast must stop the server; an idle and a
busy-progressing server stay healthy under the same settings.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bwstack.nogpu import tinymodel
from support.realserve import hold, result, served, soak

pytestmark = [pytest.mark.real, pytest.mark.slow]

STALL_AFTER = 10.0


@pytest.fixture(scope="module")
def hang_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinymodel.write(tmp_path_factory.mktemp("m") / "tiny", tinymodel.TinySpec())


def test_idle_and_progressing_stay_healthy_a_frozen_scheduler_is_hang(
    hang_model: Path, tmp_path: Path
) -> None:
    with served(hang_model, tmp_path, STALL_AFTER) as server:
        time.sleep(STALL_AFTER + 2)  # idle past the stall bound
        first = server.healthcheck()  # the first pass is full: decode, passage, long context (capped at 2048)
        assert first.startswith("healthy"), (first, server.log_text()[-2000:])
        assert "long context (2040 tokens) score" in first, first
        busy = result(soak(server, 20.0))  # busy and progressing, longer than the stall bound
        assert busy["verdict"] == "ok", busy
        assert busy["requests"] and busy["tokens"] and busy["stalls"] == 0, busy
        line = server.healthcheck()
        assert line.startswith("healthy"), line
        assert server.proc.poll() is None

        running = soak(server, 120.0)
        hold(server.url)  # a user's request that stays in flight after the soak has closed its own
        time.sleep(4)
        scheduler = server.scheduler_pid()
        os.kill(scheduler, signal.SIGSTOP)
        frozen = time.monotonic()
        stuck = result(running)
        seen = time.monotonic() - frozen
        assert stuck["verdict"] == "hang", stuck
        assert seen <= STALL_AFTER + 5, (seen, stuck)
        assert "requests in flight, no token for" in str(stuck["reason"])
        # the wrapper's watchdog (SGLang's /metrics counters) stops the server; the healthcheck names it
        code = server.proc.wait(timeout=STALL_AFTER + 60)
        stopped = time.monotonic() - frozen
        assert code == 3, server.log_text()[-3000:]
        log = server.log_text()
        assert "fail-fast: the hang watchdog reported 'unhealthy: hang:" in log, log[-3000:]
        line = server.healthcheck()
        assert line.startswith("unhealthy: hang: "), line
        assert "requests in flight, no token for" in line
        print(
            f"\nsoak hang after {seen:.1f} s, server stopped after {stopped:.1f} s (stall bound {STALL_AFTER:g} s)"
        )
