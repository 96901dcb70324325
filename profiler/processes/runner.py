"""The runner: one process per workload, time-outs, failure isolation, progress.

Place in the pipeline: ``profiler.processes.pipeline`` calls ``run_all`` with the run folder
it reserved; the runner starts ``python -m profiler.capture.worker`` for each workload (or the
script process for a user's script) with its own folder under it, waits for it under a
time-out, and turns whatever it left (``model.json.gz``, possibly partial; ``error.txt``; the
tail of its stderr) into a ``WorkloadOutcome``. A workload that raises, crashes or hangs is
recorded as failed or timed out and the next one runs. ``run_process`` is the one way a
measurement process is started (the experiments and efficiency processes too).

The workload's own stdout and stderr go to ``stdout.log`` and ``stderr.log`` in its folder, so the
terminal shows only the progress bar and the final table. A user's script
(``profiler.capture.script``) runs in ``python -m profiler.capture.script`` instead, and its output
also goes to the terminal as it comes (the logs keep a copy), its standard input is ``--stdin``'s
file or nothing, and it has no time-out unless one is given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profiler import lifetime
from profiler.capture.loop import Params, WorkloadSpec
from profiler.capture.script.spec import ScriptSpec
from profiler.capture.worker import MODEL_FILE, WorkerSpec
from profiler.model import FAILED, OK, PARTIAL, TIMEOUT, WorkloadTrace
from profiler.processes import crash, rundir
from profiler.redact import redact_argv

#: Child environment: TensorFlow's C++ INFO/WARNING lines off (FULL_TRACE prints 5 per step).
#: Python's faulthandler on: a crash in native code names the Python frame it happened under.
CHILD_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
STDERR_TAIL_LINES = 12


@dataclass
class WorkloadOutcome:
    """What one workload process left behind.

    Attributes:
        spec: the workload.
        slug: its folder name under ``workloads/`` and ``tensorboard/``.
        status: ``ok``, ``failed``, ``timeout`` (``partial`` traces are marked failed/timeout).
        trace: the trace it wrote (possibly partial), or None if it wrote none.
        error: the tail of its error, for anything but ok.
        wall_ns: wall time of the process.
        returncode: the process's exit status (None if killed on time-out).
        native: where it crashed in native code (a fatal signal with faulthandler's dump).
    """

    spec: WorkloadSpec
    slug: str
    status: str
    trace: WorkloadTrace | None
    error: str = ""
    wall_ns: int = 0
    returncode: int | None = None
    params: Params | None = None
    native: crash.NativeCrash | None = None


@dataclass
class RunOptions:
    """What to run and how.

    Attributes:
        workloads: specs to run, in order.
        params: parameters per workload name.
        phases: phase names, in ``PHASE_ORDER``.
        out_root: the ``runs/`` folder.
        timeout_s: wall-time limit per workload process.
        warmup_steps: warm-up steps per workload.
        metric_points: loss points recorded across the timed window.
        phase_steps: explicit window sizes per phase (overrides budgets).
        options: phase options (e.g. ``{"sample_rate": 100}``).
        progress: show a progress bar (on a terminal).
        experiments: run the counterfactual pairs and the size sweep whose workloads are
            among ``workloads`` (``profiler.analysis.experiments``).
        sweep_sizes: problem sizes for the sweep.
        experiment_overrides, efficiency_overrides: fields of ``ExperimentSpec`` /
            ``EfficiencySpec`` to change (blocks, seeds, budgets ...), e.g. for a short test run.
        script_timeout_s: wall-time limit of a user script's process (None: no limit; the
            script decides how long it runs, ``--max-steps`` and Ctrl-C stop it).
        script_repeat: at most this many more runs of a script whose phases missed steps
            (``--repeat N``).
        workers: processes of the script run together as the workers of one
            ``tf.distribute`` job (``--workers N``, ``profiler.processes.workers``).
    """

    workloads: list[WorkloadSpec]
    params: dict[str, Params]
    phases: list[str]
    out_root: Path = Path("runs")
    timeout_s: float = 600.0
    warmup_steps: int = 50
    metric_points: int = 20
    phase_steps: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    experiments: bool = False
    sweep_sizes: list[int] = field(default_factory=list)
    experiment_overrides: dict[str, Any] = field(default_factory=dict)
    efficiency_overrides: dict[str, Any] = field(default_factory=dict)
    script_timeout_s: float | None = None
    script_repeat: int = 0
    workers: int = 1


Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Launch:
    """How one process of a multi-worker job is started (``profiler.processes.workers``).

    Attributes:
        prefix: the command line's start (``nsenter -t PID -n --``: the job's network namespace).
        env: variables added to the process's environment (its ``TF_CONFIG``).
        started: called with the process once it runs (the job stops the others through it).
        steps: called with the script's steps so far at each heartbeat (a hang shows in it).
        script: added to the script's own record (``trace.script["worker"]``).
    """

    prefix: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    started: Callable[[subprocess.Popen[bytes]], None] | None = None
    steps: Callable[[int], None] | None = None
    script: dict[str, Any] = field(default_factory=dict)


def load_trace(path: Path) -> WorkloadTrace:
    """Read a ``model.json.gz`` written by a workload process."""
    return WorkloadTrace.load(path)


def _unbuilt(_params: Params) -> Any:
    raise RuntimeError("a workload read back from a run folder is never built")


def outcome_from_summary(entry: dict[str, Any], trace_path: Path) -> WorkloadOutcome:
    """A finished run's workload as an outcome again: its summary entry and its saved trace
    (``profiler report RUN`` re-renders from these)."""
    params = entry.get("params") or {}
    spec = WorkloadSpec(
        name=entry["name"],
        title=entry.get("title", ""),
        doc="",
        seed=entry.get("seed", ""),
        framework=entry.get("framework", ""),
        defaults=Params(**params) if params else Params(steps=1, n=1),
        build=_unbuilt,
        display_name=entry.get("label", "") if entry.get("label") != entry["name"] else "",
    )
    return WorkloadOutcome(
        spec=spec,
        slug=entry["slug"],
        status=entry.get("status", OK),
        trace=load_trace(trace_path),
        error=entry.get("error", ""),
        wall_ns=int(float(entry.get("wall_s") or 0) * 1e9),
        params=spec.defaults if params else None,
    )


#: The note when processes a script started outlived it (killed at its end).
LEFTOVER_NOTE = (
    "processes the script started (forked children) were still running when it ended: they "
    "were killed with it"
)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return "unknown"


def _ended_outside(
    trace: WorkloadTrace, how: str, steps: int | None, timed_out: bool
) -> WorkloadTrace:
    """A script's record when its process never ran its own ending (the last snapshot says
    "completed" or nothing): how it ended, and its steps from the heartbeat if more."""
    s = dict(trace.script)
    done = max(int(s.get("steps") or 0), steps or 0)
    s["steps"] = done
    s["ended"] = "timeout" if timed_out else "exited"
    s["message"] = (
        f"the script's process {how} after {done} steps"
        if not timed_out
        else (f"the script {how} after {done} steps")
    )
    return replace(trace, script=s)


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace_s`` (at once on a
    second Ctrl-C during the grace period, which is then re-raised)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise


def _reap_group(pgid: int) -> bool:
    """Kill what is left of a finished process's group (a script's forked children); True if
    anything was."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return True
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return True


