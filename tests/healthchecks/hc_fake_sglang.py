"""A stand-in for ``python3 -m sglang.launch_server`` used by the serve-wrapper tests.

Run as ``python -m hc_fake_sglang [--dump PATH] [--exit N] [--wait] [--kill-self] [--spam BYTES] [--leak] ...``;
unknown flags (the SGLang argv, an injected ``--api-key``) are accepted like SGLang would, and ``--config FILE``
is merged the way SGLang's ``ConfigArgumentMerger`` does (YAML keys become ``--key value`` before the argv).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from types import FrameType


def _die_by(signum: int, frame: FrameType | None) -> None:
    print(f"fake: got {signal.Signals(signum).name}", flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dump")
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--wait", action="store_true")
    p.add_argument("--kill-self", action="store_true")
    p.add_argument("--spam", type=int, default=0)
    p.add_argument("--leak", action="store_true")
    p.add_argument("--api-key")
    p.add_argument("--dump-env", action="store_true")
    p.add_argument("--say", default="", help="a line to print before exiting (a real failure's text)")
    argv = sys.argv[1:]
    if "--config" in argv:  # as sglang.srt.server_args.prepare_server_args: config args first, CLI wins
        import yaml

        at = argv.index("--config")
        with open(argv[at + 1], encoding="utf-8") as fh:
            config = yaml.safe_load(fh) or {}
        merged = [item for key, value in config.items() for item in (f"--{key}", str(value))]
        argv = merged + argv[:at] + argv[at + 2 :]
    args, rest = p.parse_known_args(argv)
    if args.dump:
        data = {"argv": sys.argv[1:], "hf_token": os.environ.get("HF_TOKEN"), "api_key": args.api_key}
        if args.dump_env:
            data["env"] = {k: v for k, v in os.environ.items() if k.startswith(("SGLANG_", "FLASHINFER_"))}
        with open(args.dump, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    print(f"server_args=ServerArgs(model_path='m', api_key={args.api_key!r}, rest={rest!r})", flush=True)
    print("[2026-03-02 10:00:00] warning line on stderr", file=sys.stderr, flush=True)
    if args.leak:
        token = os.environ.get("HF_TOKEN", "")
        key = args.api_key or ""
        sys.stdout.write(f"token={token} key=")
        sys.stdout.flush()
        time.sleep(0.05)
        sys.stdout.write(key[:3])
        sys.stdout.flush()
        time.sleep(0.05)
        sys.stdout.write(key[3:] + "\n")
        sys.stdout.write("x" * (70 * 1024 - 5) + key + "y" * 10 + "\n")
        sys.stdout.flush()
    if args.spam:
        line = "[2026-03-02 10:00:00 TP0] Decode batch. #running-req: 1, #token: 16, token usage: 0.00\n"
        for _ in range(args.spam // len(line) + 1):
            sys.stdout.write(line)
        sys.stdout.flush()
    if args.say:
        print(args.say, flush=True)
    if args.kill_self:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.wait:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _die_by)
        print("fake: ready", flush=True)
        while True:
            time.sleep(0.05)
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
