"""The job page's timeline in a real browser (Chromium driven by Playwright, as
tests/report/test_html_browser.py drives the single-trace page): timeline.js draws both ranks'
steps, with no console error and no network. Skips as that module does without a browser."""

from __future__ import annotations

import pytest

from advisor.report.html_report import write_html
from advisor.report.job_report import build_job_report
from tests.job.test_job_timeline import _job
from tests.report.test_html_browser import ARGS, CHROMIUM, screenshot, svg_texts, sync_api

pytestmark = pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(),
                                reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")


def test_the_job_timeline_draws_both_ranks(tmp_path):
    rep = build_job_report(_job("h200x2-ddp/torch/slow-rank"))
    path = tmp_path / "job.html"
    write_html(rep, path)
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_selector("#tl-svg rect.ev")
        labels = " ".join(svg_texts(page, "#tl-svg text"))
        drawn = page.locator("#tl-svg rect.ev").count()
        screenshot(type("L", (), {"page": page})(), "job-timeline", "#timeline")
        browser.close()
    assert not errors, errors
    assert requests == [path.as_uri()]
    assert "rank 1 (straggler)" in labels and "rank 0 (typical)" in labels
    assert drawn > 100