def run_workload_process(
    spec: WorkloadSpec,
    params: Params,
    opts: RunOptions,
    run_dir: Path,
    slug: str,
    progress: Progress,
) -> WorkloadOutcome:
    """Run one workload in its own process and collect what it leaves, whatever happens.

    A user's script with ``opts.script_repeat`` runs again (at most that many times) while
    phases that apply to it got no steps: each run measures the phases still missing, fitted
    into the steps the first run had, and the records are merged (``PhaseRecord.repeat``).
    """
    wdir = run_dir / "workloads" / slug
    tbdir = run_dir / "tensorboard" / slug
    outcome = _one_run(spec, params, opts, wdir, tbdir, slug, progress, list(opts.phases), {})
    if not isinstance(spec, ScriptSpec):
        return outcome
    runs = [_run_facts(outcome.trace, 0)]
    for r in range(1, opts.script_repeat + 1):
        first = outcome.trace
        if first is None or outcome.status != OK:
            break
        missing = [p.name for p in first.phases if p.missed]
        if not missing:
            break
        expected = int(first.script.get("steps") or 0)
        print(
            f"profiling {spec.name} again (repeat {r} of {opts.script_repeat}): "
            f"{', '.join(missing)}, fitted into its {expected} steps",
            file=sys.stderr,
        )
        again = _one_run(
            spec,
            params,
            opts,
            wdir / f"repeat-{r}",
            tbdir,
            slug,
            progress,
            missing,
            {"expected_steps": expected},
        )
        runs.append(_run_facts(again.trace, r))
        if again.trace is None or again.status != OK:
            outcome = replace(outcome, error=f"repeat {r}: {again.error}".strip())
            break
        outcome = replace(
            outcome, trace=_merge(first, again.trace, r), wall_ns=outcome.wall_ns + again.wall_ns
        )
    if outcome.trace is not None and len(runs) > 1:
        script = {**outcome.trace.script, "runs": runs}
        script["missed"] = [p.name for p in outcome.trace.phases if p.missed]
        outcome = replace(outcome, trace=replace(outcome.trace, script=script))
    return outcome


