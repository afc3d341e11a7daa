"""The sweep report: results.json round trip, atomic rewrites, resume checks, Markdown and HTML structure."""

from __future__ import annotations

import io
import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from bwstack import record, sweep
from bwstack.cli import main
from bwstack.errors import UserError
from bwstack.record import read
from bwstack.stack import loader, schema
from bwstack.sweep import report
from bwstack.sweep.demo import run_demo
from bwstack.sweep.display import print_summary
from bwstack.sweep.fast import apply_fast, fast_layer_count, fast_override, model_config
from bwstack.sweep.plan import Options, make_plan, standin_fault
from bwstack.sweep.run import open_document, run_sweep, standin_env

MANIFEST = {
    "schema": "bwstack.versions/1",
    "variant": "v0.5.23-cu130",
    "locked": False,
    "base": {
        "image": "lmsysorg/sglang:v0.5.23-cu130",
        "digest": None,
        "ref": "lmsysorg/sglang:v0.5.23-cu130",
    },
    "sglang": {"version": "0.5.23", "commit": None},
    "cuda": {"toolkit": "13.0", "torch_cuda_arch_list": "12.0a", "gpu_archs": ["sm120"]},
    "python": {"flashinfer-python": "0.7.2", "torch": "2.14.1"},
    "sources": {"deepgemm": {"repo": "https://github.com/deepseek-ai/DeepGEMM", "ref": "abc123"}},
}


def make_row(name: str, expect: str, verdict: str, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "profile": name,
        "variant": "v0.5.23-cu130",
        "expect": expect,
        "verdict": verdict,
        "match": expect == verdict,
        "fast": False,
        "standin": True,
        "fault": "none",
        "decided_by": "log",
        "reason": f"reason of {name}",
        "started_at": "2026-07-01T10:00:00Z",
        "finished_at": "2026-07-01T10:00:05Z",
        "elapsed_s": 5.0,
        "evidence": {
            "log_match": {
                "class": verdict,
                "line": 3,
                "text": "assert not self.dsa_kv_cache_store_fp8",
                "also": ["crash"],
                "source": "memory_pool.py",
                "context": [{"line": 2, "text": "Traceback"}, {"line": 3, "text": "assert <x> & y"}],
            },
            "log_tail": ["last line"],
            "exit_code": 137,
            "oom_killed": False,
            "health": {
                "status": "unhealthy",
                "probes": 2,
                "last": [{"exit": 1, "output": "unhealthy: x", "at": "t"}],
            },
            "requested": {"kv_cache_dtype": "bf16", "attention_backend": "dsa"},
            "effective": {"kv_cache_dtype": "fp8_e4m3", "attention_backend": "nsa"},
            "server_version": "0.5.23",
            "timeout_s": 60.0,
        },
    }
    row.update(extra)
    return row


def make_doc(plan: list[str]) -> report.Document:
    return report.new_document(
        stack={
            "file": "profiles.yaml",
            "project": "bwstack",
            "model": "nvidia/GLM-5-NVFP4",
            "served_name": "glm-5",
            "gpu_arch": "sm120",
            "tp_size": 8,
        },
        mode={"standin": True, "fast": False, "variant": None, "timeout_s": 60.0},
        variants={"v0.5.23-cu130": MANIFEST},
        plan=plan,
        generated_by="bwstack test",
    )


