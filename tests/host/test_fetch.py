"""``bwstack fetch`` with the real huggingface_hub client against a Hub on 127.0.0.1 (``support.hub``).

The served repo is a small checkpoint made here (safetensors shards + index, configs, tokenizer, and files SGLang
does not need). Each case runs the real command (a subprocess where a user would, in-process where a seam is
needed) with ``HF_ENDPOINT`` pointing at the local hub: a full fetch, a resume after SIGKILL mid-file, a
disk-full refusal, a gated repo, a refused token, a wrong revision, a corrupted file caught by verification;
and what ``up``, the sweep's environment and ``doctor`` read from the cache afterwards.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from bwstack import cli
from bwstack.errors import ExternalError
from bwstack.host import fetch, modelcache
from bwstack.host.doctor import command as doctor
from bwstack.host.doctor.host import check_model_cache
from bwstack.host.doctor.probe import CommandResult
from bwstack.render import compose
from bwstack.stack import loader
from healthchecks import imagelayout
from support.hub import TEST_REPO as REPO
from support.hub import TEST_TOKEN as TOKEN
from support.hub import Hub, Repo, serve, tiny_model

NEEDED = {
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
    "model.safetensors.index.json",
    "config.json",
    "generation_config.json",
    "hf_quant_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
}
PROGRESS = re.compile(
    r"^fetch: [\d.]+ \w?B / [\d.]+ MB \(100\.0%\), [\d.]+ \w?B/s, ETA \S+, shards 3/3, files 10/10$", re.M
)


def _profiles(stack_copy: Path, revision: str | None, token: str | None = TOKEN) -> Path:
    text = stack_copy.read_text()
    pinned = f"  path: {REPO}\n" + (f"  revision: {revision}\n" if revision else "")
    text = text.replace("  path: nvidia/GLM-5-NVFP4\n", pinned, 1)
    text = text.replace(
        "  model_cache: hf-cache ", "  model_cache_path: ./hf-cache\n  model_cache: hf-cache ", 1
    )
    stack_copy.write_text(text)
    if token is not None:
        secrets = stack_copy.parent / "secrets"
        secrets.mkdir(exist_ok=True)
        (secrets / "hf_token").write_text(token + "\n")
    return stack_copy


@pytest.fixture()
def profiles(stack_copy: Path, repo: Repo) -> Path:
    return _profiles(stack_copy, repo.commit)


def _env(hub: Hub, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(home / "client-home"), HF_HUB_DISABLE_TELEMETRY="1")
    return env


def _fetch_cmd(profiles: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bwstack.cli", "fetch", "-f", str(profiles), *args]


def run_fetch(hub: Hub, profiles: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _fetch_cmd(profiles, *args),
        env=_env(hub, profiles.parent),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=profiles.parent,
    )


def errors_of(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("bwstack: warning: ")]


def location(profiles: Path) -> modelcache.Location:
    return modelcache.Location((profiles.parent / "hf-cache").resolve(), "stack.model_cache_path")


def snapshot(profiles: Path, repo: Repo) -> Path:
    return modelcache.snapshot_dir(location(profiles), REPO, repo.commit)


def test_full_fetch_downloads_what_sglang_needs_verifies_and_records(
    hub: Hub, repo: Repo, profiles: Path
) -> None:
    done = run_fetch(hub, profiles)
    assert done.returncode == 0, done.stderr
    assert PROGRESS.search(done.stdout), done.stdout
    assert "(5 files SGLang does not need skipped)" in done.stdout
    assert f"{REPO}@{repo.commit} complete and verified: 10 files" in done.stdout
    # only the files SGLang needs, byte for byte
    folder = snapshot(profiles, repo)
    got = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert got == NEEDED
    for name in NEEDED:
        assert (folder / name).read_bytes() == repo.files[name].data
    # the manifest: atomic JSON beside the cache
    manifest = json.loads(modelcache.manifest_path(location(profiles), REPO, repo.commit).read_text())
    assert manifest["schema"] == modelcache.MANIFEST_SCHEMA
    assert (manifest["repo"], manifest["revision"], manifest["commit"]) == (REPO, repo.commit, repo.commit)
    assert {f["path"] for f in manifest["files"]} == NEEDED
    assert manifest["bytes"] == sum(repo.files[n].size for n in NEEDED)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", manifest["fetched_at"])
    # the token went to the Hub's API, never to the CDN, and never into any output
    api = [r for r in hub.requests("hub") if r["path"].startswith(f"/api/models/{REPO}")]
    assert api and all(r["authorized"] for r in api)
    cdn = hub.requests("cdn")
    assert len(cdn) == 3 and not any(r["authorized"] for r in cdn)
    assert TOKEN not in done.stdout + done.stderr
    # a second run finds everything and downloads nothing
    before = len(hub.requests("cdn"))
    again = run_fetch(hub, profiles)
    assert again.returncode == 0, again.stderr
    assert len(hub.requests("cdn")) == before


def test_after_fetch_up_runs_offline_and_doctor_says_present(hub: Hub, repo: Repo, profiles: Path) -> None:
    stack = loader.load_stack(profiles)
    with pytest.raises(ExternalError, match=r"not fetched.*run 'bwstack fetch' first.*--skip-model-check"):
        modelcache.service_env(stack)
    assert check_model_cache(doctor.model_cache_status(profiles, probe=None)).status == "warn"  # type: ignore[arg-type]
    assert run_fetch(hub, profiles).returncode == 0
    assert modelcache.service_env(stack) == {modelcache.OFFLINE_VAR: "1"}
    found = doctor.model_cache_status(profiles, probe=None)  # type: ignore[arg-type]
    check = check_model_cache(found)
    assert check.status == "pass" and f"{REPO}@{repo.commit[:12]}: 10 files" in check.detail
    # the rendered services read that variable into HF_HUB_OFFLINE and mount the same folder
    rendered = YAML(typ="safe").load(compose.render_compose(stack))
    assert "hf-cache" not in rendered["volumes"]  # the host folder replaces the named volume
    services = rendered["services"]
    for service in services.values():
        assert service["environment"]["HF_HUB_OFFLINE"] == "${BWSTACK_HF_HUB_OFFLINE:-0}"
        assert f"./hf-cache:{imagelayout.HF_HOME}" in service["volumes"]


def test_up_refuses_before_any_container_when_the_model_is_missing(profiles: Path) -> None:
    runner = CliRunner()
    rendered = runner.invoke(cli.main, ["render", "-f", str(profiles)])
    assert rendered.exit_code == 0, rendered.output
    stack = loader.load_stack(profiles)
    name = next(n for n, p in stack.profiles.items() if not p.known_bad)
    refused = runner.invoke(cli.main, ["up", "-f", str(profiles), name])
    assert refused.exit_code == 1, refused.output
    lines = errors_of(refused.stderr)
    assert len(lines) == 1, refused.stderr
    assert f"model {REPO}@" in lines[0] and "not fetched" in lines[0]
    assert "run 'bwstack fetch' first (about 371 GB, resumable)" in lines[0]
    assert refused.stdout == ""  # no secret created, nothing stopped, nothing started


def test_resume_after_sigkill_mid_file(stack_copy: Path) -> None:
    # the client writes 10 MiB at a time: 12 MiB shards at 4 MiB/s leave a 10 MiB partial for ~0.5 s
    repo = tiny_model(REPO, shard_bytes=12 << 20)
    with serve(Hub(repos={REPO: repo}, throttle_bps=4 << 20)) as hub:
        _resume_after_sigkill(hub, repo, _profiles(stack_copy, repo.commit, token=None))


def _resume_after_sigkill(hub: Hub, repo: Repo, profiles: Path) -> None:
    blobs = location(profiles).hub / modelcache.repo_folder(REPO) / "blobs"
    proc = subprocess.Popen(
        _fetch_cmd(profiles, "--max-workers", "1"),
        env=_env(hub, profiles.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=profiles.parent,
    )
    partial: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not partial:
            for part in blobs.glob("*.incomplete") if blobs.is_dir() else []:
                size = part.stat().st_size
                if size >= 1 << 20:
                    partial[part.name.split(".")[0]] = size
            time.sleep(0.02)
        assert partial, "no partial file seen"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # the cache is partial: no manifest, up refuses and says how to resume
    stack = loader.load_stack(profiles)
    found = modelcache.status(location(profiles), REPO, repo.commit)
    assert found.state == "partial" and found.bytes_on_disk > 0
    with pytest.raises(ExternalError, match=r"partial, .* on disk.*run 'bwstack fetch' first"):
        modelcache.service_env(stack)
    # resume: the interrupted file continues from where it stopped (a ranged GET on the CDN)
    hub.throttle_bps = None
    seen = len(hub.requests("cdn"))
    done = run_fetch(hub, profiles)
    assert done.returncode == 0, done.stderr
    assert "fetch: resuming: " in done.stdout
    ranged = [r for r in hub.requests("cdn")[seen:] if r["range"]]
    starts = {r["path"].rsplit("/", 1)[1]: int(r["range"].split("=")[1].rstrip("-")) for r in ranged}
    blob, size = next(iter(partial.items()))
    assert starts.get(blob, 0) >= size, (starts, partial)
    for name in NEEDED:
        assert (snapshot(profiles, repo) / name).read_bytes() == repo.files[name].data
    assert modelcache.status(location(profiles), REPO, repo.commit).state == "present"


def test_disk_full_refuses_before_downloading(
    hub: Hub, profiles: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setattr(fetch, "free_bytes", lambda folder: 2_000_000)  # 2 MB free, 3.1 MB needed
    result = CliRunner().invoke(cli.main, ["fetch", "-f", str(profiles)])
    assert result.exit_code == 1, result.output
    lines = errors_of(result.stderr)
    assert len(lines) == 1, result.stderr
    assert re.search(
        r"not enough disk for bwtest/tiny-glm: 3\.\d MB still to download, 2\.0 MB free", lines[0]
    )
    assert "stack.model_cache_path" in lines[0]
    assert hub.requests("cdn") == []
    assert not any(r["path"].startswith(f"/{REPO}/resolve/") for r in hub.requests("hub"))


@pytest.mark.parametrize(
    ("token", "status"), [(None, 401), ("hf_knownButNotGranted", 403)], ids=["no-token", "not-granted"]
)
def test_gated_repo_says_how_to_get_access(
    hub: Hub, repo: Repo, stack_copy: Path, token: str | None, status: int
) -> None:
    repo.gated = True
    hub.tokens.add("hf_knownButNotGranted")
    profiles = _profiles(stack_copy, repo.commit, token=token)
    result = run_fetch(hub, profiles)
    assert result.returncode == 2, result.stderr
    lines = errors_of(result.stderr)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert re.search(r"profiles\.yaml:\d+: model\.path: bwtest/tiny-glm is a gated repo ", lines[0]), lines[0]
    assert f"(HTTP {status})" in lines[0]
    assert (
        "accept its terms at " in lines[0]
        and "put a read token of that account in ./secrets/hf_token" in lines[0]
    )
    assert "hf_knownButNotGranted" not in result.stdout + result.stderr


def test_bad_token_is_named_by_its_file_not_its_value(hub: Hub, repo: Repo, stack_copy: Path) -> None:
    profiles = _profiles(stack_copy, repo.commit, token="hf_typoInTheToken")
    result = run_fetch(hub, profiles)
    assert result.returncode == 2
    lines = errors_of(result.stderr)
    assert len(lines) == 1, result.stderr
    assert "the Hub refused the token in ./secrets/hf_token (HTTP 401, invalid credentials)" in lines[0]
    assert "hf_typoInTheToken" not in result.stdout + result.stderr


def test_wrong_revision_points_at_model_revision(hub: Hub, stack_copy: Path) -> None:
    wrong = "f" * 40
    profiles = _profiles(stack_copy, wrong)
    result = run_fetch(hub, profiles)
    assert result.returncode == 2
    lines = errors_of(result.stderr)
    assert len(lines) == 1, result.stderr
    assert re.search(
        rf"profiles\.yaml:\d+: model\.revision: revision {wrong} not found in {REPO} \(HTTP 404\)", lines[0]
    ), lines[0]


def test_corrupted_file_is_caught_removed_and_fetched_again(hub: Hub, repo: Repo, profiles: Path) -> None:
    bad = "model-00002-of-00003.safetensors"
    hub.corrupt.add(bad)
    result = run_fetch(hub, profiles)
    assert result.returncode == 1
    lines = errors_of(result.stderr)
    assert len(lines) == 1, result.stderr
    assert f"verification failed for 1 file(s) of {REPO}@{repo.commit[:12]}: {bad}: sha256 " in lines[0]
    assert "run 'bwstack fetch' again" in lines[0]
    assert not (snapshot(profiles, repo) / bad).exists()
    assert modelcache.status(location(profiles), REPO, repo.commit).state == "partial"
    hub.corrupt.clear()
    again = run_fetch(hub, profiles)
    assert again.returncode == 0, again.stderr
    assert (snapshot(profiles, repo) / bad).read_bytes() == repo.files[bad].data


def test_unpinned_fetch_warns_resolves_main_and_says_the_commit(
    hub: Hub, repo: Repo, stack_copy: Path
) -> None:
    profiles = _profiles(stack_copy, None)
    result = run_fetch(hub, profiles)
    assert result.returncode == 0, result.stderr
    assert (
        "model.revision is not set: fetching the current head of bwtest/tiny-glm's main branch"
        in result.stderr
    )
    assert f"pin it: set model.revision: {repo.commit}" in result.stdout
    found = modelcache.status(location(profiles), REPO, None)
    assert found.state == "present" and found.commit == repo.commit


def test_bad_input_exits_2(hub: Hub, profiles: Path) -> None:
    unknown = run_fetch(hub, profiles, "no-such-profile")
    assert unknown.returncode == 2 and "unknown profile 'no-such-profile'" in unknown.stderr
    local = profiles.read_text().replace(f"  path: {REPO}\n", "  path: /models/glm\n")
    profiles.write_text(local)
    result = run_fetch(hub, profiles)
    assert result.returncode == 2
    assert "is a folder inside the container, not a Hub repo: nothing to fetch" in result.stderr


def test_selection_keeps_one_weight_format() -> None:
    def hub_file(path: str) -> fetch.HubFile:
        return fetch.HubFile(path=path, size=1, sha256=None, blob_id="0" * 40)

    both = [
        hub_file(p) for p in ("model.safetensors", "pytorch_model.bin", "original/x.safetensors", "a.gguf")
    ]
    assert [f.path for f in fetch.select_files(both)] == ["model.safetensors"]
    bin_only = [hub_file(p) for p in ("pytorch_model.bin", "pytorch_model.bin.index.json", "config.json")]
    assert [f.path for f in fetch.select_files(bin_only)] == [
        "config.json",
        "pytorch_model.bin",
        "pytorch_model.bin.index.json",
    ]


def test_full_sweep_refuses_until_fetched_fast_sweep_does_not(hub: Hub, profiles: Path) -> None:
    from bwstack.sweep.plan import Options
    from bwstack.sweep.run import model_env, run_sweep

    stack = loader.load_stack(profiles)
    with pytest.raises(ExternalError, match=r"not fetched.*run 'bwstack fetch' first"):
        run_sweep(
            stack,
            [],
            variant=None,
            fast=False,
            standin=False,
            out=profiles.parent / "r",
            resume=False,
            timeout=None,
        )
    assert not (profiles.parent / "r").exists()  # refused before any report
    fast = Options(fast=True, standin=False, timeout_s=60.0, keep=False, load_seconds=None)
    assert model_env(stack, fast) == {}
    assert run_fetch(hub, profiles).returncode == 0
    full = Options(fast=False, standin=False, timeout_s=60.0, keep=False, load_seconds=None)
    assert model_env(stack, full) == model_env(stack, fast) == {modelcache.OFFLINE_VAR: "1"}


class VolumeProbe:
    """A host whose Docker answers ``docker volume inspect`` with a recorded result (doctor's probe seam)."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        self.asked: list[tuple[str, ...]] = []

    def run(self, key: str, argv: Any, timeout: float = 30) -> CommandResult:
        self.asked.append(tuple(argv))
        return self.result


def test_doctor_reads_the_named_volume_through_its_probe(hub: Hub, repo: Repo, stack_copy: Path) -> None:
    profiles = _profiles(stack_copy, repo.commit)
    text = profiles.read_text().replace("  model_cache_path: ./hf-cache\n", "", 1)
    profiles.write_text(text)
    argv = ("docker", "volume", "inspect", "--format", "{{.Mountpoint}}", "bwstack_hf-cache")
    absent = VolumeProbe(
        CommandResult(
            argv, returncode=1, stderr="Error response from daemon: get bwstack_hf-cache: no such volume"
        )
    )
    check = check_model_cache(doctor.model_cache_status(profiles, absent))  # type: ignore[arg-type]
    assert absent.asked == [argv]
    assert (check.status, check.detail) == ("warn", f"{REPO}@{repo.commit[:12]}: not fetched")
    assert "bwstack fetch" in check.fix
    no_docker = VolumeProbe(CommandResult(argv, problem="not found"))
    skipped = check_model_cache(doctor.model_cache_status(profiles, no_docker))  # type: ignore[arg-type]
    assert skipped.status == "skip" and "docker volume inspect bwstack_hf-cache: not found" in skipped.detail
    # a volume whose data folder holds a fetched model (here: a folder this test fills with bwstack fetch)
    assert run_fetch(hub, profiles, "--cache-dir", str(stack_copy.parent / "volume-data")).returncode == 0
    mounted = VolumeProbe(
        CommandResult(argv, returncode=0, stdout=str(stack_copy.parent / "volume-data") + "\n")
    )
    data = stack_copy.parent / "volume-data"
    owned = check_model_cache(doctor.model_cache_status(profiles, mounted))  # type: ignore[arg-type]
    if os.geteuid() == 0:  # filled as root, like `bwstack fetch` into a volume before it hands it over
        assert (
            owned.status == "fail" and f"{data} is owned by uid 0, so the server (uid 10001)" in owned.detail
        )
        assert owned.fix.startswith("sudo chown -R 10001:10001")
        modelcache.hand_to_server(modelcache.Location(data, "volume bwstack_hf-cache"))
    present = check_model_cache(doctor.model_cache_status(profiles, mounted))  # type: ignore[arg-type]
    assert present.status == "pass" and "volume bwstack_hf-cache" in present.detail


def test_failed_download_says_what_is_left_and_how_to_resume(hub: Hub, repo: Repo, profiles: Path) -> None:
    hub.broken.add("model-00003-of-00003.safetensors")
    failed = run_fetch(hub, profiles)
    assert failed.returncode == 1, failed.stderr
    lines = errors_of(failed.stderr)
    assert len(lines) == 1 and "Traceback" not in failed.stderr, failed.stderr
    assert re.search(
        r"download failed \(.*403.*\): [\d.]+ \w?B of 3\.1 MB on disk, [\d.]+ \w?B in [1-9]\d* file\(s\) left; run "
        r"'bwstack fetch' again to resume",
        lines[0],
    ), lines[0]
    assert modelcache.status(location(profiles), REPO, repo.commit).state == "partial"
    hub.broken.clear()
    resumed = run_fetch(hub, profiles)
    assert resumed.returncode == 0, resumed.stderr
    assert modelcache.status(location(profiles), REPO, repo.commit).state == "present"


def test_a_download_that_trickles_is_stopped_by_its_progress_bound(repo: Repo, stack_copy: Path) -> None:
    """Each 16 KiB chunk arrives within huggingface_hub's per-read timeout, so only progress bounds it: under
    1 MiB in BWSTACK_FETCH_STALL_S seconds ends the fetch with exit 1, one line, and a resumable cache."""
    profiles = _profiles(stack_copy, repo.commit, token=None)
    with serve(Hub(repos={REPO: repo}, throttle_bps=4096)) as hub:
        env = {**_env(hub, profiles.parent), "BWSTACK_FETCH_STALL_S": "4"}
        started = time.monotonic()
        stalled = subprocess.run(
            _fetch_cmd(profiles), env=env, capture_output=True, text=True, timeout=120, cwd=profiles.parent
        )
        took = time.monotonic() - started
    assert stalled.returncode == 1, stalled.stderr
    lines = errors_of(stalled.stderr)
    assert len(lines) == 1 and "Traceback" not in stalled.stderr, stalled.stderr
    assert "download stalled (less than 1.0 MB in the last 4 s" in lines[0], lines[0]
    assert "run 'bwstack fetch' again to resume" in lines[0]
    assert took < 60, took
