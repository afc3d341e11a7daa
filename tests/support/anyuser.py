"""A real non-root operator for the any-user tests: a user made here, a member of the ``docker`` group, with
bwstack installed as an operator would (a venv of the system Python, the package installed from this tree: the
tests' own interpreter may live where the user cannot read), Compose v2 where the user can run it, and a
runner that executes a command as that user in a login-like environment.

Making the user needs root (CI runs as root); everything made (the user and its home, the venv) is removed
when :func:`made_operator` ends.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support import dockerstack
from support.stack import ROOT

SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Operator:
    name: str
    home: Path
    python: Path

    @property
    def bwstack(self) -> Path:
        return self.python.parent / "bwstack"

    def own(self, path: Path) -> None:
        """Give ``path`` (and all below it) to the user, as if the user had made it."""
        subprocess.run(["chown", "-R", f"{self.name}:{self.name}", str(path)], check=True, timeout=120)


def copy_source(dest: Path) -> Path:
    """What ``pip install`` builds bwstack from (pyproject.toml, README.md, src/, healthchecks/) into ``dest``,
    and the committed ``secrets/README.md`` (a checkout's secrets folder, empty of secrets)."""
    dest.mkdir(exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", dest / "src", ignore=ignore)
    shutil.copytree(ROOT / "healthchecks", dest / "healthchecks", ignore=ignore, dirs_exist_ok=True)
    (dest / "secrets").mkdir(exist_ok=True)  # as a checkout has it: its README, no secret
    shutil.copy2(ROOT / "secrets" / "README.md", dest / "secrets" / "README.md")
    return dest


def _install_tree(venv: Path) -> None:
    """bwstack from this tree into ``venv`` (a copy of what the wheel is built from, in a folder root owns)."""
    source = copy_source(venv.parent / "source")
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(source)], capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stderr[-2000:]


def _give_compose(name: str, home: Path) -> None:
    """Compose v2 for the user as Docker documents a per-user install (~/.docker/cli-plugins), when this
    host's plugin lives where the user cannot run it (root's own ~/.docker)."""
    listed = dockerstack.docker(
        "info", "--format", '{{range .ClientInfo.Plugins}}{{.Name}} {{.Path}}{{"\\n"}}{{end}}', check=False
    )
    paths = [line.split(" ", 1)[1] for line in listed.stdout.splitlines() if line.startswith("compose ")]
    if not paths or not paths[0].startswith(str(Path.home())):
        return
    plugins = home / ".docker" / "cli-plugins"
    plugins.mkdir(parents=True)
    shutil.copy2(paths[0], plugins / "docker-compose")
    subprocess.run(["chown", "-R", f"{name}:{name}", str(home / ".docker")], check=True)


def made_operator() -> Iterator[Operator]:
    """The body of a module-scoped ``operator`` fixture: the user made, yielded, removed (skip or fail where
    this process is not root or the system Python is missing)."""
    if os.geteuid() != 0:
        dockerstack.skip_or_fail("making a test user needs root")
    if not Path(SYSTEM_PYTHON).exists():
        dockerstack.skip_or_fail(f"no {SYSTEM_PYTHON} to make the user's venv from")
    name = f"bwnr{os.getpid() % 100000}"
    scratch = Path(tempfile.mkdtemp(prefix="bwstack-anyuser-"))
    scratch.chmod(0o755)
    subprocess.run(["useradd", "-m", "-G", "docker", name], check=True, timeout=60)
    try:
        _install_tree(scratch / "venv")
        home = Path(pwd.getpwnam(name).pw_dir)
        _give_compose(name, home)
        yield Operator(name, home, scratch / "venv" / "bin" / "python")
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, timeout=60, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def as_user(
    user: Operator, argv: list[str], env: dict[str, str], cwd: Path, *, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the user, in a login-like environment (its HOME), with ``env`` added."""
    base = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(user.home),
        "USER": user.name,
        "LANG": "C.UTF-8",
    }
    command = ["setpriv", f"--reuid={user.name}", f"--regid={user.name}", "--init-groups", "env", "-i"]
    command += [f"{k}={v}" for k, v in {**base, **env}.items()]
    return subprocess.run(
        [*command, *argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )
