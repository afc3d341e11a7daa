"""Network waits on the host with a wall-clock deadline that holds under trickling.

A socket timeout bounds each read, not the whole answer: a server that sends one byte a second keeps
``urllib`` / ``http.client`` busy for as long as it likes (headers are read line by line). :func:`within` runs
the call in a daemon thread and stops waiting at the deadline; the thread, left to its socket timeouts, ends
on its own and holds nothing the caller uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TooSlow(TimeoutError):
    """The call did not finish within its wall-clock deadline."""


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s result, or its exception, if it finishes within ``seconds``; else :class:`TooSlow`."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=run, name="bwstack-netwait", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TooSlow(f"no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
