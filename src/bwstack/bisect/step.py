"""One ``bwstack bisect`` step on Docker: a tag's image, a throwaway variant for it, one sweep of the profile.

For a tag ``REPO:TAG`` (pulled when it is not local) the step

1. dumps SGLang's parser inside that image (``sglang-args.json``, :mod:`bwstack.build.lock.args`),
   so the profile is spelt and checked the way that build of SGLang expects;
2. writes a throwaway variant next to the bisect's state (``variants/<name>/``): the profile's variant with
   the tag as its base, the tag's commit as its SGLang, and the variant's CUDA arch lists and env switches.
   The tag is tested as published: the variant's Python overrides and source builds are not applied (they
   would be rebuilt for every tag);
3. builds the serving image of that variant (the project's Dockerfile on the tag: serve wrapper and deep
   healthcheck) from a staged build context. A tag whose image already is a bwstack serving image (label
   ``io.bwstack.stage=serve``: an operator's own builds, the tests' local tags) is run as it is, with its own
   env switches: the Dockerfile cannot be rebuilt on it, because the base's ``BWSTACK_VARIANT`` environment
   variable overrides the build arg of that name and the build would read the base's variant folder; and
4. runs the sweep of the one profile on it (``steps/<tag>/``, the sweep's own report and ``--resume``), with
   the ``--good`` verdict as the profile's ``expect`` (so the sweep's "matches" column reads "unchanged"),
   then removes the throwaway image.

A tag that cannot be pulled, dumped, built or spelt for is skipped with the reason; it is never a verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack import launch, record
from bwstack.bisect.search import Interrupted, Step, Tag
from bwstack.build import dockerbuild
from bwstack.build.lock import args as lock_args
from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.record import read
from bwstack.stack import pins, snapshots
from bwstack.stack.schema import Stack
from bwstack.sweep.run import run_sweep

#: seconds a pull of a tag's image may take (a CUDA image is tens of GB)
PULL_TIMEOUT_S = 3600
BUILD_TIMEOUT_S = 3600
#: the label a bwstack serving image records its SGLang commit in, and the OCI one other images may use
COMMIT_LABELS = ("io.bwstack.sglang-commit", "org.opencontainers.image.revision")
VARIANTS_DIR = "variants"
STEPS_DIR = "steps"
CONTEXT_DIR = "context"


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def local_tags(repo: str) -> list[str]:
    """The tags of ``repo`` present on this machine (``docker images``)."""
    done = docker("images", "--format", "{{.Tag}}", repo)
    if done.returncode != 0:
        raise ExternalError(f"docker images {repo} failed: {' '.join(done.stderr.split())[:200]}")
    return [t for t in done.stdout.split() if t and t != "<none>"]


def image_labels(image: str) -> dict[str, str]:
    done = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image)
    if done.returncode != 0:
        return {}
    labels = json.loads(done.stdout or "null") or {}
    return {str(k): str(v) for k, v in labels.items()}


def label_commit(labels: dict[str, str]) -> str | None:
    """The SGLang commit an image's labels name: bwstack's own label, else the OCI revision of an image that
    is not a bwstack build (on a bwstack image that label is bwstack's own revision)."""
    own = labels.get(COMMIT_LABELS[0])
    if own:
        return own
    if launch.LABEL_VARIANT in labels:
        return None
    return labels.get(COMMIT_LABELS[1]) or None


def throwaway_name(base: pins.Variant, image: str, tag: Tag) -> str:
    """``bisect-<sha>-<hash of image and variant>``: one per tag image and profile variant."""
    key = hashlib.sha256(f"{image}\n{json.dumps(base.manifest(), sort_keys=True)}".encode()).hexdigest()[:8]
    return f"bisect-{tag.sha[:12]}-{key}"


def throwaway_variant(base: pins.Variant, name: str, folder: Path, image: str, tag: Tag) -> pins.Variant:
    """The profile's variant re-based on the tag: same device, arch lists and env switches; the tag's SGLang
    as published (no Python overrides, no source builds, no wheelhouse)."""
    if not pins.IMAGE_REF.match(image):
        raise UserError(f"{image!r} is not an image reference", field="--repo")
    return dataclasses.replace(
        base,
        name=name,
        dir=folder,
        kind="nightly",
        description=f"bisect step: {base.name} re-based on {image}, tested as published",
        evidence=(f"bwstack bisect, tag {tag.name} ({tag.day})",),
        base_image=image,
        base_digest="",
        sglang_version="",
        sglang_commit=tag.sha,
        python={},
        python_reasons={},
        overrides=(),
        sources={},
        wheelhouse=(),
        local_wheels=(),
    )


class StepRunner:
    """Runs one tag at a time for one profile; the throwaway images it built are removed after each step."""

    def __init__(
        self,
        stack: Stack,
        profile: str,
        repo: str,
        out: Path,
        *,
        fast: bool,
        good_verdict: str,
        console: Any,
        echo: Callable[[str], None],
    ) -> None:
        self.stack = stack
        self.good_verdict = good_verdict
        self.profile = profile
        self.repo = repo
        self.out = out
        self.fast = fast
        self.console = console
        self.echo = echo
        self.base = stack.variant_for(profile)

    def step_dir(self, tag: Tag) -> Path:
        return self.out / STEPS_DIR / tag.name

    def discard(self, tag: Tag) -> None:
        """Forget a step's sweep report (a verdict the time bound cut short is none)."""
        shutil.rmtree(self.step_dir(tag), ignore_errors=True)

    def __call__(self, tag: Tag, timeout: float) -> Step:
        started_at, t0 = record.utc_now(), time.monotonic()
        image = f"{self.repo}:{tag.name}"

        def skip(reason: str, **extra: Any) -> Step:
            return Step(tag.name, "skip", None, reason, started_at, round(time.monotonic() - t0, 2), **extra)

        try:
            self.ensure_image(image)
        except ExternalError as exc:
            return skip(str(exc))
        labels = image_labels(image)
        commit = label_commit(labels)
        try:
            variant, snapshot = self.prepare(image, tag)
            stack = self.with_variant(variant, snapshot)
            ref = self.serving_image(stack, variant, labels)
        except ExternalError as exc:
            return skip(str(exc), label_commit=commit)
        try:
            row = self.sweep(stack, variant, tag, timeout)
        except UserError as exc:  # the profile cannot be spelt for this SGLang (a flag it lacks)
            return skip(exc.render(), sglang_version=snapshot.sglang_version, label_commit=commit)
        finally:
            docker("rmi", ref)
        return Step(
            tag=tag.name,
            side="",
            verdict=str(row["verdict"]),
            reason=str(row.get("reason") or ""),
            started_at=started_at,
            elapsed_s=round(time.monotonic() - t0, 2),
            report=str((self.step_dir(tag) / record.RESULTS_FILE).relative_to(self.out)),
            sglang_version=snapshot.sglang_version,
            label_commit=commit,
            decided_by=row.get("decided_by"),
            evidence=row.get("evidence"),
        )

    # -- the parts --

    def ensure_image(self, image: str) -> None:
        if docker("image", "inspect", image).returncode == 0:
            return
        self.echo(f"  pulling {image}")
        try:
            done = docker("pull", "--quiet", image, timeout=PULL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ExternalError(f"docker pull {image} timed out after {PULL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise ExternalError(f"docker pull {image} failed: {' '.join(done.stderr.split())[-200:]}")

    def prepare(self, image: str, tag: Tag) -> tuple[pins.Variant, snapshots.Snapshot]:
        """The throwaway variant's folder: its parser snapshot (dumped once), manifest and empty lock."""

        name = throwaway_name(self.base, image, tag)
        folder = self.out / VARIANTS_DIR / name
        variant = throwaway_variant(self.base, name, folder, image, tag)
        snapshot_path = folder / pins.SNAPSHOT_FILE
        if not snapshot_path.is_file():
            self.echo(f"  dumping SGLang's parser inside {image}")
            dump = lock_args.dump_in_image(image, name=f"{name}-dump-{int(time.time())}")
            snapshot = lock_args.snapshot_from_dump(
                dump,
                provenance={
                    "method": "image",
                    "source": image,
                    "sha256": "",
                    "generated_by": "bwstack bisect",
                    "note": "argparse of the SGLang in the tag's image, loaded by the image's own python3",
                },
            )
            lock_args.write_snapshot(snapshot_path, snapshot)
        atomic_write(variant.lock_path, "# bwstack bisect: the tag is tested as published, no overrides\n")
        atomic_write(variant.manifest_path, json.dumps(variant.manifest(), indent=2) + "\n")
        return variant, snapshots.load_snapshot(snapshot_path)

    def with_variant(self, variant: pins.Variant, snapshot: snapshots.Snapshot) -> Stack:
        """The stack with the throwaway variant, and the --good verdict as the profile's expectation."""
        profile = self.stack.profile(self.profile).model_copy(update={"expect": self.good_verdict})
        return dataclasses.replace(
            self.stack,
            profiles={**self.stack.profiles, self.profile: profile},
            variants={**self.stack.variants, variant.name: variant},
            snapshots={**self.stack.snapshots, variant.name: snapshot},
        )

    def serving_image(self, stack: Stack, variant: pins.Variant, labels: dict[str, str]) -> str:
        """The throwaway serving image: the tag itself where it is one already, else built on it."""
        ref = launch.image_ref(stack, variant.name)
        if labels.get("io.bwstack.stage") != "serve":
            return self.build(stack, variant, ref)
        done = docker("tag", variant.base_image, ref)
        if done.returncode != 0:
            raise ExternalError(
                f"docker tag {variant.base_image} {ref} failed: {' '.join(done.stderr.split())}"
            )
        self.echo(f"  {variant.base_image} is a bwstack serving image: run as it is (as {ref})")
        return ref

    def build(self, stack: Stack, variant: pins.Variant, ref: str) -> str:
        """The throwaway serving image, from a build context staged next to the state."""

        context = self.out / CONTEXT_DIR
        shutil.rmtree(context, ignore_errors=True)
        for item in dockerbuild.CONTEXT_ITEMS:
            source, dest = stack.root / item, context / item
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, dest)
        shutil.copytree(variant.dir, context / "images" / variant.name)
        argv = dockerbuild.docker_build_argv(stack, variant.name, tag=ref, base_image=None, context=context)
        self.echo(f"  building {ref} (the serving image on {variant.base_image})")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ExternalError(f"docker build of {ref} timed out after {BUILD_TIMEOUT_S} s") from None
        finally:
            dockerbuild.prune_build_leftovers()
            shutil.rmtree(context, ignore_errors=True)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()] or ["no output"]
            raise ExternalError(f"docker build of {ref} failed: {lines[-1].strip()[:200]}")
        return ref

    def sweep(self, stack: Stack, variant: pins.Variant, tag: Tag, timeout: float) -> dict[str, Any]:
        """The sweep of the profile on the throwaway variant (its own report; resumed when one is there)."""

        out = self.step_dir(tag)
        code = run_sweep(
            stack,
            [self.profile],
            variant=variant.name,
            fast=self.fast,
            standin=False,
            out=out,
            resume=(out / record.RESULTS_FILE).is_file(),
            timeout=timeout,
            console=self.console,
        )
        if code >= 128:
            raise Interrupted(code - 128)
        row = read.load(out / record.RESULTS_FILE)["results"].get(self.profile)
        if row is None:
            raise ExternalError(f"the sweep of {tag.name} recorded no verdict (exit status {code})")
        if not stack.is_cpu:
            with contextlib.suppress(Exception):  # the throwaway JIT cache; the model cache stays
                docker("volume", "rm", f"{stack.settings.project}_{launch.jit_volume(variant.name)}")
        return dict(row)
