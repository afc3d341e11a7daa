"""The Docker-free parts of a bisect step: the throwaway variant made from the profile's variant, its name,
and which image label names the SGLang commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwstack.bisect import search
from bwstack.bisect.step import label_commit, throwaway_name, throwaway_variant
from bwstack.errors import UserError
from bwstack.stack import schema

TAG = search.parse_tag("nightly-dev-cu13-20260801-1a2b3c4d")


def test_the_throwaway_variant_is_the_tag_as_published_with_the_variants_arch_lists_and_env(
    repo_stack: schema.Stack, tmp_path: Path
) -> None:
    base = repo_stack.variant("nightly-cu13-20260705-754524d8")
    assert base.overrides and base.sources and base.env  # what the step must not (or must) carry over
    image = f"lmsysorg/sglang:{TAG.name}"
    made = throwaway_variant(base, "bisect-x", tmp_path, image, TAG)
    assert (made.base_image, made.base_digest, made.sglang_commit, made.sglang_version) == (
        image,
        "",
        TAG.sha,
        "",
    )
    assert made.overrides == () and dict(made.sources) == {} and dict(made.python) == {}
    assert made.env == base.env and made.torch_cuda_arch_list == base.torch_cuda_arch_list
    assert made.build_args()["BASE_IMAGE"] == image and made.build_args()["SOURCES"] == ""
    assert made.dir == tmp_path and made.kind == "nightly"


def test_a_bad_repository_is_refused_as_the_repo_option(repo_stack: schema.Stack, tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        throwaway_variant(repo_stack.variant("v0.5.23-cu130"), "x", tmp_path, f"Bad Repo:{TAG.name}", TAG)
    assert caught.value.field == "--repo"


def test_the_name_is_stable_and_differs_per_image_and_variant(repo_stack: schema.Stack) -> None:
    a, b = repo_stack.variant("v0.5.23-cu130"), repo_stack.variant("v0.5.9-cu130")
    one = throwaway_name(a, f"r/s:{TAG.name}", TAG)
    assert one == throwaway_name(a, f"r/s:{TAG.name}", TAG) and one.startswith(f"bisect-{TAG.sha}-")
    assert one != throwaway_name(a, f"q/s:{TAG.name}", TAG) != throwaway_name(b, f"r/s:{TAG.name}", TAG)


def test_the_commit_label_of_a_bwstack_image_and_of_another_image() -> None:
    assert label_commit({"io.bwstack.sglang-commit": "abc1234"}) == "abc1234"
    # on a bwstack image the OCI revision is bwstack's own commit, never SGLang's
    assert label_commit({"io.bwstack.variant": "v", "org.opencontainers.image.revision": "f00"}) is None
    assert label_commit({"org.opencontainers.image.revision": "def5678"}) == "def5678"
    assert label_commit({}) is None
