"""Kubernetes rendering: profiles.yaml -> LeaderWorkerSet + Service manifests through the real templates.

The manifests are checked three ways: as YAML that round-trips, against the vendored LeaderWorkerSet CRD's
openAPIV3Schema (with unknown fields refused), and against Kubernetes' own schemas from kubernetes-validate in
strict mode (Service as is; the leader and worker pod templates as Pods; the claim templates as PVCs).
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes_validate import utils as kv
from ruamel.yaml import YAML

from bwstack import cli, launch
from bwstack.errors import UserError
from bwstack.render import k8s
from bwstack.render.compose import RenderError
from bwstack.stack import loader, schema
from healthchecks import imagelayout
from support.stack import edit_yaml

#: the oldest Kubernetes minor we claim and the newest kubernetes-validate knows (pinned, not "latest")
K8S_VERSIONS = ("1.30", "1.37")
WARMUP = ["python3", "/opt/bwstack/healthchecks/warmup.py"]
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


@pytest.fixture(scope="module")
def manifests(module_stack: schema.Stack) -> dict[str, list[dict[str, Any]]]:
    """Every profile rendered for two nodes: profile -> [LeaderWorkerSet, Service]."""
    return {
        output.path.stem: k8s.documents(output.text)
        for output in k8s.render_k8s(module_stack, nodes=2, out=Path("k8s"))
    }


def templates(lws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    lwt = lws["spec"]["leaderWorkerTemplate"]
    return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}


def containers(lws: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for role, template in templates(lws).items():
        for container in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
            yield role, container


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, sub in value.items():
            yield key, sub
            yield from walk(sub)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


# --- shape --------------------------------------------------------------------------------------------------


def test_every_profile_is_one_lws_and_one_service(
    module_stack: schema.Stack, manifests: dict[str, Any]
) -> None:
    assert set(manifests) == set(module_stack.profiles)
    for name, docs in manifests.items():
        assert [d["kind"] for d in docs] == ["LeaderWorkerSet", "Service"]
        lws, svc = docs
        assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
        assert lws["metadata"]["name"] == f"bwstack-{name}"
        assert svc["metadata"]["name"] == f"bwstack-{name}-api"
        spec = lws["spec"]
        # LeaderReady would deadlock: the leader is Ready only after every rank joined (see the template)
        assert spec["startupPolicy"] == "LeaderCreated"
        assert spec["leaderWorkerTemplate"]["size"] == 2
        assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
        labels = lws["metadata"]["labels"]
        assert labels["io.bwstack.profile"] == name
        assert labels["io.bwstack.variant"] == module_stack.variant_name_for(name)
        assert labels["io.bwstack.expect"] == module_stack.profiles[name].expect


def test_yaml_round_trips(module_stack: schema.Stack) -> None:
    text = k8s.render_profile(module_stack, "dsa-fi-sparse-fp8", 2)
    docs = k8s.documents(text)
    buffer = io.StringIO()
    YAML(typ="safe").dump_all(docs, buffer)
    assert k8s.documents(buffer.getvalue()) == docs
    assert all(isinstance(a, str) for _, c in containers(docs[0]) for a in c["args"])
    assert all(isinstance(e["value"], str) for _, c in containers(docs[0]) for e in c["env"])


def test_tensor_parallel_across_nodes(module_stack: schema.Stack) -> None:
    for nodes, gpus in ((1, "8"), (2, "4"), (4, "2"), (8, "1")):
        lws = k8s.documents(k8s.render_profile(module_stack, "dense-fi-bf16", nodes))[0]
        assert lws["spec"]["leaderWorkerTemplate"]["size"] == nodes
        for _, container in containers(lws):
            assert container["resources"]["limits"] == {"nvidia.com/gpu": gpus}
            argv = container["args"]
            assert option(argv, "--tp-size") == "8"  # total over all nodes
            assert argv[-6:] == [
                "--dist-init-addr",
                "$(LWS_LEADER_ADDRESS):20000",
                "--nnodes",
                "$(LWS_GROUP_SIZE)",
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
            ]


def test_args_and_env_come_from_the_compose_logic(
    module_stack: schema.Stack, manifests: dict[str, Any]
) -> None:
    for name, (lws, _) in manifests.items():
        for role, container in containers(lws):
            args = [a.replace("$$", "$") for a in container["args"][:-6]]
            assert args == launch.launch_spec(module_stack, name).argv
            env = {e["name"]: e["value"] for e in container["env"]}
            expected = {
                k: k8s.from_compose(v) for k, v in launch.launch_spec(module_stack, name).env().items()
            }
            if role == "worker":
                expected["BWSTACK_HC_URL"] = "http://$(LWS_LEADER_ADDRESS):30000"
            assert env == expected
            assert container["image"] == launch.image_ref(module_stack, module_stack.variant_name_for(name))
    env = {
        e["name"]: e["value"]
        for e in manifests["dsa-fi-sparse-fp8"][0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"][
            "containers"
        ][0]["env"]
    }
    assert env["SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD"] == "0"  # the profile's env switch
    assert env["BWSTACK_LINGER"] == "30s"  # compose's ${BWSTACK_HC_INTERVAL:-30s}, resolved


def test_only_the_leader_serves_and_the_service_selects_it(manifests: dict[str, Any]) -> None:
    for lws, svc in manifests.values():
        tpl = templates(lws)
        leader = tpl["leader"]["spec"]["containers"][0]
        worker = tpl["worker"]["spec"]["containers"][0]
        assert leader["ports"] == [{"name": "http", "containerPort": 30000, "protocol": "TCP"}]
        assert "ports" not in worker
        selector = svc["spec"]["selector"]
        assert selector == {"leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"], "role": "leader"}
        # LWS adds leaderworkerset.sigs.k8s.io/name to every pod; role tells leader from worker
        assert tpl["leader"]["metadata"]["labels"]["role"] == "leader"
        assert tpl["worker"]["metadata"]["labels"]["role"] == "worker"
        assert svc["spec"]["ports"] == [
            {"name": "http", "port": 30000, "targetPort": "http", "protocol": "TCP"}
        ]


def test_pod_security_shm_cache_and_secrets(module_stack: schema.Stack, manifests: dict[str, Any]) -> None:
    lws = manifests["dense-fi-bf16"][0]
    lwt = lws["spec"]["leaderWorkerTemplate"]
    claims = {
        c["metadata"]["name"]: c["spec"]["resources"]["requests"]["storage"]
        for c in lwt["volumeClaimTemplates"]
    }
    assert claims == {"hf-cache": "450Gi", "jit-v0-5-23-cu130": "32Gi"}  # 371 GB checkpoint + 20 %
    assert lwt["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    for template in templates(lws).values():
        spec = template["spec"]
        assert spec["securityContext"]["runAsUser"] == 10001
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["fsGroup"] == 10001
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
        sources = volumes["secrets"]["projected"]["sources"]
        assert sources == [
            {"secret": {"name": "bwstack-hf-token", "items": [{"key": "hf_token", "path": "hf_token"}]}}
        ]
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
        assert mounts == {
            "/dev/shm": "dshm",
            imagelayout.HF_HOME: "hf-cache",
            imagelayout.JIT_CACHE: "jit-v0-5-23-cu130",
            "/run/secrets": "secrets",
        }
        assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_no_secret_is_inlined(manifests: dict[str, Any]) -> None:
    for lws, _ in manifests.values():
        for key, value in walk(lws):
            assert key != "secretKeyRef"
            if key == "name" and isinstance(value, str):
                assert value not in ("HF_TOKEN", "BWSTACK_API_KEY")
        for _, container in containers(lws):
            assert "--api-key" not in container["args"]


def test_api_key_secret_when_enabled(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["stack"].update(api_key=True))
    stack = loader.load_stack(stack_copy)
    lws = k8s.documents(k8s.render_profile(stack, "dense-fi-bf16", 2))[0]
    for template in templates(lws).values():
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        names = [s["secret"]["name"] for s in volumes["secrets"]["projected"]["sources"]]
        assert names == ["bwstack-hf-token", "bwstack-api-key"]
    for _, container in containers(lws):
        for probe in PROBES:
            assert option(container[probe]["exec"]["command"], "--api-key-file") == "/run/secrets/api_key"


def test_known_bad_profiles_carry_their_expected_failure(
    module_stack: schema.Stack, manifests: dict[str, Any]
) -> None:
    for name, (lws, _) in manifests.items():
        notes = lws["metadata"]["annotations"]
        profile = module_stack.profiles[name]
        if profile.known_bad:
            assert notes["io.bwstack.expected-failure"].startswith(profile.expect + ": ")
            assert notes["io.bwstack.evidence"] == "; ".join(profile.evidence)
            assert templates(lws)["leader"]["metadata"]["annotations"] == notes
        else:
            assert "io.bwstack.expected-failure" not in notes
    assert (
        "sgl-project/sglang#29562"
        in manifests["dsa-trtllm-fp8"][0]["metadata"]["annotations"]["io.bwstack.evidence"]
    )


# --- probes -------------------------------------------------------------------------------------------------


def test_every_probe_runs_the_healthcheck(manifests: dict[str, Any]) -> None:
    """Every container of every pod template: three exec probes of warmup.py in the right mode, nothing else."""
    seen = 0
    for lws, svc in manifests.values():
        for role, container in containers(lws):
            for probe in PROBES:
                handler = container[probe]
                assert set(handler) - {
                    "periodSeconds",
                    "timeoutSeconds",
                    "failureThreshold",
                    "successThreshold",
                } == {"exec"}
                command = handler["exec"]["command"]
                assert command[:2] == WARMUP
                want = "full" if (role, probe) == ("leader", "readinessProbe") else "light"
                assert option(command, "--mode") == want
                assert option(command, "--log") == imagelayout.SERVER_LOG
                if role == "leader":
                    assert option(command, "--url") == "http://127.0.0.1:30000"
                else:  # workers reach the group through the leader, by env (LWS_LEADER_ADDRESS)
                    assert "--url" not in command
                seen += 1
        for key, _ in walk([lws, svc]):
            assert key not in ("httpGet", "tcpSocket", "grpc")
    assert seen == len(manifests) * 2 * len(PROBES)


def test_probe_command_is_the_compose_healthcheck(
    module_stack: schema.Stack, manifests: dict[str, Any]
) -> None:
    for name, (lws, _) in manifests.items():
        leader = templates(lws)["leader"]["spec"]["containers"][0]
        compose = [k8s.from_compose(a) for a in launch.launch_spec(module_stack, name).healthcheck]
        assert leader["livenessProbe"]["exec"]["command"] == compose
        assert option(compose, "--timeout") == str(module_stack.settings.healthcheck.check_timeout)
        for pair in launch.launch_spec(module_stack, name).expectations:
            assert pair in leader["readinessProbe"]["exec"]["command"]


def test_probe_states_do_not_collide(manifests: dict[str, Any]) -> None:
    """readiness runs concurrently with liveness, so it keeps its own state file; startup hands over to liveness."""
    for lws, _ in manifests.values():
        for _, container in containers(lws):
            states = {p: option(container[p]["exec"]["command"], "--state") for p in PROBES}
            assert states["startupProbe"] == states["livenessProbe"] == imagelayout.HC_STATE
            assert states["readinessProbe"] != imagelayout.HC_STATE


def test_probe_timing_covers_the_load(module_stack: schema.Stack, manifests: dict[str, Any]) -> None:
    hc = module_stack.settings.healthcheck
    for lws, _ in manifests.values():
        for _, container in containers(lws):
            startup = container["startupProbe"]
            assert startup["failureThreshold"] * startup["periodSeconds"] >= 45 * 60  # start_period 45m
            for probe in PROBES:
                assert (
                    container[probe]["timeoutSeconds"] > hc.check_timeout
                )  # warmup.py reports before a kill
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["periodSeconds"] == 30
                assert container[probe]["failureThreshold"] == hc.retries


def test_probe_timing_follows_the_settings(stack_copy: Path) -> None:
    text = (
        stack_copy.read_text()
        .replace("    start_period: 45m", "    start_period: 2h")
        .replace("    check_timeout: 75", "    check_timeout: 120")
    )
    stack_copy.write_text(text)
    lws = k8s.documents(k8s.render_profile(loader.load_stack(stack_copy), "dense-fi-bf16", 2))[0]
    for _, container in containers(lws):
        assert (
            container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 7200
        )
        assert container["livenessProbe"]["timeoutSeconds"] >= 125
        assert option(container["livenessProbe"]["exec"]["command"], "--timeout") == "120"


# --- schemas ------------------------------------------------------------------------------------------------


def test_broken_template_output_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="not valid YAML"):
        k8s.documents("a: 1\n  b: [\n")


def test_lws_matches_the_vendored_crd(manifests: dict[str, Any]) -> None:
    for lws, _ in manifests.values():
        k8s.validate_lws(lws)  # raises RenderError


def test_crd_validation_refuses_unknown_fields_and_bad_values(manifests: dict[str, Any]) -> None:
    lws = manifests["dense-fi-bf16"][0]
    typo = copy.deepcopy(lws)
    typo["spec"]["leaderWorkerTemplate"]["restartPolicyy"] = "None"
    with pytest.raises(RenderError, match="restartPolicyy"):
        k8s.validate_lws(typo)
    deep = copy.deepcopy(lws)
    deep["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(RenderError, match="livenesProbe"):
        k8s.validate_lws(deep)
    bad = copy.deepcopy(lws)
    bad["spec"]["startupPolicy"] = "WorkersFirst"
    with pytest.raises(RenderError, match="startupPolicy"):
        k8s.validate_lws(bad)
    bad = copy.deepcopy(lws)
    del bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    with pytest.raises(RenderError, match="workerTemplate"):
        k8s.validate_lws(bad)


def as_pod(template: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name},
        "spec": template["spec"],
    }


def kube_objects(lws: dict[str, Any], svc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """What Kubernetes' own schemas can check: the Service, the pod templates as Pods, the claims as PVCs."""
    yield svc
    for role, template in templates(lws).items():
        yield as_pod(template, f"{lws['metadata']['name']}-{role}")
    for claim in lws["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]:
        yield {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_schemas_strict(manifests: dict[str, Any], version: str) -> None:
    for lws, svc in manifests.values():
        for obj in kube_objects(lws, svc):
            assert kv.validate(obj, version, strict=True) == version


def test_kubernetes_validation_is_strict(manifests: dict[str, Any]) -> None:
    """The check above would catch a misspelt field in a container (strict mode is really on)."""
    lws = copy.deepcopy(manifests["dense-fi-bf16"][0])
    leader = templates(lws)["leader"]
    leader["spec"]["containers"][0]["startupProbe"]["exec"]["comand"] = ["true"]
    with pytest.raises(kv.ValidationError, match="comand"):
        kv.validate(as_pod(leader, "x"), K8S_VERSIONS[-1], strict=True)


# --- conversions and names ----------------------------------------------------------------------------------


def test_compose_syntax_becomes_kubernetes_literals() -> None:
    assert k8s.from_compose("${BWSTACK_HC_INTERVAL:-30s}") == "30s"
    assert k8s.from_compose("${X-5}") == "5"
    assert k8s.from_compose("a$$b") == "a$b"
    assert k8s.literal("cost: $5 $(HOME)") == "cost: $$5 $$(HOME)"
    assert k8s.literal("${A:-$x}") == "$$x"
    assert (
        k8s.quantity("32gb") == "32Gi" and k8s.quantity("512m") == "512Mi" and k8s.quantity("1024") == "1024"
    )
    assert k8s.seconds("45m") == 2700 and k8s.seconds("90s") == 90 and k8s.seconds("500ms") == 1
    assert k8s.dns_label("jit-v0.5.23_cu130") == "jit-v0-5-23-cu130"


def test_dollar_in_profile_env_is_not_expanded_by_kubernetes(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["profiles"]["dsa-fi-sparse-fp8"]["env"].update(MY_VAR="$(HOME)"))
    lws = k8s.documents(k8s.render_profile(loader.load_stack(stack_copy), "dsa-fi-sparse-fp8", 2))[0]
    env = {e["name"]: e["value"] for e in templates(lws)["leader"]["spec"]["containers"][0]["env"]}
    assert env["MY_VAR"] == "$$(HOME)"


# --- bad input and the command line -------------------------------------------------------------------------


def test_bad_node_counts_and_profiles(module_stack: schema.Stack) -> None:
    with pytest.raises(UserError, match="--nodes must be 1 or more"):
        k8s.render_k8s(module_stack, nodes=0)
    with pytest.raises(UserError) as err:
        k8s.render_k8s(module_stack, nodes=3)
    assert err.value.field == "model.tp_size" and err.value.line is not None
    assert "cannot be split evenly over 3 nodes" in err.value.message
    with pytest.raises(UserError, match="unknown profile 'nope'"):
        k8s.render_k8s(module_stack, nodes=2, profiles=["nope"])


def test_sglang_without_multi_node_flags_is_refused(stack_copy: Path) -> None:
    snapshot = stack_copy.parent / "images" / "v0.5.9-cu130" / "sglang-args.json"
    raw = json.loads(snapshot.read_text())
    raw["flags"] = [f for f in raw["flags"] if f["dest"] != "node_rank"]
    snapshot.write_text(json.dumps(raw))
    stack = loader.load_stack(stack_copy)
    with pytest.raises(UserError, match="no --node-rank flag") as err:
        k8s.render_k8s(stack, nodes=2, profiles=["legacy-dense-fi-bf16"])
    assert err.value.file == str(snapshot)
    k8s.render_k8s(stack, nodes=2, profiles=["dense-fi-bf16"])  # the 0.5.23 variant still has it


def test_profile_name_must_make_a_kubernetes_name(stack_copy: Path) -> None:
    long_name = "x" * 60
    edit_yaml(stack_copy, lambda d: d["profiles"].insert(0, long_name, d["profiles"].pop("dense-fi-bf16")))
    stack = loader.load_stack(stack_copy)
    with pytest.raises(UserError, match="not a usable Kubernetes name") as err:
        k8s.render_k8s(stack, nodes=2, profiles=[long_name])
    assert err.value.field == f"profiles.{long_name}"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--nodes", "3"], "cannot be split evenly over 3 nodes"),
        (["--profile", "nope"], "unknown profile 'nope'"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(stack_copy: Path, args: list[str], needle: str) -> None:
    result = run_cli("render", "-f", str(stack_copy), "--target", "k8s", *args)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if not line.startswith("bwstack: warning:")]
    assert len(lines) == 1 and lines[0].startswith("bwstack: ") and needle in lines[0]
    assert "Traceback" not in result.stderr


def test_cli_nodes_zero_exits_2(stack_copy: Path) -> None:
    result = run_cli("render", "-f", str(stack_copy), "--target", "k8s", "--nodes", "0")
    lines = [line for line in result.stderr.splitlines() if not line.startswith("bwstack: warning:")]
    assert result.returncode == 2 and len(lines) == 1 and "--nodes" in lines[0]
    assert "Traceback" not in result.stderr


def test_cli_writes_per_profile_files_and_checks_drift(stack_copy: Path) -> None:
    """In-process (CliRunner), so the vendored CRD is parsed once per test session."""
    runner = CliRunner()
    folder = stack_copy.parent / "k8s"
    base = ["render", "-f", str(stack_copy), "--target", "k8s", "--nodes", "2", "--profile", "dense-fi-bf16"]
    result = runner.invoke(cli.main, [*base, "--profile", "dense-triton-auto"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["dense-fi-bf16.yaml", "dense-triton-auto.yaml"]
    assert runner.invoke(cli.main, [*base, "--check"]).exit_code == 0
    path = folder / "dense-fi-bf16.yaml"
    path.write_text(path.read_text().replace("failureThreshold: 270", "failureThreshold: 3", 1))
    drift = runner.invoke(cli.main, [*base, "--check"])
    assert drift.exit_code == 1 and "+              failureThreshold: 270" in drift.stdout
