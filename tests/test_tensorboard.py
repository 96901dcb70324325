"""TensorBoard: our scalars by hand, and a real TensorBoard serving a real capture."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from profiler.analysis import attribution
from profiler.model import (
    CATEGORIES,
    MetricPoint,
    PhaseRecord,
    Segment,
    Window,
    WorkDecl,
    WorkloadTrace,
)
from profiler.reports import tensorboard
from tests.conftest import REPO, python_env
from tests.tf_capture import FRAMEWORK_STEPS, TIMED_STEPS, outcome, tf_run

# --- the scalar writer, by hand --------------------------------------------------------------


def _trace(units_per_step: int = 1) -> WorkloadTrace:
    k = units_per_step
    work = WorkDecl(8 * k, k, 4, 16, 64, units_per_step=k)
    return WorkloadTrace(
        workload="w",
        params={},
        work=work,
        build_ns=0,
        warmup=Window("warmup", (Segment(0, (0, 1_000, 2_000)),)),
        phases=(
            PhaseRecord("timed", "ok", Window("timed", (Segment(2, (2_000, 4_000, 7_000)),))),
            PhaseRecord("framework", "ok", Window("framework", (Segment(4, (9_000, 19_000)),))),
            PhaseRecord("hooks", "skipped", reason="numpy workload"),
        ),
        metrics=(MetricPoint(-1, "loss", 9.0), MetricPoint(3, "loss", 4.5)),
    )


def test_scalars_by_hand(tmp_path):
    path = tensorboard.write(tmp_path, _trace(), attribution.attribute(_trace()), now=1_000.0)
    assert path.name.startswith("events.out.tfevents.") and path.name.endswith(".profiler-scalars")
    everything = {(s["tag"], s["step"], s["value"]) for s in tensorboard.read(path)}
    by_category = {g for g in everything if g[0].startswith("time_by_category/")}
    got = everything - by_category
    # No phase explains anything in this trace: each timed step is all "other".
    assert by_category == {
        (f"time_by_category/{c}", step, value if c == "other" else 0.0)
        for c in CATEGORIES
        for step, value in ((2, 2.0), (3, 3.0))
    }
    assert got == {
        ("step_time_us", 2, 2.0),
        ("step_time_us", 3, 3.0),
        ("phase_step_time_us/framework", 4, 10.0),
        ("loss/by_step", 0, 9.0),
        ("loss/by_step", 4, 4.5),
        ("loss/by_samples", 0, 9.0),
        ("loss/by_samples", 32, 4.5),
        ("loss/by_updates", 0, 9.0),
        ("loss/by_updates", 4, 4.5),
    }


def test_multi_step_units_count_training_steps(tmp_path):
    got = tensorboard.read(tensorboard.write(tmp_path, _trace(units_per_step=10), now=1.0))
    step_times = sorted((s["step"], s["value"]) for s in got if s["tag"] == "step_time_us")
    assert step_times == [(20, pytest.approx(0.2)), (30, pytest.approx(0.3))]
    assert ("loss/by_samples", 320) in {(s["tag"], s["step"]) for s in got}


def test_a_rerender_replaces_our_event_file_and_nothing_else(tmp_path):
    other = tmp_path / "events.out.tfevents.1.someone-else"
    other.write_bytes(b"")
    first = tensorboard.write(tmp_path, _trace(), now=1.0)
    second = tensorboard.write(tmp_path, _trace(), now=2.0)
    assert not first.exists() and second.exists() and other.exists()


def test_writing_scalars_never_imports_tensorflow(tmp_path):
    code = (
        "import sys; from pathlib import Path; from tests.test_tensorboard import _trace; "
        "from profiler.analysis import attribution; from profiler.reports import tensorboard; "
        f"tensorboard.write(Path({str(tmp_path)!r}), _trace(), attribution.attribute(_trace())); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; print('ok')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    assert list(tmp_path.glob("events.out.tfevents.*"))


# --- a real TensorBoard ----------------------------------------------------------------------

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
#: Every tag of the shared run; the hooks phase's is written last, so with it the file is read.
_WANTED_TAGS = {
    "step_time_us",
    "loss/by_step",
    "loss/by_samples",
    "loss/by_updates",
    "phase_step_time_us/framework",
    "phase_step_time_us/hooks",
    *(f"time_by_category/{c}" for c in CATEGORIES),
}


def _get(base: str, route: str, **params: str) -> Any:
    url = f"{base}{route}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with _NO_PROXY.open(req, timeout=60) as resp:
        body = resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return json.loads(body)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def board(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A TensorBoard over the shared run's tensorboard/ folder; stopped by its PID after."""
    logdir = tf_run().run_dir / "tensorboard"
    port = _free_port()
    log = tmp_path_factory.mktemp("tensorboard") / "tensorboard.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                str(logdir),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--load_fast=false",
                "--reload_interval=1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=python_env(),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        runs: list[str] = []
        tags: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"TensorBoard exited: {log.read_text()[-2000:]}")
            try:
                runs = _get(base, "/data/plugin/profile/runs")
                tags = _get(base, "/data/plugin/scalars/tags")
            except OSError:
                runs, tags = [], {}
            if len(runs) >= 2 and all(
                set(tags.get(w, ())) >= _WANTED_TAGS for w in ("tf1_gd", "tf2_function_step")
            ):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"TensorBoard did not serve our runs: {runs} {list(tags)}")
        yield base, runs, tags
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _profile_run(runs: list[str], workload: str) -> str:
    mine = [r for r in runs if r.split("/")[0] == workload]
    assert len(mine) == 1, runs
    return mine[0]


