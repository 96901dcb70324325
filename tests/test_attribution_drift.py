"""Drift and intervals: reference blocks, each window against its own neighbours, and every
share with its interval, on hand-built traces (numbers checked by hand)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from profiler.analysis import attribution, stats
from profiler.model import ReferenceBlock, Segment, WorkloadTrace
from profiler.reports import focus_view
from tests.test_attribution import FRAMEWORK, HOOKS, _sampled, _trace
from tests.test_rules import NP_STEP, NP_SUM, NUMPY_SO, nat


def _block(first: int, durations: list[int], after: str = "", before: str = "") -> ReferenceBlock:
    bounds = [5_000_000]
    for d in durations:
        bounds.append(bounds[-1] + d)
    return ReferenceBlock(Segment(first, tuple(bounds)), after, before)


def _with_blocks(trace: WorkloadTrace, *blocks: ReferenceBlock) -> WorkloadTrace:
    return replace(trace, references=blocks)


def test_median_interval_is_order_statistics_and_the_range_under_six_values() -> None:
    assert stats.median_interval([5, 1, 3]) == (3, 1, 5)
    values = list(range(100))
    med, lo, hi = stats.median_interval(values)
    # ranks 50 -/+ 0.98 * 10: the 40th and the 60th values.
    assert (med, lo, hi) == (49, 39, 59)


def test_drift_is_the_spread_of_the_uninstrumented_blocks_beyond_their_own_noise() -> None:
    # The timed window at 1,000 ns a step (steps 3-12); a block of 1,350 ns after the hooks
    # window (steps 100-104), one of 1,000 ns before it.
    trace = _with_blocks(
        _trace([1000] * 10, HOOKS),
        _block(90, [1000] * 6, "timed", "hooks"),
        _block(106, [1350] * 6, "hooks", ""),
    )
    d = stats.drift(trace)
    assert d is not None
    assert [b.label for b in d.blocks] == ["timed", "after timed", "after hooks"]
    assert d.ratio == pytest.approx(1.35)
    assert d.interval == (pytest.approx(1.35), pytest.approx(1.35))
    near = d.neighbours["hooks"]
    assert (near.before.first_step, near.after.first_step) == (90, 106)
    assert near.step_ns == (1000 + 1350) // 2
    # Noisy blocks: the lower end is what their own noise cannot explain.
    noisy = _with_blocks(
        _trace([1000] * 10, HOOKS),
        _block(90, [900, 1000, 1100], "timed", "hooks"),
        _block(106, [1000, 1100, 1200], "hooks", ""),
    )
    nd = stats.drift(noisy)
    assert nd is not None and nd.ratio == pytest.approx(1.1)
    assert nd.interval[0] == 1.0 and nd.interval[1] == pytest.approx(1200 / 900)


def test_blocks_of_another_run_of_the_script_are_not_drift() -> None:
    # A re-run marks its steps another way (a traced line): 1,500 ns there is no drift.
    trace = _with_blocks(
        _trace([1000] * 10, replace(HOOKS, repeat=1)),
        replace(_block(90, [1500] * 6, "", "hooks"), repeat=1),
        replace(_block(106, [1500] * 6, "hooks", ""), repeat=1),
    )
    d = stats.drift(trace)
    assert d is not None and d.ratio == 1.0 and d.repeat == 0
    assert d.neighbours["hooks"].step_ns == 1500
    assert d.speed_ratio(["hooks"]) == 1.0


def test_no_reference_blocks_no_drift() -> None:
    assert stats.drift(_trace([1000] * 10, HOOKS)) is None


def test_the_hooks_native_call_is_its_share_of_its_neighbours_step() -> None:
    # The hooks window's native call is 400 ns of its 800 ns (less the hooks' measured cost);
    # its neighbours ran 500 ns a step (the window's other 300 ns the hooks' cost beyond their
    # measured lower bound): 80% of a step, so 800 ns of the 1,000 ns timed step, not 400.
    trace = _with_blocks(
        _trace([1000] * 10, HOOKS, FRAMEWORK),
        _block(90, [500] * 6, "timed", "hooks"),
        _block(106, [500] * 6, "hooks", "framework"),
    )
    att = attribution.attribute(trace)
    assert att is not None
    native = att.typical["compute"] + att.typical["dispatch"]
    assert native == 800
    assert sum(att.typical.values()) == 1000
    assert any("share (80%) of the uninstrumented reference blocks" in n for n in att.notes)
    # Without the blocks the native call enters absolute.
    plain = attribution.attribute(_trace([1000] * 10, HOOKS, FRAMEWORK))
    assert plain is not None
    assert plain.typical["compute"] + plain.typical["dispatch"] == 400


@pytest.mark.parametrize("near", [2000, 300])
def test_neighbours_that_met_another_load_than_the_hooks_window_are_not_its_measure(
    near: int,
) -> None:
    # Neighbours slower than the window itself (2,000 ns against its 800: the hooks only add
    # time), or faster than its native call alone (300 against 400), ran under another load:
    # the native call is read from its own window, as without neighbours.
    trace = _with_blocks(
        _trace([1000] * 10, HOOKS, FRAMEWORK),
        _block(90, [near] * 6, "timed", "hooks"),
        _block(106, [near] * 6, "hooks", "framework"),
    )
    att = attribution.attribute(trace)
    assert att is not None
    assert att.typical["compute"] + att.typical["dispatch"] == 400
    assert sum(att.typical.values()) == 1000
    said = "slower than the window itself" if near > 800 else "faster than its native call"
    assert any(said in n and "met another load" in n for n in att.notes)
    assert not any("of the uninstrumented reference blocks beside" in n for n in att.notes)


def test_inflation_is_against_the_windows_own_neighbours() -> None:
    trace = _with_blocks(
        _trace([1000] * 10, HOOKS),
        _block(90, [450] * 6, "timed", "hooks"),
        _block(106, [450] * 6, "hooks", ""),
    )
    got = {i.phase: i.ratio for i in stats.inflation(trace, stats.drift(trace))}
    # The hooks window's 900 ns over its neighbours' 450 (not the timed 1,000).
    assert got["hooks"] == pytest.approx(2.0)


def _numpy_samples() -> tuple:
    compute = (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO), nat("DOUBLE_add", NUMPY_SO))
    dispatch = (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO))
    return compute, dispatch


def test_sampled_shares_carry_their_binomial_interval() -> None:
    compute, dispatch = _numpy_samples()
    rec = _sampled([(compute, 20), (dispatch, 50), (NP_STEP, 30)])
    att = attribution.attribute(_trace([2000] * 10, rec))
    assert att is not None
    # 50 of 100 samples: 1.96 * sqrt(0.25 / 100) = 0.098 each side.
    lo, hi = att.share_interval["dispatch"]
    assert (lo, hi) == (pytest.approx(0.402), pytest.approx(0.598))
    lo, hi = att.share_interval["python"]
    assert (lo, hi) == (
        pytest.approx(0.3 - 0.0898, abs=1e-4),
        pytest.approx(0.3 + 0.0898, abs=1e-4),
    )
    # Sampled without native frames: compute is not measured, and has no interval.
    assert "compute" not in att.share_interval
    assert att.drift_pts["dispatch"] == 0.0
    # Constant steps: the typical step's batch-means interval has no width.
    assert att.reference_interval_ns == (2000, 2000)


def test_drift_between_windows_widens_the_shares_taken_from_them() -> None:
    compute, dispatch = _numpy_samples()
    rec = _sampled([(compute, 20), (dispatch, 50), (NP_STEP, 30)])
    # The sampled window's neighbours ran 1.3x the timed window's step.
    trace = _with_blocks(
        _trace([2000] * 10, rec),
        _block(306, [2600] * 6, "sampled", ""),
    )
    att = attribution.attribute(trace)
    assert att is not None
    # s(1-s)(r-1) / (1 + min(s, 1-s)(r-1)) = 0.075 / 1.15 for dispatch, in quadrature with
    # the binomial 0.098.
    assert att.drift_pts["dispatch"] == 6.5
    half = (0.098**2 + (0.075 / 1.15) ** 2) ** 0.5
    assert att.share_interval["dispatch"][1] == pytest.approx(0.5 + half, abs=1e-4)


def test_the_typical_steps_interval_is_batch_means() -> None:
    # 100 steps: batches of 5 alternating 900/1100 means (1000 each): no spread between
    # batches of 5 in a row... a drifting window: first half 1000, second 1200.
    durations = [1000] * 50 + [1200] * 50
    lo, hi = attribution.reference_interval(durations, 1100)
    assert lo < 1100 < hi
    # Twenty batches, ten at 1000 and ten at 1200: sd 102.6, t(19) 2.093, half 48.0.
    assert hi - 1100 == pytest.approx(48, abs=1)


def _card(compute: float, pm: float, rule: str = "compute_bound") -> tuple[dict, dict]:
    split = [
        {
            "category": "compute",
            "label": "compute (kernels)",
            "us": 100.0 * compute,
            "share": compute,
            "measured": True,
            "interval": [compute - pm, compute + pm],
            "pm": 100 * pm,
        },
        {
            "category": "python",
            "label": "Python",
            "us": 100.0 * (1 - compute),
            "share": 1 - compute,
            "measured": True,
            "interval": [1 - compute - pm, 1 - compute + pm],
            "pm": 100 * pm,
        },
    ]
    split.sort(key=lambda r: -r["us"])
    card = {"split": split, "findings": [{"message": "m", "fix": "Do X. Then Y.", "rule": rule}]}
    return card, {"whatif": [], "phases": []}


def test_the_verdict_says_when_the_compute_share_straddles_a_threshold() -> None:
    card, w = _card(0.58, 0.06)
    text = focus_view._verdict(card, w)
    assert text.startswith("Verdict: compute (kernels) is 58% ±6 of the step")
    assert "compute- and overhead-bound are within the noise" in text
    assert "Do X" not in text
    assert focus_view.verdict_rule(card, w) == "within_noise"
    # The overhead-bound threshold (40% overhead) is the compute-bound one's complement: an
    # overhead-bound finding whose compute share reaches 60% is within the noise too ...
    card, w = _card(0.57, 0.05, "overhead_bound_session")
    assert focus_view.verdict_rule(card, w) == "within_noise"
    text = focus_view._verdict(card, w)
    assert "57% ±5 of the step: compute- and overhead-bound are within the noise" in text
    assert "Do X" not in text
    # ... and at 48% ±5 of kernels (52% overhead) it is clear of both.
    card, w = _card(0.48, 0.05, "overhead_bound_session")
    assert focus_view.verdict_rule(card, w) == "overhead_bound_session"


def test_a_verdict_clear_of_its_thresholds_quotes_the_finding() -> None:
    card, w = _card(0.75, 0.05)
    text = focus_view._verdict(card, w)
    assert text == ("Verdict: compute (kernels) is 75% ±5 of the step; do X.")
    assert focus_view.verdict_rule(card, w) == "compute_bound"
    card, w = _card(0.30, 0.05, "overhead_bound_session")
    assert focus_view.verdict_rule(card, w) == "overhead_bound_session"
    # A what-if refuted the kernels (the whole step measured less than them): the verdict says
    # so beside the share (a TensorBoard guide's fit: "compute (kernels) is 76%" where 16
    # batches a call ran the step in 3.83 ms against 6.71 ms of kernels read).
    card, w = _card(0.75, 0.05)
    card["findings"][0]["fix"] = "Not the advice here: with X the whole step measured 3 µs."
    assert focus_view._verdict(card, w).startswith(
        "Verdict: compute (kernels) is 75% ±5 of the step as the framework phase's tracer read "
        "the kernels, but a fix measured on your loop shows overhead to remove"
    )


def test_within_the_noise_a_finding_that_is_not_about_boundness_still_opens_the_answer() -> None:
    card, w = _card(0.58, 0.06, "periodic_slow_steps")
    assert focus_view.verdict_rule(card, w) == "periodic_slow_steps"
    text = focus_view._verdict(card, w)
    # The bound verdicts it cannot tell apart are not the answer then: not said (a TF2 loop's
    # summaries, 91% of its kernels, opened "compute- and overhead-bound are within the noise").
    assert "within the noise" not in text
    assert text == (
        "Verdict: compute (kernels) is 58% ±6 of the step; the top fix, predicted from this "
        "run's figures: Do X."
    )


def test_a_step_mostly_unexplained_says_so_before_its_largest_measured_part() -> None:
    card, w = _card(0.75, 0.05)
    for r in card["split"]:
        r.update(us=r["us"] / 100, share=r["share"] / 100)
    card["split"].append(
        {"category": "other", "label": "other", "us": 99.0, "share": 0.99, "measured": True}
    )
    card["split"].append(
        {"category": "dispatch", "label": "dispatch", "us": None, "share": 0.0, "measured": False}
    )
    card["split"][-1]["why"] = "the framework phase (kernel time)"
    text = focus_view._verdict(card, w)
    assert text.startswith(
        "Verdict: 99% of the step is unexplained (the largest measured part: compute (kernels) "
        "1% ±5; the framework phase (kernel time) would measure the rest)"
    )
    # Nothing measured at all: still one sentence, saying so.
    card["split"] = card["split"][2:]
    assert focus_view._verdict(card, w).startswith(
        "Verdict: no cause of the step was measured, only its time; the framework phase"
    )
    assert focus_view.verdict_rule(card, w) == "not_measured"


def test_a_finding_with_a_fix_worth_a_tenth_of_the_step_leads_over_compute_bound() -> None:
    # A PyDataset's Python batches (27% of a conv net's step, measured without the profiler)
    # went unsaid behind "compute is 70%" when compute-bound came first by cost.
    card, w = _card(0.75, 0.05)
    batches = {"message": "b", "fix": "Make the batches once. Then Z.", "rule": "python_batches"}
    card["findings"].append({**batches, "cost_us": 12.0})  # 12% of the 100 µs step
    assert focus_view.verdict_rule(card, w) == "python_batches"
    assert focus_view._verdict(card, w) == (
        "Verdict: compute (kernels) is 75% ±5 of the step; the top fix, predicted from this "
        "run's figures: Make the batches once."
    )
    # Under a tenth of the step, compute-bound stays the answer.
    card["findings"][-1] = {**batches, "cost_us": 8.0}
    assert focus_view.verdict_rule(card, w) == "compute_bound"
    # A finding without a fix does not displace it either.
    card["findings"][-1] = {**batches, "fix": "", "cost_us": 50.0}
    assert focus_view.verdict_rule(card, w) == "compute_bound"


def test_a_drift_that_moves_the_shares_by_under_a_point_does_not_read_plus_or_minus_zero():
    from profiler.reports import focus_view

    blocks = [{"median_us": m, "repeat": 0} for m in (24_100.0, 29_200.0)]
    d = {"large": True, "blocks": blocks, "interval": [1.17, 1.99], "ratio": 1.21}
    assert "under a point" in focus_view._drift_note({**d, "share_pts": 0.4})
    assert "±0 points" not in focus_view._drift_note({**d, "share_pts": 0.4})
    assert ": shares are ±6 points for it" in focus_view._drift_note({**d, "share_pts": 6.2})
    assert "points" not in focus_view._drift_note({**d, "share_pts": 0.0})
    assert "(95%: 17–99%;" in focus_view._drift_note(d)
    # Two blocks give no spread: "137% (95%: 137–137%)" read as certain.
    two = {**d, "interval": [2.37, 2.37], "ratio": 2.37}
    assert "(from 2 blocks, too few for an interval;" in focus_view._drift_note(two)


def test_a_step_mostly_asleep_says_so_whichever_category_holds_the_sleep() -> None:
    asleep = {"message": "s", "fix": "Take the sleep out. Then Z.", "rule": "sleep_in_steps"}
    # Sampled with native frames: the sleep is other.
    card, w = _card(0.05, 0.02)
    for r in card["split"]:
        r.update(us=r["us"] / 10, share=r["share"] / 10)
    card["split"].insert(
        0, {"category": "other", "label": "other", "us": 90.0, "share": 0.9, "measured": True}
    )
    card["findings"] = [{**asleep, "message": "t.py: the steps sleep ... booked as other."}]
    text = focus_view._verdict(card, w)
    assert text.startswith("Verdict: 90% of the step is asleep in time.sleep, booked as other")
    assert "unexplained" not in text
    # Without native frames (TensorFlow): its line's Python.
    card, w = _card(0.1, 0.02)
    card["findings"] = [{**asleep, "message": "t.py: the steps sleep ... booked as Python."}]
    text = focus_view._verdict(card, w)
    assert text.startswith("Verdict: Python is 90% ±2 of the step, most of it asleep in time.sleep")


def test_a_larger_less_sure_fix_is_said_beside_the_top_one() -> None:
    # A multi-input model: steps_per_execution=4 saved 1.80 ms (sure), XLA 5.31 ms (95%:
    # 0.2-10.4 ms); without the profiler XLA saved 13.3 ms. Both are said, the sure one first.
    card, w = _card(0.75, 0.05)
    card["findings"] = []

    def fix(title: str, saving: float, iv: tuple[float, float], variant: float) -> dict:
        return {"title": title, "verdict": "holds", "measured_saving_us": saving,
                "interval_us": list(iv), "baseline_us": 25_000.0, "variant_us": variant,
                "predicted_saving_us": None, "pairs": 4}  # fmt: skip

    spe = fix("four batches a call", 1_800.0, (1_500.0, 2_100.0), 23_200.0)
    xla = fix("XLA", 5_310.0, (215.1, 10_400.0), 19_700.0)
    w["whatif"] = [spe, xla]
    text = focus_view._verdict(card, w)
    assert "the top fix, measured on your loop: four batches a call, 1.80 ms less" in text, text
    assert text.endswith(
        "; another, less sure but larger: XLA, 5.31 ms less per step, 1.3× faster (95%: "
        "215.1 µs to 10.40 ms)."
    ), text
    # Under twice the top one's saving: the top one alone.
    w["whatif"] = [spe, fix("XLA", 3_000.0, (215.1, 6_000.0), 22_000.0)]
    assert "another, less sure" not in focus_view._verdict(card, w)


def test_the_step_sentence_names_the_typical_step_the_split_sums_to_where_it_is_not_the_median():
    # Gradient accumulation's update every 4th step: "takes 11.90 ms" over a split summing to
    # 14.42 ms and "87% of the 14,424 µs step", with nothing saying which step that is.
    w = {
        "label": "t.py",
        "step_time": {"median_us": 11_900.0, "steps": 53},
        "distribution": {},
        "attribution": {"reference_us": 14_424.0},
    }
    text = focus_view._sentence(w)
    assert "the split below is of a typical step, 14.42 ms: the mean of the timed steps" in text
    w["attribution"]["reference_us"] = 12_500.0  # within a tenth of the median: its sum said
    text = focus_view._sentence(w)
    assert "typical step" not in text and "the split below sums to 12.50 ms, the mean" in text
    w["attribution"]["reference_us"] = 11_950.0  # within a hundredth: nothing
    assert "split below" not in focus_view._sentence(w)


def test_a_bound_finding_within_the_noise_says_so_as_the_verdict_does():
    # A text classifier beside a busy process: the verdict "compute- and overhead-bound are
    # within the noise" over "1. ... is compute-bound ... little overhead to remove".
    import copy
    import json
    from pathlib import Path

    doc = copy.deepcopy(
        json.loads((Path(__file__).parent / "data" / "golden_summary.json").read_text())
    )
    w = doc["workloads"][0]
    w["script"] = {"message": ""}
    att = w["attribution"]
    att["share"] = {**att["share"], "compute": 0.62, "dispatch": 0.26, "python": 0.12}
    att["share_interval"] = {**att["share_interval"], "compute": [0.58, 0.67]}
    att["typical_us"] = {**att["typical_us"], "compute": 62.0, "dispatch": 26.0, "python": 12.0}
    doc["diagnoses"] = [
        {"rule": "compute_bound", "subject": "workload", "name": w["name"],
         "message": "t is compute-bound.", "fix": "Less arithmetic.", "cost_us": 62.0},
    ]  # fmt: skip
    (card,) = [c for c in focus_view.focus(doc, True) if c["label"] == w["label"]]
    assert "within the noise" in card["verdict"], card["verdict"]
    (d,) = card["findings"]
    assert d["message"] == (
        "t is compute-bound. On this run compute- and overhead-bound are within the noise: "
        "the compute share's 95% interval is 58–67%."
    )


def test_a_finding_whose_own_what_if_rules_out_half_its_saving_does_not_lead():
    # A multi-input fit: its per-batch overhead finding (9.5 ms predicted) led the verdict over
    # XLA's measured 5.1 ms, while steps_per_execution=4 measured at most 2.0 ms of the 7.2 ms
    # it predicted ("no measurable change ... not a fix on this loop"). Without the profiler:
    # XLA 13.3 ms, four batches a call 1.9 ms.
    finding = {"rule": "overhead_bound_keras", "fix": "Run several batches per call.",
               "cost_us": 9_510.0}  # fmt: skip
    xla = {"id": "keras_jit", "verdict": "holds", "measured_saving_us": 5_124.0,
           "interval_us": [736.0, 9_513.0], "predicted_saving_us": 4_088.0}  # fmt: skip
    spe = {"id": "keras_steps_4", "verdict": "inconclusive", "measured_saving_us": 610.0,
           "interval_us": [-778.0, 1_998.0], "predicted_saving_us": 7_181.0}  # fmt: skip
    w = {"whatif": [xla, spe], "step_time": {"median_us": 25_000.0}}
    assert not focus_view._finding_leads(finding, xla, w)
    # Inconclusive and wide enough to hold its prediction: no measurement of it.
    wide = {**spe, "interval_us": [-9_000.0, 12_000.0]}
    assert focus_view._finding_leads(finding, xla, {**w, "whatif": [xla, wide]})


def test_cpu_a_step_that_grows_with_the_run_is_work_and_cpu_up_and_down_is_not():
    from profiler.reports import focus_view

    def blocks(walls: list[float], cpus: list[float]) -> list[dict]:
        return [
            {"median_us": w, "cpu_us": c, "others_cores": None}
            for w, c in zip(walls, cpus, strict=True)
        ]

    # TF's actor-critic: episodes grow as the policy learns, CPU a step with them.
    grows = blocks([16e3, 30e3, 52e3, 80e3, 104e3], [13e3, 28e3, 50e3, 79e3, 113e3])
    assert "the steps' work with it" in focus_view._work_varied(grows)
    # A cs231n spiral net's two BLAS threads beside other work: CPU a step up and down from
    # block to block for the same arithmetic every step.
    spins = blocks(
        [607, 623, 396, 405, 379, 415, 366, 669, 431, 383],
        [2225, 694, 469, 587, 430, 555, 440, 702, 526, 956],
    )
    assert focus_view._work_varied(spins) == ""


def test_blocks_a_phase_instrumented_are_no_measure_of_the_steps_work() -> None:
    from profiler.reports import focus_view

    # word2vec's TF1 loop, the same work every step: its first tenth held every phase (their
    # instruments' CPU), the others ran 2.14-3.45 ms of CPU a step.
    walls = [3052.8, 2761.8, 2718.9, 2620.2, 2821.6, 2962.7, 2564.5, 1823.0, 1917.8, 1848.1]
    cpus = [4334.5, 3191.4, 3252.0, 2956.9, 3452.3, 3311.2, 3216.6, 2346.6, 2197.3, 2137.5]
    rows = [
        {"median_us": w, "cpu_us": c, "others_cores": 1.0, "instrumented": i == 0}
        for i, (w, c) in enumerate(zip(walls, cpus, strict=True))
    ]
    assert focus_view._work_varied(rows) == ""
    # Counted, the instrumented tenth alone made the CPU a step vary 2x.
    counted = [{**r, "instrumented": False} for r in rows]
    assert "the steps' work with it" in focus_view._work_varied(counted)
