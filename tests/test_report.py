"""The HTML report: view-model numbers, sections, escaping, golden output, a real browser."""

from __future__ import annotations

import copy
import html as htmlmod
import json
import os
import re
import socket
from html.parser import HTMLParser
from pathlib import Path

import pytest

from profiler.processes.env import ALLOWED_VARIABLES
from profiler.reports import html, summary, viewmodel
from tests.conftest import REPO

DATA = REPO / "tests" / "data"
GOLDEN_SUMMARY = DATA / "golden_summary.json"
GOLDEN_REPORT = DATA / "golden_report.html"
EVIL = "</script><img src=x onerror=alert(1)>"

SECTIONS = (
    "answers",
    "workloads",
    "comparison",
    "attribution",
    "diagnoses",
    "experiments",
    "sweep",
    "kernels",
    "lines",
    "flamegraphs",
    "efficiency",
    "method",
    "environment",
)


@pytest.fixture(scope="module")
def golden() -> dict:
    doc = json.loads(GOLDEN_SUMMARY.read_text())
    summary.validate(doc)
    return doc


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.island: str | None = None
        self._in_island = False
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids.append(a["id"])
        self._in_island = tag == "script" and a.get("id") == "view-model"

    def handle_data(self, data):
        if self._in_island:
            self.island = (self.island or "") + data

    def handle_endtag(self, tag):
        self._in_island = False


def _parse(page: str) -> _Parser:
    p = _Parser()
    p.feed(page)
    return p


def test_view_model_numbers(golden):
    vm = viewmodel.build(golden)
    rows = {r["name"]: r for r in vm["workloads"]}
    np_, tf = rows["numpy_gd"], rows["tf1_gd"]
    fastest = min(r["median_us"] for r in vm["workloads"])
    assert np_["ratio"] == pytest.approx(np_["median_us"] / fastest)
    assert tf["ratio"] == pytest.approx(tf["median_us"] / fastest)
    # The first screen's answer carries the run's own figures.
    (a000,) = [a for a in vm["answers"] if a["seed"] == "000"]
    att = next(w for w in golden["workloads"] if w["name"] == "tf1_gd")["attribution"]
    assert f"takes {att['reference_us']:,.0f} µs per step" in a000["sentences"][0]
    assert (
        f"only {att['typical_us']['compute']:,.0f} µs of its step is kernels"
        in a000["sentences"][0]
    )
    assert f"feed_dict handling {att['typical_us']['feed_fetch']:,.0f} µs" in a000["sentences"][1]
    # The waterfall goes from numpy_gd's step to tf1_gd's in category differences.
    c = vm["comparison"]
    assert (c["a"]["workload"], c["b"]["workload"]) == ("tf1_gd", "numpy_gd")
    total = c["b"]["step_us"] + sum(c["difference_us"].values())
    assert total == pytest.approx(c["a"]["step_us"])
    bars = next(ch for ch in vm["charts"] if ch["id"] == "chart-steps")
    compute = next(t for t in bars["data"] if t["name"].startswith("compute"))
    assert compute["x"][compute["y"].index("tf1_gd")] == pytest.approx(att["typical_us"]["compute"])
    assert vm["chart_ids"] == [
        "chart-steps",
        "chart-waterfall",
        "chart-experiments",
        "chart-sweep",
        "chart-eff-samples",
        "chart-eff-updates",
        "chart-eff-epochs",
        "chart-eff-wall_ms",
    ]


def test_page_has_every_section_and_its_island_is_the_view_model(golden):
    vm = viewmodel.build(golden)
    page = html.render(vm, library=None)
    parsed = _parse(page)
    for section in SECTIONS:
        assert section in parsed.ids, section
    for chart_id in vm["chart_ids"]:
        assert chart_id in parsed.ids, chart_id
    assert json.loads(parsed.island) == json.loads(json.dumps(vm))
    # No network: nothing is loaded from anywhere.
    for tag, attrs in parsed.tags:
        assert not (tag == "script" and attrs.get("src")), attrs
        assert not (tag == "link" and attrs.get("href")), attrs
    assert "https://" not in page and "http://" not in page


