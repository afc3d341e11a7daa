"""The sweep keeps the server log's startup record in each row's evidence; the report shows requested ->
effective per field with the log line (a real 0.5.9 log fed as the log stream, no Docker)."""

from __future__ import annotations

from typing import Any

from test_sweep_events import FakeApi, FakeClient, RecordedRunner, _event, _watch
from test_sweep_report import make_doc, make_row

from bwstack.stack import schema
from bwstack.sweep import report
from support.stack import TESTS

SEED = TESTS / "healthchecks" / "startup_corpus" / "rocm-v0.5.9_glm5-fp8_triton.log"


def _seed_session(stack: schema.Stack) -> dict[str, Any]:
    api = FakeApi([[]], {"Status": "exited", "Running": False, "ExitCode": 1, "OOMKilled": False})
    runner = RecordedRunner(stack, FakeClient(api), None)
    lines = SEED.read_text().splitlines()
    items: list[tuple[str, Any]] = [("docker", _event("start"))]
    items += [("log", line) for line in lines]
    items += [("docker", _event("die", exitCode="1")), ("logend", None)]
    watch = _watch(runner, items, "dense-triton-auto")
    return runner.evidence(watch)


def test_evidence_holds_the_startup_record_and_its_overrides(stack: schema.Stack) -> None:
    evidence = _seed_session(stack)
    found = evidence["startup"]
    assert found["version"] == "0.5.9"
    assert found["effective"]["dsa_decode_backend"]["value"] == "flashmla_kv"
    assert found["effective"]["dsa_decode_backend"]["origin"] == "sglang"
    got = [(o["kind"], o["field"], o["line"]) for o in found["overrides"]]
    assert got == [
        ("mismatch", "moe_runner_backend", 100),
        ("dsa_auto", "dsa_prefill_backend", 98),
        ("dsa_auto", "dsa_decode_backend", 98),
    ]
    assert evidence["effective"] is None  # /server_info never answered; the log still says what ran


def test_report_shows_requested_to_effective_with_the_log_line(stack: schema.Stack) -> None:
    evidence = _seed_session(stack)
    doc = make_doc(["dense-triton-auto"])
    row = make_row("dense-triton-auto", "assertion", "model_load")
    row["evidence"] = {**row["evidence"], **{k: evidence[k] for k in ("requested", "effective", "startup")}}
    report.record(doc, row)
    markdown = report.render_markdown(doc)
    assert (
        "- dsa_decode_backend: (auto) -> flashmla_kv (set by SGLang; server log line 98: "
        "`Set NSA backends for fp8_e4m3 KV Cache: prefill=flashmla_auto, decode=flashmla_kv.`)"
    ) in markdown
    assert "- attention_backend: triton -> triton (from the flag; server log line 100:" in markdown
    assert (
        "- backend_override: moe_runner_backend: requested flashinfer_cutlass (profile), effective auto"
        in (markdown)
    )
    rows = {b["key"]: b for b in report.html_context(doc)["rows"][0]["backends"]}
    assert rows["moe_runner_backend"]["log_differs"] is True
    assert rows["attention_backend"]["log_differs"] is False
    assert rows["dsa_decode_backend"]["log"]["line"] == 98
    html = report.render_html(doc)
    assert (
        "backend_override: attention_backend=triton was requested, yet SGLang set dsa_decode_backend" in html
    )
    assert "(set by SGLang, line 98)" in html
