"""Run the installed SGLang's own backend resolution for one GPU arch on the CPU; print the outcome as JSON.

Runs inside a bwstack venv (see ``bwstack.know.venvs``) with its python, so it uses the standard library,
the installed ``sglang`` and its ``torch`` only, and reads nothing from bwstack. Usage::

    python resolve.py REQUEST.json

REQUEST: ``{"capability": [12, 0], "device_name": "...", "model_dir": "<folder with config.json>",
"requested": {semantic field: value or null}, "extra_argv": [...], "env": {"SGLANG_...": "..."}}``, or a
list of such requests (SGLang is imported once; each request runs in a forked child, so that none sees
another's state).

Steps, all SGLang's own code:

1. import SGLang as the CPU sees it (so no CUDA-only kernel module is imported);
2. build SGLang's real parser (``ServerArgs.add_cli_args``) and parse the requested flags (a refusal here
   is a prediction too: argparse's message is reported);
3. make torch report the target GPU (``torch.cuda.is_available``, ``get_device_capability``,
   ``get_device_name``, ``torch.version.cuda``) and clear SGLang's cached platform probes, so that SGLang's
   ``is_sm100_supported``, ``is_blackwell_supported``, ``is_hip``... answer for that GPU; the image ships
   FlashInfer, so its probe is set too;
4. build the real ``ServerArgs`` (its ``ModelConfig`` reads the model's config.json) and run the narrowest
   real resolution steps: 0.5.9-0.5.19 the ``ServerArgs._handle_model_specific_adjustments``,
   ``_handle_attention_backend_compatibility`` and ``_handle_page_size`` methods; 0.5.23 their successors
   in ``srt/arg_groups`` (``cuda_graph_hook.parse_cuda_graph_config`` where it exists, which the attention
   hook's torch_native branch reads, ``model_hook.handle_model_specific_adjustments``,
   ``attention_hook.handle_attention_backend_compatibility``, the ``_page_size_default`` pass);
5. where the version has it (0.5.17+), the check the DSA attention backend runs at start-up,
   ``kernels/ops/attention/flash_mla_sm120._validate_flashinfer_sparse_mla_backend``.

SGLang's log records are captured; a ValueError/AssertionError from a step is the predicted start-up error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.metadata
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

# The flag spellings per semantic field and the ServerArgs field names per result key arrive with each request
# (from bwstack.stack.snapshots and healthchecks.warmup on the host): this script keeps no copy of them.
PREDICTED = (ValueError, AssertionError, NotImplementedError)


class ArgvRefused(Exception):
    """SGLang's parser refused the argv (argparse would exit 2)."""


