"""The model cache work inside the helper container (:mod:`bwstack.host.cachevolume`), as the serving user.

``python3 -m bwstack.host.cacheworker`` reads one JSON request on stdin and answers on stdout, one line each:
``say: <text>`` (progress, for the operator), then ``done: <json>`` or ``error: user|external <text>``.
Requests: ``status`` (:func:`bwstack.host.modelcache.status` of the volume at HF_HOME) and ``fill`` (the
download, verification and manifest of :func:`bwstack.host.fetch.fill`). Imports stay within the stdlib,
huggingface_hub and bwstack modules that need nothing else: the serving image has no bwstack installed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError, UserError
from bwstack.host import fetch, modelcache
from healthchecks import imagelayout


def _say(text: str) -> None:
    print(f"say: {text}", flush=True)


def status(request: dict[str, Any]) -> dict[str, Any]:
    location = modelcache.Location(Path(imagelayout.HF_HOME), "helper")
    found = modelcache.status(location, request["repo"], request["revision"])
    fields = dataclasses.asdict(found)
    del fields["location"]
    return fields


def fill(request: dict[str, Any]) -> dict[str, Any]:
    location = modelcache.Location(Path(imagelayout.HF_HOME), "helper")
    files = [fetch.HubFile(**entry) for entry in request["files"]]
    manifest = fetch.fill(
        location,
        fetch.Target(request["repo"], request["revision"], request["commit"], request["token"]),
        files,
        max_workers=int(request["max_workers"]),
        echo=_say,
        live=False,
    )
    return {"manifest": str(manifest.relative_to(location.root))}


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
        answer = {"status": status, "fill": fill}[request["op"]](request)
    except UserError as exc:
        print(f"error: user {exc.render()}", flush=True)
        return 2
    except ExternalError as exc:
        print(f"error: external {' '.join(str(exc).split())}", flush=True)
        return 1
    except KeyboardInterrupt:
        print("error: external interrupted", flush=True)
        return 130
    except Exception as exc:  # one line to the host, never a traceback
        print(f"error: external {exc.__class__.__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
        return 1
    print(f"done: {json.dumps(answer)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
