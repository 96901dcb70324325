"""What-if verdicts follow the saving's interval: a saving whose interval spans zero is
inconclusive, one measured slower is never a fix; pure functions over hand-made block medians."""

from __future__ import annotations

import dataclasses

import pytest

from profiler.analysis import whatif
from profiler.model.intervals import saving_interval, t975
from profiler.model.records import WhatIfData, WhatIfResult
from profiler.reports import focus_view


def test_the_interval_is_students_t_over_the_pairs() -> None:
    mean, low, high = saving_interval([10.0, 12.0, 14.0])  # type: ignore[misc]
    assert mean == 12.0
    # sd 2, n 3: 4.303 * 2 / sqrt(3)
    assert high - mean == pytest.approx(t975(2) * 2 / 3**0.5)
    assert saving_interval([5.0]) is None


@pytest.mark.parametrize(
    ("interval", "predicted", "verdict"),
    [
        ((-30.0, -10.0), 20.0, "slower"),
        ((-5.0, 8.0), 20.0, "inconclusive"),
        ((-5.0, 8.0), 0.0, "inconclusive"),  # a true saving of zero is never "holds"
        ((15.0, 25.0), 20.0, "holds"),
        ((60.0, 70.0), 20.0, "misses"),
        ((15.0, 25.0), None, "not predicted"),
        (None, 20.0, "inconclusive"),  # one pair: no interval
    ],
)
def test_verdicts_follow_the_interval(interval, predicted, verdict) -> None:  # type: ignore[no-untyped-def]
    tol = None if predicted is None else max(0.25 * predicted, 3.0)
    assert whatif.verdict_for(interval, predicted, tol) == verdict


def _result(base: tuple[int, ...], var: tuple[int, ...]) -> WhatIfResult:
    return WhatIfResult(
        id="function_jit",
        title="train_step compiled with XLA",
        removes=("dispatch.per_op",),
        keeps_results=True,
        results_note="XLA's rounding",
        status="ok",
        block_steps=50,
        baseline_ns=base,
        variant_ns=var,
    )


def test_a_what_if_whose_true_saving_is_zero_is_inconclusive() -> None:
    # Block medians of a fix that changes nothing, on a noisy machine (± 3 ms).
    base = (70_000_000, 74_000_000, 71_000_000, 73_000_000)
    var = (72_000_000, 71_000_000, 74_000_000, 70_500_000)
    (x,) = whatif.analyse(WhatIfData(results=(_result(base, var),)), None)
    assert x.verdict == "inconclusive" and not x.saves
    assert x.interval_us is not None and x.interval_us[0] < 0 < x.interval_us[1]


def test_a_variant_several_times_slower_in_every_pair_is_slower_whatever_its_interval() -> None:
    # The Keras anomaly-detection autoencoder with XLA: its blocks 45 against 540 ms a step,
    # one of them holding compiles of seconds: Student's interval over the three differences
    # ran from -7.96 s to +4.16 s, "inconclusive", for a fix 15x slower without the profiler.
    base = (45_000_000, 53_000_000, 47_000_000)
    var = (540_000_000, 412_000_000, 9_000_000_000)
    (x,) = whatif.analyse(WhatIfData(results=(_result(base, var),)), None)
    assert x.interval_us is not None and x.interval_us[0] < 0 < x.interval_us[1]
    assert x.verdict == "slower" and not x.saves
    # Two pairs, or one pair under 1.5x: the interval's verdict.
    (two,) = whatif.analyse(WhatIfData(results=(_result(base[:2], var[:2]),)), None)
    assert two.verdict != "slower" or two.interval_us[1] < 0
    (mixed,) = whatif.analyse(
        WhatIfData(results=(_result(base, (540_000_000, 60_000_000, 9_000_000_000)),)), None
    )
    assert mixed.verdict == "inconclusive"


def test_a_fix_measured_slower_is_never_listed_as_a_fix() -> None:
    base = (42_000_000, 42_500_000, 41_800_000)
    var = (76_000_000, 77_000_000, 75_500_000)  # XLA: 34 ms more per step
    (x,) = whatif.analyse(WhatIfData(results=(_result(base, var),)), None)
    assert x.verdict == "slower" and not x.saves
    row = {
        "id": x.id,
        "title": x.title,
        "removes": list(x.removes),
        "removes_share": 1.0,
        "keeps_results": True,
        "results_note": "",
        "results_check": "",
        "status": "ok",
        "error": "",
        "block_steps": 50,
        "pairs": x.pairs,
        "baseline_us": x.baseline_us,
        "variant_us": x.variant_us,
        "measured_saving_us": x.measured_us,
        "resolution_us": x.resolution_us,
        "predicted_saving_us": None,
        "predicted_share": None,
        "tolerance_us": None,
        "verdict": x.verdict,
        "interval_us": list(x.interval_us or ()),
    }
    summary = {"workloads": [{"name": "s", "label": "s.py", "slug": "s", "status": "ok",
                              "script": {"path": "s.py"}, "whatif": [row]}]}  # fmt: skip
    (card,) = focus_view.focus(summary, answered=False)
    assert card["whatifs"] == []
    (said,) = card["not_fixes"]
    assert said["text"].startswith("measured: slower on this loop (34.")
    assert "not a fix on this loop" in said["text"] and "less per step" not in said["text"]


def _measured(id_: str, verdict: str, saving: float) -> whatif.WhatIf:
    return whatif.WhatIf(
        id=id_, title=f"{id_} applied", removes=(), removes_share=0.0, group=1,
        keeps_results=True, results_note="", results_check="", status="ok", error="",
        block_steps=50, pairs=3, baseline_us=1000.0, variant_us=1000.0 - saving,
        measured_us=saving, resolution_us=5.0, predicted_us=300.0, predicted_share=0.3,
        tolerance_us=75.0, verdict=verdict, interval_us=(saving - 40.0, saving + 40.0),
    )  # fmt: skip


