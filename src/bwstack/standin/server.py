"""The stand-in's life cycle: parse argv, resolve backends, "load", serve HTTP, warm up, fail on cue.

It follows ``launch_server`` of the pinned SGLang: arguments are parsed with the version's parser snapshot
(bad argv: argparse's message, exit 2), backends are resolved and logged, weights "load" for
``BWSTACK_STANDIN_LOAD_SECONDS`` with the port still closed, then the port is bound (``/health`` 503), the
server's own greedy warmup ``POST /generate`` runs, and "The server is fired up and ready to roll!" is logged.
Kill-style faults end the way ``kill_process_tree`` does: the process SIGKILLs itself (exit status 137).
SIGTERM stops the stand-in promptly with status 0.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, NoReturn

from bwstack.stack import snapshot_argparse
from bwstack.standin import log, resolve, texts
from bwstack.standin.app import App, Response, ServerState, Site, dumps
from bwstack.standin.env import EnvError, StandinEnv, read_env
from bwstack.standin.models import ModelError, ModelInfo, load_model

WARMUP_TEXT = "The capital city of France is"


#: argparse dest -> ServerArgs field where the two differ (0.5.9 wheel, ServerArgs.from_cli_args)
ARG_DEST_FIELDS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size",
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m bwstack.standin <launch_server argv>``; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        env = read_env()
        snapshot = snapshot_argparse.load_snapshot(env.args_path)
    except (EnvError, snapshot_argparse.SnapshotError) as exc:
        log.write(f"bwstack standin: {exc}")
        return 2
    version_text = env.version_override or snapshot_argparse.sglang_version(snapshot)
    version = resolve.clamp(snapshot_argparse.version_tuple(version_text))
    try:  # SGLang merges --config before parsing (serve.py passes the API key that way)
        args_list = snapshot_argparse.merge_config(args_list)
    except (OSError, ValueError) as exc:
        log.write(f"bwstack standin: --config: {exc}")
        return 2
    namespace = snapshot_argparse.parse_argv(snapshot, args_list, warn=log.deprecation)
    args = vars(namespace)
    # ServerArgs.from_cli_args copies these argparse dests to their ServerArgs fields (0.5.9 wheel,
    # srt/server_args.py L5070-5075; 0.5.23's flags already use the field names)
    for dest, field_name in ARG_DEST_FIELDS.items():
        if dest in args:
            args[field_name] = args.pop(dest)
    for dest in not_server_args(snapshot):
        args.pop(dest, None)
    try:
        model = load_model(str(args.get("model_path")), args.get("json_model_override_args"))
    except ModelError as exc:
        log.write(f"bwstack standin: {exc}")
        return 2
    attention_choices = tuple(snapshot_argparse.choices_for(snapshot, "attention_backend") or ())
    target = resolve.Target(
        version, env.capability, model, attention_choices, dict(os.environ), env.fault == "override"
    )
    try:
        resolution = resolve.resolve(args, target)
    except resolve.ResolutionError as exc:
        log.write(texts.server_args_traceback(version, exc.exc_type, exc.message))
        return 1
    for line in resolution.lines:
        log.log(line.text)
    args.update(resolution.updates)
    _fill_derived(args, version)
    server = Standin(
        env=env,
        version=version,
        version_text=version_text or "unknown",
        args=args,
        model=model,
        target=target,
        argv=args_list,
    )
    return server.run()


def not_server_args(snapshot: Mapping[str, Any]) -> set[str]:
    """Parser dests that are no ServerArgs field, so /server_info lacks them: ``--config`` (read before
    parsing) and deprecated flags that map to nothing (0.5.9's ``--hybrid-kvcache-ratio``)."""
    out = {"config"}
    for flag in snapshot.get("flags") or []:
        deprecated = flag.get("deprecated")
        if isinstance(deprecated, Mapping) and deprecated.get("use") is None:
            out.add(str(flag.get("dest")))
    return out


#: fields ``ServerArgs.__post_init__`` fills when left unset, with the values real SGLang reported in
#: /server_info on the CPU (tests/standin/data/real/<version>/healthy.json); only the types are contract
POST_INIT_DEFAULTS: dict[str, Any] = {
    "mem_fraction_static": 0.828,
    "chunked_prefill_size": 2048,
    "page_size": 1,
    "grammar_backend": "xgrammar",
    "speculative_moe_runner_backend": "auto",
    "expert_distribution_recorder_buffer_size": 1000,
    "cuda_graph_max_bs": 24,
    "cuda_graph_bs": [1, 2, 4, 8, 12, 16, 24],
    "piecewise_cuda_graph_max_tokens": 2048,
    "piecewise_cuda_graph_tokens": [4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96, 112, 128, 192, 256, 512,
                                    1024, 2048],
    "custom_weight_loader": [],
    "mm_process_config": {},
    # 0.5.23
    "enable_tf32_matmul": False,
    "prefill_decode_interval": 0,
    "swa_full_tokens_ratio": 0.8,
    "dcp_comm_backend": "ag_rs",
    "enable_tp_lm_head_all_to_all": False,
    "mamba_full_memory_ratio": 0.9,
    "hicache_ratio": 2.0,
    "mm_enable_dp_encoder": False,
    "mm_feature_transport": "cpu",
    "watermark_config": "<redacted>",  # real 0.5.23 redacts it even when unset
    "cuda_graph_config": {
        "decode": {"backend": "disabled", "max_bs": 32, "bs": [1, 2, 4, 8, 16, 24, 32],
                   "tc_compiler": "eager", "max_context_size": None, "full_prefill_max_req": None,
                   "full_prefill_prefix_chunk_tokens": None, "max_seq_len": None},
        "prefill": {"backend": "disabled", "max_bs": 4096,
                    "bs": [4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096], "tc_compiler": "eager",
                    "max_context_size": None, "full_prefill_max_req": None,
                    "full_prefill_prefix_chunk_tokens": None, "max_seq_len": None},
    },
}  # fmt: skip
#: ServerArgs fields of 0.5.23 that no flag sets (the parser snapshot lacks them), as /server_info shows them
FIELDS_WITHOUT_FLAG_0_5_23: dict[str, Any] = {
    "custom_sigquit_handler": None,
    "grpc_worker_threads": 4,
    "stat_loggers": None,
    "_speculative_draft_quantization_explicitly_set": False,
    "uses_mamba_radix_cache": False,
    "_radix_eviction_policy_explicitly_set": False,
    "_swa_full_tokens_ratio_explicitly_set": False,
    "speculative_boundary_reduction": "rs+rsv",
    "enable_cp_tp_group_sharing": False,
    "watermark_key": "<redacted>",
    "watermark_key_b": "<redacted>",
    "watermark_context_window": 4,
    "watermark_mixing_probability": 0.5,
    "watermark_max_probability": 1.0,
    "watermark_default_enabled": False,
    "watermark_enforce_all": False,
    "aux_hidden_state_capture": None,
}


def _fill_derived(args: dict[str, Any], version: tuple[int, ...] = (0, 5, 23)) -> None:
    """Fields ``ServerArgs.__post_init__`` fills in every version (0.5.9 and 0.5.23 wheels)."""
    if version >= (0, 5, 23):
        for key, value in FIELDS_WITHOUT_FLAG_0_5_23.items():
            args.setdefault(key, value)
    if args.get("served_model_name") is None:
        args["served_model_name"] = args.get("model_path")
    if "tokenizer_path" in args and args.get("tokenizer_path") is None:
        args["tokenizer_path"] = args.get("model_path")
    if "device" in args and args.get("device") is None:
        args["device"] = "cuda"
    for key, value in POST_INIT_DEFAULTS.items():
        if key in args and args[key] is None:
            args[key] = json.loads(json.dumps(value))
    if "random_seed" in args and args["random_seed"] is None:
        args["random_seed"] = int.from_bytes(os.urandom(4), "big") >> 2
    if "sampling_backend" in args and args["sampling_backend"] is None:
        # flashinfer where it is importable (every CUDA image), PyTorch's sampler on the CPU
        args["sampling_backend"] = "pytorch" if args.get("device") == "cpu" else "flashinfer"


class Standin:
    """One stand-in server process."""

    def __init__(
        self,
        *,
        env: StandinEnv,
        version: tuple[int, ...],
        version_text: str,
        args: dict[str, Any],
        model: ModelInfo,
        target: resolve.Target,
        argv: Sequence[str],
    ) -> None:
        self.env = env
        self.version = version
        self.args = args
        self.model = model
        self.target = target
        self.state = ServerState()
        self.pid = os.getpid()
        context_len = int(args.get("context_length") or model.context_length)
        fp8 = str(args.get("kv_cache_dtype")).startswith("fp8")
        self.site = Site(
            version=version,
            version_text=version_text,
            args=args,
            model_path=str(args.get("model_path")),
            served_model_name=str(args.get("served_model_name")),
            architectures=model.architectures,
            model_type=model.model_type,
            context_len=context_len,
            fault=env.fault,
            api_key=args.get("api_key") or None,
            launch_command=_launch_command(argv),
            startup_time=time.time(),
            max_total_num_tokens=628480 if fp8 else 314240,
        )
        self.app = App(self.site, self.state, self.crash)
        self.httpd: ThreadingHTTPServer | None = None
        self._dying = threading.Lock()

    # --- phases ---------------------------------------------------------------------------------------------

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        log.log(f"server_args=ServerArgs({_args_repr(self.args)})")
        if self._load():
            return 0
        if self.env.fault == "oom":
            self.die_at_launch(texts.capture_oom(self.version))
        rejection = resolve.glm_sm12_rejection(self.version, self.args, self.target)
        if self.env.fault == "unsupported_arch" and rejection is not None:
            self.die_at_launch(texts.glm_sm12_value_error(self.version, rejection))
        self._log_capture()
        try:
            self.httpd = self._bind()
        except OSError as exc:
            host, port = self.args.get("host"), self.args.get("port")
            log.write(
                f"[{log.timestamp()}] ERROR:    [Errno {exc.errno}] error while attempting to bind on "
                f"address ({host!r}, {port}): {exc.strerror}"
            )
            return 1
        threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True).start()
        self._announce()
        if self.args.get("skip_server_warmup"):
            self.state.status = "Up"
            log.log(texts.FIRED_UP)
        else:
            threading.Thread(target=self.warmup, name="warmup", daemon=True).start()
        self.state.stopping.wait()
        self.httpd.shutdown()
        self.httpd.server_close()
        return 0

    def _load(self) -> bool:
        """Model-runner start-up lines and the simulated weight load; True when stopped meanwhile."""
        log.log("Init torch distributed begin.", tp=0)
        log.log("Init torch distributed ends. elapsed=0.42 s, mem usage=0.51 GB", tp=0)
        log.log("Load weight begin. avail mem=94.12 GB", tp=0)
        tic = time.perf_counter()
        if self.state.stopping.wait(self.env.load_seconds):
            return True
        log.log(
            f"Load weight end. elapsed={time.perf_counter() - tic:.2f} s, type={self.model.architecture}, "
            "dtype=torch.bfloat16, avail mem=36.20 GB, mem usage=57.92 GB.",
            tp=0,
        )
        log.log(f"Using KV cache dtype: {self.args.get('kv_cache_dtype')}", tp=0)
        log.log("Memory pool end. avail mem=9.35 GB", tp=0)
        return False

    def _log_capture(self) -> None:
        log.log("Capture cuda graph begin. This can take up to several minutes. avail mem=9.10 GB", tp=0)
        log.log("Capture cuda graph end. Time elapsed: 0.51 s. mem usage=0.90 GB. avail mem=8.20 GB.", tp=0)
        log.log(
            f"max_total_num_tokens={self.site.max_total_num_tokens}, "
            f"chunked_prefill_size={self.args.get('chunked_prefill_size') or 8192}, "
            f"max_prefill_tokens={self.args.get('max_prefill_tokens') or 16384}, "
            f"max_running_requests={self.args.get('max_running_requests') or 2048}, "
            f"context_len={self.site.context_len}, available_gpu_mem=8.20 GB",
            tp=0,
        )

    def _bind(self) -> ThreadingHTTPServer:
        host = str(self.args.get("host") or "127.0.0.1")
        port = int(self.args.get("port") or 30000)
        server_class = _AppServer6 if ":" in host else _AppServer
        return server_class((host, port), self.app)

    def _announce(self) -> None:
        host, port = self.args.get("host"), self.args.get("port")
        shown = f"[{host}]" if ":" in str(host) else host
        log.uvicorn(f"Started server process [{self.pid}]")
        log.uvicorn("Waiting for application startup.")
        log.uvicorn("Application startup complete.")
        log.uvicorn(f"Uvicorn running on http://{shown}:{port} (Press CTRL+C to quit)")

    # --- warmup ---------------------------------------------------------------------------------------------

    def warmup(self) -> None:
        """``_execute_server_warmup``: poll /model_info once a second (120 tries), one greedy /generate."""
        headers = {"Content-Type": "application/json"}
        if self.site.api_key:
            headers["Authorization"] = f"Bearer {self.site.api_key}"
        base = self._url()
        last_error = ""
        for _ in range(120):
            if self.state.stopping.wait(1.0):
                return
            status, last_error = _http(base + "/model_info", None, headers, timeout=5)
            if status == 200:
                break
        else:
            self.die_warmup(last_error)
        dp_size = int(self.args.get("dp_size") or 1)
        text: Any = WARMUP_TEXT if dp_size == 1 else [WARMUP_TEXT] * dp_size
        body = {"sampling_params": {"temperature": 0, "max_new_tokens": 8}, "text": text}
        status, error = _http(base + "/generate", body, headers, timeout=600)
        if status != 200:
            self.die_warmup(error)
        self.state.status = "Up"
        log.log(texts.FIRED_UP)

    def _url(self) -> str:
        host = str(self.args.get("host") or "127.0.0.1")
        port = int(self.args.get("port") or 30000)
        if host in ("0.0.0.0", ""):  # noqa: S104 - a bind address mapped to loopback, not a bind
            host = "127.0.0.1"
        if host == "::":
            host = "::1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    # --- dying ----------------------------------------------------------------------------------------------

    def crash(self, event: str) -> None:
        """A model fault reached the GPU: the scheduler dies and the parent kills the tree."""
        self._dying.acquire()  # one report only; concurrent requests wait here until the process is gone
        if event == "nan_sampled" and str(self.args.get("device")) == "cpu":
            self.die_running(texts.multinomial_cpu_error(self.version))
        if event in ("sampled", "nan_sampled"):
            device_line, trace = texts.device_assert_report(self.version)
            log.write(device_line)
            self.die_running(trace)
        if self.env.fault == "assertion":
            self.die_running(texts.kv_store_assertion(self.version))
        self.die_running(texts.tllm_unsupported(self.version))

    def die_at_launch(self, trace: str) -> NoReturn:
        """Scheduler init failed: SIGQUIT to the parent, whose launch-phase handler kills the tree."""
        log.log(f"Scheduler hit an exception: {trace}", tp=0)
        log.log(texts.LAUNCH_SIGQUIT)
        self._kill_tree()

    def die_running(self, trace: str) -> NoReturn:
        """The scheduler died after the first request: the running-phase SIGQUIT handler kills the tree."""
        log.log(f"Scheduler hit an exception: {trace}", tp=0)
        log.log(texts.RUNNING_SIGQUIT)
        self._kill_tree()

    def die_warmup(self, error: str) -> NoReturn:
        log.log(f"Initialization failed. warmup error: {error}")
        self._kill_tree()

    def _kill_tree(self) -> NoReturn:
        line = texts.kill_tree_line(self.version, self.pid)
        if line:
            log.log(line)
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        # PID 1 of a container ignores its own SIGKILL; end with the status a SIGKILL would give
        os._exit(137)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGTERM:
            log.log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.state.stopping.set()


