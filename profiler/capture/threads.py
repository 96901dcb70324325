"""CPU time of the process's threads over a window: who kept the cores busy.

Place in the pipeline: capture, inside the script's process. The script schedule
(``profiler.capture.script.schedule``) reads ``start`` just before the timed window's first step
and ``stop`` just after its last: two reads a window, nothing installed in between. The result
is a ``ThreadCpu`` record (``profiler.model.records``), the timed phase's data; the analysis
(``profiler.analysis.threads``) sets it against the kernels' time per step.

What is read: the whole process's CPU time (``time.process_time_ns``: every thread, those that
ended during the window too), the main thread's (its CPU clock, ``pthread_getcpuclockid``: the
script runs its steps there) and each thread's ``utime + stime`` from
``/proc/self/task/<tid>/stat`` grouped by thread name (clock ticks) and split by when each
thread started (``late_cpu_ns``: after TensorFlow's runtime, tf.data's iterators' threads), and
every core's busy time (``/proc/stat``: the machine is shared; another process's load takes
cores too), and the main thread's time runnable but waiting for a core (``schedstat``). Linux
only: elsewhere ``read`` returns None and the window's CPU is not measured.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from profiler.model.records import ThreadCpu

TASKS = "/proc/self/task"
#: Threads started within this many clock ticks (10 ms each) of TensorFlow's first are its
#: runtime's pools: in the Keras weather example its 4 pool threads started in the same tick,
#: the first epoch's tf.data iterator threads 20-140 ticks later (the model built between).
RUNTIME_TICKS = 5
#: The name of TensorFlow's inter-op pool's threads (``/proc/self/task/*/comm``), TensorFlow
#: 2.21: the first of them marks when its runtime started (threads started before it, such as
#: numpy's BLAS pool, are not late).
RUNTIME_POOL = "tf_Compute"


@dataclass(frozen=True)
class Reading:
    """One read of the process's clocks."""

    wall_ns: int
    process_cpu_ns: int
    main_cpu_ns: int
    #: tid -> (thread name, CPU ns at clock-tick resolution, start in ticks since boot).
    tasks: dict[int, tuple[str, int, int]]
    #: Every core's non-idle time, summed (``/proc/stat``), or None.
    machine_busy_ns: int | None = None
    #: The native ids of the threads Python's ``threading`` knows, the main thread's aside.
    python_tids: frozenset[int] = frozenset()
    #: The process's child processes: pid -> CPU ns (a Pool's workers).
    children: dict[int, int] | None = None
    #: The CPU of its children that ended and were waited for (``reaped_ns``).
    reaped_ns: int = 0
    #: The main thread's time waiting on a run queue for a core (``schedstat``), or None.
    main_wait_ns: int | None = None


def supported() -> bool:
    """Whether the threads' CPU can be read here (Linux's /proc, a thread CPU clock)."""
    return os.path.isdir(TASKS) and hasattr(time, "pthread_getcpuclockid")


def _tick_ns() -> int:
    try:
        return 10**9 // int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 10**7  # the usual 100 ticks a second