def test_advice_its_own_what_ifs_measured_no_help_for_is_withdrawn_and_not_the_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import performance
    from profiler.diagnoses.engine import Diagnosis

    found = [
        Diagnosis("overhead_bound_keras", "workload", "s.py", "fit's machinery", "Use spe.", 900),
        Diagnosis("periodic_slow_steps", "workload", "s.py", "every 10th", "Less often.", 400),
    ]
    monkeypatch.setattr(performance, "facts", lambda w, e: {"name": w.name})
    monkeypatch.setattr(performance, "evaluate", lambda rules, subject, facts: list(found))
    runs = [
        _measured("keras_steps_4", "inconclusive", 10.0),
        _measured("keras_steps_16", "slower", -200.0),
    ]
    w = SimpleNamespace(name="s.py", whatifs=runs)
    out = performance.diagnose([w], None)
    assert [d.rule for d in out] == ["periodic_slow_steps", "overhead_bound_keras"]
    refuted = out[1]
    assert refuted.refuted and refuted.to_json()["refuted"] is True
    assert refuted.fix.startswith("Not the advice here: Measured on your loop, with keras_steps_4")
    assert "Use spe" not in refuted.fix and "slower" in refuted.fix
    assert "refuted" not in out[0].to_json()
    # An interval too wide to rule the prediction out (a short fit's 2 pairs) is no evidence
    # against the advice: it stays, and says its measurement was inconclusive.
    wide = dataclasses.replace(
        runs[1], verdict="inconclusive", measured_us=380.0, interval_us=(-1650.0, 2310.0), pairs=2
    )
    runs[1] = wide
    kept = {d.rule: d for d in performance.diagnose([w], None)}["overhead_bound_keras"]
    assert not kept.refuted and kept.fix.startswith("Use spe. Measured on your loop")
    said = kept.fix.split("with keras_steps_16 applied: ")[1]
    assert said.startswith(
        "inconclusive (95% interval -1,650 to +2,310 µs per step, a saving of 300 µs predicted; "
        "its blocks' medians 1,000 µs as written, 1,200 with it; 2 pairs"
    )
    assert "not a fix" not in said
    # One of them saving keeps the advice, with what it measured.
    runs[1] = _measured("keras_steps_16", "holds", 300.0)
    kept = {d.rule: d for d in performance.diagnose([w], None)}["overhead_bound_keras"]
    assert not kept.refuted and kept.fix.startswith("Use spe. Measured on your loop")
    # A compute-bound step's advice names XLA among other ways: XLA measured slower keeps
    # the rest, with what was measured (a VAE's fit read "fix: Not the advice here: ...").
    found[:] = [Diagnosis("compute_bound", "workload", "s.py", "kernels", "Less arithmetic.", 9)]
    w.whatifs = [_measured("keras_jit", "slower", -200.0)]
    (kept,) = performance.diagnose([w], None)
    assert not kept.refuted and kept.fix.startswith("Less arithmetic. Measured on your loop")
    assert "slower" in kept.fix
    # XLA whose blocks leaned slower, inconclusive, is no longer among the things to time
    # either (the Keras VAE's: 144.65 ms as written, 459.74 with it, 3 pairs).
    xla_fix = f"Less arithmetic (more cores{performance.XLA_CLAUSE})."
    found[:] = [Diagnosis("compute_bound", "workload", "s.py", "kernels", xla_fix, 9)]
    leaned = dataclasses.replace(_measured("keras_jit", "inconclusive", -315_000.0),
                                 interval_us=(-457_715.0, 64_133.0))  # fmt: skip
    w.whatifs = [leaned]
    (kept,) = performance.diagnose([w], None)
    assert kept.fix.startswith("Less arithmetic (more cores). Measured on your loop"), kept.fix
    # The answer's first sentence never quotes refuted advice.
    card = {
        "split": [
            {"category": "python", "label": "Python", "us": 9.0, "share": 0.9, "measured": True}
        ],
        "findings": [
            {"rule": "overhead_bound_keras", "fix": "Not the advice here.", "refuted": True},
            {"rule": "periodic_slow_steps", "fix": "Less often.", "message": "m"},
        ],
    }
    assert focus_view.verdict_rule(card, {"whatif": []}) == "periodic_slow_steps"


def test_a_finding_holding_far_more_than_the_measured_fix_leads_the_verdict() -> None:
    card = {
        "split": [
            {"category": "feed_fetch", "label": "feed/fetch", "us": 300_000.0, "share": 0.78,
             "measured": True},
        ],
        "findings": [
            {"rule": "input_bound", "fix": "Cache after map(rotate). More.", "cost_us": 300_000.0,
             "message": "input-bound"},
        ],
    }  # fmt: skip
    xla = {"id": "function_jit", "title": "XLA", "measured_saving_us": 15_000.0,
           "baseline_us": 385_000.0, "variant_us": 370_000.0, "verdict": "holds"}  # fmt: skip
    text = focus_view._verdict(card, {"whatif": [xla]})
    assert "the top fix, predicted from this run's figures: Cache after map(rotate) (up to" in text
    assert text.endswith(
        "another fix, measured on your loop: XLA, 15.00 ms less per step, 1.0× faster."
    )
    # Time outside the steps is said as the script's share, not spread over the steps (a
    # quickstart's data made before training, 7.1 s once, read "up to 3.78 ms a step").
    once = {**card, "findings": [{**card["findings"][0], "script_pct": 20.4}]}
    text = focus_view._verdict(once, {"whatif": [xla]})
    assert "Cache after map(rotate) (20% of the script's time); another fix" in text
    # Where slow steps hold most of the time and the fix leaves the mean step within a tenth,
    # it is not named beside the finding (a tabular fit: steps_per_execution=4 read "1.9x
    # faster on the median step (1.0x on the mean step)"; no gain without the profiler).
    spe = {"id": "keras_steps_4", "title": "spe=4", "measured_saving_us": 684.0,
           "baseline_us": 1_400.0, "variant_us": 716.0, "verdict": "holds"}  # fmt: skip
    slow = {"whatif": [spe], "step_time": {"median_us": 1_340.0},
            "distribution": {"mean_us": 55_870.0, "outliers": 5, "outlier_share": 0.98,
                             "outlier_factor": 3.0}}  # fmt: skip
    text = focus_view._verdict(card, slow)
    # The split is a typical step's, a minority of the time: said so.
    assert text.startswith(
        "Verdict: feed/fetch is 78% of a typical step (5 slow steps over 3× the median hold "
        "98% of the time); the top fix"
    ), text
    assert text.endswith("Cache after map(rotate) (up to 300.00 ms a step)."), text
    assert "spe=4" not in text
    # The slow steps' own finding holding most of the mean step opens the answer (the
    # regression tutorial: "dispatch is 48% of a typical step" where the epochs' boundaries
    # held 95% of the time).
    epochs = {"rule": "per_epoch_cost", "fix": "Fewer epochs. More.", "cost_us": 53_000.0,
              "message": "every epoch's first batch"}  # fmt: skip
    both = {**card, "findings": [epochs, *card["findings"]]}
    assert focus_view._verdict(both, slow).startswith(
        "Verdict: the work at each epoch's boundary is 95% of the loop's time (a typical "
        "step: feed/fetch 78%); the top fix"
    )
    # Under half of it: the typical step's wording.
    both["findings"][0] = {**epochs, "cost_us": 20_000.0}
    assert "of a typical step (5 slow steps" in focus_view._verdict(both, slow)
    # A later model's fit, slower than those measured: the split is the earlier fits'.
    both["findings"].append({"rule": "later_fit_slower", "fix": "Measure it.", "message": "m"})
    assert "the time), in the earlier fits' steps (a later model's fit, slower, is below); the" in (
        focus_view._verdict(both, slow)
    )
    # The rule that opens the answer is the finding's, as without the what-if (a noise run's
    # busy side measured XLA and was called another verdict than the quiet side).
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "input_bound"
    assert focus_view.verdict_rule(card, {"whatif": []}) == "input_bound"
    # Within 3x of it, or the finding's own what-if measured: the measured fix leads.
    card["findings"][0]["cost_us"] = 40_000.0
    assert "the top fix, measured on your loop: XLA" in focus_view._verdict(card, {"whatif": [xla]})
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "whatif:function_jit"
    card["findings"][0].update(rule="compute_bound", cost_us=300_000.0)
    assert "the top fix, measured on your loop: XLA" in focus_view._verdict(card, {"whatif": [xla]})
    # XLA measured the compute-bound finding's own fix: one verdict whether or not the noise
    # let it show a saving.
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "compute_bound"
    assert focus_view.verdict_rule(card, {"whatif": []}) == "compute_bound"


