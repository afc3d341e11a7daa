"""Fixtures for the stand-in tests (helpers live in ``standin_helpers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.standin_helpers import StandinFactory


@pytest.fixture()
def standin(tmp_path: Path) -> Iterator[StandinFactory]:
    factory = StandinFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()
