"""The one secret detector, stdlib only: what a secret looks like in text, argv, environment names and values.

Known token shapes (``hf_``, ``sk-``, ``ghp_``/``github_pat_``, ``xox?-``, AWS keys, JWTs, private keys),
``Bearer``/``Basic`` headers, ``--api-key`` argv, ``…TOKEN=`` assignments and URL credentials
(``scheme://user:password@``); each also when base64- or URL-encoded (a Basic header's ``user:key``, a token
inside a percent-encoded query) or split over two lines. :func:`findings` says where (never the value),
:func:`redact` rewrites the text, :func:`secret_env_name` judges an environment variable's name. The bundle's
redactor (``bwstack.sweep.redact``), ``report verify``, ``classify-log``, ``validate``, ``calibrate`` and
the CLI's error line all ask this module; it runs in the image too.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

MARK = "[redacted]"
_VALUE = r"[A-Za-z0-9._~+/=:-]"
#: values that are no secret whatever key they sit under
KEEP = frozenset({"none", "null", "true", "false", "***", MARK.lower(), "[redacted]", "<redacted>"})

#: (kind, pattern, group kept before the secret or 0): every shape a secret may take in a log, argv or file
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
    (
        "basic credentials",
        re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+)([A-Za-z0-9+/_-]{4,}={0,2})"),
        1,
    ),
    (
        "url credentials",
        re.compile(r"(?i)(\b[a-z][a-z0-9+.-]{0,20}://[^\s/:@\"'<>]{1,200}:)([^\s/@\"'<>]{1,200})(?=@)"),
        1,
    ),
    ("secret flag", re.compile(rf"(--(?:admin-)?api-key(?:=|\s+)|--hf-token(?:=|\s+))({_VALUE}{{6,}})"), 1),
    (
        "secret assignment",
        re.compile(
            rf"(?i)(\b(?:[A-Z0-9]+[_-])*(?:TOKEN|API[_-]?KEY|SECRET|PASSWORD|PASSWD)[\"']?\s*[=:]\s*[\"']?)"
            rf"(?![0-9.]+\b)({_VALUE}{{6,}})"
        ),
        1,
    ),
)
#: per kind, the lower-case literals one of which a match must contain: a text without any skips that pattern
#: (one ``lower()`` and a few substring tests instead of a regex pass per kind)
_NEEDS: dict[str, tuple[str, ...]] = {
    "private key": ("private key-----",),
    "hf token": ("hf_",),
    "api key": ("sk-",),
    "github token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "aws key": ("akia",),
    "slack token": ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
    "jwt": ("eyj",),
    "bearer": ("bearer",),
    "basic credentials": ("basic",),
    "url credentials": ("://",),
    "secret flag": ("--api-key", "--admin-api-key", "--hf-token"),
    "secret assignment": ("token", "key", "secret", "passw"),
}
#: an environment variable whose value is a secret whatever it looks like (``HF_TOKEN``, ``GITHUB_TOKEN``,
#: ``API_KEY``, ``HUGGINGFACEHUB_API_TOKEN``, ``HF_HUB_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``)
SECRET_ENV = re.compile(
    r"(?:^|_)(?:TOKEN|API_?KEY|APIKEY|SECRET|SECRET_KEY|SECRET_ACCESS_KEY|ACCESS_KEY|PASSWORD|PASSWD|"
    r"CREDENTIALS?|AUTH_TOKEN|PAT)\Z",
    re.IGNORECASE,
)
#: a key of a mapping whose value is a secret (``HF_TOKEN``, ``api_key``, ``admin_api_key``)
SECRET_KEY = re.compile(r"(?:^|[_-])(?:token|api[_-]?key|apikey|secret|password|passwd)\Z", re.IGNORECASE)
#: an encoded form to decode and look into: base64 (standard or URL-safe) and percent-encoding
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,4096}={0,2}")
_PERCENT = re.compile(r"[A-Za-z0-9._~+/=:%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~+/=:%-]*")
#: a token's known start at the end of a line and the first word of the next: a token cut by a line break
_SPLIT = re.compile(
    r"((?:hf_|sk-|gh[pousr]_|github_pat_|xox[abprs]-|AKIA|eyJ)[A-Za-z0-9_.-]{0,200})"
    r"\r?\n[ \t]*([A-Za-z0-9_.-]{1,200})"
)


@dataclass(frozen=True)
class Finding:
    """A secret's kind and the span of ``text`` it occupies (``start``, ``end``); never its value."""

    kind: str
    start: int
    end: int


