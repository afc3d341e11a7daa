"""The stand-in's HTTP API: SGLang's routes, auth rules, health semantics and response bodies.

Routes and shapes follow ``srt/entrypoints/http_server.py`` of the pinned version (sglang-by-version.md §5):
``/health`` and ``/health_generate`` answer 503 until the server warmup succeeded, ``/ready`` exists from
0.5.23, ``--api-key`` guards everything except OPTIONS, ``/health*``, ``/metrics*`` (and ``/ready*`` on
0.5.23) with 401 ``{"error": "Unauthorized"}``. Faults that hit the model (NaN, device assert, kernel errors,
hang) are injected here, on the request path that would reach the GPU.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bwstack.standin import generate, log, texts

Version = tuple[int, ...]
JSONResponse = tuple[int, Any]


@dataclass
class Response:
    """What the HTTP layer sends: a JSON body, an empty body, a text body or a server-sent-event stream."""

    status: int
    body: Any = None
    text: str | None = None
    stream: Iterator[bytes] | None = None
    content_type: str = "application/json"


def dumps(payload: Any) -> bytes:
    """Compact JSON like orjson/FastAPI; NaN never reaches here (NaN logprobs are already ``None``)."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass
class ServerState:
    """Server status (SGLang's ``ServerStatus``) and the hooks faults need."""

    status: str = "Starting"  # Starting | Up | UnHealthy
    stopping: threading.Event = field(default_factory=threading.Event)
    forwards: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_forward(self) -> int:
        with self.lock:
            self.forwards += 1
            return self.forwards


@dataclass(frozen=True)
class Site:
    """Everything the routes report: resolved server args, model facts, version, fault."""

    version: Version
    version_text: str
    args: Mapping[str, Any]
    model_path: str
    served_model_name: str
    architectures: list[str]
    model_type: str | None
    context_len: int
    fault: str
    api_key: str | None
    launch_command: str
    startup_time: float
    max_total_num_tokens: int


#: called with the fault event ("first_forward", "sampled" or "nan_sampled"); does not return
#: the ``garbage`` fault's logprob: a uniform distribution over GLM-5's vocabulary (154880 tokens)
GARBAGE_LOGPROB = -round(math.log(154880), 6)

Crash = Callable[[str], None]


def gumbel_sampling(version: Version) -> bool:
    """SGLang 0.5.23 samples by Gumbel argmax (``SGLANG_OPT_USE_GUMBEL_SAMPLE`` on): NaN logits give id 0 and
    null logprobs, greedy or sampled, and the server stays up. 0.5.9 samples with torch.multinomial (a NaN
    sampled decode kills the scheduler) and writes its response with ``json.dumps`` (a NaN logprob is a 500).
    Both as real SGLang did on the CPU (tests/standin/data/real/<version>/nan-lm-head.json).
    """
    return version >= (0, 5, 23)


