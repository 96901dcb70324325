"""Seed 004, Keras side: the asker's ``Sequential([Dense(1)])`` trained by ``fit`` with Adam.

Counterpart of ``adam_handwritten`` (seed 004), the asker's TensorFlow code: ``Dense(1)``
(glorot-uniform kernel, zero bias, seeded with ``keras.utils.set_random_seed(seed)``),
``compile(loss="mse", optimizer=Adam(learning_rate=0.001))``, ``fit(x[:, None], y, batch_size=32,
verbose=0)`` on the seed-004 data (``profiler.workloads.seed004``, float64 numpy arrays as the asker
would pass them). One Keras epoch is 130 shuffled mini-batch updates over all the data; the asker's
is 32 single-sample updates on a stale batch. It shows what an "epoch" costs in Keras: ~700–900 µs
per update for ~400 flops, mostly per-call dispatch and a fixed per-epoch iterator set-up.

A step is one batch. Keras runs whole epochs, so ``run(n)`` calls ``fit`` for ``ceil(n / 130)``
epochs and may run more steps than asked; a callback stamps the end of every batch. Each
``run`` is one ``fit`` call: its set-up lands in the first batch and, because the last boundary
is re-stamped when ``fit`` returns, its tear-down in the last (a user's single ``fit`` pays these
once, not once per window). ``measure_callback_cost`` measures what the callback adds.
"""

from __future__ import annotations

import functools
import inspect
import statistics
from typing import Any

from profiler.clock import Clock, now_ns
from profiler.model import WorkDecl
from profiler.workloads.base import KERAS, Loop, LoopInfo, Params, StepWrapper, WorkloadSpec

BATCH_SIZE = 32
LR = 0.001

#: Flops per sample of a batch, from the graph's expressions: matmul 1 (K = 1: a multiply),
#: bias add 1; loss: subtract, square, mean 3; its gradient (mean, square, subtract) 3;
#: kernel gradient 2 (multiply, add), bias gradient 1.
FLOPS_PER_SAMPLE = 11
#: Flops per update outside the batch: Adam on 2 variables, 12 each, plus 7 for ``alpha``.
FLOPS_PER_UPDATE = 31
#: float32 elements read + written per sample by those ops (22), 4 bytes each; the float64
#: inputs' cast to float32 not counted (lower bound).
BYTES_PER_SAMPLE = 22 * 4
#: Adam's state and variables: 2 variables x (variable, m, v, gradient, read and write) ~ 10.
BYTES_PER_UPDATE = 2 * 10 * 4