def test_a_finding_holding_most_of_the_step_leads_at_twice_the_measured_saving() -> None:
    # A softmax regression computing its loss on all 60,000 rows for a log line at every step:
    # the line read 94% of an 89 ms step (93% without the profiler), float32 measured 38 ms.
    card = {
        "split": [{"category": "compute", "label": "compute (kernels)", "us": 82_000.0,
                   "share": 0.92, "measured": True}],
        "findings": [{"rule": "step_line", "fix": "It evaluates at every step. More.",
                      "cost_us": 84_388.0, "message": "line 45 holds 94%"}],
    }  # fmt: skip
    f32 = {"id": "numpy_float32", "title": "float32", "measured_saving_us": 38_030.0,
           "baseline_us": 89_000.0, "variant_us": 51_000.0, "verdict": "holds"}  # fmt: skip
    w = {"whatif": [f32], "step_time": {"median_us": 89_441.0}}
    assert focus_view.verdict_rule(card, w) == "step_line"
    # Under half the step, three times the saving still: the measured fix leads.
    card["findings"][0]["cost_us"] = 40_000.0
    w["step_time"]["median_us"] = 200_000.0
    assert focus_view.verdict_rule(card, w) == "whatif:numpy_float32"


def test_a_saving_its_blocks_are_unsure_of_is_ranked_by_its_lower_end_and_quoted_as_a_range():
    # An input-bound fit (a heavy STFT map, no cache) beside a busy process: XLA's 8 pairs of
    # blocks read 0.18-9.25 ms less per step, "4.8x faster" led the answer, where XLA gave
    # nothing without the profiler and .cache() 5.1x (the variant's compile let the pipeline
    # run ahead).
    card = {
        "split": [
            {"category": "feed_fetch", "label": "feed/fetch", "us": 4_000.0, "share": 0.64,
             "measured": True},
        ],
        "findings": [
            {"rule": "input_bound", "fix": "Cache after map(feat). More.", "cost_us": 3_500.0,
             "message": "input-bound"},
        ],
    }  # fmt: skip
    xla = {"id": "keras_jit", "title": "XLA", "measured_saving_us": 4_820.0, "pairs": 8,
           "interval_us": [177.5, 9_253.8], "baseline_us": 6_300.0, "variant_us": 1_300.0,
           "verdict": "holds"}  # fmt: skip
    assert focus_view.sure_saving(xla) == 177.5
    text = focus_view._verdict(card, {"whatif": [xla]})
    assert "the top fix, predicted from this run's figures: Cache after map(feat)" in text
    assert text.endswith(
        "another fix, measured on your loop: XLA, between 177.5 µs and 9.25 ms less per step "
        "(95%; its 8 pairs of blocks varied widely)."
    )
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "input_bound"
    # Sure of most of it: the point figure and its speed-up, as before.
    sure = {**xla, "interval_us": [4_000.0, 5_640.0]}
    text = focus_view._verdict(card, {"whatif": [sure]})
    assert text.endswith(
        "the top fix, measured on your loop: XLA, 4.82 ms less per step, 4.8× faster."
    )
    # Of two fixes, the one surer of more leads.
    spe = {**xla, "id": "keras_steps_4", "title": "spe4", "measured_saving_us": 3_000.0,
           "interval_us": [2_500.0, 3_500.0]}  # fmt: skip
    assert focus_view.verdict_rule(card, {"whatif": [xla, spe]}) == "whatif:keras_steps_4"


def test_xla_does_not_measure_the_per_call_fix_of_an_overhead_bound_function() -> None:
    # keras-io's custom training loop: 67% of a 1.39 ms step is the tf.function call's
    # overhead; XLA measured 286 µs less. Several steps a call were 2.2x faster without the
    # profiler (XLA 1.3x): the per-call fix leads, XLA is "another fix".
    from profiler.diagnoses.performance import WHATIF_FOR

    assert "function_jit" not in WHATIF_FOR.get("overhead_bound_function", ())
    card = {
        "split": [
            {"category": "feed_fetch", "label": "feed/fetch", "us": 567.0, "share": 0.41,
             "measured": True},
        ],
        "findings": [
            {"rule": "overhead_bound_function", "cost_us": 934.0, "message": "overhead",
             "fix": "Run several steps per tf.function call (a loop over tf.range(k) inside "
             "it), or larger batches."},
        ],
    }  # fmt: skip
    xla = {"id": "function_jit", "title": "XLA", "measured_saving_us": 286.1,
           "baseline_us": 1278.0, "variant_us": 980.6, "verdict": "misses"}  # fmt: skip
    text = focus_view._verdict(card, {"whatif": [xla]})
    assert (
        "the top fix, predicted from this run's figures: Run several steps per tf.function" in text
    )
    assert text.endswith(
        "another fix, measured on your loop: XLA, 286.1 µs less per step, 1.3× faster."
    )
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "overhead_bound_function"


