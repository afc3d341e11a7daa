"""The API server's pod rules and the LWS fields each release declares, run offline on rendered manifests.

Each rule is proved by breaking one thing in a real rendered template and comparing bwstack's line with the
text a real API server prints for it: the issue's own refusal (``must be equal to nvidia.com/gpu limit of 4``,
from a StatefulSet the LWS v0.10.0 controller created on Kubernetes 1.36) and, for the others, the messages of
kubernetes/kubernetes ``pkg/apis/core/validation/validation.go`` as ``field.Error.Error()`` of
kubernetes/apimachinery ``pkg/util/validation/field/errors.go`` formats them.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bwstack.errors import UserError
from bwstack.render import k8s, lwsversions, podrules
from bwstack.stack import loader, schema

WORKER = "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]"
LEADER = "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
ENV_RULE = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and "
    "must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for "
    "validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)


@pytest.fixture(scope="module")
def two_node_lws(module_stack: schema.Stack) -> dict[str, Any]:
    return k8s.documents(k8s.render_profile(module_stack, "dense-fi-bf16", 2))[0]


def worker(lws: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    return container


def leader(lws: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    return container


def lines_after(lws: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> list[str]:
    broken = copy.deepcopy(lws)
    edit(broken)
    return [problem.line() for problem in podrules.lws_problems(broken)]


def test_every_rendered_template_passes_every_rule(module_stack: schema.Stack) -> None:
    for nodes in (1, 2, 8):
        for output in k8s.render_k8s(module_stack, nodes=nodes, out=Path("k8s")):
            lws = k8s.documents(output.text)[0]
            assert podrules.lws_problems(lws) == [], output.path.name


# --- extended resources -------------------------------------------------------------------------------------


def test_gpu_request_must_equal_the_limit(two_node_lws: dict[str, Any]) -> None:
    """The refusal seen on the real control plane: request 2, limit 4."""

    def edit(lws: dict[str, Any]) -> None:
        worker(lws)["resources"]["limits"] = {"nvidia.com/gpu": "4"}
        worker(lws)["resources"]["requests"] = {"nvidia.com/gpu": "2"}

    assert lines_after(two_node_lws, edit) == [
        f'{WORKER}.resources.requests: Invalid value: "2": must be equal to nvidia.com/gpu limit of 4'
    ]


def test_gpu_quantity_must_be_an_integer_and_not_negative(two_node_lws: dict[str, Any]) -> None:
    def fractional(lws: dict[str, Any]) -> None:
        worker(lws)["resources"]["limits"]["nvidia.com/gpu"] = "1500m"

    def negative(lws: dict[str, Any]) -> None:
        leader(lws)["resources"]["limits"]["nvidia.com/gpu"] = "-1"

    assert lines_after(two_node_lws, fractional) == [
        f'{WORKER}.resources.limits[nvidia.com/gpu]: Invalid value: "1500m": must be an integer'
    ]
    assert lines_after(two_node_lws, negative) == [
        f'{LEADER}.resources.limits[nvidia.com/gpu]: Invalid value: "-1": must be greater than or equal to 0'
    ]


def test_gpu_request_needs_a_limit_but_cpu_may_overcommit(two_node_lws: dict[str, Any]) -> None:
    def request_only(lws: dict[str, Any]) -> None:
        worker(lws)["resources"] = {"requests": {"nvidia.com/gpu": "4"}}

    def cpu(lws: dict[str, Any]) -> None:
        worker(lws)["resources"]["requests"] = {"cpu": "2", "memory": "1Gi"}
        worker(lws)["resources"]["limits"].update({"cpu": "4", "memory": "2Gi"})

    assert lines_after(two_node_lws, request_only) == [
        f"{WORKER}.resources.limits: Required value: Limit must be set for non overcommitable resources"
    ]
    assert lines_after(two_node_lws, cpu) == []


# --- names --------------------------------------------------------------------------------------------------


def test_container_and_volume_names_are_dns_labels(two_node_lws: dict[str, Any]) -> None:
    def container(lws: dict[str, Any]) -> None:
        worker(lws)["name"] = "SGLang_Worker"

    def volume(lws: dict[str, Any]) -> None:
        spec = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
        spec["volumes"][0]["name"] = "d.shm"
        leader(lws)["volumeMounts"][0]["name"] = "d.shm"

    assert lines_after(two_node_lws, container) == [
        f'{WORKER}.name: Invalid value: "SGLang_Worker": {LABEL_RULE}'
    ]
    assert lines_after(two_node_lws, volume) == [
        'spec.leaderWorkerTemplate.leaderTemplate.spec.volumes[0].name: Invalid value: "d.shm": '
        "must not contain dots"
    ]


def test_names_are_unique_and_mounts_name_a_volume_or_claim(two_node_lws: dict[str, Any]) -> None:
    def duplicate(lws: dict[str, Any]) -> None:
        spec = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        spec["volumes"].append(copy.deepcopy(spec["volumes"][0]))

    def missing(lws: dict[str, Any]) -> None:
        worker(lws)["volumeMounts"][0]["name"] = "scratch"

    def same_path(lws: dict[str, Any]) -> None:
        mounts = worker(lws)["volumeMounts"]
        mounts[1]["mountPath"] = mounts[0]["mountPath"]

    assert lines_after(two_node_lws, duplicate) == [
        'spec.leaderWorkerTemplate.workerTemplate.spec.volumes[2].name: Duplicate value: "dshm"'
    ]
    assert lines_after(two_node_lws, missing) == [f'{WORKER}.volumeMounts[0].name: Not found: "scratch"']
    assert lines_after(two_node_lws, same_path) == [
        f'{WORKER}.volumeMounts[1].mountPath: Invalid value: "/dev/shm": must be unique'
    ]
    # the claim templates become volumes of the StatefulSet's pods: their mounts resolve
    claims = [m["name"] for m in worker(two_node_lws)["volumeMounts"]]
    assert {"hf-cache", "jit-v0-5-23-cu130"} <= set(claims)


# --- probes -------------------------------------------------------------------------------------------------


def test_probes_have_exactly_one_handler(two_node_lws: dict[str, Any]) -> None:
    def two(lws: dict[str, Any]) -> None:
        leader(lws)["livenessProbe"]["httpGet"] = {"path": "/health", "port": 30000}

    def none(lws: dict[str, Any]) -> None:
        del worker(lws)["startupProbe"]["exec"]

    def empty(lws: dict[str, Any]) -> None:
        worker(lws)["readinessProbe"]["exec"]["command"] = []

    assert lines_after(two_node_lws, two) == [
        f"{LEADER}.livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type"
    ]
    assert lines_after(two_node_lws, none) == [
        f"{WORKER}.startupProbe: Required value: must specify a handler type"
    ]
    assert lines_after(two_node_lws, empty) == [f"{WORKER}.readinessProbe.exec.command: Required value"]


def test_probe_timings(two_node_lws: dict[str, Any]) -> None:
    def threshold(lws: dict[str, Any]) -> None:
        leader(lws)["livenessProbe"]["successThreshold"] = 2
        leader(lws)["readinessProbe"]["successThreshold"] = 2  # allowed on readiness

    def negative(lws: dict[str, Any]) -> None:
        worker(lws)["startupProbe"]["periodSeconds"] = -1

    def grace(lws: dict[str, Any]) -> None:
        leader(lws)["readinessProbe"]["terminationGracePeriodSeconds"] = 30
        leader(lws)["livenessProbe"]["terminationGracePeriodSeconds"] = 30  # allowed on liveness

    assert lines_after(two_node_lws, threshold) == [
        f"{LEADER}.livenessProbe.successThreshold: Invalid value: 2: must be 1"
    ]
    assert lines_after(two_node_lws, negative) == [
        f"{WORKER}.startupProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"
    ]
    assert lines_after(two_node_lws, grace) == [
        f"{LEADER}.readinessProbe.terminationGracePeriodSeconds: Invalid value: 30: "
        "must not be set for readinessProbes"
    ]


# --- env ----------------------------------------------------------------------------------------------------


def test_env_names_and_values(two_node_lws: dict[str, Any]) -> None:
    def name(lws: dict[str, Any]) -> None:
        worker(lws)["env"][0]["name"] = "1BAD"

    def number(lws: dict[str, Any]) -> None:
        worker(lws)["env"][0]["value"] = 1

    def both(lws: dict[str, Any]) -> None:
        worker(lws)["env"][0]["valueFrom"] = {"fieldRef": {"fieldPath": "spec.nodeName"}}

    assert lines_after(two_node_lws, name) == [f'{WORKER}.env[0].name: Invalid value: "1BAD": {ENV_RULE}']
    # the CRD types the field: apiextensions' wording for a wrong JSON type
    assert lines_after(two_node_lws, number) == [
        f'{WORKER}.env[0].value: Invalid value: "integer": {WORKER}.env[0].value in body must be of type '
        'string: "integer"'
    ]
    assert lines_after(two_node_lws, both) == [
        f'{WORKER}.env[0].valueFrom: Invalid value: "": may not be specified when `value` is not empty'
    ]


def test_env_references_must_name_an_earlier_variable(two_node_lws: dict[str, Any]) -> None:
    """LWS_LEADER_ADDRESS resolves (the webhook puts it first); a name defined nowhere stays literal."""
    urls = [e["value"] for e in worker(two_node_lws)["env"] if e["name"] == "BWSTACK_HC_URL"]
    assert urls == ["http://$(LWS_LEADER_ADDRESS):30000"]

    def undefined(lws: dict[str, Any]) -> None:
        worker(lws)["args"].append("$(NODE_IP)")

    [line] = lines_after(two_node_lws, undefined)
    assert line.startswith(f'{WORKER}.args[{len(worker(two_node_lws)["args"])}]: Invalid value: "$(NODE_IP)"')
    assert "$(NODE_IP) names no variable defined before it" in line


def test_a_broken_template_is_refused_before_writing(stack_copy: Path) -> None:
    """The issue's case end to end: the user's template asks for 2 GPUs and limits 4; render says why."""
    template = stack_copy.parent / "templates" / "k8s" / "leaderworkerset.yaml.j2"
    text = template.read_text()
    assert "              limits:\n" in text
    template.write_text(
        text.replace(
            "              limits:\n",
            '              requests:\n                nvidia.com/gpu: "2"\n              limits:\n',
            1,
        )
    )
    stack = loader.load_stack(stack_copy)
    with pytest.raises(UserError) as err:
        k8s.render_k8s(stack, nodes=2, profiles=["dense-fi-bf16"])
    assert err.value.field == "profiles.dense-fi-bf16" and err.value.line is not None
    assert (
        "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources.requests: Invalid value: "
        '"2": must be equal to nvidia.com/gpu limit of 4' in err.value.message
    )
    assert "(and 1 more)" in err.value.message  # the worker template too


# --- the LWS fields each release declares -------------------------------------------------------------------


def test_the_table_agrees_with_the_vendored_crd() -> None:
    """Every field the table dates is declared by the vendored CRD (the newest release the table lists)."""
    table = lwsversions.fields_table()
    declared = set(lwsversions.schema_paths(k8s.lws_schema()))
    assert set(table["since"]) <= declared
    assert list(table["versions"]) == ["v0.7.0", "v0.8.0", "v0.9.0", "v0.10.0"]
    assert table["since"]["/spec/leaderWorkerTemplate/persistentVolumeClaimRetentionPolicy"] == "v0.8.0"


def test_rendered_manifests_need_v0_8_0(module_stack: schema.Stack, two_node_lws: dict[str, Any]) -> None:
    needed = lwsversions.requirement(two_node_lws, k8s.lws_schema())
    assert needed.version == "v0.8.0"
    assert needed.fields == (
        "/spec/leaderWorkerTemplate/persistentVolumeClaimRetentionPolicy",
        "/spec/leaderWorkerTemplate/volumeClaimTemplates",
    )
    text = k8s.render_profile(module_stack, "dense-fi-bf16", 2)
    assert "# Needs LeaderWorkerSet v0.8.0 or newer (the first whose CRD declares " in text.splitlines()[1]
    older = copy.deepcopy(two_node_lws)
    del older["spec"]["leaderWorkerTemplate"]["persistentVolumeClaimRetentionPolicy"]
    del older["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
    assert lwsversions.requirement(older, k8s.lws_schema()) == lwsversions.Requirement("v0.7.0")
    newer = copy.deepcopy(two_node_lws)
    newer["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulingGroup"] = {}
    assert lwsversions.requirement(newer, k8s.lws_schema()).version == "v0.9.0"


def test_lws_version_older_than_needed_is_refused(module_stack: schema.Stack) -> None:
    with pytest.raises(UserError) as err:
        k8s.render_k8s(module_stack, nodes=2, profiles=["dense-fi-bf16"], lws_version="v0.7.0")
    assert err.value.field == "--lws-version"
    assert err.value.message.startswith("v0.7.0 is older than v0.8.0, the oldest LeaderWorkerSet")
    assert "spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy" in err.value.message
    for fine in ("v0.8.0", "0.10.0", "v0.11.2"):  # a later release only adds fields
        k8s.render_k8s(module_stack, nodes=2, profiles=["dense-fi-bf16"], lws_version=fine)
    with pytest.raises(UserError, match="not a release version"):
        k8s.render_k8s(module_stack, nodes=2, lws_version="latest")


def test_build_table_dates_the_subtrees_a_release_added() -> None:
    def crd(*fields: str) -> dict[str, Any]:
        return {"properties": {"spec": {"properties": {f: {"properties": {"x": {}}} for f in fields}}}}

    table = lwsversions.build_table(
        {
            "v0.2.0": (crd("a", "b", "c"), "c2"),
            "v0.1.0": (crd("a"), "c1"),
            "v0.10.0": (crd("a", "b", "c", "d"), "c3"),
        }
    )
    assert table["versions"] == {"v0.1.0": "c1", "v0.2.0": "c2", "v0.10.0": "c3"}
    assert table["since"] == {"/spec/b": "v0.2.0", "/spec/c": "v0.2.0", "/spec/d": "v0.10.0"}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_names_the_minimum_and_refuses_an_older_lws(stack_copy: Path) -> None:
    base = ["render", "-f", str(stack_copy), "--target", "k8s", "--nodes", "2", "--profile", "dense-fi-bf16"]
    ok = run_cli(*base, "--out", str(stack_copy.parent / "out"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0].startswith("manifests for LeaderWorkerSet v0.8.0 or newer")
    old = run_cli(*base, "--lws-version", "v0.7.0")
    lines = [line for line in old.stderr.splitlines() if not line.startswith("bwstack: warning:")]
    assert old.returncode == 2 and len(lines) == 1 and "v0.7.0 is older than v0.8.0" in lines[0]
    assert "Traceback" not in old.stderr
