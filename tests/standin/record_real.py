"""Record real SGLang's answers for the stand-in contract: ``python tests/standin/record_real.py [VARIANT...]``.

For every pinned CPU variant (default: all of ``support.realsglang.CPU_VARIANTS``) and every case of
``support.contract.PROBES`` (a healthy tiny model, the ``nan-lm-head`` one), starts real SGLang on 127.0.0.1
from the variant's host venv, sends the probes and writes ``tests/standin/data/real/<sglang version>/<case>.json``.
Those files are what ``test_contract.py`` holds the stand-in to; re-record them, never edit them by hand.
Takes ~1 min per server on 2 cores (four servers for the two variants).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.contract import PROBES, fixture_path, record_real
from support.realsglang import CPU_VARIANTS
from support.stack import ROOT


def main(argv: list[str]) -> int:
    variants = argv or list(CPU_VARIANTS)
    unknown = [v for v in variants if v not in CPU_VARIANTS]
    if unknown:
        print(
            f"record_real: unknown CPU variant(s) {unknown}; valid: {', '.join(CPU_VARIANTS)}",
            file=sys.stderr,
        )
        return 2
    for variant in variants:
        for case in PROBES:
            with tempfile.TemporaryDirectory(prefix="bwstack-record-") as tmp:
                data = record_real(variant, case, Path(tmp))
            target = fixture_path(data["sglang_version"], case)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            partial.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
            partial.replace(target)
            print(f"{variant} {case}: {target.relative_to(ROOT)} {data['facts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
