"""The Docker side of one profile: the engine client, the container's log and event streams, the healthcheck
log and the server's ``/server_info``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bwstack.errors import ExternalError
from bwstack.host import netwait
from bwstack.sweep.judge import Probe
from healthchecks import vocabulary

#: /server_info keys per semantic field (docs/design.md), first present wins
EFFECTIVE_KEYS: dict[str, tuple[str, ...]] = {
    key: vocabulary.KEY_ALIASES.get(key, (key,)) for key in vocabulary.REPORT_FIELDS
}


def docker_client() -> Any:
    """A Docker SDK client; ExternalError when no engine answers."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise ExternalError(f"cannot reach the Docker engine: {' '.join(str(exc).split())[:300]}") from None
    return client


def split_lines(buffer: str, chunk: str) -> tuple[list[str], str]:
    """Complete lines (cut at \\n or \\r) of ``buffer + chunk`` and the unfinished rest."""
    text = (buffer + chunk).replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    return parts[:-1], parts[-1]


class Streams:
    """Docker events and one container's log stream, read by daemon threads into one queue."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._closers: list[Callable[[], None]] = []
        self._threads: list[threading.Thread] = []

    def follow_events(self, since: float, labels: Sequence[str]) -> None:
        stream = self.client.events(
            since=int(since), filters={"type": "container", "label": list(labels)}, decode=True
        )
        self._closers.append(stream.close)
        self._spawn(self._pump_events, stream)

    def follow_logs(self, container: Any) -> None:
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        self._closers.append(stream.close)
        self._spawn(self._pump_logs, stream)

    def fetch_later(self, what: str, func: Callable[[], Any]) -> None:
        """Run ``func`` in a thread and queue its result as ``(what, result)``."""
        self._spawn(lambda: self.queue.put((what, func())))

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pump_events(self, stream: Any) -> None:
        with contextlib.suppress(Exception):
            for event in stream:
                self.queue.put(("docker", event))

    def _pump_logs(self, stream: Any) -> None:
        rest = ""
        with contextlib.suppress(Exception):
            for chunk in stream:
                lines, rest = split_lines(rest, chunk.decode("utf-8", errors="replace"))
                for line in lines:
                    self.queue.put(("log", line))
        if rest:
            self.queue.put(("log", rest))
        self.queue.put(("logend", None))

    def close(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                close()
        for thread in self._threads:
            thread.join(timeout=5)


def health_probes(attrs: Mapping[str, Any]) -> list[tuple[str, Probe]]:
    """(key, probe) for every entry of a container's health log (Docker keeps the last five)."""
    health = (attrs.get("State") or {}).get("Health") or {}
    probes = []
    for entry in health.get("Log") or []:
        key = f"{entry.get('Start')}|{entry.get('End')}"
        at = str(entry.get("End") or "")[:19].replace("T", " ")
        probes.append((key, Probe(int(entry.get("ExitCode", -1)), str(entry.get("Output") or ""), at)))
    return probes


def effective_from(info: Mapping[str, Any]) -> dict[str, str]:
    """The semantic backend fields SGLang actually resolved, from a /server_info answer."""
    found: dict[str, str] = {}
    for key, names in EFFECTIVE_KEYS.items():
        for name in names:
            if info.get(name) is not None:
                found[key] = str(info[name])
                break
    return found


def fetch_server_info(
    host: str, port: int, api_key: str | None, timeout: float = 3.0
) -> dict[str, Any] | None:
    """GET /server_info (then /get_server_info) on the published port; None when it does not answer, also
    when its answer trickles past four times ``timeout`` in all (:mod:`bwstack.host.netwait`)."""
    try:
        return netwait.within(4 * timeout, lambda: _server_info(host, port, api_key, timeout))
    except netwait.TooSlow:
        return None


def _server_info(host: str, port: int, api_key: str | None, timeout: float) -> dict[str, Any] | None:
    for path in ("/server_info", "/get_server_info"):
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read(8 * 1024 * 1024)
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()
        if response.status == 404:
            continue
        if response.status != 200:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


def int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def pending_server_info(streams: Streams) -> dict[str, Any] | None:
    """A /server_info answer still waiting in the queue (the verdict came first), or None."""
    while True:
        try:
            kind, payload = streams.queue.get_nowait()
        except queue.Empty:
            return None
        if kind == "server_info" and payload:
            return dict(payload)
