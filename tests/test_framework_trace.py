"""Framework-trace phase on real TensorFlow runs: steps, kernel time, op tables, broken captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler.model import FAILED, OK
from tests import tf_capture
from tests.tf_capture import FRAMEWORK_STEPS, FULL_TRACE_STEPS, outcome, tf_run

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _framework(name: str):  # type: ignore[no-untyped-def]
    o = outcome(name)
    record = o.trace.phase("framework")
    assert record is not None and record.status == OK, record.reason if record else "missing"
    return o, record


@pytest.mark.parametrize("name", tf_capture.WORKLOADS)
def test_one_step_span_per_window_step(name):
    _o, fw = _framework(name)
    window_steps = [s.index for s in fw.window.steps(_o.trace.work)]
    assert len(window_steps) == FRAMEWORK_STEPS
    step_spans = [s for s in fw.spans if s.name == "step"]
    assert [s.step for s in step_spans] == window_steps
    assert list(fw.data.steps.step) == window_steps
    assert fw.data.missing_steps == ()


@pytest.mark.parametrize("name", tf_capture.WORKLOADS)
def test_kernel_time_per_step_is_positive_and_below_the_step(name):
    _o, fw = _framework(name)
    cols = fw.data.steps
    for union, total, wall in zip(
        cols.kernel_union_ns, cols.kernel_sum_ns, cols.wall_ns, strict=True
    ):
        assert 0 <= union <= total
        assert union < wall
    # TensorFlow traces only the kernels it deems expensive at host level 2, and re-measures
    # that per kernel as it runs: on a loaded machine a step's few kernels can all be cheap
    # for a step, and then none is traced. Nearly every step still shows its kernels.
    with_kernels = sum(1 for u in cols.kernel_union_ns if u > 0)
    assert with_kernels >= 0.9 * len(cols.kernel_union_ns), cols.kernel_union_ns
    med = fw.data.median_ns
    assert 0 < med.run_call_ns < med.wall_ns
    assert med.executor_ns > 0


@pytest.mark.parametrize("name", tf_capture.WORKLOADS)
def test_spans_line_up_with_the_window_steps(name):
    o, fw = _framework(name)
    bounds = {s.index: (s.start_ns, s.end_ns) for s in fw.window.steps(o.trace.work)}
    # Markers sit inside their steps on both clocks: the offset is pinned to well under 1 ms.
    assert 0 <= fw.data.clock.uncertainty_ns < 1_000_000
    for span in fw.spans:
        start, end = bounds[span.step]
        assert start <= span.start_ns <= end, span
        if span.name == "step":
            assert span.start_ns + span.dur_ns <= end


@pytest.mark.parametrize("name", tf_capture.WORKLOADS)
def test_capture_is_a_tensorboard_run_of_its_own(name):
    o, fw = _framework(name)
    run_dir = tf_run().run_dir
    xplane = run_dir / fw.data.profiler.xplane
    assert xplane.is_file() and xplane.stat().st_size == fw.data.profiler.xplane_bytes
    assert xplane.parent.parent.parent.parent == run_dir / "tensorboard" / o.slug
    assert xplane.name.endswith(".xplane.pb")
    wdir = run_dir / "workloads" / o.slug
    assert (wdir / fw.artefacts[0]).resolve() == xplane.resolve()


def test_capture_inflation_is_measured_and_recorded():
    doc = json.loads((tf_run().run_dir / "summary.json").read_text())
    for w in doc["workloads"]:
        phase = next(p for p in w["phases"] if p["name"] == "framework")
        assert phase["inflation"] is not None and phase["inflation"] > 0
        assert phase["data"]["profiler"]["stop_ns"] > 0


def test_tf1_top_op_and_share_match_the_raw_step_stats():
    from tensorflow.core.protobuf import config_pb2

    o, fw = _framework("tf1_gd")
    table = fw.data.op_table
    assert table.source == "step_stats" and table.steps == FULL_TRACE_STEPS
    files = fw.data.full_trace.run_metadata
    assert len(files) == FULL_TRACE_STEPS
    wdir = tf_run().run_dir / "workloads" / o.slug
    # Recomputed from the saved protos, independently of the collector.
    totals: dict[str, int] = {}
    for rel in files:
        md = config_pb2.RunMetadata.FromString((wdir / rel).read_bytes())
        for dev in md.step_stats.dev_stats:
            for node in dev.node_stats:
                op_ns = node.op_end_rel_nanos - node.op_start_rel_nanos
                totals[node.node_name] = totals.get(node.node_name, 0) + op_ns
    top = max(totals, key=lambda k: (totals[k], k))
    assert table.top_op == top
    assert table.top_share == pytest.approx(totals[top] / sum(totals.values()), abs=1e-6)
    assert table.kernel_ns == sum(totals.values())
    # FULL_TRACE steps ran outside the window, and the capture's own table is kept beside it.
    assert fw.data.full_trace.first_step > max(s.step for s in fw.spans)
    assert fw.data.xplane_op_table.source == "xplane"


def test_tf2_op_table_comes_from_the_capture():
    _o, fw = _framework("tf2_function_step")
    table = fw.data.op_table
    assert table.source == "xplane" and table.steps == FRAMEWORK_STEPS
    assert table.rows and sum(r.share for r in table.rows) == pytest.approx(1, abs=1e-4)
    assert table.top_op == table.rows[0].op
    assert fw.data.full_trace is None
    assert fw.data.median_ns.function_call_ns > fw.data.median_ns.run_call_ns > 0


def test_numpy_workloads_are_skipped_with_a_reason():
    from profiler.capture.phases import registry
    from profiler.workloads import get

    for phase in ("framework", "hooks"):
        reason = registry.make(phase, {}).applies_to(get("numpy_gd"))
        assert reason and reason.startswith("numpy workload: no TensorFlow")
        assert registry.make(phase, {}).applies_to(get("tf1_gd")) is None


def test_corrupt_capture_fails_the_phase_by_name_and_the_report_is_still_written(
    tmp_path, monkeypatch
):
    from profiler.analysis.run import analyse
    from profiler.capture.phases import framework, registry
    from profiler.capture.worker import run_workload
    from profiler.processes import env
    from profiler.processes.pipeline import write_outputs
    from profiler.processes.runner import WorkloadOutcome
    from profiler.reports import artefacts, summary
    from profiler.workloads import get

    real_stop = framework._stop_profiler
    corrupted: list[Path] = []

    def stop_then_truncate() -> None:
        real_stop()
        for path in sorted(tmp_path.glob("tensorboard/w/plugins/profile/*/*.xplane.pb")):
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 3])
            corrupted.append(path)

    monkeypatch.setattr(framework, "_stop_profiler", stop_then_truncate)
    spec = get("tf1_gd")
    params = spec.defaults.with_(steps=50)
    phases = [
        registry.make("timed", {}),
        registry.make("framework", {"full_trace_steps": 3}, steps=20),
        registry.make("hooks", {}, steps=50),
    ]
    wdir, tbdir = tmp_path / "workloads" / "w", tmp_path / "tensorboard" / "w"
    wdir.mkdir(parents=True)
    trace = run_workload(
        spec, params, phases, workload_dir=wdir, tensorboard_dir=tbdir, warmup_steps=20
    )
    assert len(corrupted) == 1
    fw = trace.phase("framework")
    assert fw.status == FAILED
    assert fw.reason.startswith(str(corrupted[0])) and "\n" not in fw.reason
    assert fw.data.op_table.source == "step_stats"  # what was measured is kept
    assert trace.phase("hooks").status == OK and trace.status == OK

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    o = WorkloadOutcome(spec, "w", "ok", trace, params=params)
    analysis = analyse([o])
    written, problems = artefacts.write_all(run_dir, analysis.workloads)
    assert problems == {}
    info = summary.RunInfo(run_id="20260101-000000", phases=["timed", "framework", "hooks"])
    write_outputs(run_dir, summary.build(info, analysis, env.capture(), written))
    # The report names the broken capture (its folder; the host name in the file's name is
    # hidden, as every host name is in reports).
    page = (run_dir / "report.html").read_text()
    assert f"{corrupted[0].parent.name}/&lt;host&gt;.xplane.pb" in page
    assert (run_dir / "workloads" / "w" / "trace.json.gz").is_file()
