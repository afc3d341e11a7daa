"""The pod rules a real API server enforces, run offline on each pod template of a rendered LeaderWorkerSet.

An LWS never validates its own pod templates: the CRD schema types them, but the LWS webhook skips the pod
spec and the CRD has no CEL rules, so a template with ``nvidia.com/gpu`` request 2 and limit 4 is accepted as
an LWS and fails only later, when the controller's StatefulSet is refused. These checks run the rules of
kubernetes/kubernetes ``pkg/apis/core/validation/validation.go`` (@000f2605) that matter for these manifests,
and word each problem as the API server does (``field.Error.Error()`` of kubernetes/apimachinery
``pkg/util/validation/field/errors.go``, messages from ``pkg/util/validation/validation.go`` @eed236ce):

- extended resources (``validateResourceRequirements``, ``ValidateResourceQuantityValue``): integer,
  not negative, a limit for every request, request equal to limit;
- names (``validateContainerCommon``, ``ValidateVolumes``, ``ValidateVolumeMounts``): DNS-1123 labels, unique,
  every mount names a volume (or a claim template, which the StatefulSet turns into one), mount paths unique;
- probes (``validateProbe``, ``validateHandler``, ``validateLivenessProbe``, ``validateStartupProbe``,
  ``validateReadinessProbe``): exactly one handler, a non-empty exec command, non-negative timings,
  successThreshold 1 for liveness and startup, no terminationGracePeriodSeconds on readiness;
- env (``ValidateEnv``, ``validateEnvVarValueFrom``): C-like names (the strict rule every supported
  Kubernetes applies), a string value, ``value`` and ``valueFrom`` not both; and a ``$(NAME)`` reference must
  name a variable defined before it (LWS injects its own first), else the kubelet leaves it unexpanded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

#: what the LWS pod webhook puts first in every container (lws pkg/utils/pod/pod_utils.go AddLWSVariables)
LWS_ENV = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
PROBE_INTS = (
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
)

# kubernetes/apimachinery pkg/util/validation/validation.go and pkg/api/validation/generic.go
NEGATIVE = "must be greater than or equal to 0"
NOT_INTEGER = "must be an integer"  # validation.go isNotIntegerErrorMsg
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*$")
_ENV_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_NAME_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit"
)
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    **{unit: Decimal(10) ** (3 * (i + 1)) for i, unit in enumerate("kMGTPE")},
    **{unit: Decimal(1024) ** (i + 1) for i, unit in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}
_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")
_OMIT = object()
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


@dataclass(frozen=True)
class Problem:
    """One field error, printed as the API server prints it: ``<path>: <Type>[: <value>][: <detail>]``."""

    path: str
    kind: str  # "Invalid value", "Required value", "Duplicate value", "Not found", "Forbidden"
    value: Any = _OMIT
    detail: str = ""

    def line(self) -> str:
        text = f"{self.path}: {self.kind}"
        if self.value is not _OMIT:
            value = self.value
            shown = str(value).lower() if isinstance(value, bool) else value
            text += f": {shown}" if isinstance(value, int) else f": {json.dumps(value)}"
        return text + (f": {self.detail}" if self.detail else "")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery ``RegexError``, spacing included."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def dns1123_label(value: str) -> list[str]:
    """apimachinery ``IsDNS1123Label``: the messages for a name that is not one."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not re.fullmatch(_DNS1123_LABEL_FMT, value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def env_var_name(value: str) -> list[str]:
    """apimachinery ``IsEnvVarName`` (the strict rule; 1.34+ relaxes it, 1.30-1.33 do not)."""
    errors = []
    if not re.fullmatch(_ENV_NAME_FMT, value):
        errors.append(regex_error(_ENV_NAME_MSG, _ENV_NAME_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1"))
    if value == ".":
        errors.append("must not be '.'")
    elif value == "..":
        errors.append("must not be '..'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def quantity(value: Any) -> Decimal | None:
    """A resource quantity's value (``4``, ``"4"``, ``"2500m"``, ``"1Gi"``); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(str(value))
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        base = Decimal(number)
        if suffix and suffix[0] in "eE":
            return base * Decimal(10) ** int(suffix[1:])
        return base * _SUFFIX[suffix or ""]
    except (InvalidOperation, KeyError):
        return None


def canonical(value: Decimal) -> str:
    """How ``resource.Quantity.String()`` prints a whole number of a decimal-SI quantity."""
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def overcommit_allowed(name: str) -> bool:
    """kubernetes ``helper.IsOvercommitAllowed``: native (no domain or kubernetes.io), not hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def extended(name: str) -> bool:
    """kubernetes ``helper.IsExtendedResourceName``: outside kubernetes.io, not a quota ``requests.`` name."""
    return not ("/" not in name or "kubernetes.io/" in name) and not name.startswith("requests.")


# --- the rules ----------------------------------------------------------------------------------------------


def resource_problems(container: dict[str, Any], path: str) -> Iterator[Problem]:
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    parsed: dict[str, Decimal] = {}
    for section, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            value = quantity(raw)
            where = f"{path}.resources.{section}[{name}]"
            if value is None:
                yield Problem(
                    where,
                    "Invalid value",
                    str(raw),
                    "quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )
                continue
            if value < 0:
                yield Problem(where, "Invalid value", str(raw), NEGATIVE)
            if extended(name) and value != value.to_integral_value():
                yield Problem(where, "Invalid value", str(raw), NOT_INTEGER)
            if section == "limits":
                parsed[name] = value
    for name, raw in requests.items():
        value = quantity(raw)
        if value is None:
            continue
        if name in parsed:
            if value != parsed[name] and not overcommit_allowed(name):
                yield Problem(
                    f"{path}.resources.requests",
                    "Invalid value",
                    canonical(value),
                    f"must be equal to {name} limit of {canonical(parsed[name])}",
                )
            elif value > parsed[name]:
                yield Problem(
                    f"{path}.resources.requests",
                    "Invalid value",
                    canonical(value),
                    f"must be less than or equal to {name} limit of {canonical(parsed[name])}",
                )
        elif not overcommit_allowed(name):
            yield Problem(
                f"{path}.resources.limits",
                "Required value",
                detail="Limit must be set for non overcommitable resources",
            )


def probe_problems(container: dict[str, Any], path: str) -> Iterator[Problem]:
    for kind in PROBES:
        probe = container.get(kind)
        if probe is None:
            continue
        where = f"{path}.{kind}"
        handlers = [h for h in HANDLERS if probe.get(h) is not None]
        if not handlers:
            yield Problem(where, "Required value", detail="must specify a handler type")
        for extra in handlers[1:]:
            yield Problem(f"{where}.{extra}", "Forbidden", detail="may not specify more than 1 handler type")
        if handlers and handlers[0] == "exec" and not (probe["exec"] or {}).get("command"):
            yield Problem(f"{where}.exec.command", "Required value")
        for key in PROBE_INTS:
            value = probe.get(key)
            if isinstance(value, int) and value < 0:
                yield Problem(f"{where}.{key}", "Invalid value", value, NEGATIVE)
        threshold = probe.get("successThreshold", 1)
        if kind != "readinessProbe" and threshold != 1:
            yield Problem(f"{where}.successThreshold", "Invalid value", threshold, "must be 1")
        grace = probe.get("terminationGracePeriodSeconds")
        if kind == "readinessProbe" and grace is not None:
            yield Problem(
                f"{where}.terminationGracePeriodSeconds",
                "Invalid value",
                grace,
                "must not be set for readinessProbes",
            )


def env_problems(container: dict[str, Any], path: str) -> Iterator[Problem]:
    defined = set(LWS_ENV)
    for index, var in enumerate(container.get("env") or []):
        where = f"{path}.env[{index}]"
        name = var.get("name") or ""
        if not name:
            yield Problem(f"{where}.name", "Required value")
        for message in env_var_name(name) if name else ():
            yield Problem(f"{where}.name", "Invalid value", name, message)
        value = var.get("value")
        if value is not None and not isinstance(value, str):
            got = _JSON_TYPES.get(type(value), type(value).__name__)
            yield Problem(
                f"{where}.value",
                "Invalid value",
                got,
                f'{where}.value in body must be of type string: "{got}"',
            )
        if var.get("valueFrom") is not None and value:
            yield Problem(
                f"{where}.valueFrom", "Invalid value", "", "may not be specified when `value` is not empty"
            )
        if isinstance(value, str):
            yield from reference_problems(value, defined, f"{where}.value")
        defined.add(name)
    for key in ("command", "args"):
        for index, arg in enumerate(container.get(key) or []):
            yield from reference_problems(str(arg), defined, f"{path}.{key}[{index}]")


def reference_problems(value: str, defined: set[str], where: str) -> Iterator[Problem]:
    """A ``$(NAME)`` that names no variable defined before it stays literal (Kubernetes expansion rule)."""
    for match in _REFERENCE.finditer(value):
        name = match.group(1)
        if name is not None and name not in defined:
            yield Problem(
                where,
                "Invalid value",
                value,
                f"$({name}) names no variable defined before it, so the kubelet passes it unexpanded "
                "(write $$ for a literal $)",
            )


def name_problems(spec: dict[str, Any], path: str, claims: set[str]) -> Iterator[Problem]:
    volumes: set[str] = set()
    for index, volume in enumerate(spec.get("volumes") or []):
        name = volume.get("name") or ""
        where = f"{path}.volumes[{index}].name"
        if not name:
            yield Problem(where, "Required value")
        for message in dns1123_label(name) if name else ():
            yield Problem(where, "Invalid value", name, message)
        if name in volumes:
            yield Problem(where, "Duplicate value", name)
        volumes.add(name)
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            where = f"{path}.{kind}[{index}]"
            name = container.get("name") or ""
            if not name:
                yield Problem(f"{where}.name", "Required value")
            for message in dns1123_label(name) if name else ():
                yield Problem(f"{where}.name", "Invalid value", name, message)
            if name in seen:
                yield Problem(f"{where}.name", "Duplicate value", name)
            seen.add(name)
            mount_paths: set[str] = set()
            for m_index, mount in enumerate(container.get("volumeMounts") or []):
                m_where = f"{where}.volumeMounts[{m_index}]"
                if mount.get("name") not in volumes | claims:
                    yield Problem(f"{m_where}.name", "Not found", mount.get("name"))
                mount_path = mount.get("mountPath") or ""
                if mount_path in mount_paths:
                    yield Problem(f"{m_where}.mountPath", "Invalid value", mount_path, "must be unique")
                mount_paths.add(mount_path)


def template_problems(template: dict[str, Any], path: str, claims: set[str]) -> list[Problem]:
    """Every problem of one pod template; ``path`` is the template's own (``...leaderTemplate``)."""
    spec = template.get("spec") or {}
    found = list(name_problems(spec, f"{path}.spec", claims))
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            where = f"{path}.spec.{kind}[{index}]"
            found += [*resource_problems(container, where), *probe_problems(container, where)]
            found += env_problems(container, where)
    return found


def lws_problems(lws: dict[str, Any]) -> list[Problem]:
    """The problems of both pod templates of a LeaderWorkerSet."""
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    claims = {c.get("metadata", {}).get("name") for c in lwt.get("volumeClaimTemplates") or []}
    found: list[Problem] = []
    for key in ("leaderTemplate", "workerTemplate"):
        if key in lwt:
            found += template_problems(lwt[key], f"spec.leaderWorkerTemplate.{key}", claims - {None})
    return found
