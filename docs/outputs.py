"""Command output shown in README.md and docs/, generated from real runs (``python docs/outputs.py``).

A block of output in a page sits between two markers and is never typed by hand::

    <!-- output: ID -->
    ```
    $ bwstack ...
    (what the command printed)
    ```
    <!-- /output -->

``ID`` names a recipe below: the commands, run for real in a scratch copy of the stack (the repository's
profiles.yaml, images/, templates/, …), and which part of their standard output the page shows (an excerpt is
cut from the real output, never edited). The README's profile table is rendered from profiles.yaml the same
way (``<!-- profile-table -->``). A block whose output needs a GPU host or Docker is marked
``<!-- output: not generated (WHY) -->`` instead and listed by ``--list``.

``--check`` regenerates into memory and exits 1 naming each stale block (tests/design/test_docs_outputs.py
runs it; the recipes that read release wheels from the package index run only where the ``wheels`` tests do).
The runs use ``$BWSTACK_CACHE`` like any bwstack command.
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from support.stack import copy_stack  # noqa: E402 - the scratch copy the tests use, one definition

BLOCK = re.compile(
    r"(<!-- output: (?P<id>[\w.-]+) -->\n```[\w-]*\n)(?P<body>.*?)(```\n<!-- /output -->)", re.S
)
NOT_GENERATED = re.compile(r"<!-- output: not generated \((?P<why>[^)]*)\) -->")
TABLE = re.compile(r"(<!-- profile-table: [^\n]*-->\n)(?P<body>.*?)(<!-- /profile-table -->)", re.S)
PAGES = [REPO / "README.md", *sorted(HERE.glob("*.md"))]

Select = Callable[[str], str]


@dataclass(frozen=True)
class Recipe:
    """Commands (each ``bwstack …`` argv) run in order in the page's scratch stack; the last one is shown."""

    commands: tuple[str, ...]
    select: Select | None = None
    note: str = ""  # a comment after the shown command line
    wheels: bool = False  # reads release wheels from the package index
    setup: Callable[[Path], None] | None = None  # prepares the scratch stack (its folder) before the commands
    stderr: bool = False  # show what the command wrote to stderr (bwstack's one-line errors and warnings)
    show_all: bool = False  # show every command with its output, not only the last
    merged: bool = False  # stdout and stderr as the terminal shows them, interleaved (warnings dropped)


def cpu_evidence_contradicted(root: Path) -> None:
    """The shipped evidence beside profiles.cpu.yaml, whose cpu-torch-native says nan (bundles: healthy)."""
    shutil.copytree(REPO / "evidence", root / "evidence")
    path = root / "profiles.cpu.yaml"
    text = path.read_text(encoding="utf-8")
    head, _, tail = text.partition("  cpu-torch-native:")
    path.write_text(
        head + "  cpu-torch-native:" + tail.replace("expect: healthy", "expect: nan", 1), encoding="utf-8"
    )