def _direct(text: str) -> list[Finding]:
    found = []
    lowered = text.lower()
    for kind, pattern, keep in PATTERNS:
        if not any(literal in lowered for literal in _NEEDS[kind]):
            continue
        for match in pattern.finditer(text):
            group = keep + 1 if keep else 0
            secret = match.group(group)
            if secret.strip("\"'").lower() in KEEP or secret.startswith(MARK):
                continue
            found.append(Finding(kind, match.start(group), match.end(group)))
    return found


def _decoded_base64(word: str) -> str | None:
    padded = word.rstrip("=") + "=" * (-len(word.rstrip("=")) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            text = decode(padded.encode("ascii")).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if text.isprintable():
            return text
    return None


def _encoded(text: str) -> list[Finding]:
    found = []
    for match in _BASE64.finditer(text):
        decoded = _decoded_base64(match.group(0))
        inner = _direct(decoded) if decoded else []
        if inner:
            found.append(Finding(f"{inner[0].kind} (base64)", match.start(), match.end()))
    for match in _PERCENT.finditer(text):
        decoded = urllib.parse.unquote_plus(match.group(0))
        inner = _direct(decoded) + (
            _encoded(decoded) if "%" in match.group(0) and decoded != match.group(0) else []
        )
        if inner:
            found.append(Finding(f"{inner[0].kind} (URL-encoded)", match.start(), match.end()))
    return found


def _split(text: str) -> list[Finding]:
    """Tokens cut by a line break: a known token start ending a line, joined to the next line's first word."""
    found = []
    for match in _SPLIT.finditer(text):
        joined = match.group(1) + match.group(2)
        cut = len(match.group(1))
        if any(hit.start < cut < hit.end for hit in _direct(joined)):
            kind = next(hit.kind for hit in _direct(joined) if hit.start < cut < hit.end)
            found.append(Finding(f"{kind} (split over two lines)", match.start(1), match.end(2)))
    return found


def findings(text: str) -> list[Finding]:
    """Every secret in ``text``, in order, overlapping spans joined (the first kind names the span)."""
    if not text:
        return []
    hits = sorted(_direct(text) + _encoded(text) + _split(text), key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for hit in hits:
        if merged and hit.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Finding(last.kind, last.start, max(last.end, hit.end))
        else:
            merged.append(hit)
    return merged


def redact(text: str, counts: dict[str, int] | None = None) -> str:
    """``text`` with every secret replaced by :data:`MARK` (line breaks inside a split token kept), counting
    the replacements by kind into ``counts``."""
    out = []
    at = 0
    for hit in findings(text):
        out.append(text[at : hit.start])
        breaks = text.count("\n", hit.start, hit.end)
        out.append(MARK + "\n" * breaks + (MARK if breaks else ""))
        at = hit.end
        if counts is not None:
            counts[hit.kind] = counts.get(hit.kind, 0) + 1
    out.append(text[at:])
    return "".join(out)


def first_kind(text: str) -> str | None:
    """The kind of the first secret in ``text`` (never the value); None when it holds none."""
    found = findings(text)
    return found[0].kind if found else None


def secret_env_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (``GITHUB_TOKEN``, ``API_KEY`` …)."""
    return bool(SECRET_ENV.search(name))


def secret_key(key: str, value: str) -> bool:
    """Whether ``value`` under the mapping key ``key`` (``api_key``, ``access_token``) is a secret."""
    return bool(SECRET_KEY.search(key)) and bool(value) and value.strip("\"'").lower() not in KEEP


def redact_data(value: Any, counts: dict[str, int] | None = None) -> Any:
    """A JSON-like value with every string (keys too) passed through :func:`redact`."""
    if isinstance(value, dict):
        return {redact(str(k), counts): redact_data(v, counts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, counts) for v in value]
    if isinstance(value, str):
        return redact(value, counts)
    return value
