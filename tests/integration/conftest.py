"""Fixtures for the end-to-end compose tests: the stand-in images (built once per session) and the engine checks.

Helpers (``wait_until``, ``TrackedContainer``, ``StandinCompose``) live in ``integration.dockerstack``.
"""

from __future__ import annotations

import pytest

from integration import dockerstack


@pytest.fixture(scope="session")
def standin_refs(docker_engine: None) -> dict[str, str]:
    """variant -> stand-in serving image (the services run with ``compose.nogpu.yaml``: any engine will do)."""
    return dockerstack.standin_images()
