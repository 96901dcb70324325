"""Diagnosis rules for training efficiency (seed 004): why one loop "needs more epochs".

Place in the pipeline: analysis (pure). ``profiler.analysis.efficiency.pair_facts`` measures a pair
of implementations (A, the loop in question; B, the reference) into flat facts; these rows say when
a finding holds and how to word it, and ``profiler.diagnoses.evaluate`` applies them
(``profiler.analysis.efficiency.summarize`` does). Every number in a message comes from the facts; a
rule whose facts are missing (not measured, target not reached) stays silent.

Thresholds are deliberately loose: each rule must fire on the seed pair (``adam_handwritten``
vs ``keras_adam``) and stay silent on two identical implementations, whose facts are exactly
equal except for timing noise (well under the 5× the overhead rule asks for).
"""

from __future__ import annotations

from profiler.diagnoses.engine import Facts, Rule

#: The facts' subject: a pair of implementations.
SUBJECT = "efficiency_pair"


def _differs(ratio: float, by: float) -> bool:
    """``ratio`` is more than a factor ``by`` away from 1, either way."""
    return ratio > by or ratio < 1 / by


def _units_differ(f: Facts) -> bool:
    return _differs(f["epoch_samples_ratio"], 1.5) or _differs(f["epoch_updates_ratio"], 1.5)


def _stale(f: Facts) -> bool:
    return f["reuse_a"] >= 2 and f["coverage_a"] < 0.5 * f["coverage_b"]


def _overhead(f: Facts) -> bool:
    # Much slower per update, and not because it does that much more arithmetic.
    return f["time_ratio"] >= 5 and f["time_ratio"] >= 5 * f["flops_ratio"]