def _task(tid: str, tick_ns: int) -> tuple[str, int, int] | None:
    try:
        with open(f"{TASKS}/{tid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None  # the thread ended between the listing and the read
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; fields follow the last
    # ")". utime and stime are fields 14 and 15 of the line, 12th and 13th after the ")";
    # starttime field 22, the 20th.
    head, _, rest = stat.rpartition(")")
    name = head.partition("(")[2]
    fields = rest.split()
    try:
        return name, (int(fields[11]) + int(fields[12])) * tick_ns, int(fields[19])
    except (IndexError, ValueError):
        return None


def _machine_busy(tick_ns: int) -> int | None:
    """Every core's time not idle: the first line of /proc/stat less idle and iowait (guest
    time is already counted in user and nice)."""
    try:
        with open("/proc/stat", "rb") as f:
            line = f.readline().decode().split()
        ticks = [int(v) for v in line[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    if line[:1] != ["cpu"] or len(ticks) < 8:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) * tick_ns


def others_busy_ns() -> int | None:
    """Every core's busy time less this process's CPU time (all its threads), in ns: what
    other processes (and this one's children) kept the machine busy with, cumulative; None
    where /proc/stat cannot be read."""
    busy = _machine_busy(_tick_ns())
    return None if busy is None else busy - time.process_time_ns() - reaped_ns()


def reaped_ns() -> int:
    """The CPU time of this process's children that ended and were waited for (a
    multiprocessing pool's workers, ended at each epoch by a Keras ``PyDataset``), in ns: one
    system call. Their work is the script's, not other processes' load (a data generator's six
    workers read as "other processes kept 1.3 of this machine's 2 cores busy")."""
    t = os.times()
    return int((t.children_user + t.children_system) * 1e9)


def _children(tick_ns: int) -> dict[int, int]:
    """This process's child processes (a multiprocessing Pool's workers): pid -> CPU ns."""
    me = os.getpid()
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        try:
            if int(fields[1]) == me:
                out[int(entry)] = (int(fields[11]) + int(fields[12])) * tick_ns
        except (IndexError, ValueError):
            continue
    return out


def read() -> Reading | None:
    """The process's clocks now; None where they cannot be read."""
    if not supported():
        return None
    try:
        clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        main_ns = time.clock_gettime_ns(clock)
        tick = _tick_ns()
        tasks: dict[int, tuple[str, int, int]] = {}
        for tid in os.listdir(TASKS):
            got = _task(tid, tick)
            if got is not None:
                tasks[int(tid)] = got
        machine = _machine_busy(tick)
        main = threading.main_thread()
        python = frozenset(
            t.native_id for t in threading.enumerate() if t is not main and t.native_id
        )
        return Reading(
            time.monotonic_ns(),
            time.process_time_ns(),
            main_ns,
            tasks,
            machine,
            python,
            _children(tick),
            reaped_ns(),
            _run_wait(main.native_id),
        )
    except (OSError, ValueError, OverflowError):
        return None


def _run_wait(tid: int | None) -> int | None:
    """A thread's time so far runnable but waiting for a core (``/proc/self/task/<tid>/
    schedstat``, its second field, ns; the kernel's scheduler statistics), None where not
    read. Beside one spinning process a thread spinning for 2 s read 1.24 s of CPU and 0.76 s
    of waiting: the two sum to its wall time."""
    if tid is None:
        return None
    try:
        with open(f"{TASKS}/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def window(start: Reading | None, end: Reading | None) -> ThreadCpu | None:
    """What the threads used between two reads; None if either is missing."""
    if start is None or end is None or end.wall_ns <= start.wall_ns:
        return None
    main_tid = threading.main_thread().native_id
    python_tids = start.python_tids | end.python_tids
    # TensorFlow's runtime starts its pools together when its context starts: its first
    # inter-op thread (RUNTIME_POOL) and the threads started within RUNTIME_TICKS of it.
    pool = [t[2] for t in end.tasks.values() if t[0] == RUNTIME_POOL]
    first = min(pool) if pool else None
    by_name: dict[str, int] = {}
    python = late = 0
    seen = 0
    for tid, (name, ns, started) in end.tasks.items():
        if tid == main_tid:
            continue
        before = start.tasks.get(tid)
        # A thread started during the window used all its CPU in it.
        used = ns - (before[1] if before is not None and before[0] == name else 0)
        if used <= 0:
            continue
        seen += used
        by_name[name] = by_name.get(name, 0) + used
        if tid in python_tids:
            python += used
        elif first is not None and started > first + RUNTIME_TICKS:
            late += used
    process = max(end.process_cpu_ns - start.process_cpu_ns, 0)
    main = max(end.main_cpu_ns - start.main_cpu_ns, 0)
    # Threads that ended during the window (gone at its end): a finished epoch's iterator's.
    ended = max(process - main - seen, 0)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return ThreadCpu(
        wall_ns=end.wall_ns - start.wall_ns,
        process_cpu_ns=process,
        main_cpu_ns=main,
        other_cpu_ns=max(process - main, 0),
        by_name=dict(sorted(by_name.items(), key=lambda kv: -kv[1])),
        threads=len(end.tasks),
        cpu_count=os.cpu_count() or usable,
        usable_cpus=usable,
        python_threads_cpu_ns=python,
        late_cpu_ns=late + ended if first is not None else None,
        machine_busy_ns=(
            max(end.machine_busy_ns - start.machine_busy_ns, 0)
            if end.machine_busy_ns is not None and start.machine_busy_ns is not None
            else None
        ),
        children_cpu_ns=_children_used(start.children, end.children) + _reaped_used(start, end),
        main_wait_ns=(
            max(end.main_wait_ns - start.main_wait_ns, 0)
            if end.main_wait_ns is not None and start.main_wait_ns is not None
            else None
        ),
    )


def _reaped_used(start: Reading, end: Reading) -> int:
    """What the children that ended and were waited for during the window used in it: their
    whole CPU, less what those alive at its start had used by then."""
    gone = sum(ns for pid, ns in (start.children or {}).items() if pid not in (end.children or {}))
    return max(end.reaped_ns - start.reaped_ns - gone, 0)


def _children_used(start: dict[int, int] | None, end: dict[int, int] | None) -> int:
    """What the child processes alive at the window's end used in it (one started in it, all
    its CPU)."""
    if not end:
        return 0
    before = start or {}
    return sum(max(ns - before.get(pid, 0), 0) for pid, ns in end.items())
