"""One request stuck while others flow, on real SGLang 0.5.23 on the CPU (issue 32, item 2).

SGLang exposes no per-request progress over HTTP (0.5.9 and 0.5.23: ``/metrics`` sums over the server,
``/get_load`` counts requests, ``--log-requests`` logs arrival and finish, its ``--watchdog-timeout`` watches
one forward batch and kills the server): only a request bwstack sends itself can be followed token by token.
The long-context probe is that request: streamed, with a per-token deadline of the profile's hang bound.

No kernel livelock can be had on a CPU, so this takes the nearest real case: the server's own admission limit
(``--max-running-requests 1``, a real SGLang flag) keeps the probe in SGLang's waiting queue while a user's
long streamed request flows. The server-wide counters keep moving (the watchdog sees progress, rightly: tokens
are produced), and the probe alone sees its own request get no token: ``hang`` within the bound + 5 s.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.request
from contextlib import suppress
from pathlib import Path

import pytest

from bwstack import launch
from bwstack.stack import loader
from bwstack.tiny import tinymodel
from healthchecks import judging, probehttp, settings, warmup
from support.realsglang import real_server
from support.stack import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]

#: a context long enough for a user's request to outlast the probe's deadline by far (tiny model: ~5 ms/token)
CONTEXT = 32768


def flowing(url: str, tokens: list[float], stop: threading.Event) -> None:
    """A user's streamed request of 30,000 sampled tokens; appends the arrival time of every chunk."""
    body = {"text": "The quick brown fox", "stream": True,
            "sampling_params": {"max_new_tokens": 30000, "ignore_eos": True, "temperature": 0.7}}  # fmt: skip
    request = urllib.request.Request(
        url + "/generate", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with suppress(OSError), urllib.request.urlopen(request, timeout=300) as response:
        while not stop.is_set() and response.readline():
            tokens.append(time.monotonic())


def test_a_request_held_in_the_queue_while_another_flows_is_hang_within_the_bound(tmp_path: Path) -> None:
    shipped = loader.load_stack(ROOT / "profiles.cpu.yaml")
    bound = launch.launch_spec(shipped, "cpu-torch-native").hang_bound.seconds  # the shipped default, 30 s
    model = tinymodel.write(tmp_path / "tiny", tinymodel.TinySpec(max_positions=CONTEXT))
    extra = ["--max-running-requests", "1", "--max-total-tokens", str(CONTEXT + 1024)]
    with real_server(model, tmp_path / "server.log", extra_args=extra) as server:
        tokens: list[float] = []
        stop = threading.Event()
        user = threading.Thread(target=flowing, args=(server.url, tokens, stop), daemon=True)
        user.start()
        try:
            deadline = time.monotonic() + 60
            while len(tokens) < 20 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(tokens) >= 20, server.log_text()[-3000:]
            cfg = settings.Config(url=server.url, timeout=bound + 30, expect={}, expect_text=None, log="",
                                  api_key_file="", mode="full", decode_every=1.0, state_path="",
                                  hang_after=float(bound))  # fmt: skip
            run = probehttp.Run(cfg=cfg, deadline=time.monotonic() + cfg.timeout, api_key=None, state={})
            started = time.monotonic()
            with pytest.raises(judging.Unhealthy) as stuck:
                warmup.score_long(run, 2304)
            waited = time.monotonic() - started
            during = [t for t in tokens if started <= t <= started + waited]
        finally:
            stop.set()
    assert stuck.value.cls == "hang", stuck.value.reason
    assert stuck.value.reason.startswith(
        "long-context probe (2304 tokens): 1 request in flight, no token for "
    )
    assert bound <= waited <= bound + 5, (waited, stuck.value.reason)
    # the other request flowed all along: the server-wide counters moved, only the probe's own request stood
    assert len(during) > 10 * bound, len(during)
    assert max(b - a for a, b in itertools.pairwise(during)) < 5.0
    print(f"\nprobe hang after {waited:.1f} s (bound {bound} s) while the user's request got {len(during)} "
          f"chunks in the same time")  # fmt: skip