@pytest.mark.tf
@pytest.mark.slow
def test_profile_plugin_lists_each_workload_as_its_own_run(board):
    _base, runs, _tags = board
    assert {r.split("/")[0] for r in runs} == {"tf1_gd", "tf2_function_step"}


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("workload", ["tf1_gd", "tf2_function_step"])
def test_overview_page_finds_our_step_markers(board, workload):
    base, runs, _tags = board
    run = _profile_run(runs, workload)
    tools = _get(base, "/data/plugin/profile/run_tools", run=run)
    assert "overview_page" in tools and any(t.startswith("trace_viewer") for t in tools)
    hosts = _get(base, "/data/plugin/profile/hosts", run=run, tag="overview_page")
    host = hosts[0]["hostname"]
    page = _get(base, "/data/plugin/profile/data", run=run, tag="overview_page", host=host)
    assert "No step marker observed" not in json.dumps(page)
    step_tables = [t for t in page if any(c.get("id") == "stepnum" for c in t.get("cols", []))]
    assert step_tables, "no step-time table in the overview page"
    names = [row["c"][0]["v"] for row in step_tables[0]["rows"]]
    assert len(names) >= FRAMEWORK_STEPS // 2
    assert all(str(n).startswith("train ") for n in names)


@pytest.mark.tf
@pytest.mark.slow
def test_trace_viewer_returns_our_events(board):
    base, runs, _tags = board
    run = _profile_run(runs, "tf1_gd")
    tools = _get(base, "/data/plugin/profile/run_tools", run=run)
    tag = next(t for t in tools if t.startswith("trace_viewer"))
    host = _get(base, "/data/plugin/profile/hosts", run=run, tag=tag)[0]["hostname"]
    trace = _get(base, "/data/plugin/profile/data", run=run, tag=tag, host=host)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "SessionRun" in names
    # XProf names each step by our marker and its step_num: every window step is there.
    fw = outcome("tf1_gd").trace.phase("framework")
    assert {f"train {s.index}" for s in fw.window.steps(outcome("tf1_gd").trace.work)} <= names


@pytest.mark.tf
@pytest.mark.slow
def test_scalars_plugin_lists_our_tags_and_points(board):
    base, _runs, tags = board
    for workload in ("tf1_gd", "tf2_function_step"):
        assert set(tags[workload]) == _WANTED_TAGS
    points = _get(base, "/data/plugin/scalars/scalars", run="tf1_gd", tag="step_time_us")
    assert len(points) == TIMED_STEPS
    assert all(p[2] > 0 for p in points)
    # Time by category: at every step the six categories add up to the step time.
    by_cat = {
        c: _get(base, "/data/plugin/scalars/scalars", run="tf1_gd", tag=f"time_by_category/{c}")
        for c in CATEGORIES
    }
    step_time = {p[1]: p[2] for p in points}
    for i, (_wall, step, _value) in enumerate(by_cat["compute"]):
        total = sum(by_cat[c][i][2] for c in by_cat)
        assert total == pytest.approx(step_time[step], rel=1e-4)
    assert sum(p[2] for p in by_cat["compute"]) > 0


def test_make_tensorboard_serves_the_latest_run_on_loopback():
    out = subprocess.run(
        ["make", "-n", "tensorboard", "PORT=7123"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    line = next(ln for ln in out.splitlines() if "tensorboard.main" in ln)
    assert "--logdir runs/latest/tensorboard" in line
    assert "--host 127.0.0.1" in line and "--port 7123" in line
    assert Path(REPO / "README.md").read_text().count("make tensorboard") >= 1
