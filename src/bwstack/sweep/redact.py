"""What must never leave the machine in a sweep bundle: secrets by value and by pattern, and (on request) the
host's identity.

A :class:`Redactor` knows the secret values (every file under the stack's ``secrets/`` folder, the tokens in
the environment) and the shapes of secrets (HF tokens, API keys, bearer headers, ``--api-key`` argv,
``…TOKEN=`` assignments, private keys). It rewrites text and JSON-like data, counting what it replaced, and
:meth:`Redactor.leaks` is the last check over the bytes written. With ``host=True`` it also drops host names,
IP and MAC addresses and user names. Stdlib only; no I/O beyond reading the secret files it is given.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from healthchecks import common

MARK = "[redacted]"
HOST_MARK = "[host]"
USER_MARK = "[user]"
IP_MARK = "[ip]"

#: the shortest secret value redacted by value (shorter ones would shred ordinary words; see docs/evidence.md)
MIN_SECRET_LEN = 6
#: environment variables whose values are secrets whatever they look like
SECRET_ENV = re.compile(r"(TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)
#: a key of a mapping whose value is a secret (``HF_TOKEN``, ``api_key``, ``admin_api_key``)
SECRET_KEY = re.compile(r"(^|[_-])(token|api[_-]?key|apikey|secret|password|passwd)$", re.IGNORECASE)
_VALUE = r"[A-Za-z0-9._~+/=:-]"
_KEEP = {"none", "null", "true", "false", "***", MARK.lower(), "[redacted]"}

#: (name, pattern, group kept before the secret or 0): every shape a secret may take in a log, argv or file
PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    (
        "private key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        0,
    ),
    ("hf token", re.compile(r"\bhf_[A-Za-z0-9]{20,}"), 0),
    ("api key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), 0),
    ("github token", re.compile(r"\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{20,}"), 0),
    ("aws key", re.compile(r"\bAKIA[0-9A-Z]{16}\b"), 0),
    ("slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("bearer", re.compile(rf"(?i)(\bbearer\s+)({_VALUE}{{8,}})"), 1),
    ("secret flag", re.compile(rf"(--(?:admin-)?api-key(?:=|\s+)|--hf-token(?:=|\s+))({_VALUE}+)"), 1),
    (
        "secret assignment",
        re.compile(
            rf"(?i)(\b(?:[A-Z0-9]+[_-])*(?:TOKEN|API[_-]?KEY|SECRET|PASSWORD|PASSWD)[\"']?\s*[=:]\s*[\"']?)"
            rf"(?![0-9.]+\b)({_VALUE}{{6,}})"
        ),
        1,
    ),
)

_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])")
_IPV6 = re.compile(
    r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){3,7}[0-9A-Fa-f]{1,4}(?![\w:])"
    r"|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:)+:(?:[0-9A-Fa-f]{1,4}:)*[0-9A-Fa-f]{1,4}(?![\w:])"
)
_HOME = re.compile(r"(/home/|/Users/)([^/\s\"':]+)")
#: addresses that identify no host
_PUBLIC_ADDRESSES = {"127.0.0.1", "0.0.0.0", "::1", "255.255.255.255"}  # noqa: S104 - words, not a bind


def secret_values(secrets_dir: Path | None, environ: dict[str, str] | None = None) -> list[str]:
    """The values to redact wherever they appear: each non-empty file under ``secrets_dir`` (its stripped
    content and each of its lines; README.md is documentation) and each secret-named environment variable."""
    found: list[str] = []
    if secrets_dir is not None and secrets_dir.is_dir():
        for path in sorted(secrets_dir.rglob("*")):
            if not path.is_file() or path.name == "README.md":
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found += [text.strip(), *(line.strip() for line in text.splitlines())]
    env = os.environ if environ is None else environ
    found += [value.strip() for name, value in env.items() if SECRET_ENV.search(name)]
    unique = {v for v in found if len(v) >= MIN_SECRET_LEN and v.lower() not in _KEEP}
    return sorted(unique, key=len, reverse=True)  # longest first: a value inside another goes with it


def host_identity(extra_names: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(host names, user names) of this machine, for ``--redact-host``; ``extra_names`` add recorded names
    (the Docker engine's host name from ``docker info``)."""
    names = {socket.gethostname(), *extra_names}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn())
    hosts = sorted({n for n in names if n and n not in ("localhost", "localhost.localdomain")}, key=len)
    users = set()
    for source in (os.environ.get("USER"), os.environ.get("LOGNAME"), os.environ.get("SUDO_USER")):
        if source:
            users.add(source)
    with contextlib.suppress(KeyError, OSError):
        users.add(getpass.getuser())
    users.add(Path.home().name)
    return hosts[::-1], sorted(u for u in users if len(u) >= 3 and u != "root")


