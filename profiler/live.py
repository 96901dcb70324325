"""Profile a loop inside your own process: ``with profiler.profile():``, notebook cells, ``fit``.

::

    import profiler

    with profiler.profile(out="runs") as p:
        for batch in batches:
            with profiler.step():
                train(batch)
    print(p.summary)          # the attribution, as an object
    print(p.report_path)      # runs/<id>/report.html

Place in the pipeline: the in-process counterpart of ``python -m profiler run script.py``. A
``LiveSession`` reserves the run folder (``profiler.processes.pipeline.begin``), runs the script
phases that can run in a live process over the code it brackets (``profiler.capture.live``), and
at the end analyses and writes the same run folder as the command line
(``pipeline.finish``): ``summary.json``, ``report.html``, the TensorBoard logdir. Used by
``profile`` here, by the IPython magics (``profiler.ipython``) and by the Keras callback
(``profiler.keras``).

Steps are what ``profiler.step()`` marks, or else the framework calls detected as for scripts
(``session.run``, a ``tf.function``, ``fit``'s batches). The sampled phase attaches py-spy to this
process (it needs the right to ptrace it; where it cannot, the phase says so and the rest runs).

One in-process run at a time: the step markers and py-spy are one per process, so a second run
started while one is running (a ``profile()`` block inside another, a Keras callback's ``fit``
inside a block, a block in a script run by ``python -m profiler run``) is refused with
``AlreadyProfiling`` before it writes anything; the run already going on is unaffected.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

#: Phases the ``with`` block and the Keras callback run (the lines phase needs code it can
#: register before it runs: a cell or a script).
BLOCK_PHASES = ("timed", "sampled", "framework", "hooks")


class AlreadyProfiling(RuntimeError):
    """An in-process run was asked for while another one runs in this process."""


def check_count(name: str, value: object, minimum: int, optional: bool = True) -> None:
    """``ValueError`` naming ``name`` and its range unless ``value`` is an int >= ``minimum``
    (or None, when ``optional``); called where the arguments are given, not when they are used.
    """
    from profiler.processes.options import MAX_COUNT

    if value is None and optional:
        return
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok or not minimum <= value <= MAX_COUNT:  # type: ignore[operator]
        allowed = f"an integer from {minimum} to {MAX_COUNT:.0e}"
        if optional:
            allowed += " or None"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def check_phases(phases: Sequence[str] | None) -> None:
    """``ValueError`` unless ``phases`` is None or a non-empty subset of ``BLOCK_PHASES``."""
    if phases is None:
        return
    wrong = [p for p in phases if p not in BLOCK_PHASES] if not isinstance(phases, str) else []
    if isinstance(phases, str) or not phases or wrong:
        raise ValueError(
            f"phases must be a non-empty sequence of {', '.join(BLOCK_PHASES)}; got {phases!r}"
        )


@dataclass(frozen=True)
class Summary:
    """What a profiled block measured, as an object.

    Attributes:
        status: ``ok``, ``failed`` (the code raised) or ``interrupted``.
        steps: steps detected or marked.
        step_ns: the typical step's wall time (None: no timed step).
        categories: the typical step's nanoseconds per category (they sum to ``step_ns``);
            a category that was not measured is absent and named in ``not_measured``.
        not_measured: category -> the phase that would measure it.
        diagnoses: each diagnosis's one-line message, most costly first.
        message: how the code ended, in words.
        attribution: the full attribution (``profiler.analysis.attribution.Attribution``).
        memory: the terminal's memory line (``profiler.reports.focus_view.memory_line``), its
            own line of ``str``; "" where there is none.
    """

    status: str
    steps: int
    step_ns: int | None
    categories: dict[str, int] = field(default_factory=dict)
    not_measured: dict[str, str] = field(default_factory=dict)
    diagnoses: tuple[str, ...] = ()
    message: str = ""
    attribution: Any = None
    memory: str = ""

    def share(self, category: str) -> float | None:
        """``category``'s share of the typical step (None if not measured or no step)."""
        if not self.step_ns or category not in self.categories:
            return None
        return self.categories[category] / self.step_ns

    def __str__(self) -> str:
        return self._steps_text() + (f"\n{self.memory}" if self.memory else "")

    def _steps_text(self) -> str:
        if not self.step_ns:
            return f"{self.status}: {self.steps} steps; {self.message}"
        parts = ", ".join(
            f"{name} {ns / self.step_ns:.0%}"
            for name, ns in sorted(self.categories.items(), key=lambda kv: -kv[1])
            if ns
        )
        missing = "".join(f"; {c}: not measured" for c in self.not_measured)
        return (
            f"{self.status}: {self.steps} steps, {self.step_ns / 1e3:,.1f} µs per step: "
            f"{parts}{missing}"
        )


