"""The case study, in one place: the two seed questions and everything the toolkit runs for them.

Place in the pipeline: data the generic layers read. The experiments process times ``PAIRS``
and ``SWEEP`` (``profiler.capture.experiments``), the efficiency process trains
``IMPLEMENTATIONS`` (``profiler.capture.efficiency``), the analysis isolates ``CAUSES`` and
diagnoses ``DIAGNOSED_PAIRS`` (``profiler.analysis``), the performance diagnoses quote a pair's
measured saving by its id (``profiler.diagnoses.performance``), and the report's first screen
answers ``QUESTIONS`` (``profiler.reports.viewmodel``). Everything is keyed by ids and workload
names; nothing generic names a seed. A run whose workloads are none of these (a user's script)
shows none of it.

* Seed 000 (``000_*.txt``): "Why is gradient descent with TensorFlow much slower than a basic
  numpy implementation?" The TF1 ``session.run`` loop, its counterfactual variants, and the size
  sweep of both implementations.
* Seed 004 (``004_*.txt``): "Why does TF's Adam reach a tenth of my loss in 3 epochs, when my
  hand-written Adam needs 100?" The hand-written loop, one fix at a time, and Keras ``fit``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from profiler.model.studies import (
    PRINTED_EVAL,
    PRINTED_NONE,
    PRINTED_RUNNING_MEAN,
    Cause,
    Implementation,
    Pair,
    Removal,
    Study,
)

# --- seed 000: the pairs and the sweep ---------------------------------------------------------

#: The declared experiments. Each pair's id keys its measured saving everywhere (the fact
#: ``<id>_saving_us`` the performance diagnoses quote). Parts are named by the attribution
#: (``profiler.analysis.attribution``): feed_fetch.feed (feed conversion and handling),
#: feed_fetch.cast (the float64 -> float32 conversion inside it), feed_fetch.fetch_value (one
#: fetched value), dispatch.per_call (the session/function call machinery around the executor).
PAIRS: tuple[Pair, ...] = (
    Pair(
        "nofeed",
        "data in the graph",
        "tf1_gd",
        "tf1_gd_nofeed",
        (Removal("feed_fetch", "feed"),),
        "feeding the arrays every step costs the feed conversion and handling",
    ),
    Pair(
        "trainonly",
        "fetch only the train op",
        "tf1_gd",
        "tf1_gd_trainonly",
        (Removal("feed_fetch", "fetch_value"),),
        "fetching the loss every step costs building its result",
    ),
    Pair(
        "f32feed",
        "feed float32",
        "tf1_gd",
        "tf1_gd_f32feed",
        (Removal("feed_fetch", "cast"),),
        "feeding float64 to float32 placeholders costs a cast per step",
    ),
    Pair(
        "whileloop",
        "loop in the graph (tf.while_loop)",
        "tf1_gd",
        "tf1_gd_whileloop",
        (Removal("python"), Removal("feed_fetch"), Removal("dispatch", "per_call")),
        "one session.run per step costs the Python, feed/fetch and call overhead each step",
    ),
    Pair(
        "functionloop",
        "loop inside one tf.function",
        "tf1_gd",
        "tf2_function_loop",
        (Removal("python"), Removal("feed_fetch"), Removal("dispatch", "per_call")),
        "a TF2 function running the whole loop leaves only kernels and in-graph dispatch",
    ),
    Pair(
        "function_step",
        "tf.function per step",
        "tf2_eager_gd",
        "tf2_function_step",
        (Removal("python"), Removal("dispatch", "per_op")),
        "eager execution costs Python and dispatch for every op; one function call does not",
    ),
)

#: Workloads the size sweep times, and its default problem sizes.
SWEEP_WORKLOADS: tuple[str, ...] = ("numpy_gd", "tf1_gd")
SWEEP_SIZES: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)
#: (higher fixed cost, lower fixed cost): where the first's step becomes the faster, if ever.
CROSSOVER: tuple[str, str] = ("tf1_gd", "numpy_gd")

#: The report's A-vs-B waterfall: the first pair whose workloads both ran.
WATERFALL_PAIRS: tuple[tuple[str, str], ...] = (
    ("tf1_gd", "numpy_gd"),
    ("tf2_eager_gd", "tf2_function_step"),
)

# --- seed 004: training efficiency -------------------------------------------------------------

#: The implementations, in run order: the asker's loop, one fix at a time, all fixes, Keras.
IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("adam_handwritten", PRINTED_EVAL, "the asker's loop, every quirk kept"),
    Implementation("adam_freshbatch", PRINTED_EVAL, "asker's loop, a fresh batch every epoch"),
    Implementation("adam_globalstep", PRINTED_EVAL, "asker's loop, bias correction by updates"),
    Implementation("adam_meanbatch", PRINTED_EVAL, "asker's loop, one mean-of-batch update"),
    Implementation("adam_minibatch", PRINTED_NONE, "the corrected loop: fit's algorithm in numpy"),
    Implementation("keras_adam_zeroinit", PRINTED_RUNNING_MEAN, "Keras fit from w = b = 0"),
    Implementation("keras_adam", PRINTED_RUNNING_MEAN, "the asker's Keras fit (glorot init)"),
)

CAUSES: tuple[Cause, ...] = (
    Cause("stale_batch", "one batch reused for 129 epochs", "adam_handwritten", "adam_freshbatch"),
    Cause(
        "epoch_bias_correction",
        "bias correction keyed to the epoch counter",
        "adam_handwritten",
        "adam_globalstep",
    ),
    Cause(
        "per_sample_updates",
        "single-sample updates instead of the batch's mean",
        "adam_handwritten",
        "adam_meanbatch",
    ),
    Cause(
        "all_loop_fixes",
        "the asker's loop against the corrected one (every fix)",
        "adam_handwritten",
        "adam_minibatch",
    ),
    Cause(
        "framework",
        "Keras fit against the same algorithm in numpy (both from zeros)",
        "keras_adam_zeroinit",
        "adam_minibatch",
    ),
    Cause(
        "random_init", "Keras's glorot init instead of zeros", "keras_adam", "keras_adam_zeroinit"
    ),
)

#: Pairs the efficiency diagnoses are computed for: (A, B), A the loop in question, B the
#: reference; the first is the seed's own question.
SEED_PAIR = ("adam_handwritten", "keras_adam")
DIAGNOSED_PAIRS: tuple[tuple[str, str], ...] = (SEED_PAIR, ("adam_minibatch", "keras_adam"))

#: Samples each implementation trains on, by implementation name or else by framework,
#: rounded up to whole epochs of n. Chosen from measurements here (2 cores;
#: profiler/docs/efficiency.md,
#: "Budgets"): numpy loops cost 0.2–3.5 µs a sample, and 166,400 samples (40 Keras epochs)
#: take every one of them to its floor; Keras ``fit`` costs ~30 µs a sample (~1 ms an update)
#: and needs up to 166,400 for every seed to reach the target; the zero-initialised Keras runs
#: to the equal-updates point only (25 epochs, 3,250 updates), which is what its causes need.
BUDGETS: Mapping[str, int] = {
    "numpy": 166_400,
    "keras": 166_400,
    "keras_adam_zeroinit": 104_000,
}
#: "Equal samples": 3 of Keras's epochs on n = 4,160 (the question's "3 epochs").
REF_SAMPLES = 12_480
#: "Equal updates": 100 of the asker's epochs (the question's "100"), 32 updates each.
REF_UPDATES = 3_200

#: The efficiency study as the analysis reads it.
EFFICIENCY = Study(
    implementations=IMPLEMENTATIONS,
    causes=CAUSES,
    diagnosed_pairs=DIAGNOSED_PAIRS,
    budgets=BUDGETS,
    ref_samples=REF_SAMPLES,
    ref_updates=REF_UPDATES,
)


def runs_efficiency(workloads: set[str]) -> bool:
    """Whether a run of these workloads trains the efficiency study (one of its loops is in)."""
    return any(i.name in workloads for i in IMPLEMENTATIONS)


# --- the first screen: the questions, answered from a run's summary ----------------------------


@dataclass(frozen=True)
class Question:
    """A seed question and how a run's summary answers it (None: the run cannot)."""

    id: str
    text: str
    answer: Callable[[Mapping[str, Any]], list[str] | None]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _answer_000(summary: Mapping[str, Any]) -> list[str] | None:
    """Why TensorFlow is slower than numpy here, in two sentences with the run's numbers."""
    by = {w["name"]: w for w in summary.get("workloads", []) if w.get("attribution")}
    if "tf1_gd" not in by or "numpy_gd" not in by:
        return None
    tf, np_ = by["tf1_gd"]["attribution"], by["numpy_gd"]["attribution"]
    t, n = tf["typical_us"], tf["reference_us"]
    ratio = n / np_["reference_us"] if np_["reference_us"] else 0.0
    share = tf["share"]
    kernels = (
        f"only {t['compute']:,.0f} µs of its step is kernels"
        if t.get("compute") is not None
        else "its kernels were not measured (the framework phase measures them)"
    )
    first = (
        f"The TF1 session.run loop (tf1_gd) takes {n:,.0f} µs per step against numpy's "
        f"{np_['reference_us']:,.1f} µs (numpy_gd), {ratio:,.0f}× slower for the same "
        f"regression, and {kernels}."
    )
    parts = [
        f"{what} {t[c]:,.0f} µs ({_pct(share[c])})"
        for c, what in (
            ("feed_fetch", "feed_dict handling"),
            ("dispatch", "framework dispatch"),
            ("python", "Python"),
        )
        if t.get(c) is not None and share.get(c) is not None
    ]
    if not parts:
        return [first]
    second = "The rest is overhead around them: " + ", ".join(parts)
    if (t.get("other") or 0) >= 0.5 and share.get("other") is not None:
        second += f", unexplained {t['other']:,.0f} µs ({_pct(share['other'])})"
    second += "."
    for p in (summary.get("experiments") or {}).get("pairs", []):
        if p.get("id") == "whileloop" and p["variant_us"]:
            second += (
                f" Running the same loop inside the graph (tf.while_loop) measured "
                f"{p['variant_us']:,.1f} µs per step."
            )
    return [first, second]