def test_a_findings_own_what_ifs_inconclusive_let_it_lead_over_a_small_measured_fix() -> None:
    # A two-input fit beside a busy process: 1.38 ms of per-batch overhead, its
    # steps_per_execution what-ifs inconclusive, XLA 209 us (1.1x) led the verdict;
    # steps_per_execution=16 cut training 38% without the profiler.
    card = {
        "split": [
            {"category": "dispatch", "label": "dispatch", "us": 600.0, "share": 0.32,
             "measured": True},
        ],
        "findings": [
            {"rule": "overhead_bound_keras", "cost_us": 1_382.0, "message": "overhead",
             "fix": "Run several batches per call: model.compile(..., steps_per_execution=k), "
             "or a larger batch_size."},
        ],
    }  # fmt: skip
    xla = {"id": "keras_jit", "title": "XLA", "measured_saving_us": 209.4,
           "baseline_us": 2150.0, "variant_us": 1930.0, "verdict": "holds"}  # fmt: skip
    spe = {"id": "keras_steps_4", "title": "spe4", "measured_saving_us": 635.0,
           "baseline_us": 2360.0, "variant_us": 1780.0, "verdict": "inconclusive"}  # fmt: skip
    text = focus_view._verdict(card, {"whatif": [xla, spe]})
    assert "the top fix, predicted from this run's figures: Run several batches per call" in text
    assert text.endswith(
        "another fix, measured on your loop: XLA, 209.4 µs less per step, 1.1× faster."
    )
    # Its own what-if measured (it held, or missed): the measurement leads.
    held = {**spe, "verdict": "misses"}
    text = focus_view._verdict(card, {"whatif": [xla, held]})
    assert "the top fix, measured on your loop" in text
    # Refuted by its what-ifs: it never leads.
    card["findings"][0]["refuted"] = True
    text = focus_view._verdict(card, {"whatif": [xla, spe]})
    assert "the top fix, measured on your loop: XLA" in text


def test_an_inconclusive_what_if_says_so_and_never_not_a_fix() -> None:
    # 41.2 ms -> 33.8 ms whose interval spans zero: said "inconclusive", not "no measurable
    # change ... not a fix" (a newcomer read that as a measured no-change).
    base = (41_000_000, 60_000_000, 30_000_000)
    var = (45_000_000, 28_000_000, 29_000_000)
    (x,) = whatif.analyse(WhatIfData(results=(_result(base, var),)), None)
    assert x.verdict == "inconclusive"
    row = {
        "id": x.id, "title": x.title, "removes": list(x.removes), "removes_share": 1.0,
        "keeps_results": True, "results_note": "", "results_check": "", "status": "ok",
        "error": "", "block_steps": 3, "pairs": x.pairs, "baseline_us": x.baseline_us,
        "variant_us": x.variant_us, "measured_saving_us": x.measured_us,
        "resolution_us": x.resolution_us, "predicted_saving_us": None, "predicted_share": None,
        "tolerance_us": None, "verdict": x.verdict, "interval_us": list(x.interval_us or ()),
    }  # fmt: skip
    summary = {"workloads": [{"name": "s", "label": "s.py", "slug": "s", "status": "ok",
                              "script": {"path": "s.py"}, "whatif": [row]}]}  # fmt: skip
    (card,) = focus_view.focus(summary, answered=False)
    (said,) = card["not_fixes"]
    assert said["text"].startswith("inconclusive: ")
    assert "not shown to be a fix" in said["text"] and "no measurable change" not in said["text"]
    assert said["blocks"] == "3 pairs of 3-step blocks"


def test_a_fix_for_a_growing_loop_shows_its_growth_stop_per_step_in_its_blocks() -> None:
    from profiler.diagnoses import memory as memory_rules

    kb = 1024
    r = dataclasses.replace(
        _result((30_000_000,) * 3, (800_000,) * 3),
        id="tensor_args",
        title="train_step called with lr as a tensor",
        block_steps=3,
        # A retraced function keeps ~240 KB a trace; one block gave 186 KB back.
        baseline_grew=(726 * kb, -560 * kb, 729 * kb),
        variant_grew=(0, 0, 4 * kb),
    )
    (x,) = whatif.analyse(WhatIfData(results=(r,)), None)
    assert x.grew_per_step == (242 * kb, 0.0) and x.grew_blocks == 3
    assert x.grew_range is not None and x.grew_range[1] == (0.0, 4 * kb / 3)
    said = memory_rules.growth_sentence(x)
    assert said.startswith("Measured on your loop, with train_step called with lr as a tensor:")
    assert "the growth stops (242.0 KB a step as written" in said and "3 blocks each" in said
    less = dataclasses.replace(x, grew_per_step=(100.0 * kb, 60.0 * kb))
    assert "40% less growth" in memory_rules.growth_sentence(less)
    same = dataclasses.replace(x, grew_per_step=(100.0 * kb, 110.0 * kb))
    assert "no less growth: not the fix for this growth" in memory_rules.growth_sentence(same)
    # Memory not read (no /proc): no figure, no sentence; a failed variant gets none either.
    (unread,) = whatif.analyse(WhatIfData(results=(_result((1,), (1,)),)), None)
    assert unread.grew_per_step is None and memory_rules.growth_sentence(unread) == ""
    failed = dataclasses.replace(r, status="failed")
    assert whatif.analyse(WhatIfData(results=(failed,)), None)[0].grew_per_step is None


def test_a_what_if_removing_no_category_is_measured_not_predicted() -> None:
    from profiler.analysis.attribution import Attribution

    r = dataclasses.replace(
        _result((110_000_000,) * 3, (3_500_000,) * 3), id="predict_direct", removes=()
    )
    att = Attribution.__new__(Attribution)  # never read: nothing to predict from
    (x,) = whatif.analyse(WhatIfData(results=(r,)), att)
    assert x.predicted_us is None and x.verdict == "not predicted" and x.saves


