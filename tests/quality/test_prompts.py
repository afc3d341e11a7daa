"""The seeded prompt set and the needle task: shapes fixed by the window and the served context."""

from __future__ import annotations

from bwstack.quality import prompts, retrieval


def test_the_prompt_set_runs_from_short_to_past_the_window() -> None:
    assert prompts.lengths_for(None, 4096) == [64, 256, 1024, 2304]
    assert prompts.lengths_for(None, 1000) == [64, 256, 992]  # capped by the served context, once
    assert prompts.lengths_for(256, None) == [64, 256, 128, 512]


def test_a_prompt_is_a_block_then_the_block_again_and_the_same_on_every_call() -> None:
    first = prompts.prompt_set(None, 4096)
    assert first == prompts.prompt_set(None, 4096)
    assert len(first) == 1 + 4 * prompts.PER_LENGTH
    assert (first[0].id, first[0].text is not None, first[0].start) == ("passage", True, 1)
    p = first[-1]
    assert (p.id, p.length, p.start) == ("copy-2304-1", 2304, 1152)
    assert p.ids[p.start :] == p.ids[: p.length - p.start]
    assert first[-1].ids != first[-2].ids


def test_needles_sit_at_spread_depths_and_their_key_is_unique() -> None:
    assert retrieval.lengths_for(None, 4096) == [1024, 2048, 4088]
    found = retrieval.needles(2048)
    assert len(found) == retrieval.NEEDLES
    distances = [n.distance for n in found]
    assert distances == sorted(distances, reverse=True) and distances[0] > 1800 and distances[-1] < 200
    for needle in found:
        ids = needle.ids
        assert len(ids) == 2048
        assert ids[len(ids) - needle.distance] == needle.answer
        pair = ids[-2:]
        where = [j for j in range(1, len(ids)) if (ids[j - 1], ids[j]) == pair]
        assert where == [len(ids) - needle.distance - 1, len(ids) - 1]


def test_accuracy_counts_the_right_answers() -> None:
    found = retrieval.needles(1024, count=4)
    got = retrieval.score(
        1024, [(found[0], found[0].answer), (found[1], None), (found[2], -1), (found[3], found[3].answer)]
    )
    assert (got.right, got.asked, got.accuracy) == (2, 4, 0.5)
