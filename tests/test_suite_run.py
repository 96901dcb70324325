"""The whole suite: one real short run (every workload and phase runs, the summary validates,
its report opened in headless Chromium), and the recorded run (``tests.recorded``) for
attribution, experiments and diagnoses, whose figures are the same on every machine."""

from __future__ import annotations

import json
import shutil

import pytest

from profiler.analysis import attribution
from profiler.bench import CHROMIUM_ARGS
from profiler.model import CATEGORIES
from profiler.reports import summary, viewmodel
from tests import recorded as recorded_run
from tests.conftest import LIVE_SUITE


def _w(doc, name):
    return next(w for w in doc["workloads"] if w["name"] == name)


@pytest.fixture(scope="module")
def recorded():
    return recorded_run.summary_of_recording()


@pytest.mark.tf
@pytest.mark.slow
def test_every_workload_ran_and_its_summary_validates(suite_run):
    doc = json.loads((suite_run.run_dir / "summary.json").read_text())
    summary.validate(doc)
    assert [w["status"] for w in doc["workloads"]] == ["ok"] * len(LIVE_SUITE), [
        (w["name"], w["error"]) for w in doc["workloads"] if w["status"] != "ok"
    ]
    for w in doc["workloads"]:
        statuses = {p["name"]: p["status"] for p in w["phases"]}
        assert statuses["timed"] == "ok"
        assert statuses["sampled"] == "ok", (w["name"], w["phases"])
        if w["framework"] in ("tf1", "keras") or w["name"] == "tf2_function_step":
            assert statuses["framework"] == "ok" and statuses["hooks"] == "ok", w["name"]


@pytest.mark.tf
@pytest.mark.slow
def test_the_seed_scripts_what_ifs_sit_beside_the_hand_written_pairs(suite_run):
    doc = json.loads((suite_run.run_dir / "summary.json").read_text())
    sw = doc["experiments"]["seed_whatifs"]
    assert sw["status"] == "ok", sw["error"]
    assert (suite_run.run_dir / sw["run"] / "summary.json").is_file()
    rows = {r["id"]: r for r in sw["rows"]}
    # The seed feeds float64 arrays to float32 placeholders: converted once, beside the pair
    # that feeds float32 by hand; session.run's native callable has no hand-written pair.
    once = rows["tf1_feeds_once"]
    assert once["pair"] == "feed float32" and once["measured_saving_us"] is not None
    assert once["ratio"] == pytest.approx(once["measured_saving_us"] / once["pair_saving_us"])
    native = rows["tf1_callable"]
    assert native["pair"] is None and native["measured_saving_us"] > 0
    page = (suite_run.run_dir / "report.html").read_text()
    assert "The same fixes applied by the what-ifs to the seed script" in page
    assert "none makes this fix" in page


def test_every_timed_step_is_split_into_categories_that_sum_to_it(recorded):
    outcomes, _x, _e = recorded_run.load()
    for o in outcomes:
        att = attribution.attribute(o.trace)
        durations = o.trace.phase("timed").window.durations_ns()
        assert len(att.steps) == len(durations)
        for row, d in zip(att.steps, durations, strict=True):
            assert sum(row) == d and min(row) >= 0
        s = _w(recorded, o.spec.name)["attribution"]
        total_ms = sum(s["window_total_ms"][c] for c in CATEGORIES)
        assert total_ms == pytest.approx(sum(durations) / 1e6, rel=1e-6)


def test_tf1_gd_is_mostly_overhead_and_its_compute_matches_step_stats(recorded):
    att = _w(recorded, "tf1_gd")["attribution"]
    assert att["overhead_share"] >= 0.70
    assert att["method"] == "hooks+kernels"
    (check,) = [c for c in att["checks"] if c["name"] == "compute vs step_stats kernel time"]
    assert check["ok"], check
    # The seed pair's "other" stays small: the attribution explains the step.
    for name in ("numpy_gd", "tf1_gd"):
        assert _w(recorded, name)["attribution"]["share"]["other"] <= 0.15, name


