"""Experiments: alternating blocks, resolution, robust bounded fits, crossover, the summary."""

from __future__ import annotations

import pytest

from profiler.analysis.experiments import (
    Measured,
    Verdict,
    block_medians,
    crossover,
    fit_bounded,
    measured,
    resolution_ns,
    summarize,
    theil_sen,
)
from profiler.clock import FakeClock
from profiler.workloads.casestudy import CROSSOVER, PAIRS


def test_blocks_alternate_and_divide_units_into_steps():
    clock = FakeClock()
    order: list[str] = []

    def runner(name: str, unit_ns: int):
        def run(n, marks, clk):
            order.append(name)
            for _ in range(n):
                clock.advance(unit_ns)
                marks.append(clk())

        return run

    a, b = runner("a", 200), runner("b", 1000)
    out = block_medians([a, b], [1, 10], blocks=4, steps_per_block=[3, 2], clock=clock)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert out[0] == [200] * 12
    # b runs 10 training steps per unit: 1,000 ns a unit is 100 ns a step.
    assert out[1] == [100] * 8


def test_resolution_shrinks_with_more_steps_and_is_zero_noise_floor_one():
    noisy = [100, 110, 90, 105, 95] * 20
    assert resolution_ns(noisy, noisy) > resolution_ns(noisy * 16, noisy * 16)
    assert resolution_ns([5] * 10, [5] * 10) == 1
    m = measured([300] * 9, [100] * 9)
    assert (m.baseline_ns, m.variant_ns, m.saving_ns) == (300, 100, 200)


def test_verdict_tolerance_is_max_of_relative_and_absolute():
    assert Verdict(predicted_ns=120_000, measured_ns=100_000, resolution_ns=10).within()
    assert not Verdict(predicted_ns=130_000, measured_ns=100_000, resolution_ns=10).within()
    # Small savings: 3 µs absolute tolerance.
    assert Verdict(4_000, 1_500, 10).within()
    assert Verdict(1_000, 1_500, 2_000).below_resolution
    assert Verdict(130, 100, 1).relative_error == pytest.approx(0.3)


def test_theil_sen_ignores_one_outlier():
    ns = [1, 2, 3, 4, 5, 6]
    ts = [10 + 2 * n for n in ns]
    ts[2] = 1000
    a, b = theil_sen(ns, ts)
    assert (a, b) == pytest.approx((10, 2))


def test_bounded_fit_stops_where_the_line_bends():
    sizes = [10, 100, 1_000, 10_000, 100_000]
    # 8 µs + 3 ns/sample up to 1e4, then 8 ns/sample past the cache.
    times = [8_000 + 3 * n for n in sizes[:4]] + [8_000 + 8 * 100_000]
    fit = fit_bounded(sizes, times)
    assert (fit.n_min, fit.n_max) == (10, 10_000)
    assert fit.a_ns == pytest.approx(8_000)
    assert fit.b_ns == pytest.approx(3)
    straight = fit_bounded(sizes, [180_000 + 17 * n for n in sizes])
    assert straight.n_max == 100_000 and straight.b_ns == pytest.approx(17)


def test_crossover_exists_only_when_the_slow_start_has_the_lower_slope():
    tf = fit_bounded([10, 100, 1000], [180_000 + 2 * n for n in (10, 100, 1000)])
    np_ = fit_bounded([10, 100, 1000], [8_000 + 10 * n for n in (10, 100, 1000)])
    assert crossover(tf, np_) == pytest.approx(172_000 / 8)
    assert crossover(np_, tf) is None


def test_every_pair_is_declared_with_known_categories():
    from profiler.model import CATEGORIES

    assert len({p.id for p in PAIRS}) == len({p.name for p in PAIRS}) == len(PAIRS)
    for p in PAIRS:
        assert p.removes, p.name
        assert all(r.category in CATEGORIES for r in p.removes)
        assert p.baseline != p.variant


def test_summary_section_reports_prediction_error_and_resolution():
    raw = {
        "status": "ok",
        "error": "",
        "pairs": [
            {
                "id": "nofeed",
                "name": "data in the graph",
                "baseline": "tf1_gd",
                "variant": "tf1_gd_nofeed",
                "status": "ok",
                "error": "",
                "baseline_ns": 200_000,
                "variant_ns": 120_000,
                "resolution_ns": 1_000,
                "steps": [100, 100],
            },
            {
                "id": "f32feed",
                "name": "feed float32",
                "baseline": "tf1_gd",
                "variant": "tf1_gd_f32feed",
                "status": "ok",
                "error": "",
                "baseline_ns": 200_000,
                "variant_ns": 199_500,
                "resolution_ns": 1_000,
                "steps": [100, 100],
            },
        ],
        "sweep": {
            "numpy_gd": {
                "status": "ok",
                "error": "",
                "sizes": [10, 100, 1000],
                "median_ns": [8_030, 8_300, 11_000],
            },
            "tf1_gd": {
                "status": "ok",
                "error": "",
                "sizes": [10, 100, 1000],
                "median_ns": [180_170, 181_700, 197_000],
            },
        },
    }

    def predict(baseline, removes):
        assert baseline == "tf1_gd"
        return {("feed_fetch.feed",): 90_000, ("feed_fetch.cast",): 1_500}[removes]

    out = summarize(raw, PAIRS, predict, CROSSOVER)
    feed, cast = out["pairs"]
    assert feed["measured_saving_us"] == 80.0
    assert feed["predicted_saving_us"] == 90.0
    assert feed["error_us"] == 10.0 and feed["within_goal"] is True
    assert cast["below_resolution"] is True
    assert out["sweep"]["numpy_gd"]["fit"]["b_ns_per_sample"] == pytest.approx(3)
    assert out["crossover"]["n"] is None
    assert "never cross" in out["crossover"]["note"]
    assert isinstance(Measured(1, 1, 1).saving_ns, int)


