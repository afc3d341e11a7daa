"""An in-process HTTP server on 127.0.0.1 that streams as SGLang does (``text/event-stream``, chunked as uvicorn
sends it), for the load clients' tests (``bench_client.py``, ``soak_client.py``): the handler base with its
chunk writers, and the server on a random port in a thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StreamHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, quiet; ``chunk`` writes one chunk of a chunked body, ``event`` one ``data:`` event."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")  # as uvicorn streams
        self.end_headers()

    def event(self, data: Any) -> None:
        self.chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that shuts its sockets down at its end resets connections: expected


@contextmanager
def serving(handler: type[StreamHandler]) -> Iterator[int]:
    """``handler`` on a random port of 127.0.0.1, served from a thread; yields the port."""
    httpd = _Quiet(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
