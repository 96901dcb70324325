"""Summaries no run wrote: ``report`` and ``compare`` read them the same way (``summary.load``)
and answer with a page, a comparison or one line on stderr (exit 2), never a traceback.

The property test mutates the golden summary and runs both commands in this process through
``profiler.cli.main``, the function the command line calls; the other tests run the real
command line in a subprocess.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from profiler import cli as profiler_cli
from profiler.reports import html, summary, viewmodel
from tests.recorded import GOLDEN_SUMMARY
from tests.test_cli import cli

EXIT_BAD_INPUT = 2
#: compare's statuses with a comparison on stdout: 0, and 4 when --fail-above's gate fails.
COMPARED = (0, 4)


def _small_golden() -> dict[str, Any]:
    """The golden summary cut to what keeps each example fast (the schema check walks every
    value): its first two workloads, each window's series to 20 points, no efficiency section.
    Every kind of section and value the schema knows is still there."""
    doc = json.loads(GOLDEN_SUMMARY.read_text())
    doc["efficiency"] = None
    doc["workloads"] = doc["workloads"][:2]
    for w in doc["workloads"]:
        w["series"] = {k: v[:20] for k, v in w["series"].items()}
    return doc


BASE = _small_golden()


def _strict(text: str) -> Any:
    """``json.loads`` as a browser's ``JSON.parse``: no NaN, no Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- NaN and infinities (issue 25, item 15) ---------------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_report_and_compare_refuse_a_summary_holding_nan_with_one_line(
    tmp_path: Path, value: float
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        run.mkdir()
    (a / "summary.json").write_text(summary.dumps(BASE))
    doc = copy.deepcopy(BASE)
    doc["workloads"][0]["step_time"]["median_us"] = value  # the schema's "number" takes it
    text = json.dumps(doc)  # Python writes NaN / Infinity, which JSON has not
    assert re.search(r"\bNaN\b|\bInfinity\b", text)
    (b / "summary.json").write_text(text)
    name = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
    for out in (cli("report", str(b)), cli("compare", str(a), str(b))):
        assert out.returncode == EXIT_BAD_INPUT and out.stdout == ""
        (line,) = out.stderr.splitlines()
        assert line == (
            f"error: {b / 'summary.json'}: not a valid summary: it holds {name}, which is not "
            "JSON (a summary writes null there)"
        )
    assert not (b / "report.html").exists()


def test_validate_refuses_non_finite_numbers_and_the_writer_writes_null() -> None:
    doc = copy.deepcopy(BASE)
    doc["workloads"][1]["attribution"]["typical_us"]["compute"] = math.inf
    with pytest.raises(summary.SummaryError) as err:
        summary.validate(doc)
    assert str(err.value) == (
        "summary does not match its schema: workloads/1/attribution/typical_us/compute: inf is "
        "not a JSON number (a summary writes null there)"
    )
    written = _strict(summary.dumps(doc))
    assert written["workloads"][1]["attribution"]["typical_us"]["compute"] is None


def test_the_pages_data_island_never_holds_nan() -> None:
    # A view model holding NaN and infinities (a diverged loss, a 0/0 share): the island is
    # what the page's script hands to JSON.parse.
    vm = viewmodel.build(BASE)
    vm["workloads"][0]["nan_probe"] = [math.nan, math.inf, {"x": -math.inf}]
    page = html.render(vm, library=None)
    island = re.search(r'<script id="view-model" type="application/json">(.*?)</script>', page)
    assert island is not None
    data = _strict(island.group(1))
    assert data["workloads"][0]["nan_probe"] == [None, None, {"x": None}]


# --- any mutation of the golden summary: a page, a comparison or one line -------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place a value sits in ``value`` (a path of keys and indexes), ``value`` included."""
    if isinstance(value, dict):
        inner = [q for k, v in value.items() for q in _paths(v, (*path, k))]
    elif isinstance(value, list):
        inner = [q for i, v in enumerate(value) for q in _paths(v, (*path, i))]
    else:
        inner = []
    return [path, *inner]


PATHS = [p for p in _paths(BASE) if p]
WRONG = [None, "x", "", -1, 0, 1e308, -1e-300, True, [], {}, [1, "a"], {"a": None}]
DEEP = "__deeply_nested__"

