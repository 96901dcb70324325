"""The runner isolates workloads: one that raises or hangs is recorded and the rest runs."""

from __future__ import annotations

import json

import pytest

from profiler.processes import pipeline
from profiler.processes.runner import RunOptions
from profiler.reports import summary
from profiler.workloads.base import Params
from tests import fake_workloads as fw


def _opts(tmp_path, specs, timeout_s=60.0, steps=100):
    return RunOptions(
        workloads=specs,
        params={s.name: Params(steps=steps, n=8) for s in specs},
        phases=["timed"],
        out_root=tmp_path / "runs",
        timeout_s=timeout_s,
        warmup_steps=50,
        metric_points=4,
        progress=False,
    )


@pytest.mark.slow
def test_raising_hanging_and_unbuildable_workloads_are_isolated(tmp_path):
    specs = [fw.QUICK, fw.RAISES, fw.HANGS, fw.BUILD_FAILS, fw.EVIL]
    result = pipeline.execute(_opts(tmp_path, specs, timeout_s=8.0))
    by_name = {o.spec.name: o for o in result.outcomes}

    assert by_name["quick"].status == "ok"
    assert by_name[fw.EVIL.name].status == "ok"

    raised = by_name["raises"]
    assert raised.status == "failed"
    assert "boom: the loop broke at step 61" in raised.error
    # The warm-up (50 steps) finished before the failure: kept, and marked failed.
    assert raised.trace is not None and raised.trace.warmup.n_steps == 50
    assert raised.trace.status == "failed"

    hung = by_name["hangs"]
    assert hung.status == "timeout"
    assert "timed out after 8 s" in hung.error
    assert hung.returncode is None

    broke = by_name["build_fails"]
    assert broke.status == "failed" and broke.trace is None
    assert "ValueError: cannot build: no such model" in broke.error

    assert result.status == "failed"
    assert result.exit_status == pipeline.EXIT_WORKLOAD_FAILED
    # The run is complete (renamed, latest points at it) and its summary is valid.
    assert result.run_dir.name == result.run_id
    assert (tmp_path / "runs" / "latest").resolve() == result.run_dir.resolve()
    doc = json.loads((result.run_dir / "summary.json").read_text())
    summary.validate(doc)
    statuses = [w["status"] for w in doc["workloads"]]
    assert statuses == ["ok", "failed", "timeout", "failed", "ok"]
    assert not list((tmp_path / "runs").glob("*.partial"))


def test_quick_workload_summary_has_steady_state_and_trajectory(tmp_path):
    result = pipeline.execute(_opts(tmp_path, [fw.QUICK], steps=400))
    assert result.exit_status == 0
    (w,) = result.summary["workloads"]
    assert w["step_time"]["steps"] == 400
    assert 0 < w["step_time"]["p10_us"] <= w["step_time"]["median_us"] <= w["step_time"]["p90_us"]
    traj = w["loss"]["trajectory"]
    assert [p["step"] for p in traj] == [0, 150, 250, 350, 450]
    assert traj[-1]["samples"] == 450 * fw.WORK.samples_per_step
    assert w["loss"]["final"] == pytest.approx(0.99**450)
    assert w["counters"] == {"steps": 450, "samples": 3600, "updates": 450, "epochs": 112.5}
    assert w["marker"]["cost_ns"] > 0


def test_evil_name_gets_a_safe_slug(tmp_path):
    result = pipeline.execute(_opts(tmp_path, [fw.EVIL]))
    (w,) = result.summary["workloads"]
    assert w["name"] == fw.EVIL.name
    assert "/" not in w["slug"] and "<" not in w["slug"]
    assert (result.run_dir / "workloads" / w["slug"] / "model.json.gz").exists()
