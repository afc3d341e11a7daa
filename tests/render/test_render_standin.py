"""The stand-in compose file the end-to-end tests run differs from the committed compose.yaml only in the image
and the environment (no Docker needed: rendering only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from bwstack.build.standin_image import STANDIN_REPO
from bwstack.render import compose
from bwstack.sweep.run import STANDIN_OVERRIDE, gpu_reservation_reset
from support import dockerstack
from support.stack import ROOT


def _load(text: str) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(text)
    return data


def _without(service: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in service.items() if key not in keys}


def test_standin_services_differ_only_in_image_and_environment(tmp_path: Path) -> None:
    stack = dockerstack.repo_stack()
    images = {v: f"{STANDIN_REPO}:{v}" for v in stack.variants_used()}
    committed = _load((ROOT / compose.COMPOSE_FILE).read_text(encoding="utf-8"))
    faults = dockerstack.fault_plan(stack)[0]
    plans = {
        "healthy": dockerstack.standin_env(stack, {name: "none" for name in stack.profiles}),
        "faults": dockerstack.fault_cycle_env(stack, faults),
    }
    for label, env in plans.items():
        rendered = dockerstack.StandinCompose.create(
            stack, tmp_path / label, name="unused", images=images, env_by_profile=env, memlock_reset=False
        )
        ours = _load(rendered.files[0].read_text(encoding="utf-8"))
        # the GPU reservations stay in the rendered file; the stand-in's own override removes them
        assert [f.name for f in rendered.files[1:]] == ["compose.ports.yaml", STANDIN_OVERRIDE]
        nogpu = rendered.files[2].read_text(encoding="utf-8")
        assert nogpu == gpu_reservation_reset(list(stack.profiles))
        assert _without(ours, "services") == _without(committed, "services")
        assert list(ours["services"]) == list(committed["services"])
        for name, service in ours["services"].items():
            base = committed["services"][name]
            assert _without(service, "image", "environment") == _without(base, "image", "environment"), name
            assert service["image"] == images[stack.variant_name_for(name)] != base["image"]
            ours_env = env.get(name, {})
            assert service["environment"] == {**base["environment"], **ours_env}, name
            assert all(k.startswith("BWSTACK_STANDIN_") for k in ours_env)
            if label == "faults":
                assert ours_env.get("BWSTACK_STANDIN_FAULT") == faults.get(name)
