"""Training efficiency: exact work counters, logging excluded, curves, crossings and causes."""

from __future__ import annotations

import inspect
import itertools
import json
import math
import time
from typing import Any

import numpy as np
import pytest

from profiler import workloads
from profiler.analysis import efficiency, efficiency_pairs
from profiler.analysis.efficiency import (
    Cause,
    Impl,
    Run,
    Targets,
    bias_multiplier,
    first_reached,
    lr_factor,
    schedule,
    spread,
    stays_below,
    value_at,
)
from profiler.analysis.run import analyse
from profiler.capture.efficiency import EfficiencySpec, noise_floor, run, run_keras, run_numpy
from profiler.clock import FakeClock
from profiler.processes import pipeline
from profiler.processes.runner import RunOptions
from profiler.reports import summary
from profiler.workloads import adam_handwritten, casestudy, seed004
from profiler.workloads.base import Params

# --- pure pieces, by hand ---------------------------------------------------------------------


def test_schedule_is_batch_multiples_with_the_extras_ending_at_the_budget():
    points = schedule(4160, 20, 32, extra=[1000, 3200, 99_999])
    assert points == sorted(set(points)) and points[0] == 32 and points[-1] == 4160
    assert all(p % 32 == 0 for p in points)
    assert 1024 in points and 3200 in points  # extras rounded up to the batch; beyond: dropped
    assert len(points) <= 22
    assert schedule(100, 5, 32) == [32, 64, 96, 128]  # the budget rounds up to whole batches


def test_crossings_value_at_and_spread_by_hand():
    excess = [5.0, 0.2, 0.09, 0.12, 0.08, 0.05]
    assert first_reached(excess, 0.1) == 2
    assert stays_below(excess, 0.1) == 4
    assert first_reached(excess, 0.01) is None and stays_below(excess, 0.01) is None
    assert stays_below([0.2, 0.05], 0.1) == 1 and stays_below([0.05, 0.2], 0.1) is None
    xs = [0.0, 10.0, 20.0]
    assert value_at(xs, ["a", "b", "c"], 10) == "b" and value_at(xs, ["a", "b", "c"], 19) == "b"
    assert value_at(xs, ["a", "b", "c"], 21) is None
    assert spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "reached": 3, "of": 3}
    # Not reached counts as +inf: the median survives one miss out of three, the max does not.
    assert spread([3.0, None, 2.0]) == {
        "median": 3.0,
        "min": 2.0,
        "max": None,
        "reached": 2,
        "of": 3,
    }
    assert spread([None, None, 1.0])["median"] is None


def test_bias_multiplier_matches_its_formula():
    b1, b2 = efficiency.BETA1, efficiency.BETA2
    for t in (1, 4, 31, 100, 5000):
        assert lr_factor(t) == pytest.approx(math.sqrt(1 - b2**t) / (1 - b1**t), rel=1e-15)
    assert bias_multiplier(100, 100) == 1.0
    # The seed's counter is its epoch count t + 1 after 32 t updates (measured: 0.53, 0.23).
    assert bias_multiplier(4, 128) == pytest.approx(0.530, abs=0.001)
    assert bias_multiplier(31, 992) == pytest.approx(0.229, abs=0.001)
    with pytest.raises(ValueError):
        lr_factor(0)


def test_bias_multiplier_is_the_ratio_of_the_seeds_step_to_the_correct_one():
    """In the seed's own loop: the step it takes (epoch-keyed) over the step Adam would take
    with the true update count, from the same moments, is ``bias_multiplier``."""
    loop = workloads.get("adam_handwritten").build(Params(steps=1, n=4160, seed=2))
    a, eps = adam_handwritten.ALPHA, adam_handwritten.EPSILON
    b1, b2 = adam_handwritten.BETA1, adam_handwritten.BETA2
    for updates in (5 * 32 + 1, 40 * 32 + 7):
        loop.run(updates - 1 - loop.steps_done, [], time.perf_counter_ns)
        w0 = loop.params()["w"]
        loop.run(1, [], time.perf_counter_ns)
        state = inspect.getgeneratorlocals(loop.probes["generator"])
        taken = loop.params()["w"] - w0
        mw, vw, counter = state["mw"], state["vw"], loop.probes["optimizer_step"]()
        assert counter == 1 + (updates - 1) // 32
        right = -(a * mw / (1 - b1**updates)) / (math.sqrt(vw / (1 - b2**updates)) + eps)
        assert taken / right == pytest.approx(bias_multiplier(counter, updates), rel=1e-4)


