"""tests/bench: the benchmarks in benchmarks/ (their runner, skip protocol, smoke mode, generated docs).

benchmarks/ goes on ``sys.path`` here, once, so the tests import the benchmarks' own helpers: ``run`` (the
runner), ``_common`` (the skip protocol) and ``_docs`` (the block of docs/benchmarks.md).
"""

from __future__ import annotations

import sys

from support.stack import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
