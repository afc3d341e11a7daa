"""Secrets on engines that are not plain rootful Docker (issue 34): the engine kind from ``docker info``'s
security options, the serving user's mapped host uid under rootless Docker and userns-remap, what ``doctor``
says and what ``up`` grants (host/enginekind.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_secretfiles import acl_supported, cpu_stack_with_secrets

from bwstack.host import enginekind, secretfiles
from bwstack.host.doctor.host import check_secrets

SUBUID = "op:100000:65536\ndockremap:231072:65536\n"


@pytest.mark.docker
def test_this_engine_is_plain_rootful_docker(docker_engine: None) -> None:
    """The real ``docker info`` of the engine the tests run on: seccomp, no user namespace, uid 10001 as is."""
    info = enginekind.docker_info()
    assert info is not None
    options = enginekind.security_options(info)
    assert "seccomp" in options and not {"rootless", "userns"} & options, options
    kind = enginekind.kind_of(options)
    assert kind.serving_uid == 10001 and kind.mapping == "" and not kind.rootless and not kind.userns


def test_security_option_names_as_the_engine_prints_them() -> None:
    info = {
        "SecurityOptions": ["name=seccomp,profile=builtin", "name=selinux", "name=userns", "name=cgroupns"]
    }
    assert enginekind.security_options(info) == {"seccomp", "selinux", "userns", "cgroupns"}
    assert enginekind.security_options({"SecurityOptions": "name=rootless"}) == frozenset()  # not a list
    assert enginekind.security_options({}) == frozenset()


@pytest.mark.parametrize(
    ("option", "user", "uid"),
    [
        ("rootless", "op", 100000 + 10001 - 1),
        ("userns", "dockremap", 231072 + 10001),
        ("seccomp", "op", 10001),
    ],
)
def test_the_serving_uid_on_the_host(tmp_path: Path, option: str, user: str, uid: int) -> None:
    """Rootless: container uid 0 is the daemon's user, uid N >= 1 is subuid start + N - 1; userns-remap: the
    remap user's subuid start + N."""
    subuid = tmp_path / "subuid"
    subuid.write_text(SUBUID)
    found, how = enginekind.serving_uid(
        frozenset({option}), daemon_user="op", remap_user="dockremap", subuid=subuid
    )
    assert found == uid
    assert (how == "") == (option == "seccomp") and (user in how or option == "seccomp")


def test_doctor_says_what_the_secrets_need_and_up_grants_the_mapped_uid(tmp_path: Path) -> None:
    if not acl_supported(tmp_path):
        pytest.skip("this file system takes no POSIX ACL")
    stack = cpu_stack_with_secrets(tmp_path)
    mapped = 231072 + 10001
    kind = enginekind.EngineKind(frozenset({"userns", "seccomp"}), False, mapped, "subuid dockremap:231072")
    notes = secretfiles.ensure_secrets(stack, kind)
    key = tmp_path / "secrets" / "api_key"
    assert any(f"uid {mapped}, uid 10001 in the container" in n for n in notes), notes
    assert secretfiles.readable_by(key, mapped, mapped)
    assert secretfiles.ensure_secrets(stack, kind) == []  # granted once
    key.write_text("sk-test-key\n")  # the operator's key (an empty one is doctor's own warning)
    state = secretfiles.state_of("api_key", key, mapped)
    assert state.state == "ok", state
    check = check_secrets([state], kind.needs())
    assert check.status == "warn" and f"uid 10001 in the container is uid {mapped}" in check.detail, check
    selinux = enginekind.EngineKind(frozenset({"selinux"}), True, 10001, "")
    assert selinux.relabel and "container_file_t" in selinux.needs()[0]
    assert not enginekind.EngineKind(frozenset({"selinux"}), False, 10001, "").relabel  # permissive host
    assert os.geteuid() == 0 or not secretfiles.readable_by(key, 10001, 10001)