def test_noise_floor_is_the_least_squares_mse():
    x, y = seed004.data(4160, 0)
    w, b = np.polyfit(x, y, 1)
    assert noise_floor(x, y) == pytest.approx(float(np.mean((y - w * x - b) ** 2)), rel=1e-12)
    assert 0.9 < noise_floor(x, y) < 1.1  # the data's N(0, 1) noise


# --- exact counters on tiny deterministic runs ------------------------------------------------


def test_handwritten_sees_exactly_the_samples_its_code_draws():
    # n = 64, batch 32: sw = int(64 / 32) - 1 = 1, a fresh draw every epoch.
    n, seed, epochs = 64, 3, 20
    loop = workloads.get("adam_handwritten").build(Params(steps=1, n=n, seed=seed))
    out = run_numpy(loop, n, [32 * k for k in range(1, epochs + 1)], time.perf_counter_ns)
    c = out["checkpoints"]
    rs = np.random.RandomState(seed)
    drawn = [rs.randint(0, n, 32) for _ in range(epochs)]
    assert c["samples"] == c["updates"] == [32 * k for k in range(epochs + 1)]
    assert c["epochs"] == [float(k) for k in range(epochs + 1)]
    assert c["counter"] == list(range(epochs + 1))  # the seed's t + 1: one per epoch
    union: set[int] = set()
    for k in range(1, epochs + 1):
        union |= set(drawn[k - 1].tolist())
        assert c["distinct"][k] == len(union), k
        assert c["distinct_epoch"][k] == len(set(drawn[k - 1].tolist())), k
    assert c["distinct"][0] == 0 and c["loss"][0] == pytest.approx(
        float(np.mean(seed004.data(n, seed)[1] ** 2))
    )
    assert c["loss"][-1] == loop.loss()
    assert out["reuse"] == {"1": epochs - 1}  # each batch one pass; the last one still in use


def test_stale_batch_reuse_is_counted_in_passes():
    loop = workloads.get("adam_handwritten").build(Params(steps=1, n=4160, seed=1))
    out = run_numpy(loop, 4160, [32 * 300], time.perf_counter_ns)
    # Draws at epochs 0 and 129 complete their 129 passes; the draw at 258 is still in use.
    assert out["reuse"] == {"129": 2}
    assert out["checkpoints"]["distinct"][-1] <= 3 * 32
    assert out["checkpoints"]["counter"][-1] == 300


def test_minibatch_counts_permutations_per_epoch():
    n = 64  # two batches an epoch
    loop = workloads.get("adam_minibatch").build(Params(steps=1, n=n, seed=0))
    out = run_numpy(loop, n, [32 * k for k in range(1, 7)], time.perf_counter_ns)
    c = out["checkpoints"]
    assert c["updates"] == c["counter"] == list(range(7))
    assert c["epochs"] == [k / 2 for k in range(7)]
    assert c["distinct"] == [0, 32, 64, 64, 64, 64, 64]
    assert c["distinct_epoch"] == [0, 32, 64, 32, 64, 32, 64]


def test_wall_axis_excludes_logging_and_the_first_update():
    clock = FakeClock()
    loop = workloads.get("adam_minibatch").build(Params(steps=1, n=128, seed=0))
    step, loss = loop.step, loop.eval_loss

    def slow_step() -> None:
        clock.advance(1_000)
        step()

    def slow_loss(p: dict[str, float]) -> float:
        clock.advance(10**9)  # logging is very expensive here
        return loss(p)

    loop.step, loop.eval_loss = slow_step, slow_loss
    out = run_numpy(loop, 128, [64, 256, 512], clock)
    c = out["checkpoints"]
    # 1 µs per update, from the end of the first update; the 4 loss evaluations are not there.
    assert c["wall_ns"] == [0, 1_000, 7_000, 15_000]
    assert out["first_update_ns"] == 1_000
    assert out["log_ns"] == 4 * 10**9


# --- analysis of whole runs -------------------------------------------------------------------


WORK = {
    "samples_per_step": 1,
    "updates_per_step": 1,
    "steps_per_epoch": 10,
    "flops_per_step": 10,
    "batch_size": 1,
}