def _run_facts(trace: WorkloadTrace | None, repeat: int) -> dict[str, Any]:
    if trace is None:
        return {"repeat": repeat, "steps": 0, "measured": []}
    measured = [p.name for p in trace.phases if p.status == OK and p.repeat == 0]
    return {"repeat": repeat, "steps": int(trace.script.get("steps") or 0), "measured": measured}


def _merge(first: WorkloadTrace, again: WorkloadTrace, repeat: int) -> WorkloadTrace:
    """``first`` with each phase it missed taken from ``again`` (run ``repeat``) where that run
    measured it; artefact paths stay relative to the workload's folder."""
    got = {p.name: p for p in again.phases}
    phases = []
    for p in first.phases:
        new = got.get(p.name)
        if p.missed and new is not None and not new.missed:
            note = f"measured in repeat {repeat} of the script"
            p = replace(
                new,
                repeat=repeat,
                artefacts=tuple(f"repeat-{repeat}/{a}" for a in new.artefacts),
                reason=f"{new.reason}; {note}" if new.reason else note,
            )
        phases.append(p)
    return replace(first, phases=tuple(phases))


def worker_spec(
    spec: WorkloadSpec,
    params: Params,
    opts: RunOptions,
    wdir: Path,
    tbdir: Path,
    phases: list[str],
    script_extra: dict[str, Any] | None = None,
) -> WorkerSpec:
    """What the workload's process (or an in-process run) is given; creates its folders."""
    wdir.mkdir(parents=True, exist_ok=True)
    tbdir.mkdir(parents=True, exist_ok=True)
    options = dict(opts.options)
    if isinstance(spec, ScriptSpec):
        options["script"] = {**spec.worker_options(), **(script_extra or {})}
    return WorkerSpec(
        workload=spec.name if isinstance(spec, ScriptSpec) else spec.ref,
        params=params.as_dict(),
        phases=phases,
        workload_dir=str(wdir.resolve()),
        tensorboard_dir=str(tbdir.resolve()),
        warmup_steps=opts.warmup_steps,
        metric_points=opts.metric_points,
        phase_steps=dict(opts.phase_steps),
        options=options,
    )