mutation = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
    st.tuples(st.just("wrong type"), st.sampled_from(PATHS), st.sampled_from(WRONG)),
    st.tuples(st.just("non-finite"), st.sampled_from(PATHS), st.sampled_from([math.nan, math.inf])),
    st.tuples(st.just("deep"), st.sampled_from(PATHS), st.integers(10, 4000)),
)


def _mutated(changes: list[tuple[str, tuple[Any, ...], Any]], cut: int | None) -> str:
    doc = copy.deepcopy(BASE)
    depth = 0
    for kind, path, value in changes:
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if kind == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = DEEP if kind == "deep" else value
                depth = value if kind == "deep" else depth
        except (KeyError, IndexError, TypeError):  # an earlier change removed the place
            continue
    text = json.dumps(doc)  # NaN and Infinity as Python writes them
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    return text if cut is None else text[: cut % (len(text) + 1)]


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = profiler_cli.main(argv)
        except SystemExit as exc:  # argparse's way out
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("mutated")
    a, b = root / "a", root / "b"
    for run in (a, b):
        run.mkdir()
    (a / "summary.json").write_text(summary.dumps(BASE))
    return a, b


@pytest.mark.slow  # ~25 s of CPU: 200 examples, each a schema check or two and a page
@settings(
    max_examples=200,
    derandomize=True,  # the same examples on every machine, CI included
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    changes=st.lists(mutation, min_size=1, max_size=3),
    cut=st.one_of(st.none(), st.none(), st.integers(0, 10**9)),
)
def test_report_and_compare_answer_any_mutation_of_the_golden_summary_in_one_line(
    runs: tuple[Path, Path], changes: list[tuple[str, tuple[Any, ...], Any]], cut: int | None
) -> None:
    a, b = runs
    (b / "report.html").unlink(missing_ok=True)
    (b / "summary.json").write_text(_mutated(changes, cut))
    status, _out, report_err = _main(["report", str(b)])
    event(f"report: exit {status}")  # --hypothesis-show-statistics: how many pages were drawn
    if status == 0:
        assert "<!doctype html>" in (b / "report.html").read_text()[:200].lower()
    else:
        assert status == EXIT_BAD_INPUT, report_err
        assert re.fullmatch(r"error: [^\n]+\n", report_err), report_err  # one line, no traceback
        assert not (b / "report.html").exists()
    status, out, err = _main(["compare", str(a), str(b), "--fail-above", "5"])
    event(f"compare: exit {status}")
    if status in COMPARED:
        assert " µs per step" in out and "gate: " in out, err
    else:
        assert status == EXIT_BAD_INPUT and out == "", err
        assert re.fullmatch(r"error: [^\n]+\n", err), err
    loading = f"error: {b / 'summary.json'}: "
    if report_err.startswith(loading) and "no run writes" not in report_err:
        # report could not load it: compare loads it the same way, so it says the same.
        assert err == report_err


def test_a_schema_that_cannot_be_read_is_a_summary_error_and_the_run_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A schema file broken in the install (caught mid-edit once): the run's analysis was
    # thrown away with a JSONDecodeError traceback; it is an internal error that keeps the run.
    from profiler.processes import pipeline

    def broken() -> dict:
        raise ValueError("Expecting ',' delimiter: line 720 column 335")

    monkeypatch.setattr(summary, "schema", broken)
    with pytest.raises(summary.SummaryError, match="the summary's schema cannot be read"):
        summary.validate(copy.deepcopy(BASE))
    pipeline.write_outputs(tmp_path, copy.deepcopy(BASE))
    assert json.loads((tmp_path / "summary.json").read_text())["workloads"]
    assert "cannot be read" in (tmp_path / "schema-error.txt").read_text()


def test_a_report_that_cannot_be_drawn_keeps_the_run_and_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A template reading a key one card lacked ended a 2-minute run with a jinja2 traceback.
    from profiler.processes import pipeline
    from profiler.reports import html

    def broken(_vm: dict) -> str:
        raise KeyError("not_measured")

    monkeypatch.setattr(html, "render", broken)
    pipeline.write_outputs(tmp_path, copy.deepcopy(BASE))
    assert json.loads((tmp_path / "summary.json").read_text())["workloads"]
    assert not (tmp_path / "report.html").exists()
    assert "KeyError: 'not_measured'" in (tmp_path / "report-error.txt").read_text()
    err = capsys.readouterr().err
    assert err.startswith("internal error (a bug of the profiler; the run is kept): the report")
