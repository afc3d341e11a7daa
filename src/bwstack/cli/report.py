"""The ``bwstack report bundle | verify | merge`` commands (registered by ``bwstack.cli``, which stays small).

``bundle`` packs a sweep report into one secret-free file (:mod:`bwstack.sweep.bundle`), ``verify`` checks one
(:mod:`bwstack.sweep.bundleread`) and ``merge`` turns many into one matrix with provenance
(:mod:`bwstack.sweep.reportmerge`). Bad or hostile input is one line and exit status 2, with nothing written.
"""

from __future__ import annotations

from pathlib import Path

import click

from bwstack.cli.options import file_option


@click.command("bundle")
@file_option
@click.argument("report_dir", metavar="REPORT", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path),
    default=None,
    help="The bundle file to write (default: REPORT.bundle.tar.gz beside the report folder).",
)
@click.option("--redact-host", is_flag=True, help="Also drop host names, IP addresses and user names.")
def bundle_cmd(file: Path, report_dir: Path, output: Path | None, redact_host: bool) -> None:
    """Pack a sweep report into one file to attach to an issue: results and evidence, host facts, image
    digests and labels, the profiles as run, bwstack's version and commit, a sha256 manifest.

    The profiles file is the one the report was made from (profiles.cpu.yaml for a CPU sweep) when it lies
    beside -f's.

    Secrets (the files in secrets/, tokens in the environment, anything shaped like a token or key) are
    redacted wherever they appear.
    """
    from bwstack.host.doctor.probe import default_probe
    from bwstack.stack import loader
    from bwstack.sweep import bundle
    from bwstack.sweep.bundleread import read_bundle

    stack, note = bundle.report_stack(report_dir, loader.load_stack(file), loader.load_stack)
    if note:
        click.echo(f"bwstack: {note}")
    written = bundle.write(report_dir, stack, output, probe=default_probe(), redact_host=redact_host)
    checked = read_bundle(written)
    redactions = checked.manifest.get("redactions") or {}
    words = ", ".join(f"{n} {what}" for what, n in redactions.items()) or "nothing to redact"
    click.echo(f"wrote {written}: bundle {checked.id}, {len(checked.parts) - 1} parts; redacted: {words}")


@click.command("verify")
@click.argument("bundle_file", metavar="FILE", type=click.Path(path_type=Path))
def verify_cmd(bundle_file: Path) -> None:
    """Check a bundle's integrity and safety; one line on what is wrong (exit 2) or what it holds."""
    from bwstack.errors import UserError
    from bwstack.sweep.bundleread import describe, doubts, read_bundle

    bundle = read_bundle(bundle_file)
    found = doubts(bundle)
    if found:
        field, why = found[0]
        raise UserError(
            f"bundle doubtful: the host facts and the verdicts disagree: {why}"
            + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
            + "; report merge keeps its rows apart as untrusted",
            file=bundle_file,
            field=field,
        )
    click.echo(f"{bundle_file}: {describe(bundle)}")


@click.command("merge")
@click.argument("files", metavar="FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="Folder of the merged matrix."
)
def merge_cmd(files: tuple[Path, ...], out: Path) -> None:
    """Merge bundles into one matrix (merged.json, matrix.md, matrix.html): every verdict seen per (image
    variant, profile, arch) with hosts, drivers, dates and links to evidence; disagreements marked."""
    from bwstack.files import need_folder, refuse_overwrite
    from bwstack.sweep import reportmerge
    from bwstack.sweep.bundleread import read_bundle

    need_folder(out, "--out")
    refuse_overwrite(out, files, "--out")
    bundles = [read_bundle(path) for path in files]  # every bundle verified before anything is written
    written = reportmerge.write(out, reportmerge.outputs(bundles), reads=files)
    cells = len(reportmerge.merge(bundles)["cells"])
    count = len(reportmerge.distinct(bundles))
    click.echo(f"merged {count} bundle(s) into {cells} cell(s): {out / 'matrix.html'}")
    click.echo(f"wrote {len(written)} file(s) under {out}")
