"""``bwstack lock --check`` against real servers on 127.0.0.1: Debian's docker-registry for the base digest, a
PEP 503 index (``python -m http.server``) for the locked wheels, a git repository for a source commit.

A scratch stack gets a variant whose base lives in the local registry (pushed over the HTTP API v2, locked by
``bwstack lock`` itself), whose override is a file of the local index (locked by ``bwstack lock``'s own lock
writer with that file's sha256) and whose ``[sources]`` commit is in a local git repository. Then each pin is
left intact, moved (the tag re-pushed, the file rebuilt) or made to vanish (the manifest deleted, the file
removed, a commit that is not there), and the command is run as an operator would run it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bwstack.build.lock import command as lock_command
from bwstack.stack import pins
from support.registry import Index, Registry, free_port, need_registry, package_index, registry
from support.stack import copy_stack

CLI = [sys.executable, "-m", "bwstack.cli"]
NAME = "v0.5.23-local"
REPO = "lmsysorg/sglang"
WHEEL = "tinypkg-1.0-py3-none-any.whl"
#: what pins.toml names (sources must be https); git's url.<base>.insteadOf maps it onto the local repository,
#: as an operator's mirror configuration would
SOURCE_URL = "https://git.bwstack.invalid/tiny.git"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@bwstack.invalid", *args],
        cwd=repo, capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip


def _source_repo(tmp: Path) -> tuple[str, str]:
    repo = tmp / "src-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "setup.py").write_text("print('tiny')\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    return repo.as_uri(), _git(repo, "rev-parse", "HEAD")


def _variant(root: Path, reg: Registry, index: Index, source: tuple[str, str]) -> None:
    """images/NAME: v0.5.23-cu130's pins with the base in ``reg``, one override from ``index``, one source."""
    folder = root / "images" / NAME
    folder.mkdir()
    text = (root / "images" / "v0.5.23-cu130" / "pins.toml").read_text(encoding="utf-8")
    text = text.replace('image = "lmsysorg/sglang:', f'image = "{reg.host}/{REPO}:')
    text = re.sub(r"(?m)^packages = \[\]$", 'packages = ["tinypkg==1.0"]', text)
    text = text.replace("[python]\n", '[python]\ntinypkg = "1.0"\n', 1)
    text = text.replace(
        "[sources]\n",
        f'[sources.tiny]\nrepo = "{SOURCE_URL}"\nref = "{source[1]}"\nreplaces = ["tinypkg"]\nsubmodules = []\n',
    )
    (folder / "pins.toml").write_text(text, encoding="utf-8")
    variant = pins.load_variant(root / "images", NAME)

    def local_hashes(name: str, version: str) -> list[tuple[str, str]]:
        path = index.root / "files" / WHEEL
        return [(path.name, hashlib.sha256(path.read_bytes()).hexdigest())]

    lock_command.write_overrides_lock(variant, local_hashes)


def _check(stack: Path, index_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    mirror = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{(stack.parent / 'src-repo').as_uri()}.insteadOf",
              "GIT_CONFIG_VALUE_0": SOURCE_URL}  # fmt: skip
    return subprocess.run([*CLI, "-f", str(stack), "lock", "--check", "--variant", NAME, "--index-url", index_url,
                           *extra], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **mirror})  # fmt: skip


