"""The one launch spec: what the server of one profile gets, built once from (stack, profile, variant).

:class:`LaunchSpec` holds the SGLang argv (model flags table-driven from :data:`sglang_cli.MODEL_FLAGS`,
the listen address, the backend flags spelt by the variant's parser snapshot, the extra args), the container
environment, the deep healthcheck's command, the image, the port and the GPUs, and this module names the
paths inside the serving image. Compose (:mod:`bwstack.render.compose`), multi-host Compose
(:mod:`bwstack.render.multihost`)
and Kubernetes (:mod:`bwstack.render.k8s`) only lay the spec out in their syntax; ``explain``, the rules and
the sweep's fast mode read their argv and env from it, so every room starts the same server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from bwstack.errors import UserError
from bwstack.stack import hangbound, snapshots
from bwstack.stack.baselines import load_baseline
from healthchecks import common, imagelayout, norestart

if TYPE_CHECKING:
    from bwstack.stack.schema import Stack

# Paths inside the serving image: the in-image contract (healthchecks/common.py) is their one home; the
# Dockerfile creates them (tests check both agree).
#: the secret files a stack may mount (under SECRETS_DIR), each switched on by the stack setting of its name
SECRETS = ("hf_token", "api_key")
#: where SGLang listens inside the container (the host side binds stack.bind_address)
LISTEN_HOST = "0.0.0.0"  # noqa: S104 - inside the container
#: the labels every renderer puts on a profile's service (and the sweep and `up` read back)
LABEL_PROFILE = "io.bwstack.profile"
LABEL_VARIANT = "io.bwstack.variant"
LABEL_EXPECT = "io.bwstack.expect"
#: SGLang's argparse dest for the pipeline stages (``--pp-size`` / ``--pipeline-parallel-size``, default 1)
PP_DEST = "pp_size"
#: the SGLang flags that join one node to a multi-node group (the same spelling in 0.5.9 and 0.5.23)
DIST_FLAGS = ("--dist-init-addr", "--nnodes", "--node-rank")


class LaunchError(Exception):
    """A profile that load_stack accepted cannot be launched: a bug in bwstack, not in the user's input."""


def image_ref(stack: Stack, variant_name: str) -> str:
    """The serving image of a variant: ``<stack.image_repo>:<variant>``."""
    return imagelayout.image_ref(stack.settings.image_repo, variant_name)


def model_path_in_container(stack: Stack, profile_name: str) -> str:
    """``--model-path``: a tiny model's folder in the mounted cache, else the path or repo as written."""
    name = stack.model_path_for(profile_name)
    return f"{imagelayout.HF_HOME}/{name}" if name in stack.tiny_models else name


def jit_volume(variant_name: str) -> str:
    """One JIT-cache volume per variant: an upgrade never reuses kernels compiled by another version."""
    return "jit-" + variant_name.replace(".", "-")


def stack_secrets(stack: Stack) -> tuple[str, ...]:
    """The secrets the stack sets (mounted as files under SECRETS_DIR)."""
    return tuple(name for name in SECRETS if getattr(stack.settings, name))


def launch_spec(stack: Stack, profile_name: str, variant: str | None = None) -> LaunchSpec:
    """The launch spec of one profile, with its own variant or ``variant`` (``bwstack explain --variant``)."""
    stack.profile(profile_name)  # UserError for an unknown name
    return LaunchSpec(stack, profile_name, variant or stack.variant_name_for(profile_name))


def dist_argv(address: str, nnodes: str, rank: str) -> list[str]:
    """The multi-node argv: the flags that join one node to the group, with the values as each renderer
    spells them (a compose ``${DIST_INIT_ADDR}``, LWS's ``$(LWS_WORKER_INDEX)``)."""
    return [DIST_FLAGS[0], address, DIST_FLAGS[1], nnodes, DIST_FLAGS[2], rank]


@dataclass(frozen=True)
class Mount:
    """One volume the server mounts at ``target``: ``volume`` names it (a compose named volume, a Kubernetes
    claim); ``host_folder``, when set, is the host folder Compose binds there instead."""

    volume: str
    target: str
    host_folder: str | None = None


