"""The bad-input corpus: every malformed profiles.yaml / pins.toml exits 2 with one line naming file:line and field.

Each case mutates a scratch copy of the real stack, runs the real ``bwstack validate`` (a subprocess, as a user
would) and checks the exit status, that stderr is exactly one line without a traceback, and what it names.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

Mutate = Callable[[Path], Path]


def replace(old: str, new: str, count: int = 1) -> Mutate:
    def mutate(profiles: Path) -> Path:
        text = profiles.read_text()
        assert old in text, f"fixture drift: {old!r} not in profiles.yaml"
        profiles.write_text(text.replace(old, new, count))
        return profiles

    return mutate


def write(text: str | bytes) -> Mutate:
    def mutate(profiles: Path) -> Path:
        if isinstance(text, bytes):
            profiles.write_bytes(text)
        else:
            profiles.write_text(text)
        return profiles

    return mutate


def in_pins(variant: str, old: str, new: str) -> Mutate:
    def mutate(profiles: Path) -> Path:
        pins = profiles.parent / "images" / variant / "pins.toml"
        text = pins.read_text()
        assert old in text
        pins.write_text(text.replace(old, new, 1))
        return profiles

    return mutate


def drop_pins_section(variant: str, section: str) -> Mutate:
    def mutate(profiles: Path) -> Path:
        pins = profiles.parent / "images" / variant / "pins.toml"
        text = pins.read_text()
        start = text.index(f"[{section}]\n")
        end = text.index("\n[", start + 1) + 1
        pins.write_text(text[:start] + text[end:])
        return profiles

    return mutate


def other_path(name: str) -> Mutate:
    def mutate(profiles: Path) -> Path:
        target = profiles.parent / name
        if name.endswith("dir"):
            target.mkdir()
        return target

    return mutate


def _laughs(levels: int, width: int) -> str:
    """The "billion laughs" alias bomb: each level repeats the previous one ``width`` times."""
    rows = ["lol0: &lol0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        rows.append(f"lol{level}: &lol{level} [" + ", ".join([f"*lol{level - 1}"] * width) + "]")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Mutate
    expect: str  # regex the error line must match
    line: bool = True  # the message names a line


CASES = [
    Case("malformed-yaml", replace("  project: bwstack", "  project: [bwstack"), r"malformed YAML"),
    Case("top-level-list", write("- a\n- b\n"), r"top level must be a mapping.*got a list"),
    Case("top-level-scalar", write("just a string\n"), r"top level must be a mapping.*got a string"),
    Case("empty-file", write(""), r"empty file"),
    Case("not-utf8", write(b"version: 1\nstack: \xff\xfe\n"), r"not UTF-8", line=False),
    Case("missing-file", other_path("nope.yaml"), r"file not found", line=False),
    Case("directory", other_path("adir"), r"is a directory", line=False),
    Case(
        "unknown-top-level-key",
        replace("version: 1", "version: 1\nprofile: {}"),
        r"top level: unknown key 'profile' \(valid: version, stack, model, tiny_models, profiles\)",
    ),
    Case(
        "unknown-profile-key",
        replace("    kv_cache_dtype: bf16\n", "    kv_cache_dtyp: bf16\n"),
        r"profiles\.dense-fi-bf16: unknown key 'kv_cache_dtyp' \(valid: .*kv_cache_dtype",
    ),
    Case(
        "unknown-backend-value",
        replace("dsa_decode_backend: flashinfer_sparse_mla", "dsa_decode_backend: flashmla_kvv"),
        r"profiles\.dsa-fi-sparse-fp8\.dsa_decode_backend: unknown dsa_decode_backend 'flashmla_kvv' "
        r"\(valid for sglang 0\.5\.23: .*flashmla_kv",
    ),
    Case(
        "value-missing-in-old-version",
        replace(
            "    variant: v0.5.9-cu130\n    attention_backend: flashinfer\n",
            "    variant: v0.5.9-cu130\n    attention_backend: flashinfer\n    dsa_decode_backend: flashinfer_sparse_mla\n",
        ),
        r"unknown dsa_decode_backend 'flashinfer_sparse_mla' \(valid for sglang 0\.5\.9: ",
    ),
    Case(
        "wrong-type",
        replace("  tp_size: 8", '  tp_size: "eight"'),
        r"model\.tp_size: expected an integer, got a string",
    ),
    Case("duplicate-profile", replace("  dense-triton-bf16:\n", "  dense-fi-bf16:\n"), r"duplicate key"),
    Case(
        "shell-in-model-path",
        replace("path: nvidia/GLM-5-NVFP4", "path: nvidia/GLM-5;rm -rf ~"),
        r"model\.path: invalid value .*shell metacharacters",
    ),
    Case(
        "shell-in-served-name",
        replace("served_name: glm-5", "served_name: glm$(id)"),
        r"model\.served_name: invalid value .*shell metacharacters",
    ),
    Case(
        "shell-in-secrets-dir",
        replace("secrets_dir: ./secrets", "secrets_dir: ./secrets`id`"),
        r"stack\.secrets_dir: invalid value",
    ),
    Case("bad-profile-name", replace("  dense-triton-bf16:\n", "  Dense Triton!:\n"), r"profiles"),
    Case(  # issue 37: the override is printed escaped, never raw
        "right-to-left-override-in-a-profile-name",
        replace("  dense-triton-bf16:\n", "  dense-triton\u202e-bf16:\n"),
        r"profiles\.dense-triton\\u202e-bf16",
    ),
    Case(  # issue 37: past Python's own 4300-digit conversion limit, one line instead of its message
        "5000-digit-port",
        replace("  port: 30000\n", "  port: " + "9" * 5000 + "\n"),
        r"a number of 5000 digits, over the limit of 64",
    ),
    Case(
        "unknown-variant",
        replace("  variant: v0.5.23-cu130 ", "  variant: v9.9.9-cu999 "),
        r"unknown variant 'v9\.9\.9-cu999'.*known: .*v0\.5\.23-cu130",
    ),
    Case(
        "unknown-extra-flag",
        replace("      - --cuda-graph-max-bs-decode\n", "      - --enable-nan-detection\n"),
        r"unknown flag --enable-nan-detection for sglang 0\.5\.23",
    ),
    Case(
        "bad-extra-arg-value",
        replace(
            '      - --cuda-graph-max-bs-decode\n      - "256"\n',
            '      - --cuda-graph-max-bs-decode\n      - "lots"\n',
        ),
        r"extra_args\[0\]: sglang 0\.5\.23 refuses it: argument --cuda-graph-max-bs-decode: invalid int value: 'lots'",
    ),
    Case(
        "abbreviated-flag",
        replace("    - --disable-custom-all-reduce\n", "    - --disable-custom-all\n"),
        r"unknown flag --disable-custom-all for sglang 0\.5\.23 \(did you mean --disable-custom-all-reduce",
    ),
    Case(
        "owned-flag-api-key",
        replace(
            '      - --cuda-graph-max-bs-decode\n      - "256"\n', "      - --api-key\n      - hunter2\n"
        ),
        r"--api-key is set by bwstack: never put the API key on a command line",
    ),
    Case(
        "unknown-expect-class",
        replace("    expect: nan\n", "    expect: nans\n"),
        r"expect: invalid value 'nans' \(valid: healthy, nan, ",
    ),
    Case(
        "known-bad-without-evidence",
        replace(
            '    evidence:\n      - "sgl-project/sglang#26087"\n      - "sgl-project/sglang#23657"\n',
            "    evidence: []\n",
        ),
        r"evidence: expect: unsupported_arch needs evidence",
    ),
    Case(
        "missing-required-key",
        replace("  path: nvidia/GLM-5-NVFP4\n", ""),
        r"model\.path: required key missing",
    ),
    Case(
        "unsupported-format-version",
        replace("version: 1", "version: 2"),
        r"version: invalid value 2 \(valid: 1\)",
    ),
    Case(
        "out-of-range",
        replace("mem_fraction_static: 0.85", "mem_fraction_static: 1.5"),
        r"model\.mem_fraction_static: ",
    ),
    Case(
        "absurd-duration",
        replace("    interval: 30s", "    interval: 99999999999999999999s"),
        r"stack\.healthcheck\.interval: invalid value '9+s': a duration of at most 6 digits",
    ),
    Case(
        "absurd-size",
        replace("  shm_size: 32gb", "  shm_size: 99999999999999999999gb"),
        r"stack\.shm_size: invalid value '9+gb': a size of at most 9 digits",
    ),
    Case(
        "profile-shm-size-not-a-size",
        replace("  dense-fi-bf16:\n", "  dense-fi-bf16:\n    shm_size: 64 gigs\n"),
        r"profiles\.dense-fi-bf16\.shm_size: ",
    ),
    Case(
        "absurd-context-length",
        replace("  context_length: 32768", "  context_length: 99999999999999999999999999"),
        r"model\.context_length: Input should be less than or equal to 1073741824",
    ),
    Case("non-string-key", replace("  env: {}\n", "  env: {1: x}\n"), r"keys must be strings"),
    Case(
        "bad-quantization-choice",
        replace("quantization: modelopt_fp4", "quantization: nvfp5"),
        r"model\.quantization: unknown quantization 'nvfp5' \(valid for sglang",
    ),
    # bounded input: refused from the event stream, before anything is expanded or constructed
    Case(
        "alias-bomb",
        replace("version: 1\n", "version: 1\n" + _laughs(9, 9)),
        r"profiles\.yaml:\d+: YAML aliases expand to more than 10000 nodes \(at \*lol\d\): refused before",
    ),
    Case(
        "alias-bomb-mappings",
        replace(
            "version: 1\n",
            "version: 1\na: &a {x: 1, y: 1, z: 1}\n"
            + "".join(
                f"{n}: &{n} {{x: *{p}, y: *{p}, z: *{p}, w: *{p}}}\n"
                for p, n in zip("abcdefghij", "bcdefghijk", strict=True)
            ),
        ),
        r"YAML aliases expand to more than 10000 nodes",
    ),
    Case("recursive-alias", replace("version: 1\n", "version: 1\nloop: &loop [1, *loop]\n"), r"recursive"),
    Case(
        "many-aliases",
        replace("version: 1\n", "version: 1\none: &one 1\nmany: [" + ", ".join(["*one"] * 101) + "]\n"),
        r"more than 100 YAML aliases",
    ),
    Case(
        "deep-flow-nesting",
        replace("version: 1\n", "version: 1\ndeep: " + "[" * 5000 + "]" * 5000 + "\n"),
        r"profiles\.yaml:\d+: YAML nested deeper than 64 levels",
    ),
    Case(
        "deep-block-nesting",
        replace("version: 1\n", "version: 1\n" + "".join(" " * i + f"k{i}:\n" for i in range(100))),
        r"profiles\.yaml:\d+: YAML nested deeper than 64 levels",
    ),
    Case(
        "oversized-file",
        replace("version: 1\n", "version: 1\n" + "# padding\n" * 30_000),
        r"profiles\.yaml: file larger than 256 KiB: refused unread",
        line=False,
    ),
    Case("undefined-alias", replace("version: 1\n", "version: 1\nx: *nowhere\n"), r"undefined alias"),
    Case(
        "revision-branch-name",
        replace("path: nvidia/GLM-5-NVFP4", "path: nvidia/GLM-5-NVFP4\n  revision: main"),
        r"profiles\.yaml:\d+: model\.revision: invalid value 'main': a commit of the model repo, 40 ",
    ),
    Case(
        "revision-short-sha",
        replace("path: nvidia/GLM-5-NVFP4", "path: nvidia/GLM-5-NVFP4\n  revision: 5398cfa"),
        r"model\.revision: invalid value '5398cfa': a commit of the model repo",
    ),
    Case(
        "revision-not-a-string",
        replace("path: nvidia/GLM-5-NVFP4", "path: nvidia/GLM-5-NVFP4\n  revision: 12345"),
        r"model\.revision: expected a string, got an integer",
    ),
    Case(
        "model-cache-path-bare-name",
        replace("  model_cache: hf-cache ", "  model_cache_path: models\n  model_cache: hf-cache "),
        r"stack\.model_cache_path: invalid value 'models': a host folder starting with /, \./ or \.\./",
    ),
    Case(
        "bench-concurrency-above-prompts",
        replace("    concurrency: 16 ", "    concurrency: 65 "),
        r"profiles\.yaml:\d+: stack\.bench: concurrency 65 is more than num_prompts 64: at most 64 requests",
    ),
    Case(
        "bench-zero-prompts",
        replace("    num_prompts: 64 ", "    num_prompts: 0 "),
        r"profiles\.yaml:\d+: stack\.bench\.num_prompts: Input should be greater than or equal to 1",
    ),
    Case(
        "bench-time-limit-not-a-number",
        replace("    time_limit_s: 600 ", "    time_limit_s: soon "),
        r"profiles\.yaml:\d+: stack\.bench\.time_limit_s: expected an integer, got a string 'soon'",
    ),
    Case(
        "bench-unknown-key",
        replace("    output_len: 256 ", "    output_tokens: 256 "),
        r"stack\.bench: unknown key 'output_tokens' \(valid: num_prompts, input_len, output_len, concurrency, "
        r"time_limit_s\)",
    ),
    Case(
        "pins-malformed-toml",
        in_pins("v0.5.23-cu130", 'toolkit = "13.0"', "toolkit = 13.0.0"),
        r"pins\.toml.*malformed TOML",
        line=False,
    ),
    Case(
        "pins-unknown-key",
        in_pins("v0.5.23-cu130", 'toolkit = "13.0"', 'toolkit = "13.0"\narchs = "x"'),
        r"pins\.toml:\d+: cuda\.archs: unknown key 'archs'",
    ),
    Case(  # the error has no line in pins.toml: it must not borrow one from profiles.yaml
        "pins-missing-section",
        drop_pins_section("v0.5.23-cu130", "sglang"),
        r"^bwstack: \S*pins\.toml: sglang: needs version \(a release\) or commit \(a nightly\)$",
        line=False,
    ),
    Case(
        "pins-branch-not-sha",
        in_pins(
            "v0.5.23-cu130",
            "[sources]\n",
            '[sources.deepgemm]\nrepo = "https://github.com/deepseek-ai/DeepGEMM.git"\nref = "nv_dev"\n',
        ),
        r"sources\.deepgemm\.ref: must be a full 40-hex commit SHA",
    ),
]


def _run_validate(profiles: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "validate", "-f", str(profiles), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=profiles.parent if profiles.parent.exists() else None,
    )


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line(case: Case, stack_copy: Path) -> None:
    # the unmodified copy is valid (so each case fails for its own mutation only)
    target = case.mutate(stack_copy)
    result = _run_validate(target)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    errors = [ln for ln in result.stderr.splitlines() if not ln.startswith("bwstack: warning:")]
    assert len(errors) == 1, result.stderr
    line = errors[0]
    assert "Traceback" not in result.stderr
    assert line.startswith("bwstack: "), line
    assert re.search(case.expect, line), line
    if case.line:
        assert re.search(r"(profiles\.yaml|pins\.toml):\d+: ", line), line


def test_unmodified_stack_validates(stack_copy: Path) -> None:
    result = _run_validate(stack_copy)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{stack_copy}: ok: 9 profiles, variants: v0.5.23-cu130, v0.5.9-cu130\n"
    assert all(ln.startswith("bwstack: warning: ") for ln in result.stderr.splitlines()), result.stderr


def test_dev_null_gives_one_line() -> None:
    result = _run_validate(Path("/dev/null"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "case", [c for c in CASES if "alias" in c.id or "nesting" in c.id], ids=lambda c: c.id
)
def test_bounded_input_refused_before_anything_is_built(
    case: Case, stack_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limits act on the event stream as the loader consumes it (one pass): the hostile document is
    refused before any value is constructed, so nothing is ever expanded."""
    from ruamel.yaml.constructor import RoundTripConstructor

    from bwstack.errors import UserError
    from bwstack.stack.yamlload import load_yaml

    def no_construct(self: RoundTripConstructor, node: object) -> object:
        raise AssertionError("the document was constructed before the limits refused it")

    monkeypatch.setattr(RoundTripConstructor, "construct_document", no_construct)
    target = case.mutate(stack_copy)
    with pytest.raises(UserError) as err:
        load_yaml(target)
    assert err.value.line is not None
    assert re.search(case.expect, str(err.value)), str(err.value)
