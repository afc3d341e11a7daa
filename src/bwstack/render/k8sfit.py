"""Will the rendered group land as swept? A small simulation of the scheduler for N nodes of G GPUs each.

``bwstack render --target k8s --fit NxG`` runs it on every rendered LeaderWorkerSet before anything is
applied. It reads the manifest itself (not the profile), builds the pods the LWS controller would create
(leader ``<lws>-<g>``, workers ``<lws>-<g>-<i>``, with the labels LWS v0.10.0 gives them: name, group index,
and the group key ``sha1("<namespace>/<leader pod>")``, lws ``pkg/webhooks/pod_webhook.go``) and places them
one by one, leader first, with the two scheduler filters that decide here:

- NodeResourcesFit: the pod's ``nvidia.com/gpu`` limit must fit the node's free GPUs
  (``Insufficient nvidia.com/gpu``);
- InterPodAffinity: a required anti-affinity term (its ``labelSelector``, plus ``matchLabelKeys`` taken from
  the pod's own labels) must match no pod already on the node, either way round
  (``node(s) didn't match pod anti-affinity rules``).

Among the nodes that pass, the default scheduler scores CPU and memory, not GPUs, so nothing prefers an
empty node: the simulation takes the worst case and packs (a node already holding a pod of the group
first), which is what a real 1.36 scheduler did with a 2-pod group on two 8-GPU nodes. Verdicts: ``fits``
(a one-pod group), ``spreads`` (one pod of the group per node), ``packs`` (two pods of a group can share a
node: not the multi-node run that was swept) and ``unplaceable`` (some pod fits no node; the reason is
worded as the scheduler's ``FailedScheduling`` event: ``0/2 nodes are available: 1 Insufficient
nvidia.com/gpu, ...``). Not simulated: CPU and memory requests, taints, node labels and selectors,
topology spread, preemption.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bwstack.errors import UserError

GPU = "nvidia.com/gpu"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
HOSTNAME = "kubernetes.io/hostname"
INSUFFICIENT = f"Insufficient {GPU}"  # scheduler noderesources plugin
ANTI_AFFINITY = (
    "node(s) didn't match pod anti-affinity rules"  # interpodaffinity ErrReasonAntiAffinityRulesNotMatch
)
_CLUSTER = re.compile(r"^(\d+)x(\d+)$")


@dataclass(frozen=True)
class Cluster:
    nodes: int
    gpus: int

    def __str__(self) -> str:
        return f"{self.nodes} node(s) x {self.gpus} {GPU}"


def parse_cluster(text: str) -> Cluster:
    """``2x8``: two nodes of 8 GPUs; UserError for anything else."""
    match = _CLUSTER.fullmatch(text.strip().lower())
    if match is None or int(match.group(1)) < 1:
        raise UserError(f"{text!r} is not NODESxGPUS (e.g. 2x8: two nodes with 8 {GPU} each)", field="--fit")
    return Cluster(int(match.group(1)), int(match.group(2)))


@dataclass
class Pod:
    name: str
    role: str
    group: int
    labels: dict[str, str]
    gpus: int
    anti: list[dict[str, Any]]  # required anti-affinity terms, matchLabelKeys already resolved
    node: str | None = None


@dataclass
class Node:
    name: str
    free: int
    pods: list[Pod] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    status: str  # fits, spreads, packs, unplaceable
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("fits", "spreads")


def pod_gpus(template: dict[str, Any]) -> int:
    spec = template.get("spec") or {}
    total = 0
    for container in spec.get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get(GPU)
        total += int(str(limit)) if limit is not None else 0
    return total


def anti_terms(template: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """The template's required anti-affinity terms, each as {selector, topologyKey}."""
    affinity = (template.get("spec") or {}).get("affinity") or {}
    terms = (affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    found = []
    for term in terms:
        selector = dict(term.get("labelSelector") or {})
        match_labels = dict(selector.get("matchLabels") or {})
        for key in term.get("matchLabelKeys") or []:  # the API server merges them at pod creation
            if key in labels:
                match_labels[key] = labels[key]
        found.append(
            {
                "matchLabels": match_labels,
                "matchExpressions": selector.get("matchExpressions") or [],
                "topologyKey": term.get("topologyKey"),
            }
        )
    return found


def selects(term: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, and In/NotIn/Exists/DoesNotExist expressions) against pod labels."""
    if any(labels.get(key) != value for key, value in term["matchLabels"].items()):
        return False
    for expr in term["matchExpressions"]:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def group_pods(lws: dict[str, Any], namespace: str = "default") -> list[Pod]:
    """The pods the LWS controller creates, leader then workers, for each replica."""
    name = lws["metadata"]["name"]
    spec = lws["spec"]
    lwt = spec["leaderWorkerTemplate"]
    size = int(lwt.get("size", 1))
    pods: list[Pod] = []
    for group in range(int(spec.get("replicas", 1))):
        leader = f"{name}-{group}"
        base = {
            NAME_LABEL: name,
            GROUP_INDEX: str(group),
            GROUP_KEY: hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest(),  # noqa: S324 - LWS's key
        }
        for index in range(size):
            role = "leader" if index == 0 else "worker"
            template = (
                lwt["leaderTemplate"] if index == 0 and "leaderTemplate" in lwt else lwt["workerTemplate"]
            )
            labels = {**((template.get("metadata") or {}).get("labels") or {}), **base}
            if index:
                labels[WORKER_INDEX] = str(index)
            pods.append(
                Pod(
                    name=leader if index == 0 else f"{leader}-{index}",
                    role=role,
                    group=group,
                    labels=labels,
                    gpus=pod_gpus(template),
                    anti=anti_terms(template, labels),
                )
            )
    return pods


def repels(pod: Pod, node: Node) -> bool:
    """Inter-pod anti-affinity on the hostname: the incoming pod's terms, and the existing pods' terms."""
    for other in node.pods:
        for term in pod.anti:
            if term["topologyKey"] == HOSTNAME and selects(term, other.labels):
                return True
        for term in other.anti:
            if term["topologyKey"] == HOSTNAME and selects(term, pod.labels):
                return True
    return False


def place(pods: list[Pod], cluster: Cluster) -> Verdict:
    nodes = [Node(f"node-{i}", cluster.gpus) for i in range(cluster.nodes)]
    for pod in pods:
        reasons: Counter[str] = Counter()
        feasible = []
        for node in nodes:
            if pod.gpus > node.free:
                reasons[INSUFFICIENT] += 1
            elif repels(pod, node):
                reasons[ANTI_AFFINITY] += 1
            else:
                feasible.append(node)
        if not feasible:
            # as the scheduler's FitError: "<count> <reason>" strings, sorted as strings
            why = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
            return Verdict(
                "unplaceable",
                f"{pod.name} ({pod.role}, {pod.gpus} GPUs) cannot be placed: "
                f"0/{cluster.nodes} nodes are available: {why}.",
            )
        # GPUs do not enter the default score: worst case, join a node that already holds the group
        chosen = next((n for n in feasible if any(p.group == pod.group for p in n.pods)), feasible[0])
        chosen.pods.append(pod)
        chosen.free -= pod.gpus
        pod.node = chosen.name
    for node in nodes:
        for group, count in Counter(p.group for p in node.pods).items():
            if count > 1:
                names = ", ".join(p.name for p in node.pods if p.group == group)
                return Verdict(
                    "packs",
                    f"{names} can share {node.name}: nothing keeps a group's pods on distinct nodes (add the "
                    f"required pod anti-affinity on {HOSTNAME} that bwstack renders for --nodes > 1)",
                )
    where = "; ".join(f"{p.name} ({p.role}, {p.gpus} GPUs) -> {p.node}" for p in pods)
    size = max(Counter(p.group for p in pods).values(), default=0)
    return Verdict("fits" if size <= 1 else "spreads", where)


def simulate(lws: dict[str, Any], cluster: Cluster) -> Verdict:
    """The verdict for one LeaderWorkerSet on ``cluster``."""
    return place(group_pods(lws), cluster)
