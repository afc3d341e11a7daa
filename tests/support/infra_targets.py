"""What the testinfra fixtures hand to the tests: a container under test and its testinfra host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bwstack.stack import schema
from support.dockerstack import StandinCompose, TrackedContainer


@dataclass(frozen=True)
class Target:
    """A container under test and its testinfra host."""

    variant: str
    image: str
    container: TrackedContainer
    host: Any  # testinfra.host.Host


@dataclass(frozen=True)
class Service(Target):
    """The running compose service, with what it was started from."""

    stack: schema.Stack
    profile: str
    compose: StandinCompose
    hf_token: str
    api_key: str
