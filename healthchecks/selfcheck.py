"""The serving image checks itself, as the serving user, with no network (stdlib only; ships in the image).

Modes: ``--prepare`` (root, at build: create the cache folders for the serving user, byte-compile SGLang and
site-packages, make an old FlashInfer's cubin folder writable); ``--build`` (serving user, at build: imports,
HOME, caches, FlashInfer versions); default (a running container or ``bwstack doctor --image``: also the
volumes, the secrets and the model cache). Prints one line per failure with its fix and exits 1; ``--json``
prints the recorded facts (interpreter, site, versions, users, env) and the problems as one JSON object.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import pwd
import site
import subprocess
import sys
import sysconfig
from importlib import metadata

if not __package__:  # run as a script: make the folder above importable so "healthchecks" resolves
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from healthchecks import common, imagelayout
from healthchecks.serve import read_env_file

#: distributions whose versions are recorded (first-contact.md, "What to run on the first machine")
RECORDED = (
    "sglang",
    "torch",
    "transformers",
    "huggingface-hub",
    "tokenizers",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "sgl-kernel",
    "sglang-kernel",
    "sgl-deep-gemm",
    "deep-gemm",
    "apache-tvm-ffi",
)
#: the cheap part, at build: what the server imports first, so a broken override fails the build
BUILD_IMPORTS = ("transformers", "sglang.srt.server_args")
#: the full check adds the server module itself (and the backends and the DeepGEMM wrapper below)
SERVER_IMPORTS = ("sglang.launch_server",)
#: an import failing for want of the GPU driver (no --gpus: a build, doctor --image) is not the image's fault
NEEDS_DRIVER = ("libcuda", "libnvidia", "CUDA driver", "no CUDA GPUs", "NVIDIA driver")
#: imported when present: SGLang's DeepGEMM wrapper rewrites DG_JIT_CACHE_DIR at import (first-contact 3.4)
OPTIONAL_IMPORTS = ("sglang.srt.layers.deep_gemm_wrapper.compile_utils",)
#: the pinned distribution -> the module SGLang imports for it (the variant's backends)
BACKEND_MODULES = {
    "flashinfer-python": "flashinfer",
    "sgl-kernel": "sgl_kernel",
    "sglang-kernel": "sgl_kernel",
    "sgl-deep-gemm": "deep_gemm",
}
#: FlashInfer below this writes symlinks inside the cubin package (first-contact.md row 3.3)
CUBIN_WRITES_FROM_BELOW = (0, 6, 16)
VERSIONS_FILE = imagelayout.VERSIONS_FILE
IMPORT_TIMEOUT = 600
#: a line that starts so is printed but does not fail the check
WARNING = "warning: "


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def public(version: str) -> str:
    return version.split("+", 1)[0]


def release(version: str) -> tuple[int, ...]:
    parts = []
    for part in public(version).split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _module_dir(module: str) -> str | None:
    """The folder of a top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def _findable(module: str) -> bool:
    """True when the module's file exists below its top-level package (found without importing anything)."""
    top, _, rest = module.partition(".")
    folder = _module_dir(top)
    return bool(folder) and os.path.isfile(os.path.join(str(folder), *rest.split(".")) + ".py")


def cubin_dir() -> str | None:
    found = _module_dir("flashinfer_cubin")
    return os.path.join(found, "cubins") if found else None


def _under_root(path: str) -> bool:
    return path == "/root" or path.startswith("/root/")


def _writable(path: str) -> bool:
    """True when ``path`` is a writable folder, or could be made in the nearest existing folder above it."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent
    return os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK)


def mount_points() -> set[str]:
    """The mount points this process sees (/proc/self/mountinfo field 5)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            return {line.split()[4] for line in fh if len(line.split()) > 4}
    except OSError:
        return set()


def _on_mount(path: str, mounts: set[str], root: str) -> bool:
    probe = path
    while probe.startswith(root):
        if probe in mounts:
            return True
        probe = os.path.dirname(probe)
    return False


# --- the facts --------------------------------------------------------------------------------------------


