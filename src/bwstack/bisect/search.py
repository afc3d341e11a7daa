"""``bwstack bisect``: the first dated SGLang nightly image on which a profile's verdict changes.

The tags are SGLang's dated nightlies, ``nightly-dev-cu13-YYYYMMDD-<sha>`` (any ``nightly-…-YYYYMMDD-<hex>``
flavour; good and bad must share it). This module is the part without Docker: parsing the tags and a
``--tags`` file, the candidate list (local images, the file, Docker Hub's tag list where it answers), their
order, the binary search (with skipped tags), the state file and the loop. One step, the Docker side, is
:mod:`bwstack.bisect.step`; the loop only calls it.

Order: by the date in the tag's name; tags of the same day by their push time (Docker Hub's, where the
registry answers, else the ``--tags`` file's second column), then by the order they were listed.

The registry is asked only when some candidate may not be local (no ``--tags`` file, or a listed tag without
a local image), with a short timeout, and never when ``BWSTACK_OFFLINE`` is set; an unreachable registry is a
note, not an error.

State: ``bisect.json`` in the bisect's folder, rewritten atomically after every step: the inputs, the ordered
tags and every step's verdict with its evidence. ``--resume`` continues it after a Ctrl-C, a SIGKILL or a
spent time bound, and refuses when any input differs. The search itself is never stored: it is replayed from
the steps, so a state file can never disagree with itself.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write, read_bounded, read_json
from bwstack.host import netwait
from healthchecks import untrusted

TAG = re.compile(r"^(?P<flavour>nightly(?:-[a-z0-9.]+)*?)-(?P<day>\d{8})-(?P<sha>[0-9a-f]{7,40})\Z")
STATE_FILE = "bisect.json"
#: a bisect.json holds a few hundred tags and steps: anything larger is not one of ours
STATE_MAX_BYTES = 16 << 20
TAGS_FILE_MAX_BYTES = 4 << 20
SCHEMA = "bwstack.bisect/1"
COMPARE_URL = "https://github.com/sgl-project/sglang/compare/{old}...{new}"
#: set (to anything) to never ask a registry; tests and air-gapped hosts
OFFLINE_ENV = "BWSTACK_OFFLINE"
REGISTRY_TIMEOUT_S = 5.0
REGISTRY_PAGES = 10
HUB_TAGS = "https://hub.docker.com/v2/repositories/{repo}/tags?page_size=100&name={name}"


class Interrupted(BaseException):
    """A signal stopped the bisect (a BaseException, like the sweep's: no ``except Exception`` swallows it);
    the running container is removed and the state saved."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass(frozen=True)
class Tag:
    """One dated nightly tag: its flavour, the day in its name, the SGLang commit in its name, a push time."""

    name: str
    flavour: str
    day: str  # YYYY-MM-DD
    sha: str
    pushed: str | None = None  # UTC ISO time, where the registry or the --tags file gave one


def parse_tag(
    name: str, *, file: Path | None = None, line: int | None = None, field: str | None = None
) -> Tag:
    """A tag name -> :class:`Tag`; UserError (exit 2) for anything that is not a dated nightly."""
    match = TAG.match(name)
    if match is None:
        raise UserError(
            f"{name!r} is not a dated nightly tag (nightly-dev-cu13-YYYYMMDD-<sha>)",
            file=file,
            line=line,
            field=field,
        )
    raw = match.group("day")
    try:
        day = date(int(raw[:4]), int(raw[4:6]), int(raw[6:]))
    except ValueError:
        raise UserError(f"{name!r}: {raw} is not a date", file=file, line=line, field=field) from None
    return Tag(name=name, flavour=match.group("flavour"), day=day.isoformat(), sha=match.group("sha"))


def parse_when(text: str, *, file: Path | None = None, line: int | None = None) -> str:
    """An ISO 8601 time (``2026-11-01T03:12:00Z``, a date alone is midnight UTC) -> UTC ``…Z`` form."""
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(
            f"{text!r} is not an ISO 8601 time (e.g. 2026-11-01T03:12:00Z)", file=file, line=line
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tags_file_text(path: Path) -> str:
    """A ``--tags`` file's text: a bounded regular UTF-8 file, else UserError (never waits on a FIFO)."""
    try:
        return read_bounded(path, TAGS_FILE_MAX_BYTES).decode("utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the tags file: {exc.strerror or exc}", file=path) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"the tags file is not UTF-8 text ({exc.reason})", file=path) from None


def read_tags_file(path: Path) -> list[Tag]:
    """``--tags FILE``: one tag per line, optionally followed by its push time; ``#`` starts a comment."""
    text = tags_file_text(path)
    tags: list[Tag] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2:
            raise UserError(f"expected 'TAG [PUSH_TIME]', got {len(words)} words", file=path, line=number)
        tag = parse_tag(words[0], file=path, line=number)
        if tag.name in seen:
            raise UserError(
                f"{tag.name} is listed twice (first on line {seen[tag.name]})", file=path, line=number
            )
        seen[tag.name] = number
        when = parse_when(words[1], file=path, line=number) if len(words) == 2 else None
        tags.append(Tag(tag.name, tag.flavour, tag.day, tag.sha, when))
    if not tags:
        raise UserError("no tags in the file", file=path)
    return tags


def order(tags: Iterable[Tag]) -> list[Tag]:
    """By the day in the name, then push time (where known), then listing order."""
    listed = list(tags)
    return [t for _, t in sorted(enumerate(listed), key=lambda it: (it[1].day, it[1].pushed or "", it[0]))]


# --- the registry -------------------------------------------------------------------------------------------


def registry_disabled() -> bool:
    return bool(os.environ.get(OFFLINE_ENV))


def _hub_page(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (https, checked by the caller)
        return json.loads(answer.read(4 << 20))


def hub_tags(repo: str, prefix: str, *, timeout: float = REGISTRY_TIMEOUT_S) -> dict[str, str]:
    """Docker Hub's tags of ``repo`` starting with ``prefix``: name -> last push time (UTC ISO).

    ExternalError when the repository is not on Docker Hub or the registry does not answer in time."""
    first = repo.split("/", 1)[0]
    if "/" in repo and ("." in first or ":" in first or first == "localhost"):
        raise ExternalError(f"{first} is not Docker Hub; bwstack reads tag dates from Docker Hub only")
    path = repo if "/" in repo else f"library/{repo}"
    url: str | None = HUB_TAGS.format(repo=path, name=urllib.parse.quote(prefix))
    found: dict[str, str] = {}
    for _ in range(REGISTRY_PAGES):
        if url is None:
            break
        if not url.startswith("https://hub.docker.com/"):
            raise ExternalError(f"Docker Hub sent an unexpected next page: {url[:80]}")
        try:
            page = netwait.within(timeout * 2, functools.partial(_hub_page, url, timeout))
        except (OSError, ValueError, urllib.error.URLError) as exc:  # netwait.TooSlow is an OSError
            raise ExternalError(f"Docker Hub did not answer ({' '.join(str(exc).split())[:120]})") from None
        for item in page.get("results") or []:
            name, pushed = item.get("name"), item.get("tag_last_pushed") or item.get("last_updated")
            if isinstance(name, str) and name.startswith(prefix) and isinstance(pushed, str):
                found[name] = parse_when(pushed.replace("Z", "+00:00"))
        url = page.get("next") if isinstance(page.get("next"), str) else None
    return found


# --- candidates ---------------------------------------------------------------------------------------------

Registry = Callable[[str, str], Mapping[str, str]]


@dataclass(frozen=True)
class Candidates:
    """The ordered tags from good to bad (both included), where they came from, and what is worth saying."""

    tags: list[Tag]
    source: str
    notes: list[str] = field(default_factory=list)


def resolve_candidates(
    repo: str,
    good: str,
    bad: str,
    *,
    tags_file: Path | None,
    local_tags: Callable[[], Iterable[str]],
    registry: Registry | None,
) -> Candidates:
    """The window of tags to bisect; UserError for bad input (unknown tag, good == bad, wrong order …).

    ``local_tags`` (Docker) is called only once the input is known to be good."""
    good_tag = parse_tag(good, field="--good")
    bad_tag = parse_tag(bad, field="--bad")
    if good == bad:
        raise UserError("--good and --bad are the same tag", field="--bad")
    if good_tag.flavour != bad_tag.flavour:
        raise UserError(
            f"--good is a {good_tag.flavour} tag, --bad a {bad_tag.flavour} one; bisect one flavour",
            field="--bad",
        )
    if good_tag.day > bad_tag.day:
        raise _newer(good, bad)
    notes: list[str] = []
    if tags_file is not None:
        listed = [t for t in read_tags_file(tags_file) if t.flavour == good_tag.flavour]
        source = f"--tags {tags_file.name}"
        _check_known(listed, good, bad, source, tags_file)
    local = set(local_tags())
    if tags_file is None:
        parsed = [parse_tag(n) for n in sorted(local) if TAG.match(n)]
        listed = [t for t in parsed if t.flavour == good_tag.flavour]
        source = f"the local images of {repo}"
    all_local = tags_file is not None and all(t.name in local for t in listed)
    if registry is not None and not all_local:
        try:
            pushed = registry(repo, good_tag.flavour)
        except ExternalError as exc:
            notes.append(f"no push times from the registry: {exc}; ordered by the tag names")
        else:
            known = {t.name for t in listed}
            if tags_file is None:
                more = [parse_tag(n) for n in sorted(pushed) if n not in known and TAG.match(n)]
                listed += [t for t in more if t.flavour == good_tag.flavour]
                source += " and Docker Hub"
            listed = [Tag(t.name, t.flavour, t.day, t.sha, pushed.get(t.name, t.pushed)) for t in listed]
    _check_known(listed, good, bad, source, tags_file)
    ordered = order(listed)
    index = {t.name: i for i, t in enumerate(ordered)}
    if index[good] > index[bad]:
        raise _newer(good, bad)
    missing = [t.name for t in ordered[index[good] : index[bad] + 1] if t.name not in local]
    if missing:
        rest = ", …" if len(missing) > 3 else ""
        notes.append(
            f"{len(missing)} tag(s) are not local and will be pulled: {', '.join(missing[:3])}{rest}"
        )
    return Candidates(ordered[index[good] : index[bad] + 1], source, notes)


def _newer(good: str, bad: str) -> UserError:
    return UserError(
        f"--good {good} is newer than --bad {bad}; bisect searches forward in time (to find the tag that "
        "fixed a failure, give the old failing tag as --good with --good-verdict CLASS)",
        field="--good",
    )


def _check_known(listed: Sequence[Tag], good: str, bad: str, source: str, tags_file: Path | None) -> None:
    names = {t.name for t in listed}
    for option, tag in (("--good", good), ("--bad", bad)):
        if tag not in names:
            raise UserError(f"unknown tag {tag}: not among {source}", file=tags_file, field=option)


# --- the search ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One tested tag: its verdict (None when it could not be run) and which side of the change it is on."""

    tag: str
    side: str  # "good" (the --good verdict), "bad" (any other verdict) or "skip" (could not be run)
    verdict: str | None
    reason: str
    started_at: str
    elapsed_s: float
    report: str | None = None  # the step's results.json, relative to the bisect folder
    sglang_version: str | None = None  # what the image's parser snapshot says
    label_commit: str | None = None  # the SGLang commit an image label names, where one does
    decided_by: str | None = None
    evidence: dict[str, Any] | None = None


def steps_for(tags_left: int) -> int:
    """Steps a binary search needs at most to place one change among ``tags_left`` untested tags."""
    return math.ceil(math.log2(tags_left + 1)) if tags_left > 0 else 0


class Search:
    """The binary search, replayed from the steps: ``lo`` is the newest tag on the good side (the --good tag
    unless a step moved it), ``hi`` the oldest on the bad side; the change lies in ``(lo, hi]``."""

    def __init__(self, tags: Sequence[Tag], steps: Sequence[Step]) -> None:
        self.tags = list(tags)
        self.index = {t.name: i for i, t in enumerate(self.tags)}
        self.sides = {s.tag: s.side for s in steps}
        good = [self.index[n] for n, side in self.sides.items() if side == "good"]
        bad = [self.index[n] for n, side in self.sides.items() if side == "bad"]
        self.lo = max([0, *good])
        self.hi = min([len(self.tags) - 1, *bad])

    def untested(self) -> list[int]:
        return [i for i in range(self.lo + 1, self.hi) if self.tags[i].name not in self.sides]

    def skipped(self) -> list[str]:
        return [
            self.tags[i].name
            for i in range(self.lo + 1, self.hi)
            if self.sides.get(self.tags[i].name) == "skip"
        ]

    def next_index(self) -> int | None:
        """The tag that halves what is left (None when the change is placed)."""
        left = self.untested()
        return left[len(left) // 2] if left else None

    def steps_left(self) -> int:
        return steps_for(len(self.untested()))


# --- state ---------------------------------------------------------------------------------------------


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def new_state(inputs: Mapping[str, Any], candidates: Candidates) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "inputs": dict(inputs),
        "source": candidates.source,
        "notes": list(candidates.notes),
        "tags": [asdict(t) for t in candidates.tags],
        "steps": [],
        "status": "running",
        "result": None,
    }


def save_state(out: Path, state: Mapping[str, Any]) -> None:
    atomic_write(out / STATE_FILE, json.dumps(state, indent=2) + "\n")


def load_state(out: Path, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The state of an earlier run in ``out``; UserError when there is none or any input differs."""
    path = out / STATE_FILE
    try:
        state = read_json(path, "the bisect state", untrusted.Limits(max_bytes=STATE_MAX_BYTES))
    except FileNotFoundError:
        raise UserError(
            "no bisect to resume here (no bisect.json); start one without --resume", file=path
        ) from None
    if not isinstance(state, dict) or state.get("schema") != SCHEMA:
        raise UserError(f"not a bisect state ({SCHEMA})", file=path, field="schema")
    if not isinstance(state.get("inputs"), dict):
        raise UserError("malformed bisect state: expected a mapping", file=path, field="inputs")
    for key, cls in (("tags", Tag), ("steps", Step)):
        _check_records(state.get(key), cls, path, key)
    _check_consistent(state, path)
    for key, value in inputs.items():
        if state["inputs"].get(key) != value:
            raise UserError(
                f"the bisect here was started with {key}={state['inputs'].get(key)!r}, this run has "
                f"{value!r}; start a new one in another --out",
                file=path,
                field=f"inputs.{key}",
            )
    return state


def _check_consistent(state: Mapping[str, Any], path: Path) -> None:
    """What the search replays must hold together: two tags at least, each step on a listed tag and a side."""
    if len(state["tags"]) < 2:
        raise UserError("malformed bisect state: fewer than two tags", file=path, field="tags")
    names = {t["name"] for t in state["tags"]}
    for index, step in enumerate(state["steps"]):
        if step["tag"] not in names or step["side"] not in ("good", "bad", "skip"):
            raise UserError(
                "malformed bisect state: a step on an unlisted tag or side (good, bad, skip)",
                file=path,
                field=f"steps[{index}]",
            )
    if not isinstance(state.get("source"), str) or not isinstance(state.get("notes"), list):
        raise UserError("malformed bisect state: source or notes", file=path, field="source")
    if state.get("status") not in ("running", "interrupted", "done", "out of time"):
        raise UserError("malformed bisect state: unknown status", file=path, field="status")


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "str | None": (str, type(None)),
    "float": (int, float),
    "dict[str, Any] | None": (dict, type(None)),
}


def _check_records(items: Any, cls: type, path: Path, key: str) -> None:
    """Each item of a state list is a mapping of ``cls``'s fields with values of their types (a hand-edited or
    truncated bisect.json answers with one line naming the field, not a traceback)."""
    if not isinstance(items, list):
        raise UserError("malformed bisect state: expected a list", file=path, field=key)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        if not isinstance(item, dict):
            raise UserError("malformed bisect state: expected a mapping", file=path, field=where)
        unknown = sorted(set(item) - set(fields))
        missing = sorted(required - set(item))
        if unknown or missing:
            what = f"unknown key {unknown[0]!r}" if unknown else f"key {missing[0]!r} missing"
            raise UserError(f"malformed bisect state: {what}", file=path, field=where)
        for name, value in item.items():
            allowed = _FIELD_TYPES[str(fields[name].type)]
            if isinstance(value, bool) or not isinstance(value, allowed):
                raise UserError(
                    f"malformed bisect state: {type(value).__name__} where {fields[name].type} belongs",
                    file=path,
                    field=f"{where}.{name}",
                )


def tags_of(state: Mapping[str, Any]) -> list[Tag]:
    return [Tag(**t) for t in state["tags"]]


def steps_of(state: Mapping[str, Any]) -> list[Step]:
    return [Step(**s) for s in state["steps"]]


# --- the loop ------------------------------------------------------------------------------------------

StepFn = Callable[[Tag, float], Step]
Echo = Callable[[str], None]


@dataclass(frozen=True)
class Budget:
    """The run's time bound: the sweep's per-profile bound times the steps this run may need."""

    per_step_s: float
    steps: int

    @property
    def total_s(self) -> float:
        return self.per_step_s * max(1, self.steps)


def run(
    state: dict[str, Any],
    out: Path,
    *,
    good_verdict: str,
    step: StepFn,
    discard: Callable[[Tag], None],
    per_step_s: float,
    echo: Echo,
) -> int:
    """Test tags until the change is placed; returns 0 when placed, 1 when the time bound or skipped tags
    leave it open. Saves the state after every step; an Interrupted propagates after saving. A step cut short
    by the time bound that ended in ``timeout`` is no verdict: ``discard`` drops its report, the run stops."""
    tags = tags_of(state)
    search = Search(tags, steps_of(state))
    budget = Budget(per_step_s, search.steps_left())
    deadline = time.monotonic() + budget.total_s
    done = len(state["steps"])
    try:
        while (index := search.next_index()) is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return _out_of_time(state, out, budget, echo)
            tag = tags[index]
            done += 1
            echo(
                f"step {done} of ≤{done + search.steps_left() - 1}: testing {tag.name} "
                f"({len(search.untested())} candidates left)"
            )
            result = step(tag, min(per_step_s, left))
            if result.verdict == "timeout" and left < per_step_s:
                discard(tag)
                return _out_of_time(state, out, budget, echo)
            if result.side != "skip":
                result.side = "good" if result.verdict == good_verdict else "bad"
            state["steps"].append(asdict(result))
            save_state(out, state)
            echo(f"  {tag.name}: {result.verdict or 'not run'} -> {result.side} ({result.reason[:160]})")
            search = Search(tags, steps_of(state))
    except Interrupted:
        state["status"] = "interrupted"
        save_state(out, state)
        raise
    state["result"] = result_of(state, good_verdict)
    state["status"] = "done"
    save_state(out, state)
    return 0 if state["result"]["placed"] else 1


def _out_of_time(state: dict[str, Any], out: Path, budget: Budget, echo: Echo) -> int:
    state["status"] = "out of time"
    save_state(out, state)
    echo(
        f"bisect: the time bound ({budget.steps} step(s) x {budget.per_step_s:.0f} s) is spent; "
        "--resume continues"
    )
    return 1


def result_of(state: Mapping[str, Any], good_verdict: str) -> dict[str, Any]:
    """The answer: the last tag on the good side, the first on the other, both steps' evidence, commits."""
    tags = tags_of(state)
    steps = {s["tag"]: s for s in state["steps"]}
    search = Search(tags, steps_of(state))
    last_good, first_bad = tags[search.lo], tags[search.hi]

    def side(tag: Tag, endpoint: str, assumed: str) -> dict[str, Any]:
        ran = steps.get(tag.name)
        return {
            "tag": tag.name,
            "day": tag.day,
            "commit": commit_of(tag, ran),
            "run": ran is not None,
            "verdict": ran["verdict"] if ran else None,
            "note": None if ran else f"not run: the {endpoint} tag, taken as {assumed}",
            "step": ran,
        }

    old = side(last_good, "--good", f"{good_verdict} (--good-verdict)")
    new = side(first_bad, "--bad", f"not {good_verdict}")
    skipped = search.skipped()
    return {
        "placed": not skipped,
        "last_unchanged": old,
        "first_changed": new,
        "skipped_between": skipped,
        "compare": COMPARE_URL.format(old=old["commit"], new=new["commit"]),
        "steps": len(state["steps"]),
    }


def commit_of(tag: Tag, step: Mapping[str, Any] | None) -> str:
    """The SGLang commit of a tag: the image label's full sha where it extends the tag's, else the tag's."""
    label = (step or {}).get("label_commit") or ""
    return label if label.startswith(tag.sha) else tag.sha


def summary_lines(state: Mapping[str, Any], out: Path) -> list[str]:
    """The answer in words (printed at the end and by a resume of a finished bisect)."""
    result = state["result"]
    old, new = result["last_unchanged"], result["first_changed"]
    lines = []
    if result["skipped_between"]:
        lines.append(
            f"bisect: the change lies between {old['tag']} and {new['tag']}; untestable in between: "
            + ", ".join(result["skipped_between"])
        )
    else:
        lines.append(f"bisect: first changed tag: {new['tag']}")
    for label, item in (("last unchanged", old), ("first changed", new)):
        step = item["step"]
        if step is None:
            lines.append(f"  {label:<15} {item['tag']}  ({item['note']})")
            continue
        version = f"SGLang {step['sglang_version']}" if step.get("sglang_version") else "SGLang ?"
        lines.append(f"  {label:<15} {item['tag']}  {step['verdict']}  ({version}, commit {item['commit']})")
        lines.append(f"  {'':<15} {step['reason'][:200]}")
        if step.get("report"):
            lines.append(f"  {'':<15} evidence: {out / step['report']}")
    lines.append(f"  SGLang commits: {old['commit']} -> {new['commit']}: {result['compare']}")
    lines.append(f"  {result['steps']} step(s); state: {out / STATE_FILE}")
    return lines
