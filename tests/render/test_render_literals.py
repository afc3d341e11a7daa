"""What a user writes reaches the server literally, and secrets and nonsense never reach compose.yaml.

``$`` in extra_args, env values and the expected text is written ``$$`` for Compose (which would substitute
the host's environment or refuse the file), while bwstack's own ``${NAME:-default}`` stay live; the k8s render
agrees. Secrets in extra_args or env are refused with the field to use instead; an address that is not one,
and a system folder as the model cache, are refused at validation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bwstack import launch
from bwstack.errors import UserError
from bwstack.render import compose, k8s
from bwstack.stack import loader, schema

DOLLAR = "a$HOME${USER}$$b$"


def edited(profiles: Path, old: str, new: str) -> Path:
    text = profiles.read_text()
    assert old in text, old
    profiles.write_text(text.replace(old, new, 1))
    return profiles


@pytest.fixture
def dollar_stack(stack_copy: Path) -> schema.Stack:
    edited(stack_copy, "  env: {}\n", f"  env: {{MY_LABEL: '{DOLLAR}'}}\n")
    edited(
        stack_copy,
        "    - --disable-custom-all-reduce\n",
        f"    - --disable-custom-all-reduce\n    - --chat-template\n    - '{DOLLAR}'\n",
    )
    edited(stack_copy, "    check_timeout:", f"    expect_text: '{DOLLAR}'\n    check_timeout:")
    return loader.load_stack(stack_copy)


def test_dollar_is_doubled_for_compose_and_ours_stay_live(dollar_stack: schema.Stack) -> None:
    service = YAML(typ="safe").load(compose.render_compose(dollar_stack))["services"]["dense-fi-bf16"]
    escaped = DOLLAR.replace("$", "$$")
    assert service["environment"]["MY_LABEL"] == escaped
    assert service["command"][service["command"].index("--chat-template") + 1] == escaped
    test = service["healthcheck"]["test"]
    assert test[test.index("--expect-text") + 1] == escaped
    assert service["environment"]["HF_HUB_OFFLINE"] == "${BWSTACK_HF_HUB_OFFLINE:-0}"  # bwstack's own: live
    # the launch spec's argv stays literal for what runs it directly (explain)
    spec = launch.launch_spec(dollar_stack, "dense-fi-bf16")
    assert DOLLAR in spec.argv


def test_k8s_passes_the_same_literal(dollar_stack: schema.Stack) -> None:
    spec = launch.launch_spec(dollar_stack, "dense-fi-bf16")
    k8s_escaped = DOLLAR.replace("$", "$$")  # Kubernetes expands $(NAME): every literal $ doubled once
    assert k8s.literal(spec.env()["MY_LABEL"]) == k8s_escaped
    argv = [arg.replace("$", "$$") for arg in spec.argv]
    assert k8s_escaped in argv


@pytest.mark.docker
def test_docker_compose_resolves_the_literal(dollar_stack: schema.Stack, docker_engine: None) -> None:
    path = dollar_stack.root / "compose.yaml"
    path.write_text(compose.render_compose(dollar_stack))
    done = subprocess.run(
        ["docker", "compose", "-f", str(path), "--profile", "dense-fi-bf16", "config", "--format", "json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "USER": "someone"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    service = json.loads(done.stdout)["services"]["dense-fi-bf16"]
    # `config` prints compose syntax again ($ as $$): the user's text, with no host value substituted into it
    printed = DOLLAR.replace("$", "$$")
    assert service["environment"]["MY_LABEL"] == printed
    assert printed in service["command"]


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("  env: {}\n", "  env: {HF_TOKEN: hf_abc}\n", "model.env: HF_TOKEN holds a secret"),
        ("  env: {}\n", "  env: {OPENAI_API_KEY: sk}\n", "secrets/api_key"),
        (
            "    - --disable-custom-all-reduce\n",
            "    - --disable-custom-all-reduce\n    - --admin-api-key\n    - hunter2\n",
            "--admin-api-key is set by bwstack: a key on a command line is shown by ps",
        ),
        (
            "    - --disable-custom-all-reduce\n",
            "    - --disable-custom-all-reduce\n    - --config=/x.yaml\n",
            "--config is set by bwstack",
        ),
        ("  bind_address: 127.0.0.1", "  bind_address: '1.2.3.4.5'", "stack.bind_address: invalid value"),
        ("  bind_address: 127.0.0.1", "  bind_address: ':::'", "an IPv4 or IPv6 address"),
        ("  model_cache: hf-cache ", "  model_cache_path: /\n  model_cache: hf-cache ", "a system folder"),
        (
            "  model_cache: hf-cache ",
            "  model_cache_path: /etc/../\n  model_cache: hf-cache ",
            "a system folder",
        ),
    ],
)
def test_secrets_and_nonsense_are_refused_at_validation(
    stack_copy: Path, old: str, new: str, expect: str
) -> None:
    edited(stack_copy, old, new)
    done = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "validate", "-f", str(stack_copy)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    errors = [ln for ln in done.stderr.splitlines() if not ln.startswith("bwstack: warning:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert expect in errors[0], errors[0]
    assert "hunter2" not in done.stderr and "hf_abc" not in done.stderr


def test_an_ipv6_bind_address_is_bracketed_in_the_port_mapping(stack_copy: Path) -> None:
    edited(stack_copy, "  bind_address: 127.0.0.1", "  bind_address: '::1'")
    service = YAML(typ="safe").load(compose.render_compose(loader.load_stack(stack_copy)))["services"]
    assert next(iter(service.values()))["ports"] == ["[::1]:30000:30000"]


def test_the_secret_env_check_is_on_profiles_too(stack_copy: Path) -> None:
    edited(
        stack_copy,
        "    kv_cache_dtype: bf16\n",
        "    kv_cache_dtype: bf16\n    env: {HUGGING_FACE_HUB_TOKEN: x}\n",
    )
    with pytest.raises(UserError, match="HUGGING_FACE_HUB_TOKEN holds a secret"):
        loader.load_stack(stack_copy)