def test_what_ifs_planned_on_scarce_steps_keep_two_pairs_and_drop_a_what_if_instead() -> None:
    """Steps scarce: blocks shrink to ``BLOCK_FIT``, pairs to two (one pair has no interval, so
    no verdict), then the last what-if is dropped and named as having had no room."""
    from pathlib import Path

    from profiler.capture.phases import Budget, PhaseContext
    from profiler.capture.phases import whatif as phase

    class Variant:
        def __init__(self, id_: str) -> None:
            self.id = id_

    p = phase.WhatIfPhase(Budget(1.0, 2, 100), {})
    p.variants = [Variant("a"), Variant("b"), Variant("c"), Variant("d")]
    ctx = PhaseContext(None, None, Path("."), Path("."), lambda: 0, step_ns=250_000)  # type: ignore[arg-type]
    # Four what-ifs at 3 pairs of 20-step blocks need 480 steps; 300 are left.
    extra = p.fit_extra(ctx, 0, 300)
    assert p.block == phase.BLOCK_FIT and p.pairs == phase.FEWEST_PAIRS == 2
    assert [v.id for v in p.variants] == ["a", "b", "c"] and extra == 3 * 2 * 2 * 20 <= 300
    assert p.not_run == [("d", phase.NO_ROOM)]
    # With room, the plan is untouched: three pairs of the natural block.
    roomy = phase.WhatIfPhase(Budget(1.0, 2, 100), {})
    roomy.variants = [Variant("a")]
    assert roomy.fit_extra(ctx, 0, 10_000) == 3 * 2 * 300 and roomy.pairs == phase.PAIRS


def test_a_finding_without_a_fix_says_none_is_offered_not_a_blank_line() -> None:
    from profiler.reports import text

    # A growth whose cause no name of the script's held: the rule offers no fix.
    found = {"name": "s", "rule": "memory_growth", "fix": "", "cost_us": 1.0,
             "message": "s.py: the process grows by 1.8 KB every step."}  # fmt: skip
    summary = {"workloads": [{"name": "s", "label": "s.py", "slug": "s", "status": "ok",
                              "script": {"path": "s.py"}}], "diagnoses": [found]}  # fmt: skip
    (card,) = focus_view.focus(summary, answered=False)
    (d,) = card["findings"]
    assert d["fix"] == "" and d["fix_text"] == focus_view.NO_FIX
    card.update(split=[{"label": "compute", "measured": True, "us": 10.0, "share": 1.0}])
    card.update(sentence="A step of s.py takes 10.0 µs.")
    said = text.answer({"focus": [card]}).splitlines()
    assert f"     fix: {focus_view.NO_FIX}" in said and "     fix: " not in said


def test_the_verdicts_speed_up_is_said_on_the_mean_step_too_where_slow_steps_dominate() -> None:
    # A k-fold fit, 70-batch epochs: steps_per_execution=16 measured 841.6 µs less on the
    # blocks' median step (1.40 -> 0.53 ms: "2.6× faster"); the mean step, 3.48 ms, holds the
    # epoch boundaries and collections, which the fix leaves: 1.3× on it. Without the profiler
    # the 15-epoch fit ran 0.97-2.0x faster with it (quiet and loaded machines).
    card = {
        "split": [
            {"category": "python", "label": "Python", "us": 900.0, "share": 0.6, "measured": True}
        ],
        "findings": [],
    }
    spe = {"id": "keras_steps_16", "title": "spe16", "measured_saving_us": 841.6,
           "baseline_us": 1_400.0, "variant_us": 532.1, "verdict": "holds"}  # fmt: skip
    w = {
        "whatif": [spe],
        "step_time": {"median_us": 1_445.5, "steps": 157},
        "distribution": {"mean_us": 3_480.0, "outliers": 3},
    }
    text = focus_view._verdict(card, w)
    assert text.endswith(
        "spe16, 841.6 µs less per step, 2.6× faster on the median step (1.3× on the mean step, "
        "3.48 ms, if its slow steps stay as they are)."
    ), text
    # A mean near the median: the one figure.
    w["distribution"] = {"mean_us": 1_500.0, "outliers": 0}
    assert focus_view._verdict(card, w).endswith("841.6 µs less per step, 2.6× faster."), text
    # Blocks measured on their mean steps (BLAS's threads on a busy machine: the slow steps
    # are the effect): said on the mean step, once.
    w["distribution"] = {"mean_us": 3_480.0, "outliers": 3}
    w["whatif"] = [{**spe, "block_mean": True}]
    assert focus_view._verdict(card, w).endswith("2.6× faster on the mean step."), text
    # predict's calls once every 3 steps, each figure a mean over the 3: its slow steps are the
    # calls the fix removes ("1.7x on the mean step ... if its slow steps stay" was said).
    w["whatif"] = [{**spe, "id": "predict_direct", "group": 3}]
    assert focus_view._verdict(card, w).endswith("841.6 µs less per step, 2.6× faster."), text


def test_a_saving_under_two_percent_of_the_step_is_said_apart_not_as_a_fix() -> None:
    # numpy's BLAS on one thread: 4.4 µs less on a 982 µs step (0.5%), its interval above zero.
    row = {
        "id": "numpy_blas_one_thread", "title": "BLAS on one thread", "removes": [],
        "removes_share": 1.0, "keeps_results": True, "results_note": "", "results_check": "",
        "status": "ok", "error": "", "block_steps": 138, "pairs": 3, "baseline_us": 982.0,
        "variant_us": 977.6, "measured_saving_us": 4.4, "resolution_us": 1.0,
        "predicted_saving_us": None, "predicted_share": None, "tolerance_us": None,
        "verdict": "not predicted", "interval_us": [1.2, 7.6],
    }  # fmt: skip
    summary = {"workloads": [{"name": "s", "label": "s.py", "slug": "s", "status": "ok",
                              "script": {"path": "s.py"}, "whatif": [row]}]}  # fmt: skip
    (card,) = focus_view.focus(summary, answered=False)
    assert card["whatifs"] == []
    (said,) = card["not_fixes"]
    assert "less per step (under 2% of the step: too little to count as a fix)" in said["text"]
    # At 2% or more it is a fix.
    big = {**row, "measured_saving_us": 30.0, "variant_us": 952.0, "interval_us": [20.0, 40.0]}
    summary["workloads"][0]["whatif"] = [big]
    (card,) = focus_view.focus(summary, answered=False)
    assert [x["title"] for x in card["whatifs"]] == ["BLAS on one thread"]


