"""The script process: run a user's script as ``__main__`` under the phases; write its trace.

Place in the pipeline: ``profiler.processes.runner`` starts ``python -m profiler.capture.script
SPEC.json`` for a script (``profiler.capture.script.spec.ScriptSpec``) instead of
``profiler.capture.worker``. This module sets the script's world up as ``python their_script.py
args`` would (``sys.argv``, ``__main__``, the script's folder first on ``sys.path``, the working
directory it was started from), installs the step detectors (``profiler.capture.script.detect``,
``profiler.markers``), starts the phase schedule on its own thread
(``profiler.capture.script.schedule``) and runs the script on the main thread. It writes
``model.json.gz`` (``profiler.model.WorkloadTrace``) with status ``partial`` after every phase and
once more when the script ends, however it ends:

=========================  =========================================  =======  ======
the script ...             recorded as                                status   exit
=========================  =========================================  =======  ======
returns                    ``completed``                              ok       0
reaches ``--max-steps``    ``max_steps`` (``StopScript``)             ok       0
calls ``sys.exit(0)``      ``exit`` with its code                     ok       0
calls ``sys.exit(n)``      ``exit`` with its code (n != 0, a message)  failed   1
raises                     ``raised``, the traceback's tail           failed   1
                           (the script's frames, not ours)
runs out of memory         ``raised``: "ran out of memory" with the    failed   1
(MemoryError, TensorFlow's resident size; ``memory.out_of_memory``
ResourceExhaustedError)
is stopped (SIGTERM)       ``interrupted``                            partial  130
=========================  =========================================  =======  ======

A process killed outside Python (the out-of-memory killer's SIGKILL) keeps its memory record so
far: the sampler writes it to the workload's folder as it goes (``profiler.capture.memory``),
and the runner reads it back (``profiler.processes.launch``).

Standard input is not connected (the runner gives ``/dev/null`` unless ``--stdin FILE``): a
script that reads it gets end-of-file, and the message says so and how to give it its input.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib.machinery
import json
import os
import signal
import sys
import threading
import traceback
import types
from pathlib import Path
from typing import Any

from profiler import lifetime, markers, redact
from profiler.capture.gc_pauses import GcRecorder
from profiler.capture.memory import RssSampler
from profiler.capture.phases import sampled
from profiler.capture.schedule import ERROR_TAIL_LINES
from profiler.capture.script import detect, own_modules, pipeline, source
from profiler.capture.script.driver import (
    ENDS_MAX,
    RECORD_BYTES_PER_STEP,
    Interrupted,
    StepDriver,
    StopScript,
    blocks,
    long_steps,
    others_cores,
    phases_time,
)
from profiler.capture.script.facts import functions_eagerly, main_source, tf_threads
from profiler.capture.script.schedule import NOT_DETECTED, Outcome, Schedule
from profiler.capture.script.spec import ScriptSpec
from profiler.capture.worker import ERROR_FILE, MODEL_FILE, WorkerSpec, progress_writer
from profiler.clock import now_ns
from profiler.model import FAILED, OK, PARTIAL, WorkloadTrace
from profiler.model.atomic import atomic_write_text
from profiler.model.text import shown
from profiler.redact import redact_argv

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
#: Files whose frames are the toolkit's, left out of the script's traceback.
_OURS = (str(Path(__file__).resolve().parent), str(Path(markers.__file__).resolve()))
#: Seconds to wait for the schedule's thread after the script is done.
JOIN_TIMEOUT_S = 60.0
#: Blocks of steps a run without epochs is cut into for ``script.blocks``.
BLOCKS = 10
#: An epoch of fit is a block when it holds at least this many steps; shorter epochs (fit called
#: on one batch again and again: blocks of one step, "steps 639–639") are blocked by tenths.
EPOCH_BLOCK_STEPS = 5
#: Exceptions that say the process ran out of memory (by class name, anywhere in the MRO:
#: numpy's ``_ArrayMemoryError`` is a MemoryError; TensorFlow's allocator raises
#: ``ResourceExhaustedError``, an ``OpError``).
OUT_OF_MEMORY = ("MemoryError", "ResourceExhaustedError", "OutOfMemoryError")


def out_of_memory(exc: BaseException) -> str | None:
    """The out-of-memory exception class ``exc`` is (its name), or None."""
    names = {c.__name__ for c in type(exc).__mro__}
    return next((n for n in OUT_OF_MEMORY if n in names), None)


def megabytes(b: float) -> str:
    """``2,636 MB``."""
    return f"{b / 2**20:,.0f} MB"


class WatchedStdin:
    """``sys.stdin`` that remembers whether the script tried to read it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.was_read = False

    def _note(self) -> Any:
        self.was_read = True
        return self._stream

    def read(self, *args: Any) -> Any:
        return self._note().read(*args)

    def readline(self, *args: Any) -> Any:
        return self._note().readline(*args)

    def readlines(self, *args: Any) -> Any:
        return self._note().readlines(*args)

    def __iter__(self) -> Any:
        return iter(self._note())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def script_traceback(exc: BaseException, lines: int | None = None) -> str:
    """The exception's traceback without the toolkit's frames (the last ``lines`` if given)."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not str(Path(f.filename).resolve()).startswith(_OURS)
    ]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
    text += "".join(traceback.format_exception_only(type(exc), exc))
    rows = text.rstrip().splitlines()
    return "\n".join(rows[-lines:] if lines else rows)


@dataclasses.dataclass
class Ending:
    """How the script ended (until it has: ``running``, in the partial traces written while it
    runs; a process that dies without its ending keeps that, and the runner says how it
    ended)."""

    reason: str = "running"
    status: str = OK
    exit_code: int | None = None
    error: str = ""
    message: str = "the script was still running when this record was written"


#: Lines of an exception's text that head it without saying what went wrong (TensorFlow's
#: graph errors start with the op's Python traceback).
_NOT_THE_MESSAGE = ("Graph execution error", "Detected at node", "Detected unsupported")
MESSAGE_CHARS = 200


def message_line(exc: BaseException) -> str:
    """The line of an exception's text that says what went wrong, for an error's headline."""
    for line in str(exc).splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith(_NOT_THE_MESSAGE):
            line = line.strip()
            return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."
    return ""


class ScriptRun:
    """One script process: set-up, the run, the trace (see the module docstring)."""

    def __init__(self, wspec: WorkerSpec) -> None:
        from profiler.capture.phases import registry

        self.wspec = wspec
        self.opts: dict[str, Any] = dict(wspec.options.get("script") or {})
        given = os.environ.pop(ScriptSpec.ARGV_ENV, None)
        if given is not None:  # the script's arguments as given (the spec holds them redacted)
            self.opts["argv"] = json.loads(given)
        #: Text from the script is recorded without these (profiler.redact).
        self.secrets = redact.known_secrets(self.opts.get("argv") or [])
        self.options = {k: v for k, v in wspec.options.items() if k != "script"}
        self.workload_dir = Path(wspec.workload_dir)
        self.tensorboard_dir = Path(wspec.tensorboard_dir)
        self.path = Path(self.opts["path"])
        self.name = wspec.workload
        # Every phase module is imported now, before sys.path becomes the script's.
        self.phases = [
            registry.make(p, self.options, wspec.phase_steps.get(p)) for p in wspec.phases
        ]
        self.clock = now_ns
        self.driver = StepDriver(self.clock, self.opts.get("max_steps"))
        self.patches = detect.Patches(self.driver)
        self.step_targets: list[Any] = []
        self.marked: dict[str, str] = {}
        self.loops: detect.LoopMarks | None = None
        self.start_ns = 0
        self.end_ns = 0
        self.graph_ns = 0
        self.stdin: WatchedStdin | None = None
        self.ending = Ending()
        self.schedule: Schedule | None = None
        self.in_script = False
        self.stop_requested = False
        #: The resident memory over the steps (``profiler.capture.memory``).
        self.memory: RssSampler | None = None
        #: How the script ran out of memory (``memory.out_of_memory``), None if it did not.
        self.oom: dict[str, Any] | None = None
        #: The cyclic GC's pauses over the run (``profiler.capture.gc_pauses``).
        self.gc: GcRecorder | None = None
        #: Inside the caller's process (``profiler.capture.live``), not a process of its own.
        self.live = False

    # --- set-up -----------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        """The steps done so far to the runner every ``lifetime.WATCH_S`` (what survives a
        crash outside Python), from the thread that also ends this process's group if the
        profiler dies (``profiler.lifetime.watch_parent``)."""
        emit = progress_writer()
        pid = os.getpid()
        last = [-1]

        def beat() -> None:
            if os.getpid() != pid:
                return
            done = self.driver.done
            if done != last[0]:
                last[0] = done
                emit({"event": "steps", "steps": done})

        lifetime.watch_parent(beat)

    def compile(self) -> tuple[Any, source.Source]:
        """The script's code, with ``--step-function``/``--step-line`` marks compiled in."""
        src = source.load(self.path)
        if self.opts.get("step_function"):
            self.marked["step_function"] = source.mark_step_function(
                src, self.opts["step_function"]
            )
        if self.opts.get("step_line"):
            self.marked["step_line"] = source.mark_step_line(src, int(self.opts["step_line"]))
        if not self.marked:
            # Without --no-auto-step the loop chosen is the steps; with it, only suggested.
            choose = bool(self.opts.get("auto_step", True))
            # A later run of a script whose first run chose (or would have chosen) a loop of a
            # module of its folder: that loop, by its file and line, from its first iteration.
            preset = self.opts.get("step_loop")
            self.loops = detect.LoopMarks(
                self.driver,
                source.mark_loops(src),
                choose,
                fits=source.calls_fit(src),
                preset=(str(preset[0]), int(preset[1])) if preset else None,
            )
            # The loops of the modules of the script's folder it imports are watched too.
            own_modules.OwnModules(self.loops, self.path).install()
        return src.compile(), src

    def module_target(self, code: Any) -> tuple[Any, list[Any]]:
        """(code to run, functions line_profiler can be given for the script's own lines: its
        module code and every function and class body the script defines).

        line_profiler rewrites a code object the first time it is registered; registering each
        here, before it runs (the nested ones replaced in their parent's constants), makes the
        running code the registered one, so the lines phase can later profile the script's
        loop while it runs, at module level or inside a function that was called once and is
        still running (a ``train()`` whose loop saves a checkpoint every 10th step).
        """
        if "lines" not in self.wspec.phases:
            return code, []
        try:
            from line_profiler import LineProfiler
        except ImportError:
            return code, []
        registered: list[Any] = []

        def holder(c: types.CodeType) -> Any:
            cells = tuple(types.CellType() for _ in c.co_freevars)
            return types.FunctionType(c, {}, None, None, cells)

        def register(c: types.CodeType) -> types.CodeType:
            consts = tuple(register(k) if isinstance(k, types.CodeType) else k for k in c.co_consts)
            fn = holder(c.replace(co_consts=consts))
            LineProfiler().add_callable(fn)
            registered.append(fn.__code__)
            return fn.__code__

        try:
            top = register(code)
        except Exception:  # the module's own lines only, as line_profiler always could
            fn = types.FunctionType(code, {})
            LineProfiler().add_callable(fn)
            return fn.__code__, [types.FunctionType(fn.__code__, {})]
        return top, [holder(c) for c in reversed(registered)]

    def globals(self, code_doc: str | None) -> dict[str, Any]:
        g: dict[str, Any] = {
            "__name__": "__main__",
            "__file__": str(self.path),
            "__doc__": code_doc,
            "__builtins__": builtins,
            "__package__": None,
            "__spec__": None,
            "__cached__": None,
            "__loader__": importlib.machinery.SourceFileLoader("__main__", str(self.path)),
        }
        g[source.STEP_FUNCTION] = detect.step_function_decorator(self.driver, self.step_targets)
        g[source.STEP_LINE], g[source.STEP_LINE_END] = detect.step_line_marks(self.driver)
        if self.loops is not None:
            g[source.LOOP_MARK], g[source.LOOP_END] = self.loops.mark, self.loops.end
            g[source.LOOP_ON] = self.loops.on
        return g

    def graph_mode(self) -> None:
        """``--graph-mode``: TensorFlow 1 semantics before the script's first line."""
        t0 = self.clock()
        import tensorflow as tf

        tf.compat.v1.disable_eager_execution()
        self.graph_ns = self.clock() - t0

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> int:
        code, src = self.compile()
        code, module_fns = self.module_target(code)
        if self.opts.get("graph_mode"):
            self.graph_mode()
        if self.marked:
            # Explicit marks win: framework calls are never steps of their own; the detectors
            # still record what the script uses (its session, its model) for the phases.
            self.driver.block += 1
        # A heavy framework's import switches a native start-up capture to a non-native one
        # before the framework's first line runs (``profiler.capture.script.startup``).
        before = {name: self._framework_import for name in sampled.HEAVY_FRAMEWORKS}
        detect.ImportWatcher(self.patches.hooks(), self.driver.facts.notes, before).install()
        markers.activate(self.driver)
        module = types.ModuleType("__main__")
        module.__dict__.update(self.globals(ast_docstring(src)))
        self.driver.script_globals = module.__dict__
        self.schedule = Schedule(
            spec=_spec_for(self.name),
            driver=self.driver,
            phases=self.phases,
            workload_dir=self.workload_dir,
            tensorboard_dir=self.tensorboard_dir,
            clock=self.clock,
            progress=progress_writer(),
            options=self.options,
            warmup_steps=(
                int(self.wspec.warmup_steps) if self.options.get("warmup_fixed") else None
            ),
            timed_steps=self.opts.get("steps"),
            max_steps=self.opts.get("max_steps"),
            expected_steps=self.opts.get("expected_steps"),
            # The decorator appends the step function to this list when the script defines it;
            # the schedule reads it after the warm-up.
            line_targets=self.step_targets,
            module_targets=module_fns,
            # A script that imports a heavy framework itself starts without --native at once.
            allow_native=(
                not (src.imports() & source.FRAMEWORKS)
                and self.options.get("sample_native", "auto") != "off"
            ),
            script_span=lambda: (self.start_ns, self.end_ns),
            write=self.write_partial,
        )
        self._enter_script_world(module)
        # A first record before the script runs: a process killed before the warm-up's
        # snapshot (an out-of-memory kill in its first steps) still leaves a trace, which the
        # runner completes with the memory record kept so far.
        self.write_partial(self.schedule.out)
        thread = threading.Thread(target=self.schedule.run, name="profiler-schedule", daemon=True)
        thread.start()
        # The record so far goes to the workload's folder as it is sampled: a process the
        # out-of-memory killer ends keeps it (profiler.capture.memory).
        driver = self.driver
        self.memory = RssSampler(
            self.clock,
            lambda: driver.done,
            spill=self.workload_dir,
            as_written=lambda: driver.held is None or driver.paused,
            state=lambda: driver.switches,
        )
        self.memory.start()
        self.gc = GcRecorder(self.clock)
        self.gc.start()
        self.start_ns = self.clock()
        self.in_script = True
        pid = os.getpid()
        try:
            exec(code, module.__dict__)
        except BaseException as exc:
            self._forked_child_leaves(pid, exc)
            self.in_script = False
            self.end_ns = self.clock()
            self.ending = self._ending(exc)
        else:
            self._forked_child_leaves(pid, None)
            self.in_script = False
            self.end_ns = self.clock()
            self.ending = self._ending(None)
        self.memory.stop()
        self.gc.stop()
        self._leave_script_world()
        # The schedule removes the phase in progress and records the rest as skipped.
        self.driver.script_ended(self.ending.reason)
        thread.join(JOIN_TIMEOUT_S)
        if self.stop_requested and self.ending.status == OK:
            self.ending = self._ending(Interrupted())
        return self.finish()

    @staticmethod
    def _forked_child_leaves(pid: int, exc: BaseException | None) -> None:
        """A process the script forked that ran on to the script's end: it leaves at once
        with the script's status, writing nothing (only the process the profiler started
        writes the outputs; the runner ends any that outlive the script)."""
        if os.getpid() == pid:
            return
        code = 0
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        elif exc is not None:
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    def _framework_import(self, name: str) -> None:
        startup = self.schedule.startup if self.schedule is not None else None
        if startup is not None:
            startup.on_framework_import(name)

    def _enter_script_world(self, module: types.ModuleType) -> None:
        # The script is __main__ (pickle and multiprocessing look it up there).
        sys.modules["__main__"] = module
        sys.argv = [str(self.opts.get("argv0") or self.path), *self.opts.get("argv", [])]
        script_dir = str(self.path.parent)
        if sys.path:
            sys.path[0] = script_dir
        else:
            sys.path.insert(0, script_dir)
        self.stdin = WatchedStdin(sys.stdin)
        sys.stdin = self.stdin  # type: ignore[assignment]

        owner = os.getpid()

        def stop(signum: int, _frame: Any) -> None:
            if os.getpid() != owner:
                # A process the script forked (Keras's PyDataset workers with
                # use_multiprocessing=True) inherited this handler: it ends as it would without
                # the profiler, not with a traceback of ours (23 of them in one such fit).
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
                return
            # Stop the script once; once it has ended, finish writing what was measured (the
            # runner waits a few seconds before it kills the process).
            first = not self.stop_requested
            self.stop_requested = True
            if first and self.in_script:
                raise Interrupted("stopped by the runner (SIGTERM)")

        signal.signal(signal.SIGTERM, stop)

    def _leave_script_world(self) -> None:
        markers.deactivate()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def _ending(self, exc: BaseException | None) -> Ending:
        d = self.driver
        # The steps its loop's watching took before the first (iterations, or tf.function
        # calls held back) are the script's steps all the same.
        steps = d.done + (self.loops.watched()[0] if self.loops is not None else 0)
        if exc is None:
            return Ending("completed", OK, message=f"the script ran to its end: {self._count()}")
        if isinstance(exc, StopScript):
            return Ending(
                "max_steps",
                OK,
                message=f"stopped after {d.done} steps (--max-steps); everything measured is kept",
            )
        if isinstance(exc, SystemExit):
            code = exc.code
            msg = f"the script called sys.exit({code!r}) after {steps} steps"
            if code is None or code == 0:
                # A normal end (tf.app.run and absl end every script so): said as one.
                msg = f"the script ended, status 0 (sys.exit({code!r})), after {steps} steps"
                return Ending("exit", OK, exit_code=0, message=msg)
            if not isinstance(code, int):
                print(code, file=sys.stderr)
            number = code if isinstance(code, int) else 1
            return Ending("exit", FAILED, exit_code=number, error=msg, message=msg)
        # The script process runs in a session of its own: Ctrl-C on the terminal reaches the
        # runner, which stops the script with SIGTERM (Interrupted). A KeyboardInterrupt here
        # is the script's own (raised, or a SIGINT sent to it): recorded as it raised.
        if isinstance(exc, Interrupted):
            return Ending(
                "interrupted",
                PARTIAL,
                message=f"interrupted after {steps} steps; everything measured so far is kept",
            )
        full = script_traceback(exc)
        print(full, file=sys.stderr)
        tail = script_traceback(exc, ERROR_TAIL_LINES)
        head = f"the script raised {type(exc).__name__} after {steps} steps"
        oom = out_of_memory(exc)
        if oom is not None:
            head = self._out_of_memory(oom, steps)
        if "not compatible with eager execution" in str(exc) and not self.opts.get("graph_mode"):
            head += (
                "; it is TensorFlow 1 graph code, which TensorFlow 2 runs eagerly: --graph-mode "
                "(--tf1) runs it as TensorFlow 1 did"
            )
        if self.stdin is not None and self.stdin.was_read:
            head += (
                "; it read standard input, which is not connected (it got end of file): give "
                "it its input with --stdin FILE"
            )
        said = message_line(exc)
        first = f"{head}: {said}" if said else f"{head}:"
        return Ending("raised", FAILED, error=f"{first}\n{tail}", message=head)

    def _out_of_memory(self, name: str, steps: int) -> str:
        """``the script ran out of memory: it raised MemoryError after 41 steps, with 2,636 MB
        resident`` (the runner adds what grew); the memory record says so
        (``memory.out_of_memory``)."""
        rss = None
        if self.memory is not None and self.memory.available:
            self.memory.stop()  # its last sample is the size the script ran out at
            rss = self.memory.rss[-1] if self.memory.rss else None
        # The keys of ``profiler.processes.crash.OutOfMemory``, which the runner reads.
        self.oom = {
            "how": name,
            "rss_bytes": rss,
            "steps": steps,
            "confirmed": True,
            "evidence": f"it raised {name}",
        }
        at = f", with {megabytes(rss)} resident" if rss is not None else ""
        return f"the script ran out of memory: it raised {name} after {steps} steps{at}"

    def memory_record(self) -> dict[str, Any] | None:
        """The trace's ``script.memory``; ``out_of_memory`` where the script ran out of it."""
        if self.memory is None:
            return None
        rec = self.memory.record()
        if rec.get("measured"):
            # The profiler's own record of every step's end, growing with the steps.
            rec["recorder_bytes_per_step"] = RECORD_BYTES_PER_STEP
            rec["recorder_steps_max"] = ENDS_MAX
        if self.oom is not None and rec.get("measured"):
            rec["out_of_memory"] = dict(self.oom)
        return rec

    # --- the trace --------------------------------------------------------------------------

    def info(self, out: Outcome, final: bool = True) -> dict[str, Any]:
        """The trace's ``script`` record (the summary's ``script`` object)."""
        d = self.driver
        e = self.ending
        detected = d.done > 0
        notes = [*out.notes, *d.facts.notes]
        message = e.message
        if self.stdin is not None and self.stdin.was_read and "standard input" not in message:
            message += (
                "; it read standard input, which is not connected (it got end of file): give "
                "it its input with --stdin FILE"
            )
        if not detected and e.reason != "interrupted":
            message = f"{message}; {NOT_DETECTED}" if message else NOT_DETECTED
            hint = self.loops.suggestion() if self.loops is not None else ""
            if hint:
                message += f"; {hint}"
        elif out.missed and self.live:
            message += f"; {' and '.join(out.missed)} got no steps (see the phases)"
        # A script process's missed phases are said by its runner, which may run it again
        # (profiler.processes.rerun).
        return {
            "path": str(self.path),
            "argv": redact_argv(self.opts.get("argv", [])),
            "cwd": os.getcwd(),
            "graph_mode": bool(self.opts.get("graph_mode")),
            "graph_mode_ms": round(self.graph_ns / 1e6, 3),
            "max_steps": self.opts.get("max_steps"),
            "stdin": self.opts.get("stdin"),
            "worker": self.opts.get("worker"),
            "marks": dict(self.marked),
            "detection": {
                "steps_detected": detected,
                "source": main_source(d),
                "framework": out.kind or None,
                "mode": out.mode or None,
                "same_feeds": d.facts.same_feeds,
                "detectors": {
                    name: {"steps": det.steps, "calls": det.calls}
                    for name, det in d.detectors.items()
                    if det.steps or det.calls
                },
                "patched": list(self.patches.applied),
                "cost_ns": out.marker_cost_ns,
            },
            "steps": d.done,
            "ended": e.reason,
            "exit_code": e.exit_code,
            "message": redact.redact_text(message, self.secrets),
            "wall_s": round(max(self.end_ns - self.start_ns, 0) / 1e9, 3),
            "stdin_read": bool(self.stdin is not None and self.stdin.was_read),
            "plan": out.plan,
            "notes": notes,
            "startup": dict(out.startup),
            "missed": list(out.missed),
            "functions": [
                {**s.to_json(), "python_calls": pipeline.py_calls(s.ref)}
                for s in d.facts.functions.values()
                if s.calls
            ],
            "graph_growth": d.facts.graph_growth(out.warmup.n_steps),
            # Once, at the end: a partial record is written from the schedule's thread
            # between windows, where a scan of the graph's ops would be repeated work.
            "graph_constants": d.facts.graph_constants() if final else None,
            "pipelines": d.facts.pipelines.to_json(),
            "auto_step": self.loops.record() if self.loops is not None else None,
            "keras_calls": {k: v.to_json() for k, v in d.facts.keras_calls.items()},
            "time": self.time_budget(out),
            "memory": self.memory_record(),
            "gc": self.gc.record().to_json() if self.gc is not None else None,
            "blocks": self.step_blocks(out),
            "long_steps": self.long_steps(out),
            "functions_eagerly": functions_eagerly(),
            # Debugging and reproducibility switches left in the script: every op's output
            # checked for NaN (tf.debugging.enable_check_numerics), TensorFlow's thread pools
            # set (set_intra_op_parallelism_threads(1)).
            "check_numerics": d.facts.check_numerics,
            "session_hooks": list(d.facts.session_hooks or []),
            "tf_threads": tf_threads(),
            "dtype_policy": _dtype_policy(d.facts.model),
            "cpu_arith": cpu_arith(),
            "onednn": onednn_on(),
            "fit": {
                k: v
                for k, v in d.facts.fit.items()
                if isinstance(v, (int, float, str, bool, list, type(None)))
            },
        }

    def step_blocks(self, out: Outcome) -> list[dict[str, Any]]:
        """Median step time per epoch of fit (or per tenth of the run), all steps included;
        ``instrumented``: the block overlaps a window that slows steps (all but timed)."""
        d = self.driver
        ends = d.ends.values
        per_epoch = int(d.facts.fit.get("steps_per_epoch") or 0)
        if per_epoch >= EPOCH_BLOCK_STEPS:
            first = int(d.facts.fit["first_step"])
            rows = blocks(d.first_start_ns, ends, per_epoch, first, d.ends.cpu)
            unit = "epoch"
        else:
            rows = blocks(d.first_start_ns, ends, max(-(-len(ends) // BLOCKS), 1), 0, d.ends.cpu)
            unit = "tenth"
        busy = [
            (seg.first_step, seg.first_step + seg.n_steps)
            for rec in out.records
            if rec.name != "timed" and rec.window is not None
            for seg in rec.window.segments
        ]
        # The steps each phase but timed held beyond its window (what-if blocks, whose
        # variant steps are another loop; hooks' on/off blocks).
        busy += [span for name, span in out.held.items() if name != "timed" and span[1] > span[0]]
        loads = self.memory.loads if self.memory is not None else []
        for r in rows:
            r["instrumented"] = any(a <= r["to_step"] and r["from_step"] < b for a, b in busy)
            r["unit"] = unit
            r["others_cores"] = others_cores(loads, r["from_step"], r["to_step"])
        return rows

    def long_steps(self, out: Outcome) -> dict[str, Any]:
        """The run's long steps after the warm-up (``driver.long_steps``), with the phase that
        held each; the steps next to a phase's switch or holding the runner's work left out."""
        d = self.driver
        if not d.started:
            return {"steps": [], "left_out": 0, "spans": []}
        runner = [g.start_ns for g in out.warmup.gaps]
        edges = [out.warmup.n_steps]
        for rec in out.records:
            if rec.window is None:
                continue
            runner += [g.start_ns for g in rec.window.gaps]
            for seg in rec.window.segments:
                edges += [seg.first_step - rec.window.rewarm_steps, seg.first_step]
                edges.append(seg.first_step + seg.n_steps)
        for ref in out.references:
            edges += [ref.segment.first_step, ref.segment.first_step + ref.segment.n_steps]
        for a, e in out.held.values():
            edges += [a, e]
        return long_steps(
            d.first_start_ns,
            d.ends.values,
            out.warmup.n_steps,
            runner,
            edges,
            out.held,
            d.pass_ends,
            # The memory probes' slow reads (from their thread, holding the interpreter's lock).
            self.memory.probe_ns if self.memory is not None else (),
            # The what-ifs' variants' steps (one still on at the end: up to the last step).
            [*d.variant_spans, *([(d.variant_from, d.done)] if d.variant_from is not None else [])],
        )

    def _count(self) -> str:
        """The steps the script ran, those its loop's watching took before the first step
        included: ``20,000 steps (the first 7,069 watched to find its loop, 12,931 measured)``."""
        steps = self.driver.done
        watched = self.loops.watched()[0] if self.loops is not None else 0
        if not watched:
            return f"{steps:,} steps"
        return (
            f"{steps + watched:,} steps (the first {watched:,} watched to find its loop, "
            f"{steps:,} measured)"
        )

    def time_budget(self, out: Outcome | None = None) -> dict[str, float] | None:
        """The script's wall time before its first step, from it to its last, and after (s);
        of the steps' span, the time and the steps the instrumented phases held."""
        d = self.driver
        if not (self.start_ns and self.end_ns and d.started and d.last_end_ns):
            return None
        phases_s, phases_steps = (
            phases_time(d.first_start_ns, d.ends.values, out.held) if out is not None else (0, 0)
        )
        return {
            "phases_s": round(phases_s, 3),
            "phases_steps": phases_steps,
            "before_s": round(max(d.first_start_ns - self.start_ns, 0) / 1e9, 3),
            "steps_s": round(max(d.last_end_ns - d.first_start_ns, 0) / 1e9, 3),
            "after_s": round(max(self.end_ns - d.last_end_ns, 0) / 1e9, 3),
            # Of before_s: the loop's own iterations before its first step, watched to find it.
            "watched_s": round(self.loops.watched()[1] / 1e9, 3) if self.loops else 0.0,
        }

    def trace(self, out: Outcome, status: str, error: str = "") -> WorkloadTrace:
        d = self.driver
        build_ns = max(d.first_start_ns - self.start_ns, 0) if d.started and self.start_ns else 0
        return WorkloadTrace(
            workload=self.name,
            params=dict(out.params),
            work=out.work,
            build_ns=build_ns,
            warmup=out.warmup,
            phases=tuple(out.records),
            metrics=tuple(d.metric_points()),
            marker_cost_ns=out.marker_cost_ns,
            status=status,
            error=error,
            script=self.info(out, final=status != PARTIAL),
            references=tuple(out.references),
            before_steps=out.before_steps,
        )

    def write_partial(self, out: Outcome) -> None:
        self.trace(out, PARTIAL).save(self.workload_dir / MODEL_FILE)

    def finish(self) -> int:
        out = self.schedule.out if self.schedule is not None else Outcome()
        e = self.ending
        status, error = e.status, redact.redact_text(e.error, self.secrets)
        if out.error and status == OK:
            status, error = FAILED, out.error
        trace = self.trace(out, status, error)
        try:
            trace.save(self.workload_dir / MODEL_FILE)
        except MemoryError:
            # A script that ran out of memory: what ran before its first step is the part
            # of the record to give up, not the rest.
            trace = dataclasses.replace(trace, before_steps=())
            trace.save(self.workload_dir / MODEL_FILE)
        if self.memory is not None:
            self.memory.drop_spill()  # the trace holds the whole record now
        if status == FAILED:
            atomic_write_text(self.workload_dir / ERROR_FILE, shown(error) + "\n")
        if status == PARTIAL:
            return EXIT_INTERRUPTED
        return EXIT_OK if status == OK else EXIT_FAILED


#: The CPU flags of reduced-precision arithmetic (``/proc/cpuinfo``): oneDNN runs bfloat16 or
#: float16 kernels natively with them, and converts without them.
ARITH_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")


def cpu_arith() -> list[str] | None:
    """The ``ARITH_FLAGS`` this CPU has; None where its flags cannot be read (not Linux). Read
    once: the script record is built again at every partial write."""
    flags = _cpu_arith()
    return list(flags) if flags is not None else None


@functools.cache
def _cpu_arith() -> tuple[str, ...] | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return tuple(f for f in ARITH_FLAGS if f in flags)
    except OSError:
        return None
    return None


def onednn_on() -> bool | None:
    """Whether TensorFlow runs oneDNN's kernels in this process (TF_ENABLE_ONEDNN_OPTS, on by
    default only on some CPUs); None without TensorFlow imported or where it cannot say."""
    if "tensorflow" not in sys.modules:
        return None
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # another TensorFlow's layout
        return None


def _dtype_policy(model: Any) -> str | None:
    """Keras's dtype policy where it is not plain float32: the model's (``mixed_float16``,
    ``mixed_bfloat16`` ...), else the global one; None without Keras or for float32."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    try:
        policy = getattr(model, "dtype_policy", None) or keras.mixed_precision.global_policy()
        name = str(getattr(policy, "name", "") or "")
    except Exception:  # a Keras without mixed precision
        return None
    return name if name and name != "float32" else None


def ast_docstring(src: source.Source) -> str | None:
    import ast

    return ast.get_docstring(src.tree, clean=False)


def _spec_for(name: str) -> Any:
    from profiler.capture.script.spec import ScriptSpec

    return ScriptSpec.for_worker(name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the script process (exit statuses in the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    wspec = WorkerSpec.from_json(Path(args[0]).read_text())
    workload_dir = Path(wspec.workload_dir)
    try:
        run = ScriptRun(wspec)
        run.start_heartbeat()
        return run.run()
    except source.ScriptError as exc:  # the file changed since the parent checked it
        atomic_write_text(workload_dir / ERROR_FILE, shown(f"{exc}\n"))
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:  # its folder cannot hold its trace (a full disk): one line
        print(
            f"the script's process could not write its trace in {workload_dir}: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
