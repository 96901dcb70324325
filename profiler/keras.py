"""``ProfileCallback``: profile ``model.fit`` from inside it, one training batch a step.

::

    from profiler.keras import ProfileCallback

    cb = ProfileCallback(out="runs")
    model.fit(x, y, epochs=3, callbacks=[cb])
    print(cb.summary)        # the attribution (profiler.live.Summary)
    print(cb.report_path)    # runs/<id>/report.html

Place in the pipeline: a ``profiler.live.LiveSession`` whose steps the callback marks (each
batch from ``on_train_batch_begin`` to the next one's begin, back to back as every step is); the
phases that run in a live process (timed, sampled, framework, hooks) are fitted into the window
of batches the arguments choose; the run folder is written at the end of ``fit`` (or when the
window closes, whichever comes last). ``fit``'s own facts (steps per epoch, validation,
callbacks) are recorded as for a script, so per-epoch costs are found the same way.

This module imports Keras only when the callback is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def ProfileCallback(
    out: str | Path = "runs",
    *,
    skip_batches: int = 0,
    batches: int | None = None,
    steps: int | None = None,
    phases: tuple[str, ...] | None = None,
    name: str = "fit",
) -> Any:
    """A ``keras.callbacks.Callback`` that profiles the ``fit`` it is given to.

    Args:
        out: the runs folder.
        skip_batches: batches left unmeasured at the start of ``fit`` (beyond the warm-up the
            phases take anyway).
        batches: batches to measure after those (default: every batch of the ``fit``); the
            windows are fitted into them, and the batches after run unmeasured.
        steps: the timed window's steps (default: about a second of steps).
        phases: a subset of ``timed, sampled, framework, hooks``.
        name: the workload's name in the report.
    """
    import keras

    from profiler import live

    class _ProfileCallback(keras.callbacks.Callback):  # type: ignore[misc]
        __doc__ = ProfileCallback.__doc__

        def __init__(self) -> None:
            super().__init__()
            self.session: live.LiveSession | None = None
            self.summary: live.Summary | None = None
            self.result: Any = None
            self.seen = 0
            self.measured = 0
            self.closed = False

        # --- fit's calls ------------------------------------------------------------------

        def on_train_begin(self, logs: Any = None) -> None:

            params = self.params or {}
            per_epoch, epochs = params.get("steps"), params.get("epochs")
            total = int(per_epoch) * int(epochs) if per_epoch and epochs else None
            if total is not None:
                total = max(total - skip_batches, 1)
            window = batches if batches is not None else total
            opts = live.options(
                Path(live.__file__),
                out=out,
                steps=steps,
                phases=list(phases or live.BLOCK_PHASES),
            )
            live.rename(opts, name, f"model.fit with {type(self).__name__}")
            self.session = live.LiveSession(
                opts, "fit", phases=phases or live.BLOCK_PHASES, marks_only=True
            )
            run = self.session.live
            run.opts["expected_steps"] = window
            facts = run.driver.facts
            facts.model = self.model
            facts.fit = {
                "first_step": 0,
                "steps_per_epoch": per_epoch,
                "total_steps": window,
                "epochs": epochs,
                "callbacks": [],
            }
            self.session.start()
            from profiler.capture.script.detect import keras_marks

            self.begin_mark, self.end_mark = keras_marks(run.driver)

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.seen += 1
            if self.session is None or self.closed or self.seen <= skip_batches:
                return
            self.begin_mark()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if self.session is None or self.closed or self.seen <= skip_batches:
                return
            self.end_mark()
            self.measured += 1
            if batches is not None and self.measured >= batches:
                self.closed = True
                self.session.live.steps_done()

        def on_train_end(self, logs: Any = None) -> None:
            self._stop(None)

        def _stop(self, exc: BaseException | None) -> None:
            if self.session is None or self.result is not None:
                return
            self.result = self.session.stop(exc)
            self.summary = self.session.summary()

        @property
        def run_dir(self) -> Path | None:
            return Path(self.result.run_dir) if self.result is not None else None

        @property
        def report_path(self) -> Path | None:
            return self.run_dir / "report.html" if self.run_dir is not None else None

    return _ProfileCallback()
