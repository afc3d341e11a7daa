"""``bwstack list``: the profiles grouped like NVIDIA NIM's list-model-profiles.

Without ``--arch``: expected to work / known to fail, each with its reason and evidence. With ``--arch``: each
profile also gets a predicted verdict for that GPU arch from the rules engine (explain + audit + rules), and
the listing says where the prediction disagrees with the profile's own ``expect``.
"""

from __future__ import annotations

from typing import Any

from bwstack.model import Stack


def list_data(stack: Stack, *, arch: str | None) -> dict[str, Any]:
    """Machine-readable listing (``bwstack list --json``)."""
    rows = []
    for name, profile in stack.profiles.items():
        row: dict[str, Any] = {
            "profile": name,
            "variant": stack.variant_name_for(name),
            "expect": profile.expect,
            "arch": stack.arch_for(name),
            "why": profile.why or profile.description,
            "evidence": list(profile.evidence),
            "backends": {k: v for k, v in profile.backends().items() if v is not None},
        }
        if arch is not None:
            row["prediction"] = _predict(stack, name, arch)
        rows.append(row)
    from bwstack.calibrate import load_baseline

    baseline = load_baseline(stack)
    quality = None if baseline is None else {k: v for k, v in baseline.__dict__.items()}
    return {"file": str(stack.path), "arch": arch, "profiles": rows, "quality_baseline": quality}


def _predict(stack: Stack, profile_name: str, arch: str) -> dict[str, Any]:
    from bwstack import rules

    prediction = rules.predict(stack, profile_name, arch)
    return prediction.to_json()


def print_list(stack: Stack, *, arch: str | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    data = list_data(stack, arch=arch)
    console = Console(highlight=False)
    groups = [
        ("Expected to work", [r for r in data["profiles"] if r["expect"] == "healthy"], "green"),
        ("Known to fail", [r for r in data["profiles"] if r["expect"] != "healthy"], "red"),
    ]
    for title, rows, color in groups:
        if not rows:
            continue
        table = Table(title=f"[bold {color}]{title}[/]", title_justify="left", show_lines=False, expand=False)
        table.add_column("profile", no_wrap=True)
        table.add_column("variant", no_wrap=True)
        table.add_column("expect", no_wrap=True)
        if arch is not None:
            table.add_column(f"predicted on {arch}", no_wrap=True)
        table.add_column("why / evidence")
        for row in rows:
            cells = [row["profile"], row["variant"], row["expect"]]
            if arch is not None:
                pred = row["prediction"]
                mark = " [yellow](differs from expect)[/]" if pred.get("agrees") is False else ""
                cells.append(f"{pred['verdict']}{mark}")
            why = escape(row["why"])
            if arch is not None and row["prediction"].get("reason"):
                why = f"{why}\n[dim]prediction: {escape(row['prediction']['reason'])}[/]"
            if arch is not None and row["prediction"].get("why_differs"):
                why = f"{why}\n[yellow]{escape(row['prediction']['why_differs'])}[/]"
            if row["evidence"]:
                why = f"{why}\n[dim]{escape('; '.join(row['evidence']))}[/]"
            table.add_row(*cells, why)
        console.print(table)
    from bwstack.calibrate import describe

    console.print(escape(describe(stack)))
    console.print(
        "[dim]start one with: bwstack up PROFILE   (or: docker compose --profile PROFILE up -d --wait)[/]"
    )