def variant_mounts(stack: Stack, variant: str) -> tuple[Mount, ...]:
    """The volumes a server of ``variant`` mounts, whatever renders it (compose, Kubernetes, the image's
    self-check): the model cache at HF_HOME (a host folder where ``model_cache_path`` is set) and the
    variant's own JIT cache."""
    settings = stack.settings
    return (
        Mount(settings.model_cache, imagelayout.HF_HOME, settings.model_cache_path),
        Mount(jit_volume(variant), imagelayout.JIT_CACHE),
    )


@dataclass(frozen=True)
class Placement:
    """One replica over ``nodes`` hosts: exactly one rank group per host (a Kubernetes pod kept apart from
    its group by required anti-affinity, a multi-host Compose service started on its own host), each
    reserving ``gpus_per_node`` GPUs (None: a CPU profile reserves none)."""

    nodes: int
    gpus_per_node: int | None


@dataclass(frozen=True, eq=False)
class LaunchSpec:
    """One profile's server on one variant. Each part is computed on first use, once."""

    stack: Stack
    profile: str
    variant: str

    @property
    def image(self) -> str:
        return image_ref(self.stack, self.variant)

    @property
    def port(self) -> int:
        return self.stack.settings.port

    @property
    def gpus(self) -> int | None:
        """GPUs of one replica (tp x pp); None for a profile that runs on the CPU."""
        return self.world_size if self.stack.device_for(self.profile) == "gpu" else None

    @cached_property
    def pp_size(self) -> int:
        """Pipeline stages: a ``--pp-size`` in the extra args (any spelling the variant parses), else 1."""
        snapshot = self.stack.snapshot(self.variant)
        argv = self.extra_argv
        for index, arg in enumerate(argv):
            option, has_value, value = arg.partition("=")
            flag = snapshot.flag(option)
            if flag is None or flag.dest != PP_DEST:
                continue
            if not has_value:
                value = argv[index + 1] if index + 1 < len(argv) else ""
            if not value.isdigit() or int(value) < 1:
                raise LaunchError(f"profile {self.profile}: {option} {value!r} is not a positive integer")
            return int(value)
        return 1

    @property
    def world_size(self) -> int:
        """Ranks (one GPU each) of one replica: model.tp_size x pp_size."""
        return self.stack.model.tp_size * self.pp_size

    def placement(self, nodes: int) -> Placement:
        """How one replica spreads over ``nodes`` hosts: one rank group (pod, compose service) per node,
        each with the node's share of tp x pp GPUs. UserError when ``nodes`` does not divide tp x pp."""
        if nodes < 1:
            raise UserError(f"--nodes must be 1 or more, got {nodes}", field="--nodes")
        tp_size, pp_size = self.stack.model.tp_size, self.pp_size
        if self.world_size % nodes:
            world = f"tp_size {tp_size}" + (f" x pp_size {pp_size}" if pp_size > 1 else "")
            raise UserError(
                f"{world} cannot be split evenly over {nodes} nodes; --nodes must divide model.tp_size"
                + (" x pp_size" if pp_size > 1 else ""),
                file=self.stack.path,
                line=self.stack.line_of("model", "tp_size"),
                field="model.tp_size",
            )
        gpus = self.gpus
        return Placement(nodes=nodes, gpus_per_node=None if gpus is None else gpus // nodes)

    @property
    def mounts(self) -> tuple[Mount, ...]:
        """The volumes every renderer mounts (:func:`variant_mounts`)."""
        return variant_mounts(self.stack, self.variant)

    @property
    def shm_size(self) -> str:
        """The server's /dev/shm size: the profile's ``shm_size``, else stack.shm_size."""
        return self.stack.profile(self.profile).shm_size or self.stack.settings.shm_size

    @property
    def restart(self) -> str:
        """The restart policy: ``no`` for a known-bad profile (its failure is the expected result), else
        stack.restart."""
        return "no" if self.stack.profile(self.profile).known_bad else self.stack.settings.restart

    @property
    def secrets(self) -> tuple[str, ...]:
        return stack_secrets(self.stack)

    @property
    def labels(self) -> dict[str, str]:
        """The ``io.bwstack.*`` labels of the profile's service (compose labels, Kubernetes labels)."""
        return {
            LABEL_PROFILE: self.profile,
            LABEL_VARIANT: self.variant,
            LABEL_EXPECT: self.stack.profile(self.profile).expect,
        }

    @property
    def annotations(self) -> dict[str, str]:
        """The description; for a known-bad profile also its expected failure and the evidence."""
        profile = self.stack.profile(self.profile)
        notes = {"io.bwstack.description": " ".join(profile.description.split())}
        if profile.known_bad:
            why = " ".join(profile.why.split())
            notes["io.bwstack.expected-failure"] = f"{profile.expect}: {why}" if why else profile.expect
            notes["io.bwstack.evidence"] = "; ".join(profile.evidence)
        return notes

    # --- argv ---------------------------------------------------------------------------------------------

    @cached_property
    def model_args(self) -> dict[str, tuple[str, ...]]:
        """Model settings as flags, by :data:`sglang_cli.MODEL_FLAGS` key, in that table's order (unset
        settings absent; a true boolean is the flag alone)."""
        model = self.stack.model
        found: dict[str, tuple[str, ...]] = {}
        for key, flag in snapshots.MODEL_FLAGS.items():
            if key == "path":
                value: object = model_path_in_container(self.stack, self.profile)
            else:
                value = getattr(model, key)
            if value is None or value is False or value == "":
                continue
            if value is True:
                found[key] = (flag,)
            else:
                found[key] = (flag, repr(value) if isinstance(value, float) else str(value))
        return found

    def model_argv(self, *keys: str) -> list[str]:
        """The flags of the model settings ``keys`` (every one when none is named), in table order."""
        return [arg for key, args in self.model_args.items() if not keys or key in keys for arg in args]

    def listen_argv(self, host: str = LISTEN_HOST) -> list[str]:
        return ["--host", host, "--port", str(self.port)]

    @cached_property
    def backend_argv(self) -> list[str]:
        """The profile's backend fields, spelt the way the variant's parser snapshot parses them."""
        snapshot = self.stack.snapshot(self.variant)
        argv: list[str] = []
        for key, value in self.stack.profile(self.profile).backends().items():
            if value is None:
                continue
            option = snapshot.option_for(key)
            spelled = snapshot.spell_value(key, value)
            if option is None or spelled is None:  # load_stack already refused these
                raise LaunchError(
                    f"profile {self.profile}: {key}={value} not renderable for {snapshot.label}"
                )
            argv += [option, spelled]
        return argv

    @property
    def extra_argv(self) -> list[str]:
        """model.extra_args, then the profile's extra_args, as written."""
        return [*self.stack.model.extra_args, *self.stack.profile(self.profile).extra_args]

    def server_argv(self, listen_host: str = LISTEN_HOST) -> list[str]:
        """The server's whole argv: model flags, listen address, backend flags, extra args (a multi-host
        rank listens on another address than the container's all-interfaces default)."""
        return [*self.model_argv(), *self.listen_argv(listen_host), *self.backend_argv, *self.extra_argv]

    @cached_property
    def argv(self) -> list[str]:
        """:meth:`server_argv` on the container's listen address."""
        return self.server_argv()

    # --- environment --------------------------------------------------------------------------------------

    @property
    def stack_env(self) -> dict[str, str]:
        """The env the stack file asks for: variant switches < model env < profile env."""
        env = dict(self.stack.variant(self.variant).env)
        env.update(self.stack.model.env)
        env.update(self.stack.profile(self.profile).env)
        return env

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The container environment, sorted: offline default < :attr:`stack_env` < bwstack's own < ``extra``.

        Values may use compose's ``${NAME:-default}`` (the renderers resolve it their way). bwstack's own
        include the quality probe's calibrated baseline (``bwstack calibrate``), which the Docker / Kubernetes
        healthcheck and the serve wrapper's readiness probe both read from the environment.
        """
        # `bwstack up` and the sweep set BWSTACK_HF_HUB_OFFLINE=1 once `bwstack fetch` verified the model (a
        # default: model or profile env may set HF_HUB_OFFLINE themselves)
        env: dict[str, str] = {"HF_HUB_OFFLINE": "${BWSTACK_HF_HUB_OFFLINE:-0}"}
        env.update({name: compose_literal(value) for name, value in self.stack_env.items()})
        env["BWSTACK_PROFILE"] = self.profile
        env["BWSTACK_FAIL_FAST"] = "1"
        env["BWSTACK_LINGER"] = "${BWSTACK_HC_INTERVAL:-" + self.stack.settings.healthcheck.interval + "}"
        env[common.ENV_HC_RETRIES] = str(self.stack.settings.healthcheck.retries)
        # `bwstack up --retry` sets it: the wrapper forgets a remembered verdict (healthchecks/norestart.py)
        env[norestart.ENV_RETRY] = "${" + norestart.ENV_RETRY + ":-0}"
        env[common.ENV_HC_HANG_AFTER] = str(self.hang_bound.seconds)

        # the quality probe's calibrated passage score (baselines.json), of the model this profile serves
        baseline = load_baseline(self.stack, self.profile)
        if baseline is not None:
            env.update(baseline.env())
        if extra:
            env.update(extra)
        return dict(sorted(env.items()))

    @cached_property
    def hang_bound(self) -> hangbound.HangBound:
        """Seconds in flight without a token before the server is ``hang``, derived from this server's longest
        prefill pass (:mod:`bwstack.stack.hangbound`); the profile's env may set ``BWSTACK_HC_HANG_AFTER``."""
        baseline = load_baseline(self.stack, self.profile)
        argv = [*self.model_argv(), *self.extra_argv]  # the sizes it reads; backend flags play no part
        speed = baseline.prefill_tok_s if baseline is not None else None
        derived = hangbound.derive(self.stack, self.profile, argv, speed)
        chosen = self.stack_env.get(common.ENV_HC_HANG_AFTER)
        if chosen is not None and chosen.strip().isdigit() and int(chosen) > 0:
            why = f"{common.ENV_HC_HANG_AFTER} set in the stack file's env"
            return hangbound.HangBound(
                int(chosen), derived.context, derived.chunk, derived.prefill_tok_s, why
            )
        return derived

    # --- healthcheck --------------------------------------------------------------------------------------

    def requested(self, *, spelled: bool = False) -> dict[str, str]:
        """What the profile asks for: every backend field it sets, and the TP size. ``spelled``: values as
        the variant's SGLang spells them, ``auto`` left out (what /server_info can be compared with)."""
        snapshot = self.stack.snapshot(self.variant)
        found: dict[str, str] = {}
        for key, value in self.stack.profile(self.profile).backends().items():
            if value is None or (spelled and value == "auto"):
                continue
            found[key] = (snapshot.spell_value(key, value) or value) if spelled else value
        found["tp_size"] = str(self.stack.model.tp_size)
        return found

    @cached_property
    def expectations(self) -> list[str]:
        """``key=value`` pairs the healthcheck compares with /server_info."""
        return [f"{key}={value}" for key, value in self.requested(spelled=True).items()]

    @cached_property
    def healthcheck(self) -> list[str]:
        """The deep check in light mode, as an argv (no shell; Compose puts ``CMD`` in front)."""
        return self.healthcheck_argv()

    def healthcheck_argv(
        self, *, mode: str = "light", url: str | None = "", state: str = imagelayout.HC_STATE
    ) -> list[str]:
        """The deep check as an argv: ``url`` "" is this container's server, None leaves ``--url`` out (the
        check then reads ``BWSTACK_HC_URL``, as a Kubernetes worker does)."""
        hc = self.stack.settings.healthcheck
        test = ["python3", f"{imagelayout.HC_DIR}/warmup.py"]
        if url is not None:
            test += ["--url", url or f"http://127.0.0.1:{self.port}"]
        test += [
            "--timeout",
            "${BWSTACK_HC_CHECK_TIMEOUT:-" + str(hc.check_timeout) + "}",
            "--mode",
            mode,
            "--decode-every",
            str(hc.decode_every),
            "--log",
            imagelayout.SERVER_LOG,
            "--state",
            state,
        ]
        if self.stack.settings.api_key:
            test += ["--api-key-file", f"{imagelayout.SECRETS_DIR}/api_key"]
        if hc.expect_text:
            test += ["--expect-text", compose_literal(hc.expect_text)]
        for pair in self.expectations:
            test += ["--expect", compose_literal(pair)]
        return test


def compose_literal(value: str) -> str:
    """A user's value in compose syntax: every ``$`` doubled, so Compose neither substitutes the host's
    environment into it (``$HOME``, ``${X}``) nor refuses it (``$`` before a non-name character). The launch
    spec's environment and healthcheck are compose syntax (bwstack's own ``${NAME:-default}`` stay live);
    its argv is literal and the renderers escape it (compose: this function, k8s: ``k8s.literal``)."""
    return value.replace("$", "$$")
