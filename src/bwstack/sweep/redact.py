"""What must never leave the machine in a sweep bundle: secrets by value and by pattern, and (on request) the
host's identity.

A :class:`Redactor` knows the secret values (every file under the stack's ``secrets/`` folder, the tokens in
the environment); the shapes of secrets (tokens, keys, headers, URL credentials, their encoded and split
forms) are the one detector's, :mod:`healthchecks.secretscan`. It rewrites text and JSON-like data, counting
what it replaced, and :meth:`Redactor.leaks` is the last check over the bytes written. With ``host=True`` it
also drops host names, IP and MAC addresses and user names. Stdlib only; no I/O beyond reading the secret
files it is given.
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

from healthchecks import common, secretscan

MARK = secretscan.MARK
HOST_MARK = "[host]"
USER_MARK = "[user]"
IP_MARK = "[ip]"

#: the shortest secret value redacted by value (shorter ones would shred ordinary words; see docs/evidence.md)
MIN_SECRET_LEN = 6

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
    found += [value.strip() for name, value in env.items() if secretscan.secret_env_name(name)]
    unique = {v for v in found if len(v) >= MIN_SECRET_LEN and v.lower() not in secretscan.KEEP}
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
        text = secretscan.redact(text, self.counts)
        if self.host:
            text = self._host_text(text)
        return text

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
            if key is not None and secretscan.secret_key(key, value):
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
        found += [f"a {hit.kind}" for hit in secretscan.findings(blob.decode("utf-8", errors="replace"))]
        return found