# --- HTTP plumbing ------------------------------------------------------------------------------------------


class _AppServer(ThreadingHTTPServer):
    """A threading HTTP server (IPv4) that hands every request to the stand-in's :class:`App`."""

    address_family = socket.AF_INET
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        super().__init__(address, _Handler)


class _AppServer6(_AppServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    """Adapts http.server to :class:`App`; writes uvicorn-style access lines."""

    server: _AppServer
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_OPTIONS(self) -> None:
        self._serve("OPTIONS")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            response = self.server.app.handle(method, self.path, headers, body)
        except ConnectionAbortedError:
            self.close_connection = True
            return
        self._send(response)
        log.access(f"{self.client_address[0]}:{self.client_address[1]}", method, self.path, response.status)

    def _send(self, response: Response) -> None:
        self.send_response_only(response.status)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        if response.stream is not None:
            self.send_header("content-type", response.content_type)
            self.send_header("connection", "close")
            self.end_headers()
            for chunk in response.stream:
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True
            return
        payload = b""
        if response.text is not None:
            payload = response.text.encode("utf-8")
        elif response.body is not None:
            payload = dumps(response.body)
        self.send_header("content-length", str(len(payload)))
        if payload:
            self.send_header("content-type", response.content_type)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None  # access lines are written by _serve, uvicorn-style


def _http(
    url: str, body: Mapping[str, Any] | None, headers: Mapping[str, str], timeout: float
) -> tuple[int, str]:
    """(status, error text) of one request to ourselves; status 0 when there was no HTTP answer."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    method = "GET" if body is None else "POST"
    # our own http:// URL, built from --host/--port
    request = urllib.request.Request(url, data=data, headers=dict(headers), method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310
            reply.read()
            return int(reply.status), ""
    except urllib.error.HTTPError as exc:
        return int(
            exc.code
        ), f"Traceback (most recent call last):\nAssertionError: {exc.read().decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return 0, f"Traceback (most recent call last):\n{type(exc).__module__}.{type(exc).__name__}: {exc}"


def _args_repr(args: Mapping[str, Any]) -> str:
    shown = {k: ("<redacted>" if k in ("api_key", "admin_api_key") and v else v) for k, v in args.items()}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


def _launch_command(argv: Sequence[str]) -> str:
    """0.5.23 ``launch_command``: the argv joined by spaces (the stand-in hides an API key's value)."""
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append("<redacted>")
            hide_next = False
        elif arg in ("--api-key", "--admin-api-key"):
            shown.append(arg)
            hide_next = True
        elif arg.startswith(("--api-key=", "--admin-api-key=")):
            shown.append(arg.split("=", 1)[0] + "=<redacted>")
        else:
            shown.append(arg)
    return " ".join(shown)