def _one_run(
    spec: WorkloadSpec,
    params: Params,
    opts: RunOptions,
    wdir: Path,
    tbdir: Path,
    slug: str,
    progress: Progress,
    phases: list[str],
    script_extra: dict[str, Any],
    launch: Launch | None = None,
) -> WorkloadOutcome:
    """One process of the workload, in ``wdir``; what it left, whatever happened."""
    if launch is not None:
        script_extra = {**script_extra, **launch.script}
    wspec = worker_spec(spec, params, opts, wdir, tbdir, phases, script_extra)
    options = wspec.options
    script = isinstance(spec, ScriptSpec)
    timeout_s = opts.script_timeout_s if script else opts.timeout_s
    spec_path = wdir / "worker-spec.json"
    rundir.atomic_write_text(spec_path, wspec.to_json())
    heartbeat: dict[str, int] = {}

    def tracked(event: dict[str, Any]) -> None:
        # A script's steps so far, every ~0.5 s: what survives a crash outside Python.
        if event.get("event") == "steps":
            heartbeat["steps"] = int(event.get("steps") or 0)
            if launch is not None and launch.steps is not None:
                launch.steps(heartbeat["steps"])
        else:
            progress(event)

    if isinstance(spec, ScriptSpec):
        stdin = Path(spec.stdin) if spec.stdin else None
        proc = run_process(
            ScriptSpec.WORKER_MODULE,
            spec_path,
            wdir,
            timeout_s,
            tracked,
            passthrough=True,
            stdin=stdin,
            # Time to end the script and write what it measured when Ctrl-C stops it.
            grace_s=5.0,
            launch=launch,
        )
    else:
        proc = run_process("profiler.capture.worker", spec_path, wdir, timeout_s, progress)
    if isinstance(spec, ScriptSpec) and spec.argv:
        # The run folder keeps the spec, not the script's secrets (profiler.redact).
        kept = {**options["script"], "argv": redact_argv(spec.argv)}
        rundir.atomic_write_text(
            spec_path, dataclasses.replace(wspec, options={**options, "script": kept}).to_json()
        )
    timed_out, wall_ns = proc.timed_out, proc.wall_ns
    trace: WorkloadTrace | None = None
    load_error = ""
    if (wdir / MODEL_FILE).exists():
        try:
            trace = load_trace(wdir / MODEL_FILE)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            load_error = f"its {MODEL_FILE} could not be read: {exc}"
    if script and trace is not None:
        # The script process sized its timed window from its own warm-up.
        params = params.with_(steps=max(int(trace.params.get("steps", 1)), 1))
    outside = ""  # how a process ended outside Python (os._exit, a signal), in words
    native: crash.NativeCrash | None = None
    if timed_out:
        status = TIMEOUT
        error = f"timed out after {timeout_s:g} s"
        done = [p.name for p in trace.phases if p.status == OK] if trace else []
        if done:
            error += f"; phases completed: {', '.join(done)}"
    elif proc.returncode == 0 and trace is not None and trace.status == OK:
        status, error = OK, ""
    else:
        status = FAILED
        error = _tail(wdir / "error.txt") or _tail(wdir / "stderr.log")
        if proc.returncode and proc.returncode < 0:
            outside = f"killed by signal {-proc.returncode} ({_signal_name(-proc.returncode)})"
            native = crash.read(wdir / "stderr.log")
            if native is not None:
                # The dump replaces the stderr tail (its last lines list extension modules).
                outside, error = f"{outside} {native.where()}", native.dump()
        elif proc.returncode and trace is not None and trace.status == PARTIAL:
            # A trace its process never finished: it left without Python's ending.
            outside = f"exited with status {proc.returncode} outside Python (os._exit, a crash)"
        if outside:
            error = f"{outside}\n{error}".strip()
        if load_error:
            error = f"{error}\n{load_error}".strip()
        error = error or f"exited with status {proc.returncode}"
    if trace is not None and trace.script and (outside or timed_out):
        trace = _ended_outside(trace, outside or error, heartbeat.get("steps"), timed_out)
    if trace is not None and status != OK and trace.status in (OK, PARTIAL):
        trace = replace(trace, status=status, error=error)
    if proc.leftover and trace is not None and trace.script:
        notes = [*trace.script.get("notes", []), LEFTOVER_NOTE]
        trace = replace(trace, script={**trace.script, "notes": notes})
    return WorkloadOutcome(
        spec=spec,
        slug=slug,
        status=status,
        trace=trace,
        error=error,
        wall_ns=wall_ns,
        returncode=None if timed_out else proc.returncode,
        params=params,
        native=native,
    )


@dataclass
class ProcessResult:
    """How a measurement process ended (``leftover``: processes it started were still
    running and were killed)."""

    returncode: int | None
    timed_out: bool
    wall_ns: int
    leftover: bool = False


def run_process(
    module: str,
    spec_path: Path,
    workdir: Path,
    timeout_s: float | None,
    progress: Progress,
    *,
    passthrough: bool = False,
    stdin: Path | None = None,
    grace_s: float = 1.0,
    launch: Launch | None = None,
) -> ProcessResult:
    """Run ``python -m module spec_path`` in its own session with a time-out.

    Its stdout and stderr go to ``stdout.log``/``stderr.log`` in ``workdir`` (with
    ``passthrough``, also to this process's stdout and stderr as they come); its stdin is
    ``stdin`` or nothing. Progress events arrive as JSON lines on a pipe. On time-out or Ctrl-C
    the whole process group is killed (py-spy included) after ``grace_s`` seconds of SIGTERM;
    Ctrl-C is then re-raised. ``timeout_s`` None: no time-out. ``launch``: a worker of a
    multi-worker job (its command prefix, environment and callbacks).
    """
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, **CHILD_ENV, PROFILER_PROGRESS_FD=str(write_fd))
    prefix: list[str] = []
    if launch is not None:
        env.update(launch.env)
        prefix = list(launch.prefix)
    t0 = time.monotonic_ns()
    with (
        open(workdir / "stdout.log", "wb") as out,
        open(workdir / "stderr.log", "wb") as err,
        open(stdin, "rb") if stdin is not None else open(os.devnull, "rb") as inp,
    ):
        try:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", module, str(spec_path.resolve())],
                stdin=inp,
                stdout=subprocess.PIPE if passthrough else out,
                stderr=subprocess.PIPE if passthrough else err,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
                # Killed with the profiler, even by SIGKILL (profiler.lifetime).
                preexec_fn=lifetime.die_with_parent,
            )
        finally:
            os.close(write_fd)
        if launch is not None and launch.started is not None:
            launch.started(proc)
        reader = threading.Thread(target=_pump, args=(read_fd, progress), daemon=True)
        reader.start()
        tees = []
        if passthrough:
            for pipe, log, sink in ((proc.stdout, out, sys.stdout), (proc.stderr, err, sys.stderr)):
                tee = threading.Thread(target=_tee, args=(pipe, log, sink), daemon=True)
                tee.start()
                tees.append(tee)
        timed_out = False
        leftover = False
        try:
            proc.wait(timeout=timeout_s)
            # Processes the measured one started and left behind (a script's forked
            # children) go with it: nothing outlives the run.
            leftover = _reap_group(proc.pid)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:  # Ctrl-C in the runner: take the child down too
            _kill_group(proc, grace_s=grace_s)
            raise
        finally:
            for tee in tees:
                tee.join(timeout=5)
        reader.join(timeout=5)
    return ProcessResult(
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic_ns() - t0,
        leftover=leftover,
    )