def bad_bundles(root: Path) -> None:
    """bad.tar.gz (a symbolic link member) and corrupt.tar.gz (a shipped bundle, its results.json altered)."""
    with tarfile.open(root / "bad.tar.gz", "w:gz") as out:
        manifest = tarfile.TarInfo("manifest.json")
        manifest.size = 2
        out.addfile(manifest, io.BytesIO(b"{}"))
        link = tarfile.TarInfo("run/link.yaml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        out.addfile(link)
    shipped = sorted((REPO / "evidence" / "bundles").glob("*.tar.gz"))[0]
    with tarfile.open(shipped) as source, tarfile.open(root / "corrupt.tar.gz", "w:gz") as out:
        for member in source.getmembers():
            handle = source.extractfile(member)
            data = handle.read() if handle else b""
            if member.name == "results.json":
                data = data.replace(b'"healthy"', b'"nan"', 1)
            member.size = len(data)
            out.addfile(member, io.BytesIO(data))


def _edited_bundle(root: Path, name: str, part: str, edit: Callable[[dict[str, object]], None]) -> None:
    """``name``: the shipped bundle with one JSON part edited (manifest hashes kept truthful)."""
    import json

    from support.bundles import base_parts, bundle_of

    parts = base_parts()
    doc = json.loads(parts[part])
    edit(doc)
    parts[part] = json.dumps(doc).encode()
    (root / name).write_bytes(bundle_of(parts))


def secret_bundle(root: Path) -> None:
    """secret.tar.gz: an HF-token-shaped host name in host.json (a made-up token, not a real one)."""
    from bwstack.sweep import bundleread

    _edited_bundle(
        root, "secret.tar.gz", bundleread.HOST, lambda doc: doc.update(hostname="hf_" + "Qx7" * 12)
    )


def doubtful_bundle(root: Path) -> None:
    """odd.tar.gz: the shipped CPU sweep's rows claimed as sm120 GPU verdicts by a host with no GPU."""
    from bwstack.sweep import bundleread

    def as_sm120(doc: dict[str, object]) -> None:
        stack = doc["stack"]
        assert isinstance(stack, dict)
        stack["gpu_arch"] = "sm120"

    _edited_bundle(root, "odd.tar.gz", bundleread.RESULTS, as_sm120)


def between(start: str, end: str | None) -> Select:
    """The lines from the first starting with ``start`` up to (without) the next starting with ``end``."""

    def cut(text: str) -> str:
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        rest = lines[first + 1 :]
        last = next((i for i, line in enumerate(rest) if end is not None and line.startswith(end)), len(rest))
        return "\n".join([lines[first], *rest[:last]]).rstrip() + "\n"

    return cut


def matching(pattern: str) -> Select:
    """The first line matching ``pattern`` and the indented lines after it."""

    def cut(text: str) -> str:
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if re.match(pattern, line))
        rest = [line for line in lines[first + 1 :]]
        indented = next((i for i, line in enumerate(rest) if not line.startswith(" ")), len(rest))
        return "\n".join([lines[first], *rest[:indented]]) + "\n"

    return cut


def lines_starting(*prefixes: str) -> Select:
    def keep(text: str) -> str:
        return "".join(line + "\n" for line in text.splitlines() if line.startswith(prefixes))

    return keep


RECIPES: dict[str, Recipe] = {
    "variant-new-0517": Recipe(
        ("bwstack variant new v0.5.17-cu130 --sglang 0.5.17 --from v0.5.23-cu130",), wheels=True
    ),
    "upgrade-0516-0517": Recipe(
        ("bwstack upgrade 0.5.16 v0.5.17-cu130",), between("| profile |", "## "), wheels=True
    ),
    "upgrade-0516-0517-dense-triton-auto": Recipe(
        ("bwstack upgrade 0.5.16 v0.5.17-cu130",),
        between("## dense-triton-auto", "## "),
        note="the dense-triton-auto section",
        wheels=True,
    ),
    "upgrade-059-0523-legacy": Recipe(
        ("bwstack upgrade v0.5.9-cu130 v0.5.23-cu130 legacy-dense-fi-bf16",),
        lines_starting("- removed: `--cuda-graph-max-bs`", "- sm120:"),
        note="the legacy-dense-fi-bf16 findings",
        wheels=True,
    ),
    "upgrade-059-0518-livelock": Recipe(
        ("bwstack upgrade v0.5.9-cu130 0.5.18 dsa-fi-sparse-fp8",),
        between("| profile |", "## Defaults"),
        wheels=True,
    ),
    "upgrade-apply-0516": Recipe(
        ("bwstack upgrade v0.5.9-cu130 0.5.16 legacy-dense-fi-bf16 --apply",),
        between("--- a/", None),
        wheels=True,
    ),
    "validate-evidence-contradicts": Recipe(
        ("bwstack -f profiles.cpu.yaml validate",),
        matching(
            r"bwstack: warning: profiles\.cpu\.yaml:\d+: profile cpu-torch-native: expect: nan, but seen"
        ),
        note="cpu-torch-native's expect set to nan",
        setup=cpu_evidence_contradicted,
        stderr=True,
    ),
    "verify-secret-bundle": Recipe(
        ("bwstack report verify secret.tar.gz",), setup=secret_bundle, stderr=True
    ),
    "verify-doubtful-bundle": Recipe(
        ("bwstack report verify odd.tar.gz",), setup=doubtful_bundle, stderr=True
    ),
    "render-k8s-old-lws": Recipe(
        ("bwstack render --target k8s --nodes 2 --profile dense-fi-bf16 --out deploy/ --lws-version v0.7.0",),
        lines_starting("bwstack: --lws-version"),
        stderr=True,
    ),
    "render-k8s-fit": Recipe(
        (
            "bwstack render --target k8s --nodes 2 --profile dense-fi-bf16 --out deploy/ --fit 2x8",
            "bwstack render --target k8s --nodes 2 --profile dense-fi-bf16 --out deploy/ --fit 1x8",
        ),
        merged=True,
        show_all=True,
    ),
    "verify-bad-bundles": Recipe(
        ("bwstack report verify bad.tar.gz", "bwstack report verify corrupt.tar.gz"),
        setup=bad_bundles,
        stderr=True,
        show_all=True,
    ),
}


