"""The host tests' Hub on 127.0.0.1 (``support.hub``): one small checkpoint, one granted token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.hub import TEST_REPO, TEST_TOKEN, Hub, Repo, serve, tiny_model


@pytest.fixture()
def repo() -> Repo:
    return tiny_model(TEST_REPO)


@pytest.fixture()
def hub(repo: Repo) -> Iterator[Hub]:
    with serve(Hub(repos={TEST_REPO: repo}, tokens={TEST_TOKEN}, granted={TEST_TOKEN})) as running:
        yield running