def work(n: int) -> WorkDecl:
    return WorkDecl(
        samples_per_step=BATCH_SIZE,
        updates_per_step=1,
        steps_per_epoch=-(-n // BATCH_SIZE),
        flops_per_step=FLOPS_PER_SAMPLE * BATCH_SIZE + FLOPS_PER_UPDATE,
        bytes_per_step=BYTES_PER_SAMPLE * BATCH_SIZE + BYTES_PER_UPDATE,
    )


@functools.cache
def _callback_classes() -> tuple[type, type]:
    """The marker callbacks, defined once keras is imported (see ``_callback``)."""
    import keras

    class MarkBatches(keras.callbacks.Callback):
        def __init__(self, marks: list[int], clock: Clock) -> None:
            super().__init__()
            self._append = marks.append
            self._clock = clock

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._append(self._clock())

    class WrapBatches(MarkBatches):
        def __init__(self, marks: list[int], clock: Clock, wrap: StepWrapper, first: int) -> None:
            super().__init__(marks, clock)
            self._wrap = wrap
            self._step = first
            self._ctx: Any = None

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self._ctx = self._wrap(self._step)
            self._ctx.__enter__()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._ctx.__exit__(None, None, None)
            self._step += 1
            self._append(self._clock())

    return MarkBatches, WrapBatches


def _callback(marks: list[int], clock: Clock, wrap: StepWrapper | None, first: int) -> Any:
    """A Keras callback appending ``clock()`` to ``marks`` at the end of every training batch.

    With ``wrap``, each batch also runs inside ``wrap(global_step)`` (``first`` for the first
    batch), entered when the batch begins and exited when it ends, before the timestamp. Only
    the hooks it needs are overridden; the hot path is one method call and an append.
    """
    mark, wrapped = _callback_classes()
    return mark(marks, clock) if wrap is None else wrapped(marks, clock, wrap, first)


class KerasLoop(Loop):
    """A ``Loop`` whose ``run`` drives ``model.fit`` over whole epochs (see the module doc)."""

    def __init__(self, model: Any, x: Any, y: Any, **kwargs: Any) -> None:
        self.model = model
        self.x = x
        self.y = y
        super().__init__(step=self.one_epoch, **kwargs)

    def fit(self, epochs: int, callbacks: list[Any] | None = None) -> None:
        # The asker's call, with verbose=0 (the progress bar would go to a log file anyway).
        self.model.fit(
            self.x, self.y, batch_size=BATCH_SIZE, epochs=epochs, verbose=0, callbacks=callbacks
        )

    def one_epoch(self) -> None:
        """One unmarked epoch (``step`` for callers that want one; ``run`` does not use it)."""
        self.fit(1)

    def run(self, n: int, marks: list[int], clock: Clock, wrap: StepWrapper | None = None) -> None:
        """Run whole epochs covering at least ``n`` steps, appending ``clock()`` after each."""
        before = len(marks)
        epochs = -(-n // self.work.steps_per_epoch)
        self.fit(epochs, [_callback(marks, clock, wrap, self.steps_done)])
        ran = len(marks) - before
        if ran:
            # fit's tear-down after the last batch belongs to this segment's last step.
            marks[-1] = clock()
        self.steps_done += ran


def measure_callback_cost(loop: KerasLoop, n: int = 20_000, repeats: int = 5) -> int:
    """Nanoseconds per batch the marker callback adds to ``fit``; also sets
    ``loop.probes["callback_cost_ns"]``.

    Times the per-batch callback dispatch exactly as ``fit`` makes it (``on_train_batch_begin``,
    then ``on_train_batch_end`` with the loss tensor in ``logs``, through a ``CallbackList`` with
    ``fit``'s History) with and without the marker, ``n`` batches per block, ``repeats``
    alternating blocks; returns the difference of the medians. The whole of ``fit`` varies by
    tens of µs a batch between calls, far more than this, so timing ``fit`` itself
    (``measure_callback_cost_fit``) cannot resolve it. Does not train the model.
    """
    import tensorflow as tf
    from keras.callbacks import CallbackList

    logs = {"loss": tf.constant(1.0)}
    runs: dict[bool, list[float]] = {False: [], True: []}
    for r in range(repeats):
        for marked in (False, True) if r % 2 == 0 else (True, False):
            cbs = [_callback([], now_ns, None, 0)] if marked else None
            callbacks = CallbackList(cbs, add_history=True, model=loop.model)
            begin, end = callbacks.on_train_batch_begin, callbacks.on_train_batch_end
            t0 = now_ns()
            for i in range(n):
                begin(i)
                end(i, logs)
            runs[marked].append((now_ns() - t0) / n)
    cost = max(0, round(statistics.median(runs[True]) - statistics.median(runs[False])))
    loop.probes["callback_cost_ns"] = cost
    return cost


def measure_callback_cost_fit(loop: KerasLoop, epochs: int = 2, repeats: int = 5) -> int:
    """The callback's cost per batch from whole ``fit`` calls, with and without it (noisy).

    Alternates (ABBA) ``fit(epochs)`` without and with the marker and returns the difference of
    the medians per batch, which may be negative: on a 2-core machine ``fit`` varies by more
    than the callback costs. It trains the model (2 x ``repeats`` x ``epochs`` epochs).
    """
    batches = epochs * loop.work.steps_per_epoch
    runs: dict[bool, list[int]] = {False: [], True: []}
    for r in range(repeats):
        for marked in (False, True) if r % 2 == 0 else (True, False):
            t0 = now_ns()
            loop.fit(epochs, [_callback([], now_ns, None, 0)] if marked else None)
            runs[marked].append(now_ns() - t0)
    return round((statistics.median(runs[True]) - statistics.median(runs[False])) / batches)


#: The asker's ``Dense(1)`` kernel initialiser (Keras's default).
DEFAULT_INIT = "glorot_uniform"


def build(params: Params, kernel_initializer: str = DEFAULT_INIT) -> Loop:
    """The asker's model and ``fit``; ``kernel_initializer`` builds ``keras_adam_zeroinit``."""
    import keras
    import tensorflow as tf

    from profiler.workloads import seed004

    x, y = seed004.data(params.n, params.seed)
    # Seeds Python, numpy and TensorFlow: the glorot draw and fit's per-epoch shuffles.
    keras.utils.set_random_seed(params.seed)
    if kernel_initializer == DEFAULT_INIT:
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    else:
        dense_layer = tf.keras.layers.Dense(1, kernel_initializer=kernel_initializer)
        model = tf.keras.Sequential([dense_layer])
    model.compile(loss="mse", optimizer=tf.keras.optimizers.Adam(learning_rate=LR))
    # The asker's model builds on its first fit; building it now gives the initial weights a
    # loss before any step (the same shapes and initialiser).
    model.build((None, 1))
    dense = model.layers[0]

    def current() -> dict[str, float]:
        kernel, bias = dense.get_weights()
        return {"w": float(kernel[0, 0]), "b": float(bias[0])}

    return KerasLoop(
        model,
        x[:, None],
        y,
        work=work(params.n),
        params=current,
        eval_loss=seed004.eval_loss(x, y),
        # fit itself (undecorated), where a batch's Python time goes.
        line_targets=(inspect.unwrap(type(model).fit),),
        info=LoopInfo(kind=KERAS, model=model),
        probes={
            "batch_size": BATCH_SIZE,
            "optimizer_step": lambda: int(model.optimizer.iterations.numpy()),
            "callback_cost_ns": None,
            "initializer": kernel_initializer,
        },
    )


WORKLOAD = WorkloadSpec(
    name="keras_adam",
    title="Keras Dense(1) + Adam via fit, the seed-004 loop",
    doc=__doc__ or "",
    seed="004",
    framework="keras",
    defaults=Params(steps=520, n=4160),  # 4 epochs, ~0.4 s
    # The asker's epochs=100, at 130 batches an epoch.
    full_steps=13_000,
    build=build,
)