def test_numpy_compute_share_agrees_with_the_size_sweep(recorded):
    att = _w(recorded, "numpy_gd")["attribution"]
    (check,) = [c for c in att["checks"] if "size sweep" in c["name"]]
    assert check["ok"], check


def test_every_pair_has_a_prediction_and_a_measurement(recorded):
    x = recorded["experiments"]
    assert x["status"] == "ok"
    assert len(x["pairs"]) == 6
    for p in x["pairs"]:
        assert p["status"] == "ok", p
        assert p["predicted_saving_us"] is not None and p["measured_saving_us"] is not None
        assert p["resolution_us"] > 0
    # Moving the loop into the graph removes most of tf1_gd's step, predicted and measured.
    loop = next(p for p in x["pairs"] if p["variant"] == "tf1_gd_whileloop")
    assert loop["measured_saving_us"] > 0.5 * loop["baseline_us"]
    assert loop["predicted_saving_us"] > 0.5 * loop["baseline_us"]
    assert x["sweep"]["numpy_gd"]["fit"]["b_ns_per_sample"] > 0


def test_a_diagnosis_fires_on_tf1_gd_and_not_on_its_in_graph_control(recorded):
    fired = {(d["name"], d["rule"]) for d in recorded["diagnoses"]}
    assert ("tf1_gd", "feed_dict_cost_measured") in fired
    assert ("tf1_gd", "overhead_bound_measured") in fired
    control = {rule for name, rule in fired if name == "tf1_gd_whileloop"}
    assert not control & {
        "feed_dict_cost_measured",
        "feed_dict_cost",
        "overhead_bound",
        "overhead_bound_measured",
    }
    feed = next(
        d
        for d in recorded["diagnoses"]
        if d["name"] == "tf1_gd" and d["rule"] == "feed_dict_cost_measured"
    )
    att = _w(recorded, "tf1_gd")["attribution"]
    assert f"{att['parts_us']['feed_fetch.feed']:.0f} µs per step" in feed["message"]


def test_the_recording_reproduces_the_golden_summary(recorded):
    """Analysis is a pure function of the traces: the recorded run's summary is the golden one
    (after an intended change: ``python -m tests.recorded --golden-only``)."""
    assert recorded == json.loads(recorded_run.GOLDEN_SUMMARY.read_text())


# --- the suite run's report in headless Chromium (Debian's, driven by Playwright) -------------
# In this module with the run's other tests: under `make test`'s two pytest workers, a module
# runs in one of them, so the shared run is made once.

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = list(CHROMIUM_ARGS)
MAX_BYTES = 5 * 1024 * 1024


def _browser(test):
    return pytest.mark.browser(pytest.mark.tf(pytest.mark.slow(test)))


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
            "document.body.getAttribute('data-charts-rendered') !== null", timeout=60_000
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


@_browser
def test_no_console_errors_and_every_chart_renders(page_in_browser, suite_run):
    vm = viewmodel.build(json.loads((suite_run.run_dir / "summary.json").read_text()))
    errors = [m for m in page_in_browser["messages"] if m[0] in ("error", "pageerror")]
    assert errors == []
    assert len(vm["charts"]) == 8
    assert page_in_browser["rendered"] == len(vm["charts"])
    assert page_in_browser["plots"] == len(vm["charts"])


@_browser
def test_values_show_on_hover(page_in_browser):
    assert "µs" in page_in_browser["hover"]


@_browser
def test_offline_and_small(page_in_browser):
    # Only the file itself is loaded: no CDN, no fonts, no network at all.
    assert all(
        u.startswith("file://") or u.startswith("data:") for u in page_in_browser["requests"]
    )
    assert page_in_browser["report"].stat().st_size <= MAX_BYTES


@_browser
def test_screenshot_is_saved(page_in_browser):
    shot = page_in_browser["shot"]
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