def users() -> list[dict[str, object]]:
    return [
        {"name": u.pw_name, "uid": u.pw_uid, "gid": u.pw_gid, "home": u.pw_dir}
        for u in pwd.getpwall()
        if u.pw_uid == 0 or u.pw_uid >= 1000
    ]


def facts() -> dict[str, object]:
    """What first contact needs to know about this image (first-contact.md, "What to run ...")."""
    env_names = sorted(set(imagelayout.image_env()) | {"PATH", "BWSTACK_VARIANT", "CUDA_VERSION"})
    return {
        "python": {
            "executable": sys.executable,
            "version": sys.version.split()[0],
            "site": site.getsitepackages(),
            "purelib": sysconfig.get_path("purelib"),
        },
        "versions": {name: installed(name) for name in RECORDED},
        "sglang_dir": _module_dir("sglang"),
        "flashinfer_cubin_dir": cubin_dir(),
        "flashinfer_cubin_dir_writable": bool(cubin_dir()) and os.access(str(cubin_dir()), os.W_OK),
        "root_readable": os.access("/root", os.R_OK | os.X_OK),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "users": users(),
        "env": {name: os.environ.get(name) for name in env_names},
    }


# --- the checks: each returns (name, problem lines) ----------------------------------------------------


def check_home() -> list[str]:
    home = os.environ.get("HOME", "")
    fix = f"set ENV HOME={imagelayout.HOME} in the Dockerfile (healthchecks/imagelayout.py FIXED_ENV)"
    if not home or home == "/":
        return [f"HOME is {home or 'unset'}: every ~/.cache default lands in / -- fix: {fix}"]
    if _under_root(home):
        return [f"HOME is {home}, under /root -- fix: {fix}"]
    if not _writable(home):
        return [f"HOME {home} is not writable for uid {os.getuid()} -- fix: chown {imagelayout.UID} {home}"]
    return []


def check_caches(*, volume: bool) -> list[str]:
    problems = []
    mounts = mount_points() if volume else set()
    for name, default in imagelayout.CACHE_ENV.items():
        path = os.environ.get(name, "")
        if not path:
            problems.append(f"{name} is unset -- fix: set ENV {name}={default} (healthchecks/imagelayout.py)")
            continue
        if _under_root(path):
            problems.append(f"{name}={path} is under /root -- fix: point it at {default}")
        elif not _writable(path):
            problems.append(
                f"{name}={path} is not writable for uid {os.getuid()} -- fix: "
                f"chown -R {imagelayout.UID}:{imagelayout.GID} the volume at {imagelayout.JIT_CACHE} "
                "(or remove it: docker volume rm <project>_jit-<variant>)"
            )
        elif volume and not _on_mount(path, mounts, imagelayout.JIT_CACHE):
            problems.append(
                f"{name}={path} is not on a volume: compiled kernels are lost with the container -- fix: "
                f"mount the variant's jit volume at {imagelayout.JIT_CACHE} (bwstack render)"
            )
    return problems


def check_flashinfer() -> list[str]:
    python = installed("flashinfer-python")
    if python is None:
        return []
    problems = []
    for name in ("flashinfer-cubin", "flashinfer-jit-cache"):
        have = installed(name)
        if have is not None and public(have) != public(python):
            problems.append(
                f"{name} {have} != flashinfer-python {python}: FlashInfer ignores it and fetches kernels at "
                f'first use -- fix: pin {name} = "{public(python)}" in images/<variant>/pins.toml '
                "(or list it in the flashinfer source's replaces)"
            )
    cubin_version = installed("flashinfer-cubin")
    found = cubin_dir()
    if (
        cubin_version is not None
        and found
        and release(cubin_version) < CUBIN_WRITES_FROM_BELOW
        and os.path.isdir(found)
        and not os.access(found, os.W_OK)
    ):
        problems.append(
            f"FlashInfer {cubin_version} writes links into {found}, not writable for uid {os.getuid()} -- "
            "fix: selfcheck.py --prepare at build (it chowns the folder to the serving user)"
        )
    if os.environ.get("FLASHINFER_NO_DOWNLOAD") != "1":
        problems.append(
            "FLASHINFER_NO_DOWNLOAD is not 1: a missing cubin is fetched from the network at first use -- "
            "fix: set ENV FLASHINFER_NO_DOWNLOAD=1 (healthchecks/imagelayout.py FIXED_ENV)"
        )
    return problems