def test_a_hostile_workload_name_comes_out_escaped(golden):
    doc = copy.deepcopy(golden)
    w = doc["workloads"][0]
    w["name"] = w["label"] = EVIL
    w["title"] = EVIL + '" onmouseover="alert(2)'
    doc["diagnoses"].append(
        {"rule": "x", "subject": "workload", "name": EVIL, "message": EVIL, "fix": EVIL}
    )
    page = html.render(viewmodel.build(doc), library=None)
    assert "<img src=x" not in page
    assert 'onmouseover="alert' not in page
    assert htmlmod.escape(EVIL) in page
    parsed = _parse(page)
    assert not any(tag == "img" for tag, _ in parsed.tags)
    # The island stays one script element and decodes to the same name.
    assert page.count('<script id="view-model"') == 1
    assert json.loads(parsed.island)["workloads"][0]["label"] == EVIL


def test_nothing_from_the_environment_leaks(golden):
    page = html.render(viewmodel.build(golden), library=None)
    for secret in (os.getcwd(), str(Path.home()), socket.gethostname() + ".xplane"):
        assert secret not in page
    assert "/root/" not in page and "/work/" not in page
    env = golden["environment"]
    assert set(env["variables"]) <= set(ALLOWED_VARIABLES)


def test_golden_report_is_deterministic(golden):
    """The report of a fixed summary, without the charting library, byte for byte.

    After an intended change of the page: ``UPDATE_GOLDEN=1 pytest tests/test_report.py``.
    """
    page = html.render(viewmodel.build(golden), library=None)
    assert page == html.render(
        viewmodel.build(json.loads(GOLDEN_SUMMARY.read_text())), library=None
    )
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN_REPORT.write_text(page)
    assert GOLDEN_REPORT.exists(), "run with UPDATE_GOLDEN=1 once to create it"
    assert page == GOLDEN_REPORT.read_text()


def test_without_the_library_the_page_says_how_to_get_charts(golden):
    page = html.render(viewmodel.build(golden), library=None)
    assert "pip install plotly" in page
    assert "<script>" in page  # the drawing script is still there, and degrades


def test_report_rerenders_from_a_run_folder(tmp_path, golden):
    run = tmp_path / "20260101-000000"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(golden))
    from tests.test_cli import cli

    out = cli("report", str(run))
    assert out.returncode == 0, out.stderr
    page = (run / "report.html").read_text()
    # The installed plotly.js, packed (tests/test_assets.py unpacks it).
    assert page.count('<script id="charting-library" type="application/octet-stream">') == 1
    assert re.search(r"Seed 000: Why is gradient descent", page)


def test_the_table_has_a_loss_column_only_where_a_workload_reports_a_loss():
    from profiler.reports import text

    row = {"label": "t.py", "status": "ok", "median_us": 10.0, "p10_us": 9.0, "p90_us": 11.0,
           "ratio": 1.0, "final_loss": None}  # fmt: skip
    script = text.table({"workloads": [row], "failed": []})
    assert "final loss" not in script and "-  " not in script.splitlines()[2]
    suite = text.table(
        {"workloads": [row, {**row, "label": "w", "final_loss": 0.25}], "failed": []}
    )
    assert suite.splitlines()[0].endswith("final loss") and suite.splitlines()[3].endswith("0.25")


def test_a_script_that_failed_before_any_step_has_no_step_time_in_the_table() -> None:
    from profiler.reports import text, viewmodel

    # A graph-mode Keras 3 script raised at fit: "25534960.1 µs/step" for its traceback.
    w = {"name": "g.py", "label": "g.py", "slug": "g", "status": "failed", "error": "raised",
         "step_time": {"median_us": 25_534_960.1, "p10_us": 25_534_960.1,
                       "p90_us": 25_534_960.1, "steps": 1},
         "script": {"steps": 0}}  # fmt: skip
    (row,) = viewmodel.workload_rows({"workloads": [w]})
    assert row["median_us"] is None and row["p10_us"] is None
    table = text.table({"workloads": [row], "failed": []})
    assert "25534960" not in table and "g.py" in table
    # After some steps, its step time stands.
    (row,) = viewmodel.workload_rows({"workloads": [{**w, "script": {"steps": 31}}]})
    assert row["median_us"] == 25_534_960.1
