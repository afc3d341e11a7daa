"""``bwstack up`` refuses a stale render and names the files it compared: the CPU stack's profiles.cpu.yaml
renders compose.cpu.yaml, so a stale compose.cpu.yaml is named as such (it once said compose.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwstack.errors import UserError
from bwstack.ops import updown
from bwstack.render import compose
from bwstack.stack import loader
from support.stack import copy_stack


@pytest.mark.parametrize(
    ("profiles", "rendered", "command"),
    [
        ("profiles.yaml", "compose.yaml", "bwstack render"),
        ("profiles.cpu.yaml", "compose.cpu.yaml", "bwstack render -f profiles.cpu.yaml"),
    ],
)
def test_a_stale_render_is_named_by_its_own_files(
    tmp_path: Path, profiles: str, rendered: str, command: str
) -> None:
    (tmp_path / "stack").mkdir()
    root = copy_stack(tmp_path / "stack").parent
    stack = loader.load_stack(root / profiles)
    (root / rendered).write_text(compose.render_compose(stack), encoding="utf-8")
    updown.check_fresh(stack)  # a fresh render passes

    (root / rendered).write_text(compose.render_compose(stack) + "# edited by hand\n", encoding="utf-8")
    with pytest.raises(UserError) as stale:
        updown.check_fresh(stack)
    assert stale.value.message == f"{rendered} is not a fresh render of {profiles}; run '{command}'"
    assert stale.value.file == str(root / rendered)

    (root / rendered).unlink()
    with pytest.raises(UserError) as missing:
        updown.check_fresh(stack)
    assert missing.value.message == f"{rendered} missing; run '{command}'"
