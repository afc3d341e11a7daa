"""The ``bwstack compare`` command: options and output only; the work is in :mod:`bwstack.quality.compare`.
Registered on the command group by ``bwstack.cli``; imports nothing heavy at module level.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from pathlib import Path

import click

from bwstack.cli.options import file_option


@click.command("compare")
@click.argument("a")
@click.argument("b", required=False)
@file_option
@click.option("--url-a", default=None, help="A's running server (default http://127.0.0.1:<stack port>).")
@click.option("--url-b", default=None, help="B's running server (default http://127.0.0.1:<stack port>).")
@click.option(
    "--top-k", type=click.IntRange(1, 100), default=None, help="Logprobs per position (default 20)."
)
@click.option("--max-mean-kl", type=click.FloatRange(min=0), default=None, help="Gate: mean KL (nats).")
@click.option("--max-p99-kl", type=click.FloatRange(min=0), default=None, help="Gate: p99 KL (nats).")
@click.option("--min-top1", type=click.FloatRange(0, 1), default=None, help="Gate: top-1 agreement (0-1).")
@click.option("--no-retrieval", is_flag=True, help="Skip the needle retrieval task.")
@click.option(
    "--save-a",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write A's answers to this file (to score a B against later with --a-from; without B: record only).",
)
@click.option(
    "--a-from",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Score B against A's answers recorded in this file (--save-a, a sweep's quality/<profile>.json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def compare(
    a: str,
    b: str | None,
    file: Path,
    url_a: str | None,
    url_b: str | None,
    top_k: int | None,
    max_mean_kl: float | None,
    max_p99_kl: float | None,
    min_top1: float | None,
    no_retrieval: bool,
    save_a: Path | None,
    a_from: Path | None,
    as_json: bool,
) -> None:
    """Run the same seeded prompts through two running servers (profiles A and B, or one profile on two
    variants), teacher-forced: KL divergence and top-1 agreement of their token distributions, the worst
    prompts, and needle retrieval accuracy by length. Exit 1 past a threshold.

    A's answers can be kept (--save-a FILE; without B only A is asked) and B scored against them later
    (--a-from FILE): two versions or profiles that never run at once."""
    from bwstack.errors import UserError
    from bwstack.host import secretfiles
    from bwstack.quality import compare as comparing
    from bwstack.quality import recorded, show
    from bwstack.stack import loader, modelconfig

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    for name in (a, b):
        if name is not None:
            stack.profile(name)  # a UserError naming the profiles when unknown
    if b is None and save_a is None:
        raise UserError("name B, or pass --save-a FILE to record A's answers only", field="B")
    if save_a is not None and a_from is not None:
        raise UserError("--save-a records A from its server, --a-from reads A from a file: pass one",
                        field="--save-a")  # fmt: skip
    if a_from is not None and url_a is not None:
        raise UserError("--a-from reads A's answers from a file; drop --url-a", field="--url-a")
    if b is None and a_from is not None:
        raise UserError("--a-from scores a B against the file: name B", field="B")
    default = f"http://127.0.0.1:{stack.settings.port}"
    target_a, target_b = url_a or default, url_b or default
    for target, option in ((target_a, "--url-a"), (target_b, "--url-b")):
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"{target!r} is not an http(s) URL (e.g. http://127.0.0.1:30000)", field=option)
    if b is not None and a_from is None and target_a == target_b:
        raise UserError(f"A and B are both at {target_a}: run them on two ports and pass --url-a/--url-b",
                        field="--url-b")  # fmt: skip
    api_key = secretfiles.api_key(stack)
    echo = (lambda m: click.echo(m, err=True)) if not as_json else (lambda _m: None)
    window = modelconfig.sparse_window(stack)
    side_a: comparing.Side | recorded.Answers = comparing.Side(a, target_a, api_key)
    if a_from is not None:
        side_a = recorded.load(a_from)
    if b is None:
        assert save_a is not None and isinstance(side_a, comparing.Side)
        answers = comparing.record(side_a, window=window, top_k=top_k or comparing.TOP_K,
                                   with_retrieval=not no_retrieval, echo=echo)  # fmt: skip
        recorded.save(save_a, answers)
        click.echo(show.recorded_line(answers, save_a))
        return
    base = comparing.Thresholds()
    thresholds = comparing.Thresholds(
        max_mean_kl=base.max_mean_kl if max_mean_kl is None else max_mean_kl,
        max_p99_kl=base.max_p99_kl if max_p99_kl is None else max_p99_kl,
        min_top1=base.min_top1 if min_top1 is None else min_top1,
    )
    report = comparing.run(
        side_a,
        comparing.Side(b, target_b, api_key),
        window=window,
        top_k=top_k or comparing.TOP_K,
        thresholds=thresholds,
        with_retrieval=not no_retrieval,
        echo=echo,
        save_a=(lambda answers: recorded.save(save_a, answers)) if save_a is not None else None,
    )
    if as_json:
        click.echo(json.dumps(show.to_json(report), indent=2, sort_keys=True))
    else:
        for line in show.lines(report):
            click.echo(line)
    if report.failures:
        sys.exit(1)
