"""The Keras call what-if: ``model.predict(x)`` inside the loop answered by the model called
directly, ``model(x, training=False)``, the fix Keras's and TensorFlow's trackers give for a
loop of predict calls that is slow and grows (keras-team/keras#13118, tensorflow/tensorflow#33009).

Place in the pipeline: the script process, one of ``profiler.capture.whatifs``'s builders. The
switch point is the detector's own wrapper of ``predict`` (``detect._blocked``): while the
variant is on, ``StepDriver.keras_twins["predict"]`` answers the script's outermost predict
calls. A call the direct call cannot stand for (a ``steps``, ``callbacks`` or a ``batch_size``
smaller than its input, a generator or dataset as input) runs predict as written. The first
direct call is checked against predict on the same input (``CHECK_RTOL``); a difference, or a
direct call that raises, switches the variant off for good and the step runs as written.

predict sets up a data adapter, an epoch iterator and its callbacks on every call (157 ms a call
for one sample on this machine, against ~1 ms for the direct call), and in some Keras and
TensorFlow versions keeps some of it: the what-if phase reads resident memory at each block's
ends, so the growth finding can say whether the direct call stops the growth.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from profiler.capture.script.driver import StepDriver
from profiler.capture.variant import Variant, error_line

PREDICT_DIRECT = "predict_direct"

#: The predict calls a step must make (during the warm-up, per step) for the what-if to apply:
#: the memory finding's rate for a per-step predict (``memory_causes.MIN_RATE``).
MIN_PER_STEP = 0.5
#: Under that, the steps a call comes with (their period) are timed as one group, up to this
#: many: a rarer call is periodic work the blocks cannot hold.
MAX_GROUP = 10
#: The direct call's outputs must equal predict's within this relative tolerance (the same
#: kernels on the same batch; predict's one batch of at most 32 samples is the input itself).
CHECK_RTOL = 1e-5
CHECK_ATOL = 1e-6
#: predict's keyword arguments the direct call keeps the meaning of.
_SAME = frozenset({"x", "verbose", "batch_size"})


def _rows(x: Any) -> int | None:
    """The leading dimension of an array or tensor input (or of each of a list or dict of
    them, all equal); None for any other input (a generator, a dataset)."""
    items = (
        list(x.values())
        if isinstance(x, dict)
        else list(x)
        if isinstance(x, (list, tuple))
        else [x]
    )
    sizes = set()
    for item in items:
        shape = getattr(item, "shape", None)
        if shape is None or not hasattr(item, "dtype") or len(shape) == 0:
            return None
        sizes.add(shape[0])
    return int(sizes.pop()) if len(sizes) == 1 and None not in sizes else None


def period(at_steps: list[int]) -> int | None:
    """The steps between a call and the next, from the steps done at each call: the median
    gap between the steps that made calls (a GAN's ``generator.predict`` once an iteration of
    three ``train_on_batch`` steps: 3, where its warm-up's 3 calls in 5 steps, its first
    iteration's and an extra one for sample images among them, read once a step and the blocks'
    median steps held no call). None before two steps made calls."""
    made = sorted(set(at_steps))
    gaps = sorted(b - a for a, b in itertools.pairwise(made))
    return max(1, gaps[len(gaps) // 2]) if gaps else None


def predict_direct(driver: StepDriver) -> Variant | str:
    """The loop's ``model.predict(x)`` calls answered by ``model(x, training=False)``."""
    calls = driver.facts.keras_calls.get("predict")
    done = max(driver.done, 1)
    if calls is None or calls.calls == 0:
        return "no model.predict call in the loop"
    # Fewer calls than steps (a GAN's generator.predict once an iteration of three
    # train_on_batch steps): the blocks' figures are the mean of each group of that many
    # steps, so each holds its call (a block's median step held none: "no change").
    group = period(calls.at_steps) or (
        round(done / calls.calls) if calls.calls / done < MIN_PER_STEP else 1
    )
    if group > MAX_GROUP:
        return (
            f"model.predict was called {calls.calls} times in {done} steps: once every "
            f"{group} steps or less (the what-if's blocks would not reach it)"
        )
    import numpy as np
    import tensorflow as tf

    def direct(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        model = args[0]
        x = args[1] if len(args) > 1 else kw.get("x")
        n = _rows(x) if x is not None else None
        size = kw.get("batch_size")
        if len(args) > 2 or set(kw) - _SAME or n is None or (size is not None and size < n):
            return fn(*args, **kw)
        try:
            # Writable copies, as predict returns: a tensor's buffer seen through np.asarray is
            # read-only (a DQN writing its target into predict's output raised "assignment
            # destination is read-only" in the what-if's blocks, and the script died).
            out = tf.nest.map_structure(lambda t: np.array(t), model(x, training=False))
            if not variant.check:  # the first direct call: against predict's outputs
                pairs = list(
                    zip(tf.nest.flatten(out), tf.nest.flatten(fn(*args, **kw)), strict=True)
                )
                shaped = all(a.shape == np.shape(b) for a, b in pairs)
                worst = (
                    max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in pairs)
                    if shaped
                    else float("inf")
                )
                same = shaped and all(
                    np.allclose(a, b, rtol=CHECK_RTOL, atol=CHECK_ATOL) for a, b in pairs
                )
                variant.check = (
                    f"the first call's outputs against model.predict on the same input (max "
                    f"difference {worst:.3g}, tolerance {CHECK_RTOL:g} relative)"
                )
                if not same:
                    raise ValueError(f"model(x) differs from model.predict(x) by {worst:.3g}")
            return out
        except Exception as exc:  # off for good: this call as written
            variant.errors.append(error_line(exc))
            driver.keras_twins.pop("predict", None)
            return fn(*args, **kw)

    def on() -> None:
        if not variant.errors:
            driver.keras_twins["predict"] = direct

    def off() -> None:
        driver.keras_twins.pop("predict", None)

    variant = Variant(
        PREDICT_DIRECT,
        "model.predict(x) in the loop called as model(x, training=False)",
        (),
        True,
        "the same model on the same inputs, its outputs as numpy arrays as predict returns them",
        on,
        off,
        group=group,
    )
    return variant