def test_record_summary_and_exit_rule() -> None:
    doc = make_doc(["a", "b"])
    assert report.summarize(doc) == {"planned": 2, "decided": 0, "matching": 0, "mismatching": 0}
    assert not report.all_match(doc)
    report.record(doc, make_row("a", "healthy", "healthy"))
    assert not report.all_match(doc)  # b is not decided yet
    report.record(doc, make_row("b", "nan", "nan"))
    assert report.all_match(doc) and report.decided(doc) == ["a", "b"]
    report.record(doc, make_row("b", "nan", "device_assert"))
    assert not report.all_match(doc) and doc["summary"]["mismatching"] == 1
    report.record(doc, make_row("c", "healthy", "healthy"))
    assert doc["plan"] == ["a", "b", "c"]


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    doc = make_doc(["a"])
    report.record(doc, make_row("a", "assertion", "assertion"))
    report.write_report(tmp_path, doc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.html", "matrix.md", "results.json"]
    loaded = read.load(tmp_path / "results.json")
    assert loaded == json.loads(json.dumps(doc))
    assert loaded["schema_version"] == record.SCHEMA_VERSION == 1


def test_decided_content_ignores_times_durations_and_log_text() -> None:
    one, two = make_doc(["a"]), make_doc(["a"])
    report.record(one, make_row("a", "nan", "nan"))
    other = make_row(
        "a", "nan", "nan", started_at="2030-01-01T00:00:00Z", elapsed_s=99.0, reason="other text"
    )
    other["evidence"]["log_tail"] = ["different"]
    other["evidence"]["health"]["last"][0]["at"] = "later"
    report.record(two, other)
    two["started_at"] = "2031-01-01T00:00:00Z"
    assert report.decided_content(one) == report.decided_content(two)
    changed = make_row("a", "nan", "crash")
    report.record(two, changed)
    assert report.decided_content(one) != report.decided_content(two)


def test_a_failed_rewrite_keeps_the_previous_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = make_doc(["a", "b"])
    report.record(doc, make_row("a", "healthy", "healthy"))
    report.write_report(tmp_path, doc)
    before = (tmp_path / "results.json").read_text(encoding="utf-8")
    real_replace = os.replace

    def failing_replace(src: Any, dst: Any) -> None:
        if str(dst).endswith("results.json"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    report.record(doc, make_row("b", "nan", "nan"))
    with pytest.raises(OSError):
        report.write_report(tmp_path, doc)
    monkeypatch.undo()
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "matrix.html",
        "matrix.md",
        "results.json",
    ]  # no temp


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no sweep report here"),
        ("{not json", "cannot read"),
        ('{"schema_version": 99}', "schema_version 1"),
        ('{"schema_version": 1, "stack": {}}', "malformed"),
    ],
)
def test_the_one_reader_refuses_bad_files(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        read.load(path)


def test_markdown_has_one_row_per_planned_profile() -> None:
    doc = make_doc(["a", "b|pipe", "c"])
    report.record(doc, make_row("a", "healthy", "healthy"))
    report.record(doc, make_row("b|pipe", "healthy", "nan"))
    text = report.render_markdown(doc)
    rows = [
        line
        for line in text.split("## Profiles", 1)[1].splitlines()
        if line.startswith("| ") and not line.startswith(("| profile", "| ---"))
    ]
    assert len(rows) == 3
    assert "b\\|pipe" in rows[1] and "**NO**" in rows[1] and "**nan**" in rows[1]
    assert "not decided yet" in rows[2]
    assert "sglang 0.5.23" in text and "lmsysorg/sglang:v0.5.23-cu130" in text
    assert "- exit code: 137" in text


class _Page(HTMLParser):
    """Collects what the structure checks need."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.rows: list[dict[str, str | None]] = []
        self.details_in_evidence = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "tr":
            self.rows.append(attributes)
        if tag == "details" and self.rows and "evidence" in str(self.rows[-1].get("class")):
            self.details_in_evidence += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_self_contained_with_a_row_and_evidence_per_profile() -> None:
    doc = make_doc(["ok", "bad", "later"])
    report.record(doc, make_row("ok", "healthy", "healthy"))
    report.record(doc, make_row("bad", "healthy", "nan", reason="<script>alert(1)</script>"))
    html = report.render_html(doc)
    page = _Page()
    page.feed(html)
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    assert not [a for _, a in page.tags if "src" in a]
    ids = {a["id"] for _, a in page.tags if a.get("id")}
    hrefs = [str(a["href"]) for _, a in page.tags if "href" in a]
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)  # only links within the page
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html  # escaped
    csp = [a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in str(csp[0]["content"])
    profile_rows = [r for r in page.rows if "profile" in str(r.get("class")).split()]
    assert [r["id"] for r in profile_rows] == ["profile-ok", "profile-bad", "profile-later"]
    assert "matching" in str(profile_rows[0]["class"]) and "mismatch" in str(profile_rows[1]["class"])
    assert "pending" in str(profile_rows[2]["class"])
    assert page.details_in_evidence == 2
    opened = [a for t, a in page.tags if t == "details" and "open" in a]
    assert len(opened) == 1  # the mismatching row's evidence is open
    text = " ".join(page.text)
    assert (
        "0.5.23" in text
        and "lmsysorg/sglang:v0.5.23-cu130" in text
        and "https://github.com/deepseek-ai/DeepGEMM@abc123" in text
    )
    assert 'class="verdict tone-ok"' in html and 'class="verdict tone-bad"' in html


def test_html_marks_only_real_backend_differences() -> None:
    doc = make_doc(["a"])
    report.record(doc, make_row("a", "healthy", "healthy"))
    rows = report.html_context(doc)["rows"][0]["backends"]
    by_key = {b["key"]: b["differs"] for b in rows}
    assert by_key == {"kv_cache_dtype": True, "attention_backend": False}  # dsa is spelt nsa by SGLang 0.5.9
    assert report.same_value("bf16", "bfloat16") and not report.same_value("auto", "fp8_e4m3")


def _speed(rate: float | None) -> dict[str, Any]:
    from bwstack.sweep import bench

    settings = schema.BenchSettings(num_prompts=8, input_len=16, output_len=8, concurrency=2, time_limit_s=30)
    figures: dict[str, Any] = {"completed": 0, "failed": 8, "errors": ["RuntimeError: HTTP 503: busy"]}
    if rate is not None:
        figures = {"output_tokens_per_s": rate, "requests_per_s": 2.5, "ttft_ms_p50": 40.0,
                   "ttft_ms_p99": 95.25, "itl_ms_p50": 12.5, "completed": 8, "failed": 0}  # fmt: skip
    return bench.record(figures, settings=settings, client="bwstack bench_client", why_client="no datasets",
                        host="CPU: Test CPU, 2 cores (real SGLang, no GPU)", standin=False, bench_s=3.0)  # fmt: skip


def test_speed_shows_in_the_grid_the_speed_table_and_the_profile_rows() -> None:
    doc = make_doc(["fast", "slow", "broken", "nan"])
    report.record(doc, make_row("fast", "healthy", "healthy", speed=_speed(321.4)))
    report.record(doc, make_row("slow", "healthy", "healthy", speed=_speed(45.67)))
    report.record(doc, make_row("broken", "healthy", "healthy", speed=_speed(None)))
    report.record(doc, make_row("nan", "nan", "nan"))
    text = report.render_markdown(doc)
    table = text.split("## Speed (`--bench`)", 1)[1].split("## Profiles", 1)[0]
    assert "| output tok/s | req/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms |" in table
    assert "| [fast](#evidence-fast) | 321 | 2.5 | 40 | 95.2 | 12.5 | 8 completed, 0 failed |" in table
    assert "| [slow](#evidence-slow) | 45.7 |" in table
    assert (
        "bench failed: no request completed within the time limit; first error: RuntimeError: HTTP 503"
        in table
    )
    assert table.count("CPU: Test CPU, 2 cores (real SGLang, no GPU)") == 3 and "[nan]" not in table
    profiles = text.split("## Profiles", 1)[1].split("## Evidence", 1)[0]
    assert "| 5.0 s | 321 tok/s |" in profiles and "| 5.0 s | bench failed |" in profiles
    assert "- speed: 321 output tok/s, 2.5 req/s, TTFT p50 40 ms / p99 95.2 ms, ITL p50 12.5 ms" in text
    html = report.render_html(doc)
    page = _Page()
    page.feed(html)
    speed_rows = [r for r in page.rows if r.get("class") == "speed-row"]
    assert [r["data-profile"] for r in speed_rows] == ["fast", "slow", "broken"]
    figures = [a for t, a in page.tags if t == "td" and a.get("data-figure")]
    assert [a["data-figure"] for a in figures[:5]] == list(report.bench.FIGURES)
    grid = html.split('<table class="grid">', 1)[1].split("</table>", 1)[0]
    assert (
        '<span class="speed">321 tok/s</span>' in grid and '<span class="speed">bench failed</span>' in grid
    )
    assert "CPU: Test CPU, 2 cores (real SGLang, no GPU)" in " ".join(page.text)
    # the figures change run to run: not part of what a sweep decided
    assert "speed" not in report.decided_content(doc)["results"]["fast"]


def test_no_speed_no_speed_table() -> None:
    doc = make_doc(["a"])
    report.record(doc, make_row("a", "healthy", "healthy"))
    assert "## Speed" not in report.render_markdown(doc)
    assert 'id="speed"' not in report.render_html(doc)


def test_a_soaked_row_shows_a_table_per_prompt_length() -> None:
    buckets = [
        {
            "length": 1024,
            "requests": 40,
            "failed": 0,
            "tokens": 2560,
            "itl_ms_p50": 11.25,
            "itl_ms_p99": 80.0,
        },
        {"length": 2304, "requests": 0, "failed": 41, "tokens": 41, "itl_ms_p50": None, "itl_ms_p99": None},
    ]
    soaked = {"verdict": "illegal_memory", "reason": "41 of 81 requests failed", "buckets": buckets}
    doc = make_doc(["long", "plain"])
    report.record(doc, make_row("long", "healthy", "illegal_memory", soak=soaked))
    report.record(
        doc, make_row("plain", "healthy", "healthy", soak={"verdict": "error", "reason": "no result"})
    )
    text = report.render_markdown(doc)
    evidence = text.split('<a id="evidence-long"></a>', 1)[1].split('<a id="evidence-plain"></a>', 1)[0]
    assert (
        "| prompt tokens | requests | failed | tokens | ITL p50 ms | ITL p99 ms |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        "| 1024 | 40 | 0 | 2560 | 11.2 | 80.0 |\n"
        "| 2304 | 0 | 41 | 41 | - | - |\n"
    ) in evidence
    assert "prompt tokens" not in text.split('<a id="evidence-plain"></a>', 1)[1]  # no buckets, no table
    html = report.render_html(doc)
    table = html.split('<table class="soak-buckets">', 1)[1].split("</table>", 1)[0]
    page = _Page()
    page.feed(table)
    assert [d.strip() for d in page.text if d.strip()][6:12] == ["1024", "40", "0", "2560", "11.2", "80.0"]
    assert '<td class="differs">41</td>' in table and html.count('<table class="soak-buckets">') == 1


# --- plan, stand-in faults, fast mode, resume (no Docker) --------------------------------------------------


def test_plan_checks_names_and_keeps_order(stack: schema.Stack) -> None:
    with pytest.raises(UserError, match="unknown profile 'nope'"):
        make_plan(stack, ["dense-fi-bf16", "nope"], variant=None, standin=False)
    plan = make_plan(
        stack, ["dense-triton-auto", "dense-fi-bf16", "dense-triton-auto"], variant=None, standin=True
    )
    assert plan.names == ["dense-triton-auto", "dense-fi-bf16"]
    assert make_plan(stack, [], variant=None, standin=False).names == list(stack.profiles)


def test_every_shipped_profile_has_a_standin_fault(stack: schema.Stack) -> None:
    faults = {name: standin_fault(stack, name) for name in stack.profiles}
    assert faults["dense-fi-bf16"] == "none" and faults["modelcard-fi-auto"] == "nan"
    assert faults["dense-triton-auto"] == "assertion" and faults["dsa-trtllm-fp8"] == "unsupported_arch"
    env = standin_env(stack, ["modelcard-fi-auto"], Options(False, True, 60.0, False, 0.25))
    assert env == {
        "modelcard-fi-auto": {
            "BWSTACK_STANDIN_FAULT": "nan",
            "BWSTACK_STANDIN_ARCH": "sm120",
            "BWSTACK_STANDIN_LOAD_SECONDS": "0.25",
        }
    }


def test_a_class_the_standin_cannot_imitate_is_bad_input(stack_copy: Path) -> None:
    text = stack_copy.read_text(encoding="utf-8")
    stack_copy.write_text(text.replace("expect: assertion", "expect: nccl"), encoding="utf-8")
    stack = loader.load_stack(stack_copy)
    with pytest.raises(UserError) as info:
        make_plan(stack, [], variant=None, standin=True)
    assert (
        info.value.field == "profiles.dense-triton-auto.expect"
        and "cannot imitate 'nccl'" in info.value.message
    )
    assert info.value.line is not None
    make_plan(stack, [], variant=None, standin=False)  # fine on real hardware


def test_variant_retargets_and_skips_what_it_cannot_parse(stack: schema.Stack) -> None:
    plan = make_plan(stack, [], variant="v0.5.9-cu130", standin=False)
    assert "dsa-fi-sparse-fp8" not in plan.names and any("dsa-fi-sparse-fp8" in s for s in plan.skipped)
    assert "dense-fi-bf16" in plan.names
    assert {plan.stack.variant_name_for(n) for n in plan.names} == {"v0.5.9-cu130"}
    assert stack.variant_name_for("dense-fi-bf16") == "v0.5.23-cu130"  # the caller's stack is untouched
    with pytest.raises(UserError, match="cannot run on variant"):
        make_plan(stack, ["dsa-fi-sparse-fp8"], variant="v0.5.9-cu130", standin=False)
    with pytest.raises(UserError):
        make_plan(stack, [], variant="no-such-variant", standin=False)


def test_fast_keeps_one_moe_layer(stack: schema.Stack) -> None:
    config = model_config(stack)
    assert config is not None and config["first_k_dense_replace"] == 3
    assert fast_layer_count(config) == 4
    assert fast_layer_count(None) == 4  # GLM-5's known value
    assert fast_layer_count({"first_k_dense_replace": 1, "moe_layer_freq": 2, "num_hidden_layers": 61}) == 3
    assert fast_layer_count({"first_k_dense_replace": 9, "num_hidden_layers": 4}) == 4
    argv = [
        "--model-path",
        "m",
        "--load-format=auto",
        "--json-model-override-args",
        '{"rope_theta": 5}',
        "--x",
    ]
    fast = apply_fast(argv, 4)
    assert fast[:4] == ["--model-path", "m", "--x", "--load-format"]
    assert fast[4] == "dummy" and json.loads(fast[6]) == {"num_hidden_layers": 4, "rope_theta": 5}
    override = json.loads(fast_override(stack, ["dense-fi-bf16"]).split("\n", 1)[1])
    command = override["services"]["dense-fi-bf16"]["command"]
    assert command[-4:] == [
        "--load-format",
        "dummy",
        "--json-model-override-args",
        '{"num_hidden_layers": 4}',
    ]


def _options(standin: bool = True) -> Options:
    return Options(fast=False, standin=standin, timeout_s=60.0, keep=False, load_seconds=None)


def test_resume_needs_a_matching_report(stack: schema.Stack, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    with pytest.raises(UserError, match="no sweep report here"):
        open_document(stack, [], _options(), out, resume=True, variant=None)
    plan, doc = open_document(stack, ["dense-fi-bf16"], _options(), out, resume=False, variant=None)
    report.write_report(out, doc)
    with pytest.raises(UserError, match="already holds a sweep report"):
        open_document(stack, [], _options(), out, resume=False, variant=None)
    with pytest.raises(UserError, match="standin") as info:
        open_document(stack, [], _options(standin=False), out, resume=True, variant=None)
    assert info.value.field == "mode.standin"
    assert str(info.value).endswith(": the report was made with standin=True, this run has standin=False")
    other = {**doc, "stack": {**doc["stack"], "tp_size": 99}}
    report.write_report(out, other)
    with pytest.raises(UserError, match="made for tp_size=99, this stack has tp_size=") as info:
        open_document(stack, [], _options(), out, resume=True, variant=None)
    assert info.value.field == "stack.tp_size"
    report.write_report(out, doc)
    plan, resumed = open_document(stack, [], _options(), out, resume=True, variant=None)
    assert plan.names == ["dense-fi-bf16"] and resumed["plan"] == ["dense-fi-bf16"]
    plan, grown = open_document(stack, ["dense-triton-auto"], _options(), out, resume=True, variant=None)
    assert grown["plan"] == ["dense-fi-bf16", "dense-triton-auto"]
    doc["variants"]["v0.5.23-cu130"]["python"]["torch"] = "0.0.1"
    report.atomic_write(out / "results.json", json.dumps(doc))
    with pytest.raises(UserError, match=r"pins of variant v0\.5\.23-cu130 changed"):
        open_document(stack, [], _options(), out, resume=True, variant=None)


@pytest.mark.parametrize(("verdict", "code"), [("assertion", 0), ("crash", 1)])
def test_resuming_a_finished_report_only_reports(
    stack: schema.Stack, tmp_path: Path, verdict: str, code: int
) -> None:
    """Nothing left to run: no Docker is touched, the exit status follows the recorded verdicts."""
    _, doc = open_document(stack, ["dense-triton-auto"], _options(), tmp_path, resume=False, variant=None)
    report.record(doc, make_row("dense-triton-auto", "assertion", verdict))
    report.write_report(tmp_path, doc)
    out = io.StringIO()
    result = run_sweep(
        stack,
        [],
        variant=None,
        fast=False,
        standin=True,
        out=tmp_path,
        resume=True,
        timeout=None,
        console=Console(file=out, width=120),
    )
    assert result == code
    assert "0 profile(s) to run" in out.getvalue() and "matrix.html" in out.getvalue()


# --- the command line (bad input is one line and exit 2) ---------------------------------------------------


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_cli_unknown_profile_is_exit_2(stack_copy: Path, tmp_path: Path) -> None:
    result = _cli("sweep", "-f", str(stack_copy), "--out", str(tmp_path / "r"), "no-such-profile")
    assert result.exit_code == 2
    line = [ln for ln in result.stderr.splitlines() if "no-such-profile" in ln]
    assert len(line) == 1 and line[0].startswith("bwstack: ") and "unknown profile" in line[0]
    assert not (tmp_path / "r").exists()


def test_cli_resume_without_a_report_is_exit_2(stack_copy: Path, tmp_path: Path) -> None:
    result = _cli("sweep", "-f", str(stack_copy), "--standin", "--resume", "--out", str(tmp_path))
    assert result.exit_code == 2 and "no sweep report here to resume" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_demo_prints_the_report_place_and_the_meaning_of_each_verdict(
    stack: schema.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_sweep(stack_: schema.Stack, profiles: list[str], **kwargs: Any) -> int:
        seen.update(kwargs, profiles=profiles)
        doc = make_doc(["dense-triton-auto"])
        report.record(doc, make_row("dense-triton-auto", "assertion", "assertion"))
        report.write_report(kwargs["out"], doc)
        return 0

    monkeypatch.setattr(sweep.demo, "run_sweep", fake_sweep)
    buffer = io.StringIO()
    code = run_demo(stack, out=tmp_path, console=Console(file=buffer, width=200))
    assert code == 0
    assert seen["standin"] is True and seen["profiles"] == [] and seen["fast"] is False
    text = buffer.getvalue()
    assert "CPU stand-in" in text and str(tmp_path / "matrix.html") in text
    assert "assertion: a Python AssertionError" in text


def test_the_demos_real_cpu_part_measures_speed_and_the_standin_part_does_not(
    stack: schema.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def fake_sweep(stack_: schema.Stack, profiles: list[str], **kwargs: Any) -> int:
        calls.append((stack_.path.name, kwargs))
        doc = make_doc([])
        report.write_report(kwargs["out"], doc)
        return 0

    monkeypatch.setattr(sweep.demo, "run_sweep", fake_sweep)
    assert run_demo(stack, out=tmp_path, console=Console(file=io.StringIO(), width=200)) == 0
    assert [(name, kwargs["standin"], kwargs.get("bench", False)) for name, kwargs in calls] == [
        ("profiles.cpu.yaml", False, True),
        ("profiles.yaml", True, False),
    ]


def test_summary_keeps_profile_names_whole_at_80_columns(
    stack: schema.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = make_doc(["legacy-nsa-default-fp8", "dense-fi-bf16"])
    report.record(doc, make_row("legacy-nsa-default-fp8", "unsupported_arch", "unsupported_arch"))
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    print_summary(doc, tmp_path, Console(file=out, width=80, soft_wrap=True))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines if not line.startswith("report: ")) <= 80
    assert any(ln.split()[:4] == ["legacy-nsa-default-fp8", *["unsupported_arch"] * 2, "yes"] for ln in lines)
    assert any(ln.split() == ["dense-fi-bf16", "not", "decided"] for ln in lines)
