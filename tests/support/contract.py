"""The stand-in's contract with real SGLang: what is asked, how answers are recorded, how shapes are compared.

One list of probes (:data:`PROBES`) is sent to real SGLang on the CPU (``tests/standin/record_real.py`` writes
the answers to ``tests/standin/data/real/<version>/<case>.json``) and to the stand-in imitating the same version
(``tests/standin/test_contract.py``). What must agree is the STRUCTURE of each answer: HTTP status, body kind,
keys, value types (``null`` counts: a NaN logprob is ``null``), list lengths as ``0``/``1``/``n`` and the per
position types of short scalar lists (the ``[logprob, token_id, text]`` triples); plus a few facts that are the
behaviour itself (every output id 0 under NaN, whether the server survived, the log's class). Values such as
ids, texts and timings are not compared: a random tiny model and the stand-in's pseudo-tokens never agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.stack import TESTS

DATA = TESTS / "standin" / "data" / "real"
SCHEMA = "bwstack.standin-contract/1"
PROMPT = "The quick brown fox jumps over the lazy dog."
MAX_NEW_TOKENS = 4


def _generate(temperature: float, *, logprob: bool, start0: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": PROMPT,
        "sampling_params": {
            "temperature": temperature,
            "max_new_tokens": MAX_NEW_TOKENS,
            "ignore_eos": True,
        },
    }
    if logprob:
        body["return_logprob"] = True
    if start0:
        body["logprob_start_len"] = 0
    return body


@dataclass(frozen=True)
class Probe:
    name: str
    method: str
    path: str
    body: Mapping[str, Any] | None = None


HEALTH = Probe("health", "GET", "/health")
#: per case: the requests, in order (a NaN server may die part-way; later probes then record the refusal)
PROBES: dict[str, tuple[Probe, ...]] = {
    "healthy": (
        HEALTH,
        Probe("server_info", "GET", "/server_info"),
        Probe("greedy", "POST", "/generate", _generate(0.0, logprob=False)),
        Probe("greedy_logprob", "POST", "/generate", _generate(0.0, logprob=True)),
        Probe("greedy_logprob_start0", "POST", "/generate", _generate(0.0, logprob=True, start0=True)),
        Probe("sampled_logprob", "POST", "/generate", _generate(0.7, logprob=True)),
        Probe("sampled_logprob_start0", "POST", "/generate", _generate(0.7, logprob=True, start0=True)),
    ),
    "nan-lm-head": (
        HEALTH,
        Probe("greedy", "POST", "/generate", _generate(0.0, logprob=False)),
        Probe("greedy_logprob", "POST", "/generate", _generate(0.0, logprob=True)),
        Probe("sampled_logprob", "POST", "/generate", _generate(0.7, logprob=True)),
        Probe("health_after", "GET", "/health"),
    ),
}
#: tiny-model fault (``bwstack tiny-model --fault``) -> the stand-in fault that imitates it
STANDIN_FAULT = {"healthy": "none", "nan-lm-head": "nan"}
#: seconds to wait for a server whose last probe failed to exit
EXIT_WAIT = 30.0

Call = Callable[[str, str, Mapping[str, Any] | None], tuple[int, bytes]]


def answer(status: int | None, raw: bytes | None, error: str | None = None) -> dict[str, Any]:
    """One recorded answer: status, body kind (empty/json/text) and body."""
    if status is None:
        return {"status": None, "kind": "no_answer", "body": None, "error": error}
    if not raw:
        return {"status": status, "kind": "empty", "body": None}
    try:
        return {"status": status, "kind": "json", "body": json.loads(raw)}
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"status": status, "kind": "text", "body": raw.decode("utf-8", errors="replace")}


def run_probes(case: str, call: Call) -> dict[str, dict[str, Any]]:
    """Send the case's probes in order; a dropped or refused connection is recorded as ``no_answer``."""
    out: dict[str, dict[str, Any]] = {}
    for probe in PROBES[case]:
        try:
            status, raw = call(probe.method, probe.path, probe.body)
        except OSError as exc:
            out[probe.name] = answer(None, None, type(exc).__name__)
            continue
        out[probe.name] = answer(status, raw)
    return out


