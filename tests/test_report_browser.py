"""The real suite run's report, opened in headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import json
import shutil

import pytest

from profiler.bench import CHROMIUM_ARGS
from profiler.reports import viewmodel

pytestmark = [pytest.mark.browser, pytest.mark.tf, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = list(CHROMIUM_ARGS)
MAX_BYTES = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def page_in_browser(suite_run, keep_dir):
    from playwright.sync_api import sync_playwright

    assert shutil.which("chromium"), "Debian's chromium is missing: `make test` installs it"
    report = suite_run.run_dir / "report.html"
    messages: list[tuple[str, str]] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: messages.append((m.type, m.text)))
        page.on("pageerror", lambda e: messages.append(("pageerror", str(e))))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        page.wait_for_function(
            "document.body.getAttribute('data-charts-rendered') !== null", timeout=15_000
        )
        rendered = int(page.evaluate("document.body.getAttribute('data-charts-rendered')"))
        plots = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
        # Hover over the stacked bar chart's bars, tallest first: Plotly shows the value.
        bars = page.locator("#chart-steps .barlayer .point path")
        boxes = [bars.nth(i).bounding_box() for i in range(bars.count())]
        boxes = sorted((b for b in boxes if b and b["height"] >= 4), key=lambda b: -b["height"])
        hover = None
        for box in boxes[:5]:
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            try:
                page.wait_for_selector("#chart-steps .hoverlayer .hovertext", timeout=2_000)
            except Exception:  # the pointer landed between traces: the next bar
                page.mouse.move(0, 0)
                continue
            hover = page.locator("#chart-steps .hoverlayer .hovertext").first.text_content()
            break
        shot = keep_dir / "report.png"
        page.screenshot(path=str(shot), full_page=False)
        browser.close()
    return {
        "report": report,
        "rendered": rendered,
        "plots": plots,
        "messages": messages,
        "requests": requests,
        "hover": hover,
        "shot": shot,
    }


def test_no_console_errors_and_every_chart_renders(page_in_browser, suite_run):
    vm = viewmodel.build(json.loads((suite_run.run_dir / "summary.json").read_text()))
    errors = [m for m in page_in_browser["messages"] if m[0] in ("error", "pageerror")]
    assert errors == []
    assert len(vm["charts"]) == 8
    assert page_in_browser["rendered"] == len(vm["charts"])
    assert page_in_browser["plots"] == len(vm["charts"])


def test_values_show_on_hover(page_in_browser):
    assert "µs" in page_in_browser["hover"]


def test_offline_and_small(page_in_browser):
    # Only the file itself is loaded: no CDN, no fonts, no network at all.
    assert all(
        u.startswith("file://") or u.startswith("data:") for u in page_in_browser["requests"]
    )
    assert page_in_browser["report"].stat().st_size <= MAX_BYTES


def test_screenshot_is_saved(page_in_browser):
    shot = page_in_browser["shot"]
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
