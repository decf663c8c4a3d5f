"""Every report of one analysis, the way every command writes them: build the report once, then
the files asked for, then the console summary.

`advisor analyze` and `advisor profile` both end here, so the JSON file, the HTML page and the
console of one run are views of one `Report` (`advisor.report.model`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.analysis import Analysis
from advisor.report.model import Report, build_report
from advisor.report.progress import Progress
from advisor.safe_text import CommandFreeStream

if TYPE_CHECKING:  # an annotation only: `advisor profile --try`'s, start-up of the rest
    from advisor.report.tried import Tried

STDOUT = Path("-")


def emit(analysis: Analysis | Report, json_out: Path | None, html_out: Path | None, quiet: bool,
         show_fixes: bool = False, progress: Progress | None = None, stderr: bool = False,
         records: Sequence[Path] = (), tried: Tried | None = None) -> Report:
    """Write the reports asked for and show the console summary (on stderr when ``stderr`` or
    when JSON goes to stdout, so stdout stays parseable). ``records``: further copies of the
    JSON result (`advisor profile` keeps one per rank in its output folder). ``analysis`` may be
    a report already built (a job's: `advisor.report.job_report.build_job_report`); ``tried``: the fixes
    `advisor profile --try` measured, beside the estimates. Returns the report."""
    progress = progress or Progress(False)
    report = (analysis if isinstance(analysis, Report)
              else build_report(analysis, timeline=html_out is not None, tried=tried))
    if json_out or records:  # imported here, as each report below: start-up of the others
        from advisor.report.json_report import to_json, write_json
    if json_out == STDOUT:
        click.echo(to_json(report))
        stderr = True
    elif json_out:
        with progress.stage(f"writing {json_out}") as stage:
            write_json(report, json_out)
            stage.done(f"wrote {json_out}")
    if html_out == STDOUT:
        from advisor.report.html_report import render_html

        click.echo(render_html(report))
        stderr = True
    elif html_out:
        from advisor.report.html_report import write_html

        with progress.stage(f"writing {html_out}") as stage:
            write_html(report, html_out)
            stage.done(f"wrote {html_out}")
    for path in records:
        write_json(report, path)
    if not quiet:
        from rich.console import Console  # here: rich's import is start-up a `-q` run never uses

        from advisor.report import console as console_report

        # rich wraps at the console's width: only its output shows where lines start
        out = CommandFreeStream(sys.stderr if stderr else sys.stdout)
        console_report.render(report, Console(file=out, highlight=False), show_fixes=show_fixes)
    return report
