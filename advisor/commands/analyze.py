"""`advisor analyze TRACE`: read a trace, print the diagnosis, write JSON/HTML reports."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.ingest.base import LoadOptions
from advisor.ingest.input_file import parse_size


@click.command("analyze")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Write the JSON result here.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), help="Write the HTML report here.")
@click.option("--rule", "rules", multiple=True, help="Run only these rules (name or code); repeatable.")
@click.option("--max-steps", default=LoadOptions.max_steps, show_default=True,
              type=click.IntRange(min=1), help="Steady-state steps to analyse in detail.")
@click.option("--max-unpacked", "max_unpacked", default="32G", show_default=True, metavar="SIZE",
              help="Refuse a gzipped trace that unpacks to more than this (e.g. 500M, 64G); "
                   "one that unpacks to over 200 times its size past 256M is refused too.")
@click.option("--quiet", "-q", is_flag=True, help="No console summary.")
def command(trace: Path, json_out: Path | None, html_out: Path | None, rules: tuple[str, ...],
            max_steps: int, max_unpacked: str, quiet: bool) -> int:
    """Analyse an Nsight Systems SQLite export or a torch.profiler trace (.json/.json.gz)."""
    from advisor.analysis import analyze
    from advisor.output_paths import check_outputs

    try:
        cap = parse_size(max_unpacked)
    except ValueError as e:
        raise click.BadParameter(f"{max_unpacked!r} is not a size like 500M or 32G",
                                 param_hint="--max-unpacked") from e
    check_outputs([trace], {"--json": json_out, "--html": html_out})
    options = LoadOptions(max_steps=max_steps, max_unpacked_bytes=cap)
    analysis = analyze(trace, rules, load_options=options)
    emit(analysis, json_out, html_out, quiet)
    return 0


def emit(analysis, json_out: Path | None, html_out: Path | None, quiet: bool) -> None:
    """Render an analysis the way every command does: console, then the files asked for."""
    from rich.console import Console

    from advisor.report import console as console_report

    if json_out:
        from advisor.report.json_report import write_json

        write_json(analysis, json_out)
    if html_out:
        from advisor.report.html_report import write_html

        write_html(analysis, html_out)
    if not quiet:
        console_report.render(analysis, Console(highlight=False))