def run(stack: Path, command: str, *, stderr: bool = False, merged: bool = False) -> str:
    argv = shlex.split(command)
    assert argv[0] == "bwstack", command
    done = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *argv[1:]],
        cwd=stack.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True, timeout=1800, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    if merged:
        return "".join(
            line for line in done.stdout.splitlines(True) if not line.startswith("bwstack: warning:")
        )
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"{command}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stderr if stderr else done.stdout


def render_block(recipe: Recipe, stack: Path) -> str:
    if recipe.setup is not None:
        recipe.setup(stack.parent)
    note = f"   # {recipe.note}" if recipe.note else ""
    shown = []
    for command in recipe.commands:
        text = run(stack, command, stderr=recipe.stderr, merged=recipe.merged)
        text = recipe.select(text) if recipe.select else text
        shown.append(f"$ {command}{note}\n{text}")
    return "".join(shown) if recipe.show_all else shown[-1]


def profile_table() -> str:
    """The README's table of the shipped profiles, from profiles.yaml."""
    from bwstack.stack import loader

    stack = loader.load_stack(REPO / "profiles.yaml")
    rows = ["| profile | variant | backends | expect | evidence |", "| --- | --- | --- | --- | --- |"]
    for name, profile in stack.profiles.items():
        backends = "; ".join(f"{field} {value}" for field, value in profile.backends().items() if value)
        evidence = "; ".join(profile.evidence) or "-"
        variant = profile.variant or stack.settings.variant
        rows.append(f"| `{name}` | {variant} | {backends} | {profile.expect} | {evidence} |")
    return "\n".join(rows) + "\n"


def generate(page: Path, *, wheels: bool) -> str:
    """The page with every generated block and table rendered anew (recipes needing wheels only if asked)."""
    text = page.read_text(encoding="utf-8")
    if TABLE.search(text):
        text = TABLE.sub(lambda m: m.group(1) + profile_table() + m.group(3), text)
    if not BLOCK.search(text):
        return text
    with tempfile.TemporaryDirectory(prefix="bwstack-docs-") as scratch:
        stack = copy_stack(Path(scratch))

        def fill(match: re.Match[str]) -> str:
            recipe = RECIPES.get(match.group("id"))
            if recipe is None:
                raise SystemExit(
                    f"{page.name}: no recipe for output {match.group('id')!r} in docs/outputs.py"
                )
            if recipe.wheels and not wheels:
                return match.group(0)
            return match.group(1) + render_block(recipe, stack) + match.group(4)

        return BLOCK.sub(fill, text)


def _shown(page: Path) -> str:
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    parser.add_argument("--no-wheels", action="store_true", help="skip the recipes that read release wheels")
    parser.add_argument("--list", action="store_true", help="list the blocks marked not generated")
    parser.add_argument("pages", nargs="*", type=Path, help="default: README.md and docs/*.md")
    args = parser.parse_args(argv)
    pages = [p.resolve() for p in args.pages] or PAGES
    if args.list:
        for page in pages:
            for match in NOT_GENERATED.finditer(page.read_text(encoding="utf-8")):
                print(f"{_shown(page)}: not generated: {match.group('why')}")
        return 0
    stale = 0
    for page in pages:
        old = page.read_text(encoding="utf-8")
        new = generate(page, wheels=not args.no_wheels)
        if new == old:
            continue
        if args.check:
            stale += 1
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), _shown(page), "generated",
                                        lineterm="", n=1)  # fmt: skip
            print("\n".join(diff))
            print(f"{_shown(page)}: output is stale; run 'python docs/outputs.py'", file=sys.stderr)
        else:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {_shown(page)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
