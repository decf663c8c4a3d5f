"""The HTML report in a real browser (Chromium driven by Playwright): it renders, logs no
console error, fetches nothing, zooms, and shows hostile trace text as text.

Skips when Playwright or a Chromium binary is missing (``pip install playwright`` and Debian's
``apt-get install chromium``; no browser download needed). ``ADVISOR_CHROMIUM`` points at
another binary; ``ADVISOR_SCREENSHOTS`` names a folder to keep the screenshots in.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.analysis import Analysis
from advisor.report.html_report import write_html
from advisor.report.html_view import fmt_ms, fmt_x
from tests.report.test_html_report import HOSTILE_KERNEL, hostile_analysis

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = os.environ.get("ADVISOR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


class Loaded:
    """A report open in a page, with what the page logged, fetched and tried to pop up."""

    def __init__(self, page: Any, url: str, analysis: Analysis) -> None:
        self.page, self.url, self.analysis = page, url, analysis
        self.console: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []

    def view(self) -> tuple[float, float]:
        svg = self.page.locator("#tl-svg")
        return float(svg.get_attribute("data-t0")), float(svg.get_attribute("data-t1"))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    analysis = hostile_analysis()
    path = tmp_path_factory.mktemp("html") / "report.html"
    write_html(analysis, path)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        result = Loaded(page, path.as_uri(), analysis)
        page.on("console", lambda m: result.console.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: result.console.append(f"pageerror: {e}"))
        page.on("request", lambda r: result.requests.append(r.url))
        page.on("dialog", lambda d: (result.dialogs.append(d.message), d.dismiss()))
        page.goto(result.url)
        page.wait_for_selector("#tl-svg rect.ev")
        yield result
        browser.close()


def screenshot(loaded: Loaded, name: str, selector: str | None = None) -> None:
    folder = os.environ.get("ADVISOR_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    target = loaded.page.locator(selector) if selector else loaded.page
    kwargs = {} if selector else {"full_page": True}
    target.screenshot(path=str(Path(folder) / f"{name}.png"), **kwargs)


def svg_texts(page: Any, selector: str) -> list[str]:
    """textContent of SVG text elements (Playwright's inner_text is for HTML elements)."""
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def test_renders_with_no_console_error_and_no_network(loaded: Loaded) -> None:
    screenshot(loaded, "report-full")
    assert loaded.console == []
    assert loaded.requests == [loaded.url]


def test_headline_numbers_are_shown(loaded: Loaded) -> None:
    r, c = loaded.analysis.results, loaded.analysis.results.combined
    page = loaded.page
    # The one baseline step: the mean replayed without the profiler's host overhead.
    assert page.locator("#kpi-step .tile-value").inner_text() == fmt_ms(r.baseline_step_ns / 1e6)
    assert page.locator("#kpi-speedup .tile-value").inner_text() == fmt_x(c.speedup)
    assert page.locator("#kpi-predicted .tile-value").inner_text() == fmt_ms(c.predicted_step_ns / 1e6)
    assert page.locator("#kpi-busy .tile-value").inner_text().endswith("%")
    assert "Tesla V100" in page.locator("#kpi-env").inner_text()


def test_findings_and_skipped_sections_are_there(loaded: Loaded) -> None:
    findings = loaded.page.locator("#findings article.finding")
    assert findings.count() == len(loaded.analysis.results.findings) > 0
    assert findings.first.locator("pre code").inner_text().strip()
    assert findings.first.locator(".f-speed").inner_text().endswith("×")


def test_timeline_draws_kernels_idle_gaps_and_host_lanes(loaded: Loaded) -> None:
    page = loaded.page
    screenshot(loaded, "timeline", "#timeline")
    assert page.locator('#tl-svg rect.ev[class*="c-k-"]').count() > 10
    assert page.locator('#tl-svg rect.ev[class*="c-idle-"]').count() > 0
    assert page.locator('#tl-svg rect.ev[class*="c-api-"]').count() > 0
    titles = svg_texts(page, "#tl-svg text.lane-title")
    assert {"CUDA API", "idle · why", "stream 7"} <= set(titles)


def test_zoom_buttons_wheel_and_fit_change_the_view(loaded: Loaded) -> None:
    page = loaded.page
    page.click('.tl-controls button[data-act="fit"]')
    page.wait_for_timeout(50)
    a0, a1 = loaded.view()
    page.click('.tl-controls button[data-act="in"]')
    page.wait_for_timeout(50)
    b0, b1 = loaded.view()
    assert b1 - b0 == pytest.approx((a1 - a0) / 2, rel=0.01)
    box = page.locator("#tl-svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] - 10)
    page.mouse.wheel(0, -400)  # not clicked yet: the page scrolls, the view stays
    page.wait_for_timeout(80)
    assert loaded.view() == (b0, b1)
    page.mouse.click(box["x"] + box["width"] * 0.6, box["y"] + box["height"] - 10)
    page.mouse.wheel(0, -400)
    page.wait_for_timeout(80)
    c0, c1 = loaded.view()
    assert c1 - c0 < b1 - b0
    page.click('.tl-controls button[data-act="fit"]')
    page.wait_for_timeout(50)
    assert loaded.view() == (a0, a1)
    assert loaded.console == []


def test_hostile_trace_text_stays_text(loaded: Loaded) -> None:
    page = loaded.page
    assert page.evaluate("document.scripts.length") == 3
    assert page.locator("img, iframe, object, embed").count() == 0
    first = page.locator("#findings article.finding").first
    assert HOSTILE_KERNEL in first.locator(".names li").all_inner_texts()
    first.locator(".show-in-tl").click()  # zooms to the cited (renamed) kernel
    page.wait_for_timeout(100)
    hit = page.locator('#tl-svg rect.ev.hl[class*="c-k-"]').first
    hit.hover()
    page.wait_for_timeout(50)
    assert page.locator("#tl-tip .tip-name").inner_text().startswith(HOSTILE_KERNEL)
    kernel = hit.bounding_box()  # drag over it on the time axis: zoom to it, so it gets a label
    axis_y = page.locator("#tl-svg").bounding_box()["y"] + 8
    page.mouse.move(kernel["x"], axis_y)
    page.mouse.down()
    page.mouse.move(kernel["x"] + kernel["width"], axis_y, steps=4)
    page.mouse.up()
    page.wait_for_timeout(80)
    labels = svg_texts(page, "#tl-svg text.lbl")
    assert any(t.startswith("<script>") for t in labels)
    screenshot(loaded, "timeline-hostile-zoomed", "#timeline")
    page.keyboard.press("Escape")
    assert loaded.dialogs == []
    assert loaded.console == []