def _answer_004(summary: Mapping[str, Any]) -> list[str] | None:
    """Why Keras needs fewer epochs, from the efficiency section's pair facts."""
    eff = summary.get("efficiency") or {}
    pair = next((p for p in eff.get("pairs", []) if (p.get("a"), p.get("b")) == SEED_PAIR), None)
    if pair is None:
        return None
    f = pair["facts"]
    first = (
        f"Epochs are different units: one {f['b']} epoch is {f['epoch_samples_ratio']:,.0f}× "
        f"the samples and {f['epoch_updates_ratio']:.2f}× the updates of one {f['a']} epoch."
    )
    second = ""
    if f.get("ts_a") and f.get("ts_b") and f.get("tu_a") and f.get("tu_b"):
        by_samples = f["a"] if f["ts_a"] < f["ts_b"] else f["b"]
        by_updates = f["a"] if f["tu_a"] < f["tu_b"] else f["b"]
        second = (
            f"To excess loss ≤ {f['target']:g}, {f['a']} needs {f['ts_a']:,.0f} samples and "
            f"{f['tu_a']:,.0f} updates, {f['b']} {f['ts_b']:,.0f} samples and "
            f"{f['tu_b']:,.0f} updates: per sample {by_samples} is ahead, per update "
            f"{by_updates}"
        )
        if f.get("mult_a") is not None:
            second += (
                f"; the hand-written bias correction keyed to its epoch counter shrinks its "
                f"steps ×{f['mult_a']:.2f} after {f['updates_a']:,} updates"
            )
        second += "."
    elif f.get("target") is not None:
        missing = [side for side, key in ((f["a"], "ts_a"), (f["b"], "ts_b")) if not f.get(key)]
        second = (
            f"Within this run's sample budget {' and '.join(missing)} did not reach excess loss "
            f"≤ {f['target']:g}, so work to the target is not compared here (the default "
            f"`make profile` budgets reach it)."
        )
    return [s for s in (first, second) if s]