def _noisy_runner(clock: FakeClock, unit_ns: int, noise: list[int], blocks: list[int]):
    """A runner whose every step takes ``unit_ns`` plus the next of ``noise`` (cycled), and
    that counts its blocks."""
    state = {"i": 0}

    def run(n, marks, clk):
        blocks.append(n)
        for _ in range(n):
            clock.advance(unit_ns + noise[state["i"] % len(noise)])
            state["i"] += 1
            marks.append(clk())

    return run


def test_a_pair_with_a_steady_saving_stops_at_the_fewest_block_pairs():
    from profiler.model import blocks as blk

    clock = FakeClock()
    seen_a: list[int] = []
    seen_b: list[int] = []
    a = _noisy_runner(clock, 1_000, [0], seen_a)
    b = _noisy_runner(clock, 600, [0], seen_b)
    out = blk.sized_pairs((a, b), (1, 1), (20, 20), clock)
    assert out.pairs == blk.MIN_PAIRS and len(seen_a) == len(seen_b) == blk.MIN_PAIRS
    mean, low, high = out.interval_ns()
    assert mean == low == high == 400


def test_a_pair_whose_blocks_drift_gets_more_block_pairs_within_its_budget():
    from profiler.model import blocks as blk

    clock = FakeClock()
    seen: list[int] = []
    # Block medians that move by 40% from block to block: the interval stays wide.
    a = _noisy_runner(clock, 1_000, [0] * 10 + [400] * 10 + [-300] * 10, seen)
    b = _noisy_runner(clock, 950, [200] * 10 + [-200] * 10, [])
    out = blk.sized_pairs((a, b), (1, 1), (10, 10), clock)
    assert blk.MIN_PAIRS < out.pairs <= blk.MAX_PAIRS
    # A budget of 1 µs of blocks stops it after the fewest pairs.
    clock2 = FakeClock()
    a2 = _noisy_runner(clock2, 1_000, [0] * 10 + [400] * 10 + [-300] * 10, [])
    b2 = _noisy_runner(clock2, 950, [200] * 10 + [-200] * 10, [])
    assert blk.sized_pairs((a2, b2), (1, 1), (10, 10), clock2, max_s=1e-6).pairs == blk.MIN_PAIRS


def test_a_pair_verdict_follows_its_interval():
    base = {
        "id": "x",
        "name": "feed",
        "baseline": "tf1_gd",
        "variant": "tf1_gd_nofeed",
        "status": "ok",
        "error": "",
        "baseline_ns": 200_000,
        "resolution_ns": 2_000,
        "steps": [100, 100],
        "pairs": 5,
    }
    pair = next(p for p in PAIRS if p.baseline == "tf1_gd")
    cases = {
        # a saving of ~0 whose interval spans zero: inconclusive, never "N µs more per step"
        "inconclusive": {"variant_ns": 199_000, "interval_ns": [-9_000, 11_000]},
        "holds": {"variant_ns": 110_000, "interval_ns": [85_000, 95_000]},
        "misses": {"variant_ns": 150_000, "interval_ns": [45_000, 55_000]},
        "slower": {"variant_ns": 230_000, "interval_ns": [-35_000, -25_000]},
    }
    for verdict, extra in cases.items():
        raw = {"pairs": [{**base, "id": pair.id, **extra}], "sweep": {}}
        (row,) = summarize(raw, PAIRS, lambda _b, _r: 90_000)["pairs"]
        assert row["verdict"] == verdict, (verdict, row)
        assert row["pairs"] == 5 and row["interval_us"] == [v / 1e3 for v in extra["interval_ns"]]
    # An older run's pair (no block pairs recorded): the goal decides, no interval.
    old = {k: v for k, v in base.items() if k != "pairs"}
    raw = {"pairs": [{**old, "id": pair.id, "variant_ns": 110_000}], "sweep": {}}
    (row,) = summarize(raw, PAIRS, lambda _b, _r: 90_000)["pairs"]
    assert row["verdict"] == "holds" and row["pairs"] is None and row["interval_us"] is None
