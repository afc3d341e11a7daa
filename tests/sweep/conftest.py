"""Fixtures for the sweep and report tests: the headless Chromium binary (``support.headless`` runs it)."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium: skip locally when it is missing, fail under CI."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is required in CI (apt-get install chromium)")
        pytest.skip("chromium not installed")
    return found