QUESTIONS: tuple[Question, ...] = (
    Question(
        "000",
        "Why is gradient descent with TensorFlow much slower than a basic numpy implementation?",
        _answer_000,
    ),
    Question(
        "004",
        "Why does TensorFlow's Adam reach a tenth of my loss in 3 epochs when my hand-written "
        "Adam needs 100?",
        _answer_004,
    ),
)


def answers(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The questions this run answers: ``{"seed", "question", "sentences"}`` each."""
    out = []
    for q in QUESTIONS:
        sentences = q.answer(summary)
        if sentences:
            out.append({"seed": q.id, "question": q.text, "sentences": sentences})
    return out


#: The seed-000 TF1 script, verbatim, profiled with its what-ifs after the experiments: each
#: what-if beside the hand-written pair that makes the same fix (what-if id -> pair id; None:
#: no hand-written pair makes that fix).
SEED_SCRIPT = "tests/data/seed000_tf1.py"
SEED_SCRIPT_ARGS = ("--tf1", "--max-steps", "6000", "--phases", "timed,framework,hooks,whatif")
SEED_WHATIF_PAIRS: dict[str, str | None] = {"tf1_feeds_once": "f32feed", "tf1_callable": None}
#: The case-study workload whose selection runs it.
SEED_SCRIPT_FOR = "tf1_gd"