def check_secrets() -> list[str]:
    problems = []
    for env, default in (
        (common.ENV_API_KEY_FILE, common.DEFAULT_API_KEY_FILE),
        (common.ENV_HF_TOKEN_FILE, common.DEFAULT_HF_TOKEN_FILE),
    ):
        path = common.env_or(env, default)
        if os.path.exists(path) and not os.access(path, os.R_OK):
            problems.append(
                f"secret {path} exists but uid {os.getuid()} cannot read it -- fix: run 'bwstack up' (it "
                f"makes the secret files readable for uid {imagelayout.UID}) or chown the file to it"
            )
    return problems


def check_model_cache() -> list[str]:
    """HF_HOME readable throughout; writable too unless the hub is offline (a download writes there)."""
    hf_home = os.environ.get("HF_HOME", imagelayout.HF_HOME)
    if not os.path.isdir(hf_home):
        return [f"HF_HOME {hf_home} is missing -- fix: mount the model cache (bwstack render)"]
    fix = (
        f"chown -R {imagelayout.UID}:{imagelayout.GID} the model cache (bwstack fetch does it for its volume)"
    )
    if not os.access(hf_home, os.R_OK | os.X_OK):
        return [f"HF_HOME {hf_home} is not readable for uid {os.getuid()} -- fix: {fix}"]
    for dirpath, dirnames, filenames in os.walk(hf_home):
        for entry in filenames + dirnames:
            path = os.path.join(dirpath, entry)
            if not os.access(path, os.R_OK):
                return [f"{path} is not readable for uid {os.getuid()} -- fix: {fix}"]
    offline = os.environ.get("HF_HUB_OFFLINE") or read_env_file(common.env_or(common.ENV_ENV_FILE, "")).get(
        "HF_HUB_OFFLINE", ""
    )
    if offline != "1" and not os.access(hf_home, os.W_OK):
        return [
            f"{WARNING}HF_HOME {hf_home} is not writable for uid {os.getuid()}: a download fails -- "
            f"fix: {fix}"
        ]
    return []


def check_imports(modules: list[str]) -> list[str]:
    """Import each module in a child interpreter (no network), then compare the cache variables with what
    they were before: a cache SGLang moves at import misses the volume. One line per failure."""
    code = (
        "import importlib, json, os, sys\n"
        "names = json.loads(sys.argv[1])\n"
        "before = {n: os.environ.get(n) for n in names}\n"
        "bad = {}\n"
        "for name in sys.argv[2:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException as exc:\n"
        "        bad[name] = (type(exc).__name__ + ': ' + str(exc)).splitlines()[0][:300]\n"
        "moved = {n: [before[n], os.environ.get(n)] for n in names if os.environ.get(n) != before[n]}\n"
        "print('\\n' + json.dumps({'bad': bad, 'moved': moved}))\n"
    )
    env = dict(os.environ)
    for name, value in read_env_file(common.env_or(common.ENV_ENV_FILE, "")).items():
        env.setdefault(name, value)  # the variant's switches, as serve.py gives them to the server
    names = json.dumps(sorted(imagelayout.CACHE_ENV))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, names, *modules],
            env=env,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [f"importing {', '.join(modules)} took over {IMPORT_TIMEOUT}s -- fix: look for a network wait"]
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return [f"importing {', '.join(modules)} crashed ({tail}) -- fix: check the overrides in pins.toml"]
    problems = [
        f"{WARNING}import {name} needs the GPU driver here ({why}); it runs at the first start"
        if any(marker in why for marker in NEEDS_DRIVER)
        else f"import {name} fails: {why} -- fix: pin what it needs in images/<variant>/pins.toml [python] "
        "and [overrides], then 'bwstack lock --variant <variant>'"
        for name, why in result["bad"].items()
    ]
    problems += [
        f"{name} is moved from {was} to {now} when SGLang is imported -- fix: set the variable SGLang reads "
        "instead (healthchecks/imagelayout.py CACHE_ENV)"
        for name, (was, now) in result["moved"].items()
    ]
    return problems