@pytest.mark.parametrize(
    ("at_steps", "period"),
    [
        # A GAN's predict before each iteration of 3 steps, and one more for sample images at
        # the first: the warm-up's 3 calls in 5 steps.
        ([0, 3, 3], 3),
        ([0, 3, 3, 6, 9, 12], 3),
        # Calls inside each step (a predict per sample), and a call before the steps.
        ([0, 1, 1, 2, 3, 4], 1),
        ([0, 0, 0], None),
        ([], None),
    ],
)
def test_a_calls_period_is_the_steps_between_the_steps_that_made_calls(at_steps, period) -> None:
    from profiler.capture.whatifs_calls import period as period_of

    assert period_of(at_steps) == period


def test_a_what_if_keeps_the_steps_of_the_later_ones_only_as_far_as_they_fit() -> None:
    """The what-ifs run in their order; steps left short, the first keeps its fewest and the
    later ones get what remains, in their order (a 126-step fit measured steps_per_execution=16
    alone: XLA, first, had left its room to the two after it)."""
    from profiler.capture.phases.whatif import _kept_for_later

    # 120 steps left; this one needs 40 at the fewest; the later two plan 100 and 50.
    assert _kept_for_later(120, 40, [100, 50]) == 0
    assert _kept_for_later(120, 40, [50, 100]) == 50
    assert _kept_for_later(400, 40, [100, 50]) == 150
    assert _kept_for_later(None, 40, [100, 50]) == 150


def test_the_verdict_quotes_the_first_of_a_findings_fixes_and_counts_the_rest() -> None:
    # A fit's epoch boundary: five fixes in one sentence made a 100-word verdict.
    fix = ("validate less often (fit(validation_freq=k)) or on fewer batches; give fit a "
           "tf.data.Dataset built once (from_tensor_slices((x, y)); shuffled); run fewer, "
           "longer epochs")  # fmt: skip
    assert focus_view._first_fix(fix) == (
        "validate less often (fit(validation_freq=k)) or on fewer batches (and 2 more fixes in "
        "its finding)"
    )
    assert (
        focus_view._first_fix("Cache after map(rotate). It runs once.") == "Cache after map(rotate)"
    )
    assert focus_view._first_fix("a; b") == "a (and 1 more fix in its finding)"


def test_a_missed_prediction_says_on_which_side() -> None:
    # XLA on word2vec's fit: 4,949 µs less a step where 308 were predicted ("misses" read as
    # a failed fix).
    from profiler.analysis.whatif import verdict_words

    assert verdict_words("misses", 4_949.0, 308.0) == "misses: more than predicted"
    assert verdict_words("misses", 100.0, 308.0) == "misses: less than predicted"
    # A lower bound of its fix (fit's steps_per_execution emulated) falling short is no miss.
    assert verdict_words("misses", 100.0, 308.0, lower_bound=True).startswith("below the pre")
    assert verdict_words("misses", 400.0, 308.0, True) == "misses: more than predicted"
    assert verdict_words("holds", 300.0, 308.0) == "holds"


def test_the_end_of_an_epochs_data_inside_a_fit_what_if_is_fits_own_not_a_failure():
    """fit on a TFRecord set of unknown length ends each epoch on OutOfRangeError from its
    train function: raised through the XLA and steps_per_execution variants as written (fit's
    epoch loop stops on it), not recorded as "could not be applied: OutOfRangeError"."""
    from types import SimpleNamespace

    from profiler.capture import whatifs

    class OutOfRangeError(Exception):
        pass

    class Model:
        jit_compile = False
        steps_per_execution = 1

        def __init__(self) -> None:
            self.train_function = lambda *a: "as written"

        def make_train_function(self, force: bool = False) -> None:
            def ended(*a: object) -> None:
                raise OutOfRangeError("End of sequence [[{{node IteratorGetNext}}]]")

            self.train_function = ended

    model = Model()
    driver = SimpleNamespace(facts=SimpleNamespace(model=model, fit={"epochs": 2}))
    variant = whatifs.keras_jit(driver)
    assert not isinstance(variant, str)
    variant.on()
    with pytest.raises(OutOfRangeError):
        model.train_function("iterator")
    assert variant.errors == []
    assert whatifs.data_ended(StopIteration()) and not whatifs.data_ended(ValueError())


def test_a_what_ifs_error_line_names_the_exception_once() -> None:
    # XLA on the CVAE tutorial: "ValueError: ValueError: Cannot convert a partially known
    # TensorShape (None, 2) to a Tensor." (a graph error's last line names its type).
    from profiler.capture.variant import error_line

    exc = ValueError("in user code:\n\n    File x.py\nValueError: Cannot convert a shape")
    assert error_line(exc) == "ValueError: Cannot convert a shape"
    assert error_line(KeyError("k")) == "KeyError: 'k'"


def test_a_fix_that_compiles_runs_one_call_unmeasured_before_its_first_pair() -> None:
    """Keras's VAE example compiled with XLA read 466, 144 and 200 ms in its three blocks
    against 80-90 ms as written: its first block held the compilation's aftermath, and the
    interval (-623 to +253 ms) gave no verdict. The compiling fixes run one call first."""
    from pathlib import Path

    from profiler.capture.phases import Budget, PhaseContext
    from profiler.capture.phases import whatif as phase

    class Loop:
        def __init__(self) -> None:
            self.on = False
            self.log: list[tuple[bool, int]] = []
            self.t = 0

        def hold(self, *a: object) -> None:
            pass

        def in_loop_thread(self, fn) -> bool:  # type: ignore[no-untyped-def]
            return fn()

        def run(self, n: int, marks: list[int], clock) -> None:  # type: ignore[no-untyped-def]
            self.log.append((self.on, n))
            for _ in range(n):
                self.t += 90 if not self.on else 200
                marks.append(self.t)

    loop = Loop()

    class Variant:
        def __init__(self, id_: str) -> None:
            self.id, self.group, self.errors, self.block_mean = id_, 1, [], False
            self.title, self.removes, self.keeps_results, self.results_note = id_, (), True, ""
            self.check, self.share = "", 1.0

        def on(self) -> None:
            loop.on = True

        def off(self) -> None:
            loop.on = False

        def settled(self) -> bool:
            return not loop.on

    ctx = PhaseContext(None, loop, Path("."), Path("."), lambda: loop.t, step_ns=90)  # type: ignore[arg-type]
    p = phase.WhatIfPhase(Budget(1.0, 2, 100), {})
    result, ended = p._measure(ctx, Variant("keras_jit"), 3)
    assert not ended and loop.log[0] == (True, 1) and loop.log[1] == (False, 3)
    assert result.variant_ns[0] == 200 and result.baseline_ns[0] == 90
    # A fix that compiles nothing starts with its pairs.
    loop.log.clear()
    p._measure(ctx, Variant("tensor_args"), 3)
    assert loop.log[0] == (False, 3)


