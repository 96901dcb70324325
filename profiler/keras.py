"""``ProfileCallback``: profile ``model.fit`` from inside it, one training batch a step.

::

    from profiler.keras import ProfileCallback

    cb = ProfileCallback(out="runs")
    model.fit(x, y, epochs=3, callbacks=[cb])
    print(cb.summary)        # the attribution, then the terminal's memory line (live.Summary)
    print(cb.report_path)    # runs/<id>/report.html

Place in the pipeline: a ``profiler.live.LiveSession`` whose steps the callback marks (each
batch from ``on_train_batch_begin`` to the next one's begin, back to back as every step is); the
phases that run in a live process (timed, sampled, framework, hooks) are fitted into the window
of batches the arguments choose; the run folder is written at the end of ``fit`` (or when the
window closes, whichever comes last). ``fit``'s own facts (steps per epoch, validation,
callbacks) are recorded as for a script, so per-epoch costs are found the same way.

How a run ends, whatever way ``fit`` ends: Keras calls ``on_train_end`` only when ``fit``
returns, and no callback hook when it raises (another callback's exception, the model's or the
data's, ``KeyboardInterrupt``). So while a callback object exists, ``keras.Model.fit`` is
wrapped (``_FitGuard``): a ``fit`` that raises first stops the run its callback started (the
schedule thread joined, py-spy stopped) and writes what was measured, with status ``failed``
and the error (``interrupted`` for ``KeyboardInterrupt``), then the exception goes on to the
caller unchanged. The wrapper is one Python call per ``fit``; it is removed when the last
callback object is garbage-collected. Callbacks driven outside ``fit`` (a custom loop calling a
``CallbackList``) end at ``on_train_end``, or else when the process exits.

Each ``fit`` given the same callback object is a run of its own (a new run folder, the
arguments applied to that ``fit``); ``summary``, ``result`` and ``report_path`` are the last
``fit``'s, ``summaries`` every ``fit``'s so far. A ``fit`` that ends before any batch was measured
(shorter than ``skip_batches``) ends its run ``failed``, saying so, with no step breakdown.

This module imports Keras only when the callback is made.
"""

from __future__ import annotations

import atexit
import functools
import threading
import warnings
import weakref
from pathlib import Path
from typing import Any


class FitEndNotSeen(RuntimeError):
    """What a run is stopped with when the process exits before its ``fit`` ended (callbacks
    driven outside ``keras.Model.fit``, which never called ``on_train_end``)."""


class _FitGuard:
    """``keras.Model.fit`` wrapped while any ``ProfileCallback`` object lives (module
    docstring): the runs callbacks start inside a ``fit`` are stopped when it ends, however."""

    #: Attribute that marks the wrapper (so that it is never wrapped twice nor left behind).
    MARK = "__profiler_fit_guard__"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.model_class: Any = None
        self.saved: Any = None
        self.local = threading.local()  # .fits: one list per fit in progress on the thread

    def hold(self, model_class: Any) -> None:
        with self.lock:
            self.holders += 1
            if self.holders > 1:
                return
            fit = model_class.__dict__.get("fit")
            if getattr(fit, self.MARK, False):
                return
            self.model_class, self.saved = model_class, fit
            model_class.fit = self.wrap(model_class.fit)

    def release(self) -> None:
        with self.lock:
            self.holders -= 1
            cls = self.model_class
            if self.holders > 0 or cls is None:
                return
            # Taken back only if it is still ours (another library may have wrapped it since).
            if getattr(cls.__dict__.get("fit"), self.MARK, False):
                if self.saved is None:
                    del cls.fit
                else:
                    cls.fit = self.saved
            self.model_class = self.saved = None

    def fits(self) -> list[list[Any]]:
        if not hasattr(self.local, "fits"):
            self.local.fits = []
        fits: list[list[Any]] = self.local.fits
        return fits

    def enter(self, callback: Any) -> bool:
        """Tie ``callback``'s run to the innermost ``fit`` in progress on this thread; False
        when there is none (callbacks called outside ``fit``)."""
        fits = self.fits()
        if not fits:
            return False
        fits[-1].append(callback)
        return True

    def wrap(self, fit: Any) -> Any:
        guard = self

        @functools.wraps(fit)
        def fit_ending_its_profiles(model: Any, *args: Any, **kwargs: Any) -> Any:
            started: list[Any] = []
            guard.fits().append(started)
            try:
                result = fit(model, *args, **kwargs)
            except BaseException as exc:
                for cb in started:
                    cb._fit_raised(exc)
                raise
            finally:
                guard.fits().pop()
            for cb in started:  # on_train_end ended them already, unless it was not called
                cb._stop(None)
            return result

        setattr(fit_ending_its_profiles, self.MARK, True)
        return fit_ending_its_profiles


_GUARD = _FitGuard()
#: Callbacks whose run has started and not ended, stopped at exit if still running.
_RUNNING: weakref.WeakSet[Any] = weakref.WeakSet()


