"""The stand-in's HTTP routes in process: SGLang's shapes, health states, auth rules, in-request faults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bwstack.standin.app import App, Response, ServerState, Site, server_info

ARGS = {
    "model_path": "nvidia/GLM-5-NVFP4",
    "served_model_name": "glm5",
    "tp_size": 8,
    "api_key": None,
    "dsa_decode_backend": "flashinfer_sparse_mla",
    "kv_cache_dtype": "fp8_e4m3",
    "load_format": "dummy",
    "weight_version": "default",
    "enable_metrics": True,
}


class Crashed(Exception):
    pass


def make_app(
    version: tuple[int, ...] = (0, 5, 23), fault: str = "none", api_key: str | None = None, status: str = "Up"
) -> tuple[App, list[str]]:
    events: list[str] = []

    def crash(event: str) -> None:
        events.append(event)
        raise Crashed(event)

    site = Site(
        version=version,
        version_text=".".join(map(str, version)),
        args={**ARGS, "api_key": api_key},
        model_path="nvidia/GLM-5-NVFP4",
        served_model_name="glm5",
        architectures=["GlmMoeDsaForCausalLM"],
        model_type="glm_moe_dsa",
        context_len=202752,
        fault=fault,
        api_key=api_key,
        launch_command="--model-path nvidia/GLM-5-NVFP4 --api-key <redacted>",
        startup_time=1.0,
        max_total_num_tokens=628480,
    )
    state = ServerState(status=status)
    state.forwards = 1  # the warmup already ran
    return App(site, state, crash), events


def call(
    app: App, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> Response:
    raw = b"" if body is None else json.dumps(body).encode()
    return app.handle(method, path, headers or {}, raw)


GREEDY = {
    "text": "The capital city of France is",
    "sampling_params": {"temperature": 0, "max_new_tokens": 8},
    "return_logprob": True,
}
SAMPLED = {
    "text": "Hello",
    "sampling_params": {"temperature": 0.7, "max_new_tokens": 4},
    "return_logprob": True,
}


def test_health_503_until_warmup_then_200() -> None:
    app, _ = make_app(status="Starting")
    assert call(app, "GET", "/health").status == 503
    assert call(app, "GET", "/health_generate").status == 503
    assert call(app, "GET", "/ready").status == 503
    app.state.status = "Up"
    assert call(app, "GET", "/health").status == 200
    assert call(app, "GET", "/health_generate").status == 200
    assert call(app, "GET", "/ready").status == 200
    app.state.stopping.set()
    assert call(app, "GET", "/health").status == 503


def test_ready_exists_only_in_0523() -> None:
    app, _ = make_app(version=(0, 5, 9))
    assert call(app, "GET", "/ready").status == 404
    assert call(app, "GET", "/weight_version").body["detail"].startswith("Endpoint '/get_weight_version'")


def test_generate_shape_and_logprob_triples() -> None:
    app, _ = make_app()
    reply = call(app, "POST", "/generate", GREEDY)
    assert reply.status == 200
    body = reply.body
    assert set(body) == {"text", "output_ids", "meta_info"}
    meta = body["meta_info"]
    # 0.5.23 names it num_retractions (0.5.9: total_retractions): tests/standin/data/real/*/healthy.json
    assert list(meta)[:5] == ["id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions"]
    assert meta["finish_reason"] == {"type": "length", "length": 8}
    assert meta["completion_tokens"] == 8 == len(body["output_ids"]) == meta["output_token_logprobs_length"]
    assert isinstance(meta["cached_tokens"], int) and meta["e2e_latency"] >= 0
    assert meta["input_token_logprobs"] == []  # 0.5.23: no prompt logprobs unless logprob_start_len is set
    triples = meta["output_token_logprobs"]
    assert [t[1] for t in triples] == body["output_ids"]
    assert all(isinstance(t[0], float) and t[0] < 0 and t[2] is None for t in triples)
    again = call(app, "POST", "/generate", GREEDY).body
    assert again["text"] == body["text"]  # greedy is deterministic
    assert body["text"].strip()


def test_generate_batch_topk_and_errors() -> None:
    app, _ = make_app()
    batch = call(
        app,
        "POST",
        "/generate",
        {
            "input_ids": [[1, 2], [3]],
            "top_logprobs_num": 2,
            "return_logprob": True,
            "return_text_in_logprobs": True,
            "sampling_params": {"temperature": 0, "max_new_tokens": 2},
        },
    )
    assert batch.status == 200 and len(batch.body) == 2
    assert batch.body[1]["meta_info"]["prompt_tokens"] == 1
    top = batch.body[0]["meta_info"]["output_top_logprobs"]
    assert len(top) == 2 and len(top[0]) == 2 and isinstance(top[0][0][2], str)
    assert call(app, "POST", "/generate", {"sampling_params": {}}).body == {
        "error": {"message": "Either text, input_ids or input_embeds should be provided."}
    }
    assert call(app, "POST", "/generate", {"text": "x"}).status == 200
    assert app.handle("POST", "/generate", {}, b"{").status == 422
    assert call(app, "GET", "/generate").status == 405
    assert call(app, "GET", "/nope").body == {"detail": "Not Found"}


def test_0_5_9_meta_info_and_prompt_logprobs() -> None:
    app, _ = make_app(version=(0, 5, 9))
    meta = call(app, "POST", "/generate", GREEDY).body["meta_info"]
    assert list(meta)[:5] == ["id", "finish_reason", "prompt_tokens", "weight_version", "total_retractions"]
    assert "output_token_logprobs_length" not in meta and meta["cached_tokens_details"] is None
    # the last prompt token, whose logprob is null (nothing before it in the range was scored)
    assert [t[0] for t in meta["input_token_logprobs"]] == [None]
    full = call(app, "POST", "/generate", {**GREEDY, "logprob_start_len": 0}).body["meta_info"]
    lps = [t[0] for t in full["input_token_logprobs"]]
    assert len(lps) == full["prompt_tokens"] and lps[0] is None and all(isinstance(x, float) for x in lps[1:])


def test_nan_0_5_23_gumbel_nulls_every_logprob_and_stays_up() -> None:
    app, events = make_app(fault="nan")
    for body in (GREEDY, SAMPLED):
        reply = call(app, "POST", "/generate", body)
        assert reply.status == 200
        assert set(reply.body["output_ids"]) == {0}
        assert {t[0] for t in reply.body["meta_info"]["output_token_logprobs"]} == {None}
    assert call(app, "GET", "/health").status == 200 and events == []
    chat = call(
        app,
        "POST",
        "/v1/chat/completions",
        {
            "model": "glm5",
            "messages": [{"role": "user", "content": "hi"}],
            "logprobs": True,
            "temperature": 0.8,
            "max_tokens": 3,
        },
    ).body
    assert [c["logprob"] for c in chat["choices"][0]["logprobs"]["content"]] == [None] * 3


def test_garbage_fault_is_finite_and_flat_like_sanitized_nan() -> None:
    app, _ = make_app(fault="garbage")
    for body in (GREEDY, SAMPLED):
        entries = call(app, "POST", "/generate", body).body["meta_info"]["output_token_logprobs"]
        assert [t[0] for t in entries] == [-11.950406] * len(entries)  # -ln(154880)


def test_nan_0_5_9_greedy_logprobs_500_sampled_kills_the_scheduler() -> None:
    app, events = make_app(version=(0, 5, 9), fault="nan")
    plain = call(app, "POST", "/generate", {**GREEDY, "return_logprob": False})
    assert plain.status == 200 and set(plain.body["output_ids"]) == {0}
    assert call(app, "GET", "/health").status == 200  # greedy, no logprobs: nothing to serialise
    failed = call(app, "POST", "/generate", GREEDY)
    assert (failed.status, failed.text) == (500, "Internal Server Error")
    with pytest.raises(Crashed):
        call(app, "POST", "/generate", SAMPLED)
    assert events == ["nan_sampled"]


def test_device_assert_fires_on_first_sampled_decode_only() -> None:
    app, events = make_app(fault="device_assert")
    assert call(app, "POST", "/generate", GREEDY).status == 200
    assert call(app, "GET", "/health").status == 200  # the health probe is greedy
    with pytest.raises(Crashed):
        call(app, "POST", "/generate", SAMPLED)
    assert events == ["sampled"]


def test_first_forward_faults() -> None:
    for fault in ("assertion", "unsupported_arch"):
        app, events = make_app(fault=fault, status="Starting")
        app.state.forwards = 0
        with pytest.raises(Crashed):
            call(app, "POST", "/generate", GREEDY)
        assert events == ["first_forward"]


def test_api_key_rules() -> None:
    app, _ = make_app(api_key="s3cret")
    assert call(app, "POST", "/generate", GREEDY).body == {"error": "Unauthorized"}
    assert call(app, "GET", "/model_info").status == 401
    assert call(app, "GET", "/v1/models", headers={"authorization": "Bearer wrong"}).status == 401
    assert call(app, "GET", "/v1/models", headers={"authorization": "Bearer s3cret"}).status == 200
    for open_path in ("/health", "/health_generate", "/metrics", "/ready"):
        assert call(app, "GET", open_path).status == 200, open_path
    assert call(app, "OPTIONS", "/generate").status != 401
    old, _ = make_app(version=(0, 5, 9), api_key="s3cret")
    assert call(old, "GET", "/ready").status == 401  # /ready is not exempt (nor present) before 0.5.23


def test_model_info_per_version() -> None:
    new = call(make_app()[0], "GET", "/model_info").body
    old = call(make_app(version=(0, 5, 9))[0], "GET", "/model_info").body
    assert old["architectures"] == ["GlmMoeDsaForCausalLM"] and old["model_type"] == "glm_moe_dsa"
    assert "served_model_name" not in old
    assert new["served_model_name"] == "glm5" and new["load_format"] == "dummy"
    assert set(new) - set(old) == {
        "served_model_name",
        "load_format",
        "reasoning_parser",
        "tool_call_parser",
        "disaggregation_mode",
    }
    assert call(make_app()[0], "GET", "/get_model_info").body == new


def test_server_info_per_version() -> None:
    new_app, _ = make_app(api_key="s3cret")
    new = server_info(new_app.site)
    assert new["dsa_decode_backend"] == "flashinfer_sparse_mla" and new["tp_size"] == 8
    assert new["version"] == "0.5.23" and new["frontend"] == "python"
    assert new["launch_command"].startswith("--model-path")
    assert new["api_key"] == "<redacted>"
    old = server_info(make_app(version=(0, 5, 9))[0].site)
    assert old["version"] == "0.5.9" and "frontend" not in old and "launch_command" not in old
    assert old["max_total_num_tokens"] == 628480 and old["status"] == "ready"


def test_models_and_chat_shapes() -> None:
    app, _ = make_app()
    models = call(app, "GET", "/v1/models").body
    assert models["object"] == "list"
    assert models["data"][0] | {"created": 0} == {
        "id": "glm5",
        "object": "model",
        "created": 0,
        "owned_by": "sglang",
        "root": "glm5",
        "parent": None,
        "max_model_len": 202752,
    }
    chat = call(
        app,
        "POST",
        "/v1/chat/completions",
        {
            "model": "glm5",
            "messages": [{"role": "user", "content": "hi"}],
            "logprobs": True,
            "top_logprobs": 2,
            "temperature": 0,
            "max_tokens": 3,
        },
    ).body
    assert chat["object"] == "chat.completion" and chat["model"] == "glm5"
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["role"] == "assistant"
    content = choice["logprobs"]["content"]
    assert (
        len(content) == 3
        and isinstance(content[0]["logprob"], float)
        and len(content[0]["top_logprobs"]) == 2
    )
    assert chat["usage"]["completion_tokens"] == 3


def test_streaming_generate() -> None:
    app, _ = make_app()
    reply = call(app, "POST", "/generate", {**GREEDY, "stream": True})
    assert reply.stream is not None
    chunks = list(reply.stream)
    assert chunks[-1] == b"data: [DONE]\n\n"
    last = json.loads(chunks[-2][len(b"data: ") :])
    assert last["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
    first = json.loads(chunks[0][len(b"data: ") :])
    assert first["meta_info"]["finish_reason"] is None and len(first["output_ids"]) == 1
