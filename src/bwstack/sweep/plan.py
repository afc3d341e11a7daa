"""What a sweep runs: the requested profiles, re-targeted onto ``--variant``, and the stand-in fault that
makes each profile show its expected class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bwstack.errors import UserError
from bwstack.stack import snapshots
from bwstack.stack.schema import Stack

#: expected class -> the stand-in fault that produces it
STANDIN_FAULTS = {
    "healthy": "none",
    "nan": "nan",
    "assertion": "assertion",
    "unsupported_arch": "unsupported_arch",
    "device_assert": "device_assert",
    "oom": "oom",
    "backend_override": "override",
    "timeout": "hang",
}


@dataclass(frozen=True)
class Plan:
    """What a sweep runs: the stack (profiles re-targeted when --variant is given) and the profile names."""

    stack: Stack
    names: list[str]
    skipped: list[str] = field(default_factory=list)


def make_plan(stack: Stack, names: Sequence[str], *, variant: str | None, standin: bool) -> Plan:
    """Check the requested profiles (unknown name -> UserError) and, with --variant, move them onto it."""
    chosen = list(dict.fromkeys(names)) or list(stack.profiles)
    for name in chosen:
        stack.profile(name)
    skipped: list[str] = []
    if variant is not None:
        stack.variant(variant)  # UserError for an unknown variant
        stack, chosen, skipped = _retarget(stack, chosen, variant, explicit=bool(names))
        if not chosen:
            raise UserError(
                f"no selected profile is valid for variant {variant} (skipped: {', '.join(skipped)})"
            )
    if standin:
        for name in chosen:
            standin_fault(stack, name)
    return Plan(stack=stack, names=chosen, skipped=skipped)


def _retarget(
    stack: Stack, names: list[str], variant: str, *, explicit: bool
) -> tuple[Stack, list[str], list[str]]:
    snapshot = stack.snapshot(variant)
    profiles = dict(stack.profiles)
    kept, skipped = [], []
    for name in names:
        problem = _variant_problem(stack, name, snapshot)
        if problem is None:
            profiles[name] = profiles[name].model_copy(update={"variant": variant})
            kept.append(name)
        elif explicit:
            raise UserError(f"profile {name!r} cannot run on variant {variant}: {problem}", file=stack.path)
        else:
            skipped.append(f"{name} ({problem})")
    retargeted = replace(
        stack, profiles=profiles, variants=dict(stack.variants), snapshots=dict(stack.snapshots)
    )
    return retargeted, kept, skipped


def _variant_problem(stack: Stack, name: str, snapshot: snapshots.Snapshot) -> str | None:
    profile = stack.profile(name)
    for key, value in profile.backends().items():
        if value is None:
            continue
        if snapshot.option_for(key) is None:
            return f"{snapshot.label} has no flag for {key}"
        if snapshot.spell_value(key, value) is None:
            return f"{key} {value!r} is not valid for {snapshot.label}"
    for problem in snapshots.check_argv(snapshot, [*stack.model.extra_args, *profile.extra_args]):
        if not problem.message.startswith("deprecated:"):
            return problem.message
    return None


def standin_fault(stack: Stack, name: str) -> str:
    """The stand-in fault that makes profile ``name`` show its expected class; UserError if there is none."""
    expect = stack.profile(name).expect
    fault = STANDIN_FAULTS.get(expect)
    if fault is None:
        raise UserError(
            f"the CPU stand-in cannot imitate '{expect}' (it imitates: {', '.join(STANDIN_FAULTS)}); "
            "leave this profile out of the --standin sweep",
            file=stack.path,
            line=stack.line_of("profiles", name, "expect"),
            field=f"profiles.{name}.expect",
        )
    return fault


@dataclass
class Options:
    """Settings of one sweep run."""

    fast: bool
    standin: bool
    timeout_s: float
    keep: bool
    load_seconds: float | None
    #: ``--bench``: a bounded load against each healthy profile before it is stopped
    # (:mod:`bwstack.sweep.bench`)
    bench: bool = False
    #: ``--soak SECONDS``: sustained load with a stall watchdog on each healthy profile
    # (:mod:`bwstack.sweep.soak`)
    soak_s: float = 0.0
    #: ``--compare-to PROFILE``: each healthy row scored against this profile's recorded answers
    # (:mod:`bwstack.sweep.quality`)
    compare_to: str | None = None
    #: ``--retrieval`` (or ``--compare-to``): each healthy row's answers and needle retrieval recorded
    retrieval: bool = False


#: what a stand-in row's load and long-context checks are worth (report rows say it beside the verdict)
STANDIN_IMITATES = (
    "long-context probe, soak and hang watchdog ran against the stand-in's imitation (pseudo-generation on "
    "the CPU; its /metrics has no token counters, so the serve wrapper's hang watchdog is off): they test "
    "bwstack's plumbing, not the SM120 sparse-attention kernels"
)


def source_label(stack: Stack, options: Options) -> str:
    """Where a row's verdict came from, in words the report prints next to it."""
    if options.standin:
        return "stand-in (CPU imitation of SGLang; not a GPU result)"
    if stack.is_cpu:
        return "real SGLang on the CPU (tiny model; no GPU kernels)"
    return "real SGLang on this host's GPUs"