def scrub(value: Any, replacements: Mapping[str, str]) -> Any:
    """Replace this machine's paths (model folder, venv) in every string by placeholders."""
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [scrub(v, replacements) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, replacements) for k, v in value.items()}
    return value


def facts(answers: Mapping[str, Mapping[str, Any]], *, exited: bool, log_class: str) -> dict[str, Any]:
    """The behaviour that must agree beyond shapes."""
    zero_ids: dict[str, bool] = {}
    for name, reply in answers.items():
        body = reply.get("body")
        if reply.get("kind") == "json" and isinstance(body, dict) and "output_ids" in body:
            zero_ids[name] = all(i == 0 for i in body["output_ids"])
    return {"all_output_ids_zero": zero_ids, "server_exited": exited, "log_class": log_class}


# --- shapes -------------------------------------------------------------------------------------------------


def shape(value: Any) -> Any:
    """The structure of a JSON value (see the module docstring)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return {"{}": {k: shape(v) for k, v in value.items()}}
    if isinstance(value, list):
        size = "0" if not value else "1" if len(value) == 1 else "n"
        items = [shape(v) for v in value]
        scalar = all(isinstance(i, str) for i in items)
        if scalar and 1 < len(items) <= 3 and len(set(items)) > 1:
            return {"tuple": items}
        merged: Any = None
        for item in items:
            merged = item if merged is None else merge(merged, item)
        return {"[]": merged, "len": size}
    return type(value).__name__


def merge(a: Any, b: Any) -> Any:
    """One shape covering both (types joined with ``|``, dict keys united, tuples per position)."""
    if a == b:
        return a
    if isinstance(a, str) and isinstance(b, str):
        return "|".join(sorted(set(a.split("|")) | set(b.split("|"))))
    if isinstance(a, dict) and isinstance(b, dict):
        if "{}" in a and "{}" in b:
            keys = list(dict.fromkeys([*a["{}"], *b["{}"]]))
            return {
                "{}": {
                    k: merge(a["{}"][k], b["{}"][k])
                    if k in a["{}"] and k in b["{}"]
                    else a["{}"].get(k, b["{}"].get(k))
                    for k in keys
                }
            }
        if "tuple" in a and "tuple" in b and len(a["tuple"]) == len(b["tuple"]):
            return {"tuple": [merge(x, y) for x, y in zip(a["tuple"], b["tuple"], strict=True)]}
        if "[]" in a and "[]" in b:
            inner = b["[]"] if a["[]"] is None else a["[]"] if b["[]"] is None else merge(a["[]"], b["[]"])
            return {"[]": inner, "len": a["len"] if a["len"] == b["len"] else "n"}
    return f"{_label(a)}|{_label(b)}"


def _label(s: Any) -> str:
    return s if isinstance(s, str) else json.dumps(s, sort_keys=True)


def differences(real: Any, other: Any, path: str = "$", label: str = "stand-in") -> list[str]:
    """Where the shape ``other`` differs from ``real``: one line per difference, with its JSON path."""
    if real == other:
        return []
    if isinstance(real, dict) and isinstance(other, dict):
        if "{}" in real and "{}" in other:
            out: list[str] = []
            rk, ok = real["{}"], other["{}"]
            missing = [k for k in rk if k not in ok]
            extra = [k for k in ok if k not in rk]
            if missing:
                out.append(f"{path}: keys missing in the {label}: {missing}")
            if extra:
                out.append(f"{path}: keys the real server does not have: {extra}")
            for key in rk:
                if key in ok:
                    out += differences(rk[key], ok[key], f"{path}.{key}", label)
            return out
        if "[]" in real and "[]" in other:
            out = []
            if real["len"] != other["len"]:
                out.append(f"{path}: length real {real['len']}, {label} {other['len']}")
            if real["[]"] is not None and other["[]"] is not None:
                out += differences(real["[]"], other["[]"], f"{path}[*]", label)
            return out
        if "tuple" in real and "tuple" in other and len(real["tuple"]) == len(other["tuple"]):
            out = []
            for index, (x, y) in enumerate(zip(real["tuple"], other["tuple"], strict=True)):
                out += differences(x, y, f"{path}[{index}]", label)
            return out
    return [f"{path}: real {_label(real)}, {label} {_label(other)}"]


def answer_shape(reply: Mapping[str, Any]) -> dict[str, Any]:
    return {"{}": {"status": str(reply["status"]), "kind": reply["kind"], "body": shape(reply.get("body"))}}


def compare(
    real: Mapping[str, Any],
    other: Mapping[str, Any],
    *,
    skip_body: Sequence[str] = (),
    label: str = "stand-in",
) -> list[str]:
    """Every difference between two recordings of one case (answers by probe name, then the facts)."""
    out: list[str] = []
    for name, reply in real["answers"].items():
        mine = other["answers"].get(name)
        if mine is None:
            out.append(f"{name}: not answered by the {label}")
            continue
        real_shape, other_shape = answer_shape(reply), answer_shape(mine)
        if name in skip_body:
            real_shape["{}"].pop("body")
            other_shape["{}"].pop("body")
        out += [f"{name}: {d}" for d in differences(real_shape, other_shape, label=label)]
    for key, value in real["facts"].items():
        if other["facts"].get(key) != value:
            out.append(f"facts.{key}: real {value!r}, {label} {other['facts'].get(key)!r}")
    return out


def fixture_path(version: str, case: str, root: Path = DATA) -> Path:
    return root / version / f"{case}.json"


def load(version: str, case: str, root: Path = DATA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(fixture_path(version, case, root).read_text(encoding="utf-8"))
    return data


# --- recording real SGLang ----------------------------------------------------------------------------------


def record_real(variant: str, case: str, workdir: Path) -> dict[str, Any]:
    """Start real SGLang of the CPU ``variant`` on a tiny model with the case's fault; run the probes."""
    import datetime
    import time

    from bwstack import classify
    from bwstack.stack import pins
    from bwstack.tiny import tinymodel
    from support.realsglang import CPU_ENV, ROOT, cpu_flags, real_server, venv_python

    spec = tinymodel.TinySpec(fault="none" if case == "healthy" else case)
    model = tinymodel.write(workdir / f"model-{case}", spec)
    log = workdir / f"server-{variant}-{case}.log"
    python = venv_python(variant)
    with real_server(model, log, variant=variant) as server:

        def call(method: str, path: str, body: Mapping[str, Any] | None) -> tuple[int, bytes]:
            return server.get(path) if method == "GET" else server.post(path, body or {})

        answers = run_probes(case, call)
        if any(a["kind"] == "no_answer" for a in answers.values()):
            deadline = time.monotonic() + EXIT_WAIT
            while server.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
        exited = server.process.poll() is not None
        log_class = str(classify.classify_text(server.log_text())["class"])
    version = pins.load_variant(ROOT / "images", variant).sglang_version
    replacements = {str(model): "<model>", str(python.parents[1]): "<venv>"}
    return {
        "schema": SCHEMA,
        "sglang_version": version,
        "variant": variant,
        "case": case,
        "recorded": {
            "how": "python tests/standin/record_real.py (never edit by hand; re-record)",
            "at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "server": "real SGLang from the host venv of the variant's wheelhouse.lock, on 127.0.0.1",
            "argv": ["--model-path", "<model>", *cpu_flags(variant)],
            "env": {**CPU_ENV, **pins.load_variant(ROOT / "images", variant).env},
            "tiny_model": {"fault": spec.fault, "arch": spec.arch, "seed": spec.seed},
        },
        "answers": scrub(answers, replacements),
        "facts": facts(answers, exited=exited, log_class=log_class),
    }
