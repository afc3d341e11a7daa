"""``bwstack bisect`` without Docker: tag parsing and ordering, the --tags file, the candidate window, the
registry rule (asked only when a candidate may not be local), the search, the state file and the loop (with a
step function that answers like a planted image history)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bwstack.bisect import search
from bwstack.errors import ExternalError, UserError

FLAVOUR = "nightly-dev-cu13"


def name(day: int, sha: str = "") -> str:
    return f"{FLAVOUR}-202611{day:02d}-{sha or f'{day:02d}abcdef'}"


def tags_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "tags.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def no_docker() -> list[str]:
    raise AssertionError("bad input must be refused before Docker is asked for the local images")


def never(repo: str, prefix: str) -> dict[str, str]:
    raise AssertionError(f"the registry was asked for {repo} {prefix}")


# --- tags ---------------------------------------------------------------------------------------------------


def test_a_dated_nightly_parses_into_flavour_day_and_sha() -> None:
    tag = search.parse_tag("nightly-dev-cu13-20260705-754524d8")
    assert (tag.flavour, tag.day, tag.sha) == ("nightly-dev-cu13", "2026-07-05", "754524d8")
    assert search.parse_tag("nightly-20261101-abcdef0").flavour == "nightly"


@pytest.mark.parametrize(
    "bad",
    ["latest", "v0.5.23-cu130", "nightly-dev-cu13-20261301-abcdef0", "nightly-dev-cu13-20261101-xyz1234"],
)
def test_anything_else_is_refused_naming_the_option(bad: str) -> None:
    with pytest.raises(UserError) as caught:
        search.parse_tag(bad, field="--good")
    assert caught.value.field == "--good" and bad in caught.value.render()


def test_order_is_by_the_day_in_the_name_then_push_time_then_listing() -> None:
    a = search.Tag(name(3, "aaaaaaa"), FLAVOUR, "2026-11-03", "aaaaaaa", "2026-11-03T20:00:00Z")
    b = search.Tag(name(3, "bbbbbbb"), FLAVOUR, "2026-11-03", "bbbbbbb", "2026-11-03T04:00:00Z")
    c = search.parse_tag(name(1))
    d = search.parse_tag(name(3, "ddddddd"))
    e = search.parse_tag(name(3, "eeeeeee"))
    assert [t.sha for t in search.order([a, e, b, c, d])] == [c.sha, e.sha, d.sha, b.sha, a.sha]


def test_the_tags_file_takes_comments_push_times_and_any_order(tmp_path: Path) -> None:
    path = tags_file(tmp_path, ["# nightlies", "", f"{name(2)}  2026-11-02T05:00:00+02:00  # two", name(1)])
    tags = search.read_tags_file(path)
    assert [t.name for t in tags] == [name(2), name(1)]
    assert tags[0].pushed == "2026-11-02T03:00:00Z" and tags[1].pushed is None


@pytest.mark.parametrize(
    ("lines", "line", "words"),
    [
        ([name(1), "latest"], 2, "not a dated nightly"),
        ([name(1), f"{name(2)} yesterday"], 2, "not an ISO 8601 time"),
        ([name(1), f"{name(2)} 2026-11-02 extra"], 2, "expected 'TAG [PUSH_TIME]'"),
        ([name(1), "# again", name(1)], 3, "listed twice (first on line 1)"),
    ],
)
def test_a_bad_tags_file_line_is_named_by_file_and_line(
    tmp_path: Path, lines: list[str], line: int, words: str
) -> None:
    path = tags_file(tmp_path, lines)
    with pytest.raises(UserError) as caught:
        search.read_tags_file(path)
    assert caught.value.render().startswith(f"{path}:{line}: ") and words in caught.value.render()


def test_an_empty_tags_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no tags"):
        search.read_tags_file(tags_file(tmp_path, ["# nothing"]))


# --- candidates ---------------------------------------------------------------------------------------------


def test_a_tags_file_of_local_images_never_asks_the_registry(tmp_path: Path) -> None:
    days = [5, 1, 8, 3, 2, 7, 4, 6]
    path = tags_file(tmp_path, [name(d) for d in days])
    found = search.resolve_candidates(
        "r/sglang",
        name(2),
        name(7),
        tags_file=path,
        local_tags=lambda: [name(d) for d in days],
        registry=never,
    )
    assert [t.name for t in found.tags] == [name(d) for d in range(2, 8)]
    assert found.notes == []


def test_a_tag_that_is_not_local_asks_the_registry_whose_push_times_order_one_day(tmp_path: Path) -> None:
    early, late = name(2, "fffffff"), name(2, "0000000")
    path = tags_file(tmp_path, [name(1), early, late, name(3)])
    asked: list[tuple[str, str]] = []

    def registry(repo: str, prefix: str) -> dict[str, str]:
        asked.append((repo, prefix))
        return {early: "2026-11-02T01:00:00Z", late: "2026-11-02T23:00:00Z"}

    found = search.resolve_candidates(
        "r/sglang", name(1), name(3), tags_file=path, local_tags=lambda: [name(1), name(3)], registry=registry
    )
    assert asked == [("r/sglang", FLAVOUR)]
    assert [t.name for t in found.tags] == [name(1), early, late, name(3)]
    assert "will be pulled" in found.notes[0]


def test_an_unreachable_registry_is_a_note_and_the_names_order(tmp_path: Path) -> None:
    def down(repo: str, prefix: str) -> dict[str, str]:
        raise ExternalError("Docker Hub did not answer (timed out)")

    found = search.resolve_candidates(
        "r/sglang",
        name(1),
        name(4),
        tags_file=None,
        local_tags=lambda: [name(4), name(1), name(2), "v0.5.9"],
        registry=down,
    )
    assert [t.name for t in found.tags] == [name(1), name(2), name(4)]
    assert "did not answer" in found.notes[0] and found.source == "the local images of r/sglang"


def test_without_a_file_the_registry_adds_the_tags_not_pulled() -> None:
    found = search.resolve_candidates(
        "r/sglang",
        name(1),
        name(4),
        tags_file=None,
        local_tags=lambda: [name(1), name(4)],
        registry=lambda repo, prefix: {
            name(3): "2026-11-03T00:00:00Z",
            name(2): "2026-11-02T00:00:00Z",
            f"{FLAVOUR}x-20261102-{'e' * 7}": "2026-11-02T00:00:00Z",  # another flavour the prefix matches
        },
    )
    assert [t.name for t in found.tags] == [name(d) for d in (1, 2, 3, 4)]
    assert found.source.endswith("and Docker Hub")


@pytest.mark.parametrize(
    ("good", "bad", "words", "field"),
    [
        (name(1), name(1), "the same tag", "--bad"),
        (name(1), name(9), f"unknown tag {name(9)}", "--bad"),
        (name(5), name(2), "newer than --bad", "--good"),
        (name(1), f"nightly-dev-cu12-20261102-{'a' * 7}", "bisect one flavour", "--bad"),
        ("latest", name(2), "not a dated nightly", "--good"),
    ],
)
def test_bad_input_names_the_option(tmp_path: Path, good: str, bad: str, words: str, field: str) -> None:
    path = tags_file(tmp_path, [name(d) for d in range(1, 6)])
    with pytest.raises(UserError) as caught:
        search.resolve_candidates("r/s", good, bad, tags_file=path, local_tags=no_docker, registry=None)
    assert words in caught.value.render() and caught.value.field == field


def test_the_offline_switch_and_a_non_hub_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(search.OFFLINE_ENV, raising=False)
    assert not search.registry_disabled()
    monkeypatch.setenv(search.OFFLINE_ENV, "1")
    assert search.registry_disabled()
    with pytest.raises(ExternalError, match="not Docker Hub"):
        search.hub_tags("ghcr.io/org/sglang", FLAVOUR)


# --- the search and the loop ----------------------------------------------------------------------------------


def window(count: int) -> list[search.Tag]:
    return [search.parse_tag(name(d)) for d in range(1, count + 1)]


class History:
    """A step function answering like real images: tags from ``first_bad`` on give ``garbage``."""

    def __init__(self, tags: list[search.Tag], first_bad: int, *, unrunnable: tuple[int, ...] = ()) -> None:
        self.index = {t.name: i for i, t in enumerate(tags)}
        self.first_bad = first_bad
        self.unrunnable = unrunnable
        self.asked: list[str] = []
        self.discarded: list[str] = []
        self.verdict_override: str | None = None

    def __call__(self, tag: search.Tag, timeout: float) -> search.Step:
        self.asked.append(tag.name)
        i = self.index[tag.name]
        if i in self.unrunnable:
            return search.Step(tag.name, "skip", None, "docker pull failed", "t", 1.0)
        verdict = self.verdict_override or ("garbage" if i >= self.first_bad else "nan")
        return search.Step(
            tag.name, "", verdict, f"{verdict} seen", "t", 1.0, sglang_version="x", evidence={}
        )

    def discard(self, tag: search.Tag) -> None:
        self.discarded.append(tag.name)


def start(tmp_path: Path, tags: list[search.Tag]) -> dict[str, Any]:
    state = search.new_state({"profile": "p"}, search.Candidates(tags, "test"))
    search.save_state(tmp_path, state)
    return state


def run(
    tmp_path: Path, state: dict[str, Any], history: History, lines: list[str], per_step: float = 60
) -> int:
    return search.run(
        state,
        tmp_path,
        good_verdict="nan",
        step=history,
        discard=history.discard,
        per_step_s=per_step,
        echo=lines.append,
    )


@pytest.mark.parametrize("count", [2, 3, 8, 9, 17])
def test_every_planted_boundary_is_found_within_ceil_log2_steps(tmp_path: Path, count: int) -> None:
    tags = window(count)
    bound = search.steps_for(count - 2)
    for first_bad in range(1, count):
        state = start(tmp_path, tags)
        history = History(tags, first_bad)
        lines: list[str] = []
        assert run(tmp_path, state, history, lines) == 0
        result = state["result"]
        assert result["first_changed"]["tag"] == tags[first_bad].name
        assert result["last_unchanged"]["tag"] == tags[first_bad - 1].name
        assert len(history.asked) <= bound
        assert all(
            line.split(" of ≤")[1].startswith(str(bound)) for line in lines if line.startswith("step ")
        )
    if count == 8:
        assert bound == 3


def test_progress_lines_and_the_result_of_eight_tags(tmp_path: Path) -> None:
    tags = window(8)
    state = start(tmp_path, tags)
    lines: list[str] = []
    run(tmp_path, state, History(tags, 5), lines)
    steps = [line for line in lines if line.startswith("step ")]
    assert steps == [
        f"step 1 of ≤3: testing {tags[4].name} (6 candidates left)",
        f"step 2 of ≤3: testing {tags[6].name} (2 candidates left)",
        f"step 3 of ≤3: testing {tags[5].name} (1 candidates left)",
    ]
    saved = json.loads((tmp_path / search.STATE_FILE).read_text(encoding="utf-8"))
    assert saved["status"] == "done" and saved["result"] == state["result"]
    result = state["result"]
    assert result["compare"] == f"https://github.com/sgl-project/sglang/compare/{tags[4].sha}...{tags[5].sha}"
    assert result["last_unchanged"]["step"]["verdict"] == "nan"
    assert result["first_changed"]["step"]["verdict"] == "garbage"
    text = "\n".join(search.summary_lines(state, tmp_path))
    assert f"first changed tag: {tags[5].name}" in text and result["compare"] in text


def test_a_boundary_at_an_endpoint_says_that_side_was_not_run(tmp_path: Path) -> None:
    tags = window(4)
    state = start(tmp_path, tags)
    run(tmp_path, state, History(tags, 1), [])
    old = state["result"]["last_unchanged"]
    assert old["tag"] == tags[0].name and old["run"] is False and "the --good tag" in old["note"]


def test_a_killed_run_resumes_from_its_state_with_the_same_answer(tmp_path: Path) -> None:
    tags = window(8)
    straight = start(tmp_path / "a", tags)
    run(tmp_path / "a", straight, History(tags, 3), [])

    class Killed(BaseException):
        pass

    history = History(tags, 3)
    calls = 0

    def dies_in_step_two(tag: search.Tag, timeout: float) -> search.Step:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise Killed
        return history(tag, timeout)

    state = start(tmp_path / "b", tags)
    with pytest.raises(Killed):
        search.run(state, tmp_path / "b", good_verdict="nan", step=dies_in_step_two, discard=history.discard,
                   per_step_s=60, echo=lambda _: None)  # fmt: skip
    reread = json.loads((tmp_path / "b" / search.STATE_FILE).read_text(encoding="utf-8"))
    assert len(reread["steps"]) == 1 and reread["status"] == "running"
    assert run(tmp_path / "b", reread, History(tags, 3), []) == 0
    assert reread["result"]["first_changed"] == straight["result"]["first_changed"]
    assert len(reread["steps"]) == len(straight["steps"])


def test_an_interrupt_saves_the_state_as_interrupted(tmp_path: Path) -> None:
    tags = window(8)
    state = start(tmp_path, tags)

    def interrupted(tag: search.Tag, timeout: float) -> search.Step:
        raise search.Interrupted(2)

    with pytest.raises(search.Interrupted):
        search.run(state, tmp_path, good_verdict="nan", step=interrupted, discard=lambda t: None,
                   per_step_s=60, echo=lambda _: None)  # fmt: skip
    assert json.loads((tmp_path / search.STATE_FILE).read_text())["status"] == "interrupted"


def test_untestable_tags_are_skipped_and_leave_the_answer_open_when_they_must(tmp_path: Path) -> None:
    tags = window(8)
    state = start(tmp_path, tags)
    history = History(tags, 5, unrunnable=(5,))
    assert run(tmp_path, state, history, []) == 1
    result = state["result"]
    assert result["placed"] is False and result["skipped_between"] == [tags[5].name]
    assert (result["last_unchanged"]["tag"], result["first_changed"]["tag"]) == (tags[4].name, tags[6].name)
    assert "untestable in between" in search.summary_lines(state, tmp_path)[0]
    state = start(tmp_path, tags)
    assert run(tmp_path, state, History(tags, 6, unrunnable=(4,)), []) == 0
    assert state["result"]["first_changed"]["tag"] == tags[6].name


def test_a_step_the_time_bound_cut_short_is_discarded_not_recorded(tmp_path: Path) -> None:
    tags = window(8)
    state = start(tmp_path, tags)
    history = History(tags, 5)
    history.verdict_override = "timeout"
    lines: list[str] = []
    # the bound is 3 steps x 60 s; a clock that says 150 s are gone when step 1 starts leaves it 30 s
    clock = iter([0.0, 150.0, 150.0, 150.0])
    bisect_time = search.time.monotonic
    try:
        search.time.monotonic = lambda: next(clock)  # type: ignore[assignment]
        assert run(tmp_path, state, history, lines) == 1
    finally:
        search.time.monotonic = bisect_time  # type: ignore[assignment]
    assert history.discarded == [tags[4].name] and state["steps"] == []
    assert state["status"] == "out of time" and "--resume continues" in lines[-1]


# --- state ----------------------------------------------------------------------------------------------------


def test_resume_refuses_other_inputs_and_a_missing_state(tmp_path: Path) -> None:
    state = search.new_state({"profile": "p", "good": name(1)}, search.Candidates(window(3), "test"))
    search.save_state(tmp_path, state)
    assert search.load_state(tmp_path, {"profile": "p", "good": name(1)})["tags"] == state["tags"]
    with pytest.raises(UserError) as caught:
        search.load_state(tmp_path, {"profile": "p", "good": name(2)})
    assert caught.value.field == "inputs.good" and caught.value.file == str(tmp_path / search.STATE_FILE)
    with pytest.raises(UserError, match="no bisect to resume"):
        search.load_state(tmp_path / "none", {})
    (tmp_path / search.STATE_FILE).write_text("{torn", encoding="utf-8")
    with pytest.raises(UserError, match="cannot read the bisect state: not JSON"):
        search.load_state(tmp_path, {})


def test_the_commit_is_the_labels_full_sha_where_it_extends_the_tags() -> None:
    tag = search.parse_tag("nightly-dev-cu13-20260705-754524d8")
    full = "754524d8" + "0" * 32
    assert search.commit_of(tag, {"label_commit": full}) == full
    assert search.commit_of(tag, {"label_commit": "deadbeef"}) == "754524d8"
    assert search.commit_of(tag, None) == "754524d8"


# --- the command's bad input, before any Docker call ---------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"--bad": name(1)}, "--bad: --good and --bad are the same tag"),
        ({"PROFILE": "no-such-profile"}, "unknown profile 'no-such-profile'"),
        ({"--good-verdict": "fine"}, "--good-verdict: unknown class 'fine'"),
        ({"--bad": name(9)}, f"tags.txt: --bad: unknown tag {name(9)}"),
        ({"--good": "latest"}, "--good: 'latest' is not a dated nightly tag"),
        ({"--tags": "BROKEN"}, "broken.txt:2: 'v0.5.23' is not a dated nightly tag"),
    ],
)
def test_the_command_refuses_bad_input_with_exit_2_before_docker(
    repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, str], words: str
) -> None:
    from click.testing import CliRunner

    from bwstack import cli
    from bwstack.bisect import step

    monkeypatch.setattr(step, "local_tags", lambda repo: no_docker())
    good = tags_file(tmp_path, [name(d) for d in range(1, 6)])
    broken = tmp_path / "broken.txt"
    broken.write_text(f"{name(1)}\nv0.5.23\n", encoding="utf-8")
    values = {"PROFILE": "cpu-torch-native", "--good": name(1), "--bad": name(5), "--tags": str(good)}
    values.update({k: (str(broken) if v == "BROKEN" else v) for k, v in change.items()})
    args = [
        "-f",
        str(repo_root / "profiles.cpu.yaml"),
        "bisect",
        values.pop("PROFILE"),
        "--out",
        str(tmp_path / "o"),
    ]
    for option, value in values.items():
        args += [option, value]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()
