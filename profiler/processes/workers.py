"""A multi-worker job on this machine: ``run --workers N SCRIPT.py``.

Place in the pipeline: ``profiler.processes.runner.run_all`` hands a script to ``run_job``
when ``RunOptions.workers`` is above 1. The job starts N processes of the same, unmodified
script, each profiled as a single script is (``launch.one_run``: same phases, its own folder
``workloads/<script>-worker-<i>/`` and TensorBoard run), each given the ``TF_CONFIG`` of task
``i`` of a cluster of N workers on 127.0.0.1 (``MultiWorkerMirroredStrategy`` reads it).

Where the platform allows (``unshare -n`` and ``nsenter``: root, or CAP_SYS_ADMIN), every
worker runs inside one private network namespace that has only a loopback interface: the
servers TensorFlow starts for the job (gRPC, the coordination service) listen on all
interfaces, and nothing outside the namespace can reach them. Otherwise they run on the
host's loopback and the job's record says so.

Faults: a worker that fails stops the job. The others (which would wait in a collective for
it forever) get ``STOP_GRACE_S`` to end on their own, then SIGTERM (what they measured is
kept), then SIGKILL. A job in which no worker finished a step for ``STALL_S`` (``--worker-stall
S``; a hung worker hangs the others at the next all-reduce) is stopped the same way and each
worker is recorded as hung. The namespace's holder process goes with the job. Ctrl-C or SIGTERM
to the profiler stops every worker at once (SIGTERM, SIGKILL after 5 s), and the partial run
holds each worker's last record (``pipeline.collected``). A MultiWorkerMirroredStrategy worker
does not see that SIGTERM (TensorFlow's preemption notifier takes the signal once the strategy
exists: TF 2.21), so its last record is the one written after its last phase.

TensorFlow's own fault: on a non-chief worker (task 1 and up) of a MultiWorkerMirroredStrategy
job, ``tf.profiler.experimental.stop`` crashes the process now and then (TF 2.21 here: SIGSEGV
in ``ConvertCompleteEventsToXPlane``, or SIGABRT ``free(): invalid pointer``; measured in a
bare two-worker loop without this profiler, about 1 window in 13 on task 1 and none in 100 on
task 0). A job that ends so is started again from the beginning (``JOB_ATTEMPTS`` in all).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profiler import lifetime
from profiler.capture.loop import Params
from profiler.capture.script.spec import ScriptSpec
from profiler.model import FAILED, OK
from profiler.processes import launch, orphans

#: Seconds the other workers get to end by themselves once one failed.
STOP_GRACE_S = 10.0
#: Seconds without a new step on any worker (after the first) before the job counts as hung.
STALL_S = 120.0
#: Seconds a job may take to reach its first step on every worker.
START_S = 600.0
#: Starts of a job whose worker TensorFlow crashed in its profiler (1: no second start; a
#: crash came twice in a row beside another test process).
JOB_ATTEMPTS = 3


@dataclass(frozen=True)
class Cluster:
    """Where the job's workers listen, and how their processes are started."""

    ports: tuple[int, ...]
    prefix: tuple[str, ...] = ()
    isolation: str = "host loopback"

    def tf_config(self, index: int) -> str:
        workers = [f"127.0.0.1:{p}" for p in self.ports]
        return json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        )

    def record(self, index: int) -> dict[str, Any]:
        """The worker's ``trace.script["worker"]`` record."""
        return {
            "index": index,
            "count": len(self.ports),
            "address": f"127.0.0.1:{self.ports[index]}",
            "isolation": self.isolation,
        }