def pinned_modules() -> list[str]:
    """The backend modules of the variant's pinned distributions (versions.json), present in this image."""
    try:
        with open(VERSIONS_FILE, encoding="utf-8") as fh:
            pinned = json.load(fh).get("python", {})
    except (OSError, ValueError):
        pinned = {}
    return sorted({BACKEND_MODULES[name] for name in pinned if name in BACKEND_MODULES})


def run_checks(*, build: bool, imports: bool, secrets: bool = True) -> list[str]:
    problems = check_home() + check_caches(volume=not build) + check_flashinfer()
    if not build:
        problems += (check_secrets() if secrets else []) + check_model_cache()
    if imports and installed("sglang") is not None:
        modules = list(BUILD_IMPORTS)
        if not build:
            modules += list(SERVER_IMPORTS) + pinned_modules() + [m for m in OPTIONAL_IMPORTS if _findable(m)]
        problems += check_imports(modules)
    return problems


# --- build preparation (root) --------------------------------------------------------------------------


def prepare() -> list[str]:
    """As root at build: cache folders for the serving user, bytecode, an old FlashInfer's cubin folder."""
    done = []
    for path in sorted(set(imagelayout.CACHE_ENV.values())):
        os.makedirs(path, exist_ok=True)
    for dirpath, _dirs, _files in os.walk(imagelayout.JIT_CACHE):
        os.chown(dirpath, imagelayout.UID, imagelayout.GID)
    done.append(f"cache folders under {imagelayout.JIT_CACHE} for uid {imagelayout.UID}")
    code_dirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    sglang_dir = _module_dir("sglang")
    if sglang_dir:
        code_dirs.add(os.path.dirname(sglang_dir))  # an editable install's source tree
    for folder in sorted(d for d in code_dirs if d and os.path.isdir(d)):
        compileall.compile_dir(folder, quiet=2, workers=0)
        done.append(f"byte-compiled {folder}")
    version, found = installed("flashinfer-cubin"), cubin_dir()
    if version and found and os.path.isdir(found) and release(version) < CUBIN_WRITES_FROM_BELOW:
        for dirpath, _dirs, _files in os.walk(found):
            os.chown(dirpath, imagelayout.UID, imagelayout.GID)
        done.append(f"FlashInfer {version}: {found} writable for uid {imagelayout.UID}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prepare", action="store_true", help="as root at build: folders, bytecode, cubins")
    mode.add_argument("--build", action="store_true", help="at build: no volume, secret or model checks")
    parser.add_argument("--no-imports", action="store_true", help="skip the import checks (the slow part)")
    parser.add_argument(
        "--no-secrets", action="store_true", help="skip the secret files (bwstack up grants them)"
    )
    parser.add_argument("--json", action="store_true", help="print facts and problems as one JSON object")
    args = parser.parse_args(argv)
    if args.prepare:
        for line in prepare():
            print(f"bwstack selfcheck: {line}")
        return 0
    found = run_checks(build=args.build, imports=not args.no_imports, secrets=not args.no_secrets)
    problems = [line for line in found if not line.startswith(WARNING)]
    if args.json:
        print(
            json.dumps(
                {"facts": facts(), "problems": problems, "warnings": [w for w in found if w not in problems]}
            )
        )
    else:
        for line in found:
            print(f"bwstack selfcheck: {line}", file=sys.stderr)
        if not problems:
            recorded = facts()
            py = recorded["python"]
            assert isinstance(py, dict)
            print(
                f"bwstack selfcheck: ok ({py['executable']} {py['version']}, site {py['purelib']}, "
                f"HOME {os.environ.get('HOME')}, uid {os.getuid()})"
            )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
