"""The sweep: bring each profile up in turn, reach a verdict as soon as the evidence is decisive, tear down.

For one profile the sweep starts only its compose service and follows three streams at once, without fixed
sleeps: Docker events (health changes, healthcheck runs, the process exiting), the container's log stream
(classified line by line with the one failure catalog, ``healthchecks/signatures/__init__.py``) and, after
each
healthcheck run, the container's health log. A :class:`Judge` turns these events into a verdict:

- ``healthy`` when Docker reports the container healthy (the healthcheck's first pass is always a full one:
  config check against /server_info plus a sampled decode) and the log holds no fatal signature;
- the log's root-cause class once a fatal signature appeared, after a short settle window (the traceback that
  names the root cause follows the first generic line) or as soon as the container exited;
- else the first failure class the healthcheck reported (``nan``, ``backend_override`` …) once the container
  exited (the serve wrapper's fail-fast), Docker marked it unhealthy, or ``healthcheck.retries`` runs in a
  row named the same class; ``crash`` for an exit without any class (``oom`` if OOM-killed);
- ``timeout`` when the per-profile budget is spent.

Results go to ``results.json`` (written atomically after every profile, see :mod:`bwstack.sweep.report`), with
``matrix.md`` and ``matrix.html``. ``--standin`` runs everything on the CPU stand-in image, each profile with
the fault its ``expect`` names, under a compose project of its own that is removed at the end. ``--bench``
runs a bounded load against each profile decided healthy before its container is stopped and records the
row's ``speed`` (:mod:`bwstack.sweep.bench`). SIGINT and SIGTERM remove the running container before the sweep
exits.

The package's rooms: ``judge`` (events and the verdict), ``plan`` (what runs, the options), ``fast`` (the
``--fast`` override), ``streams`` (the Docker side), ``display`` (progress and summary), ``runner`` (one
profile), ``run`` (the whole sweep), ``demo`` (``bwstack demo``), ``report``, ``reportdiff``, ``bench``. This
module re-exports the names of the first eight, imported on first use: importing one light room
(``bwstack.sweep.report``) must not import the whole sweep, so the package never sits in an import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bwstack.sweep.demo import (
        CPU_STACK_FILE,
        DEMO_INTRO,
        DEMO_INTRO_STANDIN_ONLY,
        DEMO_TAG,
        REAL_PART,
        STANDIN_PART,
        run_demo,
    )
    from bwstack.sweep.display import STATUS_WIDTH, Display, print_summary, status_text
    from bwstack.sweep.fast import (
        GLM5_FIRST_K_DENSE,
        apply_fast,
        fast_layer_count,
        fast_override,
        model_config,
    )
    from bwstack.sweep.judge import (
        CONFIRM_PROBES,
        CONTEXT_AFTER,
        CONTEXT_BEFORE,
        DRAIN_S,
        HEALTH_KEEP,
        KEEP_LINES,
        SETTLE_S,
        TAIL_LINES,
        Event,
        Exited,
        HealthChange,
        Judge,
        LogEnd,
        LogLine,
        Probe,
        Verdict,
        last_line,
    )
    from bwstack.sweep.plan import (
        STANDIN_FAULTS,
        Options,
        Plan,
        make_plan,
        source_label,
        standin_fault,
    )
    from bwstack.sweep.run import (
        MEMLOCK_NOTE,
        STANDIN_HC_ENV,
        STANDIN_OVERRIDE,
        STANDIN_TIMEOUT_S,
        Interrupted,
        add_next_try,
        compose_project,
        default_out,
        default_timeout,
        document_for,
        engine_allows_unlimited_memlock,
        execute,
        gpu_reservation_reset,
        memlock_reset,
        model_env,
        open_document,
        prepare_real_cpu,
        profile_detail,
        run_sweep,
        signal_handlers,
        standin_env,
        variant_manifests,
    )
    from bwstack.sweep.runner import STANDIN_STOP_S, Runner, Watch
    from bwstack.sweep.streams import (
        EFFECTIVE_KEYS,
        Streams,
        docker_client,
        effective_from,
        fetch_server_info,
        health_probes,
        pending_server_info,
        split_lines,
    )

#: re-exported name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "CPU_STACK_FILE": "bwstack.sweep.demo",
    "DEMO_INTRO": "bwstack.sweep.demo",
    "DEMO_INTRO_STANDIN_ONLY": "bwstack.sweep.demo",
    "DEMO_TAG": "bwstack.sweep.demo",
    "REAL_PART": "bwstack.sweep.demo",
    "STANDIN_PART": "bwstack.sweep.demo",
    "run_demo": "bwstack.sweep.demo",
    "STATUS_WIDTH": "bwstack.sweep.display",
    "Display": "bwstack.sweep.display",
    "print_summary": "bwstack.sweep.display",
    "status_text": "bwstack.sweep.display",
    "GLM5_FIRST_K_DENSE": "bwstack.sweep.fast",
    "apply_fast": "bwstack.sweep.fast",
    "fast_layer_count": "bwstack.sweep.fast",
    "fast_override": "bwstack.sweep.fast",
    "model_config": "bwstack.sweep.fast",
    "CONFIRM_PROBES": "bwstack.sweep.judge",
    "CONTEXT_AFTER": "bwstack.sweep.judge",
    "CONTEXT_BEFORE": "bwstack.sweep.judge",
    "DRAIN_S": "bwstack.sweep.judge",
    "HEALTH_KEEP": "bwstack.sweep.judge",
    "KEEP_LINES": "bwstack.sweep.judge",
    "SETTLE_S": "bwstack.sweep.judge",
    "TAIL_LINES": "bwstack.sweep.judge",
    "Event": "bwstack.sweep.judge",
    "Exited": "bwstack.sweep.judge",
    "HealthChange": "bwstack.sweep.judge",
    "Judge": "bwstack.sweep.judge",
    "LogEnd": "bwstack.sweep.judge",
    "LogLine": "bwstack.sweep.judge",
    "Probe": "bwstack.sweep.judge",
    "Verdict": "bwstack.sweep.judge",
    "last_line": "bwstack.sweep.judge",
    "STANDIN_FAULTS": "bwstack.sweep.plan",
    "Options": "bwstack.sweep.plan",
    "Plan": "bwstack.sweep.plan",
    "make_plan": "bwstack.sweep.plan",
    "source_label": "bwstack.sweep.plan",
    "standin_fault": "bwstack.sweep.plan",
    "MEMLOCK_NOTE": "bwstack.sweep.run",
    "STANDIN_HC_ENV": "bwstack.sweep.run",
    "STANDIN_OVERRIDE": "bwstack.sweep.run",
    "STANDIN_TIMEOUT_S": "bwstack.sweep.run",
    "Interrupted": "bwstack.sweep.run",
    "add_next_try": "bwstack.sweep.run",
    "compose_project": "bwstack.sweep.run",
    "default_out": "bwstack.sweep.run",
    "default_timeout": "bwstack.sweep.run",
    "document_for": "bwstack.sweep.run",
    "engine_allows_unlimited_memlock": "bwstack.sweep.run",
    "execute": "bwstack.sweep.run",
    "gpu_reservation_reset": "bwstack.sweep.run",
    "memlock_reset": "bwstack.sweep.run",
    "model_env": "bwstack.sweep.run",
    "open_document": "bwstack.sweep.run",
    "prepare_real_cpu": "bwstack.sweep.run",
    "profile_detail": "bwstack.sweep.run",
    "run_sweep": "bwstack.sweep.run",
    "signal_handlers": "bwstack.sweep.run",
    "standin_env": "bwstack.sweep.run",
    "variant_manifests": "bwstack.sweep.run",
    "STANDIN_STOP_S": "bwstack.sweep.runner",
    "Runner": "bwstack.sweep.runner",
    "Watch": "bwstack.sweep.runner",
    "EFFECTIVE_KEYS": "bwstack.sweep.streams",
    "Streams": "bwstack.sweep.streams",
    "docker_client": "bwstack.sweep.streams",
    "effective_from": "bwstack.sweep.streams",
    "fetch_server_info": "bwstack.sweep.streams",
    "health_probes": "bwstack.sweep.streams",
    "pending_server_info": "bwstack.sweep.streams",
    "split_lines": "bwstack.sweep.streams",
}

__all__ = [
    "CONFIRM_PROBES",
    "CONTEXT_AFTER",
    "CONTEXT_BEFORE",
    "CPU_STACK_FILE",
    "DEMO_INTRO",
    "DEMO_INTRO_STANDIN_ONLY",
    "DEMO_TAG",
    "DRAIN_S",
    "EFFECTIVE_KEYS",
    "GLM5_FIRST_K_DENSE",
    "HEALTH_KEEP",
    "KEEP_LINES",
    "MEMLOCK_NOTE",
    "REAL_PART",
    "SETTLE_S",
    "STANDIN_FAULTS",
    "STANDIN_HC_ENV",
    "STANDIN_OVERRIDE",
    "STANDIN_PART",
    "STANDIN_STOP_S",
    "STANDIN_TIMEOUT_S",
    "STATUS_WIDTH",
    "TAIL_LINES",
    "Display",
    "Event",
    "Exited",
    "HealthChange",
    "Interrupted",
    "Judge",
    "LogEnd",
    "LogLine",
    "Options",
    "Plan",
    "Probe",
    "Runner",
    "Streams",
    "Verdict",
    "Watch",
    "add_next_try",
    "apply_fast",
    "compose_project",
    "default_out",
    "default_timeout",
    "docker_client",
    "document_for",
    "effective_from",
    "engine_allows_unlimited_memlock",
    "execute",
    "fast_layer_count",
    "fast_override",
    "fetch_server_info",
    "gpu_reservation_reset",
    "health_probes",
    "last_line",
    "make_plan",
    "memlock_reset",
    "model_config",
    "model_env",
    "open_document",
    "pending_server_info",
    "prepare_real_cpu",
    "print_summary",
    "profile_detail",
    "run_demo",
    "run_sweep",
    "signal_handlers",
    "source_label",
    "split_lines",
    "standin_env",
    "standin_fault",
    "status_text",
    "variant_manifests",
]


def __getattr__(name: str) -> Any:
    """A re-exported name, imported from its room on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:  # a room of the package itself (``sweep.demo``)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