def free_ports(n: int) -> tuple[int, ...]:
    """N ports free on 127.0.0.1 now (held open together, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


class Namespace:
    """A private network namespace with loopback up, held by a ``sleep`` process.

    ``open`` returns None where ``unshare -n`` is not allowed (no root, no user namespaces,
    no ``ip``): the workers then use the host's loopback.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @classmethod
    def open(cls) -> tuple[Namespace | None, str]:
        script = "ip link set lo up && echo ready && exec sleep 2147483647"
        # Only a namespace of our own user's: one made in a new user namespace (``unshare -r``)
        # would need its workers to enter that user namespace too.
        for cmd in (["unshare", "-n"],):
            try:
                proc = subprocess.Popen(
                    [*cmd, "--", "sh", "-c", script],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=lifetime.die_with_parent,
                )
            except OSError as exc:
                return None, f"unshare is not available ({exc.strerror or exc})"
            orphans.started(proc.pid)  # the job's own: never a script's left-over
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() == b"ready":
                return cls(proc), ""
            proc.wait()
            why = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
        return None, why.splitlines()[-1] if why else "unshare -n failed"

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("nsenter", "-t", str(self.proc.pid), "-n", "--")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@dataclass
class _Watch:
    """What the job's watchdog knows: each worker's process and steps, and why it stopped."""

    n: int
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    steps: dict[int, int] = field(default_factory=dict)
    last_step: float = field(default_factory=time.monotonic)
    stopped: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, i: int) -> Callable[[subprocess.Popen[bytes]], None]:
        def call(proc: subprocess.Popen[bytes]) -> None:
            with self.lock:
                self.procs[i] = proc

        return call

    def stepped(self, i: int) -> Callable[[int], None]:
        def call(steps: int) -> None:
            with self.lock:
                if steps > self.steps.get(i, 0):
                    self.steps[i] = steps
                    self.last_step = time.monotonic()

        return call

    def stop(self, why: Callable[[int], str], running: list[int]) -> None:
        """SIGTERM the running workers (their measurements are kept), SIGKILL after a grace."""
        with self.lock:
            procs = {i: self.procs[i] for i in running if i in self.procs}
            for i in running:
                self.stopped.setdefault(i, why(i))
        for proc in procs.values():
            threading.Thread(target=launch.kill_group, args=(proc, 5.0), daemon=True).start()


def _same(text: str) -> Callable[[int], str]:
    def why(_i: int) -> str:
        return text

    return why


def worker_name(spec: ScriptSpec, index: int) -> str:
    return f"{spec.name} worker {index}"


def as_worker(spec: ScriptSpec, index: int, count: int) -> ScriptSpec:
    """The script as worker ``index`` of a job of ``count``: its name and title in the run."""
    return replace(
        spec, name=worker_name(spec, index), title=f"{spec.title} (worker {index} of {count})"
    )


def worker_slug(slug: str, index: int) -> str:
    """Worker ``index``'s folder under ``workloads/`` and ``tensorboard/`` of a job's ``slug``."""
    return f"{slug}-worker-{index}"


def profiler_crash(outcomes: list[launch.WorkloadOutcome]) -> int | None:
    """The worker that TensorFlow crashed inside the framework phase (its profiler's stop), if
    any: a fault of TensorFlow, not of the script (module docstring)."""
    for i, o in enumerate(outcomes):
        if o.native is not None and o.native.in_tensorflow and o.native.phase == "framework":
            return i
    return None


def run_job(
    spec: ScriptSpec,
    params: Params,
    opts: launch.RunOptions,
    run_dir: Path,
    slug: str,
    progress: launch.Progress,
) -> list[launch.WorkloadOutcome]:
    """Run ``opts.workers`` workers of ``spec`` together; one outcome per worker, in order.

    A job whose worker TensorFlow crashed inside its profiler is started again, up to
    ``JOB_ATTEMPTS`` starts in all; each failed attempt's folders move to
    ``retried/attempt-<k>/`` and every worker's notes say why.
    """
    outcomes = _attempt(spec, params, opts, run_dir, slug, progress)
    notes: list[str] = []
    for attempt in range(1, JOB_ATTEMPTS):
        crashed = profiler_crash(outcomes)
        if crashed is None:
            break
        kept = run_dir / "retried" / f"attempt-{attempt}"
        for sub in ("workloads", "tensorboard"):
            for i in range(opts.workers):
                src = run_dir / sub / worker_slug(slug, i)
                if src.exists():
                    (kept / sub).mkdir(parents=True, exist_ok=True)
                    src.rename(kept / sub / src.name)
        notes.append(
            f"the job was started again: in attempt {attempt}, worker {crashed} was "
            f"{outcomes[crashed].error.splitlines()[0]}, a fault of TensorFlow's profiler on a "
            f"multi-worker job's non-chief workers (profiler/docs/tensorflow.md); its files are in "
            f"retried/attempt-{attempt}/"
        )
        outcomes = _attempt(spec, params, opts, run_dir, slug, progress)
    return [_with_notes(o, notes) for o in outcomes]


def _with_notes(o: launch.WorkloadOutcome, added: list[str]) -> launch.WorkloadOutcome:
    if not added or o.trace is None or not o.trace.script:
        return o
    notes = [*o.trace.script.get("notes", []), *added]
    return replace(o, trace=replace(o.trace, script={**o.trace.script, "notes": notes}))