class LiveSession:
    """One in-process run: ``start``, the code, ``stop`` (see the module docstring).

    Attributes:
        run_dir: the run folder (``<id>.partial`` until ``stop`` renames it).
        result: the pipeline's ``RunResult`` once stopped.
    """

    def __init__(
        self,
        opts: Any,
        subject: str,
        phases: Sequence[str] | None = None,
        marks_only: bool = False,
    ) -> None:
        from profiler.capture.live import LIVE_PHASES, LiveRun
        from profiler.processes import launch, pipeline, rundir

        self.opts = opts
        (self.spec,) = opts.workloads
        # Before the run folder is reserved: a refused run leaves nothing behind.
        self.refuse_if_running(self.spec.title)
        self.params = opts.params[self.spec.name]
        allowed = tuple(phases) if phases is not None else LIVE_PHASES
        chosen = [p for p in opts.phases if p in allowed]
        rundir.check_out(opts.out_root)
        self.started = pipeline.begin(opts)
        self.run_dir = self.started.partial
        self.slug = rundir.slug(self.spec.name)
        self.workload_dir = self.run_dir / "workloads" / self.slug
        tbdir = self.run_dir / "tensorboard" / self.slug
        wspec = launch.worker_spec(
            self.spec, self.params, opts, self.workload_dir, tbdir, chosen, {}
        )
        self.live = LiveRun(wspec, subject, marks_only=marks_only)
        self.result: Any = None

    #: The session started and not yet stopped in this process, if any.
    running: LiveSession | None = None

    @staticmethod
    def refuse_if_running(what: str) -> None:
        """``AlreadyProfiling`` if an in-process run (or a script run of the command line) is
        measuring this process; ``what`` names the run refused."""
        from profiler import markers

        active = LiveSession.running
        if active is not None:
            raise AlreadyProfiling(
                f"cannot profile {what}: {active.spec.title} is already being profiled in this "
                "process, and in-process runs do not nest (one set of step markers and one "
                "py-spy per process); that run goes on. Profile the outer code or the inner, "
                "not both"
            )
        if markers.profiling():
            raise AlreadyProfiling(
                f"cannot profile {what}: this process is a script run by `python -m profiler "
                "run`, which profiles it already; that run goes on"
            )

    def start(self, module_fn: Any = None) -> None:
        self.refuse_if_running(self.spec.title)
        LiveSession.running = self
        try:
            self.live.start(module_fn)
        except BaseException:
            LiveSession.running = None
            raise

    def stop(self, exc: BaseException | None) -> Any:
        """End the measured code (``exc``: what it raised) and write the run; the result."""
        from profiler.capture.worker import MODEL_FILE
        from profiler.processes import pipeline
        from profiler.processes.launch import WorkloadOutcome, load_trace

        if self.result is not None:
            return self.result
        try:
            code = self.live.stop(exc)
        finally:
            if LiveSession.running is self:
                LiveSession.running = None
        trace = load_trace(self.workload_dir / MODEL_FILE)
        status = "ok" if trace.status == "ok" else "failed"
        params = self.params.with_(steps=max(int(trace.params.get("steps", 1)), 1))
        outcome = WorkloadOutcome(
            self.spec,
            self.slug,
            status,
            trace,
            trace.error,
            wall_ns=max(self.live.end_ns - self.live.start_ns, 0),
            returncode=code,
            params=params,
        )
        if isinstance(exc, KeyboardInterrupt):
            self.result = pipeline.finish_interrupted(self.started, [outcome])
        else:
            self.result = pipeline.finish(self.started, [outcome])
        return self.result

    @property
    def report_path(self) -> Path:
        return Path(self.result.run_dir if self.result else self.run_dir) / "report.html"

    def summary(self) -> Summary | None:
        """The attribution and diagnoses as an object (None before ``stop``)."""
        if self.result is None:
            return None
        return summarise(self.result)