def _lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """kind -> the state word of its line."""
    out = {}
    for line in done.stdout.splitlines():
        match = re.match(rf"{re.escape(NAME)}: (base|wheel|source) .*?: (\w+)", line)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def test_lock_check_intact_moved_missing(tmp_path: Path) -> None:
    need_registry()
    stack = copy_stack(tmp_path)
    source = _source_repo(tmp_path)
    with registry(tmp_path / "reg") as reg, package_index(tmp_path / "idx") as index:
        tag = "v0.5.23-cu130"
        pushed = reg.push(REPO, tag, "first")
        (index.root / "files" / WHEEL).write_bytes(b"the wheel as locked")
        index.publish()
        _variant(stack.parent, reg, index, source)
        locked = subprocess.run([*CLI, "-f", str(stack), "lock", "--variant", NAME, "--no-python"],
                                capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert locked.returncode == 0, locked.stdout + locked.stderr
        assert pins.load_variant(stack.parent / "images", NAME).base_digest == pushed  # bwstack lock wrote it

        intact = _check(stack, index.url)
        assert intact.returncode == 0, intact.stdout + intact.stderr
        assert _lines(intact) == {"base": "ok", "wheel": "ok", "source": "ok"}
        assert len(intact.stdout.splitlines()) == 4 and "every pin holds" in intact.stdout

        moved_to = reg.push(REPO, tag, "second")  # the tag now names another image
        (index.root / "files" / WHEEL).write_bytes(b"a rebuilt wheel under the same name")
        index.publish()
        moved = _check(stack, index.url)
        assert moved.returncode == 1
        assert _lines(moved) == {"base": "moved", "wheel": "moved", "source": "ok"}
        base_line = next(line for line in moved.stdout.splitlines() if " base " in line)
        assert f"locked {pushed}, now {moved_to}" in base_line

        reg.delete(REPO, moved_to)  # the tag vanishes
        (index.root / "files" / WHEEL).unlink()
        (index.root / "files" / "tinypkg-2.0-py3-none-any.whl").write_bytes(b"only a newer release")
        index.publish()
        gone_ref = "0" * 40
        pins_path = stack.parent / "images" / NAME / "pins.toml"
        pins_path.write_text(
            pins_path.read_text(encoding="utf-8").replace(source[1], gone_ref), encoding="utf-8"
        )
        missing = _check(stack, index.url, "--json")
        assert missing.returncode == 1
        doc = json.loads(missing.stdout)
        assert doc["schema"] == "bwstack.build.lock-check/1" and doc["holds"] is False
        states = {p["kind"]: p["state"] for p in doc["pins"]}
        assert states == {"base": "missing", "wheel": "missing", "source": "missing"}


def test_lock_check_offline_names_what_it_could_not_check(tmp_path: Path) -> None:
    need_registry()
    stack = copy_stack(tmp_path)
    source = _source_repo(tmp_path)
    with registry(tmp_path / "reg") as reg, package_index(tmp_path / "idx") as index:
        reg.push(REPO, "v0.5.23-cu130", "first")
        (index.root / "files" / WHEEL).write_bytes(b"the wheel as locked")
        index.publish()
        _variant(stack.parent, reg, index, source)
        lock_command.set_digest(stack.parent / "images" / NAME / "pins.toml", "sha256:" + "a" * 64)
    # both servers are stopped now: nothing answers on their ports
    dead_index = f"http://127.0.0.1:{free_port()}/simple"
    offline = _check(stack, dead_index)
    assert offline.returncode == 1
    assert _lines(offline) == {"base": "unchecked", "wheel": "unchecked", "source": "ok"}
    assert "every pin holds" not in offline.stdout
    assert not re.search(r": (base|wheel) .*: ok\b", offline.stdout), offline.stdout
    assert "2 pin(s) do not hold or were not checked" in offline.stdout


def test_lock_check_says_unlocked_for_a_base_without_digest(tmp_path: Path) -> None:
    stack = copy_stack(tmp_path)
    done = subprocess.run([*CLI, "-f", str(stack), "lock", "--check", "--variant", "v0.5.23-cu130", "--index-url",
                           f"http://127.0.0.1:{free_port()}/simple"], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 1
    assert "v0.5.23-cu130: base lmsysorg/sglang:v0.5.23-cu130: unlocked (no digest;" in done.stdout


@pytest.mark.parametrize(
    ("registry_host", "scheme"),
    [
        ("127.0.0.1:5000", "http"),
        ("localhost:5000", "http"),
        ("registry-1.docker.io", "https"),
        ("nvcr.io", "https"),
    ],
)
def test_a_registry_on_this_machine_is_asked_over_http(registry_host: str, scheme: str) -> None:
    assert lock_command.registry_url(registry_host) == f"{scheme}://{registry_host}"