def test_a_what_if_that_could_not_be_applied_is_not_said_to_be_measured() -> None:
    # A numpy net's float32 (2x faster without the profiler) could not be applied, and read
    # under "measured on your loop, not shown to be a fix here".
    row = {
        "id": "numpy_float32", "title": "float32 arrays", "removes": ["compute"],
        "removes_share": 0.5, "keeps_results": False, "results_note": "", "results_check": "",
        "status": "failed", "error": "float32 did not hold through the steps", "block_steps": 3,
        "pairs": 2, "baseline_us": None, "variant_us": None, "measured_saving_us": None,
        "resolution_us": None, "predicted_saving_us": None, "predicted_share": None,
        "tolerance_us": None, "verdict": "failed", "interval_us": [],
    }  # fmt: skip
    summary = {"workloads": [{"name": "s", "label": "s.py", "slug": "s", "status": "ok",
                              "script": {"path": "s.py"}, "whatif": [row]}]}  # fmt: skip
    (card,) = focus_view.focus(summary, answered=False)
    assert card["whatifs"] == [] and card["not_fixes"] == []
    (said,) = card["not_measured"]
    assert said["text"] == "could not be applied: float32 did not hold through the steps"


def test_no_finding_beside_a_measured_fix_is_not_said_as_no_answer() -> None:
    # A numpy RL script's one BLAS thread, measured 5.1x faster, sat above "no finding fired
    # on this run's figures".
    from profiler.reports import text

    row = {"label": "compute (kernels)", "us": 128.0, "share": 0.73, "measured": True}
    fix = {"title": "BLAS on one thread", "text": "4.40 ms less", "results": "kept",
           "blocks": "10 pairs"}  # fmt: skip
    card = {"split": [row], "sentence": "A step.", "findings": [], "overhead_share": 0.27,
            "whatifs": [fix]}  # fmt: skip
    said = text.answer({"focus": [card]})
    assert "no finding fired beyond the measured fixes above." in said
    assert "no finding fired on this run's figures." in text.answer(
        {"focus": [{**card, "whatifs": []}]}
    )


def test_a_finding_holding_most_of_the_scripts_time_outside_its_steps_leads_the_verdict() -> None:
    # Keras's character LSTM: predict once a character took 55% of the script, its training
    # steps 49%; the verdict led with "compute (kernels) is 55% of the step".
    card = {
        "split": [
            {"category": "compute", "label": "compute (kernels)", "us": 25_700.0, "share": 0.55,
             "measured": True},
        ],
        "findings": [
            {"rule": "predict_in_loop", "fix": "Call model.predict once. More.",
             "cost_us": 412_000.0, "message": "m", "script_pct": 55.0,
             "lead": "the script's 240 calls of model.predict took 55% of its 140.2 s"},
        ],
    }  # fmt: skip
    xla = {"id": "keras_jit", "title": "XLA", "measured_saving_us": 5_000.0,
           "baseline_us": 45_000.0, "variant_us": 40_000.0, "verdict": "holds"}  # fmt: skip
    text = focus_view._verdict(card, {"whatif": [xla]})
    assert text.startswith(
        "Verdict: the script's 240 calls of model.predict took 55% of its 140.2 s (a training "
        "step: compute (kernels) 55%); the top fix, predicted from this run's figures: Call "
        "model.predict once; in the steps, measured on your loop: XLA, 5.00 ms less per step"
    ), text
    assert focus_view.verdict_rule(card, {"whatif": [xla]}) == "predict_in_loop"
    # Under half of the script, or refuted: the step's split leads as before.
    first = card["findings"][0]
    for change in ({"script_pct": 45.0}, {"refuted": True}):
        card["findings"] = [{**first, **change}]
        text = focus_view._verdict(card, {"whatif": [xla]})
        assert text.startswith("Verdict: compute (kernels) is 55% of the step;"), text


def test_findings_about_time_outside_the_steps_carry_their_share_and_lead() -> None:
    from types import SimpleNamespace

    from profiler.diagnoses import calls
    from profiler.diagnoses.engine import Rule, evaluate

    script = {
        "wall_s": 46.4,
        "steps": 450,
        "time": {"steps_s": 40.0},
        "keras_calls": {"predict": {"calls": 150, "ms": 30_685.0, "samples": 2400, "sized": 150}},
    }
    f: dict = {"label": "gan.py"}
    calls.call_facts(f, SimpleNamespace(script=script))
    (d,) = evaluate(calls.RULES, "workload", [{**f, "name": "gan.py"}])
    assert d.script_pct is not None and abs(d.script_pct - 66.1) < 0.1
    assert (
        d.lead
        == "the script's 150 calls of model.predict on 16 samples each took 66% of its 46.4 s"
    )
    assert d.to_json()["lead"] == d.lead and d.to_json()["script_pct"] == 66.1
    # A share without a lead (or a lead without a share) is a rule's mistake, caught at import.
    with pytest.raises(ValueError, match="a share needs a lead"):
        Rule(id="x", subject="workload", needs=("p",), when=bool, message="m", share="p")


def test_an_unexplained_step_says_how_long_the_scripts_thread_waited_for_a_core() -> None:
    # A hyperparameter grid beside a busy process: "73% of the step is unexplained".
    card = {
        "split": [
            {"category": "other", "label": "other (unexplained)", "us": 1_490.0, "share": 0.73,
             "measured": True},
            {"category": "compute", "label": "compute (kernels)", "us": 330.0, "share": 0.16,
             "measured": True},
        ],
        "findings": [],
    }  # fmt: skip
    w = {"distribution": {"wait_share": 0.45}}
    assert focus_view._verdict(card, w).startswith(
        "Verdict: 73% of the step is unexplained, the script's thread waiting for a core 45% of "
        "the timed window (the largest measured part: compute (kernels) 16%)"
    )
    # A wait under half the unexplained share, or not read: not said.
    for dist in ({"wait_share": 0.2}, {}):
        assert "waiting for a core" not in focus_view._verdict(card, {"distribution": dist})
    # Slow steps holding most of the time, the thread waiting a quarter of their share or more.
    card["split"] = card["split"][1:]
    slow = {"distribution": {"wait_share": 0.45, "outliers": 210, "outlier_share": 0.81,
                             "outlier_factor": 3.0, "mean_us": 1_920.0}}  # fmt: skip
    assert focus_view._verdict(card, slow).startswith(
        "Verdict: compute (kernels) is 16% of a typical step (210 slow steps over 3× the median "
        "hold 81% of the time; the script's thread waited for a core 45% of the timed window)"
    )