@dataclass
class Redactor:
    """Rewrites text and data so that no secret (and, with ``host``, nothing naming the host) remains."""

    values: list[str]
    host: bool = False
    host_names: list[str] = field(default_factory=list)
    user_names: list[str] = field(default_factory=list)
    #: (this machine's path, what it becomes), always applied: the stack's folder
    paths: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def _count(self, what: str, n: int) -> None:
        if n:
            self.counts[what] = self.counts.get(what, 0) + n

    def text(self, text: str) -> str:
        """``text`` with every secret value and pattern (and host identity, when asked) replaced."""
        for value in self.values:  # every printed form: a key with a quote is escaped inside results.json
            for form in common.printed_forms(value):
                if form in text:
                    self._count("secret value", text.count(form))
                    text = text.replace(form, MARK)
        for path, shown in self.paths:
            if len(path) > 1 and path in text:
                self._count("local path", text.count(path))
                text = text.replace(path, shown)
        for name, pattern, keep in PATTERNS:
            text = self._sub(name, pattern, keep, text)
        if self.host:
            text = self._host_text(text)
        return text

    def _sub(self, name: str, pattern: re.Pattern[str], keep: int, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            secret = match.group(keep + 1) if keep else match.group(0)
            if secret.strip("\"'").lower() in _KEEP or secret.startswith(MARK):
                return match.group(0)
            self._count(name, 1)
            return (match.group(keep) if keep else "") + MARK

        return pattern.sub(one, text)

    def _host_text(self, text: str) -> str:
        for name in self.host_names:
            hits = len(re.findall(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text))
            if hits:
                self._count("host name", hits)
                text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", HOST_MARK, text)
        text = _HOME.sub(lambda m: self._hit("user name", m.group(1) + USER_MARK), text)
        for user in self.user_names:
            word = rf"(?<![\w-]){re.escape(user)}(?![\w-])"
            hits = len(re.findall(word, text))
            if hits:
                self._count("user name", hits)
                text = re.sub(word, USER_MARK, text)
        for address in (_IPV4, _IPV6):
            text = address.sub(
                lambda m: m.group(0) if m.group(0) in _PUBLIC_ADDRESSES else self._hit("address", IP_MARK),
                text,
            )
        return text

    def _hit(self, what: str, replacement: str) -> str:
        self._count(what, 1)
        return replacement

    def data(self, value: Any, key: str | None = None) -> Any:
        """A JSON-like value with every string redacted; a secret-named key's string value goes whole."""
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v, key) for v in value]
        if isinstance(value, str):
            if key is not None and SECRET_KEY.search(key) and value and value.lower() not in _KEEP:
                self._count("secret field", 1)
                return MARK
            return self.text(value)
        return value

    def leaks(self, blob: bytes) -> list[str]:
        """What of the secrets still appears in ``blob`` (the last check before anything is written)."""
        found = []
        for value in self.values:
            if any(form.encode() in blob for form in common.printed_forms(value)):
                found.append(f"a secret value of {len(value)} characters")
        text = blob.decode("utf-8", errors="replace")
        for name, pattern, keep in PATTERNS:
            for match in pattern.finditer(text):
                secret = match.group(keep + 1) if keep else match.group(0)
                if secret.strip("\"'").lower() not in _KEEP and not secret.startswith(MARK):
                    found.append(f"a {name}")
        return found
