"""``bwstack doctor``'s host-resource checks: /dev/shm, the memlock limit, disk space, the model cache.

Pure functions from a :class:`~bwstack.host.doctor.facts.RawHost` (or the model cache's
:class:`~bwstack.host.modelcache.CacheStatus`) to a :class:`~bwstack.host.doctor.facts.Check`. Sources of the
thresholds:

- /dev/shm: SGLang's docker docs run with ``--shm-size 32g`` or ``--ipc=host``.
- rootless Docker cannot grant ``ulimits: memlock: -1``: "error setting rlimit type 8: operation not
  permitted" (onyx-dot-app/onyx PR #9277, elastic/start-local#66).
"""

from __future__ import annotations

from bwstack.host import modelcache
from bwstack.host.doctor.facts import (
    G_HOST,
    GB,
    GIB,
    Check,
    Expectations,
    RawHost,
    docker_of,
    in_gb,
    in_gib,
    skipped,
    weights_of,
)
from bwstack.host.modelcache import CacheStatus
from bwstack.host.secretfiles import SecretState
from healthchecks import imagelayout

SHM_FAIL_BYTES = 1 * GIB
SHM_WANT_BYTES = 32 * GIB
DISK_MARGIN_BYTES = 100 * GB  # serving image, JIT caches (FlashInfer, DeepGEMM, Triton), a second checkpoint
DISK_FAIL_BYTES = 20 * GB


def check_shm(raw: RawHost) -> Check:
    """Shared memory size: the services run with ipc: host, so this host tmpfs is what NCCL gets."""
    title = "/dev/shm"  # noqa: S108 - a label
    moot = "services use ipc: host, so containers share this /dev/shm and shm_size does not apply"
    grow = "grow it: `sudo mount -o remount,size=64G /dev/shm` (and persist in /etc/fstab)"
    if raw.shm is None:
        return Check("shm", G_HOST, title, "warn", f"cannot read /dev/shm; {moot}", grow)
    size = raw.shm.size_bytes
    if size < SHM_FAIL_BYTES:
        return Check(
            "shm",
            G_HOST,
            title,
            "fail",
            f"{in_gib(size)}: too small for NCCL's shared-memory transport; {moot}",
            grow,
        )
    if size < SHM_WANT_BYTES:
        return Check("shm", G_HOST, title, "warn", f"{in_gib(size)} < {in_gib(SHM_WANT_BYTES)}; {moot}", grow)
    return Check("shm", G_HOST, title, "pass", f"{in_gib(size)}; {moot}")


def check_memlock(raw: RawHost) -> Check:
    """memlock: services ask for ``ulimits: memlock: -1``; rootless Docker cannot grant it."""
    title = "memlock limit"
    info, _why = docker_of(raw)
    asks = "services set ulimits memlock: -1"
    if raw.memlock == "unlimited":
        return Check("memlock", G_HOST, title, "pass", f"unlimited; {asks}")
    if raw.memlock is None:
        return Check(
            "memlock", G_HOST, title, "warn", f"cannot read the memlock limit; {asks}", "run `ulimit -l`"
        )
    here = f"{raw.memlock} KiB in this shell"
    if info is not None and info.rootless:
        return Check(
            "memlock",
            G_HOST,
            title,
            "fail",
            f"{here} and rootless Docker: memlock -1 fails with 'error setting rlimit type 8: operation not "
            "permitted' (onyx-dot-app/onyx PR #9277)",
            "use rootful Docker, or raise the rootless user's hard memlock limit to unlimited "
            "(LimitMEMLOCK=infinity)",
        )
    if info is None:
        return Check(
            "memlock",
            G_HOST,
            title,
            "warn",
            f"{here}; Docker unavailable, so cannot tell whether the container limit can be raised",
            "set `* - memlock unlimited` in /etc/security/limits.conf",
        )
    return Check("memlock", G_HOST, title, "pass", f"{here}; {asks}, which rootful Docker grants")


