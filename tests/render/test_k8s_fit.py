"""Placement: one pod of a multi-node group per node, GPUs per pod from the launch spec, and the scheduling
simulation that catches "both pods on one node" and "cannot be placed" before anything is applied.

On a real Kubernetes 1.36 control plane with LWS v0.10.0 and two fake 8-GPU nodes, the 2-pod group of the
manifests rendered before this change landed on ONE node (4 GPUs each): nothing kept the pods apart.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bwstack import cli, launch
from bwstack.errors import UserError
from bwstack.render import k8s, k8sfit, multihost
from bwstack.stack import loader, schema
from support.stack import edit_yaml


@pytest.fixture(scope="module")
def group(module_stack: schema.Stack) -> dict[str, Any]:
    """dense-fi-bf16 over two nodes (tp_size 8: 4 GPUs per pod)."""
    return k8s.documents(k8s.render_profile(module_stack, "dense-fi-bf16", 2))[0]


def pod_templates(lws: dict[str, Any]) -> list[dict[str, Any]]:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    return [lwt["leaderTemplate"], lwt["workerTemplate"]]


def test_multi_node_groups_carry_required_anti_affinity(
    module_stack: schema.Stack, group: dict[str, Any]
) -> None:
    for template in pod_templates(group):
        [term] = template["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term == {
            "labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "bwstack-dense-fi-bf16"}},
            "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"],
            "topologyKey": "kubernetes.io/hostname",
        }
        assert "leaderworkerset.sigs.k8s.io/exclusive-topology" not in group["metadata"]["annotations"]
    single = k8s.documents(k8s.render_profile(module_stack, "dense-fi-bf16", 1))[0]
    assert all("affinity" not in t["spec"] for t in pod_templates(single))


def test_every_profile_spreads_on_two_8_gpu_nodes(module_stack: schema.Stack) -> None:
    for output in k8s.render_k8s(module_stack, nodes=2, out=Path("k8s")):
        verdict = k8s.fit(output.text, k8sfit.Cluster(2, 8))
        assert verdict.status == "spreads", (output.path.name, verdict)
        assert (
            verdict.detail.endswith("-0-1 (worker, 4 GPUs) -> node-1")
            and "-0 (leader, 4 GPUs) -> node-0" in verdict.detail
        )


def test_without_anti_affinity_the_group_packs(group: dict[str, Any]) -> None:
    """What the real scheduler did to the earlier manifests: both pods on one 8-GPU node."""
    bare = copy.deepcopy(group)
    for template in pod_templates(bare):
        del template["spec"]["affinity"]
    verdict = k8sfit.simulate(bare, k8sfit.Cluster(2, 8))
    assert verdict.status == "packs" and not verdict.ok
    assert verdict.detail.startswith("bwstack-dense-fi-bf16-0, bwstack-dense-fi-bf16-0-1 can share node-0")


def test_a_group_that_cannot_be_placed(group: dict[str, Any]) -> None:
    one_node = k8sfit.simulate(group, k8sfit.Cluster(1, 8))
    assert one_node.status == "unplaceable" and not one_node.ok
    assert one_node.detail == (
        "bwstack-dense-fi-bf16-0-1 (worker, 4 GPUs) cannot be placed: "
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    )
    small = k8sfit.simulate(group, k8sfit.Cluster(3, 2))
    assert small.detail == (
        "bwstack-dense-fi-bf16-0 (leader, 4 GPUs) cannot be placed: "
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )
    three = copy.deepcopy(group)  # three replicas on three nodes: the last worker meets both filters
    three["spec"]["replicas"] = 3
    verdict = k8sfit.simulate(three, k8sfit.Cluster(3, 8))
    assert verdict.detail == (
        "bwstack-dense-fi-bf16-2-1 (worker, 4 GPUs) cannot be placed: 0/3 nodes are available: "
        "1 node(s) didn't match pod anti-affinity rules, 2 Insufficient nvidia.com/gpu."
    )


def test_match_label_keys_keep_only_a_group_apart(group: dict[str, Any]) -> None:
    """Two replicas of a 2-pod group share two 8-GPU nodes: the anti-affinity is per group (group-key)."""
    two = copy.deepcopy(group)
    two["spec"]["replicas"] = 2
    verdict = k8sfit.simulate(two, k8sfit.Cluster(2, 8))
    assert verdict.status == "spreads", verdict
    assert verdict.detail.count("-> node-0") == 2 and verdict.detail.count("-> node-1") == 2
    # where the API server drops matchLabelKeys (feature gate off), the name selector alone keeps all pods apart
    for template in pod_templates(two):
        del template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            0
        ]["matchLabelKeys"]
    assert k8sfit.simulate(two, k8sfit.Cluster(2, 8)).status == "unplaceable"
    assert k8sfit.simulate(two, k8sfit.Cluster(4, 8)).status == "spreads"


def test_group_pods_carry_the_lws_labels(group: dict[str, Any]) -> None:
    leader, worker = k8sfit.group_pods(group)
    assert (leader.name, worker.name) == ("bwstack-dense-fi-bf16-0", "bwstack-dense-fi-bf16-0-1")
    key = "leaderworkerset.sigs.k8s.io/group-key"
    assert leader.labels[key] == worker.labels[key] and len(leader.labels[key]) == 40
    assert worker.labels["leaderworkerset.sigs.k8s.io/worker-index"] == "1"
    assert (leader.gpus, worker.gpus) == (4, 4)


def test_one_pod_group_fits(module_stack: schema.Stack) -> None:
    text = k8s.render_profile(module_stack, "dense-fi-bf16", 1)
    assert k8s.fit(text, k8sfit.Cluster(1, 8)).status == "fits"
    assert k8s.fit(text, k8sfit.Cluster(4, 4)).status == "unplaceable"


# --- GPUs per pod: the launch spec's placement, tp x pp over the nodes ----------------------------------------


def test_gpus_per_pod_are_the_nodes_share_of_tp_times_pp(stack_copy: Path) -> None:
    edit_yaml(
        stack_copy, lambda d: d["profiles"]["dense-fi-bf16"].__setitem__("extra_args", ["--pp-size", "2"])
    )
    stack = loader.load_stack(stack_copy)
    spec = launch.launch_spec(stack, "dense-fi-bf16")
    assert (spec.pp_size, spec.world_size, spec.gpus) == (2, 16, 16)
    assert spec.placement(2) == launch.Placement(nodes=2, gpus_per_node=8)
    lws = k8s.documents(k8s.render_profile(stack, "dense-fi-bf16", 4))[0]
    for template in pod_templates(lws):
        assert template["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    [rank0, rank1] = [
        s["gpu_count"]
        for s in multihost.multihost_context(stack, 2, ["dense-fi-bf16"], stack_copy)["services"]
    ]
    assert rank0 == rank1 == 8
    with pytest.raises(UserError, match=r"tp_size 8 x pp_size 2 cannot be split evenly over 3 nodes"):
        k8s.render_k8s(stack, nodes=3, profiles=["dense-fi-bf16"])
    other = launch.launch_spec(stack, "dense-triton-bf16")
    assert (other.pp_size, other.placement(8).gpus_per_node) == (1, 1)


def test_cpu_profiles_reserve_no_gpu(repo_stack: schema.Stack) -> None:
    cpu = loader.load_stack(repo_stack.root / "profiles.cpu.yaml")
    name = next(iter(cpu.profiles))
    assert launch.launch_spec(cpu, name).placement(1) == launch.Placement(nodes=1, gpus_per_node=None)


# --- the command line ---------------------------------------------------------------------------------------


def test_cli_fit_spreads_writes_and_refuses_an_unplaceable_group(stack_copy: Path) -> None:
    runner = CliRunner()
    folder = stack_copy.parent / "k8s"
    base = ["render", "-f", str(stack_copy), "--target", "k8s", "--nodes", "2", "--profile", "dense-fi-bf16"]
    bad = runner.invoke(cli.main, [*base, "--fit", "1x8"])
    assert bad.exit_code == 1 and not folder.exists()
    assert "dense-fi-bf16: unplaceable on 1 node(s) x 8 nvidia.com/gpu: " in bad.stdout
    assert "didn't match pod anti-affinity rules." in bad.stdout
    good = runner.invoke(cli.main, [*base, "--fit", "2x8"])
    assert good.exit_code == 0, good.output
    assert "dense-fi-bf16: spreads on 2 node(s) x 8 nvidia.com/gpu: " in good.stdout
    assert (folder / "dense-fi-bf16.yaml").is_file()
    assert runner.invoke(cli.main, [*base, "--check", "--fit", "2x8"]).exit_code == 0
    assert runner.invoke(cli.main, [*base, "--check", "--fit", "1x8"]).exit_code == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "k8s", "--fit", "2-8"], "'2-8' is not NODESxGPUS"),
        (["--target", "k8s", "--fit", "0x8"], "'0x8' is not NODESxGPUS"),
        (["--nodes", "2", "--fit", "2x8"], "--lws-version and --fit apply to --target k8s only"),
    ],
)
def test_cli_bad_fit_is_one_line_exit_2(stack_copy: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(cli.main, ["render", "-f", str(stack_copy), *args])
    lines = [line for line in result.stderr.splitlines() if not line.startswith("bwstack: warning:")]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