def test_a_later_fit_holding_most_of_the_script_leads_with_how_to_measure_it() -> None:
    # The imbalanced-data tutorial: its oversampled fit, 72% of the script, 45x the earlier
    # fits' steps; the verdict led with those fits' validations.
    card = {
        "split": [
            {"category": "compute", "label": "compute (kernels)", "us": 1_500.0, "share": 0.38,
             "measured": True},
        ],
        "findings": [
            {"rule": "validation_cost", "fix": "Validate less often.", "cost_us": 80_000.0,
             "message": "m"},
            {"rule": "later_fit_slower", "cost_us": None, "message": "m", "script_pct": 72.0,
             "fix": "Measure that fit's steps: python -m profiler run x.py --warmup 314 (the "
                    "phases then run after the earlier fits' steps).",
             "lead": "a later fit took 72% of the script's 117.3 s"},
        ],
    }  # fmt: skip
    assert focus_view._verdict(card, {}) == (
        "Verdict: a later fit took 72% of the script's 117.3 s (the earlier fits' steps: compute "
        "(kernels) 38%); measure that fit's steps: python -m profiler run x.py --warmup 314 (the "
        "phases then run after the earlier fits' steps)."
    )


def test_steps_whose_work_grew_are_not_said_to_be_the_machines_speed() -> None:
    # TensorFlow's actor-critic tutorial: episodes grow from ~10 to 500 steps as it learns.
    drift = {
        "large": True,
        "ratio": 12.4,
        "interval": [6.5, 27.4],
        "share_pts": 42.1,
        "repeat": 0,
        "blocks": [{"repeat": 0, "median_us": m} for m in (8_460, 104_960)],
    }
    blocks = [{"median_us": w, "cpu_us": c, "others_cores": 1.0}
              for w, c in ((16_023, 13_411), (41_663, 30_216), (103_840, 112_500))]  # fmt: skip
    note = focus_view._drift_note(drift, blocks)
    assert note.startswith("The steps' time varied by 1140% during the run"), note
    assert "their CPU time a step ran from 13.41 ms to 112.50 ms" in note
    # The CPU flat, or the other processes' load moving with it: the machine's speed.
    flat = [{**b, "cpu_us": 13_000.0} for b in blocks]
    busy = [{**b, "others_cores": o} for b, o in zip(blocks, (0.1, 1.0, 1.8), strict=True)]
    # The load moving against the CPU time (the helpers' work beside the actor-critic run:
    # 0.9-1.4 cores, lowest where the episodes were longest): still the work.
    against = [{**b, "others_cores": o} for b, o in zip(blocks, (1.4, 1.0, 0.9), strict=True)]
    assert focus_view._drift_note(drift, against).startswith("The steps' time varied")
    for rows in (flat, busy):
        assert focus_view._drift_note(drift, rows).startswith("The machine's speed varied by")


def test_kernels_that_one_blas_thread_removes_are_named_as_blas_threads_waiting() -> None:
    # Karpathy's pg-pong beside other work: "compute (kernels) is 98% of a typical step" read
    # as nothing to do, where one BLAS thread made the step 6.0x faster (about 9x on its mean
    # frame without the profiler).
    card = {
        "split": [
            {"category": "compute", "label": "compute (kernels)", "us": 5_080.0, "share": 0.98,
             "measured": True},
        ],
        "findings": [],
    }  # fmt: skip
    blas = {"id": "numpy_blas_one_thread", "title": "numpy's BLAS on one thread",
            "measured_saving_us": 9_100.0, "pairs": 10, "interval_us": [3_770.0, 14_430.0],
            "baseline_us": 10_790.0, "variant_us": 1_790.0, "verdict": "holds"}  # fmt: skip
    text = focus_view._verdict(card, {"whatif": [blas]})
    assert text.startswith(
        "Verdict: compute (kernels), most of it numpy's BLAS threads waiting for one another "
        "and for cores, is 98"
    )
    assert "the top fix, measured on your loop: numpy's BLAS on one thread" in text
    # A saving under half the step, or one its blocks are not sure of: the kernels as they are.
    for other in ({**blas, "measured_saving_us": 3_000.0, "interval_us": [1_000.0, 5_000.0]},
                  {**blas, "interval_us": [-500.0, 18_000.0]}):  # fmt: skip
        assert focus_view._verdict(card, {"whatif": [other]}).startswith(
            "Verdict: compute (kernels) is 98"
        )


def test_steps_per_execution_is_not_tried_on_epochs_of_fewer_batches_than_it_groups() -> None:
    # TF's basic training loops guide fits one batch an epoch: its steps_per_execution blocks
    # read "72 ms slower" beside a busy process, a fix that cannot help there.
    from types import SimpleNamespace

    from profiler.capture import whatifs

    model = SimpleNamespace(steps_per_execution=1)
    one = SimpleNamespace(facts=SimpleNamespace(model=model, fit={"steps_per_epoch": 1}))
    got = whatifs.keras_steps(one, 4)  # type: ignore[arg-type]
    assert got == "an epoch of fit is one batch, and a call runs the batches of one epoch only"


def test_a_what_if_with_no_prediction_refutes_its_fix_only_where_it_rules_out_a_tenth() -> None:
    # Keras-GAN's DCGAN: predict -> model(x) measured -93 to +147 ms on a 372 ms step in 3
    # pairs beside a busy process, and its finding read "Not the advice here ... no measurable
    # change"; an interval that stays under a tenth of the step is evidence against it.
    from types import SimpleNamespace

    from profiler.diagnoses import performance

    wide = SimpleNamespace(saves=False, verdict="inconclusive", interval_us=(-93_031.0, 147_337.0),
                           predicted_us=None, baseline_us=371_884.0)  # fmt: skip
    assert not performance.refutes(wide)
    tight = SimpleNamespace(**{**vars(wide), "interval_us": (-9_000.0, 12_000.0)})
    assert performance.refutes(tight)
    # Slower is always evidence against; a prediction is judged against half of it.
    assert performance.refutes(SimpleNamespace(**{**vars(wide), "verdict": "slower"}))
    predicted = SimpleNamespace(**{**vars(tight), "predicted_us": 30_000.0})
    assert performance.refutes(predicted)