def _stop_together(procs: list[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM every worker at once, SIGKILL what is left after ``grace_s`` (at once on a second
    Ctrl-C, which is then re-raised).

    At once, because one after the other a later worker loses its peer in the middle of an
    all-reduce and fails in it (``Socket closed``, recorded as the script's own error) before
    its turn comes; and the job stops in one grace, not one per worker."""
    threads = [
        threading.Thread(target=launch.kill_group, args=(p, grace_s), daemon=True) for p in procs
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait()
        raise


def _attempt(
    spec: ScriptSpec,
    params: Params,
    opts: launch.RunOptions,
    run_dir: Path,
    slug: str,
    progress: launch.Progress,
) -> list[launch.WorkloadOutcome]:
    """One start of the job's workers, to their end."""
    n = opts.workers
    stall_s = float(opts.options.get("worker_stall_s") or STALL_S)
    ns, why_not = Namespace.open()
    cluster = Cluster(
        free_ports(n),
        ns.prefix if ns is not None else (),
        "a private network namespace (loopback only)"
        if ns is not None
        else f"host loopback "
        f"(a private network namespace is not available here: {why_not}): the job's gRPC "
        "servers listen on every interface of this machine while it runs",
    )
    watch = _Watch(n)
    # Each worker's phases know they are one of a job's (the what-ifs stay off), and py-spy
    # samples without pausing it: paused by ptrace for each sample, a worker crashed here in
    # TensorFlow's profiler start that followed (SIGSEGV, free(): invalid pointer; 1 run in 4).
    # The workers plan their windows with the chief's figures (capture.script.agree), through
    # a file of this start alone.
    plan = run_dir / "workloads" / f".{slug}-plan.json"
    plan.unlink(missing_ok=True)
    opts = replace(
        opts,
        options={
            "sample_nonblocking": True,
            **opts.options,
            "job_worker": True,
            "job_plan": str(plan),
        },
    )
    outcomes: list[launch.WorkloadOutcome | None] = [None] * n
    phases = [p for p in opts.phases]

    def one(i: int) -> None:
        wspec = as_worker(spec, i, n)
        how = launch.Launch(
            prefix=cluster.prefix,
            env={"TF_CONFIG": cluster.tf_config(i)},
            started=watch.started(i),
            steps=watch.stepped(i),
            script={"worker": cluster.record(i)},
        )
        wslug = worker_slug(slug, i)
        try:
            outcomes[i] = launch.one_run(
                wspec,
                params,
                replace(opts, options={**opts.options, "job_index": i}),
                run_dir / "workloads" / wslug,
                run_dir / "tensorboard" / wslug,
                wslug,
                progress,
                phases,
                {},
                how,
            )
        except Exception as exc:  # a worker's failure to start never takes the job down
            outcomes[i] = launch.WorkloadOutcome(
                spec=wspec, slug=wslug, status=FAILED, trace=None, error=str(exc), params=params
            )

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    t0 = time.monotonic()
    try:
        for t in threads:
            t.start()
        failed_at: float | None = None
        while any(t.is_alive() for t in threads):
            time.sleep(0.2)
            running = [i for i, t in enumerate(threads) if t.is_alive()]
            done_bad = [
                i
                for i, o in enumerate(outcomes)
                if o is not None and o.status != OK and i not in watch.stopped
            ]
            now = time.monotonic()
            if done_bad and running and failed_at is None:
                failed_at = now
            if failed_at is not None and now - failed_at > STOP_GRACE_S and running:
                reason = (
                    f"stopped by the profiler: worker {done_bad[0] if done_bad else '?'} failed"
                )
                watch.stop(_same(reason), running)
                failed_at = float("inf")
            with watch.lock:
                quiet = now - watch.last_step
                started_all = len(watch.steps) == n
            if (
                running
                and not watch.stopped
                and ((started_all and quiet > stall_s) or (not started_all and now - t0 > START_S))
            ):

                def hung(i: int, q: float = quiet) -> str:
                    s = watch.steps.get(i, 0)
                    return (
                        f"hung: no worker finished a step for {q:.0f} s (this worker was at "
                        f"step {s}); the profiler stopped the job"
                    )

                watch.stop(hung, running)
        for t in threads:
            t.join()
    except BaseException:
        with watch.lock:
            procs = list(watch.procs.values())
        _stop_together(procs, 5.0)
        raise
    finally:
        plan.unlink(missing_ok=True)
        if ns is not None:
            ns.close()
    out: list[launch.WorkloadOutcome] = []
    for i, o in enumerate(outcomes):
        assert o is not None
        why = watch.stopped.get(i)
        if why:
            error = f"{why}; {o.error}".strip("; ") if o.error else why
            trace = o.trace
            if trace is not None:
                trace = replace(trace, status=FAILED, error=error)
            o = replace(o, status=FAILED, error=error, trace=trace)
        out.append(o)
    return out
