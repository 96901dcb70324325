"""One measured process: start it, watch it under a time-out, turn what it left into an outcome.

Place in the pipeline: the parent side, shared by the runner (``profiler.processes.runner``: one
process per workload, in turn) and a job's workers (``profiler.processes.workers``: a script's
processes started together). ``run_workload_process`` starts ``python -m profiler.capture.worker``
for a workload (or the script process for a user's script) with its own folder, waits for it under
a time-out, and turns whatever it left (``model.json.gz``, possibly partial; ``error.txt``; the
tail of its stderr) into a ``WorkloadOutcome``; ``one_run`` is one such run, ``kill_group`` ends a
process and its group. ``run_process`` is the one way a measurement process is started (the
experiments and efficiency processes too).

The workload's own stdout and stderr go to ``stdout.log`` and ``stderr.log`` in its folder, so the
terminal shows only the progress bar and the final table. A user's script
(``profiler.capture.script``) runs in ``python -m profiler.capture.script`` instead, and its output
also goes to the terminal as it comes (the logs keep a copy), its standard input is ``--stdin``'s
file or nothing, and it has no time-out unless one is given. A script process that dies outside
Python leaves the memory record it kept so far (``profiler.capture.memory``), which its trace
takes; one that ran out of memory (its exception, or a SIGKILL read by
``profiler.processes.crash``) says so, with its resident size and what grew.
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
from profiler.capture import memory as memory_capture
from profiler.capture import quiet
from profiler.capture.loop import Params, WorkloadSpec
from profiler.capture.phases import sampled
from profiler.capture.phases import whatif as whatif_phase
from profiler.capture.script.spec import ScriptSpec
from profiler.capture.worker import MODEL_FILE, WorkerSpec
from profiler.model import FAILED, OK, PARTIAL, TIMEOUT, PhaseRecord, WorkloadTrace
from profiler.model.records import WhatIfData
from profiler.processes import crash, orphans, rerun, rundir
from profiler.redact import known_secrets, redact_argv, redact_text

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
            (``--repeat N``); None: as many as fit in the script's re-run budget
            (``rerun_budget_s``).
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
    script_repeat: int | None = None
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
    "processes the script started (forked children, daemons in sessions of their own) were "
    "still running when it ended: they were ended with it"
)


def _ended_outside(
    trace: WorkloadTrace, how: str, steps: int | None, timed_out: bool
) -> WorkloadTrace:
    """A script's record when its process never ran its own ending (the last snapshot says
    "completed" or nothing): how it ended, and its steps from the heartbeat if more."""
    s = dict(trace.script)
    done = max(int(s.get("steps") or 0), steps or 0)
    s["steps"] = done
    s["ended"] = "timeout" if timed_out else "exited"
    # The record and the heartbeat lag the script: it ran at least this many steps.
    s["message"] = (
        f"the script's process {how} after at least {done} steps"
        if not timed_out
        else (f"the script {how} after at least {done} steps")
    )
    return replace(trace, script=s)


def _with_memory_so_far(trace: WorkloadTrace, wdir: Path) -> tuple[WorkloadTrace, bool]:
    """A script's trace with the memory record its process kept so far
    (``profiler.capture.memory.read_spill``) where that one runs later than the trace's (the
    process died after its last snapshot: an out-of-memory kill), and whether it was taken."""
    kept = memory_capture.read_spill(wdir)
    if kept is None or not trace.script:
        return trace, False
    had = trace.script.get("memory") or {}
    if had.get("measured") and (had.get("t_ns") or [0])[-1] >= kept["t_ns"][-1]:
        return trace, False
    return replace(trace, script={**trace.script, "memory": kept}), True


def _out_of_memory(
    trace: WorkloadTrace | None,
    returncode: int | None,
    pid: int,
    before: dict[str, int],
    steps: int | None,
) -> crash.OutOfMemory | None:
    """How a script ran out of memory: the exception its process recorded
    (``memory.out_of_memory``), or its death by SIGKILL read as the out-of-memory killer's
    (``crash.sigkill_out_of_memory``); None if it did not."""
    if trace is None or not trace.script:
        return None
    mem = trace.script.get("memory") or {}
    said = mem.get("out_of_memory")
    if said:
        return crash.OutOfMemory(
            str(said.get("how")),
            said.get("rss_bytes"),
            int(said.get("steps") or 0),
            bool(said.get("confirmed", True)),
            str(said.get("evidence") or ""),
        )
    if returncode != -signal.SIGKILL:
        return None
    done = max(
        int(trace.script.get("steps") or 0), steps or 0, max(mem.get("steps") or [0], default=0)
    )
    return crash.sigkill_out_of_memory(
        mem, before, crash.oom_kills(), crash.kernel_log_kill(pid), done
    )


def _ran_out(trace: WorkloadTrace, oom: crash.OutOfMemory) -> WorkloadTrace:
    """The trace of a script that ran out of memory: its memory record says how, and its
    message what grew (``profiler.diagnoses.memory.grew_sentence``)."""
    from profiler.diagnoses.memory import grew_sentence

    s = dict(trace.script)
    mem = dict(s.get("memory") or {})
    if mem.get("measured"):
        mem["out_of_memory"] = oom.to_json()
        s["memory"] = mem
    s["steps"] = max(int(s.get("steps") or 0), oom.steps)
    trace = replace(trace, script=s)
    s["message"] = f"{oom.sentence()}; {grew_sentence(trace)}"
    return replace(trace, script=s)


def _error_text(wdir: Path) -> str:
    """The error a failed process left: its ``error.txt`` (the script process writes its
    headline sentence first, then its traceback's tail: both kept), else its stderr's tail."""
    try:
        lines = (wdir / "error.txt").read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return _tail(wdir / "stderr.log")
    if len(lines) > STDERR_TAIL_LINES + 1:
        lines = [lines[0], *lines[-STDERR_TAIL_LINES:]]
    return "\n".join(lines)


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = 3.0) -> None:
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


def run_workload_process(
    spec: WorkloadSpec,
    params: Params,
    opts: RunOptions,
    run_dir: Path,
    slug: str,
    progress: Progress,
) -> WorkloadOutcome:
    """Run one workload in its own process and collect what it leaves, whatever happens.

    A user's script runs again while phases that apply to it got no steps (it ended before
    their windows): each run measures the phases still missing, fitted into the steps the
    first run had, and the records are merged (``PhaseRecord.repeat``). How many runs:
    ``opts.script_repeat`` when given (``--repeat N``), else as many as fit in the re-run
    budget (``rerun.budget_s``: 3x the script's own time + 20 s under 30 s), each new run
    expected to take as long as the one before it.
    """
    wdir = run_dir / "workloads" / slug
    tbdir = run_dir / "tensorboard" / slug
    outcome = one_run(spec, params, opts, wdir, tbdir, slug, progress, list(opts.phases), {})
    if not isinstance(spec, ScriptSpec):
        return outcome
    runs = [_run_facts(outcome.trace, 0, outcome.wall_ns)]
    first = outcome.trace
    alone_s = rerun.alone_s(first) if first is not None else None
    budget_s = rerun.budget_s(alone_s) if alone_s is not None else None
    last_wall_ns = outcome.wall_ns
    extra = rerun.same_steps(first) if first is not None else {}
    r = 0
    over_budget = False
    #: The phases a run of their own measured nothing of.
    no_room: list[str] = []

    def later(r: int, phases: list[str], script: dict[str, Any]) -> WorkloadOutcome:
        """Run ``r`` of the script (``repeat-r``), measuring ``phases``."""
        return one_run(
            spec, params, opts, wdir / f"repeat-{r}", tbdir, slug, progress, phases, script
        )

    restart = rerun.restart(first) if first is not None and outcome.status == OK else {}
    if (
        first is not None
        and restart
        and rerun.another(opts.script_repeat, r, outcome.wall_ns, last_wall_ns, budget_s)
    ):
        # No steps were found: the loop that ended before it was chosen is the steps of a run
        # that measures every phase, which replaces the first (whose phases had one whole-run
        # step); the first is kept in ``runs``.
        r += 1
        file, line = restart.get("step_loop") or ("", restart["step_line"])
        iterations = restart["expected_steps"]
        where = f"{line} of {file}" if file else f"{line}"
        print(
            rerun.restart_line(spec.name, where, iterations, outcome.wall_ns, budget_s),
            file=sys.stderr,
        )
        again = later(r, list(opts.phases), restart)
        last_wall_ns = again.wall_ns
        runs.append(_run_facts(again.trace, r, again.wall_ns))
        wall_ns = outcome.wall_ns + again.wall_ns
        if again.trace is not None and again.status == OK and again.trace.script.get("steps"):
            auto = {
                **(first.script.get("auto_step") or {}),
                "chosen_line": line,
                "chosen_file": file,
                "why": f"the loop at line {where} ended before it was chosen; run {r + 1} "
                f"took its iterations as the steps",
            }
            trace = _rebase(again.trace, r)
            trace = replace(trace, script={**trace.script, "auto_step": auto})
            outcome = replace(again, trace=trace, wall_ns=wall_ns)
            extra = {**restart, "expected_steps": int(trace.script.get("steps") or 0)}
        else:
            outcome = replace(outcome, wall_ns=wall_ns)
    while outcome.trace is not None and outcome.status == OK:
        merged = outcome.trace
        missing = [p.name for p in merged.phases if p.missed]
        if not missing:
            break
        # The phases with no measurement first: a thin one (measured, on too few steps or
        # samples) would take the steps they need, and is asked again once they have theirs.
        missing = [p.name for p in merged.phases if p.missed and p.status != OK] or missing
        expected_ns = rerun.expected_ns(missing, last_wall_ns, alone_s)
        allowed_s = rerun.budget_for(missing, budget_s, alone_s)
        if not rerun.another(opts.script_repeat, r, outcome.wall_ns, expected_ns, allowed_s):
            over_budget = opts.script_repeat is None and r < rerun.MAX_RUNS - 1
            break
        r += 1
        expected = int(extra.get("expected_steps") or merged.script.get("steps") or 0)
        print(
            rerun.again_line(
                spec.name,
                missing,
                expected,
                r,
                outcome.wall_ns,
                allowed_s,
                _thin(merged),
            ),
            file=sys.stderr,
        )
        again = later(r, missing, {**extra, "expected_steps": expected, **_measured(merged)})
        last_wall_ns = again.wall_ns
        runs.append(_run_facts(again.trace, r, again.wall_ns))
        if again.trace is None or again.status != OK:
            outcome = replace(
                outcome,
                error=f"repeat {r}: {again.error}".strip(),
                wall_ns=outcome.wall_ns + again.wall_ns,
            )
            break
        filled = _merge(merged, again.trace, r)
        outcome = replace(outcome, trace=filled, wall_ns=outcome.wall_ns + again.wall_ns)
        if all(a is b for a, b in zip(filled.phases, merged.phases, strict=True)):
            no_room = [
                p.name for p in filled.phases if p.missed and p.status != OK and p.name in missing
            ]
            break  # the run measured nothing better: another would not either
    if outcome.trace is not None:
        trace = outcome.trace
        missed = [p.name for p in trace.phases if p.missed]
        script = {
            **trace.script,
            "runs": runs,
            "missed": missed,
            "rerun": rerun.record(opts.script_repeat, alone_s, budget_s, outcome.wall_ns),
        }
        thin = _thin(trace)
        script["message"] = rerun.message(
            script.get("message", ""),
            missed,
            thin,
            alone_s if over_budget else None,
            last_wall_ns,
            budget_s,
            no_room,
        )
        if missed and opts.script_repeat is None and len(runs) >= rerun.MAX_RUNS:
            # Ended by the runs' limit, not the budget: say so (a 331-step course script whose
            # every run fitted one phase reached its 5th run with the what-if still missing).
            script["message"] += f" (a script is run at most {rerun.MAX_RUNS} times by default)"
        final = replace(trace, script=script)
        outcome = replace(outcome, trace=final)
        # The trace the run is analysed from, the repeats' phases and the script's record with
        # them: re-analysing the run's folder gives the run's answer again. A write that fails
        # (a full disk) leaves the first run's trace there; the run goes on.
        try:
            final.save(wdir / MODEL_FILE)
        except OSError:
            pass
    return outcome


def _run_facts(trace: WorkloadTrace | None, repeat: int, wall_ns: int) -> dict[str, Any]:
    wall_s = round(wall_ns / 1e9, 3)
    if trace is None:
        return {"repeat": repeat, "steps": 0, "measured": [], "wall_s": wall_s}
    measured = [p.name for p in trace.phases if p.status == OK and p.repeat == 0]
    steps = int(trace.script.get("steps") or 0)
    return {"repeat": repeat, "steps": steps, "measured": measured, "wall_s": wall_s}


def _merge(first: WorkloadTrace, again: WorkloadTrace, repeat: int) -> WorkloadTrace:
    """``first`` with each phase it missed taken from ``again`` (run ``repeat``) where that run
    measured it; artefact paths stay relative to the workload's folder."""
    got = {p.name: p for p in again.phases}
    phases = []
    for p in first.phases:
        new = got.get(p.name)
        # A phase missed or too thin to be right is taken from the new run where that one
        # measured it right, or on more steps.
        if p.missed and p.name == "whatif" and new is not None and _whatifs(p) and _whatifs(new):
            # The what-ifs the first had no room for, measured in this run, beside its own.
            moved = replace(new, artefacts=tuple(f"repeat-{repeat}/{a}" for a in new.artefacts))
            p = _whatifs_merged(p, moved, repeat)
        elif p.missed and p.name == "sampled" and p.status == OK and new is not None and _ok(new):
            # Samples add up across runs of the same steps: a short loop's few are merged.
            moved = replace(new, artefacts=tuple(f"repeat-{repeat}/{a}" for a in new.artefacts))
            p = sampled.combine(p, moved, f"samples of repeat {repeat} added")
        elif p.missed and new is not None and (not new.missed or _steps(new) > _steps(p)):
            note = f"measured in repeat {repeat} of the script"
            p = replace(
                new,
                repeat=repeat,
                artefacts=tuple(f"repeat-{repeat}/{a}" for a in new.artefacts),
                reason=f"{new.reason}; {note}" if new.reason else note,
            )
        phases.append(p)
    # Every run's reference blocks: a phase taken from this run is compared with its own.
    refs = tuple(replace(b, repeat=repeat) for b in again.references)
    return replace(first, phases=tuple(phases), references=first.references + refs)


def _whatifs(p: PhaseRecord) -> tuple[Any, ...]:
    """The what-ifs a what-if phase's record measured."""
    return tuple(getattr(p.data, "results", ()) or ())


def _measured(trace: WorkloadTrace) -> dict[str, Any]:
    """For a later run: the what-ifs this trace measured already (that run measures the rest)."""
    p = next((p for p in trace.phases if p.name == "whatif"), None)
    done = [x.id for x in _whatifs(p)] if p is not None else []
    return {whatif_phase.SKIP_KEY: done} if done else {}


def _whatifs_merged(first: PhaseRecord, again: PhaseRecord, repeat: int) -> PhaseRecord:
    """A what-if phase's record with the what-ifs a later run measured added to the first's
    (that run skipped the first's); still missed while one had no room in either."""
    more = again.data
    had = {y.id for y in _whatifs(first)}
    results = (*_whatifs(first), *(x for x in _whatifs(again) if x.id not in had))
    ran = {x.id for x in results}
    not_run = tuple((k, why) for k, why in getattr(more, "not_run", ()) if k not in ran)
    note = f"what-ifs measured in repeat {repeat} of the script too"
    return replace(
        first,
        data=WhatIfData(results=results, not_run=not_run),
        missed=again.missed,
        artefacts=first.artefacts + again.artefacts,
        reason=f"{first.reason}; {note}" if first.reason else note,
    )


def _rebase(trace: WorkloadTrace, repeat: int) -> WorkloadTrace:
    """A later run's trace as the workload's own: its phases and reference blocks say which
    run took them, and their artefact paths are relative to the workload's folder."""
    phases = tuple(
        replace(p, repeat=repeat, artefacts=tuple(f"repeat-{repeat}/{a}" for a in p.artefacts))
        for p in trace.phases
    )
    refs = tuple(replace(b, repeat=repeat) for b in trace.references)
    return replace(trace, phases=phases, references=refs)


def _ok(p: PhaseRecord) -> bool:
    """Whether a phase record holds samples measured right (a sampled phase to add)."""
    return p.status == OK and bool(p.samples)


def _thin(trace: WorkloadTrace) -> list[str]:
    """The phases measured, but on too few steps or samples to be right."""
    return [p.name for p in trace.phases if p.missed and p.status == OK]


def _steps(p: PhaseRecord) -> int:
    return p.window.n_steps if p.status == OK and p.window is not None else 0


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


def one_run(
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
    secret_env: dict[str, str] = {}
    if isinstance(spec, ScriptSpec) and spec.argv:
        # The run folder keeps the spec without the script's secrets from the start, even if
        # the run is killed (profiler.redact); the script's own arguments reach its process
        # through its environment, which it reads and drops before the script runs.
        kept = {**options["script"], "argv": redact_argv(spec.argv)}
        rundir.atomic_write_text(
            spec_path, dataclasses.replace(wspec, options={**options, "script": kept}).to_json()
        )
        secret_env[ScriptSpec.ARGV_ENV] = json.dumps(list(spec.argv))
    else:
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

    # The kernel's out-of-memory kill counters before the script runs (crash.oom_kills).
    oom_before = crash.oom_kills() if script else {}
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
            env=secret_env,
        )
    else:
        proc = run_process("profiler.capture.worker", spec_path, wdir, timeout_s, progress)
    timed_out, wall_ns = proc.timed_out, proc.wall_ns
    trace: WorkloadTrace | None = None
    load_error = ""
    if (wdir / MODEL_FILE).exists():
        try:
            trace = load_trace(wdir / MODEL_FILE)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            load_error = f"its {MODEL_FILE} could not be read: {exc}"
    spilled = False
    if script and trace is not None:
        # A process that died after its last snapshot kept its memory record so far.
        trace, spilled = _with_memory_so_far(trace, wdir)
    if script and trace is not None:
        # The script process sized its timed window from its own warm-up.
        params = params.with_(steps=max(int(trace.params.get("steps", 1)), 1))
    outside = ""  # how a process ended outside Python (os._exit, a signal), in words
    native: crash.NativeCrash | None = None
    oom = None
    if script and not timed_out and proc.returncode != 0:
        oom = _out_of_memory(trace, proc.returncode, proc.pid, oom_before, heartbeat.get("steps"))
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
        error = _error_text(wdir)
        if proc.returncode and proc.returncode < 0:
            outside = crash.killed_by(-proc.returncode)
            native = crash.read(wdir / "stderr.log")
            if native is not None:
                # The dump replaces the stderr tail (its last lines list extension modules).
                outside, error = f"{outside} {native.where()}", native.dump()
            elif oom is not None:
                outside = oom.sentence()
        elif proc.returncode is not None and trace is not None and trace.status == PARTIAL:
            # A trace its process never finished: it left without Python's ending.
            outside = f"exited with status {proc.returncode} outside Python (os._exit, a crash)"
            if proc.returncode == 0 and script:
                # os._exit(0): the script's own status says it succeeded.
                outside = "exited with status 0 outside Python (os._exit(0))"
                status = OK
        if status == OK:
            error = ""
        elif outside:
            error = f"{outside}\n{error}".strip()
        if load_error:
            error = f"{error}\n{load_error}".strip()
        if status != OK:
            error = error or f"exited with status {proc.returncode}"
    if script and error:
        # Its error is the script's own text (error.txt, its stderr's tail): no secret in it.
        error = redact_text(error, known_secrets(spec.argv))  # type: ignore[attr-defined]
    if trace is not None and trace.script and (outside or timed_out):
        trace = _ended_outside(trace, outside or error, heartbeat.get("steps"), timed_out)
    if oom is not None and trace is not None:
        # The run says it ran out of memory, with the figure, and what grew.
        trace = _ran_out(trace, oom)
    if trace is not None and (status != OK or outside) and trace.status in (OK, PARTIAL):
        trace = replace(trace, status=status, error=error)
    if proc.leftover and trace is not None and trace.script:
        notes = [*trace.script.get("notes", []), LEFTOVER_NOTE]
        trace = replace(trace, script={**trace.script, "notes": notes})
    if spilled and trace is not None:
        # The saved trace holds what the process measured up to its end (a re-render reads it).
        trace.save(wdir / MODEL_FILE)
    if script:
        for name in memory_capture.SPILL_FILES:
            (wdir / name).unlink(missing_ok=True)
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
    pid: int = 0


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
    env: dict[str, str] | None = None,
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
    env = dict(os.environ, **CHILD_ENV, **(env or {}), PROFILER_PROGRESS_FD=str(write_fd))
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
        orphans.started(proc.pid)
        if launch is not None and launch.started is not None:
            launch.started(proc)
        reader = threading.Thread(target=_pump, args=(read_fd, progress), daemon=True)
        reader.start()
        tees = []
        log_errors: list[OSError] = []  # a log the disk could not hold (the tee goes on)
        if passthrough:
            # The script's stderr to the terminal without the profiler's own TF lines.
            drops = quiet.LineFilter(quiet.TEE_LINES)
            streams = ((proc.stdout, out, sys.stdout, None), (proc.stderr, err, sys.stderr, drops))
            for pipe, log, sink, drop in streams:
                copier = threading.Thread(
                    target=tee, args=(pipe, log, sink, drop, log_errors), daemon=True
                )
                copier.start()
                tees.append(copier)
        timed_out = False
        leftover = False
        try:
            proc.wait(timeout=timeout_s)
            # Processes the measured one started and left behind (a script's forked
            # children, daemons in sessions of their own) go with it: nothing outlives the
            # run; children that already exited are reaped, not reported.
            leftover = orphans.end_leftovers(proc.pid)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
        except BaseException:  # Ctrl-C in the runner: take the child down too
            kill_group(proc, grace_s=grace_s)
            raise
        finally:
            orphans.forget(proc.pid)
            for copier in tees:
                copier.join(timeout=5)
        reader.join(timeout=5)
    if log_errors:
        # The output folder is full: the run cannot be written (exit 3, one line); the
        # script's output went on to the terminal, so the script was never blocked on it.
        raise log_errors[0]
    return ProcessResult(
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic_ns() - t0,
        leftover=leftover,
        pid=proc.pid,
    )


#: How long the output copier waits between two reads of a child's pipe, and the most it
#: reads at once (the pipe holds 64 KB: a child writing faster than that in the wait blocks
#: until the next read).
TEE_WAIT_S = 0.01
TEE_CHUNK = 1 << 20


def tee(
    pipe: Any,
    log: Any,
    sink: Any,
    drop: quiet.LineFilter | None = None,
    errors: list[OSError] | None = None,
) -> None:
    """Copy a child's output to its log and to ``sink`` (a terminal) as it comes; the whole
    lines ``drop`` drops go to the log only (a line's pieces pass as they come: TensorFlow
    writes each of its lines at once). A log that cannot be written (a full disk) is given
    up, its error put in ``errors``: the pipe is still drained, so the child never blocks."""
    target = getattr(sink, "buffer", None)
    fd = pipe.fileno()
    mid_line = False  # the last chunk ended inside a line that was passed on
    logging = True
    first = True
    open_line = False  # the last chunk passed on ended inside a line
    while True:
        if not first:
            # A reader waiting in read() is woken by every write the child makes, and on a
            # busy machine takes the child's core while it copies the chunk: a script printing
            # each step ran 30-39% slower (a loop printing 20,000 lines: 0.67-0.72 s against
            # 0.52 s to /dev/null). Reading every TEE_WAIT_S instead, the child's writes only
            # fill the pipe: 0.53 s.
            time.sleep(TEE_WAIT_S)
        first = False
        try:
            chunk = os.read(fd, TEE_CHUNK)
        except OSError:
            break
        if not chunk:
            break
        if logging:
            try:
                log.write(chunk)
                log.flush()
            except OSError as exc:
                logging = False
                if errors is not None:
                    errors.append(exc)
        if drop is not None:
            head = b""
            if mid_line:
                end = chunk.find(b"\n") + 1 or len(chunk)
                head, chunk = chunk[:end], chunk[end:]
            chunk = head + drop.split(chunk)[0]
            mid_line = bool(chunk) and not chunk.endswith(b"\n")
        try:
            if target is not None:
                target.write(chunk)
                target.flush()
            else:
                sink.write(chunk.decode(errors="replace"))
                sink.flush()
            if chunk:
                open_line = not chunk.endswith(b"\n")
        except (OSError, ValueError):  # the terminal went away: keep logging
            pass
    if open_line:
        # The script's last line, unfinished (a progress bar's), would run into the
        # profiler's own output (Keras's last bar read "... 146ms/step workload  status").
        try:
            if target is not None:
                target.write(b"\n")
                target.flush()
            else:
                sink.write("\n")
                sink.flush()
        except (OSError, ValueError):
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
