"""The sweep: bring each profile up in turn, reach a verdict as soon as the evidence is decisive, tear down.

For one profile the sweep starts only its compose service and follows three streams at once, without fixed
sleeps: Docker events (health changes, healthcheck runs, the process exiting), the container's log stream
(classified line by line with the one failure catalog, ``healthchecks/signatures/__init__.py``) and, after
each healthcheck run, the container's health log. A :class:`bwstack.sweep.judge.Judge` turns these events
into a verdict:

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
profile), ``run`` (the whole sweep), ``demo`` (``bwstack demo``), ``report``, ``reportdiff``, ``bench``.
Import the rooms themselves (``from bwstack.sweep import report``, ``from bwstack.sweep.run import
run_sweep``): this module is only this docstring, so importing one light room never imports the whole sweep.
"""
