"""Stack-file values that must not reach compose.yaml as written: secrets, system folders, non-addresses.

The schema (:mod:`bwstack.stack.schema`) calls these as pydantic validators; each raises ValueError with the
value and what to use instead, which validation turns into one ``file:line: field: message`` line (exit 2). A
secret in ``env`` would be written into the committed compose.yaml and shown by ``docker inspect``; the
files under ``secrets/`` (``stack.hf_token``, ``stack.api_key``) are the way in.
"""

from __future__ import annotations

import ipaddress
import posixpath

from healthchecks import secretscan

#: host folders that must never be the model cache (bind-mounted read-write into every service)
SYSTEM_FOLDERS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/run",
     "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"}  # noqa: S108 - refused, never used
)  # fmt: skip


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def no_secret_env(value: dict[str, str]) -> dict[str, str]:
    """Refuse an env name that holds a secret (HF_TOKEN, GITHUB_TOKEN, ``*_API_KEY`` ...) or a value shaped
    like one under any name (``Bearer sk-…``), naming the field to use and never the value."""
    for name, text in value.items():
        kind = secretscan.first_kind(text)
        if kind is not None:
            raise ValueError(
                f"{name} holds a secret (a {kind}): in env it is written into compose.yaml and shown by "
                "docker inspect; bwstack mounts secrets/hf_token and secrets/api_key instead"
            )
        if secretscan.secret_env_name(name):
            use = (
                "set stack.hf_token: true and put the token in secrets/hf_token"
                if "TOKEN" in name
                else "bwstack mounts only secrets/hf_token and secrets/api_key (stack.api_key: true)"
            )
            raise ValueError(
                f"{name} holds a secret: in env it is written into compose.yaml and shown by docker inspect; "
                f"{use}"
            )
    return value


def not_a_system_folder(value: str | None) -> str | None:
    """Refuse ``/``, ``/etc``, ``/usr`` ... (also spelt ``/etc/../``) as the model cache folder."""
    if value is not None and posixpath.normpath(value) in SYSTEM_FOLDERS | {"//"}:
        raise ValueError(
            f"invalid value {_short(value)}: a system folder, which the services would mount read-write "
            "as their model cache; use a folder of its own, e.g. /srv/models"
        )
    return value


def host_address(value: str) -> str:
    """Refuse a bind address that is not an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(
            f"invalid value {_short(value)}: an IPv4 or IPv6 address of this host, e.g. 127.0.0.1 "
            "(loopback only) or 0.0.0.0 (every interface)"
        ) from None
    return value


def no_secret_args(value: list[str]) -> list[str]:
    """Refuse an ``extra_args`` token carrying a secret (a key, a token, a URL's password); never echo it."""
    for index, token in enumerate(value):
        kind = secretscan.first_kind(token)
        if kind is not None:
            raise ValueError(
                f"item {index} holds a secret (a {kind}): extra_args are written into compose.yaml and shown "
                "by docker inspect; use stack.api_key / stack.hf_token (files under secrets/)"
            )
    return value