def summarise(result: Any) -> Summary:
    """``Summary`` of a finished in-process run (one workload)."""
    from profiler.reports.focus_view import memory_line

    analysis = result.analysis
    (w,) = analysis.workloads
    att = w.attribution
    entry = result.summary["workloads"][0]
    script = entry.get("script") or {}
    steps = int(script.get("steps") or 0)
    if not steps and result.status != "ok":
        # Nothing measured in a run that failed: no step to break down (an ``ok`` run without
        # detected steps is one step, the whole run, as for a script).
        att = None
    categories = {k: int(v) for k, v in att.typical.items()} if att is not None else {}
    missing = dict(att.not_measured) if att is not None else {}
    for name in missing:
        categories.pop(name, None)
    diagnoses = tuple(
        str(d.get("message", ""))
        for d in result.summary.get("diagnoses", [])
        if d.get("subject") == "workload" and d.get("name") == entry.get("name")
    )
    return Summary(
        status=result.status,
        steps=steps,
        step_ns=int(att.reference_ns) if att is not None else None,
        categories=categories,
        not_measured=missing,
        diagnoses=diagnoses,
        message=str(script.get("message") or ""),
        attribution=att,
        memory=memory_line(entry),
    )


def rename(opts: Any, name: str, title: str, **changes: Any) -> None:
    """The one workload of ``opts`` named ``name`` (its parameters kept under the new name)."""
    from dataclasses import replace

    (spec,) = opts.workloads
    params = opts.params[spec.name]
    opts.workloads = [replace(spec, name=name, title=title, **changes)]
    opts.params = {name: params}


def options(
    path: str | Path,
    *,
    out: str | Path = "runs",
    max_steps: int | None = None,
    steps: int | None = None,
    phases: Sequence[str] | None = None,
    argv: Sequence[str] = (),
) -> Any:
    """``RunOptions`` for code of ``path`` run in this process, as the command line makes them."""
    from profiler import cli

    tokens = ["--out", str(out)]
    if max_steps is not None:
        tokens += ["--max-steps", str(max_steps)]
    if steps is not None:
        tokens += ["--steps", str(steps)]
    if phases:
        tokens += ["--phases", ",".join(phases)]
    return cli.parse_run([*tokens, *argv], [str(path)])


class profile:
    """Profile the loop inside the ``with`` block, in this process.

    Args:
        out: the runs folder (``runs/<id>/`` is written there, and ``runs/latest``).
        max_steps: stop measuring after this many steps (the windows are fitted into them);
            the block runs on, unmeasured.
        steps: the timed window's steps (default: about a second of steps).
        phases: a subset of ``timed, sampled, framework, hooks``.
        name: the run's workload name (default: the calling file's name).

    After the block: ``run_dir``, ``report_path``, ``summary`` (``Summary``) and ``result``.
    An exception in the block is not swallowed: what was measured is written first.

    Raises:
        ValueError: an argument out of its range (when the object is made).
        AlreadyProfiling: at ``with``, when this process is already being profiled (a block
            inside another block): blocks do not nest; the outer one runs on unaffected.
    """

    def __init__(
        self,
        out: str | Path = "runs",
        *,
        max_steps: int | None = None,
        steps: int | None = None,
        phases: Sequence[str] | None = None,
        name: str | None = None,
    ) -> None:
        check_count("max_steps", max_steps, 1)
        check_count("steps", steps, 1)
        check_phases(phases)
        frame = sys._getframe(1)
        caller = frame.f_code.co_filename
        self._out, self._max_steps, self._steps = out, max_steps, steps
        self._phases = tuple(phases) if phases else BLOCK_PHASES
        self._caller = caller
        self._line = frame.f_lineno
        self._name = name
        self.session: LiveSession | None = None
        self.summary: Summary | None = None
        self.result: Any = None

    def __enter__(self) -> profile:

        opts = options(
            self._here(),
            out=self._out,
            max_steps=self._max_steps,
            steps=self._steps,
            phases=self._phases,
        )
        name = self._name or Path(self._caller).name or "block"
        rename(opts, name, f"a block of {self._caller}:{self._line}", auto_step=False)
        self.session = LiveSession(opts, "the block", phases=self._phases)
        self.session.start()
        return self

    def _here(self) -> Path:
        """A file for the options' check: the caller's, or this module's when the caller has
        none (a REPL); the block's code is never compiled again from it."""
        path = Path(self._caller)
        return path if path.is_file() else Path(__file__)

    def __exit__(
        self, t: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        from profiler.capture.script.driver import StopScript

        assert self.session is not None
        self.result = self.session.stop(exc)
        self.summary = self.session.summary()
        # max_steps reached inside the block: the block ends there, nothing is raised.
        return isinstance(exc, StopScript)

    @property
    def run_dir(self) -> Path | None:
        return Path(self.result.run_dir) if self.result is not None else None

    @property
    def report_path(self) -> Path | None:
        return self.run_dir / "report.html" if self.run_dir is not None else None
