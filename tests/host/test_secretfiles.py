"""Secret files on the host: created 0600 and readable for the serving user (uid 10001) only, judged as the
kernel judges them; ``doctor``'s secrets check. Where the tests run as root, the kernel itself is asked
(``setpriv`` to uid 10001 and to another uid), so :func:`readable_by` is checked against the real answer."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwstack.errors import UserError
from bwstack.host import secretfiles
from bwstack.host.doctor.host import check_secrets
from bwstack.stack import loader, schema
from healthchecks import imagelayout
from support.stack import copy_stack

ROOT_WITH_SETPRIV = os.geteuid() == 0 and shutil.which("setpriv") is not None


def kernel_lets_read(path: Path, uid: int) -> bool:
    done = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "cat", str(path)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder every user may enter (pytest's own tmp folders are 0700 for root): the kernel check below
    runs as uid 10001, which must reach the file to be judged on the file's own mode and ACL."""
    made = Path(tempfile.mkdtemp(prefix="bwstack-secretfiles-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)


def acl_supported(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_text("")
    try:
        os.setxattr(probe, secretfiles.ACL_XATTR, secretfiles.build_acl([
            secretfiles.AclEntry(0x01, 6, 0xFFFFFFFF), secretfiles.AclEntry(0x04, 0, 0xFFFFFFFF),
            secretfiles.AclEntry(0x20, 0, 0xFFFFFFFF),
        ]))  # fmt: skip
    except OSError:
        return False
    finally:
        probe.unlink()
    return True


def test_created_secret_is_0600_plus_one_acl_entry_for_the_serving_user(folder: Path) -> None:
    tmp_path = folder
    if not acl_supported(tmp_path):
        pytest.skip("this file system takes no POSIX ACL")
    path = tmp_path / "api_key"
    secretfiles.create_secret(path)
    mode = path.stat().st_mode
    assert stat.S_IMODE(mode) == 0o640  # group bits show the ACL mask: r for the named user
    entries = secretfiles.parse_acl(os.getxattr(path, secretfiles.ACL_XATTR))
    named = [e for e in entries if e.tag == 0x02]
    assert [(e.id, e.perm) for e in named] == [(imagelayout.UID, 4)]
    assert secretfiles.readable_by(path)
    assert not secretfiles.readable_by(path, uid=10002, gid=10002)
    assert secretfiles.grant_serving_user(path) is None  # idempotent
    if ROOT_WITH_SETPRIV:
        path.write_text("the-key\n")
        assert kernel_lets_read(path, imagelayout.UID)
        assert not kernel_lets_read(path, 10002)


@pytest.mark.parametrize(
    ("mode", "owner", "expected"),
    [(0o600, 0, False), (0o644, 0, True), (0o640, 0, False), (0o400, imagelayout.UID, True)],
)
def test_readable_by_follows_the_mode_bits_without_an_acl(
    folder: Path, mode: int, owner: int, expected: bool
) -> None:
    tmp_path = folder
    if os.geteuid() != 0 and owner != os.getuid():
        pytest.skip("needs root to change the owner")
    path = tmp_path / "hf_token"
    path.write_text("t")
    if owner != os.getuid():
        os.chown(path, owner, 0)
    path.chmod(mode)
    assert secretfiles.readable_by(path) is expected
    if ROOT_WITH_SETPRIV:
        assert kernel_lets_read(path, imagelayout.UID) is expected


def test_an_existing_0600_file_is_granted_and_others_lose_read(tmp_path: Path) -> None:
    if not acl_supported(tmp_path):
        pytest.skip("this file system takes no POSIX ACL")
    path = tmp_path / "api_key"
    path.write_text("k")
    path.chmod(0o604)
    note = secretfiles.grant_serving_user(path)
    assert note is not None and "uid 10001" in note
    assert secretfiles.readable_by(path) and path.stat().st_mode & 0o007 == 0


def cpu_stack_with_secrets(tmp_path: Path, *, hf_token: bool = False) -> schema.Stack:
    """A scratch copy of the CPU stack with stack.api_key on (and hf_token when asked), loaded."""
    copy_stack(tmp_path)
    path = tmp_path / "profiles.cpu.yaml"
    token = "true" if hf_token else "false"
    path.write_text(
        path.read_text().replace("  hf_token: false\n", f"  hf_token: {token}\n  api_key: true\n")
    )
    return loader.load_stack(path)


def test_ensure_secrets_creates_and_grants_each_enabled_secret(tmp_path: Path) -> None:
    if not acl_supported(tmp_path):
        pytest.skip("this file system takes no POSIX ACL")
    stack = cpu_stack_with_secrets(tmp_path, hf_token=True)
    notes = secretfiles.ensure_secrets(stack)
    assert len(notes) == 2 and all("created empty secret file" in n for n in notes)
    for name in ("api_key", "hf_token"):
        assert secretfiles.readable_by(tmp_path / "secrets" / name)
    assert secretfiles.ensure_secrets(stack) == []
    (tmp_path / "secrets" / "api_key").unlink()
    os.mkfifo(tmp_path / "secrets" / "api_key")
    with pytest.raises(UserError, match="regular file"):
        secretfiles.ensure_secrets(stack)


def test_doctor_fails_an_unreadable_secret_and_passes_a_granted_one(tmp_path: Path) -> None:
    path = tmp_path / "api_key"
    path.write_text("k")
    unreadable = secretfiles.SecretState("api_key", path, "unreadable")
    check = check_secrets([unreadable])
    assert check.status == "fail" and "uid 10001" in check.detail and str(path) in check.fix
    assert check_secrets([secretfiles.SecretState("api_key", path, "ok")]).status == "pass"
    assert check_secrets([secretfiles.SecretState("api_key", path, "empty")]).status == "warn"
    assert check_secrets(None).status == "skip"


def test_state_of_reads_the_real_file(tmp_path: Path) -> None:
    path = tmp_path / "api_key"
    assert secretfiles.state_of("api_key", path).state == "missing"
    os.mkfifo(path)
    assert secretfiles.state_of("api_key", path).state == "not_regular"
    path.unlink()
    path.write_text("key")
    path.chmod(0o600)
    expected = "ok" if os.getuid() == imagelayout.UID else "unreadable"
    assert secretfiles.state_of("api_key", path).state == expected


def test_up_refuses_an_api_key_beginning_with_a_dash_in_one_line(tmp_path: Path) -> None:
    """Before anything starts (the serve wrapper refuses it too, in the container): SGLang's parser would
    take the key for an option (tests/real/test_real_server.py)."""
    stack = cpu_stack_with_secrets(tmp_path)
    (tmp_path / "secrets").mkdir(exist_ok=True)
    key = tmp_path / "secrets" / "api_key"
    key.write_text("-xsecret\n")
    key.chmod(0o600)
    with pytest.raises(UserError) as refused:
        secretfiles.ensure_secrets(stack)
    text = str(refused.value)
    assert "the API key begins with '-'" in text and "-xsecret" not in text and "\n" not in text
    key.write_text("sk-fine\n")
    secretfiles.ensure_secrets(stack)  # no error