def check_disk(raw: RawHost, exp: Expectations) -> Check:
    """Free space where the model cache volume lives (the Docker data root)."""
    title = "model cache disk"
    if raw.data_root is None:
        return skipped("disk", G_HOST, title, "Docker data root unknown (docker info unavailable)")
    if raw.data_root_fs is None:
        return Check(
            "disk", G_HOST, title, "warn", f"cannot stat {raw.data_root}", "check free space with `df -h`"
        )
    weights_gb, name, assumed = weights_of(exp)
    need = weights_gb * GB + DISK_MARGIN_BYTES
    free = raw.data_root_fs.free_bytes
    what = f"{name} ≈{weights_gb} GB" + (" (assumed)" if assumed else "")
    detail = f"{in_gb(free)} free under {raw.data_root}; {what} + {in_gb(DISK_MARGIN_BYTES)} margin wanted"
    fix = "free space, or move the Docker data root (daemon.json data-root) to a larger disk"
    if free < DISK_FAIL_BYTES:
        return Check("disk", G_HOST, title, "fail", f"{detail}: too little to pull the serving image", fix)
    if free < need:
        return Check("disk", G_HOST, title, "warn", f"{detail} (fine if the model is already cached)", fix)
    return Check("disk", G_HOST, title, "pass", detail)


def check_model_cache(found: CacheStatus | None) -> Check:
    """The model in the services' cache: present (verified by `bwstack fetch`), partial or missing."""
    title = "model cache"
    if found is None:
        return skipped(
            "model_cache", G_HOST, title, "no Hub model to fetch (no profiles file, or a local path)"
        )
    if found.state == "present":
        problem = modelcache.server_access_problem(found.location) if found.location else None
        if problem is not None:
            owner = f"{imagelayout.UID}:{imagelayout.GID}"
            fix = f"sudo chown -R {owner} the folder (bwstack fetch does it for a volume)"
            return Check("model_cache", G_HOST, title, "fail", f"{found.words()}; {problem}", fix)
        return Check("model_cache", G_HOST, title, "pass", found.words())
    if found.state == "unknown":
        return skipped("model_cache", G_HOST, title, found.detail)
    fix = "bwstack fetch (resumable); `bwstack up` refuses to start until the model is fetched"
    return Check("model_cache", G_HOST, title, "warn", found.words(), fix)


def check_secrets(found: list[SecretState] | None, needs: list[str] | None = None) -> Check:
    """The stack's secret files: each must be a regular file the serving user (uid 10001) can read, and no
    one else; compose bind-mounts them with the host owner and mode, so a 0600 file of the operator leaves the
    server without its key (serve.py then refuses to start)."""
    title = "secrets"
    if found is None:
        return skipped("secrets", G_HOST, title, "no profiles file")
    if not found:
        return Check(
            "secrets", G_HOST, title, "pass", "the stack mounts no secret (stack.api_key, hf_token off)"
        )
    words = {
        "missing": "missing (bwstack up creates it empty)",
        "not_regular": "not a regular file",
        "unreadable": f"unreadable for the serving user (uid {imagelayout.UID}): the server would not start",
        "empty": "empty",
        "open": "readable by every local user",
        "ok": f"readable for uid {imagelayout.UID}, no one else",
    }
    detail = "; ".join(f"{s.path}: {words[s.state]}" for s in found)
    bad = [s for s in found if s.state in ("not_regular", "unreadable")]
    if bad:
        paths = " ".join(str(s.path) for s in bad)
        uid = imagelayout.UID
        fix = f"`bwstack up` grants uid {uid} read (ACL), or `setfacl -m u:{uid}:r {paths}`"
        return Check("secrets", G_HOST, title, "fail", detail, fix)
    if any(s.state == "open" for s in found):
        paths = " ".join(str(s.path) for s in found if s.state == "open")
        return Check("secrets", G_HOST, title, "warn", detail, f"chmod o= {paths} (`bwstack up` does it)")
    if any(s.state == "empty" and s.name == "api_key" for s in found):
        fix = "put the key into the file: with stack.api_key on and the file empty, the server takes no key"
        return Check("secrets", G_HOST, title, "warn", detail, fix)
    if needs and found:  # SELinux, rootless or userns-remap: the files need more than uid 10001's read
        return Check(
            "secrets", G_HOST, title, "warn", f"{detail}; {'; '.join(needs)}", "run `bwstack up` (it does it)"
        )
    return Check("secrets", G_HOST, title, "pass", detail)