class App:
    """Routes requests to SGLang-shaped answers."""

    def __init__(self, site: Site, state: ServerState, crash: Crash) -> None:
        self.site = site
        self.state = state
        self.crash = crash
        self.routes: dict[tuple[str, str], Callable[[Mapping[str, Any]], Response]] = {
            ("GET", "/health"): self.health,
            ("GET", "/health_generate"): self.health,
            ("GET", "/model_info"): self.model_info,
            ("GET", "/get_model_info"): self.get_model_info,
            ("GET", "/server_info"): self.server_info,
            ("GET", "/get_server_info"): self.get_server_info,
            ("GET", "/v1/models"): self.models,
            ("POST", "/generate"): self.generate,
            ("PUT", "/generate"): self.generate,
            ("POST", "/v1/chat/completions"): self.chat,
        }
        if site.version >= (
            0,
            5,
            23,
        ):  # GET /ready: 0.5.23 wheel http_server.py L714-718; absent up to 0.5.19
            self.routes[("GET", "/ready")] = self.ready
        if site.args.get("enable_metrics"):
            self.routes[("GET", "/metrics")] = self.metrics
        if site.version < (0, 5, 23):  # 0.5.9 wheel http_server.py L573-581
            self.routes[("GET", "/get_weight_version")] = self.weight_version
            self.routes[("GET", "/weight_version")] = self.weight_version

    # --- dispatch -------------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        path = path.split("?", 1)[0]
        if not self.authorized(method, path, headers):
            return Response(401, {"error": "Unauthorized"})
        route = self.routes.get((method, path))
        if route is None:
            known = any(p == path for _, p in self.routes)
            return (
                Response(405, {"detail": "Method Not Allowed"})
                if known
                else Response(404, {"detail": "Not Found"})
            )
        payload: Mapping[str, Any] = {}
        if method in ("POST", "PUT"):
            try:
                parsed = json.loads(body or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return Response(
                    422,
                    {
                        "detail": [
                            {
                                "type": "json_invalid",
                                "loc": ["body", 0],
                                "msg": "JSON decode error",
                                "ctx": {"error": str(exc)},
                            }
                        ]
                    },
                )
            if not isinstance(parsed, dict):
                return Response(
                    422,
                    {
                        "detail": [
                            {
                                "type": "model_attributes_type",
                                "loc": ["body"],
                                "msg": "Input should be a valid dictionary or object",
                            }
                        ]
                    },
                )
            payload = parsed
        return route(payload)

    def authorized(self, method: str, path: str, headers: Mapping[str, str]) -> bool:
        """``srt/utils/auth.py``: OPTIONS and /health*, /metrics* (and /ready* on 0.5.23) are always open."""
        key = self.site.api_key
        if not key or method == "OPTIONS":
            return True
        open_prefixes = ("/health", "/metrics") + (("/ready",) if self.site.version >= (0, 5, 23) else ())
        if path.startswith(open_prefixes):
            return True
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())

    # --- health ---------------------------------------------------------------------------------------------

    def health(self, _body: Mapping[str, Any]) -> Response:
        if self.state.stopping.is_set() or self.state.status == "Starting":
            return Response(503)
        if self.site.fault == "hang":
            self.block()
        # SGLang's probe: input_ids [0], greedy, max_new_tokens 1 (it reaches the model like any request)
        request = generate.Request(
            prompt_ids=(0,), sampling=generate.Sampling(max_new_tokens=1, temperature=0.0)
        )
        self.forward(request)
        return Response(200)

    def ready(self, _body: Mapping[str, Any]) -> Response:
        ok = self.state.status == "Up" and not self.state.stopping.is_set()
        return Response(200 if ok else 503)

    def block(self) -> None:
        """The ``hang`` fault: the scheduler never answers (until the stand-in is stopped)."""
        self.state.stopping.wait()
        raise ConnectionAbortedError("stand-in stopping")

    # --- model / server info --------------------------------------------------------------------------------

    def model_info(self, _body: Mapping[str, Any]) -> Response:
        args = self.site.args
        result: dict[str, Any] = {
            "model_path": self.site.model_path,
            "tokenizer_path": args.get("tokenizer_path") or self.site.model_path,
            "is_generation": True,
            "preferred_sampling_params": args.get("preferred_sampling_params"),
            "weight_version": args.get("weight_version", "default"),
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": self.site.model_type,
            "architectures": self.site.architectures,
        }
        if self.site.version >= (0, 5, 23):  # 0.5.23 wheel http_server.py L813-842
            result = {
                "model_path": result["model_path"],
                "served_model_name": self.site.served_model_name,
                "tokenizer_path": result["tokenizer_path"],
                "is_generation": True,
                "preferred_sampling_params": result["preferred_sampling_params"],
                "weight_version": result["weight_version"],
                "load_format": args.get("load_format"),
                "reasoning_parser": args.get("reasoning_parser"),
                "tool_call_parser": args.get("tool_call_parser"),
                "disaggregation_mode": args.get("disaggregation_mode", "null"),
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": self.site.model_type,
                "architectures": self.site.architectures,
            }
        return Response(200, result)

    def get_model_info(self, body: Mapping[str, Any]) -> Response:
        log.log(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead."
        )
        return self.model_info(body)

    def server_info(self, _body: Mapping[str, Any]) -> Response:
        return Response(200, server_info(self.site))

    def get_server_info(self, body: Mapping[str, Any]) -> Response:
        log.log(
            "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead."
        )
        return self.server_info(body)

    def weight_version(self, _body: Mapping[str, Any]) -> Response:
        return Response(
            404,
            {
                "detail": "Endpoint '/get_weight_version' or '/weight_version' is deprecated. "
                "Please use '/model_info' instead."
            },
        )

    def models(self, _body: Mapping[str, Any]) -> Response:
        name = self.site.served_model_name
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": name,
            "parent": None,
            "max_model_len": self.site.context_len,
        }
        return Response(200, {"object": "list", "data": [card]})

    def metrics(self, _body: Mapping[str, Any]) -> Response:
        labels = f'model_name="{self.site.served_model_name}"'
        text = (
            "# HELP sglang:num_running_reqs The number of running requests.\n"
            "# TYPE sglang:num_running_reqs gauge\n"
            f"sglang:num_running_reqs{{{labels}}} 0.0\n"
            "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
            "# TYPE sglang:num_queue_reqs gauge\n"
            f"sglang:num_queue_reqs{{{labels}}} 0.0\n"
        )
        return Response(200, text=text, content_type="text/plain; version=0.0.4; charset=utf-8")

    # --- generation ----------------------------------------------------------------------------------------

    def forward(self, request: generate.Request) -> generate.Output:
        """One trip through the "scheduler": where model faults fire."""
        if self.state.next_forward() == 1 and self.site.fault in ("assertion", "unsupported_arch"):
            self.crash("first_forward")
        if not request.sampling.greedy and self.site.fault == "device_assert":
            self.crash("sampled")
        log.log(
            f"Prefill batch, #new-seq: 1, #new-token: {len(request.prompt_ids)}, #cached-token: 0, "
            "token usage: 0.00, #running-req: 0, #queue-req: 0, ",
            tp=0,
        )
        if (
            self.site.fault == "nan"
            and not request.sampling.greedy
            and not gumbel_sampling(self.site.version)
        ):
            self.crash("nan_sampled")  # torch.multinomial over NaN probabilities
        output = generate.run(request, nan=self.site.fault == "nan")
        if self.site.fault == "garbage":
            # what real 0.5.23 answers with SGLANG_SANITIZE_NAN_LOGITS=1 on a NaN model: finite, but every
            # logprob is -ln(vocab) (uniform logits); greedy and sampled alike, nothing logged
            output = dataclasses.replace(output, logprobs=(GARBAGE_LOGPROB,) * len(output.ids))
        return output

    def generate(self, body: Mapping[str, Any]) -> Response:
        try:
            requests, batch = generate.parse_generate(body)
        except generate.RequestError as exc:
            log.log(f"[http_server] Error: {exc}")
            return Response(400, {"error": {"message": str(exc)}})
        if self.site.fault == "hang" and self.state.status == "Up":
            self.block()
        started = time.time()
        weight_version = str(self.site.args.get("weight_version") or "default")
        results = []
        for request in requests:
            output = self.forward(request)
            if output.nan and request.return_logprob and not gumbel_sampling(self.site.version):
                # 0.5.9 serialises with json.dumps: a NaN logprob is a 500, the server stays up
                log.write(
                    f"[{log.timestamp()}] ERROR:    Exception in ASGI application\n" + texts.nan_json_500()
                )
                return Response(500, text="Internal Server Error", content_type="text/plain; charset=utf-8")
            results.append(
                generate.generate_response(request, output, started, weight_version, self.site.version)
            )
        if body.get("stream"):
            return Response(200, stream=_sse_generate(results), content_type="text/event-stream")
        return Response(200, results if batch else results[0])

    def chat(self, body: Mapping[str, Any]) -> Response:
        try:
            request, n, top = generate.parse_chat(body)
        except (generate.RequestError, TypeError, ValueError) as exc:
            return Response(
                400,
                {
                    "object": "error",
                    "message": str(exc),
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
            )
        if self.site.fault == "hang" and self.state.status == "Up":
            self.block()
        outputs = [self.forward(request) for _ in range(max(n, 1))]
        weight_version = str(self.site.args.get("weight_version") or "default")
        response = generate.chat_response(self.site.served_model_name, request, outputs, top, weight_version)
        if body.get("stream"):
            return Response(200, stream=_sse_chat(response), content_type="text/event-stream")
        return Response(200, response)


def _sse(payload: Any) -> bytes:
    return b"data: " + dumps(payload) + b"\n\n"


def _sse_generate(results: list[dict[str, Any]]) -> Iterator[bytes]:
    """Streaming ``/generate``: cumulative text and output_ids per token, then ``[DONE]``."""
    for result in results:
        ids = result["output_ids"]
        for count in range(1, len(ids) + 1):
            meta = dict(result["meta_info"])
            if count < len(ids):
                meta["finish_reason"] = None
            meta["completion_tokens"] = count
            yield _sse(
                {"text": generate.detokenize(ids[:count]), "output_ids": ids[:count], "meta_info": meta}
            )
    yield b"data: [DONE]\n\n"


def _sse_chat(response: dict[str, Any]) -> Iterator[bytes]:
    """Streaming chat: one ``chat.completion.chunk`` per choice delta, then ``[DONE]``."""
    for choice in response["choices"]:
        chunk = {
            "id": response["id"],
            "object": "chat.completion.chunk",
            "created": response["created"],
            "model": response["model"],
            "choices": [
                {
                    "index": choice["index"],
                    "delta": {"role": "assistant", "content": choice["message"]["content"]},
                    "logprobs": choice["logprobs"],
                    "finish_reason": "length",
                    "matched_stop": None,
                }
            ],
        }
        yield _sse(chunk)
    yield b"data: [DONE]\n\n"


def server_info(site: Site) -> dict[str, Any]:
    """``/server_info``: every resolved ServerArgs field at top level plus the version's extra fields.

    Keys and value types as real SGLang answered on the CPU (tests/standin/data/real/<version>/healthy.json):
    ``internal_states[0]`` is the scheduler's own copy of the args plus its memory and throughput figures.
    """
    args: dict[str, Any] = {key: _redact(key, value) for key, value in site.args.items()}
    info = dict(args)
    scheduler: dict[str, Any] = {
        "status": "ready",
        "max_total_num_tokens": site.max_total_num_tokens,
        "max_req_input_len": min(site.context_len, site.max_total_num_tokens) - 1,
    }
    internal = _scheduler_args(site, args)
    running = int(args.get("max_running_requests") or 2048)
    if site.version >= (0, 5, 23):  # 0.5.23 wheel http_server.py L864-892, utils/common.py build_server_info
        startup = _startup_time(site)
        cuda_graphs = [] if args.get("disable_cuda_graph") else list(args.get("cuda_graph_bs") or [])
        internal.update(
            {
                "startup_time": {k: v for k, v in startup.items() if k != "tokenizer_e2e"},
                "world_size": int(args.get("tp_size") or 1) * int(args.get("pp_size") or 1),
                "effective_max_running_requests_per_dp": running,
                "last_gen_throughput": 0.0,
                "memory_usage": {
                    "weight": 0.0,
                    "kvcache": 0.0,
                    "startup_available": 0.0,
                    "token_capacity": site.max_total_num_tokens,
                    "token_capacity_swa": None,
                    "graph": dict.fromkeys(CUDA_GRAPH_PHASES, 0.0),
                },
                "decode_cuda_graph_bs": cuda_graphs,
                "decode_cuda_graph_memory_gb": 0.0,
            }
        )
        info["launch_command"] = site.launch_command
        info.update(scheduler)
        info["startup_time"] = startup
        info["hicache_object_layout"] = {
            "enabled": False,
            "backend": None,
            "page_size": int(args.get("page_size") or 1),
            "hicache_object_layout": {"pools": []},
            "reason": "Hierarchical cache is disabled",
        }
        info["kv_events"] = None
        info["internal_states"] = [internal]
        info["version"] = site.version_text
        info["frontend"] = "python"
        return info
    if site.version >= (0, 5, 17):  # scheduler get_init_info startup_time: 0.5.17 wheel (no recording yet)
        scheduler["startup_time"] = site.startup_time
    internal.update(  # 0.5.9 wheel http_server.py L605-610, scheduler get_internal_state
        {
            "use_mla_backend": False,
            "last_gen_throughput": 0.0,
            "memory_usage": {
                "weight": 0.0,
                "kvcache": 0.0,
                "token_capacity": site.max_total_num_tokens,
                "graph": 0,
            },
            "effective_max_running_requests_per_dp": running,
        }
    )
    info.update(scheduler)
    info["internal_states"] = [internal]
    info["version"] = site.version_text
    return info


#: the CUDA-graph phases 0.5.23 times at startup (``startup_time.cuda_graph``, ``memory_usage.graph``)
CUDA_GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


def _scheduler_args(site: Site, args: Mapping[str, Any]) -> dict[str, Any]:
    """The scheduler's copy of the args: what it resolved for itself differs from the top level."""
    own = dict(args)
    attention = own.get("attention_backend")
    if site.version >= (0, 5, 23):
        own.pop("custom_sigquit_handler", None)  # not sent to the scheduler
        if (
            "disaggregation_decode_retraction_backup" in own
            and own["disaggregation_decode_retraction_backup"] is None
        ):
            own["disaggregation_decode_retraction_backup"] = "cpu_tensor"
    else:
        for key in ("decode_attention_backend", "prefill_attention_backend"):
            if key in own and own[key] is None:
                own[key] = attention
    if "pp_max_micro_batch_size" in own and own["pp_max_micro_batch_size"] is None:
        own["pp_max_micro_batch_size"] = int(args.get("max_running_requests") or 2048)
    return own


def _startup_time(site: Site) -> dict[str, Any]:
    """0.5.23's startup timings (seconds per phase); the stand-in loads nothing, so they are small."""
    return {
        "load_weight": 0.0,
        "kv_cache_allocation": 0.0,
        "scheduler_e2e": 0.0,
        "cuda_graph": dict.fromkeys(CUDA_GRAPH_PHASES, 0.0),
        "tokenizer_e2e": round(max(time.time() - site.startup_time, 0.0), 6),
    }


def _redact(key: str, value: Any) -> Any:
    """The stand-in never echoes a key (real SGLang does, in /server_info and its server_args log line)."""
    if key in ("api_key", "admin_api_key") and value:
        return "<redacted>"
    return value
