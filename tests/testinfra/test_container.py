"""A running compose service of the stand-in serving image, through testinfra.

The service runs with compose secret files holding a known fake HF token and API key (``api_key: true`` in its
stack copy). By design the token reaches only the server's environment and the key only a private ``--config``
file of the server (serve.py writes it, never the argv); neither may appear in the container's environment, labels, image
history, ``docker inspect`` (health log included), ``docker logs``, the server log or PID 1's command line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bwstack import launch
from healthchecks import imagelayout
from support import dockerstack
from support.infra_targets import Service

pytestmark = [pytest.mark.docker]

SERVER_MODULE = "sglang.launch_server"


def server_process(host: Any) -> Any:
    found = [p for p in host.process.filter(comm="python3") if f"-m {SERVER_MODULE}" in p.args]
    assert len(found) == 1, [p.args for p in host.process.filter(comm="python3")]
    return found[0]


def proc_file(host: Any, pid: int, name: str) -> list[str]:
    """``/proc/<pid>/<name>`` split at NUL bytes (cmdline, environ)."""
    data: bytes = host.file(f"/proc/{pid}/{name}").content
    return [part.decode() for part in data.split(b"\0") if part]


def test_server_runs_exactly_the_rendered_argv(service: Service) -> None:
    process = server_process(service.host)
    cmdline = proc_file(service.host, process.pid, "cmdline")
    assert cmdline[1:3] == ["-m", SERVER_MODULE]
    argv = launch.launch_spec(service.stack, service.profile).argv
    # the wrapper adds the hang watchdog's metrics and the API key's private config file, nothing else
    assert cmdline[3:-2] == [*argv, "--enable-metrics"] and cmdline[-2] == "--config"
    assert service.api_key not in "\n".join(cmdline)
    wrapper = proc_file(service.host, 1, "cmdline")
    assert wrapper[:2] == ["python3", f"{imagelayout.HC_DIR}/serve.py"]
    assert wrapper[2:] == argv  # compose `command:` = the argv


def test_secrets_reach_only_the_server(service: Service) -> None:
    process = server_process(service.host)
    server_env = dict(entry.split("=", 1) for entry in proc_file(service.host, process.pid, "environ"))
    assert server_env.get("HF_TOKEN") == service.hf_token
    wrapper_env = "\n".join(proc_file(service.host, 1, "environ"))
    pid1 = "\n".join(proc_file(service.host, 1, "cmdline"))
    shell_env = json.dumps(service.host.environment())
    for secret in (service.hf_token, service.api_key):
        assert secret not in wrapper_env and secret not in pid1 and secret not in shell_env


def test_no_secret_in_inspect_labels_history_or_logs(service: Service) -> None:
    # a few more probes first, so the health log is full of runs that read the API key file
    previous = set(service.container.health_log())
    assert dockerstack.wait_until(lambda: bool(set(service.container.health_log()) - previous), timeout=60)
    inspect = json.dumps(service.container.inspect())
    image = dockerstack.docker("image", "inspect", service.image).stdout
    history = dockerstack.docker("history", "--no-trunc", service.image).stdout
    logs = service.container.logs()
    server_log = service.host.file(imagelayout.SERVER_LOG).content_string
    assert "--api-key ***" in logs or "api-key from" in logs  # the start line shows the flag, redacted
    for secret in (service.hf_token, service.api_key):
        for where, text in {
            "inspect": inspect,
            "image": image,
            "history": history,
            "docker logs": logs,
            "server log": server_log,
        }.items():
            assert secret not in text, f"secret found in {where}"


def test_listens_on_the_configured_port(service: Service) -> None:
    port = service.stack.settings.port
    assert service.host.exists("ss")
    assert service.host.socket(f"tcp://0.0.0.0:{port}").is_listening


def test_server_log_is_written(service: Service) -> None:
    log = service.host.file(imagelayout.SERVER_LOG)
    assert log.is_file and log.user == "bwstack"
    text = log.content_string
    assert f"bwstack-serve: starting python3 -m {SERVER_MODULE} " in text
    assert "Uvicorn running on http://0.0.0.0:" in text
    assert "The server is fired up and ready to roll!" in text
    size = log.size
    # the healthcheck's requests keep adding access-log lines
    assert dockerstack.wait_until(lambda: service.host.file(imagelayout.SERVER_LOG).size > size, timeout=60)


def test_runs_as_the_documented_user(service: Service) -> None:
    for pid in (1, server_process(service.host).pid):
        status = service.host.file(f"/proc/{pid}/status").content_string
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        assert set(uids) == {"10001"}, (pid, uids)
    assert server_process(service.host).user == "bwstack"
    for path in (imagelayout.SERVER_LOG.rsplit("/", 1)[0], imagelayout.JIT_CACHE, imagelayout.HF_HOME):
        assert service.host.file(path).user == "bwstack", path