def _raw_run(seed: int, loss: list[float], floor: float = 1.0, per_update: int = 1) -> dict:
    """A hand-made run: checkpoints every 10 samples, ``per_update`` samples an update."""
    k = len(loss)
    samples = [10 * i for i in range(k)]
    return {
        "seed": seed,
        "status": "ok",
        "floor": floor,
        "checkpoints": {
            "samples": samples,
            "updates": [s // per_update for s in samples],
            "epochs": [s / 10 for s in samples],
            "counter": [s // per_update for s in samples],
            "distinct": samples,
            "distinct_epoch": [10 if s else 0 for s in samples],
            "wall_ns": [1000 * s for s in samples],
            "loss": loss,
        },
    }


def _impl(name: str, runs: list[dict], per_update: int = 1) -> Impl:
    work = {**WORK, "samples_per_step": per_update}
    return Impl(name, "numpy", tuple(Run.from_raw(r) for r in runs), work, "zeros", "none", 40)


def test_cause_contribution_by_hand():
    # present: excess 4, 2, 1, 0.5, 0.5; removed: 4, 1, 0.25, 0.05, 0.01 (floor 1).
    p = _impl("p", [_raw_run(0, [5, 3, 2, 1.5, 1.5]), _raw_run(1, [5, 3, 2, 1.5, 1.5])])
    r = _impl("r", [_raw_run(0, [5, 2, 1.25, 1.05, 1.01]), _raw_run(1, [5, 2, 1.25, 1.05, 1.01])])
    cause = Cause("c", "a cause", "p", "r")
    t = Targets(n=40, ref_samples=20, ref_updates=10, target_excess=0.1)
    row = efficiency_pairs.cause_contribution(cause, {"p": p, "r": r}, t)
    assert row["at_samples"]["ratio"] == pytest.approx(4.0)  # 1 / 0.25
    assert row["at_updates"]["ratio"] == pytest.approx(2.0)  # 2 / 1
    assert row["floor"]["x"] == 40 and row["floor"]["ratio"] == pytest.approx(50.0)
    assert row["samples_to_target"] == {"present": None, "removed": 30.0, "ratio": None}
    missing = efficiency_pairs.cause_contribution(cause, {"p": p}, t)
    assert missing["status"].startswith("not measured") and missing["at_samples"] is None


def test_run_rejects_an_axis_going_backwards_and_summary_marks_it_failed():
    bad = _raw_run(1, [5, 4, 3])
    bad["checkpoints"]["samples"] = [0, 20, 10]
    with pytest.raises(efficiency.EfficiencyError, match="backwards"):
        Run.from_raw(bad)
    raw = {
        "spec": {"n": 40, "seeds": [0, 1]},
        "runs": {
            "adam_minibatch": {
                "framework": "numpy",
                "budget_samples": 40,
                "initializer": "zeros",
                "work": WORK,
                "seeds": [_raw_run(0, [5, 4, 3]), bad],
            }
        },
    }
    sec = efficiency_pairs.summarize(raw, casestudy.EFFICIENCY)
    (impl,) = sec["implementations"]
    assert impl["status"] == "partial" and "backwards" in impl["errors"][0]
    assert impl["seeds"] == [0]


# --- real runs through the process's code -----------------------------------------------------

NUMPY_SPEC = {
    "implementations": ["adam_handwritten", "adam_globalstep", "adam_meanbatch", "adam_minibatch"],
    "seeds": [0, 1, 2],
    "budgets": {"numpy": 8_320},
    "points": 40,
}


@pytest.fixture(scope="module")
def numpy_raw(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("eff")
    raw = run(EfficiencySpec(out_dir=str(out), **NUMPY_SPEC))  # type: ignore[arg-type]
    raw.update(status="ok", error="")
    assert json.loads((out / "efficiency.json").read_text())["runs"].keys() == raw["runs"].keys()
    return raw


def _monotone(xs: list[float], strict: bool = False) -> bool:
    return all((a < b) if strict else (a <= b) for a, b in itertools.pairwise(xs))


def assert_curves_monotone_and_end_at_totals(section: dict[str, Any]) -> None:
    for impl in section["implementations"]:
        c, w = impl["curve"], impl["work"]
        assert _monotone(c["samples"], strict=True), impl["name"]
        for axis in ("updates", "epochs", "wall_ms", "counter", "distinct"):
            assert _monotone(c[axis]), (impl["name"], axis)
        assert c["samples"][0] == 0 and c["updates"][0] == 0 and c["wall_ms"][0] == 0
        assert c["samples"][-1] == w["samples"] == impl["budget_samples"]
        assert c["updates"][-1] == w["updates"] and c["epochs"][-1] == w["epochs"]
        assert c["counter"][-1] == w["optimizer_counter"]
        assert c["distinct"][-1] == w["distinct"]["median"]
        assert len({len(v) for v in c.values()}) == 1


def test_curves_are_monotone_in_x_and_end_at_the_run_totals(numpy_raw):
    sec = efficiency_pairs.summarize(numpy_raw, casestudy.EFFICIENCY)
    assert_curves_monotone_and_end_at_totals(sec)
    by = {i["name"]: i for i in sec["implementations"]}
    hand, mini = by["adam_handwritten"], by["adam_minibatch"]
    assert hand["work"]["samples"] == hand["work"]["updates"] == 8_320
    assert hand["work"]["epochs"] == 260 and hand["work"]["optimizer_counter"] == 260
    assert mini["work"]["updates"] == mini["work"]["optimizer_counter"] == 260
    assert mini["work"]["coverage"]["median"] == 1.0
    assert hand["work"]["reuse_passes"] == 129
    # The seed's counter is its epoch count: the multiplier at every checkpoint (epoch ends)
    # is the formula's at t = epochs, updates = 32 epochs. Counter 1 after 32 updates
    # over-corrects (×1.72); from counter 3 on the steps are shrunk.
    c = hand["curve"]
    for k, (counter, updates) in enumerate(zip(c["counter"], c["updates"], strict=True)):
        if k:
            assert counter == updates // 32
            assert c["bias_multiplier"][k] == pytest.approx(
                bias_multiplier(counter, updates), rel=1e-4
            )
    assert c["bias_multiplier"][1] == pytest.approx(1.72, abs=0.01)
    assert hand["step_size"]["smallest"]["multiplier"] == pytest.approx(0.23, abs=0.01)
    assert hand["step_size"]["smallest"]["counter"] == 27
    assert set(mini["curve"]["bias_multiplier"][1:]) == {1.0}
    assert sec["noise_floor"]["of"] == 3


def test_summary_section_validates_and_reaches_report_and_tensorboard(numpy_raw, tmp_path):
    from profiler.reports import html, tensorboard, viewmodel

    info = summary.RunInfo(run_id="20260101-000000", phases=[], finished=time.time())
    doc = json.loads(
        summary.dumps(summary.build(info, analyse([], None, numpy_raw), {}) | {"environment": _ENV})
    )
    summary.validate(doc)
    vm = viewmodel.build(doc)
    page = html.render(vm)
    assert '<section id="efficiency">' in page
    assert "adam_globalstep" in vm["efficiency"]["curves"]
    for row in vm["efficiency"]["causes"]:
        assert row["id"] in {c.id for c in casestudy.CAUSES}
    problems = pipeline.write_efficiency_scalars(tmp_path, doc)
    assert problems == []
    (path,) = (tmp_path / "tensorboard" / "adam_handwritten").glob("*profiler-efficiency")
    scalars = tensorboard.read(path)
    by_samples = [s for s in scalars if s["tag"] == tensorboard.EFF_LOSS_BY_SAMPLES]
    steps = [s["step"] for s in by_samples]
    assert steps == sorted(steps) and steps[-1] == 8_320


_ENV = {
    "python": "3",
    "cpu": {"model": "x", "count": 1, "usable": 1},
    "packages": {},
    "variables": {},
}


def test_run_efficiency_process_only_for_seed_004(tmp_path):
    hand = workloads.get("adam_handwritten")
    opts = RunOptions(workloads=[workloads.get("numpy_gd")], params={}, phases=[], progress=False)
    assert pipeline.run_efficiency(opts, tmp_path) is None
    opts.workloads = [hand]
    overrides = {**NUMPY_SPEC, "implementations": ["adam_handwritten"], "seeds": [0]}
    raw = pipeline.run_efficiency(opts, tmp_path, overrides)
    assert raw is not None and raw["status"] == "ok" and raw["wall_s"] > 0
    assert (tmp_path / "efficiency" / "efficiency.json").exists()
    assert raw["runs"]["adam_handwritten"]["seeds"][0]["status"] == "ok"


@pytest.mark.tf
def test_keras_counters_from_fit_and_its_printed_running_mean():
    n = 256  # 8 batches an epoch
    loop = workloads.get("keras_adam").build(Params(steps=1, n=n, seed=0))
    points = [32, 96, 256, 512, 640, 768]
    out = run_keras(loop, n, points, time.perf_counter_ns)
    c = out["checkpoints"]
    assert c["samples"] == [0, *points]
    assert c["updates"] == c["counter"] == [s // 32 for s in c["samples"]]
    assert c["epochs"] == [s / n for s in c["samples"]]
    assert c["distinct"] == [min(s, n) for s in c["samples"]]  # fit's permutation per epoch
    assert c["distinct_epoch"] == [0, 32, 96, 256, 256, 128, 256]
    assert _monotone(c["wall_ns"]) and c["wall_ns"][1] < c["wall_ns"][-1]
    printed = out["printed"]["per_epoch"]
    assert len(printed) == 3
    # The running mean over the epoch is not the loss at the epoch's end.
    assert all(
        p != pytest.approx(c["loss"][i], rel=1e-3) for p, i in zip(printed, (3, 4, 6), strict=True)
    )
    assert loop.probes["optimizer_step"]() == 24