def _ranking_flips(f: Facts) -> bool:
    """Counting epochs names a different winner than counting samples or updates (by > 20%)."""

    def winner(a: float, b: float) -> str:
        return "a" if a * 1.2 < b else ("b" if b * 1.2 < a else "tie")

    by_epochs = winner(f["te_a"], f["te_b"])
    return by_epochs != "tie" and (
        winner(f["ts_a"], f["ts_b"]) not in (by_epochs, "tie")
        or winner(f["tu_a"], f["tu_b"]) not in (by_epochs, "tie")
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="epochs_are_different_units",
        subject=SUBJECT,
        needs=("big", "small", "epoch_samples_ratio", "epoch_updates_ratio", "epoch_time_ratio"),
        when=_units_differ,
        message=(
            "1 epoch of {big} is {epoch_samples_ratio:,.0f} epochs of {small} in samples, "
            "{epoch_updates_ratio:,.2f} in updates, {epoch_time_ratio:,.0f} in time: "
            "compare on samples or updates"
        ),
        fix=(
            "plot the loss on a fixed evaluation set against samples processed or parameter "
            "updates (and wall time), never against each loop's own epochs"
        ),
    ),
    Rule(
        id="work_to_target",
        subject=SUBJECT,
        needs=("a", "b", "target", "ts_a", "ts_b", "tu_a", "tu_b", "te_a", "te_b", "tw_a", "tw_b"),
        when=_ranking_flips,
        message=(
            "to excess loss ≤ {target:g}, {a} needs {ts_a:,.0f} samples, {tu_a:,.0f} updates, "
            "{te_a:,.0f} of its epochs, {tw_a:,.0f} ms; {b} needs {ts_b:,.0f} samples, "
            "{tu_b:,.0f} updates, {te_b:,.0f} epochs, {tw_b:,.0f} ms: which loop is ahead "
            "depends on the unit"
        ),
        fix="state the unit: per sample, per update or per second, not per epoch",
    ),
    Rule(
        id="stale_batch",
        subject=SUBJECT,
        needs=(
            "a",
            "b",
            "reuse_epochs_a",
            "coverage_a",
            "coverage_b",
            "epochs_a_ref",
            "samples_ref",
            "samples_end",
            "coverage_end_a",
            "floor_a",
            "floor_b",
        ),
        when=_stale,
        message=(
            "{a} reuses one batch for {reuse_epochs_a:,.0f} epochs; it has seen "
            "{coverage_a:.1%} of the data after {epochs_a_ref:,.0f} epochs ({samples_ref:,} "
            "samples; {b}: {coverage_b:.0%}) and {coverage_end_a:.0%} after {samples_end:,}, "
            "where its excess loss is {floor_a:.2g} ({b}: {floor_b:.2g})"
        ),
        fix=(
            "draw a fresh batch every epoch, or better pass over all the data each epoch in "
            "shuffled mini-batches (adam_freshbatch, adam_minibatch)"
        ),
    ),
    Rule(
        id="epoch_keyed_bias_correction",
        subject=SUBJECT,
        needs=(
            "a",
            "counter_a",
            "updates_a",
            "mult_a",
            "mult_min_a",
            "counter_min_a",
            "updates_min_a",
        ),
        when=lambda f: f["mult_min_a"] < 0.9,
        message=(
            "{a}'s bias-correction counter is {counter_a:,} after {updates_a:,} updates: "
            "steps shrunk ×{mult_a:.2f} (×{mult_min_a:.2f} at counter {counter_min_a:,}, after "
            "{updates_min_a:,} updates)"
        ),
        fix=(
            "key Adam's bias correction to the update count, beta ** updates, not to the "
            "epoch (adam_globalstep)"
        ),
    ),
    Rule(
        id="printed_loss_is_running_mean",
        subject=SUBJECT,
        needs=(
            "printed_side",
            "other_side",
            "other_printed",
            "printed_epoch",
            "printed_value",
            "eval_value",
            "printed_gap",
            "printed_gap_min",
            "printed_gap_max",
        ),
        when=lambda f: abs(f["printed_gap"]) > 0.01,
        message=(
            "the printed loss is a running mean: {printed_side}'s fit reports "
            "{printed_value:.4g} for epoch {printed_epoch}, {printed_gap:+.1%} against the "
            "loss on the evaluation set at the epoch's end ({eval_value:.4g}; "
            "{printed_gap_min:+.1%} to {printed_gap_max:+.1%} over all epochs and seeds); "
            "{other_side} prints {other_printed}"
        ),
        fix=(
            "compare losses computed the same way: evaluate both on the same fixed set at the "
            "same point (model.evaluate after the epoch), not fit's progress-bar figure"
        ),
    ),
    Rule(
        id="initializers_differ",
        subject=SUBJECT,
        needs=(
            "a",
            "b",
            "init_a",
            "init_b",
            "init_ratio_min",
            "init_ratio_max",
            "initializer_a",
            "initializer_b",
        ),
        when=lambda f: (
            f["initializer_a"] != f["initializer_b"]
            and max(abs(f["init_ratio_min"] - 1), abs(f["init_ratio_max"] - 1)) > 0.01
        ),
        message=(
            "initial losses differ: {a} starts at {init_a:.4g}, {b} at {init_b:.4g} "
            "(×{init_ratio_min:.2f} to ×{init_ratio_max:.2f} over seeds): initializers differ "
            "({initializer_a} vs {initializer_b})"
        ),
        fix=(
            "start both from the same weights when comparing optimizers "
            "(keras_adam_zeroinit: Dense(1, kernel_initializer='zeros'))"
        ),
    ),
    Rule(
        id="overhead_bound",
        subject=SUBJECT,
        needs=(
            "slow",
            "fast",
            "slow_us",
            "fast_us",
            "slow_flops",
            "fast_flops",
            "time_ratio",
            "flops_ratio",
            "slow_mflops",
        ),
        when=_overhead,
        message=(
            "time per update is {slow_us:,.0f} µs for {slow_flops:,.0f} flops in {slow} "
            "({slow_mflops:.2g} Mflop/s) against {fast_us:,.1f} µs for {fast_flops:,.0f} flops "
            "in {fast}: overhead-bound"
        ),
        fix=(
            "the time is per-call overhead, not arithmetic: run many updates per call "
            "(fit's steps_per_execution, a loop inside one tf.function) or stay in numpy at "
            "this size"
        ),
    ),
)
