"""The lines phase: line_profiler stats -> LineStat rows and tables, and real line tables of
numpy_gd's step and TF1's BaseSession._run."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from profiler.analysis import lines as line_tables
from profiler.analysis.run import analyse_workload
from profiler.capture.collectors import lines as collect
from profiler.model import LineStat
from profiler.reports import artefacts, lines_text
from tests import tracing_runs

FILE = __file__


def _stats() -> SimpleNamespace:
    # line_profiler's LineStats: timings keyed by (file, first line, function), unit in seconds.
    return SimpleNamespace(
        unit=1e-6,
        timings={
            (FILE, 1, "f"): [(3, 10, 30.0), (2, 10, 90.0), (4, 5, 0.0)],
            (FILE, 20, "g"): [(21, 2, 1000.0)],
        },
    )


def test_line_profiler_stats_become_line_stats() -> None:
    rows = collect.from_line_profiler(_stats())
    assert [(r.function, r.line, r.hits, r.total_ns) for r in rows] == [
        ("f", 2, 10, 90_000),
        ("f", 3, 10, 30_000),
        ("f", 4, 5, 0),
        ("g", 21, 2, 1_000_000),
    ]
    # The source text comes along (this file's own lines).
    with open(FILE) as fh:
        assert rows[0].source == fh.read().splitlines()[1]


def test_tables_rank_lines_by_time_with_per_hit_per_step_and_share() -> None:
    rows = collect.from_line_profiler(_stats())
    tables = line_tables.tables(rows, steps=10)
    assert [t["function"] for t in tables] == ["g", "f"]  # the costlier function first
    f = tables[1]
    assert (f["total_ms"], f["us_per_step"]) == (0.12, 12.0)
    assert [(r["line"], r["us_per_hit"], r["us_per_step"], r["share"]) for r in f["rows"]] == [
        (2, 9.0, 9.0, 0.75),
        (3, 3.0, 3.0, 0.25),
        (4, 0.0, 0.0, 0.0),
    ]
    text = lines_text.render(tables, 10, ["a note"])
    assert "a note" in text
    # Source order in the listing; the function's costliest line is starred.
    listing = [
        m.groups() for ln in text.splitlines() if (m := re.match(r"([* ]) +(\d+) +\d+ ", ln))
    ]
    assert listing == [("*", "21"), ("*", "2"), (" ", "3"), (" ", "4")]


def test_a_function_with_no_time_has_no_shares() -> None:
    rows = (LineStat(FILE, 5, "h", 3, 0),)
    (t,) = line_tables.tables(rows, steps=0)
    assert t["us_per_step"] is None and t["rows"][0]["share"] is None


@pytest.fixture(scope="module")
def numpy_run():
    return tracing_runs.numpy_outcome()


def test_numpy_gd_line_table_ranks_a_gradient_line_first(numpy_run) -> None:
    outcome, wdir = numpy_run
    rec = outcome.trace.phase("lines")
    assert rec.status == "ok", rec.reason
    wa = analyse_workload(outcome)
    (table,) = wa.line_tables
    assert table["function"] == "build.<locals>.step"
    top = table["rows"][0]
    assert top["source"].startswith("loss_gradient_"), table["rows"][:3]
    assert top["share"] > 0.2
    # Every step ran each line once: hits == steps profiled (re-warm + window).
    steps = rec.data.steps_profiled
    assert steps == tracing_runs.NUMPY_LINES_STEPS + 20
    assert all(r["hits"] == steps for r in table["rows"])
    assert sum(r["share"] for r in table["rows"]) == pytest.approx(1.0, abs=1e-3)
    artefacts.write_all(wdir.parent.parent, [wa])
    text = (wdir / "lines.txt").read_text()
    assert "loss_gradient_W" in text and "overstated" in text
    assert rec.lines and all(ln.function == "build.<locals>.step" for ln in rec.lines)


@pytest.fixture(scope="module")
def tf1_run():
    return tracing_runs.tf1_trace()


@pytest.mark.tf
def test_tf1_gd_profiles_the_step_and_base_session_run(tf1_run) -> None:
    trace, wdir = tf1_run
    rec = trace.phase("lines")
    assert rec.status == "ok", rec.reason
    assert rec.data.targets == ("build.<locals>.step", "BaseSession._run")
    tables = {t["function"]: t for t in line_tables.tables(rec.lines, rec.data.steps_profiled)}
    run = tables["BaseSession._run"]
    # The C call through _do_run is the costliest line; feed conversion and fetch handling
    # are among the next ones.
    assert "self._do_run(" in run["rows"][0]["source"]
    next_lines = " ".join(r["source"] for r in run["rows"][1:5])
    assert "_FetchHandler(" in next_lines and "np_asarray" in next_lines
    step = tables["build.<locals>.step"]
    assert "sess.run" in step["rows"][0]["source"]
    # Nested timings agree: the step's lines fit in its steps, and the session's lines in the
    # step's sess.run line, which runs once a step. (How much line profiling slows a step is
    # the bench's figure: beside a busy process it is within the noise, 646 against 702 us.)
    n = rec.data.steps_profiled
    assert step["rows"][0]["hits"] == n
    mean_us = sum(rec.window.durations_ns()) / len(rec.window.durations_ns()) / 1e3
    assert step["us_per_step"] <= mean_us * 1.02
    assert run["us_per_step"] <= step["rows"][0]["us_per_step"] * 1.02


@pytest.mark.slow
def test_a_loop_inside_a_function_called_once_is_profiled_line_by_line(tmp_path) -> None:
    # The loop runs inside train(), called once and running when the lines phase starts: its
    # lines (the every-10th-step save included) are in the table, with their hit counts.
    from tests.test_script_run import cli, only_run, phase, workload

    script = tmp_path / "fn_loop.py"
    script.write_text(
        "import time\n"
        "import numpy as np\n"
        "\n"
        "def save(w):\n"
        "    time.sleep(0.001)\n"
        "\n"
        "def train(steps):\n"
        "    w = np.zeros(64)\n"
        "    for step in range(steps):\n"
        "        w = w * 0.5 + np.ones(64) @ np.eye(64)\n"
        "        if step % 10 == 0:\n"
        "            save(w)\n"
        "    return w\n"
        "\n"
        "train(20_000)\n"
    )
    out = cli(tmp_path, "--phases", "timed,lines", str(script))
    assert out.returncode == 0, out.stderr
    w = workload(only_run(tmp_path))
    lines = phase(w, "lines")
    assert lines["status"] == "ok", lines
    table = (only_run(tmp_path) / "workloads" / "fn_loop.py" / "lines.txt").read_text()
    assert "train  (" in table and "save(w)" in table, table
    hits = {int(m[1]): int(m[2]) for m in re.finditer(r"^\*?\s+(\d+)\s+(\d+)\s", table, re.M)}
    assert hits[12] * 10 == pytest.approx(hits[10], rel=0.05), hits