class LogCapture(logging.Handler):
    """Collects SGLang's log records (INFO and up)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("sglang"):
            message = " ".join(record.getMessage().split())
            self.records.append({"level": record.levelname, "logger": record.name, "message": message})


# --- 1. import on the CPU
# -------------------------------------------------------------------------------------


def import_sglang() -> dict[str, Any]:
    """Import what the resolution needs while torch still reports no GPU; which API this version has."""
    server_args = importlib.import_module("sglang.srt.server_args")
    importlib.import_module("sglang.srt.configs.model_config")
    mods: dict[str, Any] = {
        "server_args": server_args,
        "common": importlib.import_module("sglang.srt.utils.common"),
        "version": importlib.metadata.version("sglang"),
    }
    if hasattr(server_args.ServerArgs, "_handle_model_specific_adjustments"):
        mods["api"] = "methods"
    else:
        mods["api"] = "hooks"
        for name in ("model_hook", "attention_hook", "overrides", "arg_utils"):
            mods[name] = importlib.import_module(f"sglang.srt.arg_groups.{name}")
    with contextlib.suppress(ImportError):
        mods["overrides"] = importlib.import_module("sglang.srt.arg_groups.overrides")
    with contextlib.suppress(ImportError):
        mods["cuda_graph_hook"] = importlib.import_module("sglang.srt.arg_groups.cuda_graph_hook")
    with contextlib.suppress(ImportError):
        mods["sm120_check"] = importlib.import_module("sglang.kernels.ops.attention.flash_mla_sm120")
    with contextlib.suppress(ImportError):
        mods["runtime_context"] = importlib.import_module("sglang.srt.runtime_context")
    return mods


# --- 2. SGLang's own parser
# -----------------------------------------------------------------------------------


def build_argv(parser: argparse.ArgumentParser, request: dict[str, Any]) -> list[str]:
    """``--model-path DIR`` plus one flag per requested semantic value, spelt as this parser spells it."""
    known = {opt: action for action in parser._actions for opt in action.option_strings}
    argv = ["--model-path", str(request["model_dir"])]
    for semantic, value in sorted((request.get("requested") or {}).items()):
        if value is None:
            continue
        candidates = request["semantic_options"][semantic]
        options = [opt for opt in candidates if opt in known]
        if not options:
            raise ArgvRefused(f"this SGLang has no flag for {semantic} (none of {', '.join(candidates)})")
        option = options[0]
        choices = known[option].choices
        aliases = request["value_aliases"].get(semantic, {}).get(value, [value])
        spellings = [v for v in aliases if choices is None or v in choices]
        argv += [option, spellings[0] if spellings else str(value)]
    return argv + [str(a) for a in request.get("extra_argv") or []]


def parse(server_args_mod: Any, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sglang")
    server_args_mod.ServerArgs.add_cli_args(parser)

    def refuse(message: str) -> NoReturn:
        raise ArgvRefused(message)

    parser.error = refuse  # type: ignore[method-assign]
    return parser.parse_args(argv)


def make_parser(server_args_mod: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang")
    server_args_mod.ServerArgs.add_cli_args(parser)
    return parser


# --- 3. the target GPU
# ----------------------------------------------------------------------------------------


def become_gpu(mods: dict[str, Any], capability: tuple[int, int], device_name: str) -> None:
    """Make torch (and so SGLang's probes) report one CUDA GPU of ``capability``."""
    torch = importlib.import_module("torch")

    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: capability
    torch.cuda.get_device_name = lambda device=None: device_name
    torch.version.cuda = "13.0"
    torch.version.hip = None
    for module in (mods["common"], mods["server_args"]):
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
    # the serving image ships FlashInfer; the CPU venv does not
    for module in (mods["common"], mods["server_args"]):
        if hasattr(module, "is_flashinfer_available"):
            module.is_flashinfer_available = lambda: True


def platform_scope(mods: dict[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """0.5.23 keeps platform facts behind ``override_platform``; say the image has FlashInfer there too."""
    context = mods.get("runtime_context")
    override = getattr(context, "override_platform", None)
    if override is None:
        return contextlib.nullcontext()
    return override(has_flashinfer=True)  # type: ignore[no-any-return]


# --- 4. SGLang's resolution steps
# -----------------------------------------------------------------------------


def steps_for(mods: dict[str, Any], server_args: Any) -> list[tuple[str, Callable[[], Any]]]:
    if mods["api"] == "methods":
        names = (
            "_handle_model_specific_adjustments",
            "_handle_attention_backend_compatibility",
            "_handle_page_size",
        )
        return [(f"ServerArgs.{n}", getattr(server_args, n)) for n in names if hasattr(server_args, n)]
    model_hook, attention_hook, overrides = mods["model_hook"], mods["attention_hook"], mods["overrides"]
    # 0.5.23's attention hook rewrites the parsed cuda_graph_config for torch_native/flex_attention (the CPU
    # profiles' backend): SGLang's pipeline parses it (cuda_graph_hook.parse_cuda_graph_config, inside
    # handle_cuda_graph_config) before the attention hook runs, so the harness runs that parse first too;
    # without it the raw value (None) reaches cuda_graph_config.with_phase ('NoneType' has no 'decode')
    parse = getattr(mods.get("cuda_graph_hook"), "parse_cuda_graph_config", None)
    first = [("cuda_graph_hook.parse_cuda_graph_config", lambda: parse(server_args))] if parse else []
    return [
        *first,
        (
            "model_hook.handle_model_specific_adjustments",
            lambda: model_hook.handle_model_specific_adjustments(server_args),
        ),
        (
            "attention_hook.handle_attention_backend_compatibility",
            lambda: attention_hook.handle_attention_backend_compatibility(server_args),
        ),
        (
            "overrides._page_size_default",
            lambda: overrides.run_post_process_pass(server_args, overrides._page_size_default),
        ),
    ]


def make_server_args(mods: dict[str, Any], namespace: argparse.Namespace) -> Any:
    """The real ServerArgs from the parsed flags, before its own (full, GPU-probing) resolution runs."""
    cls = mods["server_args"].ServerArgs
    if mods["api"] == "hooks":
        server_args = cls.from_cli_args(namespace)  # construction resolves nothing in this version
        # record_fields from 0.5.20 (ServerArgs a msgspec.Struct); 0.5.19's ServerArgs is a dataclass
        fields_of = getattr(mods["arg_utils"], "record_fields", None) or dataclasses.fields
        fields = fields_of(type(server_args))
        server_args._raw_input = {f.name: getattr(server_args, f.name) for f in fields}
        server_args._resolved_overrides = []
        return server_args
    post_init = cls.__post_init__
    cls.__post_init__ = lambda self: None  # the steps below are run one by one instead
    try:
        server_args = cls.from_cli_args(namespace)
    finally:
        cls.__post_init__ = post_init
    if getattr(server_args, "_resolved_overrides", None) is None:
        server_args._resolved_overrides = []
    return server_args


def run_steps(steps: list[tuple[str, Callable[[], Any]]]) -> tuple[list[str], dict[str, Any] | None]:
    done: list[str] = []
    for name, step in steps:
        try:
            step()
        except PREDICTED as exc:
            return done, {"stage": name, "type": type(exc).__name__, "message": _text(exc)}
        done.append(name)
    return done, None


def field_value(mods: dict[str, Any], server_args: Any, names: Sequence[str]) -> Any:
    """A resolved field: the last declaration of a resolution pass, else the field itself."""
    for name in names:
        for _source, declared in reversed(getattr(server_args, "_resolved_overrides", None) or []):
            if name in declared:
                return _plain(declared[name])
        if hasattr(server_args, name):
            return _plain(getattr(server_args, name))
    return None


def resolved_fields(mods: dict[str, Any], server_args: Any, fields: dict[str, list[str]]) -> dict[str, Any]:
    return {key: field_value(mods, server_args, names) for key, names in fields.items()}


# --- 5. the DSA backend's start-up check
# ----------------------------------------------------------------------


def startup_check(
    mods: dict[str, Any], model_arch: str, major: int, fields: dict[str, Any], dsa: list[str]
) -> dict[str, Any] | None:
    """0.5.17+: ``DeepseekSparseAttnBackend.__init__`` validates the DSA backends for GLM on SM12x (when the
    attention backend is DSA: one of the ``dsa`` spellings)."""
    module = mods.get("sm120_check")
    check = getattr(module, "_validate_flashinfer_sparse_mla_backend", None)
    if check is None or fields.get("attention_backend") not in dsa:
        return None
    torch = importlib.import_module("torch")

    kv = torch.float8_e4m3fn if fields.get("kv_cache_dtype") == "fp8_e4m3" else torch.bfloat16
    try:
        check(
            model_arch=model_arch,
            device_sm_major=major,
            kv_cache_dtype=kv,
            prefill_impl=fields.get("dsa_prefill_backend"),
            decode_impl=fields.get("dsa_decode_backend"),
        )
    except PREDICTED as exc:
        return {
            "stage": "DeepseekSparseAttnBackend.__init__ (_validate_flashinfer_sparse_mla_backend)",
            "type": type(exc).__name__,
            "message": _text(exc),
        }
    return None


# --- driver
# ---------------------------------------------------------------------------------------------------


def resolve(mods: dict[str, Any], request: dict[str, Any], capture: LogCapture) -> dict[str, Any]:
    capability = (int(request["capability"][0]), int(request["capability"][1]))
    result: dict[str, Any] = {"sglang_version": mods["version"], "api": mods["api"], "error": None,
                              "startup_error": None, "resolved": None, "steps": []}  # fmt: skip
    argv = build_argv(make_parser(mods["server_args"]), request)
    result["argv"] = argv[2:]
    result["model_arch"] = _model_arch(request)
    try:
        namespace = parse(mods["server_args"], argv)
    except ArgvRefused as exc:
        result["error"] = {"stage": "argparse", "type": "ArgumentError", "message": _text(exc)}
        return result
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    become_gpu(mods, capability, str(request.get("device_name") or "NVIDIA GPU"))
    logging.getLogger("sglang").addHandler(capture)
    logging.getLogger("sglang").setLevel(logging.INFO)
    with platform_scope(mods):
        server_args = make_server_args(mods, namespace)
        result["steps"], result["error"] = run_steps(steps_for(mods, server_args))
        result["resolved"] = resolved_fields(mods, server_args, request["result_fields"])
        if result["error"] is None:
            dsa = request["value_aliases"].get("attention_backend", {}).get("dsa", ["dsa"])
            result["startup_error"] = startup_check(
                mods, result["model_arch"], capability[0], result["resolved"], dsa
            )
    return result


def resolve_isolated(mods: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """One request in a forked child of the imported SGLang: the GPU patches and SGLang's global state
    (environment switches it sets while resolving) never leak into the next request."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        capture = LogCapture()
        try:
            result = resolve(mods, request, capture)
        except Exception as exc:  # not a prediction: the harness could not run this SGLang's code
            result = {
                "internal_error": f"{type(exc).__name__}: {_text(exc)}",
                "traceback": traceback.format_exc(),
            }
        result["log"] = capture.records
        with os.fdopen(write_fd, "w", encoding="utf-8") as pipe:
            pipe.write(json.dumps(result))
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"internal_error": f"the resolver process died (wait status {status})", "log": []}
    return dict(json.loads(text))


def _model_arch(request: dict[str, Any]) -> str:
    with open(f"{request['model_dir']}/config.json", encoding="utf-8") as handle:
        return str((json.load(handle).get("architectures") or ["?"])[0])


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main() -> int:
    """REQUEST.json holds one request (prints one result) or a list of them (prints a list)."""
    with open(sys.argv[1], encoding="utf-8") as handle:
        payload = json.load(handle)
    requests = payload if isinstance(payload, list) else [payload]
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        try:
            mods = import_sglang()
        except Exception as exc:
            failed = {
                "internal_error": f"{type(exc).__name__}: {_text(exc)}",
                "traceback": traceback.format_exc(),
            }
            results = [dict(failed, log=[]) for _ in requests]
        else:
            results = [resolve_isolated(mods, request) for request in requests]
    out.write(json.dumps(results if isinstance(payload, list) else results[0], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