def _tee(pipe: Any, log: Any, sink: Any) -> None:
    """Copy a child's output to its log and to ``sink`` (a terminal) as it comes."""
    target = getattr(sink, "buffer", None)
    fd = pipe.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        log.write(chunk)
        log.flush()
        try:
            if target is not None:
                target.write(chunk)
                target.flush()
            else:
                sink.write(chunk.decode(errors="replace"))
                sink.flush()
        except (OSError, ValueError):  # the terminal went away: keep logging
            pass
    pipe.close()


def _pump(fd: int, progress: Progress) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                progress(event)


class ProgressBar:
    """One bar over the whole run: a unit per workload step of the schedule (build, warm-up,
    each phase), advanced fractionally as a phase's window progresses."""

    def __init__(self, opts: RunOptions) -> None:
        self.per_workload = 2 + len(opts.phases)
        self.enabled = opts.progress
        self.bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.per_workload * len(opts.workloads),
                unit="phase",
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.1f}/{total} phases [{elapsed}<{remaining}]",
                disable=None,  # off when stderr is not a terminal
            )
        self.base = 0.0
        self.order = ["build", "warmup", *opts.phases]
        self.lock = threading.Lock()

    def start(self, index: int, name: str) -> None:
        self.base = float(index * self.per_workload)
        self._set(self.base, f"{name} · starting")

    def event(self, e: dict[str, Any]) -> None:
        phase = str(e.get("phase", ""))
        pos = self.order.index(phase) if phase in self.order else 0
        total = max(int(e.get("total", 1) or 1), 1)
        frac = min(int(e.get("done", 0) or 0) / total, 1.0)
        self._set(self.base + pos + frac, f"{e.get('workload', '')} · {phase}")

    def finish(self, index: int, name: str, status: str) -> None:
        self._set(float((index + 1) * self.per_workload), f"{name} · {status}")

    def _set(self, value: float, desc: str) -> None:
        if self.bar is None:
            return
        with self.lock:
            self.bar.n = value
            self.bar.set_description_str(desc, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class TaskBar:
    """A bar for a measurement process that reports ``done``/``total`` tasks (experiments)."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.bar: Any = None
        self.label = label
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=1, unit="task", dynamic_ncols=True, disable=None, desc=label)

    def event(self, e: dict[str, Any]) -> None:
        if self.bar is None:
            return
        self.bar.total = max(int(e.get("total", 1) or 1), 1)
        self.bar.n = min(int(e.get("done", 0) or 0), self.bar.total)
        self.bar.set_description_str(f"{self.label} · {e.get('phase', '')}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_all(opts: RunOptions, run_dir: Path) -> list[WorkloadOutcome]:
    """Run every workload of ``opts`` into ``run_dir``; never raises for a workload's failure."""
    bar = ProgressBar(opts)
    outcomes: list[WorkloadOutcome] = []
    used: set[str] = set()
    try:
        for i, spec in enumerate(opts.workloads):
            slug = rundir.slug(spec.name)
            while slug in used:
                slug += "_"
            used.add(slug)
            bar.start(i, spec.name)
            if isinstance(spec, ScriptSpec) and opts.workers > 1:
                from profiler.processes import workers

                job = workers.run_job(spec, opts.params[spec.name], opts, run_dir, slug, bar.event)
                outcomes.extend(job)
                bar.finish(i, spec.name, FAILED if any(o.status != OK for o in job) else OK)
                continue
            outcome = run_workload_process(
                spec, opts.params[spec.name], opts, run_dir, slug, bar.event
            )
            outcomes.append(outcome)
            bar.finish(i, spec.name, outcome.status)
    finally:
        bar.close()
    return outcomes