def _stop_at_exit() -> None:
    for cb in list(_RUNNING):
        cb._fit_raised(FitEndNotSeen("the process exited before the fit's end was seen"))


@functools.cache
def _at_exit() -> None:
    # Registered at the first run, after Keras and TensorFlow registered theirs: it runs
    # before them (last in, first out), while the framework is still whole.
    atexit.register(_stop_at_exit)


def ProfileCallback(
    out: str | Path = "runs",
    *,
    skip_batches: int = 0,
    batches: int | None = None,
    steps: int | None = None,
    phases: tuple[str, ...] | None = None,
    name: str = "fit",
) -> Any:
    """A ``keras.callbacks.Callback`` that profiles each ``fit`` it is given to.

    Args:
        out: the runs folder.
        skip_batches: batches left unmeasured at the start of each ``fit`` (beyond the warm-up
            the phases take anyway); 0 or more.
        batches: batches to measure after those (default: every batch of the ``fit``); 1 or
            more. The windows are fitted into them, and the batches after run unmeasured.
        steps: the timed window's steps (default: about a second of steps); 1 or more.
        phases: a subset of ``timed, sampled, framework, hooks``.
        name: the workload's name in the report.

    Attributes (after a ``fit``): ``summary`` (``profiler.live.Summary``), ``result``,
    ``run_dir`` and ``report_path`` of the last ``fit``; ``summaries``: one per ``fit``.

    Raises:
        ValueError: an argument out of its range (here, not at the ``fit``).
    """
    from profiler import live

    live.check_count("skip_batches", skip_batches, 0, optional=False)
    live.check_count("batches", batches, 1)
    live.check_count("steps", steps, 1)
    live.check_phases(phases)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")

    import keras

    class _ProfileCallback(keras.callbacks.Callback):  # type: ignore[misc]
        __doc__ = ProfileCallback.__doc__

        def __init__(self) -> None:
            super().__init__()
            self.session: live.LiveSession | None = None
            self.summary: live.Summary | None = None
            self.summaries: list[live.Summary] = []
            self.result: Any = None
            self.seen = 0
            self.measured = 0
            self.closed = False

        # --- fit's calls ------------------------------------------------------------------

        def on_train_begin(self, logs: Any = None) -> None:
            # A run of this object that no fit's end reached (a custom loop that raised):
            # ended before the next one begins.
            self._fit_raised(FitEndNotSeen("a new fit began before this run's fit ended"))
            self.session, self.summary, self.result = None, None, None
            self.seen = self.measured = 0
            self.closed = False
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
            live.rename(opts, name, "model.fit with ProfileCallback")
            try:
                session = live.LiveSession(
                    opts, "fit", phases=phases or live.BLOCK_PHASES, marks_only=True
                )
            except live.AlreadyProfiling as exc:
                # The training goes on, unprofiled by this callback (the run going on
                # measures it).
                warnings.warn(f"ProfileCallback: {exc}", RuntimeWarning, stacklevel=2)
                return
            self.session = session
            run = session.live
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
            _GUARD.enter(self)
            _RUNNING.add(self)
            _at_exit()
            session.start()
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

        # --- the run's end ----------------------------------------------------------------

        def _fit_raised(self, exc: BaseException) -> None:
            """The fit raised ``exc`` (or ended unseen): stop the run, and keep ``exc`` the
            caller's: a failure to write the run is a warning, not a second exception."""
            try:
                self._stop(exc)
            except Exception as failed:
                warnings.warn(
                    f"ProfileCallback: the run in {self.session.run_dir if self.session else '?'}"
                    f" could not be written after fit raised: {failed}",
                    RuntimeWarning,
                    stacklevel=2,
                )

        def _stop(self, exc: BaseException | None) -> None:
            if self.session is None or self.session.result is not None:
                return
            _RUNNING.discard(self)
            if exc is None and self.measured == 0:
                from profiler.capture.live import NothingMeasured

                exc = NothingMeasured(self._nothing_measured())
            self.result = self.session.stop(exc)
            self.summary = self.session.summary()
            if self.summary is not None:
                self.summaries.append(self.summary)

        def _nothing_measured(self) -> str:
            ran = f"fit ran {self.seen} batches"
            if self.seen <= skip_batches:
                return (
                    f"no batch was measured: {ran}, all within skip_batches={skip_batches}; "
                    f"give skip_batches below {self.seen} or fit more batches"
                )
            return f"no batch was measured: {ran}"

        @property
        def run_dir(self) -> Path | None:
            return Path(self.result.run_dir) if self.result is not None else None

        @property
        def report_path(self) -> Path | None:
            return self.run_dir / "report.html" if self.run_dir is not None else None

    callback = _ProfileCallback()
    _GUARD.hold(keras.Model)
    weakref.finalize(callback, _GUARD.release)
    return callback
