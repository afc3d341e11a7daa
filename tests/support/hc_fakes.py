"""Test doubles for the healthcheck: an in-process HTTP server speaking SGLang's response shapes.

Shapes follow the pinned wheels (see docs/healthcheck.md): ``/server_info`` is the flat resolved ServerArgs
(``nsa_*`` keys in the 0.5.9 era, ``dsa_*`` plus ``launch_command``/``frontend`` in the 0.5.23 era),
``/generate`` answers ``{"text", "output_ids", "meta_info"}`` with ``output_token_logprobs`` triples
``[logprob, token_id, token_text|null]``, and a NaN logprob arrives as ``null`` (orjson).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[["_Handler"], None]


def server_info(era: str, **overrides: Any) -> dict[str, Any]:
    """A /server_info body of the given SGLang era ("0.5.9" or "0.5.23")."""
    common: dict[str, Any] = {
        "model_path": "nvidia/GLM-5.2-NVFP4",
        "tokenizer_path": "nvidia/GLM-5.2-NVFP4",
        "load_format": "dummy",
        "kv_cache_dtype": "fp8_e4m3",
        "tp_size": 8,
        "attention_backend": "dsa",
        "moe_runner_backend": "flashinfer_cutlass",
        "fp4_gemm_runner_backend": "flashinfer_cutlass",
        "mem_fraction_static": 0.848,
        "api_key": None,
        "watchdog_timeout": 300,
        "max_total_num_tokens": 470016,
        "internal_states": [{"last_gen_throughput": 0.0, "memory_usage": {"weight": 55.2}}],
    }
    if era == "0.5.9":
        common.update(
            {
                "attention_backend": "nsa",
                "nsa_prefill_backend": "flashmla_auto",
                "nsa_decode_backend": "flashmla_kv",
                "cuda_graph_max_bs": 256,
                "enable_nan_detection": False,
                "version": "0.5.9",
            }
        )
    else:
        common.update(
            {
                "dsa_prefill_backend": "flashinfer_sparse_mla",
                "dsa_decode_backend": "flashinfer_sparse_mla",
                "dsa_topk_backend": "sgl-kernel",
                "cuda_graph_max_bs_decode": 256,
                "launch_command": "python3 -m sglang.launch_server --model-path nvidia/GLM-5.2-NVFP4 --tp-size 8",
                "startup_time": 1793000000.0,
                "kv_events": None,
                "frontend": "python",
                "version": "0.5.23",
            }
        )
    common.update(overrides)
    return common


def logprob_triples(values: list[Any]) -> list[list[Any]]:
    """``[[logprob, token_id, None], ...]`` as SGLang returns without return_text_in_logprobs."""
    return [[value, 1000 + i, None] for i, value in enumerate(values)]


def generate_body(
    logprobs: list[Any] | None = None,
    text: str = " Paris. It is also the largest",
    finish: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A /generate answer with the given output logprobs (NaN is None, as orjson writes it)."""
    values = [-0.41, -1.2, -0.03, -2.5, -0.9, -0.2, -1.7, -0.6] if logprobs is None else logprobs
    return {
        "text": text,
        "output_ids": [1000 + i for i in range(len(values))],
        "meta_info": {
            "id": "5f2a1c",
            "finish_reason": finish or {"type": "length", "length": len(values)},
            "prompt_tokens": 7,
            "weight_version": "default",
            "total_retractions": 0,
            "input_token_logprobs": [[None, 151331, None]],
            "output_token_logprobs": logprob_triples(values),
            "completion_tokens": len(values),
            "cached_tokens": 0,
            "e2e_latency": 0.118,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fake = self.server.fake
        fake.requests.append((method, self.path, dict(self.headers), body))
        authorized = self.headers.get("Authorization") == f"Bearer {fake.api_key}"
        if fake.api_key and not self.path.startswith("/health") and not authorized:
            self.send_json(401, {"error": "Unauthorized"})  # SGLang's auth middleware answer
            return
        route = fake.routes.get((method, self.path))
        if route is None:
            self.send_json(404, {"detail": "Not Found"})
            return
        route(self)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, payload: Any) -> None:
        self.send_bytes(status, json.dumps(payload).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeSGLang


class FakeSGLang:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) whose routes the test sets."""

    def __init__(self, era: str = "0.5.23", api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.released = threading.Event()
        self.routes: dict[tuple[str, str], Handler] = {}
        self.set_health(200)
        self.set_json("GET", "/server_info", server_info(era))
        self.set_json("POST", "/generate", generate_body())
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> FakeSGLang:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    # --- route helpers --------------------------------------------------------------------------------

    def set_health(self, status: int) -> None:
        self.routes[("GET", "/health")] = lambda h: h.send_bytes(status, b"", "text/plain")

    def set_json(self, method: str, path: str, payload: Any, status: int = 200) -> None:
        self.routes[(method, path)] = lambda h: h.send_json(status, payload)

    def set_raw(
        self, method: str, path: str, data: bytes, status: int = 200, ctype: str = "application/json"
    ) -> None:
        self.routes[(method, path)] = lambda h: h.send_bytes(status, data, ctype)

    def remove(self, method: str, path: str) -> None:
        self.routes.pop((method, path), None)

    def set_hang(self, method: str, path: str) -> None:
        """Accept the request and never answer (until the test ends)."""

        def hang(h: _Handler) -> None:
            self.released.wait(60)

        self.routes[(method, path)] = hang

    def set_drip(self, method: str, path: str, every: float = 0.3) -> None:
        """Send headers at once, then one body byte every ``every`` seconds."""

        def drip(h: _Handler) -> None:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            try:
                while not self.released.wait(every):
                    h.wfile.write(b" ")
                    h.wfile.flush()
            except OSError:
                return

        self.routes[(method, path)] = drip

    def set_huge(self, method: str, path: str, size: int = 64 * 1024 * 1024) -> None:
        """A fast but enormous body."""

        def huge(h: _Handler) -> None:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(size))
            h.end_headers()
            block = b"[" + b"0," * 32767 + b"0"
            sent = 0
            try:
                while sent < size and not self.released.is_set():
                    h.wfile.write(block)
                    sent += len(block)
            except OSError:
                return

        self.routes[(method, path)] = huge

    def set_reset(self, method: str, path: str) -> None:
        """Close the connection with a TCP reset, without any answer."""

        def reset(h: _Handler) -> None:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            h.close_connection = True

        self.routes[(method, path)] = reset

    def set_garbage(self, method: str, path: str) -> None:
        """Answer with bytes that are not HTTP."""

        def garbage(h: _Handler) -> None:
            h.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
            h.close_connection = True

        self.routes[(method, path)] = garbage

    def wait_requests(self, count: int, timeout: float = 5.0) -> None:
        """Wait until at least ``count`` requests arrived."""
        end = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < end:
            time.sleep(0.01)


def free_port() -> int:
    """A port with nothing listening (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
