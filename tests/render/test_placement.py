"""Placement comes from the launch spec: a per-profile ``shm_size`` (the example field of docs/design.md) reaches
compose.yaml, multi-host Compose and the Kubernetes pod of that profile only, with no renderer edited; the three
renderers mount the spec's one mount table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from bwstack import launch
from bwstack.render import compose, k8s, multihost
from bwstack.stack import loader, schema
from healthchecks import imagelayout


def _with_shm(stack_copy: Path, profile: str, size: str) -> schema.Stack:
    text = stack_copy.read_text()
    head = f"  {profile}:\n"
    assert head in text
    stack_copy.write_text(text.replace(head, f"{head}    shm_size: {size}\n", 1))
    return loader.load_stack(stack_copy)


def _pod_volumes(lws: dict[str, Any]) -> dict[str, Any]:
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    return {volume["name"]: volume for volume in pod["volumes"]}


def test_a_profile_shm_size_reaches_every_renderer_of_that_profile_only(stack_copy: Path) -> None:
    stack = _with_shm(stack_copy, "dense-fi-bf16", "64gb")
    assert stack.settings.shm_size == "32gb"  # the shipped default the other profiles keep

    services = YAML(typ="safe").load(compose.render_compose(stack))["services"]
    assert services["dense-fi-bf16"]["shm_size"] == "64gb"
    assert {services[name]["shm_size"] for name in stack.profiles if name != "dense-fi-bf16"} == {"32gb"}

    [output] = multihost.render_multihost(stack, nodes=2, profiles=["dense-fi-bf16", "dense-triton-bf16"])
    ranks = YAML(typ="safe").load(output.text)["services"]
    assert [ranks[f"dense-fi-bf16-node{k}"]["shm_size"] for k in (0, 1)] == ["64gb", "64gb"]
    assert ranks["dense-triton-bf16-node1"]["shm_size"] == "32gb"

    for profile, limit in (("dense-fi-bf16", "64Gi"), ("dense-triton-bf16", "32Gi")):
        lws = k8s.documents(k8s.render_profile(stack, profile, 2))[0]
        assert _pod_volumes(lws)["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": limit}


def test_the_renderers_mount_the_launch_specs_mount_table(module_stack: schema.Stack) -> None:
    profile = "dense-fi-bf16"
    spec = launch.launch_spec(module_stack, profile)
    assert [(m.volume, m.target) for m in spec.mounts] == [
        ("hf-cache", imagelayout.HF_HOME),
        (launch.jit_volume(spec.variant), imagelayout.JIT_CACHE),
    ]
    services = YAML(typ="safe").load(compose.render_compose(module_stack))["services"]
    assert services[profile]["volumes"] == [f"{m.volume}:{m.target}" for m in spec.mounts]
    lws = k8s.documents(k8s.render_profile(module_stack, profile, 2))[0]
    container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    mounted = {(m["name"], m["mountPath"]) for m in container["volumeMounts"]}
    assert {(k8s.dns_label(m.volume), m.target) for m in spec.mounts} <= mounted
    claims = {
        c["metadata"]["name"] for c in lws["spec"]["leaderWorkerTemplate"].get("volumeClaimTemplates", [])
    }
    volumes = _pod_volumes(lws)
    for mount in spec.mounts:  # each is a claim of the pod (a template or a named claim)
        name = k8s.dns_label(mount.volume)
        assert name in claims or name in volumes, (name, claims, list(volumes))
